//! A read-modify-write (a write that covers part of a block) and whole-block writes, write
//! zeroes and trims of the same block, in flight together on several connections, leave the
//! block as some serial order of them would: never with old bytes written back over a newer
//! whole-block write.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{pattern, Client, TestServer, Yielding};
use nbd::proto::Command;
use nbd::MemDisk;

const BS: u32 = 4096;
const BLOCKS: u64 = 8;

/// One request of a round, and what it does to a block's bytes.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Bytes `start..start + len` of the block get pattern `round`.
    Partial { start: usize, len: usize, round: u8 },
    /// The whole block gets pattern `round`.
    Whole { round: u8 },
    /// Write zeroes (or trim, which zeroes on `MemDisk`) over the whole block.
    Zero { trim: bool },
}

impl Step {
    fn apply(self, block: u64, bytes: &mut [u8]) {
        let at = block * u64::from(BS);
        match self {
            Step::Partial { start, len, round } => {
                bytes[start..start + len].copy_from_slice(&pattern(at + start as u64, len, round))
            }
            Step::Whole { round } => bytes.copy_from_slice(&pattern(at, BS as usize, round)),
            Step::Zero { .. } => bytes.fill(0),
        }
    }

    fn send(self, c: &mut Client, block: u64) -> u64 {
        let at = block * u64::from(BS);
        match self {
            Step::Partial { start, len, round } => {
                let at = at + start as u64;
                c.send(Command::Write, 0, at, len as u32, &pattern(at, len, round))
            }
            Step::Whole { round } => {
                c.send(Command::Write, 0, at, BS, &pattern(at, BS as usize, round))
            }
            Step::Zero { trim: false } => c.send(Command::WriteZeroes, 0, at, BS, &[]),
            Step::Zero { trim: true } => c.send(Command::Trim, 0, at, BS, &[]),
        }
    }
}

/// Every order in which the steps could have run one after another.
fn serial_results(block: u64, before: &[u8], steps: &[Step]) -> Vec<Vec<u8>> {
    let orders: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    orders
        .iter()
        .map(|order| {
            let mut b = before.to_vec();
            for &i in order {
                steps[i].apply(block, &mut b);
            }
            b
        })
        .collect()
}

/// Regression guard: whole-block writes, write zeroes and trims took no block lock, so one
/// that landed between a read-modify-write's read and its write-back was partly undone by the
/// old bytes the write-back carried, a result no serial order gives.
#[test]
fn racing_partial_and_whole_writes_of_a_block_match_a_serial_order() {
    let disk = Arc::new(Yielding(MemDisk::new(BS, BLOCKS).expect("memdisk")));
    let s = TestServer::unix(disk, |c| c.multi_conn = true);
    let mut clients: Vec<Client> = (0..3).map(|_| s.connect()).collect();
    for round in 0..120u8 {
        let block = u64::from(round) % BLOCKS;
        let at = block * u64::from(BS);
        let before = clients[0].read(at, BS).expect("read before");
        let start = 512 * usize::from(round % 7) + 1;
        let steps = [
            Step::Partial {
                start,
                len: 1000,
                round,
            },
            Step::Whole {
                round: round.wrapping_add(100),
            },
            Step::Zero {
                trim: round % 2 == 1,
            },
        ];
        // All three in flight together, one per connection.
        let handles: Vec<u64> = steps
            .iter()
            .zip(clients.iter_mut())
            .map(|(step, c)| step.send(c, block))
            .collect();
        for (c, h) in clients.iter_mut().zip(handles) {
            assert_eq!(c.recv(&HashMap::new()), (h, 0, Vec::new()), "round {round}");
        }
        let got = clients[0].read(at, BS).expect("read after");
        assert!(
            serial_results(block, &before, &steps).contains(&got),
            "round {round}: block {block} matches no serial order of {steps:?}"
        );
    }
}
