//! Several replicas on one MariaDB (issue #16): a job's end sent to two replicas is archived once, the
//! heavy-request bounds hold across replicas and a dead replica's slots come back, a replica killed
//! mid-ingest loses nothing once the batch is retried elsewhere; and VictoriaMetrics read through
//! vmauth at a cluster-style path (`/select/0/prometheus`) with a bearer token or basic auth.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, IngestSecret, VictoriaMetricsConfig};
use slurmlens_wire::{Job, JobReport, MetricsState, Page, TraceReceipt};
use sqlx::Connection;
use tokio::io::AsyncWriteExt;

use crate::support::{database_shared, finished_lab_job, fresh_database, lab, spawn_app, test_config};

/// Polls `check` every 100 ms until it holds; panics with `what` after `timeout`.
async fn poll_until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn vm_config(url: &str, bearer_token: Option<&str>, timeout_ms: u64) -> VictoriaMetricsConfig {
    VictoriaMetricsConfig {
        url: url.to_string(),
        timeout_ms,
        readings_max_age_s: 1800,
        bearer_token: bearer_token.map(|token| IngestSecret(token.into())),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_end_sent_to_two_replicas_is_archived_once() {
    let _db = database_shared().await;
    let database = fresh_database("replicas_job_end").await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(vm_config(lab().var("SLURMLENS_VM_URL"), None, 20_000));
    config.database = Some(DatabaseConfig { url: database.clone() });
    config.report.archive_delay_s = 0;
    config.report.archive_interval_s = 0;
    let (a, b) = (slurmlens::serve::app(&config).expect("app"), slurmlens::serve::app(&config).expect("app"));
    let job_id = finished_lab_job().await;
    let lab_cluster: slurmlens::domain::cluster::ClusterName = "lab".parse().expect("valid");
    // Every node of the job posts its end, through the load balancer to either replica, at once.
    let ends = [(job_id, Utc::now())];
    let (at_a, at_b) =
        tokio::join!(a.store_allocations(&lab_cluster, &[], &ends), b.store_allocations(&lab_cluster, &[], &ends));
    at_a.expect("replica A takes the job end");
    at_b.expect("replica B takes the job end");
    let pool = sqlx::MySqlPool::connect(&database).await.expect("test database");
    let archived = || async {
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_reports WHERE cluster = 'lab' AND job_id = ?")
            .bind(job_id)
            .fetch_one(&pool)
            .await
            .expect("count");
        rows
    };
    poll_until("both replicas done with the job end, its report archived", Duration::from_secs(60), || async {
        a.reporter().job_end_archives_pending() == 0
            && b.reporter().job_end_archives_pending() == 0
            && archived().await == 1
    })
    .await;
    let computed = a.reporter().computations() + b.reporter().computations();
    assert_eq!(
        computed,
        1,
        "one report computation for two replicas (A {}, B {})",
        a.reporter().computations(),
        b.reporter().computations()
    );
    assert_eq!(archived().await, 1);
}

/// A stand-in for a VictoriaMetrics that accepts connections and never answers, until released:
/// a report waiting on it is a heavy request that lasts as long as the test wants, with no sleep.
struct HangingMetrics {
    url: String,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl HangingMetrics {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding port 0");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        Self { url, accepted, task }
    }

    /// Closes every connection and the listener: the waiting reports fail over to "unavailable".
    fn release(self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn heavy_request_bounds_hold_across_replicas_and_a_dead_replicas_slots_come_back() {
    let _db = database_shared().await;
    let database = fresh_database("replicas_limits").await;
    let hanging = HangingMetrics::start().await;
    let replica = |vm_url: &str| {
        let mut config = test_config(AnonymousAccess::Staff);
        config.clusters = vec!["lab".parse().expect("valid")];
        config.database = Some(DatabaseConfig { url: database.clone() });
        config.victoriametrics = Some(vm_config(vm_url, None, 120_000));
        config.report.archive_interval_s = 0;
        config.limits.heavy_per_identity = 2.try_into().expect("non-zero");
        config.limits.shared = true;
        config
    };
    let a = spawn_app(replica(&hanging.url)).await;
    let b = spawn_app(replica(lab().var("SLURMLENS_VM_URL"))).await;
    let job_id = finished_lab_job().await;
    let now = Utc::now().timestamp();
    let listing = format!("/api/v1/jobs?cluster=lab&start={}&end={now}&limit=10", now - 3600);

    // Two slow reports of `root` on replica A (two point counts: two computations, not one flight).
    let slow = |points: u32| {
        let (client, url) = (a.client.clone(), format!("{}/api/v1/jobs/{job_id}/report?points={points}", a.base_url));
        tokio::spawn(async move {
            // The whole answer read: its slots are free once its last byte has come.
            let response = client.get(url).header("X-Remote-User", "root").send().await?;
            let status = response.status();
            response.bytes().await.map(|_| status)
        })
    };
    let (first, second) = (slow(100), slow(120));
    // A's reports reach the metrics source, where they wait.
    poll_until("A's reports wait on their metrics", Duration::from_secs(30), || async {
        hanging.accepted.load(std::sync::atomic::Ordering::SeqCst) > 0
    })
    .await;
    // Both hold root's two slots once B refuses root: the bound is the replicas', not B's own.
    poll_until("replica B refuses a third heavy request of root", Duration::from_secs(60), || async {
        b.get_as("root", &listing).await.status() == 429
    })
    .await;
    assert!(!first.is_finished() && !second.is_finished(), "A's two reports still run");
    let refused = b.get_as("root", &listing).await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(b.get_as("bob", &listing).await.status(), 200, "another person is not bound by root's slots");

    // A's reports end (the metrics source gives up): root's slots are free again on B.
    hanging.release();
    for report in [first, second] {
        let status = report.await.expect("the request task").expect("A answers");
        assert_eq!(status, 200, "a report degrades when its metrics source fails");
    }
    assert_eq!(b.get_as("root", &listing).await.status(), 200);
    // Two clients of one person asking one after the other, each as soon as its answer is read, are
    // never refused: a request's slots are freed before its last byte is sent, here and across replicas.
    let one_after_another = || async {
        for _ in 0..10 {
            let response = b.get_as("carol", &listing).await;
            let status = response.status();
            let body = response.text().await.expect("the listing's body");
            assert_eq!(status, 200, "carol's previous requests had ended: {body:.300}");
        }
    };
    tokio::join!(one_after_another(), one_after_another());

    // A replica that dies holding slots: its process ends, the kernel closes its socket, and MariaDB
    // frees the locks with the connection's thread. (Not a pool's connection: a pool closing while the
    // connection goes back to it can keep it open, idle, for the pool's life.)
    let mut dying = sqlx::MySqlConnection::connect(&database).await.expect("the dying replica's connection");
    for n in 0..2 {
        let held: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(SHA2(CONCAT(?, '.', DATABASE()), 256), 0)")
            .bind(format!("slurmlens:heavy:alice:{n}"))
            .fetch_one(&mut dying)
            .await
            .expect("GET_LOCK");
        assert_eq!(held, Some(1));
    }
    assert_eq!(b.get_as("alice", &listing).await.status(), 429, "alice's slots are held elsewhere");
    // No goodbye to MariaDB: the socket just closes, as a killed process's does.
    drop(dying);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = b.get_as("alice", &listing).await;
        let status = response.status();
        if status == 200 {
            break;
        }
        let body = response.text().await.unwrap_or_default();
        assert!(
            std::time::Instant::now() < deadline,
            "alice's slots come back once the replica holding them is gone: still {status} after 30 s: {body:.300}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

const SECRET: &str = "replica-ingest-secret-0123456789";

/// The real `slurmlens serve` as a child process, taking ingest for `lab` into `database`.
async fn serve_child(database: &str) -> (tokio::process::Child, String) {
    let env = [("SLURMLENS_DATABASE__URL", database), ("SLURMLENS_INGEST__SECRETS__LAB", SECRET)];
    crate::support::serve_child(&env, false).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_mid_ingest_loses_nothing_once_the_batch_is_retried_on_another() {
    let _db = database_shared().await;
    let database = fresh_database("replicas_killed").await;
    let records: Vec<serde_json::Value> = (0..10_000)
        .map(|n| {
            json!({"job_id": 77, "interval_start": "2026-01-02T03:04:00Z", "interval_s": 10, "gpu": n % 8,
                   "pid": 4242, "category": "kernel", "name": format!("kernel_{n}"), "count": 3,
                   "total_ns": 3000, "max_ns": 2000})
        })
        .collect();
    let batch = json!({"cluster": "lab", "node": "n1", "records": records}).to_string();
    let pool = sqlx::MySqlPool::connect(&database).await.expect("test database");
    let stored = || async {
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM trace_summaries WHERE job_id = 77")
            .fetch_one(&pool)
            .await
            .expect("count");
        rows
    };

    // Replica A gets the whole batch and is killed (SIGKILL) before it answers.
    let (mut replica_a, address) = serve_child(&database).await;
    let mut socket = tokio::net::TcpStream::connect(&address).await.expect("connecting to A");
    let head = format!(
        "POST /api/v1/traces HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {SECRET}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        batch.len()
    );
    socket.write_all(head.as_bytes()).await.expect("sending the head");
    socket.write_all(batch.as_bytes()).await.expect("sending the body");
    replica_a.start_kill().expect("SIGKILL");
    replica_a.wait().await.expect("A is gone");
    let after_kill = stored().await;
    assert!(after_kill == 0 || after_kill == 10_000, "a batch is stored whole or not at all: {after_kill} rows");

    // The sender retries on replica B (twice: its retry may itself be retried): every record once.
    let (_replica_b, address_b) = serve_child(&database).await;
    let client = reqwest::Client::new();
    for attempt in 0..2 {
        let response = client
            .post(format!("http://{address_b}/api/v1/traces"))
            .bearer_auth(SECRET)
            .header("content-type", "application/json")
            .body(batch.clone())
            .send()
            .await
            .expect("B answers");
        assert_eq!(response.status(), 200, "attempt {attempt}");
        let receipt: TraceReceipt = response.json().await.expect("receipt");
        let expected_new = if attempt == 0 { 10_000 - after_kill as u64 } else { 0 };
        assert_eq!((receipt.stored, receipt.rejected.len()), (expected_new, 0), "attempt {attempt}");
        assert_eq!(receipt.stored + receipt.duplicates, 10_000, "attempt {attempt}");
    }
    assert_eq!(stored().await, 10_000, "every record exactly once");
}

/// A finished sakura job with the most GPUs among those that ended 2 to 8 hours ago (within the
/// lab's 48 h of telemetry).
async fn large_sakura_job(config: &Config) -> Job {
    let app = spawn_app(config.clone()).await;
    let now = Utc::now().timestamp();
    let (start, end) = (now - 8 * 3600, now - 2 * 3600);
    let page: Page<Job> = app
        .get(&format!("/api/v1/jobs?cluster=sakura&start={start}&end={end}&limit=1000"))
        .await
        .json()
        .await
        .expect("page JSON");
    page.items
        .into_iter()
        // Ten minutes or more: a job of seconds may end between two of its GPUs' samples (no data).
        .filter(|job| match (job.start, job.end) {
            (Some(from), Some(to)) => to.timestamp() < end && (to - from).num_seconds() >= 600,
            _ => false,
        })
        .max_by_key(|job| job.alloc_gpus)
        .expect("sakura has finished GPU jobs of ten minutes or more 2 to 8 hours ago")
}

/// The same report: the same fields and values, numbers equal but for their last digits (sums of
/// floating-point rates come in no fixed order, so two direct reads differ there too).
fn same_figures(left: &serde_json::Value, right: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => match (left.as_f64(), right.as_f64()) {
            (Some(left), Some(right)) => (left - right).abs() <= 1e-9 * left.abs().max(right.abs()).max(1.0),
            _ => left == right,
        },
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len() && left.iter().zip(right).all(|(left, right)| same_figures(left, right))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left.iter().all(|(key, value)| right.get(key).is_some_and(|other| same_figures(value, other)))
        }
        _ => left == right,
    }
}

/// The top-level fields of two reports that differ, with both values (cut short).
fn differing_fields(left: &serde_json::Value, right: &serde_json::Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (left, right) = (left.as_object().unwrap_or(&empty), right.as_object().unwrap_or(&empty));
    let cut = |value: Option<&serde_json::Value>| value.map(|v| v.to_string().chars().take(300).collect::<String>());
    left.keys()
        .chain(right.keys())
        .filter(|key| !left.get(*key).zip(right.get(*key)).is_some_and(|(left, right)| same_figures(left, right)))
        .map(|key| format!("{key}: {:?} vs {:?}", cut(left.get(key)), cut(right.get(key))))
        .collect()
}

async fn report_through(config: Config, job: &Job) -> (reqwest::StatusCode, serde_json::Value) {
    let app = spawn_app(config).await;
    let response = app.get(&format!("/api/v1/jobs/{}/report?cluster=sakura", job.job_id_raw)).await;
    let status = response.status();
    let mut report: serde_json::Value = response.json().await.expect("report JSON");
    // The one field that differs between two computations of the same report, and the links to vmui,
    // which name the address the report was read through (the queries themselves must agree).
    if let Some(report) = report.as_object_mut() {
        report.insert("generated_at".into(), json!("2000-01-01T00:00:00Z"));
        for chart in report.get_mut("chart_queries").and_then(|charts| charts.as_array_mut()).into_iter().flatten() {
            if let Some(chart) = chart.as_object_mut() {
                chart.remove("vmui_url");
            }
        }
    }
    (status, report)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_report_through_vmauth_at_a_cluster_path_equals_the_direct_one_and_wrong_credentials_degrade_it() {
    let _db = database_shared().await;
    let vmauth = lab().var("LAB_VMAUTH_URL");
    let with_vm = |vm: VictoriaMetricsConfig| {
        let mut config = test_config(AnonymousAccess::Staff);
        config.clusters = vec!["sakura".parse().expect("valid")];
        config.victoriametrics = Some(vm);
        config
    };
    let direct = with_vm(vm_config(lab().var("SLURMLENS_VM_URL"), None, 30_000));
    let job = large_sakura_job(&direct).await;
    let (status, expected) = report_through(direct, &job).await;
    assert_eq!(status, 200);
    let parsed: JobReport = serde_json::from_value(expected.clone()).expect("a report");
    assert_eq!(parsed.metrics.status, MetricsState::Ok, "job {} has metrics: {:?}", job.job_id, parsed.metrics);

    let bearer = with_vm(vm_config(vmauth, Some(lab().var("LAB_VMAUTH_TOKEN")), 30_000));
    let (status, through_bearer) = report_through(bearer, &job).await;

    assert_eq!(status, 200);
    assert!(
        same_figures(&through_bearer, &expected),
        "the report through vmauth (bearer token) differs from the direct one in {:?}",
        differing_fields(&through_bearer, &expected)
    );

    let (user, password) = (lab().var("LAB_VMAUTH_USER"), lab().var("LAB_VMAUTH_PASSWORD"));
    let basic_url = vmauth.replacen("http://", &format!("http://{user}:{password}@"), 1);
    let (status, through_basic) = report_through(with_vm(vm_config(&basic_url, None, 30_000)), &job).await;
    assert_eq!(status, 200);
    assert!(
        same_figures(&through_basic, &expected),
        "the report through vmauth (basic auth) differs from the direct one in {:?}",
        differing_fields(&through_basic, &expected)
    );

    for wrong in [vm_config(vmauth, Some("not-the-token"), 30_000), vm_config(vmauth, None, 30_000)] {
        let (status, report) = report_through(with_vm(wrong), &job).await;
        assert_eq!(status, 200, "wrong credentials degrade the report, not the request");
        let report: JobReport = serde_json::from_value(report).expect("a report");
        assert_eq!(report.metrics.status, MetricsState::Unavailable);
        let message = report.metrics.message.unwrap_or_default();
        assert!(message.contains("credentials"), "the report says why: {message}");
    }
}
