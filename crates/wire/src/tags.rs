//! Job tags: words users put on their own jobs (staff on any) and the rules put on jobs from what
//! they ran (`pytorch`, `nccl-tests`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Who set a tag.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TagOrigin {
    /// A person (named in `set_by`); they, the job's owner or staff may remove it.
    User,
    /// The rules, from the job's batch script or its traced kernels; recomputed, never removed by hand.
    Rule,
}

/// One tag of a job.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobTag {
    /// 1–32 characters of `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit.
    pub tag: String,
    pub origin: TagOrigin,
    /// The user who set it; absent for a rule's tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_by: Option<String>,
    pub set_at: DateTime<Utc>,
}

/// `GET /api/v1/jobs/{job_id}/tags`: a job's tags and whether the viewer may change them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobTags {
    pub cluster: String,
    pub job_id: String,
    /// By name.
    pub tags: Vec<JobTag>,
    /// Whether the viewer may add and remove tags here (the job's owner or staff, signed in at the site).
    pub editable: bool,
    /// Most tags a job holds (people's and the rules' together).
    pub max_tags: u32,
}
