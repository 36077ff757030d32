//! The server's own operation at the edge: each request's id (`x-request-id`), its count and latency
//! per route template, the span its log lines carry, and `GET /metrics` for the site's Prometheus or
//! vmagent (`crate::telemetry` holds the instruments).

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::{ApiError, HttpState};
use crate::app::Viewer;
use crate::config::AnonymousAccess;
use crate::telemetry::{self, HeavyUse};

/// The header a request's id travels in, both ways.
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The route label of a request no route matched: one label for every unknown path.
const UNMATCHED: &str = "unmatched";

/// A request's id, in its extensions: the client's, when well-formed, or one made here.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Whether a client's id may be kept: 1 to 128 characters, letters, digits and `-_.:` (a UUID, a
/// proxy's hex id, a W3C trace id). Anything else could forge log lines or carry a secret into them.
fn well_formed(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

/// 128 random bits as 32 hex digits.
fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Gives every request an id (the client's when well-formed, else a new one), in its extensions and
/// headers, and returns it in the response's `x-request-id`. Outermost, so every answer carries one.
pub(super) async fn request_id(mut request: Request, next: Next) -> Response {
    let given = request.headers().get(&REQUEST_ID).and_then(|value| value.to_str().ok()).filter(|id| well_formed(id));
    let id = given.map_or_else(new_id, str::to_string);
    let value = HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("invalid"));
    request.headers_mut().insert(REQUEST_ID.clone(), value.clone());
    request.extensions_mut().insert(RequestId(id));
    let mut response = next.run(request).await;
    response.headers_mut().insert(REQUEST_ID.clone(), value);
    response
}

/// Counts each request and its time to the response's head, per method, route template and status.
pub(super) async fn observe(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str).to_string();
    let telemetry = telemetry::global();
    let in_flight = InFlight::enter();
    let response = next.run(request).await;
    drop(in_flight);
    telemetry.request(&method, &route, response.status().as_u16(), started.elapsed());
    response
}

/// One request being answered; leaving (answered, or dropped when its client hung up) ends it.
struct InFlight;

impl InFlight {
    fn enter() -> Self {
        telemetry::global().in_flight(1);
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        telemetry::global().in_flight(-1);
    }
}

/// The span each request's log lines are written in: its id, method and route template (never the
/// path, whose query may name users).
pub(super) fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let id = request.extensions().get::<RequestId>().map_or("", |id| id.0.as_str());
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str);
    tracing::info_span!("request", request_id = %id, method = %request.method(), route = %route)
}

/// `GET /metrics` on the main listener: staff (a signed-in staff member, or anyone where anonymous
/// viewers are staff) and the scraper with `[telemetry] token` may read it.
pub(super) async fn metrics(State(state): State<HttpState>, request: Request) -> Response {
    let viewer = request.extensions().get::<Viewer>().cloned().unwrap_or_default();
    let scraper = state.telemetry.token.as_ref().is_some_and(|token| bearer_is(request.headers(), &token.0));
    let staff = match &viewer {
        Viewer::Signed(identity) => state.app.is_staff(identity),
        Viewer::Anonymous => state.app.access().anonymous == AnonymousAccess::Staff,
        Viewer::Operator => true,
        Viewer::Shared(_) => false,
    };
    if scraper || staff {
        return exposition(&state);
    }
    match viewer {
        Viewer::Anonymous => {
            ApiError::Unauthorized("/metrics is for staff, or the scraper's [telemetry] token".into()).into_response()
        }
        Viewer::Signed(_) | Viewer::Operator | Viewer::Shared(_) => {
            ApiError::Forbidden("/metrics is for staff".into()).into_response()
        }
    }
}

/// Whether the request's `Authorization: Bearer` is `token`, compared in constant time.
fn bearer_is(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()) else { return false };
    let Some((scheme, given)) = given.split_once(' ') else { return false };
    scheme.eq_ignore_ascii_case("bearer")
        && super::ingest::same_secret(given.trim().as_bytes(), token.trim().as_bytes())
}

/// The instruments as text, with the gauges read now: the pools, the heavy-request slots.
fn exposition(state: &HttpState) -> Response {
    let telemetry = telemetry::global();
    for reader in state.app.readers() {
        telemetry.pool("slurmdbd", reader.cluster().as_str(), reader.pool_use());
    }
    if let Some(store) = state.app.store() {
        telemetry.pool("store", "", store.pool_use());
    }
    let (running, limit) = state.heavy.in_use();
    telemetry.heavy(HeavyUse { running, limit });
    ([(header::CONTENT_TYPE, telemetry::CONTENT_TYPE)], telemetry.encode()).into_response()
}

/// The router of `[telemetry] listen`: `/metrics` alone, to anyone who reaches the address.
pub fn listener_router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(|State(state): State<HttpState>| async move { exposition(&state) }))
        .fallback(|| async { ApiError::NotFound("only /metrics is served here".into()) })
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_are_kept_from_clients() {
        for id in ["a", "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d", "4bf92f3577b34da6a3ce929d0e0e4736", "proxy.1:2_x"] {
            assert!(well_formed(id), "{id}");
        }
        let long = "x".repeat(129);
        for id in ["", "a b", "a\nlevel=error", "<script>", "ü", long.as_str()] {
            assert!(!well_formed(id), "{id:?}");
        }
        let made = new_id();
        assert!(well_formed(&made) && made.len() == 32 && made != new_id());
    }

    #[test]
    fn the_scraper_token_is_a_bearer_token_and_nothing_else() {
        let mut headers = HeaderMap::new();
        assert!(!bearer_is(&headers, "scrape-token-0123456789"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer scrape-token-0123456789"));
        assert!(bearer_is(&headers, "scrape-token-0123456789"));
        assert!(!bearer_is(&headers, "scrape-token-01234567890"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic scrape-token-0123456789"));
        assert!(!bearer_is(&headers, "scrape-token-0123456789"));
    }
}
