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
