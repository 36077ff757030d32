//! Node states on the pages agree with slurmdbd's event table (issue #36: down and drained nodes looked
//! idle on the Gantt, and there was no node list): on sakura's demo, every open down or drain is the
//! node list's state with its reason and time, and every down or drain of a window is hatched on the
//! Gantt, nothing else.

use std::collections::BTreeSet;

use slurmlens::config::AnonymousAccess;
use slurmlens_slurm::state::NodeState;
use slurmlens_web::gantt::{GanttData, Unavailable};
use slurmlens_web::nodelist::{NodeList, StateClass};

use crate::support::{TestApp, database_shared, lab, spawn_app, test_config};

/// sakura's node events overlapping `[start, end)` as slurmdbd holds them: node, raw state, reason,
/// start, end (0: open).
async fn events(start: i64, end: i64) -> Vec<(String, u32, String, i64, i64)> {
    let pool = sqlx::MySqlPool::connect(lab().var("SLURMLENS_SLURMDBD_URL")).await.expect("slurmdbd database");
    let rows: Vec<(String, u64, String, i64, i64)> = sqlx::query_as(
        "SELECT node_name, CAST(state AS UNSIGNED), reason, CAST(time_start AS SIGNED), CAST(time_end AS SIGNED) \
         FROM sakura_event_table WHERE node_name <> '' AND time_start < ? AND (time_end = 0 OR time_end >= ?)",
    )
    .bind(end)
    .bind(start)
    .fetch_all(&pool)
    .await
    .expect("sakura's event table");
    pool.close().await;
    rows.into_iter()
        .map(|(node, raw, reason, from, to)| (node, u32::try_from(raw).unwrap_or(0), reason, from, to))
        .collect()
}

/// What a raw node state is on the pages: down, drained, or neither.
fn unavailable(raw: u32) -> Option<Unavailable> {
    let state = NodeState::from_raw(raw);
    if state.is_down() {
        Some(Unavailable::Down)
    } else if state.is_drain() {
        Some(Unavailable::Drain)
    } else {
        None
    }
}

async fn json<T: serde::de::DeserializeOwned>(app: &TestApp, path: &str) -> T {
    let response = app.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_node_list_and_the_gantt_show_slurmdbds_downs_and_drains() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let now = chrono::Utc::now().timestamp();

    let list: NodeList = json(&app, "/web/v1/nodes?cluster=sakura").await;
    assert_eq!(list.rows.len(), 100, "sakura's 100 nodes, each once");
    let open: Vec<_> = events(now, now + 1).await.into_iter().filter(|event| event.4 == 0).collect();
    assert!(open.iter().any(|event| unavailable(event.1) == Some(Unavailable::Down)), "the demo keeps a node down");
    for (node, raw, reason, since, _) in &open {
        let row = list.rows.iter().find(|row| &row.node == node).expect("an evented node is listed");
        let class = match unavailable(*raw) {
            Some(Unavailable::Down) => StateClass::Down,
            Some(Unavailable::Drain) => StateClass::Drained,
            None => continue,
        };
        assert_eq!(row.class, class, "{node}: {}", row.state);
        assert_eq!(row.reason.as_deref(), Some(reason.as_str()), "{node}");
        assert_eq!(row.reason_since, Some(*since), "{node}");
    }
    let unavailable_rows = list.rows.iter().filter(|row| matches!(row.class, StateClass::Down | StateClass::Drained));
    let evented: BTreeSet<&str> = open.iter().map(|event| event.0.as_str()).collect();
    for row in unavailable_rows {
        assert!(evented.contains(row.node.as_str()), "{} is {} without an open event", row.node, row.state);
    }

    // Two days of the Gantt: its hatched spans are exactly the window's downs and drains.
    let (start, end) = (now - 2 * 86_400, now);
    let data: GanttData = json(&app, &format!("/web/v1/gantt?cluster=sakura&start={start}&end={end}")).await;
    let drawn: BTreeSet<(String, Unavailable, i64, i64)> = data
        .node_states
        .iter()
        .map(|span| (data.racks.nodes[span.node as usize].name.clone(), span.kind, span.start, span.end))
        .collect();
    let expected: BTreeSet<(String, Unavailable, i64, i64)> = events(start, end)
        .await
        .into_iter()
        .filter_map(|(node, raw, _, from, to)| Some((node, unavailable(raw)?, from, to)))
        .collect();
    assert!(!expected.is_empty(), "the demo downs or drains a node every day");
    assert_eq!(drawn, expected);
}
