//! Many requests in flight: replies come back as requests complete, not in the order they
//! were sent; a connection keeps at most `max_in_flight` requests executing; several
//! connections execute requests at the same time.

mod common;

use std::collections::HashMap;

use common::{pattern, Client, GatedDisk, TestServer};
use std::io::Write;

use nbd::proto::{self, Command, Request};

#[test]
fn a_fast_read_overtakes_a_slow_write() {
    common::fast_read_overtakes_held_write(|_| {});
}

#[test]
fn replies_arrive_in_completion_order() {
    let disk = GatedDisk::new(4096, 256);
    let s = TestServer::unix(disk.clone(), |_| {});
    let mut c = s.connect();
    let handles: Vec<u64> = (0..4u64)
        .map(|i| {
            c.send(
                Command::Write,
                0,
                i * 4096,
                4096,
                &pattern(i * 4096, 4096, 2),
            )
        })
        .collect();
    disk.wait_started(4);
    // Each write finishes only when released; the writer sends each reply as it completes,
    // so every reply arrives while later-sent writes are still held.
    let mut got = Vec::new();
    for _ in 0..4 {
        disk.release(1);
        got.push(c.recv(&HashMap::new()));
    }
    let mut seen: Vec<u64> = got
        .iter()
        .map(|(h, e, _)| {
            assert_eq!(*e, 0);
            *h
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, handles, "one reply per request");
}

#[test]
fn in_flight_requests_per_connection_are_bounded() {
    const LIMIT: usize = 8;
    const SENT: u64 = 40;
    let disk = GatedDisk::new(4096, 256);
    let s = TestServer::unix(disk.clone(), |c| c.max_in_flight = LIMIT);
    let mut c = s.connect();
    // The server stops reading while its budget is used up, so the requests are sent from
    // another thread: this one must keep releasing writes and reading replies.
    let mut w = std::mem::replace(&mut c.sock.w, Box::new(std::io::sink()));
    let sender = std::thread::spawn(move || {
        for i in 0..SENT {
            let r = Request {
                flags: 0,
                command: Command::Write,
                handle: i,
                offset: i * 4096,
                length: 4096,
            };
            w.write_all(&proto::encode_request(&r)).expect("send");
            w.write_all(&pattern(i * 4096, 4096, 3)).expect("send");
        }
        w
    });
    disk.wait_started(LIMIT);
    let mut replies = HashMap::new();
    for _ in 0..SENT {
        disk.release(1);
        let (h, e, _) = c.recv(&HashMap::new());
        assert_eq!(e, 0);
        assert!(replies.insert(h, ()).is_none(), "duplicate reply for {h}");
        assert!(
            disk.peak() <= LIMIT,
            "{} writes executing at once",
            disk.peak()
        );
    }
    assert_eq!(
        disk.peak(),
        LIMIT,
        "the connection did use its whole budget"
    );
    c.sock.w = sender.join().expect("sender");
    for i in 0..SENT {
        assert_eq!(c.read(i * 4096, 4096), Ok(pattern(i * 4096, 4096, 3)));
    }
}

#[test]
fn connections_execute_concurrently() {
    const CONNS: usize = 4;
    let disk = GatedDisk::new(4096, 256);
    let s = TestServer::tcp(disk.clone(), |c| c.multi_conn = true);
    let mut clients: Vec<Client> = (0..CONNS).map(|_| s.connect()).collect();
    let handles: Vec<u64> = clients
        .iter_mut()
        .enumerate()
        .map(|(i, c)| {
            c.send(
                Command::Write,
                0,
                i as u64 * 4096,
                4096,
                &pattern(0, 4096, i as u8),
            )
        })
        .collect();
    // All four writes are executing at once, one from each connection.
    disk.wait_started(CONNS);
    disk.release(CONNS);
    for (c, h) in clients.iter_mut().zip(handles) {
        assert_eq!(c.recv(&HashMap::new()), (h, 0, Vec::new()));
    }
    // A flush on one connection is answered after writes acknowledged on the others.
    clients[0].flush().expect("flush");
    assert_eq!(disk.log().last().map(String::as_str), Some("flush"));
    for (i, c) in clients.iter_mut().enumerate() {
        let other = (i + 1) % CONNS;
        assert_eq!(
            c.read(other as u64 * 4096, 4096),
            Ok(pattern(0, 4096, other as u8))
        );
    }
    assert_eq!(s.handle.stats().connections_active, CONNS as u64);
}
