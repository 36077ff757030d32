//! How often a report is made: one computation of a job's report at a time (single flight), a running
//! job's report kept briefly for the viewers who follow, one job-end archive per job at a time with a
//! bound on those running at once, and the points of a timeline budgeted by the job's GPUs.
//!
//! A report sends every VictoriaMetrics query of the job at once: for a 256-GPU job that is a heavy
//! request, and a page left open by twenty people, or 256 nodes each posting their job-end record,
//! must not multiply it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use slurmlens_wire as wire;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::{DEFAULT_POINTS, ReportError};
use crate::domain::cluster::ClusterName;

/// Job-end archives made at once; the others wait for a slot.
pub const ARCHIVES_AT_ONCE: usize = 2;
/// Most timeline points of one report, all its GPUs together (`points` × GPUs): a 64-GPU job gets up
/// to 1000 points per series, a 512-GPU job 125, so no report grows to hundreds of megabytes.
pub const POINTS_BUDGET: usize = 64_000;
/// The fewest points per series the budget leaves any job (beyond 2,133 GPUs it is exceeded).
pub const MIN_BUDGET_POINTS: usize = 30;

/// The longest a running job's report is served again (`[report] live_cache_s` beyond it is capped).
pub const MAX_LIVE_CACHE: Duration = Duration::from_secs(600);

/// What one computation is for: the job (its submit time tells a reused id apart) and the points.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct FlightKey {
    pub cluster: ClusterName,
    pub job_id: u32,
    pub time_submit: u64,
    pub points: usize,
}

/// A report made, and when; a running job's is served again for `live_cache`.
struct Made {
    at: Instant,
    live: bool,
    report: wire::JobReport,
}

type Slot = Arc<tokio::sync::Mutex<Option<Made>>>;

/// The reporter's flights: shared by every clone of the [`super::Reporter`].
pub(super) struct Flights {
    slots: Mutex<HashMap<FlightKey, Slot>>,
    live_cache: Duration,
    archiving: Mutex<HashSet<(ClusterName, u32)>>,
    archive_workers: Semaphore,
    /// Reports computed since start (not served from a flight, the live cache or the archive).
    computed: AtomicU64,
}

impl Flights {
    pub(super) fn new(live_cache: Duration) -> Self {
        Self {
            slots: Mutex::default(),
            live_cache: live_cache.min(MAX_LIVE_CACHE),
            archiving: Mutex::default(),
            archive_workers: Semaphore::new(ARCHIVES_AT_ONCE),
            computed: AtomicU64::new(0),
        }
    }

    /// The report `key` names: made by `make` unless another request is making it (then that one's,
    /// once made) or a running job's was made within `live_cache`. `live` says the job still runs.
    pub(super) async fn run<F, Fut>(&self, key: FlightKey, live: bool, make: F) -> Result<wire::JobReport, ReportError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<wire::JobReport, ReportError>>,
    {
        let asked = Instant::now();
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            // Slots no one waits on and whose report may not be served again are dropped.
            slots.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot.try_lock().is_ok_and(|made| made.as_ref().is_some_and(|made| self.servable(made)))
            });
            slots.entry(key).or_default().clone()
        };
        let mut made = slot.lock().await;
        if let Some(done) = made.as_ref()
            && (done.at >= asked || self.servable(done))
        {
            return Ok(done.report.clone());
        }
        self.computed.fetch_add(1, Ordering::Relaxed);
        let report = make().await?;
        *made = Some(Made { at: Instant::now(), live, report: report.clone() });
        Ok(report)
    }

    /// A running job's report within `live_cache`; a finished job's is archived instead.
    fn servable(&self, made: &Made) -> bool {
        made.live && made.at.elapsed() < self.live_cache
    }

    /// Claims the job-end archive of `cluster`'s job `job_id`: `None` while one is already scheduled.
    /// The claim ends when the returned guard drops.
    pub(super) fn claim_archive(self: &Arc<Self>, cluster: &ClusterName, job_id: u32) -> Option<ArchiveClaim> {
        let key = (cluster.clone(), job_id);
        let fresh = self.archiving.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone());
        fresh.then(|| ArchiveClaim { flights: self.clone(), key })
    }

    /// A slot among the [`ARCHIVES_AT_ONCE`] job-end archives.
    pub(super) async fn archive_worker(&self) -> Option<SemaphorePermit<'_>> {
        self.archive_workers.acquire().await.ok()
    }
}

impl super::Reporter {
    /// Reports this process computed since it started (each costs the job's metric queries): what
    /// single flight, the live cache, the archive and the job-end lease spare.
    pub fn computations(&self) -> u64 {
        self.flights.computed.load(Ordering::Relaxed)
    }

    /// Job-end archives scheduled in this process and not finished (or given up to another replica).
    pub fn job_end_archives_pending(&self) -> usize {
        self.flights.archiving.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A scheduled job-end archive; dropping it lets the job's next end record schedule another.
pub(super) struct ArchiveClaim {
    flights: Arc<Flights>,
    key: (ClusterName, u32),
}

impl Drop for ArchiveClaim {
    fn drop(&mut self) {
        self.flights.archiving.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
    }
}

/// The points per series a report of `gpus` GPUs is made with, asked for `requested`: a report due
/// for the archive always at [`DEFAULT_POINTS`] (the first reader does not choose the archive's
/// resolution), and never beyond [`POINTS_BUDGET`] for all its GPUs together.
pub fn budgeted_points(gpus: u64, requested: usize, for_archive: bool) -> usize {
    let requested = if for_archive { DEFAULT_POINTS } else { requested };
    let gpus = usize::try_from(gpus.max(1)).unwrap_or(usize::MAX);
    requested.min((POINTS_BUDGET / gpus).max(MIN_BUDGET_POINTS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn points_are_budgeted_by_gpus_and_the_archive_takes_the_default() {
        assert_eq!(budgeted_points(8, 2000, false), 2000);
        assert_eq!(budgeted_points(64, 2000, false), 1000);
        assert_eq!(budgeted_points(512, 2000, false), 125);
        assert_eq!(budgeted_points(512, 60, false), 60);
        assert_eq!(budgeted_points(8192, 2000, false), MIN_BUDGET_POINTS);
        assert_eq!(budgeted_points(0, 500, false), 500);
        assert_eq!(budgeted_points(8, 2, true), DEFAULT_POINTS);
        assert_eq!(budgeted_points(8, 2000, true), DEFAULT_POINTS);
        assert_eq!(budgeted_points(1024, 2, true), 62);
    }

    fn key(points: usize) -> FlightKey {
        FlightKey { cluster: "lab".parse().expect("valid"), job_id: 7, time_submit: 1, points }
    }

    fn report() -> wire::JobReport {
        use crate::app::report::fixtures::{END, START, at, failed_job};
        use crate::domain::tres::{TresCatalog, TresId, TresKind};
        let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
        let catalog = TresCatalog::new([kind(1, "cpu", ""), kind(4, "node", ""), kind(1001, "gres", "gpu")]);
        let job = crate::app::wire_map::job(&failed_job(), &catalog, "lab", END as u64);
        super::super::unassembled(job, wire::ReportSource::Live, at(END), Some((at(START), at(END))))
    }

    #[tokio::test]
    async fn concurrent_askers_share_one_computation_and_a_live_report_is_served_again_briefly() {
        let flights = Flights::new(Duration::from_secs(30));
        let made = AtomicUsize::new(0);
        let make = || async {
            made.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok(report())
        };
        let askers = (0..10).map(|_| flights.run(key(120), true, make));
        let answers = futures::future::join_all(askers).await;
        assert!(answers.iter().all(Result::is_ok));
        assert_eq!(made.load(Ordering::SeqCst), 1, "one computation for ten askers");
        flights.run(key(120), true, make).await.expect("cached");
        assert_eq!(made.load(Ordering::SeqCst), 1, "a live report is served again within live_cache");
        flights.run(key(60), true, make).await.expect("made");
        assert_eq!(made.load(Ordering::SeqCst), 2, "other points are another computation");
        // A finished job's report is not kept: the archive serves it next.
        flights.run(key(30), false, make).await.expect("made");
        flights.run(key(30), false, make).await.expect("made");
        assert_eq!(made.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn one_job_end_archive_is_scheduled_at_a_time() {
        let flights = Arc::new(Flights::new(Duration::ZERO));
        let lab: ClusterName = "lab".parse().expect("valid");
        let claim = flights.claim_archive(&lab, 7).expect("the first claim");
        assert!(flights.claim_archive(&lab, 7).is_none(), "the same job again");
        assert!(flights.claim_archive(&lab, 8).is_some(), "another job");
        drop(claim);
        assert!(flights.claim_archive(&lab, 7).is_some(), "once the first archive is done");
    }
}
