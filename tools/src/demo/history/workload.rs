//! The workload model: job categories, shapes, fates and launch modes, the submission record the scheduler
//! places, and when users submit.

use std::sync::Arc;

use rand::Rng;
use rand::rngs::StdRng;

use super::catalogue::Family;
use super::random::{chance, pick, uniform};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Category {
    Short = 0,
    Array = 1,
    Long = 2,
    Multi = 3,
    Cpu = 4,
    Het = 5,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// k GPUs on one node.
    Gpu(u32),
    /// k CPU slots (4 CPUs each) on one node.
    Cpu(u32),
    /// Whole nodes (exclusive).
    Whole(u32),
    /// Het job: component 0 = one CPU slot, component 1 = k GPUs.
    Het(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailKind {
    PyErr,
    Exit2,
    Segv,
    NcclAbort,
    Sigkill,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Fate {
    Complete,
    Fail(FailKind),
    Cancel { by_admin: bool },
    Oom,
}

/// How the job's work is launched (decides its steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// sbatch script that runs `n` srun steps one after the other.
    Srun(u8),
    /// sbatch script doing the work itself (no srun step).
    BatchOnly,
    /// `srun --pty bash`: no batch step, step 0 is the shell.
    Interactive,
}

/// Resource-usage profile of the step doing the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UsageProfile {
    PyGpu,
    Train,
    Nccl,
    CpuWork,
    Shell,
    Notebook,
}

/// Final state of one job row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum JobOutcome {
    Pending { held: bool },
    Running,
    Completed,
    Failed(FailKind),
    Cancelled { uid: u32 },
    CancelledPending { uid: u32 },
    Timeout,
    Oom,
    NodeFail,
    Requeued,
}

#[derive(Debug, Clone)]
pub(super) struct JobTemplate {
    pub(super) name: String,
    pub(super) project: String,
    pub(super) step: &'static str,
    pub(super) cmd: String,
    pub(super) script: String,
}

#[derive(Debug, Clone)]
pub(super) struct ArraySpec {
    pub(super) task_count: u32,
    pub(super) throttle: u32,
    pub(super) tasks: Vec<(f64, Fate, f64)>,
}

#[derive(Debug, Clone)]
pub(super) struct Submission {
    pub(super) submit_time: i64,
    pub(super) submit_delay: i64,
    pub(super) category: Category,
    pub(super) user_index: usize,
    pub(super) shape: Shape,
    pub(super) debug: bool,
    pub(super) qos: u32,
    pub(super) template: Arc<JobTemplate>,
    pub(super) mode: Mode,
    pub(super) profile: UsageProfile,
    pub(super) tasks_per_node: u32,
    /// cpus per GPU (Gpu / Het) or per CPU slot.
    pub(super) cpus_req: u32,
    /// `--mem` per node in MB, or None for per-CPU memory.
    pub(super) mem_node: Option<u64>,
    pub(super) mem_per_cpu: u64,
    /// limit in minutes, None = no --time.
    pub(super) limit: Option<u32>,
    pub(super) factor: f64,
    pub(super) natural_secs: f64,
    pub(super) fate: Fate,
    pub(super) run_fraction: f64,
    pub(super) patience: Option<i64>,
    pub(super) requeue: bool,
    pub(super) held: bool,
    /// production multi-node run: duration not scaled by the load target
    pub(super) prod: bool,
    pub(super) array: Option<Box<ArraySpec>>,
    pub(super) submit_line: Arc<str>,
    pub(super) work_dir: Arc<str>,
    pub(super) attempt: u8,
    /// One of the planted jobs the telemetry's fault stories hang on.
    pub(super) special: Option<Special>,
}

/// Jobs planted into the last hours of the history so that the demo always shows both kinds of failure
/// side by side: one killed by the infrastructure, one that crashed on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Special {
    /// A two-node training run; an "Xid 79" DOWN event is put on its first node while it runs.
    XidVictim,
    /// A 4-GPU job that dies of SIGSEGV (a CUDA illegal address: XID 31 in the telemetry).
    AppCrash,
}

/// How much more (or less) often than average an account of this family submits jobs of this category.
pub(super) fn affinity(family: Family, category: Category) -> f64 {
    let weights: [f64; 6] = match family {
        Family::Llm => [1.2, 0.6, 1.5, 6.0, 0.6, 2.0],
        Family::Vision => [1.1, 1.8, 1.1, 0.7, 0.4, 0.5],
        Family::Bio => [0.8, 1.5, 0.8, 0.25, 2.5, 0.2],
        Family::Climate => [0.6, 1.0, 1.0, 0.5, 3.0, 0.2],
        Family::Physics => [0.8, 1.0, 1.0, 0.3, 2.0, 0.2],
        Family::Ml => [1.5, 1.0, 1.5, 1.5, 0.5, 1.0],
    };
    weights[category as usize]
}

/// How busy the hour starting at `hour_start` is: JST office hours, quieter nights and weekends.
pub(super) fn hour_weight(hour_start: i64) -> f64 {
    let jst = hour_start + 9 * 3600;
    let hour = (jst.rem_euclid(86_400)) / 3600;
    let day_of_week = (jst.div_euclid(86_400) + 4).rem_euclid(7); // 0 = Sunday
    let hour_factor = match hour {
        0..=6 => 0.35,
        7 => 0.5,
        8 => 0.75,
        9 => 1.0,
        10..=11 => 1.35,
        12 => 1.1,
        13..=17 => 1.5,
        18..=19 => 1.2,
        20..=21 => 0.9,
        _ => 0.6,
    };
    let day_factor = if day_of_week == 0 || day_of_week == 6 { 0.5 } else { 1.0 };
    hour_factor * day_factor
}

/// Samples submit times from an hourly intensity (JST office hours, quieter weekends).
pub(super) struct TimeSampler {
    pub(super) start: i64,
    pub(super) cdf: Vec<f64>,
}

impl TimeSampler {
    pub(super) fn new(start: i64, hours: usize, flatness: f64) -> Self {
        let mut cdf = Vec::with_capacity(hours);
        let mut cumulative = 0.0;
        for hour_index in 0..hours {
            let weight = hour_weight(start + (hour_index as i64) * 3600);
            cumulative += weight.powf(flatness);
            cdf.push(cumulative);
        }
        TimeSampler { start, cdf }
    }

    pub(super) fn sample(&self, rng: &mut StdRng) -> i64 {
        let total = self.cdf.last().copied().unwrap_or(1.0);
        let target = uniform(rng) * total;
        let hour_index = self.cdf.partition_point(|&c| c <= target).min(self.cdf.len() - 1);
        self.start + (hour_index as i64) * 3600 + rng.gen_range(0..3600)
    }
}

pub(super) fn fate_for(rng: &mut StdRng, category: Category) -> (Fate, f64) {
    // (complete, fail, cancel, oom) weights per category
    let (complete, fail, cancel, oom) = match category {
        Category::Short => (0.79, 0.12, 0.075, 0.015),
        Category::Array => (0.88, 0.07, 0.035, 0.015),
        Category::Long => (0.66, 0.18, 0.13, 0.03),
        Category::Multi => (0.58, 0.25, 0.16, 0.01),
        Category::Cpu => (0.80, 0.09, 0.06, 0.05),
        Category::Het => (0.75, 0.15, 0.10, 0.0),
    };
    let which = pick(rng, &[(0u8, complete), (1, fail), (2, cancel), (3, oom)]);
    match which {
        0 => (Fate::Complete, 1.0),
        1 => {
            let fail_kind = if category == Category::Multi {
                pick(
                    rng,
                    &[
                        (FailKind::NcclAbort, 0.4),
                        (FailKind::PyErr, 0.4),
                        (FailKind::Segv, 0.1),
                        (FailKind::Sigkill, 0.1),
                    ],
                )
            } else {
                pick(
                    rng,
                    &[
                        (FailKind::PyErr, 0.72),
                        (FailKind::Exit2, 0.1),
                        (FailKind::Segv, 0.1),
                        (FailKind::Sigkill, 0.08),
                    ],
                )
            };
            let uniform_draw = uniform(rng);
            (Fate::Fail(fail_kind), (uniform_draw * uniform_draw).max(0.002))
        }
        2 => (Fate::Cancel { by_admin: chance(rng, 0.06) }, rng.gen_range(0.03..1.0)),
        _ => (Fate::Oom, rng.gen_range(0.01..0.6)),
    }
}
