//! The HTTP edge: routes, who is asking (`auth`), limits, and the one error envelope. A handler
//! parses its query into typed values, calls the application (`crate::app`) with the request's
//! [`Viewer`](crate::app::Viewer), and returns the answer as JSON; nothing else.

mod advice;
mod auth;
mod body_count;
mod compare;
mod error;
mod export;
pub mod ingest;
mod jobs;
mod limits;
mod node_page;
mod nodes;
mod notify;
pub mod openapi;
mod operations;
mod otlp;
mod otlp_map;
mod pages;
pub use pages::page_html;
mod params;
pub mod peer;
mod script;
mod shares;
mod signals;
mod tags;
mod tokens;
mod traces;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRef, Request};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, ErrorCause};

use crate::app::App;

/// What the HTTP edge holds: the application, and what only the edge needs (the ingest secrets, the
/// token rate limiter, how the pages are served). Cheap to clone; holds no per-user state.
#[derive(Clone)]
pub struct HttpState {
    app: App,
    ingest: Arc<ingest::IngestSecrets>,
    web: Arc<slurmlens_web::server::WebOptions>,
    token_limiter: Arc<auth::TokenLimiter>,
    /// Heavy requests running now, per identity and in all (`[limits]`).
    heavy: Arc<limits::HeavyLimiter>,
    /// Who may read `/metrics` besides staff (`[telemetry]`).
    telemetry: Arc<crate::config::TelemetryConfig>,
}

impl HttpState {
    /// The edge over `app`, with no ingest secrets and the pages served without a site root.
    pub fn new(app: App) -> Self {
        let token_limiter = Arc::new(auth::TokenLimiter::new(app.access().tokens.per_minute));
        let heavy = Arc::new(limits::HeavyLimiter::new(app.limits(), app.store()));
        Self { app, ingest: Arc::default(), web: Arc::default(), token_limiter, heavy, telemetry: Arc::default() }
    }

    /// Lets the scraper with `[telemetry] token` read `/metrics`.
    pub fn with_telemetry(self, telemetry: crate::config::TelemetryConfig) -> Self {
        Self { telemetry: Arc::new(telemetry), ..self }
    }

    /// Serves the web pages with this site root (the wasm bundle) and rack topology.
    pub fn with_web(self, options: slurmlens_web::server::WebOptions) -> Self {
        Self { web: Arc::new(options), ..self }
    }

    /// Accepts the Slurm plugin's records for the clusters these secrets belong to.
    pub fn with_ingest(self, secrets: ingest::IngestSecrets) -> Self {
        Self { ingest: Arc::new(secrets), ..self }
    }

    /// The application behind the edge.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// How the pages are served (site root, topology, time zone).
    pub fn web_options(&self) -> slurmlens_web::server::WebOptions {
        self.web.as_ref().clone()
    }
}

impl FromRef<HttpState> for App {
    fn from_ref(state: &HttpState) -> Self {
        state.app.clone()
    }
}

/// Every `/api/v1` route, declared once: each `routes!` registers a handler with axum and adds its
/// `#[utoipa::path]` to the OpenAPI document, so the two cannot disagree. Add routes here, never with a
/// plain `.route(…)` (the tests in `openapi_tests` look for one).
fn api_routes() -> OpenApiRouter<HttpState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(jobs::health))
        .routes(routes!(jobs::clusters))
        .routes(routes!(openapi::serve_document))
        .routes(routes!(jobs::list))
        .routes(routes!(export::export))
        .routes(routes!(jobs::show))
        .routes(routes!(jobs::report))
        .routes(routes!(script::job_script))
        .routes(routes!(script::job_output))
        .routes(routes!(ingest::job_gpus))
        .routes(routes!(ingest::post_gpu_allocations))
        .routes(routes!(traces::post_traces))
        .routes(routes!(traces::post_nsys))
        .routes(routes!(traces::post_job_nsys))
        .routes(routes!(traces::job_traces))
        .routes(routes!(signals::job_logs))
        .routes(routes!(signals::job_profile))
        .routes(routes!(otlp::post_logs))
        .routes(routes!(nodes::list))
        .routes(routes!(nodes::events))
        .routes(routes!(nodes::gpu_values))
        .routes(routes!(nodes::held_gpus))
        .routes(routes!(nodes::busy_gpus))
        .routes(routes!(node_page::node_page))
        .routes(routes!(node_page::node_health))
        .routes(routes!(tokens::create, tokens::list))
        .routes(routes!(tokens::revoke))
        .routes(routes!(tokens::uses))
        .routes(routes!(shares::create, shares::list))
        .routes(routes!(shares::revoke))
        .routes(routes!(shares::shared_report))
        .routes(routes!(notify::mine))
        .routes(routes!(notify::set_rule))
        .routes(routes!(usage::usage))
        .routes(routes!(usage::stats))
        .routes(routes!(tags::list))
        .routes(routes!(tags::add, tags::remove))
        .routes(routes!(compare::previous_runs))
        .routes(routes!(compare::compare))
        .routes(routes!(advice::advice))
        .routes(routes!(advice::get_setting, advice::put_setting))
}

/// The whole API, and the web pages.
pub fn router(state: HttpState) -> Router {
    let pages = pages::routes(&state.app, state.web.as_ref().clone());
    let (api, _document) = api_routes().split_for_parts();
    let shared = Router::new().route("/shared/{secret}", axum::routing::get(shares::shared_page));
    api.route("/metrics", axum::routing::get(operations::metrics))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .merge(shared)
        .with_state(state.clone())
        .merge(pages)
        // Overload: heavy requests bounded per identity and in all, refused at once when over
        // (`limits.rs`). Inside `identify`, whose identity it keys on.
        .layer(middleware::from_fn_with_state(state.clone(), limits::limit_heavy))
        // (end of the overload block)
        .layer(middleware::from_fn_with_state(state, auth::identify))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn(log_server_errors))
        .layer(always(
            header::CONTENT_SECURITY_POLICY,
            "frame-ancestors 'none'; object-src 'none'; base-uri 'self'; form-action 'self'",
        ))
        .layer(always(header::X_FRAME_OPTIONS, "DENY"))
        .layer(always(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(always(header::REFERRER_POLICY, "same-origin"))
        .layer(TraceLayer::new_for_http().make_span_with(operations::request_span))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            Duration::from_secs(30),
        ))
        // Outermost: the timeout's 504 is counted, and every answer carries its request's id. (Axum
        // layers each route, so the route's template is known here.)
        .layer(middleware::from_fn(operations::observe))
        .layer(middleware::from_fn(operations::request_id))
}

/// `/metrics` alone, for `[telemetry] listen` (a listener without sign-in, bound where only the
/// site's scraper reaches).
pub fn metrics_router(state: HttpState) -> Router {
    operations::listener_router(state).layer(middleware::from_fn(operations::request_id))
}

/// A header set on every answer that has none of its own. Together: nothing may frame a page
/// (clickjacking), no type is sniffed, no page address leaves in a Referer to another site. The pages'
/// script policy (a nonce per response) is in their `<meta>`; browsers enforce both policies.
fn always(name: axum::http::HeaderName, value: &'static str) -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value))
}

/// A handler's panic as the 500 envelope. The panic itself was logged by the process's panic hook
/// (`serve::log_panics`), inside the request's span, so the path is on that one line.
fn panic_response(_payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    use axum::response::IntoResponse;
    let envelope = slurmlens_wire::ErrorEnvelope {
        error: slurmlens_wire::ErrorBody { code: "internal".into(), message: "internal error".into(), parameter: None },
    };
    (axum::http::StatusCode::INTERNAL_SERVER_ERROR, axum::Json(envelope)).into_response()
}

/// Logs the cause of every 5xx once, here, rather than where the error was converted.
async fn log_server_errors(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    if let Some(ErrorCause(cause)) = response.extensions().get::<ErrorCause>() {
        tracing::error!(%path, status = response.status().as_u16(), %cause, "request failed");
    }
    response
}

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod openapi_tests;
#[cfg(test)]
mod otlp_tests;
