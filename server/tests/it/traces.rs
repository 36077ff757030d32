//! Trace summaries: `POST /api/v1/traces` stores exactly the valid records of a batch and names
//! each refused one, stores nothing on replay or without the cluster's secret; an nsys CSV import and
//! eBPF batches show up in `GET /api/v1/jobs/{id}/traces` with the right verdict.

use serde_json::json;
use slurmlens_wire::{ErrorEnvelope, JobTraces, TraceReceipt};

use crate::support::{TestApp, database_shared};

const SECRET: &str = "trace-test-secret-0123456789";

async fn app_with_database(name: &str) -> (TestApp, sqlx::MySqlPool) {
    crate::support::ingest_app(name, SECRET).await
}

async fn stored_rows(pool: &sqlx::MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM trace_summaries").fetch_one(pool).await.expect("count")
}

async fn post(app: &TestApp, path: &str, body: String, auth: Option<&str>) -> reqwest::Response {
    let mut request = app.client.post(format!("{}{path}", app.base_url)).body(body);
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    request.send().await.expect("request reaches the server")
}

fn record(
    job: serde_json::Value,
    category: &str,
    name: &str,
    count: u64,
    total_ns: u64,
    max_ns: u64,
) -> serde_json::Value {
    let mut record = json!({
        "interval_start": "2026-01-02T03:04:00Z", "interval_s": 10, "gpu": 0, "pid": 4242,
        "category": category, "name": name, "count": count, "total_ns": total_ns, "max_ns": max_ns,
    });
    if let (Some(record), Some(job)) = (record.as_object_mut(), job.as_object()) {
        record.extend(job.clone());
    }
    record
}

#[tokio::test(flavor = "multi_thread")]
async fn trace_batch_stores_the_good_records_names_the_bad_ones_and_a_replay_stores_nothing() {
    let _db = database_shared().await;
    let (app, pool) = app_with_database("traces_batch").await;
    let bearer = format!("Bearer {SECRET}");
    let long_kernel = format!("void at::native::elementwise_kernel<{}>(int)", "x".repeat(1500));
    let mut memcpy = record(json!({"job_id": 7}), "memcpy", "H2D", 4, 4000, 1500);
    memcpy["bytes"] = json!(4_000_000);
    let records = vec![
        record(json!({"job_id": 7}), "kernel", &long_kernel, 10, 5000, 900),
        record(json!({"cgroup": "/slurm/uid_1001/job_7/step_0/task_0"}), "nccl", "ncclAllReduce", 2, 3000, 2000),
        record(
            json!({"cgroup": "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/user/task_0"}),
            "sync",
            "cudaStreamSynchronize",
            3,
            300,
            200,
        ),
        memcpy,
        // Refused: an unknown category, max above total, a SLUID without job id, a count that is text.
        record(json!({"job_id": 7}), "gpu", "x", 1, 1, 1),
        record(json!({"job_id": 7}), "kernel", "k", 1, 10, 20),
        record(
            json!({"cgroup": "/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0"}),
            "kernel",
            "k",
            1,
            1,
            1,
        ),
        json!({"interval_start": "2026-01-02T03:04:00Z", "interval_s": 10, "gpu": 0, "pid": 1, "job_id": 7,
               "category": "kernel", "name": "k", "count": "ten", "total_ns": 1, "max_ns": 1}),
    ];
    let batch = json!({"cluster": "lab", "node": "n1", "records": records}).to_string();

    let response = post(&app, "/api/v1/traces", batch.clone(), Some(&bearer)).await;
    assert_eq!(response.status(), 200);
    let receipt: TraceReceipt = response.json().await.expect("receipt");
    assert_eq!((receipt.stored, receipt.duplicates), (4, 0), "{receipt:?}");
    let rejected: Vec<(u64, &str)> = receipt.rejected.iter().map(|r| (r.index, r.reason.as_str())).collect();
    assert_eq!(rejected.iter().map(|(index, _)| *index).collect::<Vec<_>>(), vec![4, 5, 6, 7], "{rejected:?}");
    for ((_, reason), wanted) in rejected.iter().zip(["category", "max_ns", "SLUID", "not a trace record"]) {
        assert!(reason.contains(wanted), "`{reason}` should mention {wanted}");
    }
    assert_eq!(stored_rows(&pool).await, 4);
    let long_name: Option<String> =
        sqlx::query_scalar("SELECT name FROM trace_names WHERE name LIKE 'void at::native%'")
            .fetch_optional(&pool)
            .await
            .expect("names");
    assert_eq!(long_name.as_deref(), Some(long_kernel.as_str()), "the full kernel name is kept");

    // The collector's spool replays the batch: nothing new, the same refusals.
    let response = post(&app, "/api/v1/traces", batch.clone(), Some(&bearer)).await;
    assert_eq!(response.status(), 200);
    let replay: TraceReceipt = response.json().await.expect("receipt");
    assert_eq!((replay.stored, replay.duplicates, replay.rejected.len()), (0, 4, 4), "{replay:?}");
    assert_eq!(stored_rows(&pool).await, 4);

    // A malformed body, another cluster's batch or a bad node is refused whole.
    for (what, body, parameter) in [
        ("not JSON", "records: yes".to_string(), "body"),
        ("JSON then junk", format!("{batch} x"), "body"),
        ("oversize", format!("{{\"pad\":\"{}\"}}", "x".repeat(17 << 20)), "body"),
        ("other cluster", batch.replace("\"cluster\":\"lab\"", "\"cluster\":\"sakura\""), "cluster"),
        ("bad node", batch.replace("\"node\":\"n1\"", "\"node\":\"n1;drop\""), "node"),
        ("no records", json!({"cluster": "lab", "node": "n1", "records": []}).to_string(), "records"),
    ] {
        let response = post(&app, "/api/v1/traces", body, Some(&bearer)).await;
        assert_eq!(response.status(), 400, "{what}");
        let envelope: ErrorEnvelope = response.json().await.expect("envelope");
        assert_eq!(envelope.error.parameter.as_deref(), Some(parameter), "{what}: {}", envelope.error.message);
    }
    assert_eq!(stored_rows(&pool).await, 4);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unauthenticated_trace_batch_is_refused_and_changes_nothing() {
    let _db = database_shared().await;
    let (app, pool) = app_with_database("traces_auth").await;
    let batch =
        json!({"cluster": "lab", "node": "n1", "records": [record(json!({"job_id": 7}), "kernel", "k", 1, 1, 1)]})
            .to_string();
    for auth in [None, Some("Bearer not-the-secret-0123456789"), Some("Basic bGFiOnNlY3JldA==")] {
        let response = post(&app, "/api/v1/traces", batch.clone(), auth).await;
        assert_eq!(response.status(), 401, "{auth:?}");
        assert_eq!(response.headers().get("www-authenticate").map(|v| v.as_bytes()), Some(&b"Bearer"[..]));
        let response = post(&app, "/api/v1/traces/nsys?cluster=lab&job_id=7&node=n1", "x".into(), auth).await;
        assert_eq!(response.status(), 401, "nsys {auth:?}");
    }
    assert_eq!(stored_rows(&pool).await, 0);
    pool.close().await;
}

async fn breakdown(app: &TestApp, job_id: u32) -> JobTraces {
    let response = app.get(&format!("/api/v1/jobs/{job_id}/traces?cluster=lab")).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("breakdown")
}

#[tokio::test(flavor = "multi_thread")]
async fn nsys_csv_import_shows_up_in_the_breakdown() {
    let _db = database_shared().await;
    let (app, pool) = app_with_database("traces_nsys").await;
    let job_id = crate::support::finished_lab_job().await;
    let bearer = format!("Bearer {SECRET}");
    let kernels = "Generating SQLite file report.sqlite from report.nsys-rep\n\
        Processing [report.sqlite] with [/opt/nvidia/nsight-systems/reports/cuda_gpu_kern_sum.py]...\n\
        \n\
        \"Time (%)\",\"Total Time (ns)\",\"Instances\",\"Avg (ns)\",\"Med (ns)\",\"Min (ns)\",\"Max (ns)\",\"StdDev (ns)\",\"Name\"\n\
        60.0,6000000000,600,10000000.0,10000000.0,9000000,11000000,100.0,\"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128>(Params)\"\n\
        25.0,2500000000,250,10000000.0,10000000.0,9000000,11000000,100.0,\"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)\"\n\
        5.0,500000000,50,10000000.0,10000000.0,9000000,11000000,100.0,\"ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<4096>)\"\n\
        1.0,oops,1,1.0,1.0,1,1,0.0,broken\n";
    // Within the job's run: a job's traces are read within it.
    let start = crate::support::lab_job_start(job_id).await.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let path = format!("/api/v1/traces/nsys?cluster=lab&job_id={job_id}&node=n1&gpu=1&start={start}&duration_s=20");
    let response = post(&app, &path, kernels.to_string(), Some(&bearer)).await;
    assert_eq!(response.status(), 200);
    let receipt: TraceReceipt = response.json().await.expect("receipt");
    // The two NCCL kernel variants fold into one AllReduce row.
    assert_eq!((receipt.stored, receipt.duplicates), (2, 0), "{receipt:?}");
    assert_eq!(receipt.rejected.iter().map(|r| r.index).collect::<Vec<_>>(), vec![3]);
    let response = post(&app, &path, "a,b\n1,2\n".into(), Some(&bearer)).await;
    assert_eq!(response.status(), 400, "a CSV that is no nsys report");

    let traces = breakdown(&app, job_id).await;
    assert_eq!(traces.gpus.len(), 1);
    let gpu = &traces.gpus[0];
    assert_eq!((gpu.node.as_str(), gpu.gpu), ("n1", 1));
    assert!((gpu.breakdown.traced_s - 20.0).abs() < 1e-9);
    assert!((gpu.breakdown.compute_share - 0.30).abs() < 1e-6, "{gpu:?}");
    assert!((gpu.breakdown.communication_share - 0.15).abs() < 1e-6, "{gpu:?}");
    assert!((gpu.breakdown.idle_share - 0.55).abs() < 1e-6, "{gpu:?}");
    assert_eq!(traces.top_kernels.len(), 1);
    assert!(traces.top_kernels[0].name.contains("cutlass_80_tensorop"));
    assert_eq!(traces.top_collectives.len(), 1);
    assert_eq!((traces.top_collectives[0].name.as_str(), traces.top_collectives[0].count), ("AllReduce", 300));
    assert_eq!(traces.total.verdict.as_ref().map(|v| v.kind.as_str()), Some("gpus-idle"));
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn breakdown_of_a_communication_bound_job_says_communication_bound() {
    let _db = database_shared().await;
    let (app, pool) = app_with_database("traces_comm").await;
    let job_id = crate::support::finished_lab_job().await;
    let bearer = format!("Bearer {SECRET}");
    let second = 1_000_000_000u64;
    // Two GPUs, six 10 s intervals each: 2.5 s of GEMMs, 6 s in AllReduce/AllGather per interval.
    // Within the job's run: a job's traces are read within it.
    let job_start = crate::support::lab_job_start(job_id).await;
    let mut records = Vec::new();
    for gpu in 0..2u16 {
        for interval in 0..6 {
            let start = (job_start + chrono::Duration::seconds(interval * 10))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            for (category, name, count, total_ns) in [
                ("kernel", "ampere_sgemm_128x64_nn", 100, 25 * second / 10),
                ("nccl", "AllReduce", 20, 5 * second),
                ("nccl", "AllGather", 10, second),
                ("cuda_api", "cudaLaunchKernel", 130, second / 100),
            ] {
                records.push(json!({
                    "interval_start": start, "interval_s": 10, "gpu": gpu, "pid": 5000 + u32::from(gpu),
                    "job_id": job_id, "category": category, "name": name,
                    "count": count, "total_ns": total_ns, "max_ns": total_ns.div_ceil(count),
                }));
            }
        }
    }
    let batch = json!({"cluster": "lab", "node": "n2", "records": records}).to_string();
    let response = post(&app, "/api/v1/traces", batch, Some(&bearer)).await;
    assert_eq!(response.status(), 200);
    let receipt: TraceReceipt = response.json().await.expect("receipt");
    assert_eq!((receipt.stored, receipt.rejected.len()), (48, 0), "{receipt:?}");

    let traces = breakdown(&app, job_id).await;
    let verdict = traces.total.verdict.as_ref().expect("a verdict");
    assert_eq!(verdict.kind, slurmlens_wire::TraceBottleneck::CommunicationBound, "{verdict:?}");
    assert!(verdict.evidence.iter().any(|line| line.contains("NCCL collectives 60%")), "{verdict:?}");
    assert_eq!(traces.gpus.len(), 2);
    for gpu in &traces.gpus {
        assert!((gpu.breakdown.traced_s - 60.0).abs() < 1e-9, "{gpu:?}");
        assert_eq!(gpu.breakdown.verdict.as_ref().map(|v| v.kind.as_str()), Some("communication-bound"));
    }
    let collectives: Vec<&str> = traces.top_collectives.iter().map(|top| top.name.as_str()).collect();
    assert_eq!(collectives, vec!["AllReduce", "AllGather"]);
    // The report carries the same breakdown (the trace breakdown beside the GPU metrics).
    let report: slurmlens_wire::JobReport =
        app.get(&format!("/api/v1/jobs/{job_id}/report?cluster=lab")).await.json().await.expect("report");
    let in_report = report.traces.expect("the report carries the trace breakdown");
    assert_eq!(in_report.total.verdict.map(|v| v.kind), Some(slurmlens_wire::TraceBottleneck::CommunicationBound));
    pool.close().await;
}
