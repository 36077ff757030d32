//! Data sources slurmlens reads: slurmdbd's database (read-only), VictoriaMetrics, VictoriaLogs and
//! Pyroscope; and the notifier's channels out (SMTP, webhooks). Each module owns its driver's errors.

pub mod channels;
pub mod job_files;
pub mod munge;
pub mod pyroscope;
pub mod slurmdbd;
pub mod victorialogs;
pub mod victoriametrics;
