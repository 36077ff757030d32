//! A job record as slurmdbd holds it, decoded, and the shape of a job query.

use chrono::{DateTime, Utc};

use super::exit_code::ExitCode;
use super::hostlist::Hostlist;
use super::ids::{JobIdentity, JobSelector};
use super::state::{JobState, StateFilter};
use super::time::TimeLimit;
use super::tres::{MemRequest, TresMap};

/// One row of `<cluster>_job_table`, decoded.
#[derive(Debug, Clone)]
pub struct JobRecord {
    /// `job_db_inx`: unique per record (a requeued job has several records with one `id_job`).
    pub db_index: u64,
    pub identity: JobIdentity,
    pub job_name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub account: String,
    pub partition: String,
    pub qos: String,
    pub state: JobState,
    pub kill_requid: Option<u32>,
    pub exit_code: ExitCode,
    pub derived_exit_code: ExitCode,
    /// Epoch seconds, 0 = unset (as stored).
    pub time_submit: u64,
    pub time_eligible: u64,
    pub time_start: u64,
    pub time_end: u64,
    pub time_suspended: u64,
    pub timelimit: TimeLimit,
    /// The stored expression (`n[1-2]`, `None assigned`) and its hosts.
    pub node_list: String,
    pub nodes: Hostlist,
    pub alloc_nodes: u32,
    pub cpus_req: u32,
    pub mem_req: MemRequest,
    pub tres_alloc: TresMap,
    pub tres_req: TresMap,
    pub comment: Option<String>,
    pub work_dir: String,
    pub submit_line: String,
    /// The job's SLUID where slurmdbd records one (Slurm ≥ 26.05).
    pub sluid: Option<slurmlens_slurm::sluid::Sluid>,
    /// How often the job was requeued, where slurmdbd records it (`restart_cnt`, Slurm ≥ 24.11).
    pub restarts: Option<u32>,
}

impl JobRecord {
    /// True when the job never got nodes (cancelled or still pending).
    pub fn never_ran(&self) -> bool {
        self.alloc_nodes == 0 || self.nodes.is_empty()
    }

    /// Whether a chart draws it: it started and held nodes.
    pub fn drawn(&self) -> bool {
        self.time_start > 0 && !self.never_ran()
    }

    /// Whether the job held its allocation at `at` (epoch seconds): started by then, not yet ended.
    pub fn running_at(&self, at: u64) -> bool {
        self.time_start > 0 && self.time_start <= at && (self.time_end == 0 || self.time_end > at)
    }

    /// The run this record describes, as our side tables keyed by job id alone are read; `None`
    /// before it starts (nothing recorded can be its own yet).
    pub fn run(&self) -> Option<RunWindow> {
        RunWindow::of(self.time_start, self.time_end)
    }
}

/// A finished job as the charts draw it, and nothing more: what the charts' history keeps of the
/// jobs that ended in an hour (`app/chart_history.rs`), read without the columns only a listing shows.
#[derive(Debug, Clone, PartialEq)]
pub struct EndedJob {
    /// `job_db_inx`.
    pub db_index: u64,
    pub identity: JobIdentity,
    pub job_name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: JobState,
    pub time_submit: u64,
    pub time_start: u64,
    pub time_end: u64,
    /// As slurmdbd stores it (`gpu[001-004]`), and parsed.
    pub node_list: String,
    pub nodes: Hostlist,
    pub alloc_nodes: u32,
    pub tres_alloc: TresMap,
}

impl EndedJob {
    /// Whether a chart draws it, as [`JobRecord::drawn`].
    pub fn drawn(&self) -> bool {
        self.time_start > 0 && self.alloc_nodes > 0 && !self.nodes.is_empty()
    }
}

/// Seconds of margin around a run: the prolog's record comes just after the start, the epilog's just
/// after the end, and nodes' clocks differ a little from slurmdbd's.
pub const RUN_MARGIN_S: i64 = 60;

/// One run of a job: its start to its end (open while it runs). GPU records and trace summaries are
/// keyed by job id alone, so they are read only within it: after a job-id wrap-around (`MaxJobId`, a
/// reset state) or a requeue, a record of an earlier job under the same id falls outside (issue #15, M9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunWindow {
    pub start: DateTime<Utc>,
    /// `None` while it runs.
    pub end: Option<DateTime<Utc>>,
}

impl RunWindow {
    /// The run from `start` to `end` (epoch seconds; `end` 0 while it runs); `None` before it starts.
    pub fn of(start: u64, end: u64) -> Option<Self> {
        let start = super::time::epoch(start)?;
        let end = super::time::epoch(end).map(|end| end.max(start));
        Some(Self { start, end })
    }

    /// The earliest moment a record of this run may carry.
    pub fn from(&self) -> DateTime<Utc> {
        self.start - chrono::Duration::seconds(RUN_MARGIN_S)
    }

    /// The latest moment a record of this run may carry (`None`: open, the run goes on).
    pub fn until(&self) -> Option<DateTime<Utc>> {
        self.end.map(|end| end + chrono::Duration::seconds(RUN_MARGIN_S))
    }

    /// Whether a record seen from `first` to `last` overlaps this run.
    pub fn overlaps(&self, first: DateTime<Utc>, last: DateTime<Utc>) -> bool {
        last >= self.from() && self.until().is_none_or(|until| first <= until)
    }
}

/// One row of `<cluster>_step_table`, decoded.
#[derive(Debug, Clone)]
pub struct StepRecord {
    pub id_step: i64,
    pub step_name: String,
    pub state: JobState,
    pub exit_code: ExitCode,
    pub time_start: u64,
    pub time_end: u64,
    pub time_suspended: u64,
    pub node_list: String,
    pub task_count: u32,
    pub tres_alloc: TresMap,
    pub tres_usage_in_max: TresMap,
    pub cpu_seconds: f64,
}

/// A half-open time window `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// Why a window was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("window start must be before its end")]
pub struct EmptyWindow;

impl TimeWindow {
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Result<Self, EmptyWindow> {
        if start < end { Ok(Self { start, end }) } else { Err(EmptyWindow) }
    }

    pub fn start(&self) -> DateTime<Utc> {
        self.start
    }

    pub fn end(&self) -> DateTime<Utc> {
        self.end
    }
}

/// Filters of a job listing; every one narrows (empty lists mean "any").
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub partitions: Vec<String>,
    pub states: Vec<StateFilter>,
    /// Jobs that held this node.
    pub node: Option<String>,
    pub min_gpus: Option<u64>,
    pub max_gpus: Option<u64>,
    /// A search (`q=`): a job id, or text in the name, user or account.
    pub search: Option<JobSearch>,
    /// Jobs carrying this tag (our store's word: the application turns it into `among`).
    pub tag: Option<super::tag::Tag>,
    /// Only these job records (job id, submit time): a bounded set the application read from our store.
    pub among: Option<Vec<(u32, u64)>>,
}

impl JobFilter {
    /// Whether it lets every job through.
    pub fn is_empty(&self) -> bool {
        let JobFilter { users, accounts, partitions, states, node, min_gpus, max_gpus, search, tag, among } = self;
        users.is_empty()
            && accounts.is_empty()
            && partitions.is_empty()
            && states.is_empty()
            && node.is_none()
            && min_gpus.is_none()
            && max_gpus.is_none()
            && search.is_none()
            && tag.is_none()
            && among.is_none()
    }
}

/// What a listing's search (`q=`) looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobSearch {
    /// `123` (that job, an array's tasks, a het job's components), `123_4` or `8+1`: exactly that id.
    Id(JobSelector),
    /// Any other text: jobs whose name, user or account contains it, ignoring case.
    Text(String),
}

/// Longest search text.
pub const MAX_SEARCH_CHARS: usize = 64;

/// Why a search was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSearch {
    #[error("empty search")]
    Empty,
    #[error("a search is at most {MAX_SEARCH_CHARS} characters")]
    TooLong,
    #[error("a search holds printable ASCII characters only (job ids, names, users, accounts)")]
    NotPrintable,
}

impl JobSearch {
    /// Parses `q=`: trimmed, 1–64 printable ASCII characters (slurmdbd keeps names in latin1, and a
    /// job id, user or account is ASCII); a job id is matched exactly, anything else as a substring.
    pub fn parse(text: &str) -> Result<Self, BadSearch> {
        let text = text.trim();
        if text.is_empty() {
            return Err(BadSearch::Empty);
        }
        if text.chars().count() > MAX_SEARCH_CHARS {
            return Err(BadSearch::TooLong);
        }
        if !text.bytes().all(|byte| (0x20..0x7f).contains(&byte)) {
            return Err(BadSearch::NotPrintable);
        }
        Ok(match text.parse::<JobSelector>() {
            Ok(selector) => Self::Id(selector),
            Err(_) => Self::Text(text.to_string()),
        })
    }

    /// A `LIKE` pattern that finds `text` anywhere, its wildcards escaped with `!`.
    pub fn like_pattern(text: &str) -> String {
        let mut pattern = String::with_capacity(text.len() + 2);
        pattern.push('%');
        for character in text.chars() {
            if matches!(character, '!' | '%' | '_') {
                pattern.push('!');
            }
            pattern.push(character);
        }
        pattern.push('%');
        pattern
    }
}

impl JobFilter {
    /// Whether any filter is left to [`JobFilter::matches_decoded`] (rows must be tested after decoding).
    pub fn has_decoded_tests(&self) -> bool {
        self.node.is_some() || self.min_gpus.is_some() || self.max_gpus.is_some() || !self.states.is_empty()
    }

    /// The filters that slurmdbd's columns cannot answer and are applied after decoding.
    pub fn matches_decoded(&self, job: &JobRecord, gpus: u64) -> bool {
        let node_ok = self.node.as_deref().is_none_or(|node| job.nodes.contains(node));
        let min_ok = self.min_gpus.is_none_or(|min| gpus >= min);
        let max_ok = self.max_gpus.is_none_or(|max| gpus <= max);
        let state_ok = self.states.is_empty() || self.states.iter().any(|&filter| job.state.matches(filter));
        node_ok && min_ok && max_ok && state_ok
    }
}

/// Position after the last job of a page. Jobs are listed newest submission first, in the order of
/// slurmdbd's own `archive_purge (time_submit, time_end)` index (plus the primary key InnoDB appends),
/// so a page is a range scan of that index and never a sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobCursor {
    pub time_submit: u64,
    pub time_end: u64,
    pub db_index: u64,
}

/// Why a cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed cursor")]
pub struct BadCursor;

impl JobCursor {
    /// The opaque text handed to clients.
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.time_submit, self.time_end, self.db_index)
    }

    pub fn decode(text: &str) -> Result<Self, BadCursor> {
        let parts: Vec<&str> = text.split('.').collect();
        let number = |s: &str| -> Result<u64, BadCursor> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(BadCursor);
            }
            s.parse().map_err(|_| BadCursor)
        };
        match parts.as_slice() {
            [time_submit, time_end, db_index] => {
                Ok(Self { time_submit: number(time_submit)?, time_end: number(time_end)?, db_index: number(db_index)? })
            }
            _ => Err(BadCursor),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let cursor = JobCursor { time_submit: 1_795_971_325, time_end: 0, db_index: 42 };
        assert_eq!(JobCursor::decode(&cursor.encode()), Ok(cursor));
        for bad in ["", "1", "1.", ".1", "a.b", "-1.2", "1.2", "1.2.3.4", "1..3"] {
            assert_eq!(JobCursor::decode(bad), Err(BadCursor), "{bad}");
        }
    }

    #[test]
    fn a_run_holds_its_own_records_and_not_an_earlier_jobs() {
        let at = |s: i64| DateTime::from_timestamp(1_795_000_000 + s, 0).expect("time");
        let run = RunWindow { start: at(0), end: Some(at(3600)) };
        assert!(run.overlaps(at(5), at(3600)), "its own record");
        assert!(run.overlaps(at(-30), at(-30)), "a prolog a little early");
        assert!(!run.overlaps(at(-7 * 86_400), at(-7 * 86_400 + 3600)), "a week-old job under the same id");
        assert!(!run.overlaps(at(3700), at(4000)), "a later run");
        let running = RunWindow { start: at(0), end: None };
        assert!(running.overlaps(at(10 * 86_400), at(10 * 86_400)));
        assert!(!running.overlaps(at(-600), at(-300)), "an earlier run of a requeued job");
    }

    #[test]
    fn windows_must_not_be_empty() {
        let now = Utc::now();
        assert!(TimeWindow::new(now, now).is_err());
        assert!(TimeWindow::new(now - chrono::Duration::hours(1), now).is_ok());
    }

    #[test]
    fn searches_read_job_ids_exactly_and_other_text_as_a_substring() {
        assert_eq!(JobSearch::parse(" 1027875 "), Ok(JobSearch::Id(JobSelector::Id(1_027_875))));
        assert_eq!(
            JobSearch::parse("123_4"),
            Ok(JobSearch::Id(JobSelector::ArrayTask { array_job_id: 123, task_id: 4 }))
        );
        assert_eq!(JobSearch::parse("u20"), Ok(JobSearch::Text("u20".into())));
        assert_eq!(JobSearch::parse("  "), Err(BadSearch::Empty));
        assert_eq!(JobSearch::parse(&"x".repeat(65)), Err(BadSearch::TooLong));
        assert_eq!(JobSearch::parse("naïve"), Err(BadSearch::NotPrintable));
        assert_eq!(JobSearch::parse(r"a\tb"), Ok(JobSearch::Text(r"a\tb".into())));
        assert_eq!(JobSearch::parse("a\tb"), Err(BadSearch::NotPrintable));
        assert_eq!(JobSearch::parse("a\u{7}b"), Err(BadSearch::NotPrintable));
        assert_eq!(JobSearch::like_pattern("50%_a!"), "%50!%!_a!!%");
    }
}
