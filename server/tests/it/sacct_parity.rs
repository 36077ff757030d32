//! The API agrees with `sacct -a -X -P` on every job of a real job mix.

use chrono::{DateTime, Utc};
use slurmlens::config::AnonymousAccess;
use slurmlens_wire::JobDetail;

use crate::support::{database_shared, lab, mix, spawn_app};

const FIELDS: &str =
    "JobID,User,Account,Partition,State,ExitCode,Submit,Start,End,Elapsed,NodeList,AllocTRES,NNodes,AllocCPUS";

/// sacct prints times in local time without a zone; the tests run it with TZ=UTC.
fn sacct_time(time: Option<DateTime<Utc>>) -> String {
    time.map_or_else(|| "Unknown".to_string(), |t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
}

fn gpus_in(alloc_tres: &str) -> u64 {
    alloc_tres
        .split(',')
        .find_map(|item| item.strip_prefix("gres/gpu="))
        .map_or(0, |count| count.parse().expect("numeric gpu count"))
}

fn seconds(elapsed: &str) -> u64 {
    let (days, clock) = elapsed.split_once('-').map_or((0, elapsed), |(d, c)| (d.parse().expect("days"), c));
    let parts: Vec<u64> = clock.split(':').map(|p| p.parse().expect("clock field")).collect();
    days * 86_400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
}

#[tokio::test(flavor = "multi_thread")]
async fn api_agrees_with_sacct_on_every_job_of_the_mix() {
    let mix = mix();
    let _db = database_shared().await;
    let app = spawn_app(crate::support::test_config(AnonymousAccess::Staff)).await;
    let ids: Vec<String> = mix.iter().map(|job| job.job_id.split('_').next().unwrap_or_default().to_string()).collect();
    let output = lab()
        .command("sacct")
        .args(["-a", "-X", "-P", "-n", "-o", FIELDS, "-j", &ids.join(",")])
        .output()
        .expect("running sacct");
    assert!(output.status.success(), "sacct failed: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).expect("sacct prints UTF-8");
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for line in text.lines().filter(|line| !line.is_empty()) {
        let sacct: Vec<&str> = line.split('|').collect();
        assert_eq!(sacct.len(), 14, "unexpected sacct line {line}");
        let job_id = sacct[0];
        let response = app.get(&format!("/api/v1/jobs/{}?cluster=lab", job_id.replace('+', "%2B"))).await;
        let status = response.status();
        if job_id.contains('[') {
            // A pending array meta record (`15_[0-9%2]`) has no single-task id to look up; it is
            // compared through the listing in `listing_contains_every_mix_job`.
            continue;
        }
        assert_eq!(status, 200, "GET /api/v1/jobs/{job_id}");
        let api: JobDetail = response.json().await.expect("job detail JSON");
        let job = &api.job;
        let mut found = Vec::new();
        let mut check = |field: &str, ours: String, theirs: &str| {
            if ours != theirs {
                found.push(format!("{job_id} {field}: api `{ours}` sacct `{theirs}`"));
            }
        };
        check("JobID", job.job_id.clone(), job_id);
        check("User", job.user.clone(), sacct[1]);
        check("Account", job.account.clone(), sacct[2]);
        check("Partition", job.partition.clone(), sacct[3]);
        // sacct appends the canceller: `CANCELLED by 0`.
        let sacct_state = sacct[4].split(" by ").next().unwrap_or_default();
        check("State", job.state.clone(), sacct_state);
        if let Some(uid) = sacct[4].split(" by ").nth(1) {
            check("State canceller", job.cancelled_by_uid.map(|u| u.to_string()).unwrap_or_default(), uid);
        }
        check("ExitCode", job.exit_code.clone(), sacct[5]);
        check("Submit", sacct_time(Some(job.submit)), sacct[6]);
        // sacct prints `None` for the start of a job that never started.
        let start = if sacct[7] == "None" { "Unknown" } else { sacct[7] };
        check("Start", sacct_time(job.start), start);
        check("End", sacct_time(job.end), sacct[8]);
        if job.state != "RUNNING" {
            check("Elapsed", job.elapsed.clone(), sacct[9]);
        }
        check("NodeList", job.node_list.clone(), sacct[10]);
        check("AllocTRES", job.alloc_tres.clone(), sacct[11]);
        check("AllocTRES gpu", job.alloc_gpus.to_string(), &gpus_in(sacct[11]).to_string());
        // A job that never ran shows what it asked for (a pending or cancelled-while-pending job: 1 and 1).
        check("NNodes", job.alloc_nodes.to_string(), sacct[12]);
        check("AllocCPUS", job.alloc_cpus.to_string(), sacct[13]);
        // A running job's elapsed time moves between the two reads.
        if job.state == "RUNNING" && job.elapsed_raw.abs_diff(seconds(sacct[9])) > 5 {
            found.push(format!("{job_id} Elapsed: api {} sacct {}", job.elapsed, sacct[9]));
        }
        mismatches.extend(found);
        compared += 1;
    }
    assert!(mismatches.is_empty(), "API and sacct disagree:\n{}", mismatches.join("\n"));
    assert!(compared >= mix.len() - 1, "compared {compared} sacct rows for {} mix jobs:\n{text}", mix.len());
    for job in mix {
        let response = app.get(&format!("/api/v1/jobs/{}?cluster=lab", job.job_id.replace('+', "%2B"))).await;
        assert_eq!(response.status(), 200, "{} ({})", job.job_id, job.label);
        let api: JobDetail = response.json().await.expect("job detail JSON");
        assert_eq!(api.job.state, job.expected_state, "{} ({})", job.job_id, job.label);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn job_detail_has_steps_and_gpus_per_node() {
    let gpu2node = crate::support::mix_job("gpu2node");
    let _db = database_shared().await;
    let app = spawn_app(crate::support::test_config(AnonymousAccess::Staff)).await;
    let detail: JobDetail =
        app.get(&format!("/api/v1/jobs/{}?cluster=lab", gpu2node.job_id)).await.json().await.expect("job JSON");
    assert_eq!(detail.job.alloc_nodes, 2);
    assert_eq!(detail.nodes.len(), 2);
    for node in &detail.nodes {
        assert_eq!(node.gpus, Some(4), "{node:?}");
        assert_eq!(node.gpus_source, slurmlens_wire::GpusSource::EvenSplit);
    }
    let step_ids: Vec<&str> = detail.steps.iter().map(|step| step.job_id.as_str()).collect();
    let batch = format!("{}.batch", gpu2node.job_id);
    let extern_step = format!("{}.extern", gpu2node.job_id);
    let srun_step = format!("{}.0", gpu2node.job_id);
    for wanted in [&batch, &extern_step, &srun_step] {
        assert!(step_ids.contains(&wanted.as_str()), "missing step {wanted} in {step_ids:?}");
    }
    let exit1 = crate::support::mix_job("exit1");
    let failed: JobDetail =
        app.get(&format!("/api/v1/jobs/{}?cluster=lab", exit1.job_id)).await.json().await.expect("job JSON");
    assert_eq!(failed.job.exit_code, "1:0");
    assert!(failed.submit_line.contains("sbatch"), "submit line: {}", failed.submit_line);
}
