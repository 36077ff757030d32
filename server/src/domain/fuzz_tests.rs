//! Fuzz targets for the domain's parsers of outside text: TRES strings, job cursors and searches, GPU
//! index lists, cluster and token names, trace names and cgroup paths, trace records, `nsys stats`
//! CSV, times, and the escaping that puts request text into PromQL and LogsQL. Each is a property over
//! arbitrary input and over input shaped like (or mutated from) the real thing: it never panics, its
//! output stays bounded, what is printed parses back, and an escaped value reads back as itself.
//!
//! Cases per property: `PROPTEST_CASES` (256 by default; CI's fuzz step runs more, docs/FUZZING.md).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use proptest::collection::vec;
use proptest::prelude::*;

use super::cluster::ClusterName;
use super::exit_code::ExitCode;
use super::gpu::{format_gpu_indices, parse_gpu_indices};
use super::job::{JobCursor, JobSearch, MAX_SEARCH_CHARS};
use super::logsql::{self, ContainsText, FieldName};
use super::profile::ProfileType;
use super::promql::{self, LabelName, Matcher, MetricName, Selector};
use super::time::{elapsed_seconds, epoch, format_duration, iso_utc};
use super::token::{TokenName, TokenSecret};
use super::trace::{
    RawTraceSummary, SlurmCgroup, TraceCategory, TraceName, TraceSummary, parse_category, parse_nsys_csv,
};
use super::tres::{TresMap, megabytes_exact};

/// `seed` with a few random edits (bytes flipped, inserted, deleted, chunks repeated): input that gets
/// past a decoder's first checks, which arbitrary bytes rarely do.
pub fn mutated(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let edit = (0u8..4, any::<prop::sample::Index>(), any::<prop::sample::Index>(), vec(any::<u8>(), 1..6));
    vec(edit, 0..6).prop_map(move |edits| {
        let mut bytes = seed.clone();
        for (kind, at, other, fresh) in edits {
            if bytes.is_empty() {
                bytes.extend_from_slice(&fresh);
                continue;
            }
            let (at, other) = (at.index(bytes.len()), other.index(bytes.len()));
            match kind {
                0 => bytes[at] = fresh[0],
                1 => {
                    bytes.splice(at..at, fresh);
                }
                2 => {
                    bytes.drain(at.min(other)..at.max(other));
                }
                _ => {
                    let chunk = bytes[at.min(other)..at.max(other)].to_vec();
                    bytes.splice(at..at, chunk);
                }
            }
        }
        bytes
    })
}

/// Reads a double-quoted string as Go's `strconv.Unquote` does (VictoriaMetrics and VictoriaLogs read
/// quoted strings that way): the value and the text after the closing quote, or `None` where Go
/// would refuse it.
fn go_unquote(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('"')?.char_indices();
    let mut value = String::new();
    let body = &text[1..];
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, &body[at + 1..])),
            '\n' => return None,
            '\\' => {
                let (_, escape) = chars.next()?;
                let hex = |chars: &mut std::str::CharIndices<'_>, digits: usize| -> Option<char> {
                    let text: String = (0..digits).filter_map(|_| chars.next().map(|(_, c)| c)).collect();
                    (text.len() == digits).then(|| u32::from_str_radix(&text, 16).ok().and_then(char::from_u32))?
                };
                value.push(match escape {
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    '\\' | '"' => escape,
                    'u' => hex(&mut chars, 4)?,
                    'U' => hex(&mut chars, 8)?,
                    _ => return None,
                });
            }
            other => value.push(other),
        }
    }
    None
}

/// Characters that mean something to LogsQL outside a quoted phrase, or end one.
const LOGSQL_SYNTAX: &str = "\"\\|:*()'`{}^$~<>&;";

fn label(name: &str) -> LabelName {
    name.parse().expect("a valid label name")
}

/// Text shaped like slurmdbd's TRES strings, with numbers up to and past `u64`'s edge.
fn tres_like() -> impl Strategy<Value = String> {
    let number = prop_oneof!["[0-9]{1,4}", "[0-9]{18,21}", Just("18446744073709551614".to_string()), "-?[0-9]{1,3}"];
    let item =
        prop_oneof![(number.clone(), number).prop_map(|(id, count)| format!("{id}={count}")), "[=, a-z0-9]{0,5}"];
    vec(item, 0..6).prop_map(|items| items.join(","))
}

/// Text shaped like a cgroup path or a `/proc/<pid>/cgroup` line.
fn cgroup_like() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("sys".to_string()),
        Just("fs".to_string()),
        Just("cgroup".to_string()),
        Just("memory".to_string()),
        Just("slurm".to_string()),
        Just("system.slice".to_string()),
        Just("slurmstepd.scope".to_string()),
        "[a-z0-9]{1,3}_slurmstepd\\.scope",
        "uid_[0-9]{0,5}",
        "job_[0-9]{0,11}",
        "step_(batch|extern|[0-9]{0,11}|x)",
        "task_([0-9]{0,11}|special)",
        Just("user".to_string()),
        "s[0-9A-Z]{13}",
        Just("..".to_string()),
        Just(String::new()),
    ];
    let prefix = prop_oneof![Just(""), Just("0::"), Just("4:memory:"), Just(":")];
    (prefix, vec(segment, 0..9)).prop_map(|(prefix, segments)| format!("{prefix}/{}", segments.join("/")))
}

/// An `nsys stats --format csv` report of each kind, as the real tool prints them.
static NSYS_SAMPLES: [&[u8]; 4] = [
    b"Processing [report.sqlite] with [cuda_api_sum.py]...\n\"Time (%)\",\"Total Time (ns)\",\"Num Calls\",\"Avg (ns)\",\"Med (ns)\",\"Min (ns)\",\"Max (ns)\",\"StdDev (ns)\",\"Name\"\n60.5,1000000,10,100000.0,90000.0,1000,300000,5000.5,cudaStreamSynchronize\n39.5,650000,100,6500.0,6000.0,100,20000,300.1,cudaLaunchKernel\n",
    b"Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n70.0,7000,7,1000.0,1000.0,900,1100,50.0,\"void gemm<float, 128>(int, float*)\"\n30.0,3000,3,1000.0,1000.0,900,1100,50.0,ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)\n",
    b"Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation\n90.0,900,3,300.0,300.0,200,400,10.0,[CUDA memcpy Host-to-Device]\n10.0,100,1,100.0,100.0,100,100,0.0,[CUDA memset]\n",
    b"Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range\n80.0,800,8,100.0,100.0,90,110,5.0,PushPop,NCCL:ncclAllGather\n20.0,200,2,100.0,100.0,90,110,5.0,PushPop,forward\n",
];

fn nsys_text() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => any::<String>(),
        4 => prop::sample::select(&NSYS_SAMPLES[..]).prop_flat_map(|sample| mutated(sample.to_vec())).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

fn category() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(TraceCategory::ALL).prop_map(|category| category.as_str().to_string()),
        any::<String>()
    ]
}

fn moment() -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![
        (946_684_800i64..2_000_000_000, 0u32..2),
        (-8_334_601_228_800i64..8_210_266_876_799, 0u32..1_000_000_000),
    ]
    .prop_map(|(seconds, nanos)| DateTime::from_timestamp(seconds, nanos).expect("within chrono's range"))
}

proptest! {
    #[test]
    fn tres_parse_never_panics(text in prop_oneof![any::<String>(), tres_like()]) {
        if let Ok(map) = TresMap::parse(&text) {
            prop_assert!(map.iter().count() <= text.len());
        }
    }

    #[test]
    fn tres_maps_print_and_parse_back(entries in proptest::collection::btree_map(any::<u32>(), any::<u64>(), 0..12)) {
        let text = entries.iter().map(|(id, count)| format!("{id}={count}")).collect::<Vec<_>>().join(",");
        let parsed = TresMap::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back: BTreeMap<u32, u64> = parsed.iter().map(|(id, count)| (id.0, count)).collect();
        // sacct drops NO_VAL64 counts (energy never gathered).
        let expected: BTreeMap<u32, u64> = entries.into_iter().filter(|&(_, count)| count != 0xffff_ffff_ffff_fffe).collect();
        prop_assert_eq!(back, expected);
    }

    #[test]
    fn numbers_from_slurmdbd_always_render(raw in any::<i64>(), unsigned in any::<u64>(), other in any::<u64>()) {
        let _ = ExitCode::from_wait_status(raw).in_words();
        let _ = megabytes_exact(unsigned);
        let _ = format_duration(unsigned);
        let _ = (epoch(unsigned), iso_utc(raw), elapsed_seconds(unsigned, other, unsigned, other));
    }

    #[test]
    fn job_cursors_decode_what_they_encode(time_submit in any::<u64>(), time_end in any::<u64>(), db_index in any::<u64>(), text in any::<String>()) {
        let cursor = JobCursor { time_submit, time_end, db_index };
        prop_assert_eq!(JobCursor::decode(&cursor.encode()), Ok(cursor));
        let _ = JobCursor::decode(&text);
    }

    #[test]
    fn job_searches_hold_only_short_printable_text(text in prop_oneof![any::<String>(), "[ -~]{0,70}"]) {
        match JobSearch::parse(&text) {
            Ok(JobSearch::Text(search)) => {
                prop_assert!(!search.is_empty() && search.len() <= MAX_SEARCH_CHARS);
                prop_assert!(search.bytes().all(|byte| (0x20..0x7f).contains(&byte)));
                let _ = JobSearch::like_pattern(&search);
            }
            Ok(JobSearch::Id(_)) | Err(_) => {}
        }
    }

    #[test]
    fn gpu_index_lists_parse_bounded_and_print_back(text in prop_oneof![any::<String>(), "[0-9,-]{0,24}"], indices in vec(any::<u16>(), 0..40)) {
        if let Ok(parsed) = parse_gpu_indices(&text) {
            prop_assert!(parsed.len() <= 1025 * text.len());
        }
        let expected: Vec<u16> = indices.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
        prop_assert_eq!(parse_gpu_indices(&format_gpu_indices(&indices)), Ok(expected));
    }

    #[test]
    fn names_from_requests_parse_or_refuse(text in any::<String>()) {
        if let Ok(cluster) = text.parse::<ClusterName>() {
            prop_assert!(cluster.table("job_table").trim_matches('`').bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'));
        }
        let _ = (text.parse::<TokenSecret>(), text.parse::<TokenName>(), text.parse::<ProfileType>());
        let _ = (text.parse::<MetricName>(), text.parse::<LabelName>(), text.parse::<FieldName>());
    }

    #[test]
    fn promql_values_read_back_as_themselves(value in any::<String>(), other in any::<String>()) {
        let selector = Selector { metric: "up".parse().expect("valid"), matchers: vec![Matcher::Equal(label("job"), value.clone())] };
        let text = selector.to_string();
        let quoted = text.strip_prefix("up{job=").expect("the selector's start");
        let (read, rest) = go_unquote(quoted).ok_or_else(|| TestCaseError::fail(format!("unreadable: {text}")))?;
        prop_assert_eq!(read, value.clone());
        prop_assert_eq!(rest, "}");
        // An escaped regex alternative matches its value and nothing else.
        let pattern = format!("^(?:{})$", promql::escape_regex(&value));
        let regex = regex::Regex::new(&pattern).map_err(|e| TestCaseError::fail(format!("{pattern}: {e}")))?;
        prop_assert!(regex.is_match(&value));
        prop_assert_eq!(regex.is_match(&other), other == value);
    }

    #[test]
    fn logsql_values_read_back_as_themselves(value in any::<String>()) {
        let quoted = logsql::quote(&value);
        prop_assert!(!quoted.chars().any(char::is_control), "no raw control character: {quoted:?}");
        prop_assert_eq!(go_unquote(&quoted), Some((value, "")));
    }

    #[test]
    fn free_text_filters_hold_nothing_logsql_reads(text in any::<String>()) {
        if let Ok(contains) = text.parse::<ContainsText>() {
            let meaningful = |c: char| LOGSQL_SYNTAX.contains(c) || c.is_control();
            prop_assert!(!contains.as_str().chars().any(meaningful), "{:?}", contains);
            let quoted = logsql::quote(contains.as_str());
            prop_assert_eq!(go_unquote(&quoted), Some((contains.as_str().to_string(), "")));
        }
    }

    #[test]
    fn trace_names_and_cgroups_parse_or_refuse(category in category(), name in any::<String>(), cgroup in prop_oneof![any::<String>(), cgroup_like()]) {
        if let Ok(category) = parse_category(&category)
            && let Ok(parsed) = TraceName::parse(category, &name)
        {
            prop_assert!(!parsed.as_str().is_empty() && parsed.as_str().len() <= super::trace::MAX_NAME_LEN);
        }
        let _ = cgroup.parse::<SlurmCgroup>();
        let _ = super::trace::resolve_job(None, Some(&cgroup));
    }

    #[test]
    fn trace_records_validate_or_refuse(
        (job_id, cgroup, gpu, pid, interval_start, interval_s) in (any::<Option<u32>>(), prop::option::of(cgroup_like()), any::<u16>(), any::<u32>(), moment(), any::<u32>()),
        (category, name, count, total_ns, max_ns, bytes) in (category(), "[a-zA-Z_ ]{0,12}", any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
    ) {
        let raw = RawTraceSummary {
            job_id, cgroup: cgroup.as_deref(), gpu, pid, interval_start, interval_s,
            category: &category, name: &name, count, total_ns, max_ns, bytes,
        };
        if let Ok(summary) = TraceSummary::parse(&raw, Utc::now()) {
            prop_assert!(summary.max_ns <= summary.total_ns && summary.count >= 1 && summary.job_id >= 1);
            let mut doubled = summary.clone();
            doubled.absorb(&summary);
        }
    }

    #[test]
    fn nsys_csv_parses_or_refuses(text in nsys_text()) {
        if let Ok((_report, rows)) = parse_nsys_csv(&text) {
            // CSV ends a record at `\r` alone too (old Mac line ends), which `str::lines` does not split on.
            let records = text.split(['\n', '\r']).count();
            prop_assert!(rows.len() <= records);
            for row in rows.into_iter().flatten() {
                let raw = RawTraceSummary {
                    job_id: Some(1), cgroup: None, gpu: 0, pid: 0,
                    interval_start: DateTime::from_timestamp(1_796_040_000, 0).expect("a time"), interval_s: 60,
                    category: row.category.as_str(), name: &row.name,
                    count: row.count, total_ns: row.total_ns, max_ns: row.max_ns, bytes: 0,
                };
                let _ = TraceSummary::parse(&raw, Utc::now());
            }
        }
    }
}
