//! A job's own output: where its standard output and error went (`domain::job_output`) and, to its
//! owner and staff, their last lines where the site lets slurmlens read them (`[job_output] roots`,
//! `sources::job_files`). Coordinators and shared links see where the files are, never their text.

use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::config::JobOutputConfig;
use crate::domain::job_output::{self, Named, OutputJob, Stream};
use crate::domain::scope::ViewerScope;
use crate::sources::job_files::{self, Unread};

impl App {
    /// The job's output files and, for its owner and staff, their tails.
    pub async fn job_output(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::JobOutput, AppError> {
        let settings: &JobOutputConfig = &self.job_output;
        if matches!(viewer, Viewer::Shared(_)) {
            return Err(AppError::Forbidden("a shared report carries no job output".into()));
        }
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        let reads = match self.scope(viewer, reader).await? {
            ViewerScope::Staff => true,
            ViewerScope::User { name, .. } => name == record.user,
            ViewerScope::Nobody => false,
        };
        let recorded = reader.job_output_paths(record.db_index).await?;
        // The script is read only where no path was recorded and the submit line names none.
        let script = match &recorded {
            Some(_) => None,
            None => reader.job_script(record.db_index, false, super::script::SCRIPT_CAP_CHARS).await?.script,
        };
        let identity = &record.identity;
        let job = OutputJob {
            job_id: identity.id_job,
            array: (identity.id_array_job != 0).then_some((identity.id_array_job, identity.id_array_task)),
            user: record.user.clone(),
            job_name: record.job_name.clone(),
            first_node: record.nodes.hosts().first().cloned().unwrap_or_default(),
            work_dir: record.work_dir.clone(),
        };
        let files = job_output::files(
            &job,
            recorded.as_ref().map(|(out, err)| (out.as_str(), err.as_str())),
            &record.submit_line,
            script.as_ref().map(|script| script.text.as_str()),
        );
        let files = files
            .into_iter()
            .map(|file| {
                let mut out = wire::OutputFile {
                    stream: match file.stream {
                        Stream::Output => wire::OutputStream::Output,
                        Stream::Error => wire::OutputStream::Error,
                    },
                    path: file.path.as_ref().map(|path| path.display().to_string()),
                    named: match file.named {
                        Named::Slurmdbd => wire::OutputNamed::Slurmdbd,
                        Named::SubmitLine => wire::OutputNamed::SubmitLine,
                        Named::Script => wire::OutputNamed::Script,
                        Named::Default => wire::OutputNamed::Default,
                    },
                    state: wire::OutputState::Withheld,
                    tail: None,
                    size_bytes: None,
                    truncated: false,
                };
                let Some(path) = file.path.filter(|_| reads) else {
                    out.state =
                        if out.path.is_none() { wire::OutputState::Discarded } else { wire::OutputState::Withheld };
                    return out;
                };
                match job_files::read_tail(&path, &settings.roots, record.uid, settings.tail_bytes) {
                    Ok(tail) => {
                        out.state = wire::OutputState::Read;
                        (out.tail, out.size_bytes, out.truncated) =
                            (Some(tail.text), Some(tail.size_bytes), tail.truncated);
                    }
                    Err(unread) => {
                        out.state = match unread {
                            Unread::NotAllowed => wire::OutputState::NotAllowed,
                            Unread::Missing => wire::OutputState::Missing,
                            Unread::NotTheOwners => wire::OutputState::NotTheOwners,
                            Unread::NotAFile => wire::OutputState::NotAFile,
                            Unread::Failed(error) => {
                                tracing::warn!(%error, path = %path.display(), "reading a job's output failed");
                                wire::OutputState::Failed
                            }
                        };
                    }
                }
                out
            })
            .collect();
        Ok(wire::JobOutput { job_id: record.identity.to_string(), cluster: reader.cluster().to_string(), files })
    }
}
