//! Every signal per job: `GET /api/v1/jobs/{id}/logs` and `/profile` for a real Slurm job of the lab.
//! Logs are read from the lab's real VictoriaLogs (lines written there by the test, see `real_logs.rs`):
//! the job's nodes and window only. Stand-ins (see `standins.rs`) remain where the real servers cannot
//! be made to fail or to tell what they were asked: Pyroscope (not in the lab), the queries that must
//! never be sent (injection attempts are 400s that reach no source; another tenant's job is a 404), and
//! a source down, slow or absent (a 200 with its status).

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;
use slurmlens::config::{AnonymousAccess, Config, PyroscopeConfig, VictoriaLogsConfig};
use slurmlens_wire::{ErrorEnvelope, JobDetail, JobLogs, JobProfile};

use crate::real_logs;
use crate::standins;
use crate::support::{TestApp, database_shared, lab, slurm, spawn_app, test_config};

/// A finished two-node job of the lab cluster: from slurmdbd if one exists, else submitted now.
async fn two_node_job() -> u32 {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let found: Option<u32> = sqlx::query_scalar(
        "SELECT id_job FROM lab_job_table WHERE time_start > 0 AND time_end > time_start AND nodes_alloc = 2 \
         ORDER BY id_job DESC LIMIT 1",
    )
    .fetch_optional(&pool)
    .await
    .expect("reading lab_job_table");
    if let Some(job_id) = found {
        pool.close().await;
        return job_id;
    }
    let out =
        slurm("sbatch", &["--parsable", "--uid=alice", "--gid=alice", "-N2", "-o", "/dev/null", "--wrap", "true"]);
    let job_id: u32 = out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ended: Option<u64> = sqlx::query_scalar("SELECT time_end FROM lab_job_table WHERE id_job = ? LIMIT 1")
            .bind(job_id)
            .fetch_optional(&pool)
            .await
            .expect("reading lab_job_table");
        if ended.is_some_and(|end| end > 0) {
            pool.close().await;
            return job_id;
        }
        assert!(Instant::now() < deadline, "job {job_id} did not end in slurmdbd within 2 minutes");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn logs_config(url: &str, timeout_ms: u64) -> VictoriaLogsConfig {
    VictoriaLogsConfig {
        url: url.into(),
        timeout_ms,
        node_field: "host".parse().expect("field"),
        filter: None,
        max_lines: 500,
    }
}

fn profile_config(url: &str, timeout_ms: u64) -> PyroscopeConfig {
    PyroscopeConfig {
        url: url.into(),
        timeout_ms,
        profile_type: Default::default(),
        host_label: "hostname".parse().expect("label"),
        cgroup_label: "cgroup_path".parse().expect("label"),
        service_name: None,
        max_nodes: 1024,
    }
}

async fn app_with(
    logs: Option<VictoriaLogsConfig>,
    profiles: Option<PyroscopeConfig>,
    anonymous: AnonymousAccess,
) -> TestApp {
    let config = Config { victorialogs: logs, pyroscope: profiles, ..test_config(anonymous) };
    spawn_app(config).await
}

async fn detail(app: &TestApp, job_id: u32) -> JobDetail {
    let response = app.get(&format!("/api/v1/jobs/{job_id}?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("job detail")
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The job's window as the server asks for it: a minute of margin each side.
fn window(detail: &JobDetail) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = detail.job.start.expect("started");
    let end = detail.job.end.expect("ended");
    (start - chrono::Duration::seconds(60), end + chrono::Duration::seconds(60))
}

fn nodes_of(detail: &JobDetail) -> Vec<String> {
    detail.nodes.iter().map(|node| node.node.clone()).collect()
}

/// What the job's nodes wrote in its window, as a site's shipper sends it to VictoriaLogs (a `host`
/// field, as vlagent and Promtail name it), marked with this run's `run` so that the site filter reads
/// only these; with lines that must not be read: the same node before the window, a node not the job's.
fn recorded_lines(job_id: u32, nodes: &[String], start: DateTime<Utc>, run: &str) -> Vec<serde_json::Value> {
    // Seconds 61–66 of the window, which opens a minute before the start: within it however short the job.
    let at =
        |seconds: i64| (start + chrono::Duration::seconds(seconds - 60)).to_rfc3339_opts(SecondsFormat::Nanos, true);
    let entry = |seconds: i64, node: &str, message: String| json!({"_time": at(seconds), "_msg": message, "host": node, "app": "syslog", "run": run});
    let (first, second) = (&nodes[0], &nodes[1]);
    vec![
        entry(61, first, format!("slurmd[2211]: launch task StepId={job_id}.0 request from UID:1001 GID:1001")),
        entry(62, second, "kernel: nvidia-uvm: Loaded the UVM driver, major device number 508.".into()),
        entry(
            63,
            second,
            "kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, name=python, GPU has fallen off the bus.".into(),
        ),
        entry(
            64,
            first,
            "python[48213]: node01:48213:48901 [3] NCCL WARN NET/IB : Got completion from peer with error 12".into(),
        ),
        entry(
            65,
            first,
            format!("slurmstepd[9000]: error: *** JOB {job_id}5 ON {first} CANCELLED AT 2026-12-01T09:12:44 ***"),
        ),
        entry(
            66,
            first,
            format!("slurmstepd[9000]: error: *** JOB {job_id} ON {first} CANCELLED AT 2026-12-01T09:12:44 ***"),
        ),
        entry(-600, first, "kernel: NVRM: Xid (PCI:0000:3b:00): 48, before the window.".into()),
        entry(62, "not-a-node-of-this-job", "kernel: NVRM: Xid (PCI:0000:3b:00): 31, another node.".into()),
    ]
}

/// Stand-ins with nothing to answer and a server that reads them: for tests where neither may be asked.
async fn empty_sources_app(anonymous: AnonymousAccess) -> (standins::StandIn, standins::StandIn, TestApp) {
    let logs = standins::victorialogs(&[], Duration::ZERO).await;
    let profiles = standins::pyroscope(&json!({}), Duration::ZERO).await;
    let app =
        app_with(Some(logs_config(&logs.base_url, 2000)), Some(profile_config(&profiles.base_url, 2000)), anonymous)
            .await;
    (logs, profiles, app)
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_of_a_job_are_its_nodes_and_window_with_the_important_lines_first() {
    let _db = database_shared().await;
    let job_id = two_node_job().await;
    let plain = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let detail = detail(&plain, job_id).await;
    let nodes = nodes_of(&detail);
    assert_eq!(nodes.len(), 2, "a two-node job");
    let (start, end) = window(&detail);
    let run = real_logs::run_mark("signals");
    let recorded = recorded_lines(job_id, &nodes, detail.job.start.expect("started"), &run);
    real_logs::ingest(&recorded).await;
    let site_filter = format!("run:={}", slurmlens::domain::logsql::quote(&run));
    let config = VictoriaLogsConfig { filter: Some(site_filter.clone()), ..real_logs::config("host") };
    let app = app_with(Some(config), None, AnonymousAccess::Staff).await;

    let response = app.get(&format!("/api/v1/jobs/{job_id}/logs?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    let logs: JobLogs = response.json().await.expect("logs");
    assert_eq!(logs.status, slurmlens_wire::LogsStatus::Ok, "{:?}", logs.message);
    let scope = format!(
        "_time:[{}, {}] host:in(\"{}\", \"{}\") ({site_filter})",
        rfc3339(start),
        rfc3339(end),
        nodes[0],
        nodes[1]
    );
    assert_eq!(logs.query.as_deref(), Some(scope.as_str()), "the query is shown as sent");
    let read: Vec<&str> = logs.lines.iter().map(|line| line.message.as_str()).collect();
    let wanted: Vec<&str> = recorded[..6].iter().map(|line| line["_msg"].as_str().expect("a message")).collect();
    assert_eq!(read, wanted, "the job's nodes in its window, in time order; nothing before it, nor of another node");
    let important: Vec<(&str, Option<&str>, Option<u32>)> =
        logs.important.iter().map(|line| (line.kind.as_str(), line.node.as_deref(), line.xid)).collect();
    assert_eq!(
        important,
        [
            ("slurm", Some(nodes[0].as_str()), None),
            ("xid", Some(nodes[1].as_str()), Some(79)),
            ("nccl_error", Some(nodes[0].as_str()), None),
            ("slurm", Some(nodes[0].as_str()), None),
        ],
        "classified, in time order, without the line about job {job_id}5"
    );
    let xid = &logs.important[1];
    assert_eq!(xid.time, detail.job.start.expect("started") + chrono::Duration::seconds(3));
    assert!(logs.important[3].message.contains(&format!("JOB {job_id} ON")));

    // One node and a phrase: VictoriaLogs reads only that.
    let path = format!("/api/v1/jobs/{job_id}/logs?cluster=lab&node={}&contains=fallen%20off", nodes[1]);
    let logs: JobLogs = app.get(&path).await.json().await.expect("logs");
    let narrowed =
        format!("_time:[{}, {}] host:=\"{}\" ({site_filter}) \"fallen off\"", rfc3339(start), rfc3339(end), nodes[1]);
    assert_eq!(logs.query.as_deref(), Some(narrowed.as_str()));
    let read: Vec<&str> = logs.lines.iter().map(|line| line.message.as_str()).collect();
    assert_eq!(read, [wanted[2]]);
    assert!(!logs.truncated);
    // A smaller limit than the node has lines: the latest ones, and the answer says it was cut.
    let path = format!("/api/v1/jobs/{job_id}/logs?cluster=lab&node={}&limit=3", nodes[0]);
    let logs: JobLogs = app.get(&path).await.json().await.expect("logs");
    let read: Vec<&str> = logs.lines.iter().map(|line| line.message.as_str()).collect();
    assert_eq!(read, [wanted[3], wanted[4], wanted[5]], "{nodes:?} has 4 lines in the window");
    assert!(logs.truncated);

    // The job page shows the important lines with their kind.
    let page = app.get(&format!("/jobs/{job_id}?cluster=lab")).await.text().await.expect("page");
    assert_eq!(page.matches("data-testid=\"log-important\"").count(), 4, "{page:.2000}");
    assert!(page.contains("XID 79"));
}

#[tokio::test(flavor = "multi_thread")]
async fn injection_attempts_are_refused_before_any_source_is_asked() {
    let _db = database_shared().await;
    let job_id = two_node_job().await;
    let (logs, profiles, app) = empty_sources_app(AnonymousAccess::Staff).await;
    let long = "a".repeat(201);
    let attempts: Vec<(String, &str)> = vec![
        ("contains=%22".into(), "contains"),
        ("contains=a%22%20OR%20*".into(), "contains"),
        ("contains=x%20%7C%20delete".into(), "contains"),
        ("contains=(x)".into(), "contains"),
        ("contains=%7Bjob%3D1%7D".into(), "contains"),
        ("contains=host%3An3".into(), "contains"),
        ("contains=*".into(), "contains"),
        ("contains=a%5Cb".into(), "contains"),
        ("contains=a%0Ab".into(), "contains"),
        ("contains=nul%00".into(), "contains"),
        (format!("contains={long}"), "contains"),
        ("node=n1%22%20OR%20host%3A*".into(), "node"),
        ("node=not-a-node-of-this-job".into(), "node"),
        ("limit=0".into(), "limit"),
        ("limit=1%20OR%201".into(), "limit"),
    ];
    for (query, parameter) in &attempts {
        let response = app.get(&format!("/api/v1/jobs/{job_id}/logs?cluster=lab&{query}")).await;
        assert_eq!(response.status(), 400, "logs {query}");
        let envelope: ErrorEnvelope = response.json().await.expect("the error envelope");
        assert_eq!(envelope.error.parameter.as_deref(), Some(*parameter), "logs {query}: {}", envelope.error.message);
    }
    for (query, parameter) in [
        ("profile_type=cpu%7Bx%3D%22y%22%7D", "profile_type"),
        ("profile_type=goroutine", "profile_type"),
        ("node=n1%7C.*", "node"),
        ("top=0", "top"),
        ("top=101", "top"),
    ] {
        let response = app.get(&format!("/api/v1/jobs/{job_id}/profile?cluster=lab&{query}")).await;
        assert_eq!(response.status(), 400, "profile {query}");
        let envelope: ErrorEnvelope = response.json().await.expect("the error envelope");
        assert_eq!(envelope.error.parameter.as_deref(), Some(parameter), "profile {query}");
    }
    assert!(logs.received().is_empty(), "VictoriaLogs was asked: {:?}", logs.received());
    assert!(profiles.received().is_empty(), "Pyroscope was asked: {:?}", profiles.received());
}

#[tokio::test(flavor = "multi_thread")]
async fn another_tenants_job_logs_and_profile_are_not_found() {
    let _db = database_shared().await;
    let job_id = two_node_job().await;
    let (logs, profiles, app) = empty_sources_app(AnonymousAccess::Nobody).await;
    for path in
        [format!("/api/v1/jobs/{job_id}/logs?cluster=lab"), format!("/api/v1/jobs/{job_id}/profile?cluster=lab")]
    {
        let response = app.get_as("mallory", &path).await;
        assert_eq!(response.status(), 404, "{path}");
        let envelope: ErrorEnvelope = response.json().await.expect("the error envelope");
        assert_eq!(envelope.error.code, "not_found");
        assert_eq!(app.get(&path).await.status(), 401, "{path} without an identity");
    }
    assert!(logs.received().is_empty() && profiles.received().is_empty(), "a source was asked for another's job");
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_and_profile_degrade_when_their_sources_are_down_slow_or_absent() {
    let _db = database_shared().await;
    let job_id = two_node_job().await;
    let closed = standins::closed_port_url().await;
    let slow_logs = standins::victorialogs(&[], Duration::from_secs(10)).await;
    let slow_profiles = standins::pyroscope(&json!({}), Duration::from_secs(10)).await;
    let cases = [
        ("down", Some(logs_config(&closed, 1000)), Some(profile_config(&closed, 1000)), "unavailable"),
        (
            "slow",
            Some(logs_config(&slow_logs.base_url, 700)),
            Some(profile_config(&slow_profiles.base_url, 700)),
            "unavailable",
        ),
        ("absent", None, None, "not_configured"),
    ];
    for (label, logs, profiles, expected) in cases {
        let app = app_with(logs, profiles, AnonymousAccess::Staff).await;
        let started = Instant::now();
        let response = app.get(&format!("/api/v1/jobs/{job_id}/logs?cluster=lab")).await;
        assert_eq!(response.status(), 200, "{label} logs");
        let answer: JobLogs = response.json().await.expect("logs");
        assert_eq!(answer.status.as_str(), expected, "{label} logs: {:?}", answer.message);
        assert!(answer.message.is_some(), "{label} logs say why");
        let response = app.get(&format!("/api/v1/jobs/{job_id}/profile?cluster=lab")).await;
        assert_eq!(response.status(), 200, "{label} profile");
        let answer: JobProfile = response.json().await.expect("profile");
        assert_eq!(answer.status.as_str(), expected, "{label} profile: {:?}", answer.message);
        assert!(started.elapsed() < Duration::from_secs(4), "{label}: both answered in {:?}", started.elapsed());
        let page = app.get(&format!("/jobs/{job_id}?cluster=lab")).await;
        assert_eq!(page.status(), 200, "{label}: the page still renders");
        let page = page.text().await.expect("page");
        assert!(page.contains("data-testid=\"job-facts\""), "{label}: the rest of the page is there");
        assert!(page.contains(&format!("data-testid=\"logs-section\" data-status=\"{expected}\"")), "{label}");
        assert!(page.contains(&format!("data-testid=\"profile-section\" data-status=\"{expected}\"")), "{label}");
    }
}

/// A recorded `format=json` answer of Pyroscope's render API: total 988 = runtime.main 988 →
/// (main.fastFunction 214 → main.work 214), (main.main 3, self 2 → main.fastFunction 1, self 1),
/// (main.slowFunction 771 → main.work 771).
fn recorded_profile() -> serde_json::Value {
    json!({
        "version": 1,
        "flamebearer": {
            "names": ["total", "runtime.main", "main.slowFunction", "main.work", "main.main", "main.fastFunction"],
            "levels": [
                [0, 988, 0, 0],
                [0, 988, 0, 1],
                [0, 214, 0, 5, 0, 3, 2, 4, 0, 771, 0, 2],
                [0, 214, 214, 3, 2, 1, 1, 5, 0, 771, 771, 3]
            ],
            "numTicks": 988,
            "maxSelf": 771
        },
        "metadata": {"format": "single", "sampleRate": 1000000000, "spyName": "ebpfspy", "units": "nanoseconds", "name": "process_cpu"},
        "timeline": {"startTime": 1764576000, "samples": [988], "durationDelta": 10}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn profile_of_a_job_is_its_cgroup_on_its_nodes_with_top_functions() {
    let _db = database_shared().await;
    let job_id = two_node_job().await;
    let plain = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let detail = detail(&plain, job_id).await;
    let nodes = nodes_of(&detail);
    let (start, end) = window(&detail);
    let stand_in = standins::pyroscope(&recorded_profile(), Duration::ZERO).await;
    let app = app_with(None, Some(profile_config(&stand_in.base_url, 2000)), AnonymousAccess::Staff).await;

    let response = app.get(&format!("/api/v1/jobs/{job_id}/profile?cluster=lab&top=3")).await;
    assert_eq!(response.status(), 200);
    let profile: JobProfile = response.json().await.expect("profile");
    assert_eq!(profile.status, slurmlens_wire::ProfileStatus::Ok, "{:?}", profile.message);
    let selector = format!(
        "process_cpu:cpu:nanoseconds:cpu:nanoseconds{{hostname=~\"{}|{}\",cgroup_path=~\".*/job_{job_id}(/.*)?\"}}",
        nodes[0], nodes[1]
    );
    let received = stand_in.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/pyroscope/render");
    let param = |name: &str| received[0].params.get(name).cloned().unwrap_or_default();
    assert_eq!(param("query"), selector, "the job's cgroup on its nodes only");
    assert_eq!((param("from"), param("until")), (start.timestamp().to_string(), end.timestamp().to_string()));
    assert_eq!((param("format"), param("max-nodes")), ("json".to_string(), "1024".to_string()));
    assert_eq!(profile.query.as_deref(), Some(selector.as_str()));
    assert_eq!(profile.total, 988);
    assert_eq!(profile.units.as_deref(), Some("nanoseconds"));
    // Hand-computed: main.work is 214 + 771 = 985 of 988 by self; runtime.main holds everything.
    let by_self: Vec<(&str, u64)> = profile.top_self.iter().map(|f| (f.name.as_str(), f.self_value)).collect();
    assert_eq!(by_self, [("main.work", 985), ("main.main", 2), ("main.fastFunction", 1)]);
    assert!((profile.top_self[0].self_share - 985.0 / 988.0).abs() < 1e-9);
    let by_total: Vec<(&str, u64)> = profile.top_total.iter().map(|f| (f.name.as_str(), f.total_value)).collect();
    assert_eq!(by_total, [("runtime.main", 988), ("main.work", 985), ("main.slowFunction", 771)]);
    assert!((profile.top_total[0].total_share - 1.0).abs() < 1e-9);
    let fast =
        profile.flame.iter().filter(|bar| bar.name == "main.fastFunction").map(|bar| (bar.level, bar.start, bar.value));
    assert_eq!(fast.collect::<Vec<_>>(), [(2, 0, 214), (3, 216, 1)], "delta-encoded offsets decoded");

    // Another profile type from the allowlist and one node.
    stand_in.clear();
    let path = format!("/api/v1/jobs/{job_id}/profile?cluster=lab&profile_type=alloc_space&node={}", nodes[1]);
    assert_eq!(app.get(&path).await.status(), 200);
    let sent = stand_in.received()[0].params.get("query").cloned().unwrap_or_default();
    assert_eq!(
        sent,
        format!(
            "memory:alloc_space:bytes:space:bytes{{hostname=~\"{}\",cgroup_path=~\".*/job_{job_id}(/.*)?\"}}",
            nodes[1]
        )
    );

    let page = app.get(&format!("/jobs/{job_id}?cluster=lab")).await.text().await.expect("page");
    assert_eq!(page.matches("data-testid=\"profile-top\"").count(), 3);
    assert!(page.contains("data-flame-bar"), "the icicle graph is drawn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cgroup_named_by_sluid_in_the_plugins_record_is_matched_too() {
    let _db = database_shared().await;
    let job_id = two_node_job().await;
    let plain = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let job = detail(&plain, job_id).await;
    let nodes = nodes_of(&job);
    // Slurm ≥ 26.05 names the job's cgroup by SLUID; the plugin recorded that path with the GPUs.
    let database = crate::support::fresh_database("signals_sluid").await;
    let store = slurmlens::store::Store::new(&database, Duration::from_secs(5)).expect("store");
    let sluid = "s5K1KKYAYG5D00";
    // Recorded at the job's start: records are read within the job's run.
    let now = job.job.start.expect("started");
    let record = slurmlens::domain::gpu::GpuAllocation {
        job_id,
        step: "job".into(),
        gpu: slurmlens::domain::gpu::GpuRef { node: nodes[0].clone(), index: 0 },
        uuid: None,
        cgroup_path: Some(format!("/sys/fs/cgroup/system.slice/{}_slurmstepd.scope/{sluid}", nodes[0])),
        first_seen: now,
        last_seen: now,
        ended_at: None,
    };
    store.upsert_gpu_allocations(&"lab".parse().expect("cluster"), &[record]).await.expect("record");
    let stand_in = standins::pyroscope(&recorded_profile(), Duration::ZERO).await;
    let config = Config {
        pyroscope: Some(profile_config(&stand_in.base_url, 2000)),
        database: Some(slurmlens::config::DatabaseConfig { url: database }),
        ..test_config(AnonymousAccess::Staff)
    };
    let app = spawn_app(config).await;
    assert_eq!(app.get(&format!("/api/v1/jobs/{job_id}/profile?cluster=lab")).await.status(), 200);
    let sent = stand_in.received()[0].params.get("query").cloned().unwrap_or_default();
    assert!(sent.ends_with(&format!(r#"cgroup_path=~".*/(job_{job_id}|{sluid})(/.*)?"}}"#)), "{sent}");
}
