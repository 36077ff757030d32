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
                kind: "attribution_uncertain".into(),
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
        kind: finding.kind.to_string(),
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
mod tests {
    use super::super::fixtures::{END, START, at, failed_job, gathered, reporter};
    use super::super::{ending_of, unassembled, wire_map};
    use super::*;
    use crate::domain::report::AttributionRule;
    use crate::domain::tres::{TresCatalog, TresId, TresKind};
    use crate::domain::verdicts::GPU_VERDICT_KINDS;

    fn catalog() -> TresCatalog {
        let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
        TresCatalog::new([kind(1, "cpu", ""), kind(4, "node", ""), kind(1001, "gres", "gpu")])
    }

    /// The report before assembly, as the report maker starts it.
    fn empty_report() -> wire::JobReport {
        let job = wire_map::job(&failed_job(), &catalog(), "lab", END as u64);
        unassembled(job, wire::ReportSource::Final, at(END), Some((at(START), at(END))))
    }

    #[test]
    fn totals_add_up_over_the_attributed_gpus() {
        let mut report = empty_report();
        reporter().fill(&mut report, &failed_job(), gathered(), at(END), 120);
        let totals = &report.totals;
        assert_eq!(report.gpus.len(), 16);
        assert_eq!((report.metrics.status.as_str(), report.metrics.step_s), ("ok", 60));
        assert!((totals.gpu_hours - 16.0).abs() < 1e-9, "16 GPUs for an hour");
        assert!((totals.idle_gpu_hours - 2.0).abs() < 1e-9, "GPU 0 of each node idled the whole hour");
        assert_eq!(totals.mean_gpu_util, Some(35.0));
        assert_eq!(totals.mean_tensor_active, Some(17.5));
        assert!(totals.energy_kwh.is_some_and(|kwh| (kwh - 4.8).abs() < 1e-9), "16 × 300 W × 1 h");
        assert_eq!(totals.node_power_w, Some(4000.0));
        assert!(totals.node_energy_kwh.is_some_and(|kwh| (kwh - 4.0).abs() < 1e-9), "4 kW for the job's hour");
        let gpu0 = &report.gpus[0];
        assert_eq!((gpu0.node.as_str(), gpu0.gpu, gpu0.attribution.as_str()), ("gpu001", 0, "whole_node"));
        assert_eq!(gpu0.series.iter().find(|s| s.metric == "gpu_util").map(|s| s.points.len()), Some(60));
    }

    #[test]
    fn a_job_shorter_than_a_step_is_drawn_from_its_own_samples_or_not_at_all() {
        // A 4-second job read at 15-second steps: the range's one bucket reaches back before its start.
        let mut gathered = gathered();
        (gathered.step_s, gathered.window_s) = (15, 4);
        for entry in gathered.data.values_mut() {
            entry.timelines.insert("gpu_util".into(), vec![(END, 99.0)]);
        }
        // GPU 1 of gpu001 had a sample in the job's window; the others none.
        if let Some(node) = gathered.network.get_mut("gpu001") {
            node.timelines.insert("node_power".into(), vec![(END, 9000.0)]);
        }
        let sampled = |node: &str, index: u16| node == "gpu001" && index == 1;
        for (_, entry) in gathered.data.iter_mut().filter(|(gpu, _)| !sampled(&gpu.node, gpu.index)) {
            (entry.means, entry.maxes, entry.counts) = Default::default();
        }
        let mut report = empty_report();
        reporter().fill(&mut report, &failed_job(), gathered, at(END), 120);
        let others = report.gpus.iter().filter(|gpu| !sampled(&gpu.node, gpu.gpu));
        assert!(others.clone().all(|gpu| gpu.series.is_empty()), "no series without a sample in the window");
        assert_eq!(others.count(), 15);
        let one = report.gpus.iter().find(|gpu| sampled(&gpu.node, gpu.gpu)).expect("GPU 1");
        let series = one.series.iter().find(|series| series.metric == "gpu_util").expect("its utilisation");
        assert_eq!(series.points, [(END, 10.0)], "the window's own mean, never the bucket reaching before it");
        let node = report.nodes.iter().find(|node| node.node == "gpu001").expect("gpu001's signals");
        let power = node.series.iter().find(|series| series.metric == "node_power").expect("its power");
        assert_eq!(power.points, [(END, 4000.0)], "the node's too");
        assert!(node.summary.iter().all(|summary| summary.max == summary.mean), "no peak from before the job");
    }

    /// The report's shape, pinned: a change to any field's name, type or order shows up as a diff
    /// to review (`cargo insta review`). Two GPUs keep the snapshot readable.
    #[test]
    fn the_reports_shape_is_pinned() {
        let mut report = empty_report();
        let mut gathered = gathered();
        gathered.attributed.retain(|attributed| attributed.gpu.node == "gpu001" && attributed.gpu.index < 2);
        reporter().fill(&mut report, &failed_job(), gathered, at(END), 4);
        report.failure = Some(failure_analysis(&failed_job(), &ending_of(&failed_job()), Vec::new(), &report, at(END)));
        insta::assert_json_snapshot!(report, { ".generated_at" => "[generated_at]" });
    }

    #[test]
    fn idle_gpus_are_named_in_a_verdict() {
        let mut report = empty_report();
        reporter().fill(&mut report, &failed_job(), gathered(), at(END), 120);
        let idle = report.verdicts.iter().find(|verdict| verdict.kind == "idle_gpus");
        assert!(
            idle.is_some_and(|v| v.evidence.iter().any(|line| line.contains("gpu001 GPU 0"))),
            "{:?}",
            report.verdicts
        );
    }

    #[test]
    fn a_shared_nodes_gpus_are_listed_and_not_counted() {
        // gpu002 shared with other jobs, no record of which of its GPUs were the job's: all 8 listed.
        let mut gathered = gathered();
        gathered.whole_nodes = false;
        for attributed in gathered.attributed.iter_mut().filter(|attributed| attributed.gpu.node == "gpu002") {
            (attributed.rule, attributed.uncertain) = (AttributionRule::NodeOnly, true);
        }
        let mut report = empty_report();
        reporter().fill(&mut report, &failed_job(), gathered, at(END), 120);
        let totals = &report.totals;
        assert_eq!(report.gpus.len(), 16, "every GPU of the shared node is listed");
        assert!((totals.gpu_hours - 16.0).abs() < 1e-9);
        assert!((totals.unattributed_gpu_hours - 8.0).abs() < 1e-9, "gpu002's 8 GPU hours are not placed");
        assert!((totals.idle_gpu_hours - 1.0).abs() < 1e-9, "only gpu001's idle GPU 0 counts: {totals:?}");
        assert_eq!(totals.mean_gpu_util, Some(35.0));
        assert!(totals.energy_kwh.is_some_and(|kwh| (kwh - 2.4).abs() < 1e-9), "8 × 300 W × 1 h");
        assert_eq!((totals.node_power_w, totals.node_energy_kwh), (None, None), "gpu002's BMC reads other jobs too");
        let idle = report.verdicts.iter().find(|verdict| verdict.kind == "idle_gpus").expect("gpu001 GPU 0 idled");
        assert!(idle.message.starts_with("1 of 8 GPUs"), "{idle:?}");
        assert!(idle.evidence.iter().all(|line| !line.contains("gpu002")), "{idle:?}");
        let uncertain = report.verdicts.iter().find(|verdict| verdict.kind == "attribution_uncertain");
        assert!(uncertain.is_some_and(|v| v.evidence.len() == 8 && v.message.contains("none counts")), "{uncertain:?}");

        // Nothing known of the job's GPUs at all: no mean, no energy, no GPU finding but the uncertainty.
        let mut gathered = super::super::fixtures::gathered();
        gathered
            .attributed
            .iter_mut()
            .for_each(|attributed| (attributed.rule, attributed.uncertain) = (AttributionRule::NodeOnly, true));
        let mut report = empty_report();
        reporter().fill(&mut report, &failed_job(), gathered, at(END), 120);
        let totals = &report.totals;
        assert!((totals.unattributed_gpu_hours - totals.gpu_hours).abs() < 1e-9 && totals.idle_gpu_hours == 0.0);
        assert_eq!((totals.mean_gpu_util, totals.energy_kwh, totals.peak_memory_mib), (None, None, None));
        let kinds: Vec<&str> = report.verdicts.iter().map(|verdict| verdict.kind.as_str()).collect();
        assert!(kinds.iter().all(|kind| !GPU_VERDICT_KINDS.contains(kind)), "{kinds:?}");
        assert!(kinds.contains(&"attribution_uncertain"), "{kinds:?}");
    }

    fn gpu(node: &str, index: u16, xids: &[(i64, u32)]) -> wire::GpuReport {
        wire::GpuReport {
            node: node.into(),
            gpu: index,
            uuid: None,
            attribution: wire::Attribution::WholeNode,
            uncertain: false,
            summary: Vec::new(),
            series: Vec::new(),
            xid_events: xids.iter().map(|&(t, xid)| wire::XidEvent { at: at(t), xid, message: None }).collect(),
        }
    }

    /// A report whose metrics were read, with `gpus`.
    fn report_with(gpus: Vec<wire::GpuReport>) -> wire::JobReport {
        let mut report = empty_report();
        report.metrics.status = wire::MetricsState::Ok;
        report.gpus = gpus;
        report
    }

    #[test]
    fn a_gpu_that_fell_off_the_bus_is_the_infrastructures_fault() {
        let record = failed_job();
        let alone = failure_analysis(
            &record,
            &ending_of(&record),
            Vec::new(),
            &report_with(vec![gpu("gpu002", 5, &[])]),
            at(END),
        );
        assert_eq!(alone.blame, wire::Blame::Application, "exit 1 with nothing wrong around it: {}", alone.reason);
        let broken = report_with(vec![gpu("gpu002", 5, &[(END - 120, 79)])]);
        let analysis = failure_analysis(&record, &ending_of(&record), Vec::new(), &broken, at(END));
        assert_eq!(analysis.blame, wire::Blame::Infrastructure, "{}", analysis.reason);
        let sources: Vec<&str> = analysis.evidence.iter().map(|fact| fact.source.as_str()).collect();
        assert_eq!(sources, ["xid", "slurm"], "evidence in time order, Slurm's own record last");
        assert!(analysis.evidence[0].detail.contains("fallen off the bus"));
        assert!(analysis.evidence[1].detail.contains("exited with code 1"), "{:?}", analysis.evidence[1]);
    }

    #[test]
    fn a_node_that_lost_its_gpus_is_one_fact_naming_them() {
        let record = failed_job();
        let gpus = (0..8).map(|index| gpu("gpu002", index, &[(END - 120 + i64::from(index), 79)])).collect();
        let analysis = failure_analysis(&record, &ending_of(&record), Vec::new(), &report_with(gpus), at(END));
        let xids: Vec<&wire::FailureEvidence> =
            analysis.evidence.iter().filter(|fact| fact.source == wire::EvidenceSource::Xid).collect();
        assert_eq!(xids.len(), 1, "{xids:?}");
        assert_eq!(xids[0].place, "gpu002");
        assert!(xids[0].detail.starts_with("XID 79 on 8 GPUs (0-7): "), "{}", xids[0].detail);
    }

    #[test]
    fn a_job_without_telemetry_is_not_told_nothing_went_wrong() {
        let record = failed_job();
        let mut report = empty_report();
        report.metrics.status = wire::MetricsState::NoData;
        let analysis = failure_analysis(&record, &ending_of(&record), Vec::new(), &report, at(END));
        assert!(analysis.reason.contains("could not be looked for"), "{}", analysis.reason);
    }

    #[test]
    fn lustre_io_prefers_the_jobs_own_statistics() {
        let mut io: IoReadings = BTreeMap::new();
        io.insert((IoSource::Nodes, "lustre_read"), (vec![(START + 60, 9e9)], Some(9e9)));
        io.insert((IoSource::JobStats, "lustre_read"), (vec![(START + 60, 2e6), (START + 120, 4e6)], Some(3e6)));
        let (source, report) = io_report(&io, 3600, 120, None).unwrap_or_else(|| panic!("an I/O report"));
        assert_eq!(source, IoSource::JobStats);
        assert!((report.read_bytes - 3e6 * 3600.0).abs() < 1e-3, "the mean rate over the window");
        assert_eq!(report.summary.iter().find(|s| s.metric == "lustre_read").map(|s| s.max), Some(4e6));
        assert!(io_report(&BTreeMap::new(), 3600, 120, None).is_none(), "no exporter, no I/O section");
    }

    #[test]
    fn bursts_are_unknown_where_only_counters_exist() {
        let mut report = empty_report();
        report.nodes.push(wire::NodeNetworkReport {
            node: "gpu001".into(),
            summary: vec![wire::MetricSummary {
                metric: "rdma_tx".into(),
                unit: "B/s".into(),
                mean: 1e9,
                max: 2e9,
                samples: 0,
            }],
            series: Vec::new(),
        });
        let mut peaks: BurstReadings = BTreeMap::new();
        peaks.insert(("gpu002".into(), "rx"), BurstReading { peak: Some(4.9e10), seconds_above: Some(3.0) });
        let rows = reporter().bursts(&report, &["gpu001".into(), "gpu002".into()], peaks);
        let row =
            |node: &str, direction: wire::Direction| rows.iter().find(|r| r.node == node && r.direction == direction);
        assert!(
            row("gpu001", wire::Direction::Tx)
                .is_some_and(|r| r.status == wire::BurstStatus::Unknown && r.message.is_some())
        );
        assert!(
            row("gpu002", wire::Direction::Rx)
                .is_some_and(|r| r.status == wire::BurstStatus::Measured && r.seconds_above == Some(3.0))
        );
        assert!(
            row("gpu001", wire::Direction::Rx).is_none() && row("gpu002", wire::Direction::Tx).is_none(),
            "no reading, no row"
        );
    }
}
