//! `RefModel`: a deliberately simple, synchronous reference model of one zoned namespace,
//! and `ModelDevice`, which serves it through the async `ZonedDevice` trait.
//!
//! The model favours being obviously correct over being fast: every zone owns a plain byte
//! vector for its data and one for its per-block metadata, resource counts are recomputed
//! from the zone states on every use, and every command validates fully before it changes
//! anything, so a failed command never leaves a trace.
//!
//! Fault model: the volatile write cache is always on. Per zone the model tracks the durable
//! write pointer: a flush makes every zone durable up to its WP, a FUA write up to its end, a
//! zone that becomes Full (by writing or Finish) is sealed durable, a Reset is durable at
//! once, and a zone moved to Read Only or Offline by a device fault is frozen as it is.
//! `power_cycle` cuts each zone somewhere between its durable WP and its WP (a prefix of what
//! was written survives), then restarts. Device-side faults are only the zone state changes
//! to Read Only and Offline; the model never finishes a zone on its own.

use std::sync::Mutex;

use async_trait::async_trait;

use crate::device::ZonedDevice;
use crate::rng::SimRng;
use crate::status::{NvmeResult, NvmeStatus};
use crate::types::{
    check_range, CopyRange, Geometry, GeometryError, Lba, ReportFilter, ZoneAction, ZoneDescriptor,
    ZoneReport, ZoneState,
};

/// One zone of the model.
#[derive(Clone, Debug)]
struct ModelZone {
    state: ZoneState,
    start: Lba,
    /// Absolute write pointer. A Full zone has it at ZSLBA + capacity whether it was filled
    /// or finished; its data above the last written block is zeros because nothing wrote it.
    wp: Lba,
    /// Everything below this LBA survives a power loss.
    durable_wp: Lba,
    /// When the zone last became Implicitly Opened; the smallest value is closed first when
    /// an open slot is needed.
    implicit_open_seq: u64,
    attributes: u8,
    /// `zone_size * block_size` bytes; blocks that were never written are zeros.
    data: Vec<u8>,
    /// `zone_size * oob_size` bytes.
    meta: Vec<u8>,
}

/// The reference model of a zoned namespace. See the module documentation.
#[derive(Clone, Debug)]
pub struct RefModel {
    geo: Geometry,
    zones: Vec<ModelZone>,
    next_open_seq: u64,
}

impl RefModel {
    /// A fresh namespace: every zone Empty with its WP at its start.
    pub fn new(geo: Geometry) -> Result<RefModel, GeometryError> {
        geo.validate()?;
        let data_bytes = usize::try_from(geo.zone_size * u64::from(geo.block_size))
            .map_err(|_| GeometryError("zone too large for memory".into()))?;
        let meta_bytes = usize::try_from(geo.zone_size * u64::from(geo.oob_size))
            .map_err(|_| GeometryError("zone metadata too large for memory".into()))?;
        let zones = (0..geo.zone_count)
            .map(|z| {
                let start = geo.zone_start(z);
                ModelZone {
                    state: ZoneState::Empty,
                    start,
                    wp: start,
                    durable_wp: start,
                    implicit_open_seq: 0,
                    attributes: 0,
                    data: vec![0; data_bytes],
                    meta: vec![0; meta_bytes],
                }
            })
            .collect();
        Ok(RefModel {
            geo,
            zones,
            next_open_seq: 1,
        })
    }

    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The state of `zone`, or None when there is no such zone.
    pub fn zone_state(&self, zone: u32) -> Option<ZoneState> {
        self.zones.get(zone as usize).map(|z| z.state)
    }

    /// The internal write pointer of `zone` (ZSLBA + capacity for Full zones).
    pub fn wp(&self, zone: u32) -> Option<Lba> {
        self.zones.get(zone as usize).map(|z| z.wp)
    }

    /// The LBA below which everything written to `zone` survives a power loss.
    pub fn durable_wp(&self, zone: u32) -> Option<Lba> {
        self.zones.get(zone as usize).map(|z| z.durable_wp)
    }

    /// Zones holding an open resource.
    pub fn open_count(&self) -> u32 {
        self.zones.iter().filter(|z| z.state.is_open()).count() as u32
    }

    /// Zones holding an active resource.
    pub fn active_count(&self) -> u32 {
        self.zones.iter().filter(|z| z.state.is_active()).count() as u32
    }

    fn bs(&self) -> usize {
        self.geo.block_size as usize
    }

    fn oob(&self) -> usize {
        self.geo.oob_size as usize
    }

    fn zone_index(&self, lba: Lba) -> NvmeResult<usize> {
        self.geo
            .zone_of(lba)
            .map(|z| z as usize)
            .ok_or(NvmeStatus::LbaOutOfRange)
    }

    /// Index of `lba`'s block inside its zone.
    fn block_in_zone(&self, lba: Lba) -> usize {
        (lba % self.geo.zone_size) as usize
    }

    fn is_zone_start(&self, lba: Lba) -> bool {
        lba / self.geo.zone_size * self.geo.zone_size == lba
    }

    /// Validates a data buffer (and optional metadata buffer) and returns its block count.
    fn transfer_blocks(&self, data_len: usize, meta_len: Option<usize>) -> NvmeResult<u64> {
        let bs = self.bs();
        let nlb = data_len / bs;
        if nlb == 0 || nlb * bs != data_len {
            return Err(NvmeStatus::InvalidField);
        }
        if let Some(m) = meta_len {
            if m != nlb * self.oob() {
                return Err(NvmeStatus::InvalidField);
            }
        }
        Ok(nlb as u64)
    }

    /// Read rules for one LBA range: namespace range, zone boundary, Offline.
    fn check_readable(&self, lba: Lba, nlb: u64) -> NvmeResult<()> {
        check_range(&self.geo, lba, nlb)?;
        let first = self.zone_index(lba)?;
        let last = self.zone_index(lba + nlb - 1)?;
        if first != last && !self.geo.cross_zone_reads {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        if self.zones[first..=last]
            .iter()
            .any(|z| z.state == ZoneState::Offline)
        {
            return Err(NvmeStatus::ZoneIsOffline);
        }
        Ok(())
    }

    /// Copies `nlb` blocks of data and metadata at `lba` out of the model. The range must have
    /// passed `check_readable`.
    fn gather(&self, lba: Lba, nlb: u64, buf: &mut [u8], meta: Option<&mut [u8]>) {
        let (bs, oob) = (self.bs(), self.oob());
        let mut meta = meta;
        for i in 0..nlb {
            let at = lba + i;
            let zone = &self.zones[(at / self.geo.zone_size) as usize];
            let b = self.block_in_zone(at);
            let i = i as usize;
            buf[i * bs..(i + 1) * bs].copy_from_slice(&zone.data[b * bs..(b + 1) * bs]);
            if let Some(m) = meta.as_deref_mut() {
                m[i * oob..(i + 1) * oob].copy_from_slice(&zone.meta[b * oob..(b + 1) * oob]);
            }
        }
    }

    /// Reads `buf.len() / block_size` blocks at `lba`; see the rules in the crate docs.
    pub fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        check_range(&self.geo, lba, (buf.len() / self.bs()) as u64)?;
        let nlb = self.transfer_blocks(buf.len(), meta.as_ref().map(|m| m.len()))?;
        self.check_readable(lba, nlb)?;
        self.gather(lba, nlb, buf, meta);
        Ok(())
    }

    /// Zone state, write pointer and boundary checks of a zoned write of `nlb` blocks at
    /// `lba` (`lba` None for an append to `zone`). Returns the zone index and the LBA the
    /// data will land at.
    fn check_writable(&self, zone: usize, lba: Option<Lba>, nlb: u64) -> NvmeResult<Lba> {
        let z = &self.zones[zone];
        match z.state {
            ZoneState::Full => return Err(NvmeStatus::ZoneIsFull),
            ZoneState::ReadOnly => return Err(NvmeStatus::ZoneIsReadOnly),
            ZoneState::Offline => return Err(NvmeStatus::ZoneIsOffline),
            _ => {}
        }
        let at = lba.unwrap_or(z.wp);
        if at != z.wp {
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if at + nlb > z.start + self.geo.zone_capacity {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        Ok(at)
    }

    /// Takes an open slot, implicitly closing the zone that became Implicitly Opened longest
    /// ago when the open limit is reached.
    fn take_open_slot(&mut self) -> NvmeResult<()> {
        let max = self.geo.max_open;
        if max == 0 || self.open_count() < max {
            return Ok(());
        }
        let victim = self
            .zones
            .iter_mut()
            .filter(|z| z.state == ZoneState::ImplicitlyOpened)
            .min_by_key(|z| z.implicit_open_seq)
            .ok_or(NvmeStatus::TooManyOpenZones)?;
        victim.state = ZoneState::Closed;
        Ok(())
    }

    /// Makes sure `zone` may become open: an Empty zone needs an active slot (checked before
    /// anything is closed) and an open slot, a Closed zone an open slot, an open zone nothing.
    fn ensure_open_resources(&mut self, zone: usize) -> NvmeResult<()> {
        match self.zones[zone].state {
            ZoneState::Empty => {
                let max = self.geo.max_active;
                if max != 0 && self.active_count() >= max {
                    return Err(NvmeStatus::TooManyActiveZones);
                }
                self.take_open_slot()
            }
            ZoneState::Closed => self.take_open_slot(),
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened => Ok(()),
            _ => Err(NvmeStatus::InvalidZoneStateTransition),
        }
    }

    fn mark_implicitly_opened(&mut self, zone: usize) {
        let seq = self.next_open_seq;
        self.next_open_seq += 1;
        let z = &mut self.zones[zone];
        z.state = ZoneState::ImplicitlyOpened;
        z.implicit_open_seq = seq;
    }

    /// Stores `nlb` blocks at `at` (already validated and resourced) and moves the zone on.
    /// `data` None writes zeros; `meta` None writes zero metadata.
    fn commit(
        &mut self,
        zone: usize,
        at: Lba,
        nlb: u64,
        data: Option<&[u8]>,
        meta: Option<&[u8]>,
        fua: bool,
    ) {
        let (bs, oob) = (self.bs(), self.oob());
        let b = self.block_in_zone(at);
        let n = nlb as usize;
        let cap_end = self.zones[zone].start + self.geo.zone_capacity;
        let z = &mut self.zones[zone];
        let dst = &mut z.data[b * bs..(b + n) * bs];
        match data {
            Some(d) => dst.copy_from_slice(d),
            None => dst.fill(0),
        }
        let mdst = &mut z.meta[b * oob..(b + n) * oob];
        match meta {
            Some(m) => mdst.copy_from_slice(m),
            None => mdst.fill(0),
        }
        z.wp = at + nlb;
        if fua {
            z.durable_wp = z.wp;
        }
        if z.wp == cap_end {
            // The device seals a zone the moment it becomes Full.
            z.state = ZoneState::Full;
            z.durable_wp = z.wp;
        } else if matches!(z.state, ZoneState::Empty | ZoneState::Closed) {
            self.mark_implicitly_opened(zone);
        }
    }

    /// The shared tail of write, append, write zeroes and copy: zone checks, resources,
    /// then the data. Returns where the data landed.
    fn zoned_write(
        &mut self,
        lba: Option<Lba>,
        zone: usize,
        nlb: u64,
        data: Option<&[u8]>,
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        let at = self.check_writable(zone, lba, nlb)?;
        self.ensure_open_resources(zone)?;
        self.commit(zone, at, nlb, data, meta, fua);
        Ok(at)
    }

    /// Zone Write of `data` at `lba`, which must be the zone's write pointer.
    pub fn write(
        &mut self,
        lba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<()> {
        check_range(&self.geo, lba, (data.len() / self.bs()) as u64)?;
        let nlb = self.transfer_blocks(data.len(), meta.map(|m| m.len()))?;
        if nlb > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let zone = self.zone_index(lba)?;
        self.zoned_write(Some(lba), zone, nlb, Some(data), meta, fua)
            .map(|_| ())
    }

    /// Zone Append to the zone starting at `zslba`; returns where the data landed.
    pub fn append(
        &mut self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        check_range(&self.geo, zslba, (data.len() / self.bs()) as u64)?;
        if !self.is_zone_start(zslba) {
            return Err(NvmeStatus::InvalidField);
        }
        let nlb = self.transfer_blocks(data.len(), meta.map(|m| m.len()))?;
        if nlb > u64::from(self.geo.zasl_blocks) || nlb > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let zone = self.zone_index(zslba)?;
        self.zoned_write(None, zone, nlb, Some(data), meta, fua)
    }

    /// Write Zeroes: a zoned write of `blocks` zero blocks (with zero metadata) at `lba`.
    pub fn write_zeroes(&mut self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        check_range(&self.geo, lba, blocks)?;
        if blocks == 0 || blocks > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let zone = self.zone_index(lba)?;
        self.zoned_write(Some(lba), zone, blocks, None, None, fua)
            .map(|_| ())
    }

    /// Flush: every zone becomes durable up to its write pointer.
    pub fn flush(&mut self) -> NvmeResult<()> {
        for z in &mut self.zones {
            z.durable_wp = z.wp;
        }
        Ok(())
    }

    /// Simple Copy of `sources`, in order, to `dest`, which must be its zone's write pointer.
    /// Checks: size limits, then every source by the read rules, then the destination by the
    /// write rules.
    pub fn copy(&mut self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
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
        let zone = self.zone_index(dest)?;
        // The sources are read before anything is written, so a copy within one zone reads
        // the data as it was when the command started.
        let (bs, oob) = (self.bs(), self.oob());
        let mut data = vec![0u8; total as usize * bs];
        let mut meta = vec![0u8; total as usize * oob];
        let mut at = 0usize;
        for r in sources {
            let n = r.blocks as usize;
            let (d, m) = (
                &mut data[at * bs..(at + n) * bs],
                &mut meta[at * oob..(at + n) * oob],
            );
            self.gather(r.lba, r.blocks, d, Some(m));
            at += n;
        }
        self.zoned_write(Some(dest), zone, total, Some(&data), Some(&meta), fua)
            .map(|_| ())
    }

    /// Zone Management Send.
    pub fn zone_mgmt(
        &mut self,
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    ) -> NvmeResult<()> {
        if select_all {
            return self.zone_mgmt_all(action);
        }
        let zone = self.zone_index(zslba)?;
        if !self.is_zone_start(zslba) {
            return Err(NvmeStatus::InvalidField);
        }
        self.zone_action(action, zone)
    }

    /// Select All: ascending zones, only those in the states the action selects; the first
    /// error stops the walk and earlier zones keep their change.
    fn zone_mgmt_all(&mut self, action: ZoneAction) -> NvmeResult<()> {
        for zone in 0..self.zones.len() {
            let s = self.zones[zone].state;
            let selected = match action {
                ZoneAction::Open => s == ZoneState::Closed,
                ZoneAction::Close => s.is_open(),
                ZoneAction::Finish => s.is_active(),
                ZoneAction::Reset => s.is_active() || s == ZoneState::Full,
                ZoneAction::Offline => s == ZoneState::ReadOnly,
            };
            if selected {
                self.zone_action(action, zone)?;
            }
        }
        Ok(())
    }

    fn zone_action(&mut self, action: ZoneAction, zone: usize) -> NvmeResult<()> {
        use ZoneState::*;
        let s = self.zones[zone].state;
        let invalid = Err(NvmeStatus::InvalidZoneStateTransition);
        match action {
            ZoneAction::Open => match s {
                Empty | Closed => {
                    self.ensure_open_resources(zone)?;
                    self.zones[zone].state = ExplicitlyOpened;
                }
                ImplicitlyOpened => self.zones[zone].state = ExplicitlyOpened,
                ExplicitlyOpened => {}
                Full | ReadOnly | Offline => return invalid,
            },
            ZoneAction::Close => match s {
                ImplicitlyOpened | ExplicitlyOpened => self.zones[zone].state = Closed,
                Closed => {}
                Empty | Full | ReadOnly | Offline => return invalid,
            },
            ZoneAction::Finish => match s {
                Empty | ImplicitlyOpened | ExplicitlyOpened | Closed => {
                    let cap = self.geo.zone_capacity;
                    let z = &mut self.zones[zone];
                    z.state = Full;
                    z.wp = z.start + cap;
                    z.durable_wp = z.wp;
                }
                Full => {}
                ReadOnly | Offline => return invalid,
            },
            ZoneAction::Reset => match s {
                ImplicitlyOpened | ExplicitlyOpened | Closed | Full => self.reset_zone(zone),
                Empty => {}
                ReadOnly | Offline => return invalid,
            },
            ZoneAction::Offline => match s {
                ReadOnly => self.zones[zone].state = Offline,
                Offline => {}
                _ => return invalid,
            },
        }
        Ok(())
    }

    fn reset_zone(&mut self, zone: usize) {
        let z = &mut self.zones[zone];
        z.state = ZoneState::Empty;
        z.wp = z.start;
        z.durable_wp = z.start;
        z.attributes = 0;
        z.data.fill(0);
        z.meta.fill(0);
    }

    fn descriptor(&self, z: &ModelZone) -> ZoneDescriptor {
        let wp = match z.state {
            ZoneState::Full => z.start + self.geo.zone_capacity,
            ZoneState::Offline => z.start + self.geo.zone_size,
            _ => z.wp,
        };
        ZoneDescriptor {
            state: z.state,
            attributes: z.attributes,
            capacity: self.geo.zone_capacity,
            start: z.start,
            wp,
        }
    }

    /// Report Zones from the zone holding `lba`.
    pub fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        let first = self.zone_index(lba)?;
        let matching = self.zones[first..]
            .iter()
            .filter(|z| filter.matches(z.state));
        let zones: Vec<ZoneDescriptor> = matching
            .clone()
            .take(max_zones)
            .map(|z| self.descriptor(z))
            .collect();
        let nr_zones = if partial {
            zones.len()
        } else {
            matching.count()
        } as u64;
        Ok(ZoneReport { nr_zones, zones })
    }

    /// Device-side fault: moves `zone` to Read Only (WP kept) or Offline (data unreadable).
    /// The zone is frozen as it is, so its durable WP becomes its WP. Any other target state,
    /// or Read Only for an Offline zone, is refused.
    pub fn set_zone_state(&mut self, zone: u32, state: ZoneState) -> NvmeResult<()> {
        let z = self
            .zones
            .get_mut(zone as usize)
            .ok_or(NvmeStatus::InvalidField)?;
        match (z.state, state) {
            (ZoneState::Offline, ZoneState::ReadOnly) => {
                return Err(NvmeStatus::InvalidZoneStateTransition)
            }
            (_, ZoneState::ReadOnly | ZoneState::Offline) => {}
            _ => return Err(NvmeStatus::InvalidField),
        }
        z.state = state;
        z.durable_wp = z.wp;
        Ok(())
    }

    /// Clean controller shutdown and restart (checklist item 37): everything becomes durable,
    /// open zones come back Closed, or Empty when nothing was written to them.
    pub fn restart(&mut self) {
        for z in &mut self.zones {
            if z.state.is_open() {
                z.state = if z.wp == z.start {
                    ZoneState::Empty
                } else {
                    ZoneState::Closed
                };
            }
            z.durable_wp = z.wp;
        }
    }

    /// Power loss with the volatile write cache on, then restart. For every zone with
    /// unflushed blocks (in ascending zone order, one draw each) a cut point is drawn
    /// uniformly from [durable WP, WP]; blocks above it are lost.
    pub fn power_cycle(&mut self, seed: u64) {
        let mut rng = SimRng::new(seed);
        let (bs, oob) = (self.bs(), self.oob());
        for z in &mut self.zones {
            if z.durable_wp >= z.wp {
                continue;
            }
            let cut = rng.range_inclusive(z.durable_wp, z.wp);
            let from = (cut - z.start) as usize;
            let to = (z.wp - z.start) as usize;
            z.data[from * bs..to * bs].fill(0);
            z.meta[from * oob..to * oob].fill(0);
            z.wp = cut;
        }
        self.restart();
    }
}

/// A `RefModel` behind a lock, served through the async `ZonedDevice` trait so the
/// conformance kit can run against the model itself. Commands complete in the order they are
/// first polled.
#[derive(Debug)]
pub struct ModelDevice {
    geo: Geometry,
    model: Mutex<RefModel>,
}

impl ModelDevice {
    pub fn new(geo: Geometry) -> Result<ModelDevice, GeometryError> {
        Ok(ModelDevice::from_model(RefModel::new(geo)?))
    }

    pub fn from_model(model: RefModel) -> ModelDevice {
        ModelDevice {
            geo: model.geometry(),
            model: Mutex::new(model),
        }
    }

    pub fn into_model(self) -> RefModel {
        self.model
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` with the model locked (for fault injection, restart and inspection).
    pub fn with_model<R>(&self, f: impl FnOnce(&mut RefModel) -> R) -> R {
        // A panic while the lock was held cannot leave the model half-changed, because every
        // command validates before it mutates, so a poisoned lock is still usable.
        let mut guard = self
            .model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

#[async_trait]
impl ZonedDevice for ModelDevice {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.with_model(|m| m.read(lba, buf, meta))
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.with_model(|m| m.write(lba, data, meta, fua))
    }

    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.with_model(|m| m.append(zslba, data, meta, fua))
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.with_model(|m| m.write_zeroes(lba, blocks, fua))
    }

    async fn flush(&self) -> NvmeResult<()> {
        self.with_model(|m| m.flush())
    }

    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.with_model(|m| m.copy(sources, dest, fua))
    }

    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.with_model(|m| m.zone_mgmt(action, zslba, select_all))
    }

    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.with_model(|m| m.report_zones(lba, filter, partial, max_zones))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ZoneState::*;

    fn geo() -> Geometry {
        Geometry {
            block_size: 512,
            oob_size: 8,
            zone_count: 8,
            zone_size: 16,
            zone_capacity: 12,
            max_open: 2,
            max_active: 3,
            zasl_blocks: 4,
            mdts_blocks: 8,
            copy_max_ranges: 2,
            copy_max_range_blocks: 4,
            copy_max_blocks: 6,
            cross_zone_reads: false,
        }
    }

    fn block(g: &Geometry, n: u64, fill: u8) -> Vec<u8> {
        vec![fill; n as usize * g.block_size as usize]
    }

    fn states(m: &RefModel) -> Vec<ZoneState> {
        (0..m.geometry().zone_count)
            .filter_map(|z| m.zone_state(z))
            .collect()
    }

    #[test]
    fn implicit_close_takes_the_oldest_implicitly_opened_zone_and_never_an_explicit_one() {
        let g = Geometry {
            max_active: 0,
            ..geo()
        };
        let mut m = RefModel::new(g).unwrap();
        m.zone_mgmt(ZoneAction::Open, 0, false).unwrap();
        m.write(16, &block(&g, 1, 1), None, false).unwrap();
        // Zone 1 is the only implicitly opened zone, so zone 2 takes its slot.
        m.write(32, &block(&g, 1, 2), None, false).unwrap();
        assert_eq!(
            &states(&m)[..3],
            &[ExplicitlyOpened, Closed, ImplicitlyOpened]
        );
        assert_eq!(m.wp(1), Some(17));
        // Writing zone 1 again closes zone 2, the oldest (and only) implicitly opened one.
        m.write(17, &block(&g, 1, 3), None, false).unwrap();
        assert_eq!(
            &states(&m)[..3],
            &[ExplicitlyOpened, ImplicitlyOpened, Closed]
        );
        m.zone_mgmt(ZoneAction::Open, 16, false).unwrap();
        assert_eq!(
            m.write(48, &block(&g, 1, 4), None, false),
            Err(NvmeStatus::TooManyOpenZones)
        );
        assert_eq!(m.zone_state(3), Some(Empty));
    }

    #[test]
    fn active_limit_is_checked_before_anything_is_implicitly_closed() {
        let g = geo();
        let mut m = RefModel::new(g).unwrap();
        m.write(0, &block(&g, 1, 1), None, false).unwrap();
        m.zone_mgmt(ZoneAction::Close, 0, false).unwrap();
        m.write(16, &block(&g, 1, 1), None, false).unwrap();
        m.write(32, &block(&g, 1, 1), None, false).unwrap();
        let before = m.report_zones(0, ReportFilter::All, false, 8).unwrap();
        assert_eq!(
            m.append(48, &block(&g, 1, 1), None, false),
            Err(NvmeStatus::TooManyActiveZones)
        );
        assert_eq!(
            m.report_zones(0, ReportFilter::All, false, 8).unwrap(),
            before
        );
        // The Closed zone needs only an open slot, which an implicit close provides.
        m.write(1, &block(&g, 1, 1), None, false).unwrap();
        assert_eq!(
            &states(&m)[..3],
            &[ImplicitlyOpened, Closed, ImplicitlyOpened]
        );
    }

    #[test]
    fn close_at_zone_start_stays_closed_and_restart_empties_only_open_zones() {
        let g = geo();
        let mut m = RefModel::new(g).unwrap();
        m.zone_mgmt(ZoneAction::Open, 0, false).unwrap();
        m.zone_mgmt(ZoneAction::Close, 0, false).unwrap();
        m.zone_mgmt(ZoneAction::Open, 16, false).unwrap();
        m.write(32, &block(&g, 2, 1), None, false).unwrap();
        assert_eq!(m.open_count(), 2);
        assert_eq!(m.active_count(), 3);
        m.restart();
        assert_eq!(&states(&m)[..3], &[Closed, Empty, Closed]);
        assert_eq!((m.open_count(), m.active_count()), (0, 2));
        assert_eq!(m.wp(2), Some(34));
    }

    #[test]
    fn finish_needs_no_resources_and_reports_capacity_wp_with_zero_tail() {
        let g = geo();
        let mut m = RefModel::new(g).unwrap();
        for (action, lba) in [
            (ZoneAction::Open, 0),
            (ZoneAction::Open, 16),
            (ZoneAction::Close, 16),
            (ZoneAction::Open, 32),
        ] {
            m.zone_mgmt(action, lba, false).unwrap();
        }
        assert_eq!((m.open_count(), m.active_count()), (2, 3));
        m.write(0, &block(&g, 3, 9), Some(&[7u8; 24]), false)
            .unwrap();
        m.zone_mgmt(ZoneAction::Finish, 48, false).unwrap();
        m.zone_mgmt(ZoneAction::Finish, 0, false).unwrap();
        let r = m
            .report_zones(0, ReportFilter::State(Full), false, 8)
            .unwrap();
        assert_eq!(r.nr_zones, 2);
        assert_eq!(r.zones[0].wp, 12);
        assert_eq!(m.durable_wp(0), Some(12));
        let mut buf = block(&g, 16, 0xEE);
        let mut meta = vec![0xEEu8; 16 * 8];
        m.read(0, &mut buf, Some(&mut meta)).unwrap();
        assert!(buf[..3 * 512].iter().all(|b| *b == 9));
        assert!(buf[3 * 512..].iter().all(|b| *b == 0));
        assert!(meta[..24].iter().all(|b| *b == 7) && meta[24..].iter().all(|b| *b == 0));
    }

    #[test]
    fn select_all_stops_at_the_first_error_and_keeps_earlier_changes() {
        let g = geo();
        let mut m = RefModel::new(g).unwrap();
        for z in 0..3 {
            m.zone_mgmt(ZoneAction::Open, z * 16, false).unwrap();
            m.zone_mgmt(ZoneAction::Close, z * 16, false).unwrap();
        }
        assert_eq!(
            m.zone_mgmt(ZoneAction::Open, 0, true),
            Err(NvmeStatus::TooManyOpenZones)
        );
        assert_eq!(
            &states(&m)[..3],
            &[ExplicitlyOpened, ExplicitlyOpened, Closed]
        );
    }

    #[test]
    fn failed_copy_changes_nothing_and_copy_within_a_zone_reads_the_old_data() {
        let g = geo();
        let mut m = RefModel::new(g).unwrap();
        m.write(0, &block(&g, 4, 5), None, false).unwrap();
        let before = m.clone();
        let src = [CopyRange { lba: 0, blocks: 2 }];
        assert_eq!(m.copy(&src, 5, false), Err(NvmeStatus::ZoneInvalidWrite));
        assert_eq!(
            m.copy(&[src[0]; 3], 4, false),
            Err(NvmeStatus::CommandSizeLimitExceeded)
        );
        assert_eq!(
            m.copy(&[CopyRange { lba: 14, blocks: 4 }], 4, false),
            Err(NvmeStatus::ZoneBoundaryError)
        );
        assert_eq!(format!("{:?}", m.zones), format!("{:?}", before.zones));
        m.copy(&[CopyRange { lba: 2, blocks: 4 }], 4, false)
            .unwrap();
        let mut buf = block(&g, 8, 0xEE);
        m.read(0, &mut buf, None).unwrap();
        let blocks: Vec<u8> = buf.chunks(512).map(|c| c[0]).collect();
        assert_eq!(blocks, vec![5, 5, 5, 5, 5, 5, 0, 0]);
    }

    #[test]
    fn power_cycle_keeps_a_prefix_between_durable_and_written() {
        let g = Geometry {
            max_open: 0,
            max_active: 0,
            ..geo()
        };
        for seed in 0..50 {
            let mut m = RefModel::new(g).unwrap();
            m.write(0, &block(&g, 4, 1), None, false).unwrap();
            m.flush().unwrap();
            m.write(4, &block(&g, 4, 2), None, false).unwrap();
            m.write(16, &block(&g, 2, 3), None, false).unwrap();
            m.write(18, &block(&g, 2, 4), None, true).unwrap();
            m.write(32, &block(&g, 8, 5), None, false).unwrap();
            m.write(40, &block(&g, 4, 5), None, false).unwrap();
            m.write(48, &block(&g, 3, 6), None, false).unwrap();
            m.power_cycle(seed);
            let wp0 = m.wp(0).unwrap();
            assert!((4..=8).contains(&wp0));
            assert_eq!(m.wp(1), Some(20));
            assert_eq!((m.zone_state(2), m.wp(2)), (Some(Full), Some(44)));
            let wp3 = m.wp(3).unwrap();
            assert!((48..=51).contains(&wp3));
            assert_eq!(
                m.zone_state(3),
                Some(if wp3 == 48 { Empty } else { Closed })
            );
            let mut buf = block(&g, 16, 0xEE);
            m.read(0, &mut buf, None).unwrap();
            for (i, c) in buf.chunks(512).enumerate() {
                let want = if (i as u64) >= wp0 {
                    0
                } else if i < 4 {
                    1
                } else {
                    2
                };
                assert!(c.iter().all(|b| *b == want), "seed {seed} block {i}");
            }
            assert_eq!(m.durable_wp(0), Some(wp0));
        }
    }

    #[test]
    fn device_faults_and_their_refusals() {
        let g = geo();
        let mut m = RefModel::new(g).unwrap();
        m.write(0, &block(&g, 2, 1), None, false).unwrap();
        m.set_zone_state(0, ReadOnly).unwrap();
        assert_eq!((m.active_count(), m.wp(0)), (0, Some(2)));
        assert_eq!(m.set_zone_state(0, Closed), Err(NvmeStatus::InvalidField));
        assert_eq!(m.set_zone_state(99, Offline), Err(NvmeStatus::InvalidField));
        m.set_zone_state(0, Offline).unwrap();
        assert_eq!(
            m.set_zone_state(0, ReadOnly),
            Err(NvmeStatus::InvalidZoneStateTransition)
        );
        let mut buf = block(&g, 1, 0);
        assert_eq!(m.read(0, &mut buf, None), Err(NvmeStatus::ZoneIsOffline));
        let r = m.report_zones(0, ReportFilter::All, true, 1).unwrap();
        assert_eq!(r.zones[0].wp, 16);
    }
}
