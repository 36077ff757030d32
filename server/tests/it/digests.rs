//! The listing's digests (mean GPU utilisation, tensor activity, blame) made in the background by the
//! archiver, on cluster `sakura`'s generated history and its 48 h of telemetry in the lab's
//! VictoriaMetrics; and running jobs' means so far.

use chrono::{DateTime, Duration, Utc};
use slurmlens::app::report::{ArchiverSettings, Round, RoundSummary, archive_round};
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, VictoriaMetricsConfig};
use slurmlens::domain::job::TimeWindow;
use slurmlens_wire::{Archiving, DigestState, Job, Page};

use crate::support::{TestApp, database_shared, fresh_database, lab, spawn_app, spawn_state, test_config};

/// Cluster `sakura` only, with VictoriaMetrics and a database of the test's own; no archiver loop:
/// the tests run its rounds.
fn digests_config(database: String) -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.clusters = vec!["sakura".parse().expect("valid cluster")];
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 20_000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.database = Some(DatabaseConfig { url: database });
    config.report.archive_interval_s = 0;
    config
}

fn settings() -> ArchiverSettings {
    ArchiverSettings { backfill: Duration::days(31), concurrency: 2, pause: std::time::Duration::ZERO }
}

/// A window of sakura's history and the moment the test reads it at: what "finished" means for the
/// test's count and for its rounds alike, so a job ending while the test runs joins neither.
#[derive(Debug, Clone, Copy)]
struct Span {
    window: TimeWindow,
    as_of: DateTime<Utc>,
}

/// `minutes` minutes of sakura's history ending `hours_ago` hours ago, read as of now.
fn window(hours_ago: i64, minutes: i64) -> Span {
    let as_of = Utc::now();
    let end = as_of - Duration::hours(hours_ago);
    Span { window: TimeWindow::new(end - Duration::minutes(minutes), end).expect("a non-empty window"), as_of }
}

async fn round(config: &Config, span: Span, max_reports: Option<usize>) -> RoundSummary {
    let app = slurmlens::serve::app(config).expect("app");
    let round = Round { window: span.window, max_reports, as_of: span.as_of, published: false };
    archive_round(&app, &settings(), round).await.expect("an archiver round")
}

fn span(window: TimeWindow) -> String {
    format!("cluster=sakura&start={}&end={}", window.start().timestamp(), window.end().timestamp())
}

/// Every job overlapping `window` (one page holds them all).
async fn listed(app: &TestApp, window: TimeWindow, extra: &str) -> Vec<Job> {
    let response = app.get(&format!("/api/v1/jobs?{}&limit=5000{extra}", span(window))).await;
    assert_eq!(response.status(), 200);
    let page: Page<Job> = response.json().await.expect("page JSON");
    assert!(page.next_cursor.is_none(), "the window fits one page");
    page.items
}

fn state_word(job: &Job) -> &str {
    job.state.split_whitespace().next().unwrap_or("")
}

/// Ended, as the archiver reads it at `as_of`: not pending, running or suspended, and ended before
/// the report's `archive_delay` (120 s).
fn finished(job: &Job, as_of: DateTime<Utc>) -> bool {
    job.end.is_some_and(|end| end + Duration::seconds(120) <= as_of)
        && !matches!(state_word(job), "PENDING" | "RUNNING" | "SUSPENDED")
}

/// Ended badly: what the archiver's first pass takes.
fn ended_badly(job: &Job) -> bool {
    match state_word(job) {
        "FAILED" | "NODE_FAIL" | "TIMEOUT" | "OUT_OF_MEMORY" | "BOOT_FAIL" | "DEADLINE" => true,
        "CANCELLED" => job.start.is_some(),
        _ => false,
    }
}

/// Whose report the archiver makes: finished GPU jobs, and every job that ended badly.
fn due(job: &Job, as_of: DateTime<Utc>) -> bool {
    finished(job, as_of) && (job.alloc_gpus > 0 || ended_badly(job))
}

#[tokio::test(flavor = "multi_thread")]
async fn one_round_gives_finished_jobs_older_than_six_hours_their_digest_failed_jobs_first() {
    let _db = database_shared().await;
    let config = digests_config(fresh_database("digests_backfill").await);
    let app = spawn_app(config.clone()).await;
    let at = window(7, 5);
    let before = listed(&app, at.window, "").await;
    assert!(before.iter().filter(|job| finished(job, at.as_of)).all(|job| job.digest.is_none()), "no report made yet");
    let bad: Vec<&Job> = before.iter().filter(|job| due(job, at.as_of) && ended_badly(job)).collect();
    let rest: Vec<&Job> = before.iter().filter(|job| due(job, at.as_of) && !ended_badly(job)).collect();
    assert!(!bad.is_empty() && !rest.is_empty(), "sakura's history has both kinds 7 h ago");

    // A round allowed exactly as many reports as jobs ended badly makes theirs and no other.
    let first = round(&config, at, Some(bad.len())).await;
    assert_eq!(first.due, bad.len() + rest.len(), "{first:?}");
    assert_eq!((first.made(), first.ended_badly, first.unavailable), (bad.len(), bad.len(), 0), "{first:?}");
    let after_first = listed(&app, at.window, "").await;
    for job in after_first.iter().filter(|job| finished(job, at.as_of)) {
        let is_bad = bad.iter().any(|b| b.job_id == job.job_id);
        assert_eq!(job.digest.is_some(), is_bad, "job {} ({}): digest {:?}", job.job_id, job.state, job.digest);
        if is_bad && !job.state.starts_with("CANCELLED") {
            assert!(job.blame.is_some(), "job {} ({}) has its failure's blame", job.job_id, job.state);
        }
    }
    // The `blame=` filter sees every job whose digest carries one.
    let blamed = listed(&app, at.window, "&blame=infrastructure,application,unknown").await;
    assert_eq!(blamed.len(), after_first.iter().filter(|job| job.blame.is_some()).count());

    // The next round makes the rest, without anyone opening a job.
    let second = round(&config, at, None).await;
    assert_eq!((second.due, second.made(), second.ended_badly), (rest.len(), rest.len(), 0), "{second:?}");
    let after = listed(&app, at.window, "").await;
    for job in after.iter().filter(|job| due(job, at.as_of)) {
        assert!(job.digest.is_some(), "job {} ({}) has a digest", job.job_id, job.state);
    }
    // This test's database holds no GPU records: a job that shared a node has its node's series (its
    // report is archived) but no mean of its own (other tenants' GPUs are not counted as its).
    let archived = after.iter().filter(|job| job.digest == Some(DigestState::Archived)).count();
    assert!(archived >= rest.len() / 2, "most GPU jobs 7 h ago have telemetry: {after:#?}");
    let measured: Vec<&Job> =
        after.iter().filter(|job| job.digest == Some(DigestState::Archived) && job.mean_gpu_util.is_some()).collect();
    let six_hours_ago = Utc::now() - Duration::hours(6);
    assert!(measured.iter().any(|job| job.end.is_some_and(|end| end < six_hours_ago)), "{measured:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_without_metrics_is_recorded_as_no_data_and_not_tried_again() {
    let _db = database_shared().await;
    let config = digests_config(fresh_database("digests_no_data").await);
    let app = spawn_app(config.clone()).await;
    // Three days ago: before the 48 h of telemetry the lab holds.
    let at = window(72, 3);
    let first = round(&config, at, None).await;
    assert!(first.no_data > 0, "{first:?}");
    assert_eq!((first.made(), first.unavailable), (first.due, 0), "{first:?}");
    let jobs = listed(&app, at.window, "").await;
    let no_data: Vec<&Job> = jobs.iter().filter(|job| job.digest == Some(DigestState::NoData)).collect();
    assert_eq!(no_data.len(), first.no_data);
    assert!(no_data.iter().all(|job| job.mean_gpu_util.is_none() && job.mean_tensor_active.is_none()));
    // Settled: the next round finds nothing due and makes nothing.
    let second = round(&config, at, None).await;
    assert_eq!(second, RoundSummary::default());
    // Opening such a job serves the archived report, which says why it is empty.
    let job = no_data.first().expect("a no-data job");
    let response = app.get(&format!("/api/v1/jobs/{}/report?cluster=sakura", job.job_id_raw)).await;
    let report: slurmlens_wire::JobReport = response.json().await.expect("report JSON");
    assert_eq!(report.source, slurmlens_wire::ReportSource::Archived);
    assert_eq!(report.metrics.status, slurmlens_wire::MetricsState::NoData);
}

#[tokio::test(flavor = "multi_thread")]
async fn blank_cells_sort_last_in_the_job_list_either_way() {
    let _db = database_shared().await;
    let config = digests_config(fresh_database("digests_sort").await);
    let app = spawn_app(config.clone()).await;
    // Some reports made (the failed jobs' first, then half the others), the others not yet: both
    // values and blanks to sort.
    let at = window(8, 2);
    let jobs = listed(&app, at.window, "").await;
    let bad = jobs.iter().filter(|job| due(job, at.as_of) && ended_badly(job)).count();
    let rest = jobs.iter().filter(|job| due(job, at.as_of) && !ended_badly(job)).count();
    round(&config, at, Some(bad + (rest / 2).max(1))).await;
    for desc in ["0", "1"] {
        let path = format!("/web/v1/jobs.json?{}&sort=mean_gpu_util&desc={desc}", span(at.window));
        let response = app.get(&path).await;
        assert_eq!(response.status(), 200, "{path}");
        let rows: Vec<Job> = response.json().await.expect("rows JSON");
        let values: Vec<Option<f64>> = rows.iter().map(|job| job.mean_gpu_util).collect();
        let first_blank = values.iter().position(Option::is_none).expect("some blanks");
        assert!(first_blank > 0, "desc={desc}: values first: {values:?}");
        assert!(values[first_blank..].iter().all(Option::is_none), "desc={desc}: blanks last: {values:?}");
        let shown: Vec<f64> = values.iter().flatten().copied().collect();
        let ordered = shown.windows(2).all(|pair| if desc == "1" { pair[0] >= pair[1] } else { pair[0] <= pair[1] });
        assert!(ordered, "desc={desc}: {shown:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn running_gpu_jobs_show_their_means_so_far() {
    let _db = database_shared().await;
    // The GPU records sakura's plugin would have sent (the demo's telemetry seeding wrote them into the
    // lab's database), copied into the test's own.
    let database = fresh_database("digests_live").await;
    let pool = sqlx::MySqlPool::connect(&database).await.expect("test database");
    let columns = "cluster, job_id, step, node, gpu_index, gpu_uuid, cgroup_path, first_seen, last_seen, ended_at";
    let lab_database = lab().var("SLURMLENS_DATABASE_URL").rsplit('/').next().expect("a database name");
    sqlx::query(&format!(
        "INSERT IGNORE INTO gpu_allocations ({columns}) \
         SELECT {columns} FROM `{lab_database}`.gpu_allocations WHERE cluster = 'sakura'"
    ))
    .execute(&pool)
    .await
    .expect("copying sakura's GPU records");
    // The running jobs are found by a server of their own: a server keeps what it read of a running
    // job for a minute, and this one must read the records as dated below.
    let finder = spawn_app(digests_config(database.clone())).await;
    let now = Utc::now();
    let window = TimeWindow::new(now - Duration::hours(1), now).expect("window");
    let running: Vec<Job> = listed(&finder, window, "&state=RUNNING&min_gpus=1").await;
    assert!(!running.is_empty(), "sakura's history has running GPU jobs");
    // Records are read within a job's run (issue #15, M9). `demo live` re-anchors the history when it
    // restarts, so a running job's copied records may be last seen before its start as slurmdbd has it
    // now: seen now, as its node's next record would say.
    for job in &running {
        sqlx::query(
            "UPDATE gpu_allocations SET last_seen = GREATEST(last_seen, ?) WHERE cluster = 'sakura' AND job_id = ?",
        )
        .bind(now)
        .bind(job.job_id_raw)
        .execute(&pool)
        .await
        .expect("dating the records within the run");
    }
    let app = spawn_app(digests_config(database)).await;
    // Jobs that have run a few minutes, so their GPUs have samples: one that started a moment ago has
    // no mean yet, and `demo live`'s test (tools/tests/cli/live.rs) may leave sakura's history ticked
    // a little past now, its newest jobs "running" from a start still ahead.
    let settled = Utc::now() - Duration::minutes(3);
    let running: Vec<Job> = listed(&app, window, "&state=RUNNING&min_gpus=1")
        .await
        .into_iter()
        .filter(|job| job.start.is_some_and(|start| start <= settled))
        .collect();
    assert!(!running.is_empty(), "sakura has GPU jobs running for minutes");
    let live: Vec<&Job> = running.iter().filter(|job| job.digest == Some(DigestState::Live)).collect();
    assert!(live.len() * 2 >= running.len(), "most running GPU jobs have live values: {running:#?}");
    for job in &live {
        let util = job.mean_gpu_util.expect("a live job's utilisation");
        assert!((0.0..=100.0).contains(&util), "job {}: {util}", job.job_id);
    }
    // One of them against PromQL over its recorded GPUs since it started.
    let job = live.first().expect("a live job");
    let start: DateTime<Utc> = job.start.expect("a running job started");
    let nodes = slurmlens_slurm::hostlist::expand_lenient(&job.node_list);
    let gpus: Vec<(String, String)> =
        recorded_gpus(&pool, job.job_id_raw).await.into_iter().filter(|(node, _)| nodes.contains(node)).collect();
    let matchers: Vec<String> = gpus
        .iter()
        .map(|(node, indices)| {
            format!(
                "max by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{{Hostname=\"{node}\",gpu=~\"{indices}\"}}[{}s]))",
                (Utc::now() - start).num_seconds()
            )
        })
        .collect();
    let query = format!("avg({})", matchers.join(" or "));
    let direct = crate::support::instant_query(lab().var("SLURMLENS_VM_URL"), &query, Utc::now().timestamp())
        .await
        .expect("PromQL has the job's GPUs");
    let listed = job.mean_gpu_util.expect("live utilisation");
    assert!((listed - direct).abs() <= 1.0, "job {}: listed {listed}, PromQL {direct}", job.job_id);
}

/// The GPU indices recorded for a sakura job id, per node (`0|1|2`); an earlier job of the same id may
/// have left records on other nodes.
async fn recorded_gpus(pool: &sqlx::MySqlPool, job_id: u32) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT node, GROUP_CONCAT(DISTINCT gpu_index ORDER BY gpu_index SEPARATOR '|') FROM gpu_allocations \
         WHERE cluster = 'sakura' AND job_id = ? GROUP BY node",
    )
    .bind(job_id)
    .fetch_all(pool)
    .await
    .expect("reading GPU records")
}

#[tokio::test(flavor = "multi_thread")]
async fn one_replica_archives_at_a_time_and_the_other_takes_over_when_it_stops() {
    let _db = database_shared().await;
    let database = fresh_database("digests_lease").await;
    let config = digests_config(database.clone());
    let at = window(7, 3);
    // Another replica is mid-round: it holds the archiver's lease of this database. It is a plain
    // connection, dropped below without a goodbye as a killed process's socket closes: a pool closed
    // while its connection is on the way back can keep that connection open, and the lease with it
    // (sqlx 0.8.6; `replicas.rs` met it first).
    let mut connection =
        <sqlx::MySqlConnection as sqlx::Connection>::connect(&database).await.expect("the other replica's connection");
    let held: Option<i64> =
        sqlx::query_scalar("SELECT GET_LOCK(SHA2(CONCAT('slurmlens-archiver.', DATABASE()), 256), 0)")
            .fetch_one(&mut connection)
            .await
            .expect("GET_LOCK");
    assert_eq!(held, Some(1), "the other replica holds the lease");
    let skipped = round(&config, at, None).await;
    assert_eq!(skipped, RoundSummary { skipped: true, ..RoundSummary::default() }, "this replica waits its turn");
    // The other replica stops (its connection goes): this one's next round archives.
    drop(connection);
    lease_freed(&database).await;
    let taken = round(&config, at, None).await;
    assert!(!taken.skipped && taken.due > 0 && taken.made() == taken.due, "{taken:?}");
    // A round that ended let go of the lease: the next one is not skipped (and has nothing left).
    let next = round(&config, at, None).await;
    assert_eq!(next, RoundSummary::default());
}

/// Waits (at most 30 s) until MariaDB has seen a dropped connection go and freed the archiver's lease
/// it held.
async fn lease_freed(database: &str) {
    let pool = sqlx::MySqlPool::connect(database).await.expect("test database");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let free: Option<i64> =
            sqlx::query_scalar("SELECT IS_FREE_LOCK(SHA2(CONCAT('slurmlens-archiver.', DATABASE()), 256))")
                .fetch_one(&pool)
                .await
                .expect("IS_FREE_LOCK");
        if free == Some(1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the lease of a closed connection is freed within 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    pool.close().await;
}

/// The server's first round tells the job listing how far it is while it runs (`archiving`), counting
/// the due jobs in its first pass; the listing says nothing once it ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_published_round_tells_the_listing_how_far_it_is() {
    let _db = database_shared().await;
    let config = digests_config(fresh_database("digests_progress").await);
    let app = slurmlens::serve::app(&config).expect("app");
    let served = spawn_state(&config, slurmlens::http::HttpState::new(app.clone())).await;
    let at = window(9, 4);
    let progress = async |served: &TestApp| {
        let response = served.get(&format!("/api/v1/jobs?{}&limit=1", span(at.window))).await;
        assert_eq!(response.status(), 200);
        response.json::<Page<Job>>().await.expect("page JSON").archiving
    };
    assert_eq!(progress(&served).await, None, "no round yet");
    // One report at a time with a pause after each: the round lasts long enough to be watched.
    let settings = ArchiverSettings { concurrency: 1, pause: std::time::Duration::from_millis(150), ..settings() };
    let round = tokio::spawn({
        let app = app.clone();
        async move {
            let round = Round { window: at.window, max_reports: None, as_of: at.as_of, published: true };
            archive_round(&app, &settings, round).await
        }
    });
    let mut seen: Vec<Archiving> = Vec::new();
    while !round.is_finished() {
        seen.extend(progress(&served).await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let summary = round.await.expect("the round's task").expect("an archiver round");
    assert!(summary.made() >= 3, "a window with a few due jobs: {summary:?}");
    assert!(seen.len() >= 3, "the listing showed the round as it went: {seen:?}");
    assert!(seen.iter().all(|p| p.since == at.as_of.timestamp() && p.made <= summary.made() as u64), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].made <= w[1].made && w[0].due <= w[1].due), "only forward: {seen:?}");
    assert!(seen.iter().all(|p| !p.counted || p.due == summary.due as u64), "counted is the round's count: {seen:?}");
    assert!(seen.iter().any(|p| p.counted && p.made > 0), "the second pass shows too: {seen:?}");
    assert_eq!(progress(&served).await, None, "nothing once the round ended");
}
