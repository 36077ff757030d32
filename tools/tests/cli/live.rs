//! `demo live` against the lab: sakura's history continued in real time and its telemetry continued from
//! the seeded series (real MariaDB, VictoriaMetrics and the server's router; needs the lab up and sakura
//! seeded, as `e2e/seed-sakura.sh` does in CI).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use tower::ServiceExt;

use slurmlens::config::{AccessConfig, AnonymousAccess, Config, DatabaseConfig, VictoriaMetricsConfig};
use slurmlens::sources::victoriametrics::VictoriaMetrics;
use slurmlens_tools::demo::history::live::Phase;
use slurmlens_tools::demo::live::{Live, LiveSettings};

/// The variables `lab.sh up` wrote to `$LAB/env.sh`.
pub fn lab_vars() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tools/ has a parent").to_path_buf();
    let dir = std::env::var_os("SLURMLENS_LAB").map_or_else(|| root.join(".lab"), PathBuf::from);
    let text = std::fs::read_to_string(dir.join("env.sh"))
        .unwrap_or_else(|e| panic!("the lab is not up ({}: {e}); run `bash lab/lab.sh up` first", dir.display()));
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("export "))
        .filter_map(|assignment| assignment.split_once('='))
        .map(|(name, value)| (name.to_string(), value.trim_matches(|c| c == '"' || c == '\'').to_string()))
        .collect()
}

/// `slurmlens-dev` run with `args` against the lab (its env.sh, `SLURMLENS_CLUSTERS=sakura`): what it
/// printed, after checking that it succeeded.
pub fn dev_against_lab(args: &[&str]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_slurmlens-dev"));
    command.envs(lab_vars()).env("SLURMLENS_CLUSTERS", "sakura").args(args);
    let output = command.output().expect("the slurmlens-dev binary runs");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{args:?} failed:\n{printed}\n{}", String::from_utf8_lossy(&output.stderr));
    printed
}

fn config(vars: &BTreeMap<String, String>) -> Config {
    let var = |name: &str| vars.get(name).cloned().unwrap_or_else(|| panic!("{name} missing from the lab's env.sh"));
    let mut config = Config {
        listen: "127.0.0.1:0".parse().expect("valid address"),
        clusters: vec!["lab".parse().expect("valid cluster"), "sakura".parse().expect("valid cluster")],
        database: Some(DatabaseConfig { url: var("SLURMLENS_DATABASE_URL") }),
        access: AccessConfig { anonymous: AnonymousAccess::Staff, ..AccessConfig::default() },
        topology: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/topology.toml")),
        ..Config::default()
    };
    config.slurmdbd.url = var("SLURMLENS_SLURMDBD_URL");
    let vm: VictoriaMetricsConfig =
        serde_json::from_value(serde_json::json!({"url": var("SLURMLENS_VM_URL")})).expect("VictoriaMetrics defaults");
    config.victoriametrics = Some(vm);
    config
}

async fn start(config: &Config, seeder_url: &str, now: i64) -> Live {
    let vm_url = &config.victoriametrics.as_ref().expect("configured").url;
    // The lab's current VictoriaMetrics gets the same samples, as `e2e/seed-sakura.sh` writes both: the
    // tests' second pass reads it, and a job this test starts must have its series there too.
    let mirror = lab_vars()
        .get("LAB_VM_CURRENT_URL")
        .map(|url| VictoriaMetrics::new(url, std::time::Duration::from_secs(60)).expect("VictoriaMetrics client"));
    let vm = VictoriaMetrics::new(vm_url, std::time::Duration::from_secs(60))
        .expect("VictoriaMetrics client")
        .with_import_mirror(mirror);
    let pool = sqlx::MySqlPool::connect(seeder_url).await.expect("connecting as the seeder");
    let store = slurmlens::serve::app(config).expect("app").store().cloned();
    let topology = slurmlens::serve::topology(config).expect("topology");
    let shape = slurmlens_tools::demo::cli::HistoryShape {
        days: 30,
        jobs: 200_000,
        nodes: 100,
        gpus_per_node: 8,
        seed: 0x5a4b_0001,
    };
    let settings = LiveSettings {
        cluster: "sakura".parse().expect("valid cluster"),
        shape,
        step_s: 30,
        gpus_per_node: 8,
        backfill_s: 3600,
    };
    Live::start(settings, pool, store, vm, &topology, now).await.expect("the live continuation starts")
}

/// `GET /api/v1/jobs/{id}?cluster=sakura` through the server's router, as JSON.
async fn job(config: &Config, job_id: u32) -> serde_json::Value {
    let router = slurmlens::http::router(slurmlens::serve::http_state(config).expect("state"));
    let request = axum::http::Request::get(format!("/api/v1/jobs/{job_id}?cluster=sakura"))
        .body(axum::body::Body::empty())
        .expect("request");
    let response = router.oneshot(request).await.expect("the router answers");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 24).await.expect("body");
    assert!(status.is_success(), "job {job_id}: {status} {}", String::from_utf8_lossy(&body));
    let value: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    if value.get("job").is_some() { value["job"].clone() } else { value }
}

/// The last value of `selector` at or before `t` (within 10 minutes), with its time.
async fn last_at(vm: &VictoriaMetrics, selector: &str, t: i64) -> Option<(i64, f64)> {
    let at = DateTime::from_timestamp(t, 0).expect("time");
    let value = vm.query(&format!("last_over_time({selector}[10m])"), at).await.expect("query");
    let stamp = vm.query(&format!("tlast_over_time({selector}[10m])"), at).await.expect("query");
    Some((stamp.first()?.points.last()?.1 as i64, value.first()?.points.last()?.1))
}

#[tokio::test]
async fn live_ticks_continue_sakuras_jobs_and_series_and_write_nothing_twice() {
    let vars = lab_vars();
    let config = config(&vars);
    let seeder_url = vars.get("SLURMLENS_SEEDER_URL").expect("SLURMLENS_SEEDER_URL in env.sh").clone();
    let vm = VictoriaMetrics::new(&vars["SLURMLENS_VM_URL"], std::time::Duration::from_secs(60)).expect("client");
    let mut live = start(&config, &seeder_url, Utc::now().timestamp()).await;
    // Catch up to now, or to where an earlier run of this test left the data (it may run a little ahead).
    let now = Utc::now().timestamp().max(live.caught_up_to());
    live.tick(now).await.expect("the catch-up tick");
    let seam = live.marks();

    // The next tick reaches the first planned end and the first submission after now (seconds ahead at
    // the history's rates), so both happen in it whenever the test runs.
    let changes = live.timeline().changes(now, now + 3600);
    let ending = changes.iter().find(|(_, before, after)| *before == Phase::Running && *after == Phase::Ended);
    let submitted = changes.iter().find(|(_, before, _)| *before == Phase::Unsubmitted);
    let (ending, _, _) = ending.expect("a running job ends within the hour");
    let (submitted, _, _) = submitted.expect("a job is submitted within the hour");
    let later = Utc::now().timestamp().max(ending.t_end).max(submitted.t_submit) + 31;
    let stats = live.tick(later).await.expect("the second tick");
    assert!(stats.rows.ended >= 1 && stats.rows.submitted >= 1, "{stats:?}");
    assert!(stats.samples > 0, "{stats:?}");

    // The ended job reads as sacct shows an ended job: its final state and an end.
    let ended = job(&config, ending.id_job).await;
    assert_eq!(ended["state"], ending.final_state, "{ended}");
    let end = ended["end"].as_str().expect("an end time");
    assert_eq!(DateTime::parse_from_rfc3339(end).expect("RFC 3339").timestamp(), ending.t_end);
    let new = job(&config, submitted.id_job).await;
    assert_eq!(new["job_id_raw"], submitted.id_job, "{new}");

    // A training job running now: its GPUs have a sample at the new mark, as busy as the seeded profile
    // says, and their energy counters went on from where the seam left them.
    let marks = live.marks();
    assert!(marks.gpu > seam.gpu && marks.gpu <= later, "{seam:?} → {marks:?}");
    let running = live.timeline().gpu_jobs_between(later, later);
    let training = running
        .iter()
        .filter(|job| job.t_start < seam.gpu)
        .find(|job| {
            matches!(
                slurmlens_tools::demo::seed_telemetry::profile_for(&job.job_name, job.id_job, job.nodes.len() > 1),
                slurmlens_tools::demo::telemetry::Profile::Training { .. }
                    | slurmlens_tools::demo::telemetry::Profile::Fp32
            )
        })
        .expect("a busy job runs across the seam");
    let (node, gpu) = live.gpus_of(training.id_job).expect("its GPUs")[0].clone();
    let util = format!("DCGM_FI_DEV_GPU_UTIL{{Hostname=\"{node}\",gpu=\"{gpu}\"}}");
    let (stamp, busy) = last_at(&vm, &util, later).await.expect("a utilisation sample");
    assert_eq!(stamp, marks.gpu, "the newest sample is the tick's");
    assert!(busy >= 90.0, "job {} on {node}/{gpu} is busy: {busy} %", training.id_job);
    let energy = format!("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{Hostname=\"{node}\",gpu=\"{gpu}\"}}");
    let (before_t, before) = last_at(&vm, &energy, seam.gpu).await.expect("energy at the seam");
    let (after_t, after) = last_at(&vm, &energy, later).await.expect("energy after the tick");
    let watts = (after - before) / 1000.0 / (after_t - before_t) as f64;
    assert!(
        (300.0..800.0).contains(&watts),
        "the counter went on at a busy GPU's power: {watts} W ({before} → {after})"
    );

    // Again at the same moment, and from a fresh start: nothing is written twice.
    let repeated = live.tick(later).await.expect("a repeated tick");
    assert_eq!((repeated.rows, repeated.gpu_records, repeated.samples), Default::default(), "{repeated:?}");
    let mut restarted = start(&config, &seeder_url, later).await;
    let again = restarted.tick(later).await.expect("the restarted tick");
    assert_eq!((again.rows, again.gpu_records, again.samples), Default::default(), "{again:?}");
}
