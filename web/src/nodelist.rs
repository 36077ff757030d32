//! The node list (`/nodes`): every node of a cluster with its state as slurmdbd knows it (its open
//! down or drain event, else whether jobs hold it), its GPUs and rack, its health badge and the jobs
//! running on it that the viewer may see. Plain Rust, tested natively; the page is `pages::nodes`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use slurmlens_slurm::topology::Racks;
use slurmlens_wire as wire;

use crate::gantt::{WindowJob, per_node_gpus};

/// What a node's state comes to, for the summary, the filter and its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateClass {
    /// `DOWN`, or failed.
    Down,
    /// Drained or draining: nothing new starts there.
    Drained,
    /// Jobs hold GPUs of it.
    Allocated,
    /// Up and free.
    Idle,
}

impl StateClass {
    /// Every class, worst first.
    pub const ALL: [StateClass; 4] = [Self::Down, Self::Drained, Self::Allocated, Self::Idle];

    /// The class of a state as slurmdbd's node events and running jobs give it (`DOWN+NOT_RESPONDING`,
    /// `ALLOCATED+DRAIN`, `IDLE`).
    pub fn of(state: &str) -> Self {
        let words: Vec<&str> = state.split('+').collect();
        if words.iter().any(|word| matches!(*word, "DOWN" | "FAIL" | "FAILING")) {
            Self::Down
        } else if words.contains(&"DRAIN") {
            Self::Drained
        } else if words.iter().any(|word| matches!(*word, "ALLOCATED" | "MIXED" | "COMPLETING")) {
            Self::Allocated
        } else {
            Self::Idle
        }
    }

    /// The word on the page and in `state=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Down => "down",
            Self::Drained => "drained",
            Self::Allocated => "allocated",
            Self::Idle => "idle",
        }
    }

    /// The class a `state=` word names.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == word)
    }
}

/// A job running on a node, as the list names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeJob {
    pub job_id: String,
    pub user: String,
    /// GPUs it holds on this node (its total split evenly over its nodes, rounded up).
    pub gpus: u64,
}

/// One node's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    pub node: String,
    pub rack: String,
    /// GPUs the node holds ([`NodeList::gpus_source`] says from where).
    pub gpus: u32,
    /// As slurmdbd's events and running jobs give it (`IDLE`, `ALLOCATED`, `DOWN+NOT_RESPONDING`).
    pub state: String,
    pub class: StateClass,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Epoch seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_since: Option<i64>,
    /// GPUs every running job holds there, the viewer's or not.
    pub alloc_gpus: u64,
    /// Jobs running there, the viewer's or not.
    pub running_jobs: u32,
    /// The running jobs the viewer may see.
    pub jobs: Vec<NodeJob>,
    /// Those jobs' partitions.
    pub partitions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<wire::NodeHealth>,
}

/// Every node of a cluster, rack by rack.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeList {
    pub cluster: String,
    /// When it was read, epoch seconds.
    pub at: i64,
    /// `topology` (the site's file) or `inferred` (the most GPUs seen on one node).
    pub gpus_source: String,
    /// Whether the health badges were read (the source can fail: the list then has none).
    pub health_read: bool,
    pub rows: Vec<NodeRow>,
}

impl NodeList {
    /// The rows of `racks`' nodes in rack order, with `nodes`' states, `jobs` (running at `at`, as the
    /// viewer may see them) and the `health` badges.
    pub fn assemble(
        (cluster, at): (&str, i64),
        racks: &Racks,
        nodes: &[wire::Node],
        jobs: &[WindowJob],
        health: Option<&[wire::NodeHealthItem]>,
    ) -> Self {
        let states: BTreeMap<&str, &wire::Node> = nodes.iter().map(|node| (node.node.as_str(), node)).collect();
        let badges: BTreeMap<&str, &wire::NodeHealth> =
            health.unwrap_or_default().iter().map(|item| (item.node.as_str(), &item.health)).collect();
        let mut on_node: BTreeMap<&str, Vec<&WindowJob>> = BTreeMap::new();
        for job in jobs.iter().filter(|job| job.start > 0 && job.start <= at && (job.end == 0 || job.end > at)) {
            for host in job.hosts.iter() {
                on_node.entry(host.as_str()).or_default().push(job);
            }
        }
        let rows = racks
            .nodes
            .iter()
            .map(|place| {
                let name = place.name.as_str();
                let known = states.get(name);
                let state = known.map_or_else(|| "IDLE".to_string(), |node| node.state.clone());
                let running = on_node.get(name).map(Vec::as_slice).unwrap_or_default();
                let mut partitions: Vec<String> = running.iter().map(|job| job.partition.to_string()).collect();
                partitions.sort();
                partitions.dedup();
                NodeRow {
                    node: place.name.clone(),
                    rack: racks.racks.get(place.rack as usize).map(|rack| rack.name.clone()).unwrap_or_default(),
                    gpus: place.gpus,
                    class: StateClass::of(&state),
                    state,
                    reason: known.and_then(|node| node.reason.clone()),
                    reason_since: known.and_then(|node| node.reason_since).map(|since| since.timestamp()),
                    alloc_gpus: known.map_or(0, |node| node.alloc_gpus),
                    running_jobs: known.map_or(0, |node| node.running_jobs),
                    jobs: running
                        .iter()
                        .map(|job| NodeJob {
                            job_id: job.job_id.to_string(),
                            user: job.user.to_string(),
                            gpus: per_node_gpus(job.gpus, job.hosts.len().max(1)),
                        })
                        .collect(),
                    partitions,
                    health: badges.get(name).map(|health| (*health).clone()),
                }
            })
            .collect();
        Self {
            cluster: cluster.to_string(),
            at,
            gpus_source: racks.gpus_source.clone(),
            health_read: health.is_some(),
            rows,
        }
    }

    /// How many nodes are in each class, worst first (classes without a node left out).
    pub fn counts(&self) -> Vec<(StateClass, usize)> {
        StateClass::ALL
            .into_iter()
            .map(|class| (class, self.rows.iter().filter(|row| row.class == class).count()))
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    /// GPUs of every node, and those jobs hold.
    pub fn gpu_totals(&self) -> (u64, u64) {
        let total = self.rows.iter().map(|row| u64::from(row.gpus)).sum();
        let held = self.rows.iter().map(|row| row.alloc_gpus).sum();
        (total, held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use slurmlens_slurm::topology::Topology;

    fn node(name: &str, state: &str, jobs: u32, gpus: u64) -> wire::Node {
        wire::Node {
            node: name.into(),
            state: state.into(),
            reason: state.contains("DOWN").then(|| "Xid 79".to_string()),
            reason_since: state.contains("DOWN").then(|| chrono::Utc.timestamp_opt(1_000, 0).single().expect("a time")),
            running_jobs: jobs,
            alloc_gpus: gpus,
        }
    }

    fn job(id: &str, hosts: &[&str], gpus: u64, start: i64, end: i64) -> WindowJob {
        WindowJob {
            job_id: id.into(),
            user: "alice".into(),
            partition: "gpu".into(),
            start,
            end,
            gpus,
            hosts: hosts.iter().map(|host| host.to_string()).collect::<Vec<_>>().into(),
            ..WindowJob::default()
        }
    }

    #[test]
    fn every_node_is_listed_with_its_state_its_running_jobs_and_the_summary_counts_them() {
        let names: Vec<String> = ["gpu001", "gpu002", "gpu003", "gpu004"].map(String::from).to_vec();
        let racks = Topology::default().resolve("c", &names, 8);
        let nodes = [
            node("gpu001", "ALLOCATED", 2, 8),
            node("gpu002", "DOWN+NOT_RESPONDING", 0, 0),
            node("gpu003", "ALLOCATED+DRAIN", 1, 4),
        ];
        let jobs = [
            job("10", &["gpu001", "gpu003"], 8, 100, 0),
            job("11", &["gpu001"], 4, 100, 0),
            job("12", &["gpu001"], 4, 100, 150),
        ];
        let health = [wire::NodeHealthItem {
            node: "gpu002".into(),
            health: wire::NodeHealth { level: wire::HealthLevel::Fault, reasons: vec!["node DOWN: Xid 79".into()] },
        }];
        let list = NodeList::assemble(("c", 200), &racks, &nodes, &jobs, Some(&health));
        let classes: Vec<(&str, StateClass)> = list.rows.iter().map(|row| (row.node.as_str(), row.class)).collect();
        assert_eq!(
            classes,
            [
                ("gpu001", StateClass::Allocated),
                ("gpu002", StateClass::Down),
                ("gpu003", StateClass::Drained),
                ("gpu004", StateClass::Idle),
            ],
            "a node slurmdbd names without events or jobs is idle"
        );
        let gpu001 = &list.rows[0];
        let ids: Vec<(&str, u64)> = gpu001.jobs.iter().map(|job| (job.job_id.as_str(), job.gpus)).collect();
        assert_eq!(ids, [("10", 4), ("11", 4)], "job 12 ended before the moment; 10's 8 GPUs split over 2 nodes");
        assert_eq!(gpu001.partitions, ["gpu"]);
        assert_eq!(list.rows[1].reason.as_deref(), Some("Xid 79"));
        assert_eq!(list.rows[1].health.as_ref().map(|health| health.level), Some(wire::HealthLevel::Fault));
        assert_eq!(
            list.counts(),
            [(StateClass::Down, 1), (StateClass::Drained, 1), (StateClass::Allocated, 1), (StateClass::Idle, 1)]
        );
        assert_eq!(list.gpu_totals(), (32, 12));
    }

    #[test]
    fn states_fall_into_their_classes() {
        for (state, class) in [
            ("IDLE+DRAIN", StateClass::Drained),
            ("DOWN+DRAIN", StateClass::Down),
            ("MIXED", StateClass::Allocated),
            ("IDLE", StateClass::Idle),
        ] {
            assert_eq!(StateClass::of(state), class, "{state}");
            assert_eq!(StateClass::parse(class.as_str()), Some(class));
        }
    }
}
