//! The data path's decisions as plain synchronous code over the mapping: which zone a stream
//! writes to next and whether it waits, opens, borrows, seals idle zones or reports no space;
//! what a failed write to a data zone does; and what a flush must do. The async shell (io.rs,
//! gc.rs) takes the map lock, asks, and executes the returned step; tests/
//! decisions_keep_space_invariants.rs drives these functions under random interleavings.
//!
//! Fault model: a write to a data zone (header, data, trim record, summary, GC copy) may fail
//! for good. The zone is then sealed: no reservation succeeds in it again, the writes still in
//! flight end normally, and the shell finishes it on the device. In summary mode (no per-block
//! metadata) the tags of the zone's blocks that no summary holds yet stay pending, so the next
//! flush writes a checkpoint (which maps those blocks) before it reports them durable.
//!
//! Space rules: a user stream opens a zone only while more than its floor of zones are free
//! (the foreground watermark and the reserve while something is reclaimable, else all but one
//! reserve zone); it never takes the reserve garbage collection needs while garbage collection
//! can make space. It waits while something is reclaimable or an open zone is still filling;
//! when nothing is, idle open zones holding invalid blocks are sealed to become reclaimable,
//! and only when there are none may it borrow another user stream's zone or report no space.

use crate::layout::{Layout, MountOptions, Stripe, VictimPolicy, COPIES_PER_LANE_DEFAULT};
use crate::map::{Mapping, Stream, ZoneUse};
use crate::records::{self, Tag};

/// The watermarks and policy zone acquisition follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpacePolicy {
    /// Below this many free zones garbage collection runs in the background.
    pub gc_background_free_zones: u32,
    /// At or below this many free zones user writes wait for garbage collection.
    pub gc_foreground_free_zones: u32,
    /// Zones kept for garbage collection.
    pub reserve_zones: u32,
    pub victim_policy: VictimPolicy,
    /// Whether user writes are paced by the round under way (`RoundPace`) while no
    /// throttled band paces them.
    pub pace_rounds: bool,
    /// At the floor, collection waits until the users need the space
    /// (`MountOptions::gc_lead_blocks`, `SpacePolicy::gc_may_wait`); None starts it at once.
    pub gc_lead_blocks: Option<u64>,
    /// Whether collection runs on across rounds (`MountOptions::gc_run_on`).
    pub run_on: bool,
}

impl SpacePolicy {
    pub fn new(opts: &MountOptions, layout: &Layout) -> SpacePolicy {
        SpacePolicy {
            gc_background_free_zones: opts.gc_background_free_zones,
            gc_foreground_free_zones: opts.gc_foreground_free_zones,
            reserve_zones: reserve_zones(layout, opts),
            victim_policy: opts.victim_policy,
            // A collection that waits for the users' need (`gc_lead_blocks`) would not start
            // for writers waiting on its copies: never both.
            pace_rounds: opts.pace_rounds.unwrap_or(false) && opts.gc_lead_blocks.is_none(),
            gc_lead_blocks: opts.gc_lead_blocks,
            run_on: opts.gc_run_on.unwrap_or(false) && opts.gc_lead_blocks.is_none(),
        }
    }

    /// The free zones a stream must leave when it opens one; `reclaimable` says whether
    /// garbage collection has anything to reclaim.
    pub fn floor(&self, stream: Stream, reclaimable: bool) -> u32 {
        match stream {
            s if s.is_gc() => 0,
            _ if reclaimable => self.gc_foreground_free_zones.max(self.reserve_zones),
            // Nothing reclaimable anywhere: the next overwrite creates some, and one reserve
            // zone is enough for garbage collection.
            _ => self.reserve_zones.saturating_sub(1).max(1),
        }
    }

    /// Whether garbage collection should run with `free` free zones: below the background
    /// watermark, and in any case whenever a user stream would have to wait for it (at or
    /// below its floor while something is reclaimable). Otherwise watermarks set with the
    /// background one at or below the foreground one would leave a writer waiting for a
    /// collection that never starts.
    pub fn gc_wanted(&self, free: u32) -> bool {
        let waits_at_or_below = self.floor(Stream::Hot, true);
        free < self.gc_background_free_zones || free <= waits_at_or_below
    }

    /// Whether garbage collection should start another round while the previous round's
    /// finish (its flush and resets) is still to come: `free` free zones and `resetting`
    /// zones that finish frees (the victims picked and not reset). Judged on the space the
    /// finish leaves: a round started on `free` alone collects before any collection is
    /// wanted, taking victims that would have lost more blocks by the time they were needed.
    pub fn gc_wanted_after_finish(&self, free: u32, resetting: u32) -> bool {
        self.gc_wanted(free.saturating_add(resetting))
    }

    /// Whether collection, wanted with `free` free zones (counting zones a finish is about to
    /// reset), may still wait because the users do not need the space yet
    /// (`MountOptions::gc_lead_blocks`): only exactly at the floor with no throttled band
    /// (below it collection has taken the reserve; a band paces users by the copies), while
    /// no user writer waits for a zone and some user zone is open with every open one holding
    /// more than the lead (`Mapping::user_room`). A victim taken later has lost more blocks:
    /// collecting as soon as the floor is reached keeps the zone it frees empty while the user
    /// zones fill, one zone out of the log.
    pub fn gc_may_wait(&self, free: u32, users: UserRoom) -> bool {
        let Some(lead) = self.gc_lead_blocks else {
            return false;
        };
        self.throttle_band() < 2
            && free == self.floor(Stream::Hot, true)
            && !users.waiting
            && users.least.is_some_and(|room| room > lead)
    }
}

/// The room the user streams have before they need a free zone (`SpacePolicy::gc_may_wait`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRoom {
    /// A user writer waits for a zone (`Mapping::plan_acquire` said Wait since the last round
    /// was planned).
    pub waiting: bool,
    /// The least room (blocks a write may still take) of the user streams' open zones; None
    /// when none is open.
    pub least: Option<u64>,
}

/// Free zones garbage collection keeps for its next victim on a volume of `layout` mounted
/// with `opts`: one. A victim's copies (valid blocks and live trim records) never outnumber
/// the blocks it was written with, at most a fresh zone's payload, so one fresh zone beyond
/// the GC zones' room takes them when they all go to one stream; with hot and cold copies
/// split over two GC streams (`hot_cold`) each stream could need a fresh zone, so where the
/// floor is below 2 a first victim the free zones cannot take split goes whole to one stream
/// (`Mapping::plan_round`). Default mounts keep a floor of 2 or more (`tune_mount`), so their
/// decisions do not change; an explicit floor of 1 with separation, as `zonestack bench ftl`
/// takes, puts the second zone into the log: 80/20 at 80% utilisation 2.216 -> 2.199 on 640
/// zones of 256 blocks, 2.425 -> 2.370 on 160 of 1,024 (docs/BENCHMARKS.md). The price: a
/// copy that fails for good at the floor seals its zone and leaves a one-zone reserve nothing
/// to retry in, so the volume fails with no space where two zones would have absorbed that
/// one failure.
pub fn reserve_zones(_layout: &Layout, _opts: &MountOptions) -> u32 {
    1
}

/// Pacing of user writes while garbage collection owes free zones: between the background
/// watermark and the foreground floor, each user block admitted must be paid for by blocks
/// garbage collection copies, at a rate that falls as the debt grows, so user writes and
/// collection overlap instead of user writes stopping at the floor. Kept in the mapping;
/// decided by `Mapping::plan_admit`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throttle {
    /// The debt (zones owed) the marks below were taken at; 0 when not throttling.
    owed: u32,
    /// Blocks garbage collection had copied when the marks were taken.
    gc_mark: u64,
    /// User blocks admitted since the marks were taken.
    admitted: u64,
    /// Pacing by the round under way (`SpacePolicy::pace_rounds`).
    pace: RoundPace,
}

/// Pacing of user writes by the garbage-collection round under way, on volumes whose spare
/// is too small for a throttled band of free zones (`SpacePolicy::pace_rounds`): once the
/// room user writes have left (their open hot zones' room and the free zones above the
/// floor) is under a third of a zone's payload (`PACE_ROOM_DIVISOR`), each block the round
/// copies admits `yields / copies` user blocks (what its resets give back per block copied),
/// scaled by that room over the third, so writers slow down as the room runs out instead of
/// all stopping at the floor until a round's resets free a zone. Kept with `Throttle`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundPace {
    /// Blocks the newest round copies, and the blocks its resets free beyond them.
    copies: u64,
    yields: u64,
    /// `Counters::gc_blocks` when the credit was last brought up to date.
    gc_seen: u64,
    /// User blocks admitted ahead, in units of 1 / (`copies` x a zone's payload) block.
    credit: u128,
}

/// Whether a user write may go now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Go,
    /// Garbage collection is behind: wait until space changes (every copy signals) and ask
    /// again.
    Wait,
}

impl SpacePolicy {
    /// Zones of the throttled band: from the background watermark down to the floor at which
    /// user streams stop opening zones; below 2 nothing is throttled (the floor stops them).
    pub fn throttle_band(&self) -> u32 {
        self.gc_background_free_zones
            .saturating_sub(self.floor(Stream::Hot, true))
    }

    /// Zones garbage collection owes with `free` free zones: how far below the background
    /// watermark `free` is, at most the band; 0 when user writes are not throttled.
    pub fn owed(&self, free: u32) -> u32 {
        let band = self.throttle_band();
        if band < 2 {
            return 0;
        }
        self.gc_background_free_zones.saturating_sub(free).min(band)
    }

    /// User blocks a debt of `owed` zones admits once garbage collection has copied `copied`
    /// blocks since the debt began: `slack_blocks · (band - owed) / band` up front, then
    /// `(band - owed) / owed` per block copied, so none at the floor (`owed == band`).
    pub fn user_blocks_allowed(&self, owed: u32, copied: u64, slack_blocks: u64) -> u64 {
        let band = u64::from(self.throttle_band().max(1));
        let owed = u64::from(owed).clamp(1, band);
        let left = band - owed;
        slack_blocks.saturating_mul(left) / band + copied.saturating_mul(left) / owed
    }
}

/// Fraction of the collectable spare (in zones) that open zones may hold: each open zone's
/// unwritten tail is spare garbage collection cannot use until the zone fills.
pub const OPEN_ZONES_PER_COLLECTABLE_ZONE: f64 = 1.0 / 3.0;

/// Checkpoint blocks written per 100 blocks of user writes at most: a checkpoint writes the
/// whole mapping, so the periodic one comes once `checkpoint_every_zones` zones' worth of user
/// blocks were written since the last checkpoint (`Mapping::checkpoint_due`; garbage
/// collection's copies, zone headers, summaries and trim records do not count), which makes
/// this true; a mount writes none when nothing changed since the newest checkpoint on disk.
pub const CHECKPOINT_PERCENT_MAX: u64 = 1;

/// Hot zones an automatic choice (`hot_zones` 0) takes at most: the write queue depth of
/// Zone Write mode.
pub const HOT_ZONES_AUTO_MAX: u32 = 4;

/// The mount options a volume of `layout` runs with: when `hot_zones` is 0 (automatic), as
/// many hot zones as the spare affords so that the open zones do not eat the room garbage
/// collection works in, and on zones of at most `FEW_HOT_ZONES_ZONE_BLOCKS_MAX` blocks one per
/// `HOT_ZONE_COLLECTABLE_ZONES` zones to collect from at most (small volumes get fewer), and checkpoints spaced so that they cost at most
/// `CHECKPOINT_PERCENT_MAX` of the writes when `checkpoint_every_zones` is 0 (automatic); when
/// the watermarks are 0 (automatic), a floor of `FOREGROUND_FREE_ZONES_AUTO` zones, one
/// higher (and at least `WIDE_FLOOR_BLOCKS` blocks) on volumes with at least
/// `WIDE_FLOOR_COLLECTABLE_ZONES` zones to collect from, and collection from one zone above
/// it.
pub fn tune_mount(layout: &Layout, mut opts: MountOptions) -> MountOptions {
    let zb = layout.zone_blocks.max(1);
    let collectable = layout.spare().map_or(0, |s| s.collectable);
    let collectable_zones = collectable / zb;
    let open_budget = (collectable_zones as f64 * OPEN_ZONES_PER_COLLECTABLE_ZONE) as u64;
    // Besides the hot zones: one GC stream, and cold user and cold GC streams when hot and
    // cold data may be separated.
    let others = if opts.hot_cold { 3 } else { 1 };
    let mut hot_max = open_budget.saturating_sub(others);
    if zb <= FEW_HOT_ZONES_ZONE_BLOCKS_MAX {
        hot_max = hot_max.min(collectable_zones / HOT_ZONE_COLLECTABLE_ZONES);
    }
    let hot_max = u32::try_from(hot_max).unwrap_or(u32::MAX);
    if opts.hot_zones == 0 {
        opts.hot_zones = HOT_ZONES_AUTO_MAX.min(hot_max).max(1);
    }
    let ckpt_blocks = layout.checkpoint_blocks().unwrap_or(u64::MAX);
    if opts.checkpoint_every_zones == 0 {
        let every = ckpt_blocks
            .saturating_mul(100 / CHECKPOINT_PERCENT_MAX)
            .div_ceil(zb);
        opts.checkpoint_every_zones = u32::try_from(every).unwrap_or(u32::MAX).max(1);
    }
    // Paced by rounds: small spares of zones neither small nor large whose watermarks are
    // chosen here (one zone apart, so no throttled band paces them).
    let paced = *opts.pace_rounds.get_or_insert(
        opts.gc_foreground_free_zones == 0
            && opts.gc_background_free_zones == 0
            && opts.gc_lead_blocks.is_none()
            && collectable_zones < WIDE_FLOOR_COLLECTABLE_ZONES
            && zb > PACED_ZONE_BLOCKS_MIN
            && zb <= PACED_ZONE_BLOCKS_MAX,
    );
    let wide = collectable_zones >= WIDE_FLOOR_COLLECTABLE_ZONES;
    // Run on across rounds: wide spares whose watermarks are chosen here, unpaced, no lead.
    let run_on = *opts.gc_run_on.get_or_insert(
        opts.gc_foreground_free_zones == 0
            && opts.gc_background_free_zones == 0
            && opts.gc_lead_blocks.is_none()
            && !paced
            && wide,
    );
    if opts.gc_foreground_free_zones == 0 {
        opts.gc_foreground_free_zones = if wide {
            let least = WIDE_FLOOR_BLOCKS
                .div_ceil(zb)
                .min(collectable_zones / WIDE_FLOOR_SHARE_DIVISOR);
            (FOREGROUND_FREE_ZONES_AUTO + 1).max(u32::try_from(least).unwrap_or(u32::MAX))
        } else {
            FOREGROUND_FREE_ZONES_AUTO
        };
    }
    if opts.copies_per_lane == 0 {
        opts.copies_per_lane = if paced {
            PACED_COPIES_PER_LANE
        } else if run_on {
            RUN_ON_COPIES_PER_LANE
        } else {
            COPIES_PER_LANE_DEFAULT
        };
    }
    let floor = opts
        .gc_foreground_free_zones
        .max(reserve_zones(layout, &opts));
    if opts.gc_background_free_zones == 0 {
        opts.gc_background_free_zones = floor + 1;
    }
    tracing::debug!(?opts, collectable_zones, "mount options");
    opts
}

/// The most free zones a volume of `layout` can have once every one of its logical blocks
/// is written: its data zones less those its blocks fill at the least (a zone holds its
/// capacity less its header and, in summary mode, its summary blocks). Free zones above it
/// are reached only while part of the volume was never written or is trimmed.
pub fn free_zones_when_full(layout: &Layout) -> u32 {
    let zb = layout.zone_blocks;
    let summaries = if layout.summary_mode() {
        let group = records::summary_capacity(layout.geometry.block_size as usize) as u64;
        zb.saturating_sub(1).div_ceil(group + 1)
    } else {
        0
    };
    let payload = zb.saturating_sub(1 + summaries).max(1);
    let filled = layout.volume_blocks.div_ceil(payload);
    u32::try_from(u64::from(layout.data_zones).saturating_sub(filled)).unwrap_or(u32::MAX)
}

/// The highest background watermark (`MountOptions::gc_background_free_zones`) a mount of
/// `layout` with the floor of `tuned` (watermarks already chosen by `tune_mount`) accepts:
/// the free zones a full volume can reach (`free_zones_when_full`), or one above the floor
/// when that is more (no throttled band: collection is wanted at the floor anyway, as the
/// automatic choice is). Above it collection never stops once the volume is written, and
/// between the floor and it user writes would be paced for good.
pub fn background_free_zones_max(layout: &Layout, tuned: &MountOptions) -> u32 {
    let floor = tuned
        .gc_foreground_free_zones
        .max(reserve_zones(layout, tuned));
    free_zones_when_full(layout).max(floor.saturating_add(1))
}

/// Refuses a mount whose explicit background watermark (`asked`; 0 is automatic) is above
/// `background_free_zones_max`, with one line naming the value and the range accepted.
pub fn check_watermarks(
    layout: &Layout,
    asked: &MountOptions,
    tuned: &MountOptions,
) -> Result<(), crate::layout::LayoutError> {
    let bg = asked.gc_background_free_zones;
    let most = background_free_zones_max(layout, tuned);
    if bg <= most {
        return Ok(());
    }
    Err(crate::layout::LayoutError(format!(
        "background collection watermark of {bg} free zones is never reached: with all {} blocks written at most {} of the {} data zones are free; use 1 to {most}, or 0 for the automatic one",
        layout.volume_blocks,
        free_zones_when_full(layout),
        layout.data_zones
    )))
}

/// Zones to collect from (`SpareBlocks::collectable` in whole zones) per hot zone an
/// automatic choice keeps at least. A round's resets wait for a device flush unless the user
/// writes that emptied its victims are durable, which they are once their hot zone filled;
/// hot zones written round-robin each fill that many times more slowly, so with four of them
/// most rounds flushed. At 28% (block-overwrite.fio's overwrite phase): on 128 MiB (31 zones
/// of 256 blocks) four hot zones flushed 2,024 times and gave 152.4 MiB/s, one 722 times and
/// 205.7; on 256 MiB (66 zones) four 1,056 times and 223.7, two 345 and 240.5, three 234.2,
/// one 219.9 (bound by its single write in flight); on 1 GiB (67 zones of 1,024 blocks) two
/// gave 308.0 against four's 300.9 (docs/BENCHMARKS.md).
pub const HOT_ZONE_COLLECTABLE_ZONES: u64 = 32;

/// Zone size (blocks) up to which `HOT_ZONE_COLLECTABLE_ZONES` applies. Larger zones take so
/// many user writes to fill that rounds flush whatever the number of hot zones, and fewer
/// hot zones only take away writes in flight (at 28% on 4 GiB, zones of 3,320 blocks: two
/// hot zones gave 369.1 MiB/s against four's 383.6, 49 flushes either way;
/// docs/BENCHMARKS.md).
pub const FEW_HOT_ZONES_ZONE_BLOCKS_MAX: u64 = 2048;

/// Blocks the automatic floor of a wide spare (`WIDE_FLOOR_COLLECTABLE_ZONES`) holds at
/// least: a round copies into the free zones at the floor, so on small zones three of them
/// keep few copies in flight (at 28% on 256 MiB, zones of 256 blocks: 2.6 copies in flight,
/// 240.5 MiB/s; a floor of 4 zones, 1,024 blocks: 3.5 and 255.7 MiB/s; docs/BENCHMARKS.md).
pub const WIDE_FLOOR_BLOCKS: u64 = 1024;

/// The automatic floor takes at most this fraction (one over it) of the zones to collect from
/// for `WIDE_FLOOR_BLOCKS`: on zones much smaller than 256 blocks the 1,024 blocks would hold
/// a large share of the spare free (measured at 256-block zones only, where 4 zones are a
/// sixteenth of 66).
pub const WIDE_FLOOR_SHARE_DIVISOR: u64 = 16;

/// A volume paced by rounds (`RoundPace`) paces user writes once their room is under this
/// fraction (one over it) of a zone's payload. A smaller room left unpaced runs the writers
/// dry between the resets of the rounds (at 7% on 1 GiB, a quarter: p99 write latency 11.6
/// ms), a larger one holds back space that collection could use (a whole zone: 62.1 MiB/s
/// instead of 67.5; docs/BENCHMARKS.md).
pub const PACE_ROOM_DIVISOR: u64 = 3;

/// Zone size (blocks) above which an automatic choice paces user writes by rounds. Pacing
/// keeps a hot zone open with unflushed writes at every round's end, so each round's finish
/// flushes the device; rounds on zones this small are short, and the flush costs more than
/// the pacing gains (at 28% on 64 MiB, zones of 256 blocks: 171.4 MiB/s paced with 1,260
/// flushes, 195.8 unpaced with 131; on 128 MiB with one hot zone 205.7 against 227.4;
/// docs/BENCHMARKS.md).
pub const PACED_ZONE_BLOCKS_MIN: u64 = 256;

/// Zone size (blocks) up to which an automatic choice paces user writes by rounds. Unpaced,
/// every writer in flight stops once per zone's worth of user writes (the floor reached, the
/// hot zone full) for about a round: with fio's queue of 16 that is 1.6% of the writes on
/// 1,024-block zones (block-overwrite.fio at 7% on 1 GiB: p99 43 ms, pacing brings it to 7.3
/// ms) but 0.5% on 3,320-block ones, where the p99 does not see the stops (4 GiB: p99 1.07
/// ms unpaced, 6.1 ms paced; docs/BENCHMARKS.md).
pub const PACED_ZONE_BLOCKS_MAX: u64 = 2048;

/// Copies in flight per GC lane on a volume paced by rounds when `MountOptions::copies_per_lane`
/// is 0 (automatic); `COPIES_PER_LANE_DEFAULT` on others. Paced user writes no longer come
/// in bursts behind which the copies' reads queue, so a deeper pipeline buys throughput
/// without the p99 it cost unpaced (at 7% on 1 GiB: 71.7 MiB/s and p99 7.3 ms against 8 per
/// lane's 67.5 and 8.0; docs/BENCHMARKS.md).
pub const PACED_COPIES_PER_LANE: u32 = 16;

/// Copies in flight per GC lane on a volume whose collection runs on across rounds
/// (`MountOptions::gc_run_on`) when `MountOptions::copies_per_lane` is 0: its rounds follow
/// each other without a gap for the user writes to burst into, so a deeper pipeline keeps
/// the dies busy (at 28% on 1 GiB: 300.9 MiB/s, p99 write latency 0.37 ms, against 294.4 and
/// 1.85 ms at 16 and 284.2 and 1.14 ms at 8 without running on; docs/BENCHMARKS.md).
pub const RUN_ON_COPIES_PER_LANE: u32 = 32;

/// The floor of free zones at which user writes wait (`MountOptions::gc_foreground_free_zones`)
/// an automatic choice takes on spares under `WIDE_FLOOR_COLLECTABLE_ZONES`.
pub const FOREGROUND_FREE_ZONES_AUTO: u32 = 2;

/// Zones to collect from (`Spare::collectable`) from which the automatic watermarks are one
/// zone higher: a round copies into the free zones at the floor, so a floor of 3 gives rounds
/// half as large again, more copies in flight and the dies busier (at 28% on 1 GiB, 63 such
/// zones: overwrite p99 write latency 9.3 -> 3.0 ms, throughput +3%, write amplification
/// +2%); on small spares the zone held free costs more than it gains (at 7% on 1 GiB, 13
/// zones: -5% throughput, write amplification +9%; docs/BENCHMARKS.md).
pub const WIDE_FLOOR_COLLECTABLE_ZONES: u64 = 48;

/// Victims one garbage-collection round takes at most: a bound on the round's lists and on
/// the resets it issues together.
pub const ROUND_VICTIMS_MAX: usize = 8;

/// Zones the GC stream copies into at once, at most: Zone Write allows one command in flight
/// per zone, and a Copy waits for its sources' reads behind the dies' programs, so one zone
/// alone moves a few hundred MiB/s while the array programs about 1 GiB/s.
pub const GC_LANES_MAX: u32 = 4;

/// GC lanes a volume takes when `MountOptions::gc_lanes_max` is 0. A lane's copies go on into
/// its next zone while the copies to the full one are still in flight (`io/pipeline.rs`), so
/// one lane keeps as many copies in flight as several lanes that each drained at every zone
/// boundary did, without their open zones' tails: at 28% on 1 GiB one lane gave 266.9 MiB/s,
/// p99 write latency 1.28 ms and write amplification 1.998 against four lanes' 264.6, 6.52 ms
/// and 2.023 (docs/BENCHMARKS.md).
pub const GC_LANES_AUTO: u32 = 1;

/// The GC stream's zones (lanes) a volume of `layout` mounted with `opts` (hot zones already
/// chosen) keeps: one, and more while the open zones stay within the spare's open-zone budget
/// (`OPEN_ZONES_PER_COLLECTABLE_ZONE`) and the device's open and active limits, and at most
/// `opts.gc_lanes_max`, or `GC_LANES_AUTO` when that is 0.
pub fn gc_lanes(layout: &Layout, opts: &MountOptions) -> u32 {
    let zb = layout.zone_blocks.max(1);
    let collectable_zones = layout.spare().map_or(0, |s| s.collectable / zb);
    let open_budget = (collectable_zones as f64 * OPEN_ZONES_PER_COLLECTABLE_ZONE) as u64;
    // Hot zones, cold, GC, cold GC and a checkpoint zone are open already.
    let open = u64::from(opts.hot_zones) + 4;
    let g = layout.geometry;
    let device = [g.max_open, g.max_active]
        .into_iter()
        .filter(|l| *l != 0)
        .min()
        .map_or(u64::MAX, u64::from);
    let extra = open_budget
        .saturating_sub(open)
        .min(device.saturating_sub(open))
        .min(u64::from(GC_LANES_MAX - 1));
    let cap = match opts.gc_lanes_max {
        0 => GC_LANES_AUTO,
        n => n,
    };
    1 + (extra as u32).min(cap - 1)
}

/// A garbage-collection round: victims collected together, so that one device flush makes all
/// their copies durable and their resets are issued together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// The victims, each marked as being collected.
    pub victims: Vec<u32>,
    /// Their live blocks (sorted physical addresses) bound for the GC stream.
    pub hot: Vec<u32>,
    /// Their live blocks bound for the cold GC stream (cold data and live trim records).
    pub cold: Vec<u32>,
    /// GC zones `hot` is split over, in equal contiguous chunks, copied concurrently.
    pub lanes: usize,
    /// Planned counting zones the finish under way was about to reset
    /// (`Mapping::resets_owed`): if the device retires some of them instead, its lanes may
    /// find no free zone, and the round then ends early (`Mapping::end_round_early`).
    pub on_owed_resets: bool,
}

/// What a writer of a stream does next to get a zone with room.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The slot's zone is still open for the stream with room: write there.
    Use(u32),
    /// A free zone was opened for the stream: write its header, then write there.
    Open { zone: u32, generation: u64 },
    /// Space is short and garbage collection can make some: give the slot up and wait for
    /// space to change.
    Wait,
    /// Nothing was reclaimable, so these idle open zones were sealed for garbage collection:
    /// finish them on the device, wake garbage collection, and ask again.
    Seal(Vec<u32>),
    /// A user stream can open no zone and nothing can become reclaimable: write into another
    /// user stream's open zone if one has room, else report no space.
    Borrow,
    /// A garbage-collection stream can open no zone.
    NoSpace,
    /// A garbage-collection stream can open no zone yet, but the finish under way resets
    /// zones its round counted on (`Mapping::resets_owed`): wait for space to change.
    AwaitResets,
}

/// An acquisition decision, and whether garbage collection must be woken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquirePlan {
    pub next: Acquire,
    pub wake_gc: bool,
}

/// Which write to a data zone failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// The zone header (not counted as a write in flight).
    Header,
    /// User data or a trim record.
    Data,
    /// An in-band summary block.
    Summary,
    /// A garbage-collection copy.
    Copy,
}

/// What the shell does after a write to a data zone failed for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Finish `zone` on the device; it is never written again.
    Seal { zone: u32 },
    /// As `Seal`; and `blocks` of its blocks still await a summary that can no longer be
    /// written, so their tags stay pending for the next flush to checkpoint.
    SealKeepTags { zone: u32, blocks: usize },
}

/// What a flush does once every open zone's pending summary is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlushPlan {
    /// Flush the device: every written block's tag is durable with it.
    Device,
    /// Blocks of these sealed zones have no summary: write a checkpoint (which flushes the
    /// device first and maps them), then forget their tags (`Mapping::forget_tags`).
    Checkpoint { zones: Vec<u32> },
}

/// Whether open hot zone `zone`, whose next block is on die `die`, should give way to another
/// hot zone for the next user write: some open hot zone with a lower number writes to a die
/// fewer than `gap` dies away, either way round the `dies` dies (`hot`: each open hot zone
/// and the die of its write pointer), or an open zone of another stream writes to the same die
/// (`others`: their dies; cold user data, GC copies), whose writers do not give way
/// (`Mapping::open_dies`). Hot zones written round-robin advance in step, so two that opened
/// at offsets on the same die program that die together for as long as both are open, and
/// reads of that die wait behind both programs: the 28% randrw phase of block-overwrite.fio on
/// 1 GiB ran at 428 MiB/s instead of 473 whenever the overwrite before it left two hot zones
/// so (docs/BENCHMARKS.md). Two a die or two apart overlap too, since a die programs a unit
/// for longer than the pair takes to move a die on (`hot_zone_gap`). The lower-numbered zone
/// goes on, so the pair moves apart and stays apart.
pub fn hot_zone_gives_way(
    hot: &[(u32, u64)],
    others: &[u64],
    zone: u32,
    die: u64,
    gap: u64,
    dies: u64,
) -> bool {
    let dies = dies.max(1);
    let near = |d: u64| {
        let ahead = (d % dies + dies - die % dies) % dies;
        ahead.min(dies - ahead) < gap.max(1)
    };
    others.contains(&die) || hot.iter().any(|&(z, d)| z < zone && near(d))
}

/// How many dies apart (`hot_zone_gives_way`) `hot` hot zones of `zone_blocks` blocks are
/// kept on a device striped as `stripe`: half the spacing of hot zones spread evenly over the
/// dies (`stripe.dies / hot / 2`, at least 1) where a zone holds a whole number of rounds of
/// the stripe, 1 (only not on the same die) otherwise. Hot zones written round-robin advance
/// in step, and where a zone is whole rounds of the stripe the next zone a filled one opens
/// starts on the die the filled one would have reached, so the distance between two hot zones
/// outlives their zones and stays what the first of them left it (at 28% on 1 GiB, zones of
/// 1,024 blocks over 32 dies of 8-block units: the randrw phase's hot zones 1-3 dies apart at
/// seed 1 and 9-11 at seed 2, 445.9 against 473.2 MiB/s; a unit's two page programs keep a
/// die about 1.9 ms busy, over the 0.45 ms the pair takes to move a die on at that phase's
/// rate). Kept 8 apart, seeds 1-4 gave 472.2-475.3. Where zones are not whole rounds each
/// zone opened shifts the distance, and keeping 2 to 8 apart moved the 28% run on 4 GiB
/// (zones of 3,320 blocks, four hot zones) from 389.2 to 383.1-383.7 MiB/s
/// (docs/BENCHMARKS.md).
pub fn hot_zone_gap(stripe: &Stripe, zone_blocks: u64, hot: usize) -> u64 {
    let round = stripe.unit_blocks.max(1) * stripe.dies.max(1);
    if hot < 2 || !zone_blocks.is_multiple_of(round) {
        return 1;
    }
    (stripe.dies / hot as u64 / 2).max(1)
}

impl Mapping {
    /// The dies (`stripe`) the open zones' write pointers are on: each open hot zone with its
    /// die, and the dies of the other streams' open zones.
    /// O(open zones): it walks the list of open zones (`Mapping::open_zones`).
    pub fn open_dies(&self, stripe: &Stripe) -> (Vec<(u32, u64)>, Vec<u64>) {
        let mut hot = Vec::new();
        let mut others = Vec::new();
        for &z in self.open_zones() {
            let zone = self.zone(z);
            match zone.use_ {
                ZoneUse::Open(Stream::Hot) => hot.push((z, stripe.die(zone.reserved))),
                ZoneUse::Open(_) => others.push(stripe.die(zone.reserved)),
                _ => {}
            }
        }
        (hot, others)
    }
}

impl Mapping {
    /// The zone a slot holding `held` (zone, generation) may go on writing for `stream`: still
    /// open for it in the same generation, with room.
    pub fn usable_zone(&self, held: Option<(u32, u64)>, stream: Stream) -> Option<u32> {
        let (z, generation) = held?;
        let zone = self.zone(z);
        // The zone may have filled, been collected and even reopened since.
        (zone.generation == generation
            && zone.use_ == ZoneUse::Open(stream)
            && zone.reserved < self.layout.zone_blocks)
            .then_some(z)
    }

    /// The user streams' room before they need a free zone (`SpacePolicy::gc_may_wait`).
    pub fn user_room(&self) -> UserRoom {
        let least = (0..self.layout.data_zones)
            .filter(|&z| matches!(self.zone(z).use_, ZoneUse::Open(Stream::Hot | Stream::Cold)))
            .map(|z| self.data_room(z))
            .min();
        UserRoom {
            waiting: self.user_waiting,
            least,
        }
    }

    /// Whether garbage collection has a victim or is collecting one.
    pub fn reclaimable(&self, policy: VictimPolicy) -> bool {
        self.pick_victim(policy).is_some() || self.collecting_any()
    }

    /// Decides how a slot of `stream` holding `held` gets a zone with room. Opening a zone and
    /// sealing idle zones take effect here; the shell writes the header or finishes them.
    pub fn plan_acquire(
        &mut self,
        held: Option<(u32, u64)>,
        stream: Stream,
        policy: &SpacePolicy,
    ) -> AcquirePlan {
        if let Some(z) = self.usable_zone(held, stream) {
            return AcquirePlan {
                next: Acquire::Use(z),
                wake_gc: false,
            };
        }
        let free = self.free_zones();
        let wake_gc = policy.gc_wanted(free);
        let plan = |next| AcquirePlan { next, wake_gc };
        // A zone threaded logging made ready takes no free zone (threaded.rs).
        if let Some((zone, generation)) = self.tl_take(stream) {
            return plan(Acquire::Open { zone, generation });
        }
        let reclaimable = self.reclaimable(policy.victim_policy);
        if free > policy.floor(stream, reclaimable) {
            if let Some((zone, generation)) = self.open_zone(stream) {
                return plan(Acquire::Open { zone, generation });
            }
        }
        if stream.is_gc() {
            // A round planned on the resets of the finish under way waits for them.
            if self.resets_owed > 0 {
                return plan(Acquire::AwaitResets);
            }
            return plan(Acquire::NoSpace);
        }
        if reclaimable || self.open_zone_filling() {
            self.user_waiting = true;
            return plan(Acquire::Wait);
        }
        // All reclaimable space sits in open zones: seal the idle ones. A zone whose blocks
        // await their summary is not sealed: the summary needs its last block.
        let may_seal: Vec<bool> = self.summary_tags.iter().map(Vec::is_empty).collect();
        let sealed = self.seal_idle(|z| may_seal.get(z as usize).copied().unwrap_or(false));
        if sealed.is_empty() {
            plan(Acquire::Borrow)
        } else {
            plan(Acquire::Seal(sealed))
        }
    }

    /// Decides whether a user write of `blocks` blocks goes now (and counts it) or waits for
    /// garbage collection to copy more (`Throttle`). Not throttled when nothing is
    /// reclaimable: waiting would wait for nothing (the space rules of `plan_acquire` apply).
    pub fn plan_admit(&mut self, blocks: u64, policy: &SpacePolicy) -> Admit {
        let owed = policy.owed(self.free_zones());
        // Whether a victim exists is a scan of every zone, asked only when the answer
        // matters: not for the common write with nothing owed and no pacing.
        let reclaimable =
            (owed > 0 || policy.pace_rounds) && self.reclaimable(policy.victim_policy);
        if owed == 0 || !reclaimable {
            let pace = self.throttle.pace;
            self.throttle = Throttle {
                pace,
                ..Throttle::default()
            };
            // Nothing reclaimable: no copy would ever pay, and the space rules of
            // `plan_acquire` (sealing idle zones) are what lets the writer on.
            if owed == 0 && reclaimable && policy.pace_rounds {
                return self.plan_pace(blocks, policy);
            }
            return Admit::Go;
        }
        if owed != self.throttle.owed {
            self.throttle = Throttle {
                owed,
                gc_mark: self.counters.gc_blocks,
                admitted: 0,
                pace: RoundPace::default(),
            };
        }
        let copied = self.counters.gc_blocks - self.throttle.gc_mark;
        let slack = self.zone_payload_blocks();
        let allowed = policy.user_blocks_allowed(owed, copied, slack);
        if self.throttle.admitted + blocks <= allowed {
            self.throttle.admitted += blocks;
            Admit::Go
        } else {
            self.counters.throttle_waits += 1;
            Admit::Wait
        }
    }

    /// Blocks user writes may still take before they wait for space: the room of the open
    /// hot zones, and the payload of the free zones above the floor (`floor` free zones).
    pub fn paced_room(&self, floor: u32) -> u64 {
        let open: u64 = (self.open_zones().iter().copied())
            .filter(|&z| self.zone(z).use_ == ZoneUse::Open(Stream::Hot))
            .map(|z| self.data_room(z))
            .sum();
        let free = u64::from(self.free_zones().saturating_sub(floor));
        open + free * self.zone_payload_blocks()
    }

    /// A garbage-collection round was planned that copies `copies` blocks out of `victims`
    /// victims: user writes are paced by it from now on (`RoundPace`).
    pub fn pace_round(&mut self, victims: usize, copies: u64) {
        let payload = self.zone_payload_blocks();
        self.throttle.pace = RoundPace {
            copies,
            yields: (victims as u64 * payload).saturating_sub(copies),
            gc_seen: self.counters.gc_blocks,
            credit: 0,
        };
    }

    /// `plan_admit` on a volume paced by rounds (`RoundPace`): a write goes while user writes
    /// have a third of a zone's payload of room (`PACE_ROOM_DIVISOR`), or while a round
    /// copies nothing, or while user writes are separated into hot and cold streams, or on
    /// the credit the round's copies earned since; otherwise it waits for more copies.
    fn plan_pace(&mut self, blocks: u64, policy: &SpacePolicy) -> Admit {
        let target = (self.zone_payload_blocks() / PACE_ROOM_DIVISOR).max(1);
        let room = self.paced_room(policy.floor(Stream::Hot, true));
        let gc = self.counters.gc_blocks;
        // Separated streams write to two zones, of which the hot one's room says little, and
        // pacing them cost skewed-overwrite.fio 5-6% (docs/BENCHMARKS.md): not paced.
        let separating = self.separating();
        let pace = &mut self.throttle.pace;
        let copied = gc.saturating_sub(pace.gc_seen);
        pace.gc_seen = gc;
        if room >= target || pace.copies == 0 || separating {
            pace.credit = 0;
            return Admit::Go;
        }
        let unit = u128::from(pace.copies) * u128::from(target);
        pace.credit += u128::from(copied) * u128::from(pace.yields) * u128::from(room);
        // At most the paced room's worth ahead, so copies made while no writer asked do not
        // come out as a burst.
        pace.credit = pace.credit.min(unit * u128::from(target));
        let cost = unit * u128::from(blocks);
        if pace.credit >= cost {
            pace.credit -= cost;
            Admit::Go
        } else {
            self.counters.throttle_waits += 1;
            Admit::Wait
        }
    }

    /// Blocks of a fresh data zone that can hold data: all but the header and, in summary
    /// mode, the summary blocks.
    pub fn zone_payload_blocks(&self) -> u64 {
        let zb = self.layout.zone_blocks;
        if !self.layout.summary_mode() {
            return zb - 1;
        }
        let group = records::summary_capacity(self.layout.geometry.block_size as usize) as u64;
        (zb - 1).saturating_sub((zb - 1).div_ceil(group + 1))
    }

    /// The `lanes` smallest rooms (blocks a write may still take) among the open zones of GC
    /// stream `stream` and `slots - open` empty slots (room 0): the worst the first `lanes`
    /// of its `slots` slots can hold, whichever zones they hold.
    fn gc_open_rooms(&self, stream: Stream, slots: usize, lanes: usize) -> Vec<u64> {
        let mut rooms: Vec<u64> = (0..self.layout.data_zones)
            .filter(|&z| self.zone(z).use_ == ZoneUse::Open(stream))
            .map(|z| self.data_room(z))
            .collect();
        rooms.resize(rooms.len().max(slots), 0);
        rooms.sort_unstable();
        rooms.truncate(lanes);
        rooms
    }

    /// Fresh zones a round may need to copy `n[0]` blocks over the first `lanes` of the GC
    /// stream's `slots` zones (equal chunks) and `n[1]` blocks into the cold GC zone, counting
    /// each lane's zone as holding the least room any of them does.
    fn round_zones(&self, n: [u64; 2], slots: usize, lanes: usize) -> u64 {
        let payload = self.zone_payload_blocks().max(1);
        let chunk = n[0].div_ceil(lanes.max(1) as u64);
        let hot: u64 = self
            .gc_open_rooms(Stream::Gc, slots, lanes)
            .iter()
            .map(|room| chunk.saturating_sub(*room).div_ceil(payload))
            .sum();
        let cold_room = self
            .gc_open_rooms(Stream::GcCold, 1, 1)
            .first()
            .copied()
            .unwrap_or(0);
        hot + n[1].saturating_sub(cold_room).div_ceil(payload)
    }

    /// Picks the victims of the next garbage-collection round, best first by `policy`, and
    /// marks them as being collected; None when nothing is reclaimable. Victims are added while
    /// their live blocks fit the GC streams' open zones plus the free zones user writes cannot
    /// take (`SpacePolicy::floor`), so the round's copies never run out of space before its
    /// resets free any; the first victim is taken regardless (the reserve zones are kept for
    /// it), unless `must_fit`: while an earlier round's victims still await their reset, that
    /// round may hold the reserve, so then the first victim must fit too. At most
    /// `victims_max` (and `ROUND_VICTIMS_MAX`) victims. With a lead
    /// (`MountOptions::gc_lead_blocks`) no more victims than free the zone the users need:
    /// the victims beyond it would have lost more blocks by the time their space was wanted
    /// (80/20 on 160 zones of 1,024 blocks: write amplification 2.318 -> 2.307).
    pub fn plan_round(
        &mut self,
        policy: &SpacePolicy,
        hot_cold: bool,
        victims_max: usize,
        lanes_max: usize,
        must_fit: bool,
    ) -> Option<Round> {
        // Writers waiting for a zone are served by this round (or wait again and say so).
        self.user_waiting = false;
        // Zones a finish under way is about to reset count too (`Mapping::resets_owed`): the
        // users cannot take them while the free zones are at or below the floor.
        let zones_budget =
            u64::from((self.free_zones() + self.resets_owed).min(policy.floor(Stream::Hot, true)));
        let slots = lanes_max.max(1);
        let mut round = Round::default();
        let mut need = [0u64; 2];
        // With a lead (`SpacePolicy::gc_may_wait`) a round frees only the zone the users need:
        // the zones it takes the users above the floor, counting those an earlier round's
        // finish is about to reset.
        let wanted = (policy.floor(Stream::Hot, true) + 1)
            .saturating_sub(self.free_zones() + self.collecting_zones());
        while round.victims.len() < victims_max.clamp(1, ROUND_VICTIMS_MAX) {
            if policy.gc_lead_blocks.is_some() && !round.victims.is_empty() {
                let fresh = self.round_zones(need, slots, 1);
                if round.victims.len() as u64 >= fresh + u64::from(wanted) {
                    break;
                }
            }
            let Some(v) = self.pick_victim(policy.victim_policy) else {
                break;
            };
            let (data, trims) = self.live_blocks(v);
            let mut hot = Vec::new();
            let mut cold = Vec::new();
            // Copies are split by temperature, so blocks rewritten soon do not share zones
            // with blocks that stay.
            for (p, lba) in &data {
                match self.classify_copy(*lba, hot_cold, v) {
                    Stream::Gc => hot.push(*p),
                    _ => cold.push(*p),
                }
            }
            // Live trim records are long-lived (they stay until a checkpoint covers them), so
            // they go with the cold copies; with one GC stream, with the rest, so that a
            // victim never needs a second fresh zone (`reserve_zones`).
            let records = trims.iter().map(|(p, _)| *p);
            if hot_cold {
                cold.extend(records);
            } else {
                hot.extend(records);
            }
            let mut more = [need[0] + hot.len() as u64, need[1] + cold.len() as u64];
            // One free zone is kept for two GC streams (`reserve_zones`): below a floor of
            // 2, a first victim whose split copies would need more fresh zones than the space
            // holds sends all of them to one stream, the cold one if they fit there. Its
            // copies never outnumber a zone's payload, so one fresh zone then takes them.
            // At a floor of 2 or more the split always had its two zones, and rounds planned
            // with fewer free (while the previous round finishes) only take victims that fit.
            if hot_cold
                && policy.floor(Stream::Hot, true) < 2
                && round.victims.is_empty()
                && self.round_zones(more, slots, 1) > zones_budget
            {
                let all = (hot.len() + cold.len()) as u64;
                if self.round_zones([need[0], need[1] + all], slots, 1) <= zones_budget {
                    cold.append(&mut hot);
                    self.counters.gc_merged_victims += 1;
                } else if self.round_zones([need[0] + all, need[1]], slots, 1) <= zones_budget {
                    hot.append(&mut cold);
                    self.counters.gc_merged_victims += 1;
                }
                more = [need[0] + hot.len() as u64, need[1] + cold.len() as u64];
            }
            let first = round.victims.is_empty() && !must_fit;
            if !first && self.round_zones(more, slots, 1) > zones_budget {
                break;
            }
            need = more;
            self.start_collecting(v);
            round.victims.push(v);
            round.hot.extend(hot);
            round.cold.extend(cold);
        }
        if round.victims.is_empty() {
            return None;
        }
        if self.resets_owed > 0 {
            self.counters.gc_rounds_on_owed_resets += 1;
            round.on_owed_resets = true;
        }
        // As many lanes as the space allows: each may end in a fresh zone of its own.
        round.lanes = (1..=slots)
            .rev()
            .find(|&l| l == 1 || self.round_zones(need, slots, l) <= zones_budget)
            .unwrap_or(1);
        round.hot.sort_unstable();
        round.cold.sort_unstable();
        self.pace_round(
            round.victims.len(),
            (round.hot.len() + round.cold.len()) as u64,
        );
        Some(round)
    }

    /// A round planned on the resets of the finish before it (`Round::on_owed_resets`) found
    /// no free zone once that finish had ended: the device retired some of the victims it
    /// counted on instead of resetting them. The round ends here: of `victims`, those its
    /// copies emptied are returned to be reset as usual; the others stop being collected and
    /// stay victims for a later round (what was copied out of them is mapped at its new
    /// place, every move being compare-and-swap on the mapping).
    pub fn end_round_early(&mut self, victims: &[u32]) -> Vec<u32> {
        self.counters.gc_rounds_ended_early += 1;
        let mut emptied = Vec::new();
        for &v in victims {
            let zone = &mut self.zones[v as usize];
            if zone.lost {
                continue;
            }
            if zone.valid == 0 {
                emptied.push(v);
            } else {
                zone.collecting = false;
            }
        }
        emptied
    }

    /// A write of `kind` to data zone `z` failed for good: ends it and seals the zone.
    pub fn plan_write_failed(&mut self, z: u32, kind: WriteKind) -> AfterFailure {
        if kind != WriteKind::Header {
            self.write_failed(z);
        }
        self.abandon(z);
        match self.summary_tags[z as usize].len() {
            0 => AfterFailure::Seal { zone: z },
            blocks => AfterFailure::SealKeepTags { zone: z, blocks },
        }
    }

    /// Blocks of data zone `z` a write may still take: in summary mode, one block stays free
    /// for the summary and a group never outgrows one summary block.
    pub fn data_room(&self, z: u32) -> u64 {
        let room = self.layout.zone_blocks - self.zone(z).reserved;
        if !self.layout.summary_mode() {
            return room;
        }
        let group = records::summary_capacity(self.layout.geometry.block_size as usize) as u64;
        let pending = self.summary_tags[z as usize].len() as u64;
        room.saturating_sub(1).min(group.saturating_sub(pending))
    }

    /// Records the tags of blocks just written to zone `z` (summary mode only); true when its
    /// summary is due: the group is full, the zone is about to fill, or the write was FUA.
    pub fn note_tags(&mut self, z: u32, tags: impl Iterator<Item = Tag>, fua: bool) -> bool {
        if !self.layout.summary_mode() {
            return false;
        }
        self.summary_tags[z as usize].extend(tags);
        fua || self.data_room(z) == 0
    }

    /// The tags zone `z`'s next summary names.
    pub fn summary_tags(&self, z: u32) -> &[Tag] {
        &self.summary_tags[z as usize]
    }

    /// A summary naming the first `tags` pending tags of zone `z` was written at `offset`.
    pub fn summary_written(&mut self, z: u32, offset: u64, tags: usize) {
        self.complete_summary(z, offset);
        self.summary_tags[z as usize].drain(..tags);
    }

    /// Decides what a flush does after writing the open zones' summaries.
    pub fn plan_flush(&self) -> FlushPlan {
        let zones: Vec<u32> = (0..self.summary_tags.len() as u32)
            .filter(|z| {
                !self.summary_tags[*z as usize].is_empty()
                    && !matches!(self.zone(*z).use_, ZoneUse::Open(_))
            })
            .collect();
        if zones.is_empty() {
            FlushPlan::Device
        } else {
            FlushPlan::Checkpoint { zones }
        }
    }

    /// A checkpoint made the blocks of `zones` durable: their pending tags are not needed.
    pub fn forget_tags(&mut self, zones: &[u32]) {
        for z in zones {
            self.summary_tags[*z as usize].clear();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::RESERVE_ZONES_DEFAULT;

    fn layout(zones: u32, cap: u64, op_permille: u32) -> Layout {
        let g = crate::layout::tests::geo(zones, cap);
        Layout::new(g, op_permille, RESERVE_ZONES_DEFAULT).expect("layout")
    }

    #[test]
    fn a_hot_zone_on_the_die_of_a_lower_one_gives_way() {
        let stripe = Stripe {
            unit_blocks: 8,
            dies: 32,
        };
        // Block 0 is the header; units of 8 blocks go to dies 0, 1, ... 31, then 0 again.
        assert_eq!(stripe.die(0), 0);
        assert_eq!(stripe.die(15), 1);
        assert_eq!(stripe.die(8 * 32 + 9), 1);
        // Zones 7 and 12 write to die 3 together: 12 gives way, 7 goes on; zone 20 is alone.
        let open = [
            (7, stripe.die(3 * 8)),
            (12, stripe.die(8 * 32 + 3 * 8 + 5)),
            (20, stripe.die(8)),
        ];
        let way = |hot: &[(u32, u64)], others: &[u64], z: u32, d: u64| {
            hot_zone_gives_way(hot, others, z, d, 1, stripe.dies)
        };
        assert!(way(&open, &[], 12, open[1].1));
        assert!(!way(&open, &[], 7, open[0].1));
        assert!(!way(&open, &[], 20, open[2].1));
        // Once 7 took a unit more they are apart.
        let moved = [(7, stripe.die(4 * 8)), open[1], open[2]];
        assert!(!way(&moved, &[], 12, moved[1].1));
        // A cold or GC zone writing to die 1 (zone 20's) does not give way: zone 20 does.
        assert!(way(&moved, &[stripe.die(9)], 20, moved[2].1));
        assert!(!way(&moved, &[stripe.die(9)], 7, moved[0].1));
    }

    // Guards the distance kept between hot zones on zones of whole stripe rounds: two hot zones
    // a few dies apart there stay that far apart zone after zone, and a die programs a unit for
    // longer than the pair takes to move on, so at 28% on 1 GiB reads waited behind both
    // programs (randrw 445.9 MiB/s against 473.4) when they were only on different dies.
    #[test]
    fn hot_zones_on_whole_stripe_rounds_keep_apart_by_half_their_spacing() {
        let stripe = Stripe {
            unit_blocks: 8,
            dies: 32,
        };
        // Zones of 1,024 blocks are four rounds of the stripe: two hot zones are kept 8 dies
        // apart, four 4; zones of 3,320 blocks are not whole rounds, and one hot zone has
        // nothing to keep apart from.
        assert_eq!(hot_zone_gap(&stripe, 1024, 2), 8);
        assert_eq!(hot_zone_gap(&stripe, 1024, 4), 4);
        assert_eq!(hot_zone_gap(&stripe, 256, 2), 8);
        assert_eq!(hot_zone_gap(&stripe, 3320, 2), 1);
        assert_eq!(hot_zone_gap(&stripe, 1024, 1), 1);
        assert_eq!(hot_zone_gap(&stripe, 1024, 64), 1);
        let gap = hot_zone_gap(&stripe, 1024, 2);
        // Zone 9 writes to die 3, two dies past zone 4's die 1 (the seed-1 state): it gives
        // way, zone 4 goes on; so it does on the far side of die 0, 31 being 2 from 1.
        let pair = [(4, stripe.die(8 + 3)), (9, stripe.die(3 * 8 + 5))];
        assert!(hot_zone_gives_way(
            &pair,
            &[],
            9,
            pair[1].1,
            gap,
            stripe.dies
        ));
        assert!(!hot_zone_gives_way(
            &pair,
            &[],
            4,
            pair[0].1,
            gap,
            stripe.dies
        ));
        let wrapped = [(4, stripe.die(8)), (9, stripe.die(31 * 8))];
        assert!(hot_zone_gives_way(
            &wrapped,
            &[],
            9,
            wrapped[1].1,
            gap,
            stripe.dies
        ));
        // Once zone 4 went on to die 11, 8 dies from zone 9, neither gives way.
        let apart = [(4, stripe.die(11 * 8)), pair[1]];
        assert!(!hot_zone_gives_way(
            &apart,
            &[],
            9,
            apart[1].1,
            gap,
            stripe.dies
        ));
        // Another stream's zone still counts only on the same die.
        assert!(!hot_zone_gives_way(
            &apart,
            &[stripe.die(4 * 8)],
            9,
            apart[1].1,
            gap,
            stripe.dies
        ));
        assert!(hot_zone_gives_way(
            &apart,
            &[stripe.die(3 * 8)],
            9,
            apart[1].1,
            gap,
            stripe.dies
        ));
    }

    /// The open zones and their dies found by scanning every data zone, as `open_dies` did
    /// before the mapping kept a list of them.
    fn open_dies_by_scan(m: &Mapping, stripe: &Stripe) -> (Vec<(u32, u64)>, Vec<u64>) {
        let mut hot = Vec::new();
        let mut others = Vec::new();
        for z in 0..m.layout.data_zones {
            match m.zone(z).use_ {
                ZoneUse::Open(Stream::Hot) => hot.push((z, stripe.die(m.zone(z).reserved))),
                ZoneUse::Open(_) => others.push(stripe.die(m.zone(z).reserved)),
                _ => {}
            }
        }
        (hot, others)
    }

    // Guards the list of open zones that makes `open_dies` (asked on every hot write of a
    // volume with a stripe and several hot zones) cost O(open zones) instead of a scan of
    // every data zone: it must follow every way a zone opens and stops being open.
    #[test]
    fn the_list_of_open_zones_follows_opens_fills_seals_retirements_and_resets() {
        let l = layout(24, 64, 300);
        let stripe = Stripe {
            unit_blocks: 4,
            dies: 8,
        };
        let mut m = Mapping::new(l);
        let check = |m: &Mapping, what: &str| {
            m.verify().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                m.open_dies(&stripe),
                open_dies_by_scan(m, &stripe),
                "{what}"
            );
        };
        check(&m, "fresh");
        // Opens for every stream; hot zones fill and close as `write_lbas` goes.
        let (cold, _) = m.open_zone(Stream::Cold).expect("a free zone");
        let (gc, _) = m.open_zone(Stream::Gc).expect("a free zone");
        let (gc_cold, _) = m.open_zone(Stream::GcCold).expect("a free zone");
        write_lbas(&mut m, 0..200);
        assert_eq!(
            m.open_zones().len(),
            4,
            "cold, GC, cold GC and the last hot zone"
        );
        check(&m, "opened and filled");
        // A zone that reaches its end with a write in flight stays open until it ends.
        let r = m.reserve(cold, l.zone_blocks);
        assert!(m.open_zones().contains(&cold));
        check(&m, "filling");
        let seq = m.take_seq();
        m.complete_write(cold, r.offset, 300, r.blocks, seq);
        assert!(!m.open_zones().contains(&cold));
        check(&m, "filled by its last write");
        // Sealed after a failed write, and retired by the device.
        m.abandon(gc);
        m.retire(gc_cold, false);
        assert!(!m.open_zones().contains(&gc) && !m.open_zones().contains(&gc_cold));
        check(&m, "sealed and retired");
        // Rewriting the hot zones' blocks empties the first ones, which are reset and reopen.
        let first = (0..l.data_zones)
            .find(|&z| m.zone(z).use_ == ZoneUse::Full && m.zone(z).opened_for == Some(Stream::Hot))
            .expect("a full hot zone");
        write_lbas(&mut m, 0..200);
        assert_eq!(m.zone(first).valid, 0);
        m.zone_reset(first);
        check(&m, "reset");
        let (again, _) = m.open_zone(Stream::Cold).expect("a free zone");
        assert!(m.open_zones().contains(&again));
        check(&m, "reopened");
        // A mount finds no open zone: a fresh mapping has none, and recovery only fills
        // zones (its `verify` checks the list on every mount).
        assert!(Mapping::new(l).open_zones().is_empty());
    }

    #[test]
    fn small_spare_gets_few_open_zones_and_large_spare_keeps_them() {
        let opts = MountOptions::default();
        // 1 GiB at 7% in 1,024-block zones: about 13 zones to collect from.
        let small = tune_mount(&layout(274, 1024, 70), opts);
        let collectable = layout(274, 1024, 70).spare().expect("spare").collectable / 1024;
        let others = 3;
        assert!(
            u64::from(small.hot_zones) + others <= (collectable / 3).max(others + 1),
            "{} hot zones with {collectable} collectable zones",
            small.hot_zones
        );
        assert!(small.hot_zones >= 1);
        // About 149 zones to collect from: four, the most (`HOT_ZONE_COLLECTABLE_ZONES`).
        let large = tune_mount(&layout(800, 1024, 280), opts);
        assert_eq!(large.hot_zones, HOT_ZONES_AUTO_MAX);
        // An explicit count is the caller's to choose.
        let explicit = MountOptions {
            hot_zones: 3,
            ..opts
        };
        assert_eq!(tune_mount(&layout(274, 1024, 70), explicit).hot_zones, 3);
    }

    #[test]
    fn large_spares_get_a_floor_one_zone_higher_and_explicit_watermarks_stay() {
        let opts = MountOptions::default();
        let large = tune_mount(&layout(400, 1024, 280), opts);
        assert_eq!(
            (
                large.gc_foreground_free_zones,
                large.gc_background_free_zones
            ),
            (3, 4)
        );
        // Still no throttled band: the background watermark is one above the floor.
        let l = layout(400, 1024, 280);
        assert_eq!(SpacePolicy::new(&large, &l).throttle_band(), 1);
        let small = tune_mount(&layout(274, 1024, 70), opts);
        assert_eq!(
            (
                small.gc_foreground_free_zones,
                small.gc_background_free_zones
            ),
            (2, 3)
        );
        let explicit = MountOptions {
            gc_background_free_zones: 10,
            gc_foreground_free_zones: 2,
            ..opts
        };
        let kept = tune_mount(&l, explicit);
        assert_eq!(
            (kept.gc_foreground_free_zones, kept.gc_background_free_zones),
            (2, 10)
        );
        // An explicit floor gets collection from one zone above it.
        let floor_only = MountOptions {
            gc_foreground_free_zones: 5,
            ..opts
        };
        let tuned = tune_mount(&l, floor_only);
        assert_eq!(
            (
                tuned.gc_foreground_free_zones,
                tuned.gc_background_free_zones
            ),
            (5, 6)
        );
    }

    // Regression: on small spares the automatic choices kept four hot zones
    // (each round's resets then waited for a flush of their unflushed writes), paced user
    // writes (a flush every round) and a floor of three 256-block zones (rounds of six
    // copies), leaving the dies a third idle (block-overwrite.fio at 28% on 64-256 MiB).
    #[test]
    fn small_spares_of_small_zones_get_few_hot_zones_no_pacing_and_a_floor_of_whole_blocks() {
        let opts = MountOptions::default();
        // 128 MiB at 28% in 256-block zones: about 31 zones (7,900 blocks) to collect from.
        let l128 = layout(164, 256, 280);
        let t = tune_mount(&l128, opts);
        assert!(l128.spare().expect("spare").collectable / 256 < HOT_ZONE_COLLECTABLE_ZONES);
        assert_eq!(t.hot_zones, 1);
        assert_eq!(t.pace_rounds, Some(false));
        assert_eq!(
            (t.gc_foreground_free_zones, t.gc_background_free_zones),
            (2, 3)
        );
        // 256 MiB at 28%: about 66 zones (17,000 blocks), a wide spare.
        let t = tune_mount(&layout(328, 256, 280), opts);
        assert_eq!(t.hot_zones, 2);
        assert_eq!(t.pace_rounds, Some(false));
        assert_eq!(t.gc_run_on, Some(true));
        let floor = u64::from(t.gc_foreground_free_zones);
        assert!(floor * 256 >= WIDE_FLOOR_BLOCKS, "floor of {floor} zones");
        assert_eq!(t.gc_background_free_zones, t.gc_foreground_free_zones + 1);
        // 1 GiB in 1,024-block zones: two hot zones and a floor of 3 at 28% (67 zones to
        // collect from); one hot zone, paced, a floor of 2 at 7%, as before.
        let t = tune_mount(&layout(338, 1024, 280), opts);
        assert_eq!((t.hot_zones, t.gc_foreground_free_zones), (2, 3));
        // Zones of 3,320 blocks (4 GiB) keep four at 28%.
        assert_eq!(tune_mount(&layout(406, 3320, 280), opts).hot_zones, 4);
        let t = tune_mount(&layout(274, 1024, 70), opts);
        assert_eq!(t.hot_zones, 1);
        assert_eq!(t.pace_rounds, Some(true));
        assert_eq!(t.gc_foreground_free_zones, 2);
    }

    /// Writes `lbas` into zones of the hot stream one block at a time, opening zones as they
    /// fill, with ever newer sequence numbers (also for the unit tests of threaded.rs).
    pub(crate) fn write_lbas(m: &mut Mapping, lbas: impl Iterator<Item = u64>) {
        let mut open: Option<u32> = None;
        for lba in lbas {
            let z = match open.filter(|&z| m.zone(z).reserved < m.layout.zone_blocks) {
                Some(z) => z,
                None => {
                    let (z, _) = m.open_zone(Stream::Hot).expect("a free zone");
                    m.header_written(z);
                    open = Some(z);
                    z
                }
            };
            let r = m.reserve(z, 1);
            let seq = m.take_seq();
            m.complete_write(z, r.offset, lba, 1, seq);
        }
    }

    // Regression: garbage collection flushed the device and reset its victim once per victim,
    // so every victim paid a whole-device flush; a round must take several victims when their
    // live blocks fit, and never more than the space its copies may use.
    #[test]
    fn a_round_takes_the_victims_whose_copies_fit_and_marks_them() {
        let l = layout(40, 64, 1000);
        let mut m = Mapping::new(l);
        // The automatic floor of a small spare: two zones.
        let two = MountOptions {
            gc_foreground_free_zones: FOREGROUND_FREE_ZONES_AUTO,
            ..MountOptions::default()
        };
        let policy = SpacePolicy::new(&two, &l);
        let n = l.volume_blocks;
        write_lbas(&mut m, 0..n);
        // Rewrite every fourth block: the zones filled first are three quarters valid.
        write_lbas(&mut m, (0..n).step_by(4));
        let free_before = m.free_zones();
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, false)
            .expect("something to reclaim");
        assert!(round.victims.len() >= 2, "{round:?}");
        assert!(round.victims.len() <= ROUND_VICTIMS_MAX);
        // Every victim is marked, never picked twice, and the lists hold exactly their live
        // blocks, sorted.
        let mut live: Vec<u32> = Vec::new();
        for &v in &round.victims {
            assert!(m.zone(v).collecting);
            live.extend(m.live_blocks(v).0.iter().map(|(p, _)| *p));
        }
        live.sort_unstable();
        let mut listed = round.hot.clone();
        listed.extend(&round.cold);
        assert_eq!(listed, live);
        assert!(round.hot.windows(2).all(|w| w[0] < w[1]));
        // The copies fit the free zones user writes must leave (no GC zone is open yet).
        let budget = u64::from(free_before.min(policy.floor(Stream::Hot, true)));
        assert!(
            live.len() as u64 <= budget * m.zone_payload_blocks(),
            "{} live blocks for {budget} zones",
            live.len()
        );
        // Adding the next victim would not have fitted.
        let next = m.pick_victim(policy.victim_policy).expect("more victims");
        let more = live.len() + m.live_blocks(next).0.len();
        assert!(
            more as u64 > budget * m.zone_payload_blocks()
                || round.victims.len() == ROUND_VICTIMS_MAX
        );
        // A second round does not take the first one's victims.
        let again = m
            .plan_round(&policy, false, 1, 1, false)
            .expect("more victims");
        assert_eq!(again.victims.len(), 1);
        assert!(!round.victims.contains(&again.victims[0]));
    }

    #[test]
    fn gc_lanes_follow_the_spare_and_a_round_uses_only_lanes_whose_zones_fit() {
        let opts = MountOptions::default();
        let large = layout(400, 1024, 280);
        assert_eq!(gc_lanes(&large, &tune_mount(&large, opts)), GC_LANES_AUTO);
        // A cap below what the spare affords is honoured; one above changes nothing.
        for (cap, lanes) in [(1, 1), (2, 2), (GC_LANES_MAX + 3, GC_LANES_MAX)] {
            let capped = MountOptions {
                gc_lanes_max: cap,
                ..opts
            };
            assert_eq!(gc_lanes(&large, &tune_mount(&large, capped)), lanes);
        }
        let small = layout(274, 1024, 70);
        assert_eq!(gc_lanes(&small, &tune_mount(&small, opts)), 1);
        // Two free zones the users must leave, no GC zone open: a small round can spread
        // over two lanes (a fresh zone each), never four.
        let l = layout(40, 64, 1000);
        let mut m = Mapping::new(l);
        let two = MountOptions {
            gc_foreground_free_zones: FOREGROUND_FREE_ZONES_AUTO,
            ..opts
        };
        let policy = SpacePolicy::new(&two, &l);
        write_lbas(&mut m, 0..l.volume_blocks);
        write_lbas(&mut m, 0..8);
        let round = m.plan_round(&policy, false, 1, 4, false).expect("a victim");
        assert_eq!(round.lanes, 2, "{round:?}");
    }

    #[test]
    fn a_round_always_takes_one_victim_and_none_when_nothing_is_reclaimable() {
        let l = layout(40, 64, 1000);
        let mut m = Mapping::new(l);
        let policy = SpacePolicy::new(&MountOptions::default(), &l);
        let n = l.volume_blocks;
        write_lbas(&mut m, 0..n);
        assert_eq!(
            m.plan_round(&policy, false, ROUND_VICTIMS_MAX, 4, false),
            None
        );
        write_lbas(&mut m, 0..1);
        // Use every free zone: the first victim is still taken (the reserve is kept for it).
        while m.open_zone(Stream::Cold).is_some() {}
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 4, false)
            .expect("a victim");
        assert_eq!(round.victims.len(), 1);
        // No room for more lanes than one.
        assert_eq!(round.lanes, 1);
    }

    /// A 40 x 64 mapping whose volume is written whole (and one block again), with every
    /// free zone opened by the cold stream: no zone is free. With the default policy.
    fn full_with_every_zone_open() -> (Mapping, SpacePolicy) {
        let l = layout(40, 64, 1000);
        let mut m = Mapping::new(l);
        let policy = SpacePolicy::new(&MountOptions::default(), &l);
        write_lbas(&mut m, 0..l.volume_blocks);
        write_lbas(&mut m, 0..1);
        while m.open_zone(Stream::Cold).is_some() {}
        assert_eq!(m.free_zones(), 0);
        (m, policy)
    }

    // Guards the overlap of rounds: a round planned while the previous round's victims still
    // await their reset must not count on the reserve (that round may hold it), so even its
    // first victim is taken only if its copies fit; taking it regardless would let the
    // copies run out of zones and fail the volume with no space.
    #[test]
    fn a_round_planned_while_another_finishes_takes_only_victims_that_fit() {
        let (mut m, policy) = full_with_every_zone_open();
        assert_eq!(
            m.plan_round(&policy, false, ROUND_VICTIMS_MAX, 4, true),
            None
        );
        // Nothing was marked: the same victim is there for a round that may use the reserve.
        assert!(!m.collecting_any());
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 4, false)
            .expect("a victim");
        assert_eq!(round.victims.len(), 1);
    }

    // Collection that runs on across rounds (`MountOptions::gc_run_on`): with the free zones
    // used up, a round planned beside a finish took nothing (the gap between rounds in which
    // the dies idled, docs/BENCHMARKS.md); counting the zones that finish resets it takes
    // the victim, and its GC lane, finding no free zone, waits for those resets instead of
    // reporting no space, until the finish has ended.
    #[test]
    fn a_round_planned_beside_a_finish_counts_its_resets_and_waits_for_them() {
        let (mut m, policy) = full_with_every_zone_open();
        assert_eq!(
            m.plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, true),
            None
        );
        assert_eq!(
            m.plan_acquire(None, Stream::Gc, &policy).next,
            Acquire::NoSpace
        );
        // A finish under way is to reset two zones.
        m.resets_owed = 2;
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, true)
            .expect("a victim that fits the zones to be reset");
        assert_eq!(round.victims.len(), 1);
        assert_eq!(m.counters.gc_rounds_on_owed_resets, 1);
        assert_eq!(
            m.plan_acquire(None, Stream::Gc, &policy).next,
            Acquire::AwaitResets
        );
        // User streams never take the zones to be reset: they wait as before.
        assert_eq!(
            m.plan_acquire(None, Stream::Hot, &policy).next,
            Acquire::Wait
        );
        // The finish ended without freeing them: no space, not a wait that never ends.
        m.resets_owed = 0;
        assert_eq!(
            m.plan_acquire(None, Stream::Gc, &policy).next,
            Acquire::NoSpace
        );
    }

    // A round planned on owed resets whose lane found no free zone once the finish had ended
    // (the device retired victims it counted on) ends early instead of failing the volume:
    // a victim it did not empty stops being collected and is a victim again for a later round.
    #[test]
    fn a_round_short_of_owed_resets_ends_early_and_its_victims_stay_victims() {
        let (mut m, policy) = full_with_every_zone_open();
        m.resets_owed = 2;
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, true)
            .expect("a victim that fits the zones to be reset");
        assert!(round.on_owed_resets);
        let v = round.victims[0];
        assert!(m.zone(v).collecting);
        m.resets_owed = 0;
        assert_eq!(m.end_round_early(&round.victims), Vec::<u32>::new());
        assert_eq!(m.counters.gc_rounds_ended_early, 1);
        assert!(!m.collecting_any());
        assert_eq!(m.pick_victim(policy.victim_policy), Some(v));
        // A round planned on the free zones alone is not one of those.
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, false)
            .expect("a victim");
        assert!(!round.on_owed_resets);
    }

    // Regression: on a small spare (automatic watermarks one zone apart, so no throttled
    // band) user writes ran at full speed until their zone filled with the free zones at the
    // floor, then every writer stopped until a round's resets freed a zone: at 7% on 1 GiB
    // block-overwrite.fio's p99 write latency was 43 ms, several rounds (docs/BENCHMARKS.md).
    // Paced by the round under way, once their room is under a third of a zone each block the
    // round copies admits `yields / copies` user blocks scaled by the room left: writers slow
    // down as the room runs out, in proportion to the copies owed, and never stop while the
    // round copies.
    #[test]
    fn user_writes_are_paced_by_the_round_under_way_once_their_room_is_short() {
        let one_stream = MountOptions {
            hot_cold: false,
            hot_zones: 1,
            ..MountOptions::default()
        };
        let auto = tune_mount(&layout(64, 1024, 300), one_stream);
        assert_eq!(auto.pace_rounds, Some(true), "a small spare is paced");
        assert_eq!(auto.copies_per_lane, PACED_COPIES_PER_LANE);
        // Not zones of 256 blocks or fewer (`PACED_ZONE_BLOCKS_MIN`), unless asked.
        let l = layout(64, 64, 300);
        assert_eq!(tune_mount(&l, one_stream).pace_rounds, Some(false));
        let opts = tune_mount(
            &l,
            MountOptions {
                pace_rounds: Some(true),
                ..one_stream
            },
        );
        assert_eq!(opts.copies_per_lane, PACED_COPIES_PER_LANE);
        // Not paced: large zones, wide spares, watermarks set by the mount.
        let big = layout(64, 4096, 300);
        assert_eq!(
            tune_mount(&big, MountOptions::default()).pace_rounds,
            Some(false)
        );
        let wide = layout(256, 64, 300);
        assert_eq!(
            tune_mount(&wide, MountOptions::default()).pace_rounds,
            Some(false)
        );
        // Collection runs on across rounds on wide spares whose watermarks are chosen here,
        // with a deeper pipeline; not on paced volumes, nor with a lead or set watermarks.
        let run_on = tune_mount(&wide, MountOptions::default());
        assert_eq!(run_on.gc_run_on, Some(true));
        assert_eq!(run_on.copies_per_lane, RUN_ON_COPIES_PER_LANE);
        assert!(SpacePolicy::new(&run_on, &wide).run_on);
        assert_eq!(
            tune_mount(&l, MountOptions::default()).gc_run_on,
            Some(false)
        );
        for not in [
            MountOptions {
                gc_lead_blocks: Some(0),
                ..MountOptions::default()
            },
            MountOptions {
                gc_foreground_free_zones: 3,
                ..MountOptions::default()
            },
        ] {
            let t = tune_mount(&wide, not);
            assert_eq!(t.gc_run_on, Some(false), "{not:?}");
            assert_eq!(t.copies_per_lane, COPIES_PER_LANE_DEFAULT);
        }
        let forced = MountOptions {
            gc_run_on: Some(true),
            gc_lead_blocks: Some(0),
            ..MountOptions::default()
        };
        assert!(!SpacePolicy::new(&tune_mount(&wide, forced), &wide).run_on);
        let set = MountOptions {
            gc_foreground_free_zones: 2,
            ..MountOptions::default()
        };
        let set = tune_mount(&l, set);
        assert_eq!(set.pace_rounds, Some(false));
        assert_eq!(set.copies_per_lane, COPIES_PER_LANE_DEFAULT);
        // A collection lead waits for writers that wait for a zone, not for paced ones.
        let lead = MountOptions {
            gc_lead_blocks: Some(0),
            ..MountOptions::default()
        };
        assert_eq!(tune_mount(&l, lead).pace_rounds, Some(false));
        let forced = MountOptions {
            pace_rounds: Some(true),
            ..lead
        };
        assert!(!SpacePolicy::new(&tune_mount(&l, forced), &l).pace_rounds);
        let policy = SpacePolicy::new(&opts, &l);
        assert_eq!(policy.throttle_band(), 1, "no throttled band");
        let floor = policy.floor(Stream::Hot, true);
        let mut m = Mapping::new(l);
        write_lbas(&mut m, 0..l.volume_blocks);
        write_lbas(&mut m, (0..l.volume_blocks).step_by(8));
        let hot = *m
            .open_zones()
            .iter()
            .find(|&&z| m.zone(z).use_ == ZoneUse::Open(Stream::Hot))
            .expect("an open hot zone");
        while m.free_zones() > floor {
            m.open_zone(Stream::Cold).expect("a free zone");
        }
        let target = m.zone_payload_blocks() / PACE_ROOM_DIVISOR;
        // A zone's worth of room or more: writes go unpaced.
        let room = m.data_room(hot);
        assert!(room >= target, "room {room}");
        assert_eq!(m.paced_room(floor), room);
        assert_eq!(m.plan_admit(1, &policy), Admit::Go);
        // Leave user writes half the paced room.
        m.reserve(hot, room - target / 2);
        let room = m.paced_room(floor);
        assert_eq!(room, target / 2);
        // No round under way yet: nothing to pace by.
        assert_eq!(m.plan_admit(1, &policy), Admit::Go);
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, false)
            .expect("a round");
        let copies = (round.hot.len() + round.cold.len()) as u64;
        let yields = round.victims.len() as u64 * m.zone_payload_blocks() - copies;
        assert!(copies > 0 && yields > 0);
        // Before the round copies anything a writer waits, and it is counted.
        let waits = m.counters.throttle_waits;
        assert_eq!(m.plan_admit(1, &policy), Admit::Wait);
        assert_eq!(m.counters.throttle_waits, waits + 1);
        // Each copied block admits yields / copies x room / target user blocks.
        let admitted = |m: &mut Mapping| {
            let mut n = 0u64;
            while m.plan_admit(1, &policy) == Admit::Go {
                n += 1;
            }
            n
        };
        m.counters.gc_blocks += copies / 2;
        let half = admitted(&mut m);
        let want = (copies / 2) * yields * room / (copies * target);
        assert_eq!(half, want, "admitted for half the round's copies");
        assert!(half > 0, "writers must not stop while the round copies");
        // Less room, fewer blocks per copy: writers slow down as the room runs out.
        m.reserve(hot, room - target / 4);
        let less = m.paced_room(floor);
        m.counters.gc_blocks += copies / 2;
        let low = admitted(&mut m);
        // (What the first half's credit left, under one block, may add one.)
        let want = (copies / 2) * yields * less / (copies * target);
        assert!(
            (want..=want + 1).contains(&low),
            "{low} admitted, {want} owed"
        );
        assert!(
            low < half,
            "{low} admitted with room {less}, {half} with {room}"
        );
        // A volume mounted unpaced lets writes go until the space rules stop them.
        let unpaced = SpacePolicy {
            pace_rounds: false,
            ..policy
        };
        assert_eq!(m.plan_admit(1, &unpaced), Admit::Go);

        // Regression: a paced writer waited for copies with nothing reclaimable (all the
        // garbage in open zones), so no round came and the volume hung; the space rules of
        // `plan_acquire`, which seal idle zones, must get the write instead.
        let mut m = Mapping::new(l);
        let last = l.volume_blocks - 1;
        write_lbas(&mut m, 0..last);
        // The only garbage: a block overwritten within the open zone it went to.
        write_lbas(&mut m, std::iter::repeat_n(last, 2));
        while m.free_zones() > floor {
            m.open_zone(Stream::Cold).expect("a free zone");
        }
        let open: Vec<u32> = m.open_zones().to_vec();
        for z in open {
            if m.zone(z).use_ == ZoneUse::Open(Stream::Hot) {
                m.reserve(z, m.data_room(z).saturating_sub(1));
            }
        }
        assert!(m.paced_room(floor) < target);
        m.pace_round(1, 10);
        assert!(!m.reclaimable(policy.victim_policy));
        assert_eq!(m.plan_admit(1, &policy), Admit::Go);
    }

    // Regression: user writes ran at full speed until the free zones reached the floor and
    // then stopped outright until a collection round ended, so the foreground and garbage
    // collection never overlapped and the p99 write latency was a whole round. Between the
    // background watermark and the floor user writes must be paced by the blocks collection
    // copies, more slowly the deeper the debt, and stop only at the floor.
    #[test]
    fn user_writes_are_paced_by_collection_in_proportion_to_the_debt() {
        let l = layout(64, 64, 300);
        let opts = MountOptions {
            gc_background_free_zones: 10,
            gc_foreground_free_zones: 2,
            ..MountOptions::default()
        };
        let policy = SpacePolicy::new(&opts, &l);
        assert_eq!(policy.throttle_band(), 8);
        assert_eq!(policy.owed(10), 0);
        assert_eq!(policy.owed(9), 1);
        assert_eq!(policy.owed(2), 8);
        assert_eq!(policy.owed(0), 8);
        // Shallow debt admits more per copied block than deep debt; at the floor nothing.
        let shallow = policy.user_blocks_allowed(1, 100, 0);
        let deep = policy.user_blocks_allowed(7, 100, 0);
        assert_eq!(shallow, 700);
        assert_eq!(deep, 14);
        assert_eq!(policy.user_blocks_allowed(8, 1_000_000, 64), 0);
        // The band collapses to today's rule when it is a single zone.
        let thin = SpacePolicy::new(
            &MountOptions {
                gc_background_free_zones: 3,
                ..opts
            },
            &l,
        );
        assert_eq!(thin.owed(2), 0);

        let mut m = Mapping::new(l);
        write_lbas(&mut m, 0..l.volume_blocks);
        // Nothing reclaimable yet: writes go whatever the free zones.
        assert_eq!(m.plan_admit(1, &policy), Admit::Go);
        write_lbas(&mut m, 0..l.volume_blocks / 8);
        // Use zones until garbage collection owes some.
        while policy.owed(m.free_zones()) < 4 {
            m.open_zone(Stream::Cold).expect("a free zone");
        }
        let owed = policy.owed(m.free_zones());
        let slack = m.zone_payload_blocks() * u64::from(8 - owed) / 8;
        let mut admitted = 0;
        while m.plan_admit(1, &policy) == Admit::Go {
            admitted += 1;
            assert!(admitted <= slack, "more than the slack before any copy");
        }
        assert_eq!(admitted, slack);
        // Copies pay for more user blocks: (band - owed) / owed per copied block.
        m.counters.gc_blocks += u64::from(owed) * 10;
        let mut more = 0;
        while m.plan_admit(1, &policy) == Admit::Go {
            more += 1;
        }
        assert_eq!(more, u64::from(8 - owed) * 10);
        // At the floor user writes wait however much is copied.
        while m.free_zones() > 2 {
            m.open_zone(Stream::Cold).expect("a free zone");
        }
        m.counters.gc_blocks += 1_000;
        assert_eq!(m.plan_admit(1, &policy), Admit::Wait);
    }

    // Guards the one-zone reserve of a volume with one GC stream: live trim records went to
    // the cold GC stream whatever the mount said, so a victim holding data and trim records
    // could need a fresh zone for each stream while only one zone is kept free, and the
    // round's copies would fail the volume with no space. With one GC stream every copy goes
    // to it, and the first victim fits the one reserve zone.
    #[test]
    fn one_gc_stream_keeps_one_reserve_zone_and_its_victim_fits_it() {
        let l = layout(40, 64, 1000);
        let single = MountOptions {
            hot_cold: false,
            gc_foreground_free_zones: 1,
            gc_background_free_zones: 2,
            ..MountOptions::default()
        };
        let split = MountOptions {
            hot_cold: true,
            ..single
        };
        assert_eq!(reserve_zones(&l, &single), 1);
        assert_eq!(reserve_zones(&l, &split), 1);
        let policy = SpacePolicy::new(&single, &l);
        assert_eq!(policy.floor(Stream::Hot, true), 1);
        assert_eq!(SpacePolicy::new(&split, &l).floor(Stream::Hot, true), 1);

        let mut m = Mapping::new(l);
        let n = l.volume_blocks;
        // A zone of trim records and data, then the data overwritten: the fewest valid
        // blocks, so the victim, holds only trim records (live until a checkpoint).
        let (z, _) = m.open_zone(Stream::Hot).expect("a free zone");
        m.header_written(z);
        let payload = m.zone_payload_blocks();
        for i in 0..payload {
            let r = m.reserve(z, 1);
            let seq = m.take_seq();
            if i % 4 == 0 {
                m.complete_trim_record(z, r.offset, i, 1, seq);
            } else {
                m.complete_write(z, r.offset, i, 1, seq);
            }
        }
        write_lbas(&mut m, 0..n);
        // Every free zone but one is taken, and no GC zone is open: the copies have one zone.
        while m.free_zones() > 1 {
            m.open_zone(Stream::Cold).expect("a free zone");
        }
        let round = m
            .plan_round(&policy, false, ROUND_VICTIMS_MAX, 1, false)
            .expect("a victim");
        assert_eq!(round.victims, vec![z]);
        assert!(round.cold.is_empty(), "{round:?}");
        assert_eq!(round.hot.len() as u64, payload.div_ceil(4));
        assert!(m.round_zones([round.hot.len() as u64, 0], 1, 1) <= 1);
    }

    // Guards the one-zone reserve of a volume with two GC streams: a victim holding live
    // data (bound for the GC stream) and live trim records (bound for the cold GC stream),
    // with one zone free and no GC zone open, would need a fresh zone for each stream. At a
    // floor of 1 its copies must all go to one stream, so that the one free zone takes them;
    // at a floor of 2 (default mounts) the split is kept: merging there sent hot copies to
    // cold zones in rounds planned while another finished, and cost the 80/20 job 3.5%.
    #[test]
    fn two_gc_streams_send_a_victim_whole_to_one_when_one_zone_is_free() {
        let l = layout(40, 64, 1000);
        for floor in [1, 2] {
            let split = MountOptions {
                hot_cold: true,
                gc_foreground_free_zones: floor,
                gc_background_free_zones: floor + 1,
                ..MountOptions::default()
            };
            let policy = SpacePolicy::new(&split, &l);
            let mut m = Mapping::new(l);
            let n = l.volume_blocks;
            let (z, _) = m.open_zone(Stream::Hot).expect("a free zone");
            m.header_written(z);
            let payload = m.zone_payload_blocks();
            for i in 0..payload {
                let r = m.reserve(z, 1);
                let seq = m.take_seq();
                if i % 4 == 0 {
                    m.complete_trim_record(z, r.offset, i, 1, seq);
                } else {
                    m.complete_write(z, r.offset, i, 1, seq);
                }
            }
            // Every block but a quarter of the victim's is written again: the victim keeps
            // its trim records and those data blocks, about half a zone.
            let kept = |lba: u64| lba < payload && lba % 4 == 1;
            write_lbas(&mut m, (0..n).filter(|&lba| !kept(lba)));
            while m.free_zones() > 1 {
                m.open_zone(Stream::Cold).expect("a free zone");
            }
            let data = (0..payload).filter(|&lba| kept(lba)).count() as u64;
            let records = payload.div_ceil(4);
            // Split, the copies would need two fresh zones.
            assert_eq!(m.round_zones([data, records], 1, 1), 2);
            let round = m
                .plan_round(&policy, true, ROUND_VICTIMS_MAX, 1, false)
                .expect("a victim");
            assert_eq!(round.victims, vec![z]);
            if floor == 1 {
                assert!(round.hot.is_empty(), "{round:?}");
                assert_eq!(round.cold.len() as u64, data + records);
                assert!(m.round_zones([0, data + records], 1, 1) <= 1);
                assert_eq!(m.counters.gc_merged_victims, 1);
            } else {
                assert_eq!(round.hot.len() as u64, data, "{round:?}");
                assert_eq!(round.cold.len() as u64, records);
                assert_eq!(m.counters.gc_merged_victims, 0);
            }
        }
    }

    #[test]
    fn writers_that_wait_for_collection_always_start_one() {
        // Regression: with the background watermark at or below the foreground one, a writer
        // waited for garbage collection at a free-zone count at which neither it nor the
        // maintenance task started one, and waited forever.
        let l = layout(64, 64, 300);
        let policy = SpacePolicy::new(
            &MountOptions {
                gc_background_free_zones: 1,
                gc_foreground_free_zones: 3,
                ..MountOptions::default()
            },
            &l,
        );
        for free in 0..=policy.floor(Stream::Hot, true) {
            assert!(policy.gc_wanted(free), "{free} free zones");
        }
        assert!(!policy.gc_wanted(policy.floor(Stream::Hot, true) + 1));
        let defaults = SpacePolicy::new(&tune_mount(&l, MountOptions::default()), &l);
        assert!(defaults.gc_wanted(defaults.gc_background_free_zones - 1));
        assert!(!defaults.gc_wanted(defaults.gc_background_free_zones));
    }

    #[test]
    fn collection_waits_for_the_users_only_exactly_at_the_floor() {
        let l = layout(64, 64, 300);
        let opts = MountOptions {
            gc_foreground_free_zones: 2,
            gc_background_free_zones: 3,
            gc_lead_blocks: Some(8),
            ..MountOptions::default()
        };
        let policy = SpacePolicy::new(&opts, &l);
        let room = |least| UserRoom {
            waiting: false,
            least,
        };
        assert!(policy.gc_may_wait(2, room(Some(9))));
        // The users need a zone soon, or now, or have none open.
        assert!(!policy.gc_may_wait(2, room(Some(8))));
        assert!(!policy.gc_may_wait(2, room(None)));
        let waiting = UserRoom {
            waiting: true,
            least: Some(64),
        };
        assert!(!policy.gc_may_wait(2, waiting));
        // Below the floor collection holds the reserve; above it the watermark decides.
        assert!(!policy.gc_may_wait(1, room(Some(64))));
        assert!(!policy.gc_may_wait(3, room(Some(64))));
        // Not asked for, or a throttled band, which paces the users by the copies.
        let eager = SpacePolicy::new(
            &MountOptions {
                gc_lead_blocks: None,
                ..opts
            },
            &l,
        );
        assert!(!eager.gc_may_wait(2, room(Some(64))));
        let band = MountOptions {
            gc_background_free_zones: 5,
            ..opts
        };
        assert!(!SpacePolicy::new(&band, &l).gc_may_wait(2, room(Some(64))));
    }

    #[test]
    fn only_user_blocks_count_toward_the_next_checkpoint() {
        // Regression: the interval counted filled user zones, and a zone holds fewer user
        // blocks than its size (its header, summaries, trim records, a zone sealed part-full),
        // so checkpoints cost more than the share they were spaced for; before that, zones
        // garbage collection filled counted too (1% times the write amplification).
        let l = layout(64, 64, 300);
        let mut m = Mapping::new(l);
        // A GC zone filled, a user zone of trim records, and a sealed user zone: nothing.
        let (z, _) = m.open_zone(Stream::Gc).expect("a free zone");
        m.header_written(z);
        let r = m.reserve(z, l.zone_blocks);
        m.end_gc_write(z, r.offset, r.blocks);
        assert_eq!(m.zone(z).use_, ZoneUse::Full);
        let (z, _) = m.open_zone(Stream::Hot).expect("a free zone");
        m.header_written(z);
        write_lbas(&mut m, 0..8);
        let written = m.user_blocks_since_ckpt;
        assert_eq!(written, 8);
        for lba in 0..8 {
            let r = m.reserve(z, 1);
            let seq = m.take_seq();
            m.complete_trim_record(z, r.offset, lba, 1, seq);
        }
        m.abandon(z);
        assert_eq!(m.user_blocks_since_ckpt, written);
        // Due at one zone's worth of user blocks, not before; a snapshot starts again.
        write_lbas(&mut m, 100..100 + l.zone_blocks - written - 1);
        assert!(!m.checkpoint_due(1));
        write_lbas(&mut m, 200..201);
        assert!(m.checkpoint_due(1));
        assert!(!m.checkpoint_due(2));
        m.begin_snapshot();
        assert_eq!(m.user_blocks_since_ckpt, 0);
        assert!(!m.checkpoint_due(1));
    }

    #[test]
    fn automatic_checkpoints_cost_at_most_one_percent_and_explicit_ones_stay() {
        let l = layout(274, 1024, 70);
        let every = tune_mount(&l, MountOptions::default()).checkpoint_every_zones;
        let body =
            crate::layout::checkpoint_body_bytes(l.volume_blocks, l.data_zones).expect("fits");
        let ckpt_blocks = (body + 4096).div_ceil(4096);
        assert!(
            ckpt_blocks * 100 <= u64::from(every) * 1024,
            "every {every}"
        );
        assert!(
            ckpt_blocks * 100 > u64::from(every - 1) * 1024,
            "every {every}"
        );
        let explicit = MountOptions {
            checkpoint_every_zones: 3,
            ..MountOptions::default()
        };
        assert_eq!(tune_mount(&l, explicit).checkpoint_every_zones, 3);
    }
}
