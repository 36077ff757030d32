//! The node beside its GPUs in a job's report, against the lab's real node_exporter, scraped by
//! a real vmagent into VictoriaMetrics; ipmi_exporter's power and the Lustre exporter's job statistics
//! imported in those exporters' exact format. Every figure is checked against a direct PromQL query.

use std::time::{Duration, Instant};

use slurmlens::config::{AnonymousAccess, Config, VictoriaMetricsConfig};
use slurmlens_wire::{JobReport, MetricSummary};

use crate::support::{TestApp, database_shared, import_series, lab, slurm, spawn_app, test_config};

fn config() -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 10_000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.report.archive_delay_s = 3600;
    config.report.archive_interval_s = 0;
    config
}

/// Runs a short CPU-only job of alice on `node` that reads and writes a file; its id, once COMPLETED.
fn run_job(node: &str, seconds: u32) -> u32 {
    let script = format!(
        "dd if=/dev/zero of=/tmp/slurmlens-io-$SLURM_JOB_ID bs=1M count=64 conv=fsync 2>/dev/null; \
         rm -f /tmp/slurmlens-io-$SLURM_JOB_ID; sleep {seconds}"
    );
    let args = [
        "--parsable",
        "-J",
        "node-signals",
        "--uid=alice",
        "--gid=alice",
        "-w",
        node,
        "--time=5",
        "-o",
        "/dev/null",
        "--wrap",
        &script,
    ];
    let out = slurm("sbatch", &args);
    let job_id: u32 = out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let state = slurm("sacct", &["-n", "-X", "-P", "-o", "State", "-j", &job_id.to_string()]);
        if state.trim().starts_with("COMPLETED") {
            return job_id;
        }
        assert!(Instant::now() < deadline, "job {job_id} not COMPLETED: {state}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

async fn instant(query: &str, at: i64) -> Option<f64> {
    crate::support::instant_query(lab().var("SLURMLENS_VM_URL"), query, at).await
}

async fn report_of(app: &TestApp, job_id: u32) -> JobReport {
    let response = app.get(&format!("/api/v1/jobs/{job_id}/report?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("report JSON")
}

fn summary<'a>(summaries: &'a [MetricSummary], key: &str) -> Option<&'a MetricSummary> {
    summaries.iter().find(|s| s.metric == key)
}

fn assert_close(what: &str, report: f64, direct: f64) {
    let tolerance = (direct.abs() * 0.01).max(1e-6);
    assert!((report - direct).abs() <= tolerance, "{what}: report {report}, direct query {direct}");
}

/// Seconds from the window's start to its end, and the end, as the report states them.
fn window(report: &JobReport) -> (i64, i64) {
    let (start, end) = (report.window_start.expect("window start"), report.window_end.expect("window end"));
    ((end - start).num_seconds(), end.timestamp())
}

#[tokio::test(flavor = "multi_thread")]
async fn node_exporter_scraped_by_vmagent_shows_in_the_report_as_a_direct_query_does() {
    let _db = database_shared().await;
    let node = "n3";
    let job_id = run_job(node, 10);
    // vmagent flushes every second; let the scrape after the job's end land.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let app = spawn_app(config()).await;
    let report = report_of(&app, job_id).await;
    let entry = report.nodes.iter().find(|n| n.node == node).unwrap_or_else(|| panic!("no node entry: {report:#?}"));
    let (window_s, end) = window(&report);
    let instance = format!(r#"instance="{node}:9100""#);
    let direct = [
        (
            "cpu_busy",
            format!(r#"100 * (1 - avg(rate(node_cpu_seconds_total{{{instance},mode="idle"}}[{window_s}s])))"#),
        ),
        ("cpu_iowait", format!(r#"100 * avg(rate(node_cpu_seconds_total{{{instance},mode="iowait"}}[{window_s}s]))"#)),
        (
            "memory_used",
            format!(
                "avg_over_time(node_memory_MemTotal_bytes{{{instance}}}[{window_s}s]) - \
                 avg_over_time(node_memory_MemAvailable_bytes{{{instance}}}[{window_s}s])"
            ),
        ),
        ("net_rx", format!(r#"sum(rate(node_network_receive_bytes_total{{{instance},device!="lo"}}[{window_s}s]))"#)),
        ("net_tx", format!(r#"sum(rate(node_network_transmit_bytes_total{{{instance},device!="lo"}}[{window_s}s]))"#)),
    ];
    for (key, query) in direct {
        let shown = summary(&entry.summary, key).unwrap_or_else(|| panic!("{key} missing from {:?}", entry.summary));
        let expected = instant(&query, end).await.unwrap_or_else(|| panic!("VictoriaMetrics has no {key}: {query}"));
        assert_close(key, shown.mean, expected);
        assert!(shown.max >= shown.mean, "{key}: peak {} under mean {}", shown.max, shown.mean);
        let timeline = entry.series.iter().find(|s| s.metric == key).expect("a timeline");
        assert!(!timeline.points.is_empty(), "{key} has a timeline");
    }
    let cpu_busy = summary(&entry.summary, "cpu_busy").expect("cpu_busy").mean;
    assert!((0.0..=100.0).contains(&cpu_busy), "CPU busy is a share: {cpu_busy}");
    assert!(summary(&entry.summary, "memory_used").expect("memory").mean > 1e8, "the host uses some memory");
    // Nothing else of the node's 4 neighbours leaks in: one entry per node of the job.
    assert_eq!(report.nodes.len(), 1, "{:?}", report.nodes.iter().map(|n| &n.node).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn ipmi_power_and_lustre_job_statistics_show_in_the_report() {
    let _db = database_shared().await;
    let node = "n4";
    let job_id = run_job(node, 6);
    let app = spawn_app(config()).await;
    let before = report_of(&app, job_id).await;
    assert!(
        before.io.is_none() || before.io.as_ref().is_some_and(|io| io.source == slurmlens_wire::IoSource::Nodes),
        "no job statistics yet"
    );
    let (_, end) = window(&before);
    let start = before.window_start.expect("start").timestamp();
    // ipmi_exporter (DCMI collector) on the node's BMC, scraped every 2 s: 900 W ± 40 W.
    let stamps: Vec<i64> = (start - 30..=end + 30).step_by(2).collect();
    let power: Vec<f64> = stamps.iter().map(|t| 900.0 + 40.0 * ((*t as f64) * 0.3).sin()).collect();
    // The Lustre exporter's job_stats on two OSTs: this job reads 50 MB/s from each and writes 4 MB/s
    // to one; another job (id + 1000) reads elsewhere and must not count.
    let counter =
        |rate: f64, base: f64| stamps.iter().map(|t| base + rate * (t - stamps[0]) as f64).collect::<Vec<f64>>();
    let ms: Vec<i64> = stamps.iter().map(|t| t * 1000).collect();
    let ost = |metric: &str, jobid: String, target: &str, values: Vec<f64>| {
        serde_json::json!({
            "metric": {"__name__": metric, "component": "ost", "jobid": jobid, "target": target,
                       "instance": "oss1:9169", "job": "lustre"},
            "values": values, "timestamps": ms,
        })
    };
    let other = (job_id + 1000).to_string();
    import_series([
        serde_json::json!({"metric": {"__name__": "ipmi_dcmi_power_consumption_watts", "instance": format!("{node}:9290"), "job": "ipmi"},
                           "values": power, "timestamps": ms}),
        ost("lustre_job_read_bytes_total", job_id.to_string(), "lustrefs-OST0000", counter(5e7, 1e9)),
        ost("lustre_job_read_bytes_total", job_id.to_string(), "lustrefs-OST0001", counter(5e7, 3e9)),
        ost("lustre_job_write_bytes_total", job_id.to_string(), "lustrefs-OST0000", counter(4e6, 0.0)),
        ost("lustre_job_read_samples_total", job_id.to_string(), "lustrefs-OST0000", counter(50.0, 10.0)),
        ost("lustre_job_write_samples_total", job_id.to_string(), "lustrefs-OST0000", counter(4.0, 0.0)),
        ost("lustre_job_read_bytes_total", other, "lustrefs-OST0000", counter(9e8, 0.0)),
    ])
    .await;

    let deadline = Instant::now() + Duration::from_secs(15);
    let report = loop {
        let report = report_of(&app, job_id).await;
        if report.io.as_ref().is_some_and(|io| io.source == slurmlens_wire::IoSource::Jobstats)
            || Instant::now() > deadline
        {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (window_s, end) = window(&report);
    let io = report.io.as_ref().unwrap_or_else(|| panic!("no I/O section: {report:#?}"));
    assert_eq!(io.source, slurmlens_wire::IoSource::Jobstats);
    let read = summary(&io.summary, "lustre_read").expect("read rate").mean;
    let direct = instant(&format!(r#"sum(rate(lustre_job_read_bytes_total{{jobid="{job_id}"}}[{window_s}s]))"#), end)
        .await
        .expect("direct read rate");
    assert_close("lustre_read", read, direct);
    assert_close("lustre_read vs the imported slopes", read, 1e8);
    assert_close("lustre_write", summary(&io.summary, "lustre_write").expect("write").mean, 4e6);
    assert_close("lustre_read_ops", summary(&io.summary, "lustre_read_ops").expect("ops").mean, 50.0);
    assert_close("bytes read over the window", io.read_bytes, 1e8 * window_s as f64);

    let entry = report.nodes.iter().find(|n| n.node == node).expect("node entry");
    let power = summary(&entry.summary, "node_power").expect("node power").mean;
    let direct = instant(
        &format!(r#"avg_over_time(ipmi_dcmi_power_consumption_watts{{instance="{node}:9290"}}[{window_s}s])"#),
        end,
    )
    .await
    .expect("direct power");
    assert_close("node_power", power, direct);
    // The job held none of the node's GPUs, so not the node: its BMC's power is no figure of the job's.
    let totals = &report.totals;
    assert_eq!((totals.node_power_w, totals.node_energy_kwh), (None, None), "{totals:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_job_statistics_lustre_io_comes_from_the_nodes_clients_and_says_so() {
    let _db = database_shared().await;
    let node = "n2";
    let job_id = run_job(node, 6);
    let app = spawn_app(config()).await;
    let before = report_of(&app, job_id).await;
    let (start, end) = (before.window_start.expect("start").timestamp(), window(&before).1);
    // The Lustre client of the node (llite stats): 30 MB/s read, 2 MB/s written, all jobs there together.
    let stamps: Vec<i64> = (start - 30..=end + 30).step_by(2).collect();
    let ms: Vec<i64> = stamps.iter().map(|t| t * 1000).collect();
    let counter = |rate: f64| stamps.iter().map(|t| 5e11 + rate * (t - stamps[0]) as f64).collect::<Vec<f64>>();
    // A per-run target: samples re-imported under a deleted series' labels would stay hidden.
    let target = format!("lustrefs-ffff{job_id:08x}");
    let client = |metric: &str, values: Vec<f64>| {
        serde_json::json!({
            "metric": {"__name__": metric, "component": "client", "target": target,
                       "instance": format!("{node}:9169"), "job": "lustre"},
            "values": values, "timestamps": ms,
        })
    };
    import_series([client("lustre_read_bytes_total", counter(3e7)), client("lustre_write_bytes_total", counter(2e6))])
        .await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let report = loop {
        let report = report_of(&app, job_id).await;
        if report.io.is_some() || Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let io = report.io.as_ref().unwrap_or_else(|| panic!("no I/O section: {report:#?}"));
    assert_eq!(
        io.source,
        slurmlens_wire::IoSource::Nodes,
        "no job statistics: the clients of the job's nodes, and it says so"
    );
    let (window_s, end) = window(&report);
    let read = summary(&io.summary, "lustre_read").expect("read rate").mean;
    let direct = instant(
        &format!(r#"sum(rate(lustre_read_bytes_total{{instance="{node}:9169",component="client"}}[{window_s}s]))"#),
        end,
    )
    .await
    .expect("direct read rate");
    assert_close("client read rate", read, direct);
    assert_close("client write rate", summary(&io.summary, "lustre_write").expect("write").mean, 2e6);
    assert!(summary(&io.summary, "lustre_read_ops").is_none(), "clients' byte counters carry no job operations");
}
