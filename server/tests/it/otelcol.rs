//! Through a real OpenTelemetry Collector: the lab's collector binary (built by ocb from
//! lab/otelcol/builder.yaml, `LAB_OTELCOL_BIN` in env.sh) runs lab/otelcol/config.yaml, the site's
//! configuration, forwarding to this test's server; trace summaries and GPU records sent to it as OTLP
//! (a protobuf request, and the OpenTelemetry JS SDK) are stored exactly as the JSON batches store them
//! and shown alike by the API. With lab/otelcol/node-logs.yaml merged in, a node's slurmd log lines reach
//! the lab's VictoriaLogs and a job's logs.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use prost::Message;
use slurmlens::config::{AnonymousAccess, VictoriaLogsConfig};

use crate::otlp::{Records, SECRET, otlp_request, records, send_json_batches, send_with_js_sdk, stored, views};
use crate::support::{TestApp, database_shared, lab, repo_root};

/// How long the collector gets to start, and the records to arrive through it.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A collector process of this test, killed when dropped.
struct Collector {
    child: tokio::process::Child,
    /// Where its OTLP/HTTP receiver listens: `http://127.0.0.1:PORT`.
    otlp_url: String,
    log: PathBuf,
}

/// The variables of config.yaml that name the slurmlens it forwards to.
fn forwarding_to(app: &TestApp, secret: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SLURMLENS_OTLP_ENDPOINT", format!("{}/api/v1/otlp", app.base_url)),
        ("SLURMLENS_INGEST_SECRET", secret.to_string()),
    ]
}

/// A number no other call in this process gets: names of files and log markers.
fn unique() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A port nothing listens on now: bound to port 0, read back, released for the collector to take.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding port 0");
    listener.local_addr().expect("bound address").port()
}

impl Collector {
    /// Starts the lab's collector on lab/otelcol/config.yaml, forwarding to `app` with `secret`.
    async fn start(app: &TestApp, secret: &str) -> Collector {
        Self::start_with(&app.client, &["config.yaml"], &forwarding_to(app, secret)).await
    }

    /// Starts the lab's collector on `configs` (files of lab/otelcol, merged in order) with `env`, and
    /// waits for its health check. A port taken between `free_port` and the collector's bind makes it
    /// exit: it is started again on others, three times at most.
    async fn start_with(client: &reqwest::Client, configs: &[&str], env: &[(&str, String)]) -> Collector {
        let binary = lab().vars.get("LAB_OTELCOL_BIN").unwrap_or_else(|| {
            panic!("LAB_OTELCOL_BIN missing from the lab's env.sh: run `bash lab/lab.sh up` (it builds the collector)")
        });
        let mut last_log = String::new();
        for _ in 0..3 {
            let (otlp_port, health_port) = (free_port(), free_port());
            let log = lab().dir.join(format!("otelcol-test-{}-{}.log", std::process::id(), unique()));
            let log_file = std::fs::File::create(&log).expect("creating the collector's log");
            let mut command = tokio::process::Command::new(binary);
            for config in configs {
                command.arg(format!("--config={}", repo_root().join("lab/otelcol").join(config).display()));
            }
            let child = command
                .envs(env.iter().map(|(name, value)| (name, value)))
                .env("OTELCOL_OTLP_ENDPOINT", format!("127.0.0.1:{otlp_port}"))
                .env("OTELCOL_HEALTH_ENDPOINT", format!("127.0.0.1:{health_port}"))
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().expect("the log file"))
                .stderr(log_file)
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {binary}: {e}"));
            let mut collector = Collector { child, otlp_url: format!("http://127.0.0.1:{otlp_port}"), log };
            if collector.healthy(client, health_port).await {
                return collector;
            }
            last_log = collector.log_text();
        }
        panic!("the collector did not become healthy in three starts; its last log:\n{last_log}");
    }

    /// Polls the health check until it answers 200 (true) or the process exits or the time is up (false).
    async fn healthy(&mut self, client: &reqwest::Client, health_port: u16) -> bool {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            if self.child.try_wait().expect("the collector's status").is_some() {
                return false;
            }
            let answer = client.get(format!("http://127.0.0.1:{health_port}/")).send().await;
            if answer.is_ok_and(|response| response.status() == 200) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // kill_on_drop kills it too; this also keeps the log of a test that passed from piling up.
        let _ = self.child.start_kill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Polls until `pool` holds `expected` or the time is up; what it holds last.
async fn wait_stored(pool: &sqlx::MySqlPool, expected: &(Vec<String>, Vec<String>)) -> (Vec<String>, Vec<String>) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let now_stored = stored(pool).await;
        if &now_stored == expected || tokio::time::Instant::now() >= deadline {
            return now_stored;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the collector's log until `text` is in it `times` times (the exporter logs slurmlens's partial
/// success as a warning, once per export).
async fn wait_logged(collector: &Collector, text: &str, times: usize) -> bool {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        if collector.log_text().matches(text).count() >= times {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Posts `records` as one protobuf OTLP request to the collector, as a node's sender does.
async fn post_to_collector(app: &TestApp, collector: &Collector, records: &Records) {
    let response = app
        .client
        .post(format!("{}/v1/logs", collector.otlp_url))
        .header("content-type", "application/x-protobuf")
        .body(otlp_request(records).encode_to_vec())
        .send()
        .await
        .expect("the collector answers");
    assert_eq!(response.status(), 200, "the collector takes the request");
}

#[tokio::test(flavor = "multi_thread")]
async fn records_sent_through_an_opentelemetry_collector_land_exactly_like_the_json_batches() {
    let _db = database_shared().await;
    let job_id = crate::support::finished_lab_job().await;
    let records = records(job_id, crate::support::lab_job_start(job_id).await);
    let (json_app, json_pool) = crate::support::ingest_app("otelcol_baseline", SECRET).await;
    send_json_batches(&json_app, &records).await;
    let baseline = stored(&json_pool).await;
    assert_eq!((baseline.0.len(), baseline.1.len()), (5, 3), "{baseline:?}");

    // A node's sender posts OTLP to its collector, which batches and forwards with the secret.
    let (app, pool) = crate::support::ingest_app("otelcol_protobuf", SECRET).await;
    let collector = Collector::start(&app, SECRET).await;
    post_to_collector(&app, &collector, &records).await;
    assert_eq!(wait_stored(&pool, &baseline).await, baseline, "what the collector forwarded is stored alike");
    assert_eq!(views(&app, job_id).await, views(&json_app, job_id).await, "the API shows the same");
    // slurmlens's partial success (the refused record) reaches the collector, which logs it.
    assert!(
        wait_logged(&collector, "slurmlens.trace.max_ns: 20 is more than total_ns 10", 1).await,
        "the collector logs the refusal:\n{}",
        collector.log_text()
    );
    // The same records again (a sender's retry): once slurmlens has answered it, nothing is stored twice.
    post_to_collector(&app, &collector, &records).await;
    assert!(wait_logged(&collector, "ignored 1 log records", 2).await, "{}", collector.log_text());
    assert_eq!(stored(&pool).await, baseline, "a replay through the collector stores nothing twice");
    drop(collector);

    // The OpenTelemetry JS SDK's stock exporter, pointed at the collector rather than at slurmlens.
    let (sdk_app, sdk_pool) = crate::support::ingest_app("otelcol_sdk", SECRET).await;
    let collector = Collector::start(&sdk_app, SECRET).await;
    if send_with_js_sdk(&collector.otlp_url, None, &records, "protobuf", true).await.is_some() {
        assert_eq!(wait_stored(&sdk_pool, &baseline).await, baseline, "the SDK's export through the collector");
        assert_eq!(views(&sdk_app, job_id).await, views(&json_app, job_id).await, "the API shows the same");
    }
    drop(collector);

    // A collector holding the wrong secret: slurmlens refuses it (401, not retried), nothing is stored.
    let (refused_app, refused_pool) = crate::support::ingest_app("otelcol_refused", SECRET).await;
    let collector = Collector::start(&refused_app, "not-the-secret-0123456789").await;
    post_to_collector(&refused_app, &collector, &records).await;
    assert!(
        wait_logged(&collector, "responded with HTTP Status Code 401", 1).await,
        "the collector logs the refusal:\n{}",
        collector.log_text()
    );
    assert_eq!(stored(&refused_pool).await, (vec![], vec![]), "nothing is stored");
    drop(collector);
    for pool in [json_pool, pool, sdk_pool, refused_pool] {
        pool.close().await;
    }
}

/// The collector's own check of the repository's configurations (every component known to the build,
/// every setting valid): the site's slurmlens forwarding alone, and with the node logs merged in.
#[test]
fn the_collector_configurations_in_the_repository_are_valid() {
    let binary = lab().vars.get("LAB_OTELCOL_BIN").expect("LAB_OTELCOL_BIN in the lab's env.sh: run lab.sh up");
    let folder = repo_root().join("lab/otelcol");
    for files in [&["config.yaml"][..], &["config.yaml", "node-logs.yaml"]] {
        let mut command = std::process::Command::new(binary);
        command.arg("validate");
        for file in files {
            command.arg(format!("--config={}", folder.join(file).display()));
        }
        let output = command
            .env("SLURMLENS_OTLP_ENDPOINT", "http://127.0.0.1:8080/api/v1/otlp")
            .env("SLURMLENS_INGEST_SECRET", "a-secret")
            .env("SLURM_NODE_NAME", "n1")
            .output()
            .unwrap_or_else(|e| panic!("running {binary}: {e}"));
        assert!(output.status.success(), "{files:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

/// Polls VictoriaLogs for the entries matching `query` until there are `count` of them, or the time is up.
async fn vlogs_entries(client: &reqwest::Client, vlogs_url: &str, query: &str, count: usize) -> Vec<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let answer = client
            .post(format!("{vlogs_url}/select/logsql/query"))
            .form(&[("query", query)])
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        let entries: Vec<serde_json::Value> = match answer {
            Ok(response) => response
                .text()
                .await
                .unwrap_or_default()
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        if entries.len() >= count || tokio::time::Instant::now() >= deadline {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Slurm's own stamp of a log line: local time to the millisecond, in brackets.
fn slurm_stamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.with_timezone(&chrono::Local).format("[%Y-%m-%dT%H:%M:%S%.3f]").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn slurmd_lines_tailed_by_the_collector_reach_victorialogs_and_the_jobs_logs() {
    let Some(vlogs_url) = lab().vars.get("LAB_VLOGS_URL") else {
        eprintln!("skipped: the lab runs no VictoriaLogs (no LAB_VLOGS_URL in env.sh)");
        return;
    };
    let _db = database_shared().await;
    let job_id = crate::support::finished_lab_job().await;
    let started = crate::support::lab_job_start(job_id).await;
    let plain = crate::support::spawn_app(crate::support::test_config(AnonymousAccess::Staff)).await;
    let response = plain.get(&format!("/api/v1/jobs/{job_id}?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    let detail: slurmlens_wire::JobDetail = response.json().await.expect("job detail");
    let node = detail.nodes.first().expect("the job ran on a node").node.clone();

    // A slurmd log of that node; the line already there is the past, which the collector skips.
    let folder = lab().dir.join(format!("otelcol-node-logs-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&folder).expect("creating the log folder");
    let file = folder.join(format!("slurmd.{node}.log"));
    let marker =
        format!("otelcol-marker-{}-{}", std::process::id(), chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0));
    std::fs::write(&file, format!("{} slurmd: {marker} before the collector\n", slurm_stamp(started))).expect("log");
    let env = [
        ("SLURMLENS_OTLP_ENDPOINT", "http://127.0.0.1:9/api/v1/otlp".to_string()),
        ("SLURMLENS_INGEST_SECRET", "unused".to_string()),
        ("SLURM_LOG_GLOB", file.display().to_string()),
        ("SLURM_NODE_NAME", node.clone()),
        ("VICTORIALOGS_URL", vlogs_url.clone()),
    ];
    let collector = Collector::start_with(&plain.client, &["config.yaml", "node-logs.yaml"], &env).await;
    assert!(wait_logged(&collector, "Started watching file", 1).await, "{}", collector.log_text());

    // slurmstepd's line about the job, two seconds into it, and one without Slurm's stamp.
    let at = started + chrono::Duration::milliseconds(2_125);
    let mut log = std::fs::OpenOptions::new().append(true).open(&file).expect("the log");
    std::io::Write::write_all(
        &mut log,
        format!("{} [{job_id}.batch] {marker}: task 0 done\n{marker} a line without a stamp\n", slurm_stamp(at))
            .as_bytes(),
    )
    .expect("appending to the log");

    let entries = vlogs_entries(&plain.client, vlogs_url, &format!("\"{marker}\""), 2).await;
    assert_eq!(entries.len(), 2, "the two new lines, not the one before the collector: {entries:?}");
    let stamped = entries
        .iter()
        .find(|entry| entry["_msg"] == format!("[{job_id}.batch] {marker}: task 0 done"))
        .unwrap_or_else(|| panic!("the stamped line, its stamp cut from the message: {entries:?}"));
    assert_eq!(stamped["host.name"], node.as_str(), "{stamped}");
    assert_eq!(stamped["service.name"], "slurmd", "{stamped}");
    assert_eq!(stamped["slurm.job.id"], job_id.to_string(), "{stamped}");
    let time: chrono::DateTime<chrono::Utc> =
        stamped["_time"].as_str().and_then(|text| text.parse().ok()).expect("an RFC 3339 _time");
    assert_eq!(time, at, "the time Slurm wrote, not the time the line was read");
    drop(collector);

    // slurmlens, told that the node is host.name, shows the line in the job's logs.
    let logs = VictoriaLogsConfig {
        url: vlogs_url.clone(),
        timeout_ms: 5000,
        node_field: "host.name".parse().expect("a field name"),
        filter: None,
        max_lines: 1000,
    };
    let app = crate::support::spawn_app(slurmlens::config::Config {
        victorialogs: Some(logs),
        ..crate::support::test_config(AnonymousAccess::Staff)
    })
    .await;
    let response = app.get(&format!("/api/v1/jobs/{job_id}/logs?cluster=lab&limit=1000")).await;
    assert_eq!(response.status(), 200);
    let logs: slurmlens_wire::JobLogs = response.json().await.expect("the job's logs");
    assert_eq!(logs.status, slurmlens_wire::LogsStatus::Ok, "{:?}", logs.message);
    // The unstamped line carries the time the collector read it, which may or may not fall in the window.
    let stamped_text = format!("{marker}: task 0 done");
    let shown: Vec<_> = logs.lines.iter().filter(|line| line.message.contains(&stamped_text)).collect();
    assert_eq!(shown.len(), 1, "the stamped line in the job's window: {:?}", logs.lines);
    assert_eq!((shown[0].time, shown[0].node.as_deref()), (at, Some(node.as_str())));
    let _ = std::fs::remove_dir_all(&folder);
}
