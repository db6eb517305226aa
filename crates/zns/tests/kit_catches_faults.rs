//! The conformance kit must fail devices that misbehave: each test here wraps the reference
//! model in a deliberately wrong device and checks that the relevant item and the randomized
//! properties report it. A kit that passed these devices would be checking nothing.

use async_trait::async_trait;
use zns::conformance::{self, DeviceFactory, KitFailure};
use zns::{
    CompactionExtent, CopyRange, Geometry, Lba, ModelDevice, NvmeResult, NvmeStatus, ReportFilter,
    ZoneAction, ZoneReport, ZoneState, ZonedDevice,
};

/// The one thing a mutant device gets wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    /// Answers Zone Invalid Write where Zone Boundary Error is due.
    BoundaryAsInvalidWrite,
    /// Reports a Full zone's WP as ZSLBA + zone size.
    FullWpAtZoneSize,
    /// Returns zero metadata on every read.
    ReadsZeroMetadata,
    /// A restart changes nothing, so open zones stay open.
    RestartKeepsOpenZones,
    /// A power loss throws away every write since the last reset, flushed or not.
    PowerLossLosesEverything,
    /// Device-side faults are ignored.
    IgnoresFaults,
    /// Has no ZNS+ mapping, yet answers zone_compaction with success and does nothing.
    FakesCompaction,
}

struct Mutant {
    inner: ModelDevice,
    bug: Bug,
}

#[async_trait]
impl ZonedDevice for Mutant {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        if self.bug == Bug::ReadsZeroMetadata {
            if let Some(m) = meta {
                self.inner.read(lba, buf, Some(&mut *m)).await?;
                m.fill(0);
                return Ok(());
            }
        }
        self.inner.read(lba, buf, meta).await
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        let r = self.inner.write(lba, data, meta, fua).await;
        match r {
            Err(NvmeStatus::ZoneBoundaryError) if self.bug == Bug::BoundaryAsInvalidWrite => {
                Err(NvmeStatus::ZoneInvalidWrite)
            }
            other => other,
        }
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

    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        if self.bug == Bug::FakesCompaction {
            return Ok(());
        }
        self.inner.zone_compaction(extents).await
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
        let mut report = self
            .inner
            .report_zones(lba, filter, partial, max_zones)
            .await?;
        if self.bug == Bug::FullWpAtZoneSize {
            let zone_size = self.geometry().zone_size;
            for d in report
                .zones
                .iter_mut()
                .filter(|d| d.state == ZoneState::Full)
            {
                d.wp = d.start + zone_size;
            }
        }
        Ok(report)
    }
}

struct MutantFactory(Bug);

#[async_trait]
impl DeviceFactory for MutantFactory {
    type Device = Mutant;

    async fn create(&self, geometry: &Geometry) -> Mutant {
        match ModelDevice::new(*geometry) {
            Ok(inner) => Mutant { inner, bug: self.0 },
            Err(e) => panic!("invalid kit geometry: {e}"),
        }
    }

    async fn restart(&self, dev: Mutant) -> Mutant {
        if self.0 == Bug::RestartKeepsOpenZones {
            return dev;
        }
        let mut model = dev.inner.into_model();
        model.restart();
        Mutant {
            inner: ModelDevice::from_model(model),
            bug: dev.bug,
        }
    }

    async fn power_cycle(&self, dev: Mutant, seed: u64) -> Mutant {
        let mut model = dev.inner.into_model();
        if self.0 == Bug::PowerLossLosesEverything {
            let _ = model.zone_mgmt(ZoneAction::Reset, 0, true);
        }
        model.power_cycle(seed);
        Mutant {
            inner: ModelDevice::from_model(model),
            bug: dev.bug,
        }
    }

    async fn set_zone_state(&self, dev: &Mutant, zone: u32, state: ZoneState) {
        if self.0 != Bug::IgnoresFaults {
            let _ = dev.inner.with_model(|m| m.set_zone_state(zone, state));
        }
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => panic!("no runtime: {e}"),
    }
}

/// The items that must fail for `bug`, and whether the differential test must catch it.
fn expect_caught(bug: Bug, items: &[u32], differential: bool) {
    let f = MutantFactory(bug);
    for item in items {
        let r: Result<(), KitFailure> = block_on(conformance::run_item(&f, *item));
        assert!(r.is_err(), "item {item} passed a device with {bug:?}");
    }
    if differential {
        let caught =
            (1..=8u64).any(|seed| block_on(conformance::differential(&f, seed, 300)).is_err());
        assert!(caught, "the differential test passed a device with {bug:?}");
    }
}

#[test]
fn catches_boundary_error_reported_as_invalid_write() {
    expect_caught(Bug::BoundaryAsInvalidWrite, &[7, 8, 43], true);
}

#[test]
fn catches_full_zone_wp_at_zone_size() {
    expect_caught(Bug::FullWpAtZoneSize, &[5, 36], true);
}

#[test]
fn catches_lost_metadata() {
    expect_caught(Bug::ReadsZeroMetadata, &[33, 42], true);
}

#[test]
fn catches_restart_that_keeps_zones_open() {
    expect_caught(Bug::RestartKeepsOpenZones, &[37], true);
    let f = MutantFactory(Bug::RestartKeepsOpenZones);
    let caught = (1..=8u64).any(|seed| block_on(conformance::reopen_identical(&f, seed)).is_err());
    assert!(
        caught,
        "reopen_identical passed a restart that keeps zones open"
    );
}

#[test]
fn catches_power_loss_beyond_the_durable_point() {
    expect_caught(Bug::PowerLossLosesEverything, &[40, 41], false);
    let f = MutantFactory(Bug::PowerLossLosesEverything);
    let caught = (1..=8u64).any(|seed| block_on(conformance::power_loss_prefix(&f, seed)).is_err());
    assert!(
        caught,
        "power_loss_prefix passed a device that loses flushed data"
    );
}

#[test]
fn catches_ignored_zone_faults() {
    expect_caught(Bug::IgnoresFaults, &[9, 10, 14, 19], true);
}

#[test]
fn catches_zns_plus_commands_that_are_neither_there_nor_refused() {
    expect_caught(Bug::FakesCompaction, &[45], false);
}

#[test]
fn item_table_is_complete_and_unknown_items_fail() {
    // A wrapper whose bug is not exercised by item 1 passes it, so the failures above come
    // from the bugs and not from the wrapper.
    let f = MutantFactory(Bug::IgnoresFaults);
    assert!(block_on(conformance::run_item(&f, 1)).is_ok());
    let r = block_on(conformance::run_item(&f, 54));
    assert_eq!(r.map_err(|e| e.item), Err(54));
    assert_eq!(conformance::ITEMS.len(), 53);
    for (i, (n, _)) in conformance::ITEMS.iter().enumerate() {
        assert_eq!(*n as usize, i + 1);
    }
}
