//! A read of a healthy array costs one member command per stripe unit it touches and no
//! other member command: 4 KiB reads issued many at a time are one member read each, a read
//! within a unit is one, a read across units is one per unit, and every member read moves
//! only the blocks asked for. On the timing model the member commands are the device's
//! work, so this is what keeps RAIZN's small reads level with a plain striped array's
//! (docs/BENCHMARKS.md, RAIZN Fig. 9).

mod common;

use std::sync::Arc;

use common::{block, small_array, BS, OOB};
use emu::{EmuDevice, Op};
use futures::future::join_all;
use raizn::RaiznVolume;
use zns::ZonedDevice;

const SALT: u64 = 73;
/// Blocks of a stripe unit in `small_array`.
const UNIT: u64 = 8;

/// Member reads and blocks they moved, summed over the members.
fn member_reads(emus: &[Arc<EmuDevice>]) -> (u64, u64) {
    emus.iter().fold((0, 0), |(c, b), e| {
        let s = e.stats();
        (c + s.count(Op::Read), b + s.blocks_read)
    })
}

/// Reads `n` blocks at `lba` and checks them; returns the member reads and blocks it cost.
async fn read_cost(v: &RaiznVolume, emus: &[Arc<EmuDevice>], lba: u64, n: u64) -> (u64, u64) {
    let before = member_reads(emus);
    let (mut d, mut m) = (vec![0u8; n as usize * BS], vec![0u8; n as usize * OOB]);
    if let Err(e) = v.read(lba, &mut d, Some(&mut m)).await {
        panic!("read of {n} blocks at {lba}: {e}");
    }
    for i in 0..n {
        let (bd, bm) = block(lba + i, SALT);
        let (a, b) = (i as usize, i as usize + 1);
        assert!(
            d[a * BS..b * BS] == bd[..] && m[a * OOB..b * OOB] == bm[..],
            "block {} reads wrong",
            lba + i
        );
    }
    let after = member_reads(emus);
    (after.0 - before.0, after.1 - before.1)
}

#[tokio::test]
async fn small_reads_at_depth_are_one_member_read_each() {
    let (emus, v) = small_array(71, 71).await;
    let zs = v.geometry().zone_start(1);
    // Four complete stripes (2 data units of 8 blocks each).
    let blocks = 4 * 2 * UNIT;
    for at in (zs..zs + blocks).step_by(16) {
        common::write_blocks(&v, at..at + 16, SALT, false).await;
    }
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }

    // Every block of the zone read on its own, all at once.
    let before = member_reads(&emus);
    let reads = (zs..zs + blocks).map(|lba| {
        let v = &v;
        async move {
            let (mut d, mut m) = (vec![0u8; BS], vec![0u8; OOB]);
            v.read(lba, &mut d, Some(&mut m))
                .await
                .map(|()| (lba, d, m))
        }
    });
    for r in join_all(reads).await {
        match r {
            Ok((lba, d, m)) => assert!((d, m) == block(lba, SALT), "block {lba} reads wrong"),
            Err(e) => panic!("a 4 KiB read: {e}"),
        }
    }
    let after = member_reads(&emus);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (blocks, blocks),
        "{blocks} reads of one block: member reads and blocks"
    );

    // Larger reads: one member read per unit touched, moving only the blocks asked for.
    assert_eq!(
        read_cost(&v, &emus, zs + UNIT, UNIT).await,
        (1, UNIT),
        "one unit"
    );
    assert_eq!(
        read_cost(&v, &emus, zs + 2, 3).await,
        (1, 3),
        "within a unit"
    );
    assert_eq!(
        read_cost(&v, &emus, zs + 6, 4).await,
        (2, 4),
        "across two units"
    );
    assert_eq!(
        read_cost(&v, &emus, zs, blocks).await,
        (blocks / UNIT, blocks),
        "the whole zone's data"
    );
}
