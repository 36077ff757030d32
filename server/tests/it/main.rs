//! Integration tests against the real lab: MariaDB with slurmdbd's tables, slurmctld and 4 slurmd.
//! The lab is started by `lab/lab.sh up` (the README's test command does it).

mod access;
mod api_errors;
mod failure;
mod gpu_records;
mod jobs_listing;
mod node_signals;
mod otlp;
mod plugin;
mod report;
mod sacct_parity;
mod signals;
mod standins;
mod support;
mod tenancy;
mod traces;
