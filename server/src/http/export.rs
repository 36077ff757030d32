//! `GET /api/v1/jobs/export`: a whole window of the listing, streamed as NDJSON (one listing item per
//! line) or CSV (every field of a listing item, one column each), written as slurmdbd's rows arrive.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{BoxError, Extension};
use chrono::{DateTime, SecondsFormat, Utc};
use futures::{Stream, StreamExt, stream};
use slurmlens_web::joblist::push_csv_field;
use slurmlens_wire as wire;

use super::error::ApiError;
use super::jobs::{LIST_PARAMETERS, jobs_query};
use super::params::{Params, QueryPairs, pairs};
use crate::app::{App, AppError, Viewer};

/// The formats an export is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// One listing item (`wire::Job`) as JSON per line, `\n` after each.
    Ndjson,
    /// [`CSV_COLUMNS`], a header line first, CRLF line ends (RFC 4180).
    Csv,
}

impl Format {
    fn parse(text: Option<&str>) -> Result<Self, ApiError> {
        match text {
            None | Some("ndjson") => Ok(Self::Ndjson),
            Some("csv") => Ok(Self::Csv),
            Some(other) => Err(ApiError::invalid("format", format!("`{other}` is not ndjson or csv"))),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Ndjson => "application/x-ndjson",
            Self::Csv => "text/csv; charset=utf-8",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            Self::Ndjson => "attachment; filename=\"jobs.ndjson\"",
            Self::Csv => "attachment; filename=\"jobs.csv\"",
        }
    }

    /// What the body starts with, before any job.
    fn header(self) -> Option<Bytes> {
        match self {
            Self::Ndjson => None,
            Self::Csv => {
                let names: Vec<&str> = CSV_COLUMNS.iter().map(|(name, _)| *name).collect();
                Some(Bytes::from(format!("{}\r\n", names.join(","))))
            }
        }
    }

    /// `jobs` as a piece of the body.
    fn encode(self, jobs: &[wire::Job]) -> Result<Bytes, BoxError> {
        match self {
            Self::Ndjson => {
                let mut out = Vec::with_capacity(jobs.len() * 700);
                for job in jobs {
                    serde_json::to_writer(&mut out, job)?;
                    out.push(b'\n');
                }
                Ok(Bytes::from(out))
            }
            Self::Csv => {
                let mut out = String::with_capacity(jobs.len() * 400);
                for job in jobs {
                    csv_row(&mut out, job);
                }
                Ok(Bytes::from(out))
            }
        }
    }
}

/// Writes one cell of a job.
type Cell = fn(&wire::Job, &mut String);

/// The CSV export's columns: every field of a listing item, named and ordered as the listing's JSON
/// names them; values as the listing gives them (times RFC 3339 UTC, an absent field an empty cell).
pub const CSV_COLUMNS: [(&str, Cell); 39] = [
    ("job_id", |job, out| text(out, &job.job_id)),
    ("job_id_raw", |job, out| number(out, job.job_id_raw)),
    ("array_job_id", |job, out| optional(out, job.array_job_id)),
    ("array_task_id", |job, out| optional(out, job.array_task_id)),
    ("het_job_id", |job, out| optional(out, job.het_job_id)),
    ("het_job_offset", |job, out| optional(out, job.het_job_offset)),
    ("cluster", |job, out| text(out, &job.cluster)),
    ("job_name", |job, out| text(out, &job.job_name)),
    ("user", |job, out| text(out, &job.user)),
    ("uid", |job, out| number(out, job.uid)),
    ("gid", |job, out| number(out, job.gid)),
    ("account", |job, out| text(out, &job.account)),
    ("partition", |job, out| text(out, &job.partition)),
    ("qos", |job, out| text(out, &job.qos)),
    ("state", |job, out| text(out, &job.state)),
    ("cancelled_by_uid", |job, out| optional(out, job.cancelled_by_uid)),
    ("exit_code", |job, out| text(out, &job.exit_code)),
    ("derived_exit_code", |job, out| text(out, &job.derived_exit_code)),
    ("submit", |job, out| time(out, Some(job.submit))),
    ("eligible", |job, out| time(out, job.eligible)),
    ("start", |job, out| time(out, job.start)),
    ("end", |job, out| time(out, job.end)),
    ("elapsed", |job, out| text(out, &job.elapsed)),
    ("elapsed_raw", |job, out| number(out, job.elapsed_raw)),
    ("timelimit", |job, out| text(out, &job.timelimit)),
    ("timelimit_raw", |job, out| optional(out, job.timelimit_raw)),
    ("node_list", |job, out| text(out, &job.node_list)),
    ("alloc_nodes", |job, out| number(out, job.alloc_nodes)),
    ("alloc_cpus", |job, out| number(out, job.alloc_cpus)),
    ("alloc_gpus", |job, out| number(out, job.alloc_gpus)),
    ("alloc_tres", |job, out| text(out, &job.alloc_tres)),
    ("req_tres", |job, out| text(out, &job.req_tres)),
    ("req_mem", |job, out| text(out, &job.req_mem)),
    ("comment", |job, out| text(out, job.comment.as_deref().unwrap_or_default())),
    ("mean_gpu_util", |job, out| optional(out, job.mean_gpu_util)),
    ("mean_tensor_active", |job, out| optional(out, job.mean_tensor_active)),
    ("blame", |job, out| text(out, job.blame.map(wire::Blame::as_str).unwrap_or_default())),
    ("digest", |job, out| text(out, job.digest.map(wire::DigestState::as_str).unwrap_or_default())),
    ("tags", |job, out| text(out, &job.tags.join(","))),
];

fn text(out: &mut String, value: &str) {
    push_csv_field(out, value);
}

fn number(out: &mut String, value: impl std::fmt::Display) {
    use std::fmt::Write;
    // Writing into a String cannot fail.
    let _ = write!(out, "{value}");
}

fn optional(out: &mut String, value: Option<impl std::fmt::Display>) {
    if let Some(value) = value {
        number(out, value);
    }
}

/// As serde writes a `DateTime<Utc>` into the listing's JSON.
fn time(out: &mut String, value: Option<DateTime<Utc>>) {
    if let Some(value) = value {
        out.push_str(&value.to_rfc3339_opts(SecondsFormat::AutoSi, true));
    }
}

fn csv_row(out: &mut String, job: &wire::Job) {
    for (index, (_, cell)) in CSV_COLUMNS.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        cell(job, out);
    }
    out.push_str("\r\n");
}

/// The parameters `GET /api/v1/jobs/export` takes: the listing's without `limit` and `cursor`, and `format`.
fn export_parameters() -> Vec<&'static str> {
    LIST_PARAMETERS
        .iter()
        .copied()
        .filter(|name| !matches!(*name, "limit" | "cursor" | "sort" | "order" | "offset"))
        .chain(["format"])
        .collect()
}

/// `GET /api/v1/jobs/export`: every job of a window, as the listing's pages would hold them, streamed.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/export",
    tag = "jobs",
    operation_id = "export_jobs",
    summary = "Every job of a window, streamed as NDJSON or CSV",
    description = "The jobs `GET /api/v1/jobs` lists for the same parameters, all of them, in its order \
        (newest submission first), read from slurmdbd in batches of 5,000 and written as they arrive: \
        memory stays the same for any window. `ndjson`: one listing item per line, exactly as the listing \
        gives it. `csv`: a header line, then one column per listing field in the listing's order \
        (`job_id` … `digest`; times RFC 3339 UTC, an absent field an empty cell; a cell that a \
        spreadsheet would read as a formula starts with `'`). The viewer's scope, the window limit \
        (`[limits] window_days`) and the heavy-request limits are the listing's. An error before the \
        first byte is the error envelope; one after it (slurmdbd stops answering, or a batch's statement \
        reaches `[slurmdbd] statement_timeout_s`) aborts the connection, so the body ends short: a \
        complete NDJSON body ends with a newline, a complete CSV body with CRLF.",
    params(
        ("format" = Option<String>, Query, description = "`ndjson` (the default) or `csv`."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("start" = Option<String>, Query, description = "Window start, RFC 3339 or Unix seconds; default: `end` minus 24 h."),
        ("end" = Option<String>, Query, description = "Window end, RFC 3339 or Unix seconds; default: now."),
        ("user" = Option<String>, Query, description = "Comma-separated user names, as the listing takes them."),
        ("account" = Option<String>, Query, description = "Comma-separated accounts, as the listing takes them."),
        ("partition" = Option<String>, Query, description = "Comma-separated partitions, as the listing takes them."),
        ("state" = Option<String>, Query, description = "Comma-separated states as sacct or squeue names them (`FAILED,TIMEOUT`, `CD`, `OOM`)."),
        ("node" = Option<String>, Query, description = "Only jobs that ran on this node."),
        ("min_gpus" = Option<u32>, Query, description = "At least this many allocated GPUs."),
        ("max_gpus" = Option<u32>, Query, description = "At most this many allocated GPUs."),
        ("blame" = Option<String>, Query, description = "Comma-separated `infrastructure`, `application`, `unknown`: only jobs whose archived report says so."),
        ("q" = Option<String>, Query, description = "Search, as the listing's `q`."),
        ("tag" = Option<String>, Query, description = "Only jobs carrying this tag, as the listing's `tag`."),
    ),
    responses(
        (status = 200, description = "The window's jobs, streamed", content(
            (String = "application/x-ndjson"),
            (String = "text/csv"),
        )),
        (status = 400, description = "A parameter is unknown (`limit` and `cursor` are), repeated or malformed, or the window is wider than a viewer who is not staff may list (`[limits] window_days`) (`invalid_parameter`, naming it)", body = wire::ErrorEnvelope),
        (status = 429, description = "The token is over its request rate, or this person has `[limits] heavy_per_identity` heavy requests running (`rate_limited`)", body = wire::ErrorEnvelope,
            headers(("Retry-After" = u32, description = "Seconds until asking again"))),
        (status = 503, description = "slurmdbd's database does not answer (`source_unavailable`), or the server runs `[limits] heavy_total` heavy requests (`overloaded`, with Retry-After)", body = wire::ErrorEnvelope),
        (status = 504, description = "slurmdbd's database stopped the statement at its time limit before its first rows: narrow the window (`query_timeout`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn export(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    query: QueryPairs,
) -> Result<Response, ApiError> {
    let params = Params::new(pairs(query)?, &export_parameters())?;
    let format = Format::parse(params.text("format"))?;
    let query = jobs_query(&app, &params)?;
    let mut chunks = Box::pin(app.export_jobs(&viewer, &query).await?);
    // The first chunk is read before the status is sent, so that a statement that fails at once (a
    // timeout, slurmdbd down) is the error envelope rather than an empty body.
    let first = match chunks.next().await {
        Some(Ok(jobs)) => Some(jobs),
        Some(Err(error)) => return Err(error.into()),
        None => None,
    };
    let mut response = body(format, stream::iter(first.map(Ok)).chain(chunks)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    headers.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static(format.file_name()));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The body of `chunks` in `format`. An error after the first byte cannot be an envelope: the body errs,
/// and hyper aborts the connection instead of ending the body cleanly.
fn body(format: Format, chunks: impl Stream<Item = Result<Vec<wire::Job>, AppError>> + Send + 'static) -> Body {
    let jobs = chunks.map(move |chunk| match chunk {
        Ok(jobs) => format.encode(&jobs),
        Err(error) => {
            tracing::error!(%error, "job export failed mid-stream; the body ends short");
            Err(BoxError::from(error))
        }
    });
    Body::from_stream(stream::iter(format.header().map(Ok)).chain(jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_columns_are_the_listing_fields_in_order() {
        let job: wire::Job = serde_json::from_value(serde_json::json!({
            "job_id": "8+1", "job_id_raw": 9, "array_job_id": 0, "array_task_id": 1, "het_job_id": 8,
            "het_job_offset": 1, "cluster": "c", "job_name": "=x", "user": "alice", "uid": 1, "gid": 2,
            "account": "ml", "partition": "gpu", "qos": "normal", "state": "FAILED", "cancelled_by_uid": 3,
            "exit_code": "1:0", "derived_exit_code": "0:0", "submit": "2026-11-30T12:00:00Z",
            "eligible": "2026-11-30T12:00:01Z", "start": "2026-11-30T12:00:02Z", "end": "2026-11-30T13:00:00Z",
            "elapsed": "00:59:58", "elapsed_raw": 3598, "timelimit": "01:00:00", "timelimit_raw": 60,
            "node_list": "n[1-2]", "alloc_nodes": 2, "alloc_cpus": 4, "alloc_gpus": 8,
            "alloc_tres": "cpu=4,gres/gpu=8", "req_tres": "cpu=4", "req_mem": "1000M", "comment": "a,b",
            "mean_gpu_util": 42.5, "mean_tensor_active": 0.25, "blame": "application", "digest": "archived",
            "tags": ["ablation-3", "pytorch"]
        }))
        .expect("a job with every field");
        let json = serde_json::to_value(&job).expect("JSON");
        let mut keys: Vec<&str> = json.as_object().expect("an object").keys().map(String::as_str).collect();
        let mut names: Vec<&str> = CSV_COLUMNS.iter().map(|(name, _)| *name).collect();
        keys.sort_unstable();
        names.sort_unstable();
        assert_eq!(names, keys, "one column per field");
        let mut row = String::new();
        csv_row(&mut row, &job);
        assert_eq!(
            row,
            "8+1,9,0,1,8,1,c,'=x,alice,1,2,ml,gpu,normal,FAILED,3,1:0,0:0,2026-11-30T12:00:00Z,\
             2026-11-30T12:00:01Z,2026-11-30T12:00:02Z,2026-11-30T13:00:00Z,00:59:58,3598,01:00:00,60,\
             n[1-2],2,4,8,\"cpu=4,gres/gpu=8\",cpu=4,1000M,\"a,b\",42.5,0.25,application,archived,\"ablation-3,pytorch\"\r\n"
        );
    }

    /// The one fault no lab can cause on demand: slurmdbd failing between two batches.
    #[tokio::test]
    async fn an_error_after_the_first_rows_makes_the_body_fail() {
        let job: wire::Job = serde_json::from_value(serde_json::json!({
            "job_id": "1", "job_id_raw": 1, "cluster": "c", "job_name": "a", "user": "alice", "uid": 1, "gid": 1,
            "account": "ml", "partition": "gpu", "qos": "normal", "state": "COMPLETED", "exit_code": "0:0",
            "derived_exit_code": "0:0", "submit": "2026-11-30T12:00:00Z", "elapsed": "00:00:00", "elapsed_raw": 0,
            "timelimit": "01:00:00", "node_list": "n1", "alloc_nodes": 1, "alloc_cpus": 1, "alloc_gpus": 0,
            "alloc_tres": "cpu=1", "req_tres": "cpu=1", "req_mem": "1000M"
        }))
        .expect("a job");
        let whole = stream::iter([Ok(vec![job.clone()])]);
        let bytes = axum::body::to_bytes(body(Format::Ndjson, whole), usize::MAX).await.expect("a whole body");
        assert_eq!(bytes.iter().filter(|&&byte| byte == b'\n').count(), 1);
        let broken = stream::iter([Ok(vec![job]), Err(AppError::QueryTimeout("stopped".into()))]);
        assert!(axum::body::to_bytes(body(Format::Csv, broken), usize::MAX).await.is_err(), "the body errs");
    }

    #[test]
    fn unknown_formats_and_paging_are_refused() {
        assert!(matches!(Format::parse(Some("xlsx")), Err(ApiError::InvalidParameter { .. })));
        assert_eq!(Format::parse(None).ok(), Some(Format::Ndjson));
        assert!(!export_parameters().contains(&"limit") && !export_parameters().contains(&"cursor"));
    }
}
