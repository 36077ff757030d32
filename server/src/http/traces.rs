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

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Body;
use axum::extract::Path;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use slurmlens_wire as wire;

use super::AppStateExtractor;
use super::error::ApiError;
use super::ingest::{answer_authenticated, is_node_name};
use super::params::{Params, QueryPairs, pairs};
use crate::domain::cluster::ClusterName;
use crate::domain::ids::JobSelector;
use crate::domain::scope::ViewerScope;
use crate::domain::trace::{RawTraceSummary, TraceSummary, parse_nsys_csv};

/// Largest body accepted: 1,000 records with long C++ kernel names, or an nsys report.
pub const MAX_TRACE_BODY_BYTES: usize = 16 << 20;
/// Most records in one batch.
pub const MAX_TRACE_RECORDS: usize = 10_000;

/// The envelope of a batch whose records did not all decode: each is decoded on its own so that one
/// bad record does not sink the others.
#[derive(serde::Deserialize)]
struct RawBatch {
    cluster: String,
    node: String,
    records: Vec<serde_json::Value>,
}

async fn read_body(body: Body) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_TRACE_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_TRACE_BODY_BYTES} bytes")))
}

fn check_cluster_and_node(cluster: &ClusterName, claimed: &str, node: &str) -> Result<(), ApiError> {
    if claimed != cluster.as_str() {
        return Err(ApiError::invalid(
            "cluster",
            format!("`{claimed}` is not the cluster this secret belongs to (`{cluster}`)"),
        ));
    }
    if !is_node_name(node) {
        return Err(ApiError::invalid("node", format!("`{node}` is not a Slurm node name")));
    }
    Ok(())
}

/// A received record's fields, borrowed, for validation.
pub fn raw_summary(record: &wire::TraceRecord) -> RawTraceSummary<'_> {
    RawTraceSummary {
        job_id: record.job_id,
        cgroup: record.cgroup.as_deref(),
        gpu: record.gpu,
        pid: record.pid,
        interval_start: record.interval_start,
        interval_s: record.interval_s,
        category: &record.category,
        name: &record.name,
        count: record.count,
        total_ns: record.total_ns,
        max_ns: record.max_ns,
        bytes: record.bytes,
    }
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
pub async fn post_traces(state: AppStateExtractor, headers: HeaderMap, body: Body) -> Response {
    answer_authenticated(&state, &headers, async |cluster| ingest_batch(&state, &cluster, body).await).await
}

async fn ingest_batch(
    state: &AppStateExtractor,
    cluster: &ClusterName,
    body: Body,
) -> Result<wire::TraceReceipt, ApiError> {
    let bytes = read_body(body).await?;
    // The common case decodes in one pass; a batch with an undecodable record is decoded again,
    // record by record, to name each bad one.
    let (node, records): (String, Vec<Result<wire::TraceRecord, String>>) = match serde_json::from_slice::<
        wire::TraceBatch,
    >(&bytes)
    {
        Ok(batch) => {
            check_cluster_and_node(cluster, &batch.cluster, &batch.node)?;
            (batch.node, batch.records.into_iter().map(Ok).collect())
        }
        Err(_) => {
            let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
            let batch: RawBatch = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
                let path = e.path().to_string();
                let field = if path == "." { "body".to_string() } else { path };
                ApiError::invalid(&field, format!("not a trace batch: {}", e.inner()))
            })?;
            deserializer.end().map_err(|e| ApiError::invalid("body", format!("text after the JSON document: {e}")))?;
            check_cluster_and_node(cluster, &batch.cluster, &batch.node)?;
            let records = batch
                .records
                .into_iter()
                .map(|value| serde_json::from_value(value).map_err(|e| format!("not a trace record: {e}")))
                .collect();
            (batch.node, records)
        }
    };
    if records.is_empty() || records.len() > MAX_TRACE_RECORDS {
        return Err(ApiError::invalid("records", format!("send 1 to {MAX_TRACE_RECORDS} records")));
    }
    let (summaries, rejected) = validate_records(records, Utc::now());
    store_summaries(state, cluster, &node, summaries, rejected).await
}

/// Validates each received record (or the reason it did not decode) at `now`: the summaries to store,
/// and each refused record's index and reason. The OTLP logs path validates through here too.
pub(crate) fn validate_records(
    records: Vec<Result<wire::TraceRecord, String>>,
    now: DateTime<Utc>,
) -> (Vec<TraceSummary>, Vec<wire::TraceRejection>) {
    let mut summaries = Vec::with_capacity(records.len());
    let mut rejected = Vec::new();
    for (index, record) in records.into_iter().enumerate() {
        let parsed = record.and_then(|record: wire::TraceRecord| TraceSummary::parse(&raw_summary(&record), now));
        match parsed {
            Ok(summary) => summaries.push(summary),
            Err(reason) => rejected.push(wire::TraceRejection { index: index as u64, reason }),
        }
    }
    (summaries, rejected)
}

/// Stores one node's validated summaries in one transaction: the receipt of a batch.
pub(crate) async fn store_summaries(
    state: &AppStateExtractor,
    cluster: &ClusterName,
    node: &str,
    summaries: Vec<TraceSummary>,
    rejected: Vec<wire::TraceRejection>,
) -> Result<wire::TraceReceipt, ApiError> {
    let valid = summaries.len() as u64;
    let stored =
        if summaries.is_empty() { 0 } else { state.store()?.insert_trace_summaries(cluster, node, &summaries).await? };
    Ok(wire::TraceReceipt { stored, duplicates: valid.saturating_sub(stored), rejected })
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
pub async fn post_nsys(state: AppStateExtractor, headers: HeaderMap, query: QueryPairs, body: Body) -> Response {
    answer_authenticated(&state, &headers, async |cluster| ingest_nsys(&state, &cluster, query, body).await).await
}

async fn ingest_nsys(
    state: &AppStateExtractor,
    cluster: &ClusterName,
    query: QueryPairs,
    body: Body,
) -> Result<wire::TraceReceipt, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster", "job_id", "node", "gpu", "pid", "start", "duration_s"])?;
    let node = params.text("node").ok_or_else(|| ApiError::invalid("node", "send node="))?;
    check_cluster_and_node(cluster, params.text("cluster").unwrap_or_default(), node)?;
    let job_id = params
        .number("job_id", 1, u64::from(u32::MAX))?
        .ok_or_else(|| ApiError::invalid("job_id", "send job_id="))? as u32;
    let gpu = params.number("gpu", 0, u64::from(crate::domain::trace::MAX_GPU_INDEX))?.unwrap_or(0) as u16;
    let pid = params.number("pid", 0, u64::from(u32::MAX))?.unwrap_or(0) as u32;
    let max_interval = u64::from(crate::domain::trace::MAX_INTERVAL_S);
    let (start, duration_s) = match (params.time("start")?, params.number("duration_s", 1, max_interval)?) {
        (Some(start), Some(duration_s)) => (start, duration_s as u32),
        (start, duration_s) => {
            let (job_start, job_elapsed) = job_span(state, cluster, job_id).await?;
            let duration_s = match duration_s.map(|d| d as u32).or(job_elapsed) {
                Some(duration_s) => duration_s,
                None => return Err(ApiError::invalid("duration_s", "the job has not ended: send duration_s=")),
            };
            (start.unwrap_or(job_start), duration_s)
        }
    };
    let start = start.duration_trunc(TimeDelta::seconds(1)).unwrap_or(start);
    let bytes = read_body(body).await?;
    let text = std::str::from_utf8(&bytes).map_err(|_| ApiError::invalid("body", "the CSV is not UTF-8"))?;
    let (_report, rows) = parse_nsys_csv(text).map_err(|e| ApiError::invalid("body", e))?;
    let now = Utc::now();
    let mut merged: BTreeMap<(String, String), TraceSummary> = BTreeMap::new();
    let mut rejected = Vec::new();
    for (index, row) in rows.into_iter().enumerate() {
        let summary = row.and_then(|row| {
            TraceSummary::parse(
                &RawTraceSummary {
                    job_id: Some(job_id),
                    cgroup: None,
                    gpu,
                    pid,
                    interval_start: start,
                    interval_s: duration_s,
                    category: row.category.as_str(),
                    name: &row.name,
                    count: row.count,
                    total_ns: row.total_ns,
                    max_ns: row.max_ns,
                    bytes: 0,
                },
                now,
            )
        });
        match summary {
            // nsys lists an NCCL operation once per kernel variant (algorithm, protocol, type).
            Ok(summary) => match merged.entry((summary.category.as_str().to_string(), summary.name.to_string())) {
                std::collections::btree_map::Entry::Occupied(mut entry) => entry.get_mut().absorb(&summary),
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(summary);
                }
            },
            Err(reason) => rejected.push(wire::TraceRejection { index: index as u64, reason }),
        }
    }
    store_summaries(state, cluster, node, merged.into_values().collect(), rejected).await
}

/// The job's start and, once it ended, its elapsed seconds, as slurmdbd recorded them. The ingest
/// secret speaks for the whole cluster, so the lookup is not limited to a viewer.
async fn job_span(
    state: &AppStateExtractor,
    cluster: &ClusterName,
    job_id: u32,
) -> Result<(DateTime<Utc>, Option<u32>), ApiError> {
    let reader = state.slurmdbd(Some(cluster.as_str()))?;
    let selector: JobSelector = job_id
        .to_string()
        .parse()
        .map_err(|e: crate::domain::ids::BadJobId| ApiError::invalid("job_id", e.to_string()))?;
    let missing = || ApiError::invalid("start", format!("job {job_id} has not started in slurmdbd: send start="));
    let Some((record, _steps)) = reader.job(&ViewerScope::Staff, selector).await? else {
        return Err(missing());
    };
    let start = crate::domain::time::epoch(record.time_start).ok_or_else(missing)?;
    let elapsed = (record.time_end > record.time_start)
        .then(|| u32::try_from(record.time_end - record.time_start).unwrap_or(u32::MAX));
    Ok((start, elapsed))
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
    state: AppStateExtractor,
    headers: HeaderMap,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobTraces>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    let reader = state.slurmdbd(params.text("cluster"))?;
    let (record, _steps) = state.visible_job(&headers, reader, &job_id).await?;
    Ok(Json(crate::traces::job_traces(state.store()?, reader.cluster(), record.identity.id_job).await?))
}
