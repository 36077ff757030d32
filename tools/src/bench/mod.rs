//! `slurmlens-dev bench`: the jobs window query against `sacct --json` on the same window, in one process;
//! a window's streamed export against the SQL floor and sacct;
//! a report against bare metric fetches; trace ingest against the bare multi-row INSERTs; the demo history's
//! simulation on its own; one archiver round; a fortnight-long job's report through the recording rules
//! against the same report read raw; the server's memory under concurrent clients; what shared
//! heavy-request slots cost; the Gantt's and the grid's data against the bare listing.
//!
//! Prints times and ratios; never asserts on them (speed is measured here, not in tests).

pub mod agent;
pub mod backfill;
pub mod export;
pub mod gantt;
pub mod history;
pub mod longjob;
pub mod memory;
pub mod scale;
pub mod slots;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, DurationRound, SecondsFormat, Utc};
use tower::ServiceExt;

use slurmlens::config::Config;
use slurmlens::http::router;
use slurmlens::serve::http_state;

/// `slurmlens-dev bench window|report|ingest|history|backfill|export|scale|long-report|memory|slots|gantt`.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// The jobs window query against `sacct --json` on the same window.
    Window(BenchArgs),
    /// A window exported in one stream (NDJSON, CSV) against the SQL floor, the paged listing and sacct.
    Export(BenchArgs),
    /// A job's report against the bare VictoriaMetrics fetch of its series and one query per GPU.
    Report(ReportBenchArgs),
    /// Trace batches through `POST /api/v1/traces` against the same rows inserted directly.
    Ingest(IngestBenchArgs),
    /// The demo history's full-size simulation without a database, and the digest of its rows.
    History(history::HistoryBenchArgs),
    /// One archiver round over a cluster's last hours, with the Gantt's "no report" share before and after.
    Backfill(backfill::BackfillBenchArgs),
    /// The demo's fortnight-long 768-GPU job reported through the recording rules and forced raw,
    /// computed and archived (seed it first: `demo seed-long-job`, then `lab/lab.sh replay-rules`).
    LongReport(longjob::LongReportArgs),
    /// The same requests against a short history and a long one (default `sakura` and `fuji`), with ratios.
    Scale(scale::ScaleBenchArgs),
    /// The real server's resident memory under concurrent listing and report clients.
    Memory(memory::MemoryBenchArgs),
    /// Taking and releasing a heavy request's shared slots in MariaDB against a bare round trip.
    Slots(slots::SlotsBenchArgs),
    /// The Gantt's data for 1, 7 and 30 days and the grid, against the bare listing of the same windows.
    Gantt(gantt::GanttBenchArgs),
    /// The node agent's cost per probed CUDA/NCCL call against the same program without it, its CPU and memory.
    Agent(agent::AgentBenchArgs),
}

/// Runs one benchmark.
pub async fn dispatch(config: &Config, command: &BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Window(args) => run(config, args).await,
        BenchCommand::Export(args) => export::run(config, args).await,
        BenchCommand::Report(args) => report_bench(config, args).await,
        BenchCommand::Ingest(args) => ingest_bench(config, args).await,
        BenchCommand::History(args) => history::run(args),
        BenchCommand::Backfill(args) => backfill::run(config, args).await,
        BenchCommand::LongReport(args) => longjob::run(config, args).await,
        BenchCommand::Scale(args) => scale::run(config, args).await,
        BenchCommand::Memory(args) => memory::run(config, args).await,
        BenchCommand::Slots(args) => slots::run(config, args).await,
        BenchCommand::Gantt(args) => gantt::run(config, args).await,
        BenchCommand::Agent(args) => agent::run(args),
    }
}

/// Arguments of `slurmlens-dev bench window`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Cluster whose history is queried (e.g. the demo's `sakura`).
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// Window length in days, ending at `--end`.
    #[arg(long, default_value_t = 7)]
    pub days: i64,
    /// End of the window (RFC 3339); default now.
    #[arg(long)]
    pub end: Option<DateTime<Utc>>,
    /// Page size of the API query.
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// The sacct binary.
    #[arg(long, default_value = "sacct")]
    pub sacct: String,
    /// Repetitions of the sacct runs (each takes minutes on a large window).
    #[arg(long, default_value_t = 1)]
    pub sacct_repeat: usize,
}

struct Drain {
    first_page: Duration,
    total: Duration,
    jobs: usize,
    pages: usize,
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn rss_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

async fn drain_window(app: &axum::Router, base_query: &str) -> anyhow::Result<Drain> {
    let started = Instant::now();
    let mut first_page = None;
    let mut cursor: Option<String> = None;
    let (mut jobs, mut pages) = (0usize, 0usize);
    loop {
        let uri = match &cursor {
            Some(cursor) => format!("/api/v1/jobs?{base_query}&cursor={cursor}"),
            None => format!("/api/v1/jobs?{base_query}"),
        };
        let response = app.clone().oneshot(Request::get(&uri).body(Body::empty())?).await?;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        if status != StatusCode::OK {
            bail!("{uri} answered {status}: {}", String::from_utf8_lossy(&bytes));
        }
        let page: slurmlens_wire::Page<slurmlens_wire::Job> = serde_json::from_slice(&bytes)?;
        first_page.get_or_insert_with(|| started.elapsed());
        jobs += page.items.len();
        pages += 1;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(Drain { first_page: first_page.unwrap_or_default(), total: started.elapsed(), jobs, pages })
}

fn run_sacct(
    args: &BenchArgs,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    extra: &[&str],
) -> anyhow::Result<(Duration, usize)> {
    let format = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let started = Instant::now();
    let output = std::process::Command::new(&args.sacct)
        .env("TZ", "UTC")
        .args(["-a", "-M", &args.cluster, "-S", &format(start), "-E", &format(end)])
        .args(extra)
        .output()
        .with_context(|| format!("running {}", args.sacct))?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        bail!("sacct failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    let count = if extra.contains(&"--json") {
        // sacct's JSON for a week of a large cluster is over a gigabyte: count jobs without keeping them.
        #[derive(serde::Deserialize)]
        struct Jobs {
            jobs: Vec<serde::de::IgnoredAny>,
        }
        let jobs: Jobs = serde_json::from_slice(&output.stdout).context("parsing sacct --json")?;
        jobs.jobs.len()
    } else {
        output.stdout.split(|&b| b == b'\n').filter(|line| !line.is_empty()).count()
    };
    Ok((elapsed, count))
}

/// The server's state as `slurmlens serve` has it once started: each cluster's catalogue of
/// long-spanned jobs built (serving builds it in the background at start), so no measurement reads the
/// whole history for want of it. Prints how long each took.
pub async fn prepared_state(config: &Config) -> anyhow::Result<slurmlens::http::HttpState> {
    let state = http_state(config)?;
    for reader in state.app().readers() {
        let started = Instant::now();
        let count = reader.prepare_history().await.with_context(|| format!("cataloguing {}", reader.cluster()))?;
        println!(
            "{}: {count} long-spanned jobs catalogued in {:.2} s",
            reader.cluster(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(state)
}

/// The window a benchmark reads, and the router that reads it for staff.
struct StaffWindow {
    app: axum::Router,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    /// `cluster=…&start=…&end=…`.
    query: String,
}

/// The router over `config` with anonymous viewers as staff and `args.cluster` served, and the
/// `args.days` ending at `args.end` (default now).
async fn staff_window(config: &Config, args: &BenchArgs) -> anyhow::Result<StaffWindow> {
    let mut config = config.clone();
    config.access.anonymous = slurmlens::config::AnonymousAccess::Staff;
    let cluster: slurmlens::domain::cluster::ClusterName = args.cluster.parse()?;
    if !config.clusters.contains(&cluster) {
        config.clusters.push(cluster);
    }
    let app = router(prepared_state(&config).await?);
    let end = args.end.unwrap_or_else(Utc::now);
    let start = end - chrono::Duration::days(args.days);
    let query = format!(
        "cluster={}&start={}&end={}",
        args.cluster,
        start.to_rfc3339_opts(SecondsFormat::Secs, true).replace('+', "%2B"),
        end.to_rfc3339_opts(SecondsFormat::Secs, true).replace('+', "%2B"),
    );
    println!("window {start} .. {end} on cluster {}; {} repetitions, medians", args.cluster, args.repeat);
    Ok(StaffWindow { app, start, end, query })
}

/// Runs the benchmark and prints a report.
pub async fn run(config: &Config, args: &BenchArgs) -> anyhow::Result<()> {
    let StaffWindow { app, start, end, query } = staff_window(config, args).await?;
    let base_query = format!("{query}&limit={}", args.limit);
    // One warm-up so connection set-up is not measured.
    let warm = drain_window(&app, &base_query).await?;
    let (mut first, mut total) = (Vec::new(), Vec::new());
    for _ in 0..args.repeat {
        let drain = drain_window(&app, &base_query).await?;
        first.push(drain.first_page);
        total.push(drain.total);
    }
    let (api_first, api_total) = (median(first), median(total));
    // The server's own footprint, before sacct's gigabyte of JSON is read into this process.
    let api_rss = rss_kib("VmHWM:").unwrap_or(0) / 1024;
    let mut sacct_json = Vec::new();
    let mut sacct_text = Vec::new();
    let (mut json_jobs, mut text_jobs) = (0, 0);
    for _ in 0..args.sacct_repeat.max(1) {
        let (elapsed, count) = run_sacct(args, start, end, &["--json"])?;
        sacct_json.push(elapsed);
        json_jobs = count;
        let (elapsed, count) = run_sacct(
            args,
            start,
            end,
            &[
                "-X",
                "-P",
                "-n",
                "-o",
                "JobID,User,Account,Partition,State,ExitCode,Submit,Start,End,Elapsed,NodeList,AllocTRES",
            ],
        )?;
        sacct_text.push(elapsed);
        text_jobs = count;
    }
    let (sacct_json, sacct_text) = (median(sacct_json), median(sacct_text));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("{:<44} {:>10} {:>9}", "measurement", "ms", "jobs");
    println!(
        "{:<44} {:>10.1} {:>9}",
        format!("API first page (limit {})", args.limit),
        ms(api_first),
        args.limit.min(warm.jobs as u32)
    );
    println!("{:<44} {:>10.1} {:>9}", format!("API whole window ({} pages)", warm.pages), ms(api_total), warm.jobs);
    println!("{:<44} {:>10.1} {:>9}", "sacct --json -a (jobs + steps)", ms(sacct_json), json_jobs);
    println!("{:<44} {:>10.1} {:>9}", "sacct -X -P -a (allocations, text)", ms(sacct_text), text_jobs);
    println!("ratio sacct --json / API whole window: {:.1}x", ms(sacct_json) / ms(api_total).max(0.001));
    println!("ratio sacct --json / API first page:   {:.1}x", ms(sacct_json) / ms(api_first).max(0.001));
    println!("ratio sacct -X -P / API whole window:  {:.1}x", ms(sacct_text) / ms(api_total).max(0.001));
    println!("API per page (whole window / pages): {:.1} ms", ms(api_total) / warm.pages.max(1) as f64);
    println!("server process peak RSS during the API runs: {api_rss} MiB");
    Ok(())
}

/// Arguments of `slurmlens-dev bench report`.
#[derive(Debug, clap::Args)]
pub struct ReportBenchArgs {
    /// Cluster of the job.
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// The job; default: the finished job on at least `--nodes` nodes whose run is closest to 24 h.
    #[arg(long)]
    pub job: Option<String>,
    /// Nodes the picked job must span.
    #[arg(long, default_value_t = 32)]
    pub nodes: u32,
    /// Import synthetic 15 s dcgm-exporter series for the job's GPUs first (for a cluster without telemetry).
    #[arg(long)]
    pub import: bool,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Concurrent requests of the one-query-per-GPU approach.
    #[arg(long, default_value_t = 8)]
    pub per_gpu_concurrency: usize,
}

async fn report_bench(config: &Config, args: &ReportBenchArgs) -> anyhow::Result<()> {
    use futures::StreamExt;

    let vm_config = config.victoriametrics.as_ref().context("the report benchmark needs [victoriametrics]")?;
    let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(&vm_config.url, Duration::from_secs(120))?;
    let mut config = config.clone();
    config.access.anonymous = slurmlens::config::AnonymousAccess::Staff;
    let cluster: slurmlens::domain::cluster::ClusterName = args.cluster.parse()?;
    if !config.clusters.contains(&cluster) {
        config.clusters.push(cluster);
    }
    // The benchmark measures computing, not reading an archive.
    config.database = None;
    if let Some(vm) = config.victoriametrics.as_mut() {
        vm.timeout_ms = 120_000;
    }
    let state = http_state(&config)?;
    let reader = state
        .app()
        .readers()
        .find(|reader| reader.cluster().as_str() == args.cluster)
        .with_context(|| format!("cluster {} is not configured", args.cluster))?;
    let tres = reader.tres_catalog().await?;
    let scope = slurmlens::domain::scope::ViewerScope::Staff;
    let record = match &args.job {
        Some(id) => {
            let selector: slurmlens::domain::ids::JobSelector = id.parse()?;
            reader.job(&scope, selector).await?.map(|(job, _)| job).context("no such job")?
        }
        None => {
            let end = Utc::now();
            let window = slurmlens::domain::job::TimeWindow::new(end - chrono::Duration::days(30), end)?;
            let mut best: Option<slurmlens::domain::job::JobRecord> = None;
            let mut cursor = None;
            loop {
                let (jobs, next) =
                    reader.jobs_in_window(&scope, window, &Default::default(), &tres, cursor, 5000).await?;
                for job in jobs {
                    // The issue's case: a job of about 24 h.
                    let off = |j: &slurmlens::domain::job::JobRecord| {
                        j.time_end.saturating_sub(j.time_start).abs_diff(86_400)
                    };
                    let fits = job.alloc_nodes >= args.nodes && job.time_end > 0 && job.time_start > 0;
                    if fits && best.as_ref().is_none_or(|b| off(&job) < off(b)) {
                        best = Some(job);
                    }
                }
                match next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            best.with_context(|| format!("no finished job on {} nodes", args.nodes))?
        }
    };
    let nodes = record.nodes.hosts().to_vec();
    let (start, end) = (
        slurmlens::domain::time::epoch(record.time_start).context("job never started")?,
        slurmlens::domain::time::epoch(record.time_end).unwrap_or_else(Utc::now),
    );
    let gpus_per_node = tres.gpus(&record.tres_alloc) / u64::from(record.alloc_nodes.max(1));
    println!(
        "job {} on {} nodes ({} GPUs), window {start} .. {end} ({:.1} h)",
        record.identity,
        nodes.len(),
        tres.gpus(&record.tres_alloc),
        (end - start).num_seconds() as f64 / 3600.0
    );
    if args.import {
        let imported = crate::demo::telemetry::import_flat(&vm, &nodes, gpus_per_node as u16, start, end, 15).await?;
        println!("imported {imported} samples");
    }
    let catalog = &config.metrics;
    let app = router(state.clone());
    let uri =
        format!("/api/v1/jobs/{}/report?cluster={}", record.identity.to_string().replace('+', "%2B"), args.cluster);
    let gpu_count = nodes.len() * gpus_per_node as usize;
    // The report's own requests, and every series they read: the references fetch exactly these.
    let plan = state
        .app()
        .reporter()
        .queries_for(&args.cluster, &record, slurmlens::app::report::DEFAULT_POINTS)
        .context("the job has no window")?;
    let (step, first_bucket, last_bucket) = plan.buckets();
    let (window_start, window_end) = plan.window();
    let mut reads = Vec::new();
    for selector in plan.reads() {
        // Only series that exist: the other spelling of a host label, or an exporter the site lacks,
        // would add requests that cost the references nothing but their round trip.
        if !vm.series(&selector.to_string(), window_start, window_end).await?.is_empty() {
            reads.push(selector);
        }
    }
    let per_gpu = split_per_gpu(&reads, catalog, &nodes, gpus_per_node as u16);
    println!(
        "the report sends {} queries reading {} series selectors with data ({} split per GPU or node); step {step} s",
        plan.query_count(),
        reads.len(),
        per_gpu.len()
    );
    let scrape = catalog.scrape_interval_s.max(1);
    let mut rows: Vec<(String, Vec<Duration>)> = Vec::new();
    let mut record_time = |name: &str, took: Duration| match rows.iter_mut().find(|(n, _)| n == name) {
        Some((_, times)) => times.push(took),
        None => rows.push((name.to_string(), vec![took])),
    };
    for round in 0..args.repeat.max(1) {
        let started = Instant::now();
        let response = app.clone().oneshot(Request::get(&uri).body(Body::empty())?).await?;
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        record_time("report (server time, in process)", started.elapsed());
        let report: slurmlens_wire::JobReport = serde_json::from_slice(&bytes)?;
        if report.metrics.status != slurmlens_wire::MetricsState::Ok {
            bail!("report metrics {}: {:?}", report.metrics.status, report.metrics.message);
        }
        if report.metrics.step_s != step {
            bail!("the report used step {} s, the plan {step} s", report.metrics.step_s);
        }
        let started = Instant::now();
        let points = plan.send(&vm).await?;
        record_time(&format!("its {} queries alone, sent bare at once", plan.query_count()), started.elapsed());
        if round == 0 {
            println!("  the report's queries: {points} points");
        }
        let (buckets, raw) =
            (Fetch::Buckets { step_s: step, from: first_bucket }, Fetch::Raw { scrape_s: scrape, from: window_start });
        for (label, fetch) in [
            (format!("same series, bucket means at step {step} s, one query each"), buckets),
            (format!("same series, raw {scrape} s, one query each"), raw),
        ] {
            let queries: Vec<String> = reads.iter().map(|selector| fetch.query(selector, false)).collect();
            let started = Instant::now();
            let answers =
                futures::future::join_all(queries.iter().map(|query| fetch.send(&vm, query, last_bucket))).await;
            record_time(&label, started.elapsed());
            let points: usize = answers.into_iter().flatten().flatten().map(|series| series.points.len()).sum();
            if round == 0 {
                println!("  {label}: {points} points");
            }
        }
        for (label, fetch) in [
            (format!("one query per GPU or node and series, step {step} s"), buckets),
            (format!("one query per GPU or node and series, raw {scrape} s"), raw),
        ] {
            let started = Instant::now();
            futures::stream::iter(per_gpu.iter())
                .map(|selector| {
                    // What the report reads of each series (bucket means, peaks, counts), one at a time.
                    let (vm, query) = (vm.clone(), fetch.query(selector, true));
                    async move { fetch.send(&vm, &query, last_bucket).await }
                })
                .buffer_unordered(args.per_gpu_concurrency.max(1))
                .for_each(|_| async {})
                .await;
            record_time(&format!("{label} ({} requests)", per_gpu.len()), started.elapsed());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("{gpu_count} GPUs; {:<58} {:>9}", "measurement (median)", "ms");
    let medians: Vec<(String, Duration)> = rows.into_iter().map(|(name, times)| (name, median(times))).collect();
    for (name, took) in &medians {
        println!("{:<66} {:>9.0}", name, ms(*took));
    }
    let report = medians[0].1;
    for (name, took) in medians.iter().skip(1) {
        println!("{:<66} {:>8.2}x", format!("report / {name}"), ms(report) / ms(*took).max(0.001));
    }
    println!("bench process peak RSS (holds the bare fetches too): {} MiB", rss_kib("VmHWM:").unwrap_or(0) / 1024);
    Ok(())
}

/// A reference fetch of the report benchmark.
#[derive(Debug, Clone, Copy)]
enum Fetch {
    /// Per bucket of the report's step, from its first bucket.
    Buckets { step_s: u64, from: DateTime<Utc> },
    /// Every sample, from the window's start.
    Raw { scrape_s: u64, from: DateTime<Utc> },
}

impl Fetch {
    /// The query for one selector: raw samples, bucket means, or with `rollups` each bucket's mean,
    /// peak and sample count (what the report reads of a series).
    fn query(&self, selector: &slurmlens::domain::promql::Selector, rollups: bool) -> String {
        match *self {
            Self::Raw { .. } => selector.to_string(),
            Self::Buckets { step_s, .. } if rollups => {
                format!(
                    r#"aggr_over_time(("avg_over_time", "max_over_time", "count_over_time"), {selector}[{step_s}s])"#
                )
            }
            Self::Buckets { step_s, .. } => format!("avg_over_time({selector}[{step_s}s])"),
        }
    }

    async fn send(
        &self,
        vm: &slurmlens::sources::victoriametrics::VictoriaMetrics,
        query: &str,
        to: DateTime<Utc>,
    ) -> Result<Vec<slurmlens::sources::victoriametrics::Series>, slurmlens::sources::victoriametrics::VmError> {
        match *self {
            Self::Buckets { step_s, from } => vm.query_range(query, from, to, step_s).await,
            Self::Raw { scrape_s, from } => vm.query_range(query, from, to, scrape_s).await,
        }
    }
}

/// Each selector narrowed to one GPU (a dcgm-exporter series on the job's nodes) or one node (a node
/// agent's series); others (a job's Lustre statistics, ping-mesh paths) stay whole.
fn split_per_gpu(
    selectors: &[slurmlens::domain::promql::Selector],
    catalog: &slurmlens::domain::series::SeriesCatalog,
    nodes: &[String],
    gpus_per_node: u16,
) -> Vec<slurmlens::domain::promql::Selector> {
    use slurmlens::domain::promql::Matcher;
    let mut split = Vec::new();
    for selector in selectors {
        let narrowed = |matcher: Matcher| {
            let mut one = selector.clone();
            one.matchers.retain(|m| !matches!(m, Matcher::AnyOf(..) | Matcher::AnyHost(..)));
            one.matchers.push(matcher);
            one
        };
        let gpu_host = selector.matchers.iter().find_map(|m| match m {
            Matcher::AnyOf(label, _) if catalog.gpu_host_labels.contains(label) => Some(label.clone()),
            _ => None,
        });
        let node_host = selector.matchers.iter().find_map(|m| match m {
            Matcher::AnyHost(label, _) => Some(label.clone()),
            _ => None,
        });
        match (gpu_host, node_host) {
            (Some(label), _) => {
                for node in nodes {
                    for gpu in 0..gpus_per_node {
                        let mut one = narrowed(Matcher::Equal(label.clone(), node.clone()));
                        one.matchers.push(Matcher::Equal(catalog.gpu_index_label.clone(), gpu.to_string()));
                        split.push(one);
                    }
                }
            }
            (None, Some(label)) => {
                split.extend(nodes.iter().map(|node| narrowed(Matcher::AnyHost(label.clone(), vec![node.clone()]))));
            }
            (None, None) => split.push(selector.clone()),
        }
    }
    split
}

/// Arguments of `slurmlens-dev bench ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestBenchArgs {
    /// Cluster the batches are sent for (default: the first configured one).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Batches posted (and inserted directly for the reference).
    #[arg(long, default_value_t = 50)]
    pub batches: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 1000)]
    pub records: usize,
    /// Batches in flight at once (nodes sending together).
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
}

/// One node's batch of realistic summaries: 8 GPUs, one process each, kernels (some with long C++
/// names), CUDA API calls, NCCL operations, memory copies and synchronisation waits.
fn synthetic_trace_batch(
    cluster: &str,
    job_id: u32,
    interval_start: DateTime<Utc>,
    records: usize,
) -> slurmlens_wire::TraceBatch {
    use slurmlens::domain::trace::{MEMCPY_KINDS, NCCL_OPS, SYNC_CALLS};
    let long_suffix = "cutlass::gemm::GemmShape<128, 128, 32>, cutlass::epilogue::thread::LinearCombination<float, 4>";
    let records = (0..records)
        .map(|at| {
            let gpu = (at % 8) as u16;
            let slot = at / 8;
            // Every (GPU, category, name) once: a batch holds no duplicate.
            let (category, name, bytes) = match (slot % 20, slot / 20) {
                (0, op) if op < NCCL_OPS.len() => ("nccl", NCCL_OPS[op].to_string(), 64 << 20),
                (1, kind) if kind < MEMCPY_KINDS.len() => ("memcpy", MEMCPY_KINDS[kind].to_string(), 8 << 20),
                (2, call) if call < SYNC_CALLS.len() => ("sync", SYNC_CALLS[call].to_string(), 0),
                (3 | 4, _) => ("cuda_api", format!("cudaApiCall{slot}"), 0),
                (5, _) => ("kernel", format!("void cutlass::Kernel<{long_suffix}, {slot}>(Params)"), 0),
                _ => ("kernel", format!("elementwise_kernel_{slot}"), 0),
            };
            slurmlens_wire::TraceRecord {
                interval_start,
                interval_s: 10,
                gpu,
                pid: 10_000 + u32::from(gpu),
                cgroup: Some(format!("/system.slice/slurmstepd.scope/job_{job_id}/step_0/user/task_{gpu}")),
                job_id: None,
                category: category.to_string(),
                name,
                count: 100,
                total_ns: 50_000_000,
                max_ns: 1_000_000,
                bytes,
            }
        })
        .collect();
    slurmlens_wire::TraceBatch { cluster: cluster.to_string(), node: "bench-node-1".into(), records }
}

async fn ingest_bench(config: &Config, args: &IngestBenchArgs) -> anyhow::Result<()> {
    use futures::StreamExt;

    use slurmlens::domain::trace::{RawTraceSummary, TraceSummary};

    let mut config = config.clone();
    config.database.as_ref().context("the ingest benchmark needs [database] (slurmlens's own MariaDB)")?;
    let cluster = match &args.cluster {
        Some(name) => name.parse()?,
        None => config.clusters.first().cloned().context("no cluster configured")?,
    };
    if !config.clusters.contains(&cluster) {
        config.clusters.push(cluster.clone());
    }
    let nanos = Utc::now().timestamp_subsec_nanos();
    let secret = format!("bench-ingest-{}-{nanos}-0123456789", std::process::id());
    config.ingest.secrets.insert(cluster.to_string(), slurmlens::config::IngestSecret(secret.clone()));
    let state = http_state(&config)?;
    let store = state.app().store().context("no store")?.clone();
    store.migrate().await?;
    let app = router(state);
    // Job ids beyond any real cluster's, removed again at the end.
    let (api_job, reference_job) =
        (4_100_000_000 + std::process::id() % 1000 * 2, 4_100_000_001 + std::process::id() % 1000 * 2);
    let base = Utc::now().duration_trunc(chrono::TimeDelta::seconds(10)).unwrap_or_else(|_| Utc::now())
        - chrono::Duration::hours(1);
    let interval = |batch: usize| base - chrono::Duration::seconds(10 * (batch as i64 + 1));
    let bodies: Vec<Vec<u8>> = (0..=args.batches)
        .map(|batch| {
            serde_json::to_vec(&synthetic_trace_batch(cluster.as_str(), api_job, interval(batch), args.records))
        })
        .collect::<Result<_, _>>()?;
    let now = Utc::now();
    let reference_batches: Vec<Vec<TraceSummary>> = (0..args.batches)
        .map(|batch| {
            let wire = synthetic_trace_batch(cluster.as_str(), reference_job, interval(batch), args.records);
            wire.records
                .iter()
                .map(|record| {
                    let raw = slurmlens::app::ingest::raw_summary(record);
                    TraceSummary::parse(&RawTraceSummary { job_id: Some(reference_job), cgroup: None, ..raw }, now)
                        .map_err(anyhow::Error::msg)
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .collect::<anyhow::Result<_>>()?;
    let post = |body: Vec<u8>| {
        let app = app.clone();
        let secret = secret.clone();
        async move {
            let request = Request::post("/api/v1/traces")
                .header("authorization", format!("Bearer {secret}"))
                .header("content-type", "application/json")
                .body(Body::from(body))?;
            let response = app.oneshot(request).await?;
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
            if status != StatusCode::OK {
                bail!("POST /api/v1/traces answered {status}: {}", String::from_utf8_lossy(&bytes));
            }
            let receipt: slurmlens_wire::TraceReceipt = serde_json::from_slice(&bytes)?;
            if !receipt.rejected.is_empty() {
                bail!("the benchmark's records were refused: {:?}", receipt.rejected.first());
            }
            anyhow::Ok(receipt.stored)
        }
    };
    // The last body is the warm-up (statement preparation, pool connections); it is not timed.
    let mut bodies = bodies;
    let warm_up = bodies.pop().context("no batches")?;
    post(warm_up).await?;
    let concurrency = args.concurrency.max(1);
    let started = Instant::now();
    let stored: Vec<anyhow::Result<u64>> =
        futures::stream::iter(bodies).map(post).buffer_unordered(concurrency).collect().await;
    let api_took = started.elapsed();
    let api_stored: u64 = stored.into_iter().sum::<anyhow::Result<u64>>()?;
    let started = Instant::now();
    let inserted: Vec<Result<u64, slurmlens::store::StoreError>> = futures::stream::iter(&reference_batches)
        .map(|batch| store.insert_trace_summaries(&cluster, "bench-node-1", batch))
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let reference_took = started.elapsed();
    let reference_stored: u64 = inserted.into_iter().sum::<Result<u64, _>>()?;
    store.delete_trace_summaries(&cluster, api_job).await?;
    store.delete_trace_summaries(&cluster, reference_job).await?;
    let rate = |records: u64, took: Duration| records as f64 / took.as_secs_f64().max(1e-9);
    let (api_rate, reference_rate) = (rate(api_stored, api_took), rate(reference_stored, reference_took));
    println!("{} batches x {} records, {concurrency} in flight, cluster {cluster}", args.batches, args.records);
    println!("{:<58} {:>10} {:>12}", "measurement", "records", "records/s");
    println!("{:<58} {:>10} {:>12.0}", "POST /api/v1/traces (JSON, validation, store)", api_stored, api_rate);
    println!(
        "{:<58} {:>10} {:>12.0}",
        "reference: multi-row INSERTs of the same rows, no HTTP", reference_stored, reference_rate
    );
    println!("ratio API / reference: {:.2}", api_rate / reference_rate.max(1e-9));
    if api_stored != (args.batches * args.records) as u64 {
        bail!("stored {api_stored} of {} records", args.batches * args.records);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmlens::domain::promql::{Matcher, Selector};
    use slurmlens::domain::series::SeriesCatalog;

    #[test]
    fn splits_gpu_series_per_gpu_node_series_per_node_and_keeps_the_rest_whole() {
        let catalog = SeriesCatalog::default();
        let nodes = vec!["gpu001".to_string(), "gpu002".to_string()];
        let util = Selector {
            metric: "DCGM_FI_DEV_GPU_UTIL".parse().expect("valid"),
            matchers: vec![Matcher::AnyOf("Hostname".parse().expect("valid"), nodes.clone())],
        };
        let rdma = Selector {
            metric: "rdma_port_xmit_data_total".parse().expect("valid"),
            matchers: vec![Matcher::AnyHost("instance".parse().expect("valid"), nodes.clone())],
        };
        let lustre = Selector {
            metric: "lustre_job_read_bytes_total".parse().expect("valid"),
            matchers: vec![Matcher::JobId("jobid".parse().expect("valid"), 1234)],
        };
        let split = split_per_gpu(&[util, rdma, lustre.clone()], &catalog, &nodes, 4);
        let rendered: Vec<String> = split.iter().map(Selector::to_string).collect();
        assert_eq!(rendered.len(), 2 * 4 + 2 + 1, "{rendered:#?}");
        assert_eq!(rendered[0], r#"DCGM_FI_DEV_GPU_UTIL{Hostname="gpu001",gpu="0"}"#);
        assert_eq!(rendered[7], r#"DCGM_FI_DEV_GPU_UTIL{Hostname="gpu002",gpu="3"}"#);
        assert!(rendered[8].starts_with("rdma_port_xmit_data_total{instance=~") && rendered[8].contains("gpu001"));
        assert!(!rendered[8].contains("gpu002") && rendered[9].contains("gpu002"));
        assert_eq!(split[10], lustre);
    }

    #[test]
    fn reference_queries_read_what_the_report_reads() {
        let selector = Selector { metric: "DCGM_FI_DEV_GPU_UTIL".parse().expect("valid"), matchers: Vec::new() };
        let from = DateTime::<Utc>::UNIX_EPOCH;
        let buckets = Fetch::Buckets { step_s: 60, from };
        assert_eq!(buckets.query(&selector, false), "avg_over_time(DCGM_FI_DEV_GPU_UTIL{}[60s])");
        assert!(
            buckets
                .query(&selector, true)
                .starts_with(r#"aggr_over_time(("avg_over_time", "max_over_time", "count_over_time")"#)
        );
        assert_eq!(Fetch::Raw { scrape_s: 15, from }.query(&selector, true), "DCGM_FI_DEV_GPU_UTIL{}");
    }
}
