//! Grafana Pyroscope over its HTTP render API (`/pyroscope/render?format=json`, flamebearer JSON). The
//! only code that talks to Pyroscope; `reqwest::Error` stops here. Selectors arrive built by
//! `domain::profile`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::domain::profile::Flamebearer;

/// Failures of the profile source; the caller answers "unavailable" with the message.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Not reachable, timed out, or a 5xx.
    #[error("Pyroscope is unavailable: {0}")]
    Unavailable(String),
    /// The query was refused (4xx) or the answer was not understood.
    #[error("Pyroscope refused the query: {0}")]
    Query(String),
}

impl ProfileError {
    /// What a viewer is told: which source and what kind of failure, never the detail (an address, a
    /// query, a body), which goes to the log.
    pub fn for_viewer(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "Pyroscope did not answer",
            Self::Query(_) => "Pyroscope refused the query or sent what could not be read",
        }
    }
}

impl ProfileError {
    /// The variant, as `/metrics` labels it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Query(_) => "query",
        }
    }
}

impl From<reqwest::Error> for ProfileError {
    fn from(error: reqwest::Error) -> Self {
        if error.is_decode() { Self::Query(error.to_string()) } else { Self::Unavailable(error.to_string()) }
    }
}

/// A Pyroscope client.
#[derive(Clone)]
pub struct Pyroscope {
    http: reqwest::Client,
    base: String,
}

/// The render answer: the flame graph and its metadata (`format` must be `single`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Rendered {
    #[serde(default)]
    pub flamebearer: Flamebearer,
    #[serde(default)]
    pub metadata: RenderMetadata,
}

/// What the render answer says about itself.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RenderMetadata {
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub units: String,
}

impl Pyroscope {
    /// `base_url` is Pyroscope's root (`http://pyroscope:4040`); every request ends within `timeout`.
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, ProfileError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(2)))
            .build()
            .map_err(|e| ProfileError::Query(format!("building the HTTP client: {e}")))?;
        Ok(Self { http, base: base_url.trim_end_matches('/').to_string() })
    }

    /// The merged profile of `selector` over `[from, until]`, at most `max_nodes` functions. Timed, and
    /// its failures counted, for `/metrics`.
    pub async fn render(
        &self,
        selector: &str,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        max_nodes: u32,
    ) -> Result<Rendered, ProfileError> {
        let started = std::time::Instant::now();
        let answer = self.render_once(selector, from, until, max_nodes).await;
        let telemetry = crate::telemetry::global();
        telemetry.source_call(crate::telemetry::Source::Pyroscope, started.elapsed());
        if let Err(error) = &answer {
            telemetry.source_error(crate::telemetry::Source::Pyroscope, error.kind());
        }
        answer
    }

    async fn render_once(
        &self,
        selector: &str,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        max_nodes: u32,
    ) -> Result<Rendered, ProfileError> {
        let params = [
            ("query", selector.to_string()),
            ("from", from.timestamp().to_string()),
            ("until", until.timestamp().to_string()),
            ("format", "json".to_string()),
            ("max-nodes", max_nodes.to_string()),
        ];
        let response = self.http.get(format!("{}/pyroscope/render", self.base)).query(&params).send().await?;
        let status = response.status();
        let body = response.text().await?;
        let head: String = body.lines().next().unwrap_or_default().chars().take(300).collect();
        if status.is_server_error() {
            return Err(ProfileError::Unavailable(format!("HTTP {status}: {head}")));
        }
        if !status.is_success() {
            return Err(ProfileError::Query(format!("HTTP {status}: {head}")));
        }
        let rendered: Rendered =
            serde_json::from_str(&body).map_err(|e| ProfileError::Query(format!("not flamebearer JSON: {e}")))?;
        if !rendered.metadata.format.is_empty() && rendered.metadata.format != "single" {
            return Err(ProfileError::Query(format!("a `{}` flame graph, not `single`", rendered.metadata.format)));
        }
        Ok(rendered)
    }
}
