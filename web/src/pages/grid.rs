//! `/grid`: racks → servers → GPUs at one moment, each GPU coloured by the job holding it (or its
//! user, account, partition, state) or by a metric's latest readings (saying how old they are); GPUs
//! of jobs the viewer may not see are a grey "busy" hatch, unnamed. A scrubber picks the moment (up to
//! now: a future one is refused with a message); hover or focus names the job; a click opens it.
//! Server-rendered in full, so it reads without the wasm bundle (the form carries the viewer's zone).

use leptos::ev;
use leptos::prelude::*;
use leptos_router::NavigateOptions;
use leptos_router::hooks::{use_navigate, use_query_map};
use slurmlens_wire as wire;

use crate::api::{Loader, now};
use crate::app::{Time, display_time};
use crate::clock::Zone;
use crate::grid::{
    BUSY_TITLE, GridMetric, GridSnapshot, HEALTHY, IDLE_BELOW, UNMONITORED, XID_APPLICATION, XID_HARDWARE, XID_UNCLEAR,
};
use crate::pages::LoadError;
use crate::palette::{BUSY, BUSY_SOLID, Categories, ColourBy, FREE};
use crate::query::{GRID_METRICS, GridQuery, encode, percent_encode};

/// How far back the scrubber reaches.
const SCRUB_DAYS: i64 = 30;

/// The grid page.
#[component]
pub fn GridPage() -> impl IntoView {
    let query_map = use_query_map();
    let query = Memo::new(move |_| query_map.with(|map| GridQuery::from_lookup(|name| map.get(name))));
    let loader = Loader::from_context();
    let snapshot = Resource::new(move || query.get(), move |query| loader.grid(query));
    let navigate = use_navigate();
    let initial = query.get_untracked();
    let page_now = now() / 60 * 60;
    let shown_at = initial.at.unwrap_or(page_now);
    let scrub = RwSignal::new(shown_at);
    let hovered: RwSignal<Option<String>> = RwSignal::new(None);
    // A hover names what was on a GPU at the moment shown: another moment starts without one.
    Effect::new(move |_| {
        query.track();
        scrub.track();
        hovered.set(None);
    });
    let zone = crate::clock::use_zone();
    #[cfg(feature = "ssr")]
    let response = use_context::<leptos_axum::ResponseOptions>();

    let go = {
        let navigate = navigate.clone();
        move |at: i64, colour: ColourBy| {
            let current = query.get_untracked();
            let next =
                GridQuery { cluster: current.cluster, at: Some(at), colour, metric: current.metric, bad_at: None };
            navigate(
                &format!("/grid?{}", next.to_query()),
                NavigateOptions { replace: true, scroll: false, ..NavigateOptions::default() },
            );
        }
    };
    let debounce = StoredValue::new(0u64);
    let on_scrub_input = {
        let go = go.clone();
        move |event: ev::Event| {
            let Ok(at) = event_target_value(&event).parse::<i64>() else {
                return;
            };
            scrub.set(at);
            let ticket = debounce.get_value() + 1;
            debounce.set_value(ticket);
            let go = go.clone();
            set_timeout(
                move || {
                    // The page may be gone by now: `try_*` answers None instead of panicking.
                    if debounce.try_get_value() == Some(ticket)
                        && let Some(query) = query.try_get_untracked()
                    {
                        go(at, query.colour);
                    }
                },
                std::time::Duration::from_millis(150),
            );
        }
    };
    let on_colour = {
        let go = go.clone();
        move |event: ev::Event| go(scrub.get_untracked(), ColourBy::parse(&event_target_value(&event)))
    };
    let on_metric = {
        let navigate = navigate.clone();
        move |event: ev::Event| {
            let value = event_target_value(&event);
            let current = query.get_untracked();
            let next = GridQuery {
                at: Some(scrub.get_untracked()),
                metric: (!value.is_empty()).then_some(value),
                bad_at: None,
                ..current
            };
            navigate(
                &format!("/grid?{}", next.to_query()),
                NavigateOptions { replace: true, scroll: false, ..NavigateOptions::default() },
            );
        }
    };
    let on_submit = {
        let go = go.clone();
        move |event: ev::SubmitEvent| {
            event.prevent_default();
            let Some(form) = event.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
            else {
                return;
            };
            let value = form
                .query_selector("input[name=at]")
                .ok()
                .flatten()
                .and_then(|element| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(element).ok())
                .map(|input| input.value())
                .unwrap_or_default();
            if let Some(at) = crate::query::parse_time(&value, zone) {
                scrub.set(at);
                go(at, query.get_untracked().colour);
            }
        }
    };
    let step = {
        let go = go.clone();
        move |seconds: i64| {
            let at = (scrub.get_untracked() + seconds).min(now());
            scrub.set(at);
            go(at, query.get_untracked().colour);
        }
    };
    let (step_back_hour, step_back_minute, step_minute, step_hour) =
        (step.clone(), step.clone(), step.clone(), step.clone());

    view! {
        <section class="page grid-page">
            <h1 class="visually-hidden">"GPUs by rack and server"</h1>
            <form class="filters scrubber" method="get" action="/grid" on:submit=on_submit data-testid="grid-form">
                {initial.cluster.clone().map(|cluster| view! { <input type="hidden" name="cluster" value=cluster /> })}
                <label class="wide">
                    "Moment "
                    <strong data-testid="grid-moment">{move || display_time(scrub.get())}</strong>
                    <input
                        type="range"
                        name="scrub"
                        data-testid="grid-scrubber"
                        aria-label="moment shown"
                        min=(page_now - SCRUB_DAYS * 86_400).to_string()
                        max=page_now.to_string()
                        step="60"
                        value=shown_at.to_string()
                        on:input=on_scrub_input
                    />
                </label>
                <span class="steps">
                    <button type="button" data-testid="grid-back-hour" on:click=move |_| step_back_hour(-3600)>"−1 h"</button>
                    <button type="button" data-testid="grid-back-minute" on:click=move |_| step_back_minute(-60)>"−1 min"</button>
                    <button type="button" data-testid="grid-forward-minute" on:click=move |_| step_minute(60)>"+1 min"</button>
                    <button type="button" data-testid="grid-forward-hour" on:click=move |_| step_hour(3600)>"+1 h"</button>
                </span>
                <label>
                    {format!("At ({})", zone.offset_name(shown_at))}
                    <input
                        type="datetime-local"
                        name="at"
                        data-testid="grid-at"
                        max=zone.form_value(page_now + 60)
                        value=zone.form_value(shown_at)
                        prop:value=move || zone.form_value(scrub.get())
                    />
                </label>
                <input type="hidden" name="tz" value=zone.name() />
                <label>
                    "Colour by"
                    <select name="colour" data-testid="grid-colour" on:change=on_colour>
                        {ColourBy::ALL
                            .into_iter()
                            .map(|choice| view! { <option value=choice.as_str() selected=choice == initial.colour>{choice.as_str()}</option> })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    "GPU metric"
                    <select name="metric" data-testid="grid-metric" on:change=on_metric>
                        <option value="" selected=initial.metric.is_none()>"— (colour by job)"</option>
                        {GRID_METRICS
                            .into_iter()
                            .map(|(key, label)| view! { <option value=key selected=initial.metric.as_deref() == Some(key)>{label}</option> })
                            .collect_view()}
                    </select>
                </label>
                <button type="submit" data-testid="grid-go">"Show"</button>
            </form>
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    #[cfg(feature = "ssr")]
                    let response = response.clone();
                    Suspend::new(async move {
                        match snapshot.await {
                            Ok(grid) => view! { <GridView grid colour=query.get_untracked().colour hovered /> }.into_any(),
                            Err(error) => {
                                #[cfg(feature = "ssr")]
                                crate::pages::answer_with_status(response, &error);
                                // Bad input changes nothing: the way back is the grid at now.
                                let asked = query.get_untracked();
                                let now_href = format!(
                                    "/grid?{}",
                                    GridQuery { at: None, bad_at: None, ..asked }.to_query()
                                );
                                let back = (error.status == 400)
                                    .then(|| view! { <p><a href=now_href data-testid="grid-now">"Show the grid now"</a></p> });
                                view! { <LoadError error />{back} }.into_any()
                            }
                        }
                    })
                }}
            </Transition>
        </section>
    }
}

/// One snapshot drawn as racks side by side, servers top to bottom, GPUs left to right.
#[component]
fn GridView(grid: GridSnapshot, colour: ColourBy, hovered: RwSignal<Option<String>>) -> impl IntoView {
    let zone = crate::clock::use_zone();
    let categories = grid.categories(colour);
    let (used, total) = grid.usage();
    // A metric that answered colours the GPU cells; otherwise they keep their jobs' colours.
    let metric = grid.metric.clone().filter(|metric| metric.status == wire::ValuesState::Ok);
    let cluster = grid.cluster.clone();
    let job_href =
        move |job_id: &str| format!("/jobs/{}?{}", percent_encode(job_id), encode(&[("cluster", cluster.clone())]));
    let racks = grid
        .racks
        .racks
        .iter()
        .map(|rack| {
            let nodes = rack
                .nodes
                .iter()
                .map(|&node| {
                    let place = &grid.racks.nodes[node as usize];
                    let cells = &grid.nodes[node as usize];
                    let node_jobs: Vec<String> = cells.jobs.iter().map(|&(job, _)| grid.jobs[job as usize].job_id.clone()).collect();
                    let node_title = node_title(&grid, node as usize, zone);
                    let gpu_cells = (0..cells.gpus.len())
                        .map(|gpu| {
                            let look = grid.look(node as usize, gpu, colour, &categories);
                            let reading = if look.reading.is_empty() { String::new() } else { format!(" · {}", look.reading) };
                            let busy = cells.busy.contains(&(gpu as u16));
                            match cells.gpus[gpu].filter(|_| !busy) {
                                Some(job) => {
                                    let job_id = grid.jobs[job as usize].job_id.clone();
                                    let title = format!("{} GPU {gpu}: {}{reading}", place.name, grid.describe(job, zone));
                                    let info = title.clone();
                                    let info_focus = title.clone();
                                    view! {
                                        <a
                                            class=look.class
                                            href=job_href(&job_id)
                                            data-testid="gpu-cell"
                                            data-node=place.name.clone()
                                            data-gpu=gpu.to_string()
                                            data-job=job_id
                                            style=format!("background:{}", look.background)
                                            title=title
                                            aria-label=info.clone()
                                            on:mouseenter=move |_| hovered.set(Some(info.clone()))
                                            on:focus=move |_| hovered.set(Some(info_focus.clone()))
                                        ></a>
                                    }
                                    .into_any()
                                }
                                None => {
                                    let title = if busy {
                                        format!("{} GPU {gpu}: {BUSY_TITLE}", place.name)
                                    } else {
                                        format!("{} GPU {gpu}: free (no job){reading}", place.name)
                                    };
                                    let info = title.clone();
                                    view! {
                                        <span
                                            class=look.class
                                            data-testid="gpu-cell"
                                            data-node=place.name.clone()
                                            data-gpu=gpu.to_string()
                                            data-job=""
                                            data-busy=busy.then_some("true")
                                            style=format!("background:{}", look.background)
                                            title=title
                                            on:mouseenter=move |_| hovered.set(Some(info.clone()))
                                        ></span>
                                    }
                                    .into_any()
                                }
                            }
                        })
                        .collect_view();
                    let overflow = (cells.overflow > 0).then(|| {
                        view! { <span class="overflow" title="GPUs held beyond the node's known count">{format!("+{}", cells.overflow)}</span> }
                    });
                    let gpu_count: u64 = cells.jobs.iter().map(|&(_, gpus)| gpus).sum::<u64>() + cells.busy.len() as u64;
                    let title_for_hover = node_title.clone();
                    view! {
                        <li class="node" data-testid="node-cell" data-node=place.name.clone() data-jobs=node_jobs.join(",")>
                            // The name stays dark on the rack's light panel (WCAG AA); its jobs' colours are a bar beneath.
                            <span class="server" title=node_title on:mouseenter=move |_| hovered.set(Some(title_for_hover.clone()))>
                                <a class="name" data-testid="node-label" href=crate::pages::node::node_href(&grid.cluster, &place.name)>{place.name.clone()}</a>
                                {crate::pages::node::health_badge(grid.health_of(&place.name).cloned())}
                                <span class="holders" style=format!("background:{}", holders_background(&grid, node as usize, colour, &categories))></span>
                            </span>
                            <span class="gpus">{gpu_cells}{overflow}</span>
                            <span class="count" title="GPUs held on this node">{format!("{gpu_count}/{}", place.gpus)}</span>
                        </li>
                    }
                })
                .collect_view();
            view! {
                <section class="rack" data-testid="rack" aria-label=format!("rack {}", rack.name)>
                    <h2>{rack.name.clone()}</h2>
                    <ol>{nodes}</ol>
                </section>
            }
        })
        .collect_view();
    let legend = match &metric {
        Some(metric) => metric_legend(metric).into_any(),
        None => category_legend(&grid, colour, &categories).into_any(),
    };
    let by = if colour == ColourBy::State { "state (how the jobs running then ended)" } else { colour.as_str() };
    let heading = metric.as_ref().map_or(by.to_string(), |metric| {
        GRID_METRICS
            .iter()
            .find(|(key, _)| *key == metric.key)
            .map_or(metric.key.clone(), |(_, label)| label.to_string())
    });
    let readings = metric.as_ref().map(|metric| {
        let age = metric.readings_at.map(|taken| (grid.at - taken).to_string()).unwrap_or_default();
        view! {
            <p class="status" data-testid="grid-readings" data-age-s=age>{metric.age(grid.at, grid.live, zone)}</p>
        }
    });
    view! {
        <p class="status" data-testid="grid-summary" data-at=grid.at.to_string()>
            {match grid.busy_count() {
                0 => format!("{used} of {total} GPUs held by {} jobs at ", grid.jobs.len()),
                busy => format!(
                    "{used} of {total} GPUs held: {} by {} jobs you may see, {busy} by other tenants' jobs (busy), at ",
                    used - busy,
                    grid.jobs.len()
                ),
            }}
            <Time at=grid.at />
            {format!(
                ". GPU counts per node: {}. {}",
                if grid.racks.gpus_source == "topology" { "topology file" } else { "inferred from allocations" },
                if grid.recorded_jobs == 0 {
                    "No GPU indices were recorded for these jobs (slurmdbd keeps counts only), so cells fill in job start order.".to_string()
                } else {
                    format!(
                        "{} of {} jobs sit at the GPU indices the Slurm plugin recorded; the others fill free cells in start order.",
                        grid.recorded_jobs,
                        grid.jobs.len()
                    )
                },
            )}
        </p>
        {readings}
        {grid.metric.as_ref().filter(|metric| metric.status != wire::ValuesState::Ok).map(|metric| view! {
            <p class="status warning" data-testid="grid-metric-status">
                {format!("{} unavailable: {}; GPUs are coloured by job.", metric.key, metric.message.clone().unwrap_or_default())}
            </p>
        })}
        <p class="info" data-testid="grid-info" aria-live="polite">
            {move || hovered.get().unwrap_or_else(|| "Hover or focus a GPU for its job.".into())}
        </p>
        <div class="grid-layout">
            <div class="racks">{racks}</div>
            <aside class="legend-box">
                <h2>{format!("Legend: {heading}")}</h2>
                <ul class="legend" data-testid="grid-legend">
                    {swatch(FREE, "free (no job)".into(), "free")}
                    {(grid.busy_count() > 0).then(|| view! {
                        <li data-testid="grid-busy-legend" title=BUSY_TITLE>
                            <span class="swatch" style=format!("background:{BUSY}")></span>
                            "busy (another tenant's job)"
                        </li>
                    })}
                    {legend}
                </ul>
            </aside>
        </div>
    }
}

/// A node's hover: every job on it (running then, and how it ended) and other tenants' GPUs, or free.
fn node_title(grid: &GridSnapshot, node: usize, zone: Zone) -> String {
    let place = &grid.racks.nodes[node];
    let cells = &grid.nodes[node];
    if cells.jobs.is_empty() && cells.busy.is_empty() {
        return format!("{}: free (no job)", place.name);
    }
    let mut held: Vec<String> =
        cells.jobs.iter().map(|&(job, gpus)| format!("{} ({})", grid.describe(job, zone), gpus_held(gpus))).collect();
    if !cells.busy.is_empty() {
        let busy = cells.busy.len() as u64;
        held.push(format!("{} {BUSY_TITLE}", gpus_held(busy)));
    }
    format!("{}: {}", place.name, held.join("; "))
}

/// The bar beneath a node's name: one stripe per job on it (and one for other tenants' GPUs).
fn holders_background(grid: &GridSnapshot, node: usize, colour: ColourBy, categories: &Categories) -> String {
    let cells = &grid.nodes[node];
    let mut holders: Vec<&'static str> =
        cells.jobs.iter().map(|&(job, _)| grid.colour(Some(job), colour, categories)).collect();
    if !cells.busy.is_empty() {
        holders.push(BUSY_SOLID);
    }
    match holders.as_slice() {
        [] => "transparent".to_string(),
        [only] => only.to_string(),
        several => {
            let share = 100.0 / several.len() as f64;
            let stops: Vec<String> = several
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{c} {:.1}% {:.1}%", share * i as f64, share * (i + 1) as f64))
                .collect();
            format!("linear-gradient(90deg, {})", stops.join(", "))
        }
    }
}

/// One legend line: a swatch and what it means; `kind` names it for tests (`data-kind`).
fn swatch(background: &str, text: String, kind: &'static str) -> impl IntoView + use<> {
    view! {
        <li data-kind=kind>
            <span class="swatch" style=format!("background:{background}")></span>
            {text}
        </li>
    }
}

/// The legend of a metric: what each kind of cell means, then the scale (or the XID codes present).
fn metric_legend(metric: &GridMetric) -> impl IntoView + use<> {
    let unmonitored = swatch(UNMONITORED, "not monitored (no reading)".into(), "unmonitored");
    if metric.key == "xid" {
        let codes = metric
            .xid_codes
            .iter()
            .map(|code| {
                let cells = metric.values.iter().flatten().filter(|value| value.is_some_and(|v| v.round() as u32 == code.code)).count();
                let kind = match code.strength {
                    wire::EvidenceStrength::Strong => "hardware or driver fault",
                    wire::EvidenceStrength::Application => "application fault",
                    _ => "hardware or application",
                };
                view! {
                    <li data-testid="grid-xid-code" data-code=code.code.to_string() data-strength=code.strength.as_str()>
                        {format!("XID {} on {cells} GPU{}: {} ({kind})", code.code, if cells == 1 { "" } else { "s" }, code.meaning)}
                    </li>
                }
            })
            .collect_view();
        return view! {
            {swatch(HEALTHY, "held, no XID".into(), "healthy")}
            {swatch(XID_HARDWARE, "XID: hardware or driver fault".into(), "xid-hardware")}
            {swatch(XID_APPLICATION, "XID: application fault".into(), "xid-application")}
            {swatch(XID_UNCLEAR, "XID: hardware or application".into(), "xid-unclear")}
            {unmonitored}
            {codes}
        }
        .into_any();
    }
    let steps = (0..10)
        .map(|step| {
            let value = metric.max * (step as f64 + 0.5) / 10.0;
            view! { <span class="swatch" style=format!("background:{}", crate::charts::viridis(value, metric.max).1)></span> }
        })
        .collect_view();
    let idle = (metric.key == "gpu_util").then(|| {
        swatch(crate::charts::viridis(0.0, metric.max).1, format!("held, idle (under {IDLE_BELOW:.0} %)"), "idle")
    });
    view! {
        <li data-testid="grid-metric-legend" data-kind="scale">
            {steps}" "{format!("held: 0 → {}", crate::charts::human(metric.max, &metric.unit))}
        </li>
        {idle}
        {unmonitored}
    }
    .into_any()
}

/// The legend without a metric: each job, or each user (account, …) with its GPUs.
fn category_legend(grid: &GridSnapshot, colour: ColourBy, categories: &Categories) -> impl IntoView + use<> {
    if colour == ColourBy::Job {
        return grid
            .jobs
            .iter()
            .enumerate()
            .map(|(index, job)| {
                let text = format!("{} {} · {}", job.job_id, job.user, gpus_held(job.alloc_gpus));
                swatch(grid.colour(Some(index as u32), colour, categories), text, "job")
            })
            .collect_view()
            .into_any();
    }
    categories
        .legend
        .iter()
        .map(|entry| swatch(&entry.colour, format!("{} ({})", entry.label, gpus_held(entry.count as u64)), "category"))
        .collect_view()
        .into_any()
}

/// "1 GPU", "8 GPUs", or "CPU only" for jobs that hold none.
fn gpus_held(gpus: u64) -> String {
    match gpus {
        0 => "CPU only".to_string(),
        1 => "1 GPU".to_string(),
        n => format!("{n} GPUs"),
    }
}
