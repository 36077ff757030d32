//! `GET /api/v1/jobs/{job_id}/script`: the job's batch script, submit line and environment; `…/output`: its own output.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::{App, Viewer};

/// `GET /api/v1/jobs/{job_id}/script`: what the job was submitted with, to those who may read it.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/script",
    tag = "jobs",
    operation_id = "job_script",
    summary = "The job's batch script, submit line and environment",
    description = "The batch script and the submit line as slurmdbd stores them (where the site sets \
        `AccountingStoreFlags=job_script,job_env`), to the job's owner, the coordinators of its account and \
        staff; the environment at submission only to the owner and staff (`environment_access` says \
        `withheld` to a coordinator). A job the viewer may not see is a 404, like a missing one. Each text \
        is cut at 262,144 characters (`truncated` says so).",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job's script", body = wire::JobScript),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn job_script(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobScript>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.job_script(&viewer, params.text("cluster"), &job_id).await?))
}

/// `GET /api/v1/jobs/{job_id}/output`: where the job's output went, and its last lines.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/output",
    tag = "jobs",
    operation_id = "job_output",
    summary = "Where the job's output went, and its last lines",
    description = "The job's standard output and error files as Slurm named them (slurmdbd's `std_out`/`std_err` \
        from Slurm 24.05, else the `--output`/`--error` of its submit line or script, else `slurm-%j.out` in its \
        working directory), to whoever may see the job. Their last lines (`[job_output] tail_bytes`) only to the \
        job's owner and staff, and only from a regular file owned by the job's user under the site's \
        `[job_output] roots`; `state` says why a file was not read. A job the viewer may not see is a 404.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job's output files", body = wire::JobOutput),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 403, description = "A shared report link (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn job_output(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobOutput>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.job_output(&viewer, params.text("cluster"), &job_id).await?))
}
