//! `/api/v1/tokens`: personal API tokens a signed-in user makes, lists and revokes for themselves;
//! staff also list and revoke anyone's (a leaked token, a user who left). Making and revoking need the
//! site's sign-in (the proxy identity): a token cannot make tokens. Making one needs a JSON body, and a
//! browser's cross-site request is refused, so a page elsewhere cannot make or revoke tokens in the name
//! of a viewer whose sign-in cookie the proxy would accept.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::{Extension, Json};
use chrono::{Duration, Utc};
use slurmlens_wire as wire;

use super::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::{App, AppError, Identity, Viewer};
use crate::domain::token::{TokenName, TokenSecret};
use crate::store::tokens::StoredToken;

const DEFAULT_DAYS: u32 = 90;
const MAX_BODY_BYTES: usize = 4096;
/// Staff's list of everyone's tokens shows at most this many, newest first.
const MAX_LISTED: u32 = 5000;

/// Refuses a body that is not declared JSON: an HTML form cannot send `application/json` across sites
/// without a CORS preflight, which this server never grants.
pub(super) fn json_body(headers: &HeaderMap) -> Result<(), ApiError> {
    let declared = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    let essence = declared.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::invalid("content-type", "send the body as `Content-Type: application/json`"))
    }
}

/// Refuses what a browser says is a cross-site request. Browsers name where a request comes from
/// (`Sec-Fetch-Site`; older ones only `Origin`); curl and scripts send neither and are let through,
/// signed in as the proxy says. `Origin` is compared with the host the client asked for
/// (`X-Forwarded-Host` behind a proxy that rewrites `Host`).
pub(super) fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let refused = || {
        ApiError::Forbidden(
            "a cross-site request cannot make or revoke tokens or links; use this site's own pages".into(),
        )
    };
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(site) = text("sec-fetch-site") {
        return if matches!(site, "same-origin" | "none") { Ok(()) } else { Err(refused()) };
    }
    let Some(origin) = text(header::ORIGIN.as_str()) else {
        return Ok(());
    };
    let authority = origin.split_once("://").map(|(_, authority)| authority);
    let asked = [text("x-forwarded-host"), text(header::HOST.as_str())];
    if authority.is_some_and(|authority| asked.iter().flatten().any(|host| host.eq_ignore_ascii_case(authority))) {
        Ok(())
    } else {
        Err(refused())
    }
}

/// The viewer's own tokens, newest first, never a secret: the API's list and the tokens page.
pub(crate) async fn own_tokens(app: &App, viewer: &Viewer) -> Result<Vec<wire::TokenInfo>, AppError> {
    let identity =
        viewer.identity().ok_or_else(|| AppError::Unauthorized("sign in through the site to manage tokens".into()))?;
    let tokens = app.require_store()?.tokens_of(&identity.user).await?;
    let now = Utc::now();
    Ok(tokens.into_iter().map(|token| info(token, now)).collect())
}

fn signed_in(viewer: &Viewer) -> Result<&Identity, ApiError> {
    viewer.identity().ok_or_else(|| ApiError::Unauthorized("sign in through the site to manage tokens".into()))
}

/// The proxy's identity; a request made with a token is refused.
fn signed_in_at_the_site(viewer: &Viewer) -> Result<&Identity, ApiError> {
    let identity = signed_in(viewer)?;
    match identity.token {
        Some(_) => Err(ApiError::Forbidden("a token cannot make or revoke tokens; sign in through the site".into())),
        None => Ok(identity),
    }
}

/// `POST /api/v1/tokens` with `{"name": "ci", "expires_in_days": 30}`: 201 with the token, shown once.
#[utoipa::path(
    post,
    path = "/api/v1/tokens",
    tag = "tokens",
    operation_id = "create_token",
    summary = "Make a personal API token",
    description = "Makes a read-only token for the user signed in through the site's proxy; the answer is \
        the only time the token is shown (only its SHA-256 is stored). A token cannot make tokens.",
    request_body(content = wire::NewToken, content_type = "application/json"),
    responses(
        (status = 201, description = "The token, shown once", body = wire::CreatedToken),
        (status = 400, description = "A bad name or lifetime, or not the documented JSON (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Asked with a token, or a browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn create(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<wire::CreatedToken>), ApiError> {
    let identity = signed_in_at_the_site(&viewer)?;
    same_origin(&headers)?;
    json_body(&headers)?;
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_BODY_BYTES} bytes")))?;
    let asked: wire::NewToken = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("body", format!("expected {{\"name\": …, \"expires_in_days\": …}}: {e}")))?;
    let name: TokenName = asked.name.parse().map_err(|e: String| ApiError::invalid("name", e))?;
    let max_days = app.access().tokens.max_days;
    let days = asked.expires_in_days.unwrap_or(DEFAULT_DAYS.min(max_days));
    if !(1..=max_days).contains(&days) {
        return Err(ApiError::invalid("expires_in_days", format!("between 1 and {max_days} days")));
    }
    let store = app.require_store()?;
    let created = Utc::now();
    let most = app.access().tokens.max_live_per_user;
    if store.live_tokens_of(&identity.user, created).await? >= u64::from(most) {
        return Err(ApiError::invalid(
            "tokens",
            format!("you hold {most} live tokens, the most allowed; revoke one first"),
        ));
    }
    let secret = TokenSecret::generate();
    // `days` is at most the configuration's `max_days`, itself bounded at load: this cannot overflow.
    let expires = created + Duration::days(i64::from(days));
    let id = store.create_token(&identity.user, &name, &secret.hash(), created, expires).await?;
    tracing::info!(user = %identity.user, token = id, days, "token created");
    let token = secret.reveal().to_string();
    Ok((StatusCode::CREATED, Json(wire::CreatedToken { id, name: name.as_str().to_string(), token, created, expires })))
}

/// `GET /api/v1/tokens`: the viewer's own tokens, newest first, never their secrets.
#[utoipa::path(
    get,
    path = "/api/v1/tokens",
    tag = "tokens",
    operation_id = "list_tokens",
    summary = "The viewer's own tokens (staff: anyone's)",
    description = "Name, times and state (`live`, `expired`, `revoked`) of each of the viewer's tokens, \
        newest first; never a token itself. Staff signed in through the site may ask `all=true`: every \
        user's tokens (the newest 5000), each with its `user`.",
    params(("all" = Option<bool>, Query, description = "Staff only: every user's tokens, not only the viewer's.")),
    responses(
        (status = 200, description = "The tokens", body = Vec<wire::TokenInfo>),
        (status = 403, description = "`all=true` from anyone but staff signed in at the site (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn list(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<Vec<wire::TokenInfo>>, ApiError> {
    let params = Params::new(pairs(query)?, &["all"])?;
    let all = match params.text("all") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(ApiError::invalid("all", format!("`{other}` is not true or false"))),
    };
    if !all {
        return Ok(Json(own_tokens(&app, &viewer).await?));
    }
    staff_at_the_site(&app, &viewer)?;
    let now = Utc::now();
    let tokens = app.require_store()?.all_tokens(MAX_LISTED).await?;
    Ok(Json(tokens.into_iter().map(|token| info(token, now)).collect()))
}

/// Staff signed in through the site's proxy (not with a token).
fn staff_at_the_site<'a>(app: &App, viewer: &'a Viewer) -> Result<&'a Identity, ApiError> {
    let identity = signed_in_at_the_site(viewer)?;
    if app.is_staff(identity) {
        Ok(identity)
    } else {
        Err(ApiError::Forbidden("only staff see or revoke other users' tokens".into()))
    }
}

/// Whether `viewer` may act on `token`: its owner, or staff signed in at the site.
fn may_manage(app: &App, viewer: &Viewer, token: &StoredToken) -> bool {
    viewer.identity().is_some_and(|identity| {
        identity.user == token.user_name || (identity.token.is_none() && app.is_staff(identity))
    })
}

/// `DELETE /api/v1/tokens/{id}`: revokes one of the viewer's tokens (204), or, for staff signed in at
/// the site, anyone's; another's is a 404 to everyone else.
#[utoipa::path(
    delete,
    path = "/api/v1/tokens/{id}",
    tag = "tokens",
    operation_id = "revoke_token",
    summary = "Revoke one of the viewer's tokens (staff: anyone's)",
    description = "From then on the token gets 401. Revoking twice keeps the first time. Staff signed in \
        through the site may revoke any user's token.",
    params(("id" = u64, Path, description = "The token's id, as `GET /api/v1/tokens` lists it.")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 400, description = "Not a token id (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Asked with a token, or a browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such token of the viewer's (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn revoke(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let identity = signed_in_at_the_site(&viewer)?;
    same_origin(&headers)?;
    let id: u64 = id.parse().map_err(|_| ApiError::invalid("id", format!("`{id}` is not a token id")))?;
    let store = app.require_store()?;
    match store.token(id).await? {
        Some(token) if may_manage(&app, &viewer, &token) => {
            store.revoke_token(id, Utc::now()).await?;
            tracing::info!(by = %identity.user, owner = %token.user_name, token = id, "token revoked");
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(ApiError::NotFound(format!("no token {id}"))),
    }
}

/// `GET /api/v1/tokens/{id}/uses`: the audit log of one of the viewer's tokens, newest first (500 lines).
#[utoipa::path(
    get,
    path = "/api/v1/tokens/{id}/uses",
    tag = "tokens",
    operation_id = "token_uses",
    summary = "The audit log of one of the viewer's tokens (staff: anyone's)",
    description = "Every request answered with the token, newest first (the last 500). Refusals (revoked, \
        expired, over the rate) are counted in the server's log, not written one by one.",
    params(("id" = u64, Path, description = "The token's id.")),
    responses(
        (status = 200, description = "The uses", body = Vec<wire::TokenUse>),
        (status = 400, description = "Not a token id (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such token of the viewer's (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn uses(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Json<Vec<wire::TokenUse>>, ApiError> {
    signed_in(&viewer)?;
    let id: u64 = id.parse().map_err(|_| ApiError::invalid("id", format!("`{id}` is not a token id")))?;
    let store = app.require_store()?;
    if !store.token(id).await?.is_some_and(|token| may_manage(&app, &viewer, &token)) {
        return Err(ApiError::NotFound(format!("no token {id}")));
    }
    let uses = store.token_uses(id, 500).await?;
    Ok(Json(uses.into_iter().map(|(at, method, path, status)| wire::TokenUse { at, method, path, status }).collect()))
}

fn info(token: StoredToken, now: chrono::DateTime<Utc>) -> wire::TokenInfo {
    let state = if token.revoked_at.is_some() {
        wire::TokenState::Revoked
    } else if token.expires_at <= now {
        wire::TokenState::Expired
    } else {
        wire::TokenState::Live
    };
    wire::TokenInfo {
        id: token.id,
        user: token.user_name,
        name: token.name,
        created: token.created_at,
        expires: token.expires_at,
        revoked: token.revoked_at,
        last_used: token.last_used_at,
        state,
    }
}
