//! A node's page (`GET /api/v1/nodes/{name}`) and the health badge of every node (`GET
//! /api/v1/nodes/health`): its state and events, its GPUs' error counters and clock-event reasons,
//! temperature and power, its ping-mesh links, and the jobs running when each fault happened.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::nodes::{NodeEvent, XidCode};
use crate::report::MetricSeries;
use crate::vocabulary::{Blame, EvidenceSource, EvidenceStrength, ValuesState};

/// How healthy a node is: `ok`, `warn` (worth a look) or `fault` (broken or failing jobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HealthLevel {
    /// `ok`: nothing found.
    Ok,
    /// `warn`: a drain, thermal or power slowdowns, correctable errors, a lossy link.
    Warn,
    /// `fault`: down, a hardware XID, an uncorrectable ECC error, a failed row remap.
    Fault,
}

impl HealthLevel {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fault => "fault",
        }
    }
}

/// A node's health: the worst level found and each reason for it, worst first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeHealth {
    pub level: HealthLevel,
    pub reasons: Vec<String>,
}

/// One node's health badge for the grid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeHealthItem {
    pub node: String,
    pub health: NodeHealth,
}

/// Every node's health over a window (`GET /api/v1/nodes/health`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodesHealth {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// `unavailable` when VictoriaMetrics did not answer: the levels then come from slurmdbd alone.
    pub metrics: ValuesState,
    pub nodes: Vec<NodeHealthItem>,
}

/// Why a GPU's clocks were held below their maximum (NVML's clocks-event reasons bitmask, as
/// dcgm-exporter's `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` / `DCGM_FI_DEV_CLOCKS_EVENT_REASONS` report it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ClockEventReason {
    /// `gpu_idle` (0x1): nothing runs.
    GpuIdle,
    /// `applications_clocks_setting` (0x2): clocks set by the administrator.
    ApplicationsClocksSetting,
    /// `sw_power_cap` (0x4): the software power limit.
    SwPowerCap,
    /// `hw_slowdown` (0x8): hardware slowdown (thermal, power brake or an external signal).
    HwSlowdown,
    /// `sync_boost` (0x10): held to the clocks of the GPUs it is synced with.
    SyncBoost,
    /// `sw_thermal_slowdown` (0x20): the software thermal limit.
    SwThermalSlowdown,
    /// `hw_thermal_slowdown` (0x40): the hardware thermal limit (too hot).
    HwThermalSlowdown,
    /// `hw_power_brake_slowdown` (0x80): the power brake (an external power supply signal).
    HwPowerBrakeSlowdown,
    /// `display_clock_setting` (0x100): the display clock.
    DisplayClockSetting,
}

/// One GPU's health counters over the window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeGpu {
    pub gpu: u16,
    /// XID codes seen in the window, each as the job report reads it.
    pub xid_codes: Vec<XidCode>,
    /// ECC errors: single-bit (corrected) and double-bit (uncorrected), since the driver loaded
    /// (volatile) and over the GPU's life (aggregate). Absent: not exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_sbe_volatile: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_dbe_volatile: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_sbe_aggregate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_dbe_aggregate: Option<f64>,
    /// Rows remapped after correctable / uncorrectable errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows_correctable: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows_uncorrectable: Option<f64>,
    /// A row remap failed (the GPU needs service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_remap_failure: Option<bool>,
    /// A remap waits for the next GPU reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_remap_pending: Option<bool>,
    /// Clock-event reasons seen at any time in the window.
    pub clock_event_reasons: Vec<ClockEventReason>,
    /// Clock-event reasons of the latest reading.
    pub clock_event_reasons_now: Vec<ClockEventReason>,
    /// Seconds of the window the clocks were held down by the power limit / by temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_violation_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_violation_s: Option<f64>,
    /// Highest temperature (°C) and power (W) in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_max: Option<f64>,
}

/// One GPU's downsampled series of a metric (temperature, power).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeGpuSeries {
    pub gpu: u16,
    pub series: MetricSeries,
}

/// One ping-mesh path from or to the node's ToR over the window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeLink {
    pub source_tor: String,
    pub target_tor: String,
    /// Share of probes lost (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// 99th percentile round-trip time, in ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_p99_ns: Option<f64>,
    /// Loss or RTT above the site's thresholds.
    pub unhealthy: bool,
}

/// A job running on the node when a fault happened, with its failure verdict if its report is
/// archived.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FaultJob {
    pub job_id: u32,
    pub job_name: String,
    pub user: String,
    pub account: String,
    /// As sacct prints it.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<Blame>,
}

/// One fault on the node: an XID, an uncorrectable ECC error or failed remap, a drain or down.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeFault {
    /// The fault showed between `from` and `at` (a reading's resolution; equal for a node event).
    pub from: DateTime<Utc>,
    pub at: DateTime<Utc>,
    /// `xid`, `ecc` or `node_event`.
    pub source: EvidenceSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u16>,
    pub detail: String,
    pub strength: EvidenceStrength,
    /// The jobs running then that the viewer may see.
    pub jobs: Vec<FaultJob>,
    /// How many other jobs ran then, which the viewer may not see (counted, never named).
    pub other_jobs: u32,
}

/// `GET /api/v1/nodes/{name}`: one node over a window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodePage {
    pub cluster: String,
    pub node: String,
    /// Now, as slurmdbd records it (`IDLE`, `ALLOCATED`, `DOWN`, `IDLE+DRAIN`, …).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_since: Option<DateTime<Utc>>,
    pub running_jobs: u32,
    pub health: NodeHealth,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// The node's drains, downs and failures overlapping the window, oldest first.
    pub events: Vec<NodeEvent>,
    /// `unavailable` (with `metrics_message`) when VictoriaMetrics did not answer.
    pub metrics: ValuesState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_message: Option<String>,
    pub gpus: Vec<NodeGpu>,
    /// Temperature (°C) and power (W) per GPU, downsampled. Staff only: they show other tenants'
    /// work; a tenant gets none (see `timelines_hidden`).
    pub temperature: Vec<NodeGpuSeries>,
    pub power: Vec<NodeGpuSeries>,
    pub timelines_hidden: bool,
    /// The node's rack (ToR) and its ping-mesh paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tor: Option<String>,
    pub links: Vec<NodeLink>,
    /// Faults in the window, newest first, with the jobs then running.
    pub faults: Vec<NodeFault>,
    /// More faults happened than are listed.
    pub faults_truncated: bool,
}
