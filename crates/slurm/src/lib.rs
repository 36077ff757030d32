//! Slurm's vocabulary, shared by the server and the web front end: hostlist expressions, job and node
//! state words, signal names, job ids as users type them and as slurmdbd stores them, a job's GPUs per node, and the
//! racks nodes stand in.
//!
//! Pure code over strings and numbers: no I/O, no async runtime, no randomness, so it builds for the
//! browser bundle (wasm32) as it does for the server. Its dependencies are serde and thiserror, plus
//! toml behind the feature `toml` (only the server reads topology files).

pub mod gpus;
pub mod hostlist;
pub mod ids;
pub mod signal;
pub mod sluid;
pub mod state;
pub mod topology;

#[cfg(test)]
mod fuzz_tests;
