//! `/api/v1/me/notifications`: the signed-in user's notifications (the notices about their own jobs)
//! and their choice of rules. Turning a rule off needs a JSON body and is refused across sites, as
//! the tokens' routes are.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::ApiError;
use super::tokens::{json_body, same_origin};
use crate::app::{App, Viewer};

const MAX_BODY_BYTES: usize = 1024;

/// `GET /api/v1/me/notifications`.
#[utoipa::path(
    get,
    path = "/api/v1/me/notifications",
    tag = "notifications",
    operation_id = "my_notifications",
    summary = "The viewer's notifications and their rules",
    description = "The notices slurmlens made about the signed-in user's own jobs (a job whose GPUs sat \
        idle, a job ended by an infrastructure fault), newest first, each with the page of its evidence \
        and whether an e-mail of it reached them; and each rule with the user's choice and whether the \
        site runs it.",
    responses(
        (status = 200, description = "The notifications and rules", body = wire::MyNotifications),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn mine(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
) -> Result<Json<wire::MyNotifications>, ApiError> {
    Ok(Json(app.my_notifications(&viewer).await?))
}

/// `PUT /api/v1/me/notifications/rules/{rule}` with `{"enabled": false}`.
#[utoipa::path(
    put,
    path = "/api/v1/me/notifications/rules/{rule}",
    tag = "notifications",
    operation_id = "set_notification_rule",
    summary = "Opt out of (or back into) a notification rule",
    description = "`enabled: false` stops the e-mails of `rule` to the signed-in user (staff still hear \
        of it); `true` takes them back. Idempotent.",
    params(("rule" = String, Path, description = "`idle_gpus`, `infrastructure_failure` or `monthly_usage`")),
    request_body(content = wire::NotificationRuleUpdate, content_type = "application/json"),
    responses(
        (status = 204, description = "Set"),
        (status = 400, description = "An unknown or staff-only rule, or not the documented JSON (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "A browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn set_rule(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(rule): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    same_origin(&headers)?;
    json_body(&headers)?;
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_BODY_BYTES} bytes")))?;
    let asked: wire::NotificationRuleUpdate = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("body", format!("expected {{\"enabled\": true|false}}: {e}")))?;
    app.set_notification_rule(&viewer, &rule, asked.enabled).await?;
    Ok(StatusCode::NO_CONTENT)
}
