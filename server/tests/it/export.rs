//! `GET /api/v1/jobs/export` (issue #16): a whole window streamed from one statement holds exactly
//! the listing's jobs, page after page, for staff and for a user; CSV has one column per field; bad
//! parameters and the window limit are the listing's 400s; a month streams whole under a statement
//! limit far shorter than its reading; an export holds its heavy-request place until its body ends.

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use slurmlens::config::{AnonymousAccess, StatementTimeout};

use slurmlens_wire::Job;

use crate::jobs_listing::all_pages;
use crate::support::{TestApp, database_shared, lab, spawn_app, test_config};

fn rfc3339(at: chrono::DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `start=…&end=…`: `hours` hours of sakura's history ending `hours_ago` hours ago.
fn span(hours_ago: i64, hours: i64) -> String {
    let end = Utc::now() - chrono::Duration::hours(hours_ago);
    format!("start={}&end={}", rfc3339(end - chrono::Duration::hours(hours)), rfc3339(end))
}

async fn fetch(app: &TestApp, user: Option<&str>, path: &str) -> reqwest::Response {
    match user {
        Some(user) => app.get_as(user, path).await,
        None => app.get(path).await,
    }
}

/// Every page of the listing for `query`, 500 jobs a page.
async fn listed(app: &TestApp, user: Option<&str>, query: &str) -> Vec<Job> {
    all_pages(app, user, &format!("{query}&limit=500")).await
}

/// The export as NDJSON: its lines, each parsed.
async fn exported(app: &TestApp, user: Option<&str>, query: &str) -> Vec<Job> {
    let response = fetch(app, user, &format!("/api/v1/jobs/export?{query}")).await;
    assert_eq!(response.status(), 200, "{query}");
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let body = response.text().await.expect("the whole body");
    assert!(body.is_empty() || body.ends_with('\n'), "a complete export ends its last line");
    body.lines().map(|line| serde_json::from_str(line).expect("one job per line")).collect()
}

/// A job as two reads agree on it: a running job's elapsed time moves between them.
fn settled(mut job: Job) -> Job {
    if job.end.is_none() {
        job.elapsed.clear();
        job.elapsed_raw = 0;
    }
    job
}

fn ids(jobs: &[Job]) -> Vec<String> {
    jobs.iter().map(|job| job.job_id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_export_holds_the_listing_jobs_page_after_page() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    // A whole day, so that its quiet hours (the demo's submissions follow the working day) never leave
    // it under one chunk, whatever the hour the test runs at.
    let query = format!("cluster=sakura&{}", span(3, 24));
    let (pages, streamed) = (listed(&app, None, &query).await, exported(&app, None, &query).await);
    assert!(pages.len() > 1000, "a day of sakura spans several chunks: {}", pages.len());
    assert_eq!(ids(&streamed), ids(&pages), "the same jobs in the same order");
    for (listed, streamed) in pages.into_iter().zip(streamed) {
        assert_eq!(settled(streamed), settled(listed), "each line is the listing's item");
    }
    // Filters answered after decoding (state, GPUs) and in SQL (partition) give the listing's jobs too.
    let filtered = format!("{query}&state=COMPLETED,FAILED&min_gpus=8&partition=gpu");
    let (pages, streamed) = (listed(&app, None, &filtered).await, exported(&app, None, &filtered).await);
    assert!(!pages.is_empty(), "sakura has finished 8-GPU jobs");
    assert_eq!(ids(&streamed), ids(&pages));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_submitted_at_the_windows_very_start_is_exported_once() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    // The export reads a window's own submissions apart from those before its start (read ahead, at
    // the same time): a window starting at the very second of a job's submission has it once, in the
    // listing's place, and the jobs submitted before that second after it.
    let day = listed(&app, None, &format!("cluster=sakura&{}", span(3, 24))).await;
    let pivot = &day[day.len() / 2];
    let query = format!(
        "cluster=sakura&start={}&end={}",
        rfc3339(pivot.submit),
        rfc3339(Utc::now() - chrono::Duration::hours(3))
    );
    let (pages, streamed) = (listed(&app, None, &query).await, exported(&app, None, &query).await);
    assert_eq!(ids(&streamed), ids(&pages), "the listing's jobs in its order");
    let at_start = streamed.iter().filter(|job| job.job_id == pivot.job_id && job.submit == pivot.submit).count();
    assert_eq!(at_start, 1, "job {} submitted at the window's start, exported once", pivot.job_id);
    assert!(streamed.iter().any(|job| job.submit < pivot.submit), "jobs submitted before the start and still running");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_exports_only_the_jobs_they_may_see() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let query = format!("cluster=sakura&{}", span(3, 24));
    let (pages, streamed) = (listed(&app, Some("u10"), &query).await, exported(&app, Some("u10"), &query).await);
    assert!(!pages.is_empty(), "u10 ran jobs that day");
    assert_eq!(ids(&streamed), ids(&pages), "the user's own listing, whole");
    // u10 coordinates no account: every job is their own.
    assert!(streamed.iter().all(|job| job.user == "u10"), "only u10's jobs");
    let everyone = exported(&app, Some("root"), &query).await;
    let others: Vec<&Job> = everyone.iter().filter(|job| job.user != "u10").collect();
    assert!(!others.is_empty(), "other users ran jobs that day");
    let own = ids(&streamed);
    assert!(others.iter().all(|job| !own.contains(&job.job_id)), "no other user's job");
    let response = app.get(&format!("/api/v1/jobs/export?{query}")).await;
    assert_eq!(response.status(), 401, "no identity, nothing exported");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_csv_export_has_a_header_and_one_row_per_job() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let query = format!("cluster=sakura&{}", span(3, 2));
    let jobs = listed(&app, None, &query).await;
    let response = app.get(&format!("/api/v1/jobs/export?{query}&format=csv")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/csv; charset=utf-8");
    let body = response.text().await.expect("the whole body");
    assert!(body.ends_with("\r\n"), "a complete CSV ends its last record");
    let mut reader = csv::Reader::from_reader(body.as_bytes());
    let header: Vec<String> = reader.headers().expect("a header").iter().map(String::from).collect();
    assert_eq!(header.len(), 39, "{header:?}");
    assert_eq!(header.last().map(String::as_str), Some("tags"), "the job's tags, last");
    assert_eq!(&header[..3], ["job_id", "job_id_raw", "array_job_id"]);
    let rows: Vec<csv::StringRecord> = reader.records().map(|row| row.expect("a CSV row")).collect();
    assert_eq!(rows.len(), jobs.len(), "one row per job");
    for (row, job) in rows.iter().zip(&jobs) {
        let job = serde_json::to_value(job).expect("the job as JSON");
        for (name, cell) in header.iter().zip(row.iter()) {
            let expected = match &job[name.as_str()] {
                Value::Null => String::new(),
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            // A running job's elapsed time moves between the two reads; names may carry the formula guard.
            if job.get("end").is_none() && name.starts_with("elapsed") {
                continue;
            }
            assert_eq!(cell.trim_start_matches('\''), expected, "{name} of {}", job["job_id"]);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_parameters_and_wide_windows_are_the_listing_400s() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let now = Utc::now();
    for (query, parameter) in [
        ("cluster=sakura&format=xlsx", "format"),
        ("cluster=sakura&limit=10", "limit"),
        ("cluster=sakura&cursor=1.2.3", "cursor"),
        ("cluster=sakura&start=yesterday", "start"),
        ("cluster=sakura&state=DONE", "state"),
        ("cluster=sakura&user=u10&user=u11", "user"),
        ("cluster=nowhere", "cluster"),
    ] {
        let response = app.get_as("u10", &format!("/api/v1/jobs/export?{query}")).await;
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.expect("the error envelope");
        assert_eq!(body["error"]["code"], "invalid_parameter", "{query}: {body}");
        assert_eq!(body["error"]["parameter"], parameter, "{query}: {body}");
    }
    // Forty days that end a year before sakura's history begins: wide, and cheap to read.
    let end = now - chrono::Duration::days(400);
    let wide = format!("cluster=sakura&start={}&end={}", rfc3339(end - chrono::Duration::days(40)), rfc3339(end));
    let response = app.get_as("u10", &format!("/api/v1/jobs/export?{wide}")).await;
    assert_eq!(response.status(), 400, "a user may not export more than window_days");
    let body: Value = response.json().await.expect("the error envelope");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("at most 31 days"), "{body}");
    let response = app.get_as("root", &format!("/api/v1/jobs/export?{wide}")).await;
    assert_eq!(response.status(), 200, "staff may export any window");
    assert_eq!(response.text().await.expect("the whole body"), "", "no job ran then");
}

/// A month of sakura (over 200,000 jobs, 130 MB of NDJSON) takes far longer than five seconds to read
/// and send (half a minute in a test build); each batch's statement takes a fraction of that. The
/// export is whole: it is bounded by the window, not by `[slurmdbd] statement_timeout_s`.
#[tokio::test(flavor = "multi_thread")]
async fn a_month_exports_whole_under_a_five_second_statement_limit() {
    let _db = database_shared().await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.slurmdbd.statement_timeout_s = StatementTimeout::try_from(5.0).expect("a valid limit");
    let app = spawn_app(config).await;
    let now = Utc::now().timestamp();
    let query = format!("cluster=sakura&start={}&end={now}", now - 30 * 86_400);
    let response = app.get(&format!("/api/v1/jobs/export?{query}")).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("the whole body, not one cut short");
    assert!(body.ends_with('\n'));
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let (count,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM sakura_job_table WHERE deleted = 0 AND time_submit < ? AND (time_end >= ? OR time_end = 0)",
    )
    .bind(now)
    .bind(now - 30 * 86_400)
    .fetch_one(&pool)
    .await
    .expect("counting the window");
    assert!(count > 100_000, "a month of sakura: {count}");
    assert_eq!(body.lines().count() as i64, count, "every job of the window");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_export_holds_its_heavy_place_until_its_body_ends() {
    let _db = database_shared().await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.limits.heavy_per_identity = 1.try_into().expect("non-zero");
    let app = spawn_app(config).await;
    let now = Utc::now().timestamp();
    let month = format!("cluster=sakura&start={}&end={now}", now - 30 * 86_400);
    let mut response = app.get_as("root", &format!("/api/v1/jobs/export?{month}")).await;
    assert_eq!(response.status(), 200);
    assert!(response.chunk().await.expect("a first piece").is_some());
    let refused = app.get_as("root", "/api/v1/jobs?cluster=sakura&limit=1").await;
    assert_eq!(refused.status(), 429, "the export, still being read, is root's one heavy request");
    drop(response);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = app.get_as("root", "/api/v1/jobs?cluster=sakura&limit=1").await.status();
        if status == 200 {
            break;
        }
        assert_eq!(status, 429);
        assert!(Instant::now() < deadline, "the place is freed once the export's body is dropped");
        tokio::task::yield_now().await;
    }
}
