//! The `slurmlens-dev` binary's command line: the subcommands the scripts and the README call.
//!
//! This test also makes `cargo test --workspace` build `target/debug/slurmlens-dev`, which the browser
//! tests run after CI has pruned the other build outputs (`e2e/test.sh`).

use std::process::Command;

mod gantt;
mod history;
mod live;
mod scale;

/// Runs `slurmlens-dev ARGS… --help` and returns what it printed.
fn help_of(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_slurmlens-dev"))
        .args(args)
        .arg("--help")
        .output()
        .expect("the slurmlens-dev binary runs");
    assert!(output.status.success(), "`{} --help` failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn lists_the_demo_and_bench_subcommands_the_scripts_call() {
    let demo = help_of(&["demo"]);
    for subcommand in ["seed-history", "seed-telemetry", "live"] {
        assert!(demo.contains(subcommand), "`demo` lacks {subcommand}:\n{demo}");
    }
    let bench = help_of(&["bench"]);
    for subcommand in ["window", "report", "ingest", "history", "scale"] {
        assert!(bench.contains(subcommand), "`bench` lacks {subcommand}:\n{bench}");
    }
}

#[test]
fn seed_telemetry_keeps_the_flags_seed_sakura_passes() {
    let seed_telemetry = help_of(&["demo", "seed-telemetry"]);
    for flag in ["--cluster", "--hours", "--planted", "--mirror"] {
        assert!(seed_telemetry.contains(flag), "`demo seed-telemetry` lacks {flag}:\n{seed_telemetry}");
    }
}

#[test]
fn seed_history_keeps_its_flags() {
    let seed_history = help_of(&["demo", "seed-history"]);
    for flag in ["--cluster", "--days", "--jobs", "--nodes", "--gpus-per-node", "--seed"] {
        assert!(seed_history.contains(flag), "`demo seed-history` lacks {flag}:\n{seed_history}");
    }
}
