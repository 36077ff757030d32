//! Bad input gets a 400 naming the parameter; unknown jobs 404; a stopped MariaDB 503, then recovery.

use slurmlens::config::AnonymousAccess;
use slurmlens_wire::ErrorEnvelope;

use crate::support::{database_exclusive, database_shared, lab, mix_job, repo_root, spawn_app, test_config};

async fn expect_error(app: &crate::support::TestApp, path: &str, status: u16, code: &str, parameter: Option<&str>) {
    let response = app.get(path).await;
    assert_eq!(response.status().as_u16(), status, "{path}");
    let envelope: ErrorEnvelope = response.json().await.unwrap_or_else(|e| panic!("{path}: not an envelope: {e}"));
    assert_eq!(envelope.error.code, code, "{path}");
    assert_eq!(envelope.error.parameter.as_deref(), parameter, "{path}: {}", envelope.error.message);
    assert!(!envelope.error.message.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_a_400_naming_the_parameter() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    expect_error(&app, "/api/v1/jobs?start=yesterday", 400, "invalid_parameter", Some("start")).await;
    expect_error(&app, "/api/v1/jobs?end=2026-13-01T00:00:00Z", 400, "invalid_parameter", Some("end")).await;
    expect_error(&app, "/api/v1/jobs?state=FINISHED", 400, "invalid_parameter", Some("state")).await;
    expect_error(&app, "/api/v1/jobs?limit=100000", 400, "invalid_parameter", Some("limit")).await;
    expect_error(&app, "/api/v1/jobs?limit=0", 400, "invalid_parameter", Some("limit")).await;
    expect_error(&app, "/api/v1/jobs?min_gpus=-1", 400, "invalid_parameter", Some("min_gpus")).await;
    expect_error(&app, "/api/v1/jobs?cursor=abc", 400, "invalid_parameter", Some("cursor")).await;
    expect_error(&app, "/api/v1/jobs?cluster=nope", 400, "invalid_parameter", Some("cluster")).await;
    expect_error(&app, "/api/v1/jobs?usr=alice", 400, "invalid_parameter", Some("usr")).await;
    expect_error(
        &app,
        "/api/v1/jobs?start=2026-11-02T00:00:00Z&end=2026-11-01T00:00:00Z",
        400,
        "invalid_parameter",
        Some("start"),
    )
    .await;
    expect_error(&app, "/api/v1/jobs/-5", 400, "invalid_parameter", Some("job_id")).await;
    expect_error(&app, "/api/v1/jobs/12x", 400, "invalid_parameter", Some("job_id")).await;
    expect_error(&app, "/api/v1/jobs/99999999?cluster=lab", 404, "not_found", None).await;
    expect_error(&app, "/api/v1/no_such_thing", 404, "not_found", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_id_without_a_cluster_is_found_where_unambiguous_and_another_clusters_gets_a_hint() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    // Old report links name no cluster; the server serves `lab` and `sakura`, whose ids do not overlap.
    let id = &mix_job("exit1").job_id;
    let response = app.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(response.status(), 200, "an unambiguous id is found without a cluster");
    let job: slurmlens_wire::JobDetail = response.json().await.expect("job");
    assert_eq!(job.job.cluster, "lab");
    let response = app.get(&format!("/api/v1/jobs/{id}?cluster=sakura")).await;
    assert_eq!(response.status(), 404);
    let envelope: ErrorEnvelope = response.json().await.expect("envelope");
    assert!(envelope.error.message.ends_with("lab has one: add ?cluster=lab"), "{}", envelope.error.message);
}

fn lab_sh(action: &str) {
    let status = lab()
        .command("bash")
        .arg(repo_root().join("lab/lab.sh"))
        .arg(action)
        .status()
        .unwrap_or_else(|e| panic!("lab.sh {action}: {e}"));
    assert!(status.success(), "lab.sh {action} failed");
}

/// Restarts MariaDB even if an assertion fails while it is down.
struct RestartOnDrop;

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        lab_sh("mysql-start");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stopped_mariadb_is_a_503_and_the_server_recovers() {
    let _exclusive = database_exclusive().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    assert_eq!(app.get("/api/v1/jobs?cluster=lab").await.status(), 200, "healthy before the outage");

    lab_sh("mysql-stop");
    let restart = RestartOnDrop;
    let response = app.get("/api/v1/jobs?cluster=lab").await;
    assert_eq!(response.status(), 503);
    let envelope: ErrorEnvelope = response.json().await.expect("envelope");
    assert_eq!(envelope.error.code, "source_unavailable");
    assert!(envelope.error.message.contains("slurmdbd"), "{}", envelope.error.message);
    assert_eq!(app.get("/api/v1/health").await.status(), 503);
    assert_eq!(app.get("/api/v1/jobs/1?cluster=lab").await.status(), 503);
    drop(restart);

    // The same server, not restarted: the first request after MariaDB answers again succeeds.
    assert_eq!(app.get("/api/v1/jobs?cluster=lab").await.status(), 200, "recovered without a restart");
    assert_eq!(app.get("/api/v1/health").await.status(), 200);
}
