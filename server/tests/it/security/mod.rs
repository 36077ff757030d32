//! The `security` group: one test per promise of docs/SECURITY.md, each against the real lab, each
//! written to fail on the code before the promise was kept.
//!
//! - `identity`: who the server believes (proxy headers, tokens, their limits).
//! - `overload`: what one user can cost slurmdbd's database and the server.
//! - `ingest`: what the nodes' and collectors' bodies can cost, and who may send what.
//! - `tenancy`: nothing beside a job (logs, other tenants' GPUs, an older job's records) reaches its viewer.
//! - `bad_input`: no request panics the server or answers with an internal detail.

mod bad_input;
mod identity;
mod ingest;
mod overload;
mod tenancy;
