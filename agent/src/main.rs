//! `slurmlens-agent`: reads its configuration, sets up logging and runs the agent's parts.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;

/// slurmlens's node agent: 100 ms NIC peaks, a ping mesh and CUDA/NCCL activity, on /metrics and to the server.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// The configuration file (TOML; see slurmlens-agent.example.toml).
    #[arg(long, short, default_value = "/etc/slurmlens/agent.toml")]
    config: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = slurmlens_agent::config::Config::load(&cli.config).context("loading the configuration")?;
    slurmlens_agent::run(config).await
}
