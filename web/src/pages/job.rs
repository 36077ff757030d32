//! `/jobs/<id>`: one job, the stable URL the Slurm plugin prints. The job's sacct facts, its nodes
//! with their GPUs, its steps, links to the Gantt and grid at its time, and the report section: the
//! report's verdicts, totals, per-GPU summaries and charts from `/api/v1/jobs/{id}/report` (GPU × time
//! heat maps, per-metric timelines, RDMA in/out per node: SVG drawn on the server by [`crate::charts`]);
//! "report not available yet" when there is none. Then the job's logs (VictoriaLogs: the lines that
//! matter first) and CPU profile (Pyroscope: top functions, icicle graph), each with its own status
//! line when its source is not configured or not answering. Printable: the print stylesheet drops
//! navigation.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use slurmlens_wire as wire;

use crate::api::{JobView, Loader};
use crate::app::Time;
use crate::charts;
use crate::pages::LoadError;
use crate::palette::state_colour;
use crate::query::{GanttQuery, GridQuery, encode, percent_encode};

/// The job page.
#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let key = Memo::new(move |_| (query.with(|q| q.get("cluster")), params.with(|p| p.get("id").unwrap_or_default())));
    let loader = Loader::from_context();
    let job = Resource::new(move || key.get(), move |(cluster, id)| loader.job(cluster, id));
    #[cfg(feature = "ssr")]
    let response = use_context::<leptos_axum::ResponseOptions>();
    view! {
        <section class="page job-page">
            <Suspense fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    #[cfg(feature = "ssr")]
                    let response = response.clone();
                    Suspend::new(async move {
                        match job.await {
                            Ok(view) => view! { <JobDetailView view /> }.into_any(),
                            Err(error) => {
                                #[cfg(feature = "ssr")]
                                if let Some(response) = response {
                                    response.set_status(
                                        axum::http::StatusCode::from_u16(error.status).unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
                                    );
                                }
                                view! { <h1>"Job"</h1><LoadError error /> }.into_any()
                            }
                        }
                    })
                }}
            </Suspense>
        </section>
    }
}

fn fact(label: &'static str, value: impl IntoView + 'static) -> impl IntoView {
    view! {
        <div class="fact">
            <dt>{label}</dt>
            <dd data-fact=label>{value}</dd>
        </div>
    }
}

fn optional_time(time: Option<chrono::DateTime<chrono::Utc>>) -> AnyView {
    match time {
        Some(time) => view! { <Time at=time.timestamp() /> }.into_any(),
        None => "—".into_any(),
    }
}

/// Bytes as sacct's MaxRSS prints them (`1.5G`).
fn bytes(value: Option<u64>) -> String {
    let Some(value) = value else {
        return String::new();
    };
    let units = ["", "K", "M", "G", "T"];
    let mut scaled = value as f64;
    let mut unit = 0;
    while scaled >= 1024.0 && unit < units.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{value}") } else { format!("{scaled:.1}{}", units[unit]) }
}

#[component]
fn JobDetailView(view: JobView) -> impl IntoView {
    let JobView { detail, report, charts, logs, profile } = view;
    let has_report = report.is_some().to_string();
    let job = detail.job.clone();
    let cluster = job.cluster.clone();
    let start = job.start.map(|t| t.timestamp());
    let end = job.end.map(|t| t.timestamp());
    let gantt_href = start.map(|start| {
        let end = end.unwrap_or_else(crate::api::now);
        let margin = ((end - start) / 4).max(1800);
        let query = GanttQuery {
            cluster: Some(cluster.clone()),
            start: Some(start - margin),
            end: Some(end + margin),
            ..GanttQuery::default()
        };
        format!("/?{}", query.to_query())
    });
    let grid_href = start.map(|start| {
        let middle = end.map_or(start + 60, |end| (start + end) / 2);
        let query = GridQuery { cluster: Some(cluster.clone()), at: Some(middle), ..GridQuery::default() };
        format!("/grid?{}", query.to_query())
    });
    let report_href =
        format!("/api/v1/jobs/{}/report?{}", percent_encode(&job.job_id), encode(&[("cluster", cluster.clone())]));
    let api_href = format!("/api/v1/jobs/{}?{}", percent_encode(&job.job_id), encode(&[("cluster", cluster.clone())]));
    let state_style = format!("border-color:{}", state_colour(&job.state));
    let nodes = detail
        .nodes
        .iter()
        .map(|node: &wire::NodeAllocation| {
            view! {
                <tr data-testid="job-node">
                    <td>{node.node.clone()}</td>
                    <td>{node.gpus.map(|g| g.to_string()).unwrap_or_else(|| "?".into())}</td>
                    <td>{node.gpus_source.as_str().replace('_', " ")}</td>
                </tr>
            }
        })
        .collect_view();
    let steps = detail
        .steps
        .iter()
        .map(|step: &wire::Step| {
            view! {
                <tr data-testid="job-step">
                    <td>{step.job_id.clone()}</td>
                    <td>{step.step_name.clone()}</td>
                    <td><span class="state" style=format!("border-color:{}", state_colour(&step.state))>{step.state.clone()}</span></td>
                    <td>{step.exit_code.clone()}</td>
                    <td>{optional_time(step.start)}</td>
                    <td>{optional_time(step.end)}</td>
                    <td>{step.elapsed.clone()}</td>
                    <td>{step.node_list.clone()}</td>
                    <td>{step.ntasks}</td>
                    <td class="tres">{step.alloc_tres.clone()}</td>
                    <td>{bytes(step.max_rss_bytes)}</td>
                    <td>{format!("{:.1}", step.total_cpu_s)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <header class="job-title">
            <h1 data-testid="job-title">{format!("Job {} ", job.job_id)}<small>{job.job_name.clone()}</small></h1>
            <span class="state big" style=state_style data-testid="job-state">{job.state.clone()}</span>
            <nav class="links" aria-label="this job elsewhere">
                {gantt_href.map(|href| view! { <a href=href data-testid="job-on-gantt">"On the Gantt"</a> })}
                {grid_href.map(|href| view! { <a href=href data-testid="job-on-grid">"On the grid"</a> })}
                <a href=api_href rel="alternate" type="application/json">"JSON"</a>
            </nav>
        </header>
        <section class="facts" aria-label="accounting">
            <h2>"Accounting (as sacct shows it)"</h2>
            <dl data-testid="job-facts">
                {fact("Cluster", job.cluster.clone())}
                {fact("User", format!("{} ({})", job.user, job.uid))}
                {fact("Account", job.account.clone())}
                {fact("Partition", job.partition.clone())}
                {fact("QOS", job.qos.clone())}
                {fact("State", job.state.clone())}
                {fact("ExitCode", with_words(&job.exit_code))}
                {fact("DerivedExitCode", with_words(&job.derived_exit_code))}
                {fact("Submit", view! { <Time at=job.submit.timestamp() /> })}
                {fact("Start", optional_time(job.start))}
                {fact("End", optional_time(job.end))}
                {fact("Elapsed", job.elapsed.clone())}
                {fact("Timelimit", job.timelimit.clone())}
                {fact("NodeList", job.node_list.clone())}
                {fact("AllocNodes", job.alloc_nodes)}
                {fact("AllocCPUS", job.alloc_cpus)}
                {fact("AllocGPUs", job.alloc_gpus)}
                {fact("AllocTRES", job.alloc_tres.clone())}
                {fact("ReqTRES", job.req_tres.clone())}
                {fact("ReqMem", job.req_mem.clone())}
                {fact("WorkDir", detail.work_dir.clone())}
                {fact("SubmitLine", detail.submit_line.clone())}
                {job.comment.clone().map(|comment| fact("Comment", comment))}
            </dl>
        </section>
        <section aria-label="nodes">
            <h2>"Nodes and GPUs"</h2>
            <table class="compact" data-testid="job-nodes">
                <thead><tr><th scope="col">"Node"</th><th scope="col">"GPUs"</th><th scope="col">"GPU count from"</th></tr></thead>
                <tbody>{nodes}</tbody>
            </table>
        </section>
        <section aria-label="steps">
            <h2>"Steps"</h2>
            <div class="table-wrap">
                <table class="compact" data-testid="job-steps">
                    <thead>
                        <tr>
                            <th scope="col">"JobID"</th><th scope="col">"Name"</th><th scope="col">"State"</th><th scope="col">"ExitCode"</th>
                            <th scope="col">"Start"</th><th scope="col">"End"</th><th scope="col">"Elapsed"</th><th scope="col">"NodeList"</th>
                            <th scope="col">"NTasks"</th><th scope="col">"AllocTRES"</th><th scope="col">"MaxRSS"</th><th scope="col">"TotalCPU (s)"</th>
                        </tr>
                    </thead>
                    <tbody>{steps}</tbody>
                </table>
            </div>
        </section>
        <section class="report" aria-label="report" data-testid="report-section" data-available=has_report>
            <h2>"Report"</h2>
            {match report {
                Some(report) => view! { <ReportSummary report charts href=report_href /> }.into_any(),
                None => view! { <p class="muted" data-testid="report-missing">"report not available yet"</p> }.into_any(),
            }}
        </section>
        <LogsSection logs />
        <ProfileSection profile />
    }
}

/// How a log or profile source answered, for its status line.
enum SignalAnswer {
    Answered,
    NotConfigured,
    /// Not answered (or nothing to show), with the status's word.
    Failed(&'static str),
}

impl From<wire::LogsStatus> for SignalAnswer {
    fn from(status: wire::LogsStatus) -> Self {
        match status {
            wire::LogsStatus::Ok => Self::Answered,
            wire::LogsStatus::NotConfigured => Self::NotConfigured,
            wire::LogsStatus::Unavailable => Self::Failed(status.as_str()),
        }
    }
}

impl From<wire::ProfileStatus> for SignalAnswer {
    fn from(status: wire::ProfileStatus) -> Self {
        match status {
            wire::ProfileStatus::Ok => Self::Answered,
            wire::ProfileStatus::NotConfigured => Self::NotConfigured,
            wire::ProfileStatus::Empty | wire::ProfileStatus::Unavailable => Self::Failed(status.as_str()),
        }
    }
}

/// A source's status line: `None` when it answered.
fn signal_status(status: SignalAnswer, message: Option<&str>, what: &str) -> Option<String> {
    match status {
        SignalAnswer::Answered => None,
        // Where a source is not set up is the site's business; a tenant is told only what is missing.
        SignalAnswer::NotConfigured => Some(format!("this server does not collect {what}")),
        SignalAnswer::Failed(word) => Some(message.map_or_else(|| format!("{what} {word}"), String::from)),
    }
}

/// The job's log lines: the ones that matter first (with their time, node and kind), then the window's.
#[component]
fn LogsSection(logs: Option<wire::JobLogs>) -> impl IntoView {
    let Some(logs) = logs else {
        return view! {
            <section class="logs" aria-label="logs" data-testid="logs-section" data-status="missing">
                <h2>"Logs"</h2>
                <p class="muted" data-testid="logs-status">"logs not available"</p>
            </section>
        }
        .into_any();
    };
    let status_line = signal_status(logs.status.into(), logs.message.as_deref(), "logs");
    let message = logs.message.clone().filter(|_| status_line.is_none());
    let node = |node: &Option<String>| node.clone().unwrap_or_else(|| "?".into());
    let important = logs
        .important
        .iter()
        .map(|line| {
            let kind = match line.xid {
                Some(code) => format!("XID {code}"),
                None => line.kind.as_str().replace('_', " "),
            };
            view! {
                <tr data-testid="log-important" data-kind=line.kind.as_str() data-at=line.time.timestamp().to_string()>
                    <td><Time at=line.time.timestamp() /></td>
                    <td>{node(&line.node)}</td>
                    <td><strong>{kind}</strong></td>
                    <td class="log-message">{line.message.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    let lines = logs
        .lines
        .iter()
        .map(|line| {
            view! {
                <tr data-testid="log-line">
                    <td><Time at=line.time.timestamp() /></td>
                    <td>{node(&line.node)}</td>
                    <td class="log-message">{line.message.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    let summary = format!(
        "{} lines{}, {} important",
        logs.lines.len(),
        if logs.truncated { " (the latest; more in the window)" } else { "" },
        logs.important.len()
    );
    view! {
        <section class="logs" aria-label="logs" data-testid="logs-section" data-status=logs.status.as_str()>
            <h2>"Logs"</h2>
            {match status_line {
                Some(line) => view! { <p class="muted" data-testid="logs-status">{line}</p> }.into_any(),
                None => view! {
                    <p class="muted">{summary}{message.map(|m| format!(" · {m}"))}</p>
                    {(!logs.important.is_empty()).then(|| view! {
                        <table class="compact" data-testid="logs-important">
                            <thead><tr><th scope="col">"When"</th><th scope="col">"Node"</th><th scope="col">"What"</th><th scope="col">"Line"</th></tr></thead>
                            <tbody>{important}</tbody>
                        </table>
                    })}
                    <div class="table-wrap log-lines">
                        <table class="compact" data-testid="logs-lines">
                            <thead><tr><th scope="col">"When"</th><th scope="col">"Node"</th><th scope="col">"Line"</th></tr></thead>
                            <tbody>{lines}</tbody>
                        </table>
                    </div>
                }.into_any(),
            }}
            {logs.query.clone().map(|query| view! {
                <details><summary>"LogsQL sent"</summary><code data-testid="logs-query">{query}</code></details>
            })}
        </section>
    }
    .into_any()
}

/// The job's CPU profile: top functions by self (and by total) and an icicle graph.
#[component]
fn ProfileSection(profile: Option<wire::JobProfile>) -> impl IntoView {
    let Some(profile) = profile else {
        return view! {
            <section class="profile" aria-label="CPU profile" data-testid="profile-section" data-status="missing">
                <h2>"CPU profile"</h2>
                <p class="muted" data-testid="profile-status">"profile not available"</p>
            </section>
        }
        .into_any();
    };
    let status_line = signal_status(profile.status.into(), profile.message.as_deref(), "CPU profiles");
    let pct = |share: f64| format!("{:.1} %", share * 100.0);
    let rows = |functions: &[wire::ProfileFunction], testid: &'static str| {
        functions
            .iter()
            .map(|function| {
                let name: String = function.name.chars().take(120).collect();
                view! {
                    <tr data-testid=testid title=function.name.clone()>
                        <td class="name">{name}</td>
                        <td>{pct(function.self_share)}</td>
                        <td>{pct(function.total_share)}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let by_self = rows(&profile.top_self, "profile-top");
    let by_total = rows(&profile.top_total, "profile-top-total");
    let icicle = crate::flame::icicle(&profile.flame, profile.total);
    view! {
        <section class="profile" aria-label="CPU profile" data-testid="profile-section" data-status=profile.status.as_str()>
            <h2>"CPU profile"</h2>
            {match status_line {
                Some(line) => view! { <p class="muted" data-testid="profile-status">{line}</p> }.into_any(),
                None => view! {
                    <p class="muted">{format!("{} · {} {} sampled", profile.profile_type, profile.total, profile.units.clone().unwrap_or_default())}</p>
                    <table class="compact" data-testid="profile-top-table">
                        <thead><tr><th scope="col">"Function (by self)"</th><th scope="col">"Self"</th><th scope="col">"Total"</th></tr></thead>
                        <tbody>{by_self}</tbody>
                    </table>
                    <table class="compact">
                        <thead><tr><th scope="col">"Function (by total)"</th><th scope="col">"Self"</th><th scope="col">"Total"</th></tr></thead>
                        <tbody>{by_total}</tbody>
                    </table>
                    {icicle.map(|svg| view! { <figure class="chart-box" data-testid="profile-flame"><figcaption>"Flame graph (callers above callees)"</figcaption><div inner_html=svg></div></figure> })}
                }.into_any(),
            }}
            {profile.query.clone().map(|query| view! {
                <details><summary>"Selector sent"</summary><code data-testid="profile-query">{query}</code></details>
            })}
        </section>
    }
    .into_any()
}

/// The report's verdicts, totals, per-GPU means and peaks, and its charts.
#[component]
fn ReportSummary(report: wire::JobReport, charts: Vec<charts::Chart>, href: String) -> impl IntoView {
    let metrics = match report.metrics.message.clone() {
        Some(message) => format!("metrics {}: {message}", report.metrics.status),
        None => format!("metrics {}", report.metrics.status),
    };
    // Where VictoriaMetrics answered, a missing exporter is said; where it did not, the status says so.
    let metrics_ok = report.metrics.status == wire::MetricsState::Ok;
    let totals = &report.totals;
    let mut total_text =
        vec![format!("{:.2} GPU hours", totals.gpu_hours), format!("{:.2} idle", totals.idle_gpu_hours)];
    if let Some(util) = totals.mean_gpu_util {
        total_text.push(format!("mean GPU utilisation {util:.0}%"));
    }
    if let Some(tensor) = totals.mean_tensor_active {
        total_text.push(format!("mean tensor activity {tensor:.0}%"));
    }
    if let Some(energy) = totals.energy_kwh {
        total_text.push(format!("{energy:.2} kWh"));
    }
    if let (Some(power), Some(energy)) = (totals.node_power_w, totals.node_energy_kwh) {
        total_text.push(format!("nodes {} mean, {energy:.2} kWh (BMC)", charts::human(power, "W")));
    }
    let verdicts = report
        .verdicts
        .iter()
        .map(|verdict| {
            let evidence = verdict.evidence.iter().map(|line| view! { <li>{line.clone()}</li> }).collect_view();
            let next = verdict.next_step.clone().map(|step| {
                view! { <p class="next-step" data-testid="next-step"><strong>"What to do: "</strong>{step}</p> }
            });
            view! {
                <article class=format!("verdict {}", verdict.severity) data-testid="verdict" data-kind=verdict.kind.clone()>
                    <h3>{format!("{} · {}", verdict.severity, verdict_title(&verdict.kind))}</h3>
                    <p>{verdict.message.clone()}</p>
                    <ul>{evidence}</ul>
                    {next}
                </article>
            }
        })
        .collect_view();
    let gpus = report
        .gpus
        .iter()
        .map(|gpu| {
            let summary = gpu
                .summary
                .iter()
                .map(|metric| format!("{} {:.1}/{:.1} {}", metric.metric, metric.mean, metric.max, metric.unit))
                .collect::<Vec<_>>()
                .join(" · ");
            view! {
                <tr data-testid="report-gpu">
                    <td>{gpu.node.clone()}</td>
                    <td>{gpu.gpu}</td>
                    <td>{gpu.attribution.as_str().replace('_', " ")}{if gpu.uncertain { " (uncertain)" } else { "" }}</td>
                    <td>{summary}</td>
                    <td>{gpu.xid_events.len()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p class="muted">{format!("{} report, {metrics}. ", report.source)} <a href=href>"report JSON"</a></p>
        <p data-testid="report-totals">{total_text.join(" · ")}</p>
        {report.failure.clone().map(|failure| view! { <FailureCard failure /> })}
        <div class="verdicts">{verdicts}</div>
        {report.traces.clone().map(|traces| view! { <TimeShares traces /> })}
        {(!report.bursts.is_empty()).then(|| view! { <BurstTable bursts=report.bursts.clone() /> })}
        <NodeTable nodes=report.nodes.clone() metrics_ok=metrics_ok />
        {match report.io.clone() {
            Some(io) => view! { <IoLine io /> }.into_any(),
            None => metrics_ok.then(|| view! {
                <p class="muted" data-testid="report-io" data-source="none">"File system: no Lustre exporter series for this job or its nodes."</p>
            }).into_any(),
        }}
        {(!report.gpus.is_empty()).then(|| view! {
            <table class="compact" data-testid="report-gpus">
                <thead><tr><th scope="col">"Node"</th><th scope="col">"GPU"</th><th scope="col">"Attribution"</th><th scope="col">"Mean/peak"</th><th scope="col">"XID"</th></tr></thead>
                <tbody>{gpus}</tbody>
            </table>
        })}
        <ReportCharts charts />
    }
}

/// "Was the failure mine?": the verdict, why, and the evidence in time order.
#[component]
fn FailureCard(failure: wire::FailureAnalysis) -> impl IntoView {
    let (headline, next) = match failure.blame {
        wire::Blame::Infrastructure => (
            "Likely the infrastructure, not your job",
            "resubmit: the fault was not in your program. If it happens again, tell your provider the job id and the node named below.",
        ),
        wire::Blame::Application => (
            "Likely the application",
            "look at the program's own output around its end (the Logs section) and at the verdicts below.",
        ),
        wire::Blame::Unknown => (
            "Cause unknown",
            "read the evidence below with the program's logs; if in doubt, ask your provider with the job id.",
        ),
    };
    let evidence = failure
        .evidence
        .iter()
        .map(|fact| {
            view! {
                <tr data-testid="failure-evidence" data-source=fact.source.as_str() data-strength=fact.strength.as_str()>
                    <td><Time at=fact.at.timestamp() /></td>
                    <td>{evidence_source(fact.source)}</td>
                    <td>{fact.place.clone()}</td>
                    <td>{fact.detail.clone()}</td>
                    <td>{points_to(fact.strength)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <article class=format!("failure {}", failure.blame) data-testid="failure" data-blame=failure.blame.as_str()>
            <h3>{format!("Was the failure mine? {headline}")}</h3>
            <p>{failure.reason.clone()}</p>
            <p class="next-step"><strong>"What to do: "</strong>{next}</p>
            <table class="compact">
                <thead><tr><th scope="col">"When"</th><th scope="col">"Source"</th><th scope="col">"Where"</th><th scope="col">"What"</th><th scope="col">"Points to"</th></tr></thead>
                <tbody>{evidence}</tbody>
            </table>
        </article>
    }
}

/// An exit code with what it means: "0:9 (killed by SIGKILL)".
fn with_words(code: &str) -> String {
    match slurmlens_slurm::signal::exit_code_in_words(code) {
        Some(words) => format!("{code} ({words})"),
        None => code.to_string(),
    }
}

/// Where a fact came from, in words.
fn evidence_source(source: wire::EvidenceSource) -> &'static str {
    match source {
        wire::EvidenceSource::Slurm => "Slurm",
        wire::EvidenceSource::Xid => "GPU driver (XID)",
        wire::EvidenceSource::NodeEvent => "Slurm node event",
        wire::EvidenceSource::PingmeshLoss => "network probes: loss",
        wire::EvidenceSource::PingmeshRtt => "network probes: latency",
        wire::EvidenceSource::LinkErrors => "RDMA link",
        wire::EvidenceSource::Ecc => "GPU memory (ECC)",
    }
}

/// What a fact points to, in words.
fn points_to(strength: wire::EvidenceStrength) -> &'static str {
    match strength {
        wire::EvidenceStrength::Strong => "the infrastructure",
        wire::EvidenceStrength::Weak => "possibly the infrastructure",
        wire::EvidenceStrength::Application => "the program",
        wire::EvidenceStrength::Fact => "Slurm's record",
        wire::EvidenceStrength::Context => "set aside: not on the job's path",
    }
}

/// A verdict's title in words.
fn verdict_title(kind: &str) -> String {
    match kind {
        "idle_gpus" => "idle GPUs".into(),
        "outlier_node" => "a slow node".into(),
        "low_tensor_activity" => "little tensor work".into(),
        "memory_nearly_full" => "GPU memory nearly full".into(),
        "unbalanced_gpus" => "uneven load".into(),
        "xid_errors" => "GPU hardware or driver faults".into(),
        "program_gpu_faults" => "GPU faults caused by the program".into(),
        "good" => "efficient".into(),
        "io_bound" => "waiting on I/O".into(),
        "node_memory_pressure" => "host memory short".into(),
        "node_power" => "power".into(),
        "power_readings_disagree" => "inconsistent power readings".into(),
        "micro_bursts" => "network micro-bursts".into(),
        "attribution_uncertain" => "which GPUs were the job's".into(),
        other => other.replace('_', " "),
    }
}

/// Where the traced GPU time went (eBPF or nsys summaries), the bottleneck and the top kernels and
/// collectives.
#[component]
fn TimeShares(traces: wire::JobTraces) -> impl IntoView {
    let total = &traces.total;
    let pct = |share: f64| format!("{:.0} %", share * 100.0);
    let summary = format!(
        "{:.1} GPU-hours traced: compute {}, NCCL {}, memory copies {}, synchronisation {}, idle {}",
        total.traced_s / 3600.0,
        pct(total.compute_share),
        pct(total.communication_share),
        pct(total.memcpy_share),
        pct(total.sync_share),
        pct(total.idle_share)
    );
    let verdict = total.verdict.clone().map(|verdict| {
        let evidence = verdict.evidence.iter().map(|line| view! { <li>{line.clone()}</li> }).collect_view();
        view! {
            <p data-testid="bottleneck" data-kind=verdict.kind.as_str()><strong>{verdict.kind.as_str().replace('-', " ")}</strong></p>
            <ul>{evidence}</ul>
        }
    });
    let top = |entries: &[wire::TraceTop]| {
        entries
            .iter()
            .map(|entry| {
                let name: String = entry.name.chars().take(90).collect();
                view! {
                    <tr title=entry.name.clone()>
                        <td class="name">{name}</td>
                        <td>{entry.count}</td>
                        <td>{format!("{:.2} s", entry.total_ns as f64 / 1e9)}</td>
                        <td>{if entry.bytes > 0 { charts::human(entry.bytes as f64, "B") } else { String::new() }}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let kernels = top(&traces.top_kernels);
    let collectives = top(&traces.top_collectives);
    let bars = charts::time_shares(&traces);
    view! {
        <section class="time-shares-box" data-testid="time-shares">
            <h3>"Where the GPU time went (traces)"</h3>
            <p>{summary}</p>
            {verdict}
            {bars.map(|svg| view! { <figure class="chart-box"><div inner_html=svg></div></figure> })}
            <table class="compact">
                <thead><tr><th scope="col">"Top kernels"</th><th scope="col">"Calls"</th><th scope="col">"GPU time"</th><th scope="col">""</th></tr></thead>
                <tbody>{kernels}</tbody>
            </table>
            <table class="compact">
                <thead><tr><th scope="col">"Top collectives"</th><th scope="col">"Calls"</th><th scope="col">"Time"</th><th scope="col">"Bytes"</th></tr></thead>
                <tbody>{collectives}</tbody>
            </table>
        </section>
    }
}

/// The node beside its GPUs: mean and peak of each node signal, one row per node; a line saying so when
/// no node exporter is scraped for the job's nodes.
#[component]
fn NodeTable(nodes: Vec<wire::NodeNetworkReport>, metrics_ok: bool) -> impl IntoView {
    let keys = ["cpu_busy", "cpu_iowait", "io_pressure", "memory_used", "memory_pressure", "net_rx", "node_power"];
    let cell = |node: &wire::NodeNetworkReport, key: &str| {
        node.summary.iter().find(|s| s.metric == key).map_or_else(
            || "–".to_string(),
            |s| format!("{} / {}", charts::human(s.mean, &s.unit), charts::human(s.max, &s.unit)),
        )
    };
    let rows: Vec<_> = nodes
        .iter()
        .filter(|node| node.summary.iter().any(|s| keys.contains(&s.metric.as_str())))
        .map(|node| {
            let cells = keys.iter().map(|key| view! { <td>{cell(node, key)}</td> }).collect_view();
            view! { <tr data-testid="report-node" data-node=node.node.clone()><td>{node.node.clone()}</td>{cells}</tr> }
        })
        .collect();
    if rows.is_empty() {
        return metrics_ok
            .then(|| {
                view! {
                    <p class="muted" data-testid="report-nodes-missing">
                        "Nodes: no node_exporter or ipmi_exporter series for this job's nodes."
                    </p>
                }
            })
            .into_any();
    }
    view! {
            <section class="node-signals" data-testid="report-nodes">
                <h3>"Nodes (mean / peak)"</h3>
                <table class="compact">
                    <thead><tr>
                        <th scope="col">"Node"</th><th scope="col">"CPU busy"</th><th scope="col">"iowait"</th>
                        <th scope="col">"I/O pressure"</th><th scope="col">"Memory"</th><th scope="col">"Mem. pressure"</th>
                        <th scope="col">"Net in"</th><th scope="col">"Power"</th>
                    </tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </section>
    }
    .into_any()
}

/// The job's Lustre I/O in one line: where the figures come from, bytes and mean rates.
#[component]
fn IoLine(io: wire::IoReport) -> impl IntoView {
    let rate = |key: &str, unit: &str| {
        io.summary.iter().find(|s| s.metric == key).map(|s| format!("{} mean", charts::human(s.mean, unit)))
    };
    let mut parts = vec![
        format!("read {}", charts::human(io.read_bytes, "B")),
        format!("written {}", charts::human(io.write_bytes, "B")),
    ];
    parts.extend(rate("lustre_read", "B/s").map(|r| format!("reads {r}")));
    parts.extend(rate("lustre_read_ops", "ops/s"));
    let source = match io.source {
        wire::IoSource::Jobstats => "Lustre job statistics (this job alone)",
        wire::IoSource::Nodes => "Lustre clients of the job's nodes (with any other job on them)",
    };
    view! {
        <p data-testid="report-io" data-source=io.source.as_str()>{format!("File system: {} — {source}", parts.join(" · "))}</p>
    }
}

/// Micro-bursts per node: the agent's 100 ms peaks against what the scrape average shows.
#[component]
fn BurstTable(bursts: Vec<wire::NodeBursts>) -> impl IntoView {
    let rate = |value: Option<f64>| value.map_or_else(|| "unknown".to_string(), |v| charts::human(v, "B/s"));
    let threshold = bursts.first().map_or(0.0, |row| row.threshold_bytes_per_s);
    let rows = bursts
        .iter()
        .map(|row| {
            view! {
                <tr data-testid="burst-row" data-status=row.status.as_str() title=row.message.clone().unwrap_or_default()>
                    <td>{row.node.clone()}</td>
                    <td>{row.direction.as_str()}</td>
                    <td>{rate(row.scrape_mean_bytes_per_s)}</td>
                    <td>{rate(row.scrape_peak_bytes_per_s)}</td>
                    <td>{rate(row.burst_peak_bytes_per_s)}</td>
                    <td>{row.seconds_above.map_or_else(|| "unknown".to_string(), |s| format!("{s:.1} s"))}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="bursts" data-testid="bursts">
            <h3>"RDMA micro-bursts"</h3>
            <p class="muted">{format!(
                "100 ms peaks from the node agent next to the 15 s scrape view; threshold {}. \"unknown\" where a node exports counters only: a burst shorter than a scrape cannot be seen in them.",
                charts::human(threshold, "B/s")
            )}</p>
            <table class="compact">
                <thead><tr><th scope="col">"Node"</th><th scope="col">"Dir"</th><th scope="col">"Scrape mean"</th><th scope="col">"Scrape peak"</th><th scope="col">"100 ms peak"</th><th scope="col">"Time above"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </section>
    }
}

/// The report's charts, drawn by [`charts::for_report`].
#[component]
fn ReportCharts(charts: Vec<charts::Chart>) -> impl IntoView {
    let figures = charts
        .into_iter()
        .map(|chart| {
            view! {
                <figure class="chart-box" data-testid="report-chart" data-chart=chart.kind>
                    <figcaption>{chart.title}</figcaption>
                    <div inner_html=chart.svg></div>
                </figure>
            }
        })
        .collect_view();
    view! { <div class="charts" data-testid="report-charts">{figures}</div> }
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn bytes_read_like_sacct() {
        assert_eq!(bytes(Some(512)), "512");
        assert_eq!(bytes(Some(1536 * 1024 * 1024)), "1.5G");
        assert_eq!(bytes(None), "");
    }
}
