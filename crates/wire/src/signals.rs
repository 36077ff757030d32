//! A job's log lines (VictoriaLogs) and CPU profile (Pyroscope).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::{LogKind, LogsStatus, ProfileStatus};

/// `GET /api/v1/jobs/{job_id}/logs`: the job's log lines from the site's VictoriaLogs, its nodes only,
/// its window only, with the lines that matter pulled up front.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobLogs {
    /// `ok`, `unavailable` (VictoriaLogs did not answer in time or refused) or `not_configured`.
    pub status: LogsStatus,
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
    /// True when the lines were limited to the job's own: the viewer is not staff and another tenant's
    /// job shared one of its nodes, so there (and then) only lines naming the job, its user or its
    /// cgroup are shown. On a node the job held alone every line is.
    #[serde(default)]
    pub limited_to_job: bool,
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
    pub kind: LogKind,
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
    pub status: ProfileStatus,
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
