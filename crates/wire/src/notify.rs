//! A signed-in user's notifications and their settings (`/api/v1/me/notifications`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::NotifyRule;

/// The user's notifications: the notices about their own jobs, newest first, and each rule's setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MyNotifications {
    /// Where their e-mails go; absent where the site sends users no e-mail.
    pub email: Option<String>,
    pub notifications: Vec<Notification>,
    pub rules: Vec<NotificationRule>,
}

/// One notice about one of the user's jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Notification {
    pub rule: NotifyRule,
    pub cluster: String,
    pub title: String,
    pub body: String,
    /// The page with the evidence.
    pub link: String,
    pub created_at: DateTime<Utc>,
    /// Whether an e-mail of it reached the user (false: opted out, no address, or not sent yet).
    pub emailed_to_you: bool,
}

/// A rule as the user may set it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotificationRule {
    pub rule: NotifyRule,
    pub description: String,
    /// The user's own choice (true unless they opted out).
    pub enabled: bool,
    /// Whether the site runs the rule at all.
    pub on_at_site: bool,
}

/// `PUT /api/v1/me/notifications/rules/{rule}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NotificationRuleUpdate {
    pub enabled: bool,
}
