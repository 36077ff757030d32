//! A job's batch script and submission environment, as slurmdbd stores them where the site sets
//! `AccountingStoreFlags=job_script,job_env`: `<cluster>_job_script_table` and `<cluster>_job_env_table`,
//! one row per distinct text, named by the job row's `script_hash_inx` and `env_hash_inx`.
//!
//! Who may read them is decided above (`app/`); this reads one job row's texts, capped.

use sqlx::Row;

use super::{SlurmDbd, SlurmDbdError};

/// One stored text, at most the cap's characters of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredText {
    /// The first characters of the text (all of it when `total_chars` is no more than the cap).
    pub text: String,
    /// The whole text's length, in characters.
    pub total_chars: u64,
}

/// What slurmdbd holds for one job row: absent where it stored nothing (not a batch job, or the site
/// does not set the flag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobScriptRecord {
    pub script: Option<StoredText>,
    pub environment: Option<StoredText>,
}

/// MariaDB's "table doesn't exist": a slurmdbd older than 21.08 has no script tables.
const ER_NO_SUCH_TABLE: u16 = 1146;

impl SlurmDbd {
    /// The batch script of the job row `db_index` and, when `with_environment`, its submission
    /// environment, each cut at `cap_chars` characters. The environment is not even read when it is not
    /// asked for, so a viewer who may not see it cannot cause it to be fetched.
    pub async fn job_script(
        &self,
        db_index: u64,
        with_environment: bool,
        cap_chars: u64,
    ) -> Result<JobScriptRecord, SlurmDbdError> {
        let environment = if with_environment {
            format!(
                "(SELECT LEFT(e.env_vars, ?) FROM {env} e WHERE e.hash_inx = j.env_hash_inx), \
                 (SELECT CAST(CHAR_LENGTH(e.env_vars) AS UNSIGNED) FROM {env} e WHERE e.hash_inx = j.env_hash_inx)",
                env = self.cluster.table("job_env_table"),
            )
        } else {
            "NULL, NULL".to_string()
        };
        let sql = format!(
            "SELECT (SELECT LEFT(s.batch_script, ?) FROM {script} s WHERE s.hash_inx = j.script_hash_inx), \
             (SELECT CAST(CHAR_LENGTH(s.batch_script) AS UNSIGNED) FROM {script} s WHERE s.hash_inx = j.script_hash_inx), \
             {environment} FROM {job} j WHERE j.job_db_inx = ?",
            script = self.cluster.table("job_script_table"),
            job = self.cluster.table("job_table"),
        );
        let mut query = sqlx::query(&sql).bind(cap_chars);
        if with_environment {
            query = query.bind(cap_chars);
        }
        let row = match query.bind(db_index).fetch_optional(&self.pool).await {
            Ok(row) => row,
            Err(error) if is_missing_table(&error) => return Ok(JobScriptRecord::default()),
            Err(error) => return Err(error.into()),
        };
        let Some(row) = row else { return Ok(JobScriptRecord::default()) };
        let text_at = |text: usize, length: usize| -> Result<Option<StoredText>, SlurmDbdError> {
            let text: Option<String> = row.try_get(text).map_err(|e| SlurmDbdError::Schema(e.to_string()))?;
            let total: Option<u64> = row.try_get(length).map_err(|e| SlurmDbdError::Schema(e.to_string()))?;
            // slurmdbd writes an empty text where it kept none (a job not submitted by sbatch).
            Ok(text.filter(|text| !text.is_empty()).map(|text| StoredText { total_chars: total.unwrap_or(0), text }))
        };
        Ok(JobScriptRecord { script: text_at(0, 1)?, environment: text_at(2, 3)? })
    }
}

impl SlurmDbd {
    /// The job row's standard output and error files as Slurm recorded them (`std_out`, `std_err`,
    /// Slurm ≥ 24.05, patterns already filled in); `None` before 24.05 or where it recorded none.
    pub async fn job_output_paths(&self, db_index: u64) -> Result<Option<(String, String)>, SlurmDbdError> {
        let sql = format!(
            "SELECT CAST(std_out AS CHAR), CAST(std_err AS CHAR) FROM {} WHERE job_db_inx = ?",
            self.cluster.table("job_table")
        );
        let row: Option<(Option<String>, Option<String>)> =
            match sqlx::query_as(&sql).bind(db_index).fetch_optional(&self.pool).await {
                Ok(row) => row,
                Err(error) if is_missing_column(&error) => return Ok(None),
                Err(error) => return Err(error.into()),
            };
        Ok(row.and_then(|(out, err)| {
            let (out, err) = (out.unwrap_or_default(), err.unwrap_or_default());
            (!out.is_empty() || !err.is_empty()).then_some((out, err))
        }))
    }
}

fn is_missing_table(error: &sqlx::Error) -> bool {
    error_number(error) == Some(ER_NO_SUCH_TABLE)
}

/// MariaDB's "unknown column": a slurmdbd older than 21.08 has no `script_hash_inx`.
const ER_BAD_FIELD: u16 = 1054;

/// Whether `error` is MariaDB's "unknown column".
pub(super) fn is_missing_column(error: &sqlx::Error) -> bool {
    error_number(error) == Some(ER_BAD_FIELD)
}

fn error_number(error: &sqlx::Error) -> Option<u16> {
    error
        .as_database_error()
        .and_then(|database| database.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .map(sqlx::mysql::MySqlDatabaseError::number)
}
