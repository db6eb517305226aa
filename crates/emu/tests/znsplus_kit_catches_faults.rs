//! The ZNS+ items of the conformance kit must fail devices that get ZNS+ wrong: each mutant
//! wraps a ZNS+ emulated device and breaks one rule, and the items about that rule must
//! report it. A kit that passed these would be checking nothing.

use async_trait::async_trait;
use emu::{EmuConfig, EmuDevice};
use zns::conformance::{check_item, DeviceFactory, Outcome};
use zns::{
    ChunkMapping, CompactionExtent, CopyRange, Geometry, Lba, NvmeResult, ReportFilter,
    ValidBitmap, ZoneAction, ZoneReport, ZoneState, ZonedDevice,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    /// tl_open treats every block as invalid: nothing is plugged, valid blocks are overwritable.
    IgnoresBitmap,
    /// zone_compaction runs extent by extent, so a bad extent leaves the earlier ones done.
    CompactionNotAtomic,
}

struct Mutant {
    inner: EmuDevice,
    bug: Bug,
}

#[async_trait]
impl ZonedDevice for Mutant {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.inner.read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.inner.write(lba, data, meta, fua).await
    }
    async fn append(&self, z: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<Lba> {
        self.inner.append(z, data, meta, fua).await
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
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, all: bool) -> NvmeResult<()> {
        self.inner.zone_mgmt(action, zslba, all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max: usize,
    ) -> NvmeResult<ZoneReport> {
        self.inner.report_zones(lba, filter, partial, max).await
    }
    fn identify_mapping(&self) -> Option<ChunkMapping> {
        self.inner.identify_mapping()
    }
    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        if self.bug == Bug::CompactionNotAtomic {
            for e in extents {
                self.inner.zone_compaction(std::slice::from_ref(e)).await?;
            }
            return Ok(());
        }
        self.inner.zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        if self.bug == Bug::IgnoresBitmap {
            let none = ValidBitmap::empty(self.geometry().zone_capacity);
            if none.as_bytes().len() == valid.len() {
                return self.inner.tl_open(zslba, none.as_bytes()).await;
            }
        }
        self.inner.tl_open(zslba, valid).await
    }
}

struct MutantFactory(Bug);

#[async_trait]
impl DeviceFactory for MutantFactory {
    type Device = Mutant;
    async fn create(&self, geometry: &Geometry) -> Mutant {
        let cfg = EmuConfig {
            zns_plus: true,
            ..EmuConfig::new(*geometry)
        };
        let inner = EmuDevice::new_memory(cfg).expect("kit geometry");
        Mutant { inner, bug: self.0 }
    }
    async fn restart(&self, dev: Mutant) -> Mutant {
        dev.inner.restart().expect("restart");
        dev
    }
    async fn power_cycle(&self, dev: Mutant, seed: u64) -> Mutant {
        dev.inner.power_loss(seed).expect("power loss");
        dev
    }
    async fn set_zone_state(&self, dev: &Mutant, zone: u32, state: ZoneState) {
        dev.inner.set_zone_state(zone, state).expect("zone fault");
    }
}

fn outcome(bug: Bug, item: u32) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(check_item(&MutantFactory(bug), item))
}

fn expect_caught(bug: Bug, items: &[u32]) {
    for &item in items {
        let got = outcome(bug, item);
        assert!(
            matches!(got, Outcome::Fail(_)),
            "item {item} on {bug:?}: {got:?}"
        );
    }
}

#[test]
fn catches_tl_open_that_ignores_the_bitmap() {
    expect_caught(Bug::IgnoresBitmap, &[49, 50, 51, 52, 53]);
}

#[test]
fn catches_compaction_that_is_not_validated_whole() {
    expect_caught(Bug::CompactionNotAtomic, &[47]);
    // The rules it keeps still pass: the failures come from the bug.
    assert_eq!(outcome(Bug::CompactionNotAtomic, 46), Outcome::Pass);
}
