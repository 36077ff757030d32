//! Building LogsQL (VictoriaLogs' query language) safely: validated field names, every value quoted
//! and escaped, a free-text filter that cannot change the query's meaning. No text from a request
//! reaches a query except through these types.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, Utc};

use super::logs::OwnLines;

/// Longest free-text filter accepted (characters).
pub const MAX_CONTAINS: usize = 200;

/// A log field name (`host`, `hostname`, `host.name`, `kubernetes.node_name`): letters, digits and
/// `_ . -`, starting with a letter or `_`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FieldName(String);

/// Why a field name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a log field name (letters, digits, `_`, `.` and `-`, starting with a letter or `_`)")]
pub struct BadFieldName(pub String);

impl FromStr for FieldName {
    type Err = BadFieldName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut chars = text.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if first_ok && text.len() <= 128 && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
            Ok(Self(text.to_string()))
        } else {
            Err(BadFieldName(text.to_string()))
        }
    }
}

impl TryFrom<String> for FieldName {
    type Error = BadFieldName;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<FieldName> for String {
    fn from(name: FieldName) -> Self {
        name.0
    }
}

impl FieldName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A name known at compile time to be valid.
    pub(crate) fn from_static(name: &'static str) -> Self {
        Self(name.to_string())
    }
}

impl fmt::Display for FieldName {
    /// As a query holds it: bare when made of letters, digits, `_` and `.`; quoted otherwise (`-`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.chars().all(|c| c.is_ascii_alphanumeric() || "_.".contains(c)) {
            f.write_str(&self.0)
        } else {
            f.write_str(&quote(&self.0))
        }
    }
}

/// A value as a double-quoted LogsQL string. LogsQL reads quoted strings as Go does, so a backslash,
/// a quote and every control character are escaped; other Unicode passes through unchanged.
pub fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// A user's free-text filter: words of letters and digits with spaces and a few punctuation marks
/// that mean nothing to LogsQL inside a quoted phrase. Everything that could (quotes, backslash, `|`,
/// brackets of groups, `:`, `*`, control characters) is refused, not escaped, so a person sees why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainsText(String);

/// Punctuation a free-text filter may hold besides letters, digits and spaces.
pub const CONTAINS_PUNCTUATION: &str = "-_.,/=@+#%!?[]";

impl FromStr for ContainsText {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err("is empty".into());
        }
        if text.chars().count() > MAX_CONTAINS {
            return Err(format!("is longer than {MAX_CONTAINS} characters"));
        }
        if let Some(bad) =
            text.chars().find(|c| !(c.is_alphanumeric() || *c == ' ' || CONTAINS_PUNCTUATION.contains(*c)))
        {
            let shown = if bad.is_control() { format!("U+{:04X}", u32::from(bad)) } else { format!("`{bad}`") };
            return Err(format!(
                "may hold only letters, digits, spaces and {CONTAINS_PUNCTUATION}; {shown} is not allowed"
            ));
        }
        Ok(Self(text.to_string()))
    }
}

impl ContainsText {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Words whose lines [`crate::domain::logs::classify`] may pull up front; the important-lines query
/// asks for these only, so they are found even when the window holds more lines than the limit.
const IMPORTANT_WORDS: &[&str] = &[
    "NVRM",
    "Xid",
    "NCCL",
    "ncclRemoteError",
    "ncclSystemError",
    "Watchdog",
    "oom-kill",
    "oom_reaper",
    "slurmstepd",
    "slurmd",
    // Syslog keeps the program apart from the message (`app_name`), so slurmstepd's own lines are
    // found by what they say: a cancelled job or step, a task a signal killed.
    "CANCELLED",
];

/// Phrases matched case-insensitively by the important-lines query.
const IMPORTANT_PHRASES: &[&str] = &["out of memory", "link down", "link is down", "died by signal"];

/// The logs of one job: its window, its nodes (exact matches on the site's node field), the site's
/// fixed filter and the user's phrase.
#[derive(Debug, Clone)]
pub struct JobLogQuery<'a> {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub node_field: &'a FieldName,
    /// The job's nodes (or the one the user picked among them); never empty.
    pub nodes: &'a [String],
    /// The site's own LogsQL filter from the configuration (trusted; wrapped in parentheses).
    pub site_filter: Option<&'a str>,
    pub contains: Option<&'a ContainsText>,
    /// For a viewer who is not staff: only the job's own lines (see [`OwnLines`]). The query narrows
    /// to them; the server checks every line it reads against the same rule.
    pub own: Option<&'a OwnLines>,
}

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl JobLogQuery<'_> {
    /// The filters every query of this job shares: `_time:[start, end] host:in("n1","n2") …`.
    fn scope(&self) -> String {
        let mut parts = vec![format!("_time:[{}, {}]", time(self.start), time(self.end))];
        parts.push(match self.nodes {
            [one] => format!("{}:={}", self.node_field, quote(one)),
            many => {
                let values: Vec<String> = many.iter().map(|node| quote(node)).collect();
                format!("{}:in({})", self.node_field, values.join(", "))
            }
        });
        if let Some(filter) = self.site_filter.map(str::trim).filter(|filter| !filter.is_empty()) {
            parts.push(format!("({filter})"));
        }
        if let Some(contains) = self.contains {
            parts.push(quote(contains.as_str()));
        }
        if let Some(own) = self.own {
            parts.push(self.own_filter(own));
        }
        parts.join(" ")
    }

    /// `("1234" OR "job_1234" OR "1001" OR "uid_1001" OR (host:="n2" (_time:[…] OR …)))`: the words the
    /// job's marks are made of (LogsQL matches whole words: `1234` is not `12345`), or a node and span
    /// it held alone.
    fn own_filter(&self, own: &OwnLines) -> String {
        let marks = &own.marks;
        let words = [
            marks.job_id.to_string(),
            format!("job_{}", marks.job_id),
            marks.uid.to_string(),
            format!("uid_{}", marks.uid),
        ];
        let mut any: Vec<String> = words.iter().chain(&marks.sluids).map(|word| quote(word)).collect();
        for node in self.nodes {
            let Some(spans) = own.alone.get(node) else { continue };
            let times: Vec<String> =
                spans.iter().map(|(from, to)| format!("_time:[{}, {}]", time(*from), time(*to))).collect();
            any.push(format!("({}:={} ({}))", self.node_field, quote(node), times.join(" OR ")));
        }
        format!("({})", any.join(" OR "))
    }

    /// Every line of the window.
    pub fn lines(&self) -> String {
        self.scope()
    }

    /// The lines holding one of the words [`crate::domain::logs::classify`] looks at.
    pub fn important(&self) -> String {
        let words = IMPORTANT_WORDS.iter().map(|word| quote(word));
        let phrases = IMPORTANT_PHRASES.iter().map(|phrase| format!("i({})", quote(phrase)));
        let any: Vec<String> = words.chain(phrases).collect();
        format!("{} ({})", self.scope(), any.join(" OR "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(quote("n1"), r#""n1""#);
        assert_eq!(quote(r#"a"b"#), r#""a\"b""#);
        assert_eq!(quote(r"a\b"), r#""a\\b""#);
        assert_eq!(quote("a\\\"b"), r#""a\\\"b""#, "a backslash before a quote cannot unescape it");
        assert_eq!(quote("a\nb\r\tc"), r#""a\nb\r\tc""#);
        assert_eq!(quote("bell\u{7}"), r#""bell\u0007""#);
        assert_eq!(quote("nœud-é 東京"), "\"nœud-é 東京\"", "Unicode passes through");
        assert_eq!(quote(r#"") OR _time:* | delete"#), r#""\") OR _time:* | delete""#);
    }

    #[test]
    fn field_names_are_plain() {
        for good in ["host", "hostname", "host.name", "kubernetes.node_name", "_stream_host", "node-name"] {
            assert!(good.parse::<FieldName>().is_ok(), "{good}");
        }
        for bad in ["", "1host", "host name", "host:", "host\"", "h|x", "host(", "a*"] {
            assert!(bad.parse::<FieldName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn free_text_holds_words_and_refuses_what_could_change_the_query() {
        for good in ["NCCL WARN", "Xid 79", "GPU has fallen off the bus.", "[1234.0]", "node-01 rank=3", "ошибка"]
        {
            assert_eq!(good.parse::<ContainsText>().map(|text| text.0), Ok(good.to_string()));
        }
        for bad in [
            "\"",
            "a\" OR *",
            r"a\b",
            "a | delete",
            "(x)",
            "{job=\"x\"}",
            "_time:*",
            "host:n2",
            "x*",
            "a\nb",
            "tab\there",
            "nul\0",
            "'single'",
            "",
            "   ",
        ] {
            assert!(bad.parse::<ContainsText>().is_err(), "{bad:?} must be refused");
        }
        assert!("x".repeat(MAX_CONTAINS).parse::<ContainsText>().is_ok());
        assert!("x".repeat(MAX_CONTAINS + 1).parse::<ContainsText>().is_err());
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&Utc)
    }

    #[test]
    fn a_job_query_is_its_window_and_exact_matches_on_its_nodes() {
        let field: FieldName = "host".parse().expect("field");
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let contains: ContainsText = "fallen off".parse().expect("text");
        let query = JobLogQuery {
            start: at("2026-12-01T08:00:00Z"),
            end: at("2026-12-01T09:30:00Z"),
            node_field: &field,
            nodes: &nodes,
            site_filter: Some("_stream:{job=\"syslog\"}"),
            contains: Some(&contains),
            own: None,
        };
        assert_eq!(
            query.lines(),
            r#"_time:[2026-12-01T08:00:00Z, 2026-12-01T09:30:00Z] host:in("n1", "n2") (_stream:{job="syslog"}) "fallen off""#
        );
        let important = query.important();
        assert!(important.starts_with(&query.lines()));
        assert!(important.contains(r#""Xid" OR "#) && important.contains(r#"i("out of memory")"#));
        let one = vec!["n\"3".to_string()];
        let single = JobLogQuery { nodes: &one, site_filter: None, contains: None, ..query };
        assert_eq!(single.lines(), r#"_time:[2026-12-01T08:00:00Z, 2026-12-01T09:30:00Z] host:="n\"3""#);
        let dashed: FieldName = "node-name".parse().expect("field");
        let quoted = JobLogQuery { node_field: &dashed, ..single };
        assert!(quoted.lines().ends_with(r#" "node-name":="n\"3""#));
    }

    #[test]
    fn a_viewers_job_query_narrows_to_its_own_words_and_the_nodes_it_held_alone() {
        use crate::domain::logs::{JobMarks, OwnLines};
        let field: FieldName = "host".parse().expect("field");
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let own = OwnLines {
            marks: JobMarks { job_id: 1234, uid: 1001, sluids: vec!["s5K1KKYAYG5D00".into()] },
            alone: [("n2".to_string(), vec![(at("2026-12-01T08:00:00Z"), at("2026-12-01T08:30:00Z"))])].into(),
        };
        let query = JobLogQuery {
            start: at("2026-12-01T08:00:00Z"),
            end: at("2026-12-01T09:30:00Z"),
            node_field: &field,
            nodes: &nodes,
            site_filter: None,
            contains: None,
            own: Some(&own),
        };
        assert_eq!(
            query.lines(),
            r#"_time:[2026-12-01T08:00:00Z, 2026-12-01T09:30:00Z] host:in("n1", "n2") ("1234" OR "job_1234" OR "1001" OR "uid_1001" OR "s5K1KKYAYG5D00" OR (host:="n2" (_time:[2026-12-01T08:00:00Z, 2026-12-01T08:30:00Z])))"#
        );
        assert!(query.important().starts_with(&query.lines()));
    }
}
