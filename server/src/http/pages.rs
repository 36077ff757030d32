//! The web pages' data source: implements [`WebData`] by calling the API's own handlers in process,
//! so a page shows exactly what `/api/v1` would answer the same request (same viewer, same scope,
//! same errors), and mounts the pages' router (`slurmlens_web::server::routes`).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use slurmlens_web::api::DataError;
use slurmlens_web::query::JobQuery;
use slurmlens_web::server::{DataFuture, WebData, WebOptions};
use slurmlens_wire as wire;

use super::{ApiError, AppState, jobs, nodes, signals};

/// The pages' router over `state`, served with `options` (site root, topology).
pub fn routes(state: &AppState, options: WebOptions) -> Router {
    slurmlens_web::server::routes(Arc::new(Pages { state: state.clone() }), options)
}

struct Pages {
    state: AppState,
}

fn cluster_pairs(cluster: Option<&str>) -> Vec<(String, String)> {
    cluster.map(|name| vec![("cluster".to_string(), name.to_string())]).unwrap_or_default()
}

/// A job's optional part (report, logs, profile): absent where the job is not found for this viewer.
fn optional<T>(answer: Result<Json<T>, ApiError>) -> Result<Option<T>, DataError> {
    match answer {
        Ok(Json(value)) => Ok(Some(value)),
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(error) => Err(data_error(error)),
    }
}

/// Keeps the API's status and message; a 5xx cause is logged here, once, and stays out of the page.
fn data_error(error: ApiError) -> DataError {
    match error {
        ApiError::InvalidParameter { parameter, message } => DataError::invalid(format!("{parameter}: {message}")),
        ApiError::NotFound(message) => DataError::not_found(message),
        ApiError::Unauthorized(message) => DataError { status: 401, message },
        ApiError::Forbidden(message) => DataError { status: 403, message },
        ApiError::RateLimited(message) => DataError { status: 429, message },
        ApiError::Unavailable { source, cause } => {
            tracing::error!(source, %cause, "page data unavailable");
            DataError::unavailable(format!("{source} is unavailable right now; try again shortly"))
        }
        other => {
            tracing::error!(error = ?other, "page data failed");
            DataError { status: 500, message: "internal error".into() }
        }
    }
}

impl WebData for Pages {
    fn clusters(&self) -> Vec<String> {
        let default = self.state.inner.default_cluster.as_str().to_string();
        let others =
            self.state.inner.clusters.keys().map(|name| name.as_str().to_string()).filter(|name| *name != default);
        std::iter::once(default.clone()).chain(others).collect()
    }

    fn jobs<'a>(&'a self, headers: &'a HeaderMap, query: &'a JobQuery) -> DataFuture<'a, wire::Page<wire::Job>> {
        Box::pin(async move {
            jobs::list(State(self.state.clone()), headers.clone(), Ok(Query(query.pairs())))
                .await
                .map(|Json(page)| page)
                .map_err(data_error)
        })
    }

    fn job<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        job_id: &'a str,
    ) -> DataFuture<'a, wire::JobDetail> {
        Box::pin(async move {
            jobs::show(
                State(self.state.clone()),
                headers.clone(),
                Path(job_id.to_string()),
                Ok(Query(cluster_pairs(cluster))),
            )
            .await
            .map(|Json(detail)| detail)
            .map_err(data_error)
        })
    }

    fn report<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        job_id: &'a str,
    ) -> DataFuture<'a, Option<wire::JobReport>> {
        Box::pin(async move {
            let mut pairs = cluster_pairs(cluster);
            pairs.push(("points".to_string(), slurmlens_web::charts::PAGE_POINTS.to_string()));
            optional(
                jobs::report(State(self.state.clone()), headers.clone(), Path(job_id.to_string()), Ok(Query(pairs)))
                    .await,
            )
        })
    }

    fn logs<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        job_id: &'a str,
    ) -> DataFuture<'a, Option<wire::JobLogs>> {
        Box::pin(async move {
            let pairs = cluster_pairs(cluster);
            optional(
                signals::job_logs(
                    State(self.state.clone()),
                    headers.clone(),
                    Path(job_id.to_string()),
                    Ok(Query(pairs)),
                )
                .await,
            )
        })
    }

    fn profile<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        job_id: &'a str,
    ) -> DataFuture<'a, Option<wire::JobProfile>> {
        Box::pin(async move {
            let pairs = cluster_pairs(cluster);
            optional(
                signals::job_profile(
                    State(self.state.clone()),
                    headers.clone(),
                    Path(job_id.to_string()),
                    Ok(Query(pairs)),
                )
                .await,
            )
        })
    }

    fn gpu_values<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        metric: &'a str,
        at: i64,
    ) -> DataFuture<'a, Option<wire::GpuValues>> {
        Box::pin(async move {
            let mut pairs = cluster_pairs(cluster);
            pairs.push(("metric".to_string(), metric.to_string()));
            pairs.push(("at".to_string(), at.to_string()));
            nodes::gpu_values(State(self.state.clone()), headers.clone(), Ok(Query(pairs)))
                .await
                .map(|Json(values)| Some(values))
                .map_err(data_error)
        })
    }

    fn held_gpus<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        at: i64,
    ) -> DataFuture<'a, Vec<wire::HeldGpu>> {
        Box::pin(async move {
            let mut pairs = cluster_pairs(cluster);
            pairs.push(("at".to_string(), at.to_string()));
            match nodes::held_gpus(State(self.state.clone()), headers.clone(), Ok(Query(pairs))).await {
                Ok(Json(held)) => Ok(held),
                // No store configured: the grid shows counts, as without the plugin.
                Err(ApiError::Unavailable { .. }) => Ok(Vec::new()),
                Err(error) => Err(data_error(error)),
            }
        })
    }

    fn busy_gpus<'a>(
        &'a self,
        headers: &'a HeaderMap,
        cluster: Option<&'a str>,
        at: i64,
    ) -> DataFuture<'a, Vec<wire::BusyGpus>> {
        Box::pin(async move {
            let mut pairs = cluster_pairs(cluster);
            pairs.push(("at".to_string(), at.to_string()));
            nodes::busy_gpus(State(self.state.clone()), headers.clone(), Ok(Query(pairs)))
                .await
                .map(|Json(busy)| busy)
                .map_err(data_error)
        })
    }

    fn nodes<'a>(&'a self, headers: &'a HeaderMap, cluster: Option<&'a str>) -> DataFuture<'a, Vec<wire::Node>> {
        Box::pin(async move {
            nodes::list(State(self.state.clone()), headers.clone(), Ok(Query(cluster_pairs(cluster))))
                .await
                .map(|Json(nodes)| nodes)
                .map_err(data_error)
        })
    }
}
