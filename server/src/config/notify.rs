//! `[notify]`: the notifier's rules, channels and limits.

use serde::{Deserialize, Serialize};

/// `[notify]`: what the notifier (`app/notify.rs`) tells, to whom and how often. Off unless `enabled`;
/// with it on, each replica evaluates the rules every `interval_s`, one at a time (a lease in the store).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotifyConfig {
    pub enabled: bool,
    /// Seconds between the notifier's rounds.
    pub interval_s: u64,
    /// The rules on (`idle_gpus`, `infrastructure_failure`, `node_faulting`, `monthly_usage`); all by default.
    pub rules: Vec<crate::domain::notify::Rule>,
    /// The site's SMTP relay: `smtp://relay:25` (plain), `smtp://relay:587?tls=required` (STARTTLS),
    /// `smtps://user:password@relay:465`. None: no e-mail.
    pub smtp_url: Option<String>,
    /// The sender of every e-mail.
    pub from: String,
    /// A user's address from their Slurm user name: `{user}@example.org`. None: users get no e-mail.
    pub user_email: Option<String>,
    /// Staff's addresses: every notice reaches them.
    pub staff_emails: Vec<String>,
    /// Incoming webhooks (Slack, Mattermost or any JSON receiver), e.g. the operations channel.
    pub webhooks: Vec<WebhookConfig>,
    /// `idle_gpus`: a running job whose GPUs were under this mean utilisation (percent) ...
    pub idle_util_below_pct: f64,
    /// ... over the last this many seconds (a job younger than that is not judged).
    pub idle_for_s: u64,
    /// `node_faulting`: this many drain or down events of one node ...
    pub node_faults: usize,
    /// ... within this many days.
    pub node_fault_days: u32,
    /// `infrastructure_failure`: only jobs that ended within this many hours (a fresh install's archive
    /// of older jobs tells nobody).
    pub failure_max_age_h: u64,
    /// At most this many deliveries an hour to one address; more wait for the next hour.
    pub max_per_hour: u32,
    /// A delivery is tried this many times (backing off from a minute to six hours), then given up.
    pub max_attempts: u32,
}

/// One incoming webhook.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// How notifications name it (`ops-slack`).
    pub name: String,
    pub url: String,
    /// The rules it hears; empty: every rule.
    #[serde(default)]
    pub rules: Vec<crate::domain::notify::Rule>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            interval_s: 60,
            rules: crate::domain::notify::Rule::ALL.to_vec(),
            smtp_url: None,
            from: "slurmlens <slurmlens@localhost>".into(),
            user_email: None,
            staff_emails: Vec::new(),
            webhooks: Vec::new(),
            idle_util_below_pct: 5.0,
            idle_for_s: 1800,
            node_faults: 3,
            node_fault_days: 7,
            failure_max_age_h: 24,
            max_per_hour: 10,
            max_attempts: 8,
        }
    }
}

impl NotifyConfig {
    pub(super) fn validate(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.interval_s == 0 {
            return Err("[notify] interval_s must be at least 1".into());
        }
        if !(0.0..=100.0).contains(&self.idle_util_below_pct) {
            return Err("[notify] idle_util_below_pct is a percentage: 0 to 100".into());
        }
        if self.user_email.as_deref().is_some_and(|template| !template.contains("{user}") || !template.contains('@')) {
            return Err(
                "[notify] user_email must be an address template with {user}, e.g. \"{user}@example.org\"".into()
            );
        }
        if let Some(url) = &self.smtp_url
            && !(url.starts_with("smtp://") || url.starts_with("smtps://"))
        {
            return Err(format!(
                "[notify] smtp_url must start with smtp:// or smtps://, not {}",
                super::redact_url(url)
            ));
        }
        for webhook in &self.webhooks {
            if !(webhook.url.starts_with("http://") || webhook.url.starts_with("https://")) {
                return Err(format!("[notify] webhook {} needs an http(s) url", webhook.name));
            }
        }
        let names: std::collections::BTreeSet<&str> =
            self.webhooks.iter().map(|webhook| webhook.name.as_str()).collect();
        if names.len() != self.webhooks.len() {
            return Err("[notify] webhooks need distinct names".into());
        }
        Ok(())
    }
}
