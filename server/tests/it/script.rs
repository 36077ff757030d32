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

/// As alice, a job whose script names its output file with Slurm's patterns under the lab's job
/// directory, writes a line to each stream and fails. Its id and the file.
fn submit_failing_with_output(tag: &str) -> (u32, std::path::PathBuf) {
    let dir = lab().dir.join("jobs");
    std::fs::create_dir_all(&dir).expect("the lab's job directory");
    let path = dir.join(format!("output-test-{}.sh", std::process::id()));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n#SBATCH --output={}/out-%x-%j.log\necho 'step 1 loss 2.31 {tag}'\necho 'RuntimeError: CUDA error: an illegal memory access was encountered' >&2\nexit 1\n",
            dir.display()
        ),
    )
    .expect("writing the script");
    let output = crate::support::run_slurm("sbatch", || {
        let mut command = lab().command("sbatch");
        command.args(["--parsable", "-J", "output-test", "--uid=alice", "--gid=alice", "--time=1"]).arg(&path);
        command
    });
    let text = String::from_utf8_lossy(&output.stdout);
    let id: u32 = text.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id");
    (id, dir.join(format!("out-output-test-{id}.log")))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_jobs_own_output_reaches_its_owner_and_staff_where_the_site_allows_it() {
    let _db = database_shared().await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.job_output.roots = vec![lab().dir.join("jobs")];
    let app = spawn_app(config).await;
    let tag = format!("run-{}", std::process::id());
    let (job_id, file) = submit_failing_with_output(&tag);
    let path = format!("/api/v1/jobs/{job_id}/output?cluster=lab");
    // The job ends and slurmdbd holds its script.
    stored_script(&app, job_id).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let owner: slurmlens_wire::JobOutput = loop {
        let (status, body) = as_user(&app, "alice", &path).await;
        assert_eq!(status, 200, "{body}");
        let output: slurmlens_wire::JobOutput = serde_json::from_str(&body).expect("a JobOutput");
        if output.files.first().and_then(|f| f.tail.as_deref()).is_some_and(|tail| tail.contains("illegal memory")) {
            break output;
        }
        assert!(Instant::now() < deadline, "the job's output never showed: {body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let first = &owner.files[0];
    assert_eq!(first.path.as_deref(), Some(file.to_str().expect("a path")), "the script's pattern, filled in");
    assert_eq!((first.named, first.state), (slurmlens_wire::OutputNamed::Script, slurmlens_wire::OutputState::Read));
    assert!(first.tail.as_deref().is_some_and(|tail| tail.contains(&tag)), "{first:?}");
    assert_eq!(owner.files.len(), 1, "standard error went to the same file");

    // Staff read it too; the coordinator of alice's account learns where it is, not what it says.
    let (status, body) = as_user(&app, "root", &path).await;
    assert!(status == 200 && body.contains("illegal memory"), "{status} {body}");
    let (status, body) = as_user(&app, "carol", &path).await;
    assert_eq!(status, 200, "{body}");
    let coordinator: slurmlens_wire::JobOutput = serde_json::from_str(&body).expect("a JobOutput");
    assert_eq!(coordinator.files[0].state, slurmlens_wire::OutputState::Withheld);
    assert!(!body.contains("illegal memory") && !body.contains(&tag), "{body}");
    // Another tenant: a 404 like a missing job.
    assert_eq!(as_user(&app, "bob", &path).await.0, 404);

    // A site that lets slurmlens read nothing: the owner is told where the file is, and nothing is read.
    let closed = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let (status, body) = as_user(&closed, "alice", &path).await;
    assert_eq!(status, 200, "{body}");
    let output: slurmlens_wire::JobOutput = serde_json::from_str(&body).expect("a JobOutput");
    assert_eq!(output.files[0].state, slurmlens_wire::OutputState::NotAllowed);
    assert_eq!(output.files[0].path, owner.files[0].path);
    assert!(!body.contains("illegal memory"), "{body}");
    std::fs::remove_file(&file).ok();
}
