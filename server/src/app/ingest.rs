//! Records taken in: the Slurm plugin's job → GPU records and the collectors' trace summaries (JSON
//! batches, `nsys stats` reports, and OTLP log records mapped to the same records). Each is validated
//! here, field by field, and stored idempotently; the HTTP edge only authenticates the cluster (its
//! ingest secret) and decodes the body.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, TimeDelta, TimeZone, Utc};
use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::domain::cluster::ClusterName;
use crate::domain::gpu::{GpuAllocation, GpuRef};
use crate::domain::ids::{BadJobId, JobSelector};
use crate::domain::scope::ViewerScope;
use crate::domain::trace::{RawTraceSummary, TraceSummary, parse_nsys_csv};

/// Most records in one batch of the plugin's GPU records.
pub const MAX_RECORDS: usize = 1000;
/// Most GPUs one node can report for one job.
const MAX_GPUS_PER_RECORD: usize = 64;
/// Most records in one batch of trace summaries.
pub const MAX_TRACE_RECORDS: usize = 10_000;

/// Records that arrived in another protocol (OTLP log records), already mapped to the JSON endpoints'
/// records, each with its place `P` in the request.
pub struct MappedRecords<P> {
    pub gpu_allocations: Vec<(P, wire::GpuAllocationRecord)>,
    /// Trace records per node, in request order.
    pub traces: BTreeMap<String, Vec<(P, wire::TraceRecord)>>,
}

/// How that protocol names a refused record's field, and words a trace record's refusal.
pub struct RefusalWords<'a> {
    pub allocation_field: &'a (dyn Fn(&str) -> String + Sync),
    pub trace_reason: &'a (dyn Fn(&str) -> String + Sync),
}

/// Who sent an ingest request: the cluster whose secret it carried and, where the site gives each node
/// its own secret (`[ingest] node_secrets`), the node that secret belongs to. A node's secret speaks
/// only for records of that node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub cluster: ClusterName,
    pub node: Option<String>,
}

impl Sender {
    /// A sender with the cluster's own secret: any node of the cluster.
    pub fn cluster_wide(cluster: ClusterName) -> Self {
        Self { cluster, node: None }
    }

    /// `Err` with the reason when `node` is not one this sender may speak for.
    fn may_send_for(&self, node: &str) -> Result<(), String> {
        match &self.node {
            Some(own) if own != node => Err(format!(
                "`{node}` is not the node this secret belongs to (`{own}`): a node sends only its own records"
            )),
            _ => Ok(()),
        }
    }
}

/// One `nsys stats --format csv` report of one job, as the request describes it.
#[derive(Debug, Clone)]
pub struct NsysReport {
    pub node: String,
    pub job_id: u32,
    pub gpu: u16,
    pub pid: u32,
    /// Start of the profiled span; default: the job's start.
    pub start: Option<DateTime<Utc>>,
    /// Length of the profiled span; default: the ended job's elapsed time.
    pub duration_s: Option<u32>,
}

impl App {
    /// Validates and stores a batch of the plugin's GPU records from `sender`: the valid records are
    /// stored and each refused one is named in the receipt (one record with a skewed clock does not
    /// sink the spool's batch around it). A batch with no valid record is `Invalid`, naming the first
    /// bad field (e.g. `records[3].gpus`), and stores nothing.
    pub async fn ingest_gpu_allocations(
        &self,
        sender: &Sender,
        batch: &wire::GpuAllocationBatch,
    ) -> Result<wire::GpuAllocationReceipt, AppError> {
        if batch.records.is_empty() || batch.records.len() > MAX_RECORDS {
            return Err(AppError::invalid("records", format!("send 1 to {MAX_RECORDS} records")));
        }
        let now = Utc::now();
        let mut allocations = Vec::new();
        let mut ends = Vec::new();
        let mut rejected = Vec::new();
        for (at, record) in batch.records.iter().enumerate() {
            let field = |name: &str| format!("records[{at}].{name}");
            match validate_record(record, sender, now, &field) {
                Ok(rows) => {
                    allocations.extend(rows);
                    if record.event == wire::GpuAllocationEvent::End {
                        ends.push((record.job_id, record.at));
                    }
                }
                Err(AppError::Invalid { parameter, message }) => {
                    rejected.push(wire::GpuAllocationRejection { index: at as u64, field: parameter, reason: message });
                }
                Err(other) => return Err(other),
            }
        }
        if rejected.len() == batch.records.len() {
            let first = rejected.swap_remove(0);
            return Err(AppError::Invalid { parameter: first.field, message: first.reason });
        }
        self.store_allocations(&sender.cluster, &allocations, &ends).await?;
        let accepted = (batch.records.len() - rejected.len()) as u64;
        Ok(wire::GpuAllocationReceipt { accepted, rejected })
    }

    /// Stores validated rows idempotently, then marks the jobs whose end was reported (`(job_id, at)`) and
    /// schedules the archive of their reports.
    pub async fn store_allocations(
        &self,
        cluster: &ClusterName,
        allocations: &[GpuAllocation],
        ends: &[(u32, DateTime<Utc>)],
    ) -> Result<(), AppError> {
        let store = self.require_store()?;
        if !allocations.is_empty() {
            store.upsert_gpu_allocations(cluster, allocations).await?;
            crate::telemetry::global().ingested(crate::telemetry::Ingested::GpuRecords, allocations.len() as u64);
        }
        // Every node of a job posts its end, and a spool replay repeats them: one per job is enough
        // (the latest), and the report's archive is scheduled once per job.
        let mut latest: BTreeMap<u32, DateTime<Utc>> = BTreeMap::new();
        for (job_id, at) in ends {
            let entry = latest.entry(*job_id).or_insert(*at);
            *entry = (*entry).max(*at);
        }
        for (job_id, at) in latest {
            store.end_job(cluster, job_id, at).await?;
            super::report::schedule_archive(self.clone(), cluster.clone(), job_id);
        }
        Ok(())
    }

    /// Validates and stores mapped records like the JSON endpoints' (one ingest path per record kind):
    /// the valid ones are stored, each refused one is answered with its place and reason.
    pub async fn ingest_mapped<P: Copy + Default + Ord>(
        &self,
        sender: &Sender,
        records: MappedRecords<P>,
        words: &RefusalWords<'_>,
    ) -> Result<Vec<(P, String)>, AppError> {
        let now = Utc::now();
        let mut refused = Vec::new();
        let mut allocations = Vec::new();
        let mut ends = Vec::new();
        for (place, record) in &records.gpu_allocations {
            match validate_record(record, sender, now, words.allocation_field) {
                Ok(rows) => {
                    allocations.extend(rows);
                    if record.event == wire::GpuAllocationEvent::End {
                        ends.push((record.job_id, record.at));
                    }
                }
                Err(AppError::Invalid { parameter, message }) => {
                    refused.push((*place, format!("{parameter}: {message}")))
                }
                Err(other) => return Err(other),
            }
        }
        let cluster = &sender.cluster;
        if !allocations.is_empty() || !ends.is_empty() {
            self.store_allocations(cluster, &allocations, &ends).await?;
        }
        for (node, traces) in records.traces {
            if let Err(reason) = sender.may_send_for(&node) {
                refused.extend(traces.iter().map(|(place, _)| (*place, (words.trace_reason)(&reason))));
                continue;
            }
            let (places, traces): (Vec<P>, Vec<Result<wire::TraceRecord, String>>) =
                traces.into_iter().map(|(place, record)| (place, Ok(record))).unzip();
            let (summaries, refusals) = validate_records(traces, now);
            for refusal in refusals {
                // `index` is into `traces`, which `places` parallels.
                let place = places.get(refusal.index as usize).copied().unwrap_or_default();
                refused.push((place, (words.trace_reason)(&refusal.reason)));
            }
            if !summaries.is_empty() {
                self.store_summaries(cluster, &node, summaries, Vec::new()).await?;
            }
        }
        Ok(refused)
    }

    /// Validates and stores one node's trace records (each one, or the reason it did not decode):
    /// the valid ones in one transaction, the others named in the receipt.
    pub async fn ingest_traces(
        &self,
        sender: &Sender,
        (claimed_cluster, node): (&str, &str),
        records: Vec<Result<wire::TraceRecord, String>>,
    ) -> Result<wire::TraceReceipt, AppError> {
        check_cluster_and_node(sender, claimed_cluster, node)?;
        let cluster = &sender.cluster;
        if records.is_empty() || records.len() > MAX_TRACE_RECORDS {
            return Err(AppError::invalid("records", format!("send 1 to {MAX_TRACE_RECORDS} records")));
        }
        let (summaries, rejected) = validate_records(records, Utc::now());
        self.store_summaries(cluster, node, summaries, rejected).await
    }

    /// Stores one node's validated summaries in one transaction: the receipt of a batch.
    pub async fn store_summaries(
        &self,
        cluster: &ClusterName,
        node: &str,
        summaries: Vec<TraceSummary>,
        rejected: Vec<wire::TraceRejection>,
    ) -> Result<wire::TraceReceipt, AppError> {
        let valid = summaries.len() as u64;
        let stored = if summaries.is_empty() {
            0
        } else {
            self.require_store()?.insert_trace_summaries(cluster, node, &summaries).await?
        };
        let duplicates = valid.saturating_sub(stored);
        let telemetry = crate::telemetry::global();
        telemetry.ingested(crate::telemetry::Ingested::Traces, stored);
        telemetry.ingested(crate::telemetry::Ingested::TraceDuplicates, duplicates);
        Ok(wire::TraceReceipt { stored, duplicates, rejected })
    }

    /// Stores one `nsys stats` report of `cluster` (the request's node and cluster already checked
    /// with [`check_cluster_and_node`]; `csv` its body) as one interval per kernel,
    /// collective and call; rows that do not parse are named in the receipt.
    pub async fn ingest_nsys(
        &self,
        cluster: &ClusterName,
        report: &NsysReport,
        csv: &[u8],
    ) -> Result<wire::TraceReceipt, AppError> {
        let NsysReport { node, job_id, gpu, pid, .. } = report;
        let (job_id, gpu, pid) = (*job_id, *gpu, *pid);
        let (start, duration_s) = match (report.start, report.duration_s) {
            (Some(start), Some(duration_s)) => (start, duration_s),
            (start, duration_s) => {
                let (job_start, job_elapsed) = self.job_span(cluster, job_id).await?;
                let Some(duration_s) = duration_s.or(job_elapsed) else {
                    return Err(AppError::invalid("duration_s", "the job has not ended: send duration_s="));
                };
                (start.unwrap_or(job_start), duration_s)
            }
        };
        let start = start.duration_trunc(TimeDelta::seconds(1)).unwrap_or(start);
        let csv = std::str::from_utf8(csv).map_err(|_| AppError::invalid("body", "the CSV is not UTF-8"))?;
        let (_report, rows) = parse_nsys_csv(csv).map_err(|e| AppError::invalid("body", e))?;
        let now = Utc::now();
        let mut merged: BTreeMap<(String, String), TraceSummary> = BTreeMap::new();
        let mut rejected = Vec::new();
        for (index, row) in rows.into_iter().enumerate() {
            let summary = row.and_then(|row| {
                TraceSummary::parse(
                    &RawTraceSummary {
                        job_id: Some(job_id),
                        cgroup: None,
                        gpu,
                        pid,
                        interval_start: start,
                        interval_s: duration_s,
                        category: row.category.as_str(),
                        name: &row.name,
                        count: row.count,
                        total_ns: row.total_ns,
                        max_ns: row.max_ns,
                        bytes: 0,
                    },
                    now,
                )
            });
            match summary {
                // nsys lists an NCCL operation once per kernel variant (algorithm, protocol, type).
                Ok(summary) => match merged.entry((summary.category.as_str().to_string(), summary.name.to_string())) {
                    std::collections::btree_map::Entry::Occupied(mut entry) => entry.get_mut().absorb(&summary),
                    std::collections::btree_map::Entry::Vacant(entry) => {
                        entry.insert(summary);
                    }
                },
                Err(reason) => rejected.push(wire::TraceRejection { index: index as u64, reason }),
            }
        }
        self.store_summaries(cluster, node, merged.into_values().collect(), rejected).await
    }

    /// Stores an `nsys stats` report a signed-in person uploads for a job they may see (their own, one
    /// of an account they coordinate, any for staff), on one of the job's nodes: the path for users,
    /// who never hold the cluster's ingest secret. `report.job_id` is replaced by the job's own.
    pub async fn ingest_viewer_nsys(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        mut report: NsysReport,
        csv: &[u8],
    ) -> Result<wire::TraceReceipt, AppError> {
        if viewer.identity().is_none() {
            return Err(AppError::Unauthorized("sign in through the site to upload a report of your job".into()));
        }
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        if !record.nodes.hosts().contains(&report.node) {
            return Err(AppError::invalid(
                "node",
                format!("`{}` is not a node of job {job_id} ({})", report.node, record.nodes.hosts().join(",")),
            ));
        }
        report.job_id = record.identity.id_job;
        let cluster = reader.cluster().clone();
        self.ingest_nsys(&cluster, &report, csv).await
    }

    /// The job's start and, once it ended, its elapsed seconds, as slurmdbd recorded them. The ingest
    /// secret speaks for the whole cluster, so the lookup is not limited to a viewer.
    async fn job_span(&self, cluster: &ClusterName, job_id: u32) -> Result<(DateTime<Utc>, Option<u32>), AppError> {
        let reader = self.cluster(Some(cluster.as_str()))?;
        let selector: JobSelector =
            job_id.to_string().parse().map_err(|e: BadJobId| AppError::invalid("job_id", e.to_string()))?;
        let missing = || AppError::invalid("start", format!("job {job_id} has not started in slurmdbd: send start="));
        let Some((record, _steps)) = reader.job(&ViewerScope::Staff, selector).await? else {
            return Err(missing());
        };
        let start = crate::domain::time::epoch(record.time_start).ok_or_else(missing)?;
        let elapsed = (record.time_end > record.time_start)
            .then(|| u32::try_from(record.time_end - record.time_start).unwrap_or(u32::MAX));
        Ok((start, elapsed))
    }

    /// The GPUs the Slurm plugin recorded for a job `viewer` may see (empty without records).
    pub async fn job_gpus(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::JobGpus, AppError> {
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let job_id_raw = record.identity.id_job;
        let allocations = super::gpus::run_gpu_records(self.require_store()?, reader.cluster(), &record).await?;
        Ok(wire::JobGpus {
            cluster: reader.cluster().to_string(),
            job_id: job_id_raw,
            gpus: allocations
                .into_iter()
                .map(|allocation| wire::JobGpu {
                    node: allocation.gpu.node,
                    index: allocation.gpu.index,
                    step: allocation.step,
                    uuid: allocation.uuid,
                    cgroup_path: allocation.cgroup_path,
                    first_seen: allocation.first_seen,
                    last_seen: allocation.last_seen,
                    ended_at: allocation.ended_at,
                })
                .collect(),
        })
    }
}

/// Validates one record of `cluster` received at `now`: its rows, one per GPU, or a 400 whose parameter
/// `field` names (the JSON batch says `records[3].gpus`; the OTLP logs path names the attribute).
pub fn validate_record(
    record: &wire::GpuAllocationRecord,
    sender: &Sender,
    now: DateTime<Utc>,
    field: &dyn Fn(&str) -> String,
) -> Result<Vec<GpuAllocation>, AppError> {
    let cluster = &sender.cluster;
    if record.cluster != cluster.as_str() {
        return Err(AppError::invalid(
            &field("cluster"),
            format!("`{}` is not the cluster this secret belongs to (`{cluster}`)", record.cluster),
        ));
    }
    sender.may_send_for(&record.node).map_err(|reason| AppError::invalid(&field("node"), reason))?;
    let mut allocations = Vec::with_capacity(record.gpus.len());
    parse_allocations(record, now, field, &mut allocations)?;
    Ok(allocations)
}

/// One record → one [`GpuAllocation`] per GPU, or a 400 naming the field at fault.
fn parse_allocations(
    record: &wire::GpuAllocationRecord,
    now: DateTime<Utc>,
    field: &dyn Fn(&str) -> String,
    out: &mut Vec<GpuAllocation>,
) -> Result<(), AppError> {
    if !is_node_name(&record.node) {
        return Err(AppError::invalid(&field("node"), format!("`{}` is not a Slurm node name", record.node)));
    }
    if record.job_id == 0 {
        return Err(AppError::invalid(&field("job_id"), "job ids start at 1"));
    }
    if !is_step_name(&record.step) {
        return Err(AppError::invalid(
            &field("step"),
            format!("`{}` is not a step: `job`, `batch`, `extern`, `interactive` or a number", record.step),
        ));
    }
    let earliest = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single().unwrap_or(now);
    if record.at < earliest || record.at > now + Duration::days(1) {
        return Err(AppError::invalid(&field("at"), format!("{} is not a plausible time", record.at.to_rfc3339())));
    }
    if record.gpus.is_empty() || record.gpus.len() > MAX_GPUS_PER_RECORD {
        return Err(AppError::invalid(&field("gpus"), format!("send 1 to {MAX_GPUS_PER_RECORD} GPUs")));
    }
    if let Some(path) = &record.cgroup_path
        && !is_cgroup_path(path)
    {
        return Err(AppError::invalid(&field("cgroup_path"), "not an absolute cgroup path (at most 1024 characters)"));
    }
    let mut seen = Vec::new();
    for (at, gpu) in record.gpus.iter().enumerate() {
        if seen.contains(&gpu.index) {
            return Err(AppError::invalid(&field(&format!("gpus[{at}].index")), format!("GPU {} twice", gpu.index)));
        }
        seen.push(gpu.index);
        if let Some(uuid) = &gpu.uuid
            && !is_gpu_uuid(uuid)
        {
            return Err(AppError::invalid(&field(&format!("gpus[{at}].uuid")), format!("`{uuid}` is not a GPU UUID")));
        }
        let ended_at = (record.event == wire::GpuAllocationEvent::End).then_some(record.at);
        out.push(GpuAllocation {
            job_id: record.job_id,
            step: record.step.clone(),
            gpu: GpuRef { node: record.node.clone(), index: gpu.index },
            uuid: gpu.uuid.clone(),
            cgroup_path: record.cgroup_path.clone(),
            first_seen: record.at,
            last_seen: record.at,
            ended_at,
        });
    }
    Ok(())
}

/// A received record's fields, borrowed, for validation.
pub fn raw_summary(record: &wire::TraceRecord) -> RawTraceSummary<'_> {
    RawTraceSummary {
        job_id: record.job_id,
        cgroup: record.cgroup.as_deref(),
        gpu: record.gpu,
        pid: record.pid,
        interval_start: record.interval_start,
        interval_s: record.interval_s,
        category: &record.category,
        name: &record.name,
        count: record.count,
        total_ns: record.total_ns,
        max_ns: record.max_ns,
        bytes: record.bytes,
    }
}

/// Validates each received record (or the reason it did not decode) at `now`: the summaries to store,
/// and each refused record's index and reason. The OTLP logs path validates through here too.
pub fn validate_records(
    records: Vec<Result<wire::TraceRecord, String>>,
    now: DateTime<Utc>,
) -> (Vec<TraceSummary>, Vec<wire::TraceRejection>) {
    let mut summaries = Vec::with_capacity(records.len());
    let mut rejected = Vec::new();
    for (index, record) in records.into_iter().enumerate() {
        let parsed = record.and_then(|record: wire::TraceRecord| TraceSummary::parse(&raw_summary(&record), now));
        match parsed {
            Ok(summary) => summaries.push(summary),
            Err(reason) => rejected.push(wire::TraceRejection { index: index as u64, reason }),
        }
    }
    (summaries, rejected)
}

/// The cluster a request claims must be the one its ingest secret belongs to, and its node a Slurm node
/// name (the secret's own node, for a node's secret).
pub fn check_cluster_and_node(sender: &Sender, claimed: &str, node: &str) -> Result<(), AppError> {
    let cluster = &sender.cluster;
    if claimed != cluster.as_str() {
        return Err(AppError::invalid(
            "cluster",
            format!("`{claimed}` is not the cluster this secret belongs to (`{cluster}`)"),
        ));
    }
    if !is_node_name(node) {
        return Err(AppError::invalid("node", format!("`{node}` is not a Slurm node name")));
    }
    sender.may_send_for(node).map_err(|reason| AppError::invalid("node", reason))
}

/// Slurm node names as sites write them: letters, digits, `-`, `_`, `.`; a letter or digit first.
pub fn is_node_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_step_name(step: &str) -> bool {
    matches!(step, "job" | "batch" | "extern" | "interactive") || (step.len() <= 10 && step.parse::<u32>().is_ok())
}

/// `GPU-5c3d…` or `MIG-…` (older drivers: `MIG-GPU-…/1/0`).
fn is_gpu_uuid(uuid: &str) -> bool {
    (uuid.starts_with("GPU-") || uuid.starts_with("MIG-"))
        && uuid.len() <= 64
        && uuid.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'/'))
}

fn is_cgroup_path(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= 1024
        && !path.chars().any(char::is_control)
        && !path.split('/').any(|segment| segment == "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_slurm_names() {
        assert!(is_node_name("gpu-001.rack2_a"));
        assert!(!is_node_name("-n1"));
        assert!(!is_node_name("n1;drop"));
        assert!(!is_node_name(""));
        assert!(is_step_name("job") && is_step_name("0") && is_step_name("batch"));
        assert!(!is_step_name("-1") && !is_step_name("x"));
        assert!(is_gpu_uuid("GPU-5c3d9f2e-8a1b-4c6d-9e0f-123456789abc"));
        assert!(!is_gpu_uuid("GPU-<script>"));
        assert!(is_cgroup_path("/slurm_n1/uid_1001/job_7"));
        assert!(!is_cgroup_path("/slurm/../etc"));
        assert!(!is_cgroup_path("relative"));
    }
}
