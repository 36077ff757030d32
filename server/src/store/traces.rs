//! Trace summaries in our own database (`trace_summaries`, `trace_names`): idempotent batch inserts and
//! the per-GPU sums the "where time goes" breakdown is computed from.

use std::collections::BTreeMap;

use super::{Store, StoreError, is_deadlock};
use crate::domain::bottleneck::ActivityTotals;
use crate::domain::cluster::ClusterName;
use crate::domain::gpu::GpuRef;
use crate::domain::job::RunWindow;
use crate::domain::trace::{TraceCategory, TraceSummary};

/// Rows per INSERT statement: 500 × 13 placeholders stays far below MariaDB's 65,535.
pub const ROWS_PER_STATEMENT: usize = 500;

/// The rows of one run: intervals starting within it (bound: the run's earliest and latest moments,
/// the latest twice, NULL while it runs).
const IN_RUN: &str = "AND interval_start >= ? AND (? IS NULL OR interval_start <= ?)";

/// A name's key: the first 16 bytes of its SHA-256, computed by MariaDB so that no hash crate is needed.
const NAME_HASH: &str = "UNHEX(LEFT(SHA2(?, 256), 32))";

/// A kernel or NCCL operation summed over a job.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTotals {
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub bytes: u64,
}

/// What the breakdown of one job is computed from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTraceTotals {
    /// Every traced GPU of the job, ordered by node and index.
    pub gpus: BTreeMap<GpuRef, ActivityTotals>,
    pub top_kernels: Vec<NamedTotals>,
    pub top_collectives: Vec<NamedTotals>,
}

fn placeholders(row: &str, rows: usize) -> String {
    vec![row; rows].join(", ")
}

impl Store {
    /// Stores one node's summaries in one transaction; a row already stored (same key) is left as it
    /// was. Returns the rows newly stored. Retries a deadlock twice (concurrent batches sharing names).
    pub async fn insert_trace_summaries(
        &self,
        cluster: &ClusterName,
        node: &str,
        summaries: &[TraceSummary],
    ) -> Result<u64, StoreError> {
        if summaries.is_empty() {
            return Ok(0);
        }
        let mut attempt = 0;
        loop {
            match self.try_insert_trace_summaries(cluster, node, summaries).await {
                Err(error) if is_deadlock(&error) && attempt < 2 => attempt += 1,
                result => return result.map_err(StoreError::from),
            }
        }
    }

    async fn try_insert_trace_summaries(
        &self,
        cluster: &ClusterName,
        node: &str,
        summaries: &[TraceSummary],
    ) -> Result<u64, sqlx::Error> {
        // Every batch inserts names in the same (sorted) order, so two batches sharing names wait for
        // each other instead of deadlocking.
        let mut names: Vec<&str> = summaries.iter().map(|summary| summary.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let mut transaction = self.pool.begin().await?;
        for chunk in names.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT IGNORE INTO trace_names (name_hash, name) VALUES {}",
                placeholders(&format!("({NAME_HASH}, ?)"), chunk.len())
            );
            let mut query = sqlx::query(&sql);
            for name in chunk {
                query = query.bind(*name).bind(*name);
            }
            query.execute(&mut *transaction).await?;
        }
        let mut stored = 0;
        for chunk in summaries.chunks(ROWS_PER_STATEMENT) {
            // INSERT IGNORE: the values were validated, so the only error it can swallow is the
            // duplicate key of a replayed record, which must keep the first values.
            let sql = format!(
                "INSERT IGNORE INTO trace_summaries (cluster, job_id, node, gpu, pid, interval_start, interval_s, \
                 category, name_hash, count, total_ns, max_ns, bytes) VALUES {}",
                placeholders(&format!("(?, ?, ?, ?, ?, ?, ?, ?, {NAME_HASH}, ?, ?, ?, ?)"), chunk.len())
            );
            let mut query = sqlx::query(&sql);
            for summary in chunk {
                query = query
                    .bind(cluster.as_str())
                    .bind(summary.job_id)
                    .bind(node)
                    .bind(summary.gpu)
                    .bind(summary.pid)
                    .bind(summary.interval_start)
                    .bind(summary.interval_s)
                    .bind(summary.category.as_str())
                    .bind(summary.name.as_str())
                    .bind(summary.count)
                    .bind(summary.total_ns)
                    .bind(summary.max_ns)
                    .bind(summary.bytes);
            }
            stored += query.execute(&mut *transaction).await?.rows_affected();
        }
        transaction.commit().await?;
        Ok(stored)
    }

    /// Deletes every summary of one job (retention, and the ingest benchmark's clean-up).
    pub async fn delete_trace_summaries(&self, cluster: &ClusterName, job_id: u32) -> Result<u64, StoreError> {
        let result = sqlx::query("DELETE FROM trace_summaries WHERE cluster = ? AND job_id = ?")
            .bind(cluster.as_str())
            .bind(job_id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected())
    }

    /// Per-GPU activity sums and the top kernels and collectives of one run of a job: intervals that
    /// start within `run` only, so an earlier job under the same id is not read.
    pub async fn job_trace_totals(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        run: &RunWindow,
    ) -> Result<JobTraceTotals, StoreError> {
        let mut totals = JobTraceTotals::default();
        // Several processes (and categories) share a GPU's interval: count each interval once.
        let spans: Vec<(String, u16, u64)> = sqlx::query_as(&format!(
            "SELECT node, gpu, CAST(SUM(span) AS UNSIGNED) FROM ( \
               SELECT node, gpu, interval_start, MAX(interval_s) AS span FROM trace_summaries \
               WHERE cluster = ? AND job_id = ? {IN_RUN} GROUP BY node, gpu, interval_start) AS spans \
             GROUP BY node, gpu",
        ))
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(run.from())
        .bind(run.until())
        .bind(run.until())
        .fetch_all(&self.pool)
        .await?;
        for (node, gpu, span_s) in spans {
            totals.gpus.entry(GpuRef { node, index: gpu }).or_default().traced_ns =
                span_s.saturating_mul(1_000_000_000);
        }
        let by_category: Vec<(String, u16, String, u64, u64, u64, u64)> = sqlx::query_as(&format!(
            "SELECT node, gpu, CAST(category AS CHAR), CAST(SUM(total_ns) AS UNSIGNED), \
               CAST(SUM(IF(category = 'memcpy' AND name_hash = {NAME_HASH}, count, 0)) AS UNSIGNED), \
               CAST(SUM(IF(category = 'memcpy' AND name_hash = {NAME_HASH}, total_ns, 0)) AS UNSIGNED), \
               CAST(SUM(IF(category = 'memcpy' AND name_hash = {NAME_HASH}, bytes, 0)) AS UNSIGNED) \
             FROM trace_summaries WHERE cluster = ? AND job_id = ? {IN_RUN} GROUP BY node, gpu, category"
        ))
        .bind("HtoD")
        .bind("HtoD")
        .bind("HtoD")
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(run.from())
        .bind(run.until())
        .bind(run.until())
        .fetch_all(&self.pool)
        .await?;
        for (node, gpu, category, total_ns, htod_count, htod_ns, htod_bytes) in by_category {
            let entry = totals.gpus.entry(GpuRef { node, index: gpu }).or_default();
            match TraceCategory::from_word(&category) {
                Some(TraceCategory::Kernel) => entry.kernel_ns = total_ns,
                Some(TraceCategory::Nccl) => entry.nccl_ns = total_ns,
                Some(TraceCategory::Memcpy) => {
                    entry.memcpy_ns = total_ns;
                    entry.htod_count = htod_count;
                    entry.htod_ns = htod_ns;
                    entry.htod_bytes = htod_bytes;
                }
                Some(TraceCategory::Sync) => entry.sync_ns = total_ns,
                Some(TraceCategory::CudaApi) | None => {}
            }
        }
        totals.top_kernels = self.top_names(cluster, job_id, run, TraceCategory::Kernel, 10).await?;
        totals.top_collectives = self.top_names(cluster, job_id, run, TraceCategory::Nccl, 10).await?;
        Ok(totals)
    }

    async fn top_names(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        run: &RunWindow,
        category: TraceCategory,
        limit: u32,
    ) -> Result<Vec<NamedTotals>, StoreError> {
        let rows: Vec<(String, u64, u64, u64, u64)> = sqlx::query_as(&format!(
            "SELECT n.name, t.count, t.total_ns, t.max_ns, t.bytes FROM ( \
               SELECT name_hash, CAST(SUM(count) AS UNSIGNED) AS count, CAST(SUM(total_ns) AS UNSIGNED) AS total_ns, \
                      MAX(max_ns) AS max_ns, CAST(SUM(bytes) AS UNSIGNED) AS bytes \
               FROM trace_summaries WHERE cluster = ? AND job_id = ? {IN_RUN} AND category = ? \
               GROUP BY name_hash ORDER BY total_ns DESC LIMIT ?) AS t \
             JOIN trace_names n ON n.name_hash = t.name_hash ORDER BY t.total_ns DESC, n.name",
        ))
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(run.from())
        .bind(run.until())
        .bind(run.until())
        .bind(category.as_str())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(name, count, total_ns, max_ns, bytes)| NamedTotals { name, count, total_ns, max_ns, bytes })
            .collect())
    }
}
