//! Data sources slurmlens reads: slurmdbd's database (read-only), VictoriaMetrics, VictoriaLogs and
//! Pyroscope. Each module owns its driver's errors.

pub mod munge;
pub mod pyroscope;
pub mod slurmdbd;
pub mod victorialogs;
pub mod victoriametrics;
