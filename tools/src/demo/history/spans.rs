//! Histories of years, simulated span by span (30 days each), oldest first, and written as they come.
//!
//! One simulation of five years would hold ten million rows and their submissions at once; instead each
//! span is simulated on its own (its share of the jobs, its own seed and events) with the scheduler's
//! state carried across: the runs and reservations that reach past a span's end, and the node events
//! that do, block the next span's nodes exactly as in one long simulation, and job ids run on. The last
//! span ends "now" like a short history (held jobs, events still open, the planted failures); every
//! older span settles what was running or pending at its end into the row it ends as.
//!
//! Simplifications, older spans only: an array's tasks still pending at a span's end are written as
//! cancelled then (the meta row), though the scheduler keeps the time it had planned for them, so a
//! little capacity stays idle at each boundary; a requeued job's next attempt that falls past a span's
//! end is dropped; the load is scaled to ~76 % of the GPUs per span rather than over the whole window.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use sqlx::MySqlPool;
use tokio::sync::mpsc;

use super::context::ClusterContext;
use super::events::EventRow;
use super::rows::{JobRow, Plan};
use super::schedule::simulate_span;
use super::scheduler::{BusyIntervals, NodeBlock, Scheduler};
use super::workload::JobOutcome;
use super::write::{SpanWriter, hash_plan};
use super::{CPU_SLOTS, FIRST_JOB_ID, HistoryParams, HistoryStats, WaitSums};

/// Longest window simulated at once; a longer history is cut into spans of this many days.
pub(super) const SPAN_DAYS: u32 = 30;

/// Where one span sits in a history: the scheduler state carried in, its first job id, whether it is
/// the last (the one that ends now).
pub(super) struct Span {
    pub(super) carry: Option<Carry>,
    pub(super) first_id: u32,
    pub(super) last: bool,
}

impl Span {
    /// A history simulated in one piece.
    pub(super) fn whole() -> Self {
        Span { carry: None, first_id: FIRST_JOB_ID, last: true }
    }
}

/// What a span leaves to the next: busy intervals and node events that reach past its end, and the
/// next free job id.
pub(super) struct Carry {
    gpu: Vec<BusyIntervals>,
    cpu: Vec<BusyIntervals>,
    blocks: Vec<Vec<NodeBlock>>,
    /// Per node: the end of the last carried run, reservation or event on it.
    busy_until: Vec<i64>,
    pub(super) next_id: u32,
}

impl Carry {
    /// Takes what reaches past `end` out of a span's scheduler.
    pub(super) fn take_from(sched: &mut Scheduler, end: i64, next_id: u32) -> Carry {
        sched.prune(end);
        let gpu = std::mem::take(&mut sched.gpu);
        let cpu = std::mem::take(&mut sched.cpu);
        let blocks: Vec<Vec<NodeBlock>> = sched
            .blocks
            .iter()
            .map(|node_blocks| node_blocks.iter().filter(|block| block.time_end > end).copied().collect())
            .collect();
        let last_end = |slots: &[BusyIntervals]| slots.iter().filter_map(|busy| busy.last()).map(|run| run.1).max();
        let busy_until = (0..sched.node_count)
            .map(|node| {
                let gpus = last_end(&gpu[node * sched.gpus_per_node..(node + 1) * sched.gpus_per_node]);
                let cpus = last_end(&cpu[node * CPU_SLOTS..(node + 1) * CPU_SLOTS]);
                let events = blocks[node].iter().map(|block| block.time_end).max();
                gpus.max(cpus).max(events).unwrap_or(i64::MIN)
            })
            .collect();
        Carry { gpu, cpu, blocks, busy_until, next_id }
    }

    /// Puts the carried intervals and events into the next span's fresh scheduler.
    pub(super) fn load_into(self, sched: &mut Scheduler) {
        sched.gpu = self.gpu;
        sched.cpu = self.cpu;
        for (node_blocks, carried) in sched.blocks.iter_mut().zip(self.blocks) {
            node_blocks.extend(carried);
            node_blocks.sort_by_key(|block| block.time_start);
        }
    }

    /// Drops the new span's events that would fall on a node still busy with carried work: an event
    /// never starts under a run the previous span already decided.
    pub(super) fn keep_clear(&self, events: &mut Vec<EventRow>) {
        events.retain(|event| event.time_start >= self.busy_until[event.node].saturating_add(1800));
    }
}

/// An older span's rows as they end: a row running or pending at the span's end becomes the row the
/// scheduler had planned for it; one never placed (an array's pending rest) is cancelled at the end.
pub(super) fn settle_span(jobs: &mut [JobRow], end: i64) {
    for job in jobs.iter_mut() {
        if let Some(future) = job.future.take() {
            *job = *future;
        } else if matches!(job.kind, JobOutcome::Pending { .. } | JobOutcome::Running) {
            job.kind = JobOutcome::CancelledPending { uid: 0 };
            job.t_end = end;
        }
    }
}

/// The spans of `params`' window, oldest first, each as its own parameters: window, share of the jobs
/// (rounded up, so the whole has at least `n_jobs`), seed (the last span keeps `params.seed`).
pub(super) fn span_params(params: &HistoryParams) -> Vec<HistoryParams> {
    let count = params.days.div_ceil(SPAN_DAYS);
    let first_days = params.days - (count - 1) * SPAN_DAYS;
    (0..count)
        .map(|index| {
            let days = if index == 0 { first_days } else { SPAN_DAYS };
            let spans_after = count - 1 - index;
            HistoryParams {
                end: params.end - chrono::Duration::days(i64::from(spans_after * SPAN_DAYS)),
                days,
                n_jobs: (u64::from(params.n_jobs) * u64::from(days)).div_ceil(u64::from(params.days)) as u32,
                seed: params.seed ^ u64::from(spans_after).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                ..params.clone()
            }
        })
        .collect()
}

/// Simulates the spans oldest first and hands each span's parameters, plan and simulation seconds to
/// `each` as soon as it is built (so that at most two spans are held at once).
pub(super) fn simulate_spans(
    params: &HistoryParams,
    context: &ClusterContext,
    start: SpansStart,
    mut each: impl FnMut(HistoryParams, Plan, f64) -> Result<()>,
) -> Result<()> {
    let spans = span_params(params);
    let count = spans.len();
    let mut carry: Option<Carry> = None;
    let mut first_id = start.first_id;
    for (index, span_params) in spans.into_iter().enumerate() {
        let started = Instant::now();
        let span = Span { carry: carry.take(), first_id, last: start.ends_now && index + 1 == count };
        let (plan, _, next) = simulate_span(&span_params, context, None, span)?;
        first_id = next.next_id;
        carry = Some(next);
        each(span_params, plan, started.elapsed().as_secs_f64())?;
    }
    Ok(())
}

/// How a span-by-span history begins and ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct SpansStart {
    /// The first job id.
    pub(super) first_id: u32,
    /// The history ends now (its last span is written as a short history's end), rather than where an
    /// existing history begins.
    pub(super) ends_now: bool,
    /// Delete the cluster's rows first; else the spans are added to them.
    pub(super) clear: bool,
}

impl SpansStart {
    /// A whole history that replaces the cluster's.
    pub(super) const FRESH: SpansStart = SpansStart { first_id: FIRST_JOB_ID, ends_now: true, clear: true };
}

/// Adds one span's summary to the whole history's.
pub(super) fn add_span(total: &mut HistoryStats, span: HistoryStats) {
    total.jobs += span.jobs;
    total.steps += span.steps;
    total.events += span.events;
    for (state, count) in span.per_state {
        *total.per_state.entry(state).or_default() += count;
    }
    total.gpu_hours += span.gpu_hours;
    total.capacity_gpu_hours += span.capacity_gpu_hours;
    total.simulate_secs += span.simulate_secs;
    total.xid_victim = span.xid_victim.or(total.xid_victim);
    total.app_crash = span.app_crash.or(total.app_crash);
}

/// [`super::generate`] for a history longer than one span: the old rows are deleted, then each span is
/// written (and committed) while the next one is simulated on a blocking thread.
pub(super) async fn generate_spans(
    pool: &MySqlPool,
    loader: &super::Loader,
    params: &HistoryParams,
    context: ClusterContext,
    start: SpansStart,
) -> Result<HistoryStats> {
    let started = Instant::now();
    let context = Arc::new(context);
    // One span waits while the previous one is written: the simulation never runs far ahead.
    let (sender, mut receiver) = mpsc::channel::<(HistoryParams, Arc<Plan>, f64)>(1);
    let simulator = {
        let (params, context) = (params.clone(), Arc::clone(&context));
        tokio::task::spawn_blocking(move || {
            simulate_spans(&params, &context, start, |span_params, plan, secs| {
                sender.blocking_send((span_params, Arc::new(plan), secs)).map_err(|_| anyhow!("the writer stopped"))
            })
        })
    };
    let mut writer = SpanWriter::start(pool, loader, &params.cluster, start.clear).await?;
    let written = write_spans(&mut writer, &mut receiver, params, &context, started).await;
    // The indexes come back whether or not every span was written.
    let indexed = writer.finish().await;
    let mut stats = written?;
    indexed?;
    // The simulator's error (if any) explains why the channel closed early.
    simulator.await.map_err(|error| anyhow!("the simulation panicked: {error}"))??;
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(stats)
}

/// Spans written side by side, each in its two transactions: one span's two connections kept MariaDB
/// on about one core of two.
const SPANS_IN_FLIGHT: usize = 2;

/// A span being written, with what its summary needs.
type SpanWrite = (HistoryParams, Arc<Plan>, f64, tokio::task::JoinHandle<Result<(u64, u64, u64)>>);

/// Writes each span the simulator sends, [`SPANS_IN_FLIGHT`] at a time, summing their summaries in
/// order.
async fn write_spans(
    writer: &mut SpanWriter,
    receiver: &mut mpsc::Receiver<(HistoryParams, Arc<Plan>, f64)>,
    params: &HistoryParams,
    context: &Arc<ClusterContext>,
    started: Instant,
) -> Result<HistoryStats> {
    let mut stats = HistoryStats { cluster: params.cluster.clone(), ..HistoryStats::default() };
    let mut span_index = 0;
    let mut writing: std::collections::VecDeque<SpanWrite> = std::collections::VecDeque::new();
    loop {
        let next = match writing.len() < SPANS_IN_FLIGHT {
            true => receiver.recv().await,
            false => None,
        };
        if let Some((span_params, plan, simulate_secs)) = next {
            // The first span also writes the cluster's registration row (its TRES) among its events.
            let first = span_index == 0 && writing.is_empty();
            let task = writer.spawn_write(span_params.clone(), Arc::clone(context), Arc::clone(&plan), first).await?;
            writing.push_back((span_params, plan, simulate_secs, task));
            continue;
        }
        // Full, or the simulation is done: the oldest span's write is awaited.
        let Some((span_params, plan, simulate_secs, task)) = writing.pop_front() else { break };
        let (jobs, steps, events) = task.await.map_err(|error| anyhow!("a span's writer panicked: {error}"))??;
        let mut span_stats = plan.stats(&span_params);
        span_stats.jobs = jobs;
        span_stats.steps = steps;
        span_stats.events = events;
        span_stats.simulate_secs = simulate_secs;
        add_span(&mut stats, span_stats);
        span_index += 1;
        tracing::info!(
            span = span_index,
            end = %span_params.end,
            jobs = stats.jobs,
            steps = stats.steps,
            secs = started.elapsed().as_secs_f64(),
            "history: span written"
        );
    }
    Ok(stats)
}

/// [`super::rehearse`] for a history longer than one span: summary, digest (every span's rows, in the
/// order they would be written) and mean queue waits per day since the history's start.
pub(super) fn rehearse_spans(
    params: &HistoryParams,
    context: &ClusterContext,
) -> Result<(HistoryStats, String, WaitSums)> {
    use sha2::{Digest, Sha256};
    let started = Instant::now();
    let history_start = params.end.timestamp() - i64::from(params.days) * 86_400;
    let mut stats = HistoryStats { cluster: params.cluster.clone(), ..HistoryStats::default() };
    let mut hasher = Sha256::new();
    let mut base = 1;
    let mut per_day = WaitSums::new();
    let mut first = true;
    simulate_spans(params, context, SpansStart::FRESH, |span_params, plan, simulate_secs| {
        hash_plan(&mut hasher, &span_params, context, &plan, base, first)?;
        first = false;
        base += plan.jobs.len() as u64;
        super::add_waits(&mut per_day, &plan, history_start);
        let mut span_stats = plan.stats(&span_params);
        span_stats.simulate_secs = simulate_secs;
        add_span(&mut stats, span_stats);
        Ok(())
    })?;
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    let digest = hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect();
    Ok((stats, digest, per_day))
}
