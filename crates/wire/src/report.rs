//! The job report: how a job used every GPU and link it was given, its verdicts and, for a job that
//! ended badly, whose failure it was.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::{
    Attribution, Blame, BurstStatus, Direction, EvidenceSource, EvidenceStrength, IoSource, MetricsReads, MetricsState,
    ReportSource, SeriesForm, Severity, VerdictKind,
};

use crate::jobs::Job;
use crate::links::ChartQuery;
use crate::traces::JobTraces;

/// `GET /api/v1/jobs/{job_id}/report`: how a job used every GPU and link it was given.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobReport {
    pub job: Job,
    /// `live` (running, computed now), `final` (ended, computed now) or `archived` (stored at job end).
    pub source: ReportSource,
    pub generated_at: DateTime<Utc>,
    /// The window the metrics cover: the job's start to its end (or now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<DateTime<Utc>>,
    pub metrics: MetricsStatus,
    /// How the time series come: `per_gpu` (each GPU's and node's own `series`) or `spread` (those
    /// left empty, `gpu_spread` and `node_spread` instead: lowest, mean and highest across the GPUs and
    /// the nodes, a big job's summary form). Summaries, XIDs and verdicts are per GPU and node either way.
    #[serde(default)]
    pub series_form: SeriesForm,
    pub gpus: Vec<GpuReport>,
    /// For a viewer who is not staff, each node the job shared without any record of which GPUs were
    /// its own (`node_only`): one band across all the node's GPUs, the job's and other tenants', in
    /// place of those GPUs (which `gpus` then leaves out). Staff get the GPUs themselves instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_node_bands: Vec<SharedNodeBand>,
    /// In the `spread` form: per metric, the spread across the job's GPUs at each point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_spread: Vec<SpreadSeries>,
    pub nodes: Vec<NodeNetworkReport>,
    /// In the `spread` form: per metric, the spread across the job's nodes at each point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_spread: Vec<SpreadSeries>,
    pub totals: ReportTotals,
    pub verdicts: Vec<Verdict>,
    /// For a job that ended badly: was it the application or the infrastructure (gap 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureAnalysis>,
    /// Per node and direction: short-interval peaks against the scrape average (gap 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bursts: Vec<NodeBursts>,
    /// Where the traced GPU time went (gap 1), when trace summaries were sent for the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces: Option<JobTraces>,
    /// The job's Lustre I/O, when the file system's exporter is scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoReport>,
    /// Per chart, the PromQL it was drawn from and links to run it in vmui and Grafana (made when the
    /// report is read, from the site's `[links]`; empty without a metrics source).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chart_queries: Vec<ChartQuery>,
    /// The site's per-job Grafana dashboard with the job's id, hosts and window as variables
    /// (`[links] grafana_dashboard_uid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard_url: Option<String>,
}

/// A job's file-system I/O (Lustre exporter).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IoReport {
    /// `jobstats`: the file system's statistics of this job alone (Lustre `jobid_var`); `nodes`: the
    /// Lustre clients of the job's nodes, which include any other job running there.
    pub source: IoSource,
    /// Bytes read and written over the window.
    pub read_bytes: f64,
    pub write_bytes: f64,
    /// `lustre_read`, `lustre_write` (B/s) and, from job statistics, `lustre_read_ops`, `lustre_write_ops` (/s).
    pub summary: Vec<MetricSummary>,
    pub series: Vec<MetricSeries>,
}

/// Why a job ended badly, as far as the evidence goes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailureAnalysis {
    /// `infrastructure`, `application` or `unknown`.
    pub blame: Blame,
    pub reason: String,
    /// In time order.
    pub evidence: Vec<FailureEvidence>,
}

/// One fact behind a [`FailureAnalysis`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailureEvidence {
    pub at: DateTime<Utc>,
    /// `slurm`, `xid`, `node_event`, `pingmesh_loss`, `pingmesh_rtt`, `link_errors`, `ecc`.
    pub source: EvidenceSource,
    /// A node, `node gpu N`, or a ping-mesh path `A01 → A02`.
    pub place: String,
    pub detail: String,
    /// `strong`, `weak` or `application`.
    pub strength: EvidenceStrength,
}

/// Bursts of one node in one direction: what 100 ms peaks show that the scrape average hides.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeBursts {
    pub node: String,
    /// `tx` or `rx`.
    pub direction: Direction,
    /// `measured` (a node agent exports peak rates) or `unknown` (counters only: the peak cannot be known).
    pub status: BurstStatus,
    /// Mean rate over the job from the byte counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_mean_bytes_per_s: Option<f64>,
    /// Highest rate between two scrapes from the byte counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_peak_bytes_per_s: Option<f64>,
    /// Highest 100 ms rate the agent saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_peak_bytes_per_s: Option<f64>,
    /// Seconds spent above `threshold_bytes_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_above: Option<f64>,
    pub threshold_bytes_per_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Whether the metric source answered, and why not.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetricsStatus {
    /// `ok`, `unavailable` (the source did not answer) or `no_data` (no series for this job's GPUs).
    pub status: MetricsState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Seconds between points of the series in this report.
    pub step_s: u64,
    /// `raw` or `recording_rules`: where the GPU figures over the window were read from.
    #[serde(default)]
    pub reads: MetricsReads,
    /// Why a job long enough for the recording rules was read raw ("recording rules missing", "…
    /// lagging since …").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads_note: Option<String>,
}

/// One GPU the job held (or may have held).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuReport {
    pub node: String,
    pub gpu: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Which evidence tied the GPU to the job: `hpc_job_label`, `plugin_record`, `whole_node`, `node_only`.
    pub attribution: Attribution,
    /// True when only node-level evidence exists (the job had part of a shared node).
    pub uncertain: bool,
    /// Per metric (`gpu_util`, `tensor_active`, …): mean and peak over the window.
    pub summary: Vec<MetricSummary>,
    /// Per metric: `[epoch seconds, value]` points, downsampled.
    pub series: Vec<MetricSeries>,
    /// XID errors seen on this GPU during the window.
    pub xid_events: Vec<XidEvent>,
}

/// A node the job shared with other tenants' jobs, without a record of its own GPUs there: its GPUs
/// as one band, never one by one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedNodeBand {
    pub node: String,
    /// GPUs of the node the band is made of (the job held some of them).
    pub gpus: u32,
    /// Per metric, over the node's GPUs: the mean of their means and the highest peak.
    pub summary: Vec<MetricSummary>,
    /// Per metric: `[epoch seconds, lowest, mean, highest]` across the node's GPUs.
    pub spread: Vec<SpreadSeries>,
}

/// Mean and peak of one metric.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetricSummary {
    pub metric: String,
    pub unit: String,
    pub mean: f64,
    pub max: f64,
    pub samples: u64,
}

/// A downsampled time series of one metric.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetricSeries {
    pub metric: String,
    pub unit: String,
    pub points: Vec<(i64, f64)>,
}

/// One metric's spread across a job's GPUs (or nodes) over time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpreadSeries {
    pub metric: String,
    pub unit: String,
    /// GPUs (or nodes) with this metric.
    pub count: u32,
    /// `[epoch seconds, lowest, mean, highest]` across those that have a point then.
    pub points: Vec<(i64, f64, f64, f64)>,
}

/// One XID error.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct XidEvent {
    pub at: DateTime<Utc>,
    pub xid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One node during the job: RDMA traffic and congestion (rdma_exporter), and the node beside its GPUs:
/// `cpu_busy`, `cpu_iowait`, `memory_used`, `memory_pressure`, `io_pressure`, `net_rx`, `net_tx`
/// (node_exporter) and `node_power` (ipmi_exporter), each where its exporter is scraped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeNetworkReport {
    pub node: String,
    pub summary: Vec<MetricSummary>,
    pub series: Vec<MetricSeries>,
}

/// Totals over the whole job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReportTotals {
    pub gpu_hours: f64,
    /// The hours the GPUs known to be the job's were idle. This and every figure below is about those
    /// GPUs only.
    pub idle_gpu_hours: f64,
    /// Of `gpu_hours`, those on shared nodes where no record says which GPUs were the job's: the
    /// figures below leave them out (the node's GPUs, other tenants' too, are no measure of the job's).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unattributed_gpu_hours: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_kwh: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_mib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_capacity_mib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_gpu_util: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_tensor_active: Option<f64>,
    /// Mean power of the job's nodes together (W), from their BMCs, and its energy over the window; only
    /// when the job held its nodes whole (a BMC reads the whole node, other jobs' share too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_energy_kwh: Option<f64>,
    /// What part of the run the GPU samples cover: every figure above (idle hours, means, energy) is
    /// of that part alone, never extrapolated to the rest. Absent when no sample covers the job (and
    /// in reports archived before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<TelemetryCoverage>,
}

/// A coverage share at or above this is the whole run (a scrape or two missing at its edges): the
/// server's verdicts and the page's totals say "part of the run" only below it.
pub const WHOLE_COVERAGE_SHARE: f64 = 0.95;

/// The part of a job's run its GPU samples cover.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TelemetryCoverage {
    /// GPU-hours with samples, on the GPUs known to be the job's (of `gpu_hours`).
    pub measured_gpu_hours: f64,
    /// `measured_gpu_hours` over the job's GPU-hours on the GPUs known to be its own, 0–1.
    pub share: f64,
    /// The first and last sampled moments.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// A finding with the evidence that triggered it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdict {
    pub kind: VerdictKind,
    /// `info`, `warning` or `critical`.
    pub severity: Severity,
    pub message: String,
    pub evidence: Vec<String>,
    /// What the job's owner can do about it, where something can be done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

/// Whether a count of hours is zero (left out of the JSON then).
fn is_zero(value: &f64) -> bool {
    *value == 0.0
}
