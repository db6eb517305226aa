//! The periodic checkpoint counts user blocks only (its budget is a share of the user's
//! writes), so a mount after a crash just before one is due scans the interval's user
//! blocks and every copy garbage collection made meanwhile: at a write amplification of 5 or
//! more (uniform random overwrites on a small spare) five or more intervals' worth of
//! blocks (here the whole device). With `MountOptions::checkpoint_scan_intervals` set (here
//! to one interval: a device this small holds four) a checkpoint is also due once user blocks and copies
//! since the last one reach that many intervals (docs/DESIGN.md, "Checkpoints and
//! recovery"), and the scan stays within them (and the copies of the round under way)
//! whatever the write amplification; without it the same cut scans past them. Counts, not
//! time.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, SimRng};

/// 64 zones of 1,024 blocks of 4 KiB at 10% over-provisioning: checkpoints every 16 zones
/// of user writes, and uniform random overwrites collect at a write amplification far
/// above 1.
fn device() -> Arc<EmuDevice> {
    common::compact_4k(64, 1024)
}

/// The scan bound the bounded mount uses, in checkpoint intervals.
const INTERVALS: u32 = 1;

/// What one cut measured.
struct Cut {
    before: ftl::CheckpointProgress,
    counters: ftl::map::Counters,
    report: ftl::MountReport,
    layout: ftl::Layout,
    volume_blocks: u64,
}

/// Fills the volume and overwrites it uniformly at random, one block at a time, until a
/// checkpoint came in that phase and the next one would be due after one more write; then
/// flushes, cuts power and mounts.
async fn cut_before_a_checkpoint(opts: MountOptions) -> Cut {
    let dev = device();
    let layout = ftl::format(dev.as_ref(), FormatOptions::with_op(100), 7, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let n = vol.size_blocks();
    let fill = vec![0xa5u8; 32 * 4096];
    let mut lba = 0;
    while lba + 32 <= n {
        vol.write(lba, &fill, false).await.expect("fill");
        lba += 32;
    }
    let start = vol.checkpoint_progress(0, 0).checkpoints;
    let one = vec![0x5au8; 4096];
    let mut rng = SimRng::new(7);
    let mut written = 0u64;
    loop {
        // Collection's copies come in rounds and make the checkpoint due by themselves:
        // the cut comes within a zone of the bound, or before the user interval ends.
        let p = vol.checkpoint_progress(1, 1);
        let near_bound =
            p.user_blocks_since + p.gc_blocks_since + layout.zone_blocks >= p.scan_bound_blocks;
        if p.checkpoints > start + 1 && (p.due_after || near_bound) {
            break;
        }
        assert!(written < 20 * n, "no cut point in twenty volumes of writes");
        vol.write(rng.below(n), &one, false).await.expect("write");
        written += 1;
    }
    vol.flush().await.expect("flush");
    let before = vol.checkpoint_progress(0, 0);
    let counters = vol.counters();
    dev.power_loss(7).expect("power loss");
    vol.crash().await;
    drop(vol);
    let (vol, report) = FtlVolume::mount(dev.clone(), opts)
        .await
        .expect("mount after the cut");
    vol.verify().expect("mapping");
    vol.crash().await;
    Cut {
        before,
        counters,
        report,
        layout,
        volume_blocks: n,
    }
}

/// The most the mount may scan with the bound: that many intervals, two zones of
/// copies of the round under way when the bound was reached (a zone per lane), and a header
/// per zone.
fn bound(c: &Cut) -> u64 {
    u64::from(INTERVALS) * c.before.interval_blocks
        + 2 * c.layout.zone_blocks
        + u64::from(c.layout.data_zones)
}

#[test]
fn a_cut_before_a_checkpoint_scans_a_bounded_number_of_intervals_under_heavy_collection() {
    let opts = MountOptions {
        checkpoint_scan_intervals: INTERVALS,
        ..MountOptions::default()
    };
    let c = common::runtime().block_on(cut_before_a_checkpoint(opts));
    let (before, r) = (&c.before, &c.report);
    // Collection was heavy: over the random phase, more copies than the bound allows for
    // the user blocks, so counting user blocks alone would scan past it (the test below).
    let k = u64::from(INTERVALS);
    let random = c.counters.user_blocks.saturating_sub(c.volume_blocks);
    assert!(
        c.counters.gc_blocks > k * random,
        "write amplification too low to test the bound: {:?}",
        c.counters
    );
    assert!(
        before.user_blocks_since < before.interval_blocks,
        "the cut came after the user interval: {before:?}"
    );
    // The mount scanned only what was written since the checkpoint (and a header per zone
    // opened since), and that is within the bound.
    let since = before.user_blocks_since + before.gc_blocks_since;
    assert!(
        r.scanned_blocks <= since + u64::from(c.layout.data_zones),
        "scanned {} blocks, {since} were written since the checkpoint: {before:?} {r:?}",
        r.scanned_blocks
    );
    assert!(
        r.scanned_blocks <= bound(&c),
        "scanned {} blocks, more than {k} intervals of {}: {before:?} {r:?}",
        r.scanned_blocks,
        before.interval_blocks
    );
}

/// Why the bound is needed: without it (the default: the checkpoint counts user blocks only)
/// the same workload's mount scans past it.
#[test]
fn without_the_scan_bound_the_same_cut_scans_past_it() {
    let c = common::runtime().block_on(cut_before_a_checkpoint(MountOptions::default()));
    assert!(
        c.report.scanned_blocks > bound(&c),
        "scanned {} blocks, within the bound of {}: {:?} {:?}",
        c.report.scanned_blocks,
        bound(&c),
        c.before,
        c.report
    );
}
