//! The grid against the lab's real VictoriaMetrics and slurmdbd: the latest readings within the bound
//! and how old they are, XID codes read as the job report reads them, a future moment refused, and
//! colours that stay with a user whatever the window, page or viewer, and the running jobs' means read
//! only for the efficiency colour.

use std::collections::BTreeMap;

use chrono::Utc;
use slurmlens::config::{AnonymousAccess, VictoriaMetricsConfig};
use slurmlens::domain::blame::xid_strength;
use slurmlens_web::gantt::GanttData;
use slurmlens_web::grid::GridSnapshot;
use slurmlens_web::palette::{ColourBy, OTHER};
use slurmlens_wire::{ErrorEnvelope, EvidenceStrength, GpuReadings};

use crate::support::{CountingProxy, TestApp, database_shared, import_series, lab, spawn_app, test_config};

/// A staff server whose readings may be at most 15 minutes older than the moment shown.
async fn grid_app() -> TestApp {
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 5000,
        readings_max_age_s: 900,
        bearer_token: None,
    });
    spawn_app(config).await
}

fn uuid(node: &str, gpu: u16) -> String {
    format!("GPU-grid-{node}-{}-{gpu}", std::process::id())
}

/// Two minutes of `metric` on the four GPUs of `node`, every 15 s, ending at `last`.
async fn import(metric: &str, node: &str, last: i64, value: impl Fn(u16) -> f64) {
    let stamps: Vec<i64> = (last - 120..=last).step_by(15).map(|t| t * 1000).collect();
    import_series((0..4u16).map(|gpu| {
        serde_json::json!({
            "metric": {"__name__": metric, "gpu": gpu.to_string(), "UUID": uuid(node, gpu), "Hostname": node},
            "values": vec![value(gpu); stamps.len()],
            "timestamps": stamps,
        })
    }))
    .await;
}

async fn readings(app: &TestApp, metric: &str, at: i64) -> GpuReadings {
    let response = app.get(&format!("/api/v1/gpus/values?cluster=lab&metric={metric}&at={at}")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("readings JSON")
}

fn on_node(readings: &GpuReadings, node: &str) -> Vec<(u16, f64)> {
    readings.values.values.iter().filter(|value| value.node == node).map(|value| (value.gpu, value.value)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn grid_readings_are_the_latest_within_the_bound_and_say_how_old_they_are() {
    // Regression (review "pages a tenant and a site can trust", problem 6): at now every GPU read "no
    // data" because the last sample was 15 minutes old; XID read "no data" for healthy GPUs.
    let _db = database_shared().await;
    let app = grid_app().await;
    // A quiet minute of the lab's past, which no other test writes: twenty days ago, per process.
    let last = (Utc::now().timestamp() - 20 * 86_400 - i64::from(std::process::id() % 50_000)) / 60 * 60;
    import("DCGM_FI_DEV_GPU_UTIL", "n3", last, |gpu| 5.0 + 10.0 * f64::from(gpu)).await;
    let codes = [79.0, 31.0, 0.0, 0.0];
    import("DCGM_FI_DEV_XID_ERRORS", "n4", last, |gpu| codes[usize::from(gpu)]).await;

    // Ten minutes after the last scrape: those readings, and when they were taken.
    let util = readings(&app, "gpu_util", last + 600).await;
    assert_eq!(util.readings_at.map(|at| at.timestamp()), Some(last), "{util:?}");
    assert_eq!(util.values.at.timestamp(), last + 600, "`at` stays the moment asked for");
    assert_eq!(on_node(&util, "n3"), [(0, 5.0), (1, 15.0), (2, 25.0), (3, 35.0)]);
    assert_eq!(util.max_age_s, 900);
    // Past the bound: none, and the answer says so.
    let stale = readings(&app, "gpu_util", last + 960).await;
    assert_eq!((stale.readings_at, stale.values.values.len()), (None, 0), "{stale:?}");
    assert_eq!(stale.values.message.as_deref(), Some("no gpu_util readings in the 15 min before this moment"));

    // XID: each code present reads as the report's failure evidence reads it.
    let xid = readings(&app, "xid", last + 600).await;
    assert_eq!(on_node(&xid, "n4"), [(0, 79.0), (1, 31.0), (2, 0.0), (3, 0.0)]);
    let read: Vec<(u32, EvidenceStrength, &str)> =
        xid.xid_codes.iter().map(|code| (code.code, code.strength, code.meaning.as_str())).collect();
    assert_eq!(
        read,
        [(31, EvidenceStrength::Application, xid_strength(31).1), (79, EvidenceStrength::Strong, xid_strength(79).1)]
    );

    // The page at that moment says how old the readings are and tells the cells apart.
    let html = app.get(&format!("/grid?cluster=lab&at={}&metric=xid", last + 600)).await.text().await.expect("page");
    let cell = |node: &str, gpu: u16| {
        let marker = format!("data-node=\"{node}\" data-gpu=\"{gpu}\"");
        let at = html.find(&marker).unwrap_or_else(|| panic!("no cell {node}/{gpu}"));
        html[html[..at].rfind('<').expect("tag")..at + html[at..].find('>').expect("tag end")].to_string()
    };
    assert!(cell("n4", 0).contains("xid-hardware") && cell("n4", 0).contains("GPU has fallen off the bus"));
    assert!(cell("n4", 1).contains("xid-application"), "{}", cell("n4", 1));
    assert!(cell("n4", 2).contains("healthy"), "{}", cell("n4", 2));
    assert!(cell("n2", 0).contains("unmonitored"), "no XID series on n2 then: {}", cell("n2", 0));
    assert!(html.contains("xid readings from") && html.contains("10 min before this moment"), "{html}");

    let ours = ["n3", "n4"].iter().flat_map(|node| (0..4).map(move |gpu| uuid(node, gpu))).collect::<Vec<_>>();
    let deleted = reqwest::Client::new()
        .post(format!("{}/api/v1/admin/tsdb/delete_series", lab().var("SLURMLENS_VM_URL")))
        .form(&[("match[]", format!("{{UUID=~\"{}\"}}", ours.join("|")))])
        .send()
        .await
        .expect("delete series");
    assert!(deleted.status().is_success());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_moment_in_the_future_is_refused_and_changes_nothing() {
    // Regression (review problem 9): `?at=2030-03-17` drew today's running jobs four years ahead.
    let _db = database_shared().await;
    let app = grid_app().await;
    for path in [
        "/api/v1/gpus/values?cluster=lab&metric=gpu_util&at=2030-03-17T00:00:00Z",
        "/api/v1/gpus/busy?cluster=lab&at=2030-03-17T00:00:00Z",
        "/api/v1/gpus/held?cluster=lab&at=2030-03-17T00:00:00Z",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 400, "{path}");
        let envelope: ErrorEnvelope = response.json().await.expect("error JSON");
        assert_eq!(envelope.error.parameter.as_deref(), Some("at"), "{path}");
        assert!(envelope.error.message.starts_with("2030-03-17 00:00 UTC is in the future"), "{envelope:?}");
    }
    let response = app.get("/grid?cluster=lab&at=2030-03-17").await;
    assert_eq!(response.status(), 400);
    let html = response.text().await.expect("page");
    assert!(html.contains("2030-03-17 00:00Z is in the future: GPUs are shown up to now"), "{html}");
    assert!(!html.contains("data-testid=\"gpu-cell\""), "nothing is drawn for the future");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_keeps_one_colour_across_windows_and_pages_and_no_job_is_grey() {
    // Regression (review problem 5): colours went to the top nine users of the view, so u20 was navy
    // at 1 d and light blue at 7 d, and carol's 256-GPU job was grey "other".
    let _db = database_shared().await;
    let app = grid_app().await;
    let end = Utc::now().timestamp() / 3600 * 3600 - 86_400;
    let gantt = |start: i64, user: Option<&'static str>| {
        let app = &app;
        async move {
            let path = format!("/web/v1/gantt?cluster=sakura&start={start}&end={end}");
            let response = match user {
                Some(user) => app.get_as(user, &path).await,
                None => app.get(&path).await,
            };
            assert_eq!(response.status(), 200, "{path}");
            response.json::<GanttData>().await.expect("Gantt JSON")
        }
    };
    let (day, week) = (gantt(end - 86_400, None).await, gantt(end - 7 * 86_400, None).await);
    assert!(day.slots.users.len() >= 10, "a day of sakura has many users: {:?}", day.slots.users);
    for (user, slot) in &day.slots.users {
        assert_eq!(week.slots.users.get(user), Some(slot), "{user} keeps its colour from a day to a week");
    }
    for data in [&day, &week] {
        let categories = data.categories(ColourBy::User);
        let table = data.colour_table(ColourBy::User, &categories);
        assert!(table.iter().all(|colour| *colour != OTHER), "no job is grey");
        let largest = (0..data.jobs.len()).max_by_key(|&index| data.jobs[index].gpus).expect("jobs");
        let user = &data.users[data.jobs[largest].user as usize];
        assert_eq!(table[largest], data.slots.user(user), "the largest job has its user's colour");
        assert_eq!(categories.legend.len(), data.users.len(), "the legend names every user drawn");
    }
    // The grid at a moment of that day: the same slots.
    let grid: GridSnapshot =
        app.get(&format!("/web/v1/grid?cluster=sakura&at={}", end - 3600)).await.json().await.expect("grid JSON");
    assert!(!grid.slots.users.is_empty());
    for (user, slot) in &grid.slots.users {
        assert_eq!(week.slots.users.get(user), Some(slot), "{user}'s colour on the grid is its Gantt colour");
    }
    // A tenant learns their own slot, the one staff see, and no one else's.
    let tenant = gantt(end - 86_400, Some("u20")).await;
    let expected: BTreeMap<String, u32> =
        week.slots.users.iter().filter(|(user, _)| *user == "u20").map(|(u, s)| (u.clone(), *s)).collect();
    assert_eq!(tenant.slots.users, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_efficiency_colour_reads_the_running_jobs_means() {
    // Running jobs' means so far are most of a grid's cost: every other colour goes without them.
    let _db = database_shared().await;
    let app = grid_app().await;
    let at = Utc::now().timestamp() - 60;
    let grid = |colour: ColourBy| {
        let app = &app;
        async move {
            let path = format!("/web/v1/grid?cluster=sakura&at={at}&colour={}", colour.as_str());
            let response = app.get(&path).await;
            assert_eq!(response.status(), 200, "{path}");
            response.json::<GridSnapshot>().await.expect("grid JSON")
        }
    };
    let by_efficiency = grid(ColourBy::Efficiency).await;
    let classed = by_efficiency.jobs.iter().filter(|job| job.efficiency > 0).count();
    assert!(classed > 0, "sakura's running jobs with GPU readings have an efficiency class");
    for colour in [ColourBy::Job, ColourBy::User, ColourBy::State] {
        let other = grid(colour).await;
        let ids = |grid: &GridSnapshot| grid.jobs.iter().map(|job| job.job_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&other), ids(&by_efficiency), "the same jobs, coloured {}", colour.as_str());
        assert!(other.jobs.iter().all(|job| job.efficiency == 0), "no means read for the {} colour", colour.as_str());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_running_jobs_means_are_read_once_a_minute_for_every_grid() {
    // A second grid coloured by efficiency within the minute costs VictoriaMetrics what a grid
    // coloured by job does: the running jobs' means are shared, not read again.
    let _db = database_shared().await;
    let proxy = CountingProxy::start().await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: proxy.url.clone(),
        timeout_ms: 5000,
        readings_max_age_s: 900,
        bearer_token: None,
    });
    let app = spawn_app(config).await;
    let at = Utc::now().timestamp() - 60;
    let grid = |colour: ColourBy| {
        let (app, proxy) = (&app, &proxy);
        async move {
            let before = proxy.count();
            let path = format!("/web/v1/grid?cluster=sakura&at={at}&colour={}", colour.as_str());
            let response = app.get(&path).await;
            assert_eq!(response.status(), 200, "{path}");
            let grid = response.json::<GridSnapshot>().await.expect("grid JSON");
            (grid, proxy.count() - before)
        }
    };
    let (first, read) = grid(ColourBy::Efficiency).await;
    let (_, by_job) = grid(ColourBy::Job).await;
    assert!(read > by_job, "the first grid by efficiency reads the means: {read} queries against {by_job}");
    let (again, shared) = grid(ColourBy::Efficiency).await;
    assert_eq!(shared, by_job, "the second grid by efficiency reads no means again");
    let classes =
        |grid: &GridSnapshot| grid.jobs.iter().map(|job| (job.job_id.clone(), job.efficiency)).collect::<Vec<_>>();
    assert_eq!(classes(&again), classes(&first), "and colours each job as the first did");
    assert!(first.jobs.iter().any(|job| job.efficiency > 0), "sakura's running jobs have means");
}
