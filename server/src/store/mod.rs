//! slurmlens's own database (MariaDB, schema in `migrations/`): GPU allocation records here, archived
//! reports and their digests in [`reports`], trace summaries in [`traces`], tokens in [`tokens`]. The
//! only module that writes to a database at serve time.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use crate::domain::cluster::ClusterName;
use crate::domain::gpu::{GpuAllocation, GpuRef};
use crate::domain::job::RunWindow;

pub mod advice;
pub mod lease;
pub mod notifications;
pub mod reports;
pub mod shares;
pub mod tags;
pub mod tokens;
pub mod traces;

pub use reports::ReportDigest;

/// Failures of our own database. `sqlx::Error` stops here.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("slurmlens's database is unavailable: {0}")]
    Unavailable(String),
    #[error("slurmlens's database refused the operation: {0}")]
    Query(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => {
                Self::Unavailable(error.to_string())
            }
            _ => Self::Query(error.to_string()),
        }
    }
}

/// Whether MariaDB chose this transaction as a deadlock's victim (SQLSTATE 40001): it rolled back and
/// may be run again.
fn is_deadlock(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(database) if database.code().as_deref() == Some("40001"))
}

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Job ids at most this far apart are read as one range: a few more ids' rows, one range fewer.
const ID_RUN_GAP: u32 = 64;
/// Ranges per statement of [`Store::rows_among`].
const RUNS_PER_STATEMENT: usize = 500;

/// `ids` as ranges `(first, last)` of ids at most [`ID_RUN_GAP`] apart, in order: a chunk of a listing
/// (jobs submitted one after another) is a handful of ranges, a scattered one a range per id.
fn id_runs(ids: &BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last)) if id - *last <= ID_RUN_GAP => *last = id,
            _ => runs.push((id, id)),
        }
    }
    runs
}

/// Our own schema.
#[derive(Clone)]
pub struct Store {
    pool: MySqlPool,
}

impl Store {
    /// The rows of `select` (a statement up to its `WHERE`, reading a table keyed by `(cluster,
    /// job_id, …)`) for `cluster`'s job records among `records`, by ranges of their job ids
    /// ([`id_runs`]); the caller keeps the records it asked for. An `IN` list of hundreds of ids costs
    /// MariaDB an index dive each, a range one, and a listing's chunks are mostly consecutive ids.
    /// The cluster name (lowercase letters, digits, `_`, `-`) and the numbers are written as
    /// literals: one round trip, and no prepared statement kept for a text used once.
    async fn rows_among(
        &self,
        select: &str,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<Vec<sqlx::mysql::MySqlRow>, StoreError> {
        let ids: BTreeSet<u32> = records.iter().map(|&(job_id, _)| job_id).collect();
        let mut rows = Vec::new();
        for runs in id_runs(&ids).chunks(RUNS_PER_STATEMENT) {
            let ranges = runs
                .iter()
                .map(|&(first, last)| {
                    if first == last {
                        format!("job_id = {first}")
                    } else {
                        format!("job_id BETWEEN {first} AND {last}")
                    }
                })
                .collect::<Vec<_>>()
                .join(" OR ");
            let sql = format!("{select} WHERE cluster = '{}' AND ({ranges})", cluster.as_str());
            rows.extend(sqlx::raw_sql(&sql).fetch_all(&self.pool).await?);
        }
        Ok(rows)
    }

    /// A lazy pool: the server starts, and recovers, whether or not the database is up.
    pub fn new(url: &str, acquire_timeout: Duration) -> Result<Self, StoreError> {
        let options: MySqlConnectOptions =
            url.parse().map_err(|e: sqlx::Error| StoreError::Query(format!("bad database url: {e}")))?;
        let pool = MySqlPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options.charset("utf8mb4"));
        Ok(Self { pool })
    }

    /// The connection pool's state now (for `/metrics`).
    pub fn pool_use(&self) -> crate::telemetry::PoolUse {
        crate::telemetry::PoolUse::of(&self.pool)
    }

    /// Applies pending migrations (forward-only).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await.map_err(|e| StoreError::Query(e.to_string()))
    }

    /// The migrations of this release the database lacks: never applied, applied and failed, or
    /// applied from a different text (named `0015_report_measured_share`). Reads only; empty when the
    /// schema is this release's.
    pub async fn pending_migrations(&self) -> Result<Vec<String>, StoreError> {
        let (tables,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = '_sqlx_migrations'",
        )
        .fetch_one(&self.pool)
        .await?;
        let applied: Vec<(i64, bool, Vec<u8>)> = if tables == 0 {
            Vec::new()
        } else {
            sqlx::query_as("SELECT version, success, checksum FROM _sqlx_migrations").fetch_all(&self.pool).await?
        };
        let done: BTreeSet<(i64, &[u8])> = applied
            .iter()
            .filter(|(_, success, _)| *success)
            .map(|(version, _, checksum)| (*version, checksum.as_slice()))
            .collect();
        Ok(MIGRATOR
            .iter()
            .filter(|migration| !done.contains(&(migration.version, migration.checksum.as_ref())))
            .map(|migration| format!("{:04}_{}", migration.version, migration.description.replace(' ', "_")))
            .collect())
    }

    /// Deletes everything this store holds about `cluster`'s jobs (GPU records, report digests and tries,
    /// trace summaries): for a demo cluster whose history was replaced, whose job ids now name other
    /// jobs. Never called by the server.
    pub async fn forget_cluster_jobs(&self, cluster: &ClusterName) -> Result<u64, StoreError> {
        let mut gone = 0;
        for table in
            ["gpu_allocations", "job_reports", "report_attempts", "trace_summaries", "job_tags", "job_tag_rules_seen"]
        {
            let sql = format!("DELETE FROM {table} WHERE cluster = ?");
            gone += sqlx::query(&sql).bind(cluster.as_str()).execute(&self.pool).await?.rows_affected();
        }
        Ok(gone)
    }

    /// Deletes what this store derived from `job_ids`' telemetry on `cluster` (GPU records, archived
    /// reports and their tries): for a demo seeding that replaces an earlier one. The earlier records
    /// may name other GPUs (a record's GPU is part of its key, so an upsert would keep both), and a
    /// report archived from the earlier series would be served for good. Never called by the server.
    pub async fn forget_jobs_telemetry(&self, cluster: &ClusterName, job_ids: &[u32]) -> Result<u64, StoreError> {
        let mut gone = 0;
        for table in ["gpu_allocations", "job_reports", "report_attempts"] {
            for chunk in job_ids.chunks(1000) {
                let placeholders = vec!["?"; chunk.len()].join(",");
                let sql = format!("DELETE FROM {table} WHERE cluster = ? AND job_id IN ({placeholders})");
                let mut query = sqlx::query(&sql).bind(cluster.as_str());
                for job_id in chunk {
                    query = query.bind(job_id);
                }
                gone += query.execute(&self.pool).await?.rows_affected();
            }
        }
        Ok(gone)
    }

    /// Records GPU allocations; replaying the same record changes nothing but `last_seen`/`ended_at`.
    /// Retries a deadlock twice: two deliveries of one job's records (a node's spool and its live post,
    /// or two OTLP exports) lock the same rows.
    pub async fn upsert_gpu_allocations(
        &self,
        cluster: &ClusterName,
        records: &[GpuAllocation],
    ) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            match self.try_upsert_gpu_allocations(cluster, records).await {
                Err(error) if is_deadlock(&error) && attempt < 2 => attempt += 1,
                result => return result.map_err(StoreError::from),
            }
        }
    }

    async fn try_upsert_gpu_allocations(
        &self,
        cluster: &ClusterName,
        records: &[GpuAllocation],
    ) -> Result<(), sqlx::Error> {
        let mut transaction = self.pool.begin().await?;
        for record in records {
            sqlx::query(
                "INSERT INTO gpu_allocations \
                 (cluster, job_id, step, node, gpu_index, gpu_uuid, cgroup_path, first_seen, last_seen, ended_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON DUPLICATE KEY UPDATE \
                   gpu_uuid = COALESCE(VALUES(gpu_uuid), gpu_uuid), \
                   cgroup_path = COALESCE(VALUES(cgroup_path), cgroup_path), \
                   first_seen = LEAST(first_seen, VALUES(first_seen)), \
                   last_seen = GREATEST(last_seen, VALUES(last_seen)), \
                   ended_at = COALESCE(VALUES(ended_at), ended_at)",
            )
            .bind(cluster.as_str())
            .bind(record.job_id)
            .bind(&record.step)
            .bind(&record.gpu.node)
            .bind(record.gpu.index)
            .bind(&record.uuid)
            .bind(&record.cgroup_path)
            .bind(record.first_seen)
            .bind(record.last_seen)
            .bind(record.ended_at)
            .execute(&mut *transaction)
            .await?;
        }
        // A start that arrives after the job's end message (a node's spool delivered late) belongs to
        // the run that ended: it inherits that end. A start after the end is a requeued run and stays open.
        let mut jobs: Vec<u32> = records.iter().filter(|r| r.ended_at.is_none()).map(|r| r.job_id).collect();
        jobs.sort_unstable();
        jobs.dedup();
        for job_id in jobs {
            sqlx::query(
                "UPDATE gpu_allocations g                  JOIN (SELECT MAX(ended_at) AS ended FROM gpu_allocations WHERE cluster = ? AND job_id = ?) done                  SET g.ended_at = done.ended, g.last_seen = GREATEST(g.last_seen, done.ended)                  WHERE g.cluster = ? AND g.job_id = ? AND g.ended_at IS NULL AND done.ended IS NOT NULL                    AND g.first_seen <= done.ended",
            )
            .bind(cluster.as_str())
            .bind(job_id)
            .bind(cluster.as_str())
            .bind(job_id)
            .execute(&mut *transaction)
            .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// Marks every record of a job as ended (the plugin's job-end message).
    pub async fn end_job(&self, cluster: &ClusterName, job_id: u32, at: DateTime<Utc>) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "UPDATE gpu_allocations SET ended_at = COALESCE(ended_at, ?), last_seen = GREATEST(last_seen, ?) \
             WHERE cluster = ? AND job_id = ?",
        )
        .bind(at)
        .bind(at)
        .bind(cluster.as_str())
        .bind(job_id)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected())
    }

    /// Every GPU record of one run of a job (seen within `run`, so an earlier job under the same id is
    /// not read), ordered by node and index.
    pub async fn gpu_allocations(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        run: &RunWindow,
    ) -> Result<Vec<GpuAllocation>, StoreError> {
        type Row = (
            u32,
            String,
            String,
            u16,
            Option<String>,
            Option<String>,
            DateTime<Utc>,
            DateTime<Utc>,
            Option<DateTime<Utc>>,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT job_id, step, node, gpu_index, gpu_uuid, cgroup_path, first_seen, last_seen, ended_at \
             FROM gpu_allocations WHERE cluster = ? AND job_id = ? \
               AND last_seen >= ? AND (? IS NULL OR first_seen <= ?) \
             ORDER BY node, gpu_index, step",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(run.from())
        .bind(run.until())
        .bind(run.until())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(job_id, step, node, index, uuid, cgroup_path, first_seen, last_seen, ended_at)| GpuAllocation {
                job_id,
                step,
                gpu: GpuRef { node, index },
                uuid,
                cgroup_path,
                first_seen,
                last_seen,
                ended_at,
            })
            .collect())
    }

    /// The GPU indices recorded for any of these runs (job id and run, as [`Self::gpu_allocations`]
    /// bounds them): (job id, node, index), each once, in that order. The job ids are looked up in the
    /// primary key (`job_id IN (…)`) and each record's times matched to its job's runs here, as
    /// [`Self::tags_among`] does: MariaDB plans an `OR` of hundreds of per-job tests slowly.
    pub async fn gpu_indices_among(
        &self,
        cluster: &ClusterName,
        runs: &[(u32, RunWindow)],
    ) -> Result<Vec<(u32, String, u16)>, StoreError> {
        let mut found = BTreeSet::new();
        for chunk in runs.chunks(500) {
            let mut runs_of: BTreeMap<u32, Vec<&RunWindow>> = BTreeMap::new();
            for (job_id, run) in chunk {
                runs_of.entry(*job_id).or_default().push(run);
            }
            let placeholders = vec!["?"; runs_of.len()].join(", ");
            let sql = format!(
                "SELECT job_id, node, gpu_index, first_seen, last_seen FROM gpu_allocations \
                 WHERE cluster = ? AND job_id IN ({placeholders})"
            );
            let mut query =
                sqlx::query_as::<_, (u32, String, u16, DateTime<Utc>, DateTime<Utc>)>(&sql).bind(cluster.as_str());
            for job_id in runs_of.keys() {
                query = query.bind(job_id);
            }
            for (job_id, node, index, first_seen, last_seen) in query.fetch_all(&self.pool).await? {
                let ours =
                    runs_of.get(&job_id).is_some_and(|runs| runs.iter().any(|run| run.overlaps(first_seen, last_seen)));
                if ours {
                    found.insert((job_id, node, index));
                }
            }
        }
        Ok(found.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_are_one_range_and_distant_ones_their_own() {
        let ids: BTreeSet<u32> = [7, 8, 10, 10 + ID_RUN_GAP, 11 + 2 * ID_RUN_GAP, 500, 501].into_iter().collect();
        assert_eq!(id_runs(&ids), vec![(7, 10 + ID_RUN_GAP), (11 + 2 * ID_RUN_GAP, 11 + 2 * ID_RUN_GAP), (500, 501)]);
        assert_eq!(id_runs(&BTreeSet::new()), Vec::<(u32, u32)>::new());
        // The largest ids do not overflow.
        let top: BTreeSet<u32> = [u32::MAX - 1, u32::MAX].into_iter().collect();
        assert_eq!(id_runs(&top), vec![(u32::MAX - 1, u32::MAX)]);
    }
}
