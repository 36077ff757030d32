//! `slurmlens-dev demo seed-long-job`: the issue's long job (#16), a fortnight-long pre-training run on
//! 96 nodes (768 GPUs) scraped every 15 s, written into VictoriaMetrics beside the demo cluster's mix
//! on nodes of its own (`lj001`…). Only the report's GPU metrics are written (62 M samples per metric
//! at full size; `--metrics` picks some): what a long report scans; the node, RDMA and XID series of
//! such a job are left out.
//! `bench long-report` reports on a record it builds; `demo record-long-job` writes the same run's
//! record into a cluster's slurmdbd tables (job `LONG_JOB_ID` of an `llm` user, its batch step and one
//! training step over every node), so the demo's pages show it.

use anyhow::Context;
use chrono::{DateTime, Utc};
use slurmlens::config::Config;
use slurmlens::domain::exit_code::ExitCode;
use slurmlens::domain::hostlist::Hostlist;
use slurmlens::domain::ids::JobIdentity;
use slurmlens::domain::job::JobRecord;
use slurmlens::domain::state::JobState;
use slurmlens::domain::time::TimeLimit;
use slurmlens::domain::tres::{MemRequest, TresMap};
use slurmlens::sources::victoriametrics::VictoriaMetrics;

/// The job id the long job's slurmdbd record carries (far above the demo's own).
pub const LONG_JOB_ID: u32 = 9_000_001;
/// The long job's nodes are `lj001`, `lj002`, …: a prefix no demo cluster uses.
pub const NODE_PREFIX: &str = "lj";
/// slurmdbd's raw state of a completed job.
const JOB_COMPLETE: u32 = 3;

/// Arguments of `slurmlens-dev demo seed-long-job`.
#[derive(Debug, Clone, clap::Args)]
pub struct LongJobArgs {
    /// Days the job ran, ending at the last whole hour.
    #[arg(long, default_value_t = 14)]
    pub days: i64,
    #[arg(long, default_value_t = 96)]
    pub nodes: u32,
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u16,
    /// Seconds between samples (the scrape interval).
    #[arg(long, default_value_t = 15)]
    pub step: i64,
    /// The catalogue keys to write (comma-separated; all GPU metrics when empty). A full-size job is
    /// 62 M samples per metric: on a small machine, choose the ones to measure.
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
}

impl LongJobArgs {
    /// The job's nodes.
    pub fn node_names(&self) -> Vec<String> {
        (1..=self.nodes).map(|node| format!("{NODE_PREFIX}{node:03}")).collect()
    }
}

/// What `seed` wrote.
#[derive(Debug)]
pub struct LongJobStats {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub samples: usize,
    pub seconds: f64,
}

/// A training step of the run: compute (tensor cores busy) then an all-reduce (tensor cores idle),
/// with a slow drift over the days and a little noise, from a hash (no state: any chunk alone).
fn reading(metric: &str, gpu_seed: u64, at: i64) -> f64 {
    let mut x = (at as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ gpu_seed;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let noise = ((x >> 11) % 1000) as f64 / 1000.0 - 0.5;
    let communicating = at.rem_euclid(60) >= 48;
    let drift = ((at / 3600) % 24) as f64 / 24.0;
    match metric {
        "gpu_util" => (if communicating { 96.0 } else { 99.0 } + noise).min(100.0),
        "sm_active" => (if communicating { 0.35 } else { 0.8 }) + noise * 0.05,
        "tensor_active" => ((if communicating { 0.04 } else { 0.45 }) + noise * 0.04 + drift * 0.02).max(0.0),
        "dram_active" => 0.38 + noise * 0.06,
        "fb_used" => 71_000.0 + noise * 400.0,
        "power" => (if communicating { 430.0 } else { 650.0 }) + noise * 40.0,
        "temperature" => 66.0 + drift * 4.0 + noise * 2.0,
        _ => 0.0,
    }
}

/// The job's window: `days` ending at the last whole hour before `now`.
pub fn window(args: &LongJobArgs, now: DateTime<Utc>) -> (i64, i64) {
    let end = now.timestamp() - now.timestamp().rem_euclid(3600);
    (end - args.days * 86_400, end)
}

/// Writes the long job's GPU series over its window, a day of four nodes at a time.
pub async fn seed(config: &Config, vm: &VictoriaMetrics, args: &LongJobArgs) -> anyhow::Result<LongJobStats> {
    let started = std::time::Instant::now();
    let (start, end) = window(args, Utc::now());
    let nodes = args.node_names();
    let mut samples = 0;
    let mut day_start = start;
    while day_start < end {
        let day_end = (day_start + 86_400).min(end);
        let stamps: Vec<i64> = (day_start..day_end).step_by(args.step.max(1) as usize).collect();
        let millis = serde_json::to_string(&stamps.iter().map(|t| t * 1000).collect::<Vec<_>>())?;
        for batch in nodes.chunks(4) {
            let mut body = String::new();
            for node in batch {
                for gpu in 0..args.gpus_per_node {
                    let gpu_seed = slurmlens_seed(node, gpu);
                    let uuid = super::telemetry::gpu_uuid(node, gpu);
                    let written = |key: &str| args.metrics.is_empty() || args.metrics.iter().any(|m| m == key);
                    for spec in config.metrics.gpu_metrics.iter().filter(|spec| written(&spec.key)) {
                        let values: Vec<f64> = stamps
                            .iter()
                            .map(|&t| (reading(&spec.key, gpu_seed, t) * 1000.0).round() / 1000.0)
                            .collect();
                        let labels = serde_json::json!({
                            "__name__": spec.name.as_str(), "Hostname": node, "gpu": gpu.to_string(), "UUID": uuid,
                        });
                        body.push_str(&format!(
                            "{{\"metric\":{labels},\"values\":{},\"timestamps\":{millis}}}\n",
                            serde_json::to_string(&values)?
                        ));
                        samples += values.len();
                    }
                }
            }
            vm.import_json_lines(body).await?;
        }
        tracing::info!(day = %DateTime::from_timestamp(day_start, 0).unwrap_or_default(), samples, "long job: day written");
        day_start = day_end;
    }
    Ok(LongJobStats {
        start: DateTime::from_timestamp(start, 0).unwrap_or_default(),
        end: DateTime::from_timestamp(end, 0).unwrap_or_default(),
        samples,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn slurmlens_seed(node: &str, gpu: u16) -> u64 {
    node.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
        ^ (u64::from(gpu) << 48)
}

/// The long job's accounting record as slurmdbd would hold it (`job_id`, submitted at `time_submit`,
/// a COMPLETED run over `(start, end]`), for reports made without a slurmdbd row.
pub fn record(args: &LongJobArgs, job_id: u32, time_submit: u64, start: i64, end: i64) -> anyhow::Result<JobRecord> {
    let node_list = format!("{NODE_PREFIX}[001-{:03}]", args.nodes);
    let gpus = u64::from(args.nodes) * u64::from(args.gpus_per_node);
    let tres = TresMap::parse(&format!("1={},4={},1001={gpus}", 64 * args.nodes, args.nodes))
        .map_err(|error| anyhow::anyhow!("TRES: {}", error.0))?;
    Ok(JobRecord {
        db_index: u64::from(job_id),
        identity: JobIdentity::plain(job_id),
        job_name: "llm-pretrain-70b".into(),
        user: "alice".into(),
        uid: 1001,
        gid: 1001,
        account: "ml".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        state: JobState::from_raw(JOB_COMPLETE),
        kill_requid: None,
        exit_code: ExitCode::from_wait_status(0),
        derived_exit_code: ExitCode::from_wait_status(0),
        time_submit,
        time_eligible: time_submit,
        time_start: u64::try_from(start)?,
        time_end: u64::try_from(end)?,
        time_suspended: 0,
        timelimit: TimeLimit::from_raw(15 * 24 * 60),
        nodes: Hostlist::parse(&node_list).map_err(|error| anyhow::anyhow!("hostlist: {error}"))?,
        node_list,
        alloc_nodes: args.nodes,
        cpus_req: 64 * args.nodes,
        mem_req: MemRequest::from_raw(0),
        tres_alloc: tres.clone(),
        tres_req: tres,
        comment: None,
        work_dir: "/home/alice/llm".into(),
        submit_line: "sbatch pretrain.sh".into(),
        sluid: None,
        restarts: None,
    })
}

/// The seeded job's window `(first sample, last sample + step)`, from its samples in VictoriaMetrics
/// (looked for over `days` and two more before now); `None` when none was seeded.
pub async fn seeded_window(
    config: &Config,
    vm: &VictoriaMetrics,
    args: &LongJobArgs,
) -> anyhow::Result<Option<(i64, i64)>> {
    let util = config.metrics.gpu_metrics.first().context("no GPU metric in the catalogue")?.name.clone();
    let look_back = (args.days + 2) * 86_400;
    let selector = format!(r#"{util}{{Hostname=~"{NODE_PREFIX}[0-9]+"}}"#);
    let now = Utc::now();
    let edge = |function: &'static str, merge: &'static str| {
        let query = format!("{merge}({function}({selector}[{look_back}s]))");
        async move {
            let answer = vm.query(&query, now).await?;
            anyhow::Ok(answer.first().and_then(|series| series.points.last()).map(|&(_, value)| value as i64))
        }
    };
    let (first, last) = futures::try_join!(edge("tfirst_over_time", "min"), edge("tlast_over_time", "max"))?;
    Ok(first.zip(last).map(|(first, last)| (first, last + args.step)))
}

/// Writes the long job's record over `(start, end]` into `cluster`'s slurmdbd tables through
/// `seeder_url` (replacing an earlier one): COMPLETED, of the first `llm` user, its batch step on the
/// first node and its training step (`torchrun`, a task per GPU) over every node. Returns the row's
/// `job_db_inx`.
pub async fn write_record(
    seeder_url: &str,
    cluster: &str,
    args: &LongJobArgs,
    (start, end): (i64, i64),
) -> anyhow::Result<u64> {
    use sqlx::Row;
    let cluster: slurmlens::domain::cluster::ClusterName = cluster.parse().map_err(anyhow::Error::msg)?;
    let (jobs, steps, assocs) =
        (format!("{cluster}_job_table"), format!("{cluster}_step_table"), format!("{cluster}_assoc_table"));
    let pool = sqlx::MySqlPool::connect(seeder_url).await.context("connecting as the seeder")?;
    let assoc = sqlx::query(&format!(
        "SELECT CAST(a.id_assoc AS UNSIGNED), a.user, \
         CAST(COALESCE((SELECT id_user FROM `{jobs}` j WHERE j.id_assoc = a.id_assoc LIMIT 1), 0) AS UNSIGNED), \
         CAST(COALESCE((SELECT id_group FROM `{jobs}` j WHERE j.id_assoc = a.id_assoc LIMIT 1), 0) AS UNSIGNED) \
         FROM `{assocs}` a WHERE a.acct = 'llm' AND a.user <> '' ORDER BY a.id_assoc LIMIT 1"
    ))
    .fetch_optional(&pool)
    .await?
    .context("the cluster has no user of account llm (seed its history first)")?;
    let (id_assoc, user, uid, gid): (u64, String, u64, u64) =
        (assoc.try_get(0)?, assoc.try_get(1)?, assoc.try_get(2)?, assoc.try_get(3)?);
    let nodes = args.nodes;
    let gpus = nodes * u32::from(args.gpus_per_node);
    let node_list = format!("{NODE_PREFIX}[001-{nodes:03}]");
    // 112 cores and 2 TB a node, every GPU: AllocTRES as slurmdbd keeps it (cpu, mem MB, node, billing, gres/gpu).
    let tres = format!("1={},2={},4={nodes},5={},1001={gpus}", 112 * nodes, 2_000_000 * u64::from(nodes), 112 * nodes);
    let mut tx = pool.begin().await?;
    sqlx::query(&format!(
        "DELETE s FROM `{steps}` s JOIN `{jobs}` j ON j.job_db_inx = s.job_db_inx WHERE j.id_job = ?"
    ))
    .bind(LONG_JOB_ID)
    .execute(&mut *tx)
    .await?;
    sqlx::query(&format!("DELETE FROM `{jobs}` WHERE id_job = ?")).bind(LONG_JOB_ID).execute(&mut *tx).await?;
    let submitted = start - 420;
    let inserted = sqlx::query(&format!(
        "INSERT INTO `{jobs}` (mod_time, account, cpus_req, job_name, id_assoc, id_job, id_qos, id_resv, id_wckey, \
         id_user, id_group, het_job_id, het_job_offset, state_reason_prev, mem_req, nodelist, nodes_alloc, node_inx, \
         `partition`, priority, state, timelimit, time_submit, time_eligible, time_start, time_end, work_dir, \
         submit_line, tres_alloc, tres_req) \
         VALUES (?, 'llm', ?, 'llm-pretrain-70b', ?, ?, 1, 0, 0, ?, ?, 0, 4294967294, 0, ?, ?, ?, '', 'gpu', 1000, ?, \
         ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))
    .bind(end)
    .bind(112 * nodes)
    .bind(id_assoc)
    .bind(LONG_JOB_ID)
    .bind(uid)
    .bind(gid)
    .bind(2_000_000_u64)
    .bind(&node_list)
    .bind(nodes)
    .bind(JOB_COMPLETE)
    .bind(15 * 24 * 60_u32)
    .bind(submitted)
    .bind(submitted)
    .bind(start)
    .bind(end)
    .bind(format!("/home/{user}/llm-pretrain"))
    .bind(format!("sbatch --nodes={nodes} --gpus-per-node={} --time=15-00:00:00 pretrain.sh", args.gpus_per_node))
    .bind(&tres)
    .bind(&tres)
    .execute(&mut *tx)
    .await?;
    let job_db_inx = inserted.last_insert_id();
    // The batch script's step (id -5 in 22.05's table) on the first node, and the training step.
    let step = format!(
        "INSERT INTO `{steps}` (job_db_inx, id_step, step_het_comp, nodelist, nodes_alloc, node_inx, state, step_name, \
         task_cnt, task_dist, time_start, time_end, tres_alloc) VALUES (?, ?, 4294967294, ?, ?, '', ?, ?, ?, 1, ?, ?, ?)"
    );
    let first_node = format!("{NODE_PREFIX}001");
    let batch_tres = format!("1=112,2=2000000,4=1,1001={}", args.gpus_per_node);
    let rows = [
        (-5, first_node.as_str(), 1, "batch", 1, start, end, batch_tres.as_str()),
        (0, node_list.as_str(), nodes, "torchrun", gpus, start + 45, end - 30, tres.as_str()),
    ];
    for (id, list, count, name, tasks, from, to, step_tres) in rows {
        sqlx::query(&step)
            .bind(job_db_inx)
            .bind(id)
            .bind(list)
            .bind(count)
            .bind(JOB_COMPLETE)
            .bind(name)
            .bind(tasks)
            .bind(from)
            .bind(to)
            .bind(step_tres)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    pool.close().await;
    Ok(job_db_inx)
}
