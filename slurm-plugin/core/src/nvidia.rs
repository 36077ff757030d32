//! GPU UUIDs from `nvidia-smi`, when the node has it: UUIDs join GPUs with dcgm-exporter's series
//! even where Slurm's index and NVML's order differ.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where `nvidia-smi` usually lives, when the configuration names none.
const USUAL_PLACES: [&str; 3] = ["/usr/bin/nvidia-smi", "/usr/local/bin/nvidia-smi", "/opt/nvidia/bin/nvidia-smi"];

/// The program to run: the configured path (`""` disables), else the first usual place that exists.
pub fn locate(configured: Option<&Path>) -> Option<PathBuf> {
    match configured {
        Some(path) if path.as_os_str().is_empty() => None,
        Some(path) => Some(path.to_path_buf()),
        None => USUAL_PLACES.iter().map(PathBuf::from).find(|path| path.is_file()),
    }
}

/// `index → UUID` for every GPU of the node; killed at `deadline` (a cold driver can take seconds).
pub fn uuids(program: &Path, deadline: Instant) -> Result<BTreeMap<u16, String>, String> {
    let mut child = Command::new(program)
        .args(["--query-gpu=index,uuid", "--format=csv,noheader"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("running {}: {e}", program.display()))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} did not answer in time", program.display()));
            }
            Err(e) => return Err(format!("waiting for {}: {e}", program.display())),
        }
    };
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout.read_to_string(&mut output).map_err(|e| format!("reading {}: {e}", program.display()))?;
    }
    if !status.success() {
        return Err(format!("{} exited with {status}", program.display()));
    }
    Ok(parse(&output))
}

/// Lines `0, GPU-5c3d…`; anything else is skipped.
fn parse(output: &str) -> BTreeMap<u16, String> {
    output
        .lines()
        .filter_map(|line| line.split_once(','))
        .filter_map(|(index, uuid)| Some((index.trim().parse().ok()?, uuid.trim().to_string())))
        .filter(|(_, uuid): &(u16, String)| uuid.starts_with("GPU-") || uuid.starts_with("MIG-"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_index_uuid_lines() {
        let map = parse("0, GPU-aaaa\n1, GPU-bbbb\nNo devices were found\n");
        assert_eq!(map.get(&0).map(String::as_str), Some("GPU-aaaa"));
        assert_eq!(map.get(&1).map(String::as_str), Some("GPU-bbbb"));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn kills_a_program_that_hangs() {
        let started = Instant::now();
        let result = uuids(Path::new("/bin/sleep"), started + Duration::from_millis(100));
        // `sleep --query-gpu…` fails at once; either way the call returns promptly.
        assert!(result.is_err() || result.is_ok_and(|map| map.is_empty()));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(locate(Some(Path::new(""))), None);
    }
}
