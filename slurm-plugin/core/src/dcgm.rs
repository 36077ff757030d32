//! dcgm-exporter's HPC job mapping (`--hpc-job-mapping-dir`): one file per GPU index, holding the ids of
//! the jobs on that GPU, one per line. dcgm-exporter then labels the GPU's series with `hpc_job`.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Adds `job_id` to the file of each GPU (kept if already there).
pub fn map_job(dir: &Path, gpus: &[u16], job_id: u32) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for gpu in gpus {
        let path = dir.join(gpu.to_string());
        let mut jobs = read_jobs(&path);
        if !jobs.contains(&job_id) {
            jobs.push(job_id);
        }
        write_jobs(dir, &path, &jobs)?;
    }
    Ok(())
}

/// Removes `job_id` from the file of each GPU; an empty file is deleted.
pub fn unmap_job(dir: &Path, gpus: &[u16], job_id: u32) -> Result<(), String> {
    for gpu in gpus {
        let path = dir.join(gpu.to_string());
        let jobs: Vec<u32> = read_jobs(&path).into_iter().filter(|&job| job != job_id).collect();
        if jobs.is_empty() {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("removing {}: {e}", path.display())),
            }
        } else {
            write_jobs(dir, &path, &jobs)?;
        }
    }
    Ok(())
}

fn read_jobs(path: &Path) -> Vec<u32> {
    fs::read_to_string(path).unwrap_or_default().split_whitespace().filter_map(|word| word.parse().ok()).collect()
}

/// Replaces the file atomically, so dcgm-exporter never reads half of it.
fn write_jobs(dir: &Path, path: &Path, jobs: &[u32]) -> Result<(), String> {
    let temporary = dir.join(format!(
        ".{}.{}",
        path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
        std::process::id()
    ));
    let mut file = fs::File::create(&temporary).map_err(|e| format!("creating {}: {e}", temporary.display()))?;
    let text: String = jobs.iter().map(|job| format!("{job}\n")).collect();
    file.write_all(text.as_bytes()).map_err(|e| format!("writing {}: {e}", temporary.display()))?;
    fs::rename(&temporary, path).map_err(|e| format!("renaming {}: {e}", temporary.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_unmaps_jobs_per_gpu() {
        let dir = std::env::temp_dir().join(format!("slurmlens-dcgm-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        map_job(&dir, &[1, 2], 10).expect("map");
        map_job(&dir, &[2], 11).expect("map");
        assert_eq!(fs::read_to_string(dir.join("1")).expect("file"), "10\n");
        assert_eq!(fs::read_to_string(dir.join("2")).expect("file"), "10\n11\n");
        unmap_job(&dir, &[1, 2], 10).expect("unmap");
        assert!(!dir.join("1").exists());
        assert_eq!(fs::read_to_string(dir.join("2")).expect("file"), "11\n");
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
