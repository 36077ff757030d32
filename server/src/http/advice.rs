//! Advice at submission: `GET /api/v1/advice` (what the cli_filter plugin asks when a job is
//! submitted, with a MUNGE credential made as the submitting user, or any signed-in viewer for
//! themselves) and `GET`/`PUT /api/v1/me/advice` (the signed-in user's own opt-out).

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::ApiError;
use super::params::{Params, QueryPairs, pairs};
use super::tokens::{json_body, same_origin};
use crate::app::advice::{AdviceQuery, Submitter};
use crate::app::{App, Viewer};
use crate::domain::advice::{Ask, JobName, parse_gpu_count, parse_time_limit};

/// The header the plugin's MUNGE credential comes in.
pub const MUNGE_HEADER: &str = "X-Munge-Credential";
const MAX_BODY_BYTES: usize = 1024;
/// The most nodes a count may name (Slurm's own bound is far lower in practice).
const MAX_NODES: u64 = 1 << 20;

/// `GET /api/v1/advice`: at most one line from the asker's own history.
#[utoipa::path(
    get,
    path = "/api/v1/advice",
    tag = "advice",
    operation_id = "advice",
    summary = "One line of advice for a job being submitted",
    description = "From the asking user's own latest finished runs of jobs with the same name (at most 5, \
        at least 3 needed): GPUs mostly idle, a time limit far above use, repeated out-of-memory ends, \
        time-outs or failures. At most one line, or `advice: null` (nothing worth saying, advice turned off \
        by the site or the user, or the history not read within the site's deadline). The Slurm plugin asks \
        with a MUNGE credential made as the submitting user with payload `slurmlens:advice` (single-use, \
        short-lived: a replayed, expired or forged one is 401); a signed-in viewer asks for themselves.",
    params(
        ("job_name" = String, Query, description = "The job's name (`--job-name`)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("gpus" = Option<String>, Query, description = "`--gpus` as given (`8`, `a100:8`)."),
        ("gpus_per_node" = Option<String>, Query, description = "`--gpus-per-node` as given."),
        ("gres" = Option<String>, Query, description = "`--gres` as given (`gpu:8`)."),
        ("nodes" = Option<String>, Query, description = "`--nodes` as given (`2`, `2-4`: the lower bound counts)."),
        ("time_limit" = Option<String>, Query, description = "`--time` as given (`90`, `24:00:00`, `1-12`)."),
        ("partition" = Option<String>, Query, description = "`--partition` as given (read, not yet used by a rule)."),
    ),
    responses(
        (status = 200, description = "At most one line", body = wire::AdviceAnswer),
        (status = 400, description = "A malformed option (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "No identity, or a MUNGE credential munged refused (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 503, description = "munged or slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("munge" = []), ("token" = []), ("user_header" = [])),
)]
pub async fn advice(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
    headers: HeaderMap,
) -> Result<Json<wire::AdviceAnswer>, ApiError> {
    let params = Params::new(
        pairs(query)?,
        &["job_name", "cluster", "gpus", "gpus_per_node", "gres", "nodes", "time_limit", "partition"],
    )?;
    let query = advice_query(&params)?;
    let mut credentials = headers.get_all(MUNGE_HEADER).iter();
    let submitter = match (credentials.next(), credentials.next()) {
        (None, _) => Submitter::Viewer(&viewer),
        (Some(value), None) => Submitter::Munge(
            value.to_str().map_err(|_| ApiError::Unauthorized("the MUNGE credential is not text".into()))?,
        ),
        (Some(_), Some(_)) => return Err(ApiError::invalid("headers", format!("{MUNGE_HEADER} came more than once"))),
    };
    let advice = app.advice(submitter, &query).await?;
    let advice = advice.map(|advice| wire::Advice {
        kind: advice.kind,
        line: advice.line,
        runs: u32::try_from(advice.runs).unwrap_or(u32::MAX),
    });
    Ok(Json(wire::AdviceAnswer { advice }))
}

/// The query's options, parsed as Slurm reads them.
fn advice_query(params: &Params) -> Result<AdviceQuery, ApiError> {
    let job_name: JobName = params
        .text("job_name")
        .ok_or_else(|| ApiError::invalid("job_name", "the job's name is needed"))?
        .parse()
        .map_err(|message: String| ApiError::invalid("job_name", message))?;
    let count = |name: &str, gres: bool| -> Result<Option<u64>, ApiError> {
        params.text(name).map_or(Ok(None), |text| parse_gpu_count(text, gres).map_err(|e| ApiError::invalid(name, e)))
    };
    let nodes =
        match params.text("nodes") {
            None => None,
            Some(text) => {
                let lower = text.split('-').next().unwrap_or_default();
                Some(lower.parse::<u64>().ok().filter(|n| (1..=MAX_NODES).contains(n)).ok_or_else(|| {
                    ApiError::invalid("nodes", format!("`{text}` is not a node count (`2` or `2-4`)"))
                })?)
            }
        };
    let per_node = |count: Option<u64>| count.map(|count| count * nodes.unwrap_or(1));
    let gpus = count("gpus", false)?.or(per_node(count("gpus_per_node", false)?)).or(per_node(count("gres", true)?));
    let time_limit_min = match params.text("time_limit") {
        None => None,
        Some(text) => parse_time_limit(text).map_err(|e| ApiError::invalid("time_limit", e))?,
    };
    if let Some(partition) = params.text("partition")
        && (partition.len() > 128 || partition.chars().any(char::is_control))
    {
        return Err(ApiError::invalid("partition", "at most 128 characters, no control characters"));
    }
    Ok(AdviceQuery { cluster: params.text("cluster").map(String::from), job_name, ask: Ask { gpus, time_limit_min } })
}

/// `GET /api/v1/me/advice`: whether the signed-in user hears advice when they submit.
#[utoipa::path(
    get,
    path = "/api/v1/me/advice",
    tag = "advice",
    operation_id = "get_advice_setting",
    summary = "Your own advice setting",
    description = "On unless you turned it off. The site may also turn advice off for everyone (`[advice] enabled`).",
    responses(
        (status = 200, description = "The setting", body = wire::AdviceSetting),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn get_setting(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
) -> Result<Json<wire::AdviceSetting>, ApiError> {
    Ok(Json(wire::AdviceSetting { enabled: app.advice_enabled(&viewer).await? }))
}

/// `PUT /api/v1/me/advice`: turns the signed-in user's advice on or off.
#[utoipa::path(
    put,
    path = "/api/v1/me/advice",
    tag = "advice",
    operation_id = "put_advice_setting",
    summary = "Turn your own advice on or off",
    description = "`{\"enabled\": false}` silences advice at submission for you; `true` turns it back on. \
        Signed in through the site (a personal token reads only), a same-origin JSON request.",
    request_body(content = wire::AdviceSetting, content_type = "application/json"),
    responses(
        (status = 200, description = "The setting now", body = wire::AdviceSetting),
        (status = 400, description = "Not the documented JSON (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 403, description = "A browser's cross-site request (`forbidden`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmlens's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("user_header" = [])),
)]
pub async fn put_setting(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<wire::AdviceSetting>, ApiError> {
    if viewer.identity().is_none() {
        return Err(ApiError::Unauthorized("sign in to change your own advice setting".into()));
    }
    same_origin(&headers)?;
    json_body(&headers)?;
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_BODY_BYTES} bytes")))?;
    let asked: wire::AdviceSetting = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("body", format!("expected {{\"enabled\": true|false}}: {e}")))?;
    app.set_advice_enabled(&viewer, asked.enabled).await?;
    Ok(Json(asked))
}
