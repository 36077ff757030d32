//! Demo telemetry: dcgm-exporter and rdma_exporter series that agree with the jobs, imported into
//! VictoriaMetrics with its JSON-lines import API. Names, labels and units are those the real
//! exporters emit (`shared/reference/datasources.md` §1–2): `DCGM_FI_DEV_GPU_UTIL` in %, the
//! `DCGM_FI_PROF_*` ratios in 0–1, memory in MiB, power in W, energy in mJ since boot, XID as the value
//! of the last error, RDMA data counters in 4-byte words. Next to them: R-Pingmesh's probe counters and
//! RTT histogram per ToR pair (§3.2) and a node agent's 100 ms peak rates (§7) on part of the nodes.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use slurmlens::sources::victoriametrics::VictoriaMetrics;

/// H100 80GB HBM3 as dcgm-exporter reports it.
const FB_TOTAL_MIB: f64 = 81_559.0;
const MODEL: &str = "NVIDIA H100 80GB HBM3";
const DRIVER: &str = "580.105.08";

/// What a job does with a GPU, which shapes its series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Profile {
    /// Steady compute with a communication phase every `period_s` (tensor activity drops, util stays high).
    Training { period_s: i64 },
    /// Saw-tooth utilisation: the GPU waits for the data loader.
    InputBound,
    /// High utilisation, almost no tensor-core work (FP32 without TF32/AMP).
    Fp32,
    /// Allocated but unused.
    Idle,
    /// Short bursts of inference or evaluation.
    Bursty,
    /// Runs like training until `at`, when XID 79 takes the GPU off the bus: no samples after, until the
    /// workload's end (the node's reboot).
    XidCrash { at: i64 },
    /// Runs like training until `at`, when the application dies on an illegal address: XID 31 (GPU memory
    /// page fault) from `at`, the GPU idle but healthy until the job ends.
    AppCrash { at: i64 },
}

/// One job holding one GPU for a while.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuWorkload {
    pub node: String,
    pub gpu: u16,
    pub job_id: u32,
    pub start: i64,
    pub end: i64,
    pub profile: Profile,
    /// Nodes of the job: multi-node jobs drive RDMA traffic.
    pub multi_node: bool,
    /// A span `[from, to)` in which the job's network path is lossy: all-reduces stall, RDMA goodput
    /// drops and packets arrive out of sequence.
    pub degraded: Option<(i64, i64)>,
}

/// A deterministic UUID for a GPU, shaped like NVIDIA's.
pub fn gpu_uuid(node: &str, gpu: u16) -> String {
    let hash = fnv(&format!("{node}/{gpu}"));
    let hex = format!("{hash:016x}{:016x}", hash.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15);
    format!("GPU-{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// One sample of every GPU field at one instant.
struct GpuSample {
    util: f64,
    sm: f64,
    tensor: f64,
    dram: f64,
    fb_used: f64,
    power: f64,
    temp: f64,
}

fn quiet(rng: &mut StdRng) -> GpuSample {
    GpuSample {
        util: 0.0,
        sm: 0.0,
        tensor: 0.0,
        dram: 0.0,
        fb_used: 0.0,
        power: 68.0 + rng.gen_range(0.0..6.0),
        temp: 31.0 + rng.gen_range(0.0..3.0),
    }
}

fn sample(profile: Profile, since_start: i64, degraded: bool, rng: &mut StdRng) -> GpuSample {
    let noise = |rng: &mut StdRng, spread: f64| rng.gen_range(-spread..spread);
    match profile {
        Profile::Training { .. } | Profile::XidCrash { .. } | Profile::AppCrash { .. } => {
            let period = if let Profile::Training { period_s } = profile { period_s.max(30) } else { 60 };
            // The last fifth of every step is the all-reduce: NCCL kernels keep "util" up, tensors idle.
            // On a lossy path the all-reduce waits for retransmissions and takes most of the step.
            let share = if degraded { 2 } else { 4 };
            let communicating = since_start % period > period * share / 5;
            let tensor = if communicating { 0.04 } else { 0.46 } + noise(rng, 0.03);
            GpuSample {
                util: (if communicating { 97.0 } else { 99.0 } + noise(rng, 1.0)).min(100.0),
                sm: if communicating { 0.35 } else { 0.82 } + noise(rng, 0.04),
                tensor: tensor.max(0.0),
                dram: 0.38 + noise(rng, 0.05),
                fb_used: 71_200.0 + noise(rng, 300.0),
                power: if communicating { 420.0 } else { 655.0 } + noise(rng, 25.0),
                temp: 68.0 + noise(rng, 3.0),
            }
        }
        Profile::InputBound => {
            let phase = (since_start % 40) as f64 / 40.0;
            let util = if phase < 0.45 { 92.0 } else { 4.0 } + noise(rng, 4.0);
            GpuSample {
                util: util.clamp(0.0, 100.0),
                sm: util / 100.0 * 0.7,
                tensor: util / 100.0 * 0.3,
                dram: util / 100.0 * 0.25,
                fb_used: 38_000.0 + noise(rng, 500.0),
                power: 150.0 + util * 3.5 + noise(rng, 20.0),
                temp: 52.0 + noise(rng, 4.0),
            }
        }
        Profile::Fp32 => GpuSample {
            util: (98.0 + noise(rng, 1.5)).min(100.0),
            sm: 0.9 + noise(rng, 0.03),
            tensor: (0.02 + noise(rng, 0.01)).max(0.0),
            dram: 0.55 + noise(rng, 0.05),
            fb_used: 52_000.0 + noise(rng, 400.0),
            power: 520.0 + noise(rng, 25.0),
            temp: 64.0 + noise(rng, 3.0),
        },
        Profile::Idle => GpuSample {
            util: 0.0,
            sm: 0.0,
            tensor: 0.0,
            dram: 0.0,
            fb_used: 510.0,
            power: 72.0 + noise(rng, 3.0),
            temp: 33.0 + noise(rng, 2.0),
        },
        Profile::Bursty => {
            let busy = (since_start / 15) % 4 == 0;
            GpuSample {
                util: if busy { 85.0 + noise(rng, 10.0) } else { 0.0 },
                sm: if busy { 0.6 } else { 0.0 },
                tensor: if busy { 0.3 + noise(rng, 0.05) } else { 0.0 },
                dram: if busy { 0.3 } else { 0.0 },
                fb_used: 24_000.0 + noise(rng, 200.0),
                power: if busy { 480.0 } else { 95.0 } + noise(rng, 20.0),
                temp: 45.0 + noise(rng, 4.0),
            }
        }
    }
}

/// JSON lines for the GPUs in `gpus` over `[from, to]` every `step_s`, driven by `workloads`.
pub fn gpu_series_json(
    gpus: &[(String, u16)],
    workloads: &[GpuWorkload],
    from: i64,
    to: i64,
    step_s: i64,
    seed: u64,
) -> (String, usize) {
    let mut by_gpu: BTreeMap<(&str, u16), Vec<&GpuWorkload>> = BTreeMap::new();
    for workload in workloads {
        by_gpu.entry((workload.node.as_str(), workload.gpu)).or_default().push(workload);
    }
    let timestamps: Vec<i64> = (from..=to).step_by(step_s.max(1) as usize).collect();
    let mut out = String::new();
    let mut samples = 0;
    for (node, gpu) in gpus {
        let mut rng = StdRng::seed_from_u64(seed ^ u64::from(*gpu) ^ (node.len() as u64) << 20 ^ fnv(node));
        let mut held = by_gpu.get(&(node.as_str(), *gpu)).cloned().unwrap_or_default();
        held.sort_by_key(|workload| workload.start);
        let mut fields: [Vec<f64>; 10] = Default::default();
        let mut stamps: Vec<i64> = Vec::with_capacity(timestamps.len());
        // Change points of the last XID: (time, code).
        let mut xid_points: Vec<(i64, u32)> = Vec::new();
        // An XID is logged at its instant, whatever the scrape times: XID 79 (the GPU is off the bus and
        // reports nothing else until the reboot at the workload's end) or an application's page fault, XID
        // 31 (repeated while the job lasts, as the exporter keeps reporting the last XID). Back to 0 at the
        // first scrape after the workload.
        for workload in &held {
            let (at, code) = match workload.profile {
                Profile::XidCrash { at } => (at, 79),
                Profile::AppCrash { at } => (at, 31),
                _ => continue,
            };
            if at < from || at > to {
                continue;
            }
            xid_points.push((at, code));
            if code == 31 {
                xid_points.extend(timestamps.iter().filter(|&&t| t > at && t < workload.end).map(|&t| (t, 31)));
            }
            if let Some(&after) = timestamps.iter().find(|&&t| t >= workload.end) {
                xid_points.push((after, 0));
            }
        }
        let mut energy_mj = 1.7e12 + rng.gen_range(0.0..1e11);
        for &t in &timestamps {
            let workload = held.iter().find(|w| w.start <= t && t < w.end);
            if let Some(Profile::XidCrash { at }) = workload.map(|w| w.profile)
                && t >= at
            {
                continue;
            }
            let value = match workload {
                Some(workload) => match workload.profile {
                    // The process is gone; the GPU is fine and idles until Slurm ends the job.
                    Profile::AppCrash { at } if t >= at => quiet(&mut rng),
                    profile => {
                        let degraded = workload.degraded.is_some_and(|(from, to)| from <= t && t < to);
                        sample(profile, t - workload.start, degraded, &mut rng)
                    }
                },
                None => quiet(&mut rng),
            };
            energy_mj += value.power * step_s as f64 * 1000.0;
            let row = [
                value.util.round(),
                value.sm.clamp(0.0, 1.0),
                value.tensor.clamp(0.0, 1.0),
                value.dram.clamp(0.0, 1.0),
                value.fb_used.round(),
                (FB_TOTAL_MIB - value.fb_used).round(),
                value.power,
                value.temp.round(),
                energy_mj.round(),
                0.0,
            ];
            for (field, v) in fields.iter_mut().zip(row) {
                field.push(v);
            }
            stamps.push(t * 1000);
        }
        let names = [
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_PROF_SM_ACTIVE",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        ];
        let uuid = gpu_uuid(node, *gpu);
        for (name, values) in names.iter().zip(&fields) {
            let line = serde_json::json!({
                "metric": {
                    "__name__": name, "gpu": gpu.to_string(), "UUID": uuid, "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + 0x10 * u32::from(*gpu)),
                    "device": format!("nvidia{gpu}"), "modelName": MODEL, "Hostname": node, "DCGM_FI_DRIVER_VERSION": DRIVER,
                },
                "values": values,
                "timestamps": stamps,
            });
            out.push_str(&line.to_string());
            out.push('\n');
            samples += values.len();
        }
        // dcgm-exporter always exports the last XID (0 = "No Error"); an error shows as its code.
        xid_points.sort_unstable();
        xid_points.dedup_by_key(|point| point.0);
        let mut xid_line_values = vec![0.0; 1];
        let mut xid_line_stamps = vec![stamps.first().copied().unwrap_or(from * 1000)];
        for &(t, code) in &xid_points {
            xid_line_stamps.push(t * 1000);
            xid_line_values.push(f64::from(code));
        }
        for (code, message) in
            [(0.0, "No Error"), (31.0, "GPU memory page fault"), (79.0, "GPU has fallen off the bus")]
        {
            let (ts, vs): (Vec<i64>, Vec<f64>) = xid_line_stamps
                .iter()
                .zip(&xid_line_values)
                .filter(|&(_, v)| *v == code)
                .map(|(t, v)| (*t, *v))
                .unzip();
            if ts.is_empty() {
                continue;
            }
            let line = serde_json::json!({
                "metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": gpu.to_string(), "UUID": uuid, "device": format!("nvidia{gpu}"),
                           "modelName": MODEL, "Hostname": node, "err_code": format!("{code}"), "err_msg": message},
                "values": vs, "timestamps": ts,
            });
            out.push_str(&line.to_string());
            out.push('\n');
            samples += line["values"].as_array().map_or(0, Vec::len);
        }
    }
    (out, samples)
}

/// A stable hash of a name (seeds, client ids).
pub(super) fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Appends one series in VictoriaMetrics' JSON import format; returns its samples.
pub(super) fn line(out: &mut String, labels: serde_json::Value, values: &[f64], stamps: &[i64]) -> usize {
    out.push_str(&serde_json::json!({"metric": labels, "values": values, "timestamps": stamps}).to_string());
    out.push('\n');
    values.len()
}

/// Line rate of one 400 Gb/s RoCE port in bytes/s.
const LINE_RATE: f64 = 5e10;
/// Share of line rate above which the node agent counts burst seconds (its `threshold` label).
const BURST_THRESHOLD: f64 = 0.9;

/// What one scrape interval of a port carried: the average rate (what the counters show) and the node
/// agent's view of it (the highest 100 ms rate and the time spent above the threshold).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PortInterval {
    bytes_per_s: f64,
    peak_bytes_per_s: f64,
    seconds_above: f64,
}

/// One scrape interval of `step_s` seconds. Communication-heavy training averages 5–15 GB/s but its
/// all-reduces run at line rate for a few hundred ms; a lossy path caps the bursts; quiet ports trickle.
fn port_interval(active: bool, degraded: bool, step_s: i64, rng: &mut StdRng) -> PortInterval {
    let step = step_s.max(1) as f64;
    if !active {
        let bytes_per_s = rng.gen_range(1e5..1e6);
        return PortInterval {
            bytes_per_s,
            peak_bytes_per_s: bytes_per_s * rng.gen_range(2.0..20.0),
            seconds_above: 0.0,
        };
    }
    if degraded {
        let bytes_per_s = rng.gen_range(2e9..5e9);
        return PortInterval {
            bytes_per_s,
            peak_bytes_per_s: rng.gen_range(2e10_f64..3.5e10).max(bytes_per_s),
            seconds_above: 0.0,
        };
    }
    let bytes_per_s = rng.gen_range(5e9..15e9);
    let threshold = LINE_RATE * BURST_THRESHOLD;
    if rng.gen_bool(0.85) {
        // All-reduce phases: 100 ms windows at 90–100 % of line rate, in 100 ms units; the time at the
        // threshold cannot carry more bytes than the interval did.
        let wanted = step * rng.gen_range(0.03..0.12);
        let possible = bytes_per_s * step / threshold * 0.9;
        let seconds_above = (wanted.min(possible) * 10.0).floor() / 10.0;
        PortInterval { bytes_per_s, peak_bytes_per_s: rng.gen_range(threshold..LINE_RATE), seconds_above }
    } else {
        PortInterval { bytes_per_s, peak_bytes_per_s: rng.gen_range(2.5e10..threshold), seconds_above: 0.0 }
    }
}

/// rdma_exporter counters of `nodes` over `[from, to]`: traffic while multi-node jobs run on the node.
/// Nodes in `burst_agents` also run the 100 ms sampler: peak-rate gauges and burst-seconds counters.
/// Returns the JSON lines, the counter samples and the burst samples.
pub fn rdma_series_json(
    nodes: &[String],
    workloads: &[GpuWorkload],
    burst_agents: &BTreeSet<String>,
    from: i64,
    to: i64,
    step_s: i64,
    seed: u64,
) -> (String, usize, usize) {
    // Per node: `[start, end)` of the multi-node workloads, with their lossy span.
    type Spans = Vec<(i64, i64, Option<(i64, i64)>)>;
    let mut busy: BTreeMap<&str, Spans> = BTreeMap::new();
    for workload in workloads.iter().filter(|w| w.multi_node) {
        // A node whose GPU fell off the bus is down until the workload's end: no traffic.
        let end = match workload.profile {
            Profile::XidCrash { at } => at.min(workload.end),
            _ => workload.end,
        };
        busy.entry(workload.node.as_str()).or_default().push((workload.start, end, workload.degraded));
    }
    let mut out = String::new();
    let (mut samples, mut burst_samples) = (0, 0);
    for node in nodes {
        let mut rng = StdRng::seed_from_u64(seed ^ fnv(node));
        let spans = busy.get(node.as_str()).cloned().unwrap_or_default();
        let with_agent = burst_agents.contains(node);
        let mut counters = [rng.gen_range(1e12..9e12), rng.gen_range(1e12..9e12), 1e6, 2e5, 1e3];
        let mut series: [Vec<f64>; 5] = Default::default();
        // tx peak, rx peak, tx seconds above, rx seconds above
        let mut bursts: [Vec<f64>; 4] = Default::default();
        let mut above = [rng.gen_range(0.0..500.0_f64).round(), rng.gen_range(0.0..500.0_f64).round()];
        let mut stamps = Vec::new();
        for t in (from..=to).step_by(step_s.max(1) as usize) {
            let span = spans.iter().find(|&&(start, end, _)| start <= t && t < end);
            let active = span.is_some();
            let degraded = span.and_then(|span| span.2).is_some_and(|(from, to)| from <= t && t < to);
            let tx = port_interval(active, degraded, step_s, &mut rng);
            let rx = PortInterval { bytes_per_s: tx.bytes_per_s * rng.gen_range(0.95..1.05), ..tx };
            let rx = PortInterval { peak_bytes_per_s: rx.peak_bytes_per_s.max(rx.bytes_per_s), ..rx };
            // rdma_exporter counts 4-byte words.
            counters[0] += tx.bytes_per_s * step_s as f64 / 4.0;
            counters[1] += rx.bytes_per_s * step_s as f64 / 4.0;
            counters[2] += if active { rng.gen_range(200.0..3000.0) * step_s as f64 } else { 0.0 };
            counters[3] += if active && rng.gen_bool(0.1) { rng.gen_range(10.0..500.0) } else { 0.0 };
            counters[4] += if degraded {
                rng.gen_range(2000.0..20000.0) * step_s as f64
            } else if active && rng.gen_bool(0.02) {
                rng.gen_range(1.0..20.0)
            } else {
                0.0
            };
            for (values, counter) in series.iter_mut().zip(counters) {
                values.push(counter.round());
            }
            if with_agent {
                above[0] += tx.seconds_above;
                above[1] += rx.seconds_above;
                for (values, value) in bursts.iter_mut().zip([
                    tx.peak_bytes_per_s.round(),
                    rx.peak_bytes_per_s.round(),
                    (above[0] * 10.0).round() / 10.0,
                    (above[1] * 10.0).round() / 10.0,
                ]) {
                    values.push(value);
                }
            }
            stamps.push(t * 1000);
        }
        let names = [
            "rdma_port_xmit_data_total",
            "rdma_port_rcv_data_total",
            "rdma_rp_cnp_handled_total",
            "rdma_roce_pfc_pause_frames_total",
            "rdma_out_of_sequence_total",
        ];
        let labels = |name: &str| serde_json::json!({"__name__": name, "device": "mlx5_0", "port": "1", "instance": format!("{node}:9879"), "job": "rdma"});
        for (name, values) in names.iter().zip(&series) {
            let mut labels = labels(name);
            if *name == "rdma_roce_pfc_pause_frames_total" {
                labels["netdev"] = "eth0".into();
                labels["direction"] = "rx".into();
                labels["priority"] = "3".into();
            }
            samples += line(&mut out, labels, values, &stamps);
        }
        if with_agent {
            let burst_names = [
                "nic_tx_bytes_per_second_max",
                "nic_rx_bytes_per_second_max",
                "nic_tx_burst_seconds_total",
                "nic_rx_burst_seconds_total",
            ];
            for (name, values) in burst_names.iter().zip(&bursts) {
                let mut labels = labels(name);
                if name.ends_with("_total") {
                    labels["threshold"] = format!("{BURST_THRESHOLD}").into();
                }
                burst_samples += line(&mut out, labels, values, &stamps);
            }
        }
    }
    (out, samples, burst_samples)
}

/// Seconds between R-Pingmesh's exports (the OTel periodic reader).
pub const PINGMESH_INTERVAL_S: i64 = 10;
/// Upper bounds (ns) of R-Pingmesh's network RTT histogram; `+Inf` follows.
const RTT_BUCKETS_NS: [f64; 11] = [100.0, 500.0, 1e3, 5e3, 1e4, 5e4, 1e5, 5e5, 1e6, 5e6, 1e7];

/// One probed path between two ToRs (`source == target`: the ToR mesh).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PingPath {
    pub source: String,
    pub target: String,
}

/// A path that loses probes and queues them for a while.
#[derive(Debug, Clone, PartialEq)]
pub struct LossyPath {
    pub path: PingPath,
    pub from: i64,
    pub to: i64,
    /// The job whose traffic crossed it then.
    pub job_id: u32,
}

impl LossyPath {
    /// Whether `path` crosses the faulty link (in either direction).
    pub fn covers(&self, path: &PingPath) -> bool {
        (self.path.source == path.source && self.path.target == path.target)
            || (self.path.source == path.target && self.path.target == path.source)
    }
}

/// The probed paths of a layout of racks: the ToR mesh of every rack, and both directions between racks
/// next to each other (R-Pingmesh's inter-ToR list samples other ToRs; neighbours always).
pub fn ping_paths(racks: &[String]) -> Vec<PingPath> {
    let mut paths = Vec::new();
    for (index, rack) in racks.iter().enumerate() {
        paths.push(PingPath { source: rack.clone(), target: rack.clone() });
        for other in [index.checked_sub(1), Some(index + 1)].into_iter().flatten() {
            if let Some(other) = racks.get(other) {
                paths.push(PingPath { source: rack.clone(), target: other.clone() });
            }
        }
    }
    paths
}

/// Network RTT (ns) of one answered probe: 3–8 µs on a healthy path, with a rare queueing tail; a
/// lossy path queues: p99 of a few hundred µs.
fn probe_rtt(lossy: bool, rng: &mut StdRng) -> f64 {
    let draw = rng.gen_range(0.0..1.0);
    if !lossy {
        return if draw < 0.995 { rng.gen_range(3e3..8e3) } else { rng.gen_range(1e4..4e4) };
    }
    if draw < 0.88 {
        rng.gen_range(3e3..8e3)
    } else if draw < 0.95 {
        rng.gen_range(1e4..1e5)
    } else if draw < 0.997 {
        rng.gen_range(1e5..5e5)
    } else {
        rng.gen_range(5e5..1e6)
    }
}

/// R-Pingmesh series of `paths` over `[from, to]` every [`PINGMESH_INTERVAL_S`]: probe counters and the
/// RTT histogram as the OTel collector writes them to VictoriaMetrics (`job="rpingmesh-agent"`,
/// `instance="<source ToR>-agent"`). ToR-mesh paths are probed 10 times a second, inter-ToR paths once.
/// On `lossy` in its window 3–8 % of probes are lost. Returns the JSON lines and the samples.
pub fn pingmesh_series_json(
    paths: &[PingPath],
    lossy: Option<&LossyPath>,
    from: i64,
    to: i64,
    seed: u64,
) -> (String, usize) {
    let mut out = String::new();
    let mut samples = 0;
    let timestamps: Vec<i64> = (from..=to).step_by(PINGMESH_INTERVAL_S as usize).collect();
    for path in paths {
        let mut rng = StdRng::seed_from_u64(seed ^ fnv(&format!("{}>{}", path.source, path.target)));
        let per_interval = if path.source == path.target { 10 } else { 1 } * PINGMESH_INTERVAL_S as u64;
        let lossy_window = lossy.filter(|lossy| lossy.covers(path)).map(|lossy| (lossy.from, lossy.to));
        // The agent has been up for a while: counters start where it left them at `from`.
        let mut total: u64 = rng.gen_range(1_000_000..50_000_000) / per_interval * per_interval;
        let mut success = total - total / 200_000;
        // Answers per bucket (not cumulative), so far as a healthy path: 40 % at most 5 µs, the rest of the
        // 3–8 µs up to 10 µs, the tail up to 50 µs.
        let mut buckets = [0u64; 12];
        buckets[3] = success * 398 / 1000;
        buckets[4] = success * 597 / 1000;
        buckets[5] = success - buckets[3] - buckets[4];
        let mut series: [Vec<f64>; 14] = std::array::from_fn(|_| Vec::with_capacity(timestamps.len()));
        for &t in &timestamps {
            let in_window = lossy_window.is_some_and(|(from, to)| from <= t && t < to);
            total += per_interval;
            if in_window {
                let loss = rng.gen_range(0.03..0.08);
                for _ in 0..per_interval {
                    if rng.gen_bool(loss) {
                        continue;
                    }
                    success += 1;
                    let rtt = probe_rtt(true, &mut rng);
                    buckets[RTT_BUCKETS_NS.iter().position(|&le| rtt <= le).unwrap_or(RTT_BUCKETS_NS.len())] += 1;
                }
            } else {
                // A healthy path: uniform 3–8 µs puts ~40 % at most 5 µs; a rare probe queues (up to 50 µs)
                // or, rarer still, is lost (a busy prober), far below any threshold. Drawn per interval,
                // not per probe: ten probes a second over two days is millions of draws per path.
                let lost = u64::from(rng.gen_bool(per_interval as f64 / 200_000.0));
                let queued = u64::from(rng.gen_bool((per_interval as f64 * 0.005).min(1.0)));
                let answered = per_interval - lost;
                let fast = ((answered - queued) as f64 * rng.gen_range(0.3..0.5)).round() as u64;
                success += answered;
                buckets[3] += fast;
                buckets[4] += answered - queued - fast;
                buckets[5] += queued;
            }
            series[0].push(total as f64);
            series[1].push(success as f64);
            let mut cumulative = 0;
            for (values, count) in series[2..].iter_mut().zip(buckets) {
                cumulative += count;
                values.push(cumulative as f64);
            }
        }
        let stamps: Vec<i64> = timestamps.iter().map(|t| t * 1000).collect();
        let labels = |name: &str| {
            serde_json::json!({"__name__": name, "source_tor": path.source, "target_tor": path.target,
                               "job": "rpingmesh-agent", "instance": format!("{}-agent", path.source)})
        };
        let mut lines =
            vec![(labels("rpingmesh_probe_total"), &series[0]), (labels("rpingmesh_probe_success_total"), &series[1])];
        for (index, values) in series[2..].iter().enumerate() {
            let mut bucket = labels("rpingmesh_network_rtt_ns_bucket");
            bucket["le"] = RTT_BUCKETS_NS.get(index).map_or_else(|| "+Inf".to_string(), |le| format!("{le}")).into();
            lines.push((bucket, values));
        }
        for (labels, values) in lines {
            samples += line(&mut out, labels, values, &stamps);
        }
    }
    (out, samples)
}

/// Imports series for every GPU of `nodes` (a steady training run on all of them) over the window.
/// Used by `slurmlens-dev bench report --import` on clusters without telemetry.
pub async fn import_flat(
    vm: &VictoriaMetrics,
    nodes: &[String],
    gpus_per_node: u16,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    step_s: i64,
) -> anyhow::Result<usize> {
    let (from, to) = (start.timestamp(), end.timestamp());
    let workloads: Vec<GpuWorkload> = nodes
        .iter()
        .flat_map(|node| {
            (0..gpus_per_node).map(move |gpu| GpuWorkload {
                node: node.clone(),
                gpu,
                job_id: 0,
                start: from,
                end: to + 1,
                profile: Profile::Training { period_s: 60 },
                multi_node: nodes.len() > 1,
                degraded: None,
            })
        })
        .collect();
    let (samples, _) =
        import_workloads(vm, nodes, gpus_per_node, &workloads, &BTreeSet::new(), from, to, step_s, 7).await?;
    Ok(samples)
}

/// Imports GPU and RDMA series for `nodes` in batches of a few nodes, so memory stays bounded (nodes in
/// `burst_agents` with their peak-rate series). Returns the samples and, of them, the burst samples.
#[expect(clippy::too_many_arguments, reason = "the window, resolution and seed are all independent knobs")]
pub async fn import_workloads(
    vm: &VictoriaMetrics,
    nodes: &[String],
    gpus_per_node: u16,
    workloads: &[GpuWorkload],
    burst_agents: &BTreeSet<String>,
    from: i64,
    to: i64,
    step_s: i64,
    seed: u64,
) -> anyhow::Result<(usize, usize)> {
    let (mut samples, mut bursts) = (0, 0);
    for batch in nodes.chunks(4) {
        let gpus: Vec<(String, u16)> =
            batch.iter().flat_map(|node| (0..gpus_per_node).map(move |gpu| (node.clone(), gpu))).collect();
        let relevant: Vec<GpuWorkload> =
            workloads.iter().filter(|w| batch.contains(&w.node) && w.end >= from && w.start <= to).cloned().collect();
        let (gpu_body, gpu_samples) = gpu_series_json(&gpus, &relevant, from, to, step_s, seed);
        let (rdma_body, rdma_samples, burst_samples) =
            rdma_series_json(batch, &relevant, burst_agents, from, to, step_s, seed);
        vm.import_json_lines(gpu_body + &rdma_body).await.context("importing demo telemetry")?;
        samples += gpu_samples + rdma_samples + burst_samples;
        bursts += burst_samples;
    }
    Ok((samples, bursts))
}

/// Imports the ping-mesh series of `paths` a few paths at a time. Returns the samples.
pub async fn import_pingmesh(
    vm: &VictoriaMetrics,
    paths: &[PingPath],
    lossy: Option<&LossyPath>,
    from: i64,
    to: i64,
    seed: u64,
) -> anyhow::Result<usize> {
    let mut samples = 0;
    for batch in paths.chunks(4) {
        let (body, batch_samples) = pingmesh_series_json(batch, lossy, from, to, seed);
        vm.import_json_lines(body).await.context("importing demo ping-mesh series")?;
        samples += batch_samples;
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_follow_the_workloads() {
        let workloads = vec![
            GpuWorkload {
                node: "gpu001".into(),
                gpu: 0,
                job_id: 1,
                start: 0,
                end: 600,
                profile: Profile::Idle,
                multi_node: false,
                degraded: None,
            },
            GpuWorkload {
                node: "gpu001".into(),
                gpu: 1,
                job_id: 2,
                start: 0,
                end: 600,
                profile: Profile::Fp32,
                multi_node: false,
                degraded: None,
            },
            GpuWorkload {
                node: "gpu001".into(),
                gpu: 2,
                job_id: 3,
                start: 0,
                end: 600,
                profile: Profile::XidCrash { at: 300 },
                multi_node: false,
                degraded: None,
            },
        ];
        let gpus: Vec<(String, u16)> = (0..3).map(|gpu| ("gpu001".to_string(), gpu)).collect();
        let (body, samples) = gpu_series_json(&gpus, &workloads, 0, 585, 15, 1);
        assert!(samples > 0);
        let lines: Vec<serde_json::Value> =
            body.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect();
        let util = |gpu: &str| -> Vec<f64> {
            lines
                .iter()
                .find(|l| l["metric"]["__name__"] == "DCGM_FI_DEV_GPU_UTIL" && l["metric"]["gpu"] == gpu)
                .and_then(|l| l["values"].as_array().cloned())
                .expect("util series")
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .collect()
        };
        assert!(util("0").iter().all(|&v| v == 0.0), "idle GPU");
        assert!(util("1").iter().all(|&v| v >= 95.0), "fp32 GPU busy");
        assert_eq!(util("2").len(), 20, "the crashed GPU stops reporting at the XID");
        assert!(
            lines
                .iter()
                .any(|l| l["metric"]["__name__"] == "DCGM_FI_DEV_XID_ERRORS" && l["metric"]["err_code"] == "79")
        );
        assert!(gpu_uuid("gpu001", 0).starts_with("GPU-") && gpu_uuid("gpu001", 0) != gpu_uuid("gpu001", 1));
    }

    fn parse(body: &str) -> Vec<serde_json::Value> {
        body.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect()
    }

    fn values(line: &serde_json::Value) -> Vec<f64> {
        line["values"].as_array().expect("values").iter().filter_map(serde_json::Value::as_f64).collect()
    }

    fn stamps(line: &serde_json::Value) -> Vec<i64> {
        line["timestamps"].as_array().expect("timestamps").iter().filter_map(serde_json::Value::as_i64).collect()
    }

    fn find<'a>(lines: &'a [serde_json::Value], labels: &[(&str, &str)]) -> &'a serde_json::Value {
        lines
            .iter()
            .find(|line| labels.iter().all(|(key, value)| line["metric"][*key] == *value))
            .unwrap_or_else(|| panic!("a series with {labels:?}"))
    }

    #[test]
    fn app_crash_shows_xid_31_and_an_idle_gpu_until_the_job_ends() {
        let workloads = vec![GpuWorkload {
            node: "gpu001".into(),
            gpu: 0,
            job_id: 9,
            start: 0,
            end: 600,
            profile: Profile::AppCrash { at: 596 },
            multi_node: false,
            degraded: None,
        }];
        let (body, _) = gpu_series_json(&[("gpu001".to_string(), 0)], &workloads, 0, 900, 15, 1);
        let lines = parse(&body);
        let util = values(find(&lines, &[("__name__", "DCGM_FI_DEV_GPU_UTIL")]));
        assert!(util[..39].iter().all(|&v| v >= 90.0), "busy before the fault: {util:?}");
        assert!(util[40..].iter().all(|&v| v == 0.0), "idle after it, and still reporting");
        assert_eq!(util.len(), 61, "a page fault does not take the GPU off the bus");
        let fault = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "31")]);
        assert_eq!(fault["metric"]["err_msg"], "GPU memory page fault");
        assert_eq!(stamps(fault)[0], 596_000, "XID 31 a few seconds before the job's end");
        assert!(values(fault).iter().all(|&v| v == 31.0));
        let cleared = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "0")]);
        assert!(stamps(cleared).contains(&600_000), "back to 0 once the job is gone");
        assert!(!lines.iter().any(|l| l["metric"]["err_code"] == "79"), "no infrastructure fault");
    }

    #[test]
    fn xid_79_is_logged_between_scrapes_and_the_gpu_is_silent_until_the_reboot() {
        let workloads = vec![GpuWorkload {
            node: "gpu001".into(),
            gpu: 0,
            job_id: 9,
            start: 0,
            end: 1800,
            profile: Profile::XidCrash { at: 895 },
            multi_node: true,
            degraded: None,
        }];
        let (body, _) = gpu_series_json(&[("gpu001".to_string(), 0)], &workloads, 0, 2400, 30, 1);
        let lines = parse(&body);
        let util = find(&lines, &[("__name__", "DCGM_FI_DEV_GPU_UTIL")]);
        let silent: Vec<i64> = stamps(util).into_iter().filter(|&t| (895_000..1_800_000).contains(&t)).collect();
        assert!(silent.is_empty(), "nothing from a GPU off the bus: {silent:?}");
        assert_eq!(stamps(util).last(), Some(&2_400_000), "back after the reboot");
        let fault = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "79")]);
        assert_eq!(stamps(fault), vec![895_000], "logged at its instant, between two scrapes");
        let cleared = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "0")]);
        assert!(stamps(cleared).contains(&1_800_000));
        let (rdma, _, _) = rdma_series_json(&["gpu001".to_string()], &workloads, &BTreeSet::new(), 0, 2400, 30, 1);
        let words = values(find(&parse(&rdma), &[("__name__", "rdma_port_xmit_data_total")]));
        assert!(words[40] - words[31] < 1e9, "a node that is down sends nothing");
    }

    #[test]
    fn lossy_tor_pair_loses_3_to_8_percent_in_its_window_only() {
        let racks: Vec<String> = ["A01", "A02", "A03"].map(String::from).to_vec();
        let paths = ping_paths(&racks);
        assert_eq!(paths.len(), 3 + 4, "every ToR mesh and both directions between neighbours");
        let pair = PingPath { source: "A01".into(), target: "A02".into() };
        let lossy = LossyPath { path: pair, from: 7200, to: 14_400, job_id: 5 };
        let (body, samples) = pingmesh_series_json(&paths, Some(&lossy), 0, 21_600, 3);
        let lines = parse(&body);
        assert_eq!(samples, paths.len() * 14 * (21_600 / 10 + 1));
        // Loss and p99 over [a, b) from the counters, as the report's PromQL computes them.
        let window = |source: &str, target: &str, a: usize, b: usize| {
            let series = |name: &str, le: Option<&str>| {
                let mut labels = vec![("__name__", name), ("source_tor", source), ("target_tor", target)];
                if let Some(le) = le {
                    labels.push(("le", le));
                }
                let values = values(find(&lines, &labels));
                values[b / 10] - values[a / 10]
            };
            let total = series("rpingmesh_probe_total", None);
            let success = series("rpingmesh_probe_success_total", None);
            let answered = series("rpingmesh_network_rtt_ns_bucket", Some("+Inf"));
            assert_eq!(answered, success, "every answered probe has an RTT");
            let within_100us = series("rpingmesh_network_rtt_ns_bucket", Some("100000")) / answered;
            let within_10us = series("rpingmesh_network_rtt_ns_bucket", Some("10000")) / answered;
            (1.0 - success / total, within_100us, within_10us, total)
        };
        for (source, target) in [("A01", "A02"), ("A02", "A01")] {
            let (loss, within_100us, _, total) = window(source, target, 7200, 14_400);
            assert!((0.03..=0.08).contains(&loss), "{source}→{target} loses {loss}");
            assert!(within_100us < 0.99, "p99 above 100 µs on the lossy link: {within_100us}");
            assert_eq!(total, 7200.0, "inter-ToR: one probe a second");
            let (loss, _, within_10us, _) = window(source, target, 0, 7200);
            assert!(loss < 0.001 && within_10us > 0.99, "healthy before: {loss} {within_10us}");
        }
        let (loss, _, within_10us, total) = window("A02", "A02", 7200, 14_400);
        assert!(loss < 0.001 && within_10us > 0.99, "other paths stay healthy: {loss}");
        assert_eq!(total, 72_000.0, "ToR mesh: ten probes a second");
        let instance = find(&lines, &[("source_tor", "A03")]);
        assert_eq!(instance["metric"]["instance"], "A03-agent");
        assert_eq!(instance["metric"]["job"], "rpingmesh-agent");
    }

    #[test]
    fn burst_peaks_exceed_the_scrape_average_and_exist_only_where_the_agent_runs() {
        let workloads: Vec<GpuWorkload> = ["gpu001", "gpu002"]
            .iter()
            .map(|node| GpuWorkload {
                node: node.to_string(),
                gpu: 0,
                job_id: 1,
                start: 600,
                end: 4200,
                profile: Profile::Training { period_s: 60 },
                multi_node: true,
                degraded: Some((1800, 2400)),
            })
            .collect();
        let nodes = vec!["gpu001".to_string(), "gpu002".to_string(), "gpu003".to_string()];
        let agents: BTreeSet<String> = ["gpu001".to_string(), "gpu003".to_string()].into();
        let (body, _, burst_samples) = rdma_series_json(&nodes, &workloads, &agents, 0, 4800, 15, 2);
        let lines = parse(&body);
        assert_eq!(burst_samples, 2 * 4 * (4800 / 15 + 1));
        assert!(!lines.iter().any(|l| l["metric"]["instance"] == "gpu002:9879"
            && l["metric"]["__name__"].as_str().is_some_and(|name| name.starts_with("nic_"))));
        let node = [("instance", "gpu001:9879")];
        let words = values(find(&lines, &[node[0], ("__name__", "rdma_port_xmit_data_total")]));
        let peaks = values(find(&lines, &[node[0], ("__name__", "nic_tx_bytes_per_second_max")]));
        let above = find(&lines, &[node[0], ("__name__", "nic_tx_burst_seconds_total")]);
        assert_eq!(above["metric"]["threshold"], "0.9");
        assert_eq!(above["metric"]["job"], "rdma");
        let above = values(above);
        let mut bursty = 0;
        for i in 1..words.len() {
            let average = (words[i] - words[i - 1]) * 4.0 / 15.0;
            assert!(peaks[i] >= average, "peak {} below the average {average} at {i}", peaks[i]);
            let seconds = above[i] - above[i - 1];
            assert!(seconds >= 0.0 && seconds * 4.5e10 <= average * 15.0 + 1.0, "burst seconds fit the bytes");
            let t = i as i64 * 15;
            if (600..4200).contains(&t) && !(1800..2400).contains(&t) {
                assert!((5e9..=15.1e9).contains(&average), "training averages 5–15 GB/s: {average}");
                bursty += usize::from(peaks[i] >= 4.5e10 && seconds > 0.0);
            } else if !(600..4200).contains(&t) {
                assert!(peaks[i] < 1e8 && seconds == 0.0, "a quiet port has small peaks");
            } else {
                assert!(peaks[i] < 4.5e10 && seconds == 0.0, "a lossy path caps the bursts");
            }
        }
        assert!(bursty > 120, "all-reduces reach line rate in most scrapes: {bursty}");
    }

    #[test]
    fn lossy_path_prefers_a_job_across_neighbouring_racks() {
        let racks: Vec<String> = ["A01", "A02", "A03"].map(String::from).to_vec();
        let rack_of: BTreeMap<&str, &str> =
            [("n1", "A01"), ("n2", "A01"), ("n3", "A02"), ("n4", "A03")].into_iter().collect();
        let jobs = vec![
            (7, vec!["n1".to_string(), "n2".to_string()], 0, 50_000),
            (8, vec!["n2".to_string(), "n3".to_string()], 1000, 20_000),
            (9, vec!["n1".to_string(), "n4".to_string()], 0, 50_000),
            (10, vec!["n3".to_string(), "n4".to_string()], 0, 5000),
        ];
        let lossy = pick_lossy_path(&jobs, &rack_of, &racks, 0, 100_000).expect("a lossy path");
        assert_eq!((lossy.job_id, lossy.path.source.as_str(), lossy.path.target.as_str()), (8, "A01", "A02"));
        assert_eq!((lossy.from, lossy.to), (2800, 2800 + 7200));
        let lossy = pick_lossy_path(&jobs[..1], &rack_of, &racks, 0, 100_000).expect("a lossy path");
        assert_eq!((lossy.path.source.as_str(), lossy.path.target.as_str()), ("A01", "A01"), "the rack's ToR mesh");
    }
}

/// What `seed_cluster` wrote.
#[derive(Debug, Default)]
pub struct TelemetryStats {
    pub jobs: usize,
    pub gpu_records: usize,
    /// All samples, ping-mesh and burst samples included.
    pub samples: usize,
    pub pingmesh_samples: usize,
    pub burst_samples: usize,
    /// Nodes with the burst agent.
    pub burst_nodes: usize,
    /// node_exporter, ipmi_exporter and Lustre samples.
    pub node_samples: usize,
    /// Jobs whose GPUs show XID 79 (they died with their node).
    pub xid_jobs: Vec<u32>,
    /// FAILED jobs whose GPU shows XID 31 (SIGSEGV on an illegal address: the application's fault).
    pub app_crash_jobs: Vec<u32>,
    /// The lossy ToR pair, its window and the job crossing it.
    pub lossy: Option<LossyPath>,
    /// Jobs given trace summaries, with their shape, and the rows stored.
    pub traced_jobs: Vec<(u32, super::traces::TracedKind)>,
    pub trace_rows: u64,
}

/// The profile a demo job's GPUs follow, from what the job is (its name) and how it ended.
fn profile_for(job_name: &str, job_id: u32, multi_node: bool) -> Profile {
    let name = job_name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| name.contains(word));
    if has(&["jupyter", "notebook", "interactive"]) {
        Profile::Idle
    } else if has(&["resnet", "yolo", "coco", "augment", "preprocess", "unet", "tokenizer", "sam"]) {
        Profile::InputBound
    } else if has(&["eval", "vllm", "infer", "serve", "ens"]) {
        Profile::Bursty
    } else if has(&["md", "gromacs", "lammps", "lqcd", "qmc", "wrf", "cdo", "blast", "bash"]) {
        // FP64 and non-tensor codes: the GPU is busy, the tensor cores are not.
        Profile::Fp32
    } else if multi_node
        || has(&["pretrain", "train", "llama", "lm", "diffusion", "graphcast", "fourcastnet", "alphafold"])
    {
        // One run in five is left in FP32 by its author: busy GPUs, idle tensor cores.
        if job_id.is_multiple_of(5) {
            Profile::Fp32
        } else {
            Profile::Training { period_s: 45 + i64::from(job_id % 4) * 15 }
        }
    } else {
        Profile::Bursty
    }
}

/// Writes telemetry for the last `hours` of a cluster whose jobs are already in slurmdbd: every GPU of
/// every node gets dcgm-exporter series shaped by the job holding it (quiet between jobs), nodes of
/// multi-node jobs get RDMA traffic, a job that died with its node on an XID event shows XID 79, and
/// each job's GPU indices are recorded in our store as the slurm-plugin would have recorded them.
/// Next to them, the ping mesh of the racks of `topology` (one ToR pair lossy for 2 h under a running
/// multi-node job, which slows down) and burst series on the nodes of the first half of the racks.
pub async fn seed_cluster(
    reader: &slurmlens::sources::slurmdbd::SlurmDbd,
    store: Option<&slurmlens::store::Store>,
    vm: &VictoriaMetrics,
    topology: &slurmlens_web::topology::Topology,
    hours: i64,
    step_s: i64,
    gpus_per_node: u16,
) -> anyhow::Result<TelemetryStats> {
    use slurmlens::domain::job::{JobFilter, TimeWindow};
    use slurmlens::domain::scope::ViewerScope;
    use slurmlens::domain::state::JobStateBase;

    let now = Utc::now();
    let from = now - chrono::Duration::hours(hours);
    let window = TimeWindow::new(from, now)?;
    let tres = reader.tres_catalog().await?;
    let mut jobs = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) =
            reader.jobs_in_window(&ViewerScope::Staff, window, &JobFilter::default(), &tres, cursor, 5000).await?;
        jobs.extend(page.into_iter().filter(|job| job.time_start > 0 && tres.gpus(&job.tres_alloc) > 0));
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    jobs.sort_by_key(|job| (job.time_start, job.identity.id_job));
    let xid_events: Vec<_> = reader
        .node_events(window, None)
        .await?
        .into_iter()
        .filter(|event| event.reason.to_ascii_lowercase().contains("xid"))
        .collect();
    // Give each job concrete GPU indices: the lowest slots free on each node when it starts.
    let mut free_at: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut workloads = Vec::new();
    let mut stats = TelemetryStats::default();
    let (from_s, now_s) = (from.timestamp(), now.timestamp());
    let mut records: BTreeMap<u32, Vec<slurmlens::domain::gpu::GpuAllocation>> = BTreeMap::new();
    let mut multi_node_jobs: Vec<(u32, Vec<String>, i64, i64)> = Vec::new();
    for job in &jobs {
        let start = job.time_start as i64;
        let end = if job.time_end == 0 { now_s + 1 } else { job.time_end as i64 };
        let hosts = job.nodes.hosts();
        let per_node = (tres.gpus(&job.tres_alloc) / hosts.len().max(1) as u64).min(u64::from(gpus_per_node)) as usize;
        let multi_node = hosts.len() > 1;
        let died_of_xid = job.state.base() == JobStateBase::NodeFail
            && xid_events
                .iter()
                .any(|event| hosts.contains(&event.node) && (event.time_start as i64 - end).abs() < 900);
        // A segfault of a GPU program is often an illegal address: the driver logs XID 31 on the GPU of
        // the faulting rank (srun reports 139 = 128 + SIGSEGV, a batch script the signal itself).
        // Only GPU-heavy runs (4 GPUs or more) are given one, so that not every segfault has an XID.
        let app_crash = job.state.base() == JobStateBase::Failed
            && (job.exit_code.signal == 11 || job.exit_code.status == 11)
            && tres.gpus(&job.tres_alloc) >= 4
            && job.time_end > 0
            && end - 4 > start;
        if multi_node && !died_of_xid && job.time_end > 0 {
            multi_node_jobs.push((job.identity.id_job, hosts.to_vec(), start, end));
        }
        let mut first_gpu = true;
        for host in hosts {
            let slots = free_at.entry(host.clone()).or_insert_with(|| vec![i64::MIN; usize::from(gpus_per_node)]);
            let mut order: Vec<usize> = (0..slots.len()).collect();
            order.sort_by_key(|&slot| (slots[slot] > start, slot));
            for &slot in order.iter().take(per_node) {
                slots[slot] = end;
                // The node's XID event on this host, if the job died of it: its end is the reboot.
                let crash_event = xid_events
                    .iter()
                    .find(|event| died_of_xid && &event.node == host && (event.time_start as i64 - end).abs() < 900);
                let workload_end = match crash_event {
                    Some(event) if event.time_end > 0 => (event.time_end as i64).max(end),
                    Some(_) => now_s + 1,
                    None => end,
                };
                let profile = if crash_event.is_some() {
                    Profile::XidCrash { at: end - 5 }
                } else if app_crash && first_gpu {
                    Profile::AppCrash { at: end - 4 }
                } else {
                    profile_for(&job.job_name, job.identity.id_job, multi_node)
                };
                first_gpu = false;
                workloads.push(GpuWorkload {
                    node: host.clone(),
                    gpu: slot as u16,
                    job_id: job.identity.id_job,
                    start,
                    end: workload_end,
                    profile,
                    multi_node,
                    degraded: None,
                });
                let seen = |t: i64| DateTime::from_timestamp(t.min(now_s), 0).unwrap_or(now);
                records.entry(job.identity.id_job).or_default().push(slurmlens::domain::gpu::GpuAllocation {
                    job_id: job.identity.id_job,
                    step: "job".into(),
                    gpu: slurmlens::domain::gpu::GpuRef { node: host.clone(), index: slot as u16 },
                    uuid: Some(gpu_uuid(host, slot as u16)),
                    cgroup_path: None,
                    first_seen: seen(start),
                    last_seen: seen(end),
                    ended_at: (job.time_end > 0).then(|| seen(end)),
                });
            }
        }
        if died_of_xid {
            stats.xid_jobs.push(job.identity.id_job);
        }
        if app_crash {
            stats.app_crash_jobs.push(job.identity.id_job);
        }
    }
    stats.jobs = jobs.len();
    if let Some(store) = store {
        for allocations in records.values() {
            store.upsert_gpu_allocations(reader.cluster(), allocations).await?;
            stats.gpu_records += allocations.len();
        }
    }
    let nodes: Vec<String> = {
        let mut all: Vec<String> = reader.nodes(&tres).await?.into_iter().map(|node| node.node).collect();
        if all.is_empty() {
            all = free_at.keys().cloned().collect();
        }
        all
    };
    let layout = topology.resolve(reader.cluster().as_str(), &nodes, u32::from(gpus_per_node));
    let rack_names: Vec<String> =
        layout.racks.iter().filter(|rack| !rack.nodes.is_empty()).map(|rack| rack.name.clone()).collect();
    let rack_of: BTreeMap<&str, &str> =
        layout.nodes.iter().map(|node| (node.name.as_str(), layout.racks[node.rack as usize].name.as_str())).collect();
    stats.lossy = pick_lossy_path(&multi_node_jobs, &rack_of, &rack_names, from_s, now_s);
    if let Some(lossy) = &stats.lossy {
        for workload in workloads.iter_mut().filter(|w| w.job_id == lossy.job_id) {
            workload.degraded = Some((lossy.from, lossy.to));
        }
    }
    // The node agent runs on the first half of the racks only: elsewhere the report says "peak unknown".
    let agent_racks: BTreeSet<&str> =
        rack_names.iter().take(rack_names.len().div_ceil(2)).map(String::as_str).collect();
    let burst_agents: BTreeSet<String> = nodes
        .iter()
        .filter(|node| rack_of.get(node.as_str()).is_some_and(|rack| agent_racks.contains(rack)))
        .cloned()
        .collect();
    stats.burst_nodes = burst_agents.len();
    let (samples, burst_samples) =
        import_workloads(vm, &nodes, gpus_per_node, &workloads, &burst_agents, from_s, now_s - 1, step_s, 11).await?;
    stats.burst_samples = burst_samples;
    stats.node_samples =
        super::nodes::import_node_series(vm, &nodes, gpus_per_node, &workloads, from_s, now_s - 1, 17).await?;
    let paths = ping_paths(&rack_names);
    stats.pingmesh_samples = import_pingmesh(vm, &paths, stats.lossy.as_ref(), from_s, now_s - 1, 13).await?;
    stats.samples = samples + stats.pingmesh_samples + stats.node_samples;
    if let Some(store) = store {
        let traced = traced_gpus(&workloads, now_s);
        stats.traced_jobs =
            traced.iter().map(|gpu| (gpu.job_id, gpu.kind)).collect::<BTreeMap<_, _>>().into_iter().collect();
        stats.trace_rows = super::traces::seed(store, reader.cluster(), &traced, 6).await?;
    }
    Ok(stats)
}

/// The finished jobs whose collectors sent trace summaries: the first multi-node training run
/// (communication-bound), the first single-node one (compute-bound) and the first input-bound job.
fn traced_gpus(workloads: &[GpuWorkload], now_s: i64) -> Vec<super::traces::TracedGpu> {
    use super::traces::{TracedGpu, TracedKind};
    let finished = |w: &&GpuWorkload| w.end <= now_s && w.end - w.start >= 3600 && w.degraded.is_none();
    let first =
        |test: &dyn Fn(&GpuWorkload) -> bool| workloads.iter().filter(finished).find(|w| test(w)).map(|w| w.job_id);
    let picks = [
        (first(&|w| w.multi_node && matches!(w.profile, Profile::Training { .. })), TracedKind::CommunicationBound),
        (first(&|w| !w.multi_node && matches!(w.profile, Profile::Training { .. })), TracedKind::ComputeBound),
        (first(&|w| matches!(w.profile, Profile::InputBound)), TracedKind::InputBound),
    ];
    picks
        .into_iter()
        .filter_map(|(job, kind)| Some((job?, kind)))
        .flat_map(|(job, kind)| {
            workloads.iter().filter(move |w| w.job_id == job).map(move |w| TracedGpu {
                job_id: w.job_id,
                node: w.node.clone(),
                gpu: w.gpu,
                start: w.start,
                end: w.end,
                kind,
            })
        })
        .collect()
}

/// The ToR pair to make lossy for 2 h: under a multi-node job running then (the first 30 min of its run
/// inside the window are healthy), preferring one that spans two neighbouring racks (an inter-ToR link),
/// then the longest, then the lowest id; the ToR mesh of its rack otherwise.
fn pick_lossy_path(
    jobs: &[(u32, Vec<String>, i64, i64)],
    rack_of: &BTreeMap<&str, &str>,
    racks: &[String],
    from: i64,
    to: i64,
) -> Option<LossyPath> {
    let position = |rack: &str| racks.iter().position(|name| name == rack);
    jobs.iter()
        .filter_map(|(job_id, hosts, start, end)| {
            let lossy_from = (*start).max(from) + 1800;
            let lossy_to = lossy_from + 2 * 3600;
            if lossy_to > (*end).min(to) - 600 {
                return None;
            }
            let mut job_racks: Vec<usize> =
                hosts.iter().filter_map(|host| rack_of.get(host.as_str()).and_then(|rack| position(rack))).collect();
            job_racks.sort_unstable();
            job_racks.dedup();
            let (&first, &last) = (job_racks.first()?, job_racks.last()?);
            let neighbours = job_racks.len() == 2 && last == first + 1;
            let path =
                PingPath { source: racks[first].clone(), target: racks[if neighbours { last } else { first }].clone() };
            let key = (!neighbours, std::cmp::Reverse((*end).min(to) - lossy_from), *job_id);
            Some((key, LossyPath { path, from: lossy_from, to: lossy_to, job_id: *job_id }))
        })
        .min_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, lossy)| lossy)
}
