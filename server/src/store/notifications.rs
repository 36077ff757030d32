//! Notifications (`notifications`: one row per delivery, written before it is sent) and users'
//! opt-outs (`notification_optouts`).

use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use crate::domain::notify::{self, Rule, UnknownRule};

/// One delivery to record: a notice, a channel and an address.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    pub rule: Rule,
    pub subject_key: &'a str,
    pub channel: &'a str,
    pub address: &'a str,
    pub user: Option<&'a str>,
    pub cluster: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub link: &'a str,
    pub now: DateTime<Utc>,
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Delivery {
    pub id: u64,
    /// The rule's word as stored: read through [`Delivery::rule`].
    #[sqlx(rename = "rule")]
    rule_word: String,
    pub subject_key: String,
    pub channel: String,
    pub address: String,
    pub user: Option<String>,
    pub cluster: String,
    pub title: String,
    pub body: String,
    pub link: String,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub failed_at: Option<DateTime<Utc>>,
    pub attempts: u32,
    pub last_error: Option<String>,
}

impl Delivery {
    /// The rule that made the delivery; a word this version does not know (a newer version's row) is an
    /// error the caller reports.
    pub fn rule(&self) -> Result<Rule, UnknownRule> {
        notify::parse_rule(&self.rule_word)
    }
}

const COLUMNS: &str = "id, rule, subject_key, channel, address, user, cluster, title, body, link, created_at, \
     sent_at, failed_at, attempts, last_error";

/// Column widths of `notifications` (characters), so a long title or error is cut, never refused.
const TITLE_CHARS: usize = 255;
const ERROR_CHARS: usize = 500;
const LINK_CHARS: usize = 512;

fn cut(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

impl Store {
    /// Records a delivery unless the same one (rule, subject, channel, address) is already recorded;
    /// whether it was new.
    pub async fn record_delivery(&self, delivery: &NewDelivery<'_>) -> Result<bool, StoreError> {
        let result = sqlx::query(
            "INSERT IGNORE INTO notifications (rule, subject_key, channel, address, user, cluster, title, body, link, \
             created_at, next_try_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(delivery.rule.as_str())
        .bind(delivery.subject_key)
        .bind(delivery.channel)
        .bind(delivery.address)
        .bind(delivery.user)
        .bind(delivery.cluster)
        .bind(cut(delivery.title, TITLE_CHARS))
        .bind(delivery.body)
        .bind(cut(delivery.link, LINK_CHARS))
        .bind(delivery.now)
        .bind(delivery.now)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Deliveries due at `now` (not sent, not given up, their next try reached), oldest first.
    pub async fn due_deliveries(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<Delivery>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM notifications WHERE sent_at IS NULL AND failed_at IS NULL AND next_try_at <= ? \
             ORDER BY next_try_at, id LIMIT ?"
        );
        Ok(sqlx::query_as(&sql).bind(now).bind(limit).fetch_all(&self.pool).await?)
    }

    /// How many deliveries went to `address` since `since`.
    pub async fn sent_to_since(&self, address: &str, since: DateTime<Utc>) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM notifications WHERE address = ? AND sent_at >= ?")
            .bind(address)
            .bind(since)
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Marks a delivery sent.
    pub async fn mark_sent(&self, id: u64, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query("UPDATE notifications SET sent_at = ?, attempts = attempts + 1, last_error = NULL WHERE id = ?")
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a failed try: tried again at `next_try`, or given up (`None`).
    pub async fn mark_failed(
        &self,
        id: u64,
        error: &str,
        now: DateTime<Utc>,
        next_try: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE notifications SET attempts = attempts + 1, last_error = ?, next_try_at = COALESCE(?, next_try_at), \
             failed_at = IF(? IS NULL, ?, NULL) WHERE id = ?",
        )
        .bind(cut(error, ERROR_CHARS))
        .bind(next_try)
        .bind(next_try)
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Puts a delivery off until `until` without counting a try (its address is over its rate).
    pub async fn postpone(&self, id: u64, until: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query("UPDATE notifications SET next_try_at = ? WHERE id = ?")
            .bind(until)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// `user`'s own notifications, newest first.
    pub async fn user_notifications(&self, user: &str, limit: u32) -> Result<Vec<Delivery>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM notifications WHERE user = ? ORDER BY created_at DESC, id DESC LIMIT ?");
        Ok(sqlx::query_as(&sql).bind(user).bind(limit).fetch_all(&self.pool).await?)
    }

    /// The rules `user` opted out of (a word this version does not know opts out of nothing it sends).
    pub async fn opt_outs(&self, user: &str) -> Result<Vec<Rule>, StoreError> {
        let words: Vec<String> =
            sqlx::query_scalar("SELECT rule FROM notification_optouts WHERE user = ? ORDER BY rule")
                .bind(user)
                .fetch_all(&self.pool)
                .await?;
        Ok(words.iter().filter_map(|word| Rule::from_word(word)).collect())
    }

    /// Opts `user` out of `rule` (`enabled = false`) or back in; idempotent.
    pub async fn set_opt_out(
        &self,
        user: &str,
        rule: Rule,
        enabled: bool,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if enabled {
            sqlx::query("DELETE FROM notification_optouts WHERE user = ? AND rule = ?")
                .bind(user)
                .bind(rule.as_str())
                .execute(&self.pool)
                .await?;
        } else {
            sqlx::query("INSERT IGNORE INTO notification_optouts (user, rule, created_at) VALUES (?, ?, ?)")
                .bind(user)
                .bind(rule.as_str())
                .bind(now)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// The subjects of `rule` with a delivery recorded since `since`.
    pub async fn subjects_since(&self, rule: Rule, since: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        let sql = "SELECT DISTINCT subject_key FROM notifications WHERE rule = ? AND created_at >= ? LIMIT 100000";
        Ok(sqlx::query_scalar(sql).bind(rule.as_str()).bind(since).fetch_all(&self.pool).await?)
    }

    /// Which of `keys` already have a delivery recorded under `rule`.
    pub async fn known_subjects(
        &self,
        rule: Rule,
        keys: &[String],
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        let mut known = std::collections::BTreeSet::new();
        for chunk in keys.chunks(500) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql =
                format!("SELECT DISTINCT subject_key FROM notifications WHERE rule = ? AND subject_key IN ({marks})");
            let mut query = sqlx::query_scalar::<_, String>(&sql).bind(rule.as_str());
            for key in chunk {
                query = query.bind(key);
            }
            known.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(known)
    }

    /// Jobs archived since `since` whose report blames the infrastructure: (cluster, job id, submit
    /// time, archived at), oldest first.
    pub async fn infrastructure_blamed_since(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(String, u32, u64, DateTime<Utc>)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT cluster, job_id, time_submit, archived_at FROM job_reports \
             WHERE blame = 'infrastructure' AND archived_at > ? ORDER BY archived_at LIMIT ?",
        )
        .bind(since)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }
}
