//! A whole window of jobs, streamed: the listing's items (same scope, window limit, filters, order
//! and digests) a chunk at a time as slurmdbd's rows arrive, so that memory stays the same for any
//! window.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use slurmlens_wire as wire;

use super::jobs::JobsQuery;
use super::{App, AppError, Viewer};
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;

/// Jobs per page of a tag's export (other exports come in the reader's batches, 1,000 jobs then 5,000):
/// one query of our store for their archived digests (and one for running GPU jobs' means so far) per
/// chunk, never per job.
pub const EXPORT_CHUNK: usize = 1000;
/// Chunks being completed at once: this one and the next.
const CHUNKS_AHEAD: usize = 2;

/// What each chunk needs, shared by the chunks of one export.
struct Export {
    app: App,
    reader: SlurmDbd,
    catalog: TresCatalog,
    blame: Vec<wire::Blame>,
}

impl App {
    /// Every job of the listing's window that `viewer` may see, as [`App::list_jobs`] would list them
    /// page after page (`query.limit` and `query.cursor` are not read), in chunks of at most 5,000
    /// jobs. The viewer's scope, the window limit and the cluster are checked before the
    /// stream is handed out; an error after that is the stream's last item.
    pub async fn export_jobs(
        &self,
        viewer: &Viewer,
        query: &JobsQuery,
    ) -> Result<impl Stream<Item = Result<Vec<wire::Job>, AppError>> + Send + 'static, AppError> {
        let reader = self.cluster(query.cluster.as_deref())?;
        let scope = self.scope(viewer, reader).await?;
        self.check_listing_window(&scope, query)?;
        let catalog = reader.tres_catalog().await?;
        let chunks = if query.filter.tag.is_some() {
            self.tagged_stream(reader.clone(), scope, query.window, query.filter.clone(), catalog.clone()).boxed()
        } else {
            reader
                .jobs_streamed(scope, query.window, query.filter.clone(), catalog.clone())
                .map(|batch| batch.map_err(AppError::from))
                .boxed()
        };
        let export =
            Arc::new(Export { app: self.clone(), reader: reader.clone(), catalog, blame: query.blame.clone() });
        Ok(chunks
            .map(move |chunk| {
                let export = Arc::clone(&export);
                async move { Ok(export.app.listed_jobs(&export.reader, chunk?, &export.catalog, &export.blame).await) }
            })
            // While one chunk's digests and tags are read from our store, the next chunk's rows are
            // gathered: the store's round trips overlap slurmdbd's rows, in order.
            .buffered(CHUNKS_AHEAD))
    }
}
