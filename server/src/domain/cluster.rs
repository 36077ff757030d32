//! Names that reach SQL as identifiers: a cluster name prefixes slurmdbd's tables.

use std::fmt;
use std::str::FromStr;

/// A Slurm cluster name, safe to splice into `<cluster>_job_table`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(String);

/// Why a cluster name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a cluster name (lowercase letters, digits, `_` and `-`, at most 64)")]
pub struct BadClusterName(pub String);

impl FromStr for ClusterName {
    type Err = BadClusterName;

    /// Slurm lowercases cluster names; only `[a-z0-9_-]` may ever reach a table name.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let valid = !text.is_empty()
            && text.len() <= 64
            && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if valid { Ok(Self(text.to_string())) } else { Err(BadClusterName(text.to_string())) }
    }
}

impl ClusterName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The quoted name of one of this cluster's tables, e.g. `` `lab_job_table` ``.
    pub fn table(&self, suffix: &str) -> String {
        format!("`{}_{suffix}`", self.0)
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ClusterName {
    /// A name known at compile time to be valid.
    pub(crate) fn from_static(name: &'static str) -> Self {
        Self(name.to_string())
    }
}

impl serde::Serialize for ClusterName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ClusterName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_names_become_table_prefixes() {
        assert_eq!("lab".parse::<ClusterName>().map(|c| c.table("job_table")), Ok("`lab_job_table`".to_string()));
        for bad in ["", "Lab", "a;drop", "a`b", "a b", &"x".repeat(65)] {
            assert!(bad.parse::<ClusterName>().is_err(), "{bad}");
        }
    }
}
