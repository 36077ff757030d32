//! `slurmlens serve`: builds the application from a [`Config`] and serves it until a signal.

use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::app::App;
use crate::app::gpus::ReadingSettings;
use crate::app::report::{Archiver, ArchiverSettings, ReportSettings, Reporter};
use crate::app::signals::Signals;
use crate::config::Config;
use crate::http::ingest::IngestSecrets;
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
    App::new(readers, config.access.clone(), store, reporter, readings, signals)
        .context("at least one cluster must be configured")
}

/// The HTTP edge over the application: its ingest secrets and how the pages are served.
pub fn http_state(config: &Config) -> anyhow::Result<HttpState> {
    let ingest = IngestSecrets::from_config(&config.ingest, &config.clusters).map_err(anyhow::Error::msg)?;
    Ok(HttpState::new(app(config)?).with_ingest(ingest).with_web(web_options(config)?))
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
    let settings = ReportSettings {
        catalog: config.metrics.clone(),
        metrics_timeout: metrics_timeout(config),
        archive_delay: Duration::from_secs(config.report.archive_delay_s),
        topology: topology(config)?,
        live_cache: Duration::from_secs(config.report.live_cache_s),
    };
    Ok(Reporter::new(vm, store, settings))
}

/// The VictoriaMetrics client, if one is configured.
fn metrics_client(config: &Config) -> anyhow::Result<Option<VictoriaMetrics>> {
    config
        .victoriametrics
        .as_ref()
        .map(|vm| VictoriaMetrics::new(&vm.url, metrics_timeout(config)))
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

/// Binds `config.listen` (port 0 picks a free port) and returns the listener with its real address.
pub async fn bind(config: &Config) -> anyhow::Result<TcpListener> {
    TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))
}

/// Serves the API on `listener` until SIGINT/SIGTERM.
pub async fn serve(config: &Config, listener: TcpListener) -> anyhow::Result<()> {
    let state = http_state(config)?;
    // Our schema is forward-only and sqlx serialises concurrent runs, so every replica may apply it.
    if let Some(store) = state.app().store()
        && let Err(error) = store.migrate().await
    {
        tracing::warn!(%error, "applying slurmlens's migrations failed; archive and GPU records degrade");
    }
    if config.report.archive_interval_s > 0 {
        let every = Duration::from_secs(config.report.archive_interval_s);
        tokio::spawn(archive_loop(state.app().clone(), archiver_settings(config), every));
    }
    let address = listener.local_addr().context("reading the bound address")?;
    tracing::info!(%address, clusters = ?config.clusters, "slurmlens listening");
    println!("slurmlens serving at http://{address}/ (public URL {})", config.public_url);
    // The peer's address decides whether identity headers are believed (`trusted_proxies`).
    let service = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, service).with_graceful_shutdown(shutdown_signal()).await.context("serving HTTP")
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
        match archiver.round(&app).await {
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
