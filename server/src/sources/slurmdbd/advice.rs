//! The reads behind advice at submission: a user's latest finished runs of one job name, through the
//! index `sacct -u` uses (`sacct_def2 (id_user, time_end, …)`), so the rows read grow with that user's
//! jobs in the look-back, never with the cluster's; and whose jobs a uid runs (the MUNGE credential's).

use sqlx::mysql::MySqlArguments;

use super::{SlurmDbd, SlurmDbdError, bind, job_columns, push_exact};
use crate::domain::job::JobRecord;

impl SlurmDbd {
    /// The uids under which `user`'s jobs are recorded.
    pub async fn uids_of_user(&self, user: &str) -> Result<Vec<u32>, SlurmDbdError> {
        self.user_uids(user).await
    }

    /// The user name slurmdbd's associations give the latest job of `uid`, if it ran any here: one
    /// probe of `sacct_def2`.
    pub async fn user_of_uid(&self, uid: u32) -> Result<Option<String>, SlurmDbdError> {
        let sql = format!(
            "SELECT a.user FROM {} j FORCE INDEX (sacct_def2) JOIN {} a ON a.id_assoc = j.id_assoc \
             WHERE j.id_user = ? ORDER BY j.time_end DESC LIMIT 1",
            self.cluster.table("job_table"),
            self.cluster.table("assoc_table"),
        );
        let row: Option<(String,)> = sqlx::query_as(&sql).bind(uid).fetch_optional(&self.pool).await?;
        Ok(row.map(|(user,)| user))
    }

    /// Up to `limit` of the runs by `uids` named `job_name` that started and ended at or after `since`
    /// (epoch seconds), the latest end first.
    pub async fn recent_runs(
        &self,
        uids: &[u32],
        job_name: &str,
        since: u64,
        limit: u32,
    ) -> Result<Vec<JobRecord>, SlurmDbdError> {
        if uids.is_empty() || !super::latin1_can_hold(job_name) {
            return Ok(Vec::new());
        }
        let shape = self.shape().await?;
        let list = uids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let mut args = MySqlArguments::default();
        let mut sql = format!(
            "SELECT {} FROM {} j FORCE INDEX (sacct_def2) LEFT JOIN {} a ON a.id_assoc = j.id_assoc \
             LEFT JOIN qos_table q ON q.id = j.id_qos \
             WHERE j.deleted = 0 AND j.id_user IN ({list}) AND j.time_end >= ? AND j.time_start > 0 AND ",
            job_columns(false, shape),
            self.cluster.table("job_table"),
            self.cluster.table("assoc_table"),
        );
        bind(&mut args, since.max(1))?;
        push_exact(&mut sql, &mut args, "j.job_name", job_name)?;
        sql.push_str(" ORDER BY j.time_end DESC LIMIT ?");
        bind(&mut args, u64::from(limit))?;
        let rows = sqlx::query_with(&sql, args).fetch_all(&self.pool).await?;
        rows.iter().map(super::rows::decode_job).collect()
    }
}
