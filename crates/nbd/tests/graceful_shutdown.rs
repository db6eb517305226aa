//! Shutdown stops accepting, lets requests in flight finish and their replies go out, closes
//! the connections, then flushes the volume, so everything acknowledged is durable when the
//! server returns. A client that never reads its replies cannot hold shutdown up for longer
//! than the grace period.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{greet, pattern, Addr, GatedDisk, Socket, TestServer, WAIT};
use nbd::proto::{self, Command};
use nbd::{MemDisk, NbdServer, ServerConfig};

#[test]
fn in_flight_requests_finish_before_the_final_flush() {
    let disk = GatedDisk::new(4096, 64);
    let s = TestServer::unix(disk.clone(), |_| {});
    let Addr::Unix(path) = s.addr.clone() else {
        unreachable!("unix server")
    };
    let mut c = s.connect();
    let w = c.send(Command::Write, 0, 8192, 4096, &pattern(8192, 4096, 1));
    disk.wait_started(1);
    s.handle.shutdown();
    // The write is held at the gate, so the server cannot have finished.
    assert!(!s.is_finished());
    disk.release(1);
    assert_eq!(
        c.recv(&HashMap::new()),
        (w, 0, Vec::new()),
        "the reply still goes out"
    );
    assert!(c.sock.is_closed_by_server());
    s.stop().expect("clean shutdown");
    assert_eq!(disk.log(), vec!["write 2".to_string(), "flush".to_string()]);
    assert!(!path.exists(), "the socket file is removed");
    assert!(
        Socket::connect(&Addr::Unix(path)).is_err(),
        "no longer accepting"
    );
}

#[test]
fn idle_and_negotiating_clients_are_closed() {
    let disk = Arc::new(MemDisk::new(4096, 64).expect("memdisk"));
    let s = TestServer::tcp(disk.clone(), |_| {});
    let addr = s.addr.clone();
    let mut idle = s.connect();
    idle.write(0, b"kept").expect("write");
    let mut haggling = Socket::connect(&addr).expect("connect");
    greet(&mut haggling, proto::FLAG_C_FIXED_NEWSTYLE).expect("greet");
    s.stop().expect("clean shutdown");
    assert!(idle.sock.is_closed_by_server());
    assert!(haggling.is_closed_by_server());
    assert!(Socket::connect(&addr).is_err(), "no longer accepting");
    assert_eq!(disk.counters().flushes, 1);
}

#[test]
fn serve_until_returns_when_its_future_resolves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = Arc::new(MemDisk::new(4096, 64).expect("memdisk"));
    let server =
        NbdServer::bind(ServerConfig::unix(dir.path().join("s")), disk.clone()).expect("bind");
    let addr = Addr::Unix(dir.path().join("s"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let t = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(server.serve_until(async {
            let _ = rx.await;
        }))
    });
    let mut c = common::Client::go(&addr, "").expect("go");
    c.write_fua(0, &[5u8; 4096]).expect("write");
    tx.send(()).expect("signal");
    t.join().expect("thread").expect("clean shutdown");
    assert!(c.sock.is_closed_by_server());
    assert_eq!(
        (disk.counters().fua_writes, disk.counters().flushes),
        (1, 1)
    );
}

#[test]
fn a_client_that_never_reads_cannot_stall_shutdown_past_the_grace_period() {
    const GRACE: Duration = Duration::from_millis(300);
    let disk = Arc::new(MemDisk::new(4096, 8192).expect("memdisk"));
    let s = TestServer::unix(disk.clone(), |c| c.shutdown_grace = GRACE);
    let mut c = s.connect();
    // A 32 MiB read: far more than the socket buffers hold. Reading the reply header proves
    // the server is sending it; the client then stops reading, and the server's writer is
    // stuck until the grace period ends.
    let h = c.send(Command::Read, 0, 0, 32 << 20, &[]);
    let header = c
        .sock
        .read_n(proto::SIMPLE_REPLY_LEN)
        .expect("reply header");
    assert_eq!(
        proto::decode_simple_reply(&header).map(|r| (r.handle, r.error)),
        Ok((h, 0))
    );
    let started = Instant::now();
    s.stop().expect("shutdown completes");
    let took = started.elapsed();
    assert!(took >= GRACE && took < WAIT / 2, "took {took:?}");
    assert_eq!(disk.counters().flushes, 1, "the volume is still flushed");
}
