//! The charts' history kept in memory: finished jobs, read from slurmdbd once per hour of their ends
//! and kept, so a staff Gantt of thirty days costs what its open jobs and last hour cost, not what
//! its 200,000 jobs cost to read again.
//!
//! A job is sealed once it ended more than [`LATE_END_S`] ago: slurmdbd no longer changes its record
//! (a requeue writes a new one). A window `[start, end)` is then
//! - the sealed hours from the one `start` falls in up to the seal, or up to [`LONG_SPAN_S`] past
//!   `end` when that comes first (a job submitted before `end` that ended later spans more than that);
//! - the catalogued long-spanned jobs that ended between those hours and the seal, by primary key;
//! - the jobs no sealed hour holds: the open ones and those that ended since the seal.
//!
//! The last two are read for every window (a few hundred rows); an hour is read when no window kept
//! it, and read anew after [`KEEP`] (an hour of the last day after [`KEEP_RECENT`]), so an end
//! slurmdbd recorded late, or a purge, shows within that.
//! Only staff's unfiltered windows read through here: a tenant's window is their own few jobs, which
//! slurmdbd's per-user index reads fast, and nothing kept here is ever shown to anyone but staff.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};

use super::gantt::ChartJob;
use crate::domain::cluster::ClusterName;
use crate::domain::job::{EndedJob, JobRecord};
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::{LATE_END_S, LONG_SPAN_S, SlurmDbd, SlurmDbdError};

/// Jobs are kept by the hour their end falls in.
const HOUR_S: u64 = 3600;
/// Hours read from slurmdbd per statement: a day of a busy 100-node cluster is about 7,000 rows.
const HOURS_PER_READ: u64 = 24;
/// Statements in flight while filling a window's missing hours (one decodes while MariaDB reads).
const READS_AT_ONCE: usize = 2;
/// How long an hour is kept before it is read anew.
const KEEP: Duration = Duration::from_secs(6 * 3600);
/// An hour of the last day is read anew this often: slurmdbd records an end late when its agent
/// queue held it (slurmdbd down for a while), and such a job must not go missing for hours from a
/// window that drew it running a moment before.
const KEEP_RECENT: Duration = Duration::from_secs(600);
/// What "the last day" is for [`KEEP_RECENT`], in seconds.
const RECENT_S: u64 = 86_400;

/// One sealed job: its numbers, and its strings as indices into its hour's tables (64 bytes). Times
/// are epoch seconds in 32 bits (enough until 2106).
struct SealedJob {
    db_index: u64,
    time_submit: u32,
    time_start: u32,
    time_end: u32,
    gpus: u32,
    job_id_raw: u32,
    /// [`PLAIN_ID`] when sacct prints the job id as `job_id_raw` alone (most jobs: no string kept).
    job_id: u32,
    name: u32,
    user: u32,
    account: u32,
    partition: u32,
    state: u32,
    node_list: u32,
    /// Index into the hour's expanded node lists.
    hosts: u32,
}

/// A job id printed as its number alone.
const PLAIN_ID: u32 = u32::MAX;

/// Epoch seconds as kept (32 bits); a time past 2106 reads as the latest second 32 bits hold.
fn seconds32(time: u64) -> u32 {
    u32::try_from(time).unwrap_or(u32::MAX)
}

/// The started jobs that ended in one hour, their strings and node lists kept once per hour and
/// shared with every window that draws them.
struct Hour {
    /// When it was read.
    read_at: Instant,
    strings: Vec<Arc<str>>,
    hosts: Vec<Arc<[String]>>,
    jobs: Vec<SealedJob>,
}

impl Hour {
    fn of(records: Vec<EndedJob>, catalog: &TresCatalog) -> Self {
        let mut hour = Hour { read_at: Instant::now(), strings: Vec::new(), hosts: Vec::new(), jobs: Vec::new() };
        let mut interned: HashMap<String, u32> = HashMap::new();
        let mut intern = |text: String, strings: &mut Vec<Arc<str>>| -> u32 {
            let next = strings.len() as u32;
            *interned.entry(text).or_insert_with_key(|text| {
                strings.push(text.as_str().into());
                next
            })
        };
        let mut host_lists: HashMap<u32, u32> = HashMap::new();
        for record in records {
            let node_list = intern(record.node_list, &mut hour.strings);
            let hosts = *host_lists.entry(node_list).or_insert_with(|| {
                hour.hosts.push(record.nodes.hosts().into());
                hour.hosts.len() as u32 - 1
            });
            let job = SealedJob {
                db_index: record.db_index,
                time_submit: seconds32(record.time_submit),
                time_start: seconds32(record.time_start),
                time_end: seconds32(record.time_end),
                gpus: u32::try_from(catalog.gpus(&record.tres_alloc)).unwrap_or(u32::MAX),
                job_id_raw: record.identity.id_job,
                job_id: match record.identity.to_string() {
                    printed if printed == record.identity.id_job.to_string() => PLAIN_ID,
                    printed => intern(printed, &mut hour.strings),
                },
                name: intern(record.job_name, &mut hour.strings),
                user: intern(record.user, &mut hour.strings),
                account: intern(record.account, &mut hour.strings),
                partition: intern(record.partition, &mut hour.strings),
                state: intern(record.state.name().to_string(), &mut hour.strings),
                node_list,
                hosts,
            };
            hour.jobs.push(job);
        }
        hour.strings.shrink_to_fit();
        hour.hosts.shrink_to_fit();
        hour.jobs.shrink_to_fit();
        hour
    }

    fn text(&self, index: u32) -> Arc<str> {
        self.strings.get(index as usize).cloned().unwrap_or_else(|| Arc::from(""))
    }

    fn chart_job(&self, job: &SealedJob) -> KeptJob {
        KeptJob {
            order: (u64::from(job.time_submit), u64::from(job.time_end), job.db_index),
            job: ChartJob {
                job_id: match job.job_id {
                    PLAIN_ID => job.job_id_raw.to_string().into(),
                    index => self.text(index),
                },
                job_id_raw: job.job_id_raw,
                name: self.text(job.name),
                user: self.text(job.user),
                account: self.text(job.account),
                partition: self.text(job.partition),
                state: self.text(job.state),
                start: u64::from(job.time_start),
                end: u64::from(job.time_end),
                gpus: u64::from(job.gpus),
                node_list: self.text(job.node_list),
                hosts: self.hosts.get(job.hosts as usize).cloned().unwrap_or_else(|| Arc::from([])),
                mean_gpu_util: None,
                mean_tensor_active: None,
            },
        }
    }
}

/// A job of a window as the charts draw it, with the listing's order (submit time, end, row).
pub(super) struct KeptJob {
    pub order: (u64, u64, u64),
    pub job: ChartJob,
}

/// What a window is made of: the sealed jobs as charts draw them, and the records read fresh.
pub(super) struct SplitWindow {
    pub sealed: Vec<KeptJob>,
    pub fresh: Vec<JobRecord>,
}

/// The kept hours of every cluster, bounded by the jobs they hold.
pub struct ChartHistory {
    hours: Option<moka::sync::Cache<(ClusterName, u64), Arc<Hour>>>,
}

impl ChartHistory {
    /// A history holding up to about `max_jobs` jobs; 0: none (every window is read whole).
    pub fn new(max_jobs: u32) -> Self {
        let hours = (max_jobs > 0).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(u64::from(max_jobs))
                .weigher(|_, hour: &Arc<Hour>| u32::try_from(hour.jobs.len() + 1).unwrap_or(u32::MAX))
                .time_to_live(KEEP)
                .build()
        });
        Self { hours }
    }

    /// The started jobs of `[start, end)` on `reader`'s cluster, every one staff may see, or `None`
    /// when the history cannot answer it (none is kept, or the long-span catalogue is not complete
    /// yet): the caller then reads the window whole.
    pub(super) async fn window(
        &self,
        reader: &SlurmDbd,
        catalog: &TresCatalog,
        (start, end): (u64, u64),
    ) -> Result<Option<SplitWindow>, SlurmDbdError> {
        let Some(hours) = &self.hours else { return Ok(None) };
        let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
        let seal = now.saturating_sub(LATE_END_S) / HOUR_S * HOUR_S;
        let first = start / HOUR_S * HOUR_S;
        let last = end.saturating_add(LONG_SPAN_S).div_ceil(HOUR_S).saturating_mul(HOUR_S).min(seal);
        let long = match reader.long_spans_ended((last, seal), end).await? {
            Some((rows, true)) => rows,
            _ => return Ok(None),
        };
        let wanted: Vec<u64> = (first..last).step_by(HOUR_S as usize).collect();
        let current = |hour: u64| {
            let kept = hours.get(&(reader.cluster().clone(), hour))?;
            let recent = hour + RECENT_S > now;
            (!recent || kept.read_at.elapsed() < KEEP_RECENT).then_some(kept)
        };
        let missing: Vec<u64> = wanted.iter().copied().filter(|&hour| current(hour).is_none()).collect();
        let filled = fill(hours, reader, catalog, &missing).await?;
        let mut kept_hours = Vec::with_capacity(wanted.len());
        for hour in wanted {
            // Just read, or kept (an hour evicted since the check is read again, alone).
            kept_hours.push(match filled.get(&hour).cloned().or_else(|| current(hour)) {
                Some(kept) => kept,
                None => {
                    let records = reader.ended_between(hour, hour + HOUR_S).await?;
                    Arc::new(Hour::of(records.into_iter().filter(EndedJob::drawn).collect(), catalog))
                }
            });
        }
        let in_window = |job: &&SealedJob| u64::from(job.time_end) >= start && u64::from(job.time_submit) < end;
        let count = kept_hours.iter().map(|kept| kept.jobs.iter().filter(in_window).count()).sum();
        let mut sealed = Vec::with_capacity(count);
        for kept in &kept_hours {
            sealed.extend(kept.jobs.iter().filter(in_window).map(|job| kept.chart_job(job)));
        }
        let fresh = reader.unsealed((start, end), seal, &long).await?.into_iter().filter(JobRecord::drawn).collect();
        Ok(Some(SplitWindow { sealed, fresh }))
    }

    /// Reads into memory the sealed hours of `reader`'s cluster from the one `from` (epoch seconds)
    /// falls in up to the seal that nothing holds yet (one already kept stays as it is, even a recent
    /// one a window would read anew), so that staff's first wide window after a start, or after its
    /// hours were read anew, costs what a later one costs. Answers how many hours it read (none when
    /// no history is kept).
    pub(super) async fn warm(
        &self,
        reader: &SlurmDbd,
        catalog: &TresCatalog,
        from: u64,
    ) -> Result<usize, SlurmDbdError> {
        let Some(hours) = &self.hours else { return Ok(0) };
        let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
        let seal = now.saturating_sub(LATE_END_S) / HOUR_S * HOUR_S;
        let missing: Vec<u64> = (from / HOUR_S * HOUR_S..seal)
            .step_by(HOUR_S as usize)
            .filter(|&hour| !hours.contains_key(&(reader.cluster().clone(), hour)))
            .collect();
        Ok(fill(hours, reader, catalog, &missing).await?.len())
    }
}

/// Reads `missing` hours of `reader`'s cluster from slurmdbd (a day per statement, two at a time) and
/// keeps them; answers them by hour.
async fn fill(
    hours: &moka::sync::Cache<(ClusterName, u64), Arc<Hour>>,
    reader: &SlurmDbd,
    catalog: &TresCatalog,
    missing: &[u64],
) -> Result<HashMap<u64, Arc<Hour>>, SlurmDbdError> {
    let cluster = reader.cluster();
    let reads = runs(missing).into_iter().map(|(from, to)| async move {
        let records = reader.ended_between(from, to).await?;
        Ok::<_, SlurmDbdError>((from, to, records))
    });
    let mut filled = HashMap::with_capacity(missing.len());
    let mut reads = futures::stream::iter(reads).buffer_unordered(READS_AT_ONCE);
    while let Some((from, to, records)) = reads.try_next().await? {
        let mut by_hour: HashMap<u64, Vec<EndedJob>> = HashMap::new();
        for record in records.into_iter().filter(EndedJob::drawn) {
            by_hour.entry(record.time_end / HOUR_S * HOUR_S).or_default().push(record);
        }
        for hour in (from..to).step_by(HOUR_S as usize) {
            let kept = Arc::new(Hour::of(by_hour.remove(&hour).unwrap_or_default(), catalog));
            hours.insert((cluster.clone(), hour), kept.clone());
            filled.insert(hour, kept);
        }
    }
    Ok(filled)
}

/// Consecutive hours as `[from, to)` ranges of at most [`HOURS_PER_READ`] hours.
fn runs(hours: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &hour in hours {
        match runs.last_mut() {
            Some((from, to)) if *to == hour && (*to - *from) / HOUR_S < HOURS_PER_READ => *to = hour + HOUR_S,
            _ => runs.push((hour, hour + HOUR_S)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_job_takes_64_bytes() {
        assert_eq!(std::mem::size_of::<SealedJob>(), 64);
    }

    #[test]
    fn missing_hours_are_read_in_runs_of_at_most_a_day() {
        let h = |n: u64| n * HOUR_S;
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[h(1), h(2), h(4)]), vec![(h(1), h(3)), (h(4), h(5))]);
        let day_and_more: Vec<u64> = (0..30).map(h).collect();
        assert_eq!(runs(&day_and_more), vec![(h(0), h(24)), (h(24), h(30))]);
    }
}
