//! The scheduler: per-slot busy lists per node, placement at the earliest free time, events respected.

use std::cmp::Reverse;

use super::events::EventRow;
use super::workload::Shape;
use super::{CPU_SLOTS, RACK};

#[derive(Debug, Clone, Copy)]
pub(super) struct NodeBlock {
    pub(super) time_start: i64,
    pub(super) time_end: i64,
    pub(super) kill: bool,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Placement {
    pub(super) start: i64,
    pub(super) nodes: Vec<u16>,
    pub(super) gpu_slots: Vec<usize>,
    pub(super) cpu_slots: Vec<usize>,
    pub(super) whole: bool,
    pub(super) cut: Option<i64>,
    /// het: node of component 0 (CPU) and component 1 (GPU)
    pub(super) het_nodes: Option<(u16, u16)>,
}

/// Busy intervals `[start, end)` of one slot, sorted and non-overlapping.
pub(super) type BusyIntervals = Vec<(i64, i64)>;

/// End of the first interval of `busy` that overlaps `[start, start + secs)`, or None if free.
pub(super) fn slot_block(busy: &[(i64, i64)], start: i64, secs: i64) -> Option<i64> {
    // the lists are short: a linear scan beats a binary search (and is cheap in debug builds)
    let until = start.saturating_add(secs);
    for &(busy_start, busy_end) in busy {
        if busy_end <= start {
            continue;
        }
        return if busy_start < until { Some(busy_end) } else { None };
    }
    None
}

/// Earliest start >= `earliest` of a free window of `secs` in one slot.
pub(super) fn slot_earliest(busy: &[(i64, i64)], earliest: i64, secs: i64) -> i64 {
    let mut start = earliest;
    for &(busy_start, busy_end) in busy {
        if busy_end <= start {
            continue;
        }
        if busy_start >= start.saturating_add(secs) {
            break;
        }
        start = busy_end;
    }
    start
}

/// k-th smallest (1-based) of a short slice (reorders it).
pub(super) fn kth_smallest(values: &mut [i64], rank: usize) -> i64 {
    for index in 1..values.len() {
        let mut position = index;
        while position > 0 && values[position - 1] > values[position] {
            values.swap(position - 1, position);
            position -= 1;
        }
    }
    values[rank - 1]
}

/// End of the last busy interval that ends at or before `time` (for best-fit packing).
pub(super) fn slot_prev_end(busy: &[(i64, i64)], time: i64) -> i64 {
    let index = busy.partition_point(|interval| interval.1 <= time);
    if index == 0 { i64::MIN } else { busy[index - 1].1 }
}

/// Per-slot busy lists (8 GPU slots and 4 CPU slots per node) plus the nodes' events.
/// Jobs are placed in submit order at the earliest time their slots are free for their
/// whole time limit (so later jobs backfill gaps only when their limit fits, as Slurm's
/// backfill scheduler does); the interval committed is the actual run time.
pub(super) struct Scheduler {
    pub(super) node_count: usize,
    pub(super) gpus_per_node: usize,
    pub(super) gpu: Vec<BusyIntervals>,
    pub(super) cpu: Vec<BusyIntervals>,
    pub(super) blocks: Vec<Vec<NodeBlock>>,
}

impl Scheduler {
    pub(super) fn new(node_count: usize, gpus_per_node: usize, events: &[EventRow]) -> Self {
        let mut blocks = vec![Vec::new(); node_count];
        for event in events {
            blocks[event.node].push(NodeBlock {
                time_start: event.time_start,
                time_end: event.time_end,
                kill: event.kill,
            });
        }
        for node_blocks in &mut blocks {
            node_blocks.sort_by_key(|block| block.time_start);
        }
        Scheduler {
            node_count,
            gpus_per_node,
            gpu: vec![Vec::new(); node_count * gpus_per_node],
            cpu: vec![Vec::new(); node_count * CPU_SLOTS],
            blocks,
        }
    }

    /// Drop intervals that ended before `now` (no later placement can start before it).
    pub(super) fn prune(&mut self, now: i64) {
        for busy in self.gpu.iter_mut().chain(self.cpu.iter_mut()) {
            let ended = busy.partition_point(|interval| interval.1 <= now);
            if ended > 0 {
                busy.drain(..ended);
            }
        }
    }

    /// Earliest start >= `start` on `node` for a job running `secs` that respects the node's
    /// events, and the time a DOWN event would kill it (if any).
    pub(super) fn adjust(&self, node: usize, mut start: i64, secs: i64) -> (i64, Option<i64>) {
        'outer: loop {
            if start == i64::MAX {
                return (start, None);
            }
            for block in &self.blocks[node] {
                if block.time_end <= start {
                    continue;
                }
                if block.time_start <= start {
                    start = block.time_end;
                    continue 'outer;
                }
                if block.time_start < start.saturating_add(secs) {
                    if block.kill {
                        return (start, Some(block.time_start));
                    }
                    start = block.time_end;
                    continue 'outer;
                }
                break;
            }
            return (start, None);
        }
    }

    pub(super) fn slots(&self, cpu: bool, node: usize) -> &[BusyIntervals] {
        if cpu {
            &self.cpu[node * CPU_SLOTS..(node + 1) * CPU_SLOTS]
        } else {
            &self.gpu[node * self.gpus_per_node..(node + 1) * self.gpus_per_node]
        }
    }

    /// Earliest start in [`earliest`, `latest`] at which `slot_count` slots of one pool of `node` are free
    /// for `fit_secs` and the node has no event in the way. Returns (start, free slots at start).
    #[expect(
        clippy::too_many_arguments,
        reason = "the placement search's own state (node, pool, count, window, run time, cap); a struct would only rename them"
    )]
    pub(super) fn node_earliest(
        &self,
        node: usize,
        cpu: bool,
        slot_count: usize,
        earliest: i64,
        fit_secs: i64,
        secs: i64,
        latest: i64,
    ) -> Option<(i64, usize)> {
        let mut start = earliest;
        loop {
            if start > latest || start == i64::MAX {
                return None;
            }
            let mut free = 0usize;
            let mut next = i64::MAX;
            for busy in self.slots(cpu, node) {
                match slot_block(busy, start, fit_secs) {
                    None => free += 1,
                    Some(busy_end) => next = next.min(busy_end),
                }
            }
            if free >= slot_count {
                let (adjusted, _) = self.adjust(node, start, secs);
                if adjusted == start {
                    return Some((start, free));
                }
                start = adjusted;
                continue;
            }
            start = next;
        }
    }

    /// `slot_count` slots of one pool (GPU or CPU) on a single node: earliest start, best fit.
    pub(super) fn place_slots(
        &self,
        cpu: bool,
        slot_count: usize,
        earliest: i64,
        fit_secs: i64,
        secs: i64,
    ) -> Option<Placement> {
        let slots_per_node = if cpu { CPU_SLOTS } else { self.gpus_per_node };
        // per node: lower bound of the start (k-th earliest free window of its slots) and
        // the number of slots free right away
        let mut start_bounds: Vec<(i64, usize, usize)> = Vec::with_capacity(self.node_count);
        let mut slot_starts = [0i64; 32];
        for node in 0..self.node_count {
            let mut free = 0;
            for (slot, busy) in self.slots(cpu, node).iter().enumerate() {
                let slot_start = slot_earliest(busy, earliest, fit_secs);
                slot_starts[slot] = slot_start;
                if slot_start == earliest {
                    free += 1;
                }
            }
            let start_bound = if free >= slot_count {
                earliest
            } else {
                kth_smallest(&mut slot_starts[..slots_per_node], slot_count)
            };
            start_bounds.push((start_bound, free, node));
        }
        // best fit among the nodes that can start it now
        let mut best: Option<(i64, usize, usize)> = None;
        for &(start_bound, free, node) in &start_bounds {
            if start_bound == earliest
                && best.is_none_or(|best_so_far| free < best_so_far.1)
                && self.adjust(node, earliest, secs).0 == earliest
            {
                best = Some((earliest, free, node));
            }
        }
        if best.is_none() {
            // otherwise the exact earliest start, nodes in lower-bound order
            start_bounds.sort_unstable_by_key(|bound| (bound.0, bound.2));
            for &(start_bound, _, node) in &start_bounds {
                if let Some((best_start, _, _)) = best
                    && start_bound > best_start
                {
                    break;
                }
                let cap = best.map_or(i64::MAX - 1, |best_so_far| best_so_far.0);
                let Some((start, free)) = self.node_earliest(node, cpu, slot_count, start_bound, fit_secs, secs, cap)
                else {
                    continue;
                };
                let better = match best {
                    None => true,
                    Some((best_start, best_free, best_node)) => {
                        start < best_start || (start == best_start && (free, node) < (best_free, best_node))
                    }
                };
                if better {
                    best = Some((start, free, node));
                }
            }
        }
        let (start, _, node) = best?;
        let pool = self.slots(cpu, node);
        let mut slot_indices: Vec<usize> =
            (0..slots_per_node).filter(|&slot| slot_block(&pool[slot], start, fit_secs).is_none()).collect();
        slot_indices.sort_by_key(|&slot| (Reverse(slot_prev_end(&pool[slot], start)), slot));
        slot_indices.truncate(slot_count);
        slot_indices.sort_unstable();
        let slots: Vec<usize> = slot_indices.into_iter().map(|slot| node * slots_per_node + slot).collect();
        let cut = self.adjust(node, start, secs).1;
        let mut placement = Placement { start, nodes: vec![node as u16], cut, ..Default::default() };
        if cpu {
            placement.cpu_slots = slots;
        } else {
            placement.gpu_slots = slots;
        }
        Some(placement)
    }

    /// Earliest start >= `earliest` at which `node` is entirely free for `fit_secs` and has no event in
    /// the way.
    pub(super) fn whole_earliest(&self, node: usize, earliest: i64, fit_secs: i64, secs: i64) -> i64 {
        let mut start = earliest;
        loop {
            if start == i64::MAX {
                return start;
            }
            // every slot blocked at t stays blocked until its blocking interval ends
            let next = self
                .slots(false, node)
                .iter()
                .chain(self.slots(true, node))
                .filter_map(|busy| slot_block(busy, start, fit_secs))
                .fold(start, i64::max);
            if next > start {
                start = next;
                continue;
            }
            let (adjusted, _) = self.adjust(node, start, secs);
            if adjusted == start {
                return start;
            }
            start = adjusted;
        }
    }

    /// `node_count` whole nodes among the first `pool_size` nodes at the same time, preferring few racks.
    pub(super) fn place_whole(
        &self,
        node_count: usize,
        pool_size: usize,
        earliest: i64,
        fit_secs: i64,
        secs: i64,
    ) -> Option<Placement> {
        let mut start = earliest;
        loop {
            let mut candidates: Vec<(i64, usize)> = (0..pool_size)
                .map(|node| (self.whole_earliest(node, start, fit_secs, secs), node))
                .filter(|candidate| candidate.0 < i64::MAX)
                .collect();
            if candidates.len() < node_count {
                return None;
            }
            candidates.sort_unstable();
            let nth_start = candidates[node_count - 1].0;
            if nth_start > start {
                start = nth_start;
                continue;
            }
            let racks = self.node_count.div_ceil(RACK);
            let mut by_rack: Vec<Vec<usize>> = vec![Vec::new(); racks];
            for &(candidate_start, node) in &candidates {
                if candidate_start == start {
                    by_rack[node / RACK].push(node);
                }
            }
            for rack_nodes in &mut by_rack {
                rack_nodes.sort_unstable();
            }
            let mut chosen: Vec<usize> = Vec::with_capacity(node_count);
            if let Some(rack) = (0..racks)
                .filter(|&rack| by_rack[rack].len() >= node_count)
                .min_by_key(|&rack| (by_rack[rack].len(), rack))
            {
                chosen.extend(by_rack[rack].iter().take(node_count));
            } else {
                let mut order: Vec<usize> = (0..racks).collect();
                order.sort_by_key(|&rack| (Reverse(by_rack[rack].len()), rack));
                for rack in order {
                    for &node in &by_rack[rack] {
                        if chosen.len() < node_count {
                            chosen.push(node);
                        }
                    }
                }
            }
            chosen.sort_unstable();
            let cut = chosen.iter().filter_map(|&node| self.adjust(node, start, secs).1).min();
            return Some(Placement {
                start,
                nodes: chosen.iter().map(|&node| node as u16).collect(),
                whole: true,
                cut,
                ..Default::default()
            });
        }
    }

    pub(super) fn place_het(&self, gpus: usize, earliest: i64, fit_secs: i64, secs: i64) -> Option<Placement> {
        let mut start = earliest;
        for _ in 0..256 {
            let cpu_part = self.place_slots(true, 1, start, fit_secs, secs)?;
            let gpu_part = self.place_slots(false, gpus, start, fit_secs, secs)?;
            if cpu_part.start == gpu_part.start {
                let cut = match (cpu_part.cut, gpu_part.cut) {
                    (Some(first), Some(second)) => Some(first.min(second)),
                    (first, second) => first.or(second),
                };
                let mut nodes = vec![cpu_part.nodes[0], gpu_part.nodes[0]];
                nodes.sort_unstable();
                nodes.dedup();
                return Some(Placement {
                    start: cpu_part.start,
                    nodes,
                    gpu_slots: gpu_part.gpu_slots,
                    cpu_slots: cpu_part.cpu_slots,
                    whole: false,
                    cut,
                    het_nodes: Some((cpu_part.nodes[0], gpu_part.nodes[0])),
                });
            }
            start = cpu_part.start.max(gpu_part.start);
        }
        None
    }

    /// `fit_secs`: how long the resources must be free (the time limit), `secs`: the actual run time.
    /// Production runs (`large`) only get the first 70 % of the nodes (think of a QOS
    /// GrpTRES cap), so that big reservations never block the whole cluster.
    pub(super) fn place(
        &self,
        shape: Shape,
        large: bool,
        earliest: i64,
        fit_secs: i64,
        secs: i64,
    ) -> Option<Placement> {
        match shape {
            Shape::Gpu(count) => self.place_slots(false, count as usize, earliest, fit_secs, secs),
            Shape::Cpu(count) => self.place_slots(true, count as usize, earliest, fit_secs, secs),
            Shape::Whole(nodes) => {
                let pool = if large { (self.node_count * 7 / 10).max(nodes as usize) } else { self.node_count };
                self.place_whole(nodes as usize, pool, earliest, fit_secs, secs)
            }
            Shape::Het(count) => self.place_het(count as usize, earliest, fit_secs, secs),
        }
    }

    pub(super) fn commit(&mut self, placement: &Placement, end: i64) {
        if end <= placement.start {
            return;
        }
        let insert = |busy: &mut BusyIntervals| {
            let position = busy.partition_point(|interval| interval.0 < placement.start);
            busy.insert(position, (placement.start, end));
        };
        if placement.whole {
            for &node in &placement.nodes {
                let node = usize::from(node);
                for busy in &mut self.gpu[node * self.gpus_per_node..(node + 1) * self.gpus_per_node] {
                    insert(busy);
                }
                for busy in &mut self.cpu[node * CPU_SLOTS..(node + 1) * CPU_SLOTS] {
                    insert(busy);
                }
            }
        }
        for &slot in &placement.gpu_slots {
            insert(&mut self.gpu[slot]);
        }
        for &slot in &placement.cpu_slots {
            insert(&mut self.cpu[slot]);
        }
    }
}
