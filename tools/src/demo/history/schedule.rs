//! The simulation: draws every submission, scales the load, plants the two failure stories and places the
//! jobs in submit order, giving the plan.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use anyhow::{Result, ensure};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::catalogue::Family;
use super::context::ClusterContext;
use super::continuation::{Rates, continue_after};
use super::encoding::hex_bitmap;
use super::events::{EVENT_KINDS, EventRow, generate_events};
use super::planted::{planted_failures, planted_repeats};
use super::random::{chance, lognormal, pick, uniform};
use super::rows::{JobRow, Plan};
use super::scheduler::{NodeBlock, Placement, Scheduler};
use super::spans::{Carry, Span, settle_span};
use super::submissions::WorkloadGenerator;
use super::workload::{
    Category, Fate, JobOutcome, Mode, Shape, Special, Submission, TimeSampler, UsageProfile, affinity, fate_for,
};
use super::{
    CPU_SLOTS, CPUS_PER_CPU_SLOT, FIRST_JOB_ID, HistoryParams, INFINITE, MEM_PER_CPU, MEM_PER_CPU_SLOT, NO_VAL,
    NODE_CPUS, NODE_MEM, PRIO_BASE, TRAIN_MEM_PER_NODE, UNLIMITED_BACKFILL,
};

/// How long a job's resources must be free for the scheduler to start it: its time limit
/// (jobs without one only start where nothing is reserved for the next 30 days).
pub(super) fn fit_time(secs: i64, limit: Option<u32>) -> i64 {
    match limit {
        Some(limit) => secs.max(i64::from(limit) * 60),
        None => secs.max(30 * 86_400),
    }
}

/// How one run of a job went, as the scheduler placed it: what [`Builder::settle`] turns into the row's
/// times, nodes and final state.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run<'a> {
    /// How the job would end on its own.
    pub(super) fate: Fate,
    /// When it became eligible (submit time plus the scheduler's latency).
    pub(super) eligible_at: i64,
    /// Where and when it starts; None when it never does.
    pub(super) placement: Option<&'a Placement>,
    /// When it ends (i64::MAX when never placed).
    pub(super) end_t: i64,
    /// Its time limit ended it.
    pub(super) timed_out: bool,
    /// A node of it went DOWN under it.
    pub(super) cut: bool,
}

pub(super) struct Builder<'a> {
    pub(super) workload: WorkloadGenerator<'a>,
    pub(super) sched: Scheduler,
    pub(super) rows: Vec<JobRow>,
    pub(super) next_id: u32,
    pub(super) heap: BinaryHeap<Reverse<(i64, u64, usize)>>,
    pub(super) requeues: Vec<Submission>,
    pub(super) requeue_ids: Vec<u32>,
    pub(super) seq: u64,
    /// Events added while scheduling (the DOWN event of the planted XID victim).
    pub(super) extra_events: Vec<EventRow>,
    pub(super) xid_victim: Option<u32>,
    pub(super) app_crash: Option<u32>,
}

impl Builder<'_> {
    pub(super) fn alloc(&mut self, count: u32) -> u32 {
        let id = self.next_id;
        self.next_id += count;
        id
    }

    /// Run time (seconds) and whether the time limit ends it.
    pub(super) fn run_time(rng: &mut StdRng, natural_secs: f64, run_fraction: f64, limit: Option<u32>) -> (i64, bool) {
        let want = (natural_secs * run_fraction).max(1.0) as i64;
        match limit {
            Some(limit) if want > i64::from(limit) * 60 => (i64::from(limit) * 60 + rng.gen_range(1..=40), true),
            _ => (want, false),
        }
    }

    pub(super) fn base_row(&self, submission: &Submission, id: u32) -> JobRow {
        let node_gpus = self.workload.params.gpus_per_node;
        let (req_nodes, req_gpus, cpus_per_node, mem_per_node, gpus_per_node) = match submission.shape {
            Shape::Gpu(gpus) => {
                let mem = submission.mem_node.unwrap_or(submission.mem_per_cpu * u64::from(submission.cpus_req));
                (1, gpus, submission.cpus_req, mem, gpus)
            }
            Shape::Cpu(_) => {
                let mem = submission.mem_node.unwrap_or(submission.mem_per_cpu * u64::from(submission.cpus_req));
                (1, 0, submission.cpus_req, mem, 0)
            }
            Shape::Whole(nodes) => {
                (nodes, nodes * node_gpus, NODE_CPUS, submission.mem_node.unwrap_or(TRAIN_MEM_PER_NODE), node_gpus)
            }
            Shape::Het(gpus) => (1, gpus, submission.cpus_req, submission.mem_node.unwrap_or(0), gpus),
        };
        let mem_req = match submission.mem_node {
            Some(mem) => mem,
            None => MEM_PER_CPU | submission.mem_per_cpu,
        };
        let req_mem = match submission.shape {
            Shape::Whole(nodes) => mem_per_node * u64::from(nodes),
            _ => mem_per_node,
        };
        JobRow {
            id_job: id,
            id_array_job: 0,
            id_array_task: NO_VAL,
            het_job_id: 0,
            het_job_offset: NO_VAL,
            array_task_str: None,
            array_max_tasks: 0,
            array_task_pending: 0,
            user_index: submission.user_index,
            qos: submission.qos,
            debug: submission.debug,
            template: submission.template.clone(),
            work_dir: submission.work_dir.clone(),
            submit_line: submission.submit_line.clone(),
            cpus_req: submission.cpus_req,
            mem_req,
            timelimit: 0,
            priority: PRIO_BASE.saturating_sub(id.saturating_sub(FIRST_JOB_ID) + 1),
            flags: 16,
            kind: JobOutcome::Pending { held: false },
            t_submit: submission.submit_time,
            t_eligible: submission.submit_time,
            t_start: 0,
            t_end: 0,
            nodes: Vec::new(),
            cpus_per_node,
            mem_per_node,
            gpus_per_node,
            req_nodes,
            req_cpus: submission.cpus_req,
            req_mem,
            req_gpus,
            mode: submission.mode,
            profile: submission.profile,
            tasks_per_node: submission.tasks_per_node,
            has_batch: submission.mode != Mode::Interactive,
            seen: submission.submit_time,
            future: None,
        }
    }

    /// Fill in times, placement and final state of a row.
    pub(super) fn settle(&self, rng: &mut StdRng, row: &mut JobRow, submission: &Submission, run: Run<'_>) {
        let Run { fate, eligible_at, placement, end_t, timed_out, cut } = run;
        let end = self.workload.end;
        let uid = self.workload.context.users[submission.user_index].uid;
        row.timelimit = match submission.limit {
            Some(limit) => limit,
            None => NO_VAL,
        };
        let Some(placement) = placement else {
            row.kind = JobOutcome::Pending { held: false };
            return;
        };
        let outcome = if cut {
            if submission.requeue { JobOutcome::Requeued } else { JobOutcome::NodeFail }
        } else if timed_out {
            JobOutcome::Timeout
        } else {
            match fate {
                Fate::Complete => JobOutcome::Completed,
                Fate::Fail(fail_kind) => JobOutcome::Failed(fail_kind),
                Fate::Cancel { by_admin } => JobOutcome::Cancelled { uid: if by_admin { 0 } else { uid } },
                Fate::Oom => JobOutcome::Oom,
            }
        };
        if placement.start >= end {
            row.kind = JobOutcome::Pending { held: false };
            // Its future draws nothing from `rng`, so the history stays the one the seed always gave: the
            // backfill flag follows the wait (a job that waited was most often backfilled).
            let mut ran = row.clone();
            ran.t_start = placement.start;
            ran.nodes = placement.nodes.clone();
            let backfill = placement.start - eligible_at > 60;
            ran.flags = if backfill { 24 } else { 20 };
            if submission.limit.is_none() {
                ran.timelimit = if backfill { UNLIMITED_BACKFILL } else { INFINITE };
            }
            ran.t_end = end_t;
            ran.kind = outcome;
            row.future = (end_t < i64::MAX).then(|| Box::new(ran));
            return;
        }
        row.t_start = placement.start;
        row.nodes = placement.nodes.clone();
        let waited = placement.start - eligible_at > 60;
        let backfill = if waited { chance(rng, 0.7) } else { chance(rng, 0.3) };
        row.flags = if backfill { 24 } else { 20 };
        if submission.limit.is_none() {
            row.timelimit = if backfill { UNLIMITED_BACKFILL } else { INFINITE };
        }
        row.seen = if row.id_array_job != 0 { placement.start } else { row.t_submit };
        if end_t > end {
            row.kind = JobOutcome::Running;
            let mut ended = row.clone();
            ended.t_end = end_t;
            ended.kind = outcome;
            row.future = Some(Box::new(ended));
            return;
        }
        row.t_end = end_t;
        row.kind = outcome;
    }

    pub(super) fn process(&mut self, rng: &mut StdRng, submission: &Submission, requeue_of: Option<u32>) {
        if let Some(special) = submission.special {
            if !self.process_special(rng, submission, special) {
                tracing::warn!(?special, "history: no place for a planted job, it runs as an ordinary one");
                let ordinary = Submission { special: None, ..submission.clone() };
                self.process(rng, &ordinary, requeue_of);
            }
            return;
        }
        if submission.array.is_some() {
            self.process_array(rng, submission);
            return;
        }
        let end = self.workload.end;
        let het = matches!(submission.shape, Shape::Het(_));
        let id = match requeue_of {
            Some(id) => id,
            None => self.alloc(if het { 2 } else { 1 }),
        };
        let uid = self.workload.context.users[submission.user_index].uid;
        let mut row = self.base_row(submission, id);
        if requeue_of.is_some() {
            row.t_eligible = submission.submit_time + 121;
        }
        if submission.held {
            row.kind = JobOutcome::Pending { held: true };
            row.t_eligible = 0;
            row.priority = 0;
            row.timelimit = submission.limit.unwrap_or(NO_VAL);
            self.rows.push(row);
            return;
        }
        let eligible_at = row.t_eligible + submission.submit_delay;
        let (secs, timed_out) = Self::run_time(rng, submission.natural_secs, submission.run_fraction, submission.limit);
        let placement =
            self.sched.place(submission.shape, submission.prod, eligible_at, fit_time(secs, submission.limit), secs);
        // user gives up waiting
        if let (Some(patience), Some(placement)) = (submission.patience, placement.as_ref())
            && placement.start - eligible_at > patience
            && eligible_at + patience < end
        {
            row.kind = JobOutcome::CancelledPending { uid };
            row.t_end = eligible_at + patience;
            row.timelimit = submission.limit.unwrap_or(NO_VAL);
            if chance(rng, 0.25) {
                row.t_start = row.t_end;
            }
            self.rows.push(row);
            return;
        }
        let (end_t, cut) = match placement.as_ref() {
            Some(placement) => match placement.cut {
                Some(cut_at) if cut_at < placement.start + secs => (cut_at, true),
                _ => (placement.start + secs, false),
            },
            None => (i64::MAX, false),
        };
        if let Some(placement) = placement.as_ref() {
            self.sched.commit(placement, end_t);
        }
        self.settle(
            rng,
            &mut row,
            submission,
            Run {
                fate: submission.fate,
                eligible_at,
                placement: placement.as_ref(),
                end_t,
                timed_out: timed_out && !cut,
                cut,
            },
        );
        if het {
            let (cpu_node, gpu_node) = placement.as_ref().and_then(|patience| patience.het_nodes).unwrap_or((0, 0));
            let gpus = row.gpus_per_node;
            let components = |row: &JobRow| {
                let mut cpu_component = row.clone();
                cpu_component.het_job_id = id;
                cpu_component.het_job_offset = 0;
                cpu_component.cpus_req = CPUS_PER_CPU_SLOT;
                cpu_component.req_cpus = CPUS_PER_CPU_SLOT;
                cpu_component.cpus_per_node = CPUS_PER_CPU_SLOT;
                cpu_component.mem_req = 16_384;
                cpu_component.mem_per_node = 16_384;
                cpu_component.req_mem = 16_384;
                cpu_component.gpus_per_node = 0;
                cpu_component.req_gpus = 0;
                cpu_component.profile = UsageProfile::CpuWork;
                cpu_component.future = None;
                let mut gpu_component = row.clone();
                gpu_component.id_job = id + 1;
                gpu_component.het_job_id = id;
                gpu_component.het_job_offset = 1;
                gpu_component.has_batch = false;
                gpu_component.gpus_per_node = gpus;
                gpu_component.future = None;
                if cpu_component.started() {
                    cpu_component.nodes = vec![cpu_node];
                    gpu_component.nodes = vec![gpu_node];
                }
                (cpu_component, gpu_component)
            };
            let (mut cpu_component, mut gpu_component) = components(&row);
            if let Some(future) = &row.future {
                let (cpu_future, gpu_future) = components(future);
                cpu_component.future = Some(Box::new(cpu_future));
                gpu_component.future = Some(Box::new(gpu_future));
            }
            self.rows.push(cpu_component);
            self.rows.push(gpu_component);
            return;
        }
        let requeued = row.kind == JobOutcome::Requeued;
        let t_cut = row.t_end;
        self.rows.push(row);
        if requeued && submission.attempt < 3 {
            let mut again = submission.clone();
            again.submit_time = t_cut;
            again.attempt += 1;
            again.natural_secs *= rng.gen_range(0.5..1.0);
            let (fate, fraction) = fate_for(rng, Category::Multi);
            again.fate = if matches!(fate, Fate::Oom) { Fate::Complete } else { fate };
            again.run_fraction = fraction;
            again.patience = None;
            self.requeues.push(again);
            self.requeue_ids.push(id);
            self.seq += 1;
            self.heap.push(Reverse((t_cut, self.seq, self.requeues.len() - 1)));
        }
    }

    /// Places a planted job at the first start (from its submit time on) where its story fits inside the
    /// last 40 h of the history, ending at least 4 h before `end` so its aftermath is visible too. The XID
    /// victim takes whole nodes, so no other job holds them while its time limit lasts: the DOWN event put
    /// on its first node (and the reboot after it) overlaps nothing else. Returns false when no start fits.
    pub(super) fn process_special(&mut self, rng: &mut StdRng, submission: &Submission, special: Special) -> bool {
        let end = self.workload.end;
        let (earliest, latest) = (end - 40 * 3600, end - 4 * 3600);
        let secs = (submission.natural_secs * submission.run_fraction).max(1.0) as i64;
        let fit_secs = fit_time(secs, submission.limit);
        let eligible_at = submission.submit_time + submission.submit_delay;
        let mut try_from = eligible_at;
        for _ in 0..200 {
            let Some(placement) = self.sched.place(submission.shape, false, try_from, fit_secs, secs) else {
                return false;
            };
            if placement.start > latest {
                return false;
            }
            try_from = placement.start.max(try_from) + 1800;
            if placement.cut.is_some() {
                continue;
            }
            match special {
                Special::XidVictim => {
                    let node = usize::from(placement.nodes[0]);
                    // Well inside the window, so telemetry seeded some hours after the history still has it.
                    let down_at = (placement.start + 2 * 3600).max(end - 30 * 3600);
                    let up_at = down_at + 4 * 3600 + rng.gen_range(0..8) * 900;
                    let clear = self.sched.blocks[node].iter().all(|block| {
                        up_at + 1800 <= block.time_start || block.time_end.saturating_add(1800) <= down_at
                    });
                    if down_at > latest
                        || down_at + 3600 > placement.start + secs
                        || up_at > placement.start + fit_secs
                        || !clear
                    {
                        continue;
                    }
                    let kind = &EVENT_KINDS[0];
                    let blocks = &mut self.sched.blocks[node];
                    let at = blocks.partition_point(|block| block.time_start < down_at);
                    blocks.insert(at, NodeBlock { time_start: down_at, time_end: up_at, kill: true });
                    self.extra_events.push(EventRow {
                        node,
                        time_start: down_at,
                        time_end: up_at,
                        reason: kind.reason,
                        uid: kind.uid,
                        state: kind.state,
                        kill: kind.kill,
                    });
                    let id = self.alloc(1);
                    let mut row = self.base_row(submission, id);
                    self.sched.commit(&placement, down_at);
                    let run = Run {
                        fate: submission.fate,
                        eligible_at,
                        placement: Some(&placement),
                        end_t: down_at,
                        timed_out: false,
                        cut: true,
                    };
                    self.settle(rng, &mut row, submission, run);
                    self.xid_victim = Some(id);
                    self.rows.push(row);
                    return true;
                }
                Special::AppCrash => {
                    let end_t = placement.start + secs;
                    if end_t < earliest || end_t > latest {
                        continue;
                    }
                    let id = self.alloc(1);
                    let mut row = self.base_row(submission, id);
                    self.sched.commit(&placement, end_t);
                    let run = Run {
                        fate: submission.fate,
                        eligible_at,
                        placement: Some(&placement),
                        end_t,
                        timed_out: false,
                        cut: false,
                    };
                    self.settle(rng, &mut row, submission, run);
                    self.app_crash = Some(id);
                    self.rows.push(row);
                    return true;
                }
            }
        }
        false
    }

    pub(super) fn process_array(&mut self, rng: &mut StdRng, submission: &Submission) {
        let Some(array) = submission.array.as_ref() else { return };
        let end = self.workload.end;
        let task_count = array.task_count;
        let array_job_id = self.alloc(task_count);
        let eligible_at = submission.submit_time + submission.submit_delay;
        let mut lanes: Vec<i64> = vec![eligible_at; array.throttle as usize];
        struct Task {
            idx: u32,
            row: JobRow,
        }
        let mut started: Vec<Task> = Vec::new();
        let mut pending: Vec<bool> = vec![false; task_count as usize];
        let mut any_pending = false;
        for (task_index, &(natural_secs, fate, run_fraction)) in array.tasks.iter().enumerate() {
            let lane = if lanes.is_empty() {
                None
            } else {
                lanes
                    .iter()
                    .enumerate()
                    .min_by_key(|(lane_index, free_at)| (**free_at, *lane_index))
                    .map(|(lane_index, _)| lane_index)
            };
            let task_start = lane.map(|lane| lanes[lane]).unwrap_or(eligible_at).max(eligible_at);
            let (secs, timed_out) = Self::run_time(rng, natural_secs, run_fraction, submission.limit);
            let placement =
                self.sched.place(submission.shape, false, task_start, fit_time(secs, submission.limit), secs);
            let (end_t, cut) = match placement.as_ref() {
                Some(placement) => match placement.cut {
                    Some(cut_at) if cut_at < placement.start + secs => (cut_at, true),
                    _ => (placement.start + secs, false),
                },
                None => (i64::MAX, false),
            };
            if let Some(placement) = placement.as_ref() {
                self.sched.commit(placement, end_t);
            }
            if let Some(lane) = lane {
                lanes[lane] = end_t;
            }
            let mut row = self.base_row(submission, array_job_id);
            row.id_array_job = array_job_id;
            row.id_array_task = task_index as u32;
            let run =
                Run { fate, eligible_at, placement: placement.as_ref(), end_t, timed_out: timed_out && !cut, cut };
            self.settle(rng, &mut row, submission, run);
            if row.started() {
                started.push(Task { idx: task_index as u32, row });
            } else {
                pending[task_index] = true;
                any_pending = true;
            }
        }
        started.sort_by_key(|task| (task.row.t_start, task.idx));
        let started_count = started.len();
        for (lane_index, mut task) in started.into_iter().enumerate() {
            task.row.id_job = if !any_pending && lane_index + 1 == started_count {
                array_job_id
            } else {
                array_job_id + 1 + lane_index as u32
            };
            task.row.priority = PRIO_BASE.saturating_sub(array_job_id.saturating_sub(FIRST_JOB_ID) + 1);
            if let Some(future) = task.row.future.as_mut() {
                future.id_job = task.row.id_job;
                future.priority = task.row.priority;
            }
            self.rows.push(task.row);
        }
        if any_pending {
            let mut meta = self.base_row(submission, array_job_id);
            meta.id_array_job = array_job_id;
            meta.array_task_str = Some(hex_bitmap(&pending));
            meta.array_max_tasks = array.throttle;
            meta.array_task_pending = pending.iter().filter(|&&is_pending| is_pending).count() as u32;
            meta.timelimit = submission.limit.unwrap_or(NO_VAL);
            meta.kind = JobOutcome::Pending { held: false };
            meta.seen = submission.submit_time.min(end);
            self.rows.push(meta);
        }
    }
}

pub(super) fn build_plan(params: &HistoryParams, context: &ClusterContext) -> Result<Plan> {
    simulate(params, context, None).map(|(plan, _)| plan)
}

/// The history's plan and, when `until` is given, the rows of the jobs submitted after its end up to
/// `until` (at the history's arrival rates), placed by the same scheduler after the history's own jobs.
/// Those rows are final: each holds its start, nodes, end and state, whatever the time now.
pub(super) fn simulate(
    params: &HistoryParams,
    context: &ClusterContext,
    until: Option<i64>,
) -> Result<(Plan, Vec<JobRow>)> {
    simulate_span(params, context, until, Span::whole()).map(|(plan, continued, _)| (plan, continued))
}

/// [`simulate`] for one span of a longer history (`params` holds the span's window, size and seed): the
/// scheduler starts from `span.carry`, ids from `span.first_id`; what runs on past the span's end comes
/// back as the next span's carry. Only the last span ends "now" (held jobs, open events, planted failures).
pub(super) fn simulate_span(
    params: &HistoryParams,
    context: &ClusterContext,
    until: Option<i64>,
    span: Span,
) -> Result<(Plan, Vec<JobRow>, Carry)> {
    let end = params.end.timestamp();
    let start = end - i64::from(params.days) * 86_400;
    ensure!(start > 0, "history would start before 1970");
    let mut rng = StdRng::seed_from_u64(params.seed);
    let node_gpus = params.gpus_per_node;
    let gpu_cpu = ((NODE_CPUS - CPU_SLOTS as u32 * CPUS_PER_CPU_SLOT) / node_gpus).clamp(1, 12);
    let gpu_mem = (NODE_MEM - CPU_SLOTS as u64 * MEM_PER_CPU_SLOT) / u64::from(node_gpus);

    // user activity x account affinity
    let mut activity: BTreeMap<&str, f64> = BTreeMap::new();
    for user in &context.users {
        if !activity.contains_key(user.user.as_str()) {
            let level = lognormal(&mut rng, 1.0, 0.8);
            activity.insert(user.user.as_str(), level);
        }
    }
    let categories = [Category::Short, Category::Array, Category::Long, Category::Multi, Category::Cpu, Category::Het];
    let weights: Vec<Vec<f64>> = categories
        .iter()
        .map(|&category| {
            context
                .users
                .iter()
                .map(|user| {
                    activity.get(user.user.as_str()).copied().unwrap_or(1.0)
                        * affinity(Family::of_account(&user.acct), category)
                        * if user.is_def { 1.0 } else { 0.3 }
                })
                .collect()
        })
        .collect();

    let workload = WorkloadGenerator { params, context, end, gpu_cpu, gpu_mem, weights };
    let mut events = generate_events(&mut rng, params, start, end, span.last);
    if let Some(carry) = &span.carry {
        carry.keep_clear(&mut events);
    }

    // ---- submissions
    let hours = (params.days as usize) * 24;
    let diurnal = TimeSampler::new(start, hours, 1.0);
    let flat = TimeSampler::new(start, hours, 0.35);
    let n_jobs = f64::from(params.n_jobs);
    let capacity = f64::from(params.n_nodes) * f64::from(node_gpus) * (end - start) as f64;
    let target = 0.76 * capacity;
    let n_het = (params.n_jobs / 10_000).clamp(2, 50);
    let n_multi = ((n_jobs * 0.035).round() as u32).max(4);
    let n_long = (n_jobs * 0.015).round() as u32;
    let n_cpu = (n_jobs * 0.09).round() as u32;
    let n_arr_tasks = (n_jobs * 0.18).round() as u32;
    let mut submissions: Vec<Submission> = Vec::new();
    let mut rows_planned: u32 = 0;
    // production multi-node runs until they fill ~52 % of the target GPU time; their submit
    // times are spread evenly (stratified) so that big runs rarely pile up
    let mut production_gpu_secs = 0.0;
    let mut n_prod = 0;
    let mut productions: Vec<Submission> = Vec::new();
    while production_gpu_secs < 0.52 * target && n_prod < n_multi / 2 {
        let submission = workload.submission(&mut rng, Category::Multi, 0, true);
        let limit_secs = f64::from(submission.limit.unwrap_or(10080)) * 60.0;
        production_gpu_secs +=
            workload.gpus_total(&submission) * (submission.natural_secs * submission.run_fraction).min(limit_secs);
        productions.push(submission);
        n_prod += 1;
    }
    let slot = (end - start) as f64 / f64::from(n_prod.max(1));
    for (index, mut submission) in productions.into_iter().enumerate() {
        submission.submit_time = start + ((index as f64 + uniform(&mut rng)) * slot) as i64;
        submissions.push(submission);
    }
    rows_planned += n_prod;
    for _ in n_prod..n_multi {
        let submit_time = flat.sample(&mut rng);
        submissions.push(workload.submission(&mut rng, Category::Multi, submit_time, false));
        rows_planned += 1;
    }
    for _ in 0..n_het {
        let submit_time = flat.sample(&mut rng);
        submissions.push(workload.submission(&mut rng, Category::Het, submit_time, false));
        rows_planned += 2;
    }
    for _ in 0..n_long {
        let submit_time = flat.sample(&mut rng);
        submissions.push(workload.submission(&mut rng, Category::Long, submit_time, false));
        rows_planned += 1;
    }
    for _ in 0..n_cpu {
        let submit_time = diurnal.sample(&mut rng);
        submissions.push(workload.submission(&mut rng, Category::Cpu, submit_time, false));
        rows_planned += 1;
    }
    let mut arr_tasks = 0;
    while arr_tasks < n_arr_tasks {
        let size = (lognormal(&mut rng, 30.0, 0.9).round() as u32).clamp(4, 500).min(n_arr_tasks - arr_tasks).max(1);
        let throttle = if chance(&mut rng, 0.3) {
            pick(&mut rng, &[(4u32, 1.0), (8, 1.0), (10, 1.0), (16, 1.0), (20, 1.0)])
        } else {
            0
        };
        let submit_time = diurnal.sample(&mut rng);
        submissions.push(workload.array_submission(&mut rng, submit_time, size, throttle));
        arr_tasks += size;
        rows_planned += size;
    }
    // two throttled arrays submitted shortly before `end`: their tail is still pending
    let before_now: &[f64] = if span.last { &[3.5 * 3600.0, 1.2 * 3600.0] } else { &[] };
    for &back in before_now {
        let size = rng.gen_range(60..=120);
        let submit_time = end - back as i64;
        let mut submission = workload.array_submission(&mut rng, submit_time, size, 4);
        if let Some(array) = submission.array.as_mut() {
            for task in &mut array.tasks {
                task.0 = task.0.max(1200.0);
            }
        }
        submission.natural_secs = submission.natural_secs.max(1200.0);
        submissions.push(submission);
    }
    // short jobs fill the rest (+0.5 % for rows that collapse into pending array meta rows)
    let n_short = (params.n_jobs.saturating_sub(rows_planned)) + params.n_jobs / 200;
    for _ in 0..n_short {
        let submit_time = diurnal.sample(&mut rng);
        submissions.push(workload.submission(&mut rng, Category::Short, submit_time, false));
    }
    // held jobs
    let held: &[f64] = if span.last { &[20.0 * 3600.0, 2.0 * 3600.0] } else { &[] };
    for &back in held {
        let submit_time = end - back as i64;
        let mut submission = workload.submission(&mut rng, Category::Long, submit_time, false);
        submission.held = true;
        submissions.push(submission);
    }

    // ---- scale the other durations so the offered load is ~78 % of GPU capacity
    let mut other_gpu_secs = 0.0;
    for submission in
        submissions.iter().filter(|submission| !submission.prod && submission.profile != UsageProfile::Nccl)
    {
        let secs = match &submission.array {
            Some(array) => array.tasks.iter().map(|task| task.0 * task.2).sum::<f64>(),
            None => submission.natural_secs * submission.run_fraction,
        };
        other_gpu_secs += workload.gpus_total(submission) * secs;
    }
    let scale =
        if other_gpu_secs > 0.0 { ((target - production_gpu_secs) / other_gpu_secs).clamp(0.25, 4.0) } else { 1.0 };
    tracing::debug!(n_prod, prod_share = production_gpu_secs / target, scale, "history: workload");
    for submission in
        submissions.iter_mut().filter(|submission| !submission.prod && submission.profile != UsageProfile::Nccl)
    {
        submission.natural_secs *= scale;
        if let Some(array) = submission.array.as_mut() {
            for task in &mut array.tasks {
                task.0 *= scale;
            }
        }
    }
    if span.last {
        submissions.extend(planted_failures(&workload, params.seed, end));
        submissions.extend(planted_repeats(&workload, params.seed, end));
    }
    for submission in &mut submissions {
        workload.finalize(&mut rng, submission);
    }
    submissions.sort_by_key(|submission| submission.submit_time);

    // ---- simulate
    let mut sched = Scheduler::new(params.n_nodes as usize, node_gpus as usize, &events);
    if let Some(carry) = span.carry {
        carry.load_into(&mut sched);
    }
    let mut builder = Builder {
        workload,
        sched,
        rows: Vec::with_capacity(params.n_jobs as usize + 1000),
        next_id: span.first_id,
        heap: BinaryHeap::new(),
        requeues: Vec::new(),
        requeue_ids: Vec::new(),
        seq: 0,
        extra_events: Vec::new(),
        xid_victim: None,
        app_crash: None,
    };
    let mut index = 0;
    let mut done: u64 = 0;
    loop {
        let next_sub = submissions.get(index).map(|submission| submission.submit_time);
        let next_rq = builder.heap.peek().map(|Reverse((submit_time, _, _))| *submit_time);
        let (now, requeue) = match (next_sub, next_rq) {
            (None, None) => break,
            (Some(next_submission), Some(next_requeue)) => {
                (next_submission.min(next_requeue), next_requeue < next_submission)
            }
            (None, Some(next_requeue)) => (next_requeue, true),
            (Some(next_submission), None) => (next_submission, false),
        };
        done += 1;
        if done.is_multiple_of(500) {
            builder.sched.prune(now);
        }
        if requeue {
            if let Some(Reverse((_, _, requeue_index))) = builder.heap.pop() {
                let submission = builder.requeues[requeue_index].clone();
                let id = builder.requeue_ids[requeue_index];
                if submission.submit_time < end {
                    builder.process(&mut rng, &submission, Some(id));
                }
            }
        } else {
            builder.process(&mut rng, &submissions[index], None);
            index += 1;
        }
    }
    let continued = match until {
        Some(until) => {
            let history_rows = builder.rows.len();
            let rates = Rates {
                start,
                end,
                seed: params.seed,
                scale,
                arrivals: vec![
                    (Category::Multi, true, f64::from(n_prod), 0.0),
                    (Category::Multi, false, f64::from(n_multi.saturating_sub(n_prod)), 0.35),
                    (Category::Long, false, f64::from(n_long), 0.35),
                    (Category::Cpu, false, f64::from(n_cpu), 1.0),
                    // Arrays are not continued: their tasks arrive as short jobs.
                    (Category::Short, false, f64::from(n_short + n_arr_tasks), 1.0),
                ],
            };
            continue_after(&mut builder, &rates, until);
            builder.rows.split_off(history_rows)
        }
        None => Vec::new(),
    };
    let carry = Carry::take_from(&mut builder.sched, end, builder.next_id);
    let mut jobs = builder.rows;
    if !span.last {
        settle_span(&mut jobs, end);
    }
    jobs.sort_by_key(|job| (job.seen, job.id_job, job.t_submit));
    events.extend(builder.extra_events);
    events.sort_by_key(|event| (event.time_start, event.node));
    let width = (params.n_nodes.to_string().len()).max(3);
    let plan = Plan { jobs, events, start, end, width, xid_victim: builder.xid_victim, app_crash: builder.app_crash };
    Ok((plan, continued, carry))
}
