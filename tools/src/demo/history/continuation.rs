//! The history continued past its end: jobs arrive hour by hour at the history's rates, drawn by the same
//! workload model and placed by the same scheduler after the history's own jobs.

use std::cmp::Reverse;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::random::chance;
use super::schedule::Builder;
use super::workload::{Category, UsageProfile, hour_weight};

/// The history's arrival rates, for submissions after its end.
pub(super) struct Rates {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) seed: u64,
    /// The history's scaling of run times (not of production runs or NCCL checks).
    pub(super) scale: f64,
    /// (category, production, submissions over the history, flatness of their daily curve).
    pub(super) arrivals: Vec<(Category, bool, f64, f64)>,
}

/// Submits jobs hour by hour after the history's end up to `until`, each hour from its own RNG (so a
/// later `until` only adds hours), and places them with the history's scheduler in submit order.
pub(super) fn continue_after(builder: &mut Builder<'_>, rates: &Rates, until: i64) {
    // Rows settle as they will end: the live continuation shows each as its time comes.
    builder.workload.end = i64::MAX;
    let hours = ((rates.end - rates.start) / 3600).max(1);
    let mean_weight = |flatness: f64| {
        (0..hours).map(|hour| hour_weight(rates.start + hour * 3600).powf(flatness)).sum::<f64>() / hours as f64
    };
    let means: Vec<f64> = rates.arrivals.iter().map(|&(_, _, _, flatness)| mean_weight(flatness)).collect();
    let mut hour_start = rates.end;
    let mut hour_index: u64 = 0;
    while hour_start < until {
        let mut rng = StdRng::seed_from_u64(rates.seed ^ 0x4c69_7665_0000_0000 ^ hour_index.wrapping_mul(0x9E37_79B9));
        let mut submissions = Vec::new();
        for (&(category, prod, count, flatness), mean) in rates.arrivals.iter().zip(&means) {
            let expected = count / hours as f64 * hour_weight(hour_start).powf(flatness) / mean;
            let arrivals = expected.floor() as u32 + u32::from(chance(&mut rng, expected.fract()));
            for _ in 0..arrivals {
                let submit_time = hour_start + rng.gen_range(0..3600);
                let mut submission = builder.workload.submission(&mut rng, category, submit_time, prod);
                if !submission.prod && submission.profile != UsageProfile::Nccl {
                    submission.natural_secs *= rates.scale;
                }
                builder.workload.finalize(&mut rng, &mut submission);
                submissions.push(submission);
            }
        }
        submissions.sort_by_key(|submission| submission.submit_time);
        builder.sched.prune(hour_start);
        for submission in &submissions {
            requeue_until(builder, &mut rng, submission.submit_time);
            builder.process(&mut rng, submission, None);
        }
        hour_start += 3600;
        hour_index += 1;
        requeue_until(builder, &mut rng, hour_start);
    }
}

/// Runs the requeued jobs due before `time`.
fn requeue_until(builder: &mut Builder<'_>, rng: &mut StdRng, time: i64) {
    while let Some(&Reverse((submit_time, _, requeue_index))) = builder.heap.peek()
        && submit_time < time
    {
        builder.heap.pop();
        let submission = builder.requeues[requeue_index].clone();
        let id = builder.requeue_ids[requeue_index];
        builder.process(rng, &submission, Some(id));
    }
}
