//! Stand-ins for VictoriaLogs and Grafana Pyroscope: neither is in any package registry this lab can
//! reach, so the clients are tested against these small axum servers instead. Each binds port 0 and
//! answers the documented HTTP API in the recorded format — `GET /select/logsql/query` with JSON lines
//! (one object per entry: `_time`, `_msg`, `_stream`, `_stream_id`, fields), `GET /pyroscope/render`
//! with flamebearer JSON — and records every query it received, so tests assert what the server sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

/// One request a stand-in received: its path and query parameters.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub params: BTreeMap<String, String>,
}

/// A running stand-in.
pub struct StandIn {
    pub base_url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl StandIn {
    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("stand-in log").clone()
    }

    /// Forgets what was received.
    pub fn clear(&self) {
        self.received.lock().expect("stand-in log").clear();
    }
}

#[derive(Clone)]
struct Canned {
    received: Arc<Mutex<Vec<Received>>>,
    body: Arc<String>,
    delay: Duration,
}

async fn serve(router: Router<Canned>, body: String, delay: Duration) -> StandIn {
    let received = Arc::new(Mutex::new(Vec::new()));
    let state = Canned { received: received.clone(), body: Arc::new(body), delay };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding a stand-in");
    let address = listener.local_addr().expect("stand-in address");
    let app = router.with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await.expect("stand-in serves") });
    StandIn { base_url: format!("http://{address}"), received }
}

fn record(state: &Canned, path: &str, params: BTreeMap<String, String>) {
    state.received.lock().expect("stand-in log").push(Received { path: path.into(), params });
}

/// VictoriaLogs' `/select/logsql/query`: the recorded entries as JSON lines, the latest `limit` of them
/// (as VictoriaLogs keeps the newest when a limit cuts), after `delay`.
async fn logsql_query(
    State(state): State<Canned>,
    Query(params): Query<BTreeMap<String, String>>,
) -> impl IntoResponse {
    record(&state, "/select/logsql/query", params.clone());
    tokio::time::sleep(state.delay).await;
    if !params.contains_key("query") {
        return (StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "text/plain")], "missing `query` arg".to_string());
    }
    let lines: Vec<&str> = state.body.lines().collect();
    let limit = params.get("limit").and_then(|limit| limit.parse::<usize>().ok()).unwrap_or(lines.len());
    let kept = &lines[lines.len().saturating_sub(limit)..];
    let body: String = kept.iter().map(|line| format!("{line}\n")).collect();
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/stream+json")], body)
}

/// Pyroscope's `/pyroscope/render`: the recorded flamebearer JSON, after `delay`.
async fn pyroscope_render(
    State(state): State<Canned>,
    Query(params): Query<BTreeMap<String, String>>,
) -> impl IntoResponse {
    record(&state, "/pyroscope/render", params.clone());
    tokio::time::sleep(state.delay).await;
    if params.get("format").map(String::as_str) != Some("json") || !params.contains_key("query") {
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "text/plain")],
            "query and format=json needed".into(),
        );
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], state.body.as_ref().clone())
}

/// A VictoriaLogs stand-in answering `entries` (each one JSON object, as VictoriaLogs writes them).
pub async fn victorialogs(entries: &[serde_json::Value], delay: Duration) -> StandIn {
    let body: String = entries.iter().map(|entry| format!("{entry}\n")).collect();
    serve(Router::new().route("/select/logsql/query", get(logsql_query)), body, delay).await
}

/// A Pyroscope stand-in answering `rendered` (a flamebearer profile as `format=json` gives it).
pub async fn pyroscope(rendered: &serde_json::Value, delay: Duration) -> StandIn {
    serve(Router::new().route("/pyroscope/render", get(pyroscope_render)), rendered.to_string(), delay).await
}

/// A URL where nothing listens: a port bound and released.
pub async fn closed_port_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding");
    let address = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{address}")
}
