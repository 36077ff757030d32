//! Showback (`/api/v1/usage`) and statistics (`/api/v1/stats`) on the real lab: GPU-hours per account
//! and per user agree with `sreport` over hours slurmdbd itself rolled up (six whole hours of sakura's
//! history, rolled up on request, so the check does not wait for a young lab's first hourly rollup);
//! each viewer gets only their scope; the CSV is the JSON's rows; a bad window is a 400; an archived
//! report's utilisation makes idle GPU-hours.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, TimeZone, Utc};
use slurmlens::config::{AnonymousAccess, DatabaseConfig};
use slurmlens::store::{ReportDigest, Store};
use slurmlens_wire::{JobDetail, UsageReport, UsageStats};

use crate::support::{TestApp, admin, database_shared, fresh_database, lab, slurm, spawn_app, test_config};

/// The server as the tests ask it: nobody anonymous, the proxy's user header believed from loopback.
async fn usage_app() -> TestApp {
    spawn_app(test_config(AnonymousAccess::Nobody)).await
}

async fn usage_as(app: &TestApp, user: &str, query: &str) -> UsageReport {
    let response = app.get_as(user, &format!("/api/v1/usage?{query}")).await;
    assert_eq!(response.status(), 200, "{user}: {query}");
    response.json().await.expect("a usage report")
}

fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Six whole hours of sakura's seeded history, two days back (before anything a test adds at its end),
/// which slurmdbd rolls up now, as its hourly rollup would: `sacctmgr rollup` re-rolls every cluster
/// over exactly those hours and leaves its own schedule (`last_ran`) as it was.
fn rolled_up_hours() -> (DateTime<Utc>, DateTime<Utc>) {
    let two_days_back = (Utc::now() - Duration::days(2)).timestamp();
    let end = Utc.timestamp_opt(two_days_back - two_days_back % 3600, 0).single().expect("a time");
    let start = end - Duration::hours(6);
    let format = |time: DateTime<Utc>| time.format("%Y-%m-%dT%H:%M:%S").to_string();
    slurm("sacctmgr", &["-i", "rollup", &format(start), &format(end)]);
    (start, end)
}

/// `sreport`'s allocated GPU-minutes over `[start, end)`: per account (rolled up) and per user.
fn sreport_minutes(
    cluster: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let format = |time: DateTime<Utc>| time.format("%Y-%m-%dT%H:%M:%S").to_string();
    let (cluster, start, end) =
        (format!("cluster={cluster}"), format!("start={}", format(start)), format!("end={}", format(end)));
    let args =
        ["-P", "-n", "-t", "minutes", "cluster", "AccountUtilizationByUser", &cluster, &start, &end, "-T", "gres/gpu"];
    let out = slurm("sreport", &args);
    let (mut accounts, mut users) = (BTreeMap::new(), BTreeMap::new());
    for line in out.lines().filter(|line| !line.trim().is_empty()) {
        // Cluster|Account|Login|Proper Name|TRES Name|Used
        let fields: Vec<&str> = line.split('|').collect();
        assert!(fields.len() >= 6, "unexpected sreport line `{line}`");
        let minutes: f64 = fields[5].trim().parse().unwrap_or_else(|_| panic!("minutes in `{line}`"));
        let (account, login) = (fields[1].trim(), fields[2].trim());
        if login.is_empty() {
            accounts.insert(account.to_string(), minutes);
        } else {
            *users.entry(login.to_string()).or_insert(0.0) += minutes;
        }
    }
    (accounts, users)
}

#[tokio::test(flavor = "multi_thread")]
async fn gpu_hours_agree_with_sreport_per_account_and_user() {
    let (start, end) = rolled_up_hours();
    let (accounts, users) = sreport_minutes("sakura", start, end);
    let total = accounts.get("root").copied().unwrap_or(0.0);
    assert!(total > 0.0, "no GPU-minutes in sreport for sakura's {start}..{end}: is sakura's history seeded?");
    let app = usage_app().await;
    let window = format!("cluster=sakura&start={}&end={}", rfc3339(start), rfc3339(end));
    let by_account = usage_as(&app, "root", &format!("{window}&by=account")).await;
    let ours: BTreeMap<String, f64> =
        by_account.rows.iter().map(|row| (row.name.clone(), row.gpu_hours * 60.0)).collect();
    // sreport prints whole minutes; ours are exact.
    let close = |a: f64, b: f64| (a - b).abs() <= 1.0;
    assert!(close(by_account.total.gpu_hours * 60.0, total), "total: ours {:?}, sreport {total}", by_account.total);
    for (account, minutes) in accounts.iter().filter(|(account, minutes)| *account != "root" && **minutes > 0.0) {
        let mine = ours.get(account).copied().unwrap_or(0.0);
        assert!(close(mine, *minutes), "account {account}: ours {mine} GPU-minutes, sreport {minutes}");
    }
    for (account, mine) in &ours {
        let theirs = accounts.get(account).copied().unwrap_or(0.0);
        assert!(close(*mine, theirs), "account {account}: ours {mine} GPU-minutes, sreport {theirs}");
    }
    let by_user = usage_as(&app, "root", &format!("{window}&by=user")).await;
    for row in &by_user.rows {
        let theirs = users.get(&row.name).copied().unwrap_or(0.0);
        assert!(
            close(row.gpu_hours * 60.0, theirs),
            "user {}: ours {} GPU-minutes, sreport {theirs}",
            row.name,
            row.gpu_hours * 60.0
        );
    }
    for (user, minutes) in users.iter().filter(|(_, minutes)| **minutes > 0.0) {
        assert!(
            by_user.rows.iter().any(|row| &row.name == user),
            "user {user} ({minutes} GPU-minutes in sreport) missing"
        );
    }
}

/// Submits a short GPU job of one GPU for `user` (their default account). Its id.
fn run_gpu_job(user: &str, seconds: u32) -> u32 {
    let (uid, gid) = (format!("--uid={user}"), format!("--gid={user}"));
    let wrap = format!("sleep {seconds}");
    let args =
        ["--parsable", "-J", "usage-test", &uid, &gid, "--gres=gpu:1", "--time=5", "-o", "/dev/null", "--wrap", &wrap];
    let out = slurm("sbatch", &args);
    out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id")
}

/// The job's page once it has ended, and slurmdbd has its end and its GPU too: showback reads slurmdbd
/// only, and slurmctld's word that a job ended can come before slurmdbd's agent queue delivers it.
/// slurmdbd can also hold a short job's end before its AllocTRES names the GPU (seen here: a usage
/// read right after the end counted the job with no GPU; the record named it a moment later).
async fn wait_ended(app: &TestApp, job_id: u32) -> JobDetail {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd's database");
    loop {
        let recorded: Option<u64> = sqlx::query_scalar(
            "SELECT CAST(time_end AS UNSIGNED) FROM lab_job_table WHERE id_job = ? AND time_start > 0 AND time_end > 0",
        )
        .bind(job_id)
        .fetch_optional(&pool)
        .await
        .expect("reading lab_job_table");
        if recorded.is_some() {
            let response = app.get_as("root", &format!("/api/v1/jobs/{job_id}?cluster=lab")).await;
            if response.status() == 200 {
                let detail: JobDetail = response.json().await.expect("a job");
                if detail.job.end.is_some() && detail.job.alloc_gpus > 0 {
                    pool.close().await;
                    return detail;
                }
            }
        }
        assert!(std::time::Instant::now() < deadline, "job {job_id} did not end in slurmdbd in 3 minutes");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Every record slurmdbd holds of `job_id` (submit, start, end, state, uid, association, deleted,
/// AllocTRES): what a failing assertion names.
async fn records_of(job_id: u32) -> Vec<(u64, u64, u64, u32, u32, u32, i8, String)> {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd's database");
    let rows = sqlx::query_as(
        "SELECT CAST(time_submit AS UNSIGNED), CAST(time_start AS UNSIGNED), CAST(time_end AS UNSIGNED), state, \
         id_user, id_assoc, deleted, tres_alloc FROM lab_job_table WHERE id_job = ?",
    )
    .bind(job_id)
    .fetch_all(&pool)
    .await
    .expect("reading lab_job_table");
    pool.close().await;
    rows
}

/// The lab's users: alice (ml), bob and dave (physics), carol (ml-vision and physics; coordinator of
/// ml, so of ml-vision too), root (staff).
#[tokio::test(flavor = "multi_thread")]
async fn each_viewer_gets_only_their_scope() {
    let app = usage_app().await;
    let jobs = [run_gpu_job("alice", 2), run_gpu_job("dave", 2), run_gpu_job("carol", 2)];
    for job in jobs {
        wait_ended(&app, job).await;
    }
    let window = format!("cluster=lab&start={}", rfc3339(Utc::now() - Duration::hours(2)));
    let names = |report: &UsageReport| report.rows.iter().map(|row| row.name.clone()).collect::<Vec<_>>();

    let staff = usage_as(&app, "root", &format!("{window}&by=user")).await;
    for user in ["alice", "dave", "carol"] {
        assert!(names(&staff).iter().any(|name| name == user), "staff see {user}: {:?}", names(&staff));
    }
    let alice = usage_as(&app, "alice", &format!("{window}&by=user")).await;
    assert_eq!(names(&alice), ["alice"]);
    let dave = usage_as(&app, "dave", &format!("{window}&by=account")).await;
    assert_eq!(names(&dave), ["physics"], "dave sees his own jobs' account only");
    assert!(dave.total.gpu_hours < staff.total.gpu_hours);
    // carol coordinates ml (and so ml-vision): alice's jobs, not dave's.
    let carol = usage_as(&app, "carol", &format!("{window}&by=user")).await;
    assert!(names(&carol).iter().any(|name| name == "alice"), "{:?}", names(&carol));
    assert!(!names(&carol).iter().any(|name| name == "dave" || name == "bob"), "{:?}", names(&carol));
    // Another tenant with no jobs in the window gets nothing at all.
    let bob = usage_as(&app, "bob", &format!("{window}&by=user")).await;
    assert!(!names(&bob).iter().any(|name| name != "bob"), "{:?}", names(&bob));
    let stats: UsageStats = app.get_as("bob", &format!("/api/v1/stats?{window}")).await.json().await.expect("stats");
    assert!(stats.top_users.iter().all(|entry| entry.name == "bob"), "{:?}", stats.top_users);
    // Nobody signed in: 401.
    assert_eq!(app.get(&format!("/api/v1/usage?{window}")).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn csv_holds_the_json_rows_and_stats_count_the_same_jobs() {
    let app = usage_app().await;
    // A window ending a minute ago: jobs other tests start meanwhile (slurmdbd writes a start a moment
    // after it) fall outside it for every request below alike.
    let end = Utc::now() - Duration::minutes(1);
    let window = format!("cluster=lab&start={}&end={}", rfc3339(end - Duration::days(3)), rfc3339(end));
    let json = usage_as(&app, "root", &format!("{window}&by=user")).await;
    let response = app.get_as("root", &format!("/api/v1/usage?{window}&by=user&format=csv")).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/csv"));
    let text = response.text().await.expect("csv body");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().expect("a header").clone();
    let column = |name: &str| header.iter().position(|field| field == name).expect("a column");
    let records: Vec<csv::StringRecord> = reader.records().map(|record| record.expect("a record")).collect();
    assert_eq!(records.len(), json.rows.len() + 1, "one line per row and the total");
    for (record, row) in records.iter().zip(json.rows.iter().chain([&json.total])) {
        assert_eq!(&record[column("name")], row.name);
        assert_eq!(record[column("gpu_hours")].parse::<f64>().expect("a number"), row.gpu_hours);
        assert_eq!(record[column("jobs")].parse::<u64>().expect("a number"), row.jobs);
        let idle = &record[column("idle_gpu_hours")];
        assert_eq!(idle.parse::<f64>().ok(), row.idle_gpu_hours, "unknown idle is an empty cell");
    }
    let stats: UsageStats = app.get_as("root", &format!("/api/v1/stats?{window}")).await.json().await.expect("stats");
    let binned: u64 = stats.job_gpus.bins.iter().map(|bin| bin.jobs).sum();
    assert_eq!(binned, json.total.gpu_jobs, "the GPU histogram counts every GPU job of the window");
    let top: f64 = stats.top_users.iter().map(|entry| entry.gpu_hours).sum();
    assert!(top <= json.total.gpu_hours + 1e-9);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_window_or_parameter_is_a_400_naming_it() {
    let app = usage_app().await;
    let now = Utc::now();
    for (query, parameter) in [
        (format!("start={}&end={}", rfc3339(now), rfc3339(now - Duration::hours(1))), "start"),
        ("start=yesterday".to_string(), "start"),
        ("by=team".to_string(), "by"),
        ("format=xml".to_string(), "format"),
        ("cluster=nowhere".to_string(), "cluster"),
        ("tag=Not-A-Tag".to_string(), "tag"),
        ("colour=x".to_string(), "colour"),
    ] {
        for path in ["/api/v1/usage", "/api/v1/stats"] {
            if path == "/api/v1/stats" && (parameter == "by" || parameter == "format") {
                continue;
            }
            let response = app.get_as("root", &format!("{path}?{query}")).await;
            assert_eq!(response.status(), 400, "{path}?{query}");
            let body: serde_json::Value = response.json().await.expect("the error envelope");
            assert_eq!(body["error"]["parameter"], parameter, "{path}?{query}: {body}");
        }
    }
    // A user may not read a window wider than [limits] window_days.
    let wide = format!("start={}", rfc3339(now - Duration::days(400)));
    assert_eq!(app.get_as("alice", &format!("/api/v1/usage?{wide}")).await.status(), 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_archived_reports_utilisation_makes_idle_gpu_hours() {
    let url = fresh_database("h_usage_idle").await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: url.clone() });
    config.report.archive_interval_s = 0;
    config.usage.co2_g_per_kwh = Some(400.0);
    let app = spawn_app(config).await;
    let job = run_gpu_job("dave", 3);
    let detail = wait_ended(&app, job).await;
    let submit = u64::try_from(detail.job.submit.timestamp()).expect("after the epoch");
    let store = Store::new(&url, std::time::Duration::from_secs(5)).expect("store");
    let digest = ReportDigest {
        mean_gpu_util: Some(25.0),
        mean_tensor_active: Some(5.0),
        blame: None,
        has_metrics: true,
        energy_kwh: Some(0.5),
        // Half of its GPU hours ran on a shared node's GPUs no record placed: unmeasured, never idle.
        measured_share: Some(0.5),
        generation: slurmlens::app::report::GENERATION,
    };
    store.archive_report(&"lab".parse().expect("a cluster"), job, submit, "{}", &digest).await.expect("archived");
    let start = detail.job.start.expect("started") - Duration::minutes(1);
    let end = detail.job.end.expect("ended") + Duration::minutes(1);
    let window = format!("cluster=lab&start={}&end={}&by=user", rfc3339(start), rfc3339(end));
    let hours = detail.job.elapsed_raw as f64 / 3600.0;
    // dave's row once held only another test's job of his: that job's record, just submitted, was
    // under uid 0, and the user route took its uid alone (fixed: `user_uids`; the test below). slurmdbd
    // rewrites a young record as its job starts and ends, so a read that misses the job is made again
    // for up to 30 s, and each miss is printed with what root read and what slurmdbd held.
    let mut missed = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let row = loop {
        let report = usage_as(&app, "dave", &window).await;
        let row = report.rows.into_iter().find(|row| row.name == "dave").expect("dave's row");
        if row.gpu_hours >= hours - 1e-9 && row.gpu_hours_measured > 0.0 {
            break row;
        }
        let staff = usage_as(&app, "root", &window).await.rows.into_iter().find(|row| row.name == "dave");
        missed.push(format!("dave read {row:?}; root read {staff:?}; slurmdbd holds {:?}", records_of(job).await));
        assert!(
            std::time::Instant::now() < deadline,
            "job {job} stayed missing from dave's row of {window}:\n{}",
            missed.join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    if !missed.is_empty() {
        eprintln!("job {job} was missing from dave's row {} times first:\n{}", missed.len(), missed.join("\n"));
    }
    let idle = row.idle_gpu_hours.expect("measured");
    // Only this job is measured in the window: half its GPU-hours (1 GPU), and 75 % of them idle.
    assert!((row.gpu_hours_measured - 0.5 * hours).abs() < 1e-9, "{row:?}");
    assert!((idle - 0.75 * row.gpu_hours_measured).abs() < 1e-9, "{row:?}");
    assert!((row.gpu_hours_with_energy - row.gpu_hours_measured).abs() < 1e-9, "{row:?}");
    assert_eq!(row.mean_gpu_util, Some(25.0));
    let kwh = row.energy_kwh.expect("energy");
    assert!((row.co2_kg.expect("co2") - kwh * 0.4).abs() < 1e-9);
}

/// slurmdbd can hold a just-submitted job under its submitter's uid until it starts (root's, for a job
/// root submitted with `--uid`: seen in the lab). With that record the newest of the user's, the user's
/// listing and showback still hold every other job of theirs: the uids are only the index's way in.
#[tokio::test(flavor = "multi_thread")]
async fn a_users_newest_record_under_another_uid_hides_none_of_their_jobs() {
    let _db = database_shared().await;
    let app = usage_app().await;
    wait_ended(&app, run_gpu_job("dave", 1)).await;
    // A copy of the lab's tables, so the record below disturbs no other test.
    const CLUSTER: &str = "uidprobe";
    for table in ["job_table", "step_table", "event_table", "assoc_table"] {
        admin(&format!(
            "DROP TABLE IF EXISTS {CLUSTER}_{table}; CREATE TABLE {CLUSTER}_{table} LIKE lab_{table}; \
             INSERT INTO {CLUSTER}_{table} SELECT * FROM lab_{table}"
        ));
    }
    // dave's newest record: just submitted, started a moment ago, under uid 0.
    let now = Utc::now().timestamp();
    admin(&format!(
        "INSERT INTO {CLUSTER}_job_table (id_job, job_name, id_assoc, id_resv, id_wckey, id_user, id_group, \
         het_job_id, het_job_offset, state_reason_prev, nodes_alloc, `partition`, priority, state, cpus_req, \
         time_submit, time_eligible, time_start, time_end, deleted, nodelist) \
         SELECT 999999, 'just-submitted', a.id_assoc, 0, 0, 0, 0, 0, 4294967294, 0, 1, 'gpu', 1, 0, 1, \
         {now}, {now}, {now}, 0, 0, 'n1' FROM {CLUSTER}_assoc_table a WHERE a.user = 'dave' AND a.deleted = 0 LIMIT 1"
    ));
    let mut config = test_config(AnonymousAccess::Nobody);
    config.clusters = vec![CLUSTER.parse().expect("a cluster name")];
    let app = spawn_app(config).await;
    let window = format!(
        "cluster={CLUSTER}&start={}&end={}",
        rfc3339(Utc::now() - Duration::days(2)),
        rfc3339(Utc::now() + Duration::minutes(10))
    );
    let staff = usage_as(&app, "root", &format!("{window}&by=user")).await;
    let expected = staff.rows.iter().find(|row| row.name == "dave").expect("dave's row as staff reads it");
    assert!(expected.jobs >= 2, "dave's jobs and the record: {expected:?}");
    let own = usage_as(&app, "dave", &format!("{window}&by=user")).await;
    let read = own.rows.iter().find(|row| row.name == "dave").expect("dave's row");
    assert_eq!((read.jobs, read.gpu_jobs), (expected.jobs, expected.gpu_jobs), "dave reads what staff read of his");
    let listed = |user: &str, query: String| {
        let app = &app;
        let user = user.to_string();
        async move {
            let response = app.get_as(&user, &format!("/api/v1/jobs?{query}&limit=5000")).await;
            assert_eq!(response.status(), 200);
            let page: slurmlens_wire::Page<slurmlens_wire::Job> = response.json().await.expect("a page");
            let mut ids: Vec<String> = page.items.into_iter().map(|job| job.job_id).collect();
            ids.sort();
            ids
        }
    };
    let mine = listed("dave", window.clone()).await;
    assert!(mine.contains(&"999999".to_string()), "the record is dave's");
    assert_eq!(mine, listed("root", format!("{window}&user=dave")).await, "dave lists every job of his");
}
