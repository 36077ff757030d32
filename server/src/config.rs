//! Typed configuration: one TOML file, overridden by `SLURMLENS_*` environment variables.
//!
//! Only `main` reads the file and the environment; everything below receives a [`Config`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::domain::cluster::ClusterName;
use crate::domain::series::SeriesCatalog;

mod addresses;
mod notify;
pub use addresses::{ListenAddress, ProxyNet};
pub use notify::{NotifyConfig, WebhookConfig};

/// The whole configuration of one slurmlens server. Holds nothing two replicas could disagree on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the HTTP server listens: `host:port`, or `unix:/path` for a Unix socket the site's proxy
    /// connects to (its file mode 0660: the proxy's user must share slurmlens's group). On the socket
    /// the proxy's identity headers are believed without `trusted_proxies`: who may connect is decided
    /// by the file's permissions, not by an address another local user could also send from.
    pub listen: ListenAddress,
    /// Base URL users reach the server at (printed in links).
    pub public_url: String,
    /// Slurm clusters served; the first is the default for requests that name none.
    /// A list, or one comma-separated string (`lab,sakura`) as environment variables give it.
    #[serde(deserialize_with = "list_or_comma_string")]
    pub clusters: Vec<ClusterName>,
    pub slurmdbd: SlurmDbdConfig,
    /// slurmlens's own database (later issues: archive, GPU records).
    #[serde(default)]
    pub database: Option<DatabaseConfig>,
    #[serde(default)]
    pub victoriametrics: Option<VictoriaMetricsConfig>,
    /// The site's VictoriaLogs (logs of a job's nodes in its window); none: "not configured".
    #[serde(default)]
    pub victorialogs: Option<VictoriaLogsConfig>,
    /// The site's Grafana Pyroscope (eBPF CPU profiles of a job's cgroup); none: "not configured".
    #[serde(default)]
    pub pyroscope: Option<PyroscopeConfig>,
    pub access: AccessConfig,
    /// Metric names and labels of this site's exporters (defaults: dcgm-exporter, rdma_exporter).
    #[serde(default)]
    pub metrics: SeriesCatalog,
    #[serde(default)]
    pub report: ReportConfig,
    /// Who may post GPU records from the Slurm plugin.
    #[serde(default)]
    pub ingest: IngestConfig,
    /// What one viewer may cost: the widest window a non-staff viewer may list, and how many heavy
    /// requests (listings, reports, the Gantt, the grid, exports) run at once.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// The HTTP listener's own bounds: how long a client may take to send a request's headers, and how
    /// many connections may be open at once.
    #[serde(default)]
    pub http: HttpConfig,
    /// The web pages' built site (`web/build.sh` writes `target/site`); none: pages without their wasm bundle.
    #[serde(default)]
    pub site_root: Option<PathBuf>,
    /// Rack layout for the grid and Gantt (TOML, see `crates/slurm/src/topology.rs`); none: racks from node names.
    #[serde(default)]
    pub topology: Option<PathBuf>,
    /// The zone the pages show times in until a viewer chooses another in the header: `UTC` (the
    /// default) or an IANA name (`Europe/Berlin`). The API always speaks UTC.
    #[serde(default)]
    pub time_zone: slurmlens_web::clock::Zone,
    /// Who may read `GET /metrics`, and an optional listener of its own.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// How the log is written (`SLURMLENS_LOG` filters it).
    #[serde(default)]
    pub log: LogConfig,
    /// Where a report's charts link to: Grafana Explore, a per-job dashboard, VictoriaMetrics' vmui.
    #[serde(default)]
    pub links: LinksConfig,
    /// Notifications: their rules, channels (e-mail, webhooks) and limits; off unless enabled.
    #[serde(default)]
    pub notify: NotifyConfig,
    /// Showback (`/api/v1/usage`): the grid's carbon intensity CO₂ is counted at.
    #[serde(default)]
    pub usage: UsageConfig,
    /// Advice at submission (`GET /api/v1/advice`, printed by the cli_filter plugin).
    #[serde(default)]
    pub advice: AdviceConfig,
    /// A job's own output and error files on the page, where the site lets slurmlens read them.
    #[serde(default)]
    pub job_output: JobOutputConfig,
}

/// `[job_output]`: the tail of a job's output and error files, shown to its owner and staff. Read only
/// under `roots` (a shared file system the server mounts), only a regular file that belongs to the job's
/// owner; with no root, the page says where the files are and reads none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobOutputConfig {
    pub roots: Vec<std::path::PathBuf>,
    /// The most bytes read from the end of each file.
    pub tail_bytes: u64,
}

impl Default for JobOutputConfig {
    fn default() -> Self {
        Self { roots: Vec::new(), tail_bytes: 16 * 1024 }
    }
}

/// `[usage]`: showback's settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UsageConfig {
    /// Grams of CO₂ per kWh of the site's electricity; none: usage reports energy without CO₂.
    pub co2_g_per_kwh: Option<f64>,
}

/// `[advice]`: one line of advice from a user's own history when they submit a job.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdviceConfig {
    /// Off: `GET /api/v1/advice` answers `advice: null` to everyone (the site's opt-out).
    pub enabled: bool,
    /// The server's own deadline for one answer (milliseconds): past it, the answer is `advice: null`.
    pub deadline_ms: u64,
    /// How far back a user's finished runs are read (days).
    pub look_back_days: u32,
    /// munged's socket, for verifying the plugin's MUNGE credentials; none: `unmunge`'s default.
    pub munge_socket: Option<PathBuf>,
    /// The `unmunge` client.
    pub unmunge: PathBuf,
}

impl Default for AdviceConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_ms: 250,
            look_back_days: 60,
            munge_socket: None,
            unmunge: PathBuf::from("unmunge"),
        }
    }
}

/// `GET /metrics` (Prometheus text): on the main listener to staff, and to a scraper that sends
/// `Authorization: Bearer <token>`; on `listen`, if set, to anyone who reaches that address (bind it to
/// loopback or a management network), with nothing else served there.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The scraper's bearer token (at least 16 characters); none: staff only on the main listener.
    pub token: Option<IngestSecret>,
    /// A second address serving `/metrics` alone, without sign-in.
    pub listen: Option<SocketAddr>,
}

/// The log's format: `text` (the default) or `json` (one object per line, with the request id).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: crate::telemetry::LogFormat,
}

/// `POST /api/v1/gpu_allocations`: one secret per cluster, shared with that cluster's Slurm plugin
/// (`[ingest.secrets] lab = "…"`, or `SLURMLENS_INGEST__SECRETS__LAB`). No secret: every post is a 401.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    pub secrets: BTreeMap<String, IngestSecret>,
    /// Clusters whose nodes each hold a secret of their own instead of the cluster's: the node name,
    /// `:`, and the hex HMAC-SHA256 of the node name keyed with the cluster's secret
    /// (`printf %s gpu001 | openssl dgst -sha256 -hmac "$SECRET"`). A node's secret is accepted only
    /// for records of that node; the cluster's secret then stays on the server and central collectors.
    pub node_secrets: Vec<String>,
}

/// A shared secret; `Debug` (and so `slurmlens config`) never prints it.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct IngestSecret(pub String);

impl std::fmt::Debug for IngestSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// When reports are archived, and how the archiver backfills the digests of finished jobs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportConfig {
    /// A report is archived once its job ended this long ago, so late scrapes are in.
    pub archive_delay_s: u64,
    /// How often the archiver looks for ended jobs without a report (0 = never; reports are then
    /// archived on read only).
    pub archive_interval_s: u64,
    /// How far back the archiver makes the reports of finished jobs: VictoriaMetrics' retention
    /// (`-retentionPeriod`, one month by default, so 31 days). An older job's report can only say
    /// "no data"; a longer setting spends reports on that.
    pub backfill_days: u32,
    /// Reports the archiver makes at once (each sends its queries to VictoriaMetrics together).
    pub backfill_concurrency: u32,
    /// The archiver's pause after each report, so it leaves VictoriaMetrics and slurmdbd headroom.
    pub backfill_pause_ms: u64,
    /// A running job's report is made once and served again to the viewers who ask within this many
    /// seconds (0 = only to those who asked while it was being made). At most 600.
    pub live_cache_s: u64,
    /// Read long jobs through the recording rules of `slurmlens rules` (`RulesSettings` says how).
    pub recording_rules: bool,
    pub rules_prefix: String,
    pub rules_min_window_s: u64,
    pub rules_max_lag_s: u64,
}

impl Default for ReportConfig {
    fn default() -> Self {
        Self {
            archive_delay_s: 120,
            archive_interval_s: 60,
            backfill_days: 31,
            backfill_concurrency: 2,
            backfill_pause_ms: 100,
            live_cache_s: 30,
            recording_rules: true,
            rules_prefix: "slurmlens".into(),
            rules_min_window_s: 2 * 86_400,
            rules_max_lag_s: 900,
        }
    }
}

/// slurmdbd's MariaDB, read with a `SELECT`-only user.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmDbdConfig {
    pub url: String,
    pub max_connections: u32,
    pub acquire_timeout_ms: u64,
    /// The longest any one statement may run on slurmdbd's database (MariaDB's `max_statement_time`,
    /// set on every connection); past it MariaDB stops the statement and the request says to narrow it.
    #[serde(default)]
    pub statement_timeout_s: StatementTimeout,
}

/// A statement's time limit on slurmdbd's database, in seconds (fractions allowed): from 0.001 to 3600.
/// MariaDB's `max_statement_time` takes the same number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct StatementTimeout(f64);

impl StatementTimeout {
    /// The limit in seconds, as `SET SESSION max_statement_time` takes it.
    pub fn seconds(self) -> f64 {
        self.0
    }
}

impl Default for StatementTimeout {
    fn default() -> Self {
        Self(10.0)
    }
}

impl TryFrom<f64> for StatementTimeout {
    type Error = String;

    fn try_from(seconds: f64) -> Result<Self, String> {
        // MariaDB reads 0 as "no limit", which is exactly what this setting exists to prevent.
        if seconds.is_finite() && (0.001..=3600.0).contains(&seconds) {
            Ok(Self(seconds))
        } else {
            Err(format!("statement_timeout_s must be from 0.001 to 3600 seconds, not {seconds}"))
        }
    }
}

impl From<StatementTimeout> for f64 {
    fn from(timeout: StatementTimeout) -> f64 {
        timeout.0
    }
}

/// What one viewer may cost the server and slurmdbd's database.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// The widest window (`end - start`, in days) a viewer who is not staff may list jobs or node
    /// events over; wider is a 400 that says this limit. Staff are not capped.
    pub window_days: NonZeroU32,
    /// Heavy requests (job listings, reports, the Gantt, the grid, exports) one identity may have
    /// running at once; one more is a 429 with Retry-After.
    pub heavy_per_identity: NonZeroU32,
    /// Heavy requests running at once across everyone; one more is a 503 with Retry-After. Keep it
    /// below `[slurmdbd] max_connections` times a few, so a burst cannot hold every connection.
    pub heavy_total: NonZeroU32,
    /// The two bounds above hold across the replicas on one `[database]` (slots as MariaDB named
    /// locks, `http/limits.rs`), not per process: set it when several replicas share a load balancer.
    pub shared: bool,
    /// Finished jobs the Gantt and the grid keep in memory for staff's windows (about 200–230 bytes each in all;
    /// a month of a busy 100-node cluster is 200,000), so a wide window is read from slurmdbd once
    /// and not at every view; 0 keeps none.
    pub chart_history_jobs: u32,
    /// Days of finished jobs a server reads into that history at start, and keeps there (every few
    /// minutes it reads the hours that ended or were let go since), so staff's first wide Gantt after
    /// a start is drawn from memory too; 0 reads only what windows ask for. Keep the jobs of these
    /// days below `chart_history_jobs`.
    pub chart_history_days: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            window_days: const { NonZeroU32::new(31).unwrap() },
            heavy_per_identity: const { NonZeroU32::new(4).unwrap() },
            heavy_total: const { NonZeroU32::new(32).unwrap() },
            shared: false,
            chart_history_jobs: 300_000,
            chart_history_days: 30,
        }
    }
}

/// The listener's bounds against clients that open connections and send slowly (slowloris).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// How long a client may take to send a request's headers; the same bound applies to a kept-alive
    /// connection waiting for its next request. Past it the connection is closed.
    pub header_read_timeout_ms: NonZeroU64,
    /// Connections open at once; one more is answered 503 and closed at once.
    pub max_connections: NonZeroU32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_ms: const { NonZeroU64::new(10_000).unwrap() },
            max_connections: const { NonZeroU32::new(4096).unwrap() },
        }
    }
}

/// slurmlens's own MariaDB schema.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    pub url: String,
}

/// VictoriaMetrics (single node or vmselect).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VictoriaMetricsConfig {
    /// The Prometheus API root: `http://vm:8428`, `http://vmselect:8481/select/0/prometheus`, or vmauth
    /// with basic auth in the URL (`http://user:password@vmauth:8427/select/0/prometheus`, masked).
    pub url: String,
    /// A bearer token sent on every call (vmauth's `bearer_token`); never printed nor logged.
    #[serde(default)]
    pub bearer_token: Option<IngestSecret>,
    /// Upper bound of all metric queries of one report together.
    #[serde(default = "default_vm_timeout_ms")]
    pub timeout_ms: u64,
    /// How much older than the moment shown the grid's readings may be: it shows the latest samples
    /// within this bound, says how old they are, and calls a GPU without one "not monitored".
    #[serde(default = "default_readings_max_age_s")]
    pub readings_max_age_s: u64,
}

fn default_vm_timeout_ms() -> u64 {
    5000
}

fn default_readings_max_age_s() -> u64 {
    3600
}

/// VictoriaLogs, queried with LogsQL the server builds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VictoriaLogsConfig {
    /// VictoriaLogs' root: `http://vlogs:9428`.
    pub url: String,
    /// Upper bound of one request; past it the logs section says "unavailable".
    #[serde(default = "default_signal_timeout_ms")]
    pub timeout_ms: u64,
    /// The log field naming the node a line came from (`host`; sites use `hostname` or `host.name` too).
    #[serde(default = "default_node_field")]
    pub node_field: crate::domain::logsql::FieldName,
    /// A LogsQL filter every query adds, written by the site (`_stream:{job="syslog"}`); none: all logs.
    #[serde(default)]
    pub filter: Option<String>,
    /// Most lines one answer holds (a request's `limit` is at most this).
    #[serde(default = "default_max_lines")]
    pub max_lines: u32,
}

/// Grafana Pyroscope, fed by Grafana Alloy's `pyroscope.ebpf` with Slurm's cgroup as a label.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PyroscopeConfig {
    /// Pyroscope's root: `http://pyroscope:4040`.
    pub url: String,
    #[serde(default = "default_signal_timeout_ms")]
    pub timeout_ms: u64,
    /// Profile type when a request names none.
    #[serde(default)]
    pub profile_type: crate::domain::profile::ProfileType,
    /// Label holding the node's name (Alloy relabels it from the host; `hostname` by default).
    #[serde(default = "default_host_label")]
    pub host_label: crate::domain::promql::LabelName,
    /// Label holding the process's cgroup path (relabelled from `__meta_process_cgroup_path`).
    #[serde(default = "default_cgroup_label")]
    pub cgroup_label: crate::domain::promql::LabelName,
    /// `service_name` the site's Alloy gives Slurm jobs' profiles; none: any.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Most functions Pyroscope keeps in the flame graph (`max-nodes`).
    #[serde(default = "default_max_nodes")]
    pub max_nodes: u32,
}

fn default_signal_timeout_ms() -> u64 {
    3000
}

fn default_node_field() -> crate::domain::logsql::FieldName {
    crate::domain::logsql::FieldName::from_static("host")
}

fn default_max_lines() -> u32 {
    1000
}

fn default_host_label() -> crate::domain::promql::LabelName {
    crate::domain::promql::LabelName::from_static("hostname")
}

fn default_cgroup_label() -> crate::domain::promql::LabelName {
    crate::domain::promql::LabelName::from_static("cgroup_path")
}

fn default_max_nodes() -> u32 {
    1024
}

/// Who is asking, and who sees everything. Identities come from a bearer token (`slt_…`, see
/// `/api/v1/tokens`) or from a reverse proxy's header, honoured only from `trusted_proxies`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// `staff` (sees everything, for a lab or demo) or `nobody` (sign-in needed).
    pub anonymous: AnonymousAccess,
    /// Request header that names the user, set by the site's SSO proxy (`X-Remote-User`); none = ignored.
    #[serde(default)]
    pub user_header: Option<String>,
    /// Request header with the user's groups, comma-separated (`X-Forwarded-Groups`); none = ignored.
    #[serde(default)]
    pub groups_header: Option<String>,
    /// Peers whose identity headers are believed: addresses or networks (`10.0.0.5`, `10.1.0.0/16`),
    /// as a list or comma-separated. None by default: on a host where other people run code (a login
    /// node, an Open OnDemand host) loopback is not the proxy alone. From any other peer the headers are
    /// dropped and the request is anonymous.
    #[serde(default, deserialize_with = "nets_or_comma_string")]
    pub trusted_proxies: Vec<ProxyNet>,
    /// A header the proxy sets to `proxy_secret` on every request it forwards; when set, identity
    /// headers are believed only with it (compared in constant time), even from a trusted peer.
    #[serde(default)]
    pub proxy_secret_header: Option<String>,
    #[serde(default)]
    pub proxy_secret: Option<IngestSecret>,
    /// Users who see every job.
    #[serde(default)]
    pub staff_users: Vec<String>,
    /// Groups (from `groups_header`) whose members see every job.
    #[serde(default)]
    pub staff_groups: Vec<String>,
    #[serde(default)]
    pub tokens: TokenConfig,
}

/// Personal API tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenConfig {
    /// The longest life a token may be given, in days.
    pub max_days: u32,
    /// Requests per minute one user may make with tokens, all of them together (bursts up to this
    /// many); over it: 429 with Retry-After. One peer may send four times as many token requests
    /// (unknown tokens included) before it gets 429 without a database lookup.
    pub per_minute: u32,
    /// Live (not revoked, not expired) tokens one user may hold.
    pub max_live_per_user: u32,
    /// Days the audit log of token uses is kept.
    pub audit_days: u32,
}

impl Default for TokenConfig {
    fn default() -> Self {
        Self { max_days: 365, per_minute: 600, max_live_per_user: 20, audit_days: 400 }
    }
}

/// `scheme://user:password@host…` with the password replaced by `***`; other text as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let masked = if userinfo.contains(':') { format!("{user}:***") } else { user.to_string() };
            format!("{scheme}://{masked}@{host}{path}")
        }
        None => url.to_string(),
    }
}

fn nets_or_comma_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<ProxyNet>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrString {
        List(Vec<String>),
        Text(String),
    }
    let texts = match ListOrString::deserialize(deserializer)? {
        ListOrString::List(list) => list,
        ListOrString::Text(text) => text.split(',').map(str::to_string).filter(|t| !t.trim().is_empty()).collect(),
    };
    texts.into_iter().map(|text| ProxyNet::try_from(text).map_err(serde::de::Error::custom)).collect()
}

impl AccessConfig {
    /// What serde cannot say: settings that contradict each other or that nothing can honour.
    /// `on_socket`: the server listens on a Unix socket, whose peers are believed without an address.
    fn validate(&self, on_socket: bool) -> Result<(), String> {
        if self.user_header.is_some() && self.trusted_proxies.is_empty() && !on_socket {
            return Err("[access] user_header is set but trusted_proxies is empty: name the proxy's address \
                (e.g. trusted_proxies = [\"127.0.0.1\"] when it runs on this host and nobody else does), \
                or listen on a Unix socket (listen = \"unix:/run/slurmlens/http.sock\")"
                .into());
        }
        match (&self.proxy_secret_header, &self.proxy_secret) {
            (Some(_), None) | (None, Some(_)) => {
                return Err("[access] proxy_secret_header and proxy_secret go together".into());
            }
            (Some(_), Some(secret)) if secret.0.trim().len() < 16 => {
                return Err("[access] proxy_secret must be at least 16 characters".into());
            }
            _ => {}
        }
        if !(1..=MAX_TOKEN_DAYS).contains(&self.tokens.max_days) {
            return Err(format!("[access.tokens] max_days must be between 1 and {MAX_TOKEN_DAYS}"));
        }
        if self.tokens.per_minute == 0 || self.tokens.max_live_per_user == 0 || self.tokens.audit_days == 0 {
            return Err("[access.tokens] per_minute, max_live_per_user and audit_days must be at least 1".into());
        }
        Ok(())
    }
}

/// The longest life a site may allow a token: ten years.
pub const MAX_TOKEN_DAYS: u32 = 3650;

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            anonymous: AnonymousAccess::Nobody,
            user_header: None,
            groups_header: None,
            trusted_proxies: Vec::new(),
            proxy_secret_header: None,
            proxy_secret: None,
            staff_users: Vec::new(),
            staff_groups: Vec::new(),
            tokens: TokenConfig::default(),
        }
    }
}

/// What a request without an identity sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnonymousAccess {
    Staff,
    Nobody,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: ListenAddress::Tcp(SocketAddr::from(([127, 0, 0, 1], 8080))),
            public_url: "http://127.0.0.1:8080".into(),
            clusters: vec![ClusterName::default_lab()],
            slurmdbd: SlurmDbdConfig {
                url: "mysql://reader:readerpw@127.0.0.1:3306/slurm_acct_db".into(),
                max_connections: 16,
                acquire_timeout_ms: 2000,
                statement_timeout_s: StatementTimeout::default(),
            },
            database: None,
            victoriametrics: None,
            victorialogs: None,
            pyroscope: None,
            access: AccessConfig::default(),
            metrics: SeriesCatalog::default(),
            report: ReportConfig::default(),
            ingest: IngestConfig::default(),
            limits: LimitsConfig::default(),
            http: HttpConfig::default(),
            site_root: None,
            topology: None,
            time_zone: slurmlens_web::clock::Zone::UTC,
            telemetry: TelemetryConfig::default(),
            log: LogConfig::default(),
            links: LinksConfig::default(),
            notify: NotifyConfig::default(),
            usage: UsageConfig::default(),
            advice: AdviceConfig::default(),
            job_output: JobOutputConfig::default(),
        }
    }
}

/// Flat environment names kept for convenience (the lab's `env.sh` exports them).
fn env_key(key: &str) -> String {
    let key = key.to_ascii_lowercase();
    match key.as_str() {
        "slurmdbd_url" => "slurmdbd.url".into(),
        "database_url" => "database.url".into(),
        "vm_url" => "victoriametrics.url".into(),
        other => other.replace("__", "."),
    }
}

impl Config {
    /// Defaults, then the TOML file (if given), then `SLURMLENS_*` variables
    /// (`SLURMLENS_SLURMDBD__URL` or `SLURMLENS_SLURMDBD_URL`, `SLURMLENS_CLUSTERS=lab,sakura`). The lab's
    /// and the demo script's own variables (`SLURMLENS_LAB`, `SLURMLENS_DEMO_*`, …) are not configuration.
    pub fn load(file: Option<&Path>) -> Result<Self, Box<figment::Error>> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = file {
            figment = figment.merge(Toml::file_exact(path));
        }
        let env = Env::prefixed("SLURMLENS_")
            .ignore(&["LAB", "CONFIG", "SEEDER_URL", "LOG", "CLUSTER", "DEMO_LISTEN", "DEMO_FRESH", "DEMO_HOURS"])
            .map(|key| env_key(key.as_str()).into())
            .split(".");
        figment = figment.merge(env);
        let config: Self = figment.extract().map_err(Box::new)?;
        let on_socket = matches!(config.listen, ListenAddress::Unix(_));
        config.access.validate(on_socket).map_err(|message| Box::new(figment::Error::from(message)))?;
        if config.telemetry.token.as_ref().is_some_and(|token| token.0.trim().len() < 16) {
            return Err(Box::new(figment::Error::from("[telemetry] token must be at least 16 characters".to_string())));
        }
        config.links.validate().map_err(|message| Box::new(figment::Error::from(message)))?;
        config.notify.validate().map_err(|message| Box::new(figment::Error::from(message)))?;
        Ok(config)
    }

    /// The configuration with the password of every URL masked (`mysql://reader:***@host/db`), for
    /// `slurmlens config` and anything else that shows it; secrets are already masked by their `Debug`.
    pub fn redacted(&self) -> Self {
        let mut config = self.clone();
        config.slurmdbd.url = redact_url(&config.slurmdbd.url);
        if let Some(database) = &mut config.database {
            database.url = redact_url(&database.url);
        }
        if let Some(vm) = &mut config.victoriametrics {
            vm.url = redact_url(&vm.url);
        }
        if let Some(logs) = &mut config.victorialogs {
            logs.url = redact_url(&logs.url);
        }
        if let Some(pyroscope) = &mut config.pyroscope {
            pyroscope.url = redact_url(&pyroscope.url);
        }
        if let Some(smtp) = &mut config.notify.smtp_url {
            *smtp = redact_url(smtp);
        }
        for webhook in &mut config.notify.webhooks {
            webhook.url = redact_url(&webhook.url);
        }
        config
    }
}

/// `[links]`: where each chart of a report links to, as users reach those tools (the server's own
/// VictoriaMetrics URL may be internal). Without Grafana, charts link to vmui alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinksConfig {
    /// Grafana's base URL (`https://grafana.example.org`); none: no Grafana links.
    #[serde(default)]
    pub grafana_url: Option<String>,
    /// The uid of Grafana's data source for the site's VictoriaMetrics: Explore links open it.
    #[serde(default)]
    pub grafana_datasource_uid: Option<String>,
    /// That data source's type: `prometheus` (the default) or `victoriametrics-metrics-datasource`.
    #[serde(default = "default_datasource_type")]
    pub grafana_datasource_type: String,
    /// The Grafana organisation the links open in.
    #[serde(default = "default_org_id")]
    pub grafana_org_id: u32,
    /// The uid of a per-job dashboard taking `var-cluster`, `var-job` and `var-host` (one per node) with
    /// the job's window; none: no dashboard link.
    #[serde(default)]
    pub grafana_dashboard_uid: Option<String>,
    /// vmui's URL (`https://vm.example.org/vmui/`); none: beside `[victoriametrics] url` (its
    /// `/vmui/`, credentials removed). `""`: no vmui links.
    #[serde(default)]
    pub vmui_url: Option<String>,
}

fn default_datasource_type() -> String {
    "prometheus".into()
}

fn default_org_id() -> u32 {
    1
}

impl Default for LinksConfig {
    fn default() -> Self {
        Self {
            grafana_url: None,
            grafana_datasource_uid: None,
            grafana_datasource_type: default_datasource_type(),
            grafana_org_id: default_org_id(),
            grafana_dashboard_uid: None,
            vmui_url: None,
        }
    }
}

impl LinksConfig {
    /// Links go to people's browsers: plain http(s) URLs without credentials, and a Grafana URL with
    /// something to open.
    fn validate(&self) -> Result<(), String> {
        for (name, url) in [("grafana_url", &self.grafana_url), ("vmui_url", &self.vmui_url)] {
            let Some(url) = url.as_deref().filter(|url| !url.is_empty()) else { continue };
            let parsed = reqwest::Url::parse(url).map_err(|error| format!("[links] {name} {url:?}: {error}"))?;
            if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
                return Err(format!("[links] {name} must be an http(s) URL, not {url:?}"));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(format!("[links] {name} must not hold credentials: it is shown to every viewer"));
            }
        }
        let has_uid = self.grafana_datasource_uid.is_some() || self.grafana_dashboard_uid.is_some();
        match (&self.grafana_url, has_uid) {
            (Some(_), false) => Err("[links] grafana_url needs grafana_datasource_uid (Explore links), \
                grafana_dashboard_uid (the per-job dashboard) or both"
                .into()),
            (None, true) => Err("[links] a Grafana uid is set but grafana_url is not".into()),
            _ => Ok(()),
        }
    }
}

impl ClusterName {
    fn default_lab() -> Self {
        Self::from_static("lab")
    }
}

fn list_or_comma_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<ClusterName>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrString {
        List(Vec<String>),
        Text(String),
    }
    let names = match ListOrString::deserialize(deserializer)? {
        ListOrString::List(list) => list,
        ListOrString::Text(text) => text.split(',').map(|name| name.trim().to_string()).collect(),
    };
    if names.is_empty() {
        return Err(serde::de::Error::custom("at least one cluster is needed"));
    }
    names.iter().map(|name| name.parse().map_err(serde::de::Error::custom)).collect()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
