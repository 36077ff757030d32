//! Long jobs' GPU figures through the site's recording rules (`slurmlens rules`): whether the rules
//! cover a job's window (a probe of the recorded series' first and last samples, 5-minute and hourly),
//! the queries that read the whole hours and 5-minute buckets from them and the two partial edges raw,
//! and the exact combination of those parts per GPU. Where the 5-minute rules are missing or lag, the
//! report reads raw and says why; where the hourly ones do, it reads 5-minute buckets there.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::Reporter;
use super::gather::GpuData;
use super::plan::{Eval, Planned, Tiles, Wanted};
use crate::domain::gpu::GpuRef;
use crate::domain::promql::Selector;
use crate::domain::rules::{self, Bucket, Part, Parts, RuleGroup, Split};
use crate::domain::series::MetricSpec;
use crate::domain::time::epoch;
use crate::domain::verdicts;
use crate::sources::victoriametrics::{Series, VictoriaMetrics, VmError};

/// The catalogue key whose rules also count idle samples (the idle share of the report).
pub const IDLE_KEY: &str = "gpu_util";

/// How the report reads the recording rules.
#[derive(Debug, Clone, PartialEq)]
pub struct RulesSettings {
    /// Read long jobs through the rules at all.
    pub enabled: bool,
    /// The recorded series' name prefix (`slurmlens` → `slurmlens:DCGM_FI_DEV_GPU_UTIL:sum5m`).
    pub prefix: String,
    /// Jobs shorter than this are read raw: their raw scan is already cheap (`bench long-report
    /// --hours` on 768 GPUs, seven metrics: raw 0.7 s at 6 h, 1.3 s at a day, the rules 1.3× and 1.9×
    /// faster; 4× at 3 days, 18× at 14).
    pub min_window_s: u64,
    /// The rules may lag the job's end by this much (vmalert evaluates after each boundary): the raw
    /// tail then starts at their last sample. Beyond it the report reads raw.
    pub max_lag_s: u64,
}

impl Default for RulesSettings {
    fn default() -> Self {
        Self { enabled: true, prefix: "slurmlens".into(), min_window_s: 2 * 86_400, max_lag_s: 900 }
    }
}

/// Where one report's GPU figures over the window come from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reads {
    /// Raw samples; the note says why a job long enough for the rules was not read through them.
    Raw(Option<String>),
    /// Whole buckets from the rules, the split's edges raw.
    Rules(Split),
}

/// The idle threshold in the utilisation metric's own unit: a sample at or under it is idle.
pub(super) fn idle_at_most(util: &MetricSpec) -> f64 {
    (verdicts::IDLE_UTIL_PCT / util.scale).next_down()
}

impl Reporter {
    /// The rules file for this site's catalogue (`slurmlens rules`).
    pub fn rules_yaml(&self) -> Result<String, String> {
        let catalog = &self.settings.catalog;
        let threshold = catalog.gpu_metric(IDLE_KEY).map_or(0.0, idle_at_most);
        let prefix = &self.settings.rules.prefix;
        let groups = Bucket::ALL
            .into_iter()
            .map(|bucket| {
                let rules = rules::rules(catalog, prefix, bucket, IDLE_KEY, threshold)?;
                Ok(RuleGroup { name: format!("{prefix}-gpu-{}", bucket.suffix()), bucket, rules })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(rules::rules_yaml(&groups))
    }

    /// A raw selector's recorded twin: the same matchers on the rule's series.
    fn recorded(&self, selector: &Selector, part: Part, bucket: Bucket) -> Option<Selector> {
        let metric = rules::recorded_name(&self.settings.rules.prefix, &selector.metric, part, bucket).ok()?;
        Some(Selector { metric, matchers: selector.matchers.clone() })
    }

    /// Whether the job's window `(start, end]` is read through the rules: long enough, the rules on,
    /// and the count rule of the catalogue's first GPU metric recorded for every GPU of the job from
    /// the first whole bucket to within the allowed lag of the last.
    pub(super) async fn rule_reads(
        &self,
        vm: &VictoriaMetrics,
        nodes: &[String],
        indices: &[u16],
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Reads, VmError> {
        let settings = &self.settings.rules;
        let window_s = (end - start).num_seconds();
        let split = Split::of(start.timestamp(), end.timestamp());
        let (Some(split), Some(first_metric)) = (split, self.settings.catalog.gpu_metrics.first()) else {
            return Ok(Reads::Raw(None));
        };
        if !settings.enabled || u64::try_from(window_s).unwrap_or(0) < settings.min_window_s {
            return Ok(Reads::Raw(None));
        }
        let (at, back) = split.interior();
        let raw = self.gpu_selectors(&first_metric.name, nodes, indices);
        // Per bucket length: the first and last recorded samples over the interior, and how many GPUs
        // have recorded buckets, against those with raw series (an index lookup): a replay that lost
        // some GPUs' series must not leave them with their edges alone.
        let index = &self.settings.catalog.gpu_index_label;
        let mut probes = Vec::new();
        for bucket in Bucket::ALL {
            let length = bucket.suffix();
            let selectors: Vec<Selector> =
                raw.iter().filter_map(|selector| self.recorded(selector, Part::Count, bucket)).collect();
            probes.extend(selectors.iter().map(|s| {
                format!(
                    r#"label_set(aggr_over_time(("tfirst_over_time", "tlast_over_time"), {s}[{back}s]), "bucket", "{length}")"#
                )
            }));
            let per_gpu = self.per_gpu("count", "", &selectors, |s| format!("tlast_over_time({s}[{back}s])"), "");
            probes.push(format!(r#"label_set(count({per_gpu}), "rollup", "gpus", "bucket", "{length}")"#));
        }
        let query = format!("min by (rollup, bucket) ({})", probes.join(" or "));
        let raw_strings: Vec<String> = raw.iter().map(Selector::to_string).collect();
        let (answer, found) = futures::join!(
            vm.query(&query, epoch_at(at)),
            futures::future::join_all(raw_strings.iter().map(|selector| vm.series(selector, start, end)))
        );
        let answer = answer?;
        let mut raw_gpus = std::collections::BTreeSet::new();
        for labels in found.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().flatten() {
            let host = self.settings.catalog.gpu_host_labels.iter().find_map(|label| labels.get(label.as_str()));
            raw_gpus.insert((host.cloned(), labels.get(index.as_str()).cloned()));
        }
        let raw_gpus = i64::try_from(raw_gpus.len()).unwrap_or(i64::MAX);
        let reading = |rollup: &str, bucket: Bucket| {
            answer
                .iter()
                .find(|series| {
                    series.labels.get("rollup").map(String::as_str) == Some(rollup)
                        && series.labels.get("bucket").map(String::as_str) == Some(bucket.suffix())
                })
                .and_then(|series| series.points.last())
                .map(|&(_, value)| value as i64)
        };
        let five = Bucket::FiveMinutes;
        let (Some(first_sample), Some(last_sample)) =
            (reading("tfirst_over_time", five), reading("tlast_over_time", five))
        else {
            return Ok(Reads::Raw(Some("read raw: recording rules missing for the job's GPUs".into())));
        };
        let recorded_gpus = reading("gpus", five).unwrap_or(0);
        if recorded_gpus < raw_gpus {
            let missing = raw_gpus - recorded_gpus;
            let note = format!("read raw: recording rules missing for {missing} of the job's {raw_gpus} GPUs");
            return Ok(Reads::Raw(Some(note)));
        }
        let shown = |t: i64| epoch_at(t).format("%Y-%m-%d %H:%M UTC");
        if first_sample.rem_euclid(five.seconds()) != 0 || last_sample.rem_euclid(five.seconds()) != 0 {
            // A replay started off a boundary records buckets that straddle the raw edges.
            let note = "read raw: recording rules not on 5-minute boundaries (replay from a whole 5 minutes)";
            return Ok(Reads::Raw(Some(note.into())));
        }
        if first_sample > split.first + five.seconds() {
            let note =
                format!("read raw: recording rules start only at {} (after the job's start)", shown(first_sample));
            return Ok(Reads::Raw(Some(note)));
        }
        let lag = split.last - last_sample;
        if lag > i64::try_from(settings.max_lag_s).unwrap_or(i64::MAX) || last_sample <= split.first {
            return Ok(Reads::Raw(Some(format!("read raw: recording rules lagging since {}", shown(last_sample)))));
        }
        // A lag within the allowance moves the raw tail's start back to the last recorded bucket.
        let split = Split { last: last_sample, ..split };
        // The whole hours the hourly rules recorded for every GPU, on hour boundaries; elsewhere (not
        // deployed, lagging, a GPU's series lost) the 5-minute buckets stand in for them.
        let hour = Bucket::Hour;
        let hours = match (reading("tfirst_over_time", hour), reading("tlast_over_time", hour)) {
            (Some(first), Some(last))
                if reading("gpus", hour).unwrap_or(0) >= raw_gpus
                    && first.rem_euclid(hour.seconds()) == 0
                    && last.rem_euclid(hour.seconds()) == 0 =>
            {
                split.with_hours(first - hour.seconds(), last)
            }
            _ => split,
        };
        Ok(Reads::Rules(hours))
    }

    /// The queries of one GPU metric read through the rules: the timeline of whole buckets (at
    /// `step_s`, which steps over whole buckets; over whole hours where the hourly rules are read and
    /// it spans hours), each recorded piece's parts, and the raw edges' parts. Every part keeps the
    /// series' labels and names its rollup, so [`PartsRead::combine`] adds them per series before
    /// merging copies.
    pub(super) fn rule_queries(
        &self,
        spec: &MetricSpec,
        selectors: &[Selector],
        split: &Split,
        step_s: u64,
    ) -> Vec<Planned> {
        let idle = (spec.key == IDLE_KEY).then(|| idle_at_most(spec));
        let twin = |selector: &Selector, part: Part, bucket: Bucket| {
            self.recorded(selector, part, bucket).map(|s| s.to_string())
        };
        // Timeline buckets end on boundaries of the buckets read, inside the recorded span: none
        // takes in a recorded bucket that began before the job.
        let hour_s = Bucket::Hour.seconds().unsigned_abs();
        let (bucket, tiles) = match split.hours {
            Some((from, to)) if step_s.is_multiple_of(hour_s) => {
                (Bucket::Hour, Tiles::new(epoch_at(from), epoch_at(to), step_s))
            }
            _ => (Bucket::FiveMinutes, Tiles::new(epoch_at(split.first), epoch_at(split.last), step_s)),
        };
        let means = self.per_gpu(
            "max",
            "",
            selectors,
            |s| match (twin(s, Part::Sum, bucket), twin(s, Part::Count, bucket)) {
                (Some(sum), Some(count)) => {
                    format!("sum_over_time({sum}[{step_s}s]) / sum_over_time({count}[{step_s}s])")
                }
                _ => format!("avg_over_time({s}[{step_s}s])"),
            },
            "",
        );
        let mut planned = vec![Planned {
            what: Wanted::Buckets(spec.key.clone(), spec.scale),
            eval: Eval::Range(tiles),
            query: means,
            reads: selectors.to_vec(),
        }];
        let mut parts = vec![
            (Part::Sum, "sum_over_time", "sum_over_time"),
            (Part::Count, "sum_over_time", "count_over_time"),
            (Part::Max, "max_over_time", "max_over_time"),
        ];
        if idle.is_some() {
            parts.push((Part::Idle, "sum_over_time", "idle"));
        }
        let part = |query: String, at: i64, piece: Option<Bucket>| Planned {
            what: Wanted::WindowPart(spec.key.clone(), spec.scale, piece),
            eval: Eval::At(epoch_at(at)),
            query,
            reads: selectors.to_vec(),
        };
        for (bucket, at, back) in split.recorded() {
            let recorded: Vec<String> = selectors
                .iter()
                .flat_map(|s| {
                    parts.iter().filter_map(move |&(part, function, rollup)| {
                        let twin = twin(s, part, bucket)?;
                        Some(format!(r#"label_set({function}({twin}[{back}s]), "rollup", "{rollup}")"#))
                    })
                })
                .collect();
            planned.push(part(recorded.join(" or "), at, Some(bucket)));
        }
        for (at, back) in [split.head(), split.tail()].into_iter().flatten() {
            let raw: Vec<String> = selectors
                .iter()
                .map(|s| {
                    let aggregate = format!(
                        r#"aggr_over_time(("sum_over_time", "count_over_time", "max_over_time"), {s}[{back}s])"#
                    );
                    match idle {
                        Some(below) => {
                            format!(r#"{aggregate} or label_set(count_le_over_time({s}[{back}s], {below}), "rollup", "idle")"#)
                        }
                        None => aggregate,
                    }
                })
                .collect();
            planned.push(part(raw.join(" or "), at, None));
        }
        planned
    }
}

/// One GPU's series (its labels, without `rollup`) and the parts read of each.
type Copies = BTreeMap<Vec<(String, String)>, Parts>;

/// The parts read for each GPU and metric, per series (a GPU's series copied per job in
/// dcgm-exporter's mapping file are kept apart until [`PartsRead::combine`] merges them).
#[derive(Default)]
pub(super) struct PartsRead {
    by_gpu: BTreeMap<(GpuRef, String), (f64, Copies)>,
    /// The bucket lengths read from the rules, per metric.
    asked: BTreeMap<String, BTreeSet<Bucket>>,
    /// The rollups each bucket length's recorded pieces gave, per GPU and metric.
    recorded: BTreeMap<(GpuRef, String, Bucket), BTreeSet<String>>,
}

impl PartsRead {
    /// Notes that `key`'s recorded buckets of `bucket` length were asked for.
    pub(super) fn asked(&mut self, key: &str, bucket: Bucket) {
        self.asked.entry(key.to_string()).or_default().insert(bucket);
    }

    /// Adds one answered series of a [`Wanted::WindowPart`] query (`piece`: the bucket length of a
    /// recorded piece, `None` for a raw edge).
    pub(super) fn add(&mut self, gpu: GpuRef, key: &str, scale: f64, piece: Option<Bucket>, series: &Series) {
        let (Some(rollup), Some(&(_, value))) = (series.labels.get("rollup"), series.points.last()) else { return };
        if let Some(bucket) = piece {
            self.recorded.entry((gpu.clone(), key.to_string(), bucket)).or_default().insert(rollup.clone());
        }
        let labels: Vec<(String, String)> = series
            .labels
            .iter()
            .filter(|(label, _)| label.as_str() != "rollup" && label.as_str() != "__name__")
            .map(|(label, value)| (label.clone(), value.clone()))
            .collect();
        let entry = self.by_gpu.entry((gpu, key.to_string())).or_insert_with(|| (scale, BTreeMap::new()));
        entry.1.entry(labels).or_default().add(rollup, value);
    }

    /// The metrics (keys) some GPU of which lacks a part of the recorded buckets of a length read: its
    /// sum, count or peak rule (or the idle count of the idle metric) recorded nothing there, so its
    /// figures would come from the other pieces alone.
    pub(super) fn incomplete(&self) -> Vec<String> {
        let mut keys = BTreeSet::new();
        for (gpu, key) in self.by_gpu.keys() {
            for &bucket in self.asked.get(key).into_iter().flatten() {
                let found = self.recorded.get(&(gpu.clone(), key.clone(), bucket));
                let has = |rollup: &str| found.is_some_and(|found| found.contains(rollup));
                let parts = ["sum_over_time", "count_over_time", "max_over_time"].into_iter().all(has);
                if !parts || (key == IDLE_KEY && !has("idle")) {
                    keys.insert(key.clone());
                }
            }
        }
        keys.into_iter().collect()
    }

    /// Each GPU's mean, peak, sample count (and idle share) over the window, as the raw window query
    /// gives them: per series the parts added, then the copies of one GPU merged by their highest.
    pub(super) fn combine(self, data: &mut BTreeMap<GpuRef, GpuData>) {
        for ((gpu, key), (scale, copies)) in self.by_gpu {
            let Some(entry) = data.get_mut(&gpu) else { continue };
            let highest = |values: Vec<f64>| values.into_iter().reduce(f64::max);
            if let Some(mean) = highest(copies.values().filter_map(Parts::mean).collect()) {
                entry.means.insert(key.clone(), mean * scale);
            }
            if let Some(max) = highest(copies.values().filter_map(|parts| parts.max).collect()) {
                entry.maxes.insert(key.clone(), max * scale);
            }
            if let Some(count) = highest(copies.values().map(|parts| parts.count).collect()) {
                entry.counts.insert(key.clone(), count);
            }
            if key == IDLE_KEY {
                entry.idle_share = highest(copies.values().filter_map(Parts::idle_share).collect());
            }
        }
    }
}

pub(super) fn epoch_at(seconds: i64) -> DateTime<Utc> {
    epoch(u64::try_from(seconds).unwrap_or(0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::reporter;
    use super::*;

    #[test]
    fn a_rule_read_metric_reads_buckets_from_the_rules_and_only_the_edges_raw() {
        let reporter = reporter();
        let util = reporter.settings.catalog.gpu_metric(IDLE_KEY).expect("gpu_util").clone();
        let selectors = reporter.gpu_selectors(&util.name, &["gpu001".into()], &[]);
        let split = Split::of(1_000, 100_000).expect("whole buckets");
        let planned = reporter.rule_queries(&util, &selectors, &split, 600);
        assert_eq!(planned.len(), 4, "timeline, interior, head, tail");
        assert!(
            planned[0].query.contains("slurmlens:DCGM_FI_DEV_GPU_UTIL:sum5m{") && planned[0].query.contains("[600s]")
        );
        let instants: Vec<i64> = planned[1..]
            .iter()
            .map(|p| match p.eval {
                Eval::At(at) => at.timestamp(),
                _ => panic!("parts are instant queries"),
            })
            .collect();
        assert_eq!(instants, [99_900, 1_200, 100_000], "interior at the last boundary, edges at their ends");
        assert!(planned[1].query.contains("idle5m") && planned[1].query.contains("[98700s]"), "{}", planned[1].query);
        assert!(planned[2].query.contains("DCGM_FI_DEV_GPU_UTIL{") && planned[2].query.contains("[200s]"));
        assert!(planned[3].query.contains("count_le_over_time") && planned[3].query.contains("[100s]"));
        assert!(!planned[2].query.contains("slurmlens:"), "edges read raw: {}", planned[2].query);
    }

    #[test]
    fn whole_hours_are_read_from_the_hourly_rules_and_the_timeline_steps_over_them() {
        let reporter = reporter();
        let util = reporter.settings.catalog.gpu_metric(IDLE_KEY).expect("gpu_util").clone();
        let selectors = reporter.gpu_selectors(&util.name, &["gpu001".into()], &[]);
        let split = Split::of(1_000, 100_000).expect("whole buckets").with_hours(0, 200_000);
        let planned = reporter.rule_queries(&util, &selectors, &split, 7_200);
        assert_eq!(planned.len(), 6, "timeline, 5-minute head, hours, 5-minute tail, raw head, raw tail");
        assert!(planned[0].query.contains(":sum1h{") && planned[0].query.contains("[7200s]"), "{}", planned[0].query);
        let Eval::Range(tiles) = planned[0].eval else { panic!("the timeline is a range") };
        assert_eq!((tiles.start().timestamp(), tiles.end.timestamp()), (3_600, 97_200), "inside the whole hours");
        let pieces: Vec<(Option<Bucket>, i64)> = planned[1..]
            .iter()
            .map(|p| match (&p.what, p.eval) {
                (Wanted::WindowPart(_, _, piece), Eval::At(at)) => (*piece, at.timestamp()),
                _ => panic!("parts are instant window parts"),
            })
            .collect();
        let (five, hour) = (Some(Bucket::FiveMinutes), Some(Bucket::Hour));
        assert_eq!(pieces, [(five, 3_600), (hour, 97_200), (five, 99_900), (None, 1_200), (None, 100_000)]);
        assert!(planned[2].query.contains(":max1h{") && planned[2].query.contains("[93600s]"), "{}", planned[2].query);
        assert!(planned[1].query.contains(":idle5m{") && planned[1].query.contains("[2400s]"), "{}", planned[1].query);
        // A timeline step that is not whole hours reads the 5-minute buckets.
        let finer = reporter.rule_queries(&util, &selectors, &split, 1_800);
        assert!(finer[0].query.contains(":sum5m{"), "{}", finer[0].query);
    }

    #[test]
    fn a_gpu_lacking_a_part_of_one_bucket_length_makes_its_metric_incomplete() {
        let gpu = GpuRef { node: "gpu001".into(), index: 0 };
        let answer = |rollup: &str| Series {
            labels: [("rollup".to_string(), rollup.to_string())].into_iter().collect(),
            points: vec![(0, 1.0)],
        };
        let mut parts = PartsRead::default();
        for bucket in Bucket::ALL {
            parts.asked("fb_used", bucket);
        }
        for rollup in ["sum_over_time", "count_over_time", "max_over_time"] {
            parts.add(gpu.clone(), "fb_used", 1.0, Some(Bucket::FiveMinutes), &answer(rollup));
            parts.add(gpu.clone(), "fb_used", 1.0, None, &answer(rollup));
        }
        // The hourly buckets gave sums and counts but no peak: the 5-minute peak must not stand in.
        parts.add(gpu.clone(), "fb_used", 1.0, Some(Bucket::Hour), &answer("sum_over_time"));
        parts.add(gpu.clone(), "fb_used", 1.0, Some(Bucket::Hour), &answer("count_over_time"));
        assert_eq!(parts.incomplete(), ["fb_used"]);
        parts.add(gpu, "fb_used", 1.0, Some(Bucket::Hour), &answer("max_over_time"));
        assert!(parts.incomplete().is_empty());
    }

    #[test]
    fn the_labs_rules_file_is_what_slurmlens_rules_prints_for_the_default_catalogue() {
        let generated = reporter().rules_yaml().expect("the default catalogue's rules");
        assert_eq!(
            generated,
            include_str!("../../../../lab/recording-rules.yml"),
            "run `slurmlens rules > lab/recording-rules.yml`"
        );
    }
}
