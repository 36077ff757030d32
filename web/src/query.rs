//! The pages' query strings, parsed once: which cluster, window and filters a page shows. The same
//! values build the REST query (`/api/v1/jobs?…`) and the page's own links.

use chrono::DateTime;
use serde::{Deserialize, Serialize};

use slurmlens_wire as wire;

use crate::clock::Zone;
use crate::palette::ColourBy;

/// `/api/v1/jobs` parameters, as the web pages use them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQuery {
    pub cluster: Option<String>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub filters: Filters,
    /// `q=`: a job id, or text in the name, user or account (searched by the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    /// `sort=`: the whole window ordered by this field, a page at a time from `offset` (no cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<wire::JobSort>,
    /// `order=desc` with `sort`.
    #[serde(default)]
    pub descending: bool,
    /// `offset=` with `sort`: jobs of the order before the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// The job filters every page shares; comma-separated lists as the API takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filters {
    pub user: Option<String>,
    pub account: Option<String>,
    pub partition: Option<String>,
    pub state: Option<String>,
    /// `tag=`: only jobs carrying this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

impl Filters {
    /// Reads the filters from a query-string lookup.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Self {
        Self {
            user: get("user"),
            account: get("account"),
            partition: get("partition"),
            state: get("state"),
            tag: get("tag"),
        }
    }

    /// (name, value) pairs for the set filters.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("user", &self.user),
            ("account", &self.account),
            ("partition", &self.partition),
            ("state", &self.state),
            ("tag", &self.tag),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.clone().map(|value| (name, value)))
        .collect()
    }
}

impl JobQuery {
    /// (name, value) pairs for `/api/v1/jobs`.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(cluster) = &self.cluster {
            pairs.push(("cluster".into(), cluster.clone()));
        }
        if let Some(start) = self.start {
            pairs.push(("start".into(), start.to_string()));
        }
        if let Some(end) = self.end {
            pairs.push(("end".into(), end.to_string()));
        }
        pairs.extend(self.filters.pairs().into_iter().map(|(name, value)| (name.to_string(), value)));
        if let Some(search) = &self.search {
            pairs.push(("q".into(), search.clone()));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit".into(), limit.to_string()));
        }
        if let Some(cursor) = &self.cursor {
            pairs.push(("cursor".into(), cursor.clone()));
        }
        if let Some(sort) = self.sort {
            pairs.push(("sort".into(), sort.as_str().into()));
            pairs.push(("order".into(), if self.descending { "desc" } else { "asc" }.into()));
            if let Some(offset) = self.offset {
                pairs.push(("offset".into(), offset.to_string()));
            }
        }
        pairs
    }
}

/// What the Gantt page shows: a window (`start`/`end`, or `span` seconds up to now, default the last
/// day) and how bars are coloured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GanttQuery {
    pub cluster: Option<String>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// `span=`: a live view of this many seconds up to now (without `start` and `end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<i64>,
    pub colour: ColourBy,
    pub filters: Filters,
}

/// What the grid shows: the moment `at` (default now).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridQuery {
    pub cluster: Option<String>,
    pub at: Option<i64>,
    pub colour: ColourBy,
    /// A GPU metric (`gpu_util`, `tensor_active`, `fb_used`, `power`, `temperature`, `xid`) that colours
    /// the GPU cells instead of their jobs.
    pub metric: Option<String>,
    /// An `at` that is not a time, kept to be refused with a message (never sent on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_at: Option<String>,
}

/// What the node list shows: a cluster's nodes, all or those of one state class (`state=down`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodesQuery {
    pub cluster: Option<String>,
    pub state: Option<crate::nodelist::StateClass>,
}

impl NodesQuery {
    /// From a query-string lookup (an unknown `state=` shows every node).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| non_empty(get(name));
        Self { cluster: get("cluster"), state: get("state").and_then(|word| crate::nodelist::StateClass::parse(&word)) }
    }

    /// The query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(cluster) = &self.cluster {
            pairs.push(("cluster", cluster.clone()));
        }
        if let Some(state) = self.state {
            pairs.push(("state", state.as_str().into()));
        }
        encode(&pairs)
    }
}

/// The metrics the grid can colour GPUs by, with their labels.
pub const GRID_METRICS: [(&str, &str); 8] = [
    ("gpu_util", "GPU utilisation"),
    ("sm_active", "SM activity"),
    ("tensor_active", "tensor activity"),
    ("dram_active", "memory bandwidth"),
    ("fb_used", "memory used"),
    ("power", "power"),
    ("temperature", "temperature"),
    ("xid", "XID errors"),
];

/// What the job list shows: a window, filters, a search text and an order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    pub cluster: Option<String>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub filters: Filters,
    /// `q=`: a job id, or text in the name, user or account; the server searches, in the window and
    /// (the page asks a second time) beyond it.
    pub search: Option<String>,
    pub limit: Option<u32>,
    /// `page=`: which page of the ordered window, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

/// Rows the job list loads at most when asked for a window as the API's keyset pages list it.
pub const LIST_LIMIT: u32 = 1000;
/// Rows of one page of the job list, unless its `limit=` says otherwise.
pub const PAGE_ROWS: u32 = 200;
/// How far back a search reaches beyond the window.
pub const SEARCH_BACK_DAYS: i64 = 366;
/// Matches beyond the window shown at most.
pub const BEYOND_LIMIT: u32 = 200;

/// The earliest time a page reads: 0000-01-01T00:00:00Z, the first second RFC 3339 can write.
pub const MIN_TIME: i64 = -62_167_219_200;
/// The latest time a page reads: 9999-12-31T23:59:59Z, the last second RFC 3339 can write.
pub const MAX_TIME: i64 = 253_402_300_799;

/// Parses a time parameter: Unix seconds, RFC 3339, a wall-clock `YYYY-MM-DDTHH:MM[:SS]` (what a
/// `datetime-local` form field sends) read in `zone`, or a date `YYYY-MM-DD` (its midnight in `zone`).
/// A time outside [`MIN_TIME`]..=[`MAX_TIME`] is no time, so that a window around it never overflows.
pub fn parse_time(text: &str, zone: Zone) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let parsed =
        text.parse::<i64>().ok().or_else(|| DateTime::parse_from_rfc3339(text).ok().map(|time| time.timestamp()));
    parsed
        .or_else(|| {
            zone.parse_local(text).or_else(|| {
                let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
                zone.parse_local(&format!("{date}T00:00"))
            })
        })
        .filter(|epoch| (MIN_TIME..=MAX_TIME).contains(epoch))
}

/// The zone a form's wall-clock times were written in: its `tz` field (the pages' forms carry the
/// viewer's zone), else UTC, as links made before forms carried one meant.
fn form_zone(get: &impl Fn(&str) -> Option<String>) -> Zone {
    get("tz").and_then(|name| name.parse().ok()).unwrap_or_default()
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

impl GanttQuery {
    /// From a query-string lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| non_empty(get(name));
        let zone = form_zone(&get);
        Self {
            cluster: get("cluster"),
            start: get("start").and_then(|text| parse_time(&text, zone)),
            end: get("end").and_then(|text| parse_time(&text, zone)),
            span: get("span").and_then(|text| text.parse::<i64>().ok()).filter(|span| *span > 0),
            colour: get("colour").map(|word| ColourBy::parse(&word)).unwrap_or_default(),
            filters: Filters::from_lookup(&get),
        }
    }

    /// The window, defaulting to the day (or `span`) before `now`; at most thirty days, at least an hour.
    pub fn window(&self, now: i64) -> (i64, i64) {
        // `parse_time` keeps both within MIN_TIME..=MAX_TIME; saturating all the same, for a caller that
        // set them by hand.
        let end = self.end.unwrap_or(now);
        let start = self.start.unwrap_or(end.saturating_sub(self.span.unwrap_or(86_400)));
        let (widest, narrowest) = (crate::gantt::MAX_SPAN as i64, crate::gantt::MIN_SPAN as i64);
        let start = start.clamp(end.saturating_sub(widest), end.saturating_sub(narrowest));
        (start, end)
    }

    /// The query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(cluster) = &self.cluster {
            pairs.push(("cluster", cluster.clone()));
        }
        if let Some(start) = self.start {
            pairs.push(("start", start.to_string()));
        }
        if let Some(end) = self.end {
            pairs.push(("end", end.to_string()));
        }
        if let Some(span) = self.span {
            pairs.push(("span", span.to_string()));
        }
        if self.colour != ColourBy::default() {
            pairs.push(("colour", self.colour.as_str().into()));
        }
        pairs.extend(self.filters.pairs());
        encode(&pairs)
    }
}

impl GanttQuery {
    /// The page's query for the view `[start, end)` it shows: a view that reaches now (within a
    /// minute) stays live as `span=`, any other is its `start` and `end`; a reload shows it again.
    pub fn for_view(&self, (start, end): (f64, f64), now: i64) -> Self {
        let live = end >= (now - 60) as f64;
        let span = (end - start).round() as i64;
        Self {
            start: (!live).then_some(start.round() as i64),
            end: (!live).then_some(end.round() as i64),
            span: live.then_some(span),
            ..self.clone()
        }
    }
}

impl GridQuery {
    /// From a query-string lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| non_empty(get(name));
        let at_text = get("at");
        let at = at_text.as_deref().and_then(|text| parse_time(text, form_zone(&get)));
        Self {
            cluster: get("cluster"),
            at,
            colour: get("colour").map(|word| ColourBy::parse(&word)).unwrap_or(ColourBy::Job),
            metric: get("metric").filter(|metric| GRID_METRICS.iter().any(|(key, _)| key == metric)),
            bad_at: at_text.filter(|_| at.is_none()),
        }
    }

    /// The query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(cluster) = &self.cluster {
            pairs.push(("cluster", cluster.clone()));
        }
        if let Some(at) = self.at {
            pairs.push(("at", at.to_string()));
        }
        pairs.push(("colour", self.colour.as_str().into()));
        if let Some(metric) = &self.metric {
            pairs.push(("metric", metric.clone()));
        }
        encode(&pairs)
    }
}

impl ListQuery {
    /// From a query-string lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| non_empty(get(name));
        let zone = form_zone(&get);
        Self {
            cluster: get("cluster"),
            start: get("start").and_then(|text| parse_time(&text, zone)),
            end: get("end").and_then(|text| parse_time(&text, zone)),
            filters: Filters::from_lookup(&get),
            search: get("q"),
            limit: get("limit").and_then(|text| text.parse().ok()).map(|limit: u32| limit.clamp(1, 5000)),
            page: get("page").and_then(|text| text.parse().ok()).filter(|page: &u32| *page > 1),
        }
    }

    /// The REST query of the page shown: the whole window ordered by `sort` (default: newest
    /// submission first), [`PAGE_ROWS`] jobs (or `limit`) from the page's offset.
    pub fn page_query(&self, now: i64, sort: Option<(wire::JobSort, bool)>) -> JobQuery {
        let (sort, descending) = sort.unwrap_or((wire::JobSort::Submit, true));
        let rows = self.rows();
        JobQuery {
            sort: Some(sort),
            descending,
            offset: Some(u64::from(self.page.unwrap_or(1) - 1) * u64::from(rows)),
            limit: Some(rows),
            ..self.api_query(now)
        }
    }

    /// Rows per page.
    pub fn rows(&self) -> u32 {
        self.limit.unwrap_or(PAGE_ROWS)
    }

    /// The REST query for this list, its window resolved against `now` (default: the last day).
    pub fn api_query(&self, now: i64) -> JobQuery {
        let end = self.end.unwrap_or(now);
        JobQuery {
            cluster: self.cluster.clone(),
            start: Some(self.start.unwrap_or(end.saturating_sub(86_400))),
            end: Some(end),
            filters: self.filters.clone(),
            search: self.search.clone(),
            limit: Some(self.limit.unwrap_or(LIST_LIMIT)),
            cursor: None,
            ..JobQuery::default()
        }
    }

    /// With a search: the same search beyond the window, over the [`SEARCH_BACK_DAYS`] before now (and
    /// before the window, if it lies further back) up to now, at most [`BEYOND_LIMIT`] jobs. The page
    /// shows those outside the window apart from the window's own.
    pub fn beyond_query(&self, now: i64) -> Option<JobQuery> {
        let search = self.search.clone()?;
        let window = self.api_query(now);
        let (start, end) = (window.start.unwrap_or(now), window.end.unwrap_or(now));
        Some(JobQuery {
            start: Some(start.min(now.saturating_sub(SEARCH_BACK_DAYS * 86_400))),
            end: Some(end.max(now)),
            search: Some(search),
            limit: Some(BEYOND_LIMIT),
            ..window
        })
    }

    /// The query string (without `?`), plus `extra` pairs.
    pub fn to_query(&self, extra: &[(&str, String)]) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(cluster) = &self.cluster {
            pairs.push(("cluster", cluster.clone()));
        }
        if let Some(start) = self.start {
            pairs.push(("start", start.to_string()));
        }
        if let Some(end) = self.end {
            pairs.push(("end", end.to_string()));
        }
        pairs.extend(self.filters.pairs());
        if let Some(search) = &self.search {
            pairs.push(("q", search.clone()));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(page) = self.page {
            pairs.push(("page", page.to_string()));
        }
        pairs.extend(extra.iter().cloned());
        encode(&pairs)
    }
}

/// `a=1&b=x%20y`.
pub fn encode(pairs: &[(&str, String)]) -> String {
    pairs.iter().map(|(name, value)| format!("{name}={}", percent_encode(value))).collect::<Vec<_>>().join("&")
}

/// Percent-encodes everything but unreserved characters (RFC 3986) and commas (list separators).
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' => out.push(byte as char),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn parses_times_in_every_form_the_pages_send() {
        let utc = Zone::UTC;
        assert_eq!(parse_time("1796040000", utc), Some(1_796_040_000));
        assert_eq!(parse_time("2026-11-30T12:00:00Z", utc), Some(1_796_040_000));
        assert_eq!(parse_time("2026-11-30T21:00:00+09:00", utc), Some(1_796_040_000));
        assert_eq!(parse_time("2026-11-30T12:00", utc), Some(1_796_040_000));
        assert_eq!(parse_time("2026-11-30", utc), Some(1_796_040_000 - 12 * 3600));
        assert_eq!(parse_time("soon", utc), None);
        // Wall-clock times and dates are read in the form's zone; explicit offsets and epochs are not.
        let tokyo: Zone = "Asia/Tokyo".parse().expect("a zone");
        assert_eq!(parse_time("2026-11-30T21:00", tokyo), Some(1_796_040_000));
        assert_eq!(parse_time("2026-11-30T12:00:00Z", tokyo), Some(1_796_040_000));
        assert_eq!(parse_time("2026-12-01", tokyo), Some(1_796_040_000 + 3 * 3600));
        let grid = GridQuery::from_lookup(lookup(&[("at", "soon")]));
        assert_eq!((grid.at, grid.bad_at.as_deref()), (None, Some("soon")), "kept to be refused, not read as now");
        let grid = GridQuery::from_lookup(lookup(&[("at", "2026-11-30T21:00"), ("tz", "Asia/Tokyo")]));
        assert_eq!(grid.at, Some(1_796_040_000));
        let list = ListQuery::from_lookup(lookup(&[("start", "2026-11-30T13:00"), ("tz", "Europe/Berlin")]));
        assert_eq!(list.start, Some(1_796_040_000));
    }

    #[test]
    fn gantt_windows_default_to_a_day_and_stay_within_limits() {
        let query = GanttQuery::from_lookup(lookup(&[("user", "alice"), ("colour", "state"), ("account", " ")]));
        assert_eq!(query.window(100_000), (13_600, 100_000));
        assert_eq!(query.colour, ColourBy::State);
        assert_eq!(query.filters.account, None);
        let wide = GanttQuery { start: Some(0), end: Some(90 * 86_400), ..GanttQuery::default() };
        assert_eq!(wide.window(0), (60 * 86_400, 90 * 86_400));
        assert_eq!(query.to_query(), "colour=state&user=alice");
    }

    #[test]
    fn a_gantt_view_goes_into_its_url_live_as_a_span_else_as_its_window() {
        let query = GanttQuery::from_lookup(lookup(&[("colour", "state")]));
        let live = query.for_view((100_000.0 - 7.0 * 86_400.0 + 5_000.0, 100_000.0 + 5_000.0), 100_000);
        assert_eq!(live.to_query(), "span=604800&colour=state");
        let reloaded = GanttQuery::from_lookup(lookup(&[("span", "604800")]));
        assert_eq!(reloaded.window(2_000_000), (2_000_000 - 604_800, 2_000_000), "a live week, up to the new now");
        let past = query.for_view((10_000.0, 13_600.4), 100_000);
        assert_eq!(past.to_query(), "start=10000&end=13600&colour=state");
    }

    #[test]
    fn list_queries_become_api_queries() {
        let query = ListQuery::from_lookup(lookup(&[("cluster", "sakura"), ("state", "FAILED,TIMEOUT"), ("q", "a b")]));
        let api = query.api_query(1000);
        assert_eq!(
            api.pairs(),
            [
                ("cluster".to_string(), "sakura".to_string()),
                ("start".into(), "-85400".into()),
                ("end".into(), "1000".into()),
                ("state".into(), "FAILED,TIMEOUT".into()),
                ("q".into(), "a b".into()),
                ("limit".into(), "1000".into()),
            ]
        );
        assert_eq!(query.to_query(&[]), "cluster=sakura&state=FAILED,TIMEOUT&q=a%20b");
        let beyond = query.beyond_query(1000).expect("a search looks beyond the window");
        assert_eq!((beyond.start, beyond.end), (Some(1000 - SEARCH_BACK_DAYS * 86_400), Some(1000)));
        assert_eq!((beyond.search.as_deref(), beyond.limit), (Some("a b"), Some(BEYOND_LIMIT)));
        assert_eq!(ListQuery::default().beyond_query(1000), None, "no search, nothing beyond");
    }
}
