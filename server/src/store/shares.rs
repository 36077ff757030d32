//! Shared report links (`report_shares`) and their audit log (`report_share_uses`).

use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use crate::domain::share::ShareHash;

/// A stored link, never its secret.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredShare {
    pub id: u64,
    pub cluster: String,
    /// The job as its maker named it (`123`, `123_4`).
    pub job_id: String,
    pub id_job: u32,
    pub time_submit: i64,
    /// The job's user: the link shows the report as they see it.
    pub owner: String,
    pub created_by: String,
    pub note: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// How many times it was opened (answered or refused).
    pub uses: i64,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A new link's facts.
#[derive(Debug, Clone)]
pub struct NewShare<'a> {
    pub hash: &'a ShareHash,
    pub cluster: &'a str,
    pub job_id: &'a str,
    pub id_job: u32,
    pub time_submit: i64,
    pub owner: &'a str,
    pub created_by: &'a str,
    pub note: &'a str,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

const SELECT: &str = "SELECT s.id, s.cluster, s.job_id, s.id_job, s.time_submit, s.owner, s.created_by, s.note, \
     s.created_at, s.expires_at, s.revoked_at, \
     (SELECT COUNT(*) FROM report_share_uses u WHERE u.share_id = s.id) AS uses, \
     (SELECT MAX(u.used_at) FROM report_share_uses u WHERE u.share_id = s.id) AS last_used_at \
     FROM report_shares s";

impl Store {
    /// Stores a new link's hash; its id.
    pub async fn create_share(&self, share: &NewShare<'_>) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "INSERT INTO report_shares (secret_sha256, cluster, job_id, id_job, time_submit, owner, created_by, note, \
             created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&share.hash.0)
        .bind(share.cluster)
        .bind(share.job_id)
        .bind(share.id_job)
        .bind(share.time_submit)
        .bind(share.owner)
        .bind(share.created_by)
        .bind(share.note)
        .bind(share.created_at)
        .bind(share.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(result.last_insert_id())
    }

    /// The link with this hash, live or not.
    pub async fn share_by_hash(&self, hash: &ShareHash) -> Result<Option<StoredShare>, StoreError> {
        let sql = format!("{SELECT} WHERE s.secret_sha256 = ?");
        Ok(sqlx::query_as(&sql).bind(&hash.0).fetch_optional(&self.pool).await?)
    }

    /// The link `id`, whoever made it.
    pub async fn share(&self, id: u64) -> Result<Option<StoredShare>, StoreError> {
        let sql = format!("{SELECT} WHERE s.id = ?");
        Ok(sqlx::query_as(&sql).bind(id).fetch_optional(&self.pool).await?)
    }

    /// The links made to one job, newest first.
    pub async fn shares_of_job(
        &self,
        cluster: &str,
        id_job: u32,
        time_submit: i64,
    ) -> Result<Vec<StoredShare>, StoreError> {
        let sql = format!(
            "{SELECT} WHERE s.cluster = ? AND s.id_job = ? AND s.time_submit = ? ORDER BY s.created_at DESC, s.id DESC"
        );
        Ok(sqlx::query_as(&sql).bind(cluster).bind(id_job).bind(time_submit).fetch_all(&self.pool).await?)
    }

    /// Revokes the link `id`; revoking twice keeps the first time. (Who may is the caller's rule.)
    pub async fn revoke_share(&self, id: u64, at: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query("UPDATE report_shares SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?")
            .bind(at)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Appends one opening of link `id` to the audit log.
    pub async fn record_share_use(
        &self,
        id: u64,
        at: DateTime<Utc>,
        status: u16,
        peer: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO report_share_uses (share_id, used_at, status, peer) VALUES (?, ?, ?, ?)")
            .bind(id)
            .bind(at)
            .bind(status)
            .bind(super::tokens::truncated(peer, 64))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
