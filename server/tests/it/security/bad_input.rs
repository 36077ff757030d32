//! See `security/mod.rs`.
