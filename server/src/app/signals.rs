//! Every signal the site already collects, per job: the job's log lines from VictoriaLogs and its
//! processes' CPU profile from Pyroscope, both scoped by the server to the job's nodes, window and
//! cgroup. A source that is absent, slow or failing degrades to a status and a message, never an error.

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::config::{PyroscopeConfig, VictoriaLogsConfig};
use crate::domain::job::{JobFilter, JobRecord, TimeWindow};
use crate::domain::logs::{self, JobMarks, LogEntry, OwnLines};
use crate::domain::logsql::{ContainsText, JobLogQuery};
use crate::domain::profile::{self, ProfileSelector, ProfileType};
use crate::domain::promql::LabelName;
use crate::domain::scope::ViewerScope;
use crate::domain::trace::{CgroupJobKey, SlurmCgroup};
use crate::sources::pyroscope::Pyroscope;
use crate::sources::slurmdbd::SlurmDbd;
use crate::sources::victorialogs::VictoriaLogs;

/// Margin around the job's window: slurmd's prolog lines come just before the start, the epilog's
/// and the kernel's just after the end.
const WINDOW_MARGIN_S: i64 = 60;

/// Most jobs read from slurmdbd to find which of a job's nodes it held alone; past that, every node
/// counts as shared (the viewer then reads only lines naming the job).
const MAX_NEIGHBOURS: usize = 20_000;

/// Most functions listed by self and by total.
pub const MAX_TOP: u64 = 100;
/// Functions listed by self and by total when a request does not say.
pub const DEFAULT_TOP: usize = 20;

/// The log and profile sources, as configured.
#[derive(Clone, Default)]
pub struct Signals {
    logs: Option<LogSource>,
    profiles: Option<ProfileSource>,
}

#[derive(Clone)]
struct LogSource {
    client: VictoriaLogs,
    filter: Option<String>,
    max_lines: u32,
}

#[derive(Clone)]
struct ProfileSource {
    client: Pyroscope,
    default_type: ProfileType,
    host_label: LabelName,
    cgroup_label: LabelName,
    service_name: Option<String>,
    max_nodes: u32,
}

/// A job as these signals need it: id, nodes and times from slurmdbd.
#[derive(Debug, Clone)]
pub struct JobScope {
    pub job_id: u32,
    /// Its user's id.
    pub uid: u32,
    pub nodes: Vec<String>,
    /// None while it has not started.
    pub start: Option<DateTime<Utc>>,
    /// None while it runs.
    pub end: Option<DateTime<Utc>>,
    /// SLUIDs of its cgroups (Slurm ≥ 26.05), from the paths the Slurm plugin recorded.
    pub sluids: Vec<String>,
}

impl JobScope {
    /// `[start - margin, end + margin]` once it ended, `[start - margin, now]` while it runs; None
    /// before it starts.
    pub fn window(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let start = self.start?;
        let margin = Duration::seconds(WINDOW_MARGIN_S);
        let end = match self.end {
            Some(end) => end.max(start) + margin,
            None => now.max(start),
        };
        Some((start - margin, end))
    }
}

/// What a logs request asks, parsed.
#[derive(Debug, Clone, Default)]
pub struct LogsRequest {
    /// One of the job's nodes, or all of them.
    pub node: Option<String>,
    pub contains: Option<ContainsText>,
    pub limit: Option<u32>,
}

/// What a profile request asks, parsed.
#[derive(Debug, Clone, Default)]
pub struct ProfileRequest {
    pub profile_type: Option<ProfileType>,
    pub node: Option<String>,
    pub top: usize,
}

impl Signals {
    /// The clients of the configured sources (none configured: every answer says `not_configured`).
    pub fn new(logs: Option<&VictoriaLogsConfig>, profiles: Option<&PyroscopeConfig>) -> Result<Self, String> {
        let logs = logs
            .map(|config| {
                let timeout = std::time::Duration::from_millis(config.timeout_ms);
                VictoriaLogs::new(&config.url, timeout, config.node_field.clone())
                    .map(|client| LogSource {
                        client,
                        filter: config.filter.clone(),
                        max_lines: config.max_lines.max(1),
                    })
                    .map_err(|e| e.to_string())
            })
            .transpose()?;
        let profiles = profiles
            .map(|config| {
                Pyroscope::new(&config.url, std::time::Duration::from_millis(config.timeout_ms))
                    .map(|client| ProfileSource {
                        client,
                        default_type: config.profile_type,
                        host_label: config.host_label.clone(),
                        cgroup_label: config.cgroup_label.clone(),
                        service_name: config.service_name.clone(),
                        max_nodes: config.max_nodes.max(1),
                    })
                    .map_err(|e| e.to_string())
            })
            .transpose()?;
        Ok(Self { logs, profiles })
    }

    /// Whether a log source is configured.
    pub fn has_logs(&self) -> bool {
        self.logs.is_some()
    }

    /// The most lines a logs request may ask for (`limit`'s bound).
    pub fn max_lines(&self) -> u32 {
        self.logs.as_ref().map_or(1000, |source| source.max_lines)
    }

    /// The job's log lines and its important ones; with `own`, only those the viewer may read.
    pub async fn job_logs(&self, job: &JobScope, request: &LogsRequest, own: Option<&OwnLines>) -> wire::JobLogs {
        let mut answer = wire::JobLogs {
            status: wire::LogsStatus::Ok,
            message: None,
            query: None,
            important_query: None,
            window_start: None,
            window_end: None,
            important: Vec::new(),
            lines: Vec::new(),
            truncated: false,
            limited_to_job: own.is_some(),
        };
        let Some(source) = &self.logs else {
            answer.status = wire::LogsStatus::NotConfigured;
            answer.message = Some("this server does not collect logs".into());
            return answer;
        };
        let Some((start, end)) = job.window(Utc::now()) else {
            answer.message = Some("the job has not started: it has no logs yet".into());
            return answer;
        };
        let nodes: Vec<String> = match &request.node {
            Some(node) => vec![node.clone()],
            None => job.nodes.clone(),
        };
        (answer.window_start, answer.window_end) = (Some(start), Some(end));
        if nodes.is_empty() {
            answer.message = Some("slurmdbd names no node for this job".into());
            return answer;
        }
        let query = JobLogQuery {
            start,
            end,
            node_field: source.client.node_field(),
            nodes: &nodes,
            site_filter: source.filter.as_deref(),
            contains: request.contains.as_ref(),
            own,
        };
        let (lines_query, important_query) = (query.lines(), query.important());
        answer.query = Some(lines_query.clone());
        answer.important_query = Some(important_query.clone());
        let limit = request.limit.unwrap_or(source.max_lines).clamp(1, source.max_lines) as usize;
        let (lines, important) = tokio::join!(
            source.client.query(&lines_query, start, end, limit),
            source.client.query(&important_query, start, end, limit),
        );
        let (lines, important) = match (lines, important) {
            (Ok(lines), Ok(important)) => (lines, important),
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, job = job.job_id, "job logs unavailable");
                answer.status = wire::LogsStatus::Unavailable;
                answer.message = Some(format!(
                    "logs unavailable since {}: {}",
                    Utc::now().format("%H:%M:%S UTC"),
                    error.for_viewer()
                ));
                return answer;
            }
        };
        // Classified from both answers: the important query finds them past the limit, the window's
        // lines catch what its words miss.
        // The query narrowed to the viewer's lines; each line read is checked against the same rule.
        let readable = |entry: &LogEntry| own.is_none_or(|own| own.admits(entry));
        let both: Vec<LogEntry> =
            important.entries.iter().chain(&lines.entries).filter(|entry| readable(entry)).cloned().collect();
        answer.important = logs::important(&both, job.job_id)
            .into_iter()
            .map(|(entry, classified)| wire::ImportantLogLine {
                kind: log_kind(classified.kind),
                time: entry.time,
                node: entry.node,
                message: entry.message,
                xid: classified.xid,
            })
            .collect();
        answer.truncated = lines.truncated;
        answer.lines = lines
            .entries
            .into_iter()
            .filter(readable)
            .map(|entry| wire::LogLine { time: entry.time, node: entry.node, message: entry.message })
            .collect();
        answer
    }

    /// The job's merged profile: top functions and the flame graph.
    pub async fn job_profile(&self, job: &JobScope, request: &ProfileRequest) -> wire::JobProfile {
        let profile_type = request
            .profile_type
            .or_else(|| self.profiles.as_ref().map(|source| source.default_type))
            .unwrap_or_default();
        let mut answer = wire::JobProfile {
            status: wire::ProfileStatus::Ok,
            message: None,
            profile_type: profile_type.id().into(),
            query: None,
            window_start: None,
            window_end: None,
            units: Some(profile_type.unit().into()),
            total: 0,
            top_self: Vec::new(),
            top_total: Vec::new(),
            flame: Vec::new(),
        };
        let Some(source) = &self.profiles else {
            answer.status = wire::ProfileStatus::NotConfigured;
            answer.message = Some("this server does not collect CPU profiles".into());
            return answer;
        };
        let Some((start, end)) = job.window(Utc::now()) else {
            answer.status = wire::ProfileStatus::Empty;
            answer.message = Some("the job has not started: it has no profile yet".into());
            return answer;
        };
        (answer.window_start, answer.window_end) = (Some(start), Some(end));
        let nodes: Vec<String> = match &request.node {
            Some(node) => vec![node.clone()],
            None => job.nodes.clone(),
        };
        if nodes.is_empty() {
            answer.status = wire::ProfileStatus::Empty;
            answer.message = Some("slurmdbd names no node for this job".into());
            return answer;
        }
        let selector = ProfileSelector {
            profile_type,
            host_label: &source.host_label,
            nodes: &nodes,
            cgroup_label: &source.cgroup_label,
            job_id: job.job_id,
            sluids: &job.sluids,
            service_name: source.service_name.as_deref(),
        }
        .to_string();
        answer.query = Some(selector.clone());
        let rendered = match source.client.render(&selector, start, end, source.max_nodes).await {
            Ok(rendered) => rendered,
            Err(error) => {
                tracing::warn!(%error, job = job.job_id, "job profile unavailable");
                answer.status = wire::ProfileStatus::Unavailable;
                answer.message = Some(format!(
                    "profiles unavailable since {}: {}",
                    Utc::now().format("%H:%M:%S UTC"),
                    error.for_viewer()
                ));
                return answer;
            }
        };
        if !rendered.metadata.units.is_empty() {
            answer.units = Some(rendered.metadata.units.clone());
        }
        let bars = match profile::decode(&rendered.flamebearer) {
            Ok(bars) => bars,
            Err(error) => {
                answer.status = wire::ProfileStatus::Unavailable;
                answer.message = Some(format!("Pyroscope's flame graph could not be read: {error}"));
                return answer;
            }
        };
        let total = profile::root_total(&rendered.flamebearer, &bars);
        if total == 0 {
            answer.status = wire::ProfileStatus::Empty;
            answer.message = Some("no samples of this job's cgroup on its nodes in its window".into());
            return answer;
        }
        answer.total = total;
        let share = |value: u64| value as f64 / total as f64;
        let functions = profile::function_totals(&bars);
        let entry = |function: &profile::FunctionTotals| wire::ProfileFunction {
            name: function.name.clone(),
            self_value: function.self_value,
            total_value: function.total_value,
            self_share: share(function.self_value),
            total_share: share(function.total_value),
        };
        answer.top_total = functions.iter().take(request.top).map(entry).collect();
        let mut by_self: Vec<&profile::FunctionTotals> = functions.iter().filter(|f| f.self_value > 0).collect();
        by_self.sort_by(|a, b| b.self_value.cmp(&a.self_value).then_with(|| a.name.cmp(&b.name)));
        answer.top_self = by_self.into_iter().take(request.top).map(entry).collect();
        answer.flame = bars
            .into_iter()
            .map(|bar| wire::FlameBar {
                level: bar.level,
                start: bar.start,
                value: bar.total,
                self_value: bar.self_value,
                name: bar.name,
            })
            .collect();
        answer
    }
}

impl App {
    /// The job's log lines and the important ones, for a viewer who may see the job.
    pub async fn job_logs(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        request: LogsRequest,
    ) -> Result<wire::JobLogs, AppError> {
        let (reader, record, job) = self.signal_scope(viewer, cluster, job_id, request.node.as_deref()).await?;
        let scope = self.scope(viewer, reader).await?;
        // Which nodes the job held alone costs a read of the window's jobs: only when there are logs.
        let own = match scope {
            ViewerScope::Staff => None,
            _ if !self.signals().has_logs() => None,
            _ => self.own_lines(reader, &scope, &record, &job).await?,
        };
        Ok(self.signals().job_logs(&job, &request, own.as_ref()).await)
    }

    /// Where the job's processes spent CPU, for a viewer who may see the job.
    pub async fn job_profile(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        request: ProfileRequest,
    ) -> Result<wire::JobProfile, AppError> {
        let (_, _, job) = self.signal_scope(viewer, cluster, job_id, request.node.as_deref()).await?;
        Ok(self.signals().job_profile(&job, &request).await)
    }

    /// The job `viewer` may see (`NotFound` otherwise), as the signals need it, with `node` checked
    /// against its nodes (`Invalid` when it is not one of them).
    async fn signal_scope(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        node: Option<&str>,
    ) -> Result<(&SlurmDbd, JobRecord, JobScope), AppError> {
        // A shared link carries a job's facts and report; its log lines and profile stay with its owner.
        if matches!(viewer, Viewer::Shared(_)) {
            return Err(AppError::Forbidden("a shared report carries no logs or profile".into()));
        }
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let nodes = record.nodes.hosts().to_vec();
        if let Some(node) = node
            && !nodes.iter().any(|held| held == node)
        {
            let held = if nodes.is_empty() { "none".to_string() } else { nodes.join(", ") };
            return Err(AppError::invalid("node", format!("not one of the job's nodes ({held})")));
        }
        // Slurm >= 26.05 names a job's cgroup by SLUID: slurmdbd's row carries it from 26.05 on, and the
        // cgroup paths the plugin recorded name it too. Before 26.05 the job id suffices.
        let mut sluids: Vec<String> = record.sluid.iter().map(ToString::to_string).collect();
        if let Some(store) = self.store() {
            match super::gpus::run_gpu_records(store, reader.cluster(), &record).await {
                Ok(records) => {
                    for path in records.iter().filter_map(|r| r.cgroup_path.as_deref()) {
                        if let Ok(SlurmCgroup { job: CgroupJobKey::Sluid(sluid), .. }) = path.parse::<SlurmCgroup>()
                            && !sluids.contains(&sluid)
                        {
                            sluids.push(sluid);
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "GPU records unavailable; profiles matched by job id only"),
            }
        }
        let job = JobScope {
            job_id: record.identity.id_job,
            uid: record.uid,
            nodes,
            start: crate::domain::time::epoch(record.time_start),
            end: crate::domain::time::epoch(record.time_end),
            sluids,
        };
        Ok((reader, record, job))
    }

    /// The lines of `job` a viewer who is not staff may read (issue #15, H2): every line of a node for
    /// the time the job held it alone, else only lines naming the job, its user or its cgroup. slurmdbd
    /// tells which jobs the viewer may not see shared a node and when; nothing of them leaves here but
    /// those spans. `None` when the job held every node alone for its whole window (or has not started).
    async fn own_lines(
        &self,
        reader: &SlurmDbd,
        scope: &ViewerScope,
        record: &JobRecord,
        job: &JobScope,
    ) -> Result<Option<OwnLines>, AppError> {
        let now = Utc::now();
        let Some(window) = job.window(now) else { return Ok(None) };
        let marks = JobMarks { job_id: job.job_id, uid: job.uid, sluids: job.sluids.clone() };
        let Ok(span) = TimeWindow::new(window.0, window.1) else {
            return Ok(Some(OwnLines { marks, alone: Default::default() }));
        };
        let catalog = reader.tres_catalog().await?;
        let margin = Duration::seconds(WINDOW_MARGIN_S);
        let mut others = Vec::new();
        let (mut cursor, mut scanned) = (None, 0);
        loop {
            let (jobs, next) =
                reader.jobs_in_window(&ViewerScope::Staff, span, &JobFilter::default(), &catalog, cursor, 5000).await?;
            scanned += jobs.len();
            for other in jobs {
                let Some(started) = crate::domain::time::epoch(other.time_start) else { continue };
                if other.db_index == record.db_index || scope.can_see(&other.user, &other.account) {
                    continue;
                }
                let ended = crate::domain::time::epoch(other.time_end).unwrap_or(now);
                for host in other.nodes.hosts().iter().filter(|host| job.nodes.contains(host)) {
                    others.push((host.clone(), started - margin, ended + margin));
                }
            }
            match next {
                Some(next) if scanned < MAX_NEIGHBOURS => cursor = Some(next),
                Some(_) => {
                    tracing::warn!(
                        job = job.job_id,
                        scanned,
                        "too many neighbours to tell; every node counts as shared"
                    );
                    return Ok(Some(OwnLines { marks, alone: Default::default() }));
                }
                None => break,
            }
        }
        let own = OwnLines { marks, alone: logs::held_alone(&job.nodes, window, &others) };
        Ok((!own.whole(&job.nodes, window)).then_some(own))
    }
}

/// The wire's word for a classified log line.
fn log_kind(kind: logs::LogKind) -> wire::LogKind {
    match kind {
        logs::LogKind::Xid => wire::LogKind::Xid,
        logs::LogKind::NcclTimeout => wire::LogKind::NcclTimeout,
        logs::LogKind::NcclError => wire::LogKind::NcclError,
        logs::LogKind::OomKill => wire::LogKind::OomKill,
        logs::LogKind::LinkDown => wire::LogKind::LinkDown,
        logs::LogKind::Slurm => wire::LogKind::Slurm,
    }
}
