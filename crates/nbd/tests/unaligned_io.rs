//! Any byte range works, whatever the volume's block size: the server reads, patches and
//! writes back partial blocks. Checked against a byte-array model over seeded random
//! operations, and for the case that breaks naive read-modify-write: concurrent writes to
//! different bytes of the same block, from one connection and from several.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{pattern, Client, TestServer, Yielding};
use nbd::proto::{self, Command};
use nbd::MemDisk;
use zns::SimRng;

const BS: u32 = 4096;
const SIZE: u64 = 64 * 4096;

#[test]
fn random_unaligned_operations_match_a_byte_model() {
    let disk = Arc::new(MemDisk::new(BS, SIZE / u64::from(BS)).expect("memdisk"));
    let s = TestServer::unix(disk, |_| {});
    let mut c = s.connect();
    for seed in 0..8u64 {
        let mut rng = SimRng::new(seed);
        let mut model = vec![0u8; SIZE as usize];
        for round in 0..300u64 {
            let offset = rng.below(SIZE);
            let len = rng.below((SIZE - offset).min(3 * u64::from(BS))) as usize;
            let at = offset as usize;
            let what = rng.below(10);
            match what {
                0..=4 => {
                    let data = pattern(offset, len, round as u8);
                    c.write(offset, &data).expect("write");
                    model[at..at + len].copy_from_slice(&data);
                }
                5 => {
                    c.write_zeroes(offset, len as u32, 0).expect("zeroes");
                    model[at..at + len].fill(0);
                }
                6 => {
                    // Trim leaves partial blocks alone and zeroes (on MemDisk) whole ones;
                    // the model follows the server's documented choice.
                    c.trim(offset, len as u32).expect("trim");
                    let bs = BS as usize;
                    let first = at.div_ceil(bs) * bs;
                    let end = (at + len) / bs * bs;
                    if first < end {
                        model[first..end].fill(0);
                    }
                }
                _ => {
                    let got = c.read(offset, len as u32).expect("read");
                    assert!(
                        got == model[at..at + len],
                        "seed {seed} round {round}: read {offset}+{len}"
                    );
                }
            }
        }
        let all = c.read(0, SIZE as u32).expect("read all");
        assert!(all == model, "seed {seed}: final contents differ");
        c.write_zeroes(0, SIZE as u32, 0).expect("reset");
    }
}

/// Regression guard: without a per-block lock, two read-modify-writes of the same block both
/// read the old block and the later write-back erases the earlier one's bytes.
#[test]
fn concurrent_sector_writes_into_one_block_all_land() {
    let disk = Arc::new(Yielding(
        MemDisk::new(BS, SIZE / u64::from(BS)).expect("memdisk"),
    ));
    let s = TestServer::unix(disk, |c| c.multi_conn = true);
    let mut clients: Vec<Client> = (0..2).map(|_| s.connect()).collect();
    for round in 0..20u8 {
        let block = u64::from(round % 4) * u64::from(BS);
        // Eight 512-byte sectors of one block, split over two connections, all in flight.
        let mut sent: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        for sector in 0..8u64 {
            let at = block + sector * 512;
            let ci = (sector % 2) as usize;
            sent[ci].push(clients[ci].send(Command::Write, 0, at, 512, &pattern(at, 512, round)));
        }
        for (c, handles) in clients.iter_mut().zip(sent) {
            // Replies come in completion order; each request gets exactly one, without error.
            let mut got: Vec<u64> = handles
                .iter()
                .map(|_| {
                    let (h, e, _) = c.recv(&HashMap::new());
                    assert_eq!(e, 0);
                    h
                })
                .collect();
            got.sort_unstable();
            assert_eq!(got, handles);
        }
        let got = clients[0].read(block, BS).expect("read");
        assert!(
            got == pattern(block, BS as usize, round),
            "round {round}: a sector was lost"
        );
    }
    // Zeroing sub-block ranges concurrently with writes to the rest of the block.
    let h1 = clients[0].send(Command::WriteZeroes, 0, 100, 1000, &[]);
    let h2 = clients[1].send(Command::Write, proto::CMD_FLAG_FUA, 2048, 512, &[7u8; 512]);
    assert_eq!(clients[0].recv(&HashMap::new()), (h1, 0, Vec::new()));
    assert_eq!(clients[1].recv(&HashMap::new()), (h2, 0, Vec::new()));
    let got = clients[0].read(0, BS).expect("read");
    let mut want = pattern(0, BS as usize, 16);
    want[100..1100].fill(0);
    want[2048..2560].fill(7);
    assert!(got == want);
}
