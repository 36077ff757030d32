//! VictoriaLogs over its HTTP query API (`/select/logsql/query`, JSON lines). The only code that talks
//! to VictoriaLogs; `reqwest::Error` stops here. Queries arrive built by `domain::logsql`.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::domain::logs::LogEntry;
use crate::domain::logsql::FieldName;

/// Failures of the log source; the caller answers "unavailable" with the message.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// Not reachable, timed out, or a 5xx.
    #[error("VictoriaLogs is unavailable: {0}")]
    Unavailable(String),
    /// The query was refused (4xx) or the answer was not understood.
    #[error("VictoriaLogs refused the query: {0}")]
    Query(String),
}

impl LogsError {
    /// What a viewer is told: which source and what kind of failure, never the detail (an address, a
    /// query, a body), which goes to the log.
    pub fn for_viewer(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "VictoriaLogs did not answer",
            Self::Query(_) => "VictoriaLogs refused the query or sent what could not be read",
        }
    }
}

impl LogsError {
    /// The variant, as `/metrics` labels it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Query(_) => "query",
        }
    }
}

impl From<reqwest::Error> for LogsError {
    fn from(error: reqwest::Error) -> Self {
        if error.is_decode() { Self::Query(error.to_string()) } else { Self::Unavailable(error.to_string()) }
    }
}

/// A VictoriaLogs client.
#[derive(Clone)]
pub struct VictoriaLogs {
    http: reqwest::Client,
    base: String,
    node_field: FieldName,
}

/// One answer: the entries read (in time order) and whether the limit cut them.
#[derive(Debug, Clone, PartialEq)]
pub struct LogAnswer {
    pub entries: Vec<LogEntry>,
    pub truncated: bool,
}

impl VictoriaLogs {
    /// `base_url` is VictoriaLogs' root (`http://vlogs:9428`); every request ends within `timeout`.
    pub fn new(base_url: &str, timeout: Duration, node_field: FieldName) -> Result<Self, LogsError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(2)))
            .build()
            .map_err(|e| LogsError::Query(format!("building the HTTP client: {e}")))?;
        Ok(Self { http, base: base_url.trim_end_matches('/').to_string(), node_field })
    }

    /// The field naming the node an entry came from.
    pub fn node_field(&self) -> &FieldName {
        &self.node_field
    }

    /// Runs `query` over `[start, end]` and reads at most `limit` entries (VictoriaLogs then keeps the
    /// latest ones), sorted by time. Timed, and its failures counted, for `/metrics`.
    pub async fn query(
        &self,
        query: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        limit: usize,
    ) -> Result<LogAnswer, LogsError> {
        let started = std::time::Instant::now();
        let answer = self.query_once(query, start, end, limit).await;
        let telemetry = crate::telemetry::global();
        telemetry.source_call(crate::telemetry::Source::VictoriaLogs, started.elapsed());
        if let Err(error) = &answer {
            telemetry.source_error(crate::telemetry::Source::VictoriaLogs, error.kind());
        }
        answer
    }

    async fn query_once(
        &self,
        query: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        limit: usize,
    ) -> Result<LogAnswer, LogsError> {
        let params = [
            ("query", query.to_string()),
            ("start", start.to_rfc3339_opts(SecondsFormat::Secs, true)),
            ("end", end.to_rfc3339_opts(SecondsFormat::Secs, true)),
            ("limit", limit.to_string()),
        ];
        let response = self.http.get(format!("{}/select/logsql/query", self.base)).query(&params).send().await?;
        let status = response.status();
        let body = response.text().await?;
        if status.is_server_error() {
            return Err(LogsError::Unavailable(format!("HTTP {status}: {}", first_line(&body))));
        }
        if !status.is_success() {
            return Err(LogsError::Query(format!("HTTP {status}: {}", first_line(&body))));
        }
        let mut entries = Vec::new();
        for line in body.lines().filter(|line| !line.trim().is_empty()) {
            entries.push(self.entry(line)?);
        }
        entries.sort_by_key(|entry| entry.time);
        let truncated = entries.len() >= limit;
        Ok(LogAnswer { entries, truncated })
    }

    /// One JSON line: `_time` (RFC 3339, nanoseconds), `_msg`, the node field, and fields we ignore.
    /// A line that came in as syslog keeps its program apart (`app_name`, `proc_id`); it is put back in
    /// front of the message, as syslog files show it (`slurmstepd: [181.batch] error: …`), so a reader
    /// (and the classifier) sees which program wrote it.
    fn entry(&self, line: &str) -> Result<LogEntry, LogsError> {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(line).map_err(|e| LogsError::Query(format!("a line is not a JSON object: {e}")))?;
        let text = |name: &str| object.get(name).and_then(serde_json::Value::as_str);
        let time = text("_time")
            .and_then(|time| DateTime::parse_from_rfc3339(time).ok())
            .ok_or_else(|| LogsError::Query("an entry has no RFC 3339 `_time`".into()))?
            .with_timezone(&Utc);
        Ok(LogEntry {
            time,
            node: text(self.node_field.as_str()).map(String::from),
            message: with_program(text("_msg").unwrap_or_default(), text("app_name"), text("proc_id")),
        })
    }
}

/// `program[pid]: message` for a syslog line (RFC 5424's nil value `-` is no program or pid); the
/// message alone when it has no program or already starts with it (RFC 3164 senders keep the tag in).
fn with_program(message: &str, program: Option<&str>, pid: Option<&str>) -> String {
    let Some(program) = program.filter(|program| !program.is_empty() && *program != "-") else {
        return message.to_string();
    };
    if message.starts_with(program) {
        return message.to_string();
    }
    match pid.filter(|pid| !pid.is_empty() && *pid != "-") {
        Some(pid) => format!("{program}[{pid}]: {message}"),
        None => format!("{program}: {message}"),
    }
}

fn first_line(body: &str) -> String {
    body.lines().next().unwrap_or_default().chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::with_program;

    #[test]
    fn a_syslog_lines_program_is_put_back_in_front_of_its_message() {
        let line = "[181.batch] error: Detected 1 oom-kill event(s) in StepId=181.batch.";
        assert_eq!(with_program(line, Some("slurmstepd"), Some("-")), format!("slurmstepd: {line}"));
        assert_eq!(with_program("launch task", Some("slurmd"), Some("2211")), "slurmd[2211]: launch task");
        assert_eq!(with_program("kernel: NVRM: Xid", Some("kernel"), None), "kernel: NVRM: Xid", "already there");
        assert_eq!(with_program("plain", None, Some("12")), "plain");
        assert_eq!(with_program("plain", Some("-"), None), "plain", "RFC 5424's nil value");
    }
}
