//! Fuzz targets for the bodies and parameters the API reads: time and number parameters, trace batches
//! (`POST /api/v1/traces`), the Slurm plugin's GPU records (`POST /api/v1/gpu_allocations`) and OTLP
//! logs (`POST /api/v1/otlp/v1/logs`, protobuf and JSON, plain and gzipped), each decoded and then
//! validated by the code the handlers run, short of the database. Each never panics, whatever the bytes;
//! a time parameter reads back what was written.
//!
//! Cases per property: `PROPTEST_CASES` (256 by default; CI's fuzz step runs more, docs/FUZZING.md).

use std::io::Write;

use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, SecondsFormat, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use proptest::collection::vec;
use proptest::prelude::*;
use prost::Message;
use slurmlens_wire as wire;

use super::otlp::{LogsOutcome, decode_logs};
use super::otlp_map::{allocation_field, map_logs};
use super::params::{MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS, Params};
use super::traces::decode_batch;
use crate::app::ingest::{Sender, validate_record, validate_records};
use crate::domain::cluster::ClusterName;
use crate::domain::fuzz_tests::mutated;

const TRACE_BATCH: &str = r#"{"cluster": "lab", "node": "n1", "records": [
  {"interval_start": "2026-01-02T03:04:00Z", "interval_s": 10, "gpu": 0, "pid": 1234, "job_id": 7,
   "category": "kernel", "name": "ampere_sgemm", "count": 10, "total_ns": 123, "max_ns": 45},
  {"interval_start": "2026-01-02T03:04:00Z", "interval_s": 10, "gpu": 1, "pid": 1234,
   "cgroup": "/slurm/uid_1001/job_7/step_0/task_0", "category": "memcpy", "name": "H2D", "count": 2,
   "total_ns": 9, "max_ns": 5, "bytes": 4096}]}"#;

const GPU_BATCH: &str = r#"{"records": [{"cluster": "lab", "node": "n1", "job_id": 7, "step": "batch",
  "event": "start", "at": "2026-01-02T03:04:10Z", "gpus": [{"index": 0, "uuid": "GPU-5c3d0000-1111"},
  {"index": 3}], "cgroup_path": "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7"}]}"#;

const OTLP_JSON: &str = r#"{"resourceLogs": [{"resource": {"attributes": [
  {"key": "host.name", "value": {"stringValue": "n1"}}, {"key": "slurm.cluster", "value": {"stringValue": "lab"}}]},
  "scopeLogs": [{"scope": {"name": "slurmlens"}, "logRecords": [
   {"timeUnixNano": "1767323040000000000", "eventName": "slurmlens.trace_summary", "attributes": [
    {"key": "slurm.job.id", "value": {"intValue": "7"}}, {"key": "process.pid", "value": {"intValue": 4242}},
    {"key": "slurmlens.trace.gpu", "value": {"intValue": "1"}}, {"key": "slurmlens.trace.interval_s", "value": {"doubleValue": 10.0}},
    {"key": "slurmlens.trace.category", "value": {"stringValue": "nccl"}}, {"key": "slurmlens.trace.name", "value": {"stringValue": "ncclAllReduce"}},
    {"key": "slurmlens.trace.count", "value": {"stringValue": "2"}}, {"key": "slurmlens.trace.total_ns", "value": {"intValue": "3000"}},
    {"key": "slurmlens.trace.max_ns", "value": {"intValue": "2000"}}, {"key": "slurmlens.trace.bytes", "value": {"intValue": "4000000"}}]},
   {"timeUnixNano": "1767323050500000000", "attributes": [{"key": "event.name", "value": {"stringValue": "slurmlens.gpu_allocation"}},
    {"key": "slurm.job.id", "value": {"intValue": "7"}}, {"key": "slurmlens.gpu_allocation.step", "value": {"stringValue": "0"}},
    {"key": "slurmlens.gpu_allocation.event", "value": {"stringValue": "start"}},
    {"key": "slurmlens.gpu_allocation.gpus", "value": {"arrayValue": {"values": [{"intValue": "0"}, {"intValue": "1"}]}}},
    {"key": "slurmlens.gpu_allocation.gpu_uuids", "value": {"arrayValue": {"values": [{"stringValue": "GPU-1"}, {"stringValue": ""}]}}}]},
   {"timeUnixNano": "1767323050500000000", "body": {"stringValue": "a plain log line"}}]}]}]}"#;

fn pair(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

/// The protobuf twin of [`OTLP_JSON`]'s records.
fn otlp_protobuf() -> Vec<u8> {
    let int = |key: &str, value: i64| pair(key, Value::IntValue(value));
    let text = |key: &str, value: &str| pair(key, Value::StringValue(value.into()));
    let summary = LogRecord {
        time_unix_nano: 1_767_323_040_000_000_000,
        event_name: "slurmlens.trace_summary".into(),
        attributes: vec![
            int("slurm.job.id", 7),
            int("process.pid", 4242),
            int("slurmlens.trace.gpu", 1),
            int("slurmlens.trace.interval_s", 10),
            text("slurmlens.trace.category", "kernel"),
            text("slurmlens.trace.name", "ampere_sgemm_128x64_nn"),
            int("slurmlens.trace.count", 10),
            int("slurmlens.trace.total_ns", 5_000),
            int("slurmlens.trace.max_ns", 900),
        ],
        ..Default::default()
    };
    let gpus = ArrayValue { values: vec![AnyValue { value: Some(Value::IntValue(0)) }] };
    let allocation = LogRecord {
        time_unix_nano: 1_767_323_050_500_000_000,
        event_name: "slurmlens.gpu_allocation".into(),
        attributes: vec![
            int("slurm.job.id", 7),
            text("slurmlens.gpu_allocation.step", "batch"),
            text("slurmlens.gpu_allocation.event", "end"),
            pair("slurmlens.gpu_allocation.gpus", Value::ArrayValue(gpus)),
        ],
        ..Default::default()
    };
    let resource = Resource { attributes: vec![text("host.name", "n1")], ..Default::default() };
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs { log_records: vec![summary, allocation], ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

fn cluster() -> ClusterName {
    "lab".parse().expect("a valid cluster name")
}

/// What the OTLP handler does with a body, short of the database.
fn ingest_otlp(headers: &HeaderMap, body: &[u8]) {
    let Ok((_encoding, request)) = decode_logs(headers, body) else { return };
    let mapped = map_logs(&request, "lab");
    let now = Utc::now();
    for (_, record) in &mapped.gpu_allocations {
        let _ = validate_record(record, &Sender::cluster_wide(cluster()), now, &allocation_field);
    }
    for records in mapped.traces.into_values() {
        let _ = validate_records(records.into_iter().map(|(_, record)| Ok(record)).collect(), now);
    }
    let _ = LogsOutcome { rejected: mapped.rejected, ignored: mapped.ignored }.partial_success();
}

fn otlp_body() -> impl Strategy<Value = (bool, Vec<u8>)> {
    prop_oneof![
        1 => (any::<bool>(), vec(any::<u8>(), 0..512)),
        3 => mutated(otlp_protobuf()).prop_map(|bytes| (true, bytes)),
        3 => mutated(OTLP_JSON.as_bytes().to_vec()).prop_map(|bytes| (false, bytes)),
    ]
}

fn text_or_bytes(seed: &'static str) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![1 => vec(any::<u8>(), 0..256), 4 => mutated(seed.as_bytes().to_vec())]
}

fn params(name: &str, value: &str) -> Params {
    Params::new(vec![(name.to_string(), value.to_string())], &[name]).expect("a known parameter")
}

proptest! {
    #[test]
    fn time_parameters_parse_within_range_or_refuse(text in prop_oneof![any::<String>(), "[0-9]{1,20}", "[0-9]{4,6}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(Z|[+-][0-9]{2}:[0-9]{2})"]) {
        if let Ok(Some(at)) = params("at", &text).time("at") {
            prop_assert!((MIN_EPOCH_SECONDS..=MAX_EPOCH_SECONDS).contains(&at.timestamp()), "{text} → {at}");
        }
        let _ = params("limit", &text).number("limit", 1, 1000);
    }

    #[test]
    fn name_filters_hold_no_space_or_control_and_are_bounded(text in prop_oneof![any::<String>(), "[ -~]{0,12}(,[ -~\u{80}-\u{10ffff}]{0,8}){0,3}"]) {
        // Text slurmdbd's latin1 columns cannot hold is looked for and matches nothing (the integration
        // test `security::overload` shows it); what reaches the reader is bounded and printable.
        let printable = |name: &str| !name.is_empty() && name.chars().count() <= super::params::MAX_NAME_LEN
            && !name.chars().any(|c| c.is_whitespace() || c.is_control());
        if let Ok(names) = params("user", &text).names("user") {
            prop_assert!(names.iter().all(|name| printable(name)));
        }
        if let Ok(Some(name)) = params("node", &text).name("node") {
            prop_assert!(printable(name));
        }
    }

    #[test]
    fn time_parameters_read_back_what_was_written(seconds in MIN_EPOCH_SECONDS..=MAX_EPOCH_SECONDS, nanos in 0u32..1_000_000_000) {
        let at = DateTime::from_timestamp(seconds, nanos).expect("within RFC 3339's years");
        let written = at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        prop_assert_eq!(params("at", &written).time("at").map_err(|e| TestCaseError::fail(format!("{written}: {e:?}")))?, Some(at));
        if seconds >= 0 {
            prop_assert_eq!(params("at", &seconds.to_string()).time("at").ok().flatten().map(|at| at.timestamp()), Some(seconds));
        }
    }

    #[test]
    fn time_parameters_beyond_rfc3339_are_refused(seconds in (MAX_EPOCH_SECONDS + 1)..=i64::MAX) {
        prop_assert!(params("at", &seconds.to_string()).time("at").is_err());
    }

    #[test]
    fn trace_batches_decode_and_validate_or_refuse(body in text_or_bytes(TRACE_BATCH)) {
        if let Ok(batch) = decode_batch(&body) {
            let _ = (batch.cluster, batch.node);
            let (summaries, rejected) = validate_records(batch.records, Utc::now());
            prop_assert!(summaries.len() + rejected.len() <= body.len());
        }
    }

    #[test]
    fn gpu_records_decode_and_validate_or_refuse(body in text_or_bytes(GPU_BATCH)) {
        if let Ok(batch) = serde_json::from_slice::<wire::GpuAllocationBatch>(&body) {
            for record in &batch.records {
                if let Ok(allocations) = validate_record(record, &Sender::cluster_wide(cluster()), Utc::now(), &|field| field.to_string()) {
                    prop_assert_eq!(allocations.len(), record.gpus.len());
                }
            }
        }
    }

    #[test]
    fn otlp_logs_decode_map_and_validate_or_refuse((protobuf, body) in otlp_body(), gzipped in any::<bool>(), garbage_gzip in any::<bool>()) {
        let mut headers = HeaderMap::new();
        let content_type = if protobuf { "application/x-protobuf" } else { "application/json; charset=utf-8" };
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if gzipped {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        // Bytes that claim gzip and are not, as well as real gzip.
        let body = if gzipped && !garbage_gzip { gzip(&body) } else { body };
        ingest_otlp(&headers, &body);
    }
}
