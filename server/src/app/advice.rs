//! Advice at submission: at most one line from the submitting user's own latest finished runs of the
//! same job name (`domain/advice.rs` holds the rules), or nothing. The submitter is a signed-in viewer
//! or the uid of a MUNGE credential the plugin made; either way only their own jobs are read. The
//! answer comes within the site's deadline or not at all: past it, there is no advice, never an error.

use std::time::Duration;

use crate::app::{App, AppError, Viewer};
use crate::config::AdviceConfig;
use crate::domain::advice::{self, Advice, Ask, BUSY_GPU_UTIL, JobName, MAX_RUNS, PastRun};
use crate::domain::job::JobRecord;
use crate::sources::munge::{ADVICE_PAYLOAD, Munge, MungeError};
use crate::sources::slurmdbd::SlurmDbd;

/// The site's advice settings (`[advice]`).
#[derive(Debug, Clone)]
pub struct AdviceSettings {
    pub enabled: bool,
    pub deadline: Duration,
    pub look_back: Duration,
    pub munge: Munge,
}

impl Default for AdviceSettings {
    fn default() -> Self {
        Self::from_config(&AdviceConfig::default())
    }
}

impl AdviceSettings {
    pub fn from_config(config: &AdviceConfig) -> Self {
        Self {
            enabled: config.enabled,
            deadline: Duration::from_millis(config.deadline_ms),
            look_back: Duration::from_secs(u64::from(config.look_back_days) * 86_400),
            munge: Munge { unmunge: config.unmunge.clone(), socket: config.munge_socket.clone() },
        }
    }
}

/// Who asks for advice.
#[derive(Debug, Clone, Copy)]
pub enum Submitter<'a> {
    /// A signed-in viewer (a personal token, the site's proxy).
    Viewer(&'a Viewer),
    /// A MUNGE credential (`MUNGE:…:`) the plugin made as the submitting user.
    Munge(&'a str),
}

/// What the submitting command asked for.
#[derive(Debug, Clone)]
pub struct AdviceQuery {
    pub cluster: Option<String>,
    pub job_name: JobName,
    pub ask: Ask,
}

/// A user, and the uids their jobs run under.
struct Person {
    user: String,
    uids: Vec<u32>,
}

impl App {
    /// At most one line of advice for `submitter` submitting `query`. A bad credential is
    /// `Unauthorized` whatever the site's settings; past the deadline, or with advice off (the
    /// site's or the user's), the answer is `None`.
    pub async fn advice(&self, submitter: Submitter<'_>, query: &AdviceQuery) -> Result<Option<Advice>, AppError> {
        let settings = self.advice_settings();
        let reader = self.cluster(query.cluster.as_deref())?;
        let deadline = tokio::time::Instant::now() + settings.deadline;
        let person = match submitter {
            Submitter::Viewer(viewer) => {
                let identity = viewer.identity().ok_or_else(|| {
                    AppError::Unauthorized(
                        "advice is for a signed-in user, a personal token or a MUNGE credential".into(),
                    )
                })?;
                Some(Person { user: identity.user.clone(), uids: Vec::new() })
            }
            Submitter::Munge(credential) => {
                // A credential not verified in time gets no advice, as a late history does.
                let Ok(decoded) = tokio::time::timeout_at(deadline, settings.munge.decode(credential)).await else {
                    return Ok(self.late());
                };
                let decoded = decoded.map_err(|error| match error {
                    MungeError::Refused(message) => AppError::Unauthorized(message),
                    MungeError::Unavailable(cause) => AppError::Unavailable { service: "munged", cause },
                })?;
                if decoded.payload != ADVICE_PAYLOAD {
                    return Err(AppError::Unauthorized(format!(
                        "the MUNGE credential was not made for slurmlens advice (payload `{ADVICE_PAYLOAD}`)"
                    )));
                }
                match tokio::time::timeout_at(deadline, reader.user_of_uid(decoded.uid)).await {
                    Ok(user) => user?.map(|user| Person { user, uids: vec![decoded.uid] }),
                    Err(_) => return Ok(self.late()),
                }
            }
        };
        if !settings.enabled {
            return Ok(None);
        }
        // A uid that never ran a job here has no history to advise from.
        let Some(person) = person else { return Ok(None) };
        match tokio::time::timeout_at(deadline, self.advise_person(reader, person, query, settings.look_back)).await {
            Ok(answer) => answer,
            Err(_) => Ok(self.late()),
        }
    }

    /// No advice: the history was not read within the deadline.
    fn late(&self) -> Option<Advice> {
        tracing::info!("advice: not answered within [advice] deadline_ms");
        None
    }

    async fn advise_person(
        &self,
        reader: &SlurmDbd,
        mut person: Person,
        query: &AdviceQuery,
        look_back: Duration,
    ) -> Result<Option<Advice>, AppError> {
        if let Some(store) = self.store()
            && store.advice_opted_out(&person.user).await?
        {
            return Ok(None);
        }
        if person.uids.is_empty() {
            person.uids = reader.uids_of_user(&person.user).await?;
        }
        let since = super::now_epoch().saturating_sub(look_back.as_secs());
        let limit = u32::try_from(MAX_RUNS).unwrap_or(u32::MAX);
        let mut records = reader.recent_runs(&person.uids, query.job_name.as_str(), since, limit).await?;
        // The uids are slurmdbd's way in to the person's runs; a run under one of them that another
        // user's association holds is not theirs to be advised from.
        records.retain(|record| record.user == person.user);
        if records.len() < advice::MIN_RUNS {
            return Ok(None);
        }
        let catalog = reader.tres_catalog().await?;
        let keys: Vec<(u32, u64)> = records.iter().map(|record| (record.identity.id_job, record.time_submit)).collect();
        let busy = match self.store() {
            Some(store) => store.busy_gpus_among(reader.cluster(), &keys, BUSY_GPU_UTIL).await?,
            None => Default::default(),
        };
        let runs: Vec<PastRun> = records
            .iter()
            .map(|record| {
                past_run(
                    record,
                    catalog.gpus(&record.tres_alloc),
                    busy.get(&(record.identity.id_job, record.time_submit)).copied(),
                )
            })
            .collect();
        Ok(advice::advise(&query.job_name, &query.ask, &runs))
    }

    /// A user's own advice setting: on unless they turned it off.
    pub async fn advice_enabled(&self, viewer: &Viewer) -> Result<bool, AppError> {
        let user = Self::advice_user(viewer)?;
        Ok(!self.require_store()?.advice_opted_out(user).await?)
    }

    /// Turns the signed-in user's own advice on or off.
    pub async fn set_advice_enabled(&self, viewer: &Viewer, enabled: bool) -> Result<(), AppError> {
        let user = Self::advice_user(viewer)?;
        Ok(self.require_store()?.set_advice_enabled(user, enabled).await?)
    }

    fn advice_user(viewer: &Viewer) -> Result<&str, AppError> {
        viewer
            .identity()
            .map(|identity| identity.user.as_str())
            .ok_or_else(|| AppError::Unauthorized("sign in to change your own advice setting".into()))
    }
}

/// A finished run as the rules read it.
fn past_run(record: &JobRecord, gpus: u64, busy_gpus: Option<u64>) -> PastRun {
    PastRun {
        state: record.state.base(),
        elapsed_s: record.time_end.saturating_sub(record.time_start),
        time_limit_min: record.timelimit.minutes().map(u64::from),
        gpus,
        busy_gpus: busy_gpus.filter(|_| gpus > 0),
    }
}
