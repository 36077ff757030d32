//! `slurmlens-dev bench long-report`: the long job of `demo seed-long-job` (a fortnight on 768 GPUs)
//! reported through the recording rules against the same report forced to read raw, in one run: the
//! computed (live) path and the archived path, with the ratios. Prints; never asserts.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;

use slurmlens::config::Config;
use slurmlens_wire::{JobReport, MetricsState};

use crate::demo::longjob::{LongJobArgs, record};

/// Arguments of `slurmlens-dev bench long-report`.
#[derive(Debug, clap::Args)]
pub struct LongReportArgs {
    /// The seeded job's shape (as given to `demo seed-long-job`).
    #[command(flatten)]
    pub job: LongJobArgs,
    /// The cluster whose reader and store the reports use.
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// Repetitions of each computed report (the median is printed).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Report only the job's last hours (where reading the rules starts to pay: `rules_min_window_s`).
    #[arg(long)]
    pub hours: Option<i64>,
}

/// Runs the benchmark.
pub async fn run(config: &Config, args: &LongReportArgs) -> anyhow::Result<()> {
    let mut config = config.clone();
    let vm_config = config.victoriametrics.as_mut().context("the long-report benchmark needs [victoriametrics]")?;
    // The raw report of a fortnight may take long: the benchmark measures it rather than cutting it off.
    vm_config.timeout_ms = 300_000;
    let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(&vm_config.url, Duration::from_secs(300))?;
    let cluster: slurmlens::domain::cluster::ClusterName = args.cluster.parse()?;
    if !config.clusters.contains(&cluster) {
        config.clusters.push(cluster.clone());
    }
    config.report.archive_delay_s = 0;
    let Some((first, end)) = crate::demo::longjob::seeded_window(&config, &vm, &args.job).await? else {
        anyhow::bail!("no long job in VictoriaMetrics: run `slurmlens-dev demo seed-long-job` first");
    };
    let start = args.hours.map_or(first, |hours| (end - hours * 3600).max(first));
    let gpus = u32::from(args.job.gpus_per_node) * args.job.nodes;
    println!(
        "long job: {gpus} GPUs, {:.1} days, {} to {}",
        (end - start) as f64 / 86_400.0,
        chrono::DateTime::from_timestamp(start, 0).unwrap_or_default().to_rfc3339(),
        chrono::DateTime::from_timestamp(end, 0).unwrap_or_default().to_rfc3339()
    );

    let with_rules = |rules: bool, store: bool| {
        let mut config = config.clone();
        config.report.recording_rules = rules;
        // However short the window asked, the rules side reads the rules.
        config.report.rules_min_window_s = 0;
        if !store {
            config.database = None;
        }
        config
    };
    let app = slurmlens::serve::app(&with_rules(true, true))?;
    let reader = app.readers().find(|reader| *reader.cluster() == cluster).context("cluster reader")?;
    let tres = reader.tres_catalog().await?;
    let submitted = u64::try_from(Utc::now().timestamp())?;

    // Computed: the report a viewer gets before the archive holds it.
    let mut medians = Vec::new();
    let mut reports = Vec::new();
    for rules in [true, false] {
        let reporter = slurmlens::serve::reporter(&with_rules(rules, false), None)?;
        let job = record(&args.job, 9_000_001, submitted, start, end)?;
        let mut times = Vec::new();
        let mut last_report = None;
        for _ in 0..args.repeat.max(1) {
            let started = Instant::now();
            let report = reporter.report_for(reader, &job, &tres, slurmlens::app::report::DEFAULT_POINTS).await?;
            times.push(started.elapsed());
            last_report = Some(report);
        }
        let report = last_report.context("at least one report")?;
        let median = median(times);
        println!(
            "long-report computed, {}: {:>8.1} ms (median of {}; reads {}, status {}{})",
            if rules { "rules" } else { "raw  " },
            ms(median),
            args.repeat.max(1),
            report.metrics.reads,
            report.metrics.status,
            report.metrics.reads_note.as_deref().map(|note| format!(", {note}")).unwrap_or_default()
        );
        medians.push(median);
        reports.push(report);
    }
    println!("long-report computed: raw / rules = {:.1}×", ms(medians[1]) / ms(medians[0]).max(1e-9));
    // Two reports are compared only when both have figures: an unavailable side has none to differ.
    match reports.iter().find(|report| report.metrics.status != MetricsState::Ok) {
        Some(report) => println!(
            "long-report figures: not compared (a report read {} has metrics {})",
            report.metrics.reads, report.metrics.status
        ),
        None => println!(
            "long-report figures: largest relative difference of a GPU mean or peak, rules vs raw: {:.2e}",
            largest_difference(&reports[0], &reports[1])
        ),
    }

    // Archived: made once (and stored), then served from our store.
    if config.database.is_some() {
        for (rules, job_id) in [(true, 9_000_002), (false, 9_000_003)] {
            let reporter = slurmlens::serve::reporter(&with_rules(rules, true), app.store().cloned())?;
            let job = record(&args.job, job_id, submitted, start, end)?;
            let started = Instant::now();
            reporter.report_for(reader, &job, &tres, slurmlens::app::report::DEFAULT_POINTS).await?;
            let made = started.elapsed();
            let started = Instant::now();
            let served = reporter.report_for(reader, &job, &tres, slurmlens::app::report::DEFAULT_POINTS).await?;
            let read = started.elapsed();
            println!(
                "long-report archived, {}: made and archived {:>8.1} ms, then served {:>6.1} ms (source {})",
                if rules { "rules" } else { "raw  " },
                ms(made),
                ms(read),
                serde_json::to_value(served.source)?.as_str().unwrap_or("?")
            );
        }
    } else {
        println!("long-report archived: skipped (no [database] configured)");
    }
    Ok(())
}

fn largest_difference(a: &JobReport, b: &JobReport) -> f64 {
    let mut largest: f64 = 0.0;
    for (gpu_a, gpu_b) in a.gpus.iter().zip(&b.gpus) {
        for summary in &gpu_a.summary {
            let Some(other) = gpu_b.summary.iter().find(|s| s.metric == summary.metric) else { continue };
            for (x, y) in [(summary.mean, other.mean), (summary.max, other.max)] {
                largest = largest.max((x - y).abs() / x.abs().max(y.abs()).max(1e-9));
            }
        }
    }
    largest
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
