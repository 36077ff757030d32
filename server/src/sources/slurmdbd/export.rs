//! A whole window of jobs as a stream: the listing's rows (same scope, filters and order,
//! [`SlurmDbd::jobs_in_window`]) read in keyset batches by a task of their own, a bounded channel
//! between that task and the stream's reader, so that memory stays the same for a day or a year.
//!
//! Why batches and not one statement: every statement runs under `[slurmdbd] statement_timeout_s`,
//! and a streamed statement lives as long as its slowest reader (MariaDB waits on the socket while a
//! client reads slowly), so a month of a large cluster sent to a slow client would always be stopped,
//! and would hold a pooled connection all the while. A batch is read whole and its connection goes
//! back to the pool at once; the next batch is read while the previous one is being sent.

use futures::Stream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{SlurmDbd, SlurmDbdError};
use crate::domain::job::{JobFilter, JobRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::tres::TresCatalog;

/// Jobs per statement: a few milliseconds of MariaDB's time and a few megabytes of rows. The channel
/// holds as many, so the reader task runs at most one batch ahead of the stream's reader.
const BATCH: usize = 5000;
/// Jobs of the first statement: fewer, so that the first byte leaves early (the application's first
/// chunk of 1,000 jobs comes from this one statement).
const FIRST_BATCH: usize = 1000;

impl SlurmDbd {
    /// Every job of `window` that `scope` may see and `filter` keeps, newest submission first (the
    /// listing's order, page after page), as a stream. The first error is the stream's last item; a
    /// reader task that stopped without finishing (it panicked) is an error too, so the stream never
    /// ends cleanly short of the window. Dropping the stream stops the task at its next row.
    pub fn jobs_streamed(
        &self,
        scope: ViewerScope,
        window: TimeWindow,
        filter: JobFilter,
        catalog: TresCatalog,
    ) -> impl Stream<Item = Result<JobRecord, SlurmDbdError>> + Send + 'static {
        let reader = self.clone();
        let (sender, receiver) = mpsc::channel(BATCH);
        let task = tokio::spawn(async move {
            let (mut cursor, mut size) = (None, FIRST_BATCH);
            loop {
                let (jobs, next) = match reader.jobs_in_window(&scope, window, &filter, &catalog, cursor, size).await {
                    Ok(batch) => batch,
                    Err(error) => {
                        let _ = sender.send(Err(error)).await;
                        return;
                    }
                };
                for job in jobs {
                    // A closed channel: the stream's reader is gone, so is the need for more rows.
                    if sender.send(Ok(job)).await.is_err() {
                        return;
                    }
                }
                match next {
                    Some(next) => (cursor, size) = (Some(next), BATCH),
                    None => return,
                }
            }
        });
        futures::stream::unfold(Some((receiver, task)), next_row)
    }
}

/// A stream's state: the rows the reader task sends, and the task.
type Reading = (mpsc::Receiver<Result<JobRecord, SlurmDbdError>>, JoinHandle<()>);

/// The next row from the reader task, then (its channel closed) whether the task finished.
async fn next_row(state: Option<Reading>) -> Option<(Result<JobRecord, SlurmDbdError>, Option<Reading>)> {
    let (mut receiver, task) = state?;
    if let Some(row) = receiver.recv().await {
        return Some((row, Some((receiver, task))));
    }
    match task.await {
        Ok(()) => None,
        Err(error) => {
            Some((Err(SlurmDbdError::Unavailable(format!("the export's reader task stopped: {error}"))), None))
        }
    }
}
