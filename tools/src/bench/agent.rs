//! `slurmlens-dev bench agent`: what the node agent costs. The same program calls the stand-in CUDA
//! runtime and NCCL (agent/tests/standin/, built here with gcc) without the agent and with it, in one run:
//! cost per probed call and the ratio; then the agent's own CPU and memory while a process makes 100,000
//! CUDA calls a second, and per sampled port with the NIC sampler on. Needs root (BPF). The uprobes' cost
//! falls on the traced process (the kernel runs the handler in its context), so it shows in the first
//! figures, not in the agent's CPU.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// Arguments of `slurmlens-dev bench agent`.
#[derive(Debug, clap::Args)]
pub struct AgentBenchArgs {
    /// The agent's binary (`cargo build --release -p slurmlens-agent` for figures that mean something).
    #[arg(long, default_value = "target/release/slurmlens-agent")]
    pub agent: PathBuf,
    /// Calls per function and run in the cost measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub calls: u64,
    /// Runs of each side; the median is kept.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// CUDA calls a second while the agent's CPU and memory are measured.
    #[arg(long, default_value_t = 100_000)]
    pub rate: u64,
    /// Seconds of each CPU measurement.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

const STANDIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../agent/tests/standin");
const FUNCTIONS: [&str; 3] = ["cudaLaunchKernel", "cudaMemcpyAsync", "ncclAllReduce"];

/// Builds the program, measures both sides and prints the figures.
pub fn run(args: &AgentBenchArgs) -> anyhow::Result<()> {
    if !args.agent.exists() {
        bail!("{} does not exist: cargo build --release -p slurmlens-agent", args.agent.display());
    }
    let dir = std::env::temp_dir().join(format!("slurmlens-bench-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure(args: &AgentBenchArgs, dir: &Path) -> anyhow::Result<()> {
    let bench = build(dir)?;
    let calls = args.calls.to_string();
    let baseline = median_costs(&bench, &calls, "0", args.runs)?;
    let agent = Agent::start(&args.agent, dir, true)?;
    // The first run waits 2 s so that the agent's scan (every second) has seen the libraries and probed them.
    let probed = median_costs(&bench, &calls, "2", args.runs)?;
    // The last 1 s interval is summarised.
    std::thread::sleep(Duration::from_millis(1500));
    let counted = agent.metric("slurmlens_agent_cuda_events_total")?;
    println!("cost per call, median of {} runs of {} calls (same program, same machine):", args.runs, args.calls);
    println!("{:<18} {:>12} {:>12} {:>14} {:>7}", "function", "without ns", "with ns", "probe cost ns", "ratio");
    for ((name, without), with) in FUNCTIONS.iter().zip(&baseline).zip(&probed) {
        println!("{name:<18} {without:>12.1} {with:>12.1} {:>14.1} {:>6.1}x", with - without, with / without);
    }
    println!("the agent counted {counted} calls ({} made)", 3 * args.calls * args.runs as u64);

    let before = agent.usage()?;
    let started = std::time::Instant::now();
    let status = Command::new(&bench).args(["rate", &args.rate.to_string(), &args.seconds.to_string()]).status()?;
    if !status.success() {
        bail!("the rate run failed: {status}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = agent.usage()?;
    std::thread::sleep(Duration::from_millis(1500));
    // The calls made: the probes' own count (the program falls behind its target where a probe costs more
    // than the time between calls).
    let made = agent.metric("slurmlens_agent_cuda_events_total")? - counted;
    println!(
        "agent while a process made {:.0} CUDA calls/s (target {}) for {elapsed:.1} s: {:.2} % of one core, {:.1} MB resident",
        made / elapsed,
        args.rate,
        100.0 * (after.0 - before.0) / elapsed,
        after.1 as f64 / 1e6
    );
    drop(agent);

    let sampler = Agent::start(&args.agent, dir, false)?;
    let ports = sampler.metric("slurmlens_agent_nic_ports")?;
    let before = sampler.usage()?;
    std::thread::sleep(Duration::from_secs(args.seconds));
    let after = sampler.usage()?;
    let samples = sampler.metric("slurmlens_agent_nic_samples_total")?;
    let cpu_s = after.0 - before.0;
    println!(
        "NIC sampler every 10 ms: {:.2} % of one core, {:.1} MB resident; {samples} samples; \
         {:.1} µs per sample of its {} ports",
        100.0 * cpu_s / args.seconds as f64,
        after.1 as f64 / 1e6,
        1e6 * cpu_s / (args.seconds as f64 * 100.0),
        ports as u64
    );
    Ok(())
}

fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib)?;
    let gcc = |extra: &[&str]| -> anyhow::Result<()> {
        let status = Command::new("gcc").args(["-O2"]).args(extra).status().context("running gcc")?;
        if !status.success() {
            bail!("gcc {extra:?} failed");
        }
        Ok(())
    };
    let cudart = lib.join("libcudart.so.12");
    let nccl = lib.join("libnccl.so.2");
    gcc(&["-fPIC", "-shared", "-o", path(&cudart), &format!("{STANDIN}/cudart.c")])?;
    gcc(&["-fPIC", "-shared", "-o", path(&nccl), &format!("{STANDIN}/nccl.c")])?;
    let bench = dir.join("bench");
    let rpath = format!("-Wl,-rpath,{}", lib.display());
    gcc(&["-o", path(&bench), &format!("{STANDIN}/bench.c"), path(&cudart), path(&nccl), &rpath])?;
    Ok(bench)
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

/// The median ns per call of each function over `runs` runs.
fn median_costs(bench: &Path, calls: &str, delay: &str, runs: usize) -> anyhow::Result<Vec<f64>> {
    let mut per_function: Vec<Vec<f64>> = vec![Vec::new(); FUNCTIONS.len()];
    for run in 0..runs {
        // Only the first run waits for the agent: the libraries stay probed for the others.
        let delay = if run == 0 { delay } else { "0" };
        let output = Command::new(bench).args(["cost", calls, delay]).output()?;
        let text = String::from_utf8_lossy(&output.stdout);
        for (line, costs) in text.lines().zip(per_function.iter_mut()) {
            costs.push(line.rsplit(' ').next().and_then(|n| n.parse().ok()).context("a cost line")?);
        }
    }
    Ok(per_function
        .into_iter()
        .map(|mut costs| {
            costs.sort_by(f64::total_cmp);
            costs[costs.len() / 2]
        })
        .collect())
}

/// An agent started for the measurement, stopped when dropped.
struct Agent {
    child: Child,
    port: u16,
}

impl Agent {
    /// Starts the agent with only its CUDA part (`cuda`) or only its NIC sampler.
    fn start(binary: &Path, dir: &Path, cuda: bool) -> anyhow::Result<Self> {
        let port = 20_000 + (std::process::id() % 10_000) as u16;
        let config = dir.join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "node = \"bench\"\nlisten = \"127.0.0.1:{port}\"\n[mesh]\nenabled = false\n[bursts]\nenabled = {}\n\
                 [cuda]\nenabled = {cuda}\ninterval_s = 1\nspool_dir = \"{}\"\n",
                !cuda,
                dir.join("spool").display()
            ),
        )?;
        let child =
            Command::new(binary).arg("--config").arg(&config).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        let agent = Self { child, port };
        for _ in 0..100 {
            if agent.scrape().is_ok() {
                return Ok(agent);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("the agent did not serve /metrics on port {port}")
    }

    fn scrape(&self) -> anyhow::Result<String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(text)
    }

    /// The sum of a series' values over its label sets.
    fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let text = self.scrape()?;
        let values: Vec<f64> = text
            .lines()
            .filter(|line| line.starts_with(name) && !line.starts_with('#'))
            .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
            .collect();
        Ok(values.iter().sum())
    }

    /// CPU seconds and resident bytes of the agent's process.
    fn usage(&self) -> anyhow::Result<(f64, u64)> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        let fields: Vec<&str> = stat.rsplit_once(')').context("a stat line")?.1.split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        let statm = std::fs::read_to_string(format!("/proc/{}/statm", self.child.id()))?;
        let pages: u64 = statm.split_whitespace().nth(1).context("statm")?.parse()?;
        Ok((ticks / 100.0, pages * 4096))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
