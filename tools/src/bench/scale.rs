//! `slurmlens-dev bench scale`: the same requests against a small history and a big one (default the
//! demo's 30-day `sakura` and the five-year `fuji`), so that what grows with history shows as a ratio.
//!
//! Each measure is one user-visible request (first pages of staff, a plain user and a coordinator, a
//! user's month read whole, a page of FAILED jobs, the widest window a user may ask for, the whole
//! history's first page, a week read whole, the Gantt's week, the grid now), sent through the app's
//! router in this process as `slurmlens serve` routes it, and with `--url` to a running server too.
//! The week is also read by its SQL floor (the same rows and columns in one statement, `mariadb
//! --batch`) and by `sacct -a -X -P`. Prints medians of `--repeat` runs and ratios; never asserts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use chrono::{DateTime, Utc};
use tower::ServiceExt;

use slurmlens::config::Config;
use slurmlens::http::peer::Peer;
use slurmlens::http::router;

/// Arguments of `slurmlens-dev bench scale`.
#[derive(Debug, clap::Args)]
pub struct ScaleBenchArgs {
    /// The cluster with a short history (the reference).
    #[arg(long, default_value = "sakura")]
    pub small: String,
    /// The cluster with a long history (`demo seed-history --cluster fuji --days 1825 --jobs 10000000`).
    #[arg(long, default_value = "fuji")]
    pub big: String,
    /// A running server to measure as well (base URL); it must trust this host's `X-Remote-User`.
    #[arg(long)]
    pub url: Option<String>,
    /// The plain user (default: the busiest user of the small cluster's week who has jobs on both).
    #[arg(long)]
    pub user: Option<String>,
    /// A coordinator of an account on both clusters (the lab's `carol` coordinates `ml`).
    #[arg(long, default_value = "carol")]
    pub coordinator: String,
    /// A user the server counts as staff (the in-process app is configured so).
    #[arg(long, default_value = "root")]
    pub staff: String,
    /// Days of the window read whole, of the Gantt and of the floor and sacct reads.
    #[arg(long, default_value_t = 7)]
    pub days: i64,
    /// Runs of each measure (the median is shown).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// The sacct binary; `none` skips it.
    #[arg(long, default_value = "sacct")]
    pub sacct: String,
    /// The MariaDB client of the SQL floor; `none` skips it.
    #[arg(long, default_value = "mariadb")]
    pub mariadb: String,
}

/// The identity header of the in-process app (and the one sent to `--url`).
const USER_HEADER: &str = "X-Remote-User";

/// Where requests go: the app's router in this process, or a running server.
enum Target {
    Local(axum::Router),
    Remote { client: reqwest::Client, base: String },
}

impl Target {
    fn name(&self) -> String {
        match self {
            Target::Local(_) => "in-process app".into(),
            Target::Remote { base, .. } => format!("server at {base}"),
        }
    }

    /// GET `path` as `user`: (HTTP status, body).
    async fn get(&self, path: &str, user: &str) -> anyhow::Result<(u16, Vec<u8>)> {
        match self {
            Target::Local(app) => {
                let mut request = Request::get(path).header(USER_HEADER, user).body(Body::empty())?;
                // From loopback: the proxy the in-process configuration trusts with identities.
                request.extensions_mut().insert(ConnectInfo(Peer::Tcp(SocketAddr::from(([127, 0, 0, 1], 0)))));
                let response = app.clone().oneshot(request).await?;
                let status = response.status().as_u16();
                let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
                Ok((status, body.to_vec()))
            }
            Target::Remote { client, base } => {
                let response = client.get(format!("{base}{path}")).header(USER_HEADER, user).send().await?;
                let status = response.status().as_u16();
                Ok((status, response.bytes().await?.to_vec()))
            }
        }
    }
}

/// One measure on one cluster: how long, how much came back, and the answer when it was not 200.
#[derive(Debug, Clone, Default)]
struct Cell {
    took: Duration,
    rows: usize,
    refused: Option<String>,
}

impl Cell {
    fn show(&self) -> String {
        match &self.refused {
            Some(status) => format!("{:.1} ({status})", ms(self.took)),
            None => format!("{:.1}", ms(self.took)),
        }
    }
}

fn ms(took: Duration) -> f64 {
    took.as_secs_f64() * 1000.0
}

/// The median run (by time) of `cells`.
fn median(mut cells: Vec<Cell>) -> Cell {
    cells.sort_by_key(|cell| cell.took);
    cells.get(cells.len() / 2).cloned().unwrap_or_default()
}

/// A page of the jobs API, counted without keeping its jobs.
#[derive(serde::Deserialize)]
struct PageCount {
    items: Vec<serde::de::IgnoredAny>,
    next_cursor: Option<String>,
}

/// Reads `/api/v1/jobs?{query}` page after page (all of them with `whole`, else the first) as `user`.
async fn list(target: &Target, query: &str, user: &str, whole: bool) -> anyhow::Result<Cell> {
    let started = Instant::now();
    let (mut rows, mut cursor) = (0, None::<String>);
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/api/v1/jobs?{query}&cursor={cursor}"),
            None => format!("/api/v1/jobs?{query}"),
        };
        let (status, body) = target.get(&path, user).await?;
        if status != 200 {
            return Ok(Cell { took: started.elapsed(), rows, refused: Some(status.to_string()) });
        }
        let page: PageCount = serde_json::from_slice(&body).with_context(|| format!("reading {path}"))?;
        rows += page.items.len();
        match page.next_cursor {
            Some(next) if whole => cursor = Some(next),
            _ => return Ok(Cell { took: started.elapsed(), rows, refused: None }),
        }
    }
}

/// GETs a page's data endpoint as `user`; rows are its jobs: the grid's `jobs` list, or the Gantt's
/// drawn jobs (`job_ids`) and those counted in its packed bars (`packed_counts`).
async fn page_data(target: &Target, path: &str, user: &str) -> anyhow::Result<Cell> {
    let started = Instant::now();
    let (status, body) = target.get(path, user).await?;
    let took = started.elapsed();
    if status != 200 {
        return Ok(Cell { took, rows: 0, refused: Some(status.to_string()) });
    }
    let value: serde_json::Value = serde_json::from_slice(&body).with_context(|| format!("reading {path}"))?;
    let listed = |key: &str| value[key].as_array().map_or(0, Vec::len);
    let packed: u64 =
        value["packed_counts"].as_array().map_or(0, |counts| counts.iter().filter_map(|c| c.as_u64()).sum());
    let rows = listed("jobs") + listed("job_ids") + usize::try_from(packed).unwrap_or(0);
    Ok(Cell { took, rows, refused: None })
}

fn time(at: DateTime<Utc>) -> i64 {
    at.timestamp()
}

/// The measures, in the order printed: (label, request kind).
#[derive(Debug, Clone)]
enum Measure {
    /// A jobs listing: query (without cluster), who asks, whether every page is read.
    List { query: String, user: String, whole: bool },
    /// A page's data endpoint (path without cluster), as staff.
    PageData { path: String },
}

struct Plan {
    measures: Vec<(String, Measure)>,
    /// The label of the week read whole, whose floor and sacct are compared with it.
    week_label: String,
}

fn plan(args: &ScaleBenchArgs, user: &str, widest_days: u32, now: DateTime<Utc>) -> Plan {
    let staff = args.staff.clone();
    let month_start = time(now - chrono::Duration::days(30));
    let widest_start = time(now - chrono::Duration::days(i64::from(widest_days)));
    let week_start = time(now - chrono::Duration::days(args.days));
    let end = time(now);
    let list = |query: String, user: &str, whole: bool| Measure::List { query, user: user.to_string(), whole };
    let week_label = format!("{} days read whole, staff (pages of 1000)", args.days);
    let measures = vec![
        ("first page, staff (limit 100)".into(), list("limit=100".into(), &staff, false)),
        (format!("first page, user {user} (limit 100)"), list("limit=100".into(), user, false)),
        (
            format!("first page, coordinator {} (limit 100)", args.coordinator),
            list("limit=100".into(), &args.coordinator, false),
        ),
        (
            format!("user {user}'s last 30 days read whole (pages of 1000)"),
            list(format!("start={month_start}&end={end}&limit=1000"), user, true),
        ),
        (
            "a page of FAILED jobs, 30 days, staff (limit 100)".into(),
            list(format!("state=FAILED&start={month_start}&end={end}&limit=100"), &staff, false),
        ),
        (
            format!("a page of FAILED jobs, 30 days, user {user} (limit 100)"),
            list(format!("state=FAILED&start={month_start}&end={end}&limit=100"), user, false),
        ),
        (
            format!("widest window a user may list ({widest_days} d), user {user}, first page"),
            list(format!("start={widest_start}&end={end}&limit=100"), user, false),
        ),
        (format!("start=0 as user {user}, first page"), list(format!("start=0&end={end}&limit=100"), user, false)),
        (
            "start=0 as staff, first page (limit 100)".into(),
            list(format!("start=0&end={end}&limit=100"), &staff, false),
        ),
        (week_label.clone(), list(format!("start={week_start}&end={end}&limit=1000"), &staff, true)),
        (
            format!("Gantt data, {} days (GET /web/v1/gantt)", args.days),
            Measure::PageData { path: format!("/web/v1/gantt?start={week_start}&end={end}") },
        ),
        ("grid now (GET /web/v1/grid)".into(), Measure::PageData { path: "/web/v1/grid?".into() }),
    ];
    Plan { measures, week_label }
}

async fn run_measure(target: &Target, cluster: &str, measure: &Measure, staff: &str) -> anyhow::Result<Cell> {
    match measure {
        Measure::List { query, user, whole } => list(target, &format!("cluster={cluster}&{query}"), user, *whole).await,
        Measure::PageData { path } => {
            let separator = if path.ends_with('?') { "" } else { "&" };
            page_data(target, &format!("{path}{separator}cluster={cluster}"), staff).await
        }
    }
}

/// The busiest user of the small cluster's week (read as staff) who also has a job on the big one in
/// the last 30 days.
async fn busiest_user(target: &Target, args: &ScaleBenchArgs, now: DateTime<Utc>) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct Page {
        items: Vec<Owner>,
        next_cursor: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Owner {
        user: String,
    }
    let (start, end) = (time(now - chrono::Duration::days(args.days)), time(now));
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/jobs?cluster={}&start={start}&end={end}&limit=5000", args.small);
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let (status, body) = target.get(&path, &args.staff).await?;
        if status != 200 {
            bail!("{path} answered {status}: {}", String::from_utf8_lossy(&body));
        }
        let page: Page = serde_json::from_slice(&body)?;
        for job in page.items {
            *counts.entry(job.user).or_default() += 1;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|first, second| second.1.cmp(&first.1).then_with(|| first.0.cmp(&second.0)));
    let month_start = time(now - chrono::Duration::days(30));
    for (user, _) in ranked {
        let path = format!("/api/v1/jobs?cluster={}&user={user}&start={month_start}&end={end}&limit=1", args.big);
        let (status, body) = target.get(&path, &args.staff).await?;
        if status == 200 && !serde_json::from_slice::<PageCount>(&body)?.items.is_empty() {
            return Ok(user);
        }
    }
    bail!("no user of {}'s last {} days has jobs on {}", args.small, args.days, args.big)
}

/// The SQL floor of the week read whole: the rows and columns the listing reads, in its order, in one
/// statement through the `mariadb` client, with the listing's own columns: a floor must read what the
/// listing reads, no more.
fn sql_floor(args: &ScaleBenchArgs, config: &Config, cluster: &str, start: i64, end: i64) -> anyhow::Result<Cell> {
    let url = reqwest::Url::parse(&config.slurmdbd.url).context("parsing the slurmdbd url")?;
    let database = url.path().trim_start_matches('/');
    let sql = format!(
        "SELECT {} \
         FROM `{cluster}_job_table` j LEFT JOIN `{cluster}_assoc_table` a ON a.id_assoc = j.id_assoc \
         LEFT JOIN qos_table q ON q.id = j.id_qos \
         WHERE j.deleted = 0 AND j.time_submit < {end} AND (j.time_end >= {start} OR j.time_end = 0) \
         ORDER BY j.time_submit DESC, j.time_end DESC, j.job_db_inx DESC",
        slurmlens::sources::slurmdbd::listing_columns()
    );
    let mut command = Command::new(&args.mariadb);
    command
        .env("MYSQL_PWD", url.password().unwrap_or_default())
        .args(["--batch", "--skip-column-names", "--protocol=tcp"])
        .args(["-h", url.host_str().unwrap_or("127.0.0.1"), "-P", &url.port().unwrap_or(3306).to_string()])
        .args(["-u", url.username(), database, "-e", &sql]);
    timed_lines(command, &args.mariadb)
}

/// `sacct -a -X -P` over the same window: allocations only, parsable text.
fn sacct(args: &ScaleBenchArgs, cluster: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> anyhow::Result<Cell> {
    let format = |at: DateTime<Utc>| at.format("%Y-%m-%dT%H:%M:%S").to_string();
    let mut command = Command::new(&args.sacct);
    command
        .env("TZ", "UTC")
        .args(["-a", "-X", "-P", "-n", "-M", cluster, "-S", &format(start), "-E", &format(end)])
        .args(["-o", "JobID,User,Account,Partition,State,ExitCode,Submit,Start,End,Elapsed,NodeList,AllocTRES"]);
    timed_lines(command, &args.sacct)
}

/// Runs `command` to its end: how long it took and how many lines it printed.
fn timed_lines(mut command: Command, name: &str) -> anyhow::Result<Cell> {
    let started = Instant::now();
    let output = command.output().with_context(|| format!("running {name}"))?;
    let took = started.elapsed();
    if !output.status.success() {
        bail!("{name} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok(Cell { took, rows: count_lines(&output.stdout), refused: None })
}

fn count_lines(text: &[u8]) -> usize {
    text.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()).count()
}

/// Runs `measure` `repeat` times; the median.
async fn repeated<F, Fut>(repeat: usize, mut measure: F) -> anyhow::Result<Cell>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Cell>>,
{
    let mut cells = Vec::new();
    for _ in 0..repeat.max(1) {
        cells.push(measure().await?);
    }
    Ok(median(cells))
}

/// The in-process app: the configured one, serving both clusters, trusting loopback's identity header
/// and counting `--staff` as staff.
fn local_config(config: &Config, args: &ScaleBenchArgs) -> anyhow::Result<Config> {
    let mut config = config.clone();
    for name in [&args.small, &args.big] {
        let cluster: slurmlens::domain::cluster::ClusterName = name.parse()?;
        if !config.clusters.contains(&cluster) {
            config.clusters.push(cluster);
        }
    }
    config.access.user_header = Some(USER_HEADER.into());
    config.access.trusted_proxies = vec!["127.0.0.1".to_string().try_into().map_err(anyhow::Error::msg)?];
    config.access.proxy_secret_header = None;
    if !config.access.staff_users.contains(&args.staff) {
        config.access.staff_users.push(args.staff.clone());
    }
    Ok(config)
}

/// Runs the benchmark and prints one table per target.
pub async fn run(config: &Config, args: &ScaleBenchArgs) -> anyhow::Result<()> {
    let config = local_config(config, args)?;
    let mut targets = vec![Target::Local(router(super::prepared_state(&config).await?))];
    if let Some(url) = &args.url {
        targets.push(Target::Remote { client: reqwest::Client::new(), base: url.trim_end_matches('/').to_string() });
    }
    let now = Utc::now();
    let user = match &args.user {
        Some(user) => user.clone(),
        None => busiest_user(&targets[0], args, now).await?,
    };
    let plan = plan(args, &user, config.limits.window_days.get(), now);
    let clusters = [args.small.as_str(), args.big.as_str()];
    println!(
        "bench scale: {} (small) against {} (big), {} run(s) each, medians; user {user}, coordinator {}, staff {}",
        args.small, args.big, args.repeat, args.coordinator, args.staff
    );
    for target in &targets {
        println!("\n{}", target.name());
        println!(
            "{:<62} {:>14} {:>14} {:>9} {:>16}",
            "measure",
            format!("{} ms", args.small),
            format!("{} ms", args.big),
            "big/small",
            "rows small/big"
        );
        let mut week = [Cell::default(), Cell::default()];
        for (label, measure) in &plan.measures {
            let mut cells = Vec::new();
            for cluster in clusters {
                cells.push(repeated(args.repeat, || run_measure(target, cluster, measure, &args.staff)).await?);
            }
            let ratio = ms(cells[1].took) / ms(cells[0].took).max(0.001);
            println!(
                "{:<62} {:>14} {:>14} {:>8.1}x {:>16}",
                label,
                cells[0].show(),
                cells[1].show(),
                ratio,
                format!("{}/{}", cells[0].rows, cells[1].rows)
            );
            if *label == plan.week_label {
                week = [cells[0].clone(), cells[1].clone()];
            }
        }
        let (start, end) = (now - chrono::Duration::days(args.days), now);
        let mut references: Vec<(&str, [Cell; 2])> = Vec::new();
        if args.mariadb != "none" {
            let mut cells = [Cell::default(), Cell::default()];
            for (cell, cluster) in cells.iter_mut().zip(clusters) {
                *cell = repeated(args.repeat, || async { sql_floor(args, &config, cluster, time(start), time(end)) })
                    .await?;
            }
            references.push(("SQL floor (mariadb --batch, one statement)", cells));
        }
        if args.sacct != "none" {
            let mut cells = [Cell::default(), Cell::default()];
            for (cell, cluster) in cells.iter_mut().zip(clusters) {
                *cell = sacct(args, cluster, start, end)?;
            }
            references.push(("sacct -a -X -P (once)", cells));
        }
        for (label, cells) in &references {
            println!(
                "{:<62} {:>14} {:>14} {:>8.1}x {:>16}",
                format!("{} days: {label}", args.days),
                cells[0].show(),
                cells[1].show(),
                ms(cells[1].took) / ms(cells[0].took).max(0.001),
                format!("{}/{}", cells[0].rows, cells[1].rows)
            );
        }
        for (label, cells) in &references {
            println!(
                "ratio {} days read whole / {label}: {} {:.1}x, {} {:.1}x",
                args.days,
                args.small,
                ms(week[0].took) / ms(cells[0].took).max(0.001),
                args.big,
                ms(week[1].took) / ms(cells[1].took).max(0.001)
            );
        }
    }
    Ok(())
}
