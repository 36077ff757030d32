//! Slurm hostlist expressions (`gpu[001-004,010]`, `n[1-2],login1`), both ways.
//!
//! Written here rather than taken from crates.io: the `hostlist` crate only expands (no compression),
//! and Slurm's rules for zero padding and bracket groups need to be exact for sacct parity.
//!
//! One grammar, two readers: [`Hostlist::parse`] refuses a malformed expression (the server, where a bad
//! `nodelist` is an error worth reporting), [`expand_lenient`] keeps a malformed item verbatim (the
//! pages, where a job must still show on some row rather than vanish).

use std::collections::BTreeMap;
use std::fmt;

/// The most hosts one expression may expand to; stops `n[0-999999999]` from exhausting memory.
pub const MAX_HOSTS: usize = 1_000_000;

/// The most hosts [`expand_lenient`] returns. Lower than [`MAX_HOSTS`]: it runs in the browser, whose
/// memory a malformed `n[0-999999]` in one job's node list must not take.
pub const MAX_LENIENT_HOSTS: usize = 100_000;

/// The most bracket groups one item may hold (`rack[1-2]-gpu[01-04]` holds two). Each group is a level
/// of recursion in the expansion, so this also bounds its stack.
pub const MAX_GROUPS: usize = 16;

/// Why a hostlist expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// A `[` without its `]`, a `]` without its `[`, or brackets inside brackets.
    #[error("unbalanced brackets in hostlist `{0}`")]
    UnbalancedBrackets(String),
    /// A bracket range that is not `N` or `N-M` with N ≤ M.
    #[error("bad range `{range}` in hostlist `{expr}`")]
    BadRange { expr: String, range: String },
    /// More than [`MAX_HOSTS`] hosts.
    #[error("hostlist `{0}` expands to more than {MAX_HOSTS} hosts")]
    TooLarge(String),
    /// Two commas in a row, or a comma at either end.
    #[error("empty host name in hostlist `{0}`")]
    EmptyHost(String),
    /// An item with more than [`MAX_GROUPS`] bracket groups.
    #[error("an item of hostlist `{0}` has more than {MAX_GROUPS} bracket groups")]
    TooManyGroups(String),
}

/// An ordered list of host names, parsed from or printed as a Slurm hostlist expression.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hostlist {
    hosts: Vec<String>,
}

impl Hostlist {
    /// Parses a hostlist expression. `""` and sacct's `None assigned` give the empty list.
    pub fn parse(expr: &str) -> Result<Self, HostlistError> {
        let trimmed = expr.trim();
        if trimmed.is_empty() || trimmed == "None assigned" || trimmed == "(null)" {
            return Ok(Self::default());
        }
        let mut hosts = Vec::new();
        for item in split_top_level(trimmed)? {
            if item.is_empty() {
                return Err(HostlistError::EmptyHost(expr.to_string()));
            }
            expand_item(expr, item, MAX_HOSTS, &mut hosts)?;
            if hosts.len() > MAX_HOSTS {
                return Err(HostlistError::TooLarge(expr.to_string()));
            }
        }
        Ok(Self { hosts })
    }

    /// Builds a list from host names as given (kept in order; duplicates kept).
    pub fn from_hosts<I, S>(hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self { hosts: hosts.into_iter().map(Into::into).collect() }
    }

    /// The host names, in expression order.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// How many hosts, duplicates counted.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// True for `None assigned` and the like.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// True when `host` is one of the hosts.
    pub fn contains(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h == host)
    }

    /// The compressed expression, as Slurm prints it: hosts sorted and de-duplicated, hosts that share
    /// a prefix and a numeric width merged into bracketed ranges (`gpu[001-003,010]`).
    pub fn compress(&self) -> String {
        // Hosts ending in digits, keyed by prefix: (number, zero-padded width or None).
        let mut numbered: BTreeMap<&str, Vec<(u64, Option<usize>)>> = BTreeMap::new();
        let mut plain: Vec<&str> = Vec::new();
        for host in &self.hosts {
            let parsed = split_numeric_suffix(host).and_then(|(prefix, digits)| {
                let padded = (digits.len() > 1 && digits.starts_with('0')).then_some(digits.len());
                digits.parse::<u64>().ok().map(|number| (prefix, number, padded))
            });
            match parsed {
                Some((prefix, number, padded)) => numbered.entry(prefix).or_default().push((number, padded)),
                None => plain.push(host),
            }
        }
        let mut pieces: Vec<(String, String)> = Vec::new();
        for (prefix, entries) in numbered {
            // An unpadded number as wide as a padded one of the same prefix joins its group, so
            // `n09` and `n10` merge into `n[09-10]` as Slurm prints them.
            let padded_widths: Vec<usize> = entries.iter().filter_map(|&(_, padded)| padded).collect();
            let mut by_width: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
            for (number, padded) in entries {
                let width = padded.unwrap_or_else(|| {
                    let digits = digit_count(number);
                    if padded_widths.contains(&digits) { digits } else { 0 }
                });
                by_width.entry(width).or_default().push(number);
            }
            for (width, mut values) in by_width {
                values.sort_unstable();
                values.dedup();
                pieces.push((prefix.to_string(), render_ranges(prefix, &values, width)));
            }
        }
        plain.sort_unstable();
        plain.dedup();
        pieces.extend(plain.into_iter().map(|host| (host.to_string(), host.to_string())));
        pieces.sort_by(|a, b| a.0.cmp(&b.0));
        pieces.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join(",")
    }
}

impl fmt::Display for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.compress())
    }
}

/// The hosts of `expr` in order, never failing: for the web pages, which place jobs on node rows.
///
/// `""`, `(null)` and `None assigned` (any case) give no hosts. Each top-level item the strict grammar of
/// [`Hostlist::parse`] accepts is expanded; an item it refuses (unbalanced or nested brackets, a bad
/// range, more than [`MAX_LENIENT_HOSTS`] hosts) is kept verbatim, so a job still shows somewhere
/// rather than vanishing. Empty items are skipped, and the result stops at [`MAX_LENIENT_HOSTS`] hosts.
pub fn expand_lenient(expr: &str) -> Vec<String> {
    let trimmed = expr.trim();
    if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("none assigned") || trimmed == "(null)" {
        return Vec::new();
    }
    let mut hosts = Vec::new();
    for item in split_top_level_lenient(trimmed) {
        let mut expanded = Vec::new();
        match expand_item(item, item, MAX_LENIENT_HOSTS, &mut expanded) {
            Ok(()) => hosts.append(&mut expanded),
            Err(_) => hosts.push(item.to_string()),
        }
        if hosts.len() >= MAX_LENIENT_HOSTS {
            hosts.truncate(MAX_LENIENT_HOSTS);
            break;
        }
    }
    hosts
}

fn digit_count(number: u64) -> usize {
    number.checked_ilog10().map_or(1, |log| log as usize + 1)
}

fn render_ranges(prefix: &str, values: &[u64], width: usize) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &value in values {
        match ranges.last_mut() {
            Some((_, hi)) if value == *hi + 1 => *hi = value,
            _ => ranges.push((value, value)),
        }
    }
    let render = |value: u64| format!("{value:0width$}");
    if ranges.len() == 1 && ranges[0].0 == ranges[0].1 {
        return format!("{prefix}{}", render(ranges[0].0));
    }
    let body = ranges
        .iter()
        .map(|&(lo, hi)| if lo == hi { render(lo) } else { format!("{}-{}", render(lo), render(hi)) })
        .collect::<Vec<_>>()
        .join(",");
    format!("{prefix}[{body}]")
}

/// Splits `abc012` into (`abc`, `012`); None when the name does not end in a digit.
fn split_numeric_suffix(host: &str) -> Option<(&str, &str)> {
    let digits_start = host.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits_start == host.len() {
        return None;
    }
    Some((&host[..digits_start], &host[digits_start..]))
}

/// Splits on commas that are not inside brackets.
fn split_top_level(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (index, c) in expr.char_indices() {
        match c {
            '[' => {
                if depth > 0 {
                    return Err(HostlistError::UnbalancedBrackets(expr.to_string()));
                }
                depth += 1;
            }
            ']' => {
                depth = depth.checked_sub(1).ok_or_else(|| HostlistError::UnbalancedBrackets(expr.to_string()))?;
            }
            ',' if depth == 0 => {
                items.push(expr[start..index].trim());
                start = index + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::UnbalancedBrackets(expr.to_string()));
    }
    items.push(expr[start..].trim());
    Ok(items)
}

/// Splits on commas outside brackets, forgiving unbalanced ones (an item keeps them, and its expansion
/// then fails or keeps them verbatim); trims the items and drops empty ones.
fn split_top_level_lenient(expr: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (index, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&expr[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    items.push(&expr[start..]);
    items.into_iter().map(str::trim).filter(|item| !item.is_empty()).collect()
}

/// Expands one comma-free item such as `rack[1-2]-gpu[01-04]` (bracket groups multiply out), refusing
/// to grow `out` past `max_hosts`.
fn expand_item(expr: &str, item: &str, max_hosts: usize, out: &mut Vec<String>) -> Result<(), HostlistError> {
    if item.matches('[').count() > MAX_GROUPS {
        return Err(HostlistError::TooManyGroups(expr.to_string()));
    }
    let Some(open) = item.find('[') else {
        out.push(item.to_string());
        return Ok(());
    };
    let close = item[open..]
        .find(']')
        .map(|offset| open + offset)
        .ok_or_else(|| HostlistError::UnbalancedBrackets(expr.to_string()))?;
    let prefix = &item[..open];
    let body = &item[open + 1..close];
    let rest = &item[close + 1..];
    let mut tails = Vec::new();
    expand_item(expr, rest, max_hosts, &mut tails)?;
    for range in body.split(',') {
        let bad = || HostlistError::BadRange { expr: expr.to_string(), range: range.to_string() };
        let (lo_text, hi_text) = match range.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (range.trim(), range.trim()),
        };
        if lo_text.is_empty()
            || !lo_text.bytes().all(|b| b.is_ascii_digit())
            || !hi_text.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let lo: u64 = lo_text.parse().map_err(|_| bad())?;
        let hi: u64 = hi_text.parse().map_err(|_| bad())?;
        if hi < lo {
            return Err(bad());
        }
        // `n[0-18446744073709551615]` holds 2⁶⁴ numbers: no `usize` counts them, so it is too large
        // rather than a count that wraps to 0 and slips under the cap.
        let count = (hi - lo).checked_add(1).and_then(|count| usize::try_from(count).ok()).unwrap_or(usize::MAX);
        if count.saturating_mul(tails.len()).saturating_add(out.len()) > max_hosts {
            return Err(HostlistError::TooLarge(expr.to_string()));
        }
        // Slurm pads to the width of the lower bound when it has a leading zero.
        let width = if lo_text.len() > 1 && lo_text.starts_with('0') { lo_text.len() } else { 0 };
        for number in lo..=hi {
            for tail in &tails {
                out.push(format!("{prefix}{number:0width$}{tail}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn expand(expr: &str) -> Vec<String> {
        Hostlist::parse(expr).expect("test expression parses").hosts().to_vec()
    }

    #[test]
    fn expands_padded_ranges_and_lists() {
        assert_eq!(expand("gpu[001-003,010]"), ["gpu001", "gpu002", "gpu003", "gpu010"]);
        assert_eq!(expand("n[1-2],login1"), ["n1", "n2", "login1"]);
        assert_eq!(expand("n1"), ["n1"]);
        assert_eq!(expand("None assigned"), Vec::<String>::new());
        assert_eq!(expand("r[1-2]-g[1-2]"), ["r1-g1", "r1-g2", "r2-g1", "r2-g2"]);
    }

    #[test]
    fn compresses_like_slurm() {
        let list = Hostlist::from_hosts(["gpu010", "gpu001", "gpu002", "gpu003"]);
        assert_eq!(list.compress(), "gpu[001-003,010]");
        assert_eq!(Hostlist::from_hosts(["n1"]).compress(), "n1");
        assert_eq!(Hostlist::from_hosts(["n3", "n2"]).compress(), "n[2-3]");
        assert_eq!(Hostlist::from_hosts(["n1", "n3"]).compress(), "n[1,3]");
        assert_eq!(Hostlist::from_hosts(["login", "n1"]).compress(), "login,n1");
        assert_eq!(Hostlist::from_hosts(["n09", "n10"]).compress(), "n[09-10]");
    }

    #[test]
    fn rejects_malformed_expressions() {
        for bad in ["n[1-", "n1-2]", "n[3-1]", "n[a-b]", "n[1-2]]", "n[[1]]", "n,,m", "n[0-99999999]"] {
            assert!(Hostlist::parse(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn lenient_expansion_keeps_malformed_items_verbatim() {
        assert_eq!(expand_lenient("gpu[001-003,010]"), ["gpu001", "gpu002", "gpu003", "gpu010"]);
        assert_eq!(expand_lenient("r[1-2]-g[1-2]"), ["r1-g1", "r1-g2", "r2-g1", "r2-g2"]);
        assert!(expand_lenient("None assigned").is_empty());
        assert!(expand_lenient("none ASSIGNED").is_empty());
        assert!(expand_lenient("").is_empty());
        assert!(expand_lenient("(null)").is_empty());
        assert_eq!(expand_lenient("n[3-1],n5"), ["n[3-1]", "n5"]);
        assert_eq!(expand_lenient("n[a-b], ,n5,"), ["n[a-b]", "n5"]);
        assert_eq!(expand_lenient("n[[1]],m"), ["n[[1]]", "m"]);
        assert_eq!(expand_lenient("n[0-999999999]"), ["n[0-999999999]"]);
    }

    #[test]
    fn lenient_expansion_stops_at_its_cap() {
        let hosts = expand_lenient("a[0-99999],b[0-99999]");
        assert_eq!(hosts.len(), MAX_LENIENT_HOSTS);
        assert_eq!(hosts.last().map(String::as_str), Some("a99999"));
    }

    proptest! {
        #[test]
        fn compress_then_expand_gives_sorted_unique_hosts(
            numbers in proptest::collection::vec(0u64..300, 1..60),
            width in 0usize..4,
        ) {
            let hosts: Vec<String> = numbers.iter().map(|n| format!("gpu{n:0width$}")).collect();
            let compressed = Hostlist::from_hosts(hosts.clone()).compress();
            let mut expected = hosts.clone();
            expected.sort_by_key(|h| h[3..].parse::<u64>().unwrap_or_default());
            expected.dedup();
            let round_trip = Hostlist::parse(&compressed).expect("compressed output parses");
            let mut got = round_trip.hosts().to_vec();
            got.sort_by_key(|h| h[3..].parse::<u64>().unwrap_or_default());
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn expand_then_compress_is_a_fixed_point(lo in 0u64..500, len in 0u64..40, gap in 2u64..9) {
            let expr = format!("n[{:03}-{:03},{:03}]", lo, lo + len, lo + len + gap);
            let list = Hostlist::parse(&expr).expect("generated expression parses");
            prop_assert_eq!(list.len() as u64, len + 2);
            let again = Hostlist::parse(&list.compress()).expect("compressed output parses");
            prop_assert_eq!(again.compress(), list.compress());
        }

        #[test]
        fn parse_never_panics(expr in "[a-z0-9\\[\\],-]{0,24}") {
            let _ = Hostlist::parse(&expr);
        }

        #[test]
        fn lenient_expansion_agrees_with_parse_where_parse_succeeds(expr in "[a-z0-9\\[\\],-]{0,24}") {
            let lenient = expand_lenient(&expr);
            if let Ok(list) = Hostlist::parse(&expr).map(|list| list.hosts().to_vec())
                && list.len() <= MAX_LENIENT_HOSTS
            {
                prop_assert_eq!(lenient, list);
            }
        }
    }
}
