//! The Gantt's and the grid's read of a window: the jobs that started in it with what a chart draws
//! (ids, names, owner, state, times, GPUs, nodes, efficiency means) and nothing more. Where the
//! listing maps every job to its full wire form and looks up digests page by page, this reads the
//! window in large batches, then the archived reports' digests once for the whole window, then the
//! running jobs' live means in one query.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use slurmlens_wire as wire;

use super::chart_history::{KeptJob, SplitWindow};
use super::{App, AppError, Viewer};
use crate::domain::gpu::GpuRef;
use crate::domain::job::{JobFilter, JobRecord, RunWindow, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;

/// Jobs read from slurmdbd per statement: few round trips, bounded memory per batch.
const BATCH: usize = 20_000;

/// One started job of a window, as a chart draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartJob {
    /// As sacct prints it (`123`, `123_4`, `123+1`).
    pub job_id: Arc<str>,
    pub job_id_raw: u32,
    pub name: Arc<str>,
    pub user: Arc<str>,
    pub account: Arc<str>,
    pub partition: Arc<str>,
    /// As sacct prints it (`CANCELLED by 1001`).
    pub state: Arc<str>,
    /// Epoch seconds.
    pub start: u64,
    /// Epoch seconds; 0 while running.
    pub end: u64,
    pub gpus: u64,
    /// As stored (`gpu[001-004]`), and expanded.
    pub node_list: Arc<str>,
    pub hosts: Arc<[String]>,
    /// The archived report's means, or a running job's so far; `None` without either.
    pub mean_gpu_util: Option<f64>,
    pub mean_tensor_active: Option<f64>,
}

/// A window's started jobs, and whether the cap left some out.
#[derive(Debug, Clone, Default)]
pub struct ChartWindow {
    /// Newest submission first.
    pub jobs: Vec<ChartJob>,
    pub truncated: bool,
}

fn chart_job(record: JobRecord, catalog: &TresCatalog) -> ChartJob {
    let gpus = catalog.gpus(&record.tres_alloc);
    ChartJob {
        job_id: record.identity.to_string().into(),
        job_id_raw: record.identity.id_job,
        state: record.state.name().into(),
        start: record.time_start,
        end: record.time_end,
        gpus,
        hosts: record.nodes.hosts().into(),
        name: record.job_name.into(),
        user: record.user.into(),
        account: record.account.into(),
        partition: record.partition.into(),
        node_list: record.node_list.into(),
        mean_gpu_util: None,
        mean_tensor_active: None,
    }
}

/// The started jobs of `window` that `scope` may see, in large batches, up to about `cap` (then
/// `true`: more were left).
async fn read_started(
    app: &App,
    reader: &SlurmDbd,
    scope: &ViewerScope,
    window: TimeWindow,
    filter: &JobFilter,
    catalog: &TresCatalog,
    cap: usize,
) -> Result<(Vec<JobRecord>, bool), AppError> {
    let mut records: Vec<JobRecord> = Vec::new();
    let mut cursor = None;
    loop {
        let (batch, next) = app.window_page(reader, scope, window, filter, catalog, cursor, BATCH).await?;
        records.extend(batch.into_iter().filter(JobRecord::drawn));
        match next {
            Some(next) if records.len() < cap => cursor = Some(next),
            next => return Ok((records, next.is_some())),
        }
    }
}

impl App {
    /// The jobs `viewer` may see that started and overlap `window` on `cluster`, filtered as the
    /// listing filters, newest submission first, at most about `cap` (then `truncated`): the same
    /// jobs as the listing's pages, read once, without the listing's per-job wire form.
    pub async fn chart_window(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        window: TimeWindow,
        filter: &JobFilter,
        cap: usize,
    ) -> Result<ChartWindow, AppError> {
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        self.check_window(&scope, window)?;
        let catalog = reader.tres_catalog().await?;
        if scope == ViewerScope::Staff && filter.is_empty() {
            let seconds = |time: DateTime<Utc>| u64::try_from(time.timestamp()).unwrap_or(0);
            let bounds = (seconds(window.start()), seconds(window.end()));
            if let Some(split) = self.inner.chart_history.window(reader, &catalog, bounds).await? {
                return Ok(self.kept_window(reader, split, &catalog, cap, true).await);
            }
        }
        let (records, truncated) = read_started(self, reader, &scope, window, filter, &catalog, cap).await?;
        Ok(ChartWindow { jobs: self.chart_jobs(reader, records, &catalog).await, truncated })
    }

    /// Reads the last `days` of every cluster's finished jobs into the charts' history where it lacks
    /// them (`serve` calls it at start and every few minutes), so that staff's first Gantt of a wide
    /// window is drawn from memory like every later one. Answers how many hours it read; a cluster
    /// whose read fails is logged and left to its windows.
    pub async fn warm_chart_history(&self, days: u32) -> usize {
        let from = u64::try_from((Utc::now() - chrono::Duration::days(i64::from(days))).timestamp()).unwrap_or(0);
        let mut read = 0;
        for reader in self.readers() {
            let warmed = match reader.tres_catalog().await {
                Ok(catalog) => self.inner.chart_history.warm(reader, &catalog, from).await,
                Err(error) => Err(error),
            };
            match warmed {
                Ok(hours) => read += hours,
                Err(error) => tracing::warn!(cluster = %reader.cluster(), %error, "reading the charts' history failed"),
            }
        }
        read
    }

    /// A window the charts' history answered, in the listing's order (newest submission first), at
    /// most `cap` jobs (the newest submissions), with their efficiency means if `means` asks for them.
    async fn kept_window(
        &self,
        reader: &SlurmDbd,
        split: SplitWindow,
        catalog: &TresCatalog,
        cap: usize,
        means: bool,
    ) -> ChartWindow {
        let SplitWindow { mut sealed, fresh } = split;
        let means = match means {
            true => {
                let keys: Vec<(u32, u64)> = sealed
                    .iter()
                    .map(|kept| (kept.job.job_id_raw, kept.order.0))
                    .chain(fresh.iter().map(|record| (record.identity.id_job, record.time_submit)))
                    .collect();
                self.chart_means(reader, &keys, &fresh, catalog).await
            }
            false => BTreeMap::new(),
        };
        sealed.reserve_exact(fresh.len());
        sealed.extend(fresh.into_iter().map(|record| KeptJob {
            order: (record.time_submit, record.time_end, record.db_index),
            job: chart_job(record, catalog),
        }));
        // Positions sorted, not the jobs: each is moved once rather than at every step of a sort.
        let mut ranked: Vec<usize> = (0..sealed.len()).collect();
        ranked.sort_unstable_by_key(|&index| std::cmp::Reverse(sealed[index].order));
        let truncated = ranked.len() > cap;
        ranked.truncate(cap);
        let mut slots: Vec<Option<KeptJob>> = sealed.into_iter().map(Some).collect();
        let jobs = ranked
            .into_iter()
            .filter_map(|index| slots[index].take())
            .map(|KeptJob { order, mut job }| {
                if let Some(&(gpu_util, tensor_active)) = means.get(&(job.job_id_raw, order.0)) {
                    job.mean_gpu_util = gpu_util;
                    job.mean_tensor_active = tensor_active;
                }
                job
            })
            .collect();
        ChartWindow { jobs, truncated }
    }

    /// The jobs `viewer` may see that held their allocation at `at`, read once, with the GPU indices
    /// the Slurm plugin recorded for them (none without the store, or while it fails: the grid then
    /// counts), with their efficiency means when `means` asks for them. A moment in the future is
    /// refused.
    pub async fn chart_moment(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        at: DateTime<Utc>,
        means: bool,
    ) -> Result<(Vec<ChartJob>, Vec<wire::HeldGpu>), AppError> {
        let reader = self.cluster(cluster)?;
        let window = super::gpus::moment(at)?;
        let scope = self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        let second = u64::try_from(at.timestamp()).unwrap_or(0);
        if scope == ViewerScope::Staff
            && let Some(mut split) = self.inner.chart_history.window(reader, &catalog, (second, second + 1)).await?
        {
            split.sealed.retain(|kept| kept.job.start <= second && kept.job.end > second);
            split.fresh.retain(|record| record.running_at(second));
            let runs = split
                .sealed
                .iter()
                .filter_map(|kept| Some((kept.job.job_id_raw, RunWindow::of(kept.job.start, kept.job.end)?)))
                .chain(split.fresh.iter().filter_map(|record| Some((record.identity.id_job, record.run()?))))
                .collect();
            let held = held_gpus(self.recorded_runs(reader, runs).await);
            return Ok((self.kept_window(reader, split, &catalog, usize::MAX, means).await.jobs, held));
        }
        let (mut records, _) =
            read_started(self, reader, &scope, window, &JobFilter::default(), &catalog, usize::MAX).await?;
        records.retain(|record| record.running_at(second));
        let held = held_gpus(self.recorded_gpus(reader, &records).await);
        let jobs = match means {
            true => self.chart_jobs(reader, records, &catalog).await,
            false => records.into_iter().map(|record| chart_job(record, &catalog)).collect(),
        };
        Ok((jobs, held))
    }

    /// `records` as charts draw them, with their efficiency means.
    async fn chart_jobs(&self, reader: &SlurmDbd, records: Vec<JobRecord>, catalog: &TresCatalog) -> Vec<ChartJob> {
        let keys: Vec<(u32, u64)> = records.iter().map(|r| (r.identity.id_job, r.time_submit)).collect();
        let means = self.chart_means(reader, &keys, &records, catalog).await;
        records
            .into_iter()
            .map(|record| {
                let key = (record.identity.id_job, record.time_submit);
                let mut job = chart_job(record, catalog);
                if let Some(&(gpu_util, tensor_active)) = means.get(&key) {
                    job.mean_gpu_util = gpu_util;
                    job.mean_tensor_active = tensor_active;
                }
                job
            })
            .collect()
    }

    /// The means each job is coloured by, keyed by (job id, submit time): archived reports' of the
    /// jobs `keys` names in one read for the whole window, the running jobs' of `records` so far in
    /// one query. Either source failing leaves its jobs without (logged), as the listing does.
    async fn chart_means(
        &self,
        reader: &SlurmDbd,
        keys: &[(u32, u64)],
        records: &[JobRecord],
        catalog: &TresCatalog,
    ) -> BTreeMap<(u32, u64), (Option<f64>, Option<f64>)> {
        let mut means = BTreeMap::new();
        if let Some(store) = self.store() {
            match store.digests_among(reader.cluster(), keys).await {
                Ok(found) => {
                    means.extend(
                        found.into_iter().map(|(key, digest)| (key, (digest.mean_gpu_util, digest.mean_tensor_active))),
                    );
                }
                Err(error) => tracing::warn!(%error, "archived reports unavailable; charting without them"),
            }
        }
        let live = self.live_means_of(reader, records, catalog).await;
        for record in records {
            let key = (record.identity.id_job, record.time_submit);
            if let Some(live) = live.get(&record.identity.id_job).filter(|live| live.gpu_util.is_some())
                && !means.contains_key(&key)
            {
                means.insert(key, (live.gpu_util, live.tensor_active));
            }
        }
        means
    }
}

/// The GPU indices recorded for each job, as the grid reads them.
fn held_gpus(recorded: BTreeMap<u32, Vec<GpuRef>>) -> Vec<wire::HeldGpu> {
    recorded
        .into_iter()
        .flat_map(|(job_id, gpus)| {
            gpus.into_iter().map(move |gpu| wire::HeldGpu { job_id, node: gpu.node, gpu: gpu.index })
        })
        .collect()
}
