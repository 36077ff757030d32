//! Showback and statistics of a window: the viewer's visible jobs that held an allocation in it, read
//! from slurmdbd as narrow rows through the listing's index choice (`sources/slurmdbd/usage.rs`), with the archived reports' digests read once for the
//! window and running jobs' means so far; then summed per account (sub-accounts rolled up, as
//! `sreport` does) or per user (`domain/usage.rs`).
//!
//! Idle GPU-hours count only GPU time whose utilisation is known (an archived report with metrics, or a
//! running job's means so far); the rest is reported as unmeasured, never as idle or busy.

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::domain::job::{JobRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;
use crate::domain::usage::{self, AccountTree, UsageJob, UsageWindow};
use crate::sources::slurmdbd::SlurmDbd;

/// The window when none is given: the last seven days.
pub const DEFAULT_DAYS: i64 = 7;
/// The widest window anyone (staff too) may ask: its visible jobs are held in memory at once.
pub const MAX_DAYS: i64 = 400;

/// The window of a usage request: `[start, end)`, by default the [`DEFAULT_DAYS`] before `end` (now).
pub fn usage_window(start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Result<TimeWindow, AppError> {
    let end = end.unwrap_or_else(Utc::now);
    let start = start.unwrap_or(end - Duration::days(DEFAULT_DAYS));
    if end - start > Duration::days(MAX_DAYS) {
        return Err(AppError::invalid(
            "start",
            format!("a usage window is at most {MAX_DAYS} days: move start closer"),
        ));
    }
    TimeWindow::new(start, end).map_err(|_| AppError::invalid("start", "start must be before end"))
}

/// What the site counts CO₂ at.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSettings {
    /// Grams of CO₂ per kWh (`[usage] co2_g_per_kwh`); none: CO₂ is not reported.
    pub co2_g_per_kwh: Option<f64>,
}

/// The visible jobs of a window, counted, and what the rows need beside them.
struct WindowUsage {
    cluster: String,
    jobs: Vec<UsageJob>,
    bounds: UsageWindow,
    scope: ViewerScope,
    tree: AccountTree,
}

fn epoch(time: DateTime<Utc>) -> u64 {
    u64::try_from(time.timestamp()).unwrap_or(0)
}

impl App {
    /// Usage per account (sub-accounts rolled up) or per user of the jobs `viewer` may see in `window`.
    pub async fn usage(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        window: TimeWindow,
        by: wire::UsageGrouping,
        tag: Option<&str>,
    ) -> Result<wire::UsageReport, AppError> {
        let read = self.window_usage(viewer, cluster, window, tag).await?;
        let co2 = self.usage_settings().co2_g_per_kwh;
        let table = match by {
            wire::UsageGrouping::Account => {
                let scope = &read.scope;
                let rolls_up = |account: &str| match scope {
                    ViewerScope::Staff => true,
                    ViewerScope::User { coordinated_accounts, .. } => coordinated_accounts.iter().any(|a| a == account),
                    ViewerScope::Nobody => false,
                };
                usage::by_account(&read.jobs, read.bounds, &read.tree, rolls_up, co2)
            }
            wire::UsageGrouping::User => usage::by_user(&read.jobs, read.bounds, co2),
        };
        Ok(wire::UsageReport {
            cluster: read.cluster,
            start: window.start(),
            end: window.end(),
            by,
            co2_g_per_kwh: co2,
            rows: table.rows,
            total: table.total,
        })
    }

    /// The top users and accounts by allocated and idle GPU-hours, and the histograms of job size, run
    /// time and queue wait, of the jobs `viewer` may see in `window`. Accounts here are the jobs' own
    /// accounts, not rolled up (a parent would always lead).
    pub async fn usage_stats(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        window: TimeWindow,
        tag: Option<&str>,
    ) -> Result<wire::UsageStats, AppError> {
        let read = self.window_usage(viewer, cluster, window, tag).await?;
        let users = usage::by_user(&read.jobs, read.bounds, None).rows;
        let accounts = usage::by_account(&read.jobs, read.bounds, &AccountTree::default(), |_| false, None).rows;
        let (job_gpus, run_time, queue_wait) = usage::histograms(&read.jobs, read.bounds);
        Ok(wire::UsageStats {
            cluster: read.cluster,
            start: window.start(),
            end: window.end(),
            top_users: usage::top(&users, |row| Some(row.gpu_hours)),
            top_accounts: usage::top(&accounts, |row| Some(row.gpu_hours)),
            top_idle_users: usage::top(&users, |row| row.idle_gpu_hours),
            top_idle_accounts: usage::top(&accounts, |row| row.idle_gpu_hours),
            job_gpus,
            run_time,
            queue_wait,
        })
    }

    /// The jobs `viewer` may see that started and overlap `window`, with their digests and live means.
    async fn window_usage(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        window: TimeWindow,
        tag: Option<&str>,
    ) -> Result<WindowUsage, AppError> {
        let tag = tag.map(super::tags::parse_tag).transpose()?;
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        self.check_window(&scope, window)?;
        let catalog = reader.tres_catalog().await?;
        let (mut jobs, keys) = match &tag {
            None => read_jobs(reader, &scope, window, &catalog, None).await?,
            Some(tag) => self.read_tagged_jobs(reader, &scope, window, &catalog, tag).await?,
        };
        self.attach_measures(reader, &scope, &mut jobs, &keys, &catalog).await;
        let tree = AccountTree::new(reader.account_parents().await?);
        let now = super::now_epoch();
        let bounds = UsageWindow { start: epoch(window.start()), end: epoch(window.end()), now };
        Ok(WindowUsage { cluster: reader.cluster().to_string(), jobs, bounds, scope, tree })
    }

    /// Each job's archived digest (utilisation, tensor activity, energy, blame; one read for the
    /// window), and running GPU jobs' means so far. Either source failing leaves its jobs unmeasured
    /// (logged), as the listing does.
    async fn attach_measures(
        &self,
        reader: &SlurmDbd,
        scope: &ViewerScope,
        jobs: &mut [UsageJob],
        keys: &[(u32, u64)],
        catalog: &TresCatalog,
    ) {
        if let Some(store) = self.store() {
            match store.digests_among(reader.cluster(), keys).await {
                Ok(digests) => {
                    for (job, key) in jobs.iter_mut().zip(keys) {
                        let Some(digest) = digests.get(key) else { continue };
                        if digest.has_metrics {
                            job.gpu_util = digest.mean_gpu_util;
                            job.tensor_active = digest.mean_tensor_active;
                        }
                        job.energy_kwh = digest.energy_kwh;
                        job.measured_share = digest.measured_share.unwrap_or(1.0);
                        job.blame = digest.blame.as_deref().and_then(super::jobs::blame_named);
                    }
                }
                Err(error) => tracing::warn!(%error, "archived reports unavailable; usage without them"),
            }
        }
        // Running GPU jobs' means so far: their full records (the few running now), then one query.
        let running: Vec<usize> =
            jobs.iter().enumerate().filter(|(_, job)| job.time_end == 0 && job.gpus > 0).map(|(i, _)| i).collect();
        if running.is_empty() {
            return;
        }
        let now = Utc::now();
        let Ok(moment) = TimeWindow::new(now, now + Duration::seconds(1)) else { return };
        let records: Vec<JobRecord> = match reader.running_at(scope, moment, catalog).await {
            Ok(records) => records,
            Err(error) => {
                tracing::warn!(%error, "running jobs unavailable; usage without their means so far");
                return;
            }
        };
        let live = self.live_means_of(reader, &records, catalog).await;
        let submitted: std::collections::BTreeMap<u32, u64> =
            records.iter().map(|record| (record.identity.id_job, record.time_submit)).collect();
        for index in running {
            let (id_job, submit) = keys[index];
            if submitted.get(&id_job) != Some(&submit) {
                continue;
            }
            if let Some(means) = live.get(&id_job)
                && jobs[index].gpu_util.is_none()
            {
                jobs[index].gpu_util = means.gpu_util;
                jobs[index].tensor_active = means.tensor_active;
            }
        }
    }

    /// What the site counts CO₂ at.
    pub fn usage_settings(&self) -> UsageSettings {
        self.inner.usage
    }
}

/// The started jobs of `window` that `scope` may see, as usage counts them (narrow rows,
/// `sources/slurmdbd/usage.rs`), with their (job id, submit time) keys.
/// A tagged job submitted this long before a window's start is not looked for in it (usage windows are
/// at most [`MAX_DAYS`] wide; no job runs that long).
const TAGGED_LOOK_BACK_S: u64 = MAX_DAYS as u64 * 86_400;
/// Tagged job records read from the store, and probed in slurmdbd, at a time.
const TAGGED_CHUNK: usize = 1000;

impl App {
    /// The window's jobs carrying `tag`: the store's tagged records submitted before the window's end,
    /// newest first, in chunks, each chunk probed in slurmdbd by its records' unique index (a tag on many
    /// jobs costs chunks of probes, never a scan of the window).
    async fn read_tagged_jobs(
        &self,
        reader: &SlurmDbd,
        scope: &ViewerScope,
        window: TimeWindow,
        catalog: &TresCatalog,
        tag: &crate::domain::tag::Tag,
    ) -> Result<(Vec<UsageJob>, Vec<(u32, u64)>), AppError> {
        let store = self.require_store()?;
        let (start, end) = (epoch(window.start()), epoch(window.end()));
        let (mut jobs, mut keys) = (Vec::new(), Vec::new());
        let mut after = None;
        loop {
            let chunk = store.tagged_jobs(reader.cluster(), tag, end, after, TAGGED_CHUNK).await?;
            let Some(&(last_job, last_submit)) = chunk.last() else { break };
            let (more_jobs, more_keys) = read_jobs(reader, scope, window, catalog, Some(&chunk)).await?;
            jobs.extend(more_jobs);
            keys.extend(more_keys);
            if chunk.len() < TAGGED_CHUNK || last_submit.saturating_add(TAGGED_LOOK_BACK_S) < start {
                break;
            }
            after = Some((last_submit, last_job));
        }
        Ok((jobs, keys))
    }
}

async fn read_jobs(
    reader: &SlurmDbd,
    scope: &ViewerScope,
    window: TimeWindow,
    catalog: &TresCatalog,
    among: Option<&[(u32, u64)]>,
) -> Result<(Vec<UsageJob>, Vec<(u32, u64)>), AppError> {
    let records = reader.usage_records(scope, window, catalog, among).await?;
    let keys = records.iter().map(|record| (record.id_job, record.time_submit)).collect();
    let jobs = records
        .into_iter()
        .map(|record| UsageJob {
            user: record.user,
            account: record.account,
            gpus: record.gpus,
            time_submit: record.time_submit,
            time_start: record.time_start,
            time_end: record.time_end,
            state: record.state,
            gpu_util: None,
            tensor_active: None,
            energy_kwh: None,
            measured_share: 1.0,
            blame: None,
        })
        .collect();
    Ok((jobs, keys))
}
