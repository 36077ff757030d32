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

    /// One of `user`'s tokens; `None` for another user's or a missing one.
    pub async fn token_of(&self, user: &str, id: u64) -> Result<Option<StoredToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE id = ? AND user_name = ?");
        Ok(sqlx::query_as(&sql).bind(id).bind(user).fetch_optional(&self.pool).await?)
    }

    /// Revokes one of `user`'s tokens; false when `user` has no such token (another's included).
    /// Revoking twice keeps the first time.
    pub async fn revoke_token(&self, user: &str, id: u64, at: DateTime<Utc>) -> Result<bool, StoreError> {
        if self.token_of(user, id).await?.is_none() {
            return Ok(false);
        }
        sqlx::query("UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND user_name = ?")
            .bind(at)
            .bind(id)
            .bind(user)
            .execute(&self.pool)
            .await?;
        Ok(true)
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

fn truncated(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
