//! Decoding of slurmdbd rows into domain records (column order fixed by the queries in `mod.rs`).

use sqlx::Row;
use sqlx::mysql::MySqlRow;

use super::SlurmDbdError;
use crate::domain::exit_code::ExitCode;
use crate::domain::hostlist::Hostlist;
use crate::domain::ids::{JobIdentity, NO_VAL};
use crate::domain::job::{EndedJob, JobCursor, JobRecord, StepRecord};
use crate::domain::state::JobState;
use crate::domain::time::TimeLimit;
use crate::domain::tres::{MemRequest, TresMap};

/// A node event row (`<cluster>_event_table`), decoded.
#[derive(Debug, Clone)]
pub struct NodeEventRecord {
    pub node: String,
    pub state: u32,
    pub reason: String,
    /// None for slurmdbd's "no uid" (NO_VAL).
    pub reason_uid: Option<u32>,
    pub time_start: u64,
    pub time_end: u64,
}

fn schema(context: &str, error: impl std::fmt::Display) -> SlurmDbdError {
    SlurmDbdError::Schema(format!("{context}: {error}"))
}

fn u64_at(row: &MySqlRow, index: usize) -> Result<u64, SlurmDbdError> {
    row.try_get::<u64, _>(index).map_err(|e| schema("column", e))
}

fn u32_at(row: &MySqlRow, index: usize) -> Result<u32, SlurmDbdError> {
    let value = u64_at(row, index)?;
    u32::try_from(value).map_err(|_| schema("column", format!("{value} does not fit 32 bits")))
}

fn opt_u32_at(row: &MySqlRow, index: usize) -> Result<Option<u32>, SlurmDbdError> {
    let value: Option<u64> = row.try_get(index).map_err(|e| schema("column", e))?;
    Ok(value.and_then(|v| u32::try_from(v).ok()))
}

fn text_at(row: &MySqlRow, index: usize) -> Result<String, SlurmDbdError> {
    row.try_get::<String, _>(index).map_err(|e| schema("column", e))
}

fn opt_text_at(row: &MySqlRow, index: usize) -> Result<Option<String>, SlurmDbdError> {
    row.try_get::<Option<String>, _>(index).map_err(|e| schema("column", e))
}

fn i64_at(row: &MySqlRow, index: usize) -> Result<i64, SlurmDbdError> {
    row.try_get::<i64, _>(index).map_err(|e| schema("column", e))
}

/// A job row's identity, columns 1–7 of both `job_columns` and `sealed::ENDED_COLUMNS`.
fn identity_at(row: &MySqlRow) -> Result<JobIdentity, SlurmDbdError> {
    Ok(JobIdentity {
        id_job: u32_at(row, 1)?,
        id_array_job: u32_at(row, 2)?,
        id_array_task: u32_at(row, 3)?,
        array_task_str: opt_text_at(row, 4)?,
        array_max_tasks: u32_at(row, 5)?,
        het_job_id: u32_at(row, 6)?,
        het_job_offset: u32_at(row, 7)?,
    })
}

/// A job row's user (columns 9 and 10 of both shapes): sacct names the user from the job's
/// association; a job without one shows its uid.
fn user_at(row: &MySqlRow) -> Result<String, SlurmDbdError> {
    match opt_text_at(row, 9)?.filter(|name| !name.is_empty()) {
        Some(name) => Ok(name),
        None => Ok(u32_at(row, 10)?.to_string()),
    }
}

/// Where a row selected with `job_columns` stands in the listing's order, read without decoding the rest.
pub(super) fn cursor_at(row: &MySqlRow) -> Result<JobCursor, SlurmDbdError> {
    Ok(JobCursor { time_submit: u64_at(row, 19)?, time_end: u64_at(row, 22)?, db_index: u64_at(row, 0)? })
}

/// Decodes one row selected with `job_columns`.
pub(super) fn decode_job(row: &MySqlRow) -> Result<JobRecord, SlurmDbdError> {
    let id_job = u32_at(row, 1)?;
    let (node_list, nodes) = nodes_at(row, 25, id_job)?;
    let tres_alloc = tres_at(row, 29, id_job, "tres_alloc")?;
    let tres_req = tres_at(row, 30, id_job, "tres_req")?;
    let uid = u32_at(row, 10)?;
    let user = user_at(row)?;
    Ok(JobRecord {
        db_index: u64_at(row, 0)?,
        identity: identity_at(row)?,
        job_name: text_at(row, 8)?,
        user,
        uid,
        gid: u32_at(row, 11)?,
        account: text_at(row, 12)?,
        partition: text_at(row, 13)?,
        qos: opt_text_at(row, 14)?.unwrap_or_default(),
        state: JobState::from_raw(u32_at(row, 15)?),
        kill_requid: opt_u32_at(row, 16)?.filter(|&uid| uid != NO_VAL && uid != u32::MAX),
        exit_code: ExitCode::from_wait_status(i64_at(row, 17)?),
        derived_exit_code: ExitCode::from_wait_status(i64_at(row, 18)?),
        time_submit: u64_at(row, 19)?,
        time_eligible: u64_at(row, 20)?,
        time_start: u64_at(row, 21)?,
        time_end: u64_at(row, 22)?,
        time_suspended: u64_at(row, 23)?,
        timelimit: TimeLimit::from_raw(u32_at(row, 24)?),
        node_list,
        nodes,
        alloc_nodes: u32_at(row, 26)?,
        cpus_req: u32_at(row, 27)?,
        mem_req: MemRequest::from_raw(u64_at(row, 28)?),
        tres_alloc,
        tres_req,
        comment: opt_text_at(row, 31)?.filter(|comment| !comment.is_empty()),
        work_dir: text_at(row, 32)?,
        submit_line: text_at(row, 33)?,
        sluid: slurmlens_slurm::sluid::Sluid::from_stored(u64_at(row, 34)?),
        restarts: opt_u32_at(row, 35)?,
    })
}

/// Job `id_job`'s node list at `index`, as stored and parsed.
fn nodes_at(row: &MySqlRow, index: usize, id_job: u32) -> Result<(String, Hostlist), SlurmDbdError> {
    let node_list = text_at(row, index)?;
    let nodes = Hostlist::parse(&node_list).map_err(|e| schema(&format!("job {id_job} nodelist"), e))?;
    Ok((node_list, nodes))
}

/// Job `id_job`'s TRES string `column` at `index`, parsed.
fn tres_at(row: &MySqlRow, index: usize, id_job: u32, column: &str) -> Result<TresMap, SlurmDbdError> {
    TresMap::parse(&text_at(row, index)?).map_err(|e| schema(&format!("job {id_job} {column}"), e))
}

/// Decodes one row selected with `sealed::ENDED_COLUMNS`.
pub(super) fn decode_ended(row: &MySqlRow) -> Result<EndedJob, SlurmDbdError> {
    let id_job = u32_at(row, 1)?;
    let (node_list, nodes) = nodes_at(row, 15, id_job)?;
    let tres_alloc = tres_at(row, 17, id_job, "tres_alloc")?;
    let user = user_at(row)?;
    Ok(EndedJob {
        db_index: u64_at(row, 0)?,
        identity: identity_at(row)?,
        job_name: text_at(row, 8)?,
        user,
        account: text_at(row, 11)?,
        partition: text_at(row, 12)?,
        state: JobState::from_raw(u32_at(row, 13)?),
        time_submit: u64_at(row, 14)?,
        time_start: u64_at(row, 18)?,
        time_end: u64_at(row, 19)?,
        node_list,
        nodes,
        alloc_nodes: u32_at(row, 16)?,
        tres_alloc,
    })
}

/// Decodes one step row as selected in `SlurmDbd::steps`.
pub(super) fn decode_step(row: &MySqlRow) -> Result<StepRecord, SlurmDbdError> {
    let id_step = i64_at(row, 0)?;
    let tres = |index: usize| -> Result<TresMap, SlurmDbdError> {
        TresMap::parse(&text_at(row, index)?).map_err(|e| schema(&format!("step {id_step} tres"), e))
    };
    let seconds = u64_at(row, 11)? as f64;
    let micros = u64_at(row, 12)? as f64;
    Ok(StepRecord {
        id_step,
        step_name: text_at(row, 1)?,
        state: JobState::from_raw(u32_at(row, 2)?),
        exit_code: ExitCode::from_wait_status(i64_at(row, 3)?),
        time_start: u64_at(row, 4)?,
        time_end: u64_at(row, 5)?,
        time_suspended: u64_at(row, 6)?,
        node_list: text_at(row, 7)?,
        task_count: u32_at(row, 8)?,
        tres_alloc: tres(9)?,
        tres_usage_in_max: tres(10)?,
        cpu_seconds: seconds + micros / 1e6,
    })
}

/// Decodes one event row as selected in `SlurmDbd::node_events`.
pub(super) fn decode_event(row: &MySqlRow) -> Result<NodeEventRecord, SlurmDbdError> {
    let reason_uid = u32_at(row, 3)?;
    Ok(NodeEventRecord {
        node: text_at(row, 0)?,
        state: u32_at(row, 1)?,
        reason: text_at(row, 2)?,
        reason_uid: (reason_uid != NO_VAL).then_some(reason_uid),
        time_start: u64_at(row, 4)?,
        time_end: u64_at(row, 5)?,
    })
}
