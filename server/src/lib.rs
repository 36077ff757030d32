//! slurmlens: joins Slurm accounting (slurmdbd), GPU/RDMA metrics and trace summaries per job.
//!
//! Layers: [`http`] → [`app`] → [`sources`], [`store`] → [`domain`]. `domain` holds Slurm's vocabulary
//! and the report's rules and depends on no I/O crate; `sources` and `store` own every database and
//! HTTP client; `app` holds the use cases and never imports `http`; `http` routes, authenticates and
//! maps to the one error envelope. [`telemetry`] (the `/metrics` instruments, the log's format) is a
//! leaf every layer but `domain` records into.

pub mod app;
pub mod config;
pub mod domain;
pub mod http;
pub mod serve;
pub mod sources;
pub mod store;
pub mod telemetry;
pub mod terminal;
