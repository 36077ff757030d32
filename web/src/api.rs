//! Where pages get their data. On the server, in process through [`crate::server::PageData`] (no HTTP
//! round trip; the server binds it to the request's viewer); in the browser, over HTTP from the REST API and
//! the page-shaped endpoints under `/web/v1`. Both sides return the same types, so a page renders the
//! same HTML either way and hydration finds what the server sent.

use std::fmt;
use std::future::Future;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use slurmlens_wire as wire;

use crate::charts::ChartView;
use crate::gantt::GanttData;
use crate::grid::GridSnapshot;
#[cfg(not(feature = "ssr"))]
use crate::query::encode;
use crate::query::{GanttQuery, GridQuery, JobQuery};

/// Why data could not be loaded: the HTTP status the API answered (or would have) and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataError {
    pub status: u16,
    pub message: String,
}

impl DataError {
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self { status: 404, message: message.into() }
    }

    /// 503: a source did not answer.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self { status: 503, message: message.into() }
    }

    /// 400.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self { status: 400, message: message.into() }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (HTTP {})", self.message, self.status)
    }
}

/// A job page's data: the job as `/api/v1/jobs/{id}` gives it, and its report's summary if it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub detail: wire::JobDetail,
    /// The report's summaries and verdicts (its series are drawn into `charts`, then dropped).
    pub report: Option<wire::JobReport>,
    #[serde(default)]
    pub charts: Vec<crate::charts::Chart>,
    /// The job's log lines (`/api/v1/jobs/{id}/logs`); `None` where they could not be asked.
    #[serde(default)]
    pub logs: Option<wire::JobLogs>,
    /// The job's CPU profile (`/api/v1/jobs/{id}/profile`); `None` where it could not be asked.
    #[serde(default)]
    pub profile: Option<wire::JobProfile>,
    /// The job's script (`/api/v1/jobs/{id}/script`); `None` where it could not be asked.
    #[serde(default)]
    pub script: Option<wire::JobScript>,
    /// Where the job's output went and its last lines (`/api/v1/jobs/{id}/output`); `None` where it
    /// could not be asked.
    #[serde(default)]
    pub output: Option<wire::JobOutput>,
    /// The job's tags (`/api/v1/jobs/{id}/tags`); `None` where they could not be read.
    #[serde(default)]
    pub tags: Option<wire::JobTags>,
    /// The job against its owner's previous runs (`/api/v1/jobs/{id}/previous`); `None` where it could
    /// not be asked.
    #[serde(default)]
    pub previous: Option<wire::PreviousRuns>,
}

impl JobView {
    /// The page's data from a job and its report: the report's charts drawn, its series dropped.
    /// The charts are drawn as `view` says: in the viewer's zone, over the range they zoomed to.
    pub fn new(detail: wire::JobDetail, report: Option<wire::JobReport>, view: ChartView) -> Self {
        let charts = report.as_ref().map(|report| crate::charts::for_report(report, view)).unwrap_or_default();
        Self {
            detail,
            report: report.map(crate::charts::without_series),
            charts,
            logs: None,
            profile: None,
            script: None,
            output: None,
            tags: None,
            previous: None,
        }
    }

    /// With the job's previous runs of the same work.
    pub fn with_previous(self, previous: Option<wire::PreviousRuns>) -> Self {
        Self { previous, ..self }
    }

    /// With the job's tags.
    pub fn with_tags(self, tags: Option<wire::JobTags>) -> Self {
        Self { tags, ..self }
    }

    /// With the job's script, submit line and (where the viewer may see it) environment.
    pub fn with_script(self, script: Option<wire::JobScript>) -> Self {
        Self { script, ..self }
    }

    /// With where the job's output went and, for its owner and staff, its last lines.
    pub fn with_output(self, output: Option<wire::JobOutput>) -> Self {
        Self { output, ..self }
    }

    /// With the job's logs and profile; the important log lines are marked on the report's timelines.
    pub fn with_signals(
        mut self,
        logs: Option<wire::JobLogs>,
        profile: Option<wire::JobProfile>,
        view: ChartView,
    ) -> Self {
        let zone = view.zone;
        if let (Some(report), Some(logs)) = (&self.report, &logs)
            && let Some(span) = crate::charts::Span::of(report, view)
        {
            let moments: Vec<(i64, String)> = logs
                .important
                .iter()
                .map(|line| {
                    let what =
                        line.xid.map_or_else(|| line.kind.as_str().replace('_', " "), |code| format!("XID {code}"));
                    let node = line.node.as_deref().unwrap_or("?");
                    (line.time.timestamp(), format!("{what} on {node} at {}", zone.long(line.time.timestamp())))
                })
                .collect();
            crate::charts::mark_moments(&mut self.charts, &span, &moments);
        }
        Self { logs, profile, ..self }
    }
}

/// Seconds since the epoch, from the browser's clock in the browser.
pub fn now() -> i64 {
    #[cfg(target_arch = "wasm32")]
    {
        (js_sys::Date::now() / 1000.0) as i64
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        chrono::Utc::now().timestamp()
    }
}

/// Loads page data; build one per component with [`Loader::from_context`].
#[derive(Clone, Default)]
pub struct Loader {
    #[cfg(feature = "ssr")]
    server: Option<(crate::server::WebContext, std::sync::Arc<dyn crate::server::PageData>)>,
    /// The clusters the request's viewer may read (none named before sign-in).
    #[cfg(feature = "ssr")]
    clusters: Option<Result<Vec<String>, DataError>>,
}

#[cfg(feature = "ssr")]
fn no_source() -> DataError {
    DataError::unavailable("no data source is configured for the pages")
}

impl Loader {
    /// On the server: the data source, bound to the request being rendered (from the render's context).
    pub fn from_context() -> Self {
        #[cfg(feature = "ssr")]
        {
            use leptos::prelude::use_context;
            let context = use_context::<crate::server::WebContext>();
            let request = use_context::<axum::http::request::Parts>();
            let mut clusters = None;
            let server = context.zip(request).map(|(context, request)| {
                clusters = Some(context.clusters_for(&request));
                let data = context.for_request(&request);
                (context, data)
            });
            Self { server, clusters }
        }
        #[cfg(not(feature = "ssr"))]
        {
            Self {}
        }
    }

    /// The clusters the viewer may read, the default first.
    pub fn clusters(&self) -> impl Future<Output = Result<Vec<String>, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let clusters = self.clusters.clone();
            async move { clusters.unwrap_or_else(|| Err(no_source())) }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json("/web/v1/clusters".to_string())
        }
    }

    /// The Gantt's jobs for an explicit window.
    pub fn gantt(&self, query: GanttQuery) -> impl Future<Output = Result<GanttData, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (context, data) = server.ok_or_else(no_source)?;
                crate::server::gantt_data(&context, data.as_ref(), &query).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json(format!("/web/v1/gantt?{}", query.to_query()))
        }
    }

    /// The grid at a moment.
    pub fn grid(&self, query: GridQuery) -> impl Future<Output = Result<GridSnapshot, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (context, data) = server.ok_or_else(no_source)?;
                crate::server::grid_snapshot(&context, data.as_ref(), &query).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json(format!("/web/v1/grid?{}", query.to_query()))
        }
    }

    /// The node list now.
    pub fn node_list(
        &self,
        query: crate::query::NodesQuery,
    ) -> impl Future<Output = Result<crate::nodelist::NodeList, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (context, data) = server.ok_or_else(no_source)?;
                crate::server::node_list(&context, data.as_ref(), &query).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json(format!("/web/v1/nodes?{}", query.to_query()))
        }
    }

    /// One page of `/api/v1/jobs`.
    pub fn jobs(
        &self,
        query: JobQuery,
    ) -> impl Future<Output = Result<wire::Page<wire::Job>, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.jobs(&query).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            let pairs = query.pairs();
            let pairs: Vec<(&str, String)> = pairs.iter().map(|(name, value)| (name.as_str(), value.clone())).collect();
            fetch_json(format!("/api/v1/jobs?{}", encode(&pairs)))
        }
    }

    /// The viewer's own personal tokens (`/api/v1/tokens`), never a secret.
    pub fn tokens(&self) -> impl Future<Output = Result<Vec<wire::TokenInfo>, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.tokens().await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json("/api/v1/tokens".to_string())
        }
    }

    /// The viewer's own notifications and rules (`/api/v1/me/notifications`).
    pub fn my_notifications(&self) -> impl Future<Output = Result<wire::MyNotifications, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.my_notifications().await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json("/api/v1/me/notifications".to_string())
        }
    }

    /// A job as `/api/v1/jobs/{id}` gives it, without its report (the Gantt's "this job" panel).
    pub fn job_detail(
        &self,
        cluster: Option<String>,
        job_id: String,
    ) -> impl Future<Output = Result<wire::JobDetail, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.job(cluster.as_deref(), &job_id).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            let suffix = cluster.map(|c| format!("?{}", encode(&[("cluster", c)]))).unwrap_or_default();
            fetch_json(format!("/api/v1/jobs/{}{suffix}", crate::query::percent_encode(&job_id)))
        }
    }

    /// A node's page (`/api/v1/nodes/{name}`) over `[start, end)` (default: the last 7 days).
    pub fn node_page(
        &self,
        cluster: Option<String>,
        node: String,
        window: (Option<i64>, Option<i64>),
    ) -> impl Future<Output = Result<wire::NodePage, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.node_page(cluster.as_deref(), &node, window).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            let mut pairs: Vec<(&str, String)> = Vec::new();
            pairs.extend(cluster.map(|cluster| ("cluster", cluster)));
            pairs.extend(window.0.map(|start| ("start", start.to_string())));
            pairs.extend(window.1.map(|end| ("end", end.to_string())));
            fetch_json(format!("/api/v1/nodes/{}?{}", crate::query::percent_encode(&node), encode(&pairs)))
        }
    }

    /// A job with its steps, nodes and report status.
    pub fn job(
        &self,
        cluster: Option<String>,
        job_id: String,
        view: ChartView,
    ) -> impl Future<Output = Result<JobView, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                crate::server::job_view(data.as_ref(), cluster.as_deref(), &job_id, view).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            let suffix = cluster.map(|c| format!("?{}", encode(&[("cluster", c)]))).unwrap_or_default();
            let id = crate::query::percent_encode(&job_id);
            let detail = fetch_json::<wire::JobDetail>(format!("/api/v1/jobs/{id}{suffix}"));
            let joiner = if suffix.is_empty() { '?' } else { '&' };
            let points = crate::charts::PAGE_POINTS;
            let report = fetch_json::<wire::JobReport>(format!(
                "/api/v1/jobs/{id}/report{suffix}{joiner}points={points}&series=per_gpu"
            ));
            let logs = fetch_json::<wire::JobLogs>(format!("/api/v1/jobs/{id}/logs{suffix}"));
            let profile = fetch_json::<wire::JobProfile>(format!("/api/v1/jobs/{id}/profile{suffix}"));
            let script = fetch_json::<wire::JobScript>(format!("/api/v1/jobs/{id}/script{suffix}"));
            let output = fetch_json::<wire::JobOutput>(format!("/api/v1/jobs/{id}/output{suffix}"));
            let tags = fetch_json::<wire::JobTags>(format!("/api/v1/jobs/{id}/tags{suffix}"));
            let previous = fetch_json::<wire::PreviousRuns>(format!("/api/v1/jobs/{id}/previous{suffix}"));
            async move {
                let detail = detail.await?;
                let page = JobView::new(detail, report.await.ok(), view);
                Ok(page
                    .with_signals(logs.await.ok(), profile.await.ok(), view)
                    .with_script(script.await.ok())
                    .with_output(output.await.ok())
                    .with_tags(tags.await.ok())
                    .with_previous(previous.await.ok()))
            }
        }
    }
}

impl Loader {
    /// `/api/v1/usage` for a resolved window.
    pub fn usage(
        &self,
        query: crate::usage::UsageQuery,
    ) -> impl Future<Output = Result<wire::UsageReport, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.usage(&query).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json(format!("/api/v1/usage?{}", query.api_query(true)))
        }
    }

    /// `/api/v1/stats` for a resolved window.
    pub fn stats(
        &self,
        query: crate::usage::UsageQuery,
    ) -> impl Future<Output = Result<wire::UsageStats, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.stats(&query).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            fetch_json(format!("/api/v1/stats?{}", query.api_query(false)))
        }
    }
}

impl Loader {
    /// `/api/v1/compare`: 2–8 jobs side by side.
    pub fn compare(
        &self,
        cluster: Option<String>,
        jobs: Vec<String>,
    ) -> impl Future<Output = Result<wire::Comparison, DataError>> + Send + use<> {
        #[cfg(feature = "ssr")]
        {
            let server = self.server.clone();
            async move {
                let (_, data) = server.ok_or_else(no_source)?;
                data.compare(cluster.as_deref(), &jobs).await
            }
        }
        #[cfg(not(feature = "ssr"))]
        {
            let mut pairs = vec![("jobs", jobs.join(","))];
            pairs.extend(cluster.map(|cluster| ("cluster", cluster)));
            fetch_json(format!("/api/v1/compare?{}", encode(&pairs)))
        }
    }
}

/// GETs `url` and parses its JSON (the API's error envelope becomes a [`DataError`]).
#[cfg_attr(feature = "ssr", allow(dead_code, reason = "the browser build's loader"))]
pub fn fetch_json<T: DeserializeOwned + 'static>(
    url: String,
) -> impl Future<Output = Result<T, DataError>> + Send + use<T> {
    send_wrapper::SendWrapper::new(async move {
        let (status, text) = fetch_text(&url).await?;
        let path = url.split('?').next().unwrap_or_default();
        crate::mark(&format!("slurmlens:body {path}"));
        if status >= 400 {
            let message = serde_json::from_str::<wire::ErrorEnvelope>(&text)
                .map(|envelope| envelope.error.message)
                .unwrap_or_else(|_| format!("{url} answered {status}"));
            return Err(DataError { status, message });
        }
        let parsed = serde_json::from_str(&text).map_err(|e| DataError { status: 502, message: format!("{url}: {e}") });
        crate::mark(&format!("slurmlens:parsed {path}"));
        parsed
    })
}

#[cfg(target_arch = "wasm32")]
async fn fetch_text(url: &str) -> Result<(u16, String), DataError> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let failed = |what: &str| DataError { status: 0, message: format!("{what} {url} failed; is the server up?") };
    let window = web_sys::window().ok_or_else(|| failed("no window for"))?;
    let response = JsFuture::from(window.fetch_with_str(url)).await.map_err(|_| failed("fetching"))?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| failed("reading"))?;
    let text = JsFuture::from(response.text().map_err(|_| failed("reading"))?).await.map_err(|_| failed("reading"))?;
    Ok((response.status(), text.as_string().unwrap_or_default()))
}

#[cfg(not(target_arch = "wasm32"))]
async fn fetch_text(url: &str) -> Result<(u16, String), DataError> {
    Err(DataError { status: 0, message: format!("{url}: fetching needs a browser") })
}
