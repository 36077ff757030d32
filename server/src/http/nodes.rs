//! `/api/v1/nodes`, `/api/v1/node_events`, `/api/v1/gpus/values`, `/api/v1/gpus/busy` and
//! `/api/v1/gpus/held`.

use axum::extract::State;
use axum::{Extension, Json};
use chrono::Utc;
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::gpus::DEFAULT_METRIC;
use crate::app::{App, Viewer};

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
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<Vec<wire::Node>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.list_nodes(&viewer, params.text("cluster")).await?))
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
        ("node" = Option<String>, Query, description = "Only this node's events (printable ASCII without spaces, at most 128 characters)."),
    ),
    responses(
        (status = 200, description = "The events", body = Vec<wire::NodeEvent>),
        (status = 400, description = "A parameter is unknown, repeated or malformed, or the window is wider than a viewer who is not staff may list (`[limits] window_days`) (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn events(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<Vec<wire::NodeEvent>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "start", "end", "node"])?;
    app.cluster(params.text("cluster"))?;
    let end = params.time("end")?;
    let window = (params.time("start")?, end);
    Ok(Json(app.node_events(&viewer, params.text("cluster"), window, params.name("node")?).await?))
}

/// `GET /api/v1/gpus/values?metric=&at=`: one metric (`gpu_util`, `tensor_active`, `fb_used`, `power`,
/// `temperature`, `xid`, …) of GPUs at `at` (default now; a future moment is a 400), from the latest
/// readings at or before it within the server's bound. Staff get every GPU of the cluster's nodes.
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
        at `at`: the grid's colours. The readings are the latest at or before `at`, at most `max_age_s` older \
        (`readings_at` says when they were taken; absent: no GPU reported then). A moment in the future is a \
        400. Staff get every GPU of the cluster's nodes; a user only the GPUs of their visible jobs running \
        when the readings were taken (the indices the plugin recorded, and every GPU of a node those jobs hold \
        whole). For `xid`, `xid_codes` says how each code present reads. When VictoriaMetrics does not \
        answer, `status` is `unavailable`.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("metric" = Option<String>, Query, description = "A metric of the site's series catalogue; default `gpu_util`."),
        ("at" = Option<String>, Query, description = "The moment, RFC 3339 or Unix seconds, not in the future; default: now."),
    ),
    responses(
        (status = 200, description = "The readings", body = wire::GpuReadings),
        (status = 400, description = "An unknown metric, a moment in the future, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn gpu_values(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<wire::GpuReadings>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "metric", "at"])?;
    app.cluster(params.text("cluster"))?;
    let at = params.time("at")?.unwrap_or_else(Utc::now);
    let metric = params.text("metric").unwrap_or(DEFAULT_METRIC);
    Ok(Json(app.gpu_values(&viewer, params.text("cluster"), metric, at).await?))
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
        ("at" = Option<String>, Query, description = "The moment, RFC 3339 or Unix seconds, not in the future; default: now."),
    ),
    responses(
        (status = 200, description = "Busy GPUs per node", body = Vec<wire::BusyGpus>),
        (status = 400, description = "A parameter is unknown, repeated or malformed, or `at` is in the future (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn busy_gpus(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<Vec<wire::BusyGpus>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "at"])?;
    app.cluster(params.text("cluster"))?;
    let at = params.time("at")?.unwrap_or_else(Utc::now);
    Ok(Json(app.busy_gpus(&viewer, params.text("cluster"), at).await?))
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
        ("at" = Option<String>, Query, description = "The moment, RFC 3339 or Unix seconds, not in the future; default: now."),
    ),
    responses(
        (status = 200, description = "The held GPUs", body = Vec<wire::HeldGpu>),
        (status = 400, description = "A parameter is unknown, repeated or malformed, or `at` is in the future (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn held_gpus(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<Vec<wire::HeldGpu>>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "at"])?;
    app.cluster(params.text("cluster"))?;
    let at = params.time("at")?.unwrap_or_else(Utc::now);
    Ok(Json(app.held_gpus(&viewer, params.text("cluster"), at).await?))
}
