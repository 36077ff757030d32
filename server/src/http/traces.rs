//! Trace summaries: `POST /api/v1/traces` (the node-side eBPF collectors' batches) and
//! `POST /api/v1/traces/nsys` (an `nsys stats --format csv` summary report), both authenticated with the
//! cluster's ingest secret like the plugin's records; `GET /api/v1/jobs/{job_id}/traces`, where a job's
//! traced GPU time went and the verdict, for viewers who may see the job.
//!
//! A batch is `{"cluster": "lab", "node": "n1", "records": [{"interval_start": "2026-01-02T03:04:00Z",
//! "interval_s": 10, "gpu": 0, "pid": 1234, "cgroup": "/slurm/uid_1001/job_7/step_0/task_0" | "job_id": 7,
//! "category": "kernel", "name": "…", "count": 10, "total_ns": 123, "max_ns": 45, "bytes": 0}, …]}`.
//! Records that fail validation are named in `rejected` (index and reason); the others are stored in
//! one transaction. A body that is not such a batch is a 400 and stores nothing.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::HttpState;
use super::error::ApiError;
use super::ingest::answer_authenticated;
use super::params::{Params, QueryPairs, pairs};
use crate::app::ingest::{MAX_TRACE_RECORDS, NsysReport, check_cluster_and_node};
use crate::app::{App, Viewer};
use crate::domain::trace::{MAX_GPU_INDEX, MAX_INTERVAL_S};

/// Largest body accepted: 1,000 records with long C++ kernel names, or an nsys report.
pub const MAX_TRACE_BODY_BYTES: usize = 16 << 20;

/// The envelope of a batch whose records did not all decode: each is decoded on its own so that one
/// bad record does not sink the others.
/// Each record stays the text it came as (no tree of values is built), decoded on its own below.
#[derive(serde::Deserialize)]
struct RawBatch<'a> {
    cluster: String,
    node: String,
    #[serde(borrow)]
    records: Vec<&'a serde_json::value::RawValue>,
}

async fn read_body(body: Body) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_TRACE_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_TRACE_BODY_BYTES} bytes")))
}

/// `POST /api/v1/traces`: 200 with `{stored, duplicates, rejected: [{index, reason}]}`.
#[utoipa::path(
    post,
    path = "/api/v1/traces",
    tag = "ingest",
    operation_id = "post_traces",
    summary = "A node's eBPF trace summaries",
    description = "Per interval, GPU and process: CUDA API calls, kernels, memory copies, NCCL collectives and \
        synchronisation, attributed to a job by `job_id` or cgroup path (v1, v2). Authenticated with the \
        cluster's ingest secret; `cluster` must be that cluster. Records that fail validation are named in \
        `rejected`, the others are stored in one transaction; a replayed batch stores nothing twice. \
        1 to 10,000 records, at most 16 MiB.",
    request_body(content = wire::TraceBatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The valid records stored; the others named", body = wire::TraceReceipt),
        (status = 400, description = "Not a trace batch, the wrong cluster or node, or too many records (`invalid_parameter`); nothing is stored", body = wire::ErrorEnvelope),
        (status = 401, description = "No ingest secret, or not one of any cluster (`unauthorized`)", body = wire::ErrorEnvelope,
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 503, description = "slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("ingest_secret" = [])),
)]
pub async fn post_traces(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    answer_authenticated(&state, &headers, async |sender| {
        let bytes = read_body(body).await?;
        let batch = super::body_count::off_runtime(move || decode_batch(&bytes)).await?;
        Ok(state.app().ingest_traces(&sender, (&batch.cluster, &batch.node), batch.records).await?)
    })
    .await
}

/// A batch's cluster, node and records. The records are counted on the wire first (a body of
/// millions of `{}` is refused before any is built); the common case then decodes in one pass; a batch
/// with an undecodable record is decoded again, record by record, to name each bad one.
pub(super) fn decode_batch(bytes: &[u8]) -> Result<DecodedBatch, ApiError> {
    if super::body_count::json_elements(bytes, &[&["records"]], MAX_TRACE_RECORDS).is_err() {
        return Err(ApiError::invalid(
            "records",
            format!("more than {MAX_TRACE_RECORDS} records: send at most {MAX_TRACE_RECORDS} per request"),
        ));
    }
    if let Ok(batch) = serde_json::from_slice::<wire::TraceBatch>(bytes) {
        let records = batch.records.into_iter().map(Ok).collect();
        return Ok(DecodedBatch { cluster: batch.cluster, node: batch.node, records });
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let batch: RawBatch = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_string() } else { path };
        ApiError::invalid(&field, format!("not a trace batch: {}", e.inner()))
    })?;
    deserializer.end().map_err(|e| ApiError::invalid("body", format!("text after the JSON document: {e}")))?;
    let records = batch
        .records
        .into_iter()
        .map(|raw| serde_json::from_str(raw.get()).map_err(|e| format!("not a trace record: {e}")))
        .collect();
    Ok(DecodedBatch { cluster: batch.cluster, node: batch.node, records })
}

/// A batch as decoded: each record, or why it did not decode.
pub(super) struct DecodedBatch {
    pub(super) cluster: String,
    pub(super) node: String,
    pub(super) records: Vec<Result<wire::TraceRecord, String>>,
}

/// `POST /api/v1/traces/nsys?cluster=&job_id=&node=[&gpu=&pid=&start=&duration_s=]`: the body is the
/// CSV of one `nsys stats --format csv` summary report. The report covers `duration_s` seconds from
/// `start` (default: the job's start and, for a finished job, its elapsed time in slurmdbd).
#[utoipa::path(
    post,
    path = "/api/v1/traces/nsys",
    tag = "ingest",
    operation_id = "post_nsys",
    summary = "An `nsys stats` summary report of one job",
    description = "The body is the CSV of one `nsys stats --format csv` report (`cuda_api_sum`, \
        `cuda_gpu_kern_sum`, `cuda_gpu_mem_time_sum`, `nvtx_sum`), stored as one interval of `duration_s` \
        seconds from `start` (default: the job's start and, for an ended job, its elapsed time). \
        Authenticated with the cluster's ingest secret.",
    params(
        ("cluster" = String, Query, description = "The cluster the ingest secret belongs to."),
        ("job_id" = u32, Query, minimum = 1, description = "The job's numeric id."),
        ("node" = String, Query, description = "The node as Slurm names it."),
        ("gpu" = Option<u16>, Query, description = "Slurm's GPU index on the node; default 0."),
        ("pid" = Option<u32>, Query, description = "The profiled process; default 0."),
        ("start" = Option<String>, Query, description = "Start of the profiled span, RFC 3339 or Unix seconds; default: the job's start."),
        ("duration_s" = Option<u32>, Query, minimum = 1, description = "Length of the profiled span in seconds; default: the ended job's elapsed time."),
    ),
    request_body(content = String, description = "`nsys stats --format csv` output", content_type = "text/csv"),
    responses(
        (status = 200, description = "The valid rows stored; the others named", body = wire::TraceReceipt),
        (status = 400, description = "A bad parameter, an unknown or unstarted job, or not an nsys CSV (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "No ingest secret, or not one of any cluster (`unauthorized`)", body = wire::ErrorEnvelope,
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 503, description = "slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("ingest_secret" = [])),
)]
pub async fn post_nsys(State(state): State<HttpState>, headers: HeaderMap, query: QueryPairs, body: Body) -> Response {
    answer_authenticated(&state, &headers, async |sender| {
        let params = Params::new(pairs(query)?, &["cluster", "job_id", "node", "gpu", "pid", "start", "duration_s"])?;
        let node = params.text("node").ok_or_else(|| ApiError::invalid("node", "send node="))?;
        check_cluster_and_node(&sender, params.text("cluster").unwrap_or_default(), node)?;
        let report = nsys_report(&params, node)?;
        Ok(state.app().ingest_nsys(&sender.cluster, &report, &read_body(body).await?).await?)
    })
    .await
}

/// What an nsys report's query string says about it.
fn nsys_report(params: &Params, node: &str) -> Result<NsysReport, ApiError> {
    let job_id = params
        .number("job_id", 1, u64::from(u32::MAX))?
        .ok_or_else(|| ApiError::invalid("job_id", "send job_id="))? as u32;
    nsys_span(params, node, job_id)
}

/// The node, GPU, process and span of an nsys report, from its query string.
fn nsys_span(params: &Params, node: &str, job_id: u32) -> Result<NsysReport, ApiError> {
    Ok(NsysReport {
        node: node.to_string(),
        job_id,
        gpu: params.number("gpu", 0, u64::from(MAX_GPU_INDEX))?.unwrap_or(0) as u16,
        pid: params.number("pid", 0, u64::from(u32::MAX))?.unwrap_or(0) as u32,
        start: params.time("start")?,
        duration_s: params.number("duration_s", 1, u64::from(MAX_INTERVAL_S))?.map(|d| d as u32),
    })
}

/// `POST /api/v1/jobs/{job_id}/traces/nsys?cluster=&node=[&gpu=&pid=&start=&duration_s=]`: an nsys report
/// a person (signed in, or with a personal token) uploads for a job they may see; the body as for
/// `POST /api/v1/traces/nsys`.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{job_id}/traces/nsys",
    tag = "jobs",
    operation_id = "post_job_nsys",
    summary = "Upload an `nsys stats` summary report of your job",
    description = "The body is the CSV of one `nsys stats --format csv` report (`cuda_api_sum`, \
        `cuda_gpu_kern_sum`, `cuda_gpu_mem_time_sum`, `nvtx_sum`), stored as one interval of `duration_s` \
        seconds from `start` (default: the job's start and, for an ended job, its elapsed time) on `node`, \
        which must be one of the job's nodes. For people: signed in through the site, or with a personal \
        token (from a batch script: the one write a token may make), into a job they may see (their own, their accounts' as coordinator, any as staff); a \
        job they may not see is a 404, like a missing one. The cluster's ingest secret is not needed and \
        must not be handed to users.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
        ("node" = String, Query, description = "The node the report was taken on: one of the job's nodes."),
        ("gpu" = Option<u16>, Query, description = "Slurm's GPU index on the node; default 0."),
        ("pid" = Option<u32>, Query, description = "The profiled process; default 0."),
        ("start" = Option<String>, Query, description = "Start of the profiled span, RFC 3339 or Unix seconds; default: the job's start."),
        ("duration_s" = Option<u32>, Query, minimum = 1, description = "Length of the profiled span in seconds; default: the ended job's elapsed time."),
    ),
    request_body(content = String, description = "`nsys stats --format csv` output", content_type = "text/csv"),
    responses(
        (status = 200, description = "The valid rows stored; the others named", body = wire::TraceReceipt),
        (status = 400, description = "A bad parameter, a node not of the job, or not an nsys CSV (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 401, description = "Not signed in (`unauthorized`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the uploader may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn post_job_nsys(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
    body: Body,
) -> Result<Json<wire::TraceReceipt>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "node", "gpu", "pid", "start", "duration_s"])?;
    let node = params.text("node").ok_or_else(|| ApiError::invalid("node", "send node="))?;
    // The job's own id replaces this placeholder once the job is found.
    let report = nsys_span(&params, node, 0)?;
    let csv = read_body(body).await?;
    Ok(Json(app.ingest_viewer_nsys(&viewer, params.text("cluster"), &job_id, report, &csv).await?))
}

/// `GET /api/v1/jobs/{job_id}/traces?cluster=`: where the job's traced GPU time went.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/traces",
    tag = "jobs",
    operation_id = "job_traces",
    summary = "Where the job's traced GPU time went",
    description = "Shares of compute, NCCL, memory copies, synchronisation and idle per GPU and for the whole \
        job, the top kernels and collectives, and a bottleneck verdict with evidence. A job the viewer may \
        not see is a 404, like a missing one.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The breakdown (empty without trace summaries)", body = wire::JobTraces),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn job_traces(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobTraces>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.job_traces(&viewer, params.text("cluster"), &job_id).await?))
}
