//! What showback reads of slurmdbd: the started jobs of a window as a few narrow columns (no names,
//! paths or scripts), through the same index the listing would use for the viewer (`window.rs`), in
//! one statement per index range; and the account tree (account associations' `parent_acct`), which
//! sub-accounts roll up into, as `sreport` rolls them up.

use std::collections::BTreeSet;

use sqlx::mysql::MySqlArguments;

use super::window::{Bounds, Route};
use super::{SlurmDbd, SlurmDbdError, bind, push_scope};
use crate::domain::job::{JobFilter, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::state::{JobState, JobStateBase};
use crate::domain::tres::{TresCatalog, TresMap};

/// One started job of a window, as showback counts it. Its account is the job's, or while slurmdbd
/// has not written it yet (a job just started), its association's: the one `sreport` counts it under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub id_job: u32,
    pub time_submit: u64,
    pub time_start: u64,
    /// 0 while running.
    pub time_end: u64,
    pub state: JobStateBase,
    pub user: String,
    pub account: String,
    /// `gres/gpu` of `AllocTRES`.
    pub gpus: u64,
}

/// The narrow columns a usage row is read from.
const COLUMNS: &str = "CAST(j.id_job AS UNSIGNED), CAST(j.time_submit AS UNSIGNED), \
    CAST(j.time_start AS UNSIGNED), CAST(j.time_end AS UNSIGNED), CAST(j.state AS UNSIGNED), \
    COALESCE(a.user, ''), COALESCE(NULLIF(j.account, ''), a.acct, ''), COALESCE(j.tres_alloc, '')";

type UsageRow = (u64, u64, u64, u64, u64, String, String, String);

impl SlurmDbd {
    /// Every account with its parent account (`root`'s is empty), deleted accounts too (their jobs
    /// still count); a live association wins over a deleted one of the same account.
    pub async fn account_parents(&self) -> Result<Vec<(String, String)>, SlurmDbdError> {
        let sql = format!(
            "SELECT acct, parent_acct FROM {} WHERE user = '' ORDER BY deleted DESC, id_assoc",
            self.cluster.table("assoc_table")
        );
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }

    /// The jobs `scope` may see that started before `window`'s end and had not ended before its
    /// start, each once; with `among`, only those job records (id, submit time). Every statement is one index range of the window (bounded by the statement
    /// time limit); the rows are narrow, so a month of a busy cluster is a few megabytes.
    pub async fn usage_records(
        &self,
        scope: &ViewerScope,
        window: TimeWindow,
        catalog: &TresCatalog,
        among: Option<&[(u32, u64)]>,
    ) -> Result<Vec<UsageRecord>, SlurmDbdError> {
        if *scope == ViewerScope::Nobody || among.is_some_and(<[_]>::is_empty) {
            return Ok(Vec::new());
        }
        let bounds = Bounds::of(window);
        let filter = JobFilter { among: among.map(<[_]>::to_vec), ..JobFilter::default() };
        let route = self.route(scope, &filter, bounds.start).await?;
        let mut statements = Vec::new();
        match &route {
            // A tag's job records (the application read them from its store): one probe of the unique
            // index each, numbers only, written as literals.
            Route::Among(keys) => {
                let pairs: Vec<String> =
                    keys.iter().map(|(id, submit)| format!("(j.id_job = {id} AND j.time_submit = {submit})")).collect();
                statements.push(self.usage_statement(
                    " FORCE INDEX (id_job)",
                    &format!("({})", pairs.join(" OR ")),
                    bounds,
                    scope,
                )?);
            }
            Route::Recent => {
                statements.push(self.usage_statement(" FORCE INDEX (rollup2)", "TRUE", bounds, scope)?);
            }
            Route::UserJobs(uids) if uids.is_empty() => {}
            Route::UserJobs(uids) => {
                let list = uids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
                statements.push(self.usage_statement(
                    " FORCE INDEX (sacct_def2)",
                    &format!("j.id_user IN ({list})"),
                    bounds,
                    scope,
                )?);
            }
            Route::Whole => {
                let index = if matches!(scope, ViewerScope::User { .. }) { "" } else { " FORCE INDEX (archive_purge)" };
                statements.push(self.usage_statement(index, "TRUE", bounds, scope)?);
            }
            Route::Submitted(from) => {
                let range = format!("j.time_submit >= {from}");
                statements.push(self.usage_statement(" FORCE INDEX (archive_purge)", &range, bounds, scope)?);
            }
            Route::Bounded(older) => {
                let floor = older.floor;
                statements.push(self.usage_statement(
                    " FORCE INDEX (archive_purge)",
                    &format!("j.time_submit >= {floor}"),
                    bounds,
                    scope,
                )?);
                if floor > 0 {
                    let mut parts = vec![
                        (" FORCE INDEX (rollup2)", "j.time_end = 0".to_string()),
                        (
                            " FORCE INDEX (rollup2)",
                            format!("j.time_end >= {}", older.recent_ends_from.max(bounds.start)),
                        ),
                    ];
                    if !older.catalogued.is_empty() {
                        let keys = older.catalogued.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
                        parts.push((" FORCE INDEX (PRIMARY)", format!("j.job_db_inx IN ({keys})")));
                    }
                    for (index, part) in parts {
                        let range = format!("{part} AND j.time_submit < {floor}");
                        statements.push(self.usage_statement(index, &range, bounds, scope)?);
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        let mut records = Vec::new();
        for (sql, args) in statements {
            let rows: Vec<UsageRow> = sqlx::query_as_with(&sql, args).fetch_all(&self.pool).await?;
            for (id_job, submit, start, end, state, user, account, tres) in rows {
                if !seen.insert((id_job, submit)) {
                    continue;
                }
                // A malformed AllocTRES counts no GPUs rather than failing the whole window.
                let gpus = TresMap::parse(&tres).map(|tres| catalog.gpus(&tres)).unwrap_or(0);
                records.push(UsageRecord {
                    id_job: u32::try_from(id_job).unwrap_or(u32::MAX),
                    time_submit: submit,
                    time_start: start,
                    time_end: end,
                    state: JobState::from_raw(u32::try_from(state).unwrap_or(0)).base(),
                    user,
                    account,
                    gpus,
                });
            }
        }
        Ok(records)
    }

    /// One range of a usage read: `index` (a hint, or nothing), `range` (literal numbers only), the
    /// window test and the viewer's scope.
    fn usage_statement(
        &self,
        index: &str,
        range: &str,
        bounds: Bounds,
        scope: &ViewerScope,
    ) -> Result<(String, MySqlArguments), SlurmDbdError> {
        let mut args = MySqlArguments::default();
        let mut sql = format!(
            "SELECT {COLUMNS} FROM {} j{index} LEFT JOIN {} a ON a.id_assoc = j.id_assoc \
             WHERE j.deleted = 0 AND {range} AND j.time_submit < ? AND (j.time_end >= ? OR j.time_end = 0) \
             AND j.time_start > 0 AND j.time_start < ?",
            self.cluster.table("job_table"),
            self.cluster.table("assoc_table"),
        );
        bind(&mut args, bounds.end)?;
        bind(&mut args, bounds.start)?;
        bind(&mut args, bounds.end)?;
        push_scope(&mut sql, &mut args, scope)?;
        Ok((sql, args))
    }
}
