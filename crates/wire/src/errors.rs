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
    /// The job listing only, while the archiver's first round since the server started makes reports:
    /// how far it is. A job without a report has no efficiency or blame in the listing until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archiving: Option<Archiving>,
}

/// How far the archiver's first round since the server started is in making the reports of ended jobs
/// (those within the backfill window that have none yet: GPU jobs, and any job that ended badly).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Archiving {
    /// When the round started (Unix seconds).
    pub since: i64,
    /// Ended jobs found without a report so far.
    pub due: u64,
    /// Whether `due` is the whole round's count: its first pass reads every job of the window, making
    /// the reports of the jobs that ended badly; the second makes the rest, newest first.
    pub counted: bool,
    /// Reports made so far (with metrics, or "no data").
    pub made: u64,
}
