//! Integration tests against the real lab: MariaDB with slurmdbd's tables, slurmctld and 4 slurmd.
//! The lab is started by `lab/lab.sh up` (the README's test command does it).

mod access;
mod advice;
mod api_errors;
mod chart_history;
mod compare;
mod digests;
mod export;
mod failure;
mod gpu_records;
mod grid;
mod history;
mod jobs_listing;
mod long_jobs;
mod node_page;
mod node_signals;
mod node_states;
mod notify;
mod operations;
mod otelcol;
mod otlp;
mod plugin;
mod plugin_advice;
mod printable;
mod real_logs;
mod replicas;
mod report;
mod sacct_parity;
mod script;
mod security;
mod shares;
mod signals;
mod slurmdbd_versions;
mod sorted_listing;
mod standins;
mod support;
mod tags;
mod tenancy;
mod traces;
mod usage;
mod vm_versions;

/// A file under `tests/it` that no `mod` line names is never compiled, so its tests would silently
/// never run: every file here must be a module of this binary.
#[test]
fn every_file_under_tests_it_is_part_of_the_test_binary() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let main = std::fs::read_to_string(here.join("main.rs")).expect("reading tests/it/main.rs");
    let declared: Vec<String> = main
        .lines()
        .filter_map(|line| line.trim().strip_prefix("mod ")?.strip_suffix(';').map(str::to_string))
        .collect();
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(&here).expect("listing tests/it") {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|stem| stem.to_str()) else { continue };
        let is_module = path.extension().is_some_and(|ext| ext == "rs") || path.is_dir();
        if is_module && stem != "main" && !declared.iter().any(|name| name == stem) {
            orphans.push(path.display().to_string());
        }
    }
    assert!(orphans.is_empty(), "not declared with `mod` in tests/it/main.rs: {orphans:?}");
}
