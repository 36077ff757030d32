//! Personal API tokens and their audit log.

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
