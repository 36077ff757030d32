//! Years of history (#16): a window's listing reads the same jobs whichever index reads it, including
//! the jobs submitted long before the window (pending for weeks, running for weeks), and it reads them
//! through an index that fits the viewer, so its cost does not grow with the history before it.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use slurmlens::config::AnonymousAccess;
use slurmlens::domain::job::{JobFilter, TimeWindow};
use slurmlens::domain::scope::ViewerScope;
use slurmlens::sources::slurmdbd::{LONG_SPAN_S, SlurmDbd};
use sqlx::MySqlPool;

use crate::support::{database_shared, lab, slurm, test_config};

const DAY: i64 = 86_400;
/// The cluster this module writes its own history into (slurmdbd makes its tables: `sacctmgr add cluster`).
const CLUSTER: &str = "spans";

/// `spans`'s tables, made once by slurmdbd, emptied of jobs.
async fn spans_tables(seeder: &MySqlPool) {
    let clusters = slurm("sacctmgr", &["-nP", "list", "clusters", "format=cluster"]);
    if !clusters.lines().any(|line| line.trim() == CLUSTER) {
        slurm("sacctmgr", &["-i", "add", "cluster", CLUSTER]);
    }
    // slurmdbd makes the tables when it adds the cluster; wait for them.
    for _ in 0..100 {
        if sqlx::query(&format!("DELETE FROM {CLUSTER}_job_table")).execute(seeder).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("slurmdbd made no {CLUSTER}_job_table");
}

/// Writes one job row of `spans` as slurmdbd would for these columns; its row id.
async fn job(seeder: &MySqlPool, id_job: u32, submit: i64, start: i64, end: i64, deleted: bool) -> u64 {
    let state = match (start, end) {
        (0, _) => 0, // PENDING
        (_, 0) => 1, // RUNNING
        _ => 3,      // COMPLETED
    };
    let sql = format!(
        "INSERT INTO {CLUSTER}_job_table (id_job, job_name, id_assoc, id_resv, id_wckey, id_user, id_group, \
         het_job_id, het_job_offset, state_reason_prev, nodes_alloc, `partition`, priority, state, cpus_req, \
         time_submit, time_eligible, time_start, time_end, deleted, nodelist) \
         VALUES (?, 'horizon', 0, 0, 0, 4242, 4242, 0, 4294967294, 0, 1, 'gpu', 1, ?, 1, ?, ?, ?, ?, ?, 'gpu001')"
    );
    let done = sqlx::query(&sql)
        .bind(id_job)
        .bind(state)
        .bind(submit)
        .bind(submit)
        .bind(start)
        .bind(end)
        .bind(deleted)
        .execute(seeder)
        .await
        .expect("writing a job of spans");
    done.last_insert_id()
}

/// The jobs that overlap `[start, end)` by the definition, in the listing's order.
async fn by_definition(seeder: &MySqlPool, start: i64, end: i64) -> Vec<u64> {
    let sql = format!(
        "SELECT CAST(job_db_inx AS UNSIGNED) FROM {CLUSTER}_job_table WHERE deleted = 0 AND time_submit < ? \
         AND (time_end >= ? OR time_end = 0) ORDER BY time_submit DESC, time_end DESC, job_db_inx DESC"
    );
    sqlx::query_scalar(&sql).bind(end).bind(start).fetch_all(seeder).await.expect("the definition")
}

/// Every page of a staff listing of `window`, `limit` at a time: the row ids.
async fn listed(reader: &SlurmDbd, window: TimeWindow, limit: usize) -> Vec<u64> {
    let catalog = reader.tres_catalog().await.expect("tres");
    let (mut ids, mut cursor) = (Vec::new(), None);
    loop {
        let (jobs, next) = reader
            .jobs_in_window(&ViewerScope::Staff, window, &JobFilter::default(), &catalog, cursor, limit)
            .await
            .expect("a listing");
        ids.extend(jobs.iter().map(|job| job.db_index));
        match next {
            Some(next) => cursor = Some(next),
            None => return ids,
        }
    }
}

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).expect("a time")
}

#[tokio::test(flavor = "multi_thread")]
async fn window_listings_find_jobs_submitted_long_before_the_window() {
    let _db = database_shared().await;
    let seeder = MySqlPool::connect(lab().var("SLURMLENS_SEEDER_URL")).await.expect("the seeder's connection");
    spans_tables(&seeder).await;
    let now = Utc::now().timestamp();
    let base = now - 60 * DAY;
    let span = i64::try_from(LONG_SPAN_S).expect("seconds");
    // Sixty days of short jobs, one every six hours, and a deleted one.
    for n in 0..240 {
        let submit = base + n * DAY / 4;
        job(&seeder, 1000 + n as u32, submit, submit + 600, (submit + 2 * 3600).min(now - 7200), false).await;
    }
    job(&seeder, 1999, base + 31 * DAY, base + 31 * DAY, base + 32 * DAY, true).await;
    let window_start = base + 30 * DAY;
    let long_before = [
        // Pending 23 days, ran 6: catalogued.
        job(&seeder, 2001, base + 2 * DAY, base + 25 * DAY, base + 31 * DAY, false).await,
        // Running for 54 days, and pending since day 3: open.
        job(&seeder, 2002, base + 5 * DAY, base + 6 * DAY, 0, false).await,
        job(&seeder, 2003, base + 3 * DAY, 0, 0, false).await,
        // Submitted exactly at the floor and a second before it; both end in the window.
        job(&seeder, 2004, window_start - span, window_start - span + 60, window_start + 60, false).await,
        job(&seeder, 2005, window_start - span - 1, window_start - span, window_start + 60, false).await,
        // Ended exactly at the window's start: overlaps it.
        job(&seeder, 2006, base + 1, base + 2, window_start, false).await,
    ];
    let reader = slurmlens::serve::app(&config_with_spans())
        .expect("the application")
        .cluster(Some(CLUSTER))
        .expect("the spans reader")
        .clone();
    let catalogued = reader.prepare_history().await.expect("the long-span catalogue");
    assert!(catalogued >= 3, "jobs 2001, 2005 and 2006 span more than {LONG_SPAN_S} s: {catalogued} catalogued");
    // A long job that ends after the catalogue was made: read from the jobs that ended lately.
    let late = job(&seeder, 2007, base + 10 * DAY, base + 11 * DAY, now - 600, false).await;

    let windows = [
        ("the week from day 30", window_start, window_start + 7 * DAY),
        ("one second (the grid's moment)", window_start, window_start + 1),
        ("the last day", now - DAY, now + 60),
        ("the last hour (read by job end)", now - 3600, now + 60),
        ("the grid's moment now (read by job end)", now, now + 1),
        ("all sixty days", base - DAY, now + 60),
        ("day 1", base + DAY, base + 2 * DAY),
    ];
    for (label, start, end) in windows {
        let window = TimeWindow::new(at(start), at(end)).expect("a window");
        let expected = by_definition(&seeder, start, end).await;
        for limit in [3, 1000] {
            assert_eq!(listed(&reader, window, limit).await, expected, "{label}, pages of {limit}");
        }
    }
    let week = by_definition(&seeder, window_start, window_start + 7 * DAY).await;
    for (id, row) in [2001, 2002, 2003, 2004, 2005, 2006].iter().zip(long_before) {
        assert!(week.contains(&row), "job {id} overlaps the week from day 30");
    }
    assert!(by_definition(&seeder, now - DAY, now + 60).await.contains(&late));
}

/// A heavy user's listing is read in submission slices (newest hour first, then twice as wide): its
/// pages, small or large, list exactly their jobs of the window once each, in the listing's order.
#[tokio::test(flavor = "multi_thread")]
async fn a_heavy_users_pages_across_submission_slices_list_each_of_their_jobs_once() {
    let _db = database_shared().await;
    let pool = MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    // Ten days of sakura's seeded history that ended three days ago: no live job changes them.
    let end = Utc::now().timestamp() - 3 * DAY;
    let start = end - 10 * DAY;
    let (user,): (String,) = sqlx::query_as(
        "SELECT a.user FROM sakura_job_table j JOIN sakura_assoc_table a ON a.id_assoc = j.id_assoc \
         WHERE j.deleted = 0 AND j.time_submit < ? AND (j.time_end >= ? OR j.time_end = 0) AND a.user <> '' \
         GROUP BY a.user ORDER BY COUNT(*) DESC LIMIT 1",
    )
    .bind(end)
    .bind(start)
    .fetch_one(&pool)
    .await
    .expect("sakura's busiest user");
    let expected: Vec<u64> = sqlx::query_scalar(
        "SELECT CAST(j.job_db_inx AS UNSIGNED) FROM sakura_job_table j JOIN sakura_assoc_table a \
         ON a.id_assoc = j.id_assoc WHERE a.user = ? AND j.deleted = 0 AND j.time_submit < ? \
         AND (j.time_end >= ? OR j.time_end = 0) ORDER BY j.time_submit DESC, j.time_end DESC, j.job_db_inx DESC",
    )
    .bind(&user)
    .bind(end)
    .bind(start)
    .fetch_all(&pool)
    .await
    .expect("the user's jobs by definition");
    pool.close().await;
    assert!(expected.len() > 1_000, "{user} is a heavy user of sakura's demo: {} jobs in ten days", expected.len());

    let reader = slurmlens::serve::app(&test_config(AnonymousAccess::Staff))
        .expect("the application")
        .cluster(Some("sakura"))
        .expect("the sakura reader")
        .clone();
    let scope = reader.scope_for_user(&user).await.expect("the user's scope");
    assert!(matches!(&scope, ViewerScope::User { coordinated_accounts, .. } if coordinated_accounts.is_empty()));
    let catalog = reader.tres_catalog().await.expect("tres");
    let window = TimeWindow::new(at(start), at(end)).expect("a window");
    for (limit, pages) in [(500, usize::MAX), (7, 40)] {
        let (mut ids, mut cursor) = (Vec::new(), None);
        for _ in 0..pages {
            let (jobs, next) = reader
                .jobs_in_window(&scope, window, &JobFilter::default(), &catalog, cursor, limit)
                .await
                .expect("a listing");
            ids.extend(jobs.iter().map(|job| job.db_index));
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let want = &expected[..ids.len().min(expected.len())];
        assert_eq!(ids.as_slice(), want, "{user}'s pages of {limit}");
        if pages == usize::MAX {
            assert_eq!(ids.len(), expected.len(), "{user}'s pages of {limit} reach every job");
        }
    }
}

/// The test configuration with `spans` among its clusters.
fn config_with_spans() -> slurmlens::config::Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.clusters.push(CLUSTER.parse().expect("a cluster name"));
    config
}

/// The index and rows MariaDB reports for table `j` in an `ANALYZE FORMAT=JSON` plan (the first such table).
fn plan_of(plan: &serde_json::Value) -> Option<(String, f64)> {
    match plan {
        serde_json::Value::Object(map) => {
            if map.get("table_name").and_then(|name| name.as_str()) == Some("j") {
                let key = map.get("key").and_then(|key| key.as_str()).unwrap_or("").to_string();
                let rows = map.get("r_rows").and_then(serde_json::Value::as_f64).unwrap_or(0.0)
                    * map.get("r_loops").and_then(serde_json::Value::as_f64).unwrap_or(1.0);
                return Some((key, rows));
            }
            map.values().find_map(plan_of)
        }
        serde_json::Value::Array(items) => items.iter().find_map(plan_of),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listings_are_read_through_an_index_that_fits_the_viewer() {
    let _db = database_shared().await;
    let app = slurmlens::serve::app(&test_config(AnonymousAccess::Staff)).expect("the application");
    let reader = app.cluster(Some("sakura")).expect("the sakura reader");
    reader.prepare_history().await.expect("the long-span catalogue");
    let pool = MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    // sakura's busiest user in its last 30 days, and how many jobs the window and the range hold.
    let (end, start) = (Utc::now(), Utc::now() - Duration::days(30));
    let count = |sql: &'static str, from: i64| {
        let pool = pool.clone();
        async move {
            let count: i64 = sqlx::query_scalar(sql)
                .bind(end.timestamp())
                .bind(from)
                .fetch_one(&pool)
                .await
                .expect("counting sakura's jobs");
            count as f64
        }
    };
    let users: Vec<(String, i64)> = sqlx::query_as(
        "SELECT a.user, COUNT(*) FROM sakura_job_table j JOIN sakura_assoc_table a ON a.id_assoc = j.id_assoc \
         WHERE j.deleted = 0 AND j.time_submit < ? AND (j.time_end >= ? OR j.time_end = 0) AND a.user <> '' \
         GROUP BY a.user ORDER BY COUNT(*) DESC",
    )
    .bind(end.timestamp())
    .bind(start.timestamp())
    .fetch_all(&pool)
    .await
    .expect("sakura's users");
    let in_range = count(
        "SELECT COUNT(*) FROM sakura_job_table WHERE time_submit < ? AND time_submit >= ?",
        start.timestamp() - i64::try_from(LONG_SPAN_S).expect("seconds"),
    )
    .await;
    let window = TimeWindow::new(start, end).expect("a window");
    let filter = JobFilter::default();
    let mut plans = BTreeMap::new();
    for (user, own) in [users.first(), users.last()].into_iter().flatten() {
        let scope = reader.scope_for_user(user).await.expect("the user's scope");
        if !matches!(&scope, ViewerScope::User { coordinated_accounts, .. } if coordinated_accounts.is_empty()) {
            continue;
        }
        let mut rows = 0.0;
        for plan in reader.analyze_listing(&scope, window, &filter, 100).await.expect("ANALYZE") {
            let (key, read) = plan_of(&plan).expect("the plan reads the job table as `j`");
            assert_eq!(key, "sacct_def2", "{user}'s jobs are read by uid and end: {plan}");
            rows += read;
        }
        // Their jobs that had not ended by the window's start, and no other: each at most twice (a
        // submission slice's index range also holds the newer slices' jobs).
        assert!(rows <= (*own as f64) * 2.0 + 10.0, "{user} read {rows} rows for their {own} jobs");
        plans.insert(user.clone(), rows);
    }
    assert!(!plans.is_empty(), "sakura has plain users");
    let plans = reader.analyze_listing(&ViewerScope::Staff, window, &filter, 100).await.expect("ANALYZE");
    let plan = plans.first().expect("a staff listing sends a statement");
    let (key, rows) = plan_of(plan).expect("the plan reads the job table as `j`");
    assert_eq!(key, "archive_purge", "staff read submissions backwards: {plan}");
    assert!(rows <= in_range, "a staff page reads at most the bounded range ({in_range} rows), read {rows}: {plan}");
    // The grid's moment now: the open jobs and those that ended since, by job end.
    let open: f64 =
        count("SELECT COUNT(*) FROM sakura_job_table WHERE ? > 0 AND (time_end >= ? OR time_end = 0)", end.timestamp())
            .await;
    let moment = TimeWindow::new(end, end + Duration::seconds(1)).expect("a moment");
    let plans = reader.analyze_listing(&ViewerScope::Staff, moment, &filter, 100).await.expect("ANALYZE");
    let plan = plans.first().expect("a staff listing sends a statement");
    let (key, rows) = plan_of(plan).expect("the plan reads the job table as `j`");
    assert_eq!(key, "rollup2", "a moment now is read by job end: {plan}");
    assert!(rows <= open + 10.0, "the moment read {rows} rows for {open} open or just ended jobs: {plan}");
    pool.close().await;
}
