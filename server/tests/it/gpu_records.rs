//! The store's GPU records: records that arrive out of order still tell the job's story.

use chrono::{Duration, TimeZone, Utc};
use slurmlens::domain::gpu::{GpuAllocation, GpuRef};
use slurmlens::store::Store;

use crate::support::fresh_database;

fn start(job_id: u32, node: &str, index: u16, seen: chrono::DateTime<Utc>) -> GpuAllocation {
    GpuAllocation {
        job_id,
        step: "job".into(),
        gpu: GpuRef { node: node.into(), index },
        uuid: None,
        cgroup_path: None,
        first_seen: seen,
        last_seen: seen,
        ended_at: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_delivered_after_the_jobs_end_is_closed_and_a_requeued_run_stays_open() {
    let store = Store::new(&fresh_database("gpu_records").await, std::time::Duration::from_secs(5)).expect("store");
    let cluster = "lab".parse().expect("cluster");
    let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).single().expect("time");
    let ended = t0 + Duration::hours(2);
    store.upsert_gpu_allocations(&cluster, &[start(77, "n1", 0, t0)]).await.expect("n1 starts");
    store.end_job(&cluster, 77, ended).await.expect("the job ends");
    // n2's prolog record was spooled while the server was down and arrives now.
    store.upsert_gpu_allocations(&cluster, &[start(77, "n2", 1, t0 + Duration::seconds(3))]).await.expect("late n2");
    // The job is requeued and starts again on n3 after its end.
    store.upsert_gpu_allocations(&cluster, &[start(77, "n3", 2, ended + Duration::minutes(5))]).await.expect("requeue");
    let run = slurmlens::domain::job::RunWindow { start: t0, end: None };
    let records = store.gpu_allocations(&cluster, 77, &run).await.expect("records");
    let end_of = |node: &str| records.iter().find(|r| r.gpu.node == node).and_then(|r| r.ended_at);
    assert_eq!(end_of("n1"), Some(ended));
    assert_eq!(end_of("n2"), Some(ended), "the late start belongs to the run that ended");
    assert_eq!(end_of("n3"), None, "the requeued run is still running");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reseeded_jobs_records_are_forgotten_and_the_others_kept() {
    let store =
        Store::new(&fresh_database("gpu_records_forget").await, std::time::Duration::from_secs(5)).expect("store");
    let (lab, other) = ("lab".parse().expect("cluster"), "sakura".parse().expect("cluster"));
    let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).single().expect("time");
    // An earlier seeding put job 5 on GPU 2; job 6 and sakura's job 5 are not seeded again.
    store.upsert_gpu_allocations(&lab, &[start(5, "n1", 2, t0)]).await.expect("job 5");
    store.upsert_gpu_allocations(&lab, &[start(6, "n1", 0, t0)]).await.expect("job 6");
    store.upsert_gpu_allocations(&other, &[start(5, "n1", 2, t0)]).await.expect("sakura's job 5");
    let gone = store.forget_jobs_telemetry(&lab, &[5, 9]).await.expect("forgetting");
    assert_eq!(gone, 1);
    // The new seeding puts job 5 on GPU 3: it holds that GPU alone, not both.
    store.upsert_gpu_allocations(&lab, &[start(5, "n1", 3, t0)]).await.expect("job 5 again");
    let run = slurmlens::domain::job::RunWindow { start: t0, end: None };
    let indices = |records: Vec<GpuAllocation>| records.iter().map(|r| r.gpu.index).collect::<Vec<_>>();
    assert_eq!(indices(store.gpu_allocations(&lab, 5, &run).await.expect("records")), vec![3]);
    assert_eq!(indices(store.gpu_allocations(&lab, 6, &run).await.expect("records")), vec![0]);
    assert_eq!(indices(store.gpu_allocations(&other, 5, &run).await.expect("records")), vec![2]);
}
