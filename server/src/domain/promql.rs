//! Building PromQL/MetricsQL safely: validated metric and label names, escaped label values.
//! No text from a request reaches a query except through these types.

use std::fmt;
use std::str::FromStr;

/// A metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MetricName(String);

/// A label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LabelName(String);

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a valid metric or label name")]
pub struct BadName(pub String);

fn valid_name(text: &str, allow_colon: bool) -> bool {
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (allow_colon && c == ':'));
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (allow_colon && c == ':'))
}

impl FromStr for MetricName {
    type Err = BadName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if valid_name(text, true) { Ok(Self(text.to_string())) } else { Err(BadName(text.to_string())) }
    }
}

impl FromStr for LabelName {
    type Err = BadName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if valid_name(text, false) { Ok(Self(text.to_string())) } else { Err(BadName(text.to_string())) }
    }
}

impl TryFrom<String> for MetricName {
    type Error = BadName;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl TryFrom<String> for LabelName {
    type Error = BadName;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<MetricName> for String {
    fn from(name: MetricName) -> Self {
        name.0
    }
}

impl From<LabelName> for String {
    fn from(name: LabelName) -> Self {
        name.0
    }
}

impl MetricName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl LabelName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A name known at compile time to be valid.
    pub(crate) fn from_static(name: &'static str) -> Self {
        Self(name.to_string())
    }
}

impl fmt::Display for MetricName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for LabelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Escapes a label value for a double-quoted PromQL string.
pub fn escape_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// Escapes regex metacharacters so a value matches only itself inside `=~`.
pub fn escape_regex(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// A label matcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Matcher {
    Equal(LabelName, String),
    /// Matches any of the values exactly (rendered as an escaped `=~"a|b"`).
    AnyOf(LabelName, Vec<String>),
    /// Matches any of the hosts, with or without a `:port` suffix (a scrape target's `instance`).
    AnyHost(LabelName, Vec<String>),
    /// Matches none of the values (rendered as an escaped `!~"a|b"`).
    NoneOf(LabelName, Vec<String>),
    /// Matches a Slurm job id as Lustre's `jobid_var`/`jobid_name` writes it: the id alone, or the id
    /// followed by a separator and more (`1234`, `1234.alice`, `1234@n001`), never `12345`.
    JobId(LabelName, u32),
}

/// `metric{matchers}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub metric: MetricName,
    pub matchers: Vec<Matcher>,
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{{", self.metric)?;
        for (index, matcher) in self.matchers.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            match matcher {
                Matcher::Equal(label, value) => write!(f, "{label}=\"{}\"", escape_value(value))?,
                Matcher::AnyOf(label, values) => {
                    let alternatives = values.iter().map(|v| escape_regex(v)).collect::<Vec<_>>().join("|");
                    write!(f, "{label}=~\"{}\"", escape_value(&alternatives))?;
                }
                Matcher::AnyHost(label, hosts) => {
                    let alternatives = hosts.iter().map(|v| escape_regex(v)).collect::<Vec<_>>().join("|");
                    write!(f, "{label}=~\"{}\"", escape_value(&format!("({alternatives})(:[0-9]+)?")))?;
                }
                Matcher::NoneOf(label, values) => {
                    let alternatives = values.iter().map(|v| escape_regex(v)).collect::<Vec<_>>().join("|");
                    write!(f, "{label}!~\"{}\"", escape_value(&alternatives))?;
                }
                Matcher::JobId(label, id) => write!(f, "{label}=~\"{}\"", escape_value(&format!("{id}([.@:_-].*)?")))?,
            }
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(name: &str) -> LabelName {
        name.parse().expect("valid label")
    }

    #[test]
    fn excluded_values_and_job_ids_render_as_anchored_regexes() {
        let selector = Selector {
            metric: "node_network_receive_bytes_total".parse().expect("valid"),
            matchers: vec![Matcher::NoneOf(label("device"), vec!["lo".into(), "veth.x".into()])],
        };
        assert_eq!(selector.to_string(), r#"node_network_receive_bytes_total{device!~"lo|veth\\.x"}"#);
        let selector = Selector {
            metric: "lustre_job_read_bytes_total".parse().expect("valid"),
            matchers: vec![Matcher::JobId(label("jobid"), 1234)],
        };
        // PromQL anchors regexes: 12345 does not match, 1234.alice does.
        assert_eq!(selector.to_string(), r#"lustre_job_read_bytes_total{jobid=~"1234([.@:_-].*)?"}"#);
    }

    #[test]
    fn names_are_validated() {
        assert!("DCGM_FI_DEV_GPU_UTIL".parse::<MetricName>().is_ok());
        assert!("job:rate5m".parse::<MetricName>().is_ok());
        for bad in ["", "1abc", "a b", "a{b}", "a\"", "x-y"] {
            assert!(bad.parse::<MetricName>().is_err(), "{bad}");
        }
        assert!("job:x".parse::<LabelName>().is_err());
    }

    #[test]
    fn values_cannot_escape_their_string() {
        let selector = Selector {
            metric: "up".parse().expect("valid"),
            matchers: vec![
                Matcher::Equal(label("job"), "x\"} or vector(1) or {a=\"".into()),
                Matcher::AnyOf(label("Hostname"), vec!["n1".into(), "n.2|.*".into()]),
            ],
        };
        assert_eq!(selector.to_string(), r#"up{job="x\"} or vector(1) or {a=\"",Hostname=~"n1|n\\.2\\|\\.\\*"}"#);
    }
}
