//! The lab's real VictoriaLogs, fed by rsyslog with the lab's node logs (`lab/vlogs.sh`): real jobs of
//! the lab (an OOM-killed job, a job whose steps a signal killed) show their real kernel and slurmstepd
//! lines in `GET /api/v1/jobs/{id}/logs` and on the page. Also the helper that writes recorded lines
//! into VictoriaLogs for tests that need lines the lab cannot make (XIDs, NCCL errors).

use std::time::{Duration, Instant};

use slurmlens::config::{AnonymousAccess, Config, VictoriaLogsConfig};
use slurmlens_wire::{ImportantLogLine, JobDetail, JobLogs};

use crate::support::{TestApp, database_shared, lab, slurm, spawn_app, test_config};

/// The lab's VictoriaLogs (`lab.sh up` starts it).
pub fn url() -> &'static str {
    lab().var("LAB_VLOGS_URL")
}

/// The server's logs section pointed at the lab's VictoriaLogs, nodes named by `node_field`.
pub fn config(node_field: &str) -> VictoriaLogsConfig {
    VictoriaLogsConfig {
        url: url().into(),
        timeout_ms: 5000,
        node_field: node_field.parse().expect("a field name"),
        filter: None,
        max_lines: 500,
    }
}

/// A mark no other run or test shares, for the `run` field of recorded lines.
pub fn run_mark(test: &str) -> String {
    let nanos = std::time::SystemTime::UNIX_EPOCH.elapsed().map(|elapsed| elapsed.as_nanos()).unwrap_or(0);
    format!("{test}-{}-{nanos}", std::process::id())
}

/// Writes `lines` (JSON objects with `_time`, `_msg` and fields, each with the same `run`) into the lab's
/// VictoriaLogs as a shipper does (`/insert/jsonline`) and waits until all are searchable.
pub async fn ingest(lines: &[serde_json::Value]) {
    let run = lines[0]["run"].as_str().expect("recorded lines carry `run`");
    assert!(lines.iter().all(|line| line["run"] == run), "one run per call");
    let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/insert/jsonline", url()))
        .query(&[("_stream_fields", "host,app"), ("_time_field", "_time"), ("_msg_field", "_msg")])
        .body(body)
        .send()
        .await
        .expect("VictoriaLogs answers");
    assert!(response.status().is_success(), "ingest: HTTP {}", response.status());
    // Moves the lines from memory to searchable parts now instead of within a second.
    client.get(format!("{}/internal/force_flush", url())).send().await.expect("force_flush");
    let query = format!("run:={} | stats count() as n", slurmlens::domain::logsql::quote(run));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer: serde_json::Value = client
            .get(format!("{}/select/logsql/query", url()))
            .query(&[("query", query.as_str())])
            .send()
            .await
            .expect("VictoriaLogs answers")
            .json()
            .await
            .unwrap_or_default();
        if answer["n"].as_str() == Some(lines.len().to_string().as_str()) {
            return;
        }
        assert!(Instant::now() < deadline, "{} lines of run {run} not searchable after 30 s: {answer}", lines.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Submits `wrap` as alice; the job id.
fn submit(name: &str, extra: &[&str], wrap: &str) -> u32 {
    let mut args = vec!["--parsable", "-J", name, "--uid=alice", "--gid=alice", "-A", "ml", "-o", "/dev/null"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--wrap", wrap]);
    let out = slurm("sbatch", &args);
    out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id")
}

/// Waits until slurmdbd has the job's end; its detail.
async fn ended(app: &TestApp, job_id: u32) -> JobDetail {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        // slurmdbd learns of a job a moment after sbatch: a 404 until then.
        let response = app.get_as("root", &format!("/api/v1/jobs/{job_id}?cluster=lab")).await;
        if response.status() == 200 {
            let detail: JobDetail = response.json().await.expect("job JSON");
            if detail.job.end.is_some() {
                return detail;
            }
        }
        assert!(Instant::now() < deadline, "job {job_id} did not end in slurmdbd within 3 minutes");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Reads the job's logs as `user` until every one of `wanted` (a kind and a piece of the message) is
/// among the important lines (rsyslog and VictoriaLogs take a second or two); the last answer.
async fn important_lines(app: &TestApp, user: &str, job_id: u32, wanted: &[(&str, String)]) -> JobLogs {
    let found = |lines: &[ImportantLogLine], (kind, text): &(&str, String)| {
        lines.iter().any(|line| line.kind.as_str() == *kind && line.message.contains(text.as_str()))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = app.get_as(user, &format!("/api/v1/jobs/{job_id}/logs?cluster=lab")).await;
        assert_eq!(response.status(), 200, "logs of job {job_id} as {user}");
        let logs: JobLogs = response.json().await.expect("logs");
        assert_eq!(logs.status, slurmlens_wire::LogsStatus::Ok, "{:?}", logs.message);
        if wanted.iter().all(|want| found(&logs.important, want)) {
            return logs;
        }
        assert!(
            Instant::now() < deadline,
            "job {job_id} as {user}: not all of {wanted:?} among the important lines after 60 s: {:#?}",
            logs.important
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn lab_app_config() -> Config {
    Config { victorialogs: Some(config("hostname")), ..test_config(AnonymousAccess::Nobody) }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oom_killed_jobs_logs_are_its_real_kernel_and_slurmstepd_lines() {
    let _db = database_shared().await;
    let job_id = submit("vlogs-oom", &["--mem=100"], "head -c 1G /dev/zero | tail >/dev/null");
    let app = spawn_app(lab_app_config()).await;
    let detail = ended(&app, job_id).await;
    assert_eq!(detail.job.state, "OUT_OF_MEMORY", "the lab runs with cgroups (lab/lab.sh use_cgroups)");
    let node = detail.nodes[0].node.clone();
    // The kernel's OOM report (its node read from the cgroup /slurm_<node>/…) and slurmstepd's note.
    let wanted = [
        ("oom_kill", format!("oom_memcg=/slurm_{node}/uid_1001/job_{job_id}")),
        ("oom_kill", "kernel: Memory cgroup out of memory: Killed process".to_string()),
        (
            "oom_kill",
            format!("slurmstepd: [{job_id}.batch] error: Detected 1 oom-kill event(s) in StepId={job_id}.batch"),
        ),
    ];
    let logs = important_lines(&app, "root", job_id, &wanted).await;
    for line in logs.important.iter().filter(|line| line.kind.as_str() == "oom_kill") {
        assert_eq!(line.node.as_deref(), Some(node.as_str()), "{line:?}");
        let (start, end) = (detail.job.start.expect("started"), detail.job.end.expect("ended"));
        assert!(start - chrono::Duration::seconds(60) <= line.time && line.time <= end + chrono::Duration::seconds(60));
    }
    assert!(
        logs.lines.iter().all(|line| line.node.as_deref() == Some(node.as_str())),
        "only {node}'s lines: {:?}",
        logs.lines
    );
    // The job's user, not staff, reads the same lines: each names the job, its cgroup or alice's uid.
    important_lines(&app, "alice", job_id, &wanted).await;
    // And another tenant reads nothing of it.
    assert_eq!(app.get_as("bob", &format!("/api/v1/jobs/{job_id}/logs?cluster=lab")).await.status(), 404);

    let page = app.get_as("root", &format!("/jobs/{job_id}?cluster=lab")).await.text().await.expect("page");
    assert!(page.contains("data-testid=\"logs-section\" data-status=\"ok\""), "{page:.2000}");
    assert!(page.contains("Detected 1 oom-kill event(s)"), "the page shows slurmstepd's line");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_steps_a_signal_killed_shows_slurmstepds_real_lines() {
    let _db = database_shared().await;
    let job_id = submit("vlogs-signal", &[], "srun sh -c 'kill -KILL $$'; srun sh -c 'kill -SEGV $$'; exit 0");
    let app = spawn_app(lab_app_config()).await;
    let detail = ended(&app, job_id).await;
    let node = detail.nodes[0].node.clone();
    let wanted = [
        ("slurm", format!("slurmstepd: [{job_id}.0] get_exit_code task 0 died by signal: 9")),
        ("slurm", format!("slurmstepd: [{job_id}.1] get_exit_code task 0 died by signal: 11")),
    ];
    let logs = important_lines(&app, "alice", job_id, &wanted).await;
    for line in logs.important.iter().filter(|line| line.message.contains("died by signal")) {
        assert_eq!(line.node.as_deref(), Some(node.as_str()), "{line:?}");
    }
    // slurmd's own line about the job, from the same node's log.
    assert!(
        logs.lines.iter().any(|line| line.message == format!("slurmd: Launching batch job {job_id} for UID 1001")),
        "{:?}",
        logs.lines
    );
}
