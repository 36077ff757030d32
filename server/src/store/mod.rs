//! slurmlens's own database (MariaDB, schema in `migrations/`): GPU allocation records today,
//! archived reports and trace summaries later. The only module that writes to a database at serve time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use crate::domain::cluster::ClusterName;
use crate::domain::gpu::{GpuAllocation, GpuRef};

pub mod tokens;
pub mod traces;

/// What the jobs listing shows of a finished job's archived report: how well it used its GPUs and,
/// if it ended badly, whose fault that likely was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportDigest {
    pub mean_gpu_util: Option<f64>,
    pub mean_tensor_active: Option<f64>,
    /// `infrastructure`, `application` or `unknown`.
    pub blame: Option<String>,
}

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

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Our own schema.
#[derive(Clone)]
pub struct Store {
    pool: MySqlPool,
}

impl Store {
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

    /// Applies pending migrations (forward-only).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await.map_err(|e| StoreError::Query(e.to_string()))
    }

    /// Records GPU allocations; replaying the same record changes nothing but `last_seen`/`ended_at`.
    pub async fn upsert_gpu_allocations(
        &self,
        cluster: &ClusterName,
        records: &[GpuAllocation],
    ) -> Result<(), StoreError> {
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

    /// Every GPU record of one job, ordered by node and index.
    pub async fn gpu_allocations(&self, cluster: &ClusterName, job_id: u32) -> Result<Vec<GpuAllocation>, StoreError> {
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
             FROM gpu_allocations WHERE cluster = ? AND job_id = ? ORDER BY node, gpu_index, step",
        )
        .bind(cluster.as_str())
        .bind(job_id)
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

    /// The GPU indices recorded for any of these jobs: (job id, node, index), each once.
    pub async fn gpu_indices_among(
        &self,
        cluster: &ClusterName,
        job_ids: &[u32],
    ) -> Result<Vec<(u32, String, u16)>, StoreError> {
        let mut found = Vec::new();
        for chunk in job_ids.chunks(1000) {
            let placeholders = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT DISTINCT job_id, node, gpu_index FROM gpu_allocations \
                 WHERE cluster = ? AND job_id IN ({placeholders}) ORDER BY job_id, node, gpu_index"
            );
            let mut query = sqlx::query_as::<_, (u32, String, u16)>(&sql).bind(cluster.as_str());
            for job_id in chunk {
                query = query.bind(job_id);
            }
            found.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(found)
    }

    /// The archived report of one job record, as stored JSON.
    pub async fn archived_report(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
    ) -> Result<Option<String>, StoreError> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT report FROM job_reports WHERE cluster = ? AND job_id = ? AND time_submit = ?")
                .bind(cluster.as_str())
                .bind(job_id)
                .bind(time_submit)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(report,)| report))
    }

    /// Archives a report with its efficiency figures; archiving the same job record again replaces it
    /// (idempotent).
    pub async fn archive_report(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
        report_json: &str,
        digest: &ReportDigest,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO job_reports \
             (cluster, job_id, time_submit, archived_at, report, mean_gpu_util, mean_tensor_active, blame) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE archived_at = VALUES(archived_at), report = VALUES(report), \
             mean_gpu_util = VALUES(mean_gpu_util), mean_tensor_active = VALUES(mean_tensor_active), \
             blame = VALUES(blame)",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .bind(Utc::now())
        .bind(report_json)
        .bind(digest.mean_gpu_util)
        .bind(digest.mean_tensor_active)
        .bind(digest.blame.as_deref())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The digests of archived reports among these job records, keyed by (job id, submit time). One
    /// range scan over the records' submit times, filtered here.
    pub async fn digests_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<std::collections::BTreeMap<(u32, u64), ReportDigest>, StoreError> {
        let wanted: std::collections::BTreeSet<(u32, u64)> = records.iter().copied().collect();
        let (Some(low), Some(high)) = (records.iter().map(|r| r.1).min(), records.iter().map(|r| r.1).max()) else {
            return Ok(Default::default());
        };
        // job id, submit time, mean GPU util, mean tensor activity, blame
        type DigestRow = (u32, u64, Option<f64>, Option<f64>, Option<String>);
        let rows: Vec<DigestRow> = sqlx::query_as(
            "SELECT job_id, time_submit, mean_gpu_util, mean_tensor_active, blame FROM job_reports \
             WHERE cluster = ? AND time_submit BETWEEN ? AND ?",
        )
        .bind(cluster.as_str())
        .bind(low)
        .bind(high)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter(|(job_id, submit, ..)| wanted.contains(&(*job_id, *submit)))
            .map(|(job_id, submit, mean_gpu_util, mean_tensor_active, blame)| {
                ((job_id, submit), ReportDigest { mean_gpu_util, mean_tensor_active, blame })
            })
            .collect())
    }

    /// Which of these job records already have an archived report.
    pub async fn archived_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<std::collections::BTreeSet<(u32, u64)>, StoreError> {
        let mut found = std::collections::BTreeSet::new();
        for chunk in records.chunks(500) {
            let placeholders = vec!["(?, ?)"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT job_id, time_submit FROM job_reports WHERE cluster = ? AND (job_id, time_submit) IN ({placeholders})"
            );
            let mut query = sqlx::query_as::<_, (u32, u64)>(&sql).bind(cluster.as_str());
            for (job_id, time_submit) in chunk {
                query = query.bind(job_id).bind(time_submit);
            }
            found.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(found)
    }
}
