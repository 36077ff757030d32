//! CUDA and NCCL activity from eBPF uprobes, with no change to tenants' code: the libraries each process
//! maps are found in `/proc/PID/maps` and probed once per file; every interval the kernel's summaries per
//! (cgroup, process, device, category, name) become the server's trace records, attributed to the Slurm
//! job through the process's cgroup, spooled and posted to `POST /api/v1/traces`.
//!
//! What the API layer sees is host-side: kernel launches are counted where they are enqueued (never
//! timed on the GPU), synchronous copies and synchronisation calls are timed on the host, NCCL calls
//! are counted with their bytes. GPU-side activity comes from DCGM.

pub mod probes;
pub mod procs;
pub mod spool;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use slurmlens_plugin_core::http::Endpoint;
use slurmlens_wire::{TraceBatch, TraceCategory, TraceRecord};

use crate::config::{Config, CudaConfig};
use crate::metrics::{Exporter, Parts};
use probes::{CAT_KERNEL, CAT_MEMCPY, CAT_NCCL, CAT_SYNC, Entry, NCCL_OPS, Probes, SYNC_CALLS};
use procs::{JobOf, Library, Mapping, Symbolizer};

/// The part's own counts, on `/metrics`.
#[derive(Debug, Default)]
pub struct CudaStats {
    libraries: AtomicU64,
    probes: AtomicU64,
    processes: AtomicU64,
    events: AtomicU64,
    records: AtomicU64,
    unattributed: AtomicU64,
    dropped: AtomicU64,
    batches_sent: AtomicU64,
    batches_refused: AtomicU64,
    spool_bytes: AtomicU64,
}

impl Exporter for CudaStats {
    fn render(&self, out: &mut String) {
        let series: [(&str, &str, &AtomicU64, &str); 10] = [
            ("slurmlens_agent_cuda_libraries", "gauge", &self.libraries, "CUDA runtime and NCCL library files probed."),
            ("slurmlens_agent_cuda_probes", "gauge", &self.probes, "Uprobes attached."),
            (
                "slurmlens_agent_cuda_processes",
                "gauge",
                &self.processes,
                "Processes mapping a probed library at the last scan.",
            ),
            ("slurmlens_agent_cuda_events_total", "counter", &self.events, "Calls counted by the uprobes."),
            ("slurmlens_agent_cuda_records_total", "counter", &self.records, "Trace records made."),
            (
                "slurmlens_agent_cuda_unattributed_total",
                "counter",
                &self.unattributed,
                "Summaries of processes outside any Slurm job, or of memcpy kinds without a direction.",
            ),
            (
                "slurmlens_agent_cuda_dropped_total",
                "counter",
                &self.dropped,
                "Summaries lost because the kernel's map was full.",
            ),
            (
                "slurmlens_agent_trace_batches_sent_total",
                "counter",
                &self.batches_sent,
                "Trace batches the server took.",
            ),
            (
                "slurmlens_agent_trace_batches_refused_total",
                "counter",
                &self.batches_refused,
                "Trace batches the server refused (400).",
            ),
            (
                "slurmlens_agent_trace_spool_bytes",
                "gauge",
                &self.spool_bytes,
                "Bytes of trace batches waiting in the spool.",
            ),
        ];
        for (name, kind, value, help) in series {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", value.load(Ordering::Relaxed));
        }
    }
}

/// Loads the probes on their own thread (libbpf's object stays there) and runs the part; `None` with
/// the reason on `/metrics` where BPF is unavailable.
pub fn start(config: &Config, node: &str, parts: &Arc<Parts>) -> Option<Arc<dyn Exporter>> {
    if !config.cuda.enabled {
        parts.set("cuda", false, "disabled in the configuration");
        return None;
    }
    let secret = match &config.cuda.secret_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => text.trim().to_string(),
            Err(error) => {
                parts.set("cuda", false, format!("secret_file {}: {error}", path.display()));
                return None;
            }
        },
        None => String::new(),
    };
    let endpoint = if config.cuda.server.is_empty() {
        None
    } else {
        match Endpoint::parse(&config.cuda.server) {
            Ok(endpoint) => Some(endpoint),
            Err(error) => {
                parts.set("cuda", false, format!("server: {error}"));
                return None;
            }
        }
    };
    let stats = Arc::new(CudaStats::default());
    let (loaded_tx, loaded_rx) = std::sync::mpsc::channel();
    let worker = Worker {
        config: config.cuda.clone(),
        cluster: config.cluster.clone(),
        node: node.to_string(),
        stats: Arc::clone(&stats),
        parts: Arc::clone(parts),
        endpoint,
        secret,
    };
    let spawned = std::thread::Builder::new().name("cuda-probes".into()).spawn(move || match Probes::load() {
        Ok(probes) => {
            let _ = loaded_tx.send(Ok(()));
            worker.run(probes);
        }
        Err(why) => {
            let _ = loaded_tx.send(Err(why));
        }
    });
    let outcome = match spawned {
        Ok(_) => loaded_rx.recv().unwrap_or_else(|_| Err("the probe thread ended".into())),
        Err(error) => Err(error.to_string()),
    };
    match outcome {
        Ok(()) => {
            parts.set("cuda", true, "BPF loaded; waiting for processes that map the CUDA runtime or NCCL");
            Some(stats)
        }
        Err(why) => {
            parts.set(
                "cuda",
                false,
                format!("BPF unavailable ({why}): needs CAP_BPF, CAP_PERFMON and a kernel with uprobes"),
            );
            None
        }
    }
}

/// A process that maps a probed library: its job and its executable mappings, read while it runs (it
/// may end before its interval is summarised).
struct Tracked {
    job: Option<JobOf>,
    mappings: Vec<Mapping>,
}

struct Worker {
    config: CudaConfig,
    cluster: String,
    node: String,
    stats: Arc<CudaStats>,
    parts: Arc<Parts>,
    endpoint: Option<Endpoint>,
    secret: String,
}

impl Worker {
    fn run(self, mut probes: Probes) {
        let spool = spool::Spool::new(&self.config.spool_dir, self.config.spool_max_bytes);
        let (wake, woken) = std::sync::mpsc::channel();
        if let Some(endpoint) = self.endpoint.clone() {
            let (spool, secret, stats) = (spool.clone(), self.secret.clone(), Arc::clone(&self.stats));
            let every = Duration::from_secs(u64::from(self.config.interval_s));
            let spawned = std::thread::Builder::new()
                .name("trace-delivery".into())
                .spawn(move || deliver_forever(spool, endpoint, secret, stats, woken, every));
            if let Err(error) = spawned {
                tracing::warn!("no delivery thread ({error}): trace batches stay in the spool");
            }
        }
        let mut jobs: HashMap<u32, Tracked> = HashMap::new();
        let mut symbolizer = Symbolizer::default();
        let scan_every = Duration::from_millis(self.config.scan_interval_ms);
        let interval = i64::from(self.config.interval_s);
        let mut interval_end = next_boundary(Utc::now(), interval);
        loop {
            let scanned = Instant::now();
            self.scan(&mut probes, &mut jobs);
            let now = Utc::now();
            if now >= interval_end {
                let start = interval_end - chrono::Duration::seconds(interval);
                match probes.drain() {
                    Ok(entries) => {
                        let records = self.records(&entries, start, &mut jobs, &mut symbolizer);
                        self.stats.records.fetch_add(records.len() as u64, Ordering::Relaxed);
                        let node_of = |pid: u32| jobs.get(&pid)?.job.as_ref()?.node.clone();
                        for (node, records) in by_node(records, node_of, &self.node) {
                            self.spool(&spool, &node, records, &wake);
                        }
                    }
                    Err(why) => tracing::warn!("reading the uprobes' summaries: {why}"),
                }
                self.stats.dropped.store(probes.dropped(), Ordering::Relaxed);
                // Bounded memory: forget processes that ended and symbol tables between intervals.
                jobs.retain(|pid, _| self.config.proc_root.join(pid.to_string()).exists());
                symbolizer.clear();
                interval_end = next_boundary(now, interval);
            }
            std::thread::sleep(scan_every.saturating_sub(scanned.elapsed()));
        }
    }

    /// Finds processes that map the libraries: probes new library files, remembers each process's job
    /// while it is alive (it may end before its interval is summarised).
    fn scan(&self, probes: &mut Probes, jobs: &mut HashMap<u32, Tracked>) {
        let mut processes = 0;
        let mut libraries = BTreeSet::new();
        let pids = std::fs::read_dir(&self.config.proc_root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok());
        for pid in pids {
            let Ok(maps) = std::fs::read_to_string(self.config.proc_root.join(format!("{pid}/maps"))) else { continue };
            let found = procs::libraries(&maps, &self.config.cudart_names, &self.config.nccl_names);
            if found.is_empty() {
                continue;
            }
            processes += 1;
            let mappings = procs::executable_mappings(&maps);
            match jobs.get_mut(&pid) {
                Some(tracked) => tracked.mappings = mappings,
                None => {
                    jobs.insert(pid, Tracked { job: procs::job_of(&self.config.proc_root, pid), mappings });
                }
            }
            for (library, path) in found {
                libraries.insert(path.clone());
                if probes.attached.contains_key(&path) {
                    continue;
                }
                let attach_path = attach_path(&self.config.proc_root, pid, &path);
                let count = probes.attach(library, &path, &attach_path);
                let kind = if library == Library::Nccl { "NCCL" } else { "CUDA runtime" };
                if count == 0 {
                    tracing::warn!(pid, path, "{kind}: none of the probed functions could be attached");
                } else {
                    tracing::info!(pid, path, probes = count, "{kind} probed");
                }
                self.parts.set(
                    "cuda",
                    true,
                    format!("{} library files probed ({} uprobes)", probes.attached.len(), probes.links()),
                );
            }
        }
        self.stats.processes.store(processes, Ordering::Relaxed);
        self.stats.libraries.store(probes.attached.len() as u64, Ordering::Relaxed);
        self.stats.probes.store(probes.links() as u64, Ordering::Relaxed);
    }

    fn records(
        &self,
        entries: &[Entry],
        start: DateTime<Utc>,
        jobs: &mut HashMap<u32, Tracked>,
        symbolizer: &mut Symbolizer,
    ) -> Vec<TraceRecord> {
        let proc_root = &self.config.proc_root;
        let events: u64 = entries.iter().map(|entry| entry.count).sum();
        self.stats.events.fetch_add(events, Ordering::Relaxed);
        // A process seen only now (it started and ended between two scans) is read now, if it still runs.
        for entry in entries {
            jobs.entry(entry.pid).or_insert_with(|| {
                let maps = std::fs::read_to_string(proc_root.join(format!("{}/maps", entry.pid))).unwrap_or_default();
                Tracked { job: procs::job_of(proc_root, entry.pid), mappings: procs::executable_mappings(&maps) }
            });
        }
        let jobs = &*jobs;
        let mut job_of = |pid: u32| jobs.get(&pid).and_then(|tracked| tracked.job.clone());
        let mut name_of = |pid: u32, address: u64| {
            let tracked = jobs.get(&pid)?;
            symbolizer.name(proc_root, pid, &tracked.mappings, address)
        };
        let (records, unattributed) = summarise(entries, start, self.config.interval_s, &mut job_of, &mut name_of);
        self.stats.unattributed.fetch_add(unattributed, Ordering::Relaxed);
        records
    }

    /// Writes the interval's records into the spool and wakes the deliverer.
    fn spool(&self, spool: &spool::Spool, node: &str, records: Vec<TraceRecord>, wake: &std::sync::mpsc::Sender<()>) {
        for chunk in records.chunks(spool::BATCH_RECORDS) {
            let batch = TraceBatch { cluster: self.cluster.clone(), node: node.to_string(), records: chunk.to_vec() };
            match spool.push(&batch) {
                Ok(0) => {}
                Ok(dropped) => tracing::warn!(dropped, "the trace spool is full: its oldest batches were dropped"),
                Err(error) => tracing::warn!("spooling a trace batch: {error}"),
            }
        }
        let _ = wake.send(());
        self.stats.spool_bytes.store(spool.bytes(), Ordering::Relaxed);
    }
}

/// Sends the spool to the server on its own thread, when woken and at least every `every`: a server that
/// hangs delays delivery, never the intervals' summaries.
fn deliver_forever(
    spool: spool::Spool,
    endpoint: Endpoint,
    secret: String,
    stats: Arc<CudaStats>,
    wake: std::sync::mpsc::Receiver<()>,
    every: Duration,
) {
    let mut failing = false;
    loop {
        if let Err(std::sync::mpsc::RecvTimeoutError::Disconnected) = wake.recv_timeout(every) {
            return;
        }
        let report = spool.deliver(&endpoint, &secret);
        stats.batches_sent.fetch_add(report.sent as u64, Ordering::Relaxed);
        stats.batches_refused.fetch_add(report.refused as u64, Ordering::Relaxed);
        stats.spool_bytes.store(spool.bytes(), Ordering::Relaxed);
        match (&report.failure, failing) {
            (Some(why), false) => {
                tracing::warn!(
                    left = report.left,
                    "the server did not take trace batches ({why}): they wait in the spool"
                )
            }
            (None, true) => tracing::info!(sent = report.sent, "the server takes trace batches again"),
            _ => {}
        }
        failing = report.failure.is_some();
    }
}

/// The file to probe for `path` as process `pid` maps it: the path itself where it names the same file
/// here (no ptrace access needed), else the file through the process's root (another mount namespace).
fn attach_path(proc_root: &std::path::Path, pid: u32, path: &str) -> std::path::PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    let through_root = proc_root.join(format!("{pid}/root{path}"));
    let same = |a: &std::fs::Metadata, b: &std::fs::Metadata| (a.dev(), a.ino()) == (b.dev(), b.ino());
    match (std::fs::metadata(path), std::fs::metadata(&through_root)) {
        (Ok(here), Ok(there)) if same(&here, &there) => std::path::PathBuf::from(path),
        _ => through_root,
    }
}

/// The first multiple of `interval_s` seconds after `now` (intervals start on whole seconds).
fn next_boundary(now: DateTime<Utc>, interval_s: i64) -> DateTime<Utc> {
    let next = (now.timestamp() / interval_s + 1) * interval_s;
    DateTime::from_timestamp(next, 0).unwrap_or(now)
}

/// Records by the node their process runs on: its `SLURMD_NODENAME` (`node_of`), else the agent's node.
/// One host running several slurmd (Slurm's multiple-slurmd mode, the lab) is served by one agent.
pub fn by_node(
    records: Vec<TraceRecord>,
    node_of: impl Fn(u32) -> Option<String>,
    own: &str,
) -> std::collections::BTreeMap<String, Vec<TraceRecord>> {
    let mut grouped: std::collections::BTreeMap<String, Vec<TraceRecord>> = std::collections::BTreeMap::new();
    for record in records {
        grouped.entry(node_of(record.pid).unwrap_or_else(|| own.to_string())).or_default().push(record);
    }
    grouped
}

/// The server's `cudaMemcpyKind` words (`cudaMemcpyHostToHost` 0 and `cudaMemcpyDefault` 4 have no direction).
fn memcpy_kind(kind: u64) -> Option<&'static str> {
    match kind {
        1 => Some("HtoD"),
        2 => Some("DtoH"),
        3 => Some("DtoD"),
        _ => None,
    }
}

/// The interval's kernel summaries as trace records: each process's job (`job_of`), kernels named from
/// their host stubs (`name_of`, else the address). Returns the records and the summaries left out
/// (no Slurm job, or a copy without direction).
pub fn summarise(
    entries: &[Entry],
    start: DateTime<Utc>,
    interval_s: u32,
    job_of: &mut dyn FnMut(u32) -> Option<JobOf>,
    name_of: &mut dyn FnMut(u32, u64) -> Option<String>,
) -> (Vec<TraceRecord>, u64) {
    let mut records: Vec<TraceRecord> = Vec::new();
    let mut unattributed = 0;
    for entry in entries.iter().filter(|entry| entry.count > 0) {
        let Some(job) = job_of(entry.pid) else {
            unattributed += 1;
            continue;
        };
        let (category, name) = match entry.category {
            CAT_KERNEL => {
                (TraceCategory::Kernel, name_of(entry.pid, entry.name).unwrap_or_else(|| format!("{:#x}", entry.name)))
            }
            CAT_MEMCPY => match memcpy_kind(entry.name) {
                Some(kind) => (TraceCategory::Memcpy, kind.to_string()),
                None => {
                    unattributed += 1;
                    continue;
                }
            },
            CAT_SYNC => match SYNC_CALLS.iter().find(|(cookie, _)| *cookie == entry.name) {
                Some((_, call)) => (TraceCategory::Sync, (*call).to_string()),
                None => continue,
            },
            CAT_NCCL => match NCCL_OPS.get(entry.name as usize) {
                Some(op) => (TraceCategory::Nccl, (*op).to_string()),
                None => continue,
            },
            _ => continue,
        };
        let record = TraceRecord {
            interval_start: start,
            interval_s,
            gpu: job.gpu(entry.device),
            pid: entry.pid,
            cgroup: job.cgroup.clone(),
            job_id: job.job_id,
            category: category.as_str().into(),
            name,
            count: entry.count,
            total_ns: entry.total_ns,
            max_ns: entry.max_ns.min(entry.total_ns),
            bytes: entry.bytes,
        };
        // Two devices of one process numbered alike by Slurm, or two stubs of one name: one record.
        match records
            .iter_mut()
            .find(|r| (r.pid, r.gpu, &r.category, &r.name) == (record.pid, record.gpu, &record.category, &record.name))
        {
            Some(existing) => {
                existing.count += record.count;
                existing.total_ns += record.total_ns;
                existing.max_ns = existing.max_ns.max(record.max_ns);
                existing.bytes += record.bytes;
            }
            None => records.push(record),
        }
    }
    (records, unattributed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32, device: u32, category: u32, name: u64, count: u64, total_ns: u64, bytes: u64) -> Entry {
        Entry { cgroup: 1, pid, device, category, name, count, total_ns, max_ns: total_ns, bytes }
    }

    #[test]
    fn summaries_become_the_servers_records_for_each_job_and_gpu() {
        let start = DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
        let entries = [
            entry(10, 1, CAT_KERNEL, 0x1234, 7, 0, 0),
            entry(10, 1, CAT_MEMCPY, 1, 3, 900, 3 << 20),
            entry(10, 0, CAT_SYNC, 2, 2, 500, 0),
            entry(10, 1, CAT_NCCL, 0, 4, 100, 4096),
            entry(11, 0, CAT_MEMCPY, 4, 1, 0, 10),
            entry(99, 0, CAT_KERNEL, 0x1, 1, 0, 0),
        ];
        let mut job_of = |pid: u32| {
            (pid != 99).then(|| JobOf {
                cgroup: Some(format!("/slurm_n1/uid_1001/job_{pid}/step_0/task_0")),
                job_id: Some(pid),
                gpus: vec![2, 3],
                node: None,
            })
        };
        let mut name_of = |_pid: u32, address: u64| (address == 0x1234).then(|| "vector_add".to_string());
        let (records, unattributed) = summarise(&entries, start, 10, &mut job_of, &mut name_of);
        assert_eq!(unattributed, 2, "the process outside a job and the copy without direction");
        let summary: Vec<(u32, u16, &str, &str, u64, u64)> =
            records.iter().map(|r| (r.pid, r.gpu, r.category.as_str(), r.name.as_str(), r.count, r.bytes)).collect();
        assert_eq!(
            summary,
            [
                (10, 3, "kernel", "vector_add", 7, 0),
                (10, 3, "memcpy", "HtoD", 3, 3 << 20),
                (10, 2, "sync", "cudaStreamSynchronize", 2, 0),
                (10, 3, "nccl", "AllReduce", 4, 4096),
            ]
        );
        assert!(records.iter().all(|r| r.interval_start == start && r.interval_s == 10 && r.job_id == Some(10)));
        // Process 10 runs under the host's second slurmd: its records go in n2's batch.
        let grouped = by_node(records, |pid| (pid == 10).then(|| "n2".to_string()), "n1");
        assert_eq!(grouped.keys().collect::<Vec<_>>(), ["n2"]);
        assert_eq!(grouped["n2"].len(), 4);
    }

    #[test]
    fn intervals_end_on_multiples_of_their_length() {
        let now = DateTime::from_timestamp(1_700_000_003, 500_000_000).expect("a time");
        assert_eq!(next_boundary(now, 10).timestamp(), 1_700_000_010);
    }
}
