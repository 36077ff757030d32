//! The two jobs planted in every history so that its telemetry shows both kinds of failure: a training run
//! killed by its node's XID 79 and a run that dies of its own SIGSEGV.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::catalogue::Family;
use super::submissions::WorkloadGenerator;
use super::workload::{Category, FailKind, Fate, Mode, Shape, Special, Submission, UsageProfile};

/// The two planted jobs of [`Special`], drawn from their own RNG so that the rest of the workload is the
/// one the seed always gave. Not scaled with the load: their run times are part of the story.
pub(super) fn planted_failures(workload: &WorkloadGenerator<'_>, seed: u64, end: i64) -> Vec<Submission> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0058_4944_7939);
    let node_gpus = workload.params.gpus_per_node;
    if workload.params.n_nodes < 2 || node_gpus == 0 {
        return Vec::new();
    }
    // A two-node pretraining run of 30 h (limit 2 days), submitted 44 h before the end.
    let mut victim = workload.submission(&mut rng, Category::Multi, end - 44 * 3600, true);
    victim.shape = Shape::Whole(2);
    victim.cpus_req = workload.gpu_cpu * node_gpus * 2;
    victim.qos = workload.context.qos_normal;
    victim.natural_secs = 30.0 * 3600.0;
    victim.run_fraction = 1.0;
    victim.fate = Fate::Complete;
    victim.limit = Some(2880);
    victim.requeue = false;
    victim.patience = None;
    victim.prod = false;
    victim.special = Some(Special::XidVictim);
    // A 4-GPU fine-tuning run that segfaults after 2.5 h, submitted 30 h before the end.
    let gpus = 4.min(node_gpus);
    let mut crash = workload.submission(&mut rng, Category::Long, end - 30 * 3600, false);
    for _ in 0..64 {
        if Family::of_account(&workload.context.users[crash.user_index].acct) == Family::Llm {
            break;
        }
        crash = workload.submission(&mut rng, Category::Long, end - 30 * 3600, false);
    }
    crash.shape = Shape::Gpu(gpus);
    crash.cpus_req = workload.gpu_cpu.min(8) * gpus;
    crash.mem_node = Some((256 * 1024).min(workload.gpu_mem * u64::from(gpus)));
    crash.mode = Mode::Srun(1);
    crash.profile = UsageProfile::PyGpu;
    crash.natural_secs = 2.5 * 3600.0;
    crash.run_fraction = 1.0;
    crash.fate = Fate::Fail(FailKind::Segv);
    crash.limit = Some(0);
    crash.requeue = false;
    crash.patience = None;
    crash.special = Some(Special::AppCrash);
    vec![victim, crash]
}

/// Runs of one training script planted in every history's last 40 hours, so that "compare with previous
/// runs" has a story to tell: one LLM user's 4-GPU fine-tuning script run [`REPEATS`] times, every run
/// 90 minutes but [`SLOW_REPEAT`], which takes 3.5 hours (its data loader starved: the same work,
/// clearly slower). The same user, template and working directory make them one batch script.
pub(super) const REPEATS: usize = 6;
/// Which of the repeated runs (0-based, in submission order) is the slow one.
pub(super) const SLOW_REPEAT: usize = 4;
/// The repeated runs' name.
pub(super) const REPEATED_NAME: &str = "finetune-repeat";

pub(super) fn planted_repeats(workload: &WorkloadGenerator<'_>, seed: u64, end: i64) -> Vec<Submission> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5245_5045_4154);
    let node_gpus = workload.params.gpus_per_node;
    if node_gpus == 0 {
        return Vec::new();
    }
    let mut first = workload.submission(&mut rng, Category::Long, end - 40 * 3600, false);
    for _ in 0..64 {
        if Family::of_account(&workload.context.users[first.user_index].acct) == Family::Llm {
            break;
        }
        first = workload.submission(&mut rng, Category::Long, end - 40 * 3600, false);
    }
    let gpus = 4.min(node_gpus);
    let template = std::sync::Arc::new(super::workload::JobTemplate {
        name: REPEATED_NAME.into(),
        project: REPEATED_NAME.into(),
        script: "finetune_repeat.sh".into(),
        ..(*first.template).clone()
    });
    (0..REPEATS)
        .map(|index| {
            let mut run = first.clone();
            run.submit_time = end - 40 * 3600 + index as i64 * 6 * 3600;
            run.template = std::sync::Arc::clone(&template);
            run.shape = Shape::Gpu(gpus);
            run.cpus_req = workload.gpu_cpu.min(8) * gpus;
            run.mem_node = Some((256 * 1024).min(workload.gpu_mem * u64::from(gpus)));
            run.mode = Mode::Srun(1);
            run.profile = UsageProfile::PyGpu;
            run.natural_secs = if index == SLOW_REPEAT { 3.5 * 3600.0 } else { 1.5 * 3600.0 };
            run.run_fraction = 1.0;
            run.fate = Fate::Complete;
            run.limit = Some(360);
            run.requeue = false;
            run.held = false;
            run.patience = None;
            run.array = None;
            run.special = None;
            run
        })
        .collect()
}
