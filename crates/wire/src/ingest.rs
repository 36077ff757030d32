//! What the Slurm plugin sends: the GPUs each job was given on each node.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
    /// The records refused, each with the field at fault and why; the others were stored. Absent when
    /// every record was stored. (A batch with no valid record at all is a 400 instead.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<GpuAllocationRejection>,
}

/// One refused record of a [`GpuAllocationBatch`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuAllocationRejection {
    /// Its index in `records`.
    pub index: u64,
    /// The field at fault, e.g. `records[3].at`.
    pub field: String,
    pub reason: String,
}
