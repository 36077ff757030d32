//! The history continued in real time: the jobs still pending or running at the history's end start and
//! end where its scheduler placed them, and new jobs arrive at its rates (`schedule::simulate`). Each row
//! is kept as it ends; [`Timeline::write`] writes it as slurmdbd shows it at a given moment (pending,
//! running, ended) into the same tables, the way slurmdbd updates a row: same `job_db_inx`, new state,
//! times, allocation and steps.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use sqlx::{MySqlPool, Row};

use super::context::{ClusterContext, load_context};
use super::encoding::node_name;
use super::rows::{JobRow, Plan};
use super::schedule::simulate;
use super::steps::steps_for;
use super::workload::JobOutcome;
use super::write::{JOB_COLS, JOB_TUPLE, STEP_COLS, STEP_TUPLE, encode_jobs, encode_steps, insert_sql};
use super::{HistoryParams, INFINITE, NO_VAL, UNLIMITED_BACKFILL, state_name, validate};

/// Where a job is at a moment, as `sacct` would show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Not submitted yet: no row.
    Unsubmitted,
    Pending,
    Running,
    Ended,
}

/// A job of the continuation, as the telemetry and the GPU records need it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveJob {
    pub id_job: u32,
    pub job_name: String,
    pub t_submit: i64,
    /// 0 when it never starts.
    pub t_start: i64,
    /// When it ends (planned, also while it runs).
    pub t_end: i64,
    pub nodes: Vec<String>,
    pub gpus_per_node: u32,
    /// Its state once ended, as sacct prints it (`COMPLETED`, `FAILED`, …).
    pub final_state: &'static str,
}

/// What one [`Timeline::write`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub submitted: usize,
    pub started: usize,
    pub ended: usize,
    pub steps: usize,
}

/// The jobs that change after the history's end, each as it ends, with what writing them needs.
pub struct Timeline {
    params: HistoryParams,
    context: ClusterContext,
    rows: Vec<JobRow>,
    start: i64,
    end: i64,
    until: i64,
    width: usize,
}

/// The end of the history in `cluster`'s tables, for a history of `days` days: its registration row
/// (written at the history's start) plus `days`. None when the cluster has no generated history.
pub async fn history_end(pool: &MySqlPool, cluster: &str, days: u32) -> Result<Option<i64>> {
    validate(&HistoryParams { cluster: cluster.to_string(), ..super::default_params(chrono::Utc::now()) })?;
    let start: Option<i64> = sqlx::query_scalar(&format!(
        "SELECT CAST(MIN(time_start) AS SIGNED) FROM `{cluster}_event_table` \
         WHERE node_name = '' AND reason = 'Cluster Registered TRES'"
    ))
    .fetch_one(pool)
    .await
    .context("reading the history's registration row")?;
    Ok(start.map(|start| start + i64::from(days) * 86_400))
}

impl Timeline {
    /// Rebuilds the history of `params` (whose `end` is the history's end) and continues it up to `until`.
    /// Fails when the cluster's tables do not hold that history (another seed or size).
    pub async fn load(pool: &MySqlPool, params: &HistoryParams, until: i64) -> Result<Self> {
        validate(params)?;
        // A longer history was simulated span by span: one simulation of its window would not rebuild it.
        anyhow::ensure!(
            params.days <= super::spans::SPAN_DAYS,
            "demo live continues histories of at most {} days",
            super::spans::SPAN_DAYS
        );
        let context = load_context(pool, &params.cluster).await?;
        let (context, plan, continued) = tokio::task::spawn_blocking({
            let params = params.clone();
            move || simulate(&params, &context, Some(until)).map(|(plan, continued)| (context, plan, continued))
        })
        .await
        .context("the history's simulation panicked")??;
        let job_table = format!("{}_job_table", params.cluster);
        let written: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM `{job_table}` WHERE time_submit <= ?"))
            .bind(plan.end)
            .fetch_one(pool)
            .await
            .context("counting the history's rows")?;
        ensure!(
            written == plan.jobs.len() as i64,
            "{job_table} holds {written} rows submitted by the history's end, the history of these parameters {}: \
             seed it again (`demo seed-history`) or give its --days/--jobs/--nodes/--seed",
            plan.jobs.len()
        );
        let rows = plan.jobs.into_iter().filter_map(|row| row.future.map(|future| *future)).chain(continued).collect();
        Ok(Timeline {
            params: params.clone(),
            context,
            rows,
            start: plan.start,
            end: plan.end,
            until,
            width: plan.width,
        })
    }

    /// The latest moment the cluster's rows record (a submission, start or end), at least the history's end:
    /// a continuation already written up to there need not look before it again.
    pub async fn written_until(&self, pool: &MySqlPool) -> Result<i64> {
        let latest: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT CAST(MAX(GREATEST(time_submit, time_start, time_end)) AS SIGNED) FROM `{}_job_table` \
             WHERE time_submit > ? OR time_end > ?",
            self.params.cluster
        ))
        .bind(self.end)
        .bind(self.end)
        .fetch_one(pool)
        .await
        .context("finding where the rows end")?;
        Ok(latest.unwrap_or(self.end).max(self.end))
    }

    /// The history's end.
    pub fn history_end(&self) -> i64 {
        self.end
    }

    /// How far the continuation was simulated.
    pub fn until(&self) -> i64 {
        self.until
    }

    /// Where a job is at `t`.
    fn phase(row: &JobRow, t: i64) -> Phase {
        if row.t_submit > t {
            return Phase::Unsubmitted;
        }
        match row.kind {
            JobOutcome::Pending { .. } => Phase::Pending,
            JobOutcome::CancelledPending { .. } => {
                if row.t_end > t {
                    Phase::Pending
                } else {
                    Phase::Ended
                }
            }
            _ if !row.started() || row.t_start > t => Phase::Pending,
            _ if row.t_end > t => Phase::Running,
            _ => Phase::Ended,
        }
    }

    /// The row as slurmdbd holds it at `t`, if submitted by then.
    fn row_at(row: &JobRow, t: i64) -> Option<JobRow> {
        let mut shown = row.clone();
        match Self::phase(row, t) {
            Phase::Unsubmitted => return None,
            Phase::Pending => {
                shown.kind = JobOutcome::Pending { held: matches!(row.kind, JobOutcome::Pending { held: true }) };
                shown.t_start = 0;
                shown.t_end = 0;
                shown.nodes.clear();
                shown.flags = 16;
                if matches!(row.timelimit, UNLIMITED_BACKFILL | INFINITE) {
                    shown.timelimit = NO_VAL;
                }
            }
            Phase::Running => {
                shown.kind = JobOutcome::Running;
                shown.t_end = 0;
            }
            Phase::Ended => {}
        }
        Some(shown)
    }

    /// The jobs whose phase at `now` differs from their phase at `since`, with both phases.
    pub fn changes(&self, since: i64, now: i64) -> Vec<(LiveJob, Phase, Phase)> {
        self.changed(since, now).map(|(row, before, after)| (self.live_job(row), before, after)).collect()
    }

    fn changed(&self, since: i64, now: i64) -> impl Iterator<Item = (&JobRow, Phase, Phase)> {
        self.rows.iter().filter_map(move |row| {
            let (before, after) = (Self::phase(row, since), Self::phase(row, now));
            (before != after).then_some((row, before, after))
        })
    }

    /// The GPU jobs running at some moment of `[from, to]`.
    pub fn gpu_jobs_between(&self, from: i64, to: i64) -> Vec<LiveJob> {
        self.rows
            .iter()
            .filter(|row| row.gpus_per_node > 0 && row.started() && row.t_start <= to && row.t_end > from)
            .filter(|row| !matches!(row.kind, JobOutcome::CancelledPending { .. }))
            .map(|row| self.live_job(row))
            .collect()
    }

    fn live_job(&self, row: &JobRow) -> LiveJob {
        LiveJob {
            id_job: row.id_job,
            job_name: row.template.name.clone(),
            t_submit: row.t_submit,
            t_start: if row.started() { row.t_start } else { 0 },
            t_end: row.t_end,
            nodes: row.nodes.iter().map(|&node| node_name(node, self.width)).collect(),
            gpus_per_node: row.gpus_per_node,
            final_state: state_name(row.state_exit().0),
        }
    }

    /// The (state, time_start, time_end) slurmdbd's table holds of each job that may change after the
    /// history's end, keyed by (id_job, time_submit).
    async fn stored(&self, pool: &MySqlPool) -> Result<BTreeMap<(u32, i64), (u32, i64, i64)>> {
        let sql = format!(
            "SELECT id_job, CAST(time_submit AS SIGNED) AS submit, state, CAST(time_start AS SIGNED) AS start, \
             CAST(time_end AS SIGNED) AS end FROM `{}_job_table` WHERE time_submit > ? OR time_end = 0 OR time_end > ?",
            self.params.cluster
        );
        let rows = sqlx::query(&sql).bind(self.end).bind(self.end).fetch_all(pool).await.context("reading job rows")?;
        let mut stored = BTreeMap::new();
        for row in rows {
            let key = (row.try_get::<u32, _>("id_job")?, row.try_get::<i64, _>("submit")?);
            stored.insert(key, (row.try_get("state")?, row.try_get("start")?, row.try_get("end")?));
        }
        Ok(stored)
    }

    /// Writes every job whose phase changed in `(since, now]` as slurmdbd shows it at `now`: a new row for
    /// a submission, the same row (same `job_db_inx`) with its start, nodes and allocation when it starts,
    /// its state, exit code and end when it ends, and its steps. A row the table already holds as it is
    /// at `now` is left alone, so a second run over the same span writes nothing.
    pub async fn write(&self, pool: &MySqlPool, since: i64, now: i64) -> Result<Written> {
        let stored = self.stored(pool).await?;
        let job_table = format!("{}_job_table", self.params.cluster);
        let step_table = format!("{}_step_table", self.params.cluster);
        let job_sql = upsert_sql(&job_table, JOB_COLS, JOB_TUPLE, &["job_db_inx", "id_job", "time_submit"]);
        let step_sql = upsert_sql(&step_table, STEP_COLS, STEP_TUPLE, &["job_db_inx", "id_step"]);
        // Steps are written as they are at `now`: a plan that ends then.
        let plan_now = Plan {
            jobs: Vec::new(),
            events: Vec::new(),
            start: self.start,
            end: now,
            width: self.width,
            xid_victim: None,
            app_crash: None,
        };
        let mut written = Written::default();
        let mut transaction = pool.begin().await?;
        for (row, before, after) in self.changed(since, now) {
            let Some(shown) = Self::row_at(row, now) else { continue };
            let (state, _) = shown.state_exit();
            let times = (shown.t_start, shown.t_end);
            if stored
                .get(&(row.id_job, row.t_submit))
                .is_some_and(|&(s, start, end)| s == state && (start, end) == times)
            {
                continue;
            }
            let existing: Option<u64> = sqlx::query_scalar(&format!(
                "SELECT job_db_inx FROM `{job_table}` WHERE id_job = ? AND time_submit = ?"
            ))
            .bind(row.id_job)
            .bind(row.t_submit)
            .fetch_optional(&mut *transaction)
            .await?;
            let inx = match existing {
                Some(inx) => inx,
                None => {
                    let max: Option<u64> = sqlx::query_scalar(&format!("SELECT MAX(job_db_inx) FROM `{job_table}`"))
                        .fetch_one(&mut *transaction)
                        .await?;
                    max.unwrap_or(0) + 1
                }
            };
            let args = encode_jobs(&self.context, &plan_now, inx, 0, std::slice::from_ref(&shown))?;
            sqlx::query_with(&job_sql, args)
                .execute(&mut *transaction)
                .await
                .with_context(|| format!("writing job {}", row.id_job))?;
            let mut steps = Vec::new();
            steps_for(&self.params, &self.context, &plan_now, &shown, inx, &mut steps);
            for step in &steps {
                let args = encode_steps(std::slice::from_ref(step))?;
                sqlx::query_with(&step_sql, args)
                    .execute(&mut *transaction)
                    .await
                    .with_context(|| format!("writing a step of job {}", row.id_job))?;
            }
            written.steps += steps.len();
            if before == Phase::Unsubmitted {
                written.submitted += 1;
            }
            if before < Phase::Running && after >= Phase::Running && shown.started() {
                written.started += 1;
            }
            if after == Phase::Ended {
                written.ended += 1;
            }
        }
        transaction.commit().await?;
        Ok(written)
    }
}

/// `INSERT … ON DUPLICATE KEY UPDATE` of one row that updates every column but `keys`.
fn upsert_sql(table: &str, cols: &str, tuple: &str, keys: &[&str]) -> String {
    let updates: Vec<String> = cols
        .split(',')
        .map(str::trim)
        .filter(|col| !keys.contains(col))
        .map(|col| format!("{col} = VALUES({col})"))
        .collect();
    format!("{} ON DUPLICATE KEY UPDATE {}", insert_sql(table, cols, tuple, 1), updates.join(", "))
}
