//! The rack → server → GPU grid at one moment: which job held each node and each GPU. slurmdbd keeps
//! GPU counts per job, not indices, so a node's GPU cells are filled in job start order with each job's
//! count on that node (from `/api/v1/jobs/{id}` `nodes[].gpus`); the node cell names every job on it.
//! GPUs held by jobs the viewer may not see arrive as counts per node (`/api/v1/gpus/busy`) and are
//! drawn "busy": the snapshot never holds their jobs, so neither the page nor its hydration data can
//! name them. Coloured by a metric, each cell says what a person needs to tell apart: free, held,
//! allocated but idle, not monitored (no series), and for XID no error or a code read as the job
//! report reads it (application, hardware or driver, unclear).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use slurmlens_slurm::state::printed_word;
use slurmlens_slurm::topology::Racks;
use slurmlens_wire as wire;

use crate::clock::Zone;
use crate::gantt::{WindowJob, per_node_gpus};
use crate::palette::{BUSY, Categories, ColourBy, ColourSlots, FREE, hashed_colour, job_colour, state_colour};

/// The grid at `at`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GridSnapshot {
    pub cluster: String,
    pub at: i64,
    pub racks: Racks,
    /// Jobs running at `at`, in start order.
    pub jobs: Vec<GridJob>,
    /// Parallel to `racks.nodes`.
    pub nodes: Vec<NodeCells>,
    /// The metric the cells are coloured by, when one was asked for.
    #[serde(default)]
    pub metric: Option<GridMetric>,
    /// Running jobs whose GPU indices the Slurm plugin recorded (their cells are exact).
    #[serde(default)]
    pub recorded_jobs: usize,
    /// The moment is now (none was asked for): readings' ages read "ago".
    #[serde(default)]
    pub live: bool,
    /// The stable colours of the users and accounts shown (and of no one else).
    #[serde(default)]
    pub slots: ColourSlots,
    /// Each node's health over the day before the moment (the badges); empty when unknown.
    #[serde(default)]
    pub health: Vec<wire::NodeHealthItem>,
}

/// One metric of every GPU at the snapshot's moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridMetric {
    pub key: String,
    pub unit: String,
    /// The top of the colour scale: 100 for percentages, else the largest value seen.
    pub max: f64,
    /// `ok` or `unavailable` (then `message` says why and cells keep their jobs' colours).
    pub status: wire::ValuesState,
    #[serde(default)]
    pub message: Option<String>,
    /// Parallel to `racks.nodes`, one entry per GPU cell: `None` where the GPU has no series then.
    pub values: Vec<Vec<Option<f64>>>,
    /// When the readings were taken (epoch seconds): the latest at or before the moment, at most
    /// `max_age_s` older. `None`: no GPU reported within that bound.
    #[serde(default)]
    pub readings_at: Option<i64>,
    #[serde(default)]
    pub max_age_s: u64,
    /// For XID: how each code present reads.
    #[serde(default)]
    pub xid_codes: Vec<wire::XidCode>,
}

/// A GPU without a series then: not monitored (dots, unlike free white and busy stripes).
pub const UNMONITORED: &str = "radial-gradient(circle, #5F5F5F 0 0.9px, transparent 1.2px) 0 0 / 4px 4px, #E6E6E6";
/// A held GPU whose XID reading is 0: no error.
pub const HEALTHY: &str = "#A8DDB5";
/// XID colours by how the code reads: a hardware or driver fault, the application's, unclear.
pub const XID_HARDWARE: &str = "#D55E00";
pub const XID_APPLICATION: &str = "#E69F00";
pub const XID_UNCLEAR: &str = "#CC79A7";
/// Utilisation (percent) under which a held GPU counts as idle: allocated but not used.
pub const IDLE_BELOW: f64 = 5.0;

/// What one GPU cell shows: its classes (`gpu free`, `gpu held idle`, `gpu free unmonitored`, …), its
/// background and its reading in words (empty without a metric).
#[derive(Debug, Clone, PartialEq)]
pub struct CellLook {
    pub class: String,
    pub background: String,
    pub reading: String,
}

impl GridMetric {
    /// Places `readings` on the snapshot's cells (by node name and GPU index).
    pub fn new(racks: &Racks, readings: &wire::GpuReadings) -> Self {
        let values = &readings.values;
        let index = racks.index();
        let mut cells: Vec<Vec<Option<f64>>> = racks.nodes.iter().map(|node| vec![None; node.gpus as usize]).collect();
        for value in &values.values {
            if let Some(&node) = index.get(value.node.as_str())
                && let Some(cell) = cells[node as usize].get_mut(usize::from(value.gpu))
            {
                *cell = Some(value.value);
            }
        }
        let max =
            if values.unit == "%" { 100.0 } else { values.values.iter().map(|value| value.value).fold(0.0, f64::max) };
        Self {
            key: values.metric.clone(),
            unit: values.unit.clone(),
            max,
            status: values.status,
            message: values.message.clone(),
            values: cells,
            readings_at: readings.readings_at.map(|at| at.timestamp()),
            max_age_s: readings.max_age_s,
            xid_codes: readings.xid_codes.clone(),
        }
    }

    /// A metric whose source failed: the cells keep their jobs' colours and the page says why.
    pub fn unavailable(key: &str, message: String) -> Self {
        Self {
            key: key.to_string(),
            unit: String::new(),
            max: 0.0,
            status: wire::ValuesState::Unavailable,
            message: Some(message),
            values: Vec::new(),
            readings_at: None,
            max_age_s: 0,
            xid_codes: Vec::new(),
        }
    }

    fn value(&self, node: usize, gpu: usize) -> Option<f64> {
        self.values.get(node).and_then(|cells| cells.get(gpu)).copied().flatten()
    }

    /// How XID `code` reads: (class, colour, words), as the job report's failure evidence reads it.
    fn xid(&self, code: u32) -> (&'static str, &'static str, String) {
        let known = self.xid_codes.iter().find(|known| known.code == code);
        let meaning = known.map_or(String::new(), |known| format!(": {}", known.meaning));
        match known.map(|known| known.strength) {
            Some(wire::EvidenceStrength::Strong) => {
                ("xid-hardware", XID_HARDWARE, format!("XID {code}{meaning} (hardware or driver fault)"))
            }
            Some(wire::EvidenceStrength::Application) => {
                ("xid-application", XID_APPLICATION, format!("XID {code}{meaning} (application fault)"))
            }
            _ => ("xid-unclear", XID_UNCLEAR, format!("XID {code}{meaning} (hardware or application)")),
        }
    }

    /// The look of GPU `gpu` of node `node`, `held` or free: no series is "not monitored"; a free GPU
    /// stays white whatever it reads (unless it shows an XID); a held one takes the metric's colour,
    /// and under [`IDLE_BELOW`] % utilisation is marked idle.
    pub fn look(&self, node: usize, gpu: usize, held: bool) -> CellLook {
        let holder = if held { "held" } else { "free" };
        let Some(value) = self.value(node, gpu) else {
            return CellLook {
                class: format!("gpu {holder} unmonitored"),
                background: UNMONITORED.into(),
                reading: format!("{}: not monitored (no reading)", self.key),
            };
        };
        if self.key == "xid" {
            if value >= 1.0 {
                let (class, colour, words) = self.xid(value.round() as u32);
                return CellLook { class: format!("gpu {holder} {class}"), background: colour.into(), reading: words };
            }
            let background = if held { HEALTHY } else { FREE };
            return CellLook {
                class: format!("gpu {holder} healthy"),
                background: background.into(),
                reading: "no XID".into(),
            };
        }
        let reading = format!("{} {}", self.key, crate::charts::human(value, &self.unit));
        if !held {
            return CellLook { class: "gpu free".into(), background: FREE.into(), reading };
        }
        let idle = self.key == "gpu_util" && value < IDLE_BELOW;
        CellLook {
            class: if idle { "gpu held idle".into() } else { "gpu held".into() },
            background: crate::charts::viridis(value, self.max).1.into(),
            reading: if idle { format!("{reading}: allocated but idle") } else { reading },
        }
    }

    /// How old the readings are, in words: `gpu_util readings from 14 min ago (2026-12-01 23:27Z)`,
    /// or why there are none.
    pub fn age(&self, at: i64, live: bool, zone: Zone) -> String {
        match self.readings_at {
            None => format!(
                "{}; every GPU reads \"not monitored\".",
                self.message.clone().unwrap_or_else(|| format!("no {} readings", self.key))
            ),
            Some(taken) if live => {
                format!("{} readings from {} ago ({}).", self.key, span(at - taken), zone.short(taken))
            }
            Some(taken) => {
                format!("{} readings from {}, {} before this moment.", self.key, zone.long(taken), span(at - taken))
            }
        }
    }
}

/// `45 s`, `14 min`, `2 h 05 min`.
pub fn span(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

/// A job running at the snapshot's moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridJob {
    pub job_id: String,
    pub job_name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: String,
    pub start: i64,
    #[serde(default)]
    pub end: Option<i64>,
    pub alloc_gpus: u64,
    pub node_list: String,
    /// The job's [`crate::palette::EFFICIENCY`] class (0: not measured yet, as for running jobs).
    #[serde(default)]
    pub efficiency: u8,
}

/// One node: the jobs on it and, per GPU cell, the job holding it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeCells {
    /// (job index, GPUs it holds here).
    pub jobs: Vec<(u32, u64)>,
    /// One entry per GPU: the job index holding it, if any.
    pub gpus: Vec<Option<u32>>,
    /// GPUs held beyond the node's known count (a topology that undercounts).
    pub overflow: u64,
    /// GPU cells held by jobs the viewer may not see, ascending: drawn "busy", never named.
    #[serde(default)]
    pub busy: Vec<u16>,
}

/// The title of a busy GPU cell.
pub const BUSY_TITLE: &str = "busy: another tenant's job";

/// Per job id: its GPUs on each node, from the job's detail where the page fetched it.
pub type NodeGpus = BTreeMap<String, BTreeMap<String, Option<u64>>>;

/// Per job (`job_id_raw`): the GPU indices the Slurm plugin recorded on each node.
pub type RecordedGpus = BTreeMap<u32, BTreeMap<String, Vec<u16>>>;

/// Per node: GPUs held by jobs the viewer may not see (`/api/v1/gpus/busy`).
pub type BusyCounts = BTreeMap<String, u64>;

/// Whether `job` held its allocation at `at`.
pub fn running_at(job: &WindowJob, at: i64) -> bool {
    job.start > 0 && job.start <= at && (job.end == 0 || job.end > at)
}

impl GridSnapshot {
    /// Builds the grid from the jobs overlapping `at` (others are ignored), the per-node GPU counts
    /// known from job details (jobs without details split their GPUs evenly), and the GPU indices the
    /// Slurm plugin recorded: recorded GPUs sit at their real cells, the rest fill free cells in job
    /// start order. Then each node's `busy` count (other tenants' GPUs) takes its lowest free cells;
    /// a count beyond the free cells is dropped (the viewer's own jobs are placed first).
    pub fn assemble(
        cluster: &str,
        at: i64,
        racks: Racks,
        jobs: &[WindowJob],
        node_gpus: &NodeGpus,
        recorded: &RecordedGpus,
        busy: &BusyCounts,
    ) -> Self {
        let node_index = racks.index();
        let mut running: Vec<&WindowJob> = jobs.iter().filter(|job| running_at(job, at)).collect();
        running.sort_by_key(|job| (job.start, job.job_id_raw));
        let mut nodes: Vec<NodeCells> = racks
            .nodes
            .iter()
            .map(|node| NodeCells { gpus: vec![None; node.gpus as usize], ..NodeCells::default() })
            .collect();
        // What each job holds on each of its nodes: its details' count, or its total split evenly.
        let held_on = |job: &WindowJob, host: &str, hosts: usize| {
            node_gpus
                .get(&*job.job_id)
                .and_then(|per_node| per_node.get(host).copied().flatten())
                .unwrap_or_else(|| per_node_gpus(job.gpus, hosts))
        };
        // First the recorded cells, so that no job filled in start order takes a recorded GPU. slurmdbd
        // says where a job ran and how many GPUs it holds: a record elsewhere, or beyond that count, is
        // not drawn.
        let mut placed: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        let mut recorded_jobs = 0;
        for (job_index, job) in running.iter().enumerate() {
            let Some(per_node) = recorded.get(&job.job_id_raw) else { continue };
            let hosts = &job.hosts;
            let mut any = false;
            for (host, indices) in per_node.iter().filter(|(host, _)| hosts.contains(host)) {
                let Some(&node) = node_index.get(host.as_str()) else { continue };
                let cells = &mut nodes[node as usize];
                let mut left = held_on(job, host, hosts.len());
                for &index in indices {
                    if left > 0
                        && let Some(cell @ None) = cells.gpus.get_mut(usize::from(index))
                    {
                        *cell = Some(job_index as u32);
                        *placed.entry((job_index as u32, node)).or_default() += 1;
                        left -= 1;
                        any = true;
                    }
                }
            }
            recorded_jobs += usize::from(any);
        }
        let mut grid_jobs = Vec::with_capacity(running.len());
        for job in running {
            let job_index = grid_jobs.len() as u32;
            let hosts = &job.hosts;
            for host in hosts.iter() {
                let Some(&node) = node_index.get(host.as_str()) else {
                    continue;
                };
                let gpus = held_on(job, host, hosts.len());
                let cells = &mut nodes[node as usize];
                cells.jobs.push((job_index, gpus));
                let mut left = gpus.saturating_sub(placed.get(&(job_index, node)).copied().unwrap_or(0));
                for cell in cells.gpus.iter_mut().filter(|cell| cell.is_none()) {
                    if left == 0 {
                        break;
                    }
                    *cell = Some(job_index);
                    left -= 1;
                }
                cells.overflow += left;
            }
            grid_jobs.push(GridJob {
                job_id: job.job_id.to_string(),
                job_name: job.name.to_string(),
                user: job.user.to_string(),
                account: job.account.to_string(),
                partition: job.partition.to_string(),
                state: job.state.to_string(),
                start: job.start,
                end: (job.end > 0).then_some(job.end),
                alloc_gpus: job.gpus,
                node_list: job.node_list.to_string(),
                efficiency: crate::palette::efficiency_class(job.mean_gpu_util, job.mean_tensor_active),
            });
        }
        for (host, &count) in busy {
            let Some(&node) = node_index.get(host.as_str()) else { continue };
            let cells = &mut nodes[node as usize];
            let free = cells.gpus.iter().enumerate().filter(|(_, cell)| cell.is_none()).map(|(gpu, _)| gpu as u16);
            cells.busy = free.take(usize::try_from(count).unwrap_or(usize::MAX)).collect();
        }
        drop(node_index);
        Self {
            cluster: cluster.to_string(),
            at,
            racks,
            jobs: grid_jobs,
            nodes,
            metric: None,
            recorded_jobs,
            live: false,
            slots: ColourSlots::default(),
            health: Vec::new(),
        }
    }

    /// The health of node `name`, if known.
    pub fn health_of(&self, name: &str) -> Option<&wire::NodeHealth> {
        self.health.iter().find(|item| item.node == name).map(|item| &item.health)
    }

    /// The value a job is coloured by.
    pub fn category(&self, job: u32, by: ColourBy) -> &str {
        let job = &self.jobs[job as usize];
        match by {
            ColourBy::User => &job.user,
            ColourBy::Account => &job.account,
            ColourBy::Partition => &job.partition,
            ColourBy::State => &job.state,
            ColourBy::Job => &job.job_id,
            ColourBy::Efficiency => crate::palette::EFFICIENCY
                .get(usize::from(job.efficiency))
                .map_or(crate::palette::EFFICIENCY[0].0, |(label, _)| label),
        }
    }

    /// Colours and legend for `by`: each user, account, partition and job keeps its own colour at
    /// every moment ([`ColourSlots`]). By job, every running job is its own legend entry. A legend
    /// entry counts the GPUs its jobs hold: a category of CPU-only jobs counts none (its jobs colour
    /// only their nodes' stripes), and efficiency, a GPU measure, leaves CPU-only jobs out.
    pub fn categories(&self, by: ColourBy) -> Categories {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        if by != ColourBy::Job {
            for cells in &self.nodes {
                for &(job, gpus) in &cells.jobs {
                    if gpus == 0 && by == ColourBy::Efficiency {
                        continue;
                    }
                    *counts.entry(self.category(job, by).to_string()).or_default() +=
                        usize::try_from(gpus).unwrap_or(usize::MAX);
                }
            }
        }
        match by {
            ColourBy::State => Categories::states(counts),
            ColourBy::Efficiency => Categories::efficiency(counts),
            ColourBy::User => Categories::identified(counts, |name| self.slots.user(name)),
            ColourBy::Account => Categories::identified(counts, |name| self.slots.account(name)),
            ColourBy::Partition => Categories::identified(counts, hashed_colour),
            ColourBy::Job => Categories::default(),
        }
    }

    /// The colour of a cell held by `job` (free cells: [`FREE`]).
    pub fn colour(&self, job: Option<u32>, by: ColourBy, categories: &Categories) -> &'static str {
        match (job, by) {
            (None, _) => FREE,
            (Some(job), ColourBy::Job) => job_colour(&self.jobs[job as usize].job_id),
            (Some(job), ColourBy::State) => state_colour(&self.jobs[job as usize].state),
            (Some(job), by) => categories.colour(self.category(job, by)),
        }
    }

    /// The look of GPU `gpu` of node `node`: another tenant's is busy (never a reading); with a metric
    /// that answered, the metric's look ([`GridMetric::look`]); otherwise its job's colour, or free.
    pub fn look(&self, node: usize, gpu: usize, by: ColourBy, categories: &Categories) -> CellLook {
        let cells = &self.nodes[node];
        if cells.busy.contains(&(gpu as u16)) {
            return CellLook { class: "gpu busy".into(), background: BUSY.into(), reading: String::new() };
        }
        let holder = cells.gpus.get(gpu).copied().flatten();
        match self.metric.as_ref().filter(|metric| metric.status == wire::ValuesState::Ok) {
            Some(metric) => metric.look(node, gpu, holder.is_some()),
            None => CellLook {
                class: if holder.is_some() { "gpu held".into() } else { "gpu free".into() },
                background: self.colour(holder, by, categories).into(),
                reading: String::new(),
            },
        }
    }

    /// A job as the grid's hover names it at the snapshot's moment: it was running then, since its
    /// start; what became of it is said apart (`ended … as NODE_FAIL`, or `still running`).
    pub fn describe(&self, job: u32, zone: Zone) -> String {
        let job = &self.jobs[job as usize];
        let outcome = match job.end {
            Some(end) => {
                format!("ended {} as {}", zone.short(end), printed_word(&job.state))
            }
            None => "still running".to_string(),
        };
        format!(
            "job {} ({}, {}, {}): running then, since {}; {outcome}",
            job.job_id,
            job.user,
            job.account,
            job.partition,
            zone.short(job.start),
        )
    }

    /// GPUs in use (the viewer's jobs' and busy ones) and in total.
    pub fn usage(&self) -> (usize, usize) {
        let used = self.nodes.iter().flat_map(|n| &n.gpus).filter(|c| c.is_some()).count() + self.busy_count();
        (used, self.nodes.iter().map(|n| n.gpus.len()).sum())
    }

    /// GPU cells drawn busy (held by jobs the viewer may not see).
    pub fn busy_count(&self) -> usize {
        self.nodes.iter().map(|n| n.busy.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmlens_slurm::hostlist;
    use slurmlens_slurm::topology::Topology;

    fn job(id: u32, nodes: &str, start: &str, end: Option<&str>, gpus: u64) -> WindowJob {
        let mut value = serde_json::json!({
            "job_id": id.to_string(), "job_id_raw": id, "cluster": "c", "job_name": "j", "user": format!("u{id}"),
            "uid": 1, "gid": 1, "account": "ml", "partition": "gpu", "qos": "normal", "state": "RUNNING",
            "exit_code": "0:0", "derived_exit_code": "0:0", "submit": start, "start": start,
            "elapsed": "", "elapsed_raw": 0, "timelimit": "", "node_list": nodes, "alloc_nodes": 1,
            "alloc_cpus": 1, "alloc_gpus": gpus, "alloc_tres": "", "req_tres": "", "req_mem": ""
        });
        if let Some(end) = end {
            value["end"] = serde_json::json!(end);
        }
        WindowJob::from(&serde_json::from_value::<wire::Job>(value).expect("valid job"))
    }

    #[test]
    fn fills_gpu_cells_in_start_order_with_each_jobs_count() {
        let racks = Topology::default().resolve("c", &hostlist::expand_lenient("n[1-2]"), 4);
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z").expect("time").timestamp();
        let jobs = vec![
            job(2, "n1", "2026-11-30T11:00:00Z", None, 1),
            job(1, "n[1-2]", "2026-11-30T10:00:00Z", Some("2026-11-30T13:00:00Z"), 6),
            job(3, "n2", "2026-11-30T12:30:00Z", None, 4),
            job(4, "n2", "2026-11-30T09:00:00Z", Some("2026-11-30T12:00:00Z"), 4),
        ];
        let mut detail = NodeGpus::new();
        detail.insert("1".into(), [("n1".to_string(), Some(2)), ("n2".to_string(), Some(4))].into());
        let grid =
            GridSnapshot::assemble("c", at, racks.clone(), &jobs, &detail, &RecordedGpus::new(), &BusyCounts::new());
        assert_eq!(grid.jobs.iter().map(|j| j.job_id.as_str()).collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(grid.nodes[0].gpus, [Some(0), Some(0), Some(1), None]);
        assert_eq!(grid.nodes[1].gpus, [Some(0); 4]);
        assert_eq!(grid.nodes[1].jobs, [(0, 4)]);
        assert_eq!(grid.usage(), (7, 8));

        // The plugin recorded job 2 on GPU 3 of n1: it sits there, and job 1 fills around it.
        let recorded: RecordedGpus = [(2, [("n1".to_string(), vec![3])].into())].into();
        let grid = GridSnapshot::assemble("c", at, racks.clone(), &jobs, &detail, &recorded, &BusyCounts::new());
        assert_eq!(grid.nodes[0].gpus, [Some(0), Some(0), None, Some(1)]);
        assert_eq!(grid.recorded_jobs, 1);

        // Records that slurmdbd contradicts (a node the job did not run on, more GPUs than it holds)
        // are not drawn: job 2 holds one GPU of n1 only.
        let recorded: RecordedGpus = [(2, [("n1".to_string(), vec![2, 3]), ("n2".to_string(), vec![0])].into())].into();
        let grid = GridSnapshot::assemble("c", at, racks, &jobs, &detail, &recorded, &BusyCounts::new());
        assert_eq!(grid.nodes[0].gpus, [Some(0), Some(0), Some(1), None]);
        assert_eq!(grid.nodes[1].gpus, [Some(0); 4], "n2 is job 1's");
        assert_eq!(grid.nodes.iter().map(|node| node.overflow).sum::<u64>(), 0);
    }

    #[test]
    fn the_legend_counts_gpus_held_and_cpu_only_jobs_hold_none() {
        let racks = Topology::default().resolve("c", &hostlist::expand_lenient("n[1-2]"), 4);
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z").expect("time").timestamp();
        // u1 holds 3 GPUs of n1; u2's CPU-only job shares n1; u3 holds 4 GPUs of n2.
        let jobs = vec![
            job(1, "n1", "2026-11-30T10:00:00Z", None, 3),
            job(2, "n1", "2026-11-30T11:00:00Z", None, 0),
            job(3, "n2", "2026-11-30T11:00:00Z", None, 4),
        ];
        let grid =
            GridSnapshot::assemble("c", at, racks, &jobs, &NodeGpus::new(), &RecordedGpus::new(), &BusyCounts::new());
        let counts = |by: ColourBy| -> Vec<(String, usize)> {
            grid.categories(by).legend.into_iter().map(|entry| (entry.label, entry.count)).collect()
        };
        assert_eq!(counts(ColourBy::User), [("u3".to_string(), 4), ("u1".to_string(), 3), ("u2".to_string(), 0)]);
        assert_eq!(counts(ColourBy::Account), [("ml".to_string(), 7)], "as many as the cells held");
        let efficiency: usize = counts(ColourBy::Efficiency).iter().map(|(_, count)| count).sum();
        assert_eq!(efficiency, grid.usage().0, "efficiency counts the GPUs the grid says are held");
        assert!(counts(ColourBy::Efficiency).iter().all(|(_, count)| *count > 0), "no entry of CPU-only jobs");
    }

    #[test]
    fn other_tenants_gpus_fill_the_lowest_cells_left_after_the_viewers_jobs() {
        let racks = Topology::default().resolve("c", &hostlist::expand_lenient("n[1-3]"), 4);
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z").expect("time").timestamp();
        // The viewer's jobs: one recorded on GPUs 0 and 2 of n1, one in start order on n2.
        let jobs = vec![job(5, "n1", "2026-11-30T10:00:00Z", None, 2), job(6, "n2", "2026-11-30T11:00:00Z", None, 1)];
        let recorded: RecordedGpus = [(5, [("n1".to_string(), vec![0, 2])].into())].into();
        // Other tenants: 2 GPUs on n1, 2 on n2, 5 on n3 (more than it has: capped), one on an unknown node.
        let busy: BusyCounts = [("n1".into(), 2), ("n2".into(), 2), ("n3".into(), 5), ("elsewhere".into(), 1)].into();
        let grid = GridSnapshot::assemble("c", at, racks, &jobs, &NodeGpus::new(), &recorded, &busy);
        assert_eq!(grid.nodes[0].gpus, [Some(0), None, Some(0), None]);
        assert_eq!(grid.nodes[0].busy, [1, 3]);
        assert_eq!(grid.nodes[1].gpus, [Some(1), None, None, None]);
        assert_eq!(grid.nodes[1].busy, [1, 2]);
        assert_eq!(grid.nodes[2].busy, [0, 1, 2, 3]);
        assert_eq!(grid.nodes[2].gpus, [None; 4], "busy cells belong to no job of the snapshot");
        assert_eq!(grid.jobs.len(), 2, "only the viewer's jobs are in the snapshot");
        assert_eq!(grid.busy_count(), 8);
        assert_eq!(grid.usage(), (11, 12));
    }

    /// n1 with 4 GPUs: job 1 holds GPUs 0 and 1 since 10:00 (it ended at 13:00 as NODE_FAIL); at noon.
    fn held_pair() -> GridSnapshot {
        let racks = Topology::default().resolve("c", &hostlist::expand_lenient("n1"), 4);
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z").expect("time").timestamp();
        let mut ended = job(1, "n1", "2026-11-30T10:00:00Z", Some("2026-11-30T13:00:00Z"), 2);
        ended.state = "NODE_FAIL".into();
        GridSnapshot::assemble("c", at, racks, &[ended], &NodeGpus::new(), &RecordedGpus::new(), &BusyCounts::new())
    }

    fn readings(metric: &str, values: &[(u16, f64)], codes: Vec<wire::XidCode>) -> wire::GpuReadings {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z").expect("time").to_utc();
        wire::GpuReadings {
            values: wire::GpuValues {
                metric: metric.into(),
                unit: if metric == "xid" { "code".into() } else { "%".into() },
                at,
                status: wire::ValuesState::Ok,
                message: None,
                values: values.iter().map(|&(gpu, value)| wire::GpuValue { node: "n1".into(), gpu, value }).collect(),
            },
            readings_at: Some(at - chrono::Duration::minutes(14)),
            max_age_s: 1800,
            xid_codes: codes,
        }
    }

    #[test]
    fn free_idle_busy_and_unmonitored_gpus_look_different() {
        // Regression (review "pages a tenant and a site can trust", problems 6 and 7): free GPUs and
        // allocated idle ones were the same purple, and GPUs without a series the same grey as free.
        let mut grid = held_pair();
        grid.metric =
            Some(GridMetric::new(&grid.racks, &readings("gpu_util", &[(0, 2.0), (1, 80.0), (2, 0.0)], vec![])));
        let categories = grid.categories(ColourBy::Job);
        let looks: Vec<CellLook> = (0..4).map(|gpu| grid.look(0, gpu, ColourBy::Job, &categories)).collect();
        let classes: Vec<&str> = looks.iter().map(|look| look.class.as_str()).collect();
        assert_eq!(classes, ["gpu held idle", "gpu held", "gpu free", "gpu free unmonitored"]);
        let backgrounds: std::collections::BTreeSet<&str> =
            [&looks[0], &looks[2], &looks[3]].iter().map(|look| look.background.as_str()).collect();
        assert_eq!(backgrounds.len(), 3, "idle, free and not monitored each have their own colour: {looks:?}");
        assert!(looks[0].reading.contains("allocated but idle"), "{}", looks[0].reading);
        assert_eq!(looks[3].reading, "gpu_util: not monitored (no reading)");
        // Without a metric: free and held by the job's own colour.
        grid.metric = None;
        assert_eq!(grid.look(0, 0, ColourBy::Job, &categories).background, job_colour("1"));
        assert_eq!(grid.look(0, 2, ColourBy::Job, &categories).class, "gpu free");
    }

    #[test]
    fn xid_reads_no_error_a_classified_code_or_not_monitored() {
        let mut grid = held_pair();
        let codes = vec![
            wire::XidCode {
                code: 79,
                strength: wire::EvidenceStrength::Strong,
                meaning: "GPU has fallen off the bus".into(),
            },
            wire::XidCode {
                code: 31,
                strength: wire::EvidenceStrength::Application,
                meaning: "GPU memory page fault".into(),
            },
        ];
        grid.metric = Some(GridMetric::new(&grid.racks, &readings("xid", &[(0, 0.0), (1, 79.0), (2, 31.0)], codes)));
        let categories = grid.categories(ColourBy::Job);
        let looks: Vec<CellLook> = (0..4).map(|gpu| grid.look(0, gpu, ColourBy::Job, &categories)).collect();
        let classes: Vec<&str> = looks.iter().map(|look| look.class.as_str()).collect();
        assert_eq!(
            classes,
            ["gpu held healthy", "gpu held xid-hardware", "gpu free xid-application", "gpu free unmonitored"]
        );
        assert_eq!(looks[0].background, HEALTHY);
        assert_eq!(looks[1].reading, "XID 79: GPU has fallen off the bus (hardware or driver fault)");
        assert_eq!(looks[2].reading, "XID 31: GPU memory page fault (application fault)");
        let free_healthy = grid.metric.as_ref().expect("metric").look(0, 0, false);
        assert_eq!((free_healthy.class.as_str(), free_healthy.background.as_str()), ("gpu free healthy", FREE));
        let all: std::collections::BTreeSet<&str> =
            [HEALTHY, FREE, UNMONITORED, XID_HARDWARE, XID_APPLICATION, XID_UNCLEAR].into_iter().collect();
        assert_eq!(all.len(), 6, "healthy, free, not monitored and each kind of XID differ");
    }

    #[test]
    fn the_hover_says_a_job_was_running_then_and_how_it_ended() {
        // Regression (review problem 7): "NODE_FAIL since <start>" for a job running at the moment.
        let grid = held_pair();
        assert_eq!(
            grid.describe(0, Zone::UTC),
            "job 1 (u1, ml, gpu): running then, since 2026-11-30 10:00; ended 2026-11-30 13:00 as NODE_FAIL"
        );
        let tokyo: Zone = "Asia/Tokyo".parse().expect("a zone");
        assert!(grid.describe(0, tokyo).contains("since 2026-11-30 19:00; ended 2026-11-30 22:00"));
        let racks = Topology::default().resolve("c", &hostlist::expand_lenient("n1"), 4);
        let running = job(2, "n1", "2026-11-30T11:00:00Z", None, 1);
        let grid = GridSnapshot::assemble(
            "c",
            grid.at,
            racks,
            &[running],
            &NodeGpus::new(),
            &RecordedGpus::new(),
            &BusyCounts::new(),
        );
        let text = grid.describe(0, Zone::UTC);
        assert!(text.ends_with("since 2026-11-30 11:00; still running"), "{text}");
    }

    #[test]
    fn readings_say_how_old_they_are() {
        let grid = held_pair();
        let metric = GridMetric::new(&grid.racks, &readings("gpu_util", &[(0, 50.0)], vec![]));
        assert_eq!(metric.age(grid.at, true, Zone::UTC), "gpu_util readings from 14 min ago (2026-11-30 11:46).");
        assert_eq!(
            metric.age(grid.at, false, Zone::UTC),
            "gpu_util readings from 2026-11-30 11:46:00 UTC, 14 min before this moment."
        );
        let mut none = readings("gpu_util", &[], vec![]);
        none.readings_at = None;
        none.values.message = Some("no gpu_util readings in the 30 min before this moment".into());
        let metric = GridMetric::new(&grid.racks, &none);
        assert_eq!(
            metric.age(grid.at, true, Zone::UTC),
            "no gpu_util readings in the 30 min before this moment; every GPU reads \"not monitored\"."
        );
        assert_eq!(span(45), "45 s");
        assert_eq!(span(7500), "2 h 05 min");
    }
}
