//! slurmlens's dev tooling, kept out of the server crate: the demo data it writes (slurmdbd's tables,
//! VictoriaMetrics series, trace summaries) and the benchmarks that time the server against bare queries.
//!
//! This is the only crate that writes slurmdbd's tables; the server reads them and never holds a user
//! that may write them.

pub mod audit;
pub mod bench;
pub mod demo;
