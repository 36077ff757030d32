//! Fuzz targets for the pages' query strings (`query`): times in every form a page accepts, in any zone,
//! and the windows, API queries and links built from them. Nothing a URL holds panics a page; a time
//! that is read lies within RFC 3339's years; what a page writes into a link reads back as itself.
//!
//! Cases per property: `PROPTEST_CASES` (256 by default; CI's fuzz step runs more, docs/FUZZING.md).

use std::collections::BTreeMap;

use proptest::collection::btree_map;
use proptest::prelude::*;

use crate::clock::Zone;
use crate::gantt::{MAX_SPAN, MIN_SPAN};
use crate::query::{GanttQuery, GridQuery, ListQuery, MAX_TIME, MIN_TIME, parse_time, percent_encode};

/// Zone names a form may carry, real and not.
fn zone() -> impl Strategy<Value = Zone> {
    let name = prop_oneof![
        prop::sample::select(vec![
            "UTC",
            "Asia/Tokyo",
            "Europe/Berlin",
            "America/St_Johns",
            "Pacific/Kiritimati",
            "utc"
        ])
        .prop_map(String::from),
        any::<String>(),
    ];
    name.prop_map(|name| name.parse().unwrap_or_default())
}

/// Text shaped like the times pages send, and anything else.
fn time_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        any::<i64>().prop_map(|epoch| epoch.to_string()),
        // Epochs at i64's edges, where a window around them overflowed (`/web/v1/gantt?end=-9223372036854770808`).
        prop_oneof![i64::MIN..i64::MIN + 10_000_000, i64::MAX - 10_000_000..=i64::MAX]
            .prop_map(|epoch| epoch.to_string()),
        "-?[0-9]{1,20}",
        "[0-9+-]{0,2}[0-9]{4,6}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?)?(Z|[+-][0-9]{2}:[0-9]{2})?",
    ]
}

/// A page's query string as a lookup: the parameters a page reads, each set or not.
fn lookup_pairs() -> impl Strategy<Value = BTreeMap<String, String>> {
    let name = prop::sample::select(vec![
        "cluster",
        "start",
        "end",
        "at",
        "tz",
        "colour",
        "metric",
        "user",
        "account",
        "partition",
        "state",
        "q",
        "limit",
    ])
    .prop_map(String::from);
    btree_map(name, time_text(), 0..8)
}

/// Reads `a=1&b=x%20y` back into pairs.
fn decode(query: &str) -> BTreeMap<String, String> {
    let unescape = |text: &str| {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at] == b'%' {
                out.push(u8::from_str_radix(&text[at + 1..at + 3], 16).expect("two hex digits"));
                at += 3;
            } else {
                out.push(bytes[at]);
                at += 1;
            }
        }
        String::from_utf8(out).expect("percent-encoded UTF-8")
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').expect("name=value");
            (name.to_string(), unescape(value))
        })
        .collect()
}

proptest! {
    #[test]
    fn times_parse_within_range_or_not_at_all(text in time_text(), zone in zone()) {
        if let Some(epoch) = parse_time(&text, zone) {
            prop_assert!((MIN_TIME..=MAX_TIME).contains(&epoch), "{text:?} → {epoch}");
        }
    }

    #[test]
    fn times_read_back_in_every_form(epoch in MIN_TIME..=MAX_TIME) {
        prop_assert_eq!(parse_time(&epoch.to_string(), Zone::UTC), Some(epoch));
        let at = chrono::DateTime::from_timestamp(epoch, 0).expect("within RFC 3339's years");
        prop_assert_eq!(parse_time(&at.to_rfc3339(), Zone::UTC), Some(epoch));
        prop_assert_eq!(parse_time(&at.format("%Y-%m-%dT%H:%M:%S").to_string(), Zone::UTC), Some(epoch));
    }

    #[test]
    fn page_queries_never_panic_and_keep_their_windows(pairs in lookup_pairs(), now in MIN_TIME..=MAX_TIME) {
        let get = |name: &str| pairs.get(name).cloned();
        let gantt = GanttQuery::from_lookup(get);
        let (start, end) = gantt.window(now);
        prop_assert!(end - start >= MIN_SPAN as i64 && end - start <= MAX_SPAN as i64, "{start}..{end}");
        let link = gantt.to_query();
        prop_assert_eq!(GanttQuery::from_lookup(|name: &str| decode(&link).get(name).cloned()), gantt);

        let list = ListQuery::from_lookup(get);
        let _ = (list.api_query(now).pairs(), list.beyond_query(now));
        let link = list.to_query(&[]);
        prop_assert_eq!(ListQuery::from_lookup(|name: &str| decode(&link).get(name).cloned()), list);

        let grid = GridQuery::from_lookup(get);
        let link = grid.to_query();
        let again = GridQuery::from_lookup(|name: &str| decode(&link).get(name).cloned());
        prop_assert_eq!((again.cluster, again.at, again.metric), (grid.cluster, grid.at, grid.metric));
    }

    #[test]
    fn percent_encoding_reads_back(text in any::<String>()) {
        let encoded = percent_encode(&text);
        prop_assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~,%".contains(&b)));
        prop_assert_eq!(decode(&format!("v={encoded}")).remove("v").unwrap_or_default(), text);
    }
}
