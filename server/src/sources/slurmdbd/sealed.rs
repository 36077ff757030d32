//! A window's jobs split at a seal, for the charts' history kept in memory (`app::chart_history`).
//! A job that ended long enough ago never changes in slurmdbd (a requeue writes a new record), so its
//! record can be read once, by the hour its end falls in (`rollup2 (time_end, …)`, whatever its
//! submission), and kept. What no sealed hour holds is read fresh for every window: the open jobs, the
//! jobs that ended since the seal (both a short range of `rollup2`), and the catalogued long-spanned
//! jobs ([`horizon`](super::horizon)) that ended after the hours a window reads.

use sqlx::mysql::MySqlArguments;

use super::{SlurmDbd, SlurmDbdError, bind, job_columns};
use crate::domain::job::{EndedJob, JobRecord};

/// What a chart draws of a job (`rows::decode_ended` reads them in this order): a quarter less for
/// MariaDB to send than the listing's columns, and no QOS to join.
const ENDED_COLUMNS: &str = "CAST(j.job_db_inx AS UNSIGNED), CAST(j.id_job AS UNSIGNED), \
     CAST(j.id_array_job AS UNSIGNED), CAST(j.id_array_task AS UNSIGNED), j.array_task_str, \
     CAST(j.array_max_tasks AS UNSIGNED), CAST(j.het_job_id AS UNSIGNED), CAST(j.het_job_offset AS UNSIGNED), \
     COALESCE(j.job_name, ''), a.user, CAST(j.id_user AS UNSIGNED), COALESCE(j.account, ''), \
     COALESCE(j.`partition`, ''), CAST(j.state AS UNSIGNED), CAST(j.time_submit AS UNSIGNED), \
     COALESCE(j.nodelist, ''), CAST(j.nodes_alloc AS UNSIGNED), COALESCE(j.tres_alloc, ''), \
     CAST(j.time_start AS UNSIGNED), CAST(j.time_end AS UNSIGNED)";

impl SlurmDbd {
    /// Every job that ended in `[from, to)` (epoch seconds), whatever its submission, as staff see
    /// them (nothing is held back by scope, the caller filters), with only what a chart draws.
    pub async fn ended_between(&self, from: u64, to: u64) -> Result<Vec<EndedJob>, SlurmDbdError> {
        let sql = format!(
            "SELECT {ENDED_COLUMNS} FROM {} j FORCE INDEX (rollup2) LEFT JOIN {} a ON a.id_assoc = j.id_assoc \
             WHERE j.deleted = 0 AND j.time_end >= ? AND j.time_end < ?",
            self.cluster.table("job_table"),
            self.cluster.table("assoc_table"),
        );
        let rows = sqlx::query(&sql).bind(from.max(1)).bind(to).fetch_all(&self.pool).await?;
        rows.iter().map(super::rows::decode_ended).collect()
    }

    /// The jobs submitted before `end` that no hour sealed at `seal` holds: the open ones and those
    /// that ended at or after `seal` (and not before `start`), and the jobs of the rows `long` names
    /// (catalogued long spans, by primary key). Staff's view, as [`Self::ended_between`].
    pub async fn unsealed(
        &self,
        (start, end): (u64, u64),
        seal: u64,
        long: &[u64],
    ) -> Result<Vec<JobRecord>, SlurmDbdError> {
        let shape = self.shape().await?;
        let mut parts = vec![
            (" FORCE INDEX (rollup2)", "j.time_end = 0".to_string()),
            (" FORCE INDEX (rollup2)", format!("j.time_end >= {}", seal.max(start).max(1))),
        ];
        if !long.is_empty() {
            // Numbers only, written as literals.
            let rows = long.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
            parts.push((" FORCE INDEX (PRIMARY)", format!("j.job_db_inx IN ({rows})")));
        }
        let mut args = MySqlArguments::default();
        let selects: Vec<String> = parts
            .into_iter()
            .map(|(index, part)| {
                bind(&mut args, end)?;
                Ok(format!(
                    "(SELECT {} FROM {} WHERE j.deleted = 0 AND {part} AND j.time_submit < ?)",
                    job_columns(false, shape),
                    self.joined(index)
                ))
            })
            .collect::<Result<_, SlurmDbdError>>()?;
        let rows = sqlx::query_with(&selects.join(" UNION ALL "), args).fetch_all(&self.pool).await?;
        rows.iter().map(super::rows::decode_job).collect()
    }

    /// The catalogued long-spanned jobs (rows) submitted before `submitted_before` that ended in
    /// `[from, to)`, and whether the catalogue is known complete for every end before `to`; `None`
    /// while there is no catalogue (the first minutes of a process).
    pub async fn long_spans_ended(
        &self,
        (from, to): (u64, u64),
        submitted_before: u64,
    ) -> Result<Option<(Vec<u64>, bool)>, SlurmDbdError> {
        let Some(spans) = self.horizon.spans(&self.pool, &self.cluster).await? else { return Ok(None) };
        Ok(Some((spans.ended_between(from, to, submitted_before), spans.complete_for(to))))
    }
}
