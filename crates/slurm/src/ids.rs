//! Job identifiers as users type them (`123`, `123_4`, `8+1`) and as slurmdbd stores them.

use std::fmt;
use std::str::FromStr;

/// slurmdbd's NO_VAL for 32-bit columns (`id_array_task`, `het_job_offset` of plain jobs).
pub const NO_VAL: u32 = 0xffff_fffe;
/// slurmdbd's INFINITE for 32-bit columns.
pub const INFINITE: u32 = 0xffff_ffff;

/// A job id as typed in a URL or on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobSelector {
    /// `123`: the job record whose own id is 123 (an array task's own id works too).
    Id(u32),
    /// `123_4`: task 4 of array 123.
    ArrayTask { array_job_id: u32, task_id: u32 },
    /// `8+1`: component 1 of heterogeneous job 8.
    HetComponent { het_job_id: u32, offset: u32 },
}

/// Why a job id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a job id (expected 123, 123_4 or 123+1)")]
pub struct BadJobId(pub String);

fn parse_id(text: &str, whole: &str) -> Result<u32, BadJobId> {
    // Only plain decimal digits: rejects signs, spaces and the NO_VAL/INFINITE sentinels.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadJobId(whole.to_string()));
    }
    let value: u32 = text.parse().map_err(|_| BadJobId(whole.to_string()))?;
    if value == 0 || value >= NO_VAL {
        return Err(BadJobId(whole.to_string()));
    }
    Ok(value)
}

impl FromStr for JobSelector {
    type Err = BadJobId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some((job, task)) = text.split_once('_') {
            let task_id = if task == "0" { 0 } else { parse_id(task, text)? };
            return Ok(Self::ArrayTask { array_job_id: parse_id(job, text)?, task_id });
        }
        if let Some((job, offset)) = text.split_once('+') {
            let offset = if offset == "0" { 0 } else { parse_id(offset, text)? };
            return Ok(Self::HetComponent { het_job_id: parse_id(job, text)?, offset });
        }
        Ok(Self::Id(parse_id(text, text)?))
    }
}

/// The identity fields of one job record, from which sacct's `JobID` is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdentity {
    pub id_job: u32,
    /// Array master id, 0 for a non-array job.
    pub id_array_job: u32,
    /// Array task index, NO_VAL for a non-array job or a pending array meta record.
    pub id_array_task: u32,
    /// Hex bitmap of still-pending tasks on an array's meta record (`0x3FF`).
    pub array_task_str: Option<String>,
    /// `%N` throttle of an array.
    pub array_max_tasks: u32,
    /// Het leader id, 0 for a non-het job.
    pub het_job_id: u32,
    /// Het component, NO_VAL for a non-het job.
    pub het_job_offset: u32,
}

impl JobIdentity {
    /// A job that is neither an array task nor a het component.
    pub fn plain(id_job: u32) -> Self {
        Self {
            id_job,
            id_array_job: 0,
            id_array_task: NO_VAL,
            array_task_str: None,
            array_max_tasks: 0,
            het_job_id: 0,
            het_job_offset: NO_VAL,
        }
    }

    /// (array job id, task id) of an array task; None otherwise, a pending meta record included.
    pub fn array_task(&self) -> Option<(u32, u32)> {
        (self.id_array_job != 0 && self.id_array_task != NO_VAL).then_some((self.id_array_job, self.id_array_task))
    }

    /// (het leader id, component offset) of a het component; None otherwise.
    pub fn het_component(&self) -> Option<(u32, u32)> {
        (self.het_job_id != 0 && self.het_job_offset != NO_VAL).then_some((self.het_job_id, self.het_job_offset))
    }

    /// True when this record is the one `selector` names.
    pub fn matches(&self, selector: JobSelector) -> bool {
        match selector {
            JobSelector::Id(id) => self.id_job == id,
            JobSelector::ArrayTask { array_job_id, task_id } => self.array_task() == Some((array_job_id, task_id)),
            JobSelector::HetComponent { het_job_id, offset } => self.het_component() == Some((het_job_id, offset)),
        }
    }
}

impl fmt::Display for JobIdentity {
    /// sacct's `JobID` column.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((array_job_id, task_id)) = self.array_task() {
            return write!(f, "{array_job_id}_{task_id}");
        }
        if self.id_array_job != 0 {
            let pending = self.array_task_str.as_deref().map(array_bitmap_ranges).unwrap_or_default();
            let throttle = if self.array_max_tasks > 0 { format!("%{}", self.array_max_tasks) } else { String::new() };
            return if pending.is_empty() {
                write!(f, "{}_*", self.id_array_job)
            } else {
                write!(f, "{}_[{pending}{throttle}]", self.id_array_job)
            };
        }
        if let Some((het_job_id, offset)) = self.het_component() {
            return write!(f, "{het_job_id}+{offset}");
        }
        write!(f, "{}", self.id_job)
    }
}

/// Turns slurmdbd's hex task bitmap (`0x3FF`, bit i = task i) into ranges (`0-9`).
pub fn array_bitmap_ranges(hex: &str) -> String {
    let digits = hex.trim().trim_start_matches("0x").trim_start_matches("0X");
    let mut tasks: Vec<u32> = Vec::new();
    for (position, c) in digits.chars().rev().enumerate() {
        let Some(nibble) = c.to_digit(16) else {
            return String::new();
        };
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                tasks.push(position as u32 * 4 + bit);
            }
        }
    }
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for task in tasks {
        match ranges.last_mut() {
            Some((_, hi)) if task == *hi + 1 => *hi = task,
            _ => ranges.push((task, task)),
        }
    }
    ranges
        .iter()
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
        .collect::<Vec<_>>()
        .join(",")
}

/// A step id as sacct prints it after the job id: `batch`, `extern`, `interactive`, `0`.
pub fn step_suffix(id_step: i64) -> String {
    match id_step {
        -5 => "batch".to_string(),
        -4 => "extern".to_string(),
        -6 => "interactive".to_string(),
        -2 => "pending".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_job_selectors() {
        assert_eq!("123".parse(), Ok(JobSelector::Id(123)));
        assert_eq!("123_4".parse(), Ok(JobSelector::ArrayTask { array_job_id: 123, task_id: 4 }));
        assert_eq!("123_0".parse(), Ok(JobSelector::ArrayTask { array_job_id: 123, task_id: 0 }));
        assert_eq!("8+1".parse(), Ok(JobSelector::HetComponent { het_job_id: 8, offset: 1 }));
        for bad in ["-1", "0", "abc", "", "1_", "_1", "1+-1", " 12", "4294967294", "99999999999"] {
            assert!(bad.parse::<JobSelector>().is_err(), "{bad}");
        }
    }

    #[test]
    fn prints_job_ids_like_sacct() {
        assert_eq!(JobIdentity::plain(7).to_string(), "7");
        let task = JobIdentity { id_array_job: 5, id_array_task: 3, ..JobIdentity::plain(5) };
        assert_eq!(task.to_string(), "5_3");
        let meta = JobIdentity {
            id_array_job: 15,
            array_task_str: Some("0x3FF".into()),
            array_max_tasks: 2,
            ..JobIdentity::plain(15)
        };
        assert_eq!(meta.to_string(), "15_[0-9%2]");
        let het = JobIdentity { het_job_id: 8, het_job_offset: 1, ..JobIdentity::plain(9) };
        assert_eq!(het.to_string(), "8+1");
        assert!(het.matches(JobSelector::HetComponent { het_job_id: 8, offset: 1 }));
        assert!(het.matches(JobSelector::Id(9)));
    }

    #[test]
    fn decodes_array_bitmaps() {
        assert_eq!(array_bitmap_ranges("0x3FF"), "0-9");
        assert_eq!(array_bitmap_ranges("0x5"), "0,2");
        assert_eq!(array_bitmap_ranges("0x30"), "4-5");
        assert_eq!(array_bitmap_ranges("zz"), "");
    }
}
