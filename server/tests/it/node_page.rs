//! A node's page (`/api/v1/nodes/{name}`) and the health badges (`/api/v1/node_health`) against the
//! lab's real slurmctld, slurmdbd and VictoriaMetrics: a drain set with `scontrol` shows as an event; a
//! job of alice's run on a node whose GPU then raised XID 79 (with ECC, remap, clock-event and
//! violation series this test writes) shows as that fault's job with its archived verdict, named to
//! staff and to alice, counted for bob; an unknown node is a 404 and a bad window a 400.

use std::time::Duration;

use chrono::Utc;
use slurmlens::config::{AnonymousAccess, VictoriaMetricsConfig};
use slurmlens_wire::{Blame, ClockEventReason, ErrorEnvelope, EvidenceSource, HealthLevel, NodePage, NodesHealth};

use crate::support::{
    TestApp, database_shared, fresh_database, import_series, lab, reserve_gpu_node, slurm, spawn_app, submit_holding,
    test_config,
};

/// The GPU index this test writes series for (the lab's nodes have four).
const GPU: u16 = 3;

/// A server with the lab's VictoriaMetrics and a store of its own; anonymous viewers see nothing.
async fn node_app() -> (TestApp, String) {
    let database = fresh_database("node_page").await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(slurmlens::config::DatabaseConfig { url: database.clone() });
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 8000,
        readings_max_age_s: 900,
        bearer_token: None,
    });
    (spawn_app(config).await, database)
}

/// `(time_submit, time_start, time_end)` of a lab job once slurmdbd has its end (polls up to 2 min).
async fn ended(job_id: u32) -> (u64, u64, u64) {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let row: Option<(u64, u64, u64)> = sqlx::query_as(
            "SELECT CAST(time_submit AS UNSIGNED), CAST(time_start AS UNSIGNED), CAST(time_end AS UNSIGNED) \
             FROM lab_job_table WHERE id_job = ? AND time_end > 0 ORDER BY job_db_inx DESC LIMIT 1",
        )
        .bind(job_id)
        .fetch_optional(&pool)
        .await
        .expect("reading lab_job_table");
        if let Some(row) = row {
            pool.close().await;
            return row;
        }
        assert!(std::time::Instant::now() < deadline, "job {job_id} did not end in slurmdbd within 2 minutes");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn series(metric: &str, node: &str, points: &[(i64, f64)]) -> serde_json::Value {
    serde_json::json!({
        "metric": {"__name__": metric, "gpu": GPU.to_string(), "UUID": format!("GPU-node-page-{node}-{GPU}-{}", std::process::id()), "Hostname": node},
        "values": points.iter().map(|&(_, value)| value).collect::<Vec<f64>>(),
        "timestamps": points.iter().map(|&(at, _)| at * 1000).collect::<Vec<i64>>(),
    })
}

async fn page(app: &TestApp, user: &str, query: &str) -> NodePage {
    let response = app.get_as(user, &format!("/api/v1/nodes/{query}")).await;
    assert_eq!(response.status(), 200, "{query} as {user}");
    response.json().await.expect("a node page")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_page_shows_its_fault_the_job_then_running_and_its_verdict_scoped_to_the_viewer() {
    let _db = database_shared().await;
    let (app, database) = node_app().await;
    let (picking, node) = reserve_gpu_node(1).await;
    let release = lab().dir.join(format!("node-page-release-{}", std::process::id()));
    std::fs::write(&release, "").expect("release file");
    let job_name = format!("node-page-victim-{}", std::process::id());
    let job_id = submit_holding(&job_name, "alice", &node, 1, &release, 2);
    drop(picking);
    let (time_submit, start, end) = ended(job_id).await;
    let (start, end) = (start as i64, end as i64);

    // The GPU's faults while the job ran: XID 79, two double-bit ECC errors, a pending remap, clocks held
    // down by heat (0x48) for 5 s, and its temperature and power.
    let fault_at = start + 1;
    let before = start - 60;
    // Every sample in the past when the page is read.
    let after = end.max(fault_at) + 2;
    while Utc::now().timestamp() <= after + 1 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    import_series([
        series("DCGM_FI_DEV_XID_ERRORS", &node, &[(before, 0.0), (fault_at, 79.0), (after, 0.0)]),
        series("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", &node, &[(before, 0.0), (fault_at, 2.0), (after, 2.0)]),
        series("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", &node, &[(before, 10.0), (fault_at, 12.0), (after, 12.0)]),
        series("DCGM_FI_DEV_ROW_REMAP_PENDING", &node, &[(before, 0.0), (fault_at, 1.0), (after, 1.0)]),
        series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", &node, &[(before, 1.0), (fault_at, 72.0), (after, 4.0)]),
        series("DCGM_FI_DEV_THERMAL_VIOLATION", &node, &[(before, 0.0), (fault_at, 5e9), (after, 5e9)]),
        series("DCGM_FI_DEV_GPU_TEMP", &node, &[(before, 40.0), (fault_at, 91.0), (after, 45.0)]),
        series("DCGM_FI_DEV_POWER_USAGE", &node, &[(before, 80.0), (fault_at, 650.0), (after, 90.0)]),
    ])
    .await;
    // The job's archived verdict, as the archiver would have stored it.
    let store = slurmlens::store::Store::new(&database, Duration::from_secs(10)).expect("store");
    let digest = slurmlens::store::ReportDigest {
        mean_gpu_util: None,
        mean_tensor_active: None,
        blame: Some("infrastructure".into()),
        has_metrics: true,
        energy_kwh: None,
        measured_share: None,
        generation: slurmlens::app::report::GENERATION,
    };
    store.archive_report(&"lab".parse().expect("cluster"), job_id, time_submit, "{}", &digest).await.expect("archive");

    // VictoriaMetrics makes an import searchable within a few seconds: read until it shows.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // A new `end` each time: VictoriaMetrics caches a range query's answer by its parameters.
    let (staff, query) = loop {
        let query = format!("{node}?cluster=lab&start={}&end={}", start - 600, Utc::now().timestamp());
        let staff = page(&app, "root", &query).await;
        let shown = staff
            .faults
            .iter()
            .any(|fault| fault.source == EvidenceSource::Xid && fault.jobs.iter().any(|job| job.job_id == job_id));
        if shown || std::time::Instant::now() > deadline {
            break (staff, query);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let gpu = staff.gpus.iter().find(|gpu| gpu.gpu == GPU).unwrap_or_else(|| panic!("GPU {GPU}: {staff:?}"));
    assert_eq!(gpu.xid_codes.iter().map(|x| x.code).collect::<Vec<_>>(), [79]);
    assert_eq!(gpu.ecc_dbe_aggregate, Some(2.0));
    assert_eq!(gpu.row_remap_pending, Some(true));
    // Earlier runs' series of this GPU in the window merge by their highest: at least this run's 5 s.
    assert!(gpu.thermal_violation_s.is_some_and(|seconds| seconds >= 5.0), "{gpu:?}");
    assert_eq!(gpu.temperature_max, Some(91.0));
    assert!(gpu.clock_event_reasons.contains(&ClockEventReason::HwThermalSlowdown), "{gpu:?}");
    assert!(gpu.clock_event_reasons.contains(&ClockEventReason::HwSlowdown), "{gpu:?}");
    assert_eq!(gpu.clock_event_reasons_now, [ClockEventReason::SwPowerCap]);
    assert_eq!(staff.health.level, HealthLevel::Fault, "{:?}", staff.health);
    assert!(staff.health.reasons.iter().any(|r| r == &format!("GPU {GPU}: XID 79 (GPU has fallen off the bus)")));
    assert!(!staff.timelines_hidden && staff.temperature.iter().any(|s| s.gpu == GPU));
    let xid = staff
        .faults
        .iter()
        .find(|fault| {
            fault.source == EvidenceSource::Xid
                && fault.gpu == Some(GPU)
                && fault.jobs.iter().any(|job| job.job_id == job_id)
        })
        .unwrap_or_else(|| panic!("an XID fault: {:?}", staff.faults));
    assert!(xid.from.timestamp() <= fault_at && fault_at <= xid.at.timestamp(), "{xid:?}");
    let victim = xid.jobs.iter().find(|job| job.job_id == job_id).unwrap_or_else(|| panic!("job {job_id}: {xid:?}"));
    assert_eq!((victim.user.as_str(), victim.job_name.as_str()), ("alice", job_name.as_str()));
    assert_eq!(victim.blame, Some(Blame::Infrastructure));
    assert!(staff.faults.iter().any(|fault| fault.source == EvidenceSource::Ecc), "{:?}", staff.faults);

    // alice sees her job by name; bob only counts it, and no timeline of other tenants' work.
    let alice = page(&app, "alice", &query).await;
    let mine = |fault: &&slurmlens_wire::NodeFault| fault.source == EvidenceSource::Xid && fault.at == xid.at;
    let alice_xid = alice.faults.iter().find(mine).expect("the fault");
    assert!(alice_xid.jobs.iter().any(|job| job.job_id == job_id));
    let response = app.get_as("bob", &format!("/api/v1/nodes/{query}")).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    assert!(!text.contains("alice") && !text.contains(&job_name), "bob's page names alice's job: {text}");
    let bob: NodePage = serde_json::from_str(&text).expect("a node page");
    let bob_xid = bob.faults.iter().find(mine).expect("the fault");
    // bob may have had jobs of his own there then (other tests run beside this one): those only.
    assert!(bob_xid.jobs.iter().all(|job| job.user == "bob") && bob_xid.other_jobs >= 1, "{bob_xid:?}");
    assert!(bob.timelines_hidden && bob.temperature.is_empty() && bob.power.is_empty());
    assert_eq!(bob.health, staff.health, "a node's health is not per-tenant data");

    // The grid's badges weigh the same GPU.
    let response = app.get_as("root", &format!("/api/v1/node_health?cluster=lab&start={}", start - 600)).await;
    assert_eq!(response.status(), 200);
    let health: NodesHealth = response.json().await.expect("health");
    let badge = health.nodes.iter().find(|item| item.node == node).expect("the node's badge");
    assert_eq!(badge.health.level, HealthLevel::Fault, "{badge:?}");
    std::fs::remove_file(&release).ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_set_with_scontrol_shows_among_the_nodes_events_with_its_reason() {
    let _db = database_shared().await;
    let (app, _) = node_app().await;
    // An idle node: one running a job only turns DRAINING, and slurmctld records no event of that in
    // slurmdbd until its jobs end (the mix's `running` job holds a node for half an hour).
    // Other tests' jobs come and go: wait for one.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let node = loop {
        let idle = slurm("sinfo", &["-h", "-N", "-p", "gpu", "-t", "idle", "-o", "%N"]);
        if let Some(node) =
            ["n4", "n3", "n2", "n1"].into_iter().find(|node| idle.lines().any(|line| line.trim() == *node))
        {
            break node;
        }
        assert!(std::time::Instant::now() < deadline, "no node of the lab was idle for two minutes");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let reason = format!("slurmlens node page test {}", std::process::id());
    let since = Utc::now().timestamp() - 5;
    slurm("scontrol", &["update", &format!("nodename={node}"), "state=drain", &format!("reason={reason}")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let found = loop {
        let page = page(&app, "bob", &format!("{node}?cluster=lab&start={since}")).await;
        if let Some(event) = page.events.iter().find(|event| event.reason == reason) {
            break (event.clone(), page);
        }
        if std::time::Instant::now() > deadline {
            slurm("scontrol", &["update", &format!("nodename={node}"), "state=resume"]);
            panic!("the drain did not reach slurmdbd within a minute: {:?}", page.events);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // While it is drained, the grid at a moment before the drain shows the node as it was then, not as
    // it became.
    let response = app.get_as("root", &format!("/api/v1/node_health?cluster=lab&end={}", since - 180)).await;
    let before: Option<NodesHealth> = response.json().await.ok();
    slurm("scontrol", &["update", &format!("nodename={node}"), "state=resume"]);
    let badge = before.and_then(|health| health.nodes.into_iter().find(|item| item.node == node));
    assert!(
        badge.as_ref().is_some_and(|badge| badge.health.reasons.iter().all(|line| !line.contains(&reason))),
        "{badge:?}"
    );
    let (event, page) = found;
    assert!(event.state.contains("DRAIN"), "{event:?}");
    assert!(
        page.faults.iter().any(|fault| fault.source == EvidenceSource::NodeEvent && fault.detail.contains(&reason))
    );
    assert!(page.state.contains("DRAIN"), "open while drained: {}", page.state);
    assert!(page.health.level >= HealthLevel::Warn, "{:?}", page.health);
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_nodes_are_404_bad_windows_400_and_anonymous_viewers_401() {
    let _db = database_shared().await;
    let (app, _) = node_app().await;
    let response = app.get_as("root", "/api/v1/nodes/no-such-node?cluster=lab").await;
    assert_eq!(response.status(), 404);
    let envelope: ErrorEnvelope = response.json().await.expect("envelope");
    assert_eq!(envelope.error.code, "not_found");
    for query in [
        "start=2026-01-10T00:00:00Z&end=2026-01-09T00:00:00Z",
        "start=2025-01-01T00:00:00Z&end=2026-01-01T00:00:00Z",
        "start=yesterday",
        "colour=red",
    ] {
        let response = app.get_as("root", &format!("/api/v1/nodes/n1?cluster=lab&{query}")).await;
        assert_eq!(response.status(), 400, "{query}");
        let envelope: ErrorEnvelope = response.json().await.expect("envelope");
        assert_eq!(envelope.error.code, "invalid_parameter", "{query}");
    }
    assert_eq!(app.get_as("root", "/api/v1/nodes/n1?cluster=nowhere").await.status(), 400);
    assert_eq!(app.get("/api/v1/nodes/n1?cluster=lab").await.status(), 401);
    assert_eq!(app.get("/api/v1/node_health?cluster=lab").await.status(), 401);
}
