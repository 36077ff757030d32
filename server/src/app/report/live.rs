//! Running jobs' means so far, for the job listing: each running job's mean GPU utilisation and
//! tensor activity since it started, for all running jobs of a page in one query (split only where
//! VictoriaMetrics' query length limit requires). GPUs are attributed as the grid attributes them:
//! the indices the plugin recorded, or every GPU of a node the job holds whole; a job on part of a
//! node without records gets no value rather than a neighbour's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures::future::join_all;

use super::Reporter;
use super::readings::TIMED_OUT;
use crate::domain::report::{self, HeldJob};
use crate::domain::series::MetricSpec;

/// A running job, as its live means need it.
#[derive(Debug, Clone)]
pub struct LiveJob {
    pub job_id: u32,
    pub start: DateTime<Utc>,
    pub held: HeldJob,
}

/// A running job's means so far (percent).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveMeans {
    pub gpu_util: Option<f64>,
    pub tensor_active: Option<f64>,
}

/// The metrics a listing shows, by catalogue key.
const LISTED: [&str; 2] = ["gpu_util", "tensor_active"];
/// Labels the batched query puts on each job's answer.
const JOB_LABEL: &str = "slurmlens_job";
const METRIC_LABEL: &str = "slurmlens_metric";
/// VictoriaMetrics refuses queries longer than `-search.maxQueryLen` (16 KiB by default).
const MAX_QUERY_BYTES: usize = 12_000;
/// How far back the series lookup looks for the GPUs a node reports.
const PRESENT_LOOKBACK_S: u64 = 3600;

impl Reporter {
    /// The means so far of `jobs` at `now`, by job id; a job whose GPUs cannot be told has none. A
    /// metrics source absent answers nothing; one down or slow is an error (the listing goes on
    /// without live values).
    pub async fn live_means(&self, jobs: &[LiveJob], now: DateTime<Utc>) -> Result<BTreeMap<u32, LiveMeans>, String> {
        let mut means: BTreeMap<u32, LiveMeans> = BTreeMap::new();
        let Some(vm) = &self.vm else { return Ok(means) };
        if jobs.is_empty() {
            return Ok(means);
        }
        let started = Instant::now();
        let held: Vec<HeldJob> = jobs.iter().map(|job| job.held.clone()).collect();
        let present = self.present_gpus(vm, &held, now, PRESENT_LOOKBACK_S).await?;
        let attributed: Vec<(&LiveJob, BTreeMap<String, BTreeSet<u16>>)> = jobs
            .iter()
            .map(|job| (job, report::viewer_gpus(std::slice::from_ref(&job.held), &present)))
            .filter(|(_, gpus)| !gpus.is_empty())
            .collect();
        let specs: Vec<&MetricSpec> = LISTED.iter().filter_map(|key| self.settings.catalog.gpu_metric(key)).collect();
        let parts: Vec<String> = attributed
            .iter()
            .flat_map(|(job, gpus)| {
                let window_s = u64::try_from((now - job.start).num_seconds()).unwrap_or(0);
                let specs = if window_s > 0 { specs.as_slice() } else { &[] };
                specs
                    .iter()
                    .enumerate()
                    .map(move |(index, spec)| self.live_part(job.job_id, index, spec, gpus, window_s))
            })
            .collect();
        let timeout = self.settings.metrics_timeout.saturating_sub(started.elapsed());
        let queries = batches(&parts);
        let answers = tokio::time::timeout(timeout, join_all(queries.iter().map(|query| vm.query(query, now))))
            .await
            .map_err(|_| TIMED_OUT.to_string())?;
        for series in
            answers.into_iter().collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?.into_iter().flatten()
        {
            let job_id = series.labels.get(JOB_LABEL).and_then(|id| id.parse::<u32>().ok());
            let spec = series.labels.get(METRIC_LABEL).and_then(|index| specs.get(index.parse::<usize>().ok()?));
            let (Some(job_id), Some(spec), Some(&(_, value))) = (job_id, spec, series.points.last()) else { continue };
            let entry = means.entry(job_id).or_default();
            match spec.key.as_str() {
                "gpu_util" => entry.gpu_util = Some(value * spec.scale),
                _ => entry.tensor_active = Some(value * spec.scale),
            }
        }
        Ok(means)
    }

    /// One job's mean of one metric over its last `window_s` seconds, as the report computes it (each
    /// GPU's mean, its exporter's copies merged, averaged over the GPUs), labelled with the job and the
    /// metric's place in [`LISTED`].
    fn live_part(
        &self,
        job_id: u32,
        metric: usize,
        spec: &MetricSpec,
        gpus: &BTreeMap<String, BTreeSet<u16>>,
        window_s: u64,
    ) -> String {
        // Nodes with the same GPU indices share one selector, so the query stays short.
        let mut by_indices: BTreeMap<Vec<u16>, Vec<String>> = BTreeMap::new();
        for (node, indices) in gpus {
            by_indices.entry(indices.iter().copied().collect()).or_default().push(node.clone());
        }
        let per_gpu = by_indices
            .iter()
            .map(|(indices, nodes)| {
                let selectors = self.gpu_selectors(&spec.name, nodes, indices);
                self.per_gpu("max", "", &selectors, |s| format!("avg_over_time({s}[{window_s}s])"), "")
            })
            .collect::<Vec<_>>()
            .join(" or ");
        format!(r#"label_set(avg({per_gpu}), "{JOB_LABEL}", "{job_id}", "{METRIC_LABEL}", "{metric}")"#)
    }
}

/// `parts` joined with `or` into as few queries as fit [`MAX_QUERY_BYTES`] (a part longer than that
/// goes alone).
fn batches(parts: &[String]) -> Vec<String> {
    let mut queries: Vec<String> = Vec::new();
    for part in parts {
        match queries.last_mut() {
            Some(query) if query.len() + part.len() + 4 <= MAX_QUERY_BYTES => {
                query.push_str(" or ");
                query.push_str(part);
            }
            _ => queries.push(part.clone()),
        }
    }
    queries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::report::fixtures::reporter;

    #[test]
    fn one_query_holds_every_jobs_mean_labelled_with_the_job() {
        let reporter = reporter();
        let spec = reporter.settings.catalog.gpu_metric("gpu_util").expect("gpu_util in the catalogue").clone();
        let gpus: BTreeMap<String, BTreeSet<u16>> = [
            ("gpu001".to_string(), [0, 1].into()),
            ("gpu002".to_string(), [0, 1].into()),
            ("gpu003".into(), [4].into()),
        ]
        .into();
        let part = reporter.live_part(4242, 0, &spec, &gpus, 600);
        assert!(part.starts_with("label_set(avg("), "{part}");
        assert!(part.contains(r#""slurmlens_job", "4242""#), "{part}");
        assert!(part.contains("[600s]"), "the job's window: {part}");
        assert!(part.contains("gpu001|gpu002") && part.contains("gpu003"), "every node: {part}");
        assert!(part.contains(r#""0|1""#) && part.contains(r#""4""#), "only the job's GPUs: {part}");
        let parts = vec![part.clone(), reporter.live_part(4243, 1, &spec, &gpus, 60)];
        let queries = batches(&parts);
        assert_eq!(queries.len(), 1);
        assert!(queries[0].contains(" or ") && queries[0].contains("4243"));
    }

    #[test]
    fn batches_stay_under_the_query_length_limit() {
        let parts: Vec<String> = (0..100).map(|n| format!("{n:0>500}")).collect();
        let queries = batches(&parts);
        assert!(queries.len() > 1);
        assert!(queries.iter().all(|query| query.len() <= MAX_QUERY_BYTES));
        assert_eq!(queries.iter().map(|query| query.matches(" or ").count() + 1).sum::<usize>(), 100);
    }
}
