//! Advice at submission: one line from the submitting user's own history of similar jobs, and the
//! user's choice to hear it or not.

use serde::{Deserialize, Serialize};

/// What a piece of advice is about.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AdviceKind {
    /// The last runs left most of their GPUs idle.
    IdleGpus,
    /// The time limit asked is far above what the last runs took.
    TimeLimit,
    /// The last runs ran out of memory.
    OutOfMemory,
    /// The last runs failed.
    Failures,
    /// The last runs were stopped at their time limit.
    Timeouts,
}

/// One line of advice and the evidence behind it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Advice {
    pub kind: AdviceKind,
    /// The line the plugin prints, e.g. "your last 5 runs of `train` used at most 2 of 8 GPUs".
    pub line: String,
    /// How many of the user's finished runs of the same job name the line rests on.
    pub runs: u32,
}

/// `GET /api/v1/advice`: at most one line, or none (`advice: null`) when there is nothing worth
/// saying, the user or the site turned advice off, or the history could not be read in time.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AdviceAnswer {
    pub advice: Option<Advice>,
}

/// `GET`/`PUT /api/v1/me/advice`: whether the signed-in user hears advice when they submit.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AdviceSetting {
    pub enabled: bool,
}
