//! Who is on the other end of a connection: a TCP address, or a client of the Unix socket. Whether a
//! proxy's identity headers are believed depends on it (`[access] trusted_proxies` for TCP; the
//! socket's file permissions for the socket).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::connect_info::Connected;

use crate::config::AccessConfig;

/// A connection's peer, as each request carries it (`ConnectInfo<Peer>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    /// A client of the Unix socket: a local process the socket's mode let connect.
    UnixSocket,
}

impl Peer {
    /// Whether the proxy's identity headers are believed from this peer.
    pub fn is_trusted_proxy(&self, access: &AccessConfig) -> bool {
        match self {
            Self::Tcp(address) => access.trusted_proxies.iter().any(|net| net.contains(address.ip())),
            Self::UnixSocket => true,
        }
    }

    /// The key the per-peer token rate counts under: the address; the socket's clients all as one
    /// (the proxy), as a proxy on loopback counts as one address.
    pub fn rate_key(&self) -> IpAddr {
        match self {
            Self::Tcp(address) => address.ip(),
            Self::UnixSocket => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

/// The address, or `unix` (in logs and the token audit).
impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(address) => write!(f, "{}", address.ip()),
            Self::UnixSocket => f.write_str("unix"),
        }
    }
}

/// The listener hands each connection's peer to the router as it is.
impl Connected<Peer> for Peer {
    fn connect_info(peer: Peer) -> Self {
        peer
    }
}
