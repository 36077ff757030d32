//! Realistic, deterministic job history for a SAKURAONE-like GPU cluster.
//!
//! [`generate`] replaces the job, step and event rows of one cluster in slurmdbd's database
//! (`<cluster>_job_table`, `<cluster>_step_table`, `<cluster>_event_table`) with a simulated
//! history: nodes `gpu[001-100]` (10 racks of 10, 8 GPUs, 112 CPUs, 2,000,000 MB each),
//! partitions `gpu` (default) and `debug`, users and accounts taken from the cluster's
//! association table, TRES and QOS ids from `tres_table` / `qos_table`.
//!
//! The history is scheduled, not just sampled: every node has 8 GPU slots (each carrying
//! 12 CPUs and 230,000 MB) plus 4 CPU-only slots (4 CPUs, 40,000 MB each) with free-at
//! times; jobs are placed FIFO in submit order at the earliest time their resources are
//! free, multi-node jobs take whole nodes (rack-aware), no job runs on a node inside one of
//! its drain/down events, and jobs running on a node when it goes DOWN end in NODE_FAIL (or
//! are requeued when they asked for `--requeue`). So no GPU, CPU or MB is ever allocated
//! twice and `sum(alloc) <= capacity` holds on every node at every instant.
//!
//! Two jobs are planted in the last 40 hours so that the demo's telemetry always shows both kinds of
//! failure: a two-node training run killed (NODE_FAIL) by an "Xid 79" DOWN event put on its first node
//! while it runs, and a 4-GPU run that dies of SIGSEGV (FAILED) with nothing wrong around it. The summary
//! names them.
//!
//! A history longer than 30 days (years: `--days 1825 --jobs 10000000` is five years of this cluster) is
//! simulated and written span by span, 30 days at a time, with the scheduler's state carried across
//! (`spans.rs`, which also says what is simplified in the older spans); 30 days or fewer are one span,
//! whose rows stay those the seed always gave.
//!
//! Column encodings follow slurmdbd 22.05 as observed in the lab (see
//! `shared/reference/slurm-lab.md` §5): raw wait-status exit codes, `mem_req` bit 63 for
//! per-CPU memory, `timelimit` in minutes with the INFINITE / NO_VAL / 525600 sentinels,
//! `id=count` TRES strings in ascending id order, array and het-job encodings, step ids
//! -5 (batch), -4 (extern) and >= 0 (srun).
//!
//! UIDs: taken from `getent passwd <user>` where the user exists on the machine running the
//! generator (alice=1001, bob=1002, carol=1003, dave=1004 in the lab); otherwise a fixed
//! number: `uNN` -> 2000+NN, alice/bob/carol/dave -> 1001..1004, anything else -> 3000+i.
//! gid = the passwd gid, else = uid.

mod catalogue;
mod context;
mod continuation;
mod encoding;
mod events;
pub mod live;
mod load;
mod planted;
mod random;
mod rows;
mod schedule;
mod scheduler;
mod scripts;
mod spans;
mod steps;
mod submissions;
#[cfg(test)]
mod tests;
mod workload;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use chrono::{DateTime, Utc};
use sqlx::MySqlPool;

use context::load_context;
pub use load::Loader;
use schedule::build_plan;
use write::write_plan;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryParams {
    /// Slurm cluster name (table prefix), `[a-z0-9_]+`, usually `sakura`.
    pub cluster: String,
    /// The history ends here (usually now): jobs still running / pending at `end` are
    /// written as RUNNING / PENDING, events still open have `time_end = 0`.
    pub end: DateTime<Utc>,
    /// Length of the history window in days.
    pub days: u32,
    /// Minimum number of job rows (array tasks count one each).
    pub n_jobs: u32,
    /// Number of nodes `gpu001..`.
    pub n_nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// RNG seed; the same params give the same rows.
    pub seed: u64,
}

/// The defaults: `sakura`, 30 days, 200,000 jobs, 100 nodes x 8 GPUs.
pub fn default_params(end: DateTime<Utc>) -> HistoryParams {
    HistoryParams {
        cluster: "sakura".to_string(),
        end,
        days: 30,
        n_jobs: 200_000,
        n_nodes: 100,
        gpus_per_node: 8,
        seed: 0x5a4b_0001,
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Default)]
pub struct HistoryStats {
    pub cluster: String,
    /// Rows written to `<cluster>_job_table` (array tasks, het components, requeued
    /// attempts and pending array meta rows count one each).
    pub jobs: u64,
    /// Rows written to `<cluster>_step_table`.
    pub steps: u64,
    /// Rows written to `<cluster>_event_table` (including the registration row).
    pub events: u64,
    /// Job rows per state name (`COMPLETED`, `REQUEUE`, ...).
    pub per_state: BTreeMap<String, u64>,
    /// GPU-hours allocated inside the window (running jobs counted up to `end`).
    pub gpu_hours: f64,
    /// GPUs x hours of the window.
    pub capacity_gpu_hours: f64,
    /// Wall time of the scheduling simulation.
    pub simulate_secs: f64,
    /// Wall time of the whole call (lookups, simulation, delete + insert).
    pub elapsed_secs: f64,
    /// The multi-node training job killed by the node's "Xid 79" DOWN event in the last ~40 h (NODE_FAIL).
    pub xid_victim: Option<u32>,
    /// The GPU job that crashed on its own (FAILED, SIGSEGV) in the last ~40 h, with no infrastructure fault.
    pub app_crash: Option<u32>,
}

impl fmt::Display for HistoryStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let util = if self.capacity_gpu_hours > 0.0 { 100.0 * self.gpu_hours / self.capacity_gpu_hours } else { 0.0 };
        writeln!(
            f,
            "cluster {}: {} jobs, {} steps, {} events written in {:.1} s (simulation {:.2} s)",
            self.cluster, self.jobs, self.steps, self.events, self.elapsed_secs, self.simulate_secs
        )?;
        writeln!(f, "GPU-hours {:.0} of {:.0} ({util:.1} %)", self.gpu_hours, self.capacity_gpu_hours)?;
        let states: Vec<String> = self.per_state.iter().map(|(state, count)| format!("{state}={count}")).collect();
        writeln!(f, "states: {}", states.join(" "))?;
        let id = |job: Option<u32>| job.map_or_else(|| "none".to_string(), |id| id.to_string());
        write!(
            f,
            "killed by Xid 79: job {}; application crash (SIGSEGV): job {}",
            id(self.xid_victim),
            id(self.app_crash)
        )
    }
}

/// Replace the cluster's job, step and event rows with a simulated history.
///
/// Needs SELECT on `tres_table`, `qos_table`, `<cluster>_assoc_table` and
/// SELECT/INSERT/DELETE on `<cluster>_{job,step,event}_table`. Everything is written in one
/// transaction: readers see the old history until the new one is committed.
///
/// A history longer than [`spans::SPAN_DAYS`] days is simulated and written span by span (see `spans.rs`):
/// each span is committed on its own, so readers see it grow from its oldest month.
pub async fn generate(pool: &MySqlPool, loader: &Loader, params: &HistoryParams) -> Result<HistoryStats> {
    let started = Instant::now();
    validate(params)?;
    let context = load_context(pool, &params.cluster).await?;
    if params.days > spans::SPAN_DAYS {
        return spans::generate_spans(pool, loader, params, context, spans::SpansStart::FRESH).await;
    }
    let simulation_started = Instant::now();
    let plan = Arc::new(build_plan(params, &context)?);
    let simulate_secs = simulation_started.elapsed().as_secs_f64();
    tracing::info!(secs = simulate_secs, jobs = plan.jobs.len(), "history: simulated");
    let context = Arc::new(context);
    let (jobs, steps, events) = write_plan(loader, params, &context, &plan).await?;
    let mut stats = plan.stats(params);
    stats.jobs = jobs;
    stats.steps = steps;
    stats.events = events;
    stats.simulate_secs = simulate_secs;
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(stats)
}

/// Adds `params.days` of history before the cluster's existing one (`params.end` is ignored): the new
/// window ends where the oldest existing job was submitted, its job ids follow the existing ones, and
/// nothing is deleted. Grows a long history without taking its recent part away while it is written;
/// runs that cross the seam may share GPUs with the existing history's first jobs (the two were
/// simulated apart).
pub async fn generate_before_existing(
    pool: &MySqlPool,
    loader: &Loader,
    params: &HistoryParams,
) -> Result<HistoryStats> {
    validate(params)?;
    let context = load_context(pool, &params.cluster).await?;
    let bounds: (Option<i64>, Option<u32>) = sqlx::query_as(&format!(
        "SELECT CAST(MIN(time_submit) AS SIGNED), CAST(MAX(id_job) AS UNSIGNED) FROM `{}_job_table`",
        params.cluster
    ))
    .fetch_one(pool)
    .await?;
    let (Some(oldest), Some(last_id)) = bounds else {
        anyhow::bail!("cluster {} has no history to add to", params.cluster);
    };
    let end = DateTime::from_timestamp(oldest - oldest.rem_euclid(3600), 0).unwrap_or(params.end);
    let params = HistoryParams { end, ..params.clone() };
    let start = spans::SpansStart { first_id: last_id + 1, ends_now: false, clear: false };
    spans::generate_spans(pool, loader, &params, context, start).await
}

/// What [`rehearse`] found: the plan's summary and the digest of the rows it would write.
#[derive(Debug, Clone)]
pub struct Rehearsal {
    /// The plan's summary (rows not written: `steps` is 0, `jobs` and `events` count the plan's rows).
    pub stats: HistoryStats,
    /// SHA-256 of every row the plan would write, in hex: the same parameters always give the same digest.
    pub digest: String,
    /// Mean queue wait in minutes per day of the window: (day since the start, single-node, multi-node).
    pub wait_minutes_per_day: Vec<(i64, f64, f64)>,
}

/// Builds the whole history against a synthetic cluster (14 users in 7 accounts, the lab's TRES ids)
/// without a database: for timing the simulation and for checking that a change left the rows alone.
pub fn rehearse(params: &HistoryParams) -> Result<Rehearsal> {
    validate(params)?;
    let context = context::synthetic_context();
    if params.days > spans::SPAN_DAYS {
        let (stats, digest, per_day) = spans::rehearse_spans(params, &context)?;
        return Ok(Rehearsal { stats, digest, wait_minutes_per_day: mean_waits(&per_day) });
    }
    let simulation_started = Instant::now();
    let plan = build_plan(params, &context)?;
    let mut stats = plan.stats(params);
    stats.simulate_secs = simulation_started.elapsed().as_secs_f64();
    let digest = write::rows_digest(params, &context, &plan)?;
    stats.elapsed_secs = simulation_started.elapsed().as_secs_f64();
    let mut per_day = BTreeMap::new();
    add_waits(&mut per_day, &plan, plan.start);
    Ok(Rehearsal { stats, digest, wait_minutes_per_day: mean_waits(&per_day) })
}

/// Sums and counts of queue waits per day since a history's start: (single-node sum, count, multi-node
/// sum, count).
type WaitSums = BTreeMap<i64, (f64, f64, f64, f64)>;

/// Adds `plan`'s queue waits to the sums of their days since `history_start`.
fn add_waits(per_day: &mut WaitSums, plan: &rows::Plan, history_start: i64) {
    for job in plan.jobs.iter().filter(|job| job.started()) {
        let day = per_day.entry((job.t_submit - history_start) / 86_400).or_default();
        let wait_minutes = (job.t_start - job.t_submit) as f64 / 60.0;
        if job.nodes.len() > 1 {
            day.2 += wait_minutes;
            day.3 += 1.0;
        } else {
            day.0 += wait_minutes;
            day.1 += 1.0;
        }
    }
}

/// Mean waits per day from [`add_waits`]' sums.
fn mean_waits(per_day: &WaitSums) -> Vec<(i64, f64, f64)> {
    per_day.iter().map(|(day, sums)| (*day, sums.0 / sums.1.max(1.0), sums.2 / sums.3.max(1.0))).collect()
}

const NO_VAL: u32 = 0xFFFF_FFFE;
const INFINITE: u32 = 0xFFFF_FFFF;
const NO_VAL64: u64 = 0xFFFF_FFFF_FFFF_FFFE;
const MEM_PER_CPU: u64 = 0x8000_0000_0000_0000;
const UNLIMITED_BACKFILL: u32 = 525_600;

const NODE_CPUS: u32 = 112;
const NODE_MEM: u64 = 2_000_000;
const CPU_SLOTS: usize = 4;
const CPUS_PER_CPU_SLOT: u32 = 4;
const MEM_PER_CPU_SLOT: u64 = 40_000;
const DEF_MEM_PER_CPU: u64 = 10_000;
const RACK: usize = 10;
const FIRST_JOB_ID: u32 = 1_000_001;
const PRIO_BASE: u32 = 4_294_901_760;
const TRAIN_MEM_PER_NODE: u64 = 1_843_200; // --mem=1800G

const JS_PENDING: u32 = 0;
const JS_RUNNING: u32 = 1;
const JS_COMPLETE: u32 = 3;
const JS_CANCELLED: u32 = 4;
const JS_FAILED: u32 = 5;
const JS_TIMEOUT: u32 = 6;
const JS_NODE_FAIL: u32 = 7;
const JS_OOM: u32 = 11;
const JS_REQUEUE: u32 = 0x400;

const NS_DOWN: u32 = 1;
const NS_IDLE: u32 = 2;
const NS_DRAIN: u32 = 0x200;
const NS_NO_RESPOND: u32 = 0x800;

const NICE_LIMITS: [u32; 22] =
    [10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 600, 720, 960, 1440, 2160, 2880, 4320, 5760, 7200, 10080];

fn state_name(state: u32) -> &'static str {
    if state & JS_REQUEUE != 0 {
        return "REQUEUE";
    }
    match state & 0xff {
        0 => "PENDING",
        1 => "RUNNING",
        2 => "SUSPENDED",
        3 => "COMPLETED",
        4 => "CANCELLED",
        5 => "FAILED",
        6 => "TIMEOUT",
        7 => "NODE_FAIL",
        8 => "PREEMPTED",
        9 => "BOOT_FAIL",
        10 => "DEADLINE",
        11 => "OUT_OF_MEMORY",
        _ => "UNKNOWN",
    }
}

fn validate(params: &HistoryParams) -> Result<()> {
    ensure!(
        !params.cluster.is_empty()
            && params.cluster.len() <= 64
            && params.cluster.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_'),
        "cluster name {:?} must match [a-z0-9_]+",
        params.cluster
    );
    ensure!((1..=3650).contains(&params.days), "days must be 1..=3650");
    // Ten million jobs is five years of a 100-node cluster; ids stay far below u32's end.
    ensure!((1..=20_000_000).contains(&params.n_jobs), "n_jobs must be 1..=20000000");
    ensure!((2..=9999).contains(&params.n_nodes), "n_nodes must be 2..=9999");
    ensure!((1..=16).contains(&params.gpus_per_node), "gpus_per_node must be 1..=16");
    Ok(())
}
