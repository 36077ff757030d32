//! The Gantt's drawing: bars visible in a viewport (the canvas fills them), batched by colour, hit
//! testing, row labels, and the whole window as one SVG for pages shown without the wasm bundle.

use std::collections::BTreeMap;

use slurmlens_slurm::topology::Racks;

use super::layout::{Expansion, METRICS, Row, RowKind, RowLayout, Viewport, layout};
use super::{GanttData, GanttIndex, LABEL_WIDTH};
use crate::axis;
use crate::clock::Zone;
use crate::palette::ColourBy;

/// One rectangle to fill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub job: u32,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// Visits every bar visible in `view`, rows from `row_top` to `row_bottom` (y from the top of the rows).
#[expect(clippy::too_many_arguments, reason = "the renderer's whole state, passed flat to stay allocation-free")]
pub fn bars(
    data: &GanttData,
    index: &GanttIndex,
    layout: &RowLayout,
    expansion: &Expansion,
    view: &Viewport,
    now: i64,
    (row_top, row_bottom): (f64, f64),
    mut visit: impl FnMut(Bar),
) {
    let visible = |row: &Row| row.y + row.height >= row_top && row.y <= row_bottom;
    let (t0, t1) = (view.start as i64, view.end as i64 + 1);
    let mut place = |job: u32, row: &Row, inset: f64| {
        let gantt_job = &data.jobs[job as usize];
        let end = data.end_of(gantt_job, now);
        if end < t0 || gantt_job.start > t1 {
            return;
        }
        let x0 = view.x(gantt_job.start as f64).max(view.left - 1.0);
        let x1 = view.x(end as f64).min(view.left + view.width + 1.0);
        visit(Bar { job, x: x0, y: row.y + inset, w: (x1 - x0).max(1.0), h: (row.height - 2.0 * inset).max(1.0) });
    };
    for (node, jobs) in index.node_jobs.iter().enumerate() {
        let place_node = &data.racks.nodes[node];
        if let Some(row_index) = layout.node_row[node] {
            let row = layout.rows[row_index as usize];
            if visible(&row) {
                for &job in jobs {
                    if data.jobs[job as usize].start > t1 {
                        break;
                    }
                    place(job, &row, 1.0);
                }
            }
            if let Some(first) = layout.gpu_rows[node] {
                for &(job, mask) in &index.lanes[node] {
                    for lane in 0..place_node.gpus.clamp(1, 64) {
                        if mask & (1 << lane) != 0 {
                            let row = layout.rows[(first + lane) as usize];
                            if visible(&row) {
                                place(job, &row, 0.5);
                            }
                        }
                    }
                }
            }
        } else if expansion.collapsed_racks.contains(&place_node.rack) {
            let row = layout.rows[layout.rack_row[place_node.rack as usize] as usize];
            if !visible(&row) {
                continue;
            }
            for &job in jobs {
                let gantt_job = &data.jobs[job as usize];
                if gantt_job.start > t1 {
                    break;
                }
                // Draw a job once per folded rack: on its first node there.
                let first_here =
                    gantt_job.nodes.iter().find(|&&n| data.racks.nodes[n as usize].rack == place_node.rack);
                if first_here == Some(&(node as u32)) {
                    place(job, &row, 2.0);
                }
            }
        }
    }
}

/// Visits every packed bar visible in `view` as (its index, its rectangle): on its node's row, or on
/// its rack's row while the rack is folded. At least two pixels wide, so a run of jobs stays visible.
pub fn packed_bars(
    data: &GanttData,
    layout: &RowLayout,
    view: &Viewport,
    (row_top, row_bottom): (f64, f64),
    mut visit: impl FnMut(u32, Rect),
) {
    let (t0, t1) = (view.start as i64, view.end as i64 + 1);
    for (index, bar) in data.packed.iter().enumerate() {
        if bar.end < t0 || bar.start > t1 {
            continue;
        }
        let Some((row, inset)) = packed_row(data, layout, bar.node) else { continue };
        if row.y + row.height < row_top || row.y > row_bottom {
            continue;
        }
        let x0 = view.x(bar.start as f64).max(view.left - 1.0);
        let x1 = view.x(bar.end as f64).min(view.left + view.width + 1.0);
        visit(index as u32, (x0, row.y + inset, (x1 - x0).max(2.0), (row.height - 2.0 * inset).max(1.0)));
    }
}

/// The row a packed bar of `node` is drawn on, with its inset: the node's, or its folded rack's.
fn packed_row(data: &GanttData, layout: &RowLayout, node: u32) -> Option<(Row, f64)> {
    if let Some(row) = layout.node_row.get(node as usize).copied().flatten() {
        return Some((layout.rows[row as usize], 1.0));
    }
    let rack = data.racks.nodes.get(node as usize)?.rack;
    Some((layout.rows[*layout.rack_row.get(rack as usize)? as usize], 2.0))
}

/// The packed bar under (x, y), if any (they are drawn over the jobs of their row).
pub fn packed_at(data: &GanttData, layout: &RowLayout, view: &Viewport, (x, y): (f64, f64)) -> Option<u32> {
    if x < view.left {
        return None;
    }
    let row = layout.row_at(y)?;
    let mut found = None;
    packed_bars(
        data,
        layout,
        view,
        (layout.rows[row].y, layout.rows[row].y + layout.rows[row].height),
        |index, rect| {
            let (bar_x, bar_y, width, height) = rect;
            if x >= bar_x - 1.0 && x <= bar_x + width + 1.0 && y >= bar_y - 1.0 && y <= bar_y + height + 1.0 {
                found = Some(index);
            }
        },
    );
    found
}

/// Rectangles to fill, grouped by colour, with bars that touch on the same row merged into one: a
/// 30-day window's 80,000 bars become a few thousand rectangles.
#[derive(Debug, Default)]
pub struct Batches {
    pub by_colour: Vec<(&'static str, Vec<Rect>)>,
}

/// x, y, width, height.
pub type Rect = (f64, f64, f64, f64);

impl Batches {
    /// Adds `bar` in `colour`, extending the colour's last rectangle when it continues it.
    pub fn push(&mut self, colour: &'static str, bar: &Bar) {
        let slot = match self.by_colour.iter().position(|(known, _)| *known == colour) {
            Some(slot) => slot,
            None => {
                self.by_colour.push((colour, Vec::new()));
                self.by_colour.len() - 1
            }
        };
        let rects = &mut self.by_colour[slot].1;
        if let Some(last) = rects.last_mut()
            && last.1 == bar.y
            && last.3 == bar.h
            && bar.x <= last.0 + last.2 + 0.5
            && bar.x >= last.0
        {
            last.2 = last.2.max(bar.x + bar.w - last.0);
            return;
        }
        rects.push((bar.x, bar.y, bar.w, bar.h));
    }

    /// Rectangles in all colours.
    pub fn len(&self) -> usize {
        self.by_colour.iter().map(|(_, rects)| rects.len()).sum()
    }

    /// Whether nothing is to be drawn.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The job under (x, y), if any: the one drawn last there, or the nearest within 3 pixels.
pub fn job_at(
    data: &GanttData,
    index: &GanttIndex,
    layout: &RowLayout,
    view: &Viewport,
    now: i64,
    (x, y): (f64, f64),
) -> Option<u32> {
    // The label column hides what lies beneath it: it names rows, never a job.
    if x < view.left {
        return None;
    }
    let row = layout.rows[layout.row_at(y)?];
    let candidates: Vec<u32> = match row.kind {
        RowKind::Node(node) => index.node_jobs[node as usize].clone(),
        RowKind::Gpu { node, lane } => {
            index.lanes[node as usize].iter().filter(|(_, mask)| mask & (1 << lane) != 0).map(|&(j, _)| j).collect()
        }
        RowKind::Rack(rack) => {
            if layout.rack_row.get(rack as usize).is_none()
                || data.racks.racks[rack as usize].nodes.iter().any(|&n| layout.node_row[n as usize].is_some())
            {
                return None;
            }
            let mut jobs: Vec<u32> = data.racks.racks[rack as usize]
                .nodes
                .iter()
                .flat_map(|&n| index.node_jobs[n as usize].clone())
                .collect();
            jobs.sort_unstable();
            jobs.dedup();
            jobs
        }
    };
    let mut best: Option<(f64, u32)> = None;
    for job in candidates {
        let gantt_job = &data.jobs[job as usize];
        let x0 = view.x(gantt_job.start as f64);
        let x1 = view.x(data.end_of(gantt_job, now) as f64).max(x0 + 1.0);
        let distance = if x < x0 {
            x0 - x
        } else if x > x1 {
            x - x1
        } else {
            0.0
        };
        if distance <= 3.0 && best.is_none_or(|(d, _)| distance <= d) {
            best = Some((distance, job));
        }
    }
    best.map(|(_, job)| job)
}

/// Jobs of `row` in start order, for keyboard stepping through bars.
pub fn row_jobs(data: &GanttData, index: &GanttIndex, row: RowKind) -> Vec<u32> {
    match row {
        RowKind::Node(node) => index.node_jobs[node as usize].clone(),
        RowKind::Gpu { node, lane } => {
            index.lanes[node as usize].iter().filter(|(_, mask)| mask & (1 << lane) != 0).map(|&(j, _)| j).collect()
        }
        RowKind::Rack(rack) => {
            let mut jobs: Vec<u32> = data.racks.racks[rack as usize]
                .nodes
                .iter()
                .flat_map(|&n| index.node_jobs[n as usize].clone())
                .collect();
            jobs.sort_by_key(|&job| (data.jobs[job as usize].start, job));
            jobs.dedup();
            jobs
        }
    }
}

/// The label of a row.
pub fn row_label(racks: &Racks, row: RowKind) -> String {
    match row {
        RowKind::Rack(rack) => racks.racks[rack as usize].name.clone(),
        RowKind::Node(node) => racks.nodes[node as usize].name.clone(),
        RowKind::Gpu { lane, .. } => format!("gpu{lane}"),
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The whole loaded window as one SVG image (UTC axis), for pages shown without the wasm bundle:
/// one `<path>` per colour, so 20,000 jobs stay one small document.
pub fn svg(data: &GanttData, by: ColourBy, width: f64, zone: Zone) -> String {
    use std::fmt::Write as _;
    let axis_height = 22.0;
    let expansion = Expansion::default();
    let layout = layout(&data.racks, &expansion, METRICS);
    let index = GanttIndex::new(data, data.now);
    let view =
        Viewport { start: data.start as f64, end: data.end as f64, left: LABEL_WIDTH, width: width - LABEL_WIDTH };
    let categories = data.categories(by);
    let legend_height = 20.0;
    let height = axis_height + layout.height + legend_height + 4.0;
    let colours = data.colour_table(by, &categories);
    let mut batches = Batches::default();
    bars(data, &index, &layout, &expansion, &view, data.now, (0.0, layout.height), |bar| {
        batches.push(colours[bar.job as usize], &bar);
    });
    let mut paths: BTreeMap<&'static str, String> = BTreeMap::new();
    for (colour, rects) in &batches.by_colour {
        let path = paths.entry(colour).or_default();
        for &(x, y, w, h) in rects {
            let _ = write!(path, "M{x:.1} {:.1}h{w:.1}v{h:.1}h{:.1}z", y + axis_height, -w);
        }
    }
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         font-family=\"sans-serif\" font-size=\"9\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
    );
    for row in &layout.rows {
        let y = row.y + axis_height;
        match row.kind {
            RowKind::Rack(_) => {
                let _ = write!(
                    out,
                    "<rect x=\"0\" y=\"{y}\" width=\"{width}\" height=\"{}\" fill=\"#eef1f5\"/><text x=\"4\" y=\"{:.1}\" font-weight=\"bold\">{}</text>",
                    row.height,
                    y + row.height - 4.0,
                    xml_escape(&row_label(&data.racks, row.kind))
                );
            }
            _ => {
                let _ = write!(
                    out,
                    "<text x=\"8\" y=\"{:.1}\" font-size=\"8\">{}</text>",
                    y + row.height - 1.0,
                    xml_escape(&row_label(&data.racks, row.kind))
                );
            }
        }
    }
    // Down and drained nodes behind their jobs, hatched: a node that was unavailable never looks idle.
    let _ = write!(
        out,
        "<defs>{}</defs>",
        [super::Unavailable::Down, super::Unavailable::Drain]
            .map(|kind| format!(
                "<pattern id=\"state-{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"{}\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"{}\" stroke-width=\"1.5\"/></pattern>",
                kind.label(),
                kind.fill(),
                kind.hatch()
            ))
            .join("")
    );
    super::state_rects(data, &layout, &view, (0.0, layout.height), |index, (x, y, w, h)| {
        let span = &data.node_states[index];
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"url(#state-{})\"><title>{}</title></rect>",
            y + axis_height,
            span.kind.label(),
            xml_escape(&format!("{} {}: {}", span.state, span.kind.label(), span.reason))
        );
    });
    for (colour, path) in &paths {
        let _ = write!(out, "<path fill=\"{colour}\" d=\"{path}\"/>");
    }
    // Packed bars over the jobs, outlined: runs of jobs too short to draw one by one.
    let mut packed: BTreeMap<&'static str, String> = BTreeMap::new();
    packed_bars(data, &layout, &view, (0.0, layout.height), |index, (x, y, w, h)| {
        let colour = data.packed_colour(&data.packed[index as usize], by, &categories);
        let _ = write!(packed.entry(colour).or_default(), "M{x:.1} {:.1}h{w:.1}v{h:.1}h{:.1}z", y + axis_height, -w);
    });
    for (colour, path) in &packed {
        let _ = write!(out, "<path fill=\"{colour}\" stroke=\"#1B2733\" stroke-width=\"0.6\" d=\"{path}\"/>");
    }
    let offset = i64::from(zone.offset_minutes(data.start)) * 60;
    for tick in axis::ticks_in_zone(data.start, data.end, view.width, 90.0, offset) {
        let x = view.left + tick.x;
        let step = axis::step_for(data.start, data.end, view.width, 90.0);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{axis_height}\" y2=\"{:.1}\" stroke=\"#0002\"/><text x=\"{:.1}\" y=\"14\">{}</text>",
            axis_height + layout.height,
            x + 2.0,
            xml_escape(&zone.axis_label(tick.at, step))
        );
    }
    let _ =
        write!(out, "<text x=\"4\" y=\"14\" font-weight=\"bold\">{}</text>", xml_escape(&zone.offset_name(data.start)));
    let now_x = view.x(data.now as f64);
    if now_x >= view.left && now_x <= view.left + view.width {
        let _ = write!(
            out,
            "<line x1=\"{now_x:.1}\" x2=\"{now_x:.1}\" y1=\"{axis_height}\" y2=\"{:.1}\" stroke=\"#D55E00\" stroke-width=\"1.5\"/>",
            axis_height + layout.height
        );
    }
    let mut x = 4.0;
    let legend_y = axis_height + layout.height + 14.0;
    for entry in &categories.legend {
        let _ = write!(
            out,
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{legend_y:.1}\">{} ({})</text>",
            legend_y - 9.0,
            entry.colour,
            x + 13.0,
            xml_escape(&entry.label),
            entry.count
        );
        x += 20.0 + 6.0 * (entry.label.len() as f64 + entry.count.to_string().len() as f64 + 3.0);
    }
    out.push_str("</svg>");
    out
}
