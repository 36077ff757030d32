//! The Gantt's job in the link (`/?job=<id>`, the job page's "On the Gantt"): its details above the
//! chart, server-rendered, and the page scrolled to its row once the chart is drawn.

use leptos::prelude::*;
use slurmlens_wire as wire;

use crate::api::DataError;
use crate::app::Time;
use crate::query::{encode, percent_encode};

/// Scrolls the page so that `row_middle` (y within the chart's body) is in the middle of the screen,
/// once the body is shown and laid out (it appears with the first drawn frame); then marks the body
/// with the job it focused (`data-focused-job`).
pub fn scroll_to_row(body: web_sys::HtmlCanvasElement, row_middle: f64, job: usize, tries: u32) {
    request_animation_frame(move || {
        let Some(window) = web_sys::window() else {
            return;
        };
        if body.client_height() == 0 && tries > 0 {
            scroll_to_row(body, row_middle, job, tries - 1);
            return;
        }
        let top = body.get_bounding_client_rect().top() + window.scroll_y().unwrap_or(0.0);
        let screen = window.inner_height().ok().and_then(|h| h.as_f64()).unwrap_or(800.0);
        window.scroll_to_with_x_and_y(0.0, (top + row_middle - screen / 2.0).max(0.0));
        let _ = body.set_attribute("data-focused-job", &job.to_string());
    });
}

/// The job `job=` names, above the chart: what it is and when it ran (server-rendered), and once the
/// chart is drawn, where it is outlined (or why it is not on the chart).
#[component]
pub fn FocusPanel(answer: Result<wire::JobDetail, DataError>, note: RwSignal<Option<String>>) -> impl IntoView {
    let (job, node_names) = match answer {
        Ok(detail) => (detail.job, detail.nodes.into_iter().map(|node| node.node).collect::<Vec<String>>()),
        Err(error) => {
            return view! {
                <p class="gantt-focus error" data-testid="gantt-focus" role="status">
                    {format!("The job named in the link cannot be shown: {}", error.message)}
                </p>
            }
            .into_any();
        }
    };
    let href = format!("/jobs/{}?{}", percent_encode(&job.job_id), encode(&[("cluster", job.cluster.clone())]));
    let gpus = if job.alloc_gpus > 0 { format!(", {}", plural(job.alloc_gpus, "GPU")) } else { String::new() };
    let nodes = format!("{} on {}{gpus}", plural(u64::from(job.alloc_nodes), "node"), job.node_list);
    let ended =
        job.end.map(|end| view! { <Time at=end.timestamp() /> }.into_any()).unwrap_or_else(|| "running".into_any());
    let started = job.start.map(|start| view! { <Time at=start.timestamp() /> });
    view! {
        <section class="gantt-focus" data-testid="gantt-focus" data-job=job.job_id.clone() aria-label="the job in the link">
            <strong>{format!("Job {}", job.job_id)}</strong>
            " "
            <span>{format!("“{}” of {} ({}), {}, {}", job.job_name, job.user, job.account, job.state, nodes)}</span>
            " · "
            {started}
            " → "
            {ended}
            " · "
            <a href=href data-testid="gantt-focus-open">"Open the job"</a>
            {(!node_names.is_empty()).then(|| {
                let shown = node_names.len().min(8);
                let links = node_names[..shown]
                    .iter()
                    .map(|node| view! { " " <a href=crate::pages::node::node_href(&job.cluster, node) data-testid="gantt-focus-node">{node.clone()}</a> })
                    .collect_view();
                let more = (node_names.len() > shown).then(|| format!(" and {} more", node_names.len() - shown));
                view! { " · nodes:" {links} {more} }
            })}
            <span class="note" data-testid="gantt-focus-note" role="status">
                {move || note.get().unwrap_or_default()}
            </span>
        </section>
    }
    .into_any()
}

fn plural(count: u64, word: &str) -> String {
    if count == 1 { format!("1 {word}") } else { format!("{count} {word}s") }
}
