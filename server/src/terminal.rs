//! `slurmlens report JOBID`: the job report in a terminal, in the spirit of Princeton's `jobstats`; as
//! the API's JSON; or as the job page in one self-contained HTML file to attach to a ticket.

use std::fmt::Write;

use anyhow::{Context, bail};
use slurmlens_wire::JobReport;

use crate::config::Config;
use crate::domain::ids::JobSelector;
use crate::domain::scope::ViewerScope;
use crate::serve::app;

/// Arguments of `slurmlens report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// `123`, `123_4` or `8+1`.
    pub job_id: String,
    /// Cluster (default: the first configured).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Print the JSON the API serves instead of text (the same as `--format json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// `text` for a terminal, `json` as the API serves it, `html`: the job page as one file (styles
    /// inline, charts as SVG, no scripts), what staff see of it.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<std::path::PathBuf>,
}

/// How `slurmlens report` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Html,
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
    let _ = write!(out, "\nTotals: {:.2} GPU-hours, {:.2} idle", totals.gpu_hours, totals.idle_gpu_hours);
    if totals.unattributed_gpu_hours > 0.0 {
        let _ = write!(
            out,
            " ({:.2} GPU-hours on shared nodes where no record says which GPUs were the job's: not measured)",
            totals.unattributed_gpu_hours
        );
    }
    let _ = writeln!(out);
    if let Some(kwh) = totals.energy_kwh {
        let _ = writeln!(out, "        energy {kwh:.3} kWh");
    }
    if let (Some(watts), Some(kwh)) = (totals.node_power_w, totals.node_energy_kwh) {
        let _ = writeln!(out, "        nodes {:.2} kW mean, {kwh:.3} kWh (BMC)", watts / 1e3);
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
        let find = |key: &str| node.summary.iter().find(|s| s.metric == key).map(|s| s.mean);
        let get = |key: &str| find(key).unwrap_or(0.0);
        if find("rdma_tx").is_some() || find("rdma_rx").is_some() {
            let _ = writeln!(
                out,
                "RDMA {:<8} out {:.2} GB/s  in {:.2} GB/s  CNP {:.1}/s",
                node.node,
                get("rdma_tx") / 1e9,
                get("rdma_rx") / 1e9,
                get("cnp_handled")
            );
        }
        if find("cpu_busy").is_some() || find("node_power").is_some() {
            let watts = find("node_power").map_or("-".into(), |w| format!("{:.1} kW", w / 1e3));
            let _ = writeln!(
                out,
                "Node {:<8} CPU {:.0}%  iowait {:.1}%  I/O pressure {:.1}%  memory {:.0} GB  power {watts}",
                node.node,
                get("cpu_busy"),
                get("cpu_iowait"),
                get("io_pressure"),
                get("memory_used") / 1e9,
            );
        }
    }
    if let Some(io) = &report.io {
        let whose = match io.source {
            slurmlens_wire::IoSource::Jobstats => "job statistics",
            slurmlens_wire::IoSource::Nodes => "the nodes' clients",
        };
        let _ = writeln!(
            out,
            "Lustre   read {:.1} GB  written {:.1} GB  ({whose})",
            io.read_bytes / 1e9,
            io.write_bytes / 1e9
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
    // The terminal form runs where the operator runs it, with the configuration's database access.
    let app = app(config)?;
    let reader = app.cluster(args.cluster.as_deref()).map_err(|error| anyhow::anyhow!("{error}"))?;
    let format = if args.json { Format::Json } else { args.format };
    let text = match format {
        Format::Html => html(config, &app, reader.cluster().as_str(), &args.job_id).await?,
        Format::Text | Format::Json => {
            let Some(report) = app.reporter().report(reader, &ViewerScope::Staff, selector, 60).await? else {
                bail!("no job {} on cluster {}", args.job_id, reader.cluster());
            };
            match format {
                Format::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
                _ => render(&report),
            }
        }
    };
    match &args.output {
        Some(path) => std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// The job page as the site serves it to staff, made into one self-contained file.
async fn html(config: &Config, app: &crate::app::App, cluster: &str, job_id: &str) -> anyhow::Result<String> {
    use slurmlens_web::query::{encode, percent_encode};
    let path = format!("/jobs/{}?{}", percent_encode(job_id), encode(&[("cluster", cluster.to_string())]));
    let options = crate::serve::web_options(config)?;
    let page = match crate::http::page_html(app, options, crate::app::Viewer::Operator, &path).await {
        Ok(page) => page,
        Err((status, _)) if status == axum::http::StatusCode::NOT_FOUND => {
            bail!("no job {job_id} on cluster {cluster}")
        }
        Err((status, body)) => bail!("the job page answered {status}: {body:.300}"),
    };
    let at = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string();
    let printed = slurmlens_web::printable::Printed { site: &config.public_url, path: &path, at: &at };
    Ok(slurmlens_web::printable::self_contained(&page, &printed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_with_nodes() -> JobReport {
        serde_json::from_value(serde_json::json!({
            "job": {
                "job_id": "7", "job_id_raw": 7, "cluster": "lab", "job_name": "resnet", "user": "alice", "uid": 1,
                "gid": 1, "account": "ml", "partition": "gpu", "qos": "normal", "state": "COMPLETED",
                "exit_code": "0:0", "derived_exit_code": "0:0", "submit": "2026-11-29T10:00:00Z",
                "elapsed": "01:00:00", "elapsed_raw": 3600, "timelimit": "02:00:00", "node_list": "gpu001",
                "alloc_nodes": 1, "alloc_cpus": 4, "alloc_gpus": 8, "alloc_tres": "cpu=4", "req_tres": "cpu=4",
                "req_mem": "1000M"
            },
            "source": "final", "generated_at": "2026-11-29T12:00:00Z",
            "metrics": {"status": "ok", "step_s": 60}, "gpus": [],
            "nodes": [{"node": "gpu001", "series": [], "summary": [
                {"metric": "cpu_busy", "unit": "%", "mean": 41.0, "max": 60.0, "samples": 0},
                {"metric": "cpu_iowait", "unit": "%", "mean": 18.5, "max": 30.0, "samples": 0},
                {"metric": "node_power", "unit": "W", "mean": 5600.0, "max": 6100.0, "samples": 0}
            ]}],
            "io": {"source": "jobstats", "read_bytes": 8.64e11, "write_bytes": 2e9, "summary": [], "series": []},
            "totals": {"gpu_hours": 8.0, "idle_gpu_hours": 3.0, "node_power_w": 5600.0, "node_energy_kwh": 5.6},
            "verdicts": []
        }))
        .expect("a report")
    }

    #[test]
    fn the_terminal_report_names_the_nodes_and_the_jobs_lustre_io() {
        let text = render(&report_with_nodes());
        assert!(text.contains("Node gpu001") && text.contains("CPU 41%  iowait 18.5%"), "{text}");
        assert!(text.contains("power 5.6 kW"), "{text}");
        assert!(text.contains("Lustre   read 864.0 GB  written 2.0 GB  (job statistics)"), "{text}");
        assert!(text.contains("nodes 5.60 kW mean, 5.600 kWh (BMC)"), "{text}");
        assert!(!text.contains("RDMA"), "no RDMA line without RDMA series: {text}");
    }
}
