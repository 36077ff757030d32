//! A report as a viewer who is not staff may read it (issue #15, M1). On a node the job shared without
//! any record of its own GPUs there (`node_only`), every GPU of the node is listed, other tenants' too:
//! staff see them one by one, anyone else sees one band across them (lowest, mean and highest), with no
//! GPU's own series, summary, XID or verdict. Applied on every read, so an archived report (made by the
//! archiver, which sees everything) hands out no more than a live one.

use std::collections::BTreeMap;

use slurmlens_wire as wire;

use crate::domain::report::{AttributionRule, names_node};
use crate::domain::verdicts::GPU_VERDICT_KINDS;

/// `report` with the GPUs of nodes it shared (without records) folded into one band per node.
pub fn for_tenant(mut report: wire::JobReport) -> wire::JobReport {
    let (own, shared): (Vec<wire::GpuReport>, Vec<wire::GpuReport>) = std::mem::take(&mut report.gpus)
        .into_iter()
        .partition(|gpu| rule_of(gpu.attribution).shown_per_gpu_to_tenants());
    report.gpus = own;
    if shared.is_empty() {
        return report;
    }
    let mut by_node: BTreeMap<String, Vec<wire::GpuReport>> = BTreeMap::new();
    for gpu in shared {
        by_node.entry(gpu.node.clone()).or_default().push(gpu);
    }
    let names_shared = |text: &str| by_node.keys().any(|node| names_node(text, node));
    // The GPUs' own findings that name a shared node are about GPUs that may be other tenants'.
    report.verdicts.retain(|verdict| {
        !GPU_VERDICT_KINDS.contains(&verdict.kind)
            || !(names_shared(&verdict.message) || verdict.evidence.iter().any(|line| names_shared(line)))
    });
    for verdict in report.verdicts.iter_mut().filter(|verdict| verdict.kind == wire::VerdictKind::AttributionUncertain)
    {
        verdict.message = "the job shared a node and no GPU record exists: that node's GPUs, other tenants' too, \
                           are shown as one band (lowest, mean and highest across them), and none counts in the \
                           job's figures or findings"
            .into();
        verdict.evidence =
            by_node.iter().map(|(node, gpus)| format!("{node}: a band across its {} GPUs", gpus.len())).collect();
    }
    if let Some(failure) = report.failure.as_mut() {
        failure.evidence.retain(|fact| {
            !matches!(fact.source, wire::EvidenceSource::Xid | wire::EvidenceSource::Ecc) || !names_shared(&fact.place)
        });
    }
    report.shared_node_bands = by_node.into_iter().map(|(node, gpus)| band(node, &gpus)).collect();
    report
}

/// One node's GPUs as a band: per metric the mean of their means and the highest peak, and the spread
/// of their series at each point.
fn band(node: String, gpus: &[wire::GpuReport]) -> wire::SharedNodeBand {
    let mut summary: Vec<wire::MetricSummary> = Vec::new();
    let mut counts: Vec<u32> = Vec::new();
    for metric in gpus.iter().flat_map(|gpu| &gpu.summary) {
        match summary.iter().position(|known| known.metric == metric.metric) {
            Some(at) => {
                let known = &mut summary[at];
                known.mean += metric.mean;
                known.max = known.max.max(metric.max);
                known.samples += metric.samples;
                counts[at] += 1;
            }
            None => {
                summary.push(metric.clone());
                counts.push(1);
            }
        }
    }
    for (metric, count) in summary.iter_mut().zip(counts) {
        metric.mean /= f64::from(count);
    }
    wire::SharedNodeBand {
        node,
        gpus: u32::try_from(gpus.len()).unwrap_or(u32::MAX),
        summary,
        spread: super::form::spread(gpus.iter().map(|gpu| gpu.series.as_slice())),
    }
}

/// The domain's rule behind a wire attribution.
fn rule_of(attribution: wire::Attribution) -> AttributionRule {
    match attribution {
        wire::Attribution::HpcJobLabel => AttributionRule::HpcJobLabel,
        wire::Attribution::PluginRecord => AttributionRule::PluginRecord,
        wire::Attribution::WholeNode => AttributionRule::WholeNode,
        wire::Attribution::NodeOnly => AttributionRule::NodeOnly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(node: &str, index: u16, attribution: wire::Attribution, util: f64) -> wire::GpuReport {
        wire::GpuReport {
            node: node.into(),
            gpu: index,
            uuid: None,
            attribution,
            uncertain: attribution == wire::Attribution::NodeOnly,
            summary: vec![wire::MetricSummary {
                metric: "gpu_util".into(),
                unit: "%".into(),
                mean: util,
                max: util + 1.0,
                samples: 10,
            }],
            series: vec![wire::MetricSeries {
                metric: "gpu_util".into(),
                unit: "%".into(),
                points: vec![(1000, util)],
            }],
            xid_events: vec![wire::XidEvent {
                at: chrono::DateTime::UNIX_EPOCH,
                xid: 79,
                message: Some("secret".into()),
            }],
        }
    }

    fn verdict(kind: wire::VerdictKind, evidence: &str) -> wire::Verdict {
        wire::Verdict {
            kind,
            severity: wire::Severity::Warning,
            message: "m".into(),
            evidence: vec![evidence.into()],
            next_step: None,
        }
    }

    #[test]
    fn a_shared_nodes_gpus_become_one_band_and_their_own_findings_go() {
        let mut report: wire::JobReport = serde_json::from_value(serde_json::json!({
            "job": {
                "job_id": "7", "job_id_raw": 7, "cluster": "lab", "job_name": "x", "user": "alice", "uid": 1,
                "gid": 1, "account": "ml", "partition": "gpu", "qos": "normal", "state": "FAILED",
                "exit_code": "1:0", "derived_exit_code": "0:0", "submit": "2026-11-29T10:00:00Z",
                "elapsed": "01:00:00", "elapsed_raw": 3600, "timelimit": "02:00:00", "node_list": "n[1-2]",
                "alloc_nodes": 2, "alloc_cpus": 4, "alloc_gpus": 3, "alloc_tres": "cpu=4", "req_tres": "cpu=4",
                "req_mem": "1000M"
            },
            "source": "archived", "generated_at": "2026-11-29T12:00:00Z",
            "metrics": {"status": "ok", "step_s": 60}, "gpus": [], "nodes": [],
            "totals": {"gpu_hours": 3.0, "idle_gpu_hours": 0.0}, "verdicts": [],
            "failure": {"blame": "infrastructure", "reason": "r", "evidence": [
                {"at": "2026-11-29T10:30:00Z", "source": "xid", "place": "n2", "detail": "XID 79 on GPU 5", "strength": "strong"},
                {"at": "2026-11-29T10:31:00Z", "source": "xid", "place": "n1", "detail": "XID 79 on GPU 0", "strength": "strong"}
            ]}
        }))
        .expect("a report");
        report.gpus = vec![
            gpu("n1", 0, wire::Attribution::WholeNode, 50.0),
            gpu("n2", 0, wire::Attribution::NodeOnly, 10.0),
            gpu("n2", 1, wire::Attribution::NodeOnly, 30.0),
        ];
        report.verdicts = vec![
            verdict(wire::VerdictKind::IdleGpus, "n2 GPU 1: mean utilisation 1 %"),
            verdict(wire::VerdictKind::IdleGpus, "n1 GPU 0: mean utilisation 1 %"),
            verdict(wire::VerdictKind::IoBound, "n2: iowait 30 %"),
            verdict(wire::VerdictKind::AttributionUncertain, "n2 gpu 0"),
        ];
        let staff = report.clone();
        let seen = for_tenant(report);
        assert_eq!(seen.gpus, staff.gpus[..1], "only the GPU the job held whole");
        assert_eq!(seen.shared_node_bands.len(), 1);
        let band = &seen.shared_node_bands[0];
        assert_eq!((band.node.as_str(), band.gpus), ("n2", 2));
        assert_eq!((band.summary[0].mean, band.summary[0].max, band.summary[0].samples), (20.0, 31.0, 20));
        assert_eq!(band.spread[0].points, [(1000, 10.0, 20.0, 30.0)]);
        let kinds: Vec<wire::VerdictKind> = seen.verdicts.iter().map(|v| v.kind).collect();
        assert_eq!(
            kinds,
            [wire::VerdictKind::IdleGpus, wire::VerdictKind::IoBound, wire::VerdictKind::AttributionUncertain]
        );
        assert_eq!(seen.verdicts[0].evidence, ["n1 GPU 0: mean utilisation 1 %"]);
        assert_eq!(seen.verdicts[2].evidence, ["n2: a band across its 2 GPUs"]);
        let places: Vec<&str> =
            seen.failure.as_ref().map(|f| f.evidence.iter().map(|e| e.place.as_str()).collect()).unwrap_or_default();
        assert_eq!(places, ["n1"]);
        let json = serde_json::to_string(&seen).expect("json");
        assert_eq!(json.matches("secret").count(), 1, "only the GPU held whole keeps its XID message");
    }
}
