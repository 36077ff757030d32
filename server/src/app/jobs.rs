//! Jobs: one page of a window (with the archived reports' digests), one job with its steps, and its
//! report. The viewer's scope is applied before any job is read.

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use std::collections::BTreeMap;

use super::job_order::JobOrder;
use super::report::{LiveJob, LiveMeans};
use super::{App, AppError, Viewer, now_epoch, wire_map};

use crate::domain::job::{JobCursor, JobFilter, JobRecord, JobSearch, TimeWindow};
use crate::domain::report::HeldJob;
use crate::domain::scope::ViewerScope;
use crate::domain::state::{JobStateBase, StateFilter};
use crate::domain::time::epoch;
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;
use slurmlens_slurm::gpus::exact_gpus_per_node;

/// Largest page a client may ask for.
pub const MAX_PAGE: usize = 5000;
/// Page size when none is asked for.
pub const DEFAULT_PAGE: usize = 500;

/// The failure verdicts a listing can be filtered by (`blame=`).
pub const BLAMES: [wire::Blame; 3] = [wire::Blame::Infrastructure, wire::Blame::Application, wire::Blame::Unknown];

/// The verdict a `blame=` word (or an archived digest's column) names.
pub fn blame_named(word: &str) -> Option<wire::Blame> {
    BLAMES.into_iter().find(|blame| blame.as_str() == word)
}

/// How long a running job's means so far, once read, are shown to every request.
pub const LIVE_MEANS_SHARED_S: u64 = 60;

/// Running jobs' means so far, by (cluster, job id, submit time), kept for [`LIVE_MEANS_SHARED_S`]:
/// the listing, the Gantt, the grid coloured by efficiency and showback each show them, and a mean
/// over a run of minutes or days moves little in a minute, while reading them is a VictoriaMetrics
/// query over every running job's GPUs. A job the source answered nothing for (its GPUs not told
/// yet, no samples yet) is kept as such for the minute too; a failed read keeps nothing. A mean is
/// the job's own, whoever reads it; the viewer's scope has chosen the jobs before the cache is asked.
#[derive(Clone)]
pub struct LiveMeansCache {
    means: moka::sync::Cache<(String, u32, u64), Option<LiveMeans>>,
}

impl Default for LiveMeansCache {
    fn default() -> Self {
        let shared = std::time::Duration::from_secs(LIVE_MEANS_SHARED_S);
        // Far more than the jobs a cluster runs at once.
        Self { means: moka::sync::Cache::builder().max_capacity(100_000).time_to_live(shared).build() }
    }
}

impl LiveMeansCache {
    /// `Some` when the job was read within the minute, with its means if it had any.
    fn get(&self, key: &(String, u32, u64)) -> Option<Option<LiveMeans>> {
        self.means.get(key)
    }

    fn insert(&self, key: (String, u32, u64), means: Option<LiveMeans>) {
        self.means.insert(key, means);
    }
}

/// What one page of the job listing asks, parsed.
#[derive(Debug, Clone)]
pub struct JobsQuery {
    pub cluster: Option<String>,
    pub window: TimeWindow,
    pub filter: JobFilter,
    pub limit: usize,
    pub cursor: Option<JobCursor>,
    /// Keep only jobs whose archived report gives one of these verdicts (empty: all).
    pub blame: Vec<wire::Blame>,
    /// Ordered by a column over the whole window, a page at a time by offset; `None`: newest
    /// submission first, by keyset (`cursor`).
    pub order: Option<JobOrder>,
}

impl JobsQuery {
    /// The window `[start, end)`, by default the 24 hours before `end` (default now).
    pub fn window(start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Result<TimeWindow, AppError> {
        let end = end.unwrap_or_else(Utc::now);
        let start = start.unwrap_or(end - Duration::hours(24));
        TimeWindow::new(start, end).map_err(|e| AppError::invalid("start", e.to_string()))
    }

    /// State names as sacct or squeue write them (`FAILED`, `CD`, `OOM`).
    pub fn states(names: &[String]) -> Result<Vec<StateFilter>, AppError> {
        names
            .iter()
            .map(|name| name.parse::<StateFilter>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| AppError::invalid("state", e.to_string()))
    }

    /// A listing's `blame=` words, each one of [`BLAMES`].
    pub fn blame(words: Vec<String>) -> Result<Vec<wire::Blame>, AppError> {
        words
            .iter()
            .map(|word| {
                blame_named(word).ok_or_else(|| {
                    AppError::invalid("blame", format!("`{word}` is not infrastructure, application or unknown"))
                })
            })
            .collect()
    }

    /// A cursor as the previous page handed it out.
    pub fn cursor(text: Option<&str>) -> Result<Option<JobCursor>, AppError> {
        text.map(JobCursor::decode).transpose().map_err(|e| AppError::invalid("cursor", e.to_string()))
    }
}

/// A comma-separated list (`FAILED,TIMEOUT`), empty when absent.
pub fn split_list(text: Option<&str>) -> Vec<String> {
    text.map(|text| text.split(',').map(str::trim).filter(|v| !v.is_empty()).map(String::from).collect())
        .unwrap_or_default()
}

impl App {
    /// One page of the jobs overlapping the window that `viewer` may see, newest submission first, each
    /// with its archived report's digest (mean utilisation, tensor activity, blame) where one exists.
    /// `blame` filters what the page holds (the verdict lives in our store, not in slurmdbd's rows): a
    /// page may then hold fewer than `limit` jobs; the cursor still walks the whole window.
    /// With `query.order`, the page is a slice of the whole window in that order
    /// ([`super::job_order`]), and `blame` filters the whole window.
    pub async fn list_jobs(&self, viewer: &Viewer, query: &JobsQuery) -> Result<wire::Page<wire::Job>, AppError> {
        if let Some(order) = query.order {
            return self.sorted_jobs(viewer, query, order).await;
        }
        let reader = self.cluster(query.cluster.as_deref())?;
        let scope = self.scope(viewer, reader).await?;
        self.check_listing_window(&scope, query)?;
        let catalog = reader.tres_catalog().await?;
        let (records, next) =
            self.window_page(reader, &scope, query.window, &query.filter, &catalog, query.cursor, query.limit).await?;
        let items = self.listed_jobs(reader, records, &catalog, &query.blame).await;
        let next_cursor = next.map(|cursor| cursor.encode());
        Ok(wire::Page { items, next_cursor, total: None, offset: None, archiving: self.archive_progress().now() })
    }

    /// The viewer's window limit, as a listing applies it. A job id is found through slurmdbd's id
    /// indexes whatever the window (the job page's search looks a year back for one); everything else
    /// reads the window.
    pub(super) fn check_listing_window(&self, scope: &ViewerScope, query: &JobsQuery) -> Result<(), AppError> {
        if matches!(query.filter.search, Some(JobSearch::Id(_))) {
            return Ok(());
        }
        self.check_window(scope, query.window)
    }

    /// `records` as the listing's items: Slurm's facts, each with its archived report's digest where
    /// one exists (one store query for them all) and a running GPU job's means so far; then only those
    /// whose verdict is among `blame` (empty: all).
    pub(super) async fn listed_jobs(
        &self,
        reader: &SlurmDbd,
        records: Vec<JobRecord>,
        catalog: &TresCatalog,
        blame: &[wire::Blame],
    ) -> Vec<wire::Job> {
        let now = now_epoch();
        let cluster = reader.cluster().as_str();
        let keys: Vec<(u32, u64)> = records.iter().map(|r| (r.identity.id_job, r.time_submit)).collect();
        // Only open jobs have means so far; every other record is dropped as soon as it is mapped, so a
        // page never holds all its records and all its items at once (50 listings at once did).
        let open: Vec<JobRecord> = records.iter().filter(|record| record.time_end == 0).cloned().collect();
        let mut items: Vec<wire::Job> =
            records.into_iter().map(|record| wire_map::job(&record, catalog, cluster, now)).collect();
        // The archived digests and the tags are two independent reads of our store: side by side.
        let digests = async { Some(self.store()?.digests_among(reader.cluster(), &keys).await) };
        let (digests, mut tags) = tokio::join!(digests, self.tags_of(reader, &keys));
        // Without our store the listing is Slurm's facts alone.
        if let Some(digests) = digests {
            match digests {
                Ok(found) => {
                    for (item, key) in items.iter_mut().zip(&keys) {
                        if let Some(digest) = found.get(key) {
                            item.mean_gpu_util = digest.mean_gpu_util;
                            item.mean_tensor_active = digest.mean_tensor_active;
                            item.blame = digest.blame.as_deref().and_then(blame_named).or(item.blame.take());
                            item.digest = Some(if digest.has_metrics {
                                wire::DigestState::Archived
                            } else {
                                wire::DigestState::NoData
                            });
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "archived reports unavailable; listing without them"),
            }
        }
        self.live_digests(reader, &open, &mut items, catalog).await;
        for (item, key) in items.iter_mut().zip(&keys) {
            if let Some(tags) = tags.remove(key) {
                item.tags = tags.iter().map(ToString::to_string).collect();
            }
        }
        if !blame.is_empty() {
            items.retain(|item| item.blame.as_ref().is_some_and(|b| blame.contains(b)));
        }
        items
    }

    /// Running GPU jobs' means so far, in one batched query for the page. A metrics source down or slow
    /// leaves them empty: the listing never waits on it past the report's metrics timeout.
    async fn live_digests(
        &self,
        reader: &SlurmDbd,
        records: &[JobRecord],
        items: &mut [wire::Job],
        catalog: &TresCatalog,
    ) {
        let means = self.live_means_of(reader, records, catalog).await;
        for item in items.iter_mut().filter(|item| item.digest.is_none()) {
            if let Some(live) = means.get(&item.job_id_raw).filter(|live| live.gpu_util.is_some()) {
                item.mean_gpu_util = live.gpu_util;
                item.mean_tensor_active = live.tensor_active;
                item.digest = Some(wire::DigestState::Live);
            }
        }
    }

    /// The means so far of the running GPU jobs among `records`, by job id: those another request
    /// read within the last minute ([`LiveMeansCache`]), the others in one batched query; none while
    /// the metrics source is down or slow (logged).
    pub(super) async fn live_means_of(
        &self,
        reader: &SlurmDbd,
        records: &[JobRecord],
        catalog: &TresCatalog,
    ) -> BTreeMap<u32, LiveMeans> {
        let running: Vec<&JobRecord> = records
            .iter()
            .filter(|record| record.state.base() == JobStateBase::Running && catalog.gpus(&record.tres_alloc) > 0)
            .collect();
        if running.is_empty() || !self.reporter().has_metrics_source() {
            return BTreeMap::new();
        }
        let cache = &self.inner.live_means;
        let key = |record: &JobRecord| (reader.cluster().to_string(), record.identity.id_job, record.time_submit);
        let mut means = BTreeMap::new();
        let mut unread = Vec::new();
        for record in running {
            match cache.get(&key(record)) {
                Some(known) => means.extend(known.map(|known| (record.identity.id_job, known))),
                None => unread.push(record),
            }
        }
        if unread.is_empty() {
            return means;
        }
        let Some(read) = self.read_live_means(reader, &unread, catalog).await else { return means };
        for record in unread {
            let found = read.get(&record.identity.id_job).copied();
            cache.insert(key(record), found);
            means.extend(found.map(|found| (record.identity.id_job, found)));
        }
        means
    }

    /// The means so far of `running` read from the metrics source in one batched query, by job id (a
    /// job whose GPUs cannot be told, or without samples yet, has none); `None` while the source is
    /// down or slow (logged).
    async fn read_live_means(
        &self,
        reader: &SlurmDbd,
        running: &[&JobRecord],
        catalog: &TresCatalog,
    ) -> Option<BTreeMap<u32, LiveMeans>> {
        let mut recorded = self.recorded_gpus(reader, running.iter().copied()).await;
        let jobs: Vec<LiveJob> = running
            .iter()
            .filter_map(|record| {
                let nodes = record.nodes.hosts().to_vec();
                let held = HeldJob {
                    gpus_per_node: exact_gpus_per_node(catalog.gpus(&record.tres_alloc), nodes.len()),
                    nodes,
                    recorded: recorded.remove(&record.identity.id_job).unwrap_or_default(),
                };
                Some(LiveJob { job_id: record.identity.id_job, start: epoch(record.time_start)?, held })
            })
            .collect();
        match self.reporter().live_means(&jobs, Utc::now()).await {
            Ok(means) => Some(means),
            Err(error) => {
                tracing::warn!(%error, "running jobs' live values unavailable; listing without them");
                None
            }
        }
    }

    /// One job as sacct shows it, with its steps and its GPUs per node.
    pub async fn show_job(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::JobDetail, AppError> {
        let (reader, record, steps) = self.visible_job(viewer, cluster, job_id).await?;
        let catalog = reader.tres_catalog().await?;
        let mut detail = wire_map::job_detail(&record, &steps, &catalog, reader.cluster().as_str(), now_epoch());
        // The command line may carry what its owner would not share (`--export=TOKEN=…`): a shared
        // report's holder does not get it.
        if matches!(viewer, Viewer::Shared(_)) {
            detail.submit_line = String::new();
        }
        Ok(detail)
    }

    /// The job's report with `points` per timeline: live while it runs, archived once it ended; for a
    /// viewer who is not staff, a shared node's GPUs as one band ([`super::report::for_tenant`]).
    pub async fn job_report(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        points: usize,
    ) -> Result<wire::JobReport, AppError> {
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let catalog = reader.tres_catalog().await?;
        let report = self.reporter().report_for(reader, &record, &catalog, points).await?;
        // Staff see a shared node's GPUs one by one; anyone else as one band (issue #15, M1).
        let mut report = match self.scope(viewer, reader).await? {
            ViewerScope::Staff => report,
            _ => super::report::for_tenant(report),
        };
        // The charts' links are made from what this viewer sees, so they name nothing the page does not.
        let vmui = self.reporter().vmui_answers().await;
        self.reporter().attach_links(&mut report, record.identity.id_job, record.nodes.hosts(), vmui);
        Ok(report)
    }

    /// Where the job's traced GPU time went (empty without trace summaries).
    pub async fn job_traces(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::JobTraces, AppError> {
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let store = self.require_store()?;
        Ok(super::traces::job_traces(store, reader.cluster(), record.identity.id_job, record.run()).await?)
    }
}
