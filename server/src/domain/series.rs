//! The series catalogue: which metrics and labels real exporters emit (dcgm-exporter, rdma_exporter,
//! node_exporter, ipmi_exporter, the Lustre exporter), with the defaults of
//! their documentation and per-site overrides from the config.

use serde::{Deserialize, Serialize};

use super::promql::{LabelName, MetricName};

/// How a metric's raw value becomes the value shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Shown as sampled, times `scale`.
    Gauge,
    /// A counter: shown as its per-second rate, times `scale`.
    Counter,
}

/// One metric of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// Our key (`gpu_util`), stable across sites.
    pub key: String,
    /// The exporter's metric name at this site.
    pub name: MetricName,
    pub kind: Kind,
    /// Multiplier from the exporter's unit to `unit` (0–1 ratios → ×100 for %, dwords → ×4 for bytes).
    pub scale: f64,
    pub unit: String,
}

/// The catalogue of one site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeriesCatalog {
    /// Seconds between scrapes of the exporters (the finest step a report uses).
    pub scrape_interval_s: u64,
    /// Label keys that carry the node name on GPU series; dcgm-exporter ≤ 4.5 says `Hostname`,
    /// ≥ 4.6 says `hostname`: both are queried.
    pub gpu_host_labels: Vec<LabelName>,
    pub gpu_index_label: LabelName,
    pub gpu_uuid_label: LabelName,
    /// dcgm-exporter's HPC job-mapping label.
    pub gpu_job_label: LabelName,
    /// Label carrying the node on RDMA series (a scrape target `host:port` is accepted).
    pub rdma_host_label: LabelName,
    pub gpu_metrics: Vec<MetricSpec>,
    /// Framebuffer free memory (with `fb_used` it gives the capacity).
    pub fb_free: MetricName,
    /// Energy counter in millijoules since boot.
    pub energy_mj: MetricName,
    /// Value of the last XID error (a gauge with `err_code`/`err_msg` labels).
    pub xid: MetricName,
    pub rdma_metrics: Vec<MetricSpec>,
    /// Infrastructure faults read for "was the failure mine?" (failure attribution).
    pub faults: FaultSeries,
    /// Short-interval peak rates exported by a node agent next to the counters (micro-bursts).
    pub bursts: BurstSeries,
    /// The node beside its GPUs: node_exporter (CPU, memory, pressure, network) and ipmi_exporter (power).
    pub node: NodeSeries,
    /// Lustre I/O: per job from the servers' job statistics, or per node from the clients.
    pub lustre: LustreSeries,
    /// A node's GPU health counters beyond the faults (the node page and the grid's badges).
    pub health: HealthSeries,
}

/// dcgm-exporter's health fields (a custom counters CSV enables the ones the default list comments
/// out), as the exporter names them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSeries {
    /// NVML's clocks-event reasons bitmask (field 112); DCGM ≥ 4.7 names it
    /// `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`.
    pub clock_event_reasons: MetricName,
    /// ECC single-/double-bit error counts since the driver loaded (volatile) and over the GPU's life
    /// (aggregate) (fields 310–313).
    pub ecc_sbe_volatile: MetricName,
    pub ecc_dbe_volatile: MetricName,
    pub ecc_sbe_aggregate: MetricName,
    pub ecc_dbe_aggregate: MetricName,
    /// Rows remapped after correctable errors (field 394; the uncorrectable ones are a fault series).
    pub correctable_remapped_rows: MetricName,
    /// 1 while a remap waits for a GPU reset (field 396).
    pub row_remap_pending: MetricName,
    /// Nanoseconds the clocks were held down by the power limit / by temperature (counters).
    pub power_violation_ns: MetricName,
    pub thermal_violation_ns: MetricName,
}

impl Default for HealthSeries {
    fn default() -> Self {
        Self {
            clock_event_reasons: name("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
            ecc_sbe_volatile: name("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"),
            ecc_dbe_volatile: name("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
            ecc_sbe_aggregate: name("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"),
            ecc_dbe_aggregate: name("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"),
            correctable_remapped_rows: name("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
            row_remap_pending: name("DCGM_FI_DEV_ROW_REMAP_PENDING"),
            power_violation_ns: name("DCGM_FI_DEV_POWER_VIOLATION"),
            thermal_violation_ns: name("DCGM_FI_DEV_THERMAL_VIOLATION"),
        }
    }
}

/// node_exporter's and ipmi_exporter's series, as those exporters name them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSeries {
    /// Label carrying the node on node_exporter series (`instance="gpu001:9100"` is accepted).
    pub host_label: LabelName,
    /// CPU seconds per `cpu` and `mode` (counter).
    pub cpu_seconds: MetricName,
    pub cpu_mode_label: LabelName,
    pub memory_total: MetricName,
    pub memory_available: MetricName,
    /// Pressure stall information: seconds some task waited on memory / on I/O (counters).
    pub memory_pressure: MetricName,
    pub io_pressure: MetricName,
    pub network_receive: MetricName,
    pub network_transmit: MetricName,
    pub network_device_label: LabelName,
    /// Interfaces left out of the node's network traffic (loopback, container bridges).
    pub network_devices_ignored: Vec<String>,
    /// ipmi_exporter's DCMI power reading of the whole node, in watts (gauge).
    pub power: MetricName,
    /// Label carrying the node on ipmi_exporter series: sites that scrape BMCs remotely relabel the
    /// target to the node's name.
    pub power_host_label: LabelName,
}

impl Default for NodeSeries {
    fn default() -> Self {
        Self {
            host_label: label("instance"),
            cpu_seconds: name("node_cpu_seconds_total"),
            cpu_mode_label: label("mode"),
            memory_total: name("node_memory_MemTotal_bytes"),
            memory_available: name("node_memory_MemAvailable_bytes"),
            memory_pressure: name("node_pressure_memory_waiting_seconds_total"),
            io_pressure: name("node_pressure_io_waiting_seconds_total"),
            network_receive: name("node_network_receive_bytes_total"),
            network_transmit: name("node_network_transmit_bytes_total"),
            network_device_label: label("device"),
            network_devices_ignored: vec!["lo".into()],
            power: name("ipmi_dcmi_power_consumption_watts"),
            power_host_label: label("instance"),
        }
    }
}

/// The Lustre exporter's series (HPE `lustre_exporter` names): job statistics on the OSTs, keyed by
/// the `jobid` Lustre takes from `jobid_var=SLURM_JOB_ID`, and the clients' own totals per node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LustreSeries {
    pub job_read_bytes: MetricName,
    pub job_write_bytes: MetricName,
    /// Read and write operations per job (the job_stats `samples`).
    pub job_read_ops: MetricName,
    pub job_write_ops: MetricName,
    pub job_label: LabelName,
    /// Bytes read and written by the node's client (`component="client"`), all jobs of the node together.
    pub client_read_bytes: MetricName,
    pub client_write_bytes: MetricName,
    pub component_label: LabelName,
    pub host_label: LabelName,
}

impl Default for LustreSeries {
    fn default() -> Self {
        Self {
            job_read_bytes: name("lustre_job_read_bytes_total"),
            job_write_bytes: name("lustre_job_write_bytes_total"),
            job_read_ops: name("lustre_job_read_samples_total"),
            job_write_ops: name("lustre_job_write_samples_total"),
            job_label: label("jobid"),
            client_read_bytes: name("lustre_read_bytes_total"),
            client_write_bytes: name("lustre_write_bytes_total"),
            component_label: label("component"),
            host_label: label("instance"),
        }
    }
}

/// Series that reveal infrastructure faults during a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultSeries {
    /// rdma_exporter: times the port's link went down (counter).
    pub link_downed: MetricName,
    /// rdma_exporter: physical-layer symbol errors (counter).
    pub symbol_errors: MetricName,
    /// dcgm-exporter: rows remapped after uncorrectable ECC errors (counter).
    pub uncorrectable_remapped_rows: MetricName,
    /// dcgm-exporter: 1 when a row remap failed (gauge).
    pub row_remap_failure: MetricName,
    /// R-Pingmesh (OTel → VictoriaMetrics): probes sent and answered per ToR pair (counters).
    pub pingmesh_probes: MetricName,
    pub pingmesh_successes: MetricName,
    /// R-Pingmesh network RTT histogram in ns (`_bucket` series with `le`).
    pub pingmesh_rtt_bucket: MetricName,
    /// Labels of a ping-mesh path's ends.
    pub pingmesh_source_label: LabelName,
    pub pingmesh_target_label: LabelName,
    /// Loss over a step above this share is evidence (above 5× it, strong evidence).
    pub loss_threshold: f64,
    /// A p99 RTT above this (ns) is weak evidence of a congested or failing path.
    pub rtt_p99_threshold_ns: f64,
}

impl Default for FaultSeries {
    fn default() -> Self {
        Self {
            link_downed: name("rdma_link_downed_total"),
            symbol_errors: name("rdma_symbol_error_total"),
            uncorrectable_remapped_rows: name("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
            row_remap_failure: name("DCGM_FI_DEV_ROW_REMAP_FAILURE"),
            pingmesh_probes: name("rpingmesh_probe_total"),
            pingmesh_successes: name("rpingmesh_probe_success_total"),
            pingmesh_rtt_bucket: name("rpingmesh_network_rtt_ns_bucket"),
            pingmesh_source_label: label("source_tor"),
            pingmesh_target_label: label("target_tor"),
            loss_threshold: 0.01,
            rtt_p99_threshold_ns: 100_000.0,
        }
    }
}

/// Peak-rate series a node agent sampling every 100 ms exports (max of the 100 ms rates since the last
/// scrape, in bytes/s, labels `device`, `port` and the node's `instance`), and the time it spent above a
/// threshold of line rate (counter of seconds). Counters alone cannot show a burst: without these the
/// report says the peak is unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BurstSeries {
    pub tx_peak: MetricName,
    pub rx_peak: MetricName,
    pub tx_seconds_above: MetricName,
    pub rx_seconds_above: MetricName,
    /// Line rate of one port in bytes/s (400 Gb/s = 5e10).
    pub line_rate_bytes_per_s: f64,
    /// Share of line rate that counts as a burst (the agent's `threshold` label).
    pub threshold: f64,
}

impl Default for BurstSeries {
    fn default() -> Self {
        Self {
            tx_peak: name("nic_tx_bytes_per_second_max"),
            rx_peak: name("nic_rx_bytes_per_second_max"),
            tx_seconds_above: name("nic_tx_burst_seconds_total"),
            rx_seconds_above: name("nic_rx_burst_seconds_total"),
            line_rate_bytes_per_s: 5e10,
            threshold: 0.9,
        }
    }
}

fn name(text: &str) -> MetricName {
    text.parse().unwrap_or_else(|_| panic!("default metric name {text} is valid"))
}

fn metric(key: &str, name: &str, kind: Kind, scale: f64, unit: &str) -> MetricSpec {
    MetricSpec {
        key: key.to_string(),
        // The defaults are literals checked by the `defaults_are_valid` test.
        name: name.parse().unwrap_or_else(|_| panic!("default metric name {name} is valid")),
        kind,
        scale,
        unit: unit.to_string(),
    }
}

fn label(name: &str) -> LabelName {
    name.parse().unwrap_or_else(|_| panic!("default label {name} is valid"))
}

impl Default for SeriesCatalog {
    fn default() -> Self {
        Self {
            scrape_interval_s: 15,
            gpu_host_labels: vec![label("Hostname"), label("hostname")],
            gpu_index_label: label("gpu"),
            gpu_uuid_label: label("UUID"),
            gpu_job_label: label("hpc_job"),
            rdma_host_label: label("instance"),
            gpu_metrics: vec![
                metric("gpu_util", "DCGM_FI_DEV_GPU_UTIL", Kind::Gauge, 1.0, "%"),
                metric("sm_active", "DCGM_FI_PROF_SM_ACTIVE", Kind::Gauge, 100.0, "%"),
                metric("tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Kind::Gauge, 100.0, "%"),
                metric("dram_active", "DCGM_FI_PROF_DRAM_ACTIVE", Kind::Gauge, 100.0, "%"),
                metric("fb_used", "DCGM_FI_DEV_FB_USED", Kind::Gauge, 1.0, "MiB"),
                metric("power", "DCGM_FI_DEV_POWER_USAGE", Kind::Gauge, 1.0, "W"),
                metric("temperature", "DCGM_FI_DEV_GPU_TEMP", Kind::Gauge, 1.0, "°C"),
            ],
            fb_free: "DCGM_FI_DEV_FB_FREE".parse().unwrap_or_else(|_| panic!("valid default")),
            energy_mj: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION".parse().unwrap_or_else(|_| panic!("valid default")),
            xid: "DCGM_FI_DEV_XID_ERRORS".parse().unwrap_or_else(|_| panic!("valid default")),
            rdma_metrics: vec![
                metric("rdma_tx", "rdma_port_xmit_data_total", Kind::Counter, 4.0, "B/s"),
                metric("rdma_rx", "rdma_port_rcv_data_total", Kind::Counter, 4.0, "B/s"),
                metric("cnp_handled", "rdma_rp_cnp_handled_total", Kind::Counter, 1.0, "/s"),
                metric("pfc_pause", "rdma_roce_pfc_pause_frames_total", Kind::Counter, 1.0, "/s"),
                metric("out_of_sequence", "rdma_out_of_sequence_total", Kind::Counter, 1.0, "/s"),
            ],
            faults: FaultSeries::default(),
            bursts: BurstSeries::default(),
            node: NodeSeries::default(),
            lustre: LustreSeries::default(),
            health: HealthSeries::default(),
        }
    }
}

impl SeriesCatalog {
    pub fn gpu_metric(&self, key: &str) -> Option<&MetricSpec> {
        self.gpu_metrics.iter().find(|spec| spec.key == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_follow_the_exporters() {
        let catalog = SeriesCatalog::default();
        assert_eq!(catalog.gpu_metric("gpu_util").map(|m| m.name.as_str()), Some("DCGM_FI_DEV_GPU_UTIL"));
        assert_eq!(catalog.rdma_metrics[0].scale, 4.0, "rdma_exporter counts 4-byte words");
        assert_eq!(catalog.gpu_host_labels.len(), 2);
    }
}
