//! Requests the server refuses get the errno the protocol asks for, and the connection stays
//! usable: ranges past the end, flags a command does not take, unknown commands, requests
//! larger than the advertised maximum (their payload skipped), and volume errors mapped
//! through `BlockError::errno`, their text logged.

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{pattern, Client, TestServer};
use nbd::proto::{self, Command, EINVAL, EIO, ENOSPC, EPERM};
use nbd::MemDisk;
use zns::{BlockDevice, BlockError, BlockResult, Lba, NvmeStatus};

const SIZE: u64 = 1 << 20;
const MAX: u32 = 64 * 1024;

fn server() -> (TestServer, Client) {
    let disk = Arc::new(MemDisk::new(4096, SIZE / 4096).expect("memdisk"));
    let s = TestServer::unix(disk, |c| c.max_request_bytes = MAX);
    let c = s.connect();
    (s, c)
}

#[test]
fn out_of_range_is_enospc_for_writes_and_einval_for_the_rest() {
    let (_s, mut c) = server();
    assert_eq!(c.read(SIZE, 1), Err(EINVAL));
    assert_eq!(c.read(SIZE - 4096, 8192), Err(EINVAL));
    assert_eq!(c.read(u64::MAX, 4096), Err(EINVAL));
    assert_eq!(c.write(SIZE - 1, &[1, 2]), Err(ENOSPC));
    assert_eq!(c.write_zeroes(SIZE, 4096, 0), Err(ENOSPC));
    assert_eq!(c.trim(SIZE - 4096, 8192), Err(EINVAL));
    // Nothing was written by the refused requests, and the last byte is still reachable.
    assert_eq!(c.read(SIZE - 1, 1), Ok(vec![0]));
    assert_eq!(c.write(SIZE - 1, &[7]), Ok(()));
    assert_eq!(c.read(SIZE - 1, 1), Ok(vec![7]));
}

#[test]
fn flags_a_command_does_not_take_are_einval() {
    let (_s, mut c) = server();
    let read_df = c.send(Command::Read, proto::CMD_FLAG_DF, 0, 512, &[]);
    assert_eq!(c.recv(&HashMap::new()), (read_df, EINVAL, Vec::new()));
    // A refused write's payload is still consumed, so the next request is read correctly.
    let data = pattern(0, 4096, 1);
    let w = c.send(Command::Write, proto::CMD_FLAG_NO_HOLE, 0, 4096, &data);
    assert_eq!(c.recv(&HashMap::new()), (w, EINVAL, Vec::new()));
    assert_eq!(c.read(0, 4096), Ok(vec![0u8; 4096]));
    // FUA is accepted on every command (some clients set it on reads and flushes).
    let r = c.send(Command::Read, proto::CMD_FLAG_FUA, 0, 16, &[]);
    assert_eq!(c.recv(&HashMap::from([(r, 16)])), (r, 0, vec![0u8; 16]));
    assert_eq!(
        c.write_zeroes(0, 4096, proto::CMD_FLAG_NO_HOLE | proto::CMD_FLAG_FUA),
        Ok(())
    );
    assert_eq!(
        c.write_zeroes(0, 4096, proto::CMD_FLAG_FAST_ZERO),
        Err(EINVAL)
    );
}

#[test]
fn unknown_and_unadvertised_commands_are_einval() {
    let (_s, mut c) = server();
    for cmd in [
        Command::Cache,
        Command::BlockStatus,
        Command::Unknown(9),
        Command::Unknown(0xffff),
    ] {
        let h = c.send(cmd, 0, 0, 4096, &[]);
        assert_eq!(c.recv(&HashMap::new()), (h, EINVAL, Vec::new()), "{cmd:?}");
    }
    let h = c.send(Command::Flush, 0, 4096, 0, &[]);
    assert_eq!(
        c.recv(&HashMap::new()),
        (h, EINVAL, Vec::new()),
        "flush with an offset"
    );
    assert_eq!(c.flush(), Ok(()));
}

#[test]
fn requests_over_the_maximum_are_refused_and_payload_skipped() {
    let (s, mut c) = server();
    assert_eq!(c.read(0, MAX + 1), Err(EINVAL));
    let big = pattern(0, (MAX + 4096) as usize, 5);
    assert_eq!(c.write(0, &big), Err(EINVAL));
    // The refused payload was skipped, not taken as requests, and nothing was written.
    assert_eq!(c.read(0, 4096), Ok(vec![0u8; 4096]));
    assert_eq!(c.write(0, &big[..MAX as usize]), Ok(()));
    assert_eq!(c.read(0, MAX), Ok(big[..MAX as usize].to_vec()));
    assert_eq!(s.handle.stats().protocol_errors, 0);
}

#[test]
fn an_absurd_write_length_closes_the_connection_and_nothing_else() {
    let (s, mut c) = server();
    let mut other = s.connect();
    c.send(Command::Write, 0, 0, u32::MAX, &[]);
    assert!(c.sock.is_closed_by_server());
    s.wait_for_connections(1);
    assert_eq!(s.handle.stats().protocol_errors, 1);
    assert_eq!(other.write(0, b"still here"), Ok(()));
    assert_eq!(s.connect().read(0, 10), Ok(b"still here".to_vec()));
}

/// A volume that fails chosen commands the way a real volume reports errors.
struct FailingDisk(MemDisk);

const BAD_READ_LBA: Lba = 3;
const FULL_LBA: Lba = 5;
/// Write zeroes here fails the way a volume that stopped for good does.
const FAILED_LBA: Lba = 7;
const FAILED_CAUSE: &str = "zone 12 went offline while garbage collection moved its blocks";
/// A write here panics at once, a read here after it waited once: a broken invariant in the
/// volume's code, in the request's first poll or in its own task.
const PANIC_LBA: Lba = 9;
const PANIC_CAUSE: &str = "stripe table out of step";

#[async_trait]
impl BlockDevice for FailingDisk {
    fn block_size(&self) -> u32 {
        self.0.block_size()
    }
    fn size_blocks(&self) -> u64 {
        self.0.size_blocks()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        let blocks = buf.len() as u64 / 4096;
        if lba == PANIC_LBA {
            tokio::task::yield_now().await;
            panic!("{PANIC_CAUSE} on a read");
        }
        if (lba..lba + blocks).contains(&BAD_READ_LBA) {
            return Err(BlockError::Device(NvmeStatus::UnrecoveredReadError));
        }
        self.0.read(lba, buf).await
    }
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        if lba == FULL_LBA {
            return Err(BlockError::NoSpace);
        }
        if lba == PANIC_LBA {
            panic!("{PANIC_CAUSE} on a write");
        }
        self.0.write(lba, data, fua).await
    }
    async fn flush(&self) -> BlockResult<()> {
        Err(BlockError::Device(NvmeStatus::InternalError))
    }
    async fn trim(&self, _lba: Lba, _blocks: u64) -> BlockResult<()> {
        Err(BlockError::ReadOnly)
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        if lba == FAILED_LBA {
            return Err(BlockError::Failed(FAILED_CAUSE.into()));
        }
        self.0.write_zeroes(lba, blocks, fua).await
    }
}

#[test]
fn volume_errors_reply_with_their_errno() {
    let disk = Arc::new(FailingDisk(MemDisk::new(4096, 64).expect("memdisk")));
    let s = TestServer::unix(disk, |_| {});
    let mut c = s.connect();
    assert_eq!(c.read(3 * 4096, 4096), Err(EIO));
    // An unaligned read whose partial block fails fails too (no data is sent).
    assert_eq!(c.read(3 * 4096 + 100, 10), Err(EIO));
    assert_eq!(c.read(2 * 4096, 4096), Ok(vec![0u8; 4096]));
    assert_eq!(c.write(5 * 4096, &[1u8; 4096]), Err(ENOSPC));
    assert_eq!(c.trim(0, 8192), Err(EPERM));
    assert_eq!(c.flush(), Err(EIO));
    assert_eq!(c.write(0, &[1u8; 4096]), Ok(()));
    // The shutdown flush fails, and `run` says so.
    drop(c);
    let err = s.stop().expect_err("flush error reported");
    assert!(err.to_string().contains("Internal Error"), "{err}");
}

/// Every event logged in this test process, as its fields and message.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A `tracing` subscriber that keeps events in `LOGGED` (the server only emits events; the
/// binary installs a real subscriber).
struct Capture;

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(format!("{} ", event.metadata().level()));
        event.record(&mut f);
        LOGGED.lock().expect("log").push(f.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn a_failed_volume_replies_eio_and_its_cause_is_logged() {
    tracing::subscriber::set_global_default(Capture).expect("the only subscriber");
    let disk = Arc::new(FailingDisk(MemDisk::new(4096, 64).expect("memdisk")));
    let s = TestServer::unix(disk, |_| {});
    let mut c = s.connect();
    let at = FAILED_LBA * 4096;
    let h = c.send(Command::WriteZeroes, 0, at, 4096, &[]);
    assert_eq!(c.recv(&HashMap::new()), (h, EIO, Vec::new()));
    // The connection goes on.
    assert_eq!(c.write(0, b"after"), Ok(()));
    let logged = LOGGED.lock().expect("log").clone();
    let line = logged
        .iter()
        .find(|l| l.contains(FAILED_CAUSE))
        .unwrap_or_else(|| panic!("the cause is logged: {logged:?}"));
    for part in [
        "WARN",
        &format!("handle={h}"),
        "command=\"WRITE_ZEROES\"",
        &format!("offset={at}"),
        "length=4096",
        "errno=5",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    // A panic in the volume's code is the request's error, not a reply that never comes;
    // the connection and the server go on, and the panic's message is logged as an error.
    let at = PANIC_LBA * 4096;
    assert_eq!(c.write(at, &[3u8; 4096]), Err(EIO));
    assert_eq!(c.read(at, 4096), Err(EIO));
    assert_eq!(c.read(0, 5), Ok(b"after".to_vec()));
    assert_eq!(s.connect().read(0, 5), Ok(b"after".to_vec()));
    let logged = LOGGED.lock().expect("log").clone();
    for (command, what) in [("WRITE", "on a write"), ("READ", "on a read")] {
        let line = logged
            .iter()
            .find(|l| l.contains(&format!("{PANIC_CAUSE} {what}")) && l.starts_with("ERROR"))
            .unwrap_or_else(|| panic!("the panic {what} is logged as an error: {logged:?}"));
        assert!(line.contains(&format!("command=\"{command}\"")), "{line}");
    }
}
