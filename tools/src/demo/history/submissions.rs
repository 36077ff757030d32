//! Draws submissions: who submits what, how big, how long, with which limits and submit line.

use std::fmt::Write as _;
use std::sync::Arc;

use rand::Rng;
use rand::rngs::StdRng;

use super::catalogue::{Family, job_template};
use super::context::ClusterContext;
use super::encoding::{format_time_limit, nice_limit_at_least};
use super::random::{chance, lognormal, pick, uniform};
use super::workload::{ArraySpec, Category, Fate, Mode, Shape, Submission, UsageProfile, fate_for};
use super::{CPUS_PER_CPU_SLOT, DEF_MEM_PER_CPU, HistoryParams, MEM_PER_CPU_SLOT, TRAIN_MEM_PER_NODE};

pub(super) struct WorkloadGenerator<'a> {
    pub(super) params: &'a HistoryParams,
    pub(super) context: &'a ClusterContext,
    pub(super) end: i64,
    pub(super) gpu_cpu: u32,
    pub(super) gpu_mem: u64,
    pub(super) weights: Vec<Vec<f64>>,
}

impl WorkloadGenerator<'_> {
    pub(super) fn pick_user(&self, rng: &mut StdRng, category: Category) -> usize {
        let weights = &self.weights[category as usize];
        let total: f64 = weights.iter().sum();
        let mut target = uniform(rng) * total;
        for (index, weight) in weights.iter().enumerate() {
            if target < *weight {
                return index;
            }
            target -= weight;
        }
        weights.len() - 1
    }

    pub(super) fn qos_for(
        &self,
        rng: &mut StdRng,
        category: Category,
        debug: bool,
        user_index: usize,
        nodes: u32,
    ) -> u32 {
        let context = self.context;
        if debug && let Some(qos) = context.qos_debug {
            return qos;
        }
        if category == Category::Multi
            && nodes >= 8
            && Family::of_account(&context.users[user_index].acct) == Family::Llm
            && let Some(qos) = context.qos_high
            && chance(rng, 0.7)
        {
            return qos;
        }
        if (category == Category::Cpu || category == Category::Array)
            && let Some(qos) = context.qos_low
            && chance(rng, 0.3)
        {
            return qos;
        }
        context.qos_normal
    }

    /// One submission (job, array or het job) of `category` submitted at `submit_time`.
    pub(super) fn submission(&self, rng: &mut StdRng, category: Category, submit_time: i64, prod: bool) -> Submission {
        let user_index = self.pick_user(rng, category);
        let family = Family::of_account(&self.context.users[user_index].acct);
        let node_gpus = self.params.gpus_per_node;
        let mut interactive = false;
        let mut jupyter = false;
        let mut network_check = false;
        let mut debug = false;
        let shape;
        let natural_secs;
        let mode;
        let profile;
        let mut tasks_per_node = 1;
        let cpus_req;
        let mut mem_node: Option<u64> = None;
        let mut mem_per_cpu = DEF_MEM_PER_CPU;
        let mut requeue = false;
        let mut factor = lognormal(rng, 2.4, 0.6);
        match category {
            Category::Short => {
                let gpus = pick(rng, &[(1u32, 0.62), (2, 0.18), (4, 0.14), (8, 0.06)]).min(node_gpus);
                shape = Shape::Gpu(gpus);
                let kind = pick(rng, &[(0u8, 0.10), (1, 0.08), (2, 0.82)]);
                interactive = kind == 0;
                jupyter = kind == 1;
                debug = !jupyter && chance(rng, 0.12);
                let mut secs = lognormal(rng, 12.0 * 60.0, 1.1).clamp(15.0, 3.0 * 3600.0);
                if debug {
                    secs = secs.min(40.0 * 60.0);
                }
                if jupyter {
                    secs = lognormal(rng, 3.0 * 3600.0, 0.7).clamp(600.0, 12.0 * 3600.0);
                }
                natural_secs = secs;
                mode = if interactive {
                    Mode::Interactive
                } else if jupyter {
                    Mode::BatchOnly
                } else if chance(rng, 0.75) {
                    Mode::Srun(if chance(rng, 0.1) { 2 } else { 1 })
                } else {
                    Mode::BatchOnly
                };
                profile = if interactive {
                    UsageProfile::Shell
                } else if jupyter {
                    UsageProfile::Notebook
                } else {
                    UsageProfile::PyGpu
                };
                let cpus_per_gpu = pick(rng, &[(4u32, 0.3), (8, 0.5), (12, 0.2)]).min(self.gpu_cpu);
                cpus_req = cpus_per_gpu * gpus;
                self.mem_choice(rng, gpus, cpus_req, &mut mem_node, &mut mem_per_cpu);
            }
            Category::Array => return self.array_submission(rng, submit_time, 10, 0),
            Category::Long => {
                let gpus = pick(rng, &[(4u32, 0.3), (8, 0.7)]).min(node_gpus);
                shape = Shape::Gpu(gpus);
                natural_secs = lognormal(rng, 5.0 * 3600.0, 0.9).clamp(1800.0, 5.0 * 86400.0);
                mode = if chance(rng, 0.8) { Mode::Srun(1) } else { Mode::BatchOnly };
                profile = UsageProfile::PyGpu;
                let cpus_per_gpu = pick(rng, &[(8u32, 0.4), (12, 0.6)]).min(self.gpu_cpu);
                cpus_req = cpus_per_gpu * gpus;
                if chance(rng, 0.7) {
                    let gigabytes = pick(rng, &[(256u64, 0.3), (512, 0.4), (1024, 0.3)]);
                    mem_node = Some((gigabytes * 1024).min(self.gpu_mem * u64::from(gpus)));
                } else {
                    mem_per_cpu = 16_384;
                }
                tasks_per_node = 1;
                requeue = chance(rng, 0.2);
            }
            Category::Multi => {
                let max_nodes = (self.params.n_nodes / 3).max(2);
                let node_count = if prod {
                    pick(rng, &[(4u32, 0.28), (8, 0.32), (16, 0.28), (32, 0.12)])
                } else {
                    pick(rng, &[(2u32, 0.45), (4, 0.35), (8, 0.15), (16, 0.05)])
                }
                .min(max_nodes);
                shape = Shape::Whole(node_count);
                network_check = !prod && chance(rng, 0.4);
                if network_check {
                    // NCCL / IB checks: minutes, --time=30:00
                    natural_secs = lognormal(rng, 8.0 * 60.0, 0.6).clamp(120.0, 1500.0);
                    profile = UsageProfile::Nccl;
                } else if prod {
                    // production runs: hours to days, chained with 1-3 day limits
                    natural_secs = lognormal(rng, 14.0 * 3600.0, 0.9).clamp(3600.0, 6.0 * 86400.0);
                    profile = UsageProfile::Train;
                    requeue = chance(rng, 0.6);
                } else {
                    // development runs: a few nodes, minutes to hours
                    natural_secs = lognormal(rng, 20.0 * 60.0, 1.0).clamp(60.0, 4.0 * 3600.0);
                    factor = lognormal(rng, 2.5, 0.5);
                    profile = UsageProfile::Train;
                    requeue = chance(rng, 0.2);
                }
                mode = Mode::Srun(1);
                tasks_per_node = node_gpus;
                cpus_req = self.gpu_cpu * node_gpus * node_count;
                mem_node = Some(TRAIN_MEM_PER_NODE);
            }
            Category::Cpu => {
                let slots = pick(rng, &[(1u32, 0.5), (2, 0.35), (4, 0.15)]);
                shape = Shape::Cpu(slots);
                natural_secs = lognormal(rng, 25.0 * 60.0, 1.2).clamp(10.0, 86400.0);
                mode = if chance(rng, 0.5) { Mode::Srun(1) } else { Mode::BatchOnly };
                profile = UsageProfile::CpuWork;
                cpus_req = slots * CPUS_PER_CPU_SLOT;
                if chance(rng, 0.5) {
                    let gigabytes = pick(rng, &[(8u64, 0.4), (16, 0.3), (32, 0.3)]);
                    mem_node = Some((gigabytes * 1024 * u64::from(slots)).min(MEM_PER_CPU_SLOT * u64::from(slots)));
                }
            }
            Category::Het => {
                let gpus = pick(rng, &[(4u32, 0.4), (8, 0.6)]).min(node_gpus);
                shape = Shape::Het(gpus);
                natural_secs = lognormal(rng, 3.0 * 3600.0, 0.8).clamp(600.0, 2.0 * 86400.0);
                mode = Mode::Srun(1);
                profile = UsageProfile::PyGpu;
                cpus_req = self.gpu_cpu * gpus;
                mem_node = Some(self.gpu_mem * u64::from(gpus) * 8 / 10);
            }
        }
        let (fate, run_fraction) = if jupyter {
            // notebooks mostly run into their limit or get scancel'ed
            if chance(rng, 0.55) {
                (Fate::Cancel { by_admin: false }, rng.gen_range(0.1..1.0))
            } else {
                (Fate::Complete, 1.0)
            }
        } else {
            fate_for(rng, category)
        };
        if jupyter {
            factor = lognormal(rng, 1.1, 0.5);
        }
        let limit = if debug || network_check {
            Some(30)
        } else if prod {
            Some(pick(rng, &[(1440u32, 0.4), (2880, 0.35), (4320, 0.25)]))
        } else if category != Category::Multi && chance(rng, 0.08) {
            None
        } else {
            Some(0) // filled in by finalize()
        };
        let patience = if matches!(category, Category::Short | Category::Cpu | Category::Long) && chance(rng, 0.05) {
            Some(lognormal(rng, 40.0 * 60.0, 1.0).clamp(60.0, 12.0 * 3600.0) as i64)
        } else {
            None
        };
        let nodes = if let Shape::Whole(n) = shape { n } else { 1 };
        let qos = self.qos_for(rng, category, debug, user_index, nodes);
        let template = Arc::new(job_template(rng, family, category, interactive, jupyter, network_check));
        Submission {
            submit_time,
            submit_delay: rng.gen_range(1..=20),
            category,
            user_index,
            shape,
            debug,
            qos,
            template,
            mode,
            profile,
            tasks_per_node,
            cpus_req,
            mem_node,
            mem_per_cpu,
            limit,
            factor,
            natural_secs,
            fate,
            run_fraction,
            patience,
            requeue,
            held: false,
            prod,
            array: None,
            submit_line: Arc::from(""),
            work_dir: Arc::from(""),
            attempt: 0,
            special: None,
        }
    }

    pub(super) fn mem_choice(
        &self,
        rng: &mut StdRng,
        gpus: u32,
        cpus: u32,
        mem_node: &mut Option<u64>,
        mem_per_cpu: &mut u64,
    ) {
        match pick(rng, &[(0u8, 0.4), (1, 0.35), (2, 0.25)]) {
            0 => {
                let gigabytes = pick(rng, &[(32u64, 0.25), (64, 0.3), (128, 0.25), (200, 0.1), (400, 0.1)]);
                *mem_node = Some((gigabytes * 1024).min(self.gpu_mem * u64::from(gpus)));
            }
            1 => *mem_per_cpu = DEF_MEM_PER_CPU,
            _ => {
                let per_cpu = (16_384u64).min(self.gpu_mem * u64::from(gpus) / u64::from(cpus.max(1)));
                *mem_per_cpu = per_cpu;
            }
        }
    }

    pub(super) fn array_submission(
        &self,
        rng: &mut StdRng,
        submit_time: i64,
        task_count: u32,
        throttle: u32,
    ) -> Submission {
        let user_index = self.pick_user(rng, Category::Array);
        let family = Family::of_account(&self.context.users[user_index].acct);
        let cpu_only = matches!(family, Family::Bio | Family::Climate | Family::Physics) && chance(rng, 0.3);
        let shape = if cpu_only {
            Shape::Cpu(pick(rng, &[(1u32, 0.6), (2, 0.4)]))
        } else {
            Shape::Gpu(if chance(rng, 0.85) { 1 } else { 2.min(self.params.gpus_per_node) })
        };
        let median_secs = lognormal(rng, 18.0 * 60.0, 0.9).clamp(60.0, 8.0 * 3600.0);
        let mut tasks = Vec::with_capacity(task_count as usize);
        for _ in 0..task_count {
            let secs = (median_secs * lognormal(rng, 1.0, 0.35)).max(10.0);
            let (fate, fraction) = fate_for(rng, Category::Array);
            tasks.push((secs, fate, fraction));
        }
        let (cpus_req, mut mem_node, mut mem_per_cpu) = match shape {
            Shape::Cpu(slots) => (slots * CPUS_PER_CPU_SLOT, None, DEF_MEM_PER_CPU),
            Shape::Gpu(gpus) => (8.min(self.gpu_cpu) * gpus, None, DEF_MEM_PER_CPU),
            _ => (1, None, DEF_MEM_PER_CPU),
        };
        if let Shape::Gpu(gpus) = shape {
            self.mem_choice(rng, gpus, cpus_req, &mut mem_node, &mut mem_per_cpu);
        }
        let qos = self.qos_for(rng, Category::Array, false, user_index, 1);
        let template = Arc::new(job_template(rng, family, Category::Array, false, false, false));
        Submission {
            submit_time,
            submit_delay: rng.gen_range(1..=20),
            category: Category::Array,
            user_index,
            shape,
            debug: false,
            qos,
            template,
            mode: if chance(rng, 0.5) { Mode::Srun(1) } else { Mode::BatchOnly },
            profile: if cpu_only { UsageProfile::CpuWork } else { UsageProfile::PyGpu },
            tasks_per_node: 1,
            cpus_req,
            mem_node,
            mem_per_cpu,
            limit: Some(0),
            factor: lognormal(rng, 2.2, 0.35).max(1.2),
            natural_secs: median_secs,
            fate: Fate::Complete,
            run_fraction: 1.0,
            patience: None,
            requeue: false,
            held: false,
            prod: false,
            array: Some(Box::new(ArraySpec { task_count, throttle, tasks })),
            submit_line: Arc::from(""),
            work_dir: Arc::from(""),
            attempt: 0,
            special: None,
        }
    }

    pub(super) fn gpus_total(&self, submission: &Submission) -> f64 {
        f64::from(match submission.shape {
            Shape::Gpu(gpus) | Shape::Het(gpus) => gpus,
            Shape::Cpu(_) => 0,
            Shape::Whole(nodes) => nodes * self.params.gpus_per_node,
        })
    }

    /// Picks the time limit (after duration scaling) and builds the submit line / work dir.
    pub(super) fn finalize(&self, rng: &mut StdRng, submission: &mut Submission) {
        if submission.limit == Some(0) {
            let base = submission.natural_secs * submission.factor / 60.0;
            submission.limit = Some(nice_limit_at_least(base));
        }
        let user = &self.context.users[submission.user_index];
        let big = matches!(submission.category, Category::Multi | Category::Long | Category::Het) || chance(rng, 0.3);
        submission.work_dir = if big {
            Arc::from(format!("/lustre/{}/{}/{}", user.acct, user.user, submission.template.project))
        } else {
            Arc::from(format!("/home/{}/{}", user.user, submission.template.project))
        };
        let partition = if submission.debug { "debug" } else { "gpu" };
        let mut line = String::new();
        if submission.mode == Mode::Interactive {
            line.push_str("srun");
        } else {
            line.push_str("sbatch");
        }
        let explicit_part = submission.debug || chance(rng, 0.6);
        if explicit_part {
            let _ = write!(line, " -p {partition}");
        }
        let _ = write!(line, " -A {}", user.acct);
        if submission.category != Category::Het && submission.mode != Mode::Interactive {
            let _ = write!(line, " -J {}", submission.template.name);
        }
        if let Some(array) = &submission.array {
            let _ = write!(line, " --array=0-{}", array.task_count - 1);
            if array.throttle > 0 {
                let _ = write!(line, "%{}", array.throttle);
            }
        }
        match submission.shape {
            Shape::Gpu(gpus) => {
                let _ = write!(line, " --gres=gpu:{gpus} -c {}", submission.cpus_req);
            }
            Shape::Cpu(_) => {
                let _ = write!(line, " -c {}", submission.cpus_req);
            }
            Shape::Whole(nodes) => {
                let _ = write!(
                    line,
                    " -N {nodes} --ntasks-per-node={} --gpus-per-node={} -c {} --exclusive",
                    submission.tasks_per_node, self.params.gpus_per_node, self.gpu_cpu
                );
            }
            Shape::Het(_) => {}
        }
        if submission.category != Category::Het {
            if let Some(mem) = submission.mem_node {
                if mem.is_multiple_of(1024) {
                    let _ = write!(line, " --mem={}G", mem / 1024);
                } else {
                    let _ = write!(line, " --mem={mem}");
                }
            } else if submission.mem_per_cpu != DEF_MEM_PER_CPU {
                if submission.mem_per_cpu.is_multiple_of(1024) {
                    let _ = write!(line, " --mem-per-cpu={}G", submission.mem_per_cpu / 1024);
                } else {
                    let _ = write!(line, " --mem-per-cpu={}", submission.mem_per_cpu);
                }
            }
            if let Some(limit) = submission.limit {
                let _ = write!(line, " --time={}", format_time_limit(limit));
            }
        }
        if submission.requeue {
            line.push_str(" --requeue");
        }
        if submission.held {
            line.push_str(" --hold");
        }
        if submission.mode == Mode::Interactive {
            line.push_str(" --pty bash");
        } else {
            let _ = write!(line, " {}", submission.template.script);
        }
        submission.submit_line = Arc::from(line);
    }
}
