//! The one error envelope of every failure, and the page of a listing.

use serde::{Deserialize, Serialize};

/// One error envelope for every failure, rejected input included.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The body of [`ErrorEnvelope`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// Machine-readable code: `invalid_parameter`, `unauthorized`, `not_found`, `source_unavailable`, `internal`.
    pub code: String,
    /// A sentence for a person.
    pub message: String,
    /// The query or path parameter at fault, for `invalid_parameter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
}

/// One page of a listing: keyset-paginated (`next_cursor`), or, for a sorted job listing, one slice
/// of the whole ordered window (`total`, `offset`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor=` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// A sorted listing's count of every item of the window with its filters, on every page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// A sorted listing's position of this page's first item in the whole order (0: the first page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}
