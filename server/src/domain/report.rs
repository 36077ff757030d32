//! The rules of a job report: which GPUs were the job's (attribution) and summaries of series (the
//! verdicts are in `verdicts`). Pure functions over numbers; no I/O.

use std::collections::{BTreeMap, BTreeSet};

use super::gpu::GpuRef;

/// Which evidence tied a GPU to a job, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttributionRule {
    /// dcgm-exporter's `hpc_job` label named the job on this GPU's series.
    HpcJobLabel,
    /// The node recorded the GPU indices while the job ran (slurm-plugin or the ingest API).
    PluginRecord,
    /// The job held every GPU of the node.
    WholeNode,
    /// Only the node is known: the job had some of its GPUs. Every GPU of the node is listed, uncertain.
    NodeOnly,
}

impl AttributionRule {
    pub fn name(self) -> &'static str {
        match self {
            Self::HpcJobLabel => "hpc_job_label",
            Self::PluginRecord => "plugin_record",
            Self::WholeNode => "whole_node",
            Self::NodeOnly => "node_only",
        }
    }
}

/// A GPU attributed to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributedGpu {
    pub gpu: GpuRef,
    pub rule: AttributionRule,
    pub uncertain: bool,
}

/// The evidence available for one job.
#[derive(Debug, Default)]
pub struct AttributionEvidence {
    /// GPUs whose series carry `hpc_job=<job id>`.
    pub labelled: Vec<GpuRef>,
    /// GPUs recorded on the nodes while the job ran.
    pub recorded: Vec<GpuRef>,
    /// GPU indices that report metrics on each node (what the node has).
    pub present: BTreeMap<String, BTreeSet<u16>>,
}

/// Picks the job's GPUs node by node, using the best evidence each node has.
/// `gpus_per_node` is the job's GPU count on each node (None when unknown).
pub fn attribute(nodes: &[String], gpus_per_node: Option<u64>, evidence: &AttributionEvidence) -> Vec<AttributedGpu> {
    let mut attributed = Vec::new();
    if gpus_per_node == Some(0) {
        return attributed;
    }
    for node in nodes {
        let from = |list: &[GpuRef]| -> Vec<GpuRef> { list.iter().filter(|gpu| &gpu.node == node).cloned().collect() };
        let labelled = from(&evidence.labelled);
        let recorded = from(&evidence.recorded);
        let (gpus, rule, uncertain) = if !labelled.is_empty() {
            (labelled, AttributionRule::HpcJobLabel, false)
        } else if !recorded.is_empty() {
            (recorded, AttributionRule::PluginRecord, false)
        } else {
            let present = evidence.present.get(node).cloned().unwrap_or_default();
            let all: Vec<GpuRef> = present.iter().map(|&index| GpuRef { node: node.clone(), index }).collect();
            let whole = gpus_per_node.is_some_and(|count| count as usize >= present.len()) && !present.is_empty();
            if whole { (all, AttributionRule::WholeNode, false) } else { (all, AttributionRule::NodeOnly, true) }
        };
        let mut unique: Vec<GpuRef> = gpus.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
        unique.sort();
        attributed.extend(unique.into_iter().map(|gpu| AttributedGpu { gpu, rule, uncertain }));
    }
    attributed
}

/// Whether the job held its nodes whole: on each, it was given every GPU that reports there. A
/// shared node's GPUs, all listed when no record places the job's (`uncertain`), are not given to it.
pub fn holds_nodes_whole(
    nodes: &[String],
    attributed: &[AttributedGpu],
    present: &BTreeMap<String, BTreeSet<u16>>,
) -> bool {
    !nodes.is_empty()
        && nodes.iter().all(|node| {
            let reporting = present.get(node).map_or(0, BTreeSet::len);
            let given = attributed.iter().filter(|a| &a.gpu.node == node && !a.uncertain).count();
            reporting > 0 && given >= reporting
        })
}

impl AttributionRule {
    /// Whether a viewer who is not staff may see a GPU's own figures under this rule (issue #15, M1):
    /// not when only the node is known (`NodeOnly`), where any GPU listed may be another tenant's;
    /// such a node's GPUs reach them only as one band across all of them. The same rule as
    /// [`viewer_gpus`] for the grid's readings.
    pub fn shown_per_gpu_to_tenants(self) -> bool {
        self != Self::NodeOnly
    }
}

/// Whether `text` names `node` as a word (`gpu002` in `gpu002 GPU 3`, not in `gpu0021`).
pub fn names_node(text: &str, node: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || "-_.".contains(c))).any(|word| word.trim_end_matches('.') == node)
}

/// A job the viewer may see, as far as its GPUs go.
#[derive(Debug, Clone, Default)]
pub struct HeldJob {
    pub nodes: Vec<String>,
    /// Its GPUs on each node, when slurmdbd's total tells it exactly.
    pub gpus_per_node: Option<u64>,
    /// The indices the plugin recorded for it.
    pub recorded: Vec<GpuRef>,
}

/// Nodes where a job holds GPUs the plugin did not record: only a whole-node check can place them.
pub fn unrecorded_nodes(jobs: &[HeldJob]) -> BTreeSet<String> {
    jobs.iter()
        .filter(|job| job.gpus_per_node != Some(0))
        .flat_map(|job| job.nodes.iter().filter(|node| !job.recorded.iter().any(|gpu| &gpu.node == *node)))
        .cloned()
        .collect()
}

/// The GPUs a viewer's jobs certainly held: the recorded indices, plus every GPU of a node (as
/// `present` lists what each node reports) that their GPUs there, summed over the jobs, cover. A node
/// held only in part without records contributes nothing: any of its GPUs may be another tenant's.
pub fn viewer_gpus(jobs: &[HeldJob], present: &BTreeMap<String, BTreeSet<u16>>) -> BTreeMap<String, BTreeSet<u16>> {
    let mut gpus: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    let mut held_count: BTreeMap<&str, u64> = BTreeMap::new();
    for job in jobs {
        for node in &job.nodes {
            let recorded: BTreeSet<u16> =
                job.recorded.iter().filter(|gpu| &gpu.node == node).map(|gpu| gpu.index).collect();
            let count = if recorded.is_empty() { job.gpus_per_node.unwrap_or(0) } else { recorded.len() as u64 };
            *held_count.entry(node.as_str()).or_default() += count;
            if !recorded.is_empty() {
                gpus.entry(node.clone()).or_default().extend(recorded);
            }
        }
    }
    for (node, count) in held_count {
        if let Some(reported) = present.get(node).filter(|reported| !reported.is_empty())
            && count >= reported.len() as u64
        {
            gpus.entry(node.to_string()).or_default().extend(reported.iter().copied());
        }
    }
    gpus
}

/// Reduces points to at most `max_points` by averaging equal buckets (keeps the first timestamp of each).
pub fn downsample(points: &[(i64, f64)], max_points: usize) -> Vec<(i64, f64)> {
    if max_points == 0 || points.len() <= max_points {
        return points.to_vec();
    }
    let bucket = points.len().div_ceil(max_points);
    points
        .chunks(bucket)
        .map(|chunk| (chunk[0].0, chunk.iter().map(|&(_, value)| value).sum::<f64>() / chunk.len() as f64))
        .collect()
}

/// How many of a timeline's steps one sample spans: 1 where every step has a point, 2 for samples
/// every 30 s read at 15 s steps. Found from the data (the mean distance between neighbouring points
/// over runs without a real gap, of more than four steps), not from the configured scrape interval,
/// which a site's exporter may not keep. Each timeline's points are `step_s` apart at best.
pub fn sample_stride<'a>(timelines: impl Iterator<Item = &'a [(i64, f64)]>, step_s: u64) -> u64 {
    let step = i64::try_from(step_s.max(1)).unwrap_or(i64::MAX);
    let (mut span, mut gaps) = (0i64, 0i64);
    for timeline in timelines {
        for pair in timeline.windows(2) {
            let distance = pair[1].0 - pair[0].0;
            if distance > 0 && distance <= 4 * step {
                span += distance;
                gaps += 1;
            }
        }
    }
    if gaps == 0 {
        return 1;
    }
    // A mean of 1.02 steps is a sample lost now and then, not a slower exporter.
    let stride = span as f64 / gaps as f64 / step as f64;
    ((stride - 0.05).ceil() as u64).max(1)
}

/// A timeline on buckets `stride` times as long, still ending at `end` and stepping back: each new
/// bucket holds the mean of the points that fall in it.
pub fn regrid(points: &[(i64, f64)], step_s: u64, stride: u64, end: i64) -> Vec<(i64, f64)> {
    let length = i64::try_from(step_s.saturating_mul(stride).max(1)).unwrap_or(i64::MAX);
    let mut buckets: BTreeMap<i64, (f64, u32)> = BTreeMap::new();
    for &(at, value) in points {
        // The bucket `(t - length, t]` that holds `at`, with `t` on the grid that ends at `end`.
        let back = (end - at).max(0) / length;
        let bucket = buckets.entry(end - back * length).or_default();
        bucket.0 += value;
        bucket.1 += 1;
    }
    buckets.into_iter().map(|(at, (sum, n))| (at, sum / f64::from(n))).collect()
}

/// Mean and peak of one metric on one GPU, as the report shows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub mean: f64,
    pub max: f64,
    pub samples: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(node: &str, index: u16) -> GpuRef {
        GpuRef { node: node.into(), index }
    }

    #[test]
    fn a_viewer_gets_recorded_gpus_and_whole_nodes_never_a_shared_nodes_rest() {
        let four: BTreeSet<u16> = (0..4).collect();
        let present: BTreeMap<String, BTreeSet<u16>> =
            ["n1", "n2", "n3", "n4"].iter().map(|node| (node.to_string(), four.clone())).collect();
        let jobs = [
            // Recorded on n1: exactly those two.
            HeldJob { nodes: vec!["n1".into()], gpus_per_node: Some(2), recorded: vec![gpu("n1", 1), gpu("n1", 3)] },
            // Holds all of n2 without records: the whole node.
            HeldJob { nodes: vec!["n2".into()], gpus_per_node: Some(4), recorded: Vec::new() },
            // Half of n3 without records: nothing (the other half is someone else's).
            HeldJob { nodes: vec!["n3".into()], gpus_per_node: Some(2), recorded: Vec::new() },
            // Two jobs of the viewer fill n4 between them.
            HeldJob { nodes: vec!["n4".into()], gpus_per_node: Some(2), recorded: Vec::new() },
            HeldJob { nodes: vec!["n4".into()], gpus_per_node: Some(2), recorded: Vec::new() },
        ];
        let got = viewer_gpus(&jobs, &present);
        assert_eq!(got["n1"], [1, 3].into());
        assert_eq!(got["n2"], four);
        assert!(!got.contains_key("n3"));
        assert_eq!(got["n4"], four);
        assert_eq!(unrecorded_nodes(&jobs), ["n2", "n3", "n4"].map(String::from).into());
        // An unknown split counts for nothing; a node that reports nothing gives nothing.
        let unknown = [HeldJob { nodes: vec!["n1".into(), "n5".into()], gpus_per_node: None, recorded: Vec::new() }];
        assert!(viewer_gpus(&unknown, &present).is_empty());
    }

    #[test]
    fn attribution_prefers_labels_then_records_then_whole_nodes() {
        let evidence = AttributionEvidence {
            labelled: vec![gpu("n1", 2)],
            recorded: vec![gpu("n1", 0), gpu("n2", 1), gpu("n2", 3)],
            present: BTreeMap::from([
                ("n1".into(), BTreeSet::from([0, 1, 2, 3])),
                ("n2".into(), BTreeSet::from([0, 1, 2, 3])),
                ("n3".into(), BTreeSet::from([0, 1, 2, 3])),
                ("n4".into(), BTreeSet::from([0, 1, 2, 3])),
            ]),
        };
        let nodes: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        let got = attribute(&nodes, Some(4), &evidence);
        assert_eq!(got[0], AttributedGpu { gpu: gpu("n1", 2), rule: AttributionRule::HpcJobLabel, uncertain: false });
        assert_eq!(got.iter().filter(|a| a.rule == AttributionRule::PluginRecord).count(), 2);
        assert_eq!(got.iter().filter(|a| a.rule == AttributionRule::WholeNode).count(), 4);
        let partial = attribute(&["n4".to_string()], Some(2), &evidence);
        assert_eq!(partial.len(), 4);
        assert!(partial.iter().all(|a| a.rule == AttributionRule::NodeOnly && a.uncertain));
        assert!(attribute(&nodes, Some(0), &evidence).is_empty(), "a CPU-only job has no GPUs");

        // Whole nodes: every reporting GPU given to the job; a shared node's listed GPUs are not.
        let n3 = ["n3".to_string()];
        assert!(holds_nodes_whole(&n3, &attribute(&n3, Some(4), &evidence), &evidence.present));
        let n4 = ["n4".to_string()];
        assert!(!holds_nodes_whole(&n4, &partial, &evidence.present), "all 4 listed, none given");
        assert!(!holds_nodes_whole(&nodes, &got, &evidence.present), "n1 and n2 only in part");
        assert!(!holds_nodes_whole(&n3, &[], &evidence.present), "a CPU-only job holds no GPU node whole");
    }

    #[test]
    fn tenants_see_per_gpu_figures_except_where_only_the_node_is_known() {
        assert!(AttributionRule::PluginRecord.shown_per_gpu_to_tenants());
        assert!(AttributionRule::WholeNode.shown_per_gpu_to_tenants());
        assert!(!AttributionRule::NodeOnly.shown_per_gpu_to_tenants());
        assert!(names_node("gpu002 GPUs 0-7: mean utilisation at most 1.0 %", "gpu002"));
        assert!(names_node("gpu073: XID 79 on 8 GPUs", "gpu073"));
        assert!(names_node("outlier: gpu017.", "gpu017"));
        assert!(!names_node("gpu0021 GPU 3", "gpu002"));
    }

    #[test]
    fn samples_every_30_s_read_at_15_s_steps_are_regridded_without_holes() {
        // dcgm-exporter every 30 s, read at 15 s: every other bucket empty.
        let end = 10_000;
        let every_other: Vec<(i64, f64)> = (0..40).map(|i| (end - 30 * i, 50.0)).rev().collect();
        assert_eq!(sample_stride(std::iter::once(every_other.as_slice()), 15), 2);
        let regridded = regrid(&every_other, 15, 2, end);
        assert_eq!(regridded.len(), 40);
        assert!(regridded.windows(2).all(|pair| pair[1].0 - pair[0].0 == 30), "no hole left");
        // 30 s samples read at 20 s steps: 20 and 40 s apart by turns, read as 40 s buckets.
        let uneven: Vec<(i64, f64)> =
            (0..30).map(|i| (end - 30 * i, 1.0)).rev().map(|(t, v)| (end - (end - t) / 20 * 20, v)).collect();
        assert_eq!(sample_stride(std::iter::once(uneven.as_slice()), 20), 2);
        // Every step sampled, a sample lost now and then, and a real gap: all stride 1.
        let full: Vec<(i64, f64)> = (0..100).filter(|i| i % 50 != 7).map(|i| (i * 15, 1.0)).collect();
        let gap: Vec<(i64, f64)> = (0..10).chain(200..210).map(|i| (i * 15, 1.0)).collect();
        assert_eq!(sample_stride([full.as_slice(), gap.as_slice()].into_iter(), 15), 1);
    }

    #[test]
    fn downsampling_averages_buckets() {
        let points: Vec<(i64, f64)> = (0..10).map(|i| (i * 15, i as f64)).collect();
        assert_eq!(downsample(&points, 5), vec![(0, 0.5), (30, 2.5), (60, 4.5), (90, 6.5), (120, 8.5)]);
        assert_eq!(downsample(&points, 20).len(), 10);
    }
}
