//! The agent's typed configuration (TOML, `slurmlens-agent.example.toml`): the node, the `/metrics`
//! listener and one table per part. Every key has a default, so an empty file runs every part.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The node as Slurm names it; empty: the host name up to its first dot.
    pub node: String,
    /// The cluster as slurmdbd names it (trace batches, the topology's section).
    pub cluster: String,
    /// Where `/metrics` listens.
    pub listen: SocketAddr,
    pub bursts: BurstConfig,
    pub mesh: MeshConfig,
    pub cuda: CudaConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            node: String::new(),
            cluster: "cluster".into(),
            listen: SocketAddr::from(([0, 0, 0, 0], 9464)),
            bursts: BurstConfig::default(),
            mesh: MeshConfig::default(),
            cuda: CudaConfig::default(),
        }
    }
}

/// Micro-bursts: NIC counters sampled every `interval_ms`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BurstConfig {
    pub enabled: bool,
    /// Sampling period of the counters.
    pub interval_ms: u64,
    /// The window whose rate is the peak (the server's reading: 100 ms).
    pub window_ms: u64,
    /// Share of line rate that counts as a burst; the `threshold` label, as the server's catalogue writes it.
    pub threshold: f64,
    /// Line rate in bytes/s by device, over the port's `rate` file or the netdev's `speed`.
    pub line_rate_bytes_per_s: BTreeMap<String, f64>,
    /// Netdevs sampled where no RDMA device is; empty: every one but `lo`.
    pub netdevs: Vec<String>,
    /// Sysfs root (tests point it elsewhere).
    pub sysfs: PathBuf,
}

impl Default for BurstConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval_ms: 10,
            window_ms: 100,
            threshold: 0.9,
            line_rate_bytes_per_s: BTreeMap::new(),
            netdevs: Vec::new(),
            sysfs: PathBuf::from("/sys"),
        }
    }
}

/// The ping mesh: UDP probes to a rack-aware subset of the topology's nodes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshConfig {
    pub enabled: bool,
    /// The server's topology file (`[[cluster]]`/`[[cluster.rack]]`); none: no peers.
    pub topology: Option<PathBuf>,
    /// More nodes of the cluster as a hostlist, racked from their names where the file does not place them.
    pub nodes: String,
    /// UDP port every agent answers on and probes to.
    pub port: u16,
    /// Address the prober/responder binds (the RoCE interface's address on a site).
    pub bind: String,
    /// Node name → address; a node not listed is resolved by name.
    pub addresses: BTreeMap<String, String>,
    /// One probe to each selected peer per round.
    pub interval_ms: u64,
    /// A probe unanswered after this is lost.
    pub timeout_ms: u64,
    /// Peers beyond the rack and one per other rack, rotating each round.
    pub extra_peers: usize,
}

impl Default for MeshConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            topology: None,
            nodes: String::new(),
            port: 9465,
            bind: "0.0.0.0".into(),
            addresses: BTreeMap::new(),
            interval_ms: 1000,
            timeout_ms: 500,
            extra_peers: 1,
        }
    }
}

/// CUDA and NCCL activity from uprobes, summarised into the server's trace records.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaConfig {
    pub enabled: bool,
    /// Seconds per summary (`interval_s` of each record).
    pub interval_s: u32,
    /// How often `/proc` is scanned for processes that map the libraries.
    pub scan_interval_ms: u64,
    /// File names (up to the first `.so`) of the CUDA runtime and NCCL libraries.
    pub cudart_names: Vec<String>,
    pub nccl_names: Vec<String>,
    /// The slurmlens server (`http://host:port`); empty: records are only spooled.
    pub server: String,
    /// The file holding the cluster's ingest secret.
    pub secret_file: Option<PathBuf>,
    /// Where batches wait while the server is away.
    pub spool_dir: PathBuf,
    /// The spool's bound; the oldest batches go first past it.
    pub spool_max_bytes: u64,
    /// Root of `/proc` (tests point it elsewhere).
    pub proc_root: PathBuf,
}

impl Default for CudaConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval_s: 10,
            scan_interval_ms: 1000,
            cudart_names: vec!["libcudart".into()],
            nccl_names: vec!["libnccl".into()],
            server: String::new(),
            secret_file: None,
            spool_dir: PathBuf::from("/var/cache/slurmlens-agent"),
            spool_max_bytes: 64 << 20,
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::parse(&text).map_err(|error| match error {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.into(), message },
            other => other,
        })
    }

    /// Parses and checks TOML text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config: Self =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: PathBuf::new(), message: e.to_string() })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bursts = &self.bursts;
        if bursts.interval_ms == 0 || bursts.window_ms < bursts.interval_ms {
            return Err(ConfigError::Invalid("[bursts] needs 0 < interval_ms <= window_ms".into()));
        }
        if !(bursts.threshold > 0.0 && bursts.threshold <= 1.0) {
            return Err(ConfigError::Invalid("[bursts] threshold is a share of line rate in (0, 1]".into()));
        }
        if self.mesh.interval_ms == 0 || self.mesh.timeout_ms == 0 || self.mesh.timeout_ms > self.mesh.interval_ms * 10
        {
            return Err(ConfigError::Invalid(
                "[mesh] needs interval_ms > 0 and 0 < timeout_ms <= 10 × interval_ms".into(),
            ));
        }
        if self.cuda.interval_s == 0 || self.cuda.scan_interval_ms == 0 {
            return Err(ConfigError::Invalid("[cuda] interval_s and scan_interval_ms must be above 0".into()));
        }
        Ok(())
    }

    /// The node's name: configured, else the host name up to its first dot.
    pub fn node_name(&self) -> String {
        if !self.node.is_empty() {
            return self.node.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        host.trim().split('.').next().unwrap_or_default().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_configuration_loads_with_every_part_on() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("slurmlens-agent.example.toml");
        let config = Config::load(&path).expect("the example loads");
        assert!(config.bursts.enabled && config.mesh.enabled && config.cuda.enabled);
        assert_eq!(config.bursts.interval_ms, 10);
        assert_eq!(config.bursts.threshold.to_string(), "0.9", "the server's catalogue reads threshold=\"0.9\"");
    }

    #[test]
    fn an_empty_file_is_every_default_and_nonsense_is_refused() {
        assert_eq!(Config::parse("").expect("empty is fine"), Config::default());
        for bad in
            ["[bursts]\ninterval_ms = 0", "[bursts]\nthreshold = 1.5", "[mesh]\ninterval_ms = 0", "[nope]\nx = 1"]
        {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }
}
