//! `GET /api/v1/jobs/{job_id}/script`: the job's batch script, submit line and environment.

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
