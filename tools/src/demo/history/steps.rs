//! The step rows of `<cluster>_step_table` each job row implies: batch, extern and srun steps with usage.

use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::context::{ClusterContext, TresIds};
use super::encoding::{hostlist, node_inx, tres_string};
use super::random::chance;
use super::rows::{JobRow, Plan, state_for_exit, step_exit};
use super::workload::{JobOutcome, Mode, UsageProfile};
use super::{HistoryParams, JS_CANCELLED, JS_COMPLETE, JS_OOM, JS_RUNNING, NO_VAL, NO_VAL64};

pub(super) struct StepRow {
    pub(super) job_db_inx: u64,
    pub(super) exit_code: i32,
    pub(super) id_step: i32,
    pub(super) kill_requid: Option<u32>,
    pub(super) nodelist: String,
    pub(super) nodes_alloc: u32,
    pub(super) node_inx: String,
    pub(super) state: u32,
    pub(super) step_name: String,
    pub(super) task_cnt: u32,
    pub(super) task_dist: i32,
    pub(super) time_start: i64,
    pub(super) time_end: i64,
    pub(super) user_sec: u64,
    pub(super) user_usec: u32,
    pub(super) sys_sec: u64,
    pub(super) sys_usec: u32,
    pub(super) act_cpufreq: f64,
    pub(super) req_cpufreq_min: u32,
    pub(super) req_cpufreq: u32,
    pub(super) req_cpufreq_gov: u32,
    pub(super) submit_line: Option<String>,
    pub(super) tres_alloc: String,
    pub(super) usage: [String; 16],
}

/// Per-task usage totals of a finished step.
#[derive(Clone, Copy, Default)]
pub(super) struct Usage {
    pub(super) cpu_ms: f64,
    pub(super) rss: f64,
    pub(super) vm: f64,
    pub(super) read: f64,
    pub(super) write: f64,
    pub(super) pages: f64,
}

pub(super) fn page_round(bytes: f64) -> u64 {
    ((bytes.max(0.0) / 4096.0).round() as u64) * 4096
}

pub(super) fn task_usage(
    rng: &mut StdRng,
    profile: UsageProfile,
    elapsed: f64,
    cpus_per_task: f64,
    mem_per_task_mb: f64,
    oom: bool,
) -> Usage {
    let gb = 1024.0 * 1024.0 * 1024.0;
    let cap = mem_per_task_mb * 1024.0 * 1024.0;
    let mut usage = match profile {
        UsageProfile::PyGpu => Usage {
            cpu_ms: elapsed * 1000.0 * rng.gen_range(0.9..3.5f64).min(cpus_per_task),
            rss: rng.gen_range(3.0..40.0) * gb,
            vm: 0.0,
            read: rng.gen_range(1e8..5e10),
            write: rng.gen_range(1e6..5e9),
            pages: rng.gen_range(0.0..2000.0),
        },
        UsageProfile::Train => Usage {
            cpu_ms: elapsed * 1000.0 * rng.gen_range(1.0..4.0f64).min(cpus_per_task),
            rss: rng.gen_range(20.0..90.0) * gb,
            vm: 0.0,
            read: elapsed * rng.gen_range(2e6..5e7),
            write: elapsed / 3600.0 * rng.gen_range(6e8..6e9),
            pages: rng.gen_range(0.0..500.0),
        },
        UsageProfile::Nccl => Usage {
            cpu_ms: elapsed * 1000.0 * rng.gen_range(0.95..1.05),
            rss: rng.gen_range(1.0..3.0) * gb,
            vm: 0.0,
            read: rng.gen_range(1e6..5e7),
            write: rng.gen_range(1e4..1e6),
            pages: rng.gen_range(0.0..20.0),
        },
        UsageProfile::CpuWork => Usage {
            cpu_ms: elapsed * 1000.0 * cpus_per_task * rng.gen_range(0.5..0.98),
            rss: rng.gen_range(0.5..30.0) * gb,
            vm: 0.0,
            read: rng.gen_range(1e8..2e11),
            write: rng.gen_range(1e7..1e11),
            pages: rng.gen_range(0.0..5000.0),
        },
        UsageProfile::Shell => Usage {
            cpu_ms: elapsed * 1000.0 * rng.gen_range(0.01..0.4),
            rss: rng.gen_range(0.05..8.0) * gb,
            vm: 0.0,
            read: rng.gen_range(1e6..1e10),
            write: rng.gen_range(1e4..1e9),
            pages: rng.gen_range(0.0..300.0),
        },
        UsageProfile::Notebook => Usage {
            cpu_ms: elapsed * 1000.0 * rng.gen_range(0.05..0.6),
            rss: rng.gen_range(1.0..30.0) * gb,
            vm: 0.0,
            read: rng.gen_range(1e7..5e10),
            write: rng.gen_range(1e5..5e9),
            pages: rng.gen_range(0.0..1000.0),
        },
    };
    if cap > 0.0 {
        usage.rss = usage.rss.min(cap * rng.gen_range(0.3..0.95));
        if oom {
            usage.rss = cap * rng.gen_range(0.985..1.0);
        }
    }
    usage.vm = match profile {
        UsageProfile::PyGpu | UsageProfile::Train | UsageProfile::Nccl | UsageProfile::Notebook => {
            usage.rss + rng.gen_range(30.0..120.0) * gb
        }
        _ => usage.rss * rng.gen_range(1.05..1.6),
    };
    usage
}

pub(super) fn light_usage(rng: &mut StdRng, elapsed: f64) -> Usage {
    let rss = rng.gen_range(2.0..14.0) * 1024.0 * 1024.0;
    Usage {
        cpu_ms: rng.gen_range(5.0..400.0) + elapsed * 0.01,
        rss,
        vm: rss * rng.gen_range(1.05..1.5),
        read: rng.gen_range(2e4..3e5),
        write: rng.gen_range(1e3..2e4),
        pages: rng.gen_range(0.0..4.0),
    }
}

/// Formats the tres_usage_* columns; the TRES id order is computed once.
pub(super) struct UsageColumns {
    /// (id, index into [cpu, mem, energy, disk, vmem, pages]) in ascending id order
    pub(super) all: Vec<(u32, usize)>,
    /// same without energy (the *_taskid columns)
    pub(super) no_energy: Vec<(u32, usize)>,
    /// [energy, disk] in id order, as (id, 0 = energy / 1 = disk)
    pub(super) out: Vec<(u32, usize)>,
    pub(super) disk: u32,
}

pub(super) fn format_tres_values(text: &mut String, order: &[(u32, usize)], vals: &[u64]) {
    text.clear();
    for (position, &(id, value_index)) in order.iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        let _ = write!(text, "{id}={}", vals[value_index]);
    }
}

impl UsageColumns {
    pub(super) fn new(tres: &TresIds) -> Self {
        let mut all =
            vec![(tres.cpu, 0), (tres.mem, 1), (tres.energy, 2), (tres.disk, 3), (tres.vmem, 4), (tres.pages, 5)];
        all.sort_unstable();
        let no_energy = all.iter().copied().filter(|entry| entry.1 != 2).collect();
        let mut out = vec![(tres.energy, 0), (tres.disk, 1)];
        out.sort_unstable();
        UsageColumns { all, no_energy, out, disk: tres.disk }
    }

    /// The 16 tres_usage_{in,out}_* columns of a step with `tasks` tasks (`tpn` per node).
    pub(super) fn build(&self, rng: &mut StdRng, usage: &Usage, tasks: u32, tasks_per_node: u32) -> [String; 16] {
        let mut columns: [String; 16] = Default::default();
        let task_factor = f64::from(tasks.max(1));
        let multi = tasks > 1;
        let mut spread = |value: f64| -> (f64, f64) {
            if multi {
                (value * (1.0 + rng.gen_range(0.0..0.12)), value * (1.0 - rng.gen_range(0.0..0.12)))
            } else {
                (value, value)
            }
        };
        let (cpu_max, cpu_min) = spread(usage.cpu_ms);
        let (rss_max, rss_min) = spread(usage.rss);
        let (read_max, read_min) = spread(usage.read);
        let (vm_max, vm_min) = spread(usage.vm);
        let (pages_max, pages_min) = spread(usage.pages);
        let (write_max, write_min) = spread(usage.write);
        let task_count = tasks.max(1);
        let mut task_id = || -> u64 { u64::from(rng.gen_range(0..task_count)) };
        let max_task = [task_id(), task_id(), 0, task_id(), task_id(), task_id()];
        let min_task = [task_id(), task_id(), 0, task_id(), task_id(), task_id()];
        let (write_max_task, write_min_task) = (task_id(), task_id());
        let tasks_per_node = u64::from(tasks_per_node.max(1));
        let node_ids = |task_ids: [u64; 6]| -> [u64; 6] { task_ids.map(|id| id / tasks_per_node) };
        let vals = |cpu: f64, rss: f64, read: f64, vm: f64, pages: f64| -> [u64; 6] {
            [cpu as u64, page_round(rss), 0, read as u64, page_round(vm), pages as u64]
        };
        format_tres_values(
            &mut columns[0],
            &self.all,
            &vals(usage.cpu_ms, usage.rss, usage.read, usage.vm, usage.pages),
        );
        format_tres_values(&mut columns[1], &self.all, &vals(cpu_max, rss_max, read_max, vm_max, pages_max));
        format_tres_values(&mut columns[2], &self.no_energy, &max_task);
        format_tres_values(&mut columns[3], &self.all, &node_ids(max_task));
        format_tres_values(&mut columns[4], &self.all, &vals(cpu_min, rss_min, read_min, vm_min, pages_min));
        format_tres_values(&mut columns[5], &self.no_energy, &min_task);
        format_tres_values(&mut columns[6], &self.all, &node_ids(min_task));
        format_tres_values(
            &mut columns[7],
            &self.all,
            &vals(
                usage.cpu_ms * task_factor,
                usage.rss * task_factor,
                usage.read * task_factor,
                usage.vm * task_factor,
                usage.pages * task_factor,
            ),
        );
        format_tres_values(&mut columns[8], &self.out, &[0, usage.write as u64]);
        format_tres_values(&mut columns[9], &self.out, &[0, write_max as u64]);
        columns[10] = format!("{}={write_max_task}", self.disk);
        format_tres_values(&mut columns[11], &self.out, &[0, write_max_task / tasks_per_node]);
        format_tres_values(&mut columns[12], &self.out, &[0, write_min as u64]);
        columns[13] = format!("{}={write_min_task}", self.disk);
        format_tres_values(&mut columns[14], &self.out, &[0, write_min_task / tasks_per_node]);
        format_tres_values(&mut columns[15], &self.out, &[0, (usage.write * task_factor) as u64]);
        columns
    }
}

pub(super) fn job_rng(seed: u64, job: &JobRow) -> StdRng {
    let seed_bits = seed
        ^ (u64::from(job.id_job)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (job.t_submit as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    StdRng::seed_from_u64(seed_bits)
}

/// Step rows of one job row.
pub(super) fn steps_for(
    params: &HistoryParams,
    context: &ClusterContext,
    plan: &Plan,
    job: &JobRow,
    inx: u64,
    out: &mut Vec<StepRow>,
) {
    if !job.started() || matches!(job.kind, JobOutcome::CancelledPending { .. } | JobOutcome::Pending { .. }) {
        return;
    }
    let tres = &context.tres;
    let mut rng = job_rng(params.seed, job);
    let usage_columns = UsageColumns::new(tres);
    let running = job.kind == JobOutcome::Running;
    let plan_end = plan.end;
    let start = job.t_start;
    let end = if running { 0 } else { job.t_end };
    let horizon = if running { plan_end } else { job.t_end };
    let node_count = job.nodes.len() as u32;
    let first = &job.nodes[..1];
    let (job_state, job_exit) = job.state_exit();
    let cpus_total = u64::from(job.cpus_per_node) * u64::from(node_count);
    let mem_total = job.mem_per_node * u64::from(node_count);
    let gpus_total = u64::from(job.gpus_per_node) * u64::from(node_count);
    let no_stats = matches!(job.kind, JobOutcome::NodeFail | JobOutcome::Requeued);
    let kill_uid = match job.kind {
        JobOutcome::Cancelled { uid } => Some(uid),
        _ => None,
    };
    let tres_of = |pairs: &mut Vec<(u32, u64)>| tres_string(pairs);
    let finish_fields = |rng: &mut StdRng, step: &mut StepRow, usage: &Usage, tasks: u32, tasks_per_node: u32| {
        let task_factor = f64::from(tasks.max(1));
        let total_cpu_s = usage.cpu_ms * task_factor / 1000.0;
        let user = total_cpu_s * rng.gen_range(0.85..0.97);
        let sys = (total_cpu_s - user).max(0.0);
        step.user_sec = user as u64;
        step.user_usec = rng.gen_range(0..1_000_000);
        step.sys_sec = sys as u64;
        step.sys_usec = rng.gen_range(0..1_000_000);
        step.act_cpufreq = f64::from(rng.gen_range(1900..3800u32));
        step.usage = usage_columns.build(rng, usage, tasks, tasks_per_node);
    };
    let blank = |id_step: i32, name: &str, nodes: &[u16]| StepRow {
        job_db_inx: inx,
        exit_code: 0,
        id_step,
        kill_requid: None,
        nodelist: hostlist(nodes, plan.width),
        nodes_alloc: nodes.len() as u32,
        node_inx: node_inx(nodes),
        state: JS_RUNNING,
        step_name: name.to_string(),
        task_cnt: 1,
        task_dist: 0,
        time_start: start,
        time_end: 0,
        user_sec: 0,
        user_usec: 0,
        sys_sec: 0,
        sys_usec: 0,
        act_cpufreq: 0.0,
        req_cpufreq_min: 0,
        req_cpufreq: 0,
        req_cpufreq_gov: 0,
        submit_line: None,
        tres_alloc: String::new(),
        usage: Default::default(),
    };
    let elapsed = (horizon - start).max(0) as f64;

    // batch step
    if job.has_batch {
        let mut step = blank(-5, "batch", first);
        let mut pairs = vec![(tres.cpu, u64::from(job.cpus_per_node)), (tres.mem, job.mem_per_node), (tres.node, 1)];
        if job.gpus_per_node > 0 {
            pairs.push((tres.gpu, u64::from(job.gpus_per_node)));
        }
        step.tres_alloc = tres_of(&mut pairs);
        if !running {
            step.time_end = end;
            let (step_start, exit) = match job.kind {
                JobOutcome::Completed => (JS_COMPLETE, 0),
                JobOutcome::Failed(_) => (state_for_exit(job_exit), job_exit),
                JobOutcome::Oom => (JS_OOM, 253),
                JobOutcome::Cancelled { .. } | JobOutcome::Timeout => (JS_CANCELLED, 15),
                JobOutcome::NodeFail | JobOutcome::Requeued => (JS_CANCELLED, 0),
                _ => (job_state, job_exit),
            };
            step.state = step_start;
            step.exit_code = exit as i32;
            if matches!(job.kind, JobOutcome::Cancelled { .. } | JobOutcome::Timeout) && chance(&mut rng, 0.5) {
                step.time_end = end + 1;
            }
            step.kill_requid = kill_uid;
            if !no_stats {
                let usage = if matches!(job.mode, Mode::BatchOnly) {
                    task_usage(
                        &mut rng,
                        job.profile,
                        elapsed,
                        f64::from(job.cpus_per_node),
                        job.mem_per_node as f64,
                        job.kind == JobOutcome::Oom,
                    )
                } else {
                    light_usage(&mut rng, elapsed)
                };
                finish_fields(&mut rng, &mut step, &usage, 1, 1);
            }
        }
        out.push(step);
    }

    // extern step
    {
        let mut step = blank(-4, "extern", &job.nodes);
        step.task_cnt = node_count;
        let mut pairs = vec![
            (tres.cpu, cpus_total),
            (tres.mem, mem_total),
            (tres.energy, NO_VAL64),
            (tres.node, u64::from(node_count)),
            (tres.billing, cpus_total),
        ];
        if gpus_total > 0 {
            pairs.push((tres.gpu, gpus_total));
        }
        step.tres_alloc = tres_of(&mut pairs);
        if !running {
            step.time_end = end;
            step.state = if no_stats { JS_CANCELLED } else { JS_COMPLETE };
            if !no_stats {
                let rss = if chance(&mut rng, 0.5) { 0.0 } else { f64::from(rng.gen_range(26..29u32)) * 4096.0 };
                let usage = Usage { cpu_ms: 0.0, rss, vm: rss, read: 6976.0, write: 1.0, pages: 0.0 };
                step.usage = usage_columns.build(&mut rng, &usage, node_count, 1);
                step.act_cpufreq = f64::from(rng.gen_range(1900..3800u32));
                step.user_usec = rng.gen_range(500..3000);
            }
        }
        out.push(step);
    }

    // srun steps
    let n_srun = match job.mode {
        Mode::Srun(n) => n,
        Mode::Interactive => 1,
        Mode::BatchOnly => 0,
    };
    if n_srun == 0 {
        return;
    }
    let tasks = match job.mode {
        Mode::Interactive => 1,
        _ => job.tasks_per_node * node_count,
    };
    let secs = (horizon - start).max(0);
    let mut step_start = start
        + if job.mode == Mode::Interactive {
            0
        } else if job.profile == UsageProfile::Train {
            rng.gen_range(5..60).min(secs)
        } else {
            rng.gen_range(0..8).min(secs)
        };
    for step_index in 0..n_srun {
        let last = step_index + 1 == n_srun;
        if step_start >= plan_end {
            break;
        }
        let step_end_nat =
            if last { horizon } else { step_start + ((horizon - step_start) as f64 * rng.gen_range(0.1..0.4)) as i64 };
        let mut step = blank(i32::from(step_index), job.template.step, &job.nodes);
        step.time_start = step_start;
        step.task_cnt = tasks;
        step.task_dist = 1;
        step.req_cpufreq_min = NO_VAL;
        step.req_cpufreq = NO_VAL;
        step.req_cpufreq_gov = NO_VAL;
        let cmd = if job.mode == Mode::Interactive {
            job.submit_line.to_string()
        } else if job.profile == UsageProfile::Train || job.profile == UsageProfile::Nccl {
            format!(
                "srun --ntasks-per-node={} --cpus-per-task={} {}",
                job.tasks_per_node,
                job.req_cpus / (node_count * job.tasks_per_node).max(1),
                job.template.cmd
            )
        } else if step_index == 0 && n_srun > 1 {
            "srun python prepare_data.py".to_string()
        } else {
            format!("srun {}", job.template.cmd)
        };
        if step_index == 0 && n_srun > 1 {
            step.step_name = "python".to_string();
        }
        step.submit_line = Some(cmd);
        let mut pairs = vec![(tres.cpu, cpus_total), (tres.mem, mem_total), (tres.node, u64::from(node_count))];
        if gpus_total > 0 {
            pairs.push((tres.gpu, gpus_total));
        }
        step.tres_alloc = tres_of(&mut pairs);
        let finished = !(running && last) && step_end_nat <= plan_end;
        if finished {
            let step_end = if last { (end - rng.gen_range(0..3)).max(step_start) } else { step_end_nat };
            step.time_end = step_end;
            let (state, exit) = if !last {
                (JS_COMPLETE, 0)
            } else {
                match job.kind {
                    JobOutcome::Completed => (JS_COMPLETE, 0),
                    JobOutcome::Failed(fail_kind) => {
                        let exit = step_exit(fail_kind);
                        (state_for_exit(exit), exit)
                    }
                    JobOutcome::Oom => (JS_OOM, 253),
                    JobOutcome::Cancelled { .. } | JobOutcome::Timeout => (JS_CANCELLED, 15),
                    JobOutcome::NodeFail | JobOutcome::Requeued => (JS_CANCELLED, 0),
                    _ => (JS_COMPLETE, 0),
                }
            };
            step.state = state;
            step.exit_code = exit as i32;
            step.kill_requid = if last { kill_uid } else { None };
            if !(last && no_stats) {
                let step_secs = (step_end - step_start) as f64;
                let cpus_per_task = f64::from(job.cpus_per_node * node_count) / f64::from(tasks.max(1));
                let mem_per_task = (job.mem_per_node * u64::from(node_count)) as f64 / f64::from(tasks.max(1));
                let usage = task_usage(
                    &mut rng,
                    job.profile,
                    step_secs,
                    cpus_per_task,
                    mem_per_task,
                    last && job.kind == JobOutcome::Oom,
                );
                let tasks_per_node = if job.mode == Mode::Interactive { 1 } else { job.tasks_per_node };
                finish_fields(&mut rng, &mut step, &usage, tasks, tasks_per_node);
            }
            step_start = step_end + rng.gen_range(1..5);
        } else {
            out.push(step);
            break;
        }
        out.push(step);
    }
}
