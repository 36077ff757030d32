//! Read-only, live reader of slurmdbd's MariaDB tables (`<cluster>_job_table`, `_step_table`,
//! `_event_table`, `_assoc_table`, `tres_table`, `qos_table`, `acct_coord_table`).
//!
//! Architecture Invariant: nothing here writes. Every statement is a `SELECT`; the server connects
//! as a user that holds only `SELECT`. Table names come from a validated [`ClusterName`]; every value
//! is a bound parameter.

mod advice;
mod export;
mod horizon;
mod previous;
mod rows;
mod script;
mod sealed;
mod shape;
mod timed;
mod usage;
pub use usage::UsageRecord;
mod window;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Arguments, MySql, mysql::MySqlArguments};

use crate::domain::cluster::ClusterName;
use crate::domain::hostlist::Hostlist;
use crate::domain::ids::JobSelector;
use crate::domain::job::{JobCursor, JobFilter, JobRecord, StepRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::state::NodeState;
use crate::domain::tres::{TresCatalog, TresId, TresKind, TresMap};

pub use horizon::{LATE_END_S, LONG_SPAN_S};
pub use previous::PreviousRecords;
pub use rows::NodeEventRecord;
pub use script::{JobScriptRecord, StoredText};

use horizon::Horizon;
pub use shape::TableShape;
use timed::TimedPool;
use window::Bounds;

/// Failures of the slurmdbd source. `sqlx::Error` stops here.
#[derive(Debug, thiserror::Error)]
pub enum SlurmDbdError {
    /// MariaDB did not answer (down, refused, pool timeout): the caller should degrade, not fail.
    #[error("slurmdbd's database is unavailable: {0}")]
    Unavailable(String),
    /// MariaDB answered with something this reader does not understand (schema drift, bad row).
    #[error("slurmdbd's data could not be read: {0}")]
    Schema(String),
    /// MariaDB stopped the statement at `[slurmdbd] statement_timeout_s` (`max_statement_time`): the
    /// request asked for more than one statement may cost.
    #[error("slurmdbd's database stopped a statement at its time limit: {0}")]
    StatementTimeout(String),
}

/// MariaDB's `ER_STATEMENT_TIMEOUT`: "Query execution was interrupted (max_statement_time exceeded)".
const ER_STATEMENT_TIMEOUT: u16 = 1969;

impl SlurmDbdError {
    /// The variant, as `/metrics` labels it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Schema(_) => "schema",
            Self::StatementTimeout(_) => "statement_timeout",
        }
    }
}

/// Every failed statement is counted for `/metrics` here, where it becomes ours.
impl From<sqlx::Error> for SlurmDbdError {
    fn from(error: sqlx::Error) -> Self {
        let converted = Self::convert(error);
        crate::telemetry::global().source_error(crate::telemetry::Source::Slurmdbd, converted.kind());
        converted
    }
}

impl SlurmDbdError {
    fn convert(error: sqlx::Error) -> Self {
        let number = error
            .as_database_error()
            .and_then(|database| database.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
            .map(sqlx::mysql::MySqlDatabaseError::number);
        if number == Some(ER_STATEMENT_TIMEOUT) {
            return Self::StatementTimeout(error.to_string());
        }
        match &error {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable(error.to_string()),
            _ => Self::Schema(error.to_string()),
        }
    }
}

/// How to reach slurmdbd's database.
#[derive(Debug, Clone)]
pub struct SlurmDbdOptions {
    /// `mysql://reader:…@host:port/slurm_acct_db`; a user with `SELECT` only.
    pub url: String,
    pub max_connections: u32,
    /// How long a request waits for a connection before reporting the source unavailable.
    pub acquire_timeout: Duration,
    /// The longest one statement may run (MariaDB's `max_statement_time`, in seconds; at least 0.001).
    pub statement_timeout_s: f64,
}

/// The reader for one cluster's tables.
#[derive(Clone)]
pub struct SlurmDbd {
    /// Every statement on it is timed for `/metrics`.
    pool: TimedPool,
    cluster: ClusterName,
    /// The jobs that spanned long enough to be submitted before a window's bounded range.
    horizon: Arc<Horizon>,
    /// The columns later Slurm releases added that these tables hold, read once.
    shape: Arc<tokio::sync::OnceCell<TableShape>>,
}

/// A node as slurmdbd knows it now.
#[derive(Debug, Clone)]
pub struct NodeStatus {
    pub node: String,
    pub state: String,
    pub reason: Option<String>,
    pub reason_since: u64,
    pub running_jobs: u32,
    pub alloc_gpus: u64,
}

/// The columns every job query selects, in the order [`rows::decode_job`] reads them. Casts make
/// the column types uniform so decoding does not depend on signedness details of the schema.
fn job_columns(detail: bool, shape: TableShape) -> String {
    let tail = if detail { "COALESCE(j.work_dir, ''), COALESCE(j.submit_line, '')" } else { "'', ''" };
    format!(
        "CAST(j.job_db_inx AS UNSIGNED), CAST(j.id_job AS UNSIGNED), CAST(j.id_array_job AS UNSIGNED), \
         CAST(j.id_array_task AS UNSIGNED), j.array_task_str, CAST(j.array_max_tasks AS UNSIGNED), \
         CAST(j.het_job_id AS UNSIGNED), CAST(j.het_job_offset AS UNSIGNED), COALESCE(j.job_name, ''), a.user, \
         CAST(j.id_user AS UNSIGNED), CAST(j.id_group AS UNSIGNED), COALESCE(j.account, ''), COALESCE(j.`partition`, ''), \
         q.name, CAST(j.state AS UNSIGNED), CAST(j.kill_requid AS UNSIGNED), CAST(j.exit_code AS SIGNED), \
         CAST(j.derived_ec AS SIGNED), CAST(j.time_submit AS UNSIGNED), CAST(j.time_eligible AS UNSIGNED), \
         CAST(j.time_start AS UNSIGNED), CAST(j.time_end AS UNSIGNED), CAST(j.time_suspended AS UNSIGNED), \
         CAST(j.timelimit AS UNSIGNED), COALESCE(j.nodelist, ''), CAST(j.nodes_alloc AS UNSIGNED), \
         CAST(j.cpus_req AS UNSIGNED), CAST(j.mem_req AS UNSIGNED), COALESCE(j.tres_alloc, ''), \
         COALESCE(j.tres_req, ''), j.derived_es, {tail}, {}",
        shape.job_tail()
    )
}

/// The columns a listing selects from `j` (the job table), `a` (associations) and `q` (QOS), as a
/// 22.05 reader selects them: for measuring a listing against the same statement run bare (the SQL floor).
pub fn listing_columns() -> String {
    job_columns(false, TableShape::default())
}

/// Appends `sql` with one `?` per value, binding each.
fn push_in_list(sql: &mut String, args: &mut MySqlArguments, values: &[String]) -> Result<(), SlurmDbdError> {
    sql.push('(');
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            sql.push_str(", ");
        }
        sql.push('?');
        args.add(value.clone()).map_err(|e| SlurmDbdError::Schema(e.to_string()))?;
    }
    sql.push(')');
    Ok(())
}

fn bind<'q, T>(args: &mut MySqlArguments, value: T) -> Result<(), SlurmDbdError>
where
    T: sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + Send + 'q,
{
    args.add(value).map_err(|e| SlurmDbdError::Schema(e.to_string()))
}

/// The characters of Windows-1252 (MariaDB's `latin1`) outside `U+0000..=U+00FF`, at 0x80–0x9F.
const CP1252_ABOVE_LATIN1: [char; 27] = [
    '€', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 'Ž', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š',
    '›', 'œ', 'ž', 'Ÿ',
];

/// Whether slurmdbd's `latin1` columns can hold `text` (MariaDB's `latin1` is Windows-1252, with its
/// five unassigned bytes kept as the C1 controls they are in Unicode). A value they cannot hold matches
/// no row, and MariaDB refuses to compare it ("Illegal mix of collations"), so it is answered without
/// asking: `user=山田` lists nothing.
pub fn latin1_can_hold(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(u32::from(c), 0..=0x7F | 0xA0..=0xFF | 0x81 | 0x8D | 0x8F | 0x90 | 0x9D)
            || CP1252_ABOVE_LATIN1.contains(&c)
    })
}

/// `values` without those no slurmdbd row can hold; `None` when a non-empty list loses every value
/// (the filter can match nothing).
fn storable(values: &[String]) -> Option<Vec<String>> {
    let kept: Vec<String> = values.iter().filter(|value| latin1_can_hold(value)).cloned().collect();
    (values.is_empty() || !kept.is_empty()).then_some(kept)
}

/// `filter` without the values slurmdbd cannot hold; `None` when it can then match nothing.
fn storable_filter(filter: &JobFilter) -> Option<JobFilter> {
    // A tag lives in our store: the application turns it into `among` first; unresolved, it matches nothing.
    if filter.tag.is_some() && filter.among.is_none() {
        return None;
    }
    let (users, accounts, partitions) =
        (storable(&filter.users)?, storable(&filter.accounts)?, storable(&filter.partitions)?);
    Some(JobFilter { users, accounts, partitions, ..filter.clone() })
}

/// Appends "`column` is exactly `value`": the first test is the column's own collation, so its index
/// serves it; the second, in `latin1_bin`, refuses what `latin1_swedish_ci` lets through (`ALICE`
/// for `alice`, `Å` for `A`). `value` must be one [`latin1_can_hold`].
fn push_exact(sql: &mut String, args: &mut MySqlArguments, column: &str, value: &str) -> Result<(), SlurmDbdError> {
    sql.push_str(&format!("({column} = ? AND {column} = CONVERT(? USING latin1) COLLATE latin1_bin)"));
    bind(args, value.to_string())?;
    bind(args, value.to_string())
}

/// Appends the viewer's scope as a condition. `Nobody` is answered before any SQL runs.
fn push_scope(sql: &mut String, args: &mut MySqlArguments, scope: &ViewerScope) -> Result<(), SlurmDbdError> {
    match scope {
        ViewerScope::Staff | ViewerScope::Nobody => Ok(()),
        ViewerScope::User { name, coordinated_accounts } => {
            // A name slurmdbd cannot hold owns no job there; the accounts it coordinates still count.
            sql.push_str(" AND (");
            if latin1_can_hold(name) {
                push_exact(sql, args, "a.user", name)?;
            } else {
                sql.push_str("FALSE");
            }
            if !coordinated_accounts.is_empty() {
                sql.push_str(" OR j.account IN ");
                push_in_list(sql, args, coordinated_accounts)?;
            }
            sql.push(')');
            Ok(())
        }
    }
}

impl SlurmDbd {
    /// Builds a lazy pool: the server starts, and recovers, whether or not MariaDB is up.
    pub fn new(options: &SlurmDbdOptions, cluster: ClusterName) -> Result<Self, SlurmDbdError> {
        let connect: MySqlConnectOptions =
            options.url.parse().map_err(|e: sqlx::Error| SlurmDbdError::Schema(format!("bad slurmdbd url: {e}")))?;
        // Every statement on every connection is bounded by MariaDB itself. That bound also covers a
        // request that gives up: when the handler's timeout (or a client that hangs up) drops the future,
        // sqlx cannot cancel the statement in flight, which runs on and holds its connection until
        // it ends; `max_statement_time` guarantees it ends within the limit.
        let limit = format!("SET SESSION max_statement_time = {:.6}", options.statement_timeout_s.max(0.001));
        let pool = MySqlPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(true)
            .after_connect(move |connection, _meta| {
                let limit = limit.clone();
                Box::pin(async move {
                    sqlx::Executor::execute(connection, sqlx::raw_sql(&limit)).await?;
                    Ok(())
                })
            })
            .connect_lazy_with(connect.charset("utf8mb4"));
        Ok(Self { pool: TimedPool(pool), cluster, horizon: Arc::default(), shape: Arc::default() })
    }

    pub fn cluster(&self) -> &ClusterName {
        &self.cluster
    }

    /// The connection pool's state now (for `/metrics`).
    pub fn pool_use(&self) -> crate::telemetry::PoolUse {
        self.pool.pool_use()
    }

    /// The columns later Slurm releases added that this cluster's tables hold (read once; a failed
    /// read is tried again by the next caller).
    pub async fn shape(&self) -> Result<TableShape, SlurmDbdError> {
        self.shape.get_or_try_init(|| TableShape::read(&self.pool, &self.cluster)).await.copied()
    }

    /// One round trip; used by the health endpoint.
    pub async fn ping(&self) -> Result<(), SlurmDbdError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// The TRES catalogue (`tres_table`), including dynamic gres ids.
    pub async fn tres_catalog(&self) -> Result<TresCatalog, SlurmDbdError> {
        let rows: Vec<(u64, String, String)> =
            sqlx::query_as("SELECT CAST(id AS UNSIGNED), type, name FROM tres_table WHERE deleted = 0")
                .fetch_all(&self.pool)
                .await?;
        let kinds = rows
            .into_iter()
            .filter_map(|(id, kind, name)| Some(TresKind { id: TresId(u32::try_from(id).ok()?), kind, name }));
        Ok(TresCatalog::new(kinds))
    }

    /// What `user` may see: own jobs plus every account they coordinate, with sub-accounts.
    pub async fn scope_for_user(&self, user: &str) -> Result<ViewerScope, SlurmDbdError> {
        if !latin1_can_hold(user) {
            return Ok(ViewerScope::User { name: user.to_string(), coordinated_accounts: Vec::new() });
        }
        let mut sql = "SELECT acct FROM acct_coord_table WHERE deleted = 0 AND ".to_string();
        let mut args = MySqlArguments::default();
        push_exact(&mut sql, &mut args, "user", user)?;
        let direct: Vec<(String,)> = sqlx::query_as_with(&sql, args).fetch_all(&self.pool).await?;
        let mut accounts: BTreeSet<String> = direct.into_iter().map(|(acct,)| acct).collect();
        if !accounts.is_empty() {
            // Account associations form a tree through parent_acct; walk it down from each coordinated account.
            let sql = format!(
                "SELECT acct, parent_acct FROM {} WHERE user = '' AND deleted = 0",
                self.cluster.table("assoc_table")
            );
            let edges: Vec<(String, String)> = sqlx::query_as(&sql).fetch_all(&self.pool).await?;
            let mut frontier: Vec<String> = accounts.iter().cloned().collect();
            while let Some(parent) = frontier.pop() {
                for (child, _) in edges.iter().filter(|(_, p)| *p == parent) {
                    if accounts.insert(child.clone()) {
                        frontier.push(child.clone());
                    }
                }
            }
        }
        Ok(ViewerScope::User { name: user.to_string(), coordinated_accounts: accounts.into_iter().collect() })
    }

    /// Every account coordinator (`sacctmgr add coordinator`), by name.
    pub async fn coordinators(&self) -> Result<Vec<String>, SlurmDbdError> {
        let sql = "SELECT DISTINCT user FROM acct_coord_table WHERE deleted = 0 ORDER BY user LIMIT 10000";
        Ok(sqlx::query_scalar(sql).fetch_all(&self.pool).await?)
    }

    /// The cluster's associations `(user, account)` in the order they were made, deleted ones too (so
    /// the order only ever grows at its end): the pages' stable colours.
    pub async fn associations_in_order(&self) -> Result<Vec<(String, String)>, SlurmDbdError> {
        let sql = format!("SELECT user, acct FROM {} ORDER BY id_assoc", self.cluster.table("assoc_table"));
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }

    /// Jobs that overlap `window` (submitted before its end, not ended before its start; running and
    /// pending included), newest submission first, after `cursor`, at most `limit`.
    pub async fn jobs_in_window(
        &self,
        scope: &ViewerScope,
        window: TimeWindow,
        filter: &JobFilter,
        catalog: &TresCatalog,
        cursor: Option<JobCursor>,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Option<JobCursor>), SlurmDbdError> {
        if *scope == ViewerScope::Nobody || limit == 0 {
            return Ok((Vec::new(), None));
        }
        let Some(filter) = &storable_filter(filter) else {
            return Ok((Vec::new(), None));
        };
        let bounds = Bounds::of(window);
        let route = self.route(scope, filter, bounds.start).await?;
        // Filters the columns cannot answer exactly are applied after decoding, so batches are
        // fetched until the page is full or the window is exhausted.
        let decoded_filter = filter.has_decoded_tests();
        let batch = if decoded_filter { (limit * 2).max(200) } else { limit + 1 };
        let mut page: Vec<JobRecord> = Vec::with_capacity(limit);
        let mut position = cursor;
        loop {
            let rows = self.window_rows(&route, scope, bounds, filter, position, batch).await?;
            let fetched = rows.len();
            for row in &rows {
                let job = rows::decode_job(row)?;
                position =
                    Some(JobCursor { time_submit: job.time_submit, time_end: job.time_end, db_index: job.db_index });
                if page.len() == limit {
                    // One more matching row exists beyond the page: hand out a cursor.
                    let last = page.last().map(|j| JobCursor {
                        time_submit: j.time_submit,
                        time_end: j.time_end,
                        db_index: j.db_index,
                    });
                    return Ok((page, last));
                }
                if decoded_filter && !filter.matches_decoded(&job, catalog.gpus(&job.tres_alloc)) {
                    continue;
                }
                page.push(job);
            }
            if fetched < batch {
                return Ok((page, None));
            }
        }
    }

    /// Jobs `scope` may see that held their allocation at `window.start()` (started by then, not yet
    /// ended), every page of them.
    pub async fn running_at(
        &self,
        scope: &ViewerScope,
        window: TimeWindow,
        catalog: &TresCatalog,
    ) -> Result<Vec<JobRecord>, SlurmDbdError> {
        let at = u64::try_from(window.start().timestamp()).unwrap_or(0);
        let mut running = Vec::new();
        let mut cursor = None;
        loop {
            let (jobs, next) = self.jobs_in_window(scope, window, &JobFilter::default(), catalog, cursor, 5000).await?;
            running.extend(jobs.into_iter().filter(|job| job.running_at(at)));
            match next {
                Some(next) => cursor = Some(next),
                None => return Ok(running),
            }
        }
    }

    /// Per node, how many GPUs jobs that `viewer` may *not* see held at `window.start()`. Counts only:
    /// the jobs are read with staff scope inside this function and nothing of them but their GPU count
    /// per node leaves it. A job whose total does not split evenly over its nodes counts its share
    /// rounded up, as the grid places it. Staff see every job and `Nobody` sees nothing at all: both
    /// get an empty map, before any SQL runs.
    pub async fn busy_gpus(
        &self,
        viewer: &ViewerScope,
        window: TimeWindow,
        catalog: &TresCatalog,
    ) -> Result<BTreeMap<String, u64>, SlurmDbdError> {
        if matches!(viewer, ViewerScope::Staff | ViewerScope::Nobody) {
            return Ok(BTreeMap::new());
        }
        let mut busy: BTreeMap<String, u64> = BTreeMap::new();
        for job in self.running_at(&ViewerScope::Staff, window, catalog).await? {
            if viewer.can_see(&job.user, &job.account) {
                continue;
            }
            let hosts = job.nodes.hosts();
            let total = catalog.gpus(&job.tres_alloc);
            let per_node = slurmlens_slurm::gpus::gpus_per_node_rounded_up(total, hosts.len());
            if per_node == 0 {
                continue;
            }
            for host in hosts {
                *busy.entry(host.clone()).or_default() += per_node;
            }
        }
        Ok(busy)
    }

    /// Builds the catalogue of jobs that spanned longer than [`LONG_SPAN_S`] now, and says how many there
    /// are. Serving builds it in the background when a listing first needs it (listings read the whole
    /// history until then); the tests and the benchmarks wait for it here.
    pub async fn prepare_history(&self) -> Result<usize, SlurmDbdError> {
        self.horizon.build(&self.pool, &self.cluster).await
    }

    /// What the first page (`limit` jobs) of a listing costs slurmdbd's database, measured: MariaDB
    /// runs each statement the page sends (in order, until the page is full) under `ANALYZE FORMAT=JSON`
    /// and answers its plan, with the rows each table really read (`r_rows`, per `r_loops`). For
    /// operators and the overload tests; no request calls it. Empty when the filter can match nothing
    /// (no statement is sent, as the listing sends none).
    pub async fn analyze_listing(
        &self,
        scope: &ViewerScope,
        window: TimeWindow,
        filter: &JobFilter,
        limit: usize,
    ) -> Result<Vec<serde_json::Value>, SlurmDbdError> {
        let Some(filter) = &storable_filter(filter) else {
            return Ok(Vec::new());
        };
        let bounds = Bounds::of(window);
        let route = self.route(scope, filter, bounds.start).await?;
        let page = limit + 1;
        let statements = self.window_statements(&route, scope, bounds, filter, None, page)?;
        // The same statements again, sent as the page sends them, to know where the page fills up.
        let counted = self.window_statements(&route, scope, bounds, filter, None, page)?;
        let mut plans = Vec::new();
        let mut rows = 0;
        for ((sql, args), (count_sql, count_args)) in statements.into_iter().zip(counted) {
            if rows >= page {
                break;
            }
            let (plan,): (String,) =
                sqlx::query_as_with(&format!("ANALYZE FORMAT=JSON {sql}"), args).fetch_one(&self.pool).await?;
            plans.push(
                serde_json::from_str(&plan)
                    .map_err(|error| SlurmDbdError::Schema(format!("ANALYZE's plan: {error}")))?,
            );
            rows += sqlx::query_with(&count_sql, count_args).fetch_all(&self.pool).await?.len();
        }
        Ok(plans)
    }

    /// One job record with its steps, or `None` when it does not exist or the viewer may not see it.
    /// A requeued job has several records under one id: the newest is returned.
    pub async fn job(
        &self,
        scope: &ViewerScope,
        selector: JobSelector,
    ) -> Result<Option<(JobRecord, Vec<StepRecord>)>, SlurmDbdError> {
        if *scope == ViewerScope::Nobody {
            return Ok(None);
        }
        let shape = self.shape().await?;
        let mut args = MySqlArguments::default();
        let mut sql = format!(
            "SELECT {} FROM {} j LEFT JOIN {} a ON a.id_assoc = j.id_assoc \
             LEFT JOIN qos_table q ON q.id = j.id_qos WHERE j.deleted = 0",
            job_columns(true, shape),
            self.cluster.table("job_table"),
            self.cluster.table("assoc_table"),
        );
        match selector {
            JobSelector::Id(id) => {
                sql.push_str(" AND j.id_job = ?");
                bind(&mut args, id)?;
            }
            JobSelector::ArrayTask { array_job_id, task_id } => {
                sql.push_str(" AND j.id_array_job = ? AND j.id_array_task = ?");
                bind(&mut args, array_job_id)?;
                bind(&mut args, task_id)?;
            }
            JobSelector::HetComponent { het_job_id, offset } => {
                sql.push_str(" AND j.het_job_id = ? AND j.het_job_offset = ?");
                bind(&mut args, het_job_id)?;
                bind(&mut args, offset)?;
            }
        }
        push_scope(&mut sql, &mut args, scope)?;
        sql.push_str(" ORDER BY j.time_submit DESC, j.job_db_inx DESC LIMIT 1");
        let Some(row) = sqlx::query_with(&sql, args).fetch_optional(&self.pool).await? else {
            return Ok(None);
        };
        let job = rows::decode_job(&row)?;
        let steps = self.steps(job.db_index).await?;
        Ok(Some((job, steps)))
    }

    /// The steps of the job row `db_index`, in order.
    pub async fn steps(&self, db_index: u64) -> Result<Vec<StepRecord>, SlurmDbdError> {
        let sql = format!(
            "SELECT CAST(id_step AS SIGNED), COALESCE(step_name, ''), CAST(state AS UNSIGNED), \
             CAST(exit_code AS SIGNED), CAST(time_start AS UNSIGNED), CAST(time_end AS UNSIGNED), \
             CAST(time_suspended AS UNSIGNED), COALESCE(nodelist, ''), CAST(task_cnt AS UNSIGNED), \
             COALESCE(tres_alloc, ''), COALESCE(tres_usage_in_max, ''), \
             CAST(user_sec + sys_sec AS UNSIGNED), CAST(user_usec + sys_usec AS UNSIGNED) \
             FROM {} WHERE job_db_inx = ? AND deleted = 0 ORDER BY id_step, step_het_comp",
            self.cluster.table("step_table")
        );
        let rows = sqlx::query(&sql).bind(db_index).fetch_all(&self.pool).await?;
        rows.iter().map(rows::decode_step).collect()
    }

    /// Node events (drain, down, failures) that overlap `window`, oldest first.
    pub async fn node_events(
        &self,
        window: TimeWindow,
        node: Option<&str>,
    ) -> Result<Vec<NodeEventRecord>, SlurmDbdError> {
        let live = self.shape().await?.live_events();
        let mut sql = format!(
            "SELECT node_name, CAST(state AS UNSIGNED), reason, CAST(reason_uid AS UNSIGNED), \
             CAST(time_start AS UNSIGNED), CAST(time_end AS UNSIGNED) FROM {} \
             WHERE node_name <> '' AND time_start < ? AND (time_end = 0 OR time_end >= ?){live}",
            self.cluster.table("event_table")
        );
        let mut args = MySqlArguments::default();
        bind(&mut args, u64::try_from(window.end().timestamp()).unwrap_or(0))?;
        bind(&mut args, u64::try_from(window.start().timestamp()).unwrap_or(0))?;
        if node.is_some_and(|node| !latin1_can_hold(node)) {
            return Ok(Vec::new());
        }
        if let Some(node) = node {
            sql.push_str(" AND node_name = ?");
            bind(&mut args, node.to_string())?;
        }
        sql.push_str(" ORDER BY time_start, node_name LIMIT 10000");
        let rows = sqlx::query_with(&sql, args).fetch_all(&self.pool).await?;
        rows.iter().map(rows::decode_event).collect()
    }

    /// Every node of the cluster with its state now: open drain/down events first, then whether
    /// running jobs hold it. slurmdbd does not record idle/allocated transitions, so those are derived.
    pub async fn nodes(&self, catalog: &TresCatalog) -> Result<Vec<NodeStatus>, SlurmDbdError> {
        let events = self.cluster.table("event_table");
        let live = self.shape().await?.live_events();
        let registered: Option<(String,)> = sqlx::query_as(&format!(
            "SELECT cluster_nodes FROM {events} WHERE node_name = ''{live} ORDER BY time_end = 0 DESC, time_start DESC LIMIT 1"
        ))
        .fetch_optional(&self.pool)
        .await?;
        let mut nodes: BTreeMap<String, NodeStatus> = BTreeMap::new();
        let cluster_nodes = registered.map(|(text,)| text).unwrap_or_default();
        let hostlist = Hostlist::parse(&cluster_nodes).map_err(|e| SlurmDbdError::Schema(e.to_string()))?;
        for host in hostlist.hosts() {
            nodes.insert(
                host.clone(),
                NodeStatus {
                    node: host.clone(),
                    state: "IDLE".into(),
                    reason: None,
                    reason_since: 0,
                    running_jobs: 0,
                    alloc_gpus: 0,
                },
            );
        }
        let running: Vec<(String, String)> = sqlx::query_as(&format!(
            "SELECT COALESCE(nodelist, ''), COALESCE(tres_alloc, '') FROM {} \
             WHERE time_end = 0 AND time_start > 0 AND (state & 255) IN (1, 2) AND deleted = 0",
            self.cluster.table("job_table")
        ))
        .fetch_all(&self.pool)
        .await?;
        for (node_list, tres_alloc) in running {
            let Ok(hosts) = Hostlist::parse(&node_list) else {
                continue;
            };
            let gpus = TresMap::parse(&tres_alloc).map(|tres| catalog.gpus(&tres)).unwrap_or(0);
            let per_node = if hosts.is_empty() { 0 } else { gpus / hosts.len() as u64 };
            for host in hosts.hosts() {
                let entry = nodes.entry(host.clone()).or_insert_with(|| NodeStatus {
                    node: host.clone(),
                    state: "IDLE".into(),
                    reason: None,
                    reason_since: 0,
                    running_jobs: 0,
                    alloc_gpus: 0,
                });
                entry.running_jobs += 1;
                entry.alloc_gpus += per_node;
                entry.state = "ALLOCATED".into();
            }
        }
        let open: Vec<(String, u64, String, u64)> = sqlx::query_as(&format!(
            "SELECT node_name, CAST(state AS UNSIGNED), reason, CAST(time_start AS UNSIGNED) FROM {events} \
             WHERE node_name <> '' AND time_end = 0{live} ORDER BY time_start"
        ))
        .fetch_all(&self.pool)
        .await?;
        for (node, state, reason, since) in open {
            let Some(entry) = nodes.get_mut(&node) else {
                continue;
            };
            let state = NodeState::from_raw(u32::try_from(state).unwrap_or(0));
            // A drained node that still runs jobs is draining: keep ALLOCATED as its base.
            entry.state = if state.is_drain() && !state.is_down() && entry.running_jobs > 0 {
                "ALLOCATED+DRAIN".to_string()
            } else {
                state.name()
            };
            entry.reason = Some(reason);
            entry.reason_since = since;
        }
        Ok(nodes.into_values().collect())
    }
}
