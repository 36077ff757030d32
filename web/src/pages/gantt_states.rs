//! Under the Gantt: the nodes that were down or drained in the loaded window, each with its state,
//! reason and times, linking to its node page (the chart hatches the same spans behind their rows);
//! and the static chart shown where the wasm bundle is not.

use leptos::prelude::*;

use crate::clock::Zone;
use crate::gantt::{GanttData, NodeStateSpan, Unavailable};
use crate::query::percent_encode;

/// A down or drain as the list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedState {
    pub node: String,
    pub cluster: String,
    pub span: NodeStateSpan,
}

/// The loaded window's downs and drains, oldest first.
pub fn listed_states(data: &GanttData) -> Vec<ListedState> {
    data.node_states
        .iter()
        .filter_map(|span| {
            let node = data.racks.nodes.get(span.node as usize)?.name.clone();
            Some(ListedState { node, cluster: data.cluster.clone(), span: span.clone() })
        })
        .collect()
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

    #[test]
    fn a_down_says_since_when_and_why_and_a_drain_its_span() {
        let span = |end| NodeStateSpan {
            node: 0,
            kind: Unavailable::Down,
            state: "DOWN+NOT_RESPONDING".into(),
            reason: "Xid 79".into(),
            start: 1_796_040_000,
            end,
        };
        let listed = |end| ListedState { node: "gpu006".into(), cluster: "sakura".into(), span: span(end) };
        assert_eq!(state_line(&listed(0), Zone::UTC), "down (DOWN+NOT_RESPONDING) since 2026-11-30 12:00: Xid 79");
        assert_eq!(
            state_line(&listed(1_796_043_600), Zone::UTC),
            "down (DOWN+NOT_RESPONDING) 2026-11-30 12:00 – 2026-11-30 13:00: Xid 79"
        );
    }

    #[test]
    fn the_fallback_escapes_its_url() {
        let html = fallback_image("/web/v1/gantt.svg?a=1&b=\"x\"", None);
        assert!(html.contains("a=1&amp;b=&quot;x&quot;"));
        assert!(html.contains("<noscript>"));
    }
}
