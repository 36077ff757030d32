//! Job and node states as slurmdbd stores them and as sacct/sinfo name them.

use std::fmt;
use std::str::FromStr;

/// A job's base state (`state & 0xff` in slurmdbd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobStateBase {
    Pending,
    Running,
    Suspended,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
}

impl JobStateBase {
    /// Every base state, in code order (index = slurmdbd's number).
    pub const ALL: [Self; 12] = [
        Self::Pending,
        Self::Running,
        Self::Suspended,
        Self::Completed,
        Self::Cancelled,
        Self::Failed,
        Self::Timeout,
        Self::NodeFail,
        Self::Preempted,
        Self::BootFail,
        Self::Deadline,
        Self::OutOfMemory,
    ];

    /// The number slurmdbd stores (enum job_states in slurm.h).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The base state slurmdbd stores as `code`; None past `OUT_OF_MEMORY`.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.get(code as usize).copied()
    }

    /// The name sacct prints.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Suspended => "SUSPENDED",
            Self::Completed => "COMPLETED",
            Self::Cancelled => "CANCELLED",
            Self::Failed => "FAILED",
            Self::Timeout => "TIMEOUT",
            Self::NodeFail => "NODE_FAIL",
            Self::Preempted => "PREEMPTED",
            Self::BootFail => "BOOT_FAIL",
            Self::Deadline => "DEADLINE",
            Self::OutOfMemory => "OUT_OF_MEMORY",
        }
    }

    /// True once the job can no longer run.
    pub fn is_finished(self) -> bool {
        !matches!(self, Self::Pending | Self::Running | Self::Suspended)
    }
}

/// A job state filter value: a base state or `REQUEUED` (rows superseded by a requeue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateFilter {
    /// Rows in this base state that no requeue superseded.
    Base(JobStateBase),
    /// Rows a requeue superseded.
    Requeued,
}

impl StateFilter {
    /// The word sacct prints for it: the base state's name, or `REQUEUED`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Base(base) => base.name(),
            Self::Requeued => "REQUEUED",
        }
    }

    /// The filter that lists a job whose state reads `printed`, as sacct prints it and the API carries it
    /// (`COMPLETED`, `CANCELLED by 1001`, `REQUEUED`); None for a flag sacct prints in the base state's
    /// place (`COMPLETING`) or a word that names no state.
    pub fn of_printed(printed: &str) -> Option<Self> {
        let word = printed_word(printed);
        std::iter::once(Self::Requeued)
            .chain(JobStateBase::ALL.into_iter().map(Self::Base))
            .find(|filter| filter.name() == word)
    }
}

/// The state word of a job state as sacct prints it, without what may follow it: `CANCELLED` of
/// `CANCELLED by 1001`; empty for blank text.
pub fn printed_word(printed: &str) -> &str {
    printed.split_whitespace().next().unwrap_or("")
}

/// Why a state name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state `{0}`")]
pub struct UnknownState(pub String);

impl FromStr for StateFilter {
    type Err = UnknownState;

    /// Accepts sacct's long names and squeue's short codes, any case (`completed`, `CD`, `OOM`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let upper = text.trim().to_ascii_uppercase();
        let base = match upper.as_str() {
            "REQUEUED" | "RQ" => return Ok(Self::Requeued),
            "PENDING" | "PD" => JobStateBase::Pending,
            "RUNNING" | "R" => JobStateBase::Running,
            "SUSPENDED" | "S" => JobStateBase::Suspended,
            "COMPLETED" | "CD" => JobStateBase::Completed,
            "CANCELLED" | "CA" => JobStateBase::Cancelled,
            "FAILED" | "F" => JobStateBase::Failed,
            "TIMEOUT" | "TO" => JobStateBase::Timeout,
            "NODE_FAIL" | "NF" => JobStateBase::NodeFail,
            "PREEMPTED" | "PR" => JobStateBase::Preempted,
            "BOOT_FAIL" | "BF" => JobStateBase::BootFail,
            "DEADLINE" | "DL" => JobStateBase::Deadline,
            "OUT_OF_MEMORY" | "OOM" => JobStateBase::OutOfMemory,
            _ => return Err(UnknownState(text.to_string())),
        };
        Ok(Self::Base(base))
    }
}

/// A job state word from slurmdbd: base state plus flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobState {
    raw: u32,
}

impl JobState {
    const BASE_MASK: u32 = 0xff;
    /// Flags that sacct prints instead of the base state, in the order `job_state_string` checks them.
    const NAMED_FLAGS: [(u32, &'static str); 12] = [
        (0x8000, "COMPLETING"),
        (0x0080_0000, "STAGE_OUT"),
        (0x4000, "CONFIGURING"),
        (0x2000, "RESIZING"),
        (0x0400, "REQUEUED"),
        (0x0010_0000, "REQUEUE_FED"),
        (0x0800, "REQUEUE_HOLD"),
        (0x1000, "SPECIAL_EXIT"),
        (0x0001_0000, "STOPPED"),
        (0x0008_0000, "REVOKED"),
        (0x0020_0000, "RESV_DEL_HOLD"),
        (0x0040_0000, "SIGNALING"),
    ];
    const REQUEUE_FLAG: u32 = 0x0400;

    /// The state word as slurmdbd's `state` column holds it.
    pub fn from_raw(raw: u32) -> Self {
        Self { raw }
    }

    /// The state word, flags included.
    pub fn raw(self) -> u32 {
        self.raw
    }

    /// The base state; an out-of-range code reads as FAILED rather than aborting a listing.
    pub fn base(self) -> JobStateBase {
        JobStateBase::from_code(self.raw & Self::BASE_MASK).unwrap_or(JobStateBase::Failed)
    }

    /// True for the row a requeue superseded.
    pub fn is_requeued(self) -> bool {
        self.raw & Self::REQUEUE_FLAG != 0
    }

    /// True when the row's run is over: its base state is finished, or a requeue superseded it (the
    /// row keeps the run that ended, its base state reads PENDING, and the job runs again under a new
    /// row).
    pub fn run_is_over(self) -> bool {
        self.base().is_finished() || self.is_requeued()
    }

    /// The name sacct prints (`job_state_string`): a set flag wins over the base state.
    pub fn name(self) -> &'static str {
        Self::NAMED_FLAGS
            .iter()
            .find(|(flag, _)| self.raw & flag != 0)
            .map_or_else(|| self.base().name(), |(_, name)| name)
    }

    /// True when a listing filtered by `filter` shows this row; a requeued row shows only under `REQUEUED`.
    pub fn matches(self, filter: StateFilter) -> bool {
        match filter {
            StateFilter::Requeued => self.is_requeued(),
            StateFilter::Base(base) => !self.is_requeued() && self.base() == base,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A node state word from slurmdbd's event table (`enum node_states` plus flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeState {
    raw: u32,
}

impl NodeState {
    const BASE_NAMES: [&'static str; 7] = ["UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"];
    const FLAG_NAMES: [(u32, &'static str); 8] = [
        (0x0200, "DRAIN"),
        (0x0800, "NOT_RESPONDING"),
        (0x2000, "FAIL"),
        (0x8000, "MAINTENANCE"),
        (0x0001_0000, "REBOOT_REQUESTED"),
        (0x1000, "POWERED_DOWN"),
        (0x0020, "RESERVED"),
        (0x0400, "COMPLETING"),
    ];

    /// The state word as the event table's `state` column holds it.
    pub fn from_raw(raw: u32) -> Self {
        Self { raw }
    }

    /// True while the node drains or is drained (no new jobs).
    pub fn is_drain(self) -> bool {
        self.raw & 0x0200 != 0
    }

    /// True when the node is DOWN or FAILed.
    pub fn is_down(self) -> bool {
        self.raw & 0xf == 1 || self.raw & 0x2000 != 0
    }

    /// `DOWN`, `IDLE+DRAIN`, `DOWN+NOT_RESPONDING`, as scontrol prints a node's state.
    pub fn name(self) -> String {
        let base = Self::BASE_NAMES.get((self.raw & 0xf) as usize).copied().unwrap_or("UNKNOWN");
        let mut name = base.to_string();
        for (flag, flag_name) in Self::FLAG_NAMES {
            if self.raw & flag != 0 {
                name.push('+');
                name.push_str(flag_name);
            }
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_states_as_sacct_does() {
        assert_eq!(JobState::from_raw(3).name(), "COMPLETED");
        assert_eq!(JobState::from_raw(11).name(), "OUT_OF_MEMORY");
        assert_eq!(JobState::from_raw(1024).name(), "REQUEUED");
        assert_eq!(JobState::from_raw(1024 | 7).base(), JobStateBase::NodeFail);
        assert_eq!(JobState::from_raw(0x8000 | 1).name(), "COMPLETING");
    }

    #[test]
    fn every_base_state_round_trips_through_its_name() {
        for base in JobStateBase::ALL {
            assert_eq!(JobStateBase::from_code(base.code()), Some(base));
            assert_eq!(base.name().parse::<StateFilter>(), Ok(StateFilter::Base(base)));
        }
        assert_eq!("cd".parse::<StateFilter>(), Ok(StateFilter::Base(JobStateBase::Completed)));
        assert!("FINISHED".parse::<StateFilter>().is_err());
    }

    #[test]
    fn printed_states_read_back_as_their_filter() {
        for base in JobStateBase::ALL {
            assert_eq!(StateFilter::of_printed(base.name()), Some(StateFilter::Base(base)));
        }
        assert_eq!(StateFilter::of_printed("CANCELLED by 1001"), Some(StateFilter::Base(JobStateBase::Cancelled)));
        assert_eq!(StateFilter::of_printed("REQUEUED"), Some(StateFilter::Requeued));
        assert_eq!(StateFilter::of_printed(JobState::from_raw(0x8000 | 1).name()), None, "COMPLETING is a flag");
        assert_eq!(StateFilter::of_printed("cd"), None, "sacct prints names, not squeue's codes");
        assert_eq!((printed_word("CANCELLED by 1001"), printed_word("  ")), ("CANCELLED", ""));
    }

    #[test]
    fn requeued_rows_match_only_the_requeued_filter() {
        let superseded = JobState::from_raw(1024);
        assert!(superseded.matches(StateFilter::Requeued));
        assert!(!superseded.matches(StateFilter::Base(JobStateBase::Pending)));
        assert!(superseded.run_is_over(), "the superseded run ended, though its base state reads PENDING");
        assert!(!JobState::from_raw(0).run_is_over() && !JobState::from_raw(1).run_is_over());
        assert!(JobState::from_raw(3).run_is_over());
    }

    #[test]
    fn names_node_states() {
        assert_eq!(NodeState::from_raw(514).name(), "IDLE+DRAIN");
        assert_eq!(NodeState::from_raw(1).name(), "DOWN");
        assert_eq!(NodeState::from_raw(1 | 0x800).name(), "DOWN+NOT_RESPONDING");
        assert!(NodeState::from_raw(514).is_drain());
    }
}
