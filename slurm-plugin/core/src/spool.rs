//! The node-local spool: records the server did not take wait here, one JSON line each, until a later
//! hook delivers them.
//!
//! Files in the spool folder:
//! - `pending.jsonl`: records are appended here, under the folder's lock (`.lock`).
//! - `batch-<nanos>-<pid>.jsonl`: a closed set of records (nobody appends): `pending.jsonl` renamed by a
//!   deliverer, or what a deliverer could not deliver.
//! - `sending-<pid>-<nanos>.jsonl`: claimed by the live process `<pid>`; a dead owner's file is claimed
//!   again. Claims are renames, so two deliverers never send the same file. A record leaves the spool only
//!   after the server answered 2xx for it (or 400: it can never be delivered).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slurmlens_wire::GpuAllocationRecord;

const PENDING: &str = "pending.jsonl";
const LOCK: &str = ".lock";
/// Records per POST when a spool is delivered.
pub const BATCH: usize = 200;

/// A spool folder.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
}

/// What the server did with one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// 2xx: delivered.
    Accepted,
    /// The server refused the records themselves (400): resending cannot help, they are dropped.
    Rejected(String),
    /// No answer, 5xx, 401, …: keep them for later.
    Failed(String),
}

/// What one delivery round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    pub delivered: usize,
    pub dropped: usize,
    pub kept: usize,
    /// Why the round stopped early or what was dropped, for the log.
    pub notes: Vec<String>,
}

impl Spool {
    pub fn new(dir: PathBuf, max_bytes: u64) -> Self {
        Self { dir, max_bytes }
    }

    fn ensure_dir(&self) -> std::io::Result<()> {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir)
    }

    /// Takes the folder's lock, polling until `deadline` (holders only rename or append a line).
    fn lock(&self, deadline: Instant) -> std::io::Result<File> {
        self.ensure_dir()?;
        let file = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(self.dir.join(LOCK))?;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "spool lock busy"));
                }
                Err(fs::TryLockError::Error(e)) => return Err(e),
            }
        }
    }

    /// Bytes held by the spool's record files.
    fn size(&self) -> u64 {
        let Ok(entries) = fs::read_dir(&self.dir) else { return 0 };
        entries.flatten().filter_map(|entry| entry.metadata().ok()).map(|meta| meta.len()).sum()
    }

    /// Appends records as JSON lines. Refuses (the caller logs the loss) when the spool is full.
    pub fn append(&self, records: &[GpuAllocationRecord], deadline: Instant) -> Result<(), String> {
        let mut lines = Vec::new();
        for record in records {
            serde_json::to_writer(&mut lines, record).map_err(|e| format!("encoding a record: {e}"))?;
            lines.push(b'\n');
        }
        let _lock = self.lock(deadline).map_err(|e| format!("locking {}: {e}", self.dir.display()))?;
        let size = self.size();
        if size + lines.len() as u64 > self.max_bytes {
            return Err(format!("spool {} is full ({size} bytes, limit {})", self.dir.display(), self.max_bytes));
        }
        let path = self.dir.join(PENDING);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        // One write per call: concurrent appenders are serialized by the lock anyway.
        file.write_all(&lines).map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// True when records wait for delivery (a cheap check before taking any lock).
    pub fn has_records(&self) -> bool {
        let Ok(entries) = fs::read_dir(&self.dir) else { return false };
        entries.flatten().any(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name == PENDING || name.starts_with("batch-") || name.starts_with("sending-")
        })
    }

    /// Claims every deliverable file for this process: `pending.jsonl` (under the lock), closed batches and
    /// the files of dead claimants. Returns the claimed paths, oldest first.
    pub fn claim(&self, deadline: Instant) -> Result<Vec<PathBuf>, String> {
        let me = std::process::id();
        {
            let _lock = self.lock(deadline).map_err(|e| format!("locking {}: {e}", self.dir.display()))?;
            let pending = self.dir.join(PENDING);
            if pending.exists() {
                let batch = self.dir.join(format!("batch-{:020}-{me}.jsonl", nanos()));
                fs::rename(&pending, &batch).map_err(|e| format!("claiming {}: {e}", pending.display()))?;
            }
        }
        let mut names: Vec<String> = fs::read_dir(&self.dir)
            .map_err(|e| format!("listing {}: {e}", self.dir.display()))?
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".jsonl"))
            .collect();
        names.sort_by_key(|name| order_key(name));
        let mut claimed = Vec::new();
        for name in names {
            let take = match name.strip_prefix("sending-") {
                Some(rest) => rest
                    .split('-')
                    .next()
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| pid != me && !Path::new(&format!("/proc/{pid}")).exists()),
                None => name.starts_with("batch-"),
            };
            if !take {
                continue;
            }
            let target = self.dir.join(format!("sending-{me}-{:020}.jsonl", nanos()));
            // A rename that fails means another deliverer took the file first.
            if fs::rename(self.dir.join(&name), &target).is_ok() {
                claimed.push(target);
            }
        }
        Ok(claimed)
    }

    /// Sends claimed files in batches through `send` until `deadline`. Records not delivered go back as a
    /// closed batch; a claimed file is removed only once every record in it is delivered or returned.
    pub fn deliver(
        &self,
        claimed: &[PathBuf],
        deadline: Instant,
        mut send: impl FnMut(&[GpuAllocationRecord]) -> Delivery,
    ) -> DeliveryReport {
        let mut report = DeliveryReport::default();
        let mut stopped = false;
        for path in claimed {
            let text = match fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) => {
                    report.notes.push(format!("reading {}: {e}", path.display()));
                    continue;
                }
            };
            let mut records = Vec::new();
            for line in text.lines().filter(|line| !line.trim().is_empty()) {
                match serde_json::from_str::<GpuAllocationRecord>(line) {
                    Ok(record) => records.push(record),
                    Err(e) => {
                        report.dropped += 1;
                        report.notes.push(format!("dropped a garbled spool line in {}: {e}", path.display()));
                    }
                }
            }
            let mut kept = Vec::new();
            for chunk in records.chunks(BATCH) {
                if stopped || Instant::now() >= deadline {
                    stopped = true;
                    kept.extend_from_slice(chunk);
                    continue;
                }
                match send(chunk) {
                    Delivery::Accepted => report.delivered += chunk.len(),
                    Delivery::Rejected(why) => {
                        report.dropped += chunk.len();
                        report.notes.push(format!("server refused {} spooled records: {why}", chunk.len()));
                    }
                    Delivery::Failed(why) => {
                        stopped = true;
                        report.notes.push(format!("delivery stopped: {why}"));
                        kept.extend_from_slice(chunk);
                    }
                }
            }
            report.kept += kept.len();
            if let Err(e) = self.return_records(&kept).and_then(|()| fs::remove_file(path).map_err(|e| e.to_string())) {
                report.notes.push(format!("finishing {}: {e}", path.display()));
            }
        }
        report
    }

    /// Writes undelivered records as a new closed batch (atomically: a temporary name, then a rename).
    fn return_records(&self, records: &[GpuAllocationRecord]) -> Result<(), String> {
        if records.is_empty() {
            return Ok(());
        }
        let me = std::process::id();
        let stamp = nanos();
        let temporary = self.dir.join(format!("tmp-{me}-{stamp:020}"));
        let mut lines = Vec::new();
        for record in records {
            serde_json::to_writer(&mut lines, record).map_err(|e| format!("encoding a record: {e}"))?;
            lines.push(b'\n');
        }
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(|e| format!("creating {}: {e}", temporary.display()))?;
        file.write_all(&lines).map_err(|e| format!("writing {}: {e}", temporary.display()))?;
        fs::rename(&temporary, self.dir.join(format!("batch-{stamp:020}-{me}.jsonl")))
            .map_err(|e| format!("renaming {}: {e}", temporary.display()))
    }
}

/// Oldest first: the timestamp inside the name (`batch-<nanos>-…`, `sending-<pid>-<nanos>`).
fn order_key(name: &str) -> u128 {
    let stem = name.trim_end_matches(".jsonl");
    let parts: Vec<&str> = stem.split('-').collect();
    let field = match parts.first() {
        Some(&"batch") => parts.get(1),
        Some(&"sending") => parts.get(2),
        _ => None,
    };
    field.and_then(|value| value.parse().ok()).unwrap_or(0)
}

fn nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use slurmlens_wire::{AllocatedGpu, GpuAllocationEvent};

    fn record(job_id: u32) -> GpuAllocationRecord {
        GpuAllocationRecord {
            cluster: "lab".into(),
            node: "n1".into(),
            job_id,
            step: "job".into(),
            event: GpuAllocationEvent::Start,
            at: Utc::now(),
            gpus: vec![AllocatedGpu { index: 0, uuid: None }],
            cgroup_path: None,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("slurmlens-spool-{name}-{}-{}", std::process::id(), nanos()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn delivers_every_record_once_and_keeps_what_failed() {
        let dir = temp_dir("deliver");
        let spool = Spool::new(dir.clone(), 1 << 20);
        for job_id in 1..=5 {
            spool.append(&[record(job_id)], soon()).expect("append");
        }
        assert!(spool.has_records());
        let claimed = spool.claim(soon()).expect("claim");
        assert_eq!(claimed.len(), 1);
        // A second deliverer finds nothing to claim while the first holds the file.
        assert!(Spool::new(dir.clone(), 1 << 20).claim(soon()).expect("claim").is_empty());
        let mut calls = 0;
        let report = spool.deliver(&claimed, soon(), |batch| {
            calls += 1;
            assert_eq!(batch.len(), 5);
            Delivery::Failed("server down".into())
        });
        assert_eq!((report.delivered, report.kept, calls), (0, 5, 1));
        let mut seen = Vec::new();
        let claimed = spool.claim(soon()).expect("claim");
        let report = spool.deliver(&claimed, soon(), |batch| {
            seen.extend(batch.iter().map(|record| record.job_id));
            Delivery::Accepted
        });
        assert_eq!(report.delivered, 5);
        assert_eq!(seen, [1, 2, 3, 4, 5]);
        assert!(!spool.has_records());
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn drops_garbled_lines_and_refuses_beyond_the_limit() {
        let dir = temp_dir("garbled");
        let spool = Spool::new(dir.clone(), 400);
        spool.append(&[record(1)], soon()).expect("append");
        fs::OpenOptions::new().append(true).open(dir.join(PENDING)).expect("open").write_all(b"{\"half\n").expect("w");
        let error = spool.append(&[record(2), record(3), record(4)], soon()).expect_err("over the limit");
        assert!(error.contains("full"), "{error}");
        let claimed = spool.claim(soon()).expect("claim");
        let report = spool.deliver(&claimed, soon(), |_| Delivery::Accepted);
        assert_eq!((report.delivered, report.dropped), (1, 1));
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn reclaims_the_files_of_a_dead_deliverer() {
        let dir = temp_dir("stale");
        let spool = Spool::new(dir.clone(), 1 << 20);
        spool.append(&[record(7)], soon()).expect("append");
        // pid 4194305 is above Linux's pid_max: never alive.
        fs::rename(dir.join(PENDING), dir.join("sending-4194305-00000000000000000001.jsonl")).expect("rename");
        let claimed = spool.claim(soon()).expect("claim");
        assert_eq!(claimed.len(), 1);
        let report = spool.deliver(&claimed, soon(), |_| Delivery::Accepted);
        assert_eq!(report.delivered, 1);
        fs::remove_dir_all(dir).expect("cleanup");
    }
}
