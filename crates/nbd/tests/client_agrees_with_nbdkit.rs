//! The test client and this server against a reference: the same seeded script of commands
//! runs on nbdkit's memory plugin (nbdkit in single mode on a pipe) and on this server over a
//! `MemDisk`, and every result (data or errno) must be identical. This keeps the other tests
//! honest: their client is checked against an independent server, and where the protocol
//! leaves a choice, this server is checked against a widely used one.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{pattern, require_tool, Client, Socket, TestServer};
use nbd::proto;
use nbd::MemDisk;
use zns::SimRng;

const SIZE: u64 = 1 << 20;

/// One command of the script and what it returned.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Data(Vec<u8>),
    Done,
    Errno(u32),
}

fn outcome(r: Result<Vec<u8>, u32>) -> Outcome {
    match r {
        Ok(d) if d.is_empty() => Outcome::Done,
        Ok(d) => Outcome::Data(d),
        Err(e) => Outcome::Errno(e),
    }
}

fn script(c: &mut Client, seed: u64) -> Vec<Outcome> {
    let mut rng = SimRng::new(seed);
    let mut out = Vec::new();
    for round in 0..200u64 {
        // Mostly inside the export, sometimes crossing or beyond its end.
        let offset = if rng.chance(0.05) {
            SIZE - rng.below(4096)
        } else {
            rng.below(SIZE)
        };
        let len = rng.range_inclusive(1, 12_000) as u32;
        let r = match rng.below(8) {
            0..=2 => c
                .write(offset, &pattern(offset, len as usize, round as u8))
                .map(|_| Vec::new()),
            3 => c.write_zeroes(offset, len, 0).map(|_| Vec::new()),
            4 => c.flush().map(|_| Vec::new()),
            _ => c.read(offset, len),
        };
        out.push(outcome(r));
    }
    // The whole export at the end, in the largest pieces both accept.
    for i in 0..SIZE / 65536 {
        out.push(outcome(c.read(i * 65536, 65536)));
    }
    out
}

#[test]
fn nbdkit_memory_and_this_server_answer_a_script_identically() {
    let nbdkit = require_tool("nbdkit", "nbdkit");
    for seed in 0..3u64 {
        let mut child = Command::new(&nbdkit)
            .args(["-s", "memory", &SIZE.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // nbdkit logs each refused request; the comparison below is the check.
            .stderr(Stdio::null())
            .spawn()
            .expect("start nbdkit");
        let sock = Socket::from_pipes(
            child.stdout.take().expect("stdout"),
            child.stdin.take().expect("stdin"),
        );
        let mut reference = Client::go_on(sock, "").expect("nbdkit handshake");
        assert_eq!(reference.export.size, SIZE);
        let want = script(&mut reference, seed);
        reference.send(proto::Command::Disc, 0, 0, 0, &[]);
        drop(reference);
        assert!(child.wait().expect("nbdkit exit").success());

        let disk = Arc::new(MemDisk::new(4096, SIZE / 4096).expect("memdisk"));
        let s = TestServer::unix(disk, |_| {});
        let mut ours = s.connect();
        let got = script(&mut ours, seed);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert!(
                w == g,
                "seed {seed}, command {i}: nbdkit {w:?}, this server {g:?}"
            );
        }
        assert_eq!(want.len(), got.len());
    }
}
