//! Node events (`<cluster>_event_table`): drains, DOWN nodes and a rack's maintenance over the window.

use rand::Rng;
use rand::rngs::StdRng;

use super::random::{pick, uniform};
use super::{HistoryParams, NO_VAL, NS_DOWN, NS_DRAIN, NS_IDLE, NS_NO_RESPOND, RACK};

#[derive(Debug, Clone)]
pub(super) struct EventRow {
    pub(super) node: usize,
    pub(super) time_start: i64,
    /// i64::MAX = still open at `end`.
    pub(super) time_end: i64,
    pub(super) reason: &'static str,
    pub(super) uid: u32,
    pub(super) state: u32,
    pub(super) kill: bool,
}

pub(super) struct EventKind {
    pub(super) reason: &'static str,
    pub(super) state: u32,
    pub(super) uid: u32,
    pub(super) kill: bool,
    pub(super) min_s: f64,
    pub(super) max_s: f64,
    pub(super) weight: f64,
}

pub(super) const EVENT_KINDS: [EventKind; 8] = [
    EventKind {
        reason: "Xid 79: GPU has fallen off the bus",
        state: NS_DOWN,
        uid: 0,
        kill: true,
        min_s: 3.0 * 3600.0,
        max_s: 72.0 * 3600.0,
        weight: 5.0,
    },
    EventKind {
        reason: "Not responding",
        state: NS_DOWN | NS_NO_RESPOND,
        uid: NO_VAL,
        kill: true,
        min_s: 600.0,
        max_s: 4.0 * 3600.0,
        weight: 7.0,
    },
    EventKind {
        reason: "Node unexpectedly rebooted",
        state: NS_DOWN,
        uid: NO_VAL,
        kill: true,
        min_s: 300.0,
        max_s: 2400.0,
        weight: 3.0,
    },
    EventKind {
        reason: "Kill task failed",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 900.0,
        max_s: 3.0 * 3600.0,
        weight: 5.0,
    },
    EventKind {
        reason: "NHC: mlx5_0 port 1 down",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 1800.0,
        max_s: 12.0 * 3600.0,
        weight: 5.0,
    },
    EventKind {
        reason: "ECC uncorrectable, row remap pending",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 1800.0,
        max_s: 8.0 * 3600.0,
        weight: 4.0,
    },
    EventKind {
        reason: "NHC: nvidia-smi not responding",
        state: NS_IDLE | NS_DRAIN | NS_NO_RESPOND,
        uid: 0,
        kill: false,
        min_s: 1800.0,
        max_s: 6.0 * 3600.0,
        weight: 2.0,
    },
    EventKind {
        reason: "maintenance: firmware update",
        state: NS_IDLE | NS_DRAIN,
        uid: 0,
        kill: false,
        min_s: 2.0 * 3600.0,
        max_s: 6.0 * 3600.0,
        weight: 2.0,
    },
];

/// The window's events. `ends_now`: the window is the history's last (its end is "now"), so a few events
/// are left open at its end; an older span of a long history closes every event at its real end (the
/// next span's scheduler honours those that reach into it).
pub(super) fn generate_events(
    rng: &mut StdRng,
    params: &HistoryParams,
    start: i64,
    end: i64,
    ends_now: bool,
) -> Vec<EventRow> {
    let node_count = params.n_nodes as usize;
    let mut events: Vec<EventRow> = Vec::new();
    let free = |events: &[EventRow], node: usize, time_start: i64, time_end: i64| {
        events.iter().all(|event| {
            event.node != node
                || time_end.saturating_add(1800) <= event.time_start
                || event.time_end.saturating_add(1800) <= time_start
        })
    };
    // planned rack maintenance (one rack, same window on all its nodes)
    let racks = node_count.div_ceil(RACK);
    if racks >= 2 && params.days >= 5 {
        let rack = rng.gen_range(0..racks);
        let day = start.div_euclid(86_400) + i64::from(params.days) * 45 / 100;
        let time_start = day * 86_400 + 3600 + rng.gen_range(0..4) * 900; // ~10:00 JST
        let time_end = time_start + 6 * 3600 + rng.gen_range(0..8) * 900;
        if time_start > start && time_end < end {
            for node in rack * RACK..((rack + 1) * RACK).min(node_count) {
                events.push(EventRow {
                    node,
                    time_start,
                    time_end,
                    reason: EVENT_KINDS[7].reason,
                    uid: 0,
                    state: NS_IDLE | NS_DRAIN,
                    kill: false,
                });
            }
        }
    }
    // a few still open at `end`
    let open_at_end: &[(usize, f64)] = if ends_now { &[(0, 30.0), (5, 9.0), (1, 2.5)] } else { &[] };
    for &(kind_index, back_h) in open_at_end {
        let kind = &EVENT_KINDS[kind_index];
        for _ in 0..50 {
            let node = rng.gen_range(0..node_count);
            let time_start = end - (back_h * 3600.0 * rng.gen_range(0.5..1.0)) as i64;
            if time_start > start && free(&events, node, time_start, i64::MAX - 3600) {
                events.push(EventRow {
                    node,
                    time_start,
                    time_end: i64::MAX,
                    reason: kind.reason,
                    uid: kind.uid,
                    state: kind.state,
                    kill: kind.kill,
                });
                break;
            }
        }
    }
    // random failures and drains over the window
    let count = ((f64::from(params.days) * 1.25 * node_count as f64 / 100.0).round() as usize).max(3);
    let weights: Vec<(usize, f64)> = EVENT_KINDS.iter().enumerate().map(|(index, kind)| (index, kind.weight)).collect();
    let earliest = start + 6 * 3600;
    let latest = end - 3600;
    if latest > earliest {
        for _ in 0..count {
            let kind = &EVENT_KINDS[pick(rng, &weights)];
            let secs = (kind.min_s.ln() + uniform(rng) * (kind.max_s.ln() - kind.min_s.ln())).exp() as i64;
            for _ in 0..50 {
                let node = rng.gen_range(0..node_count);
                let time_start = rng.gen_range(earliest..latest);
                let time_end = if ends_now && time_start + secs >= end { i64::MAX } else { time_start + secs };
                if free(&events, node, time_start, time_end) {
                    events.push(EventRow {
                        node,
                        time_start,
                        time_end,
                        reason: kind.reason,
                        uid: kind.uid,
                        state: kind.state,
                        kill: kind.kill,
                    });
                    break;
                }
            }
        }
    }
    events.sort_by_key(|event| (event.time_start, event.node));
    events
}
