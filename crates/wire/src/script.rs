//! A job's batch script, submit line and submission environment (`GET /api/v1/jobs/{job_id}/script`),
//! as slurmdbd stores them where the site sets `AccountingStoreFlags=job_script,job_env`.

use serde::{Deserialize, Serialize};

/// What the job was submitted with. Scripts and environments may hold secrets: the script and the submit
/// line reach only the job's owner, the coordinators of its account and staff; the environment only the
/// owner and staff.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobScript {
    pub job_id: String,
    pub cluster: String,
    /// The job's owner: with staff, the one who may see the environment.
    pub user: String,
    /// The job's account: its coordinators may see the script and the submit line.
    pub account: String,
    /// sacct's `SubmitLine`: the command that submitted the job (empty where slurmdbd has none).
    pub submit_line: String,
    /// The batch script; absent where slurmdbd stored none (not a batch job, or the site does not set
    /// `AccountingStoreFlags=job_script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<StoredText>,
    /// The environment at submission (`NAME=value` lines), when `environment_access` is `shown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<StoredText>,
    /// Whether `environment` is given: `shown`, `withheld` (the viewer is neither the owner nor staff)
    /// or `not_stored`.
    pub environment_access: EnvironmentAccess,
}

/// A stored text, cut at the server's cap.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredText {
    /// The text, or its first `shown_chars` characters when `truncated`.
    pub text: String,
    /// Characters in `text`.
    pub shown_chars: u64,
    /// Characters in the whole stored text.
    pub total_chars: u64,
    /// Whether `text` stops before the end of what slurmdbd holds.
    pub truncated: bool,
}

/// Why a job's environment is or is not in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentAccess {
    /// `shown`: the viewer is the owner or staff, and slurmdbd stored it.
    Shown,
    /// `withheld`: the viewer may see the job (a coordinator of its account) but not its environment.
    Withheld,
    /// `not_stored`: slurmdbd holds none (the site does not set `AccountingStoreFlags=job_env`).
    NotStored,
}
