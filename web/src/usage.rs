//! The showback and statistics pages' plain logic (tested natively): their query, the usage table's
//! columns and order, and how their numbers read.

use serde::{Deserialize, Serialize};
use slurmlens_wire::{HistogramBin, UsageGrouping, UsageRow};

use crate::query::{encode, parse_time};

/// The window when the page names none: the last seven days.
pub const DEFAULT_DAYS: i64 = 7;

/// `/usage` and `/stats` parameters, as the pages read them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageQuery {
    pub cluster: Option<String>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub by: UsageGrouping,
    /// Only the jobs carrying this tag.
    pub tag: Option<String>,
}

impl UsageQuery {
    /// From a query-string lookup (wall-clock times in the form's `tz`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| get(name).filter(|value| !value.trim().is_empty());
        let zone = get("tz").and_then(|name| name.parse().ok()).unwrap_or_default();
        Self {
            cluster: get("cluster"),
            start: get("start").and_then(|text| parse_time(&text, zone)),
            end: get("end").and_then(|text| parse_time(&text, zone)),
            by: if get("by").as_deref() == Some("user") { UsageGrouping::User } else { UsageGrouping::Account },
            tag: get("tag").map(|tag| tag.trim().to_string()),
        }
    }

    /// The window `[start, end)` resolved against `now` (default: the last [`DEFAULT_DAYS`] days).
    pub fn window(&self, now: i64) -> (i64, i64) {
        let end = self.end.unwrap_or(now);
        (self.start.unwrap_or(end.saturating_sub(DEFAULT_DAYS * 86_400)), end)
    }

    /// This query with its window fixed against `now`, as the API is asked.
    pub fn resolved(&self, now: i64) -> Self {
        let (start, end) = self.window(now);
        Self { start: Some(start), end: Some(end), ..self.clone() }
    }

    /// The API's query string (without `?`): cluster, window, and `by` where `with_by`.
    pub fn api_query(&self, with_by: bool) -> String {
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
        if with_by {
            pairs.push(("by", by_word(self.by).to_string()));
        }
        if let Some(tag) = &self.tag {
            pairs.push(("tag", tag.clone()));
        }
        encode(&pairs)
    }
}

/// `account` or `user`.
pub fn by_word(by: UsageGrouping) -> &'static str {
    match by {
        UsageGrouping::Account => "account",
        UsageGrouping::User => "user",
    }
}

/// A sortable column of the usage table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageColumn {
    Name,
    GpuHours,
    IdleGpuHours,
    Utilisation,
    Tensor,
    Energy,
    Failed,
    Wait,
    Jobs,
}

impl UsageColumn {
    pub const ALL: [Self; 9] = [
        Self::Name,
        Self::Jobs,
        Self::GpuHours,
        Self::IdleGpuHours,
        Self::Utilisation,
        Self::Tensor,
        Self::Energy,
        Self::Failed,
        Self::Wait,
    ];

    /// The `sort=` word.
    pub fn key(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::GpuHours => "gpu_hours",
            Self::IdleGpuHours => "idle_gpu_hours",
            Self::Utilisation => "gpu_util",
            Self::Tensor => "tensor",
            Self::Energy => "energy",
            Self::Failed => "failed",
            Self::Wait => "wait",
            Self::Jobs => "jobs",
        }
    }

    /// The header's words.
    pub fn label(self, by: UsageGrouping) -> &'static str {
        match self {
            Self::Name if by == UsageGrouping::User => "User",
            Self::Name => "Account",
            Self::GpuHours => "GPU-hours",
            Self::IdleGpuHours => "Idle GPU-hours",
            Self::Utilisation => "GPU util",
            Self::Tensor => "Tensor",
            Self::Energy => "Energy",
            Self::Failed => "Failed jobs (infra / app / ?)",
            Self::Wait => "Wait (median)",
            Self::Jobs => "Jobs",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|column| column.key() == word)
    }

    /// The number the column sorts by (absent sorts last).
    fn value(self, row: &UsageRow) -> Option<f64> {
        match self {
            Self::Name => None,
            Self::GpuHours => Some(row.gpu_hours),
            Self::IdleGpuHours => row.idle_gpu_hours,
            Self::Utilisation => row.mean_gpu_util,
            Self::Tensor => row.mean_tensor_active,
            Self::Energy => row.energy_kwh,
            Self::Failed => {
                Some(row.failed_jobs.infrastructure + row.failed_jobs.application + row.failed_jobs.unknown)
            }
            Self::Wait => row.median_wait_s,
            Self::Jobs => Some(row.jobs as f64),
        }
    }
}

/// The table's order from the query string: `sort=` a column, `desc=1|0` (default: GPU-hours, largest
/// first).
pub fn order_of(get: &impl Fn(&str) -> Option<String>) -> (UsageColumn, bool) {
    let column = get("sort").and_then(|word| UsageColumn::parse(&word)).unwrap_or(UsageColumn::GpuHours);
    let descending = get("desc").map_or(column != UsageColumn::Name, |word| word != "0");
    (column, descending)
}

/// `rows` in the order asked; rows without the value last whichever the direction.
pub fn sorted(mut rows: Vec<UsageRow>, (column, descending): (UsageColumn, bool)) -> Vec<UsageRow> {
    rows.sort_by(|a, b| {
        let order = match column {
            UsageColumn::Name => a.name.cmp(&b.name),
            _ => match (column.value(a), column.value(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => return std::cmp::Ordering::Less,
                (None, Some(_)) => return std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            },
        };
        let order = if descending { order.reverse() } else { order };
        order.then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// GPU-hours as read: `1,234.5` (one decimal; thousands grouped).
pub fn hours(value: f64) -> String {
    crate::numbers::decimal(value.max(0.0), 1)
}

/// A percentage (`42 %`), `—` when unknown.
pub fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |value| format!("{:.0} %", value.clamp(0.0, 100.0)))
}

/// A duration in seconds as read: `45 s`, `12 min`, `3.5 h`, `2.1 d`.
pub fn duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    if seconds < 60.0 {
        format!("{seconds:.0} s")
    } else if seconds < 3600.0 {
        format!("{:.0} min", seconds / 60.0)
    } else if seconds < 86_400.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else {
        format!("{:.1} d", seconds / 86_400.0)
    }
}

/// A histogram bin's words: `8–15` GPUs, `10 min–30 min`.
pub fn bin_label(bin: &HistogramBin, unit: &str) -> String {
    if unit == "gpus" {
        let low = bin.low as u64;
        let high = (bin.high as u64).saturating_sub(1).max(low);
        return if low == high { format!("{low}") } else { format!("{low}–{high}") };
    }
    format!("{}–{}", duration(bin.low), duration(bin.high))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, gpu_hours: f64, idle: Option<f64>) -> UsageRow {
        UsageRow { name: name.into(), gpu_hours, idle_gpu_hours: idle, ..UsageRow::default() }
    }

    #[test]
    fn sorts_by_the_column_asked_with_unknowns_last() {
        let rows = vec![row("a", 1.0, None), row("b", 3.0, Some(1.0)), row("c", 2.0, Some(2.0))];
        let names = |rows: Vec<UsageRow>| rows.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(sorted(rows.clone(), (UsageColumn::GpuHours, true))), ["b", "c", "a"]);
        assert_eq!(names(sorted(rows.clone(), (UsageColumn::IdleGpuHours, true))), ["c", "b", "a"]);
        assert_eq!(names(sorted(rows.clone(), (UsageColumn::IdleGpuHours, false))), ["b", "c", "a"]);
        assert_eq!(names(sorted(rows, (UsageColumn::Name, false))), ["a", "b", "c"]);
    }

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(hours(1234.56), "1,234.6");
        assert_eq!(hours(0.04), "0.0");
        assert_eq!(percent(Some(104.0)), "100 %");
        assert_eq!(percent(None), "—");
        assert_eq!(duration(5400.0), "1.5 h");
        let bin = HistogramBin { low: 8.0, high: 16.0, jobs: 3 };
        assert_eq!(bin_label(&bin, "gpus"), "8–15");
        assert_eq!(bin_label(&HistogramBin { low: 60.0, high: 180.0, jobs: 1 }, "seconds"), "1 min–3 min");
    }

    #[test]
    fn reads_its_query_with_a_seven_day_default() {
        let query = UsageQuery::from_lookup(|name| match name {
            "by" => Some("user".into()),
            "end" => Some("1000000".into()),
            _ => None,
        });
        assert_eq!(query.by, UsageGrouping::User);
        assert_eq!(query.window(0), (1_000_000 - 7 * 86_400, 1_000_000));
        assert_eq!(query.resolved(0).api_query(true), format!("start={}&end=1000000&by=user", 1_000_000 - 7 * 86_400));
    }
}
