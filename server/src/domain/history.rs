//! A job against its owner's previous runs of the same work: which runs are the same size (the size
//! class), the median and spread of their figures, and the "slower than usual" rule with its evidence.

/// Two runs are the same size when the larger GPU count is at most this many times the smaller.
pub const SIZE_FACTOR: u64 = 2;

/// No verdict is given against fewer previous runs than this: two runs make no "usual".
pub const MIN_PREVIOUS_RUNS: usize = 3;

/// A run is slower only when it is also this share beyond the median (a tight history's noise is not news).
pub const MIN_RUN_TIME_EXCESS: f64 = 0.25;

/// A run's GPU utilisation is low only when it is also this many points under the median.
pub const MIN_UTIL_DROP_POINTS: f64 = 10.0;

/// How many robust spreads (scaled median absolute deviations) from the median make a run unusual.
pub const SPREADS: f64 = 3.0;

/// The median absolute deviation's scale to a normal distribution's standard deviation.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Whether a run with `other_gpus` GPUs is the same size as one with `gpus`: both without GPUs, or
/// both with GPUs and within [`SIZE_FACTOR`] of each other (4 GPUs: 2 to 8).
pub fn same_size_class(gpus: u64, other_gpus: u64) -> bool {
    match (gpus, other_gpus) {
        (0, 0) => true,
        (0, _) | (_, 0) => false,
        (a, b) => a.max(b) <= a.min(b).saturating_mul(SIZE_FACTOR),
    }
}

/// The GPU counts `[low, high]` of `gpus`'s size class.
pub fn size_class_bounds(gpus: u64) -> (u64, u64) {
    if gpus == 0 { (0, 0) } else { (gpus.div_ceil(SIZE_FACTOR), gpus.saturating_mul(SIZE_FACTOR)) }
}

/// The median of the finite values (`None` when there is none).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|value| value.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) { (sorted[middle - 1] + sorted[middle]) / 2.0 } else { sorted[middle] })
}

/// The robust spread of the values: their median absolute deviation from the median, scaled to a
/// standard deviation (one slow run among many does not widen it, as it would a standard deviation).
pub fn robust_spread(values: &[f64]) -> Option<f64> {
    let centre = median(values)?;
    let deviations: Vec<f64> = values.iter().filter(|v| v.is_finite()).map(|value| (value - centre).abs()).collect();
    median(&deviations).map(|deviation| deviation * MAD_TO_SIGMA)
}

/// What the rule reads of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunFigures {
    /// Seconds from start to end (so far, while it runs).
    pub run_time_s: Option<f64>,
    /// Mean GPU utilisation, %.
    pub gpu_util: Option<f64>,
    /// Whether the run completed (only completed runs set the usual run time: a failed run stops early).
    pub completed: bool,
    /// Whether it still runs (its time so far is compared; an ended run that did not complete is not).
    pub running: bool,
}

/// The verdict on a run against its previous runs, with the evidence either way.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowerVerdict {
    pub slower: bool,
    /// One sentence per figure compared, the figures that made it slower first.
    pub evidence: Vec<String>,
}

/// The median and spread of one figure over the previous runs, and the bound past which a run is unusual.
#[derive(Debug, Clone, Copy)]
struct Usual {
    median: f64,
    spread: f64,
    runs: usize,
}

impl Usual {
    fn of(values: &[f64]) -> Option<Self> {
        (values.len() >= MIN_PREVIOUS_RUNS).then_some(())?;
        Some(Self { median: median(values)?, spread: robust_spread(values)?, runs: values.len() })
    }
}

/// "Slower than usual": `this` run against `previous` runs of the same work and size. Slower when its run
/// time is beyond the completed previous runs' median by more than [`SPREADS`] robust spreads and by
/// more than [`MIN_RUN_TIME_EXCESS`] of it (a running job: when its time so far already is), or when
/// its mean GPU utilisation is under their median by more than [`SPREADS`] spreads and
/// [`MIN_UTIL_DROP_POINTS`] points. `None` with fewer than [`MIN_PREVIOUS_RUNS`] previous runs to
/// compare either figure with.
pub fn slower_than_usual(this: &RunFigures, previous: &[RunFigures]) -> Option<SlowerVerdict> {
    let times: Vec<f64> = previous.iter().filter(|run| run.completed).filter_map(|run| run.run_time_s).collect();
    let utils: Vec<f64> = previous.iter().filter_map(|run| run.gpu_util).collect();
    // Like with like: a run that failed, timed out or was cancelled is no slower or faster than the runs
    // that completed; only its utilisation is compared.
    let comparable = this.completed || this.running;
    let time_usual = Usual::of(&times).zip(this.run_time_s.filter(|_| comparable));
    let util_usual = Usual::of(&utils).zip(this.gpu_util);
    if time_usual.is_none() && util_usual.is_none() {
        return None;
    }
    let mut slower_evidence = Vec::new();
    let mut usual_evidence = Vec::new();
    if let Some((usual, run_time)) = time_usual {
        let bound = usual.median + (SPREADS * usual.spread).max(MIN_RUN_TIME_EXCESS * usual.median);
        let excess = if usual.median > 0.0 { (run_time / usual.median - 1.0) * 100.0 } else { 0.0 };
        let sentence = format!(
            "run time {} against a median of {} (spread {}) over {} completed previous runs: {:+.0}%",
            duration(run_time),
            duration(usual.median),
            duration(usual.spread),
            usual.runs,
            excess,
        );
        if run_time > bound { slower_evidence.push(sentence) } else { usual_evidence.push(sentence) }
    }
    if let Some((usual, util)) = util_usual {
        let bound = usual.median - (SPREADS * usual.spread).max(MIN_UTIL_DROP_POINTS);
        let sentence = format!(
            "mean GPU utilisation {util:.0}% against a median of {:.0}% (spread {:.1} points) over {} previous runs",
            usual.median, usual.spread, usual.runs,
        );
        if util < bound { slower_evidence.push(sentence) } else { usual_evidence.push(sentence) }
    }
    let slower = !slower_evidence.is_empty();
    slower_evidence.extend(usual_evidence);
    if !comparable && Usual::of(&times).is_some() {
        slower_evidence.push(
            "run time not compared: this run did not complete, and only completed runs say how long the work takes"
                .to_string(),
        );
    }
    Some(SlowerVerdict { slower, evidence: slower_evidence })
}

/// Seconds as `1h 05m`, `12m 30s` or `45s`.
pub fn duration(seconds: f64) -> String {
    let total = seconds.max(0.0).round() as u64;
    let (hours, minutes, secs) = (total / 3600, total % 3600 / 60, total % 60);
    match (hours, minutes) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{minutes}m {secs:02}s"),
        _ => format!("{hours}h {minutes:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(run_time_s: f64, gpu_util: f64) -> RunFigures {
        RunFigures { run_time_s: Some(run_time_s), gpu_util: Some(gpu_util), completed: true, running: false }
    }

    #[test]
    fn size_class_is_within_a_factor_of_two() {
        assert!(same_size_class(4, 8));
        assert!(same_size_class(8, 4));
        assert!(same_size_class(4, 2));
        assert!(!same_size_class(4, 9));
        assert!(!same_size_class(4, 1));
        assert!(same_size_class(0, 0));
        assert!(!same_size_class(0, 1));
        assert!(!same_size_class(1, 0));
        assert_eq!(size_class_bounds(4), (2, 8));
        assert_eq!(size_class_bounds(3), (2, 6));
        assert_eq!(size_class_bounds(0), (0, 0));
        for gpus in 1..40 {
            let (low, high) = size_class_bounds(gpus);
            assert!(same_size_class(gpus, low) && same_size_class(gpus, high), "{gpus}");
            assert!(!same_size_class(gpus, low - 1) && !same_size_class(gpus, high + 1), "{gpus}");
        }
    }

    #[test]
    fn median_and_spread_ignore_one_outlier() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        let spread = robust_spread(&[100.0, 102.0, 98.0, 101.0, 99.0, 1000.0]).expect("a value");
        assert!(spread < 3.0, "{spread}");
    }

    #[test]
    fn no_verdict_with_fewer_than_three_previous_runs() {
        let previous = [run(3600.0, 90.0), run(3700.0, 91.0)];
        assert_eq!(slower_than_usual(&run(9000.0, 20.0), &previous), None);
        assert_eq!(slower_than_usual(&run(9000.0, 20.0), &[]), None);
    }

    #[test]
    fn a_run_far_beyond_the_median_is_slower_with_its_evidence() {
        let previous = [run(3600.0, 90.0), run(3700.0, 91.0), run(3500.0, 89.0), run(3650.0, 90.0), run(3550.0, 92.0)];
        let verdict = slower_than_usual(&run(6000.0, 90.0), &previous).expect("a value");
        assert!(verdict.slower);
        assert!(
            verdict.evidence[0].starts_with("run time 1h 40m against a median of 1h 00m"),
            "{:?}",
            verdict.evidence
        );
        assert!(verdict.evidence[0].contains("over 5 completed previous runs"), "{:?}", verdict.evidence);
        let usual = slower_than_usual(&run(3800.0, 90.0), &previous).expect("a value");
        assert!(!usual.slower, "{:?}", usual.evidence);
        assert_eq!(usual.evidence.len(), 2);
    }

    #[test]
    fn a_tight_history_needs_a_quarter_more_not_three_spreads() {
        let previous = [run(3600.0, 90.0), run(3600.0, 90.0), run(3600.0, 90.0)];
        assert!(!slower_than_usual(&run(4400.0, 90.0), &previous).expect("a value").slower);
        assert!(slower_than_usual(&run(4600.0, 90.0), &previous).expect("a value").slower);
    }

    #[test]
    fn low_gpu_utilisation_alone_is_slower() {
        let previous = [run(3600.0, 90.0), run(3600.0, 88.0), run(3600.0, 92.0)];
        let verdict = slower_than_usual(&run(3600.0, 55.0), &previous).expect("a value");
        assert!(verdict.slower);
        assert!(verdict.evidence[0].starts_with("mean GPU utilisation 55%"), "{:?}", verdict.evidence);
        assert!(!slower_than_usual(&run(3600.0, 84.0), &previous).expect("a value").slower);
    }

    #[test]
    fn failed_previous_runs_do_not_set_the_usual_run_time() {
        let failed =
            |seconds: f64| RunFigures { run_time_s: Some(seconds), gpu_util: None, completed: false, running: false };
        let previous = [failed(60.0), failed(70.0), failed(80.0), run(3600.0, 90.0)];
        // Only one completed run and one utilisation: nothing to compare with.
        assert_eq!(slower_than_usual(&run(3600.0, 90.0), &previous), None);
    }

    #[test]
    fn a_failed_run_is_not_slower_than_the_completed_ones_it_outlasted() {
        // A 13-hour failed pre-training run against 1-17 minute completed runs of the same name.
        let previous = [run(60.0, 90.0), run(300.0, 91.0), run(1020.0, 89.0)];
        let failed = RunFigures { run_time_s: Some(48_300.0), gpu_util: Some(90.0), completed: false, running: false };
        let verdict = slower_than_usual(&failed, &previous).expect("its utilisation is compared");
        assert!(!verdict.slower, "{:?}", verdict.evidence);
        assert!(
            verdict.evidence.iter().any(|line| line.starts_with("run time not compared")),
            "{:?}",
            verdict.evidence
        );
        // Still running and already far beyond: slower so far.
        let running = RunFigures { completed: false, running: true, ..failed };
        assert!(slower_than_usual(&running, &previous).expect("a value").slower);
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(duration(45.0), "45s");
        assert_eq!(duration(750.0), "12m 30s");
        assert_eq!(duration(3900.0), "1h 05m");
    }
}
