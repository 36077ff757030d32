//! The `slurmlens` binary: parses the command line, loads the configuration, sets up tracing and
//! calls into the library. Nothing else lives here.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use slurmlens::config::Config;

/// The allocator of the server binary only (the library, its tests and the wasm bundle keep the
/// default): glibc's malloc keeps a freed peak resident in its per-thread arenas, so concurrent
/// listings left the idle server near its peak; jemalloc gives the pages back.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start: a background thread returns freed pages to the system within
/// a second of the burst that used them, instead of at the next allocations after ten.
#[expect(unsafe_code, reason = "jemalloc reads its options from this one exported symbol; nothing else has the name")]
#[unsafe(export_name = "malloc_conf")]
static JEMALLOC_CONF: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

#[derive(Parser)]
#[command(name = "slurmlens", version, about = "Job observability for GPU clusters run by Slurm")]
struct Cli {
    /// Configuration file (TOML); `SLURMLENS_*` environment variables override it.
    #[arg(long, global = true, env = "SLURMLENS_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the REST API and pages.
    Serve,
    /// Apply pending migrations of slurmlens's own database.
    Migrate,
    /// Print the effective configuration (after file and environment), passwords and secrets masked.
    Config,
    /// Print a job's report (GPU use, network, verdicts), like `jobstats JOBID`.
    Report(slurmlens::terminal::ReportArgs),
    /// Print the OpenAPI document of `/api/v1` (`docs/openapi.json` is this output).
    Openapi,
    /// Print vmalert's recording rules for this site's series catalogue (what long jobs' reports read).
    Rules,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The document depends on the code alone, so it needs no configuration (nor a valid one).
    if let Command::Openapi = cli.command {
        print!("{}", slurmlens::http::openapi::document_json());
        return Ok(());
    }
    // Read before the log is set up, since it says the log's format: a failure is printed by `main`'s error.
    let config = Config::load(cli.config.as_deref()).context("loading configuration")?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLURMLENS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    // `try_init` also forwards the `log` crate's records (rustls') into it, as `fmt().init()` did.
    tracing_subscriber::util::SubscriberInitExt::try_init(slurmlens::telemetry::log_subscriber(
        config.log.format,
        filter,
        std::io::stderr,
    ))
    .context("setting up the log")?;
    match cli.command {
        Command::Serve => {
            let listener = slurmlens::serve::bind(&config).await?;
            slurmlens::serve::serve(&config, listener).await
        }
        Command::Migrate => slurmlens::serve::migrate(&config).await,
        Command::Config => {
            println!("{:#?}", config.redacted());
            Ok(())
        }
        Command::Report(args) => slurmlens::terminal::run(&config, &args).await,
        Command::Rules => {
            let reporter = slurmlens::serve::reporter(&config, None)?;
            print!("{}", reporter.rules_yaml().map_err(anyhow::Error::msg)?);
            Ok(())
        }
        Command::Openapi => unreachable!("answered before the configuration is loaded"),
    }
}
