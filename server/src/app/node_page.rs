//! One node's page and every node's health badge. A node's state, events and GPU health are not
//! per-tenant data: every viewer with a scope sees them. What ran on it is: the jobs running at each
//! fault are named only where the viewer may see them (the others are counted), and the temperature
//! and power timelines, which show other tenants' work, are staff's only.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::jobs::blame_named;
use super::node_metrics::{HealthCache, NodeReadings, read_node, read_nodes};
use super::{App, AppError, Viewer, wire_map};
use crate::domain::blame::{self, node_event_strength};
use crate::domain::job::{JobFilter, JobRecord, TimeWindow};
use crate::domain::node_health::{Health, NodeFacts, assess};
use crate::domain::scope::ViewerScope;
use crate::domain::state::NodeState;

/// The widest window a node page or the badges read (VictoriaMetrics' ranges grow with it).
pub const MAX_WINDOW_DAYS: i64 = 31;
/// Faults listed on a node page, newest first; the jobs of each are looked up in one read.
pub const MAX_FAULTS: usize = 50;
/// A job that ended this shortly before a fault was recorded ran into it (a node is marked down after
/// its jobs died, an XID is scraped after it was raised).
const FAULT_MARGIN_S: i64 = 120;
/// Jobs read at most around a node's faults (pages of the window's listing).
const MAX_FAULT_JOBS: usize = 20_000;

/// `[start, end)` from the request: default the 7 days before `end` (default now), at most
/// [`MAX_WINDOW_DAYS`], and for a viewer who is not staff at most the site's listing window.
fn window_of(
    app: &App,
    scope: &ViewerScope,
    (start, end): (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    default: Duration,
) -> Result<TimeWindow, AppError> {
    let end = end.unwrap_or_else(Utc::now);
    let start = start.unwrap_or(end - default);
    let window = TimeWindow::new(start, end).map_err(|e| AppError::invalid("start", e.to_string()))?;
    if end - start > Duration::days(MAX_WINDOW_DAYS) {
        return Err(AppError::invalid(
            "start",
            format!("a node is read over at most {MAX_WINDOW_DAYS} days: move start or end closer"),
        ));
    }
    app.check_window(scope, window)?;
    Ok(window)
}

impl App {
    /// Node `node`'s page over `[start, end)` (default: the last 7 days). An unknown node is a 404; a
    /// viewer without a scope is a 401.
    pub async fn node_page(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        node: &str,
        window: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    ) -> Result<wire::NodePage, AppError> {
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        if scope == ViewerScope::Nobody {
            return Err(AppError::Unauthorized("sign in to see a node's page".into()));
        }
        let window = window_of(self, &scope, window, Duration::days(7))?;
        let catalog = reader.tres_catalog().await?;
        let status = reader
            .nodes(&catalog)
            .await?
            .into_iter()
            .find(|status| status.node == node)
            .ok_or_else(|| AppError::NotFound(format!("no node {node} on cluster {}", reader.cluster())))?;
        let events = reader.node_events(window, Some(node)).await?;
        let tor = self.reporter().tors_of(reader.cluster().as_str(), &[node.to_string()]).into_iter().next();
        let settings = &self.inner.readings;
        let readings = match &settings.vm {
            None => Err("no metrics source is configured".to_string()),
            Some(vm) => {
                read_node(vm, &settings.catalog, node, tor.as_deref(), (window.start(), window.end()), settings.timeout)
                    .await
            }
        };
        let (metrics, metrics_message, readings) = match readings {
            Ok(readings) => (wire::ValuesState::Ok, None, readings),
            Err(message) => (wire::ValuesState::Unavailable, Some(message), NodeReadings::default()),
        };
        let facts = NodeFacts {
            state: status.state.clone(),
            reason: status.reason.clone(),
            gpus: readings.gpus.values().map(|(facts, _)| facts.clone()).collect(),
            unhealthy_links: readings
                .links
                .iter()
                .filter(|link| link.unhealthy)
                .map(|link| format!("{} → {}", link.source_tor, link.target_tor))
                .collect(),
        };
        let mut faults = faults_of(&readings, &events);
        let faults_truncated = faults.len() > MAX_FAULTS;
        faults.truncate(MAX_FAULTS);
        self.jobs_at_faults(reader, &scope, &catalog, node, &mut faults).await?;
        let staff = scope == ViewerScope::Staff;
        let NodeReadings { gpus, temperature, power, links, .. } = readings;
        Ok(wire::NodePage {
            cluster: reader.cluster().to_string(),
            node: node.to_string(),
            state: status.state.clone(),
            reason: status.reason.clone(),
            reason_since: crate::domain::time::epoch(status.reason_since),
            running_jobs: status.running_jobs,
            health: health_wire(assess(&facts)),
            start: window.start(),
            end: window.end(),
            events: events.iter().map(wire_map::node_event).collect(),
            metrics,
            metrics_message,
            gpus: gpus.into_values().map(|(_, counters)| counters).collect(),
            temperature: if staff { temperature } else { Vec::new() },
            power: if staff { power } else { Vec::new() },
            timelines_hidden: !staff,
            tor,
            links,
            faults,
            faults_truncated,
        })
    }

    /// Every node's health over `[start, end)` (default: the last 24 hours), for the grid's badges:
    /// its state in slurmdbd and its GPUs' faults in VictoriaMetrics (without them, the state alone).
    pub async fn nodes_health(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        window: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    ) -> Result<wire::NodesHealth, AppError> {
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        // The default day ending now is read to its minute, shared with every viewer of that minute.
        let shared_end = window.0.is_none().then(|| HealthCache::recent_end(window.1, Utc::now())).flatten();
        let window = window_of(self, &scope, (window.0, shared_end.or(window.1)), Duration::hours(24))?;
        let catalog = reader.tres_catalog().await?;
        let mut statuses = reader.nodes(&catalog).await?;
        // A past moment shows each node as it was then: its drain or down event covering the moment, or
        // none, never a state that came later.
        if window.end() < Utc::now() - Duration::minutes(2) {
            let moment = TimeWindow::new(window.end() - Duration::seconds(1), window.end())
                .map_err(|e| AppError::Internal(format!("the moment's window: {e}")))?;
            let events = reader.node_events(moment, None).await?;
            for status in &mut statuses {
                let covering = events.iter().rfind(|event| {
                    event.node == status.node
                        && i64::try_from(event.time_start).unwrap_or(i64::MAX) <= window.end().timestamp()
                        && (event.time_end == 0
                            || i64::try_from(event.time_end).unwrap_or(0) > window.end().timestamp())
                });
                match covering {
                    Some(event) => {
                        status.state = NodeState::from_raw(event.state).name();
                        status.reason = Some(event.reason.clone());
                    }
                    None if status.reason.is_some() => {
                        status.state = "IDLE".to_string();
                        status.reason = None;
                    }
                    None => {}
                }
            }
        }
        let names: Vec<String> = statuses.iter().map(|status| status.node.clone()).collect();
        let settings = &self.inner.readings;
        let span = (window.start(), window.end());
        let read = match &settings.vm {
            None => Err("no metrics source is configured".to_string()),
            Some(vm) if shared_end.is_some() => {
                let read = read_nodes(vm, &settings.catalog, &names, span, settings.timeout);
                self.inner.health.get_or_read(reader.cluster().as_str(), span, read).await
            }
            Some(vm) => read_nodes(vm, &settings.catalog, &names, span, settings.timeout).await,
        };
        let (metrics, mut gpus) = match read {
            Ok(gpus) => (wire::ValuesState::Ok, gpus),
            Err(_) => (wire::ValuesState::Unavailable, BTreeMap::new()),
        };
        let nodes = statuses
            .into_iter()
            .map(|status| {
                let facts = NodeFacts {
                    gpus: gpus.remove(&status.node).unwrap_or_default(),
                    state: status.state,
                    reason: status.reason,
                    unhealthy_links: Vec::new(),
                };
                wire::NodeHealthItem { node: status.node, health: health_wire(assess(&facts)) }
            })
            .collect();
        Ok(wire::NodesHealth { start: window.start(), end: window.end(), metrics, nodes })
    }

    /// Fills each fault's jobs: the jobs on `node` running then (or ended just before), named where
    /// `scope` may see them, with their archived verdicts; the others counted. One read of the node's
    /// jobs across the faults' span.
    async fn jobs_at_faults(
        &self,
        reader: &crate::sources::slurmdbd::SlurmDbd,
        scope: &ViewerScope,
        catalog: &crate::domain::tres::TresCatalog,
        node: &str,
        faults: &mut [wire::NodeFault],
    ) -> Result<(), AppError> {
        let (Some(first), Some(last)) = (faults.iter().map(|f| f.from).min(), faults.iter().map(|f| f.at).max()) else {
            return Ok(());
        };
        let span = TimeWindow::new(first - Duration::seconds(FAULT_MARGIN_S), last + Duration::seconds(1))
            .map_err(|e| AppError::Internal(format!("faults' span: {e}")))?;
        let filter = JobFilter { node: Some(node.to_string()), ..JobFilter::default() };
        // Read as staff, narrowed here: the viewer's own jobs by name, every other job only counted.
        let mut jobs: Vec<JobRecord> = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = reader.jobs_in_window(&ViewerScope::Staff, span, &filter, catalog, cursor, 5000).await?;
            jobs.extend(
                page.into_iter().filter(|job| job.time_start > 0 && job.nodes.hosts().iter().any(|h| h == node)),
            );
            match next {
                Some(next) if jobs.len() < MAX_FAULT_JOBS => cursor = Some(next),
                _ => break,
            }
        }
        let visible: Vec<&JobRecord> = jobs.iter().filter(|job| scope.can_see(&job.user, &job.account)).collect();
        let digests = match self.store() {
            Some(store) => {
                let keys: Vec<(u32, u64)> = visible.iter().map(|job| (job.identity.id_job, job.time_submit)).collect();
                store.digests_among(reader.cluster(), &keys).await.unwrap_or_else(|error| {
                    tracing::warn!(%error, "archived verdicts unavailable; faults' jobs listed without them");
                    BTreeMap::new()
                })
            }
            None => BTreeMap::new(),
        };
        for fault in faults.iter_mut() {
            let at = u64::try_from(fault.at.timestamp()).unwrap_or(0);
            let from = u64::try_from(fault.from.timestamp()).unwrap_or(0);
            // Running at some moment between when the fault may first have shown and when it was seen.
            let then = |job: &JobRecord| {
                job.time_start <= at && (job.time_end == 0 || job.time_end + FAULT_MARGIN_S as u64 >= from)
            };
            for job in jobs.iter().filter(|job| then(job)) {
                if !scope.can_see(&job.user, &job.account) {
                    fault.other_jobs += 1;
                    continue;
                }
                let digest = digests.get(&(job.identity.id_job, job.time_submit));
                fault.jobs.push(wire::FaultJob {
                    job_id: job.identity.id_job,
                    job_name: job.job_name.clone(),
                    user: job.user.clone(),
                    account: job.account.clone(),
                    state: job.state.name().to_string(),
                    blame: digest.and_then(|digest| digest.blame.as_deref()).and_then(blame_named),
                });
            }
        }
        Ok(())
    }
}

/// The faults among a node's readings and events, newest first: each XID code as it first showed,
/// each rise of double-bit ECC errors, and each drain or down.
fn faults_of(readings: &NodeReadings, events: &[crate::sources::slurmdbd::NodeEventRecord]) -> Vec<wire::NodeFault> {
    let at = |seconds: i64| DateTime::from_timestamp(seconds, 0).unwrap_or_default();
    let step = Duration::seconds(readings.step_s);
    let fault =
        |at: DateTime<Utc>, source, gpu: Option<u16>, detail: String, strength: blame::Strength| wire::NodeFault {
            // A reading's fault showed within the step before it; a node event's time is exact.
            from: if gpu.is_some() { at - step } else { at },
            at,
            source,
            gpu,
            detail,
            strength: strength.wire(),
            jobs: Vec::new(),
            other_jobs: 0,
        };
    let mut faults: Vec<wire::NodeFault> = Vec::new();
    for &(seconds, gpu, code) in &readings.xid_faults {
        let (strength, meaning) = blame::xid_strength(code);
        let mut xid =
            fault(at(seconds), wire::EvidenceSource::Xid, Some(gpu), format!("XID {code}: {meaning}"), strength);
        // Dated by its own first sample (`node_metrics::date_xids`): the moment itself.
        xid.from = xid.at;
        faults.push(xid);
    }
    for &(seconds, gpu, errors) in &readings.dbe_faults {
        let detail = format!("{errors:.0} uncorrectable (double-bit) ECC errors");
        // Dated by the counter's own first rise (`node_metrics::date_onsets`).
        let mut ecc = fault(at(seconds), wire::EvidenceSource::Ecc, Some(gpu), detail, blame::Strength::Strong);
        ecc.from = ecc.at;
        faults.push(ecc);
    }
    for event in events {
        let state = NodeState::from_raw(event.state);
        let name = state.name();
        let down = name.split('+').any(|flag| flag == "DOWN");
        let seconds = i64::try_from(event.time_start).unwrap_or(0);
        let detail = format!("{name}: {}", event.reason);
        let strength = node_event_strength(&event.reason, down);
        faults.push(fault(at(seconds), wire::EvidenceSource::NodeEvent, None, detail, strength));
    }
    faults.sort_by_key(|fault| std::cmp::Reverse(fault.at));
    faults
}

fn health_wire(health: Health) -> wire::NodeHealth {
    wire::NodeHealth { level: health.level, reasons: health.reasons }
}
