//! The job listing sorted by any column over the whole window, a page at a time (`sort=`, `offset=`).
//!
//! Two of the columns (mean GPU utilisation, blame) live in our store's archived reports, not in
//! slurmdbd's rows, and running jobs' means come from the metrics source: no index orders a window by
//! them. So the window is read whole, as the export reads it (same scope, filters and digests), each
//! job kept only as its [`wire::SortKey`]; the keys are ordered (ties broken by job id and
//! submission, so the order is total), and only the page's jobs are read again in full, by
//! slurmdbd's unique `(id_job, time_submit)` index. Pages go by offset: the whole order is known
//! anyway, an offset names any page (the previous one, the tenth) and with `total` gives "201–400 of
//! 7,712". The ordered keys are kept for [`ORDER_KEPT_S`] per viewer, window, filters and order, so
//! the pages a person walks through come from one reading of the window: none is lost or shown twice
//! while running jobs' values move.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use slurmlens_wire as wire;

use super::jobs::JobsQuery;
use super::{App, AppError, Viewer};
use crate::domain::job::JobFilter;

/// Most jobs one sorted listing orders (a month of a 100-node cluster is about 200,000); past it the
/// listing asks for a narrower window or more filters.
pub const MAX_SORTED: usize = 250_000;
/// How long a window's order is kept for its next pages.
pub const ORDER_KEPT_S: u64 = 60;

/// A sorted listing's order and page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobOrder {
    pub sort: wire::JobSort,
    pub descending: bool,
    /// Jobs of the order before the page.
    pub offset: usize,
}

/// One job of an ordered window: where it sorts, and how to read it again.
struct Ordered {
    key: wire::SortKey,
    record: (u32, u64),
}

/// Ordered windows by (viewer, query): the pages of one listing, from one reading.
#[derive(Clone)]
pub struct OrderCache {
    orders: moka::sync::Cache<String, Arc<Vec<Ordered>>>,
}

impl Default for OrderCache {
    fn default() -> Self {
        let kept = std::time::Duration::from_secs(ORDER_KEPT_S);
        // Weighed by jobs: about 100 bytes each, 80 MB at most.
        let orders = moka::sync::Cache::builder()
            .weigher(|_key: &String, order: &Arc<Vec<Ordered>>| u32::try_from(order.len()).unwrap_or(u32::MAX).max(1))
            .max_capacity(4 * MAX_SORTED as u64)
            .time_to_live(kept)
            .build();
        Self { orders }
    }
}

impl App {
    /// One page of the window's jobs in `order`, with the window's total: as [`App::list_jobs`] lists
    /// them (scope, window limit, filters, digests), ordered over the whole window.
    pub(super) async fn sorted_jobs(
        &self,
        viewer: &Viewer,
        query: &JobsQuery,
        order: JobOrder,
    ) -> Result<wire::Page<wire::Job>, AppError> {
        let ordered = self.window_order(viewer, query, order).await?;
        let page: Vec<(u32, u64)> =
            ordered.iter().skip(order.offset).take(query.limit).map(|ordered| ordered.record).collect();
        let items = self.jobs_among(viewer, query, &page).await?;
        Ok(wire::Page {
            items,
            next_cursor: None,
            total: Some(ordered.len() as u64),
            offset: Some(order.offset as u64),
            archiving: self.archive_progress().now(),
        })
    }

    /// The window's jobs as keys in `order`: kept from a reading within [`ORDER_KEPT_S`], else read.
    async fn window_order(
        &self,
        viewer: &Viewer,
        query: &JobsQuery,
        order: JobOrder,
    ) -> Result<Arc<Vec<Ordered>>, AppError> {
        let reader = self.cluster(query.cluster.as_deref())?;
        let scope = self.scope(viewer, reader).await?;
        let key = format!(
            "{}|{scope:?}|{:?}|{:?}|{:?}|{}|{}",
            reader.cluster(),
            query.window,
            query.filter,
            query.blame,
            order.sort,
            order.descending
        );
        if let Some(kept) = self.inner.orders.orders.get(&key) {
            return Ok(kept);
        }
        let mut chunks = Box::pin(self.export_jobs(viewer, query).await?);
        let mut ordered: Vec<Ordered> = Vec::new();
        while let Some(chunk) = chunks.next().await {
            for job in chunk? {
                let record = (job.job_id_raw, u64::try_from(job.submit.timestamp()).unwrap_or(0));
                ordered.push(Ordered { key: order.sort.key(&job), record });
            }
            if ordered.len() > MAX_SORTED {
                return Err(AppError::invalid(
                    "start",
                    format!(
                        "the window holds more than {MAX_SORTED} jobs with these filters: too many to sort; \
                         narrow the window or filter"
                    ),
                ));
            }
        }
        ordered.sort_by(|a, b| a.key.compare(&b.key, order.descending));
        let ordered = Arc::new(ordered);
        self.inner.orders.orders.insert(key, Arc::clone(&ordered));
        Ok(ordered)
    }

    /// The listing's items of exactly these job records, in this order (one statement by slurmdbd's
    /// unique index, one read of our store); a record gone since the order was read is left out.
    async fn jobs_among(
        &self,
        viewer: &Viewer,
        query: &JobsQuery,
        records: &[(u32, u64)],
    ) -> Result<Vec<wire::Job>, AppError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let reader = self.cluster(query.cluster.as_deref())?;
        let scope = self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        // The records were chosen under the query's filters: only the window and the scope are asked again.
        let filter = JobFilter { among: Some(records.to_vec()), ..JobFilter::default() };
        let (found, _) = self.window_page(reader, &scope, query.window, &filter, &catalog, None, records.len()).await?;
        let mut items = self.listed_jobs(reader, found, &catalog, &[]).await;
        let places: HashMap<(u32, u64), usize> =
            records.iter().enumerate().map(|(place, &record)| (record, place)).collect();
        items.sort_by_cached_key(|job| {
            let submit = u64::try_from(job.submit.timestamp()).unwrap_or(0);
            places.get(&(job.job_id_raw, submit)).copied()
        });
        Ok(items)
    }
}
