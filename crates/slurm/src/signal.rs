//! Signals by name: what killed a job, in the words `kill -l` and sacct's readers use.

/// A signal's name and, for the ones a job commonly dies of, what it usually means.
pub fn signal_name(signal: u32) -> (&'static str, Option<&'static str>) {
    match signal {
        1 => ("SIGHUP", Some("its terminal or session went away")),
        2 => ("SIGINT", Some("interrupted, as by Ctrl-C")),
        3 => ("SIGQUIT", None),
        4 => ("SIGILL", Some("an illegal instruction: a binary built for another CPU, or a corrupted program")),
        6 => ("SIGABRT", Some("the program aborted itself, e.g. a failed assertion or an uncaught exception")),
        7 => ("SIGBUS", Some("a bus error: a bad memory access, often a truncated memory-mapped file")),
        8 => ("SIGFPE", Some("an arithmetic error such as an integer division by zero")),
        9 => ("SIGKILL", Some("killed outright, by Slurm, the kernel's out-of-memory killer or a user")),
        10 => ("SIGUSR1", None),
        11 => ("SIGSEGV", Some("a segmentation fault: the program read or wrote memory it does not own")),
        12 => ("SIGUSR2", None),
        13 => ("SIGPIPE", Some("it wrote to a pipe or socket whose reader had gone")),
        14 => ("SIGALRM", None),
        15 => ("SIGTERM", Some("asked to stop, e.g. by scancel or at the time limit")),
        24 => ("SIGXCPU", Some("it ran past its CPU time limit")),
        25 => ("SIGXFSZ", Some("it wrote a file past its size limit")),
        _ => ("an unnamed signal", None),
    }
}

/// Slurm's mark for a step its memory cgroup ran out of memory in: no signal of the kernel's, but
/// `SIG_OOM` (253) less the signal flag (128), which sacct prints as `0:125`.
pub const OUT_OF_MEMORY_MARK: u32 = 125;

/// A sacct exit code (`status:signal`) in words, for a page beside the code: "killed by SIGKILL",
/// "exit status 1"; `None` for a clean `0:0` or text that is not an exit code.
pub fn exit_code_in_words(code: &str) -> Option<String> {
    let (status, signal) = code.split_once(':')?;
    let (status, signal): (u32, u32) = (status.parse().ok()?, signal.parse().ok()?);
    match (status, signal) {
        (0, 0) => None,
        (_, 0) => Some(format!("exit status {status}")),
        (_, OUT_OF_MEMORY_MARK) => Some("out of memory: Slurm's mark, no signal".to_string()),
        (_, signal) => Some(format!("killed by {}", signal_name(signal).0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_read_in_words() {
        assert_eq!(exit_code_in_words("0:9").as_deref(), Some("killed by SIGKILL"));
        assert_eq!(exit_code_in_words("1:0").as_deref(), Some("exit status 1"));
        assert_eq!(exit_code_in_words("0:0"), None);
        assert_eq!(exit_code_in_words("n/a"), None);
        assert_eq!(signal_name(11).0, "SIGSEGV");
        assert_eq!(exit_code_in_words("0:125").as_deref(), Some("out of memory: Slurm's mark, no signal"));
    }
}
