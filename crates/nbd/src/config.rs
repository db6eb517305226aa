//! Server configuration: where to listen, what to call the export, and the limits that bound
//! a server's memory and work. Validated when the server is bound.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::ServerError;
use crate::proto::MAX_STRING_LEN;

/// The port IANA reserved for NBD.
pub const DEFAULT_PORT: u16 = 10809;

/// Largest `server_max_in_flight` accepted.
const MAX_SERVER_IN_FLIGHT: usize = 1 << 16;
/// Largest byte budget accepted (a budget is a semaphore, whose permits are limited).
const MAX_IN_FLIGHT_BYTES: usize = 1 << 40;

/// Where a server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A Unix-domain socket at this path (which must not exist yet).
    Unix(PathBuf),
    /// A TCP address; port 0 picks a free port (see `NbdServer::local_uri`).
    Tcp(SocketAddr),
}

/// Everything an `NbdServer` needs besides the volume.
///
/// Work and memory bounds. Each connection holds at most `max_in_flight` requests and
/// `max_in_flight_bytes` of write payloads and read data, counted from when a request is read
/// until its reply is sent. On top of that, every request must take a share of one
/// server-wide budget (`server_max_in_flight` requests, `server_max_in_flight_bytes` of data)
/// before it starts on the volume, and keeps it until its reply is sent or dropped. So the
/// volume never has more than `server_max_in_flight` requests of the server in progress,
/// read buffers never exceed `server_max_in_flight_bytes` in total, and the server holds at
/// most `max_connections * max_in_flight_bytes` of data (write payloads waiting for the server
/// budget are bounded only by their connection's budget) plus one block per read-modify-write
/// in flight, plus each connection's receive chunks (at most 5 of 1 MiB, or of one request
/// if larger, `inbox.rs`). Requests of a client that vanished are dropped before they start (see
/// `conn.rs`), so a burst of disconnecting clients leaves at most the server budget's worth
/// of work behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The single export's name; clients asking for another name are refused.
    pub export_name: String,
    pub listen: Listen,
    /// Allow a TCP address other than loopback. NBD has no authentication here, so exporting
    /// a volume to the network must be a deliberate choice.
    pub allow_remote: bool,
    /// Advertise `NBD_FLAG_CAN_MULTI_CONN`: a flush on one connection covers writes completed
    /// on every connection. True for any volume that honours the `BlockDevice` flush contract,
    /// because all connections share that one volume and the server keeps no cache (see
    /// docs/DESIGN.md); left to the caller so that a volume with a per-client cache can say no.
    pub multi_conn: bool,
    /// Requests executing or waiting for their reply, per connection.
    pub max_in_flight: usize,
    /// Bytes of write payloads and read data held per connection.
    pub max_in_flight_bytes: usize,
    /// Requests of all connections together that may be running on the volume or waiting
    /// for their reply to be sent.
    pub server_max_in_flight: usize,
    /// Bytes of write payloads and read data of all connections' started requests together.
    pub server_max_in_flight_bytes: usize,
    /// Largest READ or WRITE served (advertised as the maximum block size).
    pub max_request_bytes: u32,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// How long a client may take from connecting to entering transmission; a connection
    /// slot held by a client that never finishes the handshake is freed after this.
    pub handshake_timeout: Duration,
    /// How long shutdown waits for in-flight requests before it closes connections anyway.
    pub shutdown_grace: Duration,
    /// Run requests on a thread of the server's own instead of on the thread that reads the
    /// sockets, so that a client's next requests are read while the last ones run (`executor.rs`;
    /// docs/DESIGN.md, "The NBD server", Concurrency). Off by default: the caller decides
    /// whether the server may take a second core.
    pub request_thread: bool,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            export_name: String::new(),
            listen: Listen::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_PORT))),
            allow_remote: false,
            multi_conn: false,
            max_in_flight: 64,
            max_in_flight_bytes: 128 << 20,
            server_max_in_flight: 256,
            server_max_in_flight_bytes: 256 << 20,
            max_request_bytes: 32 << 20,
            max_connections: 32,
            handshake_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            request_thread: false,
        }
    }
}

impl ServerConfig {
    /// Defaults, listening on a Unix-domain socket.
    pub fn unix(path: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            listen: Listen::Unix(path.into()),
            ..ServerConfig::default()
        }
    }

    /// Defaults, listening on a TCP address.
    pub fn tcp(addr: SocketAddr) -> ServerConfig {
        ServerConfig {
            listen: Listen::Tcp(addr),
            ..ServerConfig::default()
        }
    }

    /// Checks the configuration on its own (the volume is checked when the server is bound).
    pub fn validate(&self) -> Result<(), ServerError> {
        let bad = |m: String| Err(ServerError::Config(m));
        if self.export_name.len() > MAX_STRING_LEN || self.export_name.contains('\0') {
            return bad("the export name must be at most 4096 bytes without NUL".into());
        }
        if !(1..=4096).contains(&self.max_in_flight) {
            return bad(format!(
                "max_in_flight is {}; use 1 to 4096",
                self.max_in_flight
            ));
        }
        if !(512..=1 << 30).contains(&self.max_request_bytes) {
            let n = self.max_request_bytes;
            return bad(format!("max_request_bytes is {n}; use 512 to 1 GiB"));
        }
        if !(1..=MAX_SERVER_IN_FLIGHT).contains(&self.server_max_in_flight) {
            let n = self.server_max_in_flight;
            return bad(format!(
                "server_max_in_flight is {n}; use 1 to {MAX_SERVER_IN_FLIGHT}"
            ));
        }
        let max = self.max_request_bytes as usize;
        for (name, n) in [
            ("max_in_flight_bytes", self.max_in_flight_bytes),
            (
                "server_max_in_flight_bytes",
                self.server_max_in_flight_bytes,
            ),
        ] {
            // Below the maximum request, a request of that size could never get its memory.
            if !(max..=MAX_IN_FLIGHT_BYTES).contains(&n) {
                return bad(format!(
                    "{name} is {n}; use max_request_bytes ({max}) to 1 TiB"
                ));
            }
        }
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1".into());
        }
        if self.handshake_timeout.is_zero() {
            return bad("handshake_timeout must be longer than zero".into());
        }
        if let Listen::Tcp(addr) = &self.listen {
            if !addr.ip().is_loopback() && !self.allow_remote {
                return Err(ServerError::RemoteNotAllowed(*addr));
            }
        }
        Ok(())
    }
}

/// Percent-encodes every byte outside RFC 3986's unreserved set (and `/` when `keep_slash`).
fn percent_encode(s: &[u8], keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `nbd://HOST:PORT/NAME` for a bound TCP address.
pub(crate) fn tcp_uri(addr: SocketAddr, name: &str) -> String {
    // SocketAddr's Display already brackets IPv6 hosts.
    format!("nbd://{addr}/{}", percent_encode(name.as_bytes(), false))
}

/// `nbd+unix:///NAME?socket=PATH` for a Unix-domain socket.
pub(crate) fn unix_uri(path: &Path, name: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let name = percent_encode(name.as_bytes(), false);
    let socket = percent_encode(path.as_os_str().as_bytes(), true);
    format!("nbd+unix:///{name}?socket={socket}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_follow_the_nbd_uri_scheme() {
        let a: SocketAddr = "127.0.0.1:10809".parse().expect("address");
        assert_eq!(tcp_uri(a, "vol 1"), "nbd://127.0.0.1:10809/vol%201");
        assert_eq!(tcp_uri(a, ""), "nbd://127.0.0.1:10809/");
        let u = unix_uri(Path::new("/tmp/a b/s.sock"), "x");
        assert_eq!(u, "nbd+unix:///x?socket=/tmp/a%20b/s.sock");
    }

    #[test]
    fn remote_addresses_need_allow_remote() {
        let remote = ServerConfig::tcp("0.0.0.0:0".parse().expect("address"));
        assert!(matches!(
            remote.validate(),
            Err(ServerError::RemoteNotAllowed(_))
        ));
        assert!(ServerConfig {
            allow_remote: true,
            ..remote
        }
        .validate()
        .is_ok());
        assert!(ServerConfig::default().validate().is_ok());
    }

    #[test]
    fn limits_are_checked() {
        let d = ServerConfig::default();
        assert!(ServerConfig {
            max_in_flight: 0,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(ServerConfig {
            max_connections: 0,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(ServerConfig {
            max_in_flight_bytes: 1,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(ServerConfig {
            server_max_in_flight: 0,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(ServerConfig {
            server_max_in_flight_bytes: (32 << 20) - 1,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(ServerConfig {
            max_in_flight_bytes: usize::MAX,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(ServerConfig {
            export_name: "a\0b".into(),
            ..d
        }
        .validate()
        .is_err());
    }
}
