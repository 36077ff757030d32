//! Exit codes: slurmdbd stores the raw wait(2) status; sacct prints `exit:signal`.

use std::fmt;

use slurmlens_slurm::signal::{OUT_OF_MEMORY_MARK, signal_name};

/// A decoded wait status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCode {
    pub status: u32,
    pub signal: u32,
}

impl ExitCode {
    /// Decodes as sacct does: `WIFSIGNALED`/`WTERMSIG`/`WEXITSTATUS`, and an exit status of 128 or
    /// more (a shell reporting "killed by signal N" as 128+N) printed as N, like sacct's `print.c`.
    pub fn from_wait_status(raw: i64) -> Self {
        // slurmdbd stores a C int; negative values (NO_VAL as int) carry no status.
        let raw = u32::try_from(raw).unwrap_or(0);
        let low = raw & 0x7f;
        let signal = if low != 0 && low != 0x7f { low } else { 0 };
        let status = (raw >> 8) & 0xff;
        Self { status: if status >= 128 { status - 128 } else { status }, signal }
    }
}

impl ExitCode {
    /// The end in words, for people: "exited with code 1", "was killed by SIGSEGV (signal 11: a
    /// segmentation fault …)".
    pub fn in_words(&self) -> String {
        if self.signal == OUT_OF_MEMORY_MARK {
            format!("ran out of memory (Slurm marks that as signal {OUT_OF_MEMORY_MARK}, no signal was sent)")
        } else if self.signal != 0 {
            let (name, meaning) = signal_name(self.signal);
            match meaning {
                Some(meaning) => format!("was killed by {name} (signal {}: {meaning})", self.signal),
                None => format!("was killed by {name} (signal {})", self.signal),
            }
        } else {
            format!("exited with code {}", self.status)
        }
    }
}

impl fmt::Display for ExitCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.status, self.signal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_the_statuses_seen_in_slurmdbd() {
        assert_eq!(ExitCode::from_wait_status(0).to_string(), "0:0");
        assert_eq!(ExitCode::from_wait_status(256).to_string(), "1:0");
        assert_eq!(ExitCode::from_wait_status(9).to_string(), "0:9");
        assert_eq!(ExitCode::from_wait_status(15).to_string(), "0:15");
        assert_eq!(ExitCode::from_wait_status(253).to_string(), "0:125");
        assert_eq!(ExitCode::from_wait_status(36608).to_string(), "15:0", "143 prints as 15, as in sacct");
        assert_eq!(ExitCode::from_wait_status(134 << 8).to_string(), "6:0");
        assert_eq!(ExitCode::from_wait_status(-2).to_string(), "0:0");
    }

    #[test]
    fn ends_read_in_words() {
        assert_eq!(ExitCode { status: 1, signal: 0 }.in_words(), "exited with code 1");
        assert!(ExitCode { status: 0, signal: 9 }.in_words().starts_with("was killed by SIGKILL (signal 9: "));
        assert!(ExitCode { status: 0, signal: 11 }.in_words().contains("SIGSEGV (signal 11: a segmentation fault"));
        assert_eq!(ExitCode { status: 0, signal: 60 }.in_words(), "was killed by an unnamed signal (signal 60)");
        assert!(ExitCode { status: 0, signal: 125 }.in_words().starts_with("ran out of memory"));
    }

    proptest! {
        #[test]
        fn exit_status_and_signal_round_trip(status in 0u32..128, signal in 1u32..127) {
            prop_assert_eq!(ExitCode::from_wait_status(i64::from(status << 8)), ExitCode { status, signal: 0 });
            prop_assert_eq!(ExitCode::from_wait_status(i64::from(signal)), ExitCode { status: 0, signal });
        }
    }
}
