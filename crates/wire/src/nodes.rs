//! Nodes as slurmdbd knows them, and the GPUs of a cluster: who held them, how busy they were.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::{EvidenceStrength, ValuesState};

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
    pub status: ValuesState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub values: Vec<GpuValue>,
}

/// `GET /api/v1/gpus/values`: one metric of the GPUs the viewer may read, from the latest readings at
/// or before the moment asked (never older than `max_age_s`), with how old they are and, for XID, what
/// each code present means.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuReadings {
    /// The readings; their `at` is the moment asked for.
    #[serde(flatten)]
    pub values: GpuValues,
    /// When the readings were taken: the latest sample of the metric at or before `at`. Absent when
    /// there was none within `max_age_s` (then no GPU has a reading: none is monitored then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readings_at: Option<DateTime<Utc>>,
    /// How much older than `at` a reading may be (the server's `readings_max_age_s`).
    pub max_age_s: u64,
    /// For `xid`: how each code present reads, as the job report's failure evidence reads it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xid_codes: Vec<XidCode>,
}

/// What an XID code means: NVIDIA's catalogue splits hardware and driver faults (`strong`) from faults
/// a program causes (`application`); other codes are `weak` (either).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct XidCode {
    pub code: u32,
    pub strength: EvidenceStrength,
    /// `GPU has fallen off the bus`, `GPU memory page fault (usually an illegal address in the program)`.
    pub meaning: String,
}

/// One GPU's value: the mean over the last scrapes before the moment (XID: the last code seen).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuValue {
    pub node: String,
    pub gpu: u16,
    pub value: f64,
}

/// `GET /api/v1/gpus/held?at=`: a GPU the Slurm plugin recorded for a job running at that moment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeldGpu {
    pub job_id: u32,
    pub node: String,
    pub gpu: u16,
}

/// `GET /api/v1/gpus/busy?at=`: on one node, how many GPUs jobs the viewer may not see held at that
/// moment. A count only: whose jobs they were never leaves the server.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BusyGpus {
    pub node: String,
    pub gpus: u64,
}
