//! OTLP logs → slurmlens's own records (the mapping `docs/OTLP.md` documents): one log record per trace
//! summary or GPU allocation record, its kind named by `event.name`, its fields as attributes.
//!
//! The result is the wire records the JSON endpoints receive, so they are validated, attributed and
//! stored by exactly the same code; what cannot become one is a rejection with its reason.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use slurmlens_wire as wire;

use crate::app::ingest::is_node_name;

/// `event.name` of a trace summary (`POST /api/v1/traces`'s record).
pub const TRACE_SUMMARY_EVENT: &str = "slurmlens.trace_summary";
/// `event.name` of a GPU allocation record (`POST /api/v1/gpu_allocations`'s record).
pub const GPU_ALLOCATION_EVENT: &str = "slurmlens.gpu_allocation";

/// The attribute names of the mapping. Each may be set on the log record or on its resource; the
/// record's wins.
pub mod attribute {
    /// The log record's kind, for SDKs that cannot set the `eventName` field.
    pub const EVENT_NAME: &str = "event.name";
    /// The cluster; when set, it must be the one the ingest secret belongs to.
    pub const CLUSTER: &str = "slurm.cluster";
    /// The node as Slurm names it.
    pub const NODE: &str = "host.name";
    /// The job's numeric id (`SLURM_JOB_ID`).
    pub const JOB_ID: &str = "slurm.job.id";
    /// The traced process.
    pub const PID: &str = "process.pid";
    pub const TRACE_CATEGORY: &str = "slurmlens.trace.category";
    pub const TRACE_NAME: &str = "slurmlens.trace.name";
    pub const TRACE_COUNT: &str = "slurmlens.trace.count";
    pub const TRACE_TOTAL_NS: &str = "slurmlens.trace.total_ns";
    pub const TRACE_MAX_NS: &str = "slurmlens.trace.max_ns";
    pub const TRACE_BYTES: &str = "slurmlens.trace.bytes";
    pub const TRACE_INTERVAL_S: &str = "slurmlens.trace.interval_s";
    pub const TRACE_GPU: &str = "slurmlens.trace.gpu";
    pub const TRACE_CGROUP: &str = "slurmlens.trace.cgroup";
    pub const ALLOCATION_STEP: &str = "slurmlens.gpu_allocation.step";
    pub const ALLOCATION_EVENT: &str = "slurmlens.gpu_allocation.event";
    pub const ALLOCATION_GPUS: &str = "slurmlens.gpu_allocation.gpus";
    pub const ALLOCATION_GPU_UUIDS: &str = "slurmlens.gpu_allocation.gpu_uuids";
    pub const ALLOCATION_CGROUP_PATH: &str = "slurmlens.gpu_allocation.cgroup_path";
}

/// The log record's time field: a trace summary's interval start, a GPU record's moment.
pub const TIME_FIELD: &str = "timeUnixNano";

/// Where a log record sits in a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub resource: usize,
    pub scope: usize,
    pub record: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "resourceLogs[{}].scopeLogs[{}].logRecords[{}]", self.resource, self.scope, self.record)
    }
}

/// A request's log records, sorted by kind, each with its position.
#[derive(Debug, Default, PartialEq)]
pub struct MappedLogs {
    /// Trace summaries per node, in request order: each node's are one `TraceBatch`.
    pub traces: BTreeMap<String, Vec<(Position, wire::TraceRecord)>>,
    pub gpu_allocations: Vec<(Position, wire::GpuAllocationRecord)>,
    /// Records of our kinds that cannot become a wire record, and why.
    pub rejected: Vec<(Position, String)>,
    /// Log records of other kinds (no or another `event.name`): not ours, ignored.
    pub ignored: u64,
}

/// Maps every log record of `request` received with the ingest secret of `cluster`.
pub fn map_logs(request: &ExportLogsServiceRequest, cluster: &str) -> MappedLogs {
    let mut mapped = MappedLogs::default();
    for (resource_at, resource_logs) in request.resource_logs.iter().enumerate() {
        let resource = resource_logs.resource.as_ref().map_or(&[][..], |resource| &resource.attributes[..]);
        for (scope_at, scope_logs) in resource_logs.scope_logs.iter().enumerate() {
            for (record_at, record) in scope_logs.log_records.iter().enumerate() {
                let position = Position { resource: resource_at, scope: scope_at, record: record_at };
                let attributes = Attributes { record: &record.attributes, resource };
                match event_name(record) {
                    Some(TRACE_SUMMARY_EVENT) => match trace_record(&attributes, record, cluster) {
                        Ok((node, trace)) => mapped.traces.entry(node).or_default().push((position, trace)),
                        Err(reason) => mapped.rejected.push((position, reason)),
                    },
                    Some(GPU_ALLOCATION_EVENT) => match gpu_allocation(&attributes, record, cluster) {
                        Ok(allocation) => mapped.gpu_allocations.push((position, allocation)),
                        Err(reason) => mapped.rejected.push((position, reason)),
                    },
                    _ => mapped.ignored += 1,
                }
            }
        }
    }
    mapped
}

/// The number of log records in `request`.
pub fn count_log_records(request: &ExportLogsServiceRequest) -> usize {
    request
        .resource_logs
        .iter()
        .flat_map(|resource_logs| &resource_logs.scope_logs)
        .map(|scope_logs| scope_logs.log_records.len())
        .sum()
}

/// The record's `eventName` field (OTLP ≥ 1.5), else its `event.name` attribute (older SDKs).
fn event_name(record: &LogRecord) -> Option<&str> {
    if !record.event_name.is_empty() {
        return Some(&record.event_name);
    }
    match Attributes::find(&record.attributes, attribute::EVENT_NAME) {
        Some(Value::StringValue(name)) => Some(name),
        _ => None,
    }
}

fn trace_record(
    attributes: &Attributes<'_>,
    record: &LogRecord,
    cluster: &str,
) -> Result<(String, wire::TraceRecord), String> {
    let node = node_of(attributes, cluster)?;
    let trace = wire::TraceRecord {
        interval_start: time_of(record)?,
        interval_s: attributes.required_integer(attribute::TRACE_INTERVAL_S)?,
        gpu: attributes.required_integer(attribute::TRACE_GPU)?,
        pid: attributes.required_integer(attribute::PID)?,
        cgroup: attributes.string(attribute::TRACE_CGROUP)?.map(str::to_string),
        job_id: attributes.integer(attribute::JOB_ID)?,
        category: attributes.required_string(attribute::TRACE_CATEGORY)?.to_string(),
        name: attributes.required_string(attribute::TRACE_NAME)?.to_string(),
        count: attributes.required_integer(attribute::TRACE_COUNT)?,
        total_ns: attributes.required_integer(attribute::TRACE_TOTAL_NS)?,
        max_ns: attributes.required_integer(attribute::TRACE_MAX_NS)?,
        bytes: attributes.integer(attribute::TRACE_BYTES)?.unwrap_or(0),
    };
    Ok((node, trace))
}

fn gpu_allocation(
    attributes: &Attributes<'_>,
    record: &LogRecord,
    cluster: &str,
) -> Result<wire::GpuAllocationRecord, String> {
    let node = node_of(attributes, cluster)?;
    let event = match attributes.required_string(attribute::ALLOCATION_EVENT)? {
        "start" => wire::GpuAllocationEvent::Start,
        "end" => wire::GpuAllocationEvent::End,
        other => return Err(format!("{}: `{other}` is not `start` or `end`", attribute::ALLOCATION_EVENT)),
    };
    let indices = attributes
        .integers(attribute::ALLOCATION_GPUS)?
        .ok_or_else(|| missing(attribute::ALLOCATION_GPUS, "an array of ints"))?;
    let uuids = attributes.strings(attribute::ALLOCATION_GPU_UUIDS)?;
    if let Some(uuids) = &uuids
        && uuids.len() != indices.len()
    {
        return Err(format!(
            "{}: {} UUIDs for {} GPUs (send one per index of {}, `\"\"` where unknown)",
            attribute::ALLOCATION_GPU_UUIDS,
            uuids.len(),
            indices.len(),
            attribute::ALLOCATION_GPUS
        ));
    }
    let gpus = indices
        .into_iter()
        .enumerate()
        .map(|(at, index)| wire::AllocatedGpu {
            index,
            uuid: uuids.as_ref().and_then(|uuids| uuids.get(at)).filter(|uuid| !uuid.is_empty()).cloned(),
        })
        .collect();
    Ok(wire::GpuAllocationRecord {
        cluster: cluster.to_string(),
        node,
        job_id: attributes.required_integer(attribute::JOB_ID)?,
        step: attributes.required_string(attribute::ALLOCATION_STEP)?.to_string(),
        event,
        at: time_of(record)?,
        gpus,
        cgroup_path: attributes.string(attribute::ALLOCATION_CGROUP_PATH)?.map(str::to_string),
    })
}

/// The node the record names, once its cluster (when named) is the secret's.
fn node_of(attributes: &Attributes<'_>, cluster: &str) -> Result<String, String> {
    if let Some(claimed) = attributes.string(attribute::CLUSTER)?
        && claimed != cluster
    {
        return Err(format!(
            "{}: `{claimed}` is not the cluster this secret belongs to (`{cluster}`)",
            attribute::CLUSTER
        ));
    }
    let node = attributes.required_string(attribute::NODE)?;
    if !is_node_name(node) {
        return Err(format!("{}: `{node}` is not a Slurm node name", attribute::NODE));
    }
    Ok(node.to_string())
}

fn time_of(record: &LogRecord) -> Result<DateTime<Utc>, String> {
    let nanos = record.time_unix_nano;
    if nanos == 0 {
        return Err(format!("{TIME_FIELD} is not set"));
    }
    let seconds = i64::try_from(nanos / 1_000_000_000).map_err(|_| format!("{TIME_FIELD}: out of range"))?;
    DateTime::from_timestamp(seconds, (nanos % 1_000_000_000) as u32)
        .ok_or_else(|| format!("{TIME_FIELD}: out of range"))
}

fn missing(key: &str, kind: &str) -> String {
    format!("{key}: missing attribute ({kind})")
}

/// A log record's attributes over its resource's.
struct Attributes<'a> {
    record: &'a [KeyValue],
    resource: &'a [KeyValue],
}

impl<'a> Attributes<'a> {
    /// The last value of `key` in `attributes` (a repeated key is a sender's mistake; the last wins, as
    /// in the Collector's attribute maps).
    fn find(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
        attributes
            .iter()
            .rev()
            .find(|pair| pair.key == key)
            .and_then(|pair| pair.value.as_ref())
            .and_then(|value| value.value.as_ref())
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        Self::find(self.record, key).or_else(|| Self::find(self.resource, key))
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::StringValue(text)) => Ok(Some(text)),
            Some(other) => Err(format!("{key}: {} where a string belongs", kind_of(other))),
        }
    }

    fn required_string(&self, key: &str) -> Result<&'a str, String> {
        self.string(key)?.ok_or_else(|| missing(key, "a string"))
    }

    fn integer<T: TryFrom<i64>>(&self, key: &str) -> Result<Option<T>, String> {
        self.get(key).map(|value| integer_value(key, value)).transpose()
    }

    fn required_integer<T: TryFrom<i64>>(&self, key: &str) -> Result<T, String> {
        self.integer(key)?.ok_or_else(|| missing(key, "an int"))
    }

    fn array(&self, key: &str) -> Result<Option<&'a [opentelemetry_proto::tonic::common::v1::AnyValue]>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::ArrayValue(array)) => Ok(Some(&array.values)),
            Some(other) => Err(format!("{key}: {} where an array belongs", kind_of(other))),
        }
    }

    fn integers<T: TryFrom<i64>>(&self, key: &str) -> Result<Option<Vec<T>>, String> {
        let Some(values) = self.array(key)? else { return Ok(None) };
        values
            .iter()
            .enumerate()
            .map(|(at, value)| match &value.value {
                Some(value) => integer_value(&format!("{key}[{at}]"), value),
                None => Err(format!("{key}[{at}]: empty where an int belongs")),
            })
            .collect::<Result<Vec<T>, String>>()
            .map(Some)
    }

    fn strings(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        let Some(values) = self.array(key)? else { return Ok(None) };
        values
            .iter()
            .enumerate()
            .map(|(at, value)| match &value.value {
                Some(Value::StringValue(text)) => Ok(text.clone()),
                Some(other) => Err(format!("{key}[{at}]: {} where a string belongs", kind_of(other))),
                None => Err(format!("{key}[{at}]: empty where a string belongs")),
            })
            .collect::<Result<Vec<String>, String>>()
            .map(Some)
    }
}

/// An int attribute: `intValue` (in OTLP/JSON a decimal string or a number), a whole `doubleValue`
/// below 2⁵³ (senders whose numbers are floats), or a `stringValue` of decimal digits (Collector
/// processors that rewrote it as text); then in `T`'s range.
fn integer_value<T: TryFrom<i64>>(key: &str, value: &Value) -> Result<T, String> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    let number = match value {
        Value::IntValue(number) => *number,
        Value::DoubleValue(number) if number.fract() == 0.0 && number.abs() < EXACT => *number as i64,
        Value::StringValue(text)
            if !text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            text.parse().map_err(|_| format!("{key}: `{text}` is not an int"))?
        }
        Value::DoubleValue(number) => return Err(format!("{key}: {number} is not a whole number")),
        other => return Err(format!("{key}: {} where an int belongs", kind_of(other))),
    };
    T::try_from(number).map_err(|_| format!("{key}: {number} is out of range"))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::StringValue(_) => "a string",
        Value::BoolValue(_) => "a bool",
        Value::IntValue(_) => "an int",
        Value::DoubleValue(_) => "a double",
        Value::ArrayValue(_) => "an array",
        Value::KvlistValue(_) => "a key-value list",
        Value::BytesValue(_) => "bytes",
        Value::StringValueStrindex(_) => "a string-table reference",
    }
}

/// A trace record's refusal in the mapping's words: the wire field it names becomes the attribute.
pub fn trace_reason(reason: &str) -> String {
    let fields = [
        ("category", attribute::TRACE_CATEGORY),
        ("name", attribute::TRACE_NAME),
        ("gpu", attribute::TRACE_GPU),
        ("interval_s", attribute::TRACE_INTERVAL_S),
        ("interval_start", TIME_FIELD),
        ("count", attribute::TRACE_COUNT),
        ("total_ns", attribute::TRACE_TOTAL_NS),
        ("max_ns", attribute::TRACE_MAX_NS),
        ("bytes", attribute::TRACE_BYTES),
    ];
    for (field, key) in fields {
        if let Some(rest) = reason.strip_prefix(field).and_then(|rest| rest.strip_prefix(": ")) {
            return format!("{key}: {rest}");
        }
    }
    reason.to_string()
}

/// A GPU allocation record's field (as `ingest::validate_record` names it) as the mapping names it.
pub fn allocation_field(field: &str) -> String {
    let gpu_at = |rest: &str, key: &str| {
        rest.split_once(']').and_then(|(at, _)| at.parse::<usize>().ok()).map(|at| format!("{key}[{at}]"))
    };
    if let Some(rest) = field.strip_prefix("gpus[") {
        let key = if field.ends_with(".uuid") { attribute::ALLOCATION_GPU_UUIDS } else { attribute::ALLOCATION_GPUS };
        return gpu_at(rest, key).unwrap_or_else(|| key.to_string());
    }
    match field {
        "cluster" => attribute::CLUSTER,
        "node" => attribute::NODE,
        "job_id" => attribute::JOB_ID,
        "step" => attribute::ALLOCATION_STEP,
        "at" => TIME_FIELD,
        "gpus" => attribute::ALLOCATION_GPUS,
        "cgroup_path" => attribute::ALLOCATION_CGROUP_PATH,
        other => other,
    }
    .to_string()
}
