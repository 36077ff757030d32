//! Query-string parsing into domain types, naming the parameter at fault.

use std::collections::BTreeMap;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use chrono::{DateTime, Utc};

use super::error::ApiError;

/// 0000-01-01T00:00:00Z: the first second RFC 3339 can write, and the first a time parameter may name.
pub const MIN_EPOCH_SECONDS: i64 = -62_167_219_200;
/// 9999-12-31T23:59:59Z: the last second RFC 3339 can write, and the last a time parameter may name.
pub const MAX_EPOCH_SECONDS: i64 = 253_402_300_799;

/// The longest Slurm name (user, account, partition, node) a filter may hold.
pub const MAX_NAME_LEN: usize = 128;

/// A name filter holds no space or control character and at most [`MAX_NAME_LEN`] characters. Any
/// other text is a name to look for: one slurmdbd's latin1 columns cannot hold (`山田`) matches no job
/// (the reader sees to that), it is not an error.
fn is_slurm_name(value: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&value.chars().count()) && !value.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn not_a_name(value: &str) -> String {
    let shown: String = value.chars().filter(|c| !c.is_control()).take(MAX_NAME_LEN).collect();
    format!("`{shown}` is not a Slurm name (no spaces or control characters, at most {MAX_NAME_LEN} characters)")
}

/// A handler's raw query string: its rejection becomes our envelope instead of axum's text.
pub type QueryPairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The pairs of a query string, or a 400 naming `query`.
pub fn pairs(query: QueryPairs) -> Result<Vec<(String, String)>, ApiError> {
    query.map(|Query(pairs)| pairs).map_err(|e| ApiError::invalid("query", e.body_text()))
}

/// The query string as name → value, refusing repeated or unknown names.
pub struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    pub fn new(pairs: Vec<(String, String)>, known: &[&str]) -> Result<Self, ApiError> {
        let mut values = BTreeMap::new();
        for (name, value) in pairs {
            if !known.contains(&name.as_str()) {
                return Err(ApiError::invalid(
                    &name,
                    format!("unknown parameter `{name}`; known: {}", known.join(", ")),
                ));
            }
            if values.insert(name.clone(), value).is_some() {
                return Err(ApiError::invalid(&name, format!("`{name}` given twice; use a comma-separated list")));
            }
        }
        Ok(Self { values })
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// A comma-separated list (`state=FAILED,TIMEOUT`), empty when absent.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.text(name)
            .map(|text| text.split(',').map(str::trim).filter(|v| !v.is_empty()).map(String::from).collect())
            .unwrap_or_default()
    }

    /// A comma-separated list of Slurm names (`user=alice,bob`, `partition=gpu`), empty when absent; each
    /// as [`is_slurm_name`] says.
    pub fn names(&self, name: &str) -> Result<Vec<String>, ApiError> {
        let names = self.list(name);
        match names.iter().find(|value| !is_slurm_name(value)) {
            Some(bad) => Err(ApiError::invalid(name, not_a_name(bad))),
            None => Ok(names),
        }
    }

    /// One Slurm name (`node=gpu001`), as [`Params::names`] reads each.
    pub fn name(&self, name: &str) -> Result<Option<&str>, ApiError> {
        match self.text(name) {
            Some(value) if !is_slurm_name(value) => Err(ApiError::invalid(name, not_a_name(value))),
            value => Ok(value),
        }
    }

    /// RFC 3339 or Unix seconds, within the years 0000 to 9999 (what RFC 3339 can write): a time beyond
    /// them is refused here, so that no handler's arithmetic on it can overflow.
    pub fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
        let Some(text) = self.text(name) else {
            return Ok(None);
        };
        let rfc3339 = DateTime::parse_from_rfc3339(text).ok().map(|parsed| parsed.with_timezone(&Utc));
        let epoch = || {
            let seconds = text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse::<i64>().ok()).flatten()?;
            DateTime::from_timestamp(seconds, 0)
        };
        match rfc3339.or_else(epoch) {
            Some(parsed) if (MIN_EPOCH_SECONDS..=MAX_EPOCH_SECONDS).contains(&parsed.timestamp()) => Ok(Some(parsed)),
            Some(_) => Err(ApiError::invalid(
                name,
                format!("`{text}` is out of range (0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z)"),
            )),
            None => Err(ApiError::invalid(
                name,
                format!("`{text}` is not a time (RFC 3339 such as 2026-11-29T12:00:00Z, or Unix seconds)"),
            )),
        }
    }

    /// An unsigned integer within `[min, max]`.
    pub fn number(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, ApiError> {
        let Some(text) = self.text(name) else {
            return Ok(None);
        };
        let value: u64 =
            text.parse().map_err(|_| ApiError::invalid(name, format!("`{text}` is not a non-negative integer")))?;
        if value < min || value > max {
            return Err(ApiError::invalid(name, format!("{value} is out of range {min}..={max}")));
        }
        Ok(Some(value))
    }
}

/// A Slurm name taken from a path (`/nodes/{name}`), as [`Params::name`] reads one.
pub fn path_name<'a>(parameter: &str, value: &'a str) -> Result<&'a str, ApiError> {
    if is_slurm_name(value) { Ok(value) } else { Err(ApiError::invalid(parameter, not_a_name(value))) }
}
