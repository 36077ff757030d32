//! `slurmlens serve`: builds the application from a [`Config`] and serves it until a signal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::app::App;
use crate::app::gpus::ReadingSettings;
use crate::app::report::{Archiver, ArchiverSettings, LinkSettings, ReportSettings, Reporter, vmui_beside};
use crate::app::signals::Signals;
use crate::app::usage::UsageSettings;
use crate::config::{Config, ListenAddress};
use crate::http::ingest::IngestSecrets;
use crate::http::peer::Peer;
use crate::http::{HttpState, router};
use crate::sources::slurmdbd::{SlurmDbd, SlurmDbdOptions};
use crate::sources::victoriametrics::VictoriaMetrics;
use crate::store::Store;

/// Builds the application: one lazy slurmdbd reader per configured cluster, our store, the report
/// maker, the grid's readings and the log and profile sources.
pub fn app(config: &Config) -> anyhow::Result<App> {
    let options = SlurmDbdOptions {
        url: config.slurmdbd.url.clone(),
        max_connections: config.slurmdbd.max_connections,
        acquire_timeout: Duration::from_millis(config.slurmdbd.acquire_timeout_ms),
        statement_timeout_s: config.slurmdbd.statement_timeout_s.seconds(),
    };
    let readers = config
        .clusters
        .iter()
        .map(|cluster| SlurmDbd::new(&options, cluster.clone()))
        .collect::<Result<Vec<_>, _>>()
        .context("configuring the slurmdbd reader")?;
    let store = config
        .database
        .as_ref()
        .map(|database| Store::new(&database.url, Duration::from_millis(config.slurmdbd.acquire_timeout_ms)))
        .transpose()
        .context("configuring slurmlens's database")?;
    let reporter = reporter(config, store.clone())?;
    let readings = ReadingSettings {
        vm: metrics_client(config)?,
        catalog: config.metrics.clone(),
        max_age_s: config.victoriametrics.as_ref().map_or(3600, |vm| vm.readings_max_age_s),
        timeout: metrics_timeout(config),
    };
    let signals = Signals::new(config.victorialogs.as_ref(), config.pyroscope.as_ref())
        .map_err(anyhow::Error::msg)
        .context("configuring the VictoriaLogs and Pyroscope clients")?;
    let usage =
        UsageSettings { co2_g_per_kwh: config.usage.co2_g_per_kwh.filter(|grams| grams.is_finite() && *grams >= 0.0) };
    Ok(App::new(readers, config.access.clone(), config.limits.clone(), store, reporter, readings, signals)
        .context("at least one cluster must be configured")?
        .with_usage(usage)
        .with_advice(crate::app::advice::AdviceSettings::from_config(&config.advice))
        .with_notify(config.notify.clone())
        .with_job_output(config.job_output.clone()))
}

/// The HTTP edge over the application: its ingest secrets and how the pages are served.
pub fn http_state(config: &Config) -> anyhow::Result<HttpState> {
    let ingest = IngestSecrets::from_config(&config.ingest, &config.clusters).map_err(anyhow::Error::msg)?;
    Ok(HttpState::new(app(config)?)
        .with_ingest(ingest)
        .with_web(web_options(config)?)
        .with_telemetry(config.telemetry.clone()))
}

/// The site's rack layout from `topology` (none: racks from node names).
pub fn topology(config: &Config) -> anyhow::Result<slurmlens_slurm::topology::Topology> {
    match &config.topology {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading topology {}", path.display()))?;
            slurmlens_slurm::topology::Topology::from_toml(&text)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("parsing topology {}", path.display()))
        }
        None => Ok(slurmlens_slurm::topology::Topology::default()),
    }
}

/// The web pages' site root and rack topology (read once, here, at startup).
pub fn web_options(config: &Config) -> anyhow::Result<slurmlens_web::server::WebOptions> {
    Ok(slurmlens_web::server::WebOptions {
        site_root: config.site_root.clone(),
        topology: topology(config)?,
        time_zone: config.time_zone,
    })
}

/// The report maker: VictoriaMetrics (if configured), our store, the site's series catalogue.
pub fn reporter(config: &Config, store: Option<Store>) -> anyhow::Result<Reporter> {
    let vm = metrics_client(config)?;
    let prefix = &config.report.rules_prefix;
    if format!("{prefix}:x").parse::<crate::domain::promql::MetricName>().is_err() {
        anyhow::bail!("[report] rules_prefix {prefix:?} must start a metric name: letters, digits, `_` and `:`");
    }
    let settings = ReportSettings {
        catalog: config.metrics.clone(),
        metrics_timeout: metrics_timeout(config),
        archive_delay: Duration::from_secs(config.report.archive_delay_s),
        topology: topology(config)?,
        live_cache: Duration::from_secs(config.report.live_cache_s),
        rules: crate::app::report::RulesSettings {
            enabled: config.report.recording_rules,
            prefix: config.report.rules_prefix.clone(),
            min_window_s: config.report.rules_min_window_s,
            max_lag_s: config.report.rules_max_lag_s,
        },
        links: link_settings(config),
        remake_within: Duration::from_secs(u64::from(config.report.backfill_days) * 86_400),
    };
    Ok(Reporter::new(vm, store, settings))
}

/// `[links]` as the report uses them: vmui where configured, else beside the metrics source.
fn link_settings(config: &Config) -> LinkSettings {
    let links = &config.links;
    let vmui_url = match links.vmui_url.as_deref() {
        Some("") => None,
        Some(url) if url.ends_with('/') => Some(url.to_string()),
        Some(url) => Some(format!("{url}/")),
        None => config.victoriametrics.as_ref().and_then(|vm| vmui_beside(&vm.url)),
    };
    LinkSettings {
        grafana_url: links.grafana_url.as_ref().map(|url| url.trim_end_matches('/').to_string()),
        datasource_uid: links.grafana_datasource_uid.clone(),
        datasource_type: links.grafana_datasource_type.clone(),
        org_id: links.grafana_org_id,
        dashboard_uid: links.grafana_dashboard_uid.clone(),
        vmui_url,
    }
}

/// The VictoriaMetrics client, if one is configured.
fn metrics_client(config: &Config) -> anyhow::Result<Option<VictoriaMetrics>> {
    config
        .victoriametrics
        .as_ref()
        .map(|vm| {
            let token = vm.bearer_token.as_ref().map(|token| token.0.clone());
            VictoriaMetrics::new(&vm.url, metrics_timeout(config)).map(|client| client.with_bearer_token(token))
        })
        .transpose()
        .context("configuring the VictoriaMetrics client")
}

/// The upper bound of one report's (or one grid's) metric queries together.
fn metrics_timeout(config: &Config) -> Duration {
    Duration::from_millis(config.victoriametrics.as_ref().map_or(5000, |vm| vm.timeout_ms))
}

/// Applies our own schema's pending migrations (`slurmlens migrate`).
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let database = config.database.as_ref().context("no [database] url is configured")?;
    let store = Store::new(&database.url, Duration::from_secs(10)).context("configuring slurmlens's database")?;
    store.migrate().await.context("applying migrations")?;
    println!("migrations applied");
    Ok(())
}

/// Binds `config.listen`: a TCP address (port 0 picks a free port), or a Unix socket.
pub async fn bind(config: &Config) -> anyhow::Result<Listener> {
    match &config.listen {
        ListenAddress::Tcp(address) => {
            Ok(Listener::Tcp(TcpListener::bind(address).await.with_context(|| format!("binding {address}"))?))
        }
        ListenAddress::Unix(path) => Ok(Listener::Unix(UnixSocket::bind(path)?)),
    }
}

/// Where the server accepts connections.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixSocket),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Self::Tcp(listener)
    }
}

impl Listener {
    /// The bound TCP address (`None` on a socket).
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        match self {
            Self::Tcp(listener) => listener.local_addr().ok(),
            Self::Unix(_) => None,
        }
    }

    /// Where a client reaches it: `http://host:port/` or `unix:/path`.
    pub fn describe(&self) -> String {
        match self {
            Self::Tcp(listener) => {
                listener.local_addr().map_or_else(|_| "?".into(), |address| format!("http://{address}/"))
            }
            Self::Unix(socket) => format!("unix:{}", socket.path.display()),
        }
    }

    async fn accept(&self) -> std::io::Result<(Accepted, Peer)> {
        match self {
            Self::Tcp(listener) => {
                listener.accept().await.map(|(socket, peer)| (Accepted::Tcp(socket), Peer::Tcp(peer)))
            }
            Self::Unix(socket) => {
                socket.listener.accept().await.map(|(socket, _)| (Accepted::Unix(socket), Peer::UnixSocket))
            }
        }
    }
}

/// A Unix socket the server listens on, removed when it stops.
pub struct UnixSocket {
    listener: tokio::net::UnixListener,
    path: std::path::PathBuf,
}

impl UnixSocket {
    /// Binds `path` with mode 0660: the proxy's user must be the server's or share its group. A socket
    /// left by an earlier run is replaced; one a live server answers on, or any other file, is not.
    fn bind(path: &std::path::Path) -> anyhow::Result<Self> {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        match std::fs::symlink_metadata(path) {
            Ok(found) if !found.file_type().is_socket() => {
                anyhow::bail!("{} exists and is not a socket: not replaced", path.display())
            }
            Ok(_) if std::os::unix::net::UnixStream::connect(path).is_ok() => {
                anyhow::bail!("another server listens on {}", path.display())
            }
            Ok(_) => {
                std::fs::remove_file(path).with_context(|| format!("removing the old socket {}", path.display()))?
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        }
        let listener = tokio::net::UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
            .with_context(|| format!("setting {}'s mode", path.display()))?;
        Ok(Self { listener, path: path.to_path_buf() })
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// An accepted connection, before it is served.
enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// What hyper serves a connection over, TCP or Unix.
trait Connection: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Connection for T {}

impl Accepted {
    /// Writes what the socket's buffer takes now, never waiting (the refusal of a connection too many).
    fn try_write(&self, bytes: &[u8]) {
        let _ = match self {
            Self::Tcp(socket) => socket.try_write(bytes),
            Self::Unix(socket) => socket.try_write(bytes),
        };
    }

    fn boxed(self) -> Box<dyn Connection> {
        match self {
            Self::Tcp(socket) => Box::new(socket),
            Self::Unix(socket) => Box::new(socket),
        }
    }
}

/// Logs every panic as one error event, in the span it happened in (a request's, with its path):
/// the HTTP layer turns a handler's panic into the 500 envelope and logs nothing more.
pub fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|text| (*text).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let location = info.location().map(ToString::to_string).unwrap_or_default();
        tracing::error!(%message, %location, "panic");
    }));
}

/// Refuses to serve a database whose schema is behind this release: `serve` never alters the schema
/// (its user needs no right to), `slurmlens migrate` does, before the server starts (the Debian unit's
/// `ExecStartPre`). A database that does not answer is no reason to refuse: the archive, GPU records
/// and tokens degrade until it does, as for any source.
async fn check_schema(store: &crate::store::Store) -> anyhow::Result<()> {
    match store.pending_migrations().await {
        Ok(pending) if !pending.is_empty() => anyhow::bail!(
            "slurmlens's database lacks {} of this release ({}): run `slurmlens migrate` \
             (as a database user allowed to alter slurmlens's tables), then start the server again",
            crate::domain::counted(pending.len(), "migration"),
            pending.join(", ")
        ),
        Ok(_) => Ok(()),
        Err(error) => {
            tracing::warn!(%error, "slurmlens's schema could not be checked; archive and GPU records degrade");
            Ok(())
        }
    }
}

/// Serves the API on `listener` until SIGINT/SIGTERM.
pub async fn serve(config: &Config, listener: Listener) -> anyhow::Result<()> {
    log_panics();
    let state = http_state(config)?;
    if let Some(store) = state.app().store() {
        check_schema(store).await?;
    }
    if config.report.archive_interval_s > 0 {
        let every = Duration::from_secs(config.report.archive_interval_s);
        tokio::spawn(archive_loop(state.app().clone(), archiver_settings(config), every));
    }
    if let Some(store) = state.app().store() {
        tokio::spawn(prune_token_audit(store.clone(), config.access.tokens.audit_days));
    }
    if config.notify.enabled {
        let notifier = crate::app::notify::Notifier::new(state.app().clone(), &config.notify, &config.public_url)
            .map_err(anyhow::Error::msg)?;
        tokio::spawn(notify_loop(notifier, Duration::from_secs(config.notify.interval_s)));
    }
    // Each cluster's catalogue of long-spanned jobs, so that the first listings already read only the
    // history near their window (until it is built they read all of it; a failure is retried by them).
    for reader in state.app().readers() {
        let reader = reader.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            match reader.prepare_history().await {
                Ok(count) => tracing::info!(
                    cluster = %reader.cluster(),
                    long_spans = count,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "long-span catalogue built"
                ),
                Err(error) => {
                    tracing::warn!(cluster = %reader.cluster(), %error, "building the long-span catalogue failed")
                }
            }
        });
    }
    let warm_days = config.limits.chart_history_days;
    if warm_days > 0 && config.limits.chart_history_jobs > 0 {
        tokio::spawn(warm_chart_history_loop(state.app().clone(), warm_days));
    }
    if let Some(metrics_address) = config.telemetry.listen {
        let metrics_listener =
            TcpListener::bind(metrics_address).await.with_context(|| format!("binding {metrics_address}"))?;
        tracing::info!(address = %metrics_address, "serving /metrics");
        let (metrics_router, limits) =
            (crate::http::metrics_router(state.clone()), ConnectionLimits::from_config(config));
        tokio::spawn(async move {
            if let Err(error) = serve_router(metrics_listener.into(), metrics_router, limits, shutdown_signal()).await {
                tracing::error!(%error, "the /metrics listener stopped");
            }
        });
    }
    let address = listener.describe();
    tracing::info!(%address, clusters = ?config.clusters, "slurmlens listening");
    println!("slurmlens serving at {address} (public URL {})", config.public_url);
    serve_router(listener, router(state), ConnectionLimits::from_config(config), shutdown_signal()).await
}

/// How often the charts' history is topped up with the hours that sealed or were let go since.
const CHART_HISTORY_EVERY: Duration = Duration::from_secs(300);

/// Keeps the last `days` of finished jobs in the charts' history (`[limits] chart_history_days`).
async fn warm_chart_history_loop(app: crate::app::App, days: u32) {
    loop {
        let started = std::time::Instant::now();
        let hours = app.warm_chart_history(days).await;
        if hours > 0 {
            tracing::info!(days, hours, elapsed_ms = started.elapsed().as_millis() as u64, "charts' history read");
        }
        tokio::time::sleep(CHART_HISTORY_EVERY).await;
    }
}

/// The listener's bounds against slow and numerous clients (`[http]`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's headers, or leave a kept-alive connection idle.
    pub header_read_timeout: Duration,
    /// Connections open at once.
    pub max_connections: u32,
}

impl ConnectionLimits {
    pub fn from_config(config: &Config) -> Self {
        Self {
            header_read_timeout: Duration::from_millis(config.http.header_read_timeout_ms.get()),
            max_connections: config.http.max_connections.get(),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open requests finish.
///
/// HTTP/1.1 through hyper with a timer (`axum::serve` runs hyper without one, so it has no header
/// timeout): a connection that has not sent a whole request head within `header_read_timeout`, or
/// that waits idle that long for its next request, is closed. Past `max_connections` open
/// connections a new one is answered 503 and closed at once, so slow clients cannot take every file
/// descriptor. Each request carries its peer (`ConnectInfo<Peer>`), which decides whether identity
/// headers are believed: a TCP peer in `trusted_proxies`, or any client of the Unix socket (its mode
/// decides who may connect). The tests serve through this function too.
pub async fn serve_router(
    listener: Listener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::{Service, ServiceExt};

    let open = Arc::new(Semaphore::new(limits.max_connections as usize));
    let (closing, closing_seen) = tokio::sync::watch::channel(false);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    let busy = busy_response();
    let mut make_service = router.into_make_service_with_connect_info::<Peer>();
    tokio::pin!(shutdown);
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, most likely: wait for some to close rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            // Never blocks: what the socket's buffer takes is sent, the rest is dropped with it.
            socket.try_write(busy.as_bytes());
            tracing::warn!(%peer, max = limits.max_connections, "connection refused: too many open connections");
            continue;
        };
        let Ok(make) = ServiceExt::<Peer>::ready(&mut make_service).await;
        let Ok(service) = make.call(peer).await;
        let service = service
            .map_request(|request: axum::http::Request<hyper::body::Incoming>| request.map(axum::body::Body::new));
        let hyper_service = hyper_util::service::TowerToHyperService::new(service);
        let builder = Arc::clone(&builder);
        let mut closing_seen = closing_seen.clone();
        tokio::spawn(async move {
            let _open = permit;
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(socket.boxed()), hyper_service);
            tokio::pin!(connection);
            let closing = async {
                // (An error means the server is gone: close too.)
                let _ = closing_seen.wait_for(|closing| *closing).await;
            };
            let ended = tokio::select! {
                result = connection.as_mut() => Some(result),
                () = closing => None,
            };
            let result = match ended {
                Some(result) => result,
                None => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                // Header timeouts and clients that hang up end here; neither is the server's fault.
                tracing::debug!(%peer, %error, "connection ended");
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    // Every connection holds one permit until it ends: all of them back means all are done.
    let _all_closed = open.acquire_many(limits.max_connections).await;
    Ok(())
}

/// What a connection over `max_connections` is sent before it is closed: the one error envelope.
fn busy_response() -> String {
    let body = serde_json::json!({
        "error": {"code": "overloaded", "message": "the server has too many open connections; try again shortly"}
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Keeps the token audit log to its last `days`, hourly (`[access.tokens] audit_days`).
async fn prune_token_audit(store: crate::store::Store, days: u32) {
    loop {
        let before = chrono::Utc::now() - chrono::Duration::days(i64::from(days));
        match store.prune_token_uses(before).await {
            Ok(0) => {}
            Ok(gone) => tracing::info!(gone, days, "token audit log pruned"),
            Err(error) => tracing::warn!(%error, "pruning the token audit log failed; trying again in an hour"),
        }
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        if let Ok(mut signal) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            signal.recv().await;
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = terminate => {} }
}

/// How the archiver walks finished jobs and paces itself (`[report]`).
pub fn archiver_settings(config: &Config) -> ArchiverSettings {
    ArchiverSettings {
        backfill: chrono::Duration::days(i64::from(config.report.backfill_days)),
        concurrency: config.report.backfill_concurrency.max(1) as usize,
        pause: Duration::from_millis(config.report.backfill_pause_ms),
    }
}

/// Archives the reports of ended jobs, forever: a round, then `every` after it ended. Failures are
/// logged and the round is retried.
async fn archive_loop(app: App, settings: ArchiverSettings, every: Duration) {
    let mut archiver = Archiver::new(settings);
    loop {
        let started = std::time::Instant::now();
        let round = archiver.round(&app).await;
        if let Ok(summary) = &round
            && !summary.skipped
        {
            crate::telemetry::global().archive_round(crate::telemetry::ArchiveRound {
                due: summary.due as u64,
                made: summary.made() as u64,
                unavailable: summary.unavailable as u64,
                took: started.elapsed(),
            });
        }
        match round {
            Ok(summary) if summary.due == 0 => {}
            Ok(summary) => tracing::info!(
                due = summary.due,
                no_data = summary.no_data,
                ended_badly = summary.ended_badly,
                unavailable = summary.unavailable,
                seconds = started.elapsed().as_secs_f64(),
                "archiver round done: archived {} of {} due jobs",
                summary.made(),
                summary.due
            ),
            Err(error) => tracing::warn!(%error, "archiving job reports failed; retrying next round"),
        }
        tokio::time::sleep(every).await;
    }
}

/// The notifier's rounds, one every `every` (the first after one interval, once the server is up).
async fn notify_loop(notifier: crate::app::notify::Notifier, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match notifier.round(chrono::Utc::now()).await {
            Ok(outcome) if outcome.recorded + outcome.sent + outcome.failed > 0 => {
                tracing::info!(?outcome, "notifier round");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "notifier round failed; trying again next round"),
        }
    }
}
