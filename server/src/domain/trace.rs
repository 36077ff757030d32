//! eBPF / nsys trace summaries: categories, names, the job a record belongs to (explicit id or its
//! Slurm cgroup path), and the validated record that is stored.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Duration, TimeZone, Utc};

/// Longest name kept (C++ kernel names run to thousands of characters).
pub const MAX_NAME_LEN: usize = 8192;
/// Longest aggregation interval accepted: an nsys report covers its whole profiled run.
pub const MAX_INTERVAL_S: u32 = 31 * 24 * 3600;
/// Highest GPU index accepted on one node.
pub const MAX_GPU_INDEX: u16 = 255;

/// What a summary measures: the API's and the store's vocabulary.
pub use slurmlens_wire::TraceCategory;

/// The category named `text` exactly; the error says which words are.
pub fn parse_category(text: &str) -> Result<TraceCategory, String> {
    TraceCategory::from_word(text).ok_or_else(|| {
        let words: Vec<&str> = TraceCategory::ALL.iter().map(|category| category.as_str()).collect();
        let (last, rest) = words.split_last().unwrap_or((&"", &[]));
        format!("`{}` is not a category: {} or {last}", shorten(text), rest.join(", "))
    })
}

/// Memory copy kinds, as CUDA's `cudaMemcpyKind` and nsys name them.
pub const MEMCPY_KINDS: [&str; 4] = ["HtoD", "DtoH", "DtoD", "PtoP"];

/// NCCL operations (collectives and point-to-point), in NCCL's own spelling.
pub const NCCL_OPS: [&str; 11] = [
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "Send",
    "Recv",
    "AllToAll",
    "Gather",
    "Scatter",
];

/// Host synchronisation calls whose time is a wait for the GPU.
pub const SYNC_CALLS: [&str; 6] = [
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
];

/// A summary's name, checked and normalised for its category.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceName(String);

impl TraceName {
    /// Parses `text` as a name of `category`: a memcpy kind, an NCCL operation, a sync call, a CUDA API
    /// function, or (kernels) any printable text. Common spellings are normalised (`H2D` → `HtoD`,
    /// `ncclAllReduce` → `AllReduce`, nsys's `[CUDA memcpy Host-to-Device]` → `HtoD`).
    pub fn parse(category: TraceCategory, text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the name is empty".into());
        }
        if text.len() > MAX_NAME_LEN {
            return Err(format!("the name is longer than {MAX_NAME_LEN} bytes"));
        }
        if text.chars().any(char::is_control) {
            return Err("the name contains control characters".into());
        }
        match category {
            TraceCategory::Kernel => Ok(Self(text.to_string())),
            TraceCategory::Memcpy => memcpy_kind(text)
                .map(|kind| Self(kind.to_string()))
                .ok_or_else(|| format!("`{}` is not a memcpy kind: HtoD, DtoH, DtoD or PtoP", shorten(text))),
            TraceCategory::Nccl => nccl_op(text)
                .map(|op| Self(op.to_string()))
                .ok_or_else(|| format!("`{}` is not an NCCL operation ({})", shorten(text), NCCL_OPS.join(", "))),
            TraceCategory::Sync => {
                SYNC_CALLS.iter().find(|call| **call == text).map(|call| Self(call.to_string())).ok_or_else(|| {
                    format!("`{}` is not a synchronisation call ({})", shorten(text), SYNC_CALLS.join(", "))
                })
            }
            TraceCategory::CudaApi => {
                let identifier = text.len() <= 128
                    && text.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                    && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if identifier {
                    Ok(Self(text.to_string()))
                } else {
                    Err(format!("`{}` is not a CUDA API function name", shorten(text)))
                }
            }
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TraceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn memcpy_kind(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    let squeezed: String = lower.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let table: [(&[&str], &'static str); 4] = [
        (&["htod", "h2d", "hosttodevice", "cudamemcpyhosttodevice", "cudamemcpyhosttodevice1"], "HtoD"),
        (&["dtoh", "d2h", "devicetohost", "cudamemcpydevicetohost"], "DtoH"),
        (&["dtod", "d2d", "devicetodevice", "cudamemcpydevicetodevice"], "DtoD"),
        (&["ptop", "p2p", "peertopeer", "cudamemcpypeertopeer"], "PtoP"),
    ];
    // nsys: `[CUDA memcpy Host-to-Device]`, `[CUDA memcpy HtoD]`.
    let squeezed = squeezed.strip_prefix("cudamemcpy").filter(|rest| !rest.is_empty()).unwrap_or(&squeezed);
    table.iter().find(|(spellings, _)| spellings.contains(&squeezed)).map(|(_, kind)| *kind)
}

/// `AllReduce`, `allreduce`, `ncclAllReduce`, `all_reduce` → `AllReduce`.
pub fn nccl_op(text: &str) -> Option<&'static str> {
    let squeezed: String = text.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    let squeezed = squeezed.strip_prefix("nccl").unwrap_or(&squeezed);
    NCCL_OPS.iter().find(|op| op.to_ascii_lowercase() == squeezed).copied()
}

/// The NCCL operation of an NCCL device kernel as nsys lists it (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`,
/// `ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t`), or `None` for any other kernel.
pub fn nccl_kernel_op(kernel: &str) -> Option<&'static str> {
    let rest = kernel.strip_prefix("ncclDevKernel_").or_else(|| kernel.strip_prefix("ncclKernel_"))?;
    let op = rest.split(['_', '(', ' ']).next()?;
    nccl_op(op)
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= 64 {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(64).collect::<String>())
    }
}

/// The job key a cgroup path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupJobKey {
    /// `job_<id>`.
    JobId(u32),
    /// Slurm ≥ 26.05 names cgroup v2 directories by SLUID (`s` + 13 of `0-9A-Z`).
    Sluid(String),
}

/// Which Slurm cgroup plugin laid out the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupLayout {
    V1,
    V2,
}

/// A Slurm job's cgroup, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmCgroup {
    pub layout: CgroupLayout,
    pub job: CgroupJobKey,
    /// `batch`, `extern`, `0`, … when the path goes down to a step.
    pub step: Option<String>,
    /// The task number, when the path goes down to a task.
    pub task: Option<String>,
}

impl FromStr for SlurmCgroup {
    type Err = String;

    /// Accepts the paths Slurm's cgroup plugins create (see `datasources.md` §4), as they appear in
    /// `/proc/<pid>/cgroup` or under the cgroup mount:
    /// - v1: `[/sys/fs/cgroup][/<controller>]/slurm[_<node>]/uid_<uid>/job_<id>[/step_<s>[/task_<t>]]`;
    /// - v2: `[/sys/fs/cgroup]…/system.slice/[<node>_]slurmstepd.scope/(job_<id>|<SLUID>)[/step_<s>[/user[/task_<t>]|/slurm]]`.
    ///
    /// A `/proc/<pid>/cgroup` line (`0::/path`, `4:memory:/path`) is accepted too.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let bad = |why: &str| format!("cgroup `{}` {why}", shorten(text));
        if text.len() > 1024 || text.chars().any(char::is_control) {
            return Err(bad("is longer than 1024 characters or contains control characters"));
        }
        let path = strip_proc_line(text);
        if !path.starts_with('/') {
            return Err(bad("is not an absolute path"));
        }
        let path = path.strip_prefix("/sys/fs/cgroup").filter(|rest| rest.starts_with('/')).unwrap_or(path);
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        if segments.iter().any(|segment| segment.is_empty() || *segment == "." || *segment == "..") {
            return Err(bad("has empty, `.` or `..` segments"));
        }
        if let Some(at) = segments.iter().position(|segment| is_stepd_scope(segment)) {
            if at == 0 || segments[at - 1] != "system.slice" {
                return Err(bad("has slurmstepd.scope outside system.slice"));
            }
            return parse_v2(&segments[at + 1..]).map_err(|why| bad(&why));
        }
        if let Some(at) = segments.iter().position(|segment| *segment == "slurm" || segment.starts_with("slurm_")) {
            // At most one controller directory (`memory`, `cpuset`, `cpu,cpuacct`) above `slurm`.
            if at > 1 {
                return Err(bad("has more than a controller above the slurm directory"));
            }
            return parse_v1(&segments[at + 1..]).map_err(|why| bad(&why));
        }
        Err(bad("is not a Slurm job cgroup (no slurm/uid_*/job_* or system.slice/slurmstepd.scope)"))
    }
}

fn strip_proc_line(text: &str) -> &str {
    let mut parts = text.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(hierarchy), Some(_controllers), Some(path))
            if !hierarchy.is_empty() && hierarchy.bytes().all(|b| b.is_ascii_digit()) =>
        {
            path
        }
        _ => text,
    }
}

fn is_stepd_scope(segment: &str) -> bool {
    segment == "slurmstepd.scope" || segment.strip_suffix("_slurmstepd.scope").is_some_and(|node| !node.is_empty())
}

fn job_number(segment: &str) -> Result<u32, String> {
    let digits = segment.strip_prefix("job_").ok_or_else(|| format!("expected job_<id>, found `{segment}`"))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{segment}` is not job_<digits>"));
    }
    match digits.parse::<u32>() {
        Ok(0) => Err("job ids start at 1".into()),
        Ok(id) => Ok(id),
        Err(_) => Err(format!("`{segment}` is beyond Slurm's job ids")),
    }
}

/// `s` and 13 characters of `0-9A-Z` (cgroup_exporter's pattern for Slurm 26.05 SLUIDs).
fn is_sluid(segment: &str) -> bool {
    segment.len() == 14
        && segment.starts_with('s')
        && segment.bytes().skip(1).all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
}

fn step_name(segment: &str) -> Result<String, String> {
    let step = segment.strip_prefix("step_").ok_or_else(|| format!("expected step_<step>, found `{segment}`"))?;
    let known = matches!(step, "batch" | "extern" | "interactive")
        || (!step.is_empty() && step.len() <= 10 && step.bytes().all(|b| b.is_ascii_digit()));
    if known { Ok(step.to_string()) } else { Err(format!("`{segment}` is not a Slurm step")) }
}

fn task_name(segment: &str) -> Result<String, String> {
    let task = segment.strip_prefix("task_").ok_or_else(|| format!("expected task_<n>, found `{segment}`"))?;
    let known = task == "special" || (!task.is_empty() && task.len() <= 10 && task.bytes().all(|b| b.is_ascii_digit()));
    if known { Ok(task.to_string()) } else { Err(format!("`{segment}` is not a Slurm task")) }
}

fn parse_v1(segments: &[&str]) -> Result<SlurmCgroup, String> {
    let uid = segments.first().ok_or("stops at the slurm directory")?;
    if !uid.strip_prefix("uid_").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
        return Err(format!("expected uid_<uid>, found `{uid}`"));
    }
    let job = job_number(segments.get(1).ok_or("stops before job_<id>")?)?;
    let step = segments.get(2).map(|segment| step_name(segment)).transpose()?;
    let task = segments.get(3).map(|segment| task_name(segment)).transpose()?;
    if segments.len() > 4 {
        return Err("goes below the task".into());
    }
    Ok(SlurmCgroup { layout: CgroupLayout::V1, job: CgroupJobKey::JobId(job), step, task })
}

fn parse_v2(segments: &[&str]) -> Result<SlurmCgroup, String> {
    let first = segments.first().ok_or("stops at slurmstepd.scope (slurmstepd's own cgroup)")?;
    let job =
        if is_sluid(first) { CgroupJobKey::Sluid(first.to_string()) } else { CgroupJobKey::JobId(job_number(first)?) };
    let step = segments.get(1).map(|segment| step_name(segment)).transpose()?;
    let task = match segments.get(2..).unwrap_or_default() {
        [] | ["user"] | ["slurm"] => None,
        ["user", task] => Some(task_name(task)?),
        _ => return Err("has an unexpected layout below the step (expected user/task_<n> or slurm)".into()),
    };
    Ok(SlurmCgroup { layout: CgroupLayout::V2, job, step, task })
}

/// Resolves the job of a record from its explicit id and/or its cgroup. Both given must agree.
/// A SLUID-keyed cgroup needs the explicit id: mapping a SLUID to a job id needs Slurm ≥ 26.05's
/// accounting (`sacct --json .jobs[].sluid`), which slurmdbd's tables read here do not carry yet.
pub fn resolve_job(job_id: Option<u32>, cgroup: Option<&str>) -> Result<u32, String> {
    let parsed = cgroup.map(str::parse::<SlurmCgroup>).transpose()?;
    match (job_id, parsed.map(|cgroup| cgroup.job)) {
        (Some(0), _) => Err("job ids start at 1".into()),
        (Some(id), None | Some(CgroupJobKey::Sluid(_))) => Ok(id),
        (Some(id), Some(CgroupJobKey::JobId(from_cgroup))) if id == from_cgroup => Ok(id),
        (Some(id), Some(CgroupJobKey::JobId(from_cgroup))) => {
            Err(format!("job_id {id} disagrees with the cgroup's job_{from_cgroup}"))
        }
        (None, Some(CgroupJobKey::JobId(from_cgroup))) => Ok(from_cgroup),
        (None, Some(CgroupJobKey::Sluid(sluid))) => Err(format!(
            "the cgroup is keyed by SLUID {sluid} (Slurm ≥ 26.05); send job_id too (SLURM_JOB_ID of the process)"
        )),
        (None, None) => Err("send job_id or cgroup".into()),
    }
}

/// One validated summary: what a process did on a GPU during an interval, for one category and name.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSummary {
    pub job_id: u32,
    pub gpu: u16,
    /// 0 when the source does not know the process (an nsys report).
    pub pid: u32,
    pub interval_start: DateTime<Utc>,
    pub interval_s: u32,
    pub category: TraceCategory,
    pub name: TraceName,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub bytes: u64,
}

/// The fields of a record as received, before validation.
#[derive(Debug, Clone)]
pub struct RawTraceSummary<'a> {
    pub job_id: Option<u32>,
    pub cgroup: Option<&'a str>,
    pub gpu: u16,
    pub pid: u32,
    pub interval_start: DateTime<Utc>,
    pub interval_s: u32,
    pub category: &'a str,
    pub name: &'a str,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub bytes: u64,
}

impl TraceSummary {
    /// Validates one record received at `now`; the error is a sentence naming the field at fault.
    pub fn parse(raw: &RawTraceSummary<'_>, now: DateTime<Utc>) -> Result<Self, String> {
        let job_id = resolve_job(raw.job_id, raw.cgroup)?;
        let category = parse_category(raw.category).map_err(|e| format!("category: {e}"))?;
        let name = TraceName::parse(category, raw.name).map_err(|e| format!("name: {e}"))?;
        if raw.gpu > MAX_GPU_INDEX {
            return Err(format!("gpu: {} is beyond {MAX_GPU_INDEX}", raw.gpu));
        }
        if raw.interval_s == 0 || raw.interval_s > MAX_INTERVAL_S {
            return Err(format!("interval_s: send 1 to {MAX_INTERVAL_S} seconds"));
        }
        let earliest = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single().unwrap_or(now);
        if raw.interval_start < earliest || raw.interval_start > now + Duration::days(1) {
            return Err(format!("interval_start: {} is not a plausible time", raw.interval_start.to_rfc3339()));
        }
        if raw.interval_start.timestamp_subsec_nanos() != 0 {
            return Err("interval_start: intervals start on a whole second".into());
        }
        if raw.count == 0 {
            return Err("count: a summary counts at least one event".into());
        }
        // The columns are BIGINT UNSIGNED, and sums over a job must not overflow.
        let limit = u64::MAX >> 8;
        if raw.count > limit || raw.total_ns > limit || raw.bytes > limit {
            return Err("count, total_ns or bytes is implausibly large".into());
        }
        if raw.max_ns > raw.total_ns {
            return Err(format!("max_ns: {} is more than total_ns {}", raw.max_ns, raw.total_ns));
        }
        if u128::from(raw.total_ns) > u128::from(raw.count) * u128::from(raw.max_ns) {
            return Err(format!(
                "total_ns: {} is more than count × max_ns ({} × {})",
                raw.total_ns, raw.count, raw.max_ns
            ));
        }
        if raw.bytes != 0 && !matches!(category, TraceCategory::Memcpy | TraceCategory::Nccl) {
            return Err(format!("bytes: only memcpy and nccl summaries carry bytes, not {category}"));
        }
        Ok(Self {
            job_id,
            gpu: raw.gpu,
            pid: raw.pid,
            interval_start: raw.interval_start,
            interval_s: raw.interval_s,
            category,
            name,
            count: raw.count,
            total_ns: raw.total_ns,
            max_ns: raw.max_ns,
            bytes: raw.bytes,
        })
    }

    /// The identity of the stored row, without the node and cluster (which the batch carries).
    pub fn key(&self) -> (u32, u16, u32, DateTime<Utc>, TraceCategory, &str) {
        (self.job_id, self.gpu, self.pid, self.interval_start, self.category, self.name.as_str())
    }

    /// Folds another summary of the same key into this one (nsys lists several NCCL kernels per op).
    pub fn absorb(&mut self, other: &Self) {
        self.count = self.count.saturating_add(other.count);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// Which `nsys stats --format csv` summary report a CSV is, recognised by its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsysReport {
    /// `cuda_api_sum`: host API calls (`Num Calls`, `Name`); the synchronisation calls become `sync`.
    CudaApiSum,
    /// `cuda_gpu_kern_sum`: kernels (`Instances`, `Name`); NCCL device kernels become `nccl`.
    CudaGpuKernSum,
    /// `cuda_gpu_mem_time_sum`: memory operations (`Count`, `Operation`).
    CudaGpuMemTimeSum,
    /// `nvtx_sum`: NVTX ranges (`Instances`, `Style`, `Range`); only NCCL's ranges are kept.
    NvtxSum,
}

/// One data row of an nsys report, ready to validate as a [`RawTraceSummary`].
#[derive(Debug, Clone, PartialEq)]
pub struct NsysRow {
    pub category: TraceCategory,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// Parses the CSV `nsys stats --format csv --report <report>` prints (times in ns, the default
/// `--timeunit`). Lines before the header (nsys's "Processing …" notes) are skipped. The whole text
/// is refused when no known header is found; each data row is a row or the reason it is refused.
pub fn parse_nsys_csv(text: &str) -> Result<(NsysReport, Vec<Result<NsysRow, String>>), String> {
    let column_at = text
        .find("Total Time (ns)")
        .ok_or("no `Total Time (ns)` header: send the CSV of `nsys stats --format csv` (times in ns)")?;
    let header_at = text[..column_at].rfind('\n').map_or(0, |newline| newline + 1);
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(&text.as_bytes()[header_at..]);
    let headers = reader.headers().map_err(|e| format!("unreadable CSV header: {e}"))?.clone();
    let column = |name: &str| headers.iter().position(|header| header.trim() == name);
    let total = column("Total Time (ns)").ok_or("no `Total Time (ns)` column")?;
    let max = column("Max (ns)").ok_or("no `Max (ns)` column")?;
    let (report, count, name) = if let (Some(count), Some(name)) = (column("Num Calls"), column("Name")) {
        (NsysReport::CudaApiSum, count, name)
    } else if let (Some(count), Some(name)) = (column("Instances"), column("Range")) {
        (NsysReport::NvtxSum, count, name)
    } else if let (Some(count), Some(name)) = (column("Instances"), column("Name")) {
        (NsysReport::CudaGpuKernSum, count, name)
    } else if let (Some(count), Some(name)) = (column("Count"), column("Operation")) {
        (NsysReport::CudaGpuMemTimeSum, count, name)
    } else {
        return Err(
            "not a known nsys report: cuda_api_sum, cuda_gpu_kern_sum, cuda_gpu_mem_time_sum or nvtx_sum".into()
        );
    };
    let rows = reader
        .records()
        .map(|record| {
            let record = record.map_err(|e| format!("unreadable CSV row: {e}"))?;
            let field = |at: usize, what: &str| record.get(at).map(str::trim).ok_or(format!("no {what} column"));
            let number = |at: usize, what: &str| -> Result<u64, String> {
                let text = field(at, what)?;
                text.parse::<u64>()
                    .ok()
                    .or_else(|| {
                        text.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v.round() as u64)
                    })
                    .ok_or(format!("{what} `{}` is not a number of ns", shorten(text)))
            };
            let text = field(name, "name")?;
            let (category, name) = match report {
                NsysReport::CudaApiSum if SYNC_CALLS.contains(&text) => (TraceCategory::Sync, text.to_string()),
                NsysReport::CudaApiSum => (TraceCategory::CudaApi, text.to_string()),
                NsysReport::CudaGpuKernSum => match nccl_kernel_op(text) {
                    Some(op) => (TraceCategory::Nccl, op.to_string()),
                    None => (TraceCategory::Kernel, text.to_string()),
                },
                NsysReport::CudaGpuMemTimeSum => match memcpy_kind(text) {
                    Some(kind) => (TraceCategory::Memcpy, kind.to_string()),
                    None => return Err(format!("`{}` is not a memory copy; not stored", shorten(text))),
                },
                // NCCL's NVTX ranges (`ncclAllReduce`, possibly with a domain prefix `NCCL:`).
                NsysReport::NvtxSum => match nccl_op(text.rsplit(':').next().unwrap_or(text)) {
                    Some(op) => (TraceCategory::Nccl, op.to_string()),
                    None => return Err(format!("NVTX range `{}` is not an NCCL operation; not stored", shorten(text))),
                },
            };
            Ok(NsysRow {
                category,
                name,
                count: number(count, "count")?,
                total_ns: number(total, "Total Time (ns)")?,
                max_ns: number(max, "Max (ns)")?,
            })
        })
        .collect();
    Ok((report, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cgroup(path: &str) -> SlurmCgroup {
        path.parse().unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn trace_cgroup_v1_layouts() {
        let parsed = cgroup("/slurm/uid_1001/job_123/step_0/task_0");
        assert_eq!(parsed.layout, CgroupLayout::V1);
        assert_eq!(parsed.job, CgroupJobKey::JobId(123));
        assert_eq!(parsed.step.as_deref(), Some("0"));
        assert_eq!(parsed.task.as_deref(), Some("0"));
        for path in [
            "/cpuset/slurm/uid_1001/job_123/step_0/task_0",
            "/memory/slurm/uid_1001/job_123",
            "/sys/fs/cgroup/memory/slurm/uid_1001/job_123/step_batch",
            "/sys/fs/cgroup/cpu,cpuacct/slurm/uid_334987/job_123/step_extern/task_0",
            "/slurm_n1/uid_1001/job_123/step_extern/task_special",
            "4:memory:/slurm/uid_1001/job_123/step_0/task_3",
            "/slurm/uid_1001/job_123/",
        ] {
            assert_eq!(cgroup(path).job, CgroupJobKey::JobId(123), "{path}");
            assert_eq!(cgroup(path).layout, CgroupLayout::V1, "{path}");
        }
    }

    #[test]
    fn trace_cgroup_v2_layouts() {
        let parsed = cgroup("/system.slice/slurmstepd.scope/job_123/step_0/user/task_0");
        assert_eq!(parsed.layout, CgroupLayout::V2);
        assert_eq!(parsed.job, CgroupJobKey::JobId(123));
        assert_eq!((parsed.step.as_deref(), parsed.task.as_deref()), (Some("0"), Some("0")));
        for path in [
            "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_123/step_0/user/task_0",
            "/system.slice/slurmstepd.scope/job_123",
            "/system.slice/slurmstepd.scope/job_123/step_batch/slurm",
            "/system.slice/slurmstepd.scope/job_123/step_extern/user",
            "/system.slice/n1_slurmstepd.scope/job_123/step_0/user/task_special",
            "0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_1",
        ] {
            assert_eq!(cgroup(path).job, CgroupJobKey::JobId(123), "{path}");
            assert_eq!(cgroup(path).layout, CgroupLayout::V2, "{path}");
        }
    }

    #[test]
    fn trace_cgroup_sluid_layout() {
        let parsed = cgroup("/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0");
        assert_eq!(parsed.job, CgroupJobKey::Sluid("s5K1KKYAYG5D00".into()));
        assert_eq!(
            cgroup("/sys/fs/cgroup/system.slice/slurmstepd.scope/s5K1KKYAYG5D00").job,
            CgroupJobKey::Sluid("s5K1KKYAYG5D00".into())
        );
        // The SLUID alone does not name a job id; with job_id it does.
        let path = "/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0";
        assert!(resolve_job(None, Some(path)).is_err_and(|e| e.contains("SLUID")));
        assert_eq!(resolve_job(Some(77), Some(path)), Ok(77));
    }

    #[test]
    fn trace_cgroup_rejects() {
        for path in [
            "",
            "slurm/uid_1001/job_123",
            "/user.slice/user-1001.slice/session-3.scope",
            "/slurm/uid_1001",
            "/slurm/uid_x/job_123",
            "/slurm/uid_1001/job_",
            "/slurm/uid_1001/job_0",
            "/slurm/uid_1001/job_12a",
            "/slurm/uid_1001/job_99999999999",
            "/slurm/uid_1001/job_123/step_x",
            "/slurm/uid_1001/job_123/step_0/task_0/extra",
            "/slurm/uid_1001/job_123/../job_7",
            "/a/b/slurm/uid_1001/job_123",
            "/system.slice/slurmstepd.scope",
            "/system.slice/slurmstepd.scope/job_abc",
            "/system.slice/slurmstepd.scope/s5k1kkyayg5d00",
            "/system.slice/slurmstepd.scope/s5K1KKYAYG5D0",
            "/system.slice/slurmstepd.scope/job_123/step_0/user/task_0/x",
            "/system.slice/slurmstepd.scope/job_123/step_0/other",
            "/slurmstepd.scope/job_123",
            "/system.slice/slurmstepd.scope/job_1\n23",
        ] {
            assert!(path.parse::<SlurmCgroup>().is_err(), "accepted {path:?}");
        }
    }

    #[test]
    fn trace_job_resolution() {
        assert_eq!(resolve_job(Some(5), None), Ok(5));
        assert_eq!(resolve_job(None, Some("/slurm/uid_1/job_9/step_0/task_0")), Ok(9));
        assert_eq!(resolve_job(Some(9), Some("/slurm/uid_1/job_9")), Ok(9));
        assert!(resolve_job(Some(8), Some("/slurm/uid_1/job_9")).is_err_and(|e| e.contains("disagrees")));
        assert!(resolve_job(None, None).is_err());
        assert!(resolve_job(Some(0), None).is_err());
    }

    #[test]
    fn trace_names_normalise_per_category() {
        fn name(category: TraceCategory, text: &str) -> Result<String, String> {
            TraceName::parse(category, text).map(|n| n.as_str().to_string())
        }
        assert_eq!(name(TraceCategory::Memcpy, "H2D"), Ok("HtoD".into()));
        assert_eq!(name(TraceCategory::Memcpy, "[CUDA memcpy Host-to-Device]"), Ok("HtoD".into()));
        assert_eq!(name(TraceCategory::Memcpy, "[CUDA memcpy Peer-to-Peer]"), Ok("PtoP".into()));
        assert_eq!(name(TraceCategory::Memcpy, "DtoH"), Ok("DtoH".into()));
        assert!(name(TraceCategory::Memcpy, "sideways").is_err());
        assert_eq!(name(TraceCategory::Nccl, "ncclAllReduce"), Ok("AllReduce".into()));
        assert_eq!(name(TraceCategory::Nccl, "reduce_scatter"), Ok("ReduceScatter".into()));
        assert!(name(TraceCategory::Nccl, "AllShuffle").is_err());
        assert_eq!(name(TraceCategory::Sync, "cudaStreamSynchronize"), Ok("cudaStreamSynchronize".into()));
        assert!(name(TraceCategory::Sync, "cudaMalloc").is_err());
        assert!(name(TraceCategory::CudaApi, "cudaLaunchKernel_v7000").is_ok());
        assert!(name(TraceCategory::CudaApi, "cuda Launch").is_err());
        let long_kernel = format!("void at::native::{}<float>(int)", "x".repeat(2000));
        assert!(name(TraceCategory::Kernel, &long_kernel).is_ok());
        assert!(name(TraceCategory::Kernel, &"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(name(TraceCategory::Kernel, "").is_err());
        assert!(name(TraceCategory::Kernel, "a\u{0}b").is_err());
        assert!(parse_category("gpu").is_err());
        assert_eq!(
            nccl_kernel_op("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)"),
            Some("AllReduce")
        );
        assert_eq!(nccl_kernel_op("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), Some("SendRecv"));
        assert_eq!(nccl_kernel_op("void gemm_kernel<128>()"), None);
    }

    fn raw<'a>() -> RawTraceSummary<'a> {
        RawTraceSummary {
            job_id: Some(42),
            cgroup: None,
            gpu: 3,
            pid: 1234,
            interval_start: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 0).single().expect("valid time"),
            interval_s: 10,
            category: "kernel",
            name: "sgemm_128x64",
            count: 10,
            total_ns: 1000,
            max_ns: 200,
            bytes: 0,
        }
    }

    #[test]
    fn trace_summary_validation() {
        let now = Utc.with_ymd_and_hms(2026, 1, 2, 4, 0, 0).single().expect("valid time");
        let good = TraceSummary::parse(&raw(), now).expect("valid");
        assert_eq!((good.job_id, good.category, good.name.as_str()), (42, TraceCategory::Kernel, "sgemm_128x64"));
        let reject = |edit: &dyn Fn(&mut RawTraceSummary<'static>), wanted: &str| {
            let mut record = raw();
            edit(&mut record);
            let error = TraceSummary::parse(&record, now).expect_err(wanted);
            assert!(error.contains(wanted), "{error} lacks {wanted}");
        };
        reject(&|r| r.count = 0, "count");
        reject(&|r| r.max_ns = 2000, "max_ns");
        reject(&|r| r.total_ns = 5000, "total_ns");
        reject(&|r| r.interval_s = 0, "interval_s");
        reject(&|r| r.interval_s = MAX_INTERVAL_S + 1, "interval_s");
        reject(&|r| r.gpu = 999, "gpu");
        reject(&|r| r.category = "gpu", "category");
        assert_eq!(
            parse_category("gpu").expect_err("refused"),
            "`gpu` is not a category: cuda_api, kernel, memcpy, nccl or sync"
        );
        reject(&|r| r.bytes = 5, "bytes");
        reject(&|r| r.job_id = None, "job_id or cgroup");
        reject(&|r| r.interval_start = Utc.with_ymd_and_hms(1999, 1, 1, 0, 0, 0).single().expect("valid"), "plausible");
        reject(&|r| r.interval_start += Duration::milliseconds(5), "whole second");
        reject(&|r| r.cgroup = Some("/slurm/uid_1/job_7"), "disagrees");
    }

    #[test]
    fn trace_nsys_reports_by_header() {
        let api = "Processing [report.sqlite] with [cuda_api_sum.py]...\n\
            \"Time (%)\",\"Total Time (ns)\",\"Num Calls\",\"Avg (ns)\",\"Med (ns)\",\"Min (ns)\",\"Max (ns)\",\"StdDev (ns)\",\"Name\"\n\
            60.5,1000000,10,100000.0,90000.0,1000,300000,5000.5,cudaStreamSynchronize\n\
            39.5,650000,100,6500.0,6000.0,100,20000,300.1,cudaLaunchKernel\n";
        let (report, rows) = parse_nsys_csv(api).expect("cuda_api_sum");
        assert_eq!(report, NsysReport::CudaApiSum);
        let rows: Vec<NsysRow> = rows.into_iter().collect::<Result<_, _>>().expect("rows");
        assert_eq!(rows[0].category, TraceCategory::Sync);
        assert_eq!(
            (rows[1].category, rows[1].count, rows[1].total_ns, rows[1].max_ns),
            (TraceCategory::CudaApi, 100, 650000, 20000)
        );
        let kernels = "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n\
            70.0,7000,7,1000.0,1000.0,900,1100,50.0,\"void gemm<float, 128>(int, float*)\"\n\
            30.0,3000,3,1000.0,1000.0,900,1100,50.0,ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)\n\
            1.0,x,3,1000.0,1000.0,900,1100,50.0,broken\n";
        let (report, rows) = parse_nsys_csv(kernels).expect("cuda_gpu_kern_sum");
        assert_eq!(report, NsysReport::CudaGpuKernSum);
        assert_eq!(rows[0].as_ref().map(|row| row.name.as_str()), Ok("void gemm<float, 128>(int, float*)"));
        assert_eq!(
            rows[1].as_ref().map(|row| (row.category, row.name.as_str())),
            Ok((TraceCategory::Nccl, "AllReduce"))
        );
        assert!(rows[2].is_err());
        let memory = "Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation\n\
            90.0,900,3,300.0,300.0,200,400,10.0,[CUDA memcpy Host-to-Device]\n\
            10.0,100,1,100.0,100.0,100,100,0.0,[CUDA memset]\n";
        let (report, rows) = parse_nsys_csv(memory).expect("cuda_gpu_mem_time_sum");
        assert_eq!(report, NsysReport::CudaGpuMemTimeSum);
        assert_eq!(rows[0].as_ref().map(|row| row.name.as_str()), Ok("HtoD"));
        assert!(rows[1].is_err());
        let nvtx = "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range\n\
            80.0,800,8,100.0,100.0,90,110,5.0,PushPop,NCCL:ncclAllGather\n\
            20.0,200,2,100.0,100.0,90,110,5.0,PushPop,forward\n";
        let (report, rows) = parse_nsys_csv(nvtx).expect("nvtx_sum");
        assert_eq!(report, NsysReport::NvtxSum);
        assert_eq!(rows[0].as_ref().map(|row| row.name.as_str()), Ok("AllGather"));
        assert!(rows[1].is_err());
        assert!(parse_nsys_csv("a,b,c\n1,2,3\n").is_err());
        assert!(parse_nsys_csv("Time (%),Total Time (ns),Foo\n").is_err());
    }
}
