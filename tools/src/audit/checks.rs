//! The invariants a job report must keep with its own evidence, as checks over the JSON the API
//! serves (and the pages render). Each check names the contradiction it found, with the figures.
//!
//! - `outside_run`: a fact outside the run counted as inside it ("during its run" with no strong fact in
//!   the run, or a strong fact dated before its start or after its end).
//! - `coverage`: figures without their coverage (a report with GPU samples and no coverage, a partial
//!   coverage no verdict says, idle hours or energy beyond the measured hours, "no fault … during its
//!   run" over a run telemetry covers only in part).
//! - `verdict_figures`: a verdict that disagrees with the figures it cites ("efficient" when most GPUs
//!   idled, "N of M GPUs were idle" against the GPUs' own means, the headline mean against the GPUs',
//!   a completed job told to resubmit, a count of hardware faults against the facts listed).
//! - `striped`: a timeline with every other step empty (samples slower than the step read at).
//! - `event_time` (in `mod.rs`, across pages): an XID's time that differs between the job's report and
//!   its node's page, or between two windows of that page.

use chrono::{DateTime, Utc};
use slurmlens_slurm::state::{JobStateBase, StateFilter};
use slurmlens_wire as wire;

/// Idle below this mean utilisation: the server's rule.
const IDLE_UTIL_PCT: f64 = slurmlens::domain::verdicts::IDLE_UTIL_PCT;
/// No GPU draws more than this (kW) for long: energy above it per measured GPU-hour was extrapolated.
const MAX_GPU_KW: f64 = 1.2;

/// One contradiction between a report and its own evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Contradiction {
    pub check: &'static str,
    pub detail: String,
}

fn found(check: &'static str, detail: String) -> Contradiction {
    Contradiction { check, detail }
}

/// Every check of one report.
pub fn check(report: &wire::JobReport) -> Vec<Contradiction> {
    let mut out = Vec::new();
    out.extend(outside_run(report));
    out.extend(coverage(report));
    out.extend(verdict_figures(report));
    out.extend(striped(report));
    out
}

fn run_of(report: &wire::JobReport) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    Some((report.window_start?, report.window_end?))
}

/// Whether a fact is about a GPU, node or link of the job (not a ping-mesh path or Slurm's record).
fn local(source: wire::EvidenceSource) -> bool {
    !matches!(
        source,
        wire::EvidenceSource::PingmeshLoss | wire::EvidenceSource::PingmeshRtt | wire::EvidenceSource::Slurm
    )
}

fn outside_run(report: &wire::JobReport) -> Vec<Contradiction> {
    let mut out = Vec::new();
    let (Some(failure), Some((start, end))) = (&report.failure, run_of(report)) else { return out };
    let inside = |at: DateTime<Utc>| at >= start && at <= end;
    for fact in failure.evidence.iter().filter(|fact| fact.strength == wire::EvidenceStrength::Strong) {
        if !inside(fact.at) && local(fact.source) {
            out.push(found(
                "outside_run",
                format!(
                    "a strong {} fact at {} lies outside the run ({start} to {end}): {}",
                    fact.source.as_str(),
                    fact.at,
                    fact.detail
                ),
            ));
        }
    }
    let strong_inside = failure
        .evidence
        .iter()
        .filter(|fact| fact.strength == wire::EvidenceStrength::Strong && local(fact.source) && inside(fact.at))
        .count();
    if failure.blame == wire::Blame::Infrastructure && failure.reason.contains("during its run") && strong_inside == 0 {
        out.push(found(
            "outside_run",
            format!("the reason says a fault showed during its run, but no strong fact lies in it: {}", failure.reason),
        ));
    }
    // "3 hardware faults on the job's own GPUs…": the count is of the facts listed.
    if let Some(count) = failure.reason.split(" hardware fault").next().and_then(|head| head.parse::<usize>().ok())
        && count != strong_inside
    {
        out.push(found(
            "verdict_figures",
            format!("the reason counts {count} hardware faults; {strong_inside} strong facts lie in the run"),
        ));
    }
    out
}

fn coverage(report: &wire::JobReport) -> Vec<Contradiction> {
    let mut out = Vec::new();
    let totals = &report.totals;
    let sampled = report.gpus.iter().any(|gpu| !gpu.uncertain && !gpu.summary.is_empty());
    let Some(covered) = &totals.coverage else {
        if sampled && report.metrics.status == wire::MetricsState::Ok {
            out.push(found("coverage", "GPU figures without the share of the run they cover".into()));
        }
        return out;
    };
    let partial = covered.share < wire::WHOLE_COVERAGE_SHARE;
    if partial && !report.verdicts.iter().any(|verdict| verdict.kind == wire::VerdictKind::TelemetryGap) {
        out.push(found(
            "coverage",
            format!("samples cover {:.0} % of the run and no verdict says so", covered.share * 100.0),
        ));
    }
    if totals.idle_gpu_hours > covered.measured_gpu_hours + 1e-6 {
        out.push(found(
            "coverage",
            format!(
                "{:.2} idle GPU-hours counted over {:.2} measured: extrapolated",
                totals.idle_gpu_hours, covered.measured_gpu_hours
            ),
        ));
    }
    if let Some(energy) = totals.energy_kwh
        && energy > covered.measured_gpu_hours * MAX_GPU_KW + 1e-6
    {
        out.push(found(
            "coverage",
            format!("{energy:.2} kWh over {:.2} measured GPU-hours: extrapolated", covered.measured_gpu_hours),
        ));
    }
    let claims_whole = |text: &str| {
        text.contains("no fault showed on its GPUs, nodes or network paths during its run")
            || text.contains("no infrastructure fault slowed it")
    };
    if partial && let Some(failure) = report.failure.as_ref().filter(|failure| claims_whole(&failure.reason)) {
        out.push(found(
            "coverage",
            format!(
                "'no fault' claimed for the whole run, which samples cover {:.0} % of: {}",
                covered.share * 100.0,
                failure.reason
            ),
        ));
    }
    out
}

fn mean_of(gpu: &wire::GpuReport, metric: &str) -> Option<f64> {
    gpu.summary.iter().find(|summary| summary.metric == metric).map(|summary| summary.mean)
}

fn verdict_figures(report: &wire::JobReport) -> Vec<Contradiction> {
    let mut out = Vec::new();
    let known: Vec<f64> =
        report.gpus.iter().filter(|gpu| !gpu.uncertain).filter_map(|gpu| mean_of(gpu, "gpu_util")).collect();
    let idle = known.iter().filter(|util| **util < IDLE_UTIL_PCT).count();
    for verdict in &report.verdicts {
        match verdict.kind {
            wire::VerdictKind::Good if !known.is_empty() && 2 * idle >= known.len() => out.push(found(
                "verdict_figures",
                format!("'efficient' while {idle} of {} GPUs idled: {}", known.len(), verdict.message),
            )),
            wire::VerdictKind::IdleGpus => {
                let said = verdict.message.split(" of ").next().and_then(|n| n.parse::<usize>().ok());
                if said != Some(idle) {
                    out.push(found(
                        "verdict_figures",
                        format!("says {said:?} idle GPUs; the GPUs' own means give {idle}: {}", verdict.message),
                    ));
                }
            }
            _ => {}
        }
        let completed = StateFilter::of_printed(&report.job.state) == Some(StateFilter::Base(JobStateBase::Completed));
        if completed && verdict.next_step.as_deref().is_some_and(|step| step.starts_with("resubmit")) {
            out.push(found("verdict_figures", format!("a COMPLETED job is told to resubmit ({})", verdict.kind)));
        }
    }
    if let Some(mean) = report.totals.mean_gpu_util
        && !known.is_empty()
    {
        let expected = known.iter().sum::<f64>() / known.len() as f64;
        if (mean - expected).abs() > 0.5 {
            out.push(found(
                "verdict_figures",
                format!("headline mean utilisation {mean:.1} % against {expected:.1} % from the GPUs' own means"),
            ));
        }
    }
    out
}

/// Every other step of a GPU's utilisation empty: the step is finer than the samples.
fn striped(report: &wire::JobReport) -> Vec<Contradiction> {
    let step = i64::try_from(report.metrics.step_s).unwrap_or(0);
    if step <= 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for gpu in report.gpus.iter().take(64) {
        let Some(series) = gpu.series.iter().find(|series| series.metric == "gpu_util") else { continue };
        let gaps: Vec<i64> = series.points.windows(2).map(|pair| pair[1].0 - pair[0].0).collect();
        let doubled = gaps.iter().filter(|gap| **gap == 2 * step).count();
        if gaps.len() >= 8 && doubled * 3 > gaps.len() {
            out.push(found(
                "striped",
                format!("{} GPU {}: {doubled} of {} steps of {step} s have no point", gpu.node, gpu.gpu, gaps.len()),
            ));
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).unwrap_or_default()
    }

    fn gpu(index: u16, util: f64) -> wire::GpuReport {
        wire::GpuReport {
            node: "gpu001".into(),
            gpu: index,
            uuid: None,
            attribution: wire::Attribution::WholeNode,
            uncertain: false,
            summary: vec![wire::MetricSummary {
                metric: "gpu_util".into(),
                unit: "%".into(),
                mean: util,
                max: util,
                samples: 10,
            }],
            series: Vec::new(),
            xid_events: Vec::new(),
        }
    }

    /// A report from its JSON: the API's own shape, so the checks read what a page reads.
    fn report(gpus: Vec<wire::GpuReport>) -> wire::JobReport {
        let job = serde_json::json!({
            "job_id": "7", "job_id_raw": 7, "cluster": "lab", "job_name": "x", "user": "u", "uid": 1, "gid": 1,
            "account": "a", "partition": "gpu", "qos": "normal", "state": "FAILED", "exit_code": "1:0",
            "derived_exit_code": "0:0", "submit": at(0), "start": at(1_000), "end": at(2_000),
            "elapsed": "00:16:40", "elapsed_raw": 1000, "timelimit": "UNLIMITED", "node_list": "gpu001",
            "alloc_nodes": 1, "alloc_cpus": 8, "alloc_gpus": 8, "alloc_tres": "gres/gpu=8", "req_tres": "",
            "req_mem": "",
        });
        let mut report: wire::JobReport = serde_json::from_value(serde_json::json!({
            "job": job, "source": "final", "generated_at": at(3_000), "window_start": at(1_000),
            "window_end": at(2_000), "metrics": {"status": "ok", "step_s": 15}, "gpus": [], "nodes": [],
            "totals": {"gpu_hours": 2.2, "idle_gpu_hours": 0.0}, "verdicts": [],
        }))
        .unwrap_or_else(|error| panic!("a report: {error}"));
        report.gpus = gpus;
        report.totals.coverage =
            Some(wire::TelemetryCoverage { measured_gpu_hours: 2.2, share: 1.0, from: at(1_000), to: at(2_000) });
        report
    }

    fn verdict(kind: wire::VerdictKind, message: &str) -> wire::Verdict {
        wire::Verdict {
            kind,
            severity: wire::Severity::Info,
            message: message.into(),
            evidence: Vec::new(),
            next_step: None,
        }
    }

    fn checks(report: &wire::JobReport) -> Vec<&'static str> {
        check(report).into_iter().map(|c| c.check).collect()
    }

    #[test]
    fn a_consistent_report_passes() {
        let mut consistent = report((0..8).map(|g| gpu(g, 90.0)).collect());
        consistent.totals.mean_gpu_util = Some(90.0);
        consistent
            .verdicts
            .push(verdict(wire::VerdictKind::Good, "tensor cores active 45 % of the time on the 8 busy GPUs"));
        assert!(check(&consistent).is_empty(), "{:?}", check(&consistent));
    }

    #[test]
    fn a_drain_after_the_end_called_during_the_run_is_caught() {
        let mut wrong = report(vec![gpu(0, 90.0)]);
        wrong.failure = Some(wire::FailureAnalysis {
            blame: wire::Blame::Infrastructure,
            reason: "1 hardware fault on the job's own GPUs, nodes or links during its run".into(),
            evidence: vec![wire::FailureEvidence {
                at: at(2_180),
                source: wire::EvidenceSource::NodeEvent,
                place: "gpu001".into(),
                detail: "DRAIN: Xid 79".into(),
                strength: wire::EvidenceStrength::Strong,
            }],
        });
        let found = checks(&wrong);
        assert!(found.contains(&"outside_run"), "{found:?}");
        assert!(found.contains(&"verdict_figures"), "1 fault counted, none in the run: {found:?}");
    }

    #[test]
    fn figures_from_part_of_the_run_must_say_so() {
        let mut partial = report(vec![gpu(0, 90.0)]);
        partial.totals.mean_gpu_util = Some(90.0);
        partial.totals.coverage =
            Some(wire::TelemetryCoverage { measured_gpu_hours: 0.1, share: 0.05, from: at(1_950), to: at(2_000) });
        partial.totals.idle_gpu_hours = 0.5;
        partial.totals.energy_kwh = Some(800.0);
        partial.failure = Some(wire::FailureAnalysis {
            blame: wire::Blame::Application,
            reason:
                "the program exited with code 1; no fault showed on its GPUs, nodes or network paths during its run"
                    .into(),
            evidence: Vec::new(),
        });
        let found: Vec<Contradiction> = check(&partial);
        assert_eq!(found.iter().filter(|c| c.check == "coverage").count(), 4, "{found:?}");
        let mut none = report(vec![gpu(0, 90.0)]);
        none.totals.mean_gpu_util = Some(90.0);
        none.totals.coverage = None;
        assert_eq!(checks(&none), ["coverage"]);
    }

    #[test]
    fn an_efficient_verdict_over_idle_gpus_and_a_wrong_count_are_caught() {
        let mut gpus: Vec<wire::GpuReport> = (1..8).map(|g| gpu(g, 0.5)).collect();
        gpus.push(gpu(0, 99.0));
        let mut wrong = report(gpus);
        wrong.totals.mean_gpu_util = Some(99.0);
        wrong.verdicts.push(verdict(wire::VerdictKind::Good, "efficient use"));
        wrong.verdicts.push(verdict(wire::VerdictKind::IdleGpus, "6 of 8 GPUs were idle"));
        let found = check(&wrong);
        assert_eq!(found.iter().filter(|c| c.check == "verdict_figures").count(), 3, "{found:?}");
    }

    #[test]
    fn a_striped_timeline_is_caught() {
        let mut striped = report(vec![gpu(0, 50.0)]);
        striped.gpus[0].series.push(wire::MetricSeries {
            metric: "gpu_util".into(),
            unit: "%".into(),
            points: (0..20).map(|i| (1_000 + 30 * i, 50.0)).collect(),
        });
        striped.totals.mean_gpu_util = Some(50.0);
        assert_eq!(checks(&striped), ["striped"]);
        striped.metrics.step_s = 30;
        assert!(checks(&striped).is_empty());
    }
}
