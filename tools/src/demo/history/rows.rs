//! The job rows of `<cluster>_job_table` as the simulation leaves them, and the plan that holds them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::events::EventRow;
use super::workload::{FailKind, JobOutcome, JobTemplate, Mode, UsageProfile};
use super::{
    HistoryParams, HistoryStats, JS_CANCELLED, JS_COMPLETE, JS_FAILED, JS_NODE_FAIL, JS_OOM, JS_PENDING, JS_REQUEUE,
    JS_RUNNING, JS_TIMEOUT, state_name,
};

#[derive(Debug, Clone)]
pub(super) struct JobRow {
    pub(super) id_job: u32,
    pub(super) id_array_job: u32,
    pub(super) id_array_task: u32,
    pub(super) het_job_id: u32,
    pub(super) het_job_offset: u32,
    pub(super) array_task_str: Option<String>,
    pub(super) array_max_tasks: u32,
    pub(super) array_task_pending: u32,
    pub(super) user_index: usize,
    pub(super) qos: u32,
    pub(super) debug: bool,
    pub(super) template: Arc<JobTemplate>,
    pub(super) work_dir: Arc<str>,
    pub(super) submit_line: Arc<str>,
    pub(super) cpus_req: u32,
    pub(super) mem_req: u64,
    pub(super) timelimit: u32,
    pub(super) priority: u32,
    pub(super) flags: u32,
    pub(super) kind: JobOutcome,
    pub(super) t_submit: i64,
    pub(super) t_eligible: i64,
    pub(super) t_start: i64,
    pub(super) t_end: i64,
    pub(super) nodes: Vec<u16>,
    /// allocation per node
    pub(super) cpus_per_node: u32,
    pub(super) mem_per_node: u64,
    pub(super) gpus_per_node: u32,
    /// request (totals) for tres_req
    pub(super) req_nodes: u32,
    pub(super) req_cpus: u32,
    pub(super) req_mem: u64,
    pub(super) req_gpus: u32,
    pub(super) mode: Mode,
    pub(super) profile: UsageProfile,
    pub(super) tasks_per_node: u32,
    pub(super) has_batch: bool,
    /// sort key for job_db_inx (time slurmdbd first saw the row)
    pub(super) seen: i64,
    /// The row as it ends, for a row still pending or running at the history's end: where the simulation
    /// placed it and how it ends. The live continuation writes it when its time comes; the history never
    /// writes it.
    pub(super) future: Option<Box<JobRow>>,
}

impl JobRow {
    pub(super) fn started(&self) -> bool {
        !self.nodes.is_empty() && self.t_start > 0
    }

    pub(super) fn state_exit(&self) -> (u32, u32) {
        let srun = matches!(self.mode, Mode::Srun(_) | Mode::Interactive);
        match self.kind {
            JobOutcome::Pending { .. } => (JS_PENDING, 0),
            JobOutcome::Running => (JS_RUNNING, 0),
            JobOutcome::Completed => (JS_COMPLETE, 0),
            JobOutcome::Failed(fail_kind) => (JS_FAILED, job_exit(fail_kind, srun)),
            JobOutcome::Cancelled { .. } | JobOutcome::CancelledPending { .. } => (JS_CANCELLED, 0),
            JobOutcome::Timeout => (JS_TIMEOUT, 0),
            JobOutcome::Oom => (JS_OOM, 253),
            JobOutcome::NodeFail => (JS_NODE_FAIL, 1),
            JobOutcome::Requeued => (JS_REQUEUE, 0),
        }
    }
}

pub(super) fn job_exit(fail_kind: FailKind, srun: bool) -> u32 {
    match fail_kind {
        FailKind::PyErr => 256,
        FailKind::Exit2 => 512,
        FailKind::Segv => {
            if srun {
                139 << 8
            } else {
                11
            }
        }
        FailKind::NcclAbort => 134 << 8,
        FailKind::Sigkill => {
            if srun {
                137 << 8
            } else {
                9
            }
        }
    }
}

pub(super) fn step_exit(fail_kind: FailKind) -> u32 {
    match fail_kind {
        FailKind::PyErr => 256,
        FailKind::Exit2 => 512,
        FailKind::Segv => 11,
        FailKind::NcclAbort => 6,
        FailKind::Sigkill => 9,
    }
}

/// Step state for a raw exit status, as slurmdbd derives it.
pub(super) fn state_for_exit(code: u32) -> u32 {
    if code == 253 {
        JS_OOM
    } else if code & 0x7f != 0 {
        JS_CANCELLED
    } else if code != 0 {
        JS_FAILED
    } else {
        JS_COMPLETE
    }
}

pub(super) struct Plan {
    pub(super) jobs: Vec<JobRow>,
    pub(super) events: Vec<EventRow>,
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) width: usize,
    pub(super) xid_victim: Option<u32>,
    pub(super) app_crash: Option<u32>,
}

impl Plan {
    pub(super) fn stats(&self, params: &HistoryParams) -> HistoryStats {
        let mut per_state: BTreeMap<String, u64> = BTreeMap::new();
        let mut gpu_secs = 0.0;
        for job in &self.jobs {
            let (state, _) = job.state_exit();
            *per_state.entry(state_name(state).to_string()).or_default() += 1;
            if job.started() {
                let until = if job.t_end == 0 { self.end } else { job.t_end.min(self.end) };
                let from = job.t_start.max(self.start);
                if until > from {
                    gpu_secs += f64::from(job.gpus_per_node) * job.nodes.len() as f64 * (until - from) as f64;
                }
            }
        }
        HistoryStats {
            cluster: params.cluster.clone(),
            jobs: self.jobs.len() as u64,
            steps: 0,
            events: self.events.len() as u64 + 1,
            per_state,
            gpu_hours: gpu_secs / 3600.0,
            capacity_gpu_hours: f64::from(params.n_nodes)
                * f64::from(params.gpus_per_node)
                * f64::from(params.days)
                * 24.0,
            simulate_secs: 0.0,
            elapsed_secs: 0.0,
            xid_victim: self.xid_victim,
            app_crash: self.app_crash,
        }
    }
}
