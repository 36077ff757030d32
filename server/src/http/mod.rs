//! HTTP edge: routes, extraction of the viewer, mapping of domain records to wire types.
//! Handlers parse into domain types, call a source, map the answer; nothing else.

mod auth;
mod error;
pub mod ingest;
mod jobs;
mod nodes;
pub mod openapi;
mod otlp;
mod otlp_map;
mod pages;
mod params;
pub(crate) mod signals;
mod tokens;
pub mod traces;
pub(crate) mod wire_map;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::Response;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, ErrorCause};

use crate::config::{AccessConfig, AnonymousAccess};
use crate::domain::cluster::ClusterName;
use crate::domain::scope::ViewerScope;
use crate::reports::Reporter;
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::Store;

/// What every handler can reach. Cheap to clone; holds no per-user state.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
    ingest: Arc<ingest::IngestSecrets>,
    web: Arc<slurmlens_web::server::WebOptions>,
    signals: Arc<crate::signals::Signals>,
}

struct Inner {
    clusters: BTreeMap<ClusterName, SlurmDbd>,
    default_cluster: ClusterName,
    access: AccessConfig,
    store: Option<Store>,
    reporter: Reporter,
    token_limiter: auth::TokenLimiter,
}

impl AppState {
    /// `readers` must not be empty; the first one is the default cluster. `store` is slurmlens's own
    /// database; without one, the features that need it answer 503 and the rest works.
    pub fn new(readers: Vec<SlurmDbd>, access: AccessConfig, store: Option<Store>, reporter: Reporter) -> Option<Self> {
        let default_cluster = readers.first()?.cluster().clone();
        let clusters = readers.into_iter().map(|reader| (reader.cluster().clone(), reader)).collect();
        let token_limiter = auth::TokenLimiter::new(access.tokens.per_minute);
        Some(Self {
            inner: Arc::new(Inner { clusters, default_cluster, access, store, reporter, token_limiter }),
            ingest: Arc::default(),
            web: Arc::default(),
            signals: Arc::default(),
        })
    }

    /// Serves the web pages with this site root (the wasm bundle) and rack topology.
    pub fn with_web(self, options: slurmlens_web::server::WebOptions) -> Self {
        Self { web: Arc::new(options), ..self }
    }

    /// Accepts the Slurm plugin's records for the clusters these secrets belong to.
    pub fn with_ingest(self, secrets: ingest::IngestSecrets) -> Self {
        Self { ingest: Arc::new(secrets), ..self }
    }

    /// Reads job logs and profiles from these sources (VictoriaLogs, Pyroscope).
    pub fn with_signals(self, signals: crate::signals::Signals) -> Self {
        Self { signals: Arc::new(signals), ..self }
    }

    fn signals(&self) -> &crate::signals::Signals {
        &self.signals
    }

    fn ingest_secrets(&self) -> &ingest::IngestSecrets {
        &self.ingest
    }

    /// Every configured cluster's reader.
    pub fn readers(&self) -> impl Iterator<Item = &SlurmDbd> {
        self.inner.clusters.values()
    }

    pub fn reporter(&self) -> &Reporter {
        &self.inner.reporter
    }

    /// slurmlens's own database, if configured.
    pub fn store_handle(&self) -> Option<&Store> {
        self.inner.store.as_ref()
    }

    /// slurmlens's own database, or 503 when none is configured.
    fn store(&self) -> Result<&Store, ApiError> {
        self.inner.store.as_ref().ok_or(ApiError::Unavailable {
            source: "slurmlens database",
            cause: "no [database] url is configured".into(),
        })
    }

    /// The reader for `?cluster=` or the default one.
    fn slurmdbd(&self, cluster: Option<&str>) -> Result<&SlurmDbd, ApiError> {
        let Some(name) = cluster else {
            return self
                .inner
                .clusters
                .get(&self.inner.default_cluster)
                .ok_or_else(|| ApiError::Internal("no cluster".into()));
        };
        let known = || self.inner.clusters.keys().map(ClusterName::as_str).collect::<Vec<_>>().join(", ");
        let parsed: ClusterName = name
            .parse()
            .map_err(|_| ApiError::invalid("cluster", format!("unknown cluster `{name}`; known: {}", known())))?;
        self.inner
            .clusters
            .get(&parsed)
            .ok_or_else(|| ApiError::invalid("cluster", format!("unknown cluster `{name}`; known: {}", known())))
    }

    fn access(&self) -> &AccessConfig {
        &self.inner.access
    }

    fn token_limiter(&self) -> &auth::TokenLimiter {
        &self.inner.token_limiter
    }

    /// The viewer of a request, from the identity [`auth::identify`] stamped on it: staff see every
    /// job; a user their own and those of the accounts they coordinate (slurmdbd's `acct_coord_table`).
    /// Without an identity: everything where the site says anonymous is staff (a lab, a demo),
    /// otherwise 401.
    /// The job `job_id` (`123`, `123_4`, `8+1`) as this viewer may see it: a job they may not see is a
    /// 404, the same answer as one that does not exist.
    async fn visible_job(
        &self,
        headers: &HeaderMap,
        reader: &SlurmDbd,
        job_id: &str,
    ) -> Result<(crate::domain::job::JobRecord, Vec<crate::domain::job::StepRecord>), ApiError> {
        let selector: crate::domain::ids::JobSelector =
            job_id.parse().map_err(|e: crate::domain::ids::BadJobId| ApiError::invalid("job_id", e.to_string()))?;
        let scope = self.viewer(headers, reader).await?;
        reader.job(&scope, selector).await?.ok_or_else(|| ApiError::NotFound(format!("no job {job_id}")))
    }

    async fn viewer(&self, headers: &HeaderMap, reader: &SlurmDbd) -> Result<ViewerScope, ApiError> {
        let access = &self.inner.access;
        match auth::Identity::of(headers) {
            Some(identity) if identity.is_staff(access) => Ok(ViewerScope::Staff),
            Some(identity) => Ok(reader.scope_for_user(&identity.user).await?),
            None => match access.anonymous {
                AnonymousAccess::Staff => Ok(ViewerScope::Staff),
                AnonymousAccess::Nobody => {
                    Err(ApiError::Unauthorized("sign in through the site, or send a personal token".into()))
                }
            },
        }
    }
}

/// Every `/api/v1` route, declared once: each `routes!` registers a handler with axum and adds its
/// `#[utoipa::path]` to the OpenAPI document, so the two cannot disagree. Add routes here, never with a
/// plain `.route(…)` (the tests in `openapi_tests` look for one).
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(jobs::health))
        .routes(routes!(openapi::serve_document))
        .routes(routes!(jobs::list))
        .routes(routes!(jobs::show))
        .routes(routes!(jobs::report))
        .routes(routes!(ingest::job_gpus))
        .routes(routes!(ingest::post_gpu_allocations))
        .routes(routes!(traces::post_traces))
        .routes(routes!(traces::post_nsys))
        .routes(routes!(traces::job_traces))
        .routes(routes!(signals::job_logs))
        .routes(routes!(signals::job_profile))
        .routes(routes!(otlp::post_logs))
        .routes(routes!(nodes::list))
        .routes(routes!(nodes::events))
        .routes(routes!(nodes::gpu_values))
        .routes(routes!(nodes::held_gpus))
        .routes(routes!(nodes::busy_gpus))
        .routes(routes!(tokens::create, tokens::list))
        .routes(routes!(tokens::revoke))
        .routes(routes!(tokens::uses))
}

/// The whole API, and the web pages.
pub fn router(state: AppState) -> Router {
    let pages = pages::routes(&state, state.web.as_ref().clone());
    let (api, _document) = api_routes().split_for_parts();
    api.fallback(|| async { ApiError::NotFound("no such route".into()) })
        .with_state(state.clone())
        .merge(pages)
        .layer(middleware::from_fn_with_state(state, auth::identify))
        .layer(middleware::from_fn(log_server_errors))
        .layer(TraceLayer::new_for_http())
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            Duration::from_secs(30),
        ))
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

/// Extracts the state for handlers that need it by reference.
pub type AppStateExtractor = State<AppState>;

#[cfg(test)]
mod openapi_tests;
#[cfg(test)]
mod otlp_tests;
