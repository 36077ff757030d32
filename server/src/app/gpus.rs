//! GPUs at a moment, for the grid: one metric's latest readings of the GPUs the viewer may read (and
//! how old they are), the GPU indices the Slurm plugin recorded for visible running jobs, and per node
//! how many GPUs jobs the viewer may not see held (counts only, nobody named). A moment in the future
//! is refused: nothing is known of it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::report::GpuScope;
use super::{App, AppError, Viewer};
use crate::domain::blame;
use crate::domain::cluster::ClusterName;
use crate::domain::gpu::{GpuAllocation, GpuRef};
use crate::domain::promql::{Matcher, MetricName, Selector};
use crate::domain::series::SeriesCatalog;
use crate::sources::victoriametrics::VictoriaMetrics;
use slurmlens_slurm::gpus::exact_gpus_per_node;

use crate::domain::job::{JobRecord, RunWindow, TimeWindow};
use crate::domain::report::HeldJob;
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::{Store, StoreError};

/// The metric the grid colours by when none is asked for.
pub const DEFAULT_METRIC: &str = "gpu_util";

/// How far past the server's clock a moment may be and still count as now (clocks differ a little).
const CLOCK_SLACK_S: i64 = 60;

/// Where the grid's readings come from: the metrics source (none: "unavailable"), the site's series
/// names, how much older than the moment shown the latest reading may be, and how long the look-up
/// of that reading may take.
#[derive(Clone)]
pub struct ReadingSettings {
    pub vm: Option<VictoriaMetrics>,
    pub catalog: SeriesCatalog,
    pub max_age_s: u64,
    pub timeout: std::time::Duration,
}

/// The GPU records of the run `record` describes (none before it starts): a record of an earlier job
/// under the same id is not its own.
pub(super) async fn run_gpu_records(
    store: &Store,
    cluster: &ClusterName,
    record: &JobRecord,
) -> Result<Vec<GpuAllocation>, StoreError> {
    match record.run() {
        Some(run) => store.gpu_allocations(cluster, record.identity.id_job, &run).await,
        None => Ok(Vec::new()),
    }
}

impl App {
    /// The GPUs the plugin recorded for each of `jobs` in its current run; without records (or the
    /// store), none, and the callers count only nodes held whole.
    pub(super) async fn recorded_gpus<'a>(
        &self,
        reader: &SlurmDbd,
        jobs: impl IntoIterator<Item = &'a JobRecord>,
    ) -> BTreeMap<u32, Vec<GpuRef>> {
        let runs = jobs.into_iter().filter_map(|job| Some((job.identity.id_job, job.run()?))).collect();
        self.recorded_runs(reader, runs).await
    }

    /// The GPU indices recorded for each of `runs` (job id, run), as [`Self::recorded_gpus`].
    pub(super) async fn recorded_runs(
        &self,
        reader: &SlurmDbd,
        runs: Vec<(u32, RunWindow)>,
    ) -> BTreeMap<u32, Vec<GpuRef>> {
        let mut recorded: BTreeMap<u32, Vec<GpuRef>> = BTreeMap::new();
        if runs.is_empty() {
            return recorded;
        }
        if let Some(store) = self.store() {
            match store.gpu_indices_among(reader.cluster(), &runs).await {
                Ok(held) => {
                    for (job_id, node, index) in held {
                        recorded.entry(job_id).or_default().push(GpuRef { node, index });
                    }
                }
                Err(error) => tracing::warn!(%error, "GPU records unavailable; counting only nodes held whole"),
            }
        }
        recorded
    }

    /// One metric (`gpu_util`, `tensor_active`, `xid`, …) of the GPUs `viewer` may read, from the
    /// latest readings at or before `at` (at most `max_age_s` older). Staff read every GPU of the
    /// cluster's nodes; a user only the GPUs attributed to their visible jobs running when the readings
    /// were taken (recorded indices, and every GPU of a node those jobs hold whole): the queries sent
    /// to VictoriaMetrics name nothing else.
    pub async fn gpu_values(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        metric: &str,
        at: DateTime<Utc>,
    ) -> Result<wire::GpuReadings, AppError> {
        let reader = self.cluster(cluster)?;
        let known = self.reporter().gpu_value_metrics();
        let Some(unit) = known.iter().find(|(key, _)| key == metric).map(|(_, unit)| unit.clone()) else {
            let names: Vec<&str> = known.iter().map(|(key, _)| key.as_str()).collect();
            return Err(AppError::invalid("metric", format!("unknown metric `{metric}`; one of {}", names.join(", "))));
        };
        not_future(at)?;
        let scope = self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        let settings = &self.inner.readings;
        // Whose samples say how fresh the readings are: every node's for staff, the nodes of the
        // viewer's jobs running at `at` for a user.
        let (nodes, jobs_then) = match &scope {
            ViewerScope::Nobody => return Err(AppError::Unauthorized("sign in to see GPU readings".into())),
            ViewerScope::Staff => (reader.nodes(&catalog).await?.into_iter().map(|node| node.node).collect(), None),
            ViewerScope::User { .. } => {
                let jobs = self.held_jobs(reader, &scope, &catalog, at).await?;
                let nodes: BTreeSet<String> = jobs.iter().flat_map(|job| job.nodes.iter().cloned()).collect();
                (nodes.into_iter().collect::<Vec<String>>(), Some(jobs))
            }
        };
        let answer = |status, message: String| wire::GpuReadings {
            values: wire::GpuValues {
                metric: metric.to_string(),
                unit: unit.clone(),
                at,
                status,
                message: Some(message),
                values: Vec::new(),
            },
            readings_at: None,
            max_age_s: settings.max_age_s,
            xid_codes: Vec::new(),
        };
        let taken = match latest_reading(settings, metric, &nodes, at).await {
            Ok(Some(taken)) => taken,
            Ok(None) => {
                let message = format!("no {metric} readings in the {} before this moment", span(settings.max_age_s));
                return Ok(answer(wire::ValuesState::Ok, message));
            }
            Err(message) => return Ok(answer(wire::ValuesState::Unavailable, message)),
        };
        let gpus = match jobs_then {
            None => GpuScope::Nodes(nodes),
            Some(jobs) if taken == at => GpuScope::Jobs(jobs),
            // The readings are older than the moment: only the GPUs the viewer's jobs held then.
            Some(_) => GpuScope::Jobs(self.held_jobs(reader, &scope, &catalog, taken).await?),
        };
        let mut values = self
            .reporter()
            .gpu_values(&gpus, metric, taken)
            .await
            .ok_or_else(|| AppError::invalid("metric", format!("unknown metric `{metric}`")))?;
        values.at = at;
        let xid_codes = if metric == "xid" { xid_codes(&values.values) } else { Vec::new() };
        Ok(wire::GpuReadings { values, readings_at: Some(taken), max_age_s: settings.max_age_s, xid_codes })
    }

    /// The GPU indices the Slurm plugin recorded for the jobs running at `at` that `viewer` may see.
    /// Jobs without records are absent: slurmdbd keeps counts only.
    pub async fn held_gpus(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Vec<wire::HeldGpu>, AppError> {
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        let running: Vec<(u32, RunWindow)> = reader
            .running_at(&scope, moment(at)?, &catalog)
            .await?
            .iter()
            .filter_map(|job| Some((job.identity.id_job, job.run()?)))
            .collect();
        let held = self.require_store()?.gpu_indices_among(reader.cluster(), &running).await?;
        Ok(held.into_iter().map(|(job_id, node, gpu)| wire::HeldGpu { job_id, node, gpu }).collect())
    }

    /// Per node, how many GPUs jobs `viewer` may *not* see held at `at`, so the grid can draw them busy
    /// without naming anyone. Staff see every job by name already and get none; so does a viewer who
    /// is not signed in (they see no jobs, and no occupancy either).
    pub async fn busy_gpus(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Vec<wire::BusyGpus>, AppError> {
        let reader = self.cluster(cluster)?;
        not_future(at)?;
        let scope = self.scope(viewer, reader).await?;
        if matches!(scope, ViewerScope::Staff | ViewerScope::Nobody) {
            return Ok(Vec::new());
        }
        let catalog = reader.tres_catalog().await?;
        let busy = reader.busy_gpus(&scope, moment(at)?, &catalog).await?;
        Ok(busy.into_iter().map(|(node, gpus)| wire::BusyGpus { node, gpus }).collect())
    }

    /// The jobs `scope` may see running at `at`, with the GPU indices the plugin recorded for them.
    /// Without slurmlens's database (or while it fails) they have no records: only nodes held whole
    /// then count.
    async fn held_jobs(
        &self,
        reader: &SlurmDbd,
        scope: &ViewerScope,
        catalog: &TresCatalog,
        at: DateTime<Utc>,
    ) -> Result<Vec<HeldJob>, AppError> {
        let running = reader.running_at(scope, moment(at)?, catalog).await?;
        let mut recorded = self.recorded_gpus(reader, &running).await;
        Ok(running
            .iter()
            .map(|job| {
                let nodes = job.nodes.hosts().to_vec();
                HeldJob {
                    gpus_per_node: exact_gpus_per_node(catalog.gpus(&job.tres_alloc), nodes.len()),
                    nodes,
                    recorded: recorded.remove(&job.identity.id_job).unwrap_or_default(),
                }
            })
            .collect())
    }
}

/// The window `[at, at + 1 s)` the running-at queries take; a moment in the future is refused.
pub(super) fn moment(at: DateTime<Utc>) -> Result<TimeWindow, AppError> {
    not_future(at)?;
    TimeWindow::new(at, at + Duration::seconds(1)).map_err(|e| AppError::invalid("at", e.to_string()))
}

/// Refuses a moment after now: no job has held a GPU then, and no GPU has reported.
fn not_future(at: DateTime<Utc>) -> Result<(), AppError> {
    let now = Utc::now();
    if at > now + Duration::seconds(CLOCK_SLACK_S) {
        return Err(AppError::invalid(
            "at",
            format!(
                "{} is in the future: GPUs are shown up to now ({})",
                at.format("%Y-%m-%d %H:%M UTC"),
                now.format("%Y-%m-%d %H:%M UTC")
            ),
        ));
    }
    Ok(())
}

/// When the latest sample of `metric` on `nodes` at or before `at` was taken, if one was within the
/// bound: `None` when none was (or there are no nodes to ask about), an error's message when
/// VictoriaMetrics did not answer.
async fn latest_reading(
    settings: &ReadingSettings,
    metric: &str,
    nodes: &[String],
    at: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, String> {
    let Some(vm) = &settings.vm else {
        return Err("no metrics source is configured".into());
    };
    let catalog = &settings.catalog;
    let name: &MetricName = if metric == "xid" {
        &catalog.xid
    } else {
        match catalog.gpu_metric(metric) {
            Some(spec) => &spec.name,
            None => return Ok(None),
        }
    };
    if nodes.is_empty() {
        return Ok(None);
    }
    let bound = settings.max_age_s.max(catalog.scrape_interval_s.max(1));
    let lookups: Vec<String> = catalog
        .gpu_host_labels
        .iter()
        .map(|label| {
            let selector =
                Selector { metric: name.clone(), matchers: vec![Matcher::AnyOf(label.clone(), nodes.to_vec())] };
            format!("tlast_over_time({selector}[{bound}s])")
        })
        .collect();
    let query = format!("max({})", lookups.join(" or "));
    let series = match tokio::time::timeout(settings.timeout, vm.query(&query, at)).await {
        Ok(Ok(series)) => series,
        Ok(Err(error)) => {
            tracing::warn!(%error, "reading the age of GPU readings failed");
            return Err(format!("metrics unavailable: {}", error.for_viewer()));
        }
        Err(_) => return Err("metrics unavailable: VictoriaMetrics did not answer in time".into()),
    };
    let latest = series
        .iter()
        .filter_map(|series| series.points.last())
        .map(|&(_, seconds)| seconds)
        .fold(None, |a, b| Some(a.map_or(b, |a: f64| a.max(b))));
    // Up to the next whole second, so that the reading's own sample falls inside the window read then.
    Ok(latest
        .filter(|seconds| seconds.is_finite())
        .and_then(|seconds| DateTime::from_timestamp(seconds.ceil() as i64, 0).map(|taken| taken.min(at))))
}

/// How each XID code among `values` reads: the job report's classification ([`blame::xid_strength`]).
fn xid_codes(values: &[wire::GpuValue]) -> Vec<wire::XidCode> {
    let codes: BTreeSet<u32> =
        values.iter().filter(|value| value.value >= 1.0).map(|value| value.value.round() as u32).collect();
    codes
        .into_iter()
        .map(|code| {
            let (strength, meaning) = blame::xid_strength(code);
            wire::XidCode { code, strength: strength.wire(), meaning: meaning.to_string() }
        })
        .collect()
}

/// `30 min`, `2 h`, `45 s`.
fn span(seconds: u64) -> String {
    match seconds {
        s if s >= 3600 && s % 3600 == 0 => format!("{} h", s / 3600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_codes_read_as_the_job_report_reads_them() {
        let value = |gpu: u16, value: f64| wire::GpuValue { node: "gpu073".into(), gpu, value };
        let codes = xid_codes(&[value(0, 79.0), value(1, 79.0), value(2, 0.0), value(3, 31.0), value(4, 109.0)]);
        let read: Vec<(u32, wire::EvidenceStrength)> = codes.iter().map(|code| (code.code, code.strength)).collect();
        assert_eq!(
            read,
            [
                (31, wire::EvidenceStrength::Application),
                (79, wire::EvidenceStrength::Strong),
                (109, wire::EvidenceStrength::Weak)
            ]
        );
        assert_eq!(codes[1].meaning, blame::xid_strength(79).1);
    }

    #[test]
    fn a_moment_in_the_future_is_refused_and_now_is_not() {
        assert!(not_future(Utc::now()).is_ok());
        let error = not_future(Utc::now() + Duration::days(365 * 4)).expect_err("four years ahead");
        assert!(
            matches!(&error, AppError::Invalid { parameter, message } if parameter == "at" && message.contains("in the future")),
            "{error:?}"
        );
        assert_eq!(span(1800), "30 min");
        assert_eq!(span(7200), "2 h");
    }
}
