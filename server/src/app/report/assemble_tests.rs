//! The report's assembly, tested on fixtures: totals, shapes, failure analysis, bursts.

use super::super::fixtures::{END, START, at, failed_job, gathered, reporter};
use super::super::{ending_of, unassembled, wire_map};
use super::*;
use crate::domain::report::AttributionRule;
use crate::domain::tres::{TresCatalog, TresId, TresKind};
use crate::domain::verdicts::GPU_VERDICT_KINDS;

fn catalog() -> TresCatalog {
    let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
    TresCatalog::new([kind(1, "cpu", ""), kind(4, "node", ""), kind(1001, "gres", "gpu")])
}

/// The report before assembly, as the report maker starts it.
fn empty_report() -> wire::JobReport {
    let job = wire_map::job(&failed_job(), &catalog(), "lab", END as u64);
    unassembled(job, wire::ReportSource::Final, at(END), Some((at(START), at(END))))
}

#[test]
fn totals_add_up_over_the_attributed_gpus() {
    let mut report = empty_report();
    reporter().fill(&mut report, &failed_job(), gathered(), at(END), 120);
    let totals = &report.totals;
    assert_eq!(report.gpus.len(), 16);
    assert_eq!((report.metrics.status.as_str(), report.metrics.step_s), ("ok", 60));
    assert!((totals.gpu_hours - 16.0).abs() < 1e-9, "16 GPUs for an hour");
    assert!((totals.idle_gpu_hours - 2.0).abs() < 1e-9, "GPU 0 of each node idled the whole hour");
    assert_eq!(totals.mean_gpu_util, Some(35.0));
    assert_eq!(totals.mean_tensor_active, Some(17.5));
    assert!(totals.energy_kwh.is_some_and(|kwh| (kwh - 4.8).abs() < 1e-9), "16 × 300 W × 1 h");
    assert_eq!(totals.node_power_w, Some(4000.0));
    assert!(totals.node_energy_kwh.is_some_and(|kwh| (kwh - 4.0).abs() < 1e-9), "4 kW for the job's hour");
    let gpu0 = &report.gpus[0];
    assert_eq!((gpu0.node.as_str(), gpu0.gpu, gpu0.attribution.as_str()), ("gpu001", 0, "whole_node"));
    assert_eq!(gpu0.series.iter().find(|s| s.metric == "gpu_util").map(|s| s.points.len()), Some(60));
}

#[test]
fn a_job_shorter_than_a_step_is_drawn_from_its_own_samples_or_not_at_all() {
    // A 4-second job read at 15-second steps: the range's one bucket reaches back before its start.
    let mut gathered = gathered();
    (gathered.step_s, gathered.window_s) = (15, 4);
    for entry in gathered.data.values_mut() {
        entry.timelines.insert("gpu_util".into(), vec![(END, 99.0)]);
    }
    // GPU 1 of gpu001 had a sample in the job's window; the others none.
    if let Some(node) = gathered.network.get_mut("gpu001") {
        node.timelines.insert("node_power".into(), vec![(END, 9000.0)]);
    }
    let sampled = |node: &str, index: u16| node == "gpu001" && index == 1;
    for (_, entry) in gathered.data.iter_mut().filter(|(gpu, _)| !sampled(&gpu.node, gpu.index)) {
        (entry.means, entry.maxes, entry.counts) = Default::default();
    }
    let mut report = empty_report();
    reporter().fill(&mut report, &failed_job(), gathered, at(END), 120);
    let others = report.gpus.iter().filter(|gpu| !sampled(&gpu.node, gpu.gpu));
    assert!(others.clone().all(|gpu| gpu.series.is_empty()), "no series without a sample in the window");
    assert_eq!(others.count(), 15);
    let one = report.gpus.iter().find(|gpu| sampled(&gpu.node, gpu.gpu)).expect("GPU 1");
    let series = one.series.iter().find(|series| series.metric == "gpu_util").expect("its utilisation");
    assert_eq!(series.points, [(END, 10.0)], "the window's own mean, never the bucket reaching before it");
    let node = report.nodes.iter().find(|node| node.node == "gpu001").expect("gpu001's signals");
    let power = node.series.iter().find(|series| series.metric == "node_power").expect("its power");
    assert_eq!(power.points, [(END, 4000.0)], "the node's too");
    assert!(node.summary.iter().all(|summary| summary.max == summary.mean), "no peak from before the job");
}

/// The report's shape, pinned: a change to any field's name, type or order shows up as a diff
/// to review (`cargo insta review`). Two GPUs keep the snapshot readable.
#[test]
fn the_reports_shape_is_pinned() {
    let mut report = empty_report();
    let mut gathered = gathered();
    gathered.attributed.retain(|attributed| attributed.gpu.node == "gpu001" && attributed.gpu.index < 2);
    reporter().fill(&mut report, &failed_job(), gathered, at(END), 4);
    report.failure = Some(failure_analysis(&failed_job(), &ending_of(&failed_job()), Vec::new(), &report, at(END)));
    insta::assert_json_snapshot!(report, { ".generated_at" => "[generated_at]" });
}

#[test]
fn idle_gpus_are_named_in_a_verdict() {
    let mut report = empty_report();
    reporter().fill(&mut report, &failed_job(), gathered(), at(END), 120);
    let idle = report.verdicts.iter().find(|verdict| verdict.kind == wire::VerdictKind::IdleGpus);
    assert!(idle.is_some_and(|v| v.evidence.iter().any(|line| line.contains("gpu001 GPU 0"))), "{:?}", report.verdicts);
}

#[test]
fn a_shared_nodes_gpus_are_listed_and_not_counted() {
    // gpu002 shared with other jobs, no record of which of its GPUs were the job's: all 8 listed.
    let mut gathered = gathered();
    gathered.whole_nodes = false;
    for attributed in gathered.attributed.iter_mut().filter(|attributed| attributed.gpu.node == "gpu002") {
        (attributed.rule, attributed.uncertain) = (AttributionRule::NodeOnly, true);
    }
    let mut report = empty_report();
    reporter().fill(&mut report, &failed_job(), gathered, at(END), 120);
    let totals = &report.totals;
    assert_eq!(report.gpus.len(), 16, "every GPU of the shared node is listed");
    assert!((totals.gpu_hours - 16.0).abs() < 1e-9);
    assert!((totals.unattributed_gpu_hours - 8.0).abs() < 1e-9, "gpu002's 8 GPU hours are not placed");
    assert!((totals.idle_gpu_hours - 1.0).abs() < 1e-9, "only gpu001's idle GPU 0 counts: {totals:?}");
    assert_eq!(totals.mean_gpu_util, Some(35.0));
    assert!(totals.energy_kwh.is_some_and(|kwh| (kwh - 2.4).abs() < 1e-9), "8 × 300 W × 1 h");
    assert_eq!((totals.node_power_w, totals.node_energy_kwh), (None, None), "gpu002's BMC reads other jobs too");
    let idle =
        report.verdicts.iter().find(|verdict| verdict.kind == wire::VerdictKind::IdleGpus).expect("gpu001 GPU 0 idled");
    assert!(idle.message.starts_with("1 of 8 GPUs"), "{idle:?}");
    assert!(idle.evidence.iter().all(|line| !line.contains("gpu002")), "{idle:?}");
    let uncertain = report.verdicts.iter().find(|verdict| verdict.kind == wire::VerdictKind::AttributionUncertain);
    assert!(uncertain.is_some_and(|v| v.evidence.len() == 8 && v.message.contains("none counts")), "{uncertain:?}");

    // Nothing known of the job's GPUs at all: no mean, no energy, no GPU finding but the uncertainty.
    let mut gathered = super::super::fixtures::gathered();
    gathered
        .attributed
        .iter_mut()
        .for_each(|attributed| (attributed.rule, attributed.uncertain) = (AttributionRule::NodeOnly, true));
    let mut report = empty_report();
    reporter().fill(&mut report, &failed_job(), gathered, at(END), 120);
    let totals = &report.totals;
    assert!((totals.unattributed_gpu_hours - totals.gpu_hours).abs() < 1e-9 && totals.idle_gpu_hours == 0.0);
    assert_eq!((totals.mean_gpu_util, totals.energy_kwh, totals.peak_memory_mib), (None, None, None));
    let kinds: Vec<wire::VerdictKind> = report.verdicts.iter().map(|verdict| verdict.kind).collect();
    assert!(kinds.iter().all(|kind| !GPU_VERDICT_KINDS.contains(kind)), "{kinds:?}");
    assert!(kinds.contains(&wire::VerdictKind::AttributionUncertain), "{kinds:?}");
}

fn gpu(node: &str, index: u16, xids: &[(i64, u32)]) -> wire::GpuReport {
    wire::GpuReport {
        node: node.into(),
        gpu: index,
        uuid: None,
        attribution: wire::Attribution::WholeNode,
        uncertain: false,
        summary: Vec::new(),
        series: Vec::new(),
        xid_events: xids.iter().map(|&(t, xid)| wire::XidEvent { at: at(t), xid, message: None }).collect(),
    }
}

/// A report whose metrics were read, with `gpus`.
fn report_with(gpus: Vec<wire::GpuReport>) -> wire::JobReport {
    let mut report = empty_report();
    report.metrics.status = wire::MetricsState::Ok;
    report.gpus = gpus;
    report
}

#[test]
fn a_gpu_that_fell_off_the_bus_is_the_infrastructures_fault() {
    let record = failed_job();
    let alone =
        failure_analysis(&record, &ending_of(&record), Vec::new(), &report_with(vec![gpu("gpu002", 5, &[])]), at(END));
    assert_eq!(alone.blame, wire::Blame::Application, "exit 1 with nothing wrong around it: {}", alone.reason);
    let broken = report_with(vec![gpu("gpu002", 5, &[(END - 120, 79)])]);
    let analysis = failure_analysis(&record, &ending_of(&record), Vec::new(), &broken, at(END));
    assert_eq!(analysis.blame, wire::Blame::Infrastructure, "{}", analysis.reason);
    let sources: Vec<&str> = analysis.evidence.iter().map(|fact| fact.source.as_str()).collect();
    assert_eq!(sources, ["xid", "slurm"], "evidence in time order, Slurm's own record last");
    assert!(analysis.evidence[0].detail.contains("fallen off the bus"));
    assert!(analysis.evidence[1].detail.contains("exited with code 1"), "{:?}", analysis.evidence[1]);
}

#[test]
fn a_node_that_lost_its_gpus_is_one_fact_naming_them() {
    let record = failed_job();
    let gpus = (0..8).map(|index| gpu("gpu002", index, &[(END - 120 + i64::from(index), 79)])).collect();
    let analysis = failure_analysis(&record, &ending_of(&record), Vec::new(), &report_with(gpus), at(END));
    let xids: Vec<&wire::FailureEvidence> =
        analysis.evidence.iter().filter(|fact| fact.source == wire::EvidenceSource::Xid).collect();
    assert_eq!(xids.len(), 1, "{xids:?}");
    assert_eq!(xids[0].place, "gpu002");
    assert!(xids[0].detail.starts_with("XID 79 on 8 GPUs (0-7): "), "{}", xids[0].detail);
}

#[test]
fn a_job_without_telemetry_is_not_told_nothing_went_wrong() {
    let record = failed_job();
    let mut report = empty_report();
    report.metrics.status = wire::MetricsState::NoData;
    let analysis = failure_analysis(&record, &ending_of(&record), Vec::new(), &report, at(END));
    assert!(analysis.reason.contains("could not be looked for"), "{}", analysis.reason);
}

#[test]
fn lustre_io_prefers_the_jobs_own_statistics() {
    let mut io: IoReadings = BTreeMap::new();
    io.insert((IoSource::Nodes, "lustre_read"), (vec![(START + 60, 9e9)], Some(9e9)));
    io.insert((IoSource::JobStats, "lustre_read"), (vec![(START + 60, 2e6), (START + 120, 4e6)], Some(3e6)));
    let (source, report) = io_report(&io, 3600, 120, None).unwrap_or_else(|| panic!("an I/O report"));
    assert_eq!(source, IoSource::JobStats);
    assert!((report.read_bytes - 3e6 * 3600.0).abs() < 1e-3, "the mean rate over the window");
    assert_eq!(report.summary.iter().find(|s| s.metric == "lustre_read").map(|s| s.max), Some(4e6));
    assert!(io_report(&BTreeMap::new(), 3600, 120, None).is_none(), "no exporter, no I/O section");
}

#[test]
fn bursts_are_unknown_where_only_counters_exist() {
    let mut report = empty_report();
    report.nodes.push(wire::NodeNetworkReport {
        node: "gpu001".into(),
        summary: vec![wire::MetricSummary {
            metric: "rdma_tx".into(),
            unit: "B/s".into(),
            mean: 1e9,
            max: 2e9,
            samples: 0,
        }],
        series: Vec::new(),
    });
    let mut peaks: BurstReadings = BTreeMap::new();
    peaks.insert(("gpu002".into(), "rx"), BurstReading { peak: Some(4.9e10), seconds_above: Some(3.0) });
    let rows = reporter().bursts(&report, &["gpu001".into(), "gpu002".into()], peaks);
    let row = |node: &str, direction: wire::Direction| rows.iter().find(|r| r.node == node && r.direction == direction);
    assert!(
        row("gpu001", wire::Direction::Tx)
            .is_some_and(|r| r.status == wire::BurstStatus::Unknown && r.message.is_some())
    );
    assert!(
        row("gpu002", wire::Direction::Rx)
            .is_some_and(|r| r.status == wire::BurstStatus::Measured && r.seconds_above == Some(3.0))
    );
    assert!(
        row("gpu001", wire::Direction::Rx).is_none() && row("gpu002", wire::Direction::Tx).is_none(),
        "no reading, no row"
    );
}
