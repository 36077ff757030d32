//! The report's charts, interactive in the browser: hovering one draws a crosshair at that moment on
//! every chart of the page and writes, under each, the moment (in the viewer's zone) and each line's
//! value there; dragging across one zooms every chart to that range (`?from=&to=`, drawn again by the
//! server, so the page stays a link). The charts stay plain SVG: the values are read back from the
//! drawn lines (a vertex's height on the chart's scale), so the page carries no second copy of the data.

use crate::charts::human;
use crate::clock::Zone;

/// A chart's time span and the plot's horizontal extent (SVG units), read from its crosshair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plot {
    pub start: i64,
    pub end: i64,
    pub left: f64,
    pub right: f64,
}

impl Plot {
    /// The moment at `x` (clamped to the plot).
    pub fn time_at(&self, x: f64) -> i64 {
        let share = ((x - self.left) / (self.right - self.left)).clamp(0.0, 1.0);
        self.start + (share * (self.end - self.start) as f64).round() as i64
    }

    /// Where `at` lies (clamped to the plot).
    pub fn x_at(&self, at: i64) -> f64 {
        let share = ((at - self.start) as f64 / (self.end - self.start).max(1) as f64).clamp(0.0, 1.0);
        self.left + share * (self.right - self.left)
    }

    /// Whether `x` falls on the plot (not its labels).
    pub fn contains(&self, x: f64) -> bool {
        (self.left..=self.right).contains(&x)
    }
}

/// The vertices of a path drawn as `M x y L x y …` (how the charts draw lines).
pub fn vertices(d: &str) -> Vec<(f64, f64)> {
    d.split(['M', 'L'])
        .filter_map(|pair| {
            let mut numbers = pair.split_whitespace().map(str::parse::<f64>);
            match (numbers.next(), numbers.next()) {
                (Some(Ok(x)), Some(Ok(y))) => Some((x, y)),
                _ => None,
            }
        })
        .collect()
}

/// The vertex nearest `x`, if it lies within `reach` of it (a line with a gap there has no value).
pub fn nearest(vertices: &[(f64, f64)], x: f64, reach: f64) -> Option<(f64, f64)> {
    vertices
        .iter()
        .copied()
        .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
        .filter(|v| (v.0 - x).abs() <= reach)
}

/// The value a vertex at height `y` stands for, on a scale from 0 at `bottom` to `max` at `top`.
pub fn value_at(y: f64, top: f64, bottom: f64, max: f64) -> f64 {
    if bottom <= top { 0.0 } else { (bottom - y) / (bottom - top) * max }
}

/// The line under a chart: `2026-11-30 13:05 · GPU 0: 45 % · GPU 1: 47 %`.
pub fn readout(zone: Zone, at: i64, values: &[(String, f64)], unit: &str) -> String {
    let mut parts = vec![zone.short(at)];
    parts.extend(values.iter().map(|(label, value)| format!("{label}: {}", human(*value, unit))));
    parts.join(" · ")
}

/// The browser side: reads the charts' SVG and moves their crosshairs, readouts and zoom band.
#[cfg(target_arch = "wasm32")]
pub mod browser {
    use wasm_bindgen::JsCast;
    use web_sys::{Element, MouseEvent};

    use super::{Plot, nearest, readout, value_at, vertices};
    use crate::charts::TOP;
    use crate::clock::Zone;

    fn number(element: &Element, name: &str) -> Option<f64> {
        element.get_attribute(name)?.parse().ok()
    }

    fn plot_of(svg: &Element) -> Option<(Plot, Element)> {
        let line = svg.query_selector("line.crosshair").ok()??;
        let plot = Plot {
            start: number(&line, "data-start")? as i64,
            end: number(&line, "data-end")? as i64,
            left: number(&line, "data-left")?,
            right: number(&line, "data-right")?,
        };
        Some((plot, line))
    }

    fn charts(container: &Element) -> Vec<Element> {
        let Ok(list) = container.query_selector_all("svg.chart") else { return Vec::new() };
        (0..list.length()).filter_map(|i| list.item(i)?.dyn_into::<Element>().ok()).collect()
    }

    /// The chart under the pointer and the pointer's x in its SVG units.
    fn pointer(event: &MouseEvent) -> Option<(Element, f64)> {
        let target: Element = event.target()?.dyn_into().ok()?;
        let svg = target.closest("svg.chart").ok()??;
        let rect = svg.get_bounding_client_rect();
        let width = svg.get_attribute("viewBox")?.split_whitespace().nth(2)?.parse::<f64>().ok()?;
        (rect.width() > 0.0).then(|| (svg, (f64::from(event.client_x()) - rect.left()) / rect.width() * width))
    }

    /// The moment under the pointer, where it is over a chart's plot.
    pub fn moment(event: &MouseEvent) -> Option<i64> {
        let (svg, x) = pointer(event)?;
        let (plot, _) = plot_of(&svg)?;
        plot.contains(x).then(|| plot.time_at(x))
    }

    /// Shows `at` on every chart in `container` (or hides the crosshairs where `None`).
    pub fn show(container: &Element, at: Option<i64>, zone: Zone) {
        for svg in charts(container) {
            let Some((plot, line)) = plot_of(&svg) else { continue };
            let readout_box =
                svg.closest("figure").ok().flatten().and_then(|f| f.query_selector(".readout").ok().flatten());
            let Some(at) = at.filter(|at| (plot.start..=plot.end).contains(at)) else {
                let _ = line.set_attribute("visibility", "hidden");
                if let Some(box_) = readout_box {
                    box_.set_text_content(Some(""));
                }
                continue;
            };
            let x = plot.x_at(at);
            let _ = line.set_attribute("x1", &format!("{x:.1}"));
            let _ = line.set_attribute("x2", &format!("{x:.1}"));
            let _ = line.set_attribute("visibility", "visible");
            let Some(box_) = readout_box else { continue };
            let text = if svg.class_list().contains("timeline") {
                let (max, bottom) =
                    (number(&svg, "data-max").unwrap_or(0.0), number(&svg, "data-bottom").unwrap_or(TOP));
                let unit = svg.get_attribute("data-unit").unwrap_or_default();
                // Half a point's width either side: a line with no point there has no value.
                let reach = (plot.right - plot.left) / 40.0;
                let mut values = Vec::new();
                if let Ok(paths) = svg.query_selector_all("path.line, path.mean") {
                    for i in 0..paths.length() {
                        let Some(path) = paths.item(i).and_then(|p| p.dyn_into::<Element>().ok()) else { continue };
                        let label = path.get_attribute("data-label").unwrap_or_else(|| "mean".to_string());
                        let drawn = vertices(&path.get_attribute("d").unwrap_or_default());
                        if let Some((_, y)) = nearest(&drawn, x, reach) {
                            values.push((label, value_at(y, TOP, bottom, max)));
                        }
                    }
                }
                readout(zone, at, &values, &unit)
            } else {
                zone.short(at)
            };
            box_.set_text_content(Some(&text));
        }
    }

    /// Draws the band a drag from `from` to `to` (moments) selects on the chart under `event`.
    pub fn band(event: &MouseEvent, from: i64, to: i64) {
        let Some((svg, _)) = pointer(event) else { return };
        let (Some((plot, _)), Ok(Some(rect))) = (plot_of(&svg), svg.query_selector("rect.selection")) else { return };
        let (a, b) = (plot.x_at(from.min(to)), plot.x_at(from.max(to)));
        let _ = rect.set_attribute("x", &format!("{a:.1}"));
        let _ = rect.set_attribute("width", &format!("{:.1}", b - a));
        let _ = rect.set_attribute("visibility", "visible");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_moments_and_values_back_from_the_drawing() {
        let plot = Plot { start: 1000, end: 2000, left: 110.0, right: 948.0 };
        assert_eq!(plot.time_at(110.0), 1000);
        assert_eq!(plot.time_at(948.0), 2000);
        assert_eq!(plot.time_at(529.0), 1500);
        assert_eq!(plot.time_at(0.0), 1000, "left of the plot is its start");
        assert!((plot.x_at(1500) - 529.0).abs() < 1e-9);
        assert!(plot.contains(500.0) && !plot.contains(50.0));
        let drawn = vertices("M110.0 128.0L529.0 68.0L948.0 8.0");
        assert_eq!(drawn, vec![(110.0, 128.0), (529.0, 68.0), (948.0, 8.0)]);
        assert_eq!(nearest(&drawn, 540.0, 20.0), Some((529.0, 68.0)));
        assert_eq!(nearest(&drawn, 320.0, 20.0), None, "no point near: no value");
        // A plot from 8 (top, 100 %) to 128 (bottom, 0 %).
        assert!((value_at(68.0, 8.0, 128.0, 100.0) - 50.0).abs() < 1e-9);
        assert!((value_at(8.0, 8.0, 128.0, 100.0) - 100.0).abs() < 1e-9);
        assert_eq!(
            readout(Zone::UTC, 1_796_040_000, &[("GPU 0".into(), 45.0), ("GPU 1".into(), 47.0)], "%"),
            "2026-11-30 12:00 · GPU 0: 45 % · GPU 1: 47 %"
        );
    }
}
