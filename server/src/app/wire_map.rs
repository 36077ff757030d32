//! Domain records → wire types, computing what sacct computes (elapsed, names, TRES strings).

use slurmlens_wire as wire;

use crate::domain::ids::step_suffix;
use crate::domain::job::{JobRecord, StepRecord};
use crate::domain::state::{JobStateBase, NodeState};
use crate::domain::time::{elapsed_seconds, epoch, format_duration};
use crate::domain::tres::{TresCatalog, TresId};
use crate::sources::slurmdbd::{NodeEventRecord, NodeStatus};

/// One job row; `now` (epoch seconds) counts the elapsed time of running jobs.
pub fn job(record: &JobRecord, catalog: &TresCatalog, cluster: &str, now: u64) -> wire::Job {
    let identity = &record.identity;
    let elapsed = elapsed_seconds(record.time_start, record.time_end, record.time_suspended, now);
    // sacct reports what a job that never ran asked for: NNodes from its requested TRES, AllocCPUS its
    // requested CPUs (a pending or cancelled-while-pending job shows 1 and 1, not 0 and 0).
    let (alloc_nodes, alloc_cpus) = if record.never_ran() {
        let nodes = record.tres_req.get(TresId::NODE).and_then(|n| u32::try_from(n).ok()).unwrap_or(record.alloc_nodes);
        (nodes, u64::from(record.cpus_req))
    } else {
        (record.alloc_nodes, record.tres_alloc.get(TresId::CPU).unwrap_or(0))
    };
    wire::Job {
        job_id: identity.to_string(),
        job_id_raw: identity.id_job,
        array_job_id: (identity.id_array_job != 0).then_some(identity.id_array_job),
        array_task_id: identity.array_task().map(|(_, task)| task),
        het_job_id: identity.het_component().map(|(id, _)| id),
        het_job_offset: identity.het_component().map(|(_, offset)| offset),
        cluster: cluster.to_string(),
        job_name: record.job_name.clone(),
        user: record.user.clone(),
        uid: record.uid,
        gid: record.gid,
        account: record.account.clone(),
        partition: record.partition.clone(),
        qos: record.qos.clone(),
        state: record.state.name().to_string(),
        cancelled_by_uid: record.kill_requid,
        exit_code: record.exit_code.to_string(),
        derived_exit_code: record.derived_exit_code.to_string(),
        submit: epoch(record.time_submit).unwrap_or_default(),
        eligible: epoch(record.time_eligible),
        start: epoch(record.time_start),
        end: epoch(record.time_end),
        elapsed: format_duration(elapsed),
        elapsed_raw: elapsed,
        timelimit: record.timelimit.display(),
        timelimit_raw: record.timelimit.minutes(),
        node_list: if record.never_ran() { "None assigned".to_string() } else { record.node_list.clone() },
        alloc_nodes,
        alloc_cpus,
        alloc_gpus: catalog.gpus(&record.tres_alloc),
        alloc_tres: catalog.render(&record.tres_alloc),
        req_tres: catalog.render(&record.tres_req),
        req_mem: record.mem_req.to_string(),
        comment: record.comment.clone(),
        sluid: record.sluid.map(|sluid| sluid.to_string()),
        restarts: record.restarts,
        mean_gpu_util: None,
        mean_tensor_active: None,
        blame: matches!(record.state.base(), JobStateBase::NodeFail | JobStateBase::BootFail)
            .then_some(wire::Blame::Infrastructure),
        digest: None,
        tags: Vec::new(),
    }
}

/// One job with its steps and what it held on each node.
pub fn job_detail(
    record: &JobRecord,
    steps: &[StepRecord],
    catalog: &TresCatalog,
    cluster: &str,
    now: u64,
) -> wire::JobDetail {
    let summary = job(record, catalog, cluster, now);
    let gpus = summary.alloc_gpus;
    let hosts = record.nodes.hosts();
    // slurmdbd keeps only the job's total; it splits exactly on one node, or evenly when divisible
    // (`--gres=gpu:N` is per node). GPU indices come from the plugin's records, not from here.
    let nodes = hosts
        .iter()
        .map(|host| {
            let per_node = slurmlens_slurm::gpus::exact_gpus_per_node(gpus, hosts.len());
            let source = match (per_node, hosts.len()) {
                (Some(_), 1) => wire::GpusSource::SingleNode,
                (Some(_), _) => wire::GpusSource::EvenSplit,
                (None, _) => wire::GpusSource::Unknown,
            };
            let gpus = per_node;
            wire::NodeAllocation { node: host.clone(), gpus, gpus_source: source }
        })
        .collect();
    let steps = steps
        .iter()
        .map(|step| {
            let elapsed = elapsed_seconds(step.time_start, step.time_end, step.time_suspended, now);
            wire::Step {
                job_id: format!("{}.{}", summary.job_id, step_suffix(step.id_step)),
                step_name: step.step_name.clone(),
                state: step.state.name().to_string(),
                exit_code: step.exit_code.to_string(),
                start: epoch(step.time_start),
                end: epoch(step.time_end),
                elapsed: format_duration(elapsed),
                elapsed_raw: elapsed,
                node_list: step.node_list.clone(),
                ntasks: step.task_count,
                alloc_tres: catalog.render(&step.tres_alloc),
                max_rss_bytes: step.tres_usage_in_max.get(TresId::MEM),
                total_cpu_s: step.cpu_seconds,
            }
        })
        .collect();
    wire::JobDetail {
        job: summary,
        work_dir: record.work_dir.clone(),
        submit_line: record.submit_line.clone(),
        nodes,
        steps,
    }
}

pub fn node(status: &NodeStatus) -> wire::Node {
    wire::Node {
        node: status.node.clone(),
        state: status.state.clone(),
        reason: status.reason.clone(),
        reason_since: epoch(status.reason_since),
        running_jobs: status.running_jobs,
        alloc_gpus: status.alloc_gpus,
    }
}

pub fn node_event(event: &NodeEventRecord) -> wire::NodeEvent {
    wire::NodeEvent {
        node: event.node.clone(),
        state: NodeState::from_raw(event.state).name(),
        reason: event.reason.clone(),
        reason_uid: event.reason_uid,
        start: epoch(event.time_start).unwrap_or_default(),
        end: epoch(event.time_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::tres::TresKind;

    /// A page of the job listing, pinned: `Page<Job>` is what every API client and the pages read.
    #[test]
    fn a_page_of_jobs_has_sacct_shaped_rows() {
        let record = crate::app::report::fixtures::failed_job();
        let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
        let catalog = TresCatalog::new([kind(1, "cpu", ""), kind(4, "node", ""), kind(1001, "gres", "gpu")]);
        let now = record.time_end + 60;
        let page = wire::Page {
            items: vec![job(&record, &catalog, "lab", now)],
            next_cursor: Some("1795946340.1".into()),
            total: None,
            offset: None,
            archiving: None,
        };
        insta::assert_json_snapshot!(page);
    }
}
