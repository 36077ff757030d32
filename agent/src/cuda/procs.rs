//! What `/proc` says about a traced process: the CUDA and NCCL libraries it maps (wherever they are,
//! as a pip wheel puts them), its Slurm job (cgroup path and `SLURM_JOB_ID`), how its CUDA device
//! numbers map to Slurm's GPU indices, and the names of kernels' host stubs in its executable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Which library a mapping is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Library {
    CudaRuntime,
    Nccl,
}

/// `file` is `<name>.so…` or `<name>-<hash>.so…` (a wheel's vendored copy, `libcudart-d0da41ae.so.11.0`).
pub fn is_library(file: &str, name: &str) -> bool {
    file.strip_prefix(name)
        .is_some_and(|rest| (rest.starts_with(".so") || rest.starts_with('-')) && rest.contains(".so"))
}

/// One file-backed mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

/// The executable file-backed mappings of a `/proc/PID/maps` text, kept to name kernels' host stubs
/// after the process ended.
pub fn executable_mappings(maps: &str) -> Vec<Mapping> {
    maps.lines()
        .filter(|line| line.split(' ').nth(1).is_some_and(|perms| perms.contains('x')))
        .flat_map(mappings)
        .map(|(start, end, offset, path)| Mapping { start, end, offset, path: path.to_string() })
        .collect()
}

/// The file-backed mappings of a `/proc/PID/maps` text: (start, end, file offset, path).
pub fn mappings(maps: &str) -> Vec<(u64, u64, u64, &str)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (range, _perms, offset, _dev, _inode) =
                (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
            let path = fields.next()?.trim_start();
            if !path.starts_with('/') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let hex = |text: &str| u64::from_str_radix(text, 16).ok();
            Some((hex(start)?, hex(end)?, hex(offset)?, path))
        })
        .collect()
}

/// The CUDA runtime and NCCL libraries `maps` shows, by kind, each path once.
pub fn libraries(maps: &str, cudart: &[String], nccl: &[String]) -> Vec<(Library, String)> {
    let mut found: Vec<(Library, String)> = Vec::new();
    for (_, _, _, path) in mappings(maps) {
        let file = path.rsplit('/').next().unwrap_or(path);
        let kind = if cudart.iter().any(|name| is_library(file, name)) {
            Library::CudaRuntime
        } else if nccl.iter().any(|name| is_library(file, name)) {
            Library::Nccl
        } else {
            continue;
        };
        if !found.iter().any(|(_, seen)| seen == path) {
            found.push((kind, path.to_string()));
        }
    }
    found
}

/// A process's Slurm job as the server reads it, and its GPUs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobOf {
    /// The Slurm job's cgroup path (v1 or v2, job id or SLUID-named).
    pub cgroup: Option<String>,
    /// `SLURM_JOB_ID` of the process (needed beside a SLUID-named cgroup).
    pub job_id: Option<u32>,
    /// Slurm's GPU index of each CUDA device number (index = device number).
    pub gpus: Vec<u16>,
    /// `SLURMD_NODENAME` of the process: the node, where one host runs several slurmd (the lab).
    pub node: Option<String>,
}

impl JobOf {
    /// Slurm's GPU index of CUDA device `device`: through the process's visible devices, else the number.
    pub fn gpu(&self, device: u32) -> u16 {
        self.gpus.get(device as usize).copied().unwrap_or(device as u16)
    }
}

/// The job cgroup among `/proc/PID/cgroup`'s lines: a v1 `…/job_<id>…` or a v2 `slurmstepd.scope/…` path.
pub fn job_cgroup(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        let slurm = path.split('/').any(|segment| segment.starts_with("job_"))
            || path.split('/').any(|segment| segment.ends_with("slurmstepd.scope"));
        (slurm && path.split('/').count() > 2).then(|| path.to_string())
    })
}

/// The variables of a `/proc/PID/environ` (NUL-separated).
pub fn environ(raw: &[u8]) -> HashMap<String, String> {
    raw.split(|&b| b == 0)
        .filter_map(|entry| {
            let text = std::str::from_utf8(entry).ok()?;
            let (name, value) = text.split_once('=')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

fn numbers(text: &str) -> Option<Vec<u16>> {
    text.split(',').map(|n| n.trim().parse().ok()).collect()
}

/// Slurm's GPU index of each CUDA device number. `CUDA_VISIBLE_DEVICES` holds Slurm's indices where
/// devices are not constrained, positions into the step's GPUs (`SLURM_STEP_GPUS`/`SLURM_JOB_GPUS`) where
/// cgroups hide the others and renumber from 0.
pub fn gpu_map(env: &HashMap<String, String>) -> Vec<u16> {
    let visible = env.get("CUDA_VISIBLE_DEVICES").and_then(|text| numbers(text));
    let slurm = env.get("SLURM_STEP_GPUS").or_else(|| env.get("SLURM_JOB_GPUS")).and_then(|text| numbers(text));
    match (visible, slurm) {
        (Some(visible), Some(slurm)) if visible != slurm && visible.iter().all(|&v| (v as usize) < slurm.len()) => {
            visible.iter().map(|&v| slurm[v as usize]).collect()
        }
        (Some(visible), _) => visible,
        (None, Some(slurm)) => slurm,
        (None, None) => Vec::new(),
    }
}

/// Reads `pid`'s job and GPUs under `proc_root`; `None` when it is gone or outside any Slurm job.
pub fn job_of(proc_root: &Path, pid: u32) -> Option<JobOf> {
    let dir = proc_root.join(pid.to_string());
    let cgroup = std::fs::read_to_string(dir.join("cgroup")).ok().and_then(|text| job_cgroup(&text));
    let env = std::fs::read(dir.join("environ")).map(|raw| environ(&raw)).unwrap_or_default();
    let job_id = env.get("SLURM_JOB_ID").and_then(|id| id.parse().ok());
    if cgroup.is_none() && job_id.is_none() {
        return None;
    }
    Some(JobOf { cgroup, job_id, gpus: gpu_map(&env), node: env.get("SLURMD_NODENAME").cloned() })
}

/// Function symbols of one ELF file by file offset, for naming kernels' host stubs.
#[derive(Debug, Default)]
pub struct Symbols {
    /// (file offset, size, name), sorted.
    by_offset: Vec<(u64, u64, String)>,
}

impl Symbols {
    /// Reads `path`'s symbol table (and dynamic symbols), placing each function at its file offset.
    pub fn read(path: &Path) -> Option<Self> {
        use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let segments: Vec<(u64, u64, u64)> =
            file.segments().map(|segment| (segment.address(), segment.size(), segment.file_range().0)).collect();
        let mut by_offset: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|symbol| symbol.kind() == SymbolKind::Text && symbol.is_definition())
            .filter_map(|symbol| {
                let address = symbol.address();
                let (base, _, offset) =
                    segments.iter().find(|(base, size, _)| address >= *base && address < base + size)?;
                Some((address - base + offset, symbol.size().max(1), symbol.name().ok()?.to_string()))
            })
            .collect();
        by_offset.sort();
        by_offset.dedup_by_key(|entry| entry.0);
        Some(Self { by_offset })
    }

    /// The function holding file offset `offset`.
    pub fn at(&self, offset: u64) -> Option<&str> {
        let index = self.by_offset.partition_point(|entry| entry.0 <= offset).checked_sub(1)?;
        let (start, size, name) = &self.by_offset[index];
        (offset < start + size).then_some(name.as_str())
    }
}

/// A C++ symbol as nsys and the profilers print it (`_Z10vector_addPfS_i` → `vector_add(float*, float*,
/// int)`); a C name or one that does not parse stays as it is.
pub fn demangle(symbol: &str) -> String {
    cpp_demangle::Symbol::new(symbol)
        .ok()
        .and_then(|parsed| parsed.demangle().ok())
        .unwrap_or_else(|| symbol.to_string())
}

/// Names kernels' host stubs from the files a process maps, caching each file's symbols.
#[derive(Debug, Default)]
pub struct Symbolizer {
    files: HashMap<PathBuf, Option<Symbols>>,
}

impl Symbolizer {
    /// The function at `address` in `pid`, whose file mappings (`mappings`) were read while it ran:
    /// `None` where no file is mapped there or the file has no symbol for it.
    pub fn name(&mut self, proc_root: &Path, pid: u32, mappings: &[Mapping], address: u64) -> Option<String> {
        let mapping = mappings.iter().find(|m| address >= m.start && address < m.end)?;
        // Through the process's root while it lives: the file as it sees it (another mount namespace).
        let through_root = proc_root.join(format!("{pid}/root{}", mapping.path));
        let file = if through_root.exists() { through_root } else { PathBuf::from(&mapping.path) };
        let symbols = self.files.entry(file.clone()).or_insert_with(|| Symbols::read(&file));
        symbols.as_ref()?.at(address - mapping.start + mapping.offset).map(demangle)
    }

    /// Forgets every file (a bound on memory between intervals).
    pub fn clear(&mut self) {
        self.files.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_are_found_wherever_they_are_mapped_and_by_wheel_names() {
        let maps = "\
7f0000000000-7f0000100000 r-xp 00000000 08:01 123 /usr/local/cuda/lib64/libcudart.so.12.4.127
7f0000100000-7f0000200000 r--p 00100000 08:01 123 /usr/local/cuda/lib64/libcudart.so.12.4.127
7f0000300000-7f0000400000 r-xp 00000000 08:01 456 /home/u/.venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2
7f0000500000-7f0000600000 r-xp 00000000 08:01 789 /opt/torch/lib/libcudart-d0da41ae.so.11.0
7f0000700000-7f0000800000 r-xp 00000000 08:01 790 /usr/lib/libcudart_static_helper.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
";
        let found = libraries(maps, &["libcudart".into()], &["libnccl".into()]);
        assert_eq!(
            found,
            [
                (Library::CudaRuntime, "/usr/local/cuda/lib64/libcudart.so.12.4.127".to_string()),
                (Library::Nccl, "/home/u/.venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2".to_string()),
                (Library::CudaRuntime, "/opt/torch/lib/libcudart-d0da41ae.so.11.0".to_string()),
            ]
        );
    }

    #[test]
    fn the_job_cgroup_is_found_in_v1_v2_and_sluid_layouts() {
        let v1 = "12:pids:/slurm_n1/uid_1001/job_23/step_0/task_0\n4:memory:/slurm_n1/uid_1001/job_23/step_0/task_0\n1:name=systemd:/\n";
        assert_eq!(job_cgroup(v1).as_deref(), Some("/slurm_n1/uid_1001/job_23/step_0/task_0"));
        let v2 = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n";
        assert_eq!(job_cgroup(v2).as_deref(), Some("/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"));
        let sluid = "0::/system.slice/n1_slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0\n";
        assert_eq!(
            job_cgroup(sluid).as_deref(),
            Some("/system.slice/n1_slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0")
        );
        assert_eq!(job_cgroup("0::/user.slice/user-1000.slice/session-1.scope\n"), None);
    }

    #[test]
    fn cuda_devices_map_to_slurms_gpu_indices() {
        let env = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>()
        };
        // Constrained devices: CUDA numbers from 0 over the step's GPUs 2 and 3.
        assert_eq!(gpu_map(&env(&[("CUDA_VISIBLE_DEVICES", "0,1"), ("SLURM_STEP_GPUS", "2,3")])), [2, 3]);
        // Unconstrained: CUDA_VISIBLE_DEVICES holds Slurm's indices.
        assert_eq!(gpu_map(&env(&[("CUDA_VISIBLE_DEVICES", "2,3"), ("SLURM_JOB_GPUS", "2,3")])), [2, 3]);
        assert_eq!(gpu_map(&env(&[("CUDA_VISIBLE_DEVICES", "1")])), [1]);
        let job = JobOf { gpus: vec![2, 3], ..JobOf::default() };
        assert_eq!((job.gpu(1), job.gpu(5)), (3, 5));
    }

    #[test]
    fn kernel_stubs_are_demangled_as_nsys_prints_them() {
        assert_eq!(demangle("_Z10vector_addPfS_i"), "vector_add(float*, float*, int)");
        assert_eq!(demangle("reduce_rows"), "reduce_rows");
    }

    #[test]
    fn environ_splits_on_nul() {
        let env = environ(b"SLURM_JOB_ID=17\0CUDA_VISIBLE_DEVICES=1,2\0BROKEN\0");
        assert_eq!(env.get("SLURM_JOB_ID").map(String::as_str), Some("17"));
        assert_eq!(env.len(), 2);
    }

    #[test]
    fn the_agents_own_functions_are_named_from_its_executable() {
        let exe = std::fs::read_link("/proc/self/exe").expect("own executable");
        let symbols = Symbols::read(&exe).expect("an ELF file");
        let address = is_library as *const () as usize as u64;
        let mut symbolizer = Symbolizer::default();
        let maps = std::fs::read_to_string("/proc/self/maps").expect("own maps");
        let mappings = executable_mappings(&maps);
        let name = symbolizer.name(Path::new("/proc"), std::process::id(), &mappings, address).expect("a name");
        assert!(name.contains("is_library"), "{name}");
        assert!(!symbols.by_offset.is_empty());
    }
}
