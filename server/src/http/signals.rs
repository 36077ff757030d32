//! `GET /api/v1/jobs/{job_id}/logs` and `/profile`: the job's log lines (VictoriaLogs) and CPU profile
//! (Pyroscope), scoped like its report. Parameters are parsed into domain types here; anything that
//! could change the query sent is a 400 before a source is asked.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::signals::{DEFAULT_TOP, LogsRequest, MAX_TOP, ProfileRequest};
use crate::app::{App, Viewer};
use crate::domain::logsql::ContainsText;
use crate::domain::profile::ProfileType;

/// `GET /api/v1/jobs/{job_id}/logs?node=&contains=&limit=`: the job's log lines and the ones that matter.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/logs",
    tag = "jobs",
    operation_id = "job_logs",
    summary = "The job's log lines from VictoriaLogs, the important ones first",
    description = "Log lines of the job's nodes in its window (a minute of margin each side) from the site's \
        VictoriaLogs, through LogsQL the server builds (returned in `query`): exact matches on the job's \
        nodes, every value quoted. `important` holds the lines that matter, classified: NVIDIA XIDs (with \
        the code), NCCL errors and timeouts, OOM kills, links going down, Slurm's daemons about this job. \
        When VictoriaLogs does not answer in time, `status` is `unavailable` with a message (still a 200); \
        without a `[victorialogs]` section it is `not_configured`. A job the viewer may not see is a 404.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("node" = Option<String>, Query, description = "Only this node; it must be one of the job's nodes."),
        ("contains" = Option<String>, Query, description = "A phrase the lines must hold: letters, digits, spaces and `-_.,/=@+#%!?[]`, at most 200 characters; anything else is a 400."),
        ("limit" = Option<u32>, Query, minimum = 1, description = "Most lines (the latest are kept); default and maximum: the site's `max_lines`."),
    ),
    responses(
        (status = 200, description = "The job's logs, or why there are none", body = wire::JobLogs),
        (status = 400, description = "Not a job id, a node not the job's, or a filter that could change the query (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn job_logs(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobLogs>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "node", "contains", "limit"])?;
    let contains = params
        .text("contains")
        .map(|text| text.parse::<ContainsText>().map_err(|e| ApiError::invalid("contains", format!("`contains` {e}"))))
        .transpose()?;
    let limit = params.number("limit", 1, u64::from(app.signals().max_lines()))?.map(|limit| limit as u32);
    let request = LogsRequest { node: params.text("node").map(String::from), contains, limit };
    Ok(Json(app.job_logs(&viewer, params.text("cluster"), &job_id, request).await?))
}

/// `GET /api/v1/jobs/{job_id}/profile?profile_type=&node=&top=`: where the job's processes spent CPU.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/profile",
    tag = "jobs",
    operation_id = "job_profile",
    summary = "The job's CPU (or memory) profile from Pyroscope",
    description = "The merged eBPF profile of the job's cgroup (`…/job_<id>`, Slurm's cgroup v1 and v2 \
        layouts) on its nodes in its window, from the site's Grafana Pyroscope through a selector the \
        server builds (returned in `query`): the top functions by self and by total with their shares, \
        and the flame graph as bars. `status` is `empty` without samples, `unavailable` when Pyroscope \
        does not answer in time (still a 200), `not_configured` without a `[pyroscope]` section. A job \
        the viewer may not see is a 404.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("profile_type" = Option<String>, Query, description = "`cpu`, `cpu_samples`, `alloc_space`, `alloc_objects`, `inuse_space`, `inuse_objects` (or their Pyroscope ids); default: the site's."),
        ("node" = Option<String>, Query, description = "Only this node; it must be one of the job's nodes."),
        ("top" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Functions listed by self and by total; default 20."),
    ),
    responses(
        (status = 200, description = "The job's profile, or why there is none", body = wire::JobProfile),
        (status = 400, description = "Not a job id, an unknown profile type, or a node not the job's (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn job_profile(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobProfile>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "profile_type", "node", "top"])?;
    let profile_type = params
        .text("profile_type")
        .map(|text| text.parse::<ProfileType>().map_err(|e| ApiError::invalid("profile_type", format!("`{text}` {e}"))))
        .transpose()?;
    let top = params.number("top", 1, MAX_TOP)?.map_or(DEFAULT_TOP, |top| top as usize);
    let request = ProfileRequest { profile_type, node: params.text("node").map(String::from), top };
    Ok(Json(app.job_profile(&viewer, params.text("cluster"), &job_id, request).await?))
}
