//! What VictoriaMetrics holds of one node's GPUs and links over a window (the node page), and of every
//! node's GPUs at once (the grid's health badges): the queries, bounded by the window and the node
//! names, and their answers read into [`GpuFacts`] and the wire's counters.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use slurmlens_wire as wire;

use crate::domain::blame;
use crate::domain::node_health::{GpuFacts, clock_event_reasons};
use crate::domain::promql::{LabelName, Matcher, MetricName, Selector};
use crate::domain::series::SeriesCatalog;
use crate::sources::victoriametrics::{Series, VictoriaMetrics};

/// Points of a node page's timelines.
pub const TIMELINE_POINTS: i64 = 240;

/// One node's GPUs over a window, as read.
#[derive(Debug, Default)]
pub struct NodeReadings {
    pub gpus: GpuMap,
    pub temperature: Vec<wire::NodeGpuSeries>,
    pub power: Vec<wire::NodeGpuSeries>,
    /// `(epoch seconds, gpu, code)` where a GPU first showed an XID code (again).
    pub xid_faults: Vec<(i64, u16, u32)>,
    /// `(epoch seconds, gpu, new errors)` where double-bit ECC errors rose.
    pub dbe_faults: Vec<(i64, u16, f64)>,
    pub links: Vec<wire::NodeLink>,
    /// The resolution of the fault times: each showed within this many seconds before its time.
    pub step_s: i64,
}

/// Each GPU's facts (for its health) and counters (for the page), by index.
pub type GpuMap = BTreeMap<u16, (GpuFacts, wire::NodeGpu)>;

/// GPU `gpu`'s entry, made empty the first time.
fn gpu_entry(gpus: &mut GpuMap, gpu: u16) -> &mut (GpuFacts, wire::NodeGpu) {
    gpus.entry(gpu)
        .or_insert_with(|| (GpuFacts { gpu, ..GpuFacts::default() }, wire::NodeGpu { gpu, ..wire::NodeGpu::default() }))
}

/// The node's series selectors: one per label dcgm-exporter may carry the host in.
fn on_node(catalog: &SeriesCatalog, metric: &MetricName, nodes: &[String]) -> Vec<Selector> {
    catalog
        .gpu_host_labels
        .iter()
        .map(|label| Selector { metric: metric.clone(), matchers: vec![Matcher::AnyOf(label.clone(), nodes.to_vec())] })
        .collect()
}

/// `max by (<by>) (f(sel₁) or f(sel₂))`.
fn per_gpu(by: &str, selectors: &[Selector], function: impl Fn(&Selector) -> String) -> String {
    let parts: Vec<String> = selectors.iter().map(function).collect();
    format!("max by ({by}) ({})", parts.join(" or "))
}

/// The GPU index of a series, if it carries one.
fn gpu_of(series: &Series, label: &LabelName) -> Option<u16> {
    series.labels.get(label.as_str()).and_then(|index| index.parse().ok())
}

/// The node a GPU series belongs to (whichever host label it carries).
fn host_of<'a>(series: &'a Series, catalog: &SeriesCatalog) -> Option<&'a str> {
    catalog.gpu_host_labels.iter().find_map(|label| series.labels.get(label.as_str())).map(String::as_str)
}

/// One onset of a GPU fault: the step it was found in (its end, epoch seconds), the GPU and the XID
/// code (0 for a counter's rise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidOnset {
    pub at: i64,
    pub node: String,
    pub gpu: u16,
    pub code: u32,
}

/// Steps whose onsets [`date_onsets`] dates from their raw samples, at most, per call.
const MAX_DATED_STEPS: usize = 32;

/// How an onset shows in its raw samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnsetKind {
    /// The first sample carrying the XID code.
    Code,
    /// The first sample above the one before it (a counter's rise).
    Rise,
}

/// Dates each XID onset by its own first raw sample inside the step it was found in: a range query's
/// steps move with its window, so a time read from them would differ between pages and loads.
pub async fn date_xids(
    vm: &VictoriaMetrics,
    catalog: &SeriesCatalog,
    nodes: &[String],
    onsets: &mut [XidOnset],
    step_s: u64,
) -> Result<(), crate::sources::victoriametrics::VmError> {
    date_onsets(vm, catalog, (&catalog.xid, OnsetKind::Code), nodes, onsets, step_s).await
}

/// Dates each onset of `metric` by its raw samples inside the step it was found in (one sample more
/// before it for a rise). One instant query of the raw samples per step and host label; an onset whose
/// samples do not come back keeps its step's end.
pub async fn date_onsets(
    vm: &VictoriaMetrics,
    catalog: &SeriesCatalog,
    (metric, kind): (&MetricName, OnsetKind),
    nodes: &[String],
    onsets: &mut [XidOnset],
    step_s: u64,
) -> Result<(), crate::sources::victoriametrics::VmError> {
    // The newest steps first, a bounded number of them: a node faulting all week keeps its older
    // onsets at their steps' ends rather than costing a query each.
    let steps: BTreeSet<i64> = onsets.iter().map(|onset| onset.at).collect();
    let steps: Vec<i64> = steps.into_iter().rev().take(MAX_DATED_STEPS).collect();
    let selectors = on_node(catalog, metric, nodes);
    let reach = match kind {
        OnsetKind::Code => step_s,
        OnsetKind::Rise => step_s + 4 * catalog.scrape_interval_s.max(1),
    };
    let asks: Vec<(i64, String)> = steps
        .iter()
        .flat_map(|&at| selectors.iter().map(move |selector| (at, format!("{selector}[{reach}s]"))))
        .collect();
    let answers = futures::future::try_join_all(asks.iter().map(|(at, query)| {
        let at = DateTime::from_timestamp(*at, 0).unwrap_or_default();
        vm.query(query, at)
    }))
    .await?;
    for ((at, _), answer) in asks.iter().zip(answers) {
        for series in answer {
            let (Some(node), Some(gpu)) = (host_of(&series, catalog), gpu_of(&series, &catalog.gpu_index_label)) else {
                continue;
            };
            for onset in onsets.iter_mut().filter(|o| o.at == *at && o.node == node && o.gpu == gpu) {
                let first = match kind {
                    OnsetKind::Code => first_sample_of(&series.points, onset.code),
                    OnsetKind::Rise => first_rise_of(&series.points, *at - i64::try_from(step_s).unwrap_or(0)),
                };
                if let Some(first) = first {
                    onset.at = first;
                }
            }
        }
    }
    Ok(())
}

/// The time of the first raw sample carrying `code`.
pub fn first_sample_of(points: &[(i64, f64)], code: u32) -> Option<i64> {
    points.iter().find(|&&(_, value)| (value - f64::from(code)).abs() < 0.5).map(|&(at, _)| at)
}

/// The time of the first raw sample after `after` that is above the one before it.
pub fn first_rise_of(points: &[(i64, f64)], after: i64) -> Option<i64> {
    points.windows(2).find(|pair| pair[1].0 > after && pair[1].1 > pair[0].1).map(|pair| pair[1].0)
}

/// Reads one node's GPUs and ping-mesh paths over `[start, end]`; an error's message when
/// VictoriaMetrics did not answer (in time).
pub async fn read_node(
    vm: &VictoriaMetrics,
    catalog: &SeriesCatalog,
    node: &str,
    tor: Option<&str>,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    timeout: std::time::Duration,
) -> Result<NodeReadings, String> {
    let nodes = [node.to_string()];
    let window_s = (end - start).num_seconds().max(1);
    let step_s = (window_s / TIMELINE_POINTS).max(catalog.scrape_interval_s.max(1) as i64);
    let gpu = catalog.gpu_index_label.as_str();
    let health = &catalog.health;
    let instant = |metric: &MetricName, function: &str| {
        per_gpu(gpu, &on_node(catalog, metric, &nodes), |s| format!("{function}({s}[{window_s}s])"))
    };
    let over_steps = |metric: &MetricName, function: &str| {
        per_gpu(gpu, &on_node(catalog, metric, &nodes), |s| format!("{function}({s}[{step_s}s])"))
    };
    let instants = [
        instant(&health.ecc_sbe_volatile, "last_over_time"),
        instant(&health.ecc_dbe_volatile, "last_over_time"),
        instant(&health.ecc_sbe_aggregate, "last_over_time"),
        instant(&health.ecc_dbe_aggregate, "last_over_time"),
        instant(&health.ecc_sbe_aggregate, "increase"),
        instant(&health.correctable_remapped_rows, "last_over_time"),
        instant(&catalog.faults.uncorrectable_remapped_rows, "last_over_time"),
        instant(&catalog.faults.uncorrectable_remapped_rows, "increase"),
        instant(&catalog.faults.row_remap_failure, "max_over_time"),
        instant(&health.row_remap_pending, "last_over_time"),
        instant(&health.power_violation_ns, "increase"),
        instant(&health.thermal_violation_ns, "increase"),
    ];
    let temperature = catalog.gpu_metric("temperature").map(|spec| spec.name.clone());
    let power = catalog.gpu_metric("power").map(|spec| spec.name.clone());
    let mut ranges = vec![
        over_steps(&catalog.xid, "max_over_time"),
        over_steps(&health.clock_event_reasons, "last_over_time"),
        // A step longer than a scrape keeps only its last mask; its largest catches a slowdown that
        // came and went inside the step (the masks seen are the union of both).
        over_steps(&health.clock_event_reasons, "max_over_time"),
        over_steps(&health.ecc_dbe_aggregate, "increase"),
    ];
    ranges.extend(temperature.iter().map(|name| over_steps(name, "max_over_time")));
    ranges.extend(power.iter().map(|name| over_steps(name, "avg_over_time")));
    let link_queries = tor.map(|tor| link_queries(catalog, tor, window_s)).unwrap_or_default();
    let asked = async {
        let instant_answers = futures::future::try_join_all(instants.iter().map(|query| vm.query(query, end)));
        let range_answers =
            futures::future::try_join_all(ranges.iter().map(|query| vm.query_range(query, start, end, step_s as u64)));
        let link_answers = futures::future::try_join_all(link_queries.iter().map(|query| vm.query(query, end)));
        futures::try_join!(instant_answers, range_answers, link_answers)
    };
    let (instant_answers, range_answers, link_answers) = match tokio::time::timeout(timeout, asked).await {
        Ok(Ok(answers)) => answers,
        Ok(Err(error)) => {
            tracing::warn!(%error, "reading a node's GPU health failed");
            return Err(format!("metrics unavailable: {}", error.for_viewer()));
        }
        Err(_) => return Err("metrics unavailable: VictoriaMetrics did not answer in time".into()),
    };
    let label = &catalog.gpu_index_label;
    let mut readings = NodeReadings { step_s, ..NodeReadings::default() };
    for (index, answer) in instant_answers.iter().enumerate() {
        for series in answer {
            let (Some(gpu), Some(&(_, value))) = (gpu_of(series, label), series.points.last()) else { continue };
            let (facts, counters) = gpu_entry(&mut readings.gpus, gpu);
            match index {
                0 => counters.ecc_sbe_volatile = Some(value),
                1 => counters.ecc_dbe_volatile = Some(value),
                2 => counters.ecc_sbe_aggregate = Some(value),
                3 => counters.ecc_dbe_aggregate = Some(value),
                4 => facts.sbe_in_window = Some(value),
                5 => counters.remapped_rows_correctable = Some(value),
                6 => counters.remapped_rows_uncorrectable = Some(value),
                7 => facts.uncorrectable_remaps_in_window = Some(value),
                8 => {
                    facts.row_remap_failure = value >= 1.0;
                    counters.row_remap_failure = Some(value >= 1.0);
                }
                9 => {
                    facts.row_remap_pending = value >= 1.0;
                    counters.row_remap_pending = Some(value >= 1.0);
                }
                10 => counters.power_violation_s = Some(value / 1e9),
                _ => counters.thermal_violation_s = Some(value / 1e9),
            }
        }
    }
    let mut range_answers = range_answers.into_iter();
    for series in range_answers.next().unwrap_or_default() {
        let Some(gpu) = gpu_of(&series, label) else { continue };
        let mut previous = 0u32;
        let mut codes = BTreeSet::new();
        for &(at, value) in &series.points {
            let code = if (1.0..1e6).contains(&value) { value.round() as u32 } else { 0 };
            if code != 0 && code != previous {
                readings.xid_faults.push((at, gpu, code));
                codes.insert(code);
            }
            previous = code;
        }
        let (facts, counters) = gpu_entry(&mut readings.gpus, gpu);
        facts.xid_codes = codes.iter().copied().collect();
        counters.xid_codes = codes
            .into_iter()
            .map(|code| {
                let (strength, meaning) = blame::xid_strength(code);
                wire::XidCode { code, strength: strength.wire(), meaning: meaning.to_string() }
            })
            .collect();
    }
    for series in range_answers.next().unwrap_or_default() {
        let Some(gpu) = gpu_of(&series, label) else { continue };
        let seen: BTreeSet<wire::ClockEventReason> =
            series.points.iter().flat_map(|&(_, mask)| clock_event_reasons(mask)).collect();
        let now = series.points.last().map(|&(_, mask)| clock_event_reasons(mask)).unwrap_or_default();
        let (facts, counters) = gpu_entry(&mut readings.gpus, gpu);
        facts.clock_event_reasons = seen.into_iter().collect();
        counters.clock_event_reasons = facts.clock_event_reasons.clone();
        counters.clock_event_reasons_now = now;
    }
    for series in range_answers.next().unwrap_or_default() {
        let Some(gpu) = gpu_of(&series, label) else { continue };
        let (facts, counters) = gpu_entry(&mut readings.gpus, gpu);
        let mut seen: BTreeSet<wire::ClockEventReason> = facts.clock_event_reasons.iter().copied().collect();
        seen.extend(series.points.iter().flat_map(|&(_, mask)| clock_event_reasons(mask)));
        facts.clock_event_reasons = seen.into_iter().collect();
        counters.clock_event_reasons = facts.clock_event_reasons.clone();
    }
    for series in range_answers.next().unwrap_or_default() {
        let Some(gpu) = gpu_of(&series, label) else { continue };
        let rises: Vec<(i64, f64)> = series.points.iter().copied().filter(|&(_, rise)| rise >= 0.5).collect();
        gpu_entry(&mut readings.gpus, gpu).0.dbe_in_window = Some(rises.iter().map(|&(_, rise)| rise.round()).sum());
        readings.dbe_faults.extend(rises.into_iter().map(|(at, rise)| (at, gpu, rise.round())));
    }
    let timelines = |gpus: &mut GpuMap, metric: &str, unit: &str, answer: Vec<Series>| -> Vec<wire::NodeGpuSeries> {
        let mut out: Vec<wire::NodeGpuSeries> = answer
            .into_iter()
            .filter_map(|series| {
                let gpu = gpu_of(&series, label)?;
                let high = series.points.iter().map(|&(_, value)| value).fold(f64::NAN, f64::max);
                let (_, counters) = gpu_entry(gpus, gpu);
                let max = if metric == "temperature" { &mut counters.temperature_max } else { &mut counters.power_max };
                *max = high.is_finite().then_some(high);
                let series = wire::MetricSeries { metric: metric.into(), unit: unit.into(), points: series.points };
                Some(wire::NodeGpuSeries { gpu, series })
            })
            .collect();
        out.sort_by_key(|series| series.gpu);
        out
    };
    if temperature.is_some() {
        readings.temperature =
            timelines(&mut readings.gpus, "temperature", "°C", range_answers.next().unwrap_or_default());
    }
    if power.is_some() {
        readings.power = timelines(&mut readings.gpus, "power", "W", range_answers.next().unwrap_or_default());
    }
    // Each XID at its own first sample, not at the end of this window's step.
    let mut onsets: Vec<XidOnset> =
        readings.xid_faults.iter().map(|&(at, gpu, code)| XidOnset { at, node: node.to_string(), gpu, code }).collect();
    if !onsets.is_empty() {
        match tokio::time::timeout(timeout, date_xids(vm, catalog, &nodes, &mut onsets, step_s as u64)).await {
            Ok(Ok(())) => {
                readings.xid_faults = onsets.into_iter().map(|onset| (onset.at, onset.gpu, onset.code)).collect();
            }
            Ok(Err(error)) => tracing::warn!(%error, "dating a node's XID errors failed; their steps' ends stand"),
            Err(_) => tracing::warn!("dating a node's XID errors took too long; their steps' ends stand"),
        }
    }
    // Each rise of double-bit errors at its own sample too.
    let mut rises: Vec<XidOnset> =
        readings.dbe_faults.iter().map(|&(at, gpu, _)| XidOnset { at, node: node.to_string(), gpu, code: 0 }).collect();
    if !rises.is_empty() {
        let dbe = (&health.ecc_dbe_aggregate, OnsetKind::Rise);
        if let Ok(Ok(())) =
            tokio::time::timeout(timeout, date_onsets(vm, catalog, dbe, &nodes, &mut rises, step_s as u64)).await
        {
            for (fault, dated) in readings.dbe_faults.iter_mut().zip(&rises) {
                fault.0 = dated.at;
            }
        }
    }
    readings.xid_faults.sort();
    readings.links = read_links(catalog, link_answers);
    Ok(readings)
}

/// Loss and p99 RTT of the ping-mesh paths from and to `tor` over the window.
fn link_queries(catalog: &SeriesCatalog, tor: &str, window_s: i64) -> Vec<String> {
    let faults = &catalog.faults;
    let (source, target) = (&faults.pingmesh_source_label, &faults.pingmesh_target_label);
    let on = |metric: &MetricName, end: &LabelName| Selector {
        metric: metric.clone(),
        matchers: vec![Matcher::Equal(end.clone(), tor.to_string())],
    };
    let mut queries = Vec::new();
    for end in [source, target] {
        queries.push(format!(
            "1 - sum by ({source}, {target}) (increase({}[{window_s}s])) / sum by ({source}, {target}) (increase({}[{window_s}s]))",
            on(&faults.pingmesh_successes, end),
            on(&faults.pingmesh_probes, end),
        ));
        queries.push(format!(
            "histogram_quantile(0.99, sum by (le, {source}, {target}) (increase({}[{window_s}s])))",
            on(&faults.pingmesh_rtt_bucket, end),
        ));
    }
    queries
}

/// The paths of the link queries' answers (loss, RTT, loss, RTT), each once.
fn read_links(catalog: &SeriesCatalog, answers: Vec<Vec<Series>>) -> Vec<wire::NodeLink> {
    let faults = &catalog.faults;
    let mut links: BTreeMap<(String, String), wire::NodeLink> = BTreeMap::new();
    for (index, answer) in answers.into_iter().enumerate() {
        for series in answer {
            let end = |label: &LabelName| series.labels.get(label.as_str()).cloned().unwrap_or_default();
            let (source_tor, target_tor) = (end(&faults.pingmesh_source_label), end(&faults.pingmesh_target_label));
            let Some(&(_, value)) = series.points.last() else { continue };
            let link = links.entry((source_tor.clone(), target_tor.clone())).or_insert_with(|| wire::NodeLink {
                source_tor,
                target_tor,
                loss: None,
                rtt_p99_ns: None,
                unhealthy: false,
            });
            if index % 2 == 0 {
                link.loss = Some(value.clamp(0.0, 1.0));
            } else {
                link.rtt_p99_ns = Some(value);
            }
        }
    }
    links
        .into_values()
        .map(|mut link| {
            link.unhealthy = link.loss.is_some_and(|loss| loss > faults.loss_threshold)
                || link.rtt_p99_ns.is_some_and(|rtt| rtt > faults.rtt_p99_threshold_ns);
            link
        })
        .collect()
}

/// Every GPU of `nodes` over `[start, end]`, as the grid's badges weigh them: the highest XID code,
/// new double-bit ECC errors and uncorrectable remaps, a failed or pending remap, and the clock-event
/// reasons of the latest reading. Keyed by node.
pub async fn read_nodes(
    vm: &VictoriaMetrics,
    catalog: &SeriesCatalog,
    nodes: &[String],
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    timeout: std::time::Duration,
) -> Result<BTreeMap<String, Vec<GpuFacts>>, String> {
    if nodes.is_empty() {
        return Ok(BTreeMap::new());
    }
    let window_s = (end - start).num_seconds().max(1);
    let recent_s = (catalog.scrape_interval_s.max(1) * 4) as i64;
    let by: Vec<&str> =
        catalog.gpu_host_labels.iter().map(LabelName::as_str).chain([catalog.gpu_index_label.as_str()]).collect();
    let by = by.join(", ");
    let health = &catalog.health;
    let query = |metric: &MetricName, function: &str, range_s: i64| {
        per_gpu(&by, &on_node(catalog, metric, nodes), |s| format!("{function}({s}[{range_s}s])"))
    };
    let queries = [
        query(&catalog.xid, "max_over_time", window_s),
        query(&health.ecc_dbe_aggregate, "increase", window_s),
        query(&catalog.faults.uncorrectable_remapped_rows, "increase", window_s),
        query(&catalog.faults.row_remap_failure, "max_over_time", window_s),
        query(&health.row_remap_pending, "last_over_time", recent_s),
        query(&health.clock_event_reasons, "last_over_time", recent_s),
    ];
    let asked = futures::future::try_join_all(queries.iter().map(|query| vm.query(query, end)));
    let answers = match tokio::time::timeout(timeout, asked).await {
        Ok(Ok(answers)) => answers,
        Ok(Err(error)) => {
            tracing::warn!(%error, "reading the nodes' GPU health failed");
            return Err(format!("metrics unavailable: {}", error.for_viewer()));
        }
        Err(_) => return Err("metrics unavailable: VictoriaMetrics did not answer in time".into()),
    };
    let mut facts: BTreeMap<(String, u16), GpuFacts> = BTreeMap::new();
    for (index, answer) in answers.iter().enumerate() {
        for series in answer {
            let (Some(host), Some(gpu), Some(&(_, value))) =
                (host_of(series, catalog), gpu_of(series, &catalog.gpu_index_label), series.points.last())
            else {
                continue;
            };
            let gpu_facts =
                facts.entry((host.to_string(), gpu)).or_insert_with(|| GpuFacts { gpu, ..GpuFacts::default() });
            match index {
                0 if (1.0..1e6).contains(&value) => gpu_facts.xid_codes = vec![value.round() as u32],
                0 => {}
                1 => gpu_facts.dbe_in_window = Some(value.round()),
                2 => gpu_facts.uncorrectable_remaps_in_window = Some(value.round()),
                3 => gpu_facts.row_remap_failure = value >= 1.0,
                4 => gpu_facts.row_remap_pending = value >= 1.0,
                _ => gpu_facts.clock_event_reasons = clock_event_reasons(value),
            }
        }
    }
    let mut by_node: BTreeMap<String, Vec<GpuFacts>> = BTreeMap::new();
    for ((node, _), gpu_facts) in facts {
        by_node.entry(node).or_default().push(gpu_facts);
    }
    Ok(by_node)
}

/// How long a recent window's health answer is shared, and the step its end is rounded down to.
pub const HEALTH_SHARED_S: i64 = 60;

/// Every node's GPU facts of one recent window, by node.
pub type NodesFacts = BTreeMap<String, Vec<GpuFacts>>;

/// The grid's health badges over the day before now, read once a minute for every viewer: node
/// health is not per-tenant data, each grid view and refresh asks for it, and its six 24-hour reads
/// cost more than the rest of the grid. A window ending now is rounded down to the minute
/// ([`HealthCache::recent_end`]) so that viewers of the same minute share one answer, and one read is
/// in flight per window however many ask. Failed reads are not kept.
#[derive(Clone)]
pub struct HealthCache {
    answers: moka::future::Cache<(String, i64, i64), std::sync::Arc<NodesFacts>>,
}

impl Default for HealthCache {
    fn default() -> Self {
        let shared = std::time::Duration::from_secs(HEALTH_SHARED_S.unsigned_abs());
        // A few windows per cluster at once: the minute now, and the one just before it while it ends.
        Self { answers: moka::future::Cache::builder().max_capacity(64).time_to_live(shared).build() }
    }
}

impl HealthCache {
    /// The end a health window ending at `end` is read to: a moment within the last minute (or none:
    /// now) is rounded down to its minute and shared; an older moment is read as asked. `Some` with
    /// the rounded end when it is shared.
    pub fn recent_end(end: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let end = end.unwrap_or(now);
        if end < now - chrono::Duration::seconds(HEALTH_SHARED_S) {
            return None;
        }
        let rounded = end.timestamp().min(now.timestamp()).div_euclid(HEALTH_SHARED_S) * HEALTH_SHARED_S;
        DateTime::from_timestamp(rounded, 0)
    }

    /// `read` of `cluster`'s nodes over `window`, or the answer another viewer's read of the same
    /// window got within the minute.
    pub async fn get_or_read<F>(
        &self,
        cluster: &str,
        (start, end): (DateTime<Utc>, DateTime<Utc>),
        read: F,
    ) -> Result<NodesFacts, String>
    where
        F: std::future::Future<Output = Result<NodesFacts, String>>,
    {
        let key = (cluster.to_string(), start.timestamp(), end.timestamp());
        let answer = self.answers.try_get_with(key, async { read.await.map(std::sync::Arc::new) }).await;
        answer.map(|facts| (*facts).clone()).map_err(|error| (*error).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).expect("a moment")
    }

    #[test]
    fn only_a_window_ending_within_the_minute_is_rounded_and_shared() {
        let now = at(1_800_000_030);
        assert_eq!(HealthCache::recent_end(None, now), Some(at(1_800_000_000)));
        assert_eq!(HealthCache::recent_end(Some(at(1_799_999_990)), now), Some(at(1_799_999_940)));
        // A moment past the server's clock reads no later than now.
        assert_eq!(HealthCache::recent_end(Some(at(1_800_000_100)), now), Some(at(1_800_000_000)));
        assert_eq!(HealthCache::recent_end(Some(at(1_799_999_900)), now), None, "an older moment is exact");
    }

    #[tokio::test]
    async fn a_window_is_read_once_while_shared_and_a_failure_is_not_kept() {
        let cache = HealthCache::default();
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let window = (at(1_799_913_600), at(1_800_000_000));
        let read = |answer: Result<NodesFacts, String>| {
            let reads = std::sync::Arc::clone(&reads);
            async move {
                reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                answer
            }
        };
        let facts: NodesFacts = [("n1".to_string(), vec![GpuFacts { gpu: 3, ..GpuFacts::default() }])].into();
        assert_eq!(cache.get_or_read("c", window, read(Err("down".into()))).await, Err("down".to_string()));
        assert_eq!(cache.get_or_read("c", window, read(Ok(facts.clone()))).await, Ok(facts.clone()));
        assert_eq!(cache.get_or_read("c", window, read(Ok(NodesFacts::new()))).await, Ok(facts.clone()));
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2, "the kept answer is not read again");
        // Another cluster's or another window's answer is its own.
        assert_eq!(cache.get_or_read("d", window, read(Ok(NodesFacts::new()))).await, Ok(NodesFacts::new()));
    }
}
