//! Who is asking. One middleware decides it for every request, API and pages alike, and puts the
//! answer into the request's extensions as a typed [`Viewer`]; the handlers and the pages read nothing
//! else. A client cannot send an extension, so nothing it writes can pose as the decision.
//!
//! An identity comes from, in this order:
//! 1. a personal token, `Authorization: Bearer slt_…`: looked up by its SHA-256, refused with 401 when
//!    unknown, expired or revoked, 403 for anything but reading (and uploading an nsys report into a job
//!    its user may see), 429 past its user's rate (all of the
//!    user's tokens together) or past its peer's (unknown tokens included, before any lookup). Every
//!    answered use is written to the audit log; refused ones are counted, not written one by one;
//! 2. the site's SSO proxy: `user_header` (and `groups_header`, only beside it), believed only from
//!    `trusted_proxies` and, when the site set one, only with the proxy's shared secret. From any other
//!    peer they are dropped and the request is anonymous; sent twice by a trusted peer, they are a 400.
//!
//! Other bearer secrets (the Slurm plugin's per-cluster ingest secret) pass untouched: they read nothing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::peer::Peer;
use super::{ApiError, HttpState};
use crate::app::{Identity, Viewer};
use crate::config::AccessConfig;
use crate::domain::token::{PREFIX, TokenSecret};
use crate::store::tokens::TokenUse;

/// A peer may send this many times its user's rate in token requests, unknown tokens included.
const PEER_FACTOR: u32 = 4;

/// Token request rates: per user (all their tokens together) and per peer (checked before the lookup,
/// so a flood of unknown tokens costs no database work), and the refusals counted per token.
pub(crate) struct TokenLimiter {
    per_user: DefaultKeyedRateLimiter<String>,
    per_peer: DefaultKeyedRateLimiter<IpAddr>,
    refused: Mutex<HashMap<u64, u64>>,
}

impl TokenLimiter {
    pub(crate) fn new(per_minute: u32) -> Self {
        let quota = |n: u32| Quota::per_minute(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN));
        Self {
            per_user: RateLimiter::keyed(quota(per_minute)),
            per_peer: RateLimiter::keyed(quota(per_minute.saturating_mul(PEER_FACTOR))),
            refused: Mutex::default(),
        }
    }

    /// `Err(wait)` when the user is over their rate.
    fn check_user(&self, user: &str) -> Result<(), Duration> {
        let now = DefaultClock::default().now();
        self.per_user.check_key(&user.to_string()).map_err(|not_until| not_until.wait_time_from(now))
    }

    /// `Err(wait)` when the peer is over its rate.
    fn check_peer(&self, peer: IpAddr) -> Result<(), Duration> {
        let now = DefaultClock::default().now();
        self.per_peer.check_key(&peer.to_canonical()).map_err(|not_until| not_until.wait_time_from(now))
    }

    /// Counts a refused use of `token`; logs the first and then every power of two.
    fn count_refusal(&self, token: u64, status: u16) {
        let count = {
            let mut refused = self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let count = refused.entry(token).or_insert(0);
            *count += 1;
            *count
        };
        if count.is_power_of_two() {
            tracing::warn!(token, status, refused = count, "token use refused (not written to the audit log)");
        }
    }
}

/// The middleware: resolves the identity, stamps it, and audits token use.
pub(crate) async fn identify(State(state): State<HttpState>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<Peer>>().map(|info| info.0);
    request.extensions_mut().insert(Viewer::Anonymous);
    if let Some(token) = personal_token(request.headers()) {
        return match token {
            Ok(secret) => with_token(&state, peer, &secret, request, next).await,
            Err(message) => ApiError::Unauthorized(message.into()).into_response(),
        };
    }
    let access = state.app.access();
    let trusted = peer.is_some_and(|peer| peer.is_trusted_proxy(access));
    let identity = match proxy_identity(access, request.headers()) {
        Err(message) if trusted => return ApiError::invalid("headers", message).into_response(),
        Ok(Some(identity)) if trusted && proxy_secret_matches(access, request.headers()) => Some(identity),
        Ok(None) => None,
        _ => {
            tracing::warn!(?peer, trusted, "identity headers ignored: not from a trusted proxy with its secret");
            None
        }
    };
    // What the handlers see of the proxy is the decision alone: its headers (and secret) go.
    for name in [&access.user_header, &access.groups_header, &access.proxy_secret_header].into_iter().flatten() {
        request.headers_mut().remove(name.as_str());
    }
    if let Some(identity) = identity {
        stamp(&mut request, identity);
    }
    next.run(request).await
}

/// Whether the request carries the proxy's shared secret, once, when the site set one.
fn proxy_secret_matches(access: &AccessConfig, headers: &HeaderMap) -> bool {
    let (Some(name), Some(secret)) = (&access.proxy_secret_header, &access.proxy_secret) else { return true };
    let mut values = headers.get_all(name.as_str()).iter();
    match (values.next(), values.next()) {
        (Some(given), None) => super::ingest::same_secret(given.as_bytes(), secret.0.trim().as_bytes()),
        _ => false,
    }
}

/// The user (and groups) the proxy's headers name, whoever sent them: `Ok(None)` without a user
/// header (a groups header alone names nobody), `Err` when either header comes more than once (a
/// proxy that appends leaves the client's copy first).
fn proxy_identity(access: &AccessConfig, headers: &HeaderMap) -> Result<Option<Identity>, String> {
    let single = |name: &Option<String>| -> Result<Option<&str>, String> {
        let Some(name) = name.as_deref() else { return Ok(None) };
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (None, _) => Ok(None),
            (Some(value), None) => Ok(value.to_str().ok()),
            (Some(_), Some(_)) => Err(format!("the {name} header came more than once")),
        }
    };
    let user = single(&access.user_header)?.map(str::trim).filter(|user| !user.is_empty());
    let groups = single(&access.groups_header)?;
    let Some(user) = user else { return Ok(None) };
    let groups = groups
        .map(|text| text.split(',').map(str::trim).filter(|g| !g.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    Ok(Some(Identity { user: user.to_string(), groups, token: None }))
}

/// `Some` when the request carries a personal token (well-formed or not).
fn personal_token(headers: &HeaderMap) -> Option<Result<TokenSecret, &'static str>> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && token.starts_with(PREFIX))
        .then(|| token.parse().map_err(|_| "malformed personal token: `slt_` followed by 64 hex digits"))
}

/// Marks the request as `identity`'s.
fn stamp(request: &mut Request, identity: Identity) {
    request.extensions_mut().insert(Viewer::Signed(identity));
}

/// What a personal token may do: read, and one write, uploading an `nsys` report into a job its user
/// may see (`POST /api/v1/jobs/{id}/traces/nsys`; from a batch script there is no sign-in, and the
/// cluster's ingest secret must never be handed to users).
fn token_may(method: &Method, path: &str) -> bool {
    let nsys_upload = || {
        let rest = path.strip_prefix("/api/v1/jobs/").and_then(|rest| rest.strip_suffix("/traces/nsys"));
        rest.is_some_and(|job| !job.is_empty() && !job.contains('/'))
    };
    *method == Method::GET || *method == Method::HEAD || (*method == Method::POST && nsys_upload())
}

fn rate_limited(message: String, wait: Duration) -> Response {
    let mut response = ApiError::RateLimited(message).into_response();
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

async fn with_token(
    state: &HttpState,
    peer: Option<Peer>,
    secret: &TokenSecret,
    mut request: Request,
    next: Next,
) -> Response {
    let per_minute = state.app.access().tokens.per_minute;
    if let Some(Err(wait)) = peer.map(|peer| state.token_limiter.check_peer(peer.rate_key())) {
        let peer_rate = per_minute.saturating_mul(PEER_FACTOR);
        return rate_limited(format!("over {peer_rate} token requests per minute from this address"), wait);
    }
    let store = match state.app.require_store() {
        Ok(store) => store,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let token = match store.token_by_hash(&secret.hash()).await {
        Ok(Some(token)) => token,
        Ok(None) => return ApiError::Unauthorized("unknown token".into()).into_response(),
        Err(error) => return ApiError::from(error).into_response(),
    };
    let now = Utc::now();
    let (method, path) = (request.method().clone(), request.uri().to_string());
    let refused = if token.revoked_at.is_some() {
        Some(ApiError::Unauthorized("this token was revoked".into()).into_response())
    } else if token.expires_at <= now {
        Some(ApiError::Unauthorized("this token expired".into()).into_response())
    } else if !token_may(&method, request.uri().path()) {
        Some(
            ApiError::Forbidden("tokens are read-only; sign in through the site to change anything".into())
                .into_response(),
        )
    } else if let Err(wait) = state.token_limiter.check_user(&token.user_name) {
        Some(rate_limited(format!("over {per_minute} requests per minute with this user's tokens"), wait))
    } else {
        None
    };
    if let Some(response) = refused {
        state.token_limiter.count_refusal(token.id, response.status().as_u16());
        return response;
    }
    stamp(&mut request, Identity { user: token.user_name.clone(), groups: Vec::new(), token: Some(token.id) });
    let response = next.run(request).await;
    let peer = peer.map(|peer| peer.to_string()).unwrap_or_default();
    let used = TokenUse {
        token_id: token.id,
        at: now,
        method: method.as_str(),
        path: &path,
        status: response.status().as_u16(),
        peer: &peer,
    };
    // Nothing read with a token leaves without its line in the audit log.
    match store.record_token_use(&used).await {
        Ok(()) => response,
        Err(error) => {
            tracing::error!(%error, token = token.id, "writing the token audit log failed");
            ApiError::Unavailable { source: "slurmlens database", cause: format!("token audit log: {error}") }
                .into_response()
        }
    }
}
