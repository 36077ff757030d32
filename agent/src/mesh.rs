//! The ping mesh (R-Pingmesh style, over UDP): every agent answers probes on one port and probes a
//! rack-aware subset of the cluster's nodes each round (its rack, one node of every other rack, rotating
//! extras), and exports per path probes, answers and an RTT histogram in ns under the names and labels
//! the server's blame reads (`FaultSeries`: `rpingmesh_*`, `source_tor`/`target_tor`). Racks come from
//! the server's topology file, so the paths' ToRs are the racks the server names.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slurmlens_slurm::hostlist;
use slurmlens_slurm::topology::{Racks, Topology};
use tokio::net::UdpSocket;

use crate::config::MeshConfig;
use crate::metrics::{Exporter, escape};

/// Upper bounds of the RTT histogram's buckets, in ns (10 µs to 1 s).
pub const RTT_BUCKETS_NS: [f64; 15] =
    [1e4, 2.5e4, 5e4, 1e5, 2.5e5, 5e5, 1e6, 2.5e6, 5e6, 1e7, 2.5e7, 5e7, 1e8, 2.5e8, 1e9];

const MAGIC: &[u8; 4] = b"SLPM";
const REQUEST: u8 = 1;
const REPLY: u8 = 2;
const PACKET_LEN: usize = 64;

/// The cluster laid out as the server lays it out, and this node's place in it.
#[derive(Debug, Clone)]
pub struct Mesh {
    pub me: String,
    racks: Racks,
    my_rack: usize,
}

impl Mesh {
    /// Places `me` among the topology's nodes of `cluster` and `extra_nodes` (a hostlist). `None` where
    /// `me` is not among them.
    pub fn new(topology: &Topology, cluster: &str, extra_nodes: &str, me: &str) -> Option<Self> {
        let mut known: Vec<String> = hostlist::expand_lenient(extra_nodes);
        if let Some(spec) = topology.cluster.iter().find(|entry| entry.name == cluster) {
            for rack in &spec.rack {
                known.extend(hostlist::expand_lenient(&rack.nodes));
            }
        }
        known.push(me.to_string());
        let racks = topology.resolve(cluster, &known, 0);
        let my_rack = racks.nodes.iter().find(|place| place.name == me)?.rack as usize;
        Some(Self { me: me.to_string(), racks, my_rack })
    }

    /// The rack (ToR) of `node`, as the server names it.
    pub fn rack_of(&self, node: &str) -> Option<&str> {
        let place = self.racks.nodes.iter().find(|place| place.name == node)?;
        self.racks.racks.get(place.rack as usize).map(|rack| rack.name.as_str())
    }

    fn names(&self, rack: usize) -> Vec<&str> {
        self.racks.racks[rack].nodes.iter().map(|&i| self.racks.nodes[i as usize].name.as_str()).collect()
    }

    /// The peers of round `round`: every other node of this rack, one node of each other rack (a different
    /// one each round, starting from a place that differs by node), and `extra` more of the rest, rotating.
    pub fn peers(&self, round: u64, extra: usize) -> Vec<String> {
        let offset = stable_hash(&self.me).wrapping_add(round);
        let mut chosen: Vec<String> =
            self.names(self.my_rack).into_iter().filter(|n| *n != self.me).map(String::from).collect();
        for rack in (0..self.racks.racks.len()).filter(|&rack| rack != self.my_rack) {
            let names = self.names(rack);
            if !names.is_empty() {
                chosen.push(names[(offset % names.len() as u64) as usize].to_string());
            }
        }
        let rest: Vec<&str> = self
            .racks
            .nodes
            .iter()
            .map(|p| p.name.as_str())
            .filter(|n| *n != self.me && !chosen.iter().any(|c| c == n))
            .collect();
        for i in 0..extra.min(rest.len()) {
            let at = (round as usize).wrapping_mul(extra).wrapping_add(i) % rest.len();
            chosen.push(rest[at].to_string());
        }
        chosen
    }
}

/// FNV-1a: a hash that is the same on every node and release.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
}

/// One path's counts.
#[derive(Debug, Clone, Default)]
struct PathStats {
    target_tor: String,
    probes: u64,
    successes: u64,
    buckets: [u64; RTT_BUCKETS_NS.len()],
    rtt_sum_ns: f64,
}

#[derive(Debug, Default)]
struct State {
    paths: BTreeMap<String, PathStats>,
    outstanding: HashMap<u64, (String, Instant)>,
    answered: u64,
    peers_now: usize,
    unresolved: BTreeMap<String, String>,
}

/// The prober and responder's shared state, exported on `/metrics`.
pub struct Prober {
    mesh: Mesh,
    config: MeshConfig,
    state: Mutex<State>,
    epoch: Instant,
}

impl Prober {
    pub fn new(mesh: Mesh, config: MeshConfig) -> Self {
        Self { mesh, config, state: Mutex::new(State::default()), epoch: Instant::now() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn address_of(&self, node: &str) -> Result<SocketAddr, String> {
        let host = self.config.addresses.get(node).map_or(node, String::as_str);
        (host, self.config.port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| format!("{host} resolves to no address"))
    }

    /// Records a probe sent now; a full table of unanswered probes (a dead network) counts the oldest lost.
    fn sent(&self, seq: u64, target: &str) {
        let mut state = self.state();
        let target_tor = self.mesh.rack_of(target).unwrap_or_default().to_string();
        state.paths.entry(target.to_string()).or_insert_with(|| PathStats { target_tor, ..PathStats::default() });
        state.outstanding.insert(seq, (target.to_string(), Instant::now()));
    }

    /// Counts the probes unanswered for longer than the timeout as lost.
    fn expire(&self, timeout: Duration) {
        let mut state = self.state();
        let now = Instant::now();
        let expired: Vec<u64> = state
            .outstanding
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) > timeout)
            .map(|(&seq, _)| seq)
            .collect();
        for seq in expired {
            if let Some((target, _)) = state.outstanding.remove(&seq)
                && let Some(path) = state.paths.get_mut(&target)
            {
                path.probes += 1;
            }
        }
    }

    fn answered(&self, seq: u64, timeout: Duration) {
        let mut state = self.state();
        let Some((target, at)) = state.outstanding.remove(&seq) else { return };
        let rtt = at.elapsed();
        let Some(path) = state.paths.get_mut(&target) else { return };
        path.probes += 1;
        if rtt <= timeout {
            let rtt_ns = rtt.as_nanos() as f64;
            path.successes += 1;
            path.rtt_sum_ns += rtt_ns;
            for (bucket, bound) in path.buckets.iter_mut().zip(RTT_BUCKETS_NS) {
                if rtt_ns <= bound {
                    *bucket += 1;
                }
            }
        }
    }

    /// Binds the port, then answers and probes until the process ends.
    pub async fn run(self: Arc<Self>) -> std::io::Result<()> {
        let bind: SocketAddr = format!("{}:{}", self.config.bind, self.config.port)
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("[mesh] bind: {e}")))?;
        let socket = Arc::new(UdpSocket::bind(bind).await?);
        let receiver = tokio::spawn(Arc::clone(&self).receive(Arc::clone(&socket)));
        let interval = Duration::from_millis(self.config.interval_ms);
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let mut ticker = tokio::time::interval(interval);
        let mut seq: u64 = 0;
        for round in 0u64.. {
            ticker.tick().await;
            if receiver.is_finished() {
                break;
            }
            self.expire(timeout);
            let peers = self.mesh.peers(round, self.config.extra_peers);
            self.state().peers_now = peers.len();
            for peer in peers {
                let address = match self.address_of(&peer) {
                    Ok(address) => address,
                    Err(why) => {
                        let mut state = self.state();
                        if state.unresolved.insert(peer.clone(), why.clone()).is_none() {
                            tracing::warn!(peer, "ping mesh: cannot resolve the peer: {why}");
                        }
                        continue;
                    }
                };
                seq += 1;
                self.sent(seq, &peer);
                let packet = packet(REQUEST, seq, self.epoch.elapsed().as_nanos() as u64);
                // A send error (no route) is a lost probe: it stays outstanding and expires.
                let _ = socket.send_to(&packet, address).await;
            }
        }
        receiver.await.map_err(std::io::Error::other)?
    }

    async fn receive(self: Arc<Self>, socket: Arc<UdpSocket>) -> std::io::Result<()> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let mut buffer = [0u8; PACKET_LEN];
        loop {
            let (length, from) = socket.recv_from(&mut buffer).await?;
            let Some((kind, seq, stamp)) = parse(&buffer[..length]) else { continue };
            match kind {
                REQUEST => {
                    let _ = socket.send_to(&packet(REPLY, seq, stamp), from).await;
                    self.state().answered += 1;
                }
                REPLY => self.answered(seq, timeout),
                _ => {}
            }
        }
    }
}

fn packet(kind: u8, seq: u64, stamp: u64) -> [u8; PACKET_LEN] {
    let mut packet = [0u8; PACKET_LEN];
    packet[..4].copy_from_slice(MAGIC);
    packet[4] = kind;
    packet[8..16].copy_from_slice(&seq.to_le_bytes());
    packet[16..24].copy_from_slice(&stamp.to_le_bytes());
    packet
}

fn parse(packet: &[u8]) -> Option<(u8, u64, u64)> {
    if packet.len() != PACKET_LEN || &packet[..4] != MAGIC {
        return None;
    }
    let word = |at: usize| packet.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    Some((packet[4], word(8)?, word(16)?))
}

impl Exporter for Prober {
    fn render(&self, out: &mut String) {
        let state = self.state();
        let source = escape(&self.mesh.me);
        let source_tor = escape(self.mesh.rack_of(&self.mesh.me).unwrap_or_default());
        let labels = |target: &str, path: &PathStats| {
            format!(
                "source_tor=\"{source_tor}\",target_tor=\"{}\",source=\"{source}\",target=\"{}\"",
                escape(&path.target_tor),
                escape(target)
            )
        };
        out.push_str("# HELP rpingmesh_probe_total Probes sent and resolved (answered or timed out) per path.\n");
        out.push_str("# TYPE rpingmesh_probe_total counter\n");
        for (target, path) in &state.paths {
            let _ = writeln!(out, "rpingmesh_probe_total{{{}}} {}", labels(target, path), path.probes);
        }
        out.push_str("# TYPE rpingmesh_probe_success_total counter\n");
        for (target, path) in &state.paths {
            let _ = writeln!(out, "rpingmesh_probe_success_total{{{}}} {}", labels(target, path), path.successes);
        }
        out.push_str("# HELP rpingmesh_network_rtt_ns Round-trip time of answered probes, in ns.\n");
        out.push_str("# TYPE rpingmesh_network_rtt_ns histogram\n");
        for (target, path) in &state.paths {
            let labels = labels(target, path);
            for (count, bound) in path.buckets.iter().zip(RTT_BUCKETS_NS) {
                let _ = writeln!(out, "rpingmesh_network_rtt_ns_bucket{{{labels},le=\"{bound:e}\"}} {count}");
            }
            let _ = writeln!(out, "rpingmesh_network_rtt_ns_bucket{{{labels},le=\"+Inf\"}} {}", path.successes);
            let _ = writeln!(out, "rpingmesh_network_rtt_ns_sum{{{labels}}} {}", path.rtt_sum_ns);
            let _ = writeln!(out, "rpingmesh_network_rtt_ns_count{{{labels}}} {}", path.successes);
        }
        out.push_str("# TYPE slurmlens_agent_mesh_peers gauge\n");
        let _ = writeln!(out, "slurmlens_agent_mesh_peers {}", state.peers_now);
        out.push_str("# TYPE slurmlens_agent_mesh_answered_total counter\n");
        let _ = writeln!(out, "slurmlens_agent_mesh_answered_total {}", state.answered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        Topology::from_toml(
            r#"
[[cluster]]
name = "c"
[[cluster.rack]]
name = "A"
nodes = "a[1-4]"
[[cluster.rack]]
name = "B"
nodes = "b[1-4]"
[[cluster.rack]]
name = "C"
nodes = "c[1-2]"
"#,
        )
        .expect("a valid topology")
    }

    #[test]
    fn peers_are_the_rack_one_per_other_rack_and_a_rotating_extra() {
        let mesh = Mesh::new(&topology(), "c", "", "a1").expect("a1 is placed");
        let peers = mesh.peers(0, 1);
        assert_eq!(&peers[..3], ["a2", "a3", "a4"], "{peers:?}");
        let in_rack = |rack: char| peers.iter().filter(|p| p.starts_with(rack)).count();
        assert_eq!(peers.len(), 6, "3 of the rack, one of B, one of C, one extra: {peers:?}");
        assert!(in_rack('b') >= 1 && in_rack('c') >= 1, "{peers:?}");
        let mut every_b = std::collections::BTreeSet::new();
        for round in 0..8 {
            every_b.extend(mesh.peers(round, 0).into_iter().filter(|p| p.starts_with('b')));
        }
        assert_eq!(every_b.len(), 4, "over four rounds every node of B is probed: {every_b:?}");
    }

    #[test]
    fn nodes_outside_the_file_are_racked_from_their_names_as_the_server_does() {
        let mesh = Mesh::new(&Topology::default(), "lab", "n[1-4]", "n2").expect("n2 is placed");
        assert_eq!(mesh.rack_of("n2"), Some("n r01"));
        assert_eq!(mesh.peers(0, 0), ["n1", "n3", "n4"]);
        assert!(Mesh::new(&Topology::default(), "lab", "n[1-4]", "n9").is_some(), "itself is always known");
    }

    #[test]
    fn a_lost_probe_and_an_answered_one_show_on_their_paths() {
        let mesh = Mesh::new(&topology(), "c", "", "a1").expect("a1 is placed");
        let prober = Prober::new(mesh, MeshConfig::default());
        prober.sent(1, "b2");
        prober.sent(2, "c1");
        prober.answered(2, Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(5));
        prober.expire(Duration::from_millis(1));
        let mut out = String::new();
        prober.render(&mut out);
        let path = |target_tor: &str, target: &str| {
            format!("source_tor=\"A\",target_tor=\"{target_tor}\",source=\"a1\",target=\"{target}\"")
        };
        assert!(out.contains(&format!("rpingmesh_probe_total{{{}}} 1", path("B", "b2"))), "{out}");
        assert!(out.contains(&format!("rpingmesh_probe_success_total{{{}}} 0", path("B", "b2"))), "{out}");
        assert!(out.contains(&format!("rpingmesh_probe_success_total{{{}}} 1", path("C", "c1"))), "{out}");
        assert!(
            out.contains(&format!("rpingmesh_network_rtt_ns_bucket{{{},le=\"+Inf\"}} 1", path("C", "c1"))),
            "{out}"
        );
    }

    #[test]
    fn packets_round_trip_and_strangers_are_ignored() {
        assert_eq!(parse(&packet(REQUEST, 7, 9)), Some((REQUEST, 7, 9)));
        assert_eq!(parse(b"hello"), None);
    }
}
