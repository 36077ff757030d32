//! A minimal HTTP/1.1 client on std's `TcpStream`: one POST per connection, bounded by a deadline.
//!
//! Why not a client crate: this code runs inside Slurm's root processes (the job prolog and epilog), where
//! every dependency is code to audit and every hidden wait delays a job. std gives connect and I/O
//! timeouts; the one wait it cannot bound, name resolution, is bounded by running the request on a
//! worker thread and waiting for its answer only until the deadline.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Where records go: an `http://host[:port][/prefix]` URL, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    port: u16,
    prefix: String,
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Endpoint {
    /// Parses a base URL. Only `http://`: see the crate README for TLS.
    pub fn parse(url: &str) -> Result<Self, HttpError> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| HttpError(format!("`{url}`: only http:// URLs are supported")))?;
        let (authority, prefix) = rest.split_once('/').map_or((rest, ""), |(authority, path)| (authority, path));
        let bad_port = || HttpError(format!("`{url}`: bad port"));
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or_else(|| HttpError(format!("`{url}`: bad host")))?;
            match after.strip_prefix(':') {
                Some(port) => (host, port.parse::<u16>().map_err(|_| bad_port())?),
                None if after.is_empty() => (host, 80),
                None => return Err(bad_port()),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, port.parse::<u16>().map_err(|_| bad_port())?),
                None => (authority, 80),
            }
        };
        if host.is_empty() || host.bytes().any(|b| b.is_ascii_whitespace() || b == b'@') {
            return Err(HttpError(format!("`{url}`: bad host")));
        }
        let prefix = prefix.trim_end_matches('/');
        Ok(Self {
            host: host.to_string(),
            port,
            prefix: if prefix.is_empty() { String::new() } else { format!("/{prefix}") },
        })
    }

    /// POSTs `body` as JSON to `<prefix><path>` with a bearer token; the status code, or why none came
    /// back before `deadline`. Returns by the deadline even when name resolution hangs.
    pub fn post_json(
        &self,
        path: &str,
        bearer: &str,
        body: Vec<u8>,
        connect_timeout: Duration,
        deadline: Instant,
    ) -> Result<u16, HttpError> {
        let request = {
            let mut head = format!(
                "POST {}{path} HTTP/1.1\r\nHost: {}:{}\r\nAuthorization: Bearer {bearer}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\
                 User-Agent: slurmlens-slurm-plugin\r\n\r\n",
                self.prefix,
                if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() },
                self.port,
                body.len()
            )
            .into_bytes();
            head.extend_from_slice(&body);
            head
        };
        let response = self.send(request, false, connect_timeout, deadline)?;
        let address = format!("{}:{}", self.host, self.port);
        parse_status(&response).ok_or_else(|| HttpError(format!("{address} sent no HTTP status line")))
    }

    /// GETs `<prefix><path>` with one extra header; the status code and the body (at most 64 KiB), or
    /// why none came back before `deadline`. Returns by the deadline even when name resolution hangs.
    pub fn get(
        &self,
        path: &str,
        header: (&str, &str),
        connect_timeout: Duration,
        deadline: Instant,
    ) -> Result<(u16, Vec<u8>), HttpError> {
        let request = format!(
            "GET {}{path} HTTP/1.1\r\nHost: {}\r\n{}: {}\r\nAccept: application/json\r\nConnection: close\r\n\
             User-Agent: slurmlens-slurm-plugin\r\n\r\n",
            self.prefix,
            self.host_header(),
            header.0,
            header.1.replace(['\r', '\n'], ""),
        );
        let response = self.send(request.into_bytes(), true, connect_timeout, deadline)?;
        let address = format!("{}:{}", self.host, self.port);
        let status = parse_status(&response).ok_or_else(|| HttpError(format!("{address} sent no HTTP status line")))?;
        let body = response
            .windows(4)
            .position(|window| window == b"\r\n\r\n")
            .map(|at| response[at + 4..].to_vec())
            .unwrap_or_default();
        Ok((status, body))
    }

    fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("{host}:{}", self.port)
    }

    /// Sends `request` on a worker thread and waits for its answer only until `deadline`: the status
    /// line (`whole` false) or everything until the server closes (`whole` true).
    fn send(
        &self,
        request: Vec<u8>,
        whole: bool,
        connect_timeout: Duration,
        deadline: Instant,
    ) -> Result<Vec<u8>, HttpError> {
        let (host, port) = (self.host.clone(), self.port);
        let (sender, receiver) = mpsc::channel();
        let worker = std::thread::Builder::new().name("slurmlens-http".into()).spawn(move || {
            let _ = sender.send(exchange(&host, port, &request, whole, connect_timeout, deadline));
        });
        if let Err(e) = worker {
            return Err(HttpError(format!("cannot start the request thread: {e}")));
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(wait) {
            Ok(result) => result,
            Err(_) => Err(HttpError(format!("no answer within the deadline from {}:{}", self.host, self.port))),
        }
    }
}

fn remaining(deadline: Instant) -> Result<Duration, HttpError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() { Err(HttpError("deadline passed".into())) } else { Ok(left) }
}

/// The most of a response read.
const MAX_RESPONSE: usize = 64 * 1024;

fn exchange(
    host: &str,
    port: u16,
    request: &[u8],
    whole: bool,
    connect_timeout: Duration,
    deadline: Instant,
) -> Result<Vec<u8>, HttpError> {
    let addresses: Vec<_> =
        (host, port).to_socket_addrs().map_err(|e| HttpError(format!("resolving {host}: {e}")))?.collect();
    let mut last_error = HttpError(format!("{host} resolves to no address"));
    for address in addresses {
        let budget = remaining(deadline)?.min(connect_timeout);
        let mut stream = match TcpStream::connect_timeout(&address, budget) {
            Ok(stream) => stream,
            Err(e) => {
                last_error = HttpError(format!("connecting to {address}: {e}"));
                continue;
            }
        };
        let io = |e: std::io::Error| HttpError(format!("talking to {address}: {e}"));
        stream.set_nodelay(true).map_err(io)?;
        stream.set_write_timeout(Some(remaining(deadline)?)).map_err(io)?;
        stream.write_all(request).map_err(io)?;
        let mut response = Vec::new();
        let mut buffer = [0u8; 4096];
        // Read up to the end of the status line, then stop, where the body does not matter.
        let enough = |response: &[u8]| {
            if whole {
                response.len() >= MAX_RESPONSE
            } else {
                response.windows(2).any(|pair| pair == b"\r\n") || response.len() >= 8192
            }
        };
        while !enough(&response) {
            stream.set_read_timeout(Some(remaining(deadline)?)).map_err(io)?;
            let read = stream.read(&mut buffer).map_err(io)?;
            if read == 0 {
                break;
            }
            response.extend_from_slice(&buffer[..read]);
        }
        return Ok(response);
    }
    Err(last_error)
}

/// `HTTP/1.1 201 Created` → 201.
fn parse_status(response: &[u8]) -> Option<u16> {
    let line = response.split(|&b| b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split(' ');
    words.next().filter(|version| version.starts_with("HTTP/1."))?;
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn parses_http_urls() {
        let endpoint = Endpoint::parse("http://slurmlens.example:8080/base/").expect("valid");
        assert_eq!(endpoint, Endpoint { host: "slurmlens.example".into(), port: 8080, prefix: "/base".into() });
        let endpoint = Endpoint::parse("http://127.0.0.1").expect("valid");
        assert_eq!(endpoint, Endpoint { host: "127.0.0.1".into(), port: 80, prefix: String::new() });
        let endpoint = Endpoint::parse("http://[::1]:81").expect("valid");
        assert_eq!(endpoint.host, "::1");
        assert_eq!(endpoint.port, 81);
        assert_eq!(Endpoint::parse("http://[::1]").expect("valid").port, 80);
        assert!(Endpoint::parse("https://h").is_err());
        assert!(Endpoint::parse("http://h:port").is_err());
        assert!(Endpoint::parse("http://").is_err());
    }

    #[test]
    fn posts_and_reads_the_status() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut request = vec![0u8; 4096];
            let read = stream.read(&mut request).expect("read");
            stream.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n").expect("write");
            String::from_utf8_lossy(&request[..read]).to_string()
        });
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}/x")).expect("valid");
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = endpoint.post_json("/api", "s3cret", b"{}".to_vec(), Duration::from_secs(1), deadline);
        assert_eq!(status, Ok(202));
        let request = server.join().expect("server thread");
        assert!(request.starts_with("POST /x/api HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("Authorization: Bearer s3cret\r\n"), "{request}");
        assert!(request.ends_with("\r\n\r\n{}"), "{request}");
    }

    #[test]
    fn gives_up_at_the_deadline_when_the_server_never_answers() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("valid");
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let result = endpoint.post_json("/api", "s", b"{}".to_vec(), Duration::from_millis(100), deadline);
        assert!(result.is_err());
        assert!(started.elapsed() < Duration::from_millis(600), "took {:?}", started.elapsed());
        drop(listener);
    }

    #[test]
    fn reports_a_refused_connection() {
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port();
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("valid");
        let deadline = Instant::now() + Duration::from_secs(1);
        let result = endpoint.post_json("/api", "s", b"{}".to_vec(), Duration::from_millis(100), deadline);
        assert!(result.is_err_and(|e| e.0.contains("connecting")));
    }
}
