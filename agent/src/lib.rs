//! slurmlens-agent: one process per node that makes the data the server's three node-side readings need:
//! 100 ms NIC peaks (`burst`), a rack-aware ping mesh (`mesh`) and CUDA/NCCL activity from eBPF uprobes
//! (`cuda`). Each part starts on its own; one that cannot (no BPF, no device, no peers) says why once, in
//! the log and on `/metrics`, and the others run.

pub mod burst;
pub mod config;
pub mod cuda;
pub mod mesh;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use slurmlens_slurm::topology::Topology;

use crate::config::Config;
use crate::metrics::{Exporter, Parts};

/// Starts every enabled part and serves `/metrics` until the process is stopped.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let node = config.node_name();
    let parts = Arc::new(Parts::default());
    let mut exporters: Vec<Arc<dyn Exporter>> = vec![parts.clone()];
    if let Some(bursts) = start_bursts(&config, &node, &parts) {
        exporters.push(bursts);
    }
    if let Some(prober) = start_mesh(&config, &node, &parts) {
        exporters.push(prober);
    }
    if let Some(cuda) = cuda::start(&config, &node, &parts) {
        exporters.push(cuda);
    }
    let listener =
        tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(node, listen = %config.listen, "serving /metrics");
    axum::serve(listener, metrics::router(exporters))
        .with_graceful_shutdown(shutdown())
        .await
        .context("serving /metrics")
}

async fn shutdown() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn start_bursts(config: &Config, node: &str, parts: &Parts) -> Option<Arc<burst::Bursts>> {
    if !config.bursts.enabled {
        parts.set("bursts", false, "disabled in the configuration");
        return None;
    }
    let ports = burst::discover(&config.bursts);
    if ports.is_empty() {
        parts.set("bursts", false, "no RDMA port and no network device to sample");
        return None;
    }
    let without_rate: Vec<&str> = ports.iter().filter(|p| p.line_rate.is_none()).map(|p| p.device.as_str()).collect();
    if !without_rate.is_empty() {
        tracing::warn!(
            devices = without_rate.join(","),
            "no line rate (no rate/speed file, none in [bursts.line_rate_bytes_per_s]): peaks only, no seconds above the threshold"
        );
    }
    let kind = if ports[0].unit_bytes == 4 { "RDMA" } else { "netdev" };
    let names: Vec<String> = ports.iter().map(|p| format!("{}/{}", p.device, p.port)).collect();
    parts.set(
        "bursts",
        true,
        format!("{} {kind} ports every {} ms: {}", ports.len(), config.bursts.interval_ms, names.join(" ")),
    );
    let bursts = Arc::new(burst::Bursts::new(&config.bursts, ports, node));
    let sampler = Arc::clone(&bursts);
    let interval = Duration::from_millis(config.bursts.interval_ms);
    std::thread::Builder::new().name("nic-sampler".into()).spawn(move || sampler.run(interval)).ok()?;
    Some(bursts)
}

fn start_mesh(config: &Config, node: &str, parts: &Arc<Parts>) -> Option<Arc<mesh::Prober>> {
    if !config.mesh.enabled {
        parts.set("mesh", false, "disabled in the configuration");
        return None;
    }
    let topology = match &config.mesh.topology {
        Some(path) => {
            match std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|text| Topology::from_toml(&text)) {
                Ok(topology) => topology,
                Err(why) => {
                    parts.set("mesh", false, format!("topology {}: {why}", path.display()));
                    return None;
                }
            }
        }
        None if config.mesh.nodes.is_empty() => {
            parts.set("mesh", false, "no peers: neither [mesh] topology nor nodes is set");
            return None;
        }
        None => Topology::default(),
    };
    let Some(mesh) = mesh::Mesh::new(&topology, &config.cluster, &config.mesh.nodes, node) else {
        parts.set("mesh", false, format!("node {node} is not in cluster {}'s topology", config.cluster));
        return None;
    };
    let peers = mesh.peers(0, config.mesh.extra_peers);
    if peers.is_empty() {
        parts.set("mesh", false, "no other node in the topology");
        return None;
    }
    parts.set(
        "mesh",
        true,
        format!(
            "UDP {}:{} in rack {}, {} peers a round",
            config.mesh.bind,
            config.mesh.port,
            mesh.rack_of(node).unwrap_or("?"),
            peers.len()
        ),
    );
    let prober = Arc::new(mesh::Prober::new(mesh, config.mesh.clone()));
    let running = Arc::clone(&prober);
    let parts = Arc::clone(parts);
    tokio::spawn(async move {
        if let Err(error) = running.run().await {
            parts.set("mesh", false, format!("stopped: {error}"));
        }
    });
    Some(prober)
}
