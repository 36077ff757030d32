//! slurmdbd's connection pool with every statement timed for `/metrics`: an [`Executor`] over the
//! pool, so the reader's queries stay plain `fetch_all(&self.pool)` and none can be left out.

use std::time::Instant;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sqlx::mysql::{MySqlPool, MySqlQueryResult, MySqlRow, MySqlStatement, MySqlTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, MySql};

use crate::telemetry::{self, PoolUse, Source};

/// The pool; `&TimedPool` executes like `&MySqlPool`.
#[derive(Debug, Clone)]
pub struct TimedPool(pub(super) MySqlPool);

impl TimedPool {
    /// Connections open, idle, and the most the pool may open.
    pub(super) fn pool_use(&self) -> PoolUse {
        PoolUse::of(&self.0)
    }
}

/// Records a statement's time when dropped: when its answer was read whole, failed, or was abandoned.
struct Timer(Instant);

impl Drop for Timer {
    fn drop(&mut self) {
        telemetry::global().source_call(Source::Slurmdbd, self.0.elapsed());
    }
}

impl<'p> Executor<'p> for &'p TimedPool {
    type Database = MySql;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<MySqlQueryResult, MySqlRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, MySql>,
    {
        let timer = Timer(Instant::now());
        (&self.0)
            .fetch_many(query)
            .map(move |item| {
                let _running = &timer;
                item
            })
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<MySqlRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, MySql>,
    {
        Box::pin(async move {
            let _timer = Timer(Instant::now());
            (&self.0).fetch_optional(query).await
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [MySqlTypeInfo],
    ) -> BoxFuture<'e, Result<MySqlStatement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        (&self.0).prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<MySql>, sqlx::Error>>
    where
        'p: 'e,
    {
        (&self.0).describe(sql)
    }
}
