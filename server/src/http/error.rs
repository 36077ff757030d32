//! The one error envelope. Every failure, rejected input included, renders as [`ErrorEnvelope`].

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use slurmlens_wire::{ErrorBody, ErrorEnvelope};

use crate::app::AppError;
use crate::sources::slurmdbd::SlurmDbdError;
use crate::store::StoreError;

/// A failed request.
#[derive(Debug)]
pub enum ApiError {
    /// 400: a parameter could not be parsed or is out of range.
    InvalidParameter { parameter: String, message: String },
    /// 401: no identity where one is needed, or credentials that are not (or no longer) valid.
    Unauthorized(String),
    /// 403: a valid identity asking for what it may not do (a read-only token writing).
    Forbidden(String),
    /// 429: a token over its request rate; the response carries Retry-After.
    RateLimited(String),
    /// 404: no such resource, or one the viewer may not see (the two are indistinguishable).
    NotFound(String),
    /// 504: slurmdbd's database stopped the request's query at its time limit; the body says to narrow
    /// the request, the cause is logged.
    QueryTimeout(String),
    /// 503: too many heavy requests at once across every viewer; the response carries Retry-After.
    Overloaded(String),
    /// 503: a data source did not answer; the cause is logged, the body says which source.
    Unavailable { source: &'static str, cause: String },
    /// 500: opaque to the client; the cause is logged.
    Internal(String),
}

/// What a client whose query ran out of slurmdbd's statement time is told.
pub const QUERY_TIMEOUT_MESSAGE: &str = "slurmdbd's database stopped this query at its time limit: \
    narrow the window (start, end) or add filters (user, account, state) and try again";

/// The cause of a 5xx, carried to the logging middleware in the response's extensions.
#[derive(Debug, Clone)]
pub struct ErrorCause(pub String);

impl ApiError {
    pub fn invalid(parameter: &str, message: impl Into<String>) -> Self {
        Self::InvalidParameter { parameter: parameter.to_string(), message: message.into() }
    }
}

impl From<AppError> for ApiError {
    fn from(error: AppError) -> Self {
        match error {
            AppError::Invalid { parameter, message } => Self::InvalidParameter { parameter, message },
            AppError::Unauthorized(message) => Self::Unauthorized(message),
            AppError::NotFound(message) => Self::NotFound(message),
            AppError::Forbidden(message) => Self::Forbidden(message),
            AppError::Unavailable { service, cause } => Self::Unavailable { source: service, cause },
            AppError::QueryTimeout(cause) => Self::QueryTimeout(cause),
            AppError::Internal(cause) => Self::Internal(cause),
        }
    }
}

impl From<SlurmDbdError> for ApiError {
    fn from(error: SlurmDbdError) -> Self {
        AppError::from(error).into()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        AppError::from(error).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message, parameter, cause) = match self {
            Self::InvalidParameter { parameter, message } => {
                (StatusCode::BAD_REQUEST, "invalid_parameter", message, Some(parameter), None)
            }
            Self::Unauthorized(message) => (StatusCode::UNAUTHORIZED, "unauthorized", message, None, None),
            Self::Forbidden(message) => (StatusCode::FORBIDDEN, "forbidden", message, None, None),
            Self::RateLimited(message) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited", message, None, None),
            Self::NotFound(message) => (StatusCode::NOT_FOUND, "not_found", message, None, None),
            Self::Unavailable { source, cause } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "source_unavailable",
                format!("{source} is unavailable right now; try again shortly"),
                None,
                Some(cause),
            ),
            Self::QueryTimeout(cause) => {
                (StatusCode::GATEWAY_TIMEOUT, "query_timeout", QUERY_TIMEOUT_MESSAGE.to_string(), None, Some(cause))
            }
            Self::Overloaded(message) => (StatusCode::SERVICE_UNAVAILABLE, "overloaded", message, None, None),
            Self::Internal(cause) => {
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error".to_string(), None, Some(cause))
            }
        };
        let envelope = ErrorEnvelope { error: ErrorBody { code: code.into(), message, parameter } };
        let mut response = (status, Json(envelope)).into_response();
        if let Some(cause) = cause {
            response.extensions_mut().insert(ErrorCause(cause));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn envelope(error: ApiError) -> (StatusCode, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("a body");
        (status, serde_json::from_slice(&bytes).expect("JSON"))
    }

    /// Every failure is the one envelope; a 5xx says nothing of its cause.
    #[tokio::test]
    async fn every_failure_renders_the_one_envelope() {
        let invalid = envelope(ApiError::invalid("start", "`soon` is not a time")).await;
        let unavailable =
            envelope(ApiError::Unavailable { source: "slurmdbd", cause: "connection refused (10.0.0.5:3306)".into() })
                .await;
        let internal = envelope(ApiError::Internal("slurmdbd: no column time_end".into())).await;
        assert_eq!(
            [invalid.0, unavailable.0, internal.0],
            [StatusCode::BAD_REQUEST, StatusCode::SERVICE_UNAVAILABLE, StatusCode::INTERNAL_SERVER_ERROR]
        );
        insta::assert_json_snapshot!([invalid.1, unavailable.1, internal.1]);
    }
}
