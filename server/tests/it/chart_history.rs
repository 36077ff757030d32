//! The charts' history kept in memory (`app/chart_history.rs`) against the lab's slurmdbd: a staff
//! Gantt answered from kept hours is the Gantt slurmdbd's window answers, job for job, and a kept hour
//! is not read again; the grid's moments in the past likewise; and a tenant's Gantt is their own jobs
//! whatever staff's views kept. A server that read its last days at start draws its first staff
//! Gantt from them.

use chrono::Utc;
use slurmlens::config::AnonymousAccess;
use slurmlens_web::gantt::GanttData;
use slurmlens_web::grid::GridSnapshot;

use crate::support::{TestApp, admin, database_shared, spawn_app, spawn_state, test_config};

/// A copy of sakura's last fortnight, so the record this test renames disturbs no other test.
const CLUSTER: &str = "keptprobe";

async fn staff_app(history_jobs: u32) -> TestApp {
    spawn_app(staff_config(CLUSTER, history_jobs)).await
}

fn staff_config(cluster: &str, history_jobs: u32) -> slurmlens::config::Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.clusters = vec![cluster.parse().expect("a cluster name")];
    config.limits.chart_history_jobs = history_jobs;
    config
}

/// `cluster`'s tables as a copy of sakura's accounts and of its jobs open or ended after `since`.
fn copy_sakura(cluster: &str, since: i64) {
    for table in ["job_table", "event_table", "assoc_table"] {
        let rows = match table {
            "job_table" => format!(" WHERE time_end = 0 OR time_end >= {since}"),
            _ => String::new(),
        };
        admin(&format!(
            "DROP TABLE IF EXISTS {cluster}_{table}; CREATE TABLE {cluster}_{table} LIKE sakura_{table}; \
             INSERT INTO {cluster}_{table} SELECT * FROM sakura_{table}{rows}"
        ));
    }
}

async fn gantt(app: &TestApp, window: (i64, i64)) -> GanttData {
    gantt_as(app, None, window).await
}

/// The Gantt of `window` as `user` (through the tests' trusted proxy header) or anonymously (staff).
async fn gantt_as(app: &TestApp, user: Option<&str>, window: (i64, i64)) -> GanttData {
    gantt_of(app, CLUSTER, user, window).await
}

async fn gantt_of(app: &TestApp, cluster: &str, user: Option<&str>, (start, end): (i64, i64)) -> GanttData {
    let path = format!("/web/v1/gantt?cluster={cluster}&start={start}&end={end}");
    let response = match user {
        Some(user) => app.get_as(user, &path).await,
        None => app.get(&path).await,
    };
    assert_eq!(response.status(), 200, "{path}");
    let mut data: GanttData = response.json().await.expect("Gantt JSON");
    data.now = 0;
    data
}

/// The name `data` draws job `id` under, if it draws it one by one.
fn name_of(data: &GanttData, id: &str) -> Option<String> {
    data.jobs.iter().find(|job| job.job_id == id).map(|job| data.names[job.name as usize].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_staff_gantt_from_kept_hours_is_slurmdbds_window_and_a_kept_hour_is_not_read_again() {
    let _db = database_shared().await;
    let now = Utc::now().timestamp();
    copy_sakura(CLUSTER, now - 14 * 86_400);
    let (kept, read) = (staff_app(300_000).await, staff_app(0).await);
    let day = (now - 86_400, now);
    // A job that ended hours ago, drawn one by one: its hour is sealed.
    let data = gantt(&read, day).await;
    let probe = data
        .jobs
        .iter()
        .filter(|job| {
            job.end > 0 && job.end < now - 3 * 3600 && job.end > now - 20 * 3600 && !job.job_id.contains(['_', '+'])
        })
        .map(|job| job.job_id.clone())
        .next()
        .expect("sakura's last day has jobs that ended hours ago");
    // Renamed in slurmdbd after a view: a server that kept its hour still draws the name it read.
    // (The first views of a process read windows whole until the long-span catalogue is built.)
    let mut found = None;
    for attempt in 0..30 {
        let before = name_of(&gantt(&kept, day).await, &probe).expect("the probe is drawn");
        let written = format!("renamed-{attempt}");
        admin(&format!("UPDATE {CLUSTER}_job_table SET job_name = '{written}' WHERE id_job = {probe}"));
        let after = name_of(&gantt(&kept, day).await, &probe).expect("the probe is drawn");
        if after == before {
            found = Some((before, written));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let (drawn, written) = found.expect("within 30 s the server draws a sealed job from its kept hour");
    assert_ne!(drawn, written);
    let fresh = name_of(&gantt(&read, day).await, &probe);
    assert_eq!(fresh.as_deref(), Some(written.as_str()), "a server that keeps nothing reads the new name");
    // Back as the kept hour has it: then the two servers must draw every window alike.
    admin(&format!("UPDATE {CLUSTER}_job_table SET job_name = '{}' WHERE id_job = {probe}", drawn.replace('\'', "''")));
    for window in
        [day, (now - 7 * 86_400, now), (now - 30 * 3600, now - 6 * 3600), (now - 5 * 86_400, now - 4 * 86_400)]
    {
        let (from_kept, from_read) = (gantt(&kept, window).await, gantt(&read, window).await);
        assert!(from_read.jobs.len() + from_read.packed.len() > 100, "{window:?} holds sakura's jobs");
        assert_eq!(from_kept, from_read, "window {window:?}");
    }
    // A tenant asking the server that kept staff's hours reads their own jobs from slurmdbd, as the
    // server keeping none answers them: nothing kept reaches anyone but staff.
    let (own_kept, own_read) = (gantt_as(&kept, Some("u20"), day).await, gantt_as(&read, Some("u20"), day).await);
    assert!(!own_read.jobs.is_empty(), "u20 ran jobs in sakura's last day");
    assert_eq!(own_read.users, vec!["u20".to_string()], "a tenant's Gantt draws their jobs alone");
    assert_eq!(own_kept, own_read, "a tenant's Gantt from the server that kept staff's hours");
    // The grid's moments in the past (a scrub) read the same kept hours.
    for at in [now - 3600, now - 20 * 3600, now - 3 * 86_400] {
        let path = format!("/web/v1/grid?cluster={CLUSTER}&at={at}");
        let from_kept: GridSnapshot = kept.get(&path).await.json().await.expect("grid JSON");
        let from_read: GridSnapshot = read.get(&path).await.json().await.expect("grid JSON");
        assert!(from_read.jobs.len() > 10, "sakura runs jobs at {at}");
        assert_eq!(from_kept, from_read, "grid at {at}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_read_its_last_days_at_start_draws_its_first_staff_gantt_from_them() {
    const WARMED: &str = "warmprobe";
    let _db = database_shared().await;
    let now = Utc::now().timestamp();
    copy_sakura(WARMED, now - 3 * 86_400);
    let day = (now - 86_400, now);
    let read = spawn_app(staff_config(WARMED, 0)).await;
    let data = gantt_of(&read, WARMED, None, day).await;
    let probe = data
        .jobs
        .iter()
        .find(|job| job.end > 0 && job.end < now - 3 * 3600 && !job.job_id.contains(['_', '+']))
        .map(|job| job.job_id.clone())
        .expect("sakura's last day has jobs that ended hours ago");
    let drawn = name_of(&data, &probe);
    // Two servers keeping history, their long-span catalogues built; one reads its last two days first.
    let config = staff_config(WARMED, 300_000);
    let (warmed, cold) =
        (slurmlens::serve::http_state(&config).expect("state"), slurmlens::serve::http_state(&config).expect("state"));
    let hours = warmed.app().warm_chart_history(2).await;
    assert!((46..=48).contains(&hours), "two days up to the seal are 47 hours, read {hours}");
    assert_eq!(warmed.app().warm_chart_history(2).await, 0, "hours already kept are not read again");
    for state in [&warmed, &cold] {
        for reader in state.app().readers() {
            reader.prepare_history().await.expect("the long-span catalogue");
        }
    }
    let (warmed, cold) = (spawn_state(&config, warmed).await, spawn_state(&config, cold).await);
    admin(&format!("UPDATE {WARMED}_job_table SET job_name = 'renamed-after-start' WHERE id_job = {probe}"));
    assert_eq!(
        name_of(&gantt_of(&warmed, WARMED, None, day).await, &probe),
        drawn,
        "the warmed server draws what it read at start"
    );
    assert_eq!(
        name_of(&gantt_of(&cold, WARMED, None, day).await, &probe).as_deref(),
        Some("renamed-after-start"),
        "a server that read nothing at start reads its first window from slurmdbd"
    );
}
