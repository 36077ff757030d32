//! The grid's GPU health over a day, read in pieces: the window's whole hours that have passed are read
//! once (one range query per fact for every hour not yet kept) and kept, and only its two partial edges
//! are read each time (one query per fact). A moment scrubbed to in the grid then costs its edges, not
//! a day of every GPU's fault series. Pieces combine exactly: maxima by the larger, counter increases
//! by their sum (each piece's increase starts at the sample before it, as the day's own would).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::domain::node_health::GpuFacts;
use crate::domain::promql::{LabelName, Matcher, MetricName, Selector};
use crate::domain::rules::Bucket;
use crate::domain::series::SeriesCatalog;
use crate::sources::victoriametrics::{Series, VictoriaMetrics, VmError};

/// An hour is kept once it ended this long ago: samples scraped in it have arrived by then.
pub const SEALED_AFTER_S: i64 = 300;

/// Hours kept, every cluster together: three days of one cluster's.
const KEPT_HOURS: u64 = 72;

/// A windowed fact of a GPU's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fact {
    /// The highest XID code.
    Xid,
    /// New double-bit ECC errors.
    Dbe,
    /// Rows remapped after uncorrectable errors.
    Uncorrectable,
    /// A failed row remap.
    RemapFailure,
}

impl Fact {
    const ALL: [Self; 4] = [Self::Xid, Self::Dbe, Self::Uncorrectable, Self::RemapFailure];

    fn metric(self, catalog: &SeriesCatalog) -> &MetricName {
        match self {
            Self::Xid => &catalog.xid,
            Self::Dbe => &catalog.health.ecc_dbe_aggregate,
            Self::Uncorrectable => &catalog.faults.uncorrectable_remapped_rows,
            Self::RemapFailure => &catalog.faults.row_remap_failure,
        }
    }

    fn function(self) -> &'static str {
        match self {
            Self::Xid | Self::RemapFailure => "max_over_time",
            Self::Dbe | Self::Uncorrectable => "increase",
        }
    }
}

/// One GPU's windowed facts over a piece of a window (or the whole of it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowFacts {
    pub xid: Option<f64>,
    pub dbe: Option<f64>,
    pub uncorrectable: Option<f64>,
    pub remap_failure: Option<f64>,
}

impl WindowFacts {
    fn add(&mut self, fact: Fact, value: f64) {
        let (slot, summed) = match fact {
            Fact::Xid => (&mut self.xid, false),
            Fact::Dbe => (&mut self.dbe, true),
            Fact::Uncorrectable => (&mut self.uncorrectable, true),
            Fact::RemapFailure => (&mut self.remap_failure, false),
        };
        *slot = Some(match (*slot, summed) {
            (None, _) => value,
            (Some(before), true) => before + value,
            (Some(before), false) => before.max(value),
        });
    }

    fn merge(&mut self, other: &Self) {
        let facts = [
            (Fact::Xid, other.xid),
            (Fact::Dbe, other.dbe),
            (Fact::Uncorrectable, other.uncorrectable),
            (Fact::RemapFailure, other.remap_failure),
        ];
        for (fact, value) in facts {
            if let Some(value) = value {
                self.add(fact, value);
            }
        }
    }

    /// Into the grid's facts of GPU `gpu` (an XID code of 0 is dcgm-exporter's "all well").
    pub fn into_gpu_facts(self, gpu: u16) -> GpuFacts {
        GpuFacts {
            gpu,
            xid_codes: self
                .xid
                .filter(|code| (1.0..1e6).contains(code))
                .map(|code| vec![code.round() as u32])
                .unwrap_or_default(),
            dbe_in_window: self.dbe.map(f64::round),
            uncorrectable_remaps_in_window: self.uncorrectable.map(f64::round),
            row_remap_failure: self.remap_failure.is_some_and(|failed| failed >= 1.0),
            ..GpuFacts::default()
        }
    }
}

/// Each GPU's windowed facts, by (node, GPU index).
pub type PieceFacts = BTreeMap<(String, u16), WindowFacts>;

/// How a window `(start, end]` is read: the partial hour at its start and at its end each time, the
/// whole hours between them that ended before `sealed` from the kept ones. Without a whole sealed
/// hour, the window is one piece (its `tail`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pieces {
    /// (evaluated at, seconds back).
    pub head: Option<(i64, i64)>,
    /// The whole hours' ends.
    pub hours: Vec<i64>,
    /// (evaluated at, seconds back).
    pub tail: Option<(i64, i64)>,
}

impl Pieces {
    pub fn of(start: i64, end: i64, sealed: i64) -> Self {
        let (first, last) = (Bucket::Hour.ceil(start), Bucket::Hour.floor(end.min(sealed)));
        if last <= first {
            return Self { head: None, hours: Vec::new(), tail: Some((end, end - start)) };
        }
        let hour = Bucket::Hour.seconds();
        Self {
            head: (first > start).then_some((first, first - start)),
            hours: (1..=(last - first) / hour).map(|n| first + n * hour).collect(),
            tail: (end > last).then_some((end, end - last)),
        }
    }
}

/// The whole hours' facts already read, per node set and hour end.
#[derive(Clone)]
pub struct HealthHours {
    kept: moka::future::Cache<(u64, i64), Arc<PieceFacts>>,
}

impl Default for HealthHours {
    fn default() -> Self {
        Self { kept: moka::future::Cache::builder().max_capacity(KEPT_HOURS).build() }
    }
}

/// The queries' parts shared by every piece: the labels a GPU is told apart by, and each fact's selectors.
struct Reading<'a> {
    vm: &'a VictoriaMetrics,
    catalog: &'a SeriesCatalog,
    nodes: &'a [String],
}

impl Reading<'_> {
    fn selectors(&self, fact: Fact) -> Vec<Selector> {
        let metric = fact.metric(self.catalog);
        let nodes = self.nodes.to_vec();
        self.catalog
            .gpu_host_labels
            .iter()
            .map(|label| Selector {
                metric: metric.clone(),
                matchers: vec![Matcher::AnyOf(label.clone(), nodes.clone())],
            })
            .collect()
    }

    /// `max by (<host labels>, <index>[, extra]) (f(sel₁) or f(sel₂))`.
    fn per_gpu(&self, fact: Fact, extra: &str, function: impl Fn(&Selector) -> String) -> String {
        let by: Vec<&str> = self
            .catalog
            .gpu_host_labels
            .iter()
            .map(LabelName::as_str)
            .chain([self.catalog.gpu_index_label.as_str()])
            .collect();
        let parts: Vec<String> = self.selectors(fact).iter().map(function).collect();
        format!("max by ({}{extra}) ({})", by.join(", "), parts.join(" or "))
    }

    /// The GPU a series is of.
    fn gpu(&self, series: &Series) -> Option<(String, u16)> {
        let host = self.catalog.gpu_host_labels.iter().find_map(|label| series.labels.get(label.as_str()))?;
        let index = series.labels.get(self.catalog.gpu_index_label.as_str())?.parse().ok()?;
        Some((host.clone(), index))
    }

    /// The facts of each hour ending in `hours`, one range query per fact over them.
    async fn hours(&self, hours: &[i64]) -> Result<BTreeMap<i64, PieceFacts>, VmError> {
        let mut by_hour: BTreeMap<i64, PieceFacts> = hours.iter().map(|&hour| (hour, PieceFacts::new())).collect();
        let (Some(&first), Some(&last)) = (hours.first(), hours.last()) else { return Ok(by_hour) };
        let at = |t: i64| DateTime::from_timestamp(t, 0).unwrap_or_default();
        let hour = Bucket::Hour.seconds();
        let queries: Vec<(Fact, String)> = Fact::ALL
            .into_iter()
            .map(|fact| (fact, self.per_gpu(fact, "", |s| format!("{}({s}[{hour}s])", fact.function()))))
            .collect();
        let answers = futures::future::try_join_all(
            queries.iter().map(|(_, query)| self.vm.query_range(query, at(first), at(last), hour.unsigned_abs())),
        )
        .await?;
        for ((fact, _), answer) in queries.iter().zip(answers) {
            for series in answer {
                let Some(gpu) = self.gpu(&series) else { continue };
                for &(t, value) in &series.points {
                    if let Some(facts) = by_hour.get_mut(&t) {
                        facts.entry(gpu.clone()).or_default().add(*fact, value);
                    }
                }
            }
        }
        Ok(by_hour)
    }

    /// The facts of the partial pieces at the window's `end`: one query per fact, the head through
    /// `offset`.
    async fn edges(&self, pieces: &Pieces, end: i64) -> Result<PieceFacts, VmError> {
        let edges: Vec<(i64, i64)> = [pieces.head, pieces.tail].into_iter().flatten().collect();
        let mut facts = PieceFacts::new();
        if edges.is_empty() {
            return Ok(facts);
        }
        let queries: Vec<(Fact, String)> = Fact::ALL
            .into_iter()
            .map(|fact| {
                let query = self.per_gpu(fact, ", piece", |s| {
                    let parts: Vec<String> = edges
                        .iter()
                        .map(|&(at, back)| {
                            let offset = if at < end { format!(" offset {}s", end - at) } else { String::new() };
                            format!(r#"label_set({}({s}[{back}s]{offset}), "piece", "{at}")"#, fact.function())
                        })
                        .collect();
                    parts.join(" or ")
                });
                (fact, query)
            })
            .collect();
        let at = DateTime::from_timestamp(end, 0).unwrap_or_default();
        let answers = futures::future::try_join_all(queries.iter().map(|(_, query)| self.vm.query(query, at))).await?;
        for ((fact, _), answer) in queries.iter().zip(answers) {
            for series in answer {
                let (Some(gpu), Some(&(_, value))) = (self.gpu(&series), series.points.last()) else { continue };
                facts.entry(gpu).or_default().add(*fact, value);
            }
        }
        Ok(facts)
    }
}

impl HealthHours {
    /// Every GPU of `nodes`' windowed facts over `(start, end]`: the whole hours ended before
    /// `now - SEALED_AFTER_S` from the kept ones (the missing read and kept), the edges read.
    pub async fn read(
        &self,
        vm: &VictoriaMetrics,
        catalog: &SeriesCatalog,
        nodes: &[String],
        (start, end): (DateTime<Utc>, DateTime<Utc>),
        now: DateTime<Utc>,
    ) -> Result<PieceFacts, VmError> {
        let pieces = Pieces::of(start.timestamp(), end.timestamp(), now.timestamp() - SEALED_AFTER_S);
        let nodes_key = {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            nodes.hash(&mut hasher);
            hasher.finish()
        };
        let mut kept = Vec::new();
        let mut missing = Vec::new();
        for &hour in &pieces.hours {
            match self.kept.get(&(nodes_key, hour)).await {
                Some(facts) => kept.push(facts),
                None => missing.push(hour),
            }
        }
        let reading = Reading { vm, catalog, nodes };
        let (read, edges) = futures::try_join!(reading.hours(&missing), reading.edges(&pieces, end.timestamp()))?;
        let mut facts = edges;
        for (hour, hour_facts) in read {
            let hour_facts = Arc::new(hour_facts);
            kept.push(Arc::clone(&hour_facts));
            self.kept.insert((nodes_key, hour), hour_facts).await;
        }
        for hour_facts in kept {
            for (gpu, piece) in hour_facts.iter() {
                facts.entry(gpu.clone()).or_default().merge(piece);
            }
        }
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_splits_into_its_edges_and_the_whole_hours_that_have_passed() {
        // (1,000, 87,400]: head to 3,600, hours to 86,400, tail to 87,400.
        let pieces = Pieces::of(1_000, 87_400, 90_000);
        assert_eq!((pieces.head, pieces.tail), (Some((3_600, 2_600)), Some((87_400, 1_000))));
        assert_eq!((pieces.hours.len(), pieces.hours.first(), pieces.hours.last()), (23, Some(&7_200), Some(&86_400)));
        // The last hours have not passed long enough: the tail reaches back to the last sealed one.
        let recent = Pieces::of(1_000, 87_400, 80_000);
        assert_eq!((recent.hours.last(), recent.tail), (Some(&79_200), Some((87_400, 8_200))));
        // Aligned to the hour: no edge.
        let aligned = Pieces::of(3_600, 90_000, 100_000);
        assert_eq!((aligned.head, aligned.tail, aligned.hours.len()), (None, None, 24));
        // No whole sealed hour: one piece.
        assert_eq!(
            Pieces::of(1_000, 87_400, 2_000),
            Pieces { head: None, hours: Vec::new(), tail: Some((87_400, 86_400)) }
        );
    }

    #[test]
    fn pieces_combine_as_the_whole_window_would() {
        let mut day = WindowFacts::default();
        for piece in [
            WindowFacts { xid: Some(0.0), dbe: Some(2.0), uncorrectable: None, remap_failure: Some(0.0) },
            WindowFacts { xid: Some(79.0), dbe: Some(0.0), uncorrectable: Some(1.0), remap_failure: Some(0.0) },
            WindowFacts { xid: Some(13.0), dbe: Some(3.0), uncorrectable: None, remap_failure: Some(1.0) },
        ] {
            day.merge(&piece);
        }
        assert_eq!(
            day,
            WindowFacts { xid: Some(79.0), dbe: Some(5.0), uncorrectable: Some(1.0), remap_failure: Some(1.0) }
        );
        let facts = day.into_gpu_facts(3);
        assert_eq!((facts.xid_codes, facts.dbe_in_window, facts.row_remap_failure), (vec![79], Some(5.0), true));
        assert!(WindowFacts { xid: Some(0.0), ..WindowFacts::default() }.into_gpu_facts(0).xid_codes.is_empty());
    }
}
