//! `/api/v1/nodes/{name}` (one node's page) and `/api/v1/node_health` (every node's badge).

use axum::extract::{Path, State};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs, path_name};
use crate::app::{App, Viewer};

/// `GET /api/v1/nodes/{name}?cluster=&start=&end=`: one node over a window.
#[utoipa::path(
    get,
    path = "/api/v1/nodes/{name}",
    tag = "nodes",
    operation_id = "node_page",
    summary = "One node: state, events, GPU health counters, links, and the jobs at each fault",
    description = "The node's state now and its health (`ok`, `warn`, `fault` with reasons), its drains and downs \
        in `[start, end)` (default: the last 7 days; at most 31 days, and for a viewer who is not staff at most \
        `[limits] window_days`), per GPU its XID codes, ECC and row-remap counters, clock-event reasons in words \
        and power/thermal violation time, the ping-mesh paths of its ToR, and its faults (newest first, at most \
        50) with the jobs running then and their archived verdicts. Jobs the viewer may not see are counted \
        (`other_jobs`), never named; temperature and power timelines are for staff only (`timelines_hidden`). \
        When VictoriaMetrics does not answer, `metrics` is `unavailable` and the page has slurmdbd's part.",
    params(
        ("name" = String, Path, description = "The node's name (as slurmdbd records it)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 7 days."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
    ),
    responses(
        (status = 200, description = "The node's page", body = wire::NodePage),
        (status = 400, description = "A parameter is unknown, repeated or malformed, or the window is empty or too wide (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 401, description = "No identity, and the site shows nothing to anonymous viewers (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such node on the cluster (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn node_page(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(name): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::NodePage>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "start", "end"])?;
    let node = path_name("name", &name)?;
    app.cluster(params.text("cluster"))?;
    let window = (params.time("start")?, params.time("end")?);
    Ok(Json(app.node_page(&viewer, params.text("cluster"), node, window).await?))
}

/// `GET /api/v1/node_health?cluster=&start=&end=`: every node's health badge.
#[utoipa::path(
    get,
    path = "/api/v1/node_health",
    tag = "nodes",
    operation_id = "node_health",
    summary = "Every node's health (ok, warn, fault) with its reasons, for the grid's badges",
    description = "Per node: its state in slurmdbd and, over `[start, end)` (default: the last 24 hours), its \
        GPUs' highest XID code, new double-bit ECC errors, uncorrectable remaps, failed or pending row remaps \
        and the clock-event reasons of the latest reading. When VictoriaMetrics does not answer, `metrics` \
        is `unavailable` and the levels come from slurmdbd alone. Node health is not per-tenant data: the \
        default day, when it ends within the last minute, is read to the start of that minute and shared \
        by every viewer for a minute (`end` says where it ended).",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 24 hours."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
    ),
    responses(
        (status = 200, description = "Every node's health", body = wire::NodesHealth),
        (status = 400, description = "A parameter is unknown, repeated or malformed, or the window is empty or too wide (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 401, description = "No identity, and the site shows nothing to anonymous viewers (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn node_health(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<wire::NodesHealth>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "start", "end"])?;
    app.cluster(params.text("cluster"))?;
    let window = (params.time("start")?, params.time("end")?);
    Ok(Json(app.nodes_health(&viewer, params.text("cluster"), window).await?))
}
