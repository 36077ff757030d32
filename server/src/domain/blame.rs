//! Failure attribution, "was the failure mine?": whether a job that ended badly ended because of the infrastructure
//! (GPU hardware, node, network) or the application, with the evidence in time order.
//!
//! The rules read facts gathered elsewhere (XID codes from dcgm-exporter, node events from slurmdbd,
//! ping-mesh loss and RTT, link and ECC counters) and say `infrastructure`, `application` or `unknown`.
//! They never guess past their evidence: a failed job with no infrastructure evidence is the
//! application's only when Slurm's own facts say so (a non-zero exit, out of memory, its time limit).

use slurmlens_wire::EvidenceSource;

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
    /// Points at the application (an XID the driver raises for program faults).
    Application,
    /// Consistent with an infrastructure cause but not enough alone (a brief RTT spike).
    Weak,
    /// Enough alone (a GPU off the bus, a node down, sustained loss).
    Strong,
}

/// One fact, placed in time.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Epoch seconds.
    pub at: i64,
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
        JobStateBase::Failed
        | JobStateBase::NodeFail
        | JobStateBase::Timeout
        | JobStateBase::OutOfMemory
        | JobStateBase::BootFail
        | JobStateBase::Deadline => true,
        JobStateBase::Cancelled => ending.cancelled_by.is_some_and(|uid| uid != ending.owner_uid),
        _ => false,
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

/// The classification of a job's ending from the evidence found in its window on its nodes.
pub fn classify(ending: &Ending, mut evidence: Vec<Evidence>) -> Classification {
    evidence.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.source.as_str().cmp(b.source.as_str())));
    let strong = evidence.iter().filter(|e| e.strength == Strength::Strong).count();
    let weak = evidence.iter().filter(|e| e.strength == Strength::Weak).count();
    let app = evidence.iter().filter(|e| e.strength == Strength::Application).count();
    let (blame, reason) = match ending.state {
        JobStateBase::NodeFail | JobStateBase::BootFail => (
            Blame::Infrastructure,
            format!(
                "Slurm ended the job {} because a node failed{}",
                ending.state.name(),
                if strong > 0 { format!("; {strong} infrastructure fact(s) agree") } else { String::new() }
            ),
        ),
        _ if strong > 0 => (
            Blame::Infrastructure,
            format!("{strong} infrastructure fault(s) on the job's GPUs, nodes or links during its run"),
        ),
        JobStateBase::OutOfMemory => {
            (Blame::Application, "the job used more memory than it asked for (OUT_OF_MEMORY)".to_string())
        }
        JobStateBase::Failed if app > 0 => (
            Blame::Application,
            format!(
                "the program exited {}:{} after {app} GPU fault(s) that programs cause",
                ending.exit_code, ending.signal
            ),
        ),
        JobStateBase::Failed if weak == 0 => (
            Blame::Application,
            format!(
                "the program exited {}:{} and nothing in the infrastructure went wrong during its run",
                ending.exit_code, ending.signal
            ),
        ),
        JobStateBase::Timeout | JobStateBase::Deadline if weak == 0 => {
            (Blame::Application, "the job reached its time limit; no infrastructure fault slowed it".to_string())
        }
        JobStateBase::Cancelled if weak == 0 => (
            Blame::Unknown,
            format!("cancelled by uid {} with no infrastructure fault recorded", ending.cancelled_by.unwrap_or(0)),
        ),
        _ => (Blame::Unknown, format!("{weak} fact(s) consistent with an infrastructure problem, none conclusive")),
    };
    Classification { blame, reason, evidence }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(state: JobStateBase, exit_code: u32) -> Ending {
        Ending { state, exit_code, signal: 0, cancelled_by: None, owner_uid: 1001 }
    }

    fn fact(at: i64, source: EvidenceSource, strength: Strength) -> Evidence {
        Evidence { at, source, place: "gpu001".into(), detail: String::new(), strength }
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
