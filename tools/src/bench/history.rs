//! `slurmlens-dev bench history`: the demo history's full-size simulation, without a database. Prints how
//! long it takes, what it planned and the digest of the rows `demo seed-history` would write, so a change
//! to the generator can show that it left the history alone.

use std::time::Instant;

use chrono::{DateTime, Utc};

use crate::demo::cli::HistoryShape;
use crate::demo::history::rehearse;

/// Arguments of `slurmlens-dev bench history` (the defaults are `demo seed-history`'s, ending at a fixed
/// instant so that digests compare across runs).
#[derive(Debug, clap::Args)]
pub struct HistoryBenchArgs {
    /// Cluster name (only the summary shows it, and with it the digest).
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// End of the history (RFC 3339).
    #[arg(long, default_value = "2026-11-29T17:40:00Z")]
    pub end: DateTime<Utc>,
    #[command(flatten)]
    pub shape: HistoryShape,
}

/// Simulates the history and prints its summary, timing, queue waits per day and digest.
pub fn run(args: &HistoryBenchArgs) -> anyhow::Result<()> {
    let params = args.shape.params(&args.cluster, args.end);
    let started = Instant::now();
    let rehearsal = rehearse(&params)?;
    println!(
        "{} job rows simulated in {:.1} s, encoded and hashed in {:.1} s\n{}",
        rehearsal.stats.jobs,
        rehearsal.stats.simulate_secs,
        started.elapsed().as_secs_f64() - rehearsal.stats.simulate_secs,
        rehearsal.stats
    );
    let days: Vec<String> = rehearsal
        .wait_minutes_per_day
        .iter()
        .map(|(day, single_node, multi_node)| format!("{day}:{single_node:.0}/{multi_node:.0}"))
        .collect();
    println!("mean queue wait in minutes per day (single-node/multi-node): {}", days.join(" "));
    println!("rows digest (SHA-256): {}", rehearsal.digest);
    Ok(())
}
