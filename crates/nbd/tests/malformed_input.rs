//! Bytes that are not NBD end the connection cleanly: no panic, no hang, no effect on other
//! connections. Random bytes at every stage of a session (seeded; the seed is printed) are
//! answered with replies or a close, and the server keeps serving.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use common::{greet, pattern, send_option, Socket, TestServer};
use nbd::proto::{self, Command};
use nbd::MemDisk;
use zns::SimRng;

fn server() -> (Arc<MemDisk>, TestServer) {
    let disk = Arc::new(MemDisk::new(4096, 256).expect("memdisk"));
    let s = TestServer::unix(disk.clone(), |c| c.max_request_bytes = 64 * 1024);
    (disk, s)
}

#[test]
fn bad_request_magic_closes_only_that_connection() {
    let (_d, s) = server();
    let mut good = s.connect();
    let mut bad = s.connect();
    bad.write(0, b"before").expect("write");
    let mut junk = proto::encode_request(&proto::Request {
        flags: 0,
        command: Command::Read,
        handle: 1,
        offset: 0,
        length: 512,
    });
    junk[0] ^= 0xff;
    bad.sock.w.write_all(&junk).expect("send");
    assert!(bad.sock.is_closed_by_server(), "no reply, just a close");
    s.wait_for_connections(1);
    assert_eq!(s.handle.stats().protocol_errors, 1);
    assert_eq!(good.read(0, 6), Ok(b"before".to_vec()));
}

#[test]
fn a_header_cut_short_is_a_client_gone_not_an_error() {
    let (_d, s) = server();
    let mut c = s.connect();
    c.sock.w.write_all(&[0x25, 0x60, 0x95]).expect("send");
    c.sock.finish_sending();
    assert!(c.sock.is_closed_by_server());
    s.wait_for_connections(0);
    assert_eq!(s.handle.stats().protocol_errors, 0);
}

/// Sends `bytes` then closes our side; the server must answer with whatever it answers and
/// then close its side too. Returns the bytes it sent back.
fn throw(sock: &mut Socket, bytes: &[u8]) -> Vec<u8> {
    // The server may hang up before taking every byte; that is a fine answer.
    let _ = sock.w.write_all(bytes);
    sock.finish_sending();
    let mut back = Vec::new();
    let _ = sock.r.read_to_end(&mut back);
    back
}

fn random_bytes(rng: &mut SimRng) -> Vec<u8> {
    let mut b = vec![0u8; rng.below(400) as usize];
    rng.fill(&mut b);
    b
}

/// Random bytes where a request's magic is right now and then, so that decoding goes deeper.
fn random_requests(rng: &mut SimRng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rng.below(6) {
        let mut r = [0u8; proto::REQUEST_LEN];
        rng.fill(&mut r);
        if rng.chance(0.8) {
            r[..4].copy_from_slice(&proto::REQUEST_MAGIC.to_be_bytes());
        }
        if rng.chance(0.5) {
            r[24] = 0; // lengths under 16 MiB
        }
        // No READs: a successful one would put data between the replies checked below.
        if r[6..8] == [0, 0] {
            r[7] = 1;
        }
        out.extend_from_slice(&r);
        out.extend(random_bytes(rng));
    }
    out
}

#[test]
fn random_bytes_at_every_stage_never_break_the_server() {
    let (disk, s) = server();
    for seed in 0..48u64 {
        println!("seed {seed}");
        let mut rng = SimRng::new(seed);
        let mut sock = Socket::connect(&s.addr).expect("connect");
        match seed % 3 {
            // Instead of client flags.
            0 => {
                sock.read_n(proto::GREETING_LEN).expect("greeting");
                throw(&mut sock, &random_bytes(&mut rng));
            }
            // Options with random numbers and data.
            1 => {
                greet(&mut sock, proto::FLAG_C_FIXED_NEWSTYLE).expect("greet");
                let mut opts = Vec::new();
                for _ in 0..rng.below(5) {
                    let mut data = random_bytes(&mut rng);
                    data.truncate(64);
                    let option = rng.below(16) as u32;
                    let h = proto::OptionHeader {
                        option,
                        length: data.len() as u32,
                    };
                    opts.extend_from_slice(&proto::encode_option_header(&h));
                    opts.extend(data);
                }
                throw(&mut sock, &opts);
            }
            // Requests in the transmission phase.
            _ => {
                greet(
                    &mut sock,
                    proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES,
                )
                .expect("greet");
                send_option(&mut sock, proto::OPT_EXPORT_NAME, b"").expect("send");
                sock.read_n(10).expect("export reply");
                let back = throw(&mut sock, &random_requests(&mut rng));
                assert_eq!(
                    back.len() % proto::SIMPLE_REPLY_LEN,
                    0,
                    "seed {seed}: whole replies only"
                );
                for reply in back.chunks(proto::SIMPLE_REPLY_LEN) {
                    assert!(
                        proto::decode_simple_reply(reply).is_ok(),
                        "seed {seed}: {reply:?}"
                    );
                }
            }
        }
        s.wait_for_connections(0);
    }
    // Still serving, and data written through a good client is intact.
    let mut c = s.connect();
    c.write(4096, &pattern(4096, 4096, 9)).expect("write");
    assert_eq!(c.read(4096, 4096), Ok(pattern(4096, 4096, 9)));
    assert!(disk.counters().writes >= 1);
}
