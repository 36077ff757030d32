//! Shared report links: `POST`/`GET /api/v1/jobs/{job_id}/shares` (the job's owner or staff make and list
//! them), `DELETE /api/v1/shares/{id}` (revoke), and what a link's holder opens without signing in:
//! `GET /shared/{secret}` (the job page as its owner sees it, report and facts only, one self-contained
//! document) and `GET /api/v1/shared/{secret}` (the report's JSON). Making and revoking need the site's
//! sign-in and a same-origin JSON request, as tokens do.

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::params::{Params, QueryPairs, pairs};
use super::peer::Peer;
use super::tokens::{json_body, same_origin};
use super::{ApiError, HttpState};
use crate::app::shares::OpenedShare;
use crate::app::{App, Viewer};

const MAX_BODY_BYTES: usize = 4096;
/// Points per series in the shared report's JSON, as the API's default.
const POINTS: usize = 120;

/// The site's sign-in (a proxy identity), not a token: tokens are read-only.
fn at_the_site(viewer: &Viewer) -> Result<(), ApiError> {
    match viewer.identity() {
        None => Err(ApiError::Unauthorized("sign in through the site to share a report".into())),
        Some(identity) if identity.token.is_some() => {
            Err(ApiError::Forbidden("a token cannot make or revoke links; sign in through the site".into()))
        }
        Some(_) => Ok(()),
    }
}

/// `POST /api/v1/jobs/{job_id}/shares`: 201 with the link, shown once.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{job_id}/shares",
    tag = "shares",
    operation_id = "create_share",
    summary = "Share a job's report by a read-only link",
    description = "The job's owner (or staff), signed in through the site, makes an expiring, revocable link \
        to this one job's report. Whoever holds it reads the job's facts and report as its owner sees them \
        (never its logs, profile or script, never another job) until it expires or is revoked; every \
        opening is logged. The answer is the only time the link is shown (only its SHA-256 is stored).",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    request_body(content = wire::NewShare, content_type = "application/json"),
    responses(
        (status = 201, description = "The link, shown once", body = wire::CreatedShare),
        (status = 400, description = "A bad lifetime or note, or not the documented JSON (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Not the job's owner or staff, asked with a token, or a browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn create(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<wire::CreatedShare>), ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    at_the_site(&viewer)?;
    same_origin(&headers)?;
    json_body(&headers)?;
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_BODY_BYTES} bytes")))?;
    let asked: wire::NewShare = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("body", format!("expected {{\"expires_in_days\": …, \"note\": …}}: {e}")))?;
    let made = app.create_share(&viewer, params.text("cluster"), &job_id, asked).await?;
    let path = format!("/shared/{}", made.secret.reveal());
    Ok((StatusCode::CREATED, Json(wire::CreatedShare { id: made.id, path, expires: made.expires })))
}

/// `GET /api/v1/jobs/{job_id}/shares`: the job's links, newest first, never their secrets.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/shares",
    tag = "shares",
    operation_id = "list_shares",
    summary = "The links made to a job's report",
    description = "Who made each, its note, times, state (`live`, `expired`, `revoked`) and how often it was \
        opened; for the job's owner and staff.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The links", body = Vec<wire::ShareInfo>),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Not the job's owner or staff (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn list(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<Vec<wire::ShareInfo>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.job_shares(&viewer, params.text("cluster"), &job_id).await?))
}

/// `DELETE /api/v1/shares/{id}`: revokes a link at once.
#[utoipa::path(
    delete,
    path = "/api/v1/shares/{id}",
    tag = "shares",
    operation_id = "revoke_share",
    summary = "Revoke a shared report link",
    description = "The job's owner, the link's maker or staff, signed in through the site; anyone else gets \
        a 404. Revoking twice keeps the first time.",
    params(("id" = u64, Path, description = "The link's id (from the list).")),
    responses(
        (status = 200, description = "The link, revoked", body = wire::ShareInfo),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Asked with a token, or a browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such link, or not the viewer's to revoke (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn revoke(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Result<Json<wire::ShareInfo>, ApiError> {
    at_the_site(&viewer)?;
    same_origin(&headers)?;
    Ok(Json(app.revoke_share(&viewer, id).await?))
}

fn peer(connected: Option<Extension<ConnectInfo<Peer>>>) -> String {
    connected.map(|Extension(ConnectInfo(peer))| peer.to_string()).unwrap_or_default()
}

/// `GET /api/v1/shared/{secret}`: the shared job's report, for whoever holds the link.
#[utoipa::path(
    get,
    path = "/api/v1/shared/{secret}",
    tag = "shares",
    operation_id = "shared_report",
    summary = "The report a link shares",
    description = "The job's report as its owner sees it, without signing in: the link is the credential. \
        A link that never existed, expired or was revoked is a 404, the same for each. Every opening is logged.",
    params(("secret" = String, Path, description = "The link's last part, `sls_` and 64 hex digits.")),
    responses(
        (status = 200, description = "The report", body = wire::JobReport),
        (status = 404, description = "No live link (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(()),
)]
pub async fn shared_report(
    State(app): State<App>,
    Path(secret): Path<String>,
    connected: Option<Extension<ConnectInfo<Peer>>>,
) -> Result<Json<wire::JobReport>, ApiError> {
    let opened = app.open_share(&secret, &peer(connected)).await?;
    let viewer = Viewer::Shared(opened.grant.clone());
    Ok(Json(app.job_report(&viewer, Some(&opened.grant.cluster), &opened.job_id, POINTS).await?))
}

/// `GET /shared/{secret}`: the job page as its owner sees it, report and facts only, as one document
/// that loads nothing else (no script: a page for reading).
pub async fn shared_page(
    State(state): State<HttpState>,
    Path(secret): Path<String>,
    connected: Option<Extension<ConnectInfo<Peer>>>,
) -> Response {
    let opened = match state.app().open_share(&secret, &peer(connected)).await {
        Ok(opened) => opened,
        Err(error) => return ApiError::from(error).into_response(),
    };
    match render(&state, &opened, &secret).await {
        Ok(document) => {
            let mut response = Html(document).into_response();
            // A shared page is for its holder: never cached on the way, never sent on as a Referer.
            let headers = response.headers_mut();
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
            headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
            headers.insert(header::HeaderName::from_static("x-robots-tag"), HeaderValue::from_static("noindex"));
            response
        }
        Err(response) => response,
    }
}

/// The page of `opened`, opened with `secret` (live: `open_share` took it).
async fn render(state: &HttpState, opened: &OpenedShare, secret: &str) -> Result<String, Response> {
    use slurmlens_web::query::{encode, percent_encode};
    let grant = &opened.grant;
    let path = format!("/jobs/{}?{}", percent_encode(&opened.job_id), encode(&[("cluster", grant.cluster.clone())]));
    let viewer = Viewer::Shared(grant.clone());
    let page = super::pages::page_html(state.app(), state.web_options(), viewer, &path)
        .await
        .map_err(|(status, body)| (status, Html(body)).into_response())?;
    let until = opened.expires.format("%Y-%m-%d %H:%M UTC").to_string();
    let report_json = format!("/api/v1/shared/{}", percent_encode(secret));
    let shared = slurmlens_web::printable::Shared {
        by: &opened.created_by,
        until: &until,
        note: &opened.note,
        report_json: &report_json,
    };
    Ok(slurmlens_web::printable::shared(&page, &shared))
}
