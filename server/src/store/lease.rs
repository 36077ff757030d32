//! Leases between replicas: work that one replica should do at a time (the archiver's rounds) holds a
//! MariaDB named lock (`GET_LOCK`) for its duration. The lock belongs to one connection: it is released
//! when the lease is dropped (the connection is closed, not returned to the pool, so no pooled
//! connection keeps it) and when the replica dies (the server sees the connection go).

use sqlx::mysql::MySqlConnection;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, MySql};

use super::{Store, StoreError};

/// A held lease; dropping it releases it.
pub struct Lease {
    connection: Option<PoolConnection<MySql>>,
}

impl Lease {
    /// Releases the lease now (a dropped one is released once its connection has closed).
    pub async fn release(mut self) -> Result<(), StoreError> {
        if let Some(mut connection) = self.connection.take() {
            sqlx::query("SELECT RELEASE_ALL_LOCKS()").execute(&mut *connection).await?;
            let connection: MySqlConnection = connection.detach();
            connection.close().await?;
        }
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            // Out of the pool and dropped: its socket closes and the lock goes with it.
            drop(connection.detach());
        }
    }
}

impl Store {
    /// The lease `name` of this database, if no other replica holds it now (never waits). Named
    /// locks are server-wide, so the name is scoped to this database: two sites' servers on one
    /// MariaDB do not exclude each other.
    pub async fn try_lease(&self, name: &str) -> Result<Option<Lease>, StoreError> {
        let mut connection = self.pool.acquire().await?;
        let held: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(CONCAT(?, '.', DATABASE()), 0)")
            .bind(name)
            .fetch_one(&mut *connection)
            .await?;
        Ok((held == Some(1)).then(|| Lease { connection: Some(connection) }))
    }
}
