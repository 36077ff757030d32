//! slurmlens: joins Slurm accounting (slurmdbd), GPU/RDMA metrics and trace summaries per job.
//!
//! Layers: [`http`] → [`domain`] ← [`sources`]. `domain` holds Slurm's vocabulary and rules and
//! depends on no I/O crate; `sources` owns every database and HTTP client; `http` maps between them.

pub mod config;
pub mod domain;
pub mod http;
pub mod reports;
pub mod serve;
pub mod signals;
pub mod sources;
pub mod store;
pub mod terminal;
pub mod traces;
