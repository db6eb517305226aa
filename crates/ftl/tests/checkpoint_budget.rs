//! Checkpoints cost at most `ftl::plan::CHECKPOINT_PERCENT_MAX` (1%) of the user's writes at
//! every point of a steady random overwrite, counting every checkpoint written since mount:
//! the mount of a freshly formatted volume writes none (nothing changed since the format's),
//! and the periodic one comes every so many user blocks, although a zone holds fewer user
//! blocks than its size (its header; in-band summary blocks without per-block metadata). In
//! Zone Write, Zone Append and summary mode. And a mount writes a checkpoint exactly when it
//! found something the newest one does not record.

mod common;

use common::{block, formatted, geometry, small_opts};
use ftl::{FtlVolume, MountOptions, WriteMode};
use zns::{BlockDevice, SimRng};

async fn run(oob_size: u32, write_mode: WriteMode, seed: u64) {
    let what = format!("oob {oob_size}, {write_mode:?}, seed {seed}");
    let dev = formatted(oob_size, 40, 400, seed).await;
    let opts = MountOptions {
        write_mode,
        // Automatic: spaced for the 1% budget (`plan::tune_mount`).
        checkpoint_every_zones: 0,
        ..small_opts()
    };
    let (vol, report) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    assert!(!report.checkpoint_written, "{what}: {report:?}");
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let ckpt_bytes = vol.layout().checkpoint_blocks().expect("fits") * bs as u64;
    let interval = u64::from(vol.stats().checkpoint_every_zones) * vol.layout().zone_blocks;
    let mut rng = SimRng::new(seed);
    let mut version = 0u64;
    // Six intervals of user writes: several periodic checkpoints.
    let mut written = 0;
    while written < 6 * interval {
        let len = rng.range_inclusive(1, 8);
        let lba = rng.below(n - len + 1);
        let mut data = Vec::new();
        for _ in 0..len {
            version += 1;
            data.extend(block(bs, version));
        }
        vol.write(lba, &data, false)
            .await
            .unwrap_or_else(|e| panic!("{what}: write of {lba}+{len}: {e}"));
        written += len;
        let s = vol.stats();
        let user_bytes = s.counters.user_blocks * bs as u64;
        assert!(
            s.checkpoints * ckpt_bytes * 100 <= user_bytes,
            "{what}: {} checkpoints of {ckpt_bytes} bytes after {} user blocks",
            s.checkpoints,
            s.counters.user_blocks
        );
    }
    let s = vol.stats();
    assert!(
        s.checkpoints >= 5,
        "{what}: only {} checkpoints",
        s.checkpoints
    );
    assert!(
        s.checkpoint_bytes_per_user_gib() <= f64::from(1u32 << 30) / 100.0,
        "{what}: {} bytes per GiB",
        s.checkpoint_bytes_per_user_gib()
    );
    vol.unmount().await.expect("unmount");
}

#[test]
fn checkpoints_cost_at_most_one_percent_of_user_writes() {
    let rt = common::runtime();
    for (oob, mode) in [
        (16, WriteMode::ZoneWrite),
        (16, WriteMode::ZoneAppend),
        (0, WriteMode::ZoneWrite),
    ] {
        rt.block_on(run(oob, mode, 11));
    }
}

/// `small_opts` with collection from 4 free zones: at 40% a full volume of 20 zones leaves
/// at most 3 free, so a mount refuses 5 (`ftl::plan::check_watermarks`).
fn forty_percent_opts() -> MountOptions {
    MountOptions {
        gc_background_free_zones: 4,
        ..small_opts()
    }
}

/// A mount writes a checkpoint when it found writes since the newest one, and none when it
/// found nothing new, after a format or after a power cut that came right after a mount's
/// own checkpoint; every acknowledged, flushed write reads back either way.
#[test]
fn a_mount_checkpoints_only_what_changed() {
    let rt = common::runtime();
    rt.block_on(async {
        let dev = formatted(geometry().oob_size, geometry().zone_count, 400, 5).await;
        let (vol, r) = FtlVolume::mount(dev.clone(), forty_percent_opts())
            .await
            .expect("mount");
        assert!(!r.checkpoint_written, "{r:?}");
        let bs = vol.block_size() as usize;
        for lba in 0..40 {
            vol.write(lba, &block(bs, lba + 1), false)
                .await
                .expect("write");
        }
        vol.flush().await.expect("flush");
        let written = vol.stats().checkpoints;
        vol.crash().await;
        dev.power_loss(1).expect("power loss");
        drop(vol);
        // Recovered from the format's checkpoint, since the mount wrote none.
        let (vol, r) = FtlVolume::mount(dev.clone(), forty_percent_opts())
            .await
            .expect("mount after the cut");
        assert_eq!(r.checkpoint_number, 1 + written, "{r:?}");
        assert!(r.scanned_blocks > 0 && r.checkpoint_written, "{r:?}");
        vol.crash().await;
        dev.power_loss(2).expect("power loss");
        drop(vol);
        // Nothing was written after that mount's checkpoint: the next mount writes none.
        let (vol, r) = FtlVolume::mount(dev.clone(), forty_percent_opts())
            .await
            .expect("second mount after a cut");
        assert_eq!(r.checkpoint_number, 2 + written, "{r:?}");
        assert!(!r.checkpoint_written && r.scanned_blocks == 0, "{r:?}");
        assert_eq!(vol.stats().checkpoints, 0);
        let mut buf = vec![0u8; bs];
        for lba in 0..40 {
            vol.read(lba, &mut buf).await.expect("read");
            assert_eq!(buf, block(bs, lba + 1), "LBA {lba}");
        }
        vol.unmount().await.expect("unmount");
    });
}
