//! The Gantt's rows and viewport: which racks are folded and which nodes show GPU lanes, rows top to
//! bottom with their heights, and the time window on screen.

use std::collections::BTreeSet;

use slurmlens_slurm::topology::Racks;

use super::{MAX_SPAN, MIN_SPAN};

/// Which racks are folded and which nodes show their GPU lanes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expansion {
    pub collapsed_racks: BTreeSet<u32>,
    pub expanded_nodes: BTreeSet<u32>,
}

/// Row heights, CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowMetrics {
    pub rack: f64,
    pub node: f64,
    pub gpu: f64,
}

/// Heights that fit 100 nodes and their rack headers on a 1280×800 screen with one scroll.
pub const METRICS: RowMetrics = RowMetrics { rack: 16.0, node: 9.0, gpu: 7.0 };

/// What a row shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// A rack header; when folded, every job of its nodes is drawn on it.
    Rack(u32),
    Node(u32),
    Gpu {
        node: u32,
        lane: u32,
    },
}

/// One row at `y` (from the top of the rows), `height` tall.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub kind: RowKind,
    pub y: f64,
    pub height: f64,
}

/// Rows top to bottom, with lookups from nodes and racks to their rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowLayout {
    pub rows: Vec<Row>,
    pub height: f64,
    /// Per node: its row, or `None` inside a folded rack.
    pub node_row: Vec<Option<u32>>,
    /// Per node: its first GPU lane row when expanded.
    pub gpu_rows: Vec<Option<u32>>,
    pub rack_row: Vec<u32>,
}

/// Lays out the rows for `racks` under `expansion`.
pub fn layout(racks: &Racks, expansion: &Expansion, metrics: RowMetrics) -> RowLayout {
    let mut layout = RowLayout {
        node_row: vec![None; racks.nodes.len()],
        gpu_rows: vec![None; racks.nodes.len()],
        ..RowLayout::default()
    };
    let mut y = 0.0;
    let mut push = |layout: &mut RowLayout, kind: RowKind, height: f64| {
        layout.rows.push(Row { kind, y, height });
        y += height;
        (layout.rows.len() - 1) as u32
    };
    for (rack_index, rack) in racks.racks.iter().enumerate() {
        let rack_index = rack_index as u32;
        let row = push(&mut layout, RowKind::Rack(rack_index), metrics.rack);
        layout.rack_row.push(row);
        if expansion.collapsed_racks.contains(&rack_index) {
            continue;
        }
        for &node in &rack.nodes {
            layout.node_row[node as usize] = Some(push(&mut layout, RowKind::Node(node), metrics.node));
            if expansion.expanded_nodes.contains(&node) {
                let lanes = racks.nodes[node as usize].gpus.clamp(1, 64);
                layout.gpu_rows[node as usize] = Some(layout.rows.len() as u32);
                for lane in 0..lanes {
                    push(&mut layout, RowKind::Gpu { node, lane }, metrics.gpu);
                }
            }
        }
    }
    layout.height = y;
    layout
}

impl RowLayout {
    /// The row under `y`, if any.
    pub fn row_at(&self, y: f64) -> Option<usize> {
        if y < 0.0 || y >= self.height {
            return None;
        }
        let index = self.rows.partition_point(|row| row.y <= y);
        index.checked_sub(1)
    }
}

/// The time window on screen and where the plot sits, CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    pub start: f64,
    pub end: f64,
    /// x of the plot's left edge (right of the labels).
    pub left: f64,
    pub width: f64,
}

impl Viewport {
    /// The x of time `t`.
    pub fn x(&self, t: f64) -> f64 {
        self.left + (t - self.start) / (self.end - self.start).max(1.0) * self.width
    }

    /// The time at `x`.
    pub fn t(&self, x: f64) -> f64 {
        self.start + (x - self.left) / self.width.max(1.0) * (self.end - self.start)
    }

    /// Zooms by `factor` (< 1 zooms in) keeping the time under `anchor_x` in place; the span stays
    /// within an hour and thirty days.
    pub fn zoom(self, factor: f64, anchor_x: f64) -> Self {
        let span = self.end - self.start;
        let new_span = (span * factor).clamp(MIN_SPAN, MAX_SPAN);
        let anchor = self.t(anchor_x.clamp(self.left, self.left + self.width));
        let share = (anchor - self.start) / span.max(1.0);
        let start = anchor - share * new_span;
        Self { start, end: start + new_span, ..self }
    }

    /// Moves the window by `dx` pixels (positive: later).
    pub fn pan(self, dx: f64) -> Self {
        let shift = dx / self.width.max(1.0) * (self.end - self.start);
        Self { start: self.start + shift, end: self.end + shift, ..self }
    }

    /// A window of `span` seconds ending at `end`, same geometry.
    pub fn with_span(self, span: f64, end: f64) -> Self {
        let span = span.clamp(MIN_SPAN, MAX_SPAN);
        Self { start: end - span, end, ..self }
    }
}
