//! `/api/v1/nodes`, `/api/v1/node_events`, `/api/v1/gpus/values`, `/api/v1/gpus/busy` and
//! `/api/v1/gpus/held`.

use std::collections::BTreeMap;

use axum::Json;
use axum::http::HeaderMap;
use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use super::{AppState, AppStateExtractor, wire_map};
use crate::domain::gpu::GpuRef;
use crate::domain::job::{TimeWindow, exact_gpus_per_node};
use crate::domain::report::HeldJob;
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;
use crate::reports::GpuScope;
use crate::sources::slurmdbd::SlurmDbd;

/// `GET /api/v1/nodes`: every node with its current state. Node names and states are not
/// per-tenant data, so every viewer sees them (jobs on them stay scoped).
#[utoipa::path(
    get,
    path = "/api/v1/nodes",
    tag = "nodes",
    operation_id = "list_nodes",
    summary = "Every node with its current state",
    description = "Every node slurmdbd knows, with its open drain/down event, the number of jobs running on \
        it and their GPUs. Node states are not per-tenant data: every viewer sees them.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The cluster's nodes", body = Vec<wire::Node>),
        (status = 400, description = "A parameter is unknown, repeated or malformed (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn list(
    state: AppStateExtractor,
    headers: HeaderMap,
    query: QueryPairs,
) -> Result<Json<Vec<wire::Node>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    state.viewer(&headers, reader).await?;
    let catalog = reader.tres_catalog().await?;
    let nodes = reader.nodes(&catalog).await?;
    Ok(Json(nodes.iter().map(wire_map::node).collect()))
}

/// `GET /api/v1/node_events`: drains, downs and failures overlapping `[start, end)` (default: 7 days).
#[utoipa::path(
    get,
    path = "/api/v1/node_events",
    tag = "nodes",
    operation_id = "list_node_events",
    summary = "Drains, downs and failures from slurmdbd's event table",
    description = "Node events (as `sacctmgr show event` lists them) overlapping `[start, end)` (default: the \
        last 7 days). Every viewer sees them.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 7 days."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
        ("node" = Option<String>, Query, description = "Only this node's events."),
    ),
    responses(
        (status = 200, description = "The events", body = Vec<wire::NodeEvent>),
        (status = 400, description = "A parameter is unknown, repeated or malformed (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn events(
    state: AppStateExtractor,
    headers: HeaderMap,
    query: QueryPairs,
) -> Result<Json<Vec<wire::NodeEvent>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "start", "end", "node"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    state.viewer(&headers, reader).await?;
    let end = params.time("end")?.unwrap_or_else(Utc::now);
    let start = params.time("start")?.unwrap_or(end - Duration::days(7));
    let window = TimeWindow::new(start, end).map_err(|e| ApiError::invalid("start", e.to_string()))?;
    let events = reader.node_events(window, params.text("node")).await?;
    Ok(Json(events.iter().map(wire_map::node_event).collect()))
}

/// `GET /api/v1/gpus/values?metric=&at=`: one metric (`gpu_util`, `tensor_active`, `fb_used`, `power`,
/// `temperature`, `xid`, …) of GPUs at `at` (default now). Staff get every GPU of the cluster's nodes.
/// A user gets only the GPUs of their visible jobs running then (the indices the plugin recorded, and
/// every GPU of a node those jobs hold whole): the query sent to VictoriaMetrics names nothing else.
/// Without an identity the answer is 401.
#[utoipa::path(
    get,
    path = "/api/v1/gpus/values",
    tag = "gpus",
    operation_id = "gpu_values",
    summary = "One metric of the GPUs the viewer may read, at a moment",
    description = "One metric (`gpu_util`, `tensor_active`, `fb_used`, `power`, `temperature`, `xid`, …) of GPUs \
        at `at`: the grid's colours. Staff get every GPU of the cluster's nodes; a user only the GPUs of their \
        visible jobs running then (the indices the plugin recorded, and every GPU of a node those jobs hold \
        whole). When VictoriaMetrics does not answer, `status` is `unavailable`.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("metric" = Option<String>, Query, description = "A metric of the site's series catalogue; default `gpu_util`."),
        ("at" = Option<String>, Query, description = "The moment, RFC 3339 or Unix seconds; default: now."),
    ),
    responses(
        (status = 200, description = "The readings", body = wire::GpuValues),
        (status = 400, description = "An unknown metric, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn gpu_values(
    state: AppStateExtractor,
    headers: HeaderMap,
    query: QueryPairs,
) -> Result<Json<wire::GpuValues>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "metric", "at"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let at = params.time("at")?.unwrap_or_else(Utc::now);
    let metric = params.text("metric").unwrap_or("gpu_util");
    let reporter = state.reporter();
    let known = reporter.gpu_value_metrics();
    if !known.iter().any(|(key, _)| key == metric) {
        let names: Vec<&str> = known.iter().map(|(key, _)| key.as_str()).collect();
        return Err(ApiError::invalid("metric", format!("unknown metric `{metric}`; one of {}", names.join(", "))));
    }
    let scope = state.viewer(&headers, reader).await?;
    let catalog = reader.tres_catalog().await?;
    let gpus = match &scope {
        ViewerScope::Nobody => return Err(ApiError::Unauthorized("sign in to see GPU readings".into())),
        ViewerScope::Staff => {
            GpuScope::Nodes(reader.nodes(&catalog).await?.iter().map(|node| wire_map::node(node).node).collect())
        }
        ViewerScope::User { .. } => GpuScope::Jobs(held_jobs(&state, reader, &scope, &catalog, at).await?),
    };
    let values = reporter.gpu_values(&gpus, metric, at).await;
    values.map(Json).ok_or_else(|| ApiError::invalid("metric", format!("unknown metric `{metric}`")))
}

/// The jobs `scope` may see running at `at`, with the GPU indices the plugin recorded for them. Without
/// slurmlens's database (or while it fails) they have no records: only nodes held whole then count.
async fn held_jobs(
    state: &AppState,
    reader: &SlurmDbd,
    scope: &ViewerScope,
    catalog: &TresCatalog,
    at: DateTime<Utc>,
) -> Result<Vec<HeldJob>, ApiError> {
    let running = reader.running_at(scope, moment(at)?, catalog).await?;
    let job_ids: Vec<u32> = running.iter().map(|job| job.identity.id_job).collect();
    let mut recorded: BTreeMap<u32, Vec<GpuRef>> = BTreeMap::new();
    if let Some(store) = state.store_handle() {
        match store.gpu_indices_among(reader.cluster(), &job_ids).await {
            Ok(held) => {
                for (job_id, node, index) in held {
                    recorded.entry(job_id).or_default().push(GpuRef { node, index });
                }
            }
            Err(error) => tracing::warn!(%error, "GPU records unavailable; readings only for nodes held whole"),
        }
    }
    Ok(running
        .iter()
        .map(|job| {
            let nodes = job.nodes.hosts().to_vec();
            HeldJob {
                gpus_per_node: exact_gpus_per_node(catalog.gpus(&job.tres_alloc), nodes.len()),
                nodes,
                recorded: recorded.remove(&job.identity.id_job).unwrap_or_default(),
            }
        })
        .collect())
}

/// The window `[at, at + 1 s)` the running-at queries take.
fn moment(at: DateTime<Utc>) -> Result<TimeWindow, ApiError> {
    TimeWindow::new(at, at + Duration::seconds(1)).map_err(|e| ApiError::invalid("at", e.to_string()))
}

/// `GET /api/v1/gpus/busy?at=`: per node, how many GPUs jobs the viewer may *not* see held at `at`
/// (default now), so the grid can draw them as "busy" without naming anyone. Counts only: no job id,
/// user, account or name. Staff see every job by name already and get an empty list; so does a viewer
/// who is not signed in (they see no jobs, and no occupancy either).
#[utoipa::path(
    get,
    path = "/api/v1/gpus/busy",
    tag = "gpus",
    operation_id = "busy_gpus",
    summary = "Per node, how many GPUs other tenants' jobs held at a moment",
    description = "Counts only, for the grid's unnamed \"busy\" cells: no job id, user, account or name of a job \
        the viewer may not see. Staff, who see every job by name, get an empty list.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("at" = Option<String>, Query, description = "The moment, RFC 3339 or Unix seconds; default: now."),
    ),
    responses(
        (status = 200, description = "Busy GPUs per node", body = Vec<wire::BusyGpus>),
        (status = 400, description = "A parameter is unknown, repeated or malformed (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn busy_gpus(
    state: AppStateExtractor,
    headers: HeaderMap,
    query: QueryPairs,
) -> Result<Json<Vec<wire::BusyGpus>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "at"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let at = params.time("at")?.unwrap_or_else(Utc::now);
    let scope = state.viewer(&headers, reader).await?;
    if matches!(scope, ViewerScope::Staff | ViewerScope::Nobody) {
        return Ok(Json(Vec::new()));
    }
    let catalog = reader.tres_catalog().await?;
    let busy = reader.busy_gpus(&scope, moment(at)?, &catalog).await?;
    Ok(Json(busy.into_iter().map(|(node, gpus)| wire::BusyGpus { node, gpus }).collect()))
}

/// `GET /api/v1/gpus/held?at=`: the GPU indices the Slurm plugin recorded for the jobs running at `at`
/// (default now) that the viewer may see. Jobs without records are absent: slurmdbd keeps counts only.
#[utoipa::path(
    get,
    path = "/api/v1/gpus/held",
    tag = "gpus",
    operation_id = "held_gpus",
    summary = "Which GPU each visible running job held at a moment",
    description = "The GPU indices the Slurm plugin recorded for the jobs running at `at` that the viewer may \
        see. Jobs without plugin records are absent (slurmdbd keeps GPU counts only).",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("at" = Option<String>, Query, description = "The moment, RFC 3339 or Unix seconds; default: now."),
    ),
    responses(
        (status = 200, description = "The held GPUs", body = Vec<wire::HeldGpu>),
        (status = 400, description = "A parameter is unknown, repeated or malformed (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn held_gpus(
    state: AppStateExtractor,
    headers: HeaderMap,
    query: QueryPairs,
) -> Result<Json<Vec<wire::HeldGpu>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "at"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let at = params.time("at")?.unwrap_or_else(Utc::now);
    let scope = state.viewer(&headers, reader).await?;
    let catalog = reader.tres_catalog().await?;
    let running: Vec<u32> =
        reader.running_at(&scope, moment(at)?, &catalog).await?.iter().map(|job| job.identity.id_job).collect();
    let held = state.store()?.gpu_indices_among(reader.cluster(), &running).await?;
    Ok(Json(held.into_iter().map(|(job_id, node, gpu)| wire::HeldGpu { job_id, node, gpu }).collect()))
}
