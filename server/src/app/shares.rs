//! Shared report links: a job's owner (or staff) makes an expiring, revocable, read-only link to one
//! job's report for a colleague or a support ticket. Whoever opens a live link reads that job, as its
//! owner sees it, and nothing else: its facts and report, never its logs, profile or script, no other
//! job. Every opening is logged; the maker and staff list and revoke the job's links.

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::domain::ids::JobSelector;
use crate::domain::job::{JobRecord, StepRecord};
use crate::domain::share::{self, ShareSecret};
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::shares::{NewShare, StoredShare};

/// What a live link lets its holder read: one job, named as slurmdbd names it, seen as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGrant {
    pub share_id: u64,
    pub owner: String,
    pub cluster: String,
    pub id_job: u32,
    pub time_submit: i64,
}

/// A link just made: the secret is in `path`, shown once.
#[derive(Debug)]
pub struct MadeShare {
    pub id: u64,
    pub secret: ShareSecret,
    pub expires: DateTime<Utc>,
}

/// An opened link: the job it shows, and the link's own facts for the page's note.
#[derive(Debug, Clone)]
pub struct OpenedShare {
    pub grant: ShareGrant,
    pub job_id: String,
    pub created_by: String,
    pub note: String,
    pub expires: DateTime<Utc>,
}

fn state(share: &StoredShare, now: DateTime<Utc>) -> wire::TokenState {
    use wire::TokenState;
    if share.revoked_at.is_some() {
        TokenState::Revoked
    } else if share.expires_at <= now {
        TokenState::Expired
    } else {
        TokenState::Live
    }
}

fn info(share: StoredShare, now: DateTime<Utc>) -> wire::ShareInfo {
    wire::ShareInfo {
        state: state(&share, now),
        id: share.id,
        cluster: share.cluster,
        job_id: share.job_id,
        created_by: share.created_by,
        note: share.note,
        created: share.created_at,
        expires: share.expires_at,
        revoked: share.revoked_at,
        uses: u64::try_from(share.uses).unwrap_or(0),
        last_used: share.last_used_at,
    }
}

/// The job a grant names, on its cluster, as its owner sees it: anything else is not found.
pub(super) async fn granted_job<'a>(
    app: &'a App,
    grant: &ShareGrant,
    selector: JobSelector,
) -> Result<(&'a SlurmDbd, JobRecord, Vec<StepRecord>), AppError> {
    let not_found = || AppError::NotFound("a shared report shows its own job only".into());
    let reader = app.cluster(Some(&grant.cluster))?;
    let scope = reader.scope_for_user(&grant.owner).await?;
    let Some((record, steps)) = reader.job(&scope, selector).await? else { return Err(not_found()) };
    let same = record.identity.id_job == grant.id_job && i64::try_from(record.time_submit) == Ok(grant.time_submit);
    if same { Ok((reader, record, steps)) } else { Err(not_found()) }
}

impl App {
    /// Makes a link to `job_id`'s report: its owner or staff, signed in at the site.
    pub async fn create_share(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        asked: wire::NewShare,
    ) -> Result<MadeShare, AppError> {
        let identity = viewer
            .identity()
            .ok_or_else(|| AppError::Unauthorized("sign in through the site to share a report".into()))?;
        let days = asked.expires_in_days.unwrap_or(share::DEFAULT_DAYS);
        if !(1..=share::MAX_DAYS).contains(&days) {
            return Err(AppError::invalid("expires_in_days", format!("between 1 and {} days", share::MAX_DAYS)));
        }
        let note = share::parse_note(asked.note.as_deref().unwrap_or("")).map_err(|e| AppError::invalid("note", e))?;
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        if record.user != identity.user && !self.is_staff(identity) {
            return Err(AppError::Forbidden("only the job's owner or staff may share its report".into()));
        }
        let store = self.require_store()?;
        let secret = ShareSecret::generate();
        let now = Utc::now();
        let expires = now + Duration::days(i64::from(days));
        let new = NewShare {
            hash: &secret.hash(),
            cluster: reader.cluster().as_str(),
            job_id,
            id_job: record.identity.id_job,
            time_submit: i64::try_from(record.time_submit).unwrap_or(i64::MAX),
            owner: &record.user,
            created_by: &identity.user,
            note: &note,
            created_at: now,
            expires_at: expires,
        };
        let id = store.create_share(&new).await?;
        tracing::info!(share = id, job = job_id, by = %identity.user, days, "report shared");
        Ok(MadeShare { id, secret, expires })
    }

    /// The links made to `job_id`: its owner sees theirs and staff's, staff all; others none (not found).
    pub async fn job_shares(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<Vec<wire::ShareInfo>, AppError> {
        let identity =
            viewer.identity().ok_or_else(|| AppError::Unauthorized("sign in through the site to list links".into()))?;
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        if record.user != identity.user && !self.is_staff(identity) {
            return Err(AppError::Forbidden("only the job's owner or staff see its shared links".into()));
        }
        let time_submit = i64::try_from(record.time_submit).unwrap_or(i64::MAX);
        let shares =
            self.require_store()?.shares_of_job(reader.cluster().as_str(), record.identity.id_job, time_submit).await?;
        let now = Utc::now();
        Ok(shares.into_iter().map(|share| info(share, now)).collect())
    }

    /// Revokes link `id`: the job's owner, the link's maker or staff. Revoking twice is fine.
    pub async fn revoke_share(&self, viewer: &Viewer, id: u64) -> Result<wire::ShareInfo, AppError> {
        let identity = viewer
            .identity()
            .ok_or_else(|| AppError::Unauthorized("sign in through the site to revoke a link".into()))?;
        let store = self.require_store()?;
        let not_found = || AppError::NotFound(format!("no shared link {id}"));
        let share = store.share(id).await?.ok_or_else(not_found)?;
        let allowed = share.owner == identity.user || share.created_by == identity.user || self.is_staff(identity);
        if !allowed {
            return Err(not_found());
        }
        let now = Utc::now();
        store.revoke_share(id, now).await?;
        tracing::info!(share = id, by = %identity.user, "shared report revoked");
        let share = store.share(id).await?.ok_or_else(not_found)?;
        Ok(info(share, now))
    }

    /// Opens a link for whoever holds it (`peer`: their address, for the audit log): the grant to read
    /// its job, or not found — the same answer for a link that never existed, expired or was revoked.
    pub async fn open_share(&self, secret: &str, peer: &str) -> Result<OpenedShare, AppError> {
        let not_found = || AppError::NotFound("no such shared report: it may have expired or been revoked".into());
        let secret: ShareSecret = secret.parse().map_err(|_| not_found())?;
        let store = self.require_store()?;
        let share = store.share_by_hash(&secret.hash()).await?.ok_or_else(not_found)?;
        let now = Utc::now();
        let live = state(&share, now) == wire::TokenState::Live;
        store.record_share_use(share.id, now, if live { 200 } else { 404 }, peer).await?;
        if !live {
            return Err(not_found());
        }
        let grant = ShareGrant {
            share_id: share.id,
            owner: share.owner,
            cluster: share.cluster,
            id_job: share.id_job,
            time_submit: share.time_submit,
        };
        Ok(OpenedShare {
            grant,
            job_id: share.job_id,
            created_by: share.created_by,
            note: share.note,
            expires: share.expires_at,
        })
    }
}
