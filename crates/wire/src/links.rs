//! Where a report's charts came from: the PromQL each was drawn from over its time range, with links
//! that open it in the site's own tools (VictoriaMetrics' vmui, Grafana Explore) and a per-job
//! Grafana dashboard.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The query one chart of a report was drawn from. It names only the job's own nodes (and GPUs, where
/// the report knows their indices): the series the page already shows, never another tenant's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChartQuery {
    /// The chart's metric key, as in `summary` and `series`: `gpu_util`, `rdma_rx`, `cpu_busy`, `lustre_read`…
    pub metric: String,
    /// The PromQL of the chart's timeline: a range query evaluated every `step_s` from `start` to `end`.
    /// A report read through recording rules draws the same figures from recorded buckets; this is the
    /// raw query they stand for.
    pub query: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub step_s: u64,
    /// The query in VictoriaMetrics' vmui over the same range; absent where no vmui is reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmui_url: Option<String>,
    /// The query in Grafana Explore over the same range; absent where `[links] grafana_url` is not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grafana_url: Option<String>,
}
