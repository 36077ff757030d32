//! MUNGE credentials, verified by the site's munged through its `unmunge` client: who made one (their
//! uid), for what (the payload), and whether munged accepts it now. munged refuses a credential it has
//! decoded before (replay) and one older than its time-to-live, so a credential is single-use and
//! short-lived; one made with another key (another site, a forgery) does not decode at all.
//!
//! Why the client and not libmunge: the server then links no C library, and `unmunge` is on every
//! host that runs munged. The one process per credential costs a few milliseconds.

use std::path::PathBuf;
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

/// What a credential must carry as its payload to be taken for advice: a credential made for anything
/// else (Slurm's own, say) is refused even when munged decodes it.
pub const ADVICE_PAYLOAD: &str = "slurmlens:advice";
/// No credential is longer (a `MUNGE:` armour around a few hundred bytes of base64).
const MAX_CREDENTIAL: usize = 4096;

/// How to reach munged.
#[derive(Debug, Clone)]
pub struct Munge {
    /// The `unmunge` client.
    pub unmunge: PathBuf,
    /// munged's socket; `None`: the client's default.
    pub socket: Option<PathBuf>,
}

/// A credential munged decoded and accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub uid: u32,
    pub payload: String,
}

/// Why a credential is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MungeError {
    /// munged refused it (bad, expired, replayed, from another key): `0` is munged's status.
    #[error("MUNGE credential refused: {0}")]
    Refused(String),
    /// munged or its client could not be asked.
    #[error("munged is unavailable: {0}")]
    Unavailable(String),
}

impl Munge {
    /// Decodes `credential` (`MUNGE:…:`) through munged. A busy munged (every Slurm RPC of the host
    /// goes through it) can refuse the connection: that is asked again, twice, a moment later; a
    /// credential munged read is never sent twice (it would be a replay).
    pub async fn decode(&self, credential: &str) -> Result<Decoded, MungeError> {
        let mut tries = 0;
        loop {
            match self.decode_once(credential).await {
                Err(MungeError::Unavailable(_)) if tries < 2 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                answer => return answer,
            }
        }
    }

    async fn decode_once(&self, credential: &str) -> Result<Decoded, MungeError> {
        let credential = credential.trim();
        let armoured = credential.strip_prefix("MUNGE:").and_then(|rest| rest.strip_suffix(':'));
        let well_formed = armoured.is_some_and(|body| {
            !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        });
        if credential.len() > MAX_CREDENTIAL || !well_formed {
            return Err(MungeError::Refused("not a MUNGE credential".into()));
        }
        let mut command = tokio::process::Command::new(&self.unmunge);
        if let Some(socket) = &self.socket {
            command.arg(format!("--socket={}", socket.display()));
        }
        command
            .args(["--numeric", "--keys=STATUS,UID"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let unavailable = |e: std::io::Error| MungeError::Unavailable(format!("{}: {e}", self.unmunge.display()));
        let mut child = command.spawn().map_err(unavailable)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(credential.as_bytes()).await.map_err(unavailable)?;
        }
        let output = child.wait_with_output().await.map_err(unavailable)?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        parse_output(&stdout, &stderr)
    }
}

/// Reads `unmunge --numeric --keys=STATUS,UID`: metadata lines, a blank line, the payload. Status 0
/// is success; any other (expired 15, replayed 17, …) is a refusal; no status at all (munged down)
/// is unavailability.
fn parse_output(stdout: &str, stderr: &str) -> Result<Decoded, MungeError> {
    let (metadata, payload) = stdout.split_once("\n\n").unwrap_or((stdout, ""));
    let value = |key: &str| metadata.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(':').map(str::trim));
    let Some(status) = value("STATUS") else {
        let message = stderr.trim().trim_start_matches("unmunge: ").trim_start_matches("Error: ");
        // A credential munged cannot even read is refused; a munged that cannot be reached is unavailable.
        return if message.contains("socket") || message.contains("connect") || message.is_empty() {
            Err(MungeError::Unavailable(message.to_string()))
        } else {
            Err(MungeError::Refused(message.to_string()))
        };
    };
    if status != "0" {
        return Err(MungeError::Refused(format!("munged status {status}")));
    }
    let uid = value("UID")
        .and_then(|uid| uid.parse().ok())
        .ok_or_else(|| MungeError::Refused("munged named no uid".into()))?;
    Ok(Decoded { uid, payload: payload.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_decoded_credential() {
        let decoded = parse_output("STATUS:          0\nUID:             1000\n\nslurmlens:advice", "");
        assert_eq!(decoded, Ok(Decoded { uid: 1000, payload: ADVICE_PAYLOAD.into() }));
    }

    #[test]
    fn refuses_replayed_and_unreadable_credentials() {
        let replayed = parse_output("STATUS:          17\nUID:             0\n\nslurmlens:advice", "");
        assert_eq!(replayed, Err(MungeError::Refused("munged status 17".into())));
        let garbage = parse_output("", "unmunge: Error: Failed to match armor prefix\n");
        assert!(matches!(garbage, Err(MungeError::Refused(_))), "{garbage:?}");
        let down = parse_output("", "unmunge: Error: Failed to access \"/run/munge/munge.socket.2\": No such file\n");
        assert!(matches!(down, Err(MungeError::Unavailable(_))), "{down:?}");
    }

    #[tokio::test]
    async fn refuses_what_is_not_a_credential_without_asking() {
        let munge = Munge { unmunge: "/nonexistent/unmunge".into(), socket: None };
        for bad in ["", "MUNGE:", "MUNGE:abc", "MUNGE:a b:", "Bearer x"] {
            assert!(matches!(munge.decode(bad).await, Err(MungeError::Refused(_))), "{bad}");
        }
    }
}
