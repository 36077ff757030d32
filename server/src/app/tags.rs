//! Job tags: a job's owner tags their own jobs and staff any; the rules tag every job they read with the
//! application its batch script or traced kernels show (`domain/tag.rs`). The rules read a job when its
//! tags are first asked for (the job page) and when the archiver archives its report, never on a
//! listing page; a running job is read again on each ask, an ended one once.
//!
//! A listing filtered by a tag (`tag=`) reads the window's job records carrying it from our store in
//! chunks of [`TAG_CHUNK`], newest submission first, and asks slurmdbd for exactly those records
//! (one probe of its unique `(id_job, time_submit)` index each), so no statement names more than
//! [`TAG_CHUNK`] of them, and one page looks at most [`MAX_CHUNKS_PER_PAGE`] chunks before it hands out
//! a cursor (a page may then hold fewer jobs than asked, as a `blame=` page may).

use std::collections::BTreeMap;

use chrono::Utc;
use futures::Stream;
use slurmlens_wire as wire;

use super::{App, AppError, Viewer};
use crate::domain::job::{JobCursor, JobFilter, JobRecord, TimeWindow};
use crate::domain::scope::ViewerScope;
use crate::domain::state::JobStateBase;
use crate::domain::tag::{self, MAX_TAGS_PER_JOB, Tag, TagSource};
use crate::domain::tres::TresCatalog;
use crate::sources::slurmdbd::SlurmDbd;
use crate::store::Store;
use crate::store::tags::{Added, StoredTag};

/// Tagged job records per slurmdbd statement.
pub const TAG_CHUNK: usize = 1000;
/// Chunks one page of a tag-filtered listing reads at most.
pub const MAX_CHUNKS_PER_PAGE: usize = 20;
/// Characters of a batch script the rules read (the listing's script view reads as many).
const SCRIPT_CHARS: u64 = 256 * 1024;

/// A tag as a request names it.
pub fn parse_tag(text: &str) -> Result<Tag, AppError> {
    text.parse().map_err(|error: tag::BadTag| AppError::invalid("tag", format!("`{text}`: {error}")))
}

fn wire_tag(stored: StoredTag) -> wire::JobTag {
    let (origin, set_by) = match stored.set_by {
        TagSource::Rule => (wire::TagOrigin::Rule, None),
        TagSource::User(user) => (wire::TagOrigin::User, Some(user)),
    };
    wire::JobTag { tag: stored.tag.to_string(), origin, set_by, set_at: stored.set_at }
}

/// A job record's key in our store: its id and submit time.
fn key(record: &JobRecord) -> (u32, u64) {
    (record.identity.id_job, record.time_submit)
}

/// Sets `record`'s rule tags from its batch script, its steps' names (`srun torchrun …` makes a step
/// named `torchrun`) and its traced kernel and collective names (the archiver calls this for each job
/// it archives; the job page through [`App::job_tags`]).
pub(crate) async fn apply_rules(store: &Store, reader: &SlurmDbd, record: &JobRecord) -> Result<(), AppError> {
    let script = reader.job_script(record.db_index, false, SCRIPT_CHARS).await?;
    let has_script = script.script.is_some();
    let mut tags = script.script.map(|script| tag::tags_from_script(&script.text)).unwrap_or_default();
    let steps = reader.steps(record.db_index).await?;
    tags.extend(tag::tags_from_traces(steps.iter().map(|step| step.step_name.as_str())));
    if let Some(run) = record.run() {
        let traces = store.job_trace_totals(reader.cluster(), record.identity.id_job, &run).await?;
        let names = traces.top_kernels.iter().chain(&traces.top_collectives).map(|named| named.name.as_str());
        tags.extend(tag::tags_from_traces(names));
    }
    // Settled once the job ended with its script stored: slurmdbd may store a short job's script
    // after its end, so until then the rules read it again (a job without a script costs one query).
    let settled = has_script && record.time_end > 0 && record.state.base() != JobStateBase::Running;
    let tags: Vec<Tag> = tags.into_iter().collect();
    let (id_job, submit) = key(record);
    store.set_rule_tags(reader.cluster(), id_job, submit, &tags, settled, Utc::now()).await?;
    Ok(())
}

impl App {
    /// `job_id`'s tags for whoever may see the job (the rules read it first if they have not yet).
    pub async fn job_tags(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<wire::JobTags, AppError> {
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        self.ensure_rule_tags(reader, &record).await?;
        self.tags_answer(viewer, reader, &record, job_id).await
    }

    /// Adds `tag` to `job_id`: its owner or staff. Adding a tag it holds changes nothing.
    pub async fn add_job_tag(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        tag: &str,
    ) -> Result<wire::JobTags, AppError> {
        let tag = parse_tag(tag)?;
        let (reader, record, user) = self.editable_job(viewer, cluster, job_id).await?;
        let (id_job, submit) = key(&record);
        let store = self.require_store()?;
        match store
            .add_job_tag(reader.cluster(), id_job, submit, &tag, &TagSource::User(user.clone()), Utc::now())
            .await?
        {
            Added::Full => {
                return Err(AppError::invalid("tag", format!("job {job_id} holds {MAX_TAGS_PER_JOB} tags already")));
            }
            Added::New => tracing::info!(job = job_id, %tag, by = %user, "job tagged"),
            Added::Already => {}
        }
        self.ensure_rule_tags(reader, &record).await?;
        self.tags_answer(viewer, reader, &record, job_id).await
    }

    /// Removes a person's `tag` from `job_id`: its owner or staff. A rule's tag is not removed (the
    /// rules would set it again): 403. A tag the job does not hold: 404.
    pub async fn remove_job_tag(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
        tag: &str,
    ) -> Result<wire::JobTags, AppError> {
        let tag = parse_tag(tag)?;
        let (reader, record, user) = self.editable_job(viewer, cluster, job_id).await?;
        let (id_job, submit) = key(&record);
        let store = self.require_store()?;
        let held = store.job_tags(reader.cluster(), id_job, submit).await?;
        match held.iter().find(|held| held.tag == tag).map(|held| &held.set_by) {
            None => return Err(AppError::NotFound(format!("job {job_id} has no tag {tag}"))),
            Some(TagSource::Rule) => {
                return Err(AppError::Forbidden(format!(
                    "`{tag}` was set by the rules from the job's script or traces; it cannot be removed"
                )));
            }
            Some(TagSource::User(_)) => {}
        }
        store.remove_job_tag(reader.cluster(), id_job, submit, &tag).await?;
        tracing::info!(job = job_id, %tag, by = %user, "job tag removed");
        self.tags_answer(viewer, reader, &record, job_id).await
    }

    /// The job `viewer` may change the tags of, and their user name: a signed-in owner or staff. A job
    /// they may not see is not found; one they see but do not own (a coordinator's) is forbidden.
    async fn editable_job(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        job_id: &str,
    ) -> Result<(&SlurmDbd, JobRecord, String), AppError> {
        let identity =
            viewer.identity().ok_or_else(|| AppError::Unauthorized("sign in through the site to tag a job".into()))?;
        let (reader, record, _steps) = self.visible_job(viewer, cluster, job_id).await?;
        if record.user != identity.user && !self.is_staff(identity) {
            return Err(AppError::Forbidden("only the job's owner or staff may tag it".into()));
        }
        Ok((reader, record, identity.user.clone()))
    }

    fn may_edit(&self, viewer: &Viewer, record: &JobRecord) -> bool {
        viewer.identity().is_some_and(|identity| {
            identity.token.is_none() && (record.user == identity.user || self.is_staff(identity))
        })
    }

    async fn tags_answer(
        &self,
        viewer: &Viewer,
        reader: &SlurmDbd,
        record: &JobRecord,
        job_id: &str,
    ) -> Result<wire::JobTags, AppError> {
        let (id_job, submit) = key(record);
        let tags = self.require_store()?.job_tags(reader.cluster(), id_job, submit).await?;
        Ok(wire::JobTags {
            cluster: reader.cluster().to_string(),
            job_id: job_id.to_string(),
            tags: tags.into_iter().map(wire_tag).collect(),
            editable: self.may_edit(viewer, record),
            max_tags: MAX_TAGS_PER_JOB as u32,
        })
    }

    /// Runs the rules on `record` unless they read it after it ended.
    pub(crate) async fn ensure_rule_tags(&self, reader: &SlurmDbd, record: &JobRecord) -> Result<(), AppError> {
        let (id_job, submit) = key(record);
        let store = self.require_store()?;
        if store.tag_rules_seen(reader.cluster(), id_job, submit).await? == Some(true) {
            return Ok(());
        }
        apply_rules(store, reader, record).await
    }

    /// The tags of each of `records` (none without the store, or while it fails: logged).
    pub(super) async fn tags_of(&self, reader: &SlurmDbd, keys: &[(u32, u64)]) -> BTreeMap<(u32, u64), Vec<Tag>> {
        let Some(store) = self.store() else { return BTreeMap::new() };
        store.tags_among(reader.cluster(), keys).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "job tags unavailable; listing without them");
            BTreeMap::new()
        })
    }

    /// One page of a window's listing as [`SlurmDbd::jobs_in_window`] reads it; with `filter.tag`,
    /// only the job records carrying it, read as this module's header says.
    #[expect(clippy::too_many_arguments, reason = "the listing's own arguments, passed through")]
    pub(super) async fn window_page(
        &self,
        reader: &SlurmDbd,
        scope: &ViewerScope,
        window: TimeWindow,
        filter: &JobFilter,
        catalog: &TresCatalog,
        cursor: Option<JobCursor>,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Option<JobCursor>), AppError> {
        let Some(tag) = &filter.tag else {
            return Ok(reader.jobs_in_window(scope, window, filter, catalog, cursor, limit).await?);
        };
        if *scope == ViewerScope::Nobody || limit == 0 {
            return Ok((Vec::new(), None));
        }
        let store = self.require_store()?;
        let window_end = u64::try_from(window.end().timestamp()).unwrap_or(0);
        // Records submitted at or before the cursor's submit time (the cursor's own test drops the rest).
        let mut after = cursor.map(|cursor| (cursor.time_submit.saturating_add(1), 0));
        let mut page: Vec<JobRecord> = Vec::new();
        for _ in 0..MAX_CHUNKS_PER_PAGE {
            let mut keys = store.tagged_jobs(reader.cluster(), tag, window_end, after, TAG_CHUNK).await?;
            let full = keys.len() == TAG_CHUNK;
            // A full chunk ends before its last submit time (unless it holds no other), so that the
            // listing's order — submit time, then end time and row — holds from chunk to chunk.
            if full
                && let Some(&(_, last_submit)) = keys.last()
                && keys[0].1 != last_submit
            {
                keys.retain(|&(_, submit)| submit != last_submit);
            }
            let Some(&(last_job, last_submit)) = keys.last() else { return Ok((page, None)) };
            after = Some((last_submit, last_job));
            let chunk_filter = JobFilter { tag: None, among: Some(keys), ..filter.clone() };
            let wanted = limit - page.len();
            let (rows, next) = reader.jobs_in_window(scope, window, &chunk_filter, catalog, cursor, wanted).await?;
            page.extend(rows);
            if next.is_some() {
                return Ok((page, next));
            }
            if !full {
                return Ok((page, None));
            }
            if page.len() == limit {
                let last = page.last().map(|job| JobCursor {
                    time_submit: job.time_submit,
                    time_end: job.time_end,
                    db_index: job.db_index,
                });
                return Ok((page, last));
            }
        }
        // The page's budget is spent: the next page goes on below the last chunk's submit time (a
        // cursor with end time and row 0 lets through exactly the records submitted before it).
        let next = after.map(|(submit, _)| JobCursor { time_submit: submit, time_end: 0, db_index: 0 });
        Ok((page, next))
    }

    /// Every job of a tag-filtered window, as a stream of pages of [`super::export::EXPORT_CHUNK`]
    /// (an error is its last item).
    pub(super) fn tagged_stream(
        &self,
        reader: SlurmDbd,
        scope: ViewerScope,
        window: TimeWindow,
        filter: JobFilter,
        catalog: TresCatalog,
    ) -> impl Stream<Item = Result<Vec<JobRecord>, AppError>> + Send + 'static {
        let app = self.clone();
        futures::stream::unfold(Some(None), move |cursor: Option<Option<JobCursor>>| {
            let (app, reader, scope, filter, catalog) =
                (app.clone(), reader.clone(), scope.clone(), filter.clone(), catalog.clone());
            async move {
                let cursor = cursor?;
                let limit = super::export::EXPORT_CHUNK;
                match app.window_page(&reader, &scope, window, &filter, &catalog, cursor, limit).await {
                    Ok((rows, next)) => Some((Ok(rows), next.map(Some))),
                    Err(error) => Some((Err(error), None)),
                }
            }
        })
    }
}
