//! Bars past the chart's resolution, merged: on a wide window a job shorter than one pixel of the
//! window's widest drawing is a sliver nobody can point at, and thousands of them cost the payload,
//! the browser's decoding and the drawing. Per node row, finished jobs shorter than that which lie
//! within a pixel of each other become one packed bar (its time range, how many jobs, the most GPUs
//! one held, who used it most); zooming in loads the range again in full detail. No job is dropped:
//! every job is a bar of its own or counted in its node's packed bars.

use std::collections::BTreeMap;

use super::{GanttData, PackedBar, per_node_gpus};

/// The widest the chart is drawn, CSS pixels (a wall display); one pixel of the window at this width
/// is the shortest bar kept on its own.
pub const WIDEST_PX: i64 = 4000;

/// A packed bar in the making.
struct Group {
    start: i64,
    end: i64,
    jobs: Vec<u32>,
}

/// Merges `data`'s short finished jobs per node into packed bars (see the module's comment), with
/// `min_duration` seconds as the resolution. A job packed on one of its nodes is packed on all of
/// them, so it is never drawn twice; it leaves `data.jobs`.
pub fn pack_short_jobs(data: &mut GanttData, min_duration: i64) {
    if min_duration <= 0 || data.jobs.is_empty() {
        return;
    }
    let short = |index: usize| {
        let job = &data.jobs[index];
        job.end > 0 && job.end - job.start < min_duration
    };
    let mut per_node: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (index, job) in data.jobs.iter().enumerate() {
        if short(index) {
            for &node in &job.nodes {
                per_node.entry(node).or_default().push(index as u32);
            }
        }
    }
    // First pass: which short jobs have a short neighbour within a pixel on some node.
    let mut packed = vec![false; data.jobs.len()];
    let mut groups: Vec<(u32, Group)> = Vec::new();
    for (&node, jobs) in &mut per_node {
        jobs.sort_by_key(|&job| (data.jobs[job as usize].start, job));
        let mut current: Option<Group> = None;
        for &job in jobs.iter() {
            let gantt_job = &data.jobs[job as usize];
            match &mut current {
                Some(group) if gantt_job.start <= group.end + min_duration => {
                    group.end = group.end.max(gantt_job.end);
                    group.jobs.push(job);
                }
                _ => {
                    if let Some(done) = current.take() {
                        groups.push((node, done));
                    }
                    current = Some(Group { start: gantt_job.start, end: gantt_job.end, jobs: vec![job] });
                }
            }
        }
        if let Some(done) = current {
            groups.push((node, done));
        }
    }
    for (_, group) in &groups {
        if group.jobs.len() > 1 {
            for &job in &group.jobs {
                packed[job as usize] = true;
            }
        }
    }
    // Second pass: every group holding a packed job becomes a bar (a packed job alone on another of
    // its nodes is a bar of one there).
    for (node, group) in groups {
        if !group.jobs.iter().any(|&job| packed[job as usize]) {
            continue;
        }
        let mut weight: BTreeMap<(u32, u32), i64> = BTreeMap::new();
        let mut gpus = 0;
        for &job in &group.jobs {
            let gantt_job = &data.jobs[job as usize];
            let held = per_node_gpus(gantt_job.gpus, gantt_job.nodes.len());
            gpus = gpus.max(held);
            // Who used the bar most, by GPU-seconds (a CPU-only job counts as one GPU).
            let seconds = (gantt_job.end - gantt_job.start).max(1) * held.max(1) as i64;
            *weight.entry((gantt_job.user, gantt_job.account)).or_default() += seconds;
        }
        let (user, account) = weight
            .into_iter()
            .max_by_key(|&(who, seconds)| (seconds, std::cmp::Reverse(who)))
            .map_or((0, 0), |(who, _)| who);
        data.packed.push(PackedBar {
            node,
            start: group.start,
            end: group.end,
            count: group.jobs.len() as u32,
            gpus,
            user,
            account,
        });
    }
    let mut index = 0;
    data.jobs.retain(|_| {
        let keep = !packed[index];
        index += 1;
        keep
    });
    let packed_jobs = packed.iter().filter(|&&is_packed| is_packed).count() as u64;
    if packed_jobs > 0 {
        // The page reloads a narrower window for the detail only when something was packed.
        data.packed_jobs += packed_jobs;
        data.min_duration = min_duration;
        // The tables name only what is drawn: the legend names every user drawn, and no one else.
        let (jobs, packed) = (&mut data.jobs, &mut data.packed);
        keep_used(
            &mut data.users,
            jobs.iter_mut().map(|job| &mut job.user).chain(packed.iter_mut().map(|bar| &mut bar.user)),
        );
        keep_used(
            &mut data.accounts,
            jobs.iter_mut().map(|job| &mut job.account).chain(packed.iter_mut().map(|bar| &mut bar.account)),
        );
        keep_used(&mut data.partitions, jobs.iter_mut().map(|job| &mut job.partition));
        keep_used(&mut data.states, jobs.iter_mut().map(|job| &mut job.state));
        keep_used(&mut data.names, jobs.iter_mut().map(|job| &mut job.name));
    }
}

/// Keeps the values of `table` that `indices` point at, in the order first pointed at, and points
/// the indices at their new places.
fn keep_used<'a>(table: &mut Vec<String>, indices: impl Iterator<Item = &'a mut u32>) {
    let mut moved = vec![u32::MAX; table.len()];
    let mut kept = Vec::new();
    for index in indices {
        let Some(slot) = moved.get_mut(*index as usize) else { continue };
        if *slot == u32::MAX {
            *slot = kept.len() as u32;
            kept.push(std::mem::take(&mut table[*index as usize]));
        }
        *index = *slot;
    }
    *table = kept;
}
