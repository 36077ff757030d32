//! `/api/v1/jobs` and `/api/v1/health`.

use axum::Json;
use axum::extract::Path;
use axum::http::HeaderMap;
use chrono::{Duration, Utc};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use super::{AppStateExtractor, wire_map};
use crate::domain::ids::JobSelector;
use crate::domain::job::{JobCursor, JobFilter, TimeWindow};
use crate::domain::state::StateFilter;

/// Largest page a client may ask for.
pub const MAX_PAGE: u64 = 5000;
const DEFAULT_PAGE: u64 = 500;

fn now_epoch() -> u64 {
    u64::try_from(Utc::now().timestamp()).unwrap_or(0)
}

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
pub async fn health(state: AppStateExtractor) -> Result<Json<wire::Health>, ApiError> {
    state.slurmdbd(None)?.ping().await?;
    Ok(Json(wire::Health { status: "ok".into(), slurmdbd: "ok".into() }))
}

/// `GET /api/v1/jobs`: jobs overlapping `[start, end)` (default: the last 24 h), newest first.
#[utoipa::path(
    get,
    path = "/api/v1/jobs",
    tag = "jobs",
    operation_id = "list_jobs",
    summary = "Jobs overlapping a window, newest submission first",
    description = "Jobs that overlap `[start, end)` (default: the last 24 hours; running and pending jobs \
        included) that the viewer may see, newest submission first, one keyset page at a time: pass \
        `next_cursor` back as `cursor`. Each job carries `mean_gpu_util`, `mean_tensor_active` and `blame` \
        once its report is archived. Unknown or repeated parameters are a 400.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 24 h."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
        ("user" = Option<String>, Query, description = "Comma-separated user names."),
        ("account" = Option<String>, Query, description = "Comma-separated accounts."),
        ("partition" = Option<String>, Query, description = "Comma-separated partitions."),
        ("state" = Option<String>, Query, description = "Comma-separated states as sacct or squeue names them (`FAILED,TIMEOUT`, `CD`, `OOM`)."),
        ("node" = Option<String>, Query, description = "Only jobs that ran on this node."),
        ("min_gpus" = Option<u32>, Query, description = "At least this many allocated GPUs."),
        ("max_gpus" = Option<u32>, Query, description = "At most this many allocated GPUs."),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 5000, description = "Page size; default 500."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page."),
        ("blame" = Option<String>, Query, description = "Comma-separated `infrastructure`, `application`, `unknown`: keeps the page's jobs whose archived report says so (a page may then hold fewer than `limit` jobs)."),
    ),
    responses(
        (status = 200, description = "One page of jobs", body = wire::Page<wire::Job>),
        (status = 400, description = "A parameter is unknown, repeated or malformed (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn list(
    state: AppStateExtractor,
    headers: HeaderMap,
    query: QueryPairs,
) -> Result<Json<wire::Page<wire::Job>>, ApiError> {
    let params = Params::new(
        pairs(query)?,
        &[
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
        ],
    )?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let blame = params.list("blame");
    if let Some(bad) = blame.iter().find(|word| !["infrastructure", "application", "unknown"].contains(&word.as_str()))
    {
        return Err(ApiError::invalid("blame", format!("`{bad}` is not infrastructure, application or unknown")));
    }
    let end = params.time("end")?.unwrap_or_else(Utc::now);
    let start = params.time("start")?.unwrap_or(end - Duration::hours(24));
    let window = TimeWindow::new(start, end).map_err(|e| ApiError::invalid("start", e.to_string()))?;
    let states = params
        .list("state")
        .iter()
        .map(|name| name.parse::<StateFilter>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::invalid("state", e.to_string()))?;
    let filter = JobFilter {
        users: params.list("user"),
        accounts: params.list("account"),
        partitions: params.list("partition"),
        states,
        node: params.text("node").map(String::from),
        min_gpus: params.number("min_gpus", 0, u64::from(u32::MAX))?,
        max_gpus: params.number("max_gpus", 0, u64::from(u32::MAX))?,
    };
    let limit = params.number("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE) as usize;
    let cursor = params
        .text("cursor")
        .map(JobCursor::decode)
        .transpose()
        .map_err(|e| ApiError::invalid("cursor", e.to_string()))?;
    let scope = state.viewer(&headers, reader).await?;
    let catalog = reader.tres_catalog().await?;
    let (records, next) = reader.jobs_in_window(&scope, window, &filter, &catalog, cursor, limit).await?;
    let now = now_epoch();
    let cluster = reader.cluster().as_str();
    let mut items: Vec<wire::Job> =
        records.iter().map(|record| wire_map::job(record, &catalog, cluster, now)).collect();
    // Efficiency and blame from archived reports; without our store the listing is Slurm's facts alone.
    if let Some(store) = state.store_handle() {
        let keys: Vec<(u32, u64)> = records.iter().map(|r| (r.identity.id_job, r.time_submit)).collect();
        match store.digests_among(reader.cluster(), &keys).await {
            Ok(found) => {
                for (item, key) in items.iter_mut().zip(&keys) {
                    if let Some(digest) = found.get(key) {
                        item.mean_gpu_util = digest.mean_gpu_util;
                        item.mean_tensor_active = digest.mean_tensor_active;
                        item.blame = digest.blame.clone().or(item.blame.take());
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "archived reports unavailable; listing without them"),
        }
    }
    // `blame=` filters what the page holds (the verdict lives in our store, not in slurmdbd's rows):
    // a page may then hold fewer than `limit` jobs; the cursor still walks the whole window.
    if !blame.is_empty() {
        items.retain(|item| item.blame.as_ref().is_some_and(|b| blame.contains(b)));
    }
    Ok(Json(wire::Page { items, next_cursor: next.map(|cursor| cursor.encode()) }))
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
    state: AppStateExtractor,
    headers: HeaderMap,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobDetail>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let catalog = reader.tres_catalog().await?;
    let (record, steps) = state.visible_job(&headers, reader, &job_id).await?;
    Ok(Json(wire_map::job_detail(&record, &steps, &catalog, reader.cluster().as_str(), now_epoch())))
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
    ),
    responses(
        (status = 200, description = "The report", body = wire::JobReport),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn report(
    state: AppStateExtractor,
    headers: HeaderMap,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobReport>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "points"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let selector: JobSelector =
        job_id.parse().map_err(|e: crate::domain::ids::BadJobId| ApiError::invalid("job_id", e.to_string()))?;
    let points = params.number("points", 2, 2000)?.map_or(crate::reports::DEFAULT_POINTS, |points| points as usize);
    let scope = state.viewer(&headers, reader).await?;
    match state.reporter().report(reader, &scope, selector, points).await? {
        Some(report) => Ok(Json(report)),
        None => Err(ApiError::NotFound(format!("no job {job_id}"))),
    }
}
