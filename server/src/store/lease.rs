//! Leases between replicas: work that one replica should do at a time (the archiver's rounds, one
//! job's job-end archive) holds a MariaDB named lock (`GET_LOCK`) for its duration, and so does each
//! heavy request's slot when `[limits] shared` bounds them across replicas. A lock belongs to one
//! connection: it is released with the lease, and when the replica dies (the server sees the
//! connection go), so a killed replica's leases and slots come back by themselves.

use sqlx::mysql::{MySqlConnection, MySqlPool, MySqlPoolOptions};
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

/// A lock name of this database: named locks are server-wide, so two sites' servers on one MariaDB do
/// not exclude each other. Hashed, because MariaDB takes at most 64 characters and an identity may be
/// long.
const SCOPED_NAME: &str = "SHA2(CONCAT(?, '.', DATABASE()), 256)";

impl Store {
    /// The lease `name` of this database, if no other replica holds it now (never waits).
    pub async fn try_lease(&self, name: &str) -> Result<Option<Lease>, StoreError> {
        let mut connection = self.pool.acquire().await?;
        let held: Option<i64> = sqlx::query_scalar(&format!("SELECT GET_LOCK({SCOPED_NAME}, 0)"))
            .bind(name)
            .fetch_one(&mut *connection)
            .await?;
        Ok((held == Some(1)).then(|| Lease { connection: Some(connection) }))
    }

    /// A pool of `size` connections to this database for [`Store::take_slots`]: each heavy request
    /// holds one while it runs, so they are kept apart from the store's own few.
    pub fn slot_pool(&self, size: u32) -> SlotPool {
        let pool = MySqlPoolOptions::new()
            .max_connections(size.max(1))
            .acquire_timeout(self.pool.options().get_acquire_timeout())
            .connect_lazy_with((*self.pool.connect_options()).clone());
        SlotPool { pool }
    }
}

/// Connections that hold heavy requests' slots ([`Store::slot_pool`]).
#[derive(Clone)]
pub struct SlotPool {
    pool: MySqlPool,
}

/// Which slot group a refusal came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotsFull {
    /// Every one of the identity's slots is held.
    Identity,
    /// Every slot of the total is held.
    Total,
}

/// Held slots: one of `<group>:<n>` per group asked. Dropping them releases them (the connection
/// goes back to the pool once its locks are released, or closes if that fails).
pub struct Slots {
    connection: Option<PoolConnection<MySql>>,
}

impl Slots {
    /// Releases the slots now and gives the connection back to the pool (or, when MariaDB did not
    /// answer, closes it: its locks go with it).
    pub async fn release(mut self) -> Result<(), StoreError> {
        if let Some(mut connection) = self.connection.take()
            && let Err(error) = sqlx::query("SELECT RELEASE_ALL_LOCKS()").execute(&mut *connection).await
        {
            drop(connection.detach());
            return Err(error.into());
        }
        Ok(())
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let Some(mut connection) = self.connection.take() else { return };
        // Dropped outside a runtime (at shutdown) the connection just closes, and its locks with it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if sqlx::query("SELECT RELEASE_ALL_LOCKS()").execute(&mut *connection).await.is_err() {
                    drop(connection.detach());
                }
            });
        } else {
            drop(connection.detach());
        }
    }
}

impl SlotPool {
    /// Takes, in one statement and without waiting, a free slot among `per_identity` of
    /// `identity_group` (none: anonymous, not counted per identity) and then one among `total` of
    /// `total_group`. Either all asked are held, or none and which group was full.
    pub async fn take_slots(
        &self,
        identity_group: Option<&str>,
        per_identity: u32,
        total_group: &str,
        total: u32,
    ) -> Result<Result<Slots, SlotsFull>, StoreError> {
        // `CASE` stops at the first lock it gets; `-1` says the group was full, and the total's slots
        // are not tried when the identity's were.
        let chain = |slots: u32, full: i64| {
            let whens: String = (0..slots).map(|n| format!(" WHEN GET_LOCK({SCOPED_NAME}, 0) = 1 THEN {n}")).collect();
            format!("CASE{whens} ELSE {full} END")
        };
        let total_chain = chain(total, -2);
        let sql = match identity_group {
            Some(_) => format!("SELECT IF(({}) < 0, -1, ({total_chain}))", chain(per_identity, -1)),
            None => format!("SELECT {total_chain}"),
        };
        let mut query = sqlx::query_scalar::<_, i64>(&sql);
        if let Some(group) = identity_group {
            for n in 0..per_identity {
                query = query.bind(format!("{group}:{n}"));
            }
        }
        for n in 0..total {
            query = query.bind(format!("{total_group}:{n}"));
        }
        let mut connection = self.pool.acquire().await?;
        let taken = query.fetch_one(&mut *connection).await?;
        if taken >= 0 {
            return Ok(Ok(Slots { connection: Some(connection) }));
        }
        // The identity's slot is held when the total was full: let it go before the connection does.
        drop(Slots { connection: Some(connection) });
        Ok(Err(if taken == -1 { SlotsFull::Identity } else { SlotsFull::Total }))
    }
}
