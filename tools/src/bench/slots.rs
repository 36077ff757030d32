//! `slurmlens-dev bench slots`: what `[limits] shared` adds to each heavy request: taking its slots in
//! MariaDB (one statement) and releasing them, against a bare `SELECT 1` round trip on the same pool in
//! the same run; with every slot free, and with all but the last of each group held elsewhere (the
//! statement then tries every lock before it finds one).

use std::time::{Duration, Instant};

use anyhow::Context;
use slurmlens::config::Config;
use slurmlens::store::Store;

/// Arguments of `slurmlens-dev bench slots`.
#[derive(Debug, clap::Args)]
pub struct SlotsBenchArgs {
    /// Requests measured in each case.
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    /// `[limits] heavy_per_identity`.
    #[arg(long, default_value_t = 4)]
    pub per_identity: u32,
    /// `[limits] heavy_total`.
    #[arg(long, default_value_t = 32)]
    pub total: u32,
}

/// Prints the time per request of each case and its ratio to the bare round trip.
pub async fn run(config: &Config, args: &SlotsBenchArgs) -> anyhow::Result<()> {
    let database = config.database.as_ref().context("needs [database] (SLURMLENS_DATABASE_URL)")?;
    let store = Store::new(&database.url, Duration::from_secs(10))?;
    let slots = store.slot_pool(args.total);
    let bare = sqlx::MySqlPool::connect(&database.url).await?;
    let identity = "slurmlens:heavy:bench";
    let total_group = "slurmlens:heavy-bench";

    let started = Instant::now();
    for _ in 0..args.requests {
        sqlx::query("SELECT 1").execute(&bare).await?;
    }
    let reference = started.elapsed() / args.requests as u32;
    println!("SELECT 1 round trip (reference)       {:8.3} ms", ms(reference));

    let free = take_and_release(&slots, args, identity, total_group).await?;
    println!("slots taken and released, all free     {:8.3} ms  {:5.2}× reference", ms(free), ratio(free, reference));

    // Another replica holds all but the last slot of each group.
    let mut others = Vec::new();
    let other = store.slot_pool(args.total);
    for _ in 1..args.per_identity {
        let held = other.take_slots(Some(identity), args.per_identity, total_group, args.total).await?;
        others.push(held.map_err(|full| anyhow::anyhow!("no free slot ({full:?})"))?);
    }
    for _ in args.per_identity..args.total {
        let held = other.take_slots(None, args.per_identity, total_group, args.total).await?;
        others.push(held.map_err(|full| anyhow::anyhow!("no free slot ({full:?})"))?);
    }
    let crowded = take_and_release(&slots, args, identity, total_group).await?;
    println!(
        "slots taken and released, one left     {:8.3} ms  {:5.2}× reference",
        ms(crowded),
        ratio(crowded, reference)
    );
    drop(others);
    Ok(())
}

async fn take_and_release(
    slots: &slurmlens::store::lease::SlotPool,
    args: &SlotsBenchArgs,
    identity: &str,
    total_group: &str,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for _ in 0..args.requests {
        let held = slots.take_slots(Some(identity), args.per_identity, total_group, args.total).await?;
        held.map_err(|full| anyhow::anyhow!("no free slot ({full:?})"))?.release().await?;
    }
    Ok(started.elapsed() / args.requests as u32)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn ratio(duration: Duration, reference: Duration) -> f64 {
    duration.as_secs_f64() / reference.as_secs_f64()
}
