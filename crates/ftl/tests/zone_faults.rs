//! What the FTL survives when the device retires zones or a zone header never lands:
//! - a Read Only data zone: its data stays readable, the zone is retired (never written or
//!   reused), the volume keeps working and mounts again;
//! - an Offline data zone: its data is lost (reads of it fail with the LBA range, never
//!   return other data), the rest of the volume works and mounts, the mount names the lost
//!   ranges;
//! - a zone header write that failed: the zone was sealed without a header; the next mount
//!   used to refuse the volume for good ("data zone N is written but has no header of this
//!   volume"), now it mounts and collects the zone;
//! - a panic in the maintenance task fails the volume with the panic's message: writers
//!   waiting for space wake with it and unmount reports it, instead of hanging.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, geometry, paused_runtime, small_opts, version_of};
use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions, WriteMode};
use zns::{
    BlockDevice, BlockError, ErrorPlan, FaultyZoned, Geometry, Hook, Hooked, NvmeResult,
    NvmeStatus, OpKind, OpSet, ZoneAction, ZoneState, ZonedDevice,
};

type Faulty = FaultyZoned<Arc<EmuDevice>>;

/// A formatted, mounted volume over a fault-injecting wrapper of an emulated device.
async fn setup(seed: u64) -> (Arc<EmuDevice>, Arc<Faulty>, Arc<FtlVolume>) {
    setup_with(seed, small_opts()).await
}

async fn setup_with(
    seed: u64,
    opts: MountOptions,
) -> (Arc<EmuDevice>, Arc<Faulty>, Arc<FtlVolume>) {
    let emu_dev = common::device(geometry(), seed);
    let faulty = Arc::new(FaultyZoned::new(emu_dev.clone(), seed));
    let dev: Arc<dyn ZonedDevice> = faulty.clone();
    ftl::format(dev.as_ref(), FormatOptions::with_op(580), 3, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev, opts).await.expect("mount");
    (emu_dev, faulty, vol)
}

/// Writes every block once (version = LBA + 1) and flushes.
async fn fill(vol: &FtlVolume) -> Vec<u64> {
    let bs = vol.block_size() as usize;
    let n = vol.size_blocks();
    for lba in 0..n {
        vol.write(lba, &block(bs, lba + 1), false)
            .await
            .expect("write");
    }
    vol.flush().await.expect("flush");
    (1..=n).collect()
}

/// The device zone (absolute zone number) holding `lba`'s data, found through the device: the
/// zone whose blocks hold the version.
async fn zone_holding(dev: &EmuDevice, g: &Geometry, version: u64) -> u32 {
    let bs = g.block_size as usize;
    let mut buf = vec![0u8; bs];
    for z in 0..g.zone_count {
        for off in 0..g.zone_capacity {
            dev.read(g.zone_start(z) + off, &mut buf, None)
                .await
                .expect("read");
            if version_of(&buf) == Some(version) {
                return z;
            }
        }
    }
    panic!("version {version} is nowhere on the device");
}

#[test]
fn a_read_only_zone_keeps_its_data_and_is_retired() {
    paused_runtime().block_on(async {
        let (emu_dev, faulty, vol) = setup(11).await;
        let mut expect = fill(&vol).await;
        let g = geometry();
        let z = zone_holding(&emu_dev, &g, 1).await;
        faulty
            .fault_zone(z, ZoneState::ReadOnly)
            .await
            .expect("fault");
        // Overwrite half the volume twice: garbage collection runs and meets the zone.
        let bs = vol.block_size() as usize;
        let n = vol.size_blocks();
        let mut version = n;
        for _ in 0..2 {
            for lba in (0..n).step_by(2) {
                version += 1;
                vol.write(lba, &block(bs, version), false)
                    .await
                    .expect("write after a zone went read only");
                expect[lba as usize] = version;
            }
        }
        vol.flush().await.expect("flush");
        let mut buf = vec![0u8; bs];
        for lba in 0..n {
            vol.read(lba, &mut buf).await.expect("read");
            assert_eq!(version_of(&buf), Some(expect[lba as usize]), "LBA {lba}");
        }
        vol.unmount().await.expect("unmount");
        let dev: Arc<dyn ZonedDevice> = faulty.clone();
        let (vol, report) = FtlVolume::mount(dev, small_opts())
            .await
            .expect("mount with a read-only zone");
        assert_eq!(report.retired_zones, 1, "{report:?}");
        assert!(report.lost_ranges.is_empty(), "{report:?}");
        for lba in 0..n {
            vol.read(lba, &mut buf).await.expect("read after mount");
            assert_eq!(version_of(&buf), Some(expect[lba as usize]), "LBA {lba}");
        }
        // Garbage collection met the zone: it moved the data out and the reset was refused.
        assert!(faulty.counters().zone_fault_refusals > 0);
        vol.verify().expect("mapping");
    });
}

#[test]
fn an_offline_zone_loses_only_its_own_data() {
    paused_runtime().block_on(async {
        let (emu_dev, faulty, vol) = setup(12).await;
        let expect = fill(&vol).await;
        let g = geometry();
        let z = zone_holding(&emu_dev, &g, 1).await;
        faulty
            .fault_zone(z, ZoneState::Offline)
            .await
            .expect("fault");
        let bs = vol.block_size() as usize;
        let n = vol.size_blocks();
        let mut buf = vec![0u8; bs];
        let mut lost = Vec::new();
        for lba in 0..n {
            match vol.read(lba, &mut buf).await {
                Ok(()) => assert_eq!(version_of(&buf), Some(expect[lba as usize]), "LBA {lba}"),
                Err(BlockError::DataLost(what)) => {
                    assert!(what.contains(&lba.to_string()), "{what}");
                    lost.push(lba);
                }
                Err(e) => panic!("LBA {lba}: {e}"),
            }
        }
        assert!(lost.contains(&0), "LBA 0's zone went offline");
        assert!(lost.len() < n as usize / 2, "{} lost", lost.len());
        // The volume keeps working: rewrite a quarter of it, collecting around the lost zone.
        for lba in (0..n).step_by(4) {
            vol.write(lba, &block(bs, 10_000 + lba), false)
                .await
                .expect("write");
        }
        vol.unmount().await.expect("unmount");
        let dev: Arc<dyn ZonedDevice> = faulty.clone();
        let (vol, report) = FtlVolume::mount(dev, small_opts())
            .await
            .expect("mount with an offline zone");
        let still_lost: Vec<u64> = lost.iter().copied().filter(|l| l % 4 != 0).collect();
        let reported: Vec<u64> = report
            .lost_ranges
            .iter()
            .flat_map(|(first, count)| *first..*first + *count)
            .collect();
        assert_eq!(reported, still_lost, "{report:?}");
        for lba in 0..n {
            let r = vol.read(lba, &mut buf).await;
            if lba % 4 == 0 {
                r.expect("rewritten block");
                assert_eq!(version_of(&buf), Some(10_000 + lba));
            } else if still_lost.contains(&lba) {
                assert!(
                    matches!(r, Err(BlockError::DataLost(_))),
                    "LBA {lba}: {r:?}"
                );
            } else {
                r.expect("read");
                assert_eq!(version_of(&buf), Some(expect[lba as usize]), "LBA {lba}");
            }
        }
    });
}

/// Regression: a zone header write that failed (the host file system under an image was full)
/// left a sealed zone without a header, and every later mount refused the volume.
#[test]
fn a_failed_zone_header_write_does_not_stop_the_next_mount() {
    paused_runtime().block_on(async {
        // In Zone Append mode user data goes by append, so after the first zone is open the
        // next Zone Write is the header of the next zone opened (checkpoints come later).
        let opts = MountOptions {
            write_mode: WriteMode::ZoneAppend,
            ..small_opts()
        };
        let (emu_dev, faulty, vol) = setup_with(13, opts).await;
        let bs = vol.block_size() as usize;
        vol.write(0, &block(bs, 1), false).await.expect("write");
        vol.flush().await.expect("flush");
        // Fail every attempt (3) of the next zone header write.
        let before = faulty.counters().commands;
        faulty
            .set_errors(ErrorPlan {
                ops: OpSet::of(&[OpKind::Write]),
                fail_nth: Some(1),
                repeat: 2,
                status: NvmeStatus::InternalError,
                ..ErrorPlan::default()
            })
            .expect("plan");
        let mut failures = 0;
        for lba in 1..200u64 {
            let at = lba % vol.size_blocks();
            if vol.write(at, &block(bs, 100 + lba), false).await.is_err() {
                failures += 1;
            }
        }
        faulty.clear_errors();
        assert!(
            failures >= 1,
            "the injected header failure reached no write"
        );
        assert!(faulty.counters().commands > before);
        // The crash leaves the sealed, headerless zone on the device.
        faulty.cut_power();
        vol.crash().await;
        emu_dev.power_loss(5).expect("power loss");
        faulty.restore_power();
        let dev: Arc<dyn ZonedDevice> = faulty.clone();
        let (vol, report) = FtlVolume::mount(dev, opts)
            .await
            .expect("mount after a failed header write");
        assert!(report.headerless_zones >= 1, "{report:?}");
        let mut buf = vec![0u8; bs];
        vol.read(0, &mut buf).await.expect("read");
        assert_eq!(version_of(&buf), Some(1));
        vol.verify().expect("mapping");
        vol.unmount().await.expect("unmount");
    });
}

/// The hook of a device (`Hooked`) whose Zone Reset panics once armed: only garbage
/// collection resets zones after a mount, so this panics inside the maintenance task.
#[derive(Default)]
struct PanicOnReset {
    armed: AtomicBool,
}

#[async_trait]
impl Hook for PanicOnReset {
    async fn before(&self, _: OpKind, action: Option<ZoneAction>) -> NvmeResult<()> {
        if action == Some(ZoneAction::Reset) && self.armed.load(Ordering::SeqCst) {
            panic!("injected invariant failure in zone reset");
        }
        Ok(())
    }
}

/// Regression: a panic in the maintenance task stopped garbage collection without failing the
/// volume, so writers waited for space forever and unmount checkpointed whatever was left.
#[test]
fn a_panic_in_garbage_collection_fails_the_volume_with_its_message() {
    paused_runtime().block_on(async {
        let dev = Arc::new(Hooked::new(
            common::device(geometry(), 14),
            PanicOnReset::default(),
        ));
        ftl::format(dev.as_ref(), FormatOptions::with_op(580), 3, false)
            .await
            .expect("format");
        let as_dyn: Arc<dyn ZonedDevice> = dev.clone();
        let (vol, _) = FtlVolume::mount(as_dyn, small_opts()).await.expect("mount");
        dev.hook.armed.store(true, Ordering::SeqCst);
        let bs = vol.block_size() as usize;
        let n = vol.size_blocks();
        let mut error = None;
        // Overwrites need collection; without it they run out of space and wait.
        'outer: for round in 0..20u64 {
            for lba in 0..n {
                if let Err(e) = vol.write(lba, &block(bs, round * n + lba + 1), false).await {
                    error = Some(e);
                    break 'outer;
                }
            }
        }
        let error = error.expect("writes went on without garbage collection");
        assert!(
            error.to_string().contains("injected invariant failure"),
            "writer saw {error}"
        );
        let unmount = vol.unmount().await.expect_err("unmount of a failed volume");
        assert!(
            unmount.to_string().contains("injected invariant failure"),
            "unmount said {unmount}"
        );
    });
}
