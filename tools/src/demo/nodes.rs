//! Demo series of the node beside its GPUs (issue 8), shaped like the exporters a site runs and driven by
//! the same GPU workloads as the dcgm-exporter series: node_exporter (CPU seconds per `cpu` and `mode`,
//! memory, pressure, network), ipmi_exporter's DCMI node power, and the Lustre exporter's job statistics
//! on the OSTs and client totals per node. An input-bound job's data loader shows as CPU iowait and
//! Lustre reads while its GPUs wait; training runs write checkpoints; a node whose GPU fell off the bus
//! is silent until its reboot.

use std::collections::BTreeMap;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::resume::Resume;
use super::telemetry::{GpuWorkload, Profile, fnv, line};
use slurmlens::sources::victoriametrics::VictoriaMetrics;

/// node_exporter and ipmi_exporter are scraped every 30 s (a common choice at scale).
pub const NODE_STEP_S: i64 = 30;
/// The demo exports 4 of a node's CPUs: the report averages over CPUs, so the shares are the same,
/// and 112 per node would only multiply the demo's volume.
/// A GPU node's power besides its GPUs (W): the fixed part, the CPUs at full load, and the fans' and
/// power supplies' share of the GPUs' power.
const NODE_BASE_W: f64 = 1100.0;
const NODE_CPU_W: f64 = 700.0;
const FAN_SHARE: f64 = 0.25;
const DEMO_CPUS: usize = 4;
const MEMORY_TOTAL: f64 = 2.0e12;
/// Lustre drops a job's statistics this long after its last I/O (`job_cleanup_interval`).
const JOBSTATS_LINGER_S: i64 = 600;
const OSTS: u64 = 16;
/// The `mode` labels of `node_cpu_seconds_total`, in the order the generator keeps them.
const CPU_MODES: [&str; 4] = ["idle", "iowait", "user", "system"];

/// What one GPU's job does to its host in one interval.
#[derive(Default, Clone, Copy)]
struct HostLoad {
    user: f64,
    system: f64,
    iowait: f64,
    memory: f64,
    read_bytes_per_s: f64,
    write_bytes_per_s: f64,
    read_ops_per_s: f64,
    write_ops_per_s: f64,
    gpu_power_w: f64,
}

/// Whether an input-bound job's GPUs are waiting for data at `since_start` (the dcgm series' phase).
fn loader_waiting(since_start: i64) -> bool {
    (since_start % 40) as f64 / 40.0 >= 0.45
}

/// The host load of one GPU workload at `t`, averaged over the interval `[t - step, t)`.
fn host_load(workload: &GpuWorkload, t: i64, rng: &mut StdRng) -> HostLoad {
    let since_start = t - workload.start;
    let jitter = |rng: &mut StdRng, spread: f64| 1.0 + rng.gen_range(-spread..spread);
    // A checkpoint every 20 minutes, written for 60 s.
    let checkpointing = since_start % 1200 < 60;
    match workload.profile {
        Profile::Training { .. } | Profile::XidCrash { .. } | Profile::AppCrash { .. } => HostLoad {
            user: 0.045 * jitter(rng, 0.2),
            system: 0.012,
            iowait: if checkpointing { 0.02 } else { 0.002 },
            memory: 48e9,
            read_bytes_per_s: 12e6 * jitter(rng, 0.3),
            write_bytes_per_s: if checkpointing { 350e6 } else { 0.5e6 } * jitter(rng, 0.1),
            read_ops_per_s: 12.0,
            write_ops_per_s: if checkpointing { 350.0 } else { 2.0 },
            gpu_power_w: 600.0 * jitter(rng, 0.05),
        },
        Profile::InputBound => {
            // Share of the interval the GPU waited on the loader, from the dcgm series' 40 s phase.
            let waiting = (t - NODE_STEP_S..t).step_by(5).filter(|&s| loader_waiting(s - workload.start)).count()
                as f64
                / (NODE_STEP_S / 5) as f64;
            HostLoad {
                user: 0.07 * jitter(rng, 0.2),
                system: 0.02,
                iowait: 0.06 * waiting * jitter(rng, 0.2),
                memory: 64e9,
                read_bytes_per_s: 240e6 * jitter(rng, 0.15),
                write_bytes_per_s: 0.2e6,
                read_ops_per_s: 1900.0 * jitter(rng, 0.15),
                write_ops_per_s: 1.0,
                gpu_power_w: 150.0 + 3.5 * 92.0 * (1.0 - waiting),
            }
        }
        Profile::Fp32 => HostLoad {
            user: 0.03,
            system: 0.008,
            iowait: 0.002,
            memory: 36e9,
            read_bytes_per_s: 8e6,
            write_bytes_per_s: 0.3e6,
            read_ops_per_s: 8.0,
            write_ops_per_s: 1.0,
            gpu_power_w: 520.0 * jitter(rng, 0.05),
        },
        Profile::Idle => HostLoad { user: 0.003, memory: 6e9, gpu_power_w: 72.0, ..HostLoad::default() },
        Profile::Bursty => HostLoad {
            user: 0.02,
            system: 0.005,
            iowait: 0.001,
            memory: 20e9,
            read_bytes_per_s: 4e6,
            write_bytes_per_s: 0.1e6,
            read_ops_per_s: 4.0,
            write_ops_per_s: 0.5,
            gpu_power_w: 180.0 * jitter(rng, 0.2),
        },
    }
}

/// Whether the workload's node is down at `t` (its GPU fell off the bus; it reboots at the workload's end).
fn node_down(workload: &GpuWorkload, t: i64) -> bool {
    matches!(workload.profile, Profile::XidCrash { at } if at <= t && t < workload.end)
}

/// node_exporter, ipmi_exporter and Lustre client series of `nodes` over `[from, to]`, driven by the
/// `workloads` on them. Returns the JSON lines and their sample count.
pub fn node_series_json(
    nodes: &[String],
    gpus_per_node: u16,
    workloads: &[GpuWorkload],
    from: i64,
    to: i64,
    seed: u64,
) -> (String, usize) {
    node_series_resumed(nodes, gpus_per_node, workloads, from, to, seed, &Resume::default())
}

/// [`node_series_json`] with the counters going on from `resume`.
pub fn node_series_resumed(
    nodes: &[String],
    gpus_per_node: u16,
    workloads: &[GpuWorkload],
    from: i64,
    to: i64,
    seed: u64,
    resume: &Resume,
) -> (String, usize) {
    let mut by_node: BTreeMap<&str, Vec<&GpuWorkload>> = BTreeMap::new();
    for workload in workloads {
        by_node.entry(workload.node.as_str()).or_default().push(workload);
    }
    let mut out = String::new();
    let mut samples = 0;
    let step = NODE_STEP_S;
    for node in nodes {
        let mut rng = StdRng::seed_from_u64(seed ^ fnv(node));
        let on_node = by_node.get(node.as_str()).cloned().unwrap_or_default();
        let mut cpu = [[0.0f64; 4]; DEMO_CPUS]; // idle, iowait, user, system
        for counters in &mut cpu {
            *counters =
                [rng.gen_range(1e6..5e6), rng.gen_range(1e3..1e4), rng.gen_range(1e5..9e5), rng.gen_range(1e4..9e4)];
        }
        let (mut psi_memory, mut psi_io) = (rng.gen_range(10.0..100.0), rng.gen_range(100.0..5000.0));
        let (mut rx, mut tx) = (rng.gen_range(1e11..9e11), rng.gen_range(1e11..9e11));
        let (mut lustre_read, mut lustre_write) = (rng.gen_range(1e12..5e12), rng.gen_range(1e11..9e11));
        let instance = format!("{node}:9100");
        let node_labels = |name: &str| serde_json::json!({"__name__": name, "instance": instance, "job": "node"});
        let cpu_labels = |cpu: usize, mode: &str| {
            let mut labels = node_labels("node_cpu_seconds_total");
            labels["cpu"] = cpu.to_string().into();
            labels["mode"] = mode.into();
            labels
        };
        let network_labels = |name: &str| {
            let mut labels = node_labels(name);
            labels["device"] = "eth0".into();
            labels
        };
        let client = format!("sakura-ffff{:08x}", fnv(node) as u32);
        let lustre_labels = |name: &str| {
            serde_json::json!({"__name__": name, "component": "client", "target": client,
                               "instance": format!("{node}:9169"), "job": "lustre"})
        };
        for (index, counters) in cpu.iter_mut().enumerate() {
            for (counter, mode) in counters.iter_mut().zip(CPU_MODES) {
                *counter = resume.start(&cpu_labels(index, mode), *counter);
            }
        }
        psi_memory = resume.start(&node_labels("node_pressure_memory_waiting_seconds_total"), psi_memory);
        psi_io = resume.start(&node_labels("node_pressure_io_waiting_seconds_total"), psi_io);
        rx = resume.start(&network_labels("node_network_receive_bytes_total"), rx);
        tx = resume.start(&network_labels("node_network_transmit_bytes_total"), tx);
        lustre_read = resume.start(&lustre_labels("lustre_read_bytes_total"), lustre_read);
        lustre_write = resume.start(&lustre_labels("lustre_write_bytes_total"), lustre_write);
        let mut cpu_values: Vec<[Vec<f64>; 4]> = vec![Default::default(); DEMO_CPUS];
        let mut gauges: [Vec<f64>; 2] = Default::default(); // MemAvailable, power
        let mut counters: [Vec<f64>; 6] = Default::default(); // psi memory, psi io, rx, tx, lustre read, write
        let mut stamps = Vec::new();
        let first = from - from.rem_euclid(step) + step;
        for t in (first..=to).step_by(step as usize) {
            let active: Vec<&&GpuWorkload> = on_node.iter().filter(|w| w.start < t && t <= w.end).collect();
            if active.iter().any(|w| node_down(w, t)) {
                continue;
            }
            let mut load = HostLoad { user: 0.008, system: 0.004, iowait: 0.0005, memory: 18e9, ..HostLoad::default() };
            let mut gpu_power = f64::from(gpus_per_node.saturating_sub(active.len() as u16)) * 70.0;
            for workload in &active {
                let one = host_load(workload, t, &mut rng);
                load.user += one.user;
                load.system += one.system;
                load.iowait += one.iowait;
                load.memory += one.memory;
                load.read_bytes_per_s += one.read_bytes_per_s;
                load.write_bytes_per_s += one.write_bytes_per_s;
                gpu_power += one.gpu_power_w;
            }
            let busy = (load.user + load.system + load.iowait).min(0.98);
            for (counters, values) in cpu.iter_mut().zip(cpu_values.iter_mut()) {
                let wobble = rng.gen_range(0.9..1.1);
                let (user, system, iowait) = (load.user * wobble, load.system * wobble, load.iowait * wobble);
                let idle = (1.0 - user - system - iowait).max(0.0);
                for (index, share) in [idle, iowait, user, system].into_iter().enumerate() {
                    counters[index] += share * step as f64;
                    values[index].push((counters[index] * 100.0).round() / 100.0);
                }
            }
            psi_memory += 0.0004 * step as f64;
            psi_io += (load.iowait * 1.3).min(1.0) * step as f64;
            rx += (load.read_bytes_per_s + 1.2e6) * step as f64;
            tx += (load.write_bytes_per_s + 0.6e6) * step as f64;
            lustre_read += load.read_bytes_per_s * step as f64;
            lustre_write += load.write_bytes_per_s * step as f64;
            gauges[0].push((MEMORY_TOTAL - load.memory - rng.gen_range(0.0..2e9)).round());
            // An 8-GPU node beside its GPUs: ~1.1 kW of CPUs, memory, NVSwitches, NICs and drives, CPU load
            // on top, and fans that spin up with the GPUs' heat, so the GPUs draw 30–70 % of the node.
            let rest = NODE_BASE_W + NODE_CPU_W * busy + FAN_SHARE * gpu_power;
            gauges[1].push((rest + gpu_power + rng.gen_range(-15.0..15.0)).round());
            for (values, value) in counters.iter_mut().zip([psi_memory, psi_io, rx, tx, lustre_read, lustre_write]) {
                values.push((value * 1000.0).round() / 1000.0);
            }
            stamps.push(t * 1000);
        }
        if stamps.is_empty() {
            continue;
        }
        for (index, values) in cpu_values.iter().enumerate() {
            for (mode, values) in CPU_MODES.iter().zip(values) {
                samples += line(&mut out, cpu_labels(index, mode), values, &stamps);
            }
        }
        let total = vec![MEMORY_TOTAL; stamps.len()];
        samples += line(&mut out, node_labels("node_memory_MemTotal_bytes"), &total, &stamps);
        samples += line(&mut out, node_labels("node_memory_MemAvailable_bytes"), &gauges[0], &stamps);
        samples += line(&mut out, node_labels("node_pressure_memory_waiting_seconds_total"), &counters[0], &stamps);
        samples += line(&mut out, node_labels("node_pressure_io_waiting_seconds_total"), &counters[1], &stamps);
        for (name, values) in
            [("node_network_receive_bytes_total", &counters[2]), ("node_network_transmit_bytes_total", &counters[3])]
        {
            samples += line(&mut out, network_labels(name), values, &stamps);
        }
        let power = serde_json::json!({"__name__": "ipmi_dcmi_power_consumption_watts", "instance": format!("{node}:9290"), "job": "ipmi"});
        samples += line(&mut out, power, &gauges[1], &stamps);
        for (name, values) in [("lustre_read_bytes_total", &counters[4]), ("lustre_write_bytes_total", &counters[5])] {
            samples += line(&mut out, lustre_labels(name), values, &stamps);
        }
    }
    (out, samples)
}

/// The OSTs' job statistics of the jobs among `workloads` (all GPUs of each job, on all its nodes): one
/// series per job and metric on the OST its files are striped over, from its first I/O until Lustre
/// drops the entry. Returns the JSON lines and their sample count.
pub fn job_stats_json(workloads: &[GpuWorkload], from: i64, to: i64, seed: u64) -> (String, usize) {
    job_stats_resumed(workloads, from, to, seed, &Resume::default())
}

/// [`job_stats_json`] with each job's totals going on from `resume`.
pub fn job_stats_resumed(workloads: &[GpuWorkload], from: i64, to: i64, seed: u64, resume: &Resume) -> (String, usize) {
    let mut by_job: BTreeMap<u32, Vec<&GpuWorkload>> = BTreeMap::new();
    for workload in workloads {
        by_job.entry(workload.job_id).or_default().push(workload);
    }
    // job → (stamp → its I/O over the interval: read bytes, write bytes, read ops, write ops)
    let mut job_io: BTreeMap<u32, BTreeMap<i64, [f64; 4]>> = BTreeMap::new();
    let step = NODE_STEP_S;
    for (job_id, gpus) in &by_job {
        let mut rng = StdRng::seed_from_u64(seed ^ u64::from(*job_id));
        let intervals = job_io.entry(*job_id).or_default();
        for workload in gpus {
            let first = workload.start.max(from) - workload.start.max(from).rem_euclid(step) + step;
            for t in (first..=workload.end.min(to)).step_by(step as usize) {
                if node_down(workload, t) {
                    continue;
                }
                let one = host_load(workload, t, &mut rng);
                let io = intervals.entry(t).or_default();
                let rates = [one.read_bytes_per_s, one.write_bytes_per_s, one.read_ops_per_s, one.write_ops_per_s];
                for (total, rate) in io.iter_mut().zip(rates) {
                    *total += rate * step as f64;
                }
            }
        }
    }
    let mut out = String::new();
    let samples = job_stats_lines(&mut out, &job_io, to, resume);
    (out, samples)
}

fn job_stats_lines(
    out: &mut String,
    job_io: &BTreeMap<u32, BTreeMap<i64, [f64; 4]>>,
    to: i64,
    resume: &Resume,
) -> usize {
    let names = [
        "lustre_job_read_bytes_total",
        "lustre_job_write_bytes_total",
        "lustre_job_read_samples_total",
        "lustre_job_write_samples_total",
    ];
    let mut samples = 0;
    for (job_id, intervals) in job_io {
        let (Some(&first), Some(&last)) = (intervals.keys().next(), intervals.keys().next_back()) else { continue };
        let ost = u64::from(*job_id) % OSTS;
        let labels = |name: &str| {
            serde_json::json!({"__name__": name, "component": "ost", "jobid": job_id.to_string(),
                               "target": format!("sakura-OST{ost:04x}"),
                               "instance": format!("sakura-oss{}:9169", ost / 4 + 1), "job": "lustre"})
        };
        let mut totals = [0.0f64; 4];
        for (total, name) in totals.iter_mut().zip(names) {
            *total = resume.start(&labels(name), *total);
        }
        let mut values: [Vec<f64>; 4] = Default::default();
        let mut stamps = Vec::new();
        for t in (first..=(last + JOBSTATS_LINGER_S).min(to)).step_by(NODE_STEP_S as usize) {
            if let Some(io) = intervals.get(&t) {
                for (total, add) in totals.iter_mut().zip(io) {
                    *total += add;
                }
            }
            for (series, total) in values.iter_mut().zip(totals) {
                series.push(total.round());
            }
            stamps.push(t * 1000);
        }
        for (name, series) in names.iter().zip(&values) {
            samples += line(out, labels(name), series, &stamps);
        }
    }
    samples
}

/// Imports the node series of `nodes` a few nodes at a time, then the Lustre job statistics a few hundred
/// jobs at a time (each job's from all of its nodes at once). Returns the samples.
pub async fn import_node_series(
    vm: &VictoriaMetrics,
    nodes: &[String],
    gpus_per_node: u16,
    workloads: &[GpuWorkload],
    from: i64,
    to: i64,
    seed: u64,
) -> anyhow::Result<usize> {
    let mut samples = 0;
    for batch in nodes.chunks(4) {
        let relevant: Vec<GpuWorkload> =
            workloads.iter().filter(|w| batch.contains(&w.node) && w.end >= from && w.start <= to).cloned().collect();
        let (body, batch_samples) = node_series_json(batch, gpus_per_node, &relevant, from, to, seed);
        vm.import_json_lines(body).await.context("importing demo node series")?;
        samples += batch_samples;
    }
    let jobs: Vec<u32> = {
        let mut ids: Vec<u32> = workloads.iter().filter(|w| w.end >= from && w.start <= to).map(|w| w.job_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    for batch in jobs.chunks(400) {
        let relevant: Vec<GpuWorkload> =
            workloads.iter().filter(|w| batch.binary_search(&w.job_id).is_ok()).cloned().collect();
        let (body, batch_samples) = job_stats_json(&relevant, from, to, seed);
        vm.import_json_lines(body).await.context("importing demo Lustre job statistics")?;
        samples += batch_samples;
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(node: &str, gpu: u16, job_id: u32, profile: Profile) -> GpuWorkload {
        GpuWorkload { node: node.into(), gpu, job_id, start: 0, end: 3600, profile, multi_node: false, degraded: None }
    }

    fn parse(body: &str) -> Vec<serde_json::Value> {
        body.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect()
    }

    fn rate(line: &serde_json::Value) -> f64 {
        let values = line["values"].as_array().expect("values");
        let stamps = line["timestamps"].as_array().expect("stamps");
        let (v0, v1) = (values[0].as_f64().unwrap_or(0.0), values[values.len() - 1].as_f64().unwrap_or(0.0));
        let (t0, t1) = (stamps[0].as_i64().unwrap_or(0), stamps[stamps.len() - 1].as_i64().unwrap_or(0));
        (v1 - v0) / ((t1 - t0) as f64 / 1000.0)
    }

    fn find<'a>(lines: &'a [serde_json::Value], labels: &[(&str, &str)]) -> Vec<&'a serde_json::Value> {
        lines.iter().filter(|line| labels.iter().all(|(k, v)| line["metric"][*k] == *v)).collect()
    }

    #[test]
    fn an_input_bound_job_waits_on_io_and_reads_lustre_where_training_does_not() {
        let workloads: Vec<GpuWorkload> = (0..8)
            .map(|gpu| workload("gpu001", gpu, 10, Profile::InputBound))
            .chain((0..8).map(|gpu| workload("gpu002", gpu, 11, Profile::Training { period_s: 60 })))
            .collect();
        let (body, samples) = node_series_json(&["gpu001".into(), "gpu002".into()], 8, &workloads, 0, 3600, 1);
        let written = parse(&body).iter().map(|l| l["values"].as_array().map_or(0, Vec::len)).sum::<usize>();
        assert_eq!(samples, written);
        let (stats, _) = job_stats_json(&workloads, 0, 3600, 1);
        let lines = parse(&(body + &stats));
        let iowait = |node: &str| {
            let cpus = find(
                &lines,
                &[("__name__", "node_cpu_seconds_total"), ("instance", &format!("{node}:9100")), ("mode", "iowait")],
            );
            assert_eq!(cpus.len(), DEMO_CPUS);
            cpus.iter().map(|line| rate(line)).sum::<f64>() / cpus.len() as f64
        };
        assert!(iowait("gpu001") > 0.15, "the loader's node waits on I/O: {}", iowait("gpu001"));
        assert!(iowait("gpu002") < 0.05, "training barely waits: {}", iowait("gpu002"));
        let read = |job: &str| rate(find(&lines, &[("__name__", "lustre_job_read_bytes_total"), ("jobid", job)])[0]);
        assert!(read("10") > 1e9 && read("11") < 2e8, "job 10 reads {} B/s, job 11 {}", read("10"), read("11"));
        let power = find(&lines, &[("__name__", "ipmi_dcmi_power_consumption_watts"), ("instance", "gpu002:9290")]);
        let watts = power[0]["values"][10].as_f64().unwrap_or(0.0);
        // 8 × ~600 W of training GPUs are 60–75 % of a node's draw, as on a real 8-GPU server.
        assert!((6400.0..8000.0).contains(&watts), "8 training GPUs and the host: {watts} W");
        let share = 8.0 * 600.0 / watts;
        assert!((0.6..0.75).contains(&share), "the GPUs' share of the node: {share}");
    }

    #[test]
    fn a_node_whose_gpu_fell_off_the_bus_is_silent_until_its_reboot() {
        let workloads = vec![workload("gpu003", 0, 12, Profile::XidCrash { at: 1800 })];
        let (body, _) = node_series_json(&["gpu003".into()], 8, &workloads, 0, 7200, 1);
        let lines = parse(&body);
        let power = find(&lines, &[("__name__", "ipmi_dcmi_power_consumption_watts")]);
        let stamps: Vec<i64> =
            power[0]["timestamps"].as_array().expect("stamps").iter().filter_map(|t| t.as_i64()).collect();
        assert!(stamps.iter().all(|&t| !(1_800_000..3_600_000).contains(&t)), "no samples while down");
        assert!(stamps.iter().any(|&t| t > 3_600_000), "samples after the reboot");
    }
}
