//! Advice at submission through the lab's real `sbatch` and the cli_filter plugin: the line is printed
//! beside the report link for a user with a history; nothing with the user's (environment or stored)
//! or the site's opt-out; and a server that never answers delays the submission by the plugin's
//! budget at most, never failing it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::advice::{advice_config, alice_history, fresh_name};
use crate::support::{database_shared, lab, repo_root, spawn_app};

/// A client-side Slurm configuration of its own: the lab's `slurm.conf` (same slurmctld, munged and
/// slurmdbd) loading this build's cli_filter plugin, with a plugin configuration of its own. Only this
/// test's `sbatch` reads it: the shared lab's plugin stack is left as it is.
struct ClientConf {
    dir: PathBuf,
}

impl ClientConf {
    fn new() -> Self {
        let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from);
        let built = target.join("debug/libcli_filter_slurmlens.so");
        assert!(built.is_file(), "{} is not built: cargo build -p slurmlens-cli-filter", built.display());
        let dir = std::env::temp_dir().join(format!("slurmlens-advice-client-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("plugins")).expect("a folder");
        std::fs::copy(&built, dir.join("plugins/cli_filter_slurmlens.so")).expect("copying the plugin");
        let lab_conf = std::fs::read_to_string(lab().var("SLURM_CONF")).expect("the lab's slurm.conf");
        let extra = dir.join("slurm.extra.conf");
        let conf: String = lab_conf
            .lines()
            .map(|line| {
                if line.starts_with("include ") {
                    format!("include {}\n", extra.display())
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        std::fs::write(dir.join("slurm.conf"), conf).expect("writing slurm.conf");
        // Slurm's own plugins first, as the lab's `PluginDir` has them (`lab.sh` asks dpkg the same).
        let system = ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib64/slurm", "/usr/lib/slurm"]
            .into_iter()
            .map(Path::new)
            .find(|dir| dir.join("cli_filter_none.so").is_file())
            .expect("Slurm's own plugin folder");
        std::fs::write(
            &extra,
            format!("PluginDir={}:{}\nCliFilterPlugins=slurmlens\n", system.display(), dir.join("plugins").display()),
        )
        .expect("writing slurm.extra.conf");
        Self { dir }
    }

    /// The plugin's configuration: pointed at `url`, with the lab's munged and these extra lines.
    fn point(&self, url: &str, extra: &[&str]) {
        let mut text = format!(
            "public_url = \"{url}\"\ncluster = \"lab\"\nspool_dir = \"{}\"\nmunge_socket = \"{}\"\n",
            self.dir.join("spool").display(),
            lab().var("LAB_MUNGE_SOCKET")
        );
        for line in extra {
            text.push_str(&format!("{line}\n"));
        }
        std::fs::write(self.dir.join("slurmlens-plugin.conf"), text).expect("writing the plugin configuration");
    }
}

impl Drop for ClientConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `sbatch` as root on alice's behalf with a one-day limit; its stderr and how long it took.
fn submit(client: &ClientConf, name: &str, env: &[(&str, &str)]) -> (String, Duration) {
    let jobs = lab().dir.join("jobs");
    let mut started = Instant::now();
    let output = crate::support::run_slurm("sbatch", || {
        started = Instant::now();
        let mut command = lab().command("sbatch");
        command
            .env("SLURM_CONF", client.dir.join("slurm.conf"))
            .arg("-v")
            .args(crate::advice::alice_day_job(name))
            .arg(format!("--chdir={}", jobs.display()))
            .args(["--wrap", "true"])
            .envs(env.iter().copied());
        command
    });
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    (stderr, took)
}

fn advice_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.starts_with("slurmlens: advice: ")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sbatch_prints_advice_beside_the_link_only_where_wanted_and_never_waits_past_its_budget() {
    let _db = database_shared().await;
    let client = ClientConf::new();
    assert!(Path::new(lab().var("LAB_MUNGE_SOCKET")).exists(), "the lab's munged socket");
    let name = fresh_name("advice-sbatch");
    alice_history(&name, 3).await;
    let app = spawn_app(advice_config("h_advice_plugin").await).await;
    crate::advice::wait_seen(&app, &name).await;
    let expected = format!(
        "slurmlens: advice: your last 3 runs of `{name}` ran 1 min at most, and this one asks for 1 d: a shorter --time starts sooner"
    );
    {
        // A generous budget: this machine is shared by parallel builds, and this part is about the line.
        client.point(&app.base_url, &["advice_timeout_ms = 8000"]);
        let (stderr, _) = submit(&client, &name, &[]);
        assert!(stderr.contains(&format!("slurmlens: report at {}/jobs/", app.base_url)), "the link stays: {stderr}");
        assert_eq!(advice_lines(&stderr), [expected.as_str()], "sbatch's stderr: {stderr}");

        // The user's own opt-outs: the environment, and the stored setting.
        let (stderr, _) = submit(&client, &name, &[("SLURMLENS_ADVICE", "off")]);
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
        let (stderr, _) = submit(&client, &name, &[]);
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
        client.point(&app.base_url, &["advice = off", "advice_timeout_ms = 8000"]);
        let (stderr, _) = submit(&client, &name, &[]);
        assert!(stderr.contains("slurmlens: report at "), "{stderr}");
        assert!(advice_lines(&stderr).is_empty(), "advice = off: {stderr}");
    }
    {
        // A server that takes connections and never answers, for as long as this test runs: waiting
        // for it would never end. The submission goes through, with its link and without advice.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://127.0.0.1:{}", silent.local_addr().expect("address").port());
        client.point(&url, &["advice_timeout_ms = 300"]);
        let (stderr, took) = submit(&client, &name, &[]);
        assert!(stderr.contains(&format!("slurmlens: report at {url}/jobs/")), "{stderr}");
        assert!(advice_lines(&stderr).is_empty(), "{stderr}");
        eprintln!("plugin_advice: sbatch took {took:?} with a silent server (budget 300 ms)");
        assert!(took < Duration::from_secs(30), "sbatch waited for the silent server: {took:?}");
        drop(silent);
    }
}
