//! A whole window of jobs as a stream: the listing's rows (same scope, filters and order,
//! [`SlurmDbd::jobs_in_window`]) read in keyset batches by a task of their own, each batch decoded on a
//! blocking thread while the next one is read, so that MariaDB's work, the decoding and the stream's
//! reader overlap, and memory stays the same for a day or a year.
//!
//! Why batches and not one statement: every statement runs under `[slurmdbd] statement_timeout_s`,
//! and a streamed statement lives as long as its slowest reader (MariaDB waits on the socket while a
//! client reads slowly), so a month of a large cluster sent to a slow client would always be stopped,
//! and would hold a pooled connection all the while. A batch is read whole and its connection goes
//! back to the pool at once.

use std::sync::Arc;

use futures::{FutureExt, Stream};
use sqlx::mysql::MySqlRow;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::rows::{cursor_at, decode_job};
use super::window::{Bounds, Route};
use super::{SlurmDbd, SlurmDbdError, storable_filter};
use crate::domain::job::{JobCursor, JobFilter, JobRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;

/// Jobs per statement: a few milliseconds of MariaDB's time and a few megabytes of rows.
const BATCH: usize = 5000;
/// Jobs of the first statement: fewer, so that the first byte leaves early (the application's first
/// chunk of 1,000 jobs comes from this one statement).
const FIRST_BATCH: usize = 1000;
/// Batches handed on (being decoded, or decoded and waiting) while the stream's reader has one and
/// the next is read from MariaDB: at most three batches of rows are held at any time.
const BATCHES_AHEAD: usize = 1;

/// One batch's jobs, decoded on a blocking thread.
type Decoding = JoinHandle<Result<Vec<JobRecord>, SlurmDbdError>>;

impl SlurmDbd {
    /// Every job of `window` that `scope` may see and `filter` keeps, newest submission first (the
    /// listing's order, page after page), as a stream of batches (the first of at most
    /// [`FIRST_BATCH`] jobs, the others of at most [`BATCH`], none empty). The first error is the
    /// stream's last item; a task that stopped without finishing (it panicked) is an error too, so the
    /// stream never ends cleanly short of the window. Dropping the stream stops the reading at its
    /// next batch.
    pub fn jobs_streamed(
        &self,
        scope: ViewerScope,
        window: TimeWindow,
        filter: JobFilter,
        catalog: TresCatalog,
    ) -> impl Stream<Item = Result<Vec<JobRecord>, SlurmDbdError>> + Send + 'static {
        let reader = self.clone();
        let (sender, receiver) = mpsc::channel(BATCHES_AHEAD);
        let task = tokio::spawn(async move {
            if let Err(error) = reader.read_batches(scope, window, filter, catalog, &sender).await {
                let _ = sender.send(Err(error)).await;
            }
        });
        futures::stream::unfold(Some(Reading { receiver, task }), next_batch)
    }

    /// Reads the window batch after batch, handing each on to be decoded as soon as it is read.
    async fn read_batches(
        &self,
        scope: ViewerScope,
        window: TimeWindow,
        filter: JobFilter,
        catalog: TresCatalog,
        sender: &mpsc::Sender<Result<Decoding, SlurmDbdError>>,
    ) -> Result<(), SlurmDbdError> {
        if scope == ViewerScope::Nobody {
            return Ok(());
        }
        let Some(filter) = storable_filter(&filter) else {
            return Ok(());
        };
        let bounds = Bounds::of(window);
        let route = self.route(&scope, &filter, bounds.start).await?;
        let kept = Arc::new((filter, catalog));
        let mut parts = route.parts(bounds).into_iter();
        let Some((first, from)) = parts.next() else {
            return Ok(());
        };
        // Each later part's first batch is read at once, beside the first part; dropped unread (the
        // stream's reader went away), it is cancelled.
        let ahead: Vec<_> = parts
            .map(|(route, from)| {
                let (reader, scope, kept, part) = (self.clone(), scope.clone(), Arc::clone(&kept), route.clone());
                let (reading, rows) =
                    async move { reader.window_rows(&part, &scope, bounds, &kept.0, from, BATCH).await }
                        .remote_handle();
                tokio::spawn(reading);
                (route, from, rows)
            })
            .collect();
        let batches = Batches { reader: self, scope: &scope, bounds, kept: &kept, sender };
        if !batches.part(&first, from, None).await? {
            return Ok(());
        }
        for (route, from, rows) in ahead {
            if !batches.part(&route, from, Some(rows.await?)).await? {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// What every batch of one export reads by, and where it hands the batches on.
struct Batches<'a> {
    reader: &'a SlurmDbd,
    scope: &'a ViewerScope,
    bounds: Bounds,
    /// The filters and the TRES catalogue, shared with the decoding threads.
    kept: &'a Arc<(JobFilter, TresCatalog)>,
    sender: &'a mpsc::Sender<Result<Decoding, SlurmDbdError>>,
}

impl Batches<'_> {
    /// Reads one part of the route to its end from `cursor` (its first batch already `read`, or not),
    /// handing each batch on; false when the stream's reader has gone.
    async fn part(
        &self,
        route: &Route,
        mut cursor: Option<JobCursor>,
        read: Option<Vec<MySqlRow>>,
    ) -> Result<bool, SlurmDbdError> {
        let (mut rows, mut size) = match read {
            Some(rows) => (rows, BATCH),
            None => (self.rows(route, cursor, FIRST_BATCH).await?, FIRST_BATCH),
        };
        loop {
            let more = rows.len() == size;
            cursor = rows.last().map(cursor_at).transpose()?.or(cursor);
            let kept = Arc::clone(self.kept);
            let decoding = tokio::task::spawn_blocking(move || decode_kept(&rows, &kept.0, &kept.1));
            // A closed channel: the stream's reader is gone, so is the need for more rows.
            if self.sender.send(Ok(decoding)).await.is_err() {
                return Ok(false);
            }
            if !more {
                return Ok(true);
            }
            size = BATCH;
            rows = self.rows(route, cursor, size).await?;
        }
    }

    async fn rows(
        &self,
        route: &Route,
        cursor: Option<JobCursor>,
        size: usize,
    ) -> Result<Vec<MySqlRow>, SlurmDbdError> {
        self.reader.window_rows(route, self.scope, self.bounds, &self.kept.0, cursor, size).await
    }
}

/// A batch's rows decoded, less those the filters left to decoding refuse.
fn decode_kept(rows: &[MySqlRow], filter: &JobFilter, catalog: &TresCatalog) -> Result<Vec<JobRecord>, SlurmDbdError> {
    let tested = filter.has_decoded_tests();
    let mut jobs = Vec::with_capacity(rows.len());
    for row in rows {
        let job = decode_job(row)?;
        if !tested || filter.matches_decoded(&job, catalog.gpus(&job.tres_alloc)) {
            jobs.push(job);
        }
    }
    Ok(jobs)
}

/// A stream's state: the batches the reader task hands on, and the task.
struct Reading {
    receiver: mpsc::Receiver<Result<Decoding, SlurmDbdError>>,
    task: JoinHandle<()>,
}

/// The next decoded batch that holds a job, else (the channel closed) whether the reader task finished.
async fn next_batch(state: Option<Reading>) -> Option<(Result<Vec<JobRecord>, SlurmDbdError>, Option<Reading>)> {
    let mut reading = state?;
    let stopped = |what: &str, error: tokio::task::JoinError| {
        SlurmDbdError::Unavailable(format!("the export's {what} stopped: {error}"))
    };
    loop {
        match reading.receiver.recv().await {
            Some(Ok(decoding)) => match decoding.await {
                // Every job of a batch refused by the filters left to decoding.
                Ok(Ok(jobs)) if jobs.is_empty() => {}
                Ok(Ok(jobs)) => return Some((Ok(jobs), Some(reading))),
                Ok(Err(error)) => return Some((Err(error), None)),
                Err(error) => return Some((Err(stopped("decoding", error)), None)),
            },
            Some(Err(error)) => return Some((Err(error), None)),
            None => {
                return match reading.task.await {
                    Ok(()) => None,
                    Err(error) => Some((Err(stopped("reader task", error)), None)),
                };
            }
        }
    }
}
