//! JSON wire types of the slurmlens REST API (`/api/v1`), shared by the server, the web front end and
//! the Slurm plugin. Serde and chrono only: this crate is the boundary, it holds no logic. The feature
//! `openapi`, which only the server enables, adds `utoipa::ToSchema` derives for the OpenAPI document.
//!
//! Field names follow `sacct`'s column names in snake_case where one exists (`job_id`, `alloc_tres`,
//! `elapsed_raw`, `node_list`), so a user who knows `sacct -o` can read a response without a manual.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One error envelope for every failure, rejected input included.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The body of [`ErrorEnvelope`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// Machine-readable code: `invalid_parameter`, `unauthorized`, `not_found`, `source_unavailable`, `internal`.
    pub code: String,
    /// A sentence for a person.
    pub message: String,
    /// The query or path parameter at fault, for `invalid_parameter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
}

/// One page of a keyset-paginated listing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor=` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A job allocation as `sacct -X` shows it, one row per job record (array task, het component).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Job {
    /// sacct's `JobID`: `123`, `123_4` (array task), `123_[5-9%2]` (pending array tasks), `8+1` (het).
    pub job_id: String,
    /// sacct's `JobIDRaw`: the job's own numeric id.
    pub job_id_raw: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub het_job_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub het_job_offset: Option<u32>,
    pub cluster: String,
    pub job_name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub account: String,
    pub partition: String,
    pub qos: String,
    /// sacct state name: `COMPLETED`, `OUT_OF_MEMORY`, `REQUEUED`, ….
    pub state: String,
    /// uid that cancelled the job (sacct prints `CANCELLED by <uid>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by_uid: Option<u32>,
    /// `N:S`: exit status and terminating signal of the batch script.
    pub exit_code: String,
    /// `N:S`: the highest exit code of all steps.
    pub derived_exit_code: String,
    pub submit: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// sacct's `Elapsed`, `[D-]HH:MM:SS`; running jobs count up to now.
    pub elapsed: String,
    pub elapsed_raw: u64,
    /// sacct's `Timelimit`: `[D-]HH:MM:SS`, `UNLIMITED` or `Partition_Limit`.
    pub timelimit: String,
    /// Minutes; absent when unlimited or not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timelimit_raw: Option<u32>,
    /// Hostlist expression as sacct prints it (`gpu[001-004]`, `None assigned`).
    pub node_list: String,
    pub alloc_nodes: u32,
    pub alloc_cpus: u64,
    pub alloc_gpus: u64,
    /// sacct's `AllocTRES`: `billing=2,cpu=2,gres/gpu=2,mem=1000M,node=1`.
    pub alloc_tres: String,
    /// sacct's `ReqTRES`.
    pub req_tres: String,
    /// sacct's `ReqMem`: `1000M`, `500Mc` (per CPU).
    pub req_mem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Mean GPU utilisation (%) over the job, from its archived report; absent until it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_gpu_util: Option<f64>,
    /// Mean tensor-pipe activity (%) over the job, from its archived report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_tensor_active: Option<f64>,
    /// For a job that ended badly: `infrastructure`, `application` or `unknown`, from its archived
    /// report (NODE_FAIL and BOOT_FAIL say `infrastructure` on Slurm's word alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<String>,
}

/// One job with its steps and its allocation per node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: Job,
    pub work_dir: String,
    pub submit_line: String,
    pub nodes: Vec<NodeAllocation>,
    pub steps: Vec<Step>,
}

/// What one job held on one node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeAllocation {
    pub node: String,
    /// GPUs on this node; absent when slurmdbd's total cannot be split exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u64>,
    /// How `gpus` was found: `single_node` or `even_split` (slurmdbd keeps only the job total).
    pub gpus_source: String,
}

/// A job step as `sacct` shows it (`123.batch`, `123.extern`, `123.0`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    pub job_id: String,
    pub step_name: String,
    pub state: String,
    pub exit_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    pub elapsed: String,
    pub elapsed_raw: u64,
    pub node_list: String,
    pub ntasks: u32,
    pub alloc_tres: String,
    /// Peak resident set size of any task, bytes (from `TRESUsageInMax`), once the step ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<u64>,
    /// User plus system CPU time, seconds.
    pub total_cpu_s: f64,
}

/// A node as slurmdbd knows it now: its open events and the jobs running on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Node {
    pub node: String,
    /// `IDLE`, `ALLOCATED`, `DOWN`, `IDLE+DRAIN`, ….
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_since: Option<DateTime<Utc>>,
    pub running_jobs: u32,
    pub alloc_gpus: u64,
}

/// A node event from slurmdbd's event table (`sacctmgr show event`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeEvent {
    /// Empty for a cluster-level event.
    pub node: String,
    pub state: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_uid: Option<u32>,
    pub start: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
}

/// `GET /api/v1/health`: which sources answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    pub status: String,
    pub slurmdbd: String,
}

/// `GET /api/v1/jobs/{job_id}/report`: how a job used every GPU and link it was given.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobReport {
    pub job: Job,
    /// `live` (running, computed now), `final` (ended, computed now) or `archived` (stored at job end).
    pub source: String,
    pub generated_at: DateTime<Utc>,
    /// The window the metrics cover: the job's start to its end (or now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<DateTime<Utc>>,
    pub metrics: MetricsStatus,
    pub gpus: Vec<GpuReport>,
    pub nodes: Vec<NodeNetworkReport>,
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
}

/// A job's file-system I/O (Lustre exporter).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IoReport {
    /// `jobstats`: the file system's statistics of this job alone (Lustre `jobid_var`); `nodes`: the
    /// Lustre clients of the job's nodes, which include any other job running there.
    pub source: String,
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
    pub blame: String,
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
    pub source: String,
    /// A node, `node gpu N`, or a ping-mesh path `A01 → A02`.
    pub place: String,
    pub detail: String,
    /// `strong`, `weak` or `application`.
    pub strength: String,
}

/// Bursts of one node in one direction: what 100 ms peaks show that the scrape average hides.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeBursts {
    pub node: String,
    /// `tx` or `rx`.
    pub direction: String,
    /// `measured` (a node agent exports peak rates) or `unknown` (counters only: the peak cannot be known).
    pub status: String,
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
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Seconds between points of the series in this report.
    pub step_s: u64,
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
    pub attribution: String,
    /// True when only node-level evidence exists (the job had part of a shared node).
    pub uncertain: bool,
    /// Per metric (`gpu_util`, `tensor_active`, …): mean and peak over the window.
    pub summary: Vec<MetricSummary>,
    /// Per metric: `[epoch seconds, value]` points, downsampled.
    pub series: Vec<MetricSeries>,
    /// XID errors seen on this GPU during the window.
    pub xid_events: Vec<XidEvent>,
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
    pub idle_gpu_hours: f64,
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
    /// Mean power of the job's nodes together (W), from their BMCs, and its energy over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_energy_kwh: Option<f64>,
}

/// A finding with the evidence that triggered it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdict {
    /// `idle_gpus`, `low_tensor_activity`, `memory_nearly_full`, `unbalanced_gpus`, `xid_errors`, `good`.
    pub kind: String,
    /// `info`, `warning` or `critical`.
    pub severity: String,
    pub message: String,
    pub evidence: Vec<String>,
}

/// `POST /api/v1/gpu_allocations`: records from the Slurm plugin, one per job and node; several when
/// records spooled during an outage are delivered late.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuAllocationBatch {
    pub records: Vec<GpuAllocationRecord>,
}

/// What one node saw of one job: the GPUs Slurm gave the job there, when it started or ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuAllocationRecord {
    pub cluster: String,
    /// The node as Slurm names it (`SLURMD_NODENAME`).
    pub node: String,
    pub job_id: u32,
    /// `job` for the whole allocation on the node, else sacct's step suffix (`batch`, `extern`, `0`, …).
    pub step: String,
    pub event: GpuAllocationEvent,
    /// When the node saw the event.
    pub at: DateTime<Utc>,
    /// Slurm's GPU indices on the node (`SLURM_JOB_GPUS`, `IDX:` in `scontrol show job -d`).
    pub gpus: Vec<AllocatedGpu>,
    /// The job's cgroup, relative to the cgroup mount (`/slurm/uid_1001/job_35`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_path: Option<String>,
}

/// Which end of a job's life a [`GpuAllocationRecord`] reports.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GpuAllocationEvent {
    Start,
    End,
}

/// One GPU of a [`GpuAllocationRecord`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AllocatedGpu {
    pub index: u16,
    /// `GPU-…` or `MIG-…`, when `nvidia-smi` was there to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// The answer to an accepted [`GpuAllocationBatch`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuAllocationReceipt {
    /// Records stored (a replayed record is stored again, changing nothing).
    pub accepted: u64,
}

/// `GET /api/v1/jobs/{job_id}/gpus`: the GPUs the plugin recorded for a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobGpus {
    pub cluster: String,
    pub job_id: u32,
    pub gpus: Vec<JobGpu>,
}

/// One GPU a job (or step) held on one node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobGpu {
    pub node: String,
    pub index: u16,
    pub step: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_path: Option<String>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
}

/// `GET /api/v1/gpus/values`: one metric of every GPU of a cluster at one moment (the grid's colours).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuValues {
    /// The catalogue key (`gpu_util`, `tensor_active`, …, or `xid`).
    pub metric: String,
    pub unit: String,
    pub at: DateTime<Utc>,
    /// `ok`, or `unavailable` with `message` (the page then colours by job only).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub values: Vec<GpuValue>,
}

/// One GPU's value: the mean over the last scrapes before the moment (XID: the last code seen).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuValue {
    pub node: String,
    pub gpu: u16,
    pub value: f64,
}

/// `POST /api/v1/traces`: one node's trace summaries (from the node-side eBPF collector), sent with
/// `Authorization: Bearer <the cluster's ingest secret>`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceBatch {
    /// Must be the cluster the secret belongs to.
    pub cluster: String,
    /// The node as Slurm names it (`SLURMD_NODENAME`).
    pub node: String,
    pub records: Vec<TraceRecord>,
}

/// What one process did on one GPU during one interval, for one category and name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceRecord {
    /// Start of the aggregation interval (whole seconds, RFC 3339).
    pub interval_start: DateTime<Utc>,
    /// Length of the interval in seconds.
    pub interval_s: u32,
    /// Slurm's GPU index on the node.
    pub gpu: u16,
    pub pid: u32,
    /// The process's cgroup (`/proc/<pid>/cgroup`); names the job unless `job_id` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<u32>,
    /// `cuda_api`, `kernel`, `memcpy`, `nccl` or `sync`.
    pub category: String,
    /// Function, kernel, memcpy kind (`HtoD`, `DtoH`, `DtoD`, `PtoP`) or NCCL operation (`AllReduce`, …).
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    #[serde(default)]
    pub bytes: u64,
}

/// The answer to a trace batch or nsys import: what was stored, and each record refused and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceReceipt {
    /// New rows stored.
    pub stored: u64,
    /// Valid records already stored (a replayed batch), which changed nothing.
    pub duplicates: u64,
    pub rejected: Vec<TraceRejection>,
}

/// One refused record of a [`TraceBatch`] (index into `records`) or nsys CSV (data row, from 0).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceRejection {
    pub index: u64,
    pub reason: String,
}

/// `GET /api/v1/jobs/{job_id}/traces`: where a job's traced GPU time went.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobTraces {
    pub cluster: String,
    pub job_id: u32,
    /// The whole job: every GPU's activity summed.
    pub total: TraceBreakdown,
    /// One entry per traced GPU, ordered by node and index.
    pub gpus: Vec<GpuTraceBreakdown>,
    /// The job's 10 kernels with the most GPU time (NCCL kernels are under `top_collectives`).
    pub top_kernels: Vec<TraceTop>,
    /// The job's 10 NCCL operations with the most time.
    pub top_collectives: Vec<TraceTop>,
}

/// One GPU's share of traced time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuTraceBreakdown {
    pub node: String,
    pub gpu: u16,
    #[serde(flatten)]
    pub breakdown: TraceBreakdown,
}

/// Traced time and how it divides; shares sum to 1 (overlapping activities are scaled together).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceBreakdown {
    pub traced_s: f64,
    pub compute_share: f64,
    pub communication_share: f64,
    pub memcpy_share: f64,
    pub sync_share: f64,
    pub idle_share: f64,
    pub kernel_ns: u64,
    pub nccl_ns: u64,
    pub memcpy_ns: u64,
    pub sync_ns: u64,
    /// Absent when nothing was traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<TraceVerdict>,
}

/// `compute-bound`, `communication-bound`, `input-bound`, `memory-copy-bound` or `gpus-idle`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceVerdict {
    pub kind: String,
    pub evidence: Vec<String>,
}

/// A kernel or NCCL operation, summed over the job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceTop {
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub bytes: u64,
}

/// `GET /api/v1/gpus/held?at=`: a GPU the Slurm plugin recorded for a job running at that moment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeldGpu {
    pub job_id: u32,
    pub node: String,
    pub gpu: u16,
}

/// `POST /api/v1/tokens`: a personal API token to make for the signed-in user.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// What the user calls it (1–64 characters), e.g. `grafana` or `ci`.
    pub name: String,
    /// Days until it expires (1 to the site's maximum, 365 by default); 90 when absent.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
}

/// The answer to `POST /api/v1/tokens`: the only time the token itself is shown.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CreatedToken {
    pub id: u64,
    pub name: String,
    /// `slt_…`: send it as `Authorization: Bearer <token>`. Read-only: it reads what its user may see.
    pub token: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
}

/// `GET /api/v1/tokens`: one of the user's tokens, without its secret.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenInfo {
    pub id: u64,
    pub name: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub revoked: Option<DateTime<Utc>>,
    pub last_used: Option<DateTime<Utc>>,
    /// `live`, `expired` or `revoked`.
    pub state: String,
}

/// `GET /api/v1/tokens/{id}/uses`: one request made with a token, from the audit log.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenUse {
    pub at: DateTime<Utc>,
    pub method: String,
    /// Path and query as asked.
    pub path: String,
    /// The status answered (refusals included).
    pub status: u16,
}

/// `GET /api/v1/gpus/busy?at=`: on one node, how many GPUs jobs the viewer may not see held at that
/// moment. A count only: whose jobs they were never leaves the server.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BusyGpus {
    pub node: String,
    pub gpus: u64,
}

/// `GET /api/v1/jobs/{job_id}/logs`: the job's log lines from the site's VictoriaLogs, its nodes only,
/// its window only, with the lines that matter pulled up front.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobLogs {
    /// `ok`, `unavailable` (VictoriaLogs did not answer in time or refused) or `not_configured`.
    pub status: String,
    /// Why the status is not `ok`, for a person.
    #[serde(default)]
    pub message: Option<String>,
    /// The LogsQL sent for the window's lines (built by the server; shown for transparency).
    #[serde(default)]
    pub query: Option<String>,
    /// The LogsQL sent for the important lines (the same scope, narrowed to the words classified).
    #[serde(default)]
    pub important_query: Option<String>,
    /// The window asked: the job's start and end (now while it runs), a minute of margin each side.
    #[serde(default)]
    pub window_start: Option<DateTime<Utc>>,
    #[serde(default)]
    pub window_end: Option<DateTime<Utc>>,
    /// The lines that matter (XIDs, NCCL errors, OOM kills, link downs, Slurm about this job), in time order.
    pub important: Vec<ImportantLogLine>,
    /// The window's lines in time order (at most `limit`).
    pub lines: Vec<LogLine>,
    /// True when VictoriaLogs had more lines than `limit`: the latest `limit` are shown.
    pub truncated: bool,
}

/// One log entry.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LogLine {
    pub time: DateTime<Utc>,
    /// The node that wrote it (the site's node field), when the entry names one.
    #[serde(default)]
    pub node: Option<String>,
    pub message: String,
}

/// A log line that matters, classified.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ImportantLogLine {
    /// `xid`, `nccl_error`, `nccl_timeout`, `oom_kill`, `link_down` or `slurm`.
    pub kind: String,
    pub time: DateTime<Utc>,
    #[serde(default)]
    pub node: Option<String>,
    pub message: String,
    /// The NVIDIA XID code, for `xid`.
    #[serde(default)]
    pub xid: Option<u32>,
}

/// `GET /api/v1/jobs/{job_id}/profile`: where the job's processes spent CPU (or memory), from the
/// site's Grafana Pyroscope (eBPF profiles of the job's cgroup on its nodes).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobProfile {
    /// `ok`, `empty` (no samples in the window), `unavailable` or `not_configured`.
    pub status: String,
    #[serde(default)]
    pub message: Option<String>,
    /// Pyroscope's profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`).
    pub profile_type: String,
    /// The selector sent (built by the server; shown for transparency).
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default)]
    pub window_start: Option<DateTime<Utc>>,
    #[serde(default)]
    pub window_end: Option<DateTime<Utc>>,
    /// Units of the values (`nanoseconds`, `bytes`, `samples`…) as Pyroscope names them.
    #[serde(default)]
    pub units: Option<String>,
    /// Everything sampled (the flame graph's root).
    pub total: u64,
    /// Functions by their own (self) value, largest first.
    pub top_self: Vec<ProfileFunction>,
    /// Functions by the value under them (total, counted once per stack), largest first.
    pub top_total: Vec<ProfileFunction>,
    /// The flame graph as bars, level by level (level 0 is the root), left to right.
    pub flame: Vec<FlameBar>,
}

/// A function of a profile.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProfileFunction {
    pub name: String,
    pub self_value: u64,
    pub total_value: u64,
    /// `self_value / total` of the profile, 0–1.
    pub self_share: f64,
    /// `total_value / total` of the profile, 0–1.
    pub total_share: f64,
}

/// One bar of a flame graph: a function at a depth of the stack, `start`..`start + value` in the
/// root's units.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FlameBar {
    pub level: u32,
    pub start: u64,
    pub value: u64,
    pub self_value: u64,
    pub name: String,
}
