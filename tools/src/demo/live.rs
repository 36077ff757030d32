//! `slurmlens-dev demo live`: keeps a seeded demo cluster alive. Every scrape interval it writes what
//! slurmdbd and the exporters would have written since the last one: the history's scheduler continued in
//! real time (jobs start, end and arrive, `history::live`), the GPU records the plugin sends for them, and
//! the samples of every series `seed-telemetry` writes, from the same generators with the counters going
//! on from their last values (`resume`). Started again after a stop, it catches up from where the data
//! ends, back-filling at most `backfill_s` of samples (an older gap stays a gap), and never writes a sample
//! at or before the last one.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use chrono::{DateTime, Utc};
use sqlx::MySqlPool;

use slurmlens::domain::cluster::ClusterName;
use slurmlens::domain::gpu::{GpuAllocation, GpuRef};
use slurmlens::domain::job::RunWindow;
use slurmlens::sources::victoriametrics::VictoriaMetrics;
use slurmlens::store::Store;

use super::history::live::{LiveJob, Timeline, Written, history_end};
use super::nodes::{NODE_STEP_S, job_stats_resumed, node_series_resumed};
use super::resume::{COUNTERS, Resume};
use super::seed_telemetry::{profile_for, rack_layout};
use super::telemetry::{
    GpuWorkload, PINGMESH_INTERVAL_S, PingPath, gpu_series_resumed, gpu_uuid, ping_paths, pingmesh_series_resumed,
    rdma_series_resumed,
};

/// How far ahead of now the continuation is simulated; it is simulated again when now comes within a day.
const AHEAD_S: i64 = 2 * 86_400;
/// The look-back of the queries that find where the seeded series end.
const LOOKBACK: &str = "62d";

/// What the live continuation needs besides the data sources.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    pub cluster: ClusterName,
    /// The history's shape and seed, as `seed-history` was given them.
    pub shape: super::cli::HistoryShape,
    /// Seconds between samples (the seeded data's step).
    pub step_s: i64,
    pub gpus_per_node: u16,
    /// The most seconds of samples written at once after a stop.
    pub backfill_s: i64,
}

/// What one tick wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickStats {
    pub rows: Written,
    /// GPU records of jobs that started, and jobs whose records were ended.
    pub gpu_records: usize,
    pub ended_records: usize,
    pub samples: usize,
    /// GPU jobs whose series were written.
    pub gpu_jobs: usize,
}

/// The last sample time of each family of series (they have their own grids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marks {
    /// dcgm-exporter and rdma_exporter (and the burst agent): every `step_s` from the seeding's start.
    pub gpu: i64,
    /// node_exporter, ipmi_exporter and Lustre: every 30 s of the clock.
    pub node: i64,
    /// R-Pingmesh: every 10 s from the seeding's start.
    pub ping: i64,
}

/// A running continuation of one cluster.
pub struct Live {
    settings: LiveSettings,
    pool: MySqlPool,
    store: Option<Store>,
    vm: VictoriaMetrics,
    timeline: Timeline,
    nodes: Vec<String>,
    burst_agents: BTreeSet<String>,
    paths: Vec<PingPath>,
    /// slurmdbd's rows are as they are at this moment.
    since: i64,
    marks: Marks,
    resume: Resume,
    /// The GPUs each job holds (recorded by the plugin, or given here when it starts).
    gpus_of: BTreeMap<u32, Vec<(String, u16)>>,
}

impl Live {
    /// Rebuilds the cluster's history and finds where its rows and series end.
    pub async fn start(
        settings: LiveSettings,
        pool: MySqlPool,
        store: Option<Store>,
        vm: VictoriaMetrics,
        topology: &slurmlens_slurm::topology::Topology,
        now: i64,
    ) -> anyhow::Result<Self> {
        let cluster = settings.cluster.as_str();
        let end = history_end(&pool, cluster, settings.shape.days)
            .await?
            .with_context(|| format!("{cluster} has no generated history: run `demo seed-history` first"))?;
        let params = settings.shape.params(cluster, DateTime::from_timestamp(end, 0).unwrap_or_default());
        let timeline = Timeline::load(&pool, &params, now + AHEAD_S).await?;
        let nodes: Vec<String> = (0..settings.shape.nodes)
            .map(|node| format!("gpu{:0width$}", node + 1, width = settings.shape.nodes.to_string().len().max(3)))
            .collect();
        let (racks, _, burst_agents) = rack_layout(topology, cluster, &nodes, settings.gpus_per_node);
        let paths = ping_paths(&racks);
        let floor = |step: i64| now - settings.backfill_s - (now - settings.backfill_s).rem_euclid(step);
        let last_of = |query: String, fallback: i64| {
            let vm = &vm;
            async move {
                let series = vm.query(&query, at(now)).await.context("finding where the series end")?;
                let last = series.first().and_then(|series| series.points.last()).map(|&(_, value)| value as i64);
                anyhow::Ok(last.unwrap_or(fallback))
            }
        };
        let node_names = nodes.join("|");
        let marks = Marks {
            gpu: last_of(
                format!("max(tlast_over_time(DCGM_FI_DEV_GPU_UTIL{{Hostname=~\"{node_names}\"}}[{LOOKBACK}]))"),
                floor(settings.step_s),
            )
            .await?,
            node: last_of(
                format!(
                    "max(tlast_over_time(ipmi_dcmi_power_consumption_watts{{instance=~\"({node_names}):9290\"}}[{LOOKBACK}]))"
                ),
                floor(NODE_STEP_S),
            )
            .await?,
            ping: last_of(
                format!(
                    "max(tlast_over_time(rpingmesh_probe_total{{source_tor=~\"{}\"}}[{LOOKBACK}]))",
                    racks.join("|")
                ),
                floor(PINGMESH_INTERVAL_S),
            )
            .await?,
        };
        let mut resume = Resume::default();
        for name in COUNTERS {
            let query = format!("last_over_time({name}[{LOOKBACK}])");
            for series in vm.query(&query, at(now)).await.context("reading the counters' last values")? {
                let Some(&(_, value)) = series.points.last() else { continue };
                let labels = series.labels.iter().filter(|(label, _)| label.as_str() != "__name__");
                let key = Resume::key(
                    labels.map(|(label, value)| (label.as_str(), value.as_str())).chain([("__name__", name)]),
                );
                resume.set(key, value);
            }
        }
        tracing::info!(
            cluster,
            history_end = end,
            continued_jobs = timeline.changes(end, timeline.until()).len(),
            counters = resume.len(),
            ?marks,
            "live: history rebuilt"
        );
        let since = timeline.written_until(&pool).await?;
        Ok(Live {
            since,
            settings,
            pool,
            store,
            vm,
            timeline,
            nodes,
            burst_agents,
            paths,
            marks,
            resume,
            gpus_of: BTreeMap::new(),
        })
    }

    /// The latest moment written so far: rows and every family of series are complete up to it.
    pub fn caught_up_to(&self) -> i64 {
        self.since.max(self.marks.gpu).max(self.marks.node).max(self.marks.ping)
    }

    /// Where each family of series ends now.
    pub fn marks(&self) -> Marks {
        self.marks
    }

    /// The continuation's jobs (for tests: planned ends and new submissions).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The GPUs a job holds, once a tick has seen it run.
    pub fn gpus_of(&self, job_id: u32) -> Option<&[(String, u16)]> {
        self.gpus_of.get(&job_id).map(Vec::as_slice)
    }

    /// Writes everything that happened up to `now`: slurmdbd's rows, the GPU records, the samples.
    pub async fn tick(&mut self, now: i64) -> anyhow::Result<TickStats> {
        let mut stats = TickStats::default();
        if now + AHEAD_S / 2 > self.timeline.until() {
            let params = self.settings.shape.params(self.settings.cluster.as_str(), at(self.timeline.history_end()));
            self.timeline = Timeline::load(&self.pool, &params, now + AHEAD_S).await?;
        }
        let since = self.since.max(self.timeline.history_end());
        if now > since {
            stats.rows = self.timeline.write(&self.pool, since, now).await?;
            self.since = now;
        }
        // Samples from the first point of each family's grid after its mark, at most `backfill_s` back.
        let first_after = |mark: i64, step: i64| {
            let oldest = now - self.settings.backfill_s;
            if mark >= oldest { mark + step } else { mark + ((oldest - mark) / step + 1) * step }
        };
        let gpu_from = first_after(self.marks.gpu, self.settings.step_s);
        let node_from = first_after(self.marks.node, NODE_STEP_S);
        let ping_from = first_after(self.marks.ping, PINGMESH_INTERVAL_S);
        let window_from = gpu_from.min(node_from) - NODE_STEP_S;
        let jobs = self.timeline.gpu_jobs_between(window_from, now);
        let (records, ended) = self.place_gpus(&jobs, since, now).await?;
        stats.gpu_records = records;
        stats.ended_records = ended;
        let workloads = self.workloads(&jobs);
        stats.gpu_jobs = jobs.iter().filter(|job| job.t_end > gpu_from && job.t_start <= now).count();
        let seed = |from: i64, base: u64| base ^ (from as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let step_s = self.settings.step_s;
        let mut body = String::new();
        for batch in self.nodes.chunks(10) {
            let relevant: Vec<GpuWorkload> = workloads.iter().filter(|w| batch.contains(&w.node)).cloned().collect();
            if gpu_from <= now {
                let gpus: Vec<(String, u16)> = batch
                    .iter()
                    .flat_map(|node| (0..self.settings.gpus_per_node).map(move |gpu| (node.clone(), gpu)))
                    .collect();
                let (gpu_body, gpu_samples) =
                    gpu_series_resumed(&gpus, &relevant, gpu_from, now, step_s, seed(gpu_from, 11), &self.resume);
                let (rdma_body, rdma_samples, burst_samples) = rdma_series_resumed(
                    batch,
                    &relevant,
                    &self.burst_agents,
                    (gpu_from, now, step_s),
                    seed(gpu_from, 11),
                    &self.resume,
                );
                stats.samples += gpu_samples + rdma_samples + burst_samples;
                body.push_str(&gpu_body);
                body.push_str(&rdma_body);
            }
            if node_from <= now {
                let (node_body, node_samples) = node_series_resumed(
                    batch,
                    self.settings.gpus_per_node,
                    &relevant,
                    node_from - NODE_STEP_S,
                    now,
                    seed(node_from, 17),
                    &self.resume,
                );
                stats.samples += node_samples;
                body.push_str(&node_body);
            }
            import(&self.vm, &mut self.resume, &mut body, false).await?;
        }
        if node_from <= now {
            let (stats_body, samples) =
                job_stats_resumed(&workloads, node_from - NODE_STEP_S, now, seed(node_from, 17), &self.resume);
            stats.samples += samples;
            body.push_str(&stats_body);
        }
        if ping_from <= now {
            let (ping_body, samples) =
                pingmesh_series_resumed(&self.paths, None, ping_from, now, seed(ping_from, 13), &self.resume);
            stats.samples += samples;
            body.push_str(&ping_body);
        }
        import(&self.vm, &mut self.resume, &mut body, true).await?;
        let last_on = |from: i64, step: i64| if from <= now { from + (now - from) / step * step } else { from - step };
        self.marks = Marks {
            gpu: last_on(gpu_from, step_s),
            node: last_on(node_from, NODE_STEP_S),
            ping: last_on(ping_from, PINGMESH_INTERVAL_S),
        };
        Ok(stats)
    }

    /// Gives the GPU jobs of the window their GPUs: the ones the plugin recorded, else the lowest indices
    /// free on each node when the job starts, recorded as the plugin would. Ends the records of jobs that
    /// ended in `(since, now]`. Returns the records written and the jobs ended.
    async fn place_gpus(&mut self, jobs: &[LiveJob], since: i64, now: i64) -> anyhow::Result<(usize, usize)> {
        // The store reads a job's records within its run: from its start on (it may still run).
        let unknown: Vec<(u32, RunWindow)> = jobs
            .iter()
            .filter(|job| !self.gpus_of.contains_key(&job.id_job))
            .filter_map(|job| {
                let start = DateTime::from_timestamp(job.t_start, 0).filter(|_| job.t_start > 0)?;
                Some((job.id_job, RunWindow { start, end: None }))
            })
            .collect();
        if let Some(store) = &self.store {
            for (job_id, node, index) in store.gpu_indices_among(&self.settings.cluster, &unknown).await? {
                self.gpus_of.entry(job_id).or_default().push((node, index));
            }
        }
        let mut sorted: Vec<&LiveJob> = jobs.iter().collect();
        sorted.sort_by_key(|job| (job.t_start, job.id_job));
        let mut records = Vec::new();
        for job in sorted {
            // A job that started by `since` was placed by an earlier tick, of this run or a previous
            // one (or by the seeder): what the store holds for it is its placement, even none (its
            // node had no GPU free then). Placing it again after a restart would write it twice.
            if self.gpus_of.contains_key(&job.id_job) || job.t_start > now || job.t_start <= since {
                continue;
            }
            let per_node = (job.gpus_per_node as u16).min(self.settings.gpus_per_node);
            let mut given = Vec::new();
            for node in &job.nodes {
                let held: BTreeSet<u16> = jobs
                    .iter()
                    .filter(|other| other.t_start <= job.t_start && other.t_end > job.t_start)
                    .filter_map(|other| self.gpus_of.get(&other.id_job))
                    .flatten()
                    .filter(|(other_node, _)| other_node == node)
                    .map(|&(_, index)| index)
                    .collect();
                let free = (0..self.settings.gpus_per_node).filter(|index| !held.contains(index));
                given.extend(free.take(usize::from(per_node)).map(|index| (node.clone(), index)));
            }
            for (node, index) in &given {
                records.push(GpuAllocation {
                    job_id: job.id_job,
                    step: "job".into(),
                    gpu: GpuRef { node: node.clone(), index: *index },
                    uuid: Some(gpu_uuid(node, *index)),
                    cgroup_path: None,
                    first_seen: at(job.t_start),
                    last_seen: at(job.t_end.min(now)),
                    ended_at: (job.t_end <= now).then(|| at(job.t_end)),
                });
            }
            self.gpus_of.insert(job.id_job, given);
        }
        let mut ended = 0;
        if let Some(store) = &self.store {
            store.upsert_gpu_allocations(&self.settings.cluster, &records).await?;
            for job in jobs.iter().filter(|job| since < job.t_end && job.t_end <= now) {
                ended += usize::from(store.end_job(&self.settings.cluster, job.id_job, at(job.t_end)).await? > 0);
            }
        }
        Ok((records.len(), ended))
    }

    /// The workloads of the jobs' GPUs, shaped like the seeded ones (same profile per job).
    fn workloads(&self, jobs: &[LiveJob]) -> Vec<GpuWorkload> {
        jobs.iter()
            .flat_map(|job| {
                let profile = profile_for(&job.job_name, job.id_job, job.nodes.len() > 1);
                self.gpus_of.get(&job.id_job).into_iter().flatten().map(move |(node, gpu)| GpuWorkload {
                    node: node.clone(),
                    gpu: *gpu,
                    job_id: job.id_job,
                    start: job.t_start,
                    end: job.t_end,
                    profile,
                    multi_node: job.nodes.len() > 1,
                    degraded: None,
                })
            })
            .collect()
    }
}

/// Imports `body` once it is large (or when `flush`), then remembers its counters' last values.
async fn import(vm: &VictoriaMetrics, resume: &mut Resume, body: &mut String, flush: bool) -> anyhow::Result<()> {
    if body.is_empty() || (!flush && body.len() < 8 << 20) {
        return Ok(());
    }
    let sent = std::mem::take(body);
    vm.import_json_lines(sent.clone()).await.context("importing live telemetry")?;
    resume.absorb_json_lines(&sent);
    Ok(())
}

fn at(t: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(t, 0).unwrap_or_default()
}
