//! Compare with previous runs (issue #19, part 1), on real lab jobs: a job's previous runs are its
//! owner's finished runs of the same name and the same stored batch script, newest first; another
//! user's run of the same script, or the owner's run of another script under the same name, is never
//! among them. `GET /api/v1/compare` puts 2–8 visible jobs side by side and refuses the rest.

use std::time::{Duration, Instant};

use slurmlens::config::AnonymousAccess;
use slurmlens_wire::{Comparison, JobDetail, PreviousRuns, WorkMatch};

use crate::support::{TestApp, database_shared, lab, slurm, spawn_app, test_config};

/// Submits `body` as a batch script named `name` of `user`; its id.
fn submit(name: &str, user: &str, body: &str) -> u32 {
    submit_with(name, user, body, "ALL")
}

/// Submits `body` as a batch script named `name` of `user` with `--export=export`; its id.
fn submit_with(name: &str, user: &str, body: &str, export: &str) -> u32 {
    let dir = lab().dir.join("jobs");
    std::fs::create_dir_all(&dir).expect("the lab's job directory");
    let path = dir.join(format!("compare-{name}-{user}-{}.sh", std::process::id()));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("writing the script");
    let (uid, gid) = (format!("--uid={user}"), format!("--gid={user}"));
    let (export, path) = (format!("--export={export}"), path.to_string_lossy());
    let text = slurm("sbatch", &["--parsable", "-J", name, &uid, &gid, "--time=1", "-o", "/dev/null", &export, &path]);
    text.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id")
}

/// Waits until slurmdbd records the job's end (as staff sees it).
async fn ended(app: &TestApp, job_id: u32) {
    let deadline = Instant::now() + Duration::from_secs(180);
    let path = format!("/api/v1/jobs/{job_id}?cluster=lab");
    loop {
        let response = app.get_as("root", &path).await;
        if response.status().as_u16() == 200 {
            let detail: JobDetail = response.json().await.expect("a JobDetail");
            if detail.job.end.is_some() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "job {job_id} never ended in slurmdbd");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until slurmdbd holds the job's script (slurmdbd may write it after the job's first record).
async fn stored_script(app: &TestApp, job_id: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let path = format!("/api/v1/jobs/{job_id}/script?cluster=lab");
    loop {
        let response = app.get_as("root", &path).await;
        if response.status().as_u16() == 200 {
            let script: slurmlens_wire::JobScript = response.json().await.expect("a JobScript");
            if script.script.is_some() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "slurmdbd never held job {job_id}'s script");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `user`'s answer for `path`: status and body.
async fn as_user(app: &TestApp, user: &str, path: &str) -> (u16, String) {
    let response = app.get_as(user, path).await;
    (response.status().as_u16(), response.text().await.expect("a body"))
}

#[tokio::test(flavor = "multi_thread")]
async fn previous_runs_are_the_owners_runs_of_the_same_script_and_compare_refuses_what_it_may_not_show() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let tag = format!("{}-{}", std::process::id(), chrono::Utc::now().timestamp_millis());
    let name = format!("prev-{}", std::process::id());
    // One script; how long a run sleeps comes from its environment, so a slow run is the same work.
    let script = format!("# training run {tag}\nsleep ${{PREV_SLEEP:-1}}");
    // Three runs of the same work by alice, one of another script under the same name by alice, one of
    // the same script and name by bob.
    let first = submit(&name, "alice", &script);
    let other_script = submit(&name, "alice", &format!("# another script {tag}\ntrue"));
    let bobs = submit(&name, "bob", &script);
    let second = submit(&name, "alice", &script);
    for job in [first, other_script, bobs, second] {
        ended(&app, job).await;
    }
    let third = submit(&name, "alice", &script);
    ended(&app, third).await;
    stored_script(&app, third).await;

    let path = format!("/api/v1/jobs/{third}/previous?cluster=lab");
    let (status, body) = as_user(&app, "alice", &path).await;
    assert_eq!(status, 200, "{body}");
    let previous: PreviousRuns = serde_json::from_str(&body).expect("a PreviousRuns");
    assert_eq!(previous.this_run.job.job_id_raw, third);
    assert_eq!(previous.matched_by, WorkMatch::NameAndScript, "the lab stores batch scripts");
    let ids: Vec<u32> = previous.runs.iter().map(|run| run.job.job_id_raw).collect();
    assert_eq!(ids, vec![second, first], "alice's runs of the same script, newest first: {body}");
    assert!(previous.runs.iter().all(|run| run.job.user == "alice" && run.job.state == "COMPLETED"));
    assert!(previous.runs.iter().all(|run| run.run_time_s.is_some()), "{body}");
    assert_eq!((previous.min_gpus, previous.max_gpus), (0, 0), "CPU-only runs are one size class");
    // Two previous runs make no "usual".
    assert_eq!(previous.slower_than_usual, None);
    assert!(previous.median.run_time_s.is_some(), "{body}");

    // The coordinator of alice's account and staff see the same runs.
    for viewer in ["carol", "root"] {
        let (status, body) = as_user(&app, viewer, &path).await;
        assert_eq!(status, 200, "{viewer}: {body}");
        let seen: PreviousRuns = serde_json::from_str(&body).expect("a PreviousRuns");
        let seen_ids: Vec<u32> = seen.runs.iter().map(|run| run.job.job_id_raw).collect();
        assert_eq!(seen_ids, ids, "{viewer}");
    }
    // Bob's own run of the same script lists none of alice's; alice's job is 404 to him.
    let (status, body) = as_user(&app, "bob", &format!("/api/v1/jobs/{bobs}/previous?cluster=lab")).await;
    assert_eq!(status, 200, "{body}");
    let bob_previous: PreviousRuns = serde_json::from_str(&body).expect("a PreviousRuns");
    assert!(bob_previous.runs.iter().all(|run| run.job.user == "bob"), "{body}");
    assert!(!bob_previous.runs.iter().any(|run| [first, second, third].contains(&run.job.job_id_raw)));
    let (status, body) = as_user(&app, "bob", &path).await;
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains(&name), "{body}");

    // A fourth run of the same script, 15 s where the others took about 1 s: slower than usual, with
    // the evidence, against three previous runs.
    let slow = submit_with(&name, "alice", &script, "ALL,PREV_SLEEP=15");
    ended(&app, slow).await;
    stored_script(&app, slow).await;
    let (status, body) = as_user(&app, "alice", &format!("/api/v1/jobs/{slow}/previous?cluster=lab")).await;
    assert_eq!(status, 200, "{body}");
    let slow_previous: PreviousRuns = serde_json::from_str(&body).expect("a PreviousRuns");
    let slow_ids: Vec<u32> = slow_previous.runs.iter().map(|run| run.job.job_id_raw).collect();
    assert_eq!(slow_ids, vec![third, second, first], "{body}");
    let verdict = slow_previous.slower_than_usual.expect("a verdict against three previous runs");
    assert!(verdict.slower, "{verdict:?}");
    assert!(verdict.evidence[0].starts_with("run time 1"), "{verdict:?}");
    assert!(verdict.evidence[0].contains("over 3 completed previous runs"), "{verdict:?}");

    // Compare: alice's runs side by side, in the order asked.
    let (status, body) = as_user(&app, "alice", &format!("/api/v1/compare?cluster=lab&jobs={third},{first}")).await;
    assert_eq!(status, 200, "{body}");
    let comparison: Comparison = serde_json::from_str(&body).expect("a Comparison");
    let compared: Vec<u32> = comparison.jobs.iter().map(|job| job.figures.job.job_id_raw).collect();
    assert_eq!(compared, vec![third, first]);
    assert!(comparison.jobs.iter().all(|job| job.figures.run_time_s.is_some()));
    // Every timeline point is an offset from its own job's start, never an epoch time.
    for job in &comparison.jobs {
        let run_time = i64::try_from(job.figures.run_time_s.unwrap_or(0)).expect("fits");
        for series in &job.timelines {
            assert!(series.points.iter().all(|(offset, _)| *offset >= -60 && *offset <= run_time + 60), "{series:?}");
        }
    }
    // Bob's job among them: 404, as a missing job is; bob asking for alice's: 404.
    let (status, body) = as_user(&app, "alice", &format!("/api/v1/compare?cluster=lab&jobs={third},{bobs}")).await;
    assert_eq!(status, 404, "{body}");
    let (missing_status, _) =
        as_user(&app, "alice", &format!("/api/v1/compare?cluster=lab&jobs={third},99999999")).await;
    assert_eq!(missing_status, 404);
    let (status, _) = as_user(&app, "bob", &format!("/api/v1/compare?cluster=lab&jobs={bobs},{first}")).await;
    assert_eq!(status, 404);
    // 9 jobs, 1 job, a job listed twice: 400, naming the parameter.
    let nine: Vec<String> = (0..9).map(|offset| (first + offset).to_string()).collect();
    for jobs in [nine.join(","), third.to_string(), format!("{third},{third}")] {
        let (status, body) = as_user(&app, "alice", &format!("/api/v1/compare?cluster=lab&jobs={jobs}")).await;
        assert_eq!(status, 400, "{jobs}: {body}");
        assert!(body.contains("\"parameter\":\"jobs\""), "{body}");
    }
}
