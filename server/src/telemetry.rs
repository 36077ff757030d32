//! slurmlens's own operation: the instruments behind `GET /metrics` (Prometheus/OpenMetrics text) and
//! the log's format (text or JSON lines, each request's lines carrying its request id).
//!
//! One registry per process, as Prometheus' client libraries keep by default: the sources, the store
//! and the HTTP edge record into [`global`] without a handle threaded through every constructor, and a
//! scrape reads it whole. The crate is `prometheus-client`, the Prometheus project's own: typed label
//! sets (a label that could hold a user name or a job id cannot be added by mistake), no global
//! recorder to install, few dependencies.
//!
//! Architecture Invariant: no label holds a user, an account, a job id, a node or a raw path. Routes are
//! the router's templates (`/api/v1/jobs/{job_id}/report`), sources and outcomes are closed lists, so the
//! series count is fixed by the code and the configured clusters, whatever the traffic.

use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

/// The content type of [`Telemetry::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency buckets, in seconds: from a cached page (a few ms) to the 30 s request timeout.
const SECONDS_BUCKETS: [f64; 13] = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// A data source slurmlens reads, as the `source` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Slurmdbd,
    VictoriaMetrics,
    VictoriaLogs,
    Pyroscope,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Self::Slurmdbd => "slurmdbd",
            Self::VictoriaMetrics => "victoriametrics",
            Self::VictoriaLogs => "victorialogs",
            Self::Pyroscope => "pyroscope",
        }
    }
}

/// What the plugin and the collectors send, as the `kind` label of ingested records names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ingested {
    /// GPU allocation records (the Slurm plugin, or OTLP logs carrying them).
    GpuRecords,
    /// eBPF trace summaries and nsys report rows, stored.
    Traces,
    /// Trace summaries already stored (a replayed batch).
    TraceDuplicates,
}

impl Ingested {
    fn label(self) -> &'static str {
        match self {
            Self::GpuRecords => "gpu_records",
            Self::Traces => "traces",
            Self::TraceDuplicates => "trace_duplicates",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    route: String,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: &'static str,
    route: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceErrorLabels {
    source: &'static str,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: &'static str,
    cluster: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

type Seconds = Family<RouteLabels, Histogram, fn() -> Histogram>;
type SourceSeconds = Family<SourceLabels, Histogram, fn() -> Histogram>;

fn seconds_histogram() -> Histogram {
    Histogram::new(SECONDS_BUCKETS)
}

/// A connection pool's state at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections open (idle or in use).
    pub open: u32,
    /// Of those, idle ones.
    pub idle: u32,
    /// The most the pool may open.
    pub max: u32,
}

impl PoolUse {
    /// A MariaDB pool's state now.
    pub fn of(pool: &sqlx::MySqlPool) -> Self {
        let idle = u32::try_from(pool.num_idle()).unwrap_or(u32::MAX);
        Self { open: pool.size(), idle, max: pool.options().get_max_connections() }
    }
}

/// Heavy requests' slots at one moment (`[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeavyUse {
    pub running: u32,
    pub limit: u32,
}

/// What the archiver's last round found and did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArchiveRound {
    /// Ended jobs without an archived report when the round read them.
    pub due: u64,
    /// Reports archived this round (with metrics or "no data").
    pub made: u64,
    /// Reports the metrics source did not answer for (tried again next round).
    pub unavailable: u64,
    /// How long the round took.
    pub took: Duration,
}

/// Every instrument of the process, and the registry that encodes them.
pub struct Telemetry {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Seconds,
    in_flight: Gauge,
    source_seconds: SourceSeconds,
    source_errors: Family<SourceErrorLabels, Counter>,
    pool_open: Family<PoolLabels, Gauge>,
    pool_idle: Family<PoolLabels, Gauge>,
    pool_max: Family<PoolLabels, Gauge>,
    heavy_running: Gauge,
    heavy_limit: Gauge,
    heavy_refused: Family<KindLabels, Counter>,
    archive_backlog: Gauge,
    archive_made: Counter,
    archive_unavailable: Counter,
    archive_round_seconds: Gauge<f64, AtomicU64>,
    archive_last_round: Gauge<f64, AtomicU64>,
    ingested: Family<KindLabels, Counter>,
}

/// The process's instruments.
pub fn global() -> &'static Telemetry {
    static TELEMETRY: LazyLock<Telemetry> = LazyLock::new(Telemetry::new);
    &TELEMETRY
}

impl Telemetry {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("slurmlens");
        let telemetry = Self {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(seconds_histogram),
            in_flight: Gauge::default(),
            source_seconds: Family::new_with_constructor(seconds_histogram),
            source_errors: Family::default(),
            pool_open: Family::default(),
            pool_idle: Family::default(),
            pool_max: Family::default(),
            heavy_running: Gauge::default(),
            heavy_limit: Gauge::default(),
            heavy_refused: Family::default(),
            archive_backlog: Gauge::default(),
            archive_made: Counter::default(),
            archive_unavailable: Counter::default(),
            archive_round_seconds: Gauge::default(),
            archive_last_round: Gauge::default(),
            ingested: Family::default(),
            registry: Registry::default(),
        };
        let build = Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]);
        registry.register("build", "The running slurmlens's version", build);
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            telemetry.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to the response's head, by method and route template",
            telemetry.request_seconds.clone(),
        );
        registry.register("http_requests_in_flight", "HTTP requests being answered now", telemetry.in_flight.clone());
        registry.register(
            "source_request_duration_seconds",
            "Time of one call to a data source (a slurmdbd statement, a VictoriaMetrics, VictoriaLogs or Pyroscope request)",
            telemetry.source_seconds.clone(),
        );
        registry.register(
            "source_errors",
            "Failed calls to a data source, by kind (unavailable, query, denied, statement_timeout, schema)",
            telemetry.source_errors.clone(),
        );
        registry.register(
            "db_pool_connections",
            "Open connections of a MariaDB pool (slurmdbd per cluster, slurmlens's own store)",
            telemetry.pool_open.clone(),
        );
        registry.register(
            "db_pool_idle_connections",
            "Idle connections of a MariaDB pool",
            telemetry.pool_idle.clone(),
        );
        registry.register("db_pool_max_connections", "The most a MariaDB pool may open", telemetry.pool_max.clone());
        registry.register(
            "heavy_requests_running",
            "Heavy requests (listings, reports, Gantt, grid, exports) running in this process",
            telemetry.heavy_running.clone(),
        );
        registry.register(
            "heavy_requests_limit",
            "[limits] heavy_total: heavy requests that may run at once",
            telemetry.heavy_limit.clone(),
        );
        registry.register(
            "heavy_requests_refused",
            "Heavy requests refused, by which bound (identity: 429, total: 503)",
            telemetry.heavy_refused.clone(),
        );
        registry.register(
            "archive_backlog_jobs",
            "Ended jobs without an archived report at the archiver's last round",
            telemetry.archive_backlog.clone(),
        );
        registry.register("archive_reports", "Reports the archiver archived", telemetry.archive_made.clone());
        registry.register(
            "archive_unavailable",
            "Reports the archiver could not make because the metrics source did not answer",
            telemetry.archive_unavailable.clone(),
        );
        registry.register(
            "archive_round_duration_seconds",
            "How long the archiver's last round took",
            telemetry.archive_round_seconds.clone(),
        );
        registry.register(
            "archive_last_round_timestamp_seconds",
            "When the archiver's last round ended (time() minus it is the archive's lag)",
            telemetry.archive_last_round.clone(),
        );
        registry.register(
            "ingested_records",
            "Records taken in from the Slurm plugin and collectors, by kind",
            telemetry.ingested.clone(),
        );
        // Counters start at zero where their labels are known in advance, so a rate over the first
        // minutes after a start is a number rather than nothing (and the dashboard's panels exist).
        let kinds: [(Source, &'static [&'static str]); 4] = [
            (Source::Slurmdbd, &["unavailable", "schema", "statement_timeout"]),
            (Source::VictoriaMetrics, &["unavailable", "query", "denied"]),
            (Source::VictoriaLogs, &["unavailable", "query"]),
            (Source::Pyroscope, &["unavailable", "query"]),
        ];
        for (source, source_kinds) in kinds {
            for &kind in source_kinds {
                let _ = telemetry.source_errors.get_or_create(&SourceErrorLabels { source: source.label(), kind });
            }
        }
        for bound in ["identity", "total"] {
            let _ = telemetry.heavy_refused.get_or_create(&KindLabels { kind: bound });
        }
        for kind in [Ingested::GpuRecords, Ingested::Traces, Ingested::TraceDuplicates] {
            let _ = telemetry.ingested.get_or_create(&KindLabels { kind: kind.label() });
        }
        Self { registry, ..telemetry }
    }

    /// One answered request: `route` is the router's template, never the path asked.
    pub fn request(&self, method: &axum::http::Method, route: &str, status: u16, took: Duration) {
        let method = method_label(method);
        let route = route.to_string();
        self.requests.get_or_create(&RequestLabels { method, route: route.clone(), status }).inc();
        self.request_seconds.get_or_create(&RouteLabels { method, route }).observe(took.as_secs_f64());
    }

    /// A request began (`+1`) or ended (`-1`).
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.inc_by(delta);
    }

    /// One call to `source` took `took`.
    pub fn source_call(&self, source: Source, took: Duration) {
        self.source_seconds.get_or_create(&SourceLabels { source: source.label() }).observe(took.as_secs_f64());
    }

    /// One call to `source` failed; `kind` is the source error's variant (`unavailable`, `query`, …).
    pub fn source_error(&self, source: Source, kind: &'static str) {
        self.source_errors.get_or_create(&SourceErrorLabels { source: source.label(), kind }).inc();
    }

    /// A pool's state now: `pool` is `slurmdbd` (one per cluster) or `store` (cluster empty).
    pub fn pool(&self, pool: &'static str, cluster: &str, state: PoolUse) {
        let labels = PoolLabels { pool, cluster: cluster.to_string() };
        self.pool_open.get_or_create(&labels).set(i64::from(state.open));
        self.pool_idle.get_or_create(&labels).set(i64::from(state.idle));
        self.pool_max.get_or_create(&labels).set(i64::from(state.max));
    }

    /// The heavy-request slots now.
    pub fn heavy(&self, state: HeavyUse) {
        self.heavy_running.set(i64::from(state.running));
        self.heavy_limit.set(i64::from(state.limit));
    }

    /// A heavy request refused: `identity` (one person's bound, 429) or `total` (everyone's, 503).
    pub fn heavy_refused(&self, bound: &'static str) {
        self.heavy_refused.get_or_create(&KindLabels { kind: bound }).inc();
    }

    /// The archiver ended a round.
    pub fn archive_round(&self, round: ArchiveRound) {
        self.archive_backlog.set(i64::try_from(round.due.saturating_sub(round.made)).unwrap_or(i64::MAX));
        self.archive_made.inc_by(round.made);
        self.archive_unavailable.inc_by(round.unavailable);
        self.archive_round_seconds.set(round.took.as_secs_f64());
        self.archive_last_round.set(chrono::Utc::now().timestamp_millis() as f64 / 1000.0);
    }

    /// `count` records of `kind` taken in.
    pub fn ingested(&self, kind: Ingested, count: u64) {
        if count > 0 {
            self.ingested.get_or_create(&KindLabels { kind: kind.label() }).inc_by(count);
        }
    }

    /// Everything, as OpenMetrics text ([`CONTENT_TYPE`]), which Prometheus, vmagent and Grafana Agent read.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; an encoder error would be a bug in a label's encoding.
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "encoding /metrics failed");
        }
        text
    }
}

/// The HTTP method as a closed label: the standard methods, anything else `other`.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// How the log is written (`[log] format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Lines for a person (`journalctl`).
    #[default]
    Text,
    /// One JSON object per line (VictoriaLogs, Loki, Elasticsearch): the event's fields at the top
    /// level, the enclosing request's span (its `request_id`, method and route) under `span`.
    Json,
}

/// The process's subscriber: events that pass `filter`, written as `format` to `writer`.
pub fn log_subscriber<W>(
    format: LogFormat,
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.finish()),
        LogFormat::Json => {
            Box::new(builder.json().flatten_event(true).with_current_span(true).with_span_list(false).finish())
        }
    }
}
