//! Advice at submission: the rules that turn a user's own recent finished runs of a job name into at
//! most one line ("your last 5 runs of `train` used at most 2 of 8 GPUs"), and what the submitting
//! command asked for (GPUs, nodes, time limit), parsed from Slurm's option syntax.
//!
//! Only strong evidence speaks: a rule needs at least [`MIN_RUNS`] runs, all of them pointing the same
//! way. Failures come first (a job that dies is worth more words than one that idles), then idle GPUs,
//! then an oversized time limit.

use slurmlens_wire::AdviceKind;

use super::state::JobStateBase;

/// No rule speaks from fewer runs than this.
pub const MIN_RUNS: usize = 3;
/// The rules read at most this many of the latest runs.
pub const MAX_RUNS: usize = 5;
/// A GPU whose mean utilisation over a run stayed below this (percent) was idle in that run.
pub const BUSY_GPU_UTIL: f64 = 10.0;
/// The time limit asked must be at least this many times the longest of the runs…
const TIME_LIMIT_FACTOR: u64 = 4;
/// …and at least this much above it (minutes), so a 20-minute limit on 4-minute runs says nothing.
const TIME_LIMIT_SLACK_MIN: u64 = 60;
/// Longest accepted job name (slurmdbd's `job_name` is TINYTEXT).
const MAX_NAME: usize = 255;

/// A job name the advice is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobName(String);

impl std::str::FromStr for JobName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() || text.len() > MAX_NAME || text.chars().any(char::is_control) {
            return Err(format!("a job name is 1 to {MAX_NAME} characters without control characters"));
        }
        Ok(Self(text.to_string()))
    }
}

impl JobName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the submitting command asked for, as far as the plugin could read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    /// GPUs for the whole job, when the options say (`--gpus`, `--gpus-per-node` × nodes, `--gres`).
    pub gpus: Option<u64>,
    /// The time limit asked, in minutes.
    pub time_limit_min: Option<u64>,
}

/// One finished run of the same job name by the same user, as the rules read it.
#[derive(Debug, Clone, PartialEq)]
pub struct PastRun {
    pub state: JobStateBase,
    /// Seconds from start to end.
    pub elapsed_s: u64,
    /// Its time limit, in minutes (`None`: unlimited or the partition's).
    pub time_limit_min: Option<u64>,
    /// GPUs allocated.
    pub gpus: u64,
    /// Of those, how many were busy (mean utilisation ≥ [`BUSY_GPU_UTIL`]), from its archived report;
    /// `None` when no report with GPU metrics was archived.
    pub busy_gpus: Option<u64>,
}

/// The advice: what it is about and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advice {
    pub kind: AdviceKind,
    pub line: String,
    pub runs: usize,
}

/// At most one line for `name` asked as `ask`, from `runs` (the latest first, finished, started).
pub fn advise(name: &JobName, ask: &Ask, runs: &[PastRun]) -> Option<Advice> {
    let runs = &runs[..runs.len().min(MAX_RUNS)];
    if runs.len() < MIN_RUNS {
        return None;
    }
    let name = name.as_str();
    let count = runs.len();
    let last = |what: &str| format!("your last {count} runs of `{name}` {what}");
    let all = |state: JobStateBase| runs.iter().all(|run| run.state == state);
    if all(JobStateBase::OutOfMemory) {
        let line = last("ran out of memory: ask for more (--mem) or use less before running it again");
        return Some(Advice { kind: AdviceKind::OutOfMemory, line, runs: count });
    }
    if all(JobStateBase::Timeout) {
        let longest = runs.iter().filter_map(|run| run.time_limit_min).max();
        let limit = longest.map(|minutes| format!(" of {}", words(minutes * 60))).unwrap_or_default();
        let line = last(&format!("hit their time limit{limit}: ask for more time or save checkpoints"));
        return Some(Advice { kind: AdviceKind::Timeouts, line, runs: count });
    }
    if runs.iter().all(|run| matches!(run.state, JobStateBase::Failed | JobStateBase::NodeFail)) {
        let line = last("failed: look at the last one's report before running it again");
        return Some(Advice { kind: AdviceKind::Failures, line, runs: count });
    }
    idle_gpus(ask, runs).map(|line| Advice { kind: AdviceKind::IdleGpus, line: last(&line), runs: count }).or_else(
        || time_limit(ask, runs).map(|line| Advice { kind: AdviceKind::TimeLimit, line: last(&line), runs: count }),
    )
}

/// "used at most 2 of 8 GPUs": every run had a report, held as many GPUs as the job asks for now (or
/// as the runs had, when the ask does not say), and kept at most half of them busy.
fn idle_gpus(ask: &Ask, runs: &[PastRun]) -> Option<String> {
    let held = runs.iter().map(|run| run.gpus).max()?;
    if held == 0 || runs.iter().any(|run| run.gpus != held) {
        return None;
    }
    let mut busiest = 0;
    for run in runs {
        busiest = busiest.max(run.busy_gpus?);
    }
    let asked = ask.gpus.unwrap_or(held);
    if busiest * 2 > held || asked <= busiest {
        return None;
    }
    let used = if busiest == 0 {
        format!("left all {held} GPUs idle")
    } else {
        format!("used at most {busiest} of {held} GPUs")
    };
    let hint = if busiest == 0 { String::new() } else { format!(": ask for {busiest} (--gpus={busiest})") };
    Some(format!("{used}{hint}"))
}

/// "ran 40 min at most; you ask for 24 h": every run completed, and the limit asked (or, when the ask
/// does not say, the limit the runs had) is far above the longest.
fn time_limit(ask: &Ask, runs: &[PastRun]) -> Option<String> {
    if !runs.iter().all(|run| run.state == JobStateBase::Completed) {
        return None;
    }
    let asked_min = match ask.time_limit_min {
        Some(minutes) => minutes,
        None => runs.iter().map(|run| run.time_limit_min).collect::<Option<Vec<_>>>()?.into_iter().min()?,
    };
    let longest_s = runs.iter().map(|run| run.elapsed_s).max()?;
    let asked_s = asked_min * 60;
    if asked_s < longest_s.max(60) * TIME_LIMIT_FACTOR || asked_s < longest_s + TIME_LIMIT_SLACK_MIN * 60 {
        return None;
    }
    Some(format!(
        "ran {} at most, and this one asks for {}: a shorter --time starts sooner",
        words(longest_s),
        words(asked_s)
    ))
}

/// A duration in words a person reads at a glance: `40 min`, `3 h 10 min`, `2 d 4 h`.
pub fn words(seconds: u64) -> String {
    let minutes = seconds.div_ceil(60).max(1);
    match minutes {
        0..60 => format!("{minutes} min"),
        60..1440 if minutes.is_multiple_of(60) => format!("{} h", minutes / 60),
        60..1440 => format!("{} h {} min", minutes / 60, minutes % 60),
        _ if minutes % 1440 < 60 => format!("{} d", minutes / 1440),
        _ => format!("{} d {} h", minutes / 1440, (minutes % 1440) / 60),
    }
}

/// Slurm's `--time` syntax in minutes: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S` (seconds round
/// up, as Slurm rounds them). `UNLIMITED`/`INFINITE` is `None`.
pub fn parse_time_limit(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    let bad = || format!("`{text}` is not a Slurm time limit (minutes, H:M:S or D-H:M:S)");
    if text.eq_ignore_ascii_case("unlimited") || text.eq_ignore_ascii_case("infinite") {
        return Ok(None);
    }
    let number = |part: &str| -> Result<u64, String> {
        if part.is_empty() || part.len() > 9 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let (days, rest) = match text.split_once('-') {
        Some((days, rest)) => (Some(number(days)?), rest),
        None => (None, text),
    };
    let parts = rest.split(':').map(number).collect::<Result<Vec<u64>, String>>()?;
    let seconds = match (days, parts.as_slice()) {
        (None, [minutes]) => minutes * 60,
        (None, [minutes, seconds]) => minutes * 60 + seconds,
        (None, [hours, minutes, seconds]) | (Some(_), [hours, minutes, seconds]) => {
            hours * 3600 + minutes * 60 + seconds
        }
        (Some(_), [hours]) => hours * 3600,
        (Some(_), [hours, minutes]) => hours * 3600 + minutes * 60,
        _ => return Err(bad()),
    };
    Ok(Some(days.unwrap_or(0) * 1440 + seconds.div_ceil(60)))
}

/// A GPU count from one of Slurm's GPU options: `--gpus` / `--gpus-per-node` (`8`, `a100:8`) or a
/// `--gres` list (`gpu:8`, `gres/gpu:a100:4,shard:2`). `None` when it names no GPUs.
pub fn parse_gpu_count(text: &str, gres: bool) -> Result<Option<u64>, String> {
    let bad = || format!("`{text}` is not a GPU count Slurm takes");
    let mut total = None;
    for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let item = item.strip_prefix("gres/").unwrap_or(item);
        let fields: Vec<&str> = item.split(':').collect();
        let count_field = if gres {
            if fields.first() != Some(&"gpu") {
                continue;
            }
            match fields.len() {
                1 => "1",
                _ if fields.last().is_some_and(|f| f.bytes().all(|b| b.is_ascii_digit())) => fields[fields.len() - 1],
                _ => "1",
            }
        } else {
            fields.last().copied().unwrap_or_default()
        };
        let count: u64 = count_field.parse().map_err(|_| bad())?;
        total = Some(total.unwrap_or(0) + count);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(state: JobStateBase, elapsed_min: u64, limit_min: u64, gpus: u64, busy: Option<u64>) -> PastRun {
        PastRun { state, elapsed_s: elapsed_min * 60, time_limit_min: Some(limit_min), gpus, busy_gpus: busy }
    }

    fn name() -> JobName {
        "train".parse().expect("a name")
    }

    #[test]
    fn idle_gpus_speak_from_five_runs() {
        let runs: Vec<PastRun> = (0..5).map(|i| run(JobStateBase::Completed, 30 + i, 60, 8, Some(1 + i % 2))).collect();
        let advice = advise(&name(), &Ask::default(), &runs).expect("advice");
        assert_eq!(advice.kind, AdviceKind::IdleGpus);
        assert_eq!(advice.line, "your last 5 runs of `train` used at most 2 of 8 GPUs: ask for 2 (--gpus=2)");
        assert_eq!(advice.runs, 5);
    }

    #[test]
    fn only_the_latest_five_runs_count() {
        let mut runs: Vec<PastRun> = (0..5).map(|_| run(JobStateBase::Completed, 30, 60, 8, Some(2))).collect();
        runs.push(run(JobStateBase::Completed, 30, 60, 8, Some(8)));
        assert_eq!(advise(&name(), &Ask::default(), &runs).map(|a| a.runs), Some(5));
    }

    #[test]
    fn fewer_than_three_runs_say_nothing() {
        let runs = vec![run(JobStateBase::OutOfMemory, 5, 60, 8, Some(0)); 2];
        assert_eq!(advise(&name(), &Ask::default(), &runs), None);
    }

    #[test]
    fn one_busy_run_silences_idle_gpus() {
        let mut runs = vec![run(JobStateBase::Completed, 30, 60, 8, Some(2)); 4];
        runs.push(run(JobStateBase::Completed, 30, 60, 8, Some(7)));
        assert_eq!(advise(&name(), &Ask::default(), &runs), None);
    }

    #[test]
    fn a_run_without_a_report_silences_idle_gpus() {
        let mut runs = vec![run(JobStateBase::Completed, 30, 60, 8, Some(2)); 4];
        runs.push(run(JobStateBase::Completed, 30, 60, 8, None));
        assert_eq!(advise(&name(), &Ask::default(), &runs), None);
    }

    #[test]
    fn asking_for_fewer_gpus_already_takes_the_advice() {
        let runs = vec![run(JobStateBase::Completed, 30, 60, 8, Some(2)); 5];
        assert_eq!(advise(&name(), &Ask { gpus: Some(2), time_limit_min: None }, &runs), None);
        let advice = advise(&name(), &Ask { gpus: Some(8), time_limit_min: None }, &runs).expect("advice");
        assert_eq!(advice.kind, AdviceKind::IdleGpus);
    }

    #[test]
    fn all_idle_gpus_are_said_plainly() {
        let runs = vec![run(JobStateBase::Completed, 30, 60, 4, Some(0)); 3];
        let advice = advise(&name(), &Ask::default(), &runs).expect("advice");
        assert_eq!(advice.line, "your last 3 runs of `train` left all 4 GPUs idle");
    }

    #[test]
    fn a_time_limit_far_above_use_is_named() {
        let runs: Vec<PastRun> = [40, 35, 22].iter().map(|m| run(JobStateBase::Completed, *m, 1440, 0, None)).collect();
        let advice = advise(&name(), &Ask::default(), &runs).expect("advice");
        assert_eq!(advice.kind, AdviceKind::TimeLimit);
        assert_eq!(
            advice.line,
            "your last 3 runs of `train` ran 40 min at most, and this one asks for 1 d: a shorter --time starts sooner"
        );
        // The limit asked now is what counts: 2 h on 40-minute runs is not far enough above.
        assert_eq!(advise(&name(), &Ask { gpus: None, time_limit_min: Some(120) }, &runs), None);
        let asked = Ask { gpus: None, time_limit_min: Some(600) };
        assert!(advise(&name(), &asked, &runs).is_some_and(|a| a.line.contains("asks for 10 h")));
    }

    #[test]
    fn a_time_limit_says_nothing_unless_every_run_completed() {
        let mut runs = vec![run(JobStateBase::Completed, 40, 1440, 0, None); 4];
        runs.push(run(JobStateBase::Cancelled, 3, 1440, 0, None));
        assert_eq!(advise(&name(), &Ask::default(), &runs), None);
    }

    #[test]
    fn repeated_failures_come_first() {
        let runs = vec![run(JobStateBase::OutOfMemory, 3, 1440, 8, Some(0)); 3];
        assert_eq!(advise(&name(), &Ask::default(), &runs).map(|a| a.kind), Some(AdviceKind::OutOfMemory));
        let runs = vec![run(JobStateBase::Timeout, 60, 60, 0, None); 4];
        let advice = advise(&name(), &Ask::default(), &runs).expect("advice");
        assert_eq!(advice.kind, AdviceKind::Timeouts);
        assert!(advice.line.contains("time limit of 1 h"), "{}", advice.line);
        let runs = vec![
            run(JobStateBase::Failed, 3, 60, 0, None),
            run(JobStateBase::NodeFail, 3, 60, 0, None),
            run(JobStateBase::Failed, 3, 60, 0, None),
        ];
        assert_eq!(advise(&name(), &Ask::default(), &runs).map(|a| a.kind), Some(AdviceKind::Failures));
        let mixed = vec![
            run(JobStateBase::Failed, 3, 60, 0, None),
            run(JobStateBase::Completed, 3, 60, 0, None),
            run(JobStateBase::Failed, 3, 60, 0, None),
        ];
        assert_eq!(advise(&name(), &Ask::default(), &mixed), None);
    }

    #[test]
    fn parses_slurm_time_limits() {
        assert_eq!(parse_time_limit("90"), Ok(Some(90)));
        assert_eq!(parse_time_limit("90:30"), Ok(Some(91)));
        assert_eq!(parse_time_limit("24:00:00"), Ok(Some(1440)));
        assert_eq!(parse_time_limit("1-12"), Ok(Some(2160)));
        assert_eq!(parse_time_limit("1-00:30"), Ok(Some(1470)));
        assert_eq!(parse_time_limit("2-01:00:01"), Ok(Some(2941)));
        assert_eq!(parse_time_limit("UNLIMITED"), Ok(None));
        for bad in ["", "1:2:3:4", "x", "-1", "1-", "99999999999999"] {
            assert!(parse_time_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_gpu_options() {
        assert_eq!(parse_gpu_count("8", false), Ok(Some(8)));
        assert_eq!(parse_gpu_count("a100:4", false), Ok(Some(4)));
        assert_eq!(parse_gpu_count("gpu:8", true), Ok(Some(8)));
        assert_eq!(parse_gpu_count("gres/gpu:a100:2,shard:4", true), Ok(Some(2)));
        assert_eq!(parse_gpu_count("gpu", true), Ok(Some(1)));
        assert_eq!(parse_gpu_count("shard:4", true), Ok(None));
        assert!(parse_gpu_count("many", false).is_err());
    }

    #[test]
    fn durations_read_as_words() {
        assert_eq!(words(40 * 60), "40 min");
        assert_eq!(words(59), "1 min");
        assert_eq!(words(0), "1 min", "a run that took no time still reads as a duration");
        assert_eq!(words(3 * 3600 + 600), "3 h 10 min");
        assert_eq!(words(86_400), "1 d");
        assert_eq!(words(2 * 86_400 + 4 * 3600), "2 d 4 h");
    }

    #[test]
    fn job_names_are_bounded() {
        assert!("train".parse::<JobName>().is_ok());
        assert!("".parse::<JobName>().is_err());
        assert!("a\nb".parse::<JobName>().is_err());
        assert!("x".repeat(256).parse::<JobName>().is_err());
    }
}
