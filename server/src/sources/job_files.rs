//! The only code that reads a job's own files (its output and error files on a shared file system):
//! the last bytes of a regular file that lies under one of the site's allowed roots and belongs to the
//! job's owner. Anything else is refused with its reason and nothing is read: a job cannot point the
//! server at another user's file, a link out of the roots, or a device.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// It lies outside every root the site lets slurmlens read (or none is configured).
    NotAllowed,
    /// There is no such file (deleted, or on a file system this host does not mount).
    Missing,
    /// It belongs to someone other than the job's owner.
    NotTheOwners,
    /// It is not a regular file.
    NotAFile,
    /// Reading it failed.
    Failed(String),
}

/// The end of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    pub text: String,
    pub size_bytes: u64,
    /// Whether the file holds more than `text` (it starts at a line's beginning then).
    pub truncated: bool,
}

/// The last `max_bytes` of `path`, if it lies under one of `roots` and belongs to `owner_uid`.
pub fn read_tail(path: &Path, roots: &[PathBuf], owner_uid: u32, max_bytes: u64) -> Result<Tail, Unread> {
    let real = match path.canonicalize() {
        Ok(real) => real,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // Said as missing only where the site lets it be read: elsewhere its existence is not ours to tell.
            return Err(if allowed(path, roots) { Unread::Missing } else { Unread::NotAllowed });
        }
        Err(error) => return Err(Unread::Failed(error.to_string())),
    };
    if !allowed(&real, roots) {
        return Err(Unread::NotAllowed);
    }
    let mut file = std::fs::File::open(&real).map_err(|error| Unread::Failed(error.to_string()))?;
    let meta = file.metadata().map_err(|error| Unread::Failed(error.to_string()))?;
    if !meta.is_file() {
        return Err(Unread::NotAFile);
    }
    if meta.uid() != owner_uid {
        return Err(Unread::NotTheOwners);
    }
    let size = meta.len();
    let from = size.saturating_sub(max_bytes);
    file.seek(SeekFrom::Start(from)).map_err(|error| Unread::Failed(error.to_string()))?;
    let mut bytes = Vec::with_capacity(usize::try_from(size - from).unwrap_or(0));
    file.take(max_bytes).read_to_end(&mut bytes).map_err(|error| Unread::Failed(error.to_string()))?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if from > 0
        && let Some(newline) = text.find('\n')
    {
        text.drain(..=newline);
    }
    Ok(Tail { text, size_bytes: size, truncated: from > 0 })
}

/// Whether `path` lies under one of `roots` (each taken as it really is, links resolved).
fn allowed(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().filter_map(|root| root.canonicalize().ok()).any(|root| path.starts_with(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid() -> u32 {
        std::fs::metadata("/proc/self").map(|meta| meta.uid()).unwrap_or(0)
    }

    #[test]
    fn a_file_under_a_root_is_read_from_its_last_lines_and_nothing_else_is() {
        let dir = std::env::temp_dir().join(format!("slurmlens-job-files-{}", std::process::id()));
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("a directory");
        let file = root.join("slurm-7.out");
        let lines: String = (0..1000).map(|i| format!("step {i}\n")).collect();
        std::fs::write(&file, format!("{lines}Traceback: CUDA error: an illegal memory access\n")).expect("written");
        let roots = [root.clone()];
        let tail = read_tail(&file, &roots, uid(), 64).expect("read");
        assert!(tail.truncated && tail.text.ends_with("illegal memory access\n"), "{tail:?}");
        assert!(tail.text.starts_with("step "), "starts at a line: {:?}", tail.text);
        assert_eq!(read_tail(&file, &roots, uid() + 1, 64), Err(Unread::NotTheOwners));
        assert_eq!(read_tail(&root.join("none"), &roots, uid(), 64), Err(Unread::Missing));
        let outside = dir.join("secret");
        std::fs::write(&outside, "x").expect("written");
        assert_eq!(read_tail(&outside, &roots, uid(), 64), Err(Unread::NotAllowed));
        // A link inside the root to a file outside it is the file outside it.
        let link = root.join("link.out");
        std::os::unix::fs::symlink(&outside, &link).expect("a link");
        assert_eq!(read_tail(&link, &roots, uid(), 64), Err(Unread::NotAllowed));
        assert_eq!(read_tail(&root, &roots, uid(), 64), Err(Unread::NotAFile));
        assert_eq!(read_tail(&file, &[], uid(), 64), Err(Unread::NotAllowed), "no root: nothing is read");
        std::fs::remove_dir_all(&dir).ok();
    }
}
