//! The BPF side through libbpf: the embedded object (`src/bpf/cuda.bpf.c`, compiled by build.rs),
//! attached once per library file (every process mapping it is traced from then on), and the interval's
//! summaries read out of the kernel's map by flipping its epoch.

use std::collections::BTreeMap;
use std::time::Duration;

use libbpf_rs::{Link, MapCore as _, MapFlags, Object, ObjectBuilder, UprobeOpts};

use super::procs::Library;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuda.bpf.o"));

/// Categories as the BPF side numbers them.
pub const CAT_KERNEL: u32 = 1;
pub const CAT_MEMCPY: u32 = 2;
pub const CAT_SYNC: u32 = 3;
pub const CAT_NCCL: u32 = 4;

/// The synchronisation calls by the cookie their probe carries.
pub const SYNC_CALLS: [(u64, &str); 3] =
    [(1, "cudaDeviceSynchronize"), (2, "cudaStreamSynchronize"), (3, "cudaEventSynchronize")];

/// NCCL operations by the cookie their probe carries (the server's spelling).
pub const NCCL_OPS: [&str; 7] = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv"];

/// One probe: a BPF program on a library's function.
struct Hook {
    program: &'static str,
    function: &'static str,
    retprobe: bool,
    cookie: u64,
}

const fn hook(program: &'static str, function: &'static str, retprobe: bool, cookie: u64) -> Hook {
    Hook { program, function, retprobe, cookie }
}

const CUDA_HOOKS: [Hook; 14] = [
    hook("launch_kernel", "cudaLaunchKernel", false, 0),
    hook("launch_kernel", "cudaLaunchKernel_ptsz", false, 0),
    hook("memcpy_enter", "cudaMemcpy", false, 0),
    hook("memcpy_exit", "cudaMemcpy", true, 0),
    hook("memcpy_async", "cudaMemcpyAsync", false, 0),
    hook("memcpy_async", "cudaMemcpyAsync_ptsz", false, 0),
    hook("sync_enter", "cudaDeviceSynchronize", false, 1),
    hook("sync_exit", "cudaDeviceSynchronize", true, 1),
    hook("sync_enter", "cudaStreamSynchronize", false, 2),
    hook("sync_exit", "cudaStreamSynchronize", true, 2),
    hook("sync_enter", "cudaEventSynchronize", false, 3),
    hook("sync_exit", "cudaEventSynchronize", true, 3),
    hook("set_device_enter", "cudaSetDevice", false, 0),
    hook("set_device_exit", "cudaSetDevice", true, 0),
];

const NCCL_HOOKS: [Hook; 14] = [
    hook("nccl_collective", "ncclAllReduce", false, 0),
    hook("nccl_exit", "ncclAllReduce", true, 0),
    hook("nccl_collective", "ncclAllGather", false, 1),
    hook("nccl_exit", "ncclAllGather", true, 1),
    hook("nccl_collective", "ncclReduceScatter", false, 2),
    hook("nccl_exit", "ncclReduceScatter", true, 2),
    hook("nccl_collective", "ncclBroadcast", false, 3),
    hook("nccl_exit", "ncclBroadcast", true, 3),
    hook("nccl_collective", "ncclReduce", false, 4),
    hook("nccl_exit", "ncclReduce", true, 4),
    hook("nccl_p2p", "ncclSend", false, 5),
    hook("nccl_exit", "ncclSend", true, 5),
    hook("nccl_p2p", "ncclRecv", false, 6),
    hook("nccl_exit", "ncclRecv", true, 6),
];

/// One summary of the kernel's map: its key and what it counted in the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Entry {
    pub cgroup: u64,
    pub pid: u32,
    pub device: u32,
    pub category: u32,
    pub name: u64,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub bytes: u64,
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes)
}

/// The loaded BPF object and its attachments.
pub struct Probes {
    object: Object,
    links: Vec<Link>,
    /// Library file → probes attached on it.
    pub attached: BTreeMap<String, usize>,
    epoch: u32,
}

impl Probes {
    /// Loads the object into the kernel (needs CAP_BPF and CAP_PERFMON, or root).
    pub fn load() -> Result<Self, String> {
        // libbpf's own messages (a function an older library lacks, …) go to the log at debug level.
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, |_, message| {
            tracing::debug!("libbpf: {}", message.trim_end())
        })));
        let open = ObjectBuilder::default().open_memory(OBJECT).map_err(|e| format!("opening the BPF object: {e}"))?;
        let object = open.load().map_err(|e| format!("loading the BPF programs: {e}"))?;
        Ok(Self { object, links: Vec::new(), attached: BTreeMap::new(), epoch: 0 })
    }

    /// Attaches `library`'s probes to the file at `path` once; the number of probes attached (0: none of
    /// its functions are there).
    pub fn attach(&mut self, library: Library, path: &str, attach_path: &std::path::Path) -> usize {
        if let Some(&count) = self.attached.get(path) {
            return count;
        }
        let hooks: &[Hook] = match library {
            Library::CudaRuntime => &CUDA_HOOKS,
            Library::Nccl => &NCCL_HOOKS,
        };
        let mut count = 0;
        for hook in hooks {
            let Some(program) = self.object.progs_mut().find(|p| p.name() == hook.program) else { continue };
            let opts = UprobeOpts {
                func_name: Some(hook.function.to_string()),
                retprobe: hook.retprobe,
                cookie: hook.cookie,
                ..UprobeOpts::default()
            };
            // A function the library does not define (an older release) is simply not probed.
            if let Ok(link) = program.attach_uprobe_with_opts(-1, attach_path, 0, opts) {
                self.links.push(link);
                count += 1;
            }
        }
        self.attached.insert(path.to_string(), count);
        count
    }

    /// Probes attached in all.
    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// Ends the interval: new events go to the other epoch, and this one's summaries are read and removed.
    pub fn drain(&mut self) -> Result<Vec<Entry>, String> {
        let ended = self.epoch;
        self.epoch ^= 1;
        let epoch_map = self.map("epoch")?;
        epoch_map
            .update(&0u32.to_le_bytes(), &self.epoch.to_le_bytes(), MapFlags::ANY)
            .map_err(|e| format!("flipping the epoch: {e}"))?;
        // A probe that read the old epoch just before the flip finishes within microseconds.
        std::thread::sleep(Duration::from_millis(5));
        let stats = self.map("stats")?;
        let mut entries = Vec::new();
        // Keys first: deleting while walking would restart the walk at the map's first key.
        let keys: Vec<Vec<u8>> = stats.keys().collect();
        for key in keys {
            if u32_at(&key, 20) != ended {
                continue;
            }
            if let Ok(Some(value)) = stats.lookup(&key, MapFlags::ANY) {
                entries.push(Entry {
                    cgroup: u64_at(&key, 0),
                    pid: u32_at(&key, 8),
                    device: u32_at(&key, 12),
                    category: u32_at(&key, 16),
                    name: u64_at(&key, 24),
                    count: u64_at(&value, 0),
                    total_ns: u64_at(&value, 8),
                    max_ns: u64_at(&value, 16),
                    bytes: u64_at(&value, 24),
                });
            }
            let _ = stats.delete(&key);
        }
        Ok(entries)
    }

    /// Summaries lost because the kernel's map was full.
    pub fn dropped(&self) -> u64 {
        self.map("dropped")
            .ok()
            .and_then(|map| map.lookup(&0u32.to_le_bytes(), MapFlags::ANY).ok().flatten())
            .map_or(0, |value| u64_at(&value, 0))
    }

    fn map(&self, name: &str) -> Result<libbpf_rs::Map<'_>, String> {
        self.object.maps().find(|map| map.name() == name).ok_or_else(|| format!("the BPF object has no map {name}"))
    }
}
