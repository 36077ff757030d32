//! The report's I/O: sends a plan's queries at once (with the series lookup that attributes GPUs to
//! the job), and sorts the answers per GPU and per node, with the fault evidence and burst readings
//! they carry.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;

use slurmlens_wire as wire;

use super::Reporter;
use super::plan::{FaultKind, FaultScope, Span, Tiles, Wanted};
use super::rules::{PartsRead, Reads};
use crate::app::node_metrics::{XidOnset, date_xids};
use crate::domain::blame::{Evidence, Strength};
use crate::domain::gpu::GpuRef;
use crate::domain::job::JobRecord;
use crate::domain::node_signals::IoSource;
use crate::domain::promql::{LabelName, Selector};
use crate::domain::report::{self, AttributedGpu, AttributionEvidence};
use crate::domain::rules::Bucket;
use crate::domain::series::SeriesCatalog;
use crate::sources::victoriametrics::{Series, VictoriaMetrics, VmError};

impl Reporter {
    /// One piece of evidence per fault series: where it showed first, and how bad it got.
    pub(super) fn fault_evidence(&self, kind: FaultKind, series: &Series, step_s: u64) -> Option<Evidence> {
        let catalog = &self.settings.catalog;
        let faults = &catalog.faults;
        let (first_at, _) = *series.points.first()?;
        let (last_at, _) = *series.points.last()?;
        let worst = series.points.iter().map(|&(_, v)| v).fold(f64::MIN, f64::max);
        let (source, mut strength, what) = kind.describe();
        let place = match kind {
            FaultKind::PingmeshLoss | FaultKind::PingmeshRtt => {
                let end = |label: &LabelName| series.labels.get(label.as_str()).cloned().unwrap_or_default();
                format!("{} → {}", end(&faults.pingmesh_source_label), end(&faults.pingmesh_target_label))
            }
            FaultKind::RemappedRows | FaultKind::RowRemapFailure => {
                let gpu = gpu_of(series, catalog)?;
                format!("{} gpu {}", gpu.node, gpu.index)
            }
            FaultKind::LinkDowned | FaultKind::SymbolErrors => node_of(series, &catalog.rdma_host_label)?,
        };
        let steps = series.points.len();
        let minutes = (steps as u64 * step_s).div_ceil(60);
        let detail = match kind {
            FaultKind::PingmeshLoss => {
                if worst >= faults.loss_threshold * 5.0 {
                    strength = Strength::Strong;
                }
                format!("{what} up to {:.1} % over {minutes} min", worst * 100.0)
            }
            FaultKind::PingmeshRtt => format!("{what} up to {:.0} µs over {minutes} min", worst / 1000.0),
            _ => format!("{what} ({worst:.0} in one step; {steps} step(s))"),
        };
        Some(Evidence { at: first_at, until: last_at, source, place, detail, strength })
    }

    /// Replaces each GPU's XID codes seen with the steps at which each code appeared.
    pub(super) async fn xid_timelines(
        &self,
        vm: &VictoriaMetrics,
        nodes: &[String],
        indices: &[u16],
        tiles: &Tiles,
        data: &mut BTreeMap<GpuRef, GpuData>,
    ) -> Result<(), VmError> {
        let catalog = &self.settings.catalog;
        let step_s = tiles.step_s;
        let xid = self.gpu_selectors(&catalog.xid, nodes, indices);
        let query =
            self.per_gpu("max", ", err_code, err_msg", &xid, |s| format!("max_over_time({s}[{step_s}s])"), " > 0");
        let answer = vm.query_range(&query, tiles.first_bucket_end(), tiles.end, step_s).await?;
        // A GPU the timeline does not name keeps what the window's query saw (at the window's end): a
        // VictoriaMetrics that has not yet made a just-written step searchable must not erase an XID.
        let mut timed = BTreeSet::new();
        for series in answer {
            let Some(gpu) = gpu_of(&series, catalog) else { continue };
            let Some(entry) = data.get_mut(&gpu) else { continue };
            if timed.insert(gpu) {
                entry.xid.clear();
            }
            // Only non-zero steps come back: a gap means the error cleared in between.
            let message = series.labels.get("err_msg").cloned();
            let mut previous: Option<(i64, u32)> = None;
            for &(at, value) in &series.points {
                let xid = value.max(0.0) as u32;
                let continues = previous.is_some_and(|(before, code)| {
                    code == xid && at - before <= i64::try_from(step_s).unwrap_or(i64::MAX)
                });
                if !continues {
                    entry.xid.push((at, xid, message.clone()));
                }
                previous = Some((at, xid));
            }
        }
        // Each onset at its own first sample, as the node page dates it: the same time on every page.
        let mut onsets: Vec<XidOnset> = data
            .iter()
            .flat_map(|(gpu, entry)| {
                entry.xid.iter().map(|&(at, code, _)| XidOnset { at, node: gpu.node.clone(), gpu: gpu.index, code })
            })
            .collect();
        if !onsets.is_empty() && date_xids(vm, catalog, nodes, &mut onsets, step_s).await.is_ok() {
            for (gpu, entry) in data.iter_mut() {
                let mine = onsets.iter().filter(|o| o.node == gpu.node && o.gpu == gpu.index);
                for (xid, dated) in entry.xid.iter_mut().zip(mine) {
                    xid.0 = dated.at;
                }
            }
        }
        for entry in data.values_mut() {
            entry.xid.sort_by_key(|&(at, _, _)| at);
        }
        Ok(())
    }

    /// The job's readings over `span`: through the recording rules where they cover the job, else
    /// raw. Rules that lack a part of some GPU's buckets (a site's max rule missing, a lost series)
    /// are not used: the report is read raw again and says why, so no figure is made up from the raw
    /// edges alone or left blank.
    pub(super) async fn gather(
        &self,
        vm: &VictoriaMetrics,
        record: &JobRecord,
        alloc_gpus: u64,
        recorded: &[(GpuRef, Option<String>)],
        span: Span,
        faults: &FaultScope,
    ) -> Result<Gathered, VmError> {
        let nodes: Vec<String> = record.nodes.hosts().to_vec();
        let indices = recorded_indices(recorded);
        let reads = self.rule_reads(vm, &nodes, &indices, span.start, span.end).await?;
        let gathered = self.gather_reading(vm, record, alloc_gpus, recorded, span, faults, reads).await?;
        // Empty when read raw: only the rules' parts are checked.
        if gathered.rules_incomplete.is_empty() {
            return Ok(gathered);
        }
        let note = format!(
            "read raw: the recording rules lack parts of {} for the job's GPUs",
            gathered.rules_incomplete.join(", ")
        );
        tracing::warn!(job = record.identity.id_job, %note, "recording rules incomplete");
        self.gather_reading(vm, record, alloc_gpus, recorded, span, faults, Reads::Raw(Some(note))).await
    }

    #[allow(clippy::too_many_arguments, reason = "gather's own arguments and the reads it chose")]
    async fn gather_reading(
        &self,
        vm: &VictoriaMetrics,
        record: &JobRecord,
        alloc_gpus: u64,
        recorded: &[(GpuRef, Option<String>)],
        span: Span,
        faults: &FaultScope,
        reads: Reads,
    ) -> Result<Gathered, VmError> {
        let Span { start, end, points } = span;
        let catalog = &self.settings.catalog;
        let nodes: Vec<String> = record.nodes.hosts().to_vec();
        // GPU records name the job's indices up front; without them every GPU of the nodes is fetched
        // and attribution (which needs the series lookup) picks among them, so nothing waits on it.
        let indices = recorded_indices(recorded);
        let mut step_s = self.step_s(start, end, points);
        if let Reads::Rules(split) = &reads {
            // Timelines read from the rules step over whole buckets: whole hours where the hourly rules
            // are read and the step spans an hour or more. Rounded up, never down: more points than
            // asked would be merged two by two afterwards, leaving every other cell of a heat map blank.
            let bucket = match split.hours {
                Some(_) if step_s >= Bucket::Hour.seconds().unsigned_abs() => Bucket::Hour,
                _ => Bucket::FiveMinutes,
            };
            let length = bucket.seconds().unsigned_abs();
            step_s = step_s.div_ceil(length) * length;
        }
        // Buckets end at the job's end and step back, so every bucket lies inside the job.
        let tiles = Tiles::new(start, end, step_s);
        let window_s = tiles.window_s;
        let util = catalog.gpu_metrics.first().map(|spec| spec.name.clone()).unwrap_or_else(|| catalog.xid.clone());
        let lookups: Vec<String> = self.gpu_selectors(&util, &nodes, &[]).iter().map(Selector::to_string).collect();
        let plan = self.plan(record.identity.id_job, &nodes, &indices, &tiles, faults, &reads);
        let (found, answers) = futures::join!(
            join_all(lookups.iter().map(|selector| vm.series(selector, start, end))),
            join_all(plan.iter().map(|planned| planned.send(vm, &tiles)))
        );

        // Attribution: which GPUs report on these nodes, and which carry this job's hpc_job label.
        let mut evidence = AttributionEvidence {
            recorded: recorded.iter().map(|(gpu, _)| gpu.clone()).collect(),
            ..Default::default()
        };
        let mut uuids: BTreeMap<GpuRef, String> =
            recorded.iter().filter_map(|(gpu, uuid)| Some((gpu.clone(), uuid.clone()?))).collect();
        let job_id = record.identity.id_job.to_string();
        for labels in found.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().flatten() {
            let series = Series { labels, points: Vec::new() };
            let Some(gpu) = gpu_of(&series, catalog) else { continue };
            if series.labels.get(catalog.gpu_job_label.as_str()) == Some(&job_id) {
                evidence.labelled.push(gpu.clone());
            }
            if let Some(uuid) = series.labels.get(catalog.gpu_uuid_label.as_str()) {
                uuids.entry(gpu.clone()).or_insert_with(|| uuid.clone());
            }
            evidence.present.entry(gpu.node.clone()).or_default().insert(gpu.index);
        }
        // slurmdbd keeps the job's total; `--gres=gpu:N` is per node, so an even split is exact.
        let per_node = slurmlens_slurm::gpus::exact_gpus_per_node(alloc_gpus, nodes.len());
        let attributed = report::attribute(&nodes, per_node, &evidence);
        let wanted: BTreeSet<GpuRef> = attributed.iter().map(|a| a.gpu.clone()).collect();

        let mut data: BTreeMap<GpuRef, GpuData> = BTreeMap::new();
        let mut network: BTreeMap<String, NodeData> = BTreeMap::new();
        let mut fault_evidence: Vec<Evidence> = Vec::new();
        let mut bursts: BurstReadings = BTreeMap::new();
        let mut io: IoReadings = BTreeMap::new();
        let mut parts = PartsRead::default();
        for planned in &plan {
            if let Wanted::WindowPart(key, _, Some(bucket)) = &planned.what {
                parts.asked(key, *bucket);
            }
        }
        let node_labels = [
            &catalog.rdma_host_label,
            &catalog.node.host_label,
            &catalog.node.power_host_label,
            &catalog.lustre.host_label,
        ];
        for (planned, answer) in plan.iter().zip(answers) {
            for series in answer? {
                match &planned.what {
                    Wanted::Fault(kind) => {
                        fault_evidence.extend(self.fault_evidence(*kind, &series, step_s));
                        continue;
                    }
                    Wanted::Io(key, source, mean) => {
                        let entry = io.entry((*source, key)).or_default();
                        if *mean {
                            entry.1 = series.points.last().map(|&(_, v)| v);
                        } else {
                            entry.0 = series.points.clone();
                        }
                        continue;
                    }
                    Wanted::BurstPeak(direction) | Wanted::BurstSeconds(direction) => {
                        let Some(node) = node_of(&series, &catalog.rdma_host_label) else { continue };
                        let value = series.points.last().map(|&(_, v)| v);
                        let entry = bursts.entry((node, direction)).or_default();
                        if matches!(planned.what, Wanted::BurstPeak(_)) {
                            entry.peak = value;
                        } else {
                            entry.seconds_above = value;
                        }
                        continue;
                    }
                    _ => {}
                }
                if let Wanted::NodeTimeline(key, scale) | Wanted::NodeMean(key, scale) = &planned.what {
                    let Some(node) = node_of_any(&series, &node_labels) else { continue };
                    let entry = network.entry(node).or_default();
                    if matches!(planned.what, Wanted::NodeTimeline(..)) {
                        entry
                            .timelines
                            .insert(key.clone(), series.points.iter().map(|&(t, v)| (t, v * scale)).collect());
                    } else {
                        entry.means.insert(key.clone(), series.points.last().map_or(0.0, |&(_, v)| v * scale));
                    }
                    continue;
                }
                let Some(gpu) = gpu_of(&series, catalog) else { continue };
                if !wanted.contains(&gpu) {
                    continue;
                }
                let entry = data.entry(gpu.clone()).or_default();
                let last = series.points.last().map(|&(_, value)| value);
                match &planned.what {
                    Wanted::Buckets(key, scale) => {
                        entry
                            .timelines
                            .insert(key.clone(), series.points.iter().map(|&(t, v)| (t, v * scale)).collect());
                    }
                    Wanted::Window(key, scale) => {
                        let Some(value) = last else { continue };
                        match series.labels.get("rollup").map(String::as_str) {
                            Some("avg_over_time") => entry.means.insert(key.clone(), value * scale),
                            Some("max_over_time") => entry.maxes.insert(key.clone(), value * scale),
                            Some("count_over_time") => entry.counts.insert(key.clone(), value),
                            _ => None,
                        };
                    }
                    Wanted::WindowPart(key, scale, piece) => parts.add(gpu, key, *scale, *piece, &series),
                    Wanted::IdleShare => entry.idle_share = last,
                    Wanted::FbFree => entry.fb_free = last,
                    Wanted::EnergyAtEnd => entry.energy_mj = last,
                    Wanted::EnergyAtStart => entry.energy_start_mj = last,
                    Wanted::XidSeen => {
                        let code = last.unwrap_or(0.0).max(0.0) as u32;
                        entry.xid.push((end.timestamp(), code, series.labels.get("err_msg").cloned()));
                    }
                    Wanted::NodeTimeline(..)
                    | Wanted::NodeMean(..)
                    | Wanted::Io(..)
                    | Wanted::Fault(_)
                    | Wanted::BurstPeak(_)
                    | Wanted::BurstSeconds(_) => {}
                }
            }
        }
        let rules_incomplete = parts.incomplete();
        parts.combine(&mut data);
        for (gpu, uuid) in &uuids {
            if let Some(entry) = data.get_mut(gpu) {
                entry.uuid.get_or_insert_with(|| uuid.clone());
            }
        }
        for entry in data.values_mut() {
            entry.summarise();
        }
        // Only where an XID was set: when, per step (a second, rare round trip).
        if data.values().any(|entry| !entry.xid.is_empty()) {
            self.xid_timelines(vm, &nodes, &indices, &tiles, &mut data).await?;
        }
        // The timelines' step follows the GPU samples' own interval: samples every 30 s read at 15 s
        // steps would leave every other bucket empty (a striped heat map under a flat line).
        let key = catalog.gpu_metrics.first().map(|spec| spec.key.as_str()).unwrap_or("gpu_util");
        let stride =
            report::sample_stride(data.values().filter_map(|e| e.timelines.get(key)).map(Vec::as_slice), step_s);
        if stride > 1 {
            let end_at = tiles.end.timestamp();
            let timelines = data
                .values_mut()
                .flat_map(|entry| entry.timelines.values_mut())
                .chain(network.values_mut().flat_map(|entry| entry.timelines.values_mut()))
                .chain(io.values_mut().map(|(timeline, _)| timeline));
            for timeline in timelines {
                *timeline = report::regrid(timeline, step_s, stride, end_at);
            }
            step_s *= stride;
        }
        let whole_nodes = crate::domain::report::holds_nodes_whole(&nodes, &attributed, &evidence.present);
        let (reads, reads_note) = match reads {
            Reads::Rules(_) => (wire::MetricsReads::RecordingRules, None),
            Reads::Raw(note) => (wire::MetricsReads::Raw, note),
        };
        Ok(Gathered {
            faults: fault_evidence,
            bursts,
            attributed,
            data,
            network,
            io,
            whole_nodes,
            step_s,
            window_s,
            reads,
            reads_note,
            rules_incomplete,
        })
    }
}

/// The GPU indices the job's records name, each once, in order.
fn recorded_indices(recorded: &[(GpuRef, Option<String>)]) -> Vec<u16> {
    recorded.iter().map(|(gpu, _)| gpu.index).collect::<BTreeSet<_>>().into_iter().collect()
}

/// A series value of one GPU: summaries over the window and a timeline.
#[derive(Default)]
pub(super) struct GpuData {
    pub(super) uuid: Option<String>,
    pub(super) timelines: BTreeMap<String, Vec<(i64, f64)>>,
    pub(super) means: BTreeMap<String, f64>,
    pub(super) maxes: BTreeMap<String, f64>,
    pub(super) counts: BTreeMap<String, f64>,
    /// Share of raw utilisation samples under the idle threshold.
    pub(super) idle_share: Option<f64>,
    /// The energy counter at the window's start.
    pub(super) energy_start_mj: Option<f64>,
    pub(super) fb_free: Option<f64>,
    pub(super) energy_mj: Option<f64>,
    pub(super) xid: Vec<(i64, u32, Option<String>)>,
}

impl GpuData {
    /// Energy becomes the counter's rise over the window (the window's mean, peak and sample count per
    /// metric come straight from VictoriaMetrics).
    pub(super) fn summarise(&mut self) {
        // A counter that went backwards was reset (driver reload): its rise is unknown.
        self.energy_mj = match (self.energy_start_mj, self.energy_mj) {
            (Some(before), Some(after)) if after >= before => Some(after - before),
            _ => None,
        };
    }
}

/// The GPU a series belongs to, read from whichever host label it carries.
pub(super) fn gpu_of(series: &Series, catalog: &SeriesCatalog) -> Option<GpuRef> {
    let node = catalog.gpu_host_labels.iter().find_map(|label| series.labels.get(label.as_str()))?;
    let index = series.labels.get(catalog.gpu_index_label.as_str())?.parse().ok()?;
    Some(GpuRef { node: node.clone(), index })
}

/// The node of a node-level series, from the first of `labels` it carries.
pub(super) fn node_of_any(series: &Series, labels: &[&LabelName]) -> Option<String> {
    labels.iter().find_map(|label| node_of(series, label))
}

/// The node of an RDMA series (`instance="gpu001:9879"` → `gpu001`).
pub(super) fn node_of(series: &Series, label: &LabelName) -> Option<String> {
    let value = series.labels.get(label.as_str())?;
    Some(
        value
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(value.as_str(), |(host, _)| host)
            .to_string(),
    )
}

/// A node agent's burst readings for one node and direction: the highest 100 ms rate and the seconds
/// above the threshold.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct BurstReading {
    pub(super) peak: Option<f64>,
    pub(super) seconds_above: Option<f64>,
}

/// Burst readings by (node, `tx`/`rx`).
pub(super) type BurstReadings = BTreeMap<(String, &'static str), BurstReading>;

#[derive(Default)]
pub(super) struct NodeData {
    pub(super) timelines: BTreeMap<String, Vec<(i64, f64)>>,
    pub(super) means: BTreeMap<String, f64>,
}

pub(super) struct Gathered {
    /// Fault evidence found in the window (link, ECC, ping-mesh), before classification.
    pub(super) faults: Vec<Evidence>,
    /// (node, direction) → (highest 100 ms rate, seconds above the threshold).
    pub(super) bursts: BurstReadings,
    pub(super) attributed: Vec<AttributedGpu>,
    pub(super) data: BTreeMap<GpuRef, GpuData>,
    pub(super) network: BTreeMap<String, NodeData>,
    pub(super) io: IoReadings,
    pub(super) whole_nodes: bool,
    pub(super) step_s: u64,
    pub(super) window_s: u64,
    /// Where the GPU figures over the window came from, and why raw where the rules were not used.
    pub(super) reads: wire::MetricsReads,
    pub(super) reads_note: Option<String>,
    /// Read through the rules: the GPU metrics whose recorded buckets lacked a part (sum, count, peak
    /// or idle count) for some GPU, which the window's figures cannot do without.
    pub(super) rules_incomplete: Vec<String>,
}

/// (source, key) → (timeline, mean over the window) of the job's Lustre I/O.
pub(super) type IoReadings = BTreeMap<(IoSource, &'static str), (Vec<(i64, f64)>, Option<f64>)>;
