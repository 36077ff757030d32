//! Advice at submission (#19 part 6), through the API, on the lab's real slurmdbd and munged: one line
//! from the asking user's own finished runs of a job name, nothing for another tenant, the user's and
//! the site's opt-outs, and the plugin's MUNGE credential (single-use, made for slurmlens, verified
//! by the lab's munged).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig};
use slurmlens_wire::{AdviceAnswer, AdviceKind, AdviceSetting};

use crate::support::{TestApp, database_shared, fresh_database, lab, slurm, spawn_app, test_config};

/// A job name no other test submits, fresh for each run of the tests.
pub(crate) fn fresh_name(prefix: &str) -> String {
    format!("{prefix}-{}", chrono::Utc::now().timestamp_millis())
}

/// `sbatch`'s options for a job of alice (account ml) named `name` with a one-day limit, its output
/// discarded: what the advice compares a submission with.
pub(crate) fn alice_day_job(name: &str) -> [&str; 10] {
    ["--parsable", "-J", name, "--uid=alice", "--gid=alice", "-A", "ml", "--time=1-0", "-o", "/dev/null"]
}

/// Submits `runs` short jobs of alice named `name` with a one-day limit and waits until slurmdbd has
/// each one's end (as `sacct` shows it).
pub(crate) async fn alice_history(name: &str, runs: usize) {
    let ids: Vec<String> = (0..runs)
        .map(|_| {
            let out = slurm("sbatch", &[&alice_day_job(name)[..], &["--wrap", "true"]].concat());
            out.trim().split(';').next().expect("a job id").to_string()
        })
        .collect();
    let list = ids.join(",");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let states = slurm("sacct", &["-n", "-X", "-P", "-o", "State,End", "-j", &list]);
        let done = states.lines().filter(|line| line.starts_with("COMPLETED|") && !line.ends_with("Unknown")).count();
        if done == runs {
            return;
        }
        assert!(Instant::now() < deadline, "alice's {runs} `{name}` jobs did not complete: {states}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until `app` reads alice's finished runs of `name` (slurmdbd's table lags `sacct`'s answer
/// by a fraction of a second just after a job ends).
pub(crate) async fn wait_seen(app: &TestApp, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = advice_as(app, "alice", &format!("job_name={name}&cluster=lab")).await;
        if answer.advice.is_some() {
            return;
        }
        assert!(Instant::now() < deadline, "the server never read alice's `{name}` runs");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The lab's test configuration with a store of its own (`database`: each test's own, since a user's
/// opt-out is the store's state) and the lab's munged.
pub(crate) async fn advice_config(database: &str) -> Config {
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: fresh_database(database).await });
    config.advice.munge_socket = Some(lab().var("LAB_MUNGE_SOCKET").into());
    // The lab's machine is shared by parallel builds: the deadline here is about correctness, not speed.
    config.advice.deadline_ms = 20_000;
    config
}

/// A MUNGE credential from the lab's munged, made by root for `user` with `payload`.
pub(crate) fn credential(user: &str, payload: &str) -> String {
    let mut child = std::process::Command::new("munge")
        .args([&format!("--socket={}", lab().var("LAB_MUNGE_SOCKET")), &format!("--uid={user}"), "--input=-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running munge");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), payload.as_bytes()).expect("payload");
    let output = child.wait_with_output().expect("munge's answer");
    assert!(output.status.success(), "munge failed");
    String::from_utf8(output.stdout).expect("text").trim().to_string()
}

async fn advice_as(app: &TestApp, user: &str, query: &str) -> AdviceAnswer {
    let response = app.get_as(user, &format!("/api/v1/advice?{query}")).await;
    assert_eq!(response.status(), 200, "advice as {user}");
    response.json().await.expect("advice JSON")
}

async fn advice_with_munge(app: &TestApp, credential: &str, query: &str) -> reqwest::Response {
    app.client
        .get(format!("{}/api/v1/advice?{query}", app.base_url))
        .header("X-Munge-Credential", credential)
        .send()
        .await
        .expect("request reaches the server")
}

async fn put_setting(app: &TestApp, user: &str, enabled: bool) -> reqwest::Response {
    app.client
        .put(format!("{}/api/v1/me/advice", app.base_url))
        .header("X-Remote-User", user)
        .json(&json!({ "enabled": enabled }))
        .send()
        .await
        .expect("request reaches the server")
}

#[tokio::test(flavor = "multi_thread")]
async fn advice_speaks_from_the_users_own_runs_only_and_each_opt_out_silences_it() {
    let _db = database_shared().await;
    let name = fresh_name("advice-api");
    alice_history(&name, 3).await;
    let config = advice_config("h_advice_api").await;
    let app = spawn_app(config.clone()).await;
    wait_seen(&app, &name).await;
    let query = format!("job_name={name}&cluster=lab");

    // alice's three one-minute runs under a one-day limit: the time limit is the advice.
    let answer = advice_as(&app, "alice", &query).await;
    let advice = answer.advice.expect("advice for alice");
    assert_eq!(advice.kind, AdviceKind::TimeLimit);
    assert_eq!(advice.runs, 3);
    assert_eq!(
        advice.line,
        format!(
            "your last 3 runs of `{name}` ran 1 min at most, and this one asks for 1 d: a shorter --time starts sooner"
        )
    );
    // Asking for a limit that fits is advice taken: nothing to say.
    assert_eq!(advice_as(&app, "alice", &format!("{query}&time_limit=20")).await.advice, None);
    assert!(
        advice_as(&app, "alice", &format!("{query}&time_limit=2-0"))
            .await
            .advice
            .is_some_and(|a| a.line.contains("asks for 2 d"))
    );

    // Another tenant asking about the same name reads only their own history: none.
    assert_eq!(advice_as(&app, "bob", &query).await.advice, None);
    // Bad options are refused, naming the parameter; no identity is a 401.
    for (bad, parameter) in [("time_limit=soon", "time_limit"), ("gpus=many", "gpus"), ("nodes=0", "nodes")] {
        let response = app.get_as("alice", &format!("/api/v1/advice?{query}&{bad}")).await;
        assert_eq!(response.status(), 400, "{bad}");
        let envelope: slurmlens_wire::ErrorEnvelope = response.json().await.expect("envelope");
        assert_eq!(envelope.error.parameter.as_deref(), Some(parameter));
    }
    assert_eq!(app.get_as("alice", "/api/v1/advice?cluster=lab").await.status(), 400, "a job name is needed");
    assert_eq!(app.get(&format!("/api/v1/advice?{query}")).await.status(), 401);

    // alice turns advice off, and on again.
    let setting: AdviceSetting = app.get_as("alice", "/api/v1/me/advice").await.json().await.expect("setting");
    assert!(setting.enabled, "on unless turned off");
    assert_eq!(put_setting(&app, "alice", false).await.status(), 200);
    let setting: AdviceSetting = app.get_as("alice", "/api/v1/me/advice").await.json().await.expect("setting");
    assert!(!setting.enabled);
    assert_eq!(advice_as(&app, "alice", &query).await.advice, None, "alice opted out");
    let cross_site = app
        .client
        .put(format!("{}/api/v1/me/advice", app.base_url))
        .header("X-Remote-User", "alice")
        .header("Sec-Fetch-Site", "cross-site")
        .json(&json!({ "enabled": true }))
        .send()
        .await
        .expect("request");
    assert_eq!(cross_site.status(), 403);
    assert_eq!(advice_as(&app, "alice", &query).await.advice, None, "a refused change changed nothing");
    let bad_body = app
        .client
        .put(format!("{}/api/v1/me/advice", app.base_url))
        .header("X-Remote-User", "alice")
        .json(&json!({ "on": true }))
        .send()
        .await
        .expect("request");
    assert_eq!(bad_body.status(), 400);
    assert_eq!(put_setting(&app, "alice", true).await.status(), 200);
    assert!(advice_as(&app, "alice", &query).await.advice.is_some(), "alice turned it back on");
    let anonymous = app
        .client
        .put(format!("{}/api/v1/me/advice", app.base_url))
        .json(&json!({ "enabled": false }))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status(), 401);

    // The site's opt-out: nobody gets advice.
    let mut off = config.clone();
    off.advice.enabled = false;
    let site_off = spawn_app(off).await;
    assert_eq!(advice_as(&site_off, "alice", &query).await.advice, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_munge_credential_is_the_submitting_user_once_and_a_forged_or_foreign_one_gets_nothing() {
    let _db = database_shared().await;
    let name = fresh_name("advice-munge");
    alice_history(&name, 3).await;
    let app = spawn_app(advice_config("h_advice_munge").await).await;
    wait_seen(&app, &name).await;
    let query = format!("job_name={name}&cluster=lab");

    // A credential alice's sbatch would make (root makes it for her here): her advice.
    let made = credential("alice", "slurmlens:advice");
    let response = advice_with_munge(&app, &made, &query).await;
    assert_eq!(response.status(), 200);
    let answer: AdviceAnswer = response.json().await.expect("advice JSON");
    assert!(answer.advice.is_some_and(|advice| advice.line.contains(&name)), "alice's advice");

    // The same credential again: munged's replay cache refuses it.
    let replayed = advice_with_munge(&app, &made, &query).await;
    assert_eq!(replayed.status(), 401, "a credential is single-use");
    let envelope: slurmlens_wire::ErrorEnvelope = replayed.json().await.expect("envelope");
    assert_eq!(envelope.error.code, "unauthorized");

    // One byte changed: it no longer decodes.
    let fresh = credential("alice", "slurmlens:advice");
    let body = fresh.trim_start_matches("MUNGE:");
    let middle = body.len() / 2;
    let flipped = if &body[middle..=middle] == "A" { "B" } else { "A" };
    let forged = format!("MUNGE:{}{flipped}{}", &body[..middle], &body[middle + 1..]);
    assert_eq!(advice_with_munge(&app, &forged, &query).await.status(), 401, "forged");
    assert_eq!(advice_with_munge(&app, "MUNGE:not a credential:", &query).await.status(), 401, "malformed");

    // A credential made for anything else is not taken, even though munged decodes it.
    let foreign = credential("alice", "something else");
    assert_eq!(advice_with_munge(&app, &foreign, &query).await.status(), 401, "another payload");

    // bob's credential reads bob's history: nothing for alice's job name.
    let bobs = credential("bob", "slurmlens:advice");
    let answer: AdviceAnswer = advice_with_munge(&app, &bobs, &query).await.json().await.expect("advice JSON");
    assert_eq!(answer.advice, None);
}
