//! Failure attribution, "was the failure mine?": whether a job that ended badly ended because of the infrastructure
//! (GPU hardware, node, network) or the application, with the evidence in time order.
//!
//! The rules read facts gathered elsewhere (XID codes from dcgm-exporter, node events from slurmdbd,
//! ping-mesh loss and RTT, link and ECC counters) and say `infrastructure`, `application` or `unknown`.
//! They never guess past their evidence: a failed job with no infrastructure evidence is the
//! application's only when Slurm's own facts say so (a non-zero exit, out of memory, its time limit).
//!
//! Each fact is weighed by its relevance to the job before it counts (`weigh`): a ping-mesh loss
//! between two racks says nothing about a single-node job, whose GPUs talk over NVLink, nor about a job
//! that barely used the network, and a fault that cleared long before the job ended did not end it.
//! Such facts stay in the list as context. A program's own GPU fault (XID 31) outweighs network noise:
//! only a hardware fault on the job's own GPUs or nodes overrides it.

use slurmlens_wire::{EvidenceSource, EvidenceStrength};

use super::counted;
use super::coverage::{self, Coverage, Timing};
use super::exit_code::ExitCode;
use super::state::JobStateBase;

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    Infrastructure,
    Application,
    Unknown,
}

impl Blame {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Infrastructure => "infrastructure",
            Self::Application => "application",
            Self::Unknown => "unknown",
        }
    }
}

/// How strongly one fact points at the infrastructure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strength {
    /// Seen near the job but not on its path, or long over when it ended: shown, not counted.
    Context,
    /// Points at the application (an XID the driver raises for program faults).
    Application,
    /// Consistent with an infrastructure cause but not enough alone (a brief RTT spike).
    Weak,
    /// Enough alone (a GPU off the bus, a node down, sustained loss).
    Strong,
}

impl Strength {
    /// The wire's word for it.
    pub fn wire(self) -> EvidenceStrength {
        match self {
            Self::Context => EvidenceStrength::Context,
            Self::Application => EvidenceStrength::Application,
            Self::Weak => EvidenceStrength::Weak,
            Self::Strong => EvidenceStrength::Strong,
        }
    }
}

/// One fact, placed in time.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Epoch seconds: when it first showed.
    pub at: i64,
    /// Epoch seconds: when it last showed (`at` for a single event).
    pub until: i64,
    /// `xid`, `node_event`, `pingmesh_loss`, `pingmesh_rtt`, `link_errors`, `ecc`, `slurm`.
    pub source: EvidenceSource,
    /// Node (or `tor-a → tor-b` for ping-mesh paths).
    pub place: String,
    pub detail: String,
    pub strength: Strength,
}

/// What Slurm says of the job's end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ending {
    pub state: JobStateBase,
    /// The raw wait status's exit code (0–255) and signal.
    pub exit_code: u32,
    pub signal: u32,
    /// Who cancelled it (`kill_requid`): 0 is root/SlurmUser, i.e. an administrator.
    pub cancelled_by: Option<u32>,
    pub owner_uid: u32,
}

/// The classification with the reason in words and the evidence in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub blame: Blame,
    pub reason: String,
    pub evidence: Vec<Evidence>,
}

/// Whether a job's ending calls for a classification at all (failed, node-failed, timed out,
/// out of memory, boot-failed, or cancelled by someone other than its owner).
pub fn needs_classification(ending: &Ending) -> bool {
    match ending.state {
        JobStateBase::Cancelled => ending.cancelled_by.is_some_and(|uid| uid != ending.owner_uid),
        state => ended_badly(state, true),
    }
}

/// Whether a job ended badly: it failed, lost a node, timed out, ran out of memory, failed to boot,
/// passed its deadline, or was cancelled after it started. Wider than [`needs_classification`] (a job
/// its owner cancelled is here too): these are the jobs whose "Failure" a listing shows first.
pub fn ended_badly(state: JobStateBase, started: bool) -> bool {
    match state {
        JobStateBase::Failed
        | JobStateBase::NodeFail
        | JobStateBase::Timeout
        | JobStateBase::OutOfMemory
        | JobStateBase::BootFail
        | JobStateBase::Deadline => true,
        JobStateBase::Cancelled => started,
        _ => false,
    }
}

/// How an XID code reads: NVIDIA's XID catalogue splits hardware and driver faults from faults a
/// program causes. Codes not listed are weak evidence (the driver saw something; it may be either).
pub fn xid_strength(code: u32) -> (Strength, &'static str) {
    match code {
        13 => (Strength::Application, "graphics engine exception (usually a program fault)"),
        31 => (Strength::Application, "GPU memory page fault (usually an illegal address in the program)"),
        43 => (Strength::Application, "GPU stopped processing (a program's fault or a prior error)"),
        45 => (Strength::Weak, "preemptive cleanup after an earlier error"),
        48 => (Strength::Strong, "double-bit ECC error"),
        61 | 62 => (Strength::Strong, "internal micro-controller error"),
        63 | 64 => (Strength::Strong, "ECC page retirement or row remapping event"),
        74 => (Strength::Strong, "NVLink error"),
        79 => (Strength::Strong, "GPU has fallen off the bus"),
        92 => (Strength::Strong, "high single-bit ECC error rate"),
        94 | 95 => (Strength::Strong, "contained/uncontained ECC error"),
        119 | 120 => (Strength::Strong, "GSP firmware error"),
        121 => (Strength::Strong, "C2C link error"),
        140 => (Strength::Strong, "unrecovered ECC error"),
        _ => (Strength::Weak, "XID error"),
    }
}

/// How a node event's reason reads: set by Slurm or an administrator for a node fault, or an effect of
/// what ran on it (`Kill task failed` is a process that would not die, often the program's own).
pub fn node_event_strength(reason: &str, down: bool) -> Strength {
    let reason = reason.to_ascii_lowercase();
    if reason.contains("kill task failed") {
        Strength::Weak
    } else if down
        || ["xid", "not responding", "reboot", "hardware", "ecc", "nvlink", "gpu", "link", "fallen off"]
            .iter()
            .any(|word| reason.contains(word))
    {
        Strength::Strong
    } else {
        Strength::Weak
    }
}

/// Network traffic under which a job's ranks barely talk: a path's loss cannot have slowed or ended it.
pub const QUIET_RDMA_BYTES_PER_S: f64 = 50e6;
/// A fault that last showed this long before the job ended is one the job ran through.
pub const RECOVERED_S: i64 = 600;
/// Node events this close before a job's start or after its end are read as its own: a drain often
/// lands minutes after the fault that ended the job.
pub const NODE_EVENT_MARGIN_S: i64 = 300;

/// What the job exposed to each kind of fault, so the rules weigh a fact by its relevance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exposure {
    /// Whether the job spans several nodes: only then do its ranks talk over the network.
    pub multi_node: bool,
    /// The busiest of its nodes' mean RDMA traffic (bytes/s, both directions); `None` when not read.
    pub rdma_bytes_per_s: Option<f64>,
    /// The job's start and end (epoch seconds): the end is the moment it failed.
    pub start: i64,
    pub end: i64,
    /// What GPU or node telemetry covers of its run: without it, no fault could have been seen, and
    /// with part of it, none could have been seen in the rest.
    pub telemetry: Option<Coverage>,
}

/// Whether a fact is about the network between racks rather than the job's own GPUs and nodes.
fn on_a_path(source: EvidenceSource) -> bool {
    matches!(source, EvidenceSource::PingmeshLoss | EvidenceSource::PingmeshRtt)
}

/// Weighs one fact by its relevance to the job; the reason for setting it aside joins its detail.
/// A fact after the job's end is at most a possible cause (Slurm drains a node minutes after the fault
/// that ended a job, but the drain is not the fault); one over before it started is context.
pub fn weigh(fact: &mut Evidence, exposure: &Exposure) {
    if fact.strength == Strength::Application {
        return;
    }
    let when = coverage::timing_in_words(fact.at, fact.until, exposure.start, exposure.end);
    match coverage::timing(fact.at, fact.until, exposure.start, exposure.end) {
        Timing::AfterEnd if fact.strength > Strength::Context => {
            fact.strength = Strength::Weak;
            fact.detail = format!("{} ({when}: a possible cause, not seen during its run)", fact.detail);
            return;
        }
        Timing::BeforeStart if fact.strength > Strength::Context => {
            fact.strength = Strength::Context;
            fact.detail = format!("{} ({when})", fact.detail);
            return;
        }
        _ => {}
    }
    if !on_a_path(fact.source) {
        return;
    }
    let quiet = exposure.rdma_bytes_per_s.filter(|rate| *rate < QUIET_RDMA_BYTES_PER_S).map(|rate| {
        format!("the job's nodes moved only {:.1} MB/s over RDMA, too little for a path's loss to matter", rate / 1e6)
    });
    let aside = if exposure.multi_node {
        quiet
    } else {
        Some("not on the job's path: a single-node job's GPUs talk over NVLink, not the network".to_string())
    };
    if let Some(aside) = aside {
        fact.strength = Strength::Context;
        fact.detail = format!("{} ({aside})", fact.detail);
    } else if exposure.end - fact.until > RECOVERED_S && fact.strength == Strength::Strong {
        fact.strength = Strength::Weak;
        fact.detail =
            format!("{} (cleared {} min before the job ended)", fact.detail, (exposure.end - fact.until) / 60);
    }
}

/// Whether a fact first showed after the job's end.
fn after_end(fact: &Evidence, exposure: &Exposure) -> bool {
    coverage::timing(fact.at, fact.until, exposure.start, exposure.end) == Timing::AfterEnd
}

/// "during its run", or, where telemetry covers only part of it, "in the part of its run telemetry
/// covers (5 % of its run, …)": a fault cannot have been seen where nothing was watching.
fn while_watched(telemetry: Option<&Coverage>) -> String {
    match telemetry {
        Some(covered) if !covered.whole() => {
            format!("in the part of its run its telemetry covers, {}", covered.in_words())
        }
        _ => "during its run".to_string(),
    }
}

/// The classification of a job's ending from the evidence found in its window on its nodes, each fact
/// weighed by the job's exposure to it first.
pub fn classify(ending: &Ending, mut evidence: Vec<Evidence>, exposure: &Exposure) -> Classification {
    for fact in &mut evidence {
        weigh(fact, exposure);
    }
    evidence.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.source.as_str().cmp(b.source.as_str())));
    let count = |keep: &dyn Fn(&Evidence) -> bool| evidence.iter().filter(|fact| keep(fact)).count();
    let local_strong = count(&|e| e.strength == Strength::Strong && !on_a_path(e.source));
    let path_strong = count(&|e| e.strength == Strength::Strong && on_a_path(e.source));
    let weak = count(&|e| e.strength == Strength::Weak);
    let later = count(&|e| e.strength == Strength::Weak && after_end(e, exposure));
    let first_later = evidence.iter().find(|e| e.strength == Strength::Weak && after_end(e, exposure));
    let watched = while_watched(exposure.telemetry.as_ref());
    let app = count(&|e| e.strength == Strength::Application);
    let aside = count(&|e| e.strength == Strength::Context);
    let exit = ExitCode { status: ending.exit_code, signal: ending.signal }.in_words();
    let (blame, mut reason) = match ending.state {
        JobStateBase::NodeFail | JobStateBase::BootFail => (
            Blame::Infrastructure,
            format!(
                "Slurm ended the job {} because a node failed{}",
                ending.state.name(),
                match local_strong + later {
                    0 => String::new(),
                    1 => "; 1 infrastructure fact agrees".to_string(),
                    n => format!("; {n} infrastructure facts agree"),
                }
            ),
        ),
        _ if local_strong > 0 => (
            Blame::Infrastructure,
            format!("{} on the job's own GPUs, nodes or links during its run", counted(local_strong, "hardware fault")),
        ),
        JobStateBase::Failed if app > 0 => (
            Blame::Application,
            format!(
                "the program {exit} after {} of a kind programs cause (such as an illegal memory address); no \
                 hardware fault showed on its GPUs or nodes",
                counted(app, "GPU fault")
            ),
        ),
        _ if path_strong > 0 => (
            Blame::Infrastructure,
            format!(
                "sustained packet loss on {} the job's nodes used, while it ran",
                counted(path_strong, "network path")
            ),
        ),
        JobStateBase::OutOfMemory => {
            (Blame::Application, "the job used more memory than it asked for (OUT_OF_MEMORY)".to_string())
        }
        JobStateBase::Failed if weak == 0 && exposure.telemetry.is_none() => (
            Blame::Application,
            format!(
                "the program {exit}; no GPU or network telemetry covers its run, so an infrastructure fault could \
                 not be looked for"
            ),
        ),
        JobStateBase::Failed if weak == 0 => (
            Blame::Application,
            format!("the program {exit}; no fault showed on its GPUs, nodes or network paths {watched}"),
        ),
        JobStateBase::Timeout | JobStateBase::Deadline if weak == 0 => (
            Blame::Application,
            if exposure.telemetry.is_some_and(|covered| covered.whole()) {
                "the job reached its time limit; no infrastructure fault slowed it".to_string()
            } else if exposure.telemetry.is_some() {
                format!("the job reached its time limit; no infrastructure fault showed {watched}")
            } else {
                "the job reached its time limit; no telemetry covers its run to say whether anything slowed it"
                    .to_string()
            },
        ),
        JobStateBase::Cancelled if weak == 0 => (
            Blame::Unknown,
            format!("cancelled by uid {} with no infrastructure fault recorded", ending.cancelled_by.unwrap_or(0)),
        ),
        _ if later > 0 && later == weak => (
            Blame::Unknown,
            format!(
                "{}{}; {} on its nodes came after its end ({}), a possible cause: Slurm often drains a node \
                 minutes after the fault that ended a job",
                match ending.state {
                    JobStateBase::Failed => format!("the program {exit}; "),
                    _ => String::new(),
                },
                match exposure.telemetry {
                    Some(_) => format!("no fault showed {watched}"),
                    None => "no GPU or network telemetry covers its run".to_string(),
                },
                counted(later, "fact"),
                first_later.map_or_else(String::new, |fact| {
                    coverage::timing_in_words(fact.at, fact.until, exposure.start, exposure.end)
                }),
            ),
        ),
        _ => (
            Blame::Unknown,
            format!("{} consistent with an infrastructure problem, none conclusive", counted(weak, "fact")),
        ),
    };
    if aside > 0 {
        let were = if aside == 1 { "was" } else { "were" };
        reason.push_str(&format!(
            "; {} seen near the job {were} set aside as not on its path, over before it started, or long over",
            counted(aside, "fact")
        ));
    }
    Classification { blame, reason, evidence }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(state: JobStateBase, exit_code: u32) -> Ending {
        Ending { state, exit_code, signal: 0, cancelled_by: None, owner_uid: 1001 }
    }

    fn fact(at: i64, source: EvidenceSource, strength: Strength) -> Evidence {
        Evidence { at, until: at, source, place: "gpu001".into(), detail: String::new(), strength }
    }

    /// A multi-node job with busy links that ended at 1,000 and was watched by telemetry.
    const BUSY: Exposure = Exposure {
        multi_node: true,
        rdma_bytes_per_s: Some(8e9),
        start: -10_000,
        end: 1_000,
        telemetry: Some(Coverage { from: -10_000, to: 1_000, share: 1.0 }),
    };

    fn classify(ending: &Ending, evidence: Vec<Evidence>) -> Classification {
        super::classify(ending, evidence, &BUSY)
    }

    #[test]
    fn a_gpu_off_the_bus_is_the_infrastructure_whatever_the_exit_code() {
        let (strength, _) = xid_strength(79);
        let verdict = classify(&ending(JobStateBase::Failed, 1), vec![fact(20, EvidenceSource::Xid, strength)]);
        assert_eq!(verdict.blame, Blame::Infrastructure);
        let verdict = classify(&ending(JobStateBase::NodeFail, 0), vec![]);
        assert_eq!(verdict.blame, Blame::Infrastructure, "Slurm's NODE_FAIL alone says so");
    }

    #[test]
    fn a_crash_with_a_program_fault_or_nothing_else_is_the_application() {
        let (strength, _) = xid_strength(31);
        assert_eq!(
            classify(&ending(JobStateBase::Failed, 1), vec![fact(5, EvidenceSource::Xid, strength)]).blame,
            Blame::Application
        );
        assert_eq!(classify(&ending(JobStateBase::Failed, 139), vec![]).blame, Blame::Application);
        assert_eq!(classify(&ending(JobStateBase::OutOfMemory, 0), vec![]).blame, Blame::Application);
        assert_eq!(classify(&ending(JobStateBase::Timeout, 0), vec![]).blame, Blame::Application);
    }

    #[test]
    fn weak_evidence_makes_it_unknown_and_evidence_comes_in_time_order() {
        let verdict = classify(
            &ending(JobStateBase::Timeout, 0),
            vec![
                fact(30, EvidenceSource::PingmeshRtt, Strength::Weak),
                fact(10, EvidenceSource::NodeEvent, Strength::Weak),
            ],
        );
        assert_eq!(verdict.blame, Blame::Unknown);
        assert_eq!(verdict.evidence.iter().map(|e| e.at).collect::<Vec<_>>(), [10, 30]);
    }

    #[test]
    fn a_path_loss_counts_only_for_a_job_that_used_the_path_when_it_failed() {
        let loss = |at: i64| fact(at, EvidenceSource::PingmeshLoss, Strength::Strong);
        let failed = ending(JobStateBase::Failed, 1);
        assert_eq!(super::classify(&failed, vec![loss(900)], &BUSY).blame, Blame::Infrastructure);
        let single = Exposure { multi_node: false, ..BUSY };
        let verdict = super::classify(&failed, vec![loss(900)], &single);
        assert_eq!(verdict.blame, Blame::Application, "{}", verdict.reason);
        assert_eq!(verdict.evidence[0].strength, Strength::Context);
        assert!(verdict.reason.contains("set aside"), "{}", verdict.reason);
        let quiet = Exposure { rdma_bytes_per_s: Some(640e3), ..BUSY };
        assert_eq!(super::classify(&failed, vec![loss(900)], &quiet).blame, Blame::Application);
        let verdict = super::classify(&failed, vec![loss(-200)], &BUSY);
        assert_eq!(verdict.blame, Blame::Unknown, "a loss that cleared 20 min before the end is weak");
        assert!(verdict.evidence[0].detail.contains("cleared 20 min before"), "{:?}", verdict.evidence);
    }

    #[test]
    fn a_program_fault_outweighs_network_noise_but_not_a_fault_on_its_own_gpus() {
        let failed = ending(JobStateBase::Failed, 1);
        let (xid31, _) = xid_strength(31);
        let (xid79, _) = xid_strength(79);
        let noise = fact(900, EvidenceSource::PingmeshLoss, Strength::Strong);
        let app = fact(950, EvidenceSource::Xid, xid31);
        assert_eq!(classify(&failed, vec![noise.clone(), app.clone()]).blame, Blame::Application);
        let broken = fact(940, EvidenceSource::Xid, xid79);
        assert_eq!(classify(&failed, vec![noise, app, broken]).blame, Blame::Infrastructure);
    }

    #[test]
    fn without_telemetry_the_reason_says_nothing_could_be_seen() {
        let blind = Exposure { telemetry: None, rdma_bytes_per_s: None, ..BUSY };
        let mut killed = ending(JobStateBase::Failed, 0);
        killed.signal = 9;
        let verdict = super::classify(&killed, vec![], &blind);
        assert!(verdict.reason.contains("SIGKILL"), "{}", verdict.reason);
        assert!(verdict.reason.contains("could not be looked for"), "{}", verdict.reason);
        assert!(!verdict.reason.contains("nothing"), "{}", verdict.reason);
    }

    #[test]
    fn a_drain_after_the_end_is_a_possible_cause_never_one_during_the_run() {
        // Exited 1 after 5 s; the node was drained for an XID three minutes later.
        let exposure = Exposure { start: 995, end: 1_000, ..BUSY };
        let drain = fact(1_180, EvidenceSource::NodeEvent, node_event_strength("Xid 79", false));
        let verdict = super::classify(&ending(JobStateBase::Failed, 1), vec![drain.clone()], &exposure);
        assert_eq!(verdict.blame, Blame::Unknown, "{}", verdict.reason);
        assert!(!verdict.reason.contains("hardware fault on"), "{}", verdict.reason);
        assert!(verdict.reason.contains("no fault showed during its run"), "{}", verdict.reason);
        assert!(verdict.reason.contains("3m 00s after the job ended"), "{}", verdict.reason);
        assert_eq!(verdict.evidence[0].strength, Strength::Weak);
        assert!(verdict.evidence[0].detail.contains("a possible cause"), "{:?}", verdict.evidence);
        // Slurm's own NODE_FAIL stays the infrastructure's, the drain agreeing.
        let verdict = super::classify(&ending(JobStateBase::NodeFail, 0), vec![drain.clone()], &exposure);
        assert_eq!(verdict.blame, Blame::Infrastructure);
        assert!(verdict.reason.contains("1 infrastructure fact agrees"), "{}", verdict.reason);
        // The same fault inside the run is the infrastructure's.
        let inside = Evidence { at: 998, until: 998, ..drain.clone() };
        let verdict = super::classify(&ending(JobStateBase::Failed, 1), vec![inside], &exposure);
        assert_eq!(verdict.blame, Blame::Infrastructure);
        assert!(verdict.reason.contains("during its run"), "{}", verdict.reason);
        // Over before the job started: context.
        let before = Evidence { at: 700, until: 700, ..drain };
        let verdict = super::classify(&ending(JobStateBase::Failed, 1), vec![before], &exposure);
        assert_eq!((verdict.blame, verdict.evidence[0].strength), (Blame::Application, Strength::Context));
    }

    #[test]
    fn no_fault_is_claimed_only_for_the_part_of_the_run_telemetry_covers() {
        let covered = Coverage { from: 960, to: 1_000, share: 0.004 };
        let partly = Exposure { telemetry: Some(covered), ..BUSY };
        let verdict = super::classify(&ending(JobStateBase::Failed, 1), vec![], &partly);
        assert_eq!(verdict.blame, Blame::Application);
        assert!(!verdict.reason.contains("during its run"), "{}", verdict.reason);
        assert!(
            verdict.reason.contains("in the part of its run its telemetry covers, <1 % of its run"),
            "{}",
            verdict.reason
        );
        let verdict = super::classify(&ending(JobStateBase::Timeout, 0), vec![], &partly);
        assert!(!verdict.reason.contains("no infrastructure fault slowed it"), "{}", verdict.reason);
    }

    #[test]
    fn only_bad_endings_are_classified() {
        assert!(!needs_classification(&ending(JobStateBase::Completed, 0)));
        assert!(needs_classification(&ending(JobStateBase::NodeFail, 0)));
        let mut cancelled = ending(JobStateBase::Cancelled, 0);
        cancelled.cancelled_by = Some(1001);
        assert!(!needs_classification(&cancelled), "the owner cancelling is not a failure");
        cancelled.cancelled_by = Some(0);
        assert!(needs_classification(&cancelled), "an administrator cancelling is");
    }

    #[test]
    fn bad_endings_include_cancellation_after_start_only() {
        assert!(ended_badly(JobStateBase::OutOfMemory, true));
        assert!(ended_badly(JobStateBase::NodeFail, true));
        assert!(ended_badly(JobStateBase::Cancelled, true), "cancelled while it ran");
        assert!(!ended_badly(JobStateBase::Cancelled, false), "cancelled while it waited");
        assert!(!ended_badly(JobStateBase::Completed, true));
        assert!(!ended_badly(JobStateBase::Preempted, true));
    }

    #[test]
    fn node_event_reasons_read_as_their_cause() {
        assert_eq!(node_event_strength("Xid 79: GPU has fallen off the bus", false), Strength::Strong);
        assert_eq!(node_event_strength("Kill task failed", false), Strength::Weak);
        assert_eq!(node_event_strength("maintenance", true), Strength::Strong);
        assert_eq!(node_event_strength("rack maintenance", false), Strength::Weak);
    }
}
