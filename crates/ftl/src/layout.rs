//! Where a volume lives on its zoned device, and the format options chosen at format time.
//!
//! The first `2 * slot_zones` zones hold two checkpoint slots (written alternately); every
//! other zone is a data zone. Block 0 of a data zone is its zone header; user data, garbage
//! collection copies and trim records fill the rest. Physical block addresses (PBAs) number
//! the writable blocks of the data zones densely: `pba = data_zone * zone_capacity + offset`.

use std::ops::RangeInclusive;

use zns::Geometry;

use crate::records;

/// Bytes of per-block metadata the FTL needs: the block's LBA and its sequence number.
pub const OOB_BYTES: u32 = 16;

/// How the FTL writes into zones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Zone Write at the host-tracked write pointer, one command in flight per zone.
    ZoneWrite,
    /// Zone Append, several commands in flight per zone; the device picks the LBA.
    ZoneAppend,
}

/// Garbage collection victim selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimPolicy {
    /// The full zone with the fewest valid blocks.
    Greedy,
    /// Maximises (1 - u) * age / 2u: Rosenblum and Ousterhout's LFS cleaner, whose cost 1 + u
    /// counted reading the whole segment, with the cost of a collection here, which reads
    /// and writes the valid blocks only (Simple Copy or reads of the valid blocks). Age is
    /// the user writes since the zone was last written.
    CostBenefit,
}

/// Options fixed when a volume is formatted (recorded in every checkpoint).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FormatOptions {
    /// Over-provisioning in per mille (70 = 7%): (flash - logical) / logical over all the
    /// device's zones, the FTL's checkpoint zones, reserve zones and headers paid from it.
    pub op_permille: u32,
    /// Export exactly this many blocks instead of all the over-provisioning allows (it must
    /// not be more).
    pub volume_blocks: Option<u64>,
    /// Threaded logging (ZNS+ `tl_open`, docs/DESIGN.md "ZNS+"): needs a device with the ZNS+
    /// commands and per-block metadata of at least 16 bytes; recorded in the checkpoints.
    pub threaded_logging: bool,
}

impl FormatOptions {
    pub fn with_op(op_permille: u32) -> FormatOptions {
        FormatOptions {
            op_permille,
            volume_blocks: None,
            threaded_logging: false,
        }
    }
}

/// Options that may change from one mount to the next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MountOptions {
    pub write_mode: WriteMode,
    pub victim_policy: VictimPolicy,
    /// Open zones written round-robin for hot user data (Zone Write mode; each has one write
    /// in flight at a time, so this is the volume's write queue depth); 0 (the default)
    /// chooses up to 4 by the spare the volume has, on zones of at most
    /// `plan::FEW_HOT_ZONES_ZONE_BLOCKS_MAX` blocks one per `plan::HOT_ZONE_COLLECTABLE_ZONES`
    /// zones to collect from at most (`plan::tune_mount`).
    pub hot_zones: u32,
    /// Whether user writes are split into hot and cold streams by update frequency.
    pub hot_cold: bool,
    /// How blocks are classed hot or cold while separating (`separation::Placement`; by
    /// default by their last two update intervals).
    pub placement: crate::separation::Placement,
    /// Background garbage collection runs while fewer zones than this are free; when it is
    /// at least 2 zones above the foreground floor, user writes between the two are paced by
    /// the blocks garbage collection copies (`plan::Throttle`) instead of running until the
    /// floor stops them. 0 (the default) is one above the floor: no pacing
    /// (`plan::tune_mount`).
    pub gc_background_free_zones: u32,
    /// User writes wait for garbage collection while fewer zones than this are free. 0 (the
    /// default) chooses 2, or on volumes with at least `plan::WIDE_FLOOR_COLLECTABLE_ZONES`
    /// zones to collect from 3, or more to hold `plan::WIDE_FLOOR_BLOCKS` blocks
    /// (`plan::tune_mount`).
    pub gc_foreground_free_zones: u32,
    /// Write a checkpoint once user writes of this many zones' worth of blocks (this times
    /// the zone size) were written since the last one; 0 (the default) spaces them so that
    /// they cost at most 1% of the user's writes (`plan::tune_mount`).
    pub checkpoint_every_zones: u32,
    /// Relocate with the device's Simple Copy (when it supports it) instead of read+write.
    pub use_copy: bool,
    /// On a device with the ZNS+ commands, relocate with `zone_compaction`, placing the
    /// blocks this way (docs/DESIGN.md, "ZNS+"); None relocates as on any device. Ignored on
    /// a device without them, which relocates as `use_copy` says.
    pub compaction: Option<crate::compaction::Placement>,
    /// On a volume formatted with threaded logging: how a full zone is chosen for it
    /// (threaded.rs). Ignored on other volumes.
    pub threaded: crate::threaded::TlPolicy,
    /// Simple Copy commands each garbage-collection lane keeps in flight to its zone, submitted
    /// in write-pointer order (io/pipeline.rs); 1 copies one at a time. More than 1 needs a
    /// device that executes a queue's commands in the order it receives them, as the emulated
    /// device does. Applies to plain Simple Copy with per-block metadata. 0 (the default)
    /// chooses `COPIES_PER_LANE_DEFAULT`, or `plan::PACED_COPIES_PER_LANE` on a volume whose
    /// user writes are paced by rounds, or `plan::RUN_ON_COPIES_PER_LANE` on one whose
    /// collection runs on across rounds (`plan::tune_mount`).
    pub copies_per_lane: u32,
    /// User writes (data and trim records) each user stream's open zone keeps in flight in
    /// Zone Write mode, submitted in write-pointer order (io.rs, "Several writes in flight");
    /// 1 writes one at a time. A write refused because one ahead of it failed or was
    /// reordered by the device goes again to another zone. Summary mode always writes one at
    /// a time (its summaries follow the tags in order); Zone Append has no such bound. 0 (the
    /// default) chooses `ZONE_WRITES_DEFAULT`.
    pub zone_writes: u32,
    /// Garbage-collection lanes (zones of the GC stream copied into at once) at most, as many
    /// as the spare affords up to this (`plan::gc_lanes`); 0 (the default) is
    /// `plan::GC_LANES_AUTO`, one: a lane's copies run on into its next zone, so more lanes
    /// add little in flight, and each open lane's unwritten tail is spare the collector cannot
    /// use.
    pub gc_lanes_max: u32,
    /// Collect one victim at a time, as F2FS's foreground segment compaction does (ZNS+
    /// paper sections 2.3 and 3.1): a round takes one victim, its copies end, a checkpoint is
    /// written (F2FS's metadata update, which waits for the copies), the victim is reset, and
    /// only then is the next victim chosen; no round overlaps another's finish. Off by
    /// default (rounds of up to `plan::ROUND_VICTIMS_MAX` victims, overlapping).
    pub serial_collection: bool,
    /// How the device spreads a zone's blocks over its flash dies, overriding the device's
    /// own hint (`ZonedDevice::die_stripe`); None (the default) takes the hint, and a device
    /// without one leaves the FTL not knowing. Knowing it, a user write goes to a hot zone
    /// whose write pointer is on a die no other open hot zone is writing to
    /// (`plan::hot_zone_gives_way`).
    pub stripe: Option<Stripe>,
    /// Whether user writes are paced by the garbage-collection round under way while their
    /// room is short (`plan::RoundPace`), so that writers slow down in proportion to the
    /// collection owed instead of stopping at the floor until a round's resets. None (the
    /// default) paces volumes with automatic watermarks and fewer than
    /// `plan::WIDE_FLOOR_COLLECTABLE_ZONES` zones to collect from, zones of more than
    /// `plan::PACED_ZONE_BLOCKS_MIN` and at most `plan::PACED_ZONE_BLOCKS_MAX` blocks and no
    /// `gc_lead_blocks` (`plan::tune_mount`).
    /// A throttled band (`gc_background_free_zones`) paces instead while it applies, and a
    /// volume with a `gc_lead_blocks` is never paced (its collection waits for writers that
    /// wait for a zone, not for paced ones).
    pub pace_rounds: Option<bool>,
    /// When garbage collection starts at the floor: None (the default) as soon as the free
    /// zones reach it; Some(n) only once a user writer waits for a zone or some user zone has
    /// at most `n` blocks of room left (`plan::SpacePolicy::gc_may_wait`). A victim taken
    /// later has lost more blocks, and the zone collected early sits empty while the user
    /// zones fill: with collection much faster than the user writes (an idle device, the
    /// untimed `zonestack bench ftl`) Some(0) lowers write amplification by one zone held out
    /// of the log (uniform overwrites on 160 zones of 1,024 blocks at 80% utilisation: 2.865
    /// -> 2.800), but a writer that meets the floor waits for a whole round: on the timed
    /// emulator's block jobs, where collection is the bottleneck, it cost throughput and tail
    /// latency (docs/BENCHMARKS.md), so volumes collect eagerly.
    pub gc_lead_blocks: Option<u64>,
    /// Whether collection runs on across rounds: a round is planned while the previous one
    /// finishes whenever collection is wanted on the free zones alone, counting the zones
    /// that finish is about to reset (but one) as space for its copies, and a GC lane that
    /// finds no free zone waits for those resets instead of reporting no space. None (the
    /// default) runs on on volumes with automatic watermarks, at least
    /// `plan::WIDE_FLOOR_COLLECTABLE_ZONES` zones to collect from, not paced by rounds and
    /// no `gc_lead_blocks` (`plan::tune_mount`), which then keep
    /// `plan::RUN_ON_COPIES_PER_LANE` copies in flight per lane, and whose copies go through
    /// Simple Copy pipelines (not read + write, ZNS+ zone compaction or summary mode; the
    /// mount decides that).
    pub gc_run_on: Option<bool>,
    /// Whether checkpoints may be deltas of the dirty mapping pages after the slot's full
    /// one (docs/DESIGN.md, "Delta checkpoints"; on by default, where the layout has room).
    /// Off, every checkpoint is a full one, as before deltas (the ZNS+ Fig. 8 reproduction,
    /// whose foreground compaction pays a full checkpoint per victim as it did).
    pub delta_checkpoints: bool,
    /// Host time charged per block moved by a host-level copy (garbage collection that reads
    /// the live blocks into host memory and writes them back: neither Simple Copy nor ZNS+
    /// zone compaction), in ns, waited between a batch's reads and its write on the volume's
    /// `HostClock` (host.rs). It stands for the file system's CPU and software time per block
    /// copied (page cache, block layer, memory copies), which the device model does not
    /// charge. Never charged to user I/O, Simple Copy or zone compaction. 0 (the default)
    /// charges nothing: a volume serving real clients pays its real CPU time already.
    pub host_copy_ns_per_block: u32,
    /// A periodic checkpoint is also due once user blocks and garbage collection's copies
    /// written since the last one reach this many checkpoint intervals
    /// (`checkpoint_every_zones` zones' worth each), which bounds what a mount after a crash
    /// scans whatever the write amplification, at the price of checkpoints beyond the
    /// budget while the write amplification exceeds it (`map::SCAN_BOUND_INTERVALS`); 0 (the
    /// default): no such bound, checkpoints keep to the budget and the scan grows with the
    /// write amplification.
    pub checkpoint_scan_intervals: u32,
}

/// How a device lays a zone over its flash dies (`zns::DieStripe`).
pub use zns::DieStripe as Stripe;

/// User writes in flight per open user zone by default (`MountOptions::zone_writes`).
pub const ZONE_WRITES_DEFAULT: u32 = 2;

/// Copies in flight per garbage-collection lane by default: a Copy waits for its sources'
/// reads behind the programs queued on the dies, so one at a time left the flash idle.
pub const COPIES_PER_LANE_DEFAULT: u32 = 8;

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            write_mode: WriteMode::ZoneWrite,
            victim_policy: VictimPolicy::CostBenefit,
            hot_zones: 0,
            hot_cold: true,
            placement: crate::separation::Placement::TwoShort,
            gc_background_free_zones: 0,
            gc_foreground_free_zones: 0,
            checkpoint_every_zones: 0,
            use_copy: true,
            compaction: Some(crate::compaction::Placement::CopybackAware),
            threaded: crate::threaded::TlPolicy::Hybrid,
            copies_per_lane: 0,
            zone_writes: 0,
            gc_lanes_max: 0,
            serial_collection: false,
            stripe: None,
            pace_rounds: None,
            gc_lead_blocks: None,
            gc_run_on: None,
            delta_checkpoints: true,
            host_copy_ns_per_block: 0,
            checkpoint_scan_intervals: 0,
        }
    }
}

/// Why a device cannot hold a volume.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

/// The derived layout of a volume on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub geometry: Geometry,
    pub op_permille: u32,
    /// Zones per checkpoint slot.
    pub slot_zones: u32,
    /// Index of the first data zone.
    pub first_data_zone: u32,
    pub data_zones: u32,
    /// Writable blocks per zone (the device's zone capacity).
    pub zone_blocks: u64,
    /// Logical blocks the volume exports.
    pub volume_blocks: u64,
    /// Free zones garbage collection keeps for itself so it can always make progress.
    pub reserve_zones: u32,
}

/// Over-provisioning a volume may be formatted with, in per mille.
pub const OP_PERMILLE_RANGE: RangeInclusive<u32> = 10..=4000;

/// Fewest writable blocks a zone must have to hold a volume's data.
pub const ZONE_BLOCKS_MIN: u64 = 8;

/// Blocks of flash `zone_count` zones of `zone_blocks` hold: everything a volume may use,
/// checkpoint zones, zone headers, reserve zones and summary blocks included.
pub fn flash_blocks(zone_count: u32, zone_blocks: u64) -> Option<u64> {
    u64::from(zone_count).checked_mul(zone_blocks)
}

/// The most logical blocks a volume on `flash_blocks` of flash exports with `op_permille`
/// over-provisioning, where over-provisioning means (flash - logical) / logical: the same
/// meaning as a conventional SSD's spare, with every fixed cost of the FTL (checkpoint zones,
/// reserve zones, headers, summaries, open-zone tails) paid out of it. None if impossible.
pub fn volume_blocks_for_op(flash_blocks: u64, op_permille: u32) -> Option<u64> {
    let per = 1000u64.checked_add(u64::from(op_permille))?;
    u64::try_from(u128::from(flash_blocks) * 1000 / u128::from(per)).ok()
}

/// Where a volume's spare flash (flash - logical) goes. The fixed costs come first; what is
/// left, `collectable`, is the room garbage collection works in (open zones' unwritten tails
/// come out of it while they are open).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpareBlocks {
    /// Both checkpoint slots.
    pub checkpoint: u64,
    /// Free zones kept for garbage collection's own progress.
    pub reserve: u64,
    /// Block 0 of every data zone.
    pub headers: u64,
    /// In-band summary blocks of full data zones (devices without per-block metadata).
    pub summaries: u64,
    /// Unwritten blocks of the zones open now: spare garbage collection cannot use until
    /// they fill. 0 in a layout's figures (`Layout::spare`), which know no open zone; a
    /// mounted volume's (`FtlStats::spare`) moves them out of `collectable`.
    pub open_tails: u64,
    /// The rest: space garbage collection can reclaim.
    pub collectable: u64,
}

impl SpareBlocks {
    /// Every spare block: flash minus logical capacity.
    pub fn total(&self) -> u64 {
        self.checkpoint
            + self.reserve
            + self.headers
            + self.summaries
            + self.open_tails
            + self.collectable
    }

    /// The same spare with `tails` unwritten blocks of open zones taken out of `collectable`
    /// into `open_tails` (at most what `collectable` holds).
    pub fn with_open_tails(mut self, tails: u64) -> SpareBlocks {
        let moved = tails.min(self.collectable);
        self.collectable -= moved;
        self.open_tails += moved;
        self
    }
}

/// Collectable spare a layout must keep at least, in per cent of the volume: garbage
/// collection works from its reserve zones, but needs some invalid blocks to find.
pub const COLLECTABLE_PERCENT_MIN: u64 = 1;

/// Whether every physical block of `data_zones` zones of `zone_blocks` has a 32-bit address
/// below the unmapped marker (`u32::MAX`): the last one is `data_zones * zone_blocks - 1`.
pub fn pba_space_fits(data_zones: u32, zone_blocks: u64) -> bool {
    u64::from(data_zones)
        .checked_mul(zone_blocks)
        .is_some_and(|p| p <= u64::from(u32::MAX))
}

/// Free zones garbage collection keeps for its own progress, by default.
pub const RESERVE_ZONES_DEFAULT: u32 = 2;

/// Bytes of checkpoint per logical block (mapping entry + sequence number) and per zone.
pub const CKPT_BYTES_PER_LBA: u64 = 12;
pub const CKPT_BYTES_PER_ZONE: u64 = 32;
pub const CKPT_HEADER_BYTES: u64 = 4096;

/// Bytes of a checkpoint body (after its header): None if that overflows.
pub fn checkpoint_body_bytes(volume_blocks: u64, data_zones: u32) -> Option<u64> {
    volume_blocks
        .checked_mul(CKPT_BYTES_PER_LBA)?
        .checked_add(u64::from(data_zones).checked_mul(CKPT_BYTES_PER_ZONE)?)
}

impl Layout {
    /// Lays a volume out on a device, or says why it does not fit.
    pub fn new(
        geometry: Geometry,
        op_permille: u32,
        reserve_zones: u32,
    ) -> Result<Layout, LayoutError> {
        let fail = |m: String| Err(LayoutError(m));

        if !OP_PERMILLE_RANGE.contains(&op_permille) {
            return fail(format!(
                "over-provisioning {op_permille} per mille is outside {OP_PERMILLE_RANGE:?}"
            ));
        }
        if geometry.zone_capacity < ZONE_BLOCKS_MIN {
            return fail(format!("zones must hold at least {ZONE_BLOCKS_MIN} blocks"));
        }
        let zone_blocks = geometry.zone_capacity;
        let bs = u64::from(geometry.block_size);
        let zone_bytes = zone_blocks * bs;
        // Size the slots for the largest volume this device could hold, then fix the volume.
        let mut slot_zones = 1u32;
        loop {
            let first_data_zone = 2 * slot_zones;
            // Checked: `reserve_zones` may come from a checkpoint header read off the device.
            let needed = first_data_zone
                .checked_add(reserve_zones)
                .and_then(|n| n.checked_add(2));
            if needed.is_none_or(|n| n > geometry.zone_count) {
                return fail(format!(
                    "{} zones are too few: checkpoints need {first_data_zone}, garbage collection {reserve_zones} more, and data at least 2",
                    geometry.zone_count
                ));
            }
            let data_zones = geometry.zone_count - first_data_zone;
            let volume_blocks = flash_blocks(geometry.zone_count, zone_blocks)
                .and_then(|f| volume_blocks_for_op(f, op_permille));
            let Some(volume_blocks) = volume_blocks
                .filter(|v| pba_space_fits(data_zones, zone_blocks) && *v < u64::from(u32::MAX))
            else {
                return fail(
                    "the device has more blocks than a 32-bit mapping entry can address".into(),
                );
            };
            let body = checkpoint_body_bytes(volume_blocks, data_zones);
            let ckpt_bytes = body.and_then(|b| b.checked_add(CKPT_HEADER_BYTES));
            if ckpt_bytes.is_some_and(|c| c <= u64::from(slot_zones) * zone_bytes) {
                if volume_blocks == 0 {
                    return fail("the volume would have no blocks".into());
                }
                let layout = Layout {
                    geometry,
                    op_permille,
                    slot_zones,
                    first_data_zone,
                    data_zones,
                    zone_blocks,
                    volume_blocks,
                    reserve_zones,
                };
                return layout.check_spare();
            }
            slot_zones += 1;
        }
    }

    /// Blocks every checkpoint of this layout writes (header and body, whole blocks): a
    /// checkpoint snapshots the whole mapping, so all have this size. None if it overflows.
    pub fn checkpoint_blocks(&self) -> Option<u64> {
        let body = checkpoint_body_bytes(self.volume_blocks, self.data_zones)?;
        Some((body + CKPT_HEADER_BYTES).div_ceil(u64::from(self.geometry.block_size)))
    }

    /// Blocks a delta checkpoint of `pages` dirty mapping pages takes at most (header, page
    /// indices, the pages' entries, the zone table; docs/FORMAT.md). None if it overflows.
    pub fn delta_blocks(&self, pages: u64) -> Option<u64> {
        let entries = pages
            .checked_mul(crate::map::MAP_PAGE_LBAS)?
            .min(self.volume_blocks);
        let bytes = CKPT_HEADER_BYTES
            .checked_add(pages.checked_mul(4)?)?
            .checked_add(entries.checked_mul(CKPT_BYTES_PER_LBA)?)?
            .checked_add(u64::from(self.data_zones).checked_mul(CKPT_BYTES_PER_ZONE)?)?;
        Some(bytes.div_ceil(u64::from(self.geometry.block_size)))
    }

    /// Blocks of one checkpoint slot.
    pub fn slot_blocks(&self) -> u64 {
        u64::from(self.slot_zones) * self.zone_blocks
    }

    /// Whether a slot has room for a delta checkpoint of one page after a full checkpoint:
    /// a volume of such a layout writes format version 3 and delta checkpoints.
    pub fn has_delta_room(&self) -> bool {
        match (self.checkpoint_blocks(), self.delta_blocks(1)) {
            (Some(full), Some(delta)) => full.saturating_add(delta) <= self.slot_blocks(),
            _ => false,
        }
    }

    /// Where the spare flash of this layout goes; None if the fixed costs exceed it.
    pub fn spare(&self) -> Option<SpareBlocks> {
        let zb = self.zone_blocks;
        let checkpoint = u64::from(self.first_data_zone) * zb;
        let reserve = u64::from(self.reserve_zones) * zb;
        let headers = u64::from(self.data_zones);
        let summaries = if self.summary_mode() {
            let group = records::summary_capacity(self.geometry.block_size as usize) as u64;
            u64::from(self.data_zones) * (zb - 1).div_ceil(group + 1)
        } else {
            0
        };
        let flash = flash_blocks(self.geometry.zone_count, zb)?;
        let collectable = flash
            .checked_sub(self.volume_blocks)?
            .checked_sub(checkpoint + reserve + headers + summaries)?;
        Some(SpareBlocks {
            checkpoint,
            reserve,
            headers,
            summaries,
            open_tails: 0,
            collectable,
        })
    }

    /// The layout if its spare pays the fixed costs and leaves garbage collection
    /// `COLLECTABLE_PERCENT_MIN` of the volume to collect, else why not.
    fn check_spare(self) -> Result<Layout, LayoutError> {
        let need = (self.volume_blocks * COLLECTABLE_PERCENT_MIN)
            .div_ceil(100)
            .max(1);
        match self.spare() {
            Some(s) if s.collectable >= need => Ok(self),
            _ => Err(LayoutError(format!(
                "over-provisioning {}% is too little for {} zones of {} blocks: {} checkpoint zones, {} reserve zones and the zone headers are paid from the spare, and garbage collection needs {COLLECTABLE_PERCENT_MIN}% of the volume besides; use a larger --op or more, smaller zones",
                f64::from(self.op_permille) / 10.0,
                self.geometry.zone_count,
                self.zone_blocks,
                self.first_data_zone,
                self.reserve_zones
            ))),
        }
    }

    /// The same layout exporting only `blocks` logical blocks (at most what it can hold).
    pub fn with_volume_blocks(mut self, blocks: u64) -> Result<Layout, LayoutError> {
        if blocks == 0 || blocks > self.volume_blocks {
            return Err(LayoutError(format!(
                "a volume of {blocks} blocks does not fit: at most {} with this over-provisioning",
                self.volume_blocks
            )));
        }
        self.volume_blocks = blocks;
        Ok(self)
    }

    /// Whether block tags go into in-band summary blocks because the device stores fewer than
    /// 16 bytes of metadata per block.
    pub fn summary_mode(&self) -> bool {
        self.geometry.oob_size < OOB_BYTES
    }

    /// Physical blocks in the data area.
    pub fn physical_blocks(&self) -> u64 {
        u64::from(self.data_zones) * self.zone_blocks
    }

    /// The device LBA of physical block `pba`.
    pub fn pba_to_lba(&self, pba: u32) -> zns::Lba {
        let z = u64::from(pba) / self.zone_blocks;
        let off = u64::from(pba) % self.zone_blocks;
        self.geometry.zone_start(self.first_data_zone + z as u32) + off
    }

    /// The physical block at device LBA `lba`, which must lie in a data zone's capacity.
    pub fn lba_to_pba(&self, lba: zns::Lba) -> Option<u32> {
        let zone = self.geometry.zone_of(lba)?;
        let data_zone = zone.checked_sub(self.first_data_zone)?;
        let off = lba - self.geometry.zone_start(zone);
        if off >= self.zone_blocks {
            return None;
        }
        u32::try_from(u64::from(data_zone) * self.zone_blocks + off).ok()
    }

    /// Device zone start of data zone `z`.
    pub fn data_zone_start(&self, z: u32) -> zns::Lba {
        self.geometry.zone_start(self.first_data_zone + z)
    }

    /// Device zone start of checkpoint slot `slot` (0 or 1), zone `i` within it.
    pub fn slot_zone_start(&self, slot: u32, i: u32) -> zns::Lba {
        self.geometry.zone_start(slot * self.slot_zones + i)
    }

    /// The fewest zones a device with `geometry`'s zones (its zone count is ignored) needs
    /// to export a volume of `volume_bytes` (rounded up to whole blocks) with `op_permille`
    /// over-provisioning and `reserve_zones` kept for garbage collection: the one place that
    /// knows how much checkpoint, reserve and spare space a volume costs, for callers that
    /// size a device for a volume.
    pub fn zones_for_volume(
        geometry: Geometry,
        volume_bytes: u64,
        op_permille: u32,
        reserve_zones: u32,
    ) -> Result<u32, LayoutError> {
        let blocks = volume_bytes
            .div_ceil(u64::from(geometry.block_size.max(1)))
            .max(1);
        let cap = geometry.zone_capacity.max(1);
        // A lower bound: the zones whose flash holds the volume and its spare. The fixed
        // costs paid from the spare may need more; the search adds them.
        let per = 1000 + u128::from(op_permille);
        let flash = u128::from(blocks) * per / 1000;
        // And the zones whose spare pays the fixed costs: a zone of flash brings
        // cap * op / (1 + op) blocks of spare and costs one header, and the checkpoint slots,
        // reserve cost whole zones (two slot zones assumed here).
        let fixed_zones = u128::from(reserve_zones) + 2;
        let spare_per_zone = (u128::from(cap) * u128::from(op_permille)).saturating_sub(per);
        let for_spare = match spare_per_zone {
            0 => u128::from(u32::MAX),
            s => (fixed_zones * u128::from(cap) * per).div_ceil(s),
        };
        let least = u64::try_from(flash.div_ceil(u128::from(cap)).max(for_spare))
            .unwrap_or(u64::MAX)
            .max(u64::from(reserve_zones) + 4);
        let too_many = |n: u64| {
            LayoutError(format!(
                "a volume of {volume_bytes} bytes needs more than {n} zones"
            ))
        };
        let least = u32::try_from(least).map_err(|_| too_many(u64::from(u32::MAX)))?;
        // Each checkpoint slot zone holds the checkpoint of thousands of blocks, so the
        // search ends long before this bound unless the volume cannot be laid out at all.
        let most = least.saturating_mul(2).saturating_add(64);
        let mut last = None;
        for zones in least..=most {
            let g = Geometry {
                zone_count: zones,
                ..geometry
            };
            match Layout::new(g, op_permille, reserve_zones) {
                Ok(l) if l.volume_blocks >= blocks => return Ok(zones),
                Ok(_) => {}
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| too_many(u64::from(most))))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ZN540-like geometry of `zones` zones of `cap` blocks, for the unit tests here and in
    /// plan.rs.
    pub(crate) fn geo(zones: u32, cap: u64) -> Geometry {
        Geometry {
            block_size: 4096,
            oob_size: 16,
            zone_count: zones,
            zone_size: cap.next_power_of_two(),
            zone_capacity: cap,
            max_open: 14,
            max_active: 14,
            zasl_blocks: 128,
            mdts_blocks: 512,
            copy_max_ranges: 128,
            copy_max_range_blocks: 128,
            copy_max_blocks: 128,
            cross_zone_reads: false,
        }
    }

    // Regression: over-provisioning was a fraction of the data zones left after the reserve,
    // so checkpoint zones, reserve zones and headers came on top of it and a "7%" volume had
    // about 5% to collect from; a conventional drive's 7% meant 7% of its logical capacity.
    #[test]
    fn over_provisioning_is_flash_over_logical_with_fixed_costs_paid_from_it() {
        for (zones, cap, op) in [(274u32, 1024u64, 70u32), (120, 1024, 280), (64, 192, 200)] {
            let l = Layout::new(geo(zones, cap), op, RESERVE_ZONES_DEFAULT).expect("layout");
            let flash = u64::from(zones) * cap;
            let real = (flash - l.volume_blocks) as f64 / l.volume_blocks as f64;
            let asked = f64::from(op) / 1000.0;
            // Exact but for rounding the volume down to a whole block.
            assert!(real >= asked, "{zones}x{cap} at {op}: {real}");
            assert!(
                real - asked < 2.0 / l.volume_blocks as f64,
                "{real} vs {asked}"
            );
            let s = l.spare().expect("spare");
            assert_eq!(s.total(), flash - l.volume_blocks);
            assert_eq!(s.checkpoint, u64::from(l.first_data_zone) * cap);
            assert_eq!(s.reserve, u64::from(RESERVE_ZONES_DEFAULT) * cap);
            assert_eq!(s.headers, u64::from(l.data_zones));
            assert!(s.collectable * 100 >= l.volume_blocks * COLLECTABLE_PERCENT_MIN);
        }
    }

    #[test]
    fn layouts_fit_their_checkpoints_and_address_every_block() {
        let l = Layout::new(geo(64, 192), 200, 3).expect("layout");
        let ckpt = CKPT_HEADER_BYTES
            + l.volume_blocks * CKPT_BYTES_PER_LBA
            + u64::from(l.data_zones) * CKPT_BYTES_PER_ZONE;
        assert!(ckpt <= u64::from(l.slot_zones) * 192 * 4096);
        assert_eq!(l.first_data_zone, 2 * l.slot_zones);
        assert!(l.volume_blocks < l.physical_blocks());
        for pba in [0u32, 191, 192, 500] {
            assert_eq!(l.lba_to_pba(l.pba_to_lba(pba)), Some(pba));
        }
        // Between capacity and zone size there is no physical block.
        assert_eq!(l.lba_to_pba(l.data_zone_start(0) + 200), None);
        assert_eq!(l.lba_to_pba(0), None);
    }

    #[test]
    fn zones_for_volume_is_the_fewest_zones_that_hold_the_volume() {
        for (cap, bytes, op) in [
            (192u64, 1u64 << 20, 70u32),
            (192, 100 << 20, 200),
            (4096, 1 << 30, 70),
            (65_536, 16 << 30, 70),
            (16_384, 4096, 900),
        ] {
            let g = geo(1, cap);
            let blocks = bytes.div_ceil(4096);
            let z = Layout::zones_for_volume(g, bytes, op, RESERVE_ZONES_DEFAULT).expect("fits");
            let with = |zones: u32| {
                Layout::new(
                    Geometry {
                        zone_count: zones,
                        ..g
                    },
                    op,
                    RESERVE_ZONES_DEFAULT,
                )
            };
            let l = with(z).expect("the zone count lays out");
            assert!(
                l.volume_blocks >= blocks,
                "{cap} {bytes} {op}: {z} zones too few"
            );
            assert!(
                with(z - 1).map_or(true, |l| l.volume_blocks < blocks),
                "{cap} {bytes} {op}: {z} zones is not the fewest"
            );
        }
        // Beyond what a 32-bit mapping addresses: an error, not a search without end.
        assert!(Layout::zones_for_volume(geo(1, 65_536), 1 << 50, 70, 2).is_err());
        assert!(Layout::zones_for_volume(geo(1, 192), 1 << 20, 5, 2).is_err());
    }

    #[test]
    fn devices_that_cannot_hold_a_volume_are_refused() {
        let no_oob = Layout::new(
            Geometry {
                oob_size: 0,
                ..geo(64, 192)
            },
            200,
            3,
        )
        .expect("summary mode");
        assert!(no_oob.summary_mode());
        assert!(!Layout::new(geo(64, 192), 200, 3)
            .expect("layout")
            .summary_mode());
        assert!(Layout::new(geo(6, 192), 200, 3).is_err());
        assert!(Layout::new(geo(64, 192), 5, 3).is_err());
        // A ZN540's 904 zones of 1,077 MiB: the checkpoint of 233 million blocks takes three
        // zones per slot, all paid from the 7% spare.
        let big = Layout::new(geo(904, 275_712), 70, 3).expect("zn540-like");
        assert_eq!(big.slot_zones, 3);
        let spare = big.spare().expect("the spare pays the fixed costs");
        assert_eq!(spare.total(), 904 * 275_712 - big.volume_blocks);
        // 32 such zones have too little spare for six checkpoint and reserve zones.
        let e = Layout::new(geo(32, 275_712), 70, 3).expect_err("spare too small");
        assert!(e.0.contains("too little"), "{e}");
    }

    // Regression: the 32-bit check counted `D * (C - 1)` physical blocks, but addresses run to
    // `D * C - 1` (block 0 of each zone has one too), so a device with many small zones got
    // a layout whose physical block addresses wrapped and aliased each other.
    #[test]
    fn every_physical_block_has_a_32_bit_address() {
        let zones = 600_000_000;
        assert!(u64::from(zones) * 7 < u64::from(u32::MAX));
        match Layout::new(geo(zones, 8), 200, 2) {
            Ok(l) => panic!(
                "{} physical blocks accepted with 32-bit addresses",
                l.physical_blocks()
            ),
            Err(e) => assert!(e.0.contains("32-bit"), "{e}"),
        }
        assert!(pba_space_fits(536_870_911, 8));
        assert!(!pba_space_fits(536_870_912, 8));
    }
}
