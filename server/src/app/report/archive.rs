//! Keeping reports: a finished job's report is archived in our store once its late scrapes have
//! arrived, so it outlives VictoriaMetrics' retention, with a digest (mean utilisation, tensor
//! activity, blame) the job listing joins. Archived on read, at the plugin's job-end message, and by a
//! periodic sweep that every replica may run (the archive is keyed by job record, written idempotently).

use chrono::Utc;

use super::{DEFAULT_POINTS, ReportError};
use crate::app::App;
use crate::domain::cluster::ClusterName;
use crate::domain::ids::JobSelector;
use crate::domain::job::{JobRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::time::epoch;

/// Archives the reports of jobs that ended recently and have none yet. Every replica may run it: the
/// archive is keyed by job record and written idempotently.
pub async fn archive_recent(app: &App, lookback: chrono::Duration) -> Result<usize, ReportError> {
    let Some(store) = app.store() else { return Ok(0) };
    let reporter = app.reporter();
    let now = Utc::now();
    let delay = chrono::Duration::from_std(reporter.settings.archive_delay).unwrap_or_default();
    let mut archived = 0;
    for reader in app.readers() {
        let tres = reader.tres_catalog().await?;
        let window = TimeWindow::new(now - lookback, now).map_err(|e| ReportError::Window(e.to_string()))?;
        let mut cursor = None;
        loop {
            let (jobs, next) =
                reader.jobs_in_window(&ViewerScope::Staff, window, &Default::default(), &tres, cursor, 1000).await?;
            let due: Vec<&JobRecord> = jobs
                .iter()
                .filter(|job| job.state.base().is_finished() && job.time_end > 0 && tres.gpus(&job.tres_alloc) > 0)
                .filter(|job| epoch(job.time_end).is_some_and(|end| end + delay <= now))
                .collect();
            let keys: Vec<(u32, u64)> = due.iter().map(|job| (job.identity.id_job, job.time_submit)).collect();
            let done = store.archived_among(reader.cluster(), &keys).await?;
            for job in due.into_iter().filter(|job| !done.contains(&(job.identity.id_job, job.time_submit))) {
                let report = reporter.report_for(reader, job, &tres, DEFAULT_POINTS).await?;
                if report.metrics.status == slurmlens_wire::MetricsState::Ok {
                    archived += 1;
                }
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    Ok(archived)
}

/// Archives one job's report once `archive_delay` has passed (the plugin's job-end message), so a
/// report is kept promptly even between archiver rounds. Failures are logged; the archiver retries.
pub fn schedule_archive(app: App, cluster: ClusterName, job_id: u32) {
    tokio::spawn(async move {
        tokio::time::sleep(app.reporter().settings.archive_delay).await;
        let Some(reader) = app.readers().find(|reader| *reader.cluster() == cluster) else { return };
        let result = async {
            let Some((record, _)) = reader.job(&ViewerScope::Staff, JobSelector::Id(job_id)).await? else {
                return Ok::<_, ReportError>(());
            };
            let tres = reader.tres_catalog().await?;
            app.reporter().report_for(reader, &record, &tres, DEFAULT_POINTS).await?;
            Ok(())
        }
        .await;
        if let Err(error) = result {
            tracing::warn!(%error, job_id, "archiving at job end failed; the archiver will retry");
        }
    });
}
