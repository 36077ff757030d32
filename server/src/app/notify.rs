//! Notifications: each round (every `[notify] interval_s`, one replica at a time under the store's
//! `notifier` lease) reads the facts, turns them into notices by `domain/notify.rs`'s rules, records
//! one delivery per channel and address (before anything is sent, so a restart loses nothing, and
//! once: the store's unique key), then sends what is due, within each address's hourly rate, retrying
//! failures with back-off. A user sees the notices about their own jobs and opts out of a rule for
//! themselves (`my_notifications`, `set_rule`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use slurmlens_slurm::gpus::exact_gpus_per_node;
use slurmlens_wire as wire;

use super::report::LiveJob;
use super::{App, AppError, Viewer};
use crate::config::NotifyConfig;
use crate::domain::ids::JobSelector;
use crate::domain::job::TimeWindow;
use crate::domain::notify::{
    self, Audience, FailedJob, NodeFaults, Notice, Rule, RunningJob, Thresholds, user_address, webhook_payload,
};
use crate::domain::report::HeldJob;
use crate::domain::scope::ViewerScope;
use crate::domain::state::{JobStateBase, NodeState};
use crate::domain::time::epoch;
use crate::sources::channels::{ChannelError, Mailer, Webhooks};
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::notifications::{Delivery, NewDelivery};

/// How long one message may take to go out.
const SEND_TIMEOUT: StdDuration = StdDuration::from_secs(15);
/// Deliveries sent per round at most (the rest wait for the next).
const DUE_PER_ROUND: u32 = 200;
/// The store's lease that keeps rounds to one replica at a time.
const LEASE: &str = "notifier";

/// A webhook as the notifier uses it.
#[derive(Debug, Clone)]
struct Hook {
    name: String,
    url: String,
    rules: Vec<Rule>,
}

/// The notifier: the application it reads through and its channels.
#[derive(Clone)]
pub struct Notifier {
    app: App,
    inner: Arc<Settings>,
}

struct Settings {
    rules: Vec<Rule>,
    thresholds: Thresholds,
    public_url: String,
    user_email: Option<String>,
    staff_emails: Vec<String>,
    hooks: Vec<Hook>,
    mailer: Option<Mailer>,
    webhooks: Webhooks,
    failure_max_age: Duration,
    max_per_hour: u32,
    max_attempts: u32,
}

/// What one round did, for the log and the tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundOutcome {
    /// Another replica held the lease: nothing was done.
    pub skipped: bool,
    pub notices: usize,
    pub recorded: usize,
    pub sent: usize,
    pub failed: usize,
    pub postponed: usize,
}

impl Notifier {
    /// The notifier over `app` as `[notify]` configures it. A malformed relay URL or sender is an error.
    pub fn new(app: App, config: &NotifyConfig, public_url: &str) -> Result<Self, String> {
        let mailer = config
            .smtp_url
            .as_deref()
            .map(|url| Mailer::new(url, &config.from, SEND_TIMEOUT))
            .transpose()
            .map_err(|e| e.to_string())?;
        let settings = Settings {
            rules: config.rules.clone(),
            thresholds: Thresholds {
                idle_util_below_pct: config.idle_util_below_pct,
                idle_for: Duration::seconds(i64::try_from(config.idle_for_s).unwrap_or(i64::MAX / 2)),
                node_faults: config.node_faults,
                node_fault_period: Duration::days(i64::from(config.node_fault_days)),
            },
            public_url: public_url.to_string(),
            user_email: config.user_email.clone(),
            staff_emails: config.staff_emails.clone(),
            hooks: config
                .webhooks
                .iter()
                .map(|hook| Hook { name: hook.name.clone(), url: hook.url.clone(), rules: hook.rules.clone() })
                .collect(),
            mailer,
            webhooks: Webhooks::new(SEND_TIMEOUT).map_err(|e| e.to_string())?,
            failure_max_age: Duration::hours(i64::try_from(config.failure_max_age_h).unwrap_or(24)),
            max_per_hour: config.max_per_hour,
            max_attempts: config.max_attempts.max(1),
        };
        Ok(Self { app, inner: Arc::new(settings) })
    }

    /// One round at `now`: evaluate, record, deliver. Without a store there is nothing to keep
    /// deliveries in, so nothing is done.
    pub async fn round(&self, now: DateTime<Utc>) -> Result<RoundOutcome, AppError> {
        let store = self.app.require_store()?;
        // Without a relay or a webhook nothing could be sent: the facts are not even read.
        if self.inner.mailer.is_none() && self.inner.hooks.is_empty() {
            return Ok(RoundOutcome::default());
        }
        let Some(lease) = store.try_lease(LEASE).await? else {
            return Ok(RoundOutcome { skipped: true, ..RoundOutcome::default() });
        };
        let notices = self.evaluate(now).await;
        let mut outcome = RoundOutcome { notices: notices.len(), ..RoundOutcome::default() };
        for notice in &notices {
            outcome.recorded += self.record(notice, now).await?;
        }
        self.deliver_due(now, &mut outcome).await?;
        lease.release().await?;
        Ok(outcome)
    }

    /// Every rule that is on, on every cluster; a rule whose facts are unavailable is logged and
    /// skipped this round.
    async fn evaluate(&self, now: DateTime<Utc>) -> Vec<Notice> {
        let mut notices = Vec::new();
        let on = |rule| self.inner.rules.contains(&rule);
        for reader in self.app.readers() {
            if on(Rule::IdleGpus) {
                match self.idle_jobs(reader, now).await {
                    Ok(found) => notices.extend(found),
                    Err(error) => tracing::warn!(%error, cluster = %reader.cluster(), "idle-GPU rule skipped"),
                }
            }
            if on(Rule::NodeFaulting) {
                match self.faulting_nodes(reader, now).await {
                    Ok(found) => notices.extend(found),
                    Err(error) => tracing::warn!(%error, cluster = %reader.cluster(), "faulting-node rule skipped"),
                }
            }
            if on(Rule::MonthlyUsage) {
                match self.monthly_reports(reader, now).await {
                    Ok(found) => notices.extend(found),
                    Err(error) => tracing::warn!(%error, cluster = %reader.cluster(), "monthly reports skipped"),
                }
            }
        }
        if on(Rule::InfrastructureFailure) {
            match self.infrastructure_failures(now).await {
                Ok(found) => notices.extend(found),
                Err(error) => tracing::warn!(%error, "infrastructure-failure rule skipped"),
            }
        }
        notices
    }

    /// Running GPU jobs that ran the whole idle period and whose GPUs' mean over it is under the
    /// threshold (one batched query for the cluster, as the listing's live means).
    async fn idle_jobs(&self, reader: &SlurmDbd, now: DateTime<Utc>) -> Result<Vec<Notice>, AppError> {
        let settings = &self.inner;
        let catalog = reader.tres_catalog().await?;
        let window =
            TimeWindow::new(now, now + Duration::seconds(1)).map_err(|_| AppError::Internal("window".into()))?;
        let since = now - settings.thresholds.idle_for;
        let running: Vec<_> = reader
            .running_at(&ViewerScope::Staff, window, &catalog)
            .await?
            .into_iter()
            .filter(|record| record.state.base() == JobStateBase::Running && catalog.gpus(&record.tres_alloc) > 0)
            .filter(|record| epoch(record.time_start).is_some_and(|start| start <= since))
            .collect();
        if running.is_empty() {
            return Ok(Vec::new());
        }
        let mut recorded = self.app.recorded_gpus(reader, &running).await;
        let live: Vec<LiveJob> = running
            .iter()
            .map(|record| {
                let nodes = record.nodes.hosts().to_vec();
                let held = HeldJob {
                    gpus_per_node: exact_gpus_per_node(catalog.gpus(&record.tres_alloc), nodes.len()),
                    nodes,
                    recorded: recorded.remove(&record.identity.id_job).unwrap_or_default(),
                };
                // The means "so far" from `since`: the last idle period.
                LiveJob { job_id: record.identity.id_job, start: since, held }
            })
            .collect();
        let means = self
            .app
            .reporter()
            .live_means(&live, now)
            .await
            .map_err(|cause| AppError::Unavailable { service: "VictoriaMetrics", cause })?;
        Ok(running
            .iter()
            .filter_map(|record| {
                let mean = means.get(&record.identity.id_job)?.gpu_util?;
                let job = RunningJob {
                    cluster: reader.cluster().to_string(),
                    job_id: record.identity.id_job,
                    time_submit: record.time_submit,
                    user: record.user.clone(),
                    name: record.job_name.clone(),
                    gpus: catalog.gpus(&record.tres_alloc),
                    start: epoch(record.time_start)?,
                };
                notify::idle_notice(&job, mean, &settings.thresholds, &settings.public_url, now)
            })
            .collect())
    }

    /// Nodes drained or down at least `node_faults` times within the period (slurmdbd's events).
    async fn faulting_nodes(&self, reader: &SlurmDbd, now: DateTime<Utc>) -> Result<Vec<Notice>, AppError> {
        let settings = &self.inner;
        let window = TimeWindow::new(now - settings.thresholds.node_fault_period, now)
            .map_err(|_| AppError::Internal("the fault period is empty".into()))?;
        let mut by_node: BTreeMap<String, BTreeSet<(u64, String)>> = BTreeMap::new();
        for event in reader.node_events(window, None).await? {
            let state = NodeState::from_raw(event.state);
            let started_inside = epoch(event.time_start).is_some_and(|start| start >= window.start());
            if (state.is_drain() || state.is_down()) && started_inside {
                by_node.entry(event.node).or_default().insert((event.time_start, event.reason));
            }
        }
        // Staff hear of a node at most once a period: not again while its last notice is that recent.
        let store = self.app.require_store()?;
        let told: BTreeSet<String> = store
            .subjects_since(Rule::NodeFaulting, now - settings.thresholds.node_fault_period)
            .await?
            .iter()
            .map(|key| notify::node_of_subject(key).to_string())
            .collect();
        let cluster = reader.cluster().to_string();
        by_node.retain(|node, _| !told.contains(&format!("{cluster}/{node}")));
        Ok(by_node
            .into_iter()
            .filter_map(|(node, events)| {
                let faults = NodeFaults {
                    cluster: reader.cluster().to_string(),
                    node,
                    events: events.into_iter().filter_map(|(at, reason)| Some((epoch(at)?, reason))).collect(),
                };
                notify::node_notice(&faults, &settings.thresholds, &settings.public_url, now)
            })
            .collect())
    }

    /// Each coordinator's report of the previous calendar month, made once: the usage of the accounts
    /// they coordinate, read as they would read it (`/api/v1/usage?by=account` as that coordinator).
    async fn monthly_reports(&self, reader: &SlurmDbd, now: DateTime<Utc>) -> Result<Vec<Notice>, AppError> {
        let settings = &self.inner;
        let store = self.app.require_store()?;
        let month = notify::previous_month(now);
        let cluster = reader.cluster().to_string();
        let coordinators = reader.coordinators().await?;
        let keys: Vec<String> =
            coordinators.iter().map(|user| format!("{cluster}/{user}/{}", month.0.format("%Y-%m"))).collect();
        let known = store.known_subjects(Rule::MonthlyUsage, &keys).await?;
        let window = TimeWindow::new(month.0, month.1).map_err(|_| AppError::Internal("an empty month".into()))?;
        let mut notices = Vec::new();
        for (user, key) in coordinators.iter().zip(keys) {
            // Made only for someone it can reach, once: a month of usage is a heavy read.
            let reachable = settings.mailer.is_some()
                && user_address(settings.user_email.as_deref(), user).is_some()
                && !store.opt_outs(user).await?.contains(&Rule::MonthlyUsage);
            if known.contains(&key) || !reachable {
                continue;
            }
            let viewer = Viewer::Signed(super::Identity { user: user.clone(), groups: Vec::new(), token: None });
            let ViewerScope::User { coordinated_accounts, .. } = self.app.scope(&viewer, reader).await? else {
                continue;
            };
            let usage = self.app.usage(&viewer, Some(&cluster), window, wire::UsageGrouping::Account, None).await?;
            let rows: Vec<wire::UsageRow> =
                usage.rows.into_iter().filter(|row| coordinated_accounts.contains(&row.name)).collect();
            notices.push(notify::monthly_notice(user, &cluster, month, &rows, &settings.public_url));
        }
        Ok(notices)
    }

    /// Jobs whose archived report blames the infrastructure and that ended within the rule's age,
    /// each looked up in slurmdbd once (the ones already recorded are not read again).
    async fn infrastructure_failures(&self, now: DateTime<Utc>) -> Result<Vec<Notice>, AppError> {
        let settings = &self.inner;
        let store = self.app.require_store()?;
        let since = now - settings.failure_max_age;
        let blamed = store.infrastructure_blamed_since(since, 1000).await?;
        let keys: Vec<String> =
            blamed.iter().map(|(cluster, id, submit, _)| format!("{cluster}/{id}/{submit}")).collect();
        let known = store.known_subjects(Rule::InfrastructureFailure, &keys).await?;
        let mut notices = Vec::new();
        for ((cluster, job_id, time_submit, _), key) in blamed.into_iter().zip(keys) {
            if known.contains(&key) {
                continue;
            }
            let Ok(reader) = self.app.cluster(Some(&cluster)) else { continue };
            let Some((record, _)) = reader.job(&ViewerScope::Staff, JobSelector::Id(job_id)).await? else { continue };
            let ended_lately = epoch(record.time_end).is_some_and(|end| end >= since);
            if record.time_submit != time_submit || !ended_lately {
                continue;
            }
            let job = FailedJob {
                cluster,
                job_id,
                time_submit,
                user: record.user.clone(),
                name: record.job_name.clone(),
                state: record.state.name().to_string(),
                nodes: record.node_list.clone(),
            };
            notices.push(notify::failure_notice(&job, &settings.public_url));
        }
        Ok(notices)
    }

    /// Records `notice`'s deliveries: the user by e-mail (unless they opted out), staff by e-mail, and
    /// every webhook that hears the rule. How many were new.
    async fn record(&self, notice: &Notice, now: DateTime<Utc>) -> Result<usize, AppError> {
        let settings = &self.inner;
        let store = self.app.require_store()?;
        let (owner, staff_hear) = match &notice.audience {
            Audience::UserAndStaff(user) => (Some(user.as_str()), true),
            Audience::User(user) => (Some(user.as_str()), false),
            Audience::Staff => (None, true),
        };
        let mut targets: Vec<(&str, String)> = Vec::new();
        let mail = settings.mailer.is_some();
        if let Some(user) = owner.filter(|_| mail && notify::tells_users(notice.rule))
            && let Some(address) = user_address(settings.user_email.as_deref(), user)
            && !store.opt_outs(user).await?.contains(&notice.rule)
        {
            targets.push(("email", address));
        }
        if staff_hear {
            targets.extend(settings.staff_emails.iter().filter(|_| mail).map(|address| ("email", address.clone())));
            targets.extend(
                settings
                    .hooks
                    .iter()
                    .filter(|hook| hook.rules.is_empty() || hook.rules.contains(&notice.rule))
                    .map(|hook| ("webhook", hook.name.clone())),
            );
        }
        let mut recorded = 0;
        for (channel, address) in &targets {
            let delivery = NewDelivery {
                rule: notice.rule,
                subject_key: &notice.subject_key,
                channel,
                address,
                user: owner,
                cluster: &notice.cluster,
                title: &notice.title,
                body: &notice.body,
                link: &notice.link,
                now,
            };
            recorded += usize::from(store.record_delivery(&delivery).await?);
        }
        Ok(recorded)
    }

    /// Sends what is due, each address within its hourly rate.
    async fn deliver_due(&self, now: DateTime<Utc>, outcome: &mut RoundOutcome) -> Result<(), AppError> {
        let settings = &self.inner;
        let store = self.app.require_store()?;
        for delivery in store.due_deliveries(now, DUE_PER_ROUND).await? {
            let sent = store.sent_to_since(&delivery.address, now - Duration::hours(1)).await?;
            if !notify::within_rate(sent, settings.max_per_hour) {
                store.postpone(delivery.id, now + Duration::minutes(10)).await?;
                outcome.postponed += 1;
                continue;
            }
            match self.send(&delivery).await {
                Ok(()) => {
                    store.mark_sent(delivery.id, now).await?;
                    outcome.sent += 1;
                }
                Err(error) => {
                    let next = notify::next_try(delivery.attempts + 1, settings.max_attempts, now);
                    tracing::warn!(%error, id = delivery.id, channel = %delivery.channel, "a notification did not go out");
                    store.mark_failed(delivery.id, &error.0, now, next).await?;
                    outcome.failed += 1;
                }
            }
        }
        Ok(())
    }

    async fn send(&self, delivery: &Delivery) -> Result<(), ChannelError> {
        let settings = &self.inner;
        match delivery.channel.as_str() {
            "email" => {
                let mailer = settings.mailer.as_ref().ok_or_else(|| ChannelError("no [notify] smtp_url".into()))?;
                let body = format!(
                    "{}\n\nThe evidence: {}\n\n-- \nslurmlens. Your notification settings: {}/notifications\n",
                    delivery.body,
                    delivery.link,
                    settings.public_url.trim_end_matches('/')
                );
                mailer.send(&delivery.address, &delivery.title, &body).await
            }
            "webhook" => {
                let hook = settings
                    .hooks
                    .iter()
                    .find(|hook| hook.name == delivery.address)
                    .ok_or_else(|| ChannelError(format!("no webhook {} is configured now", delivery.address)))?;
                let rule = delivery.rule().map_err(|e| ChannelError(e.to_string()))?;
                let payload = webhook_payload(rule, &delivery.cluster, &delivery.title, &delivery.body, &delivery.link);
                settings.webhooks.post(&hook.url, &payload).await
            }
            other => Err(ChannelError(format!("unknown channel {other}"))),
        }
    }
}

/// How many notices about their own jobs a user's list shows.
const LISTED: u32 = 200;

impl App {
    /// The signed-in viewer's notifications (the notices about their jobs, newest first, and whether
    /// each reached them) and their rules' settings.
    pub async fn my_notifications(&self, viewer: &Viewer) -> Result<wire::MyNotifications, AppError> {
        let user = signed_user(viewer)?;
        let config = self.notify_config();
        let store = self.require_store()?;
        let address = user_address(config.user_email.as_deref(), user);
        // Keyed by the rule's word, so that notices of one moment keep the order they always had.
        let mut notices: BTreeMap<(&str, String), wire::Notification> = BTreeMap::new();
        for delivery in store.user_notifications(user, LISTED).await? {
            let rule = match delivery.rule() {
                Ok(rule) => rule,
                Err(unknown) => {
                    tracing::warn!(id = delivery.id, %unknown, "a stored notification is left out of the list");
                    continue;
                }
            };
            let to_you = address.as_deref() == Some(delivery.address.as_str());
            let entry =
                notices.entry((rule.as_str(), delivery.subject_key.clone())).or_insert_with(|| wire::Notification {
                    rule,
                    cluster: delivery.cluster.clone(),
                    title: delivery.title.clone(),
                    body: delivery.body.clone(),
                    link: delivery.link.clone(),
                    created_at: delivery.created_at,
                    emailed_to_you: false,
                });
            entry.emailed_to_you |= to_you && delivery.sent_at.is_some();
        }
        let mut notifications: Vec<wire::Notification> = notices.into_values().collect();
        notifications.sort_by_key(|notice| std::cmp::Reverse(notice.created_at));
        let opted_out = store.opt_outs(user).await?;
        let rules = Rule::ALL
            .iter()
            .copied()
            .filter(|&rule| notify::tells_users(rule))
            .map(|rule| wire::NotificationRule {
                rule,
                description: notify::describe(rule).to_string(),
                enabled: !opted_out.contains(&rule),
                on_at_site: config.enabled && config.rules.contains(&rule),
            })
            .collect();
        Ok(wire::MyNotifications { email: address.filter(|_| config.smtp_url.is_some()), notifications, rules })
    }

    /// Turns `rule` on or off for the signed-in viewer (their e-mails only; staff still hear).
    pub async fn set_notification_rule(&self, viewer: &Viewer, rule: &str, enabled: bool) -> Result<(), AppError> {
        let user = signed_user(viewer)?;
        let rule = notify::parse_rule(rule).map_err(|e| AppError::invalid("rule", e.to_string()))?;
        if !notify::tells_users(rule) {
            return Err(AppError::invalid(
                "rule",
                format!("{rule} goes to staff only; there is nothing to opt out of"),
            ));
        }
        self.require_store()?.set_opt_out(user, rule, enabled, Utc::now()).await?;
        Ok(())
    }
}

fn signed_user(viewer: &Viewer) -> Result<&str, AppError> {
    viewer.identity().map(|identity| identity.user.as_str()).ok_or_else(|| {
        AppError::Unauthorized("notifications are a signed-in user's own: sign in, or send a personal token".into())
    })
}
