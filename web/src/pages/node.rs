//! `/nodes/<name>`: one node over a window (default the last 7 days) from `/api/v1/nodes/{name}`: its
//! state and health badge, its faults with the jobs then running and their verdicts, its drains and
//! downs, per GPU its XID, ECC, row-remap and clock-event counters, small temperature and power charts
//! (staff), and the ping-mesh paths of its rack. Linked from the grid, the Gantt and the job page.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use slurmlens_wire as wire;

use crate::api::Loader;
use crate::app::Time;
use crate::pages::LoadError;
use crate::query::{encode, percent_encode};

/// The node page's address.
pub fn node_href(cluster: &str, node: &str) -> String {
    format!("/nodes/{}?{}", percent_encode(node), encode(&[("cluster", cluster.to_string())]))
}

/// A node's health as a small badge (nothing when unknown).
pub fn health_badge(health: Option<wire::NodeHealth>) -> impl IntoView {
    health.map(|health| {
        let level = health.level.as_str();
        let title = if health.reasons.is_empty() { "healthy".to_string() } else { health.reasons.join("\n") };
        let symbol = match health.level {
            wire::HealthLevel::Ok => "●",
            wire::HealthLevel::Warn => "▲",
            wire::HealthLevel::Fault => "✖",
        };
        view! {
            <span
                class=format!("health health-{level}")
                data-testid="node-health"
                data-level=level
                title=title.clone()
                aria-label=format!("health {level}: {title}")
            >
                {symbol}
            </span>
        }
    })
}

/// The node page.
#[component]
pub fn NodePage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let key = Memo::new(move |_| {
        let at = |name: &str| query.with(|q| q.get(name).and_then(|text| text.parse::<i64>().ok()));
        (query.with(|q| q.get("cluster")), params.with(|p| p.get("name").unwrap_or_default()), at("start"), at("end"))
    });
    let loader = Loader::from_context();
    let page = Resource::new(
        move || key.get(),
        move |(cluster, name, start, end)| loader.node_page(cluster, name, (start, end)),
    );
    #[cfg(feature = "ssr")]
    let response = use_context::<leptos_axum::ResponseOptions>();
    view! {
        <section class="page node-page">
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    #[cfg(feature = "ssr")]
                    let response = response.clone();
                    Suspend::new(async move {
                        match page.await {
                            Ok(page) => view! { <NodeView page /> }.into_any(),
                            Err(error) => {
                                #[cfg(feature = "ssr")]
                                crate::pages::answer_with_status(response, &error);
                                view! { <h1>"Node"</h1><LoadError error /> }.into_any()
                            }
                        }
                    })
                }}
            </Transition>
        </section>
    }
}

fn or_dash(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_string(), |value| format!("{value:.digits$}"))
}

fn yes_no(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "yes",
        Some(false) => "no",
        None => "–",
    }
}

fn reasons(reasons: &[wire::ClockEventReason]) -> String {
    if reasons.is_empty() {
        return "–".into();
    }
    reasons.iter().map(|reason| clock_words(*reason)).collect::<Vec<_>>().join(", ")
}

/// As `domain::node_health::clock_event_words` says them (the page cannot import the server).
fn clock_words(reason: wire::ClockEventReason) -> &'static str {
    use wire::ClockEventReason as R;
    match reason {
        R::GpuIdle => "idle",
        R::ApplicationsClocksSetting => "application clocks setting",
        R::SwPowerCap => "software power cap",
        R::HwSlowdown => "hardware slowdown",
        R::SyncBoost => "sync boost",
        R::SwThermalSlowdown => "software thermal slowdown",
        R::HwThermalSlowdown => "hardware thermal slowdown",
        R::HwPowerBrakeSlowdown => "hardware power brake",
        R::DisplayClockSetting => "display clock setting",
    }
}

#[component]
fn NodeView(page: wire::NodePage) -> impl IntoView {
    let cluster = page.cluster.clone();
    let level = page.health.level.as_str();
    let window = (page.start.timestamp(), page.end.timestamp());
    let health_reasons = page.health.reasons.iter().map(|reason| view! { <li>{reason.clone()}</li> }).collect_view();
    let metrics_note = page.metrics_message.clone().map(|message| {
        view! { <p class="status" role="status" data-testid="node-metrics-status">{message}</p> }
    });
    let faults = page
        .faults
        .iter()
        .map(|fault| {
            let jobs = fault
                .jobs
                .iter()
                .map(|job| {
                    let href = format!("/jobs/{}?{}", job.job_id, encode(&[("cluster", cluster.clone())]));
                    let blame = job.blame.map_or("no verdict yet", |blame| blame.as_str());
                    view! {
                        <li data-testid="fault-job" data-job=job.job_id.to_string() data-blame=blame>
                            <a href=href>{job.job_id}</a>
                            {format!(" {} ({} / {}) {} — {blame}", job.job_name, job.user, job.account, job.state)}
                        </li>
                    }
                })
                .collect_view();
            let others = (fault.other_jobs > 0).then(|| {
                let n = fault.other_jobs;
                view! { <li class="others" data-testid="fault-others">{format!("{n} other tenants' job{}", if n == 1 { "" } else { "s" })}</li> }
            });
            let none = (fault.jobs.is_empty() && fault.other_jobs == 0).then(|| view! { <li class="muted">"no job running"</li> });
            view! {
                <tr data-testid="node-fault" data-source=fault.source.as_str() data-strength=fault.strength.as_str()>
                    <td><Time at=fault.at.timestamp() /></td>
                    <td>{fault.gpu.map_or_else(|| "node".to_string(), |gpu| format!("GPU {gpu}"))}</td>
                    <td>{fault.detail.clone()}</td>
                    <td>{fault.strength.as_str()}</td>
                    <td><ul class="plain">{jobs}{others}{none}</ul></td>
                </tr>
            }
        })
        .collect_view();
    let events = page
        .events
        .iter()
        .map(|event| {
            view! {
                <tr data-testid="node-event">
                    <td><Time at=event.start.timestamp() /></td>
                    <td>{event.end.map_or_else(|| view! { "open" }.into_any(), |end| view! { <Time at=end.timestamp() /> }.into_any())}</td>
                    <td>{event.state.clone()}</td>
                    <td>{event.reason.clone()}</td>
                    <td>{event.reason_uid.map(|uid| uid.to_string()).unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    let gpus = page
        .gpus
        .iter()
        .map(|gpu| {
            let xids = if gpu.xid_codes.is_empty() {
                "–".to_string()
            } else {
                gpu.xid_codes.iter().map(|x| format!("{} ({})", x.code, x.meaning)).collect::<Vec<_>>().join("; ")
            };
            view! {
                <tr data-testid="node-gpu" data-gpu=gpu.gpu.to_string()>
                    <td>{gpu.gpu}</td>
                    <td data-col="xid">{xids}</td>
                    <td>{format!("{} / {}", or_dash(gpu.ecc_sbe_volatile, 0), or_dash(gpu.ecc_dbe_volatile, 0))}</td>
                    <td data-col="ecc-aggregate">{format!("{} / {}", or_dash(gpu.ecc_sbe_aggregate, 0), or_dash(gpu.ecc_dbe_aggregate, 0))}</td>
                    <td>{format!("{} / {}", or_dash(gpu.remapped_rows_correctable, 0), or_dash(gpu.remapped_rows_uncorrectable, 0))}</td>
                    <td>{format!("{} / {}", yes_no(gpu.row_remap_pending), yes_no(gpu.row_remap_failure))}</td>
                    <td data-col="clocks">{reasons(&gpu.clock_event_reasons)}</td>
                    <td>{format!("{} / {}", or_dash(gpu.power_violation_s, 0), or_dash(gpu.thermal_violation_s, 0))}</td>
                    <td>{format!("{} / {}", or_dash(gpu.temperature_max, 0), or_dash(gpu.power_max, 0))}</td>
                </tr>
            }
        })
        .collect_view();
    let links = page
        .links
        .iter()
        .map(|link| {
            let loss = link.loss.map_or_else(|| "–".to_string(), |loss| format!("{:.2} %", loss * 100.0));
            let rtt = link.rtt_p99_ns.map_or_else(|| "–".to_string(), |rtt| format!("{:.1} µs", rtt / 1000.0));
            view! {
                <tr data-testid="node-link" class:bad=link.unhealthy>
                    <td>{format!("{} → {}", link.source_tor, link.target_tor)}</td>
                    <td>{loss}</td>
                    <td>{rtt}</td>
                    <td>{if link.unhealthy { "above thresholds" } else { "ok" }}</td>
                </tr>
            }
        })
        .collect_view();
    let charts = if page.timelines_hidden {
        view! { <p class="muted" data-testid="node-timelines-hidden">"Temperature and power show other tenants' work: staff only."</p> }.into_any()
    } else {
        view! {
            <div class="node-charts">
                {small_chart("Temperature (°C)", "temperature", &page.temperature, window)}
                {small_chart("Power (W)", "power", &page.power, window)}
            </div>
        }
        .into_any()
    };
    let reason = page.reason.clone().map(|reason| format!(" — {reason}")).unwrap_or_default();
    let since = page.reason_since.map(|since| view! { " since " <Time at=since.timestamp() /> });
    let gantt_href = format!(
        "/?{}",
        encode(&[("cluster", cluster.clone()), ("start", window.0.to_string()), ("end", window.1.to_string())])
    );
    let tor = page.tor.clone().unwrap_or_else(|| "unknown".into());
    view! {
        <h1 data-testid="node-title">
            {page.node.clone()} " " {health_badge(Some(page.health.clone()))}
        </h1>
        <p class="node-state" data-testid="node-state" data-level=level>
            <strong>{page.state.clone()}</strong>
            {reason}
            {since}
            {format!(" · {} running job{} · rack {tor} · cluster {cluster}", page.running_jobs, if page.running_jobs == 1 { "" } else { "s" })}
        </p>
        <p class="muted">"From " <Time at=window.0 /> " to " <Time at=window.1 /> " · " <a href=gantt_href>"Gantt of this window"</a></p>
        <section aria-label="health">
            <h2>{format!("Health in this window: {level}")}</h2>
            <ul data-testid="node-health-reasons">{health_reasons}</ul>
            {metrics_note}
        </section>
        <section aria-label="faults">
            <h2>{format!("Faults ({}{})", page.faults.len(), if page.faults_truncated { ", newest" } else { "" })}</h2>
            <div class="scroll">
                <table class="compact" data-testid="node-faults">
                    <thead><tr><th>"When"</th><th>"Where"</th><th>"What"</th><th>"Evidence"</th><th>"Jobs then (verdict)"</th></tr></thead>
                    <tbody>{faults}</tbody>
                </table>
            </div>
        </section>
        <section aria-label="GPUs">
            <h2>"GPUs"</h2>
            <div class="scroll">
                <table class="compact" data-testid="node-gpus">
                    <thead><tr>
                        <th>"GPU"</th><th>"XID"</th><th>"ECC SBE / DBE (volatile)"</th><th>"ECC SBE / DBE (aggregate)"</th>
                        <th>"Remapped rows corr. / uncorr."</th><th>"Remap pending / failed"</th><th>"Clock events"</th>
                        <th>"Power / thermal violation (s)"</th><th>"Max °C / W"</th>
                    </tr></thead>
                    <tbody>{gpus}</tbody>
                </table>
            </div>
            {charts}
        </section>
        <section aria-label="events">
            <h2>{format!("Drains and downs ({})", page.events.len())}</h2>
            <div class="scroll">
                <table class="compact" data-testid="node-events">
                    <thead><tr><th>"Start"</th><th>"End"</th><th>"State"</th><th>"Reason"</th><th>"By uid"</th></tr></thead>
                    <tbody>{events}</tbody>
                </table>
            </div>
        </section>
        <section aria-label="links">
            <h2>{format!("Ping-mesh paths of rack {tor}")}</h2>
            <div class="scroll">
                <table class="compact" data-testid="node-links">
                    <thead><tr><th>"Path"</th><th>"Loss"</th><th>"p99 RTT"</th><th>""</th></tr></thead>
                    <tbody>{links}</tbody>
                </table>
            </div>
        </section>
    }
}

/// Colours of a node's GPUs' lines (eight, then again).
const LINE_COLOURS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

/// A small SVG chart: one line per GPU over the window, its range written beside it.
fn small_chart(
    title: &'static str,
    key: &'static str,
    series: &[wire::NodeGpuSeries],
    (start, end): (i64, i64),
) -> AnyView {
    let values = series.iter().flat_map(|s| s.series.points.iter().map(|&(_, v)| v));
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| (low.min(v), high.max(v)));
    if !low.is_finite() || !high.is_finite() {
        return view! { <figure class="small-chart" data-testid=format!("node-chart-{key}")><figcaption>{title} ": no readings"</figcaption></figure> }.into_any();
    }
    let (width, height) = (600.0, 120.0);
    let span = (end - start).max(1) as f64;
    let range = (high - low).max(1.0);
    let lines = series
        .iter()
        .enumerate()
        .map(|(index, s)| {
            let points: Vec<String> = s
                .series
                .points
                .iter()
                .map(|&(at, v)| {
                    let x = (at - start) as f64 / span * width;
                    let y = height - (v - low) / range * (height - 4.0) - 2.0;
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            view! {
                <polyline fill="none" stroke=LINE_COLOURS[index % LINE_COLOURS.len()] stroke-width="1.2" points=points.join(" ")>
                    <title>{format!("GPU {}", s.gpu)}</title>
                </polyline>
            }
        })
        .collect_view();
    view! {
        <figure class="small-chart" data-testid=format!("node-chart-{key}")>
            <figcaption>{format!("{title}: {low:.0} – {high:.0}, {} GPUs", series.len())}</figcaption>
            <svg viewBox=format!("0 0 {width} {height}") preserveAspectRatio="none" role="img" aria-label=title>
                {lines}
            </svg>
        </figure>
    }
    .into_any()
}
