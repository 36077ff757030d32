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
use crate::pages::LoadError;
use crate::pages::job_output::OutputSection;
use crate::pages::job_script::ScriptSection;
use crate::pages::job_tags::TagsSection;
use crate::pages::previous::PreviousRunsSection;
use crate::pages::report::ReportSummary;
use crate::pages::share::ShareSection;
use crate::palette::state_colour;
use crate::query::{GanttQuery, GridQuery, encode, percent_encode};

/// The job page.
#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let zone = crate::clock::use_zone();
    // `from`/`to`: the range of the job's window the charts are zoomed to (a drag on a chart sets it).
    let key = Memo::new(move |_| {
        let zoom = query.with(|q| {
            let at = |name: &str| q.get(name).and_then(|text| text.parse::<i64>().ok());
            at("from").zip(at("to")).filter(|(from, to)| from < to)
        });
        (query.with(|q| q.get("cluster")), params.with(|p| p.get("id").unwrap_or_default()), zoom)
    });
    let loader = Loader::from_context();
    let job = Resource::new(
        move || key.get(),
        move |(cluster, id, zoom)| loader.job(cluster, id, crate::charts::ChartView { zone, zoom }),
    );
    #[cfg(feature = "ssr")]
    let response = use_context::<leptos_axum::ResponseOptions>();
    view! {
        <section class="page job-page">
            // A transition: zooming the charts (or any new query) keeps the page up while it reloads.
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    #[cfg(feature = "ssr")]
                    let response = response.clone();
                    Suspend::new(async move {
                        match job.await {
                            Ok(view) => view! { <JobDetailView view /> }.into_any(),
                            Err(error) => {
                                #[cfg(feature = "ssr")]
                                crate::pages::answer_with_status(response, &error);
                                view! { <h1>"Job"</h1><LoadError error /> }.into_any()
                            }
                        }
                    })
                }}
            </Transition>
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
    let JobView { detail, report, charts, logs, profile, script, output, tags, previous } = view;
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
        // `job=` has the Gantt outline the job, scroll to its nodes and show its details.
        format!("/?{}&{}", query.to_query(), encode(&[("job", job.job_id.clone())]))
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
    let node_count = detail.nodes.len();
    let nodes = detail
        .nodes
        .iter()
        .map(|node: &wire::NodeAllocation| {
            view! {
                <tr data-testid="job-node">
                    <td><a href=crate::pages::node::node_href(&cluster, &node.node) data-testid="job-node-link">{node.node.clone()}</a></td>
                    <td>{node.gpus.map(|g| g.to_string()).unwrap_or_else(|| "?".into())}</td>
                    <td>{match node.gpus_source {
                        wire::GpusSource::SingleNode => "AllocTRES (one node)",
                        wire::GpusSource::EvenSplit => "AllocTRES shared evenly by the nodes",
                        wire::GpusSource::Unknown => "AllocTRES does not split evenly: unknown",
                    }}</td>
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
                <a data-testid="job-json" href=api_href rel="alternate" type="application/json">"JSON"</a>
            </nav>
        </header>
        <TagsSection tags />
        <section class="facts" aria-label="accounting">
            <h2>"Accounting (as sacct shows it)"</h2>
            <dl data-testid="job-facts">
                {fact("Cluster", job.cluster.clone())}
                {fact("User", format!("{} ({})", job.user, job.uid))}
                {fact("Account", job.account.clone())}
                {fact("Partition", job.partition.clone())}
                {fact("QOS", job.qos.clone())}
                {fact("State", job.state.clone())}
                {fact("ExitCode", with_words(&job.exit_code, &job.state))}
                {fact("DerivedExitCode", with_words(&job.derived_exit_code, &job.state))}
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
            <details open=node_count <= 8>
                <summary><h2 class="inline">{format!("Nodes and GPUs ({node_count} node{})", if node_count == 1 { "" } else { "s" })}</h2></summary>
                <table class="compact" data-testid="job-nodes">
                    <thead><tr><th scope="col">"Node"</th><th scope="col">"GPUs"</th><th scope="col">"How the count is known"</th></tr></thead>
                    <tbody>{nodes}</tbody>
                </table>
            </details>
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
        <OutputSection output />
        <ShareSection job_id=job.job_id.clone() cluster=cluster.clone() />
        <ScriptSection script />
        <PreviousRunsSection previous />
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
                    {logs.limited_to_job.then(|| view! {
                        <p class="muted" data-testid="logs-limited">"Another job shared a node: there, only lines naming this job, its user or its cgroup are shown."</p>
                    })}
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

/// An exit code with what it means: "0:9 (killed by SIGKILL)". Slurm signals the tasks of a job it
/// ends for a failed node: that signal is Slurm's, and is said so.
fn with_words(code: &str, state: &str) -> String {
    if code != "0:0" && (state.starts_with("NODE_FAIL") || state.starts_with("BOOT_FAIL")) {
        return format!("{code} (Slurm ended the job)");
    }
    match slurmlens_slurm::signal::exit_code_in_words(code) {
        Some(words) => format!("{code} ({words})"),
        None => code.to_string(),
    }
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
