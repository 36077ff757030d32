//! Keeping reports: a finished job's report is archived in our store once its late scrapes have
//! arrived, so it outlives VictoriaMetrics' retention, with a digest (mean utilisation, tensor
//! activity, blame) the job listing joins. Archived on read, at the plugin's job-end message, and by
//! the archiver, which walks every finished job within the backfill window (VictoriaMetrics'
//! retention) in the background: newest first, jobs that ended badly before the rest, a few reports
//! at a time with a pause after each. Every replica may run it: the archive is keyed by job record and
//! written idempotently.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use slurmlens_wire::MetricsState;

use super::{DEFAULT_POINTS, ReportError, Reporter};
use crate::app::App;
use crate::domain::blame::ended_badly;
use crate::domain::cluster::ClusterName;
use crate::domain::ids::JobSelector;
use crate::domain::job::{JobFilter, JobRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::time::epoch;
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::Store;

/// Jobs read from slurmdbd per page: one page query at a time, its due reports made before the next.
const PAGE: usize = 1000;
/// Tries at a report the metrics source did not answer for, before the archiver gives up on it.
pub const MAX_TRIES: u16 = 3;
/// A full round over the whole backfill window this often; between them, rounds look back only to
/// the previous round's start (a job that ended since overlaps that window).
const FULL_ROUND_EVERY: chrono::Duration = chrono::Duration::hours(24);
/// How far before the previous round's start an incremental round looks, beyond `archive_delay`.
const OVERLAP: chrono::Duration = chrono::Duration::minutes(10);

/// How the archiver walks finished jobs and paces itself.
#[derive(Debug, Clone)]
pub struct ArchiverSettings {
    /// How far back a full round looks: VictoriaMetrics' retention (an older job can only be "no data").
    pub backfill: chrono::Duration,
    /// Reports made at once.
    pub concurrency: usize,
    /// Each report's pause after it is made, before its slot takes the next job.
    pub pause: Duration,
}

/// One round: the jobs overlapping `window`, and at most `max_reports` reports (none: all due).
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub window: TimeWindow,
    pub max_reports: Option<usize>,
    /// The moment the round reads "finished" against: a job is due once it ended `archive_delay`
    /// before it. The archiver passes the round's start; a caller that counted the due jobs itself
    /// passes the moment it counted at, so a job ending meanwhile does not join the round.
    pub as_of: DateTime<Utc>,
    /// Whether the job listing shows how far it is ([`App::archive_progress`]): the server's first round.
    pub published: bool,
}

/// How far the round the job listing shows is ([`Round::published`]); empty between rounds.
#[derive(Debug, Default)]
pub struct Progress(std::sync::Mutex<Option<slurmlens_wire::Archiving>>);

impl Progress {
    /// The round in progress, if one is published.
    pub fn now(&self) -> Option<slurmlens_wire::Archiving> {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, value: Option<slurmlens_wire::Archiving>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = value;
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundSummary {
    /// Finished jobs in the window that had no archived report (nor a given-up one) when read.
    pub due: usize,
    /// Reports archived with metrics.
    pub archived: usize,
    /// Reports archived without any metrics of the job's GPUs ("no data").
    pub no_data: usize,
    /// Reports the metrics source did not answer for: tried again next round, up to [`MAX_TRIES`].
    pub unavailable: usize,
    /// Of the reports made, those of jobs that ended badly (made first).
    pub ended_badly: usize,
    /// Another replica held the archiver's lease: this round did nothing.
    pub skipped: bool,
}

impl RoundSummary {
    /// Reports made and archived, with or without metrics.
    pub fn made(&self) -> usize {
        self.archived + self.no_data
    }
}

/// The lease a replica holds while it runs an archiver round ([`crate::store::Store::try_lease`]).
pub const ARCHIVER_LEASE: &str = "slurmlens-archiver";

/// The periodic archiver: a full round over the backfill window first and once a day, and between
/// them rounds that look back to the previous round's start. A round that fails is repeated whole.
pub struct Archiver {
    settings: ArchiverSettings,
    last_round: Option<DateTime<Utc>>,
    last_full: Option<DateTime<Utc>>,
}

impl Archiver {
    pub fn new(settings: ArchiverSettings) -> Self {
        Self { settings, last_round: None, last_full: None }
    }

    /// Runs the next round and returns what it did.
    pub async fn round(&mut self, app: &App) -> Result<RoundSummary, ReportError> {
        let now = Utc::now();
        let full = self.last_full.is_none_or(|at| now - at >= FULL_ROUND_EVERY);
        let delay = chrono::Duration::from_std(app.reporter().settings.archive_delay).unwrap_or_default();
        let since = match self.last_round {
            Some(previous) if !full => previous - delay - OVERLAP,
            _ => now - self.settings.backfill,
        };
        let window = TimeWindow::new(since, now).map_err(|e| ReportError::Window(e.to_string()))?;
        let round = Round { window, max_reports: None, as_of: now, published: self.last_round.is_none() };
        let summary = archive_round(app, &self.settings, round).await?;
        if summary.skipped {
            // Another replica archives: when this one takes over, it starts with a full round.
            return Ok(summary);
        }
        self.last_round = Some(now);
        if full {
            self.last_full = Some(now);
        }
        Ok(summary)
    }
}

/// One archiver round over `round.window`: first the jobs that ended badly, then the other finished GPU
/// jobs, each pass over every cluster, newest submission first, skipping jobs already archived
/// or given up on. A report without metrics is archived as "no data"; one the metrics source did not
/// answer for is counted as a try. Several such in a row stop the round: the source is down.
pub async fn archive_round(app: &App, settings: &ArchiverSettings, round: Round) -> Result<RoundSummary, ReportError> {
    let mut walk = Walk {
        settings,
        now: round.as_of,
        budget: round.max_reports.unwrap_or(usize::MAX),
        summary: RoundSummary::default(),
        unanswered: Vec::new(),
        streak: 0,
        progress: round.published.then(|| app.archive_progress()),
        counted: false,
    };
    let Some(store) = app.store() else { return Ok(walk.summary) };
    if !app.reporter().has_metrics_source() {
        return Ok(walk.summary);
    }
    // One replica archives at a time; the others' rounds wait for the next turn.
    let Some(lease) = store.try_lease(ARCHIVER_LEASE).await? else {
        return Ok(RoundSummary { skipped: true, ..RoundSummary::default() });
    };
    walk.publish();
    let walked = walk.passes(app, store, round.window).await;
    if let Some(progress) = walk.progress {
        progress.set(None);
    }
    walked?;
    walk.record_unanswered(store).await?;
    lease.release().await?;
    Ok(walk.summary)
}

/// The two passes of a round, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Jobs that ended badly, GPUs or not: the listing's "Failure" column fills first.
    EndedBadly,
    /// The other finished GPU jobs.
    Rest,
}

impl Pass {
    fn takes(self, job: &JobRecord, gpus: u64) -> bool {
        let bad = ended_badly(job.state.base(), job.time_start > 0);
        match self {
            Self::EndedBadly => bad,
            Self::Rest => !bad && gpus > 0,
        }
    }
}

/// How one report went.
enum Outcome {
    Archived,
    NoData,
    Unavailable(String),
}

/// A round in progress.
struct Walk<'a> {
    settings: &'a ArchiverSettings,
    now: DateTime<Utc>,
    /// Reports this round may still make.
    budget: usize,
    summary: RoundSummary,
    /// Jobs the metrics source did not answer for: their tries are counted once the round shows the
    /// source answers (a source that is down costs no job a try).
    unanswered: Vec<(ClusterName, u32, u64, String)>,
    /// Unanswered reports in a row.
    streak: usize,
    /// Where the job listing reads how far the round is, if it is published.
    progress: Option<&'a Progress>,
    /// Whether the first pass is over: `summary.due` is then the round's whole count.
    counted: bool,
}

impl Walk<'_> {
    /// The two passes, each over every cluster's window: the first counts every due job.
    async fn passes(&mut self, app: &App, store: &Store, window: TimeWindow) -> Result<(), ReportError> {
        let mut clusters = Vec::new();
        for reader in app.readers() {
            clusters.push((reader, reader.tres_catalog().await?));
        }
        for pass in [Pass::EndedBadly, Pass::Rest] {
            for (reader, tres) in &clusters {
                self.pass(app.reporter(), store, reader, tres, window, pass).await?;
            }
            self.counted = true;
            self.publish();
        }
        Ok(())
    }

    /// One pass over the window, a page at a time.
    async fn pass(
        &mut self,
        reporter: &Reporter,
        store: &Store,
        reader: &SlurmDbd,
        tres: &TresCatalog,
        window: TimeWindow,
        pass: Pass,
    ) -> Result<(), ReportError> {
        let mut cursor = None;
        while self.budget > 0 {
            let (jobs, next) =
                reader.jobs_in_window(&ViewerScope::Staff, window, &JobFilter::default(), tres, cursor, PAGE).await?;
            let due = self.due_among(reporter, store, reader, tres, &jobs).await?;
            if pass == Pass::EndedBadly {
                self.summary.due += due.len();
                self.publish();
            }
            let mine: Vec<&JobRecord> =
                due.into_iter().filter(|job| pass.takes(job, tres.gpus(&job.tres_alloc))).take(self.budget).collect();
            self.budget -= mine.len();
            let pause = self.settings.pause;
            // The futures are made before the stream (they start only when polled), so that no
            // closure is part of the stream's type: the archiver's future stays `Send` for any lifetime.
            let reports: Vec<_> =
                mine.iter().map(|job| report_then_pause(reporter, reader, tres, job, pause)).collect();
            let mut outcomes = futures::stream::iter(reports).buffer_unordered(self.settings.concurrency.max(1));
            while let Some((job, report)) = outcomes.next().await {
                let metrics = report?.metrics;
                let outcome = match metrics.status {
                    MetricsState::Ok => Outcome::Archived,
                    MetricsState::NoData => Outcome::NoData,
                    MetricsState::Unavailable => Outcome::Unavailable(metrics.message.unwrap_or_default()),
                };
                let made = !matches!(outcome, Outcome::Unavailable(_));
                self.tally(reader.cluster(), job, outcome, pass)?;
                if made {
                    self.publish();
                }
                // The rules tag the job as its report is kept: listing pages never read scripts.
                if made && let Err(error) = crate::app::tags::apply_rules(store, reader, job).await {
                    tracing::warn!(%error, job = job.identity.id_job, "job tag rules failed");
                }
            }
            if !mine.is_empty() {
                let summary = &self.summary;
                tracing::info!(
                    cluster = %reader.cluster(),
                    no_data = summary.no_data,
                    ended_badly = summary.ended_badly,
                    unavailable = summary.unavailable,
                    "archived {} of {} due jobs",
                    summary.made(),
                    summary.due
                );
                if self.summary.made() > 0 {
                    self.record_unanswered(store).await?;
                }
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        Ok(())
    }

    /// The finished jobs of a page whose report is due (GPU jobs, and any job that ended badly), less
    /// those archived or given up on.
    async fn due_among<'j>(
        &self,
        reporter: &Reporter,
        store: &Store,
        reader: &SlurmDbd,
        tres: &TresCatalog,
        jobs: &'j [JobRecord],
    ) -> Result<Vec<&'j JobRecord>, ReportError> {
        let delay = chrono::Duration::from_std(reporter.settings.archive_delay).unwrap_or_default();
        let due: Vec<&JobRecord> = jobs
            .iter()
            .filter(|job| job.state.run_is_over() && job.time_end > 0)
            .filter(|job| epoch(job.time_end).is_some_and(|end| end + delay <= self.now))
            .filter(|job| tres.gpus(&job.tres_alloc) > 0 || ended_badly(job.state.base(), job.time_start > 0))
            .collect();
        let keys: Vec<(u32, u64)> = due.iter().map(|job| (job.identity.id_job, job.time_submit)).collect();
        // Archived by an earlier generation: made again (`GENERATION`), as a read would.
        let archived = store.current_among(reader.cluster(), &keys, super::GENERATION).await?;
        let given_up = store.given_up_among(reader.cluster(), &keys, MAX_TRIES).await?;
        Ok(due
            .into_iter()
            .filter(|job| {
                let key = (job.identity.id_job, job.time_submit);
                !archived.contains(&key) && !given_up.contains(&key)
            })
            .collect())
    }

    fn tally(
        &mut self,
        cluster: &ClusterName,
        job: &JobRecord,
        outcome: Outcome,
        pass: Pass,
    ) -> Result<(), ReportError> {
        match outcome {
            Outcome::Archived => self.summary.archived += 1,
            Outcome::NoData => self.summary.no_data += 1,
            Outcome::Unavailable(message) => {
                self.summary.unavailable += 1;
                self.streak += 1;
                // A few in a row beyond what is in flight at once: the source is down, not this job.
                if self.streak > self.settings.concurrency.max(1) * 2 + 2 {
                    return Err(ReportError::MetricsUnavailable(message));
                }
                self.unanswered.push((cluster.clone(), job.identity.id_job, job.time_submit, message));
                return Ok(());
            }
        }
        self.streak = 0;
        if pass == Pass::EndedBadly {
            self.summary.ended_badly += 1;
        }
        Ok(())
    }

    /// Tells the job listing what the round has found and made so far, if it is published.
    fn publish(&self) {
        if let Some(progress) = self.progress {
            progress.set(Some(slurmlens_wire::Archiving {
                since: self.now.timestamp(),
                due: self.summary.due as u64,
                counted: self.counted,
                made: self.summary.made() as u64,
            }));
        }
    }

    /// Counts a try for each job the source did not answer for.
    async fn record_unanswered(&mut self, store: &Store) -> Result<(), ReportError> {
        for (cluster, job_id, time_submit, message) in std::mem::take(&mut self.unanswered) {
            store.record_attempt(&cluster, job_id, time_submit, &message).await?;
        }
        Ok(())
    }
}

/// One job's report (archived by [`Reporter::report_for`] when due), then the archiver's pause.
async fn report_then_pause<'j>(
    reporter: &Reporter,
    reader: &SlurmDbd,
    tres: &TresCatalog,
    job: &'j JobRecord,
    pause: Duration,
) -> (&'j JobRecord, Result<slurmlens_wire::JobReport, ReportError>) {
    let report = reporter.report_for(reader, job, tres, DEFAULT_POINTS).await;
    tokio::time::sleep(pause).await;
    (job, report)
}

/// The lease of `cluster`'s job `job_id`'s job-end archive ([`crate::store::Store::try_lease`]).
fn job_end_lease(cluster: &ClusterName, job_id: u32) -> String {
    format!("slurmlens-job-end:{cluster}:{job_id}")
}

/// Archives one job's report once `archive_delay` has passed (the plugin's job-end message), so a
/// report is kept promptly even between archiver rounds. A job's end comes from each of its nodes (and
/// again on a spool replay), to any replica: one archive per job is scheduled at a time in a process,
/// one replica makes it (the job's lease), and at most [`super::ARCHIVES_AT_ONCE`] run at once.
/// Failures are logged; the archiver retries.
pub fn schedule_archive(app: App, cluster: ClusterName, job_id: u32) {
    let Some(claim) = app.reporter().flights.claim_archive(&cluster, job_id) else { return };
    tokio::spawn(async move {
        let _claim = claim;
        tokio::time::sleep(app.reporter().settings.archive_delay).await;
        let Some(_worker) = app.reporter().flights.archive_worker().await else { return };
        let Some(reader) = app.readers().find(|reader| *reader.cluster() == cluster) else { return };
        // Every replica behind the load balancer may get this job's end records: the one holding the
        // job's lease archives, the others leave it (the report is read from the archive first, so
        // one that takes the lease after the archive is written makes nothing).
        let lease_name = job_end_lease(&cluster, job_id);
        let _lease = match app.store() {
            Some(store) => match store.try_lease(&lease_name).await {
                Ok(Some(lease)) => Some(lease),
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(%error, job_id, "job-end lease unavailable; archiving without it");
                    None
                }
            },
            None => None,
        };
        let result = async {
            let Some((record, _)) = reader.job(&ViewerScope::Staff, JobSelector::Id(job_id)).await? else {
                return Ok::<_, ReportError>(());
            };
            let tres = reader.tres_catalog().await?;
            app.reporter().report_for(reader, &record, &tres, DEFAULT_POINTS).await?;
            if let Some(store) = app.store()
                && let Err(error) = crate::app::tags::apply_rules(store, reader, &record).await
            {
                tracing::warn!(%error, job_id, "job tag rules failed");
            }
            Ok(())
        }
        .await;
        if let Err(error) = result {
            tracing::warn!(%error, job_id, "archiving at job end failed; the archiver will retry");
        }
    });
}
