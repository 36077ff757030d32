//! Personal API tokens (`api_tokens`) and their audit log (`api_token_uses`).

use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use crate::domain::token::{TokenHash, TokenName};

/// A stored token, never its secret.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredToken {
    pub id: u64,
    pub user_name: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// One request made with a token.
#[derive(Debug, Clone)]
pub struct TokenUse<'a> {
    pub token_id: u64,
    pub at: DateTime<Utc>,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub peer: &'a str,
}

const COLUMNS: &str = "id, user_name, name, created_at, expires_at, revoked_at, last_used_at";

impl Store {
    /// Stores a new token's hash for `user`; its id.
    pub async fn create_token(
        &self,
        user: &str,
        name: &TokenName,
        hash: &TokenHash,
        created_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "INSERT INTO api_tokens (user_name, name, token_sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(user)
        .bind(name.as_str())
        .bind(&hash.0)
        .bind(created_at)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        Ok(result.last_insert_id())
    }

    /// The token with this hash, live or not.
    pub async fn token_by_hash(&self, hash: &TokenHash) -> Result<Option<StoredToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE token_sha256 = ?");
        Ok(sqlx::query_as(&sql).bind(&hash.0).fetch_optional(&self.pool).await?)
    }

    /// A user's tokens, newest first.
    pub async fn tokens_of(&self, user: &str) -> Result<Vec<StoredToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE user_name = ? ORDER BY created_at DESC, id DESC");
        Ok(sqlx::query_as(&sql).bind(user).fetch_all(&self.pool).await?)
    }

    /// Every user's tokens, newest first (at most `limit`): what staff review.
    pub async fn all_tokens(&self, limit: u32) -> Result<Vec<StoredToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens ORDER BY created_at DESC, id DESC LIMIT ?");
        Ok(sqlx::query_as(&sql).bind(limit).fetch_all(&self.pool).await?)
    }

    /// The token `id`, whoever's it is.
    pub async fn token(&self, id: u64) -> Result<Option<StoredToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE id = ?");
        Ok(sqlx::query_as(&sql).bind(id).fetch_optional(&self.pool).await?)
    }

    /// How many of `user`'s tokens are live at `now` (neither revoked nor expired).
    pub async fn live_tokens_of(&self, user: &str, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM api_tokens WHERE user_name = ? AND revoked_at IS NULL AND expires_at > ?",
        )
        .bind(user)
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Revokes the token `id`, whoever's it is; false when there is none. Revoking twice keeps the
    /// first time. (Who may revoke which token is the caller's rule.)
    pub async fn revoke_token(&self, id: u64, at: DateTime<Utc>) -> Result<bool, StoreError> {
        if self.token(id).await?.is_none() {
            return Ok(false);
        }
        sqlx::query("UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?")
            .bind(at)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(true)
    }

    /// Deletes the audit log's lines older than `before`, a batch at a time so no statement holds the
    /// table long; how many went.
    pub async fn prune_token_uses(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let gone = sqlx::query("DELETE FROM api_token_uses WHERE used_at < ? LIMIT 10000")
                .bind(before)
                .execute(&self.pool)
                .await?
                .rows_affected();
            total += gone;
            if gone < 10_000 {
                return Ok(total);
            }
        }
    }

    /// Appends one use to the audit log and stamps the token's last use.
    pub async fn record_token_use(&self, used: &TokenUse<'_>) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO api_token_uses (token_id, used_at, method, path, status, peer) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(used.token_id)
        .bind(used.at)
        .bind(used.method)
        .bind(truncated(used.path, 512))
        .bind(used.status)
        .bind(truncated(used.peer, 64))
        .execute(&mut *transaction)
        .await?;
        sqlx::query("UPDATE api_tokens SET last_used_at = GREATEST(COALESCE(last_used_at, ?), ?) WHERE id = ?")
            .bind(used.at)
            .bind(used.at)
            .bind(used.token_id)
            .execute(&mut *transaction)
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// A token's audit log, newest first: (time, method, path, status).
    pub async fn token_uses(
        &self,
        token_id: u64,
        limit: u32,
    ) -> Result<Vec<(DateTime<Utc>, String, String, u16)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT used_at, method, path, status FROM api_token_uses WHERE token_id = ? \
             ORDER BY used_at DESC, id DESC LIMIT ?",
        )
        .bind(token_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }
}

pub(super) fn truncated(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
