//! The web pages' data source: the server's [`WebData`], which binds each page request to the viewer
//! the sign-in layer found on it and reads through the same application calls as `/api/v1`, so a
//! page shows exactly what the API answers the same person. Mounts the pages' router.

use std::sync::Arc;

use axum::Router;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use slurmlens_web::api::DataError;
use slurmlens_web::gantt::WindowJob;
use slurmlens_web::palette::ColourSlots;
use slurmlens_web::query::JobQuery;
use slurmlens_web::server::{DataFuture, PageData, WebData, WebOptions, WindowJobs};
use slurmlens_wire as wire;

use crate::app::gantt::ChartJob;
use crate::app::job_order::JobOrder;
use crate::app::jobs::{DEFAULT_PAGE, JobsQuery, MAX_PAGE, split_list};
use crate::app::{App, AppError, Viewer};
use crate::domain::job::{JobFilter, JobSearch};

/// The pages' router over `app`, served with `options` (site root, topology).
pub fn routes(app: &App, options: WebOptions) -> Router {
    slurmlens_web::server::routes(Arc::new(Pages { app: app.clone() }), options)
}

/// One page (`path_and_query`, e.g. `/jobs/7?cluster=lab`) as `viewer` gets it, rendered in process
/// without a listener: the document, or the page's status and body when it is not a 200.
pub async fn page_html(
    app: &App,
    options: WebOptions,
    viewer: Viewer,
    path_and_query: &str,
) -> Result<String, (axum::http::StatusCode, String)> {
    use tower::ServiceExt as _;
    let failed = |error: String| (axum::http::StatusCode::INTERNAL_SERVER_ERROR, error);
    let request = axum::http::Request::get(path_and_query)
        .extension(viewer)
        .body(axum::body::Body::empty())
        .map_err(|error| failed(error.to_string()))?;
    let response = routes(app, options).oneshot(request).await.map_err(|error| failed(error.to_string()))?;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.map_err(|e| failed(e.to_string()))?;
    let body = String::from_utf8_lossy(&bytes).into_owned();
    if status.is_success() { Ok(body) } else { Err((status, body)) }
}

struct Pages {
    app: App,
}

impl WebData for Pages {
    fn clusters(&self) -> Vec<String> {
        self.app.cluster_names()
    }

    fn clusters_for(&self, request: &Parts) -> Result<Vec<String>, DataError> {
        let viewer = request.extensions.get::<Viewer>().cloned().unwrap_or_default();
        self.app.clusters_for(&viewer).map_err(data_error)
    }

    fn for_request(&self, request: &Parts) -> Arc<dyn PageData> {
        // The sign-in layer runs before every page; a request it did not see is nobody's.
        let viewer = request.extensions.get::<Viewer>().cloned().unwrap_or_default();
        Arc::new(Viewing { app: self.app.clone(), viewer })
    }
}

/// One page request's reads, as its viewer.
struct Viewing {
    app: App,
    viewer: Viewer,
}

/// Keeps the API's status and message. A page renders its error into HTML, where the server's error
/// logging cannot see it, so a 5xx cause is logged here, once, and stays out of the page.
fn data_error(error: AppError) -> DataError {
    match error {
        AppError::Invalid { parameter, message } => DataError::invalid(format!("{parameter}: {message}")),
        AppError::NotFound(message) => DataError::not_found(message),
        AppError::Unauthorized(message) => DataError { status: 401, message },
        AppError::Forbidden(message) => DataError { status: 403, message },
        AppError::Unavailable { service, cause } => {
            tracing::error!(service, %cause, "page data unavailable");
            DataError::unavailable(format!("{service} is unavailable right now; try again shortly"))
        }
        AppError::QueryTimeout(cause) => {
            tracing::error!(%cause, "page data stopped at slurmdbd's statement time limit");
            DataError { status: 504, message: super::error::QUERY_TIMEOUT_MESSAGE.into() }
        }
        AppError::Internal(cause) => {
            tracing::error!(%cause, "page data failed");
            DataError { status: 500, message: "internal error".into() }
        }
    }
}

/// A job's optional part (report, logs, profile): absent where the job is not found for this viewer.
fn optional<T>(answer: Result<T, AppError>) -> Result<Option<T>, DataError> {
    match answer {
        Ok(value) => Ok(Some(value)),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(error) => Err(data_error(error)),
    }
}

/// A page's job query, parsed as `/api/v1/jobs` parses its query string.
fn jobs_query(query: &JobQuery) -> Result<JobsQuery, AppError> {
    let time = |seconds: Option<i64>, name: &str| {
        seconds
            .map(|seconds| {
                DateTime::<Utc>::from_timestamp(seconds, 0).ok_or_else(|| AppError::invalid(name, "not a time"))
            })
            .transpose()
    };
    let filters = &query.filters;
    let end = time(query.end, "end")?;
    let window = JobsQuery::window(time(query.start, "start")?, end)?;
    let filter = JobFilter {
        users: split_list(filters.user.as_deref()),
        accounts: split_list(filters.account.as_deref()),
        partitions: split_list(filters.partition.as_deref()),
        states: JobsQuery::states(&split_list(filters.state.as_deref()))?,
        search: query
            .search
            .as_deref()
            .filter(|text| !text.trim().is_empty())
            .map(JobSearch::parse)
            .transpose()
            .map_err(|error| AppError::invalid("q", error.to_string()))?,
        tag: filters.tag.as_deref().filter(|text| !text.is_empty()).map(crate::app::tags::parse_tag).transpose()?,
        ..JobFilter::default()
    };
    let limit = query.limit.map_or(DEFAULT_PAGE, |limit| limit as usize);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(AppError::invalid("limit", format!("{limit} is out of range 1..={MAX_PAGE}")));
    }
    let cursor = JobsQuery::cursor(query.cursor.as_deref())?;
    let order = query.sort.map(|sort| JobOrder {
        sort,
        descending: query.descending,
        offset: query.offset.map_or(0, |offset| usize::try_from(offset).unwrap_or(usize::MAX)),
    });
    Ok(JobsQuery { cluster: query.cluster.clone(), window, filter, limit, cursor, blame: Vec::new(), order })
}

/// A usage page's window, parsed as `/api/v1/usage` parses its query string.
fn usage_window_of(query: &slurmlens_web::usage::UsageQuery) -> Result<crate::domain::job::TimeWindow, AppError> {
    let time = |seconds: Option<i64>, name: &str| {
        seconds
            .map(|seconds| {
                DateTime::<Utc>::from_timestamp(seconds, 0).ok_or_else(|| AppError::invalid(name, "not a time"))
            })
            .transpose()
    };
    let end = time(query.end, "end")?;
    crate::app::usage::usage_window(time(query.start, "start")?, end)
}

impl PageData for Viewing {
    fn usage<'a>(&'a self, query: &'a slurmlens_web::usage::UsageQuery) -> DataFuture<'a, wire::UsageReport> {
        Box::pin(async move {
            let window = usage_window_of(query).map_err(data_error)?;
            self.app
                .usage(&self.viewer, query.cluster.as_deref(), window, query.by, query.tag.as_deref())
                .await
                .map_err(data_error)
        })
    }

    fn stats<'a>(&'a self, query: &'a slurmlens_web::usage::UsageQuery) -> DataFuture<'a, wire::UsageStats> {
        Box::pin(async move {
            let window = usage_window_of(query).map_err(data_error)?;
            self.app
                .usage_stats(&self.viewer, query.cluster.as_deref(), window, query.tag.as_deref())
                .await
                .map_err(data_error)
        })
    }

    fn jobs<'a>(&'a self, query: &'a JobQuery) -> DataFuture<'a, wire::Page<wire::Job>> {
        Box::pin(async move {
            self.app.cluster(query.cluster.as_deref()).map_err(data_error)?;
            let query = jobs_query(query).map_err(data_error)?;
            self.app.list_jobs(&self.viewer, &query).await.map_err(data_error)
        })
    }

    fn window_jobs<'a>(&'a self, query: &'a JobQuery, cap: usize) -> DataFuture<'a, WindowJobs> {
        Box::pin(async move {
            let parsed = jobs_query(query).map_err(data_error)?;
            let window = self
                .app
                .chart_window(&self.viewer, query.cluster.as_deref(), parsed.window, &parsed.filter, cap)
                .await
                .map_err(data_error)?;
            Ok(WindowJobs { jobs: window.jobs.into_iter().map(window_job).collect(), truncated: window.truncated })
        })
    }

    fn moment_jobs<'a>(
        &'a self,
        cluster: Option<&'a str>,
        at: i64,
        means: bool,
    ) -> DataFuture<'a, (Vec<WindowJob>, Vec<wire::HeldGpu>)> {
        Box::pin(async move {
            let (jobs, held) =
                self.app.chart_moment(&self.viewer, cluster, moment(at)?, means).await.map_err(data_error)?;
            Ok((jobs.into_iter().map(window_job).collect(), held))
        })
    }

    fn job<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, wire::JobDetail> {
        Box::pin(async move { self.app.show_job(&self.viewer, cluster, job_id).await.map_err(data_error) })
    }

    fn nodes<'a>(&'a self, cluster: Option<&'a str>) -> DataFuture<'a, Vec<wire::Node>> {
        Box::pin(async move { self.app.list_nodes(&self.viewer, cluster).await.map_err(data_error) })
    }

    fn node_events<'a>(
        &'a self,
        cluster: Option<&'a str>,
        (start, end): (i64, i64),
    ) -> DataFuture<'a, Vec<wire::NodeEvent>> {
        Box::pin(async move {
            let window = (Some(moment(start)?), Some(moment(end)?));
            let answer = self.app.node_events(&self.viewer, cluster, window, None).await;
            answer.inspect_err(|error| tracing::warn!(%error, "node events unavailable")).map_err(data_error)
        })
    }

    fn node_page<'a>(
        &'a self,
        cluster: Option<&'a str>,
        node: &'a str,
        (start, end): (Option<i64>, Option<i64>),
    ) -> DataFuture<'a, wire::NodePage> {
        let at = |seconds: Option<i64>| seconds.and_then(|seconds| chrono::DateTime::from_timestamp(seconds, 0));
        Box::pin(async move {
            self.app.node_page(&self.viewer, cluster, node, (at(start), at(end))).await.map_err(data_error)
        })
    }

    fn node_health<'a>(&'a self, cluster: Option<&'a str>, end: i64) -> DataFuture<'a, Option<wire::NodesHealth>> {
        let end = chrono::DateTime::from_timestamp(end, 0);
        Box::pin(async move {
            match self.app.nodes_health(&self.viewer, cluster, (None, end)).await {
                Ok(health) => Ok(Some(health)),
                Err(error) => {
                    tracing::warn!(%error, "node health unavailable; the grid shows no badges");
                    Ok(None)
                }
            }
        })
    }

    fn report<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobReport>> {
        let points = slurmlens_web::charts::PAGE_POINTS as usize;
        Box::pin(async move { optional(self.app.job_report(&self.viewer, cluster, job_id, points).await) })
    }

    fn logs<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobLogs>> {
        let request = Default::default();
        Box::pin(async move { optional(self.app.job_logs(&self.viewer, cluster, job_id, request).await) })
    }

    fn script<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobScript>> {
        Box::pin(async move { optional(self.app.job_script(&self.viewer, cluster, job_id).await) })
    }
    fn output<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobOutput>> {
        Box::pin(async move { optional(self.app.job_output(&self.viewer, cluster, job_id).await) })
    }

    fn tags<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobTags>> {
        Box::pin(async move { optional(self.app.job_tags(&self.viewer, cluster, job_id).await) })
    }

    fn previous_runs<'a>(
        &'a self,
        cluster: Option<&'a str>,
        job_id: &'a str,
    ) -> DataFuture<'a, Option<wire::PreviousRuns>> {
        Box::pin(async move { optional(self.app.previous_runs(&self.viewer, cluster, job_id).await) })
    }

    fn compare<'a>(&'a self, cluster: Option<&'a str>, jobs: &'a [String]) -> DataFuture<'a, wire::Comparison> {
        Box::pin(async move { self.app.compare(&self.viewer, cluster, jobs).await.map_err(data_error) })
    }

    fn profile<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobProfile>> {
        let request =
            crate::app::signals::ProfileRequest { top: crate::app::signals::DEFAULT_TOP, ..Default::default() };
        Box::pin(async move { optional(self.app.job_profile(&self.viewer, cluster, job_id, request).await) })
    }

    fn held_gpus<'a>(&'a self, cluster: Option<&'a str>, at: i64) -> DataFuture<'a, Vec<wire::HeldGpu>> {
        Box::pin(async move {
            match self.app.held_gpus(&self.viewer, cluster, moment(at)?).await {
                Ok(held) => Ok(held),
                // No store configured: the grid shows counts, as without the plugin.
                Err(AppError::Unavailable { .. }) => Ok(Vec::new()),
                Err(error) => Err(data_error(error)),
            }
        })
    }

    fn busy_gpus<'a>(&'a self, cluster: Option<&'a str>, at: i64) -> DataFuture<'a, Vec<wire::BusyGpus>> {
        Box::pin(async move { self.app.busy_gpus(&self.viewer, cluster, moment(at)?).await.map_err(data_error) })
    }

    fn gpu_values<'a>(
        &'a self,
        cluster: Option<&'a str>,
        metric: &'a str,
        at: i64,
    ) -> DataFuture<'a, Option<wire::GpuReadings>> {
        Box::pin(async move {
            self.app.gpu_values(&self.viewer, cluster, metric, moment(at)?).await.map(Some).map_err(data_error)
        })
    }

    fn tokens<'a>(&'a self) -> DataFuture<'a, Vec<wire::TokenInfo>> {
        Box::pin(async move { super::tokens::own_tokens(&self.app, &self.viewer).await.map_err(data_error) })
    }

    fn my_notifications<'a>(&'a self) -> DataFuture<'a, wire::MyNotifications> {
        Box::pin(async move { self.app.my_notifications(&self.viewer).await.map_err(data_error) })
    }

    fn colour_slots<'a>(&'a self, cluster: Option<&'a str>, slots: u32) -> DataFuture<'a, ColourSlots> {
        Box::pin(async move {
            let found = self.app.colour_slots(&self.viewer, cluster, slots).await.map_err(data_error)?;
            Ok(ColourSlots { users: found.users, accounts: found.accounts })
        })
    }
}

/// A chart's job as the pages take it.
fn window_job(job: ChartJob) -> WindowJob {
    let seconds = |epoch: u64| i64::try_from(epoch).unwrap_or(0);
    WindowJob {
        job_id: job.job_id,
        job_id_raw: job.job_id_raw,
        name: job.name,
        user: job.user,
        account: job.account,
        partition: job.partition,
        state: job.state,
        start: seconds(job.start),
        end: seconds(job.end),
        gpus: job.gpus,
        node_list: job.node_list,
        hosts: job.hosts,
        mean_gpu_util: job.mean_gpu_util,
        mean_tensor_active: job.mean_tensor_active,
    }
}

/// A page's moment (Unix seconds), as the API reads `at`.
fn moment(at: i64) -> Result<DateTime<Utc>, DataError> {
    DateTime::<Utc>::from_timestamp(at, 0).ok_or_else(|| DataError::invalid(format!("at: `{at}` is not a time")))
}
