//! The report's assembly: what was gathered becomes the wire report (per-GPU summaries and
//! timelines, node signals, Lustre I/O, totals, verdicts), the failure analysis of a job that ended
//! badly, and the micro-bursts per node. Pure: unit-tested on fixtures.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use slurmlens_wire as wire;

use super::Reporter;
use super::gather::{BurstReading, BurstReadings, Gathered, GpuData, IoReadings, NodeData};
use crate::domain::blame::{self, Ending, Evidence, Exposure};
use crate::domain::coverage::Coverage;
use crate::domain::gpu::format_gpu_indices;
use crate::domain::job::JobRecord;
use crate::domain::node_signals::{self, IoSource, NodeFacts};
use crate::domain::report::{self, AttributedGpu, Summary};
use crate::domain::state::JobStateBase;
use crate::domain::time::epoch;
use crate::domain::verdicts::{self, Finding, GpuFacts};

impl Reporter {
    pub(super) fn fill(
        &self,
        report: &mut wire::JobReport,
        record: &JobRecord,
        gathered: Gathered,
        end: DateTime<Utc>,
        points: usize,
    ) {
        let catalog = &self.settings.catalog;
        let Gathered { attributed, data, network, io, whole_nodes, step_s, window_s, reads, reads_note, .. } = gathered;
        let hours = window_s as f64 / 3600.0;
        // Buckets end at the job's end and step back; a job shorter than a step has one bucket, which
        // reaches back before its start: its series are then drawn from the window's own means.
        let inside = window_s >= step_s;
        let mut facts = Vec::new();
        let mut energy_mj = 0.0;
        let mut energy_known = false;
        let mut idle_hours = 0.0;
        let mut peak_memory: Option<f64> = None;
        let mut capacity: Option<f64> = None;
        // The sampled part of the run, over the GPUs known to be the job's: GPU-seconds, first, last.
        let mut sampled = Sampled::default();
        for AttributedGpu { gpu, rule, uncertain } in &attributed {
            let entry = data.get(gpu);
            let summary_of = |key: &str| -> Option<Summary> {
                let entry = entry?;
                Some(Summary {
                    mean: *entry.means.get(key)?,
                    // A peak is never made up: without one (gather reads raw when the rules lack
                    // it) the metric is left out rather than sent as `null`, which no reader takes.
                    max: *entry.maxes.get(key).filter(|max| max.is_finite())?,
                    samples: entry.counts.get(key).or_else(|| entry.counts.values().next()).copied().unwrap_or(0.0)
                        as u64,
                })
            };
            let summary: Vec<wire::MetricSummary> = catalog
                .gpu_metrics
                .iter()
                .filter_map(|spec| {
                    let summary = summary_of(&spec.key)?;
                    Some(wire::MetricSummary {
                        metric: spec.key.clone(),
                        unit: spec.unit.clone(),
                        mean: summary.mean,
                        max: summary.max,
                        samples: summary.samples,
                    })
                })
                .collect();
            let series: Vec<wire::MetricSeries> = catalog
                .gpu_metrics
                .iter()
                .filter_map(|spec| {
                    let entry = entry?;
                    // Drawn only where the job's own window has samples.
                    let mean = *entry.means.get(&spec.key)?;
                    let timeline = entry.timelines.get(&spec.key).filter(|timeline| inside && !timeline.is_empty());
                    // A job shorter than a step (or whose last bucket is still being written) has no
                    // range point of its own; its exact mean over the window stands for it at its end.
                    let points = match timeline {
                        Some(timeline) => report::downsample(timeline, points),
                        None => vec![(end.timestamp(), mean)],
                    };
                    Some(wire::MetricSeries { metric: spec.key.clone(), unit: spec.unit.clone(), points })
                })
                .collect();
            let fb_used = summary_of("fb_used");
            let gpu_capacity = entry.and_then(|entry| {
                let used_last = entry.timelines.get("fb_used").and_then(|t| t.last()).map(|&(_, v)| v)?;
                Some(used_last + entry.fb_free?)
            });
            let xid_events: Vec<wire::XidEvent> = entry
                .map(|entry| {
                    entry
                        .xid
                        .iter()
                        .map(|(at, xid, message)| wire::XidEvent {
                            at: epoch(u64::try_from(*at).unwrap_or(0)).unwrap_or_default(),
                            xid: *xid,
                            message: message.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            report.gpus.push(wire::GpuReport {
                node: gpu.node.clone(),
                gpu: gpu.index,
                uuid: entry.and_then(|entry| entry.uuid.clone()),
                attribution: attribution(*rule),
                uncertain: *uncertain,
                summary,
                series,
                xid_events,
            });
            // A GPU that may be another job's is listed, never counted: the totals and the GPU findings
            // are about the GPUs known to be the job's.
            if *uncertain {
                continue;
            }
            let covered_s = entry.map_or(0, |entry| sampled.add(entry, step_s, window_s, inside, end.timestamp()));
            // Idle over the sampled time only: the share of samples under the threshold is never
            // extrapolated to a part of the run no sample covers.
            if let Some(share) = entry.and_then(|entry| entry.idle_share) {
                idle_hours += share * covered_s as f64 / 3600.0;
            }
            if let Some(energy) = entry.and_then(|entry| entry.energy_mj) {
                energy_mj += energy;
                energy_known = true;
            }
            if let Some(used) = fb_used {
                peak_memory = Some(peak_memory.map_or(used.max, |peak: f64| peak.max(used.max)));
            }
            if let Some(gpu_capacity) = gpu_capacity {
                capacity = Some(capacity.map_or(gpu_capacity, |c: f64| c.max(gpu_capacity)));
            }
            facts.push(GpuFacts {
                gpu: gpu.clone(),
                gpu_util: summary_of("gpu_util"),
                tensor_active: summary_of("tensor_active"),
                fb_used,
                fb_capacity_mib: gpu_capacity,
                xid: entry.map(|entry| entry.xid.iter().map(|(at, xid, _)| (*at, *xid)).collect()).unwrap_or_default(),
            });
        }
        // RDMA first, then the node beside its GPUs; a signal whose exporter is not scraped is absent.
        let node_keys: Vec<(String, String)> = catalog
            .rdma_metrics
            .iter()
            .map(|spec| (spec.key.clone(), spec.unit.clone()))
            .chain(node_signals::NODE_SIGNALS.into_iter().map(|(key, unit)| (key.to_string(), unit.to_string())))
            .collect();
        for node in record.nodes.hosts() {
            let Some(entry) = network.get(node) else { continue };
            let timeline = |key: &str| entry.timelines.get(key).filter(|timeline| inside && !timeline.is_empty());
            let summary = node_keys
                .iter()
                .filter_map(|(key, unit)| {
                    let mean = *entry.means.get(key)?;
                    let max = timeline(key).map_or(mean, |t| t.iter().map(|&(_, v)| v).fold(mean, f64::max));
                    Some(wire::MetricSummary { metric: key.clone(), unit: unit.clone(), mean, max, samples: 0 })
                })
                .collect();
            let series = node_keys
                .iter()
                .filter_map(|(key, unit)| {
                    let points = match timeline(key) {
                        Some(timeline) => report::downsample(timeline, points),
                        None if inside => return None,
                        None => vec![(end.timestamp(), *entry.means.get(key)?)],
                    };
                    Some(wire::MetricSeries { metric: key.clone(), unit: unit.clone(), points })
                })
                .collect();
            report.nodes.push(wire::NodeNetworkReport { node: node.clone(), summary, series });
        }
        let io = io_report(&io, window_s, points, (!inside).then_some(end));
        // The job's mean Lustre read rate and whose it is, for the findings.
        let lustre_read = io
            .as_ref()
            .and_then(|(source, io)| Some((io.summary.iter().find(|s| s.metric == "lustre_read")?.mean, *source)));
        report.io = io.map(|(_, io)| io);
        let with_data = report.gpus.iter().filter(|gpu| !gpu.summary.is_empty()).count();
        let mean_of = |key: &str| -> Option<f64> {
            let values: Vec<f64> = facts
                .iter()
                .filter_map(|fact| match key {
                    "gpu_util" => fact.gpu_util.map(|s| s.mean),
                    _ => fact.tensor_active.map(|s| s.mean),
                })
                .collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        let job_gpus = report.job.alloc_gpus as f64;
        // The job's GPUs that no record places: those on its shared nodes (of which every GPU is listed).
        let unattributed =
            if attributed.iter().any(|a| a.uncertain) { (job_gpus - facts.len() as f64).max(0.0) } else { 0.0 };
        report.totals = wire::ReportTotals {
            gpu_hours: job_gpus * hours,
            idle_gpu_hours: idle_hours,
            unattributed_gpu_hours: unattributed * hours,
            energy_kwh: energy_known.then(|| energy_mj / 3.6e9),
            peak_memory_mib: peak_memory,
            memory_capacity_mib: capacity,
            mean_gpu_util: mean_of("gpu_util"),
            mean_tensor_active: mean_of("tensor_active"),
            node_power_w: None,
            node_energy_kwh: None,
            coverage: sampled.coverage(facts.len(), window_s),
        };
        let job_nodes: Vec<(&str, &NodeData)> =
            record.nodes.hosts().iter().filter_map(|node| Some((node.as_str(), network.get(node)?))).collect();
        let gpu_util = attributed
            .iter()
            .filter(|a| !a.uncertain)
            .filter_map(|a| data.get(&a.gpu)?.timelines.get("gpu_util"))
            .map(Vec::as_slice);
        let node_facts = node_facts(report, &job_nodes, gpu_util, lustre_read, whole_nodes);
        // A BMC reads its whole node: the job's power only where it held its nodes whole.
        if whole_nodes {
            report.totals.node_power_w = node_facts.node_power_w;
            report.totals.node_energy_kwh = node_energy_kwh(&job_nodes, step_s, window_s, inside);
        }
        let ended_badly = blame::ended_badly(record.state.base(), record.time_start > 0);
        report.verdicts = verdicts::verdicts(&facts, ended_badly).into_iter().map(verdict).collect();
        report.verdicts.extend(node_signals::findings(&node_facts).into_iter().map(verdict));
        let running = !record.state.run_is_over();
        let start = end.timestamp() - i64::try_from(window_s).unwrap_or(0);
        if let Some(found) = sampled.span().and_then(|(first, last)| {
            let share = report.totals.coverage.as_ref().map_or(1.0, |c| c.share);
            verdicts::telemetry_gap(first, last, share, (start, end.timestamp()), step_s, running)
        }) {
            report.verdicts.push(verdict(found));
        }
        if attributed.iter().any(|a| a.uncertain) {
            report.verdicts.push(wire::Verdict {
                kind: wire::VerdictKind::AttributionUncertain,
                severity: wire::Severity::Info,
                message: "the job shared a node and no GPU record exists: every GPU of the node is shown, marked \
                     uncertain, and none counts in the job's figures or findings"
                    .into(),
                evidence: attributed
                    .iter()
                    .filter(|a| a.uncertain)
                    .map(|a| format!("{} gpu {}", a.gpu.node, a.gpu.index))
                    .collect(),
                next_step: None,
            });
        }
        let (status, message) = if attributed.is_empty() && report.job.alloc_gpus > 0 {
            (wire::MetricsState::NoData, Some("no GPU series were found on the job's nodes".to_string()))
        } else if with_data == 0 && !attributed.is_empty() {
            (wire::MetricsState::NoData, Some("no samples of the job's GPUs in its window".to_string()))
        } else {
            (wire::MetricsState::Ok, None)
        };
        report.window_end = Some(end);
        report.metrics = wire::MetricsStatus { status, message, step_s, reads, reads_note };
    }

    /// Bursts per node and direction: the agent's peaks next to the counters' average and highest
    /// scrape-to-scrape rate; "unknown" where only counters exist.
    pub(super) fn bursts(
        &self,
        report: &wire::JobReport,
        nodes: &[String],
        peaks: BurstReadings,
    ) -> Vec<wire::NodeBursts> {
        let settings = &self.settings.catalog.bursts;
        let threshold = settings.line_rate_bytes_per_s * settings.threshold;
        let mut rows = Vec::new();
        for node in nodes {
            let network = report.nodes.iter().find(|n| &n.node == node);
            for (direction, key) in [(wire::Direction::Tx, "rdma_tx"), (wire::Direction::Rx, "rdma_rx")] {
                let scrape = network.and_then(|n| n.summary.iter().find(|s| s.metric == key));
                let BurstReading { peak, seconds_above: above } =
                    peaks.get(&(node.clone(), direction.as_str())).copied().unwrap_or_default();
                if scrape.is_none() && peak.is_none() {
                    continue;
                }
                let measured = peak.is_some();
                rows.push(wire::NodeBursts {
                    node: node.clone(),
                    direction,
                    status: if measured { wire::BurstStatus::Measured } else { wire::BurstStatus::Unknown },
                    scrape_mean_bytes_per_s: scrape.map(|s| s.mean),
                    scrape_peak_bytes_per_s: scrape.map(|s| s.max),
                    burst_peak_bytes_per_s: peak,
                    seconds_above: if measured { Some(above.unwrap_or(0.0)) } else { None },
                    threshold_bytes_per_s: threshold,
                    message: (!measured).then(|| {
                        format!(
                            "only byte counters on this node: a burst shorter than a scrape is averaged away, so the \
                             peak is unknown (a node agent exporting {} would show it)",
                            if direction == wire::Direction::Tx {
                                settings.tx_peak.as_str()
                            } else {
                                settings.rx_peak.as_str()
                            }
                        )
                    }),
                });
            }
        }
        rows
    }
}

/// Per step, the mean of the series that have a point at it.
pub(super) fn mean_by_step<'a>(series: impl Iterator<Item = &'a [(i64, f64)]>) -> Vec<(i64, f64)> {
    let mut steps: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for points in series {
        for &(at, value) in points {
            let step = steps.entry(at).or_default();
            step.0 += value;
            step.1 += 1.0;
        }
    }
    steps.into_iter().map(|(at, (sum, n))| (at, sum / n)).collect()
}

/// What the node findings look at: the nodes' signals, and of the job's GPUs their idle share, power
/// and utilisation per step (`gpu_util`: their timelines, on the same step grid as the nodes').
pub(super) fn node_facts<'a>(
    report: &wire::JobReport,
    nodes: &[(&str, &NodeData)],
    gpu_util: impl Iterator<Item = &'a [(i64, f64)]>,
    lustre_read: Option<(f64, IoSource)>,
    whole_nodes: bool,
) -> NodeFacts {
    let over_nodes =
        |key: &str| -> Vec<f64> { nodes.iter().filter_map(|(_, entry)| entry.means.get(key).copied()).collect() };
    let mean = |values: Vec<f64>| (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    let sum = |values: Vec<f64>| (!values.is_empty()).then(|| values.iter().sum::<f64>());
    // GPU power is compared with node power over the nodes that report both.
    let powered: Vec<&str> =
        nodes.iter().filter(|(_, entry)| entry.means.contains_key("node_power")).map(|(node, _)| *node).collect();
    let gpu_power: Vec<f64> = report
        .gpus
        .iter()
        .filter(|gpu| powered.contains(&gpu.node.as_str()))
        .filter_map(|gpu| gpu.summary.iter().find(|s| s.metric == "power").map(|s| s.mean))
        .collect();
    // The steps in which the job's GPUs idled, against the nodes' iowait in the same steps.
    let util = mean_by_step(gpu_util);
    let iowait =
        mean_by_step(nodes.iter().filter_map(|(_, entry)| entry.timelines.get("cpu_iowait").map(Vec::as_slice)));
    let totals = &report.totals;
    NodeFacts {
        gpu_idle_share: {
            // Idle hours are counted over the sampled time: their share is of that time too.
            let known = totals
                .coverage
                .as_ref()
                .map_or(totals.gpu_hours - totals.unattributed_gpu_hours, |covered| covered.measured_gpu_hours);
            (known > 0.0).then(|| totals.idle_gpu_hours / known)
        },
        gpu_power_w: sum(gpu_power),
        node_power_w: sum(over_nodes("node_power")),
        whole_nodes,
        cpu_iowait_pct: mean(over_nodes("cpu_iowait")),
        io_pressure_pct: mean(over_nodes("io_pressure")),
        iowait_gpu_idle_vs_busy: node_signals::split_by_gpu_idle(&util, &iowait, verdicts::IDLE_UTIL_PCT),
        lustre_read_bytes_per_s: lustre_read,
        memory_pressure_pct: mean(over_nodes("memory_pressure")),
    }
}

/// The job's Lustre I/O: its own job statistics where the file system keeps them, else the clients of
/// its nodes; `None` when neither is scraped. `shorter_than_a_step`: the job's end, where its one bucket
/// reaches back before its start (its means are drawn there instead).
pub(super) fn io_report(
    io: &IoReadings,
    window_s: u64,
    points: usize,
    shorter_than_a_step: Option<DateTime<Utc>>,
) -> Option<(IoSource, wire::IoReport)> {
    let source = [IoSource::JobStats, IoSource::Nodes].into_iter().find(|source| {
        io.iter().any(|((from, _), (timeline, mean))| from == source && (mean.is_some() || !timeline.is_empty()))
    })?;
    let mut summary = Vec::new();
    let mut series = Vec::new();
    let mut totals = (0.0, 0.0);
    for (key, unit) in node_signals::IO_SIGNALS {
        let Some((timeline, window_mean)) = io.get(&(source, key)) else { continue };
        let timeline: &[(i64, f64)] = if shorter_than_a_step.is_some() { &[] } else { timeline };
        let mean = window_mean.unwrap_or(0.0);
        let max = timeline.iter().map(|&(_, v)| v).fold(mean, f64::max);
        summary.push(wire::MetricSummary { metric: key.to_string(), unit: unit.into(), mean, max, samples: 0 });
        let points = match (shorter_than_a_step, window_mean) {
            _ if !timeline.is_empty() => report::downsample(timeline, points),
            (Some(end), Some(mean)) => vec![(end.timestamp(), *mean)],
            _ => Vec::new(),
        };
        if !points.is_empty() {
            series.push(wire::MetricSeries { metric: key.to_string(), unit: unit.into(), points });
        }
        match key {
            "lustre_read" => totals.0 = mean * window_s as f64,
            "lustre_write" => totals.1 = mean * window_s as f64,
            _ => {}
        }
    }
    Some((
        source,
        wire::IoReport { source: io_source(source), read_bytes: totals.0, write_bytes: totals.1, summary, series },
    ))
}

/// The classification of a badly ended job from the evidence gathered, the XID errors on its GPUs and
/// Slurm's own record of its end, each fact weighed by the job's exposure to it, in time order.
pub(super) fn failure_analysis(
    record: &JobRecord,
    ending: &Ending,
    mut evidence: Vec<Evidence>,
    report: &wire::JobReport,
    end: DateTime<Utc>,
) -> wire::FailureAnalysis {
    evidence.extend(xid_evidence(&report.gpus));
    let start = report.window_start.map_or(end.timestamp(), |start| start.timestamp());
    let watched = report.metrics.status == wire::MetricsState::Ok;
    let exposure = Exposure {
        multi_node: record.nodes.hosts().len() > 1,
        rdma_bytes_per_s: busiest_rdma(&report.nodes),
        start,
        end: end.timestamp(),
        // A report archived before coverage was kept, or read without GPU samples but with the
        // nodes', counts as watched throughout, as it did then.
        telemetry: watched.then(|| match &report.totals.coverage {
            Some(covered) => {
                Coverage { from: covered.from.timestamp(), to: covered.to.timestamp(), share: covered.share }
            }
            None => Coverage { from: start, to: end.timestamp(), share: 1.0 },
        }),
    };
    let verdict = blame::classify(ending, evidence, &exposure);
    let mut listed: Vec<wire::FailureEvidence> = vec![wire::FailureEvidence {
        at: end,
        source: wire::EvidenceSource::Slurm,
        place: record.node_list.clone(),
        detail: match record.state.base() {
            // Slurm signals the tasks of a job it ends for a failed node: the signal is Slurm's, not a cause.
            JobStateBase::NodeFail | JobStateBase::BootFail => {
                format!("Slurm recorded {} and ended the job (exit code {})", record.state.name(), record.exit_code)
            }
            _ => format!(
                "Slurm recorded {}: the program {} (exit code {})",
                record.state.name(),
                record.exit_code.in_words(),
                record.exit_code
            ),
        },
        strength: wire::EvidenceStrength::Fact,
    }];
    listed.extend(verdict.evidence.iter().map(|fact| wire::FailureEvidence {
        at: epoch(u64::try_from(fact.at).unwrap_or(0)).unwrap_or(end),
        source: fact.source,
        place: fact.place.clone(),
        detail: fact.detail.clone(),
        strength: fact.strength.wire(),
    }));
    listed.sort_by_key(|fact| fact.at);
    wire::FailureAnalysis { blame: blame_of(verdict.blame), reason: verdict.reason, evidence: listed }
}

/// One fact per node and XID code, naming the GPUs it showed on: "8 GPUs of gpu073 fell off the bus"
/// is one fault of one node, not eight.
fn xid_evidence(gpus: &[wire::GpuReport]) -> Vec<Evidence> {
    let mut seen: BTreeMap<(&str, u32), (i64, i64, Vec<u16>)> = BTreeMap::new();
    for gpu in gpus {
        for event in &gpu.xid_events {
            let at = event.at.timestamp();
            let entry = seen.entry((gpu.node.as_str(), event.xid)).or_insert((at, at, Vec::new()));
            entry.0 = entry.0.min(at);
            entry.1 = entry.1.max(at);
            entry.2.push(gpu.gpu);
        }
    }
    seen.into_iter()
        .map(|((node, xid), (at, until, mut indices))| {
            indices.sort_unstable();
            indices.dedup();
            let (strength, meaning) = blame::xid_strength(xid);
            let gpus = match indices.len() {
                1 => format!("GPU {}", indices[0]),
                n => format!("{n} GPUs ({})", format_gpu_indices(&indices)),
            };
            Evidence {
                at,
                until,
                source: wire::EvidenceSource::Xid,
                place: node.to_string(),
                detail: format!("XID {xid} on {gpus}: {meaning}"),
                strength,
            }
        })
        .collect()
}

/// The busiest node's mean RDMA traffic in both directions, where the report read it.
fn busiest_rdma(nodes: &[wire::NodeNetworkReport]) -> Option<f64> {
    nodes
        .iter()
        .filter_map(|node| {
            let rates: Vec<f64> = node
                .summary
                .iter()
                .filter(|metric| metric.metric == "rdma_tx" || metric.metric == "rdma_rx")
                .map(|metric| metric.mean)
                .collect();
            (!rates.is_empty()).then(|| rates.iter().sum::<f64>())
        })
        .reduce(f64::max)
}

/// The micro-burst verdict over the burst rows the agents measured.
pub(super) fn burst_verdict(rows: &[wire::NodeBursts], window_s: f64) -> Option<wire::Verdict> {
    let ports: Vec<node_signals::PortBursts<'_>> = rows
        .iter()
        .filter_map(|row| {
            Some((row.node.as_str(), row.direction.as_str(), row.seconds_above?, row.burst_peak_bytes_per_s))
        })
        .collect();
    node_signals::burst_finding(&ports, window_s).map(verdict)
}

/// The sampled part of a run, summed over GPUs as they are read.
#[derive(Default)]
struct Sampled {
    gpu_seconds: u64,
    first: Option<i64>,
    last: Option<i64>,
}

impl Sampled {
    /// Adds one GPU's samples and answers the seconds they cover: a step per bucket with a point of
    /// any metric (the bucket `(t - step, t]` at `t`), or the whole window of a job shorter than a step
    /// that has a mean.
    fn add(&mut self, entry: &GpuData, step_s: u64, window_s: u64, inside: bool, end: i64) -> u64 {
        let buckets: std::collections::BTreeSet<i64> =
            entry.timelines.values().flat_map(|timeline| timeline.iter().map(|&(at, _)| at)).collect();
        // Buckets step back from the end: the window's remainder before the first whole bucket has
        // no bucket of its own, so a share of the buckets is a share of the window.
        let slots = (window_s / step_s.max(1)).max(1);
        let covered = if entry.means.is_empty() {
            0
        } else if !inside || (buckets.len() <= 1 && window_s <= 4 * step_s) {
            // A job shorter than a step, or one sample of a job a few steps long: the interval between
            // samples cannot be told from it, and the window's own mean stands for the job.
            window_s
        } else {
            // A bucket or two short of the window is its edges (a step that ends past the last sample,
            // a recording rule's bucket), not a gap: the samples cover the run.
            let counted = window_s * (buckets.len() as u64).min(slots) / slots;
            if counted + 2 * step_s >= window_s { window_s } else { counted }
        };
        if covered == 0 {
            return 0;
        }
        let step = i64::try_from(step_s).unwrap_or(0);
        let (first, last) = match (buckets.first(), buckets.last()) {
            (Some(first), Some(last)) if covered < window_s => (first - step, *last),
            _ => (end - i64::try_from(window_s).unwrap_or(0), end),
        };
        self.gpu_seconds += covered;
        self.first = Some(self.first.map_or(first, |f| f.min(first)));
        self.last = Some(self.last.map_or(last, |l| l.max(last)));
        covered
    }

    fn span(&self) -> Option<(i64, i64)> {
        Some((self.first?, self.last?))
    }

    /// The wire's coverage over `gpus` known GPUs for `window_s`.
    fn coverage(&self, gpus: usize, window_s: u64) -> Option<wire::TelemetryCoverage> {
        let (first, last) = self.span()?;
        let whole = gpus as f64 * window_s as f64;
        Some(wire::TelemetryCoverage {
            measured_gpu_hours: self.gpu_seconds as f64 / 3600.0,
            share: if whole > 0.0 { (self.gpu_seconds as f64 / whole).clamp(0.0, 1.0) } else { 0.0 },
            from: epoch(u64::try_from(first).unwrap_or(0)).unwrap_or_default(),
            to: epoch(u64::try_from(last).unwrap_or(0)).unwrap_or_default(),
        })
    }
}

/// The job's nodes' energy from their BMCs: each node's mean power over the time its power samples
/// cover, never over the rest of the run.
fn node_energy_kwh(nodes: &[(&str, &NodeData)], step_s: u64, window_s: u64, inside: bool) -> Option<f64> {
    let energies: Vec<f64> = nodes
        .iter()
        .filter_map(|(_, entry)| {
            let watts = *entry.means.get("node_power")?;
            let covered = match entry.timelines.get("node_power") {
                Some(timeline) if inside => {
                    let slots = (window_s / step_s.max(1)).max(1);
                    window_s * (timeline.len() as u64).min(slots) / slots
                }
                _ => window_s,
            };
            Some(watts * covered as f64 / 3600.0 / 1e3)
        })
        .collect();
    (!energies.is_empty()).then(|| energies.iter().sum())
}

/// A verdict as the wire carries it.
fn verdict(finding: Finding) -> wire::Verdict {
    wire::Verdict {
        kind: finding.kind,
        severity: finding.severity,
        message: finding.message,
        evidence: finding.evidence,
        next_step: finding.next_step,
    }
}

/// The wire's word for an attribution rule.
fn attribution(rule: report::AttributionRule) -> wire::Attribution {
    match rule {
        report::AttributionRule::HpcJobLabel => wire::Attribution::HpcJobLabel,
        report::AttributionRule::PluginRecord => wire::Attribution::PluginRecord,
        report::AttributionRule::WholeNode => wire::Attribution::WholeNode,
        report::AttributionRule::NodeOnly => wire::Attribution::NodeOnly,
    }
}

/// The wire's word for a verdict of the failure rules.
fn blame_of(blame: blame::Blame) -> wire::Blame {
    match blame {
        blame::Blame::Infrastructure => wire::Blame::Infrastructure,
        blame::Blame::Application => wire::Blame::Application,
        blame::Blame::Unknown => wire::Blame::Unknown,
    }
}

/// The wire's word for where a job's Lustre figures come from.
fn io_source(source: IoSource) -> wire::IoSource {
    match source {
        IoSource::JobStats => wire::IoSource::Jobstats,
        IoSource::Nodes => wire::IoSource::Nodes,
    }
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
