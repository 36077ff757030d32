//! The per-job report: joins a job from slurmdbd with the GPU records of our own store and the
//! series in VictoriaMetrics, applies the report rules, and archives the result when the job has ended.
//!
//! Used by the HTTP handler, by `slurmlens report` and by the archiver; it owns no driver.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::join_all;
use slurmlens_wire as wire;

use crate::domain::blame::{self, Ending, Evidence, Strength};
use crate::domain::gpu::GpuRef;
use crate::domain::ids::JobSelector;
use crate::domain::job::JobRecord;
use crate::domain::node_signals::{self, IoSource, NodeFacts};
use crate::domain::promql::{LabelName, Matcher, MetricName, Selector};
use crate::domain::report::{self, AttributedGpu, AttributionEvidence, GpuFacts, HeldJob, Summary};
use crate::domain::scope::ViewerScope;
use crate::domain::series::{Kind, SeriesCatalog};
use crate::domain::time::epoch;
use crate::domain::tres::TresCatalog;
use crate::http::wire_map;
use crate::sources::slurmdbd::{SlurmDbd, SlurmDbdError};
use crate::sources::victoriametrics::{Series, VictoriaMetrics, VmError};
use crate::store::{Store, StoreError};

/// Failures that stop a report (metrics failing does not: the report degrades instead).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    SlurmDbd(#[from] SlurmDbdError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("report could not be encoded: {0}")]
    Encode(String),
}

/// How reports are made.
#[derive(Debug, Clone)]
pub struct ReportSettings {
    pub catalog: SeriesCatalog,
    /// Upper bound of all metric queries of one report together.
    pub metrics_timeout: Duration,
    /// A job's report is archived once it ended this long ago (late scrapes have arrived).
    pub archive_delay: Duration,
    /// Racks (ToRs) of the nodes: where a job's ping-mesh paths start and end.
    pub topology: slurmlens_slurm::topology::Topology,
}

impl Default for ReportSettings {
    fn default() -> Self {
        Self {
            catalog: SeriesCatalog::default(),
            metrics_timeout: Duration::from_secs(5),
            archive_delay: Duration::from_secs(120),
            topology: slurmlens_slurm::topology::Topology::default(),
        }
    }
}

/// Makes reports.
#[derive(Clone)]
pub struct Reporter {
    vm: Option<VictoriaMetrics>,
    store: Option<Store>,
    settings: ReportSettings,
}

/// Whose GPUs [`Reporter::gpu_values`] may read.
#[derive(Debug, Clone)]
pub enum GpuScope {
    /// Every GPU of these nodes (provider staff).
    Nodes(Vec<String>),
    /// Only the GPUs these jobs held (a tenant's own jobs): recorded indices and nodes held whole.
    Jobs(Vec<HeldJob>),
}

const TIMED_OUT: &str = "metrics unavailable: VictoriaMetrics did not answer in time";

/// A series value of one GPU: summaries over the window and a timeline.
#[derive(Default)]
struct GpuData {
    uuid: Option<String>,
    timelines: BTreeMap<String, Vec<(i64, f64)>>,
    means: BTreeMap<String, f64>,
    maxes: BTreeMap<String, f64>,
    counts: BTreeMap<String, f64>,
    /// Share of raw utilisation samples under the idle threshold.
    idle_share: Option<f64>,
    /// The energy counter at the window's start.
    energy_start_mj: Option<f64>,
    fb_free: Option<f64>,
    energy_mj: Option<f64>,
    xid: Vec<(i64, u32, Option<String>)>,
}

impl GpuData {
    /// Energy becomes the counter's rise over the window (the window's mean, peak and sample count per
    /// metric come straight from VictoriaMetrics).
    fn summarise(&mut self) {
        // A counter that went backwards was reset (driver reload): its rise is unknown.
        self.energy_mj = match (self.energy_start_mj, self.energy_mj) {
            (Some(before), Some(after)) if after >= before => Some(after - before),
            _ => None,
        };
    }
}

/// Points per timeline when a request does not say (`?points=`).
pub const DEFAULT_POINTS: usize = 120;

/// How a job ended, as the failure classification reads it.
fn ending_of(record: &JobRecord) -> Ending {
    Ending {
        state: record.state.base(),
        exit_code: record.exit_code.status,
        signal: record.exit_code.signal,
        cancelled_by: record.kill_requid,
        owner_uid: record.uid,
    }
}

/// Whether the report classifies the job's ending (application or infrastructure): it ended badly.
fn classifies(record: &JobRecord) -> bool {
    record.state.base().is_finished() && blame::needs_classification(&ending_of(record))
}

/// The end of a report's window: the job's end, or now while it runs.
fn window_end(record: &JobRecord, now: DateTime<Utc>) -> DateTime<Utc> {
    epoch(record.time_end).unwrap_or(now).min(now)
}

fn now_epoch() -> u64 {
    u64::try_from(Utc::now().timestamp()).unwrap_or(0)
}

/// The GPU a series belongs to, read from whichever host label it carries.
fn gpu_of(series: &Series, catalog: &SeriesCatalog) -> Option<GpuRef> {
    let node = catalog.gpu_host_labels.iter().find_map(|label| series.labels.get(label.as_str()))?;
    let index = series.labels.get(catalog.gpu_index_label.as_str())?.parse().ok()?;
    Some(GpuRef { node: node.clone(), index })
}

/// The node of a node-level series, from the first of `labels` it carries.
fn node_of_any(series: &Series, labels: &[&LabelName]) -> Option<String> {
    labels.iter().find_map(|label| node_of(series, label))
}

/// The node of an RDMA series (`instance="gpu001:9879"` → `gpu001`).
fn node_of(series: &Series, label: &LabelName) -> Option<String> {
    let value = series.labels.get(label.as_str())?;
    Some(
        value
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(value.as_str(), |(host, _)| host)
            .to_string(),
    )
}

impl Reporter {
    pub fn new(vm: Option<VictoriaMetrics>, store: Option<Store>, settings: ReportSettings) -> Self {
        Self { vm, store, settings }
    }

    /// The catalogue keys [`Reporter::gpu_values`] knows, with their units.
    pub fn gpu_value_metrics(&self) -> Vec<(String, String)> {
        let catalog = &self.settings.catalog;
        let mut keys: Vec<(String, String)> =
            catalog.gpu_metrics.iter().map(|spec| (spec.key.clone(), spec.unit.clone())).collect();
        keys.push(("xid".into(), "code".into()));
        keys
    }

    /// One metric of the GPUs `scope` allows at `at`: the mean of the samples of the last four scrape
    /// intervals (for XID, the highest code in them). A missing source answers `unavailable`. For a
    /// tenant's jobs, the query names only the GPUs attributed to them: first which GPUs their
    /// unrecorded nodes report (to find the nodes they hold whole), then the values of exactly those.
    pub async fn gpu_values(&self, scope: &GpuScope, key: &str, at: DateTime<Utc>) -> Option<wire::GpuValues> {
        let catalog = &self.settings.catalog;
        let (name, scale, unit, function, merge) = if key == "xid" {
            (catalog.xid.clone(), 1.0, "code".to_string(), "max_over_time", "max")
        } else {
            let spec = catalog.gpu_metric(key)?;
            (spec.name.clone(), spec.scale, spec.unit.clone(), "avg_over_time", "avg")
        };
        let mut answer = wire::GpuValues {
            metric: key.to_string(),
            unit,
            at,
            status: "ok".into(),
            message: None,
            values: Vec::new(),
        };
        let Some(vm) = &self.vm else {
            answer.status = "unavailable".into();
            answer.message = Some("no metrics source is configured".into());
            return Some(answer);
        };
        let lookback = catalog.scrape_interval_s.max(1) * 4;
        let selectors = match scope {
            GpuScope::Nodes(nodes) => self.gpu_selectors(&name, nodes, &[]),
            GpuScope::Jobs(jobs) => {
                let started = Instant::now();
                let gpus = match self.attributed_gpus(vm, jobs, at, lookback).await {
                    Ok(gpus) => gpus,
                    Err(message) => {
                        answer.status = "unavailable".into();
                        answer.message = Some(message);
                        return Some(answer);
                    }
                };
                // Nodes with the same GPU indices share one selector, so the query stays short.
                let mut by_indices: BTreeMap<Vec<u16>, Vec<String>> = BTreeMap::new();
                for (node, indices) in gpus {
                    by_indices.entry(indices.into_iter().collect()).or_default().push(node);
                }
                let timeout = self.settings.metrics_timeout.saturating_sub(started.elapsed());
                if by_indices.is_empty() || timeout.is_zero() {
                    if timeout.is_zero() {
                        answer.status = "unavailable".into();
                        answer.message = Some(TIMED_OUT.into());
                    }
                    return Some(answer);
                }
                by_indices.iter().flat_map(|(indices, nodes)| self.gpu_selectors(&name, nodes, indices)).collect()
            }
        };
        let query = self.per_gpu(merge, "", &selectors, |s| format!("{function}({s}[{lookback}s])"), "");
        match tokio::time::timeout(self.settings.metrics_timeout, vm.query(&query, at)).await {
            Ok(Ok(series)) => {
                for series in series {
                    let Some(gpu) = gpu_of(&series, catalog) else { continue };
                    if let Some(&(_, value)) = series.points.last() {
                        answer.values.push(wire::GpuValue { node: gpu.node, gpu: gpu.index, value: value * scale });
                    }
                }
                answer.values.sort_by(|a, b| (&a.node, a.gpu).cmp(&(&b.node, b.gpu)));
            }
            Ok(Err(error)) => {
                answer.status = "unavailable".into();
                answer.message = Some(format!("metrics unavailable: {error}"));
            }
            Err(_) => {
                answer.status = "unavailable".into();
                answer.message = Some(TIMED_OUT.into());
            }
        }
        Some(answer)
    }

    /// The GPUs `jobs` certainly held ([`report::viewer_gpus`]): which GPU indices their unrecorded
    /// nodes report around `at` decides which of those nodes they hold whole.
    async fn attributed_gpus(
        &self,
        vm: &VictoriaMetrics,
        jobs: &[HeldJob],
        at: DateTime<Utc>,
        lookback: u64,
    ) -> Result<BTreeMap<String, BTreeSet<u16>>, String> {
        let catalog = &self.settings.catalog;
        let unrecorded: Vec<String> = report::unrecorded_nodes(jobs).into_iter().collect();
        let mut present: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
        if !unrecorded.is_empty() {
            let util = catalog.gpu_metrics.first().map_or_else(|| catalog.xid.clone(), |spec| spec.name.clone());
            let since = at - chrono::Duration::seconds(i64::try_from(lookback).unwrap_or(i64::MAX));
            let lookups: Vec<String> =
                self.gpu_selectors(&util, &unrecorded, &[]).iter().map(Selector::to_string).collect();
            let found = tokio::time::timeout(
                self.settings.metrics_timeout,
                join_all(lookups.iter().map(|selector| vm.series(selector, since, at))),
            )
            .await
            .map_err(|_| TIMED_OUT.to_string())?;
            for labels in found
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("metrics unavailable: {e}"))?
                .into_iter()
                .flatten()
            {
                let series = Series { labels, points: Vec::new() };
                if let Some(gpu) = gpu_of(&series, catalog) {
                    present.entry(gpu.node).or_default().insert(gpu.index);
                }
            }
        }
        Ok(report::viewer_gpus(jobs, &present))
    }

    /// The report of one job, or `None` when the viewer may not see it or it does not exist.
    pub async fn report(
        &self,
        reader: &SlurmDbd,
        scope: &ViewerScope,
        selector: JobSelector,
        points: usize,
    ) -> Result<Option<wire::JobReport>, ReportError> {
        let Some((record, _steps)) = reader.job(scope, selector).await? else {
            return Ok(None);
        };
        let catalog = reader.tres_catalog().await?;
        Ok(Some(self.report_for(reader, &record, &catalog, points).await?))
    }

    /// The report of a decoded job record: archived if one exists, else computed (and archived when due).
    pub async fn report_for(
        &self,
        reader: &SlurmDbd,
        record: &JobRecord,
        tres: &TresCatalog,
        points: usize,
    ) -> Result<wire::JobReport, ReportError> {
        let now = now_epoch();
        let cluster = reader.cluster();
        let job = wire_map::job(record, tres, cluster.as_str(), now);
        let finished = record.state.base().is_finished() && record.time_end > 0;
        if finished && let Some(store) = &self.store {
            match store.archived_report(cluster, record.identity.id_job, record.time_submit).await {
                Ok(Some(json)) => {
                    if let Ok(mut archived) = serde_json::from_str::<wire::JobReport>(&json) {
                        // Slurm may rewrite a finished row (slurmctld restart): the facts stay live.
                        archived.job = job;
                        archived.source = "archived".into();
                        return Ok(archived);
                    }
                    tracing::warn!(job = record.identity.id_job, "archived report unreadable; recomputing");
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "archive unavailable; computing the report live"),
            }
        }
        let report = self.compute(reader, record, job, points).await;
        let due = finished && now >= record.time_end + self.settings.archive_delay.as_secs();
        if due
            && report.metrics.status == "ok"
            && let Some(store) = &self.store
        {
            let json = serde_json::to_string(&report).map_err(|e| ReportError::Encode(e.to_string()))?;
            // The report is served either way; a failed archive is retried by the next read or sweep.
            let digest = crate::store::ReportDigest {
                mean_gpu_util: report.totals.mean_gpu_util,
                mean_tensor_active: report.totals.mean_tensor_active,
                blame: report.failure.as_ref().map(|failure| failure.blame.clone()),
            };
            let archived = store.archive_report(cluster, record.identity.id_job, record.time_submit, &json, &digest);
            if let Err(error) = archived.await {
                tracing::warn!(%error, job = record.identity.id_job, "archiving the report failed");
            }
        }
        Ok(report)
    }

    async fn compute(&self, reader: &SlurmDbd, record: &JobRecord, job: wire::Job, points: usize) -> wire::JobReport {
        let now = Utc::now();
        let start = epoch(record.time_start);
        let end = window_end(record, now);
        let finished = record.state.base().is_finished();
        let mut report = wire::JobReport {
            source: if finished { "final".into() } else { "live".into() },
            generated_at: now,
            window_start: start,
            window_end: start.map(|_| end),
            metrics: wire::MetricsStatus { status: "no_data".into(), message: None, step_s: 0 },
            gpus: Vec::new(),
            nodes: Vec::new(),
            totals: wire::ReportTotals::default(),
            verdicts: Vec::new(),
            failure: None,
            bursts: Vec::new(),
            traces: None,
            io: None,
            job,
        };
        let ending = ending_of(record);
        let classify = classifies(record);
        let Some(start) = start.filter(|start| *start < end) else {
            report.metrics.message = Some("the job ran too briefly for any metrics to cover it".into());
            if classify {
                let evidence = match epoch(record.time_start) {
                    Some(started) => self.node_event_evidence(reader, record.nodes.hosts(), started, end).await,
                    None => Vec::new(),
                };
                report.failure = Some(failure_analysis(record, &ending, evidence, &report.gpus, end));
            }
            report.traces = self.traces(reader, record, &report.totals).await;
            return report;
        };
        let recorded = match &self.store {
            Some(store) => match store.gpu_allocations(reader.cluster(), record.identity.id_job).await {
                Ok(records) => records.into_iter().map(|record| (record.gpu, record.uuid)).collect(),
                Err(error) => {
                    tracing::warn!(%error, "GPU records unavailable; attributing without them");
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        let nodes = record.nodes.hosts().to_vec();
        let faults = FaultScope { classify, tors: self.tors_of(reader.cluster().as_str(), &nodes) };
        let mut evidence = Vec::new();
        if classify {
            evidence.extend(self.node_event_evidence(reader, &nodes, start, end).await);
        }
        match &self.vm {
            None => {
                report.metrics = wire::MetricsStatus {
                    status: "unavailable".into(),
                    message: Some("no metrics source is configured".into()),
                    step_s: 0,
                };
            }
            Some(vm) => {
                let gathered = tokio::time::timeout(
                    self.settings.metrics_timeout,
                    self.gather(vm, record, report.job.alloc_gpus, &recorded, Span { start, end, points }, &faults),
                )
                .await;
                match gathered {
                    Ok(Ok(mut gathered)) => {
                        evidence.append(&mut gathered.faults);
                        let bursts = std::mem::take(&mut gathered.bursts);
                        self.fill(&mut report, record, gathered, end, points);
                        report.bursts = self.bursts(&report, &nodes, bursts);
                    }
                    Ok(Err(error)) => {
                        report.metrics = wire::MetricsStatus {
                            status: "unavailable".into(),
                            message: Some(format!("metrics unavailable: {error}")),
                            step_s: 0,
                        };
                    }
                    Err(_) => {
                        report.metrics = wire::MetricsStatus {
                            status: "unavailable".into(),
                            message: Some(format!(
                                "metrics unavailable: VictoriaMetrics did not answer within {} ms",
                                self.settings.metrics_timeout.as_millis()
                            )),
                            step_s: 0,
                        };
                    }
                }
            }
        }
        if classify {
            report.failure = Some(failure_analysis(record, &ending, evidence, &report.gpus, end));
        }
        report.traces = self.traces(reader, record, &report.totals).await;
        report
    }

    /// The job's trace breakdown, if summaries were sent, with DCGM's view beside the trace verdict:
    /// the tensor pipes' activity says whether "compute" was tensor work or not.
    async fn traces(
        &self,
        reader: &SlurmDbd,
        record: &JobRecord,
        totals: &wire::ReportTotals,
    ) -> Option<wire::JobTraces> {
        let store = self.store.as_ref()?;
        let mut traces = match crate::traces::job_traces(store, reader.cluster(), record.identity.id_job).await {
            Ok(traces) => traces,
            Err(error) => {
                tracing::warn!(%error, "trace summaries unavailable; reporting without them");
                return None;
            }
        };
        if traces.total.traced_s <= 0.0 {
            return None;
        }
        if let Some(verdict) = traces.total.verdict.as_mut() {
            if let Some(tensor) = totals.mean_tensor_active {
                let reading = if tensor >= report::GOOD_TENSOR_PCT {
                    "tensor cores well used"
                } else if tensor < report::LOW_TENSOR_PCT {
                    "kernels run with little tensor-core work (FP32, or small matrices)"
                } else {
                    "tensor cores partly used"
                };
                verdict.evidence.push(format!("DCGM: mean tensor activity {tensor:.0} % — {reading}"));
            }
            if let Some(util) = totals.mean_gpu_util {
                verdict.evidence.push(format!("DCGM: mean GPU utilisation {util:.0} % (busy is not efficient)"));
            }
        }
        Some(traces)
    }

    /// The racks (ToRs) holding `nodes`, from the site's topology (or the names' default racks).
    fn tors_of(&self, cluster: &str, nodes: &[String]) -> Vec<String> {
        let racks = self.settings.topology.resolve(cluster, nodes, 8);
        let mut tors: Vec<String> = racks
            .nodes
            .iter()
            .filter(|place| nodes.contains(&place.name))
            .filter_map(|place| racks.racks.get(place.rack as usize).map(|rack| rack.name.clone()))
            .collect();
        tors.sort();
        tors.dedup();
        tors
    }

    /// Drains, downs and failures of the job's nodes from five minutes before it started to five after
    /// it ended. Unreadable events are logged and left out: the analysis says what it has.
    async fn node_event_evidence(
        &self,
        reader: &SlurmDbd,
        nodes: &[String],
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Vec<Evidence> {
        let margin = chrono::Duration::minutes(5);
        let Ok(window) = crate::domain::job::TimeWindow::new(start - margin, end + margin) else { return Vec::new() };
        match reader.node_events(window, None).await {
            Ok(events) => events
                .into_iter()
                .filter(|event| nodes.contains(&event.node))
                .map(|event| {
                    let state = crate::domain::state::NodeState::from_raw(event.state).name();
                    let down = state.split('+').any(|flag| flag == "DOWN");
                    Evidence {
                        at: i64::try_from(event.time_start).unwrap_or(0),
                        source: "node_event",
                        place: event.node.clone(),
                        detail: format!("{state}: {}", event.reason),
                        strength: blame::node_event_strength(&event.reason, down),
                    }
                })
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "node events unavailable; classifying without them");
                Vec::new()
            }
        }
    }

    /// Bursts per node and direction: the agent's peaks next to the counters' average and highest
    /// scrape-to-scrape rate; "unknown" where only counters exist.
    fn bursts(&self, report: &wire::JobReport, nodes: &[String], peaks: BurstReadings) -> Vec<wire::NodeBursts> {
        let settings = &self.settings.catalog.bursts;
        let threshold = settings.line_rate_bytes_per_s * settings.threshold;
        let mut rows = Vec::new();
        for node in nodes {
            let network = report.nodes.iter().find(|n| &n.node == node);
            for (direction, key) in [("tx", "rdma_tx"), ("rx", "rdma_rx")] {
                let scrape = network.and_then(|n| n.summary.iter().find(|s| s.metric == key));
                let BurstReading { peak, seconds_above: above } =
                    peaks.get(&(node.clone(), direction)).copied().unwrap_or_default();
                if scrape.is_none() && peak.is_none() {
                    continue;
                }
                let measured = peak.is_some();
                rows.push(wire::NodeBursts {
                    node: node.clone(),
                    direction: direction.into(),
                    status: if measured { "measured" } else { "unknown" }.into(),
                    scrape_mean_bytes_per_s: scrape.map(|s| s.mean),
                    scrape_peak_bytes_per_s: scrape.map(|s| s.max),
                    burst_peak_bytes_per_s: peak,
                    seconds_above: if measured { Some(above.unwrap_or(0.0)) } else { None },
                    threshold_bytes_per_s: threshold,
                    message: (!measured).then(|| {
                        format!(
                            "only byte counters on this node: a burst shorter than a scrape is averaged away, so the \
                             peak is unknown (a node agent exporting {} would show it)",
                            if direction == "tx" { settings.tx_peak.as_str() } else { settings.rx_peak.as_str() }
                        )
                    }),
                });
            }
        }
        rows
    }

    /// The step of a report's timelines: `points` buckets over the window, never finer than a scrape.
    fn step_s(&self, start: DateTime<Utc>, end: DateTime<Utc>, points: usize) -> u64 {
        let duration = u64::try_from((end - start).num_seconds()).unwrap_or(0).max(1);
        let finest = self.settings.catalog.scrape_interval_s.max(1);
        finest.max(duration.div_ceil(points.max(1) as u64))
    }

    /// One selector per host label (`Hostname` and `hostname`), joined with `or` by the caller.
    fn gpu_selectors(&self, metric: &MetricName, nodes: &[String], indices: &[u16]) -> Vec<Selector> {
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
    /// one series per GPU however the exporter spelled its host label. dcgm-exporter copies a series
    /// once per job in its mapping file; `merge` (`avg`, `max`) says how such copies combine. `filter`
    /// (`> 0`) follows each variant: `A > 0 or B > 0` groups as `(A > 0) or (B > 0)`.
    fn per_gpu(
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
            .zip(&catalog.gpu_host_labels)
            .map(|(selector, host)| {
                format!("{merge} by ({host}, {}{extra}) ({}){filter}", catalog.gpu_index_label, inner(selector))
            })
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// Every VictoriaMetrics request of one job's report, planned before any is sent so that all go out
    /// at once. Per GPU metric: one range query of bucket means ending at the job's end (the timeline a
    /// chart draws), and one instant query over exactly the job's window (`aggr_over_time`: the window's
    /// mean, peak and sample count in one scan). Then the idle share at
    /// scrape resolution, memory capacity and energy from the samples at the window's ends, XID codes
    /// seen, and the RDMA counters per node.
    fn plan(&self, job_id: u32, nodes: &[String], indices: &[u16], tiles: &Tiles, faults: &FaultScope) -> Vec<Planned> {
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
            let means = self.per_gpu("max", "", &selectors, |s| format!("avg_over_time({s}[{step_s}s])"), "");
            plan.push(planned(Wanted::Buckets(spec.key.clone(), spec.scale), buckets, means, &selectors));
            let window = self.per_gpu("max", ", rollup", &selectors, aggregate(window_s), "");
            plan.push(planned(Wanted::Window(spec.key.clone(), spec.scale), instant, window, &selectors));
        }
        if let Some(util) = catalog.gpu_metric("gpu_util") {
            // The share of raw samples under the idle threshold: idle time at scrape resolution.
            let below = (report::IDLE_UTIL_PCT / util.scale).next_down();
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
                    format!("sum by ({host_label}) (rate({selector}[{step_s}s]))"),
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
        for io in node_signals::io_queries(&catalog.lustre, job_id, nodes, step_s, window_s) {
            let reads = [io.selector];
            plan.push(planned(Wanted::Io(io.key, io.source, false), buckets, io.range, &reads));
            plan.push(planned(Wanted::Io(io.key, io.source, true), instant, io.mean, &reads));
        }
        let on_nodes = |metric: &MetricName| Selector {
            metric: metric.clone(),
            matchers: vec![Matcher::AnyHost(host_label.clone(), nodes.to_vec())],
        };
        // Gap 3: a node agent's 100 ms peak rates and its seconds above the burst threshold.
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
        // Gap 2: the steps in which a fault showed on the job's links, GPUs or ToR paths.
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
        let planned = self.plan(record.identity.id_job, &nodes, &[], &tiles, &faults);
        Some(ReportQueries { planned, tiles })
    }

    /// One piece of evidence per fault series: where it showed first, and how bad it got.
    fn fault_evidence(&self, kind: FaultKind, series: &Series, step_s: u64) -> Option<Evidence> {
        let catalog = &self.settings.catalog;
        let faults = &catalog.faults;
        let (first_at, _) = *series.points.first()?;
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
        Some(Evidence { at: first_at, source, place, detail, strength })
    }

    /// Replaces each GPU's XID codes seen with the steps at which each code appeared.
    async fn xid_timelines(
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
        for entry in data.values_mut() {
            entry.xid.clear();
        }
        for series in answer {
            let Some(gpu) = gpu_of(&series, catalog) else { continue };
            let Some(entry) = data.get_mut(&gpu) else { continue };
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
        for entry in data.values_mut() {
            entry.xid.sort_by_key(|&(at, _, _)| at);
        }
        Ok(())
    }

    async fn gather(
        &self,
        vm: &VictoriaMetrics,
        record: &JobRecord,
        alloc_gpus: u64,
        recorded: &[(GpuRef, Option<String>)],
        span: Span,
        faults: &FaultScope,
    ) -> Result<Gathered, VmError> {
        let Span { start, end, points } = span;
        let catalog = &self.settings.catalog;
        let nodes: Vec<String> = record.nodes.hosts().to_vec();
        let step_s = self.step_s(start, end, points);
        // Buckets end at the job's end and step back, so every bucket lies inside the job.
        let tiles = Tiles::new(start, end, step_s);
        let window_s = tiles.window_s;
        // GPU records name the job's indices up front; without them every GPU of the nodes is fetched
        // and attribution (which needs the series lookup) picks among them, so nothing waits on it.
        let indices: Vec<u16> =
            recorded.iter().map(|(gpu, _)| gpu.index).collect::<BTreeSet<_>>().into_iter().collect();
        let util = catalog.gpu_metrics.first().map(|spec| spec.name.clone()).unwrap_or_else(|| catalog.xid.clone());
        let lookups: Vec<String> = self.gpu_selectors(&util, &nodes, &[]).iter().map(Selector::to_string).collect();
        let plan = self.plan(record.identity.id_job, &nodes, &indices, &tiles, faults);
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
        let per_node = crate::domain::job::exact_gpus_per_node(alloc_gpus, nodes.len());
        let attributed = report::attribute(&nodes, per_node, &evidence);
        let wanted: BTreeSet<GpuRef> = attributed.iter().map(|a| a.gpu.clone()).collect();

        let mut data: BTreeMap<GpuRef, GpuData> = BTreeMap::new();
        let mut network: BTreeMap<String, NodeData> = BTreeMap::new();
        let mut fault_evidence: Vec<Evidence> = Vec::new();
        let mut bursts: BurstReadings = BTreeMap::new();
        let mut io: IoReadings = BTreeMap::new();
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
                let entry = data.entry(gpu).or_default();
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
        // The job held its nodes whole when it was given every GPU that reports on them.
        let whole_nodes = !nodes.is_empty()
            && nodes.iter().all(|node| {
                let present = evidence.present.get(node).map_or(0, BTreeSet::len);
                present > 0 && attributed.iter().filter(|a| &a.gpu.node == node).count() >= present
            });
        Ok(Gathered { faults: fault_evidence, bursts, attributed, data, network, io, whole_nodes, step_s, window_s })
    }

    fn fill(
        &self,
        report: &mut wire::JobReport,
        record: &JobRecord,
        gathered: Gathered,
        end: DateTime<Utc>,
        points: usize,
    ) {
        let catalog = &self.settings.catalog;
        let Gathered { attributed, data, network, io, whole_nodes, step_s, window_s, .. } = gathered;
        let hours = window_s as f64 / 3600.0;
        let mut facts = Vec::new();
        let mut energy_mj = 0.0;
        let mut energy_known = false;
        let mut idle_hours = 0.0;
        let mut peak_memory: Option<f64> = None;
        let mut capacity: Option<f64> = None;
        for AttributedGpu { gpu, rule, uncertain } in &attributed {
            let entry = data.get(gpu);
            let summary_of = |key: &str| -> Option<Summary> {
                let entry = entry?;
                Some(Summary {
                    mean: *entry.means.get(key)?,
                    max: entry.maxes.get(key).copied().unwrap_or(f64::NAN),
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
                    let timeline = entry.timelines.get(&spec.key).filter(|timeline| !timeline.is_empty());
                    // A job shorter than a step (or whose last bucket is still being written) has no
                    // range point yet; its exact mean over the window stands for it at the window's end.
                    let points = match timeline {
                        Some(timeline) => report::downsample(timeline, points),
                        None => vec![(end.timestamp(), *entry.means.get(&spec.key)?)],
                    };
                    Some(wire::MetricSeries { metric: spec.key.clone(), unit: spec.unit.clone(), points })
                })
                .collect();
            if let Some(share) = entry.and_then(|entry| entry.idle_share) {
                idle_hours += share * hours;
            }
            if let Some(energy) = entry.and_then(|entry| entry.energy_mj) {
                energy_mj += energy;
                energy_known = true;
            }
            let fb_used = summary_of("fb_used");
            let gpu_capacity = entry.and_then(|entry| {
                let used_last = entry.timelines.get("fb_used").and_then(|t| t.last()).map(|&(_, v)| v)?;
                Some(used_last + entry.fb_free?)
            });
            if let Some(used) = fb_used {
                peak_memory = Some(peak_memory.map_or(used.max, |peak: f64| peak.max(used.max)));
            }
            if let Some(gpu_capacity) = gpu_capacity {
                capacity = Some(capacity.map_or(gpu_capacity, |c: f64| c.max(gpu_capacity)));
            }
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
            facts.push(GpuFacts {
                label: format!("{} gpu {}", gpu.node, gpu.index),
                gpu_util: summary_of("gpu_util"),
                tensor_active: summary_of("tensor_active"),
                fb_used,
                fb_capacity_mib: gpu_capacity,
                xid: entry.map(|entry| entry.xid.iter().map(|(at, xid, _)| (*at, *xid)).collect()).unwrap_or_default(),
            });
            report.gpus.push(wire::GpuReport {
                node: gpu.node.clone(),
                gpu: gpu.index,
                uuid: entry.and_then(|entry| entry.uuid.clone()),
                attribution: rule.name().to_string(),
                uncertain: *uncertain,
                summary,
                series,
                xid_events,
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
            let summary = node_keys
                .iter()
                .filter_map(|(key, unit)| {
                    let mean = *entry.means.get(key)?;
                    let max = entry.timelines.get(key).map_or(mean, |t| t.iter().map(|&(_, v)| v).fold(mean, f64::max));
                    Some(wire::MetricSummary { metric: key.clone(), unit: unit.clone(), mean, max, samples: 0 })
                })
                .collect();
            let series = node_keys
                .iter()
                .filter_map(|(key, unit)| {
                    let timeline = entry.timelines.get(key)?;
                    Some(wire::MetricSeries {
                        metric: key.clone(),
                        unit: unit.clone(),
                        points: report::downsample(timeline, points),
                    })
                })
                .collect();
            report.nodes.push(wire::NodeNetworkReport { node: node.clone(), summary, series });
        }
        let io = io_report(&io, window_s, points);
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
        report.totals = wire::ReportTotals {
            gpu_hours: job_gpus * hours,
            idle_gpu_hours: idle_hours,
            energy_kwh: energy_known.then(|| energy_mj / 3.6e9),
            peak_memory_mib: peak_memory,
            memory_capacity_mib: capacity,
            mean_gpu_util: mean_of("gpu_util"),
            mean_tensor_active: mean_of("tensor_active"),
            node_power_w: None,
            node_energy_kwh: None,
        };
        let job_nodes: Vec<&NodeData> = record.nodes.hosts().iter().filter_map(|node| network.get(node)).collect();
        let gpu_util = attributed.iter().filter_map(|a| data.get(&a.gpu)?.timelines.get("gpu_util")).map(Vec::as_slice);
        let node_facts = node_facts(report, &job_nodes, gpu_util, lustre_read, whole_nodes);
        report.totals.node_power_w = node_facts.node_power_w;
        report.totals.node_energy_kwh = node_facts.node_power_w.map(|watts| watts * hours / 1e3);
        report.verdicts = report::verdicts(&facts)
            .into_iter()
            .map(|finding| wire::Verdict {
                kind: finding.kind.to_string(),
                severity: finding.severity.to_string(),
                message: finding.message,
                evidence: finding.evidence,
            })
            .collect();
        report.verdicts.extend(node_signals::findings(&node_facts).into_iter().map(|finding| wire::Verdict {
            kind: finding.kind.to_string(),
            severity: finding.severity.to_string(),
            message: finding.message,
            evidence: finding.evidence,
        }));
        if attributed.iter().any(|a| a.uncertain) {
            report.verdicts.push(wire::Verdict {
                kind: "attribution_uncertain".into(),
                severity: "info".into(),
                message:
                    "the job shared a node and no GPU record exists: every GPU of the node is shown, marked uncertain"
                        .into(),
                evidence: attributed
                    .iter()
                    .filter(|a| a.uncertain)
                    .map(|a| format!("{} gpu {}", a.gpu.node, a.gpu.index))
                    .collect(),
            });
        }
        let (status, message) = if attributed.is_empty() && report.job.alloc_gpus > 0 {
            ("no_data", Some("no GPU series were found on the job's nodes".to_string()))
        } else if with_data == 0 && !attributed.is_empty() {
            ("no_data", Some("no samples of the job's GPUs in its window".to_string()))
        } else {
            ("ok", None)
        };
        report.window_end = Some(end);
        report.metrics = wire::MetricsStatus { status: status.into(), message, step_s };
    }
}

/// Per step, the mean of the series that have a point at it.
fn mean_by_step<'a>(series: impl Iterator<Item = &'a [(i64, f64)]>) -> Vec<(i64, f64)> {
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
fn node_facts<'a>(
    report: &wire::JobReport,
    nodes: &[&NodeData],
    gpu_util: impl Iterator<Item = &'a [(i64, f64)]>,
    lustre_read: Option<(f64, IoSource)>,
    whole_nodes: bool,
) -> NodeFacts {
    let over_nodes =
        |key: &str| -> Vec<f64> { nodes.iter().filter_map(|entry| entry.means.get(key).copied()).collect() };
    let mean = |values: Vec<f64>| (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    let sum = |values: Vec<f64>| (!values.is_empty()).then(|| values.iter().sum::<f64>());
    let gpu_power: Vec<f64> =
        report.gpus.iter().filter_map(|gpu| gpu.summary.iter().find(|s| s.metric == "power").map(|s| s.mean)).collect();
    // The steps in which the job's GPUs idled, against the nodes' iowait in the same steps.
    let util = mean_by_step(gpu_util);
    let iowait = mean_by_step(nodes.iter().filter_map(|entry| entry.timelines.get("cpu_iowait").map(Vec::as_slice)));
    let totals = &report.totals;
    NodeFacts {
        gpu_idle_share: (totals.gpu_hours > 0.0).then(|| totals.idle_gpu_hours / totals.gpu_hours),
        gpu_power_w: sum(gpu_power),
        node_power_w: sum(over_nodes("node_power")),
        whole_nodes,
        cpu_iowait_pct: mean(over_nodes("cpu_iowait")),
        io_pressure_pct: mean(over_nodes("io_pressure")),
        iowait_gpu_idle_vs_busy: node_signals::split_by_gpu_idle(&util, &iowait, report::IDLE_UTIL_PCT),
        lustre_read_bytes_per_s: lustre_read,
        memory_pressure_pct: mean(over_nodes("memory_pressure")),
    }
}

/// The job's Lustre I/O: its own job statistics where the file system keeps them, else the clients of
/// its nodes; `None` when neither is scraped.
fn io_report(io: &IoReadings, window_s: u64, points: usize) -> Option<(IoSource, wire::IoReport)> {
    let source = [IoSource::JobStats, IoSource::Nodes].into_iter().find(|source| {
        io.iter().any(|((from, _), (timeline, mean))| from == source && (mean.is_some() || !timeline.is_empty()))
    })?;
    let mut summary = Vec::new();
    let mut series = Vec::new();
    let mut totals = (0.0, 0.0);
    for (key, unit) in node_signals::IO_SIGNALS {
        let Some((timeline, mean)) = io.get(&(source, key)) else { continue };
        let mean = mean.unwrap_or(0.0);
        let max = timeline.iter().map(|&(_, v)| v).fold(mean, f64::max);
        summary.push(wire::MetricSummary { metric: key.to_string(), unit: unit.into(), mean, max, samples: 0 });
        if !timeline.is_empty() {
            series.push(wire::MetricSeries {
                metric: key.to_string(),
                unit: unit.into(),
                points: report::downsample(timeline, points),
            });
        }
        match key {
            "lustre_read" => totals.0 = mean * window_s as f64,
            "lustre_write" => totals.1 = mean * window_s as f64,
            _ => {}
        }
    }
    Some((
        source,
        wire::IoReport { source: source.name().into(), read_bytes: totals.0, write_bytes: totals.1, summary, series },
    ))
}

/// The classification of a badly ended job from the evidence gathered, the XID errors on its GPUs and
/// Slurm's own record of its end, with the evidence in time order.
fn failure_analysis(
    record: &JobRecord,
    ending: &Ending,
    mut evidence: Vec<Evidence>,
    gpus: &[wire::GpuReport],
    end: DateTime<Utc>,
) -> wire::FailureAnalysis {
    for gpu in gpus {
        for event in &gpu.xid_events {
            let (strength, meaning) = blame::xid_strength(event.xid);
            evidence.push(Evidence {
                at: event.at.timestamp(),
                source: "xid",
                place: format!("{} gpu {}", gpu.node, gpu.gpu),
                detail: format!("XID {}: {meaning}", event.xid),
                strength,
            });
        }
    }
    let verdict = blame::classify(ending, evidence);
    let mut listed: Vec<wire::FailureEvidence> = vec![wire::FailureEvidence {
        at: end,
        source: "slurm".into(),
        place: record.node_list.clone(),
        detail: format!("Slurm recorded {} with exit code {}", record.state.name(), record.exit_code),
        strength: "fact".into(),
    }];
    listed.extend(verdict.evidence.iter().map(|fact| {
        wire::FailureEvidence {
            at: epoch(u64::try_from(fact.at).unwrap_or(0)).unwrap_or(end),
            source: fact.source.into(),
            place: fact.place.clone(),
            detail: fact.detail.clone(),
            strength: match fact.strength {
                Strength::Strong => "strong",
                Strength::Weak => "weak",
                Strength::Application => "application",
            }
            .into(),
        }
    }));
    listed.sort_by_key(|fact| fact.at);
    wire::FailureAnalysis { blame: verdict.blame.as_str().into(), reason: verdict.reason, evidence: listed }
}

/// A node agent's burst readings for one node and direction: the highest 100 ms rate and the seconds
/// above the threshold.
#[derive(Debug, Clone, Copy, Default)]
struct BurstReading {
    peak: Option<f64>,
    seconds_above: Option<f64>,
}

/// Burst readings by (node, `tx`/`rx`).
type BurstReadings = BTreeMap<(String, &'static str), BurstReading>;

/// The time a report covers and how finely.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    points: usize,
}

/// Which fault evidence a report looks for.
#[derive(Default)]
struct FaultScope {
    /// The job ended badly: read the fault series.
    classify: bool,
    /// The racks (ToRs) of the job's nodes, where its ping-mesh paths start or end.
    tors: Vec<String>,
}

/// What one planned query answers.
enum Wanted {
    /// A GPU metric's mean per bucket (key, scale).
    Buckets(String, f64),
    /// A GPU metric's mean, peak and sample count over the whole window (key, scale).
    Window(String, f64),
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
    /// Steps in which a fault counter rose or a fault gauge was set: evidence for gap 2.
    Fault(FaultKind),
    /// A node's highest 100 ms rate over the window (direction).
    BurstPeak(&'static str),
    /// A node's seconds above the burst threshold over the window (direction).
    BurstSeconds(&'static str),
}

/// The fault series a report reads for a job that ended badly.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FaultKind {
    LinkDowned,
    SymbolErrors,
    RemappedRows,
    RowRemapFailure,
    PingmeshLoss,
    PingmeshRtt,
}

impl FaultKind {
    fn describe(self) -> (&'static str, Strength, &'static str) {
        match self {
            Self::LinkDowned => ("link_errors", Strength::Strong, "RDMA link went down"),
            Self::SymbolErrors => ("link_errors", Strength::Weak, "RDMA symbol errors"),
            Self::RemappedRows => ("ecc", Strength::Strong, "row remapped after an uncorrectable ECC error"),
            Self::RowRemapFailure => ("ecc", Strength::Strong, "row remap failed"),
            Self::PingmeshLoss => ("pingmesh_loss", Strength::Weak, "ping-mesh probe loss"),
            Self::PingmeshRtt => ("pingmesh_rtt", Strength::Weak, "ping-mesh p99 RTT"),
        }
    }
}

struct Planned {
    what: Wanted,
    eval: Eval,
    query: String,
    /// The series the query reads (the benchmark fetches them bare for reference).
    reads: Vec<Selector>,
}

/// Every VictoriaMetrics query of one report, as planned (see [`Reporter::queries_for`]).
pub struct ReportQueries {
    planned: Vec<Planned>,
    tiles: Tiles,
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
enum Eval {
    /// At the end of every bucket (a range query).
    Buckets,
    /// At one instant.
    At(DateTime<Utc>),
}

impl Planned {
    async fn send(&self, vm: &VictoriaMetrics, tiles: &Tiles) -> Result<Vec<Series>, VmError> {
        match self.eval {
            Eval::Buckets => vm.query_range(&self.query, tiles.first_bucket_end(), tiles.end, tiles.step_s).await,
            Eval::At(at) => vm.query(&self.query, at).await,
        }
    }
}

/// A report's buckets: `buckets` of `step_s` ending at `end`, inside the job's window of `window_s`.
#[derive(Debug, Clone, Copy)]
struct Tiles {
    end: DateTime<Utc>,
    window_s: u64,
    step_s: u64,
    buckets: u64,
}

impl Tiles {
    fn new(start: DateTime<Utc>, end: DateTime<Utc>, step_s: u64) -> Self {
        let window_s = u64::try_from((end - start).num_seconds()).unwrap_or(1).max(1);
        let step_s = step_s.max(1);
        let buckets = (window_s / step_s).max(1);
        Self { end, window_s, step_s, buckets }
    }

    fn seconds(value: u64) -> chrono::Duration {
        chrono::Duration::seconds(i64::try_from(value).unwrap_or(i64::MAX / 2))
    }

    /// The timestamp of the first bucket (each bucket ends at its timestamp).
    fn first_bucket_end(&self) -> DateTime<Utc> {
        self.end - Self::seconds((self.buckets - 1) * self.step_s)
    }

    fn start(&self) -> DateTime<Utc> {
        self.end - Self::seconds(self.window_s)
    }
}

#[derive(Default)]
struct NodeData {
    timelines: BTreeMap<String, Vec<(i64, f64)>>,
    means: BTreeMap<String, f64>,
}

struct Gathered {
    /// Fault evidence found in the window (link, ECC, ping-mesh), before classification.
    faults: Vec<Evidence>,
    /// (node, direction) → (highest 100 ms rate, seconds above the threshold).
    bursts: BurstReadings,
    attributed: Vec<AttributedGpu>,
    data: BTreeMap<GpuRef, GpuData>,
    network: BTreeMap<String, NodeData>,
    io: IoReadings,
    whole_nodes: bool,
    step_s: u64,
    window_s: u64,
}

/// (source, key) → (timeline, mean over the window) of the job's Lustre I/O.
type IoReadings = BTreeMap<(IoSource, &'static str), (Vec<(i64, f64)>, Option<f64>)>;

/// Archives the reports of jobs that ended recently and have none yet. Every replica may run it: the
/// archive is keyed by job record and written idempotently.
pub async fn archive_recent(state: &crate::http::AppState, lookback: chrono::Duration) -> Result<usize, ReportError> {
    let Some(store) = state.store_handle() else { return Ok(0) };
    let reporter = state.reporter();
    let now = Utc::now();
    let delay = chrono::Duration::from_std(reporter.settings.archive_delay).unwrap_or_default();
    let mut archived = 0;
    for reader in state.readers() {
        let tres = reader.tres_catalog().await?;
        let window =
            crate::domain::job::TimeWindow::new(now - lookback, now).map_err(|e| ReportError::Encode(e.to_string()))?;
        let mut cursor = None;
        loop {
            let (jobs, next) =
                reader.jobs_in_window(&ViewerScope::Staff, window, &Default::default(), &tres, cursor, 1000).await?;
            let due: Vec<&JobRecord> = jobs
                .iter()
                .filter(|job| job.state.base().is_finished() && job.time_end > 0 && tres.gpus(&job.tres_alloc) > 0)
                .filter(|job| epoch(job.time_end).is_some_and(|end| end + delay <= now))
                .collect();
            let keys: Vec<(u32, u64)> = due.iter().map(|job| (job.identity.id_job, job.time_submit)).collect();
            let done = store.archived_among(reader.cluster(), &keys).await?;
            for job in due.into_iter().filter(|job| !done.contains(&(job.identity.id_job, job.time_submit))) {
                let report = reporter.report_for(reader, job, &tres, DEFAULT_POINTS).await?;
                if report.metrics.status == "ok" {
                    archived += 1;
                }
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    Ok(archived)
}

/// Archives one job's report once `archive_delay` has passed (the plugin's job-end message), so a
/// report is kept promptly even between archiver rounds. Failures are logged; the archiver retries.
pub fn schedule_archive(state: crate::http::AppState, cluster: crate::domain::cluster::ClusterName, job_id: u32) {
    tokio::spawn(async move {
        tokio::time::sleep(state.reporter().settings.archive_delay).await;
        let Some(reader) = state.readers().find(|reader| *reader.cluster() == cluster) else { return };
        let result = async {
            let Some((record, _)) = reader.job(&ViewerScope::Staff, JobSelector::Id(job_id)).await? else {
                return Ok::<_, ReportError>(());
            };
            let tres = reader.tres_catalog().await?;
            state.reporter().report_for(reader, &record, &tres, DEFAULT_POINTS).await?;
            Ok(())
        }
        .await;
        if let Err(error) = result {
            tracing::warn!(%error, job_id, "archiving at job end failed; the archiver will retry");
        }
    });
}
