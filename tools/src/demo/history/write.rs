//! Writes the plan into slurmdbd's tables: the only SQL in slurmlens that writes them.

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use sha2::{Digest, Sha256};
use sqlx::mysql::{MySql, MySqlArguments, MySqlConnection};
use sqlx::{Arguments as _, MySqlPool};
use tokio::sync::mpsc;

use super::context::ClusterContext;
use super::encoding::{hostlist, node_inx, tres_string};
use super::load::{BulkTx, Loader, TsvRows, TsvValue};
use super::rows::{JobRow, Plan, step_exit};
use super::scripts::{SCRIPT_COLS, SCRIPT_TUPLE};
use super::steps::{StepRow, steps_for};
use super::workload::{JobOutcome, Mode};
use super::{HistoryParams, NO_VAL, NO_VAL64, NODE_CPUS, NODE_MEM};

pub(super) const JOB_COLS: &str = "job_db_inx, mod_time, deleted, account, admin_comment, array_task_str, array_max_tasks, \
array_task_pending, constraints, container, cpus_req, derived_ec, derived_es, env_hash_inx, exit_code, flags, \
job_name, id_assoc, id_array_job, id_array_task, id_block, id_job, id_qos, id_resv, id_wckey, id_user, id_group, \
het_job_id, het_job_offset, kill_requid, state_reason_prev, mcs_label, mem_req, nodelist, nodes_alloc, node_inx, \
`partition`, priority, script_hash_inx, state, timelimit, time_submit, time_eligible, time_start, time_end, \
time_suspended, gres_used, wckey, work_dir, submit_line, system_comment, tres_alloc, tres_req";

pub(super) const JOB_TUPLE: &str = "(?,?,0,?,NULL,?,?,?,'',NULL,?,?,NULL,0,?,?,?,?,?,?,NULL,?,?,0,0,?,?,?,?,?,0,'',?,?,?,?,?,?,?,?,?,?,?,?,?,0,'','',?,?,NULL,?,?)";

pub(super) const STEP_COLS: &str = "job_db_inx, deleted, exit_code, id_step, step_het_comp, kill_requid, nodelist, nodes_alloc, \
node_inx, state, step_name, task_cnt, task_dist, time_start, time_end, time_suspended, user_sec, user_usec, sys_sec, \
sys_usec, act_cpufreq, consumed_energy, container, req_cpufreq_min, req_cpufreq, req_cpufreq_gov, submit_line, \
tres_alloc, tres_usage_in_ave, tres_usage_in_max, tres_usage_in_max_taskid, tres_usage_in_max_nodeid, \
tres_usage_in_min, tres_usage_in_min_taskid, tres_usage_in_min_nodeid, tres_usage_in_tot, tres_usage_out_ave, \
tres_usage_out_max, tres_usage_out_max_taskid, tres_usage_out_max_nodeid, tres_usage_out_min, \
tres_usage_out_min_taskid, tres_usage_out_min_nodeid, tres_usage_out_tot";

pub(super) const STEP_TUPLE: &str =
    "(?,0,?,?,4294967294,?,?,?,?,?,?,?,?,?,?,0,?,?,?,?,?,0,NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

pub(super) fn insert_sql(table: &str, cols: &str, tuple: &str, rows: usize) -> String {
    let mut sql = String::with_capacity(64 + cols.len() + rows * (tuple.len() + 1));
    let _ = write!(sql, "INSERT INTO `{table}` ({cols}) VALUES ");
    for index in 0..rows {
        if index > 0 {
            sql.push(',');
        }
        sql.push_str(tuple);
    }
    sql
}

pub(super) struct JobValues {
    pub(super) inx: u64,
    pub(super) mod_time: i64,
    pub(super) state: u32,
    pub(super) exit_code: u32,
    pub(super) derived_ec: u32,
    pub(super) kill_requid: Option<u32>,
    pub(super) nodelist: String,
    pub(super) node_inx: Option<String>,
    pub(super) tres_alloc: String,
    pub(super) tres_req: String,
    pub(super) time_start: i64,
    pub(super) time_end: i64,
}

pub(super) fn job_values(context: &ClusterContext, plan: &Plan, job: &JobRow, inx: u64) -> JobValues {
    let tres = &context.tres;
    let (state, exit_code) = job.state_exit();
    let mut requested = vec![
        (tres.cpu, u64::from(job.req_cpus)),
        (tres.mem, job.req_mem),
        (tres.node, u64::from(job.req_nodes)),
        (tres.billing, u64::from(job.req_cpus)),
    ];
    if job.req_gpus > 0 {
        requested.push((tres.gpu, u64::from(job.req_gpus)));
    }
    let started = job.started() && !matches!(job.kind, JobOutcome::CancelledPending { .. });
    let (nodelist, node_inx_v, tres_alloc) = if started {
        let node_count = job.nodes.len() as u64;
        let mut allocated = vec![
            (tres.cpu, u64::from(job.cpus_per_node) * node_count),
            (tres.mem, job.mem_per_node * node_count),
            (tres.node, node_count),
            (tres.billing, u64::from(job.cpus_per_node) * node_count),
        ];
        if job.gpus_per_node > 0 {
            allocated.push((tres.gpu, u64::from(job.gpus_per_node) * node_count));
        }
        if matches!(job.kind, JobOutcome::Running | JobOutcome::Timeout | JobOutcome::Cancelled { .. }) {
            allocated.push((tres.energy, NO_VAL64));
        }
        (hostlist(&job.nodes, plan.width), Some(node_inx(&job.nodes)), tres_string(&mut allocated))
    } else {
        ("None assigned".to_string(), None, String::new())
    };
    let derived_ec = match (job.kind, job.mode) {
        (JobOutcome::Failed(fail_kind), Mode::Srun(_) | Mode::Interactive) => step_exit(fail_kind),
        (JobOutcome::Oom, Mode::Srun(_) | Mode::Interactive) => 253,
        _ => 0,
    };
    let kill_requid = match job.kind {
        JobOutcome::Cancelled { uid } | JobOutcome::CancelledPending { uid } => Some(uid),
        _ => None,
    };
    let mod_time = if job.t_end > 0 {
        job.t_end
    } else if job.t_start > 0 {
        job.t_start
    } else {
        job.t_submit
    };
    JobValues {
        inx,
        mod_time,
        state,
        exit_code,
        derived_ec,
        kill_requid,
        nodelist,
        node_inx: node_inx_v,
        tres_alloc,
        tres_req: tres_string(&mut requested),
        time_start: job.t_start,
        time_end: job.t_end,
    }
}

/// Where a generated row's values go, in its column list's order: a prepared statement's arguments
/// (the live demo's upserts, and the rows' digest) or `LOAD DATA` text ([`TsvRows`]). One list of
/// fields per table serves both.
pub(super) trait RowSink {
    fn value<'q, T>(&mut self, value: T) -> Result<()>
    where
        T: 'q + sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + TsvValue;

    /// Ends a row (a statement's arguments run on).
    fn end_row(&mut self) {}
}

impl RowSink for MySqlArguments {
    fn value<'q, T>(&mut self, value: T) -> Result<()>
    where
        T: 'q + sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + TsvValue,
    {
        self.add(value).map_err(|error| anyhow::anyhow!("encoding a value: {error}"))
    }
}

pub(super) fn encode_jobs(
    context: &ClusterContext,
    plan: &Plan,
    base: u64,
    first: usize,
    chunk: &[JobRow],
) -> Result<MySqlArguments> {
    let mut args = MySqlArguments::default();
    for (offset, job) in chunk.iter().enumerate() {
        job_row(&mut args, context, plan, job, base + (first + offset) as u64)?;
    }
    Ok(args)
}

/// One job's values, as [`JOB_TUPLE`]'s placeholders take them.
pub(super) fn job_row<S: RowSink>(
    sink: &mut S,
    context: &ClusterContext,
    plan: &Plan,
    job: &JobRow,
    inx: u64,
) -> Result<()> {
    let values = job_values(context, plan, job, inx);
    let user = &context.users[job.user_index];
    sink.value(values.inx)?;
    sink.value(values.mod_time)?;
    sink.value(user.acct.as_str())?;
    sink.value(job.array_task_str.as_deref())?;
    sink.value(job.array_max_tasks)?;
    sink.value(job.array_task_pending)?;
    sink.value(job.cpus_req)?;
    sink.value(values.derived_ec)?;
    sink.value(values.exit_code)?;
    sink.value(job.flags)?;
    sink.value(job.template.name.as_str())?;
    sink.value(user.id_assoc)?;
    sink.value(job.id_array_job)?;
    sink.value(job.id_array_task)?;
    sink.value(job.id_job)?;
    sink.value(job.qos)?;
    sink.value(user.uid)?;
    sink.value(user.gid)?;
    sink.value(job.het_job_id)?;
    sink.value(job.het_job_offset)?;
    sink.value(values.kill_requid)?;
    sink.value(job.mem_req)?;
    sink.value(values.nodelist.as_str())?;
    sink.value(if values.node_inx.is_some() { job.nodes.len() as u32 } else { 0 })?;
    sink.value(values.node_inx.as_deref())?;
    sink.value(if job.debug { "debug" } else { "gpu" })?;
    sink.value(job.priority)?;
    sink.value(super::scripts::script_hash_inx(job))?;
    sink.value(values.state)?;
    sink.value(job.timelimit)?;
    sink.value(job.t_submit)?;
    sink.value(job.t_eligible)?;
    sink.value(values.time_start)?;
    sink.value(values.time_end)?;
    sink.value(&*job.work_dir)?;
    sink.value(&*job.submit_line)?;
    sink.value(values.tres_alloc.as_str())?;
    sink.value(values.tres_req.as_str())?;
    sink.end_row();
    Ok(())
}

pub(super) fn encode_steps(rows: &[StepRow]) -> Result<MySqlArguments> {
    let mut args = MySqlArguments::default();
    for step in rows {
        step_row(&mut args, step)?;
    }
    Ok(args)
}

/// One step's values, as [`STEP_TUPLE`]'s placeholders take them.
pub(super) fn step_row<S: RowSink>(sink: &mut S, step: &StepRow) -> Result<()> {
    sink.value(step.job_db_inx)?;
    sink.value(step.exit_code)?;
    sink.value(step.id_step)?;
    sink.value(step.kill_requid)?;
    sink.value(step.nodelist.as_str())?;
    sink.value(step.nodes_alloc)?;
    sink.value(step.node_inx.as_str())?;
    sink.value(step.state)?;
    sink.value(step.step_name.as_str())?;
    sink.value(step.task_cnt)?;
    sink.value(step.task_dist)?;
    sink.value(step.time_start)?;
    sink.value(step.time_end)?;
    sink.value(step.user_sec)?;
    sink.value(step.user_usec)?;
    sink.value(step.sys_sec)?;
    sink.value(step.sys_usec)?;
    sink.value(step.act_cpufreq)?;
    sink.value(step.req_cpufreq_min)?;
    sink.value(step.req_cpufreq)?;
    sink.value(step.req_cpufreq_gov)?;
    sink.value(step.submit_line.as_deref())?;
    sink.value(step.tres_alloc.as_str())?;
    for col in &step.usage {
        sink.value(col.as_str())?;
    }
    sink.end_row();
    Ok(())
}

/// Rows of `LOAD DATA` text per chunk sent while the next is encoded.
const LOAD_CHUNK: usize = 1000;

/// Runs on a blocking thread: encodes the job rows chunk by chunk.
pub(super) fn produce_jobs(context: &ClusterContext, plan: &Plan, base: u64, out: &mpsc::Sender<Result<TsvRows>>) {
    for (chunk_index, chunk) in plan.jobs.chunks(LOAD_CHUNK).enumerate() {
        let mut rows = TsvRows::default();
        let encoded = chunk
            .iter()
            .enumerate()
            .try_for_each(|(offset, job)| {
                job_row(&mut rows, context, plan, job, base + (chunk_index * LOAD_CHUNK + offset) as u64)
            })
            .map(|()| rows);
        if out.blocking_send(encoded).is_err() {
            return;
        }
    }
}

/// Runs on a blocking thread: materialises and encodes the step rows chunk by chunk.
pub(super) fn produce_steps(
    params: &HistoryParams,
    context: &ClusterContext,
    plan: &Plan,
    base: u64,
    out: &mpsc::Sender<Result<TsvRows>>,
) {
    let mut buffer: Vec<StepRow> = Vec::with_capacity(LOAD_CHUNK + 16);
    let job_count = plan.jobs.len();
    for (index, job) in plan.jobs.iter().enumerate() {
        steps_for(params, context, plan, job, base + index as u64, &mut buffer);
        if buffer.len() < LOAD_CHUNK && index + 1 < job_count {
            continue;
        }
        let mut rows = TsvRows::default();
        let encoded = buffer.iter().try_for_each(|step| step_row(&mut rows, step)).map(|()| rows);
        buffer.clear();
        if out.blocking_send(encoded).is_err() {
            return;
        }
    }
}

/// The event table's columns and a row's placeholders.
const EVENT_COLS: &str = "time_start, time_end, node_name, cluster_nodes, reason, reason_uid, state, tres";
const EVENT_TUPLE: &str = "(?,?,?,?,?,?,?,?)";

/// The statement that inserts the cluster's event rows and its values: the registration row (the cluster's
/// TRES) and one row per node event.
/// With `registration` false (a later span of a long history) only the node events; None when there is
/// nothing to insert.
pub(super) fn encode_events(
    params: &HistoryParams,
    context: &ClusterContext,
    plan: &Plan,
    event_table: &str,
    registration: bool,
) -> Result<Option<(String, MySqlArguments)>> {
    let mut args = MySqlArguments::default();
    let rows = event_rows(&mut args, params, context, plan, registration)?;
    Ok((rows > 0).then(|| (insert_sql(event_table, EVENT_COLS, EVENT_TUPLE, rows), args)))
}

/// The event rows into `sink` (see [`encode_events`]); answers how many.
fn event_rows<S: RowSink>(
    sink: &mut S,
    params: &HistoryParams,
    context: &ClusterContext,
    plan: &Plan,
    registration: bool,
) -> Result<usize> {
    if !registration && plan.events.is_empty() {
        return Ok(0);
    }
    let tres = &context.tres;
    let nodes = u64::from(params.n_nodes);
    let node_gpus = u64::from(params.gpus_per_node);
    let all_nodes: Vec<u16> = (0..params.n_nodes as u16).collect();
    let registered_tres = tres_string(&mut [
        (tres.cpu, nodes * u64::from(NODE_CPUS)),
        (tres.mem, nodes * NODE_MEM),
        (tres.energy, 0),
        (tres.node, nodes),
        (tres.billing, nodes * u64::from(NODE_CPUS)),
        (tres.disk, 0),
        (tres.vmem, 0),
        (tres.pages, 0),
        (tres.gpu, nodes * node_gpus),
    ]);
    let node_tres = tres_string(&mut [
        (tres.cpu, u64::from(NODE_CPUS)),
        (tres.mem, NODE_MEM),
        (tres.billing, u64::from(NODE_CPUS)),
        (tres.gpu, node_gpus),
    ]);
    if registration {
        sink.value(plan.start)?;
        sink.value(0i64)?;
        sink.value("")?;
        sink.value(hostlist(&all_nodes, plan.width))?;
        sink.value("Cluster Registered TRES")?;
        sink.value(NO_VAL)?;
        sink.value(0u32)?;
        sink.value(registered_tres.as_str())?;
        sink.end_row();
    }
    for event in &plan.events {
        sink.value(event.time_start)?;
        // slurmdbd writes 0 for an event still open.
        sink.value(if event.time_end == i64::MAX { 0 } else { event.time_end })?;
        sink.value(hostlist(&[event.node as u16], plan.width))?;
        sink.value("")?;
        sink.value(event.reason)?;
        sink.value(event.uid)?;
        sink.value(event.state)?;
        sink.value(node_tres.as_str())?;
        sink.end_row();
    }
    Ok(plan.events.len() + usize::from(registration))
}

/// SHA-256 (hex) of everything [`write_plan`] sends for a plan: the statements, the encoded values of every
/// event, job and step row (`job_db_inx` from 1) and the summary. Equal digests, equal history.
pub(super) fn rows_digest(params: &HistoryParams, context: &ClusterContext, plan: &Plan) -> Result<String> {
    let mut hasher = Sha256::new();
    hash_plan(&mut hasher, params, context, plan, 1, true)?;
    Ok(hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Feeds one plan's rows into `hasher` (`job_db_inx` from `base`; the registration event row with
/// `registration`): [`rows_digest`]'s content, and each span's part of a long history's digest.
pub(super) fn hash_plan(
    hasher: &mut Sha256,
    params: &HistoryParams,
    context: &ClusterContext,
    plan: &Plan,
    base: u64,
    registration: bool,
) -> Result<()> {
    let mut out = HashWriter(hasher);
    // Debug output of the encoded arguments is their wire bytes, types and null bitmap.
    let _ = write!(out, "{JOB_COLS}{JOB_TUPLE}{STEP_COLS}{STEP_TUPLE}{:?}", plan.stats(params));
    if let Some((_, event_args)) = encode_events(params, context, plan, "event_table", registration)? {
        let _ = write!(out, "{event_args:?}");
    }
    let mut steps = Vec::new();
    for (index, job) in plan.jobs.iter().enumerate() {
        let args = encode_jobs(context, plan, base, index, std::slice::from_ref(job))?;
        let _ = write!(out, "{args:?}");
        steps.clear();
        steps_for(params, context, plan, job, base + index as u64, &mut steps);
        let args = encode_steps(&steps)?;
        let _ = write!(out, "{args:?}");
    }
    Ok(())
}

/// Feeds formatted text straight into the hasher, so that a million rows never sit in one string.
struct HashWriter<'a>(&'a mut Sha256);

impl fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.update(text.as_bytes());
        Ok(())
    }
}

/// Replaces the cluster's history with the plan in one transaction, so readers see the old history
/// until the new one is committed: the old rows deleted, then the batch scripts, events, jobs and
/// steps loaded.
pub(super) async fn write_plan(
    loader: &Loader,
    params: &HistoryParams,
    context: &Arc<ClusterContext>,
    plan: &Arc<Plan>,
) -> Result<(u64, u64, u64)> {
    let tables = Tables::of(&params.cluster);
    let timer = Instant::now();
    let mut tx = loader.begin().await?;
    for table in [&tables.step, &tables.job, &tables.event, &tables.script].into_iter().chain(&tables.rollups) {
        tx.execute(&format!("DELETE FROM `{table}`")).await.with_context(|| format!("clearing {table}"))?;
    }
    let base = tx.next_inx(&tables.job).await?;
    tracing::debug!(secs = timer.elapsed().as_secs_f64(), "history: old rows deleted");
    let mut scripts = TsvRows::default();
    for (inx, (hash, text)) in &super::scripts::distinct_scripts(&plan.jobs) {
        super::scripts::script_row(&mut scripts, *inx, hash, text)?;
    }
    tx.load_rows(&tables.script, SCRIPT_COLS, SCRIPT_TUPLE, scripts).await?;
    let (jobs, steps) = load_plan(&mut tx, None, &tables, params, context, plan, base, true).await?;
    tracing::debug!(secs = timer.elapsed().as_secs_f64(), "history: rows loaded");
    tx.commit().await?;
    tracing::debug!(secs = timer.elapsed().as_secs_f64(), "history: committed");
    Ok((jobs, steps, plan.events.len() as u64 + 1))
}

/// The cluster's three tables the history fills.
#[derive(Clone)]
pub(super) struct Tables {
    job: String,
    step: String,
    event: String,
    script: String,
    /// slurmdbd's rollups (what `sreport` reads): they describe the history being replaced, so they go
    /// with it, and `sacctmgr rollup` (or slurmdbd's own hourly rollup) makes them anew.
    rollups: Vec<String>,
}

impl Tables {
    fn of(cluster: &str) -> Self {
        Tables {
            job: format!("{cluster}_job_table"),
            step: format!("{cluster}_step_table"),
            event: format!("{cluster}_event_table"),
            script: format!("{cluster}_job_script_table"),
            rollups: ["assoc_usage", "usage", "wckey_usage"]
                .iter()
                .flat_map(|kind| ["hour", "day", "month"].map(|period| format!("{cluster}_{kind}_{period}_table")))
                .collect(),
        }
    }

    /// The first free `job_db_inx`.
    async fn next_inx(&self, conn: &mut MySqlConnection) -> Result<u64> {
        let max_inx: Option<u64> =
            sqlx::query_scalar(&format!("SELECT MAX(job_db_inx) FROM `{}`", self.job)).fetch_one(&mut *conn).await?;
        Ok(max_inx.unwrap_or(0) + 1)
    }
}

/// Inserts the batch scripts of a plan's jobs that the table does not hold yet, as slurmdbd stores them
/// with `AccountingStoreFlags=job_script`.
async fn insert_scripts(conn: &mut MySqlConnection, tables: &Tables, plan: &Plan) -> Result<()> {
    for (sql, args) in super::scripts::encode_scripts(&tables.script, &super::scripts::distinct_scripts(&plan.jobs))? {
        sqlx::query_with(&sql, args).execute(&mut *conn).await.context("inserting batch scripts")?;
    }
    Ok(())
}

/// Loads a plan's events, jobs and steps (`job_db_inx` from `base`): events and jobs on `jobs_tx`, steps
/// on `steps_tx` at the same time when given, else after the jobs on `jobs_tx`. Rows are encoded on
/// blocking threads while the previous chunk is sent.
#[expect(clippy::too_many_arguments, reason = "the two transactions, the tables and the plan with its place")]
async fn load_plan(
    jobs_tx: &mut BulkTx,
    steps_tx: Option<&mut BulkTx>,
    tables: &Tables,
    params: &HistoryParams,
    context: &Arc<ClusterContext>,
    plan: &Arc<Plan>,
    base: u64,
    registration: bool,
) -> Result<(u64, u64)> {
    let mut events = TsvRows::default();
    if event_rows(&mut events, params, context, plan, registration)? > 0 {
        jobs_tx.load_rows(&tables.event, EVENT_COLS, EVENT_TUPLE, events).await?;
    }
    let (job_sender, job_receiver) = mpsc::channel::<Result<TsvRows>>(3);
    let (step_sender, step_receiver) = mpsc::channel::<Result<TsvRows>>(3);
    let job_producer = {
        let (context, plan) = (Arc::clone(context), Arc::clone(plan));
        tokio::task::spawn_blocking(move || produce_jobs(&context, &plan, base, &job_sender))
    };
    let step_producer = {
        let (params, context, plan) = (params.clone(), Arc::clone(context), Arc::clone(plan));
        tokio::task::spawn_blocking(move || produce_steps(&params, &context, &plan, base, &step_sender))
    };
    let (jobs, steps) = match steps_tx {
        Some(steps_tx) => {
            let (first, second) = tokio::join!(
                jobs_tx.load(&tables.job, JOB_COLS, JOB_TUPLE, job_receiver),
                steps_tx.load(&tables.step, STEP_COLS, STEP_TUPLE, step_receiver)
            );
            (first?, second?)
        }
        None => {
            let first = jobs_tx.load(&tables.job, JOB_COLS, JOB_TUPLE, job_receiver).await?;
            let second = jobs_tx.load(&tables.step, STEP_COLS, STEP_TUPLE, step_receiver).await?;
            (first, second)
        }
    };
    job_producer.await.context("job row producer panicked")?;
    step_producer.await.context("step row producer panicked")?;
    ensure!(jobs == plan.jobs.len() as u64, "job row producer stopped early");
    Ok((jobs, steps))
}

/// Writes a long history span by span: [`SpanWriter::start`] deletes the cluster's old rows, each
/// [`SpanWriter::spawn_write`] inserts one span in two transactions (jobs and events, steps) and commits them,
/// and [`SpanWriter::finish`] builds the secondary indexes a cleared table's load went without.
pub(super) struct SpanWriter {
    pool: MySqlPool,
    loader: Loader,
    tables: Tables,
    base: u64,
    /// Per table, the secondary indexes dropped for the load, as `ALTER TABLE` adds them back.
    deferred: Vec<(String, Vec<String>)>,
}

/// The secondary indexes `table` (`<cluster>_<kind>`) must have, each as an `ADD [UNIQUE] INDEX` clause
/// that builds it as slurmdbd made it, and whether the table has it now. slurmdbd gives every cluster's
/// table of a kind the same indexes, so those of the other cluster's table of that kind with the most
/// indexes count as well: a table a killed seeding left without some of them gets them back.
async fn indexes_due(pool: &MySqlPool, table: &str, kind: &str) -> Result<Vec<(String, String, bool)>> {
    let own = secondary_indexes(pool, table).await?;
    let sibling: Option<String> = sqlx::query_scalar(
        "SELECT TABLE_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME LIKE CONCAT('%\\_', ?) AND TABLE_NAME <> ? AND INDEX_NAME <> 'PRIMARY' \
         GROUP BY TABLE_NAME ORDER BY COUNT(DISTINCT INDEX_NAME) DESC, TABLE_NAME LIMIT 1",
    )
    .bind(kind)
    .bind(table)
    .fetch_optional(pool)
    .await
    .with_context(|| format!("finding another cluster's {kind}"))?;
    let mut due: Vec<(String, String, bool)> = own.into_iter().map(|(name, clause)| (name, clause, true)).collect();
    if let Some(sibling) = sibling {
        for (name, clause) in secondary_indexes(pool, &sibling).await? {
            if !due.iter().any(|(have, _, _)| *have == name) {
                due.push((name, clause, false));
            }
        }
    }
    Ok(due)
}

/// The secondary indexes of `table` (all but the primary key), each as an `ADD [UNIQUE] INDEX` clause
/// that rebuilds it as it was: name, uniqueness, columns in order, prefix lengths.
async fn secondary_indexes(pool: &MySqlPool, table: &str) -> Result<Vec<(String, String)>> {
    let rows: Vec<(String, i64, String, Option<i64>)> = sqlx::query_as(
        "SELECT INDEX_NAME, CAST(NON_UNIQUE AS SIGNED), COLUMN_NAME, CAST(SUB_PART AS SIGNED) \
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
         AND INDEX_NAME <> 'PRIMARY' ORDER BY INDEX_NAME, SEQ_IN_INDEX",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .with_context(|| format!("reading the indexes of {table}"))?;
    let mut indexes: Vec<(String, bool, Vec<String>)> = Vec::new();
    for (name, non_unique, column, prefix) in rows {
        let column = match prefix {
            Some(length) => format!("`{column}`({length})"),
            None => format!("`{column}`"),
        };
        match indexes.last_mut() {
            Some((last, _, columns)) if *last == name => columns.push(column),
            _ => indexes.push((name, non_unique == 0, vec![column])),
        }
    }
    Ok(indexes
        .into_iter()
        .map(|(name, unique, columns)| {
            let kind = if unique { "UNIQUE INDEX" } else { "INDEX" };
            let clause = format!("ADD {kind} `{name}` ({})", columns.join(", "));
            (name, clause)
        })
        .collect())
}

/// Rows deleted per statement when clearing a long history: one statement per table would hold millions
/// of row locks and undo records in one transaction.
const DELETE_BATCH: u64 = 100_000;

impl SpanWriter {
    /// With `clear`, empties the cluster's job, step, event and script tables and its rollups (TRUNCATE, else a batch
    /// at a time); the spans' `job_db_inx` follow the table's last.
    pub(super) async fn start(pool: &MySqlPool, loader: &Loader, cluster: &str, clear: bool) -> Result<Self> {
        let tables = Tables::of(cluster);
        let all = [&tables.step, &tables.job, &tables.event, &tables.script].into_iter().chain(&tables.rollups);
        for table in all.filter(|_| clear) {
            // TRUNCATE empties a table at once where a million rows' DELETE takes over a minute; it needs
            // DROP, which a seeder may not have.
            match sqlx::raw_sql(&format!("TRUNCATE TABLE `{table}`")).execute(pool).await {
                Ok(_) => continue,
                Err(error) => tracing::debug!(table, %error, "history: clearing row by row"),
            }
            loop {
                let deleted = sqlx::query(&format!("DELETE FROM `{table}` LIMIT {DELETE_BATCH}"))
                    .execute(pool)
                    .await
                    .with_context(|| format!("clearing {table}"))?
                    .rows_affected();
                if deleted < DELETE_BATCH {
                    break;
                }
            }
        }
        let mut conn = pool.acquire().await?;
        let base = tables.next_inx(&mut conn).await?;
        // An emptied table is loaded without its secondary indexes and they are built once at the end
        // (a sorted build): maintaining slurmdbd's 16 job-table indexes row by row cost most of a
        // long history's load.
        let mut deferred = Vec::new();
        for (table, kind) in [(&tables.job, "job_table"), (&tables.step, "step_table")].into_iter().filter(|_| clear) {
            let indexes = indexes_due(pool, table, kind).await?;
            if indexes.is_empty() {
                continue;
            }
            let drops: Vec<String> =
                indexes.iter().filter(|(_, _, has)| *has).map(|(name, _, _)| format!("DROP INDEX `{name}`")).collect();
            // DDL through the text protocol. One statement: the indexes all go, or none.
            let dropped = match drops.is_empty() {
                true => Ok(()),
                false => {
                    sqlx::raw_sql(&format!("ALTER TABLE `{table}` {}", drops.join(", "))).execute(pool).await.map(drop)
                }
            };
            match dropped {
                Ok(()) => deferred.push((table.clone(), indexes.into_iter().map(|(_, clause, _)| clause).collect())),
                // A seeder granted no ALTER and INDEX loads through the indexes, only slower.
                Err(error) => tracing::warn!(table, %error, "history: loading with the table's indexes"),
            }
        }
        Ok(SpanWriter { pool: pool.clone(), loader: loader.clone(), tables, base, deferred })
    }

    /// Builds the indexes [`SpanWriter::start`] dropped, one `ALTER TABLE` per table, the tables at the
    /// same time (MariaDB builds one table's indexes on one core), also after a failed load, so that
    /// slurmdbd's tables keep their indexes.
    pub(super) async fn finish(&mut self) -> Result<()> {
        let builds = std::mem::take(&mut self.deferred).into_iter().map(|(table, clauses)| {
            let pool = self.pool.clone();
            async move {
                let started = Instant::now();
                sqlx::raw_sql(&format!("ALTER TABLE `{table}` {}", clauses.join(", ")))
                    .execute(&pool)
                    .await
                    .with_context(|| format!("building the indexes of {table} again"))?;
                tracing::info!(
                    table,
                    indexes = clauses.len(),
                    secs = started.elapsed().as_secs_f64(),
                    "history: indexes built"
                );
                anyhow::Ok(())
            }
        });
        futures::future::join_all(builds).await.into_iter().collect()
    }

    /// Starts writing one span's rows after the previous span's (its `job_db_inx` follow them, whether
    /// or not that one is written yet) and commits them; the task answers (jobs, steps, events)
    /// written. Its batch scripts are inserted first, committed at once: spans written side by side
    /// would otherwise lock the same script rows in two transactions.
    pub(super) async fn spawn_write(
        &mut self,
        params: HistoryParams,
        context: Arc<ClusterContext>,
        plan: Arc<Plan>,
        registration: bool,
    ) -> Result<tokio::task::JoinHandle<Result<(u64, u64, u64)>>> {
        insert_scripts(&mut *self.pool.acquire().await?, &self.tables, &plan).await?;
        let (loader, tables, base) = (self.loader.clone(), self.tables.clone(), self.base);
        self.base += plan.jobs.len() as u64;
        Ok(tokio::spawn(async move {
            let mut jobs_tx = loader.begin().await?;
            let mut steps_tx = loader.begin().await?;
            let (jobs, steps) =
                load_plan(&mut jobs_tx, Some(&mut steps_tx), &tables, &params, &context, &plan, base, registration)
                    .await?;
            jobs_tx.commit().await?;
            steps_tx.commit().await?;
            Ok((jobs, steps, plan.events.len() as u64 + u64::from(registration)))
        }))
    }
}
