//! The node beside its GPUs: the PromQL a report sends for node_exporter's CPU, memory,
//! pressure and network series, ipmi_exporter's node power and the Lustre exporter's I/O, and the
//! findings they support ("the GPUs idled while the CPUs waited on I/O", "the GPUs drew 80 % of the
//! nodes' power").

use super::promql::{LabelName, Matcher, MetricName, Selector};
use slurmlens_wire::{Severity, VerdictKind};

use super::series::{LustreSeries, NodeSeries};
use super::verdicts::Finding;

/// One node signal: its key and unit, the per-step query (a timeline per node) and the window query
/// (one value per node), each grouped by the label that names the node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSignal {
    pub key: &'static str,
    pub unit: &'static str,
    pub range: String,
    pub mean: String,
    /// The series both queries read.
    pub reads: Vec<Selector>,
}

/// The node signals with their units, in the order a report lists them.
pub const NODE_SIGNALS: [(&str, &str); 8] = [
    ("cpu_busy", "%"),
    ("cpu_iowait", "%"),
    ("memory_used", "B"),
    ("memory_pressure", "%"),
    ("io_pressure", "%"),
    ("net_rx", "B/s"),
    ("net_tx", "B/s"),
    ("node_power", "W"),
];

fn on(metric: &MetricName, host_label: &LabelName, nodes: &[String], extra: Vec<Matcher>) -> Selector {
    let mut matchers = vec![Matcher::AnyHost(host_label.clone(), nodes.to_vec())];
    matchers.extend(extra);
    Selector { metric: metric.clone(), matchers }
}

/// A signal's query as a function of the range (seconds) it looks back over: `None` for a timeline's
/// step (see [`rate`]).
type Shape<'a> = Box<dyn Fn(Option<u64>) -> String + 'a>;

/// `rate(selector[range])`; for a timeline (`None`) with no range at all, which VictoriaMetrics reads as
/// the larger of the step and the interval between samples in every release. A range written out that
/// is shorter than that interval reads 0 at every step holding no sample in current releases, where
/// 1.79 widened it.
pub fn rate(selector: &impl std::fmt::Display, range: Option<u64>) -> String {
    match range {
        Some(range) => format!("rate({selector}[{range}s])"),
        None => format!("rate({selector})"),
    }
}

/// The queries of every node signal for `nodes`, with steps of `step_s` over a window of `window_s`.
pub fn node_queries(series: &NodeSeries, nodes: &[String], step_s: u64, window_s: u64) -> Vec<NodeSignal> {
    let host = &series.host_label;
    let mode = |value: &str| vec![Matcher::Equal(series.cpu_mode_label.clone(), value.to_string())];
    let cpu_idle = on(&series.cpu_seconds, host, nodes, mode("idle"));
    let cpu_iowait = on(&series.cpu_seconds, host, nodes, mode("iowait"));
    let devices = || {
        if series.network_devices_ignored.is_empty() {
            Vec::new()
        } else {
            vec![Matcher::NoneOf(series.network_device_label.clone(), series.network_devices_ignored.clone())]
        }
    };
    let total = on(&series.memory_total, host, nodes, Vec::new());
    let available = on(&series.memory_available, host, nodes, Vec::new());
    let receive = on(&series.network_receive, host, nodes, devices());
    let transmit = on(&series.network_transmit, host, nodes, devices());
    let memory_pressure = on(&series.memory_pressure, host, nodes, Vec::new());
    let io_pressure = on(&series.io_pressure, host, nodes, Vec::new());
    let power = on(&series.power, &series.power_host_label, nodes, Vec::new());
    let reads: [Vec<Selector>; 8] = [
        vec![cpu_idle.clone()],
        vec![cpu_iowait.clone()],
        vec![total.clone(), available.clone()],
        vec![memory_pressure.clone()],
        vec![io_pressure.clone()],
        vec![receive.clone()],
        vec![transmit.clone()],
        vec![power.clone()],
    ];
    let rate_sum = |selector: Selector, times: &'static str| -> Shape {
        Box::new(move |r| format!("{times}sum by ({host}) ({})", rate(&selector, r)))
    };
    // Each signal (in the order of NODE_SIGNALS) as a function of the range it averages over: the step
    // for timelines, the whole window for the mean (a counter's rate over the window is its rise
    // divided by the window).
    let shapes: [Shape; 8] = [
        Box::new(move |r| format!("100 * (1 - avg by ({host}) ({}))", rate(&cpu_idle, r))),
        Box::new(move |r| format!("100 * avg by ({host}) ({})", rate(&cpu_iowait, r))),
        Box::new(move |r| {
            let r = r.unwrap_or(step_s);
            format!(
                "sum by ({host}) (avg_over_time({total}[{r}s])) - sum by ({host}) (avg_over_time({available}[{r}s]))"
            )
        }),
        rate_sum(memory_pressure, "100 * "),
        rate_sum(io_pressure, "100 * "),
        rate_sum(receive, ""),
        rate_sum(transmit, ""),
        {
            let power_host = &series.power_host_label;
            Box::new(move |r| format!("sum by ({power_host}) (avg_over_time({power}[{}s]))", r.unwrap_or(step_s)))
        },
    ];
    NODE_SIGNALS
        .into_iter()
        .zip(shapes)
        .zip(reads)
        .map(|(((key, unit), shape), reads)| NodeSignal {
            key,
            unit,
            range: shape(None),
            mean: shape(Some(window_s.max(1))),
            reads,
        })
        .collect()
}

/// Where a job's Lustre figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum IoSource {
    /// The file system's job statistics: this job's I/O alone.
    JobStats,
    /// The clients of the job's nodes: every job on them together.
    Nodes,
}

impl IoSource {
    pub fn name(self) -> &'static str {
        match self {
            Self::JobStats => "jobstats",
            Self::Nodes => "nodes",
        }
    }
}

/// One Lustre query of a job: the key, its unit, where it reads from, the per-step query and the
/// window query (each a single series: the job's total over all targets or all its nodes).
#[derive(Debug, Clone, PartialEq)]
pub struct IoQuery {
    pub key: &'static str,
    pub unit: &'static str,
    pub source: IoSource,
    pub range: String,
    pub mean: String,
    /// The series both queries read.
    pub selector: Selector,
}

/// The Lustre figures with their units, in the order a report lists them.
pub const IO_SIGNALS: [(&str, &str); 4] =
    [("lustre_read", "B/s"), ("lustre_write", "B/s"), ("lustre_read_ops", "/s"), ("lustre_write_ops", "/s")];

/// Lustre queries for job `job_id` on `nodes` (timelines at the range query's step, means over `window_s`): job statistics (bytes and operations, summed over the
/// OSTs), and the node clients' bytes as the fallback when the file system keeps no job statistics.
pub fn io_queries(series: &LustreSeries, job_id: u32, nodes: &[String], window_s: u64) -> Vec<IoQuery> {
    let job = |metric: &MetricName| Selector {
        metric: metric.clone(),
        matchers: vec![Matcher::JobId(series.job_label.clone(), job_id)],
    };
    let client = |metric: &MetricName| {
        on(metric, &series.host_label, nodes, vec![Matcher::Equal(series.component_label.clone(), "client".into())])
    };
    let rate = |selector: &Selector, r: Option<u64>| format!("sum({})", rate(selector, r));
    let job_stats = [&series.job_read_bytes, &series.job_write_bytes, &series.job_read_ops, &series.job_write_ops]
        .map(|metric| (IoSource::JobStats, job(metric)));
    // The clients count bytes only: no operations per job.
    let clients =
        [&series.client_read_bytes, &series.client_write_bytes].map(|metric| (IoSource::Nodes, client(metric)));
    IO_SIGNALS
        .into_iter()
        .zip(job_stats)
        .chain(IO_SIGNALS.into_iter().zip(clients))
        .map(|((key, unit), (source, selector))| IoQuery {
            key,
            unit,
            source,
            range: rate(&selector, None),
            mean: rate(&selector, Some(window_s.max(1))),
            selector,
        })
        .collect()
}

/// What the node findings look at.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    /// Share of the job's GPU samples below the idle threshold (0–1).
    pub gpu_idle_share: Option<f64>,
    /// Mean power of the job's GPUs together (W).
    pub gpu_power_w: Option<f64>,
    /// Mean power of the job's nodes together (W), from their BMCs.
    pub node_power_w: Option<f64>,
    /// Whether the job held its nodes whole (otherwise the node's power is shared with other jobs).
    pub whole_nodes: bool,
    /// Mean CPU iowait and I/O pressure over the job's nodes (%).
    pub cpu_iowait_pct: Option<f64>,
    pub io_pressure_pct: Option<f64>,
    /// Mean CPU iowait (%) in the steps where the job's GPUs idled and in the others.
    pub iowait_gpu_idle_vs_busy: Option<(f64, f64)>,
    /// Mean Lustre read rate of the job (B/s) and where it comes from.
    pub lustre_read_bytes_per_s: Option<(f64, IoSource)>,
    /// Mean memory pressure over the job's nodes (%).
    pub memory_pressure_pct: Option<f64>,
}

/// GPUs idle at least this share of the time make I/O waits worth naming.
const IDLE_SHARE_FOR_IO: f64 = 0.2;
/// CPU iowait (%) or I/O pressure (%) from which the nodes count as waiting on I/O.
const IOWAIT_PCT: f64 = 5.0;
const IO_PRESSURE_PCT: f64 = 10.0;
/// Memory pressure (%) from which a node was short of memory.
const MEMORY_PRESSURE_PCT: f64 = 10.0;

/// Findings from the node signals, beside the GPU verdicts.
pub fn findings(facts: &NodeFacts) -> Vec<Finding> {
    let mut found = Vec::new();
    let waiting = facts.cpu_iowait_pct.is_some_and(|v| v >= IOWAIT_PCT)
        || facts.io_pressure_pct.is_some_and(|v| v >= IO_PRESSURE_PCT)
        || facts.iowait_gpu_idle_vs_busy.is_some_and(|(idle, busy)| idle >= IOWAIT_PCT && idle > 2.0 * busy);
    if let Some(idle) = facts.gpu_idle_share.filter(|share| *share >= IDLE_SHARE_FOR_IO)
        && waiting
    {
        let mut evidence = vec![format!("GPUs idle {:.0} % of the time", idle * 100.0)];
        if let Some(iowait) = facts.cpu_iowait_pct {
            evidence.push(format!("CPU iowait {iowait:.1} % on the job's nodes"));
        }
        if let Some((idle_phase, busy_phase)) = facts.iowait_gpu_idle_vs_busy {
            evidence
                .push(format!("iowait {idle_phase:.1} % while the GPUs idled, {busy_phase:.1} % while they worked"));
        }
        if let Some(pressure) = facts.io_pressure_pct {
            evidence.push(format!("I/O pressure {pressure:.1} % (time some task stalled on I/O)"));
        }
        if let Some((read, source)) = facts.lustre_read_bytes_per_s {
            let whose = match source {
                IoSource::JobStats => "the job",
                IoSource::Nodes => "the job's nodes",
            };
            evidence.push(format!("Lustre reads of {whose}: {:.1} MB/s", read / 1e6));
        }
        found.push(Finding {
            kind: VerdictKind::IoBound,
            severity: Severity::Warning,
            message: "the GPUs wait on the file system: they idle while the nodes' CPUs wait on I/O (a data loader \
                      reading from Lustre?)"
                .into(),
            evidence,
            next_step: Some(
                "give the data loader more workers, prefetch, or stage the data set on node-local storage first".into(),
            ),
        });
    }
    if let Some(pressure) = facts.memory_pressure_pct.filter(|v| *v >= MEMORY_PRESSURE_PCT) {
        found.push(Finding {
            kind: VerdictKind::NodeMemoryPressure,
            severity: Severity::Warning,
            message: "the nodes ran short of host memory: tasks stalled waiting for it".into(),
            evidence: vec![format!("memory pressure {pressure:.1} % (time some task stalled on memory)")],
            next_step: Some("ask for more memory per node (--mem) or use fewer data-loader workers".into()),
        });
    }
    if let (Some(gpu), Some(node)) = (facts.gpu_power_w, facts.node_power_w.filter(|w| *w > 0.0))
        && facts.whole_nodes
    {
        found.push(power_finding(gpu, node));
    }
    found
}

/// GPU power above this share of the node's cannot be: the rest of a GPU node (CPUs, fans, NICs,
/// switches) draws at least a few hundred watts.
const MAX_GPU_POWER_SHARE: f64 = 0.95;

/// The GPUs' share of their nodes' power, or, where the two readings cannot both be right, both
/// readings side by side and no share.
fn power_finding(gpu_w: f64, node_w: f64) -> Finding {
    let share = gpu_w / node_w;
    let evidence = vec![format!("node power {node_w:.0} W (BMC), GPU power {gpu_w:.0} W (DCGM)")];
    if share > MAX_GPU_POWER_SHARE {
        return Finding {
            kind: VerdictKind::PowerReadingsDisagree,
            severity: Severity::Info,
            message: format!(
                "inconsistent data: the GPUs' own power reading ({:.1} kW) is {:.0} % of the nodes' ({:.1} kW), \
                 more than a node can give its GPUs; one of the two readings is wrong, so no share is shown",
                gpu_w / 1e3,
                share * 100.0,
                node_w / 1e3
            ),
            evidence,
            next_step: None,
        };
    }
    Finding {
        kind: VerdictKind::NodePower,
        severity: Severity::Info,
        message: format!(
            "the GPUs drew {:.0} % of the nodes' power ({:.1} of {:.1} kW)",
            share * 100.0,
            gpu_w / 1e3,
            node_w / 1e3
        ),
        evidence,
        next_step: None,
    }
}

/// Share of the job's run a port spent at line rate (in 100 ms windows) from which the bursts are
/// worth a verdict: enough to fill switch buffers and cause pauses for other jobs' traffic.
const BURST_SHARE: f64 = 0.01;

/// One port's bursts over the job: node, direction word, time above the threshold (s), peak (B/s).
pub type PortBursts<'a> = (&'a str, &'a str, f64, Option<f64>);

/// A verdict on line-rate micro-bursts that the node agents measured, naming the burstiest ports.
pub fn burst_finding(ports: &[PortBursts<'_>], window_s: f64) -> Option<Finding> {
    if window_s <= 0.0 {
        return None;
    }
    // More seconds above the threshold than the run lasted is a counter reset or a duplicate series,
    // not a burst: such a port is left out rather than shown as an impossible share.
    let mut bursty: Vec<&PortBursts<'_>> =
        ports.iter().filter(|port| port.2 / window_s >= BURST_SHARE && port.2 <= window_s * 1.05).collect();
    if bursty.is_empty() {
        return None;
    }
    bursty.sort_by(|a, b| b.2.total_cmp(&a.2));
    let most = bursty[0].2;
    let mut evidence: Vec<String> = bursty
        .iter()
        .take(4)
        .map(|(node, direction, seconds, peak)| {
            let peak = peak.map_or_else(String::new, |peak| format!(", peaks of {:.1} GB/s", peak / 1e9));
            format!(
                "{node} {direction}: {seconds:.0} s at line rate ({:.1} % of the run){peak}",
                100.0 * seconds / window_s
            )
        })
        .collect();
    if bursty.len() > 4 {
        evidence.push(format!("… and {} more", super::counted(bursty.len() - 4, "port")));
    }
    Some(Finding {
        kind: VerdictKind::MicroBursts,
        severity: Severity::Info,
        message: format!(
            "the job's network traffic came in line-rate bursts on {} (up to {:.1} % of the run): \
             its all-reduces saturate the links in short windows that scrape averages hide",
            super::counted(bursty.len(), "port"),
            100.0 * most / window_s
        ),
        evidence,
        next_step: Some(
            "bursts are normal for data-parallel training; if steps stall, overlap communication with compute \
             (gradient bucketing) and compare with the congestion counters below"
                .into(),
        ),
    })
}

/// Mean of a node signal over the steps in which the job's GPUs idled and over the others: `gpu_util`
/// and `signal` are timelines on the same step grid. `None` without at least two steps of each.
pub fn split_by_gpu_idle(gpu_util: &[(i64, f64)], signal: &[(i64, f64)], idle_below: f64) -> Option<(f64, f64)> {
    let util: std::collections::BTreeMap<i64, f64> = gpu_util.iter().copied().collect();
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    for &(at, value) in signal {
        match util.get(&at) {
            Some(&u) if u < idle_below => idle.push(value),
            Some(_) => busy.push(value),
            None => {}
        }
    }
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    (idle.len() >= 2 && busy.len() >= 2).then(|| (mean(&idle), mean(&busy)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_queries_scope_to_the_jobs_nodes_and_follow_node_exporter() {
        let queries = node_queries(&NodeSeries::default(), &["gpu001".into(), "gpu002".into()], 30, 3600);
        let keys: Vec<&str> = queries.iter().map(|q| q.key).collect();
        assert_eq!(keys, NODE_SIGNALS.map(|(key, _)| key));
        let busy = &queries[0];
        assert_eq!(
            busy.range,
            r#"100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{instance=~"(gpu001|gpu002)(:[0-9]+)?",mode="idle"})))"#
        );
        assert!(busy.mean.ends_with("[3600s])))"), "{}", busy.mean);
        let rx = queries.iter().find(|q| q.key == "net_rx").expect("net_rx");
        assert!(rx.range.contains(r#"device!~"lo""#), "{}", rx.range);
        let memory = queries.iter().find(|q| q.key == "memory_used").expect("memory_used");
        assert!(
            memory.range.contains("node_memory_MemAvailable_bytes") && memory.range.contains("[30s]"),
            "{}",
            memory.range
        );
    }

    #[test]
    fn io_queries_match_the_job_id_exactly_and_fall_back_to_the_nodes_clients() {
        let queries = io_queries(&LustreSeries::default(), 1234, &["gpu001".into()], 600);
        let read = &queries[0];
        assert_eq!(read.source, IoSource::JobStats);
        // A timeline's rate leaves its range to VictoriaMetrics (the step, or the samples' interval if longer).
        assert_eq!(read.range, r#"sum(rate(lustre_job_read_bytes_total{jobid=~"1234([.@:_-].*)?"}))"#);
        let client = queries.iter().find(|q| q.source == IoSource::Nodes).expect("client fallback");
        assert!(client.mean.contains(r#"component="client""#) && client.mean.contains("[600s]"), "{}", client.mean);
    }

    #[test]
    fn idle_gpus_with_iowait_read_as_io_bound_and_busy_ones_do_not() {
        let facts = NodeFacts {
            gpu_idle_share: Some(0.5),
            cpu_iowait_pct: Some(18.0),
            lustre_read_bytes_per_s: Some((2.4e9, IoSource::JobStats)),
            ..Default::default()
        };
        let found = findings(&facts);
        assert_eq!(found[0].kind, VerdictKind::IoBound);
        assert!(found[0].evidence.iter().any(|e| e.contains("2400.0 MB/s")), "{:?}", found[0].evidence);
        let busy = NodeFacts { gpu_idle_share: Some(0.02), ..facts.clone() };
        assert!(findings(&busy).iter().all(|f| f.kind != VerdictKind::IoBound));
        let no_wait = NodeFacts { cpu_iowait_pct: Some(0.4), ..facts };
        assert!(findings(&no_wait).iter().all(|f| f.kind != VerdictKind::IoBound));
    }

    #[test]
    fn node_power_share_is_said_only_for_whole_nodes() {
        let facts = NodeFacts {
            gpu_power_w: Some(4000.0),
            node_power_w: Some(5000.0),
            whole_nodes: true,
            ..Default::default()
        };
        let found = findings(&facts);
        assert_eq!(found[0].kind, VerdictKind::NodePower);
        assert!(found[0].message.contains("80 %"), "{}", found[0].message);
        assert!(findings(&NodeFacts { whole_nodes: false, ..facts.clone() }).is_empty());
        let impossible = findings(&NodeFacts { gpu_power_w: Some(2700.0), node_power_w: Some(2400.0), ..facts });
        assert_eq!(impossible[0].kind, VerdictKind::PowerReadingsDisagree);
        assert!(impossible[0].message.starts_with("inconsistent data"), "{}", impossible[0].message);
        assert!(!impossible[0].message.contains("drew"), "no share is stated as a fact");
    }

    #[test]
    fn line_rate_bursts_get_a_verdict_naming_the_burstiest_ports() {
        let ports = [("gpu001", "tx", 1480.0, Some(5e10)), ("gpu001", "rx", 2.0, Some(4.6e10))];
        let found = burst_finding(&ports, 36_000.0).expect("a burst verdict");
        assert_eq!(found.evidence, ["gpu001 tx: 1480 s at line rate (4.1 % of the run), peaks of 50.0 GB/s"]);
        assert!(burst_finding(&ports[1..], 36_000.0).is_none(), "2 s in 10 h is noise");
        let impossible = [("gpu002", "rx", 2_453_416.0, Some(5e10))];
        assert!(burst_finding(&impossible, 20_000.0).is_none(), "more seconds above than the run lasted");
    }

    #[test]
    fn iowait_splits_by_the_gpus_idle_steps() {
        let util = [(0, 90.0), (60, 2.0), (120, 95.0), (180, 1.0), (240, 3.0)];
        let iowait = [(0, 1.0), (60, 20.0), (120, 3.0), (180, 30.0), (240, 25.0)];
        assert_eq!(split_by_gpu_idle(&util, &iowait, 5.0), Some((25.0, 2.0)));
        assert_eq!(split_by_gpu_idle(&util[..2], &iowait, 5.0), None, "one step of each is not enough");
    }
}
