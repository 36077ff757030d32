//! Node states on the Gantt: slurmdbd's node events (down, drained) of the window as spans behind each
//! node's row, so a node that was down or drained never looks idle, and the list of them under the chart.

use serde::{Deserialize, Serialize};
use slurmlens_wire as wire;

use super::{GanttData, Rect, RowLayout, Viewport};

/// How a node was unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// `DOWN`, or failed: nothing runs there.
    Down,
    /// Drained (or draining): running jobs finish, nothing new starts.
    Drain,
}

impl Unavailable {
    /// What a node event's state (`DOWN+NOT_RESPONDING`, `IDLE+DRAIN`) says, if it is a down or drain.
    pub fn of(state: &str) -> Option<Self> {
        let words: Vec<&str> = state.split('+').collect();
        if words.iter().any(|word| matches!(*word, "DOWN" | "FAIL" | "FAILING")) {
            Some(Self::Down)
        } else if words.contains(&"DRAIN") {
            Some(Self::Drain)
        } else {
            None
        }
    }

    /// The word the chart's list uses.
    pub fn label(self) -> &'static str {
        match self {
            Self::Down => "down",
            Self::Drain => "drained",
        }
    }

    /// The span's fill behind the row (translucent, so jobs still running on a draining node show).
    pub fn fill(self) -> &'static str {
        match self {
            Self::Down => "rgba(213,94,0,0.30)",
            Self::Drain => "rgba(230,159,0,0.28)",
        }
    }

    /// The span's hatching.
    pub fn hatch(self) -> &'static str {
        match self {
            Self::Down => "rgba(160,60,0,0.75)",
            Self::Drain => "rgba(150,100,0,0.6)",
        }
    }
}

/// One node's down or drain over part of the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStateSpan {
    /// Index into `racks.nodes`.
    pub node: u32,
    pub kind: Unavailable,
    /// As slurmdbd recorded it (`DOWN+NOT_RESPONDING`).
    pub state: String,
    pub reason: String,
    /// Epoch seconds.
    pub start: i64,
    /// Epoch seconds; 0 while it lasts.
    pub end: i64,
}

impl NodeStateSpan {
    /// When it ends on the chart: its end, or `now` while it lasts.
    pub fn end_at(&self, now: i64) -> i64 {
        if self.end > 0 { self.end } else { now.max(self.start) }
    }
}

/// The down and drain events of nodes the chart has rows for, oldest first.
pub fn node_state_spans(data: &GanttData, events: &[wire::NodeEvent]) -> Vec<NodeStateSpan> {
    let index: std::collections::HashMap<&str, u32> = data.racks.index().into_iter().collect();
    let mut spans: Vec<NodeStateSpan> = events
        .iter()
        .filter_map(|event| {
            let kind = Unavailable::of(&event.state)?;
            let node = *index.get(event.node.as_str())?;
            Some(NodeStateSpan {
                node,
                kind,
                state: event.state.clone(),
                reason: event.reason.clone(),
                start: event.start.timestamp(),
                end: event.end.map_or(0, |end| end.timestamp()),
            })
        })
        .collect();
    spans.sort_by_key(|span| (span.start, span.node));
    spans
}

/// Visits each span visible in `view` as (its index, its rectangle) on its node's row, the whole
/// row's height (GPU lanes and folded racks show their jobs; the node's row says its state).
pub fn state_rects(
    data: &GanttData,
    layout: &RowLayout,
    view: &Viewport,
    (row_top, row_bottom): (f64, f64),
    mut visit: impl FnMut(usize, Rect),
) {
    let (t0, t1) = (view.start as i64, view.end as i64 + 1);
    for (index, span) in data.node_states.iter().enumerate() {
        let end = span.end_at(data.now);
        if end < t0 || span.start > t1 {
            continue;
        }
        let Some(row) = layout.node_row.get(span.node as usize).copied().flatten() else { continue };
        let row = layout.rows[row as usize];
        if row.y + row.height < row_top || row.y > row_bottom {
            continue;
        }
        let x0 = view.x(span.start as f64).max(view.left);
        let x1 = view.x(end as f64).min(view.left + view.width);
        visit(index, (x0, row.y, (x1 - x0).max(2.0), row.height));
    }
}

/// The span of `node` that holds time `at`, if one does (the latest to start).
pub fn state_at(data: &GanttData, node: u32, at: i64) -> Option<&NodeStateSpan> {
    data.node_states.iter().rev().find(|span| span.node == node && span.start <= at && at < span.end_at(data.now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use slurmlens_slurm::topology::Topology;

    fn event(node: &str, state: &str, start: i64, end: Option<i64>) -> wire::NodeEvent {
        let time = |at: i64| chrono::Utc.timestamp_opt(at, 0).single().expect("a time");
        wire::NodeEvent {
            node: node.into(),
            state: state.into(),
            reason: "Xid 79".into(),
            reason_uid: None,
            start: time(start),
            end: end.map(time),
        }
    }

    #[test]
    fn downs_and_drains_become_spans_on_their_rows_and_the_rest_is_left_out() {
        let racks = Topology::default().resolve("c", &["gpu001".into(), "gpu002".into()], 8);
        let mut data = GanttData { racks, start: 0, end: 10_000, now: 9_000, ..GanttData::default() };
        let events = [
            event("gpu002", "DOWN+NOT_RESPONDING", 5_000, None),
            event("gpu001", "IDLE+DRAIN", 1_000, Some(2_000)),
            event("gpu001", "IDLE", 3_000, Some(4_000)),
            event("gpu999", "DOWN", 1_000, None),
        ];
        data.node_states = node_state_spans(&data, &events);
        let kinds: Vec<(u32, Unavailable)> = data.node_states.iter().map(|span| (span.node, span.kind)).collect();
        assert_eq!(
            kinds,
            [(0, Unavailable::Drain), (1, Unavailable::Down)],
            "a plain IDLE and an unknown node are not drawn"
        );
        assert_eq!(
            state_at(&data, 1, 8_999).map(|span| span.kind),
            Some(Unavailable::Down),
            "an open down lasts until now"
        );
        assert_eq!(state_at(&data, 0, 2_500), None, "the drain ended");
        let layout = crate::gantt::layout(&data.racks, &crate::gantt::Expansion::default(), crate::gantt::METRICS);
        let view = Viewport { start: 0.0, end: 10_000.0, left: 0.0, width: 1000.0 };
        let mut rects = Vec::new();
        state_rects(&data, &layout, &view, (0.0, f64::MAX), |index, rect| rects.push((index, rect)));
        assert_eq!(rects.len(), 2);
        let (_, (x, _, w, _)) = rects[1];
        assert_eq!((x, w), (500.0, 400.0), "gpu002 down from 5,000 s to now (9,000 s)");
    }
}
