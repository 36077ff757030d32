//! Which log lines of a job's nodes matter, and what they say: NVIDIA XIDs, NCCL errors and
//! timeouts, OOM kills, links going down, and Slurm's daemons speaking about this job (exactly this
//! id: 1234 is not 12345). Pure text rules, applied to lines already scoped to the job's nodes and window.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

/// A log entry as read from the log store.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub time: DateTime<Utc>,
    pub node: Option<String>,
    pub message: String,
}

/// What an important line is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    Xid,
    NcclTimeout,
    NcclError,
    OomKill,
    LinkDown,
    Slurm,
}

impl LogKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Xid => "xid",
            Self::NcclTimeout => "nccl_timeout",
            Self::NcclError => "nccl_error",
            Self::OomKill => "oom_kill",
            Self::LinkDown => "link_down",
            Self::Slurm => "slurm",
        }
    }
}

/// A classified line: its kind and, for an XID, the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    pub kind: LogKind,
    pub xid: Option<u32>,
}

/// The XID code of an NVIDIA driver line: `NVRM: Xid (PCI:0000:3b:00): 79, pid=…`.
pub fn xid_code(message: &str) -> Option<u32> {
    let at = message.find("Xid")?;
    let rest = message[at + 3..].trim_start();
    // The PCI address in parentheses holds colons of its own; skip it whole.
    let rest = match rest.strip_prefix('(') {
        Some(inner) => &inner[inner.find(')')? + 1..],
        None => rest,
    };
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Each whole run of digits in `lower` that parses as a `u32`, with the text before and after it.
fn numbers(lower: &str) -> impl Iterator<Item = (&str, u32, &str)> {
    let bytes = lower.as_bytes();
    let mut index = 0;
    std::iter::from_fn(move || {
        loop {
            while index < bytes.len() && !bytes[index].is_ascii_digit() {
                index += 1;
            }
            if index >= bytes.len() {
                return None;
            }
            let start = index;
            while index < bytes.len() && bytes[index].is_ascii_digit() {
                index += 1;
            }
            if let Ok(number) = lower[start..index].parse::<u32>() {
                return Some((&lower[..start], number, &lower[index..]));
            }
        }
    })
}

/// The Slurm job ids a line names: `JobId=1234`, `StepId=1234.0`, `JOB 1234`, `job 1234`, `job_1234`,
/// `[1234.0]`, `[1234.batch]` (case-insensitive prefixes; the whole digit run is the id).
pub fn mentioned_jobs(message: &str) -> Vec<u32> {
    const PREFIXES: &[&str] = &["jobid=", "jobid ", "stepid=", "job ", "job_", "job=", "["];
    let lower = message.to_ascii_lowercase();
    numbers(&lower)
        .filter(|(before, _, after)| {
            PREFIXES.iter().any(|prefix| before.ends_with(prefix)) && (!before.ends_with('[') || bracketed_step(after))
        })
        .map(|(_, id, _)| id)
        .collect()
}

/// The user ids a line names: `uid=1001`, `UID:1001`, `uid 1001`, `uid_1001` (a cgroup path's
/// `/slurm/uid_1001/`), also as the tail of `euid=`/`auid=` (case-insensitive; the whole digit run).
pub fn mentioned_uids(message: &str) -> Vec<u32> {
    const PREFIXES: &[&str] = &["uid=", "uid:", "uid ", "uid_"];
    let lower = message.to_ascii_lowercase();
    numbers(&lower)
        .filter(|(before, _, _)| PREFIXES.iter().any(|prefix| before.ends_with(prefix)))
        .map(|(_, uid, _)| uid)
        .collect()
}

/// A span of time `[from, to]`, both ends included.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

/// What makes a log line one job's own: it names the job (`mentioned_jobs`, its cgroup `job_<id>`
/// included), the job's user id, or one of its cgroups' SLUIDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobMarks {
    pub job_id: u32,
    pub uid: u32,
    /// SLUIDs of its cgroups (Slurm ≥ 26.05), from the plugin's records.
    pub sluids: Vec<String>,
}

impl JobMarks {
    /// Whether `message` names this job, its user or its cgroup.
    pub fn named_in(&self, message: &str) -> bool {
        mentioned_jobs(message).contains(&self.job_id)
            || mentioned_uids(message).contains(&self.uid)
            || self
                .sluids
                .iter()
                .any(|sluid| message.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| word == sluid.as_str()))
    }
}

/// The lines of a job's nodes a viewer who is not staff may read (issue #15, H2): on a node and for the
/// time the job held it alone (no job the viewer may not see was there), every line; elsewhere only
/// lines that name the job, its user or its cgroup. Other tenants' lines on a shared node stay theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnLines {
    pub marks: JobMarks,
    /// Per node, the spans `[from, to]` of the window in which the job held it alone.
    pub alone: BTreeMap<String, Vec<Span>>,
}

impl OwnLines {
    /// Whether the viewer may read `entry`.
    pub fn admits(&self, entry: &LogEntry) -> bool {
        let alone = entry
            .node
            .as_ref()
            .and_then(|node| self.alone.get(node))
            .is_some_and(|spans| spans.iter().any(|(from, to)| *from <= entry.time && entry.time <= *to));
        alone || self.marks.named_in(&entry.message)
    }

    /// Whether every node was held alone for the whole window: nothing is then left out.
    pub fn whole(&self, nodes: &[String], window: Span) -> bool {
        nodes.iter().all(|node| self.alone.get(node).is_some_and(|spans| spans == &[window]))
    }
}

/// Per node of `nodes`, the spans of `window` not covered by any of `others` (a node and the span
/// another tenant's job held it, margins included): where the job held the node alone.
pub fn held_alone(
    nodes: &[String],
    window: Span,
    others: &[(String, DateTime<Utc>, DateTime<Utc>)],
) -> BTreeMap<String, Vec<Span>> {
    let mut alone = BTreeMap::new();
    for node in nodes {
        let mut busy: Vec<Span> = others
            .iter()
            .filter(|(other, from, to)| other == node && *from <= window.1 && *to >= window.0)
            .map(|(_, from, to)| (*from, *to))
            .collect();
        busy.sort();
        let mut spans = Vec::new();
        let mut cursor = window.0;
        for (from, to) in busy {
            if from > cursor {
                spans.push((cursor, from.min(window.1)));
            }
            cursor = cursor.max(to);
            if cursor >= window.1 {
                break;
            }
        }
        if cursor < window.1 {
            spans.push((cursor, window.1));
        }
        if !spans.is_empty() {
            alone.insert(node.clone(), spans);
        }
    }
    alone
}

/// After `[<digits>`: `.<step>]` with a step of 1–5 digits or a named step, as slurmstepd prefixes its
/// lines. A kernel stamp (`[1234567.890123]`, six digits of microseconds) and a bare `[3]` (NCCL's
/// device index) are not jobs.
fn bracketed_step(after: &str) -> bool {
    let Some(step) = after.strip_prefix('.').and_then(|rest| rest.split_once(']')).map(|(step, _)| step) else {
        return false;
    };
    ["batch", "extern", "interactive"].contains(&step)
        || (!step.is_empty() && step.len() <= 5 && step.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the line is about this job, another one, or none in particular.
fn about_job(message: &str, job_id: u32) -> (bool, bool) {
    let mentioned = mentioned_jobs(message);
    (mentioned.contains(&job_id), mentioned.iter().any(|id| *id != job_id))
}

/// Classifies one line of the job's nodes in its window, or `None` when it does not matter (or is
/// about another job sharing the node).
pub fn classify(message: &str, job_id: u32) -> Option<Classified> {
    let (this_job, other_job) = about_job(message, job_id);
    if other_job && !this_job {
        return None;
    }
    let lower = message.to_lowercase();
    let kind = |kind| Some(Classified { kind, xid: None });
    if message.contains("Xid")
        && (message.contains("NVRM") || lower.contains("xid ("))
        && let Some(code) = xid_code(message)
    {
        return Some(Classified { kind: LogKind::Xid, xid: Some(code) });
    }
    let nccl = message.contains("NCCL") || message.contains("nccl");
    if lower.contains("watchdog caught collective operation timeout")
        || (nccl && (lower.contains("timeout") || lower.contains("timed out")))
    {
        return kind(LogKind::NcclTimeout);
    }
    if message.contains("NCCL WARN")
        || message.contains("ncclRemoteError")
        || message.contains("ncclSystemError")
        || message.contains("ncclInternalError")
        || message.contains("ncclUnhandledCudaError")
        || lower.contains("nccl error")
    {
        return kind(LogKind::NcclError);
    }
    if lower.contains("out of memory: kill")
        || lower.contains("oom-kill:")
        || lower.contains("oom_kill event")
        || lower.contains("oom-kill event")
        || lower.contains("memory cgroup out of memory")
        || lower.contains("oom_reaper: reaped")
    {
        return kind(LogKind::OomKill);
    }
    if lower.contains("link down") || lower.contains("link is down") || lower.contains("link_down") {
        return kind(LogKind::LinkDown);
    }
    if this_job && lower.contains("slurm") {
        return kind(LogKind::Slurm);
    }
    None
}

/// The important lines of `entries`, in time order, without repeats.
pub fn important(entries: &[LogEntry], job_id: u32) -> Vec<(LogEntry, Classified)> {
    let mut found: Vec<(LogEntry, Classified)> = entries
        .iter()
        .filter_map(|entry| classify(&entry.message, job_id).map(|classified| (entry.clone(), classified)))
        .collect();
    found.sort_by(|a, b| (a.0.time, &a.0.node, &a.0.message).cmp(&(b.0.time, &b.0.node, &b.0.message)));
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: u32 = 1234;

    fn kind(message: &str) -> Option<&'static str> {
        classify(message, JOB).map(|classified| classified.kind.as_str())
    }

    #[test]
    fn reads_xid_codes_from_driver_lines() {
        let line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, name=python, GPU has fallen off the bus.";
        assert_eq!(classify(line, JOB), Some(Classified { kind: LogKind::Xid, xid: Some(79) }));
        let kernel = "kernel: [1234567.890123] NVRM: Xid (PCI:0000:b1:00): 48, pid='<unknown>', name=<unknown>, \
                      An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at \
                      partition 0, subpartition 0.";
        assert_eq!(classify(kernel, JOB).and_then(|c| c.xid), Some(48));
        assert_eq!(xid_code("NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp Exception"), Some(13));
        assert_eq!(xid_code("NVRM: Xid: 31, Ch 00000010, engmask 00000101"), Some(31));
        assert_eq!(xid_code("no code here"), None);
    }

    #[test]
    fn classifies_nccl_errors_and_timeouts() {
        assert_eq!(
            kind(
                "node01:48213:48901 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53212> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
            ),
            Some("nccl_error")
        );
        assert_eq!(
            kind(
                "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5 ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
            ),
            Some("nccl_error")
        );
        assert_eq!(
            kind(
                "[rank3]:[E1201 08:41:07.123456 48213 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600023 milliseconds before timing out."
            ),
            Some("nccl_timeout")
        );
    }

    #[test]
    fn classifies_oom_kills_and_link_downs() {
        assert_eq!(
            kind(
                "kernel: Out of memory: Killed process 48213 (python) total-vm:812345678kB, anon-rss:512345678kB, file-rss:0kB, shmem-rss:0kB, UID:1001 pgtables:1234kB oom_score_adj:0"
            ),
            Some("oom_kill")
        );
        assert_eq!(
            kind(
                "kernel: oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=step_0,mems_allowed=0-1,oom_memcg=/slurm/uid_1001/job_1234,task_memcg=/slurm/uid_1001/job_1234/step_0/task_0,task=python,pid=48213,uid=1001"
            ),
            Some("oom_kill")
        );
        assert_eq!(
            kind(
                "slurmstepd: error: Detected 1 oom_kill event in StepId=1234.0. Some of the step tasks have been OOM Killed."
            ),
            Some("oom_kill")
        );
        // Slurm 22.05's wording, as the lab's slurmd log holds it.
        assert_eq!(
            kind(
                "slurmstepd: [1234.batch] error: Detected 1 oom-kill event(s) in StepId=1234.batch. Some of your processes may have been killed by the cgroup out-of-memory handler."
            ),
            Some("oom_kill")
        );
        assert_eq!(kind("kernel: mlx5_core 0000:3b:00.0: Link down"), Some("link_down"));
        assert_eq!(kind("kernel: ib0: link down"), Some("link_down"));
        assert_eq!(kind("kernel: mlx5_core 0000:3b:00.0 enp59s0f0np0: Link up"), None);
    }

    #[test]
    fn slurm_lines_count_only_for_this_job_exactly() {
        assert_eq!(kind("slurmstepd: error: *** JOB 1234 ON n1 CANCELLED AT 2026-12-01T09:12:44 ***"), Some("slurm"));
        assert_eq!(
            kind("slurmd[2211]: launch task StepId=1234.0 request from UID:1001 GID:1001 HOST:10.0.0.1 PORT:52311"),
            Some("slurm")
        );
        assert_eq!(kind("slurmd[2211]: _run_prolog: prolog with lock for job 1234 ran for 0 seconds"), Some("slurm"));
        assert_eq!(kind("slurmstepd[9000]: [1234.0] done with job"), Some("slurm"));
        assert_eq!(kind("slurmd[2211]: Job JobId=1234 ended"), Some("slurm"));
        assert_eq!(kind("slurmstepd: error: *** JOB 12345 ON n1 CANCELLED AT 2026-12-01T09:12:44 ***"), None);
        assert_eq!(kind("slurmd[2211]: launch task StepId=123.0 request from UID:1001"), None);
        assert_eq!(kind("slurmd[2211]: JobId=41234 ended"), None);
        assert_eq!(kind("slurmd[2211]: CPU frequency setting not configured for this node"), None);
        assert_eq!(
            kind(
                "slurmstepd: error: Detected 1 oom_kill event in StepId=999.0. Some of the step tasks have been OOM Killed."
            ),
            None,
            "another job sharing the node"
        );
    }

    #[test]
    fn finds_job_mentions_in_every_shape() {
        assert_eq!(mentioned_jobs("JobId=1234 StepId=77.2 JOB 5 job_6 [8.0] [9] job=10"), [1234, 77, 5, 6, 8, 10]);
        assert!(mentioned_jobs("kernel: [1234567.890123] NVRM").is_empty(), "a kernel stamp is no step");
        assert_eq!(mentioned_jobs("slurmstepd: [1234.batch] done"), [1234]);
        assert!(mentioned_jobs("pid=1234 at 12:34").is_empty());
    }

    #[test]
    fn finds_user_ids_in_slurm_kernel_and_cgroup_shapes() {
        assert_eq!(mentioned_uids("launch task StepId=1234.0 request from UID:1001 GID:1001"), [1001]);
        assert_eq!(mentioned_uids("oom_memcg=/slurm/uid_1001/job_1234,task=python,pid=48213,uid=1002"), [1001, 1002]);
        assert_eq!(mentioned_uids("audit: auid=1003 ses=4"), [1003]);
        assert!(mentioned_uids("pid=1001 gid=1001 guid1001").is_empty());
    }

    #[test]
    fn own_lines_are_those_naming_the_job_its_user_or_cgroup_or_of_a_node_held_alone() {
        let at = |s: i64| DateTime::from_timestamp(1_764_576_000 + s, 0).expect("time");
        let window = (at(0), at(1000));
        let others = vec![("n1".to_string(), at(200), at(400)), ("n1".to_string(), at(350), at(600))];
        let alone = held_alone(&["n1".into(), "n2".into()], window, &others);
        assert_eq!(alone["n1"], [(at(0), at(200)), (at(600), at(1000))]);
        assert_eq!(alone["n2"], [window]);
        let covered = held_alone(&["n3".into()], window, &[("n3".into(), at(-10), at(2000))]);
        assert!(covered.is_empty(), "a node shared for the whole window is never held alone");
        let own = OwnLines { marks: JobMarks { job_id: JOB, uid: 1001, sluids: vec!["s5K1KKYAYG5D00".into()] }, alone };
        assert!(!own.whole(&["n1".into(), "n2".into()], window));
        assert!(own.whole(&["n2".into()], window));
        let entry = |s: i64, node: &str, message: &str| LogEntry {
            time: at(s),
            node: Some(node.into()),
            message: message.into(),
        };
        assert!(own.admits(&entry(300, "n1", "slurmstepd: [1234.batch] done")));
        assert!(own.admits(&entry(300, "n1", "oom_memcg=/slurm/uid_1001/job_77")), "its user's");
        assert!(own.admits(&entry(300, "n1", "cgroup /system.slice/n1_slurmstepd.scope/s5K1KKYAYG5D00/")));
        assert!(!own.admits(&entry(300, "n1", "slurmstepd: [999.batch] done")), "another tenant's job");
        assert!(!own.admits(&entry(300, "n1", "logger: canary")), "a line of no job, while shared");
        assert!(own.admits(&entry(100, "n1", "logger: canary")), "a line of no job, while held alone");
        assert!(own.admits(&entry(300, "n2", "kernel: ib0: link down")));
        assert!(!own.admits(&LogEntry { time: at(300), node: None, message: "no node".into() }));
    }

    #[test]
    fn important_lines_come_in_time_order_without_repeats() {
        let at = |s: i64| DateTime::from_timestamp(1_764_576_000 + s, 0).expect("time");
        let entry = |s, message: &str| LogEntry { time: at(s), node: Some("n1".into()), message: message.into() };
        let entries = vec![
            entry(30, "kernel: ib0: link down"),
            entry(10, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."),
            entry(20, "an ordinary line"),
            entry(10, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."),
        ];
        let found = important(&entries, JOB);
        let kinds: Vec<&str> = found.iter().map(|(_, c)| c.kind.as_str()).collect();
        assert_eq!(kinds, ["xid", "link_down"]);
    }
}
