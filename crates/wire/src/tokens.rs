//! Personal API tokens and their audit log; shared report links.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::TokenState;

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

/// `GET /api/v1/tokens`: one of the user's tokens (staff: anyone's), without its secret.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenInfo {
    pub id: u64,
    /// Whose it is (the viewer, but for staff's `?all=true`).
    pub user: String,
    pub name: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub revoked: Option<DateTime<Utc>>,
    pub last_used: Option<DateTime<Utc>>,
    /// `live`, `expired` or `revoked`.
    pub state: TokenState,
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

/// `POST /api/v1/jobs/{job_id}/shares`: a read-only link to one job's report.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct NewShare {
    /// Days until the link expires (1 to 90); 7 when absent.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
    /// Whom or what it is for (a ticket number, a colleague), up to 200 characters; shown on the shared page.
    #[serde(default)]
    pub note: Option<String>,
}

/// The answer to `POST /api/v1/jobs/{job_id}/shares`: the only time the link is shown.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CreatedShare {
    pub id: u64,
    /// `/shared/sls_…` on this site: whoever has it reads this job's report, as its owner sees it, until
    /// it expires or is revoked. Every opening is logged.
    pub path: String,
    pub expires: DateTime<Utc>,
}

/// `GET /api/v1/jobs/{job_id}/shares`: one link made to the job, without its secret.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShareInfo {
    pub id: u64,
    pub cluster: String,
    pub job_id: String,
    /// Who made it (the job's owner, or staff).
    pub created_by: String,
    pub note: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub revoked: Option<DateTime<Utc>>,
    /// How many times it was opened, and when last.
    pub uses: u64,
    pub last_used: Option<DateTime<Utc>>,
    /// `live`, `expired` or `revoked`.
    pub state: TokenState,
}
