//! A turn of threaded logging whose record cannot be written writes a checkpoint instead
//! (gc/tl.rs): the volume goes on, the hot stream still writes into the re-opened zones, and
//! after a power cut every durable write reads back. The device here refuses every write of
//! a threaded-logging record block (its magic), so every turn takes that path.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, geometry, VersionModel};
use emu::EmuDevice;
use ftl::threaded::TlPolicy;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::plus::{ChunkMapping, CompactionExtent};
use zns::{
    BlockDevice, CopyRange, DieStripe, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, SimRng,
    ZoneAction, ZoneReport, ZonedDevice,
};

/// The emulator, except that every write of a threaded-logging record fails.
struct NoRecords {
    inner: Arc<EmuDevice>,
    refused: AtomicU64,
}

#[async_trait]
impl ZonedDevice for NoRecords {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.inner.read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        if data.starts_with(b"ZSTKTLRC") {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(NvmeStatus::InternalError);
        }
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
    fn die_stripe(&self) -> Option<DieStripe> {
        self.inner.die_stripe()
    }
    fn identify_mapping(&self) -> Option<ChunkMapping> {
        self.inner.identify_mapping()
    }
    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        self.inner.zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        self.inner.tl_open(zslba, valid).await
    }
}

async fn schedule(seed: u64) -> (u64, u64) {
    let mut rng = SimRng::new(seed);
    let emu_dev = common::device_plus(
        Geometry {
            block_size: 4096,
            ..geometry()
        },
        seed,
    );
    let dev = Arc::new(NoRecords {
        inner: emu_dev.clone(),
        refused: AtomicU64::new(0),
    });
    let fmt = FormatOptions {
        threaded_logging: true,
        ..FormatOptions::with_op(580)
    };
    ftl::format(dev.as_ref(), fmt, seed, false)
        .await
        .expect("format");
    let opts = MountOptions {
        write_mode: ftl::WriteMode::ZoneWrite,
        threaded: TlPolicy::Always,
        ..common::small_opts()
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut model = VersionModel::new(n);
    let mut version = 0;
    for i in 0..8 * n {
        let lba = rng.below(n);
        let fua = rng.chance(0.1);
        version += 1;
        vol.write(lba, &block(bs, version), fua)
            .await
            .unwrap_or_else(|e| panic!("seed {seed} write {i}: {e}"));
        model.write(lba, version, fua);
        if rng.chance(0.05) {
            vol.flush().await.expect("flush");
            model.flush();
        }
    }
    let s = vol.stats();
    assert_eq!(s.threaded.records, 0, "seed {seed}: no record was written");
    emu_dev.power_loss(rng.next_u64()).expect("power loss");
    vol.crash().await;
    let (vol, _) = FtlVolume::mount(dev.clone(), opts)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: mount after the cut: {e}"));
    model.check_all(&vol, seed, "after the power loss").await;
    assert!(dev.refused.load(Ordering::Relaxed) >= s.threaded.record_failures);
    (s.threaded.record_failures, s.threaded.hole_blocks)
}

#[test]
fn a_turn_whose_record_fails_writes_a_checkpoint_instead() {
    let (mut failures, mut holes) = (0, 0);
    for seed in 0..4 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (f, h) = rt.block_on(schedule(seed));
        failures += f;
        holes += h;
    }
    assert!(failures >= 4, "only {failures} turns lost their record");
    assert!(holes >= 100, "only {holes} blocks written into holes");
}
