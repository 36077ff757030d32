//! VictoriaMetrics over its Prometheus-compatible HTTP API (single node, or vmselect with its
//! `/select/<tenant>/prometheus` prefix in the configured URL, directly or behind vmauth with basic
//! auth or a bearer token). `reqwest::Error` stops here.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

/// Failures of the metrics source.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// Not reachable, timed out, or a 5xx: the caller degrades to "metrics unavailable".
    #[error("VictoriaMetrics is unavailable: {0}")]
    Unavailable(String),
    /// The query was refused (4xx) or the answer was not understood.
    #[error("VictoriaMetrics refused the query: {0}")]
    Query(String),
    /// The server in front (vmauth) refused our credentials (401, 403): the site's configuration,
    /// not the query, is wrong.
    #[error("VictoriaMetrics refused slurmlens's credentials: {0}")]
    Denied(String),
}

impl VmError {
    /// What a viewer is told: which source and what kind of failure, never the detail (an address, a
    /// query, a body), which goes to the log.
    pub fn for_viewer(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "VictoriaMetrics did not answer",
            Self::Query(_) => "VictoriaMetrics refused the query or sent what could not be read",
            Self::Denied(_) => {
                "VictoriaMetrics refused slurmlens's credentials ([victoriametrics] url's user and password, or bearer_token)"
            }
        }
    }
}

impl VmError {
    /// The variant, as `/metrics` labels it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Query(_) => "query",
            Self::Denied(_) => "denied",
        }
    }
}

impl From<reqwest::Error> for VmError {
    fn from(error: reqwest::Error) -> Self {
        // The URL is left out: ours carries no credentials (they are taken out in `new`), but a
        // redirect's might.
        let error = error.without_url();
        if error.is_decode() { Self::Query(error.to_string()) } else { Self::Unavailable(error.to_string()) }
    }
}

/// One series of a query answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    /// `(epoch seconds, value)`; NaN and blank DCGM sentinels are dropped.
    pub points: Vec<(i64, f64)>,
}

/// How every call authenticates to the server in front of VictoriaMetrics (vmauth).
#[derive(Clone, Default)]
enum Credentials {
    #[default]
    None,
    Basic {
        user: String,
        password: Option<String>,
    },
    Bearer(String),
}

/// A VictoriaMetrics client.
#[derive(Clone)]
pub struct VictoriaMetrics {
    http: reqwest::Client,
    /// The API root without credentials, its path prefix kept (`/select/0/prometheus`).
    base: String,
    credentials: Credentials,
    /// A second server every import is written to as well (the lab's current VictoriaMetrics beside
    /// Debian's); queries never go there.
    import_mirror: Option<Box<VictoriaMetrics>>,
}

#[derive(Deserialize)]
#[serde(bound = "T: Deserialize<'de>")]
struct Envelope<T> {
    status: String,
    #[serde(default = "Option::default")]
    data: Option<T>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct QueryData {
    result: Vec<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, Sample)>,
    #[serde(default)]
    value: Option<(f64, Sample)>,
}

/// A sample value: Prometheus' API sends numbers as strings (`"98.5"`, `"NaN"`); parsed in place,
/// without allocating a string per point (a report reads millions of them).
struct Sample(f64);

impl<'de> Deserialize<'de> for Sample {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Sample;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sample value as a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Sample, E> {
                Ok(Sample(text.parse().unwrap_or(f64::NAN)))
            }
            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Sample, E> {
                Ok(Sample(value))
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Sample, E> {
                Ok(Sample(value as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Sample, E> {
                Ok(Sample(value as f64))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// DCGM reports "no value" as 0x7ffffffffffffff0 and up; those are not measurements.
const DCGM_BLANK: f64 = 9.223_372_036_854_775e18;

fn parse_point((timestamp, Sample(value)): &(f64, Sample)) -> Option<(i64, f64)> {
    (value.is_finite() && *value < DCGM_BLANK).then_some((*timestamp as i64, *value))
}

impl RawSeries {
    fn into_series(self) -> Series {
        let mut points: Vec<(i64, f64)> = self.values.iter().filter_map(parse_point).collect();
        if let Some(point) = self.value.as_ref().and_then(parse_point) {
            points.push(point);
        }
        Series { labels: self.metric, points }
    }
}

impl VictoriaMetrics {
    /// `base_url` is the Prometheus API root (`http://vm:8428` or `http://vmselect:8481/select/0/prometheus`);
    /// a user and password in it are sent as basic auth on every call (and kept out of every message).
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, VmError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(2)))
            .build()
            .map_err(|e| VmError::Query(format!("building the HTTP client: {e}")))?;
        let mut url = reqwest::Url::parse(base_url.trim_end_matches('/'))
            .map_err(|e| VmError::Query(format!("the VictoriaMetrics URL does not parse: {e}")))?;
        let decode = |text: &str| percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned();
        let credentials = if url.username().is_empty() {
            Credentials::None
        } else {
            Credentials::Basic { user: decode(url.username()), password: url.password().map(decode) }
        };
        // Neither can fail on an http(s) URL, which has a host; another scheme fails at the first call.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let base = url.as_str().trim_end_matches('/').to_string();
        Ok(Self { http, base, credentials, import_mirror: None })
    }

    /// The same client sending `token` as a bearer token on every call (vmauth's `bearer_token`).
    pub fn with_bearer_token(mut self, token: Option<String>) -> Self {
        if let Some(token) = token {
            self.credentials = Credentials::Bearer(token);
        }
        self
    }

    /// The same client also writing every import into `mirror` (the demo's seeder, for a lab with two
    /// VictoriaMetrics versions); queries still go to this one only.
    pub fn with_import_mirror(mut self, mirror: Option<VictoriaMetrics>) -> Self {
        self.import_mirror = mirror.map(Box::new);
        self
    }

    /// The API root, without credentials.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// A request to `url` with our credentials.
    fn request(&self, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url);
        match &self.credentials {
            Credentials::None => request,
            Credentials::Basic { user, password } => request.basic_auth(user, password.as_ref()),
            Credentials::Bearer(token) => request.bearer_auth(token),
        }
    }

    /// Whether a page beside this server (vmui, at `url`) answers 200 with our credentials. Debian's
    /// VictoriaMetrics is built without vmui: its links would all be 404s.
    pub async fn page_answers(&self, url: &str) -> bool {
        match self.request(reqwest::Method::GET, url.to_string()).send().await {
            Ok(response) => response.status().is_success(),
            Err(_) => false,
        }
    }

    /// [`Self::send_form`], timed and its failures counted for `/metrics`.
    async fn post<T: for<'de> Deserialize<'de>>(&self, path: &str, form: &[(&str, String)]) -> Result<T, VmError> {
        let started = std::time::Instant::now();
        let answer = self.send_form(path, form).await;
        let telemetry = crate::telemetry::global();
        telemetry.source_call(crate::telemetry::Source::VictoriaMetrics, started.elapsed());
        if let Err(error) = &answer {
            telemetry.source_error(crate::telemetry::Source::VictoriaMetrics, error.kind());
        }
        answer
    }

    async fn send_form<T: for<'de> Deserialize<'de>>(&self, path: &str, form: &[(&str, String)]) -> Result<T, VmError> {
        let started = std::time::Instant::now();
        let response = self.request(reqwest::Method::POST, format!("{}{path}", self.base)).form(form).send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        let query = form.first().map(|(_, query)| query.as_str()).unwrap_or_default();
        tracing::debug!(path, %status, bytes = body.len(), ms = started.elapsed().as_millis() as u64, query, "VictoriaMetrics answered");
        if status.is_server_error() {
            return Err(VmError::Unavailable(format!("{path} answered {status}")));
        }
        // Older vmauth (Debian's 1.79) answers an unknown token 400 with this text, not 401.
        let unknown_token =
            status == reqwest::StatusCode::BAD_REQUEST && body.starts_with(b"cannot find the provided auth token");
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN || unknown_token {
            // vmauth's body echoes the credentials it did not find: it is not kept.
            return Err(VmError::Denied(format!("{path} answered {status}")));
        }
        let envelope: Envelope<T> = serde_json::from_slice(&body)
            .map_err(|e| VmError::Query(format!("{path} answered {status} with unreadable JSON: {e}")))?;
        if envelope.status != "success" {
            return Err(VmError::Query(envelope.error.unwrap_or_else(|| format!("{path} answered {status}"))));
        }
        envelope.data.ok_or_else(|| VmError::Query(format!("{path} answered without data")))
    }

    /// `/api/v1/query_range`.
    pub async fn query_range(
        &self,
        query: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        step_s: u64,
    ) -> Result<Vec<Series>, VmError> {
        let form = [
            ("query", query.to_string()),
            ("start", start.timestamp().to_string()),
            ("end", end.timestamp().to_string()),
            ("step", format!("{step_s}s")),
        ];
        let data: QueryData = self.post("/api/v1/query_range", &form).await?;
        Ok(data.result.into_iter().map(RawSeries::into_series).collect())
    }

    /// `/api/v1/query` at one instant.
    pub async fn query(&self, query: &str, at: DateTime<Utc>) -> Result<Vec<Series>, VmError> {
        let form = [("query", query.to_string()), ("time", at.timestamp().to_string())];
        let data: QueryData = self.post("/api/v1/query", &form).await?;
        Ok(data.result.into_iter().map(RawSeries::into_series).collect())
    }

    /// `/api/v1/series`: label sets of the series matching `selector` in the window.
    pub async fn series(
        &self,
        selector: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<BTreeMap<String, String>>, VmError> {
        let form = [
            ("match[]", selector.to_string()),
            ("start", start.timestamp().to_string()),
            ("end", end.timestamp().to_string()),
        ];
        self.post("/api/v1/series", &form).await
    }

    /// `/api/v1/import` with JSON lines (`{"metric":{…},"values":[…],"timestamps":[ms…]}`), then a flush
    /// so the samples are queryable at once. Used by the demo and by tests, never by a request.
    ///
    /// A refused import is tried twice more, a second apart, and the last refusal carries VictoriaMetrics'
    /// own reason: a busy single-node server on a small machine can turn a large import away once.
    pub async fn import_json_lines(&self, body: String) -> Result<(), VmError> {
        // Debian's 1.79 skips a whole line holding a `null` value (serde_json's NaN) and still answers 204;
        // current releases drop only that sample. Refused on both, so neither loses a series silently.
        if has_null_value(&body) {
            return Err(VmError::Query("an import line holds a null value: leave the sample out".into()));
        }
        match &self.import_mirror {
            None => self.import_here(body).await,
            Some(mirror) => {
                let (here, there) = tokio::join!(self.import_here(body.clone()), mirror.import_here(body));
                here.and(there)
            }
        }
    }

    async fn import_here(&self, body: String) -> Result<(), VmError> {
        let root = self.base.trim_end_matches("/prometheus");
        let mut attempt = 1;
        loop {
            let response =
                self.request(reqwest::Method::POST, format!("{root}/api/v1/import")).body(body.clone()).send().await?;
            let status = response.status();
            if status.is_success() {
                break;
            }
            let reason = response.text().await.unwrap_or_default();
            if attempt == 3 {
                return Err(VmError::Query(format!("import answered {status}: {}", reason.trim())));
            }
            tracing::warn!(%status, reason = reason.trim(), attempt, "VictoriaMetrics refused an import; trying again");
            tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
            attempt += 1;
        }
        let flush = self.request(reqwest::Method::GET, format!("{root}/internal/force_flush")).send().await?;
        if !flush.status().is_success() {
            return Err(VmError::Query(format!("force_flush answered {}", flush.status())));
        }
        Ok(())
    }
}

/// Whether a JSON-lines import body holds a `null` among its values (a label value spelling one out is
/// not a real case).
/// One pass over the body (an import is megabytes): every `null` with `[` or `,` before it and `,` or `]`
/// after it, which in this format only a value array holds (a label's `"null"` has quotes around it).
fn has_null_value(body: &str) -> bool {
    let bytes = body.as_bytes();
    memchr::memmem::find_iter(bytes, b"null").any(|at| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + 4).copied();
        matches!(before, Some(b'[' | b',')) && matches!(after, Some(b',' | b']'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_with_a_null_value_is_told_apart() {
        let line = |values: &str| {
            format!(r#"{{"metric":{{"__name__":"m","k":"null"}},"values":{values},"timestamps":[1,2]}}"#)
        };
        assert!(!has_null_value(&line("[1,2.5]")));
        for values in ["[null,1]", "[1,null]", "[1,null,2]", "[null]"] {
            assert!(has_null_value(&line(values)), "{values}");
        }
    }

    #[test]
    fn drops_nan_and_dcgm_blanks() {
        let raw = RawSeries {
            metric: BTreeMap::new(),
            values: vec![(10.0, Sample(1.5)), (25.0, Sample(f64::NAN)), (40.0, Sample(9_223_372_036_854_775_794.0))],
            value: None,
        };
        assert_eq!(raw.into_series().points, vec![(10, 1.5)]);
    }

    #[test]
    fn credentials_are_masked_wherever_the_configuration_is_shown() {
        let config = crate::config::Config {
            victoriametrics: Some(crate::config::VictoriaMetricsConfig {
                url: "http://slurmlens:vmpw@vmauth:8427/select/0/prometheus".into(),
                timeout_ms: 5000,
                readings_max_age_s: 3600,
                bearer_token: Some(crate::config::IngestSecret("vm-t0ken".into())),
            }),
            ..crate::config::Config::default()
        };
        let shown = format!("{:#?}", config.redacted());
        assert!(!shown.contains("vmpw") && !shown.contains("vm-t0ken"), "{shown}");
        assert!(shown.contains("http://slurmlens:***@vmauth:8427/select/0/prometheus"), "{shown}");
    }

    #[test]
    fn credentials_leave_the_url_and_its_path_prefix_stays() {
        let vm =
            VictoriaMetrics::new("http://slurm%40lens:p%3Ass@vmauth:8427/select/0/prometheus/", Duration::from_secs(1))
                .expect("a client");
        assert_eq!(vm.base_url(), "http://vmauth:8427/select/0/prometheus");
        assert!(matches!(&vm.credentials, Credentials::Basic { user, password }
            if user == "slurm@lens" && password.as_deref() == Some("p:ss")));
        let vm = VictoriaMetrics::new("http://vm:8428", Duration::from_secs(1)).expect("a client");
        assert_eq!(vm.base_url(), "http://vm:8428");
        assert!(
            matches!(vm.with_bearer_token(Some("t".into())).credentials, Credentials::Bearer(token) if token == "t")
        );
    }
}
