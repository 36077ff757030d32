//! The Gantt's packed bars on the page ([`crate::gantt::pack_short_jobs`]): their hover text, the zoom
//! a click on one makes (which loads that range in full detail), and the status line that says how
//! many jobs are drawn packed (its numbers grouped in thousands).

use leptos::prelude::*;

use crate::app::display_time;
use crate::clock::Zone;
use crate::gantt::{GanttData, MIN_SPAN, PackedBar, Viewport};

/// The hover box of packed bar `bar`, at (`x`, `y`) in the chart's body, on a page `total_width` wide.
pub fn packed_tooltip(data: &GanttData, bar: u32, (x, y): (f64, f64), total_width: f64, zone: Zone) -> Option<AnyView> {
    let packed = data.packed.get(bar as usize)?;
    let left = if x > total_width - 300.0 { (x - 290.0).max(0.0) } else { x + 14.0 };
    let title = data.packed_title(packed, zone);
    let details = data.packed_summary(packed);
    Some(
        view! {
            <div class="tooltip packed" data-testid="gantt-packed-tooltip" data-count=packed.count.to_string() style=format!("left:{left}px;top:{}px", y + super::gantt::AXIS_HEIGHT + 12.0) role="status">
                <strong>{title}</strong>
                <dl>
                    {details.into_iter().map(|(label, value)| view! { <dt>{label}</dt><dd>{value}</dd> }).collect_view()}
                </dl>
                <span class="hint">"click zooms in to its jobs"</span>
            </div>
        }
        .into_any(),
    )
}

/// The view a click on `bar` moves to: its range with as much again either side, at least an hour.
pub fn zoom_to_packed(view: Viewport, bar: &PackedBar) -> Viewport {
    let span = ((bar.end - bar.start) as f64 * 3.0).max(MIN_SPAN);
    let middle = (bar.start + bar.end) as f64 / 2.0;
    Viewport { start: middle - span / 2.0, end: middle + span / 2.0, ..view }
}

/// `20,000` ([`crate::numbers::count`]).
pub fn thousands(value: usize) -> String {
    crate::numbers::count(value as u64)
}

/// `12,345 jobs on 100 nodes, <from> – <to>` and what is packed or left out.
pub fn status_line(data: &GanttData, view: &Viewport) -> String {
    let note = if data.truncated {
        " (newest submissions only: zoom in or filter)".to_string()
    } else if data.packed_jobs > 0 {
        format!(
            " and {} jobs shorter than {} packed into {} outlined bars (zoom in to see them)",
            thousands(data.packed_jobs as usize),
            crate::timefmt::duration(data.min_duration),
            thousands(data.packed.len())
        )
    } else {
        String::new()
    };
    format!(
        "{} jobs on {} nodes, {} – {}{note}",
        thousands(data.jobs.len()),
        data.racks.nodes.len(),
        display_time(view.start as i64),
        display_time(view.end as i64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(20_000), "20,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_click_on_a_packed_bar_zooms_to_it_with_room_either_side() {
        let view = Viewport { start: 0.0, end: 30.0 * 86_400.0, left: 96.0, width: 1000.0 };
        let bar = PackedBar { node: 0, start: 100_000, end: 102_400, count: 5, gpus: 1, user: 0, account: 0 };
        let zoomed = zoom_to_packed(view, &bar);
        assert_eq!((zoomed.start, zoomed.end), (97_600.0, 104_800.0));
        let brief = PackedBar { end: 100_060, ..bar };
        let zoomed = zoom_to_packed(view, &brief);
        assert_eq!(zoomed.end - zoomed.start, MIN_SPAN, "never narrower than the narrowest view");
        assert_eq!(zoomed.width, view.width);
    }
}
