//! Data sources slurmlens reads: slurmdbd's database (read-only). Each module owns its driver's errors.

pub mod slurmdbd;
pub mod victoriametrics;
