//! `RaiznVolume`: the async shell that serves the logical zoned namespace from the members.
//!
//! Fault model: members may lose power (each keeps a prefix of every zone, docs/DESIGN.md),
//! up to m members (the parity count) may fail (their commands return errors; reads
//! reconstruct from the others, writes skip them; each failure is recorded in the
//! survivors' superblocks, `health.rs`), and member zones may become Read Only or Offline
//! by device faults (folded into the logical zone by `refresh_faults`). One failure more
//! makes the array failed: every command errors; data is never made up.
//!
//! Lock order: a logical zone's `ZoneIo` async lock (an append holds it only while it
//! reserves its range; `append.rs`), then a member's partial-parity log lock, then the
//! general log lock, then a member's swap lock, then the `State` lock, then a zone's append
//! `Pipe` lock. The state and pipe locks are never held across an await. The `reloc`,
//! statistics and member persistence (`persist.rs`) locks are leaves: never held across an
//! await or while another lock is taken.

mod append;
mod general;
mod health;
mod io;
mod mount;
mod persist;
mod pplog;
mod rebuild;
mod rebuild_log;
mod reloc;
mod swap;

pub use append::AppendStats;
pub use persist::PersistStats;
pub use pplog::PpStats;
pub use reloc::RelocStats;

pub use rebuild::{RebuildProgress, RebuildReport};

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use zns::{
    check_range, CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction,
    ZoneReport, ZonedDevice,
};

use crate::layout::{ArrayLayout, LayoutError, DEFAULT_STRIPE_UNIT_BYTES};
use crate::meta::{MetaError, ZoneLogAction};
use crate::zones::ZoneTable;

/// A member device.
pub type Member = Arc<dyn ZonedDevice>;

/// Reads `blocks` blocks of `dev` from `lba`, with their metadata, in commands of at most the
/// device's MDTS: (data, metadata).
async fn read_run(dev: &dyn ZonedDevice, lba: u64, blocks: u64) -> NvmeResult<(Vec<u8>, Vec<u8>)> {
    let g = dev.geometry();
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let mdts = u64::from(g.mdts_blocks).max(1);
    let mut data = vec![0u8; blocks as usize * bs];
    let mut meta = vec![0u8; blocks as usize * oob];
    let mut done = 0u64;
    while done < blocks {
        let n = mdts.min(blocks - done);
        let (a, b) = (done as usize, (done + n) as usize);
        let m = (oob > 0).then(|| &mut meta[a * oob..b * oob]);
        dev.read(lba + done, &mut data[a * bs..b * bs], m).await?;
        done += n;
    }
    Ok((data, meta))
}

/// Settings of a new array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaiznConfig {
    /// Stripe unit in bytes: a multiple of the block size that divides the zone capacity.
    pub stripe_unit_bytes: u64,
    /// Parity units per stripe: 1 (RAID-5, XOR) or 2 (Reed-Solomon, N >= 4).
    pub parity: u32,
    /// The array's identity, written into every member's superblock.
    pub array_uuid: [u8; 16],
    /// Partial-parity log zones per member, K: 1 keeps one log zone collected through the
    /// swap zone; 2 or more make a pool (docs/DESIGN.md, "A pool of log zones per member").
    pub log_zones: u32,
}

impl RaiznConfig {
    /// RAID-5 with the default 64 KiB stripe unit.
    pub fn new(array_uuid: [u8; 16]) -> RaiznConfig {
        RaiznConfig {
            stripe_unit_bytes: u64::from(DEFAULT_STRIPE_UNIT_BYTES),
            parity: 1,
            array_uuid,
            log_zones: 1,
        }
    }
}

/// Why an array could not be formatted or opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RaiznError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("member {member}: device error while {what}: {status}")]
    Member {
        member: usize,
        what: &'static str,
        status: NvmeStatus,
    },
    #[error("member {member} holds data; format with force to destroy it")]
    HoldsData { member: usize },
    #[error("member {member} is not a RAIZN member: {why}")]
    NotFormatted { member: usize, why: MetaError },
    #[error("member {member} does not belong with the other members: {why}")]
    Foreign { member: usize, why: String },
    #[error(
        "members {members:?} failed, more than the {parity} parity unit(s) per stripe tolerate; \
         the array is failed and its data cannot be served"
    )]
    TooManyFailed { members: Vec<usize>, parity: u32 },
    #[error("no member {member}: the array has {members} members")]
    NoSuchMember { member: usize, members: usize },
    #[error("recovery failed while {what}: {status}")]
    Recovery {
        what: &'static str,
        status: NvmeStatus,
    },
    #[error("member {member} cannot be replaced: {why}")]
    NotReplaceable { member: usize, why: String },
}

/// Mutable state shared by all commands.
struct State {
    table: ZoneTable,
    /// Generation counter of every logical zone (persisted in the general zones,
    /// `general.rs`).
    generations: Vec<u64>,
    /// Failed members and the superblock generation recording them.
    health: health::Health,
    /// The rebuild of a replaced member, while it runs.
    rebuild: Option<rebuild::Rebuild>,
}

/// The data of the stripe a zone's write pointer is in.
struct StripeBuffer {
    stripe: u64,
    data: Vec<u8>,
    meta: Vec<u8>,
}

/// Per-zone I/O state, behind the zone's async lock.
#[derive(Default)]
struct ZoneIo {
    buffer: Option<StripeBuffer>,
}

/// A zoned RAID-5 volume over N member zoned devices. See docs/DESIGN.md ("RAIZN").
pub struct RaiznVolume {
    layout: ArrayLayout,
    geo: Geometry,
    /// The member devices: each is its slot (below), through which commands reach the
    /// device in that position now, behind its persistence tracking (`persist.rs`).
    members: Vec<Member>,
    /// The same objects as `members`, typed for the writes that name their zone and for
    /// the persistence state.
    tracked: Vec<Arc<persist::Tracked>>,
    /// Member flushes sent and left out (a leaf lock).
    persist_stats: Mutex<PersistStats>,
    /// Whether FUA and Flush flush every member regardless (`set_flush_every_member`).
    flush_every: Mutex<bool>,
    /// Member positions whose device `replace_member` exchanges.
    slots: Vec<Arc<rebuild::Slot>>,
    uuid: [u8; 16],
    /// The current superblock (member 0's fields), the template of new generations.
    sb: crate::meta::Superblock,
    /// The general zones: superblock generations, zone log, generation records.
    general: tokio::sync::Mutex<general::GeneralLog>,
    /// Every member's swap zone, shared by the collections of its general zone and of its
    /// partial-parity log; true while it may hold the only whole image of the zone a
    /// collection was rewriting (a collection failed after that zone's reset), so the next
    /// collection settles it first (`swap.rs`).
    swap: Vec<tokio::sync::Mutex<bool>>,
    state: Mutex<State>,
    zone_io: Vec<tokio::sync::Mutex<ZoneIo>>,
    /// Every logical zone's appends in flight (`append.rs`).
    pipes: Vec<append::ZonePipe>,
    /// Every member's partial-parity log (docs/DESIGN.md, "Partial parity").
    pp: Vec<tokio::sync::Mutex<pplog::PpLog>>,
    pp_stats: Mutex<PpStats>,
    meta_stats: Mutex<MetaStats>,
    /// Relocated stripe units and stale ranges of torn stripes (docs/DESIGN.md,
    /// "Relocation"); a leaf lock.
    reloc: Mutex<crate::reloc::Relocations>,
    reloc_stats: Mutex<RelocStats>,
}

/// Counters of the metadata zones' garbage collection, for tests and status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetaStats {
    /// Collections of a full general zone through the swap zone while running (open's
    /// checkpoint of the general zone is not counted).
    pub general_collections: u64,
    /// Collections (general zone or partial-parity log) started and not yet finished: a
    /// power cut now cuts one short.
    pub collections_in_flight: u64,
}

/// Counts a collection in flight while it lives, so one dropped midway (a power cut
/// dropping its command) still stops counting.
struct CollectionInFlight<'a>(&'a Mutex<MetaStats>);

impl<'a> CollectionInFlight<'a> {
    fn new(stats: &'a Mutex<MetaStats>) -> CollectionInFlight<'a> {
        stats.lock().collections_in_flight += 1;
        CollectionInFlight(stats)
    }
}

impl Drop for CollectionInFlight<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.collections_in_flight = s.collections_in_flight.saturating_sub(1);
    }
}

impl RaiznVolume {
    pub fn layout(&self) -> &ArrayLayout {
        &self.layout
    }

    pub fn array_uuid(&self) -> [u8; 16] {
        self.uuid
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member that failed first, if any.
    pub fn failed_member(&self) -> Option<usize> {
        self.state.lock().health.failed.first()
    }

    /// Every failed member (at most the parity count), in the order they failed.
    pub fn failed_members(&self) -> Vec<usize> {
        self.state.lock().health.failed.as_slice().to_vec()
    }

    /// What the partial-parity logs did since open.
    pub fn pp_stats(&self) -> PpStats {
        *self.pp_stats.lock()
    }

    /// What the metadata collections did since open.
    pub fn meta_stats(&self) -> MetaStats {
        *self.meta_stats.lock()
    }

    /// Generation counter of logical zone `zone`.
    pub fn generation(&self, zone: u32) -> Option<u64> {
        self.state.lock().generations.get(zone as usize).copied()
    }

    fn block_size(&self) -> usize {
        self.geo.block_size as usize
    }

    fn oob(&self) -> usize {
        self.geo.oob_size as usize
    }

    /// Blocks in a transfer of `data_len` bytes with an optional metadata buffer.
    fn transfer_blocks(&self, data_len: usize, meta_len: Option<usize>) -> NvmeResult<u64> {
        let bs = self.block_size();
        let nlb = data_len / bs;
        if nlb == 0 || nlb * bs != data_len {
            return Err(NvmeStatus::InvalidField);
        }
        if meta_len.is_some_and(|m| m != nlb * self.oob()) {
            return Err(NvmeStatus::InvalidField);
        }
        Ok(nlb as u64)
    }

    fn zone_of(&self, lba: Lba) -> NvmeResult<u32> {
        self.geo.zone_of(lba).ok_or(NvmeStatus::LbaOutOfRange)
    }

    fn zone_lock(&self, zone: u32) -> NvmeResult<&tokio::sync::Mutex<ZoneIo>> {
        self.zone_io
            .get(zone as usize)
            .ok_or(NvmeStatus::LbaOutOfRange)
    }

    /// Read rules: namespace range, zone boundary, Offline.
    fn check_readable(&self, lba: Lba, nlb: u64) -> NvmeResult<()> {
        check_range(&self.geo, lba, nlb)?;
        let first = self.zone_of(lba)?;
        let last = self.zone_of(lba + nlb - 1)?;
        if first != last && !self.geo.cross_zone_reads {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        let st = self.state.lock();
        let offline = (first..=last)
            .any(|z| st.table.zone(z).map(|z| z.state) == Some(zns::ZoneState::Offline));
        if offline {
            return Err(NvmeStatus::ZoneIsOffline);
        }
        Ok(())
    }

    /// One zone management action on one zone. Reset and Finish are logged in the general
    /// zones before they touch the members (`general.rs`).
    async fn zone_action(&self, action: ZoneAction, zone: u32) -> NvmeResult<()> {
        let mut zio = self.lock_settled(zone).await?;
        let (tell_members, empty_open) = {
            let st = self.state.lock();
            let z = st.table.zone(zone).ok_or(NvmeStatus::LbaOutOfRange)?;
            (
                st.table.check_action(action, zone)?,
                z.state.is_open() && z.wp == 0,
            )
        };
        let entry = |action, wp| general::ZoneLogEntry {
            zone,
            action,
            generation: self.generation(zone).unwrap_or(0),
            wp,
        };
        if action == ZoneAction::Close && empty_open {
            // A Closed zone without data must still be Closed after a restart, and only the
            // members can remember it: their zones are opened and closed the same way.
            self.members_mgmt(ZoneAction::Open, zone).await?;
            self.members_mgmt(ZoneAction::Close, zone).await?;
        }
        let generation = self.generation(zone).ok_or(NvmeStatus::LbaOutOfRange)?;
        let mut logged = None;
        if tell_members {
            match action {
                ZoneAction::Finish => {
                    // The data below the write pointer is made durable before the finish
                    // is logged, so an open that completes the finish finds it all.
                    self.flush_members().await?;
                    let wp = self.state.lock().table.zone(zone).map_or(0, |z| z.wp);
                    logged = Some(self.log_zone(entry(ZoneLogAction::Finish, wp)).await?);
                    self.finish_members(zone, &mut zio).await?;
                }
                ZoneAction::Reset => {
                    // Logged first: a power cut after some member zones were reset must bring
                    // the zone back reset, never with stale data on the others.
                    logged = Some(self.log_zone(entry(ZoneLogAction::Reset, 0)).await?);
                    self.members_mgmt(action, zone).await?;
                    // The new generation holds nothing relocated; the old records in the
                    // logs are of the old generation, which open ignores.
                    self.reloc.lock().drop_zone(zone);
                }
                ZoneAction::Offline => self.members_mgmt(action, zone).await?,
                ZoneAction::Open | ZoneAction::Close => {}
            }
        }
        if matches!(
            action,
            ZoneAction::Close | ZoneAction::Finish | ZoneAction::Reset
        ) {
            zio.buffer = None;
        }
        let reset = action == ZoneAction::Reset && tell_members;
        {
            let mut st = self.state.lock();
            st.table.apply_action(action, zone)?;
            if reset {
                if let Some(g) = st.generations.get_mut(zone as usize) {
                    *g = generation + 1;
                }
            }
        }
        if let Some(targets) = logged {
            self.zone_log_done(zone, &targets, reset.then_some(generation + 1))
                .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl ZonedDevice for RaiznVolume {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        // A failed array still reads what its survivors hold (`read_zone`): no check_usable.
        check_range(&self.geo, lba, (buf.len() / self.block_size()) as u64)?;
        let nlb = self.transfer_blocks(buf.len(), meta.as_ref().map(|m| m.len()))?;
        self.check_readable(lba, nlb)?;
        self.read_range(lba, nlb, buf, meta).await
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.check_usable()?;
        check_range(&self.geo, lba, (data.len() / self.block_size()) as u64)?;
        let nlb = self.transfer_blocks(data.len(), meta.map(|m| m.len()))?;
        if nlb > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let zone = self.zone_of(lba)?;
        let at = lba - self.geo.zone_start(zone);
        self.zoned_write(zone, Some(at), nlb, Some(data), meta, fua)
            .await
            .map(|_| ())
    }

    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.check_usable()?;
        check_range(&self.geo, zslba, (data.len() / self.block_size()) as u64)?;
        let zone = self.zone_of(zslba)?;
        if self.geo.zone_start(zone) != zslba {
            return Err(NvmeStatus::InvalidField);
        }
        let nlb = self.transfer_blocks(data.len(), meta.map(|m| m.len()))?;
        if nlb > u64::from(self.geo.zasl_blocks) || nlb > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let zero_meta;
        let meta = match meta {
            Some(m) => m,
            None => {
                zero_meta = vec![0u8; nlb as usize * self.oob()];
                &zero_meta[..]
            }
        };
        let at = self.zoned_append(zone, nlb, data, meta, fua).await?;
        Ok(zslba + at)
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.check_usable()?;
        check_range(&self.geo, lba, blocks)?;
        if blocks == 0 || blocks > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let zone = self.zone_of(lba)?;
        let at = lba - self.geo.zone_start(zone);
        self.zoned_write(zone, Some(at), blocks, None, None, fua)
            .await
            .map(|_| ())
    }

    async fn flush(&self) -> NvmeResult<()> {
        self.check_usable()?;
        self.flush_members().await
    }

    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.check_usable()?;
        let g = self.geo;
        let too_many = sources.is_empty() || sources.len() > g.copy_max_ranges as usize;
        let bad_range = sources
            .iter()
            .any(|r| r.blocks == 0 || r.blocks > u64::from(g.copy_max_range_blocks));
        let total = sources
            .iter()
            .try_fold(0u64, |acc, r| acc.checked_add(r.blocks));
        let total = match total {
            Some(t) if !too_many && !bad_range && t <= u64::from(g.copy_max_blocks) => t,
            _ => return Err(NvmeStatus::CommandSizeLimitExceeded),
        };
        for r in sources {
            self.check_readable(r.lba, r.blocks)?;
        }
        check_range(&g, dest, total)?;
        let zone = self.zone_of(dest)?;
        // Read every source before writing, so a copy within one zone reads the data as it
        // was when the command started.
        let (bs, oob) = (self.block_size(), self.oob());
        let mut data = vec![0u8; total as usize * bs];
        let mut meta = vec![0u8; total as usize * oob];
        let mut at = 0usize;
        for r in sources {
            let n = r.blocks as usize;
            self.read_range(
                r.lba,
                r.blocks,
                &mut data[at * bs..(at + n) * bs],
                Some(&mut meta[at * oob..(at + n) * oob]),
            )
            .await?;
            at += n;
        }
        let off = dest - g.zone_start(zone);
        self.zoned_write(zone, Some(off), total, Some(&data), Some(&meta), fua)
            .await
            .map(|_| ())
    }

    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.check_usable()?;
        if select_all {
            for zone in 0..self.geo.zone_count {
                let state = self.state.lock().table.zone(zone).map(|z| z.state);
                if state.is_some_and(|s| ZoneTable::selected(action, s)) {
                    self.zone_action(action, zone).await?;
                }
            }
            return Ok(());
        }
        let zone = self.zone_of(zslba)?;
        if self.geo.zone_start(zone) != zslba {
            return Err(NvmeStatus::InvalidField);
        }
        self.zone_action(action, zone).await
    }

    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        // Read-only like a read: a failed array still reports its zones.
        let first = self.zone_of(lba)?;
        Ok(self
            .state
            .lock()
            .table
            .report(first, filter, partial, max_zones))
    }
}
