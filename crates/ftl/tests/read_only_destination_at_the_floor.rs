//! A garbage-collection round at the collection floor takes the last free zone for its copies.
//! If the device turns that destination zone Read Only mid-round, the copy it refuses seals the
//! zone, and the lane finds no free zone to go on in: the volume failed with "no space",
//! though one Read Only zone costs one zone of spare and the spare was far from used up. Now
//! the round ends early: the victims it emptied are reset, the others stay victims, and the
//! volume goes on. Every acknowledged write reads back, and a remount agrees.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{check_versions, overwrite_everywhere, paused_runtime};
use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use parking_lot::Mutex;
use zns::{
    BlockDevice, CopyRange, FaultyZoned, Geometry, Lba, NvmeResult, ReportFilter, ZoneAction,
    ZoneReport, ZoneState, ZonedDevice,
};

type Faulty = FaultyZoned<Arc<EmuDevice>>;

/// 64 zones of 64 blocks of 512 bytes, with per-block metadata.
fn geometry() -> Geometry {
    Geometry {
        zone_count: 64,
        max_open: 14,
        max_active: 14,
        ..common::geometry()
    }
}

/// The power-cut schedules' watermarks (floor 3), three user streams, hot and cold GC
/// streams, one lane, collection running on across rounds.
fn options() -> MountOptions {
    MountOptions {
        hot_zones: 3,
        hot_cold: true,
        gc_foreground_free_zones: 3,
        gc_background_free_zones: 5,
        gc_lanes_max: 1,
        copies_per_lane: 1,
        pace_rounds: Some(false),
        gc_run_on: Some(true),
        write_mode: ftl::WriteMode::ZoneWrite,
        ..MountOptions::default()
    }
}

/// A device that, the first time a copy goes to a zone while no zone is empty, turns that
/// zone Read Only first, so the copy is refused.
struct SealsTheLastZone {
    inner: Arc<Faulty>,
    faulted: Mutex<Option<u32>>,
}

#[async_trait]
impl ZonedDevice for SealsTheLastZone {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.inner.read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.inner.write(lba, data, meta, fua).await
    }
    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.inner.append(zslba, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.inner.write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> NvmeResult<()> {
        self.inner.flush().await
    }
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        if self.faulted.lock().is_none() {
            let g = self.geometry();
            let empty = self
                .inner
                .report_zones(
                    0,
                    ReportFilter::State(ZoneState::Empty),
                    false,
                    g.zone_count as usize,
                )
                .await?
                .zones
                .len();
            if empty == 0 {
                let zone = (dest / g.zone_size) as u32;
                *self.faulted.lock() = Some(zone);
                self.inner
                    .fault_zone(zone, ZoneState::ReadOnly)
                    .await
                    .expect("fault the destination");
            }
        }
        self.inner.copy(sources, dest, fua).await
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.inner.zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.inner
            .report_zones(lba, filter, partial, max_zones)
            .await
    }
    fn die_stripe(&self) -> Option<zns::DieStripe> {
        self.inner.die_stripe()
    }
}

/// A formatted volume (20% over-provisioning) on a device that seals the last zone.
async fn sealing_device(seed: u64) -> (Arc<SealsTheLastZone>, Arc<dyn ZonedDevice>) {
    let emu_dev = common::device(geometry(), seed);
    let sealing = Arc::new(SealsTheLastZone {
        inner: Arc::new(FaultyZoned::new(emu_dev, seed)),
        faulted: Mutex::new(None),
    });
    let dev: Arc<dyn ZonedDevice> = sealing.clone();
    ftl::format(dev.as_ref(), FormatOptions::with_op(200), seed, false)
        .await
        .expect("format");
    (sealing, dev)
}

#[test]
fn a_read_only_destination_at_the_floor_does_not_fail_the_volume() {
    paused_runtime().block_on(async {
        let seed = 1;
        let (sealing, dev) = sealing_device(seed).await;
        let (vol, _) = FtlVolume::mount(dev.clone(), options())
            .await
            .expect("mount");
        let versions = overwrite_everywhere(&vol, seed, 4)
            .await
            .unwrap_or_else(|e| panic!("the volume stopped: {e}"));
        let faulted = sealing
            .faulted
            .lock()
            .expect("no copy found the device without an empty zone");
        // The round whose destination went Read Only ended early instead.
        let c = vol.stats().counters;
        assert!(c.gc_rounds_ended_early > 0, "zone {faulted}: {c:?}");
        check_versions(&vol, &versions, "before unmount").await;
        vol.flush().await.expect("flush");
        vol.unmount().await.expect("unmount");
        let (vol, report) = FtlVolume::mount(dev, options()).await.expect("remount");
        assert_eq!(report.retired_zones, 1, "{report:?}");
        check_versions(&vol, &versions, "after remount").await;
        vol.unmount().await.expect("unmount");
    });
}

/// At a floor of one zone the same fault does stop the volume (docs/DESIGN.md's failure
/// table: a one-zone reserve cannot absorb a destination the device refuses), and the error
/// says why: no free zone left to copy into, not that nothing was left to reclaim.
#[test]
fn at_a_floor_of_one_zone_the_failure_names_its_cause() {
    paused_runtime().block_on(async {
        let seed = 1;
        let (sealing, dev) = sealing_device(seed).await;
        let opts = MountOptions {
            gc_foreground_free_zones: 1,
            gc_background_free_zones: 3,
            ..options()
        };
        let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
        let e = overwrite_everywhere(&vol, seed, 4)
            .await
            .expect_err("the volume kept going at a floor of one zone");
        assert!(sealing.faulted.lock().is_some(), "no zone was faulted: {e}");
        assert!(
            e.contains("no free zone left to copy into") && !e.contains("nothing to reclaim"),
            "{e}"
        );
    });
}
