//! Under the Gantt: the nodes that were down or drained in the loaded window, each with its state,
//! reason and times, linking to its node page (the chart hatches the same spans behind their rows,
//! and names one on hover); the view kept in the URL; and the static chart shown where the wasm
//! bundle is not.

use std::time::Duration;

use leptos::prelude::*;

use crate::clock::Zone;
use crate::gantt::{GanttData, NodeStateSpan, RowLayout, Unavailable, Viewport, state_rects};
use crate::palette::ColourBy;
use crate::query::{GanttQuery, percent_encode};

/// Keeps the view in the URL (replaced, a moment after it settles), so a reload or a link shows it:
/// `span=` while it follows now, else `start` and `end` ([`GanttQuery::for_view`]).
pub fn keep_view_in_url(view_port: RwSignal<Viewport>, query: Memo<GanttQuery>, colour: RwSignal<ColourBy>) {
    let ticket = StoredValue::new(0u64);
    Effect::new(move |_| {
        let view = view_port.get();
        let mine = ticket.get_value() + 1;
        ticket.set_value(mine);
        set_timeout(
            move || {
                // A later view, or a page gone, writes nothing.
                let Some(current) = query.try_get_untracked().filter(|_| ticket.try_get_value() == Some(mine)) else {
                    return;
                };
                let next = GanttQuery { colour: colour.get_untracked(), ..current }
                    .for_view((view.start, view.end), crate::api::now());
                let url = format!("/?{}", next.to_query());
                if let Some(history) = web_sys::window().and_then(|window| window.history().ok()) {
                    let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url));
                }
            },
            Duration::from_millis(400),
        );
    });
}

/// The down or drain span under (x, y) (y from the top of the rows), if any.
pub fn state_under(data: &GanttData, layout: &RowLayout, view: &Viewport, (x, y): (f64, f64)) -> Option<usize> {
    let mut found = None;
    state_rects(data, layout, view, (y, y), |index, (left, top, width, height)| {
        if (left..=left + width).contains(&x) && (top..=top + height).contains(&y) {
            found = Some(index);
        }
    });
    found
}

/// The hover of a down or drain span: the node, its state, since when and why.
pub fn state_tooltip(
    data: &GanttData,
    span: usize,
    (x, y): (f64, f64),
    total_width: f64,
    zone: Zone,
) -> Option<AnyView> {
    let listed = listed_state(data, data.node_states.get(span)?)?;
    let left = if x > total_width - 300.0 { (x - 290.0).max(0.0) } else { x + 14.0 };
    let line = state_line(&listed, zone);
    Some(
        view! {
            <div class="tooltip" data-testid="gantt-state-tooltip" data-node=listed.node.clone() style=format!("left:{left}px;top:{}px", y + super::gantt::AXIS_HEIGHT + 12.0) role="status">
                <strong>{listed.node.clone()}</strong>
                <span class="when">{line}</span>
                <span class="hint">"its faults and drains are on the node's page"</span>
            </div>
        }
        .into_any(),
    )
}

/// A down or drain as the list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedState {
    pub node: String,
    pub cluster: String,
    pub span: NodeStateSpan,
}

/// The loaded window's downs and drains, oldest first.
pub fn listed_states(data: &GanttData) -> Vec<ListedState> {
    data.node_states.iter().filter_map(|span| listed_state(data, span)).collect()
}

/// One span as the list and the hover show it (`None` on a row the racks do not have).
fn listed_state(data: &GanttData, span: &NodeStateSpan) -> Option<ListedState> {
    let node = data.racks.nodes.get(span.node as usize)?.name.clone();
    Some(ListedState { node, cluster: data.cluster.clone(), span: span.clone() })
}

/// `gpu006 down (DOWN+NOT_RESPONDING) since 12-06 19:13: Xid 79 …`, times in `zone`.
pub fn state_line(listed: &ListedState, zone: Zone) -> String {
    let span = &listed.span;
    let when = if span.end > 0 {
        format!("{} – {}", zone.short(span.start), zone.short(span.end))
    } else {
        format!("since {}", zone.short(span.start))
    };
    let reason = if span.reason.is_empty() { String::new() } else { format!(": {}", span.reason) };
    format!("{} ({}) {when}{reason}", span.kind.label(), span.state)
}

/// The list of downs and drains (nothing when there were none).
#[component]
pub fn NodeStates(states: Vec<ListedState>, zone: Zone) -> impl IntoView {
    let downs = states.iter().filter(|listed| listed.span.kind == Unavailable::Down).count();
    let heading = format!(
        "Nodes unavailable in this window: {} down, {} drained (hatched on their rows)",
        downs,
        states.len() - downs
    );
    (!states.is_empty()).then(|| {
        let items = states
            .into_iter()
            .map(|listed| {
                let href =
                    format!("/nodes/{}?cluster={}", percent_encode(&listed.node), percent_encode(&listed.cluster));
                let class = format!("node-state {}", listed.span.kind.label());
                let line = state_line(&listed, zone);
                view! {
                    <li class=class data-testid="gantt-node-state" data-node=listed.node.clone()>
                        <a href=href>{listed.node.clone()}</a>" "{line}
                    </li>
                }
            })
            .collect_view();
        view! {
            <details class="node-states" data-testid="gantt-node-states">
                <summary>{heading}</summary>
                <ul>{items}</ul>
            </details>
        }
    })
}

/// The static chart for browsers without the wasm bundle: shown by `<noscript>`, or by a short script
/// when hydration has not happened within a few seconds (the bundle failed to load). The script carries
/// the page's CSP nonce (server-rendered; a nonce is URL-safe base64, nothing to escape).
pub fn fallback_image(url: &str, nonce: Option<String>) -> String {
    let url = url.replace('&', "&amp;").replace('"', "&quot;");
    let nonce = nonce.map(|nonce| format!(" nonce=\"{nonce}\"")).unwrap_or_default();
    format!(
        "<noscript><img src=\"{url}\" alt=\"Gantt chart of jobs on nodes\" class=\"gantt-static\"></noscript>\
         <img data-src=\"{url}\" alt=\"Gantt chart of jobs on nodes\" class=\"gantt-static\" data-testid=\"gantt-static\" hidden>\
         <script{nonce}>setTimeout(function(){{if(window.__slurmlensHydrated)return;var i=document.querySelector('img[data-testid=gantt-static]');\
         if(i){{i.src=i.dataset.src;i.hidden=false;}}}},2500)</script>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(end: i64) -> NodeStateSpan {
        NodeStateSpan {
            node: 0,
            kind: Unavailable::Down,
            state: "DOWN+NOT_RESPONDING".into(),
            reason: "Xid 79".into(),
            start: 1_796_040_000,
            end,
        }
    }

    #[test]
    fn a_down_says_since_when_and_why_and_a_drain_its_span() {
        let listed = |end| ListedState { node: "gpu006".into(), cluster: "sakura".into(), span: span(end) };
        assert_eq!(state_line(&listed(0), Zone::UTC), "down (DOWN+NOT_RESPONDING) since 2026-11-30 12:00: Xid 79");
        assert_eq!(
            state_line(&listed(1_796_043_600), Zone::UTC),
            "down (DOWN+NOT_RESPONDING) 2026-11-30 12:00 – 2026-11-30 13:00: Xid 79"
        );
    }

    #[test]
    fn the_pointer_finds_the_span_behind_a_row() {
        use slurmlens_slurm::topology::Topology;
        let racks = Topology::default().resolve("c", &["gpu001".into(), "gpu002".into()], 8);
        let mut data = GanttData { racks, start: 0, end: 10_000, now: 10_000, ..GanttData::default() };
        data.node_states = vec![NodeStateSpan { node: 1, start: 4_000, end: 6_000, ..span(0) }];
        let layout = crate::gantt::layout(&data.racks, &crate::gantt::Expansion::default(), crate::gantt::METRICS);
        let row = layout.rows[layout.node_row[1].expect("gpu002 has a row") as usize];
        let view = Viewport { start: 0.0, end: 10_000.0, left: 0.0, width: 1_000.0 };
        let middle = row.y + row.height / 2.0;
        assert_eq!(state_under(&data, &layout, &view, (500.0, middle)), Some(0));
        assert_eq!(state_under(&data, &layout, &view, (300.0, middle)), None, "before the down");
        let other = layout.rows[layout.node_row[0].expect("gpu001 has a row") as usize];
        assert_eq!(state_under(&data, &layout, &view, (500.0, other.y + other.height / 2.0)), None, "another row");
    }

    #[test]
    fn the_fallback_escapes_its_url() {
        let html = fallback_image("/web/v1/gantt.svg?a=1&b=\"x\"", None);
        assert!(html.contains("a=1&amp;b=&quot;x&quot;"));
        assert!(html.contains("<noscript>"));
    }
}
