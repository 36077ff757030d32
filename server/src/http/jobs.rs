//! `/api/v1/jobs` and `/api/v1/health`.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::job_order::{JobOrder, MAX_SORTED};
use crate::app::jobs::{DEFAULT_PAGE, JobsQuery, MAX_PAGE};
use crate::app::report::{DEFAULT_POINTS, SeriesChoice, in_form};
use crate::app::{App, Viewer};
use crate::domain::job::{JobFilter, JobSearch};

/// The parameters `GET /api/v1/jobs` takes.
pub(super) const LIST_PARAMETERS: [&str; 18] = [
    "cluster",
    "start",
    "end",
    "user",
    "account",
    "partition",
    "state",
    "node",
    "min_gpus",
    "max_gpus",
    "limit",
    "cursor",
    "blame",
    "q",
    "tag",
    "sort",
    "order",
    "offset",
];

/// `GET /api/v1/health`: 200 when slurmdbd's database answers, 503 otherwise.
#[utoipa::path(
    get,
    path = "/api/v1/health",
    tag = "service",
    operation_id = "health",
    summary = "Whether slurmdbd's database answers",
    description = "200 when the default cluster's slurmdbd database answers, 503 otherwise. Needs no identity.",
    responses(
        (status = 200, description = "slurmdbd answers", body = wire::Health),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(()),
)]
pub async fn health(State(app): State<App>) -> Result<Json<wire::Health>, ApiError> {
    app.cluster(None)?.ping().await?;
    Ok(Json(wire::Health { status: "ok".into(), slurmdbd: "ok".into() }))
}

/// `GET /api/v1/clusters`: the clusters the viewer may read, the default first.
#[utoipa::path(
    get,
    path = "/api/v1/clusters",
    tag = "service",
    operation_id = "list_clusters",
    summary = "The clusters served, the default first",
    description = "The names a `cluster` parameter takes, the default (used where none is given) first. \
        A shared link's holder reads its job's cluster alone. Names no cluster before sign-in.",
    responses(
        (status = 200, description = "The clusters, the default first", body = Vec<String>),
        (status = 401, description = "No identity (`unauthorized`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn clusters(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
) -> Result<Json<Vec<String>>, ApiError> {
    Ok(Json(app.clusters_for(&viewer)?))
}

/// `GET /api/v1/jobs`: jobs overlapping `[start, end)` (default: the last 24 h), newest first by keyset,
/// or with `sort=` in any column's order by offset.
#[utoipa::path(
    get,
    path = "/api/v1/jobs",
    tag = "jobs",
    operation_id = "list_jobs",
    summary = "Jobs overlapping a window, newest submission first or sorted by a column",
    description = "Jobs that overlap `[start, end)` (default: the last 24 hours; running and pending jobs \
        included) that the viewer may see. Without `sort`: newest submission first, one keyset page at a \
        time: pass `next_cursor` back as `cursor`. With `sort`: the whole window with its filters (`blame` \
        included) ordered by that column (`order`; blank cells last either way; ties by job id, then \
        submission, in the same direction, so the order is total), one page of `limit` jobs from \
        `offset` at a time, with `total` (every job of the window with these filters) and `offset` in \
        the answer; the order read for a page is kept a minute, so that walking the pages of one query \
        neither loses nor repeats a job. Each job carries `mean_gpu_util`, `mean_tensor_active` and `blame` \
        once its report is archived (the archiver makes the reports of finished jobs in the background), \
        a running GPU job its means so far; `digest` says which (`archived`, `no_data`, `live`; absent: \
        not made yet). Unknown or repeated parameters are a 400.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 24 h."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
        ("user" = Option<String>, Query, description = "Comma-separated user names (printable ASCII without spaces, at most 128 characters each)."),
        ("account" = Option<String>, Query, description = "Comma-separated accounts (printable ASCII without spaces, at most 128 characters each)."),
        ("partition" = Option<String>, Query, description = "Comma-separated partitions (printable ASCII without spaces, at most 128 characters each)."),
        ("state" = Option<String>, Query, description = "Comma-separated states as sacct or squeue names them (`FAILED,TIMEOUT`, `CD`, `OOM`)."),
        ("node" = Option<String>, Query, description = "Only jobs that ran on this node (printable ASCII without spaces, at most 128 characters)."),
        ("min_gpus" = Option<u32>, Query, description = "At least this many allocated GPUs."),
        ("max_gpus" = Option<u32>, Query, description = "At most this many allocated GPUs."),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 5000, description = "Page size; default 500."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page (not with `sort`)."),
        ("blame" = Option<String>, Query, description = "Comma-separated `infrastructure`, `application`, `unknown`: keeps the jobs whose archived report says so (without `sort`, of each page, which may then hold fewer than `limit` jobs; with `sort`, of the whole window)."),
        ("q" = Option<String>, Query, description = "Search, 1–64 printable ASCII characters: a job id (`123`, with an array's tasks and a het job's components; `123_4`; `8+1`) finds exactly that job; other text finds jobs whose name, user or account contains it, ignoring case. Applies within the window like every filter: widen `start` to search further back."),
        ("tag" = Option<String>, Query, description = "Only jobs carrying this tag (`pytorch`, `ablation-3`): a person's or the rules'. Read from slurmlens's own database, 1,000 job records at a time; a page may hold fewer than `limit` jobs, the cursor walks on."),
        ("sort" = inline(Option<wire::JobSort>), Query, description = "Order the whole window by this field of the job (at most 250,000 jobs; more is a 400 naming `start`); pages then go by `offset`."),
        ("order" = Option<String>, Query, description = "With `sort`: `asc` (the default) or `desc`."),
        ("offset" = Option<u64>, Query, minimum = 0, maximum = 250000, description = "With `sort`: jobs of the order before this page; default 0."),
    ),
    responses(
        (status = 200, description = "One page of jobs", body = wire::Page<wire::Job>),
        (status = 400, description = "A parameter is unknown, repeated or malformed, `cursor` with `sort`, `order` or `offset` without it, a sorted window of more than 250,000 jobs, or a window wider than a viewer who is not staff may list (`[limits] window_days`) (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 429, description = "The token is over its request rate, or this person has `[limits] heavy_per_identity` heavy requests running (`rate_limited`)", body = wire::ErrorEnvelope,
            headers(("Retry-After" = u32, description = "Seconds until asking again"))),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`), or the server runs `[limits] heavy_total` heavy requests (`overloaded`, with Retry-After)", body = wire::ErrorEnvelope),
        (status = 504, description = "slurmdbd's database stopped the query at its time limit: narrow the window (`query_timeout`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn list(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<wire::Page<wire::Job>>, ApiError> {
    let params = Params::new(pairs(query)?, &LIST_PARAMETERS)?;
    Ok(Json(app.list_jobs(&viewer, &jobs_query(&app, &params)?).await?))
}

/// The listing's query string, parsed (the cluster is checked first, as every endpoint does).
pub(super) fn jobs_query(app: &App, params: &Params) -> Result<JobsQuery, ApiError> {
    app.cluster(params.text("cluster"))?;
    let blame = JobsQuery::blame(params.list("blame"))?;
    let end = params.time("end")?;
    let window = JobsQuery::window(params.time("start")?, end)?;
    let filter = JobFilter {
        users: params.names("user")?,
        accounts: params.names("account")?,
        partitions: params.names("partition")?,
        states: JobsQuery::states(&params.list("state"))?,
        node: params.name("node")?.map(String::from),
        min_gpus: params.number("min_gpus", 0, u64::from(u32::MAX))?,
        max_gpus: params.number("max_gpus", 0, u64::from(u32::MAX))?,
        search: params
            .text("q")
            .map(JobSearch::parse)
            .transpose()
            .map_err(|error| ApiError::invalid("q", format!("{error}")))?,
        tag: params.text("tag").map(crate::app::tags::parse_tag).transpose()?,
        among: None,
    };
    let limit = params.number("limit", 1, MAX_PAGE as u64)?.map_or(DEFAULT_PAGE, |limit| limit as usize);
    let cursor = JobsQuery::cursor(params.text("cursor"))?;
    let order = job_order(params)?;
    if order.is_some() && cursor.is_some() {
        return Err(ApiError::invalid("cursor", "a sorted listing's pages go by `offset`, not `cursor`"));
    }
    Ok(JobsQuery { cluster: params.text("cluster").map(String::from), window, filter, limit, cursor, blame, order })
}

/// `sort`, `order` and `offset`: a sorted listing's order and page (`order` and `offset` need `sort`).
fn job_order(params: &Params) -> Result<Option<JobOrder>, ApiError> {
    let descending = match params.text("order") {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => return Err(ApiError::invalid("order", format!("`{other}` is not `asc` or `desc`"))),
    };
    let offset = params.number("offset", 0, MAX_SORTED as u64)?;
    let Some(word) = params.text("sort") else {
        if let Some(name) = ["order", "offset"].into_iter().find(|name| params.text(name).is_some()) {
            return Err(ApiError::invalid(name, "only with `sort`"));
        }
        return Ok(None);
    };
    let sort = wire::JobSort::parse(word).ok_or_else(|| {
        let words: Vec<&str> = wire::JobSort::ALL.iter().map(|sort| sort.as_str()).collect();
        ApiError::invalid("sort", format!("`{word}` is not one of {}", words.join(", ")))
    })?;
    Ok(Some(JobOrder { sort, descending, offset: offset.map_or(0, |offset| offset as usize) }))
}

/// `GET /api/v1/jobs/{job_id}`: `123`, `123_4` or `8+1`, with steps and per-node allocation.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}",
    tag = "jobs",
    operation_id = "show_job",
    summary = "One job as sacct shows it, with its steps and nodes",
    description = "The job (`123`, array task `123_4`, het component `8+1`) with its steps and its GPUs per \
        node. A job the viewer may not see is a 404, like a missing one.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job", body = wire::JobDetail),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn show(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobDetail>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.show_job(&viewer, params.text("cluster"), &job_id).await?))
}

/// `GET /api/v1/jobs/{job_id}/report?points=`: GPU and network use with verdicts; live while the job runs,
/// archived once it ended.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/report",
    tag = "jobs",
    operation_id = "job_report",
    summary = "How the job used its GPUs and links, with verdicts",
    description = "Per-GPU utilisation, SM/tensor/DRAM activity, memory, power, temperature and XIDs; per-node \
        RDMA; totals; verdicts with evidence; `failure` (blame and evidence) for a job that ended badly; \
        `bursts` per node; `traces` when trace summaries were sent. Live while the job runs, archived once \
        it ended. When VictoriaMetrics does not answer, the Slurm facts still come with \
        `metrics.status = \"unavailable\"`.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("points" = Option<u64>, Query, minimum = 2, maximum = 2000, description = "Points per time series; default 120."),
        ("series" = Option<String>, Query, description = "`per_gpu` (every GPU's own series), `spread` (per metric, \
            the lowest, mean and highest across the GPUs: a big job's summary form) or `auto` (the default: \
            per GPU up to 16 GPUs, the spread above). `series_form` in the answer says which came."),
    ),
    responses(
        (status = 200, description = "The report", body = wire::JobReport),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 429, description = "The token is over its request rate, or this person has `[limits] heavy_per_identity` heavy requests running (`rate_limited`)", body = wire::ErrorEnvelope,
            headers(("Retry-After" = u32, description = "Seconds until asking again"))),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer (`source_unavailable`), or the server runs `[limits] heavy_total` heavy requests (`overloaded`, with Retry-After)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn report(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobReport>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "points", "series"])?;
    app.cluster(params.text("cluster"))?;
    let points = params.number("points", 2, 2000)?.map_or(DEFAULT_POINTS, |points| points as usize);
    let form: SeriesChoice = match params.text("series") {
        Some(text) => text.parse().map_err(|message: String| ApiError::invalid("series", message))?,
        None => SeriesChoice::Auto,
    };
    let report = app.job_report(&viewer, params.text("cluster"), &job_id, points).await?;
    Ok(Json(in_form(report, form)))
}
