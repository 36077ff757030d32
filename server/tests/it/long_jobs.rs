//! Long jobs through the recording rules (issue #16): a synthetic 12-hour job on 8 GPUs at 15 s,
//! written into the lab's VictoriaMetrics 25 days back (where nothing else lives), with the rules of
//! `slurmlens rules` (5-minute and hourly) replayed over it by the real vmalert (`lab.sh replay-rules`). Its report read through the
//! rules equals the raw PromQL over its exact window, and reads raw, saying why, where the rules lag or
//! are missing.

use std::time::{Duration, Instant};

use slurmlens::config::{AnonymousAccess, Config, VictoriaMetricsConfig};
use slurmlens::domain::exit_code::ExitCode;
use slurmlens::domain::hostlist::Hostlist;
use slurmlens::domain::ids::JobIdentity;
use slurmlens::domain::job::JobRecord;
use slurmlens::domain::state::JobState;
use slurmlens::domain::time::TimeLimit;
use slurmlens::domain::tres::{MemRequest, TresMap};
use slurmlens::sources::slurmdbd::{SlurmDbd, SlurmDbdOptions};
use slurmlens_wire::{JobReport, MetricsReads};

use crate::support::{import_series, instant_query, lab, repo_root, test_config};

const NODES: [&str; 2] = ["ljob01", "ljob02"];
const GPUS_PER_NODE: u16 = 4;
const SCRAPE_S: i64 = 15;
const HOURS: i64 = 12;
/// slurmdbd's raw state of a completed job.
const JOB_COMPLETE: u32 = 3;

/// The window: a 5-minute boundary 25 days back plus 97 s (so both edges are partial), 12 h long.
fn window() -> (i64, i64) {
    let back = chrono::Utc::now().timestamp() - 25 * 86_400;
    let start = back - back.rem_euclid(300) + 97;
    (start, start + HOURS * 3600)
}

fn config(rules: bool) -> Config {
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 30_000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.report.recording_rules = rules;
    // The 12-hour job stands for a long one: read through the rules however short.
    config.report.rules_min_window_s = 0;
    config
}

/// A sample's value: a deterministic jumble per metric, GPU and time, idle (0) about one time in eight.
fn value(metric: usize, gpu: u16, at: i64) -> f64 {
    let mut x = (at as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((metric as u64) << 40) ^ (u64::from(gpu) << 20);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    let unit = (x % 10_000) as f64 / 10_000.0;
    if x.is_multiple_of(8) { 0.0 } else { unit }
}

/// Writes every GPU metric of the catalogue for the 8 GPUs from 70 min before the window (the replay
/// starts at the whole hour before it) to 70 min after it, at 15 s off the minute (the scrape's own phase).
async fn write_samples(config: &Config, start: i64, end: i64) {
    let timestamps: Vec<i64> = (start - 4200..end + 4200).step_by(SCRAPE_S as usize).map(|t| t + 3).collect();
    let mut lines = Vec::new();
    for (metric, spec) in config.metrics.gpu_metrics.iter().enumerate() {
        // Ratios (scale 100) stay in 0–1, the rest in 0–100 (the utilisation's percent).
        let range = if spec.scale > 1.0 { 1.0 } else { 100.0 };
        for node in NODES {
            for gpu in 0..GPUS_PER_NODE {
                let values: Vec<f64> = timestamps
                    .iter()
                    .map(
                        |&t| if range == 1.0 { value(metric, gpu, t) } else { (value(metric, gpu, t) * range).round() },
                    )
                    .collect();
                lines.push(serde_json::json!({
                    "metric": {"__name__": spec.name.as_str(), "Hostname": node, "gpu": gpu.to_string(),
                               "UUID": format!("GPU-{node}-{gpu}")},
                    "values": values,
                    "timestamps": timestamps.iter().map(|t| t * 1000).collect::<Vec<_>>(),
                }));
            }
        }
    }
    import_series(lines).await;
}

/// vmalert's replay of the rules of `slurmlens rules` for the default catalogue (the lab's rules file,
/// which a unit test keeps equal to them) over `(from, to]`, into the lab's VictoriaMetrics.
fn replay_rules(from: i64, to: i64) {
    let at = |t: i64| chrono::DateTime::from_timestamp(t, 0).expect("a time").to_rfc3339();
    let output = lab()
        .command("bash")
        .arg(repo_root().join("lab/lab.sh"))
        // The VictoriaMetrics under test (the current release in the tests' second pass), not the lab's.
        .args(["replay-rules", &at(from), &at(to), lab().var("SLURMLENS_VM_URL")])
        .output()
        .expect("lab.sh runs");
    assert!(output.status.success(), "vmalert replay: {}", String::from_utf8_lossy(&output.stderr));
}

/// The number of recorded buckets of `bucket` length (`5m`, `1h`) of the job's GPUs in `(from, to]`.
async fn recorded_buckets(bucket: &str, to: i64, from: i64) -> f64 {
    let query = format!(
        r#"sum(count_over_time(slurmlens:DCGM_FI_DEV_GPU_UTIL:count{bucket}{{Hostname=~"ljob0[12]"}}[{}s]))"#,
        to - from
    );
    instant_query(lab().var("SLURMLENS_VM_URL"), &query, to).await.unwrap_or(0.0)
}

/// Deletes the recorded series of the synthetic job's GPUs that `matchers` select.
async fn delete_recorded(matchers: &str) {
    let delete = format!("{}/api/v1/admin/tsdb/delete_series", lab().var("SLURMLENS_VM_URL"));
    let matcher = format!(r#"{{__name__=~"slurmlens:.+",{matchers}}}"#);
    let response = reqwest::Client::new().post(&delete).form(&[("match[]", &matcher)]).send().await.expect("delete");
    assert!(response.status().is_success(), "delete_series: {}", response.status());
}

fn record(job_id: u32, start: i64, end: i64) -> JobRecord {
    let node_list = "ljob[01-02]".to_string();
    let tres = format!("1=64,4=2,1001={}", 2 * GPUS_PER_NODE);
    JobRecord {
        db_index: u64::from(job_id),
        identity: JobIdentity::plain(job_id),
        job_name: "pretrain".into(),
        user: "alice".into(),
        uid: 1001,
        gid: 1001,
        account: "ml".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        state: JobState::from_raw(JOB_COMPLETE),
        kill_requid: None,
        exit_code: ExitCode::from_wait_status(0),
        derived_exit_code: ExitCode::from_wait_status(0),
        time_submit: start as u64 - 60,
        time_eligible: start as u64 - 60,
        time_start: start as u64,
        time_end: end as u64,
        time_suspended: 0,
        timelimit: TimeLimit::from_raw(24 * 60),
        nodes: Hostlist::parse(&node_list).expect("hostlist"),
        node_list,
        alloc_nodes: 2,
        cpus_req: 64,
        mem_req: MemRequest::from_raw(0),
        tres_alloc: TresMap::parse(&tres).expect("tres"),
        tres_req: TresMap::parse(&tres).expect("tres"),
        comment: None,
        work_dir: "/home/alice".into(),
        submit_line: "sbatch pretrain.sh".into(),
        sluid: None,
        restarts: None,
    }
}

async fn report(config: &Config, record: &JobRecord) -> JobReport {
    let options = SlurmDbdOptions {
        url: config.slurmdbd.url.clone(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(5),
        statement_timeout_s: 10.0,
    };
    let reader = SlurmDbd::new(&options, "lab".parse().expect("cluster")).expect("reader");
    let tres = reader.tres_catalog().await.expect("TRES catalogue");
    let reporter = slurmlens::serve::reporter(config, None).expect("reporter");
    reporter.report_for(&reader, record, &tres, 120).await.expect("report")
}

/// A GPU's metric in a report: (node, gpu, metric key).
type Figure = (String, u16, String);

/// (node, gpu, metric) → (mean, max, samples) of a report.
fn figures(report: &JobReport) -> Vec<(Figure, (f64, f64, u64))> {
    let mut figures: Vec<_> = report
        .gpus
        .iter()
        .flat_map(|gpu| {
            gpu.summary.iter().map(move |s| ((gpu.node.clone(), gpu.gpu, s.metric.clone()), (s.mean, s.max, s.samples)))
        })
        .collect();
    figures.sort_by(|a, b| a.0.cmp(&b.0));
    figures
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.01 * a.abs().max(b.abs()).max(1e-9)
}

#[tokio::test]
async fn long_job_figures_from_recording_rules_equal_the_raw_window_and_fall_back_when_rules_fail() {
    let rules_config = config(true);
    let (start, end) = window();
    write_samples(&rules_config, start, end).await;
    // A failed earlier run may have left its recorded series behind.
    delete_recorded(r#"Hostname=~"ljob0[12]""#).await;
    let aligned_end = end - end.rem_euclid(300);
    // From a whole hour, as vmalert's own evaluations are aligned (a replay from elsewhere would record
    // buckets off the boundaries, which the report refuses).
    let from = start - start.rem_euclid(3600);
    replay_rules(from, aligned_end);
    // vmalert wrote through remote write: wait until every bucket of the 8 GPUs is searchable.
    let (buckets_5m, hours) = ((aligned_end - from) / 300, (aligned_end - from) / 3600);
    let deadline = Instant::now() + Duration::from_secs(60);
    while recorded_buckets("5m", aligned_end, from).await < (8 * buckets_5m) as f64
        || recorded_buckets("1h", aligned_end, from).await < (8 * hours) as f64
    {
        assert!(Instant::now() < deadline, "the replayed rules never became searchable");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let job = record(4_900_001, start, end);
    let from_rules = report(&rules_config, &job).await;
    assert_eq!(from_rules.metrics.reads, MetricsReads::RecordingRules, "{:?}", from_rules.metrics);
    assert_eq!(from_rules.gpus.len(), 8);
    // Each GPU's mean and peak against the raw PromQL over the job's exact window.
    let vm = lab().var("SLURMLENS_VM_URL");
    let window_s = end - start;
    let mut compared = 0;
    for spec in &rules_config.metrics.gpu_metrics {
        for gpu in &from_rules.gpus {
            let summary = gpu.summary.iter().find(|s| s.metric == spec.key).expect("every metric summarised");
            let selector = format!(r#"{}{{Hostname="{}",gpu="{}"}}"#, spec.name, gpu.node, gpu.gpu);
            let raw_mean = instant_query(vm, &format!("avg_over_time({selector}[{window_s}s])"), end).await;
            let raw_max = instant_query(vm, &format!("max_over_time({selector}[{window_s}s])"), end).await;
            let (raw_mean, raw_max) =
                (raw_mean.expect("raw mean") * spec.scale, raw_max.expect("raw max") * spec.scale);
            assert!(close(summary.mean, raw_mean), "{} {selector}: rules {} vs raw {raw_mean}", spec.key, summary.mean);
            assert!(close(summary.max, raw_max), "{} {selector}: rules {} vs raw {raw_max}", spec.key, summary.max);
            assert_eq!(summary.samples, (window_s / SCRAPE_S) as u64, "{selector}: every sample counted once");
            compared += 1;
        }
    }
    assert_eq!(compared, 8 * rules_config.metrics.gpu_metrics.len());
    // The whole report read raw says the same, idle time included.
    let raw = report(&config(false), &job).await;
    assert_eq!(raw.metrics.reads, MetricsReads::Raw);
    let (ours, theirs) = (figures(&from_rules), figures(&raw));
    assert_eq!(ours.len(), theirs.len());
    for ((key, a), (_, b)) in ours.iter().zip(&theirs) {
        assert!(close(a.0, b.0) && close(a.1, b.1) && a.2 == b.2, "{key:?}: rules {a:?} vs raw {b:?}");
    }
    let (rules_idle, raw_idle) = (from_rules.totals.idle_gpu_hours, raw.totals.idle_gpu_hours);
    assert!(raw_idle > 0.0 && close(rules_idle, raw_idle), "idle GPU hours: rules {rules_idle} vs raw {raw_idle}");
    let timeline = from_rules.gpus[0].series.iter().find(|s| s.metric == "gpu_util").expect("a timeline");
    assert_eq!(from_rules.metrics.step_s % 300, 0, "the timeline steps over whole recorded buckets");
    // At most the report's 120 points, one a step (never more read and merged two by two, which left
    // every other cell of a heat map blank).
    assert!((60..=120).contains(&timeline.points.len()), "{} points", timeline.points.len());
    assert!(
        timeline.points.windows(2).all(|pair| pair[1].0 - pair[0].0 == from_rules.metrics.step_s as i64),
        "a point a step of {} s: {:?}",
        from_rules.metrics.step_s,
        timeline.points
    );
    assert!(timeline.points.iter().all(|&(t, _)| t % 300 == 0), "on the rules' 5-minute boundaries");

    // A job running an hour past the replayed rules: they lag, so it is read raw, and says since when.
    let later = record(4_900_002, start, end + 3600);
    let lagging = report(&rules_config, &later).await;
    assert_eq!(lagging.metrics.reads, MetricsReads::Raw);
    let note = lagging.metrics.reads_note.clone().unwrap_or_default();
    assert!(note.contains("lagging since"), "{note}");
    assert!(!lagging.gpus.is_empty() && lagging.gpus[0].summary.iter().any(|s| s.metric == "gpu_util"));

    // One metric's hourly peak rule lost for every GPU (a site's rules file without it): raw, never a
    // peak of the other pieces alone, and never a blank one.
    delete_recorded(r#"__name__="slurmlens:DCGM_FI_DEV_GPU_TEMP:max1h",Hostname=~"ljob0[12]""#).await;
    let no_peak = report(&rules_config, &job).await;
    assert_eq!(no_peak.metrics.reads, MetricsReads::Raw, "{:?}", no_peak.metrics);
    let note = no_peak.metrics.reads_note.clone().unwrap_or_default();
    assert!(note.contains("lack parts of temperature"), "{note}");
    assert_eq!(figures(&no_peak), theirs, "read raw, the report is the raw one");

    // No hourly rules at all (a site that deployed the 5-minute group only): 5-minute buckets throughout,
    // the same figures.
    delete_recorded(r#"__name__=~"slurmlens:.+:[a-z]+1h",Hostname=~"ljob0[12]""#).await;
    let five_minutes = report(&rules_config, &job).await;
    assert_eq!(five_minutes.metrics.reads, MetricsReads::RecordingRules, "{:?}", five_minutes.metrics);
    for ((key, a), (_, b)) in figures(&five_minutes).iter().zip(&theirs) {
        assert!(close(a.0, b.0) && close(a.1, b.1) && a.2 == b.2, "{key:?}: 5-minute rules {a:?} vs raw {b:?}");
    }

    // Its 5-minute peak rule lost too: raw again.
    delete_recorded(r#"__name__="slurmlens:DCGM_FI_DEV_GPU_TEMP:max5m",Hostname=~"ljob0[12]""#).await;
    let no_peak = report(&rules_config, &job).await;
    assert_eq!(no_peak.metrics.reads, MetricsReads::Raw, "{:?}", no_peak.metrics);
    assert!(no_peak.metrics.reads_note.clone().unwrap_or_default().contains("lack parts of temperature"));

    // One GPU's recorded series lost (a replay's dropped batch): raw, not that GPU's edges alone.
    delete_recorded(r#"Hostname="ljob02",gpu="3""#).await;
    let partial = report(&rules_config, &job).await;
    assert_eq!(partial.metrics.reads, MetricsReads::Raw);
    let note = partial.metrics.reads_note.clone().unwrap_or_default();
    assert!(note.contains("missing for 1 of the job's 8 GPUs"), "{note}");
    assert_eq!(figures(&partial), theirs);

    // With the rule series deleted the report reads raw and says the rules are missing.
    delete_recorded(r#"Hostname=~"ljob0[12]""#).await;
    let missing = report(&rules_config, &job).await;
    assert_eq!(missing.metrics.reads, MetricsReads::Raw);
    let note = missing.metrics.reads_note.clone().unwrap_or_default();
    assert!(note.contains("missing"), "{note}");
    assert_eq!(figures(&missing), theirs, "read raw, the report is the raw one");
}
