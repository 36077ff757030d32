//! Where the demo's counters left off: the last value of each counter series, so that the live
//! continuation's series go on from the seeded ones (a counter never goes back) instead of starting from
//! the generators' random origins.

use std::collections::BTreeMap;

/// Counter names the generators write (dcgm-exporter, rdma_exporter, the burst agent, R-Pingmesh,
/// node_exporter and the Lustre exporter).
pub const COUNTERS: [&str; 22] = [
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "rdma_port_xmit_data_total",
    "rdma_port_rcv_data_total",
    "rdma_rp_cnp_handled_total",
    "rdma_roce_pfc_pause_frames_total",
    "rdma_out_of_sequence_total",
    "nic_tx_burst_seconds_total",
    "nic_rx_burst_seconds_total",
    "rpingmesh_probe_total",
    "rpingmesh_probe_success_total",
    "rpingmesh_network_rtt_ns_bucket",
    "node_cpu_seconds_total",
    "node_pressure_memory_waiting_seconds_total",
    "node_pressure_io_waiting_seconds_total",
    "node_network_receive_bytes_total",
    "node_network_transmit_bytes_total",
    "lustre_read_bytes_total",
    "lustre_write_bytes_total",
    "lustre_job_read_bytes_total",
    "lustre_job_write_bytes_total",
    "lustre_job_read_samples_total",
    "lustre_job_write_samples_total",
];

/// The last value of counter series, keyed by their metric name and labels. Empty: every counter
/// starts where its generator draws it (the batch seeding).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resume {
    last: BTreeMap<String, f64>,
}

impl Resume {
    /// The key of a series from its labels (`__name__` included), independent of their order.
    pub fn key<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
        let mut pairs: Vec<(&str, &str)> = labels.into_iter().collect();
        pairs.sort_unstable();
        pairs.iter().map(|(name, value)| format!("{name}={value:?}")).collect::<Vec<_>>().join(",")
    }

    /// The key of a series written as a JSON object of labels.
    pub fn key_of_json(labels: &serde_json::Value) -> String {
        let pairs =
            labels.as_object().into_iter().flatten().filter_map(|(name, value)| Some((name.as_str(), value.as_str()?)));
        Self::key(pairs)
    }

    /// Remembers a series' last value.
    pub fn set(&mut self, key: String, value: f64) {
        self.last.insert(key, value);
    }

    /// Where the counter labelled `labels` goes on from: its last value, else `drawn`.
    pub fn start(&self, labels: &serde_json::Value, drawn: f64) -> f64 {
        self.last.get(&Self::key_of_json(labels)).copied().unwrap_or(drawn)
    }

    /// How many series it knows.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether it knows none.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Takes the last value of every counter series in JSON lines of VictoriaMetrics' import format.
    pub fn absorb_json_lines(&mut self, body: &str) {
        for line in body.lines() {
            let Ok(series) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let name = series["metric"]["__name__"].as_str().unwrap_or_default();
            if !COUNTERS.contains(&name) {
                continue;
            }
            if let Some(last) = series["values"].as_array().and_then(|values| values.last()).and_then(|v| v.as_f64()) {
                self.set(Self::key_of_json(&series["metric"]), last);
            }
        }
    }
}
