//! Fuzz targets for the text this crate reads from outside: hostlist expressions (slurmdbd's
//! `nodelist`, the pages' node rows), job ids as users type them, state filters, exit codes and
//! slurmdbd's array task bitmaps. Each is a property over arbitrary text and over text shaped like
//! the real thing: it never panics, its output stays within its caps, and what is printed parses back.
//!
//! Cases per property: `PROPTEST_CASES` (proptest's default 256 for `cargo test`; CI's fuzz step runs
//! more, docs/FUZZING.md).

use std::collections::BTreeSet;

use proptest::collection::vec;
use proptest::prelude::*;

use crate::hostlist::{Hostlist, HostlistError, MAX_GROUPS, MAX_HOSTS, MAX_LENIENT_HOSTS, expand_lenient};
use crate::ids::{JobIdentity, JobSelector, NO_VAL, array_bitmap_ranges};
use crate::signal::exit_code_in_words;
use crate::state::StateFilter;

/// A number as a range bound: mostly small (so expansions stay quick), sometimes padded, sometimes at
/// or beyond `u64`'s edge.
fn bound() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u64..120).prop_map(|n| n.to_string()),
        2 => "0[0-9]{1,3}",
        1 => Just(u64::MAX.to_string()),
        1 => Just((u64::MAX - 1).to_string()),
        1 => Just("18446744073709551616".to_string()),
        1 => "[0-9]{12,22}",
        1 => Just(String::new()),
    ]
}

/// Text shaped like a hostlist expression: names, bracket groups of ranges, commas, stray brackets.
fn hostlist_like() -> impl Strategy<Value = String> {
    let range = prop_oneof![bound(), (bound(), bound()).prop_map(|(lo, hi)| format!("{lo}-{hi}"))];
    let group = vec(range, 0..4).prop_map(|ranges| format!("[{}]", ranges.join(",")));
    let piece = prop_oneof![4 => "[a-z]{1,4}", 3 => group, 1 => "[-_. ]", 1 => "[\\[\\],]"];
    let item = vec(piece, 1..5).prop_map(|pieces| pieces.concat());
    vec(item, 1..4).prop_map(|items| items.join(","))
}

/// Any text: arbitrary Unicode, or hostlist-shaped.
fn any_hostlist_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), hostlist_like()]
}

/// Host names as Slurm sites write them, with numeric suffixes up to `u64::MAX`.
fn host_name() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        4 => (0u64..64).prop_map(|n| n.to_string()),
        2 => "0[0-9]{1,3}",
        1 => Just(u64::MAX.to_string()),
        1 => "[0-9]{18,21}",
        1 => Just(String::new()),
    ];
    ("[a-z][a-z-]{0,2}", number).prop_map(|(prefix, number)| format!("{prefix}{number}"))
}

/// Identities slurmdbd can hold: plain jobs, array tasks, het components.
fn job_identity() -> impl Strategy<Value = JobIdentity> {
    let id = 1u32..NO_VAL;
    prop_oneof![
        id.clone().prop_map(JobIdentity::plain),
        (id.clone(), id.clone(), 0u32..NO_VAL).prop_map(|(own, array, task)| JobIdentity {
            id_array_job: array,
            id_array_task: task,
            ..JobIdentity::plain(own)
        }),
        (id.clone(), id, 0u32..NO_VAL).prop_map(|(own, leader, offset)| JobIdentity {
            het_job_id: leader,
            het_job_offset: offset,
            ..JobIdentity::plain(own)
        }),
    ]
}

/// A selector as a user types it.
fn selector_text(selector: JobSelector) -> String {
    match selector {
        JobSelector::Id(id) => id.to_string(),
        JobSelector::ArrayTask { array_job_id, task_id } => format!("{array_job_id}_{task_id}"),
        JobSelector::HetComponent { het_job_id, offset } => format!("{het_job_id}+{offset}"),
    }
}

/// The task numbers `0-3,7` names.
fn read_ranges(text: &str) -> BTreeSet<u32> {
    let mut tasks = BTreeSet::new();
    for part in text.split(',').filter(|part| !part.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (u32, u32) = (lo.parse().expect("a task number"), hi.parse().expect("a task number"));
        tasks.extend(lo..=hi);
    }
    tasks
}

proptest! {
    #[test]
    fn hostlist_parse_never_panics_and_stays_under_its_cap(expr in any_hostlist_text()) {
        if let Ok(list) = Hostlist::parse(&expr) {
            prop_assert!(list.len() <= MAX_HOSTS);
            // What parses prints, and the print parses to the same hosts.
            let again = Hostlist::parse(&list.compress()).expect("a compressed list parses");
            let (hosts, back): (BTreeSet<_>, BTreeSet<_>) = (list.hosts().iter().collect(), again.hosts().iter().collect());
            prop_assert_eq!(hosts, back);
        }
        prop_assert!(expand_lenient(&expr).len() <= MAX_LENIENT_HOSTS);
    }

    #[test]
    fn hostlist_ranges_beyond_a_usize_are_refused_not_wrapped(lo in 0u64..4, hi in (u64::MAX - 4)..=u64::MAX) {
        let expr = format!("n[{lo}-{hi}]");
        prop_assert_eq!(Hostlist::parse(&expr), Err(HostlistError::TooLarge(expr.clone())));
        prop_assert_eq!(expand_lenient(&expr), vec![expr]);
    }

    #[test]
    fn hostlist_compress_then_parse_gives_the_same_hosts(hosts in vec(host_name(), 0..40)) {
        let list = Hostlist::from_hosts(hosts.clone());
        let compressed = list.compress();
        let parsed = Hostlist::parse(&compressed).map_err(|e| TestCaseError::fail(format!("{compressed}: {e}")))?;
        let expected: BTreeSet<&String> = hosts.iter().collect();
        let got: BTreeSet<&String> = parsed.hosts().iter().collect();
        prop_assert_eq!(got, expected, "compressed as {}", compressed);
        prop_assert_eq!(Hostlist::parse(&compressed).map(|list| list.compress()), Ok(compressed));
    }

    #[test]
    fn lenient_expansion_matches_parse_wherever_parse_accepts(expr in hostlist_like()) {
        if let Ok(list) = Hostlist::parse(&expr)
            && list.len() <= MAX_LENIENT_HOSTS
        {
            prop_assert_eq!(expand_lenient(&expr), list.hosts().to_vec());
        }
    }

    #[test]
    fn job_id_parse_never_panics(text in prop_oneof![any::<String>(), "[0-9]{0,11}([_+][0-9+_-]{0,11})?"]) {
        if let Ok(selector) = text.parse::<JobSelector>() {
            prop_assert_eq!(selector_text(selector).parse::<JobSelector>(), Ok(selector));
        }
    }

    #[test]
    fn printed_job_ids_parse_back_to_their_job(identity in job_identity()) {
        let printed = identity.to_string();
        let selector: JobSelector = printed.parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert!(identity.matches(selector), "{printed} names {selector:?}");
    }

    #[test]
    fn array_bitmaps_decode_to_their_set_bits(digits in "[0-9a-fA-F]{0,40}", prefix in prop_oneof![Just(""), Just("0x"), Just("0X")]) {
        let ranges = array_bitmap_ranges(&format!("{prefix}{digits}"));
        let mut expected = BTreeSet::new();
        for (position, digit) in digits.chars().rev().enumerate() {
            let nibble = digit.to_digit(16).expect("a hex digit");
            expected.extend((0..4).filter(|bit| nibble & (1 << bit) != 0).map(|bit| position as u32 * 4 + bit));
        }
        prop_assert_eq!(read_ranges(&ranges), expected);
    }

    #[test]
    fn array_bitmaps_and_state_filters_and_exit_codes_never_panic(text in any::<String>()) {
        let _ = array_bitmap_ranges(&text);
        let _ = text.parse::<StateFilter>();
        let _ = exit_code_in_words(&text);
    }
}

/// A bound, not a search: three sizes show it (proptest's `PROPTEST_CASES` would multiply these large inputs).
#[test]
fn hostlist_items_with_many_groups_are_refused_before_they_recurse() {
    // Each group was a level of recursion: 100,000 of them overflowed the stack (a crash, not a panic).
    for groups in [MAX_GROUPS + 1, 1_000, 100_000] {
        let item = "n[1]".repeat(groups);
        assert_eq!(Hostlist::parse(&item), Err(HostlistError::TooManyGroups(item.clone())));
        assert_eq!(expand_lenient(&item), vec![item]);
    }
    let most = "n[1]".repeat(MAX_GROUPS);
    assert_eq!(Hostlist::parse(&most).map(|list| list.hosts().to_vec()), Ok(vec!["n1".repeat(MAX_GROUPS)]));
}
