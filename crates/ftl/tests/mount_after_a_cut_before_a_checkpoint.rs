//! A mount after a power cut at the worst point for it, just before a periodic checkpoint is
//! due, reads and scans no more than the design promises (docs/DESIGN.md, "Checkpoints and
//! recovery"): both slots' headers, one full checkpoint and its chain of deltas (no larger
//! than a full one), and only the blocks written since the newest checkpoint: fewer than the
//! interval's user blocks, the copies collection made meanwhile and a header per zone
//! opened since. Counts, not time: `zonestack bench ftl-mount --auto` times the same cuts
//! at 16 GiB.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions, MountReport};
use zns::{BlockDevice, SimRng};

/// 40 zones of 4,096 blocks at 28% over-provisioning: automatic checkpoints every few zones,
/// collection running under random overwrites.
fn device() -> Arc<EmuDevice> {
    common::compact_4k(40, 4096)
}

enum Workload {
    /// Fill, then uniform random 4 KiB overwrites until a full checkpoint is due.
    Random,
    /// Sequential 128 KiB writes until the delta chain is as long as it gets and the full
    /// checkpoint that ends it is due.
    Chain,
}

/// Writes until the next write would make a periodic checkpoint due (after at least one
/// came), flushes and cuts power; returns the volume's progress at the cut, the mount's
/// report and the full checkpoint's blocks.
async fn cut_before_a_checkpoint(w: Workload) -> (ftl::CheckpointProgress, MountReport, u64) {
    let dev = device();
    let layout = ftl::format(dev.as_ref(), FormatOptions::with_op(280), 5, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev.clone(), MountOptions::default())
        .await
        .expect("mount");
    let n = vol.size_blocks();
    let mut rng = SimRng::new(5);
    let mut lba = 0;
    let mut written = 0u64;
    loop {
        let (blocks, pattern) = match w {
            Workload::Chain => (32u64, 0xa5u8),
            Workload::Random if written < n => (32, 0xa5),
            Workload::Random => (1, 0x5a),
        };
        let p = vol.checkpoint_progress(blocks, 1);
        let done = match w {
            Workload::Random => written >= n && p.checkpoints > 1 && p.next_full && p.due_after,
            Workload::Chain => p.chain_delta_blocks.is_some() && p.next_full && p.due_after,
        };
        if done {
            break;
        }
        assert!(written < 20 * n, "no cut point in twenty volumes of writes");
        let at = if blocks == 1 {
            rng.below(n)
        } else {
            let at = if lba + blocks > n { 0 } else { lba };
            lba = at + blocks;
            at
        };
        vol.write(at, &vec![pattern; blocks as usize * 4096], false)
            .await
            .expect("write");
        written += blocks;
    }
    vol.flush().await.expect("flush");
    let before = vol.checkpoint_progress(0, 0);
    dev.power_loss(5).expect("power loss");
    vol.crash().await;
    drop(vol);
    let (vol, report) = FtlVolume::mount(dev.clone(), MountOptions::default())
        .await
        .expect("mount after the cut");
    vol.verify().expect("mapping");
    vol.crash().await;
    (before, report, layout.checkpoint_blocks().expect("fits"))
}

fn check(what: &str, before: &ftl::CheckpointProgress, r: &MountReport, full: u64, zones: u64) {
    assert!(
        before.user_blocks_since < before.interval_blocks,
        "{what}: cut after the checkpoint was due: {before:?}"
    );
    // One header block per slot, one full checkpoint, a chain no larger than a full one.
    assert!(
        r.checkpoint_blocks_read <= 2 + 2 * full,
        "{what}: read {} blocks of checkpoint, a full one is {full}: {r:?}",
        r.checkpoint_blocks_read
    );
    let written = before.user_blocks_since + before.gc_blocks_since;
    assert!(
        r.scanned_blocks <= written + zones,
        "{what}: scanned {} blocks, {written} were written since the checkpoint: {before:?} {r:?}",
        r.scanned_blocks
    );
}

#[test]
fn a_cut_before_a_full_checkpoint_scans_only_the_interval() {
    let (before, r, full) = common::runtime().block_on(cut_before_a_checkpoint(Workload::Random));
    assert!(before.gc_blocks_since > 0, "collection ran: {before:?}");
    check("random", &before, &r, full, 40);
}

#[test]
fn a_cut_at_the_longest_delta_chain_reads_at_most_two_full_checkpoints() {
    let (before, r, full) = common::runtime().block_on(cut_before_a_checkpoint(Workload::Chain));
    assert!(r.deltas_applied > 1, "a chain of deltas: {r:?}");
    check("chain", &before, &r, full, 40);
}
