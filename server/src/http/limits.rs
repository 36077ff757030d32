//! Bounds on heavy requests (job listings, reports, the Gantt, the grid, exports and the pages that
//! render them): at most `[limits] heavy_per_identity` at once per signed-in identity, and at most
//! `heavy_total` at once in all. One more is answered at once, 429 (that identity) or 503 (everyone),
//! with Retry-After: nothing waits in a queue, so a burst cannot hold slurmdbd's connections. A heavy
//! request holds its place while its body is sent (a streamed export runs as long as its body) and
//! gives it back just before the last frame, so a client that has read its answer may ask again.
//!
//! With `[limits] shared`, the bounds hold across the replicas on one database: a request that the
//! process's own bounds let in also takes a slot in MariaDB ([`SlotPool`]), held for the request and
//! freed when it ends or its replica dies. The process's bounds stay the first gate, so a flood is
//! refused before it reaches MariaDB; while MariaDB does not answer, the bounds are per process.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HttpState;
use super::error::ApiError;
use crate::app::Viewer;
use crate::config::LimitsConfig;
use crate::store::Store;
use crate::store::lease::{SlotPool, Slots, SlotsFull};

/// Seconds a refused client is asked to wait: heavy requests last seconds, not minutes.
const RETRY_AFTER_S: u32 = 2;

/// Whether `path` reads a window of jobs, a report or a page built from them.
fn is_heavy(method: &Method, path: &str) -> bool {
    let job_report = path.strip_prefix("/api/v1/jobs/").is_some_and(|rest| rest.ends_with("/report"));
    let job_page = path.strip_prefix("/jobs/").is_some_and(|rest| !rest.is_empty() && !rest.contains('/'));
    // A shared link's page and JSON are a job page and a report for whoever holds the link.
    let shared = path.starts_with("/shared/") || path.starts_with("/api/v1/shared/");
    (method == Method::GET || method == Method::HEAD)
        && (job_report
            || job_page
            || shared
            || matches!(
                path,
                "/api/v1/jobs"
                    | "/api/v1/jobs/export"
                    | "/web/v1/gantt"
                    | "/web/v1/gantt.svg"
                    | "/web/v1/grid"
                    | "/web/v1/jobs.csv"
                    | "/web/v1/jobs.json"
                    | "/"
                    | "/grid"
                    | "/jobs"
                    | "/api/v1/usage"
                    | "/api/v1/stats"
                    | "/usage"
                    | "/stats"
                    | "/api/v1/compare"
                    | "/compare"
            ))
}

/// The slots' lock names (`<group>:<n>`, scoped to the database by the store).
const TOTAL_GROUP: &str = "slurmlens:heavy";

/// The lock group of `identity`'s slots across replicas.
fn identity_group(identity: &str) -> String {
    format!("slurmlens:heavy:{identity}")
}

/// The heavy requests running now: one count per identity, and a semaphore for all of them; with
/// `[limits] shared`, the slots across replicas too.
pub(crate) struct HeavyLimiter {
    per_identity: u32,
    total_slots: u32,
    total: Arc<Semaphore>,
    running: Mutex<HashMap<String, u32>>,
    shared: Option<SlotPool>,
}

/// Why a heavy request was refused.
enum Refusal {
    Identity,
    Total,
}

/// One heavy request's place; leaving it (the response's body is sent, or the request was dropped)
/// frees it.
struct Slot {
    limiter: Arc<HeavyLimiter>,
    identity: Option<String>,
    _total: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(identity) = self.identity.take() else { return };
        let mut running = self.limiter.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = running.get_mut(&identity) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                // No entry outlives its last request, so the map holds only identities busy now.
                running.remove(&identity);
            }
        }
    }
}

impl HeavyLimiter {
    /// Bounds from `limits`, shared through `store` when `limits.shared` asks for it.
    pub(crate) fn new(limits: &LimitsConfig, store: Option<&Store>) -> Self {
        let total_slots = limits.heavy_total.get();
        Self {
            per_identity: limits.heavy_per_identity.get(),
            total_slots,
            total: Arc::new(Semaphore::new(total_slots as usize)),
            running: Mutex::new(HashMap::new()),
            // One connection per slot this process may hold: the process's own bound keeps it there.
            shared: store.filter(|_| limits.shared).map(|store| store.slot_pool(total_slots)),
        }
    }

    /// A place for a heavy request of `identity` (none: anonymous, bounded by the total only).
    fn enter(self: &Arc<Self>, identity: Option<String>) -> Result<Slot, Refusal> {
        let mut running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(identity) = &identity
            && running.get(identity).is_some_and(|count| *count >= self.per_identity)
        {
            return Err(Refusal::Identity);
        }
        let permit = Arc::clone(&self.total).try_acquire_owned().map_err(|_| Refusal::Total)?;
        if let Some(identity) = &identity {
            *running.entry(identity.clone()).or_default() += 1;
        }
        Ok(Slot { limiter: Arc::clone(self), identity, _total: permit })
    }
}

/// A response body that holds its request's [`Slot`] (and its shared slots) until its last frame.
/// They are freed *before* that frame goes out: a client that has read its whole answer and asks
/// again at once finds its place free, on this replica and on the others. A body dropped unsent
/// frees them on drop.
struct Holding {
    body: Body,
    held: Option<(Slot, Option<Slots>)>,
    /// The shared slots' release, under way, and the last frame it holds back (none: the end).
    releasing: Option<(futures::future::BoxFuture<'static, ()>, Option<http_body::Frame<Bytes>>)>,
}

impl Holding {
    fn new(body: Body, slot: Slot, shared: Option<Slots>) -> Self {
        Self { body, held: Some((slot, shared)), releasing: None }
    }

    /// Frees the process's slot now and starts releasing the shared ones, holding `last` back.
    fn start_release(&mut self, last: Option<http_body::Frame<Bytes>>) {
        let shared = self.held.take().and_then(|(slot, shared)| {
            drop(slot);
            shared
        });
        let release: futures::future::BoxFuture<'static, ()> = match shared {
            Some(slots) => Box::pin(async move {
                if let Err(error) = slots.release().await {
                    tracing::warn!(%error, "releasing a heavy request's shared slots");
                }
            }),
            None => Box::pin(std::future::ready(())),
        };
        self.releasing = Some((release, last));
    }
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.releasing.is_none() && this.held.is_some() {
            match Pin::new(&mut this.body).poll_frame(context) {
                Poll::Ready(Some(Ok(frame))) if this.body.is_end_stream() => this.start_release(Some(frame)),
                Poll::Ready(None) => this.start_release(None),
                other => return other,
            }
        }
        match &mut this.releasing {
            Some((release, _)) => {
                std::task::ready!(futures::FutureExt::poll_unpin(release, context));
                let last = this.releasing.take().and_then(|(_, last)| last);
                Poll::Ready(last.map(Ok))
            }
            // Released and the last frame sent.
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        // Not before the slots are released: the release runs inside `poll_frame`.
        self.held.is_none() && self.releasing.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl HeavyLimiter {
    /// Heavy requests running in this process now, and the most that may.
    pub(crate) fn in_use(&self) -> (u32, u32) {
        let free = u32::try_from(self.total.available_permits()).unwrap_or(u32::MAX);
        (self.total_slots.saturating_sub(free), self.total_slots)
    }

    /// The request's slots across replicas, when they are shared; `None` when they are not, or when
    /// MariaDB did not answer (then the process's bounds alone hold, and the log says so).
    async fn enter_shared(&self, identity: Option<&str>) -> Result<Option<Slots>, Refusal> {
        let Some(pool) = &self.shared else { return Ok(None) };
        let group = identity.map(identity_group);
        match pool.take_slots(group.as_deref(), self.per_identity, TOTAL_GROUP, self.total_slots).await {
            Ok(Ok(slots)) => Ok(Some(slots)),
            Ok(Err(SlotsFull::Identity)) => Err(Refusal::Identity),
            Ok(Err(SlotsFull::Total)) => Err(Refusal::Total),
            Err(error) => {
                tracing::warn!(%error, "shared heavy-request slots unavailable; bounding this request per process");
                Ok(None)
            }
        }
    }
}

/// The middleware, inside `auth::identify` (it keys on the identity that found).
pub(crate) async fn limit_heavy(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    if !is_heavy(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    // Anonymous requests are bounded by the total only: where anonymous viewers see anything at all
    // (a lab, a demo), they share one identity, and elsewhere they are refused before any work.
    let identity = match request.extensions().get::<Viewer>() {
        Some(Viewer::Signed(identity)) => Some(identity.user.clone()),
        _ => None,
    };
    let limiter = Arc::clone(&state.heavy);
    let refusal = match limiter.enter(identity.clone()) {
        Ok(slot) => match limiter.enter_shared(identity.as_deref()).await {
            Ok(shared) => {
                return next.run(request).await.map(|body| Body::new(Holding::new(body, slot, shared)));
            }
            Err(refusal) => refusal,
        },
        Err(refusal) => refusal,
    };
    let limits = state.app.limits();
    crate::telemetry::global().heavy_refused(match refusal {
        Refusal::Identity => "identity",
        Refusal::Total => "total",
    });
    let error = match refusal {
        Refusal::Identity => ApiError::RateLimited(format!(
            "at most {} heavy requests (job listings, reports, Gantt, grid, exports) may run at once per \
             person; wait for one to finish",
            limits.heavy_per_identity
        )),
        Refusal::Total => ApiError::Overloaded(format!(
            "the server is running its most heavy requests at once ({}); try again shortly",
            limits.heavy_total
        )),
    };
    let mut response = error.into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_routes_are_the_window_readers_and_their_pages() {
        for path in [
            "/api/v1/jobs",
            "/api/v1/jobs/export",
            "/api/v1/jobs/123/report",
            "/web/v1/gantt",
            "/web/v1/jobs.csv",
            "/",
            "/jobs/8",
            "/shared/sls_0",
            "/api/v1/shared/sls_0",
        ] {
            assert!(is_heavy(&Method::GET, path), "{path}");
        }
        for path in ["/api/v1/health", "/api/v1/jobs/123", "/api/v1/nodes", "/web/style.css", "/tokens", "/pkg/x.js"] {
            assert!(!is_heavy(&Method::GET, path), "{path}");
        }
        assert!(!is_heavy(&Method::POST, "/api/v1/jobs"));
    }

    #[test]
    fn a_slot_is_freed_before_its_answers_last_frame_goes_out() {
        let limits = LimitsConfig { heavy_per_identity: 1.try_into().expect("non-zero"), ..LimitsConfig::default() };
        let limiter = Arc::new(HeavyLimiter::new(&limits, None));
        let slot = limiter.enter(Some("alice".into())).ok().expect("a free slot");
        let mut body = Holding::new(Body::from("the whole answer"), slot, None);
        assert!(!body.is_end_stream());
        let mut next = || futures::executor::block_on(std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)));
        let last = next().expect("a frame").expect("not an error");
        assert_eq!(last.into_data().expect("data"), "the whole answer");
        // The client may hold the whole answer now and ask again: alice's one slot is free already.
        assert!(limiter.enter(Some("alice".into())).is_ok());
        assert!(next().is_none());
    }

    #[test]
    fn a_slot_is_freed_when_its_request_ends_and_the_identity_forgotten() {
        let limits = LimitsConfig {
            heavy_per_identity: 2.try_into().expect("non-zero"),
            heavy_total: 3.try_into().expect("non-zero"),
            ..LimitsConfig::default()
        };
        let limiter = Arc::new(HeavyLimiter::new(&limits, None));
        let first = limiter.enter(Some("alice".into())).ok();
        let second = limiter.enter(Some("alice".into())).ok();
        assert!(matches!(limiter.enter(Some("alice".into())), Err(Refusal::Identity)));
        let bob = limiter.enter(Some("bob".into())).ok();
        assert!(matches!(limiter.enter(None), Err(Refusal::Total)));
        drop((first, bob));
        assert!(limiter.enter(Some("alice".into())).is_ok());
        drop(second);
        assert!(limiter.running.lock().expect("not poisoned").is_empty());
    }
}
