//! Draws the Gantt on `<canvas>` elements: bars batched by colour (one path and one fill per colour,
//! so 20,000 jobs cost a few thousand cheap calls, not 20,000 fills), labels, the time axis in the
//! viewer's zone and the "now" line. Runs only in the browser.

use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use crate::axis;
use crate::clock::Zone;
use crate::gantt::{
    Batches, Expansion, GanttData, GanttIndex, LABEL_WIDTH, Rect, RowKind, RowLayout, Unavailable, Viewport, bars,
    packed_bars, row_label, state_at, state_rects,
};
use crate::palette::OTHER;

/// Everything one frame shows.
pub struct Frame<'a> {
    pub data: &'a GanttData,
    pub index: &'a GanttIndex,
    pub layout: &'a RowLayout,
    pub expansion: &'a Expansion,
    pub view: Viewport,
    pub now: i64,
    /// Each job's colour ([`GanttData::colour_table`]).
    pub colours: &'a [&'static str],
    /// Each packed bar's colour ([`GanttData::packed_colour`]).
    pub packed_colours: &'a [&'static str],
    /// The keyboard-selected row and job.
    pub selected_row: Option<usize>,
    pub selected_job: Option<u32>,
    /// Visible vertical range of the rows (page scroll), to skip rows off screen.
    pub visible: (f64, f64),
    /// The viewer's zone: gridlines fall on its hours and midnights.
    pub zone: Zone,
}

const NOW_COLOUR: &str = "#D55E00";
/// The outline of packed bars.
const PACKED_OUTLINE: &str = "#1B2733";
/// The narrowest outline of the selected job, CSS pixels.
const SELECTED_MIN_WIDTH: f64 = 7.0;

/// Sizes `canvas` to `width`×`height` CSS pixels at the screen's pixel ratio and returns its context,
/// scaled so drawing uses CSS pixels.
pub fn prepare(canvas: &HtmlCanvasElement, width: f64, height: f64) -> Option<CanvasRenderingContext2d> {
    let ratio = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio()).max(1.0);
    let (pixel_width, pixel_height) = ((width * ratio).round() as u32, (height * ratio).round() as u32);
    if canvas.width() != pixel_width || canvas.height() != pixel_height {
        canvas.set_width(pixel_width);
        canvas.set_height(pixel_height);
        let style = canvas.style();
        let _ = style.set_property("width", &format!("{width}px"));
        let _ = style.set_property("height", &format!("{height}px"));
    }
    let context: CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let _ = context.set_transform(ratio, 0.0, 0.0, ratio, 0.0, 0.0);
    Some(context)
}

/// Draws the rows and bars.
pub fn draw_body(context: &CanvasRenderingContext2d, width: f64, frame: &Frame<'_>) {
    let layout = frame.layout;
    context.clear_rect(0.0, 0.0, width, layout.height);
    // Row backgrounds and labels.
    context.set_text_baseline("middle");
    for (row_index, row) in layout.rows.iter().enumerate() {
        if row.y + row.height < frame.visible.0 || row.y > frame.visible.1 {
            continue;
        }
        match row.kind {
            RowKind::Rack(rack) => {
                context.set_fill_style_str("#E8ECF2");
                context.fill_rect(0.0, row.y, width, row.height);
                context.set_fill_style_str("#1B2733");
                context.set_font("bold 11px system-ui, sans-serif");
                let folded = frame.expansion.collapsed_racks.contains(&rack);
                let marker = if folded { "▸" } else { "▾" };
                let nodes = frame.data.racks.racks[rack as usize].nodes.len();
                let _ = context.fill_text(
                    &format!("{marker} {} ({nodes})", row_label(&frame.data.racks, row.kind)),
                    4.0,
                    row.y + row.height / 2.0,
                );
            }
            RowKind::Node(node) => {
                if node % 2 == 1 {
                    context.set_fill_style_str("#F6F7F9");
                    context.fill_rect(0.0, row.y, width, row.height);
                }
                // The label says the state at the view's end (or now): `gpu006 down`.
                let at = (frame.view.end as i64).min(frame.now);
                let state = state_at(frame.data, node, at).map(|span| span.kind);
                context.set_fill_style_str(if state == Some(Unavailable::Down) { "#A03C00" } else { "#33404D" });
                context.set_font("8px system-ui, sans-serif");
                let expanded = frame.expansion.expanded_nodes.contains(&node);
                let marker = if expanded { "▾" } else { "▸" };
                let suffix = state.map(|kind| format!(" {}", kind.label())).unwrap_or_default();
                let _ = context.fill_text(
                    &format!("{marker} {}{suffix}", row_label(&frame.data.racks, row.kind)),
                    10.0,
                    row.y + row.height / 2.0 + 0.5,
                );
            }
            RowKind::Gpu { .. } => {
                context.set_fill_style_str("#FAFAF5");
                context.fill_rect(0.0, row.y, width, row.height);
                context.set_fill_style_str("#5A6570");
                context.set_font("7px system-ui, sans-serif");
                let _ = context.fill_text(&row_label(&frame.data.racks, row.kind), 30.0, row.y + row.height / 2.0);
            }
        }
        if Some(row_index) == frame.selected_row {
            context.set_stroke_style_str("#0072B2");
            context.set_line_width(1.5);
            context.stroke_rect(0.5, row.y + 0.5, width - 1.0, row.height - 1.0);
        }
    }
    // Bars, batched by colour.
    context.save();
    context.begin_path();
    context.rect(LABEL_WIDTH, 0.0, width - LABEL_WIDTH, layout.height);
    context.clip();
    draw_node_states(context, frame);
    let mut batches = Batches::default();
    bars(frame.data, frame.index, layout, frame.expansion, &frame.view, frame.now, frame.visible, |bar| {
        batches.push(frame.colours.get(bar.job as usize).copied().unwrap_or(OTHER), &bar);
    });
    for (colour, rects) in &batches.by_colour {
        context.set_fill_style_str(colour);
        context.begin_path();
        for &(x, y, w, h) in rects {
            context.rect(x, y, w, h);
        }
        context.fill();
    }
    // Packed bars over the jobs, outlined: a run of jobs too short to draw one by one reads apart
    // from one long job.
    let mut packed: Vec<(&'static str, Vec<Rect>)> = Vec::new();
    packed_bars(frame.data, layout, &frame.view, frame.visible, |index, rect| {
        let colour = frame.packed_colours.get(index as usize).copied().unwrap_or(OTHER);
        match packed.iter_mut().find(|(known, _)| *known == colour) {
            Some((_, rects)) => rects.push(rect),
            None => packed.push((colour, vec![rect])),
        }
    });
    context.set_stroke_style_str(PACKED_OUTLINE);
    context.set_line_width(1.0);
    for (colour, rects) in &packed {
        context.set_fill_style_str(colour);
        context.begin_path();
        for &(x, y, w, h) in rects {
            context.rect(x + 0.5, y + 0.5, w - 1.0, h - 1.0);
        }
        context.fill();
        context.stroke();
    }
    if let Some(job) = frame.selected_job {
        // However thin the bar at this zoom (a minute in a day is under a pixel), the outline is wide
        // enough to see; a white halo keeps it visible on dark bars.
        let mut outlines = Vec::new();
        bars(frame.data, frame.index, layout, frame.expansion, &frame.view, frame.now, frame.visible, |bar| {
            if bar.job == job {
                let width = bar.w.max(SELECTED_MIN_WIDTH);
                outlines.push((bar.x + bar.w / 2.0 - width / 2.0 - 1.0, bar.y - 1.0, width + 2.0, bar.h + 2.0));
            }
        });
        for (colour, line_width) in [("#FFF", 4.0), ("#000", 2.0)] {
            context.set_stroke_style_str(colour);
            context.set_line_width(line_width);
            for &(x, y, w, h) in &outlines {
                context.stroke_rect(x, y, w, h);
            }
        }
    }
    // Gridlines and the now line.
    context.set_stroke_style_str("rgba(0,0,0,0.12)");
    context.set_line_width(1.0);
    let offset = i64::from(frame.zone.offset_minutes(frame.view.start as i64)) * 60;
    context.begin_path();
    for tick in axis::ticks_in_zone(frame.view.start as i64, frame.view.end as i64, frame.view.width, 90.0, offset) {
        let x = (frame.view.x(tick.at as f64)).round() + 0.5;
        context.move_to(x, 0.0);
        context.line_to(x, layout.height);
    }
    context.stroke();
    let now_x = frame.view.x(frame.now as f64);
    if now_x >= LABEL_WIDTH && now_x <= width {
        context.set_stroke_style_str(NOW_COLOUR);
        context.set_line_width(1.5);
        context.begin_path();
        context.move_to(now_x, 0.0);
        context.line_to(now_x, layout.height);
        context.stroke();
    }
    context.restore();
}

/// Down and drained nodes' spans behind their rows' jobs: tinted and hatched, so a node that was
/// unavailable never looks idle.
fn draw_node_states(context: &CanvasRenderingContext2d, frame: &Frame<'_>) {
    let mut spans: Vec<(Unavailable, Rect)> = Vec::new();
    state_rects(frame.data, frame.layout, &frame.view, frame.visible, |index, rect| {
        spans.push((frame.data.node_states[index].kind, rect));
    });
    for kind in [Unavailable::Down, Unavailable::Drain] {
        let rects: Vec<Rect> = spans.iter().filter(|(of, _)| *of == kind).map(|(_, rect)| *rect).collect();
        if rects.is_empty() {
            continue;
        }
        context.set_fill_style_str(kind.fill());
        context.set_stroke_style_str(kind.hatch());
        context.set_line_width(1.0);
        for &(x, y, w, h) in &rects {
            context.fill_rect(x, y, w, h);
            context.save();
            context.begin_path();
            context.rect(x, y, w, h);
            context.clip();
            context.begin_path();
            let mut line = x - h;
            while line < x + w {
                context.move_to(line, y + h);
                context.line_to(line + h, y);
                line += 5.0;
            }
            context.stroke();
            context.restore();
        }
    }
}

/// Draws the time axis: ticks at the viewer's hours and midnights, labelled in the viewer's zone.
pub fn draw_axis(context: &CanvasRenderingContext2d, width: f64, height: f64, view: &Viewport, now: i64, zone: Zone) {
    context.clear_rect(0.0, 0.0, width, height);
    context.set_fill_style_str("#FFFFFF");
    context.fill_rect(0.0, 0.0, width, height);
    let start = view.start as i64;
    let offset = i64::from(zone.offset_minutes(start)) * 60;
    let step = axis::step_for(start, view.end as i64, view.width, 90.0);
    context.set_font("11px system-ui, sans-serif");
    context.set_text_baseline("middle");
    context.set_fill_style_str("#1B2733");
    let _ = context.fill_text(&zone.offset_name(start), 4.0, height / 2.0);
    context.set_stroke_style_str("#9AA5B1");
    context.begin_path();
    for tick in axis::ticks_in_zone(start, view.end as i64, view.width, 90.0, offset) {
        let x = view.x(tick.at as f64).round() + 0.5;
        context.move_to(x, height - 6.0);
        context.line_to(x, height);
        let _ = context.fill_text(&zone.axis_label(tick.at, step), x + 3.0, height / 2.0 - 2.0);
    }
    context.move_to(LABEL_WIDTH, height - 0.5);
    context.line_to(width, height - 0.5);
    context.stroke();
    let now_x = view.x(now as f64);
    if now_x >= LABEL_WIDTH && now_x <= width {
        context.set_fill_style_str(NOW_COLOUR);
        let _ = context.fill_text("now", now_x + 3.0, height - 7.0);
        context.fill_rect(now_x - 0.75, 0.0, 1.5, height);
    }
}
