//! Issue #15, tenancy of what lies beside a job: a job's viewer who is not staff reads none of another
//! tenant's log lines on a shared node (H2), none of another tenant's GPUs one by one in the report,
//! live or archived (M1), and nothing an older job under the same id left in our own tables (M9).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, VictoriaLogsConfig, VictoriaMetricsConfig};
use slurmlens::domain::gpu::{GpuAllocation, GpuRef};
use slurmlens::domain::hostlist::Hostlist;
use slurmlens::domain::trace::{TraceCategory, TraceName, TraceSummary};
use slurmlens::store::Store;
use slurmlens_wire::{Attribution, JobDetail, JobGpus, JobLogs, JobReport, JobTraces, MetricsState, ReportSource};

use crate::support::{TestApp, database_shared, fresh_database, lab, spawn_app, submit_holding, test_config};

async fn slurmdbd() -> sqlx::MySqlPool {
    sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database")
}

fn at(epoch: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(epoch, 0).expect("a time")
}

async fn json_as<T: serde::de::DeserializeOwned>(app: &TestApp, user: &str, path: &str) -> (T, String) {
    let response = app.get_as(user, path).await;
    assert_eq!(response.status(), 200, "{path} as {user}");
    let body = response.text().await.expect("body");
    (serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} as {user}: {e}: {body:.400}")), body)
}

/// A job of sakura's history as these tests need it.
#[derive(Debug, Clone)]
struct Ran {
    id: u32,
    user: String,
    uid: u32,
    nodes: Hostlist,
    start: i64,
    end: i64,
}

/// Every job of sakura that ran in the last `hours` hours (running ones end now).
async fn sakura_jobs(hours: i64) -> Vec<Ran> {
    let pool = slurmdbd().await;
    let now = Utc::now().timestamp();
    let rows: Vec<(u32, String, u32, String, u64, u64)> = sqlx::query_as(
        "SELECT j.id_job, a.user, j.id_user, j.nodelist, j.time_start, j.time_end FROM sakura_job_table j \
         JOIN sakura_assoc_table a ON a.id_assoc = j.id_assoc \
         WHERE j.deleted = 0 AND j.time_start > 0 AND (j.time_end = 0 OR j.time_end >= ?)",
    )
    .bind(now - hours * 3600)
    .fetch_all(&pool)
    .await
    .expect("reading sakura's jobs");
    pool.close().await;
    rows.into_iter()
        .filter_map(|(id, user, uid, nodelist, start, end)| {
            let end = if end == 0 { now } else { i64::try_from(end).ok()? };
            Some(Ran { id, user, uid, nodes: Hostlist::parse(&nodelist).ok()?, start: i64::try_from(start).ok()?, end })
        })
        .collect()
}

/// Users who coordinate an account: they may see other users' jobs, so they are not picked as viewers.
async fn coordinators() -> Vec<String> {
    let pool = slurmdbd().await;
    let users: Vec<String> = sqlx::query_scalar("SELECT user FROM acct_coord_table WHERE deleted = 0")
        .fetch_all(&pool)
        .await
        .expect("coords");
    pool.close().await;
    users
}

/// A syslog entry as a shipper sends it to VictoriaLogs, marked with this run's `run`.
fn entry(run: &str, time: i64, node: &str, message: String) -> serde_json::Value {
    json!({
        "_time": at(time).to_rfc3339_opts(SecondsFormat::Nanos, true),
        "_msg": message,
        "host": node,
        "app": "syslog",
        "run": run,
    })
}

fn messages(logs: &JobLogs) -> Vec<&str> {
    logs.lines.iter().map(|line| line.message.as_str()).collect()
}

/// H2: on a node shared with another tenant's job, its user reads only the lines naming the job, its
/// user or its cgroup (not the other job's, not another tenant's `logger` canary); staff read the node
/// whole; on a node the job held alone, its user reads every line.
#[tokio::test(flavor = "multi_thread")]
async fn logs_of_a_shared_node_are_the_jobs_own_for_its_user_and_whole_for_staff() {
    let _db = database_shared().await;
    // Done jobs of the last days (VictoriaLogs keeps any time the test writes); a margin of a minute
    // around each, as the server reads logs.
    let jobs = sakura_jobs(6 * 24).await;
    let coordinators = coordinators().await;
    let now = Utc::now().timestamp();
    let settled = |job: &Ran| job.end < now - 600 && job.end - job.start >= 120 && job.start > now - 5 * 24 * 3600;
    let overlaps = |a: &Ran, b: &Ran| a.start - 60 <= b.end + 60 && b.start - 60 <= a.end + 60;
    // The jobs of each node, so a job's neighbours are looked up, not searched for.
    let mut on_node: BTreeMap<String, Vec<&Ran>> = BTreeMap::new();
    for job in &jobs {
        for host in job.nodes.hosts() {
            on_node.entry(host.to_string()).or_default().push(job);
        }
    }
    let neighbours = |job: &Ran| -> Vec<&Ran> {
        let host = job.nodes.hosts()[0].to_string();
        on_node[&host].iter().copied().filter(|other| other.id != job.id && overlaps(job, other)).collect()
    };
    let candidates: Vec<&Ran> =
        jobs.iter().filter(|job| settled(job) && job.nodes.len() == 1 && !coordinators.contains(&job.user)).collect();
    // A single-node job with another user's single-node job on the same node at the same time.
    let (mine, theirs) = candidates
        .iter()
        .find_map(|job| {
            let other = neighbours(job).into_iter().find(|other| {
                other.user != job.user
                    && other.nodes.len() == 1
                    && other.start + 30 < job.end
                    && job.start + 30 < other.end
            })?;
            Some(((*job).clone(), other.clone()))
        })
        .expect("sakura's history has two users' jobs sharing a node");
    // A single-node job no other job came near on its node.
    let alone = candidates
        .iter()
        .find(|job| neighbours(job).is_empty())
        .map(|job| (*job).clone())
        .expect("sakura's history has a job that held its node alone");
    let node = mine.nodes.hosts()[0].clone();
    let alone_node = alone.nodes.hosts()[0].clone();
    let shared_at = (mine.start.max(theirs.start) + mine.end.min(theirs.end)) / 2;
    let alone_at = (alone.start + alone.end) / 2;
    let (id, other, uid) = (mine.id, theirs.id, mine.uid);
    let own_line = format!("slurmstepd[4242]: [{id}.batch] done with job");
    let uid_line = format!(
        "kernel: oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/slurm/uid_{uid}/job_{id},task=python,pid=48213,uid={uid}"
    );
    let other_line = format!("slurmstepd[5151]: error: *** JOB {other} ON {node} CANCELLED AT 2026-12-01T09:12:44 ***");
    let canary = format!("logger: slurmlens-probe-{node}-canary");
    let alone_line = "kernel: mlx5_core 0000:3b:00.0: Link down".to_string();
    let alone_canary = format!("logger: slurmlens-probe-{alone_node}-alone");
    // Written into the lab's real VictoriaLogs, which then narrows the lines itself.
    let run = crate::real_logs::run_mark("tenancy");
    crate::real_logs::ingest(&[
        entry(&run, shared_at, &node, own_line.clone()),
        entry(&run, shared_at + 1, &node, other_line.clone()),
        entry(&run, shared_at + 2, &node, canary.clone()),
        entry(&run, shared_at + 3, &node, uid_line.clone()),
        entry(&run, alone_at, &alone_node, alone_line.clone()),
        entry(&run, alone_at + 1, &alone_node, alone_canary.clone()),
    ])
    .await;
    let logs = VictoriaLogsConfig {
        filter: Some(format!("run:={}", slurmlens::domain::logsql::quote(&run))),
        ..crate::real_logs::config("host")
    };
    let app = spawn_app(Config { victorialogs: Some(logs), ..test_config(AnonymousAccess::Nobody) }).await;
    let path = format!("/api/v1/jobs/{id}/logs?cluster=sakura");

    // Its user: the job's own lines, not the other tenant's job's line nor the canary.
    let (seen, body) = json_as::<JobLogs>(&app, &mine.user, &path).await;
    assert_eq!(seen.status, slurmlens_wire::LogsStatus::Ok, "{:?}", seen.message);
    assert_eq!(messages(&seen), [own_line.as_str(), uid_line.as_str()], "job {id} shared {node} with {other}");
    assert!(seen.limited_to_job, "the answer says the lines were limited: {body:.600}");
    assert!(!body.contains(&canary) && !body.contains(&format!("JOB {other}")), "{body}");
    let sent = seen.query.clone().unwrap_or_default();
    assert!(sent.contains(&format!("\"job_{id}\"")), "narrowed at the source: {sent}");
    // `contains=` searches only within that.
    let (searched, _) = json_as::<JobLogs>(&app, &mine.user, &format!("{path}&contains=canary")).await;
    assert!(!messages(&searched).contains(&canary.as_str()), "{:?}", searched.lines);
    let sent = searched.query.clone().unwrap_or_default();
    assert!(sent.contains("\"canary\" (\"") && sent.contains(&format!("\"job_{id}\"")), "{sent}");
    // The job page says so.
    let page = app.get_as(&mine.user, &format!("/jobs/{id}?cluster=sakura")).await.text().await.expect("page");
    assert!(page.contains("data-testid=\"logs-limited\""), "the page says the lines were limited");
    assert!(!page.contains(&canary));

    // Staff: the node whole.
    let (staff, _) = json_as::<JobLogs>(&app, "root", &path).await;
    assert!(!staff.limited_to_job);
    for line in [&own_line, &other_line, &canary, &uid_line] {
        assert!(messages(&staff).contains(&line.as_str()), "staff read `{line}`");
    }

    // A node held alone: every line of it.
    let (held, _) =
        json_as::<JobLogs>(&app, &alone.user, &format!("/api/v1/jobs/{}/logs?cluster=sakura", alone.id)).await;
    assert!(!held.limited_to_job, "job {} held {alone_node} alone", alone.id);
    assert!(messages(&held).contains(&alone_line.as_str()) && messages(&held).contains(&alone_canary.as_str()));
    let sent = held.query.clone().unwrap_or_default();
    assert!(!sent.contains("\"job_"), "not narrowed: {sent}");
}

/// The UUID this run gives a GPU (unique per run, as the report test's).
fn test_uuid(node: &str, gpu: u16) -> String {
    static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| std::time::SystemTime::UNIX_EPOCH.elapsed().map(|d| d.as_millis()).unwrap_or(0));
    format!("GPU-sec-tenancy-{node}-{run}-{gpu}")
}

/// dcgm-exporter's series for every GPU of `node` over `[from, to]`, each GPU at its own level, and an
/// XID on each whose message names the GPU.
async fn import_node_gpus(node: &str, from: i64, to: i64) {
    let timestamps: Vec<i64> = (from..=to).step_by(2).map(|t| t * 1000).collect();
    let mut lines = Vec::new();
    for gpu in 0..4u16 {
        let labels = |name: &str| {
            json!({"__name__": name, "gpu": gpu.to_string(), "UUID": test_uuid(node, gpu), "Hostname": node,
                   "modelName": "NVIDIA H100 80GB HBM3"})
        };
        for (name, level) in [("DCGM_FI_DEV_GPU_UTIL", 10.0 + 20.0 * f64::from(gpu)), ("DCGM_FI_DEV_FB_USED", 1000.0)] {
            lines.push(
                json!({"metric": labels(name), "values": vec![level; timestamps.len()], "timestamps": timestamps}),
            );
        }
        let mut xid = labels("DCGM_FI_DEV_XID_ERRORS");
        xid["err_code"] = json!("79");
        xid["err_msg"] = json!(format!("sec-tenancy-secret-of-gpu-{gpu}"));
        lines.push(json!({"metric": xid, "values": vec![79.0; timestamps.len()], "timestamps": timestamps}));
    }
    crate::support::import_series(lines).await;
}

/// Waits until slurmdbd has the job's end; its detail.
async fn ended(app: &TestApp, job_id: u32) -> JobDetail {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        // slurmdbd learns of a job a moment after sbatch: a 404 until then.
        let response = app.get_as("root", &format!("/api/v1/jobs/{job_id}?cluster=lab")).await;
        if response.status() == 200 {
            let detail: JobDetail = response.json().await.expect("job JSON");
            if detail.job.end.is_some() && detail.job.state == "COMPLETED" {
                return detail;
            }
        }
        assert!(Instant::now() < deadline, "job {job_id} did not end in slurmdbd within 3 minutes");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Asserts what a tenant sees of the report: no GPU of the shared node one by one, one band across them.
fn assert_banded(report: &JobReport, body: &str, node: &str) {
    assert_eq!(report.metrics.status, MetricsState::Ok, "{:?}", report.metrics);
    assert!(report.gpus.iter().all(|gpu| gpu.attribution != Attribution::NodeOnly), "{:?}", report.gpus);
    assert_eq!(report.shared_node_bands.len(), 1, "one band: {body:.800}");
    let band = &report.shared_node_bands[0];
    assert_eq!((band.node.as_str(), band.gpus), (node, 4));
    let util = band.spread.iter().find(|spread| spread.metric == "gpu_util").expect("a gpu_util band");
    assert!(util.count == 4 && !util.points.is_empty(), "{util:?}");
    assert!(band.summary.iter().any(|summary| summary.metric == "gpu_util"), "{:?}", band.summary);
    // No GPU of the node counts as the job's: its GPU hours are not placed, and no mean or idle share of
    // other tenants' GPUs is given as the job's.
    let totals = &report.totals;
    assert!((totals.unattributed_gpu_hours - totals.gpu_hours).abs() < 1e-9, "{totals:?}");
    assert_eq!((totals.idle_gpu_hours, totals.mean_gpu_util, totals.energy_kwh), (0.0, None, None), "{totals:?}");
    assert!(!body.contains("sec-tenancy-secret"), "no XID message of the node's GPUs: {body:.2000}");
    assert!(!body.contains("GPU-sec-tenancy"), "no GPU's UUID: {body:.2000}");
    // Issue #19: the charts' links carry the job's own node's queries, never another node's.
    assert!(report.chart_queries.iter().any(|query| query.metric == "gpu_util"), "{:?}", report.chart_queries);
    for query in &report.chart_queries {
        // Lustre's job statistics are named by the job itself, everything else by its node.
        let own_jobstats = query.query.contains(&format!("jobid=~\"{}(", report.job.job_id));
        assert!(query.query.contains(node) || own_jobstats, "{}: {}", query.metric, query.query);
        for other in ["n1", "n2", "n3", "n4"].into_iter().filter(|other| *other != node) {
            let named = [format!("\"{other}"), format!("|{other}")];
            assert!(!named.iter().any(|name| query.query.contains(name.as_str())), "{}: {}", other, query.query);
        }
    }
}

/// The link of the band's chart, run in VictoriaMetrics over the link's own range, answers the band
/// the page draws: its lowest, mean and highest line, point for point, and no GPU's series.
async fn assert_link_draws_the_band(report: &JobReport, vm_url: &str) {
    let link = report.chart_queries.iter().find(|query| query.metric == "gpu_util").expect("the chart's link");
    let band = report.shared_node_bands[0].spread.iter().find(|spread| spread.metric == "gpu_util").expect("a band");
    let vm = slurmlens::sources::victoriametrics::VictoriaMetrics::new(vm_url, Duration::from_secs(5)).expect("client");
    // As a person opens it: once VictoriaMetrics serves the job's last samples, which it may not yet
    // do for a job that ended a moment ago.
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let answer = vm.query_range(&link.query, link.start, link.end, link.step_s).await.expect("the query runs");
        if answer.len() >= 3 || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let names: Vec<Option<&String>> = answer.iter().map(|series| series.labels.get("band")).collect();
    assert_eq!(names.len(), 3, "the band's three lines and no GPU's series: {names:?} from {}", link.query);
    let line = |name: &str| -> BTreeMap<i64, f64> {
        let series = answer.iter().find(|series| series.labels.get("band").map(String::as_str) == Some(name));
        series.map(|series| series.points.iter().copied().collect()).unwrap_or_default()
    };
    let lines = [line("lowest"), line("mean"), line("highest")];
    assert!(!band.points.is_empty());
    for &(at, lowest, mean, highest) in &band.points {
        for (queried, drawn) in lines.iter().zip([lowest, mean, highest]) {
            let queried = queried.get(&at).unwrap_or_else(|| panic!("the link has no point at {at}: {}", link.query));
            assert!((queried - drawn).abs() < 1e-6, "at {at}: the link's {queried}, the page's {drawn}");
        }
    }
    assert!(lines.iter().all(|line| line.len() == band.points.len()), "no point the page lacks");
}

/// M1: a 1-GPU job on a 4-GPU node, with no record of which GPU was its own: its user sees the node's
/// GPUs as one band (no GPU's series, summary, UUID or XID message), when computed and when read back
/// from the archive the first read made; staff see the four GPUs one by one.
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_nodes_gpus_reach_a_tenant_only_as_a_band_live_and_archived() {
    let _db = database_shared().await;
    let vm_url = lab().var("SLURMLENS_VM_URL").to_string();
    let mut config = test_config(AnonymousAccess::Nobody);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: vm_url.clone(),
        timeout_ms: 5000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.database = Some(DatabaseConfig { url: fresh_database("sec_tenancy_band").await });
    config.report.archive_delay_s = 0;
    config.report.archive_interval_s = 0;
    let app = spawn_app(config).await;

    let release = lab().dir.join(format!("jobs/sec-tenancy-release-{}", std::process::id()));
    std::fs::write(&release, b"").expect("release file");
    let (picking, node) = crate::support::reserve_gpu_node(1).await;
    let job_id = submit_holding(&format!("sec-tenancy-{}", std::process::id()), "alice", &node, 1, &release, 15);
    let detail = ended(&app, job_id).await;
    drop(picking);
    let (start, end) = (detail.job.start.expect("started").timestamp(), detail.job.end.expect("ended").timestamp());
    import_node_gpus(&node, start - 30, (end + 5).min(Utc::now().timestamp() - 1)).await;
    // The first report read archives it: wait until VictoriaMetrics serves the imported series.
    let ours = (0..4u16).map(|gpu| test_uuid(&node, gpu)).collect::<Vec<_>>().join("|");
    let deadline = Instant::now() + Duration::from_secs(30);
    // Both series kinds: a busy VictoriaMetrics may index the XID series a moment after the readings.
    // Also through the selector the report reads them by (node and GPU index, not UUID): VictoriaMetrics
    // answers each selector from its own index lookup, and under load one may see new series later.
    let count = format!("count(last_over_time(DCGM_FI_DEV_GPU_UTIL{{UUID=~\"{ours}\"}}[1m]))");
    let xids = format!("count(last_over_time(DCGM_FI_DEV_XID_ERRORS{{UUID=~\"{ours}\"}}[1m]))");
    let by_node = format!(
        "count(max_over_time(DCGM_FI_DEV_XID_ERRORS{{Hostname=\"{node}\",gpu=~\"0|1|2|3\",err_msg=~\"sec-tenancy-secret-of-gpu-.*\"}}[{}s]))",
        end - start + 1
    );
    while crate::support::instant_query(&vm_url, &count, end).await != Some(4.0)
        || crate::support::instant_query(&vm_url, &xids, end).await != Some(4.0)
        || crate::support::instant_query(&vm_url, &by_node, end).await.is_none_or(|n| n < 4.0)
    {
        assert!(Instant::now() < deadline, "VictoriaMetrics never served the imported series");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let path = format!("/api/v1/jobs/{job_id}/report?cluster=lab");
    let (computed, body) = json_as::<JobReport>(&app, "alice", &path).await;
    assert_eq!(computed.source, ReportSource::Final);
    assert_banded(&computed, &body, &node);
    assert_link_draws_the_band(&computed, &vm_url).await;

    let (staff, staff_body) = json_as::<JobReport>(&app, "root", &path).await;
    assert_eq!(staff.source, ReportSource::Archived, "the first read archived the report");
    let per_gpu: Vec<(u16, Attribution, usize)> =
        staff.gpus.iter().map(|gpu| (gpu.gpu, gpu.attribution, gpu.series.len())).collect();
    assert_eq!(per_gpu.len(), 4, "{per_gpu:?}");
    assert!(per_gpu.iter().all(|&(_, rule, series)| rule == Attribution::NodeOnly && series > 0), "{per_gpu:?}");
    assert!(staff.shared_node_bands.is_empty());
    let xid_events: Vec<_> = staff.gpus.iter().map(|gpu| (gpu.gpu, &gpu.xid_events)).collect();
    assert!(staff_body.contains("sec-tenancy-secret-of-gpu-"), "staff read the GPUs' XIDs: {xid_events:?}");

    let (archived, body) = json_as::<JobReport>(&app, "alice", &path).await;
    assert_eq!(archived.source, ReportSource::Archived);
    assert_banded(&archived, &body, &node);
    let page_path = format!("/jobs/{job_id}?cluster=lab");
    let page = app.get_as("alice", &page_path).await.text().await.expect("page");
    assert!(!page.contains("sec-tenancy-secret"), "the job page neither");
    // The page draws what the verdict says: the node's GPUs as one row and one band per metric.
    let row = format!(r#"data-testid="report-shared-node" data-node="{node}""#);
    assert!(page.contains(&row) && page.contains(r#"data-chart="shared""#), "alice's page draws the band");
    assert!(!page.contains(r#"data-testid="report-gpu""#), "and no GPU of the node by itself");
    assert!(
        page.contains("not measured: no record says which of the shared node's GPUs were the job's"),
        "its totals say so"
    );
    let staff_page = app.get_as("root", &page_path).await.text().await.expect("page");
    assert!(!staff_page.contains(&row) && !staff_page.contains(r#"data-chart="shared""#), "staff see the GPUs");
    assert_eq!(staff_page.matches(r#"data-testid="report-gpu""#).count(), 4);

    let deleted = reqwest::Client::new()
        .post(format!("{vm_url}/api/v1/admin/tsdb/delete_series"))
        .form(&[("match[]", format!("{{Hostname=\"{node}\",UUID=~\"{ours}\"}}"))])
        .send()
        .await
        .expect("delete series");
    assert!(deleted.status().is_success());
}

/// A finished single-node GPU job of the lab cluster (submits one when there is none): id, node, start, end.
async fn finished_gpu_job() -> (u32, String, i64, i64) {
    let pool = slurmdbd().await;
    let query = "SELECT j.id_job, j.nodelist, j.time_start, j.time_end FROM lab_job_table j \
                 JOIN tres_table t ON t.type = 'gres' AND t.name = 'gpu' \
                 WHERE j.deleted = 0 AND j.nodes_alloc = 1 AND j.time_start > 0 AND j.time_end > j.time_start \
                   AND CONCAT(',', j.tres_alloc) LIKE CONCAT('%,', t.id, '=%') \
                 ORDER BY j.id_job DESC LIMIT 1";
    let found: Option<(u32, String, u64, u64)> = sqlx::query_as(query).fetch_optional(&pool).await.expect("lab jobs");
    let (id, node, start, end) = match found {
        Some(found) => found,
        None => {
            let release = lab().dir.join(format!("jobs/sec-tenancy-m9-{}", std::process::id()));
            std::fs::write(&release, b"").expect("release file");
            let (picking, node) = crate::support::reserve_gpu_node(1).await;
            let job_id = submit_holding("sec-tenancy-m9", "alice", &node, 1, &release, 2);
            drop(picking);
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                let row: Option<(u32, String, u64, u64)> = sqlx::query_as(
                    "SELECT id_job, nodelist, time_start, time_end FROM lab_job_table \
                     WHERE id_job = ? AND time_end > time_start ORDER BY job_db_inx DESC LIMIT 1",
                )
                .bind(job_id)
                .fetch_optional(&pool)
                .await
                .expect("lab jobs");
                if let Some(row) = row {
                    break row;
                }
                assert!(Instant::now() < deadline, "job {job_id} did not end");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    pool.close().await;
    (id, node, start as i64, end as i64)
}

fn kernel(job_id: u32, gpu: u16, at: DateTime<Utc>, name: &str) -> TraceSummary {
    TraceSummary {
        job_id,
        gpu,
        pid: 4242,
        interval_start: at,
        interval_s: 10,
        category: TraceCategory::Kernel,
        name: TraceName::parse(TraceCategory::Kernel, name).expect("a kernel name"),
        count: 100,
        total_ns: 5_000_000_000,
        max_ns: 60_000_000,
        bytes: 0,
    }
}

/// M9: GPU records and trace summaries of job id X dated a week before the lab's job X ran (a wrapped
/// job id, an earlier run) are not the job's: `/gpus`, the report's attribution and `/traces` read only
/// the records within its run.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_jobs_gpu_records_and_traces_under_the_same_id_are_not_read() {
    let _db = database_shared().await;
    let (job_id, node, start, end) = finished_gpu_job().await;
    let database = fresh_database("sec_tenancy_job_ids").await;
    let store = Store::new(&database, Duration::from_secs(5)).expect("store");
    let cluster = "lab".parse().expect("cluster");
    let week_before = at(start) - chrono::Duration::days(7);
    let record = |index: u16, seen: DateTime<Utc>| GpuAllocation {
        job_id,
        step: "job".into(),
        gpu: GpuRef { node: node.clone(), index },
        uuid: Some(format!("GPU-sec-tenancy-m9-{index}")),
        cgroup_path: None,
        first_seen: seen,
        last_seen: seen + chrono::Duration::hours(1),
        ended_at: Some(seen + chrono::Duration::hours(1)),
    };
    // The stale record is the older job's GPU 3; the job's own is GPU 0, recorded at its start.
    let own_seen = at(start) + chrono::Duration::seconds(1);
    let own = GpuAllocation { last_seen: at(end), ended_at: Some(at(end)), ..record(0, own_seen) };
    store.upsert_gpu_allocations(&cluster, &[record(3, week_before), own]).await.expect("records");
    let traces =
        [kernel(job_id, 3, week_before, "another_users_secret_kernel"), kernel(job_id, 0, at(start), "own_gemm")];
    store.insert_trace_summaries(&cluster, &node, &traces).await.expect("trace rows");

    let mut config = test_config(AnonymousAccess::Staff);
    config.database = Some(DatabaseConfig { url: database });
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 5000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.report.archive_interval_s = 0;
    let app = spawn_app(config).await;

    let (gpus, _) = json_as::<JobGpus>(&app, "root", &format!("/api/v1/jobs/{job_id}/gpus?cluster=lab")).await;
    let indices: Vec<u16> = gpus.gpus.iter().map(|gpu| gpu.index).collect();
    assert_eq!(indices, [0], "only the record within the run: {gpus:?}");

    let (report, _) = json_as::<JobReport>(&app, "root", &format!("/api/v1/jobs/{job_id}/report?cluster=lab")).await;
    let attributed: BTreeMap<u16, Attribution> = report.gpus.iter().map(|gpu| (gpu.gpu, gpu.attribution)).collect();
    assert_eq!(attributed, [(0, Attribution::PluginRecord)].into(), "{:?}", report.metrics);

    let (breakdown, body) =
        json_as::<JobTraces>(&app, "root", &format!("/api/v1/jobs/{job_id}/traces?cluster=lab")).await;
    let kernels: Vec<&str> = breakdown.top_kernels.iter().map(|top| top.name.as_str()).collect();
    assert_eq!(kernels, ["own_gemm"], "{body:.600}");
    assert_eq!(breakdown.gpus.iter().map(|gpu| gpu.gpu).collect::<Vec<_>>(), [0]);
    assert!(!body.contains("another_users_secret_kernel"));
}
