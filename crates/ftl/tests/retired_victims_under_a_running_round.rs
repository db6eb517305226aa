//! Collection that runs on across rounds (`MountOptions::gc_run_on`) plans the next round
//! while the previous one's finish resets its victims, counting all those resets but one as
//! space for its copies. A device that retires two victims of one finish (their resets
//! refused, the zones Read Only) leaves that round a zone short: its lane found no free zone
//! once the finish had ended, and the volume failed with no space. Now such a round ends
//! early: the victims it emptied are reset, the others stay victims for a later round, and
//! the volume goes on. Every acknowledged write reads back, and a remount agrees.
//!
//! Retirements that use up the spare fail the volume with an error that names them, instead
//! of the "no space ... nothing to reclaim" that said nothing of the cause. A writer that
//! finds no zone before the collector fails the volume names them too: with two user writes
//! in flight per zone the writer came first and returned a bare "no space left".

mod common;

use std::sync::Arc;
use std::time::Duration;

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

/// 128 zones of 64 blocks of 512 bytes.
fn geometry() -> Geometry {
    Geometry {
        zone_count: 128,
        max_open: 14,
        max_active: 14,
        ..common::geometry()
    }
}

/// Collection running on across rounds with watermarks one zone apart (floor 3), one lane,
/// one user stream.
fn options() -> MountOptions {
    MountOptions {
        hot_zones: 1,
        hot_cold: false,
        gc_foreground_free_zones: 3,
        gc_background_free_zones: 4,
        gc_lanes_max: 1,
        copies_per_lane: 32,
        pace_rounds: Some(false),
        gc_run_on: Some(true),
        write_mode: ftl::WriteMode::ZoneWrite,
        ..MountOptions::default()
    }
}

/// Which resets the device refuses, retiring the zone (Read Only) instead.
#[derive(Clone, Copy)]
enum Retire {
    /// From the `first`-th reset on, two resets in a row out of every `every` (numbered from
    /// 0), `pairs` times.
    Pairs { first: u64, every: u64, pairs: u64 },
    /// Every `every`-th reset from the `first`-th on.
    Every { first: u64, every: u64 },
}

/// A fault-injecting device whose resets take a millisecond (virtual time), so the round
/// after a finish is planned while the finish's resets are owed, and which turns chosen
/// resets into retirements: the zone goes Read Only and the reset is refused (as a drive
/// retiring a worn zone does).
struct Retiring {
    inner: Arc<Faulty>,
    retire: Retire,
    resets: Mutex<u64>,
}

impl Retiring {
    fn retires(&self, n: u64) -> bool {
        match self.retire {
            Retire::Pairs {
                first,
                every,
                pairs,
            } => n >= first && (n - first) % every < 2 && (n - first) / every < pairs,
            Retire::Every { first, every } => n >= first && (n - first).is_multiple_of(every),
        }
    }
}

#[async_trait]
impl ZonedDevice for Retiring {
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
        self.inner.copy(sources, dest, fua).await
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        if action == ZoneAction::Reset && !select_all {
            let n = {
                let mut resets = self.resets.lock();
                *resets += 1;
                *resets - 1
            };
            tokio::time::sleep(Duration::from_millis(1)).await;
            if self.retires(n) {
                let zone = (zslba / self.geometry().zone_size) as u32;
                self.inner
                    .fault_zone(zone, ZoneState::ReadOnly)
                    .await
                    .expect("retire the zone");
            }
        }
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

/// A volume formatted at 20% over-provisioning over `Retiring`, filled once.
async fn setup(seed: u64, retire: Retire) -> (Arc<Faulty>, Arc<dyn ZonedDevice>, Arc<FtlVolume>) {
    let emu_dev = common::device(geometry(), seed);
    let faulty = Arc::new(FaultyZoned::new(emu_dev, seed));
    let dev: Arc<dyn ZonedDevice> = Arc::new(Retiring {
        inner: faulty.clone(),
        retire,
        resets: Mutex::new(0),
    });
    ftl::format(dev.as_ref(), FormatOptions::with_op(200), seed, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev.clone(), options())
        .await
        .expect("mount");
    (faulty, dev, vol)
}

#[test]
fn two_retired_victims_of_one_finish_end_the_round_early() {
    paused_runtime().block_on(async {
        let retire = Retire::Pairs {
            first: 40,
            every: 50,
            pairs: 4,
        };
        let (faulty, dev, vol) = setup(5, retire).await;
        let versions = overwrite_everywhere(&vol, 5, 6)
            .await
            .unwrap_or_else(|e| panic!("the volume stopped: {e}"));
        let c = vol.stats().counters;
        // Rounds were planned on owed resets, and some of them came up short and ended early.
        assert!(c.gc_rounds_on_owed_resets > 0, "{c:?}");
        assert!(c.gc_rounds_ended_early > 0, "{c:?}");
        check_versions(&vol, &versions, "before unmount").await;
        vol.flush().await.expect("flush");
        vol.unmount().await.expect("unmount");
        let retired = faulty.counters().zone_fault_refusals;
        assert!(retired >= 8, "{retired} resets refused");
        let (vol, report) = FtlVolume::mount(dev, options()).await.expect("remount");
        assert_eq!(report.retired_zones, 8, "{report:?}");
        check_versions(&vol, &versions, "after remount").await;
        vol.unmount().await.expect("unmount");
    });
}

// Retirements cost the spare a zone each. One in every 20 resets is absorbed a while (the
// round beside a finish counts all its resets but one), at a rising write amplification; the
// twelfth leaves collection no free zone to copy into. The volume then fails naming the
// retirements, and every command, reads included, returns that cause; nothing waits forever
// (a hang would show as the timeout: the paused clock runs ahead to it once every task waits).
#[test]
fn retirements_that_use_up_the_spare_fail_the_volume_naming_them() {
    paused_runtime().block_on(async {
        let retire = Retire::Every {
            first: 40,
            every: 20,
        };
        let (faulty, _dev, vol) = setup(6, retire).await;
        let r = tokio::time::timeout(Duration::from_secs(3600), overwrite_everywhere(&vol, 6, 6))
            .await
            .expect("the volume hung");
        let e = r.expect_err("a volume whose spare was retired away went on");
        let retired = faulty.counters().zone_fault_refusals;
        assert!(retired >= 2, "{retired} resets refused");
        assert!(
            e.contains("the spare is used up: the device retired"),
            "{e}"
        );
        let mut buf = vec![0u8; vol.block_size() as usize];
        let read = vol
            .read(0, &mut buf)
            .await
            .expect_err("a read of a failed volume");
        assert!(read.to_string().contains("the spare is used up"), "{read}");
        let unmount = vol.unmount().await.expect_err("unmount of a failed volume");
        assert!(
            unmount.to_string().contains("the spare is used up"),
            "{unmount}"
        );
    });
}
