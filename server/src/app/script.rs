//! A job's batch script, submit line and submission environment, to those who may read them: the
//! script and the submit line to whoever may see the job (its owner, the coordinators of its account,
//! staff); the environment only to the owner and staff. Everyone else gets what a job they may not see
//! gets: `NotFound`, the same answer as a job that does not exist.

use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::domain::scope::ViewerScope;
use crate::sources::slurmdbd::StoredText;

/// The most characters of a script or an environment one answer carries: slurmdbd keeps scripts up to
/// Slurm's `max_script_size` (4 MB by default), more than a page should hold; the answer says it is cut.
pub const SCRIPT_CAP_CHARS: u64 = 256 * 1024;

impl App {
    /// The job's script, submit line and (for its owner and staff) environment.
    pub async fn job_script(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::JobScript, AppError> {
        // A shared report link carries the job's facts and report; its script stays with its owner.
        if matches!(viewer, Viewer::Shared(_)) {
            return Err(AppError::Forbidden("a shared report carries no script".into()));
        }
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let scope = self.scope(viewer, reader).await?;
        // A coordinator sees the job through its account; the environment is the owner's alone.
        let sees_environment = match &scope {
            ViewerScope::Staff => true,
            ViewerScope::User { name, .. } => *name == record.user,
            ViewerScope::Nobody => false,
        };
        let stored = reader.job_script(record.db_index, sees_environment, SCRIPT_CAP_CHARS).await?;
        let environment_access = match (&stored.environment, sees_environment) {
            (_, false) => wire::EnvironmentAccess::Withheld,
            (Some(_), true) => wire::EnvironmentAccess::Shown,
            (None, true) => wire::EnvironmentAccess::NotStored,
        };
        Ok(wire::JobScript {
            job_id: record.identity.to_string(),
            cluster: reader.cluster().to_string(),
            user: record.user.clone(),
            account: record.account.clone(),
            submit_line: record.submit_line.clone(),
            script: stored.script.map(stored_text),
            environment: stored.environment.filter(|_| sees_environment).map(stored_text),
            environment_access,
        })
    }
}

fn stored_text(stored: StoredText) -> wire::StoredText {
    let shown_chars = stored.text.chars().count() as u64;
    wire::StoredText {
        truncated: stored.total_chars > shown_chars,
        total_chars: stored.total_chars.max(shown_chars),
        shown_chars,
        text: stored.text,
    }
}
