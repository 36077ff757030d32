//! Advice at submission through the lab's real `sbatch` and the cli_filter plugin: the line is printed
//! beside the report link for a user with a history; nothing with the user's (environment or stored)
//! or the site's opt-out; and a server that never answers delays the submission by the plugin's
//! budget at most, never failing it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::advice::{advice_config, alice_history, fresh_name};
use crate::plugin::{PLUGIN_CONFIG, PluginLab, PointedAt, plugin_lab};
use crate::support::{database_shared, lab, spawn_app};

/// Points the plugin at `url` with advice settings, until dropped.
fn pointed(plugin: &PluginLab, url: &str, extra: &[&str]) -> PointedAt {
    let original = std::fs::read_to_string(&plugin.conf_path).expect("reading the plugin configuration");
    let ours = ["public_url", "advice", "advice_timeout_ms", "munge_socket"];
    let mut text: String = original
        .lines()
        .filter(|line| !ours.iter().any(|key| line.trim_start().split([' ', '=']).next() == Some(key)))
        .map(|line| format!("{line}\n"))
        .collect();
    text.push_str(&format!("public_url = \"{url}\"\nmunge_socket = \"{}\"\n", lab().var("LAB_MUNGE_SOCKET")));
    for line in extra {
        text.push_str(&format!("{line}\n"));
    }
    PointedAt::replaced(plugin, &text)
}

/// `sbatch` as root on alice's behalf with a one-day limit; its stderr and how long it took.
fn submit(name: &str, env: &[(&str, &str)]) -> (String, Duration) {
    let jobs = lab().dir.join("jobs");
    let started = Instant::now();
    let output = lab()
        .command("sbatch")
        .args(["--parsable", "-J", name, "--uid=alice", "--gid=alice", "-A", "ml", "--time=1-0", "-o", "/dev/null"])
        .arg(format!("--chdir={}", jobs.display()))
        .args(["--wrap", "true"])
        .envs(env.iter().copied())
        .output()
        .expect("running sbatch");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "sbatch failed: {stderr}");
    (stderr, took)
}

fn advice_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.starts_with("slurmlens: advice: ")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sbatch_prints_advice_beside_the_link_only_where_wanted_and_never_waits_past_its_budget() {
    let _db = database_shared().await;
    let _plugin_config = PLUGIN_CONFIG.lock().await;
    let plugin = plugin_lab();
    assert!(Path::new(lab().var("LAB_MUNGE_SOCKET")).exists(), "the lab's munged socket");
    let name = fresh_name("advice-sbatch");
    alice_history(&name, 3).await;
    let app = spawn_app(advice_config().await).await;
    let expected =
        format!("slurmlens: advice: your last 3 runs of `{name}` ran 1 min at most, and this one asks for 1 d: a shorter --time starts sooner");
    {
        // A generous budget: this machine is shared by parallel builds, and this part is about the line.
        let _pointed = pointed(&plugin, &app.base_url, &["advice_timeout_ms = 8000"]);
        let (stderr, _) = submit(&name, &[]);
        assert!(stderr.contains(&format!("slurmlens: report at {}/jobs/", app.base_url)), "the link stays: {stderr}");
        assert_eq!(advice_lines(&stderr), [expected.as_str()], "sbatch's stderr: {stderr}");

        // The user's own opt-outs: the environment, and the stored setting.
        let (stderr, _) = submit(&name, &[("SLURMLENS_ADVICE", "off")]);
        assert!(stderr.contains("slurmlens: report at "), "{stderr}");
        assert!(advice_lines(&stderr).is_empty(), "SLURMLENS_ADVICE=off: {stderr}");
        let off = app
            .client
            .put(format!("{}/api/v1/me/advice", app.base_url))
            .header("X-Remote-User", "alice")
            .json(&serde_json::json!({ "enabled": false }))
            .send()
            .await
            .expect("request");
        assert_eq!(off.status(), 200);
        let (stderr, _) = submit(&name, &[]);
        assert!(advice_lines(&stderr).is_empty(), "alice opted out: {stderr}");
        let on = app
            .client
            .put(format!("{}/api/v1/me/advice", app.base_url))
            .header("X-Remote-User", "alice")
            .json(&serde_json::json!({ "enabled": true }))
            .send()
            .await
            .expect("request");
        assert_eq!(on.status(), 200);
    }
    {
        // The site's opt-out in the plugin's configuration.
        let _pointed = pointed(&plugin, &app.base_url, &["advice = off", "advice_timeout_ms = 8000"]);
        let (stderr, _) = submit(&name, &[]);
        assert!(stderr.contains("slurmlens: report at "), "{stderr}");
        assert!(advice_lines(&stderr).is_empty(), "advice = off: {stderr}");
    }
    {
        // A server that takes connections and never answers, for as long as this test runs: waiting
        // for it would never end. The submission goes through, with its link and without advice.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://127.0.0.1:{}", silent.local_addr().expect("address").port());
        let _pointed = pointed(&plugin, &url, &["advice_timeout_ms = 300"]);
        let (stderr, took) = submit(&name, &[]);
        assert!(stderr.contains(&format!("slurmlens: report at {url}/jobs/")), "{stderr}");
        assert!(advice_lines(&stderr).is_empty(), "{stderr}");
        eprintln!("plugin_advice: sbatch took {took:?} with a silent server (budget 300 ms)");
        assert!(took < Duration::from_secs(30), "sbatch waited for the silent server: {took:?}");
        drop(silent);
    }
}
