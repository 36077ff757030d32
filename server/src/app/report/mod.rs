//! The per-job report: joins a job from slurmdbd with the GPU records of our own store and the
//! series in VictoriaMetrics, applies the report rules, and archives the result when the job has ended.
//! It is made in four steps, each in its own file: [`plan`] lists every VictoriaMetrics query before
//! any is sent, [`gather`] sends them at once and sorts the answers per GPU and node, [`assemble`] turns
//! those into the wire report (totals, verdicts, failure analysis, bursts), and [`archive`] keeps
//! finished jobs' reports. [`readings`] reads GPUs at a moment for the grid, [`live`] running jobs'
//! means so far for the listing, and [`form`] gives a big job's report in its summary form.

mod archive;
mod assemble;
mod flight;
mod form;
mod gather;
mod links;
mod live;
mod plan;
mod readings;
mod rules;
mod tenancy;

use std::time::Duration;

use chrono::{DateTime, Utc};
use slurmlens_wire as wire;

pub use archive::{
    Archiver, ArchiverSettings, MAX_TRIES, Progress, Round, RoundSummary, archive_round, schedule_archive,
};
pub use flight::{ARCHIVES_AT_ONCE, MIN_BUDGET_POINTS, POINTS_BUDGET, budgeted_points};
pub use form::{SPREAD_ABOVE_GPUS, SeriesChoice, in_form};
pub use links::{LinkSettings, vmui_beside};
pub use live::{LiveJob, LiveMeans};
pub use plan::ReportQueries;
pub use readings::GpuScope;
pub use rules::RulesSettings;
pub use tenancy::for_tenant;

use super::{now_epoch, wire_map};
use crate::domain::blame::{self, Ending, Evidence};
use crate::domain::ids::JobSelector;
use crate::domain::job::JobRecord;
use crate::domain::scope::ViewerScope;
use crate::domain::series::SeriesCatalog;
use crate::domain::time::epoch;
use crate::domain::tres::TresCatalog;
use crate::domain::verdicts;
use crate::sources::slurmdbd::{SlurmDbd, SlurmDbdError};
use crate::sources::victoriametrics::VictoriaMetrics;
use crate::store::{Store, StoreError};
use assemble::{burst_verdict, failure_analysis};
use plan::{FaultScope, Span};

impl Reporter {
    pub fn new(vm: Option<VictoriaMetrics>, store: Option<Store>, settings: ReportSettings) -> Self {
        let flights = std::sync::Arc::new(flight::Flights::new(settings.live_cache));
        Self { vm, store, settings, flights, vmui_answers: std::sync::Arc::default() }
    }

    /// Whether the charts' vmui links lead anywhere: asked of vmui once (per process), with the metrics
    /// source's credentials, before the first links are made. None configured: no.
    pub async fn vmui_answers(&self) -> bool {
        let (Some(vm), Some(url)) = (&self.vm, self.settings.links.vmui_url.as_deref()) else { return false };
        *self
            .vmui_answers
            .get_or_init(|| async {
                let answers = vm.page_answers(url).await;
                if !answers {
                    tracing::warn!(url, "vmui does not answer here (Debian's VictoriaMetrics has none): no vmui links");
                }
                answers
            })
            .await
    }

    /// Whether a metrics source is configured: without one no report is worth archiving.
    pub fn has_metrics_source(&self) -> bool {
        self.vm.is_some()
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
        let finished = record.state.run_is_over() && record.time_end > 0;
        // An archived report of an earlier generation, kept in case its remake reads no metrics.
        let mut earlier: Option<wire::JobReport> = None;
        if finished && let Some(store) = &self.store {
            match store.archived_report(cluster, record.identity.id_job, record.time_submit).await {
                Ok(Some((json, generation))) => {
                    if let Ok(mut archived) = serde_json::from_str::<wire::JobReport>(&json) {
                        // Slurm may rewrite a finished row (slurmctld restart): the facts stay live.
                        archived.job = job.clone();
                        archived.source = wire::ReportSource::Archived;
                        let remakable = now < record.time_end + self.settings.remake_within.as_secs();
                        if generation >= GENERATION || !remakable {
                            return Ok(archived);
                        }
                        earlier = Some(archived);
                    } else {
                        tracing::warn!(job = record.identity.id_job, "archived report unreadable; recomputing");
                    }
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "archive unavailable; computing the report live"),
            }
        }
        let due = finished && now >= record.time_end + self.settings.archive_delay.as_secs();
        let points = budgeted_points(job.alloc_gpus, points, due);
        let key = flight::FlightKey {
            cluster: cluster.clone(),
            job_id: record.identity.id_job,
            time_submit: record.time_submit,
            points,
        };
        // One computation at a time per job and points: the viewers and job-end messages that ask
        // meanwhile get its report (a finished job's is archived inside the flight, once).
        self.flights
            .run(key, !finished, || async {
                let report = self.compute(reader, record, job, points).await;
                // A remake that found no metrics where the earlier report had them (the series expired
                // sooner than configured) keeps the earlier one, marked current so it is not tried again.
                let report = match earlier {
                    Some(earlier) if read_metrics(&earlier) && !read_metrics(&report) => earlier,
                    _ => report,
                };
                if due {
                    self.archive_made(cluster, record, &report).await?;
                }
                Ok(report)
            })
            .await
    }

    /// Archives a finished job's report just made. A report without any metrics is kept too ("no
    /// data": past retention, or never exported), so it is neither made again nor listed as "not
    /// computed yet"; one the source did not answer is not.
    async fn archive_made(
        &self,
        cluster: &crate::domain::cluster::ClusterName,
        record: &JobRecord,
        report: &wire::JobReport,
    ) -> Result<(), ReportError> {
        if report.metrics.status == wire::MetricsState::Unavailable {
            return Ok(());
        }
        let Some(store) = &self.store else { return Ok(()) };
        let json = serde_json::to_string(report).map_err(|e| ReportError::Encode(e.to_string()))?;
        // The report is served either way; a failed archive is retried by the next read or sweep.
        let digest = crate::store::ReportDigest {
            mean_gpu_util: report.totals.mean_gpu_util,
            mean_tensor_active: report.totals.mean_tensor_active,
            blame: report.failure.as_ref().map(|failure| failure.blame.as_str().to_string()),
            has_metrics: report.metrics.status == wire::MetricsState::Ok,
            energy_kwh: report.totals.energy_kwh,
            measured_share: measured_share(&report.totals),
            generation: GENERATION,
        };
        let archived = store.archive_report(cluster, record.identity.id_job, record.time_submit, &json, &digest);
        if let Err(error) = archived.await {
            tracing::warn!(%error, job = record.identity.id_job, "archiving the report failed");
        }
        Ok(())
    }

    async fn compute(&self, reader: &SlurmDbd, record: &JobRecord, job: wire::Job, points: usize) -> wire::JobReport {
        let now = Utc::now();
        let start = epoch(record.time_start);
        let end = window_end(record, now);
        let finished = record.state.run_is_over();
        let source = if finished { wire::ReportSource::Final } else { wire::ReportSource::Live };
        let mut report = unassembled(job, source, now, start.map(|start| (start, end)));
        let ending = ending_of(record);
        let classify = classifies(record);
        let Some(start) = start.filter(|start| *start < end) else {
            report.metrics.message = Some("the job ran too briefly for any metrics to cover it".into());
            if classify {
                let evidence = match epoch(record.time_start) {
                    Some(started) => self.node_event_evidence(reader, record.nodes.hosts(), started, end).await,
                    None => Vec::new(),
                };
                report.failure = Some(failure_analysis(record, &ending, evidence, &report, end));
            }
            report.traces = self.traces(reader, record, &report.totals).await;
            return report;
        };
        let recorded = match &self.store {
            Some(store) => match super::gpus::run_gpu_records(store, reader.cluster(), record).await {
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
                    status: wire::MetricsState::Unavailable,
                    message: Some("no metrics source is configured".into()),
                    step_s: 0,
                    reads: wire::MetricsReads::Raw,
                    reads_note: None,
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
                        // A node's NIC carries every job on it: only a multi-node job's bursts are its own.
                        if nodes.len() > 1 {
                            let window_s = (end - start).num_seconds() as f64;
                            report.verdicts.extend(burst_verdict(&report.bursts, window_s));
                        }
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%error, job = record.identity.id_job, "report metrics unavailable");
                        report.metrics = wire::MetricsStatus {
                            status: wire::MetricsState::Unavailable,
                            message: Some(format!("metrics unavailable: {}", error.for_viewer())),
                            step_s: 0,
                            reads: wire::MetricsReads::Raw,
                            reads_note: None,
                        };
                    }
                    Err(_) => {
                        report.metrics = wire::MetricsStatus {
                            status: wire::MetricsState::Unavailable,
                            message: Some(format!(
                                "metrics unavailable: VictoriaMetrics did not answer within {} ms",
                                self.settings.metrics_timeout.as_millis()
                            )),
                            step_s: 0,
                            reads: wire::MetricsReads::Raw,
                            reads_note: None,
                        };
                    }
                }
            }
        }
        if classify {
            report.failure = Some(failure_analysis(record, &ending, evidence, &report, end));
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
        let mut traces =
            match super::traces::job_traces(store, reader.cluster(), record.identity.id_job, record.run()).await {
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
                let reading = if tensor >= verdicts::GOOD_TENSOR_PCT {
                    "tensor cores well used"
                } else if tensor < verdicts::LOW_TENSOR_PCT {
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
    pub(crate) fn tors_of(&self, cluster: &str, nodes: &[String]) -> Vec<String> {
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

    /// Drains, downs and failures of the job's nodes from [`blame::NODE_EVENT_MARGIN_S`] before it
    /// started to as long after it ended. Unreadable events are logged and left out: the analysis says what it has.
    async fn node_event_evidence(
        &self,
        reader: &SlurmDbd,
        nodes: &[String],
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Vec<Evidence> {
        let margin = chrono::Duration::seconds(blame::NODE_EVENT_MARGIN_S);
        let Ok(window) = crate::domain::job::TimeWindow::new(start - margin, end + margin) else { return Vec::new() };
        match reader.node_events(window, None).await {
            Ok(events) => events
                .into_iter()
                .filter(|event| nodes.contains(&event.node))
                .map(|event| {
                    let state = crate::domain::state::NodeState::from_raw(event.state).name();
                    let down = state.split('+').any(|flag| flag == "DOWN");
                    let at = i64::try_from(event.time_start).unwrap_or(0);
                    Evidence {
                        at,
                        until: at,
                        source: wire::EvidenceSource::NodeEvent,
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
}

/// Failures that stop a report (metrics failing does not: the report degrades instead).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    SlurmDbd(#[from] SlurmDbdError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("report could not be encoded: {0}")]
    Encode(String),
    #[error("no window to archive: {0}")]
    Window(String),
    #[error("the metrics source is not answering: {0}")]
    MetricsUnavailable(String),
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
    /// A running job's report is served again for this long to the viewers who follow.
    pub live_cache: Duration,
    /// Long jobs' GPU figures through the site's recording rules.
    pub rules: RulesSettings,
    /// The site's tools each chart links to (`[links]`).
    pub links: LinkSettings,
    /// How far back an archived report of an earlier [`GENERATION`] is made again (VictoriaMetrics'
    /// retention, `[report] backfill_days`): past it, the old one is all there is.
    pub remake_within: Duration,
}

/// What archived reports say, numbered: a report archived by an earlier generation is made again where
/// its job's series are still kept (by the next read or the archiver), so old wording does not outlive
/// the rules that replaced it. 2: facts placed against the run, figures with their coverage.
pub const GENERATION: u16 = 2;

impl Default for ReportSettings {
    fn default() -> Self {
        Self {
            catalog: SeriesCatalog::default(),
            metrics_timeout: Duration::from_secs(5),
            archive_delay: Duration::from_secs(120),
            topology: slurmlens_slurm::topology::Topology::default(),
            live_cache: Duration::from_secs(30),
            rules: RulesSettings::default(),
            links: LinkSettings::default(),
            remake_within: Duration::from_secs(31 * 86_400),
        }
    }
}

/// Makes reports.
#[derive(Clone)]
pub struct Reporter {
    vm: Option<VictoriaMetrics>,
    store: Option<Store>,
    settings: ReportSettings,
    /// One computation of a report at a time, and the job-end archives scheduled (`flight.rs`).
    flights: std::sync::Arc<flight::Flights>,
    /// Whether vmui answered when first asked ([`Reporter::vmui_answers`]).
    vmui_answers: std::sync::Arc<tokio::sync::OnceCell<bool>>,
}

/// Points per timeline when a request does not say (`?points=`).
pub const DEFAULT_POINTS: usize = 120;

/// A report before anything is gathered: the job's facts, its window (if it started), no metrics yet.
fn unassembled(
    job: wire::Job,
    source: wire::ReportSource,
    generated_at: DateTime<Utc>,
    window: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> wire::JobReport {
    wire::JobReport {
        source,
        generated_at,
        window_start: window.map(|(start, _)| start),
        window_end: window.map(|(_, end)| end),
        metrics: wire::MetricsStatus {
            status: wire::MetricsState::NoData,
            message: None,
            step_s: 0,
            reads: wire::MetricsReads::Raw,
            reads_note: None,
        },
        series_form: wire::SeriesForm::PerGpu,
        gpus: Vec::new(),
        shared_node_bands: Vec::new(),
        gpu_spread: Vec::new(),
        nodes: Vec::new(),
        node_spread: Vec::new(),
        totals: wire::ReportTotals::default(),
        verdicts: Vec::new(),
        failure: None,
        bursts: Vec::new(),
        traces: None,
        io: None,
        chart_queries: Vec::new(),
        dashboard_url: None,
        job,
    }
}

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

/// Whether a report read its GPUs' metrics.
fn read_metrics(report: &wire::JobReport) -> bool {
    report.metrics.status == wire::MetricsState::Ok
}

/// Whether the report classifies the job's ending (application or infrastructure): it ended badly.
fn classifies(record: &JobRecord) -> bool {
    record.state.base().is_finished() && blame::needs_classification(&ending_of(record))
}

/// The end of a report's window: the job's end, or now while it runs.
fn window_end(record: &JobRecord, now: DateTime<Utc>) -> DateTime<Utc> {
    epoch(record.time_end).unwrap_or(now).min(now)
}

/// The share of a report's GPU hours its figures were measured over, for showback: those on GPUs placed
/// as the job's, and of those the part of the run their samples cover (telemetry that started late
/// measured only its part); none when that is all of them.
fn measured_share(totals: &wire::ReportTotals) -> Option<f64> {
    if totals.gpu_hours <= 0.0 {
        return None;
    }
    let measured = match &totals.coverage {
        Some(covered) => covered.measured_gpu_hours,
        None => totals.gpu_hours - totals.unattributed_gpu_hours,
    };
    let share = (measured / totals.gpu_hours).clamp(0.0, 1.0);
    (share < crate::domain::coverage::WHOLE_SHARE).then_some(share)
}

#[cfg(test)]
pub(crate) mod fixtures;
