//! How far back a window's jobs can have been submitted, so that no listing reads the years of history
//! before it. A job overlaps `[start, end)` when it was submitted before `end` and had not ended by
//! `start`. slurmdbd's `archive_purge (time_submit, time_end)` index answers that by reading every
//! submission before `end`, back to the first job of the cluster: the cost grew with history (a year of
//! it made the 7-day Gantt 9× slower). Every job that overlaps the window and was submitted more than
//! [`LONG_SPAN_S`] before `start` is still open (running or pending) or spanned more than
//! `LONG_SPAN_S` from submission to end. The open ones are a short range of the `rollup2 (time_end, …)`
//! index (`time_end = 0`); the long-spanned ones are few, so the reader keeps them here, a
//! [`LongSpans`] catalogue, and reads them by primary key. The rest is one bounded range of
//! `archive_purge`: `[start - LONG_SPAN_S, end)`.
//!
//! The catalogue is built with one index-only scan of `archive_purge` (seconds for ten million jobs,
//! in the background, the first time a listing needs it), then kept fresh by reading the jobs that
//! ended lately (`rollup2`). A job whose end slurmdbd records late (its agent queue held it) is found
//! by the listing itself when it ended within [`LATE_END_S`] of the catalogue's last look, by the next
//! refresh when within a day, and by the periodic rebuild ([`REBUILD_AFTER`]) otherwise.

use std::time::{Duration, Instant};

use tokio::sync::{Mutex, RwLock};

use super::SlurmDbdError;
use crate::domain::cluster::ClusterName;

/// A job that spans longer than this from submission to end is catalogued; the bounded range of a
/// window starts this long before it. Eight days: longer than nearly every queue wait and run together
/// on a GPU cluster (a week's time limit and a day in the queue), short enough that the range's extra
/// week of index entries costs milliseconds.
pub const LONG_SPAN_S: u64 = 8 * 86_400;

/// A listing reads, beside the catalogue, the jobs that ended this long before the catalogue's last
/// look (`rollup2`, a few hundred rows an hour on a busy cluster): ends recorded late are not missed.
pub const LATE_END_S: u64 = 3600;

/// How long a catalogue is used before the jobs that ended since are read into it.
const REFRESH_AFTER: Duration = Duration::from_secs(60);
/// A refresh reads the jobs that ended in the last day, so ends recorded up to a day late are caught.
const REFRESH_LOOKBACK_S: u64 = 86_400;
/// How long a catalogue is trusted before it is built anew from the whole table.
const REBUILD_AFTER: Duration = Duration::from_secs(6 * 3600);
/// A catalogue not refreshed for this long is not used (the refreshes failed): listings read unbounded.
const STALE_AFTER: Duration = Duration::from_secs(12 * 3600);

/// A catalogued job: its row, submission and end (epoch seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spanned {
    db_index: u64,
    time_submit: u64,
    time_end: u64,
}

/// The jobs of one cluster that spanned more than [`LONG_SPAN_S`], and up to when the list is complete.
#[derive(Debug, Clone, Default)]
pub struct LongSpans {
    jobs: Vec<Spanned>,
    /// Every job that ended before this (epoch seconds) with a long span is in `jobs`, unless slurmdbd
    /// recorded its end late (see the module's doc).
    complete_below: u64,
}

/// The part of a window's listing that lies before its bounded range: what the reader reads besides
/// `[floor, end)` of `archive_purge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OlderPart {
    /// Submissions before this are read by the three parts below (epoch seconds).
    pub floor: u64,
    /// Catalogued jobs that overlap the window and were submitted before `floor`.
    pub catalogued: Vec<u64>,
    /// Jobs that ended at or after this are read from `rollup2` (the catalogue may not know them yet).
    pub recent_ends_from: u64,
}

impl LongSpans {
    /// What a window `[start, end)` must read besides its bounded range.
    pub fn older_part(&self, start: u64) -> OlderPart {
        let floor = start.saturating_sub(LONG_SPAN_S);
        let recent_ends_from = self.complete_below.saturating_sub(LATE_END_S).max(start);
        let catalogued = self
            .jobs
            .iter()
            .filter(|job| job.time_submit < floor && job.time_end >= start && job.time_end < recent_ends_from)
            .map(|job| job.db_index)
            .collect();
        OlderPart { floor, catalogued, recent_ends_from }
    }

    /// The catalogued jobs submitted before `submitted_before` that ended in `[from, to)`.
    pub fn ended_between(&self, from: u64, to: u64, submitted_before: u64) -> Vec<u64> {
        self.jobs
            .iter()
            .filter(|job| job.time_submit < submitted_before && job.time_end >= from && job.time_end < to)
            .map(|job| job.db_index)
            .collect()
    }

    /// Whether every long-spanned job that ended before `to` is known, ends recorded late aside: the
    /// catalogue looked at the ends up to [`LATE_END_S`] past it.
    pub fn complete_for(&self, to: u64) -> bool {
        self.complete_below >= to.saturating_add(LATE_END_S)
    }

    /// How many jobs the catalogue holds.
    fn len(&self) -> usize {
        self.jobs.len()
    }

    fn merge(&mut self, found: Vec<Spanned>, complete_below: u64) {
        self.jobs.extend(found);
        // Stable, so that of one job's two readings the one read later stays after the earlier.
        self.jobs.sort_by_key(|job| job.db_index);
        // A job read twice (by two refreshes' overlapping looks) keeps its newest end.
        self.jobs.dedup_by(|later, earlier| {
            if later.db_index == earlier.db_index {
                *earlier = *later;
                true
            } else {
                false
            }
        });
        self.complete_below = self.complete_below.max(complete_below);
    }
}

/// A catalogue and when it was built and last refreshed.
#[derive(Debug, Clone)]
struct Snapshot {
    spans: LongSpans,
    built: Instant,
    refreshed: Instant,
}

/// One cluster's catalogue, shared by the reader's clones: read by listings, refreshed by whichever
/// listing finds it due, rebuilt in the background.
#[derive(Debug, Default)]
pub struct Horizon {
    snapshot: RwLock<Option<Snapshot>>,
    /// Held by the one task that refreshes or rebuilds; others go on with the snapshot they have.
    updating: Mutex<()>,
}

/// Seconds since the epoch by this host's clock.
fn now_s() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0)
}

impl Horizon {
    /// The catalogue if one is usable now. When it is due for a refresh, refreshes it first (a short
    /// read of the jobs that ended lately); when due for a rebuild or missing, starts one in the
    /// background and answers with what there is (`None` the first time: the listing reads unbounded).
    pub async fn spans(
        self: &std::sync::Arc<Self>,
        pool: &super::TimedPool,
        cluster: &ClusterName,
    ) -> Result<Option<LongSpans>, SlurmDbdError> {
        let current = self.snapshot.read().await.clone();
        let Some(snapshot) = current else {
            self.rebuild_in_background(pool, cluster);
            return Ok(None);
        };
        if snapshot.built.elapsed() > REBUILD_AFTER {
            self.rebuild_in_background(pool, cluster);
        }
        if snapshot.refreshed.elapsed() > REFRESH_AFTER
            && let Ok(_updating) = self.updating.try_lock()
        {
            // A failed refresh leaves the snapshot as it was; it stays usable until it is stale.
            match read_ended_since(pool, cluster, now_s().saturating_sub(REFRESH_LOOKBACK_S)).await {
                Ok((found, complete_below)) => {
                    let mut guard = self.snapshot.write().await;
                    if let Some(snapshot) = guard.as_mut() {
                        snapshot.spans.merge(found, complete_below);
                        snapshot.refreshed = Instant::now();
                        return Ok(Some(snapshot.spans.clone()));
                    }
                }
                Err(error) => tracing::warn!(%cluster, %error, "refreshing the long-span catalogue failed"),
            }
        }
        Ok((snapshot.refreshed.elapsed() < STALE_AFTER).then_some(snapshot.spans))
    }

    /// Builds the catalogue now (the tests and the bench wait for it; serving builds it in the background).
    pub async fn build(&self, pool: &super::TimedPool, cluster: &ClusterName) -> Result<usize, SlurmDbdError> {
        let _updating = self.updating.lock().await;
        let (found, complete_below) = read_all(pool, cluster).await?;
        let mut spans = LongSpans::default();
        spans.merge(found, complete_below);
        let count = spans.len();
        let now = Instant::now();
        *self.snapshot.write().await = Some(Snapshot { spans, built: now, refreshed: now });
        Ok(count)
    }

    fn rebuild_in_background(self: &std::sync::Arc<Self>, pool: &super::TimedPool, cluster: &ClusterName) {
        if self.updating.try_lock().is_err() {
            return;
        }
        let (horizon, pool, cluster) = (std::sync::Arc::clone(self), pool.clone(), cluster.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            match horizon.build(&pool, &cluster).await {
                Ok(count) => tracing::info!(
                    %cluster,
                    long_spans = count,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "long-span catalogue built"
                ),
                Err(error) => tracing::warn!(%cluster, %error, "building the long-span catalogue failed"),
            }
        });
    }
}

/// Submissions one statement of [`read_all`] scans: a month of a busy cluster is a few hundred
/// thousand index entries, well inside the statement time limit however long the history.
const SCAN_SLICE_S: u64 = 30 * 86_400;

/// Every job that spanned more than [`LONG_SPAN_S`]: a scan of `archive_purge`, which holds both times
/// (and, as every InnoDB index, the primary key), so no row is read; a month of submissions per
/// statement, oldest first, so a five-year history is sixty short statements rather than one that
/// the statement time limit stops.
async fn read_all(pool: &super::TimedPool, cluster: &ClusterName) -> Result<(Vec<Spanned>, u64), SlurmDbdError> {
    // The catalogue is complete below the moment the scan starts (less a minute for the clocks of
    // slurmdbd's host and this one); later ends are read by every listing until the next refresh.
    let complete_below = now_s().saturating_sub(60);
    let table = cluster.table("job_table");
    let oldest: Option<u64> = sqlx::query_scalar(&format!(
        "SELECT CAST(MIN(time_submit) AS UNSIGNED) FROM {table} FORCE INDEX (archive_purge)"
    ))
    .fetch_one(pool)
    .await?;
    let sql = format!(
        "SELECT CAST(job_db_inx AS UNSIGNED), CAST(time_submit AS UNSIGNED), CAST(time_end AS UNSIGNED) \
         FROM {table} FORCE INDEX (archive_purge) WHERE time_submit >= ? AND time_submit < ? \
         AND time_end > time_submit + ?"
    );
    let mut rows: Vec<(u64, u64, u64)> = Vec::new();
    let mut from = oldest.unwrap_or(u64::MAX);
    // The last slice reaches past now: a submission stamped ahead by slurmctld's clock is read too.
    let last = complete_below.saturating_add(86_400);
    while from <= last {
        let to = if from.saturating_add(SCAN_SLICE_S) > last { u64::MAX } else { from + SCAN_SLICE_S };
        rows.extend(
            sqlx::query_as::<_, (u64, u64, u64)>(&sql).bind(from).bind(to).bind(LONG_SPAN_S).fetch_all(pool).await?,
        );
        if to == u64::MAX {
            break;
        }
        from = to;
    }
    Ok((spanned(rows), complete_below))
}

/// The jobs with a long span that ended at or after `since`, read through `rollup2 (time_end, …)`.
async fn read_ended_since(
    pool: &super::TimedPool,
    cluster: &ClusterName,
    since: u64,
) -> Result<(Vec<Spanned>, u64), SlurmDbdError> {
    let complete_below = now_s().saturating_sub(60);
    let sql = format!(
        "SELECT CAST(job_db_inx AS UNSIGNED), CAST(time_submit AS UNSIGNED), CAST(time_end AS UNSIGNED) \
         FROM {} FORCE INDEX (rollup2) WHERE time_end >= ? AND time_end > time_submit + ?",
        cluster.table("job_table")
    );
    let rows: Vec<(u64, u64, u64)> = sqlx::query_as(&sql).bind(since).bind(LONG_SPAN_S).fetch_all(pool).await?;
    Ok((spanned(rows), complete_below))
}

fn spanned(rows: Vec<(u64, u64, u64)>) -> Vec<Spanned> {
    rows.into_iter().map(|(db_index, time_submit, time_end)| Spanned { db_index, time_submit, time_end }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn catalogue(jobs: &[(u64, u64, u64)], complete_below: u64) -> LongSpans {
        let mut spans = LongSpans::default();
        spans.merge(spanned(jobs.to_vec()), complete_below);
        spans
    }

    #[test]
    fn older_part_names_only_catalogued_jobs_that_overlap_the_window_before_the_floor() {
        let start = 100 * DAY;
        let spans = catalogue(
            &[
                (1, 50 * DAY, 99 * DAY),  // ended before the window
                (2, 80 * DAY, 101 * DAY), // submitted long before, ends inside: read by key
                (3, 95 * DAY, 120 * DAY), // submitted after the floor: the bounded range reads it
                (4, 10 * DAY, 300 * DAY), // ends after the catalogue's horizon: read from rollup2
            ],
            200 * DAY,
        );
        let older = spans.older_part(start);
        assert_eq!(older.floor, start - LONG_SPAN_S);
        assert_eq!(older.catalogued, vec![2]);
        assert_eq!(older.recent_ends_from, 200 * DAY - LATE_END_S);
    }

    #[test]
    fn recent_ends_are_read_from_the_window_start_when_the_catalogue_is_newer_than_it() {
        let spans = catalogue(&[], 10 * DAY);
        assert_eq!(spans.older_part(20 * DAY).recent_ends_from, 20 * DAY);
        assert_eq!(spans.older_part(0).floor, 0, "a window from the epoch has no floor");
    }

    #[test]
    fn a_job_read_by_two_refreshes_is_catalogued_once_with_its_newest_end() {
        let mut spans = catalogue(&[(7, 0, 9 * DAY)], 9 * DAY);
        spans.merge(spanned(vec![(7, 0, 10 * DAY), (8, 0, 12 * DAY)]), 12 * DAY);
        assert_eq!(spans.len(), 2);
        // Job 7 overlaps a window from day 9 and an hour only by its newer end; job 8 ended after the
        // catalogue's horizon less an hour, so the listing reads it from rollup2 instead.
        assert_eq!(spans.older_part(9 * DAY + 3600).catalogued, vec![7]);
    }
}
