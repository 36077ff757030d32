//! The server side of the pages (feature `ssr`): the data the pages need, as a trait the slurmlens
//! server implements over its own state, and the axum routes that render them. The web crate never
//! depends on the server crate; the server depends on this one and plugs its data in.
//!
//! Routes: `/`, `/jobs`, `/jobs/{id}`, `/grid`, `/tokens`, `/notifications` (server-rendered leptos pages), `/web/v1/*` (page-shaped
//! JSON, CSV and SVG built from the same data), `/web/style.css`, and `/pkg/*` (the wasm bundle, from
//! the site root when one is configured; without it the pages stay readable, just not interactive).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use slurmlens_slurm::gpus::exact_gpus_per_node;
use slurmlens_slurm::topology::{Racks, Topology, infer_gpus_per_node};
use slurmlens_wire as wire;

use crate::api::{DataError, JobView};
use crate::app::{App, shell};
use crate::clock::{self, SiteZone, Zone};
use crate::gantt::{self, GanttData, WindowJob, pack_short_jobs, per_node_gpus};
use crate::grid::{BusyCounts, GridMetric, GridSnapshot, NodeGpus, RecordedGpus, running_at};
use crate::joblist::{self, Column, order_of};
use crate::palette::{ColourBy, ColourSlots, IDENTITY};
use crate::timefmt;

/// How far past the server's clock a grid moment may be and still count as now.
const FUTURE_SLACK_S: i64 = 60;
use crate::query::{GanttQuery, GridQuery, JobQuery, ListQuery};

/// A boxed future borrowing the data source, as the traits' methods return (keeps them object-safe).
pub type DataFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, DataError>> + Send + 'a>>;

/// The pages' data source, which the server plugs in: the clusters it serves, and for each request
/// the data that request's viewer may read.
pub trait WebData: Send + Sync + 'static {
    /// Clusters served, the default first.
    fn clusters(&self) -> Vec<String>;
    /// The clusters the viewer of `request` may read, the default first (`/web/v1/clusters`); the
    /// server names none before sign-in. Every one served by default.
    fn clusters_for(&self, _request: &Parts) -> Result<Vec<String>, DataError> {
        Ok(self.clusters())
    }
    /// The data the request described by `request` may read: the server binds it to the viewer its
    /// sign-in layer put into the request's extensions, so a page shows exactly what the REST API
    /// shows the same person.
    fn for_request(&self, request: &Parts) -> Arc<dyn PageData>;
}

/// The jobs of a window as the Gantt and the grid read them ([`PageData::window_jobs`]).
#[derive(Debug, Clone, Default)]
pub struct WindowJobs {
    /// Jobs that started, newest submission first.
    pub jobs: Vec<WindowJob>,
    /// More jobs overlap the window than the cap let through (the newest submissions were kept).
    pub truncated: bool,
}

/// What one request's pages read, with the API's own semantics.
pub trait PageData: Send + Sync {
    /// `GET /api/v1/jobs` with `query`.
    fn jobs<'a>(&'a self, query: &'a JobQuery) -> DataFuture<'a, wire::Page<wire::Job>>;
    /// The jobs of `query`'s window (cluster, start, end, filters) that started, at most about `cap`,
    /// with what the Gantt and the grid draw and nothing more; the same jobs `jobs` lists page by page.
    /// A data source with a leaner read than the listing overrides it.
    fn window_jobs<'a>(&'a self, query: &'a JobQuery, cap: usize) -> DataFuture<'a, WindowJobs> {
        Box::pin(async move {
            let mut query = query.clone();
            query.limit = Some(PAGE);
            let mut jobs = Vec::new();
            loop {
                let page = self.jobs(&query).await?;
                jobs.extend(page.items.iter().filter(|job| job.start.is_some()).map(WindowJob::from));
                match page.next_cursor {
                    Some(cursor) if jobs.len() < cap => query.cursor = Some(cursor),
                    next => return Ok(WindowJobs { jobs, truncated: next.is_some() }),
                }
            }
        })
    }
    /// The jobs the viewer may see that held their allocation at `at` ([`PageData::window_jobs`] of
    /// `[at, at + 1)`, those running then) and the GPU indices recorded for them ([`PageData::held_gpus`]).
    /// A data source that can answer both from one read overrides it; it may leave the jobs' efficiency
    /// means out unless `means` asks for them (the grid coloured by efficiency).
    fn moment_jobs<'a>(
        &'a self,
        cluster: Option<&'a str>,
        at: i64,
        _means: bool,
    ) -> DataFuture<'a, (Vec<WindowJob>, Vec<wire::HeldGpu>)> {
        Box::pin(async move {
            let query = JobQuery {
                cluster: cluster.map(str::to_string),
                start: Some(at),
                end: Some(at + 1),
                ..JobQuery::default()
            };
            let (jobs, held) = futures::join!(self.window_jobs(&query, usize::MAX), self.held_gpus(cluster, at));
            let mut jobs = jobs?.jobs;
            jobs.retain(|job| running_at(job, at));
            // Without the records (the source failed, and logged it) the grid shows counts only.
            Ok((jobs, held.unwrap_or_default()))
        })
    }
    /// `GET /api/v1/jobs/{job_id}`; a job the viewer may not see is a 404.
    fn job<'a>(&'a self, cluster: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, wire::JobDetail>;
    /// `GET /api/v1/nodes`.
    fn nodes<'a>(&'a self, cluster: Option<&'a str>) -> DataFuture<'a, Vec<wire::Node>>;
    /// Node events (drains, downs) overlapping `[start, end)`, oldest first.
    fn node_events<'a>(
        &'a self,
        _cluster: Option<&'a str>,
        _window: (i64, i64),
    ) -> DataFuture<'a, Vec<wire::NodeEvent>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// `GET /api/v1/jobs/{job_id}/report?points=` [`crate::charts::PAGE_POINTS`] `&series=per_gpu`; `None` where there
    /// is no report.
    fn report<'a>(&'a self, _cluster: Option<&'a str>, _job_id: &'a str) -> DataFuture<'a, Option<wire::JobReport>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/jobs/{job_id}/logs`; `None` where the job has none to show.
    fn logs<'a>(&'a self, _cluster: Option<&'a str>, _job_id: &'a str) -> DataFuture<'a, Option<wire::JobLogs>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/jobs/{job_id}/script`; `None` where it could not be read.
    fn script<'a>(&'a self, _cluster: Option<&'a str>, _job_id: &'a str) -> DataFuture<'a, Option<wire::JobScript>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/jobs/{job_id}/output`; `None` where it could not be read.
    fn output<'a>(&'a self, _cluster: Option<&'a str>, _job_id: &'a str) -> DataFuture<'a, Option<wire::JobOutput>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/jobs/{job_id}/tags`; `None` where they could not be read.
    fn tags<'a>(&'a self, _cluster: Option<&'a str>, _job_id: &'a str) -> DataFuture<'a, Option<wire::JobTags>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/jobs/{job_id}/previous`; `None` where it could not be read.
    fn previous_runs<'a>(
        &'a self,
        _cluster: Option<&'a str>,
        _job_id: &'a str,
    ) -> DataFuture<'a, Option<wire::PreviousRuns>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/compare?jobs=`: the jobs side by side.
    fn compare<'a>(&'a self, _cluster: Option<&'a str>, _jobs: &'a [String]) -> DataFuture<'a, wire::Comparison> {
        Box::pin(async { Err(DataError::unavailable("comparing jobs is not served here")) })
    }
    /// `GET /api/v1/jobs/{job_id}/profile`; `None` where the job has none to show.
    fn profile<'a>(&'a self, _cluster: Option<&'a str>, _job_id: &'a str) -> DataFuture<'a, Option<wire::JobProfile>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/gpus/held?at=`: the GPU indices the Slurm plugin recorded for jobs running then.
    fn held_gpus<'a>(&'a self, _cluster: Option<&'a str>, _at: i64) -> DataFuture<'a, Vec<wire::HeldGpu>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// `GET /api/v1/nodes/{name}?start=&end=`: one node's page (unknown here: 404).
    fn node_page<'a>(
        &'a self,
        _cluster: Option<&'a str>,
        node: &'a str,
        _window: (Option<i64>, Option<i64>),
    ) -> DataFuture<'a, wire::NodePage> {
        Box::pin(async move { Err(DataError::not_found(format!("no node {node}"))) })
    }
    /// `GET /api/v1/node_health?end=`: every node's health badge over the day before `end`; `None`
    /// where the source has none.
    fn node_health<'a>(&'a self, _cluster: Option<&'a str>, _end: i64) -> DataFuture<'a, Option<wire::NodesHealth>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/gpus/busy?at=`: per node, GPUs held by jobs the viewer may not see (counts only).
    fn busy_gpus<'a>(&'a self, _cluster: Option<&'a str>, _at: i64) -> DataFuture<'a, Vec<wire::BusyGpus>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// `GET /api/v1/gpus/values?metric=&at=`; `None` where there is no metrics source at all.
    fn gpu_values<'a>(
        &'a self,
        _cluster: Option<&'a str>,
        _metric: &'a str,
        _at: i64,
    ) -> DataFuture<'a, Option<wire::GpuReadings>> {
        Box::pin(async { Ok(None) })
    }
    /// `GET /api/v1/tokens`: the viewer's own personal tokens, never a secret; 401 for a viewer who
    /// is not signed in.
    fn tokens<'a>(&'a self) -> DataFuture<'a, Vec<wire::TokenInfo>> {
        Box::pin(async { Err(DataError::unavailable("tokens are not available on this server")) })
    }
    /// `GET /api/v1/me/notifications`: the viewer's notifications and rules; 401 for a viewer who is
    /// not signed in.
    fn my_notifications<'a>(&'a self) -> DataFuture<'a, wire::MyNotifications> {
        Box::pin(async { Err(DataError::unavailable("notifications are not available on this server")) })
    }
    /// The palette slots (of `slots`) of the cluster's users and accounts the viewer may see, from the
    /// order slurmdbd first associated them; none known: colours from a hash of the names.
    fn colour_slots<'a>(&'a self, _cluster: Option<&'a str>, _slots: u32) -> DataFuture<'a, ColourSlots> {
        Box::pin(async { Ok(ColourSlots::default()) })
    }
    /// `GET /api/v1/usage` with `query`'s cluster, window and grouping.
    fn usage<'a>(&'a self, _query: &'a crate::usage::UsageQuery) -> DataFuture<'a, wire::UsageReport> {
        Box::pin(async { Err(DataError::unavailable("usage is not available on this server")) })
    }
    /// `GET /api/v1/stats` with `query`'s cluster and window.
    fn stats<'a>(&'a self, _query: &'a crate::usage::UsageQuery) -> DataFuture<'a, wire::UsageStats> {
        Box::pin(async { Err(DataError::unavailable("statistics are not available on this server")) })
    }
}

/// How the pages are served.
#[derive(Debug, Clone, Default)]
pub struct WebOptions {
    /// The folder `web/build.sh` fills (`pkg/slurmlens_web.js`, `pkg/slurmlens_web_bg.wasm`). Without
    /// one the pages are served without their wasm bundle.
    pub site_root: Option<PathBuf>,
    pub topology: Topology,
    /// The zone times are shown in for viewers who chose none.
    pub time_zone: Zone,
}

/// What a page render can reach: the data source and the topology.
#[derive(Clone)]
pub struct WebContext {
    data: Arc<dyn WebData>,
    topology: Arc<Topology>,
}

impl WebContext {
    /// The data the request described by `request` may read.
    pub fn for_request(&self, request: &Parts) -> Arc<dyn PageData> {
        self.data.for_request(request)
    }

    /// The clusters served, the default first.
    pub fn clusters(&self) -> Vec<String> {
        self.data.clusters()
    }

    /// The clusters the viewer of `request` may read, the default first ([`WebData::clusters_for`]).
    pub fn clusters_for(&self, request: &Parts) -> Result<Vec<String>, DataError> {
        self.data.clusters_for(request)
    }

    fn cluster_or_default(&self, cluster: Option<&str>) -> Result<String, DataError> {
        let clusters = self.clusters();
        match cluster {
            Some(name) if clusters.iter().any(|known| known == name) => Ok(name.to_string()),
            // Not naming the others: a page's error can reach a viewer before sign-in.
            Some(name) => Err(DataError::invalid(format!("unknown cluster `{name}`"))),
            None => clusters.first().cloned().ok_or_else(|| DataError::unavailable("no cluster is configured")),
        }
    }
}

#[derive(Clone)]
struct WebState {
    leptos: LeptosOptions,
    context: WebContext,
    site_zone: Zone,
}

impl WebState {
    /// The zone the request's viewer reads times in: their cookie, else the site's default.
    fn zone(&self, request: &Parts) -> Zone {
        clock::from_request(request).unwrap_or(self.site_zone)
    }
}

impl axum::extract::FromRef<WebState> for LeptosOptions {
    fn from_ref(state: &WebState) -> Self {
        state.leptos.clone()
    }
}

/// The pages' router, to merge into the server's.
pub fn routes(data: Arc<dyn WebData>, options: WebOptions) -> Router {
    let site_root =
        options.site_root.as_ref().map(|root| root.to_string_lossy().into_owned()).unwrap_or_else(|| ".".into());
    let leptos = LeptosOptions::builder().output_name("slurmlens_web").site_root(site_root).site_pkg_dir("pkg").build();
    let context = WebContext { data, topology: Arc::new(options.topology) };
    let site_zone = options.time_zone;
    let state = WebState { leptos: leptos.clone(), context: context.clone(), site_zone };
    // Generating the route list renders the app once; concurrent generations in one process (tests
    // build many routers at once) can leave a render waiting forever, so it is made once per process.
    static PATHS: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> = std::sync::OnceLock::new();
    let paths = PATHS.get_or_init(|| generate_route_list(App)).clone();
    let mut router = Router::new()
        .leptos_routes_with_context(
            &state,
            paths,
            move || {
                provide_context(context.clone());
                provide_context(SiteZone(site_zone));
            },
            move || shell(leptos.clone()),
        )
        .route("/web/v1/clusters", get(clusters_json))
        .route("/web/v1/gantt", get(gantt_json))
        .route("/web/v1/gantt.svg", get(gantt_svg))
        .route("/web/v1/grid", get(grid_json))
        .route("/web/v1/nodes", get(nodes_json))
        .route("/web/v1/jobs.csv", get(jobs_csv))
        .route("/web/v1/jobs.json", get(jobs_export_json))
        .route("/web/style.css", get(stylesheet))
        .route("/go", get(go_to_job))
        .route("/zone", get(choose_zone))
        .with_state(state)
        // gzip's fastest level: the Gantt's 30 days (3.9 MB of JSON) in 50 ms to 1.1 MB, where its
        // default level took 340 ms for 0.93 MB, longer than the rest of the request on kept hours.
        .layer(tower_http::compression::CompressionLayer::new().quality(tower_http::CompressionLevel::Fastest));
    if let Some(root) = options.site_root {
        router =
            router.nest_service("/pkg", tower_http::services::ServeDir::new(root.join("pkg")).precompressed_gzip());
    }
    router
}

/// Most jobs one Gantt window loads (a safety cap; past it the newest submissions are kept, and said so).
pub const MAX_GANTT_JOBS: usize = 400_000;
/// Page size used when collecting a window (the API's maximum).
const PAGE: u32 = 5000;

/// Racks for `cluster` from the topology, naming every node the node list or the jobs name.
fn racks_for(context: &WebContext, cluster: &str, nodes: &[wire::Node], jobs: &[WindowJob], seen_gpus: u64) -> Racks {
    let mut names: Vec<String> = nodes.iter().map(|node| node.node.clone()).collect();
    names.extend(gantt::job_nodes(jobs));
    let most = nodes.iter().map(|node| node.alloc_gpus).max().unwrap_or(0).max(seen_gpus);
    context.topology.resolve(cluster, &names, infer_gpus_per_node(most))
}

fn most_gpus_per_node(jobs: &[WindowJob]) -> u64 {
    jobs.iter().map(|job| per_node_gpus(job.gpus, job.hosts.len().max(1))).max().unwrap_or(0)
}

/// The Gantt's data for `query`'s window.
pub async fn gantt_data(context: &WebContext, data: &dyn PageData, query: &GanttQuery) -> Result<GanttData, DataError> {
    let cluster = context.cluster_or_default(query.cluster.as_deref())?;
    let now = chrono::Utc::now().timestamp();
    let (start, end) = query.window(now);
    let (nodes, slots, events) = futures::join!(
        data.nodes(Some(&cluster)),
        palette_slots(data, &cluster),
        data.node_events(Some(&cluster), (start, end))
    );
    let nodes = nodes?;
    let job_query = JobQuery {
        cluster: Some(cluster.clone()),
        filters: query.filters.clone(),
        start: Some(start),
        end: Some(end),
        ..JobQuery::default()
    };
    let WindowJobs { jobs, truncated } = data.window_jobs(&job_query, MAX_GANTT_JOBS).await?;
    let racks = racks_for(context, &cluster, &nodes, &jobs, most_gpus_per_node(&jobs));
    let mut gantt = GanttData::assemble(&cluster, (start, end, now), racks, &jobs, truncated);
    // Jobs shorter than a pixel of the widest drawing of this window are packed, never dropped.
    pack_short_jobs(&mut gantt, (end - start) / gantt::WIDEST_PX);
    gantt.slots = slots;
    gantt.slots.retain_shown(gantt.users.iter().map(String::as_str), gantt.accounts.iter().map(String::as_str));
    // Without the events (the source failed, and logged it) the chart shows no node states.
    gantt.node_states = gantt::node_state_spans(&gantt, &events.unwrap_or_default());
    Ok(gantt)
}

/// The stable colour slots of the cluster's users and accounts; without them (the source failed, and
/// logged it) the pages colour by a hash of the names, which is stable too.
async fn palette_slots(data: &dyn PageData, cluster: &str) -> ColourSlots {
    data.colour_slots(Some(cluster), IDENTITY.len() as u32).await.unwrap_or_default()
}

/// The grid at `query.at` (default now), from one read of each source: no call per job. A moment that
/// is not a time, or is in the future, is a 400 that says so (nothing is known of the future).
pub async fn grid_snapshot(
    context: &WebContext,
    data: &dyn PageData,
    query: &GridQuery,
) -> Result<GridSnapshot, DataError> {
    let cluster = context.cluster_or_default(query.cluster.as_deref())?;
    if let Some(text) = &query.bad_at {
        return Err(DataError::invalid(format!(
            "at: `{text}` is not a moment; give Unix seconds, RFC 3339 or YYYY-MM-DDTHH:MM (UTC)"
        )));
    }
    let now = chrono::Utc::now().timestamp();
    let at = query.at.unwrap_or(now);
    if at > now + FUTURE_SLACK_S {
        return Err(DataError::invalid(format!(
            "at: {} is in the future: GPUs are shown up to now ({})",
            timefmt::utc_short(at),
            timefmt::utc_short(now)
        )));
    }
    // Independent reads go out together: nodes, the jobs running at `at` with the GPU indices recorded
    // for them, the GPUs other tenants' jobs hold (counts), and the metric readings.
    let (nodes, running, busy, values, slots, health) = futures::join!(
        data.nodes(Some(&cluster)),
        // Running jobs' means so far cost most of a grid's time; only the efficiency colour shows them.
        data.moment_jobs(Some(&cluster), at, query.colour == ColourBy::Efficiency),
        data.busy_gpus(Some(&cluster), at),
        async {
            match &query.metric {
                Some(metric) => Some(data.gpu_values(Some(&cluster), metric, at).await),
                None => None,
            }
        },
        palette_slots(data, &cluster),
        data.node_health(Some(&cluster), at),
    );
    let nodes = nodes?;
    let (jobs, held) = running?;
    let node_gpus = multi_node_gpus(&jobs);
    let seen = node_gpus.values().flat_map(|nodes| nodes.values().flatten().copied()).max().unwrap_or(0);
    // Without the counts (the source failed) other tenants' GPUs look free, as before they existed.
    let busy: BusyCounts = busy.unwrap_or_default().into_iter().map(|busy| (busy.node, busy.gpus)).collect();
    // A node shared with other tenants holds the viewer's GPUs and the busy ones together.
    let shared = busy
        .iter()
        .map(|(node, busy)| {
            let visible: u64 = jobs
                .iter()
                .filter(|job| job.hosts.iter().any(|host| host == node))
                .map(|job| per_node_gpus(job.gpus, job.hosts.len().max(1)))
                .sum();
            busy + visible
        })
        .max()
        .unwrap_or(0);
    // GPUs that report readings exist, held or not (a node idle at the moment still has them).
    let reporting = match &values {
        Some(Ok(Some(readings))) => readings.values.values.iter().map(|value| u64::from(value.gpu) + 1).max(),
        _ => None,
    };
    let most = most_gpus_per_node(&jobs).max(seen).max(shared).max(reporting.unwrap_or(0));
    let racks = racks_for(context, &cluster, &nodes, &jobs, most);
    // Recorded indices place GPUs exactly; without them (no store, no plugin) cells fill in order.
    let mut recorded = RecordedGpus::new();
    // (The data source logs a failure; the grid then shows counts only.)
    for gpu in held {
        recorded.entry(gpu.job_id).or_default().entry(gpu.node).or_default().push(gpu.gpu);
    }
    let mut grid = GridSnapshot::assemble(&cluster, at, racks, &jobs, &node_gpus, &recorded, &busy);
    grid.live = query.at.is_none();
    grid.slots = slots;
    // Without health (the source failed, and logged it) the grid has no badges.
    grid.health = health.ok().flatten().map(|health| health.nodes).unwrap_or_default();
    let (users, accounts): (Vec<&str>, Vec<&str>) =
        grid.jobs.iter().map(|job| (job.user.as_str(), job.account.as_str())).unzip();
    grid.slots.retain_shown(users, accounts);
    if let (Some(metric), Some(values)) = (&query.metric, values) {
        // A metric source that fails leaves the cells coloured by job, with the reason shown.
        grid.metric = match values {
            Ok(Some(values)) => Some(GridMetric::new(&grid.racks, &values)),
            Ok(None) => None,
            Err(error) => Some(GridMetric::unavailable(metric, error.message)),
        };
    }
    Ok(grid)
}

/// The node list now: every node's state, its GPUs and rack, its health badge and the running jobs
/// the viewer may see; from one read of each source.
pub async fn node_list(
    context: &WebContext,
    data: &dyn PageData,
    query: &crate::query::NodesQuery,
) -> Result<crate::nodelist::NodeList, DataError> {
    let cluster = context.cluster_or_default(query.cluster.as_deref())?;
    let now = chrono::Utc::now().timestamp();
    let (nodes, running, health) = futures::join!(
        data.nodes(Some(&cluster)),
        data.moment_jobs(Some(&cluster), now, false),
        data.node_health(Some(&cluster), now),
    );
    let nodes = nodes?;
    let (jobs, _) = running?;
    let racks = racks_for(context, &cluster, &nodes, &jobs, most_gpus_per_node(&jobs));
    // Without health (the source failed, and logged it) the list has no badges, and says so.
    let health = health.ok().flatten().map(|health| health.nodes);
    Ok(crate::nodelist::NodeList::assemble((&cluster, now), &racks, &nodes, &jobs, health.as_deref()))
}

/// What each multi-node job held on each of its nodes, as its details say: slurmdbd keeps only the
/// job's total, which splits exactly when it divides evenly (`--gres=gpu:N` is per node).
fn multi_node_gpus(jobs: &[WindowJob]) -> NodeGpus {
    let mut node_gpus = NodeGpus::new();
    for job in jobs.iter().filter(|job| job.hosts.len() > 1) {
        let per_node = exact_gpus_per_node(job.gpus, job.hosts.len());
        node_gpus.insert(
            job.job_id.to_string(),
            job.hosts.iter().map(|host| (host.clone(), per_node)).collect::<BTreeMap<_, _>>(),
        );
    }
    node_gpus
}

/// A job page's data.
pub async fn job_view(
    data: &dyn PageData,
    cluster: Option<&str>,
    job_id: &str,
    view: crate::charts::ChartView,
) -> Result<JobView, DataError> {
    let detail = data.job(cluster, job_id).await?;
    // A report, logs or profile that fail degrade their section to "not available", not the page.
    let (report, logs, profile, script, output, tags, previous) = futures::join!(
        data.report(cluster, job_id),
        data.logs(cluster, job_id),
        data.profile(cluster, job_id),
        data.script(cluster, job_id),
        data.output(cluster, job_id),
        data.tags(cluster, job_id),
        data.previous_runs(cluster, job_id)
    );
    let page = JobView::new(detail, report.ok().flatten(), view);
    Ok(page
        .with_signals(logs.ok().flatten(), profile.ok().flatten(), view)
        .with_script(script.ok().flatten())
        .with_output(output.ok().flatten())
        .with_tags(tags.ok().flatten())
        .with_previous(previous.ok().flatten()))
}

/// The job list's rows for `query`, as the page shows them.
pub async fn list_rows(
    data: &dyn PageData,
    query: &ListQuery,
    order: Option<(Column, bool)>,
) -> Result<Vec<wire::Job>, DataError> {
    let sort = order.map(|(column, descending)| (column.sort(), descending));
    let page = data.jobs(&query.page_query(chrono::Utc::now().timestamp(), sort)).await?;
    Ok(page.items)
}

impl IntoResponse for DataError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let code = match status.as_u16() {
            400 => "invalid_parameter",
            401 => "unauthorized",
            403 => "forbidden",
            404 => "not_found",
            503 => "source_unavailable",
            504 => "query_timeout",
            _ => "internal",
        };
        let envelope = wire::ErrorEnvelope {
            error: wire::ErrorBody { code: code.into(), message: self.message, parameter: None },
        };
        (status, axum::Json(envelope)).into_response()
    }
}

type Pairs = Query<Vec<(String, String)>>;

fn lookup(pairs: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
}

async fn clusters_json(State(state): State<WebState>, request: Parts) -> Response {
    match state.context.clusters_for(&request) {
        Ok(clusters) => axum::Json(clusters).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn gantt_json(State(state): State<WebState>, request: Parts, Query(pairs): Pairs) -> Response {
    let query = GanttQuery::from_lookup(lookup(&pairs));
    let data = state.context.for_request(&request);
    match gantt_data(&state.context, data.as_ref(), &query).await {
        // Briefly cacheable, so the page's preload of its first window is reused by its first fetch.
        Ok(data) => {
            let mut response = axum::Json(data).into_response();
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=30"));
            response
        }
        Err(error) => error.into_response(),
    }
}

async fn gantt_svg(State(state): State<WebState>, request: Parts, Query(pairs): Pairs) -> Response {
    let query = GanttQuery::from_lookup(lookup(&pairs));
    let width = lookup(&pairs)("width").and_then(|w| w.parse::<f64>().ok()).unwrap_or(1200.0).clamp(400.0, 4000.0);
    let data = state.context.for_request(&request);
    match gantt_data(&state.context, data.as_ref(), &query).await {
        Ok(gantt) => no_store(
            ([(header::CONTENT_TYPE, "image/svg+xml")], gantt::svg(&gantt, query.colour, width, state.zone(&request)))
                .into_response(),
        ),
        Err(error) => error.into_response(),
    }
}

async fn grid_json(State(state): State<WebState>, request: Parts, Query(pairs): Pairs) -> Response {
    let query = GridQuery::from_lookup(lookup(&pairs));
    let data = state.context.for_request(&request);
    match grid_snapshot(&state.context, data.as_ref(), &query).await {
        Ok(grid) => no_store(axum::Json(grid).into_response()),
        Err(error) => error.into_response(),
    }
}

async fn nodes_json(State(state): State<WebState>, request: Parts, Query(pairs): Pairs) -> Response {
    let query = crate::query::NodesQuery::from_lookup(lookup(&pairs));
    let data = state.context.for_request(&request);
    match node_list(&state.context, data.as_ref(), &query).await {
        Ok(list) => no_store(axum::Json(list).into_response()),
        Err(error) => error.into_response(),
    }
}

async fn jobs_csv(State(state): State<WebState>, request: Parts, Query(pairs): Pairs) -> Response {
    let get = lookup(&pairs);
    let query = ListQuery::from_lookup(&get);
    let data = state.context.for_request(&request);
    match list_rows(data.as_ref(), &query, order_of(&get)).await {
        Ok(rows) => download(joblist::to_csv(&rows), "text/csv; charset=utf-8", "jobs.csv"),
        Err(error) => error.into_response(),
    }
}

async fn jobs_export_json(State(state): State<WebState>, request: Parts, Query(pairs): Pairs) -> Response {
    let get = lookup(&pairs);
    let query = ListQuery::from_lookup(&get);
    let data = state.context.for_request(&request);
    match list_rows(data.as_ref(), &query, order_of(&get)).await {
        Ok(rows) => download(joblist::to_json(&rows), "application/json", "jobs.json"),
        Err(error) => error.into_response(),
    }
}

fn download(body: String, content_type: &'static str, name: &str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
    }
    no_store(response)
}

fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `/go?job=<id>`: the header's "go to" box, which works without JavaScript: a redirect to the job's
/// page, which finds the job on whichever cluster has it (or says why not); a name that does not start
/// with a digit, as no job id does, is a node's (`gpu006`), and goes to its page.
async fn go_to_job(Query(query): Query<BTreeMap<String, String>>) -> Response {
    let id = query.get("job").map_or("", |id| id.trim());
    if id.is_empty() {
        return axum::response::Redirect::to("/jobs").into_response();
    }
    let page = if id.starts_with(|first: char| first.is_ascii_digit()) { "jobs" } else { "nodes" };
    let mut to = format!("/{page}/{}", crate::query::percent_encode(id));
    if let Some(cluster) = query.get("cluster").filter(|cluster| !cluster.is_empty()) {
        to.push_str(&format!("?cluster={}", crate::query::percent_encode(cluster)));
    }
    axum::response::Redirect::to(&to).into_response()
}

/// `/zone?tz=Europe/Berlin&to=/jobs?…`: keeps the viewer's choice of zone in a cookie (a year) and
/// goes back to the page it was made on. An unknown zone is a 400 that says so, and changes nothing.
async fn choose_zone(Query(query): Query<BTreeMap<String, String>>) -> Response {
    let zone = match query.get("tz").map_or("", String::as_str).parse::<Zone>() {
        Ok(zone) => zone,
        Err(error) => return DataError::invalid(format!("tz: {error}")).into_response(),
    };
    let to = query.get("to").map_or("/", String::as_str);
    // Only a path on this site: never `//host` or `/\host`, which browsers read as another site.
    let local = to.starts_with('/') && !to.starts_with("//") && !to.contains('\\') && !to.chars().any(char::is_control);
    let to = if local { to } else { "/" };
    let cookie = format!("{}={}; Path=/; Max-Age=31536000; SameSite=Lax", clock::COOKIE, zone.name());
    let mut response = axum::response::Redirect::to(to).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=300")],
        crate::app::STYLESHEET,
    )
        .into_response()
}
