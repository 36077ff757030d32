//! Demo data: synthetic but realistic Slurm accounting history written straight into
//! slurmdbd's MySQL tables, so that the real Slurm clients (`sacct -M <cluster>`,
//! `sacctmgr show event`) and slurmlens read the same rows.

pub mod cli;
pub mod history;
pub mod live;
pub mod longjob;
pub mod nodes;
pub mod resume;
pub mod seed_telemetry;
pub mod telemetry;
pub mod traces;

pub use cli::{DemoArgs, run};
pub use history::{HistoryParams, HistoryStats, default_params, generate};
