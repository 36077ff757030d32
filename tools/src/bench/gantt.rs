//! `slurmlens-dev bench gantt`: the Gantt's data for windows of 1, 7 and 30 days and the grid at a
//! moment, as the pages fetch them (`/web/v1/gantt`, `/web/v1/grid`), each against references measured
//! in the same run: the bare listing of the same window (`/api/v1/jobs`, every page), slurmdbd's
//! window read alone (`jobs_in_window`, no mapping), and the same server keeping no charts' history
//! (`[limits] chart_history_jobs = 0`); the first view of each window (the hours no earlier one
//! kept) apart from the median of the views after it. Prints server times, payload bytes (raw and
//! gzipped, as the router's compression sends them) and ratios; asserts nothing.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use chrono::{DateTime, Utc};
use tower::ServiceExt;

use slurmlens::config::Config;
use slurmlens::domain::job::TimeWindow;
use slurmlens::domain::scope::ViewerScope;
use slurmlens::http::router;

use super::median;

/// Arguments of `slurmlens-dev bench gantt`.
#[derive(Debug, clap::Args)]
pub struct GanttBenchArgs {
    /// Cluster whose history is drawn (the demo's `sakura`: 100 nodes × 8 GPUs, 30 days).
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// Window lengths in days, each ending at `--end`.
    #[arg(long, value_delimiter = ',', default_value = "1,7,30")]
    pub days: Vec<i64>,
    /// End of the windows and the grid's moment (RFC 3339); default now.
    #[arg(long)]
    pub end: Option<DateTime<Utc>>,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
}

/// One answer: how long it took, its body's size, and how many jobs it held where that is known.
struct Fetched {
    took: Duration,
    bytes: usize,
    body: Vec<u8>,
}

async fn fetch(app: &axum::Router, uri: &str, gzip: bool) -> anyhow::Result<Fetched> {
    let mut request = Request::get(uri);
    if gzip {
        request = request.header(header::ACCEPT_ENCODING, "gzip");
    }
    let started = Instant::now();
    let response = app.clone().oneshot(request.body(Body::empty())?).await?;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
    let took = started.elapsed();
    if status != StatusCode::OK {
        bail!("{uri} answered {status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(Fetched { took, bytes: body.len(), body: body.to_vec() })
}

/// Every page of the listing of the window, as a client drains it.
async fn drain_listing(app: &axum::Router, base_query: &str) -> anyhow::Result<(Duration, usize)> {
    let started = Instant::now();
    let (mut cursor, mut jobs) = (None::<String>, 0usize);
    loop {
        let uri = match &cursor {
            Some(cursor) => format!("/api/v1/jobs?{base_query}&limit=5000&cursor={cursor}"),
            None => format!("/api/v1/jobs?{base_query}&limit=5000"),
        };
        let page: slurmlens_wire::Page<serde_json::Value> =
            serde_json::from_slice(&fetch(app, &uri, false).await?.body)?;
        jobs += page.items.len();
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((started.elapsed(), jobs)),
        }
    }
}

/// Times `measure` `repeat` times after one warm-up run, and answers the median and the last result.
async fn timed<T, F, Fut>(repeat: usize, mut measure: F) -> anyhow::Result<(Duration, T)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<(Duration, T)>>,
{
    let (_, mut last) = measure().await?;
    let mut times = Vec::new();
    for _ in 0..repeat.max(1) {
        let (took, value) = measure().await?;
        times.push(took);
        last = value;
    }
    Ok((median(times), last))
}

/// Runs the benchmark and prints a report.
pub async fn run(config: &Config, args: &GanttBenchArgs) -> anyhow::Result<()> {
    let mut config = config.clone();
    config.access.anonymous = slurmlens::config::AnonymousAccess::Staff;
    let cluster: slurmlens::domain::cluster::ClusterName = args.cluster.parse()?;
    if !config.clusters.contains(&cluster) {
        config.clusters.push(cluster);
    }
    let state = super::prepared_state(&config).await?;
    // The reference for the charts' history: the same server keeping none, reading every window whole.
    let mut keeping_none = config.clone();
    keeping_none.limits.chart_history_jobs = 0;
    let app_reading = router(super::prepared_state(&keeping_none).await?);
    let reader = state
        .app()
        .readers()
        .find(|reader| reader.cluster().as_str() == args.cluster)
        .with_context(|| format!("cluster {} is not configured", args.cluster))?
        .clone();
    let app_state = state.app().clone();
    let viewer = slurmlens::app::Viewer::default();
    let app = router(state);
    let end = args.end.unwrap_or_else(Utc::now).timestamp();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("cluster {}, windows ending {end}; {} repetitions after a warm-up, medians", args.cluster, args.repeat);
    println!(
        "{:<34} {:>9} {:>9} {:>11} {:>10} {:>11} {:>12}",
        "measurement", "jobs", "ms", "bytes", "gzip B", "listing ms", "gantt/list"
    );
    for &days in &args.days {
        let start = end - days * 86_400;
        let window_query = format!("cluster={}&start={start}&end={end}", args.cluster);
        let gantt_uri = format!("/web/v1/gantt?{window_query}");
        // The first view reads the hours no earlier window kept (the 1-day window first: every hour).
        let first = fetch(&app, &gantt_uri, false).await?;
        let (gantt_ms, gantt) = timed(args.repeat, || async {
            let fetched = fetch(&app, &gantt_uri, false).await?;
            Ok((fetched.took, fetched))
        })
        .await?;
        let gzip = fetch(&app, &gantt_uri, true).await?;
        let (read_whole_ms, _) = timed(args.repeat, || async {
            let fetched = fetch(&app_reading, &gantt_uri, false).await?;
            Ok((fetched.took, ()))
        })
        .await?;
        // Jobs drawn one by one (`job_ids`, columnar) or, before the columnar form, one array each.
        let answer = serde_json::from_slice::<serde_json::Value>(&gantt.body)?;
        let count = |field: &str| answer.get(field).and_then(|values| values.as_array().map(Vec::len));
        let jobs = count("job_ids").or_else(|| count("jobs")).unwrap_or(0);
        let (listing_ms, listed) = timed(args.repeat, || drain_listing(&app, &window_query)).await?;
        println!(
            "{:<34} {:>9} {:>9.1} {:>11} {:>10} {:>11.1} {:>12.2}",
            format!("gantt {days} d"),
            jobs,
            ms(gantt_ms),
            gantt.bytes,
            gzip.bytes,
            ms(listing_ms),
            ms(gantt_ms) / ms(listing_ms).max(0.001)
        );
        for (label, took) in [("  first view, hours read", first.took), ("  keeping no history", read_whole_ms)] {
            println!(
                "{:<34} {:>9} {:>9.1} {:>11} {:>10} {:>11.1} {:>12.2}",
                label,
                "",
                ms(took),
                "",
                "",
                ms(listing_ms),
                ms(took) / ms(listing_ms).max(0.001)
            );
        }
        println!("  kept / keeping none: {:.2}", ms(gantt_ms) / ms(read_whole_ms).max(0.001));
        // Where the time goes: slurmdbd's read of the window alone (SQL and decoding, no mapping).
        let window = TimeWindow::new(
            DateTime::from_timestamp(start, 0).context("start")?,
            DateTime::from_timestamp(end, 0).context("end")?,
        )?;
        let catalog = reader.tres_catalog().await?;
        let (read_ms, read) = timed(args.repeat, || async {
            let started = Instant::now();
            let (mut cursor, mut count) = (None, 0usize);
            loop {
                let (jobs, next) = reader
                    .jobs_in_window(&ViewerScope::Staff, window, &Default::default(), &catalog, cursor, 20_000)
                    .await?;
                count += jobs.len();
                match next {
                    Some(next) => cursor = Some(next),
                    None => return Ok((started.elapsed(), count)),
                }
            }
        })
        .await?;
        println!(
            "{:<34} {:>9} {:>9.1} {:>11} {:>10} {:>11.1} {:>12.2}",
            format!("  slurmdbd window read {days} d"),
            read,
            ms(read_ms),
            "",
            "",
            ms(listing_ms),
            ms(read_ms) / ms(listing_ms).max(0.001)
        );
        println!("  listing of the same window: {listed} jobs");
        // Where the time goes past slurmdbd's read: the app's chart read (the read, the window's
        // digests, running jobs' live means), the rest being the pages' assembly, packing and JSON.
        let (chart_ms, charted) = timed(args.repeat, || async {
            let started = Instant::now();
            let window =
                app_state.chart_window(&viewer, Some(&args.cluster), window, &Default::default(), 400_000).await?;
            Ok((started.elapsed(), window.jobs.len()))
        })
        .await?;
        println!(
            "{:<34} {:>9} {:>9.1} {:>11} {:>10} {:>11.1} {:>12.2}",
            format!("  app chart read {days} d"),
            charted,
            ms(chart_ms),
            "",
            "",
            ms(listing_ms),
            ms(chart_ms) / ms(listing_ms).max(0.001)
        );
        // What the payload is made of, by field (bytes of each field's JSON).
        if let serde_json::Value::Object(fields) = &answer {
            let mut sizes: Vec<(usize, &String)> =
                fields.iter().map(|(name, value)| (value.to_string().len(), name)).collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            let shown: Vec<String> = sizes.iter().take(8).map(|(bytes, name)| format!("{name} {bytes}")).collect();
            println!("  payload by field (bytes): {}", shown.join(", "));
        }
    }
    // The grid at the windows' end, against one page of the listing of that second.
    let grid_uri = format!("/web/v1/grid?cluster={}&at={end}", args.cluster);
    let (grid_ms, grid) = timed(args.repeat, || async {
        let fetched = fetch(&app, &grid_uri, false).await?;
        Ok((fetched.took, fetched))
    })
    .await?;
    let grid_gzip = fetch(&app, &grid_uri, true).await?;
    let listing_query = format!("cluster={}&start={end}&end={}", args.cluster, end + 1);
    let (listing_ms, listed) = timed(args.repeat, || drain_listing(&app, &listing_query)).await?;
    let grid_jobs = serde_json::from_slice::<serde_json::Value>(&grid.body)?
        .get("jobs")
        .and_then(|jobs| jobs.as_array().map(Vec::len))
        .unwrap_or(0);
    println!(
        "{:<34} {:>9} {:>9.1} {:>11} {:>10} {:>11.1} {:>12.2}",
        "grid at the end",
        grid_jobs,
        ms(grid_ms),
        grid.bytes,
        grid_gzip.bytes,
        ms(listing_ms),
        ms(grid_ms) / ms(listing_ms).max(0.001)
    );
    println!("  listing of that second: {listed} jobs");
    Ok(())
}
