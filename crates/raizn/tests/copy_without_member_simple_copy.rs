//! RAIZN over members without Simple Copy: a member that refuses Copy (Invalid Command
//! Opcode, as a drive without the command does) still makes an array whose Copy works, since
//! the volume copies by reading the sources and writing the destination through its own
//! striped write path (parity and partial parity included); it never sends a member Copy.
//! Checked healthy, degraded, and after a power cut.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use emu::EmuDevice;
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{CopyRange, Hook, Hooked, NvmeResult, NvmeStatus, OpKind, ZoneAction, ZonedDevice};

use common::{assert_blocks, block, block_on_paused, BS};

/// A member without Simple Copy (`Hooked` over the emulated drive): every command but Copy
/// goes to the drive; Copy is refused and counted.
#[derive(Default)]
struct NoCopy {
    copies: AtomicU64,
}

#[async_trait]
impl Hook for NoCopy {
    async fn before(&self, op: OpKind, _: Option<ZoneAction>) -> NvmeResult<()> {
        if op != OpKind::Copy {
            return Ok(());
        }
        self.copies.fetch_add(1, Ordering::Relaxed);
        Err(NvmeStatus::InvalidOpcode)
    }
}

async fn write_blocks(v: &RaiznVolume, lbas: std::ops::Range<u64>) {
    for lba in lbas {
        let (d, m) = block(lba, 0);
        if let Err(e) = v.write(lba, &d, Some(&m), false).await {
            panic!("write {lba}: {e}");
        }
    }
}

/// Reads `n` blocks at `from` and checks they hold `block(src + i, 0)`.
async fn assert_copied(v: &RaiznVolume, from: u64, src: u64, n: u64, what: &str) {
    for i in 0..n {
        let (d, m) = block(src + i, 0);
        let (mut gd, mut gm) = (vec![0u8; BS], vec![0u8; common::OOB]);
        if let Err(e) = v.read(from + i, &mut gd, Some(&mut gm)).await {
            panic!("{what}: read {}: {e}", from + i);
        }
        assert!(
            gd == d && gm == m,
            "{what}: block {} is not a copy of {}",
            from + i,
            src + i
        );
    }
}

async fn copy_through(failed: Option<usize>) {
    let g = common::small_member_geometry();
    let emus = common::emu_members(&g, 3, 31);
    let members: Vec<Arc<Hooked<Arc<EmuDevice>, NoCopy>>> = emus
        .iter()
        .map(|e| Arc::new(Hooked::new(e.clone(), NoCopy::default())))
        .collect();
    let as_members = || {
        members
            .iter()
            .map(|m| m.clone() as Member)
            .collect::<Vec<_>>()
    };
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([5; 16])
    };
    let v = match RaiznVolume::format(as_members(), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let lg = v.geometry();
    let z1 = lg.zone_start(1);
    write_blocks(&v, 0..40).await;
    if let Some(f) = failed {
        if let Err(e) = v.fail_member(f).await {
            panic!("fail member {f}: {e}");
        }
    }
    // Two ranges into another zone (crossing a stripe, ending inside one), then a copy
    // within the source zone at its write pointer.
    let ranges = [
        CopyRange { lba: 3, blocks: 14 },
        CopyRange { lba: 30, blocks: 7 },
    ];
    if let Err(e) = v.copy(&ranges, z1, false).await {
        panic!("copy to zone 1 (member {failed:?} failed): {e}");
    }
    if let Err(e) = v.copy(&[CopyRange { lba: 0, blocks: 9 }], 40, true).await {
        panic!("copy within zone 0 (member {failed:?} failed): {e}");
    }
    let what = format!("member {failed:?} failed");
    assert_copied(&v, z1, 3, 14, &what).await;
    assert_copied(&v, z1 + 14, 30, 7, &what).await;
    assert_copied(&v, 40, 0, 9, &what).await;
    assert_blocks(&v, 0..40, 0, &what).await;
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    drop(v);
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(77 + i as u64) {
            panic!("power loss: {err}");
        }
    }
    let v = match RaiznVolume::open(as_members()).await {
        Ok(v) => v,
        Err(e) => panic!("reopen: {e}"),
    };
    let what = format!("{what}, after a power cut");
    assert_copied(&v, z1, 3, 14, &what).await;
    assert_copied(&v, z1 + 14, 30, 7, &what).await;
    assert_copied(&v, 40, 0, 9, &what).await;
    let asked: u64 = members
        .iter()
        .map(|m| m.hook.copies.load(Ordering::Relaxed))
        .sum();
    assert_eq!(asked, 0, "the array sent a member Copy");
}

#[test]
fn copy_works_over_members_without_simple_copy() {
    for failed in [None, Some(0), Some(1), Some(2)] {
        block_on_paused(copy_through(failed));
    }
}
