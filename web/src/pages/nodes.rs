//! `/nodes`: every node of the cluster now, rack by rack: its state as slurmdbd knows it (down and
//! drained with their reasons and since when), its health badge, its GPUs and how many jobs hold,
//! its rack, and the running jobs the viewer may see (other tenants' as a count); each node links to
//! its page. `state=` shows one class (down, drained, allocated, idle). Server-rendered in full, so it
//! reads without the wasm bundle.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::Loader;
use crate::app::Time;
use crate::nodelist::{NodeList, NodeRow, StateClass};
use crate::pages::LoadError;
use crate::pages::gantt_packed::thousands;
use crate::pages::node::health_badge;
use crate::query::{NodesQuery, encode, percent_encode};

/// Jobs named in a row before the rest are counted.
const JOBS_NAMED: usize = 4;

/// The node list page.
#[component]
pub fn NodesPage() -> impl IntoView {
    let query_map = use_query_map();
    let query = Memo::new(move |_| query_map.with(|map| NodesQuery::from_lookup(|name| map.get(name))));
    let loader = Loader::from_context();
    // The list is read once per cluster; the state filter only picks its rows.
    let list = Resource::new(
        move || query.get().cluster,
        move |cluster| loader.node_list(NodesQuery { cluster, state: None }),
    );
    #[cfg(feature = "ssr")]
    let response = use_context::<leptos_axum::ResponseOptions>();
    view! {
        <section class="page nodes-page">
            <h1>"Nodes"</h1>
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    let query = query.get();
                    #[cfg(feature = "ssr")]
                    let response = response.clone();
                    Suspend::new(async move {
                        match list.await {
                            Ok(list) => view! { <NodeTable list query /> }.into_any(),
                            Err(error) => {
                                #[cfg(feature = "ssr")]
                                crate::pages::answer_with_status(response, &error);
                                view! { <LoadError error /> }.into_any()
                            }
                        }
                    })
                }}
            </Transition>
        </section>
    }
}

/// `100 nodes · 612 of 800 GPUs held by jobs`, and a filter link per state class with its count.
#[component]
fn Summary(list: NodeList, query: NodesQuery) -> impl IntoView {
    let (gpus, held) = list.gpu_totals();
    let line = format!(
        "{} nodes · {} of {} GPUs held by jobs ({} per node: {})",
        thousands(list.rows.len()),
        thousands(held as usize),
        thousands(gpus as usize),
        if list.gpus_source == "topology" { "GPUs" } else { "most GPUs seen" },
        if list.gpus_source == "topology" { "the site's topology" } else { "inferred" },
    );
    let link = |state: Option<StateClass>, label: String| {
        let href = format!("/nodes?{}", NodesQuery { state, ..query.clone() }.to_query());
        let active = query.state == state;
        let class = format!("button{}", if active { " active" } else { "" });
        let test_id = format!("nodes-filter-{}", state.map_or("all", StateClass::as_str));
        view! { <a class=class href=href aria-current=active.then_some("true") data-testid=test_id>{label}</a> }
    };
    let filters = list
        .counts()
        .into_iter()
        .map(|(class, count)| link(Some(class), format!("{} {}", thousands(count), class.as_str())))
        .collect_view();
    view! {
        <div class="toolbar" role="toolbar" aria-label="node states">
            {link(None, "all".into())}
            {filters}
            <span class="status" data-testid="nodes-summary">{line}</span>
        </div>
    }
}

/// The table of the rows `query.state` picks.
#[component]
fn NodeTable(list: NodeList, query: NodesQuery) -> impl IntoView {
    let cluster = list.cluster.clone();
    let health_note = (!list.health_read).then(|| {
        view! { <p class="status" data-testid="nodes-health-unavailable">"Health badges unavailable: the metrics source did not answer."</p> }
    });
    let read_at = list.at;
    let rows = list
        .rows
        .iter()
        .filter(|row| query.state.is_none_or(|state| row.class == state))
        .map(|row| node_row(row, &cluster))
        .collect_view();
    view! {
        <Summary list=list.clone() query=query.clone() />
        {health_note}
        <p class="muted">"As of " <Time at=read_at /> ": states from slurmdbd's node events (down, drained) and running jobs."</p>
        <div class="table-wrap">
            <table class="compact nodes" data-testid="nodes-table">
                <thead>
                    <tr>
                        <th scope="col">"Node"</th>
                        <th scope="col">"State"</th>
                        <th scope="col">"GPUs held"</th>
                        <th scope="col">"Rack"</th>
                        <th scope="col">"Partitions"</th>
                        <th scope="col">"Jobs now"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

/// One node's row.
fn node_row(row: &NodeRow, cluster: &str) -> impl IntoView + use<> {
    let in_cluster = encode(&[("cluster", cluster.to_string())]);
    let href = format!("/nodes/{}?{in_cluster}", percent_encode(&row.node));
    let since = row.reason_since.map(|since| view! { " since " <Time at=since /> });
    let reason = row.reason.clone().map(|reason| view! { <div class="muted">{reason}{since}</div> });
    let named = row.jobs.iter().take(JOBS_NAMED).map(|job| {
        let job_href = format!("/jobs/{}?{in_cluster}", percent_encode(&job.job_id));
        view! { <li><a href=job_href>{job.job_id.clone()}</a>{format!(" {} · {} GPU{}", job.user, job.gpus, if job.gpus == 1 { "" } else { "s" })}</li> }
    });
    let more_visible = row.jobs.len().saturating_sub(JOBS_NAMED);
    let others = (row.running_jobs as usize).saturating_sub(row.jobs.len());
    let counted = [
        (more_visible > 0).then(|| format!("{more_visible} more")),
        (others > 0).then(|| format!("{others} other tenants' job{}", if others == 1 { "" } else { "s" })),
    ]
    .into_iter()
    .flatten()
    .map(|text| view! { <li class="muted">{text}</li> })
    .collect_view();
    view! {
        <tr data-testid="node-row" data-node=row.node.clone() data-state=row.class.as_str()>
            <td><a href=href>{row.node.clone()}</a>" "{health_badge(row.health.clone())}</td>
            <td><span class=format!("node-class {}", row.class.as_str())>{row.state.clone()}</span>{reason}</td>
            <td class="num">{format!("{} / {}", row.alloc_gpus, row.gpus)}</td>
            <td>{row.rack.clone()}</td>
            <td>{row.partitions.join(", ")}</td>
            <td><ul class="plain">{named.collect_view()}{counted}</ul></td>
        </tr>
    }
}
