//! `slurmlens report JOBID`: the job report in a terminal, in the spirit of Princeton's `jobstats`.

use std::fmt::Write;

use anyhow::{Context, bail};
use slurmlens_wire::JobReport;

use crate::config::{AnonymousAccess, Config};
use crate::domain::ids::JobSelector;
use crate::domain::scope::ViewerScope;
use crate::serve::app_state;

/// Arguments of `slurmlens report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// `123`, `123_4` or `8+1`.
    pub job_id: String,
    /// Cluster (default: the first configured).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Print the JSON the API serves instead of text.
    #[arg(long)]
    pub json: bool,
}

fn bar(percent: f64) -> String {
    let filled = ((percent / 100.0).clamp(0.0, 1.0) * 20.0).round() as usize;
    format!("[{}{}]", "█".repeat(filled), "·".repeat(20 - filled))
}

/// Renders a report for a terminal.
pub fn render(report: &JobReport) -> String {
    let job = &report.job;
    let mut out = String::new();
    let _ = writeln!(out, "Job {} on {} — {} ({})", job.job_id, job.cluster, job.job_name, job.state);
    let _ = writeln!(
        out,
        "  user {}  account {}  partition {}  exit {}",
        job.user, job.account, job.partition, job.exit_code
    );
    let _ = writeln!(
        out,
        "  nodes {} ({})  GPUs {}  elapsed {}  limit {}",
        job.node_list, job.alloc_nodes, job.alloc_gpus, job.elapsed, job.timelimit
    );
    let _ = writeln!(
        out,
        "  report: {}; metrics: {}{}",
        report.source,
        report.metrics.status,
        report.metrics.message.as_deref().map(|m| format!(" — {m}")).unwrap_or_default()
    );
    let totals = &report.totals;
    let _ = writeln!(out, "\nTotals: {:.2} GPU-hours, {:.2} idle", totals.gpu_hours, totals.idle_gpu_hours);
    if let Some(kwh) = totals.energy_kwh {
        let _ = writeln!(out, "        energy {kwh:.3} kWh");
    }
    if let (Some(peak), Some(capacity)) = (totals.peak_memory_mib, totals.memory_capacity_mib) {
        let _ = writeln!(out, "        peak GPU memory {peak:.0} of {capacity:.0} MiB");
    }
    if !report.gpus.is_empty() {
        let _ = writeln!(out, "\nGPU            utilisation                 tensor  memory MiB  power W  attribution");
    }
    for gpu in &report.gpus {
        let get = |key: &str| gpu.summary.iter().find(|s| s.metric == key);
        let util = get("gpu_util").map_or(0.0, |s| s.mean);
        let _ = writeln!(
            out,
            "{:<8} gpu{:<2} {} {:>5.1}%  {:>5.1}%  {:>10}  {:>7}  {}{}",
            gpu.node,
            gpu.gpu,
            bar(util),
            util,
            get("tensor_active").map_or(0.0, |s| s.mean),
            get("fb_used").map_or("-".into(), |s| format!("{:.0}", s.max)),
            get("power").map_or("-".into(), |s| format!("{:.0}", s.mean)),
            gpu.attribution,
            if gpu.uncertain { " (uncertain)" } else { "" }
        );
    }
    for node in &report.nodes {
        let get = |key: &str| node.summary.iter().find(|s| s.metric == key).map_or(0.0, |s| s.mean);
        let _ = writeln!(
            out,
            "RDMA {:<8} out {:.2} GB/s  in {:.2} GB/s  CNP {:.1}/s",
            node.node,
            get("rdma_tx") / 1e9,
            get("rdma_rx") / 1e9,
            get("cnp_handled")
        );
    }
    if !report.verdicts.is_empty() {
        let _ = writeln!(out, "\nVerdicts:");
    }
    for verdict in &report.verdicts {
        let _ = writeln!(out, "  [{}] {}", verdict.severity, verdict.message);
        for evidence in &verdict.evidence {
            let _ = writeln!(out, "      - {evidence}");
        }
    }
    out
}

/// Runs `slurmlens report`.
pub async fn run(config: &Config, args: &ReportArgs) -> anyhow::Result<()> {
    let selector: JobSelector = args.job_id.parse().context("reading the job id")?;
    let mut config = config.clone();
    // The terminal form runs where the operator runs it, with the configuration's database access.
    config.access.anonymous = AnonymousAccess::Staff;
    let state = app_state(&config)?;
    let reader = match &args.cluster {
        Some(name) => state
            .readers()
            .find(|reader| reader.cluster().as_str() == name)
            .with_context(|| format!("unknown cluster {name}"))?,
        None => state.readers().next().context("no cluster configured")?,
    };
    let Some(report) = state.reporter().report(reader, &ViewerScope::Staff, selector, 60).await? else {
        bail!("no job {} on cluster {}", args.job_id, reader.cluster());
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}
