//! Showback and statistics of a window (`/api/v1/usage`, `/api/v1/stats`): GPU-hours allocated and
//! idle per account or user, energy, failures by blame, queue wait; top lists and histograms.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a usage table's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum UsageGrouping {
    /// `account`: one row per account, its sub-accounts' usage included (as `sreport` rolls it up).
    #[default]
    Account,
    /// `user`: one row per user, across their accounts.
    User,
}

/// A count per failure blame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BlameSplit {
    pub infrastructure: f64,
    pub application: f64,
    /// Ended badly with no report saying whose fault it was, or one that says `unknown`.
    pub unknown: f64,
}

/// One account's or user's usage in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageRow {
    /// The account or user name; `total` for the window's total.
    pub name: String,
    /// An account's parent account (absent for users, the total and top-level accounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Jobs that held an allocation in the window.
    pub jobs: u64,
    /// Of them, jobs with GPUs.
    pub gpu_jobs: u64,
    /// GPU-hours allocated inside the window (`AllocTRES` `gres/gpu` × the part of each job's run
    /// inside it), as `sreport` counts them.
    pub gpu_hours: f64,
    /// Of `gpu_hours`, those whose utilisation is known (an archived report with metrics, or a running
    /// job's means so far); a job's hours on a shared node's GPUs that no record placed as its own
    /// are not.
    pub gpu_hours_measured: f64,
    /// Idle GPU-hours among the measured ones: allocated × (1 − mean utilisation). Absent when none
    /// is measured: unknown, never 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_gpu_hours: Option<f64>,
    /// Mean GPU utilisation (%), weighted by measured GPU-hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_gpu_util: Option<f64>,
    /// Mean tensor activity (%), weighted by measured GPU-hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_tensor_active: Option<f64>,
    /// Energy (kWh) of the GPUs from archived reports, the part inside the window; absent when no
    /// report has energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_kwh: Option<f64>,
    /// GPU-hours whose energy is known (the rest is not in `energy_kwh`).
    pub gpu_hours_with_energy: f64,
    /// `energy_kwh` × `[usage] co2_g_per_kwh`, in kg; absent without either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub co2_kg: Option<f64>,
    /// Jobs that ended badly in the window, by whose fault.
    pub failed_jobs: BlameSplit,
    /// Their GPU-hours inside the window, by whose fault.
    pub failed_gpu_hours: BlameSplit,
    /// Mean queue wait (start − submit, seconds) of the jobs that started in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_wait_s: Option<f64>,
    /// Median queue wait (seconds) of the same jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_wait_s: Option<f64>,
}

/// `GET /api/v1/usage`: usage per account or user in a window, as the viewer may see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageReport {
    pub cluster: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub by: UsageGrouping,
    /// The grid intensity CO₂ is counted at (g/kWh, `[usage] co2_g_per_kwh`); absent: not configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub co2_g_per_kwh: Option<f64>,
    /// Largest allocated GPU-hours first.
    pub rows: Vec<UsageRow>,
    /// Every visible job of the window once (an account row includes its sub-accounts, so rows do not
    /// add up to it).
    pub total: UsageRow,
}

/// One entry of a top list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopEntry {
    pub name: String,
    pub gpu_hours: f64,
}

/// One histogram bin `[low, high)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistogramBin {
    pub low: f64,
    pub high: f64,
    pub jobs: u64,
}

/// A histogram of jobs, log-spaced bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Histogram {
    /// `gpus`, `seconds`.
    pub unit: String,
    pub bins: Vec<HistogramBin>,
}

/// `GET /api/v1/stats`: who used and who idled the most GPU-hours, and the shape of the window's jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageStats {
    pub cluster: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Top 10 by allocated GPU-hours in the window.
    pub top_users: Vec<TopEntry>,
    pub top_accounts: Vec<TopEntry>,
    /// Top 10 by idle GPU-hours (measured ones only).
    pub top_idle_users: Vec<TopEntry>,
    pub top_idle_accounts: Vec<TopEntry>,
    /// GPU jobs that held an allocation in the window, by GPUs allocated.
    pub job_gpus: Histogram,
    /// Jobs that ended in the window, by run time (end − start).
    pub run_time: Histogram,
    /// Jobs that started in the window, by queue wait (start − submit).
    pub queue_wait: Histogram,
}
