//! The OTLP logs mapping without a server: protobuf and JSON (int64 as strings, hex ids, unknown fields)
//! of the same records decode to the same wire records, gzip is inflated, missing or mistyped
//! attributes refuse their record with a reason, other kinds are counted, and bad bodies are a 400.

use std::io::Write;

use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde_json::json;
use slurmlens_wire as wire;

use super::error::ApiError;
use super::otlp::{Encoding, LogsOutcome, decode_logs};
use super::otlp_map::{MappedLogs, Position, allocation_field, map_logs, trace_reason};

const INTERVAL_START_NS: u64 = 1_767_323_040_000_000_000; // 2026-01-02T03:04:00Z
const AT_NS: u64 = 1_767_323_050_500_000_000; // 2026-01-02T03:04:10.5Z

fn pair(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

fn text(key: &str, value: &str) -> KeyValue {
    pair(key, Value::StringValue(value.into()))
}

fn int(key: &str, value: i64) -> KeyValue {
    pair(key, Value::IntValue(value))
}

fn log(event: &str, time_unix_nano: u64, attributes: Vec<KeyValue>) -> LogRecord {
    LogRecord { time_unix_nano, event_name: event.into(), attributes, ..Default::default() }
}

/// Two resources (nodes n1 and n2): a kernel and an NCCL summary, a GPU record, a plain log line.
fn request() -> ExportLogsServiceRequest {
    let kernel = log(
        "slurmlens.trace_summary",
        INTERVAL_START_NS,
        vec![
            int("slurm.job.id", 7),
            int("process.pid", 4242),
            int("slurmlens.trace.gpu", 1),
            int("slurmlens.trace.interval_s", 10),
            text("slurmlens.trace.category", "kernel"),
            text("slurmlens.trace.name", "ampere_sgemm_128x64_nn"),
            int("slurmlens.trace.count", 10),
            int("slurmlens.trace.total_ns", 5_000_000_000_123),
            int("slurmlens.trace.max_ns", 900_000_000_000),
        ],
    );
    // The event name as an attribute (older SDKs), the cgroup instead of the job id.
    let mut nccl = log(
        "",
        INTERVAL_START_NS,
        vec![
            text("event.name", "slurmlens.trace_summary"),
            text("slurmlens.trace.cgroup", "/slurm/uid_1001/job_7/step_0/task_0"),
            int("process.pid", 4242),
            int("slurmlens.trace.gpu", 1),
            int("slurmlens.trace.interval_s", 10),
            text("slurmlens.trace.category", "nccl"),
            text("slurmlens.trace.name", "ncclAllReduce"),
            int("slurmlens.trace.count", 2),
            int("slurmlens.trace.total_ns", 3000),
            int("slurmlens.trace.max_ns", 2000),
            int("slurmlens.trace.bytes", 4_000_000),
        ],
    );
    nccl.trace_id =
        vec![0x5b, 0x8e, 0xfe, 0xf5, 0x2c, 0x1d, 0x4a, 0x7f, 0x90, 0x3e, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66];
    nccl.span_id = vec![0xeb, 0xa4, 0x03, 0x1e, 0x45, 0x67, 0x89, 0xab];
    nccl.severity_number = 9;
    let allocation = log(
        "slurmlens.gpu_allocation",
        AT_NS,
        vec![
            int("slurm.job.id", 7),
            text("slurmlens.gpu_allocation.step", "job"),
            text("slurmlens.gpu_allocation.event", "start"),
            pair(
                "slurmlens.gpu_allocation.gpus",
                Value::ArrayValue(ArrayValue {
                    values: vec![
                        AnyValue { value: Some(Value::IntValue(0)) },
                        AnyValue { value: Some(Value::IntValue(3)) },
                    ],
                }),
            ),
            pair(
                "slurmlens.gpu_allocation.gpu_uuids",
                Value::ArrayValue(ArrayValue {
                    values: vec![
                        AnyValue { value: Some(Value::StringValue("GPU-5c3d9f2e-8a1b-4c6d-9e0f-123456789abc".into())) },
                        AnyValue { value: Some(Value::StringValue(String::new())) },
                    ],
                }),
            ),
            text("slurmlens.gpu_allocation.cgroup_path", "/slurm/uid_1001/job_7"),
        ],
    );
    let plain = LogRecord {
        time_unix_nano: AT_NS,
        body: Some(AnyValue { value: Some(Value::StringValue("slurmd: launched job 7".into())) }),
        ..Default::default()
    };
    let resource = |node: &str| {
        Some(Resource {
            attributes: vec![text("host.name", node), text("slurm.cluster", "lab"), text("service.name", "collector")],
            ..Default::default()
        })
    };
    ExportLogsServiceRequest {
        resource_logs: vec![
            ResourceLogs {
                resource: resource("n1"),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "slurmlens-ebpf".into(),
                        version: "1.0".into(),
                        ..Default::default()
                    }),
                    log_records: vec![kernel, plain],
                    ..Default::default()
                }],
                ..Default::default()
            },
            ResourceLogs {
                resource: resource("n2"),
                scope_logs: vec![ScopeLogs { log_records: vec![nccl, allocation], ..Default::default() }],
                ..Default::default()
            },
        ],
    }
}

/// The same request as an OTLP/JSON exporter writes it: int64 as decimal strings (and, as JS SDKs do,
/// some as numbers), hex ids, integer enums, and fields this receiver does not know.
fn request_json() -> String {
    json!({
        "resourceLogs": [
            {
                "resource": {"attributes": [
                    {"key": "host.name", "value": {"stringValue": "n1"}},
                    {"key": "slurm.cluster", "value": {"stringValue": "lab"}},
                    {"key": "service.name", "value": {"stringValue": "collector"}}
                ], "droppedAttributesCount": 0},
                "scopeLogs": [{
                    "scope": {"name": "slurmlens-ebpf", "version": "1.0"},
                    "logRecords": [
                        {
                            "timeUnixNano": "1767323040000000000",
                            "eventName": "slurmlens.trace_summary",
                            "attributes": [
                                {"key": "slurm.job.id", "value": {"intValue": "7"}},
                                {"key": "process.pid", "value": {"intValue": 4242}},
                                {"key": "slurmlens.trace.gpu", "value": {"intValue": "1"}},
                                {"key": "slurmlens.trace.interval_s", "value": {"intValue": "10"}},
                                {"key": "slurmlens.trace.category", "value": {"stringValue": "kernel"}},
                                {"key": "slurmlens.trace.name", "value": {"stringValue": "ampere_sgemm_128x64_nn"}},
                                {"key": "slurmlens.trace.count", "value": {"intValue": "10"}},
                                {"key": "slurmlens.trace.total_ns", "value": {"intValue": "5000000000123"}},
                                {"key": "slurmlens.trace.max_ns", "value": {"intValue": "900000000000"}}
                            ],
                            "aFieldFromTheFuture": {"x": [1, 2]}
                        },
                        {"timeUnixNano": "1767323050500000000", "body": {"stringValue": "slurmd: launched job 7"}}
                    ]
                }]
            },
            {
                "resource": {"attributes": [
                    {"key": "host.name", "value": {"stringValue": "n2"}},
                    {"key": "slurm.cluster", "value": {"stringValue": "lab"}},
                    {"key": "service.name", "value": {"stringValue": "collector"}}
                ]},
                "scopeLogs": [{
                    "logRecords": [
                        {
                            "timeUnixNano": "1767323040000000000",
                            "severityNumber": 9,
                            "traceId": "5b8efef52c1d4a7f903e112233445566",
                            "spanId": "eba4031e456789ab",
                            "attributes": [
                                {"key": "event.name", "value": {"stringValue": "slurmlens.trace_summary"}},
                                {"key": "slurmlens.trace.cgroup", "value": {"stringValue": "/slurm/uid_1001/job_7/step_0/task_0"}},
                                {"key": "process.pid", "value": {"intValue": "4242"}},
                                {"key": "slurmlens.trace.gpu", "value": {"intValue": "1"}},
                                {"key": "slurmlens.trace.interval_s", "value": {"intValue": "10"}},
                                {"key": "slurmlens.trace.category", "value": {"stringValue": "nccl"}},
                                {"key": "slurmlens.trace.name", "value": {"stringValue": "ncclAllReduce"}},
                                {"key": "slurmlens.trace.count", "value": {"intValue": "2"}},
                                {"key": "slurmlens.trace.total_ns", "value": {"intValue": "3000"}},
                                {"key": "slurmlens.trace.max_ns", "value": {"intValue": "2000"}},
                                {"key": "slurmlens.trace.bytes", "value": {"intValue": "4000000", "unknownInAnyValue": true}}
                            ]
                        },
                        {
                            "timeUnixNano": "1767323050500000000",
                            "eventName": "slurmlens.gpu_allocation",
                            "attributes": [
                                {"key": "slurm.job.id", "value": {"intValue": "7"}},
                                {"key": "slurmlens.gpu_allocation.step", "value": {"stringValue": "job"}},
                                {"key": "slurmlens.gpu_allocation.event", "value": {"stringValue": "start"}},
                                {"key": "slurmlens.gpu_allocation.gpus", "value": {"arrayValue": {"values": [
                                    {"intValue": "0"}, {"intValue": "3"}
                                ]}}},
                                {"key": "slurmlens.gpu_allocation.gpu_uuids", "value": {"arrayValue": {"values": [
                                    {"stringValue": "GPU-5c3d9f2e-8a1b-4c6d-9e0f-123456789abc"}, {"stringValue": ""}
                                ]}}},
                                {"key": "slurmlens.gpu_allocation.cgroup_path", "value": {"stringValue": "/slurm/uid_1001/job_7"}}
                            ]
                        }
                    ]
                }]
            }
        ]
    })
    .to_string()
}

fn headers(content_type: &str, content_encoding: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(content_type).expect("a header value"));
    if let Some(encoding) = content_encoding {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_str(encoding).expect("a header value"));
    }
    headers
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip in memory");
    encoder.finish().expect("gzip in memory")
}

fn time(nanos: u64) -> DateTime<Utc> {
    DateTime::from_timestamp((nanos / 1_000_000_000) as i64, (nanos % 1_000_000_000) as u32).expect("a time")
}

fn at(resource: usize, record: usize) -> Position {
    Position { resource, scope: 0, record }
}

/// What the JSON endpoints would have received for [`request`].
fn expected() -> MappedLogs {
    let trace =
        |category: &str, name: &str, job_id, cgroup: Option<&str>, count, total_ns, max_ns, bytes| wire::TraceRecord {
            interval_start: time(INTERVAL_START_NS),
            interval_s: 10,
            gpu: 1,
            pid: 4242,
            cgroup: cgroup.map(String::from),
            job_id,
            category: category.into(),
            name: name.into(),
            count,
            total_ns,
            max_ns,
            bytes,
        };
    let mut mapped = MappedLogs { ignored: 1, ..Default::default() };
    mapped.traces.insert(
        "n1".into(),
        vec![(
            at(0, 0),
            trace("kernel", "ampere_sgemm_128x64_nn", Some(7), None, 10, 5_000_000_000_123, 900_000_000_000, 0),
        )],
    );
    mapped.traces.insert(
        "n2".into(),
        vec![(
            at(1, 0),
            trace("nccl", "ncclAllReduce", None, Some("/slurm/uid_1001/job_7/step_0/task_0"), 2, 3000, 2000, 4_000_000),
        )],
    );
    mapped.gpu_allocations.push((
        at(1, 1),
        wire::GpuAllocationRecord {
            cluster: "lab".into(),
            node: "n2".into(),
            job_id: 7,
            step: "job".into(),
            event: wire::GpuAllocationEvent::Start,
            at: time(AT_NS),
            gpus: vec![
                wire::AllocatedGpu { index: 0, uuid: Some("GPU-5c3d9f2e-8a1b-4c6d-9e0f-123456789abc".into()) },
                wire::AllocatedGpu { index: 3, uuid: None },
            ],
            cgroup_path: Some("/slurm/uid_1001/job_7".into()),
        },
    ));
    mapped
}

fn decoded(content_type: &str, content_encoding: Option<&str>, body: &[u8]) -> ExportLogsServiceRequest {
    let (_, request) = decode_logs(&headers(content_type, content_encoding), body).expect("an OTLP logs request");
    request
}

#[test]
fn protobuf_and_json_of_the_same_records_map_to_the_same_wire_records() {
    let protobuf = decoded("application/x-protobuf", None, &request().encode_to_vec());
    let json = decoded("application/json", None, request_json().as_bytes());
    assert_eq!(protobuf, request(), "protobuf round trip");
    assert_eq!(json, request(), "OTLP/JSON decodes to the same messages");
    assert_eq!(map_logs(&protobuf, "lab"), expected());
    assert_eq!(map_logs(&json, "lab"), expected());
}

#[test]
fn gzip_bodies_are_inflated_in_both_encodings() {
    let protobuf = decoded("application/x-protobuf", Some("gzip"), &gzip(&request().encode_to_vec()));
    let json = decoded("application/json; charset=utf-8", Some("gzip"), &gzip(request_json().as_bytes()));
    assert_eq!(map_logs(&protobuf, "lab"), expected());
    assert_eq!(map_logs(&json, "lab"), expected());
}

#[test]
fn int64_values_are_read_from_strings_numbers_whole_doubles_and_digit_strings() {
    for value in
        [json!({"intValue": "10"}), json!({"intValue": 10}), json!({"doubleValue": 10.0}), json!({"stringValue": "10"})]
    {
        let body = request_json().replace(r#"{"intValue":"10"}"#, &value.to_string());
        let mapped = map_logs(&decoded("application/json", None, body.as_bytes()), "lab");
        assert_eq!(mapped, expected(), "{value}");
    }
    let body = request_json().replace(r#"{"intValue":"10"}"#, r#"{"doubleValue":10.5}"#);
    let mapped = map_logs(&decoded("application/json", None, body.as_bytes()), "lab");
    // Both trace summaries have a 10 s interval.
    assert_eq!(mapped.rejected.len(), 2, "{mapped:?}");
    for (_, reason) in &mapped.rejected {
        assert_eq!(reason, "slurmlens.trace.interval_s: 10.5 is not a whole number");
    }
}

#[test]
fn a_record_missing_or_mistyping_an_attribute_is_refused_with_its_reason() {
    let mut request = request();
    let records = &mut request.resource_logs[0].scope_logs[0].log_records;
    let kernel = records[0].clone();
    let without = |key: &str| {
        let mut record = kernel.clone();
        record.attributes.retain(|pair| pair.key != key);
        record
    };
    let mut mistyped = kernel.clone();
    mistyped.attributes.push(text("slurmlens.trace.count", "ten"));
    let mut no_time = kernel.clone();
    no_time.time_unix_nano = 0;
    let mut other_cluster = kernel.clone();
    other_cluster.attributes.push(text("slurm.cluster", "sakura"));
    let mut bad_node = kernel.clone();
    bad_node.attributes.push(text("host.name", "n1;drop"));
    let mut unknown_event = kernel.clone();
    unknown_event.attributes.push(text("slurmlens.gpu_allocation.event", "resume"));
    unknown_event.event_name = "slurmlens.gpu_allocation".into();
    records.extend([
        without("slurmlens.trace.count"),
        without("process.pid"),
        mistyped,
        no_time,
        other_cluster,
        bad_node,
        unknown_event,
    ]);
    let mapped = map_logs(&request, "lab");
    let reasons: Vec<(usize, &str)> =
        mapped.rejected.iter().map(|(position, reason)| (position.record, reason.as_str())).collect();
    let wanted = [
        (2, "slurmlens.trace.count: missing attribute (an int)"),
        (3, "process.pid: missing attribute (an int)"),
        (4, "slurmlens.trace.count: a string where an int belongs"),
        (5, "timeUnixNano is not set"),
        (6, "slurm.cluster: `sakura` is not the cluster this secret belongs to (`lab`)"),
        (7, "host.name: `n1;drop` is not a Slurm node name"),
        (8, "slurmlens.gpu_allocation.event: `resume` is not `start` or `end`"),
    ];
    assert_eq!(reasons.len(), wanted.len(), "{reasons:?}");
    for ((position, reason), (wanted_position, wanted_reason)) in reasons.iter().zip(wanted) {
        assert_eq!(*position, wanted_position);
        assert!(reason.starts_with(wanted_reason), "`{reason}` should start with `{wanted_reason}`");
    }
    assert_eq!(mapped.traces["n1"].len(), 1, "the good record of n1 still maps");
}

#[test]
fn a_record_attribute_overrides_its_resource() {
    let mut request = request();
    request.resource_logs[0].scope_logs[0].log_records[0].attributes.push(text("host.name", "n4"));
    let mapped = map_logs(&request, "lab");
    assert!(mapped.traces.contains_key("n4") && !mapped.traces.contains_key("n1"), "{mapped:?}");
}

#[test]
fn validation_reasons_name_the_attribute() {
    assert_eq!(
        trace_reason("max_ns: 20 is more than total_ns 10"),
        "slurmlens.trace.max_ns: 20 is more than total_ns 10"
    );
    assert_eq!(
        trace_reason("interval_start: intervals start on a whole second"),
        "timeUnixNano: intervals start on a whole second"
    );
    assert_eq!(trace_reason("send job_id or cgroup"), "send job_id or cgroup");
    assert_eq!(allocation_field("gpus[1].uuid"), "slurmlens.gpu_allocation.gpu_uuids[1]");
    assert_eq!(allocation_field("gpus[2].index"), "slurmlens.gpu_allocation.gpus[2]");
    assert_eq!(allocation_field("at"), "timeUnixNano");
    assert_eq!(allocation_field("node"), "host.name");
}

#[test]
fn partial_success_counts_refusals_and_mentions_ignored_records() {
    assert_eq!(LogsOutcome::default().partial_success(), None, "all taken: no partialSuccess");
    let outcome =
        LogsOutcome { rejected: vec![(at(0, 2), "slurmlens.trace.count: missing attribute".into())], ignored: 3 };
    let partial = outcome.partial_success().expect("a partial success");
    assert_eq!(partial.rejected_log_records, 1);
    assert!(
        partial.error_message.contains("resourceLogs[0].scopeLogs[0].logRecords[2]: slurmlens.trace.count: missing"),
        "{}",
        partial.error_message
    );
    assert!(partial.error_message.contains("ignored 3 log records"), "{}", partial.error_message);
    let ignored_only = LogsOutcome { rejected: Vec::new(), ignored: 2 }.partial_success().expect("a warning");
    assert_eq!(ignored_only.rejected_log_records, 0);
}

#[test]
fn bad_bodies_are_refused_with_the_reason() {
    let refused = |content_type: &str, content_encoding: Option<&str>, body: &[u8]| match decode_logs(
        &headers(content_type, content_encoding),
        body,
    ) {
        Err(ApiError::InvalidParameter { parameter, message }) => (parameter, message),
        other => panic!("expected a 400, got {:?}", other.map(|(encoding, _)| encoding)),
    };
    let (parameter, message) = refused("text/plain", None, b"{}");
    assert_eq!(parameter, "Content-Type", "{message}");
    let (parameter, message) = refused("application/json", None, b"{\"resourceLogs\": 3}");
    assert_eq!(parameter, "body");
    assert!(message.contains("resourceLogs"), "{message}");
    let (parameter, _) = refused("application/json", None, format!("{} x", request_json()).as_bytes());
    assert_eq!(parameter, "body");
    let (parameter, message) = refused("application/x-protobuf", None, b"\xff\xff\xff\xff garbage");
    assert_eq!(parameter, "body");
    assert!(message.contains("protobuf"), "{message}");
    let (parameter, message) = refused("application/json", Some("gzip"), request_json().as_bytes());
    assert_eq!(parameter, "body");
    assert!(message.contains("not gzip"), "{message}");
    let (parameter, _) = refused("application/json", Some("br"), request_json().as_bytes());
    assert_eq!(parameter, "Content-Encoding");
    let bomb = gzip(&vec![b' '; super::otlp::MAX_OTLP_BODY_BYTES + 1]);
    let (parameter, message) = refused("application/json", Some("gzip"), &bomb);
    assert_eq!(parameter, "body");
    assert!(message.contains("inflates"), "{message}");
    let (encoding, empty) = decode_logs(&headers("application/json", None), b"{}").expect("an empty request is valid");
    assert_eq!((encoding, empty.resource_logs.len()), (Encoding::Json, 0));
}

/// docs/OTLP.md's full example: its OTLP/JSON request maps to exactly its two JSON batches' records.
#[test]
fn the_documented_example_maps_to_the_documented_json_batches() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/OTLP.md");
    let text = std::fs::read_to_string(&path).expect("docs/OTLP.md");
    let blocks: Vec<&str> =
        text.split("```json\n").skip(1).map(|block| block.split("\n```").next().expect("a closed block")).collect();
    let [trace_batch, gpu_batch, otlp_request] = blocks[..] else {
        panic!("docs/OTLP.md has {} JSON examples, expected the two batches and the request", blocks.len());
    };
    let trace_batch: wire::TraceBatch = serde_json::from_str(trace_batch).expect("the trace batch");
    let gpu_batch: wire::GpuAllocationBatch = serde_json::from_str(gpu_batch).expect("the GPU batch");
    let mapped = map_logs(&decoded("application/json", None, otlp_request.as_bytes()), &trace_batch.cluster);
    let traces: Vec<wire::TraceRecord> =
        mapped.traces.get(&trace_batch.node).into_iter().flatten().map(|(_, record)| record.clone()).collect();
    assert_eq!(traces, trace_batch.records);
    let allocations: Vec<wire::GpuAllocationRecord> =
        mapped.gpu_allocations.into_iter().map(|(_, record)| record).collect();
    assert_eq!(allocations, gpu_batch.records);
    assert_eq!((mapped.rejected.len(), mapped.ignored), (0, 1));
}
