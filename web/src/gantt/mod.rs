//! The Gantt chart's model, free of any rendering crate: the compact job data the page loads and its
//! index per node (here), rows and the time viewport ([`layout`]), and bar geometry, hit testing and
//! an SVG rendering for browsers without the wasm bundle ([`draw`]). The canvas renderer draws the
//! same [`bars`].

mod columns;
mod draw;
mod layout;
mod pack;
mod states;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use slurmlens_slurm::hostlist;
use slurmlens_slurm::state::printed_word;
use slurmlens_slurm::topology::Racks;
use slurmlens_wire as wire;

use crate::clock::Zone;
use crate::palette::{Categories, ColourBy, ColourSlots, hashed_colour, job_colour};
use crate::timefmt;

pub use draw::{Bar, Batches, Rect, bars, job_at, packed_at, packed_bars, row_jobs, row_label, svg};
pub use layout::{Expansion, METRICS, Row, RowKind, RowLayout, RowMetrics, Viewport, layout};
pub use pack::{WIDEST_PX, pack_short_jobs};
pub use states::{NodeStateSpan, Unavailable, node_state_spans, state_at, state_rects};

/// The narrowest view: one hour.
pub const MIN_SPAN: f64 = 3600.0;
/// The widest view: thirty days.
pub const MAX_SPAN: f64 = 30.0 * 86_400.0;
/// Width of the label column, CSS pixels.
pub const LABEL_WIDTH: f64 = 96.0;

/// The jobs of one window on one cluster, compact: strings interned, nodes as row indices, jobs too
/// short to see at the window's width merged into packed bars ([`pack_short_jobs`]). On the wire it
/// is columns of small integers (`columns::GanttWire`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "columns::GanttWire", into = "columns::GanttWire")]
pub struct GanttData {
    pub cluster: String,
    /// The window loaded, epoch seconds.
    pub start: i64,
    pub end: i64,
    /// The server's clock when loaded; running jobs end here.
    pub now: i64,
    pub racks: Racks,
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub partitions: Vec<String>,
    pub states: Vec<String>,
    pub names: Vec<String>,
    pub jobs: Vec<GanttJob>,
    /// Runs of jobs too short to see at this window, one bar per run and node row.
    pub packed: Vec<PackedBar>,
    /// More jobs overlap the window than were loaded (newest submissions were kept).
    pub truncated: bool,
    /// Finished jobs shorter than this (seconds) next to others as short are drawn packed; 0: none is.
    pub min_duration: i64,
    /// How many jobs are drawn only inside packed bars.
    pub packed_jobs: u64,
    /// The stable colours of the users and accounts loaded (and of no one else).
    pub slots: ColourSlots,
    /// Nodes down or drained during the window, oldest first ([`node_state_spans`]).
    pub node_states: Vec<NodeStateSpan>,
}

/// Jobs too short to draw one by one, next to each other on one node row: one bar for all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedBar {
    /// Index into `racks.nodes`.
    pub node: u32,
    pub start: i64,
    pub end: i64,
    /// How many jobs it stands for.
    pub count: u32,
    /// The most GPUs one of them held on this node.
    pub gpus: u64,
    /// Who used it most (GPU-seconds): indices into the user and account tables, for its colour.
    pub user: u32,
    pub account: u32,
}

/// One job of a window as the Gantt and the grid read it, and nothing more: no TRES rendering, no
/// exit codes, no report beyond the two means its efficiency class is read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowJob {
    pub job_id: Arc<str>,
    pub job_id_raw: u32,
    pub name: Arc<str>,
    pub user: Arc<str>,
    pub account: Arc<str>,
    pub partition: Arc<str>,
    /// As sacct prints it (`CANCELLED by 1001`).
    pub state: Arc<str>,
    /// Epoch seconds; 0: never started.
    pub start: i64,
    /// Epoch seconds; 0 while running.
    pub end: i64,
    pub gpus: u64,
    /// As slurmdbd stores it (`gpu[001-004]`).
    pub node_list: Arc<str>,
    /// Node names, expanded.
    pub hosts: Arc<[String]>,
    pub mean_gpu_util: Option<f64>,
    pub mean_tensor_active: Option<f64>,
}

impl From<&wire::Job> for WindowJob {
    fn from(job: &wire::Job) -> Self {
        Self {
            job_id: job.job_id.as_str().into(),
            job_id_raw: job.job_id_raw,
            name: job.job_name.as_str().into(),
            user: job.user.as_str().into(),
            account: job.account.as_str().into(),
            partition: job.partition.as_str().into(),
            state: job.state.as_str().into(),
            start: job.start.map_or(0, |t| t.timestamp()),
            end: job.end.map_or(0, |t| t.timestamp()),
            gpus: job.alloc_gpus,
            node_list: job.node_list.as_str().into(),
            hosts: hostlist::expand_lenient(&job.node_list).into(),
            mean_gpu_util: job.mean_gpu_util,
            mean_tensor_active: job.mean_tensor_active,
        }
    }
}

/// One job allocation; strings are indices into the data's tables.
#[derive(Debug, Clone, PartialEq)]
pub struct GanttJob {
    pub job_id: String,
    pub name: u32,
    pub user: u32,
    pub account: u32,
    pub partition: u32,
    pub state: u32,
    pub start: i64,
    /// 0 while running.
    pub end: i64,
    pub gpus: u64,
    /// Indices into `racks.nodes`.
    pub nodes: Vec<u32>,
    /// The job's [`crate::palette::EFFICIENCY`] class (0: not measured).
    pub efficiency: u8,
}

#[derive(Default)]
struct Interner {
    values: Vec<String>,
    index: HashMap<String, u32>,
}

impl Interner {
    fn get(&mut self, value: &str) -> u32 {
        if let Some(&index) = self.index.get(value) {
            return index;
        }
        let index = self.values.len() as u32;
        self.values.push(value.to_string());
        self.index.insert(value.to_string(), index);
        index
    }
}

/// The node names a job list touches, for laying out nodes the node list does not name.
pub fn job_nodes(jobs: &[WindowJob]) -> BTreeSet<String> {
    let names: HashSet<&str> = jobs.iter().flat_map(|job| job.hosts.iter().map(String::as_str)).collect();
    names.into_iter().map(str::to_string).collect()
}

/// GPUs a job holds on each of its nodes, rounded up (slurmdbd keeps only the total).
pub fn per_node_gpus(gpus: u64, nodes: usize) -> u64 {
    if nodes == 0 { 0 } else { gpus.div_ceil(nodes as u64) }
}

impl GanttData {
    /// Compacts started jobs of `[start, end)` onto `racks` (which must name every node they ran on;
    /// others are dropped).
    pub fn assemble(
        cluster: &str,
        (start, end, now): (i64, i64, i64),
        racks: Racks,
        jobs: &[WindowJob],
        truncated: bool,
    ) -> Self {
        let node_index: HashMap<&str, u32> = racks.index().into_iter().collect();
        let (mut users, mut accounts, mut partitions, mut states, mut names) =
            (Interner::default(), Interner::default(), Interner::default(), Interner::default(), Interner::default());
        let mut compact = Vec::with_capacity(jobs.len());
        for job in jobs {
            if job.start <= 0 {
                continue;
            }
            let nodes: Vec<u32> = job.hosts.iter().filter_map(|name| node_index.get(name.as_str()).copied()).collect();
            if nodes.is_empty() {
                continue;
            }
            compact.push(GanttJob {
                job_id: job.job_id.to_string(),
                name: names.get(&job.name),
                user: users.get(&job.user),
                account: accounts.get(&job.account),
                partition: partitions.get(&job.partition),
                state: states.get(printed_word(&job.state)),
                start: job.start,
                end: job.end,
                gpus: job.gpus,
                nodes,
                efficiency: crate::palette::efficiency_class(job.mean_gpu_util, job.mean_tensor_active),
            });
        }
        drop(node_index);
        Self {
            cluster: cluster.to_string(),
            start,
            end,
            now,
            racks,
            users: users.values,
            accounts: accounts.values,
            partitions: partitions.values,
            states: states.values,
            names: names.values,
            jobs: compact,
            packed: Vec::new(),
            truncated,
            min_duration: 0,
            packed_jobs: 0,
            slots: ColourSlots::default(),
            node_states: Vec::new(),
        }
    }

    /// When a job ends on the chart: its end, or `now` while it runs.
    pub fn end_of(&self, job: &GanttJob, now: i64) -> i64 {
        if job.end > 0 { job.end } else { now.max(job.start) }
    }

    /// The value a job is coloured by.
    pub fn category<'a>(&'a self, job: &'a GanttJob, by: ColourBy) -> &'a str {
        let pick = |values: &'a [String], index: u32| values.get(index as usize).map_or("", String::as_str);
        match by {
            ColourBy::User => pick(&self.users, job.user),
            ColourBy::Account => pick(&self.accounts, job.account),
            ColourBy::Partition => pick(&self.partitions, job.partition),
            ColourBy::State => pick(&self.states, job.state),
            ColourBy::Job => &job.job_id,
            ColourBy::Efficiency => crate::palette::EFFICIENCY
                .get(usize::from(job.efficiency))
                .map_or(crate::palette::EFFICIENCY[0].0, |(label, _)| label),
        }
    }

    /// Colours for `by`, with the legend of what is loaded. Every user, account, partition and job
    /// keeps its own colour whatever the window or filter ([`ColourSlots`]); none is grey.
    pub fn categories(&self, by: ColourBy) -> Categories {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        if by != ColourBy::Job {
            for job in &self.jobs {
                *counts.entry(self.category(job, by).to_string()).or_default() += 1;
            }
        }
        // A packed bar is coloured by who used it most, and counts its jobs for them.
        let pick = |values: &[String], index: u32| values.get(index as usize).cloned().unwrap_or_default();
        for bar in &self.packed {
            match by {
                ColourBy::User => *counts.entry(pick(&self.users, bar.user)).or_default() += bar.count as usize,
                ColourBy::Account => {
                    *counts.entry(pick(&self.accounts, bar.account)).or_default() += bar.count as usize
                }
                _ => {}
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

    /// The colour of job `index`.
    pub fn colour(&self, index: usize, by: ColourBy, categories: &Categories) -> &'static str {
        match by {
            ColourBy::Job => job_colour(&self.jobs[index].job_id),
            _ => categories.colour(self.category(&self.jobs[index], by)),
        }
    }

    /// Each job's colour for `by`, computed once per load and colouring (drawing then indexes a table
    /// instead of looking a string up per bar).
    pub fn colour_table(&self, by: ColourBy, categories: &Categories) -> Vec<&'static str> {
        let per_value = |values: &[String]| values.iter().map(|value| categories.colour(value)).collect::<Vec<_>>();
        let lookup = |table: Vec<&'static str>, pick: fn(&GanttJob) -> u32| -> Vec<&'static str> {
            self.jobs
                .iter()
                .map(|job| table.get(pick(job) as usize).copied().unwrap_or(crate::palette::OTHER))
                .collect()
        };
        match by {
            ColourBy::User => lookup(per_value(&self.users), |job| job.user),
            ColourBy::Account => lookup(per_value(&self.accounts), |job| job.account),
            ColourBy::Partition => lookup(per_value(&self.partitions), |job| job.partition),
            ColourBy::State => lookup(per_value(&self.states), |job| job.state),
            ColourBy::Job => self.jobs.iter().map(|job| job_colour(&job.job_id)).collect(),
            ColourBy::Efficiency => {
                self.jobs.iter().map(|job| categories.colour(self.category(job, ColourBy::Efficiency))).collect()
            }
        }
    }

    /// A packed bar's hover title: `37 short jobs, 12:00–12:40; zoom in to see them`, times in `zone`.
    pub fn packed_title(&self, bar: &PackedBar, zone: Zone) -> String {
        let (start, end) = (zone.short(bar.start), zone.short(bar.end));
        // The end's date is said only when it differs from the start's.
        let end = match (start.split_once(' '), end.split_once(' ')) {
            (Some((start_day, _)), Some((end_day, end_time))) if start_day == end_day => end_time.to_string(),
            _ => end,
        };
        let (jobs, them) = if bar.count == 1 { ("short job", "it") } else { ("short jobs", "them") };
        format!("{} {jobs}, {start}–{end}; zoom in to see {them}", bar.count)
    }

    /// A packed bar's details: who used it most, the most GPUs one job held and the node.
    pub fn packed_summary(&self, bar: &PackedBar) -> Vec<(&'static str, String)> {
        let pick = |values: &[String], i: u32| values.get(i as usize).cloned().unwrap_or_default();
        vec![
            ("mostly", format!("{} ({})", pick(&self.users, bar.user), pick(&self.accounts, bar.account))),
            ("GPUs", format!("up to {} per job", bar.gpus)),
            ("node", self.racks.nodes.get(bar.node as usize).map(|node| node.name.clone()).unwrap_or_default()),
        ]
    }

    /// A packed bar's colour: its main user's or account's when colouring by those, otherwise one
    /// neutral grey (a run of many jobs has no one state, partition or efficiency).
    pub fn packed_colour(&self, bar: &PackedBar, by: ColourBy, categories: &Categories) -> &'static str {
        fn pick(values: &[String], index: u32) -> &str {
            values.get(index as usize).map_or("", String::as_str)
        }
        match by {
            ColourBy::User => categories.colour(pick(&self.users, bar.user)),
            ColourBy::Account => categories.colour(pick(&self.accounts, bar.account)),
            _ => crate::palette::OTHER,
        }
    }

    /// A job's hover summary as (label, value) pairs, times in `zone`.
    pub fn summary(&self, index: usize, zone: Zone) -> Vec<(&'static str, String)> {
        let job = &self.jobs[index];
        let pick = |values: &[String], i: u32| values.get(i as usize).cloned().unwrap_or_default();
        let nodes: Vec<&str> =
            job.nodes.iter().filter_map(|&n| self.racks.nodes.get(n as usize)).map(|n| n.name.as_str()).collect();
        let node_text = match nodes.len() {
            0 => String::new(),
            1..=4 => nodes.join(","),
            count => format!("{},… ({count} nodes)", nodes[..3].join(",")),
        };
        let end = self.end_of(job, self.now);
        vec![
            ("job", job.job_id.clone()),
            ("name", pick(&self.names, job.name)),
            ("user", pick(&self.users, job.user)),
            ("account", pick(&self.accounts, job.account)),
            ("partition", pick(&self.partitions, job.partition)),
            ("state", pick(&self.states, job.state)),
            ("start", zone.long(job.start)),
            ("end", if job.end > 0 { zone.long(job.end) } else { "running".into() }),
            ("elapsed", timefmt::duration(end - job.start)),
            ("GPUs", job.gpus.to_string()),
            ("nodes", node_text),
        ]
    }
}

/// Per node: its jobs by start time, and the GPU lanes each holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GanttIndex {
    pub node_jobs: Vec<Vec<u32>>,
    /// Per node: (job, bit mask of lanes). slurmdbd does not record GPU indices, so lanes are packed
    /// by count: a job takes the lowest lanes free at its start.
    pub lanes: Vec<Vec<(u32, u64)>>,
}

impl GanttIndex {
    /// Indexes `data`; running jobs end at `now`.
    pub fn new(data: &GanttData, now: i64) -> Self {
        let mut node_jobs: Vec<Vec<u32>> = vec![Vec::new(); data.racks.nodes.len()];
        for (index, job) in data.jobs.iter().enumerate() {
            for &node in &job.nodes {
                if let Some(list) = node_jobs.get_mut(node as usize) {
                    list.push(index as u32);
                }
            }
        }
        for list in &mut node_jobs {
            list.sort_by_key(|&job| (data.jobs[job as usize].start, job));
        }
        let lanes = node_jobs
            .iter()
            .enumerate()
            .map(|(node, jobs)| pack_lanes(data, jobs, data.racks.nodes[node].gpus, now))
            .collect();
        Self { node_jobs, lanes }
    }
}

fn pack_lanes(data: &GanttData, jobs: &[u32], gpus: u32, now: i64) -> Vec<(u32, u64)> {
    let lanes = gpus.clamp(1, 64) as usize;
    let mut free_at = vec![i64::MIN; lanes];
    let mut packed = Vec::with_capacity(jobs.len());
    for &index in jobs {
        let job = &data.jobs[index as usize];
        let need = per_node_gpus(job.gpus, job.nodes.len()).min(lanes as u64) as usize;
        if need == 0 {
            continue;
        }
        let mut chosen: Vec<usize> = (0..lanes).filter(|&lane| free_at[lane] <= job.start).take(need).collect();
        if chosen.len() < need {
            let mut busy: Vec<usize> = (0..lanes).filter(|lane| !chosen.contains(lane)).collect();
            busy.sort_by_key(|&lane| (free_at[lane], lane));
            chosen.extend(busy.into_iter().take(need - chosen.len()));
        }
        let end = data.end_of(job, now);
        let mut mask = 0u64;
        for lane in chosen {
            mask |= 1 << lane;
            free_at[lane] = free_at[lane].max(end);
        }
        packed.push((index, mask));
    }
    packed
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;
    use slurmlens_slurm::topology::Topology;

    fn job(id: &str, user: &str, nodes: &str, start: i64, end: Option<i64>, gpus: u64) -> wire::Job {
        let time = |t: i64| DateTime::from_timestamp(t, 0).expect("valid time");
        wire::Job {
            job_id: id.into(),
            job_id_raw: id.parse().unwrap_or(0),
            array_job_id: None,
            array_task_id: None,
            het_job_id: None,
            het_job_offset: None,
            cluster: "c".into(),
            job_name: format!("name-{id}"),
            user: user.into(),
            uid: 1,
            gid: 1,
            account: "acct".into(),
            partition: "gpu".into(),
            qos: "normal".into(),
            state: if end.is_some() { "COMPLETED".into() } else { "RUNNING".into() },
            cancelled_by_uid: None,
            exit_code: "0:0".into(),
            derived_exit_code: "0:0".into(),
            submit: time(start),
            eligible: None,
            start: Some(time(start)),
            end: end.map(time),
            elapsed: String::new(),
            elapsed_raw: 0,
            timelimit: String::new(),
            timelimit_raw: None,
            node_list: nodes.into(),
            alloc_nodes: 1,
            alloc_cpus: 1,
            alloc_gpus: gpus,
            alloc_tres: String::new(),
            req_tres: String::new(),
            req_mem: String::new(),
            comment: None,
            sluid: None,
            restarts: None,
            mean_gpu_util: None,
            mean_tensor_active: None,
            blame: None,
            digest: None,
            tags: Vec::new(),
        }
    }

    fn sample() -> GanttData {
        let known = hostlist::expand_lenient("gpu[001-020]");
        let racks = Topology::default().resolve("c", &known, 8);
        let jobs = [
            job("1", "alice", "gpu[001-002]", 1000, Some(2000), 16),
            job("2", "bob", "gpu001", 1500, None, 4),
            job("3", "alice", "gpu015", 100, Some(5000), 2),
            job("4", "carol", "None assigned", 100, Some(200), 0),
        ];
        let jobs: Vec<WindowJob> = jobs.iter().map(WindowJob::from).collect();
        GanttData::assemble("c", (0, 10_000, 3000), racks, &jobs, false)
    }

    #[test]
    fn compacts_jobs_onto_node_indices_and_interns_strings() {
        let data = sample();
        assert_eq!(data.jobs.len(), 3, "a job without nodes is not placed");
        assert_eq!(data.jobs[0].nodes, [0, 1]);
        assert_eq!(data.users, ["alice", "bob"]);
        assert_eq!(data.jobs[1].end, 0);
        assert_eq!(data.names[data.jobs[0].name as usize], "name-1");
        let json = serde_json::to_string(&data).expect("serializes");
        // Columns in start order (job 3 at 100, job 1 at 1000, job 2 at 1500), starts as gaps,
        // job 1's two nodes as one range.
        assert!(json.contains("\"job_ids\":[\"3\",\"1\",\"2\"]"), "{json}");
        assert!(json.contains("\"job_starts\":[100,900,500]"), "{json}");
        assert!(json.contains("\"job_durations\":[4900,1000,-1]"), "{json}");
        assert!(json.contains("\"job_ranges\":[1,1,1],\"node_ranges\":[14,1,0,2,0,1]"), "{json}");
        let back: GanttData = serde_json::from_str(&json).expect("parses");
        let mut in_start_order = data.clone();
        in_start_order.jobs.sort_by_key(|job| job.start);
        assert_eq!(back, in_start_order);
        let mut broken: serde_json::Value = serde_json::from_str(&json).expect("parses");
        broken["job_gpus"] = serde_json::json!([1]);
        let refused = serde_json::from_value::<GanttData>(broken).expect_err("a short column is refused");
        assert!(refused.to_string().contains("columns disagree"), "{refused}");
    }

    #[test]
    fn short_neighbours_pack_into_one_bar_and_no_job_goes_missing() {
        let known = hostlist::expand_lenient("gpu[001-004]");
        let racks = Topology::default().resolve("c", &known, 8);
        let jobs: Vec<WindowJob> = [
            // Three short jobs of bob's and carol's within a few seconds of each other on gpu001, one long job of alice's.
            job("10", "bob", "gpu001", 1000, Some(1010), 1),
            job("11", "bob", "gpu001", 1015, Some(1025), 2),
            job("12", "carol", "gpu[001-002]", 1030, Some(1035), 2),
            job("13", "alice", "gpu001", 1, Some(5000), 8),
            // A lone short job on gpu003: it stays a job of its own.
            job("14", "bob", "gpu003", 3000, Some(3005), 1),
            // Running jobs are never packed, however recent.
            job("15", "bob", "gpu003", 3004, None, 1),
        ]
        .iter()
        .map(WindowJob::from)
        .collect();
        let mut data = GanttData::assemble("c", (0, 40_000, 3006), racks, &jobs, false);
        let before = data.jobs.len();
        pack_short_jobs(&mut data, 11);
        let ids: Vec<&str> = data.jobs.iter().map(|job| job.job_id.as_str()).collect();
        assert_eq!(ids, ["13", "14", "15"]);
        assert_eq!(data.packed_jobs, 3);
        assert_eq!(data.jobs.len() as u64 + data.packed_jobs, before as u64, "every job is drawn or counted");
        assert_eq!(data.min_duration, 11);
        assert_eq!(data.packed.len(), 2, "one bar on gpu001, and job 12 alone on gpu002");
        let first = data.packed[0];
        assert_eq!((first.node, first.start, first.end, first.count, first.gpus), (0, 1000, 1035, 3, 2));
        assert_eq!(data.users[first.user as usize], "bob", "bob's 30 GPU-seconds outweigh carol's 5");
        assert_eq!(data.users, ["alice", "bob", "carol"], "the tables name only what is drawn");
        assert_eq!(data.names.len(), 3, "the names of jobs 13, 14 and 15");
        assert_eq!((data.packed[1].node, data.packed[1].count), (1, 1));
        assert_eq!(data.packed_title(&first, Zone::UTC), "3 short jobs, 1970-01-01 00:16–00:17; zoom in to see them");
        let json = serde_json::to_string(&data).expect("serializes");
        let back: GanttData = serde_json::from_str(&json).expect("parses");
        assert_eq!(back.packed.len(), 2);
        assert!(back.packed.contains(&first));
        let legend = data.categories(ColourBy::User);
        let bob = legend.legend.iter().find(|entry| entry.label == "bob").expect("bob in the legend");
        assert_eq!(bob.count, 5, "bob's two bars of his own and the three jobs of the bar he used most");
        let mut nothing_short = sample();
        pack_short_jobs(&mut nothing_short, 10);
        assert!(nothing_short.packed.is_empty());
        assert_eq!(nothing_short.min_duration, 0, "nothing packed: the page needs no reload for detail");
    }

    #[test]
    fn lanes_pack_by_count_without_overlap() {
        let data = sample();
        let index = GanttIndex::new(&data, 3000);
        // gpu001: job 1 takes 8 lanes (16 GPUs over 2 nodes) until 2000, job 2 then takes lanes 0-3.
        assert_eq!(index.lanes[0], [(0, 0xff), (1, 0x0f)]);
        assert_eq!(index.node_jobs[14], [2]);
    }

    #[test]
    fn rows_follow_racks_and_expansion() {
        let data = sample();
        let mut expansion = Expansion::default();
        let rows = layout(&data.racks, &expansion, METRICS);
        assert_eq!(rows.rows.len(), 2 + 20);
        expansion.collapsed_racks.insert(1);
        expansion.expanded_nodes.insert(0);
        let rows = layout(&data.racks, &expansion, METRICS);
        assert_eq!(rows.rows.len(), 1 + 10 + 8 + 1);
        assert_eq!(rows.node_row[14], None);
        assert_eq!(rows.gpu_rows[0], Some(2));
        assert_eq!(rows.row_at(0.0), Some(0));
        assert_eq!(rows.row_at(METRICS.rack + 0.5), Some(1));
        assert_eq!(rows.row_at(rows.height + 1.0), None);
    }

    #[test]
    fn bars_land_on_their_rows_and_hit_testing_finds_them() {
        let data = sample();
        let index = GanttIndex::new(&data, 3000);
        let mut expansion = Expansion::default();
        expansion.collapsed_racks.insert(1);
        let rows = layout(&data.racks, &expansion, METRICS);
        let view = Viewport { start: 0.0, end: 10_000.0, left: 100.0, width: 1000.0 };
        let mut drawn = Vec::new();
        bars(&data, &index, &rows, &expansion, &view, 3000, (0.0, rows.height), |bar| drawn.push(bar));
        assert_eq!(drawn.len(), 4, "job 1 on two node rows, job 2 on one, job 3 on its folded rack");
        let running = drawn.iter().find(|bar| bar.job == 1).expect("running job drawn");
        assert!((running.x - 250.0).abs() < 1e-9 && (running.w - 150.0).abs() < 1e-9, "{running:?}");
        let y = rows.rows[rows.node_row[0].expect("visible") as usize].y + 4.0;
        assert_eq!(job_at(&data, &index, &rows, &view, 3000, (270.0, y)), Some(1));
        assert_eq!(job_at(&data, &index, &rows, &view, 3000, (900.0, y)), None);
        // Review "pages a tenant and a site can trust", smaller things: the label column showed the
        // tooltip of a job hidden beneath it.
        let panned = Viewport { start: 1500.0, end: 11_500.0, left: 100.0, width: 1000.0 };
        assert_eq!(
            job_at(&data, &index, &rows, &panned, 3000, (101.0, y)),
            Some(1),
            "a job at the view's start is found"
        );
        assert_eq!(job_at(&data, &index, &rows, &panned, 3000, (60.0, y)), None, "the label column names no job");
        let rack_y = rows.rows[rows.rack_row[1] as usize].y + 5.0;
        assert_eq!(job_at(&data, &index, &rows, &view, 3000, (300.0, rack_y)), Some(2));
    }

    #[test]
    fn touching_bars_of_one_colour_merge_per_row() {
        let bar = |x: f64, y: f64, w: f64| Bar { job: 0, x, y, w, h: 7.0 };
        let mut batches = Batches::default();
        batches.push("#000", &bar(10.0, 0.0, 5.0));
        batches.push("#000", &bar(15.2, 0.0, 5.0));
        batches.push("#fff", &bar(20.0, 0.0, 1.0));
        batches.push("#000", &bar(30.0, 0.0, 1.0));
        batches.push("#000", &bar(30.5, 9.0, 1.0));
        assert_eq!(batches.len(), 4);
        assert_eq!(batches.by_colour[0].1[0], (10.0, 0.0, 10.2, 7.0));
    }

    #[test]
    fn colour_tables_match_per_job_colours() {
        let data = sample();
        for by in ColourBy::ALL {
            let categories = data.categories(by);
            let table = data.colour_table(by, &categories);
            assert!((0..data.jobs.len()).all(|i| table[i] == data.colour(i, by, &categories)), "{by:?}");
        }
    }

    #[test]
    fn a_user_keeps_one_colour_whatever_window_or_filter_loaded_them() {
        // Regression (review "pages a tenant and a site can trust", problem 5): colours went to the top
        // nine users of what was loaded, so they changed with the zoom and the rest were grey "other".
        let slots = ColourSlots {
            users: [("alice".to_string(), 3), ("bob".to_string(), 4), ("carol".to_string(), 5)].into(),
            accounts: BTreeMap::new(),
        };
        let mut wide = sample();
        wide.slots = slots.clone();
        let known = hostlist::expand_lenient("gpu[001-020]");
        let racks = Topology::default().resolve("c", &known, 8);
        // A narrower window: bob is now the only user, and a big job of carol's appears.
        let jobs: Vec<WindowJob> =
            [job("2", "bob", "gpu001", 1500, None, 4), job("5", "carol", "gpu[001-020]", 1600, None, 160)]
                .iter()
                .map(WindowJob::from)
                .collect();
        let mut narrow = GanttData::assemble("c", (1400, 1800, 3000), racks, &jobs, false);
        narrow.slots = slots.clone();
        let colour_of = |data: &GanttData, user: &str| {
            let categories = data.categories(ColourBy::User);
            let index = data.jobs.iter().position(|job| data.users[job.user as usize] == user).expect("user's job");
            data.colour(index, ColourBy::User, &categories)
        };
        assert_eq!(colour_of(&wide, "bob"), colour_of(&narrow, "bob"));
        assert_eq!(colour_of(&wide, "bob"), slots.user("bob"));
        assert_eq!(colour_of(&narrow, "carol"), slots.user("carol"), "the largest job has its user's colour");
        assert_ne!(colour_of(&narrow, "carol"), crate::palette::OTHER);
        let categories = narrow.categories(ColourBy::User);
        let legend: Vec<&str> = categories.legend.iter().map(|entry| entry.label.as_str()).collect();
        assert_eq!(legend, ["bob", "carol"], "the legend names every user drawn");
        assert_eq!(job_colour("2"), narrow.colour(0, ColourBy::Job, &Categories::default()));
    }

    #[test]
    fn zoom_keeps_the_anchor_and_the_span_limits() {
        let view = Viewport { start: 0.0, end: 86_400.0, left: 100.0, width: 1000.0 };
        let zoomed = view.zoom(0.5, 600.0);
        assert!((zoomed.t(600.0) - view.t(600.0)).abs() < 1e-6);
        assert!((zoomed.end - zoomed.start - 43_200.0).abs() < 1e-6);
        assert!((view.zoom(1e-6, 600.0).end - view.zoom(1e-6, 600.0).start - MIN_SPAN).abs() < 1e-6);
        assert!((view.zoom(1e6, 600.0).end - view.zoom(1e6, 600.0).start - MAX_SPAN).abs() < 1e-6);
        let panned = view.pan(100.0);
        assert!((panned.start - 8640.0).abs() < 1e-6);
    }

    #[test]
    fn svg_draws_one_path_per_colour() {
        let mut data = sample();
        data.slots.users = [("alice".to_string(), 0), ("bob".to_string(), 1)].into();
        let svg = svg(&data, ColourBy::User, 1200.0, Zone::UTC);
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<path").count(), 2, "alice and bob");
        assert!(svg.contains("gpu001"));
    }
}
