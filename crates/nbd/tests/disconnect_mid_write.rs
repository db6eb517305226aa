//! A client that goes away mid-session loses nothing the server acknowledged: replies are
//! sent only after the volume completed the write. A write whose payload never fully arrived
//! is never performed; writes in flight when the client vanishes still complete; then the
//! connection and everything it held go away.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use common::{pattern, volume_bytes, GatedDisk, TestServer};
use nbd::proto::{self, Command, Request};
use nbd::MemDisk;

#[test]
fn acknowledged_writes_survive_an_abrupt_disconnect() {
    let disk = Arc::new(MemDisk::new(4096, 64).expect("memdisk"));
    let s = TestServer::unix(disk.clone(), |_| {});
    let mut c = s.connect();
    for i in 0..5u64 {
        c.write(i * 4096, &pattern(i * 4096, 4096, 1))
            .expect("acknowledged");
    }
    // A sixth write whose payload is cut off half way, then the client vanishes.
    let r = Request {
        flags: 0,
        command: Command::Write,
        handle: 99,
        offset: 5 * 4096,
        length: 4096,
    };
    c.sock
        .w
        .write_all(&proto::encode_request(&r))
        .expect("send");
    c.sock
        .w
        .write_all(&pattern(5 * 4096, 2048, 1))
        .expect("send");
    c.sock.kill();
    s.wait_for_connections(0);
    for i in 0..5u64 {
        assert_eq!(
            volume_bytes(disk.as_ref(), i * 4096, 4096),
            pattern(i * 4096, 4096, 1)
        );
    }
    assert_eq!(
        volume_bytes(disk.as_ref(), 5 * 4096, 4096),
        vec![0u8; 4096],
        "never performed"
    );
    assert_eq!(
        s.handle.stats().protocol_errors,
        0,
        "a client leaving is not a protocol error"
    );
    let mut again = s.connect();
    assert_eq!(again.read(4 * 4096, 4096), Ok(pattern(4 * 4096, 4096, 1)));
}

#[test]
fn writes_in_flight_when_the_client_vanishes_still_complete() {
    let disk = GatedDisk::new(4096, 64);
    let s = TestServer::unix(disk.clone(), |_| {});
    let mut c = s.connect();
    for i in 0..3u64 {
        c.send(
            Command::Write,
            0,
            i * 4096,
            4096,
            &pattern(i * 4096, 4096, 2),
        );
    }
    disk.wait_started(3);
    c.sock.kill();
    drop(c);
    // The connection lives on while its requests run: they hold its reply channel.
    assert_eq!(s.handle.stats().connections_active, 1);
    assert!(disk.inner.counters().writes == 0);
    disk.release(3);
    s.wait_for_connections(0);
    for i in 0..3u64 {
        assert_eq!(
            volume_bytes(&disk.inner, i * 4096, 4096),
            pattern(i * 4096, 4096, 2)
        );
    }
    assert_eq!(disk.inner.counters().writes, 3);
}

#[test]
fn disconnect_command_finishes_outstanding_requests_first() {
    let disk = GatedDisk::new(4096, 64);
    let s = TestServer::unix(disk.clone(), |_| {});
    let mut c = s.connect();
    let w = c.send(
        Command::Write,
        proto::CMD_FLAG_FUA,
        0,
        4096,
        &pattern(0, 4096, 3),
    );
    c.send(Command::Disc, 0, 0, 0, &[]);
    disk.wait_started(1);
    disk.release(1);
    // The reply to the write still comes, then the server closes the connection.
    assert_eq!(c.recv(&HashMap::new()), (w, 0, Vec::new()));
    assert!(c.sock.is_closed_by_server());
    assert_eq!(disk.inner.counters().fua_writes, 1);
}
