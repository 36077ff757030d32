//! The addresses in the configuration: where the server listens, and which peers are proxies.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where the HTTP server listens: a TCP address, or a Unix socket's path (`unix:/run/slurmlens/http.sock`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ListenAddress {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::str::FromStr for ListenAddress {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        match text.strip_prefix("unix:") {
            Some(path) if Path::new(path).is_absolute() => Ok(Self::Unix(PathBuf::from(path))),
            Some(path) => Err(format!("listen: the socket's path `{path}` must be absolute (unix:/run/…)")),
            None => text
                .parse()
                .map(Self::Tcp)
                .map_err(|_| format!("listen: `{text}` is neither host:port (127.0.0.1:8080) nor unix:/path")),
        }
    }
}

impl TryFrom<String> for ListenAddress {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<ListenAddress> for String {
    fn from(address: ListenAddress) -> String {
        address.to_string()
    }
}

impl std::fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(address) => write!(f, "{address}"),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// A trusted proxy: one address or a network, as written in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProxyNet(pub ipnet::IpNet);

impl TryFrom<String> for ProxyNet {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let text = text.trim();
        let net = match text.parse::<ipnet::IpNet>() {
            Ok(net) => net,
            Err(_) => text
                .parse::<std::net::IpAddr>()
                .map(ipnet::IpNet::from)
                .map_err(|_| format!("`{text}` is neither an address nor a network like 10.0.0.0/8"))?,
        };
        Ok(Self(net))
    }
}

impl From<ProxyNet> for String {
    fn from(net: ProxyNet) -> String {
        net.0.to_string()
    }
}

impl ProxyNet {
    pub fn contains(&self, address: std::net::IpAddr) -> bool {
        self.0.contains(&address.to_canonical())
    }
}
