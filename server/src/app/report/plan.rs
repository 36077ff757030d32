//! The report's plan: every VictoriaMetrics query of one job's report, written before any is sent so
//! that all go out at once, each for all of the job's GPUs or nodes. Pure: a plan is a list of PromQL
//! strings with what each answers, so it is unit-tested without a server.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use slurmlens_wire as wire;

use super::rules::{Reads, idle_at_most};
use super::{Reporter, classifies, window_end};
use crate::domain::blame::Strength;
use crate::domain::job::JobRecord;
use crate::domain::node_signals::{self, IoSource};
use crate::domain::promql::{LabelName, Matcher, MetricName, Selector};
use crate::domain::rules::Bucket;
use crate::domain::series::Kind;
use crate::domain::time::epoch;
use crate::sources::victoriametrics::{Series, VictoriaMetrics, VmError};

impl Reporter {
    /// The step of a report's timelines: `points` buckets over the window, never finer than a scrape.
    pub(super) fn step_s(&self, start: DateTime<Utc>, end: DateTime<Utc>, points: usize) -> u64 {
        let duration = u64::try_from((end - start).num_seconds()).unwrap_or(0).max(1);
        let finest = self.settings.catalog.scrape_interval_s.max(1);
        finest.max(duration.div_ceil(points.max(1) as u64))
    }

    /// One selector per host label (`Hostname` and `hostname`), joined with `or` by the caller.
    pub(super) fn gpu_selectors(&self, metric: &MetricName, nodes: &[String], indices: &[u16]) -> Vec<Selector> {
        let catalog = &self.settings.catalog;
        catalog
            .gpu_host_labels
            .iter()
            .map(|host_label| {
                let mut matchers = vec![Matcher::AnyOf(host_label.clone(), nodes.to_vec())];
                if !indices.is_empty() {
                    matchers.push(Matcher::AnyOf(
                        catalog.gpu_index_label.clone(),
                        indices.iter().map(u16::to_string).collect(),
                    ));
                }
                Selector { metric: metric.clone(), matchers }
            })
            .collect()
    }

    /// `merge by (host, gpu, extra) (inner(selector))` for every host-label variant, joined with `or`:
    /// one series per GPU however the exporter spelled its host label. `selectors` are
    /// [`Reporter::gpu_selectors`]' output, one per host label, or several such runs one after another. dcgm-exporter copies a series
    /// once per job in its mapping file; `merge` (`avg`, `max`) says how such copies combine. `filter`
    /// (`> 0`) follows each variant: `A > 0 or B > 0` groups as `(A > 0) or (B > 0)`.
    pub(super) fn per_gpu(
        &self,
        merge: &str,
        extra: &str,
        selectors: &[Selector],
        inner: impl Fn(&Selector) -> String,
        filter: &str,
    ) -> String {
        let catalog = &self.settings.catalog;
        selectors
            .iter()
            .zip(catalog.gpu_host_labels.iter().cycle())
            .map(|(selector, host)| {
                format!("{merge} by ({host}, {}{extra}) ({}){filter}", catalog.gpu_index_label, inner(selector))
            })
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// A GPU metric's timeline, one series per GPU: each bucket's mean of the `selectors`' samples.
    pub(super) fn bucket_means(&self, selectors: &[Selector], step_s: u64) -> String {
        self.per_gpu("max", "", selectors, |s| format!("avg_over_time({s}[{step_s}s])"), "")
    }

    /// Every VictoriaMetrics request of one job's report, planned before any is sent so that all go out
    /// at once. Per GPU metric: one range query of bucket means ending at the job's end (the timeline a
    /// chart draws), and one instant query over exactly the job's window (`aggr_over_time`: the window's
    /// mean, peak and sample count in one scan). Then the idle share at
    /// scrape resolution, memory capacity and energy from the samples at the window's ends, XID codes
    /// seen, and the RDMA counters per node.
    pub(super) fn plan(
        &self,
        job_id: u32,
        nodes: &[String],
        indices: &[u16],
        tiles: &Tiles,
        faults: &FaultScope,
        reads: &Reads,
    ) -> Vec<Planned> {
        let catalog = &self.settings.catalog;
        let Tiles { window_s, step_s, .. } = *tiles;
        let planned = |what, eval, query, reads: &[Selector]| Planned { what, eval, query, reads: reads.to_vec() };
        let (buckets, instant) = (Eval::Buckets, Eval::At(tiles.end));
        let aggregate = |window: u64| {
            move |s: &Selector| {
                format!(r#"aggr_over_time(("avg_over_time", "max_over_time", "count_over_time"), {s}[{window}s])"#)
            }
        };
        let mut plan = Vec::new();
        for spec in &catalog.gpu_metrics {
            let selectors = self.gpu_selectors(&spec.name, nodes, indices);
            if let Reads::Rules(split) = reads {
                plan.extend(self.rule_queries(spec, &selectors, split, step_s));
                continue;
            }
            let means = self.bucket_means(&selectors, step_s);
            plan.push(planned(Wanted::Buckets(spec.key.clone(), spec.scale), buckets, means, &selectors));
            let window = self.per_gpu("max", ", rollup", &selectors, aggregate(window_s), "");
            plan.push(planned(Wanted::Window(spec.key.clone(), spec.scale), instant, window, &selectors));
        }
        if let (Some(util), Reads::Raw(_)) = (catalog.gpu_metric("gpu_util"), reads) {
            // The share of raw samples under the idle threshold: idle time at scrape resolution.
            let below = idle_at_most(util);
            let selectors = self.gpu_selectors(&util.name, nodes, indices);
            let idle =
                self.per_gpu("max", "", &selectors, |s| format!("share_le_over_time({s}[{window_s}s], {below})"), "");
            plan.push(planned(Wanted::IdleShare, instant, idle, &selectors));
        }
        // Free memory and the energy counter are read at the window's ends only: a short look back
        // from each end, not a scan of the whole job.
        let look_back = (catalog.scrape_interval_s.max(1) * 4).min(window_s.max(1));
        let fb_free = self.gpu_selectors(&catalog.fb_free, nodes, indices);
        let fb_free_query = self.per_gpu("avg", "", &fb_free, |s| format!("last_over_time({s}[{look_back}s])"), "");
        plan.push(planned(Wanted::FbFree, instant, fb_free_query, &fb_free));
        // Two instant queries, not a range of two points: VictoriaMetrics adjusts a range's points
        // within its latency offset of now (a job that just ended would show no rise).
        let energy = self.gpu_selectors(&catalog.energy_mj, nodes, indices);
        let energy_query = self.per_gpu("max", "", &energy, |s| format!("last_over_time({s}[{look_back}s])"), "");
        plan.push(planned(Wanted::EnergyAtEnd, instant, energy_query.clone(), &energy));
        plan.push(planned(Wanted::EnergyAtStart, Eval::At(tiles.start()), energy_query, &energy));
        // XID codes seen in the window (dcgm-exporter exports 0 while all is well); their times are
        // fetched only when one is set.
        let xid = self.gpu_selectors(&catalog.xid, nodes, indices);
        let xid_query =
            self.per_gpu("max", ", err_code, err_msg", &xid, |s| format!("max_over_time({s}[{window_s}s])"), " > 0");
        plan.push(planned(Wanted::XidSeen, instant, xid_query, &xid));
        let host_label = &catalog.rdma_host_label;
        for spec in &catalog.rdma_metrics {
            let selector = Selector {
                metric: spec.name.clone(),
                matchers: vec![Matcher::AnyHost(host_label.clone(), nodes.to_vec())],
            };
            let (range, mean) = match spec.kind {
                Kind::Counter => (
                    format!("sum by ({host_label}) ({})", node_signals::rate(&selector, None)),
                    format!("sum by ({host_label}) (increase({selector}[{window_s}s])) / {window_s}"),
                ),
                Kind::Gauge => (
                    format!("sum by ({host_label}) (avg_over_time({selector}[{step_s}s]))"),
                    format!("sum by ({host_label}) (avg_over_time({selector}[{window_s}s]))"),
                ),
            };
            let reads = [selector];
            plan.push(planned(Wanted::NodeTimeline(spec.key.clone(), spec.scale), buckets, range, &reads));
            plan.push(planned(Wanted::NodeMean(spec.key.clone(), spec.scale), instant, mean, &reads));
        }
        // The node beside its GPUs (node_exporter, ipmi_exporter) and the job's Lustre I/O.
        for signal in node_signals::node_queries(&catalog.node, nodes, step_s, window_s) {
            let key = signal.key.to_string();
            plan.push(planned(Wanted::NodeTimeline(key.clone(), 1.0), buckets, signal.range, &signal.reads));
            plan.push(planned(Wanted::NodeMean(key, 1.0), instant, signal.mean, &signal.reads));
        }
        for io in node_signals::io_queries(&catalog.lustre, job_id, nodes, window_s) {
            let reads = [io.selector];
            plan.push(planned(Wanted::Io(io.key, io.source, false), buckets, io.range, &reads));
            plan.push(planned(Wanted::Io(io.key, io.source, true), instant, io.mean, &reads));
        }
        let on_nodes = |metric: &MetricName| Selector {
            metric: metric.clone(),
            matchers: vec![Matcher::AnyHost(host_label.clone(), nodes.to_vec())],
        };
        // Micro-bursts: a node agent's 100 ms peak rates and its seconds above the burst threshold.
        let bursts = &catalog.bursts;
        let threshold_label: LabelName = "threshold".parse().unwrap_or_else(|_| unreachable!("a valid label"));
        for (direction, peak, above) in
            [("tx", &bursts.tx_peak, &bursts.tx_seconds_above), ("rx", &bursts.rx_peak, &bursts.rx_seconds_above)]
        {
            let peak = on_nodes(peak);
            let peak_query = format!("max by ({host_label}) (max_over_time({peak}[{window_s}s]))");
            plan.push(planned(Wanted::BurstPeak(direction), instant, peak_query, &[peak]));
            let mut above = on_nodes(above);
            above.matchers.push(Matcher::Equal(threshold_label.clone(), bursts.threshold.to_string()));
            let above_query = format!("sum by ({host_label}) (increase({above}[{window_s}s]))");
            plan.push(planned(Wanted::BurstSeconds(direction), instant, above_query, &[above]));
        }
        if !faults.classify {
            return plan;
        }
        // Failure attribution: the steps in which a fault showed on the job's links, GPUs or ToR paths.
        let series = &catalog.faults;
        for (kind, metric) in
            [(FaultKind::LinkDowned, &series.link_downed), (FaultKind::SymbolErrors, &series.symbol_errors)]
        {
            let selector = on_nodes(metric);
            let query = format!("sum by ({host_label}) (increase({selector}[{step_s}s])) > 0");
            plan.push(planned(Wanted::Fault(kind), buckets, query, &[selector]));
        }
        let remapped = self.gpu_selectors(&series.uncorrectable_remapped_rows, nodes, indices);
        let query = self.per_gpu("max", "", &remapped, |s| format!("increase({s}[{step_s}s])"), " > 0");
        plan.push(planned(Wanted::Fault(FaultKind::RemappedRows), buckets, query, &remapped));
        let failed = self.gpu_selectors(&series.row_remap_failure, nodes, indices);
        let query = self.per_gpu("max", "", &failed, |s| format!("max_over_time({s}[{step_s}s])"), " > 0");
        plan.push(planned(Wanted::Fault(FaultKind::RowRemapFailure), buckets, query, &failed));
        if !faults.tors.is_empty() {
            let (source, target) = (&series.pingmesh_source_label, &series.pingmesh_target_label);
            let on_path = |metric: &MetricName, end: &LabelName| Selector {
                metric: metric.clone(),
                matchers: vec![Matcher::AnyOf(end.clone(), faults.tors.clone())],
            };
            let ends = [source, target];
            let reads: Vec<Selector> = ends
                .iter()
                .flat_map(|end| {
                    [&series.pingmesh_successes, &series.pingmesh_probes, &series.pingmesh_rtt_bucket]
                        .map(|metric| on_path(metric, end))
                })
                .collect();
            let loss: Vec<String> = ends
                .iter()
                .map(|end| {
                    format!(
                        "(1 - sum by ({source}, {target}) (increase({}[{step_s}s])) / sum by ({source}, {target}) (increase({}[{step_s}s]))) > {}",
                        on_path(&series.pingmesh_successes, end),
                        on_path(&series.pingmesh_probes, end),
                        series.loss_threshold
                    )
                })
                .collect();
            plan.push(planned(Wanted::Fault(FaultKind::PingmeshLoss), buckets, loss.join(" or "), &reads));
            let rtt: Vec<String> = ends
                .iter()
                .map(|end| {
                    format!(
                        "histogram_quantile(0.99, sum by (le, {source}, {target}) (increase({}[{step_s}s]))) > {}",
                        on_path(&series.pingmesh_rtt_bucket, end),
                        series.rtt_p99_threshold_ns
                    )
                })
                .collect();
            plan.push(planned(Wanted::Fault(FaultKind::PingmeshRtt), buckets, rtt.join(" or "), &reads));
        }
        plan
    }

    /// The requests a live report of `record` sends to VictoriaMetrics (GPUs not narrowed by records),
    /// for `slurmlens bench report`: its own queries, and the series they read to fetch bare.
    pub fn queries_for(&self, cluster: &str, record: &JobRecord, points: usize) -> Option<ReportQueries> {
        let start = epoch(record.time_start)?;
        let end = window_end(record, Utc::now());
        let nodes = record.nodes.hosts().to_vec();
        let faults = FaultScope { classify: classifies(record), tors: self.tors_of(cluster, &nodes) };
        let tiles = Tiles::new(start, end, self.step_s(start, end, points));
        let planned = self.plan(record.identity.id_job, &nodes, &[], &tiles, &faults, &Reads::Raw(None));
        Some(ReportQueries { planned, tiles })
    }
}

/// The time a report covers and how finely.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) start: DateTime<Utc>,
    pub(super) end: DateTime<Utc>,
    pub(super) points: usize,
}

/// Which fault evidence a report looks for.
#[derive(Default)]
pub(super) struct FaultScope {
    /// The job ended badly: read the fault series.
    pub(super) classify: bool,
    /// The racks (ToRs) of the job's nodes, where its ping-mesh paths start or end.
    pub(super) tors: Vec<String>,
}

/// What one planned query answers.
pub(super) enum Wanted {
    /// A GPU metric's mean per bucket (key, scale).
    Buckets(String, f64),
    /// A GPU metric's mean, peak and sample count over the whole window (key, scale).
    Window(String, f64),
    /// A part of the window (recorded buckets or a raw edge) of a GPU metric read through the
    /// recording rules, per series with its `rollup` (key, scale, the length of the recorded buckets
    /// it read; `None`: a raw edge).
    WindowPart(String, f64, Option<Bucket>),
    IdleShare,
    FbFree,
    /// The energy counter at the window's end and at its start.
    EnergyAtEnd,
    EnergyAtStart,
    /// The highest XID code of each GPU over the window, where one was set.
    XidSeen,
    /// A node's RDMA counter or node signal per step (key, scale).
    NodeTimeline(String, f64),
    /// The same over the window (key, scale).
    NodeMean(String, f64),
    /// The job's Lustre I/O (key, source, over the window rather than per step).
    Io(&'static str, IoSource, bool),
    /// Steps in which a fault counter rose or a fault gauge was set: evidence for the failure attribution.
    Fault(FaultKind),
    /// A node's highest 100 ms rate over the window (direction).
    BurstPeak(&'static str),
    /// A node's seconds above the burst threshold over the window (direction).
    BurstSeconds(&'static str),
}

/// The fault series a report reads for a job that ended badly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum FaultKind {
    LinkDowned,
    SymbolErrors,
    RemappedRows,
    RowRemapFailure,
    PingmeshLoss,
    PingmeshRtt,
}

impl FaultKind {
    pub(super) fn describe(self) -> (wire::EvidenceSource, Strength, &'static str) {
        match self {
            Self::LinkDowned => (wire::EvidenceSource::LinkErrors, Strength::Strong, "RDMA link went down"),
            Self::SymbolErrors => (wire::EvidenceSource::LinkErrors, Strength::Weak, "RDMA symbol errors"),
            Self::RemappedRows => {
                (wire::EvidenceSource::Ecc, Strength::Strong, "row remapped after an uncorrectable ECC error")
            }
            Self::RowRemapFailure => (wire::EvidenceSource::Ecc, Strength::Strong, "row remap failed"),
            Self::PingmeshLoss => (wire::EvidenceSource::PingmeshLoss, Strength::Weak, "ping-mesh probe loss"),
            Self::PingmeshRtt => (wire::EvidenceSource::PingmeshRtt, Strength::Weak, "ping-mesh p99 RTT"),
        }
    }
}

pub(super) struct Planned {
    pub(super) what: Wanted,
    pub(super) eval: Eval,
    pub(super) query: String,
    /// The series the query reads (the benchmark fetches them bare for reference).
    pub(super) reads: Vec<Selector>,
}

/// Every VictoriaMetrics query of one report, as planned (see [`Reporter::queries_for`]).
pub struct ReportQueries {
    pub(super) planned: Vec<Planned>,
    pub(super) tiles: Tiles,
}

impl ReportQueries {
    /// Sends every query at once, as the report does; answers the number of points returned.
    pub async fn send(&self, vm: &VictoriaMetrics) -> Result<usize, VmError> {
        let answers = join_all(self.planned.iter().map(|planned| planned.send(vm, &self.tiles))).await;
        let mut points = 0;
        for answer in answers {
            points += answer?.iter().map(|series| series.points.len()).sum::<usize>();
        }
        Ok(points)
    }

    /// How many requests the report sends.
    pub fn query_count(&self) -> usize {
        self.planned.len()
    }

    /// The series the queries read, each once.
    pub fn reads(&self) -> Vec<Selector> {
        let mut seen = BTreeSet::new();
        self.planned
            .iter()
            .flat_map(|planned| planned.reads.iter())
            .filter(|selector| seen.insert(selector.to_string()))
            .cloned()
            .collect()
    }

    /// The report's step and the time of its first and last bucket.
    pub fn buckets(&self) -> (u64, DateTime<Utc>, DateTime<Utc>) {
        (self.tiles.step_s, self.tiles.first_bucket_end(), self.tiles.end)
    }

    /// The job's window.
    pub fn window(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        (self.tiles.start(), self.tiles.end)
    }
}

/// Where a planned query is evaluated.
#[derive(Debug, Clone, Copy)]
pub(super) enum Eval {
    /// At the end of every bucket (a range query).
    Buckets,
    /// At one instant.
    At(DateTime<Utc>),
    /// At the end of every bucket of other tiles (those aligned to the recording rules' buckets).
    Range(Tiles),
}

impl Planned {
    pub(super) async fn send(&self, vm: &VictoriaMetrics, tiles: &Tiles) -> Result<Vec<Series>, VmError> {
        match self.eval {
            Eval::Buckets => vm.query_range(&self.query, tiles.first_bucket_end(), tiles.end, tiles.step_s).await,
            Eval::At(at) => vm.query(&self.query, at).await,
            Eval::Range(other) => vm.query_range(&self.query, other.first_bucket_end(), other.end, other.step_s).await,
        }
    }
}

/// A report's buckets: `buckets` of `step_s` ending at `end`, inside the job's window of `window_s`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tiles {
    pub(super) end: DateTime<Utc>,
    pub(super) window_s: u64,
    pub(super) step_s: u64,
    pub(super) buckets: u64,
}

impl Tiles {
    pub(super) fn new(start: DateTime<Utc>, end: DateTime<Utc>, step_s: u64) -> Self {
        let window_s = u64::try_from((end - start).num_seconds()).unwrap_or(1).max(1);
        let step_s = step_s.max(1);
        let buckets = (window_s / step_s).max(1);
        Self { end, window_s, step_s, buckets }
    }

    pub(super) fn seconds(value: u64) -> chrono::Duration {
        chrono::Duration::seconds(i64::try_from(value).unwrap_or(i64::MAX / 2))
    }

    /// The timestamp of the first bucket (each bucket ends at its timestamp).
    pub(super) fn first_bucket_end(&self) -> DateTime<Utc> {
        self.end - Self::seconds((self.buckets - 1) * self.step_s)
    }

    pub(super) fn start(&self) -> DateTime<Utc> {
        self.end - Self::seconds(self.window_s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{END, START, at, reporter};
    use super::*;

    fn nodes() -> Vec<String> {
        vec!["gpu001".to_string(), "gpu002".to_string()]
    }

    fn tiles() -> Tiles {
        Tiles::new(at(START), at(END), 60)
    }

    #[test]
    fn buckets_end_at_the_jobs_end_and_stay_inside_its_window() {
        let tiles = tiles();
        assert_eq!((tiles.window_s, tiles.step_s, tiles.buckets), (3600, 60, 60));
        assert_eq!(tiles.start(), at(START));
        assert_eq!(tiles.first_bucket_end(), at(START + 60), "the first bucket covers the job's first minute");
        let short = Tiles::new(at(START), at(START + 10), 60);
        assert_eq!((short.buckets, short.first_bucket_end()), (1, at(START + 10)), "one bucket, at the end");
    }

    #[test]
    fn every_gpu_metric_is_asked_once_per_bucket_and_once_over_exactly_the_window() {
        let reporter = reporter();
        let plan = reporter.plan(4242, &nodes(), &[], &tiles(), &FaultScope::default(), &Reads::Raw(None));
        let metrics = reporter.settings.catalog.gpu_metrics.len();
        let buckets: Vec<&Planned> = plan.iter().filter(|p| matches!(p.what, Wanted::Buckets(..))).collect();
        let windows: Vec<&Planned> = plan.iter().filter(|p| matches!(p.what, Wanted::Window(..))).collect();
        assert_eq!((buckets.len(), windows.len()), (metrics, metrics));
        assert!(buckets.iter().all(|p| p.query.contains("[60s]") && matches!(p.eval, Eval::Buckets)));
        assert!(
            windows.iter().all(|p| p.query.contains("[3600s]") && matches!(p.eval, Eval::At(end) if end == at(END)))
        );
        let energy_at_start = plan.iter().find(|p| matches!(p.what, Wanted::EnergyAtStart)).map(|p| p.eval);
        assert!(matches!(energy_at_start, Some(Eval::At(start)) if start == at(START)));
        assert!(!plan.iter().any(|p| matches!(p.what, Wanted::Fault(_))), "a job that ended well reads no faults");
    }

    #[test]
    fn every_query_names_only_the_jobs_nodes_or_the_job() {
        let plan = reporter().plan(4242, &nodes(), &[], &tiles(), &FaultScope::default(), &Reads::Raw(None));
        for planned in &plan {
            let names_the_job = planned.query.contains("4242");
            let names_its_nodes = planned.query.contains("gpu001") && planned.query.contains("gpu002");
            assert!(names_the_job || names_its_nodes, "{}", planned.query);
            assert!(!planned.reads.is_empty(), "the benchmark needs what {} reads", planned.query);
        }
    }

    #[test]
    fn per_gpu_keeps_every_run_of_selectors() {
        // The grid's query for a tenant whose nodes hold different GPU indices: one run per index set.
        let reporter = reporter();
        let util = reporter.settings.catalog.gpu_metric("gpu_util").expect("gpu_util").name.clone();
        let mut selectors = reporter.gpu_selectors(&util, &["gpu001".into()], &[0]);
        selectors.extend(reporter.gpu_selectors(&util, &["gpu002".into()], &[3]));
        let query = reporter.per_gpu("avg", "", &selectors, |s| s.to_string(), "");
        assert!(query.contains("gpu001") && query.contains("gpu002"), "{query}");
        assert_eq!(query.matches(" or ").count() + 1, selectors.len(), "{query}");
    }

    #[test]
    fn recorded_indices_narrow_the_gpus_asked() {
        let reporter = reporter();
        let plan = reporter.plan(4242, &nodes(), &[0, 3], &tiles(), &FaultScope::default(), &Reads::Raw(None));
        let index_label = reporter.settings.catalog.gpu_index_label.as_str();
        let gpu_queries = plan.iter().filter(|p| matches!(p.what, Wanted::Buckets(..) | Wanted::Window(..)));
        for planned in gpu_queries {
            assert!(planned.query.contains(index_label) && planned.query.contains("0|3"), "{}", planned.query);
        }
    }

    #[test]
    fn a_job_that_ended_badly_also_reads_its_links_gpus_and_racks_faults() {
        let faults = FaultScope { classify: true, tors: vec!["rack1".into()] };
        let plan = reporter().plan(4242, &nodes(), &[], &tiles(), &faults, &Reads::Raw(None));
        let kinds: Vec<FaultKind> =
            plan.iter().filter_map(|p| if let Wanted::Fault(kind) = p.what { Some(kind) } else { None }).collect();
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        let pingmesh = plan.iter().find(|p| matches!(p.what, Wanted::Fault(FaultKind::PingmeshLoss)));
        assert!(pingmesh.is_some_and(|p| p.query.contains("rack1")), "ping-mesh paths start or end at the job's racks");
        let without_racks = reporter().plan(
            4242,
            &nodes(),
            &[],
            &tiles(),
            &FaultScope { classify: true, tors: Vec::new() },
            &Reads::Raw(None),
        );
        assert_eq!(without_racks.len(), plan.len() - 2, "no racks, no ping-mesh paths");
    }
}
