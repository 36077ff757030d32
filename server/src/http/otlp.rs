//! OTLP/HTTP in: `POST /api/v1/otlp/v1/logs`, where a stock OpenTelemetry exporter (Collector `otlphttp`,
//! any SDK) sends trace summaries and GPU allocation records as log records, in protobuf or JSON,
//! optionally gzipped, with the cluster's ingest secret. The records are mapped (`otlp_map`) to the
//! JSON endpoints' wire records and validated and stored by their code, so they land exactly alike;
//! the answer is OTLP's `ExportLogsServiceResponse` in the request's encoding.

use std::io::Read;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flate2::read::GzDecoder;
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceRequest};
use prost::Message;
use slurmlens_wire as wire;

use super::error::ApiError;
use super::ingest::authenticated_sender;
use super::otlp_map::{self, Position};
use super::{HttpState, body_count};
use crate::app::App;
use crate::app::ingest::{MAX_TRACE_RECORDS, MappedRecords, RefusalWords, Sender};

/// Largest body accepted as sent: the trace endpoint's limit.
pub const MAX_OTLP_BODY_BYTES: usize = super::traces::MAX_TRACE_BODY_BYTES;
/// Most log records in one request: the trace endpoint's limit (set the Collector's batch processor
/// `send_batch_max_size` at or below it).
pub const MAX_OTLP_LOG_RECORDS: usize = MAX_TRACE_RECORDS;
/// Bytes one log record may take on average once inflated: a trace summary with a long C++ kernel
/// name and its attributes.
const INFLATED_BYTES_PER_RECORD: usize = 1_600;
/// Largest body accepted after gzip: what the record limit needs, not what a gzip bomb offers.
pub const MAX_INFLATED_BYTES: usize = MAX_OTLP_LOG_RECORDS * INFLATED_BYTES_PER_RECORD;
/// Refusals spelled out in `errorMessage`; the count covers them all.
const REASONS_SHOWN: usize = 20;

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

/// OTLP/HTTP's two encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    /// The request's encoding, from its `Content-Type` (parameters such as `charset` aside).
    fn of(headers: &HeaderMap) -> Result<Self, ApiError> {
        let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            PROTOBUF => Ok(Self::Protobuf),
            JSON => Ok(Self::Json),
            _ => Err(ApiError::invalid(
                "Content-Type",
                format!("`{content_type}` is not an OTLP/HTTP encoding: send {PROTOBUF} or {JSON}"),
            )),
        }
    }
}

/// Decodes an OTLP/HTTP logs request body: `Content-Encoding` (none or gzip), then protobuf or JSON.
pub fn decode_logs(headers: &HeaderMap, body: &[u8]) -> Result<(Encoding, ExportLogsServiceRequest), ApiError> {
    let encoding = Encoding::of(headers)?;
    let content_encoding =
        headers.get(header::CONTENT_ENCODING).and_then(|value| value.to_str().ok()).unwrap_or("").trim();
    let inflated;
    let body = match content_encoding.to_ascii_lowercase().as_str() {
        "" | "identity" => body,
        "gzip" | "x-gzip" => {
            inflated = gunzip(body)?;
            &inflated[..]
        }
        other => {
            return Err(ApiError::invalid(
                "Content-Encoding",
                format!("`{other}` is not supported: send the body plain or gzip"),
            ));
        }
    };
    // Counted on the wire first: millions of empty records are refused before any is built.
    let counted = match encoding {
        Encoding::Protobuf => body_count::protobuf_log_records(body, MAX_OTLP_LOG_RECORDS),
        Encoding::Json => body_count::json_elements(body, body_count::OTLP_JSON_LOG_RECORDS, MAX_OTLP_LOG_RECORDS),
    };
    if counted.is_err() {
        return Err(ApiError::invalid(
            "body",
            format!("more than {MAX_OTLP_LOG_RECORDS} log records: send at most {MAX_OTLP_LOG_RECORDS} per request"),
        ));
    }
    let request = match encoding {
        Encoding::Protobuf => ExportLogsServiceRequest::decode(body)
            .map_err(|e| ApiError::invalid("body", format!("not an OTLP ExportLogsServiceRequest in protobuf: {e}")))?,
        Encoding::Json => {
            let mut deserializer = serde_json::Deserializer::from_slice(body);
            let request: ExportLogsServiceRequest =
                serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
                    ApiError::invalid(
                        "body",
                        format!("not an OTLP ExportLogsServiceRequest in JSON (at `{}`): {}", e.path(), e.inner()),
                    )
                })?;
            deserializer.end().map_err(|e| ApiError::invalid("body", format!("text after the JSON document: {e}")))?;
            request
        }
    };
    Ok((encoding, request))
}

/// Inflates a gzip body, refusing one that inflates beyond [`MAX_INFLATED_BYTES`].
fn gunzip(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let mut inflated = Vec::new();
    GzDecoder::new(body)
        .take(MAX_INFLATED_BYTES as u64 + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| ApiError::invalid("body", format!("`Content-Encoding: gzip`, but not gzip: {e}")))?;
    if inflated.len() > MAX_INFLATED_BYTES {
        return Err(ApiError::invalid(
            "body",
            format!("the body inflates to more than {MAX_INFLATED_BYTES} bytes: send at most {MAX_INFLATED_BYTES}"),
        ));
    }
    Ok(inflated)
}

/// What an OTLP request did: how many log records were refused (and why), how many were not ours.
#[derive(Debug, Default, PartialEq)]
pub struct LogsOutcome {
    pub rejected: Vec<(Position, String)>,
    pub ignored: u64,
}

impl LogsOutcome {
    /// OTLP's answer: no `partialSuccess` when everything was taken; otherwise the refused count and a
    /// message naming each refusal (the first few) and the records that were not ours.
    pub fn partial_success(&self) -> Option<ExportLogsPartialSuccess> {
        if self.rejected.is_empty() && self.ignored == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if !self.rejected.is_empty() {
            let mut shown: Vec<String> = self
                .rejected
                .iter()
                .take(REASONS_SHOWN)
                .map(|(position, reason)| format!("{position}: {reason}"))
                .collect();
            if self.rejected.len() > REASONS_SHOWN {
                shown.push(format!("and {} more", self.rejected.len() - REASONS_SHOWN));
            }
            parts.push(format!("rejected {} log records: {}", self.rejected.len(), shown.join("; ")));
        }
        if self.ignored > 0 {
            parts.push(format!(
                "ignored {} log records without event.name {} or {}",
                self.ignored,
                otlp_map::TRACE_SUMMARY_EVENT,
                otlp_map::GPU_ALLOCATION_EVENT
            ));
        }
        Some(ExportLogsPartialSuccess {
            rejected_log_records: self.rejected.len() as i64,
            error_message: parts.join(". "),
        })
    }

    /// The `ExportLogsServiceResponse` in `encoding`, as a 200.
    fn into_response(self, encoding: Encoding) -> Response {
        let partial_success = self.partial_success();
        let (content_type, body) = match encoding {
            Encoding::Protobuf => {
                let response =
                    opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse { partial_success };
                (PROTOBUF, response.encode_to_vec())
            }
            // Written here rather than derived: OTLP/JSON spells int64 as a decimal string.
            Encoding::Json => {
                let document = match partial_success {
                    None => serde_json::json!({}),
                    Some(partial) => serde_json::json!({"partialSuccess": {
                        "rejectedLogRecords": partial.rejected_log_records.to_string(),
                        "errorMessage": partial.error_message,
                    }}),
                };
                (JSON, document.to_string().into_bytes())
            }
        };
        (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], body).into_response()
    }
}

/// `POST /api/v1/otlp/v1/logs`: an OTLP/HTTP logs export.
#[utoipa::path(
    post,
    path = "/api/v1/otlp/v1/logs",
    tag = "ingest",
    operation_id = "post_otlp_logs",
    summary = "Trace summaries and GPU allocation records as OTLP/HTTP logs",
    description = "An OpenTelemetry exporter's `otlphttp` endpoint is `<server>/api/v1/otlp`. Each log record \
        whose `event.name` is `slurmlens.trace_summary` or `slurmlens.gpu_allocation` is one record of \
        `POST /api/v1/traces` or `POST /api/v1/gpu_allocations`, its fields as attributes (docs/OTLP.md), \
        validated and stored exactly like them; other log records are ignored and counted. Protobuf \
        (`application/x-protobuf`) or JSON (`application/json`), plain or `Content-Encoding: gzip`, at \
        most 16 MiB either way and 10,000 log records. Authenticated with the cluster's ingest secret. \
        The answer is OTLP's `ExportLogsServiceResponse` in the request's encoding; refused records are \
        counted in `partialSuccess.rejectedLogRecords` and named in `errorMessage`. A replay stores \
        nothing twice.",
    request_body(
        description = "An OTLP `ExportLogsServiceRequest`, protobuf or OTLP/JSON",
        content((String = "application/x-protobuf"), (Object = "application/json")),
    ),
    responses(
        (status = 200, description = "Accepted: `ExportLogsServiceResponse` in the request's encoding, with `partialSuccess` when records were refused or ignored",
            content((String = "application/x-protobuf"), (Object = "application/json"))),
        (status = 400, description = "Not an OTLP logs request in a supported encoding, or too many log records (`invalid_parameter`); nothing is stored", body = wire::ErrorEnvelope),
        (status = 401, description = "No ingest secret, or not one of any cluster (`unauthorized`)", body = wire::ErrorEnvelope,
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 503, description = "slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("ingest_secret" = [])),
)]
pub async fn post_logs(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let sender = match authenticated_sender(&state, &headers) {
        Ok(sender) => sender,
        Err(response) => return *response,
    };
    let bytes = match axum::body::to_bytes(body, MAX_OTLP_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::invalid("body", format!("the body is larger than {MAX_OTLP_BODY_BYTES} bytes"))
                .into_response();
        }
    };
    let decoded = body_count::off_runtime(move || decode_logs(&headers, &bytes)).await;
    let (encoding, request) = match decoded {
        Ok(decoded) => decoded,
        Err(error) => return error.into_response(),
    };
    match ingest_logs(state.app(), &sender, &request).await {
        Ok(outcome) => outcome.into_response(encoding),
        Err(error) => error.into_response(),
    }
}

/// Maps the request's records and hands them to the JSON endpoints' validation and storage.
async fn ingest_logs(app: &App, sender: &Sender, request: &ExportLogsServiceRequest) -> Result<LogsOutcome, ApiError> {
    let cluster = &sender.cluster;
    let records = otlp_map::count_log_records(request);
    if records > MAX_OTLP_LOG_RECORDS {
        return Err(ApiError::invalid(
            "body",
            format!("{records} log records: send at most {MAX_OTLP_LOG_RECORDS} per request"),
        ));
    }
    let mapped = otlp_map::map_logs(request, cluster.as_str());
    let mut outcome = LogsOutcome { rejected: mapped.rejected, ignored: mapped.ignored };
    let records = MappedRecords { gpu_allocations: mapped.gpu_allocations, traces: mapped.traces };
    let words = RefusalWords { allocation_field: &otlp_map::allocation_field, trace_reason: &otlp_map::trace_reason };
    outcome.rejected.extend(app.ingest_mapped(sender, records, &words).await?);
    outcome.rejected.sort_by_key(|(position, _)| *position);
    Ok(outcome)
}
