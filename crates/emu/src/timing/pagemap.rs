//! The timing of a conventional (block-interface) SSD on the same flash array: a page-mapped
//! device FTL with greedy garbage collection. Plain synchronous discrete-event code like
//! `zoned`; `submit` books a command and returns when it completes.
//!
//! Mapping: every logical block (slot) maps to a slot of a flash unit (one page on every
//! plane of a die). Host writes fill units in the write buffer in arrival order; a full unit
//! is programmed on the next die in turn, into that die's open block. Overwritten and trimmed
//! slots become invalid. Before a die opens a new block with fewer than `GC_FREE_BLOCKS` free
//! blocks left, it collects garbage: the full block with the fewest valid slots (greedy) has
//! its valid slots read (tR plus channel transfer), rewritten into the die's collection block,
//! and is erased. That device time delays the host's programs on the die, the write buffer
//! fills, and host writes slow down: the write cliff of ZNS paper Fig. 1.
//!
//! The collector's reserve is counted in slots. Moved slots are packed into the collection
//! block slot by slot across victims (a unit is programmed once full), so any victim with an
//! invalid slot gains room; and the host opens a new block only while the room left to the
//! collector (free blocks and the rest of its block) still holds any victim's live slots.
//! When it does not, the host's program waits for collections on that die until it does; a
//! die with nothing left to collect passes the unit to the next die. A host write is never
//! dropped while the drive has spare flash anywhere.

use zns::Lba;

use crate::timing::buffer::WriteBuffer;
use crate::timing::flash::FlashArray;
use crate::timing::profile::TimingProfile;
use crate::timing::resource::{transfer_ns, Resource};
use crate::timing::zoned::TimingCounters;

/// Free blocks a die keeps before it opens another: one to open, one for collection.
pub const GC_FREE_BLOCKS: usize = 2;

const NONE: u64 = u64::MAX;
/// A logical block whose data is in the write buffer, in pending position `k`: `BUF | k`.
const BUF: u64 = 1 << 63;

/// A command to a conventional SSD.
#[derive(Clone, Copy, Debug)]
pub enum ConvCmd {
    Read { lba: Lba, blocks: u64 },
    Write { lba: Lba, blocks: u64, fua: bool },
    Trim { lba: Lba, blocks: u64 },
    Flush,
    Rejected,
}

/// Garbage-collection counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcCounters {
    pub host_slots: u64,
    pub moved_slots: u64,
    pub collections: u64,
    /// Host slots dropped because the die had no flash left to program them on. The spare
    /// `new` insists on keeps this at zero; it is counted so that a regression shows.
    pub lost_slots: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockState {
    Free,
    Open,
    Full,
}

/// The timing model of a page-mapped SSD.
pub struct PageMapped {
    p: TimingProfile,
    block_size: u64,
    slots_per_unit: u64,
    units_per_block: u64,
    blocks_per_die: u64,
    flash: FlashArray,
    ctrl: Resource,
    host_to_device: Resource,
    device_to_host: Resource,
    buffer: WriteBuffer,
    /// Logical block -> physical slot, `BUF | k`, or `NONE`.
    l2p: Vec<u64>,
    /// Physical slot -> logical block or `NONE`.
    p2l: Vec<u64>,
    valid: Vec<u32>,
    state: Vec<BlockState>,
    free: Vec<Vec<u64>>,
    /// Per die: (open block, next unit in it) for host data. Collected data has its own
    /// block, so a collection never eats into the host's.
    open: Vec<Option<(u64, u64)>>,
    /// Per die: (collection block, next slot in it). Slots, not units: moved slots from
    /// several victims share a unit, so a victim's last partial unit wastes nothing.
    gc_open: Vec<Option<(u64, u64)>>,
    /// Per die: when the moved slots waiting for the collection block's current unit to fill
    /// were all read (the unit's program may start then).
    gc_unit_ready_ns: Vec<u64>,
    next_die: usize,
    /// Host slots waiting in the buffer for their unit to fill: (lba, pending position).
    pending: Vec<(u64, u64)>,
    pending_seq: u64,
    pending_ready_ns: u64,
    now_ns: u64,
    commands: u64,
    gc: GcCounters,
}

impl PageMapped {
    /// A drive exposing `logical_blocks` blocks of `block_size` bytes on the array of `p`.
    /// Refuses a logical size that leaves the collector no room.
    pub fn new(p: TimingProfile, block_size: u32, logical_blocks: u64) -> Result<Self, String> {
        p.validate()?;
        let bs = u64::from(block_size);
        if bs == 0 || !p.unit_bytes().is_multiple_of(bs) {
            return Err(format!("a {bs}-byte block does not divide the flash unit"));
        }
        let spu = p.unit_bytes() / bs;
        let upb = u64::from(p.pages_per_block);
        let bpd = u64::from(p.blocks_per_die);
        let dies = u64::from(p.dies());
        let reserve = dies * GC_FREE_BLOCKS as u64 * upb * spu;
        let physical = dies * bpd * upb * spu;
        if logical_blocks == 0 || logical_blocks + reserve > physical {
            return Err(format!(
                "{logical_blocks} logical blocks leave no spare flash: the array has {physical} slots and keeps {reserve} for collection"
            ));
        }
        Ok(PageMapped {
            p,
            block_size: bs,
            slots_per_unit: spu,
            units_per_block: upb,
            blocks_per_die: bpd,
            flash: FlashArray::new(p, false),
            ctrl: Resource::new(false),
            host_to_device: Resource::new(false),
            device_to_host: Resource::new(false),
            buffer: WriteBuffer::new(p.write_buffer_bytes.max(p.unit_bytes() * 4)),
            l2p: vec![NONE; logical_blocks as usize],
            p2l: vec![NONE; physical as usize],
            valid: vec![0; (dies * bpd) as usize],
            state: vec![BlockState::Free; (dies * bpd) as usize],
            free: (0..dies)
                .map(|d| (0..bpd).rev().map(|b| d * bpd + b).collect())
                .collect(),
            open: vec![None; dies as usize],
            gc_open: vec![None; dies as usize],
            gc_unit_ready_ns: vec![0; dies as usize],
            next_die: 0,
            pending: Vec::new(),
            pending_seq: 0,
            pending_ready_ns: 0,
            now_ns: 0,
            commands: 0,
            gc: GcCounters::default(),
        })
    }

    pub fn logical_blocks(&self) -> u64 {
        self.l2p.len() as u64
    }

    pub fn gc_counters(&self) -> GcCounters {
        self.gc
    }

    pub fn counters(&self) -> TimingCounters {
        TimingCounters {
            flash: self.flash.counters(),
            commands: self.commands,
            padded_programs: 0,
            buffer_waits: self.buffer.waits,
            buffer_wait_ns: self.buffer.wait_ns,
            buffer_overcommits: self.buffer.overcommits,
            now_ns: self.now_ns,
            die_booked_ahead_ns: self.flash.die_booked_after_ns(self.now_ns),
            ..TimingCounters::default()
        }
    }

    /// Books `cmd` submitted at `now_ns` (non-decreasing) and returns when it completes.
    pub fn submit(&mut self, now_ns: u64, cmd: &ConvCmd) -> u64 {
        let now_ns = now_ns.max(self.now_ns);
        self.now_ns = now_ns;
        self.commands += 1;
        let done = match *cmd {
            ConvCmd::Read { lba, blocks } => self.read(lba, blocks),
            ConvCmd::Write { lba, blocks, fua } => self.write(lba, blocks, fua),
            ConvCmd::Trim { lba, blocks } => {
                for l in lba..lba + blocks {
                    self.invalidate(l);
                    self.l2p[l as usize] = NONE;
                }
                self.front(self.p.ctrl_admin_ns)
            }
            ConvCmd::Flush => {
                let c = self.front(self.p.ctrl_admin_ns);
                if !self.pending.is_empty() {
                    self.program_pending(c);
                }
                c.max(self.flash.last_program_end_ns())
            }
            ConvCmd::Rejected => self.front(self.p.ctrl_admin_ns),
        };
        done + self.p.complete_ns
    }

    fn front(&mut self, ctrl_ns: u64) -> u64 {
        let now = self.now_ns;
        self.ctrl.reserve(now, now + self.p.submit_ns, ctrl_ns).1
    }

    fn block_of(&self, slot: u64) -> u64 {
        slot / (self.units_per_block * self.slots_per_unit)
    }

    fn invalidate(&mut self, lba: u64) {
        let old = self.l2p[lba as usize];
        if old != NONE && old & BUF == 0 {
            self.p2l[old as usize] = NONE;
            let b = self.block_of(old) as usize;
            self.valid[b] -= 1;
        }
    }

    fn write(&mut self, lba: Lba, blocks: u64, fua: bool) -> u64 {
        let now = self.now_ns;
        let bytes = blocks * self.block_size;
        let c = self.front(self.p.ctrl_write_ns);
        let admitted = self.buffer.admit(c, bytes);
        let dur = transfer_ns(bytes, self.p.host_bytes_per_sec);
        let ready = self.host_to_device.reserve(now, admitted, dur).1;
        for l in lba..lba + blocks {
            self.invalidate(l);
            self.pending_seq += 1;
            self.l2p[l as usize] = BUF | self.pending_seq;
            self.pending.push((l, self.pending_seq));
            self.pending_ready_ns = self.pending_ready_ns.max(ready);
            if self.pending.len() as u64 == self.slots_per_unit {
                self.program_pending(ready);
            }
        }
        self.gc.host_slots += blocks;
        if fua && !self.pending.is_empty() {
            self.program_pending(ready);
        }
        if fua {
            return ready.max(self.flash.last_program_end_ns());
        }
        ready
    }

    /// Programs the pending host slots as one unit on the next die in turn (or, when that die
    /// has nothing left to collect, the first die after it with room).
    fn program_pending(&mut self, ready_ns: u64) {
        let dies = self.open.len();
        let slots = std::mem::take(&mut self.pending);
        let ready = ready_ns.max(self.pending_ready_ns);
        let bytes = slots.len() as u64 * self.block_size;
        let mut placed = None;
        for i in 0..dies {
            let die = (self.next_die + i) % dies;
            if let Some(first) = self.take_unit(die, ready) {
                placed = Some((die, first));
                break;
            }
        }
        self.next_die = (self.next_die + 1) % dies;
        let Some((die, first)) = placed else {
            // No die has flash left at all (`new` keeps spare so that this never happens):
            // the slots still waiting are lost, and say so.
            for (lba, seq) in &slots {
                if self.l2p[*lba as usize] == BUF | seq {
                    self.l2p[*lba as usize] = NONE;
                    self.gc.lost_slots += 1;
                }
            }
            self.buffer.release_at(ready, bytes);
            return;
        };
        for (i, (lba, seq)) in slots.iter().enumerate() {
            // A slot overwritten while it waited is programmed but never mapped.
            if self.l2p[*lba as usize] == BUF | seq {
                self.map(*lba, first + i as u64);
            }
        }
        let end = self
            .flash
            .program(die, self.now_ns, ready, self.p.unit_bytes());
        self.buffer.release_at(end, bytes);
    }

    fn map(&mut self, lba: u64, slot: u64) {
        self.l2p[lba as usize] = slot;
        self.p2l[slot as usize] = lba;
        let b = self.block_of(slot) as usize;
        self.valid[b] += 1;
    }

    fn slots_per_block(&self) -> u64 {
        self.units_per_block * self.slots_per_unit
    }

    /// Slots the collector on `die` can still write: its free blocks and the rest of its
    /// collection block.
    fn gc_room_slots(&self, die: usize) -> u64 {
        let spb = self.slots_per_block();
        self.free[die].len() as u64 * spb + self.gc_open[die].map_or(0, |(_, next)| spb - next)
    }

    /// Whether the host may open a new block on `die`: the room it leaves the collector still
    /// holds the live slots of any victim that gains room (at most a block less one slot),
    /// so collection can always go on.
    fn host_may_open(&self, die: usize) -> bool {
        let spb = self.slots_per_block();
        !self.free[die].is_empty() && self.gc_room_slots(die) >= 2 * spb - 1
    }

    /// The first slot of the next unit of die `die`'s host open block. Opening a block first
    /// collects garbage while free blocks are short, then, if the collector would be left
    /// too little room, goes on collecting (the host's program waits for that device time).
    /// `None` when the die has nothing left to collect.
    fn take_unit(&mut self, die: usize, ready_ns: u64) -> Option<u64> {
        let (b, unit) = match self.open[die] {
            Some(c) => c,
            None => {
                self.collect_until_free(die, ready_ns);
                let limit = self.blocks_per_die * self.slots_per_block();
                let mut collections = 0;
                while !self.host_may_open(die) {
                    if !self.collect(die, ready_ns) {
                        return None;
                    }
                    collections += 1;
                    assert!(
                        collections <= limit,
                        "die {die}: collection does not converge"
                    );
                }
                let b = self.free[die].pop()?;
                self.state[b as usize] = BlockState::Open;
                (b, 0)
            }
        };
        self.open[die] = if unit + 1 == self.units_per_block {
            self.state[b as usize] = BlockState::Full;
            None
        } else {
            Some((b, unit + 1))
        };
        Some((b * self.units_per_block + unit) * self.slots_per_unit)
    }

    /// The next slot of die `die`'s collection block for a slot read by `read_end_ns`;
    /// programs the block's unit once it is full.
    fn take_gc_slot(&mut self, die: usize, read_end_ns: u64) -> Option<u64> {
        let (b, next) = match self.gc_open[die] {
            Some(c) => c,
            None => {
                let b = self.free[die].pop()?;
                self.state[b as usize] = BlockState::Open;
                (b, 0)
            }
        };
        let ready = self.gc_unit_ready_ns[die].max(read_end_ns);
        self.gc_unit_ready_ns[die] = ready;
        if (next + 1).is_multiple_of(self.slots_per_unit) {
            self.flash
                .program(die, self.now_ns, ready, self.p.unit_bytes());
            self.gc_unit_ready_ns[die] = 0;
        }
        self.gc_open[die] = if next + 1 == self.slots_per_block() {
            self.state[b as usize] = BlockState::Full;
            None
        } else {
            Some((b, next + 1))
        };
        Some(b * self.slots_per_block() + next)
    }

    /// Collects on `die` until it has `GC_FREE_BLOCKS` free blocks, or nothing is left to
    /// reclaim. Each accepted collection gains at least one slot of room, and a die has
    /// `blocks_per_die` blocks of slots, which bounds the loop.
    fn collect_until_free(&mut self, die: usize, ready_ns: u64) {
        let limit = self.blocks_per_die * self.slots_per_block();
        let mut collections = 0;
        while self.free[die].len() < GC_FREE_BLOCKS && self.collect(die, ready_ns) {
            collections += 1;
            assert!(
                collections <= limit,
                "die {die}: collection does not converge"
            );
        }
    }

    /// Greedy collection on die `die`: moves the valid slots of its full block with the
    /// fewest into the die's collection block and erases it. False when nothing can be
    /// reclaimed (every full block is valid throughout) or the victim does not fit.
    fn collect(&mut self, die: usize, ready_ns: u64) -> bool {
        let bpd = self.blocks_per_die;
        let first = die as u64 * bpd;
        let victim = (first..first + bpd)
            .filter(|&b| self.state[b as usize] == BlockState::Full)
            .min_by_key(|&b| self.valid[b as usize]);
        let Some(victim) = victim else {
            return false;
        };
        let live = u64::from(self.valid[victim as usize]);
        if live >= self.slots_per_block() || live > self.gc_room_slots(die) {
            return false;
        }
        self.gc.collections += 1;
        let now = self.now_ns;
        let mut moving = Vec::new();
        let mut read_end = ready_ns;
        for unit in 0..self.units_per_block {
            let base = (victim * self.units_per_block + unit) * self.slots_per_unit;
            let live: Vec<u64> = (base..base + self.slots_per_unit)
                .filter(|&s| self.p2l[s as usize] != NONE)
                .collect();
            if live.is_empty() {
                continue;
            }
            let bytes = live.len() as u64 * self.block_size;
            read_end = read_end.max(self.flash.read(die, now, ready_ns, bytes));
            moving.extend(live);
        }
        // The victim's slots are all invalid once moved; it is erased and freed.
        for s in moving {
            // The room check above makes this always succeed; were it to fail, the victim
            // keeps its remaining slots mapped and stays a full block.
            let Some(dst) = self.take_gc_slot(die, read_end) else {
                return false;
            };
            let lba = self.p2l[s as usize];
            self.p2l[s as usize] = NONE;
            self.valid[victim as usize] -= 1;
            self.map(lba, dst);
            self.gc.moved_slots += 1;
        }
        self.flash.erase(die, now, read_end, 1);
        self.state[victim as usize] = BlockState::Free;
        self.free[die].insert(0, victim);
        true
    }

    fn read(&mut self, lba: Lba, blocks: u64) -> u64 {
        let now = self.now_ns;
        let c = self.front(self.p.ctrl_read_ns);
        // Consecutive logical blocks in one unit are one page read.
        let mut units: Vec<(u64, u64)> = Vec::new();
        for l in lba..lba + blocks {
            let s = self.l2p[l as usize];
            if s == NONE || s & BUF != 0 {
                continue;
            }
            let unit = s / self.slots_per_unit;
            match units.last_mut() {
                Some((u, bytes)) if *u == unit => *bytes += self.block_size,
                _ => units.push((unit, self.block_size)),
            }
        }
        let mut ready = c;
        for (unit, bytes) in units {
            let die = (self.block_of(unit * self.slots_per_unit) / self.blocks_per_die) as usize;
            ready = ready.max(self.flash.read(die, now, c, bytes));
        }
        let dur = transfer_ns(blocks * self.block_size, self.p.host_bytes_per_sec);
        self.device_to_host.reserve(now, ready, dur).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::profile::zn540;

    fn small() -> TimingProfile {
        TimingProfile {
            channels: 2,
            dies_per_channel: 1,
            pages_per_block: 4,
            blocks_per_die: 16,
            ..zn540()
        }
    }

    #[test]
    fn overwrites_force_collection_and_mappings_stay_consistent() {
        let p = small();
        let spu = p.unit_bytes() / 4096;
        let physical = 2 * 16 * 4 * spu;
        let logical = physical * 3 / 4;
        let mut m = PageMapped::new(p, 4096, logical).expect("model");
        let mut rng = zns::SimRng::new(1);
        let mut now = 0;
        for _ in 0..4 * logical / 4 {
            let lba = rng.below(logical / 4) * 4;
            now = m.submit(
                now,
                &ConvCmd::Write {
                    lba,
                    blocks: 4,
                    fua: false,
                },
            );
        }
        let gc = m.gc_counters();
        assert!(gc.collections > 0 && gc.moved_slots > 0, "{gc:?}");
        // Every mapped logical block points at a slot that points back at it.
        for (l, &s) in m.l2p.iter().enumerate() {
            if s != NONE && s & BUF == 0 {
                assert_eq!(m.p2l[s as usize], l as u64);
            }
        }
        let valid: u64 = m.valid.iter().map(|&v| u64::from(v)).sum();
        let mapped = m.l2p.iter().filter(|&&s| s != NONE && s & BUF == 0).count() as u64;
        assert_eq!(valid, mapped);
        assert!(m.submit(now, &ConvCmd::Flush) >= now);
        assert!(PageMapped::new(p, 4096, physical).is_err());
    }
}

// Regression: the collector used to give up after four collections in a row that left the
// die's free count unchanged. Near full, most collections are like that (the victim's live
// data takes a fresh block while the victim is freed), so it stopped early, the host took the
// last free block, and later units found none and were silently dropped. The dropped writes
// were never programmed nor counted, so write amplification came out far below greedy's and
// rose with spare (1.7 at 5%, 2.9 at 28% here) instead of falling.
#[cfg(test)]
mod uniform_overwrite_tests {
    use super::*;
    use crate::timing::profile::zn540;

    const DIES: u64 = 4;
    const UNITS_PER_BLOCK: u64 = 16;
    const BLOCKS_PER_DIE: u64 = 256;

    fn array() -> TimingProfile {
        TimingProfile {
            channels: 2,
            dies_per_channel: 2,
            pages_per_block: UNITS_PER_BLOCK as u32,
            blocks_per_die: BLOCKS_PER_DIE as u32,
            ..zn540()
        }
    }

    fn write(m: &mut PageMapped, now: u64, lba: u64, blocks: u64) -> u64 {
        let fua = false;
        m.submit(now, &ConvCmd::Write { lba, blocks, fua })
    }

    /// Fills a drive of `op_percent` spare, overwrites it twice at random (seeded), then
    /// returns the write amplification of a third random overwrite, after checking that
    /// every logical block is mapped to a slot that maps back to it.
    fn steady_wa(op_percent: u64, seed: u64) -> f64 {
        let p = array();
        let spu = p.unit_bytes() / 4096;
        let physical = DIES * BLOCKS_PER_DIE * UNITS_PER_BLOCK * spu;
        let logical = physical * 100 / (100 + op_percent);
        let mut m = PageMapped::new(p, 4096, logical).expect("model");
        let mut now = 0;
        for lba in (0..logical).step_by(spu as usize) {
            now = write(&mut m, now, lba, spu.min(logical - lba));
        }
        let mut rng = zns::SimRng::new(seed);
        for _ in 0..2 * logical {
            now = write(&mut m, now, rng.below(logical), 1);
        }
        let before = m.gc_counters();
        for _ in 0..logical {
            now = write(&mut m, now, rng.below(logical), 1);
        }
        m.submit(now, &ConvCmd::Flush);
        let gc = m.gc_counters();
        assert_eq!(gc.lost_slots, 0, "op {op_percent}% seed {seed}: {gc:?}");
        for (lba, &slot) in m.l2p.iter().enumerate() {
            assert!(
                slot != NONE && slot & BUF == 0,
                "op {op_percent}% seed {seed}: lba {lba} unmapped"
            );
            assert_eq!(
                m.p2l[slot as usize], lba as u64,
                "op {op_percent}% seed {seed}"
            );
        }
        let valid: u64 = m.valid.iter().map(|&v| u64::from(v)).sum();
        assert_eq!(valid, logical, "op {op_percent}% seed {seed}");
        let host = gc.host_slots - before.host_slots;
        assert_eq!(host, logical);
        (host + gc.moved_slots - before.moved_slots) as f64 / host as f64
    }

    #[test]
    fn uniform_overwrites_amplify_near_greedy_and_less_with_more_spare() {
        let seed = 7;
        let mut last = f64::INFINITY;
        for op_percent in [5, 7, 10, 14, 20, 28] {
            let wa = steady_wa(op_percent, seed);
            // The large-array figure for greedy under uniform writes, (1 + r) / 2r. This small
            // drive keeps two free and two open blocks per die out of its spare, so it
            // amplifies more than that, most at small spare; it can never amplify less.
            let r = op_percent as f64 / 100.0;
            let analytic = (1.0 + r) / (2.0 * r);
            assert!(
                (0.9 * analytic..2.5 * analytic).contains(&wa),
                "op {op_percent}% seed {seed}: wa {wa:.2}, greedy {analytic:.2}"
            );
            assert!(
                wa <= last * 1.03,
                "op {op_percent}% seed {seed}: wa {wa:.2} above {last:.2}"
            );
            last = wa;
        }
    }
}

// Regression: the collector's reserve was counted in whole blocks and whole units. A victim
// had to gain a whole unit once its live slots were repacked victim by victim, and the host
// was refused a block (its unit dropped, counted in `lost_slots`) whenever the die had fewer
// than two free blocks and no collection qualified. With the small erase blocks of a scaled
// 1 GiB drive (18 units per block, 64 blocks per die) and 5% or 7% spare, invalid slots were
// spread a few per block, no victim gained a unit, and host writes were dropped (816 slots
// in `bench block-overwrite.fio --target conv --op 7 --size 1g`). The host must instead
// wait for collection and no write may ever be dropped.
#[cfg(test)]
mod small_spare_tests {
    use super::*;
    use crate::timing::profile::zn540;

    const DIES: u64 = 2;
    const UNITS_PER_BLOCK: u64 = 18;
    const BLOCKS_PER_DIE: u64 = 64;

    /// Fills a drive of `op_percent` spare, overwrites it three times at random (seeded) in
    /// single blocks, and returns its counters after checking every mapping both ways.
    fn overwrite(op_percent: u64, seed: u64) -> GcCounters {
        let p = TimingProfile {
            channels: DIES as u32,
            dies_per_channel: 1,
            pages_per_block: UNITS_PER_BLOCK as u32,
            blocks_per_die: BLOCKS_PER_DIE as u32,
            ..zn540()
        };
        let spu = p.unit_bytes() / 4096;
        let physical = DIES * BLOCKS_PER_DIE * UNITS_PER_BLOCK * spu;
        let logical = physical * 100 / (100 + op_percent);
        let mut m = PageMapped::new(p, 4096, logical).expect("model");
        let mut now = 0;
        for lba in (0..logical).step_by(spu as usize) {
            let blocks = spu.min(logical - lba);
            let fua = false;
            now = m.submit(now, &ConvCmd::Write { lba, blocks, fua });
        }
        let mut rng = zns::SimRng::new(seed);
        for _ in 0..3 * logical {
            let (lba, blocks, fua) = (rng.below(logical), 1, false);
            now = m.submit(now, &ConvCmd::Write { lba, blocks, fua });
        }
        m.submit(now, &ConvCmd::Flush);
        for (lba, &slot) in m.l2p.iter().enumerate() {
            let ctx = format!("op {op_percent}% seed {seed}: lba {lba}");
            assert!(slot != NONE && slot & BUF == 0, "{ctx} unmapped");
            assert_eq!(m.p2l[slot as usize], lba as u64, "{ctx}");
        }
        let valid: u64 = m.valid.iter().map(|&v| u64::from(v)).sum();
        assert_eq!(valid, logical, "op {op_percent}% seed {seed}");
        m.gc_counters()
    }

    #[test]
    fn small_spare_on_small_blocks_never_drops_a_host_write() {
        for seed in [3] {
            for op_percent in [5, 7] {
                let gc = overwrite(op_percent, seed);
                assert_eq!(gc.lost_slots, 0, "op {op_percent}% seed {seed}: {gc:?}");
                assert!(gc.collections > 0, "op {op_percent}% seed {seed}: {gc:?}");
            }
        }
    }
}
