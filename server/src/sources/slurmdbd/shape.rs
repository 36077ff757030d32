//! Which of the columns that Slurm releases after 22.05 added this slurmdbd's tables hold. slurmdbd adds
//! columns itself when it is upgraded and never renames one, so the reader selects by name and reads an
//! added column only where it exists, looked up once in `information_schema.columns`:
//! `<cluster>_job_table.sluid` (26.05), `.restart_cnt` (24.11) and `<cluster>_event_table.deleted` (24.11).
//! The association table's `lft`/`rgt`, gone in 25.05, are never read.

use super::SlurmDbdError;
use crate::domain::cluster::ClusterName;

/// The added columns this cluster's tables hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableShape {
    /// `job_table.sluid` (Slurm ≥ 26.05): the job's SLUID, which names its cgroup.
    pub job_sluid: bool,
    /// `job_table.restart_cnt` (Slurm ≥ 24.11): how often the job was requeued.
    pub job_restarts: bool,
    /// `event_table.deleted` (Slurm ≥ 24.11): rows marked deleted are no longer events.
    pub event_deleted: bool,
}

impl TableShape {
    /// Reads the shape of `cluster`'s tables.
    pub async fn read(pool: &super::TimedPool, cluster: &ClusterName) -> Result<Self, SlurmDbdError> {
        let (jobs, events) = (format!("{cluster}_job_table"), format!("{cluster}_event_table"));
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT CAST(TABLE_NAME AS CHAR), CAST(COLUMN_NAME AS CHAR) FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?) AND COLUMN_NAME IN ('sluid', 'restart_cnt', 'deleted')",
        )
        .bind(&jobs)
        .bind(&events)
        .fetch_all(pool)
        .await?;
        let has = |table: &str, column: &str| columns.iter().any(|(t, c)| t == table && c == column);
        Ok(Self {
            job_sluid: has(&jobs, "sluid"),
            job_restarts: has(&jobs, "restart_cnt"),
            event_deleted: has(&events, "deleted"),
        })
    }

    /// The job columns after 22.05's, in the order the decoder reads them (a constant where absent).
    pub fn job_tail(self) -> &'static str {
        match (self.job_sluid, self.job_restarts) {
            (true, true) => "CAST(j.sluid AS UNSIGNED), CAST(j.restart_cnt AS UNSIGNED)",
            (true, false) => "CAST(j.sluid AS UNSIGNED), CAST(NULL AS UNSIGNED)",
            (false, true) => "CAST(0 AS UNSIGNED), CAST(j.restart_cnt AS UNSIGNED)",
            (false, false) => "CAST(0 AS UNSIGNED), CAST(NULL AS UNSIGNED)",
        }
    }

    /// The condition that keeps only live event rows (nothing before 24.11, which had no `deleted`).
    pub fn live_events(self) -> &'static str {
        if self.event_deleted { " AND deleted = 0" } else { "" }
    }
}
