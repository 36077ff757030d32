//! Who is asking. One middleware decides it for every request, API and pages alike, and puts the
//! answer into the request's extensions as a typed [`Viewer`]; the handlers and the pages read nothing
//! else. A client cannot send an extension, so nothing it writes can pose as the decision.
//!
//! An identity comes from, in this order:
//! 1. a personal token, `Authorization: Bearer slt_…`: looked up by its SHA-256, refused with 401 when
//!    unknown, expired or revoked, 403 for anything but reading, 429 past its rate; every use, refused
//!    ones included, is written to the audit log;
//! 2. the site's SSO proxy: `user_header` (and `groups_header`), believed only from `trusted_proxies`;
//!    from any other peer they are dropped and the request is anonymous.
//!
//! Other bearer secrets (the Slurm plugin's per-cluster ingest secret) pass untouched: they read nothing.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::{ApiError, HttpState};
use crate::app::{Identity, Viewer};
use crate::config::AccessConfig;
use crate::domain::token::{PREFIX, TokenSecret};
use crate::store::tokens::TokenUse;

/// Per-token request rate.
pub(crate) struct TokenLimiter(DefaultKeyedRateLimiter<u64>);

impl TokenLimiter {
    pub(crate) fn new(per_minute: u32) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        Self(RateLimiter::keyed(Quota::per_minute(per_minute)))
    }

    /// `Err(wait)` when the token is over its rate.
    fn check(&self, token: u64) -> Result<(), Duration> {
        self.0.check_key(&token).map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

/// The middleware: resolves the identity, stamps it, and audits token use.
pub(crate) async fn identify(State(state): State<HttpState>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0);
    request.extensions_mut().insert(Viewer::Anonymous);
    if let Some(token) = personal_token(request.headers()) {
        return match token {
            Ok(secret) => with_token(&state, peer, &secret, request, next).await,
            Err(message) => ApiError::Unauthorized(message.into()).into_response(),
        };
    }
    let access = state.app.access();
    let trusted = peer.is_some_and(|peer| access.trusted_proxies.iter().any(|net| net.contains(peer.ip())));
    match proxy_identity(access, request.headers()) {
        Some(identity) if trusted => stamp(&mut request, identity),
        Some(_) => {
            tracing::warn!(?peer, "identity header from a peer not in trusted_proxies ignored");
            for name in [&access.user_header, &access.groups_header].into_iter().flatten() {
                request.headers_mut().remove(name.as_str());
            }
        }
        None => {}
    }
    next.run(request).await
}

/// The user (and groups) the proxy's headers name, whoever sent them.
fn proxy_identity(access: &AccessConfig, headers: &HeaderMap) -> Option<Identity> {
    let named = |name: &Option<String>| name.as_deref().and_then(|name| headers.get(name)?.to_str().ok());
    let user = named(&access.user_header).map(str::trim).filter(|user| !user.is_empty())?;
    let groups = named(&access.groups_header)
        .map(|text| text.split(',').map(str::trim).filter(|g| !g.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    Some(Identity { user: user.to_string(), groups, token: None })
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

async fn with_token(
    state: &HttpState,
    peer: Option<SocketAddr>,
    secret: &TokenSecret,
    mut request: Request,
    next: Next,
) -> Response {
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
    let response = if token.revoked_at.is_some() {
        ApiError::Unauthorized("this token was revoked".into()).into_response()
    } else if token.expires_at <= now {
        ApiError::Unauthorized("this token expired".into()).into_response()
    } else if method != Method::GET && method != Method::HEAD {
        ApiError::Forbidden("tokens are read-only; sign in through the site to change anything".into()).into_response()
    } else if let Err(wait) = state.token_limiter.check(token.id) {
        let mut response = ApiError::RateLimited(format!(
            "over {} requests per minute for this token",
            state.app.access().tokens.per_minute
        ))
        .into_response();
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        response
    } else {
        stamp(&mut request, Identity { user: token.user_name.clone(), groups: Vec::new(), token: Some(token.id) });
        next.run(request).await
    };
    let peer = peer.map(|peer| peer.ip().to_string()).unwrap_or_default();
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
