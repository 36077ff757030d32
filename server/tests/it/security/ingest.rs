//! What the nodes' and collectors' bodies can cost, and who may send what (issue #15: review findings
//! H4, H5, M8, M11, L1). Each test runs against the lab's MariaDB and VictoriaMetrics; the server's
//! queries to VictoriaMetrics are counted by a small proxy in front of it, so other users of the lab
//! do not disturb the counts.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::json;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, IngestSecret, VictoriaMetricsConfig};
use slurmlens_wire::{ErrorEnvelope, Job, JobDetail, JobReport, JobTraces, Page};

use crate::support::{CountingProxy, TestApp, database_shared, fresh_database, lab, spawn_app, test_config};

const SAKURA_SECRET: &str = "sakura-ingest-test-secret-0123456789";
const LAB_SECRET: &str = "lab-ingest-test-secret-0123456789";

/// Cluster `sakura` (the demo history with its telemetry), VictoriaMetrics at `vm_url`.
fn sakura_config(vm_url: &str, database: Option<String>) -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.clusters = vec!["sakura".parse().expect("valid cluster")];
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: vm_url.to_string(),
        timeout_ms: 20_000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.database = database.map(|url| DatabaseConfig { url });
    config.report.archive_interval_s = 0;
    config
}

async fn slurmdbd() -> sqlx::MySqlPool {
    sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database")
}

/// A finished sakura GPU job of `nodes` nodes that ended between one and six hours ago (its end well
/// past `archive_delay`) and ran at least `min_s` seconds: the earliest such, so that its whole run
/// lies in the telemetry seeded up to the seed's own time, however long ago the seed ran (the latest,
/// an hour old, had only part of its hour when the tests ran over an hour after the seed).
async fn finished_sakura_job(nodes: (u32, u32), min_s: i64) -> u32 {
    let pool = slurmdbd().await;
    let job: Option<u32> = sqlx::query_scalar(
        "SELECT id_job FROM sakura_job_table WHERE state = 3 AND nodes_alloc BETWEEN ? AND ? \
         AND tres_alloc LIKE '%1001=%' AND time_start > 0 \
         AND CAST(time_end AS SIGNED) BETWEEN UNIX_TIMESTAMP() - 6 * 3600 AND UNIX_TIMESTAMP() - 3600 \
         AND CAST(time_end AS SIGNED) - CAST(time_start AS SIGNED) >= ? \
         ORDER BY time_end LIMIT 1",
    )
    .bind(nodes.0)
    .bind(nodes.1)
    .bind(min_s)
    .fetch_optional(&pool)
    .await
    .expect("reading sakura_job_table");
    pool.close().await;
    job.expect("sakura's history has such a finished GPU job")
}

/// A running sakura job of at least 64 GPUs that started at least six hours ago (so a timeline of
/// 2000 points is finer than its scrapes allow only beyond 1440 points).
async fn running_big_sakura_job(app: &TestApp) -> Job {
    let response = app.get("/api/v1/jobs?cluster=sakura&state=RUNNING&min_gpus=64&limit=200").await;
    assert_eq!(response.status(), 200);
    let page: Page<Job> = response.json().await.expect("a page of jobs");
    let six_hours_ago = Utc::now() - chrono::Duration::hours(6);
    page.items
        .into_iter()
        .find(|job| job.start.is_some_and(|start| start < six_hours_ago))
        .expect("sakura has a running job of 64 GPUs or more that started six hours ago or earlier")
}

async fn job_detail(app: &TestApp, job_id: u32) -> JobDetail {
    let response = app.get(&format!("/api/v1/jobs/{job_id}?cluster=sakura")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("job detail")
}

async fn report(app: &TestApp, job_id: &str, query: &str) -> (reqwest::StatusCode, usize, Option<JobReport>) {
    let response = app.get(&format!("/api/v1/jobs/{job_id}/report?cluster=sakura{query}")).await;
    let status = response.status();
    let bytes = response.bytes().await.expect("report body");
    (status, bytes.len(), serde_json::from_slice(&bytes).ok())
}

fn most_points(report: &JobReport) -> usize {
    report.gpus.iter().flat_map(|gpu| &gpu.series).map(|series| series.points.len()).max().unwrap_or(0)
}

/// H4: a 256-node job's end is 256 `end` records (one per node's epilog), and a spool replay repeats
/// them. Each scheduled its own report; now one report is made and archived.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_end_from_every_node_computes_and_archives_its_report_once() {
    let _db = database_shared().await;
    let job_id = finished_sakura_job((2, 4), 600).await;

    // One report's worth of queries, from a server without a store (nothing is archived there).
    let proxy = CountingProxy::start().await;
    let plain = spawn_app(sakura_config(&proxy.url, None)).await;
    let (status, _, one) = report(&plain, &job_id.to_string(), "").await;
    assert_eq!(status, 200);
    assert_eq!(one.expect("a report").metrics.status, slurmlens_wire::MetricsState::Ok, "the job has telemetry");
    let one_report = proxy.settled(Duration::from_secs(1)).await;
    assert!(one_report > 0);

    let database = fresh_database("security_ingest_single_flight").await;
    let mut config = sakura_config(&proxy.url, Some(database.clone()));
    config.report.archive_delay_s = 1;
    config.ingest.secrets.insert("sakura".into(), IngestSecret(SAKURA_SECRET.into()));
    let app = spawn_app(config).await;
    let nodes: Vec<String> = job_detail(&app, job_id).await.nodes.into_iter().map(|node| node.node).collect();
    let end = job_detail(&app, job_id).await.job.end.expect("a finished job has an end");
    let before = proxy.count();
    // Every node's epilog, each record 10 times (a spool replay), in one body.
    let records: Vec<serde_json::Value> = nodes
        .iter()
        .flat_map(|node| {
            let record = json!({"cluster": "sakura", "node": node, "job_id": job_id, "step": "job",
                "event": "end", "at": end, "gpus": [{"index": 0}]});
            std::iter::repeat_n(record, 10)
        })
        .collect();
    let response = app
        .client
        .post(format!("{}/api/v1/gpu_allocations", app.base_url))
        .bearer_auth(SAKURA_SECRET)
        .json(&json!({ "records": records }))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());

    let pool = sqlx::MySqlPool::connect(&database).await.expect("test database");
    let pool = &pool;
    let archived_at = move || async move {
        sqlx::query_scalar::<_, DateTime<Utc>>("SELECT archived_at FROM job_reports WHERE job_id = ?")
            .bind(job_id)
            .fetch_optional(pool)
            .await
            .expect("reading job_reports")
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let first = loop {
        if let Some(at) = archived_at().await {
            break at;
        }
        assert!(Instant::now() < deadline, "the report of job {job_id} was archived within two minutes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let spent = proxy.settled(Duration::from_secs(3)).await - before;
    eprintln!("{} end records from {} nodes: {spent} requests; one report: {one_report}", records.len(), nodes.len());
    assert_eq!(archived_at().await, Some(first), "archived once, never rewritten");
    assert!(
        spent <= one_report + one_report / 2,
        "{} end records from {} nodes cost {spent} VictoriaMetrics requests; one report is {one_report}",
        records.len(),
        nodes.len()
    );
}

/// H4/M11: twenty people watching a running 64-GPU job share one computation of its report.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_viewers_of_a_running_big_job_share_one_computation() {
    let _db = database_shared().await;
    let proxy = CountingProxy::start().await;
    let app = spawn_app(sakura_config(&proxy.url, None)).await;
    let job = running_big_sakura_job(&app).await;
    let (status, _, _) = report(&app, &job.job_id, "&points=60").await;
    assert_eq!(status, 200);
    let one_report = proxy.settled(Duration::from_secs(1)).await;

    let viewers = (0..20).map(|_| {
        let (client, url) =
            (app.client.clone(), format!("{}/api/v1/jobs/{}/report?cluster=sakura", app.base_url, job.job_id));
        tokio::spawn(async move {
            let response = client.get(url).timeout(Duration::from_secs(30)).send().await.expect("an answer in 30 s");
            let status = response.status();
            (status, response.json::<JobReport>().await.ok().map(|report| report.generated_at))
        })
    });
    let answers = futures::future::join_all(viewers).await;
    let spent = proxy.settled(Duration::from_secs(1)).await - one_report;
    let mut made = Vec::new();
    for answer in answers {
        let (status, generated_at) = answer.expect("a viewer task");
        assert_eq!(status, 200);
        made.push(generated_at.expect("a report"));
    }
    made.dedup();
    eprintln!("20 viewers of job {} ({} GPUs): {spent} requests; one report: {one_report}", job.job_id, job.alloc_gpus);
    assert_eq!(made.len(), 1, "every viewer got the one report made: {made:?}");
    assert!(spent <= one_report + one_report / 2, "20 viewers cost {spent} requests; one report is {one_report}");
}

/// M11: `points` is budgeted by the job's GPUs (points × GPUs ≤ 64,000), so a 512-GPU job at
/// `points=2000` cannot become a response of hundreds of MB.
#[tokio::test(flavor = "multi_thread")]
async fn report_points_are_budgeted_by_gpu_count() {
    let _db = database_shared().await;
    let app = spawn_app(sakura_config(lab().var("SLURMLENS_VM_URL"), None)).await;
    let job = running_big_sakura_job(&app).await;
    let (status, bytes, report) = report(&app, &job.job_id, "&points=2000&series=per_gpu").await;
    assert_eq!(status, 200);
    let report = report.expect("a report");
    assert_eq!(report.metrics.status, slurmlens_wire::MetricsState::Ok, "{:?}", report.metrics);
    let budget = 64_000 / job.alloc_gpus as usize;
    let most = most_points(&report);
    eprintln!("job {} ({} GPUs) at points=2000: {most} points per series, {bytes} bytes", job.job_id, job.alloc_gpus);
    assert!(most > 0 && most <= budget, "{most} points per series for {} GPUs (budget {budget})", job.alloc_gpus);
    assert!(bytes < 32 << 20, "a report of {bytes} bytes");
}

/// L1: the first reader's `points` does not fix the archived report's resolution.
#[tokio::test(flavor = "multi_thread")]
async fn the_archive_keeps_default_points_whatever_the_first_reader_asked() {
    let _db = database_shared().await;
    let job_id = finished_sakura_job((1, 1), 3600).await.to_string();
    let database = fresh_database("security_ingest_archive_points").await;
    let app = spawn_app(sakura_config(lab().var("SLURMLENS_VM_URL"), Some(database))).await;
    let (status, _, first) = report(&app, &job_id, "&points=2&series=per_gpu").await;
    assert_eq!(status, 200);
    assert_eq!(first.expect("a report").metrics.status, slurmlens_wire::MetricsState::Ok);
    let (status, _, archived) = report(&app, &job_id, "&series=per_gpu").await;
    assert_eq!(status, 200);
    let archived = archived.expect("a report");
    assert_eq!(archived.source, slurmlens_wire::ReportSource::Archived);
    // An hour at 15 s scrapes: the default 120 points, not the first reader's 2.
    assert!(most_points(&archived) >= 100, "the archive holds {} points per series", most_points(&archived));
}

fn peak_rss_reset() {
    // Linux: writing 5 resets the peak resident set size (VmHWM) to the current one.
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting VmHWM");
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// A protobuf length-delimited field.
fn field(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    prost::encoding::encode_varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

/// H5: bodies that inflate (gzip) or expand (decoding) far beyond what the record limit needs are
/// refused before the records are built; the server's memory barely moves.
#[tokio::test(flavor = "multi_thread")]
async fn record_bombs_are_refused_before_their_records_are_built() {
    let _db = database_shared().await;
    let (app, _pool) = crate::support::ingest_app("security_ingest_bombs", LAB_SECRET).await;
    // 7.9 million empty LogRecords (field 2 of ScopeLogs, in field 2 of ResourceLogs, in field 1):
    // 15.8 MB inflated, under the inflation cap, so the record count is what refuses it.
    let scope = b"\x12\x00".repeat(7_900_000);
    let protobuf = gzip(&field(0x0a, &field(0x12, &scope)));
    drop(scope);
    assert!(protobuf.len() < 64 << 10, "a small body: {} bytes", protobuf.len());
    let mut otlp_json = String::from(r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":["#);
    otlp_json.push_str(&"{},".repeat(5_200_000));
    otlp_json.push_str("{}]}]}]}");
    let otlp_json = gzip(otlp_json.as_bytes());
    let mut traces = String::from(r#"{"cluster":"lab","node":"n1","records":["#);
    traces.push_str(&"{},".repeat(5_500_000));
    traces.push_str("{}]}");

    let bodies = [
        ("/api/v1/otlp/v1/logs", "application/x-protobuf", Some("gzip"), protobuf),
        ("/api/v1/otlp/v1/logs", "application/json", Some("gzip"), otlp_json),
        ("/api/v1/traces", "application/json", None, traces.into_bytes()),
    ];
    let mut grown = Vec::new();
    for (path, content_type, encoding, body) in bodies {
        peak_rss_reset();
        let before = peak_rss_kib();
        let mut request = app
            .client
            .post(format!("{}{path}", app.base_url))
            .bearer_auth(LAB_SECRET)
            .header("content-type", content_type)
            .body(body);
        if let Some(encoding) = encoding {
            request = request.header("content-encoding", encoding);
        }
        let response = request.send().await.expect("an answer");
        let status = response.status().as_u16();
        let envelope: ErrorEnvelope = response.json().await.expect("the error envelope");
        assert!(matches!(status, 400 | 413), "{path} {content_type}: {status}");
        let message = &envelope.error.message;
        assert!(message.contains("10000") || message.contains("16000000"), "names the limit: {message}");
        grown.push((path, content_type, peak_rss_kib().saturating_sub(before) / 1024));
    }
    eprintln!("peak RSS grew by (MiB): {grown:?}");
    assert!(grown.iter().all(|(_, _, mib)| *mib < 256), "peak RSS grew by (MiB): {grown:?}");
}

/// M8 (a): a user uploads an `nsys` report of their own job with their own identity, never the
/// cluster's ingest secret, and only into a job they may see, on one of its nodes.
#[tokio::test(flavor = "multi_thread")]
async fn nsys_uploads_go_through_the_users_identity_into_a_job_they_may_see() {
    let _db = database_shared().await;
    let database = fresh_database("security_ingest_nsys_user").await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: database });
    config.access.trusted_proxies =
        vec![slurmlens::config::ProxyNet::try_from("127.0.0.1/32".to_string()).expect("a network")];
    let app = spawn_app(config).await;
    let job_id = crate::support::finished_lab_job().await;
    let detail = app.get_as("root", &format!("/api/v1/jobs/{job_id}?cluster=lab")).await;
    assert_eq!(detail.status(), 200);
    let detail: JobDetail = detail.json().await.expect("job detail");
    let (owner, node) = (detail.job.user.clone(), detail.nodes[0].node.clone());
    let csv = "\"Time (%)\",\"Total Time (ns)\",\"Instances\",\"Avg (ns)\",\"Med (ns)\",\"Min (ns)\",\"Max (ns)\",\"StdDev (ns)\",\"Name\"\n\
        100.0,6000000000,600,10000000.0,10000000.0,9000000,11000000,100.0,\"void gemm_kernel(Params)\"\n";
    let upload = |user: Option<&str>, node: &str| {
        let path = format!("{}/api/v1/jobs/{job_id}/traces/nsys?cluster=lab&node={node}", app.base_url);
        let mut request = app.client.post(path).body(csv);
        if let Some(user) = user {
            request = request.header("X-Remote-User", user);
        }
        request.send()
    };
    let response = upload(Some(&owner), &node).await.expect("an answer");
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    // Stored over the job's run (the default span), where the job's traces are read.
    let traces: JobTraces =
        app.get_as(&owner, &format!("/api/v1/jobs/{job_id}/traces?cluster=lab")).await.json().await.expect("traces");
    assert_eq!(traces.gpus.len(), 1, "the owner's upload is in the job's breakdown");

    // From a batch script there is no sign-in: the owner's personal token makes the same upload (the one
    // write a token may make); another of its writes is still refused.
    let token: slurmlens_wire::CreatedToken = app
        .client
        .post(format!("{}/api/v1/tokens", app.base_url))
        .header("X-Remote-User", &owner)
        .json(&serde_json::json!({"name": "batch"}))
        .send()
        .await
        .expect("token")
        .json()
        .await
        .expect("created");
    let with_token = app
        .client
        .post(format!("{}/api/v1/jobs/{job_id}/traces/nsys?cluster=lab&node={node}&pid=2", app.base_url))
        .bearer_auth(&token.token)
        .body(csv)
        .send()
        .await
        .expect("an answer");
    assert_eq!(with_token.status(), 200, "{}", with_token.text().await.unwrap_or_default());
    let other_write = app
        .client
        .post(format!("{}/api/v1/tokens", app.base_url))
        .bearer_auth(&token.token)
        .json(&serde_json::json!({"name": "more"}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(other_write.status(), 403);
    let stranger = upload(Some("someone-else"), &node).await.expect("an answer");
    assert_eq!(stranger.status(), 404, "a job the uploader may not see is not found");
    let anonymous = upload(None, &node).await.expect("an answer");
    assert_eq!(anonymous.status(), 401);
    let elsewhere = upload(Some(&owner), "not-a-node-of-the-job").await.expect("an answer");
    assert_eq!(elsewhere.status(), 400);
    let envelope: ErrorEnvelope = elsewhere.json().await.expect("envelope");
    assert_eq!(envelope.error.parameter.as_deref(), Some("node"));
    let docs = std::fs::read_to_string(crate::support::repo_root().join("docs/API.md")).expect("docs/API.md");
    let examples: Vec<&str> = docs.split("```").skip(1).step_by(2).collect();
    assert!(examples.iter().any(|example| example.contains("/api/v1/jobs/4242/traces/nsys")), "the users' upload");
    assert!(
        !examples.iter().any(|example| example.contains("traces/nsys") && example.contains("INGEST_SECRET")),
        "docs/API.md no longer shows an nsys upload with the ingest secret"
    );
}

/// M8 (b): where the site gives each node its own secret, a node's secret speaks for that node only.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_secret_speaks_only_for_its_own_node() {
    use hmac::{Hmac, Mac};
    let _db = database_shared().await;
    let database = fresh_database("security_ingest_node_secrets").await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.database = Some(DatabaseConfig { url: database });
    config.ingest.secrets.insert("lab".into(), IngestSecret(LAB_SECRET.into()));
    config.ingest.node_secrets = vec!["lab".into()];
    let app = spawn_app(config).await;
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(LAB_SECRET.as_bytes()).expect("a key");
    mac.update(b"n1");
    let hex: String = mac.finalize().into_bytes().iter().map(|byte| format!("{byte:02x}")).collect();
    let n1 = format!("n1:{hex}");
    let job_id = crate::support::finished_lab_job().await;
    let at = Utc::now().to_rfc3339();
    let allocation = |node: &str| {
        json!({"records": [{"cluster": "lab", "node": node, "job_id": job_id, "step": "job", "event": "start",
            "at": at, "gpus": [{"index": 3}]}]})
    };
    let post = |path: &str, secret: &str, body: serde_json::Value| {
        app.client.post(format!("{}{path}", app.base_url)).bearer_auth(secret).json(&body).send()
    };
    let own = post("/api/v1/gpu_allocations", &n1, allocation("n1")).await.expect("an answer");
    assert_eq!(own.status(), 200, "{}", own.text().await.unwrap_or_default());
    let other = post("/api/v1/gpu_allocations", &n1, allocation("n2")).await.expect("an answer");
    assert_eq!(other.status(), 400);
    let envelope: ErrorEnvelope = other.json().await.expect("envelope");
    assert_eq!(envelope.error.parameter.as_deref(), Some("records[0].node"), "{envelope:?}");
    let trace = |node: &str| {
        json!({"cluster": "lab", "node": node, "records": [{"interval_start": "2026-01-02T03:04:00Z",
            "interval_s": 10, "gpu": 0, "pid": 1, "job_id": job_id, "category": "kernel", "name": "k",
            "count": 1, "total_ns": 10, "max_ns": 10}]})
    };
    let own = post("/api/v1/traces", &n1, trace("n1")).await.expect("an answer");
    assert_eq!(own.status(), 200);
    let other = post("/api/v1/traces", &n1, trace("n2")).await.expect("an answer");
    assert_eq!(other.status(), 400);
    let envelope: ErrorEnvelope = other.json().await.expect("envelope");
    assert_eq!(envelope.error.parameter.as_deref(), Some("node"), "{envelope:?}");
    let forged = post("/api/v1/gpu_allocations", &n1.replacen("n1:", "n2:", 1), allocation("n2")).await;
    assert_eq!(forged.expect("an answer").status(), 401, "n1's secret under n2's name");
    // The cluster's own secret (central collectors) still speaks for every node.
    let central = post("/api/v1/gpu_allocations", LAB_SECRET, allocation("n2")).await.expect("an answer");
    assert_eq!(central.status(), 200);
}

/// M10: a spool batch with one bad record (a skewed clock) stores the others and names the bad one,
/// instead of a 400 that made the plugin drop the whole batch.
#[tokio::test(flavor = "multi_thread")]
async fn a_bad_gpu_record_is_named_and_the_rest_of_its_batch_is_stored() {
    let _db = database_shared().await;
    let (app, pool) = crate::support::ingest_app("security_ingest_partial", LAB_SECRET).await;
    let job_id = 4_100_000_000u32 + std::process::id() % 1000;
    let record = |node: &str, at: DateTime<Utc>| {
        json!({"cluster": "lab", "node": node, "job_id": job_id, "step": "job", "event": "start",
            "at": at, "gpus": [{"index": 1}]})
    };
    let now = Utc::now();
    let batch =
        json!({"records": [record("n1", now), record("n2", now + chrono::Duration::days(3)), record("n3", now)]});
    let response = app
        .client
        .post(format!("{}/api/v1/gpu_allocations", app.base_url))
        .bearer_auth(LAB_SECRET)
        .json(&batch)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    let receipt: slurmlens_wire::GpuAllocationReceipt = response.json().await.expect("a receipt");
    assert_eq!(receipt.accepted, 2, "{receipt:?}");
    assert_eq!(receipt.rejected.len(), 1, "{receipt:?}");
    assert_eq!((receipt.rejected[0].index, receipt.rejected[0].field.as_str()), (1, "records[1].at"));
    let nodes: Vec<String> = sqlx::query_scalar("SELECT node FROM gpu_allocations WHERE job_id = ? ORDER BY node")
        .bind(job_id)
        .fetch_all(&pool)
        .await
        .expect("reading gpu_allocations");
    assert_eq!(nodes, vec!["n1", "n3"]);
}
