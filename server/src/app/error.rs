//! Why a use case failed, in the application's terms. The HTTP edge maps each variant to a status and
//! the one error envelope; the pages map it to what they render. Driver errors stop at their sources.

use crate::app::report::ReportError;
use crate::sources::slurmdbd::SlurmDbdError;
use crate::store::StoreError;

/// A use case that could not answer.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request named something malformed or out of range; `parameter` says which part.
    #[error("{parameter}: {message}")]
    Invalid { parameter: String, message: String },
    /// No identity where the use case needs one.
    #[error("{0}")]
    Unauthorized(String),
    /// The viewer may see the thing but not do this to it (share a job that is not theirs).
    #[error("{0}")]
    Forbidden(String),
    /// No such thing, or one the viewer may not see (the two are indistinguishable).
    #[error("{0}")]
    NotFound(String),
    /// slurmdbd's database stopped a statement at its time limit: the request asked for too much at
    /// once (a window too wide for its filters). `0` is for the log; the client is told to narrow it.
    #[error("slurmdbd's statement time limit: {0}")]
    QueryTimeout(String),
    /// A data source did not answer; `cause` is for the log, never for the client.
    #[error("{service} is unavailable: {cause}")]
    Unavailable { service: &'static str, cause: String },
    /// A fault of ours or of a source's data; `0` is for the log, never for the client.
    #[error("internal: {0}")]
    Internal(String),
}

impl AppError {
    /// A malformed or out-of-range `parameter`.
    pub fn invalid(parameter: &str, message: impl Into<String>) -> Self {
        Self::Invalid { parameter: parameter.to_string(), message: message.into() }
    }
}

impl From<SlurmDbdError> for AppError {
    fn from(error: SlurmDbdError) -> Self {
        match error {
            SlurmDbdError::Unavailable(cause) => Self::Unavailable { service: "slurmdbd", cause },
            SlurmDbdError::Schema(cause) => Self::Internal(format!("slurmdbd: {cause}")),
            SlurmDbdError::StatementTimeout(cause) => Self::QueryTimeout(cause),
        }
    }
}

impl From<StoreError> for AppError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => Self::Unavailable { service: "slurmlens database", cause },
            StoreError::Query(cause) => Self::Internal(format!("store: {cause}")),
        }
    }
}

impl From<ReportError> for AppError {
    fn from(error: ReportError) -> Self {
        match error {
            ReportError::SlurmDbd(error) => error.into(),
            ReportError::Store(error) => error.into(),
            ReportError::Encode(cause) | ReportError::Window(cause) => Self::Internal(cause),
            ReportError::MetricsUnavailable(cause) => Self::Unavailable { service: "VictoriaMetrics", cause },
        }
    }
}
