//! `bench scale` against the lab: sakura measured against itself, once, so that CI sees the command run
//! through every measure (the router's API and page data, the SQL floor, sacct). Times are never checked.

use std::process::Command;

use super::live::lab_vars;

#[test]
fn bench_scale_prints_every_measure_for_both_clusters() {
    let vars = lab_vars();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slurmlens-dev"));
    for (name, value) in &vars {
        command.env(name, value);
    }
    let output = command
        .env("SLURMLENS_CLUSTERS", "sakura")
        .args(["bench", "scale", "--small", "sakura", "--big", "sakura", "--days", "1", "--repeat", "1"])
        .output()
        .expect("the slurmlens-dev binary runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "bench scale failed:\n{printed}\n{}", String::from_utf8_lossy(&output.stderr));
    for row in [
        "first page, staff",
        "first page, user ",
        "first page, coordinator carol",
        "last 30 days read whole",
        "a page of FAILED jobs, 30 days, staff",
        "widest window a user may list",
        "start=0 as staff",
        "1 days read whole, staff",
        "Gantt data, 1 days",
        "grid now",
        "SQL floor",
        "sacct -a -X -P",
        "ratio 1 days read whole / SQL floor",
    ] {
        let line = printed.lines().find(|line| line.starts_with(row) || line.contains(row));
        let line = line.unwrap_or_else(|| panic!("no `{row}` row in:\n{printed}"));
        // Each measure's row names both clusters' times (the same cluster twice here) and a ratio.
        if !row.starts_with("ratio") {
            assert!(line.contains('x'), "`{row}` has no ratio: {line}");
        }
    }
}
