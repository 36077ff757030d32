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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::mysql::{MySql, MySqlArguments, MySqlConnection};
use sqlx::{Arguments as _, MySqlPool, Row};
use tokio::sync::mpsc;

// ---------------------------------------------------------------------------------------
// public API
// ---------------------------------------------------------------------------------------

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
        let states: Vec<String> = self.per_state.iter().map(|(k, v)| format!("{k}={v}")).collect();
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
pub async fn generate(pool: &MySqlPool, params: &HistoryParams) -> Result<HistoryStats> {
    let t0 = Instant::now();
    validate(params)?;
    let ctx = load_context(pool, &params.cluster).await?;
    let ts = Instant::now();
    let plan = Arc::new(build_plan(params, &ctx)?);
    let simulate_secs = ts.elapsed().as_secs_f64();
    tracing::info!(secs = simulate_secs, jobs = plan.jobs.len(), "history: simulated");
    let ctx = Arc::new(ctx);
    let (jobs, steps, events) = write_plan(pool, params, &ctx, &plan).await?;
    let mut stats = plan.stats(params);
    stats.jobs = jobs;
    stats.steps = steps;
    stats.events = events;
    stats.simulate_secs = simulate_secs;
    stats.elapsed_secs = t0.elapsed().as_secs_f64();
    Ok(stats)
}

// ---------------------------------------------------------------------------------------
// constants and Slurm encodings
// ---------------------------------------------------------------------------------------

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

fn validate(p: &HistoryParams) -> Result<()> {
    ensure!(
        !p.cluster.is_empty()
            && p.cluster.len() <= 64
            && p.cluster.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "cluster name {:?} must match [a-z0-9_]+",
        p.cluster
    );
    ensure!((1..=3650).contains(&p.days), "days must be 1..=3650");
    ensure!((1..=5_000_000).contains(&p.n_jobs), "n_jobs must be 1..=5000000");
    ensure!((2..=9999).contains(&p.n_nodes), "n_nodes must be 2..=9999");
    ensure!((1..=16).contains(&p.gpus_per_node), "gpus_per_node must be 1..=16");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// database context
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct TresIds {
    cpu: u32,
    mem: u32,
    energy: u32,
    node: u32,
    billing: u32,
    disk: u32,
    vmem: u32,
    pages: u32,
    gpu: u32,
}

#[derive(Debug, Clone)]
struct UserAssoc {
    id_assoc: u32,
    user: String,
    acct: String,
    is_def: bool,
    uid: u32,
    gid: u32,
}

#[derive(Debug, Clone)]
struct Ctx {
    tres: TresIds,
    qos_normal: u32,
    qos_high: Option<u32>,
    qos_debug: Option<u32>,
    qos_low: Option<u32>,
    users: Vec<UserAssoc>,
}

async fn load_context(pool: &MySqlPool, cluster: &str) -> Result<Ctx> {
    let rows = sqlx::query(
        "SELECT CAST(id AS UNSIGNED) AS id, CAST(type AS CHAR) AS t, CAST(name AS CHAR) AS n FROM tres_table WHERE deleted = 0",
    )
    .fetch_all(pool)
    .await
    .context("reading tres_table")?;
    let mut tres_map: BTreeMap<(String, String), u32> = BTreeMap::new();
    for r in &rows {
        let id: u64 = r.try_get("id")?;
        let id = u32::try_from(id)?;
        let t: String = r.try_get("t")?;
        let n: String = r.try_get("n")?;
        tres_map.insert((t, n), id);
    }
    let get = |t: &str, n: &str| -> Result<u32> {
        tres_map.get(&(t.to_string(), n.to_string())).copied().with_context(|| format!("tres_table has no {t}/{n}"))
    };
    let tres = TresIds {
        cpu: get("cpu", "")?,
        mem: get("mem", "")?,
        energy: get("energy", "")?,
        node: get("node", "")?,
        billing: get("billing", "")?,
        disk: get("fs", "disk")?,
        vmem: get("vmem", "")?,
        pages: get("pages", "")?,
        gpu: get("gres", "gpu")?,
    };

    let rows = sqlx::query(
        "SELECT CAST(id AS UNSIGNED) AS id, CAST(name AS CHAR) AS n FROM qos_table WHERE deleted = 0 ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .context("reading qos_table")?;
    let mut qos: Vec<(u32, String)> = Vec::new();
    for r in &rows {
        let id: u64 = r.try_get("id")?;
        qos.push((u32::try_from(id)?, r.try_get("n")?));
    }
    let find = |name: &str| qos.iter().find(|(_, n)| n == name).map(|(i, _)| *i);
    let qos_normal = find("normal").or_else(|| qos.first().map(|q| q.0)).context("qos_table is empty")?;

    let sql = format!(
        "SELECT CAST(id_assoc AS UNSIGNED) AS id_assoc, CAST(user AS CHAR) AS u, CAST(acct AS CHAR) AS a, \
         CAST(is_def AS SIGNED) AS is_def \
         FROM `{cluster}_assoc_table` \
         WHERE deleted = 0 AND `partition` = '' AND user <> '' AND user <> 'root' ORDER BY id_assoc"
    );
    let rows = sqlx::query(&sql).fetch_all(pool).await.with_context(|| format!("reading {cluster}_assoc_table"))?;
    let mut users = Vec::new();
    for r in &rows {
        let is_def: i64 = r.try_get("is_def")?;
        let id_assoc: u64 = r.try_get("id_assoc")?;
        users.push(UserAssoc {
            id_assoc: u32::try_from(id_assoc)?,
            user: r.try_get("u")?,
            acct: r.try_get("a")?,
            is_def: is_def != 0,
            uid: 0,
            gid: 0,
        });
    }
    ensure!(!users.is_empty(), "{cluster}_assoc_table has no user associations");
    assign_uids(&mut users);
    Ok(Ctx {
        tres,
        qos_normal,
        qos_high: find("high"),
        qos_debug: find("debug"),
        qos_low: find("low").or_else(|| find("scavenger")),
        users,
    })
}

fn assign_uids(users: &mut [UserAssoc]) {
    let mut names: Vec<String> = users.iter().map(|u| u.user.clone()).collect();
    names.sort();
    names.dedup();
    let mut found: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    if let Ok(out) = std::process::Command::new("getent").arg("passwd").args(&names).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() >= 4
                && let (Ok(uid), Ok(gid)) = (f[2].parse::<u32>(), f[3].parse::<u32>())
            {
                found.insert(f[0].to_string(), (uid, gid));
            }
        }
    }
    for u in users.iter_mut() {
        let (uid, gid) = found.get(&u.user).copied().unwrap_or_else(|| {
            let uid = fallback_uid(&u.user, &names);
            (uid, uid)
        });
        u.uid = uid;
        u.gid = gid;
    }
}

fn fallback_uid(name: &str, all: &[String]) -> u32 {
    match name {
        "alice" => 1001,
        "bob" => 1002,
        "carol" => 1003,
        "dave" => 1004,
        _ => {
            if let Some(n) = name.strip_prefix('u').and_then(|d| d.parse::<u32>().ok())
                && n < 1000
            {
                return 2000 + n;
            }
            3000 + all.iter().position(|a| a == name).unwrap_or(0) as u32
        }
    }
}

// ---------------------------------------------------------------------------------------
// small helpers: randomness, formatting
// ---------------------------------------------------------------------------------------

fn unif(r: &mut StdRng) -> f64 {
    r.gen_range(0.0..1.0)
}

fn normal(r: &mut StdRng) -> f64 {
    let u1: f64 = r.gen_range(f64::EPSILON..1.0);
    let u2 = unif(r);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn lognormal(r: &mut StdRng, median: f64, sigma: f64) -> f64 {
    median * (sigma * normal(r)).exp()
}

fn chance(r: &mut StdRng, p: f64) -> bool {
    unif(r) < p
}

fn pick<T: Copy>(r: &mut StdRng, items: &[(T, f64)]) -> T {
    let total: f64 = items.iter().map(|i| i.1).sum();
    let mut x = unif(r) * total;
    for (v, w) in items {
        if x < *w {
            return *v;
        }
        x -= w;
    }
    items[items.len() - 1].0
}

fn nice_limit_at_least(minutes: f64) -> u32 {
    NICE_LIMITS.iter().copied().find(|&l| f64::from(l) >= minutes).unwrap_or(10080)
}

fn fmt_time_limit(minutes: u32) -> String {
    let d = minutes / 1440;
    let h = (minutes % 1440) / 60;
    let m = minutes % 60;
    if d > 0 { format!("{d}-{h:02}:{m:02}:00") } else { format!("{h:02}:{m:02}:00") }
}

fn runs(sorted: &[u16]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &n in sorted {
        let n = u32::from(n);
        match out.last_mut() {
            Some((_, b)) if *b + 1 == n => *b = n,
            _ => out.push((n, n)),
        }
    }
    out
}

/// Compressed hostlist of 0-based node indices (`gpu[001-004,010]`, `gpu005`).
fn hostlist(nodes: &[u16], width: usize) -> String {
    match nodes.len() {
        0 => "None assigned".to_string(),
        1 => format!("gpu{:0width$}", u32::from(nodes[0]) + 1),
        _ => {
            let mut s = String::from("gpu[");
            for (i, (a, b)) in runs(nodes).into_iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                if a == b {
                    let _ = write!(s, "{:0width$}", a + 1);
                } else {
                    let _ = write!(s, "{:0width$}-{:0width$}", a + 1, b + 1);
                }
            }
            s.push(']');
            s
        }
    }
}

/// Bit-index ranges (`0-3,9`) of 0-based node indices, as in `node_inx`.
fn node_inx(nodes: &[u16]) -> String {
    let mut s = String::new();
    for (i, (a, b)) in runs(nodes).into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        if a == b {
            let _ = write!(s, "{a}");
        } else {
            let _ = write!(s, "{a}-{b}");
        }
    }
    s
}

/// Slurm's hex bitmap (`0x3FF`): bit i = array task i, most significant nibble first.
fn hex_bitmap(bits: &[bool]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let nibbles = bits.len().div_ceil(4).max(1);
    let mut s = String::from("0x");
    for nib in (0..nibbles).rev() {
        let mut v = 0usize;
        for b in 0..4 {
            let i = nib * 4 + b;
            if i < bits.len() && bits[i] {
                v |= 1 << b;
            }
        }
        s.push(char::from(HEX[v]));
    }
    s
}

/// `id=count` list in ascending id order.
fn tres_str(pairs: &mut [(u32, u64)]) -> String {
    pairs.sort_unstable_by_key(|p| p.0);
    let mut s = String::new();
    for (i, (id, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{id}={v}");
    }
    s
}

// ---------------------------------------------------------------------------------------
// workload model
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cat {
    Short = 0,
    Array = 1,
    Long = 2,
    Multi = 3,
    Cpu = 4,
    Het = 5,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// k GPUs on one node.
    Gpu(u32),
    /// k CPU slots (4 CPUs each) on one node.
    Cpu(u32),
    /// Whole nodes (exclusive).
    Whole(u32),
    /// Het job: component 0 = one CPU slot, component 1 = k GPUs.
    Het(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailKind {
    PyErr,
    Exit2,
    Segv,
    NcclAbort,
    Sigkill,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Complete,
    Fail(FailKind),
    Cancel { by_admin: bool },
    Oom,
}

/// How the job's work is launched (decides its steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// sbatch script that runs `n` srun steps one after the other.
    Srun(u8),
    /// sbatch script doing the work itself (no srun step).
    BatchOnly,
    /// `srun --pty bash`: no batch step, step 0 is the shell.
    Interactive,
}

/// Resource-usage profile of the step doing the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prof {
    PyGpu,
    Train,
    Nccl,
    CpuWork,
    Shell,
    Notebook,
}

/// Final state of one job row.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Pending { held: bool },
    Running,
    Completed,
    Failed(FailKind),
    Cancelled { uid: u32 },
    CancelledPending { uid: u32 },
    Timeout,
    Oom,
    NodeFail,
    Requeued,
}

#[derive(Debug, Clone)]
struct Tpl {
    name: String,
    project: String,
    step: &'static str,
    cmd: String,
    script: String,
}

#[derive(Debug, Clone)]
struct ArrSpec {
    n: u32,
    throttle: u32,
    tasks: Vec<(f64, Fate, f64)>,
}

#[derive(Debug, Clone)]
struct Sub {
    t: i64,
    lat: i64,
    cat: Cat,
    ua: usize,
    shape: Shape,
    debug: bool,
    qos: u32,
    tpl: Arc<Tpl>,
    mode: Mode,
    prof: Prof,
    tasks_per_node: u32,
    /// cpus per GPU (Gpu / Het) or per CPU slot.
    cpus_req: u32,
    /// `--mem` per node in MB, or None for per-CPU memory.
    mem_node: Option<u64>,
    mem_per_cpu: u64,
    /// limit in minutes, None = no --time.
    limit: Option<u32>,
    factor: f64,
    d_nat: f64,
    fate: Fate,
    frac: f64,
    patience: Option<i64>,
    requeue: bool,
    held: bool,
    /// production multi-node run: duration not scaled by the load target
    prod: bool,
    arr: Option<Box<ArrSpec>>,
    submit_line: Arc<str>,
    work_dir: Arc<str>,
    attempt: u8,
    /// One of the planted jobs the telemetry's fault stories hang on.
    special: Option<Special>,
}

/// Jobs planted into the last hours of the history so that the demo always shows both kinds of failure
/// side by side: one killed by the infrastructure, one that crashed on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    /// A two-node training run; an "Xid 79" DOWN event is put on its first node while it runs.
    XidVictim,
    /// A 4-GPU job that dies of SIGSEGV (a CUDA illegal address: XID 31 in the telemetry).
    AppCrash,
}

fn family(acct: &str) -> &'static str {
    match acct {
        "llm" => "llm",
        "vision" | "ml-vision" => "vision",
        "bio" => "bio",
        "climate" => "climate",
        "physics" => "physics",
        _ => "ml",
    }
}

fn affinity(acct: &str, cat: Cat) -> f64 {
    let a: [f64; 6] = match family(acct) {
        "llm" => [1.2, 0.6, 1.5, 6.0, 0.6, 2.0],
        "vision" => [1.1, 1.8, 1.1, 0.7, 0.4, 0.5],
        "bio" => [0.8, 1.5, 0.8, 0.25, 2.5, 0.2],
        "climate" => [0.6, 1.0, 1.0, 0.5, 3.0, 0.2],
        "physics" => [0.8, 1.0, 1.0, 0.3, 2.0, 0.2],
        _ => [1.5, 1.0, 1.5, 1.5, 0.5, 1.0],
    };
    a[cat as usize]
}

fn ckpt(r: &mut StdRng) -> u32 {
    200 * r.gen_range(1..=100)
}

/// Job name, project directory, step name and command for a job of this category.
fn template(r: &mut StdRng, fam: &str, cat: Cat, interactive: bool, jupyter: bool, smoke: bool) -> Tpl {
    let t = |name: String, project: &str, step: &'static str, cmd: String, script: &str| Tpl {
        name,
        project: project.to_string(),
        step,
        cmd,
        script: script.to_string(),
    };
    if interactive {
        return t("bash".into(), "scratch", "bash", "bash".into(), "");
    }
    if jupyter {
        return t(
            "jupyter".into(),
            "notebooks",
            "jupyter-lab",
            "jupyter lab --no-browser --ip=0.0.0.0 --port=8888".into(),
            "jupyter.sbatch",
        );
    }
    match cat {
        Cat::Short => {
            let n = ckpt(r);
            let opts: [(&str, &str, &'static str, String); 6] = match fam {
                "llm" => [
                    ("eval_ckpt_N", "llama3-8b", "python", format!("python eval.py --ckpt checkpoints/iter_{n:07}")),
                    (
                        "lm-eval-harness",
                        "evals",
                        "python",
                        "python -m lm_eval --model hf --tasks mmlu,gsm8k --batch_size 16".into(),
                    ),
                    (
                        "vllm-bench",
                        "serving",
                        "python",
                        "python benchmark_throughput.py --model Qwen2.5-7B --tp 1".into(),
                    ),
                    ("convert_hf_ckpt", "llama3-8b", "python", format!("python convert_to_hf.py --iter {n}")),
                    (
                        "debug-fsdp",
                        "llama3-8b",
                        "torchrun",
                        "torchrun --nproc_per_node=gpu train.py --debug --max_steps 50".into(),
                    ),
                    ("tokenizer-test", "tokenizer", "python", "python test_tokenizer.py --vocab 65536".into()),
                ],
                "vision" => [
                    ("eval_ckpt_N", "vit-l", "python", format!("python eval.py --ckpt out/ckpt_{n}.pt")),
                    (
                        "resnet50-debug",
                        "resnet50",
                        "python",
                        "python train.py --arch resnet50 --epochs 1 --debug".into(),
                    ),
                    ("yolov8-val", "yolov8", "yolo", "yolo val model=runs/train/weights/best.pt data=coco.yaml".into()),
                    ("sam-infer", "sam", "python", "python infer.py --checkpoint sam_vit_h.pth".into()),
                    ("coco-eval", "detr", "python", format!("python eval_coco.py --ckpt ckpt_{n}.pth")),
                    ("diffusion-sample", "sdxl", "python", "python sample.py --steps 50 --n 64".into()),
                ],
                "bio" => [
                    (
                        "alphafold2-predict",
                        "alphafold",
                        "python",
                        "python run_alphafold.py --fasta_paths=query.fasta --model_preset=monomer".into(),
                    ),
                    ("esmfold-infer", "esm", "python", "python esmfold_infer.py -i seqs.fasta -o pdb/".into()),
                    ("colabfold", "colabfold", "colabfold_batch", "colabfold_batch input.fasta out/".into()),
                    (
                        "rfdiffusion-test",
                        "rfdiffusion",
                        "python",
                        "python run_inference.py inference.num_designs=4".into(),
                    ),
                    ("eval_ckpt_N", "esm2", "python", format!("python eval.py --ckpt ckpt_{n}.pt")),
                    ("gromacs-test", "md", "gmx_mpi", "gmx_mpi mdrun -deffnm test -nb gpu -nsteps 10000".into()),
                ],
                "climate" => [
                    ("fourcastnet-infer", "fourcastnet", "python", "python inference.py --config afno_backbone".into()),
                    ("era5-eval", "era5", "python", "python evaluate.py --year 2020".into()),
                    ("graphcast-rollout", "graphcast", "python", "python rollout.py --steps 40".into()),
                    ("eval_ckpt_N", "fourcastnet", "python", format!("python eval.py --ckpt ckpt_{n}.tar")),
                    ("wrf-gpu-test", "wrf", "wrf.exe", "wrf.exe".into()),
                    ("unet-debug", "downscale", "python", "python train.py --debug".into()),
                ],
                "physics" => [
                    ("lqcd-test", "lqcd", "hmc", "./hmc --input test.xml".into()),
                    ("pinn-debug", "pinn", "python", "python train_pinn.py --epochs 10".into()),
                    ("lammps-gpu-test", "lammps", "lmp", "lmp -k on g 1 -sf kk -in in.lj".into()),
                    ("cuda-bench", "bench", "nvbandwidth", "nvbandwidth".into()),
                    ("eval_ckpt_N", "pinn", "python", format!("python eval.py --ckpt ckpt_{n}.pt")),
                    ("qmc-test", "qmc", "qmcpack", "qmcpack input.xml".into()),
                ],
                _ => [
                    ("eval_ckpt_N", "moe", "python", format!("python eval.py --ckpt ckpt_{n}.pt")),
                    ("rlhf-debug", "rlhf", "python", "python ppo.py --debug --steps 20".into()),
                    ("nsys-profile", "profiling", "nsys", "nsys profile -o prof python train.py --max_steps 20".into()),
                    (
                        "sanity-check",
                        "infra",
                        "python",
                        "python -c import torch; print(torch.cuda.device_count())".into(),
                    ),
                    ("gnn-debug", "gnn", "python", "python train_gnn.py --epochs 2".into()),
                    ("mmlu-eval", "evals", "python", "python -m lm_eval --tasks mmlu".into()),
                ],
            };
            let (name, proj, step, cmd) = opts[r.gen_range(0..opts.len())].clone();
            let name = if name == "eval_ckpt_N" { format!("eval_ckpt_{n}") } else { name.to_string() };
            let script = format!("{}.sh", proj.replace('-', "_"));
            t(name, proj, step, cmd, &script)
        }
        Cat::Array => {
            let (name, step, cmd) = match fam {
                "llm" => one3(
                    r,
                    &[
                        ("hpo-lr-sweep", "python", "python train.py --lr_idx $SLURM_ARRAY_TASK_ID"),
                        ("eval-shard", "python", "python eval_shard.py --shard $SLURM_ARRAY_TASK_ID"),
                        ("prompt-sweep", "python", "python gen.py --prompt_set $SLURM_ARRAY_TASK_ID"),
                    ],
                ),
                "vision" => one3(
                    r,
                    &[
                        (
                            "resnet50-sweep",
                            "python",
                            "python train.py --arch resnet50 --cfg sweep/$SLURM_ARRAY_TASK_ID.yaml",
                        ),
                        ("augment-ablation", "python", "python train.py --aug $SLURM_ARRAY_TASK_ID"),
                        ("vit-hpo", "python", "python hpo.py --trial $SLURM_ARRAY_TASK_ID"),
                    ],
                ),
                "bio" => one3(
                    r,
                    &[
                        (
                            "alphafold-batch",
                            "python",
                            "python run_alphafold.py --fasta_paths=batch/$SLURM_ARRAY_TASK_ID.fasta",
                        ),
                        ("md-replica", "gmx_mpi", "gmx_mpi mdrun -deffnm rep$SLURM_ARRAY_TASK_ID -nb gpu"),
                        ("docking-screen", "python", "python dock.py --chunk $SLURM_ARRAY_TASK_ID"),
                    ],
                ),
                "climate" => one3(
                    r,
                    &[
                        ("wrf-ens", "wrf.exe", "wrf.exe"),
                        ("ens-member", "python", "python rollout.py --member $SLURM_ARRAY_TASK_ID"),
                        ("downscale-tile", "python", "python downscale.py --tile $SLURM_ARRAY_TASK_ID"),
                    ],
                ),
                "physics" => one3(
                    r,
                    &[
                        ("param-scan", "python", "python scan.py --point $SLURM_ARRAY_TASK_ID"),
                        ("mc-seed", "mc", "./mc --seed $SLURM_ARRAY_TASK_ID"),
                        ("md-replica", "lmp", "lmp -k on g 1 -sf kk -in in.rep -var r $SLURM_ARRAY_TASK_ID"),
                    ],
                ),
                _ => one3(
                    r,
                    &[
                        ("ablation-grid", "python", "python train.py --grid $SLURM_ARRAY_TASK_ID"),
                        ("eval-shard", "python", "python eval_shard.py --shard $SLURM_ARRAY_TASK_ID"),
                        ("seed-sweep", "python", "python train.py --seed $SLURM_ARRAY_TASK_ID"),
                    ],
                ),
            };
            t(name.into(), name, step, cmd.into(), &format!("{}.sh", name.replace('-', "_")))
        }
        Cat::Long => {
            let (name, step, cmd) = match fam {
                "llm" => one3(
                    r,
                    &[
                        (
                            "sft-llama3-8b",
                            "torchrun",
                            "torchrun --nproc_per_node=8 sft.py --config configs/sft_llama3_8b.yaml",
                        ),
                        ("lora-qwen2-7b", "python", "python lora.py --model Qwen2-7B --r 64"),
                        ("dpo-mistral-7b", "accelerate", "accelerate launch dpo.py --config dpo.yaml"),
                        ("distill-7b", "torchrun", "torchrun --nproc_per_node=8 distill.py"),
                    ],
                ),
                "vision" => one3(
                    r,
                    &[
                        ("dreambooth", "accelerate", "accelerate launch train_dreambooth.py"),
                        ("train_unet", "torchrun", "torchrun --nproc_per_node=8 train_unet.py"),
                        ("vit-b-finetune", "python", "python finetune.py --model vit_b_16"),
                        (
                            "detr-train",
                            "torchrun",
                            "torchrun --nproc_per_node=8 main.py --coco_path /lustre/datasets/coco",
                        ),
                    ],
                ),
                "bio" => one3(
                    r,
                    &[
                        ("gromacs-md", "gmx_mpi", "gmx_mpi mdrun -deffnm prod -nb gpu -pme gpu -bonded gpu"),
                        ("esm2-finetune", "torchrun", "torchrun --nproc_per_node=8 finetune_esm2.py"),
                        ("openfold-train", "python", "python train_openfold.py --precision bf16"),
                        ("amber-pmemd", "pmemd.cuda", "pmemd.cuda -O -i prod.in -o prod.out"),
                    ],
                ),
                "climate" => one3(
                    r,
                    &[
                        (
                            "fourcastnet-finetune",
                            "torchrun",
                            "torchrun --nproc_per_node=8 train.py --config afno_finetune",
                        ),
                        ("unet-downscale", "python", "python train_downscale.py"),
                        ("graphcast-finetune", "python", "python train.py --resolution 1.0"),
                        ("wrf-gpu", "wrf.exe", "wrf.exe"),
                    ],
                ),
                "physics" => one3(
                    r,
                    &[
                        ("lattice-qcd-hmc", "hmc", "./hmc --input ensemble_a.xml"),
                        ("pinn-train", "python", "python train_pinn.py --epochs 2000"),
                        ("lammps-gpu", "lmp", "lmp -k on g 8 -sf kk -in in.production"),
                        ("qmcpack-dmc", "qmcpack", "qmcpack dmc.xml"),
                    ],
                ),
                _ => one3(
                    r,
                    &[
                        ("ppo-rlhf", "python", "python ppo.py --config ppo_7b.yaml"),
                        ("train-gnn", "python", "python train_gnn.py --dataset ogbn-papers100M"),
                        ("moe-small", "torchrun", "torchrun --nproc_per_node=8 train_moe.py"),
                        ("sdxl-finetune", "accelerate", "accelerate launch train_sdxl.py"),
                    ],
                ),
            };
            t(name.into(), name, step, cmd.into(), &format!("{}.sh", name.replace('-', "_")))
        }
        Cat::Multi => {
            if smoke {
                let (name, step, cmd) = one3(
                    r,
                    &[
                        ("nccl-tests", "all_reduce_perf", "all_reduce_perf -b 8 -e 8G -f 2 -g 1"),
                        ("nccl-allreduce", "all_reduce_perf", "all_reduce_perf -b 1G -e 16G -f 2 -g 1 -n 100"),
                        ("ib-bw-check", "python", "python ib_check.py --all-pairs"),
                    ],
                );
                return t(name.into(), "infra", step, cmd.into(), "nccl.sh");
            }
            let (name, cmd) = match fam {
                "llm" => one2(
                    r,
                    &[
                        ("llama3-70b-pretrain", "python -u pretrain_gpt.py --config configs/llama3_70b.yaml"),
                        ("llama3-8b-pretrain", "python -u pretrain_gpt.py --config configs/llama3_8b.yaml"),
                        ("qwen2.5-32b-sft", "python -u sft.py --config configs/qwen25_32b.yaml"),
                        ("mixtral-8x7b-cpt", "python -u pretrain_gpt.py --config configs/mixtral_8x7b.yaml"),
                        ("swallow-13b-cpt", "python -u pretrain_gpt.py --config configs/swallow_13b.yaml"),
                        (
                            "megatron-175b-bench",
                            "python -u pretrain_gpt.py --config configs/gpt3_175b.yaml --train-iters 200",
                        ),
                    ],
                ),
                "vision" => one2(
                    r,
                    &[
                        ("vit-h-14-pretrain", "python -u main_pretrain.py --model vit_huge_patch14"),
                        ("clip-vitl-train", "python -u -m open_clip_train.main --model ViT-L-14"),
                        ("sam2-train", "python -u training/train.py -c configs/sam2_hiera_l.yaml"),
                    ],
                ),
                "bio" => one2(
                    r,
                    &[
                        ("esm2-3b-train", "python -u train_esm2.py --model esm2_t36_3B"),
                        ("openfold-multinode", "python -u train_openfold.py --num_nodes $SLURM_NNODES"),
                    ],
                ),
                "climate" => one2(
                    r,
                    &[
                        ("fourcastnet-train", "python -u train.py --config afno_backbone_26ch"),
                        ("graphcast-train", "python -u train.py --resolution 0.25"),
                    ],
                ),
                "physics" => one2(
                    r,
                    &[
                        ("lqcd-multinode", "./hmc --input ensemble_b.xml --grid 4.4.4.8"),
                        ("pinn-large", "python -u train_pinn.py --distributed"),
                    ],
                ),
                _ => one2(
                    r,
                    &[
                        ("ddp-bert-large", "python -u run_pretraining.py --model bert-large"),
                        ("moe-ablation", "python -u train_moe.py --experts 64"),
                        ("sdxl-train", "python -u train_sdxl.py --distributed"),
                    ],
                ),
            };
            let step = if cmd.starts_with("./") { "hmc" } else { "python" };
            t(name.into(), name, step, cmd.into(), &format!("train_{}.sh", name.replace(['-', '.'], "_")))
        }
        Cat::Cpu => {
            let (name, step, cmd) = match fam {
                "llm" | "ml" => one3(
                    r,
                    &[
                        ("tokenize-corpus", "python", "python tokenize_corpus.py --workers $SLURM_CPUS_PER_TASK"),
                        ("dedup-minhash", "python", "python dedup.py --minhash --threshold 0.8"),
                        ("pack-dataset", "python", "python pack.py --seq_len 8192"),
                        ("rsync-ckpt", "rsync", "rsync -a checkpoints/ /lustre/archive/"),
                        ("hf-upload", "python", "python upload.py --repo org/model"),
                    ],
                ),
                "vision" => one3(
                    r,
                    &[
                        ("webdataset-shard", "python", "python make_shards.py --maxcount 10000"),
                        ("resize-images", "python", "python resize.py --size 512"),
                        ("extract-frames", "ffmpeg", "ffmpeg -i video.mp4 -vf fps=2 frames/%06d.jpg"),
                    ],
                ),
                "bio" => one3(
                    r,
                    &[
                        ("bwa-mem", "bwa", "bwa mem -t 16 ref.fa reads_1.fq reads_2.fq"),
                        ("fastqc", "fastqc", "fastqc -t 8 reads/*.fq.gz"),
                        ("samtools-sort", "samtools", "samtools sort -@ 8 -o sorted.bam aln.bam"),
                        ("blast-search", "blastp", "blastp -query q.fa -db nr -num_threads 16"),
                        ("hmmer-scan", "hmmscan", "hmmscan --cpu 8 Pfam-A.hmm seqs.fa"),
                    ],
                ),
                "climate" => one3(
                    r,
                    &[
                        ("preprocess-era5", "python", "python preprocess_era5.py --year $YEAR"),
                        ("convert-zarr", "python", "python nc2zarr.py --chunks 1,721,1440"),
                        ("cdo-regrid", "cdo", "cdo remapbil,r360x180 in.nc out.nc"),
                    ],
                ),
                _ => one3(
                    r,
                    &[
                        ("root-analysis", "root", "root -b -q analysis.C"),
                        ("mc-gen", "mc", "./mc --events 1000000"),
                        ("post-process", "python", "python postprocess.py"),
                    ],
                ),
            };
            t(name.into(), name, step, cmd.into(), &format!("{}.sh", name.replace('-', "_")))
        }
        Cat::Het => {
            let (name, cmd) = one2(
                r,
                &[
                    ("rl-actor-learner", "python learner.py --actors $SLURM_HET_SIZE"),
                    ("serve-and-train", "python trainer.py --server $SLURM_JOB_NODELIST_HET_GROUP_0"),
                    ("dataloader-trainer", "python train.py --remote-loader"),
                ],
            );
            t(name.into(), name, "python", cmd.into(), "het.sh")
        }
    }
}

fn one3(
    r: &mut StdRng,
    items: &[(&'static str, &'static str, &'static str)],
) -> (&'static str, &'static str, &'static str) {
    items[r.gen_range(0..items.len())]
}

fn one2(r: &mut StdRng, items: &[(&'static str, &'static str)]) -> (&'static str, &'static str) {
    items[r.gen_range(0..items.len())]
}

/// Samples submit times from an hourly intensity (JST office hours, quieter weekends).
struct TimeSampler {
    start: i64,
    cdf: Vec<f64>,
}

impl TimeSampler {
    fn new(start: i64, hours: usize, flatness: f64) -> Self {
        let mut cdf = Vec::with_capacity(hours);
        let mut acc = 0.0;
        for h in 0..hours {
            let ts = start + (h as i64) * 3600;
            let jst = ts + 9 * 3600;
            let hour = (jst.rem_euclid(86_400)) / 3600;
            let dow = (jst.div_euclid(86_400) + 4).rem_euclid(7); // 0 = Sunday
            let hf = match hour {
                0..=6 => 0.35,
                7 => 0.5,
                8 => 0.75,
                9 => 1.0,
                10..=11 => 1.35,
                12 => 1.1,
                13..=17 => 1.5,
                18..=19 => 1.2,
                20..=21 => 0.9,
                _ => 0.6,
            };
            let df = if dow == 0 || dow == 6 { 0.5 } else { 1.0 };
            let w: f64 = hf * df;
            acc += w.powf(flatness);
            cdf.push(acc);
        }
        TimeSampler { start, cdf }
    }

    fn sample(&self, r: &mut StdRng) -> i64 {
        let total = self.cdf.last().copied().unwrap_or(1.0);
        let x = unif(r) * total;
        let h = self.cdf.partition_point(|&c| c <= x).min(self.cdf.len() - 1);
        self.start + (h as i64) * 3600 + r.gen_range(0..3600)
    }
}

fn fate_for(r: &mut StdRng, cat: Cat) -> (Fate, f64) {
    // (complete, fail, cancel, oom) weights per category
    let (c, f, x, o) = match cat {
        Cat::Short => (0.79, 0.12, 0.075, 0.015),
        Cat::Array => (0.88, 0.07, 0.035, 0.015),
        Cat::Long => (0.66, 0.18, 0.13, 0.03),
        Cat::Multi => (0.58, 0.25, 0.16, 0.01),
        Cat::Cpu => (0.80, 0.09, 0.06, 0.05),
        Cat::Het => (0.75, 0.15, 0.10, 0.0),
    };
    let which = pick(r, &[(0u8, c), (1, f), (2, x), (3, o)]);
    match which {
        0 => (Fate::Complete, 1.0),
        1 => {
            let k = if cat == Cat::Multi {
                pick(
                    r,
                    &[
                        (FailKind::NcclAbort, 0.4),
                        (FailKind::PyErr, 0.4),
                        (FailKind::Segv, 0.1),
                        (FailKind::Sigkill, 0.1),
                    ],
                )
            } else {
                pick(
                    r,
                    &[
                        (FailKind::PyErr, 0.72),
                        (FailKind::Exit2, 0.1),
                        (FailKind::Segv, 0.1),
                        (FailKind::Sigkill, 0.08),
                    ],
                )
            };
            let u = unif(r);
            (Fate::Fail(k), (u * u).max(0.002))
        }
        2 => (Fate::Cancel { by_admin: chance(r, 0.06) }, r.gen_range(0.03..1.0)),
        _ => (Fate::Oom, r.gen_range(0.01..0.6)),
    }
}

struct Gen<'a> {
    p: &'a HistoryParams,
    ctx: &'a Ctx,
    end: i64,
    gpu_cpu: u32,
    gpu_mem: u64,
    weights: Vec<Vec<f64>>,
}

impl Gen<'_> {
    fn pick_user(&self, r: &mut StdRng, cat: Cat) -> usize {
        let w = &self.weights[cat as usize];
        let total: f64 = w.iter().sum();
        let mut x = unif(r) * total;
        for (i, wi) in w.iter().enumerate() {
            if x < *wi {
                return i;
            }
            x -= wi;
        }
        w.len() - 1
    }

    fn qos_for(&self, r: &mut StdRng, cat: Cat, debug: bool, ua: usize, nodes: u32) -> u32 {
        let c = self.ctx;
        if debug && let Some(q) = c.qos_debug {
            return q;
        }
        if cat == Cat::Multi
            && nodes >= 8
            && family(&c.users[ua].acct) == "llm"
            && let Some(q) = c.qos_high
            && chance(r, 0.7)
        {
            return q;
        }
        if (cat == Cat::Cpu || cat == Cat::Array)
            && let Some(q) = c.qos_low
            && chance(r, 0.3)
        {
            return q;
        }
        c.qos_normal
    }

    /// One submission (job, array or het job) of category `cat` at time `t`.
    fn sub(&self, r: &mut StdRng, cat: Cat, t: i64, prod: bool) -> Sub {
        let ua = self.pick_user(r, cat);
        let fam = family(&self.ctx.users[ua].acct);
        let g = self.p.gpus_per_node;
        let mut interactive = false;
        let mut jupyter = false;
        let mut smoke = false;
        let mut debug = false;
        let shape;
        let d_nat;
        let mode;
        let prof;
        let mut tasks_per_node = 1;
        let cpus_req;
        let mut mem_node: Option<u64> = None;
        let mut mem_per_cpu = DEF_MEM_PER_CPU;
        let mut requeue = false;
        let mut factor = lognormal(r, 2.4, 0.6);
        match cat {
            Cat::Short => {
                let k = pick(r, &[(1u32, 0.62), (2, 0.18), (4, 0.14), (8, 0.06)]).min(g);
                shape = Shape::Gpu(k);
                let kind = pick(r, &[(0u8, 0.10), (1, 0.08), (2, 0.82)]);
                interactive = kind == 0;
                jupyter = kind == 1;
                debug = !jupyter && chance(r, 0.12);
                let mut d = lognormal(r, 12.0 * 60.0, 1.1).clamp(15.0, 3.0 * 3600.0);
                if debug {
                    d = d.min(40.0 * 60.0);
                }
                if jupyter {
                    d = lognormal(r, 3.0 * 3600.0, 0.7).clamp(600.0, 12.0 * 3600.0);
                }
                d_nat = d;
                mode = if interactive {
                    Mode::Interactive
                } else if jupyter {
                    Mode::BatchOnly
                } else if chance(r, 0.75) {
                    Mode::Srun(if chance(r, 0.1) { 2 } else { 1 })
                } else {
                    Mode::BatchOnly
                };
                prof = if interactive {
                    Prof::Shell
                } else if jupyter {
                    Prof::Notebook
                } else {
                    Prof::PyGpu
                };
                let cpg = pick(r, &[(4u32, 0.3), (8, 0.5), (12, 0.2)]).min(self.gpu_cpu);
                cpus_req = cpg * k;
                self.mem_choice(r, k, cpus_req, &mut mem_node, &mut mem_per_cpu);
            }
            Cat::Array => return self.array_sub(r, t, 10, 0),
            Cat::Long => {
                let k = pick(r, &[(4u32, 0.3), (8, 0.7)]).min(g);
                shape = Shape::Gpu(k);
                d_nat = lognormal(r, 5.0 * 3600.0, 0.9).clamp(1800.0, 5.0 * 86400.0);
                mode = if chance(r, 0.8) { Mode::Srun(1) } else { Mode::BatchOnly };
                prof = Prof::PyGpu;
                let cpg = pick(r, &[(8u32, 0.4), (12, 0.6)]).min(self.gpu_cpu);
                cpus_req = cpg * k;
                if chance(r, 0.7) {
                    let gb = pick(r, &[(256u64, 0.3), (512, 0.4), (1024, 0.3)]);
                    mem_node = Some((gb * 1024).min(self.gpu_mem * u64::from(k)));
                } else {
                    mem_per_cpu = 16_384;
                }
                tasks_per_node = 1;
                requeue = chance(r, 0.2);
            }
            Cat::Multi => {
                let maxn = (self.p.n_nodes / 3).max(2);
                let nn = if prod {
                    pick(r, &[(4u32, 0.28), (8, 0.32), (16, 0.28), (32, 0.12)])
                } else {
                    pick(r, &[(2u32, 0.45), (4, 0.35), (8, 0.15), (16, 0.05)])
                }
                .min(maxn);
                shape = Shape::Whole(nn);
                smoke = !prod && chance(r, 0.4);
                if smoke {
                    // NCCL / IB checks: minutes, --time=30:00
                    d_nat = lognormal(r, 8.0 * 60.0, 0.6).clamp(120.0, 1500.0);
                    prof = Prof::Nccl;
                } else if prod {
                    // production runs: hours to days, chained with 1-3 day limits
                    d_nat = lognormal(r, 14.0 * 3600.0, 0.9).clamp(3600.0, 6.0 * 86400.0);
                    prof = Prof::Train;
                    requeue = chance(r, 0.6);
                } else {
                    // development runs: a few nodes, minutes to hours
                    d_nat = lognormal(r, 20.0 * 60.0, 1.0).clamp(60.0, 4.0 * 3600.0);
                    factor = lognormal(r, 2.5, 0.5);
                    prof = Prof::Train;
                    requeue = chance(r, 0.2);
                }
                mode = Mode::Srun(1);
                tasks_per_node = g;
                cpus_req = self.gpu_cpu * g * nn;
                mem_node = Some(TRAIN_MEM_PER_NODE);
            }
            Cat::Cpu => {
                let slots = pick(r, &[(1u32, 0.5), (2, 0.35), (4, 0.15)]);
                shape = Shape::Cpu(slots);
                d_nat = lognormal(r, 25.0 * 60.0, 1.2).clamp(10.0, 86400.0);
                mode = if chance(r, 0.5) { Mode::Srun(1) } else { Mode::BatchOnly };
                prof = Prof::CpuWork;
                cpus_req = slots * CPUS_PER_CPU_SLOT;
                if chance(r, 0.5) {
                    let gb = pick(r, &[(8u64, 0.4), (16, 0.3), (32, 0.3)]);
                    mem_node = Some((gb * 1024 * u64::from(slots)).min(MEM_PER_CPU_SLOT * u64::from(slots)));
                }
            }
            Cat::Het => {
                let k = pick(r, &[(4u32, 0.4), (8, 0.6)]).min(g);
                shape = Shape::Het(k);
                d_nat = lognormal(r, 3.0 * 3600.0, 0.8).clamp(600.0, 2.0 * 86400.0);
                mode = Mode::Srun(1);
                prof = Prof::PyGpu;
                cpus_req = self.gpu_cpu * k;
                mem_node = Some(self.gpu_mem * u64::from(k) * 8 / 10);
            }
        }
        let (fate, frac) = if jupyter {
            // notebooks mostly run into their limit or get scancel'ed
            if chance(r, 0.55) {
                (Fate::Cancel { by_admin: false }, r.gen_range(0.1..1.0))
            } else {
                (Fate::Complete, 1.0)
            }
        } else {
            fate_for(r, cat)
        };
        if jupyter {
            factor = lognormal(r, 1.1, 0.5);
        }
        let limit = if debug || smoke {
            Some(30)
        } else if prod {
            Some(pick(r, &[(1440u32, 0.4), (2880, 0.35), (4320, 0.25)]))
        } else if cat != Cat::Multi && chance(r, 0.08) {
            None
        } else {
            Some(0) // filled in by finalize()
        };
        let patience = if matches!(cat, Cat::Short | Cat::Cpu | Cat::Long) && chance(r, 0.05) {
            Some(lognormal(r, 40.0 * 60.0, 1.0).clamp(60.0, 12.0 * 3600.0) as i64)
        } else {
            None
        };
        let nodes = if let Shape::Whole(n) = shape { n } else { 1 };
        let qos = self.qos_for(r, cat, debug, ua, nodes);
        let tpl = Arc::new(template(r, fam, cat, interactive, jupyter, smoke));
        Sub {
            t,
            lat: r.gen_range(1..=20),
            cat,
            ua,
            shape,
            debug,
            qos,
            tpl,
            mode,
            prof,
            tasks_per_node,
            cpus_req,
            mem_node,
            mem_per_cpu,
            limit,
            factor,
            d_nat,
            fate,
            frac,
            patience,
            requeue,
            held: false,
            prod,
            arr: None,
            submit_line: Arc::from(""),
            work_dir: Arc::from(""),
            attempt: 0,
            special: None,
        }
    }

    fn mem_choice(&self, r: &mut StdRng, k: u32, cpus: u32, mem_node: &mut Option<u64>, mem_per_cpu: &mut u64) {
        match pick(r, &[(0u8, 0.4), (1, 0.35), (2, 0.25)]) {
            0 => {
                let gb = pick(r, &[(32u64, 0.25), (64, 0.3), (128, 0.25), (200, 0.1), (400, 0.1)]);
                *mem_node = Some((gb * 1024).min(self.gpu_mem * u64::from(k)));
            }
            1 => *mem_per_cpu = DEF_MEM_PER_CPU,
            _ => {
                let per = (16_384u64).min(self.gpu_mem * u64::from(k) / u64::from(cpus.max(1)));
                *mem_per_cpu = per;
            }
        }
    }

    fn array_sub(&self, r: &mut StdRng, t: i64, n: u32, throttle: u32) -> Sub {
        let ua = self.pick_user(r, Cat::Array);
        let fam = family(&self.ctx.users[ua].acct);
        let cpu_only = matches!(fam, "bio" | "climate" | "physics") && chance(r, 0.3);
        let shape = if cpu_only {
            Shape::Cpu(pick(r, &[(1u32, 0.6), (2, 0.4)]))
        } else {
            Shape::Gpu(if chance(r, 0.85) { 1 } else { 2.min(self.p.gpus_per_node) })
        };
        let med = lognormal(r, 18.0 * 60.0, 0.9).clamp(60.0, 8.0 * 3600.0);
        let mut tasks = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let d = (med * lognormal(r, 1.0, 0.35)).max(10.0);
            let (f, fr) = fate_for(r, Cat::Array);
            tasks.push((d, f, fr));
        }
        let (cpus_req, mut mem_node, mut mem_per_cpu) = match shape {
            Shape::Cpu(s) => (s * CPUS_PER_CPU_SLOT, None, DEF_MEM_PER_CPU),
            Shape::Gpu(k) => (8.min(self.gpu_cpu) * k, None, DEF_MEM_PER_CPU),
            _ => (1, None, DEF_MEM_PER_CPU),
        };
        if let Shape::Gpu(k) = shape {
            self.mem_choice(r, k, cpus_req, &mut mem_node, &mut mem_per_cpu);
        }
        let qos = self.qos_for(r, Cat::Array, false, ua, 1);
        let tpl = Arc::new(template(r, fam, Cat::Array, false, false, false));
        Sub {
            t,
            lat: r.gen_range(1..=20),
            cat: Cat::Array,
            ua,
            shape,
            debug: false,
            qos,
            tpl,
            mode: if chance(r, 0.5) { Mode::Srun(1) } else { Mode::BatchOnly },
            prof: if cpu_only { Prof::CpuWork } else { Prof::PyGpu },
            tasks_per_node: 1,
            cpus_req,
            mem_node,
            mem_per_cpu,
            limit: Some(0),
            factor: lognormal(r, 2.2, 0.35).max(1.2),
            d_nat: med,
            fate: Fate::Complete,
            frac: 1.0,
            patience: None,
            requeue: false,
            held: false,
            prod: false,
            arr: Some(Box::new(ArrSpec { n, throttle, tasks })),
            submit_line: Arc::from(""),
            work_dir: Arc::from(""),
            attempt: 0,
            special: None,
        }
    }

    fn gpus_total(&self, s: &Sub) -> f64 {
        f64::from(match s.shape {
            Shape::Gpu(k) | Shape::Het(k) => k,
            Shape::Cpu(_) => 0,
            Shape::Whole(n) => n * self.p.gpus_per_node,
        })
    }

    /// Picks the time limit (after duration scaling) and builds the submit line / work dir.
    fn finalize(&self, r: &mut StdRng, s: &mut Sub) {
        if s.limit == Some(0) {
            let base = s.d_nat * s.factor / 60.0;
            s.limit = Some(nice_limit_at_least(base));
        }
        let u = &self.ctx.users[s.ua];
        let big = matches!(s.cat, Cat::Multi | Cat::Long | Cat::Het) || chance(r, 0.3);
        s.work_dir = if big {
            Arc::from(format!("/lustre/{}/{}/{}", u.acct, u.user, s.tpl.project))
        } else {
            Arc::from(format!("/home/{}/{}", u.user, s.tpl.project))
        };
        let part = if s.debug { "debug" } else { "gpu" };
        let mut l = String::new();
        if s.mode == Mode::Interactive {
            l.push_str("srun");
        } else {
            l.push_str("sbatch");
        }
        let explicit_part = s.debug || chance(r, 0.6);
        if explicit_part {
            let _ = write!(l, " -p {part}");
        }
        let _ = write!(l, " -A {}", u.acct);
        if s.cat != Cat::Het && s.mode != Mode::Interactive {
            let _ = write!(l, " -J {}", s.tpl.name);
        }
        if let Some(arr) = &s.arr {
            let _ = write!(l, " --array=0-{}", arr.n - 1);
            if arr.throttle > 0 {
                let _ = write!(l, "%{}", arr.throttle);
            }
        }
        match s.shape {
            Shape::Gpu(k) => {
                let _ = write!(l, " --gres=gpu:{k} -c {}", s.cpus_req);
            }
            Shape::Cpu(_) => {
                let _ = write!(l, " -c {}", s.cpus_req);
            }
            Shape::Whole(n) => {
                let _ = write!(
                    l,
                    " -N {n} --ntasks-per-node={} --gpus-per-node={} -c {} --exclusive",
                    s.tasks_per_node, self.p.gpus_per_node, self.gpu_cpu
                );
            }
            Shape::Het(_) => {}
        }
        if s.cat != Cat::Het {
            if let Some(m) = s.mem_node {
                if m.is_multiple_of(1024) {
                    let _ = write!(l, " --mem={}G", m / 1024);
                } else {
                    let _ = write!(l, " --mem={m}");
                }
            } else if s.mem_per_cpu != DEF_MEM_PER_CPU {
                if s.mem_per_cpu.is_multiple_of(1024) {
                    let _ = write!(l, " --mem-per-cpu={}G", s.mem_per_cpu / 1024);
                } else {
                    let _ = write!(l, " --mem-per-cpu={}", s.mem_per_cpu);
                }
            }
            if let Some(lim) = s.limit {
                let _ = write!(l, " --time={}", fmt_time_limit(lim));
            }
        }
        if s.requeue {
            l.push_str(" --requeue");
        }
        if s.held {
            l.push_str(" --hold");
        }
        if s.mode == Mode::Interactive {
            l.push_str(" --pty bash");
        } else {
            let _ = write!(l, " {}", s.tpl.script);
        }
        s.submit_line = Arc::from(l);
    }
}

// ---------------------------------------------------------------------------------------
// node events
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct EventRow {
    node: usize,
    ts: i64,
    /// i64::MAX = still open at `end`.
    te: i64,
    reason: &'static str,
    uid: u32,
    state: u32,
    kill: bool,
}

struct EvKind {
    reason: &'static str,
    state: u32,
    uid: u32,
    kill: bool,
    min_s: f64,
    max_s: f64,
    w: f64,
}

const EV_KINDS: [EvKind; 8] = [
    EvKind {
        reason: "Xid 79: GPU has fallen off the bus",
        state: NS_DOWN,
        uid: 0,
        kill: true,
        min_s: 3.0 * 3600.0,
        max_s: 72.0 * 3600.0,
        w: 5.0,
    },
    EvKind {
        reason: "Not responding",
        state: NS_DOWN | NS_NO_RESPOND,
        uid: NO_VAL,
        kill: true,
        min_s: 600.0,
        max_s: 4.0 * 3600.0,
        w: 7.0,
    },
    EvKind {
        reason: "Node unexpectedly rebooted",
        state: NS_DOWN,
        uid: NO_VAL,
        kill: true,
        min_s: 300.0,
        max_s: 2400.0,
        w: 3.0,
    },
    EvKind {
        reason: "Kill task failed",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 900.0,
        max_s: 3.0 * 3600.0,
        w: 5.0,
    },
    EvKind {
        reason: "NHC: mlx5_0 port 1 down",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 1800.0,
        max_s: 12.0 * 3600.0,
        w: 5.0,
    },
    EvKind {
        reason: "ECC uncorrectable, row remap pending",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 1800.0,
        max_s: 8.0 * 3600.0,
        w: 4.0,
    },
    EvKind {
        reason: "NHC: nvidia-smi not responding",
        state: NS_IDLE | NS_DRAIN | NS_NO_RESPOND,
        uid: 0,
        kill: false,
        min_s: 1800.0,
        max_s: 6.0 * 3600.0,
        w: 2.0,
    },
    EvKind {
        reason: "maintenance: firmware update",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 2.0 * 3600.0,
        max_s: 6.0 * 3600.0,
        w: 2.0,
    },
];

fn gen_events(r: &mut StdRng, p: &HistoryParams, start: i64, end: i64) -> Vec<EventRow> {
    let n = p.n_nodes as usize;
    let mut evs: Vec<EventRow> = Vec::new();
    let free = |evs: &[EventRow], node: usize, ts: i64, te: i64| {
        evs.iter().all(|e| e.node != node || te.saturating_add(1800) <= e.ts || e.te.saturating_add(1800) <= ts)
    };
    // planned rack maintenance (one rack, same window on all its nodes)
    let racks = n.div_ceil(RACK);
    if racks >= 2 && p.days >= 5 {
        let rack = r.gen_range(0..racks);
        let day = start.div_euclid(86_400) + i64::from(p.days) * 45 / 100;
        let ts = day * 86_400 + 3600 + r.gen_range(0..4) * 900; // ~10:00 JST
        let te = ts + 6 * 3600 + r.gen_range(0..8) * 900;
        if ts > start && te < end {
            for node in rack * RACK..((rack + 1) * RACK).min(n) {
                evs.push(EventRow {
                    node,
                    ts,
                    te,
                    reason: EV_KINDS[7].reason,
                    uid: 0,
                    state: NS_IDLE | NS_DRAIN,
                    kill: false,
                });
            }
        }
    }
    // a few still open at `end`
    for (ki, back_h) in [(0usize, 30.0), (5, 9.0), (1, 2.5)] {
        let k = &EV_KINDS[ki];
        for _ in 0..50 {
            let node = r.gen_range(0..n);
            let ts = end - (back_h * 3600.0 * r.gen_range(0.5..1.0)) as i64;
            if ts > start && free(&evs, node, ts, i64::MAX - 3600) {
                evs.push(EventRow {
                    node,
                    ts,
                    te: i64::MAX,
                    reason: k.reason,
                    uid: k.uid,
                    state: k.state,
                    kill: k.kill,
                });
                break;
            }
        }
    }
    // random failures and drains over the window
    let count = ((f64::from(p.days) * 1.25 * n as f64 / 100.0).round() as usize).max(3);
    let weights: Vec<(usize, f64)> = EV_KINDS.iter().enumerate().map(|(i, k)| (i, k.w)).collect();
    let lo = start + 6 * 3600;
    let hi = end - 3600;
    if hi > lo {
        for _ in 0..count {
            let k = &EV_KINDS[pick(r, &weights)];
            let dur = (k.min_s.ln() + unif(r) * (k.max_s.ln() - k.min_s.ln())).exp() as i64;
            for _ in 0..50 {
                let node = r.gen_range(0..n);
                let ts = r.gen_range(lo..hi);
                let te = if ts + dur >= end { i64::MAX } else { ts + dur };
                if free(&evs, node, ts, te) {
                    evs.push(EventRow { node, ts, te, reason: k.reason, uid: k.uid, state: k.state, kill: k.kill });
                    break;
                }
            }
        }
    }
    evs.sort_by_key(|e| (e.ts, e.node));
    evs
}

// ---------------------------------------------------------------------------------------
// scheduler
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Blk {
    ts: i64,
    te: i64,
    kill: bool,
}

#[derive(Debug, Clone, Default)]
struct Placement {
    start: i64,
    nodes: Vec<u16>,
    gpu_slots: Vec<usize>,
    cpu_slots: Vec<usize>,
    whole: bool,
    cut: Option<i64>,
    /// het: node of component 0 (CPU) and component 1 (GPU)
    het_nodes: Option<(u16, u16)>,
}

/// Busy intervals `[start, end)` of one slot, sorted and non-overlapping.
type Busy = Vec<(i64, i64)>;

/// End of the first busy interval of `iv` that overlaps `[t, t + d)`, or None if free.
fn slot_block(iv: &[(i64, i64)], t: i64, d: i64) -> Option<i64> {
    // the lists are short: a linear scan beats a binary search (and is cheap in debug builds)
    let until = t.saturating_add(d);
    for &(s, e) in iv {
        if e <= t {
            continue;
        }
        return if s < until { Some(e) } else { None };
    }
    None
}

/// Earliest start >= t0 of a free window of length `d` in one slot.
fn slot_earliest(iv: &[(i64, i64)], t0: i64, d: i64) -> i64 {
    let mut t = t0;
    for &(s, e) in iv {
        if e <= t {
            continue;
        }
        if s >= t.saturating_add(d) {
            break;
        }
        t = e;
    }
    t
}

/// k-th smallest (1-based) of a short slice (reorders it).
fn kth_smallest(v: &mut [i64], k: usize) -> i64 {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
    v[k - 1]
}

/// End of the last busy interval that ends at or before `t` (for best-fit packing).
fn slot_prev_end(iv: &[(i64, i64)], t: i64) -> i64 {
    let i = iv.partition_point(|x| x.1 <= t);
    if i == 0 { i64::MIN } else { iv[i - 1].1 }
}

/// Per-slot busy lists (8 GPU slots and 4 CPU slots per node) plus the nodes' events.
/// Jobs are placed in submit order at the earliest time their slots are free for their
/// whole time limit (so later jobs backfill gaps only when their limit fits, as Slurm's
/// backfill scheduler does); the interval committed is the actual run time.
struct Sched {
    n: usize,
    g: usize,
    gpu: Vec<Busy>,
    cpu: Vec<Busy>,
    blocks: Vec<Vec<Blk>>,
}

impl Sched {
    fn new(n: usize, g: usize, evs: &[EventRow]) -> Self {
        let mut blocks = vec![Vec::new(); n];
        for e in evs {
            blocks[e.node].push(Blk { ts: e.ts, te: e.te, kill: e.kill });
        }
        for b in &mut blocks {
            b.sort_by_key(|x| x.ts);
        }
        Sched { n, g, gpu: vec![Vec::new(); n * g], cpu: vec![Vec::new(); n * CPU_SLOTS], blocks }
    }

    /// Drop intervals that ended before `now` (no later placement can start before it).
    fn prune(&mut self, now: i64) {
        for iv in self.gpu.iter_mut().chain(self.cpu.iter_mut()) {
            let k = iv.partition_point(|x| x.1 <= now);
            if k > 0 {
                iv.drain(..k);
            }
        }
    }

    /// Earliest start >= t on node `n` for a job of duration d that respects the node's
    /// events, and the time a DOWN event would kill it (if any).
    fn adjust(&self, n: usize, mut t: i64, d: i64) -> (i64, Option<i64>) {
        'outer: loop {
            if t == i64::MAX {
                return (t, None);
            }
            for b in &self.blocks[n] {
                if b.te <= t {
                    continue;
                }
                if b.ts <= t {
                    t = b.te;
                    continue 'outer;
                }
                if b.ts < t.saturating_add(d) {
                    if b.kill {
                        return (t, Some(b.ts));
                    }
                    t = b.te;
                    continue 'outer;
                }
                break;
            }
            return (t, None);
        }
    }

    fn slots(&self, cpu: bool, n: usize) -> &[Busy] {
        if cpu { &self.cpu[n * CPU_SLOTS..(n + 1) * CPU_SLOTS] } else { &self.gpu[n * self.g..(n + 1) * self.g] }
    }

    /// Earliest t in [t0, cap] at which `k` slots of one pool of node `n` are free for
    /// `dfit` and the node has no event in the way. Returns (t, free slots at t).
    #[allow(clippy::too_many_arguments)]
    fn node_earliest(
        &self,
        n: usize,
        cpu: bool,
        k: usize,
        t0: i64,
        dfit: i64,
        d: i64,
        cap: i64,
    ) -> Option<(i64, usize)> {
        let mut t = t0;
        loop {
            if t > cap || t == i64::MAX {
                return None;
            }
            let mut free = 0usize;
            let mut next = i64::MAX;
            for iv in self.slots(cpu, n) {
                match slot_block(iv, t, dfit) {
                    None => free += 1,
                    Some(e) => next = next.min(e),
                }
            }
            if free >= k {
                let (t2, _) = self.adjust(n, t, d);
                if t2 == t {
                    return Some((t, free));
                }
                t = t2;
                continue;
            }
            t = next;
        }
    }

    /// k slots of one pool (GPU or CPU) on a single node: earliest start, best fit.
    fn place_slots(&self, cpu: bool, k: usize, t0: i64, dfit: i64, d: i64) -> Option<Placement> {
        let per = if cpu { CPU_SLOTS } else { self.g };
        // per node: lower bound of the start (k-th earliest free window of its slots) and
        // the number of slots free right away
        let mut lb: Vec<(i64, usize, usize)> = Vec::with_capacity(self.n);
        let mut ear = [0i64; 32];
        for n in 0..self.n {
            let mut free = 0;
            for (i, iv) in self.slots(cpu, n).iter().enumerate() {
                let e = slot_earliest(iv, t0, dfit);
                ear[i] = e;
                if e == t0 {
                    free += 1;
                }
            }
            let l = if free >= k { t0 } else { kth_smallest(&mut ear[..per], k) };
            lb.push((l, free, n));
        }
        // best fit among the nodes that can start it now
        let mut best: Option<(i64, usize, usize)> = None;
        for &(l, free, n) in &lb {
            if l == t0 && best.is_none_or(|b| free < b.1) && self.adjust(n, t0, d).0 == t0 {
                best = Some((t0, free, n));
            }
        }
        if best.is_none() {
            // otherwise the exact earliest start, nodes in lower-bound order
            lb.sort_unstable_by_key(|x| (x.0, x.2));
            for &(l, _, n) in &lb {
                if let Some((bt, _, _)) = best
                    && l > bt
                {
                    break;
                }
                let cap = best.map_or(i64::MAX - 1, |b| b.0);
                let Some((t, free)) = self.node_earliest(n, cpu, k, l, dfit, d, cap) else {
                    continue;
                };
                let better = match best {
                    None => true,
                    Some((bt, bf, bn)) => t < bt || (t == bt && (free, n) < (bf, bn)),
                };
                if better {
                    best = Some((t, free, n));
                }
            }
        }
        let (t, _, n) = best?;
        let pool = self.slots(cpu, n);
        let mut idx: Vec<usize> = (0..per).filter(|&i| slot_block(&pool[i], t, dfit).is_none()).collect();
        idx.sort_by_key(|&i| (Reverse(slot_prev_end(&pool[i], t)), i));
        idx.truncate(k);
        idx.sort_unstable();
        let slots: Vec<usize> = idx.into_iter().map(|i| n * per + i).collect();
        let cut = self.adjust(n, t, d).1;
        let mut p = Placement { start: t, nodes: vec![n as u16], cut, ..Default::default() };
        if cpu {
            p.cpu_slots = slots;
        } else {
            p.gpu_slots = slots;
        }
        Some(p)
    }

    /// Earliest t >= t0 at which node `n` is entirely free for `dfit` and has no event in
    /// the way.
    fn whole_earliest(&self, n: usize, t0: i64, dfit: i64, d: i64) -> i64 {
        let mut t = t0;
        loop {
            if t == i64::MAX {
                return t;
            }
            // every slot blocked at t stays blocked until its blocking interval ends
            let next = self
                .slots(false, n)
                .iter()
                .chain(self.slots(true, n))
                .filter_map(|iv| slot_block(iv, t, dfit))
                .fold(t, i64::max);
            if next > t {
                t = next;
                continue;
            }
            let (t2, _) = self.adjust(n, t, d);
            if t2 == t {
                return t;
            }
            t = t2;
        }
    }

    /// `nn` whole nodes among the first `pool` nodes at the same time, preferring few racks.
    fn place_whole(&self, nn: usize, pool: usize, t0: i64, dfit: i64, d: i64) -> Option<Placement> {
        let mut t = t0;
        loop {
            let mut cand: Vec<(i64, usize)> =
                (0..pool).map(|n| (self.whole_earliest(n, t, dfit, d), n)).filter(|c| c.0 < i64::MAX).collect();
            if cand.len() < nn {
                return None;
            }
            cand.sort_unstable();
            let tn = cand[nn - 1].0;
            if tn > t {
                t = tn;
                continue;
            }
            let racks = self.n.div_ceil(RACK);
            let mut by_rack: Vec<Vec<usize>> = vec![Vec::new(); racks];
            for &(tc, n) in &cand {
                if tc == t {
                    by_rack[n / RACK].push(n);
                }
            }
            for v in &mut by_rack {
                v.sort_unstable();
            }
            let mut chosen: Vec<usize> = Vec::with_capacity(nn);
            if let Some(rk) = (0..racks).filter(|&rk| by_rack[rk].len() >= nn).min_by_key(|&rk| (by_rack[rk].len(), rk))
            {
                chosen.extend(by_rack[rk].iter().take(nn));
            } else {
                let mut order: Vec<usize> = (0..racks).collect();
                order.sort_by_key(|&rk| (Reverse(by_rack[rk].len()), rk));
                for rk in order {
                    for &n in &by_rack[rk] {
                        if chosen.len() < nn {
                            chosen.push(n);
                        }
                    }
                }
            }
            chosen.sort_unstable();
            let cut = chosen.iter().filter_map(|&n| self.adjust(n, t, d).1).min();
            return Some(Placement {
                start: t,
                nodes: chosen.iter().map(|&n| n as u16).collect(),
                whole: true,
                cut,
                ..Default::default()
            });
        }
    }

    fn place_het(&self, k: usize, t0: i64, dfit: i64, d: i64) -> Option<Placement> {
        let mut t = t0;
        for _ in 0..256 {
            let a = self.place_slots(true, 1, t, dfit, d)?;
            let b = self.place_slots(false, k, t, dfit, d)?;
            if a.start == b.start {
                let cut = match (a.cut, b.cut) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
                let mut nodes = vec![a.nodes[0], b.nodes[0]];
                nodes.sort_unstable();
                nodes.dedup();
                return Some(Placement {
                    start: a.start,
                    nodes,
                    gpu_slots: b.gpu_slots,
                    cpu_slots: a.cpu_slots,
                    whole: false,
                    cut,
                    het_nodes: Some((a.nodes[0], b.nodes[0])),
                });
            }
            t = a.start.max(b.start);
        }
        None
    }

    /// `dfit`: how long the resources must be free (the time limit), `d`: actual run time.
    /// Production runs (`large`) only get the first 70 % of the nodes (think of a QOS
    /// GrpTRES cap), so that big reservations never block the whole cluster.
    fn place(&self, shape: Shape, large: bool, t0: i64, dfit: i64, d: i64) -> Option<Placement> {
        match shape {
            Shape::Gpu(k) => self.place_slots(false, k as usize, t0, dfit, d),
            Shape::Cpu(k) => self.place_slots(true, k as usize, t0, dfit, d),
            Shape::Whole(n) => {
                let pool = if large { (self.n * 7 / 10).max(n as usize) } else { self.n };
                self.place_whole(n as usize, pool, t0, dfit, d)
            }
            Shape::Het(k) => self.place_het(k as usize, t0, dfit, d),
        }
    }

    fn commit(&mut self, p: &Placement, end: i64) {
        if end <= p.start {
            return;
        }
        let ins = |iv: &mut Busy| {
            let pos = iv.partition_point(|x| x.0 < p.start);
            iv.insert(pos, (p.start, end));
        };
        if p.whole {
            for &n in &p.nodes {
                let n = usize::from(n);
                for iv in &mut self.gpu[n * self.g..(n + 1) * self.g] {
                    ins(iv);
                }
                for iv in &mut self.cpu[n * CPU_SLOTS..(n + 1) * CPU_SLOTS] {
                    ins(iv);
                }
            }
        }
        for &s in &p.gpu_slots {
            ins(&mut self.gpu[s]);
        }
        for &s in &p.cpu_slots {
            ins(&mut self.cpu[s]);
        }
    }
}

// ---------------------------------------------------------------------------------------
// job rows
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct JobRow {
    id_job: u32,
    id_array_job: u32,
    id_array_task: u32,
    het_job_id: u32,
    het_job_offset: u32,
    arr_str: Option<String>,
    arr_max: u32,
    arr_pending: u32,
    ua: usize,
    qos: u32,
    debug: bool,
    tpl: Arc<Tpl>,
    work_dir: Arc<str>,
    submit_line: Arc<str>,
    cpus_req: u32,
    mem_req: u64,
    timelimit: u32,
    priority: u32,
    flags: u32,
    kind: Kind,
    t_submit: i64,
    t_eligible: i64,
    t_start: i64,
    t_end: i64,
    nodes: Vec<u16>,
    /// allocation per node
    cpn: u32,
    mpn: u64,
    gpn: u32,
    /// request (totals) for tres_req
    req_nodes: u32,
    req_cpus: u32,
    req_mem: u64,
    req_gpus: u32,
    mode: Mode,
    prof: Prof,
    tasks_per_node: u32,
    has_batch: bool,
    /// sort key for job_db_inx (time slurmdbd first saw the row)
    seen: i64,
}

impl JobRow {
    fn started(&self) -> bool {
        !self.nodes.is_empty() && self.t_start > 0
    }

    fn state_exit(&self) -> (u32, u32) {
        let srun = matches!(self.mode, Mode::Srun(_) | Mode::Interactive);
        match self.kind {
            Kind::Pending { .. } => (JS_PENDING, 0),
            Kind::Running => (JS_RUNNING, 0),
            Kind::Completed => (JS_COMPLETE, 0),
            Kind::Failed(k) => (JS_FAILED, job_exit(k, srun)),
            Kind::Cancelled { .. } | Kind::CancelledPending { .. } => (JS_CANCELLED, 0),
            Kind::Timeout => (JS_TIMEOUT, 0),
            Kind::Oom => (JS_OOM, 253),
            Kind::NodeFail => (JS_NODE_FAIL, 1),
            Kind::Requeued => (JS_REQUEUE, 0),
        }
    }
}

fn job_exit(k: FailKind, srun: bool) -> u32 {
    match k {
        FailKind::PyErr => 256,
        FailKind::Exit2 => 512,
        FailKind::Segv => {
            if srun {
                139 << 8
            } else {
                11
            }
        }
        FailKind::NcclAbort => 134 << 8,
        FailKind::Sigkill => {
            if srun {
                137 << 8
            } else {
                9
            }
        }
    }
}

fn step_exit(k: FailKind) -> u32 {
    match k {
        FailKind::PyErr => 256,
        FailKind::Exit2 => 512,
        FailKind::Segv => 11,
        FailKind::NcclAbort => 6,
        FailKind::Sigkill => 9,
    }
}

/// Step state for a raw exit status, as slurmdbd derives it.
fn state_for_exit(code: u32) -> u32 {
    if code == 253 {
        JS_OOM
    } else if code & 0x7f != 0 {
        JS_CANCELLED
    } else if code != 0 {
        JS_FAILED
    } else {
        JS_COMPLETE
    }
}

struct Plan {
    jobs: Vec<JobRow>,
    events: Vec<EventRow>,
    start: i64,
    end: i64,
    width: usize,
    xid_victim: Option<u32>,
    app_crash: Option<u32>,
}

impl Plan {
    fn stats(&self, p: &HistoryParams) -> HistoryStats {
        let mut per_state: BTreeMap<String, u64> = BTreeMap::new();
        let mut gpu_s = 0.0;
        for j in &self.jobs {
            let (st, _) = j.state_exit();
            *per_state.entry(state_name(st).to_string()).or_default() += 1;
            if j.started() {
                let e = if j.t_end == 0 { self.end } else { j.t_end.min(self.end) };
                let s = j.t_start.max(self.start);
                if e > s {
                    gpu_s += f64::from(j.gpn) * j.nodes.len() as f64 * (e - s) as f64;
                }
            }
        }
        HistoryStats {
            cluster: p.cluster.clone(),
            jobs: self.jobs.len() as u64,
            steps: 0,
            events: self.events.len() as u64 + 1,
            per_state,
            gpu_hours: gpu_s / 3600.0,
            capacity_gpu_hours: f64::from(p.n_nodes) * f64::from(p.gpus_per_node) * f64::from(p.days) * 24.0,
            simulate_secs: 0.0,
            elapsed_secs: 0.0,
            xid_victim: self.xid_victim,
            app_crash: self.app_crash,
        }
    }
}

/// How long a job's resources must be free for the scheduler to start it: its time limit
/// (jobs without one only start where nothing is reserved for the next 30 days).
fn fit_time(d: i64, limit: Option<u32>) -> i64 {
    match limit {
        Some(l) => d.max(i64::from(l) * 60),
        None => d.max(30 * 86_400),
    }
}

struct Builder<'a> {
    g: Gen<'a>,
    sched: Sched,
    rows: Vec<JobRow>,
    next_id: u32,
    heap: BinaryHeap<Reverse<(i64, u64, usize)>>,
    requeues: Vec<Sub>,
    requeue_ids: Vec<u32>,
    seq: u64,
    /// Events added while scheduling (the DOWN event of the planted XID victim).
    extra_events: Vec<EventRow>,
    xid_victim: Option<u32>,
    app_crash: Option<u32>,
}

impl Builder<'_> {
    fn alloc(&mut self, n: u32) -> u32 {
        let id = self.next_id;
        self.next_id += n;
        id
    }

    /// Run time (seconds) and whether the time limit ends it.
    fn run_time(r: &mut StdRng, d_nat: f64, frac: f64, limit: Option<u32>) -> (i64, bool) {
        let want = (d_nat * frac).max(1.0) as i64;
        match limit {
            Some(l) if want > i64::from(l) * 60 => (i64::from(l) * 60 + r.gen_range(1..=40), true),
            _ => (want, false),
        }
    }

    fn base_row(&self, s: &Sub, id: u32) -> JobRow {
        let g = self.g.p.gpus_per_node;
        let (req_nodes, req_gpus, cpn, mpn, gpn) = match s.shape {
            Shape::Gpu(k) => {
                let m = s.mem_node.unwrap_or(s.mem_per_cpu * u64::from(s.cpus_req));
                (1, k, s.cpus_req, m, k)
            }
            Shape::Cpu(_) => {
                let m = s.mem_node.unwrap_or(s.mem_per_cpu * u64::from(s.cpus_req));
                (1, 0, s.cpus_req, m, 0)
            }
            Shape::Whole(n) => (n, n * g, NODE_CPUS, s.mem_node.unwrap_or(TRAIN_MEM_PER_NODE), g),
            Shape::Het(k) => (1, k, s.cpus_req, s.mem_node.unwrap_or(0), k),
        };
        let mem_req = match s.mem_node {
            Some(m) => m,
            None => MEM_PER_CPU | s.mem_per_cpu,
        };
        let req_mem = match s.shape {
            Shape::Whole(n) => mpn * u64::from(n),
            _ => mpn,
        };
        JobRow {
            id_job: id,
            id_array_job: 0,
            id_array_task: NO_VAL,
            het_job_id: 0,
            het_job_offset: NO_VAL,
            arr_str: None,
            arr_max: 0,
            arr_pending: 0,
            ua: s.ua,
            qos: s.qos,
            debug: s.debug,
            tpl: s.tpl.clone(),
            work_dir: s.work_dir.clone(),
            submit_line: s.submit_line.clone(),
            cpus_req: s.cpus_req,
            mem_req,
            timelimit: 0,
            priority: PRIO_BASE.saturating_sub(id.saturating_sub(FIRST_JOB_ID) + 1),
            flags: 16,
            kind: Kind::Pending { held: false },
            t_submit: s.t,
            t_eligible: s.t,
            t_start: 0,
            t_end: 0,
            nodes: Vec::new(),
            cpn,
            mpn,
            gpn,
            req_nodes,
            req_cpus: s.cpus_req,
            req_mem,
            req_gpus,
            mode: s.mode,
            prof: s.prof,
            tasks_per_node: s.tasks_per_node,
            has_batch: s.mode != Mode::Interactive,
            seen: s.t,
        }
    }

    /// Fill in times, placement and final state of a row.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &self,
        r: &mut StdRng,
        row: &mut JobRow,
        s: &Sub,
        fate: Fate,
        t0: i64,
        pl: Option<&Placement>,
        end_t: i64,
        timed_out: bool,
        cut: bool,
    ) {
        let e = self.g.end;
        let uid = self.g.ctx.users[s.ua].uid;
        row.timelimit = match s.limit {
            Some(l) => l,
            None => NO_VAL,
        };
        let Some(pl) = pl else {
            row.kind = Kind::Pending { held: false };
            return;
        };
        if pl.start >= e {
            row.kind = Kind::Pending { held: false };
            return;
        }
        row.t_start = pl.start;
        row.nodes = pl.nodes.clone();
        let waited = pl.start - t0 > 60;
        let backfill = if waited { chance(r, 0.7) } else { chance(r, 0.3) };
        row.flags = if backfill { 24 } else { 20 };
        if s.limit.is_none() {
            row.timelimit = if backfill { UNLIMITED_BACKFILL } else { INFINITE };
        }
        row.seen = if row.id_array_job != 0 { pl.start } else { row.t_submit };
        if end_t > e {
            row.kind = Kind::Running;
            return;
        }
        row.t_end = end_t;
        row.kind = if cut {
            if s.requeue { Kind::Requeued } else { Kind::NodeFail }
        } else if timed_out {
            Kind::Timeout
        } else {
            match fate {
                Fate::Complete => Kind::Completed,
                Fate::Fail(k) => Kind::Failed(k),
                Fate::Cancel { by_admin } => Kind::Cancelled { uid: if by_admin { 0 } else { uid } },
                Fate::Oom => Kind::Oom,
            }
        };
    }

    fn process(&mut self, r: &mut StdRng, s: &Sub, requeue_of: Option<u32>) {
        if let Some(special) = s.special {
            if !self.process_special(r, s, special) {
                tracing::warn!(?special, "history: no place for a planted job, it runs as an ordinary one");
                let ordinary = Sub { special: None, ..s.clone() };
                self.process(r, &ordinary, requeue_of);
            }
            return;
        }
        if s.arr.is_some() {
            self.process_array(r, s);
            return;
        }
        let e = self.g.end;
        let het = matches!(s.shape, Shape::Het(_));
        let id = match requeue_of {
            Some(id) => id,
            None => self.alloc(if het { 2 } else { 1 }),
        };
        let uid = self.g.ctx.users[s.ua].uid;
        let mut row = self.base_row(s, id);
        if requeue_of.is_some() {
            row.t_eligible = s.t + 121;
        }
        if s.held {
            row.kind = Kind::Pending { held: true };
            row.t_eligible = 0;
            row.priority = 0;
            row.timelimit = s.limit.unwrap_or(NO_VAL);
            self.rows.push(row);
            return;
        }
        let t0 = row.t_eligible + s.lat;
        let (d, timed_out) = Self::run_time(r, s.d_nat, s.frac, s.limit);
        let pl = self.sched.place(s.shape, s.prod, t0, fit_time(d, s.limit), d);
        // user gives up waiting
        if let (Some(p), Some(pl)) = (s.patience, pl.as_ref())
            && pl.start - t0 > p
            && t0 + p < e
        {
            row.kind = Kind::CancelledPending { uid };
            row.t_end = t0 + p;
            row.timelimit = s.limit.unwrap_or(NO_VAL);
            if chance(r, 0.25) {
                row.t_start = row.t_end;
            }
            self.rows.push(row);
            return;
        }
        let (end_t, cut) = match pl.as_ref() {
            Some(pl) => match pl.cut {
                Some(c) if c < pl.start + d => (c, true),
                _ => (pl.start + d, false),
            },
            None => (i64::MAX, false),
        };
        if let Some(pl) = pl.as_ref() {
            self.sched.commit(pl, end_t);
        }
        self.settle(r, &mut row, s, s.fate, t0, pl.as_ref(), end_t, timed_out && !cut, cut);
        if het {
            let (n0, n1) = pl.as_ref().and_then(|p| p.het_nodes).unwrap_or((0, 0));
            let k = row.gpn;
            let mut c0 = row.clone();
            c0.het_job_id = id;
            c0.het_job_offset = 0;
            c0.cpus_req = CPUS_PER_CPU_SLOT;
            c0.req_cpus = CPUS_PER_CPU_SLOT;
            c0.cpn = CPUS_PER_CPU_SLOT;
            c0.mem_req = 16_384;
            c0.mpn = 16_384;
            c0.req_mem = 16_384;
            c0.gpn = 0;
            c0.req_gpus = 0;
            c0.prof = Prof::CpuWork;
            let mut c1 = row;
            c1.id_job = id + 1;
            c1.het_job_id = id;
            c1.het_job_offset = 1;
            c1.has_batch = false;
            c1.gpn = k;
            if c0.started() {
                c0.nodes = vec![n0];
                c1.nodes = vec![n1];
            }
            self.rows.push(c0);
            self.rows.push(c1);
            return;
        }
        let requeued = row.kind == Kind::Requeued;
        let t_cut = row.t_end;
        self.rows.push(row);
        if requeued && s.attempt < 3 {
            let mut again = s.clone();
            again.t = t_cut;
            again.attempt += 1;
            again.d_nat *= r.gen_range(0.5..1.0);
            let (f, fr) = fate_for(r, Cat::Multi);
            again.fate = if matches!(f, Fate::Oom) { Fate::Complete } else { f };
            again.frac = fr;
            again.patience = None;
            self.requeues.push(again);
            self.requeue_ids.push(id);
            self.seq += 1;
            self.heap.push(Reverse((t_cut, self.seq, self.requeues.len() - 1)));
        }
    }

    /// Places a planted job at the first start (from its submit time on) where its story fits inside the
    /// last 40 h of the history, ending at least 4 h before `end` so its aftermath is visible too. The XID
    /// victim takes whole nodes, so no other job holds them while its time limit lasts: the DOWN event put
    /// on its first node (and the reboot after it) overlaps nothing else. Returns false when no start fits.
    fn process_special(&mut self, r: &mut StdRng, s: &Sub, special: Special) -> bool {
        let e = self.g.end;
        let (earliest, latest) = (e - 40 * 3600, e - 4 * 3600);
        let d = (s.d_nat * s.frac).max(1.0) as i64;
        let dfit = fit_time(d, s.limit);
        let t0 = s.t + s.lat;
        let mut t = t0;
        for _ in 0..200 {
            let Some(pl) = self.sched.place(s.shape, false, t, dfit, d) else {
                return false;
            };
            if pl.start > latest {
                return false;
            }
            t = pl.start.max(t) + 1800;
            if pl.cut.is_some() {
                continue;
            }
            match special {
                Special::XidVictim => {
                    let node = usize::from(pl.nodes[0]);
                    // Well inside the window, so telemetry seeded some hours after the history still has it.
                    let down_at = (pl.start + 2 * 3600).max(e - 30 * 3600);
                    let up_at = down_at + 4 * 3600 + r.gen_range(0..8) * 900;
                    let clear = self.sched.blocks[node]
                        .iter()
                        .all(|b| up_at + 1800 <= b.ts || b.te.saturating_add(1800) <= down_at);
                    if down_at > latest || down_at + 3600 > pl.start + d || up_at > pl.start + dfit || !clear {
                        continue;
                    }
                    let kind = &EV_KINDS[0];
                    let blocks = &mut self.sched.blocks[node];
                    let at = blocks.partition_point(|b| b.ts < down_at);
                    blocks.insert(at, Blk { ts: down_at, te: up_at, kill: true });
                    self.extra_events.push(EventRow {
                        node,
                        ts: down_at,
                        te: up_at,
                        reason: kind.reason,
                        uid: kind.uid,
                        state: kind.state,
                        kill: kind.kill,
                    });
                    let id = self.alloc(1);
                    let mut row = self.base_row(s, id);
                    self.sched.commit(&pl, down_at);
                    self.settle(r, &mut row, s, s.fate, t0, Some(&pl), down_at, false, true);
                    self.xid_victim = Some(id);
                    self.rows.push(row);
                    return true;
                }
                Special::AppCrash => {
                    let end_t = pl.start + d;
                    if end_t < earliest || end_t > latest {
                        continue;
                    }
                    let id = self.alloc(1);
                    let mut row = self.base_row(s, id);
                    self.sched.commit(&pl, end_t);
                    self.settle(r, &mut row, s, s.fate, t0, Some(&pl), end_t, false, false);
                    self.app_crash = Some(id);
                    self.rows.push(row);
                    return true;
                }
            }
        }
        false
    }

    fn process_array(&mut self, r: &mut StdRng, s: &Sub) {
        let Some(arr) = s.arr.as_ref() else { return };
        let e = self.g.end;
        let n = arr.n;
        let a = self.alloc(n);
        let t0 = s.t + s.lat;
        let mut lanes: Vec<i64> = vec![t0; arr.throttle as usize];
        struct Task {
            idx: u32,
            row: JobRow,
        }
        let mut started: Vec<Task> = Vec::new();
        let mut pending: Vec<bool> = vec![false; n as usize];
        let mut any_pending = false;
        for (i, &(d_nat, fate, frac)) in arr.tasks.iter().enumerate() {
            let lane = if lanes.is_empty() {
                None
            } else {
                lanes.iter().enumerate().min_by_key(|(j, v)| (**v, *j)).map(|(j, _)| j)
            };
            let tt = lane.map(|l| lanes[l]).unwrap_or(t0).max(t0);
            let (d, timed_out) = Self::run_time(r, d_nat, frac, s.limit);
            let pl = self.sched.place(s.shape, false, tt, fit_time(d, s.limit), d);
            let (end_t, cut) = match pl.as_ref() {
                Some(pl) => match pl.cut {
                    Some(c) if c < pl.start + d => (c, true),
                    _ => (pl.start + d, false),
                },
                None => (i64::MAX, false),
            };
            if let Some(pl) = pl.as_ref() {
                self.sched.commit(pl, end_t);
            }
            if let Some(l) = lane {
                lanes[l] = end_t;
            }
            let mut row = self.base_row(s, a);
            row.id_array_job = a;
            row.id_array_task = i as u32;
            self.settle(r, &mut row, s, fate, t0, pl.as_ref(), end_t, timed_out && !cut, cut);
            if row.started() {
                started.push(Task { idx: i as u32, row });
            } else {
                pending[i] = true;
                any_pending = true;
            }
        }
        started.sort_by_key(|t| (t.row.t_start, t.idx));
        let m = started.len();
        for (j, mut t) in started.into_iter().enumerate() {
            t.row.id_job = if !any_pending && j + 1 == m { a } else { a + 1 + j as u32 };
            t.row.priority = PRIO_BASE.saturating_sub(a.saturating_sub(FIRST_JOB_ID) + 1);
            self.rows.push(t.row);
        }
        if any_pending {
            let mut meta = self.base_row(s, a);
            meta.id_array_job = a;
            meta.arr_str = Some(hex_bitmap(&pending));
            meta.arr_max = arr.throttle;
            meta.arr_pending = pending.iter().filter(|&&b| b).count() as u32;
            meta.timelimit = s.limit.unwrap_or(NO_VAL);
            meta.kind = Kind::Pending { held: false };
            meta.seen = s.t.min(e);
            self.rows.push(meta);
        }
    }
}

/// The two planted jobs of [`Special`], drawn from their own RNG so that the rest of the workload is the
/// one the seed always gave. Not scaled with the load: their run times are part of the story.
fn planted_failures(wl: &Gen<'_>, seed: u64, end: i64) -> Vec<Sub> {
    let mut r = StdRng::seed_from_u64(seed ^ 0x0058_4944_7939);
    let g = wl.p.gpus_per_node;
    if wl.p.n_nodes < 2 || g == 0 {
        return Vec::new();
    }
    // A two-node pretraining run of 30 h (limit 2 days), submitted 44 h before the end.
    let mut victim = wl.sub(&mut r, Cat::Multi, end - 44 * 3600, true);
    victim.shape = Shape::Whole(2);
    victim.cpus_req = wl.gpu_cpu * g * 2;
    victim.qos = wl.ctx.qos_normal;
    victim.d_nat = 30.0 * 3600.0;
    victim.frac = 1.0;
    victim.fate = Fate::Complete;
    victim.limit = Some(2880);
    victim.requeue = false;
    victim.patience = None;
    victim.prod = false;
    victim.special = Some(Special::XidVictim);
    // A 4-GPU fine-tuning run that segfaults after 2.5 h, submitted 30 h before the end.
    let k = 4.min(g);
    let mut crash = wl.sub(&mut r, Cat::Long, end - 30 * 3600, false);
    for _ in 0..64 {
        if family(&wl.ctx.users[crash.ua].acct) == "llm" {
            break;
        }
        crash = wl.sub(&mut r, Cat::Long, end - 30 * 3600, false);
    }
    crash.shape = Shape::Gpu(k);
    crash.cpus_req = wl.gpu_cpu.min(8) * k;
    crash.mem_node = Some((256 * 1024).min(wl.gpu_mem * u64::from(k)));
    crash.mode = Mode::Srun(1);
    crash.prof = Prof::PyGpu;
    crash.d_nat = 2.5 * 3600.0;
    crash.frac = 1.0;
    crash.fate = Fate::Fail(FailKind::Segv);
    crash.limit = Some(0);
    crash.requeue = false;
    crash.patience = None;
    crash.special = Some(Special::AppCrash);
    vec![victim, crash]
}

fn build_plan(p: &HistoryParams, ctx: &Ctx) -> Result<Plan> {
    let end = p.end.timestamp();
    let start = end - i64::from(p.days) * 86_400;
    ensure!(start > 0, "history would start before 1970");
    let mut r = StdRng::seed_from_u64(p.seed);
    let g = p.gpus_per_node;
    let gpu_cpu = ((NODE_CPUS - CPU_SLOTS as u32 * CPUS_PER_CPU_SLOT) / g).clamp(1, 12);
    let gpu_mem = (NODE_MEM - CPU_SLOTS as u64 * MEM_PER_CPU_SLOT) / u64::from(g);

    // user activity x account affinity
    let mut activity: BTreeMap<&str, f64> = BTreeMap::new();
    for u in &ctx.users {
        if !activity.contains_key(u.user.as_str()) {
            let a = lognormal(&mut r, 1.0, 0.8);
            activity.insert(u.user.as_str(), a);
        }
    }
    let cats = [Cat::Short, Cat::Array, Cat::Long, Cat::Multi, Cat::Cpu, Cat::Het];
    let weights: Vec<Vec<f64>> = cats
        .iter()
        .map(|&c| {
            ctx.users
                .iter()
                .map(|u| {
                    activity.get(u.user.as_str()).copied().unwrap_or(1.0)
                        * affinity(&u.acct, c)
                        * if u.is_def { 1.0 } else { 0.3 }
                })
                .collect()
        })
        .collect();

    let wl = Gen { p, ctx, end, gpu_cpu, gpu_mem, weights };
    let events = gen_events(&mut r, p, start, end);

    // ---- submissions
    let hours = (p.days as usize) * 24;
    let diurnal = TimeSampler::new(start, hours, 1.0);
    let flat = TimeSampler::new(start, hours, 0.35);
    let n = f64::from(p.n_jobs);
    let cap = f64::from(p.n_nodes) * f64::from(g) * (end - start) as f64;
    let target = 0.76 * cap;
    let n_het = (p.n_jobs / 10_000).clamp(2, 50);
    let n_multi = ((n * 0.035).round() as u32).max(4);
    let n_long = (n * 0.015).round() as u32;
    let n_cpu = (n * 0.09).round() as u32;
    let n_arr_tasks = (n * 0.18).round() as u32;
    let mut subs: Vec<Sub> = Vec::new();
    let mut rows_planned: u32 = 0;
    // production multi-node runs until they fill ~52 % of the target GPU time; their submit
    // times are spread evenly (stratified) so that big runs rarely pile up
    let mut prod_d = 0.0;
    let mut n_prod = 0;
    let mut prods: Vec<Sub> = Vec::new();
    while prod_d < 0.52 * target && n_prod < n_multi / 2 {
        let s = wl.sub(&mut r, Cat::Multi, 0, true);
        let lim = f64::from(s.limit.unwrap_or(10080)) * 60.0;
        prod_d += wl.gpus_total(&s) * (s.d_nat * s.frac).min(lim);
        prods.push(s);
        n_prod += 1;
    }
    let slot = (end - start) as f64 / f64::from(n_prod.max(1));
    for (i, mut s) in prods.into_iter().enumerate() {
        s.t = start + ((i as f64 + unif(&mut r)) * slot) as i64;
        subs.push(s);
    }
    rows_planned += n_prod;
    for _ in n_prod..n_multi {
        let t = flat.sample(&mut r);
        subs.push(wl.sub(&mut r, Cat::Multi, t, false));
        rows_planned += 1;
    }
    for _ in 0..n_het {
        let t = flat.sample(&mut r);
        subs.push(wl.sub(&mut r, Cat::Het, t, false));
        rows_planned += 2;
    }
    for _ in 0..n_long {
        let t = flat.sample(&mut r);
        subs.push(wl.sub(&mut r, Cat::Long, t, false));
        rows_planned += 1;
    }
    for _ in 0..n_cpu {
        let t = diurnal.sample(&mut r);
        subs.push(wl.sub(&mut r, Cat::Cpu, t, false));
        rows_planned += 1;
    }
    let mut arr_tasks = 0;
    while arr_tasks < n_arr_tasks {
        let size = (lognormal(&mut r, 30.0, 0.9).round() as u32).clamp(4, 500).min(n_arr_tasks - arr_tasks).max(1);
        let throttle = if chance(&mut r, 0.3) {
            pick(&mut r, &[(4u32, 1.0), (8, 1.0), (10, 1.0), (16, 1.0), (20, 1.0)])
        } else {
            0
        };
        let t = diurnal.sample(&mut r);
        subs.push(wl.array_sub(&mut r, t, size, throttle));
        arr_tasks += size;
        rows_planned += size;
    }
    // two throttled arrays submitted shortly before `end`: their tail is still pending
    for back in [3.5 * 3600.0, 1.2 * 3600.0] {
        let size = r.gen_range(60..=120);
        let t = end - back as i64;
        let mut s = wl.array_sub(&mut r, t, size, 4);
        if let Some(a) = s.arr.as_mut() {
            for task in &mut a.tasks {
                task.0 = task.0.max(1200.0);
            }
        }
        s.d_nat = s.d_nat.max(1200.0);
        subs.push(s);
    }
    // short jobs fill the rest (+0.5 % for rows that collapse into pending array meta rows)
    let n_short = (p.n_jobs.saturating_sub(rows_planned)) + p.n_jobs / 200;
    for _ in 0..n_short {
        let t = diurnal.sample(&mut r);
        subs.push(wl.sub(&mut r, Cat::Short, t, false));
    }
    // held jobs
    for back in [20.0 * 3600.0, 2.0 * 3600.0] {
        let t = end - back as i64;
        let mut s = wl.sub(&mut r, Cat::Long, t, false);
        s.held = true;
        subs.push(s);
    }

    // ---- scale the other durations so the offered load is ~78 % of GPU capacity
    let mut other_d = 0.0;
    for s in subs.iter().filter(|s| !s.prod && s.prof != Prof::Nccl) {
        let d = match &s.arr {
            Some(a) => a.tasks.iter().map(|t| t.0 * t.2).sum::<f64>(),
            None => s.d_nat * s.frac,
        };
        other_d += wl.gpus_total(s) * d;
    }
    let scale = if other_d > 0.0 { ((target - prod_d) / other_d).clamp(0.25, 4.0) } else { 1.0 };
    tracing::debug!(n_prod, prod_share = prod_d / target, scale, "history: workload");
    for s in subs.iter_mut().filter(|s| !s.prod && s.prof != Prof::Nccl) {
        s.d_nat *= scale;
        if let Some(a) = s.arr.as_mut() {
            for t in &mut a.tasks {
                t.0 *= scale;
            }
        }
    }
    subs.extend(planted_failures(&wl, p.seed, end));
    for s in &mut subs {
        wl.finalize(&mut r, s);
    }
    subs.sort_by_key(|s| s.t);

    // ---- simulate
    let sched = Sched::new(p.n_nodes as usize, g as usize, &events);
    let mut b = Builder {
        g: wl,
        sched,
        rows: Vec::with_capacity(p.n_jobs as usize + 1000),
        next_id: FIRST_JOB_ID,
        heap: BinaryHeap::new(),
        requeues: Vec::new(),
        requeue_ids: Vec::new(),
        seq: 0,
        extra_events: Vec::new(),
        xid_victim: None,
        app_crash: None,
    };
    let mut i = 0;
    let mut done: u64 = 0;
    loop {
        let next_sub = subs.get(i).map(|s| s.t);
        let next_rq = b.heap.peek().map(|Reverse((t, _, _))| *t);
        let (now, requeue) = match (next_sub, next_rq) {
            (None, None) => break,
            (Some(ts), Some(tr)) => (ts.min(tr), tr < ts),
            (None, Some(tr)) => (tr, true),
            (Some(ts), None) => (ts, false),
        };
        done += 1;
        if done.is_multiple_of(500) {
            b.sched.prune(now);
        }
        if requeue {
            if let Some(Reverse((_, _, k))) = b.heap.pop() {
                let s = b.requeues[k].clone();
                let id = b.requeue_ids[k];
                if s.t < end {
                    b.process(&mut r, &s, Some(id));
                }
            }
        } else {
            b.process(&mut r, &subs[i], None);
            i += 1;
        }
    }
    let mut jobs = b.rows;
    jobs.sort_by_key(|j| (j.seen, j.id_job, j.t_submit));
    let mut events = events;
    events.extend(b.extra_events);
    events.sort_by_key(|e| (e.ts, e.node));
    let width = (p.n_nodes.to_string().len()).max(3);
    Ok(Plan { jobs, events, start, end, width, xid_victim: b.xid_victim, app_crash: b.app_crash })
}

// ---------------------------------------------------------------------------------------
// steps
// ---------------------------------------------------------------------------------------

struct StepRow {
    job_db_inx: u64,
    exit_code: i32,
    id_step: i32,
    kill_requid: Option<u32>,
    nodelist: String,
    nodes_alloc: u32,
    node_inx: String,
    state: u32,
    step_name: String,
    task_cnt: u32,
    task_dist: i32,
    time_start: i64,
    time_end: i64,
    user_sec: u64,
    user_usec: u32,
    sys_sec: u64,
    sys_usec: u32,
    act_cpufreq: f64,
    req_cpufreq_min: u32,
    req_cpufreq: u32,
    req_cpufreq_gov: u32,
    submit_line: Option<String>,
    tres_alloc: String,
    usage: [String; 16],
}

/// Per-task usage totals of a finished step.
#[derive(Clone, Copy, Default)]
struct Usage {
    cpu_ms: f64,
    rss: f64,
    vm: f64,
    read: f64,
    write: f64,
    pages: f64,
}

fn page_round(x: f64) -> u64 {
    ((x.max(0.0) / 4096.0).round() as u64) * 4096
}

fn task_usage(r: &mut StdRng, prof: Prof, elapsed: f64, cpus_per_task: f64, mem_per_task_mb: f64, oom: bool) -> Usage {
    let gb = 1024.0 * 1024.0 * 1024.0;
    let cap = mem_per_task_mb * 1024.0 * 1024.0;
    let mut u = match prof {
        Prof::PyGpu => Usage {
            cpu_ms: elapsed * 1000.0 * r.gen_range(0.9..3.5f64).min(cpus_per_task),
            rss: r.gen_range(3.0..40.0) * gb,
            vm: 0.0,
            read: r.gen_range(1e8..5e10),
            write: r.gen_range(1e6..5e9),
            pages: r.gen_range(0.0..2000.0),
        },
        Prof::Train => Usage {
            cpu_ms: elapsed * 1000.0 * r.gen_range(1.0..4.0f64).min(cpus_per_task),
            rss: r.gen_range(20.0..90.0) * gb,
            vm: 0.0,
            read: elapsed * r.gen_range(2e6..5e7),
            write: elapsed / 3600.0 * r.gen_range(6e8..6e9),
            pages: r.gen_range(0.0..500.0),
        },
        Prof::Nccl => Usage {
            cpu_ms: elapsed * 1000.0 * r.gen_range(0.95..1.05),
            rss: r.gen_range(1.0..3.0) * gb,
            vm: 0.0,
            read: r.gen_range(1e6..5e7),
            write: r.gen_range(1e4..1e6),
            pages: r.gen_range(0.0..20.0),
        },
        Prof::CpuWork => Usage {
            cpu_ms: elapsed * 1000.0 * cpus_per_task * r.gen_range(0.5..0.98),
            rss: r.gen_range(0.5..30.0) * gb,
            vm: 0.0,
            read: r.gen_range(1e8..2e11),
            write: r.gen_range(1e7..1e11),
            pages: r.gen_range(0.0..5000.0),
        },
        Prof::Shell => Usage {
            cpu_ms: elapsed * 1000.0 * r.gen_range(0.01..0.4),
            rss: r.gen_range(0.05..8.0) * gb,
            vm: 0.0,
            read: r.gen_range(1e6..1e10),
            write: r.gen_range(1e4..1e9),
            pages: r.gen_range(0.0..300.0),
        },
        Prof::Notebook => Usage {
            cpu_ms: elapsed * 1000.0 * r.gen_range(0.05..0.6),
            rss: r.gen_range(1.0..30.0) * gb,
            vm: 0.0,
            read: r.gen_range(1e7..5e10),
            write: r.gen_range(1e5..5e9),
            pages: r.gen_range(0.0..1000.0),
        },
    };
    if cap > 0.0 {
        u.rss = u.rss.min(cap * r.gen_range(0.3..0.95));
        if oom {
            u.rss = cap * r.gen_range(0.985..1.0);
        }
    }
    u.vm = match prof {
        Prof::PyGpu | Prof::Train | Prof::Nccl | Prof::Notebook => u.rss + r.gen_range(30.0..120.0) * gb,
        _ => u.rss * r.gen_range(1.05..1.6),
    };
    u
}

fn light_usage(r: &mut StdRng, elapsed: f64) -> Usage {
    let rss = r.gen_range(2.0..14.0) * 1024.0 * 1024.0;
    Usage {
        cpu_ms: r.gen_range(5.0..400.0) + elapsed * 0.01,
        rss,
        vm: rss * r.gen_range(1.05..1.5),
        read: r.gen_range(2e4..3e5),
        write: r.gen_range(1e3..2e4),
        pages: r.gen_range(0.0..4.0),
    }
}

/// Formats the tres_usage_* columns; the TRES id order is computed once.
struct UsageCols {
    /// (id, index into [cpu, mem, energy, disk, vmem, pages]) in ascending id order
    all: Vec<(u32, usize)>,
    /// same without energy (the *_taskid columns)
    no_energy: Vec<(u32, usize)>,
    /// [energy, disk] in id order, as (id, 0 = energy / 1 = disk)
    out: Vec<(u32, usize)>,
    disk: u32,
}

fn fmt_vals(s: &mut String, order: &[(u32, usize)], vals: &[u64]) {
    s.clear();
    for (i, &(id, k)) in order.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{id}={}", vals[k]);
    }
}

impl UsageCols {
    fn new(t: &TresIds) -> Self {
        let mut all = vec![(t.cpu, 0), (t.mem, 1), (t.energy, 2), (t.disk, 3), (t.vmem, 4), (t.pages, 5)];
        all.sort_unstable();
        let no_energy = all.iter().copied().filter(|x| x.1 != 2).collect();
        let mut out = vec![(t.energy, 0), (t.disk, 1)];
        out.sort_unstable();
        UsageCols { all, no_energy, out, disk: t.disk }
    }

    /// The 16 tres_usage_{in,out}_* columns of a step with `tasks` tasks (`tpn` per node).
    fn build(&self, r: &mut StdRng, u: &Usage, tasks: u32, tpn: u32) -> [String; 16] {
        let mut c: [String; 16] = Default::default();
        let nt = f64::from(tasks.max(1));
        let multi = tasks > 1;
        let mut spread = |v: f64| -> (f64, f64) {
            if multi { (v * (1.0 + r.gen_range(0.0..0.12)), v * (1.0 - r.gen_range(0.0..0.12))) } else { (v, v) }
        };
        let (cpu_mx, cpu_mn) = spread(u.cpu_ms);
        let (rss_mx, rss_mn) = spread(u.rss);
        let (rd_mx, rd_mn) = spread(u.read);
        let (vm_mx, vm_mn) = spread(u.vm);
        let (pg_mx, pg_mn) = spread(u.pages);
        let (wr_mx, wr_mn) = spread(u.write);
        let nts = tasks.max(1);
        let mut tid = || -> u64 { u64::from(r.gen_range(0..nts)) };
        let mx_t = [tid(), tid(), 0, tid(), tid(), tid()];
        let mn_t = [tid(), tid(), 0, tid(), tid(), tid()];
        let (wmx_t, wmn_t) = (tid(), tid());
        let tpn = u64::from(tpn.max(1));
        let node = |t: [u64; 6]| -> [u64; 6] { t.map(|x| x / tpn) };
        let vals = |cpu: f64, rss: f64, rd: f64, vm: f64, pg: f64| -> [u64; 6] {
            [cpu as u64, page_round(rss), 0, rd as u64, page_round(vm), pg as u64]
        };
        fmt_vals(&mut c[0], &self.all, &vals(u.cpu_ms, u.rss, u.read, u.vm, u.pages));
        fmt_vals(&mut c[1], &self.all, &vals(cpu_mx, rss_mx, rd_mx, vm_mx, pg_mx));
        fmt_vals(&mut c[2], &self.no_energy, &mx_t);
        fmt_vals(&mut c[3], &self.all, &node(mx_t));
        fmt_vals(&mut c[4], &self.all, &vals(cpu_mn, rss_mn, rd_mn, vm_mn, pg_mn));
        fmt_vals(&mut c[5], &self.no_energy, &mn_t);
        fmt_vals(&mut c[6], &self.all, &node(mn_t));
        fmt_vals(&mut c[7], &self.all, &vals(u.cpu_ms * nt, u.rss * nt, u.read * nt, u.vm * nt, u.pages * nt));
        fmt_vals(&mut c[8], &self.out, &[0, u.write as u64]);
        fmt_vals(&mut c[9], &self.out, &[0, wr_mx as u64]);
        c[10] = format!("{}={wmx_t}", self.disk);
        fmt_vals(&mut c[11], &self.out, &[0, wmx_t / tpn]);
        fmt_vals(&mut c[12], &self.out, &[0, wr_mn as u64]);
        c[13] = format!("{}={wmn_t}", self.disk);
        fmt_vals(&mut c[14], &self.out, &[0, wmn_t / tpn]);
        fmt_vals(&mut c[15], &self.out, &[0, (u.write * nt) as u64]);
        c
    }
}

fn job_rng(seed: u64, j: &JobRow) -> StdRng {
    let k = seed
        ^ (u64::from(j.id_job)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (j.t_submit as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    StdRng::seed_from_u64(k)
}

/// Step rows of one job row.
fn steps_for(p: &HistoryParams, ctx: &Ctx, plan: &Plan, j: &JobRow, inx: u64, out: &mut Vec<StepRow>) {
    if !j.started() || matches!(j.kind, Kind::CancelledPending { .. } | Kind::Pending { .. }) {
        return;
    }
    let t = &ctx.tres;
    let mut r = job_rng(p.seed, j);
    let uc = UsageCols::new(t);
    let running = j.kind == Kind::Running;
    let e = plan.end;
    let start = j.t_start;
    let end = if running { 0 } else { j.t_end };
    let horizon = if running { e } else { j.t_end };
    let nn = j.nodes.len() as u32;
    let first = &j.nodes[..1];
    let (job_state, job_exit) = j.state_exit();
    let cpus_total = u64::from(j.cpn) * u64::from(nn);
    let mem_total = j.mpn * u64::from(nn);
    let gpus_total = u64::from(j.gpn) * u64::from(nn);
    let no_stats = matches!(j.kind, Kind::NodeFail | Kind::Requeued);
    let kill_uid = match j.kind {
        Kind::Cancelled { uid } => Some(uid),
        _ => None,
    };
    let tres_of = |pairs: &mut Vec<(u32, u64)>| tres_str(pairs);
    let finish_fields = |r: &mut StdRng, s: &mut StepRow, u: &Usage, tasks: u32, tpn: u32| {
        let nt = f64::from(tasks.max(1));
        let total_cpu_s = u.cpu_ms * nt / 1000.0;
        let user = total_cpu_s * r.gen_range(0.85..0.97);
        let sys = (total_cpu_s - user).max(0.0);
        s.user_sec = user as u64;
        s.user_usec = r.gen_range(0..1_000_000);
        s.sys_sec = sys as u64;
        s.sys_usec = r.gen_range(0..1_000_000);
        s.act_cpufreq = f64::from(r.gen_range(1900..3800u32));
        s.usage = uc.build(r, u, tasks, tpn);
    };
    let blank = |id_step: i32, name: &str, nodes: &[u16]| StepRow {
        job_db_inx: inx,
        exit_code: 0,
        id_step,
        kill_requid: None,
        nodelist: hostlist(nodes, plan.width),
        nodes_alloc: nodes.len() as u32,
        node_inx: node_inx(nodes),
        state: JS_RUNNING,
        step_name: name.to_string(),
        task_cnt: 1,
        task_dist: 0,
        time_start: start,
        time_end: 0,
        user_sec: 0,
        user_usec: 0,
        sys_sec: 0,
        sys_usec: 0,
        act_cpufreq: 0.0,
        req_cpufreq_min: 0,
        req_cpufreq: 0,
        req_cpufreq_gov: 0,
        submit_line: None,
        tres_alloc: String::new(),
        usage: Default::default(),
    };
    let elapsed = (horizon - start).max(0) as f64;

    // batch step
    if j.has_batch {
        let mut s = blank(-5, "batch", first);
        let mut pairs = vec![(t.cpu, u64::from(j.cpn)), (t.mem, j.mpn), (t.node, 1)];
        if j.gpn > 0 {
            pairs.push((t.gpu, u64::from(j.gpn)));
        }
        s.tres_alloc = tres_of(&mut pairs);
        if !running {
            s.time_end = end;
            let (st, ex) = match j.kind {
                Kind::Completed => (JS_COMPLETE, 0),
                Kind::Failed(_) => (state_for_exit(job_exit), job_exit),
                Kind::Oom => (JS_OOM, 253),
                Kind::Cancelled { .. } | Kind::Timeout => (JS_CANCELLED, 15),
                Kind::NodeFail | Kind::Requeued => (JS_CANCELLED, 0),
                _ => (job_state, job_exit),
            };
            s.state = st;
            s.exit_code = ex as i32;
            if matches!(j.kind, Kind::Cancelled { .. } | Kind::Timeout) && chance(&mut r, 0.5) {
                s.time_end = end + 1;
            }
            s.kill_requid = kill_uid;
            if !no_stats {
                let u = if matches!(j.mode, Mode::BatchOnly) {
                    task_usage(&mut r, j.prof, elapsed, f64::from(j.cpn), j.mpn as f64, j.kind == Kind::Oom)
                } else {
                    light_usage(&mut r, elapsed)
                };
                finish_fields(&mut r, &mut s, &u, 1, 1);
            }
        }
        out.push(s);
    }

    // extern step
    {
        let mut s = blank(-4, "extern", &j.nodes);
        s.task_cnt = nn;
        let mut pairs = vec![
            (t.cpu, cpus_total),
            (t.mem, mem_total),
            (t.energy, NO_VAL64),
            (t.node, u64::from(nn)),
            (t.billing, cpus_total),
        ];
        if gpus_total > 0 {
            pairs.push((t.gpu, gpus_total));
        }
        s.tres_alloc = tres_of(&mut pairs);
        if !running {
            s.time_end = end;
            s.state = if no_stats { JS_CANCELLED } else { JS_COMPLETE };
            if !no_stats {
                let rss = if chance(&mut r, 0.5) { 0.0 } else { f64::from(r.gen_range(26..29u32)) * 4096.0 };
                let u = Usage { cpu_ms: 0.0, rss, vm: rss, read: 6976.0, write: 1.0, pages: 0.0 };
                s.usage = uc.build(&mut r, &u, nn, 1);
                s.act_cpufreq = f64::from(r.gen_range(1900..3800u32));
                s.user_usec = r.gen_range(500..3000);
            }
        }
        out.push(s);
    }

    // srun steps
    let n_srun = match j.mode {
        Mode::Srun(n) => n,
        Mode::Interactive => 1,
        Mode::BatchOnly => 0,
    };
    if n_srun == 0 {
        return;
    }
    let tasks = match j.mode {
        Mode::Interactive => 1,
        _ => j.tasks_per_node * nn,
    };
    let dur = (horizon - start).max(0);
    let mut st = start
        + if j.mode == Mode::Interactive {
            0
        } else if j.prof == Prof::Train {
            r.gen_range(5..60).min(dur)
        } else {
            r.gen_range(0..8).min(dur)
        };
    for k in 0..n_srun {
        let last = k + 1 == n_srun;
        if st >= e {
            break;
        }
        let step_end_nat = if last { horizon } else { st + ((horizon - st) as f64 * r.gen_range(0.1..0.4)) as i64 };
        let mut s = blank(i32::from(k), j.tpl.step, &j.nodes);
        s.time_start = st;
        s.task_cnt = tasks;
        s.task_dist = 1;
        s.req_cpufreq_min = NO_VAL;
        s.req_cpufreq = NO_VAL;
        s.req_cpufreq_gov = NO_VAL;
        let cmd = if j.mode == Mode::Interactive {
            j.submit_line.to_string()
        } else if j.prof == Prof::Train || j.prof == Prof::Nccl {
            format!(
                "srun --ntasks-per-node={} --cpus-per-task={} {}",
                j.tasks_per_node,
                j.req_cpus / (nn * j.tasks_per_node).max(1),
                j.tpl.cmd
            )
        } else if k == 0 && n_srun > 1 {
            "srun python prepare_data.py".to_string()
        } else {
            format!("srun {}", j.tpl.cmd)
        };
        if k == 0 && n_srun > 1 {
            s.step_name = "python".to_string();
        }
        s.submit_line = Some(cmd);
        let mut pairs = vec![(t.cpu, cpus_total), (t.mem, mem_total), (t.node, u64::from(nn))];
        if gpus_total > 0 {
            pairs.push((t.gpu, gpus_total));
        }
        s.tres_alloc = tres_of(&mut pairs);
        let finished = !(running && last) && step_end_nat <= e;
        if finished {
            let te = if last { (end - r.gen_range(0..3)).max(st) } else { step_end_nat };
            s.time_end = te;
            let (stt, ex) = if !last {
                (JS_COMPLETE, 0)
            } else {
                match j.kind {
                    Kind::Completed => (JS_COMPLETE, 0),
                    Kind::Failed(fk) => {
                        let x = step_exit(fk);
                        (state_for_exit(x), x)
                    }
                    Kind::Oom => (JS_OOM, 253),
                    Kind::Cancelled { .. } | Kind::Timeout => (JS_CANCELLED, 15),
                    Kind::NodeFail | Kind::Requeued => (JS_CANCELLED, 0),
                    _ => (JS_COMPLETE, 0),
                }
            };
            s.state = stt;
            s.exit_code = ex as i32;
            s.kill_requid = if last { kill_uid } else { None };
            if !(last && no_stats) {
                let el = (te - st) as f64;
                let cpt = f64::from(j.cpn * nn) / f64::from(tasks.max(1));
                let mpt = (j.mpn * u64::from(nn)) as f64 / f64::from(tasks.max(1));
                let u = task_usage(&mut r, j.prof, el, cpt, mpt, last && j.kind == Kind::Oom);
                let tpn = if j.mode == Mode::Interactive { 1 } else { j.tasks_per_node };
                finish_fields(&mut r, &mut s, &u, tasks, tpn);
            }
            st = te + r.gen_range(1..5);
        } else {
            out.push(s);
            break;
        }
        out.push(s);
    }
}

// ---------------------------------------------------------------------------------------
// writing
// ---------------------------------------------------------------------------------------

const JOB_COLS: &str = "job_db_inx, mod_time, deleted, account, admin_comment, array_task_str, array_max_tasks, \
array_task_pending, constraints, container, cpus_req, derived_ec, derived_es, env_hash_inx, exit_code, flags, \
job_name, id_assoc, id_array_job, id_array_task, id_block, id_job, id_qos, id_resv, id_wckey, id_user, id_group, \
het_job_id, het_job_offset, kill_requid, state_reason_prev, mcs_label, mem_req, nodelist, nodes_alloc, node_inx, \
`partition`, priority, script_hash_inx, state, timelimit, time_submit, time_eligible, time_start, time_end, \
time_suspended, gres_used, wckey, work_dir, submit_line, system_comment, tres_alloc, tres_req";

const JOB_TUPLE: &str = "(?,?,0,?,NULL,?,?,?,'',NULL,?,?,NULL,0,?,?,?,?,?,?,NULL,?,?,0,0,?,?,?,?,?,0,'',?,?,?,?,?,?,0,?,?,?,?,?,?,0,'','',?,?,NULL,?,?)";

const STEP_COLS: &str = "job_db_inx, deleted, exit_code, id_step, step_het_comp, kill_requid, nodelist, nodes_alloc, \
node_inx, state, step_name, task_cnt, task_dist, time_start, time_end, time_suspended, user_sec, user_usec, sys_sec, \
sys_usec, act_cpufreq, consumed_energy, container, req_cpufreq_min, req_cpufreq, req_cpufreq_gov, submit_line, \
tres_alloc, tres_usage_in_ave, tres_usage_in_max, tres_usage_in_max_taskid, tres_usage_in_max_nodeid, \
tres_usage_in_min, tres_usage_in_min_taskid, tres_usage_in_min_nodeid, tres_usage_in_tot, tres_usage_out_ave, \
tres_usage_out_max, tres_usage_out_max_taskid, tres_usage_out_max_nodeid, tres_usage_out_min, \
tres_usage_out_min_taskid, tres_usage_out_min_nodeid, tres_usage_out_tot";

const STEP_TUPLE: &str =
    "(?,0,?,?,4294967294,?,?,?,?,?,?,?,?,?,?,0,?,?,?,?,?,0,NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

const CHUNK: usize = 1000;

fn insert_sql(table: &str, cols: &str, tuple: &str, rows: usize) -> String {
    let mut s = String::with_capacity(64 + cols.len() + rows * (tuple.len() + 1));
    let _ = write!(s, "INSERT INTO `{table}` ({cols}) VALUES ");
    for i in 0..rows {
        if i > 0 {
            s.push(',');
        }
        s.push_str(tuple);
    }
    s
}

struct JobVals {
    inx: u64,
    mod_time: i64,
    state: u32,
    exit_code: u32,
    derived_ec: u32,
    kill_requid: Option<u32>,
    nodelist: String,
    node_inx: Option<String>,
    tres_alloc: String,
    tres_req: String,
    time_start: i64,
    time_end: i64,
}

fn job_vals(ctx: &Ctx, plan: &Plan, j: &JobRow, inx: u64) -> JobVals {
    let t = &ctx.tres;
    let (state, exit_code) = j.state_exit();
    let mut req = vec![
        (t.cpu, u64::from(j.req_cpus)),
        (t.mem, j.req_mem),
        (t.node, u64::from(j.req_nodes)),
        (t.billing, u64::from(j.req_cpus)),
    ];
    if j.req_gpus > 0 {
        req.push((t.gpu, u64::from(j.req_gpus)));
    }
    let started = j.started() && !matches!(j.kind, Kind::CancelledPending { .. });
    let (nodelist, node_inx_v, tres_alloc) = if started {
        let nn = j.nodes.len() as u64;
        let mut a =
            vec![(t.cpu, u64::from(j.cpn) * nn), (t.mem, j.mpn * nn), (t.node, nn), (t.billing, u64::from(j.cpn) * nn)];
        if j.gpn > 0 {
            a.push((t.gpu, u64::from(j.gpn) * nn));
        }
        if matches!(j.kind, Kind::Running | Kind::Timeout | Kind::Cancelled { .. }) {
            a.push((t.energy, NO_VAL64));
        }
        (hostlist(&j.nodes, plan.width), Some(node_inx(&j.nodes)), tres_str(&mut a))
    } else {
        ("None assigned".to_string(), None, String::new())
    };
    let derived_ec = match (j.kind, j.mode) {
        (Kind::Failed(k), Mode::Srun(_) | Mode::Interactive) => step_exit(k),
        (Kind::Oom, Mode::Srun(_) | Mode::Interactive) => 253,
        _ => 0,
    };
    let kill_requid = match j.kind {
        Kind::Cancelled { uid } | Kind::CancelledPending { uid } => Some(uid),
        _ => None,
    };
    let mod_time = if j.t_end > 0 {
        j.t_end
    } else if j.t_start > 0 {
        j.t_start
    } else {
        j.t_submit
    };
    JobVals {
        inx,
        mod_time,
        state,
        exit_code,
        derived_ec,
        kill_requid,
        nodelist,
        node_inx: node_inx_v,
        tres_alloc,
        tres_req: tres_str(&mut req),
        time_start: j.t_start,
        time_end: j.t_end,
    }
}

fn add<'q, T>(a: &mut MySqlArguments, v: T) -> Result<()>
where
    T: 'q + sqlx::Encode<'q, MySql> + sqlx::Type<MySql>,
{
    a.add(v).map_err(|e| anyhow::anyhow!("encoding a value: {e}"))
}

fn encode_jobs(ctx: &Ctx, plan: &Plan, base: u64, first: usize, chunk: &[JobRow]) -> Result<MySqlArguments> {
    let mut a = MySqlArguments::default();
    for (k, j) in chunk.iter().enumerate() {
        let v = job_vals(ctx, plan, j, base + (first + k) as u64);
        let u = &ctx.users[j.ua];
        add(&mut a, v.inx)?;
        add(&mut a, v.mod_time)?;
        add(&mut a, u.acct.as_str())?;
        add(&mut a, j.arr_str.as_deref())?;
        add(&mut a, j.arr_max)?;
        add(&mut a, j.arr_pending)?;
        add(&mut a, j.cpus_req)?;
        add(&mut a, v.derived_ec)?;
        add(&mut a, v.exit_code)?;
        add(&mut a, j.flags)?;
        add(&mut a, j.tpl.name.as_str())?;
        add(&mut a, u.id_assoc)?;
        add(&mut a, j.id_array_job)?;
        add(&mut a, j.id_array_task)?;
        add(&mut a, j.id_job)?;
        add(&mut a, j.qos)?;
        add(&mut a, u.uid)?;
        add(&mut a, u.gid)?;
        add(&mut a, j.het_job_id)?;
        add(&mut a, j.het_job_offset)?;
        add(&mut a, v.kill_requid)?;
        add(&mut a, j.mem_req)?;
        add(&mut a, v.nodelist.as_str())?;
        add(&mut a, if v.node_inx.is_some() { j.nodes.len() as u32 } else { 0 })?;
        add(&mut a, v.node_inx.as_deref())?;
        add(&mut a, if j.debug { "debug" } else { "gpu" })?;
        add(&mut a, j.priority)?;
        add(&mut a, v.state)?;
        add(&mut a, j.timelimit)?;
        add(&mut a, j.t_submit)?;
        add(&mut a, j.t_eligible)?;
        add(&mut a, v.time_start)?;
        add(&mut a, v.time_end)?;
        add(&mut a, &*j.work_dir)?;
        add(&mut a, &*j.submit_line)?;
        add(&mut a, v.tres_alloc.as_str())?;
        add(&mut a, v.tres_req.as_str())?;
    }
    Ok(a)
}

fn encode_steps(rows: &[StepRow]) -> Result<MySqlArguments> {
    let mut a = MySqlArguments::default();
    for s in rows {
        add(&mut a, s.job_db_inx)?;
        add(&mut a, s.exit_code)?;
        add(&mut a, s.id_step)?;
        add(&mut a, s.kill_requid)?;
        add(&mut a, s.nodelist.as_str())?;
        add(&mut a, s.nodes_alloc)?;
        add(&mut a, s.node_inx.as_str())?;
        add(&mut a, s.state)?;
        add(&mut a, s.step_name.as_str())?;
        add(&mut a, s.task_cnt)?;
        add(&mut a, s.task_dist)?;
        add(&mut a, s.time_start)?;
        add(&mut a, s.time_end)?;
        add(&mut a, s.user_sec)?;
        add(&mut a, s.user_usec)?;
        add(&mut a, s.sys_sec)?;
        add(&mut a, s.sys_usec)?;
        add(&mut a, s.act_cpufreq)?;
        add(&mut a, s.req_cpufreq_min)?;
        add(&mut a, s.req_cpufreq)?;
        add(&mut a, s.req_cpufreq_gov)?;
        add(&mut a, s.submit_line.as_deref())?;
        add(&mut a, s.tres_alloc.as_str())?;
        for col in &s.usage {
            add(&mut a, col.as_str())?;
        }
    }
    Ok(a)
}

type Encoded = Result<(usize, MySqlArguments)>;

/// Runs on a blocking thread: encodes the job rows chunk by chunk.
fn produce_jobs(ctx: &Ctx, plan: &Plan, base: u64, out: &mpsc::Sender<Encoded>) {
    for (ci, chunk) in plan.jobs.chunks(CHUNK).enumerate() {
        let b = encode_jobs(ctx, plan, base, ci * CHUNK, chunk).map(|a| (chunk.len(), a));
        if out.blocking_send(b).is_err() {
            return;
        }
    }
}

/// Runs on a blocking thread: materialises and encodes the step rows chunk by chunk.
fn produce_steps(p: &HistoryParams, ctx: &Ctx, plan: &Plan, base: u64, out: &mpsc::Sender<Encoded>) {
    let mut buf: Vec<StepRow> = Vec::with_capacity(CHUNK + 16);
    let n = plan.jobs.len();
    for (i, j) in plan.jobs.iter().enumerate() {
        steps_for(p, ctx, plan, j, base + i as u64, &mut buf);
        while buf.len() >= CHUNK || (i + 1 == n && !buf.is_empty()) {
            let take = buf.len().min(CHUNK);
            let b = encode_steps(&buf[..take]).map(|a| (take, a));
            buf.drain(..take);
            if out.blocking_send(b).is_err() {
                return;
            }
        }
    }
}

/// Inserts encoded chunks from `rx` into `table` on one connection.
async fn insert_stream(
    conn: &mut MySqlConnection,
    table: &str,
    cols: &str,
    tuple: &str,
    mut rx: mpsc::Receiver<Encoded>,
) -> Result<u64> {
    let full = insert_sql(table, cols, tuple, CHUNK);
    let mut n = 0u64;
    while let Some(b) = rx.recv().await {
        let (rows, args) = b?;
        let part;
        let sql = if rows == CHUNK {
            full.as_str()
        } else {
            part = insert_sql(table, cols, tuple, rows);
            part.as_str()
        };
        sqlx::query_with(sql, args).execute(&mut *conn).await.with_context(|| format!("inserting into {table}"))?;
        n += rows as u64;
    }
    Ok(n)
}

async fn delete_all(conn: &mut MySqlConnection, tables: &[&str]) -> Result<()> {
    for table in tables {
        sqlx::query(&format!("DELETE FROM `{table}`"))
            .execute(&mut *conn)
            .await
            .with_context(|| format!("clearing {table}"))?;
    }
    Ok(())
}

/// Deletes the cluster's old rows and inserts the plan. With a pool of two or more
/// connections, jobs (+ events) and steps go through two transactions in parallel
/// (committed together at the end), else through one.
async fn write_plan(pool: &MySqlPool, p: &HistoryParams, ctx: &Arc<Ctx>, plan: &Arc<Plan>) -> Result<(u64, u64, u64)> {
    let c = &p.cluster;
    let job_table = format!("{c}_job_table");
    let step_table = format!("{c}_step_table");
    let event_table = format!("{c}_event_table");
    let t = &ctx.tres;
    let tw = Instant::now();
    let parallel = pool.options().get_max_connections() >= 2;
    let mut tj = pool.begin().await?;
    let mut ts = if parallel { Some(pool.begin().await?) } else { None };
    match ts.as_mut() {
        Some(ts) => {
            let (st, jt) = ([step_table.as_str()], [job_table.as_str(), event_table.as_str()]);
            let (a, b) = tokio::join!(delete_all(ts, &st), delete_all(&mut tj, &jt));
            a?;
            b?;
        }
        None => delete_all(&mut tj, &[&step_table, &job_table, &event_table]).await?,
    }
    let max_inx: Option<u64> =
        sqlx::query_scalar(&format!("SELECT MAX(job_db_inx) FROM `{job_table}`")).fetch_one(&mut *tj).await?;
    let base = max_inx.unwrap_or(0) + 1;
    tracing::debug!(secs = tw.elapsed().as_secs_f64(), "history: old rows deleted");

    // events: registration row + node events
    let n = u64::from(p.n_nodes);
    let g = u64::from(p.gpus_per_node);
    let all: Vec<u16> = (0..p.n_nodes as u16).collect();
    let reg_tres = tres_str(&mut [
        (t.cpu, n * u64::from(NODE_CPUS)),
        (t.mem, n * NODE_MEM),
        (t.energy, 0),
        (t.node, n),
        (t.billing, n * u64::from(NODE_CPUS)),
        (t.disk, 0),
        (t.vmem, 0),
        (t.pages, 0),
        (t.gpu, n * g),
    ]);
    let node_tres = tres_str(&mut [
        (t.cpu, u64::from(NODE_CPUS)),
        (t.mem, NODE_MEM),
        (t.billing, u64::from(NODE_CPUS)),
        (t.gpu, g),
    ]);
    {
        let rows = plan.events.len() + 1;
        let mut sql = format!(
            "INSERT INTO `{event_table}` (time_start, time_end, node_name, cluster_nodes, reason, reason_uid, state, tres) VALUES "
        );
        for i in 0..rows {
            if i > 0 {
                sql.push(',');
            }
            sql.push_str("(?,?,?,?,?,?,?,?)");
        }
        let mut q = sqlx::query(&sql)
            .bind(plan.start)
            .bind(0i64)
            .bind("")
            .bind(hostlist(&all, plan.width))
            .bind("Cluster Registered TRES")
            .bind(NO_VAL)
            .bind(0u32)
            .bind(reg_tres.as_str());
        for e in &plan.events {
            q = q
                .bind(e.ts)
                .bind(if e.te == i64::MAX { 0 } else { e.te })
                .bind(hostlist(&[e.node as u16], plan.width))
                .bind("")
                .bind(e.reason)
                .bind(e.uid)
                .bind(e.state)
                .bind(node_tres.as_str());
        }
        q.execute(&mut *tj).await.context("inserting events")?;
    }

    // jobs and steps: encoded on blocking threads, inserted here
    let (jsend, jrecv) = mpsc::channel::<Encoded>(3);
    let (ssend, srecv) = mpsc::channel::<Encoded>(3);
    let jprod = {
        let (ctx, plan) = (Arc::clone(ctx), Arc::clone(plan));
        tokio::task::spawn_blocking(move || produce_jobs(&ctx, &plan, base, &jsend))
    };
    let sprod = {
        let (p, ctx, plan) = (p.clone(), Arc::clone(ctx), Arc::clone(plan));
        tokio::task::spawn_blocking(move || produce_steps(&p, &ctx, &plan, base, &ssend))
    };
    let (jobs, steps) = match ts.as_mut() {
        Some(ts) => {
            let (a, b) = tokio::join!(
                insert_stream(&mut tj, &job_table, JOB_COLS, JOB_TUPLE, jrecv),
                insert_stream(ts, &step_table, STEP_COLS, STEP_TUPLE, srecv)
            );
            (a?, b?)
        }
        None => {
            let a = insert_stream(&mut tj, &job_table, JOB_COLS, JOB_TUPLE, jrecv).await?;
            tracing::debug!(secs = tw.elapsed().as_secs_f64(), "history: events and jobs inserted");
            let b = insert_stream(&mut tj, &step_table, STEP_COLS, STEP_TUPLE, srecv).await?;
            (a, b)
        }
    };
    jprod.await.context("job row producer panicked")?;
    sprod.await.context("step row producer panicked")?;
    ensure!(jobs == plan.jobs.len() as u64, "job row producer stopped early");
    tracing::debug!(secs = tw.elapsed().as_secs_f64(), "history: rows inserted");
    tj.commit().await?;
    if let Some(ts) = ts {
        ts.commit().await?;
    }
    tracing::debug!(secs = tw.elapsed().as_secs_f64(), "history: committed");
    Ok((jobs, steps, plan.events.len() as u64 + 1))
}

// ---------------------------------------------------------------------------------------
// tests (no database: the plan is built against a synthetic context)
// ---------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_ctx() -> Ctx {
        let accts = ["llm", "ml", "ml-vision", "vision", "bio", "climate", "physics"];
        let mut users = Vec::new();
        for i in 0..14u32 {
            users.push(UserAssoc {
                id_assoc: 10 + i,
                user: format!("u{:02}", i + 1),
                acct: accts[(i as usize) % accts.len()].to_string(),
                is_def: true,
                uid: 2001 + i,
                gid: 2001 + i,
            });
        }
        Ctx {
            tres: TresIds { cpu: 1, mem: 2, energy: 3, node: 4, billing: 5, disk: 6, vmem: 7, pages: 8, gpu: 1001 },
            qos_normal: 1,
            qos_high: Some(2),
            qos_debug: None,
            qos_low: None,
            users,
        }
    }

    fn small() -> HistoryParams {
        let end = DateTime::<Utc>::from_timestamp(1_795_974_000, 0).unwrap_or_default();
        HistoryParams { cluster: "sakura".into(), end, days: 7, n_jobs: 6000, n_nodes: 20, gpus_per_node: 8, seed: 7 }
    }

    #[test]
    fn formats() {
        assert_eq!(hostlist(&[0, 1, 2, 3, 9], 3), "gpu[001-004,010]");
        assert_eq!(hostlist(&[4], 3), "gpu005");
        assert_eq!(node_inx(&[0, 1, 2, 3, 9]), "0-3,9");
        assert_eq!(hex_bitmap(&[true; 10]), "0x3FF");
        let mut b = vec![false; 12];
        b[4..].iter_mut().for_each(|x| *x = true);
        assert_eq!(hex_bitmap(&b), "0xFF0");
        assert_eq!(tres_str(&mut [(1001, 2), (1, 2), (4, 1)]), "1=2,4=1,1001=2");
        assert_eq!(fmt_time_limit(2880), "2-00:00:00");
        assert!(validate(&HistoryParams { cluster: "a-b".into(), ..small() }).is_err());
    }

    #[test]
    fn deterministic_and_consistent() {
        let ctx = fake_ctx();
        let p = small();
        let a = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        let b = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.jobs.len(), b.jobs.len());
        assert!(
            a.jobs
                .iter()
                .zip(&b.jobs)
                .all(|(x, y)| x.id_job == y.id_job && x.t_start == y.t_start && x.nodes == y.nodes)
        );
        assert!(a.jobs.len() >= p.n_jobs as usize);
        // per node sweep: GPUs, CPUs and memory never exceed capacity; nothing runs in an event
        let mut ev: Vec<(usize, i64, i64)> = Vec::new();
        for e in &a.events {
            ev.push((e.node, e.ts, e.te));
        }
        let mut deltas: Vec<Vec<(i64, i64, i64, i64)>> = vec![Vec::new(); p.n_nodes as usize];
        for j in a.jobs.iter().filter(|j| j.started() && !matches!(j.kind, Kind::CancelledPending { .. })) {
            let end = if j.t_end == 0 { a.end } else { j.t_end };
            assert!(end >= j.t_start);
            for &n in &j.nodes {
                let n = usize::from(n);
                deltas[n].push((j.t_start, i64::from(j.gpn), i64::from(j.cpn), j.mpn as i64));
                deltas[n].push((end, -i64::from(j.gpn), -i64::from(j.cpn), -(j.mpn as i64)));
                for &(en, ts, te) in &ev {
                    if en == n {
                        assert!(end <= ts || j.t_start >= te, "job {} overlaps event on node {n}", j.id_job);
                    }
                }
            }
        }
        for d in &mut deltas {
            d.sort_by_key(|x| (x.0, x.1 + x.2 + x.3 > 0));
            let (mut gg, mut cc, mut mm) = (0i64, 0i64, 0i64);
            for &(_, dg, dc, dm) in d.iter() {
                gg += dg;
                cc += dc;
                mm += dm;
                assert!(gg <= 8 && cc <= i64::from(NODE_CPUS) && mm <= NODE_MEM as i64, "overcommit {gg} {cc} {mm}");
            }
        }
        let st = a.stats(&p);
        assert!(st.per_state.contains_key("RUNNING"));
        assert!(st.per_state.contains_key("PENDING"));
        assert!(st.per_state.contains_key("COMPLETED"));
    }

    #[test]
    fn plants_an_xid_killed_training_run_and_an_application_crash_near_the_end() {
        let ctx = fake_ctx();
        let p = small();
        let plan = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        let (earliest, latest) = (plan.end - 40 * 3600, plan.end - 4 * 3600);
        let row = |id: Option<u32>| {
            let id = id.expect("the planted job was placed");
            plan.jobs.iter().find(|j| j.id_job == id).expect("its row")
        };
        let victim = row(plan.xid_victim);
        assert_eq!(victim.kind, Kind::NodeFail);
        assert_eq!(victim.state_exit(), (JS_NODE_FAIL, 1));
        assert_eq!((victim.nodes.len(), victim.gpn), (2, 8), "a two-node training run");
        assert!((earliest..=latest).contains(&victim.t_end), "inside the telemetry window");
        let node = usize::from(victim.nodes[0]);
        let event = plan
            .events
            .iter()
            .find(|e| e.node == node && e.ts == victim.t_end)
            .expect("a DOWN event on its node when it ended");
        assert!(event.reason.starts_with("Xid 79") && event.kill && event.te > event.ts);
        let crash = row(plan.app_crash);
        assert_eq!(crash.kind, Kind::Failed(FailKind::Segv));
        assert_eq!((crash.nodes.len(), crash.gpn), (1, 4));
        assert!((earliest..=latest).contains(&crash.t_end));
        assert!(
            !plan
                .events
                .iter()
                .any(|e| e.node == usize::from(crash.nodes[0]) && e.ts < crash.t_end + 600 && e.te > crash.t_start),
            "no infrastructure fault around the crash"
        );
        let mut steps = Vec::new();
        steps_for(&p, &ctx, &plan, crash, 1, &mut steps);
        assert!(steps.iter().any(|step| step.exit_code == 11), "the srun step died of SIGSEGV");
        let mut steps = Vec::new();
        steps_for(&p, &ctx, &plan, victim, 2, &mut steps);
        assert!(steps.iter().all(|step| step.time_end <= victim.t_end), "no step outlives the node");
        let again = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((again.xid_victim, again.app_crash), (plan.xid_victim, plan.app_crash), "same seed, same jobs");
    }

    /// Feeds formatted text straight into the hasher, so that a million rows never sit in one string.
    struct HashWriter<'a>(&'a mut sha2::Sha256);

    impl fmt::Write for HashWriter<'_> {
        fn write_str(&mut self, text: &str) -> fmt::Result {
            sha2::Digest::update(self.0, text.as_bytes());
            Ok(())
        }
    }

    /// SHA-256 of everything `write_plan` would send: the statements' column lists, the encoded
    /// values of every event, job and step row (job_db_inx from 1), and the summary.
    fn rows_digest(p: &HistoryParams, ctx: &Ctx, plan: &Plan) -> String {
        let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
        let mut out = HashWriter(&mut hasher);
        let t = &ctx.tres;
        let _ = write!(out, "{JOB_COLS}{JOB_TUPLE}{STEP_COLS}{STEP_TUPLE}{:?}", plan.stats(p));
        let n = u64::from(p.n_nodes);
        let g = u64::from(p.gpus_per_node);
        let all: Vec<u16> = (0..p.n_nodes as u16).collect();
        let reg_tres = tres_str(&mut [
            (t.cpu, n * u64::from(NODE_CPUS)),
            (t.mem, n * NODE_MEM),
            (t.energy, 0),
            (t.node, n),
            (t.billing, n * u64::from(NODE_CPUS)),
            (t.disk, 0),
            (t.vmem, 0),
            (t.pages, 0),
            (t.gpu, n * g),
        ]);
        let node_tres = tres_str(&mut [
            (t.cpu, u64::from(NODE_CPUS)),
            (t.mem, NODE_MEM),
            (t.billing, u64::from(NODE_CPUS)),
            (t.gpu, g),
        ]);
        let mut a = MySqlArguments::default();
        let encoded: Result<()> = (|| {
            add(&mut a, plan.start)?;
            add(&mut a, 0i64)?;
            add(&mut a, "")?;
            add(&mut a, hostlist(&all, plan.width))?;
            add(&mut a, "Cluster Registered TRES")?;
            add(&mut a, NO_VAL)?;
            add(&mut a, 0u32)?;
            add(&mut a, reg_tres.as_str())?;
            for e in &plan.events {
                add(&mut a, e.ts)?;
                add(&mut a, if e.te == i64::MAX { 0 } else { e.te })?;
                add(&mut a, hostlist(&[e.node as u16], plan.width))?;
                add(&mut a, "")?;
                add(&mut a, e.reason)?;
                add(&mut a, e.uid)?;
                add(&mut a, e.state)?;
                add(&mut a, node_tres.as_str())?;
            }
            Ok(())
        })();
        encoded.unwrap_or_else(|e| panic!("{e}"));
        let _ = write!(out, "{a:?}");
        let base = 1;
        for (index, job) in plan.jobs.iter().enumerate() {
            let args = encode_jobs(ctx, plan, base, index, std::slice::from_ref(job)).unwrap_or_else(|e| panic!("{e}"));
            let _ = write!(out, "{args:?}");
            let mut steps = Vec::new();
            steps_for(p, ctx, plan, job, base + index as u64, &mut steps);
            let args = encode_steps(&steps).unwrap_or_else(|e| panic!("{e}"));
            let _ = write!(out, "{args:?}");
        }
        let digest = sha2::Digest::finalize(hasher);
        digest.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    #[test]
    fn small_history_rows_digest() {
        let ctx = fake_ctx();
        let p = small();
        let plan = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        let digest = rows_digest(&p, &ctx, &plan);
        println!("small digest {digest} jobs {}", plan.jobs.len());
    }

    #[test]
    #[ignore]
    fn default_history_rows_digest() {
        let ctx = fake_ctx();
        let p = default_params(DateTime::<Utc>::from_timestamp(1_795_974_000, 0).unwrap_or_default());
        let t = Instant::now();
        let plan = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        println!("built in {:.1} s", t.elapsed().as_secs_f64());
        let digest = rows_digest(&p, &ctx, &plan);
        println!("default digest {digest} jobs {} in {:.1} s", plan.jobs.len(), t.elapsed().as_secs_f64());
    }

    /// `cargo test ... -- --ignored --nocapture bench_default_plan`: the full-size simulation.
    #[test]
    #[ignore]
    fn bench_default_plan() {
        let ctx = fake_ctx();
        let mut p = default_params(DateTime::<Utc>::from_timestamp(1_795_974_000, 0).unwrap_or_default());
        if let Some(seed) = std::env::var("HISTORY_SEED").ok().and_then(|s| s.parse().ok()) {
            p.seed = seed;
        }
        let t = Instant::now();
        let plan = build_plan(&p, &ctx).unwrap_or_else(|e| panic!("{e}"));
        let st = plan.stats(&p);
        println!("{} rows in {:.1} s\n{st}", plan.jobs.len(), t.elapsed().as_secs_f64());
        // mean queue wait per day (single-node / multi-node)
        let mut per_day: BTreeMap<i64, (f64, f64, f64, f64)> = BTreeMap::new();
        for j in plan.jobs.iter().filter(|j| j.started()) {
            let e = per_day.entry((j.t_submit - plan.start) / 86_400).or_default();
            let w = (j.t_start - j.t_submit) as f64 / 60.0;
            if j.nodes.len() > 1 {
                e.2 += w;
                e.3 += 1.0;
            } else {
                e.0 += w;
                e.1 += 1.0;
            }
        }
        let days: Vec<String> =
            per_day.iter().map(|(d, v)| format!("{d}:{:.0}/{:.0}", v.0 / v.1.max(1.0), v.2 / v.3.max(1.0))).collect();
        println!("wait min (1-node/multi) per day: {}", days.join(" "));
    }
}
