//! When each command of a zoned namespace completes: plain synchronous discrete-event code.
//! The device calls `submit` with the present instant and a description of a command it has
//! already executed; the model books the command on the resources it uses and returns the
//! instant it completes. Nothing here touches data or zone states.
//!
//! A write travels: submission latency, the controller (one command at a time, appends
//! costing more than writes), admission into the write buffer, the host transfer (PCIe,
//! host to device), for an append the zone's append sequencer, then completion. Its bytes
//! stay in the buffer until the flash program of their unit ends: a zone is striped over its
//! dies in units of one page per plane, unit `u` on die `u mod dies_per_zone` of the zone's
//! die group (ZNS+ section 2.2, Fig. 1), and a unit is programmed once the zone's data fills
//! it. A read senses each unit it touches that is on flash (data still in the buffer, or
//! never written, costs no flash time), moves it over the channel, then over PCIe to the
//! host. Flush and FUA program partial units padded and wait for every program and copy
//! booked (FUA: in its zone), except the copybacks of ZNS+ plugging: a plugged unit's data
//! is the zone's old data, which stays in the old block group until the copy has ended.
//! Reset erases the blocks the zone used on each die; Finish programs the last partial unit.
//! Copy reads its sources on the device and writes through the buffer, or uses copyback for
//! a whole unit whose source and destination share a die.

use std::collections::VecDeque;

use zns::{CopyRange, Geometry, Lba};

use crate::timing::buffer::WriteBuffer;
use crate::timing::flash::{FlashArray, FlashCounters};
use crate::timing::plugging::{AheadPlugs, PlugOrder};
use crate::timing::profile::TimingProfile;
use crate::timing::resource::{transfer_ns, Resource};

/// A command as the timing model sees it, described after the device executed it.
#[derive(Clone, Copy, Debug)]
pub enum TimedCmd<'a> {
    Read {
        lba: Lba,
        blocks: u64,
    },
    /// Zone Write; `host_data` is false for Write Zeroes (no transfer from the host).
    Write {
        lba: Lba,
        blocks: u64,
        fua: bool,
        host_data: bool,
    },
    /// Zone Append, with the LBA the data landed at.
    Append {
        lba: Lba,
        blocks: u64,
        fua: bool,
    },
    Flush,
    Copy {
        sources: &'a [CopyRange],
        dest: Lba,
        fua: bool,
    },
    Reset {
        zones: &'a [u32],
    },
    Finish {
        zones: &'a [u32],
    },
    /// ZNS+ TL_open of `zone` with its valid bitmap: a LogFBG is allocated (pre-erased blocks
    /// on the zone's dies), the zone's new data starts at its first block, and the old data
    /// stays on flash. Under PPA-ordered plugging the bitmap says what may be copied ahead.
    TlOpen {
        zone: u32,
        valid: &'a [u8],
    },
    /// ZNS+ plugging of `blocks` valid blocks at `lba` of a TL-opened zone into its LogFBG,
    /// which the write pointer just passed (what PPA-ordered plugging already copied ahead
    /// costs nothing more).
    Plug {
        lba: Lba,
        blocks: u64,
    },
    /// Open, close, report zones: controller time only.
    Admin,
    /// A command that failed its checks: controller time only.
    Rejected,
}

/// Counters of the model beyond the flash array's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimingCounters {
    pub flash: FlashCounters,
    pub commands: u64,
    /// Programs of a partial unit forced by Flush, FUA or Finish.
    pub padded_programs: u64,
    pub buffer_waits: u64,
    pub buffer_wait_ns: u64,
    pub buffer_overcommits: u64,
    /// Units copied inside the device (Simple Copy, zone_compaction, plugging) by a read
    /// and a program rather than a copyback; copyback ratio = copybacks / (copybacks + this).
    pub copied_units_read_program: u64,
    /// Bytes of valid blocks plugged into LogFBGs.
    pub plugged_bytes: u64,
    /// Of those, bytes PPA-ordered plugging copied ahead of the write pointer in idle die
    /// time (the paper's background plugging, Table 5 "BP").
    pub plugged_idle_bytes: u64,
    /// Model time of the last submission, for utilisation figures.
    pub now_ns: u64,
    /// Die time booked to run after `now_ns` (programs the write buffer queued, plugs,
    /// copies): part of `flash.die_busy_ns` that has not happened yet.
    pub die_booked_ahead_ns: u64,
    /// Blocks moved inside the device and read by the host, and the die time they took, by
    /// path (ZNS+ analysis: where a copy's flash time goes).
    pub paths: MovePaths,
    /// Old block groups of TL-opened zones erased once their data was superseded (the
    /// zone TL-opened again after its LogFBG filled, or reset).
    pub old_groups_erased: u64,
}

/// Blocks moved by one path and the die time booked for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCost {
    pub blocks: u64,
    pub die_ns: u64,
}

impl PathCost {
    fn add(&mut self, blocks: u64, die_ns: u64) {
        self.blocks += blocks;
        self.die_ns += die_ns;
    }

    /// Die time per block, in microseconds (0 when nothing moved).
    pub fn us_per_block(&self) -> f64 {
        if self.blocks == 0 {
            0.0
        } else {
            self.die_ns as f64 / self.blocks as f64 / 1000.0
        }
    }

    /// The difference of two readings.
    pub fn since(&self, before: &PathCost) -> PathCost {
        PathCost {
            blocks: self.blocks - before.blocks,
            die_ns: self.die_ns - before.die_ns,
        }
    }
}

/// Die time by the path that moved each block. A piece read to the controller and
/// programmed counts its read and its share of its unit's program (bytes / unit bytes of
/// tPROG); a copyback counts the whole copyback; a merged plug counts its read and its share
/// of the program it joins (the host's data fills the rest of that unit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovePaths {
    /// Copy and zone_compaction: whole units moved by copyback.
    pub copy_copyback: PathCost,
    /// Copy and zone_compaction: pieces read to the controller and programmed again.
    pub copy_read_program: PathCost,
    /// Plugging at the write pointer: whole valid units moved by copyback.
    pub plug_copyback: PathCost,
    /// Plugging ahead of the write pointer in idle die time (PPA-ordered): whole units by
    /// copyback.
    pub plug_ahead: PathCost,
    /// Plugging of partly valid units: the valid blocks read and merged into the program
    /// that carries the host's data of the same unit.
    pub plug_merged: PathCost,
    /// Host reads: sensing and channel transfer (a host-level copy's read half when the host
    /// reads nothing else).
    pub host_read: PathCost,
}

impl TimingCounters {
    /// Share of internally copied units done by copyback (0 when nothing was copied).
    pub fn copyback_ratio(&self) -> f64 {
        let all = self.flash.copybacks + self.copied_units_read_program;
        if all == 0 {
            0.0
        } else {
            self.flash.copybacks as f64 / all as f64
        }
    }

    /// Die time spent up to `now_ns`, summed over dies: what was booked less what is booked
    /// to run later. Nothing submitted later can run before `now_ns`, so the difference of
    /// two readings is exactly the die time spent between them.
    pub fn die_done_ns(&self) -> u64 {
        self.flash.die_busy_ns - self.die_booked_ahead_ns
    }

    /// Mean share of time the `dies` dies were busy, up to the last submission (never above
    /// 1: work booked past it is not counted).
    pub fn chip_utilisation(&self, dies: u32) -> f64 {
        self.chip_utilisation_since(&TimingCounters::default(), dies)
    }

    /// Mean share of time the `dies` dies were busy between the reading `before` and this
    /// one (model time of their last submissions).
    pub fn chip_utilisation_since(&self, before: &TimingCounters, dies: u32) -> f64 {
        let span = self
            .now_ns
            .saturating_sub(before.now_ns)
            .saturating_mul(u64::from(dies));
        if span == 0 {
            0.0
        } else {
            self.die_done_ns().saturating_sub(before.die_done_ns()) as f64 / span as f64
        }
    }
}

/// Where the bytes at one offset of a zone are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Unwritten,
    Buffer,
    Flash(usize),
}

#[derive(Clone, Debug, Default)]
struct ZoneTiming {
    /// Bytes of data in the zone (its write pointer as an offset).
    data_bytes: u64,
    /// Bytes whose program is booked; the rest of the data is only in the buffer.
    booked_bytes: u64,
    /// Data bytes already covered by a padded program.
    padded_bytes: u64,
    /// Booked units whose programs may not have ended: (unit, end), in unit order.
    inflight: VecDeque<(u64, u64)>,
    /// The latest end of the zone's programs and copies, what a FUA write or copy into it
    /// waits for; plugging copybacks are not counted (see `FlashArray::plug_copyback`).
    last_program_end_ns: u64,
    /// Bytes of old data a TL-opened zone's old block group holds (ZNS+): reads at or above
    /// the zone's data in the LogFBG sense them there, on the same die (the mapping is
    /// static). 0 for a zone that was not TL-opened.
    old_data_bytes: u64,
    /// The zone's append sequencer.
    sequencer: Resource,
    /// PPA-ordered plugging's state while the zone is TL-opened under `PlugOrder::Ppa`.
    ahead: Option<Box<AheadPlugs>>,
}

/// The timing model of one zoned namespace on one flash array.
pub struct ZonedTiming {
    p: TimingProfile,
    geo: Geometry,
    flash: FlashArray,
    ctrl: Resource,
    host_to_device: Resource,
    device_to_host: Resource,
    buffer: WriteBuffer,
    zones: Vec<ZoneTiming>,
    now_ns: u64,
    commands: u64,
    padded_programs: u64,
    copied_units_read_program: u64,
    plugged_bytes: u64,
    plugged_idle_bytes: u64,
    plug_order: PlugOrder,
    /// Whether copies of whole units inside a die use copyback (the flash's command); off,
    /// every internal copy is a read to the controller and a program (paper Fig. 7(a)'s
    /// "w/o cpbk" setups).
    copyback: bool,
    paths: MovePaths,
    old_groups_erased: u64,
    /// Zones that may have units to plug ahead (PP), in TL_open order.
    ahead_zones: Vec<u32>,
}

impl ZonedTiming {
    /// A model for a namespace of geometry `geo`. With `trace`, every resource records its
    /// busy intervals (for tests). Refuses a write buffer too small to hold a partial unit per
    /// active zone plus one largest command, since writes could then wait forever.
    pub fn new(p: TimingProfile, geo: Geometry, trace: bool) -> Result<ZonedTiming, String> {
        p.validate()?;
        let active = if geo.max_active == 0 {
            geo.zone_count
        } else {
            geo.max_active
        };
        let need = u64::from(active) * p.unit_bytes()
            + u64::from(geo.mdts_blocks) * u64::from(geo.block_size);
        if p.write_buffer_bytes < need {
            return Err(format!(
                "timing profile {}: a {} KiB write buffer cannot hold a partial unit for each of {active} active zones plus one largest command ({} KiB); lower the active zone limit",
                p.name,
                p.write_buffer_bytes >> 10,
                need >> 10
            ));
        }
        Ok(ZonedTiming {
            p,
            geo,
            flash: FlashArray::new(p, trace),
            ctrl: Resource::new(trace),
            host_to_device: Resource::new(trace),
            device_to_host: Resource::new(trace),
            buffer: WriteBuffer::new(p.write_buffer_bytes),
            zones: (0..geo.zone_count).map(|_| ZoneTiming::default()).collect(),
            now_ns: 0,
            commands: 0,
            padded_programs: 0,
            copied_units_read_program: 0,
            plugged_bytes: 0,
            plugged_idle_bytes: 0,
            plug_order: PlugOrder::default(),
            copyback: true,
            paths: MovePaths::default(),
            old_groups_erased: 0,
            ahead_zones: Vec::new(),
        })
    }

    pub fn profile(&self) -> &TimingProfile {
        &self.p
    }

    /// Chooses how TL-opened zones are plugged from the next TL_open on (PP by default).
    pub fn set_plug_order(&mut self, order: PlugOrder) {
        self.plug_order = order;
    }

    pub fn plug_order(&self) -> PlugOrder {
        self.plug_order
    }

    /// Turns copyback on (the default) or off: off, a whole unit copied inside the device
    /// is read to the controller and programmed again like any other piece, and PPA-ordered
    /// plugging, which copies ahead by copyback only, plugs at the write pointer alone from
    /// the next TL_open on.
    pub fn set_copyback(&mut self, enabled: bool) {
        self.copyback = enabled;
    }

    /// The latest submission instant seen.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Books `cmd`, submitted at `now_ns`, and returns the instant it completes (never before
    /// `now_ns`). Submissions must come in non-decreasing time order.
    pub fn submit(&mut self, now_ns: u64, cmd: &TimedCmd<'_>) -> u64 {
        assert!(now_ns >= self.now_ns, "submissions out of time order");
        if now_ns > self.now_ns && !self.ahead_zones.is_empty() {
            self.plug_in_idle_time(self.now_ns, now_ns);
        }
        self.now_ns = now_ns;
        self.commands += 1;
        let done = match *cmd {
            TimedCmd::Read { lba, blocks } => self.read(lba, blocks),
            TimedCmd::Write {
                lba,
                blocks,
                fua,
                host_data,
            } => self.write(lba, blocks, fua, host_data, false),
            TimedCmd::Append { lba, blocks, fua } => self.write(lba, blocks, fua, true, true),
            TimedCmd::Flush => self.flush(),
            TimedCmd::Copy { sources, dest, fua } => self.copy(sources, dest, fua),
            TimedCmd::Reset { zones } => self.reset(zones),
            TimedCmd::Finish { zones } => self.finish(zones),
            TimedCmd::TlOpen { zone, valid } => self.tl_open(zone, valid),
            TimedCmd::Plug { lba, blocks } => self.plug(lba, blocks),
            TimedCmd::Admin | TimedCmd::Rejected => self.front(self.p.ctrl_admin_ns),
        };
        let done = done + self.p.complete_ns;
        assert!(done >= now_ns, "a completion before its submission");
        done
    }

    pub fn counters(&self) -> TimingCounters {
        TimingCounters {
            flash: self.flash.counters(),
            commands: self.commands,
            padded_programs: self.padded_programs,
            buffer_waits: self.buffer.waits,
            buffer_wait_ns: self.buffer.wait_ns,
            buffer_overcommits: self.buffer.overcommits,
            copied_units_read_program: self.copied_units_read_program,
            plugged_bytes: self.plugged_bytes,
            plugged_idle_bytes: self.plugged_idle_bytes,
            now_ns: self.now_ns,
            die_booked_ahead_ns: self.flash.die_booked_after_ns(self.now_ns),
            paths: self.paths,
            old_groups_erased: self.old_groups_erased,
        }
    }

    /// The flash array, for invariant checks on its traces.
    pub fn flash(&self) -> &FlashArray {
        &self.flash
    }

    /// The host link's two directions, for invariant checks on their traces.
    pub fn host_links(&self) -> (&Resource, &Resource) {
        (&self.host_to_device, &self.device_to_host)
    }

    /// After a power loss or restart: the buffer is empty and every zone's data (given as its
    /// write pointer in blocks from the zone start) is on flash.
    pub fn resync(&mut self, zone_wp_blocks: impl Iterator<Item = u64>) {
        self.buffer.clear();
        self.ahead_zones.clear();
        let bs = u64::from(self.geo.block_size);
        for (z, wp) in self.zones.iter_mut().zip(zone_wp_blocks) {
            let data = wp * bs;
            *z = ZoneTiming {
                data_bytes: data,
                booked_bytes: data,
                padded_bytes: data,
                sequencer: std::mem::take(&mut z.sequencer),
                ..ZoneTiming::default()
            };
        }
    }

    /// Under PPA-ordered plugging, the plan of a TL-opened zone's units that may be copied
    /// ahead in idle chip time (from its valid-block bitmap); none under LBA order.
    fn ahead_plugs(&self, valid: &[u8]) -> Option<Box<AheadPlugs>> {
        let unit_blocks = self.p.unit_bytes() / u64::from(self.geo.block_size);
        let slots = u64::from(self.p.dies_per_zone());
        (self.plug_order == PlugOrder::Ppa && self.copyback).then(|| {
            Box::new(AheadPlugs::new(
                valid,
                unit_blocks,
                self.geo.zone_capacity,
                slots,
            ))
        })
    }

    /// After `resync`: `zone` is still TL-opened (ZNS+ keeps its bitmap across a power loss
    /// or restart, docs/ZNSPLUS.md items 52-53), its old data (`old_data_blocks` from the
    /// zone start) still in its old block group. Reads above the write pointer sense the old
    /// blocks again, and under PPA-ordered plugging the fully valid units above the write
    /// pointer may go ahead in idle time again. Which units PP had copied ahead before was
    /// in controller memory, so they count as not copied: the device plugs them again
    /// (timing only; the data is the same either way).
    pub fn resync_tl(&mut self, zone: u32, old_data_blocks: u64, valid: &[u8]) {
        let ahead = self.ahead_plugs(valid);
        let bs = u64::from(self.geo.block_size);
        let Some(z) = self.zones.get_mut(zone as usize) else {
            return;
        };
        z.old_data_bytes = old_data_blocks * bs;
        z.ahead = ahead;
        if z.ahead.is_some() && !self.ahead_zones.contains(&zone) {
            self.ahead_zones.push(zone);
        }
    }

    /// Die time of reading `bytes` of one unit: sensing and the channel transfer.
    fn read_die_ns(&self, bytes: u64) -> u64 {
        self.p.page_read_ns + transfer_ns(bytes, self.p.channel_bytes_per_sec)
    }

    /// The share of a unit's program that `bytes` of it take.
    fn program_share_ns(&self, bytes: u64) -> u64 {
        self.p.page_program_ns * bytes / self.p.unit_bytes()
    }

    fn blocks_of(&self, bytes: u64) -> u64 {
        bytes / u64::from(self.geo.block_size)
    }

    fn host_ns(&self, bytes: u64) -> u64 {
        transfer_ns(bytes, self.p.host_bytes_per_sec)
    }

    /// Submission latency and controller time; returns when the controller is done.
    fn front(&mut self, ctrl_ns: u64) -> u64 {
        let now = self.now_ns;
        self.ctrl.reserve(now, now + self.p.submit_ns, ctrl_ns).1
    }

    fn zone_of(&self, lba: Lba) -> (u32, u64) {
        let z = lba / self.geo.zone_size;
        let off = (lba - z * self.geo.zone_size) * u64::from(self.geo.block_size);
        (z as u32, off)
    }

    fn die_of(&self, zone: u32, unit: u64) -> usize {
        let per_zone = u64::from(self.p.dies_per_zone());
        let groups = u64::from(self.p.dies() / self.p.dies_per_zone());
        let group = u64::from(zone) % groups;
        (group * per_zone + unit % per_zone) as usize
    }

    fn cap_bytes(&self) -> u64 {
        self.geo.zone_capacity * u64::from(self.geo.block_size)
    }

    fn locate(&mut self, zone: u32, off: u64) -> Loc {
        let now = self.now_ns;
        let unit = off / self.p.unit_bytes();
        let z = &mut self.zones[zone as usize];
        if off >= z.data_bytes {
            if off < z.old_data_bytes {
                return Loc::Flash(self.die_of(zone, unit));
            }
            return Loc::Unwritten;
        }
        if off >= z.booked_bytes {
            return Loc::Buffer;
        }
        while z.inflight.front().is_some_and(|&(_, end)| end <= now) {
            z.inflight.pop_front();
        }
        let i = z.inflight.partition_point(|&(u, _)| u < unit);
        match z.inflight.get(i) {
            Some(&(u, end)) if u == unit && end > now => Loc::Buffer,
            _ => Loc::Flash(self.die_of(zone, unit)),
        }
    }

    /// Programs unit `unit` of `zone`, of which `bytes` leave the buffer when it ends.
    fn book_unit(&mut self, zone: u32, unit: u64, bytes: u64, ready_ns: u64) -> u64 {
        let die = self.die_of(zone, unit);
        let end = self.flash.program(die, self.now_ns, ready_ns, bytes);
        self.buffer.release_at(end, bytes);
        let z = &mut self.zones[zone as usize];
        z.inflight.push_back((unit, end));
        z.last_program_end_ns = z.last_program_end_ns.max(end);
        end
    }

    /// New data up to offset `end_off` of `zone`, in the buffer at `ready_ns`: books every unit
    /// it completes, and the last partial unit when the zone reaches its capacity.
    fn add_data(&mut self, zone: u32, end_off: u64, ready_ns: u64) {
        let ub = self.p.unit_bytes();
        let cap = self.cap_bytes();
        let z = &mut self.zones[zone as usize];
        z.data_bytes = z.data_bytes.max(end_off);
        loop {
            let z = &self.zones[zone as usize];
            let (booked, data) = (z.booked_bytes, z.data_bytes);
            let boundary = (booked / ub + 1) * ub;
            let upto = if data >= boundary {
                boundary
            } else if data == cap && booked < data {
                data
            } else {
                break;
            };
            self.book_unit(zone, booked / ub, upto - booked, ready_ns);
            self.zones[zone as usize].booked_bytes = upto;
        }
    }

    /// Programs the zone's partial unit, padded, if it holds data not yet padded; returns when
    /// that program ends. The data stays in the buffer for the unit's full program.
    fn pad_partial(&mut self, zone: u32, ready_ns: u64) -> u64 {
        let ub = self.p.unit_bytes();
        let z = &self.zones[zone as usize];
        if z.data_bytes <= z.booked_bytes || z.data_bytes <= z.padded_bytes {
            return ready_ns;
        }
        let (unit, bytes) = (z.booked_bytes / ub, z.data_bytes - z.booked_bytes);
        let die = self.die_of(zone, unit);
        let end = self.flash.program(die, self.now_ns, ready_ns, bytes);
        self.padded_programs += 1;
        let z = &mut self.zones[zone as usize];
        z.padded_bytes = z.data_bytes;
        z.last_program_end_ns = z.last_program_end_ns.max(end);
        end
    }

    fn write(&mut self, lba: Lba, blocks: u64, fua: bool, host_data: bool, append: bool) -> u64 {
        let ctrl = if append {
            self.p.ctrl_append_ns
        } else {
            self.p.ctrl_write_ns
        };
        let now = self.now_ns;
        let bytes = blocks * u64::from(self.geo.block_size);
        let c = self.front(ctrl);
        let (zone, off) = self.zone_of(lba);
        // The buffer takes the bytes that extend the zone's data. Appends are booked as their
        // commands complete, which need not be the order they landed in: one that landed past
        // an append not yet booked brings the gap's bytes in with its own (its unit may be
        // booked, and its release counted, now), and the one booked late adds none. So the
        // buffer always holds exactly the zone data not yet programmed.
        let new_bytes = (off + bytes).saturating_sub(self.zones[zone as usize].data_bytes);
        let admitted = self.buffer.admit(c, new_bytes);
        let mut ready = admitted;
        if host_data {
            let dur = self.host_ns(bytes);
            ready = self.host_to_device.reserve(now, admitted, dur).1;
        }
        if append && (self.p.zone_append_ns > 0 || self.p.zone_append_bytes_per_sec > 0) {
            let dur = self.p.zone_append_ns + transfer_ns(bytes, self.p.zone_append_bytes_per_sec);
            ready = self.zones[zone as usize]
                .sequencer
                .reserve(now, ready, dur)
                .1;
        }
        self.add_data(zone, off + bytes, ready);
        if fua {
            let padded = self.pad_partial(zone, ready);
            ready = ready
                .max(padded)
                .max(self.zones[zone as usize].last_program_end_ns);
        }
        ready
    }

    fn read(&mut self, lba: Lba, blocks: u64) -> u64 {
        let now = self.now_ns;
        let bs = u64::from(self.geo.block_size);
        let c = self.front(self.p.ctrl_read_ns);
        let mut ready = c;
        for (zone, off, len) in self.pieces(lba, blocks) {
            if let Loc::Flash(die) = self.locate(zone, off) {
                ready = ready.max(self.flash.read(die, now, c, len));
                let (b, ns) = (self.blocks_of(len), self.read_die_ns(len));
                self.paths.host_read.add(b, ns);
            }
        }
        let dur = self.host_ns(blocks * bs);
        self.device_to_host.reserve(now, ready, dur).1
    }

    /// Splits `blocks` at `lba` into (zone, offset, bytes) pieces that each lie in one unit.
    fn pieces(&self, lba: Lba, blocks: u64) -> Vec<(u32, u64, u64)> {
        let bs = u64::from(self.geo.block_size);
        let ub = self.p.unit_bytes();
        let zone_bytes = self.geo.zone_size * bs;
        let mut out = Vec::new();
        let (mut at, end) = (lba, lba + blocks);
        while at < end {
            let (zone, off) = self.zone_of(at);
            let stop = ((off / ub + 1) * ub)
                .min(zone_bytes)
                .min(off + (end - at) * bs);
            out.push((zone, off, stop - off));
            at += (stop - off) / bs;
        }
        out
    }

    /// Flush: programs every zone's partial unit padded and waits for every program and
    /// copy booked, host writes' and copies' alike, but not for plugging copybacks, whose
    /// data the old block groups keep (see `FlashArray::plug_copyback`).
    fn flush(&mut self) -> u64 {
        let c = self.front(self.p.ctrl_admin_ns);
        let mut done = c;
        for zone in 0..self.geo.zone_count {
            done = done.max(self.pad_partial(zone, c));
        }
        done.max(self.flash.last_program_end_ns())
    }

    fn reset(&mut self, zones: &[u32]) -> u64 {
        let c = self.front(self.p.ctrl_admin_ns);
        let mut done = c;
        let ub = self.p.unit_bytes();
        for &zone in zones {
            let z = &self.zones[zone as usize];
            let ahead = z.ahead.as_ref().map_or(0, |a| a.done_end());
            let units = z.booked_bytes.max(z.padded_bytes).div_ceil(ub).max(ahead);
            let unbooked = z.data_bytes - z.booked_bytes;
            self.buffer.drop_bytes(unbooked);
            done = done.max(self.erase_units(zone, units, c));
            // A zone reset while TL-opened, or after its LogFBG filled, frees its old block
            // group too.
            done = done.max(self.erase_old_group(zone, c));
            let seq = std::mem::take(&mut self.zones[zone as usize].sequencer);
            self.zones[zone as usize] = ZoneTiming {
                sequencer: seq,
                ..ZoneTiming::default()
            };
        }
        done
    }

    /// Erases the blocks the first `units` units of `zone` used on each of its dies.
    fn erase_units(&mut self, zone: u32, units: u64, ready_ns: u64) -> u64 {
        let per_zone = u64::from(self.p.dies_per_zone());
        let mut done = ready_ns;
        for i in 0..per_zone.min(units) {
            let on_die = units / per_zone + u64::from(i < units % per_zone);
            let blocks = on_die.div_ceil(u64::from(self.p.pages_per_block));
            let die = self.die_of(zone, i);
            done = done.max(self.flash.erase(die, self.now_ns, ready_ns, blocks));
        }
        done
    }

    /// Erases the old block group of `zone` (ZNS+: the blocks that held its data before a
    /// TL_open), which returns to the free pool erased as a reset zone's blocks do. Nothing
    /// for a zone with no old group. Returns when the last erase ends.
    fn erase_old_group(&mut self, zone: u32, ready_ns: u64) -> u64 {
        let Some(z) = self.zones.get_mut(zone as usize) else {
            return ready_ns;
        };
        let old = std::mem::take(&mut z.old_data_bytes);
        if old == 0 {
            return ready_ns;
        }
        self.old_groups_erased += 1;
        self.erase_units(zone, old.div_ceil(self.p.unit_bytes()), ready_ns)
    }

    fn finish(&mut self, zones: &[u32]) -> u64 {
        let c = self.front(self.p.ctrl_admin_ns);
        let mut done = c;
        let ub = self.p.unit_bytes();
        for &zone in zones {
            let z = &self.zones[zone as usize];
            let (booked, data) = (z.booked_bytes, z.data_bytes);
            if data > booked {
                done = done.max(self.book_unit(zone, booked / ub, data - booked, c));
                self.zones[zone as usize].booked_bytes = data;
            }
            // A finished zone is Full: nothing more is plugged ahead into it.
            self.zones[zone as usize].ahead = None;
        }
        done
    }

    /// Copy: a whole unit whose source and destination share a die moves by copyback; every
    /// other piece is read to the controller and programmed through the buffer. The
    /// controller reads each source unit on flash once per command, as one sense and one
    /// transfer of every byte the command takes from it (as the conventional drive's
    /// collector reads a victim unit once for all its live slots), however many ranges or
    /// pieces hit that unit.
    fn copy(&mut self, sources: &[CopyRange], dest: Lba, fua: bool) -> u64 {
        let now = self.now_ns;
        let ub = self.p.unit_bytes();
        let c = self.front(self.p.ctrl_admin_ns);
        let (dz, doff0) = self.zone_of(dest);
        // Each piece's path, decided before anything is booked (booking changes where the
        // destination's data sits, not where the sources are).
        let mut plan = Vec::new();
        let mut doff = doff0;
        for (sz, soff, len) in self.copy_pieces(sources, doff0) {
            let src = self.locate(sz, soff);
            let dunit = doff / ub;
            let whole = doff % ub == 0 && soff % ub == 0 && len == ub;
            let same_die = src == Loc::Flash(self.die_of(dz, dunit));
            plan.push((sz, soff, len, src, whole && same_die));
            doff += len;
        }
        // One read per distinct source unit on flash, of every byte read from it (pieces
        // meant for copyback aside): (zone, unit, die, bytes, when the data is in the
        // controller once booked), in the order of first use.
        let mut reads: Vec<(u32, u64, usize, u64, Option<u64>)> = Vec::new();
        for &(sz, soff, len, src, whole_same_die) in &plan {
            if let (Loc::Flash(die), false) = (src, self.copyback && whole_same_die) {
                let unit = soff / ub;
                match reads.iter_mut().find(|r| r.0 == sz && r.1 == unit) {
                    Some(r) => r.3 += len,
                    None => reads.push((sz, unit, die, len, None)),
                }
            }
        }
        let mut doff = doff0;
        let mut done = c;
        for (sz, soff, len, src, whole_same_die) in plan {
            let dunit = doff / ub;
            let booked_here = self.zones[dz as usize].booked_bytes == doff;
            if self.copyback && whole_same_die && booked_here {
                let die = self.die_of(dz, dunit);
                let end = self.flash.copyback(die, now, c);
                let b = self.blocks_of(len);
                self.paths.copy_copyback.add(b, self.p.copyback_ns);
                let z = &mut self.zones[dz as usize];
                z.inflight.push_back((dunit, end));
                z.last_program_end_ns = z.last_program_end_ns.max(end);
                z.data_bytes = doff + len;
                z.booked_bytes = doff + len;
                done = done.max(end);
            } else {
                let (read, read_ns) = match src {
                    Loc::Flash(die) => {
                        self.copied_units_read_program += 1;
                        let unit = soff / ub;
                        let xfer = transfer_ns(len, self.p.channel_bytes_per_sec);
                        match reads.iter_mut().find(|r| r.0 == sz && r.1 == unit) {
                            // The unit's first piece books its read and counts the sensing;
                            // the others count their transfer.
                            Some(r) => match r.4 {
                                Some(end) => (end, xfer),
                                None => {
                                    let end = self.flash.read(r.2, now, c, r.3);
                                    r.4 = Some(end);
                                    (end, self.p.page_read_ns + xfer)
                                }
                            },
                            // A whole unit meant for copyback whose destination was not
                            // booked up to it after all: a read of its own.
                            None => (self.flash.read(die, now, c, len), self.read_die_ns(len)),
                        }
                    }
                    Loc::Buffer | Loc::Unwritten => (c, 0),
                };
                let (b, ns) = (self.blocks_of(len), read_ns + self.program_share_ns(len));
                self.paths.copy_read_program.add(b, ns);
                let ready = self.buffer.admit(c, len).max(read);
                self.add_data(dz, doff + len, ready);
                done = done.max(ready);
            }
            doff += len;
        }
        if fua {
            done = done
                .max(self.pad_partial(dz, done))
                .max(self.zones[dz as usize].last_program_end_ns);
        }
        done
    }

    /// TL_open: the zone's LogFBG starts empty (its blocks come pre-erased from the free
    /// pool, so no erase is booked for them; the pool's blocks were erased when freed, as a
    /// reset's and a superseded old group's are); the old block group keeps the old data for
    /// plugging and for reads at or above the write pointer.
    fn tl_open(&mut self, zone: u32, valid: &[u8]) -> u64 {
        let c = self.front(self.p.ctrl_admin_ns);
        let ahead = self.ahead_plugs(valid);
        // A zone TL-opened before whose LogFBG covers all its old data: that old block group
        // held nothing more and is freed, erased, as the LogFBG becomes the zone's block
        // group (paper 3.2.2). Its erases occupy the dies in the background.
        if self
            .zones
            .get(zone as usize)
            .is_some_and(|z| z.old_data_bytes > 0 && z.data_bytes >= z.old_data_bytes)
        {
            self.erase_old_group(zone, c);
        }
        if let Some(z) = self.zones.get_mut(zone as usize) {
            *z = ZoneTiming {
                old_data_bytes: z.data_bytes.max(z.old_data_bytes),
                sequencer: std::mem::take(&mut z.sequencer),
                ahead,
                ..ZoneTiming::default()
            };
            if z.ahead.is_some() && !self.ahead_zones.contains(&zone) {
                self.ahead_zones.push(zone);
            }
        }
        c
    }

    /// PPA-ordered plugging in the idle die time of `[from_ns, to_ns)`, which is past: every
    /// TL-opened zone under PP copies, on each of its dies, the next fully valid units ahead
    /// of its write pointer by copyback, in page order, into gaps of that die's calendar
    /// that start before `to_ns` and after the die's previous unit of the zone is programmed.
    fn plug_in_idle_time(&mut self, from_ns: u64, to_ns: u64) {
        // A zone whose data reached its capacity has nothing left to plug ahead.
        let cap = self.cap_bytes();
        for &z in &self.ahead_zones {
            if let Some(t) = self.zones.get_mut(z as usize) {
                if t.data_bytes >= cap {
                    t.ahead = None;
                }
            }
        }
        let zones = &self.zones;
        self.ahead_zones
            .retain(|&z| zones.get(z as usize).is_some_and(|t| t.ahead.is_some()));
        let slots = u64::from(self.p.dies_per_zone());
        for i in 0..self.ahead_zones.len() {
            let zone = self.ahead_zones[i];
            for slot in 0..slots {
                while self.plug_one_ahead(zone, slot, from_ns, to_ns) {}
            }
        }
    }

    /// Copies the next unit of `zone` on die slot `slot` ahead of the write pointer if its
    /// die has an idle gap for it in `[from_ns, to_ns)`; returns whether it did.
    fn plug_one_ahead(&mut self, zone: u32, slot: u64, from_ns: u64, to_ns: u64) -> bool {
        let ub = self.p.unit_bytes();
        let slots = u64::from(self.p.dies_per_zone());
        let Some(z) = self.zones.get(zone as usize) else {
            return false;
        };
        let Some(a) = z.ahead.as_deref() else {
            return false;
        };
        let Some(unit) = a.candidate(slot, slots, z.booked_bytes / ub) else {
            return false;
        };
        if unit * ub < z.data_bytes {
            return false;
        }
        // The die's previous unit of this zone: copied ahead, or booked (its program in
        // `inflight` until it has ended).
        let prev_end = match unit.checked_sub(slots) {
            Some(p) if a.is_done(p) => a.slot_end_ns(slot),
            Some(p) => {
                let i = z.inflight.partition_point(|&(u, _)| u < p);
                z.inflight
                    .get(i)
                    .filter(|&&(u, _)| u == p)
                    .map_or(0, |&(_, end)| end)
            }
            None => 0,
        };
        let die = self.die_of(zone, unit);
        let ready = from_ns.max(prev_end);
        if self.flash.copyback_start(die, ready) >= to_ns {
            return false;
        }
        let end = self.flash.plug_copyback(die, from_ns, ready);
        self.plugged_idle_bytes += ub;
        let b = self.blocks_of(ub);
        self.paths.plug_ahead.add(b, self.p.copyback_ns);
        if let Some(a) = self.zones[zone as usize].ahead.as_deref_mut() {
            a.mark_done(unit, slot, end);
        }
        true
    }

    /// LBA-ordered plugging of valid blocks at the zone's WP: a whole unit at a unit boundary
    /// is a copyback from the old block group on the same die (the mapping is static); a
    /// part of a unit is read from the old die and merged in the buffer with the host data.
    fn plug(&mut self, lba: Lba, blocks: u64) -> u64 {
        let now = self.now_ns;
        let ub = self.p.unit_bytes();
        let (zone, start) = self.zone_of(lba);
        let end_off = start + blocks * u64::from(self.geo.block_size);
        self.plugged_bytes += end_off - start;
        let mut off = start;
        let mut done = now;
        while off < end_off {
            let unit = off / ub;
            let len = ((unit + 1) * ub).min(end_off) - off;
            let die = self.die_of(zone, unit);
            let z = &mut self.zones[zone as usize];
            let booked_here = z.booked_bytes == off;
            let whole = off % ub == 0 && len == ub && booked_here;
            if whole && z.ahead.as_ref().is_some_and(|a| a.is_done(unit)) {
                // PPA-ordered plugging copied it already, in idle die time.
                z.data_bytes = off + len;
                z.booked_bytes = off + len;
            } else if whole && self.copyback {
                // Not counted in the zone's last program end, nor in the array's: neither a
                // FUA write nor a Flush waits for it (docs/DESIGN.md, "Timing model").
                let end = self.flash.plug_copyback(die, now, now);
                let b = self.blocks_of(len);
                self.paths.plug_copyback.add(b, self.p.copyback_ns);
                let z = &mut self.zones[zone as usize];
                z.inflight.push_back((unit, end));
                z.data_bytes = off + len;
                z.booked_bytes = off + len;
                done = done.max(end);
            } else {
                self.copied_units_read_program += 1;
                let read = self.flash.read(die, now, now, len);
                let (b, ns) = (
                    self.blocks_of(len),
                    self.read_die_ns(len) + self.program_share_ns(len),
                );
                self.paths.plug_merged.add(b, ns);
                let ready = self.buffer.admit(now, len).max(read);
                self.add_data(zone, off + len, ready);
                done = done.max(ready);
            }
            off += len;
        }
        done
    }

    /// Splits a copy into (source zone, source offset, bytes) pieces that each lie in one
    /// source unit and one destination unit, the destination starting at offset `doff`.
    fn copy_pieces(&self, sources: &[CopyRange], mut doff: u64) -> Vec<(u32, u64, u64)> {
        let ub = self.p.unit_bytes();
        let mut out = Vec::new();
        for s in sources {
            for (zone, mut off, mut len) in self.pieces(s.lba, s.blocks) {
                while len > 0 {
                    let n = len.min((doff / ub + 1) * ub - doff);
                    out.push((zone, off, n));
                    (off, len, doff) = (off + n, len - n, doff + n);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::profile::{timing_profile, zn540};
    use zns::ValidBitmap;

    /// Blocks per unit on femu-mlc (16 KiB units of 4 KiB blocks).
    const UNIT: u64 = 4;

    /// femu-mlc (16 dies, one zone over all of them) with four zones of `units` units each,
    /// plugging LBA-ordered (at the write pointer only).
    fn mlc(units: u64) -> ZonedTiming {
        let geo = Geometry {
            block_size: 4096,
            oob_size: 0,
            zone_count: 4,
            zone_size: units * UNIT,
            zone_capacity: units * UNIT,
            max_open: 4,
            max_active: 4,
            zasl_blocks: 64,
            mdts_blocks: 64,
            copy_max_ranges: 4,
            copy_max_range_blocks: 64,
            copy_max_blocks: 64,
            cross_zone_reads: false,
        };
        let p = timing_profile("femu-mlc").expect("profile");
        assert_eq!(p.unit_bytes(), UNIT * 4096);
        assert_eq!(p.dies_per_zone(), 16);
        let mut t = ZonedTiming::new(p, geo, false).expect("model");
        t.set_plug_order(PlugOrder::Lba);
        t
    }

    fn write(blocks: u64, lba: Lba, fua: bool) -> TimedCmd<'static> {
        TimedCmd::Write {
            lba,
            blocks,
            fua,
            host_data: true,
        }
    }

    /// Writes the first `units` units of `zone` at `at`; returns when the last write ends.
    fn fill(t: &mut ZonedTiming, zone: u32, units: u64, at: u64) -> u64 {
        let start = u64::from(zone) * t.geo.zone_size;
        let mut done = at;
        for lba in (start..start + units * UNIT).step_by(16) {
            done = done.max(t.submit(at, &write(16, lba, false)));
        }
        done
    }

    /// A bitmap of `units` units, every block valid but those of the units in `holes`.
    fn valid_but(units: u64, holes: &[u64]) -> ValidBitmap {
        let mut map = ValidBitmap::empty(units * UNIT);
        for b in 0..units * UNIT {
            map.set(b, !holes.contains(&(b / UNIT)));
        }
        map
    }

    /// Zone 0 full of old data on flash, then TL-opened with `valid`; returns the instant.
    fn tl_opened(t: &mut ZonedTiming, units: u64, valid: &ValidBitmap) -> u64 {
        fill(t, 0, units, 0);
        let on_flash = t.submit(0, &TimedCmd::Flush) + 1_000_000;
        t.submit(
            on_flash,
            &TimedCmd::TlOpen {
                zone: 0,
                valid: valid.as_bytes(),
            },
        );
        on_flash
    }

    #[test]
    fn a_flush_after_hole_writes_does_not_wait_for_their_plugs() {
        // Zone 0: 16 units on each die, all fully valid but unit 0. The hole write's program
        // goes to die 0; plugging then queues 15-16 copybacks on every die. A Flush waits for
        // the program only: the plugged units' data is in the old block group.
        let units = 256;
        let mut t = mlc(units);
        let now = tl_opened(&mut t, units, &valid_but(units, &[0]));
        t.submit(now, &write(UNIT, 0, false));
        let program_end = t.zones[0].last_program_end_ns;
        let plugs_end = t.submit(
            now,
            &TimedCmd::Plug {
                lba: UNIT,
                blocks: (units - 1) * UNIT,
            },
        );
        assert_eq!(t.counters().paths.plug_copyback.blocks, (units - 1) * UNIT);
        let flush = t.submit(now, &TimedCmd::Flush);
        let cb = t.p.copyback_ns;
        assert!(
            flush >= program_end,
            "the Flush ended at {flush} before the hole write's program at {program_end}"
        );
        assert!(
            plugs_end >= now + 15 * cb,
            "plugs ended at {plugs_end}, too early for the test"
        );
        assert!(
            flush < program_end + cb,
            "the Flush ended at {flush}, waiting for plugs (program end {program_end}, plugs end {plugs_end})"
        );
    }

    #[test]
    fn a_flush_still_waits_for_a_hole_write_queued_behind_plugs() {
        // Holes at unit 0 and unit 129 (die 1, behind the 8 copybacks that plug units 1-128
        // put on die 1): the Flush waits for unit 129's program, though plugs booked after it
        // go on longer.
        let units = 256;
        let mut t = mlc(units);
        let now = tl_opened(&mut t, units, &valid_but(units, &[0, 129]));
        t.submit(now, &write(UNIT, 0, false));
        let plug = |from: u64, to: u64| TimedCmd::Plug {
            lba: from * UNIT,
            blocks: (to - from) * UNIT,
        };
        t.submit(now, &plug(1, 129));
        t.submit(now, &write(UNIT, 129 * UNIT, false));
        let program_end = t.zones[0].last_program_end_ns;
        let (cb, tprog) = (t.p.copyback_ns, t.p.page_program_ns);
        assert!(
            program_end >= now + 8 * cb + tprog,
            "unit 129's program ended at {program_end}, not behind die 1's plugs"
        );
        let plugs_end = t.submit(now, &plug(130, units));
        let flush = t.submit(now, &TimedCmd::Flush);
        assert!(
            flush >= program_end,
            "the Flush ended at {flush} before unit 129's program at {program_end}"
        );
        assert!(
            flush < plugs_end,
            "the Flush ended at {flush}, after the plugs at {plugs_end}"
        );
    }

    #[test]
    fn a_fua_hole_write_waits_for_its_program_not_for_plugs() {
        // Dies 0-14 busy with 15 units of each of zones 1-3; zone 0's units 0-14 are plugged
        // behind them, and its hole, unit 15, goes to die 15, which is idle. The FUA write
        // ends with its program, long before those plugs.
        let units = 16;
        let mut t = mlc(units);
        let now = tl_opened(&mut t, units, &valid_but(units, &[15]));
        for zone in 1..4 {
            fill(&mut t, zone, 15, now);
        }
        let plugs_end = t.submit(
            now,
            &TimedCmd::Plug {
                lba: 0,
                blocks: 15 * UNIT,
            },
        );
        let fua = t.submit(now, &write(UNIT, 15 * UNIT, true));
        let program_end = t.zones[0].last_program_end_ns;
        assert!(
            fua >= program_end,
            "the FUA write ended at {fua} before its program at {program_end}"
        );
        assert!(
            fua < plugs_end,
            "the FUA write ended at {fua}, waiting for plugs (its program {program_end}, plugs {plugs_end})"
        );
    }

    #[test]
    fn appends_booked_out_of_landing_order_keep_the_buffer_whole() {
        // Regression: appends are booked as they complete. One that landed past an append
        // not yet booked completed the zone's first unit, whose program released a whole
        // unit's bytes while the buffer held a block less; the late append's booking then
        // took more out than the buffer held (a debug assertion, and in release builds a
        // block counted in the buffer for ever).
        let bs = 4096u64;
        let geo = Geometry {
            block_size: bs as u32,
            oob_size: 0,
            zone_count: 4,
            zone_size: 1024,
            zone_capacity: 1024,
            max_open: 2,
            max_active: 2,
            zasl_blocks: 32,
            mdts_blocks: 32,
            copy_max_ranges: 4,
            copy_max_range_blocks: 32,
            copy_max_blocks: 64,
            cross_zone_reads: false,
        };
        let p = zn540();
        let per_unit = p.unit_bytes() / bs;
        assert!(
            per_unit >= 3,
            "the test needs a unit of three blocks or more"
        );
        let mut t = ZonedTiming::new(p, geo, false).expect("model");
        let append = |lba| TimedCmd::Append {
            lba,
            blocks: 1,
            fua: false,
        };
        for lba in 0..per_unit - 2 {
            t.submit(0, &append(lba));
        }
        // The unit's last block is booked before the one below it, which comes long after
        // the unit's program ended.
        let programmed = t.submit(0, &append(per_unit - 1));
        assert_eq!(
            t.buffer.used_bytes(),
            per_unit * bs,
            "the gap came in with it"
        );
        t.submit(programmed + 1_000_000_000, &append(per_unit - 2));
        assert_eq!(
            t.buffer.used_bytes(),
            0,
            "every byte left with the unit's program"
        );
        assert_eq!(t.zones[0].data_bytes, per_unit * bs);
        assert_eq!(t.buffer.overcommits, 0);
    }
}
