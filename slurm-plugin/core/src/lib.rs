//! What slurmlens's Slurm plugins do, without the FFI: read the configuration, build the job → GPU record
//! from the job's environment, send it (or spool it), and format the report link. The `cdylib` crates
//! next to this one only translate Slurm's calls into these functions.
//!
//! Every function here fails open: errors are reported through [`Log`], never to the job.

pub mod advice;
pub mod config;
pub mod dcgm;
pub mod http;
pub mod nvidia;
pub mod spool;

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use slurmlens_wire::{AllocatedGpu, GpuAllocationBatch, GpuAllocationEvent, GpuAllocationRecord};

pub use config::PluginConfig;

include!(concat!(env!("OUT_DIR"), "/slurm_version.rs"));

/// The ingest route, below the configured `ingest_url`.
pub const INGEST_PATH: &str = "/api/v1/gpu_allocations";

/// Slurm's logger, as the host process offers it.
pub trait Log {
    fn info(&self, message: &str);
    fn error(&self, message: &str);
}

/// The line users see at submission and at the top of the job output.
pub fn link_line(config: &PluginConfig, job: &str, cluster: Option<&str>) -> Option<String> {
    config.job_link(job, cluster).map(|link| format!("slurmlens: report at {link}"))
}

/// Reads the configuration, logging why it cannot be used. A missing file is silent: the plugin is
/// installed but not configured on this host.
pub fn load_config(path: &Path, log: &dyn Log) -> Option<PluginConfig> {
    if !path.exists() {
        return None;
    }
    match PluginConfig::load(path) {
        Ok((config, warnings)) => {
            for warning in warnings {
                log.info(&format!("slurmlens: {}: {warning}", path.display()));
            }
            Some(config)
        }
        Err(e) => {
            log.error(&format!("slurmlens: configuration unusable, plugin inactive for this job: {e}"));
            None
        }
    }
}

/// One job on one node, as the prolog and epilog environment describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOnNode {
    pub job_id: u32,
    pub node: String,
    pub uid: Option<u32>,
    pub cluster: Option<String>,
    /// Slurm's global GPU indices on this node; empty for a job without GPUs here.
    pub gpus: Vec<u16>,
}

impl JobOnNode {
    /// From the prolog/epilog environment: `SLURM_JOB_ID`, `SLURMD_NODENAME`, `SLURM_JOB_UID`,
    /// `SLURM_CLUSTER_NAME` and `SLURM_JOB_GPUS` (there global, not renumbered), else
    /// `CUDA_VISIBLE_DEVICES` (also global outside the job's cgroup).
    pub fn from_env(get_env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let job_id = get_env("SLURM_JOB_ID")
            .and_then(|text| text.trim().parse::<u32>().ok())
            .ok_or("SLURM_JOB_ID is missing or not a number")?;
        let node = get_env("SLURMD_NODENAME").filter(|name| !name.is_empty()).ok_or("SLURMD_NODENAME is missing")?;
        let uid = get_env("SLURM_JOB_UID").and_then(|text| text.trim().parse().ok());
        let cluster = get_env("SLURM_CLUSTER_NAME").filter(|name| !name.is_empty());
        let gpus = match get_env("SLURM_JOB_GPUS").filter(|text| !text.trim().is_empty()) {
            Some(text) => parse_gpu_list(&text).map_err(|e| format!("job {job_id}: SLURM_JOB_GPUS: {e}"))?,
            // `NoDevFiles` or UUIDs here mean no index Slurm would print: no GPU to record.
            None => get_env("CUDA_VISIBLE_DEVICES").and_then(|text| parse_gpu_list(&text).ok()).unwrap_or_default(),
        };
        Ok(Self { job_id, node, uid, cluster, gpus })
    }

    /// The job's cgroup from the configured template (`%j` job id, `%u` uid, `%n` node, `%%`).
    pub fn cgroup_path(&self, template: &str) -> String {
        let mut out = String::new();
        let mut chars = template.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('j') => out.push_str(&self.job_id.to_string()),
                Some('u') => out.push_str(&self.uid.map(|uid| uid.to_string()).unwrap_or_default()),
                Some('n') => out.push_str(&self.node),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }
}

/// `0,1,2`, `1-2,5` (Slurm's list syntax).
fn parse_gpu_list(text: &str) -> Result<Vec<u16>, String> {
    let mut gpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let (Ok(low), Ok(high)) = (low.trim().parse::<u16>(), high.trim().parse::<u16>()) else {
            return Err(format!("`{text}` is not a GPU index list"));
        };
        if high < low || high - low > 1024 {
            return Err(format!("`{text}` is not a GPU index list"));
        }
        gpus.extend(low..=high);
    }
    gpus.sort_unstable();
    gpus.dedup();
    Ok(gpus)
}

/// What happened to a record, for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    Spooled,
    Dropped,
    /// Recording is off (no `ingest_url`) or the job has no GPU on this node.
    Skipped,
}

/// The prolog's and epilog's work: records the job's GPUs on this node (start) or its end, maintains
/// dcgm-exporter's mapping files, and delivers spooled records when the server answers. Never fails;
/// returns what happened to the record and how long it took.
pub fn on_job_event(
    event: GpuAllocationEvent,
    config_path: &Path,
    get_env: impl Fn(&str) -> Option<String>,
    log: &dyn Log,
) -> (Outcome, Duration) {
    let started = Instant::now();
    let Some(config) = load_config(config_path, log) else {
        return (Outcome::Skipped, started.elapsed());
    };
    let deadline = started + config.timeout;
    let job = match JobOnNode::from_env(get_env) {
        Ok(job) => job,
        Err(e) => {
            log.error(&format!("slurmlens: not recording this job: {e}"));
            return (Outcome::Skipped, started.elapsed());
        }
    };
    if job.gpus.is_empty() {
        return (Outcome::Skipped, started.elapsed());
    }
    if let Some(dir) = &config.dcgm_job_map_dir {
        let result = match event {
            GpuAllocationEvent::Start => dcgm::map_job(dir, &job.gpus, job.job_id),
            GpuAllocationEvent::End => dcgm::unmap_job(dir, &job.gpus, job.job_id),
        };
        if let Err(e) = result {
            log.error(&format!("slurmlens: job {}: dcgm job mapping: {e}", job.job_id));
        }
    }
    if config.ingest_url.is_empty() {
        return (Outcome::Skipped, started.elapsed());
    }
    let Some(cluster) = config.cluster.clone().or_else(|| job.cluster.clone()) else {
        log.error(&format!("slurmlens: job {}: no cluster name (set `cluster` in the configuration)", job.job_id));
        return (Outcome::Skipped, started.elapsed());
    };
    let uuids = match (event, nvidia::locate(config.nvidia_smi.as_deref())) {
        (GpuAllocationEvent::Start, Some(program)) => nvidia::uuids(&program, started + config.timeout * 2 / 5)
            .unwrap_or_else(|e| {
                log.error(&format!("slurmlens: job {}: GPU UUIDs unknown: {e}", job.job_id));
                Default::default()
            }),
        _ => Default::default(),
    };
    let record = GpuAllocationRecord {
        cluster,
        node: job.node.clone(),
        job_id: job.job_id,
        step: "job".into(),
        event,
        at: Utc::now(),
        gpus: job.gpus.iter().map(|&index| AllocatedGpu { index, uuid: uuids.get(&index).cloned() }).collect(),
        cgroup_path: config.cgroup_path.as_deref().map(|template| job.cgroup_path(template)),
    };
    let spool = spool::Spool::new(config.spool_dir.clone(), config.spool_max_bytes);
    let sender = Sender::new(&config);
    let outcome = match sender.send(std::slice::from_ref(&record), deadline) {
        spool::Delivery::Accepted => {
            if spool.has_records() {
                deliver_spool(&spool, &sender, deadline, log);
            }
            Outcome::Sent
        }
        spool::Delivery::Rejected(why) => {
            log.error(&format!("slurmlens: job {}: the server refused the record: {why}", job.job_id));
            Outcome::Dropped
        }
        spool::Delivery::Failed(why) => match spool.append(std::slice::from_ref(&record), deadline) {
            Ok(()) => {
                log.info(&format!("slurmlens: job {}: record spooled ({why})", job.job_id));
                Outcome::Spooled
            }
            Err(e) => {
                log.error(&format!("slurmlens: job {}: record lost ({why}; {e})", job.job_id));
                Outcome::Dropped
            }
        },
    };
    let took = started.elapsed();
    let event_name = match event {
        GpuAllocationEvent::Start => "start",
        GpuAllocationEvent::End => "end",
    };
    log.info(&format!(
        "slurmlens: job {} on {}: {event_name} record {} in {} us",
        job.job_id,
        job.node,
        match outcome {
            Outcome::Sent => "sent",
            Outcome::Spooled => "spooled",
            Outcome::Dropped => "dropped",
            Outcome::Skipped => "skipped",
        },
        took.as_micros()
    ));
    (outcome, took)
}

/// Delivers what the spool holds, within the deadline.
fn deliver_spool(spool: &spool::Spool, sender: &Sender, deadline: Instant, log: &dyn Log) {
    let claimed = match spool.claim(deadline) {
        Ok(claimed) => claimed,
        Err(e) => {
            log.error(&format!("slurmlens: spool: {e}"));
            return;
        }
    };
    let report = spool.deliver(&claimed, deadline, |batch| sender.send(batch, deadline));
    for note in &report.notes {
        log.error(&format!("slurmlens: spool: {note}"));
    }
    if report.delivered + report.dropped + report.kept > 0 {
        log.info(&format!(
            "slurmlens: spool: delivered {}, dropped {}, kept {}",
            report.delivered, report.dropped, report.kept
        ));
    }
}

/// Posts batches to the ingest endpoint with the cluster's secret.
struct Sender {
    endpoint: Result<http::Endpoint, String>,
    secret: Result<String, String>,
    connect_timeout: Duration,
}

impl Sender {
    fn new(config: &PluginConfig) -> Self {
        let endpoint = http::Endpoint::parse(&config.ingest_url).map_err(|e| e.0);
        let secret = match &config.secret_file {
            None => Err("no `secret_file` is configured".to_string()),
            Some(path) => std::fs::read_to_string(path)
                .map(|text| text.trim().to_string())
                .map_err(|e| format!("reading {}: {e}", path.display()))
                .and_then(
                    |secret| if secret.is_empty() { Err(format!("{} is empty", path.display())) } else { Ok(secret) },
                ),
        };
        Self { endpoint, secret, connect_timeout: config.connect_timeout }
    }

    fn send(&self, records: &[GpuAllocationRecord], deadline: Instant) -> spool::Delivery {
        let (endpoint, secret) = match (&self.endpoint, &self.secret) {
            (Ok(endpoint), Ok(secret)) => (endpoint, secret),
            (Err(e), _) | (_, Err(e)) => return spool::Delivery::Failed(e.clone()),
        };
        let body = match serde_json::to_vec(&GpuAllocationBatch { records: records.to_vec() }) {
            Ok(body) => body,
            Err(e) => return spool::Delivery::Rejected(format!("encoding: {e}")),
        };
        match endpoint.post_json(INGEST_PATH, secret, body, self.connect_timeout, deadline) {
            Ok(status) if (200..300).contains(&status) => spool::Delivery::Accepted,
            Ok(status @ (400 | 413 | 422)) => spool::Delivery::Rejected(format!("HTTP {status}")),
            Ok(status) => spool::Delivery::Failed(format!("HTTP {status}")),
            Err(e) => spool::Delivery::Failed(e.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| vars.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
    }

    #[test]
    fn reads_the_job_from_the_prolog_environment() {
        let job = JobOnNode::from_env(env(&[
            ("SLURM_JOB_ID", "35"),
            ("SLURMD_NODENAME", "n2"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURM_CLUSTER_NAME", "lab"),
            ("SLURM_JOB_GPUS", "1-2,5"),
            ("CUDA_VISIBLE_DEVICES", "0,1,2"),
        ]))
        .expect("valid environment");
        assert_eq!(job.gpus, [1, 2, 5]);
        assert_eq!(job.cgroup_path("/slurm_%n/uid_%u/job_%j%%"), "/slurm_n2/uid_1001/job_35%");
        let job = JobOnNode::from_env(env(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURMD_NODENAME", "n1"),
            ("CUDA_VISIBLE_DEVICES", "3"),
        ]))
        .expect("valid environment");
        assert_eq!(job.gpus, [3]);
        assert!(JobOnNode::from_env(env(&[("SLURMD_NODENAME", "n1")])).is_err());
        assert!(
            JobOnNode::from_env(env(&[("SLURM_JOB_ID", "7"), ("SLURMD_NODENAME", "n1"), ("SLURM_JOB_GPUS", "x")]))
                .is_err()
        );
    }

    #[test]
    fn formats_the_link_line() {
        let (config, _) = PluginConfig::parse("public_url = \"https://lens.example/\"\n").expect("valid");
        assert_eq!(
            link_line(&config, "12_3", Some("sakura")).as_deref(),
            Some("slurmlens: report at https://lens.example/jobs/12_3?cluster=sakura")
        );
        assert_eq!(link_line(&PluginConfig::default(), "1", None), None);
    }

    #[test]
    fn version_comes_from_the_headers() {
        assert_eq!(
            SLURM_VERSION_NUMBER >> 16,
            SLURM_VERSION.split('.').next().and_then(|v| v.parse().ok()).unwrap_or(0)
        );
    }
}
