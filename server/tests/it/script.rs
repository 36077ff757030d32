//! The job script (issue #19, part 2), on a real lab job: the batch script and the submit line reach
//! the job's owner, the coordinators of its account and staff; the submission environment only the
//! owner and staff; anyone else gets exactly what a job that does not exist gets. A script longer than
//! the cap is cut, and the answer says so.

use std::time::{Duration, Instant};

use slurmlens::app::script::SCRIPT_CAP_CHARS;
use slurmlens::config::AnonymousAccess;
use slurmlens_wire::{EnvironmentAccess, JobScript};

use crate::support::{TestApp, database_shared, lab, spawn_app, test_config};

/// Submits, as alice (account `ml`, which carol coordinates), a batch script longer than the cap with
/// `secret` in its first line and in its environment. Its id.
fn submit_with_script(secret: &str) -> u32 {
    let dir = lab().dir.join("jobs");
    std::fs::create_dir_all(&dir).expect("the lab's job directory");
    let path = dir.join(format!("script-test-{}.sh", std::process::id()));
    // Long enough to be cut: every line is 64 characters.
    let padding = "# padding so that the script is longer than the server's cap ..\n"
        .repeat(usize::try_from(SCRIPT_CAP_CHARS / 64).expect("fits") + 100);
    std::fs::write(&path, format!("#!/bin/sh\n# {secret}\ntrue\n{padding}")).expect("writing the script");
    let output = crate::support::run_slurm("sbatch", || {
        let mut command = lab().command("sbatch");
        command
            .env("SLURMLENS_TEST_SECRET", secret)
            .args(["--parsable", "-J", "script-test", "--uid=alice", "--gid=alice", "--export=ALL", "--time=1"])
            .args(["-o", "/dev/null"])
            .arg(&path);
        command
    });
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id")
}

/// `user`'s answer for `path`: status and body.
async fn as_user(app: &TestApp, user: &str, path: &str) -> (u16, String) {
    let response = app.get_as(user, path).await;
    (response.status().as_u16(), response.text().await.expect("a body"))
}

/// Waits until slurmdbd holds the job's script (slurmctld sends it with the job's first record).
async fn stored_script(app: &TestApp, job_id: u32) -> JobScript {
    let deadline = Instant::now() + Duration::from_secs(120);
    let path = format!("/api/v1/jobs/{job_id}/script?cluster=lab");
    loop {
        let (status, body) = as_user(app, "alice", &path).await;
        if status == 200 {
            let script: JobScript = serde_json::from_str(&body).expect("a JobScript");
            if script.script.is_some() {
                return script;
            }
        }
        assert!(Instant::now() < deadline, "slurmdbd never held job {job_id}'s script: {status} {body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_script_reaches_owner_coordinators_and_staff_and_its_environment_only_owner_and_staff() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let secret = format!("s3cret-{}-{}", std::process::id(), chrono::Utc::now().timestamp_millis());
    let job_id = submit_with_script(&secret);
    let path = format!("/api/v1/jobs/{job_id}/script?cluster=lab");

    // The owner: everything, the long script cut at the cap.
    let owner = stored_script(&app, job_id).await;
    let script = owner.script.as_ref().expect("the script");
    assert!(script.text.starts_with("#!/bin/sh\n") && script.text.contains(&secret), "{}", &script.text[..80]);
    assert!(script.truncated, "a script longer than the cap is cut and says so");
    assert_eq!(script.shown_chars, SCRIPT_CAP_CHARS);
    assert!(script.total_chars > SCRIPT_CAP_CHARS, "{}", script.total_chars);
    assert!(
        owner.submit_line.starts_with("sbatch") && owner.submit_line.contains("script-test"),
        "{}",
        owner.submit_line
    );
    assert_eq!((owner.user.as_str(), owner.account.as_str()), ("alice", "ml"));
    assert_eq!(owner.environment_access, EnvironmentAccess::Shown);
    let environment = owner.environment.as_ref().expect("the owner sees the environment");
    assert!(environment.text.contains(&format!("SLURMLENS_TEST_SECRET={secret}")), "the environment at submission");

    // Staff: everything.
    let (status, body) = as_user(&app, "root", &path).await;
    assert_eq!(status, 200, "{body}");
    let staff: JobScript = serde_json::from_str(&body).expect("a JobScript");
    assert_eq!((staff.environment_access, staff.script), (EnvironmentAccess::Shown, owner.script.clone()));

    // The coordinator of the job's account: the script and the submit line, never the environment.
    let (status, body) = as_user(&app, "carol", &path).await;
    assert_eq!(status, 200, "{body}");
    let coordinator: JobScript = serde_json::from_str(&body).expect("a JobScript");
    assert_eq!(coordinator.script, owner.script);
    assert_eq!(coordinator.submit_line, owner.submit_line);
    assert_eq!((coordinator.environment_access, coordinator.environment), (EnvironmentAccess::Withheld, None));
    assert!(!body.contains("SLURMLENS_TEST_SECRET"), "no part of the environment reaches a coordinator");

    // Another tenant: exactly what a job that does not exist gets, and nothing of the job.
    let missing = 99_999_999u32;
    for user in ["bob", "dave"] {
        let (status, body) = as_user(&app, user, &path).await;
        let (missing_status, missing_body) =
            as_user(&app, user, &format!("/api/v1/jobs/{missing}/script?cluster=lab")).await;
        assert_eq!(status, 404, "{user}: {body}");
        assert_eq!(
            (status, body.replace(&job_id.to_string(), "ID")),
            (missing_status, missing_body.replace(&missing.to_string(), "ID"))
        );
        assert!(!body.contains(&secret) && !body.contains("sbatch"), "{user}: {body}");
    }
    // Without an identity: told to sign in, as for any job.
    let response = app.get(&path).await;
    assert_eq!(response.status().as_u16(), 401);
}
