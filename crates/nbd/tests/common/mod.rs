//! Helpers shared by the NBD server's integration tests: a server running on its own runtime
//! thread, a small blocking NBD client written from the protocol text, volumes that let a
//! test hold requests in flight, and lookup of the real client programs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use nbd::proto::{self, Command as Cmd, InfoRequest, Request};
use nbd::{Listen, MemDisk, NbdServer, ServerConfig, ServerError, ServerHandle};
use zns::{BlockDevice, BlockResult, Lba};

/// Longest any single wait in these tests may take before the test fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(20);

/// Runs `f` on a fresh current-thread runtime, failing the test if it takes longer than WAIT.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async { tokio::time::timeout(WAIT, f).await.expect("timed out") })
}

/// Where a test server listens.
#[derive(Clone, Debug)]
pub enum Addr {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// A server on its own multi-threaded runtime thread, shut down when dropped.
pub struct TestServer {
    pub uri: String,
    pub addr: Addr,
    pub handle: ServerHandle,
    thread: Option<JoinHandle<Result<(), ServerError>>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// A server on a Unix socket in a fresh temporary directory.
    pub fn unix(dev: Arc<dyn BlockDevice>, tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nbd.sock");
        let mut cfg = ServerConfig::unix(&path);
        tweak(&mut cfg);
        TestServer::start(cfg, dev, dir)
    }

    /// A server on 127.0.0.1 with a port the kernel picks.
    pub fn tcp(dev: Arc<dyn BlockDevice>, tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = ServerConfig::tcp("127.0.0.1:0".parse().expect("addr"));
        tweak(&mut cfg);
        TestServer::start(cfg, dev, dir)
    }

    fn start(cfg: ServerConfig, dev: Arc<dyn BlockDevice>, dir: tempfile::TempDir) -> TestServer {
        let listen = cfg.listen.clone();
        let server = NbdServer::bind(cfg, dev).expect("bind");
        let addr = match listen {
            Listen::Unix(p) => Addr::Unix(p),
            Listen::Tcp(_) => Addr::Tcp(server.local_addr().expect("tcp address")),
        };
        let uri = server.local_uri();
        let handle = server.handle();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(4)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(server.run())
        });
        TestServer {
            uri,
            addr,
            handle,
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// Shuts the server down and returns what `run` returned.
    pub fn stop(mut self) -> Result<(), ServerError> {
        self.handle.shutdown();
        let t = self.thread.take().expect("running");
        t.join().expect("server thread panicked")
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Blocks until at most `n` connections are active (requests in flight count).
    pub fn wait_for_connections(&self, n: u64) {
        let h = self.handle.clone();
        block_on(async move { h.wait_for_connections(n).await });
    }

    pub fn connect(&self) -> Client {
        Client::go(&self.addr, "").expect("handshake")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A raw socket to the server, either kind.
pub struct Socket {
    pub r: Box<dyn Read + Send>,
    pub w: Box<dyn Write + Send>,
    shutdown: Box<dyn Fn() + Send>,
    half_close: Box<dyn Fn() + Send>,
}

impl Socket {
    pub fn connect(addr: &Addr) -> std::io::Result<Socket> {
        match addr {
            Addr::Unix(p) => {
                let s = UnixStream::connect(p)?;
                s.set_read_timeout(Some(WAIT))?;
                let w = s.try_clone()?;
                let c = s.try_clone()?;
                let h = s.try_clone()?;
                Ok(Socket {
                    r: Box::new(s),
                    w: Box::new(w),
                    shutdown: Box::new(move || {
                        let _ = c.shutdown(std::net::Shutdown::Both);
                    }),
                    half_close: Box::new(move || {
                        let _ = h.shutdown(std::net::Shutdown::Write);
                    }),
                })
            }
            Addr::Tcp(a) => {
                let s = TcpStream::connect(a)?;
                s.set_read_timeout(Some(WAIT))?;
                s.set_nodelay(true)?;
                let w = s.try_clone()?;
                let c = s.try_clone()?;
                let h = s.try_clone()?;
                Ok(Socket {
                    r: Box::new(s),
                    w: Box::new(w),
                    shutdown: Box::new(move || {
                        let _ = c.shutdown(std::net::Shutdown::Both);
                    }),
                    half_close: Box::new(move || {
                        let _ = h.shutdown(std::net::Shutdown::Write);
                    }),
                })
            }
        }
    }

    /// A "socket" made of two pipes, such as a server's stdout and stdin in single mode.
    pub fn from_pipes(r: impl Read + Send + 'static, w: impl Write + Send + 'static) -> Socket {
        Socket {
            r: Box::new(r),
            w: Box::new(w),
            shutdown: Box::new(|| {}),
            half_close: Box::new(|| {}),
        }
    }

    pub fn read_n(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        let mut b = vec![0u8; n];
        self.r.read_exact(&mut b)?;
        Ok(b)
    }

    /// True when the server closed the connection: the next read sees end of file or reset.
    pub fn is_closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.r.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    /// Closes our sending direction; the server sees end of file after what was sent.
    pub fn finish_sending(&mut self) {
        let _ = self.w.flush();
        (self.half_close)();
    }

    /// Closes both directions now, as a client that vanishes does.
    pub fn kill(&self) {
        (self.shutdown)();
    }
}

/// What the handshake told the client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportSeen {
    pub size: u64,
    pub flags: u16,
    /// (minimum, preferred, maximum) when the server sent `NBD_INFO_BLOCK_SIZE`.
    pub block: Option<(u32, u32, u32)>,
}

/// A blocking NBD client in the transmission phase.
pub struct Client {
    pub sock: Socket,
    pub export: ExportSeen,
    next_handle: u64,
}

/// Reads the greeting and answers it with `client_flags`; returns the handshake flags.
pub fn greet(sock: &mut Socket, client_flags: u32) -> std::io::Result<u16> {
    let g = sock.read_n(proto::GREETING_LEN)?;
    let flags = proto::decode_greeting(&g).expect("greeting");
    sock.w
        .write_all(&proto::encode_client_flags(client_flags))?;
    Ok(flags)
}

pub fn send_option(sock: &mut Socket, option: u32, data: &[u8]) -> std::io::Result<()> {
    let h = proto::OptionHeader {
        option,
        length: data.len() as u32,
    };
    sock.w.write_all(&proto::encode_option_header(&h))?;
    sock.w.write_all(data)
}

/// Reads one option reply: (reply type, data).
pub fn read_option_reply(sock: &mut Socket, option: u32) -> std::io::Result<(u32, Vec<u8>)> {
    let h = proto::decode_option_reply_header(&sock.read_n(proto::OPTION_REPLY_HEADER_LEN)?)
        .expect("option reply header");
    assert_eq!(h.option, option, "reply to the option we sent");
    let data = sock.read_n(h.length as usize)?;
    Ok((h.reply_type, data))
}

/// Sends `NBD_OPT_INFO` / `NBD_OPT_GO` and reads replies up to the final one. `Ok` with what
/// the server said, or `Err(reply type)` for an error reply.
pub fn info_or_go(
    sock: &mut Socket,
    option: u32,
    name: &str,
) -> std::io::Result<Result<ExportSeen, u32>> {
    let req = InfoRequest {
        name: name.as_bytes().to_vec(),
        requests: vec![proto::INFO_BLOCK_SIZE],
    };
    send_option(sock, option, &proto::encode_info_request(&req))?;
    let mut seen = ExportSeen::default();
    loop {
        let (t, data) = read_option_reply(sock, option)?;
        match t {
            proto::REP_ACK => return Ok(Ok(seen)),
            proto::REP_INFO => match proto::decode_info(&data).expect("info") {
                proto::Info::Export { size, flags } => {
                    seen.size = size;
                    seen.flags = flags;
                }
                proto::Info::BlockSize {
                    min,
                    preferred,
                    max,
                } => seen.block = Some((min, preferred, max)),
                _ => {}
            },
            err => return Ok(Err(err)),
        }
    }
}

impl Client {
    /// Fixed newstyle with `NO_ZEROES`, then `NBD_OPT_GO` for `name`.
    pub fn go(addr: &Addr, name: &str) -> Result<Client, u32> {
        Client::go_on(Socket::connect(addr).expect("connect"), name)
    }

    /// As `go`, on a socket already connected.
    pub fn go_on(mut sock: Socket, name: &str) -> Result<Client, u32> {
        greet(
            &mut sock,
            proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES,
        )
        .expect("greet");
        let export = info_or_go(&mut sock, proto::OPT_GO, name).expect("go")?;
        Ok(Client {
            sock,
            export,
            next_handle: 1,
        })
    }

    /// A client on a socket already in the transmission phase.
    pub fn from_socket(sock: Socket) -> Client {
        Client {
            sock,
            export: ExportSeen::default(),
            next_handle: 1,
        }
    }

    /// Sends a request (and its payload) without waiting; returns its handle.
    pub fn send(
        &mut self,
        command: Cmd,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> u64 {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.send_with_handle(
            Request {
                flags,
                command,
                handle,
                offset,
                length,
            },
            payload,
        );
        handle
    }

    pub fn send_with_handle(&mut self, r: Request, payload: &[u8]) {
        self.sock
            .w
            .write_all(&proto::encode_request(&r))
            .expect("send request");
        self.sock.w.write_all(payload).expect("send payload");
    }

    /// Reads one reply; `read_len` says how many data bytes follow a successful reply to
    /// each outstanding READ (simple replies do not carry their length).
    pub fn recv(&mut self, read_len: &HashMap<u64, usize>) -> (u64, u32, Vec<u8>) {
        let r =
            proto::decode_simple_reply(&self.sock.read_n(proto::SIMPLE_REPLY_LEN).expect("reply"))
                .expect("simple reply");
        let mut data = Vec::new();
        if r.error == 0 {
            if let Some(n) = read_len.get(&r.handle) {
                data = self.sock.read_n(*n).expect("read data");
            }
        }
        (r.handle, r.error, data)
    }

    fn one(
        &mut self,
        command: Cmd,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> Result<Vec<u8>, u32> {
        let h = self.send(command, flags, offset, length, payload);
        let mut lens = HashMap::new();
        if command == Cmd::Read {
            lens.insert(h, length as usize);
        }
        let (got, error, data) = self.recv(&lens);
        assert_eq!(got, h, "the only outstanding request");
        if error == 0 {
            Ok(data)
        } else {
            Err(error)
        }
    }

    pub fn read(&mut self, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
        self.one(Cmd::Read, 0, offset, len, &[])
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), u32> {
        self.one(Cmd::Write, 0, offset, data.len() as u32, data)
            .map(drop)
    }

    pub fn write_fua(&mut self, offset: u64, data: &[u8]) -> Result<(), u32> {
        self.one(
            Cmd::Write,
            proto::CMD_FLAG_FUA,
            offset,
            data.len() as u32,
            data,
        )
        .map(drop)
    }

    pub fn flush(&mut self) -> Result<(), u32> {
        self.one(Cmd::Flush, 0, 0, 0, &[]).map(drop)
    }

    pub fn trim(&mut self, offset: u64, len: u32) -> Result<(), u32> {
        self.one(Cmd::Trim, 0, offset, len, &[]).map(drop)
    }

    pub fn write_zeroes(&mut self, offset: u64, len: u32, flags: u16) -> Result<(), u32> {
        self.one(Cmd::WriteZeroes, flags, offset, len, &[])
            .map(drop)
    }

    /// `NBD_CMD_DISC`, then the server closes the connection.
    pub fn disconnect(mut self) {
        self.send(Cmd::Disc, 0, 0, 0, &[]);
        assert!(
            self.sock.is_closed_by_server(),
            "server closes after NBD_CMD_DISC"
        );
    }
}

/// A recognisable byte pattern for `len` bytes starting at byte `offset`, for `round`.
pub fn pattern(offset: u64, len: usize, round: u8) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((offset + i).wrapping_mul(2_654_435_761) >> 13) as u8 ^ round)
        .collect()
}

/// Reads bytes straight from a volume (not through NBD), for checking what clients wrote.
pub fn volume_bytes(dev: &dyn BlockDevice, offset: u64, len: usize) -> Vec<u8> {
    let bs = u64::from(dev.block_size());
    assert!(
        offset.is_multiple_of(bs) && (len as u64).is_multiple_of(bs),
        "whole blocks"
    );
    let mut buf = vec![0u8; len];
    block_on(dev.read(offset / bs, &mut buf)).expect("volume read");
    buf
}

pub fn write_volume(dev: &dyn BlockDevice, offset: u64, data: &[u8]) {
    let bs = u64::from(dev.block_size());
    block_on(dev.write(offset / bs, data, false)).expect("volume write");
}

/// A read sent behind a write held at a `GatedDisk`'s gate gets its reply first; once the gate
/// opens the write's reply follows and its data reads back. `tweak` configures the server.
pub fn fast_read_overtakes_held_write(tweak: impl FnOnce(&mut ServerConfig)) {
    let disk = GatedDisk::new(4096, 256);
    let s = TestServer::unix(disk.clone(), tweak);
    let mut c = s.connect();
    let data = pattern(0, 4096, 1);
    let w = c.send(Cmd::Write, 0, 0, 4096, &data);
    disk.wait_started(1);
    let r = c.send(Cmd::Read, 0, 8192, 4096, &[]);
    let lens = HashMap::from([(r, 4096usize)]);
    // The write is held at the gate, so the read's reply must come first.
    assert_eq!(c.recv(&lens), (r, 0, vec![0u8; 4096]));
    disk.release(1);
    assert_eq!(c.recv(&lens), (w, 0, Vec::new()));
    assert_eq!(c.read(0, 4096), Ok(data));
}

/// A `MemDisk` whose writes wait at a gate the test opens, so requests stay in flight for as
/// long as a test needs. It counts writes started and finished and the most in progress at
/// once, and logs every command in completion order.
pub struct GatedDisk {
    pub inner: MemDisk,
    gate: tokio::sync::Semaphore,
    state: Mutex<GateState>,
    changed: Condvar,
    in_progress: AtomicUsize,
}

#[derive(Default)]
struct GateState {
    started: usize,
    finished: usize,
    peak: usize,
    log: Vec<String>,
}

impl GatedDisk {
    pub fn new(block_size: u32, blocks: u64) -> Arc<GatedDisk> {
        Arc::new(GatedDisk {
            inner: MemDisk::new(block_size, blocks).expect("memdisk"),
            gate: tokio::sync::Semaphore::new(0),
            state: Mutex::new(GateState::default()),
            changed: Condvar::new(),
            in_progress: AtomicUsize::new(0),
        })
    }

    /// Lets `n` more writes through.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }

    fn wait(&self, what: &str, done: impl Fn(&GateState) -> bool) {
        let s = self.state.lock().expect("lock");
        let (s, timeout) = self
            .changed
            .wait_timeout_while(s, WAIT, |s| !done(s))
            .expect("lock");
        assert!(
            !timeout.timed_out(),
            "timed out waiting for {what} ({} started, {} finished)",
            s.started,
            s.finished
        );
    }

    /// Blocks until `n` writes have reached the gate.
    pub fn wait_started(&self, n: usize) {
        self.wait("writes to start", |s| s.started >= n);
    }

    pub fn wait_finished(&self, n: usize) {
        self.wait("writes to finish", |s| s.finished >= n);
    }

    pub fn started(&self) -> usize {
        self.state.lock().expect("lock").started
    }

    pub fn peak(&self) -> usize {
        self.state.lock().expect("lock").peak
    }

    pub fn log(&self) -> Vec<String> {
        self.state.lock().expect("lock").log.clone()
    }

    fn note(&self, f: impl FnOnce(&mut GateState)) {
        let mut s = self.state.lock().expect("lock");
        f(&mut s);
        self.changed.notify_all();
    }
}

#[async_trait]
impl BlockDevice for GatedDisk {
    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }
    fn size_blocks(&self) -> u64 {
        self.inner.size_blocks()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        self.inner.read(lba, buf).await
    }
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        let now = self.in_progress.fetch_add(1, Ordering::SeqCst) + 1;
        self.note(|s| {
            s.started += 1;
            s.peak = s.peak.max(now);
        });
        self.gate.acquire().await.expect("gate open").forget();
        let r = self.inner.write(lba, data, fua).await;
        self.in_progress.fetch_sub(1, Ordering::SeqCst);
        self.note(|s| {
            s.finished += 1;
            s.log.push(format!("write {lba}"));
        });
        r
    }
    async fn flush(&self) -> BlockResult<()> {
        self.note(|s| s.log.push("flush".into()));
        self.inner.flush().await
    }
    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        self.inner.trim(lba, blocks).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        self.inner.write_zeroes(lba, blocks, fua).await
    }
}

/// The path of a client program the tests drive. A missing program fails the test: these
/// tests exist to prove that real clients work, and a skipped test proves nothing.
pub fn require_tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "`{name}` is not installed; install the Debian package `{package}` (./scripts/test does)"
    );
}

/// Runs a client program under `timeout(1)` so that a hang fails the test instead of CI.
pub fn run_tool(program: &Path, args: &[&str]) -> Output {
    let out = Command::new("timeout")
        .arg("--kill-after=5")
        .arg(WAIT.as_secs().to_string())
        .arg(program)
        .args(args)
        .output()
        .expect("run client program");
    if !out.status.success() {
        panic!(
            "{} {} failed with {}\nstdout:\n{}\nstderr:\n{}",
            program.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// MemDisk that yields to the scheduler between the steps of each command, so concurrent
/// read-modify-writes interleave as they would on a real, slower volume.
pub struct Yielding(pub MemDisk);

async fn yield_a_few() {
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
}

#[async_trait]
impl BlockDevice for Yielding {
    fn block_size(&self) -> u32 {
        self.0.block_size()
    }
    fn size_blocks(&self) -> u64 {
        self.0.size_blocks()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        yield_a_few().await;
        self.0.read(lba, buf).await
    }
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        yield_a_few().await;
        self.0.write(lba, data, fua).await
    }
    async fn flush(&self) -> BlockResult<()> {
        self.0.flush().await
    }
    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        self.0.trim(lba, blocks).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        yield_a_few().await;
        self.0.write_zeroes(lba, blocks, fua).await
    }
}
