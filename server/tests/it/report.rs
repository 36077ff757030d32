//! The per-job report against the lab's real VictoriaMetrics and Slurm.

use std::time::{Duration, Instant};

use chrono::Utc;
use slurmlens::config::{AnonymousAccess, Config, VictoriaMetricsConfig};
use slurmlens::domain::gpu::{GpuAllocation, GpuRef, parse_gpu_indices};
use slurmlens::store::Store;
use slurmlens_wire::{JobReport, VerdictKind};

use crate::support::{TestApp, database_shared, lab, slurm, spawn_app, submit_holding, test_config};

fn report_config(vm_url: &str, timeout_ms: u64) -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: vm_url.to_string(),
        timeout_ms,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.database = Some(slurmlens::config::DatabaseConfig { url: lab().var("SLURMLENS_DATABASE_URL").to_string() });
    config.report.archive_delay_s = 0;
    config.report.archive_interval_s = 0;
    config
}

async fn store() -> Store {
    let store = Store::new(lab().var("SLURMLENS_DATABASE_URL"), Duration::from_secs(5)).expect("store");
    store.migrate().await.expect("migrations apply");
    store
}

/// `IDX:` of a running job on the report node, from `scontrol show job -d`.
fn gpu_indices(job_id: u32) -> Vec<u16> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = slurm("scontrol", &["show", "job", "-d", &job_id.to_string()]);
        if let Some(idx) = text.split("IDX:").nth(1).and_then(|rest| rest.split(')').next()) {
            return parse_gpu_indices(idx).expect("IDX list parses");
        }
        assert!(Instant::now() < deadline, "job {job_id} never got GPUs:\n{text}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits until squeue says RUNNING; panics with scontrol's view of the job otherwise.
async fn wait_running(job_id: u32, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let state = slurm("squeue", &["-h", "-o", "%T", "-j", &job_id.to_string()]);
        if state.trim() == "RUNNING" {
            return;
        }
        if Instant::now() >= deadline {
            let shown = slurm("scontrol", &["show", "job", "-d", &job_id.to_string()]);
            panic!("job {job_id} is {:?}, not RUNNING, after {timeout:?}:\n{shown}", state.trim());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn wait_until_done(job_id: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let state = slurm("sacct", &["-n", "-X", "-P", "-o", "State", "-j", &job_id.to_string()]);
        if state.trim().starts_with("COMPLETED") {
            return;
        }
        assert!(Instant::now() < deadline, "job {job_id} not done: {state}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The UUID this run gives a GPU of the report node. Unique per run: VictoriaMetrics keeps a deleted
/// series' id cached, so samples re-imported under the labels of a series an earlier run deleted
/// stay invisible.
fn test_uuid(node: &str, gpu: u16) -> String {
    static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| std::time::SystemTime::UNIX_EPOCH.elapsed().map(|d| d.as_millis()).unwrap_or(0));
    format!("GPU-test-{node}-{run}-{gpu}")
}

/// Imports DCGM-like series for every GPU of the report node, one sample every 2 s over the window;
/// each GPU has its own level so a wrong attribution shows.
async fn import_gpu_series(node: &str, from: i64, to: i64) {
    let timestamps: Vec<i64> = (from..=to).step_by(2).map(|t| t * 1000).collect();
    let mut lines = Vec::new();
    for gpu in 0..4u16 {
        let series = [
            ("DCGM_FI_DEV_GPU_UTIL", 55.0 + 13.0 * f64::from(gpu), 3.0),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.05 + 0.15 * f64::from(gpu), 0.02),
            ("DCGM_FI_DEV_FB_USED", 10_000.0 + 1000.0 * f64::from(gpu), 500.0),
            ("DCGM_FI_DEV_FB_FREE", 70_000.0, 0.0),
            ("DCGM_FI_DEV_POWER_USAGE", 300.0 + 50.0 * f64::from(gpu), 30.0),
        ];
        for (name, level, wobble) in series {
            let values: Vec<f64> =
                timestamps.iter().enumerate().map(|(i, _)| level + wobble * ((i as f64) * 0.7).sin()).collect();
            lines.push(gpu_line(node, gpu, name, values, &timestamps));
        }
        // The energy counter (mJ since the driver loaded), rising with the power drawn. It follows the
        // clock, not this import, so the series of an earlier run on the same GPU agree with it.
        let watts = 300.0 + 50.0 * f64::from(gpu);
        let energy = timestamps.iter().map(|&ms| watts * (ms / 1000 - 1_790_000_000) as f64 * 1000.0).collect();
        lines.push(gpu_line(node, gpu, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", energy, &timestamps));
    }
    crate::support::import_series(lines).await;
}

fn gpu_line(node: &str, gpu: u16, name: &str, values: Vec<f64>, timestamps: &[i64]) -> serde_json::Value {
    serde_json::json!({
        "metric": {"__name__": name, "gpu": gpu.to_string(), "UUID": test_uuid(node, gpu),
                   "Hostname": node, "modelName": "NVIDIA H100 80GB HBM3", "device": format!("nvidia{gpu}")},
        "values": values,
        "timestamps": timestamps,
    })
}

async fn report_of(app: &TestApp, job_id: u32) -> JobReport {
    let response = app.get(&format!("/api/v1/jobs/{job_id}/report?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("report JSON")
}

async fn promql_avg(vm_url: &str, query: &str, at: i64) -> f64 {
    crate::support::instant_query(vm_url, query, at).await.unwrap_or(f64::NAN)
}

#[tokio::test(flavor = "multi_thread")]
async fn report_attributes_shared_node_gpus_matches_promql_and_survives_retention() {
    let _db = database_shared().await;
    let vm_url = lab().var("SLURMLENS_VM_URL").to_string();
    let store = store().await;
    let cluster = "lab".parse().expect("cluster");
    // Two jobs of two users share the report node, two GPUs each, running at the same time: both
    // wait for a release file until their GPUs have been read.
    let release = lab().dir.join(format!("jobs/report-release-{}", std::process::id()));
    let _ = std::fs::remove_file(&release);
    // Other tests hold GPUs too: pick a node where both jobs fit at once, and keep the other
    // node-picking tests out until both run (a short job elsewhere may still delay them).
    let (picking, node) = crate::support::reserve_gpu_node(4).await;
    let node = node.as_str();
    let first = submit_holding("report-test", "alice", node, 2, &release, 25);
    let second = submit_holding("report-test", "bob", node, 2, &release, 25);
    for job in [first, second] {
        wait_running(job, Duration::from_secs(180)).await;
    }
    drop(picking);
    let first_gpus = gpu_indices(first);
    let second_gpus = gpu_indices(second);
    std::fs::write(&release, b"").expect("releasing the jobs");
    assert_eq!(first_gpus.len(), 2);
    assert!(first_gpus.iter().all(|gpu| !second_gpus.contains(gpu)), "{first_gpus:?} vs {second_gpus:?}");
    // What the plugin records on the node while the jobs run.
    let now = Utc::now();
    for (job_id, gpus) in [(first, &first_gpus), (second, &second_gpus)] {
        let records: Vec<GpuAllocation> = gpus
            .iter()
            .map(|&index| GpuAllocation {
                job_id,
                step: "job".into(),
                gpu: GpuRef { node: node.into(), index },
                uuid: Some(test_uuid(node, index)),
                cgroup_path: None,
                first_seen: now,
                last_seen: now,
                ended_at: None,
            })
            .collect();
        store.upsert_gpu_allocations(&cluster, &records).await.expect("record GPUs");
    }
    wait_until_done(first);
    wait_until_done(second);
    let app = spawn_app(report_config(&vm_url, 5000)).await;
    let detail: slurmlens_wire::JobDetail =
        app.get(&format!("/api/v1/jobs/{first}?cluster=lab")).await.json().await.expect("job");
    let (start, end) = (detail.job.start.expect("started"), detail.job.end.expect("ended"));
    // Samples from a minute before the jobs to just after them, never in the future.
    let to = (end.timestamp() + 5).min(Utc::now().timestamp() - 1);
    import_gpu_series(node, start.timestamp() - 60, to).await;

    for (job_id, gpus) in [(first, &first_gpus), (second, &second_gpus)] {
        // Imported samples become searchable once VictoriaMetrics has flushed them; under load that can
        // trail the import by a moment, so the live report is read again for a few seconds.
        let mut report = report_of(&app, job_id).await;
        for _ in 0..30 {
            if report.metrics.status == slurmlens_wire::MetricsState::Ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            report = report_of(&app, job_id).await;
        }
        if report.metrics.status != slurmlens_wire::MetricsState::Ok {
            let at = report.window_end.map_or(0, |t| t.timestamp());
            let seen = promql_avg(
                &vm_url,
                &format!("count(count_over_time(DCGM_FI_DEV_GPU_UTIL{{Hostname=\"{node}\"}}[10m]))"),
                at,
            )
            .await;
            panic!(
                "job {job_id}: {:?}; window {:?}..{:?}; imported {}..{to}; series with samples at the end: {seen}; gpus {:?}; source {}",
                report.metrics,
                report.window_start,
                report.window_end,
                start.timestamp() - 60,
                report.gpus.iter().map(|g| (g.gpu, g.attribution, g.summary.len())).collect::<Vec<_>>(),
                report.source
            );
        }
        let got: Vec<u16> = report.gpus.iter().map(|gpu| gpu.gpu).collect();
        assert_eq!(&got, gpus, "job {job_id}: the report's GPUs are the ones scontrol showed");
        assert!(
            report
                .gpus
                .iter()
                .all(|gpu| gpu.attribution == slurmlens_wire::Attribution::PluginRecord && !gpu.uncertain)
        );
        let window = (report.window_end.expect("end") - report.window_start.expect("start")).num_seconds();
        for gpu in &report.gpus {
            let util = gpu.summary.iter().find(|s| s.metric == "gpu_util").expect("gpu_util summary");
            let direct = promql_avg(
                &vm_url,
                &format!(
                    "avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{{Hostname=\"{node}\",gpu=\"{}\"}}[{window}s]))",
                    gpu.gpu
                ),
                report.window_end.expect("end").timestamp(),
            )
            .await;
            assert!(
                (util.mean - direct).abs() <= direct.abs() * 0.01,
                "gpu {}: report {} PromQL {direct}",
                gpu.gpu,
                util.mean
            );
            assert!(gpu.uuid.as_deref().is_some_and(|uuid| uuid.ends_with(&gpu.gpu.to_string())));
            assert!(!gpu.series.is_empty(), "timelines present");
        }
        // Energy: the counter's rise between the window's ends, as PromQL reads it at each end.
        let counter = format!(
            "sum(max by (gpu) (last_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{Hostname=\"{node}\",gpu=~\"{}\"}}[8s])))",
            gpus.iter().map(u16::to_string).collect::<Vec<_>>().join("|")
        );
        let (from, to) = (report.window_start.expect("start").timestamp(), report.window_end.expect("end").timestamp());
        let direct_kwh = (promql_avg(&vm_url, &counter, to).await - promql_avg(&vm_url, &counter, from).await) / 3.6e9;
        let kwh = report.totals.energy_kwh.expect("energy from the counter");
        assert!(
            direct_kwh > 0.0 && (kwh - direct_kwh).abs() <= direct_kwh * 0.01,
            "report {kwh} kWh, PromQL {direct_kwh}"
        );
        assert!(report.totals.gpu_hours > 0.0);
        assert!(
            report.verdicts.iter().any(|v| matches!(
                v.kind,
                VerdictKind::LowTensorActivity | VerdictKind::UnbalancedGpus | VerdictKind::Good
            )),
            "{:?}",
            report.verdicts
        );
    }

    // The grid's metric colours: each GPU's mean over the last four scrapes, as PromQL gives it.
    let at = end.timestamp() - 2;
    let values: slurmlens_wire::GpuValues = app
        .get(&format!("/api/v1/gpus/values?cluster=lab&metric=gpu_util&at={at}"))
        .await
        .json()
        .await
        .expect("values");
    assert_eq!(values.status, slurmlens_wire::ValuesState::Ok, "{values:?}");
    for gpu in 0..4u16 {
        let value = values.values.iter().find(|v| v.node == node && v.gpu == gpu).expect("a value per GPU");
        let direct = promql_avg(
            &vm_url,
            &format!("avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{{Hostname=\"{node}\",gpu=\"{gpu}\"}}[60s]))"),
            at,
        )
        .await;
        assert!((value.value - direct).abs() <= direct.abs() * 0.01, "gpu {gpu}: {} vs {direct}", value.value);
    }
    let unknown = app.get("/api/v1/gpus/values?cluster=lab&metric=up%7Bx%3D%221%22%7D").await;
    assert_eq!(unknown.status(), 400, "only catalogue metrics reach a query");

    // The ended job's report was archived on first read; it outlives the series.
    let before = report_of(&app, first).await;
    // The listing carries the archived efficiency (the Gantt's "efficiency" colours).
    let listing: slurmlens_wire::Page<slurmlens_wire::Job> = app
        .get(&format!(
            "/api/v1/jobs?cluster=lab&start={}&end={}&limit=1000",
            start.timestamp() - 1,
            end.timestamp() + 1
        ))
        .await
        .json()
        .await
        .expect("listing");
    let listed = listing.items.iter().find(|job| job.job_id_raw == first).expect("the job is listed");
    assert_eq!(listed.mean_gpu_util, before.totals.mean_gpu_util);
    assert!(listed.mean_gpu_util.is_some());
    // Only this run's series: other tests import on the same nodes at the same time.
    let ours = (0..4u16).map(|gpu| test_uuid(node, gpu)).collect::<Vec<_>>().join("|");
    let deleted = reqwest::Client::new()
        .post(format!("{vm_url}/api/v1/admin/tsdb/delete_series"))
        .form(&[("match[]", format!("{{Hostname=\"{node}\",UUID=~\"{ours}\"}}"))])
        .send()
        .await
        .expect("delete series");
    assert!(deleted.status().is_success());
    let after = report_of(&app, first).await;
    assert_eq!(after.source, slurmlens_wire::ReportSource::Archived);
    assert_eq!(after.gpus, before.gpus);
    assert_eq!(after.totals, before.totals);
    assert_eq!(after.verdicts, before.verdicts);
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_or_slow_metrics_degrade_to_slurm_facts() {
    let _db = database_shared().await;
    let job = crate::support::mix_job("running");
    // A port nothing listens on (VictoriaMetrics stopped) …
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    // … and one that accepts connections but never answers (VictoriaMetrics hung).
    let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hung_url = format!("http://{}", hung.local_addr().expect("addr"));
    for url in [format!("http://{closed}"), hung_url] {
        let mut config = report_config(&url, 800);
        config.database = None;
        let app = spawn_app(config).await;
        let started = Instant::now();
        let response = app.get(&format!("/api/v1/jobs/{}/report?cluster=lab", job.job_id)).await;
        let took = started.elapsed();
        assert_eq!(response.status(), 200, "{url}");
        let report: JobReport = response.json().await.expect("report JSON");
        assert_eq!(report.metrics.status, slurmlens_wire::MetricsState::Unavailable, "{url}");
        assert!(report.metrics.message.as_deref().is_some_and(|m| m.starts_with("metrics unavailable")));
        assert_eq!(report.job.job_id, job.job_id, "the Slurm facts are there");
        assert!(took < Duration::from_secs(5), "answered within the timeout: {took:?}");
    }
    drop(hung);
}

#[tokio::test(flavor = "multi_thread")]
async fn injection_attempts_in_report_parameters_are_refused() {
    let _db = database_shared().await;
    let app = spawn_app(report_config(lab().var("SLURMLENS_VM_URL"), 2000)).await;
    for path in [
        "/api/v1/jobs/1%22%7D%20or%20vector(1)/report",
        "/api/v1/jobs/1/report?cluster=lab%22%7D",
        "/api/v1/jobs/1/report?points=1e9",
        "/api/v1/jobs/1/report?metric=up",
        "/api/v1/jobs/..%2F..%2Fetc/report",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 400, "{path}");
    }
}
