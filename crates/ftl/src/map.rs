//! The FTL's in-memory state as plain synchronous code: the logical-to-physical mapping (L2P),
//! per-LBA sequence numbers, the reverse map (P2L), per-zone valid counts and allocation.
//! The async volume does the I/O; every decision about where data goes and what is valid is
//! made here and tested directly.
//!
//! Memory: 4 bytes (L2P) + 8 bytes (sequence) + 3 bytes (interval history) per logical block,
//! 4 bytes (P2L) per physical block, about 19 bytes per 4 KiB block (0.46%), plus 120 bytes
//! per zone (and, in summary mode, the tags awaiting a summary: at most one summary block's
//! worth per open zone).
//!
//! The decisions built on this state (which zone a stream writes next, what a failed write
//! or a flush does) are in plan.rs.
//!
//! Ordering rule: every user write or trim takes a sequence number when it is submitted; a
//! completion only changes the mapping of an LBA if its sequence number is newer than the
//! LBA's, so a write that completes late never overrides a newer one, and a GC copy (which
//! keeps the original sequence number) only lands if the block it copied is still current.

use std::collections::{BTreeMap, VecDeque};

use crate::durability::Durability;
use crate::layout::{Layout, VictimPolicy};
use crate::plan::Throttle;
use crate::prefix::Prefix;
use crate::records::Tag;
use crate::separation::{IntervalHistory, LifespanStats, Placement};

/// L2P value of a logical block with no data (reads as zeros).
pub const UNMAPPED: u32 = u32::MAX;
/// P2L value of a physical block that holds nothing valid.
pub(crate) const P_INVALID: u32 = u32::MAX;
/// P2L value of a physical block holding a live trim record.
pub(crate) const P_TRIM: u32 = u32::MAX - 1;

/// Live trim records may take this fraction (one over it) of the collectable spare before
/// garbage collection asks for a checkpoint that frees them (`Mapping::trims_pin_space`).
pub const TRIM_RECORDS_SPARE_DIVISOR: u64 = 4;

/// Logical blocks per mapping page, the unit a delta checkpoint copies (docs/FORMAT.md,
/// "Delta checkpoint"): 256 entries encode to 3 KiB (4-byte L2P entry and 8-byte sequence
/// number each) and map 1 MiB of 4 KiB blocks. Small enough that a sequential or skewed
/// writer dirties little beside what it changed, large enough that the 4-byte page index
/// is 0.13% of a page and the dirty bits take one bit per MiB of volume. (Under uniform
/// random writes nearly every page is dirty by the time a checkpoint is due, whatever the
/// page size, and the full checkpoint is written instead.)
pub const MAP_PAGE_LBAS: u64 = 256;

/// A delta checkpoint comes no sooner than after this fraction (one over it) of the
/// periodic interval's user blocks, however little changed: each checkpoint also flushes
/// the device.
pub const DELTA_INTERVAL_DIVISOR: u64 = 16;

/// `MountOptions::checkpoint_scan_intervals` as the tests and `zonestack bench ftl-mount`
/// use it (`Mapping::scan_bound_intervals`; off by default): a periodic checkpoint is also
/// due once the blocks written to data zones since the last one, user blocks and garbage
/// collection's copies together, reach this many intervals
/// (`MountOptions::checkpoint_every_zones` zones' worth each). A mount after a crash scans
/// what was written since the newest checkpoint, so this bounds that scan whatever the
/// write amplification. Such a checkpoint comes before the user blocks since paid for it:
/// while the write amplification over an interval exceeds this, checkpoints cost that
/// write amplification over this times the budget (`plan::CHECKPOINT_PERCENT_MAX`). With
/// full checkpoints of a fixed size no rule keeps both a bound on the scan and the budget
/// under any write amplification: the scan is at least the write amplification times the
/// user blocks that pay for one checkpoint, and under uniform random writes every mapping
/// page is dirty long before (a delta is no smaller than a full checkpoint). The budget is
/// what the default keeps (docs/BENCHMARKS.md, "Mount scan bound").
pub const SCAN_BOUND_INTERVALS: u32 = 4;

/// Where the next delta checkpoint would go: the chain of deltas after the newest full
/// checkpoint, in the same slot (None in `Mapping::delta_chain`: the next is full).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaChain {
    /// Blocks of the slot left after the chain's last checkpoint.
    pub room_blocks: u64,
    /// Blocks the deltas since the full checkpoint took.
    pub delta_blocks: u64,
}

/// What the next checkpoint writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CkptKind {
    /// The whole mapping, into the other slot.
    Full,
    /// The dirty mapping pages, after the chain's last checkpoint in the same slot.
    Delta,
}

/// The write streams: separate open zones so data of different lifetimes is not mixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    Hot,
    Cold,
    /// Garbage collection copies of recently written (hot) blocks.
    Gc,
    /// Garbage collection copies of cold blocks.
    GcCold,
}

impl Stream {
    /// Every stream, in `index` order.
    pub const ALL: [Stream; 4] = [Stream::Hot, Stream::Cold, Stream::Gc, Stream::GcCold];

    /// The stream's position in `ALL` (and in per-stream counters).
    pub fn index(self) -> usize {
        match self {
            Stream::Hot => 0,
            Stream::Cold => 1,
            Stream::Gc => 2,
            Stream::GcCold => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Stream::Hot => "user",
            Stream::Cold => "user_cold",
            Stream::Gc => "gc",
            Stream::GcCold => "gc_cold",
        }
    }

    pub fn is_gc(self) -> bool {
        matches!(self, Stream::Gc | Stream::GcCold)
    }
}

/// What a data zone is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneUse {
    Free,
    Open(Stream),
    Full,
}

/// Bookkeeping for one data zone.
#[derive(Clone, Debug)]
pub struct DataZone {
    pub use_: ZoneUse,
    pub generation: u64,
    /// Blocks handed out (the header included); the host write pointer in Zone Write mode.
    pub reserved: u64,
    /// Valid data blocks plus live trim records.
    pub valid: u64,
    pub inflight: u32,
    pub prefix: Prefix,
    /// Sequence number of the newest write that landed here (age for cost-benefit).
    pub last_seq: u64,
    /// Reads in progress on this zone; a reset waits for them.
    pub readers: u32,
    /// Garbage collection has picked this zone.
    pub collecting: bool,
    /// The device retired the zone (Read Only or Offline): it is never written or reset again;
    /// garbage collection may still move data out of a Read Only one.
    pub retired: bool,
    /// The zone is Offline: its blocks cannot be read, and entries into it are lost data.
    pub lost: bool,
    /// In-band summary blocks written to the zone (summary mode); with the header, the blocks
    /// that never hold data. Unknown (0) for zones a mount did not scan.
    pub summaries: u64,
    /// The stream the zone was last opened for; None for zones a mount found written (their
    /// stream is not recorded), which count as cold (`Mapping::zone_is_hot`).
    pub opened_for: Option<Stream>,
    /// The snapshot count when a write last landed here (or threaded logging took it): the
    /// newest durable checkpoint covers the zone's contents when its mark is above this.
    pub written_mark: u64,
}

/// A live trim record: the snapshot count when it was written, and its sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimLive {
    pub mark: u64,
    pub seq: u64,
}

/// Counters for write amplification and GC activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub user_blocks: u64,
    pub gc_blocks: u64,
    pub gc_zones: u64,
    pub trims: u64,
    pub meta_blocks: u64,
    /// Blocks written (user data and GC copies) per stream, in `Stream::ALL` order.
    pub stream_blocks: [u64; 4],
    /// Zones opened per stream, in `Stream::ALL` order.
    pub stream_zones: [u64; 4],
    /// Times a user write waited for garbage collection's copies (`plan::Throttle`).
    pub throttle_waits: u64,
    /// Garbage-collection rounds, and those that flushed the device before their resets
    /// (the others found their copies and the newer versions durable already).
    pub gc_rounds: u64,
    pub gc_round_flushes: u64,
    /// Rounds whose copies ran while the previous round's flush and resets were under way.
    pub gc_rounds_overlapped: u64,
    /// Times a GC lane opened its next zone while copies to its full one were in flight.
    pub gc_lane_zones_chained: u64,
    /// User writes the device refused behind a delayed write ahead of them in their zone and
    /// that went again at the same offset once it had landed (io.rs, several writes in
    /// flight).
    pub user_writes_resent: u64,
    /// User writes given up in a zone sealed by a failed write ahead of them and written to
    /// another zone.
    pub user_writes_resubmitted: u64,
    /// Collection that runs on across rounds (`MountOptions::gc_run_on`): rounds planned
    /// counting zones the previous round's finish was about to reset, and times a GC lane
    /// found no free zone and waited for those resets.
    pub gc_rounds_on_owed_resets: u64,
    pub gc_waits_for_resets: u64,
    /// Rounds planned on such resets that ended early, the device having retired some of
    /// those zones instead (`Mapping::end_round_early`).
    pub gc_rounds_ended_early: u64,
    /// Copies whose source had been overwritten or trimmed by the time they completed: blocks
    /// written for nothing (counted in `gc_blocks` too).
    pub gc_stale_copies: u64,
    /// Victims whose copies all went to one GC stream because the free zones and the GC
    /// zones' room could not take them split by temperature (`Mapping::plan_round`).
    pub gc_merged_victims: u64,
    /// Victims taken by garbage collection by the stream their zone was last opened for, in
    /// `Stream::ALL` order (zones a mount found written count as cold user zones), and the
    /// valid blocks (live trim records included) they held when taken. Their ratio over a
    /// phase is how full each stream's zones were when collected: what separation buys.
    pub gc_victims: [u64; 4],
    pub gc_victim_valid: [u64; 4],
    /// Serial collection (`MountOptions::serial_collection`): victims collected, and the
    /// model time spent in their copies, their checkpoints and their resets (each victim's
    /// phases, as the ZNS+ paper's Fig. 6 splits a segment compaction).
    pub serial_victims: u64,
    pub serial_copy_ns: u64,
    pub serial_checkpoint_ns: u64,
    pub serial_reset_ns: u64,
    /// Delta checkpoints written, and their bytes (whole blocks).
    pub delta_checkpoints: u64,
    pub delta_checkpoint_bytes: u64,
}

/// Live contents of a zone: (pba, lba) of valid data, (pba, mark) of live trim records.
pub type LiveBlocks = (Vec<(u32, u64)>, Vec<(u32, u64)>);

/// A reservation of blocks in a stream's open zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub zone: u32,
    /// Offset in the zone (meaningful in Zone Write mode; appends learn theirs).
    pub offset: u64,
    pub blocks: u64,
}

/// The mapping state.
pub struct Mapping {
    pub layout: Layout,
    pub(crate) l2p: Vec<u32>,
    pub(crate) seq: Vec<u64>,
    pub(crate) p2l: Vec<u32>,
    pub(crate) zones: Vec<DataZone>,
    pub(crate) free: VecDeque<u32>,
    /// The open data zones (`ZoneUse::Open`), ascending: kept as zones open and fill, are
    /// sealed or retired, so that the write path's per-write questions about the open zones
    /// (`Mapping::open_dies`) cost O(open zones) rather than a scan of every data zone. A mount
    /// opens none (zones it finds written are full).
    pub(crate) open: Vec<u32>,
    pub(crate) next_seq: u64,
    /// Live trim records: pba -> the snapshot count when the record was written. A record
    /// is needed until a checkpoint snapshotted after it is durable.
    pub(crate) trims: BTreeMap<u32, TrimLive>,
    /// Checkpoint snapshots taken.
    pub(crate) snapshots: u64,
    /// Sequence number at the last durable checkpoint's snapshot.
    pub(crate) ckpt_seq: u64,
    /// User data blocks written since the last checkpoint's snapshot: the periodic
    /// checkpoint comes once these reach the interval (`Mapping::checkpoint_due`), so that
    /// checkpoints cost a fixed share of the user's writes, counted as `Counters::user_blocks`
    /// counts them. Zones are not counted: a zone holds fewer user blocks than its size (its
    /// header, summary blocks, trim records, a zone sealed part-full), and garbage
    /// collection's copies would make the share grow with write amplification. A mount after
    /// a crash scans every zone written since, collection's too, so that scan grows with
    /// write amplification instead.
    pub user_blocks_since_ckpt: u64,
    /// Garbage collection's copies since the last checkpoint snapshot: with the user blocks
    /// since, what a mount after a crash scans (`FtlVolume::checkpoint_progress`).
    pub gc_blocks_since_ckpt: u64,
    /// The periodic checkpoint is also due once user blocks and copies since the last one
    /// reach this many intervals; 0: no such bound (`SCAN_BOUND_INTERVALS`; set by the mount
    /// from `MountOptions::checkpoint_scan_intervals`).
    pub scan_bound_intervals: u32,
    /// In summary mode (no per-block metadata), per data zone the tags of the blocks written
    /// since its last summary block (plan.rs).
    pub(crate) summary_tags: Vec<Vec<Tag>>,
    pub counters: Counters,
    /// Update intervals of user writes: whether hot/cold separation pays (separation.rs).
    pub(crate) lifespans: LifespanStats,
    /// Per LBA, its last three update intervals (separation.rs).
    pub(crate) history: IntervalHistory,
    /// How blocks are classed hot or cold while separating (`MountOptions::placement`).
    pub placement: Placement,
    /// Which completed writes are durable, so a collection flushes only when it must.
    pub durability: Durability,
    /// Pacing of user writes while garbage collection owes free zones (plan.rs).
    pub(crate) throttle: Throttle,
    /// A user writer was told to wait for a zone since the last round was planned (plan.rs,
    /// `Mapping::user_room`).
    pub(crate) user_waiting: bool,
    /// Zones the finish under way will reset that the round copying beside it may count as
    /// space (`MountOptions::gc_run_on`; `Mapping::plan_round`); while it is not 0 a GC
    /// stream that finds no free zone waits for them (`Mapping::plan_acquire`). Set and
    /// cleared by the maintenance task around each finish; 0 on other volumes.
    pub(crate) resets_owed: u32,
    /// Threaded logging on ZNS+ devices (threaded.rs).
    pub threaded: crate::threaded::Threaded,
    /// One bit per mapping page (`MAP_PAGE_LBAS` logical blocks): an entry of the page
    /// changed since the last checkpoint's snapshot; and how many bits are set.
    pub(crate) dirty: Vec<u64>,
    pub(crate) dirty_pages: u64,
    /// The delta chain the next checkpoint may extend (set by the checkpoint writer).
    pub delta_chain: Option<DeltaChain>,
}

impl Mapping {
    /// A freshly formatted volume: nothing mapped, every data zone free.
    pub fn new(layout: Layout) -> Mapping {
        let zones = (0..layout.data_zones).map(|_| DataZone::free(0)).collect();
        Mapping {
            l2p: vec![UNMAPPED; layout.volume_blocks as usize],
            seq: vec![0; layout.volume_blocks as usize],
            p2l: vec![P_INVALID; layout.physical_blocks() as usize],
            zones,
            free: (0..layout.data_zones).collect(),
            open: Vec::new(),
            next_seq: 1,
            trims: BTreeMap::new(),
            snapshots: 0,
            ckpt_seq: 0,
            user_blocks_since_ckpt: 0,
            gc_blocks_since_ckpt: 0,
            scan_bound_intervals: 0,
            summary_tags: vec![Vec::new(); layout.data_zones as usize],
            counters: Counters::default(),
            lifespans: LifespanStats::new(layout.volume_blocks),
            history: IntervalHistory::new(layout.volume_blocks),
            placement: Placement::default(),
            durability: Durability::new(layout.data_zones),
            throttle: Throttle::default(),
            user_waiting: false,
            resets_owed: 0,
            threaded: Default::default(),
            dirty: vec![0; (layout.volume_blocks.div_ceil(MAP_PAGE_LBAS)).div_ceil(64) as usize],
            dirty_pages: 0,
            delta_chain: None,
            layout,
        }
    }

    pub fn zone(&self, z: u32) -> &DataZone {
        &self.zones[z as usize]
    }

    pub fn free_zones(&self) -> u32 {
        self.free.len() as u32
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn ckpt_seq(&self) -> u64 {
        self.ckpt_seq
    }

    /// Takes `n` sequence numbers' worth of ordering for one command.
    pub fn take_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Whether `lba` was last written within the last volume's worth of writes: an 80/20
    /// workload's hot blocks come back every quarter volume, its cold ones every four volumes.
    fn written_recently(&self, lba: u64) -> bool {
        let last = self.seq[lba as usize];
        last != 0 && self.next_seq - last < self.layout.volume_blocks
    }

    /// Which stream a user write to `lba` belongs in (`Placement`): with `TwoShort`, hot if
    /// the block was written recently and its interval before that was short too; with
    /// `Lifespans`, hot if the interval this write ends and the three recorded before it add
    /// up to less than `separation::HOT_LIFESPANS_VOLUMES` volumes' worth of writes. Call before
    /// `note_update`, which records the interval this write ends.
    pub fn classify(&self, lba: u64, hot_cold: bool) -> Stream {
        if !hot_cold || !self.lifespans.separate() {
            return Stream::Hot;
        }
        let hot = match self.placement {
            Placement::TwoShort => self.written_recently(lba) && self.history.was_short(lba),
            Placement::Lifespans => {
                let last = self.seq[lba as usize];
                last != 0
                    && self
                        .history
                        .lifespans_hot(self.next_seq - last + self.history.recorded_sum(lba))
            }
        };
        if hot {
            Stream::Hot
        } else {
            Stream::Cold
        }
    }

    /// Which GC stream a copy of `lba` out of victim zone `from` goes to (one GC stream when
    /// not separating): the hot GC stream only if the victim is a hot zone (`zone_is_hot`)
    /// and the block's history says hot (`Placement`): with `TwoShort`, written within the
    /// last volume's worth of writes with a short latest interval; with `Lifespans`, its age
    /// and its three recorded intervals adding up to less than
    /// `separation::HOT_LIFESPANS_VOLUMES` volumes' worth of writes (its age is a lower bound
    /// of the lifespan under way). Otherwise the cold GC stream.
    ///
    /// Why the victim's class: a cold zone is collected about a volume's worth of writes after
    /// it was written, so by age alone a large share of its survivors still counted as young
    /// and went to the hot GC stream, where they outlived their neighbours and were copied
    /// again (under 80/20 the hot zones held 37,500 live blocks for 26,000 hot ones; with this
    /// rule 25,900). Why the intervals: a cold block that came back early once lands in a hot
    /// zone young, and its long earlier intervals say it is not hot.
    pub fn classify_copy(&self, lba: u64, hot_cold: bool, from: u32) -> Stream {
        if !hot_cold || !self.lifespans.separate() {
            return Stream::Gc;
        }
        let hot = self.zone_is_hot(from)
            && match self.placement {
                Placement::TwoShort => self.written_recently(lba) && self.history.was_short(lba),
                Placement::Lifespans => {
                    let last = self.seq[lba as usize];
                    last != 0
                        && self.history.lifespans_hot(
                            self.next_seq.saturating_sub(last) + self.history.recorded_sum(lba),
                        )
                }
            };
        if hot {
            Stream::Gc
        } else {
            Stream::GcCold
        }
    }

    /// Whether zone `z` was opened for hot data: hot user writes or young copies. Zones a
    /// mount found written count as cold.
    pub fn zone_is_hot(&self, z: u32) -> bool {
        matches!(
            self.zones[z as usize].opened_for,
            Some(Stream::Hot | Stream::Gc)
        )
    }

    /// A user write of `lba` is being submitted: records its update interval, which decides
    /// whether separation pays (separation.rs) and is part of the history later writes and
    /// copies of the block are classed by. Call after `classify` and before `take_seq`.
    pub fn note_update(&mut self, lba: u64) {
        let last = self.seq[lba as usize];
        let interval = (last != 0).then(|| self.next_seq - last);
        if let Some(i) = interval {
            self.lifespans.observe(i);
        }
        self.history.record(lba, interval);
    }

    /// Unwritten blocks of the zones open now.
    pub fn open_tail_blocks(&self) -> u64 {
        self.zones
            .iter()
            .filter(|z| matches!(z.use_, ZoneUse::Open(_)))
            .map(|z| self.layout.zone_blocks.saturating_sub(z.reserved))
            .sum()
    }

    /// Whether user writes are separated into hot and cold streams now.
    pub fn separating(&self) -> bool {
        self.lifespans.separate()
    }

    /// The physical block `lba` maps to, if any.
    pub fn lookup(&self, lba: u64) -> Option<u32> {
        match self.l2p[lba as usize] {
            UNMAPPED => None,
            p => Some(p),
        }
    }

    pub fn lba_seq(&self, lba: u64) -> u64 {
        self.seq[lba as usize]
    }

    /// The data zone holding physical block `pba`.
    pub fn zone_of(&self, pba: u32) -> u32 {
        (u64::from(pba) / self.layout.zone_blocks) as u32
    }

    pub fn pba(&self, zone: u32, offset: u64) -> u32 {
        (u64::from(zone) * self.layout.zone_blocks + offset) as u32
    }

    fn invalidate(&mut self, pba: u32) {
        let z = self.zone_of(pba) as usize;
        assert!(
            self.zones[z].valid > 0,
            "valid count underflow in data zone {z}"
        );
        self.zones[z].valid -= 1;
        self.p2l[pba as usize] = P_INVALID;
    }

    /// Invalidates `pba` on behalf of the write whose completion is being recorded: the
    /// zone holding it may be reset only once that write is durable.
    fn invalidate_by_write(&mut self, pba: u32) {
        self.durability.invalidated_by_write(self.zone_of(pba));
        self.invalidate(pba);
    }

    /// Pins the zone holding `pba` for a read; `unpin` releases it.
    pub fn pin(&mut self, pba: u32) -> u32 {
        let z = self.zone_of(pba);
        self.zones[z as usize].readers += 1;
        z
    }

    pub fn unpin(&mut self, zone: u32) {
        let r = &mut self.zones[zone as usize].readers;
        assert!(*r > 0, "unpin without pin");
        *r -= 1;
    }

    /// Takes a free zone for `stream`; returns it and its new generation. The caller writes
    /// the zone header (block 0) before any other block.
    pub fn open_zone(&mut self, stream: Stream) -> Option<(u32, u64)> {
        let z = self.free.pop_front()?;
        let zone = &mut self.zones[z as usize];
        assert_eq!(zone.use_, ZoneUse::Free);
        assert_eq!(zone.valid, 0, "a free zone holds valid blocks");
        zone.use_ = ZoneUse::Open(stream);
        zone.opened_for = Some(stream);
        zone.generation += 1;
        zone.reserved = 1;
        zone.inflight = 0;
        zone.summaries = 0;
        zone.prefix = Prefix::new(0);
        let generation = zone.generation;
        self.counters.stream_zones[stream.index()] += 1;
        self.counters.meta_blocks += 1;
        self.note_open(z);
        Some((z, generation))
    }

    /// The zone header write of zone `z` completed.
    pub fn header_written(&mut self, z: u32) {
        self.zones[z as usize].prefix.complete(0, 1);
    }

    /// Reserves up to `want` blocks in open zone `z`; fewer when the zone has less room.
    /// Zero when the zone is full.
    pub fn reserve(&mut self, z: u32, want: u64) -> Reservation {
        let cap = self.layout.zone_blocks;
        let open = matches!(self.zones[z as usize].use_, ZoneUse::Open(_));
        if open {
            // A zone re-opened for threaded logging hands out only its holes.
            if let Some((offset, blocks)) = self.tl_reserve(z, want) {
                self.zones[z as usize].inflight += u32::from(blocks > 0);
                return Reservation {
                    zone: z,
                    offset,
                    blocks,
                };
            }
        }
        let zone = &mut self.zones[z as usize];
        if !open {
            // Sealed (or filled) between the caller's check and now.
            return Reservation {
                zone: z,
                offset: zone.reserved,
                blocks: 0,
            };
        }
        let blocks = want.min(cap - zone.reserved);
        let r = Reservation {
            zone: z,
            offset: zone.reserved,
            blocks,
        };
        zone.reserved += blocks;
        if blocks > 0 {
            zone.inflight += 1;
        }
        r
    }

    /// A write into zone `z` failed: its blocks are lost space, not data.
    pub fn write_failed(&mut self, z: u32) {
        self.end_write(z, None);
    }

    /// Ends a write on zone `z`: tracks the completed prefix and seals a zone that filled.
    fn end_write(&mut self, z: u32, done: Option<(u64, u64)>) {
        let cap = self.layout.zone_blocks;
        let zone = &mut self.zones[z as usize];
        assert!(
            zone.inflight > 0,
            "write completion without a write in flight"
        );
        zone.inflight -= 1;
        if let Some((off, n)) = done {
            zone.prefix.complete(off, n);
            let filled = zone.prefix.end() >= cap;
            self.durability.wrote(z);
            // A zone the device filled is durable whole (a sealed one only once finished).
            if filled {
                self.durability.zone_durable(z);
            }
        }
        let zone = &mut self.zones[z as usize];
        // Cost-benefit's age of a zone counts from its last write.
        zone.last_seq = self.next_seq;
        zone.written_mark = self.snapshots;
        if zone.reserved == cap && zone.inflight == 0 && zone.use_ != ZoneUse::Full {
            zone.use_ = ZoneUse::Full;
            self.note_closed(z);
        }
    }

    /// Zone `z` became open (`ZoneUse::Open`): it joins the list of open zones.
    pub(crate) fn note_open(&mut self, z: u32) {
        if let Err(at) = self.open.binary_search(&z) {
            self.open.insert(at, z);
        }
    }

    /// Zone `z` is no longer open (it filled, was sealed or retired).
    fn note_closed(&mut self, z: u32) {
        if let Ok(at) = self.open.binary_search(&z) {
            self.open.remove(at);
        }
    }

    /// The open data zones, ascending.
    pub fn open_zones(&self) -> &[u32] {
        &self.open
    }

    /// Whether live trim records hold so much of the spare that a checkpoint should free
    /// them while garbage collection is wanted: at least a `TRIM_RECORDS_SPARE_DIVISOR`th
    /// of the collectable spare. The periodic interval counts user data blocks only, so a
    /// workload that trims as much as it writes (or a small volume whose interval is longer
    /// than its flash) would otherwise fill the spare with records no collection can free,
    /// and collection, which copies them, ran out of space (the volume failed).
    pub fn trims_pin_space(&self) -> bool {
        let collectable = self.layout.spare().map_or(0, |s| s.collectable);
        self.trims.len() as u64 >= (collectable / TRIM_RECORDS_SPARE_DIVISOR).max(1)
    }

    /// Whether the periodic checkpoint is due. `every_zones`
    /// (`MountOptions::checkpoint_every_zones`) zones' worth of user blocks, that many times
    /// the zone size, is the interval a full checkpoint's bytes are paid for; the next
    /// checkpoint comes once the user blocks written since the last one pay for its bytes at
    /// that rate: a full one after the whole interval, a delta of few dirty pages sooner
    /// (never before `1 / DELTA_INTERVAL_DIVISOR` of it). So checkpoint bytes stay at most
    /// the share of the user's writes the interval was tuned for.
    pub fn checkpoint_due(&self, every_zones: u32) -> bool {
        self.checkpoint_due_after(every_zones, 0, 0)
    }

    /// User blocks and copies since the last checkpoint at which a periodic one is due
    /// whatever the user blocks (`scan_bound_intervals` intervals of `every_zones` zones'
    /// worth); None when there is no such bound.
    pub fn scan_bound_blocks(&self, every_zones: u32) -> Option<u64> {
        (self.scan_bound_intervals > 0).then(|| {
            u64::from(every_zones)
                .saturating_mul(self.layout.zone_blocks)
                .max(1)
                .saturating_mul(u64::from(self.scan_bound_intervals))
        })
    }

    /// Whether the periodic checkpoint would be due after `blocks` more user blocks that
    /// dirty `pages` more mapping pages (`checkpoint_due` is this with none): a caller that
    /// wants to stop just before one is due asks before each write.
    pub fn checkpoint_due_after(&self, every_zones: u32, blocks: u64, pages: u64) -> bool {
        let interval = u64::from(every_zones)
            .saturating_mul(self.layout.zone_blocks)
            .max(1);
        let since = self.user_blocks_since_ckpt.saturating_add(blocks);
        let scanned = since.saturating_add(self.gc_blocks_since_ckpt);
        let over_bound = self
            .scan_bound_blocks(every_zones)
            .is_some_and(|bound| scanned >= bound);
        if since >= interval || over_bound {
            return true;
        }
        let dirty = self.dirty_pages.saturating_add(pages).min(self.pages());
        if self.next_checkpoint_with(dirty) == CkptKind::Full
            || since < interval / DELTA_INTERVAL_DIVISOR
        {
            return false;
        }
        let full = self.layout.checkpoint_blocks().unwrap_or(u64::MAX);
        let next = self.layout.delta_blocks(dirty).unwrap_or(u64::MAX);
        u128::from(since) * u128::from(full) >= u128::from(next) * u128::from(interval)
    }

    /// What the next checkpoint writes: a delta when the chain has room for the dirty
    /// pages and the deltas since the full checkpoint, this one included, are no larger
    /// than a full checkpoint (so a mount reads at most twice a full one); else a full one.
    pub fn next_checkpoint(&self) -> CkptKind {
        self.next_checkpoint_with(self.dirty_pages)
    }

    /// `next_checkpoint` with `dirty_pages` dirty pages.
    fn next_checkpoint_with(&self, dirty_pages: u64) -> CkptKind {
        let Some(chain) = self.delta_chain else {
            return CkptKind::Full;
        };
        let full = self.layout.checkpoint_blocks().unwrap_or(0);
        match self.layout.delta_blocks(dirty_pages) {
            Some(d) if d <= chain.room_blocks && chain.delta_blocks + d <= full => CkptKind::Delta,
            _ => CkptKind::Full,
        }
    }

    /// Marks the mapping page of `lba` dirty: its entry changed.
    pub(crate) fn touch(&mut self, lba: usize) {
        let page = lba as u64 / MAP_PAGE_LBAS;
        let (word, bit) = ((page / 64) as usize, page % 64);
        if self.dirty[word] & (1 << bit) == 0 {
            self.dirty[word] |= 1 << bit;
            self.dirty_pages += 1;
        }
    }

    /// Mapping pages of the volume.
    pub fn pages(&self) -> u64 {
        self.layout.volume_blocks.div_ceil(MAP_PAGE_LBAS)
    }

    /// The dirty mapping pages, ascending; clears their bits (a snapshot copies them).
    pub fn take_dirty(&mut self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.dirty_pages as usize);
        for (w, word) in self.dirty.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let b = bits.trailing_zeros();
                out.push(w as u32 * 64 + b);
                bits &= bits - 1;
            }
        }
        self.dirty_pages = 0;
        out
    }

    /// Clears every dirty bit (a full snapshot copies every page).
    pub fn clear_dirty(&mut self) {
        self.dirty.fill(0);
        self.dirty_pages = 0;
    }

    /// A user write of `blocks` blocks for `lba..` completed at `offset` in zone `z`.
    pub fn complete_write(&mut self, z: u32, offset: u64, lba: u64, blocks: u64, seq: u64) {
        for i in 0..blocks {
            let l = (lba + i) as usize;
            let pba = self.pba(z, offset + i);
            assert_eq!(
                self.p2l[pba as usize], P_INVALID,
                "write landed on a live block {pba}"
            );
            if seq > self.seq[l] {
                if self.l2p[l] != UNMAPPED {
                    self.invalidate_by_write(self.l2p[l]);
                }
                self.l2p[l] = pba;
                self.seq[l] = seq;
                self.touch(l);
                self.p2l[pba as usize] = l as u32;
                self.zones[z as usize].valid += 1;
            }
        }
        self.counters.user_blocks += blocks;
        self.user_blocks_since_ckpt += blocks;
        self.count_stream(z, blocks);
        self.end_write(z, Some((offset, blocks)));
    }

    /// Starts a trim of `[lba, lba + blocks)`: returns its sequence number, or None when
    /// nothing in the range is mapped (no record needed). The mapping changes only when the
    /// trim record is written (`complete_trim_record`): until then the old contents must stay
    /// reachable, since a crash before the record is durable brings them back.
    pub fn trim(&mut self, lba: u64, blocks: u64) -> Option<u64> {
        let range = lba as usize..(lba + blocks) as usize;
        if self.l2p[range].iter().all(|p| *p == UNMAPPED) {
            return None;
        }
        self.counters.trims += 1;
        Some(self.take_seq())
    }

    /// The trim record for `[lba, lba + blocks)` with `seq` was written at `offset` of zone
    /// `z`: the range now reads as zeros, except blocks written after the trim was submitted.
    pub fn complete_trim_record(&mut self, z: u32, offset: u64, lba: u64, blocks: u64, seq: u64) {
        for l in lba as usize..(lba + blocks) as usize {
            if seq > self.seq[l] {
                if self.l2p[l] != UNMAPPED {
                    self.invalidate_by_write(self.l2p[l]);
                    self.l2p[l] = UNMAPPED;
                }
                self.seq[l] = seq;
                self.touch(l);
            }
        }
        self.live_record(z, offset, seq);
        self.end_write(z, Some((offset, 1)));
    }

    /// A record block (trim or threaded-logging) `seq` at `offset` of zone `z`: counted
    /// valid and kept live, copied by collection, until a checkpoint snapshotted after it
    /// is durable.
    fn live_record(&mut self, z: u32, offset: u64, seq: u64) {
        let pba = self.pba(z, offset);
        self.p2l[pba as usize] = P_TRIM;
        self.trims.insert(
            pba,
            TrimLive {
                mark: self.snapshots,
                seq,
            },
        );
        self.zones[z as usize].valid += 1;
        self.counters.meta_blocks += 1;
    }

    /// The threaded-logging record `seq` was written at `offset` of zone `z`: like a trim
    /// record it stays live (copied by collection) until a checkpoint snapshotted after it
    /// is durable.
    pub fn complete_tl_record(&mut self, z: u32, offset: u64, seq: u64) {
        self.live_record(z, offset, seq);
        self.threaded.counters.records += 1;
        self.end_write(z, Some((offset, 1)));
    }

    /// Picks a full zone to collect, by `policy`, among zones no reader or writer is using.
    pub fn pick_victim(&self, policy: VictimPolicy) -> Option<u32> {
        // The blocks of a zone that can hold data: all but the header and the summaries. A
        // zone is worth collecting only if some of them are invalid (summary mode used to count
        // its summaries as garbage, so zones full of valid data were copied for nothing).
        let payload = |z: &DataZone| (self.layout.zone_blocks - 1).saturating_sub(z.summaries);
        let candidates = self.zones.iter().enumerate().filter(|(_, z)| {
            z.use_ == ZoneUse::Full
                    && !z.collecting
                    && z.valid < payload(z)
                    // A retired zone is collected only to move its data out; a lost one not at all.
                    && !(z.retired && z.valid == 0)
                    && !z.lost
        });
        // A zone threaded logging holds is not collected (threaded.rs).
        let candidates = candidates.filter(|(i, _)| !self.tl_holds(*i as u32));
        match policy {
            VictimPolicy::Greedy => candidates
                .min_by_key(|(_, z)| z.valid)
                .map(|(i, _)| i as u32),
            VictimPolicy::CostBenefit => candidates
                .map(|(i, z)| {
                    let u = z.valid as f64 / payload(z).max(1) as f64;
                    let age = (self.next_seq - z.last_seq) as f64 + 1.0;
                    // Collecting reads and writes the valid blocks only: cost 2u.
                    (i, (1.0 - u) * age / (2.0 * u).max(f64::MIN_POSITIVE))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i as u32),
        }
    }

    /// What must move out of zone `z` before it can be reset: (pba, lba) of valid data and
    /// (pba, snapshot mark) of live trim records.
    pub fn live_blocks(&self, z: u32) -> LiveBlocks {
        let start = self.pba(z, 0);
        let mut data = Vec::new();
        let mut trims = Vec::new();
        for pba in start..start + self.layout.zone_blocks as u32 {
            match self.p2l[pba as usize] {
                P_INVALID => {}
                P_TRIM => trims.push((pba, self.trims.get(&pba).map_or(0, |t| t.mark))),
                lba => {
                    if self.l2p[lba as usize] == pba {
                        data.push((pba, u64::from(lba)));
                    }
                }
            }
        }
        (data, trims)
    }

    /// Garbage collection copied `src` to `offset` of GC zone `z`. The mapping moves only if
    /// `src` is still the current location of its LBA. Returns the tag the copy carries
    /// (`Tag::Unknown` for a copy that lost to a newer write: it must never be recovered).
    pub fn complete_move(&mut self, src: u32, z: u32, offset: u64) -> Tag {
        let dst = self.pba(z, offset);
        let tag = match self.p2l[src as usize] {
            P_INVALID => Tag::Unknown,
            P_TRIM => match self.trims.remove(&src) {
                Some(t) => {
                    self.invalidate_by_write(src);
                    self.trims.insert(dst, t);
                    self.p2l[dst as usize] = P_TRIM;
                    self.zones[z as usize].valid += 1;
                    Tag::Trim { seq: t.seq }
                }
                None => Tag::Unknown,
            },
            lba => {
                if self.l2p[lba as usize] == src {
                    self.invalidate_by_write(src);
                    self.l2p[lba as usize] = dst;
                    self.touch(lba as usize);
                    self.p2l[dst as usize] = lba;
                    self.zones[z as usize].valid += 1;
                    Tag::Data {
                        lba: u64::from(lba),
                        seq: self.seq[lba as usize],
                    }
                } else {
                    Tag::Unknown
                }
            }
        };
        self.counters.gc_blocks += 1;
        self.gc_blocks_since_ckpt += 1;
        self.counters.gc_stale_copies += u64::from(tag == Tag::Unknown);
        self.count_stream(z, 1);
        tag
    }

    /// Counts `blocks` written to zone `z` against the stream it is open for.
    fn count_stream(&mut self, z: u32, blocks: u64) {
        if let ZoneUse::Open(stream) = self.zones[z as usize].use_ {
            self.counters.stream_blocks[stream.index()] += blocks;
        }
    }

    /// An in-band summary block was written at `offset` of zone `z`.
    pub fn complete_summary(&mut self, z: u32, offset: u64) {
        self.counters.meta_blocks += 1;
        self.zones[z as usize].summaries += 1;
        self.end_write(z, Some((offset, 1)));
    }

    /// Ends a GC copy command of `blocks` blocks at `offset` of zone `z`.
    pub fn end_gc_write(&mut self, z: u32, offset: u64, blocks: u64) {
        self.end_write(z, Some((offset, blocks)));
    }

    /// A FUA write to zone `z` ended (`end_gc_write` recorded it): with no other write to the
    /// zone in flight (a GC zone has one at a time), everything written to it is durable.
    pub fn fua_ended(&mut self, z: u32) {
        if self.zones[z as usize].inflight == 0 {
            self.durability.zone_durable(z);
        }
    }

    /// Zone `z` was reset on the device: it is free again.
    pub fn zone_reset(&mut self, z: u32) {
        let zone = &mut self.zones[z as usize];
        assert_eq!(zone.use_, ZoneUse::Full, "reset of a zone that is not full");
        assert_eq!(zone.valid, 0, "reset of data zone {z} with valid blocks");
        assert_eq!(zone.readers, 0, "reset of data zone {z} under a read");
        zone.use_ = ZoneUse::Free;
        zone.collecting = false;
        zone.reserved = 0;
        zone.prefix = Prefix::new(0);
        // Its blocks are gone, so are the tags a summary would have named.
        self.summary_tags[z as usize].clear();
        self.tl_forget(z);
        self.durability.zone_reset(z);
        self.free.push_back(z);
        self.counters.gc_zones += 1;
    }

    /// Counts a checkpoint snapshot about to be taken (the periodic interval starts again);
    /// returns its mark.
    pub fn begin_snapshot(&mut self) -> u64 {
        self.user_blocks_since_ckpt = 0;
        self.gc_blocks_since_ckpt = 0;
        self.snapshots += 1;
        self.snapshots
    }

    /// The checkpoint with snapshot `mark`, taken at sequence number `seq`, is durable: trim
    /// records written before that snapshot are no longer needed.
    pub fn checkpoint_durable(&mut self, seq: u64, mark: u64) {
        self.ckpt_seq = self.ckpt_seq.max(seq);
        self.threaded.covered_mark = self.threaded.covered_mark.max(mark);
        self.threaded.checkpoints_before_records =
            self.threaded.checkpoints_before_records.saturating_sub(1);
        let dead: Vec<u32> = self
            .trims
            .iter()
            .filter(|(_, t)| t.mark < mark)
            .map(|(p, _)| *p)
            .collect();
        for pba in dead {
            self.trims.remove(&pba);
            self.invalidate(pba);
        }
    }

    /// Whether garbage collection is working on a zone right now.
    pub fn collecting_any(&self) -> bool {
        self.zones.iter().any(|z| z.collecting)
    }

    /// Zones garbage collection has picked and not reset yet.
    pub fn collecting_zones(&self) -> u32 {
        self.zones.iter().filter(|z| z.collecting).count() as u32
    }

    /// Whether some open zone still has writes in flight (it may fill and become a victim).
    pub fn open_zone_filling(&self) -> bool {
        self.zones
            .iter()
            .any(|z| matches!(z.use_, ZoneUse::Open(_)) && z.inflight > 0)
    }

    /// Seals every open zone that holds invalid blocks and has no write in flight, so garbage
    /// collection can reclaim them; returns the sealed zones (the caller finishes them on the
    /// device). Used when nothing else is reclaimable.
    pub fn seal_idle(&mut self, may_seal: impl Fn(u32) -> bool) -> Vec<u32> {
        let cap = self.layout.zone_blocks;
        let idle: Vec<u32> = (0..self.layout.data_zones)
            .filter(|&z| {
                let zone = &self.zones[z as usize];
                matches!(zone.use_, ZoneUse::Open(_))
                    && zone.inflight == 0
                    && zone.valid + 1 < zone.reserved.min(cap)
                    && may_seal(z)
                    // A threaded zone is never finished while written (threaded.rs).
                    && !self.tl_writing(z)
            })
            .collect();
        for &z in &idle {
            self.abandon(z);
        }
        idle
    }

    /// Marks zone `z` as picked by garbage collection.
    pub fn start_collecting(&mut self, z: u32) {
        let stream = self.zones[z as usize].opened_for.unwrap_or(Stream::Cold);
        self.counters.gc_victims[stream.index()] += 1;
        self.counters.gc_victim_valid[stream.index()] += self.zones[z as usize].valid;
        self.zones[z as usize].collecting = true;
    }

    /// Seals open zone `z` after a write error: nothing more is written to it.
    pub fn abandon(&mut self, z: u32) {
        let cap = self.layout.zone_blocks;
        let zone = &mut self.zones[z as usize];
        zone.reserved = cap;
        if zone.inflight == 0 && zone.use_ != ZoneUse::Full {
            zone.use_ = ZoneUse::Full;
            self.note_closed(z);
        }
    }

    /// The device retired zone `z` (Read Only, or Offline when `lost`): it stays Full, is never
    /// reset or reused, and a collection of it ends.
    pub fn retire(&mut self, z: u32, lost: bool) {
        let zone = &mut self.zones[z as usize];
        zone.retired = true;
        zone.lost |= lost;
        // A zone never opened has generation 0, which a used zone's checkpoint entry may not
        // carry; a retired zone is recorded as full, so it takes the first generation.
        zone.generation = zone.generation.max(1);
        zone.collecting = false;
        if zone.use_ != ZoneUse::Full {
            zone.use_ = ZoneUse::Full;
            zone.reserved = self.layout.zone_blocks;
            self.note_closed(z);
        }
    }

    /// Data zones the device retired (Read Only or Offline) since format.
    pub fn retired_zones(&self) -> u32 {
        self.zones.iter().filter(|z| z.retired).count() as u32
    }

    /// Logical block ranges (first, count) whose data sits in lost (Offline) zones.
    pub fn lost_ranges(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (lba, &pba) in self.l2p.iter().enumerate() {
            if pba == UNMAPPED || !self.zones[self.zone_of(pba) as usize].lost {
                continue;
            }
            match out.last_mut() {
                Some((first, n)) if *first + *n == lba as u64 => *n += 1,
                _ => out.push((lba as u64, 1)),
            }
        }
        out
    }

    /// Checks the invariants tying L2P, P2L and the valid counts together (tests, `check`).
    pub fn verify(&self) -> Result<(), String> {
        let mut valid = vec![0u64; self.zones.len()];
        for (lba, &pba) in self.l2p.iter().enumerate() {
            if pba == UNMAPPED {
                continue;
            }
            if self.p2l.get(pba as usize) != Some(&(lba as u32)) {
                return Err(format!(
                    "LBA {lba} maps to PBA {pba}, whose reverse entry disagrees"
                ));
            }
            let z = self.zone_of(pba) as usize;
            if self.zones[z].use_ == ZoneUse::Free {
                return Err(format!("LBA {lba} maps into free data zone {z}"));
            }
            valid[z] += 1;
        }
        for &pba in self.trims.keys() {
            valid[self.zone_of(pba) as usize] += 1;
        }
        for (z, zone) in self.zones.iter().enumerate() {
            if zone.valid != valid[z] {
                return Err(format!(
                    "data zone {z} counts {} valid blocks, the maps say {}",
                    zone.valid, valid[z]
                ));
            }
        }
        let open: Vec<u32> = (0..self.layout.data_zones)
            .filter(|&z| matches!(self.zones[z as usize].use_, ZoneUse::Open(_)))
            .collect();
        if open != self.open {
            return Err(format!(
                "the open zones are {open:?}, the list of open zones says {:?}",
                self.open
            ));
        }
        Ok(())
    }
}

impl DataZone {
    pub(crate) fn free(generation: u64) -> DataZone {
        DataZone {
            use_: ZoneUse::Free,
            generation,
            reserved: 0,
            valid: 0,
            inflight: 0,
            prefix: Prefix::new(0),
            last_seq: 0,
            readers: 0,
            collecting: false,
            retired: false,
            lost: false,
            summaries: 0,
            opened_for: None,
            written_mark: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mapping of a volume of 40 zones of 64 blocks at the default reserve, nothing written.
    fn mapping_of_40_zones() -> Mapping {
        let l = Layout::new(
            crate::layout::tests::geo(40, 64),
            1000,
            crate::layout::RESERVE_ZONES_DEFAULT,
        )
        .expect("layout");
        Mapping::new(l)
    }

    // Cost-benefit weighs a zone's free space and age against the cost of collecting it: 2u
    // (the valid blocks read and written), not LFS's 1 + u (a whole segment read). Of a
    // zone half valid and 100 writes old and one a tenth valid and 36 writes old, LFS's
    // weighting chose the older; this one the emptier.
    #[test]
    fn cost_benefit_counts_only_the_valid_blocks_as_cost() {
        let mut m = mapping_of_40_zones();
        m.next_seq = 1000;
        for (z, valid, last_seq) in [(3u32, 32u64, 900u64), (7, 6, 964)] {
            let zone = &mut m.zones[z as usize];
            zone.use_ = ZoneUse::Full;
            zone.valid = valid;
            zone.last_seq = last_seq;
        }
        assert_eq!(m.pick_victim(VictimPolicy::CostBenefit), Some(7));
        assert_eq!(m.pick_victim(VictimPolicy::Greedy), Some(7));
        // A zone with nothing valid comes first, however young.
        m.zones[9].use_ = ZoneUse::Full;
        m.zones[9].last_seq = 999;
        assert_eq!(m.pick_victim(VictimPolicy::CostBenefit), Some(9));
    }

    // The victims garbage collection takes are counted by the stream their zone was opened
    // for, with the valid blocks they held (the bench's per-phase figures of how full each
    // stream's zones were when collected); zones a mount found written count as cold user
    // zones.
    #[test]
    fn victims_are_counted_by_their_zones_stream_with_their_valid_blocks() {
        let mut m = mapping_of_40_zones();
        for (z, valid, stream) in [
            (3u32, 10u64, Some(Stream::Hot)),
            (4, 20, Some(Stream::Hot)),
            (5, 50, Some(Stream::GcCold)),
            (6, 40, None),
        ] {
            let zone = &mut m.zones[z as usize];
            zone.use_ = ZoneUse::Full;
            zone.valid = valid;
            zone.opened_for = stream;
            m.start_collecting(z);
        }
        let c = m.counters;
        assert_eq!(c.gc_victims, [2, 1, 0, 1]);
        assert_eq!(c.gc_victim_valid, [30, 40, 0, 50]);
        assert!(m.zones[3].collecting && m.zones[6].collecting);
    }
}
