//! OTLP/HTTP logs in: the same trace summaries and GPU records sent as OTLP logs (protobuf and
//! JSON, gzip, and through the OpenTelemetry JS SDK's stock exporters) store exactly the rows the JSON
//! endpoints store, name the same refused record, store nothing twice on replay, and nothing at all
//! without the cluster's secret or from a body that is not OTLP.

use std::io::Write;

use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use slurmlens_wire::{
    AllocatedGpu, ErrorEnvelope, GpuAllocationBatch, GpuAllocationEvent, GpuAllocationRecord, JobGpus, JobTraces,
    TraceBatch, TraceReceipt, TraceRecord,
};

use crate::support::{TestApp, database_shared, lab, repo_root};

pub(crate) const SECRET: &str = "otlp-test-secret-0123456789";
const LOGS: &str = "/api/v1/otlp/v1/logs";

async fn app_with_database(name: &str) -> (TestApp, sqlx::MySqlPool) {
    crate::support::ingest_app(name, SECRET).await
}

/// Every stored trace summary and GPU record, one line each, sorted: what "lands alike" compares.
pub(crate) async fn stored(pool: &sqlx::MySqlPool) -> (Vec<String>, Vec<String>) {
    let traces = sqlx::query_scalar(
        "SELECT CAST(CONCAT_WS('|', s.cluster, s.job_id, s.node, s.gpu, s.pid, s.interval_start, s.interval_s, \
         s.category, n.name, s.count, s.total_ns, s.max_ns, s.bytes) AS CHAR) \
         FROM trace_summaries s JOIN trace_names n USING (name_hash) ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .expect("trace rows");
    let gpus = sqlx::query_scalar(
        "SELECT CAST(CONCAT_WS('|', cluster, job_id, step, node, gpu_index, COALESCE(gpu_uuid, '-'), \
         COALESCE(cgroup_path, '-'), first_seen, last_seen, COALESCE(ended_at, '-')) AS CHAR) \
         FROM gpu_allocations ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .expect("GPU rows");
    (traces, gpus)
}

fn time(text: &str) -> DateTime<Utc> {
    text.parse().expect("an RFC 3339 time")
}

/// The records both paths receive: two nodes' trace summaries (one refused: max above total) and GPU
/// records of a job's start on two nodes and its end.
pub(crate) struct Records {
    pub(crate) traces: Vec<TraceBatch>,
    pub(crate) gpu_allocations: Vec<GpuAllocationRecord>,
}

/// The records of job `job_id`, dated around `base` (its start: records are read within its run).
pub(crate) fn records(job_id: u32, base: DateTime<Utc>) -> Records {
    let after = |ms: i64| base + chrono::Duration::milliseconds(ms);
    let trace =
        |gpu: u16, category: &str, name: &str, count: u64, total_ns: u64, max_ns: u64, bytes: u64| TraceRecord {
            interval_start: base,
            interval_s: 10,
            gpu,
            pid: 4242,
            cgroup: None,
            job_id: Some(job_id),
            category: category.into(),
            name: name.into(),
            count,
            total_ns,
            max_ns,
            bytes,
        };
    let by_cgroup = TraceRecord {
        cgroup: Some(format!("/slurm/uid_1001/job_{job_id}/step_0/task_0")),
        job_id: None,
        ..trace(0, "nccl", "ncclAllReduce", 2, 3_000_000_000, 2_000_000_000, 4_000_000)
    };
    let n1 = vec![
        trace(0, "kernel", "ampere_sgemm_128x64_nn", 100, 2_500_000_000, 30_000_000, 0),
        by_cgroup,
        trace(0, "memcpy", "H2D", 4, 4000, 1500, 4_000_000),
        trace(0, "sync", "cudaStreamSynchronize", 3, 300, 200, 0),
        // Refused by both paths: the longest call is longer than all calls together.
        trace(0, "kernel", "k", 1, 10, 20, 0),
    ];
    let n2 = vec![trace(1, "kernel", "ampere_sgemm_128x64_nn", 50, 1_000_000_000, 25_000_000, 0)];
    let gpu_record = |node: &str, event, at: DateTime<Utc>, gpus: Vec<AllocatedGpu>| GpuAllocationRecord {
        cluster: "lab".into(),
        node: node.into(),
        job_id,
        step: "job".into(),
        event,
        at,
        gpus,
        cgroup_path: Some(format!("/slurm/uid_1001/job_{job_id}")),
    };
    let uuid = "GPU-5c3d9f2e-8a1b-4c6d-9e0f-123456789abc";
    Records {
        traces: vec![
            TraceBatch { cluster: "lab".into(), node: "n1".into(), records: n1 },
            TraceBatch { cluster: "lab".into(), node: "n2".into(), records: n2 },
        ],
        gpu_allocations: vec![
            gpu_record(
                "n1",
                GpuAllocationEvent::Start,
                after(-9_750),
                vec![AllocatedGpu { index: 0, uuid: Some(uuid.into()) }, AllocatedGpu { index: 1, uuid: None }],
            ),
            gpu_record("n2", GpuAllocationEvent::Start, after(-9_000), vec![AllocatedGpu { index: 1, uuid: None }]),
            // The end closes every row of the job stored by then, so it comes from the node whose
            // records are sent last (the SDK test sends one request per node, in node order).
            gpu_record("n2", GpuAllocationEvent::End, after(5_125), vec![AllocatedGpu { index: 1, uuid: None }]),
        ],
    }
}

/// The JSON endpoints' answer to `records`: what every OTLP path is compared with.
pub(crate) async fn send_json_batches(app: &TestApp, records: &Records) {
    for batch in &records.traces {
        let response = app
            .client
            .post(format!("{}/api/v1/traces", app.base_url))
            .bearer_auth(SECRET)
            .json(batch)
            .send()
            .await
            .expect("request reaches the server");
        assert_eq!(response.status(), 200);
        let receipt: TraceReceipt = response.json().await.expect("receipt");
        let refused = if batch.node == "n1" { 1 } else { 0 };
        assert_eq!(receipt.rejected.len(), refused, "{receipt:?}");
    }
    let response = app
        .client
        .post(format!("{}/api/v1/gpu_allocations", app.base_url))
        .bearer_auth(SECRET)
        .json(&GpuAllocationBatch { records: records.gpu_allocations.clone() })
        .send()
        .await
        .expect("request reaches the server");
    assert_eq!(response.status(), 200);
}

fn pair(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

fn int(key: &str, value: impl TryInto<i64>) -> KeyValue {
    pair(key, Value::IntValue(value.try_into().unwrap_or_else(|_| panic!("{key} fits an int64"))))
}

fn text(key: &str, value: &str) -> KeyValue {
    pair(key, Value::StringValue(value.into()))
}

fn nanos(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_nanos_opt().expect("a time in range")).expect("after 1970")
}

/// `records` as docs/OTLP.md maps them: one resource per node, one log record per record, and a plain
/// log line the server must ignore.
pub(crate) fn otlp_request(records: &Records) -> ExportLogsServiceRequest {
    let mut by_node: std::collections::BTreeMap<String, Vec<LogRecord>> = Default::default();
    for batch in &records.traces {
        for record in &batch.records {
            let mut attributes = vec![
                int("process.pid", record.pid),
                int("slurmlens.trace.gpu", record.gpu),
                int("slurmlens.trace.interval_s", record.interval_s),
                text("slurmlens.trace.category", &record.category),
                text("slurmlens.trace.name", &record.name),
                int("slurmlens.trace.count", record.count),
                int("slurmlens.trace.total_ns", record.total_ns),
                int("slurmlens.trace.max_ns", record.max_ns),
            ];
            if let Some(job_id) = record.job_id {
                attributes.push(int("slurm.job.id", job_id));
            }
            if let Some(cgroup) = &record.cgroup {
                attributes.push(text("slurmlens.trace.cgroup", cgroup));
            }
            if record.bytes != 0 {
                attributes.push(int("slurmlens.trace.bytes", record.bytes));
            }
            by_node.entry(batch.node.clone()).or_default().push(LogRecord {
                time_unix_nano: nanos(record.interval_start),
                event_name: "slurmlens.trace_summary".into(),
                attributes,
                ..Default::default()
            });
        }
    }
    for record in &records.gpu_allocations {
        let array = |values: Vec<Value>| {
            Value::ArrayValue(ArrayValue {
                values: values.into_iter().map(|value| AnyValue { value: Some(value) }).collect(),
            })
        };
        let mut attributes = vec![
            int("slurm.job.id", record.job_id),
            text("slurmlens.gpu_allocation.step", &record.step),
            text(
                "slurmlens.gpu_allocation.event",
                if record.event == GpuAllocationEvent::End { "end" } else { "start" },
            ),
            pair(
                "slurmlens.gpu_allocation.gpus",
                array(record.gpus.iter().map(|gpu| Value::IntValue(i64::from(gpu.index))).collect()),
            ),
            pair(
                "slurmlens.gpu_allocation.gpu_uuids",
                array(record.gpus.iter().map(|gpu| Value::StringValue(gpu.uuid.clone().unwrap_or_default())).collect()),
            ),
        ];
        if let Some(path) = &record.cgroup_path {
            attributes.push(text("slurmlens.gpu_allocation.cgroup_path", path));
        }
        // Older SDKs carry the kind as an attribute rather than in the eventName field.
        attributes.push(text("event.name", "slurmlens.gpu_allocation"));
        by_node.entry(record.node.clone()).or_default().push(LogRecord {
            time_unix_nano: nanos(record.at),
            attributes,
            ..Default::default()
        });
    }
    let plain_at = records.traces[0].records[0].interval_start + chrono::Duration::seconds(5);
    if let Some(records) = by_node.values_mut().next() {
        records.push(LogRecord {
            time_unix_nano: nanos(plain_at),
            body: Some(AnyValue { value: Some(Value::StringValue("slurmd: plain log line".into())) }),
            ..Default::default()
        });
    }
    ExportLogsServiceRequest {
        resource_logs: by_node
            .into_iter()
            .map(|(node, log_records)| ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![text("host.name", &node), text("slurm.cluster", "lab")],
                    ..Default::default()
                }),
                scope_logs: vec![ScopeLogs { log_records, ..Default::default() }],
                ..Default::default()
            })
            .collect(),
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip in memory");
    encoder.finish().expect("gzip in memory")
}

async fn post_otlp(
    app: &TestApp,
    content_type: &str,
    gzipped: bool,
    body: Vec<u8>,
    secret: Option<&str>,
) -> reqwest::Response {
    let mut request = app.client.post(format!("{}{LOGS}", app.base_url)).header("content-type", content_type);
    if let Some(secret) = secret {
        request = request.bearer_auth(secret);
    }
    let body = if gzipped {
        request = request.header("content-encoding", "gzip");
        gzip(&body)
    } else {
        body
    };
    request.body(body).send().await.expect("request reaches the server")
}

pub(crate) async fn views(app: &TestApp, job_id: u32) -> (JobTraces, JobGpus) {
    let traces = app.get(&format!("/api/v1/jobs/{job_id}/traces?cluster=lab")).await;
    assert_eq!(traces.status(), 200);
    let gpus = app.get(&format!("/api/v1/jobs/{job_id}/gpus?cluster=lab")).await;
    assert_eq!(gpus.status(), 200);
    (traces.json().await.expect("breakdown"), gpus.json().await.expect("GPU records"))
}

#[tokio::test(flavor = "multi_thread")]
async fn otlp_logs_land_exactly_like_the_json_batches_and_a_replay_stores_nothing() {
    let _db = database_shared().await;
    let job_id = crate::support::finished_lab_job().await;
    let records = records(job_id, crate::support::lab_job_start(job_id).await);
    let (json_app, json_pool) = app_with_database("otlp_baseline").await;
    send_json_batches(&json_app, &records).await;
    let baseline = stored(&json_pool).await;
    assert_eq!((baseline.0.len(), baseline.1.len()), (5, 3), "{baseline:?}");

    let (app, pool) = app_with_database("otlp_rust").await;
    let request = otlp_request(&records);

    // OTLP/JSON in, OTLP/JSON out: int64 as strings, one refused record named, the plain line counted.
    let json = serde_json::to_vec(&request).expect("OTLP/JSON");
    assert!(String::from_utf8_lossy(&json).contains(r#""intValue":"4242""#), "int64 as decimal strings");
    let response = post_otlp(&app, "application/json", false, json, Some(SECRET)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: serde_json::Value = response.json().await.expect("ExportLogsServiceResponse in JSON");
    assert_eq!(answer["partialSuccess"]["rejectedLogRecords"], "1", "{answer}");
    let message = answer["partialSuccess"]["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "resourceLogs[0].scopeLogs[0].logRecords[4]: slurmlens.trace.max_ns: 20 is more than total_ns 10"
        ),
        "{message}"
    );
    assert!(message.contains("ignored 1 log records"), "{message}");
    assert_eq!(stored(&pool).await, baseline, "OTLP/JSON stores exactly what the JSON batches stored");
    assert_eq!(views(&app, job_id).await, views(&json_app, job_id).await, "the API shows the same");

    // The same records again, as gzipped protobuf: nothing new, the same refusal, a protobuf answer.
    let response = post_otlp(&app, "application/x-protobuf", true, request.encode_to_vec(), Some(SECRET)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-protobuf");
    let answer = ExportLogsServiceResponse::decode(response.bytes().await.expect("a body")).expect("protobuf");
    assert_eq!(answer.partial_success.map(|partial| partial.rejected_log_records), Some(1));
    assert_eq!(stored(&pool).await, baseline, "a replay stores nothing twice");
    json_pool.close().await;
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn otlp_logs_without_the_secret_or_with_a_bad_body_store_nothing() {
    let _db = database_shared().await;
    let (app, pool) = app_with_database("otlp_refused").await;
    let body = otlp_request(&records(7, time("2026-01-02T03:04:00Z"))).encode_to_vec();
    for secret in [None, Some("not-the-secret-0123456789")] {
        let response = post_otlp(&app, "application/x-protobuf", false, body.clone(), secret).await;
        assert_eq!(response.status(), 401, "{secret:?}");
        assert_eq!(response.headers().get("www-authenticate").map(|v| v.as_bytes()), Some(&b"Bearer"[..]));
    }
    for (what, content_type, gzipped, body, parameter) in [
        ("garbage protobuf", "application/x-protobuf", false, b"\xff\xff\xff\xffnot protobuf".to_vec(), "body"),
        ("garbage JSON", "application/json", false, b"resourceLogs: yes".to_vec(), "body"),
        ("JSON of the wrong shape", "application/json", false, br#"{"resourceLogs": {"a": 1}}"#.to_vec(), "body"),
        ("protobuf labelled JSON", "application/json", false, body.clone(), "body"),
        ("a content type that is not OTLP's", "text/plain", false, body.clone(), "Content-Type"),
        ("no content type", "", false, body.clone(), "Content-Type"),
    ] {
        let response = post_otlp(&app, content_type, gzipped, body, Some(SECRET)).await;
        assert_eq!(response.status(), 400, "{what}");
        let envelope: ErrorEnvelope = response.json().await.expect("the error envelope");
        assert_eq!(envelope.error.parameter.as_deref(), Some(parameter), "{what}: {}", envelope.error.message);
    }
    let response = app
        .client
        .post(format!("{}{LOGS}", app.base_url))
        .bearer_auth(SECRET)
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "gzip")
        .body(body.clone())
        .send()
        .await
        .expect("request reaches the server");
    assert_eq!(response.status(), 400, "a body that is not gzip");
    let response = app
        .client
        .post(format!("{}{LOGS}", app.base_url))
        .bearer_auth(SECRET)
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "br")
        .body(body.clone())
        .send()
        .await
        .expect("request reaches the server");
    assert_eq!(response.status(), 400, "an unsupported content encoding");
    assert_eq!(stored(&pool).await, (vec![], vec![]), "nothing is stored");
    pool.close().await;
}

/// Runs `e2e/otlp/send.mjs` (the OpenTelemetry JS SDK with its stock OTLP log exporters) against
/// `endpoint` (slurmlens's `<server>/api/v1/otlp`, or a collector's receiver), with `secret` if any; `None`
/// when its npm packages are not installed (`e2e/test.sh` installs them, and then requires this test).
pub(crate) async fn send_with_js_sdk(
    endpoint: &str,
    secret: Option<&str>,
    records: &Records,
    encoding: &str,
    gzipped: bool,
) -> Option<serde_json::Value> {
    let folder = repo_root().join("e2e/otlp");
    if !folder.join("node_modules/@opentelemetry/exporter-logs-otlp-proto").is_dir() {
        assert!(
            std::env::var_os("E2E_REQUIRE_OTLP_SDK").is_none(),
            "e2e/otlp/node_modules is missing: run `npm ci` in e2e/otlp"
        );
        eprintln!("skipped: the OpenTelemetry JS SDK is not installed (`npm ci` in e2e/otlp)");
        return None;
    }
    let input = serde_json::json!({
        "cluster": "lab",
        "traces": records.traces,
        "gpu_allocations": records.gpu_allocations,
        "plain_logs": 1,
    });
    // One file per call: this file's test and the collector's run at once in one process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = lab().dir.join(format!("otlp-records-{}-{call}-{encoding}.json", std::process::id()));
    std::fs::write(&file, input.to_string()).expect("writing the records file");
    let mut command = tokio::process::Command::new("node");
    command.arg(folder.join("send.mjs")).arg(endpoint).arg(secret.unwrap_or("-")).arg(&file).arg(encoding);
    if gzipped {
        command.arg("gzip");
    }
    let output = command.output().await.expect("running node");
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "send.mjs {encoding}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    Some(serde_json::from_str(stdout.trim()).expect("send.mjs prints its summary"))
}

#[tokio::test(flavor = "multi_thread")]
async fn otlp_export_from_the_opentelemetry_js_sdk_lands_exactly_like_the_json_batch() {
    let _db = database_shared().await;
    let job_id = crate::support::finished_lab_job().await;
    let records = records(job_id, crate::support::lab_job_start(job_id).await);
    let (json_app, json_pool) = app_with_database("otlp_sdk_baseline").await;
    send_json_batches(&json_app, &records).await;
    let baseline = stored(&json_pool).await;
    for (encoding, gzipped) in [("json", false), ("protobuf", true)] {
        let (app, pool) = app_with_database(&format!("otlp_sdk_{encoding}")).await;
        let endpoint = format!("{}/api/v1/otlp", app.base_url);
        let Some(summary) = send_with_js_sdk(&endpoint, Some(SECRET), &records, encoding, gzipped).await else {
            return;
        };
        assert_eq!(stored(&pool).await, baseline, "the SDK's {encoding} export stores what the JSON batches stored");
        assert_eq!(views(&app, job_id).await, views(&json_app, job_id).await, "{encoding}: the API shows the same");
        // The exporter logs OTLP's partial success: the refused record, by its attribute.
        let warnings = summary["warnings"].to_string();
        assert!(warnings.contains("slurmlens.trace.max_ns: 20 is more than total_ns 10"), "{encoding}: {summary}");
        // The SDK's retry of the same records (a replay) stores nothing twice.
        send_with_js_sdk(&endpoint, Some(SECRET), &records, encoding, gzipped).await;
        assert_eq!(stored(&pool).await, baseline, "{encoding}: a replay stores nothing twice");
        pool.close().await;
    }
    json_pool.close().await;
}
