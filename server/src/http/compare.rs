//! `GET /api/v1/jobs/{job_id}/previous` (a job against its owner's previous runs of the same work) and
//! `GET /api/v1/compare` (2–8 jobs side by side, timelines aligned from each one's start).

use axum::extract::{Path, State};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::{App, Viewer};

/// `GET /api/v1/jobs/{job_id}/previous`: the job and its owner's previous runs of the same work.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/previous",
    tag = "jobs",
    operation_id = "previous_runs",
    summary = "The job against its owner's previous runs of the same work",
    description = "The same user's previous finished runs of the same work on the job's cluster, newest \
        first: the same job name and, where slurmdbd stored the batch script (`AccountingStoreFlags=job_script`), \
        the same script (`matched_by` says which); the same size class (GPU count within a factor of 2); \
        ended within the last 365 days; at most 20, and only those the viewer may see. Per run: run time, \
        state, GPUs, mean GPU utilisation and tensor activity (from its archived report), NCCL share of \
        traced GPU time (where trace summaries were sent), energy per GPU-hour (where its report measured \
        energy). With the median of the previous runs and, against 3 or more of them, the \"slower than \
        usual\" verdict with its evidence: run time beyond the completed runs' median by more than 3 robust \
        spreads and 25%, or mean GPU utilisation under their median by more than 3 spreads and 10 points. \
        A job the viewer may not see is a 404, like a missing one; a shared report's link gets 403.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job and its previous runs", body = wire::PreviousRuns),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 403, description = "A shared report's link asks for its owner's other runs (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
        (status = 504, description = "slurmdbd's database stopped the query at its time limit (`query_timeout`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn previous_runs(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::PreviousRuns>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.previous_runs(&viewer, params.text("cluster"), &job_id).await?))
}

/// `GET /api/v1/compare?jobs=ID,ID,…`: 2–8 jobs side by side.
#[utoipa::path(
    get,
    path = "/api/v1/compare",
    tag = "jobs",
    operation_id = "compare_jobs",
    summary = "2–8 jobs side by side, timelines aligned from each job's start",
    description = "Per job, in the order asked: its facts and figures (run time, GPUs, mean GPU utilisation \
        and tensor activity, NCCL share of traced GPU time, energy per GPU-hour) and its timelines — mean GPU \
        utilisation across its GPUs (%) and their summed power (W) — as `[seconds since the job's start, \
        value]`, 60 points each, so that the jobs align. Each job must be one the viewer may see: one they \
        may not is a 404, like a missing one. Fewer than 2 or more than 8 ids, or one listed twice, is a 400.",
    params(
        ("jobs" = String, Query, description = "2 to 8 comma-separated job ids (`123`, `123_4`, `8+1`)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The jobs side by side", body = wire::Comparison),
        (status = 400, description = "Fewer than 2 or more than 8 jobs, one listed twice, a bad job id or parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "A job does not exist, or the viewer may not see it (`not_found`)", body = wire::ErrorEnvelope),
        (status = 429, description = "The token is over its request rate, or this person has `[limits] heavy_per_identity` heavy requests running (`rate_limited`)", body = wire::ErrorEnvelope,
            headers(("Retry-After" = u32, description = "Seconds until asking again"))),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer (`source_unavailable`), or the server runs `[limits] heavy_total` heavy requests (`overloaded`, with Retry-After)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn compare(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<wire::Comparison>, ApiError> {
    let params = Params::new(pairs(query)?, &["jobs", "cluster"])?;
    let job_ids = params.list("jobs");
    Ok(Json(app.compare(&viewer, params.text("cluster"), &job_ids).await?))
}
