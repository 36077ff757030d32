//! `/api/v1/usage` (showback per account or user, JSON or CSV) and `/api/v1/stats` (top lists and
//! histograms).

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::usage::usage_window;
use crate::app::{App, Viewer};
use crate::domain::job::TimeWindow;

/// The parameters `GET /api/v1/usage` takes (a `tag=` filter will join them).
const USAGE_PARAMETERS: [&str; 6] = ["cluster", "start", "end", "by", "format", "tag"];
/// The parameters `GET /api/v1/stats` takes.
const STATS_PARAMETERS: [&str; 4] = ["cluster", "start", "end", "tag"];

/// The CSV's columns, in order: a row's fields, the blame splits spelled out.
pub const CSV_COLUMNS: [&str; 21] = [
    "name",
    "parent",
    "jobs",
    "gpu_jobs",
    "gpu_hours",
    "gpu_hours_measured",
    "idle_gpu_hours",
    "mean_gpu_util",
    "mean_tensor_active",
    "energy_kwh",
    "gpu_hours_with_energy",
    "co2_kg",
    "failed_jobs_infrastructure",
    "failed_jobs_application",
    "failed_jobs_unknown",
    "failed_gpu_hours_infrastructure",
    "failed_gpu_hours_application",
    "failed_gpu_hours_unknown",
    "mean_wait_s",
    "median_wait_s",
    "is_total",
];

/// The window and cluster of a usage or stats request (the cluster checked first).
fn window_of(app: &App, params: &Params) -> Result<TimeWindow, ApiError> {
    app.cluster(params.text("cluster"))?;
    let end = params.time("end")?;
    Ok(usage_window(params.time("start")?, end)?)
}

/// `GET /api/v1/usage`: GPU-hours allocated and idle, energy, failures and queue wait per account or user.
#[utoipa::path(
    get,
    path = "/api/v1/usage",
    tag = "usage",
    operation_id = "usage",
    summary = "Showback: usage and waste per account or user in a window",
    description = "For the jobs the viewer may see that held an allocation in `[start, end)` (default: the last \
        7 days): GPU-hours allocated inside the window (`AllocTRES` `gres/gpu` × the part of each run inside \
        it, as `sreport` counts them), idle GPU-hours (allocated × (1 − mean utilisation) where an archived \
        report or a running job's means say it; `gpu_hours_measured` says how much is known, the rest is \
        unknown, never idle), mean utilisation and tensor activity weighted by GPU-hours, energy and CO₂ \
        (`[usage] co2_g_per_kwh`), jobs and GPU-hours lost to failures by blame, and queue wait. `by=account` \
        rolls sub-accounts up into their parents as `sreport` does (a coordinator's rows stop at the \
        accounts they coordinate); `by=user` is one row per user. Staff see every job, a coordinator \
        their accounts' and their own, a user their own. `format=csv` answers the same rows as CSV, the \
        total last.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 7 days."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
        ("by" = Option<String>, Query, description = "`account` (the default) or `user`."),
        ("format" = Option<String>, Query, description = "`json` (the default) or `csv`."),
        ("tag" = Option<String>, Query, description = "Only the jobs carrying this tag (`/api/v1/jobs/{job_id}/tags`)."),
    ),
    responses(
        (status = 200, description = "Usage per account or user (JSON, or CSV with `format=csv`)", content(
            (wire::UsageReport = "application/json"),
            (String = "text/csv"),
        )),
        (status = 400, description = "A parameter is unknown, repeated or malformed, start is not before end, or the window is wider than a viewer who is not staff may read (`[limits] window_days`) (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 429, description = "The token is over its request rate, or this person has `[limits] heavy_per_identity` heavy requests running (`rate_limited`)", body = wire::ErrorEnvelope,
            headers(("Retry-After" = u32, description = "Seconds until asking again"))),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`), or the server runs `[limits] heavy_total` heavy requests (`overloaded`, with Retry-After)", body = wire::ErrorEnvelope),
        (status = 504, description = "slurmdbd's database stopped a statement at its time limit: narrow the window (`query_timeout`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn usage(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Response, ApiError> {
    let params = Params::new(pairs(query)?, &USAGE_PARAMETERS)?;
    let window = window_of(&app, &params)?;
    let by = match params.text("by") {
        None | Some("account") => wire::UsageGrouping::Account,
        Some("user") => wire::UsageGrouping::User,
        Some(other) => return Err(ApiError::invalid("by", format!("`{other}` is not `account` or `user`"))),
    };
    let csv = match params.text("format") {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => return Err(ApiError::invalid("format", format!("`{other}` is not `json` or `csv`"))),
    };
    let report = app.usage(&viewer, params.text("cluster"), window, by, params.text("tag")).await?;
    if !csv {
        return Ok(Json(report).into_response());
    }
    let mut response = usage_csv(&report).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    headers.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"usage.csv\""));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// A number as JSON writes it (shortest round-trip), empty when absent.
fn cell(value: Option<f64>) -> String {
    value.map(|value| value.to_string()).unwrap_or_default()
}

/// The report as CSV: a header, one line per row, the total last.
pub fn usage_csv(report: &wire::UsageReport) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    // Writing into memory cannot fail; a failure would only drop lines, never panic.
    let _ = writer.write_record(CSV_COLUMNS);
    for (row, is_total) in report.rows.iter().map(|row| (row, false)).chain([(&report.total, true)]) {
        let record = [
            row.name.clone(),
            row.parent.clone().unwrap_or_default(),
            row.jobs.to_string(),
            row.gpu_jobs.to_string(),
            row.gpu_hours.to_string(),
            row.gpu_hours_measured.to_string(),
            cell(row.idle_gpu_hours),
            cell(row.mean_gpu_util),
            cell(row.mean_tensor_active),
            cell(row.energy_kwh),
            row.gpu_hours_with_energy.to_string(),
            cell(row.co2_kg),
            row.failed_jobs.infrastructure.to_string(),
            row.failed_jobs.application.to_string(),
            row.failed_jobs.unknown.to_string(),
            row.failed_gpu_hours.infrastructure.to_string(),
            row.failed_gpu_hours.application.to_string(),
            row.failed_gpu_hours.unknown.to_string(),
            cell(row.mean_wait_s),
            cell(row.median_wait_s),
            is_total.to_string(),
        ];
        let _ = writer.write_record(record);
    }
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// `GET /api/v1/stats`: top users and accounts, and histograms of job size, run time and queue wait.
#[utoipa::path(
    get,
    path = "/api/v1/stats",
    tag = "usage",
    operation_id = "stats",
    summary = "Top users and accounts, and histograms of the window's jobs",
    description = "For the jobs the viewer may see in `[start, end)` (default: the last 7 days): the top 10 users \
        and accounts (their jobs' own accounts, not rolled up) by GPU-hours allocated inside the window and by \
        idle GPU-hours (measured ones only, as `/api/v1/usage` counts them), and log-spaced histograms of \
        GPUs per job (GPU jobs that held an allocation in the window), run time (jobs that ended in it) and \
        queue wait (jobs that started in it). Scoped as `/api/v1/usage`.",
    params(
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 7 days."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
        ("tag" = Option<String>, Query, description = "Only the jobs carrying this tag."),
    ),
    responses(
        (status = 200, description = "Top lists and histograms", body = wire::UsageStats),
        (status = 400, description = "A parameter is unknown, repeated or malformed, start is not before end, or the window is wider than a viewer who is not staff may read (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 429, description = "The token is over its request rate, or this person has `[limits] heavy_per_identity` heavy requests running (`rate_limited`)", body = wire::ErrorEnvelope,
            headers(("Retry-After" = u32, description = "Seconds until asking again"))),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`), or the server runs `[limits] heavy_total` heavy requests (`overloaded`, with Retry-After)", body = wire::ErrorEnvelope),
        (status = 504, description = "slurmdbd's database stopped a statement at its time limit: narrow the window (`query_timeout`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn stats(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Json<wire::UsageStats>, ApiError> {
    let params = Params::new(pairs(query)?, &STATS_PARAMETERS)?;
    let window = window_of(&app, &params)?;
    Ok(Json(app.usage_stats(&viewer, params.text("cluster"), window, params.text("tag")).await?))
}
