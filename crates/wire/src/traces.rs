//! Trace summaries sent by the node-side collector, and where a job's traced GPU time went.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::TraceBottleneck;

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
    /// A `TraceCategory` word, read as text: a record with another word is refused on its own (in
    /// `rejected`), not with its whole batch.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::TraceCategory))]
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
    pub kind: TraceBottleneck,
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
