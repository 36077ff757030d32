//! A job against its owner's previous runs of the same work (same name and stored script, same size
//! class, newest first, a year back at most) with the "slower than usual" verdict, and 2–8 jobs side by
//! side with their timelines aligned from each one's start. The rules are `domain/history.rs`'s.

use std::collections::BTreeMap;

use slurmlens_wire as wire;

use super::{App, AppError, Viewer, now_epoch};
use crate::domain::bottleneck::{ActivityTotals, TimeShares};
use crate::domain::history::{self, RunFigures, same_size_class, size_class_bounds};
use crate::domain::job::JobRecord;
use crate::domain::scope::ViewerScope;
use crate::domain::state::JobStateBase;
use crate::domain::time::epoch;
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;

/// How far back previous runs are looked for.
pub const LOOK_BACK_DAYS: u64 = 365;
/// The most previous runs an answer lists.
pub const MAX_PREVIOUS_RUNS: usize = 20;
/// The most runs of the same name and script read before the size class is applied.
const CANDIDATES: usize = 200;
/// The fewest and most jobs one comparison holds.
pub const MIN_COMPARED: usize = 2;
pub const MAX_COMPARED: usize = 8;
/// Points per timeline of a compared job (a side-by-side chart needs no more).
pub const COMPARE_POINTS: usize = 60;

impl App {
    /// The job and its owner's previous finished runs of the same work that `viewer` may see.
    pub async fn previous_runs(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::PreviousRuns, AppError> {
        // A shared report's holder sees that job only, never its owner's other jobs.
        if matches!(viewer, Viewer::Shared(_)) {
            return Err(AppError::Forbidden("a shared report carries no other runs".into()));
        }
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let scope = self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        let now = now_epoch();
        // From the start of a day: the page the server renders and the one the browser asks again say
        // the same "since" (a moment that moved with each request differed between the two).
        let since = now.saturating_sub(LOOK_BACK_DAYS * 86_400) / 86_400 * 86_400;
        let until = if record.time_end > 0 { record.time_end } else { now };
        let found = reader.previous_runs(&scope, &record, since, until, CANDIDATES).await?;
        let gpus = catalog.gpus(&record.tres_alloc);
        let mut records = vec![record];
        records.extend(
            found
                .runs
                .into_iter()
                .filter(|run| same_size_class(gpus, catalog.gpus(&run.tres_alloc)))
                .take(MAX_PREVIOUS_RUNS),
        );
        let mut figures = self.run_figures(reader, &records, &catalog).await;
        let this_run = figures.remove(0);
        let verdict =
            history::slower_than_usual(&rule_figures(&this_run), &figures.iter().map(rule_figures).collect::<Vec<_>>());
        let (min_gpus, max_gpus) = size_class_bounds(gpus);
        Ok(wire::PreviousRuns {
            matched_by: if found.script_hash.is_some() {
                wire::WorkMatch::NameAndScript
            } else {
                wire::WorkMatch::NameOnly
            },
            min_gpus,
            max_gpus,
            since: epoch(since).unwrap_or_default(),
            median: medians(&figures),
            slower_than_usual: verdict
                .map(|verdict| wire::SlowerThanUsual { slower: verdict.slower, evidence: verdict.evidence }),
            this_run,
            runs: figures,
        })
    }

    /// 2–8 jobs `viewer` may see, in the order asked, each with its figures and timelines as offsets from
    /// its own start. A job they may not see is `NotFound`, like a missing one.
    pub async fn compare(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_ids: &[String],
    ) -> Result<wire::Comparison, AppError> {
        if !(MIN_COMPARED..=MAX_COMPARED).contains(&job_ids.len()) {
            return Err(AppError::invalid(
                "jobs",
                format!("compare takes {MIN_COMPARED} to {MAX_COMPARED} job ids, not {}", job_ids.len()),
            ));
        }
        for (index, job_id) in job_ids.iter().enumerate() {
            if job_ids[..index].contains(job_id) {
                return Err(AppError::invalid("jobs", format!("job {job_id} is listed twice")));
            }
        }
        // Every job is looked up before any report is made: one the viewer may not see ends it early.
        let mut found = Vec::with_capacity(job_ids.len());
        for job_id in job_ids {
            found.push(self.visible_job(viewer, cluster, job_id).await?);
        }
        let mut jobs = Vec::with_capacity(found.len());
        for (reader, record, _steps) in found {
            let catalog = reader.tres_catalog().await?;
            let report = self.reporter().report_for(reader, &record, &catalog, COMPARE_POINTS).await?;
            let report = match self.scope(viewer, reader).await? {
                ViewerScope::Staff => report,
                _ => super::report::for_tenant(report),
            };
            jobs.push(compared_job(&record, report));
        }
        Ok(wire::Comparison { jobs })
    }

    /// Each record's figures: its listing form (with its archived report's means), its energy per
    /// GPU-hour from its archived report and its NCCL share from its trace summaries. Without our store,
    /// Slurm's facts alone.
    async fn run_figures(
        &self,
        reader: &SlurmDbd,
        records: &[JobRecord],
        catalog: &TresCatalog,
    ) -> Vec<wire::RunFigures> {
        let jobs = self.listed_jobs(reader, records.to_vec(), catalog, &[]).await;
        let keys: Vec<(u32, u64)> = records.iter().map(|record| (record.identity.id_job, record.time_submit)).collect();
        let mut energy = BTreeMap::new();
        let mut nccl = BTreeMap::new();
        if let Some(store) = self.store() {
            match store.energy_among(reader.cluster(), &keys).await {
                Ok(found) => energy = found,
                Err(error) => tracing::warn!(%error, "archived reports unavailable; previous runs without energy"),
            }
            for (record, key) in records.iter().zip(&keys) {
                let Some(run) = record.run() else { continue };
                match store.job_trace_totals(reader.cluster(), record.identity.id_job, &run).await {
                    Ok(totals) => {
                        let mut total = ActivityTotals::default();
                        totals.gpus.values().for_each(|activity| total.add(activity));
                        if total.traced_ns > 0 {
                            nccl.insert(*key, TimeShares::of(&total).communication);
                        }
                    }
                    Err(error) => tracing::warn!(%error, "trace summaries unavailable; previous runs without them"),
                }
            }
        }
        jobs.into_iter()
            .zip(&keys)
            .map(|(job, key)| {
                let wh_per_gpu_hour = energy.get(key).and_then(|(kwh, gpu_hours)| per_gpu_hour(*kwh, *gpu_hours));
                wire::RunFigures {
                    run_time_s: job.start.is_some().then_some(job.elapsed_raw),
                    nccl_share: nccl.get(key).copied(),
                    wh_per_gpu_hour,
                    job,
                }
            })
            .collect()
    }
}

/// Wh per GPU-hour from a report's energy (kWh) and GPU-hours.
fn per_gpu_hour(energy_kwh: Option<f64>, gpu_hours: Option<f64>) -> Option<f64> {
    let (energy_kwh, gpu_hours) = (energy_kwh?, gpu_hours?);
    (gpu_hours > 0.0 && energy_kwh.is_finite()).then(|| energy_kwh * 1000.0 / gpu_hours)
}

/// What the "slower than usual" rule reads of a run.
fn rule_figures(run: &wire::RunFigures) -> RunFigures {
    RunFigures {
        run_time_s: run.run_time_s.map(|seconds| seconds as f64),
        gpu_util: run.job.mean_gpu_util,
        completed: run.job.state == JobStateBase::Completed.name(),
        running: run.job.state == JobStateBase::Running.name(),
    }
}

/// The median of each figure over `runs` (run time over the completed ones).
fn medians(runs: &[wire::RunFigures]) -> wire::RunMedians {
    let of = |value: fn(&wire::RunFigures) -> Option<f64>| {
        history::median(&runs.iter().filter_map(value).collect::<Vec<_>>())
    };
    wire::RunMedians {
        run_time_s: history::median(
            &runs
                .iter()
                .filter(|run| rule_figures(run).completed)
                .filter_map(|run| run.run_time_s)
                .map(|s| s as f64)
                .collect::<Vec<_>>(),
        ),
        mean_gpu_util: of(|run| run.job.mean_gpu_util),
        mean_tensor_active: of(|run| run.job.mean_tensor_active),
        nccl_share: of(|run| run.nccl_share),
        wh_per_gpu_hour: of(|run| run.wh_per_gpu_hour),
    }
}

/// A compared job: its figures from its report and its GPU timelines from its start.
fn compared_job(record: &JobRecord, report: wire::JobReport) -> wire::ComparedJob {
    let mut job = report.job.clone();
    job.mean_gpu_util = report.totals.mean_gpu_util.or(job.mean_gpu_util);
    job.mean_tensor_active = report.totals.mean_tensor_active.or(job.mean_tensor_active);
    let nccl_share = report
        .traces
        .as_ref()
        .filter(|traces| traces.total.traced_s > 0.0)
        .map(|traces| traces.total.communication_share);
    let start = i64::try_from(record.time_start).unwrap_or(0);
    let timelines = if record.time_start == 0 {
        Vec::new()
    } else {
        [("gpu_util", "%", Combine::Mean), ("power", "W", Combine::Sum)]
            .into_iter()
            .filter_map(|(metric, unit, combine)| {
                let points = aligned(&report, metric, combine, start);
                (!points.is_empty()).then(|| wire::AlignedSeries { metric: metric.into(), unit: unit.into(), points })
            })
            .collect()
    };
    wire::ComparedJob {
        figures: wire::RunFigures {
            run_time_s: job.start.is_some().then_some(job.elapsed_raw),
            nccl_share,
            // The energy is the known GPUs': per their hours, not the unplaced ones'.
            wh_per_gpu_hour: per_gpu_hour(
                report.totals.energy_kwh,
                Some(
                    report
                        .totals
                        .coverage
                        .as_ref()
                        .map_or(report.totals.gpu_hours - report.totals.unattributed_gpu_hours, |covered| {
                            covered.measured_gpu_hours
                        }),
                ),
            ),
            job,
        },
        gpu_hours: report.totals.gpu_hours,
        timelines,
    }
}

/// How a metric's values across a job's GPUs become one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Combine {
    Mean,
    Sum,
}

/// One metric across the report's GPUs (its per-GPU series, or its spread's mean where the report came
/// in the spread form), as `[seconds since start, value]`.
fn aligned(report: &wire::JobReport, metric: &str, combine: Combine, start: i64) -> Vec<(i64, f64)> {
    if let Some(spread) = report.gpu_spread.iter().find(|spread| spread.metric == metric) {
        let factor = if combine == Combine::Sum { f64::from(spread.count) } else { 1.0 };
        return spread.points.iter().map(|(at, _, mean, _)| (at - start, mean * factor)).collect();
    }
    let mut by_time: BTreeMap<i64, (f64, u32)> = BTreeMap::new();
    // A shared node's GPUs (listed for staff where no record places the job's, a band for its user) hold
    // other tenants' GPUs too: their mean counts in a mean, never in a sum.
    let series =
        report.gpus.iter().filter(|gpu| combine == Combine::Mean || !gpu.uncertain).flat_map(|gpu| gpu.series.iter());
    let bands =
        report.shared_node_bands.iter().filter(|_| combine == Combine::Mean).flat_map(|band| band.spread.iter());
    for points in series.filter(|series| series.metric == metric).map(|series| series.points.clone()).chain(
        bands
            .filter(|spread| spread.metric == metric)
            .map(|spread| spread.points.iter().map(|(at, _, mean, _)| (*at, *mean)).collect()),
    ) {
        for (at, value) in points {
            let entry = by_time.entry(at).or_default();
            entry.0 += value;
            entry.1 += 1;
        }
    }
    by_time
        .into_iter()
        .map(|(at, (total, count))| {
            let value = if combine == Combine::Mean { total / f64::from(count) } else { total };
            (at - start, value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of GPU power: a whole-node GPU at 300 W, and a shared node's two listed GPUs at 100 and
    /// 800 W (no record says which was the job's).
    fn report() -> wire::JobReport {
        let gpu = |node: &str, index: u16, attribution: &str, watts: f64| {
            serde_json::json!({
                "node": node, "gpu": index, "attribution": attribution, "uncertain": attribution == "node_only",
                "summary": [], "series": [{"metric": "power", "unit": "W", "points": [[1060, watts]]}], "xid_events": []
            })
        };
        let catalog = crate::domain::tres::TresCatalog::new([]);
        let job = crate::app::wire_map::job(&crate::app::report::fixtures::failed_job(), &catalog, "lab", 0);
        serde_json::from_value(serde_json::json!({
            "job": job, "source": "final", "generated_at": "2026-11-29T12:00:00Z",
            "metrics": {"status": "ok", "step_s": 60},
            "gpus": [gpu("n1", 0, "whole_node", 300.0), gpu("n2", 0, "node_only", 100.0), gpu("n2", 1, "node_only", 800.0)],
            "nodes": [], "totals": {"gpu_hours": 2.0, "idle_gpu_hours": 0.0}, "verdicts": []
        }))
        .expect("a report")
    }

    #[test]
    fn a_shared_nodes_listed_gpus_count_in_a_mean_and_never_in_a_sum() {
        let report = report();
        assert_eq!(aligned(&report, "power", Combine::Sum, 1000), [(60, 300.0)], "the job's known GPU alone");
        assert_eq!(aligned(&report, "power", Combine::Mean, 1000), [(60, 400.0)], "(300 + 100 + 800) / 3");
    }
}
