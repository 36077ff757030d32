//! A job against its owner's previous runs of the same work (`GET /api/v1/jobs/{job_id}/previous`), and
//! 2–8 jobs side by side with their timelines aligned from each one's start (`GET /api/v1/compare`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::jobs::Job;

/// How the previous runs were recognised as the same work.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WorkMatch {
    /// Same job name and the same batch script (slurmdbd's stored script, by its hash).
    NameAndScript,
    /// Same job name only: slurmdbd stored no script for this job (not submitted by sbatch, or the
    /// site does not set `AccountingStoreFlags=job_script`).
    NameOnly,
}

/// One run's figures: Slurm's facts (with its archived report's means, as the listing has them) and
/// what the report and trace summaries add.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunFigures {
    pub job: Job,
    /// Seconds from start to end (to now while it runs); absent when it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_time_s: Option<u64>,
    /// Share (0–1) of the traced GPU time spent in NCCL, where trace summaries were sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_share: Option<f64>,
    /// Energy of its GPUs per GPU-hour (Wh), where its report measured energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wh_per_gpu_hour: Option<f64>,
}

/// The median of each figure over the previous runs (each over the runs that have it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunMedians {
    /// Over the completed runs only (a failed run stops early).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_time_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_gpu_util: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_tensor_active: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wh_per_gpu_hour: Option<f64>,
}

/// "Slower than usual", with the evidence either way.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SlowerThanUsual {
    pub slower: bool,
    /// One sentence per figure compared: this run's value, the previous runs' median and spread.
    pub evidence: Vec<String>,
}

/// `GET /api/v1/jobs/{job_id}/previous`: the job and its owner's previous finished runs of the same work.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PreviousRuns {
    /// This run.
    pub this_run: RunFigures,
    pub matched_by: WorkMatch,
    /// The size class: runs with this many GPUs or more …
    pub min_gpus: u64,
    /// … and this many or fewer.
    pub max_gpus: u64,
    /// How far back the runs were looked for.
    pub since: DateTime<Utc>,
    /// Newest first, at most 20.
    pub runs: Vec<RunFigures>,
    pub median: RunMedians,
    /// Absent with fewer than 3 previous runs to compare with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slower_than_usual: Option<SlowerThanUsual>,
}

/// One metric of a job over time, as offsets from the job's start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AlignedSeries {
    /// `gpu_util` (mean across the job's GPUs, %) or `power` (sum across its GPUs, W).
    pub metric: String,
    pub unit: String,
    /// `[seconds since the job's start, value]`.
    pub points: Vec<(i64, f64)>,
}

/// One job of a comparison.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ComparedJob {
    pub figures: RunFigures,
    /// GPU-hours its report counted.
    pub gpu_hours: f64,
    /// Its timelines; empty when the metrics source had none (or did not answer).
    pub timelines: Vec<AlignedSeries>,
}

/// `GET /api/v1/compare`: 2–8 jobs side by side, in the order asked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Comparison {
    pub jobs: Vec<ComparedJob>,
}
