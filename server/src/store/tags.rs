//! Job tags (`job_tags`) and when the rules last read a job (`job_tag_rules_seen`). A job record is
//! (cluster, job id, submit time), as the archived reports name it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use crate::domain::cluster::ClusterName;
use crate::domain::tag::{MAX_TAGS_PER_JOB, Tag, TagSource};

/// One tag of a job record, with who set it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTag {
    pub tag: Tag,
    pub set_by: TagSource,
    pub set_at: DateTime<Utc>,
}

/// What adding a tag did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// Stored now.
    New,
    /// The job record already held it (its setter and time are kept).
    Already,
    /// The job record holds [`MAX_TAGS_PER_JOB`] tags already: nothing changed.
    Full,
}

type TagRow = (u32, u64, String, String, DateTime<Utc>);

fn stored(tag: String, set_by: &str, set_at: DateTime<Utc>) -> Option<StoredTag> {
    // A row this version cannot parse (none is written so) is left out rather than failing a page.
    Some(StoredTag { tag: tag.parse().ok()?, set_by: TagSource::from_stored(set_by), set_at })
}

impl Store {
    /// The tags of one job record, by name.
    pub async fn job_tags(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
    ) -> Result<Vec<StoredTag>, StoreError> {
        let rows: Vec<(String, String, DateTime<Utc>)> = sqlx::query_as(
            "SELECT tag, set_by, set_at FROM job_tags WHERE cluster = ? AND job_id = ? AND time_submit = ? ORDER BY tag",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().filter_map(|(tag, set_by, set_at)| stored(tag, &set_by, set_at)).collect())
    }

    /// Adds `tag` to a job record unless it holds it already or is full; in one transaction that locks
    /// the record's tags, so two adds at once never pass the bound together.
    pub async fn add_job_tag(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
        tag: &Tag,
        set_by: &TagSource,
        at: DateTime<Utc>,
    ) -> Result<Added, StoreError> {
        let mut transaction = self.pool.begin().await?;
        let held: Vec<(String,)> =
            sqlx::query_as("SELECT tag FROM job_tags WHERE cluster = ? AND job_id = ? AND time_submit = ? FOR UPDATE")
                .bind(cluster.as_str())
                .bind(job_id)
                .bind(time_submit)
                .fetch_all(&mut *transaction)
                .await?;
        if held.iter().any(|(held,)| held == tag.as_str()) {
            return Ok(Added::Already);
        }
        if held.len() >= MAX_TAGS_PER_JOB {
            return Ok(Added::Full);
        }
        sqlx::query(
            "INSERT IGNORE INTO job_tags (cluster, job_id, time_submit, tag, set_by, set_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .bind(tag.as_str())
        .bind(set_by.stored())
        .bind(at)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(Added::New)
    }

    /// Removes a person's `tag` from a job record (a rule's tag stays: the rules set it again anyway);
    /// whether one was removed.
    pub async fn remove_job_tag(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
        tag: &Tag,
    ) -> Result<bool, StoreError> {
        let result = sqlx::query(
            "DELETE FROM job_tags WHERE cluster = ? AND job_id = ? AND time_submit = ? AND tag = ? AND set_by <> ?",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .bind(tag.as_str())
        .bind(TagSource::RULE)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() > 0)
    }

    /// Whether the rules have read this job record, and if so whether the job had ended then.
    pub async fn tag_rules_seen(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
    ) -> Result<Option<bool>, StoreError> {
        let row: Option<(bool,)> = sqlx::query_as(
            "SELECT job_ended FROM job_tag_rules_seen WHERE cluster = ? AND job_id = ? AND time_submit = ?",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(ended,)| ended))
    }

    /// Sets the rules' tags of a job record to exactly `tags` (a person's tags are kept; a rule's tag
    /// is not added past the bound) and notes that the rules read it.
    pub async fn set_rule_tags(
        &self,
        cluster: &ClusterName,
        job_id: u32,
        time_submit: u64,
        tags: &[Tag],
        job_ended: bool,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM job_tags WHERE cluster = ? AND job_id = ? AND time_submit = ? AND set_by = ?")
            .bind(cluster.as_str())
            .bind(job_id)
            .bind(time_submit)
            .bind(TagSource::RULE)
            .execute(&self.pool)
            .await?;
        for tag in tags {
            self.add_job_tag(cluster, job_id, time_submit, tag, &TagSource::Rule, at).await?;
        }
        sqlx::query(
            "INSERT INTO job_tag_rules_seen (cluster, job_id, time_submit, seen_at, job_ended) VALUES (?, ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE seen_at = VALUES(seen_at), job_ended = VALUES(job_ended)",
        )
        .bind(cluster.as_str())
        .bind(job_id)
        .bind(time_submit)
        .bind(at)
        .bind(job_ended)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The tags of each of these job records (records without any are absent), by name. The records'
    /// job ids are read as ranges of the primary key ([`Store::rows_among`]) and their submit times
    /// matched here: MariaDB plans an `OR` of 500 (job id, submit time) pairs far slower than it
    /// reads their rows (45 ms a statement, most of a window's export).
    pub async fn tags_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
    ) -> Result<BTreeMap<(u32, u64), Vec<Tag>>, StoreError> {
        let wanted: BTreeSet<(u32, u64)> = records.iter().copied().collect();
        let rows =
            self.rows_among("SELECT job_id, time_submit, tag, set_by, set_at FROM job_tags", cluster, records).await?;
        let mut found: BTreeMap<(u32, u64), Vec<Tag>> = BTreeMap::new();
        for row in &rows {
            let (job_id, time_submit, tag, set_by, set_at): TagRow = sqlx::FromRow::from_row(row)?;
            if wanted.contains(&(job_id, time_submit))
                && let Some(tag) = stored(tag, &set_by, set_at)
            {
                found.entry((job_id, time_submit)).or_default().push(tag.tag);
            }
        }
        // Each record's tags by name.
        found.values_mut().for_each(|tags| tags.sort());
        Ok(found)
    }

    /// Up to `limit` job records of `cluster` carrying `tag`, submitted before `submitted_before` (epoch
    /// seconds) and, with `after`, after that (submit time, job id) in the order newest submission
    /// first, then highest job id: one range of the `by_tag` index.
    pub async fn tagged_jobs(
        &self,
        cluster: &ClusterName,
        tag: &Tag,
        submitted_before: u64,
        after: Option<(u64, u32)>,
        limit: usize,
    ) -> Result<Vec<(u32, u64)>, StoreError> {
        let (after_submit, after_job) = after.unwrap_or((u64::MAX, u32::MAX));
        let rows: Vec<(u32, u64)> = sqlx::query_as(
            "SELECT job_id, time_submit FROM job_tags \
             WHERE cluster = ? AND tag = ? AND time_submit < ? \
               AND (time_submit < ? OR (time_submit = ? AND job_id < ?)) \
             ORDER BY time_submit DESC, job_id DESC LIMIT ?",
        )
        .bind(cluster.as_str())
        .bind(tag.as_str())
        .bind(submitted_before)
        .bind(after_submit)
        .bind(after_submit)
        .bind(after_job)
        .bind(limit as u64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}
