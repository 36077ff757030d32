//! The job listing's order: the columns it sorts by (`sort=`), and the one comparison the server's
//! sorted pages and the pages' own tables both use, so that a table and the API never disagree.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::jobs::Job;

/// A field of a job that the listing sorts by (`sort=`), named as the field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobSort {
    /// `job_id`: the numeric id (`job_id_raw`), then the id as sacct prints it.
    JobId,
    /// `submit`: submission time.
    Submit,
    /// `job_name`.
    JobName,
    /// `user`.
    User,
    /// `account`.
    Account,
    /// `partition`.
    Partition,
    /// `state`, as sacct prints it.
    State,
    /// `start`: a pending job has none (last).
    Start,
    /// `end`: an open job has none (last).
    End,
    /// `elapsed`, in seconds (`elapsed_raw`).
    Elapsed,
    /// `alloc_nodes`.
    AllocNodes,
    /// `alloc_gpus`.
    AllocGpus,
    /// `node_list`, as text.
    NodeList,
    /// `exit_code`, as text (`N:S`).
    ExitCode,
    /// `mean_gpu_util`: jobs without a measured mean are last.
    MeanGpuUtil,
    /// `blame`: jobs without a verdict are last.
    Blame,
}

impl JobSort {
    /// Every column, in the order the API documents them.
    pub const ALL: [JobSort; 16] = [
        Self::JobId,
        Self::Submit,
        Self::JobName,
        Self::User,
        Self::Account,
        Self::Partition,
        Self::State,
        Self::Start,
        Self::End,
        Self::Elapsed,
        Self::AllocNodes,
        Self::AllocGpus,
        Self::NodeList,
        Self::ExitCode,
        Self::MeanGpuUtil,
        Self::Blame,
    ];

    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JobId => "job_id",
            Self::Submit => "submit",
            Self::JobName => "job_name",
            Self::User => "user",
            Self::Account => "account",
            Self::Partition => "partition",
            Self::State => "state",
            Self::Start => "start",
            Self::End => "end",
            Self::Elapsed => "elapsed",
            Self::AllocNodes => "alloc_nodes",
            Self::AllocGpus => "alloc_gpus",
            Self::NodeList => "node_list",
            Self::ExitCode => "exit_code",
            Self::MeanGpuUtil => "mean_gpu_util",
            Self::Blame => "blame",
        }
    }

    /// The column a `sort=` word names.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|sort| sort.as_str() == word)
    }

    /// What `job` is ordered by in this column: small, so a whole window's keys fit where its jobs
    /// would not.
    pub fn key(self, job: &Job) -> SortKey {
        let seconds =
            |time: Option<chrono::DateTime<chrono::Utc>>| time.map(|time| SortValue::Integer(time.timestamp()));
        let whole = |number: u64| Some(SortValue::Integer(i64::try_from(number).unwrap_or(i64::MAX)));
        let text = |text: &str| Some(SortValue::Text(text.into()));
        let value = match self {
            Self::JobId => Some(SortValue::Integer(i64::from(job.job_id_raw))),
            Self::Submit => seconds(Some(job.submit)),
            Self::JobName => text(&job.job_name),
            Self::User => text(&job.user),
            Self::Account => text(&job.account),
            Self::Partition => text(&job.partition),
            Self::State => text(&job.state),
            Self::Start => seconds(job.start),
            Self::End => seconds(job.end),
            Self::Elapsed => whole(job.elapsed_raw),
            Self::AllocNodes => whole(u64::from(job.alloc_nodes)),
            Self::AllocGpus => whole(job.alloc_gpus),
            Self::NodeList => text(&job.node_list),
            Self::ExitCode => text(&job.exit_code),
            Self::MeanGpuUtil => job.mean_gpu_util.filter(|util| util.is_finite()).map(SortValue::Real),
            Self::Blame => job.blame.map(|blame| SortValue::Text(blame.as_str().into())),
        };
        SortKey {
            value,
            job_id_raw: job.job_id_raw,
            job_id: job.job_id.as_str().into(),
            submit: job.submit.timestamp(),
        }
    }
}

impl std::fmt::Display for JobSort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cell's value as the order reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum SortValue {
    Integer(i64),
    Real(f64),
    Text(Box<str>),
}

impl SortValue {
    fn compare(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Integer(a), Self::Integer(b)) => a.cmp(b),
            (Self::Real(a), Self::Real(b)) => a.total_cmp(b),
            (Self::Text(a), Self::Text(b)) => a.cmp(b),
            // One column holds one kind of value; a mix would be a bug, ordered by kind all the same.
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Self::Integer(_) => 0,
            Self::Real(_) => 1,
            Self::Text(_) => 2,
        }
    }
}

/// One job's place in the order: its cell (absent: blank), then its id and submission, which no two
/// job records share, so the order is total and the same on every read.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub value: Option<SortValue>,
    pub job_id_raw: u32,
    pub job_id: Box<str>,
    /// Epoch seconds.
    pub submit: i64,
}

impl SortKey {
    /// The listing's order: by the cell (descending when asked), blank cells last either way, then by
    /// job id and submission in the same direction.
    pub fn compare(&self, other: &Self, descending: bool) -> Ordering {
        let blank = |key: &Self| key.value.is_none();
        let ascending = match (&self.value, &other.value) {
            (Some(a), Some(b)) => a.compare(b),
            _ => Ordering::Equal,
        }
        .then_with(|| self.job_id_raw.cmp(&other.job_id_raw))
        .then_with(|| self.job_id.cmp(&other.job_id))
        .then_with(|| self.submit.cmp(&other.submit));
        blank(self).cmp(&blank(other)).then(if descending { ascending.reverse() } else { ascending })
    }
}

/// Orders `jobs` by `sort` as the API's sorted pages do.
pub fn sort_jobs(jobs: &mut [Job], sort: JobSort, descending: bool) {
    jobs.sort_by_cached_key(|job| OrderedKey { key: sort.key(job), descending });
}

/// A [`SortKey`] with its direction, as `Ord` for the standard sorts.
struct OrderedKey {
    key: SortKey,
    descending: bool,
}

impl PartialEq for OrderedKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for OrderedKey {}
impl PartialOrd for OrderedKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.compare(&other.key, self.descending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, gpus: u64, util: Option<f64>) -> Job {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "job_id": id.to_string(), "job_id_raw": id, "cluster": "c", "job_name": "x", "user": "u",
            "uid": 1, "gid": 1, "account": "a", "partition": "gpu", "qos": "normal", "state": "COMPLETED",
            "exit_code": "0:0", "derived_exit_code": "0:0", "submit": "2026-11-30T12:00:00Z",
            "elapsed": "00:01:00", "elapsed_raw": 60, "timelimit": "01:00:00",
            "node_list": "n1", "alloc_nodes": 1, "alloc_cpus": 2, "alloc_gpus": gpus, "alloc_tres": "cpu=2",
            "req_tres": "cpu=2", "req_mem": "1000M"
        }))
        .expect("valid job");
        job.mean_gpu_util = util;
        job
    }

    fn ids(jobs: &[Job]) -> Vec<u32> {
        jobs.iter().map(|job| job.job_id_raw).collect()
    }

    #[test]
    fn ties_break_on_job_id_in_the_same_direction_and_blanks_stay_last() {
        let mut jobs = vec![job(3, 8, None), job(1, 8, Some(5.0)), job(2, 16, Some(90.0)), job(4, 8, Some(5.0))];
        sort_jobs(&mut jobs, JobSort::AllocGpus, true);
        assert_eq!(ids(&jobs), [2, 4, 3, 1]);
        sort_jobs(&mut jobs, JobSort::AllocGpus, false);
        assert_eq!(ids(&jobs), [1, 3, 4, 2]);
        sort_jobs(&mut jobs, JobSort::MeanGpuUtil, false);
        assert_eq!(ids(&jobs), [1, 4, 2, 3], "the unmeasured job is last ascending");
        sort_jobs(&mut jobs, JobSort::MeanGpuUtil, true);
        assert_eq!(ids(&jobs), [2, 4, 1, 3], "and descending");
    }

    #[test]
    fn every_word_parses_back_and_serde_agrees() {
        for sort in JobSort::ALL {
            assert_eq!(JobSort::parse(sort.as_str()), Some(sort));
            assert_eq!(serde_json::to_string(&sort).expect("serialises"), format!("\"{sort}\""));
        }
        assert_eq!(JobSort::parse("uid"), None);
    }
}
