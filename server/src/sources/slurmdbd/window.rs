//! The statements of a window listing: which of slurmdbd's indexes reads a window's jobs for a viewer,
//! so that the rows read grow with the window and the viewer's share of it, never with the years of
//! history before it.
//!
//! - A plain user's jobs: `sacct_def2 (id_user, time_end, time_eligible)`, the index `sacct -u` uses:
//!   their jobs not ended before the window's start, whatever the cluster's history holds, read in
//!   submission slices from the newest (an hour, then twice as wide each time) so a first page sorts
//!   a few hours of a heavy user's jobs, not their whole window.
//! - A window that starts within [`RECENT_START_S`] of now (the grid's moment now, the last hours),
//!   for everyone else: `rollup2 (time_end, …)`, the jobs that ended since its start and the open
//!   ones, which are the window's jobs and the few pending ones.
//! - Everyone else (staff, coordinators, a search by text): `archive_purge (time_submit, time_end)`
//!   from the window's end back to its floor ([`horizon::LONG_SPAN_S`] before its start), then the
//!   few older submissions that still overlap it ([`horizon`]).
//! - A search for a job id: slurmdbd's id indexes.

use sqlx::mysql::{MySqlArguments, MySqlRow};

use super::horizon::OlderPart;
use super::{SlurmDbd, SlurmDbdError, bind, job_columns, push_exact, push_in_list, push_scope};
use crate::domain::ids::JobSelector;
use crate::domain::job::{JobCursor, JobFilter, JobSearch};
use crate::domain::scope::ViewerScope;
use crate::domain::state::StateFilter;

/// A window `[start, end)` in slurmdbd's epoch seconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub start: u64,
    pub end: u64,
}

impl Bounds {
    /// A window's bounds (before the epoch reads as the epoch).
    pub fn of(window: crate::domain::job::TimeWindow) -> Self {
        let seconds = |time: chrono::DateTime<chrono::Utc>| u64::try_from(time.timestamp()).unwrap_or(0);
        Self { start: seconds(window.start()), end: seconds(window.end()) }
    }
}

/// Which index reads a listing (chosen once per listing, used by each of its batches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// A plain user's jobs, by their uids (`sacct_def2`).
    UserJobs(Vec<u32>),
    /// `archive_purge` from the window's end back to its floor, then the older part.
    Bounded(OlderPart),
    /// `archive_purge` from the window's end back to a submission time: the window's own submissions,
    /// which an export reads apart from the earlier ones ([`Route::parts`]).
    Submitted(u64),
    /// One statement over the whole history: a job id search, or before the long-span catalogue exists.
    Whole,
    /// A bounded set of job records (id, submit time), by slurmdbd's unique `(id_job, time_submit)` index.
    Among(Vec<(u32, u64)>),
    /// A window starting within [`RECENT_START_S`] of now: the jobs ended since its start and the open
    /// ones, by `rollup2 (time_end, time_eligible)`, sorted (a few thousand rows on a busy cluster).
    Recent,
}

impl Route {
    /// The route as parts read one after the other, each from its own cursor. A bounded route is two:
    /// the window's own submissions, dense, then those before its start, eight days of index entries
    /// of which nearly all ended before the window (for a week of sakura 52,000 entries for 137 rows,
    /// a third of MariaDB's time for the window), so that an export can read the second part's first
    /// batch beside the first.
    pub(super) fn parts(self, bounds: Bounds) -> Vec<(Route, Option<JobCursor>)> {
        match self {
            Route::Bounded(older) if older.floor < bounds.start => {
                // Just past every job submitted at the window's start: what was submitted before it.
                let before_start = JobCursor { time_submit: bounds.start, time_end: 0, db_index: 0 };
                vec![(Route::Submitted(bounds.start), None), (Route::Bounded(older), Some(before_start))]
            }
            route => vec![(route, None)],
        }
    }
}

/// The newest jobs of each association whose uids a plain user's route reads by ([`SlurmDbd::user_uids`]).
const UID_PROBE_JOBS: u32 = 16;

/// How recent a window's start must be for [`Route::Recent`]: six hours of job ends on a 100-node
/// cluster are about 2,000 rows, which one statement reads and sorts in milliseconds; the
/// `archive_purge` route reads the eight days of submissions before any window.
pub(super) const RECENT_START_S: u64 = 6 * 3600;

/// The columns that order a listing, repeated under names a `UNION`'s `ORDER BY` can use.
const SORT_COLUMNS: &str = "j.time_submit AS sort_submit, j.time_end AS sort_end, j.job_db_inx AS sort_inx";
/// A listing's order: newest submission first, exactly `archive_purge`'s order read backwards.
const ORDER: &str = " ORDER BY j.time_submit DESC, j.time_end DESC, j.job_db_inx DESC LIMIT ?";

impl SlurmDbd {
    /// How `scope`'s listing of a window starting at `start` is read.
    pub(super) async fn route(
        &self,
        scope: &ViewerScope,
        filter: &JobFilter,
        start: u64,
    ) -> Result<Route, SlurmDbdError> {
        // The statements name the added columns this cluster's tables hold.
        self.shape().await?;
        if let Some(among) = &filter.among {
            return Ok(Route::Among(among.clone()));
        }
        if matches!(filter.search, Some(JobSearch::Id(_))) {
            return Ok(Route::Whole);
        }
        if let ViewerScope::User { name, coordinated_accounts } = scope
            && coordinated_accounts.is_empty()
        {
            return Ok(Route::UserJobs(self.user_uids(name).await?));
        }
        let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
        if now.saturating_sub(start) <= RECENT_START_S {
            return Ok(Route::Recent);
        }
        Ok(match self.horizon.spans(&self.pool, &self.cluster).await? {
            Some(spans) => Route::Bounded(spans.older_part(start)),
            None => Route::Whole,
        })
    }

    /// The uids under which `user`'s jobs are recorded: those of the newest [`UID_PROBE_JOBS`] jobs of
    /// each of their associations (one short index range each): `sacct -u` finds a user's jobs by uid
    /// too. The uids are only the index's way in: every statement also holds the rows to the user's
    /// associations. Not the newest job alone: slurmdbd can hold a just-submitted job under its
    /// submitter's uid for a moment (seen in the lab: a job root submitted with `--uid` read uid 0
    /// until it started), and that one uid would have hidden every other job of the user's.
    pub(super) async fn user_uids(&self, user: &str) -> Result<Vec<u32>, SlurmDbdError> {
        if !super::latin1_can_hold(user) {
            return Ok(Vec::new());
        }
        let mut args = MySqlArguments::default();
        let mut sql = format!("SELECT CAST(id_assoc AS UNSIGNED) FROM {} WHERE ", self.cluster.table("assoc_table"));
        push_exact(&mut sql, &mut args, "user", user)?;
        let associations: Vec<(u64,)> = sqlx::query_as_with(&sql, args).fetch_all(&self.pool).await?;
        if associations.is_empty() {
            return Ok(Vec::new());
        }
        // Numbers only, written as literals.
        let newest = associations
            .iter()
            .map(|(association,)| {
                format!(
                    "(SELECT CAST(id_user AS UNSIGNED) AS uid FROM {} FORCE INDEX (association) \
                     WHERE id_assoc = {association} ORDER BY job_db_inx DESC LIMIT {UID_PROBE_JOBS})",
                    self.cluster.table("job_table")
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ");
        let uids: Vec<(u64,)> = sqlx::query_as(&newest).fetch_all(&self.pool).await?;
        let uids: std::collections::BTreeSet<u32> =
            uids.into_iter().filter_map(|(uid,)| u32::try_from(uid).ok()).collect();
        Ok(uids.into_iter().collect())
    }

    /// One batch of a listing: up to `batch` rows after `after`, in the listing's order, as MariaDB
    /// sent them (the export decodes them on another thread while the next batch is read).
    pub(super) async fn window_rows(
        &self,
        route: &Route,
        scope: &ViewerScope,
        bounds: Bounds,
        filter: &JobFilter,
        after: Option<JobCursor>,
        batch: usize,
    ) -> Result<Vec<MySqlRow>, SlurmDbdError> {
        let mut rows = Vec::new();
        for (sql, args) in self.window_statements(route, scope, bounds, filter, after, batch)? {
            if rows.len() >= batch {
                break;
            }
            // Each statement's rows come after the one before it, so it adds only what the batch
            // still lacks (its own LIMIT is the whole batch).
            let fetched = sqlx::query_with(&sql, args).fetch_all(&self.pool).await?;
            let missing = batch - rows.len();
            rows.extend(fetched.into_iter().take(missing));
        }
        Ok(rows)
    }

    /// The statements of one batch, in the listing's order: each one's rows all come after the rows
    /// of the one before it.
    pub(super) fn window_statements(
        &self,
        route: &Route,
        scope: &ViewerScope,
        bounds: Bounds,
        filter: &JobFilter,
        after: Option<JobCursor>,
        batch: usize,
    ) -> Result<Vec<(String, MySqlArguments)>, SlurmDbdError> {
        match route {
            Route::Whole => {
                // A search for a job id is answered by slurmdbd's id indexes (a handful of rows,
                // sorted); a user's scope is left to MariaDB, as before the catalogue existed.
                let index = match (&filter.search, scope) {
                    (Some(JobSearch::Id(_)), _) | (_, ViewerScope::User { .. }) => "",
                    _ => " FORCE INDEX (archive_purge)",
                };
                Ok(vec![self.ranged(index, "", bounds, scope, filter, after, batch)?])
            }
            // The window's own test `(time_end >= start OR time_end = 0)` is the index range.
            Route::Recent => {
                Ok(vec![self.ranged(" FORCE INDEX (rollup2)", "", bounds, scope, filter, after, batch)?])
            }
            Route::Among(keys) if keys.is_empty() => Ok(Vec::new()),
            Route::Among(keys) => {
                // Numbers only, written as literals: each pair is one probe of the unique index.
                let pairs: Vec<String> =
                    keys.iter().map(|(id, submit)| format!("(j.id_job = {id} AND j.time_submit = {submit})")).collect();
                let range = format!(" AND ({})", pairs.join(" OR "));
                Ok(vec![self.ranged(" FORCE INDEX (id_job)", &range, bounds, scope, filter, after, batch)?])
            }
            Route::UserJobs(uids) if uids.is_empty() => Ok(Vec::new()),
            Route::UserJobs(uids) => {
                let list = uids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
                let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
                user_slices(bounds, after, now)
                    .into_iter()
                    .map(|slice| {
                        let range = format!(" AND j.id_user IN ({list}){}", slice.condition());
                        self.ranged(" FORCE INDEX (sacct_def2)", &range, bounds, scope, filter, after, batch)
                    })
                    .collect()
            }
            Route::Submitted(from) => {
                let range = format!(" AND j.time_submit >= {from}");
                Ok(vec![self.ranged(" FORCE INDEX (archive_purge)", &range, bounds, scope, filter, after, batch)?])
            }
            Route::Bounded(older) => {
                let mut statements = Vec::with_capacity(2);
                if after.is_none_or(|cursor| cursor.time_submit >= older.floor) {
                    let range = format!(" AND j.time_submit >= {}", older.floor);
                    statements.push(self.ranged(
                        " FORCE INDEX (archive_purge)",
                        &range,
                        bounds,
                        scope,
                        filter,
                        after,
                        batch,
                    )?);
                }
                if older.floor > 0 {
                    statements.push(self.older(older, bounds, scope, filter, after, batch)?);
                }
                Ok(statements)
            }
        }
    }

    /// One statement over `index`, its window test, `range` (literal numbers only) and the listing's
    /// conditions, in the listing's order.
    #[expect(clippy::too_many_arguments, reason = "the parts of one statement, each used once")]
    fn ranged(
        &self,
        index: &str,
        range: &str,
        bounds: Bounds,
        scope: &ViewerScope,
        filter: &JobFilter,
        after: Option<JobCursor>,
        batch: usize,
    ) -> Result<(String, MySqlArguments), SlurmDbdError> {
        let mut args = MySqlArguments::default();
        let mut sql = format!("SELECT {} FROM {}", job_columns(false, self.known_shape()), self.joined(index));
        sql.push_str(" WHERE j.deleted = 0 AND j.time_submit < ? AND (j.time_end >= ? OR j.time_end = 0)");
        sql.push_str(range);
        bind(&mut args, bounds.end)?;
        bind(&mut args, bounds.start)?;
        push_conditions(&mut sql, &mut args, scope, filter, after)?;
        sql.push_str(ORDER);
        bind(&mut args, batch as u64)?;
        Ok((sql, args))
    }

    /// The jobs submitted before the window's floor that still overlap it: the open ones and those that
    /// ended lately (`rollup2`), and the catalogued ones (by primary key), merged in the listing's order.
    fn older(
        &self,
        older: &OlderPart,
        bounds: Bounds,
        scope: &ViewerScope,
        filter: &JobFilter,
        after: Option<JobCursor>,
        batch: usize,
    ) -> Result<(String, MySqlArguments), SlurmDbdError> {
        let mut parts = vec![
            (" FORCE INDEX (rollup2)", "j.time_end = 0".to_string()),
            (" FORCE INDEX (rollup2)", format!("j.time_end >= {}", older.recent_ends_from.max(bounds.start))),
        ];
        if !older.catalogued.is_empty() {
            let keys = older.catalogued.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
            parts.push((" FORCE INDEX (PRIMARY)", format!("j.job_db_inx IN ({keys})")));
        }
        let mut args = MySqlArguments::default();
        let mut selects = Vec::with_capacity(parts.len());
        for (index, part) in parts {
            let mut sql = format!(
                "(SELECT {}, {SORT_COLUMNS} FROM {}",
                job_columns(false, self.known_shape()),
                self.joined(index)
            );
            sql.push_str(&format!(
                " WHERE j.deleted = 0 AND {part} AND j.time_submit < {} AND j.time_submit < ? \
                 AND (j.time_end >= ? OR j.time_end = 0)",
                older.floor
            ));
            bind(&mut args, bounds.end)?;
            bind(&mut args, bounds.start)?;
            push_conditions(&mut sql, &mut args, scope, filter, after)?;
            sql.push(')');
            selects.push(sql);
        }
        let mut sql = selects.join(" UNION ALL ");
        sql.push_str(" ORDER BY sort_submit DESC, sort_end DESC, sort_inx DESC LIMIT ?");
        bind(&mut args, batch as u64)?;
        Ok((sql, args))
    }

    /// The shape [`SlurmDbd::route`] read (22.05's before it did).
    fn known_shape(&self) -> super::TableShape {
        self.shape.get().copied().unwrap_or_default()
    }

    /// The job table, read through `index` (a hint, or nothing), joined to the names a listing shows.
    pub(super) fn joined(&self, index: &str) -> String {
        format!(
            "{} j{index} LEFT JOIN {} a ON a.id_assoc = j.id_assoc LEFT JOIN qos_table q ON q.id = j.id_qos",
            self.cluster.table("job_table"),
            self.cluster.table("assoc_table"),
        )
    }
}

/// The first of a plain user's submission slices; each next one is twice as wide.
const FIRST_USER_SLICE_S: u64 = 3600;

/// A range of submission times `[from, to)` of a plain user's listing (`from` absent: everything
/// submitted before `to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UserSlice {
    from: Option<u64>,
    to: u64,
}

impl UserSlice {
    /// The slice as conditions on `sacct_def2 (id_user, time_end, …)`: a job submitted at or after
    /// `from` ended at or after it too, or has not ended, so the index range starts at `from`.
    fn condition(self) -> String {
        match self.from {
            Some(from) => format!(
                " AND j.time_submit >= {from} AND j.time_submit < {} AND (j.time_end >= {from} OR j.time_end = 0)",
                self.to
            ),
            None => format!(" AND j.time_submit < {}", self.to),
        }
    }
}

/// A plain user's listing read newest submissions first, in slices that double in width from an hour
/// below the window's end (or the cursor) down to its start, then everything submitted before: the
/// first page of a user with thousands of jobs a day reads the last hours of them, not the whole
/// window's, and sorts only those. Each slice's rows all come after the one before it. Reading a
/// window whole costs at most about twice the rows of one statement (each slice's index range also
/// holds the later slices' jobs). A window that ended more than [`horizon::LONG_SPAN_S`] before `now`
/// is one statement: each slice's range would hold every job of theirs that ended since.
fn user_slices(bounds: Bounds, after: Option<JobCursor>, now: u64) -> Vec<UserSlice> {
    let top = after.map_or(bounds.end, |cursor| cursor.time_submit.saturating_add(1)).min(bounds.end);
    if now.saturating_sub(top) > super::horizon::LONG_SPAN_S {
        return vec![UserSlice { from: None, to: top }];
    }
    let mut slices = Vec::new();
    let (mut to, mut width) = (top, FIRST_USER_SLICE_S);
    while to.saturating_sub(width) > bounds.start {
        slices.push(UserSlice { from: Some(to - width), to });
        to -= width;
        width = width.saturating_mul(2);
    }
    slices.push(UserSlice { from: None, to });
    slices
}

/// Appends the viewer's scope, the search, the filters and the cursor: every condition of a listing
/// but its window.
fn push_conditions(
    sql: &mut String,
    args: &mut MySqlArguments,
    scope: &ViewerScope,
    filter: &JobFilter,
    after: Option<JobCursor>,
) -> Result<(), SlurmDbdError> {
    push_scope(sql, args, scope)?;
    match &filter.search {
        None => {}
        Some(JobSearch::Id(JobSelector::Id(id))) => {
            // `123` is that job, the tasks of array 123 and the components of het job 123.
            sql.push_str(" AND (j.id_job = ? OR j.id_array_job = ? OR j.het_job_id = ?)");
            for _ in 0..3 {
                bind(args, *id)?;
            }
        }
        Some(JobSearch::Id(JobSelector::ArrayTask { array_job_id, task_id })) => {
            sql.push_str(" AND j.id_array_job = ? AND j.id_array_task = ?");
            bind(args, *array_job_id)?;
            bind(args, *task_id)?;
        }
        Some(JobSearch::Id(JobSelector::HetComponent { het_job_id, offset })) => {
            sql.push_str(" AND j.het_job_id = ? AND j.het_job_offset = ?");
            bind(args, *het_job_id)?;
            bind(args, *offset)?;
        }
        Some(JobSearch::Text(text)) => {
            // slurmdbd's columns are case-insensitive (latin1_swedish_ci); wildcards are escaped.
            sql.push_str(
                " AND (j.job_name LIKE ? ESCAPE '!' OR a.user LIKE ? ESCAPE '!' OR j.account LIKE ? ESCAPE '!')",
            );
            let pattern = JobSearch::like_pattern(text);
            for _ in 0..3 {
                bind(args, pattern.clone())?;
            }
        }
    }
    if !filter.users.is_empty() {
        sql.push_str(" AND a.user IN ");
        push_in_list(sql, args, &filter.users)?;
    }
    if !filter.accounts.is_empty() {
        sql.push_str(" AND j.account IN ");
        push_in_list(sql, args, &filter.accounts)?;
    }
    if !filter.partitions.is_empty() {
        // A pending job may list several partitions (`gpu,debug`).
        let tests = vec!["FIND_IN_SET(?, j.`partition`) > 0"; filter.partitions.len()];
        sql.push_str(&format!(" AND ({})", tests.join(" OR ")));
        for partition in &filter.partitions {
            bind(args, partition.clone())?;
        }
    }
    push_states(sql, &filter.states);
    if let Some(after) = after {
        sql.push_str(
            " AND (j.time_submit < ? OR (j.time_submit = ? AND (j.time_end < ? OR (j.time_end = ? AND j.job_db_inx < ?))))",
        );
        for value in [after.time_submit, after.time_submit, after.time_end, after.time_end, after.db_index] {
            bind(args, value)?;
        }
    }
    Ok(())
}

/// Appends the state filter (state codes are our own numbers, written as literals).
fn push_states(sql: &mut String, states: &[StateFilter]) {
    if states.is_empty() {
        return;
    }
    let codes: std::collections::BTreeSet<u32> = states
        .iter()
        .filter_map(|state| match state {
            StateFilter::Base(base) => Some(base.code()),
            StateFilter::Requeued => None,
        })
        .collect();
    let mut tests = Vec::new();
    if !codes.is_empty() {
        let list = codes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        tests.push(format!("(j.state & 255) IN ({list})"));
    }
    if states.contains(&StateFilter::Requeued) {
        tests.push("(j.state & 1024) <> 0".to_string());
    }
    sql.push_str(&format!(" AND ({})", tests.join(" OR ")));
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn check(bounds: Bounds, after: Option<JobCursor>) -> Vec<UserSlice> {
        let slices = user_slices(bounds, after, bounds.end);
        let top = after.map_or(bounds.end, |cursor| cursor.time_submit + 1).min(bounds.end);
        assert_eq!(slices[0].to, top, "the first slice starts at the top");
        for pair in slices.windows(2) {
            assert_eq!(pair[0].from, Some(pair[1].to), "slices are contiguous, newest first: {slices:?}");
        }
        let last = slices.last().expect("a slice");
        assert_eq!(last.from, None, "the last slice takes everything submitted before it");
        for slice in &slices[..slices.len() - 1] {
            assert!(slice.from.is_some_and(|from| from > bounds.start && from < slice.to), "{slice:?}");
        }
        slices
    }

    #[test]
    fn a_months_window_is_read_in_doubling_slices_from_the_newest_hour() {
        let bounds = Bounds { start: 100 * DAY, end: 131 * DAY };
        let slices = check(bounds, None);
        assert_eq!(slices[0], UserSlice { from: Some(131 * DAY - 3600), to: 131 * DAY });
        assert_eq!(slices[1].from, Some(131 * DAY - 3 * 3600));
        // 1 h + 2 h + … + 256 h (21 days) < 31 days < 511 h + 512 h: ten slices, then the rest.
        assert_eq!(slices.len(), 10);
    }

    #[test]
    fn a_cursor_starts_the_slices_at_its_submission() {
        let bounds = Bounds { start: 0, end: 10 * DAY };
        let cursor = JobCursor { time_submit: 5 * DAY, time_end: 5 * DAY + 60, db_index: 7 };
        let slices = check(bounds, Some(cursor));
        assert_eq!(slices[0].to, 5 * DAY + 1, "the cursor's own second is read again (ties on submission)");
        // A cursor past the window's end is bounded by it.
        let late = JobCursor { time_submit: 20 * DAY, ..cursor };
        check(bounds, Some(late));
    }

    #[test]
    fn a_window_that_ended_long_ago_is_one_statement() {
        let bounds = Bounds { start: 100 * DAY, end: 131 * DAY };
        assert_eq!(user_slices(bounds, None, 131 * DAY + 9 * DAY), vec![UserSlice { from: None, to: 131 * DAY }]);
        assert!(user_slices(bounds, None, 131 * DAY + 7 * DAY).len() > 1, "a week ago is still sliced");
    }

    #[test]
    fn a_window_under_an_hour_is_one_statement() {
        let bounds = Bounds { start: 1_000, end: 1_000 + 3_000 };
        assert_eq!(check(bounds, None), vec![UserSlice { from: None, to: 4_000 }]);
        assert_eq!(check(Bounds { start: 0, end: 0 }, None).len(), 1);
    }
}
