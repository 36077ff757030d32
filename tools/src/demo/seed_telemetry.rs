//! `slurmlens-dev demo seed-telemetry`: telemetry for the last hours of a cluster whose jobs are already in
//! slurmdbd, built from the series of `telemetry` and `nodes`, plus the GPU records and trace summaries in
//! our store.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use slurmlens::sources::victoriametrics::VictoriaMetrics;

use super::telemetry::{
    GpuWorkload, LossyPath, PingPath, Profile, gpu_uuid, import_pingmesh, import_workloads, ping_paths,
};

/// What `seed_cluster` wrote.
#[derive(Debug, Default)]
pub struct TelemetryStats {
    pub jobs: usize,
    pub gpu_records: usize,
    /// All samples, ping-mesh and burst samples included.
    pub samples: usize,
    pub pingmesh_samples: usize,
    pub burst_samples: usize,
    /// Nodes with the burst agent.
    pub burst_nodes: usize,
    /// node_exporter, ipmi_exporter and Lustre samples.
    pub node_samples: usize,
    /// Jobs whose GPUs show XID 79 (they died with their node).
    pub xid_jobs: Vec<u32>,
    /// FAILED jobs whose GPU shows XID 31 (SIGSEGV on an illegal address: the application's fault).
    pub app_crash_jobs: Vec<u32>,
    /// The lossy ToR pair, its window and the job crossing it.
    pub lossy: Option<LossyPath>,
    /// Jobs given trace summaries, with their shape, and the rows stored.
    pub traced_jobs: Vec<(u32, super::traces::TracedKind)>,
    pub trace_rows: u64,
}

/// The profile a demo job's GPUs follow, from what the job is (its name) and how it ended.
pub fn profile_for(job_name: &str, job_id: u32, multi_node: bool) -> Profile {
    let name = job_name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| name.contains(word));
    if has(&["jupyter", "notebook", "interactive"]) {
        Profile::Idle
    } else if has(&["resnet", "yolo", "coco", "augment", "preprocess", "unet", "tokenizer", "sam"]) {
        Profile::InputBound
    } else if has(&["eval", "vllm", "infer", "serve", "ens"]) {
        Profile::Bursty
    } else if has(&["md", "gromacs", "lammps", "lqcd", "qmc", "wrf", "cdo", "blast", "bash"]) {
        // FP64 and non-tensor codes: the GPU is busy, the tensor cores are not.
        Profile::Fp32
    } else if multi_node
        || has(&["pretrain", "train", "llama", "lm", "diffusion", "graphcast", "fourcastnet", "alphafold"])
    {
        // One run in five is left in FP32 by its author: busy GPUs, idle tensor cores.
        if job_id.is_multiple_of(5) {
            Profile::Fp32
        } else {
            Profile::Training { period_s: 45 + i64::from(job_id % 4) * 15 }
        }
    } else {
        Profile::Bursty
    }
}

/// Writes telemetry for the last `hours` of a cluster whose jobs are already in slurmdbd: every GPU of
/// every node gets dcgm-exporter series shaped by the job holding it (quiet between jobs), nodes of
/// multi-node jobs get RDMA traffic, a job that died with its node on an XID event shows XID 79, and
/// each job's GPU indices are recorded in our store as the slurm-plugin would have recorded them.
/// Next to them, the ping mesh of the racks of `topology` (one ToR pair lossy for 2 h under a running
/// multi-node job, which slows down) and burst series on the nodes of the first half of the racks.
pub async fn seed_cluster(
    reader: &slurmlens::sources::slurmdbd::SlurmDbd,
    store: Option<&slurmlens::store::Store>,
    vm: &VictoriaMetrics,
    topology: &slurmlens_slurm::topology::Topology,
    hours: i64,
    step_s: i64,
    gpus_per_node: u16,
) -> anyhow::Result<TelemetryStats> {
    use slurmlens::domain::job::{JobFilter, TimeWindow};
    use slurmlens::domain::scope::ViewerScope;
    use slurmlens::domain::state::JobStateBase;

    let now = Utc::now();
    let from = now - chrono::Duration::hours(hours);
    let window = TimeWindow::new(from, now)?;
    let tres = reader.tres_catalog().await?;
    let mut jobs = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) =
            reader.jobs_in_window(&ViewerScope::Staff, window, &JobFilter::default(), &tres, cursor, 5000).await?;
        jobs.extend(page.into_iter().filter(|job| job.time_start > 0 && tres.gpus(&job.tres_alloc) > 0));
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    jobs.sort_by_key(|job| (job.time_start, job.identity.id_job));
    let node_events = reader.node_events(window, None).await?;
    let xid_events: Vec<_> =
        node_events.iter().filter(|event| event.reason.to_ascii_lowercase().contains("xid")).collect();
    // Give each job concrete GPU indices: the lowest slots free on each node when it starts.
    let mut free_at: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut workloads = Vec::new();
    let mut stats = TelemetryStats::default();
    let (from_s, now_s) = (from.timestamp(), now.timestamp());
    let mut records: BTreeMap<u32, Vec<slurmlens::domain::gpu::GpuAllocation>> = BTreeMap::new();
    let mut multi_node_jobs: Vec<(u32, Vec<String>, i64, i64)> = Vec::new();
    for job in &jobs {
        let start = job.time_start as i64;
        let end = if job.time_end == 0 { now_s + 1 } else { job.time_end as i64 };
        let hosts = job.nodes.hosts();
        let per_node = (tres.gpus(&job.tres_alloc) / hosts.len().max(1) as u64).min(u64::from(gpus_per_node)) as usize;
        let multi_node = hosts.len() > 1;
        let died_of_xid = job.state.base() == JobStateBase::NodeFail
            && xid_events
                .iter()
                .any(|event| hosts.contains(&event.node) && (event.time_start as i64 - end).abs() < 900);
        // A segfault of a GPU program is often an illegal address: the driver logs XID 31 on the GPU of
        // the faulting rank (srun reports 139 = 128 + SIGSEGV, a batch script the signal itself).
        // Only GPU-heavy runs (4 GPUs or more) are given one, so that not every segfault has an XID, and
        // only runs whose nodes saw no drain or failure around them: the planted crash is then the
        // program's beyond doubt (with a node's ECC drain beside it, the report rightly weighs that first).
        let margin = slurmlens::domain::blame::NODE_EVENT_MARGIN_S;
        let quiet_nodes = !node_events.iter().any(|event| {
            hosts.contains(&event.node)
                && (event.time_start as i64) < end + margin
                && (event.time_end == 0 || event.time_end as i64 >= start - margin)
        });
        let app_crash = job.state.base() == JobStateBase::Failed
            && (job.exit_code.signal == 11 || job.exit_code.status == 11)
            && tres.gpus(&job.tres_alloc) >= 4
            && job.time_end > 0
            && end - 4 > start
            && quiet_nodes;
        if multi_node && !died_of_xid && job.time_end > 0 {
            multi_node_jobs.push((job.identity.id_job, hosts.to_vec(), start, end));
        }
        let mut first_gpu = true;
        for host in hosts {
            let slots = free_at.entry(host.clone()).or_insert_with(|| vec![i64::MIN; usize::from(gpus_per_node)]);
            let mut order: Vec<usize> = (0..slots.len()).collect();
            order.sort_by_key(|&slot| (slots[slot] > start, slot));
            for &slot in order.iter().take(per_node) {
                slots[slot] = end;
                // The node's XID event on this host, if the job died of it: its end is the reboot.
                let crash_event = xid_events
                    .iter()
                    .find(|event| died_of_xid && &event.node == host && (event.time_start as i64 - end).abs() < 900);
                let workload_end = match crash_event {
                    Some(event) if event.time_end > 0 => (event.time_end as i64).max(end),
                    Some(_) => now_s + 1,
                    None => end,
                };
                let profile = if crash_event.is_some() {
                    Profile::XidCrash { at: end - 5 }
                } else if app_crash && first_gpu {
                    Profile::AppCrash { at: end - 4 }
                } else {
                    profile_for(&job.job_name, job.identity.id_job, multi_node)
                };
                first_gpu = false;
                workloads.push(GpuWorkload {
                    node: host.clone(),
                    gpu: slot as u16,
                    job_id: job.identity.id_job,
                    start,
                    end: workload_end,
                    profile,
                    multi_node,
                    degraded: None,
                });
                let seen = |t: i64| DateTime::from_timestamp(t.min(now_s), 0).unwrap_or(now);
                records.entry(job.identity.id_job).or_default().push(slurmlens::domain::gpu::GpuAllocation {
                    job_id: job.identity.id_job,
                    step: "job".into(),
                    gpu: slurmlens::domain::gpu::GpuRef { node: host.clone(), index: slot as u16 },
                    uuid: Some(gpu_uuid(host, slot as u16)),
                    cgroup_path: None,
                    first_seen: seen(start),
                    last_seen: seen(end),
                    ended_at: (job.time_end > 0).then(|| seen(end)),
                });
            }
        }
        if died_of_xid {
            stats.xid_jobs.push(job.identity.id_job);
        }
        if app_crash {
            stats.app_crash_jobs.push(job.identity.id_job);
        }
    }
    stats.jobs = jobs.len();
    if let Some(store) = store {
        // A seeding replaces what the last one left of these jobs: GPU records on other slots (the
        // window, and so the slots taken before it, moved) and reports archived from its series.
        let seeded: Vec<u32> = jobs.iter().map(|job| job.identity.id_job).collect();
        store.forget_jobs_telemetry(reader.cluster(), &seeded).await?;
        for allocations in records.values() {
            store.upsert_gpu_allocations(reader.cluster(), allocations).await?;
            stats.gpu_records += allocations.len();
        }
    }
    let nodes: Vec<String> = {
        let mut all: Vec<String> = reader.nodes(&tres).await?.into_iter().map(|node| node.node).collect();
        if all.is_empty() {
            all = free_at.keys().cloned().collect();
        }
        all
    };
    let (rack_names, rack_of, burst_agents) = rack_layout(topology, reader.cluster().as_str(), &nodes, gpus_per_node);
    let rack_of: BTreeMap<&str, &str> = rack_of.iter().map(|(node, rack)| (node.as_str(), rack.as_str())).collect();
    stats.lossy = pick_lossy_path(&multi_node_jobs, &rack_of, &rack_names, from_s, now_s);
    if let Some(lossy) = &stats.lossy {
        for workload in workloads.iter_mut().filter(|w| w.job_id == lossy.job_id) {
            workload.degraded = Some((lossy.from, lossy.to));
        }
    }
    stats.burst_nodes = burst_agents.len();
    let (samples, burst_samples) =
        import_workloads(vm, &nodes, gpus_per_node, &workloads, &burst_agents, from_s, now_s - 1, step_s, 11).await?;
    stats.burst_samples = burst_samples;
    stats.node_samples =
        super::nodes::import_node_series(vm, &nodes, gpus_per_node, &workloads, from_s, now_s - 1, 17).await?;
    let paths = ping_paths(&rack_names);
    stats.pingmesh_samples = import_pingmesh(vm, &paths, stats.lossy.as_ref(), from_s, now_s - 1, 13).await?;
    stats.samples = samples + stats.pingmesh_samples + stats.node_samples;
    if let Some(store) = store {
        let traced = traced_gpus(&workloads, now_s);
        stats.traced_jobs =
            traced.iter().map(|gpu| (gpu.job_id, gpu.kind)).collect::<BTreeMap<_, _>>().into_iter().collect();
        stats.trace_rows = super::traces::seed(store, reader.cluster(), &traced, 6).await?;
    }
    Ok(stats)
}

/// The racks of `nodes` that carry nodes (in the topology's order), each node's rack, and the nodes that
/// run the burst agent: those of the first half of the racks (elsewhere the report says "peak unknown").
pub(super) fn rack_layout(
    topology: &slurmlens_slurm::topology::Topology,
    cluster: &str,
    nodes: &[String],
    gpus_per_node: u16,
) -> (Vec<String>, BTreeMap<String, String>, BTreeSet<String>) {
    let layout = topology.resolve(cluster, nodes, u32::from(gpus_per_node));
    let rack_names: Vec<String> =
        layout.racks.iter().filter(|rack| !rack.nodes.is_empty()).map(|rack| rack.name.clone()).collect();
    let rack_of: BTreeMap<String, String> =
        layout.nodes.iter().map(|node| (node.name.clone(), layout.racks[node.rack as usize].name.clone())).collect();
    let agent_racks: BTreeSet<&str> =
        rack_names.iter().take(rack_names.len().div_ceil(2)).map(String::as_str).collect();
    let burst_agents: BTreeSet<String> = nodes
        .iter()
        .filter(|node| rack_of.get(node.as_str()).is_some_and(|rack| agent_racks.contains(rack.as_str())))
        .cloned()
        .collect();
    (rack_names, rack_of, burst_agents)
}

/// The finished jobs whose collectors sent trace summaries: the first multi-node training run
/// (communication-bound), the first single-node one (compute-bound) and the first input-bound job.
fn traced_gpus(workloads: &[GpuWorkload], now_s: i64) -> Vec<super::traces::TracedGpu> {
    use super::traces::{TracedGpu, TracedKind};
    let finished = |w: &&GpuWorkload| w.end <= now_s && w.end - w.start >= 3600 && w.degraded.is_none();
    let first =
        |test: &dyn Fn(&GpuWorkload) -> bool| workloads.iter().filter(finished).find(|w| test(w)).map(|w| w.job_id);
    let picks = [
        (first(&|w| w.multi_node && matches!(w.profile, Profile::Training { .. })), TracedKind::CommunicationBound),
        (first(&|w| !w.multi_node && matches!(w.profile, Profile::Training { .. })), TracedKind::ComputeBound),
        (first(&|w| matches!(w.profile, Profile::InputBound)), TracedKind::InputBound),
    ];
    picks
        .into_iter()
        .filter_map(|(job, kind)| Some((job?, kind)))
        .flat_map(|(job, kind)| {
            workloads.iter().filter(move |w| w.job_id == job).map(move |w| TracedGpu {
                job_id: w.job_id,
                node: w.node.clone(),
                gpu: w.gpu,
                start: w.start,
                end: w.end,
                kind,
            })
        })
        .collect()
}

/// The ToR pair to make lossy for 2 h: under a multi-node job running then (the first 30 min of its run
/// inside the window are healthy), preferring one that spans two neighbouring racks (an inter-ToR link),
/// then the longest, then the lowest id; the ToR mesh of its rack otherwise.
fn pick_lossy_path(
    jobs: &[(u32, Vec<String>, i64, i64)],
    rack_of: &BTreeMap<&str, &str>,
    racks: &[String],
    from: i64,
    to: i64,
) -> Option<LossyPath> {
    let position = |rack: &str| racks.iter().position(|name| name == rack);
    jobs.iter()
        .filter_map(|(job_id, hosts, start, end)| {
            let lossy_from = (*start).max(from) + 1800;
            let lossy_to = lossy_from + 2 * 3600;
            if lossy_to > (*end).min(to) - 600 {
                return None;
            }
            let mut job_racks: Vec<usize> =
                hosts.iter().filter_map(|host| rack_of.get(host.as_str()).and_then(|rack| position(rack))).collect();
            job_racks.sort_unstable();
            job_racks.dedup();
            let (&first, &last) = (job_racks.first()?, job_racks.last()?);
            let neighbours = job_racks.len() == 2 && last == first + 1;
            let path =
                PingPath { source: racks[first].clone(), target: racks[if neighbours { last } else { first }].clone() };
            let key = (!neighbours, std::cmp::Reverse((*end).min(to) - lossy_from), *job_id);
            Some((key, LossyPath { path, from: lossy_from, to: lossy_to, job_id: *job_id }))
        })
        .min_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, lossy)| lossy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossy_path_prefers_a_job_across_neighbouring_racks() {
        let racks: Vec<String> = ["A01", "A02", "A03"].map(String::from).to_vec();
        let rack_of: BTreeMap<&str, &str> =
            [("n1", "A01"), ("n2", "A01"), ("n3", "A02"), ("n4", "A03")].into_iter().collect();
        let jobs = vec![
            (7, vec!["n1".to_string(), "n2".to_string()], 0, 50_000),
            (8, vec!["n2".to_string(), "n3".to_string()], 1000, 20_000),
            (9, vec!["n1".to_string(), "n4".to_string()], 0, 50_000),
            (10, vec!["n3".to_string(), "n4".to_string()], 0, 5000),
        ];
        let lossy = pick_lossy_path(&jobs, &rack_of, &racks, 0, 100_000).expect("a lossy path");
        assert_eq!((lossy.job_id, lossy.path.source.as_str(), lossy.path.target.as_str()), (8, "A01", "A02"));
        assert_eq!((lossy.from, lossy.to), (2800, 2800 + 7200));
        let lossy = pick_lossy_path(&jobs[..1], &rack_of, &racks, 0, 100_000).expect("a lossy path");
        assert_eq!((lossy.path.source.as_str(), lossy.path.target.as_str()), ("A01", "A01"), "the rack's ToR mesh");
    }
}
