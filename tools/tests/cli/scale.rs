//! `bench scale` against the lab: sakura measured against itself, once, so that CI sees the command run
//! through every measure (the router's API and page data, the SQL floor, sacct). Times are never checked.

use super::live::dev_against_lab;

#[test]
fn bench_scale_prints_every_measure_for_both_clusters() {
    let printed =
        dev_against_lab(&["bench", "scale", "--small", "sakura", "--big", "sakura", "--days", "1", "--repeat", "1"]);
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
