//! Where nodes stand: racks of nodes with their GPU counts, from a topology file or, without one, from
//! node names (`gpu001`–`gpu010` share rack 1, `gpu011`–`gpu020` rack 2, …).
//!
//! The file is TOML:
//! ```toml
//! [[cluster]]
//! name = "sakura"
//! gpus_per_node = 8
//! [[cluster.rack]]
//! name = "A01"
//! nodes = "gpu[001-010]"   # top to bottom
//! ```
//!
//! Reading the file needs the feature `toml` (the server's build); the web pages only resolve racks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hostlist;

/// Nodes per rack when racks are derived from names.
pub const DEFAULT_RACK_SIZE: u64 = 10;

/// The parsed topology file: racks per cluster. Empty means "derive everything from node names".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The clusters the file lays out; a cluster it does not name gets racks from node names.
    #[serde(default)]
    pub cluster: Vec<ClusterTopology>,
}

/// One cluster's racks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterTopology {
    /// The cluster's name as slurmdbd knows it.
    pub name: String,
    /// GPUs per node unless a rack says otherwise.
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// The racks, in display order.
    #[serde(default)]
    pub rack: Vec<RackSpec>,
}

/// One rack: its nodes as a hostlist, top to bottom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RackSpec {
    /// The rack's label on the grid.
    pub name: String,
    /// A hostlist expression (`gpu[001-010]`); a malformed item names one node verbatim.
    pub nodes: String,
    /// GPUs per node of this rack, over the cluster's.
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
}

/// A cluster laid out: racks in order, each naming its nodes by index into `nodes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Racks {
    /// The racks, in display order.
    pub racks: Vec<Rack>,
    /// Every node placed, rack by rack, top to bottom.
    pub nodes: Vec<NodePlace>,
    /// Where the GPU counts come from: `topology` or `inferred` (the most GPUs seen on one node).
    pub gpus_source: String,
}

/// One rack of [`Racks`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rack {
    /// From the file, or derived from the node names (`gpu r01`, `login*`).
    pub name: String,
    /// Indices into [`Racks::nodes`], top to bottom.
    pub nodes: Vec<u32>,
}

/// One node of [`Racks`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePlace {
    /// The node's name.
    pub name: String,
    /// Index into [`Racks::racks`].
    pub rack: u32,
    /// GPUs the node holds, from the file or inferred.
    pub gpus: u32,
}

impl Topology {
    /// Parses the TOML text of a topology file.
    #[cfg(feature = "toml")]
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let topology: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        for cluster in &topology.cluster {
            for rack in &cluster.rack {
                if hostlist::expand_lenient(&rack.nodes).is_empty() {
                    return Err(format!("rack `{}` of cluster `{}` names no nodes", rack.name, cluster.name));
                }
            }
        }
        Ok(topology)
    }

    /// Lays out `cluster`'s nodes (`known`: every node the sources name). Racks from the file come
    /// first; nodes it does not place are derived from their names. `inferred_gpus` is used for nodes
    /// whose GPU count the file does not give.
    pub fn resolve(&self, cluster: &str, known: &[String], inferred_gpus: u32) -> Racks {
        let spec = self.cluster.iter().find(|entry| entry.name == cluster);
        let mut racks = Racks {
            gpus_source: if spec.and_then(|s| s.gpus_per_node).is_some() { "topology" } else { "inferred" }.into(),
            ..Racks::default()
        };
        let mut placed: BTreeMap<String, u32> = BTreeMap::new();
        if let Some(spec) = spec {
            for rack_spec in &spec.rack {
                let gpus = rack_spec.gpus_per_node.or(spec.gpus_per_node).unwrap_or(inferred_gpus);
                let rack_index = racks.racks.len() as u32;
                let mut rack = Rack { name: rack_spec.name.clone(), nodes: Vec::new() };
                for name in hostlist::expand_lenient(&rack_spec.nodes) {
                    if placed.contains_key(&name) {
                        continue;
                    }
                    let node_index = racks.nodes.len() as u32;
                    placed.insert(name.clone(), node_index);
                    racks.nodes.push(NodePlace { name, rack: rack_index, gpus });
                    rack.nodes.push(node_index);
                }
                racks.racks.push(rack);
            }
        }
        let gpus = spec.and_then(|s| s.gpus_per_node).unwrap_or(inferred_gpus);
        let mut derived: BTreeMap<(String, u64), Vec<&String>> = BTreeMap::new();
        let mut sorted: Vec<&String> = known.iter().filter(|name| !placed.contains_key(*name)).collect();
        sorted.sort_by_key(|name| natural_key(name));
        sorted.dedup();
        for name in sorted {
            let (prefix, number) = natural_key(name);
            let rack_number = number.map_or(0, |n| n.saturating_sub(1) / DEFAULT_RACK_SIZE + 1);
            derived.entry((prefix, rack_number)).or_default().push(name);
        }
        for ((prefix, rack_number), names) in derived {
            let rack_index = racks.racks.len() as u32;
            let name = if rack_number == 0 { format!("{prefix}*") } else { format!("{prefix} r{rack_number:02}") };
            let mut rack = Rack { name, nodes: Vec::new() };
            for node in names {
                let node_index = racks.nodes.len() as u32;
                racks.nodes.push(NodePlace { name: node.clone(), rack: rack_index, gpus });
                rack.nodes.push(node_index);
            }
            racks.racks.push(rack);
        }
        racks
    }
}

impl Racks {
    /// Index of each node name.
    pub fn index(&self) -> BTreeMap<&str, u32> {
        self.nodes.iter().enumerate().map(|(index, node)| (node.name.as_str(), index as u32)).collect()
    }
}

/// `gpu012` → (`gpu`, Some(12)); `login` → (`login`, None). Sorting by it orders `n2` before `n10`.
pub fn natural_key(name: &str) -> (String, Option<u64>) {
    let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, number) = name.split_at(digits);
    (prefix.to_string(), number.parse().ok())
}

/// The GPU count to assume per node when no topology gives one: the most seen on one node, rounded up
/// to a power of two (GPU servers come with 1, 2, 4 or 8), at least 1.
pub fn infer_gpus_per_node(most_seen: u64) -> u32 {
    let most = u32::try_from(most_seen.clamp(1, 64)).unwrap_or(64);
    most.next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        hostlist::expand_lenient(expr)
    }

    #[test]
    fn hundred_numbered_nodes_make_ten_racks_of_ten() {
        let racks = Topology::default().resolve("sakura", &names("gpu[001-100]"), 8);
        assert_eq!(racks.racks.len(), 10);
        assert!(racks.racks.iter().all(|rack| rack.nodes.len() == 10));
        assert_eq!(racks.nodes[racks.racks[0].nodes[9] as usize].name, "gpu010");
        assert_eq!(racks.nodes[racks.racks[1].nodes[0] as usize].name, "gpu011");
        assert_eq!(racks.gpus_source, "inferred");
    }

    #[test]
    fn four_small_nodes_make_one_rack_in_natural_order() {
        let known = vec!["n10".to_string(), "n2".into(), "n1".into(), "n11".into()];
        let racks = Topology::default().resolve("lab", &known, 4);
        assert_eq!(racks.racks.len(), 2, "n1–n10 share rack 1, n11 starts rack 2");
        let first: Vec<_> = racks.racks[0].nodes.iter().map(|&i| racks.nodes[i as usize].name.as_str()).collect();
        assert_eq!(first, ["n1", "n2", "n10"]);
    }

    #[test]
    #[cfg(feature = "toml")]
    fn a_topology_file_places_nodes_and_unknown_ones_follow() {
        let topology = Topology::from_toml(
            "[[cluster]]\nname = \"lab\"\ngpus_per_node = 4\n[[cluster.rack]]\nname = \"A\"\nnodes = \"n[3-4]\"\n",
        )
        .expect("valid topology");
        let racks = topology.resolve("lab", &names("n[1-4]"), 2);
        assert_eq!(racks.racks[0].name, "A");
        assert_eq!(racks.racks[0].nodes.len(), 2);
        assert_eq!(racks.nodes.len(), 4);
        assert!(racks.nodes.iter().all(|node| node.gpus == 4));
        assert_eq!(racks.gpus_source, "topology");
    }

    #[test]
    #[cfg(feature = "toml")]
    fn the_demo_topology_places_every_demo_node() {
        let topology = Topology::from_toml(include_str!("../../../e2e/topology.toml")).expect("demo topology parses");
        let racks = topology.resolve("sakura", &names("gpu[001-100]"), 1);
        assert_eq!((racks.racks.len(), racks.nodes.len()), (10, 100));
        assert!(racks.nodes.iter().all(|node| node.gpus == 8));
        assert_eq!(topology.resolve("lab", &names("n[1-4]"), 1).racks.len(), 1);
    }

    #[test]
    #[cfg(feature = "toml")]
    fn refuses_unknown_keys_and_empty_racks() {
        assert!(Topology::from_toml("[[cluster]]\nname = \"x\"\nrackz = 1\n").is_err());
        assert!(
            Topology::from_toml("[[cluster]]\nname = \"x\"\n[[cluster.rack]]\nname = \"A\"\nnodes = \"\"\n").is_err()
        );
    }

    #[test]
    fn infers_power_of_two_gpu_counts() {
        assert_eq!(infer_gpus_per_node(0), 1);
        assert_eq!(infer_gpus_per_node(3), 4);
        assert_eq!(infer_gpus_per_node(8), 8);
    }
}
