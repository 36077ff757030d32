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
use super::rows::{JobRow, Plan, step_exit};
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

pub(super) const CHUNK: usize = 1000;

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

pub(super) fn push_value<'q, T>(args: &mut MySqlArguments, value: T) -> Result<()>
where
    T: 'q + sqlx::Encode<'q, MySql> + sqlx::Type<MySql>,
{
    args.add(value).map_err(|error| anyhow::anyhow!("encoding a value: {error}"))
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
        let values = job_values(context, plan, job, base + (first + offset) as u64);
        let user = &context.users[job.user_index];
        push_value(&mut args, values.inx)?;
        push_value(&mut args, values.mod_time)?;
        push_value(&mut args, user.acct.as_str())?;
        push_value(&mut args, job.array_task_str.as_deref())?;
        push_value(&mut args, job.array_max_tasks)?;
        push_value(&mut args, job.array_task_pending)?;
        push_value(&mut args, job.cpus_req)?;
        push_value(&mut args, values.derived_ec)?;
        push_value(&mut args, values.exit_code)?;
        push_value(&mut args, job.flags)?;
        push_value(&mut args, job.template.name.as_str())?;
        push_value(&mut args, user.id_assoc)?;
        push_value(&mut args, job.id_array_job)?;
        push_value(&mut args, job.id_array_task)?;
        push_value(&mut args, job.id_job)?;
        push_value(&mut args, job.qos)?;
        push_value(&mut args, user.uid)?;
        push_value(&mut args, user.gid)?;
        push_value(&mut args, job.het_job_id)?;
        push_value(&mut args, job.het_job_offset)?;
        push_value(&mut args, values.kill_requid)?;
        push_value(&mut args, job.mem_req)?;
        push_value(&mut args, values.nodelist.as_str())?;
        push_value(&mut args, if values.node_inx.is_some() { job.nodes.len() as u32 } else { 0 })?;
        push_value(&mut args, values.node_inx.as_deref())?;
        push_value(&mut args, if job.debug { "debug" } else { "gpu" })?;
        push_value(&mut args, job.priority)?;
        push_value(&mut args, super::scripts::script_hash_inx(job))?;
        push_value(&mut args, values.state)?;
        push_value(&mut args, job.timelimit)?;
        push_value(&mut args, job.t_submit)?;
        push_value(&mut args, job.t_eligible)?;
        push_value(&mut args, values.time_start)?;
        push_value(&mut args, values.time_end)?;
        push_value(&mut args, &*job.work_dir)?;
        push_value(&mut args, &*job.submit_line)?;
        push_value(&mut args, values.tres_alloc.as_str())?;
        push_value(&mut args, values.tres_req.as_str())?;
    }
    Ok(args)
}

pub(super) fn encode_steps(rows: &[StepRow]) -> Result<MySqlArguments> {
    let mut args = MySqlArguments::default();
    for step in rows {
        push_value(&mut args, step.job_db_inx)?;
        push_value(&mut args, step.exit_code)?;
        push_value(&mut args, step.id_step)?;
        push_value(&mut args, step.kill_requid)?;
        push_value(&mut args, step.nodelist.as_str())?;
        push_value(&mut args, step.nodes_alloc)?;
        push_value(&mut args, step.node_inx.as_str())?;
        push_value(&mut args, step.state)?;
        push_value(&mut args, step.step_name.as_str())?;
        push_value(&mut args, step.task_cnt)?;
        push_value(&mut args, step.task_dist)?;
        push_value(&mut args, step.time_start)?;
        push_value(&mut args, step.time_end)?;
        push_value(&mut args, step.user_sec)?;
        push_value(&mut args, step.user_usec)?;
        push_value(&mut args, step.sys_sec)?;
        push_value(&mut args, step.sys_usec)?;
        push_value(&mut args, step.act_cpufreq)?;
        push_value(&mut args, step.req_cpufreq_min)?;
        push_value(&mut args, step.req_cpufreq)?;
        push_value(&mut args, step.req_cpufreq_gov)?;
        push_value(&mut args, step.submit_line.as_deref())?;
        push_value(&mut args, step.tres_alloc.as_str())?;
        for col in &step.usage {
            push_value(&mut args, col.as_str())?;
        }
    }
    Ok(args)
}

pub(super) type EncodedChunk = Result<(usize, MySqlArguments)>;

/// Runs on a blocking thread: encodes the job rows chunk by chunk.
pub(super) fn produce_jobs(context: &ClusterContext, plan: &Plan, base: u64, out: &mpsc::Sender<EncodedChunk>) {
    for (chunk_index, chunk) in plan.jobs.chunks(CHUNK).enumerate() {
        let encoded = encode_jobs(context, plan, base, chunk_index * CHUNK, chunk).map(|args| (chunk.len(), args));
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
    out: &mpsc::Sender<EncodedChunk>,
) {
    let mut buffer: Vec<StepRow> = Vec::with_capacity(CHUNK + 16);
    let job_count = plan.jobs.len();
    for (index, job) in plan.jobs.iter().enumerate() {
        steps_for(params, context, plan, job, base + index as u64, &mut buffer);
        while buffer.len() >= CHUNK || (index + 1 == job_count && !buffer.is_empty()) {
            let take = buffer.len().min(CHUNK);
            let encoded = encode_steps(&buffer[..take]).map(|args| (take, args));
            buffer.drain(..take);
            if out.blocking_send(encoded).is_err() {
                return;
            }
        }
    }
}

/// Inserts encoded chunks from `rx` into `table` on one connection.
pub(super) async fn insert_stream(
    conn: &mut MySqlConnection,
    table: &str,
    cols: &str,
    tuple: &str,
    mut chunks: mpsc::Receiver<EncodedChunk>,
) -> Result<u64> {
    let full = insert_sql(table, cols, tuple, CHUNK);
    let mut inserted = 0u64;
    while let Some(encoded) = chunks.recv().await {
        let (rows, args) = encoded?;
        let part;
        let sql = if rows == CHUNK {
            full.as_str()
        } else {
            part = insert_sql(table, cols, tuple, rows);
            part.as_str()
        };
        sqlx::query_with(sql, args).execute(&mut *conn).await.with_context(|| format!("inserting into {table}"))?;
        inserted += rows as u64;
    }
    Ok(inserted)
}

pub(super) async fn delete_all(conn: &mut MySqlConnection, tables: &[&str]) -> Result<()> {
    for table in tables {
        sqlx::query(&format!("DELETE FROM `{table}`"))
            .execute(&mut *conn)
            .await
            .with_context(|| format!("clearing {table}"))?;
    }
    Ok(())
}

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
    if !registration && plan.events.is_empty() {
        return Ok(None);
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
    let mut sql = format!(
        "INSERT INTO `{event_table}` (time_start, time_end, node_name, cluster_nodes, reason, reason_uid, state, tres) VALUES "
    );
    for index in 0..plan.events.len() + usize::from(registration) {
        if index > 0 {
            sql.push(',');
        }
        sql.push_str("(?,?,?,?,?,?,?,?)");
    }
    let mut args = MySqlArguments::default();
    if registration {
        push_value(&mut args, plan.start)?;
        push_value(&mut args, 0i64)?;
        push_value(&mut args, "")?;
        push_value(&mut args, hostlist(&all_nodes, plan.width))?;
        push_value(&mut args, "Cluster Registered TRES")?;
        push_value(&mut args, NO_VAL)?;
        push_value(&mut args, 0u32)?;
        push_value(&mut args, registered_tres.as_str())?;
    }
    for event in &plan.events {
        push_value(&mut args, event.time_start)?;
        // slurmdbd writes 0 for an event still open.
        push_value(&mut args, if event.time_end == i64::MAX { 0 } else { event.time_end })?;
        push_value(&mut args, hostlist(&[event.node as u16], plan.width))?;
        push_value(&mut args, "")?;
        push_value(&mut args, event.reason)?;
        push_value(&mut args, event.uid)?;
        push_value(&mut args, event.state)?;
        push_value(&mut args, node_tres.as_str())?;
    }
    Ok(Some((sql, args)))
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

/// Deletes the cluster's old rows and inserts the plan. With a pool of two or more
/// connections, jobs (+ events) and steps go through two transactions in parallel
/// (committed together at the end), else through one.
pub(super) async fn write_plan(
    pool: &MySqlPool,
    params: &HistoryParams,
    context: &Arc<ClusterContext>,
    plan: &Arc<Plan>,
) -> Result<(u64, u64, u64)> {
    let tables = Tables::of(&params.cluster);
    let timer = Instant::now();
    let parallel = pool.options().get_max_connections() >= 2;
    let mut job_tx = pool.begin().await?;
    let mut step_tx = if parallel { Some(pool.begin().await?) } else { None };
    match step_tx.as_mut() {
        Some(step_tx) => {
            let step_tables = [tables.step.as_str()];
            let job_tables: Vec<&str> = [tables.job.as_str(), tables.event.as_str(), tables.script.as_str()]
                .into_iter()
                .chain(tables.rollups.iter().map(String::as_str))
                .collect();
            let (first, second) = tokio::join!(delete_all(step_tx, &step_tables), delete_all(&mut job_tx, &job_tables));
            first?;
            second?;
        }
        None => {
            let all: Vec<&str> = [&tables.step, &tables.job, &tables.event, &tables.script]
                .into_iter()
                .chain(&tables.rollups)
                .map(String::as_str)
                .collect();
            delete_all(&mut job_tx, &all).await?;
        }
    }
    let base = tables.next_inx(&mut job_tx).await?;
    tracing::debug!(secs = timer.elapsed().as_secs_f64(), "history: old rows deleted");
    insert_scripts(&mut job_tx, &tables, plan).await?;
    let (jobs, steps) =
        insert_plan(&mut job_tx, step_tx.as_deref_mut(), &tables, params, context, plan, base, true).await?;
    tracing::debug!(secs = timer.elapsed().as_secs_f64(), "history: rows inserted");
    job_tx.commit().await?;
    if let Some(step_tx) = step_tx {
        step_tx.commit().await?;
    }
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

/// A bulk load's session settings, for this connection only: the rows are unique by construction
/// (unique keys need no lookup per row) and slurmdbd's tables declare no foreign keys to check.
async fn bulk_session(conn: &mut MySqlConnection) -> Result<()> {
    sqlx::query("SET SESSION unique_checks = 0, foreign_key_checks = 0")
        .execute(&mut *conn)
        .await
        .context("setting the bulk load's session")?;
    Ok(())
}

/// Inserts the batch scripts of a plan's jobs that the table does not hold yet, as slurmdbd stores them
/// with `AccountingStoreFlags=job_script`.
async fn insert_scripts(conn: &mut MySqlConnection, tables: &Tables, plan: &Plan) -> Result<()> {
    for (sql, args) in super::scripts::encode_scripts(&tables.script, &super::scripts::distinct_scripts(&plan.jobs))? {
        sqlx::query_with(&sql, args).execute(&mut *conn).await.context("inserting batch scripts")?;
    }
    Ok(())
}

/// Inserts a plan's events, jobs and steps (`job_db_inx` from `base`): jobs and events on `job_tx`,
/// steps on `step_tx` in parallel when given, else after the jobs on `job_tx`. Rows are encoded on
/// blocking threads while the previous chunk is inserted.
#[expect(clippy::too_many_arguments, reason = "the two connections, the tables and the plan with its place")]
async fn insert_plan(
    job_tx: &mut MySqlConnection,
    step_tx: Option<&mut MySqlConnection>,
    tables: &Tables,
    params: &HistoryParams,
    context: &Arc<ClusterContext>,
    plan: &Arc<Plan>,
    base: u64,
    registration: bool,
) -> Result<(u64, u64)> {
    bulk_session(job_tx).await?;
    if let Some((event_sql, event_args)) = encode_events(params, context, plan, &tables.event, registration)? {
        sqlx::query_with(&event_sql, event_args).execute(&mut *job_tx).await.context("inserting events")?;
    }
    let (job_sender, job_receiver) = mpsc::channel::<EncodedChunk>(3);
    let (step_sender, step_receiver) = mpsc::channel::<EncodedChunk>(3);
    let job_producer = {
        let (context, plan) = (Arc::clone(context), Arc::clone(plan));
        tokio::task::spawn_blocking(move || produce_jobs(&context, &plan, base, &job_sender))
    };
    let step_producer = {
        let (params, context, plan) = (params.clone(), Arc::clone(context), Arc::clone(plan));
        tokio::task::spawn_blocking(move || produce_steps(&params, &context, &plan, base, &step_sender))
    };
    let (jobs, steps) = match step_tx {
        Some(step_tx) => {
            bulk_session(step_tx).await?;
            let (first, second) = tokio::join!(
                insert_stream(job_tx, &tables.job, JOB_COLS, JOB_TUPLE, job_receiver),
                insert_stream(step_tx, &tables.step, STEP_COLS, STEP_TUPLE, step_receiver)
            );
            (first?, second?)
        }
        None => {
            let first = insert_stream(job_tx, &tables.job, JOB_COLS, JOB_TUPLE, job_receiver).await?;
            let second = insert_stream(job_tx, &tables.step, STEP_COLS, STEP_TUPLE, step_receiver).await?;
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
    tables: Tables,
    base: u64,
    /// Per table, the secondary indexes dropped for the load, as `ALTER TABLE` adds them back.
    deferred: Vec<(String, Vec<String>)>,
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
    pub(super) async fn start(pool: &MySqlPool, cluster: &str, clear: bool) -> Result<Self> {
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
        for table in [&tables.job, &tables.step].into_iter().filter(|_| clear) {
            let indexes = secondary_indexes(pool, table).await?;
            if indexes.is_empty() {
                continue;
            }
            let drops: Vec<String> = indexes.iter().map(|(name, _)| format!("DROP INDEX `{name}`")).collect();
            // DDL through the text protocol. One statement: the indexes all go, or none.
            let dropped = sqlx::raw_sql(&format!("ALTER TABLE `{table}` {}", drops.join(", "))).execute(pool).await;
            match dropped {
                Ok(_) => deferred.push((table.clone(), indexes.into_iter().map(|(_, clause)| clause).collect())),
                // A seeder granted no ALTER and INDEX loads through the indexes, only slower.
                Err(error) => tracing::warn!(table, %error, "history: loading with the table's indexes"),
            }
        }
        Ok(SpanWriter { pool: pool.clone(), tables, base, deferred })
    }

    /// Builds the indexes [`SpanWriter::start`] dropped, one `ALTER TABLE` per table (also after a
    /// failed load, so that slurmdbd's tables keep their indexes).
    pub(super) async fn finish(&mut self) -> Result<()> {
        for (table, clauses) in std::mem::take(&mut self.deferred) {
            let started = Instant::now();
            sqlx::raw_sql(&format!("ALTER TABLE `{table}` {}", clauses.join(", ")))
                .execute(&self.pool)
                .await
                .with_context(|| format!("building the indexes of {table} again"))?;
            tracing::info!(
                table,
                indexes = clauses.len(),
                secs = started.elapsed().as_secs_f64(),
                "history: indexes built"
            );
        }
        Ok(())
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
        let (pool, tables, base) = (self.pool.clone(), self.tables.clone(), self.base);
        self.base += plan.jobs.len() as u64;
        Ok(tokio::spawn(async move {
            let mut job_tx = pool.begin().await?;
            let mut step_tx = pool.begin().await?;
            let (jobs, steps) =
                insert_plan(&mut job_tx, Some(&mut step_tx), &tables, &params, &context, &plan, base, registration)
                    .await?;
            job_tx.commit().await?;
            step_tx.commit().await?;
            Ok((jobs, steps, plan.events.len() as u64 + u64::from(registration)))
        }))
    }
}
