//! What part of a job's run its telemetry covers, and where a fact lies against the run.
//!
//! Real telemetry starts late (an exporter added mid-run, retention, a node that joined monitoring
//! later) and stops early; Slurm drains a node minutes after the fault that ended a job. Every figure,
//! verdict and "no fault showed" is true only of the time the samples cover, and a fact after the end
//! is a possible cause, never one seen "during its run". These are the rules that say so, in one place.

use super::history::duration;
use super::time::iso_utc;

/// A share of the run at or above this counts as all of it (the wire's, which the page reads too).
pub const WHOLE_SHARE: f64 = slurmlens_wire::WHOLE_COVERAGE_SHARE;

/// The part of a run the GPU samples cover: from the first to the last sample, and the share of the
/// job's GPU-time (GPUs × run) that has samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coverage {
    /// Epoch seconds of the first and the last sampled step.
    pub from: i64,
    pub to: i64,
    /// Sampled GPU-seconds over the GPU-seconds of the run, 0–1.
    pub share: f64,
}

impl Coverage {
    /// Whether the samples cover the run (all but its edges).
    pub fn whole(&self) -> bool {
        self.share >= WHOLE_SHARE
    }

    /// "5 % of its run (2026-12-07T13:20:00Z to 2026-12-07T14:00:00Z)", or "all of its run".
    pub fn in_words(&self) -> String {
        if self.whole() {
            "all of its run".to_string()
        } else {
            format!("{} of its run ({} to {})", percent(self.share), iso_utc(self.from), iso_utc(self.to))
        }
    }
}

/// A share as a page prints it: "5 %", "<1 %", never "0 %" for a share that is not nothing.
pub fn percent(share: f64) -> String {
    let pct = (share * 100.0).clamp(0.0, 100.0);
    if pct > 0.0 && pct < 1.0 { "<1 %".to_string() } else { format!("{pct:.0} %") }
}

/// Where a fact lies against the job's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// It was over before the job started.
    BeforeStart,
    /// It showed while the job ran (or had begun before and was still there).
    DuringRun,
    /// It first showed after the job had ended.
    AfterEnd,
}

/// Where a fact seen from `at` to `until` lies against a run from `start` to `end` (epoch seconds).
pub fn timing(at: i64, until: i64, start: i64, end: i64) -> Timing {
    if at > end {
        Timing::AfterEnd
    } else if until.max(at) < start {
        Timing::BeforeStart
    } else {
        Timing::DuringRun
    }
}

/// "3m 00s after the job ended", "2m 10s before the job started", "during its run".
pub fn timing_in_words(at: i64, until: i64, start: i64, end: i64) -> String {
    match timing(at, until, start, end) {
        Timing::AfterEnd => format!("{} after the job ended", duration((at - end) as f64)),
        Timing::BeforeStart => format!("over {} before the job started", duration((start - until.max(at)) as f64)),
        Timing::DuringRun => "during its run".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_is_placed_before_during_or_after_the_run() {
        assert_eq!(timing(1_180, 1_180, 1_000, 1_005), Timing::AfterEnd);
        assert_eq!(timing(900, 950, 1_000, 2_000), Timing::BeforeStart);
        assert_eq!(timing(900, 1_500, 1_000, 2_000), Timing::DuringRun, "begun before, still there");
        assert_eq!(timing(2_000, 2_000, 1_000, 2_000), Timing::DuringRun, "at the end is inside");
        assert_eq!(timing_in_words(1_185, 1_185, 1_000, 1_005), "3m 00s after the job ended");
        assert_eq!(timing_in_words(870, 870, 1_000, 2_000), "over 2m 10s before the job started");
    }

    #[test]
    fn coverage_says_its_share_and_span_unless_it_is_the_whole_run() {
        let part = Coverage { from: 1_796_040_000, to: 1_796_042_400, share: 0.049 };
        assert!(!part.whole());
        assert_eq!(part.in_words(), "5 % of its run (2026-11-30T12:00:00Z to 2026-11-30T12:40:00Z)");
        assert_eq!(Coverage { share: 0.97, ..part }.in_words(), "all of its run");
        assert_eq!(percent(0.004), "<1 %");
        assert_eq!(percent(0.0), "0 %");
    }
}
