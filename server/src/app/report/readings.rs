//! GPU readings at a moment, the grid's metric colours: one metric of the GPUs a viewer may read, in
//! one query that names nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use slurmlens_wire as wire;

use super::Reporter;
use super::gather::gpu_of;
use crate::domain::promql::Selector;
use crate::domain::report::{self, HeldJob};
use crate::sources::victoriametrics::{Series, VictoriaMetrics};

impl Reporter {
    /// The catalogue keys [`Reporter::gpu_values`] knows, with their units.
    pub fn gpu_value_metrics(&self) -> Vec<(String, String)> {
        let catalog = &self.settings.catalog;
        let mut keys: Vec<(String, String)> =
            catalog.gpu_metrics.iter().map(|spec| (spec.key.clone(), spec.unit.clone())).collect();
        keys.push(("xid".into(), "code".into()));
        keys
    }

    /// One metric of the GPUs `scope` allows at `at`: the mean of the samples of the last four scrape
    /// intervals (for XID, the highest code in them). A missing source answers `unavailable`. For a
    /// tenant's jobs, the query names only the GPUs attributed to them: first which GPUs their
    /// unrecorded nodes report (to find the nodes they hold whole), then the values of exactly those.
    pub async fn gpu_values(&self, scope: &GpuScope, key: &str, at: DateTime<Utc>) -> Option<wire::GpuValues> {
        let catalog = &self.settings.catalog;
        let (name, scale, unit, function, merge) = if key == "xid" {
            (catalog.xid.clone(), 1.0, "code".to_string(), "max_over_time", "max")
        } else {
            let spec = catalog.gpu_metric(key)?;
            (spec.name.clone(), spec.scale, spec.unit.clone(), "avg_over_time", "avg")
        };
        let mut answer = wire::GpuValues {
            metric: key.to_string(),
            unit,
            at,
            status: wire::ValuesState::Ok,
            message: None,
            values: Vec::new(),
        };
        let Some(vm) = &self.vm else {
            answer.status = wire::ValuesState::Unavailable;
            answer.message = Some("no metrics source is configured".into());
            return Some(answer);
        };
        let lookback = catalog.scrape_interval_s.max(1) * 4;
        let selectors = match scope {
            GpuScope::Nodes(nodes) => self.gpu_selectors(&name, nodes, &[]),
            GpuScope::Jobs(jobs) => {
                let started = Instant::now();
                let gpus = match self.attributed_gpus(vm, jobs, at, lookback).await {
                    Ok(gpus) => gpus,
                    Err(message) => {
                        answer.status = wire::ValuesState::Unavailable;
                        answer.message = Some(message);
                        return Some(answer);
                    }
                };
                // Nodes with the same GPU indices share one selector, so the query stays short.
                let mut by_indices: BTreeMap<Vec<u16>, Vec<String>> = BTreeMap::new();
                for (node, indices) in gpus {
                    by_indices.entry(indices.into_iter().collect()).or_default().push(node);
                }
                let timeout = self.settings.metrics_timeout.saturating_sub(started.elapsed());
                if by_indices.is_empty() || timeout.is_zero() {
                    if timeout.is_zero() {
                        answer.status = wire::ValuesState::Unavailable;
                        answer.message = Some(TIMED_OUT.into());
                    }
                    return Some(answer);
                }
                by_indices.iter().flat_map(|(indices, nodes)| self.gpu_selectors(&name, nodes, indices)).collect()
            }
        };
        let query = self.per_gpu(merge, "", &selectors, |s| format!("{function}({s}[{lookback}s])"), "");
        match tokio::time::timeout(self.settings.metrics_timeout, vm.query(&query, at)).await {
            Ok(Ok(series)) => {
                for series in series {
                    let Some(gpu) = gpu_of(&series, catalog) else { continue };
                    if let Some(&(_, value)) = series.points.last() {
                        answer.values.push(wire::GpuValue { node: gpu.node, gpu: gpu.index, value: value * scale });
                    }
                }
                answer.values.sort_by(|a, b| (&a.node, a.gpu).cmp(&(&b.node, b.gpu)));
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "GPU readings unavailable");
                answer.status = wire::ValuesState::Unavailable;
                answer.message = Some(format!("metrics unavailable: {}", error.for_viewer()));
            }
            Err(_) => {
                answer.status = wire::ValuesState::Unavailable;
                answer.message = Some(TIMED_OUT.into());
            }
        }
        Some(answer)
    }

    /// The GPUs `jobs` certainly held ([`report::viewer_gpus`]): which GPU indices their unrecorded
    /// nodes report around `at` decides which of those nodes they hold whole.
    pub(super) async fn attributed_gpus(
        &self,
        vm: &VictoriaMetrics,
        jobs: &[HeldJob],
        at: DateTime<Utc>,
        lookback: u64,
    ) -> Result<BTreeMap<String, BTreeSet<u16>>, String> {
        let present = self.present_gpus(vm, jobs, at, lookback).await?;
        Ok(report::viewer_gpus(jobs, &present))
    }

    /// The GPU indices that the nodes where `jobs` hold unrecorded GPUs reported in the `lookback`
    /// seconds before `at`: what a whole-node check compares a job's GPU count with.
    pub(super) async fn present_gpus(
        &self,
        vm: &VictoriaMetrics,
        jobs: &[HeldJob],
        at: DateTime<Utc>,
        lookback: u64,
    ) -> Result<BTreeMap<String, BTreeSet<u16>>, String> {
        let catalog = &self.settings.catalog;
        let unrecorded: Vec<String> = report::unrecorded_nodes(jobs).into_iter().collect();
        let mut present: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
        if !unrecorded.is_empty() {
            let util = catalog.gpu_metrics.first().map_or_else(|| catalog.xid.clone(), |spec| spec.name.clone());
            let since = at - chrono::Duration::seconds(i64::try_from(lookback).unwrap_or(i64::MAX));
            let lookups: Vec<String> =
                self.gpu_selectors(&util, &unrecorded, &[]).iter().map(Selector::to_string).collect();
            let found = tokio::time::timeout(
                self.settings.metrics_timeout,
                join_all(lookups.iter().map(|selector| vm.series(selector, since, at))),
            )
            .await
            .map_err(|_| TIMED_OUT.to_string())?;
            for labels in found
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| {
                    tracing::warn!(%error, "looking up GPU series failed");
                    format!("metrics unavailable: {}", error.for_viewer())
                })?
                .into_iter()
                .flatten()
            {
                let series = Series { labels, points: Vec::new() };
                if let Some(gpu) = gpu_of(&series, catalog) {
                    present.entry(gpu.node).or_default().insert(gpu.index);
                }
            }
        }
        Ok(present)
    }
}

/// Whose GPUs [`Reporter::gpu_values`] may read.
#[derive(Debug, Clone)]
pub enum GpuScope {
    /// Every GPU of these nodes (provider staff).
    Nodes(Vec<String>),
    /// Only the GPUs these jobs held (a tenant's own jobs): recorded indices and nodes held whole.
    Jobs(Vec<HeldJob>),
}

pub(super) const TIMED_OUT: &str = "metrics unavailable: VictoriaMetrics did not answer in time";
