//! `slurmlens-dev demo seed-history`: fills a cluster's slurmdbd tables with the generated history.

use anyhow::Context;
use chrono::Utc;
use sqlx::mysql::MySqlPoolOptions;

use slurmlens::config::Config;

/// `slurmlens-dev demo …`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    #[command(subcommand)]
    pub command: DemoCommand,
}

/// Demo data commands.
#[derive(Debug, clap::Subcommand)]
pub enum DemoCommand {
    /// Replace a cluster's jobs, steps and node events with a simulated history ending now.
    SeedHistory(SeedArgs),
    /// Write GPU and RDMA series (and the GPU records a plugin would send) that agree with the jobs, with
    /// the ping mesh of the racks (`topology`) and 100 ms burst peaks on the first half of them.
    SeedTelemetry(TelemetryArgs),
    /// The long job: a fortnight-long pre-training run on 96 nodes (768 GPUs) at 15 s, its GPU
    /// series on nodes of its own (`lj001`…); replay the recording rules over it afterwards.
    SeedLongJob(super::longjob::LongJobArgs),
    /// Write the seeded long job's record (job 9000001, its steps) into a cluster's slurmdbd tables, over
    /// the window its samples cover, so the demo's pages show it (replaces an earlier record).
    RecordLongJob(RecordLongJobArgs),
    /// Keep a seeded cluster alive: every scrape interval, continue its history's scheduler in real time
    /// (jobs end, start and arrive) and write the samples of every seeded series up to now.
    Live(LiveArgs),
}

/// Arguments of `slurmlens-dev demo record-long-job`.
#[derive(Debug, clap::Args)]
pub struct RecordLongJobArgs {
    /// The seeded job's shape (as given to `demo seed-long-job`).
    #[command(flatten)]
    pub job: super::longjob::LongJobArgs,
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
}

/// Arguments of `slurmlens-dev demo live`.
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// The history's shape and seed, as given to `seed-history`.
    #[command(flatten)]
    pub shape: HistoryShape,
    /// Seconds between samples: the step `seed-telemetry` wrote.
    #[arg(long, default_value_t = 30)]
    pub step: i64,
    /// After a stop, write at most this many seconds of samples; an older gap stays a gap.
    #[arg(long, default_value_t = 3600)]
    pub backfill: i64,
    /// Catch up to now once and exit.
    #[arg(long)]
    pub once: bool,
}

/// Arguments of `slurmlens-dev demo seed-telemetry`.
#[derive(Debug, clap::Args)]
pub struct TelemetryArgs {
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// Hours of telemetry, ending now.
    #[arg(long, default_value_t = 24)]
    pub hours: i64,
    /// Seconds between samples, like a real scrape interval.
    #[arg(long, default_value_t = 30)]
    pub step: i64,
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u16,
    /// Also write the faults planted in the telemetry, with the failure verdict each job must get, as
    /// JSON to this file: the ground truth of the verdict tests.
    #[arg(long)]
    pub planted: Option<std::path::PathBuf>,
    /// Write every series into this VictoriaMetrics too (the lab's current release beside Debian's).
    #[arg(long)]
    pub mirror: Option<String>,
}

/// Arguments of `slurmlens-dev demo seed-history`.
#[derive(Debug, clap::Args)]
pub struct SeedArgs {
    /// Cluster to fill (its tables must exist: `sacctmgr add cluster <name>`).
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    #[command(flatten)]
    pub shape: HistoryShape,
    /// Add the history before the cluster's existing one instead of replacing it (grows a long history
    /// while its recent part stays readable).
    #[arg(long)]
    pub before_existing: bool,
}

/// The size and seed of a generated history (shared by `demo seed-history`, `demo live` and `bench history`).
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryShape {
    /// Days of history.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
    /// Job records to generate at least.
    #[arg(long, default_value_t = 200_000)]
    pub jobs: u32,
    #[arg(long, default_value_t = 100)]
    pub nodes: u32,
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Same seed, same history.
    #[arg(long, default_value_t = 0x5a4b_0001)]
    pub seed: u64,
}

impl HistoryShape {
    /// The generator's parameters for `cluster`'s history ending at `end`, of this size and seed.
    pub fn params(&self, cluster: &str, end: chrono::DateTime<Utc>) -> super::history::HistoryParams {
        super::history::HistoryParams {
            cluster: cluster.to_string(),
            end,
            days: self.days,
            n_jobs: self.jobs,
            n_nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            seed: self.seed,
        }
    }
}

/// Runs a demo command. `seeder_url` is a MariaDB user that may write slurmdbd's tables; the server
/// itself never holds one.
pub async fn run(config: &Config, args: &DemoArgs, seeder_url: Option<&str>) -> anyhow::Result<()> {
    match &args.command {
        DemoCommand::RecordLongJob(record) => {
            let url = seeder_url.context("SLURMLENS_SEEDER_URL must name a user that may write slurmdbd's tables")?;
            let vm_config = config.victoriametrics.as_ref().context("record-long-job needs [victoriametrics]")?;
            let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(
                &vm_config.url,
                std::time::Duration::from_secs(60),
            )?;
            let window = super::longjob::seeded_window(config, &vm, &record.job)
                .await?
                .context("no long job in VictoriaMetrics: run `slurmlens-dev demo seed-long-job` first")?;
            let row = super::longjob::write_record(url, &record.cluster, &record.job, window).await?;
            let at = |t: i64| chrono::DateTime::from_timestamp(t, 0).unwrap_or_default().to_rfc3339();
            println!(
                "long job {} recorded in {}'s slurmdbd (job_db_inx {row}), {} to {}",
                super::longjob::LONG_JOB_ID,
                record.cluster,
                at(window.0),
                at(window.1)
            );
            Ok(())
        }
        DemoCommand::SeedLongJob(long) => {
            let vm_config = config.victoriametrics.as_ref().context("seed-long-job needs [victoriametrics]")?;
            let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(
                &vm_config.url,
                std::time::Duration::from_secs(300),
            )?;
            let stats = super::longjob::seed(config, &vm, long).await?;
            println!(
                "long job: {} GPUs, {} to {}, {} samples in {:.0} s ({:.2} M samples/s)",
                u32::from(long.gpus_per_node) * long.nodes,
                stats.start.to_rfc3339(),
                stats.end.to_rfc3339(),
                stats.samples,
                stats.seconds,
                stats.samples as f64 / stats.seconds.max(1e-9) / 1e6
            );
            Ok(())
        }
        DemoCommand::SeedTelemetry(telemetry) => {
            let vm_config = config.victoriametrics.as_ref().context("seed-telemetry needs [victoriametrics]")?;
            let timeout = std::time::Duration::from_secs(300);
            let mirror = telemetry
                .mirror
                .as_deref()
                .map(|url| slurmlens::sources::victoriametrics::VictoriaMetrics::new(url, timeout))
                .transpose()?;
            let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(&vm_config.url, timeout)?
                .with_import_mirror(mirror);
            let mut config = config.clone();
            let cluster: slurmlens::domain::cluster::ClusterName = telemetry.cluster.parse()?;
            if !config.clusters.contains(&cluster) {
                config.clusters.push(cluster.clone());
            }
            let state = slurmlens::serve::app(&config)?;
            let reader = state.readers().find(|reader| *reader.cluster() == cluster).context("cluster reader")?;
            let store = state.store();
            if let Some(store) = store {
                store.migrate().await.context("applying migrations")?;
            }
            // The racks of the ping mesh and of the burst agents (none configured: racks from node names).
            let topology = slurmlens::serve::topology(&config)?;
            let started = std::time::Instant::now();
            let stats = super::seed_telemetry::seed_cluster(
                reader,
                store,
                &vm,
                &topology,
                telemetry.hours,
                telemetry.step,
                telemetry.gpus_per_node,
            )
            .await?;
            let ids = |jobs: &[u32]| {
                let listed: Vec<String> = jobs.iter().take(12).map(u32::to_string).collect();
                let more = if jobs.len() > 12 { format!(" and {} more", jobs.len() - 12) } else { String::new() };
                if listed.is_empty() { "none".to_string() } else { format!("{}{more}", listed.join(" ")) }
            };
            let lossy = stats.lossy.as_ref().map_or_else(
                || "none".to_string(),
                |lossy| {
                    let at =
                        |t: i64| chrono::DateTime::from_timestamp(t, 0).map_or_else(String::new, |t| t.to_rfc3339());
                    format!(
                        "{} ↔ {} from {} to {} under job {}",
                        lossy.path.source,
                        lossy.path.target,
                        at(lossy.from),
                        at(lossy.to),
                        lossy.job_id
                    )
                },
            );
            println!(
                "telemetry for {cluster}: {} jobs, {} GPU records, {} samples ({} ping-mesh, {} burst on {} nodes, {} node and Lustre) in {:.1} s; \
                 killed by XID 79: {}; application crashes (XID 31): {}; lossy ToR pair: {lossy}; \
                 trace summaries: {} rows for {}",
                stats.jobs,
                stats.gpu_records,
                stats.samples,
                stats.pingmesh_samples,
                stats.burst_samples,
                stats.burst_nodes,
                stats.node_samples,
                started.elapsed().as_secs_f64(),
                ids(&stats.xid_jobs),
                ids(&stats.app_crash_jobs),
                stats.trace_rows,
                stats.traced_jobs.iter().map(|(job, kind)| format!("{job} ({kind:?})")).collect::<Vec<_>>().join(", "),
            );
            if let Some(path) = &telemetry.planted {
                std::fs::write(path, planted_faults(&cluster, &stats).to_string())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(())
        }
        DemoCommand::Live(live) => {
            let url = seeder_url.context("SLURMLENS_SEEDER_URL must name a user that may write slurmdbd's tables")?;
            run_live(config, live, url).await
        }
        DemoCommand::SeedHistory(seed) => {
            let url = seeder_url.context("SLURMLENS_SEEDER_URL must name a user that may write slurmdbd's tables")?;
            let pool =
                MySqlPoolOptions::new().max_connections(4).connect(url).await.context("connecting as the seeder")?;
            let loader = super::history::Loader::new(url)?;
            let params = seed.shape.params(&seed.cluster, Utc::now());
            if seed.before_existing {
                // Nothing replaced: the store's rows still name the same jobs.
                let stats = super::history::generate_before_existing(&pool, &loader, &params).await?;
                println!("{stats}");
                return Ok(());
            }
            let stats = super::history::generate(&pool, &loader, &params).await?;
            println!("{stats}");
            // The job ids now name other jobs: what our store knew of the old ones would be read as theirs.
            // (Our schema may not exist yet on a fresh lab: migrations are forward-only and idempotent.)
            if let Some(store) = slurmlens::serve::app(config)?.store() {
                store.migrate().await?;
                let gone = store.forget_cluster_jobs(&seed.cluster.parse()?).await?;
                println!("forgot {gone} rows of our store about the old history's jobs");
            }
            Ok(())
        }
    }
}

/// `demo live`: starts the continuation, then ticks every `step` seconds until SIGINT or SIGTERM.
async fn run_live(config: &Config, args: &LiveArgs, seeder_url: &str) -> anyhow::Result<()> {
    let vm_config = config.victoriametrics.as_ref().context("demo live needs [victoriametrics]")?;
    let vm =
        slurmlens::sources::victoriametrics::VictoriaMetrics::new(&vm_config.url, std::time::Duration::from_secs(60))?;
    let pool =
        MySqlPoolOptions::new().max_connections(2).connect(seeder_url).await.context("connecting as the seeder")?;
    let state = slurmlens::serve::app(config)?;
    let store = state.store().cloned();
    let topology = slurmlens::serve::topology(config)?;
    let settings = super::live::LiveSettings {
        cluster: args.cluster.parse()?,
        shape: args.shape.clone(),
        step_s: args.step.max(1),
        gpus_per_node: u16::try_from(args.shape.gpus_per_node)?,
        backfill_s: args.backfill.max(0),
    };
    let mut live = super::live::Live::start(settings, pool, store, vm, &topology, Utc::now().timestamp()).await?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let started = std::time::Instant::now();
        let now = Utc::now().timestamp();
        let tick = live.tick(now).await;
        if args.once {
            let stats = tick?;
            println!("live {}: {stats:?} in {:.1} s", args.cluster, started.elapsed().as_secs_f64());
            return Ok(());
        }
        match tick {
            Ok(stats) => tracing::info!(
                at = now,
                submitted = stats.rows.submitted,
                started = stats.rows.started,
                ended = stats.rows.ended,
                gpu_records = stats.gpu_records,
                gpu_jobs = stats.gpu_jobs,
                samples = stats.samples,
                secs = started.elapsed().as_secs_f64(),
                "live: tick"
            ),
            // A source that is down (VictoriaMetrics restarting) is tried again at the next tick.
            Err(error) => tracing::warn!(error = format!("{error:#}"), "live: tick failed"),
        }
        let wait = args.step - Utc::now().timestamp().rem_euclid(args.step.max(1));
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(wait.max(1) as u64)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
        }
    }
}

/// The faults the telemetry planted and the failure verdict each job must get: a GPU off the bus is
/// the infrastructure's, a program's illegal address (XID 31) the application's.
fn planted_faults(
    cluster: &slurmlens::domain::cluster::ClusterName,
    stats: &super::seed_telemetry::TelemetryStats,
) -> serde_json::Value {
    let fault = |job: &u32, fault: &str, blame: &str| serde_json::json!({"job_id": job, "fault": fault, "expected_blame": blame});
    let faults: Vec<serde_json::Value> = stats
        .xid_jobs
        .iter()
        .map(|job| fault(job, "xid_79", "infrastructure"))
        .chain(stats.app_crash_jobs.iter().map(|job| fault(job, "xid_31", "application")))
        .collect();
    serde_json::json!({
        "cluster": cluster.as_str(),
        "faults": faults,
        "lossy_path": stats.lossy.as_ref().map(|lossy| serde_json::json!({
            "source_tor": lossy.path.source, "target_tor": lossy.path.target,
            "from": lossy.from, "to": lossy.to, "job_id": lossy.job_id,
        })),
    })
}
