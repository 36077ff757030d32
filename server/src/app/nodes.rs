//! Nodes: every node with its current state, and the drains, downs and failures of a window. Node
//! names and states are not per-tenant data, so every viewer with a scope sees them (jobs on them stay
//! scoped).

use chrono::{DateTime, Duration, Utc};
use slurmlens_wire as wire;

use super::{App, AppError, Viewer, wire_map};
use crate::domain::job::TimeWindow;

impl App {
    /// Every node of the cluster with its open drain/down event and running jobs.
    pub async fn list_nodes(&self, viewer: &Viewer, cluster: Option<&str>) -> Result<Vec<wire::Node>, AppError> {
        let reader = self.cluster(cluster)?;
        self.scope(viewer, reader).await?;
        let catalog = reader.tres_catalog().await?;
        let nodes = reader.nodes(&catalog).await?;
        Ok(nodes.iter().map(wire_map::node).collect())
    }

    /// Node events overlapping `[start, end)` (default: the 7 days before `end`, default now), of one
    /// node or all.
    pub async fn node_events(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        (start, end): (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
        node: Option<&str>,
    ) -> Result<Vec<wire::NodeEvent>, AppError> {
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        let end = end.unwrap_or_else(Utc::now);
        let start = start.unwrap_or(end - Duration::days(7));
        let window = TimeWindow::new(start, end).map_err(|e| AppError::invalid("start", e.to_string()))?;
        self.check_window(&scope, window)?;
        let events = reader.node_events(window, node).await?;
        Ok(events.iter().map(wire_map::node_event).collect())
    }
}
