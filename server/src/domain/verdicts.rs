//! The verdicts of a job report: what its GPUs' numbers say, each with the evidence that triggered
//! it and, where one exists, what to do next. Pure functions over numbers; no I/O.
//!
//! Verdicts summarise before they list: one line per node and XID code rather than per GPU, the
//! outlier node named against the rest rather than every GPU's figures, and long evidence lists cut
//! to the lines that differ most.

use std::collections::BTreeMap;

use slurmlens_wire::{Severity, VerdictKind};

use super::blame::{self, Strength};
use super::gpu::{GpuRef, format_gpu_indices};
use super::report::Summary;
use super::time::iso_utc;

/// A verdict kind with its severity.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub kind: VerdictKind,
    pub severity: Severity,
    pub message: String,
    pub evidence: Vec<String>,
    /// What the job's owner can do about it, where something can be done.
    pub next_step: Option<String>,
}

/// What the verdict rules look at, per GPU.
#[derive(Debug, Clone)]
pub struct GpuFacts {
    pub gpu: GpuRef,
    pub gpu_util: Option<Summary>,
    pub tensor_active: Option<Summary>,
    pub fb_used: Option<Summary>,
    pub fb_capacity_mib: Option<f64>,
    pub xid: Vec<(i64, u32)>,
}

impl GpuFacts {
    fn label(&self) -> String {
        format!("{} GPU {}", self.gpu.node, self.gpu.index)
    }
}

/// Thresholds of the verdicts. Tensor activity of 40–50 % is good for training; "GPU util 100 %" alone is not.
pub const IDLE_UTIL_PCT: f64 = 5.0;
pub const BUSY_UTIL_PCT: f64 = 60.0;
pub const LOW_TENSOR_PCT: f64 = 15.0;
pub const GOOD_TENSOR_PCT: f64 = 30.0;
pub const MEMORY_FULL_RATIO: f64 = 0.95;
pub const UNBALANCED_SPREAD_PCT: f64 = 30.0;
/// A node whose mean is under this share of the other nodes' median is an outlier.
pub const OUTLIER_SHARE: f64 = 0.5;
/// Evidence lines a verdict lists before it says how many more there are.
pub const EVIDENCE_LINES: usize = 8;

fn mean_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), value| (sum + value, count + 1));
    (count > 0).then(|| sum / count as f64)
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 0 => Some((values[middle - 1] + values[middle]) / 2.0),
        _ => Some(values[middle]),
    }
}

/// The first `EVIDENCE_LINES` lines, then how many were left out.
fn capped(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() > EVIDENCE_LINES {
        let more = lines.len() - EVIDENCE_LINES;
        lines.truncate(EVIDENCE_LINES);
        lines.push(format!("… and {more} more"));
    }
    lines
}

/// GPUs named per node with the highest of their values: "gpu001 GPUs 1-7", 0.3.
fn per_node(gpus: &[(&GpuFacts, f64)]) -> Vec<(String, f64)> {
    let mut nodes: BTreeMap<&str, (Vec<u16>, f64)> = BTreeMap::new();
    for (gpu, value) in gpus {
        let entry = nodes.entry(gpu.gpu.node.as_str()).or_insert((Vec::new(), f64::MIN));
        entry.0.push(gpu.gpu.index);
        entry.1 = entry.1.max(*value);
    }
    nodes
        .into_iter()
        .map(|(node, (indices, highest))| match indices.as_slice() {
            [index] => (format!("{node} GPU {index}"), highest),
            _ => (format!("{node} GPUs {}", format_gpu_indices(&indices)), highest),
        })
        .collect()
}

/// Every kind [`verdicts`] gives: findings read from the GPUs' own figures.
pub const GPU_VERDICT_KINDS: &[VerdictKind] = &[
    VerdictKind::IdleGpus,
    VerdictKind::OutlierNode,
    VerdictKind::LowTensorActivity,
    VerdictKind::Good,
    VerdictKind::MemoryNearlyFull,
    VerdictKind::UnbalancedGpus,
    VerdictKind::XidErrors,
    VerdictKind::ProgramGpuFaults,
];

/// The verdicts for a job's GPUs, each with its evidence, most severe first. `ended_badly`: whether
/// the job failed (a job that completed is never told to resubmit).
pub fn verdicts(gpus: &[GpuFacts], ended_badly: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.extend(idle(gpus));
    let outlier = outlier_nodes(gpus);
    // A job with a slow node, or whose GPUs mostly idled, is not "efficient" as a whole, whatever the
    // busy GPUs' mean says.
    let mostly_idle = 2 * idle_count(gpus) >= gpus.iter().filter(|gpu| gpu.gpu_util.is_some()).count();
    findings.extend(
        tensor_work(gpus).filter(|found| (outlier.is_none() && !mostly_idle) || found.kind != VerdictKind::Good),
    );
    findings.extend(outlier);
    findings.extend(memory_full(gpus));
    findings.extend(unbalanced(gpus));
    findings.extend(xid_faults(gpus, ended_badly));
    findings.sort_by_key(|finding| std::cmp::Reverse(rank(finding.severity)));
    findings
}

fn rank(severity: Severity) -> u8 {
    match severity {
        Severity::Critical => 2,
        Severity::Warning => 1,
        Severity::Info => 0,
    }
}

/// GPUs whose mean utilisation is under the idle threshold.
fn idle_count(gpus: &[GpuFacts]) -> usize {
    gpus.iter().filter(|gpu| gpu.gpu_util.is_some_and(|util| util.mean < IDLE_UTIL_PCT)).count()
}

/// "the 8 busy GPUs", "the 1 busy GPU of 8": the population a figure is of.
fn busy_population(busy: usize, all: usize) -> String {
    let noun = if busy == 1 { "GPU" } else { "GPUs" };
    if busy == all { format!("the {busy} busy {noun}") } else { format!("the {busy} busy {noun} of {all}") }
}

fn idle(gpus: &[GpuFacts]) -> Option<Finding> {
    let idle: Vec<(&GpuFacts, f64)> = gpus
        .iter()
        .filter_map(|gpu| Some((gpu, gpu.gpu_util?.mean)))
        .filter(|(_, util)| *util < IDLE_UTIL_PCT)
        .collect();
    if idle.is_empty() {
        return None;
    }
    Some(Finding {
        kind: VerdictKind::IdleGpus,
        severity: Severity::Warning,
        message: format!(
            "{} of {} GPUs were idle (mean utilisation under {IDLE_UTIL_PCT} %): they were allocated but not used",
            idle.len(),
            gpus.len()
        ),
        evidence: capped(
            per_node(&idle)
                .into_iter()
                .map(|(gpus, highest)| match gpus.contains("GPUs") {
                    true => format!("{gpus}: mean utilisation at most {highest:.1} %"),
                    false => format!("{gpus}: mean utilisation {highest:.1} %"),
                })
                .collect(),
        ),
        next_step: Some(
            "ask for only the GPUs the program uses (--gpus), or check that every rank picks its own GPU \
             (LOCAL_RANK, CUDA_VISIBLE_DEVICES)"
                .into(),
        ),
    })
}

/// One node far below the others on a multi-node job: every synchronous step waits for it.
fn outlier_nodes(gpus: &[GpuFacts]) -> Option<Finding> {
    let tensor = gpus.iter().any(|gpu| gpu.tensor_active.is_some());
    let name = if tensor { "tensor activity" } else { "utilisation" };
    let metric = |gpu: &GpuFacts| if tensor { gpu.tensor_active } else { gpu.gpu_util }.map(|s| s.mean);
    let mut by_node: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for gpu in gpus.iter().filter(|gpu| gpu.gpu_util.is_some_and(|u| u.mean >= IDLE_UTIL_PCT)) {
        if let Some(value) = metric(gpu) {
            by_node.entry(gpu.gpu.node.as_str()).or_default().push(value);
        }
    }
    if by_node.len() < 3 {
        return None;
    }
    let means: BTreeMap<&str, f64> =
        by_node.iter().filter_map(|(node, values)| Some((*node, mean_of(values.iter().copied())?))).collect();
    let outliers: Vec<(&str, f64, f64)> = means
        .iter()
        .filter_map(|(node, mean)| {
            let mut others: Vec<f64> = means.iter().filter(|(other, _)| *other != node).map(|(_, m)| *m).collect();
            let typical = median(&mut others)?;
            (typical >= 10.0 && *mean < typical * OUTLIER_SHARE).then_some((*node, *mean, typical))
        })
        .collect();
    // More than a few "outliers" is a spread, not an outlier; `unbalanced_gpus` speaks of it.
    if outliers.is_empty() || outliers.len() * 4 > means.len() {
        return None;
    }
    let others = means.len() - outliers.len();
    let lines: Vec<String> = outliers
        .iter()
        .map(|(node, mean, typical)| {
            format!("{node} ran at {mean:.0} % {name} while the other {others} nodes ran at {typical:.0} %")
        })
        .collect();
    let names: Vec<&str> = outliers.iter().map(|(node, _, _)| *node).collect();
    Some(Finding {
        kind: VerdictKind::OutlierNode,
        severity: Severity::Warning,
        message: format!(
            "{}: a slow node holds back every synchronous step of the whole job",
            lines.first().cloned().unwrap_or_default()
        ),
        evidence: lines,
        next_step: Some(format!(
            "resubmit without it (--exclude={}) and tell your provider the node's name; its XID, thermal and \
             link counters are in the sections below",
            names.join(",")
        )),
    })
}

fn tensor_work(gpus: &[GpuFacts]) -> Option<Finding> {
    let busy: Vec<&GpuFacts> =
        gpus.iter().filter(|gpu| gpu.gpu_util.is_some_and(|u| u.mean >= IDLE_UTIL_PCT)).collect();
    let util = mean_of(busy.iter().filter_map(|gpu| gpu.gpu_util.map(|u| u.mean)))?;
    let tensor = mean_of(busy.iter().filter_map(|gpu| gpu.tensor_active.map(|t| t.mean)))?;
    let population = busy_population(busy.len(), gpus.iter().filter(|gpu| gpu.gpu_util.is_some()).count());
    if util >= BUSY_UTIL_PCT && tensor < LOW_TENSOR_PCT {
        let mut ranked: Vec<(&GpuFacts, f64)> =
            busy.iter().filter_map(|gpu| Some((*gpu, gpu.tensor_active?.mean))).collect();
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (low, high) = (ranked.first().map_or(0.0, |r| r.1), ranked.last().map_or(0.0, |r| r.1));
        let mut evidence = vec![format!("{} busy GPUs: tensor activity from {low:.1} % to {high:.1} %", ranked.len())];
        evidence.extend(ranked.iter().take(3).map(|(gpu, value)| {
            format!(
                "{}: utilisation {:.0} %, tensor activity {value:.1} %",
                gpu.label(),
                gpu.gpu_util.map_or(0.0, |u| u.mean)
            )
        }));
        Some(Finding {
            kind: VerdictKind::LowTensorActivity,
            severity: Severity::Warning,
            message: format!(
                "GPUs look busy (mean utilisation {util:.0} % on {population}) but tensor cores were active only \
                 {tensor:.1} % of the time: \"utilisation\" counts any kernel running, not useful work"
            ),
            evidence,
            next_step: Some(
                "train in mixed precision (bf16 or TF32, e.g. torch.autocast), use larger batches, and see the \
                 trace section for time lost to communication or data loading"
                    .into(),
            ),
        })
    } else if tensor >= GOOD_TENSOR_PCT {
        Some(Finding {
            kind: VerdictKind::Good,
            severity: Severity::Info,
            message: format!("tensor cores active {tensor:.0} % of the time on {population}: efficient use"),
            evidence: vec![format!(
                "on {population}: mean utilisation {util:.0} %, mean tensor activity {tensor:.1} %"
            )],
            next_step: None,
        })
    } else {
        None
    }
}

fn memory_full(gpus: &[GpuFacts]) -> Option<Finding> {
    let full: Vec<String> = gpus
        .iter()
        .filter_map(|gpu| {
            let peak = gpu.fb_used?.max;
            let capacity = gpu.fb_capacity_mib.filter(|c| *c > 0.0)?;
            (peak / capacity >= MEMORY_FULL_RATIO).then(|| {
                format!("{}: peak {:.0} of {:.0} MiB ({:.0} %)", gpu.label(), peak, capacity, 100.0 * peak / capacity)
            })
        })
        .collect();
    (!full.is_empty()).then(|| Finding {
        kind: VerdictKind::MemoryNearlyFull,
        severity: Severity::Warning,
        message: format!(
            "GPU memory reached over {:.0} % of capacity: close to out-of-memory",
            MEMORY_FULL_RATIO * 100.0
        ),
        evidence: capped(full),
        next_step: Some(
            "lower the micro-batch size, or use activation checkpointing or a sharded optimizer (FSDP, ZeRO)".into(),
        ),
    })
}

/// Idle GPUs have their own verdict; balance is judged among the GPUs that worked.
fn unbalanced(gpus: &[GpuFacts]) -> Option<Finding> {
    let means: Vec<(&GpuFacts, f64)> = gpus
        .iter()
        .filter_map(|gpu| gpu.gpu_util.map(|u| (gpu, u.mean)))
        .filter(|&(_, mean)| mean >= IDLE_UTIL_PCT)
        .collect();
    let (low_gpu, low) = means.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let (high_gpu, high) = means.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    (means.len() >= 2 && high - low >= UNBALANCED_SPREAD_PCT).then(|| Finding {
        kind: VerdictKind::UnbalancedGpus,
        severity: Severity::Warning,
        message: format!(
            "GPUs were unevenly loaded: mean utilisation ranges from {low:.0} % to {high:.0} %; the slowest rank sets the pace"
        ),
        evidence: vec![
            format!("{}: mean utilisation {low:.1} %", low_gpu.label()),
            format!("{}: mean utilisation {high:.1} %", high_gpu.label()),
        ],
        next_step: Some("balance the work per rank (data shards of equal size, equal pipeline stages)".into()),
    })
}

/// XID errors, read as the failure rules read them: a program's own faults (XID 31) as the
/// program's, hardware and driver faults as the infrastructure's. One line per node and code.
fn xid_faults(gpus: &[GpuFacts], ended_badly: bool) -> Vec<Finding> {
    let mut seen: BTreeMap<(u32, &str), (i64, Vec<u16>)> = BTreeMap::new();
    for gpu in gpus {
        for &(at, xid) in &gpu.xid {
            let entry = seen.entry((xid, gpu.gpu.node.as_str())).or_insert((at, Vec::new()));
            entry.0 = entry.0.min(at);
            entry.1.push(gpu.gpu.index);
        }
    }
    let mut program = Vec::new();
    let mut hardware = Vec::new();
    for ((xid, node), (at, mut indices)) in seen {
        indices.sort_unstable();
        indices.dedup();
        let (strength, meaning) = blame::xid_strength(xid);
        let gpus = match indices.as_slice() {
            [index] => format!("GPU {index}"),
            _ => format!("{} GPUs ({})", indices.len(), format_gpu_indices(&indices)),
        };
        let line = format!("{node}: XID {xid} on {gpus} from {}: {meaning}", iso_utc(at));
        match strength {
            Strength::Application => program.push(line),
            _ => hardware.push(line),
        }
    }
    let mut findings = Vec::new();
    if !hardware.is_empty() {
        findings.push(Finding {
            kind: VerdictKind::XidErrors,
            severity: Severity::Critical,
            message: "the GPU driver reported hardware or driver faults on the job's GPUs".into(),
            evidence: capped(hardware),
            next_step: Some(if ended_badly {
                "resubmit (the job can resume from its last checkpoint); if the node is not drained, tell your \
                 provider its name"
                    .into()
            } else {
                "nothing to rerun: the job ended well despite them; if the node is not drained, tell your provider \
                 its name"
                    .into()
            }),
        });
    }
    if !program.is_empty() {
        findings.push(Finding {
            kind: VerdictKind::ProgramGpuFaults,
            severity: Severity::Warning,
            message: "the program caused GPU faults, such as an access to a memory address it does not own".into(),
            evidence: capped(program),
            next_step: Some(
                "rerun a small case under compute-sanitizer, or with CUDA_LAUNCH_BLOCKING=1 to see the failing \
                 kernel in the stack trace"
                    .into(),
            ),
        });
    }
    findings
}

/// Where the job's GPU samples start well after its window starts or stop well before it ends (more
/// than three steps and five minutes): an exporter added or a node monitored mid-run, retention, or a
/// scrape that stopped. The figures and charts then cover only the sampled part, which a page would
/// not say otherwise. `first` and `last` bound the sampled buckets, `share` is the sampled share of the
/// job's GPU-time, `run` the window (its end is now while the job runs).
pub fn telemetry_gap(
    first: i64,
    last: i64,
    share: f64,
    run: (i64, i64),
    step_s: u64,
    running: bool,
) -> Option<Finding> {
    let (start, end) = run;
    let allowed = step_s.saturating_mul(3).max(300);
    let late = u64::try_from(first - start).unwrap_or(0);
    let early = u64::try_from(end - last).unwrap_or(0);
    let (late, early) = (late > allowed, early > allowed);
    if !late && !early && share >= super::coverage::WHOLE_SHARE {
        return None;
    }
    let covers = format!("the figures and charts cover {} of the run", super::coverage::percent(share));
    let mut parts = Vec::new();
    if late {
        parts.push(format!(
            "the GPU samples start at {}, {} after the job did",
            iso_utc(first),
            super::history::duration((first - start) as f64)
        ));
    }
    if early && running {
        parts.push(format!(
            "no GPU samples since {} ({} ago)",
            iso_utc(last),
            super::history::duration((end - last) as f64)
        ));
    } else if early {
        parts.push(format!(
            "the GPU samples end at {}, {} before the job did",
            iso_utc(last),
            super::history::duration((end - last) as f64)
        ));
    }
    if parts.is_empty() {
        parts.push("some of the job's GPUs have samples over only part of its run".to_string());
    }
    Some(Finding {
        kind: VerdictKind::TelemetryGap,
        severity: Severity::Warning,
        message: format!("{}: {covers}, none is extrapolated to the rest", parts.join("; ")),
        evidence: Vec::new(),
        next_step: Some(
            "nothing in the job needs changing; if it lasts, tell your provider: the nodes' GPU exporter \
             (dcgm-exporter) or its scrape was missing for part of the run"
                .into(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(mean: f64) -> Option<Summary> {
        Some(Summary { mean, max: mean, samples: 10 })
    }

    fn facts(node: &str, index: u16, util: f64, tensor: f64) -> GpuFacts {
        GpuFacts {
            gpu: GpuRef { node: node.into(), index },
            gpu_util: summary(util),
            tensor_active: summary(tensor),
            fb_used: summary(1000.0),
            fb_capacity_mib: Some(81_559.0),
            xid: Vec::new(),
        }
    }

    fn kinds(found: &[Finding]) -> Vec<VerdictKind> {
        found.iter().map(|f| f.kind).collect()
    }

    #[test]
    fn busy_gpus_without_tensor_work_are_called_out_with_a_next_step() {
        let found = verdicts(&[facts("n1", 0, 97.0, 3.0), facts("n1", 1, 95.0, 4.0)], true);
        assert_eq!(kinds(&found), [VerdictKind::LowTensorActivity]);
        assert!(found[0].next_step.as_deref().is_some_and(|step| step.contains("mixed precision")));
        assert_eq!(found[0].evidence[0], "2 busy GPUs: tensor activity from 3.0 % to 4.0 %");
        assert_eq!(verdicts(&[facts("n1", 0, 90.0, 45.0)], true)[0].kind, VerdictKind::Good);
    }

    #[test]
    fn a_job_whose_gpus_mostly_idled_is_never_called_efficient() {
        // One busy GPU of eight: its own figures are named as its own, and no green verdict.
        let mut gpus: Vec<GpuFacts> = (1..8).map(|g| facts("n1", g, 0.5, 0.0)).collect();
        gpus.push(facts("n1", 0, 99.0, 45.0));
        let found = verdicts(&gpus, true);
        assert!(!kinds(&found).contains(&VerdictKind::Good), "{:?}", kinds(&found));
        assert!(found.iter().any(|f| f.kind == VerdictKind::IdleGpus && f.message.starts_with("7 of 8 GPUs")));
        // Most busy: the efficient verdict names its population.
        let mut gpus: Vec<GpuFacts> = (1..8).map(|g| facts("n1", g, 99.0, 45.0)).collect();
        gpus.push(facts("n1", 0, 0.5, 0.0));
        let good = verdicts(&gpus, true)
            .into_iter()
            .find(|f| f.kind == VerdictKind::Good)
            .expect("efficient on the busy ones");
        assert!(good.message.contains("on the 7 busy GPUs of 8"), "{}", good.message);
    }

    #[test]
    fn one_slow_node_is_named_against_the_others() {
        let mut gpus: Vec<GpuFacts> =
            (1..=32).flat_map(|n| (0..8).map(move |g| facts(&format!("gpu{n:03}"), g, 99.0, 46.0))).collect();
        for gpu in gpus.iter_mut().filter(|gpu| gpu.gpu.node == "gpu017") {
            gpu.tensor_active = summary(2.0);
        }
        let found = verdicts(&gpus, true);
        let outlier = found.iter().find(|f| f.kind == VerdictKind::OutlierNode).expect("an outlier verdict");
        assert_eq!(outlier.evidence, ["gpu017 ran at 2 % tensor activity while the other 31 nodes ran at 46 %"]);
        assert!(outlier.next_step.as_deref().is_some_and(|step| step.contains("--exclude=gpu017")));
        assert!(!kinds(&found).contains(&VerdictKind::LowTensorActivity));
    }

    #[test]
    fn eight_gpus_off_the_bus_are_one_line_and_a_program_fault_reads_as_the_programs() {
        let mut gpus: Vec<GpuFacts> = (0..8).map(|g| facts("gpu073", g, 99.0, 46.0)).collect();
        for gpu in &mut gpus {
            gpu.xid = vec![(1_796_041_293, 79)];
        }
        let mut crashed = facts("gpu046", 3, 99.0, 46.0);
        crashed.xid = vec![(1_796_041_000, 31)];
        gpus.push(crashed);
        let found = verdicts(&gpus, true);
        assert_eq!(found[0].kind, VerdictKind::XidErrors, "the most severe first: {:?}", kinds(&found));
        assert_eq!(found[0].evidence.len(), 1);
        assert!(
            found[0].evidence[0].starts_with("gpu073: XID 79 on 8 GPUs (0-7) from 2026-11-30T"),
            "{}",
            found[0].evidence[0]
        );
        assert!(!found[0].evidence[0].contains("1796041293"), "no raw Unix time");
        let program = found.iter().find(|f| f.kind == VerdictKind::ProgramGpuFaults).expect("the program's own fault");
        assert_eq!(program.severity, Severity::Warning);
        assert!(program.evidence[0].starts_with("gpu046: XID 31 on GPU 3"), "{:?}", program.evidence);
    }

    #[test]
    fn idle_gpus_are_named_per_node_and_long_lists_are_cut() {
        let mut gpus: Vec<GpuFacts> = (0..8).map(|g| facts("n1", g, 1.0, 0.0)).collect();
        gpus.push(facts("n2", 0, 20.0, 10.0));
        let found = verdicts(&gpus, true);
        let idle = found.iter().find(|f| f.kind == VerdictKind::IdleGpus).expect("idle verdict");
        assert_eq!(idle.evidence, ["n1 GPUs 0-7: mean utilisation at most 1.0 %"]);
        let lines = capped((0..20).map(|i| i.to_string()).collect());
        assert_eq!((lines.len(), lines[EVIDENCE_LINES].as_str()), (EVIDENCE_LINES + 1, "… and 12 more"));
    }

    #[test]
    fn nearly_full_memory_and_uneven_load_are_found() {
        let mut full = facts("n2", 0, 70.0, 40.0);
        full.fb_used = Some(Summary { mean: 60_000.0, max: 80_000.0, samples: 10 });
        let found = verdicts(&[facts("n1", 1, 20.0, 10.0), full], true);
        assert!(kinds(&found).contains(&VerdictKind::UnbalancedGpus), "{:?}", kinds(&found));
        assert!(kinds(&found).contains(&VerdictKind::MemoryNearlyFull), "{:?}", kinds(&found));
    }

    #[test]
    fn samples_that_start_late_or_stop_early_are_said_with_their_share() {
        // 15 s steps: a running job whose newest bucket is 23 minutes old.
        let end = 1_796_032_800;
        let start = end - 7200;
        let running = telemetry_gap(start, end - 23 * 60, 0.8, (start, end), 15, true).expect("a gap");
        assert_eq!((running.kind, running.severity), (VerdictKind::TelemetryGap, Severity::Warning));
        assert!(
            running.message.starts_with("no GPU samples since 2026-11-30T09:37:00Z (23m 00s ago)"),
            "{}",
            running.message
        );
        assert!(running.message.contains("cover 80 % of the run"), "{}", running.message);
        let late = telemetry_gap(end - 2400, end, 0.05, (end - 48_300, end), 60, false).expect("a late start");
        assert!(late.message.contains("12h 45m after the job did"), "{}", late.message);
        assert!(late.message.contains("cover 5 % of the run"), "{}", late.message);
        // A step or a few late is the scrape's rhythm, not a gap; long steps allow three of theirs.
        assert!(telemetry_gap(start, end - 60, 1.0, (start, end), 15, true).is_none());
        assert!(telemetry_gap(start + 299, end, 0.99, (start, end), 15, true).is_none());
        assert!(telemetry_gap(start, end - 2 * 3600, 0.96, (start, end), 3600, false).is_none());
    }
}
