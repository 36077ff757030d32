//! GPUs at a moment, for the grid: one metric's readings of the GPUs the viewer may read, the GPU
//! indices the Slurm plugin recorded for visible running jobs, and per node how many GPUs jobs the
//! viewer may not see held (counts only, nobody named).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::report::GpuScope;
use super::{App, AppError, Viewer};
use crate::domain::gpu::GpuRef;
use slurmlens_slurm::gpus::exact_gpus_per_node;

use crate::domain::job::TimeWindow;
use crate::domain::report::HeldJob;
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;

/// The metric the grid colours by when none is asked for.
pub const DEFAULT_METRIC: &str = "gpu_util";

impl App {
    /// One metric (`gpu_util`, `tensor_active`, `xid`, …) of the GPUs `viewer` may read at `at`. Staff
    /// read every GPU of the cluster's nodes; a user only the GPUs attributed to their visible jobs
    /// running then (recorded indices, and every GPU of a node those jobs hold whole): the query sent
    /// to VictoriaMetrics names nothing else.
    pub async fn gpu_values(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        metric: &str,
        at: DateTime<Utc>,
    ) -> Result<wire::GpuValues, AppError> {
        let reader = self.cluster(cluster)?;
        let known = self.reporter().gpu_value_metrics();
        if !known.iter().any(|(key, _)| key == metric) {
            let names: Vec<&str> = known.iter().map(|(key, _)| key.as_str()).collect();
            return Err(AppError::invalid("metric", format!("unknown metric `{metric}`; one of {}", names.join(", "))));
        }
        let scope = self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        let gpus = match &scope {
            ViewerScope::Nobody => return Err(AppError::Unauthorized("sign in to see GPU readings".into())),
            ViewerScope::Staff => {
                GpuScope::Nodes(reader.nodes(&catalog).await?.into_iter().map(|node| node.node).collect())
            }
            ViewerScope::User { .. } => GpuScope::Jobs(self.held_jobs(reader, &scope, &catalog, at).await?),
        };
        let values = self.reporter().gpu_values(&gpus, metric, at).await;
        values.ok_or_else(|| AppError::invalid("metric", format!("unknown metric `{metric}`")))
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
        let running: Vec<u32> =
            reader.running_at(&scope, moment(at)?, &catalog).await?.iter().map(|job| job.identity.id_job).collect();
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
        let job_ids: Vec<u32> = running.iter().map(|job| job.identity.id_job).collect();
        let mut recorded: BTreeMap<u32, Vec<GpuRef>> = BTreeMap::new();
        if let Some(store) = self.store() {
            match store.gpu_indices_among(reader.cluster(), &job_ids).await {
                Ok(held) => {
                    for (job_id, node, index) in held {
                        recorded.entry(job_id).or_default().push(GpuRef { node, index });
                    }
                }
                Err(error) => tracing::warn!(%error, "GPU records unavailable; readings only for nodes held whole"),
            }
        }
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

/// The window `[at, at + 1 s)` the running-at queries take.
fn moment(at: DateTime<Utc>) -> Result<TimeWindow, AppError> {
    TimeWindow::new(at, at + Duration::seconds(1)).map_err(|e| AppError::invalid("at", e.to_string()))
}
