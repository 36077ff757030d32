//! The few distributions the workload is drawn from, all on one seeded RNG so that a seed gives one history.

use rand::Rng;
use rand::rngs::StdRng;

pub(super) fn uniform(rng: &mut StdRng) -> f64 {
    rng.gen_range(0.0..1.0)
}

pub(super) fn normal(rng: &mut StdRng) -> f64 {
    let first: f64 = rng.gen_range(f64::EPSILON..1.0);
    let second = uniform(rng);
    (-2.0 * first.ln()).sqrt() * (std::f64::consts::TAU * second).cos()
}

pub(super) fn lognormal(rng: &mut StdRng, median: f64, sigma: f64) -> f64 {
    median * (sigma * normal(rng)).exp()
}

pub(super) fn chance(rng: &mut StdRng, probability: f64) -> bool {
    uniform(rng) < probability
}

pub(super) fn pick<T: Copy>(rng: &mut StdRng, items: &[(T, f64)]) -> T {
    let total: f64 = items.iter().map(|item| item.1).sum();
    let mut target = uniform(rng) * total;
    for (value, weight) in items {
        if target < *weight {
            return *value;
        }
        target -= weight;
    }
    items[items.len() - 1].0
}
