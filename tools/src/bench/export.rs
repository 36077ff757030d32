//! `slurmlens-dev bench export`: a window exported in one stream (NDJSON and CSV, through the router in
//! process) against the SQL floor (the `mariadb` client reading the same rows and columns), the
//! listing read page by page, and `sacct -X -P` / `sacct -X --json` on the same window.
//!
//! Prints times, row counts and ratios; never asserts on them.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use tower::ServiceExt;

use slurmlens::config::Config;
use slurmlens::sources::slurmdbd::LONG_SPAN_S;

use super::{BenchArgs, StaffWindow, drain_window, median, rss_kib, run_sacct, staff_window};

/// One export read to its end.
struct Drained {
    first_byte: Duration,
    total: Duration,
    rows: usize,
    bytes: usize,
    /// How far the process's peak RSS rose above its RSS before the export, KiB.
    peak_growth_kib: u64,
}

/// Resets the process's peak RSS (`VmHWM`) to its current RSS, so the next peak is this export's.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

async fn drain_export(app: &axum::Router, query: &str, format: &str) -> anyhow::Result<Drained> {
    let reset = reset_peak_rss();
    let before = rss_kib("VmRSS:").unwrap_or(0);
    let uri = format!("/api/v1/jobs/export?{query}&format={format}");
    let started = Instant::now();
    let response = app.clone().oneshot(Request::get(&uri).body(Body::empty())?).await?;
    if response.status() != StatusCode::OK {
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        bail!("{uri} answered {status}: {}", String::from_utf8_lossy(&bytes));
    }
    let mut body = response.into_body().into_data_stream();
    let (mut first_byte, mut lines, mut bytes) = (None, 0usize, 0usize);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.with_context(|| format!("{uri} ended short"))?;
        first_byte.get_or_insert_with(|| started.elapsed());
        lines += chunk.iter().filter(|&&byte| byte == b'\n').count();
        bytes += chunk.len();
    }
    let total = started.elapsed();
    let peak = rss_kib("VmHWM:").unwrap_or(0);
    // The CSV's header line is no job.
    let rows = if format == "csv" { lines.saturating_sub(1) } else { lines };
    let peak_growth_kib = if reset { peak.saturating_sub(before) } else { 0 };
    Ok(Drained { first_byte: first_byte.unwrap_or(total), total, rows, bytes, peak_growth_kib })
}

/// `mysql://user:password@host:port/database` as the `mariadb` client's arguments, and the password.
fn client_arguments(url: &str) -> anyhow::Result<(Vec<String>, String)> {
    let rest = url.strip_prefix("mysql://").or_else(|| url.strip_prefix("mariadb://")).context("a mysql:// url")?;
    let rest = rest.split('?').next().unwrap_or_default();
    let (credentials, place) = rest.rsplit_once('@').context("a user in the slurmdbd url")?;
    let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
    let (address, database) = place.split_once('/').context("a database in the slurmdbd url")?;
    let (host, port) = address.split_once(':').unwrap_or((address, "3306"));
    let arguments = ["-h", host, "-P", port, "-u", user, "-D", database].map(String::from).to_vec();
    Ok((arguments, password.to_string()))
}

/// Which order a SQL floor reads the window's rows in.
#[derive(Debug, Clone, Copy)]
enum FloorOrder {
    /// The listing's and the export's: newest submission first (`archive_purge` read backwards).
    NewestFirst,
    /// sacct's: oldest first (`archive_purge` read forwards, which InnoDB does faster).
    OldestFirst,
}

/// The SQL floor: the `mariadb` client reads the window's rows, every column the export decodes, in
/// `order`, as fast as it can print them (`--batch --quick`: no formatting, no buffering). Its index
/// range is the export's: submissions from [`LONG_SPAN_S`] before the window's start (a job spanning
/// more than that, which the export finds in the long-span catalogue, shows as a row count apart).
fn sql_floor(
    url: &str,
    cluster: &str,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    order: FloorOrder,
) -> anyhow::Result<(Duration, usize)> {
    let (arguments, password) = client_arguments(url)?;
    let direction = match order {
        FloorOrder::NewestFirst => "DESC",
        FloorOrder::OldestFirst => "ASC",
    };
    let floor = u64::try_from(start.timestamp()).unwrap_or(0).saturating_sub(LONG_SPAN_S);
    let sql = format!(
        "SELECT {} FROM {cluster}_job_table j FORCE INDEX (archive_purge) \
         LEFT JOIN {cluster}_assoc_table a ON a.id_assoc = j.id_assoc LEFT JOIN qos_table q ON q.id = j.id_qos \
         WHERE j.deleted = 0 AND j.time_submit < {} AND j.time_submit >= {floor} \
         AND (j.time_end >= {} OR j.time_end = 0) \
         ORDER BY j.time_submit {direction}, j.time_end {direction}, j.job_db_inx {direction}",
        slurmlens::sources::slurmdbd::listing_columns(),
        end.timestamp(),
        start.timestamp(),
    );
    let started = Instant::now();
    let output = std::process::Command::new("mariadb")
        .env("MYSQL_PWD", password)
        .args(&arguments)
        .args(["--batch", "--quick", "--skip-column-names", "-e", &sql])
        .output()
        .context("running the mariadb client")?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        bail!("mariadb failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok((elapsed, output.stdout.iter().filter(|&&byte| byte == b'\n').count()))
}

/// Runs the benchmark and prints a report.
pub async fn run(config: &Config, args: &BenchArgs) -> anyhow::Result<()> {
    let StaffWindow { app, start, end, query: window } = staff_window(config, args).await?;
    let repeat = args.repeat.max(1);
    // One warm-up of each, so that connection set-up and the TRES catalogue are not measured.
    drain_export(&app, &window, "ndjson").await?;
    let mut exports = Vec::new();
    for format in ["ndjson", "csv"] {
        let mut runs = Vec::new();
        for _ in 0..repeat {
            runs.push(drain_export(&app, &window, format).await?);
        }
        let (first, total) = (
            median(runs.iter().map(|run| run.first_byte).collect()),
            median(runs.iter().map(|run| run.total).collect()),
        );
        let peak = runs.iter().map(|run| run.peak_growth_kib).max().unwrap_or(0);
        let last = runs.last().context("at least one run")?;
        exports.push((format, first, total, last.rows, last.bytes, peak));
    }
    let (mut floors, mut oldest_first) = (Vec::new(), Vec::new());
    let mut floor_rows = 0;
    for _ in 0..repeat {
        let url = &config.slurmdbd.url;
        let (elapsed, rows) = sql_floor(url, &args.cluster, (start, end), FloorOrder::NewestFirst)?;
        floors.push(elapsed);
        floor_rows = rows;
        oldest_first.push(sql_floor(url, &args.cluster, (start, end), FloorOrder::OldestFirst)?.0);
    }
    let (floor, oldest_first) = (median(floors), median(oldest_first));
    let paged = format!("{window}&limit={}", args.limit);
    let warm = drain_window(&app, &paged).await?;
    let mut listing = Vec::new();
    for _ in 0..repeat {
        listing.push(drain_window(&app, &paged).await?.total);
    }
    let listing = median(listing);
    let (mut sacct_text, mut sacct_json, mut text_rows, mut json_rows) = (Vec::new(), Vec::new(), 0, 0);
    for _ in 0..args.sacct_repeat.max(1) {
        let fields = "JobID,User,Account,Partition,State,ExitCode,Submit,Start,End,Elapsed,NodeList,AllocTRES";
        let (elapsed, rows) = run_sacct(args, start, end, &["-X", "-P", "-n", "-o", fields])?;
        sacct_text.push(elapsed);
        text_rows = rows;
        let (elapsed, rows) = run_sacct(args, start, end, &["-X", "--json"])?;
        sacct_json.push(elapsed);
        json_rows = rows;
    }
    let (sacct_text, sacct_json) = (median(sacct_text), median(sacct_json));

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("{:<46} {:>10} {:>9} {:>11}", "measurement", "ms", "jobs", "first byte");
    for (format, first, total, rows, bytes, _) in &exports {
        println!(
            "{:<46} {:>10.1} {:>9} {:>8.1} ms",
            format!("export {format} ({:.1} MB)", *bytes as f64 / 1e6),
            ms(*total),
            rows,
            ms(*first)
        );
    }
    println!("{:<46} {:>10.1} {:>9}", "SQL floor, newest first (mariadb --quick)", ms(floor), floor_rows);
    println!("{:<46} {:>10.1} {:>9}", "SQL floor, oldest first as sacct", ms(oldest_first), floor_rows);
    println!(
        "{:<46} {:>10.1} {:>9}",
        format!("API listing, page by page ({} pages of {})", warm.pages, args.limit),
        ms(listing),
        warm.jobs
    );
    println!("{:<46} {:>10.1} {:>9}", "sacct -a -X -P", ms(sacct_text), text_rows);
    println!("{:<46} {:>10.1} {:>9}", "sacct -a -X --json", ms(sacct_json), json_rows);
    let ndjson = exports.first().map_or(Duration::ZERO, |export| export.2);
    let csv = exports.get(1).map_or(Duration::ZERO, |export| export.2);
    let ratio = |a: Duration, b: Duration| ms(a) / ms(b).max(0.001);
    println!("ratio export ndjson / SQL floor:        {:.2}x", ratio(ndjson, floor));
    println!("ratio export csv / SQL floor:           {:.2}x", ratio(csv, floor));
    println!("ratio API listing / export ndjson:      {:.1}x", ratio(listing, ndjson));
    println!("ratio SQL floor newest / oldest first:  {:.2}x", ratio(floor, oldest_first));
    println!("ratio sacct -X -P / SQL floor:          {:.1}x", ratio(sacct_text, floor));
    println!("ratio sacct -X -P / export ndjson:      {:.1}x", ratio(sacct_text, ndjson));
    println!("ratio sacct -X --json / export ndjson:  {:.1}x", ratio(sacct_json, ndjson));
    for (format, .., peak) in &exports {
        println!("peak RSS growth while exporting {format}: {:.1} MiB", *peak as f64 / 1024.0);
    }
    let counts = [
        ("export ndjson", exports.first().map_or(0, |export| export.3)),
        ("export csv", exports.get(1).map_or(0, |export| export.3)),
        ("SQL floor", floor_rows),
        ("API listing", warm.jobs),
        ("sacct -X -P", text_rows),
        ("sacct -X --json", json_rows),
    ];
    if counts.iter().all(|(_, rows)| *rows == counts[0].1) {
        println!("row counts agree: {}", counts[0].1);
    } else {
        let listed = counts.iter().map(|(name, rows)| format!("{name} {rows}")).collect::<Vec<_>>().join(", ");
        println!("row counts differ: {listed}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slurmdbd_url_becomes_the_clients_arguments() {
        let (arguments, password) =
            client_arguments("mysql://reader:readerpw@127.0.0.1:3306/slurm_acct_db?ssl-mode=disabled").expect("a url");
        assert_eq!(arguments, ["-h", "127.0.0.1", "-P", "3306", "-u", "reader", "-D", "slurm_acct_db"]);
        assert_eq!(password, "readerpw");
    }
}
