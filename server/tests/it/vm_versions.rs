//! The lab's two VictoriaMetrics, Debian's 1.79 and the current release `lab.sh up` builds, side by side
//! through slurmlens's client: what the report reads comes out the same from both, and where the two
//! answer differently (a refused query's status, `stats` beside the data, a `null` in an import line,
//! samples written twice at one timestamp) the client reads both alike or the difference is pinned here.

use std::time::Duration;

use chrono::{DateTime, Utc};
use slurmlens::sources::victoriametrics::{Series, VictoriaMetrics, VmError};

use crate::support::lab;

/// Both servers: their version, URL and a client.
fn both() -> [(&'static str, String, VictoriaMetrics); 2] {
    let client = |url: &str| VictoriaMetrics::new(url, Duration::from_secs(30)).expect("client");
    let debian = lab().var("LAB_VM_DEBIAN_URL").to_string();
    let current = lab().var("LAB_VM_CURRENT_URL").to_string();
    [("1.79", debian.clone(), client(&debian)), ("current", current.clone(), client(&current))]
}

/// A metric name of this run only: the lab's servers keep every earlier run's series.
fn metric(what: &str) -> String {
    format!("slurmlens_vmversions_{what}_{}", Utc::now().timestamp_nanos_opt().unwrap_or_default())
}

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).expect("a time")
}

fn sorted(mut series: Vec<Series>) -> Vec<Series> {
    series.sort_by(|a, b| a.labels.cmp(&b.labels));
    series
}

/// Raw samples, windowed rollups, a counter's rate, an aggregation, an instant and `/api/v1/series`:
/// the kinds of reading the report, the grid and the digests make, over samples with a DCGM blank among
/// them and a gap longer than the scrape interval.
#[tokio::test]
async fn what_slurmlens_reads_is_the_same_from_both_versions() {
    let (gauge, counter) = (metric("gauge"), metric("counter"));
    let t0 = (Utc::now().timestamp() - 1800) / 15 * 15;
    let stamps: Vec<i64> = (0..40).filter(|i| !(20..26).contains(i)).map(|i| (t0 + i * 15) * 1000).collect();
    let mut body = String::new();
    for gpu in 0..2u32 {
        // A DCGM blank (no value) at the 8th sample, which the client drops.
        let values: Vec<f64> = (0..stamps.len())
            .map(|i| if i == 7 { 9.223_372_036_854_776e18 } else { ((i * 7) % 100) as f64 + f64::from(gpu) })
            .collect();
        let labels = serde_json::json!({"__name__": gauge, "gpu": gpu.to_string(), "Hostname": "n1"});
        body += &format!("{}\n", serde_json::json!({"metric": labels, "values": values, "timestamps": stamps}));
        let totals: Vec<f64> = (0..stamps.len()).map(|i| (i * i) as f64 * 1e6 + f64::from(gpu)).collect();
        let labels = serde_json::json!({"__name__": counter, "gpu": gpu.to_string()});
        body += &format!("{}\n", serde_json::json!({"metric": labels, "values": totals, "timestamps": stamps}));
    }
    let servers = both();
    for (version, _, vm) in &servers {
        vm.import_json_lines(body.clone()).await.unwrap_or_else(|e| panic!("import into {version}: {e}"));
    }
    let (start, end) = (at(t0 + 7), at(t0 + 40 * 15 + 60));
    let ranges = [
        (gauge.clone(), 15),
        (format!("max_over_time({gauge}[1m])"), 30),
        (format!("avg by (Hostname) ({gauge})"), 15),
        (format!("rate({counter}[1m])"), 60),
        (format!("increase({counter}[5m])"), 300),
    ];
    let mut answers = Vec::new();
    for (version, _, vm) in &servers {
        let mut answer = Vec::new();
        for (query, step) in &ranges {
            let series = vm.query_range(query, start, end, *step).await;
            answer.push(sorted(series.unwrap_or_else(|e| panic!("{version}: {query}: {e}"))));
        }
        let instant = vm.query(&format!("last_over_time({gauge}[10m])"), end).await;
        answer.push(sorted(instant.unwrap_or_else(|e| panic!("{version}: instant: {e}"))));
        let mut labels = vm.series(&gauge, start, end).await.unwrap_or_else(|e| panic!("{version}: series: {e}"));
        labels.sort();
        answers.push((answer, labels));
    }
    let raw = &answers[0].0[0];
    assert_eq!(raw.len(), 2, "both GPUs' series: {raw:?}");
    assert!(raw.iter().all(|s| s.points.iter().all(|&(_, v)| v < 100.0)), "the DCGM blank is dropped: {raw:?}");
    assert!(answers[0].0.iter().all(|series| !series.is_empty()), "every query found its series");
    assert_eq!(answers[0], answers[1], "Debian's 1.79 and the current release read differently");
}

/// A query VictoriaMetrics refuses is a query error from both, though 1.79 answers 422 where a current
/// release answers 400 (a parse error), and the limit on points per series reads differently.
#[tokio::test]
async fn a_refused_query_is_a_query_error_from_both_versions() {
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    for (version, url, vm) in both() {
        let bad = vm.query("sum(", Utc::now()).await;
        assert!(matches!(bad, Err(VmError::Query(_))), "{version}: {bad:?}");
        let now = Utc::now();
        let too_many = vm.query_range("up", now - chrono::Duration::days(2), now, 1).await;
        assert!(
            matches!(&too_many, Err(VmError::Query(message)) if message.contains("30000")),
            "{version}: {too_many:?}"
        );
        let response =
            http.post(format!("{url}/api/v1/query")).form(&[("query", "sum(")]).send().await.expect("an answer");
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [422, 400], "1.79 answers a query that does not parse 422, current releases 400");
}

/// Current releases add `stats` beside `data` in a query's answer (1.79 does not); the client reads both.
#[tokio::test]
async fn stats_beside_the_data_are_read_past() {
    let name = metric("stats");
    let now = Utc::now().timestamp();
    let line = serde_json::json!({"metric": {"__name__": name}, "values": [4.0], "timestamps": [(now - 60) * 1000]});
    let mut has_stats = Vec::new();
    for (version, url, vm) in both() {
        vm.import_json_lines(format!("{line}\n")).await.unwrap_or_else(|e| panic!("{version}: {e}"));
        let series = vm.query(&name, at(now)).await.unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(series.len(), 1, "{version}: {series:?}");
        assert_eq!(series[0].points[0].1, 4.0, "{version}");
        let raw: serde_json::Value = reqwest::Client::new()
            .post(format!("{url}/api/v1/query"))
            .form(&[("query", name.clone()), ("time", now.to_string())])
            .send()
            .await
            .expect("an answer")
            .json()
            .await
            .expect("JSON");
        has_stats.push(raw.get("stats").is_some());
    }
    assert_eq!(has_stats, [false, true], "which versions send `stats`");
}

/// A `null` value in an import line: 1.79 skips the whole line and still answers 204, a current release
/// drops only that sample. The client refuses such a body before either sees it.
#[tokio::test]
async fn a_null_value_loses_the_line_on_1_79_so_the_client_refuses_it() {
    let name = metric("null");
    let now = Utc::now().timestamp();
    let line = format!(
        "{{\"metric\":{{\"__name__\":\"{name}\"}},\"values\":[1,null,3],\"timestamps\":[{},{},{}]}}\n",
        (now - 90) * 1000,
        (now - 60) * 1000,
        (now - 30) * 1000
    );
    let http = reqwest::Client::new();
    let mut kept = Vec::new();
    for (version, url, vm) in both() {
        let refused = vm.import_json_lines(line.clone()).await;
        assert!(matches!(refused, Err(VmError::Query(_))), "{version}: {refused:?}");
        let response = http.post(format!("{url}/api/v1/import")).body(line.clone()).send().await.expect("an answer");
        assert!(response.status().is_success(), "{version} answers {}", response.status());
        http.get(format!("{url}/internal/force_flush")).send().await.expect("flush");
        let series =
            vm.query_range(&name, at(now - 120), at(now), 30).await.unwrap_or_else(|e| panic!("{version}: {e}"));
        kept.push(series.first().map_or(0, |series| series.points.len()));
    }
    assert_eq!(kept[0], 0, "1.79 skipped the line");
    assert!(kept[1] >= 2, "the current release kept the other samples: {kept:?}");
}

/// Two samples of one series at one timestamp (the same scrape written twice with different values):
/// a current release keeps the larger, whatever the order. The seeders never rewrite a sample with
/// another value, so no reading depends on which one 1.79 keeps.
#[tokio::test]
async fn a_sample_written_twice_keeps_the_larger_on_current_releases() {
    let name = metric("twice");
    let stamp = Utc::now().timestamp() - 60;
    let mut kept = Vec::new();
    for (version, _, vm) in both() {
        for value in [5.0, 3.0] {
            let line =
                serde_json::json!({"metric": {"__name__": name}, "values": [value], "timestamps": [stamp * 1000]});
            vm.import_json_lines(format!("{line}\n")).await.unwrap_or_else(|e| panic!("{version}: {e}"));
        }
        let series = vm.query(&name, at(stamp + 1)).await.unwrap_or_else(|e| panic!("{version}: {e}"));
        kept.push(series.first().and_then(|series| series.points.first()).map(|&(_, value)| value));
    }
    assert!(matches!(kept[0], Some(v) if v == 3.0 || v == 5.0), "1.79 keeps one of them: {kept:?}");
    assert_eq!(kept[1], Some(5.0), "the current release keeps the larger: {kept:?}");
}

/// A counter scraped every 30 s, read at a 15 s step: `rate(x[15s])` is 0 at every other step on a
/// current release (1.79 widened the range to the samples' interval), while `rate(x)` with no range reads
/// the same steady rate from both: the report's timelines write no range (`node_signals::rate`).
#[tokio::test]
async fn a_rate_with_no_range_reads_alike_where_a_short_range_does_not() {
    let name = metric("rate");
    let t0 = (Utc::now().timestamp() - 1200) / 30 * 30;
    let stamps: Vec<i64> = (0..21).map(|i| (t0 + i * 30) * 1000).collect();
    let values: Vec<f64> = (0..21).map(|i| f64::from(i) * 1000.0).collect();
    let line = serde_json::json!({"metric": {"__name__": name}, "values": values, "timestamps": stamps});
    let mut zeros = Vec::new();
    for (version, _, vm) in both() {
        vm.import_json_lines(format!("{line}\n")).await.unwrap_or_else(|e| panic!("{version}: {e}"));
        let (start, end) = (at(t0 + 34), at(t0 + 500));
        let read = |query: String| {
            let vm = vm.clone();
            async move { vm.query_range(&query, start, end, 15).await.unwrap_or_else(|e| panic!("{version}: {e}")) }
        };
        let unranged = read(format!("rate({name})")).await;
        let points = &unranged[0].points;
        assert!(points.len() >= 30, "{version}: {points:?}");
        assert!(points.iter().all(|&(_, rate)| (rate - 1000.0 / 30.0).abs() < 1e-9), "{version}: {points:?}");
        let short = read(format!("rate({name}[15s])")).await;
        zeros.push(short[0].points.iter().filter(|&&(_, rate)| rate == 0.0).count());
    }
    assert_eq!(zeros[0], 0, "1.79 widens a short range: {zeros:?}");
    assert!(zeros[1] >= 10, "a current release reads 0 where the range holds no sample: {zeros:?}");
}
