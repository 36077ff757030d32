//! The application layer: every use case of slurmlens (list jobs, show one, build its report, read
//! GPUs at a moment, take in the plugin's and collectors' records), typed, with no HTTP in it. The API
//! handlers (`http/`) and the web pages both call these functions with the same [`Viewer`], so a page
//! shows exactly what `/api/v1` answers the same person, by construction.
//!
//! [`App`] holds the sources (one slurmdbd reader per cluster, slurmlens's own store, the report maker
//! over VictoriaMetrics, the grid's readings, the log and profile sources) and decides who may see what.

pub mod advice;
mod chart_history;
pub mod colours;
pub mod compare;
pub mod error;
pub mod export;
pub mod gantt;
pub mod gpus;
pub mod ingest;
pub mod job_order;
pub mod job_output;
pub mod jobs;
pub mod node_metrics;
pub mod node_page;
pub mod nodes;
pub mod notify;
pub mod report;
pub mod script;
pub mod shares;
pub mod signals;
pub mod tags;
pub mod traces;
pub mod usage;
pub mod wire_map;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use error::AppError;

use crate::config::{AccessConfig, AnonymousAccess, LimitsConfig};
use crate::domain::cluster::ClusterName;
use crate::domain::ids::{BadJobId, JobSelector};
use crate::domain::job::{JobRecord, StepRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::Store;
use gpus::ReadingSettings;
use report::Reporter;
use signals::Signals;

/// Who is asking, as the HTTP edge established it (a personal token, or the site's sign-in proxy).
/// It travels as a typed request extension; nothing else about a request reaches the use cases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Viewer {
    /// No identity: what that may see is the site's `anonymous` setting.
    #[default]
    Anonymous,
    /// A signed-in person.
    Signed(Identity),
    /// Whoever runs the server's own command line (`slurmlens report`), who holds its configuration and
    /// so its database access: staff. The HTTP edge never makes this viewer.
    Operator,
    /// Whoever opened a live shared report link: that one job as its owner sees it, its report and
    /// facts only (no logs, profile or script). Made only by `shares::open_share`.
    Shared(shares::ShareGrant),
}

/// A signed-in viewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    /// From the proxy's groups header; tokens carry none.
    pub groups: Vec<String>,
    /// The personal token the request came with, if any.
    pub token: Option<u64>,
}

impl Viewer {
    /// The signed-in identity, if any.
    pub fn identity(&self) -> Option<&Identity> {
        match self {
            Self::Anonymous | Self::Operator | Self::Shared(_) => None,
            Self::Signed(identity) => Some(identity),
        }
    }
}

/// The application: cheap to clone, holds no per-request state.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
    /// `[notify]`: what users' notification settings answer from (the notifier holds its own copy).
    notify: Arc<crate::config::NotifyConfig>,
    /// `[job_output]`: where a job's own output may be read.
    job_output: Arc<crate::config::JobOutputConfig>,
}

struct Inner {
    clusters: BTreeMap<ClusterName, SlurmDbd>,
    default_cluster: ClusterName,
    access: AccessConfig,
    limits: LimitsConfig,
    store: Option<Store>,
    reporter: Reporter,
    readings: ReadingSettings,
    signals: Signals,
    usage: usage::UsageSettings,
    advice: advice::AdviceSettings,
    /// The grid's node health of the minute, shared among viewers.
    health: node_metrics::HealthCache,
    /// Running jobs' means so far, shared for a minute.
    live_means: jobs::LiveMeansCache,
    /// Sorted listings' orders, kept for their next pages.
    orders: job_order::OrderCache,
    /// How far the archiver's first round is, for the job listing.
    archiving: report::Progress,
    /// Finished jobs of staff's chart windows, kept by the hour of their ends.
    chart_history: chart_history::ChartHistory,
}

impl App {
    /// `readers` must not be empty (`None` otherwise); the first one is the default cluster. `store`
    /// is slurmlens's own database; without one, the features that need it are unavailable and the
    /// rest works. `readings` is where the grid's GPU readings come from. `limits` bound what one
    /// viewer may ask at once.
    pub fn new(
        readers: Vec<SlurmDbd>,
        access: AccessConfig,
        limits: LimitsConfig,
        store: Option<Store>,
        reporter: Reporter,
        readings: ReadingSettings,
        signals: Signals,
    ) -> Option<Self> {
        let default_cluster = readers.first()?.cluster().clone();
        let clusters = readers.into_iter().map(|reader| (reader.cluster().clone(), reader)).collect();
        let usage = usage::UsageSettings::default();
        let advice = advice::AdviceSettings::default();
        let health = node_metrics::HealthCache::default();
        let live_means = jobs::LiveMeansCache::default();
        let orders = job_order::OrderCache::default();
        let chart_history = chart_history::ChartHistory::new(limits.chart_history_jobs);
        let inner = Inner {
            clusters,
            default_cluster,
            access,
            limits,
            store,
            reporter,
            readings,
            signals,
            usage,
            advice,
            health,
            live_means,
            orders,
            archiving: report::Progress::default(),
            chart_history,
        };
        Some(Self { inner: Arc::new(inner), notify: Arc::default(), job_output: Arc::default() })
    }

    /// The application whose users' notification settings answer from `notify`.
    pub fn with_notify(self, notify: crate::config::NotifyConfig) -> Self {
        Self { notify: Arc::new(notify), ..self }
    }

    /// With `[job_output]`: where a job's own output may be read (nowhere by default).
    pub fn with_job_output(self, job_output: crate::config::JobOutputConfig) -> Self {
        Self { job_output: Arc::new(job_output), ..self }
    }

    /// `[notify]` as users' notification settings read it.
    pub fn notify_config(&self) -> &crate::config::NotifyConfig {
        &self.notify
    }

    /// With the site's showback settings (`[usage]`); call it on the application just made, before it
    /// is shared (a shared one keeps its settings).
    pub fn with_usage(mut self, settings: usage::UsageSettings) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.usage = settings;
        }
        self
    }

    /// The same application with these advice settings (`[advice]`); called before it is shared.
    pub fn with_advice(mut self, settings: advice::AdviceSettings) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.advice = settings,
            None => tracing::error!("advice settings ignored: the application was already shared"),
        }
        self
    }

    /// The site's advice settings.
    pub fn advice_settings(&self) -> &advice::AdviceSettings {
        &self.inner.advice
    }

    /// Every configured cluster's reader.
    pub fn readers(&self) -> impl Iterator<Item = &SlurmDbd> {
        self.inner.clusters.values()
    }

    /// The clusters `viewer` may read, the default first: every one served to a signed-in viewer (and
    /// to anyone where the site lets anonymous viewers read), a shared link's job's alone to its holder;
    /// `Unauthorized` before sign-in otherwise, so that no name leaves before it.
    pub fn clusters_for(&self, viewer: &Viewer) -> Result<Vec<String>, AppError> {
        match viewer {
            Viewer::Shared(grant) => Ok(vec![grant.cluster.clone()]),
            Viewer::Anonymous if self.inner.access.anonymous == AnonymousAccess::Nobody => {
                Err(AppError::Unauthorized("sign in through the site, or send a personal token".into()))
            }
            Viewer::Operator | Viewer::Signed(_) | Viewer::Anonymous => Ok(self.cluster_names()),
        }
    }

    /// The clusters served, the default first.
    pub fn cluster_names(&self) -> Vec<String> {
        let default = self.inner.default_cluster.as_str().to_string();
        let others = self.inner.clusters.keys().map(|name| name.as_str().to_string()).filter(|name| *name != default);
        std::iter::once(default.clone()).chain(others).collect()
    }

    /// The report maker.
    pub fn reporter(&self) -> &Reporter {
        &self.inner.reporter
    }

    /// The log and profile sources.
    pub fn signals(&self) -> &Signals {
        &self.inner.signals
    }

    /// The site's access settings (who is staff, what anonymous viewers may see, tokens).
    pub fn access(&self) -> &AccessConfig {
        &self.inner.access
    }

    /// What one viewer may cost (`[limits]`).
    pub fn limits(&self) -> &LimitsConfig {
        &self.inner.limits
    }

    /// Refuses a window wider than `[limits] window_days` to a viewer who is not staff: each listing
    /// of it reads slurmdbd's job table across the whole window, so its width is what it costs.
    /// Staff are not capped. `start=0` (the whole history) is such a window.
    pub fn check_window(&self, scope: &ViewerScope, window: TimeWindow) -> Result<(), AppError> {
        let days = self.inner.limits.window_days.get();
        if *scope == ViewerScope::Staff || window.end() - window.start() <= chrono::Duration::days(i64::from(days)) {
            return Ok(());
        }
        let asked = (window.end() - window.start()).num_hours() as f64 / 24.0;
        Err(AppError::invalid(
            "start",
            format!(
                "a window of at most {days} days may be listed; this one is {asked:.1} days: move start or end closer"
            ),
        ))
    }

    /// Where the archiver publishes how far its first round is, and the job listing reads it.
    pub fn archive_progress(&self) -> &report::Progress {
        &self.inner.archiving
    }

    /// slurmlens's own database, if one is configured.
    pub fn store(&self) -> Option<&Store> {
        self.inner.store.as_ref()
    }

    /// slurmlens's own database, or `Unavailable` when none is configured.
    pub fn require_store(&self) -> Result<&Store, AppError> {
        self.inner.store.as_ref().ok_or(AppError::Unavailable {
            service: "slurmlens database",
            cause: "no [database] url is configured".into(),
        })
    }

    /// The reader of cluster `name`, or of the default cluster.
    pub fn cluster(&self, name: Option<&str>) -> Result<&SlurmDbd, AppError> {
        let Some(name) = name else {
            return self
                .inner
                .clusters
                .get(&self.inner.default_cluster)
                .ok_or_else(|| AppError::Internal("no cluster".into()));
        };
        // The served clusters are not named here: this answer goes out before sign-in.
        let unknown = || {
            AppError::invalid("cluster", format!("unknown cluster `{name}` (GET /api/v1/clusters lists those served)"))
        };
        let parsed: ClusterName = name.parse().map_err(|_| unknown())?;
        self.inner.clusters.get(&parsed).ok_or_else(unknown)
    }

    /// Whether `identity` is staff: a configured staff user, or a member of a staff group.
    pub fn is_staff(&self, identity: &Identity) -> bool {
        is_staff(identity, &self.inner.access)
    }

    /// What `viewer` may see on `reader`'s cluster: staff everything; a user their own jobs and those
    /// of the accounts they coordinate (slurmdbd's `acct_coord_table`). Without an identity: everything
    /// where the site says anonymous is staff (a lab, a demo), otherwise `Unauthorized`.
    pub async fn scope(&self, viewer: &Viewer, reader: &SlurmDbd) -> Result<ViewerScope, AppError> {
        let access = &self.inner.access;
        match viewer {
            Viewer::Operator => Ok(ViewerScope::Staff),
            Viewer::Shared(grant) => Ok(reader.scope_for_user(&grant.owner).await?),
            Viewer::Signed(identity) if is_staff(identity, access) => Ok(ViewerScope::Staff),
            Viewer::Signed(identity) => Ok(reader.scope_for_user(&identity.user).await?),
            Viewer::Anonymous => match access.anonymous {
                AnonymousAccess::Staff => Ok(ViewerScope::Staff),
                AnonymousAccess::Nobody => {
                    Err(AppError::Unauthorized("sign in through the site, or send a personal token".into()))
                }
            },
        }
    }

    /// The job `job_id` (`123`, `123_4`, `8+1`) as `viewer` may see it, with its steps and the reader
    /// of its cluster: a job they may not see is `NotFound`, the same answer as one that does not exist.
    ///
    /// Without a cluster, every cluster is asked (the default first), so that a link without one keeps
    /// working where it is unambiguous; a job id on several clusters asks for one. A job not on the
    /// cluster named but visible on another gets a hint naming it.
    pub async fn visible_job(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<(&SlurmDbd, JobRecord, Vec<StepRecord>), AppError> {
        let selector: JobSelector = job_id.parse().map_err(|e: BadJobId| AppError::invalid("job_id", e.to_string()))?;
        if let Viewer::Shared(grant) = viewer {
            return shares::granted_job(self, grant, selector).await;
        }
        if let Some(name) = cluster {
            let reader = self.cluster(Some(name))?;
            let scope = self.scope(viewer, reader).await?;
            if let Some((record, steps)) = reader.job(&scope, selector).await? {
                return Ok((reader, record, steps));
            }
            let elsewhere = self.clusters_holding(viewer, selector, Some(reader)).await;
            return Err(AppError::NotFound(match elsewhere.as_slice() {
                [] => format!("no job {job_id} on cluster {name}"),
                names => format!(
                    "no job {job_id} on cluster {name}; {} has one: add ?cluster={}",
                    names.join(", "),
                    names[0]
                ),
            }));
        }
        let mut found = Vec::new();
        for reader in self.readers_default_first() {
            let Ok(scope) = self.scope(viewer, reader).await else { continue };
            match reader.job(&scope, selector).await {
                Ok(Some((record, steps))) => found.push((reader, record, steps)),
                Ok(None) => {}
                // The default cluster's failure is the answer; another's only narrows the search.
                Err(error) if *reader.cluster() == self.inner.default_cluster => return Err(error.into()),
                Err(error) => tracing::warn!(%error, cluster = %reader.cluster(), "a cluster could not be searched"),
            }
        }
        match found.len() {
            0 => {
                // An anonymous viewer where anonymous may see nothing is told to sign in, not "no job".
                self.scope(viewer, self.cluster(None)?).await?;
                Err(AppError::NotFound(format!("no job {job_id}")))
            }
            1 => Ok(found.remove(0)),
            _ => {
                let names: Vec<String> = found.iter().map(|(reader, _, _)| reader.cluster().to_string()).collect();
                Err(AppError::invalid(
                    "cluster",
                    format!("job {job_id} exists on clusters {}: name one with ?cluster=", names.join(" and ")),
                ))
            }
        }
    }

    /// The clusters other than `except` on which `viewer` may see a job `selector`.
    async fn clusters_holding(&self, viewer: &Viewer, selector: JobSelector, except: Option<&SlurmDbd>) -> Vec<String> {
        let mut names = Vec::new();
        for reader in self.readers_default_first() {
            if except.is_some_and(|except| except.cluster() == reader.cluster()) {
                continue;
            }
            let Ok(scope) = self.scope(viewer, reader).await else { continue };
            if let Ok(Some(_)) = reader.job(&scope, selector).await {
                names.push(reader.cluster().to_string());
            }
        }
        names
    }

    /// The readers, the default cluster's first.
    fn readers_default_first(&self) -> impl Iterator<Item = &SlurmDbd> {
        let default = &self.inner.default_cluster;
        let first = self.inner.clusters.get(default);
        first.into_iter().chain(self.inner.clusters.values().filter(move |reader| reader.cluster() != default))
    }
}

/// Staff see every job: a configured staff user, or a member of a staff group.
fn is_staff(identity: &Identity, access: &AccessConfig) -> bool {
    access.staff_users.contains(&identity.user)
        || identity.groups.iter().any(|group| access.staff_groups.contains(group))
}

/// Seconds since the epoch now, as slurmdbd counts (the elapsed time of running jobs).
pub(crate) fn now_epoch() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0)
}
