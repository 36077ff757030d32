//! Who sees what on the grid: another tenant's GPUs reach a user only as busy counts per
//! node, never as a job id, user, name or reading; GPU readings are sent for the user's own GPUs only;
//! staff still see every GPU.

use std::time::{Duration, Instant};

use chrono::Utc;
use slurmlens::config::{AnonymousAccess, DatabaseConfig, VictoriaMetricsConfig};
use slurmlens::domain::gpu::{GpuAllocation, GpuRef, parse_gpu_indices};
use slurmlens::store::Store;
use slurmlens_wire::{BusyGpus, GpuValues, HeldGpu};

use crate::support::{TestApp, database_shared, fresh_database, lab, slurm, spawn_app, submit_holding, test_config};

/// Waits until the job runs, then answers its `IDX:` on its node (from `scontrol show job -d`).
async fn running_indices(job_id: u32) -> Vec<u16> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let text = slurm("scontrol", &["show", "job", "-d", &job_id.to_string()]);
        if text.contains("JobState=RUNNING")
            && let Some(idx) = text.split("IDX:").nth(1).and_then(|rest| rest.split(')').next())
        {
            return parse_gpu_indices(idx).expect("IDX list parses");
        }
        assert!(Instant::now() < deadline, "job {job_id} never ran with GPUs:\n{text}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The UUID this run gives a GPU: unique per run, and unlike the report test's, so neither deletes
/// the other's series.
fn test_uuid(node: &str, gpu: u16) -> String {
    format!("GPU-tenancy-{node}-{}-{gpu}", std::process::id())
}

/// dcgm-exporter's utilisation of every GPU of `node`, one sample every 2 s over `[from, to]`.
async fn import_gpu_util(node: &str, from: i64, to: i64) {
    let timestamps: Vec<i64> = (from..=to).step_by(2).map(|t| t * 1000).collect();
    crate::support::import_series((0..4u16).map(|gpu| {
        serde_json::json!({
            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": gpu.to_string(), "UUID": test_uuid(node, gpu),
                       "Hostname": node},
            "values": vec![40.0 + 10.0 * f64::from(gpu); timestamps.len()],
            "timestamps": timestamps,
        })
    }))
    .await;
}

async fn body_as(app: &TestApp, user: Option<&str>, path: &str) -> String {
    let response = match user {
        Some(user) => app.get_as(user, path).await,
        None => app.get(path).await,
    };
    assert_eq!(response.status(), 200, "{path} as {user:?}");
    response.text().await.expect("body")
}

/// Every shape in which a job id reaches a page or a JSON body.
fn names_job(body: &str, job_id: u32) -> Option<String> {
    [
        format!("data-job=\"{job_id}\""),
        format!("/jobs/{job_id}?"),
        format!("/jobs/{job_id}\""),
        format!("job {job_id} ("),
        format!("\"job_id\":\"{job_id}\""),
        format!("\"job_id\":{job_id},"),
        format!("\"job_id_raw\":{job_id},"),
    ]
    .into_iter()
    .find(|shape| body.contains(shape.as_str()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_sees_another_tenants_gpus_as_busy_counts_and_reads_only_its_own_gpus() {
    let _db = database_shared().await;
    let vm_url = lab().var("SLURMLENS_VM_URL").to_string();
    let database_url = fresh_database("tenancy").await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: vm_url.clone(),
        timeout_ms: 5000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.database = Some(DatabaseConfig { url: database_url.clone() });
    config.report.archive_interval_s = 0;
    let app = spawn_app(config).await;

    // alice and bob share one node, two GPUs each, until the release file exists.
    let release = lab().dir.join(format!("jobs/tenancy-release-{}", std::process::id()));
    let _ = std::fs::remove_file(&release);
    let (picking, node) = crate::support::reserve_gpu_node(4).await;
    let alice_name = format!("tenancy-alice-{}", std::process::id());
    let alice = submit_holding(&alice_name, "alice", &node, 2, &release, 0);
    let bob = submit_holding(&format!("tenancy-bob-{}", std::process::id()), "bob", &node, 2, &release, 0);
    let alice_gpus = running_indices(alice).await;
    let bob_gpus = running_indices(bob).await;
    drop(picking);
    assert!(alice_gpus.iter().all(|gpu| !bob_gpus.contains(gpu)), "{alice_gpus:?} vs {bob_gpus:?}");

    // The plugin's records of both jobs, as its prologs would send them.
    let store = Store::new(&database_url, Duration::from_secs(5)).expect("store");
    let cluster = "lab".parse().expect("cluster");
    let now = Utc::now();
    for (job_id, gpus) in [(alice, &alice_gpus), (bob, &bob_gpus)] {
        let records: Vec<GpuAllocation> = gpus
            .iter()
            .map(|&index| GpuAllocation {
                job_id,
                step: "job".into(),
                gpu: GpuRef { node: node.clone(), index },
                uuid: Some(test_uuid(&node, index)),
                cgroup_path: None,
                first_seen: now,
                last_seen: now,
                ended_at: None,
            })
            .collect();
        store.upsert_gpu_allocations(&cluster, &records).await.expect("record GPUs");
    }
    // The moment asked about: after both starts as slurmdbd recorded them, and already past.
    let mut started = 0;
    for job_id in [alice, bob] {
        let deadline = Instant::now() + Duration::from_secs(60);
        let start = loop {
            let path = format!("/api/v1/jobs/{job_id}?cluster=lab");
            let response = app.get_as("root", &path).await;
            // slurmctld sends a job to slurmdbd asynchronously: running by `scontrol`, it may have no row
            // yet (404), then a pending row with an expected start time (state PENDING, no AllocTRES).
            // Wait for the row of the running job.
            let status = response.status();
            let text = response.text().await.expect("body");
            let job = match status.as_u16() {
                404 => None,
                200 => Some(serde_json::from_str::<slurmlens_wire::JobDetail>(&text).expect("job JSON").job),
                other => panic!("{path}: {other} {text}"),
            };
            if let Some(start) =
                job.as_ref().and_then(|job| job.start.filter(|_| job.state == "RUNNING" && job.alloc_gpus > 0))
            {
                break start.timestamp();
            }
            assert!(Instant::now() < deadline, "slurmdbd never recorded job {job_id} running: {job:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        started = started.max(start);
    }
    let at = started + 1;
    while Utc::now().timestamp() <= at {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    import_gpu_util(&node, at - 60, at).await;

    // bob: alice's two GPUs are a count on the node, nothing more.
    let busy_path = format!("/api/v1/gpus/busy?cluster=lab&at={at}");
    let busy_body = body_as(&app, Some("bob"), &busy_path).await;
    let busy: Vec<BusyGpus> = serde_json::from_str(&busy_body).expect("busy JSON");
    let on_node = busy.iter().find(|entry| entry.node == node).map(|entry| entry.gpus);
    if on_node != Some(2) {
        // Say what slurmdbd held about alice's job at that moment: a flake here was never explained.
        let alice_id = alice.to_string();
        let sacct = slurm("sacct", &["-X", "-P", "-o", "JobID,State,Start,End,NodeList,AllocTRES", "-j", &alice_id]);
        panic!("alice's GPUs on {node} are busy for bob at {at}: {busy_body}\nsacct:\n{sacct}");
    }

    // bob's readings: his own GPUs of the node, none of alice's.
    let values_path = format!("/api/v1/gpus/values?cluster=lab&metric=gpu_util&at={at}");
    let values_body = body_as(&app, Some("bob"), &values_path).await;
    let values: GpuValues = serde_json::from_str(&values_body).expect("values JSON");
    assert_eq!(values.status, slurmlens_wire::ValuesState::Ok, "{values:?}");
    let on_node: Vec<u16> = values.values.iter().filter(|v| v.node == node).map(|v| v.gpu).collect();
    assert_eq!(on_node, bob_gpus, "bob reads exactly his GPUs of {node}: {values:?}");

    let held_body = body_as(&app, Some("bob"), &format!("/api/v1/gpus/held?cluster=lab&at={at}")).await;
    let held: Vec<HeldGpu> = serde_json::from_str(&held_body).expect("held JSON");
    assert!(held.iter().any(|gpu| gpu.job_id == bob), "bob's records are there: {held_body}");
    assert!(held.iter().all(|gpu| gpu.job_id != alice), "{held_body}");

    let grid_html = body_as(&app, Some("bob"), &format!("/grid?cluster=lab&at={at}")).await;
    let metric_html = body_as(&app, Some("bob"), &format!("/grid?cluster=lab&at={at}&metric=gpu_util")).await;
    let grid_json = body_as(&app, Some("bob"), &format!("/web/v1/grid?cluster=lab&at={at}")).await;
    for html in [&grid_html, &metric_html] {
        assert!(names_job(html, bob).is_some(), "bob's own job is on his grid");
        for gpu in &alice_gpus {
            let cell = format!("data-node=\"{node}\" data-gpu=\"{gpu}\"");
            let from = html.find(&cell).unwrap_or_else(|| panic!("no cell {node}/{gpu}"));
            assert!(html[from..from + 300].contains("data-busy=\"true\""), "{}", &html[from..from + 300]);
        }
    }
    for (what, body) in [
        ("busy", &busy_body),
        ("values", &values_body),
        ("held", &held_body),
        ("grid page", &grid_html),
        ("grid page with metric", &metric_html),
        ("grid JSON", &grid_json),
    ] {
        assert!(!body.contains("alice"), "{what} names alice: {body}");
        assert!(!body.contains(&alice_name), "{what} names alice's job: {body}");
        assert_eq!(names_job(body, alice), None, "{what} names alice's job {alice}: {body}");
    }

    // Staff: every GPU of the node, by name; nothing is busy for them.
    let values: GpuValues = serde_json::from_str(&body_as(&app, Some("root"), &values_path).await).expect("JSON");
    let on_node: Vec<u16> = values.values.iter().filter(|v| v.node == node).map(|v| v.gpu).collect();
    assert_eq!(on_node, [0, 1, 2, 3], "{values:?}");
    assert_eq!(body_as(&app, Some("root"), &busy_path).await, "[]");
    assert!(names_job(&body_as(&app, Some("root"), &format!("/grid?cluster=lab&at={at}")).await, alice).is_some());

    // Nobody signed in: neither occupancy nor readings, only the sign-in answer.
    for path in [&busy_path, &values_path] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 401, "{path}");
        let body = response.text().await.expect("body");
        assert!(body.contains("unauthorized") && names_job(&body, alice).is_none(), "{body}");
    }

    std::fs::write(&release, b"").expect("releasing the jobs");
    // Only this run's series: other tests import on the same nodes at the same time.
    let ours = (0..4u16).map(|gpu| test_uuid(&node, gpu)).collect::<Vec<_>>().join("|");
    let deleted = reqwest::Client::new()
        .post(format!("{vm_url}/api/v1/admin/tsdb/delete_series"))
        .form(&[("match[]", format!("{{Hostname=\"{node}\",UUID=~\"{ours}\"}}"))])
        .send()
        .await
        .expect("delete series");
    assert!(deleted.status().is_success());
}
