//! The zone state machine: states, write pointers, open/active resources and durability
//! points of every zone. Pure bookkeeping with no data and no I/O, so that every transition
//! of ZNS-CONFORMANCE.md is decided here and tested directly.
//!
//! Fault model: the durable write pointer of a zone is the end of the prefix that survives a
//! power loss. It advances on Flush (every zone), on a FUA write (to that write's end), when a
//! zone becomes Full (the device seals a full zone), on Finish, and on every write when the
//! volatile write cache is off. A Reset is durable when it completes.
//!
//! ZNS+ (docs/ZNSPLUS.md): a TL-opened zone carries the `TLO` attribute and its valid-block
//! bitmap here. Its write pointer always rests on an invalid block or the capacity: after
//! `tl_open`, after each write and after a power cut it moves past the valid blocks that
//! follow (plugging them, which keeps their bytes where they are). Its data end is the old
//! data's end (or the writes' end, if later), so blocks at or above the write pointer read
//! the old data. A power cut keeps a prefix of the writes, never touches a valid block, and
//! leaves invalid blocks above the write pointer as they are (unspecified to the host).

use std::sync::Arc;

use crate::inflight::Uncopied;
use zns::{
    zone_attr, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, SimRng, ValidBitmap,
    ZoneAction, ZoneDescriptor, ZoneReport, ZoneState,
};

/// The state of one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone {
    pub state: ZoneState,
    /// Write pointer (absolute LBA); ZSLBA + capacity once the zone is Full, as QEMU keeps it.
    pub wp: Lba,
    /// End of the data written to the zone (<= `wp`). A zone finished early keeps its data end
    /// below its write pointer; reads at or above the data end return zeros.
    pub data_end: Lba,
    /// End of the prefix that survives a power loss.
    pub durable_wp: Lba,
    pub attributes: u8,
    /// When the zone last became Implicitly Opened, to pick the oldest one to close.
    pub opened_seq: u64,
}

/// Every zone plus the open/active resource counts.
#[derive(Clone, Debug)]
pub struct ZoneTable {
    geo: Geometry,
    zones: Vec<Zone>,
    nr_open: u32,
    nr_active: u32,
    open_seq: u64,
    /// Zones whose data a writer is copying into the store outside the device lock (begun,
    /// not yet finished). Never persisted; on one thread a writer begins and finishes
    /// without anything in between, so only concurrent writers ever see one set.
    busy: Vec<bool>,
    /// Blocks claimed by writers whose bytes are still being copied (`inflight`): the write
    /// pointer is already past them. Shared with the device, whose writers clear their claims
    /// without the lock this table lives under.
    uncopied: Arc<Uncopied>,
    /// The valid-block bitmap of each TL-opened zone (Some exactly when `TLO` is set).
    tl: Vec<Option<ValidBitmap>>,
}

impl ZoneTable {
    /// A fresh namespace: every zone Empty.
    pub fn new(geo: Geometry) -> ZoneTable {
        let zones = (0..geo.zone_count)
            .map(|z| {
                let start = geo.zone_start(z);
                Zone {
                    state: ZoneState::Empty,
                    wp: start,
                    data_end: start,
                    durable_wp: start,
                    attributes: 0,
                    opened_seq: 0,
                }
            })
            .collect();
        ZoneTable {
            geo,
            zones,
            nr_open: 0,
            nr_active: 0,
            open_seq: 0,
            busy: vec![false; geo.zone_count as usize],
            uncopied: Arc::new(Uncopied::new(geo.zone_count)),
            tl: vec![None; geo.zone_count as usize],
        }
    }

    /// Rebuilds a table from persisted zones (restart rules already applied by the caller;
    /// zones open at a clean shutdown come back open, with `opened_seq` giving their order).
    pub fn from_zones(geo: Geometry, zones: Vec<Zone>) -> ZoneTable {
        let none = vec![None; zones.len()];
        Self::from_zones_tl(geo, zones, none)
    }

    /// Rebuilds a table from persisted zones and the valid bitmaps of the TL-opened ones
    /// (`tl[z]` is Some exactly for the zones with `TLO`; an entry and its bitmap that
    /// disagree are the caller's corrupt image, refused before here). Each TL-opened zone's WP
    /// moves past the valid blocks at it, as after a power cut (its durable point already
    /// rests there, so this changes nothing in an image the device wrote).
    pub fn from_zones_tl(
        geo: Geometry,
        mut zones: Vec<Zone>,
        mut tl: Vec<Option<ValidBitmap>>,
    ) -> ZoneTable {
        tl.resize(zones.len(), None);
        for (zone, map) in zones.iter_mut().zip(&tl) {
            if map.is_none() {
                zone.attributes &= !zone_attr::TLO;
            }
        }
        let open_seq = zones.iter().map(|z| z.opened_seq).max().unwrap_or(0);
        let mut t = ZoneTable {
            geo,
            busy: vec![false; zones.len()],
            uncopied: Arc::new(Uncopied::new(zones.len() as u32)),
            tl,
            zones,
            nr_open: 0,
            nr_active: 0,
            open_seq,
        };
        t.recount();
        for z in 0..geo.zone_count {
            if t.tl_map(z).is_some() {
                t.zones[z as usize].attributes |= zone_attr::TLO;
                t.plug(z);
                let zone = &mut t.zones[z as usize];
                zone.durable_wp = zone.wp;
            }
        }
        t
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    pub fn zone(&self, z: u32) -> &Zone {
        &self.zones[z as usize]
    }

    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    pub fn open_count(&self) -> u32 {
        self.nr_open
    }

    pub fn active_count(&self) -> u32 {
        self.nr_active
    }

    fn start(&self, z: u32) -> Lba {
        self.geo.zone_start(z)
    }

    fn cap_end(&self, z: u32) -> Lba {
        self.start(z) + self.geo.zone_capacity
    }

    fn recount(&mut self) {
        self.nr_open = self.zones.iter().filter(|z| z.state.is_open()).count() as u32;
        self.nr_active = self.zones.iter().filter(|z| z.state.is_active()).count() as u32;
    }

    fn set_state(&mut self, z: u32, to: ZoneState) {
        let from = self.zones[z as usize].state;
        if from.is_open() {
            self.nr_open -= 1;
        }
        if from.is_active() {
            self.nr_active -= 1;
        }
        if to.is_open() {
            self.nr_open += 1;
        }
        if to.is_active() {
            self.nr_active += 1;
        }
        if to == ZoneState::ImplicitlyOpened && from != to {
            self.open_seq += 1;
            self.zones[z as usize].opened_seq = self.open_seq;
        }
        self.zones[z as usize].state = to;
        debug_assert_eq!(
            self.nr_open,
            self.zones.iter().filter(|z| z.state.is_open()).count() as u32
        );
    }

    /// Frees an open slot if the open limit is reached, by implicitly closing the zone that
    /// became Implicitly Opened longest ago. Never closes an Explicitly Opened zone.
    fn make_open_room(&mut self) -> NvmeResult<()> {
        if self.geo.max_open == 0 || self.nr_open < self.geo.max_open {
            return Ok(());
        }
        // A zone with a write in flight keeps its slot: closing it under the writer would
        // leave that write completing into a closed zone.
        let victim = (0..self.geo.zone_count)
            .filter(|&z| self.zones[z as usize].state == ZoneState::ImplicitlyOpened)
            .filter(|&z| !self.is_busy(z))
            .min_by_key(|&z| self.zones[z as usize].opened_seq);
        match victim {
            Some(v) => {
                self.set_state(v, ZoneState::Closed);
                Ok(())
            }
            None => Err(NvmeStatus::TooManyOpenZones),
        }
    }

    /// Takes the resources zone `z` needs to become open in state `to` (items 22-25, 31).
    fn acquire_open(&mut self, z: u32, to: ZoneState) -> NvmeResult<()> {
        let state = self.zones[z as usize].state;
        match state {
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened => {
                if to == ZoneState::ExplicitlyOpened {
                    self.set_state(z, to);
                }
                return Ok(());
            }
            ZoneState::Empty => {
                if self.geo.max_active != 0 && self.nr_active >= self.geo.max_active {
                    return Err(NvmeStatus::TooManyActiveZones);
                }
            }
            ZoneState::Closed => {}
            // Callers check writability first, so Full, Read Only and Offline never get here;
            // if one did, the honest answer is a transition error rather than a panic.
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        }
        self.make_open_room()?;
        self.set_state(z, to);
        Ok(())
    }

    /// Validates a zoned write of `blocks` at `lba` (Zone Write, Write Zeroes, Copy
    /// destination) and opens the zone; returns the zone index. Nothing changes on error.
    pub fn begin_write(&mut self, lba: Lba, blocks: u64) -> NvmeResult<u32> {
        zns::check_range(&self.geo, lba, blocks)?;
        let z = self.zone_index(lba)?;
        self.check_writable(z)?;
        if lba != self.zones[z as usize].wp {
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if lba + blocks > self.cap_end(z) {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        self.check_tl_write(z, lba, blocks)?;
        self.acquire_open(z, ZoneState::ImplicitlyOpened)?;
        Ok(z)
    }

    /// A write to a TL-opened zone covers invalid blocks only (item 50).
    fn check_tl_write(&self, z: u32, lba: Lba, blocks: u64) -> NvmeResult<()> {
        if let Some(map) = self.tl_map(z) {
            let from = lba - self.start(z);
            if !map.all_invalid(from, from + blocks) {
                return Err(NvmeStatus::ZoneInvalidWrite);
            }
        }
        Ok(())
    }

    /// The valid-block bitmap of zone `z` when it is TL-opened.
    pub fn tl_map(&self, z: u32) -> Option<&ValidBitmap> {
        self.tl.get(z as usize).and_then(Option::as_ref)
    }

    /// ZNS+ TL_open (items 48, 49): validates, takes an open (and, from Full, an active)
    /// resource like an explicit Open, and moves the WP to the first invalid block. Returns
    /// the zone and the blocks plugged. Nothing changes on error.
    pub fn tl_open(&mut self, zslba: Lba, bits: &[u8]) -> NvmeResult<(u32, u64)> {
        zns::check_range(&self.geo, zslba, 1)?;
        let z = self.zone_index(zslba)?;
        if zslba != self.start(z) {
            return Err(NvmeStatus::InvalidField);
        }
        let zone = self.zones[z as usize];
        let start = self.start(z);
        let with_data = zone.data_end > start && zone.attributes & zone_attr::TLO == 0;
        match zone.state {
            ZoneState::Full => {}
            ZoneState::Closed if with_data => {}
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        }
        let map = ValidBitmap::parse(bits, self.geo.zone_capacity, zone.data_end - start)?;
        if zone.state == ZoneState::Full
            && self.geo.max_active != 0
            && self.nr_active >= self.geo.max_active
        {
            return Err(NvmeStatus::TooManyActiveZones);
        }
        self.make_open_room()?;
        self.set_state(z, ZoneState::ExplicitlyOpened);
        let zone = &mut self.zones[z as usize];
        zone.wp = start;
        zone.durable_wp = start;
        zone.attributes |= zone_attr::TLO;
        self.tl[z as usize] = Some(map);
        let plugged = self.plug(z);
        let zone = &mut self.zones[z as usize];
        zone.durable_wp = zone.wp;
        Ok((z, plugged))
    }

    /// Moves a TL-opened zone's WP past the valid blocks at it (plugging them) and makes it
    /// Full at the capacity. Returns the blocks plugged.
    fn plug(&mut self, z: u32) -> u64 {
        let start = self.start(z);
        let cap_end = self.cap_end(z);
        let Some(map) = self.tl_map(z) else {
            return 0;
        };
        let wp = self.zones[z as usize].wp;
        let next = start + map.next_invalid(wp - start);
        let plugged = next - wp;
        self.zones[z as usize].wp = next;
        if next == cap_end {
            self.zones[z as usize].durable_wp = cap_end;
            self.end_tl(z);
            self.set_state(z, ZoneState::Full);
        }
        plugged
    }

    /// Ends threaded logging of zone `z`: the bitmap and `TLO` go.
    fn end_tl(&mut self, z: u32) {
        self.tl[z as usize] = None;
        self.zones[z as usize].attributes &= !zone_attr::TLO;
    }

    /// Validates a Zone Append of `blocks` to the zone starting at `zslba`, opens the zone
    /// and returns (zone, LBA the data goes to). The size limits are checked by the caller.
    pub fn begin_append(&mut self, zslba: Lba, blocks: u64) -> NvmeResult<(u32, Lba)> {
        zns::check_range(&self.geo, zslba, blocks.max(1))?;
        let z = self.zone_index(zslba)?;
        if zslba != self.start(z) {
            return Err(NvmeStatus::InvalidField);
        }
        if blocks > u64::from(self.geo.zasl_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        self.check_writable(z)?;
        let wp = self.zones[z as usize].wp;
        if wp + blocks > self.cap_end(z) {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        self.check_tl_write(z, wp, blocks)?;
        self.acquire_open(z, ZoneState::ImplicitlyOpened)?;
        Ok((z, wp))
    }

    /// Marks zone `z` as having a write between `begin_write` and `finish_write` that runs
    /// outside the device lock (or clears the mark).
    pub fn set_busy(&mut self, z: u32, busy: bool) {
        if let Some(b) = self.busy.get_mut(z as usize) {
            *b = busy;
        }
    }

    /// Whether an open slot is held only by zones with a write in flight on another thread:
    /// a command refused Too Many Open Zones now would succeed once they finish.
    pub fn open_room_waits_for_busy(&self) -> bool {
        (0..self.geo.zone_count).any(|z| {
            self.is_busy(z)
                && self
                    .zones
                    .get(z as usize)
                    .is_some_and(|zone| zone.state == ZoneState::ImplicitlyOpened)
        })
    }

    /// Whether zone `z` has a write in flight outside the device lock: begun and not
    /// finished, or claimed and not yet copied.
    pub fn is_busy(&self, z: u32) -> bool {
        self.busy.get(z as usize).copied().unwrap_or(false) || self.uncopied.get(z) > 0
    }

    /// The claims of writes in flight, for the writers to clear (see `inflight`).
    pub fn uncopied(&self) -> Arc<Uncopied> {
        Arc::clone(&self.uncopied)
    }

    /// Completes a write begun with `begin_write` at once, before its bytes are stored, when
    /// that changes nothing but the write pointer and data end (an open zone, not TL-opened,
    /// not filled by the write, no durable point to move): the blocks are claimed until the
    /// writer clears them. Returns false, changing nothing, for any other write, which the
    /// caller finishes with `finish_write` after storing its bytes.
    pub fn claim_write(&mut self, z: u32, blocks: u64, durable: bool) -> bool {
        let Some(zone) = self.zones.get(z as usize) else {
            return false;
        };
        let fills = zone.wp + blocks >= self.cap_end(z);
        if durable || fills || self.tl_map(z).is_some() || !zone.state.is_open() {
            return false;
        }
        let plugged = self.finish_write(z, blocks, false);
        assert_eq!(plugged, 0, "a claimed write plugged blocks");
        self.uncopied.claim(z, blocks);
        true
    }

    /// Gives back the claim of a write whose bytes could not be stored: the write pointer
    /// and data end return to where the write began; the zone stays open.
    pub fn undo_claim(&mut self, z: u32, blocks: u64) {
        assert_eq!(
            self.uncopied.get(z),
            blocks,
            "zone {z}: giving back a claim it does not hold"
        );
        let start = self.start(z);
        let zone = &mut self.zones[z as usize];
        assert!(zone.wp >= start + blocks, "claim below the zone start");
        zone.wp -= blocks;
        zone.data_end = zone.wp;
        zone.durable_wp = zone.durable_wp.min(zone.wp);
        self.uncopied.clear(z);
    }

    fn zone_index(&self, lba: Lba) -> NvmeResult<u32> {
        self.geo.zone_of(lba).ok_or(NvmeStatus::LbaOutOfRange)
    }

    fn check_writable(&self, z: u32) -> NvmeResult<()> {
        match self.zones[z as usize].state {
            ZoneState::Full => Err(NvmeStatus::ZoneIsFull),
            ZoneState::ReadOnly => Err(NvmeStatus::ZoneIsReadOnly),
            ZoneState::Offline => Err(NvmeStatus::ZoneIsOffline),
            _ => Ok(()),
        }
    }

    /// Completes a write begun with `begin_write`/`begin_append`: advances the WP, makes the
    /// zone Full at capacity, and moves the durable point.
    pub fn finish_write(&mut self, z: u32, blocks: u64, durable: bool) -> u64 {
        let cap_end = self.cap_end(z);
        let tl = self.tl_map(z).is_some();
        let zone = &mut self.zones[z as usize];
        assert!(
            zone.state.is_open(),
            "write completion on a zone that is not open"
        );
        zone.wp += blocks;
        // A TL-opened zone's old data above the WP stays readable.
        zone.data_end = if tl {
            zone.data_end.max(zone.wp)
        } else {
            zone.wp
        };
        assert!(zone.wp <= cap_end, "write pointer beyond zone capacity");
        let plugged = self.plug(z);
        let zone = &mut self.zones[z as usize];
        if durable {
            zone.durable_wp = zone.wp;
        }
        if zone.wp == cap_end && zone.state != ZoneState::Full {
            zone.durable_wp = zone.wp;
            self.set_state(z, ZoneState::Full);
        }
        plugged
    }

    /// Validates a read of `blocks` at `lba`; returns the zone it starts in.
    pub fn check_read(&self, lba: Lba, blocks: u64) -> NvmeResult<u32> {
        zns::check_range(&self.geo, lba, blocks)?;
        let first = self.zone_index(lba)?;
        let last = self.zone_index(lba + blocks - 1)?;
        if first != last && !self.geo.cross_zone_reads {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        for z in first..=last {
            if self.zones[z as usize].state == ZoneState::Offline {
                return Err(NvmeStatus::ZoneIsOffline);
            }
        }
        Ok(first)
    }

    /// Flush: every zone's written data becomes durable, except blocks claimed by a write
    /// still copying them (that write completes after the flush).
    pub fn flush(&mut self) {
        for (z, zone) in self.zones.iter_mut().enumerate() {
            zone.durable_wp = zone.wp - self.uncopied.get(z as u32);
        }
    }

    /// Zone Management Send on one zone or, with `select_all`, every zone the action selects.
    /// Returns the zones whose data must be discarded (reset).
    pub fn manage(
        &mut self,
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    ) -> NvmeResult<Vec<u32>> {
        let mut reset = Vec::new();
        if select_all {
            for z in 0..self.geo.zone_count {
                if selected_by_all(action, self.zones[z as usize].state) {
                    self.manage_one(action, z, &mut reset)?;
                }
            }
            return Ok(reset);
        }
        zns::check_range(&self.geo, zslba, 1)?;
        let z = self.zone_index(zslba)?;
        if zslba != self.start(z) {
            return Err(NvmeStatus::InvalidField);
        }
        self.manage_one(action, z, &mut reset)?;
        Ok(reset)
    }

    fn manage_one(&mut self, action: ZoneAction, z: u32, reset: &mut Vec<u32>) -> NvmeResult<()> {
        use ZoneState::*;
        let state = self.zones[z as usize].state;
        match (action, state) {
            (_, ReadOnly) if action != ZoneAction::Offline => {
                Err(NvmeStatus::InvalidZoneStateTransition)
            }
            (_, Offline) if action != ZoneAction::Offline => {
                Err(NvmeStatus::InvalidZoneStateTransition)
            }
            (ZoneAction::Open, Full) => Err(NvmeStatus::InvalidZoneStateTransition),
            (ZoneAction::Open, _) => self.acquire_open(z, ExplicitlyOpened),
            (ZoneAction::Close, ImplicitlyOpened | ExplicitlyOpened) => {
                self.set_state(z, Closed);
                Ok(())
            }
            (ZoneAction::Close, Closed) => Ok(()),
            (ZoneAction::Close, _) => Err(NvmeStatus::InvalidZoneStateTransition),
            (ZoneAction::Finish, Full) => Ok(()),
            (ZoneAction::Finish, _) => {
                let cap_end = self.cap_end(z);
                self.end_tl(z);
                let zone = &mut self.zones[z as usize];
                zone.wp = cap_end;
                zone.durable_wp = cap_end;
                self.set_state(z, Full);
                Ok(())
            }
            (ZoneAction::Reset, Empty) => Ok(()),
            (ZoneAction::Reset, _) => {
                let start = self.start(z);
                let zone = &mut self.zones[z as usize];
                zone.wp = start;
                zone.data_end = start;
                zone.durable_wp = start;
                zone.attributes = 0;
                self.tl[z as usize] = None;
                self.set_state(z, Empty);
                reset.push(z);
                Ok(())
            }
            (ZoneAction::Offline, ReadOnly) => {
                self.set_state(z, Offline);
                Ok(())
            }
            (ZoneAction::Offline, Offline) => Ok(()),
            (ZoneAction::Offline, _) => Err(NvmeStatus::InvalidZoneStateTransition),
        }
    }

    /// Device-side fault: moves a zone to Read Only or Offline, releasing its resources. The
    /// zone is frozen as it is, so its data becomes durable. Read Only cannot revive an
    /// Offline zone.
    pub fn force_state(&mut self, z: u32, to: ZoneState) -> NvmeResult<()> {
        let from = self.zones[z as usize].state;
        match (from, to) {
            (_, ZoneState::ReadOnly | ZoneState::Offline) if from != ZoneState::Offline => {}
            (ZoneState::Offline, ZoneState::Offline) => return Ok(()),
            (ZoneState::Offline, ZoneState::ReadOnly) => {
                return Err(NvmeStatus::InvalidZoneStateTransition)
            }
            _ => return Err(NvmeStatus::InvalidField),
        }
        self.end_tl(z);
        let zone = &mut self.zones[z as usize];
        zone.durable_wp = zone.wp;
        self.set_state(z, to);
        Ok(())
    }

    /// The restart rule (item 37): open zones come back Closed, or Empty when nothing was
    /// written to them.
    pub fn restart(&mut self) {
        for z in 0..self.geo.zone_count {
            let zone = self.zones[z as usize];
            if zone.state.is_open() {
                // A TL-opened zone holds its old data even with its WP at the start.
                let to = if zone.wp == self.start(z) && self.tl_map(z).is_none() {
                    ZoneState::Empty
                } else {
                    ZoneState::Closed
                };
                self.set_state(z, to);
            }
        }
    }

    /// Power loss: every zone keeps a random prefix between its durable point and its WP
    /// (zones in ascending order, one draw each where the two differ), then the restart rule.
    /// Returns, per truncated zone, (zone, new WP, old WP).
    pub fn power_cut(&mut self, rng: &mut SimRng) -> Vec<(u32, Lba, Lba)> {
        // The device cuts power holding every zone's lock, so no write is half copied.
        assert!(!self.uncopied.any(), "power cut with a write in flight");
        let mut cut = Vec::new();
        for z in 0..self.geo.zone_count {
            let tl = self.tl_map(z).is_some();
            let zone = &mut self.zones[z as usize];
            assert!(
                zone.durable_wp <= zone.wp,
                "durable point beyond the write pointer"
            );
            if zone.durable_wp < zone.wp {
                let keep = rng.range_inclusive(zone.durable_wp, zone.wp);
                if keep < zone.wp {
                    cut.push((z, keep, zone.wp));
                }
                zone.wp = keep;
                // A TL-opened zone's valid blocks above the kept prefix still hold data.
                if !tl {
                    zone.data_end = zone.data_end.min(keep);
                }
            }
            if tl {
                self.plug(z);
            }
            let zone = &mut self.zones[z as usize];
            zone.durable_wp = zone.wp;
        }
        self.restart();
        cut
    }

    /// The descriptor Report Zones returns for zone `z`.
    pub fn descriptor(&self, z: u32) -> ZoneDescriptor {
        let zone = &self.zones[z as usize];
        let start = self.start(z);
        let wp = match zone.state {
            ZoneState::Offline => start + self.geo.zone_size,
            _ => zone.wp,
        };
        ZoneDescriptor {
            state: zone.state,
            attributes: zone.attributes,
            capacity: self.geo.zone_capacity,
            start,
            wp,
        }
    }

    /// Report Zones from the zone holding `lba`.
    pub fn report(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        let first = self.zone_index(lba)?;
        let mut report = ZoneReport::default();
        let mut matching = 0u64;
        for z in first..self.geo.zone_count {
            if !filter.matches(self.zones[z as usize].state) {
                continue;
            }
            matching += 1;
            if report.zones.len() < max_zones {
                report.zones.push(self.descriptor(z));
            } else if partial {
                break;
            }
        }
        report.nr_zones = if partial {
            report.zones.len() as u64
        } else {
            matching
        };
        Ok(report)
    }

    /// Marks a zone finished by the controller (used by fault handling).
    pub fn set_attribute(&mut self, z: u32, bits: u8) {
        self.zones[z as usize].attributes |=
            bits & (zone_attr::ZFC | zone_attr::FZR | zone_attr::RZR);
    }
}

fn selected_by_all(action: ZoneAction, state: ZoneState) -> bool {
    use ZoneState::*;
    match action {
        ZoneAction::Open => state == Closed,
        ZoneAction::Close => state.is_open(),
        ZoneAction::Finish => state.is_active(),
        ZoneAction::Reset => state.is_active() || state == Full,
        ZoneAction::Offline => state == ReadOnly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        zns::conformance::kit_geometry()
    }

    /// A Full zone 0 TL-opened with blocks 2..4 and 6 valid.
    fn tl_table() -> ZoneTable {
        let g = geo();
        let mut t = ZoneTable::new(g);
        let z = t.begin_write(0, g.zone_capacity).expect("fill");
        t.finish_write(z, g.zone_capacity, false);
        let mut map = ValidBitmap::empty(g.zone_capacity);
        for b in [2, 3, 6] {
            map.set(b, true);
        }
        assert_eq!(t.tl_open(0, map.as_bytes()), Ok((0, 0)));
        t
    }

    #[test]
    fn writes_plug_the_valid_runs_they_reach() {
        let mut t = tl_table();
        assert_eq!(t.zone(0).state, ZoneState::ExplicitlyOpened);
        assert_ne!(t.zone(0).attributes & zone_attr::TLO, 0);
        assert_eq!(t.begin_write(0, 3), Err(NvmeStatus::ZoneInvalidWrite));
        assert_eq!(t.begin_write(1, 1), Err(NvmeStatus::ZoneInvalidWrite));
        let z = t.begin_write(0, 2).expect("invalid run");
        assert_eq!(t.finish_write(z, 2, false), 2);
        assert_eq!(t.zone(0).wp, 4);
        // The old data above the WP stays readable.
        assert_eq!(t.zone(0).data_end, geo().zone_capacity);
        let z = t.begin_write(4, 2).expect("next run");
        assert_eq!(t.finish_write(z, 2, true), 1);
        assert_eq!((t.zone(0).wp, t.zone(0).durable_wp), (7, 7));
    }

    #[test]
    fn power_cut_keeps_valid_blocks_and_rests_past_them() {
        let cap = geo().zone_capacity;
        let mut cuts = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let mut t = tl_table();
            let z = t.begin_write(0, 2).expect("run");
            t.finish_write(z, 2, false);
            let z = t.begin_write(4, 2).expect("run");
            t.finish_write(z, 2, false);
            t.power_cut(&mut SimRng::new(seed));
            let zone = *t.zone(0);
            // Kept 0, 1 or 2 blocks of the first write (2 lands in the valid run: WP 4), or
            // both writes (WP 5, or 6 which moves past block 6 to 7).
            assert!(
                [0, 1, 4, 5, 7].contains(&zone.wp),
                "seed {seed}: WP {}",
                zone.wp
            );
            assert_eq!(zone.state, ZoneState::Closed);
            assert_eq!(zone.data_end, cap, "the old data must stay readable");
            assert!(t.tl_map(0).is_some());
            cuts.insert(zone.wp);
        }
        assert!(cuts.len() >= 4, "cut points seen: {cuts:?}");
    }

    #[test]
    fn a_claimed_write_moves_the_pointer_but_a_flush_keeps_it_out_of_the_durable_prefix() {
        // A write copying its bytes outside the device lock has already moved the write
        // pointer; a Flush meanwhile must not make those blocks durable (the image would then
        // record a pointer over bytes it does not hold yet).
        let g = geo();
        let mut t = ZoneTable::new(g);
        let z = t.begin_write(0, 4).expect("write");
        assert!(t.claim_write(z, 4, false));
        assert_eq!((t.zone(0).wp, t.zone(0).data_end), (4, 4));
        assert!(t.is_busy(0), "a claimed zone is busy");
        t.flush();
        assert_eq!(t.zone(0).durable_wp, 0);
        t.uncopied().clear(0);
        assert!(!t.is_busy(0));
        t.flush();
        assert_eq!(t.zone(0).durable_wp, 4);
    }

    #[test]
    fn a_given_back_claim_leaves_the_zone_as_before_the_write() {
        let g = geo();
        let mut t = ZoneTable::new(g);
        let z = t.begin_write(0, 2).expect("write");
        t.finish_write(z, 2, false);
        let z = t.begin_write(2, 3).expect("write");
        assert!(t.claim_write(z, 3, false));
        t.undo_claim(z, 3);
        let zone = *t.zone(0);
        assert_eq!((zone.wp, zone.data_end, zone.durable_wp), (2, 2, 0));
        assert_eq!(zone.state, ZoneState::ImplicitlyOpened);
        assert!(!t.is_busy(0));
    }

    #[test]
    fn only_writes_that_move_nothing_but_the_pointer_are_claimed() {
        let g = geo();
        let mut t = ZoneTable::new(g);
        let z = t.begin_write(0, 1).expect("write");
        // Durable (FUA or no volatile cache): the durable point moves, after the copy.
        assert!(!t.claim_write(z, 1, true));
        // Filling the zone makes it Full, which is persisted as such.
        assert!(!t.claim_write(z, g.zone_capacity, false));
        assert_eq!(t.zone(0).wp, 0, "a refused claim changes nothing");
        // A TL-opened zone plugs valid blocks as its pointer moves.
        let mut tl = tl_table();
        let z = tl.begin_write(0, 2).expect("invalid run");
        assert!(!tl.claim_write(z, 2, false));
    }
}
