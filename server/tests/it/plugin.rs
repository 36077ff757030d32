//! The Slurm plugins (slurm-plugin/) loaded by the lab's real Slurm: the report link at
//! submission and atop the job output, the GPU records each node's prolog and epilog send (equal to
//! `scontrol show job -d`), jobs that run unharmed while the server is down and spooled records that
//! arrive exactly once when it returns, and the ingest endpoint's refusals.
//!
//! The plugins read `$LAB/etc/slurmlens-plugin.conf` at every job start, so a test points them at its
//! own server by rewriting `public_url` there (serialized by [`PLUGIN_CONFIG`], restored on drop).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, IngestSecret};
use slurmlens_wire::{ErrorEnvelope, GpuAllocationBatch, GpuAllocationEvent, JobGpus};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::support::{database_shared, fresh_database, lab, test_config};

/// Held by tests that point the lab's plugin at their server.
static PLUGIN_CONFIG: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held by a test from picking a node with free GPUs until its jobs run there, so two tests
/// never both count the same free GPUs.
pub(crate) static GPU_NODE_PICK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ------------------------------------------------------------------------------------------ lab side

/// The plugin's files in the lab, from its configuration file.
struct PluginLab {
    conf_path: PathBuf,
    secret: String,
    spool_dir: PathBuf,
    dcgm_dir: Option<PathBuf>,
}

fn conf_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .find(|(name, _)| name.trim() == key)
        .map(|(_, value)| value.trim().trim_matches('"').to_string())
}

fn plugin_lab() -> PluginLab {
    let lab = lab();
    let plugins = lab.dir.join("plugins/spank_slurmlens.so");
    let extra = std::fs::read_to_string(lab.dir.join("etc/slurm.extra.conf")).unwrap_or_default();
    assert!(
        plugins.is_file() && extra.contains("PlugStackConfig=") && extra.contains("CliFilterPlugins=slurmlens"),
        "the plugins are not installed in the lab: run `cargo build --workspace && bash lab/lab.sh plugins target/debug`"
    );
    let conf_path = lab.dir.join("etc/slurmlens-plugin.conf");
    let text = std::fs::read_to_string(&conf_path).expect("reading the plugin configuration");
    let secret_file = conf_value(&text, "secret_file").expect("secret_file in the plugin configuration");
    let secret = std::fs::read_to_string(&secret_file).expect("reading the plugin secret").trim().to_string();
    PluginLab {
        conf_path,
        secret,
        spool_dir: PathBuf::from(conf_value(&text, "spool_dir").expect("spool_dir in the plugin configuration")),
        dcgm_dir: conf_value(&text, "dcgm_job_map_dir").map(PathBuf::from),
    }
}

/// Points the plugin at `url` until dropped, then puts the original file back.
struct PointedAt {
    path: PathBuf,
    original: String,
}

impl PointedAt {
    fn new(plugin: &PluginLab, url: &str) -> Self {
        let original = std::fs::read_to_string(&plugin.conf_path).expect("reading the plugin configuration");
        let mut text: String = original
            .lines()
            .filter(|line| !line.trim_start().starts_with("public_url"))
            .map(|line| format!("{line}\n"))
            .collect();
        text.push_str(&format!("public_url = \"{url}\"\n"));
        Self::replaced(plugin, &text)
    }

    /// Replaces the whole file (temporary file, then rename: a job starting now reads old or new).
    fn replaced(plugin: &PluginLab, text: &str) -> Self {
        let original = std::fs::read_to_string(&plugin.conf_path).expect("reading the plugin configuration");
        let temporary = plugin.conf_path.with_extension("conf.test");
        std::fs::write(&temporary, text).expect("writing the plugin configuration");
        std::fs::rename(&temporary, &plugin.conf_path).expect("replacing the plugin configuration");
        Self { path: plugin.conf_path.clone(), original }
    }
}

impl Drop for PointedAt {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.original);
    }
}

/// Records waiting in the spool.
fn spooled_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().filter(|entry| entry.file_name().to_string_lossy().ends_with(".jsonl")).count()
        })
        .unwrap_or(0)
}

// ------------------------------------------------------------------------------------------ Slurm

struct Submitted {
    job_id: u32,
    stderr: String,
    took: Duration,
    output: PathBuf,
}

/// `sbatch` as root on behalf of alice, like `submit-mix.sh`.
fn sbatch(name: &str, args: &[&str], script: &str) -> Submitted {
    let lab = lab();
    let jobs = lab.dir.join("jobs");
    let mut started = Instant::now();
    let output = crate::support::run_slurm("sbatch", || {
        started = Instant::now();
        let mut command = lab.command("sbatch");
        command
            .args(["--parsable", "-J", name, "--uid=alice", "--gid=alice", "-A", "ml", "--time=5"])
            .arg(format!("--chdir={}", jobs.display()))
            .arg(format!("--output={}/{name}-%j.out", jobs.display()))
            .args(args)
            .args(["--wrap", script]);
        command
    });
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let job_id: u32 = stdout.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch --parsable id");
    Submitted { job_id, stderr, took, output: jobs.join(format!("{name}-{job_id}.out")) }
}

/// `scontrol show job -d -o`, as `key → value` plus the per-node `Nodes=… GRES=…(IDX:…)` pairs.
fn scontrol_job(job_id: u32) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u16>>) {
    let output = lab()
        .command("scontrol")
        .args(["show", "job", "-d", "-o", &job_id.to_string()])
        .output()
        .expect("running scontrol");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let mut fields = BTreeMap::new();
    let mut gpus = BTreeMap::new();
    let mut node = None;
    for token in text.split_whitespace() {
        let Some((key, value)) = token.split_once('=') else { continue };
        match key {
            "Nodes" => node = Some(value.to_string()),
            "GRES" => {
                if let (Some(node), Some(list)) =
                    (node.clone(), value.split_once("(IDX:").and_then(|(_, rest)| rest.split_once(')')))
                {
                    let indices = slurmlens::domain::gpu::parse_gpu_indices(list.0).expect("IDX list");
                    gpus.insert(node, indices);
                }
            }
            _ => {
                fields.entry(key.to_string()).or_insert_with(|| value.to_string());
            }
        }
    }
    (fields, gpus)
}

/// A node of partition `gpu`, neither drained nor down, with at least `wanted` GPUs free.
pub(crate) fn node_with_free_gpus(wanted: u32) -> Option<String> {
    let output = lab()
        .command("sinfo")
        .args(["-N", "-h", "-p", "gpu", "-O", "NodeList:20,Gres:30,GresUsed:60,StateCompact:12"])
        .output()
        .ok()?;
    let count =
        |gres: &str| gres.split(':').nth(1).and_then(|n| n.split('(').next()).and_then(|n| n.parse::<u32>().ok());
    String::from_utf8_lossy(&output.stdout).lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [node, total, used, state] = fields[..] else { return None };
        let usable = matches!(state, "idle" | "mix");
        (usable && count(total)? >= count(used)? + wanted).then(|| node.to_string())
    })
}

fn job_state(job_id: u32) -> String {
    scontrol_job(job_id).0.remove("JobState").unwrap_or_default()
}

/// Polls until `done` holds, or panics after `timeout` naming `what`.
async fn wait_for<T>(what: &str, timeout: Duration, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_state(job_id: u32, wanted: &[&str], timeout: Duration) -> String {
    wait_for(&format!("job {job_id} to reach {wanted:?}"), timeout, || {
        let state = job_state(job_id);
        wanted.contains(&state.as_str()).then_some(state)
    })
    .await
}

/// The plugin's own timing of a job's start record, from slurmd's logs: `(outcome, microseconds)`.
fn prolog_timing(job_id: u32) -> Option<(String, u64)> {
    let needle = format!("slurmlens: job {job_id} on ");
    for node in ["n1", "n2", "n3", "n4"] {
        let log = std::fs::read_to_string(lab().dir.join(format!("log/slurmd.{node}.log"))).unwrap_or_default();
        if let Some(line) = log.lines().find(|line| line.contains(&needle) && line.contains(": start record ")) {
            let rest = line.split(": start record ").nth(1)?;
            let (outcome, micros) = rest.split_once(" in ")?;
            let micros = micros.trim_end_matches(" us").trim().parse().ok()?;
            return Some((outcome.to_string(), micros));
        }
    }
    None
}

// ------------------------------------------------------------------------------------------ server

/// A record as the server accepted it: `(job_id, node, event)`.
type Arrival = (u32, String, GpuAllocationEvent);

/// Our server on a real port, counting every record it accepted; stoppable.
struct Server {
    base_url: String,
    port: u16,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(config: &Config, port: u16, arrivals: Arc<Mutex<Vec<Arrival>>>) -> Self {
        let address = format!("127.0.0.1:{port}");
        let listener = wait_for_async_bind(&address).await;
        let port = listener.local_addr().expect("bound address").port();
        let state = slurmlens::serve::http_state(config).expect("app state");
        let router = slurmlens::http::router(state)
            .layer(axum::middleware::from_fn(move |request, next| count_arrivals(arrivals.clone(), request, next)));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("server runs");
        });
        Self { base_url: format!("http://127.0.0.1:{port}"), port, shutdown: Some(shutdown), task }
    }

    async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Binds `address`, retrying for a few seconds when the port was just released.
async fn wait_for_async_bind(address: &str) -> TcpListener {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpListener::bind(address).await {
            Ok(listener) => return listener,
            Err(e) if Instant::now() < deadline => {
                eprintln!("binding {address}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("binding {address}: {e}"),
        }
    }
}

async fn count_arrivals(arrivals: Arc<Mutex<Vec<Arrival>>>, request: Request, next: Next) -> axum::response::Response {
    if request.uri().path() != "/api/v1/gpu_allocations" {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 8 << 20).await.unwrap_or_default();
    let batch = serde_json::from_slice::<GpuAllocationBatch>(&bytes).ok();
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    if response.status().is_success()
        && let Some(batch) = batch
    {
        let mut arrivals = arrivals.lock().expect("no panic while holding the lock");
        arrivals.extend(batch.records.into_iter().map(|record| (record.job_id, record.node, record.event)));
    }
    response
}

async fn plugin_config(secret: &str) -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.database = Some(DatabaseConfig { url: fresh_database("plugin").await });
    config.ingest.secrets.insert("lab".into(), IngestSecret(secret.to_string()));
    config
}

async fn recorded_gpus(base_url: &str, job_id: u32) -> Option<JobGpus> {
    let response = reqwest::get(format!("{base_url}/api/v1/jobs/{job_id}/gpus?cluster=lab")).await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

async fn wait_recorded(base_url: &str, job_id: u32, done: impl Fn(&JobGpus) -> bool) -> JobGpus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(gpus) = recorded_gpus(base_url, job_id).await
            && done(&gpus)
        {
            return gpus;
        }
        assert!(Instant::now() < deadline, "job {job_id}: the server never got the expected GPU records");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn by_node(gpus: &JobGpus) -> BTreeMap<String, Vec<u16>> {
    let mut map: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    for gpu in gpus.gpus.iter().filter(|gpu| gpu.step == "job") {
        map.entry(gpu.node.clone()).or_default().push(gpu.index);
    }
    map
}

// ------------------------------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread")]
async fn sbatch_prints_the_report_link_and_the_job_output_starts_with_it() {
    let _db = database_shared().await;
    let _plugin_config = PLUGIN_CONFIG.lock().await;
    let plugin = plugin_lab();
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let server = Server::start(&plugin_config(&plugin.secret).await, 0, arrivals.clone()).await;
    let _pointed = PointedAt::new(&plugin, &server.base_url);

    // Two tasks: the line must still appear once, from the batch script's task only.
    let job = sbatch("plugin-link", &["--gres=gpu:1", "-n2", "--mem-per-cpu=100"], "srun echo task-line");
    let link = format!("slurmlens: report at {}/jobs/{}?cluster=lab", server.base_url, job.job_id);
    assert!(job.stderr.lines().any(|line| line == link), "sbatch's stderr lacks `{link}`: {:?}", job.stderr);

    wait_state(job.job_id, &["COMPLETED"], Duration::from_secs(120)).await;
    let output = std::fs::read_to_string(&job.output).expect("reading the job output");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.first(), Some(&link.as_str()), "job output: {output:?}");
    assert_eq!(lines.iter().filter(|line| line.starts_with("slurmlens:")).count(), 1, "job output: {output:?}");
    assert_eq!(lines.iter().filter(|line| **line == "task-line").count(), 2, "job output: {output:?}");

    // The same job's records reached the server from its node: one start, one end.
    wait_for("the job's start and end records", Duration::from_secs(30), || {
        let arrivals = arrivals.lock().expect("lock");
        let events: Vec<_> = arrivals.iter().filter(|(id, _, _)| *id == job.job_id).map(|(_, _, e)| *e).collect();
        (events.contains(&GpuAllocationEvent::Start) && events.contains(&GpuAllocationEvent::End)).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gpu_indices_received_equal_scontrol_idx_for_two_jobs_sharing_a_node() {
    let _db = database_shared().await;
    let _plugin_config = PLUGIN_CONFIG.lock().await;
    let plugin = plugin_lab();
    let server = Server::start(&plugin_config(&plugin.secret).await, 0, Arc::default()).await;
    let _pointed = PointedAt::new(&plugin, &server.base_url);

    let release = lab().dir.join(format!("jobs/plugin-release-{}", std::process::id()));
    let _ = std::fs::remove_file(&release);
    let wait_script = format!("while [ ! -e {} ]; do sleep 0.2; done", release.display());
    // Other tests keep long jobs on some nodes: pick one where both fit.
    let picking = GPU_NODE_PICK.lock().await;
    let node = wait_for("a node with two free GPUs", Duration::from_secs(120), || node_with_free_gpus(2)).await;
    let on_node = format!("--nodelist={node}");
    let first = sbatch("plugin-share-a", &["--gres=gpu:1", "-c1", "--mem=100", &on_node], &wait_script);
    let second = sbatch("plugin-share-b", &["--gres=gpu:1", "-c1", "--mem=100", &on_node], &wait_script);
    wait_state(first.job_id, &["RUNNING"], Duration::from_secs(180)).await;
    wait_state(second.job_id, &["RUNNING"], Duration::from_secs(180)).await;
    drop(picking);

    let mut held = BTreeSet::new();
    for job in [&first, &second] {
        let (_, idx) = scontrol_job(job.job_id);
        assert_eq!(idx.keys().collect::<Vec<_>>(), [&node], "job {}: scontrol shows {idx:?}", job.job_id);
        let recorded = wait_recorded(&server.base_url, job.job_id, |gpus| !gpus.gpus.is_empty()).await;
        assert_eq!(by_node(&recorded), idx, "job {}: recorded {recorded:?}", job.job_id);
        for index in &idx[&node] {
            assert!(held.insert(*index), "GPU {index} of {node} given to both jobs");
        }
        for gpu in &recorded.gpus {
            assert!(gpu.ended_at.is_none(), "job {} still runs: {gpu:?}", job.job_id);
            // The configured cgroup template names the job's real cgroup (where the lab uses cgroups).
            // The start record leaves from slurmd's job prolog, before slurmstepd makes the cgroup.
            let memory = Path::new("/sys/fs/cgroup/memory");
            if let (Some(path), true) = (&gpu.cgroup_path, memory.is_dir()) {
                let cgroup = memory.join(path.trim_start_matches('/'));
                let found = async {
                    for _ in 0..150 {
                        if cgroup.is_dir() {
                            return true;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    false
                };
                if !found.await {
                    let near = cgroup.parent().and_then(|dir| std::fs::read_dir(dir).ok());
                    let near: Vec<_> = near.into_iter().flatten().flatten().map(|entry| entry.file_name()).collect();
                    panic!("no cgroup {path} after 30 s; beside it: {near:?}");
                }
            }
            if let Some(dir) = &plugin.dcgm_dir {
                let mapped = std::fs::read_to_string(dir.join(gpu.index.to_string())).unwrap_or_default();
                assert!(mapped.lines().any(|line| line == job.job_id.to_string()), "dcgm map of GPU {}", gpu.index);
            }
        }
    }

    std::fs::write(&release, b"").expect("releasing the jobs");
    for job in [&first, &second] {
        wait_state(job.job_id, &["COMPLETED"], Duration::from_secs(60)).await;
        let ended =
            wait_recorded(&server.base_url, job.job_id, |gpus| gpus.gpus.iter().all(|gpu| gpu.ended_at.is_some()))
                .await;
        if let Some(dir) = &plugin.dcgm_dir {
            for gpu in &ended.gpus {
                let mapped = std::fs::read_to_string(dir.join(gpu.index.to_string())).unwrap_or_default();
                assert!(!mapped.lines().any(|line| line == job.job_id.to_string()), "dcgm map kept job {}", job.job_id);
            }
        }
    }
    let _ = std::fs::remove_file(&release);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_run_while_the_server_is_down_and_spooled_records_arrive_exactly_once() {
    const JOBS: usize = 20;
    let _db = database_shared().await;
    let _plugin_config = PLUGIN_CONFIG.lock().await;
    let plugin = plugin_lab();
    let config = plugin_config(&plugin.secret).await;
    let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();

    // The server runs, then stops: its port refuses connections while the jobs start.
    let server = Server::start(&config, 0, arrivals.clone()).await;
    let (port, base_url) = (server.port, server.base_url.clone());
    let _pointed = PointedAt::new(&plugin, &base_url);
    server.stop().await;
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the server is still answering");

    let submitted_at = Instant::now();
    let jobs: Vec<Submitted> =
        (0..JOBS).map(|_| sbatch("plugin-down", &["--gres=gpu:1", "-c1", "--mem=100"], "true")).collect();
    for job in &jobs {
        let state =
            wait_state(job.job_id, &["COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"], Duration::from_secs(300)).await;
        assert_eq!(state, "COMPLETED", "job {} with the server down", job.job_id);
    }
    let all_done = submitted_at.elapsed();
    let down: Vec<u64> = jobs
        .iter()
        .map(|job| {
            let (outcome, micros) =
                prolog_timing(job.job_id).unwrap_or_else(|| panic!("no timing for job {}", job.job_id));
            assert_eq!(outcome, "spooled", "job {}", job.job_id);
            micros
        })
        .collect();
    assert!(spooled_files(&plugin.spool_dir) > 0, "nothing spooled in {}", plugin.spool_dir.display());

    // The server returns on the same port; the next job start delivers the spool.
    let server = Server::start(&config, port, arrivals.clone()).await;
    let mut triggers = Vec::new();
    let ids: BTreeSet<u32> = jobs.iter().map(|job| job.job_id).collect();
    let complete = |arrivals: &[Arrival]| {
        ids.iter().all(|id| {
            let events: Vec<_> = arrivals.iter().filter(|(job, _, _)| job == id).map(|(_, _, event)| *event).collect();
            events.contains(&GpuAllocationEvent::Start) && events.contains(&GpuAllocationEvent::End)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    while !complete(&arrivals.lock().expect("lock")) {
        assert!(Instant::now() < deadline, "spooled records never all arrived");
        let trigger = sbatch("plugin-up", &["--gres=gpu:1", "-c1", "--mem=100"], "true");
        wait_state(trigger.job_id, &["COMPLETED"], Duration::from_secs(120)).await;
        triggers.push(trigger);
    }
    wait_for("the spool to empty", Duration::from_secs(30), || (spooled_files(&plugin.spool_dir) == 0).then_some(()))
        .await;
    {
        let arrivals = arrivals.lock().expect("lock");
        for id in &ids {
            for event in [GpuAllocationEvent::Start, GpuAllocationEvent::End] {
                let count = arrivals.iter().filter(|(job, _, e)| job == id && *e == event).count();
                assert_eq!(count, 1, "job {id}: {event:?} record arrived {count} times");
            }
        }
        let spooled: usize = arrivals.iter().filter(|(job, _, _)| ids.contains(job)).count();
        println!("plugin: {spooled} spooled records of {JOBS} jobs delivered, each exactly once");
    }
    for id in &ids {
        let recorded = recorded_gpus(&server.base_url, *id).await.expect("records of a spooled job");
        assert_eq!(recorded.gpus.len(), 1, "job {id}: {recorded:?}");
        assert!(recorded.gpus[0].ended_at.is_some(), "job {id}: end not recorded");
    }

    let up: Vec<u64> = triggers.iter().filter_map(|job| prolog_timing(job.job_id)).map(|(_, micros)| micros).collect();
    let summary = |micros: &[u64]| {
        let max = micros.iter().max().copied().unwrap_or(0);
        let mean = micros.iter().sum::<u64>() / micros.len().max(1) as u64;
        format!(
            "mean {:.2} ms, max {:.2} ms over {} job starts",
            mean as f64 / 1000.0,
            max as f64 / 1000.0,
            micros.len()
        )
    };
    let sbatch_mean = jobs.iter().map(|job| job.took.as_millis()).sum::<u128>() / JOBS as u128;
    println!("plugin: added time per job start (prolog hook), server down: {}", summary(&down));
    println!("plugin: added time per job start (prolog hook), server up, incl. spool delivery: {}", summary(&up));
    println!(
        "plugin: {JOBS} jobs submitted and completed in {all_done:?} with the server down; sbatch mean {sbatch_mean} ms"
    );
    assert!(down.iter().all(|&micros| micros < 1_000_000), "a job start waited a second or more: {down:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn garbled_or_unauthenticated_records_are_refused_and_change_nothing() {
    const SECRET: &str = "ingest-test-secret-0123456789";
    let _db = database_shared().await;
    let database = fresh_database("plugin_ingest").await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.database = Some(DatabaseConfig { url: database.clone() });
    config.ingest.secrets.insert("lab".into(), IngestSecret(SECRET.into()));
    let server = Server::start(&config, 0, Arc::default()).await;
    let url = format!("{}/api/v1/gpu_allocations", server.base_url);
    let client = reqwest::Client::new();
    let pool = sqlx::MySqlPool::connect(&database).await.expect("test database");
    let rows = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM gpu_allocations").fetch_one(&pool).await.expect("count")
    };
    let fake_job = 4_000_000_000u32 + std::process::id() % 1000;
    let record = |job_id: &str, node: &str, cluster: &str, gpus: &str| {
        format!(
            r#"{{"records":[{{"cluster":"{cluster}","node":"{node}","job_id":{job_id},"step":"job","event":"start","at":"{}","gpus":{gpus}}}]}}"#,
            chrono::Utc::now().to_rfc3339()
        )
    };
    let valid =
        record(&fake_job.to_string(), "n1", "lab", r#"[{"index":0},{"index":3,"uuid":"GPU-5c3d9f2e-8a1b-4c6d"}]"#);

    let post = |body: String, auth: Option<&str>| {
        let mut request = client.post(&url).header("content-type", "application/json").body(body);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.send()
    };
    let bearer = format!("Bearer {SECRET}");
    // (what, body, Authorization, status, error code, parameter named)
    type Case<'a> = (&'a str, String, Option<&'a str>, u16, &'a str, Option<&'a str>);
    let cases: Vec<Case> = vec![
        ("no credentials", valid.clone(), None, 401, "unauthorized", None),
        ("wrong secret", valid.clone(), Some("Bearer not-the-secret-0123456789"), 401, "unauthorized", None),
        ("basic auth", valid.clone(), Some("Basic bGFiOnNlY3JldA=="), 401, "unauthorized", None),
        ("not JSON", "records: yes".into(), Some(&bearer), 400, "invalid_parameter", Some("body")),
        ("JSON then junk", format!("{valid} x"), Some(&bearer), 400, "invalid_parameter", Some("body")),
        ("no records", r#"{"records":[]}"#.into(), Some(&bearer), 400, "invalid_parameter", Some("records")),
        (
            "job id text",
            record("\"x\"", "n1", "lab", r#"[{"index":0}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].job_id"),
        ),
        (
            "bad node",
            record("7", "n1;drop", "lab", r#"[{"index":0}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].node"),
        ),
        (
            "other cluster",
            record("7", "n1", "sakura", r#"[{"index":0}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].cluster"),
        ),
        (
            "bad cluster",
            record("7", "n1", "Lab;", r#"[{"index":0}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].cluster"),
        ),
        ("no gpus", record("7", "n1", "lab", "[]"), Some(&bearer), 400, "invalid_parameter", Some("records[0].gpus")),
        (
            "gpu twice",
            record("7", "n1", "lab", r#"[{"index":1},{"index":1}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].gpus[1].index"),
        ),
        (
            "gpu index text",
            record("7", "n1", "lab", r#"[{"index":"0-1"}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].gpus[0].index"),
        ),
        (
            "bad uuid",
            record("7", "n1", "lab", r#"[{"index":0,"uuid":"GPU-<x>"}]"#),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("records[0].gpus[0].uuid"),
        ),
        (
            "oversize",
            format!("{{\"records\":[],\"pad\":\"{}\"}}", "x".repeat(2 << 20)),
            Some(&bearer),
            400,
            "invalid_parameter",
            Some("body"),
        ),
    ];
    for (what, body, auth, status, code, parameter) in cases {
        let response = post(body, auth).await.expect("request reaches the server");
        assert_eq!(response.status().as_u16(), status, "{what}");
        if status == 401 {
            assert_eq!(
                response.headers().get("www-authenticate").map(|v| v.as_bytes()),
                Some(&b"Bearer"[..]),
                "{what}"
            );
        }
        let envelope: ErrorEnvelope = response.json().await.unwrap_or_else(|e| panic!("{what}: not an envelope: {e}"));
        assert_eq!(envelope.error.code, code, "{what}: {}", envelope.error.message);
        assert_eq!(envelope.error.parameter.as_deref(), parameter, "{what}: {}", envelope.error.message);
        assert_eq!(rows().await, 0, "{what} changed the table");
    }

    // A valid record is stored; replaying it (as a spool might) changes nothing.
    for _ in 0..2 {
        let response = post(valid.clone(), Some(&bearer)).await.expect("request reaches the server");
        assert_eq!(response.status(), 200);
        assert_eq!(rows().await, 2);
    }
    // The job is not in slurmdbd: its records are not readable through the job API.
    let response = reqwest::get(format!("{}/api/v1/jobs/{fake_job}/gpus?cluster=lab", server.base_url)).await;
    assert_eq!(response.expect("request").status(), 404);
    pool.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_plugin_config_is_logged_and_the_job_still_runs() {
    let _plugin_config = PLUGIN_CONFIG.lock().await;
    let plugin = plugin_lab();
    let complaints = || {
        ["n1", "n2", "n3", "n4"]
            .iter()
            .map(|node| std::fs::read_to_string(lab().dir.join(format!("log/slurmd.{node}.log"))).unwrap_or_default())
            .map(|log| log.matches("slurmlens: configuration unusable").count())
            .sum::<usize>()
    };
    let before = complaints();
    let _broken = PointedAt::replaced(&plugin, "public_url = \"http://unterminated\ntimeout_ms = soon\n");

    let job = sbatch("plugin-broken", &["--gres=gpu:1", "-c1", "--mem=100"], "echo still-ran");
    assert!(job.stderr.contains("slurmlens: configuration unusable"), "sbatch's stderr: {:?}", job.stderr);
    wait_state(job.job_id, &["COMPLETED"], Duration::from_secs(120)).await;
    let output = std::fs::read_to_string(&job.output).expect("reading the job output");
    assert!(output.lines().any(|line| line == "still-ran"), "job output: {output:?}");
    // Neither a link nor the site's configuration error reaches the user's output.
    assert!(!output.contains("slurmlens"), "job output: {output:?}");
    // Prolog and epilog both said why they did nothing, in slurmd's log.
    wait_for("slurmd's log to name the broken configuration", Duration::from_secs(30), || {
        (complaints() >= before + 2).then_some(())
    })
    .await;
}
