//! GPUs as Slurm names them: an index on a node (`SLURM_JOB_GPUS`, `IDX:` in `scontrol -d`).

use chrono::{DateTime, Utc};

/// One GPU of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuRef {
    pub node: String,
    pub index: u16,
}

/// A record that a job (or one of its steps) held a GPU, from the node it ran on.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuAllocation {
    pub job_id: u32,
    /// `job` for the whole allocation, else the step suffix (`batch`, `0`, …).
    pub step: String,
    pub gpu: GpuRef,
    pub uuid: Option<String>,
    pub cgroup_path: Option<String>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// Parses Slurm's GPU index lists: `0,1,2`, `0-3`, `1-2,5` (as in `SLURM_JOB_GPUS` and `IDX:`).
pub fn parse_gpu_indices(text: &str) -> Result<Vec<u16>, String> {
    let mut indices = Vec::new();
    for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let parse = |value: &str| value.trim().parse::<u16>().map_err(|_| format!("`{text}` is not a GPU index list"));
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if hi < lo || hi - lo > 1024 {
            return Err(format!("`{text}` is not a GPU index list"));
        }
        indices.extend(lo..=hi);
    }
    indices.sort_unstable();
    indices.dedup();
    Ok(indices)
}

/// Writes GPU indices as Slurm does (`0-3,5`), the inverse of `parse_gpu_indices`.
pub fn format_gpu_indices(indices: &[u16]) -> String {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(u16, u16)> = Vec::new();
    for index in sorted {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == index => *hi = index,
            _ => runs.push((index, index)),
        }
    }
    runs.iter()
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_gpu_index_lists() {
        assert_eq!(parse_gpu_indices("0,1,2"), Ok(vec![0, 1, 2]));
        assert_eq!(parse_gpu_indices("1-2,5"), Ok(vec![1, 2, 5]));
        assert_eq!(parse_gpu_indices(""), Ok(vec![]));
        assert!(parse_gpu_indices("a").is_err());
        assert!(parse_gpu_indices("3-1").is_err());
        assert!(parse_gpu_indices("-1").is_err());
    }

    #[test]
    fn formats_index_lists_as_slurm_does() {
        assert_eq!(format_gpu_indices(&[0, 1, 2, 3, 4, 5, 6, 7]), "0-7");
        assert_eq!(format_gpu_indices(&[5, 1, 2]), "1-2,5");
        assert_eq!(format_gpu_indices(&[3]), "3");
        for text in ["0-7", "1-2,5", "0,2,4"] {
            assert_eq!(format_gpu_indices(&parse_gpu_indices(text).expect("valid")), text);
        }
    }
}
