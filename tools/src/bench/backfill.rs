//! `slurmlens-dev bench backfill`: one archiver round over a cluster's last hours, as the server's
//! archiver runs it (`[report]` concurrency and pause), with the Gantt's efficiency colouring before and
//! after: the share of the jobs it draws in its default window (the last 24 h) that have no report.
//! It writes archived reports into the configured database: point `[database]` at a copy.

use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use slurmlens::app::jobs::{JobsQuery, MAX_PAGE};
use slurmlens::app::report::{Round, archive_round};
use slurmlens::app::{App, Viewer};
use slurmlens::config::Config;
use slurmlens::domain::job::TimeWindow;
use slurmlens_wire::DigestState;

/// Arguments of `slurmlens-dev bench backfill`.
#[derive(Debug, clap::Args)]
pub struct BackfillBenchArgs {
    /// Cluster whose jobs get their reports (the only one the round walks).
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// The round's window: the last this many hours.
    #[arg(long, default_value_t = 48)]
    pub hours: i64,
    /// Most reports the round makes (default: every due job).
    #[arg(long)]
    pub max_reports: Option<usize>,
    /// The Gantt's window whose colouring is counted: the last this many hours.
    #[arg(long, default_value_t = 24)]
    pub gantt_hours: i64,
}

/// What the Gantt's efficiency colouring shows of a window's jobs.
#[derive(Debug, Default)]
struct Colouring {
    /// Jobs the Gantt draws (started, on nodes).
    drawn: usize,
    /// Of those, without a mean GPU utilisation: "no report".
    no_report: usize,
    gpu_jobs: usize,
    gpu_no_report: usize,
    /// GPU jobs whose report said "no data", and running ones with live values.
    no_data: usize,
    live: usize,
}

impl Colouring {
    fn print(&self, when: &str) {
        let share = |part: usize, all: usize| if all == 0 { 0.0 } else { 100.0 * part as f64 / all as f64 };
        println!(
            "{when}: {} jobs drawn, {} \"no report\" ({:.1} %); GPU jobs {}, {} \"no report\" ({:.1} %), of which {} no data; {} running with live values",
            self.drawn,
            self.no_report,
            share(self.no_report, self.drawn),
            self.gpu_jobs,
            self.gpu_no_report,
            share(self.gpu_no_report, self.gpu_jobs),
            self.no_data,
            self.live,
        );
    }
}

/// Runs one round and prints what it did, how long it took, and the colouring before and after.
pub async fn run(config: &Config, args: &BackfillBenchArgs) -> anyhow::Result<()> {
    let mut config = config.clone();
    config.access.anonymous = slurmlens::config::AnonymousAccess::Staff;
    config.clusters = vec![args.cluster.parse()?];
    anyhow::ensure!(
        config.database.is_some() && config.victoriametrics.is_some(),
        "needs [database] and VictoriaMetrics"
    );
    let app = slurmlens::serve::app(&config)?;
    app.store().context("a store")?.migrate().await?;
    colouring(&app, args).await?.print("before");
    let now = Utc::now();
    let window = TimeWindow::new(now - chrono::Duration::hours(args.hours), now)?;
    let settings = slurmlens::serve::archiver_settings(&config);
    println!(
        "round over {} .. {}: {} reports at a time, {} ms pause after each",
        window.start(),
        window.end(),
        settings.concurrency,
        settings.pause.as_millis()
    );
    let (started, cpu_before) = (Instant::now(), cpu_seconds());
    let summary =
        archive_round(&app, &settings, Round { window, max_reports: args.max_reports, as_of: now, published: false })
            .await?;
    let (seconds, cpu) = (started.elapsed().as_secs_f64(), cpu_seconds() - cpu_before);
    println!(
        "round: {} due, {} made ({} with metrics, {} no data; {} of jobs that ended badly), {} unanswered, \
         in {seconds:.1} s ({:.2} reports/s; this process used {cpu:.1} s of CPU, {:.0} % of one core)",
        summary.due,
        summary.made(),
        summary.archived,
        summary.no_data,
        summary.ended_badly,
        summary.unavailable,
        summary.made() as f64 / seconds.max(f64::EPSILON),
        100.0 * cpu / seconds.max(f64::EPSILON),
    );
    colouring(&app, args).await?.print("after");
    Ok(())
}

/// The Gantt's colouring of the last `gantt_hours`, every page of it.
async fn colouring(app: &App, args: &BackfillBenchArgs) -> anyhow::Result<Colouring> {
    let now = Utc::now();
    let window = TimeWindow::new(now - chrono::Duration::hours(args.gantt_hours), now)?;
    let mut query = JobsQuery {
        cluster: Some(args.cluster.clone()),
        window,
        filter: Default::default(),
        limit: MAX_PAGE,
        cursor: None,
        blame: Vec::new(),
        order: None,
    };
    let mut counts = Colouring::default();
    loop {
        let page = app.list_jobs(&Viewer::Anonymous, &query).await?;
        for job in page.items.iter().filter(|job| job.start.is_some() && job.alloc_nodes > 0) {
            let blank = job.mean_gpu_util.is_none();
            counts.drawn += 1;
            counts.no_report += usize::from(blank);
            if job.alloc_gpus > 0 {
                counts.gpu_jobs += 1;
                counts.gpu_no_report += usize::from(blank);
                counts.no_data += usize::from(job.digest == Some(DigestState::NoData));
                counts.live += usize::from(job.digest == Some(DigestState::Live));
            }
        }
        match page.next_cursor {
            Some(next) => query.cursor = Some(JobsQuery::cursor(Some(&next))?.context("a cursor")?),
            None => return Ok(counts),
        }
    }
}

/// User and system CPU seconds this process has used.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th of them.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks: f64 = fields.get(11..13).map_or(0.0, |t| t.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0
}
