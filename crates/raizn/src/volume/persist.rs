//! What FUA and Flush send to the members: every member command goes through `Tracked`,
//! which keeps the member's persistence state (`crate::persist`), and a FUA write or Flush
//! flushes only the members that hold something it needs and that is not known durable
//! (docs/DESIGN.md, "Durability contract").
//!
//! Fault model: as `crate::persist`. A member flush that fails is noted like any member
//! error (the member fails, the array goes on degraded) and covers nothing; a member that
//! counts as failed is never flushed (its units are rebuilt from the others).
//!
//! Lock order: a member's persistence lock is a leaf, never held across an await.

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::join_all;
use parking_lot::Mutex;
use zns::{
    ChunkMapping, CompactionExtent, CopyRange, Geometry, Lba, NvmeResult, ReportFilter, ZoneAction,
    ZoneReport, ZonedDevice,
};

use super::{Member, RaiznVolume};
use crate::persist::{MemberPersist, Scope};

/// Counters of the member flushes, for tests, benchmarks and status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersistStats {
    /// Member flushes sent, for any reason (Flush, FUA, the volume's own ordering points,
    /// metadata collections).
    pub member_flushes: u64,
    /// Member flushes a Flush or an ordering point left out: the member held nothing not
    /// known durable.
    pub flushes_skipped: u64,
    /// Member flushes FUA writes and appends sent, and those they left out (the member held
    /// nothing of the zone not known durable).
    pub fua_flushes: u64,
    pub fua_flushes_skipped: u64,
}

/// A member device whose writes and flushes keep its persistence state. Writes to a data
/// zone are tracked under their logical zone; writes to the metadata zones under the zone
/// the caller names (`write_for`) or under `Scope::All`.
pub(super) struct Tracked {
    dev: Member,
    zone_size: u64,
    /// Metadata zones at the member's start (`ArrayLayout::meta_zones`).
    meta_zones: u64,
    st: Mutex<MemberPersist>,
    flushes: Mutex<u64>,
}

/// A write in flight: ends its scope when dropped, as completed-not-durable unless
/// `durable` was set (a FUA write that succeeded).
struct InFlight<'a> {
    st: &'a Mutex<MemberPersist>,
    scope: Scope,
    durable: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.st.lock().end(self.scope, self.durable);
    }
}

impl Tracked {
    pub(super) fn new(dev: Member, meta_zones: u32) -> Tracked {
        let zone_size = dev.geometry().zone_size;
        let meta_zones = u64::from(meta_zones);
        Tracked {
            dev,
            zone_size,
            meta_zones,
            st: Mutex::new(MemberPersist::new()),
            flushes: Mutex::new(0),
        }
    }

    /// The scope of a write at `lba` nobody named one for: the logical zone of a data zone,
    /// else everything.
    fn scope_of(&self, lba: Lba) -> Scope {
        match lba.checked_div(self.zone_size) {
            Some(z) if z >= self.meta_zones => {
                u32::try_from(z - self.meta_zones).map_or(Scope::All, Scope::Zone)
            }
            _ => Scope::All,
        }
    }

    fn begin(&self, scope: Scope) -> InFlight<'_> {
        self.st.lock().begin(scope);
        InFlight {
            st: &self.st,
            scope,
            durable: false,
        }
    }

    /// A write whose data logical zone `zone` depends on (its partial-parity, relocation or
    /// generation record), wherever on the member it goes.
    pub(super) async fn write_for(
        &self,
        zone: u32,
        lba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<()> {
        self.write_scoped(Scope::Zone(zone), lba, data, meta, fua)
            .await
    }

    async fn write_scoped(
        &self,
        scope: Scope,
        lba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<()> {
        let mut w = self.begin(scope);
        let r = self.dev.write(lba, data, meta, fua).await;
        w.durable = fua && r.is_ok();
        r
    }

    /// Whether `zone`'s data depends on a write to this member not known durable.
    pub(super) fn zone_pending(&self, zone: u32) -> bool {
        self.st.lock().zone_pending(zone)
    }

    /// Whether anything written to this member is not known durable.
    pub(super) fn any_pending(&self) -> bool {
        self.st.lock().any_pending()
    }

    /// Flushes sent to this member since open.
    pub(super) fn flushes(&self) -> u64 {
        *self.flushes.lock()
    }
}

#[async_trait]
impl ZonedDevice for Tracked {
    fn geometry(&self) -> Geometry {
        self.dev.geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.dev.read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.write_scoped(self.scope_of(lba), lba, data, meta, fua)
            .await
    }
    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        let mut w = self.begin(self.scope_of(zslba));
        let r = self.dev.append(zslba, data, meta, fua).await;
        w.durable = fua && r.is_ok();
        r
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        let mut w = self.begin(self.scope_of(lba));
        let r = self.dev.write_zeroes(lba, blocks, fua).await;
        w.durable = fua && r.is_ok();
        r
    }
    async fn flush(&self) -> NvmeResult<()> {
        let ticket = self.st.lock().flush_begin();
        *self.flushes.lock() += 1;
        self.dev.flush().await?;
        self.st.lock().flush_end(ticket);
        Ok(())
    }
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        let mut w = self.begin(self.scope_of(dest));
        let r = self.dev.copy(sources, dest, fua).await;
        w.durable = fua && r.is_ok();
        r
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        // Resets and finishes are durable when they complete (docs/DESIGN.md); what they
        // leave of earlier writes stays pending until a flush, which is conservative.
        self.dev.zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.dev.report_zones(lba, filter, partial, max_zones).await
    }
    fn die_stripe(&self) -> Option<zns::DieStripe> {
        self.dev.die_stripe()
    }
    fn identify_mapping(&self) -> Option<ChunkMapping> {
        self.dev.identify_mapping()
    }
    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        // Not sent by the volume; tracked as a write of everything if it ever is.
        let _w = self.begin(Scope::All);
        self.dev.zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        self.dev.tl_open(zslba, valid).await
    }
}

/// Which members a flush is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Everything written so far (Flush, and the volume's own ordering points).
    Everything,
    /// What a write to this logical zone depends on (a FUA write or append).
    Zone(u32),
}

impl RaiznVolume {
    /// What the member flushes did since open.
    pub fn persist_stats(&self) -> PersistStats {
        *self.persist_stats.lock()
    }

    /// Flushes sent to each member since open, by position.
    pub fn member_flushes(&self) -> Vec<u64> {
        self.tracked.iter().map(|t| t.flushes()).collect()
    }

    /// Flushes every member that has not failed and holds a write not known durable (the
    /// member being rebuilt included: its rebuilt zones take writes). Everything completed
    /// before the call is durable when it returns.
    pub(super) async fn flush_members(&self) -> NvmeResult<()> {
        self.flush_for(Need::Everything).await
    }

    /// A FUA write's flush (Fig. 6): the members holding a write `zone`'s data depends on
    /// that is not known durable (its data and parity units, its partial-parity, relocation
    /// and generation records, metadata of every zone). Everything of the zone completed
    /// before the call, and what it depends on, is durable when it returns.
    pub(super) async fn flush_zone(&self, zone: u32) -> NvmeResult<()> {
        self.flush_for(Need::Zone(zone)).await
    }

    async fn flush_for(&self, need: Need) -> NvmeResult<()> {
        let failed = self.state.lock().health.failed;
        let failed = match self.rebuilding() {
            Some(r) => failed.without(r),
            None => failed,
        };
        let every = self.flush_every_member();
        let mut skipped = 0u64;
        let mut sent = 0u64;
        let flushes: Vec<_> = self
            .tracked
            .iter()
            .enumerate()
            .filter(|(m, _)| !failed.contains(*m))
            .filter(|(_, t)| {
                let go = every
                    || match need {
                        Need::Everything => t.any_pending(),
                        Need::Zone(z) => t.zone_pending(z),
                    };
                if go {
                    sent += 1;
                } else {
                    skipped += 1;
                }
                go
            })
            .map(|(m, t)| async move { t.flush().await.map_err(|e| (m, e)) })
            .collect();
        {
            let mut s = self.persist_stats.lock();
            s.member_flushes += sent;
            match need {
                Need::Everything => s.flushes_skipped += skipped,
                Need::Zone(_) => {
                    s.fua_flushes += sent;
                    s.fua_flushes_skipped += skipped;
                }
            }
        }
        for r in join_all(flushes).await {
            if let Err((m, status)) = r {
                self.note_member_error(m, status)?;
            }
        }
        self.persist_health().await
    }

    /// Whether every FUA write and Flush flushes every member that has not failed, as
    /// before the persistence state existed (`set_flush_every_member`).
    fn flush_every_member(&self) -> bool {
        *self.flush_every.lock()
    }

    /// Makes every FUA write and Flush flush every member that has not failed (true), or
    /// only the members holding something they need that is not known durable (false). A
    /// volume opens with true: with the rule on, more stripes tear at a power cut and the
    /// members' fixed partial-parity logs overflow more often (docs/DESIGN.md, "Persistence
    /// state").
    pub fn set_flush_every_member(&self, every: bool) {
        *self.flush_every.lock() = every;
    }
}

/// Wraps every member slot in its persistence tracking: the devices the volume sends its
/// commands to, and the same objects typed for the tracked writes.
pub(super) fn track(
    slots: &[Arc<super::rebuild::Slot>],
    meta_zones: u32,
) -> (Vec<Member>, Vec<Arc<Tracked>>) {
    let tracked: Vec<Arc<Tracked>> = slots
        .iter()
        .map(|s| Arc::new(Tracked::new(s.clone() as Member, meta_zones)))
        .collect();
    let members = tracked.iter().map(|t| t.clone() as Member).collect();
    (members, tracked)
}
