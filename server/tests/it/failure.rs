//! "Was the failure mine?" (failure attribution) and micro-bursts in the report, against the lab's real
//! Slurm jobs and VictoriaMetrics. The fault series are imported in the exporters' own shapes, since a
//! lossy switch port or a NIC burst cannot be caused on loopback.

use chrono::Utc;
use slurmlens::config::{AnonymousAccess, Config, VictoriaMetricsConfig};
use slurmlens_wire::{Job, JobReport};

use crate::support::{TestApp, database_shared, lab, mix_job, slurm, spawn_app, test_config};

fn config() -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    let url = lab().var("SLURMLENS_VM_URL").to_string();
    config.victoriametrics =
        Some(VictoriaMetricsConfig { url, timeout_ms: 5000, readings_max_age_s: 1800, bearer_token: None });
    config.report.archive_interval_s = 0;
    config
}

async fn job(app: &TestApp, label: &str) -> Job {
    let id = &mix_job(label).job_id;
    app.get(&format!("/api/v1/jobs/{id}?cluster=lab")).await.json().await.expect("job")
}

async fn report(app: &TestApp, job_id: &str) -> JobReport {
    let response = app.get(&format!("/api/v1/jobs/{job_id}/report?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("report")
}

/// Imports one series as JSON lines: `values[i]` at `stamps[i]` (epoch seconds).
async fn import(labels: serde_json::Value, stamps: &[i64], values: &[f64]) {
    let line = serde_json::json!({
        "metric": labels,
        "values": values,
        "timestamps": stamps.iter().map(|t| t * 1000).collect::<Vec<_>>(),
    });
    crate::support::import_series([line]).await;
}

/// Every 5 s from a minute before `start` to `end`, never in the future.
fn stamps(start: i64, end: i64) -> Vec<i64> {
    let to = end.min(Utc::now().timestamp() - 1);
    (start - 60..=to).step_by(5).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_with_healthy_infrastructure_is_the_applications_and_a_lossy_path_is_the_networks() {
    let _db = database_shared().await;
    let app = spawn_app(config()).await;

    // `exit1` exits 1 and nothing around it failed: the application's.
    let crashed = job(&app, "exit1").await;
    let analysis = report(&app, &crashed.job_id).await.failure.expect("a failed job is analysed");
    assert_eq!(analysis.blame, slurmlens_wire::Blame::Application, "{analysis:?}");
    assert!(
        analysis
            .evidence
            .iter()
            .any(|e| e.source == slurmlens_wire::EvidenceSource::Slurm && e.detail.contains("FAILED")),
        "{analysis:?}"
    );

    // `timeout` (two nodes) hit its limit while the ping mesh of its rack lost 10 % of probes: the
    // network's. (A single-node job's GPUs talk over NVLink: the same loss would be set aside for it.)
    let slow = job(&app, "timeout").await;
    let (start, end) = (slow.start.expect("ran").timestamp(), slow.end.expect("ended").timestamp());
    let nodes = slurmlens_slurm::hostlist::Hostlist::parse(&slow.node_list).expect("a hostlist").hosts().to_vec();
    assert_eq!(nodes.len(), 2, "the mix runs `timeout` on two nodes: {}", slow.node_list);
    let racks = slurmlens_slurm::topology::Topology::default().resolve("lab", &nodes[..1], 4);
    let tor = racks.racks[racks.nodes[0].rack as usize].name.clone();
    let times = stamps(start, end);
    let probes: Vec<f64> = (0..times.len()).map(|i| 50.0 * i as f64).collect();
    let answered: Vec<f64> = (0..times.len()).map(|i| 45.0 * i as f64).collect();
    let path = |name: &str| {
        serde_json::json!({"__name__": name, "source_tor": tor, "target_tor": tor, "job": "rpingmesh-agent",
                           "instance": format!("{tor}-agent")})
    };
    import(path("rpingmesh_probe_total"), &times, &probes).await;
    import(path("rpingmesh_probe_success_total"), &times, &answered).await;

    let analysis = report(&app, &slow.job_id).await.failure.expect("a timed-out job is analysed");
    assert_eq!(analysis.blame, slurmlens_wire::Blame::Infrastructure, "{analysis:?}");
    let loss = analysis
        .evidence
        .iter()
        .find(|e| e.source == slurmlens_wire::EvidenceSource::PingmeshLoss)
        .expect("the loss is evidence");
    assert_eq!(loss.place, format!("{tor} → {tor}"));
    assert_eq!(loss.strength, slurmlens_wire::EvidenceStrength::Strong, "10 % loss is ten times the threshold");
    assert!(loss.detail.contains("10.0 %"), "{}", loss.detail);
    let times: Vec<_> = analysis.evidence.iter().map(|e| e.at).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "evidence in time order");

    // A job that completed is not analysed.
    let fine = job(&app, "gpu1node").await;
    assert!(report(&app, &fine.job_id).await.failure.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn bursts_show_where_a_node_agent_exports_peaks_and_are_unknown_where_only_counters_exist() {
    let _db = database_shared().await;
    let app = spawn_app(config()).await;
    // The mix's long-running job: its live report covers its start to now.
    let running = job(&app, "running").await;
    let start = running.start.expect("running").timestamp();
    let host = running.node_list.clone();
    let times = stamps(start, Utc::now().timestamp());
    let labels = |name: &str| {
        serde_json::json!({"__name__": name, "device": "mlx5_0", "port": "1", "instance": format!("{host}:9879"),
                           "job": "rdma"})
    };
    // 2.5e9 bytes/s on average each way (the counters count 4-byte words).
    let words: Vec<f64> = (0..times.len()).map(|i| 2.5e9 / 4.0 * 5.0 * i as f64).collect();
    import(labels("rdma_port_xmit_data_total"), &times, &words).await;
    import(labels("rdma_port_rcv_data_total"), &times, &words).await;
    // Sending, the agent saw 100 ms peaks at 92 % of line rate, 0.4 s above the threshold every third
    // scrape; receiving, it exports nothing.
    let peaks: Vec<f64> = (0..times.len()).map(|i| if i % 3 == 0 { 4.6e10 } else { 3.0e9 }).collect();
    import(labels("nic_tx_bytes_per_second_max"), &times, &peaks).await;
    let mut above = labels("nic_tx_burst_seconds_total");
    above["threshold"] = serde_json::json!("0.9");
    let seconds: Vec<f64> = (0..times.len()).map(|i| 0.4 * (i / 3) as f64).collect();
    import(above, &times, &seconds).await;

    let report = report(&app, &running.job_id).await;
    let row = |direction: slurmlens_wire::Direction| {
        report
            .bursts
            .iter()
            .find(|row| row.node == host && row.direction == direction)
            .unwrap_or_else(|| panic!("a {direction} row for {host}: {:?}", report.bursts))
    };
    let measured = row(slurmlens_wire::Direction::Tx);
    assert_eq!(measured.status, slurmlens_wire::BurstStatus::Measured);
    assert_eq!(measured.burst_peak_bytes_per_s, Some(4.6e10));
    let scrape_peak = measured.scrape_peak_bytes_per_s.expect("the counters' peak");
    assert!(scrape_peak < 4.6e10 / 5.0, "the scrape average hides the burst: {scrape_peak}");
    assert!(measured.seconds_above.is_some_and(|s| s > 0.0), "{measured:?}");
    let unknown = row(slurmlens_wire::Direction::Rx);
    assert_eq!(unknown.status, slurmlens_wire::BurstStatus::Unknown, "counters alone cannot show a peak");
    assert_eq!(unknown.burst_peak_bytes_per_s, None);
    assert!(unknown.scrape_mean_bytes_per_s.is_some_and(|mean| mean > 1e9), "{unknown:?}");
    assert!(unknown.message.as_deref().is_some_and(|m| m.contains("unknown")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_minutes_after_a_crash_is_a_possible_cause_never_a_fault_during_the_run() {
    let _db = database_shared().await;
    // A store of its own: another test's archiver must not archive the job's report before the drain
    // reaches slurmdbd.
    let mut config = config();
    config.database =
        Some(slurmlens::config::DatabaseConfig { url: crate::support::fresh_database("failure_drain").await });
    let app = spawn_app(config).await;
    // A real job that exits 1 after a few seconds on an idle node no other test is placing jobs on
    // (a node still running another job only turns DRAINING, which slurmdbd records when that ends):
    // the job mix placed first, the other node-picking tests held off.
    tokio::task::spawn_blocking(crate::support::mix).await.expect("the mix");
    let (picking, _) = crate::support::reserve_gpu_node(1).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let node = loop {
        let idle = slurm("sinfo", &["-h", "-N", "-p", "gpu", "-t", "idle", "-o", "%N"]);
        if let Some(node) = idle.lines().map(str::trim).find(|node| !node.is_empty()) {
            break node.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no node of the lab was idle for three minutes");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let args = ["--parsable", "-J", "crash-then-drain", "-w", &node, "--gres=gpu:1", "--time=5", "-o", "/dev/null"];
    let out = slurm("sbatch", &[&args[..], &["--wrap", "sleep 3; exit 1"]].concat());
    let job_id: u32 = out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let state = slurm("sacct", &["-n", "-X", "-P", "-o", "State", "-j", &job_id.to_string()]);
        if state.trim().starts_with("FAILED") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "job {job_id} did not fail: {state}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // Then Slurm drains the node for a GPU fault, as it does minutes after the crash it caused (seconds
    // here: a drain in the job's last second is one during its run, as slurmdbd's whole seconds tell).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let reason = format!("Xid 79: GPU has fallen off the bus (slurmlens test {})", std::process::id());
    let since = Utc::now().timestamp() - 5;
    slurm("scontrol", &["update", &format!("nodename={node}"), "state=drain", &format!("reason={reason}")]);
    drop(picking);
    // The report is asked for only once slurmdbd has the event (a report made before would be archived
    // without it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let response = app.get(&format!("/api/v1/nodes/{node}?cluster=lab&start={since}")).await;
        let page: slurmlens_wire::NodePage = response.json().await.expect("node page");
        if page.events.iter().any(|event| event.reason == reason) {
            break;
        }
        if std::time::Instant::now() > deadline {
            slurm("scontrol", &["update", &format!("nodename={node}"), "state=resume"]);
            panic!("the drain did not reach slurmdbd within a minute");
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    slurm("scontrol", &["update", &format!("nodename={node}"), "state=resume"]);

    let analysis = report(&app, &job_id.to_string()).await.failure.expect("a failed job is analysed");
    assert_eq!(analysis.blame, slurmlens_wire::Blame::Unknown, "{analysis:?}");
    assert!(analysis.reason.contains("came after its end"), "{}", analysis.reason);
    assert!(!analysis.reason.contains("on the job's own GPUs, nodes or links during its run"), "{}", analysis.reason);
    let drain = analysis
        .evidence
        .iter()
        .find(|fact| fact.source == slurmlens_wire::EvidenceSource::NodeEvent && fact.detail.contains(&reason))
        .expect("the drain is listed");
    assert_eq!(drain.strength, slurmlens_wire::EvidenceStrength::Weak, "{drain:?}");
    assert!(drain.detail.contains("after the job ended: a possible cause"), "{}", drain.detail);
}

/// The report configuration with our store, archiving a finished job's report at once.
fn archiving(backfill_days: u32) -> Config {
    let mut config = config();
    config.report.archive_delay_s = 0;
    config.report.backfill_days = backfill_days;
    config.database = Some(slurmlens::config::DatabaseConfig { url: lab().var("SLURMLENS_DATABASE_URL").to_string() });
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn a_report_archived_by_an_earlier_generation_is_made_again_while_its_series_are_kept() {
    let _db = database_shared().await;
    let app = spawn_app(archiving(31)).await;
    let crashed = job(&app, "exit1").await;
    let (job_id, submit): (u32, u64) =
        (crashed.job_id.parse().expect("a numeric id"), u64::try_from(crashed.submit.timestamp()).expect("after 1970"));
    let store = slurmlens::store::Store::new(lab().var("SLURMLENS_DATABASE_URL"), std::time::Duration::from_secs(5))
        .expect("store");
    let cluster: slurmlens::domain::cluster::ClusterName = "lab".parse().expect("a cluster");
    // What an earlier release archived: a report whose reason says what reports no longer say.
    let mut old = report(&app, &job_id.to_string()).await;
    if let Some(failure) = old.failure.as_mut() {
        failure.reason = "OLD WORDING from an earlier release".into();
    }
    let json = serde_json::to_string(&old).expect("JSON");
    let digest = slurmlens::store::ReportDigest { has_metrics: true, generation: 1, ..Default::default() };
    store.archive_report(&cluster, job_id, submit, &json, &digest).await.expect("archived");

    // Past the series' retention (`backfill_days`), the earlier report is all there is: served as it is.
    let past = spawn_app(archiving(0)).await;
    let kept = report(&past, &job_id.to_string()).await;
    assert!(kept.failure.is_some_and(|failure| failure.reason.contains("OLD WORDING")));

    // Within it, the report is made again and archived as the current generation.
    let remade = report(&app, &job_id.to_string()).await;
    let reason = remade.failure.map(|failure| failure.reason).unwrap_or_default();
    assert!(!reason.is_empty() && !reason.contains("OLD WORDING"), "made again: {reason}");
    let (_, generation) = store.archived_report(&cluster, job_id, submit).await.expect("read").expect("archived");
    assert_eq!(generation, slurmlens::app::report::GENERATION);
}
