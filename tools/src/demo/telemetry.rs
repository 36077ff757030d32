//! Demo telemetry: dcgm-exporter and rdma_exporter series that agree with the jobs, imported into
//! VictoriaMetrics with its JSON-lines import API. Names, labels and units are those the real
//! exporters emit (`shared/reference/datasources.md` §1–2): `DCGM_FI_DEV_GPU_UTIL` in %, the
//! `DCGM_FI_PROF_*` ratios in 0–1, memory in MiB, power in W, energy in mJ since boot, XID as the value
//! of the last error, RDMA data counters in 4-byte words. Next to them: R-Pingmesh's probe counters and
//! RTT histogram per ToR pair (§3.2) and a node agent's 100 ms peak rates (§7) on part of the nodes,
//! and each GPU's health fields (`health.rs`: clock-event reasons, ECC, row remaps, violations).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use slurmlens::sources::victoriametrics::VictoriaMetrics;

use super::resume::Resume;

mod health;
pub use health::{FLAKY_GPU, FLAKY_NODE};

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
    gpu_series_resumed(gpus, workloads, from, to, step_s, seed, &Resume::default())
}

/// [`gpu_series_json`] with the energy counters going on from `resume`.
pub fn gpu_series_resumed(
    gpus: &[(String, u16)],
    workloads: &[GpuWorkload],
    from: i64,
    to: i64,
    step_s: i64,
    seed: u64,
    resume: &Resume,
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
        // 31 (reported at every scrape while the job lasts, as the exporter keeps reporting the last XID).
        // Back to 0 at the first scrape after the workload.
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
            if let Some(&after) = timestamps.iter().find(|&&t| t >= workload.end) {
                xid_points.push((after, 0));
            }
        }
        let uuid = gpu_uuid(node, *gpu);
        let gpu_labels = |name: &str| {
            serde_json::json!({
                "__name__": name, "gpu": gpu.to_string(), "UUID": uuid, "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + 0x10 * u32::from(*gpu)),
                "device": format!("nvidia{gpu}"), "modelName": MODEL, "Hostname": node, "DCGM_FI_DRIVER_VERSION": DRIVER,
            })
        };
        let drawn_energy = 1.7e12 + rng.gen_range(0.0..1e11);
        let mut energy_mj = resume.start(&gpu_labels("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), drawn_energy);
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
        for (name, values) in names.iter().zip(&fields) {
            let line = serde_json::json!({
                "metric": gpu_labels(name),
                "values": values,
                "timestamps": stamps,
            });
            out.push_str(&line.to_string());
            out.push('\n');
            samples += values.len();
        }
        let health = health::health_series(&mut out, node, *gpu, &stamps, &fields[6], gpu_labels);
        samples += health.samples;
        xid_points.extend(health.xid_points.into_iter().filter(|&(at, _)| at <= to));
        // dcgm-exporter exports the last XID at every scrape the GPU answers (0 = "No Error"), so a
        // healthy GPU reads "no error", not "no data"; an XID shows at its own instant too.
        xid_points.sort_unstable();
        xid_points.dedup_by_key(|point| point.0);
        let code_at = |t: i64| xid_points.iter().take_while(|(at, _)| *at <= t).last().map_or(0, |&(_, code)| code);
        let mut xid_line: Vec<(i64, u32)> = stamps.iter().map(|&ms| (ms, code_at(ms / 1000))).collect();
        xid_line.extend(xid_points.iter().map(|&(t, code)| (t * 1000, code)));
        xid_line.sort_unstable_by_key(|point| point.0);
        xid_line.dedup_by_key(|point| point.0);
        let (xid_line_stamps, xid_line_values): (Vec<i64>, Vec<f64>) =
            xid_line.into_iter().map(|(t, code)| (t, f64::from(code))).unzip();
        for (code, message) in [
            (0.0, "No Error"),
            (31.0, "GPU memory page fault"),
            (48.0, "Double Bit ECC Error"),
            (79.0, "GPU has fallen off the bus"),
        ] {
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
    rdma_series_resumed(nodes, workloads, burst_agents, (from, to, step_s), seed, &Resume::default())
}

/// [`rdma_series_json`] over `(from, to, step_s)` with the counters going on from `resume`.
pub fn rdma_series_resumed(
    nodes: &[String],
    workloads: &[GpuWorkload],
    burst_agents: &BTreeSet<String>,
    (from, to, step_s): (i64, i64, i64),
    seed: u64,
    resume: &Resume,
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
        let names = [
            "rdma_port_xmit_data_total",
            "rdma_port_rcv_data_total",
            "rdma_rp_cnp_handled_total",
            "rdma_roce_pfc_pause_frames_total",
            "rdma_out_of_sequence_total",
        ];
        let burst_names = [
            "nic_tx_bytes_per_second_max",
            "nic_rx_bytes_per_second_max",
            "nic_tx_burst_seconds_total",
            "nic_rx_burst_seconds_total",
        ];
        let labels = |name: &str| {
            let mut labels = serde_json::json!({"__name__": name, "device": "mlx5_0", "port": "1", "instance": format!("{node}:9879"), "job": "rdma"});
            if name == "rdma_roce_pfc_pause_frames_total" {
                labels["netdev"] = "eth0".into();
                labels["direction"] = "rx".into();
                labels["priority"] = "3".into();
            }
            if name.starts_with("nic_") && name.ends_with("_total") {
                labels["threshold"] = format!("{BURST_THRESHOLD}").into();
            }
            labels
        };
        let mut counters = [rng.gen_range(1e12..9e12), rng.gen_range(1e12..9e12), 1e6, 2e5, 1e3];
        for (counter, name) in counters.iter_mut().zip(names) {
            *counter = resume.start(&labels(name), *counter);
        }
        let mut series: [Vec<f64>; 5] = Default::default();
        // tx peak, rx peak, tx seconds above, rx seconds above
        let mut bursts: [Vec<f64>; 4] = Default::default();
        let mut above = [rng.gen_range(0.0..500.0_f64).round(), rng.gen_range(0.0..500.0_f64).round()];
        for (seconds, name) in above.iter_mut().zip(&burst_names[2..]) {
            *seconds = resume.start(&labels(name), *seconds);
        }
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
        for (name, values) in names.iter().zip(&series) {
            samples += line(&mut out, labels(name), values, &stamps);
        }
        if with_agent {
            for (name, values) in burst_names.iter().zip(&bursts) {
                burst_samples += line(&mut out, labels(name), values, &stamps);
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
    pingmesh_series_resumed(paths, lossy, from, to, seed, &Resume::default())
}

/// [`pingmesh_series_json`] with the probe counters going on from `resume`.
pub fn pingmesh_series_resumed(
    paths: &[PingPath],
    lossy: Option<&LossyPath>,
    from: i64,
    to: i64,
    seed: u64,
    resume: &Resume,
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
        let labels = |name: &str| {
            serde_json::json!({"__name__": name, "source_tor": path.source, "target_tor": path.target,
                               "job": "rpingmesh-agent", "instance": format!("{}-agent", path.source)})
        };
        let bucket_labels = |index: usize| {
            let mut bucket = labels("rpingmesh_network_rtt_ns_bucket");
            bucket["le"] = RTT_BUCKETS_NS.get(index).map_or_else(|| "+Inf".to_string(), |le| format!("{le}")).into();
            bucket
        };
        total = resume.start(&labels("rpingmesh_probe_total"), total as f64) as u64;
        success = resume.start(&labels("rpingmesh_probe_success_total"), success as f64) as u64;
        // The histogram goes on from its cumulative counts: back to answers per bucket.
        let mut below = 0u64;
        for (index, bucket) in buckets.iter_mut().enumerate() {
            let cumulative = resume.start(&bucket_labels(index), (below + *bucket) as f64) as u64;
            *bucket = cumulative.saturating_sub(below);
            below = cumulative.max(below);
        }
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
        let mut lines =
            vec![(labels("rpingmesh_probe_total"), &series[0]), (labels("rpingmesh_probe_success_total"), &series[1])];
        for (index, values) in series[2..].iter().enumerate() {
            lines.push((bucket_labels(index), values));
        }
        for (labels, values) in lines {
            samples += line(&mut out, labels, values, &stamps);
        }
    }
    (out, samples)
}

/// Imports series for every GPU of `nodes` (a steady training run on all of them) over the window.
/// Used by `slurmlens bench report --import` on clusters without telemetry.
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
mod tests;
