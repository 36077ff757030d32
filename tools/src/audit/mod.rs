//! `slurmlens-dev audit`: reads job reports as the API serves them (archived, or made as a page view
//! makes them) and fails on any contradiction between a report and its own evidence (`checks`), and
//! on an XID whose time differs between the job's report and its node's page, or between two windows
//! of that page. Runs in process over the configuration, as staff, like the benchmarks; a report due
//! for archiving is archived, as a page view would. Archived reports of an earlier `GENERATION` are
//! counted, not checked: they are made again on their next read.
//!
//!   slurmlens-dev audit --cluster sakura --hours 48 --limit 300
//!   slurmlens-dev audit --cluster lab --archived

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, SecondsFormat, Utc};
use slurmlens::config::Config;
use slurmlens::domain::blame::ended_badly;
use slurmlens::domain::job::{JobFilter, TimeWindow};
use slurmlens::domain::scope::ViewerScope;
use slurmlens::http::router;
use slurmlens_wire as wire;
use tower::ServiceExt;

pub mod checks;

use checks::Contradiction;

/// Arguments of `slurmlens-dev audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Clusters to audit (default: every configured one).
    #[arg(long)]
    pub cluster: Vec<String>,
    /// The finished GPU jobs of this many hours back from now are audited.
    #[arg(long, default_value_t = 48)]
    pub hours: i64,
    /// At most this many reports per cluster: every job that ended badly first (newest first), then
    /// the rest spread evenly over the window.
    #[arg(long, default_value_t = 300)]
    pub limit: usize,
    /// Also check every report archived in the store for these clusters.
    #[arg(long)]
    pub archived: bool,
    /// Nodes whose XID times are compared between a job's report and the node's page.
    #[arg(long, default_value_t = 8)]
    pub nodes: usize,
}

/// Contradictions per check, with the first few examples.
#[derive(Default)]
struct Tally {
    reports: usize,
    found: BTreeMap<&'static str, Vec<String>>,
}

impl Tally {
    fn add(&mut self, what: &str, contradictions: Vec<Contradiction>) {
        for Contradiction { check, detail } in contradictions {
            self.found.entry(check).or_default().push(format!("{what}: {detail}"));
        }
    }

    fn total(&self) -> usize {
        self.found.values().map(Vec::len).sum()
    }
}

pub async fn run(config: &Config, args: &AuditArgs) -> anyhow::Result<()> {
    let mut config = config.clone();
    config.access.anonymous = slurmlens::config::AnonymousAccess::Staff;
    for cluster in &args.cluster {
        let name = cluster.parse().with_context(|| format!("cluster {cluster}"))?;
        if !config.clusters.contains(&name) {
            config.clusters.push(name);
        }
    }
    let state = slurmlens::serve::http_state(&config)?;
    let app = router(state.clone());
    let end = Utc::now();
    let start = end - chrono::Duration::hours(args.hours);
    let mut tally = Tally::default();
    for reader in state.app().readers() {
        let cluster = reader.cluster().as_str().to_string();
        if !args.cluster.is_empty() && !args.cluster.contains(&cluster) {
            continue;
        }
        let catalog = reader.tres_catalog().await?;
        let window = TimeWindow::new(start, end).map_err(|_| anyhow::anyhow!("an empty window"))?;
        let filter = JobFilter { min_gpus: Some(1), ..JobFilter::default() };
        let mut jobs = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) =
                reader.jobs_in_window(&ViewerScope::Staff, window, &filter, &catalog, cursor, 5000).await?;
            jobs.extend(
                page.into_iter().filter(|job| job.state.run_is_over() && job.time_start > 0 && job.time_end > 0),
            );
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let chosen = choose(&jobs, args.limit);
        println!("{cluster}: {} finished GPU jobs in the last {} h; auditing {}", jobs.len(), args.hours, chosen.len());
        let mut xid_reports = Vec::new();
        for job in chosen {
            let path = format!("/api/v1/jobs/{}/report?cluster={cluster}", job.identity.id_job);
            let report: wire::JobReport = get(&app, &path).await?;
            tally.reports += 1;
            tally.add(&format!("{cluster} job {}", job.identity.id_job), checks::check(&report));
            if report.gpus.iter().any(|gpu| !gpu.xid_events.is_empty()) && xid_reports.len() < args.nodes {
                xid_reports.push(report);
            }
        }
        println!("{cluster}: XID times compared with the node pages for {} reports", xid_reports.len());
        for report in &xid_reports {
            tally.add(&format!("{cluster} job {}", report.job.job_id), event_times(&app, &cluster, report).await?);
        }
        if args.archived
            && let Some(store) = state.app().store()
        {
            let cluster_name = reader.cluster().clone();
            let (mut archived, mut earlier) = (0usize, 0usize);
            let mut after = (0, 0);
            loop {
                let page = store.archived_page(&cluster_name, after, 200).await?;
                let Some(&(job_id, submit, _, _)) = page.last() else { break };
                after = (job_id, submit);
                for (job_id, _, json, generation) in page {
                    // Made by an earlier release: made again on its next read while its series are kept.
                    if generation < slurmlens::app::report::GENERATION {
                        earlier += 1;
                        continue;
                    }
                    let what = format!("{cluster} job {job_id} (archived)");
                    match serde_json::from_str::<wire::JobReport>(&json) {
                        Ok(report) => tally.add(&what, checks::check(&report)),
                        Err(error) => tally.add(
                            &what,
                            vec![Contradiction {
                                check: "unreadable",
                                detail: format!("the archived report does not read as a report: {error}"),
                            }],
                        ),
                    }
                    archived += 1;
                }
            }
            tally.reports += archived;
            println!(
                "{cluster}: {archived} archived reports checked ({earlier} of an earlier generation left to be made again)"
            );
        }
    }
    println!("{} reports audited", tally.reports);
    for (check, lines) in &tally.found {
        println!("{check}: {} contradictions", lines.len());
        for line in lines.iter().take(5) {
            println!("  {line}");
        }
    }
    if tally.total() > 0 {
        bail!("{} contradictions between reports and their evidence", tally.total());
    }
    println!("no contradiction found");
    Ok(())
}

/// Every job that ended badly (newest first), then the others spread evenly over the window, up to
/// `limit`.
fn choose(jobs: &[slurmlens::domain::job::JobRecord], limit: usize) -> Vec<&slurmlens::domain::job::JobRecord> {
    let (mut bad, good): (Vec<_>, Vec<_>) = jobs.iter().partition(|job| ended_badly(job.state.base(), true));
    bad.sort_by_key(|job| std::cmp::Reverse(job.time_end));
    bad.truncate(limit / 2);
    let room = limit.saturating_sub(bad.len());
    let every = good.len().div_ceil(room.max(1)).max(1);
    bad.extend(good.into_iter().step_by(every).take(room));
    bad
}

/// Each XID of the report at the same moment on its node's page, in two windows around it.
async fn event_times(
    app: &axum::Router,
    cluster: &str,
    report: &wire::JobReport,
) -> anyhow::Result<Vec<Contradiction>> {
    let mut out = Vec::new();
    let seen: BTreeSet<(String, u16, u32, DateTime<Utc>)> = report
        .gpus
        .iter()
        .flat_map(|gpu| gpu.xid_events.iter().map(|event| (gpu.node.clone(), gpu.gpu, event.xid, event.at)))
        .collect();
    let nodes: BTreeSet<&String> = seen.iter().map(|(node, ..)| node).collect();
    for node in nodes {
        let Some(first) = seen.iter().filter(|(n, ..)| n == node).map(|(.., at)| *at).min() else { continue };
        for (before, after) in [
            (chrono::Duration::hours(6), chrono::Duration::hours(1)),
            (chrono::Duration::hours(29), chrono::Duration::hours(3)),
        ] {
            let end = (first + after).min(Utc::now());
            let start = first - before;
            let stamp = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Secs, true);
            let path = format!("/api/v1/nodes/{node}?cluster={cluster}&start={}&end={}", stamp(start), stamp(end));
            let page: wire::NodePage = get(app, &path).await?;
            for (_, gpu, xid, at) in seen.iter().filter(|(n, _, _, at)| n == node && *at >= start && *at <= end) {
                let on_page = page.faults.iter().any(|fault| {
                    fault.source == wire::EvidenceSource::Xid
                        && fault.gpu == Some(*gpu)
                        && fault.detail.starts_with(&format!("XID {xid}:"))
                        && fault.at == *at
                });
                if !on_page && !page.faults_truncated {
                    let times: Vec<String> = page
                        .faults
                        .iter()
                        .filter(|fault| fault.gpu == Some(*gpu) && fault.detail.starts_with(&format!("XID {xid}:")))
                        .map(|fault| fault.at.to_rfc3339())
                        .collect();
                    out.push(Contradiction {
                        check: "event_time",
                        detail: format!(
                            "XID {xid} on {node} GPU {gpu} at {at} in the report; the node page ({} h window) has it at {times:?}",
                            (end - start).num_hours()
                        ),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// GET `path` as staff and decode its JSON.
async fn get<T: serde::de::DeserializeOwned>(app: &axum::Router, path: &str) -> anyhow::Result<T> {
    let response = app.clone().oneshot(Request::get(path).body(Body::empty())?).await?;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
    if status != StatusCode::OK {
        bail!("{path} answered {status}: {}", String::from_utf8_lossy(&bytes));
    }
    serde_json::from_slice(&bytes).with_context(|| format!("decoding {path}"))
}
