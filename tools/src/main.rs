//! The `slurmlens-dev` binary: parses the command line, loads the configuration, sets up tracing and
//! calls into the tools library. Nothing else lives here.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use slurmlens::config::Config;

#[derive(Parser)]
#[command(name = "slurmlens-dev", version, about = "slurmlens's dev tooling: demo data and benchmarks")]
struct Cli {
    /// Configuration file (TOML); `SLURMLENS_*` environment variables override it.
    #[arg(long, global = true, env = "SLURMLENS_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Demo data: a realistic history in a cluster's slurmdbd tables, telemetry that agrees with it.
    Demo(slurmlens_tools::demo::DemoArgs),
    /// Benchmarks: the jobs window query against `sacct`, a report against bare metric fetches.
    #[command(subcommand)]
    Bench(slurmlens_tools::bench::BenchCommand),
    /// Job reports against their own evidence: fails on any contradiction (docs/PAGES.md).
    Audit(slurmlens_tools::audit::AuditArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLURMLENS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = Config::load(cli.config.as_deref()).context("loading configuration")?;
    match cli.command {
        Command::Demo(args) => {
            // The seeder's URL is the one secret only the demo needs, so it is read here, in main.
            let seeder_url = std::env::var("SLURMLENS_SEEDER_URL").ok();
            slurmlens_tools::demo::run(&config, &args, seeder_url.as_deref()).await
        }
        Command::Bench(command) => slurmlens_tools::bench::dispatch(&config, &command).await,
        Command::Audit(args) => slurmlens_tools::audit::run(&config, &args).await,
    }
}
