//! Advice at submission: what the cli_filter asks the server while sbatch submits (the job's options,
//! with a MUNGE credential made as the submitting user) and the one line it may print.
//!
//! The request runs on its own thread from `pre_submit`; `post_submit` waits for it only until the
//! budget (counted from `pre_submit`) is spent, so a slow or absent server never delays submission by
//! more than the budget, and never fails it: every failure is silence.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::config::PluginConfig;
use crate::http::Endpoint;

/// The API route, below `public_url`.
pub const ADVICE_PATH: &str = "/api/v1/advice";
/// The payload the server requires of an advice credential.
pub const MUNGE_PAYLOAD: &str = "slurmlens:advice";
/// The header the credential travels in.
pub const MUNGE_HEADER: &str = "X-Munge-Credential";

/// The options of a job being submitted that advice reads, as `slurm_option_get` gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOptions {
    pub job_name: Option<String>,
    pub cluster: Option<String>,
    pub gpus: Option<String>,
    pub gpus_per_node: Option<String>,
    pub gres: Option<String>,
    pub nodes: Option<String>,
    pub time_limit: Option<String>,
    pub partition: Option<String>,
    /// `--uid` given by root submitting on a user's behalf: the credential is made for that user.
    pub uid: Option<String>,
}

impl JobOptions {
    /// The request's path and query (`/api/v1/advice?job_name=…`), `None` without a job name.
    pub fn query_path(&self) -> Option<String> {
        let name = self.job_name.as_deref().filter(|name| !name.is_empty())?;
        let mut query = format!("{ADVICE_PATH}?job_name={}", encode(name));
        let optional = [
            ("cluster", &self.cluster),
            ("gpus", &self.gpus),
            ("gpus_per_node", &self.gpus_per_node),
            ("gres", &self.gres),
            ("nodes", &self.nodes),
            ("time_limit", &self.time_limit),
            ("partition", &self.partition),
        ];
        for (key, value) in optional {
            if let Some(value) = value.as_deref().filter(|value| !value.is_empty()) {
                query.push_str(&format!("&{key}={}", encode(value)));
            }
        }
        Some(query)
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether advice is wanted: the site's `advice` key and the user's `SLURMLENS_ADVICE` (`off`, `0`,
/// `no`, `false` silence it).
pub fn wanted(config: &PluginConfig, get_env: impl Fn(&str) -> Option<String>) -> bool {
    let off = |value: &str| matches!(value.trim().to_ascii_lowercase().as_str(), "off" | "0" | "no" | "false");
    config.advice && !config.public_url.is_empty() && !get_env("SLURMLENS_ADVICE").is_some_and(|value| off(&value))
}

/// A request under way: its answer, and when the budget ends.
pub struct Pending {
    answer: Receiver<Result<Option<String>, String>>,
    deadline: Instant,
}

impl Pending {
    /// The line, if it arrived by the deadline (waits at most until then); `Err` says why none came
    /// (for the client's verbose log), `Ok(None)` that the server had nothing to say.
    pub fn line(self) -> Result<Option<String>, String> {
        let wait = self.deadline.saturating_duration_since(Instant::now());
        match self.answer.recv_timeout(wait) {
            Ok(answer) => answer.map(|line| line.map(|line| format!("slurmlens: advice: {line}"))),
            Err(_) => Err("no answer within advice_timeout_ms".into()),
        }
    }
}

/// Starts asking for advice on a thread of its own; returns at once. `None` when the thread could not
/// start or the options name no job.
pub fn start(config: &PluginConfig, options: &JobOptions) -> Option<Pending> {
    let path = options.query_path()?;
    let deadline = Instant::now() + config.advice_timeout;
    let endpoint = Endpoint::parse(&config.public_url).ok()?;
    let munge = config.munge.clone();
    let socket = config.munge_socket.clone();
    let uid = options.uid.clone();
    let connect_timeout = config.connect_timeout;
    let (sender, answer) = mpsc::channel();
    std::thread::Builder::new()
        .name("slurmlens-advice".into())
        .spawn(move || {
            let answer = credential(&munge, socket.as_deref(), uid.as_deref(), deadline)
                .ok_or_else(|| "munge made no credential".to_string())
                .and_then(|credential| {
                    let header = (MUNGE_HEADER, credential.as_str());
                    match endpoint.get(&path, header, connect_timeout, deadline) {
                        Ok((200, body)) => Ok(advice_line(&body)),
                        Ok((status, _)) => Err(format!("the server answered {status}")),
                        Err(error) => Err(error.0),
                    }
                });
            let _ = sender.send(answer);
        })
        .ok()?;
    Some(Pending { answer, deadline })
}

/// A MUNGE credential for advice, made by the `munge` client (as the calling user; with root's
/// `--uid`, as that user), or `None` when munged does not answer by the deadline.
fn credential(munge: &Path, socket: Option<&Path>, uid: Option<&str>, deadline: Instant) -> Option<String> {
    // A busy munged (every Slurm RPC of the host goes through it) can refuse a connection: the client
    // then fails at once, and asking again a moment later works. Asked until the budget ends.
    loop {
        if let Some(credential) = credential_once(munge, socket, uid, deadline) {
            return Some(credential);
        }
        if Instant::now() + Duration::from_millis(20) >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One try of [`credential`].
fn credential_once(munge: &Path, socket: Option<&Path>, uid: Option<&str>, deadline: Instant) -> Option<String> {
    let mut command = Command::new(munge);
    if let Some(socket) = socket {
        command.arg(format!("--socket={}", socket.display()));
    }
    if let Some(uid) = uid.filter(|uid| !uid.is_empty()) {
        command.arg(format!("--uid={uid}"));
    }
    let mut child = command
        .args(["--input=-", "--output=-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(MUNGE_PAYLOAD.as_bytes()).ok()?;
    // munged answers in milliseconds; one that does not is not waited for past the deadline.
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    let credential = text.trim().to_string();
    credential.starts_with("MUNGE:").then_some(credential)
}

/// The line of an answer `{"advice": {"line": …}}`; `None` for `{"advice": null}` or anything else.
pub fn advice_line(body: &[u8]) -> Option<String> {
    let answer: slurmlens_wire::AdviceAnswer = serde_json::from_slice(body).ok()?;
    let line = answer.advice?.line;
    // One line, never a terminal control sequence from the network.
    let clean: String = line.chars().filter(|c| !c.is_control()).take(300).collect();
    (!clean.is_empty()).then_some(clean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn options() -> JobOptions {
        JobOptions {
            job_name: Some("train run".into()),
            cluster: Some("lab".into()),
            gpus: Some("a100:8".into()),
            time_limit: Some("1-00:00:00".into()),
            ..JobOptions::default()
        }
    }

    #[test]
    fn asks_with_the_options_given() {
        assert_eq!(
            options().query_path().as_deref(),
            Some("/api/v1/advice?job_name=train%20run&cluster=lab&gpus=a100%3A8&time_limit=1-00%3A00%3A00")
        );
        assert_eq!(JobOptions::default().query_path(), None);
    }

    #[test]
    fn reads_the_line_and_nothing_else() {
        let body = br#"{"advice":{"kind":"idle_gpus","line":"your last 5 runs of `train` used at most 2 of 8 GPUs","runs":5}}"#;
        assert_eq!(advice_line(body).as_deref(), Some("your last 5 runs of `train` used at most 2 of 8 GPUs"));
        assert_eq!(advice_line(br#"{"advice":null}"#), None);
        assert_eq!(advice_line(b"<html>"), None);
        let sneaky = br#"{"advice":{"kind":"failures","line":"a\u001b[2Jb\nc","runs":3}}"#;
        assert_eq!(advice_line(sneaky).as_deref(), Some("a[2Jbc"));
    }

    #[test]
    fn the_site_and_the_user_can_turn_it_off() {
        let mut config = PluginConfig { public_url: "http://h".into(), ..PluginConfig::default() };
        assert!(wanted(&config, |_| None));
        assert!(!wanted(&config, |name| (name == "SLURMLENS_ADVICE").then(|| "off".into())));
        assert!(wanted(&config, |name| (name == "SLURMLENS_ADVICE").then(|| "on".into())));
        config.advice = false;
        assert!(!wanted(&config, |_| None));
    }

    /// A `munge` stand-in that prints a credential (the server side is what these tests look at).
    fn fake_munge(tag: &str) -> std::path::PathBuf {
        let script = std::env::temp_dir().join(format!("fake-munge-{tag}-{}", std::process::id()));
        std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\necho MUNGE:AAAA:\n").expect("write");
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        script
    }

    #[test]
    fn a_server_that_never_answers_costs_only_the_budget() {
        // It accepts the connection and then says nothing, for as long as the listener lives.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let script = fake_munge("silent");
        let config = PluginConfig {
            public_url: format!("http://127.0.0.1:{port}"),
            munge: script.clone(),
            advice_timeout: Duration::from_millis(200),
            ..PluginConfig::default()
        };
        let started = Instant::now();
        let pending = start(&config, &options()).expect("started");
        assert!(pending.line().is_err());
        // Waiting for the server would take as long as the listener below lives (the test's end).
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        drop(listener);
        let _ = std::fs::remove_file(script);
    }

    #[test]
    fn prints_what_a_server_answers_in_time() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut request = vec![0u8; 4096];
            let read = stream.read(&mut request).expect("read");
            let body = br#"{"advice":{"kind":"time_limit","line":"ran 2 min at most","runs":3}}"#;
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).expect("write");
            stream.write_all(body).expect("write");
            String::from_utf8_lossy(&request[..read]).to_string()
        });
        let script = fake_munge("answering");
        let config = PluginConfig {
            public_url: format!("http://127.0.0.1:{port}"),
            munge: script.clone(),
            advice_timeout: Duration::from_secs(5),
            ..PluginConfig::default()
        };
        let line = start(&config, &options()).expect("started").line();
        assert_eq!(line, Ok(Some("slurmlens: advice: ran 2 min at most".into())));
        let request = server.join().expect("server thread");
        assert!(request.starts_with("GET /api/v1/advice?job_name=train%20run&"), "{request}");
        assert!(request.contains("X-Munge-Credential: MUNGE:AAAA:\r\n"), "{request}");
        let _ = std::fs::remove_file(script);
    }
}
