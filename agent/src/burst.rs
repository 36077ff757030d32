//! Micro-bursts: every port's byte counters sampled every few milliseconds (RDMA ports'
//! `port_{xmit,rcv}_data`, 4-byte words; netdevs' `{tx,rx}_bytes` where there is no RDMA device), the rate
//! over a sliding 100 ms window, and per port on `/metrics`: the peak window rate since the last scrape and
//! the seconds the window rate spent at or above `threshold` × line rate, under the server's catalogue names
//! (`BurstSeries` in the server's `domain/series.rs`).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::BurstConfig;
use crate::metrics::{Exporter, escape};

/// One sampled port: where its counters are and what one counter unit is in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSource {
    pub device: String,
    pub port: String,
    pub tx: PathBuf,
    pub rx: PathBuf,
    /// 4 for RDMA ports (the counters count 4-byte words), 1 for netdevs.
    pub unit_bytes: u64,
    /// Bytes/s; `None` where neither the port nor the configuration says.
    pub line_rate: Option<f64>,
}

/// The ports to sample: every RDMA port, or (none there) the netdevs.
pub fn discover(config: &BurstConfig) -> Vec<PortSource> {
    let rdma = discover_rdma(&config.sysfs, config);
    if !rdma.is_empty() {
        return rdma;
    }
    discover_netdevs(&config.sysfs, config)
}

fn sorted_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut entries: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| (entry.file_name().to_string_lossy().into_owned(), entry.path()))
        .collect();
    entries.sort();
    entries
}

fn discover_rdma(sysfs: &Path, config: &BurstConfig) -> Vec<PortSource> {
    let mut ports = Vec::new();
    for (device, device_dir) in sorted_entries(&sysfs.join("class/infiniband")) {
        for (port, port_dir) in sorted_entries(&device_dir.join("ports")) {
            let counters = port_dir.join("counters");
            let (tx, rx) = (counters.join("port_xmit_data"), counters.join("port_rcv_data"));
            if !tx.exists() || !rx.exists() {
                continue;
            }
            let line_rate = config.line_rate_bytes_per_s.get(&device).copied().or_else(|| {
                std::fs::read_to_string(port_dir.join("rate")).ok().and_then(|text| parse_rdma_rate(&text))
            });
            ports.push(PortSource { device: device.clone(), port, tx, rx, unit_bytes: 4, line_rate });
        }
    }
    ports
}

fn discover_netdevs(sysfs: &Path, config: &BurstConfig) -> Vec<PortSource> {
    let mut ports = Vec::new();
    for (device, device_dir) in sorted_entries(&sysfs.join("class/net")) {
        let wanted = if config.netdevs.is_empty() { device != "lo" } else { config.netdevs.contains(&device) };
        let statistics = device_dir.join("statistics");
        let (tx, rx) = (statistics.join("tx_bytes"), statistics.join("rx_bytes"));
        if !wanted || !tx.exists() {
            continue;
        }
        let line_rate = config.line_rate_bytes_per_s.get(&device).copied().or_else(|| {
            let megabits: f64 = std::fs::read_to_string(device_dir.join("speed")).ok()?.trim().parse().ok()?;
            (megabits > 0.0).then_some(megabits * 1e6 / 8.0)
        });
        let port = std::fs::read_to_string(device_dir.join("dev_port"))
            .map_or_else(|_| "0".into(), |text| text.trim().to_string());
        ports.push(PortSource { device, port, tx, rx, unit_bytes: 1, line_rate });
    }
    ports
}

/// An RDMA port's `rate` file (`400 Gb/sec (4X NDR)`) in bytes/s.
pub fn parse_rdma_rate(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    match words.next()? {
        "Gb/sec" => Some(number * 1e9 / 8.0),
        "Mb/sec" => Some(number * 1e6 / 8.0),
        _ => None,
    }
}

/// One direction of one port: samples over the last window and what the scrape reads.
#[derive(Debug, Clone)]
pub struct Direction {
    samples: VecDeque<(f64, u64)>,
    window_s: f64,
    /// Bytes/s at or above which a window is a burst; `None` without a line rate.
    burst_rate: Option<f64>,
    /// Highest window rate since the last scrape.
    pub peak: Option<f64>,
    /// Seconds the window rate spent at or above `burst_rate`, since start.
    pub seconds_above: f64,
}

impl Direction {
    pub fn new(window_s: f64, burst_rate: Option<f64>) -> Self {
        Self { samples: VecDeque::new(), window_s, burst_rate, peak: None, seconds_above: 0.0 }
    }

    /// Takes the counter's value in bytes at `at` seconds. Once the samples span a window, the rate over
    /// the last window (from the newest sample at or before its start) raises the peak, and the time since
    /// the previous sample counts as above the threshold when that rate is.
    pub fn push(&mut self, at: f64, bytes: u64) {
        if let Some(&(last_at, last_bytes)) = self.samples.back()
            && (bytes < last_bytes || at <= last_at)
        {
            // A counter reset (driver reload, wrapped 32-bit counter): start the window again.
            self.samples.clear();
        }
        let previous_at = self.samples.back().map(|&(t, _)| t);
        self.samples.push_back((at, bytes));
        while self.samples.len() > 2 && self.samples[1].0 <= at - self.window_s + 1e-9 {
            self.samples.pop_front();
        }
        let (first_at, first_bytes) = self.samples[0];
        // 1 % slack: a sampler that wakes a little early still completes its window.
        if at - first_at < self.window_s * 0.99 {
            return;
        }
        let rate = (bytes - first_bytes) as f64 / (at - first_at);
        self.peak = Some(self.peak.map_or(rate, |peak| peak.max(rate)));
        if let (Some(burst_rate), Some(previous_at)) = (self.burst_rate, previous_at)
            && rate >= burst_rate
        {
            self.seconds_above += at - previous_at;
        }
    }
}

/// A port's two directions.
#[derive(Debug, Clone)]
struct PortState {
    source: PortSource,
    tx: Direction,
    rx: Direction,
}

/// The sampler's shared state: its ports and its own counts.
pub struct Bursts {
    ports: Mutex<Vec<PortState>>,
    threshold: f64,
    node: String,
    samples: Mutex<(u64, u64)>,
}

impl Bursts {
    /// Sets up the windows of `ports`; `node` becomes the series' `instance`.
    pub fn new(config: &BurstConfig, ports: Vec<PortSource>, node: &str) -> Self {
        let window_s = config.window_ms as f64 / 1e3;
        let states = ports
            .into_iter()
            .map(|source| {
                let burst_rate = source.line_rate.map(|rate| rate * config.threshold);
                PortState { source, tx: Direction::new(window_s, burst_rate), rx: Direction::new(window_s, burst_rate) }
            })
            .collect();
        Self {
            ports: Mutex::new(states),
            threshold: config.threshold,
            node: node.to_string(),
            samples: Mutex::new((0, 0)),
        }
    }

    /// Samples every port every `interval` until the process ends (its own thread: a timer wheel's jitter
    /// would blur 10 ms samples). Read failures are counted, not fatal.
    pub fn run(self: Arc<Self>, interval: Duration) {
        let files: Vec<Option<(File, File, u64)>> = self
            .ports
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .map(|state| {
                Some((File::open(&state.source.tx).ok()?, File::open(&state.source.rx).ok()?, state.source.unit_bytes))
            })
            .collect();
        let start = Instant::now();
        let mut next = start;
        let mut buffer = [0u8; 32];
        loop {
            next += interval;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                // Fell behind (a stalled machine): skip the missed ticks rather than sampling in a burst.
                next = now;
            }
            let mut readings = Vec::with_capacity(files.len());
            for file in &files {
                let reading = file.as_ref().and_then(|(tx, rx, unit)| {
                    Some((read_counter(tx, &mut buffer)? * unit, read_counter(rx, &mut buffer)? * unit))
                });
                readings.push(reading);
            }
            let at = start.elapsed().as_secs_f64();
            let mut ports = self.ports.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut failed = 0;
            for (state, reading) in ports.iter_mut().zip(readings) {
                match reading {
                    Some((tx, rx)) => {
                        state.tx.push(at, tx);
                        state.rx.push(at, rx);
                    }
                    None => failed += 1,
                }
            }
            drop(ports);
            let mut samples = self.samples.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            samples.0 += 1;
            samples.1 += failed;
        }
    }
}

fn read_counter(file: &File, buffer: &mut [u8; 32]) -> Option<u64> {
    let read = file.read_at(buffer, 0).ok()?;
    std::str::from_utf8(&buffer[..read]).ok()?.trim().parse().ok()
}

impl Exporter for Bursts {
    /// Writes the peaks since the last scrape (and forgets them) and the seconds above the threshold.
    fn render(&self, out: &mut String) {
        let mut ports = self.ports.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let node = escape(&self.node);
        for direction in ["tx", "rx"] {
            let _ = writeln!(
                out,
                "# HELP nic_{direction}_bytes_per_second_max Highest {direction} rate over a 100 ms window since the last scrape."
            );
            let _ = writeln!(out, "# TYPE nic_{direction}_bytes_per_second_max gauge");
            for state in ports.iter_mut() {
                let side = if direction == "tx" { &mut state.tx } else { &mut state.rx };
                if let Some(peak) = side.peak.take() {
                    let (device, port) = (escape(&state.source.device), escape(&state.source.port));
                    let _ = writeln!(
                        out,
                        "nic_{direction}_bytes_per_second_max{{device=\"{device}\",port=\"{port}\",instance=\"{node}\"}} {peak}"
                    );
                }
            }
            let _ = writeln!(
                out,
                "# HELP nic_{direction}_burst_seconds_total Seconds the 100 ms {direction} rate was at or above threshold x line rate."
            );
            let _ = writeln!(out, "# TYPE nic_{direction}_burst_seconds_total counter");
            for state in ports.iter() {
                let side = if direction == "tx" { &state.tx } else { &state.rx };
                if side.burst_rate.is_some() {
                    let (device, port) = (escape(&state.source.device), escape(&state.source.port));
                    let _ = writeln!(
                        out,
                        "nic_{direction}_burst_seconds_total{{device=\"{device}\",port=\"{port}\",instance=\"{node}\",threshold=\"{}\"}} {}",
                        self.threshold, side.seconds_above
                    );
                }
            }
        }
        out.push_str("# TYPE slurmlens_agent_nic_line_rate_bytes_per_second gauge\n");
        for state in ports.iter() {
            if let Some(rate) = state.source.line_rate {
                let (device, port) = (escape(&state.source.device), escape(&state.source.port));
                let _ = writeln!(
                    out,
                    "slurmlens_agent_nic_line_rate_bytes_per_second{{device=\"{device}\",port=\"{port}\"}} {rate}"
                );
            }
        }
        out.push_str("# TYPE slurmlens_agent_nic_ports gauge\n");
        let _ = writeln!(out, "slurmlens_agent_nic_ports {}", ports.len());
        drop(ports);
        let samples = *self.samples.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        out.push_str("# TYPE slurmlens_agent_nic_samples_total counter\n");
        let _ = writeln!(out, "slurmlens_agent_nic_samples_total {}", samples.0);
        out.push_str("# TYPE slurmlens_agent_nic_sample_failures_total counter\n");
        let _ = writeln!(out, "slurmlens_agent_nic_sample_failures_total {}", samples.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `rates` (bytes/s, one per 10 ms sample) into a 100 ms window with bursts from 900 kB/s.
    fn feed(rates: &[f64]) -> Direction {
        let mut direction = Direction::new(0.1, Some(900_000.0));
        let mut bytes = 0.0;
        direction.push(0.0, 0);
        for (i, rate) in rates.iter().enumerate() {
            bytes += rate * 0.01;
            direction.push((i + 1) as f64 * 0.01, bytes.round() as u64);
        }
        direction
    }

    #[test]
    fn a_short_burst_shows_as_a_peak_that_the_average_hides() {
        // 15 s at 10 kB/s with 50 ms at 1 MB/s (line rate) in the middle.
        let mut rates = vec![10_000.0; 1500];
        rates[700..705].fill(1e6);
        let direction = feed(&rates);
        let peak = direction.peak.expect("a peak after a full window");
        assert!((peak - 505_000.0).abs() < 100.0, "half a window at line rate: {peak}");
        let average = rates.iter().sum::<f64>() / rates.len() as f64;
        assert!(average < 15_000.0 && peak > 30.0 * average, "{average} vs {peak}");
        assert_eq!(direction.seconds_above, 0.0, "no 100 ms window reached 90 % of line rate");
    }

    #[test]
    fn a_long_burst_counts_its_seconds_above_the_threshold_and_steady_traffic_none() {
        let mut rates = vec![10_000.0; 1500];
        rates[700..730].fill(1e6);
        let direction = feed(&rates);
        // The windows holding at least 9 of their 10 samples in the burst: 23 of them, 10 ms each.
        assert!((direction.seconds_above - 0.23).abs() < 0.005, "{}", direction.seconds_above);
        let steady = feed(&[800_000.0; 1500]);
        assert_eq!(steady.seconds_above, 0.0);
        assert!((steady.peak.expect("a peak") - 800_000.0).abs() < 100.0);
    }

    #[test]
    fn a_counter_reset_starts_the_window_again_instead_of_a_huge_rate() {
        let mut direction = Direction::new(0.1, Some(900_000.0));
        for i in 0..=20 {
            direction.push(i as f64 * 0.01, 1_000_000 + i * 10);
        }
        direction.peak = None;
        for i in 21..=25 {
            direction.push(i as f64 * 0.01, i);
        }
        assert_eq!(direction.peak, None, "the new window is not full yet");
    }

    #[test]
    fn rdma_rate_files_read_as_bytes_per_second() {
        assert_eq!(parse_rdma_rate("400 Gb/sec (4X NDR)\n"), Some(5e10));
        assert_eq!(parse_rdma_rate("100 Gb/sec (4X EDR)"), Some(1.25e10));
        assert_eq!(parse_rdma_rate("garbage"), None);
    }

    #[test]
    fn rdma_ports_are_preferred_and_their_words_are_four_bytes() {
        let root = tempfile::tempdir().expect("a temp dir");
        let counters = root.path().join("class/infiniband/mlx5_0/ports/1/counters");
        std::fs::create_dir_all(&counters).expect("mkdir");
        std::fs::write(counters.join("port_xmit_data"), "10\n").expect("write");
        std::fs::write(counters.join("port_rcv_data"), "20\n").expect("write");
        std::fs::write(root.path().join("class/infiniband/mlx5_0/ports/1/rate"), "200 Gb/sec (4X HDR)\n")
            .expect("write");
        let net = root.path().join("class/net/eth0/statistics");
        std::fs::create_dir_all(&net).expect("mkdir");
        std::fs::write(net.join("tx_bytes"), "5").expect("write");
        let config = BurstConfig { sysfs: root.path().into(), ..BurstConfig::default() };
        let ports = discover(&config);
        assert_eq!(ports.len(), 1, "{ports:?}");
        assert_eq!((ports[0].device.as_str(), ports[0].port.as_str(), ports[0].unit_bytes), ("mlx5_0", "1", 4));
        assert_eq!(ports[0].line_rate, Some(2.5e10));
        let bursts = Bursts::new(&config, ports, "gpu001");
        let mut out = String::new();
        bursts.render(&mut out);
        assert!(
            out.contains(
                "nic_tx_burst_seconds_total{device=\"mlx5_0\",port=\"1\",instance=\"gpu001\",threshold=\"0.9\"} 0"
            ),
            "{out}"
        );
    }
}
