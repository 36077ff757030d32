//! Trace batches on their way to the server: each is written to the spool folder first (one JSON file,
//! renamed into place whole), then sent oldest first; a file leaves the spool when the server took it
//! (2xx) or refused its records for good (400). While the server is away files wait, bounded by size:
//! past the bound the oldest go first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slurmlens_plugin_core::http::Endpoint;
use slurmlens_wire::TraceBatch;

/// Records per batch (the server takes up to 10,000).
pub const BATCH_RECORDS: usize = 5000;

/// The spool folder and its bound.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
}

/// What one delivery round did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub sent: usize,
    pub refused: usize,
    pub left: usize,
    /// Why the round stopped early, for the log.
    pub failure: Option<String>,
}

impl Spool {
    pub fn new(dir: &Path, max_bytes: u64) -> Self {
        Self { dir: dir.to_path_buf(), max_bytes }
    }

    /// Writes `batch` into the spool, then drops the oldest files past the bound; the files dropped.
    pub fn push(&self, batch: &TraceBatch) -> std::io::Result<usize> {
        std::fs::create_dir_all(&self.dir)?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        let name = format!("batch-{nanos:024}.json");
        let temporary = self.dir.join(format!(".{name}.tmp"));
        std::fs::write(&temporary, serde_json::to_vec(batch).map_err(std::io::Error::other)?)?;
        std::fs::rename(&temporary, self.dir.join(name))?;
        let mut files = self.files();
        let mut total: u64 = files.iter().map(|(_, size)| size).sum();
        let mut dropped = 0;
        while total > self.max_bytes && files.len() > 1 {
            let (oldest, size) = files.remove(0);
            if std::fs::remove_file(&oldest).is_ok() {
                dropped += 1;
            }
            total -= size;
        }
        Ok(dropped)
    }

    /// The spooled files, oldest first, with their sizes.
    pub fn files(&self) -> Vec<(PathBuf, u64)> {
        let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                name.starts_with("batch-") && name.ends_with(".json")
            })
            .map(|entry| (entry.path(), entry.metadata().map_or(0, |m| m.len())))
            .collect();
        files.sort();
        files
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.files().iter().map(|(_, size)| size).sum()
    }

    /// Sends the spooled batches oldest first to `POST /api/v1/traces`, stopping at the first that does
    /// not arrive.
    pub fn deliver(&self, endpoint: &Endpoint, secret: &str) -> Delivered {
        let mut report = Delivered::default();
        let files = self.files();
        for (index, (path, _)) in files.iter().enumerate() {
            let Ok(body) = std::fs::read(path) else { continue };
            let deadline = Instant::now() + Duration::from_secs(10);
            match endpoint.post_json("/api/v1/traces", secret, body, Duration::from_secs(3), deadline) {
                Ok(status) if (200..300).contains(&status) => {
                    let _ = std::fs::remove_file(path);
                    report.sent += 1;
                }
                Ok(400) => {
                    tracing::warn!(file = %path.display(), "the server refused a trace batch (400): dropped");
                    let _ = std::fs::remove_file(path);
                    report.refused += 1;
                }
                Ok(status) => {
                    report.failure = Some(format!("the server answered {status}"));
                    report.left = files.len() - index;
                    break;
                }
                Err(error) => {
                    report.failure = Some(error.to_string());
                    report.left = files.len() - index;
                    break;
                }
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: usize) -> TraceBatch {
        let record = slurmlens_wire::TraceRecord {
            interval_start: chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a time"),
            interval_s: 10,
            gpu: 0,
            pid: 1,
            cgroup: None,
            job_id: Some(1),
            category: "sync".into(),
            name: "cudaDeviceSynchronize".into(),
            count: 1,
            total_ns: 5,
            max_ns: 5,
            bytes: 0,
        };
        TraceBatch { cluster: "lab".into(), node: "n1".into(), records: vec![record; records] }
    }

    #[test]
    fn batches_wait_while_the_server_is_away_and_the_oldest_go_past_the_bound() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let one = serde_json::to_vec(&batch(10)).expect("json").len() as u64;
        let spool = Spool::new(dir.path(), one * 3 + one / 2);
        for _ in 0..5 {
            spool.push(&batch(10)).expect("spooled");
        }
        assert_eq!(spool.files().len(), 3, "bounded at 3 batches");
        // Nothing listens on port 9 of loopback: every batch stays.
        let endpoint = Endpoint::parse("http://127.0.0.1:9").expect("a URL");
        let report = spool.deliver(&endpoint, "secret");
        assert_eq!((report.sent, report.left), (0, 3), "{report:?}");
        assert!(report.failure.is_some());
    }
}
