//! Job tags: `GET /api/v1/jobs/{job_id}/tags` (whoever may see the job), `PUT` and `DELETE
//! /api/v1/jobs/{job_id}/tags/{tag}` (the job's owner or staff, signed in through the site, from a
//! same-origin request: tokens are read-only, as for links).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::ApiError;
use super::params::{Params, QueryPairs, pairs};
use super::tokens::same_origin;
use crate::app::{App, Viewer};

/// The site's sign-in (a proxy identity), not a token.
fn at_the_site(viewer: &Viewer) -> Result<(), ApiError> {
    match viewer.identity() {
        None => Err(ApiError::Unauthorized("sign in through the site to tag a job".into())),
        Some(identity) if identity.token.is_some() => {
            Err(ApiError::Forbidden("a token cannot change tags; sign in through the site".into()))
        }
        Some(_) => Ok(()),
    }
}

/// `GET /api/v1/jobs/{job_id}/tags`: the job's tags, who set each, and whether the viewer may change them.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/tags",
    tag = "tags",
    operation_id = "job_tags",
    summary = "A job's tags",
    description = "The job's tags by name: those people set (`origin = user`, with `set_by`) and those the \
        rules set from the job's batch script and traced kernels (`origin = rule`: `pytorch`, `deepspeed`, \
        `megatron`, `nccl-tests`, `vllm`, `jax`, …). The rules read a job when its tags are first asked for \
        and when its report is archived. `editable` says whether the viewer may add and remove tags.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job's tags", body = wire::JobTags),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn list(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobTags>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.job_tags(&viewer, params.text("cluster"), &job_id).await?))
}

/// `PUT /api/v1/jobs/{job_id}/tags/{tag}`: adds a tag (adding one the job holds changes nothing).
#[utoipa::path(
    put,
    path = "/api/v1/jobs/{job_id}/tags/{tag}",
    tag = "tags",
    operation_id = "add_job_tag",
    summary = "Tag a job",
    description = "The job's owner (or staff), signed in through the site, adds a tag: 1–32 characters of \
        `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit. A job holds at most 16 tags. Adding a \
        tag the job holds already changes nothing. The answer is the job's tags.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("tag" = String, Path, description = "The tag, e.g. `ablation-3`."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job's tags, this one among them", body = wire::JobTags),
        (status = 400, description = "Not a tag, the job holds 16 tags already, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Not the job's owner or staff, asked with a token, or a browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn add(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path((job_id, tag)): Path<(String, String)>,
    query: QueryPairs,
    headers: HeaderMap,
) -> Result<Json<wire::JobTags>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    at_the_site(&viewer)?;
    same_origin(&headers)?;
    Ok(Json(app.add_job_tag(&viewer, params.text("cluster"), &job_id, &tag).await?))
}

/// `DELETE /api/v1/jobs/{job_id}/tags/{tag}`: removes a tag a person set.
#[utoipa::path(
    delete,
    path = "/api/v1/jobs/{job_id}/tags/{tag}",
    tag = "tags",
    operation_id = "remove_job_tag",
    summary = "Remove a tag from a job",
    description = "The job's owner (or staff), signed in through the site, removes a tag a person set. A \
        rule's tag is not removed (403): the rules set it from the job's script or traces and would set it \
        again. The answer is the job's tags.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("tag" = String, Path, description = "The tag."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The job's tags, without this one", body = wire::JobTags),
        (status = 400, description = "Not a tag, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "Not the job's owner or staff, a rule's tag, asked with a token, or a browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job or tag, or a job the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn remove(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path((job_id, tag)): Path<(String, String)>,
    query: QueryPairs,
    headers: HeaderMap,
) -> Result<Json<wire::JobTags>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    at_the_site(&viewer)?;
    same_origin(&headers)?;
    Ok(Json(app.remove_job_tag(&viewer, params.text("cluster"), &job_id, &tag).await?))
}
