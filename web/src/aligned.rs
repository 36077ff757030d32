//! Charts of several jobs on one axis of time since each job's start (the compare page): one line per
//! job, the x axis in elapsed hours and minutes, so runs that started days apart lie on top of each
//! other. SVG text, drawn on the server like the report's charts and tested natively.

use std::fmt::Write;

use crate::charts::{human, nice_ceiling};
use crate::palette::CATEGORICAL;

/// Narrower than the report's charts (960): drawn at most 760 px wide, its text stays legible on a phone.
const WIDTH: f64 = 640.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 10.0;
const PLOT: f64 = 150.0;
const AXIS: f64 = 24.0;
const FONT: f64 = 18.0;

/// Tick spacings, in seconds, from which the axis takes the smallest that fits.
const STEPS: [i64; 14] = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400, 172_800, 604_800];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Seconds since a start as the axis writes them: `0`, `45m`, `2h`, `1h 30m`, `3d`.
pub fn elapsed_label(seconds: i64) -> String {
    let (days, hours, minutes) = (seconds / 86_400, seconds % 86_400 / 3600, seconds % 3600 / 60);
    match (days, hours, minutes) {
        (0, 0, 0) => "0".to_string(),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h {m}m"),
        (d, 0, _) => format!("{d}d"),
        (d, h, _) => format!("{d}d {h}h"),
    }
}

/// The tick spacing for an axis of `span` seconds: at most 6 ticks after the first.
pub fn tick_step(span: i64) -> i64 {
    STEPS.into_iter().find(|step| span / step <= 6).unwrap_or(STEPS[STEPS.len() - 1])
}

/// One metric of several jobs, each a line of `[seconds since its start, value]`; `None` without points.
pub fn aligned_chart(title: &str, unit: &str, series: &[(String, &[(i64, f64)])]) -> Option<String> {
    let all = || series.iter().flat_map(|(_, points)| points.iter());
    let end = all().map(|&(at, _)| at).max()?.max(60);
    let max = if unit == "%" { 100.0 } else { nice_ceiling(all().map(|&(_, value)| value).fold(0.0, f64::max)) };
    let x = |at: i64| LEFT + (at.max(0) as f64 / end as f64).min(1.0) * (WIDTH - LEFT - RIGHT);
    let bottom = TOP + PLOT;
    let y = |value: f64| bottom - (value / max).clamp(0.0, 1.0) * PLOT;
    let legend_rows = series.len().div_ceil(3);
    let height = bottom + AXIS + 8.0 + 22.0 * legend_rows as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg class="chart aligned" data-metric="{}" data-series="{}" data-end="{end}" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="{} since each job's start" xmlns="http://www.w3.org/2000/svg">"##,
        escape(title),
        series.len(),
        escape(title),
    );
    for fraction in [0.0, 0.5, 1.0] {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="{FONT}" text-anchor="end" fill="#555">{}</text>"##,
            WIDTH - RIGHT,
            y(max * fraction),
            y(max * fraction),
            LEFT - 4.0,
            y(max * fraction) + 6.0,
            escape(&human(max * fraction, unit)),
        );
    }
    let step = tick_step(end);
    let _ = write!(out, r##"<g class="axis" font-size="{FONT}" fill="#555">"##);
    for tick in (0..=end).step_by(usize::try_from(step).unwrap_or(3600)) {
        let _ = write!(
            out,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{TOP}" y2="{bottom:.1}" stroke="#eee"/><text x="{0:.1}" y="{1:.1}" text-anchor="middle">{2}</text>"##,
            x(tick),
            bottom + 20.0,
            elapsed_label(tick),
        );
    }
    out.push_str("</g>");
    for (index, (label, points)) in series.iter().enumerate() {
        let colour = CATEGORICAL[index % CATEGORICAL.len()];
        let mut d = String::new();
        for (position, &(at, value)) in points.iter().filter(|(at, _)| *at >= 0).enumerate() {
            let _ = write!(d, "{}{:.1} {:.1}", if position == 0 { "M" } else { "L" }, x(at), y(value));
        }
        let _ = write!(
            out,
            r#"<path class="line" data-label="{0}" d="{d}" fill="none" stroke="{colour}" stroke-width="2"><title>{0}</title></path>"#,
            escape(label),
        );
        let (column, row) = (index % 3, index / 3);
        let (legend_x, legend_y) = (LEFT + column as f64 * 180.0, bottom + AXIS + 8.0 + row as f64 * 22.0);
        let _ = write!(
            out,
            r##"<rect x="{legend_x:.1}" y="{legend_y:.1}" width="14" height="14" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="{FONT}" fill="#333">{}</text>"##,
            legend_x + 19.0,
            legend_y + 13.0,
            escape(label),
        );
    }
    out.push_str("</svg>");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_labels_read_as_durations() {
        assert_eq!(elapsed_label(0), "0");
        assert_eq!(elapsed_label(2700), "45m");
        assert_eq!(elapsed_label(7200), "2h");
        assert_eq!(elapsed_label(5400), "1h 30m");
        assert_eq!(elapsed_label(3 * 86_400), "3d");
    }

    #[test]
    fn ticks_are_at_most_seven() {
        for span in [60, 600, 3600, 5 * 3600, 30 * 3600, 9 * 86_400] {
            assert!(span / tick_step(span) <= 6, "{span}");
        }
        assert_eq!(tick_step(3600), 600);
    }

    #[test]
    fn jobs_that_started_apart_are_drawn_from_the_same_origin() {
        let early: Vec<(i64, f64)> = vec![(0, 10.0), (1800, 90.0), (3600, 90.0)];
        let late: Vec<(i64, f64)> = vec![(0, 20.0), (1800, 50.0)];
        let svg = aligned_chart("gpu_util", "%", &[("123".into(), &early), ("456".into(), &late)]).expect("a chart");
        assert!(svg.contains(r#"data-series="2""#) && svg.contains(r#"data-end="3600""#), "{svg}");
        // Both lines start at the plot's left edge: offset 0 of each job.
        assert_eq!(svg.matches(&format!("d=\"M{LEFT:.1} ")).count(), 2, "{svg}");
        assert!(svg.contains(">1h<") && svg.contains(">100 %<"), "{svg}");
        assert_eq!(aligned_chart("power", "W", &[("1".into(), &[])]), None);
    }
}
