//! Notifications against real services on loopback: the lab's slurmdbd and VictoriaMetrics for the
//! facts, a real SMTP server (aiosmtpd, writing a Maildir) and a webhook receiver for the deliveries.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{Duration as Span, Utc};
use slurmlens::app::notify::Notifier;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, NotifyConfig, VictoriaMetricsConfig, WebhookConfig};
use slurmlens::domain::notify::Rule;
use slurmlens::store::{ReportDigest, Store};
use slurmlens_wire::MyNotifications;

use crate::support::{
    database_shared, fresh_database, import_series, lab, reserve_gpu_node, spawn_app, submit_holding, test_config,
};

/// A real SMTP server on a free loopback port, keeping every message in a Maildir; stopped on drop.
struct Smtp {
    child: std::process::Child,
    port: u16,
    maildir: PathBuf,
}

impl Smtp {
    async fn start(name: &str) -> Self {
        let maildir = std::env::temp_dir().join(format!("slurmlens-smtp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&maildir);
        let port = free_port();
        // Debian's python3 (the lab installs python3-aiosmtpd for it), whatever `python3` PATH finds.
        let mut child = std::process::Command::new("/usr/bin/python3")
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}"), "-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("aiosmtpd (apt-get install python3-aiosmtpd; lab/lab.sh up installs it)");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Self { child, port, maildir };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("aiosmtpd did not listen on {port}");
    }

    fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every message received so far, as text: headers unfolded, a quoted-printable body decoded.
    fn messages(&self) -> Vec<String> {
        let mut texts = Vec::new();
        for folder in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(self.maildir.join(folder)) else { continue };
            for entry in entries.flatten() {
                texts.push(readable(&std::fs::read_to_string(entry.path()).expect("a message")));
            }
        }
        texts
    }

    fn to(&self, address: &str) -> Vec<String> {
        self.messages().into_iter().filter(|text| text.contains(&format!("To: {address}"))).collect()
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.maildir);
    }
}

/// A message as a person reads it: folded header lines joined, quoted-printable soft breaks and
/// `=XX` escapes undone (what any mail client does).
fn readable(raw: &str) -> String {
    let text = raw.replace("\r\n", "\n").replace("\n ", " ").replace("=\n", "");
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'=' && at + 2 < bytes.len())
            .then(|| std::str::from_utf8(&bytes[at + 1..at + 3]).ok().and_then(|hex| u8::from_str_radix(hex, 16).ok()))
            .flatten();
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port()
}

/// A webhook receiver on loopback: every JSON body POSTed to it.
async fn webhook_receiver() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let received: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let kept = received.clone();
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let kept = kept.clone();
            async move {
                kept.lock().expect("lock").push(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, router).await.expect("receiver") });
    (url, received)
}

fn notify_config(smtp_url: &str, webhook_url: &str, rules: &[Rule]) -> NotifyConfig {
    NotifyConfig {
        enabled: true,
        rules: rules.to_vec(),
        smtp_url: Some(smtp_url.to_string()),
        from: "slurmlens <slurmlens@lab.example>".into(),
        user_email: Some("{user}@lab.example".into()),
        staff_emails: vec!["ops@lab.example".into()],
        webhooks: vec![WebhookConfig { name: "ops-chat".into(), url: webhook_url.to_string(), rules: Vec::new() }],
        // The lab's jobs may have ended days ago, in a lab that stays up.
        failure_max_age_h: 24 * 365,
        ..NotifyConfig::default()
    }
}

fn config_on(database: &str, notify: NotifyConfig) -> Config {
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: database.to_string() });
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 5000,
        readings_max_age_s: 900,
        bearer_token: None,
    });
    config.public_url = "https://lens.lab.example".into();
    config.notify = notify;
    config
}

/// Finished jobs of the lab's user with the most of them: (user, [(id, submit time)]), newest first.
async fn finished_jobs_of_one_user() -> (String, Vec<(u32, u64)>) {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let (uid,): (u32,) = sqlx::query_as(
        "SELECT id_user FROM lab_job_table WHERE time_start > 0 AND time_end > time_start AND deleted = 0 \
         GROUP BY id_user HAVING COUNT(*) >= 2 ORDER BY COUNT(*) DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .expect("a lab user with two finished jobs");
    let jobs: Vec<(u32, u64)> = sqlx::query_as(
        "SELECT id_job, time_submit FROM lab_job_table WHERE id_user = ? AND time_start > 0 AND time_end > time_start \
         AND deleted = 0 ORDER BY job_db_inx DESC LIMIT 2",
    )
    .bind(uid)
    .fetch_all(&pool)
    .await
    .expect("the user's jobs");
    pool.close().await;
    let user = nix_user(uid);
    (user, jobs)
}

fn nix_user(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.get(2) == Some(&uid.to_string().as_str())).then(|| fields[0].to_string())
        })
        .unwrap_or_else(|| panic!("no user {uid}"))
}

/// Archives a report of the lab's job that blames the infrastructure, as the archiver would.
async fn archive_blamed(store: &Store, job: (u32, u64)) {
    let digest = ReportDigest { blame: Some("infrastructure".into()), has_metrics: true, ..ReportDigest::default() };
    let cluster = "lab".parse().expect("cluster");
    store.archive_report(&cluster, job.0, job.1, "{}", &digest).await.expect("archiving");
}

async fn my_notifications(base: &str, user: &str) -> MyNotifications {
    let response = reqwest::Client::new()
        .get(format!("{base}/api/v1/me/notifications"))
        .header("X-Remote-User", user)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

async fn set_rule(base: &str, user: &str, rule: &str, body: &str) -> reqwest::StatusCode {
    reqwest::Client::new()
        .put(format!("{base}/api/v1/me/notifications/rules/{rule}"))
        .header("X-Remote-User", user)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("request")
        .status()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_infrastructure_failure_reaches_the_user_staff_and_the_webhook_once_and_the_user_may_opt_out() {
    let _db = database_shared().await;
    let database = fresh_database("notify").await;
    let smtp = Smtp::start("failure").await;
    let (hook_url, hooked) = webhook_receiver().await;
    let config = config_on(&database, notify_config(&smtp.url(), &hook_url, &[Rule::InfrastructureFailure]));
    let store = Store::new(&database, Duration::from_secs(5)).expect("store");
    let (user, jobs) = finished_jobs_of_one_user().await;
    archive_blamed(&store, jobs[0]).await;

    let notifier = Notifier::new(slurmlens::serve::app(&config).expect("app"), &config.notify, &config.public_url)
        .expect("notifier");
    let first = notifier.round(Utc::now()).await.expect("a round");
    assert_eq!((first.recorded, first.sent, first.failed), (3, 3, 0), "{first:?}");
    let to_user = smtp.to(&format!("{user}@lab.example"));
    assert_eq!(to_user.len(), 1, "{:?}", smtp.messages());
    let job_id = jobs[0].0;
    assert!(to_user[0].contains(&format!("Subject: Job {job_id} (")), "{}", to_user[0]);
    assert!(to_user[0].contains(&format!("https://lens.lab.example/jobs/{job_id}?cluster=lab")), "{}", to_user[0]);
    assert_eq!(smtp.to("ops@lab.example").len(), 1);
    {
        let hooked = hooked.lock().expect("lock");
        assert_eq!(hooked.len(), 1);
        assert_eq!(hooked[0]["rule"], "infrastructure_failure");
        assert!(hooked[0]["text"].as_str().expect("text").contains(&format!("Job {job_id} (")), "{}", hooked[0]);
    }

    // The same finding again: nothing new, nothing sent twice.
    let again = notifier.round(Utc::now()).await.expect("a round");
    assert_eq!((again.recorded, again.sent), (0, 0), "{again:?}");
    assert_eq!(smtp.messages().len(), 2);

    // The user sees it among their own; another user does not.
    let app = spawn_app(config.clone()).await;
    let mine = my_notifications(&app.base_url, &user).await;
    assert_eq!(mine.email.as_deref(), Some(format!("{user}@lab.example").as_str()));
    assert_eq!(mine.notifications.len(), 1, "{mine:?}");
    assert!(mine.notifications[0].emailed_to_you);
    assert_eq!(mine.notifications[0].link, format!("https://lens.lab.example/jobs/{job_id}?cluster=lab"));
    let someone_else = if user == "alice" { "bob" } else { "alice" };
    assert!(my_notifications(&app.base_url, someone_else).await.notifications.is_empty());

    // Opting out: bad input changes nothing, then the user's next one goes to staff and the webhook only.
    assert_eq!(set_rule(&app.base_url, &user, "idle", r#"{"enabled": false}"#).await, 400);
    assert_eq!(set_rule(&app.base_url, &user, "node_faulting", r#"{"enabled": false}"#).await, 400);
    assert_eq!(set_rule(&app.base_url, &user, "infrastructure_failure", r#"{"on": false}"#).await, 400);
    let anonymous = reqwest::Client::new().get(format!("{}/api/v1/me/notifications", app.base_url)).send().await;
    assert_eq!(anonymous.expect("request").status(), 401);
    assert!(my_notifications(&app.base_url, &user).await.rules.iter().all(|rule| rule.enabled));
    assert_eq!(set_rule(&app.base_url, &user, "infrastructure_failure", r#"{"enabled": false}"#).await, 204);
    let rules = my_notifications(&app.base_url, &user).await.rules;
    let failure = rules.iter().find(|rule| rule.rule == Rule::InfrastructureFailure).expect("the rule");
    assert!(!failure.enabled && failure.on_at_site, "{rules:?}");

    archive_blamed(&store, jobs[1]).await;
    let after = notifier.round(Utc::now()).await.expect("a round");
    assert_eq!((after.recorded, after.sent), (2, 2), "staff and the webhook, not the user: {after:?}");
    assert_eq!(smtp.to(&format!("{user}@lab.example")).len(), 1);
    assert_eq!(smtp.to("ops@lab.example").len(), 2);
    let mine = my_notifications(&app.base_url, &user).await;
    assert_eq!(mine.notifications.len(), 2);
    assert_eq!(mine.notifications.iter().filter(|notice| notice.emailed_to_you).count(), 1, "{mine:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_the_relay_could_not_take_is_kept_and_sent_by_the_next_process() {
    let _db = database_shared().await;
    let database = fresh_database("notify_restart").await;
    let store = Store::new(&database, Duration::from_secs(5)).expect("store");
    let (_, jobs) = finished_jobs_of_one_user().await;
    archive_blamed(&store, jobs[0]).await;
    let (hook_url, _hooked) = webhook_receiver().await;

    // The relay is down: the deliveries are recorded, tried once and kept with the cause.
    let closed = format!("smtp://127.0.0.1:{}", free_port());
    let mut notify = notify_config(&closed, &hook_url, &[Rule::InfrastructureFailure]);
    notify.webhooks.clear();
    let config = config_on(&database, notify);
    let down = Notifier::new(slurmlens::serve::app(&config).expect("app"), &config.notify, &config.public_url)
        .expect("notifier");
    let now = Utc::now();
    let tried = down.round(now).await.expect("a round");
    assert_eq!((tried.recorded, tried.sent, tried.failed), (2, 0, 2), "{tried:?}");
    let pending = store.due_deliveries(now + Span::minutes(5), 10).await.expect("due");
    assert_eq!(pending.len(), 2);
    assert!(pending.iter().all(|delivery| delivery.attempts == 1 && delivery.last_error.is_some()), "{pending:?}");
    drop(down);

    // A new process (a restart) with the relay back: once their retry is due, they go out, once.
    let smtp = Smtp::start("restart").await;
    let mut notify = notify_config(&smtp.url(), &hook_url, &[Rule::InfrastructureFailure]);
    notify.webhooks.clear();
    let config = config_on(&database, notify);
    let up = Notifier::new(slurmlens::serve::app(&config).expect("app"), &config.notify, &config.public_url)
        .expect("notifier");
    let early = up.round(now + Span::seconds(10)).await.expect("a round");
    assert_eq!((early.recorded, early.sent), (0, 0), "not yet due: {early:?}");
    let due = up.round(now + Span::minutes(2)).await.expect("a round");
    assert_eq!((due.recorded, due.sent, due.failed), (0, 2, 0), "{due:?}");
    assert_eq!(smtp.messages().len(), 2);
    assert!(store.due_deliveries(now + Span::days(1), 10).await.expect("due").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_gpus_sat_idle_the_whole_period_is_told_once_and_not_before() {
    let _db = database_shared().await;
    let database = fresh_database("notify_idle").await;
    let smtp = Smtp::start("idle").await;
    let (hook_url, hooked) = webhook_receiver().await;

    // A job holding a whole lab node's GPUs, which read 1 % busy every second of the last 3 minutes.
    let (picking, node) = reserve_gpu_node(4).await;
    let release = std::env::temp_dir().join(format!("slurmlens-notify-idle-{}", std::process::id()));
    let _ = std::fs::remove_file(&release);
    let job_id = submit_holding("idle-notify", "carol", &node, 4, &release, 0);
    let started = wait_running(job_id).await;
    drop(picking);
    // Only while the job holds the node alone (from its start into the next 40 s); deleted at the end,
    // so no other test's job on this node later reads them.
    let now = Utc::now().timestamp();
    let stamps: Vec<i64> = (started.timestamp()..=now + 40).map(|t| t * 1000).collect();
    import_series((0..4u16).map(|gpu| {
        serde_json::json!({
            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": gpu.to_string(),
                       "UUID": format!("GPU-notify-{}-{gpu}", std::process::id()), "Hostname": node},
            "values": vec![1.0; stamps.len()],
            "timestamps": stamps,
        })
    }))
    .await;

    let mut notify = notify_config(&smtp.url(), &hook_url, &[Rule::IdleGpus]);
    notify.idle_for_s = 20;
    let mut config = config_on(&database, notify);
    config.clusters = vec!["lab".parse().expect("cluster")];
    let notifier = Notifier::new(slurmlens::serve::app(&config).expect("app"), &config.notify, &config.public_url)
        .expect("notifier");
    // Before it has run the whole idle period it is not judged; then it is, once. (Other tests' jobs
    // may run on the lab meanwhile: only this job's notices are counted.)
    let ours = |bodies: &[serde_json::Value]| {
        let marker = format!("Job {job_id} (idle-notify)");
        bodies.iter().filter(|body| body["title"].as_str().is_some_and(|title| title.contains(&marker))).count()
    };
    // (The rounds run at the real moment: slurmdbd knows the job as running now, not later.)
    let until = |at: chrono::DateTime<Utc>| tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default());
    until(started + Span::seconds(12)).await;
    notifier.round(Utc::now()).await.expect("a round");
    assert_eq!(ours(&hooked.lock().expect("lock")), 0, "told before the idle period");
    until(started + Span::seconds(22)).await;
    let round = notifier.round(Utc::now()).await.expect("a round");
    notifier.round(Utc::now()).await.expect("a round");
    std::fs::write(&release, b"").expect("releasing the job");
    assert_eq!(ours(&hooked.lock().expect("lock")), 1, "once per job: {round:?}");
    let to_carol: Vec<String> =
        smtp.to("carol@lab.example").into_iter().filter(|text| text.contains(&format!("Job {job_id} ("))).collect();
    assert_eq!(to_carol.len(), 1, "{:?}", smtp.messages());
    assert!(to_carol[0].contains(&format!("Job {job_id} (idle-notify) has left its 4 GPUs idle")), "{}", to_carol[0]);
    assert!(to_carol[0].contains("1.0 % busy"), "{}", to_carol[0]);
    let deleted = reqwest::Client::new()
        .post(format!("{}/api/v1/admin/tsdb/delete_series", lab().var("SLURMLENS_VM_URL")))
        .form(&[("match[]", format!("{{UUID=~\"GPU-notify-{}-.*\"}}", std::process::id()))])
        .send()
        .await
        .expect("delete series");
    assert!(deleted.status().is_success());
}

#[tokio::test(flavor = "multi_thread")]
async fn faulting_nodes_reach_staff_within_the_hourly_rate_and_the_rest_wait() {
    let _db = database_shared().await;
    let database = fresh_database("notify_nodes").await;
    let smtp = Smtp::start("nodes").await;
    let (hook_url, hooked) = webhook_receiver().await;
    let mut notify = notify_config(&smtp.url(), &hook_url, &[Rule::NodeFaulting]);
    notify.node_faults = 2;
    notify.node_fault_days = 30;
    notify.max_per_hour = 2;
    let mut config = config_on(&database, notify);
    config.clusters = vec!["sakura".parse().expect("cluster")];
    let notifier = Notifier::new(slurmlens::serve::app(&config).expect("app"), &config.notify, &config.public_url)
        .expect("notifier");
    let now = Utc::now();
    let round = notifier.round(now).await.expect("a round");

    // Exactly the nodes sakura's events say drained or went down twice or more in the last 30 days,
    // read here straight from slurmdbd.
    let expected = nodes_faulting_twice("sakura", now.timestamp(), 30).await;
    assert!(expected.len() > 2, "sakura's demo history has nodes that keep faulting: {expected:?}");
    let node_of = |title: &str| title.split(' ').nth(1).expect("a node").to_string();
    let hooked: Vec<String> =
        hooked.lock().expect("lock").iter().map(|body| node_of(body["title"].as_str().expect("title"))).collect();
    // Each address (staff's mailbox, the webhook) gets 2 an hour; the rest wait for the next hour,
    // never dropped.
    assert_eq!((hooked.len(), smtp.to("ops@lab.example").len()), (2, 2), "{round:?}");
    assert_eq!(round.postponed, 2 * (expected.len() - 2), "{round:?}");
    let store = Store::new(&database, Duration::from_secs(5)).expect("store");
    let waiting = store.due_deliveries(now + Span::hours(1), 1000).await.expect("due");
    assert!(waiting.iter().all(|delivery| delivery.attempts == 0 && delivery.user.is_none()), "{waiting:?}");
    let mut told: Vec<String> = waiting
        .iter()
        .filter(|delivery| delivery.address == "ops-chat")
        .map(|delivery| node_of(&delivery.title))
        .chain(hooked)
        .collect();
    told.sort();
    assert_eq!(told, expected, "one notice per faulting node, sent or waiting");
    assert_eq!(waiting.iter().filter(|delivery| delivery.address == "ops@lab.example").count(), expected.len() - 2);
    // An hour on, the next two of each go.
    let next = notifier.round(now + Span::minutes(61)).await.expect("a round");
    assert_eq!((next.recorded, next.sent), (0, 4), "{next:?}");
}

/// Waits until the lab's job runs; when it started.
async fn wait_running(job_id: u32) -> chrono::DateTime<Utc> {
    for _ in 0..600 {
        let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd");
        let start: Option<u64> =
            sqlx::query_scalar("SELECT time_start FROM lab_job_table WHERE id_job = ? AND time_start > 0")
                .bind(job_id)
                .fetch_optional(&pool)
                .await
                .expect("the job");
        pool.close().await;
        if let Some(start) = start {
            return chrono::DateTime::from_timestamp(start as i64, 0).expect("a time");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("job {job_id} did not start in 2 minutes");
}

/// Every node of `cluster` with two or more drain or down events that started in the `days` before `now`.
async fn nodes_faulting_twice(cluster: &str, now: i64, days: i64) -> Vec<String> {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd");
    let sql = format!(
        "SELECT node_name FROM {cluster}_event_table WHERE node_name <> '' AND time_start >= ? AND time_start < ? \
         AND ((state & 15) = 1 OR (state & 0x0200) <> 0 OR (state & 0x2000) <> 0) \
         GROUP BY node_name HAVING COUNT(DISTINCT time_start, reason) >= 2 ORDER BY node_name"
    );
    let nodes: Vec<String> =
        sqlx::query_scalar(&sql).bind(now - days * 86_400).bind(now).fetch_all(&pool).await.expect("events");
    pool.close().await;
    nodes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coordinator_gets_last_months_usage_of_their_accounts_once_as_the_usage_page_reads_it() {
    let _db = database_shared().await;
    let database = fresh_database("notify_monthly").await;
    let smtp = Smtp::start("monthly").await;
    let (hook_url, hooked) = webhook_receiver().await;
    let mut config = config_on(&database, notify_config(&smtp.url(), &hook_url, &[Rule::MonthlyUsage]));
    config.clusters = vec!["lab".parse().expect("cluster")];
    let notifier = Notifier::new(slurmlens::serve::app(&config).expect("app"), &config.notify, &config.public_url)
        .expect("notifier");
    // The first hour of next month: the report covers this month, in which the lab's jobs ran.
    use chrono::{Datelike, TimeZone};
    let today = Utc::now();
    let (year, month) = if today.month() == 12 { (today.year() + 1, 1) } else { (today.year(), today.month() + 1) };
    let next_month = Utc.with_ymd_and_hms(year, month, 1, 1, 0, 0).single().expect("a time");
    let this_month = Utc.with_ymd_and_hms(today.year(), today.month(), 1, 0, 0, 0).single().expect("a time");
    let round = notifier.round(next_month).await.expect("a round");
    assert!(round.notices >= 1, "carol coordinates ml: {round:?}");
    let again = notifier.round(next_month + Span::minutes(5)).await.expect("a round");
    assert_eq!(again.recorded, 0, "once a month: {again:?}");
    assert!(hooked.lock().expect("lock").is_empty(), "a coordinator's report is theirs alone, not the webhook's");
    assert!(smtp.to("ops@lab.example").is_empty(), "nor staff's");

    let to_carol = smtp.to("carol@lab.example");
    assert_eq!(to_carol.len(), 1, "{:?}", smtp.messages());
    let text = &to_carol[0];
    let label = this_month.format("%B %Y").to_string();
    assert!(text.contains(&format!("Subject: Usage of your accounts on lab in {label}")), "{text}");
    // Each account carol coordinates, with the GPU-hours the usage API gives her for the month.
    let app = spawn_app(config.clone()).await;
    let window = format!(
        "cluster=lab&by=account&start={}&end={}",
        this_month.format("%Y-%m-%dT%H:%M:%SZ"),
        next_month.format("%Y-%m-01T00:00:00Z")
    );
    let report: slurmlens_wire::UsageReport =
        app.get_as("carol", &format!("/api/v1/usage?{window}")).await.json().await.expect("usage JSON");
    let listed: Vec<(String, f64)> = text
        .lines()
        .skip_while(|line| !line.starts_with("account "))
        .skip(1)
        .take_while(|line| !line.trim().is_empty() && !line.starts_with("The evidence"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            Some((cells.first()?.to_string(), cells.get(1)?.parse().ok()?))
        })
        .collect();
    assert!(listed.iter().any(|(name, _)| name == "ml"), "ml is carol's: {text}");
    for (name, hours) in &listed {
        let row =
            report.rows.iter().find(|row| &row.name == name).unwrap_or_else(|| panic!("{name} not in {report:?}"));
        // The API reads running jobs up to its own moment: a tenth of a GPU-hour of slack.
        assert!((row.gpu_hours - hours).abs() <= 0.1, "{name}: {hours} in the e-mail, {} from the API", row.gpu_hours);
    }
    assert!(!listed.iter().any(|(name, _)| name == "physics"), "an account carol does not coordinate: {text}");
    assert!(
        text.contains(&format!(
            "https://lens.lab.example/usage?cluster=lab&by=account&start={}",
            this_month.format("%Y-%m-%dT%H:%M:%SZ")
        )),
        "{text}"
    );
}
