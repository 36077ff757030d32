//! The Gantt's data as sent: columns, one array per field, instead of one array per job. Jobs go in
//! start order, each start as the gap after the previous one's (small numbers), durations as they
//! are, strings as indices into the data's tables and node lists as ranges of row indices (a 32-node
//! job on consecutive nodes is one range). A 30-day window of a 100-node cluster is then mostly short
//! integers, which JSON writes and the browser reads fast, and which gzip well.

use serde::{Deserialize, Serialize};
use slurmlens_slurm::topology::Racks;

use super::{GanttData, GanttJob, NodeStateSpan, PackedBar};
use crate::palette::ColourSlots;

/// [`GanttData`] as sent.
#[derive(Serialize, Deserialize)]
pub(super) struct GanttWire {
    cluster: String,
    start: i64,
    end: i64,
    now: i64,
    racks: Racks,
    users: Vec<String>,
    accounts: Vec<String>,
    partitions: Vec<String>,
    states: Vec<String>,
    names: Vec<String>,
    /// Per job, in start order.
    job_ids: Vec<String>,
    job_names: Vec<u32>,
    job_users: Vec<u32>,
    job_accounts: Vec<u32>,
    job_partitions: Vec<u32>,
    job_states: Vec<u32>,
    /// Seconds after the previous job's start (the first: after the window's start; may be negative).
    job_starts: Vec<i64>,
    /// Seconds, or −1 while running.
    job_durations: Vec<i64>,
    job_gpus: Vec<u64>,
    job_efficiency: Vec<u8>,
    /// How many node ranges each job has; the ranges follow in `node_ranges` as (first node, count).
    job_ranges: Vec<u32>,
    node_ranges: Vec<u32>,
    /// Per packed bar, in start order: its node row, start (after the previous bar's), duration, how
    /// many jobs it stands for, the most GPUs one of them held there, and who used it most.
    packed_nodes: Vec<u32>,
    packed_starts: Vec<i64>,
    packed_durations: Vec<i64>,
    packed_counts: Vec<u32>,
    packed_gpus: Vec<u64>,
    packed_users: Vec<u32>,
    packed_accounts: Vec<u32>,
    truncated: bool,
    min_duration: i64,
    packed_jobs: u64,
    slots: ColourSlots,
    /// Nodes down or drained in the window: a few a day, sent as they are.
    #[serde(default)]
    node_states: Vec<NodeStateSpan>,
}

/// A column of the wire form that does not have one entry per job (or bar): the data is refused
/// whole rather than misread.
#[derive(Debug)]
pub(super) struct ColumnsDisagree(&'static str);

impl std::fmt::Display for ColumnsDisagree {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "the Gantt's columns disagree: {}", self.0)
    }
}

/// `values` as gaps after the previous one, starting from `origin`.
fn deltas(values: impl Iterator<Item = i64>, origin: i64) -> Vec<i64> {
    let mut previous = origin;
    values
        .map(|value| {
            let gap = value - previous;
            previous = value;
            gap
        })
        .collect()
}

/// The values `deltas` encoded.
fn undeltas(gaps: &[i64], origin: i64) -> Vec<i64> {
    let mut previous = origin;
    gaps.iter()
        .map(|gap| {
            previous = previous.saturating_add(*gap);
            previous
        })
        .collect()
}

/// Sorted node indices as (first, count) ranges of consecutive indices.
fn ranges(nodes: &[u32], out: &mut Vec<u32>) -> u32 {
    let mut sorted = nodes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut count = 0;
    let mut index = 0;
    while index < sorted.len() {
        let first = sorted[index];
        let mut length = 1;
        while index + (length as usize) < sorted.len()
            && first.checked_add(length) == Some(sorted[index + length as usize])
        {
            length += 1;
        }
        out.extend([first, length]);
        index += length as usize;
        count += 1;
    }
    count
}

impl From<GanttData> for GanttWire {
    fn from(mut data: GanttData) -> Self {
        data.jobs.sort_by(|a, b| (a.start, &a.job_id).cmp(&(b.start, &b.job_id)));
        data.packed.sort_by_key(|bar| (bar.start, bar.node));
        let jobs = &data.jobs;
        let column = |pick: fn(&GanttJob) -> u32| jobs.iter().map(pick).collect::<Vec<u32>>();
        let mut node_ranges = Vec::with_capacity(jobs.len() * 2);
        let job_ranges = jobs.iter().map(|job| ranges(&job.nodes, &mut node_ranges)).collect();
        let packed = &data.packed;
        Self {
            job_ids: jobs.iter().map(|job| job.job_id.clone()).collect(),
            job_names: column(|job| job.name),
            job_users: column(|job| job.user),
            job_accounts: column(|job| job.account),
            job_partitions: column(|job| job.partition),
            job_states: column(|job| job.state),
            job_starts: deltas(jobs.iter().map(|job| job.start), data.start),
            job_durations: jobs.iter().map(|job| if job.end > 0 { job.end - job.start } else { -1 }).collect(),
            job_gpus: jobs.iter().map(|job| job.gpus).collect(),
            job_efficiency: jobs.iter().map(|job| job.efficiency).collect(),
            job_ranges,
            node_ranges,
            packed_nodes: packed.iter().map(|bar| bar.node).collect(),
            packed_starts: deltas(packed.iter().map(|bar| bar.start), data.start),
            packed_durations: packed.iter().map(|bar| bar.end - bar.start).collect(),
            packed_counts: packed.iter().map(|bar| bar.count).collect(),
            packed_gpus: packed.iter().map(|bar| bar.gpus).collect(),
            packed_users: packed.iter().map(|bar| bar.user).collect(),
            packed_accounts: packed.iter().map(|bar| bar.account).collect(),
            cluster: data.cluster,
            start: data.start,
            end: data.end,
            now: data.now,
            racks: data.racks,
            users: data.users,
            accounts: data.accounts,
            partitions: data.partitions,
            states: data.states,
            names: data.names,
            truncated: data.truncated,
            min_duration: data.min_duration,
            packed_jobs: data.packed_jobs,
            slots: data.slots,
            node_states: data.node_states,
        }
    }
}

impl TryFrom<GanttWire> for GanttData {
    type Error = ColumnsDisagree;

    fn try_from(wire: GanttWire) -> Result<Self, Self::Error> {
        let count = wire.job_ids.len();
        let per_job = [
            wire.job_names.len(),
            wire.job_users.len(),
            wire.job_accounts.len(),
            wire.job_partitions.len(),
            wire.job_states.len(),
            wire.job_starts.len(),
            wire.job_durations.len(),
            wire.job_gpus.len(),
            wire.job_efficiency.len(),
            wire.job_ranges.len(),
        ];
        if per_job.iter().any(|&length| length != count) {
            return Err(ColumnsDisagree("a job column's length"));
        }
        let range_total: u64 = wire.job_ranges.iter().map(|&ranges| u64::from(ranges)).sum();
        if range_total * 2 != wire.node_ranges.len() as u64 {
            return Err(ColumnsDisagree("node ranges"));
        }
        let bars = wire.packed_nodes.len();
        let per_bar = [
            wire.packed_starts.len(),
            wire.packed_durations.len(),
            wire.packed_counts.len(),
            wire.packed_gpus.len(),
            wire.packed_users.len(),
            wire.packed_accounts.len(),
        ];
        if per_bar.iter().any(|&length| length != bars) {
            return Err(ColumnsDisagree("a packed bar column's length"));
        }
        let starts = undeltas(&wire.job_starts, wire.start);
        let mut ranges = wire.node_ranges.chunks_exact(2);
        let mut jobs = Vec::with_capacity(count);
        for (index, job_id) in wire.job_ids.into_iter().enumerate() {
            let mut nodes = Vec::new();
            for _ in 0..wire.job_ranges[index] {
                let Some(&[first, length]) = ranges.next() else {
                    return Err(ColumnsDisagree("node ranges"));
                };
                // A range past any real cluster's size is not data (and would allocate without end).
                if length > 1 << 20 {
                    return Err(ColumnsDisagree("a node range's length"));
                }
                nodes.extend((0..length).map(|offset| first.saturating_add(offset)));
            }
            let start = starts[index];
            let duration = wire.job_durations[index];
            jobs.push(GanttJob {
                job_id,
                name: wire.job_names[index],
                user: wire.job_users[index],
                account: wire.job_accounts[index],
                partition: wire.job_partitions[index],
                state: wire.job_states[index],
                start,
                end: if duration >= 0 { start.saturating_add(duration) } else { 0 },
                gpus: wire.job_gpus[index],
                nodes,
                efficiency: wire.job_efficiency[index],
            });
        }
        let packed_starts = undeltas(&wire.packed_starts, wire.start);
        let packed = (0..bars)
            .map(|index| PackedBar {
                node: wire.packed_nodes[index],
                start: packed_starts[index],
                end: packed_starts[index].saturating_add(wire.packed_durations[index].max(0)),
                count: wire.packed_counts[index],
                gpus: wire.packed_gpus[index],
                user: wire.packed_users[index],
                account: wire.packed_accounts[index],
            })
            .collect();
        // A span on a row the racks do not have is dropped, not drawn somewhere else.
        let node_states =
            wire.node_states.into_iter().filter(|span| (span.node as usize) < wire.racks.nodes.len()).collect();
        Ok(Self {
            cluster: wire.cluster,
            start: wire.start,
            end: wire.end,
            now: wire.now,
            racks: wire.racks,
            users: wire.users,
            accounts: wire.accounts,
            partitions: wire.partitions,
            states: wire.states,
            names: wire.names,
            jobs,
            packed,
            truncated: wire.truncated,
            min_duration: wire.min_duration,
            packed_jobs: wire.packed_jobs,
            slots: wire.slots,
            node_states,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_become_ranges_of_consecutive_rows() {
        let mut out = Vec::new();
        assert_eq!(ranges(&[7, 3, 4, 5, 9, 8], &mut out), 2);
        assert_eq!(out, [3, 3, 7, 3]);
        assert_eq!(deltas([10, 15, 15, 40].into_iter(), 0), [10, 5, 0, 25]);
        assert_eq!(undeltas(&[10, 5, 0, 25], 0), [10, 15, 15, 40]);
    }
}
