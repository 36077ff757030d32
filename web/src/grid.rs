//! The rack → server → GPU grid at one moment: which job held each node and each GPU. slurmdbd keeps
//! GPU counts per job, not indices, so a node's GPU cells are filled in job start order with each job's
//! count on that node (from `/api/v1/jobs/{id}` `nodes[].gpus`); the node cell names every job on it.
//! GPUs held by jobs the viewer may not see arrive as counts per node (`/api/v1/gpus/busy`) and are
//! drawn "busy": the snapshot never holds their jobs, so neither the page nor its hydration data can
//! name them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use slurmlens_slurm::hostlist;
use slurmlens_slurm::topology::Racks;
use slurmlens_wire as wire;

use crate::gantt::per_node_gpus;
use crate::palette::{Categories, ColourBy, FREE, job_colour, state_colour};

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
}

/// One metric of every GPU at the snapshot's moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridMetric {
    pub key: String,
    pub unit: String,
    /// The top of the colour scale: 100 for percentages, else the largest value seen.
    pub max: f64,
    /// `ok` or `unavailable` (then `message` says why and cells show "no data").
    pub status: wire::ValuesState,
    #[serde(default)]
    pub message: Option<String>,
    /// Parallel to `racks.nodes`, one entry per GPU cell.
    pub values: Vec<Vec<Option<f64>>>,
}

/// Colour of a GPU cell without a reading.
pub const NO_DATA: &str = "#DDDDDD";

impl GridMetric {
    /// Places `values` on the snapshot's cells (by node name and GPU index).
    pub fn new(racks: &Racks, values: &wire::GpuValues) -> Self {
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
        }
    }

    /// The colour of a GPU cell: viridis for magnitudes; for XID, vermilion where an error is set.
    pub fn colour(&self, node: usize, gpu: usize) -> &'static str {
        match self.values.get(node).and_then(|cells| cells.get(gpu)).copied().flatten() {
            None => NO_DATA,
            Some(value) if self.key == "xid" => {
                if value > 0.0 {
                    "#D55E00"
                } else {
                    FREE
                }
            }
            Some(value) => crate::charts::viridis(value, self.max).1,
        }
    }

    /// The reading of a GPU cell as text (`87 %`, `no data`).
    pub fn describe(&self, node: usize, gpu: usize) -> String {
        match self.values.get(node).and_then(|cells| cells.get(gpu)).copied().flatten() {
            None => format!("{}: no data", self.key),
            Some(value) if self.key == "xid" && value > 0.0 => format!("XID {value:.0}"),
            Some(_) if self.key == "xid" => "no XID".to_string(),
            Some(value) => format!("{} {}", self.key, crate::charts::human(value, &self.unit)),
        }
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
    /// The job's [`crate::palette::EFFICIENCY`] class (0: no report yet, as for running jobs).
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
pub fn running_at(job: &wire::Job, at: i64) -> bool {
    job.start.is_some_and(|start| start.timestamp() <= at) && job.end.is_none_or(|end| end.timestamp() > at)
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
        jobs: &[wire::Job],
        node_gpus: &NodeGpus,
        recorded: &RecordedGpus,
        busy: &BusyCounts,
    ) -> Self {
        let node_index = racks.index();
        let mut running: Vec<&wire::Job> = jobs.iter().filter(|job| running_at(job, at)).collect();
        running.sort_by_key(|job| (job.start, job.job_id_raw));
        let mut nodes: Vec<NodeCells> = racks
            .nodes
            .iter()
            .map(|node| NodeCells { gpus: vec![None; node.gpus as usize], ..NodeCells::default() })
            .collect();
        // First the recorded cells, so that no job filled in start order takes a recorded GPU.
        let mut placed: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        let mut recorded_jobs = 0;
        for (job_index, job) in running.iter().enumerate() {
            let Some(per_node) = recorded.get(&job.job_id_raw) else { continue };
            recorded_jobs += 1;
            for (host, indices) in per_node {
                let Some(&node) = node_index.get(host.as_str()) else { continue };
                let cells = &mut nodes[node as usize];
                for &index in indices {
                    if let Some(cell @ None) = cells.gpus.get_mut(usize::from(index)) {
                        *cell = Some(job_index as u32);
                        *placed.entry((job_index as u32, node)).or_default() += 1;
                    }
                }
            }
        }
        let mut grid_jobs = Vec::with_capacity(running.len());
        for job in running {
            let job_index = grid_jobs.len() as u32;
            let hosts = hostlist::expand_lenient(&job.node_list);
            let detail = node_gpus.get(&job.job_id);
            for host in &hosts {
                let Some(&node) = node_index.get(host.as_str()) else {
                    continue;
                };
                let gpus = detail
                    .and_then(|per_node| per_node.get(host).copied().flatten())
                    .unwrap_or_else(|| per_node_gpus(job.alloc_gpus, hosts.len()));
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
                job_id: job.job_id.clone(),
                job_name: job.job_name.clone(),
                user: job.user.clone(),
                account: job.account.clone(),
                partition: job.partition.clone(),
                state: job.state.clone(),
                start: job.start.map_or(0, |t| t.timestamp()),
                end: job.end.map(|t| t.timestamp()),
                alloc_gpus: job.alloc_gpus,
                node_list: job.node_list.clone(),
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
        Self { cluster: cluster.to_string(), at, racks, jobs: grid_jobs, nodes, metric: None, recorded_jobs }
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

    /// Colours and legend for `by`. By job, every running job is its own legend entry.
    pub fn categories(&self, by: ColourBy) -> Categories {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        if by != ColourBy::Job {
            for cells in &self.nodes {
                for &(job, gpus) in &cells.jobs {
                    *counts.entry(self.category(job, by).to_string()).or_default() += gpus.max(1) as usize;
                }
            }
        }
        match by {
            ColourBy::State => Categories::states(counts),
            ColourBy::Efficiency => Categories::efficiency(counts),
            _ => Categories::new(counts),
        }
    }

    /// The colour of a cell held by `job` (free cells: [`FREE`]).
    pub fn colour(&self, job: Option<u32>, by: ColourBy, categories: &Categories) -> &'static str {
        match (job, by) {
            (None, _) => FREE,
            (Some(job), ColourBy::Job) => job_colour(job as usize),
            (Some(job), ColourBy::State) => state_colour(&self.jobs[job as usize].state),
            (Some(job), by) => categories.colour(self.category(job, by)),
        }
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
    use slurmlens_slurm::topology::Topology;

    fn job(id: u32, nodes: &str, start: &str, end: Option<&str>, gpus: u64) -> wire::Job {
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
        serde_json::from_value(value).expect("valid job")
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
        let grid = GridSnapshot::assemble("c", at, racks, &jobs, &detail, &recorded, &BusyCounts::new());
        assert_eq!(grid.nodes[0].gpus, [Some(0), Some(0), None, Some(1)]);
        assert_eq!(grid.recorded_jobs, 1);
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
}
