//! `slurmlens-dev bench memory`: the resident memory of the real `slurmlens serve` under concurrent
//! clients: `--listings` clients draining the job listing (a week, pages of 1,000) and `--reports`
//! clients asking for reports of the cluster's largest recent jobs, all at once. Prints VmRSS and
//! VmHWM (from /proc/PID/status) idle before, at the peak and idle after, against the idle server of
//! the same run; with several `--bin`, each binary in turn (one allocator against another).
//!
//! Reports are computed live (the server is started without `[database]`, so none is read from the
//! archive): the heavier case.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::Utc;
use slurmlens::config::Config;
use slurmlens_wire::{Job, Page};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Arguments of `slurmlens-dev bench memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryBenchArgs {
    /// The server binaries to measure, each in turn (default: the debug build next to this one).
    #[arg(long = "bin")]
    pub bins: Vec<PathBuf>,
    /// Cluster whose history is listed and whose jobs' reports are asked for.
    #[arg(long, default_value = "sakura")]
    pub cluster: String,
    /// Clients draining the listing at once.
    #[arg(long, default_value_t = 50)]
    pub listings: usize,
    /// Clients asking for reports at once (each of another large job).
    #[arg(long, default_value_t = 10)]
    pub reports: usize,
    /// The listing's window: the last this many days.
    #[arg(long, default_value_t = 7)]
    pub days: i64,
    /// Pages each listing client reads (0: all, the window drained).
    #[arg(long, default_value_t = 0)]
    pub pages: usize,
    /// The server's `[limits] chart_history_days`: the days of finished jobs it reads into memory at
    /// start, which the bench waits for before its reference reading (0: none).
    #[arg(long, default_value_t = 30)]
    pub chart_history_days: u32,
}

/// How long after the load the memory is read once more.
const SETTLE: Duration = Duration::from_secs(5);

/// Memory of a process, in kB as /proc says it.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss_kb: u64,
    hwm_kb: u64,
}

fn memory(pid: u32) -> anyhow::Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading /proc/PID/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse().ok())
            .with_context(|| format!("{name} in /proc/{pid}/status"))
    };
    Ok(Memory { rss_kb: field("VmRSS:")?, hwm_kb: field("VmHWM:")? })
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// Runs the load against each binary and prints its memory.
pub async fn run(config: &Config, args: &MemoryBenchArgs) -> anyhow::Result<()> {
    let vm = config.victoriametrics.as_ref().context("needs [victoriametrics] (SLURMLENS_VM_URL)")?;
    let bins = if args.bins.is_empty() {
        vec![std::env::current_exe()?.with_file_name("slurmlens")]
    } else {
        args.bins.clone()
    };
    println!(
        "{} listing clients (last {} days of {}, pages of 1000, {}) and {} report clients at once; the charts' last {} days read at start",
        args.listings,
        args.days,
        args.cluster,
        if args.pages == 0 { "drained".to_string() } else { format!("{} pages each", args.pages) },
        args.reports,
        args.chart_history_days
    );
    for bin in &bins {
        let mut command = tokio::process::Command::new(bin);
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("SLURMLENS_")) {
            command.env_remove(name);
        }
        let heavy_total = (args.listings + args.reports + 8).to_string();
        command
            .arg("serve")
            .env("SLURMLENS_LISTEN", "127.0.0.1:0")
            .env("SLURMLENS_CLUSTERS", &args.cluster)
            .env("SLURMLENS_SLURMDBD__URL", &config.slurmdbd.url)
            .env("SLURMLENS_VICTORIAMETRICS__URL", &vm.url)
            .env("SLURMLENS_VICTORIAMETRICS__TIMEOUT_MS", "120000")
            .env("SLURMLENS_ACCESS__ANONYMOUS", "staff")
            // Every client is let in: what is measured is the memory of the requests, not their refusal.
            .env("SLURMLENS_LIMITS__HEAVY_TOTAL", &heavy_total)
            .env("SLURMLENS_SLURMDBD__ACQUIRE_TIMEOUT_MS", "600000")
            .env("SLURMLENS_SLURMDBD__STATEMENT_TIMEOUT_S", "600")
            .env("SLURMLENS_REPORT__ARCHIVE_INTERVAL_S", "0")
            .env("SLURMLENS_LIMITS__CHART_HISTORY_DAYS", args.chart_history_days.to_string())
            .env("SLURMLENS_LOG", "warn,slurmlens::serve=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id().context("the server's pid")?;
        let mut lines = BufReader::new(child.stdout.take().context("piped stdout")?).lines();
        let address = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix("slurmlens serving at http://") {
                    return Ok::<_, std::io::Error>(rest.split('/').next().map(str::to_string));
                }
            }
            Ok(None)
        })
        .await
        .context("the server did not start within 120 s")??
        .context("the server printed no address")?;
        // The log is drained to its end (a full pipe would stall the server); the start-up read of
        // the charts' history is waited for.
        let mut log = BufReader::new(child.stderr.take().context("piped stderr")?).lines();
        let (history_read, history_seen) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut history_read = Some(history_read);
            while let Ok(Some(line)) = log.next_line().await {
                if line.contains("charts' history read")
                    && let Some(read) = history_read.take()
                {
                    let _ = read.send(());
                }
            }
        });
        if args.chart_history_days > 0 {
            tokio::time::timeout(Duration::from_secs(600), history_seen)
                .await
                .context("the server did not read its charts' history within 600 s")?
                .context("the server stopped before reading its charts' history")?;
        }
        let base = format!("http://{address}");
        let client = reqwest::Client::builder().timeout(Duration::from_secs(1800)).build()?;
        let jobs = large_jobs(&client, &base, &args.cluster, args.reports).await?;
        let idle = memory(pid)?;
        let started = Instant::now();
        let Answered { pages, reports, failed } = load(&client, &base, args, &jobs).await;
        let busy_s = started.elapsed().as_secs_f64();
        let peak = memory(pid)?;
        let after = memory(pid)?;
        // An allocator may give freed pages back a little later (jemalloc's decay): read again.
        tokio::time::sleep(SETTLE).await;
        let settled = memory(pid)?;
        println!("{}:", bin.display());
        println!(
            "  idle before  VmRSS {:7.1} MB  (reference)  after one listing page and the job pick",
            mb(idle.rss_kb)
        );
        println!(
            "  peak         VmHWM {:7.1} MB  {:5.2}× idle  ({pages} listing pages and {reports} reports in {busy_s:.1} s; {failed} failed)",
            mb(peak.hwm_kb),
            peak.hwm_kb as f64 / idle.rss_kb as f64
        );
        println!(
            "  idle after   VmRSS {:7.1} MB  {:5.2}× idle",
            mb(after.rss_kb),
            after.rss_kb as f64 / idle.rss_kb as f64
        );
        println!(
            "  {:>2} s later   VmRSS {:7.1} MB  {:5.2}× idle",
            SETTLE.as_secs(),
            mb(settled.rss_kb),
            settled.rss_kb as f64 / idle.rss_kb as f64
        );
        child.start_kill()?;
        child.wait().await?;
    }
    Ok(())
}

/// The `n` finished jobs with the most GPUs among those that ended 2 to 24 hours ago.
async fn large_jobs(client: &reqwest::Client, base: &str, cluster: &str, n: usize) -> anyhow::Result<Vec<u32>> {
    let now = Utc::now().timestamp();
    let (start, end) = (now - 24 * 3600, now - 2 * 3600);
    let url = format!("{base}/api/v1/jobs?cluster={cluster}&start={start}&end={end}&limit=1000");
    let page: Page<Job> = client.get(url).send().await?.error_for_status()?.json().await?;
    let mut jobs: Vec<&Job> = page.items.iter().filter(|job| job.end.is_some() && job.alloc_gpus > 0).collect();
    jobs.sort_by_key(|job| std::cmp::Reverse(job.alloc_gpus));
    if jobs.len() < n {
        bail!("{cluster} has {} finished GPU jobs in the window, {n} wanted", jobs.len());
    }
    Ok(jobs.iter().take(n).map(|job| job.job_id_raw).collect())
}

/// What the clients got.
struct Answered {
    pages: usize,
    reports: usize,
    /// Requests answered with an error (a listing client stops at its first), the first one logged.
    failed: usize,
}

/// All clients at once.
async fn load(client: &reqwest::Client, base: &str, args: &MemoryBenchArgs, jobs: &[u32]) -> Answered {
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let fail = |error: &dyn std::fmt::Display| {
        if failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
            eprintln!("first failure: {error}");
        }
    };
    let fail = &fail;
    let now = Utc::now().timestamp();
    let start = now - args.days * 86_400;
    let listings = (0..args.listings).map(|_| async move {
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut url = format!("{base}/api/v1/jobs?cluster={}&start={start}&end={now}&limit=1000", args.cluster);
            if let Some(cursor) = &cursor {
                url.push_str(&format!("&cursor={cursor}"));
            }
            let page: Page<Job> = match client.get(url).send().await.and_then(reqwest::Response::error_for_status) {
                Ok(response) => match response.json().await {
                    Ok(page) => page,
                    Err(error) => {
                        fail(&error);
                        break;
                    }
                },
                Err(error) => {
                    fail(&error);
                    break;
                }
            };
            pages += 1;
            cursor = page.next_cursor;
            if cursor.is_none() || pages == args.pages {
                break;
            }
        }
        pages
    });
    let reports = jobs.iter().map(|job_id| async move {
        let url = format!("{base}/api/v1/jobs/{job_id}/report?cluster={}", args.cluster);
        match client.get(url).send().await.and_then(reqwest::Response::error_for_status) {
            Ok(response) => usize::from(response.bytes().await.is_ok()),
            Err(error) => {
                fail(&error);
                0
            }
        }
    });
    let (pages, reports) = tokio::join!(futures::future::join_all(listings), futures::future::join_all(reports));
    Answered {
        pages: pages.into_iter().sum(),
        reports: reports.into_iter().sum(),
        failed: failed.load(std::sync::atomic::Ordering::Relaxed),
    }
}
