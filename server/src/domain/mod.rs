//! Domain types and rules: Slurm's vocabulary, parsed. No axum, sqlx or reqwest below this line.

pub mod blame;
pub mod bottleneck;
pub mod cluster;
pub mod exit_code;
pub mod gpu;
pub mod hostlist;
pub mod ids;
pub mod job;
pub mod logs;
pub mod logsql;
pub mod node_signals;
pub mod profile;
pub mod promql;
pub mod report;
pub mod scope;
pub mod series;
pub mod state;
pub mod time;
pub mod token;
pub mod trace;
pub mod tres;
