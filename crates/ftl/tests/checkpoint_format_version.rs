//! The checkpoint's format version (docs/FORMAT.md, "Versions"): a volume without threaded
//! logging stays version 1, which every build mounts; one with threaded logging is version
//! 2, since it may hold threaded-logging records, which a build of version 1 would read as
//! damaged trim records. A volume of version 1 with threaded logging (written before the
//! records) still mounts, and writes no record until both checkpoint slots hold version 2;
//! a version newer than this build's is refused, in either slot, naming the version.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, geometry, paused_runtime, BeforeWrite, VersionModel, Watched};
use emu::EmuDevice;
use ftl::checkpoint;
use ftl::threaded::TlPolicy;
use ftl::{FormatOptions, FtlVolume, Layout, MountOptions};
use zns::{BlockDevice, Geometry, NvmeResult, SimRng, ZonedDevice};

/// Before each write of a threaded-logging record: counts it, and those written while a
/// checkpoint slot held a checkpoint of version 1.
struct Watch {
    layout: Layout,
    records: AtomicU64,
    beside_version_1: AtomicU64,
}

#[async_trait]
impl BeforeWrite for Watch {
    async fn before_write(&self, inner: &EmuDevice, data: &[u8]) -> NvmeResult<()> {
        if data.starts_with(b"ZSTKTLRC") {
            self.records.fetch_add(1, Ordering::Relaxed);
            for slot in 0..2 {
                let h = checkpoint::read_header(inner, &self.layout, slot).await;
                if h.is_ok_and(|h| h.version == checkpoint::VERSION_1) {
                    self.beside_version_1.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }
}

/// Threaded logging at every turn, and periodic checkpoints every 6 zones of user writes:
/// rare enough that, with the slots' versions ignored, a record would be written while a
/// slot still holds version 1 (every seed of the first test), frequent enough that turns
/// find their zones covered and write records.
fn threaded_opts() -> MountOptions {
    MountOptions {
        write_mode: ftl::WriteMode::ZoneWrite,
        threaded: TlPolicy::Always,
        checkpoint_every_zones: 6,
        // Collection and threaded logging both start one zone above the floor: threaded
        // logging comes when collection would, and with the background watermark two zones
        // above it collection kept the zones with holes to itself on this volume.
        gc_background_free_zones: 4,
        ..common::small_opts()
    }
}

/// The format version of each slot's checkpoint (None: no readable checkpoint).
async fn versions(dev: &dyn ZonedDevice, layout: &Layout) -> [Option<u32>; 2] {
    let mut v = [None; 2];
    for (slot, v) in v.iter_mut().enumerate() {
        *v = checkpoint::read_header(dev, layout, slot as u32)
            .await
            .ok()
            .map(|h| h.version);
    }
    v
}

/// Rewrites the checkpoint in `slot` with format version `version` (checksums recomputed),
/// as a build of that version would have written it.
async fn rewrite_version(dev: &dyn ZonedDevice, layout: &Layout, slot: u32, version: u32) {
    let mut ck = checkpoint::read_slot(dev, layout, slot)
        .await
        .expect("read slot");
    ck.header.version = version;
    checkpoint::write_slot(dev, layout, slot, &checkpoint::encode(&ck), false)
        .await
        .expect("write slot");
}

/// Random writes of versions 1, 2, ... (a fresh `model`), 10% FUA and an occasional flush,
/// over `rounds` times the volume.
async fn write_randomly(vol: &FtlVolume, model: &mut VersionModel, rng: &mut SimRng, rounds: u64) {
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    for version in 1..=rounds * n {
        let lba = rng.below(n);
        let fua = rng.chance(0.1);
        vol.write(lba, &block(bs, version), fua)
            .await
            .expect("write");
        model.write(lba, version, fua);
        if rng.chance(0.05) {
            vol.flush().await.expect("flush");
            model.flush();
        }
    }
}

/// A volume with threaded logging formatted by a build of version 1 (its checkpoint
/// rewritten as version 1) mounts; its turns write checkpoints until both slots hold version
/// 2, then records; after a power cut every durable write reads back.
async fn version_1_threaded_volume(seed: u64) -> (u64, u64) {
    let mut rng = SimRng::new(seed);
    let g = Geometry {
        block_size: 4096,
        ..geometry()
    };
    let emu_dev = common::device_plus(g, seed);
    let fmt = FormatOptions {
        threaded_logging: true,
        ..FormatOptions::with_op(580)
    };
    let layout = ftl::format(emu_dev.as_ref(), fmt, seed, false)
        .await
        .expect("format");
    assert_eq!(
        versions(emu_dev.as_ref(), &layout).await,
        [Some(checkpoint::VERSION), None],
        "seed {seed}: a volume formatted with threaded logging is version 2"
    );
    rewrite_version(emu_dev.as_ref(), &layout, 0, checkpoint::VERSION_1).await;
    let dev = Arc::new(Watched {
        inner: emu_dev.clone(),
        watch: Watch {
            layout,
            records: AtomicU64::new(0),
            beside_version_1: AtomicU64::new(0),
        },
    });
    let (vol, _) = FtlVolume::mount(dev.clone(), threaded_opts())
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: a version 1 volume mounts: {e}"));
    let mut model = VersionModel::new(vol.size_blocks());
    write_randomly(&vol, &mut model, &mut rng, 16).await;
    let records = vol.stats().threaded.records;
    assert_eq!(
        versions(emu_dev.as_ref(), &layout).await,
        [Some(checkpoint::VERSION); 2],
        "seed {seed}: both slots are version 2 once records were written"
    );
    emu_dev.power_loss(rng.next_u64()).expect("power loss");
    vol.crash().await;
    let (vol, _) = FtlVolume::mount(dev.clone(), threaded_opts())
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: mount after the cut: {e}"));
    model.check_all(&vol, seed, "after the power loss").await;
    vol.crash().await;
    (records, dev.watch.beside_version_1.load(Ordering::Relaxed))
}

#[test]
fn a_version_1_volume_with_threaded_logging_mounts_and_writes_records_only_at_version_2() {
    let mut early = 0;
    for seed in 0..2 {
        let (records, e) = paused_runtime().block_on(version_1_threaded_volume(seed));
        assert!(records >= 1, "seed {seed}: no record was written");
        early += e;
    }
    assert_eq!(
        early, 0,
        "records written while a slot still held a version 1 checkpoint"
    );
}

/// Before each write of a delta checkpoint: counts it, and those written while a slot held
/// a checkpoint of a version older than 3 (a build of that version would mount the slot
/// without knowing the deltas).
struct DeltaWatch {
    layout: Layout,
    deltas: AtomicU64,
    fulls: AtomicU64,
    beside_older: AtomicU64,
}

#[async_trait]
impl BeforeWrite for DeltaWatch {
    async fn before_write(&self, inner: &EmuDevice, data: &[u8]) -> NvmeResult<()> {
        if data.starts_with(b"ZSTKFTLC") {
            self.fulls.fetch_add(1, Ordering::Relaxed);
        }
        if data.starts_with(b"ZSTKFTLD") {
            self.deltas.fetch_add(1, Ordering::Relaxed);
            for slot in 0..2 {
                let h = checkpoint::read_header(inner, &self.layout, slot).await;
                if h.is_ok_and(|h| h.version < checkpoint::VERSION_3) {
                    self.beside_older.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }
}

/// A volume without threaded logging written by a build of version 1 (both slots, or slot
/// 0 with slot 1 empty, rewritten as version 1) mounts; its full checkpoints are version 3,
/// and it writes no delta while a slot still holds version 1: deltas start after two full
/// checkpoints (one, if the other slot was empty). Every write reads back after a remount.
async fn version_1_volume(both_slots: bool, seed: u64) -> (u64, u64, u64) {
    let g = Geometry {
        block_size: 4096,
        ..geometry()
    };
    let emu_dev = common::device(g, seed);
    let layout = ftl::format(emu_dev.as_ref(), FormatOptions::with_op(580), seed, false)
        .await
        .expect("format");
    assert!(layout.has_delta_room());
    assert_eq!(
        versions(emu_dev.as_ref(), &layout).await,
        [Some(checkpoint::VERSION_3), None],
        "seed {seed}: a volume with room for deltas is version 3"
    );
    if both_slots {
        // Unmount writes one full checkpoint, into slot 1.
        let (vol, _) = FtlVolume::mount(emu_dev.clone(), common::small_opts())
            .await
            .expect("mount");
        vol.unmount().await.expect("unmount");
        rewrite_version(emu_dev.as_ref(), &layout, 1, checkpoint::VERSION_1).await;
    }
    rewrite_version(emu_dev.as_ref(), &layout, 0, checkpoint::VERSION_1).await;
    let dev = Arc::new(Watched {
        inner: emu_dev.clone(),
        watch: DeltaWatch {
            layout,
            deltas: AtomicU64::new(0),
            fulls: AtomicU64::new(0),
            beside_older: AtomicU64::new(0),
        },
    });
    let opts = MountOptions {
        checkpoint_every_zones: 2,
        ..common::small_opts()
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: a version 1 volume mounts: {e}"));
    let mut model = VersionModel::new(vol.size_blocks());
    // Writes into the first pages only, so deltas stay small.
    let bs = vol.block_size() as usize;
    let mut rng = SimRng::new(seed);
    for version in 1..=4_000 {
        let lba = rng.below(256);
        vol.write(lba, &block(bs, version), false)
            .await
            .expect("write");
        model.write(lba, version, false);
    }
    let deltas = vol.stats().counters.delta_checkpoints;
    vol.unmount().await.expect("unmount");
    model.flush();
    assert_eq!(
        versions(emu_dev.as_ref(), &layout).await,
        [Some(checkpoint::VERSION_3); 2],
        "seed {seed}: both slots are version 3"
    );
    let (vol, report) = FtlVolume::mount(dev.clone(), opts)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: remount: {e}"));
    model.check_all(&vol, seed, "after the remount").await;
    vol.crash().await;
    let w = &dev.watch;
    // The unmount's checkpoint may be one more delta.
    assert!(w.deltas.load(Ordering::Relaxed) >= deltas, "seed {seed}");
    let _ = report;
    (
        deltas,
        w.beside_older.load(Ordering::Relaxed),
        w.fulls.load(Ordering::Relaxed),
    )
}

#[test]
fn a_version_1_volume_writes_deltas_only_once_no_slot_holds_version_1() {
    let mut early = 0;
    for (both, seed) in [(true, 0), (true, 1), (false, 2), (false, 3)] {
        let (deltas, e, fulls) = paused_runtime().block_on(version_1_volume(both, seed));
        assert!(deltas >= 1, "seed {seed}: no delta was written");
        assert!(fulls >= 2, "seed {seed}: {fulls} full checkpoints");
        early += e;
    }
    assert_eq!(
        early, 0,
        "deltas written while a slot still held a version 1 checkpoint"
    );
}

/// A checkpoint of a version newer than this build's is refused with the version named,
/// whether it is the newest or the older slot's: never skipped for the other slot.
#[test]
fn a_newer_version_in_either_slot_refuses_the_mount() {
    paused_runtime().block_on(async {
        let g = Geometry {
            block_size: 4096,
            ..geometry()
        };
        let dev = common::device_plus(g, 3);
        let fmt = FormatOptions {
            threaded_logging: true,
            ..FormatOptions::with_op(580)
        };
        let layout = ftl::format(dev.as_ref(), fmt, 3, false)
            .await
            .expect("format");
        let (vol, _) = FtlVolume::mount(dev.clone(), threaded_opts())
            .await
            .expect("mount");
        let mut model = VersionModel::new(vol.size_blocks());
        write_randomly(&vol, &mut model, &mut SimRng::new(3), 4).await;
        vol.unmount().await.expect("unmount");
        let mut numbers = [0; 2];
        for (slot, n) in numbers.iter_mut().enumerate() {
            *n = checkpoint::read_header(dev.as_ref(), &layout, slot as u32)
                .await
                .expect("both slots hold a checkpoint")
                .number;
        }
        let newest = u32::from(numbers[1] > numbers[0]);
        for slot in [newest, 1 - newest] {
            // The slot as it is, deltas included.
            let bs = layout.geometry.block_size as usize;
            let mut before = vec![0u8; layout.slot_blocks() as usize * bs];
            for (i, b) in before.chunks_mut(bs).enumerate() {
                let at = layout.slot_zone_start(slot, (i as u64 / layout.zone_blocks) as u32)
                    + i as u64 % layout.zone_blocks;
                dev.read(at, b, None).await.expect("read slot");
            }
            rewrite_version(dev.as_ref(), &layout, slot, checkpoint::VERSION + 1).await;
            let e = FtlVolume::mount(dev.clone(), threaded_opts())
                .await
                .err()
                .unwrap_or_else(|| panic!("a version 4 checkpoint in slot {slot} mounted"));
            let text = e.to_string();
            assert!(
                text.contains("version 4 is newer than this build supports (3)"),
                "slot {slot}: {text}"
            );
            checkpoint::write_slot(dev.as_ref(), &layout, slot, &before, false)
                .await
                .expect("restore slot");
        }
        // Restored, the volume mounts with everything written.
        let (vol, _) = FtlVolume::mount(dev.clone(), threaded_opts())
            .await
            .expect("mount after the slots were restored");
        model.check_all(&vol, 3, "after the restore").await;
        vol.crash().await;
    });
}
