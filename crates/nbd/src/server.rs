//! The NBD server: binds a Unix or TCP socket, accepts connections (a bounded number at a
//! time), serves each on its own task, and shuts down gracefully.
//!
//! Shutdown: stop accepting (the Unix socket file is removed), tell every connection to stop
//! reading new requests, let the requests in flight finish and their replies go out (for at
//! most `shutdown_grace`), close the connections, then flush the volume, so everything
//! acknowledged before shutdown is durable when `serve_until` returns.

use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use zns::BlockDevice;

use crate::budget::Budget;
use crate::config::{tcp_uri, unix_uri, Listen, ServerConfig};
use crate::conn::{self, stopped, Shared};
use crate::error::ServerError;
use crate::executor::Executor;
use crate::locks::BlockLocks;
use crate::negotiate::ExportInfo;
use crate::proto;
use crate::request::Limits;

/// Pause after a failed accept. Errors such as running out of file descriptors persist until
/// a connection closes; without a pause the accept loop would spin on them.
const ACCEPT_RETRY: Duration = Duration::from_millis(20);

/// Counters of a running server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub connections_accepted: u64,
    /// Connections whose task has not finished (including their requests in flight).
    pub connections_active: u64,
    /// Connections closed because the client broke the protocol.
    pub protocol_errors: u64,
}

struct HandleInner {
    stop: watch::Sender<bool>,
    accepted: AtomicU64,
    /// A watch rather than an atomic so that callers can wait for connections to close.
    active: watch::Sender<u64>,
    protocol_errors: AtomicU64,
}

/// Controls a server from elsewhere: shut it down, read its counters. Cheap to clone.
#[derive(Clone)]
pub struct ServerHandle {
    inner: Arc<HandleInner>,
}

impl ServerHandle {
    /// Starts a graceful shutdown; `run` / `serve_until` return when it is complete.
    pub fn shutdown(&self) {
        self.inner.stop.send_replace(true);
    }

    pub fn stats(&self) -> ServerStats {
        let i = &self.inner;
        ServerStats {
            connections_accepted: i.accepted.load(Ordering::Relaxed),
            connections_active: *i.active.borrow(),
            protocol_errors: i.protocol_errors.load(Ordering::Relaxed),
        }
    }

    /// Resolves once at most `n` connections are active. A connection stays active until
    /// its requests in flight have finished, so `wait_for_connections(0)` after the last
    /// client left means nothing it sent is still running (a server that should exit when
    /// its client disconnects waits on this).
    pub async fn wait_for_connections(&self, n: u64) {
        let mut rx = self.inner.active.subscribe();
        // The sender lives in `inner`, which this handle keeps alive, so this cannot fail.
        let _ = rx.wait_for(|active| *active <= n).await;
    }
}

/// Removes the Unix socket file this server created, once the listener is gone.
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A bound listener. It is bound with the standard library so that `bind` works outside a
/// runtime, and handed to tokio when the server runs.
enum Bound {
    Tcp(std::net::TcpListener),
    Unix(StdUnixListener, SocketFile),
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Stream> {
        match self {
            Listener::Tcp(l) => Ok(Stream::Tcp(l.accept().await?.0)),
            Listener::Unix(l) => Ok(Stream::Unix(l.accept().await?.0)),
        }
    }
}

/// An NBD server exporting one `BlockDevice`.
pub struct NbdServer {
    bound: Bound,
    shared: Arc<Shared>,
    handle: ServerHandle,
    uri: String,
    local_addr: Option<SocketAddr>,
    max_connections: usize,
    shutdown_grace: Duration,
}

fn bind_error(what: impl ToString) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.to_string();
    move |source| ServerError::Bind { what, source }
}

/// What the handshake says about the export, checked against the protocol's rules.
fn export_info(config: &ServerConfig, device: &dyn BlockDevice) -> Result<ExportInfo, ServerError> {
    let bs = device.block_size();
    // The preferred block size we advertise must be a power of two.
    if !bs.is_power_of_two() {
        return Err(ServerError::Volume(format!(
            "block size {bs} is not a power of two"
        )));
    }
    if config.max_request_bytes < bs {
        let m = config.max_request_bytes;
        return Err(ServerError::Config(format!(
            "max_request_bytes {m} is below the block size {bs}"
        )));
    }
    let size = device
        .size_blocks()
        .checked_mul(u64::from(bs))
        .filter(|s| *s <= i64::MAX as u64)
        .ok_or_else(|| ServerError::Volume("the volume is larger than 2^63 bytes".into()))?;
    let mut flags = proto::FLAG_HAS_FLAGS
        | proto::FLAG_SEND_FLUSH
        | proto::FLAG_SEND_FUA
        | proto::FLAG_SEND_TRIM
        | proto::FLAG_SEND_WRITE_ZEROES;
    if config.multi_conn {
        flags |= proto::FLAG_CAN_MULTI_CONN;
    }
    Ok(ExportInfo {
        name: config.export_name.as_bytes().to_vec(),
        size,
        transmission_flags: flags,
        // Any byte range is served (partial blocks by read-modify-write), so the minimum is
        // 1; whole aligned blocks avoid that work, so they are the preferred size.
        min_block: 1,
        preferred_block: bs,
        max_block: config.max_request_bytes,
    })
}

impl NbdServer {
    /// Validates the configuration and the volume and binds the listening socket. Clients
    /// that connect before `run` wait in the listen backlog.
    pub fn bind(
        config: ServerConfig,
        device: Arc<dyn BlockDevice>,
    ) -> Result<NbdServer, ServerError> {
        config.validate()?;
        let export = export_info(&config, device.as_ref())?;
        let (bound, uri, local_addr) = match &config.listen {
            Listen::Tcp(addr) => {
                let l = std::net::TcpListener::bind(addr).map_err(bind_error(addr))?;
                l.set_nonblocking(true).map_err(bind_error(addr))?;
                let local = l.local_addr().map_err(bind_error(addr))?;
                (
                    Bound::Tcp(l),
                    tcp_uri(local, &config.export_name),
                    Some(local),
                )
            }
            Listen::Unix(path) => {
                // Never remove a file we did not create, even a stale socket.
                if path.symlink_metadata().is_ok() {
                    return Err(ServerError::SocketExists(path.clone()));
                }
                let shown = path.display();
                let l = StdUnixListener::bind(path).map_err(bind_error(&shown))?;
                let file = SocketFile(path.clone());
                l.set_nonblocking(true).map_err(bind_error(&shown))?;
                (
                    Bound::Unix(l, file),
                    unix_uri(path, &config.export_name),
                    None,
                )
            }
        };
        let max_request = config.max_request_bytes;
        let executor = if config.request_thread {
            Some(Executor::start().map_err(ServerError::Thread)?)
        } else {
            None
        };
        let shared = Shared {
            device,
            limits: Limits {
                size: export.size,
                max_request,
                // A client that misjudged the maximum by a little gets a clean EINVAL; a
                // payload beyond four times the maximum is treated as an attack.
                max_drain: max_request.saturating_mul(4),
            },
            export,
            locks: BlockLocks::default(),
            max_in_flight: config.max_in_flight,
            max_in_flight_bytes: config.max_in_flight_bytes,
            server_budget: Budget::new(
                config.server_max_in_flight,
                config.server_max_in_flight_bytes,
            ),
            handshake_timeout: config.handshake_timeout,
            executor,
        };
        let inner = HandleInner {
            stop: watch::channel(false).0,
            accepted: AtomicU64::new(0),
            active: watch::channel(0).0,
            protocol_errors: AtomicU64::new(0),
        };
        Ok(NbdServer {
            bound,
            shared: Arc::new(shared),
            handle: ServerHandle {
                inner: Arc::new(inner),
            },
            uri,
            local_addr,
            max_connections: config.max_connections,
            shutdown_grace: config.shutdown_grace,
        })
    }

    /// The NBD URI clients connect with: `nbd://127.0.0.1:PORT/NAME` or
    /// `nbd+unix:///NAME?socket=PATH`.
    pub fn local_uri(&self) -> String {
        self.uri.clone()
    }

    /// The bound TCP address (with the port chosen for port 0); `None` for a Unix socket.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// A handle to shut the server down and read its counters.
    pub fn handle(&self) -> ServerHandle {
        self.handle.clone()
    }

    /// Serves until `ServerHandle::shutdown` is called, then shuts down gracefully.
    pub async fn run(self) -> Result<(), ServerError> {
        self.serve_until(std::future::pending()).await
    }

    /// Serves until `shutdown` resolves (or `ServerHandle::shutdown` is called), then shuts
    /// down gracefully: in-flight requests finish and the volume is flushed.
    pub async fn serve_until<F: Future<Output = ()>>(self, shutdown: F) -> Result<(), ServerError> {
        let NbdServer {
            bound,
            shared,
            handle,
            max_connections,
            shutdown_grace,
            ..
        } = self;
        // The socket file lives until the listener is dropped at shutdown.
        let (listener, socket_file) = match bound {
            Bound::Tcp(l) => {
                let l = TcpListener::from_std(l).map_err(bind_error("TCP"))?;
                (Listener::Tcp(l), None)
            }
            Bound::Unix(l, f) => {
                let l = UnixListener::from_std(l).map_err(bind_error("unix"))?;
                (Listener::Unix(l), Some(f))
            }
        };
        let slots = Arc::new(Semaphore::new(max_connections));
        let mut stop = handle.inner.stop.subscribe();
        let mut conns = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = stopped(&mut stop) => break,
                a = accept(&listener, &slots) => a,
            };
            while conns.try_join_next().is_some() {}
            match accepted {
                Some((stream, slot)) => {
                    handle.inner.accepted.fetch_add(1, Ordering::Relaxed);
                    handle.inner.active.send_modify(|a| *a += 1);
                    conns.spawn(connection(stream, slot, shared.clone(), handle.clone()));
                }
                None => tokio::time::sleep(ACCEPT_RETRY).await,
            }
        }
        handle.shutdown();
        drop(listener);
        drop(socket_file);
        let drained = tokio::time::timeout(shutdown_grace, async {
            while conns.join_next().await.is_some() {}
        });
        if drained.await.is_err() {
            // Requests whose replies could not be sent in time were never acknowledged; the
            // flush below still covers every reply that did go out.
            conns.abort_all();
            while conns.join_next().await.is_some() {}
        }
        shared.device.flush().await.map_err(ServerError::Flush)
    }
}

/// Waits for a connection slot, then a connection. `None` on an accept error.
async fn accept(
    listener: &Listener,
    slots: &Arc<Semaphore>,
) -> Option<(Stream, OwnedSemaphorePermit)> {
    let slot = slots.clone().acquire_owned().await.ok()?;
    let stream = listener.accept().await.ok()?;
    Some((stream, slot))
}

/// Decrements the active-connection count however the connection task ends (even aborted).
struct Active(ServerHandle);

impl Drop for Active {
    fn drop(&mut self) {
        self.0
            .inner
            .active
            .send_modify(|a| *a = a.saturating_sub(1));
    }
}

async fn connection(
    stream: Stream,
    _slot: OwnedSemaphorePermit,
    shared: Arc<Shared>,
    handle: ServerHandle,
) {
    let _active = Active(handle.clone());
    let stop = handle.inner.stop.subscribe();
    let result = match stream {
        Stream::Tcp(s) => {
            // Replies are small and latency matters more than packet count.
            let _ = s.set_nodelay(true);
            let (r, w) = s.into_split();
            conn::serve(r, w, shared, stop).await
        }
        Stream::Unix(s) => {
            let (r, w) = s.into_split();
            conn::serve(r, w, shared, stop).await
        }
    };
    // Socket errors (a client that vanished, a reset) are not the client's protocol errors.
    if let Err(conn::ConnError::Protocol(_) | conn::ConnError::Violation(_)) = result {
        handle.inner.protocol_errors.fetch_add(1, Ordering::Relaxed);
    }
}
