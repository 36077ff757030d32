//! Archived reports (`job_reports`) with the digest the job listing joins, and the archiver's record
//! of reports it could not make (`report_attempts`).

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;

use super::{Store, StoreError};
use crate::domain::cluster::ClusterName;

/// What the jobs listing shows of a finished job's archived report: how well it used its GPUs and,
/// if it ended badly, whose fault that likely was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportDigest {
    pub mean_gpu_util: Option<f64>,
    pub mean_tensor_active: Option<f64>,
    /// `infrastructure`, `application` or `unknown`.
    pub blame: Option<String>,
    /// False when the report was made without any metrics of the job's GPUs ("no data").
    pub has_metrics: bool,
    /// The GPUs' energy over the job (kWh), where the report has it.
    pub energy_kwh: Option<f64>,
    /// The share (0–1) of the job's GPU hours its utilisation and energy were measured over: those on
    /// GPUs placed as its own. None: all of them.
    pub measured_share: Option<f64>,
    /// What made the report (`app::report::GENERATION`).
    pub generation: u16,
}

/// Job records are looked up this many at a time (two placeholders each).
const KEYS_PER_STATEMENT: usize = 500;

impl Store {
    /// The archived report of one job record, as stored JSON, and the generation that made it.
    pub async fn archived_report(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
    ) -> Result<Option<(String, u16)>, StoreError> {
        let row: Option<(String, u16)> = sqlx::query_as(
            "SELECT report, generation FROM job_reports WHERE cluster = ? AND job_id = ? AND time_submit = ?",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row)
    }

    /// A page of a cluster's archived reports after the job record `after` (job id, submit time), in
    /// that order: `(job id, submit time, JSON, generation)`. For reading every archived report a page
    /// at a time.
    pub async fn archived_page(
        &self,
        cluster: &ClusterName,
        after: (u32, u64),
        limit: u32,
    ) -> Result<Vec<(u32, u64, String, u16)>, StoreError> {
        let rows: Vec<(u32, u64, String, u16)> = sqlx::query_as(
            "SELECT job_id, time_submit, report, generation FROM job_reports \
             WHERE cluster = ? AND (job_id, time_submit) > (?, ?) ORDER BY job_id, time_submit LIMIT ?",
        )
        .bind(cluster.as_str())
        .bind(after.0)
        .bind(after.1)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// Archives a report with its digest; archiving the same job record again replaces it (idempotent).
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
             (cluster, job_id, time_submit, archived_at, report, mean_gpu_util, mean_tensor_active, blame, \
              has_metrics, energy_kwh, measured_share, generation) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE archived_at = VALUES(archived_at), report = VALUES(report), \
             mean_gpu_util = VALUES(mean_gpu_util), mean_tensor_active = VALUES(mean_tensor_active), \
             blame = VALUES(blame), has_metrics = VALUES(has_metrics), energy_kwh = VALUES(energy_kwh), \
             measured_share = VALUES(measured_share), generation = VALUES(generation)",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .bind(Utc::now())
        .bind(report_json)
        .bind(digest.mean_gpu_util)
        .bind(digest.mean_tensor_active)
        .bind(digest.blame.as_deref())
        .bind(digest.has_metrics)
        .bind(digest.energy_kwh)
        .bind(digest.measured_share)
        .bind(digest.generation)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The digests of archived reports among these job records, keyed by (job id, submit time): their
    /// job ids read as ranges of the primary key ([`Store::rows_among`]), their submit times matched
    /// here. (Not a range of submit times: a user's chunk spans weeks, every job of the cluster in them.)
    pub async fn digests_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<BTreeMap<(u32, u64), ReportDigest>, StoreError> {
        let wanted: BTreeSet<(u32, u64)> = records.iter().copied().collect();
        // job id, submit time, mean GPU util, mean tensor activity, blame, has metrics, energy, measured
        // share, generation
        type DigestRow = (u32, u64, Option<f64>, Option<f64>, Option<String>, bool, Option<f64>, Option<f64>, u16);
        let select = "SELECT job_id, time_submit, mean_gpu_util, mean_tensor_active, blame, has_metrics, energy_kwh, \
                      measured_share, generation FROM job_reports";
        let mut found = BTreeMap::new();
        for row in &self.rows_among(select, cluster, records).await? {
            let (
                job_id,
                submit,
                mean_gpu_util,
                mean_tensor_active,
                blame,
                has_metrics,
                energy_kwh,
                measured_share,
                generation,
            ): DigestRow = sqlx::FromRow::from_row(row)?;
            if wanted.contains(&(job_id, submit)) {
                let digest = ReportDigest {
                    mean_gpu_util,
                    mean_tensor_active,
                    blame,
                    has_metrics,
                    energy_kwh,
                    measured_share,
                    generation,
                };
                found.insert((job_id, submit), digest);
            }
        }
        Ok(found)
    }

    /// The energy (kWh) the archived reports among these job records counted and the GPU-hours it was
    /// measured over (the job's known GPUs', not those on unplaced shared-node GPUs), read from the
    /// stored reports' totals by MariaDB (the reports themselves stay in the database).
    pub async fn energy_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<BTreeMap<(u32, u64), (Option<f64>, Option<f64>)>, StoreError> {
        let mut found = BTreeMap::new();
        for chunk in records.chunks(KEYS_PER_STATEMENT) {
            let placeholders = vec!["(?, ?)"; chunk.len()].join(", ");
            // `+ 0` reads JSON_VALUE's text as a number (NULL stays NULL).
            let sql = format!(
                "SELECT job_id, time_submit, JSON_VALUE(report, '$.totals.energy_kwh') + 0, \
                 COALESCE(JSON_VALUE(report, '$.totals.coverage.measured_gpu_hours') + 0, \
                 (JSON_VALUE(report, '$.totals.gpu_hours') + 0) \
                 - COALESCE(JSON_VALUE(report, '$.totals.unattributed_gpu_hours') + 0, 0)) \
                 FROM job_reports \
                 WHERE cluster = ? AND (job_id, time_submit) IN ({placeholders})"
            );
            let mut query = sqlx::query_as::<_, (u32, u64, Option<f64>, Option<f64>)>(&sql).bind(cluster.as_str());
            for (job_id, time_submit) in chunk {
                query = query.bind(job_id).bind(time_submit);
            }
            for (job_id, time_submit, energy_kwh, gpu_hours) in query.fetch_all(&self.pool).await? {
                found.insert((job_id, time_submit), (energy_kwh, gpu_hours));
            }
        }
        Ok(found)
    }

    /// Which of these job records already have an archived report.
    pub async fn archived_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<BTreeSet<(u32, u64)>, StoreError> {
        self.keys_among(cluster, records, "SELECT job_id, time_submit FROM job_reports WHERE cluster = ?", None).await
    }

    /// Which of these job records have an archived report of generation `generation` or later: the
    /// others are due for (re)making.
    pub async fn current_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
        generation: u16,
    ) -> Result<BTreeSet<(u32, u64)>, StoreError> {
        let select = "SELECT job_id, time_submit FROM job_reports WHERE cluster = ? AND generation >= ?";
        self.keys_among(cluster, records, select, Some(generation)).await
    }

    /// Which of these job records the archiver tried `max_tries` times or more without a report.
    pub async fn given_up_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
        max_tries: u16,
    ) -> Result<BTreeSet<(u32, u64)>, StoreError> {
        let sql = "SELECT job_id, time_submit FROM report_attempts WHERE cluster = ? AND tries >= ?";
        self.keys_among(cluster, records, sql, Some(max_tries)).await
    }

    /// Counts one more try at a job record's report that failed with `error`.
    pub async fn record_attempt(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        let error: String = error.chars().take(255).collect();
        sqlx::query(
            "INSERT INTO report_attempts (cluster, job_id, time_submit, tries, last_try, last_error) \
             VALUES (?, ?, ?, 1, ?, ?) \
             ON DUPLICATE KEY UPDATE tries = tries + 1, last_try = VALUES(last_try), last_error = VALUES(last_error)",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .bind(Utc::now())
        .bind(error)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The records among `records` that `select` (whose first placeholders are the cluster and, if
    /// given, `tries`) finds, looked up in chunks.
    async fn keys_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
        select: &str,
        tries: Option<u16>,
    ) -> Result<BTreeSet<(u32, u64)>, StoreError> {
        let mut found = BTreeSet::new();
        for chunk in records.chunks(KEYS_PER_STATEMENT) {
            let placeholders = vec!["(?, ?)"; chunk.len()].join(", ");
            let sql = format!("{select} AND (job_id, time_submit) IN ({placeholders})");
            let mut query = sqlx::query_as::<_, (u32, u64)>(&sql).bind(cluster.as_str());
            if let Some(tries) = tries {
                query = query.bind(tries);
            }
            for (job_id, time_submit) in chunk {
                query = query.bind(job_id).bind(time_submit);
            }
            found.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(found)
    }
}
