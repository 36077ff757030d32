//! Test support: the lab's environment, the job mix, and a server bound to a free port.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use slurmlens::config::{AccessConfig, AnonymousAccess, Config};

/// Tests that read MariaDB hold this shared; the outage test holds it exclusively while MariaDB is down.
/// An async lock, because guards are held across awaits and each test has its own runtime.
static DATABASE: RwLock<()> = RwLock::const_new(());

pub async fn database_shared() -> RwLockReadGuard<'static, ()> {
    DATABASE.read().await
}

pub async fn database_exclusive() -> RwLockWriteGuard<'static, ()> {
    DATABASE.write().await
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("server/ has a parent").to_path_buf()
}

/// The variables `lab.sh up` wrote to `$LAB/env.sh`.
pub struct Lab {
    pub dir: PathBuf,
    pub vars: BTreeMap<String, String>,
}

impl Lab {
    pub fn var(&self, name: &str) -> &str {
        self.vars.get(name).unwrap_or_else(|| panic!("{name} missing from {}/env.sh", self.dir.display()))
    }

    /// A command with the lab's Slurm configuration.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("SLURM_CONF", self.var("SLURM_CONF")).env("TZ", "UTC");
        command
    }
}

/// Which of the lab's two VictoriaMetrics the tests read and write as `SLURMLENS_VM_URL`: Debian's 1.79
/// (unset or `debian`) or the current release `lab.sh up` builds (`LAB_VM_UNDER_TEST=current`, the
/// second pass of `e2e/test.sh`). Debian's stays at `LAB_VM_DEBIAN_URL`. Not a `SLURMLENS_` variable:
/// those are the server's configuration.
fn vm_under_test(mut vars: BTreeMap<String, String>) -> BTreeMap<String, String> {
    let debian = vars.get("SLURMLENS_VM_URL").cloned().unwrap_or_default();
    match std::env::var("LAB_VM_UNDER_TEST").as_deref() {
        Err(_) | Ok("" | "debian") => {}
        Ok("current") => {
            let url = vars.get("LAB_VM_CURRENT_URL").cloned().unwrap_or_else(|| {
                panic!(
                    "LAB_VM_UNDER_TEST=current, but the lab has no current VictoriaMetrics: run `bash lab/lab.sh up`"
                )
            });
            vars.insert("SLURMLENS_VM_URL".into(), url);
        }
        Ok(other) => panic!("LAB_VM_UNDER_TEST={other:?}: expected `debian` or `current`"),
    }
    vars.insert("LAB_VM_DEBIAN_URL".into(), debian);
    vars
}

pub fn lab() -> &'static Lab {
    static LAB: OnceLock<Lab> = OnceLock::new();
    LAB.get_or_init(|| {
        let dir = std::env::var_os("SLURMLENS_LAB").map_or_else(|| repo_root().join(".lab"), PathBuf::from);
        let env_file = dir.join("env.sh");
        let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
            panic!("the lab is not up ({}: {e}); run `bash lab/lab.sh up` first", env_file.display())
        });
        let vars = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("export "))
            .filter_map(|assignment| assignment.split_once('='))
            .map(|(name, value)| (name.to_string(), value.trim_matches(|c| c == '"' || c == '\'').to_string()))
            .collect();
        Lab { dir, vars: vm_under_test(vars) }
    })
}

/// One job of the submitted mix.
#[derive(Debug, Clone)]
pub struct MixJob {
    pub label: String,
    pub job_id: String,
    pub expected_state: String,
}

/// Submits the job mix once per test process (real sbatch; ~90 s because of the TIMEOUT job). A failed
/// submission is remembered, so the other tests fail with its reason instead of submitting again.
pub fn mix() -> &'static [MixJob] {
    static MIX: OnceLock<Result<Vec<MixJob>, String>> = OnceLock::new();
    let mix = MIX.get_or_init(|| {
        let lab = lab();
        let out = lab.dir.join(format!("mix-{}.tsv", std::process::id()));
        let status = lab
            .command("bash")
            .arg(repo_root().join("lab/submit-mix.sh"))
            .arg(&out)
            .status()
            .map_err(|e| format!("running submit-mix.sh: {e}"))?;
        if !status.success() {
            return Err(format!("submit-mix.sh failed: {status}"));
        }
        let text = std::fs::read_to_string(&out).map_err(|e| format!("reading the mix file: {e}"))?;
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                if fields.len() != 3 {
                    return Err(format!("bad mix line `{line}`"));
                }
                Ok(MixJob { label: fields[0].into(), job_id: fields[1].into(), expected_state: fields[2].into() })
            })
            .collect()
    });
    match mix {
        Ok(jobs) => jobs,
        Err(reason) => panic!("the job mix is not available: {reason}"),
    }
}

pub fn mix_job(label: &str) -> &'static MixJob {
    mix().iter().find(|job| job.label == label).unwrap_or_else(|| panic!("no `{label}` in the mix"))
}

/// A running server on 127.0.0.1 with a free port.
pub struct TestApp {
    pub base_url: String,
    pub client: reqwest::Client,
}

impl TestApp {
    pub async fn get(&self, path_and_query: &str) -> reqwest::Response {
        self.client.get(format!("{}{path_and_query}", self.base_url)).send().await.expect("request reaches the server")
    }

    pub async fn get_as(&self, user: &str, path_and_query: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path_and_query}", self.base_url))
            .header("X-Remote-User", user)
            .send()
            .await
            .expect("request reaches the server")
    }
}

/// The configuration tests run with: the lab's reader user, clusters `lab` and `sakura`.
pub fn test_config(anonymous: AnonymousAccess) -> Config {
    let lab = lab();
    Config {
        listen: "127.0.0.1:0".parse().expect("valid address"),
        clusters: vec!["lab".parse().expect("valid cluster"), "sakura".parse().expect("valid cluster")],
        slurmdbd: slurmlens::config::SlurmDbdConfig {
            url: lab.var("SLURMLENS_SLURMDBD_URL").to_string(),
            max_connections: 4,
            acquire_timeout_ms: 1500,
            statement_timeout_s: Default::default(),
        },
        access: AccessConfig {
            anonymous,
            user_header: Some("X-Remote-User".into()),
            groups_header: Some("X-Remote-Groups".into()),
            // The tests' requests come from loopback, standing in for the site's proxy.
            trusted_proxies: vec!["127.0.0.1".to_string().try_into().expect("an address")],
            staff_users: vec!["root".into()],
            staff_groups: vec!["hpc-staff".into()],
            ..AccessConfig::default()
        },
        ..Config::default()
    }
}

pub async fn spawn_app(config: Config) -> TestApp {
    let state = slurmlens::serve::http_state(&config).expect("app state");
    spawn_state(&config, state).await
}

/// Serves `state`, made from `config` (and prepared as a test needs), as [`spawn_app`] does.
pub async fn spawn_state(config: &Config, state: slurmlens::http::HttpState) -> TestApp {
    let listener = slurmlens::serve::bind(config).await.expect("binding port 0");
    let address = listener.tcp_address().expect("bound to a TCP address");
    let limits = slurmlens::serve::ConnectionLimits::from_config(config);
    // Served exactly as `slurmlens serve` serves: the same listener, its timeouts and its cap.
    tokio::spawn(async move {
        let router = slurmlens::http::router(state);
        slurmlens::serve::serve_router(listener, router, limits, std::future::pending()).await.expect("server runs");
    });
    TestApp { base_url: format!("http://{address}"), client: reqwest::Client::new() }
}

/// A fresh database `slurmlens_test_<name>` with our migrations applied, once per test process; its URL.
/// Tests that write our own tables use one each, so they never see each other's rows.
pub async fn fresh_database(name: &str) -> String {
    static CREATED: tokio::sync::Mutex<BTreeMap<String, String>> = tokio::sync::Mutex::const_new(BTreeMap::new());
    let mut created = CREATED.lock().await;
    if let Some(url) = created.get(name) {
        return url.clone();
    }
    let url = empty_database(name).await;
    let store = slurmlens::store::Store::new(&url, std::time::Duration::from_secs(10)).expect("store");
    store.migrate().await.expect("applying migrations");
    created.insert(name.to_string(), url.clone());
    url
}

/// A new, empty database `slurmlens_test_{name}` on the lab's MariaDB (dropped first if it exists),
/// without slurmlens's schema; its URL.
pub async fn empty_database(name: &str) -> String {
    let base = lab().var("SLURMLENS_DATABASE_URL");
    let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
    let database = format!("slurmlens_test_{name}");
    let admin = sqlx::MySqlPool::connect(&format!("{server}/")).await.expect("connecting to MariaDB as slurmlens");
    sqlx::query(&format!("DROP DATABASE IF EXISTS `{database}`")).execute(&admin).await.expect("dropping");
    sqlx::query(&format!("CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"))
        .execute(&admin)
        .await
        .expect("creating the test database");
    admin.close().await;
    format!("{server}/{database}")
}

/// Runs a Slurm command against the lab; its stdout, or a panic with its stderr.
pub fn slurm(program: &str, args: &[&str]) -> String {
    let output = run_slurm(&format!("{program} {args:?}"), || {
        let mut command = lab().command(program);
        command.args(args);
        command
    });
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What slurmctld answers when it is too busy to take a request in time (CI runs the whole suite on
/// two cores): asked again a moment later, it takes it.
const SLURMCTLD_BUSY: [&str; 4] = [
    "Socket timed out on send/recv operation",
    "Unable to contact slurm controller",
    "Zero Bytes were transmitted or received",
    "Resource temporarily unavailable",
];

/// Runs the command `make` builds until it succeeds, asking again (three times at most) where
/// slurmctld was too busy; its output, or a panic that names the exit status and the error lines
/// first (a verbose command's option dump would hide them).
pub fn run_slurm(what: &str, mut make: impl FnMut() -> Command) -> std::process::Output {
    let mut tries = 0;
    loop {
        tries += 1;
        let output = make().output().unwrap_or_else(|e| panic!("{what}: {e}"));
        if output.status.success() {
            return output;
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        if tries < 3 && SLURMCTLD_BUSY.iter().any(|busy| stderr.contains(busy)) {
            eprintln!("{what}: slurmctld was busy, asking again: {}", stderr.trim());
            std::thread::sleep(std::time::Duration::from_secs(2));
            continue;
        }
        let errors: Vec<&str> = stderr.lines().filter(|line| line.contains("error")).collect();
        panic!("{what} failed ({}): {}\n--- its whole stderr ---\n{stderr}", output.status, errors.join(" | "));
    }
}

/// Submits a job of `user` named `name` holding `gpus` GPUs of `node`: it waits until `release`
/// exists, then runs `then_s` seconds more. Its id.
pub fn submit_holding(name: &str, user: &str, node: &str, gpus: u32, release: &Path, then_s: u32) -> u32 {
    let script = format!("while [ ! -e {} ]; do sleep 0.2; done; sleep {then_s}", release.display());
    let (uid, gid, on, gres) = (format!("--uid={user}"), format!("--gid={user}"), node, format!("--gres=gpu:{gpus}"));
    let args =
        ["--parsable", "-J", name, &uid, &gid, "-w", on, &gres, "--time=5", "-o", "/dev/null", "--wrap", &script];
    let out = slurm("sbatch", &args);
    out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id")
}

/// A node with `gpus` free GPUs, and the lock that keeps the other node-picking tests out until the
/// caller's jobs run there (drop it then). Panics after 3 minutes without one.
pub async fn reserve_gpu_node(gpus: u32) -> (tokio::sync::MutexGuard<'static, ()>, String) {
    let picking = crate::plugin::GPU_NODE_PICK.lock().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        if let Some(node) = crate::plugin::node_with_free_gpus(gpus) {
            return (picking, node);
        }
        assert!(std::time::Instant::now() < deadline, "no node with {gpus} free GPUs for 3 minutes");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Imports series into the lab's VictoriaMetrics in one request and makes them searchable: each is
/// `{"metric": {labels}, "values": [...], "timestamps": [ms...]}`, as `/api/v1/export` writes them.
pub async fn import_series(series: impl IntoIterator<Item = serde_json::Value>) {
    let body: String = series.into_iter().map(|line| format!("{line}\n")).collect();
    let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(
        lab().var("SLURMLENS_VM_URL"),
        std::time::Duration::from_secs(10),
    )
    .expect("client");
    vm.import_json_lines(body).await.expect("import into VictoriaMetrics");
}

/// One value of an instant PromQL query against VictoriaMetrics at `at` (the first series'), if any.
pub async fn instant_query(vm_url: &str, query: &str, at: i64) -> Option<f64> {
    let response: serde_json::Value = reqwest::Client::new()
        .post(format!("{vm_url}/api/v1/query"))
        .form(&[("query", query.to_string()), ("time", at.to_string())])
        .send()
        .await
        .expect("query VictoriaMetrics")
        .json()
        .await
        .expect("JSON");
    response["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse().ok())
}

/// A server that takes ingest for cluster `lab` with `secret`, on a fresh database `slurmlens_test_<name>`;
/// with a pool on that database to count what was stored.
pub async fn ingest_app(name: &str, secret: &str) -> (TestApp, sqlx::MySqlPool) {
    let database = fresh_database(name).await;
    let mut config = test_config(AnonymousAccess::Staff);
    config.database = Some(slurmlens::config::DatabaseConfig { url: database.clone() });
    config.ingest.secrets.insert("lab".into(), slurmlens::config::IngestSecret(secret.into()));
    let pool = sqlx::MySqlPool::connect(&database).await.expect("test database");
    (spawn_app(config).await, pool)
}

/// A finished job of the lab cluster, straight from slurmdbd (falls back to submitting the mix).
pub async fn finished_lab_job() -> u32 {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let found: Option<u32> = sqlx::query_scalar(
        "SELECT id_job FROM lab_job_table WHERE time_start > 0 AND time_end > time_start \
         ORDER BY id_job DESC LIMIT 1",
    )
    .fetch_optional(&pool)
    .await
    .expect("reading lab_job_table");
    pool.close().await;
    match found {
        Some(job_id) => job_id,
        None => crate::support::mix_job("gpu2node").job_id.parse().expect("numeric job id"),
    }
}

/// When the lab's job `job_id` started, from slurmdbd.
pub async fn lab_job_start(job_id: u32) -> chrono::DateTime<chrono::Utc> {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd");
    let start: u64 = sqlx::query_scalar(
        "SELECT time_start FROM lab_job_table WHERE id_job = ? AND time_start > 0 ORDER BY job_db_inx DESC LIMIT 1",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .expect("the job's start");
    pool.close().await;
    chrono::DateTime::from_timestamp(start as i64, 0).expect("a time")
}

/// A GPU job of sakura's demo that ran an hour or more and ended within the telemetry's last day.
pub async fn sakura_gpu_job() -> u32 {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let now = chrono::Utc::now().timestamp();
    let (id,): (u32,) = sqlx::query_as(
        "SELECT id_job FROM sakura_job_table WHERE deleted = 0 AND time_end BETWEEN ? AND ? \
         AND time_end - time_start >= 3600 AND tres_alloc LIKE '%,1001=%' ORDER BY time_end DESC LIMIT 1",
    )
    .bind(now - 20 * 3600)
    .bind(now - 600)
    .fetch_one(&pool)
    .await
    .expect("sakura's demo holds a GPU job of an hour or more that ended in the last day");
    pool.close().await;
    id
}

/// The real `slurmlens serve` as a child process on a free port of loopback, reading the lab's `lab`
/// cluster with `env` on top (`SLURMLENS_*` pairs; the test's own `SLURMLENS_*` are not passed on); its
/// standard error piped when `keep_log`. The child and its base URL, once it printed that it serves.
pub async fn serve_child(env: &[(&str, &str)], keep_log: bool) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt as _;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_slurmlens"));
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("SLURMLENS_")) {
        command.env_remove(name);
    }
    command
        .arg("serve")
        .env("SLURMLENS_LISTEN", "127.0.0.1:0")
        .env("SLURMLENS_CLUSTERS", "lab")
        .env("SLURMLENS_SLURMDBD__URL", lab().var("SLURMLENS_SLURMDBD_URL"))
        .env("SLURMLENS_REPORT__ARCHIVE_INTERVAL_S", "0")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(if keep_log { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .kill_on_drop(true);
    let mut child = command.spawn().expect("starting slurmlens serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let address = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("reading stdout") {
            if let Some(rest) = line.strip_prefix("slurmlens serving at http://") {
                return rest.split('/').next().map(str::to_string);
            }
        }
        None
    })
    .await
    .expect("slurmlens serve starts within 60 s")
    .expect("slurmlens serve prints its address");
    (child, address)
}

/// A proxy in front of the lab's VictoriaMetrics that counts the requests this test's server sends.
pub struct CountingProxy {
    pub url: String,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CountingProxy {
    pub async fn start() -> Self {
        let target = lab().var("SLURMLENS_VM_URL").to_string();
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = requests.clone();
        let client = reqwest::Client::new();
        let forward = move |request: axum::extract::Request| {
            let (client, target, counted) = (client.clone(), target.clone(), counted.clone());
            async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, 64 << 20).await.unwrap_or_default();
                let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
                let mut outbound = client.request(parts.method.clone(), format!("{target}{path}")).body(body);
                if let Some(content_type) = parts.headers.get("content-type") {
                    outbound = outbound.header("content-type", content_type.clone());
                }
                match outbound.send().await {
                    Ok(answer) => {
                        let status = answer.status();
                        let content_type = answer.headers().get("content-type").cloned();
                        let bytes = answer.bytes().await.unwrap_or_default();
                        let mut response = axum::response::Response::new(axum::body::Body::from(bytes));
                        *response.status_mut() = status;
                        if let Some(content_type) = content_type {
                            response.headers_mut().insert("content-type", content_type);
                        }
                        response
                    }
                    Err(_) => {
                        let mut response = axum::response::Response::new(axum::body::Body::empty());
                        *response.status_mut() = axum::http::StatusCode::BAD_GATEWAY;
                        response
                    }
                }
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding the proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        tokio::spawn(async move {
            axum::serve(listener, axum::Router::new().fallback(forward)).await.expect("proxy runs");
        });
        Self { url, requests }
    }

    pub fn count(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until no request has arrived for `quiet` (at most two minutes); the count then.
    pub async fn settled(&self, quiet: std::time::Duration) -> usize {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let mut last = (self.count(), std::time::Instant::now());
        while std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            let now = self.count();
            if now != last.0 {
                last = (now, std::time::Instant::now());
            } else if last.1.elapsed() >= quiet {
                break;
            }
        }
        self.count()
    }
}

/// Runs `sql` on slurmdbd's database as the lab's MariaDB administrator (slurmdbd's own tables are made
/// by slurmdbd; the copies tests make of them are the tests').
pub fn admin(sql: &str) {
    let output = std::process::Command::new("mariadb")
        .arg(format!("--defaults-file={}", lab().var("LAB_MYCNF")))
        .args(["slurm_acct_db", "-e", sql])
        .output()
        .expect("the mariadb client");
    assert!(output.status.success(), "{sql}: {}", String::from_utf8_lossy(&output.stderr));
}
