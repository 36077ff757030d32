//! The job report's charts as SVG text, drawn on the server: a GPU × time heat map per metric, per-metric
//! timelines (a line per GPU for small jobs, the spread across GPUs for large ones) and RDMA in/out per
//! node. Plain SVG keeps them printable and readable before (or without) the wasm bundle, and makes
//! them testable natively. Colours: viridis for magnitudes and Tol's muted set for lines, both readable
//! under the common colour-vision deficiencies.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};
use slurmlens_wire as wire;

use crate::axis;
use crate::clock::Zone;
use crate::palette::CATEGORICAL;

/// Width of every chart's coordinate system (it scales with the page).
const WIDTH: f64 = 960.0;
/// Left margin for row labels and y-axis values.
const LEFT: f64 = 110.0;
const RIGHT: f64 = 12.0;
pub(crate) const TOP: f64 = 8.0;
/// Room under the plot for the time axis.
const AXIS: f64 = 24.0;
/// Text size in the charts' coordinates: charts are drawn at most at their 960-unit width, so text of
/// 14 units reads at 12 px or more on a desktop page.
const FONT: f64 = 14.0;
/// Above this many series a timeline shows the spread across GPUs instead of one line each.
pub const MAX_LINES: usize = 12;

/// Viridis, ten steps from low to high.
const VIRIDIS: [&str; 10] =
    ["#440154", "#482878", "#3E4A89", "#31688E", "#26828E", "#1F9E89", "#35B779", "#6DCD59", "#B4DE2C", "#FDE725"];

/// The colour of `value` on a `[0, max]` viridis scale, and its step.
pub fn viridis(value: f64, max: f64) -> (usize, &'static str) {
    let ratio = if max > 0.0 { (value / max).clamp(0.0, 1.0) } else { 0.0 };
    let step = ((ratio * VIRIDIS.len() as f64) as usize).min(VIRIDIS.len() - 1);
    (step, VIRIDIS[step])
}

/// How the charts are drawn for one viewer: in their zone, over the job's window or the range zoomed to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChartView {
    pub zone: Zone,
    /// A range of the job's window (epoch seconds, start before end) to draw instead of all of it.
    pub zoom: Option<(i64, i64)>,
}

impl From<Zone> for ChartView {
    fn from(zone: Zone) -> Self {
        Self { zone, zoom: None }
    }
}

/// The time span all charts of a report share: the job's window, or the range zoomed to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: i64,
    pub end: i64,
    /// Seconds each point covers (a point at `t` stands for `(t - step, t]`).
    pub step: i64,
    /// The viewer's zone: ticks fall on its hours and the axis is labelled in it.
    pub zone: Zone,
}

impl Span {
    /// The report's window, or the points' own extent when the report has none.
    pub fn of(report: &wire::JobReport, view: impl Into<ChartView>) -> Option<Self> {
        let ChartView { zone, zoom } = view.into();
        let step = i64::try_from(report.metrics.step_s).unwrap_or(0).max(1);
        let (start, end) = match (report.window_start, report.window_end) {
            (Some(start), Some(end)) => (start.timestamp(), end.timestamp()),
            _ => {
                let times = report.gpus.iter().flat_map(|g| &g.series).flat_map(|s| &s.points).map(|&(t, _)| t);
                let (low, high) = times.fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
                (low.checked_sub(step)?, high)
            }
        };
        // A zoom narrows the window, never widens it.
        let (start, end) = zoom.map_or((start, end), |(from, to)| (from.max(start), to.min(end)));
        (end > start).then_some(Self { start, end, step, zone })
    }

    /// Whether the point at `at` (standing for `(at - step, at]`) is drawn in this span.
    fn shows(&self, at: i64) -> bool {
        at > self.start && at - self.step < self.end
    }

    fn x(&self, at: i64) -> f64 {
        let plot = WIDTH - LEFT - RIGHT;
        LEFT + ((at - self.start) as f64 / (self.end - self.start) as f64).clamp(0.0, 1.0) * plot
    }
}

/// Escapes text for SVG content and attribute values.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A value with its unit, short (`87 %`, `1.2 GB/s`, `412 W`, `238,232 W`).
pub fn human(value: f64, unit: &str) -> String {
    if let Some(rest) = unit.strip_prefix('B') {
        let mut scaled = value;
        let mut prefix = 0;
        while scaled.abs() >= 1000.0 && prefix < 4 {
            scaled /= 1000.0;
            prefix += 1;
        }
        return format!("{scaled:.1} {}B{rest}", ["", "k", "M", "G", "T"][prefix]);
    }
    let digits = if value.abs() >= 100.0 || value == value.trunc() { 0 } else { 1 };
    // Thousands grouped as every page writes them (`238,232 W`).
    format!("{} {unit}", crate::numbers::decimal(value, digits))
}

/// The time axis under a plot whose bottom is at `y`, and what the page needs to make the chart
/// interactive: a crosshair (hidden until hovered) that carries the plot's time span and extent, and
/// the band a drag selects to zoom.
fn time_axis(out: &mut String, span: &Span, y: f64) {
    let plot = WIDTH - LEFT - RIGHT;
    let _ = write!(
        out,
        r##"<rect class="selection" x="{LEFT}" y="{TOP}" width="0" height="{:.1}" fill="#0072B2" fill-opacity="0.15" visibility="hidden"/><line class="crosshair" data-start="{}" data-end="{}" data-left="{LEFT}" data-right="{:.1}" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{y:.1}" stroke="#D55E00" stroke-width="1" visibility="hidden"/>"##,
        y - TOP,
        span.start,
        span.end,
        WIDTH - RIGHT,
    );
    let step = axis::step_for(span.start, span.end, plot, 90.0);
    let offset = i64::from(span.zone.offset_minutes(span.start)) * 60;
    let _ = write!(out, r##"<g class="axis" font-size="{FONT}" fill="#555">"##);
    for tick in axis::ticks_in_zone(span.start, span.end, plot, 90.0, offset) {
        let x = LEFT + tick.x;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{y:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            y + 14.0,
            escape(&span.zone.axis_label(tick.at, step)),
        );
    }
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text></g>"##,
        LEFT - 4.0,
        y + 14.0,
        escape(&span.zone.offset_name(span.start))
    );
}

/// A row's label left of the plot, where rows are tall enough to read one (the row's `<title>` and
/// hover name it otherwise; a big job's rows are labelled per node instead, see `node_labels`).
fn row_label(out: &mut String, label: &str, y: f64, row_height: f64) {
    if row_height >= 12.0 {
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="{:.0}" text-anchor="end" fill="#333">{}</text>"##,
            LEFT - 4.0,
            y + row_height * 0.8,
            row_height.min(FONT),
            escape(label)
        );
    }
}

/// Node names beside their group of rows, with a line between nodes, where rows are too thin for
/// one label each: a 256-GPU heat map reads as 32 labelled nodes.
fn node_labels(out: &mut String, labels: &[&str], row_height: f64) {
    if row_height >= 12.0 {
        return;
    }
    let node = |label: &str| label.split('/').next().unwrap_or(label).to_string();
    let mut start = 0;
    while start < labels.len() {
        let name = node(labels[start]);
        let count = labels[start..].iter().take_while(|label| node(label) == name).count();
        let (y, height) = (TOP + row_height * start as f64, row_height * count as f64);
        if height >= FONT {
            let _ = write!(
                out,
                r##"<text class="node-label" x="{:.1}" y="{:.1}" font-size="{FONT}" text-anchor="end" fill="#333">{}</text>"##,
                LEFT - 4.0,
                y + height / 2.0 + FONT * 0.35,
                escape(&name)
            );
        }
        if start > 0 {
            let _ =
                write!(out, r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#fff"/>"##, WIDTH - RIGHT);
        }
        start += count;
    }
}

/// The GPUs' series of one metric, labelled `node/gpu`.
fn gpu_series<'a>(gpus: &'a [wire::GpuReport], metric: &str) -> Vec<(String, &'a wire::MetricSeries)> {
    gpus.iter()
        .filter_map(|gpu| {
            let series = gpu.series.iter().find(|series| series.metric == metric)?;
            Some((format!("{}/{}", gpu.node, gpu.gpu), series))
        })
        .collect()
}

/// The largest value of a scale: 100 for percentages, else the data's peak rounded up to a round
/// number, so that the ticks at its half and whole read 40 / 80 GB, not 35668 / 71336 MiB.
fn scale_max(unit: &str, values: impl Iterator<Item = f64>) -> f64 {
    if unit == "%" { 100.0 } else { nice_ceiling(values.fold(0.0, f64::max)) }
}

/// The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above
/// `value`; its half is round too.
pub fn nice_ceiling(value: f64) -> f64 {
    if !value.is_finite() || value <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    let fraction = value / power;
    let step = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .find(|step| fraction <= *step + 1e-9)
        .unwrap_or(10.0);
    step * power
}

/// A GPU × time heat map of one metric: a row per GPU, a cell per point, runs of one colour merged.
/// XID errors are marked on their row. `None` when no GPU has the metric.
pub fn heat_map(report: &wire::JobReport, metric: &str, view: impl Into<ChartView>) -> Option<String> {
    let span = Span::of(report, view)?;
    let rows = gpu_series(&report.gpus, metric);
    if rows.is_empty() {
        return None;
    }
    let unit = rows[0].1.unit.clone();
    let max = scale_max(&unit, rows.iter().flat_map(|(_, s)| s.points.iter().map(|&(_, v)| v)));
    let row_height = (240.0 / rows.len() as f64).clamp(3.0, 16.0);
    let plot_bottom = TOP + row_height * rows.len() as f64;
    let height = plot_bottom + AXIS + 26.0;
    let mut out = String::with_capacity(rows.len() * 400);
    let _ = write!(
        out,
        r##"<svg class="chart heat-map" data-metric="{}" data-rows="{}" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="{} per GPU over time" xmlns="http://www.w3.org/2000/svg"><rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{:.1}" fill="#eee"/>"##,
        escape(metric),
        rows.len(),
        escape(metric),
        WIDTH - LEFT - RIGHT,
        plot_bottom - TOP,
    );
    let xid_rows: BTreeMap<String, &wire::GpuReport> =
        report.gpus.iter().map(|gpu| (format!("{}/{}", gpu.node, gpu.gpu), gpu)).collect();
    for (index, (label, series)) in rows.iter().enumerate() {
        let y = TOP + row_height * index as f64;
        let _ = write!(out, r#"<g data-gpu="{}"><title>{}</title>"#, escape(label), escape(label));
        row_label(&mut out, label, y, row_height);
        // Merge consecutive points of one colour into one rect.
        let mut run: Option<(i64, i64, usize, &str)> = None;
        let flush = |out: &mut String, run: Option<(i64, i64, usize, &str)>| {
            if let Some((from, to, _, colour)) = run {
                let (x0, x1) = (span.x(from), span.x(to));
                let _ = write!(
                    out,
                    r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/>"#,
                    (x1 - x0).max(0.5),
                    row_height - if row_height > 4.0 { 1.0 } else { 0.0 },
                );
            }
        };
        for &(at, value) in series.points.iter().filter(|&&(at, _)| span.shows(at)) {
            let (step, colour) = viridis(value, max);
            let from = at - span.step;
            run = match run {
                Some((start, end, level, c)) if level == step && from <= end => Some((start, at, level, c)),
                other => {
                    flush(&mut out, other);
                    Some((from, at, step, colour))
                }
            };
        }
        flush(&mut out, run);
        if let Some(gpu) = xid_rows.get(label) {
            for event in &gpu.xid_events {
                let x = span.x(event.at.timestamp());
                let _ = write!(
                    out,
                    r##"<path class="xid" d="M{x:.1} {y:.1}v{row_height:.1}" stroke="#D55E00" stroke-width="3"><title>XID {} at {}</title></path>"##,
                    event.xid,
                    span.zone.long(event.at.timestamp())
                );
            }
        }
        out.push_str("</g>");
    }
    let labels: Vec<&str> = rows.iter().map(|(label, _)| label.as_str()).collect();
    node_labels(&mut out, &labels, row_height);
    time_axis(&mut out, &span, plot_bottom);
    // Legend: the ten steps with the scale's ends.
    let legend_y = plot_bottom + AXIS + 6.0;
    for (index, colour) in VIRIDIS.iter().enumerate() {
        let _ = write!(
            out,
            r#"<rect x="{:.1}" y="{legend_y:.1}" width="24" height="10" fill="{colour}"/>"#,
            LEFT + index as f64 * 24.0
        );
    }
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="{FONT}" fill="#333">0 – {} ({})</text></svg>"##,
        LEFT + 250.0,
        legend_y + 9.0,
        escape(&human(max, &unit)),
        escape(metric)
    );
    Some(out)
}

/// A timeline of one metric for many series: one line each up to [`MAX_LINES`], else the min–max band
/// across series with their mean. Returns `None` when there are no points.
pub fn timeline(span: &Span, title: &str, unit: &str, series: &[(String, &[(i64, f64)])]) -> Option<String> {
    if series.len() > MAX_LINES {
        let caption = format!("band: lowest to highest of {} series · line: their mean", series.len());
        return spread_timeline(span, title, unit, series.len(), &spread_of(series), &caption);
    }
    if series.iter().all(|(_, points)| points.is_empty()) {
        return None;
    }
    let plot = Plot::new(unit, series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v)));
    let mut out = plot.open(title, unit, series.len(), false);
    let mut legend_x = LEFT;
    for (index, (label, points)) in series.iter().enumerate() {
        let colour = CATEGORICAL[index % CATEGORICAL.len()];
        let d = plot.path(span, points.iter().copied());
        let _ = write!(
            out,
            r#"<path class="line" data-label="{}" d="{d}" fill="none" stroke="{colour}" stroke-width="1.5"><title>{}</title></path>"#,
            escape(label),
            escape(label)
        );
        // One point (a job shorter than a step) is no line: a dot shows it.
        if let [(at, value)] = points.iter().filter(|&&(at, _)| span.shows(at)).collect::<Vec<_>>()[..] {
            let _ = write!(
                out,
                r#"<circle class="point" cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}</title></circle>"#,
                span.x(*at),
                plot.y(*value),
                escape(label)
            );
        }
        let _ = write!(
            out,
            r##"<rect x="{legend_x:.1}" y="{:.1}" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="{FONT}" fill="#333">{}</text>"##,
            plot.bottom + AXIS + 5.0,
            legend_x + 13.0,
            plot.bottom + AXIS + 14.0,
            escape(label)
        );
        legend_x += 20.0 + 0.6 * FONT * label.chars().count() as f64;
    }
    Some(plot.close(out, span))
}

/// A timeline of one metric's spread across `count` series: the band from lowest to highest and the
/// line of their mean, from `[epoch seconds, lowest, mean, highest]` points; `caption` says what the
/// band is made of. Returns `None` when there are no points.
pub fn spread_timeline(
    span: &Span,
    title: &str,
    unit: &str,
    count: usize,
    points: &[(i64, f64, f64, f64)],
    caption: &str,
) -> Option<String> {
    if points.is_empty() {
        return None;
    }
    let plot = Plot::new(unit, points.iter().map(|&(_, _, _, high)| high));
    let mut out = plot.open(title, unit, count, true);
    let upper = plot.path(span, points.iter().map(|&(at, _, _, high)| (at, high)));
    let lower = plot.path(span, points.iter().rev().map(|&(at, low, _, _)| (at, low))).replacen('M', "L", 1);
    let mean = plot.path(span, points.iter().map(|&(at, _, mean, _)| (at, mean)));
    let _ = write!(
        out,
        r##"<path class="band" d="{upper}{lower}Z" fill="#88CCEE" fill-opacity="0.5"/><path class="mean" d="{mean}" fill="none" stroke="#332288" stroke-width="1.5"/>"##
    );
    let _ = write!(
        out,
        r##"<text x="{LEFT}" y="{:.1}" font-size="{FONT}" fill="#333">{}</text>"##,
        plot.bottom + AXIS + 14.0,
        escape(caption)
    );
    Some(plot.close(out, span))
}

/// Per timestamp: the lowest, mean and highest value across `series`.
fn spread_of(series: &[(String, &[(i64, f64)])]) -> Vec<(i64, f64, f64, f64)> {
    let mut by_time: BTreeMap<i64, (f64, f64, f64, usize)> = BTreeMap::new();
    for (_, points) in series {
        for &(at, value) in *points {
            let entry = by_time.entry(at).or_insert((f64::MAX, 0.0, f64::MIN, 0));
            entry.0 = entry.0.min(value);
            entry.1 += value;
            entry.2 = entry.2.max(value);
            entry.3 += 1;
        }
    }
    by_time.into_iter().map(|(at, (low, sum, high, n))| (at, low, sum / n as f64, high)).collect()
}

/// A timeline's value scale and plot area.
struct Plot {
    max: f64,
    bottom: f64,
}

impl Plot {
    fn new(unit: &str, values: impl Iterator<Item = f64>) -> Self {
        Self { max: scale_max(unit, values).max(f64::MIN_POSITIVE), bottom: TOP + TIMELINE_PLOT }
    }

    fn y(&self, value: f64) -> f64 {
        self.bottom - (value / self.max).clamp(0.0, 1.0) * TIMELINE_PLOT
    }

    /// The SVG path through the points `span` shows.
    fn path(&self, span: &Span, points: impl Iterator<Item = (i64, f64)>) -> String {
        let mut d = String::new();
        for (index, (at, value)) in points.filter(|&(at, _)| span.shows(at)).enumerate() {
            let _ = write!(d, "{}{:.1} {:.1}", if index == 0 { "M" } else { "L" }, span.x(at), self.y(value));
        }
        d
    }

    /// The chart's opening tag (what the browser's hover reads) and its value grid.
    fn open(&self, title: &str, unit: &str, series: usize, banded: bool) -> String {
        let (max, bottom) = (self.max, self.bottom);
        let height = bottom + AXIS + 20.0;
        let mut out = String::new();
        let _ = write!(
            out,
            r##"<svg class="chart timeline" data-metric="{}" data-series="{series}" data-banded="{banded}" data-max="{max}" data-unit="{}" data-bottom="{bottom:.1}" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="{} over time" xmlns="http://www.w3.org/2000/svg">"##,
            escape(title),
            escape(unit),
            escape(title),
        );
        // The zero label sits above its line, clear of the time axis's zone label below it.
        for (fraction, baseline) in [(0.0, -3.0), (0.5, 4.0), (1.0, 4.0)] {
            let y = self.y(max * fraction);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="{FONT}" text-anchor="end" fill="#555">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 4.0,
                y + baseline,
                escape(&human(max * fraction, unit))
            );
        }
        out
    }

    fn close(&self, mut out: String, span: &Span) -> String {
        time_axis(&mut out, span, self.bottom);
        out.push_str("</svg>");
        out
    }
}

/// The timeline of one GPU metric across the job's GPUs.
pub fn gpu_timeline(report: &wire::JobReport, metric: &str, view: impl Into<ChartView>) -> Option<String> {
    let span = Span::of(report, view)?;
    let rows = gpu_series(&report.gpus, metric);
    let unit = rows.first()?.1.unit.clone();
    let series: Vec<(String, &[(i64, f64)])> =
        rows.iter().map(|(label, series)| (label.clone(), series.points.as_slice())).collect();
    timeline(&span, metric, &unit, &series)
}

/// RDMA or a node signal per node for one key (`rdma_rx` in, `rdma_tx` out, congestion counters,
/// `cpu_iowait`, `node_power`, …).
pub fn network_timeline(report: &wire::JobReport, metric: &str, view: impl Into<ChartView>) -> Option<String> {
    let span = Span::of(report, view)?;
    let rows: Vec<(String, &wire::MetricSeries)> = report
        .nodes
        .iter()
        .filter_map(|node| Some((node.node.clone(), node.series.iter().find(|s| s.metric == metric)?)))
        .collect();
    let unit = rows.first()?.1.unit.clone();
    let series: Vec<(String, &[(i64, f64)])> =
        rows.iter().map(|(label, series)| (label.clone(), series.points.as_slice())).collect();
    timeline(&span, metric, &unit, &series)
}

/// The job's Lustre reads and writes over time, from its job statistics or its nodes' clients.
pub fn io_timeline(report: &wire::JobReport, view: impl Into<ChartView>) -> Option<String> {
    let span = Span::of(report, view)?;
    let io = report.io.as_ref()?;
    let series: Vec<(String, &[(i64, f64)])> = ["lustre_read", "lustre_write"]
        .into_iter()
        .filter_map(|key| {
            let series = io.series.iter().find(|s| s.metric == key)?;
            Some((key.trim_start_matches("lustre_").to_string(), series.points.as_slice()))
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    timeline(&span, "Lustre I/O", "B/s", &series)
}

/// The node signals a report page draws, with their titles.
pub const NODE_CHARTS: [(&str, &str); 6] = [
    ("cpu_busy", "CPU busy per node (node_exporter)"),
    ("cpu_iowait", "CPU iowait per node: waiting on I/O"),
    ("io_pressure", "I/O pressure per node: time some task stalled on I/O"),
    ("memory_used", "host memory used per node"),
    ("net_rx", "network in per node (Ethernet/IPoIB, storage traffic)"),
    ("node_power", "node power per node (BMC, ipmi_exporter)"),
];

/// One drawn chart of a report page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// `heat-map`, `timeline`, `shared` (a band across a shared node's GPUs), `network`, `node` or `io`.
    pub kind: String,
    pub title: String,
    pub svg: String,
    /// The metric keys it draws (`gpu_util`, `rdma_rx`, `lustre_read`…): its queries' in `chart_queries`.
    #[serde(default)]
    pub metrics: Vec<String>,
}

/// Points per series a report page asks for: one per ~12 minutes of a day-long job.
pub const PAGE_POINTS: u32 = 120;

/// Every chart of a report page: heat maps of utilisation and tensor activity, a timeline per GPU
/// metric, RDMA in/out and congestion per node.
pub fn for_report(report: &wire::JobReport, view: impl Into<ChartView>) -> Vec<Chart> {
    let view = view.into();
    let chart = |kind: &str, title: String, svg: Option<String>, metrics: &[&str]| {
        svg.map(|svg| Chart {
            kind: kind.to_string(),
            title,
            svg,
            metrics: metrics.iter().map(|metric| metric.to_string()).collect(),
        })
    };
    let mut charts: Vec<Chart> = ["gpu_util", "tensor_active"]
        .into_iter()
        .filter_map(|metric| {
            chart(
                "heat-map",
                format!("{} per GPU (GPU × time)", metric.replace('_', " ")),
                heat_map(report, metric, view),
                &[metric],
            )
        })
        .collect();
    for (metric, unit) in gpu_metrics(report) {
        charts.extend(chart(
            "timeline",
            format!("{} ({unit})", metric.replace('_', " ")),
            gpu_timeline(report, &metric, view),
            &[metric.as_str()],
        ));
    }
    for wire::SpreadSeries { metric, unit, count, points } in shared_node_spreads(&report.shared_node_bands) {
        let Some(span) = Span::of(report, view) else { break };
        let place = match report.shared_node_bands.as_slice() {
            [band] => format!("on the shared node {}, all its GPUs", band.node),
            bands => format!("on the {} shared nodes, all their GPUs", bands.len()),
        };
        let caption = format!("band: lowest to highest of the {count} GPUs, other tenants' too · line: their mean");
        charts.extend(chart(
            "shared",
            format!("{} ({unit}) {place}", metric.replace('_', " ")),
            spread_timeline(&span, &metric, &unit, count as usize, &points, &caption),
            &[metric.as_str()],
        ));
    }
    for (metric, title) in [
        ("rdma_rx", "RDMA in (received) per node"),
        ("rdma_tx", "RDMA out (transmitted) per node"),
        ("cnp_handled", "congestion notifications (CNP) handled per node"),
        ("pfc_pause", "PFC pause frames per node"),
    ] {
        charts.extend(chart("network", title.to_string(), network_timeline(report, metric, view), &[metric]));
    }
    for (metric, title) in NODE_CHARTS {
        charts.extend(chart("node", title.to_string(), network_timeline(report, metric, view), &[metric]));
    }
    if let Some(io) = &report.io {
        let whose = match io.source {
            wire::IoSource::Jobstats => "the job's own (Lustre job statistics)",
            wire::IoSource::Nodes => "its nodes' clients, all jobs there",
        };
        charts.extend(chart(
            "io",
            format!("Lustre reads and writes: {whose}"),
            io_timeline(report, view),
            &["lustre_read", "lustre_write"],
        ));
    }
    charts
}

/// Per metric, the spread across every GPU of the nodes a tenant's job shared (one band for all the
/// nodes): lowest of the lows, mean weighted by each node's GPUs, highest of the highs; in the order the
/// metrics first appear, `count` the GPUs of all the nodes.
fn shared_node_spreads(bands: &[wire::SharedNodeBand]) -> Vec<wire::SpreadSeries> {
    let mut merged: Vec<wire::SpreadSeries> = Vec::new();
    for spread in bands.iter().flat_map(|band| &band.spread) {
        let Some(known) = merged.iter_mut().find(|known| known.metric == spread.metric) else {
            merged.push(spread.clone());
            continue;
        };
        let mut by_time: BTreeMap<i64, (f64, f64, f64, f64)> = BTreeMap::new();
        for (part, count) in [(&known.points, known.count), (&spread.points, spread.count)] {
            let weight = f64::from(count.max(1));
            for &(at, low, mean, high) in part {
                let entry = by_time.entry(at).or_insert((f64::MAX, 0.0, 0.0, f64::MIN));
                *entry = (entry.0.min(low), entry.1 + mean * weight, entry.2 + weight, entry.3.max(high));
            }
        }
        known.points =
            by_time.into_iter().map(|(at, (low, sum, weight, high))| (at, low, sum / weight, high)).collect();
        known.count += spread.count;
    }
    merged
}

/// Height of a timeline's plot area.
const TIMELINE_PLOT: f64 = 120.0;

/// Marks moments (the job's important log lines: an XID, an NCCL timeout…) on the report's timelines:
/// a dashed vertical line each, titled with what happened. Moments outside the span are left out.
pub fn mark_moments(charts: &mut [Chart], span: &Span, moments: &[(i64, String)]) {
    let marks: String = moments
        .iter()
        .filter(|(at, _)| (span.start..=span.end).contains(at))
        .map(|(at, label)| {
            format!(
                r##"<path class="log-mark" d="M{:.1} {TOP:.1}v{TIMELINE_PLOT:.1}" stroke="#CC3311" stroke-width="1.5" stroke-dasharray="4 3"><title>{}</title></path>"##,
                span.x(*at),
                escape(label)
            )
        })
        .collect();
    if marks.is_empty() {
        return;
    }
    for chart in charts.iter_mut().filter(|chart| matches!(chart.kind.as_str(), "timeline" | "shared" | "network")) {
        if let Some(end) = chart.svg.rfind("</svg>") {
            chart.svg.insert_str(end, &marks);
        }
    }
}

/// Drops a report's series once its charts are drawn: the page carries the drawings, not the points.
pub fn without_series(mut report: wire::JobReport) -> wire::JobReport {
    for gpu in &mut report.gpus {
        gpu.series.clear();
    }
    for node in &mut report.nodes {
        node.series.clear();
    }
    if let Some(io) = &mut report.io {
        io.series.clear();
    }
    for band in &mut report.shared_node_bands {
        band.spread.clear();
    }
    report
}

/// The parts of traced time and their colours (Okabe–Ito).
pub const TIME_PARTS: [(&str, &str); 5] = [
    ("compute", "#0072B2"),
    ("NCCL", "#E69F00"),
    ("memory copies", "#CC79A7"),
    ("synchronisation", "#D55E00"),
    ("idle", "#BBBBBB"),
];

/// Where traced time went: one stacked bar per GPU (compute, NCCL, memory copies, synchronisation,
/// idle), the whole job on top. `None` when nothing was traced.
pub fn time_shares(traces: &wire::JobTraces) -> Option<String> {
    if traces.total.traced_s <= 0.0 {
        return None;
    }
    let mut rows: Vec<(String, &wire::TraceBreakdown)> = vec![("whole job".to_string(), &traces.total)];
    rows.extend(traces.gpus.iter().map(|gpu| (format!("{}/{}", gpu.node, gpu.gpu), &gpu.breakdown)));
    let row_height = (260.0 / rows.len() as f64).clamp(4.0, 18.0);
    let plot = WIDTH - LEFT - RIGHT;
    let bottom = TOP + row_height * rows.len() as f64;
    let height = bottom + 30.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg class="chart time-shares" data-rows="{}" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="where traced GPU time went" xmlns="http://www.w3.org/2000/svg">"##,
        rows.len()
    );
    for (index, (label, breakdown)) in rows.iter().enumerate() {
        let y = TOP + row_height * index as f64;
        let shares = [
            breakdown.compute_share,
            breakdown.communication_share,
            breakdown.memcpy_share,
            breakdown.sync_share,
            breakdown.idle_share,
        ];
        let _ = write!(out, r#"<g data-gpu="{}">"#, escape(label));
        row_label(&mut out, label, y, row_height);
        let mut x = LEFT;
        for ((part, colour), share) in TIME_PARTS.iter().zip(shares) {
            let width = share.clamp(0.0, 1.0) * plot;
            if width > 0.0 {
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{:.1}" fill="{colour}"><title>{}: {part} {:.0} %</title></rect>"#,
                    (row_height - 1.0).max(1.0),
                    escape(label),
                    share * 100.0
                );
            }
            x += width;
        }
        out.push_str("</g>");
    }
    let mut x = LEFT;
    for (part, colour) in TIME_PARTS {
        let _ = write!(
            out,
            r##"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="{FONT}" fill="#333">{part}</text>"##,
            bottom + 10.0,
            x + 13.0,
            bottom + 19.0
        );
        x += 30.0 + 6.5 * part.len() as f64;
    }
    out.push_str("</svg>");
    Some(out)
}

/// The GPU metrics a report has series for, in the report's order.
pub fn gpu_metrics(report: &wire::JobReport) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for series in report.gpus.iter().flat_map(|gpu| &gpu.series) {
        if !seen.iter().any(|(metric, _)| *metric == series.metric) {
            seen.push((series.metric.clone(), series.unit.clone()));
        }
    }
    seen
}

#[cfg(test)]
#[path = "charts_tests.rs"]
mod tests;
