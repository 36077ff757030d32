//! Domain types and rules: Slurm's vocabulary, parsed. No axum, sqlx or reqwest below this line.

/// Hostlists, job ids and job/node states live in `crates/slurm` (shared with the web pages); they
/// are re-exported here so that `crate::domain::hostlist`, `::ids` and `::state` keep naming them.
pub use slurmlens_slurm::{hostlist, ids, state};

pub mod advice;
pub mod blame;
pub mod bottleneck;
pub mod cluster;
pub mod colours;
pub mod coverage;
pub mod exit_code;
pub mod gpu;
pub mod history;
pub mod job;
pub mod job_output;
pub mod logs;
pub mod logsql;
pub mod node_health;
pub mod node_signals;
pub mod notify;
pub mod profile;
pub mod promql;
pub mod report;
pub mod rules;
pub mod scope;
pub mod series;
pub mod share;
pub mod tag;
pub mod time;
pub mod token;
pub mod trace;
pub mod tres;
pub mod usage;
pub mod verdicts;

#[cfg(test)]
pub(crate) mod fuzz_tests;

/// `n` of a countable `noun`, as a sentence says it: "1 fact", "3 facts".
pub(crate) fn counted(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}
