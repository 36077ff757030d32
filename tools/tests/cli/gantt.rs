//! `bench gantt` against the lab: one day of sakura, once, so that CI sees the command run through
//! every measure (the first view, the kept hours, the server keeping none, the listing, slurmdbd's
//! read, the grid). Times are never checked.

use super::live::dev_against_lab;

#[test]
fn bench_gantt_prints_every_measure_against_its_references() {
    let printed = dev_against_lab(&["bench", "gantt", "--cluster", "sakura", "--days", "1", "--repeat", "1"]);
    for row in [
        "gantt 1 d",
        "  first view, hours read",
        "  keeping no history",
        "  kept / keeping none: ",
        "  slurmdbd window read 1 d",
        "  app chart read 1 d",
        "grid at the end",
    ] {
        let line = printed.lines().find(|line| line.starts_with(row));
        let line = line.unwrap_or_else(|| panic!("no `{row}` row in:\n{printed}"));
        // Every row ends in a ratio to its reference.
        let ratio = line.split_whitespace().last().and_then(|word| word.parse::<f64>().ok());
        assert!(ratio.is_some_and(f64::is_finite), "`{row}` ends in no ratio: {line}");
    }
}
