//! Query-string parsing into domain types, naming the parameter at fault.

use std::collections::BTreeMap;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use chrono::{DateTime, Utc};

use super::error::ApiError;

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

    /// RFC 3339 or Unix seconds, from 1970 to the end of 9999 ([`slurmlens_wire::LATEST_EPOCH`]).
    pub fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
        let Some(text) = self.text(name) else {
            return Ok(None);
        };
        let epoch = match DateTime::parse_from_rfc3339(text) {
            Ok(parsed) => Some(parsed.timestamp()),
            Err(_) => text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse::<i64>().ok()).flatten(),
        };
        let Some(epoch) = epoch else {
            return Err(ApiError::invalid(
                name,
                format!("`{text}` is not a time (RFC 3339 such as 2026-11-29T12:00:00Z, or Unix seconds)"),
            ));
        };
        match DateTime::from_timestamp(epoch, 0) {
            Some(time) if (0..=slurmlens_wire::LATEST_EPOCH).contains(&epoch) => Ok(Some(time)),
            _ => Err(ApiError::invalid(name, format!("`{text}` is outside 1970-01-01 to 9999-12-31"))),
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
