//! The report section of a job's page: "was the failure mine?", the verdicts with what to do next,
//! the charts (SVG drawn on the server by [`crate::charts`]) and then, folded, the per-node and per-GPU
//! tables, outliers first, so that a 256-GPU job opens on its conclusions rather than on 256 rows.

use leptos::prelude::*;
use slurmlens_wire as wire;

use crate::app::Time;
use crate::charts;

/// GPU-hours at the precision of the job's `total`: to the hundredth below a hundred, whole and grouped
/// above (`258,048`, not `258048.00`), so a total and its idle part read alike (`1,117 · 0 idle`).
pub fn gpu_hours(value: f64, total: f64) -> String {
    if total >= 100.0 { super::gantt_packed::thousands(value.round() as usize) } else { format!("{value:.2}") }
}

/// The report's verdicts, totals, per-GPU means and peaks, and its charts.
#[component]
pub fn ReportSummary(report: wire::JobReport, charts: Vec<charts::Chart>, href: String) -> impl IntoView {
    let state = match report.metrics.status {
        wire::MetricsState::Ok => "metrics read",
        wire::MetricsState::NoData => "no metrics",
        wire::MetricsState::Unavailable => "metrics unavailable",
    };
    let mut metrics = match report.metrics.message.clone() {
        // The source's own message may already say it ("metrics unavailable: …").
        Some(message) if message.starts_with(state) => message,
        Some(message) => format!("{state}: {message}"),
        None => state.to_string(),
    };
    // A long job says how its window was read: through the recording rules, or raw and why.
    if report.metrics.reads == wire::MetricsReads::RecordingRules {
        metrics.push_str(" (whole hours and 5-minute buckets from the recording rules, the edges raw)");
    }
    if let Some(note) = &report.metrics.reads_note {
        metrics.push_str(&format!(" ({note})"));
    }
    // Where VictoriaMetrics answered, a missing exporter is said; where it did not, the status says so.
    let metrics_ok = report.metrics.status == wire::MetricsState::Ok;
    // Whether DCGM's samples of the job's GPUs are charted (a GPU listed without samples draws none).
    let gpu_charts = charts.iter().any(|chart| matches!(chart.kind.as_str(), "heat-map" | "timeline" | "shared"));
    let totals = &report.totals;
    let hours = |value: f64| gpu_hours(value, totals.gpu_hours);
    let mut total_text = vec![format!("{} GPU hours", hours(totals.gpu_hours))];
    // On a shared node without a record of its GPUs, the job's share of the node is not measured: the
    // figures that follow are about the GPUs known to be its own.
    let known = totals.gpu_hours - totals.unattributed_gpu_hours;
    let shared: std::collections::BTreeSet<&str> = (report.gpus.iter().filter(|gpu| gpu.uncertain))
        .map(|gpu| gpu.node.as_str())
        .chain(report.shared_node_bands.iter().map(|band| band.node.as_str()))
        .collect();
    let unplaced = match shared.len() {
        1 => "no record says which of the shared node's GPUs were the job's (all of them are shown below)".to_string(),
        nodes => format!("no record says which of the {nodes} shared nodes' GPUs were the job's (all are shown below)"),
    };
    // Where the samples cover part of the run, every figure after this says so: it is of that part.
    let partial = totals.coverage.as_ref().filter(|covered| covered.share < wire::WHOLE_COVERAGE_SHARE);
    let zone = crate::clock::use_zone();
    if let Some(covered) = partial {
        total_text.push(format!(
            "measured over {} ({} of the run on its GPUs, {} to {}); the figures below are of that part",
            hours(covered.measured_gpu_hours),
            share(covered.share),
            zone.short(covered.from.timestamp()),
            zone.short(covered.to.timestamp()),
        ));
    }
    if totals.unattributed_gpu_hours <= 0.0 {
        let of_those = if partial.is_some() { " of those" } else { "" };
        total_text.push(format!("{} idle{of_those}", hours(totals.idle_gpu_hours)));
    } else if known <= totals.gpu_hours * 1e-9 {
        total_text.push(format!("not measured: {unplaced}"));
    } else {
        total_text.push(format!(
            "{} idle of the {} on GPUs known to be the job's; {} not measured: {unplaced}",
            hours(totals.idle_gpu_hours),
            hours(known),
            hours(totals.unattributed_gpu_hours)
        ));
    }
    // The means are over the GPUs known to be the job's, each GPU's mean over its samples.
    let measured_gpus = report.gpus.iter().filter(|gpu| !gpu.uncertain && !gpu.summary.is_empty()).count();
    let over = match measured_gpus {
        1 => " on its 1 GPU".to_string(),
        n => format!(" over its {n} GPUs"),
    };
    if let Some(util) = totals.mean_gpu_util {
        total_text.push(format!("mean GPU utilisation {util:.0}%{over}"));
    }
    if let Some(tensor) = totals.mean_tensor_active {
        total_text.push(format!("mean tensor activity {tensor:.0}%"));
    }
    let of_part = if partial.is_some() { " in the measured part" } else { "" };
    if let Some(energy) = totals.energy_kwh {
        total_text.push(format!("{energy:.2} kWh{of_part}"));
    }
    if let (Some(power), Some(energy)) = (totals.node_power_w, totals.node_energy_kwh) {
        total_text.push(format!("nodes {} mean, {energy:.2} kWh (BMC){of_part}", charts::human(power, "W")));
    }
    // Moments named in the verdicts' sentences read on the page's clock.
    let verdicts = report
        .verdicts
        .iter()
        .map(|verdict| {
            let evidence = verdict.evidence.iter().map(|line| view! { <li>{zone.restamp(line)}</li> }).collect_view();
            let next = verdict.next_step.clone().map(|step| {
                view! { <p class="next-step" data-testid="next-step"><strong>"What to do: "</strong>{step}</p> }
            });
            view! {
                <article class=format!("verdict {}", verdict.severity) data-testid="verdict" data-kind=verdict.kind.as_str()>
                    <h3>{format!("{} · {}", verdict.severity, verdict_title(verdict.kind))}</h3>
                    <p>{zone.restamp(&verdict.message)}</p>
                    <ul>{evidence}</ul>
                    {next}
                </article>
            }
        })
        .collect_view();
    view! {
        <p class="muted">{format!("{} report, {metrics}. ", report.source)} <a data-testid="report-json" href=href>"report JSON"</a></p>
        <p data-testid="report-totals">{total_text.join(" · ")}</p>
        {report.failure.clone().map(|failure| view! { <FailureCard failure run=run_of(&report) /> })}
        <div class="verdicts">{verdicts}</div>
        <ReportCharts charts queries=report.chart_queries.clone() dashboard=report.dashboard_url.clone() />
        {report.traces.clone().map(|traces| view! { <TimeShares traces gpu_charts /> })}
        {match report.io.clone() {
            Some(io) => view! { <IoLine io /> }.into_any(),
            None => metrics_ok.then(|| view! {
                <p class="muted" data-testid="report-io" data-source="none">"File system: no Lustre exporter series for this job or its nodes."</p>
            }).into_any(),
        }}
        {(!report.bursts.is_empty()).then(|| view! { <BurstTable bursts=report.bursts.clone() /> })}
        <NodeTable nodes=report.nodes.clone() metrics_ok=metrics_ok />
        <GpuTable gpus=report.gpus.clone() />
        <SharedNodeTable bands=report.shared_node_bands.clone() />
    }
}

/// "5 %", "<1 %": a share as the totals print it.
fn share(value: f64) -> String {
    let pct = (value * 100.0).clamp(0.0, 100.0);
    if pct > 0.0 && pct < 1.0 { "<1 %".into() } else { format!("{pct:.0} %") }
}

/// The job's run as the report's window gives it (epoch seconds), for placing facts against it.
fn run_of(report: &wire::JobReport) -> Option<(i64, i64)> {
    Some((report.window_start?.timestamp(), report.window_end?.timestamp()))
}

/// Where a fact lies against the run, when outside it: "after the end (+3 min)".
fn outside_run(at: i64, run: Option<(i64, i64)>) -> Option<String> {
    let (start, end) = run?;
    let minutes = |seconds: i64| (seconds + 59) / 60;
    if at > end {
        Some(format!("after the end (+{} min)", minutes(at - end)))
    } else if at < start {
        Some(format!("before the start (−{} min)", minutes(start - at)))
    } else {
        None
    }
}

/// Tables of more rows than this open folded: the verdicts and charts come first.
const OPEN_ROWS: usize = 8;

/// One metric's mean in a GPU's summary.
fn mean_of(gpu: &wire::GpuReport, metric: &str) -> Option<f64> {
    gpu.summary.iter().find(|s| s.metric == metric).map(|s| s.mean)
}

/// The GPUs ordered most different first: by how far their mean utilisation (then tensor activity)
/// lies from the job's median, so the outliers lead a 256-row table.
pub fn by_deviation(gpus: &[wire::GpuReport]) -> Vec<&wire::GpuReport> {
    let median = |metric: &str| {
        let mut values: Vec<f64> = gpus.iter().filter_map(|gpu| mean_of(gpu, metric)).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let (util, tensor) = (median("gpu_util"), median("tensor_active"));
    let distance = |gpu: &wire::GpuReport| {
        let off = |metric: &str, middle: Option<f64>| match (mean_of(gpu, metric), middle) {
            (Some(value), Some(middle)) => (value - middle).abs(),
            _ => 0.0,
        };
        off("gpu_util", util) + off("tensor_active", tensor) + 1000.0 * gpu.xid_events.len() as f64
    };
    let mut ordered: Vec<&wire::GpuReport> = gpus.iter().collect();
    ordered.sort_by(|a, b| distance(b).total_cmp(&distance(a)));
    ordered
}

/// Per-GPU means and peaks in columns, the most different GPUs first; folded for big jobs.
#[component]
fn GpuTable(gpus: Vec<wire::GpuReport>) -> impl IntoView {
    if gpus.is_empty() {
        return ().into_any();
    }
    let rows = by_deviation(&gpus)
        .into_iter()
        .map(|gpu| {
            let attribution = match gpu.attribution {
                wire::Attribution::HpcJobLabel => "dcgm-exporter's job label",
                wire::Attribution::PluginRecord => "recorded by the node",
                wire::Attribution::WholeNode => "whole node held",
                wire::Attribution::NodeOnly => "node shared: uncertain",
            };
            view! {
                <tr data-testid="report-gpu" data-node=gpu.node.clone() data-gpu=gpu.gpu>
                    <td>{gpu.node.clone()}</td>
                    <td>{gpu.gpu}</td>
                    {metric_cells(&gpu.summary)}
                    <td>{gpu.xid_events.len()}</td>
                    <td>{attribution}</td>
                </tr>
            }
        })
        .collect_view();
    let head = view! {
        <th scope="col">"Node"</th><th scope="col">"GPU"</th>{metric_headers()}<th scope="col">"XIDs"</th>
        <th scope="col">"How the GPU is known to be the job's"</th>
    };
    let title = format!("Per GPU ({} GPUs, the most different first)", gpus.len());
    folded_table("report-table", "report-gpus", gpus.len(), title, head, rows).into_any()
}

/// The GPU metrics the GPU tables show, each a mean or a peak, with their column headers.
const GPU_COLUMNS: [(&str, bool, &str); 5] = [
    ("gpu_util", false, "Utilisation (mean)"),
    ("tensor_active", false, "Tensor cores (mean)"),
    ("sm_active", false, "SMs busy (mean)"),
    ("fb_used", true, "Memory (peak)"),
    ("power", false, "Power (mean)"),
];

fn metric_headers() -> impl IntoView {
    GPU_COLUMNS.iter().map(|(_, _, header)| view! { <th scope="col">{*header}</th> }).collect_view()
}

/// A summary's cells in the columns of [`GPU_COLUMNS`].
fn metric_cells(summary: &[wire::MetricSummary]) -> impl IntoView {
    GPU_COLUMNS.iter().map(|(metric, peak, _)| view! { <td>{summary_cell(summary, metric, *peak)}</td> }).collect_view()
}

/// A report table in a fold, open when it has no more than [`OPEN_ROWS`] rows: `head` the header cells.
fn folded_table(
    class: &'static str,
    testid: &'static str,
    rows: usize,
    title: String,
    head: impl IntoView,
    body: impl IntoView,
) -> impl IntoView {
    view! {
        <details class=class data-testid=testid open=rows <= OPEN_ROWS>
            <summary>{title}</summary>
            <table class="compact">
                <thead><tr>{head}</tr></thead>
                <tbody>{body}</tbody>
            </table>
        </details>
    }
}

/// One metric's mean (or peak) in a summary, with its unit; a dash where there is none.
fn summary_cell(summary: &[wire::MetricSummary], metric: &str, peak: bool) -> String {
    summary
        .iter()
        .find(|s| s.metric == metric)
        .map_or_else(|| "–".to_string(), |s| charts::human(if peak { s.max } else { s.mean }, &s.unit))
}

/// The nodes a tenant's job shared without a record of its GPUs there: each node's GPUs as one row, the
/// mean of their means and the highest peak, other tenants' GPUs included (the charts draw their band).
#[component]
fn SharedNodeTable(bands: Vec<wire::SharedNodeBand>) -> impl IntoView {
    if bands.is_empty() {
        return ().into_any();
    }
    let rows = bands
        .iter()
        .map(|band| {
            view! {
                <tr data-testid="report-shared-node" data-node=band.node.clone()>
                    <td>{band.node.clone()}</td>
                    <td>{band.gpus}</td>
                    {metric_cells(&band.summary)}
                </tr>
            }
        })
        .collect_view();
    let head = view! { <th scope="col">"Node"</th><th scope="col">"GPUs"</th>{metric_headers()} };
    let title = format!(
        "Shared nodes ({}): the job held some of their GPUs, and no record says which, so each row is all of a \
         node's GPUs, other tenants' too",
        bands.len()
    );
    folded_table("report-table", "report-shared-nodes", bands.len(), title, head, rows).into_any()
}

/// "Was the failure mine?": the verdict, why, and the evidence in time order.
#[component]
fn FailureCard(failure: wire::FailureAnalysis, run: Option<(i64, i64)>) -> impl IntoView {
    let zone = crate::clock::use_zone();
    let (headline, next) = match failure.blame {
        wire::Blame::Infrastructure => (
            "Likely the infrastructure, not your job",
            "resubmit: the fault was not in your program. If it happens again, tell your provider the job id and the node named below.",
        ),
        wire::Blame::Application => (
            "Likely the application",
            "look at the program's own output around its end (the Program output section below: its error file), then at \
             the verdicts below; the Logs section holds the nodes' system logs, not the program's.",
        ),
        wire::Blame::Unknown => (
            "Cause unknown",
            "read the evidence below with the program's logs; if in doubt, ask your provider with the job id.",
        ),
    };
    let evidence = failure
        .evidence
        .iter()
        .map(|fact| {
            view! {
                <tr data-testid="failure-evidence" data-source=fact.source.as_str() data-strength=fact.strength.as_str()>
                    <td><Time at=fact.at.timestamp() />{outside_run(fact.at.timestamp(), run).map(|words| view! {
                        <br /><small class="muted" data-testid="outside-run">{words}</small>
                    })}</td>
                    <td>{evidence_source(fact.source)}</td>
                    <td>{fact.place.clone()}</td>
                    <td>{zone.restamp(&fact.detail)}</td>
                    <td>{points_to(fact.strength)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <article class=format!("failure {}", failure.blame) data-testid="failure" data-blame=failure.blame.as_str()>
            <h3>{format!("Was the failure mine? {headline}")}</h3>
            <p>{zone.restamp(&failure.reason)}</p>
            <p class="next-step"><strong>"What to do: "</strong>{next}</p>
            <div class="table-wrap"><table class="compact">
                <thead><tr><th scope="col">"When"</th><th scope="col">"Source"</th><th scope="col">"Where"</th><th scope="col">"What"</th><th scope="col">"Points to"</th></tr></thead>
                <tbody>{evidence}</tbody>
            </table></div>
        </article>
    }
}

/// Where a fact came from, in words.
fn evidence_source(source: wire::EvidenceSource) -> &'static str {
    match source {
        wire::EvidenceSource::Slurm => "Slurm",
        wire::EvidenceSource::Xid => "GPU driver (XID)",
        wire::EvidenceSource::NodeEvent => "Slurm node event",
        wire::EvidenceSource::PingmeshLoss => "network probes: loss",
        wire::EvidenceSource::PingmeshRtt => "network probes: latency",
        wire::EvidenceSource::LinkErrors => "RDMA link",
        wire::EvidenceSource::Ecc => "GPU memory (ECC)",
    }
}

/// What a fact points to, in words.
fn points_to(strength: wire::EvidenceStrength) -> &'static str {
    match strength {
        wire::EvidenceStrength::Strong => "the infrastructure",
        wire::EvidenceStrength::Weak => "possibly the infrastructure",
        wire::EvidenceStrength::Application => "the program",
        wire::EvidenceStrength::Fact => "Slurm's record",
        wire::EvidenceStrength::Context => "set aside (see why in its line)",
    }
}

/// A vmui link whose range ends at `end` read in `zone`: vmui reads `g0.end_input` as a wall time in the
/// browser's own zone, where the server can only write UTC.
pub fn vmui_in_zone(href: &str, end: i64, zone: crate::clock::Zone) -> String {
    let Some((head, rest)) = href.split_once("g0.end_input=") else { return href.to_string() };
    let tail = rest.find('&').map_or("", |at| &rest[at..]);
    format!("{head}g0.end_input={}{tail}", zone.wall_time(end).replace(':', "%3A"))
}

/// A verdict's title in words.
fn verdict_title(kind: wire::VerdictKind) -> &'static str {
    use wire::VerdictKind;
    match kind {
        VerdictKind::IdleGpus => "idle GPUs",
        VerdictKind::OutlierNode => "a slow node",
        VerdictKind::LowTensorActivity => "little tensor work",
        VerdictKind::MemoryNearlyFull => "GPU memory nearly full",
        VerdictKind::UnbalancedGpus => "uneven load",
        VerdictKind::XidErrors => "GPU hardware or driver faults",
        VerdictKind::ProgramGpuFaults => "GPU faults caused by the program",
        VerdictKind::Good => "efficient",
        VerdictKind::IoBound => "waiting on I/O",
        VerdictKind::NodeMemoryPressure => "host memory short",
        VerdictKind::NodePower => "power",
        VerdictKind::PowerReadingsDisagree => "inconsistent power readings",
        VerdictKind::MicroBursts => "network micro-bursts",
        VerdictKind::AttributionUncertain => "which GPUs were the job's",
        VerdictKind::TelemetryGap => "samples cover part of the run",
    }
}

/// Where the traced GPU time went (eBPF or nsys summaries), the bottleneck and the top kernels and
/// collectives; `gpu_charts`: whether the report charts the job's GPUs (DCGM's samples) above.
#[component]
fn TimeShares(traces: wire::JobTraces, gpu_charts: bool) -> impl IntoView {
    let total = &traces.total;
    let pct = |share: f64| format!("{:.0} %", share * 100.0);
    // Records from the node agent's uprobes carry host-side counts and times in the CUDA and NCCL API,
    // no GPU kernel time: no share of GPU time can be told from them, and none is drawn.
    let host_side = total.kernel_ns == 0 && traces.top_kernels.iter().any(|kernel| kernel.count > 0);
    let summary = if host_side {
        let launches: u64 = traces.top_kernels.iter().map(|kernel| kernel.count).sum();
        let collectives: u64 = traces.top_collectives.iter().map(|op| op.count).sum();
        let device_side = if gpu_charts { "in the charts above" } else { "and DCGM has no samples of this job's GPUs" };
        format!(
            "Host side only (eBPF on the CUDA and NCCL API): {launches} kernel launches among the top kernels, \
             {collectives} NCCL calls, {:.1} s blocked in synchronisation, {:.1} s in synchronous copies. The API \
             layer cannot see how long kernels ran on the GPU: the GPU's own activity is DCGM's, {device_side}.",
            total.sync_ns as f64 / 1e9,
            total.memcpy_ns as f64 / 1e9,
        )
    } else {
        format!(
            "{:.1} GPU-hours traced: compute {}, NCCL {}, memory copies {}, synchronisation {}, idle {}",
            total.traced_s / 3600.0,
            pct(total.compute_share),
            pct(total.communication_share),
            pct(total.memcpy_share),
            pct(total.sync_share),
            pct(total.idle_share)
        )
    };
    let verdict = total.verdict.clone().map(|verdict| {
        let evidence = verdict.evidence.iter().map(|line| view! { <li>{line.clone()}</li> }).collect_view();
        view! {
            <p data-testid="bottleneck" data-kind=verdict.kind.as_str()><strong>{verdict.kind.as_str().replace('-', " ")}</strong></p>
            <ul>{evidence}</ul>
        }
    });
    let top = |entries: &[wire::TraceTop]| {
        entries
            .iter()
            .map(|entry| {
                let name: String = entry.name.chars().take(90).collect();
                view! {
                    <tr title=entry.name.clone()>
                        <td class="name">{name}</td>
                        <td>{entry.count}</td>
                        <td>{format!("{:.2} s", entry.total_ns as f64 / 1e9)}</td>
                        <td>{if entry.bytes > 0 { charts::human(entry.bytes as f64, "B") } else { String::new() }}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let kernels = top(&traces.top_kernels);
    let collectives = top(&traces.top_collectives);
    let bars = (!host_side).then(|| charts::time_shares(&traces)).flatten();
    let time_header = if host_side { "Host time" } else { "GPU time" };
    view! {
        <section class="time-shares-box" data-testid="time-shares" data-host-side=host_side.to_string()>
            <h3>{if host_side { "The CUDA and NCCL calls (traces, host side)" } else { "Where the GPU time went (traces)" }}</h3>
            <p>{summary}</p>
            {verdict}
            {bars.map(|svg| view! { <figure class="chart-box"><div inner_html=svg></div></figure> })}
            <table class="compact">
                <thead><tr><th scope="col">"Top kernels"</th><th scope="col">"Calls"</th><th scope="col">{time_header}</th><th scope="col">""</th></tr></thead>
                <tbody>{kernels}</tbody>
            </table>
            <table class="compact">
                <thead><tr><th scope="col">"Top collectives"</th><th scope="col">"Calls"</th><th scope="col">"Time"</th><th scope="col">"Bytes"</th></tr></thead>
                <tbody>{collectives}</tbody>
            </table>
        </section>
    }
}

/// The node beside its GPUs: mean and peak of each node signal, one row per node; a line saying so when
/// no node exporter is scraped for the job's nodes.
#[component]
fn NodeTable(nodes: Vec<wire::NodeNetworkReport>, metrics_ok: bool) -> impl IntoView {
    let keys = ["cpu_busy", "cpu_iowait", "io_pressure", "memory_used", "memory_pressure", "net_rx", "node_power"];
    let cell = |node: &wire::NodeNetworkReport, key: &str| {
        node.summary.iter().find(|s| s.metric == key).map_or_else(
            || "–".to_string(),
            |s| format!("{} / {}", charts::human(s.mean, &s.unit), charts::human(s.max, &s.unit)),
        )
    };
    let rows: Vec<_> = nodes
        .iter()
        .filter(|node| node.summary.iter().any(|s| keys.contains(&s.metric.as_str())))
        .map(|node| {
            let cells = keys.iter().map(|key| view! { <td>{cell(node, key)}</td> }).collect_view();
            view! { <tr data-testid="report-node" data-node=node.node.clone()><td>{node.node.clone()}</td>{cells}</tr> }
        })
        .collect();
    if rows.is_empty() {
        return metrics_ok
            .then(|| {
                view! {
                    <p class="muted" data-testid="report-nodes-missing">
                        "Nodes: no node_exporter or ipmi_exporter series for this job's nodes."
                    </p>
                }
            })
            .into_any();
    }
    let title =
        format!("Nodes ({}, mean / peak; whole-node figures, shared with other jobs on a shared node)", rows.len());
    let head = view! {
        <th scope="col">"Node"</th><th scope="col">"CPU busy"</th><th scope="col">"iowait"</th>
        <th scope="col">"I/O pressure"</th><th scope="col">"Memory"</th><th scope="col">"Mem. pressure"</th>
        <th scope="col">"Net in"</th><th scope="col">"Power"</th>
    };
    folded_table("report-table node-signals", "report-nodes", rows.len(), title, head, rows).into_any()
}

/// The job's Lustre I/O in one line: where the figures come from, bytes and mean rates.
#[component]
fn IoLine(io: wire::IoReport) -> impl IntoView {
    let rate = |key: &str, unit: &str| {
        io.summary.iter().find(|s| s.metric == key).map(|s| format!("{} mean", charts::human(s.mean, unit)))
    };
    let mut parts = vec![
        format!("read {}", charts::human(io.read_bytes, "B")),
        format!("written {}", charts::human(io.write_bytes, "B")),
    ];
    parts.extend(rate("lustre_read", "B/s").map(|r| format!("reads {r}")));
    parts.extend(rate("lustre_read_ops", "ops/s"));
    let source = match io.source {
        wire::IoSource::Jobstats => "Lustre job statistics (this job alone)",
        wire::IoSource::Nodes => "Lustre clients of the job's nodes (with any other job on them)",
    };
    view! {
        <p data-testid="report-io" data-source=io.source.as_str()>{format!("File system: {} — {source}", parts.join(" · "))}</p>
    }
}

/// Micro-bursts per node: the agent's 100 ms peaks against what the scrape average shows.
#[component]
fn BurstTable(bursts: Vec<wire::NodeBursts>) -> impl IntoView {
    let rate = |value: Option<f64>| value.map_or_else(|| "unknown".to_string(), |v| charts::human(v, "B/s"));
    let threshold = bursts.first().map_or(0.0, |row| row.threshold_bytes_per_s);
    let rows = bursts
        .iter()
        .map(|row| {
            view! {
                <tr data-testid="burst-row" data-status=row.status.as_str() title=row.message.clone().unwrap_or_default()>
                    <td>{row.node.clone()}</td>
                    <td>{row.direction.as_str()}</td>
                    <td>{rate(row.scrape_mean_bytes_per_s)}</td>
                    <td>{rate(row.scrape_peak_bytes_per_s)}</td>
                    <td>{rate(row.burst_peak_bytes_per_s)}</td>
                    <td>{row.seconds_above.map_or_else(|| "unknown".to_string(), |s| format!("{s:.1} s"))}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="bursts" data-testid="bursts">
            <h3>"RDMA micro-bursts"</h3>
            <p class="muted">{format!(
                "100 ms peaks from the node agent next to the 15 s scrape view; threshold {}. \"unknown\" where a node exports counters only: a burst shorter than a scrape cannot be seen in them.",
                charts::human(threshold, "B/s")
            )}</p>
            <div class="table-wrap"><table class="compact">
                <thead><tr><th scope="col">"Node"</th><th scope="col">"Dir"</th><th scope="col">"Scrape mean"</th><th scope="col">"Scrape peak"</th><th scope="col">"100 ms peak"</th><th scope="col">"Time above"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table></div>
        </section>
    }
}

/// The report's charts, drawn by [`charts::for_report`]. In the browser, hovering one shows the
/// moment and the lines' values there under every chart (crosshairs linked), and dragging across one
/// zooms them all to that range ([`crate::chart_hover`]).
#[component]
fn ReportCharts(
    charts: Vec<charts::Chart>,
    queries: Vec<wire::ChartQuery>,
    dashboard: Option<String>,
) -> impl IntoView {
    let zone = crate::clock::use_zone();
    let container = NodeRef::<leptos::html::Div>::new();
    let query = leptos_router::hooks::use_query_map();
    let location = leptos_router::hooks::use_location();
    let zoomed = query.with_untracked(|q| q.get("from").is_some() && q.get("to").is_some());
    // The link to the same page with the zoom set to `range` (or cleared).
    let zoom_href = move |range: Option<(i64, i64)>| {
        let mut pairs: Vec<(String, String)> = query.with_untracked(|q| {
            q.clone()
                .into_iter()
                .filter(|(name, _)| name != "from" && name != "to")
                .map(|(n, v)| (n.into_owned(), v))
                .collect()
        });
        if let Some((from, to)) = range {
            pairs.push(("from".into(), from.to_string()));
            pairs.push(("to".into(), to.to_string()));
        }
        let pairs: Vec<(&str, String)> = pairs.iter().map(|(name, value)| (name.as_str(), value.clone())).collect();
        format!("{}?{}", location.pathname.get_untracked(), crate::query::encode(&pairs))
    };
    let drag = StoredValue::new(None::<i64>);
    let on_move = move |event: leptos::ev::MouseEvent| {
        #[cfg(target_arch = "wasm32")]
        if let Some(element) = container.get_untracked() {
            let at = crate::chart_hover::browser::moment(&event);
            crate::chart_hover::browser::show(&element, at, zone);
            if let (Some(from), Some(to)) = (drag.get_value(), at) {
                crate::chart_hover::browser::band(&event, from, to);
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        let _ = (event, zone, drag);
    };
    let on_leave = move |_: leptos::ev::MouseEvent| {
        #[cfg(target_arch = "wasm32")]
        if let Some(element) = container.get_untracked() {
            crate::chart_hover::browser::show(&element, None, zone);
        }
    };
    let on_down = move |event: leptos::ev::MouseEvent| {
        #[cfg(target_arch = "wasm32")]
        if let Some(at) = crate::chart_hover::browser::moment(&event) {
            event.prevent_default();
            drag.set_value(Some(at));
        }
        #[cfg(not(target_arch = "wasm32"))]
        let _ = event;
    };
    let navigate = leptos_router::hooks::use_navigate();
    let on_up = move |event: leptos::ev::MouseEvent| {
        let Some(from) = drag.get_value() else { return };
        drag.set_value(None);
        #[cfg(target_arch = "wasm32")]
        if let Some(to) = crate::chart_hover::browser::moment(&event) {
            // A click is not a drag: at least a minute of range.
            if (to - from).abs() >= 60 {
                let options = leptos_router::NavigateOptions { scroll: false, ..Default::default() };
                navigate(&zoom_href(Some((from.min(to), from.max(to)))), options);
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        let _ = (event, from, &navigate);
    };
    let figures = charts
        .into_iter()
        .map(|chart| {
            view! {
                <figure class="chart-box" data-testid="report-chart" data-chart=chart.kind>
                    <figcaption>{chart.title}</figcaption>
                    <div inner_html=chart.svg></div>
                    <p class="readout" data-testid="chart-readout" aria-live="polite"></p>
                    <ChartLinks metrics=chart.metrics queries=queries.clone() />
                </figure>
            }
        })
        .collect_view();
    view! {
        <p class="muted chart-hint">
            "Hover a chart for its values at that moment; drag across one to zoom all of them. "
            {zoomed.then(|| view! { <a href=zoom_href(None) data-testid="zoom-reset">"Show the whole job"</a> })}
            {dashboard.map(|href| view! {
                <a href=href target="_blank" rel="noopener" data-testid="report-dashboard">"The job's Grafana dashboard"</a>
            })}
        </p>
        <div
            class="charts"
            data-testid="report-charts"
            node_ref=container
            on:mousemove=on_move
            on:mouseleave=on_leave
            on:mousedown=on_down
            on:mouseup=on_up
        >
            {figures}
        </div>
    }
}

/// Under a chart: per metric it draws, the PromQL it was drawn from (over the job's window) and links
/// that open that query in vmui and Grafana Explore, where the site has them.
#[component]
fn ChartLinks(metrics: Vec<String>, queries: Vec<wire::ChartQuery>) -> impl IntoView {
    let labelled = metrics.len() > 1;
    // The browser's zone, once the page runs in one: the vmui links' end is rewritten in it.
    let browser = RwSignal::new(None::<crate::clock::Zone>);
    Effect::new(move |_| browser.set(crate::clock::browser_zone()));
    let links = metrics
        .iter()
        .filter_map(|metric| queries.iter().find(|query| query.metric == *metric))
        .map(|query| {
            let label = labelled.then(|| format!("{}: ", query.metric.replace('_', " ")));
            view! {
                <span class="chart-query" data-metric=query.metric.clone()>
                    {label}
                    {query.vmui_url.clone().map(|href| {
                        let end = query.end.timestamp();
                        let href = move || browser.get().map_or_else(|| href.clone(), |zone| vmui_in_zone(&href, end, zone));
                        view! { <a href=href target="_blank" rel="noopener" data-testid="chart-vmui">"vmui"</a> }
                    })}
                    {query.grafana_url.clone().map(|href| view! {
                        <a href=href target="_blank" rel="noopener" data-testid="chart-grafana">"Grafana"</a>
                    })}
                    <details>
                        <summary>"PromQL"</summary>
                        <code data-testid="chart-query">{query.query.clone()}</code>
                    </details>
                </span>
            }
        })
        .collect_view();
    view! { <div class="chart-links" data-testid="chart-links">{links}</div> }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vmui_links_end_is_rewritten_in_the_browsers_zone_and_nothing_else_changes() {
        let href = "http://vm:8428/vmui/#/?g0.expr=up&g0.range_input=3600s&g0.end_input=2026-11-30T12%3A00%3A00&g0.step_input=60s";
        let tokyo: crate::clock::Zone = "Asia/Tokyo".parse().expect("a zone");
        assert_eq!(
            vmui_in_zone(href, 1_796_040_000, tokyo),
            "http://vm:8428/vmui/#/?g0.expr=up&g0.range_input=3600s&g0.end_input=2026-11-30T21%3A00%3A00&g0.step_input=60s"
        );
        assert_eq!(vmui_in_zone(href, 1_796_040_000, crate::clock::Zone::UTC), href);
        assert_eq!(vmui_in_zone("http://vm/vmui/", 0, tokyo), "http://vm/vmui/", "no end, nothing to rewrite");
    }
}
