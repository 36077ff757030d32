//! What one user can cost slurmdbd's database and the server (issue #15, "Overload" and "Bad input";
//! H3, M3 and L6 of the security review): statements bounded by MariaDB, windows capped for viewers
//! who are not staff, a user's listing served by slurmdbd's per-user index, filters slurmdbd cannot
//! hold, heavy requests bounded per identity, and connections that stall.

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use slurmlens::config::{AnonymousAccess, Config, StatementTimeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{TestApp, database_shared, lab, spawn_app, test_config};

fn rfc3339(at: chrono::DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `start=…&end=…` for the `days` before now.
fn last_days(days: i64) -> String {
    let now = Utc::now();
    format!("start={}&end={}", rfc3339(now - chrono::Duration::days(days)), rfc3339(now))
}

async fn envelope(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.expect("an error envelope"))
}

/// A sakura listing whose statements are stopped by MariaDB at `statement_timeout_s` answers 504
/// `query_timeout` asking for a narrower window, and leaves no statement running behind it.
#[tokio::test(flavor = "multi_thread")]
async fn a_statement_past_its_time_limit_is_a_clear_error_and_ends_there() {
    let _db = database_shared().await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.slurmdbd.statement_timeout_s = StatementTimeout::try_from(0.001).expect("a valid limit");
    let app = spawn_app(config).await;
    // Eleven partitions give the statement a text no other test's has (eleven FIND_IN_SET terms); the
    // node no job ran on makes the listing read the whole window, batch after batch.
    let partitions = std::iter::once("gpu".to_string())
        .chain((1..=10).map(|n| format!("overload-probe-{n}")))
        .collect::<Vec<_>>()
        .join(",");
    let path =
        format!("/api/v1/jobs?cluster=sakura&{}&node=no-such-node&limit=5000&partition={partitions}", last_days(30));
    // MariaDB stops a statement from its timer thread; on a saturated machine a batch may end before that
    // thread runs. The listing is asked up to three times: one that always completes is the failure.
    let mut answer = envelope(app.get(&path).await).await;
    for _ in 0..2 {
        if answer.0 == 504 {
            break;
        }
        answer = envelope(app.get(&path).await).await;
    }
    let (status, body) = answer;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "query_timeout", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("narrow the window"), "{message}");
    assert!(!message.contains("1969") && !message.contains("max_statement_time"), "no driver detail: {message}");

    // MariaDB shows a user's own statements without the PROCESS privilege.
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let ours = "SELECT COUNT(*) FROM information_schema.processlist WHERE COMMAND <> 'Sleep' \
                AND INFO LIKE '%sakura_job_table%' \
                AND (LENGTH(INFO) - LENGTH(REPLACE(INFO, 'FIND_IN_SET(?', ''))) = 11 * LENGTH('FIND_IN_SET(?')";
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let running: i64 = sqlx::query_scalar(ours).fetch_one(&pool).await.expect("reading the processlist");
        if running == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{running} statement(s) of the refused listing still run in MariaDB");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pool.close().await;
}

/// A viewer who is not staff lists at most `[limits] window_days` (31 by default): a wider window, or
/// `start=0`, is a 400 that says the limit; staff are not capped.
#[tokio::test(flavor = "multi_thread")]
async fn a_viewer_who_is_not_staff_lists_at_most_the_window_limit() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    for path in [
        format!("/api/v1/jobs?cluster=sakura&{}&limit=5", last_days(40)),
        "/api/v1/jobs?cluster=sakura&start=0&limit=5".to_string(),
        "/api/v1/node_events?cluster=sakura&start=0".to_string(),
        format!("/web/v1/jobs.csv?cluster=sakura&{}", last_days(40)),
    ] {
        let response = app.get_as("u22", &path).await;
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        assert_eq!(status, 400, "{path}: {text}");
        assert!(text.contains("at most 31 days"), "{path}: {text}");
    }
    let within = app.get_as("u22", &format!("/api/v1/jobs?cluster=sakura&{}&limit=5", last_days(30))).await;
    assert_eq!(within.status(), 200, "a 30-day window is within the limit");
    for path in ["/api/v1/jobs?cluster=sakura&start=0&limit=5", "/api/v1/node_events?cluster=sakura&start=0"] {
        let staff = app.get_as("root", path).await;
        assert_eq!(staff.status(), 200, "staff are not capped: {path}");
    }
}

/// Rows each table named `table` read in an `ANALYZE FORMAT=JSON` plan (`r_loops × r_rows`).
fn rows_read(plan: &Value, table: &str) -> f64 {
    match plan {
        Value::Object(fields) => {
            let own = if fields.get("table_name").and_then(Value::as_str) == Some(table) {
                let number = |name: &str| fields.get(name).and_then(Value::as_f64).unwrap_or(0.0);
                number("r_loops").max(1.0) * number("r_rows")
            } else {
                0.0
            };
            own + fields.values().map(|value| rows_read(value, table)).sum::<f64>()
        }
        Value::Array(items) => items.iter().map(|item| rows_read(item, table)).sum(),
        _ => 0.0,
    }
}

/// A plain user's listing is served by slurmdbd's per-user indexes: over 30 days, a sakura user with
/// few jobs has their first page read from a small fraction of the window's rows (it used to read
/// the whole window, per page, through the forced `archive_purge`).
#[tokio::test(flavor = "multi_thread")]
async fn a_users_listing_reads_their_jobs_not_the_whole_window() {
    let _db = database_shared().await;
    let config = test_config(AnonymousAccess::Nobody);
    let app = slurmlens::serve::app(&config).expect("the application");
    let reader = app.cluster(Some("sakura")).expect("the sakura reader");
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let (end, start) = (Utc::now(), Utc::now() - chrono::Duration::days(30));
    let window = slurmlens::domain::job::TimeWindow::new(start, end).expect("a window");
    // The sakura user with the fewest jobs (the demo's are never fewer than a few hundred).
    let (user, own_jobs): (String, i64) = sqlx::query_as(
        "SELECT a.user, COUNT(*) FROM sakura_job_table j JOIN sakura_assoc_table a ON a.id_assoc = j.id_assoc \
         WHERE j.deleted = 0 AND j.time_submit < ? AND (j.time_end >= ? OR j.time_end = 0) AND a.user <> '' \
         GROUP BY a.user ORDER BY COUNT(*) LIMIT 1",
    )
    .bind(end.timestamp())
    .bind(start.timestamp())
    .fetch_one(&pool)
    .await
    .expect("sakura's users");
    let in_window: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sakura_job_table WHERE deleted = 0 AND time_submit < ? AND (time_end >= ? OR time_end = 0)",
    )
    .bind(end.timestamp())
    .bind(start.timestamp())
    .fetch_one(&pool)
    .await
    .expect("counting the window");
    pool.close().await;
    assert!(in_window > 20 * own_jobs, "the demo's sakura history is seeded ({in_window} jobs, {user} has {own_jobs})");

    let scope = reader.scope_for_user(&user).await.expect("the user's scope");
    let filter = slurmlens::domain::job::JobFilter::default();
    let plans = reader.analyze_listing(&scope, window, &filter, 500).await.expect("ANALYZE");
    assert!(!plans.is_empty(), "a user's listing sends a statement");
    let plan = Value::Array(plans);
    let read = rows_read(&plan, "j");
    println!("{user}: {read} of the window's {in_window} job rows read for a first page ({own_jobs} jobs of theirs)");
    assert!(read > 0.0, "the plan names the job table as `j`: {plan}");
    assert!(
        read <= (in_window as f64) / 20.0,
        "{user}'s first page read {read} job rows, more than a twentieth of the window's {in_window}: {plan}"
    );
}

/// slurmdbd's tables are latin1: a filter value they cannot hold (Japanese, an emoji) matches no job,
/// and the answer is an empty list, not a 500 "Illegal mix of collations".
#[tokio::test(flavor = "multi_thread")]
async fn filters_slurmdbd_cannot_hold_match_nothing_instead_of_failing() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    for value in ["山田", "🚀"] {
        let encoded: String = url_escape(value);
        for filter in ["user", "account", "partition", "node"] {
            for path in [
                format!("/api/v1/jobs?cluster=sakura&{filter}={encoded}"),
                format!("/api/v1/jobs?cluster=sakura&{filter}=alice,{encoded}"),
            ] {
                let response = app.get(&path).await;
                assert_eq!(response.status(), 200, "{path}");
                let page: Value = response.json().await.expect("a page");
                let users: Vec<&str> =
                    page["items"].as_array().expect("items").iter().filter_map(|job| job["user"].as_str()).collect();
                // With `alice` beside it, the list still means alice's jobs (for `user`).
                assert!(
                    users.is_empty()
                        || (filter == "user" && path.contains("alice") && users.iter().all(|u| *u == "alice")),
                    "{path}: {users:?}"
                );
            }
        }
        let events = app.get(&format!("/api/v1/node_events?cluster=sakura&node={encoded}")).await;
        assert_eq!(events.status(), 200, "node events of {value}");
        assert_eq!(events.json::<Value>().await.expect("events"), serde_json::json!([]));
        let csv = app.get(&format!("/web/v1/jobs.csv?cluster=sakura&user={encoded}")).await;
        assert_eq!(csv.status(), 200, "the CSV export of {value}");
        // The search box takes printable ASCII only (a job id, user or account is ASCII): a clear 400.
        let (status, body) = envelope(app.get(&format!("/api/v1/jobs?cluster=sakura&q={encoded}")).await).await;
        assert_eq!((status, body["error"]["parameter"].as_str()), (400, Some("q")), "{body}");
    }
}

/// Percent-encodes `text` for a query string.
fn url_escape(text: &str) -> String {
    text.bytes().map(|byte| format!("%{byte:02X}")).collect()
}

/// One user firing many heavy requests at once gets 429s with Retry-After past
/// `[limits] heavy_per_identity`, while another user at the same time is served.
#[tokio::test(flavor = "multi_thread")]
async fn one_user_over_the_heavy_limit_is_told_to_wait_while_another_is_served() {
    let _db = database_shared().await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.limits.heavy_per_identity = 2.try_into().expect("non-zero");
    let app = std::sync::Arc::new(spawn_app(config).await);
    // A heavy user's whole window, read batch after batch (no job ran on that node).
    let heavy = format!("/api/v1/jobs?cluster=sakura&{}&node=no-such-node&limit=5000", last_days(30));
    let burst: Vec<_> = (0..12)
        .map(|_| {
            let (app, heavy) = (app.clone(), heavy.clone());
            tokio::spawn(async move {
                let response = app.get_as("u10", &heavy).await;
                let retry_after = response.headers().get("retry-after").cloned();
                let status = response.status().as_u16();
                (status, retry_after, response.text().await.unwrap_or_default())
            })
        })
        .collect();
    let other = app.get_as("u22", &format!("/api/v1/jobs?cluster=sakura&{}&limit=50", last_days(1))).await;
    let other_status = other.status().as_u16();
    let mut answers = Vec::new();
    for request in burst {
        answers.push(request.await.expect("the request task"));
    }
    assert_eq!(other_status, 200, "another user is served during the burst");
    let refused: Vec<_> = answers.iter().filter(|(status, _, _)| *status == 429).collect();
    assert!(refused.len() >= 6, "at most 2 of 12 at once: {:?}", answers.iter().map(|a| a.0).collect::<Vec<_>>());
    for (_, retry_after, body) in &refused {
        assert!(retry_after.is_some(), "429 with Retry-After");
        let body: Value = serde_json::from_str(body).expect("the error envelope");
        assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    }
    assert!(answers.iter().any(|(status, _, _)| *status == 200), "the first of the burst are served");
    assert!(answers.iter().all(|(status, _, _)| matches!(status, 200 | 429)), "{answers:?}");
}

/// Reads until the peer closes (`Ok(bytes)`), or gives up after `wait` (`Err`).
async fn read_until_closed(stream: &mut TcpStream, wait: Duration) -> Result<Vec<u8>, Vec<u8>> {
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(received),
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
            Err(_) => return Err(received),
        }
    }
}

fn address(app: &TestApp) -> String {
    app.base_url.trim_start_matches("http://").to_string()
}

/// A client that sends half a request line and then nothing is disconnected after the header-read
/// timeout; past `[http] max_connections` a new connection is answered 503 and closed.
#[tokio::test(flavor = "multi_thread")]
async fn stalled_connections_are_closed_and_the_listener_caps_open_connections() {
    let mut config: Config = test_config(AnonymousAccess::Staff);
    config.http.header_read_timeout_ms = 500.try_into().expect("non-zero");
    let app = spawn_app(config).await;
    let mut stalled = TcpStream::connect(address(&app)).await.expect("connecting");
    stalled.write_all(b"GET /api/v1/heal").await.expect("half a request line");
    let started = Instant::now();
    let closed = read_until_closed(&mut stalled, Duration::from_secs(15)).await;
    assert!(closed.is_ok(), "a connection stalled mid request line is still open after 15 s");
    assert!(started.elapsed() >= Duration::from_millis(400), "closed by the timeout, not at once");

    let mut config: Config = test_config(AnonymousAccess::Staff);
    config.http.max_connections = 2.try_into().expect("non-zero");
    let app = spawn_app(config).await;
    let first = TcpStream::connect(address(&app)).await.expect("connecting");
    let _second = TcpStream::connect(address(&app)).await.expect("connecting");
    // The listener takes connections in order: once the third is refused, the first two are open.
    let mut third = TcpStream::connect(address(&app)).await.expect("the kernel accepts it");
    let answer = read_until_closed(&mut third, Duration::from_secs(10)).await;
    let answer = String::from_utf8_lossy(answer.as_ref().unwrap_or_else(|partial| partial)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 503"), "past the cap: {answer:?}");
    assert!(answer.contains("\"overloaded\""), "the error envelope: {answer:?}");
    // A closed connection frees its place.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match app.client.get(format!("{}/api/v1/nodes?cluster=sakura", app.base_url)).send().await {
            Ok(response) if response.status() == 200 => break,
            other => assert!(Instant::now() < deadline, "no place freed: {:?}", other.map(|r| r.status())),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
