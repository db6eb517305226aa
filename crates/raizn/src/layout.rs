//! Array geometry and address arithmetic: which member holds which data unit and which
//! parity unit of a stripe, and the logical LBA <-> (member, physical LBA) mapping.
//!
//! Pure functions of the member geometry, the member count N, the parity count m and the
//! stripe unit; no I/O. See docs/DESIGN.md (RAIZN) for the layout this encodes.

use zns::{Geometry, Lba};

/// Metadata zones of an array with one log zone (format versions 1 and 2, and version 3
/// with K = 1): general, log, swap. An array with K log zones has `2 + K`
/// ([`ArrayLayout::meta_zones`]).
pub const MIN_META_ZONES: u32 = 3;
/// Member zone holding the superblock, generation counters and the zone-reset log.
pub const GENERAL_ZONE: u32 = 0;
/// Member zone holding the partial-parity log (the first log zone of the pool).
pub const PARTIAL_PARITY_ZONE: u32 = 1;
/// Member zone that metadata garbage collection writes into.
pub const SWAP_ZONE: u32 = 2;
/// Metadata zones a member may hold open (general, partial-parity log, and swap during a
/// collection), taken from the
/// member's open and active limits when the logical limits are derived.
pub const META_ZONES_OPEN: u32 = 3;
/// The stripe unit used when none is configured.
pub const DEFAULT_STRIPE_UNIT_BYTES: u32 = 64 * 1024;
/// Smallest array: two data units and one parity unit.
pub const MIN_MEMBERS: usize = 3;
/// Most parity units per stripe: 2 (Reed-Solomon); 1 is RAID-5 (XOR).
pub const MAX_PARITY: u32 = 2;
/// Largest array the superblock's member index can describe sensibly.
pub const MAX_MEMBERS: usize = 255;

/// Why an array cannot be built from these members and settings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("an array needs {MIN_MEMBERS} to {MAX_MEMBERS} members, got {0}")]
    MemberCount(usize),
    #[error("parity count {0} is not supported (1: RAID-5, XOR; 2: Reed-Solomon)")]
    ParityCount(u32),
    #[error("{parity} parity unit(s) per stripe need at least {} members, got {members}", parity + 2)]
    TooFewForParity { members: usize, parity: u32 },
    #[error(
        "member {member} geometry differs from member 0: {what}; every member must be identical"
    )]
    GeometryMismatch { member: usize, what: String },
    #[error("member geometry is invalid: {0}")]
    Member(String),
    #[error("stripe unit {bytes} bytes: {why}")]
    StripeUnit { bytes: u64, why: String },
    #[error("members have {zones} zones; an array needs more than its {meta} metadata zones")]
    TooFewZones { zones: u32, meta: u32 },
    #[error("{log_zones} log zones per member: at least 1, at most a quarter of the member's {zones} zones")]
    LogZones { log_zones: u32, zones: u32 },
    #[error("member open/active limits {open}/{active} leave no zone for data after the {META_ZONES_OPEN} metadata zones")]
    Limits { open: u32, active: u32 },
    #[error("{0}")]
    LogSizing(LogSizing),
    #[error(
        "one log zone per member of {capacity} blocks cannot protect even one active zone: \
         it must hold two partial-parity records of {record} blocks (header and a {su}-block \
         stripe unit) and {relocation} blocks of relocation, {need} in all; give the array \
         a pool of log zones (--log-zones), a smaller stripe unit or members with bigger zones"
    )]
    LogRoom {
        capacity: u64,
        su: u64,
        record: u64,
        relocation: u64,
        need: u64,
    },
}

/// What a member's pool of log zones must hold, and the least K that holds it
/// (docs/DESIGN.md, "Sizing at create").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogSizing {
    /// A: the logical active limit (the logical zone count when unlimited).
    pub active: u64,
    /// Q: writes in flight logging a record past their zone's write-pointer stripe, one per
    /// active zone.
    pub in_flight: u64,
    /// T: zones with relocation state per member.
    pub torn_zones: u64,
    /// C: member zone capacity, blocks.
    pub capacity: u64,
    /// P = (A + Q)(1 + su): the live partial-parity records.
    pub records: u64,
    /// R = T (C + ceil(C / (MDTS - 1)) + C / su): relocated blocks, run headers, stale ranges.
    pub relocations: u64,
    /// The least K with (K - 1) C >= R + P.
    pub log_zones: u32,
    /// The most the member's zones allow (a quarter of them).
    pub max_log_zones: u32,
}

impl std::fmt::Display for LogSizing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the member log needs {} log zones per member ((K - 1) C >= R + P with C = {} \
             blocks, R = {} for T = {} torn zone(s), P = {} for A = {} active zones and Q = {} \
             writes in flight), more than the {} a quarter of the member's zones allows",
            self.log_zones,
            self.capacity,
            self.relocations,
            self.torn_zones,
            self.records,
            self.active,
            self.in_flight,
            self.max_log_zones
        )
    }
}

/// Where one logical block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    /// Member index, 0..N.
    pub member: usize,
    /// Physical LBA on that member.
    pub lba: Lba,
}

/// The geometry of an array: members, stripe unit, and the logical geometry it exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayLayout {
    member_geo: Geometry,
    members: usize,
    parity: u32,
    su_blocks: u64,
    /// Log zones per member, K: member zone 1, then zones 3..2 + K.
    log_zones: u32,
}

impl ArrayLayout {
    /// Validates the member geometries (all equal), the parity count and the stripe unit.
    pub fn new(
        member_geos: &[Geometry],
        parity: u32,
        stripe_unit_bytes: u64,
    ) -> Result<ArrayLayout, LayoutError> {
        let n = member_geos.len();
        if !(MIN_MEMBERS..=MAX_MEMBERS).contains(&n) {
            return Err(LayoutError::MemberCount(n));
        }
        if !(1..=MAX_PARITY).contains(&parity) {
            return Err(LayoutError::ParityCount(parity));
        }
        if n < parity as usize + 2 {
            return Err(LayoutError::TooFewForParity { members: n, parity });
        }
        let g = member_geos[0];
        g.validate().map_err(|e| LayoutError::Member(e.0))?;
        for (i, other) in member_geos.iter().enumerate().skip(1) {
            if let Some(what) = geometry_difference(&g, other) {
                return Err(LayoutError::GeometryMismatch { member: i, what });
            }
        }
        let su_blocks = stripe_unit_blocks(&g, stripe_unit_bytes)?;
        if g.zone_count <= MIN_META_ZONES {
            return Err(LayoutError::TooFewZones {
                zones: g.zone_count,
                meta: MIN_META_ZONES,
            });
        }
        let limit_ok = |l: u32| l == 0 || l > META_ZONES_OPEN;
        if !limit_ok(g.max_open) || !limit_ok(g.max_active) {
            return Err(LayoutError::Limits {
                open: g.max_open,
                active: g.max_active,
            });
        }
        Ok(ArrayLayout {
            member_geo: g,
            members: n,
            parity,
            su_blocks,
            log_zones: 1,
        })
    }

    /// This layout with `k` log zones per member (`new` gives 1). Refused when `k` is 0,
    /// more than a quarter of the member's zones (1 is always allowed), leaves no data
    /// zone, or is one log zone too small to protect a single active zone
    /// ([`ArrayLayout::log_active_limit`]).
    pub fn with_log_zones(self, k: u32) -> Result<ArrayLayout, LayoutError> {
        let zones = self.member_geo.zone_count;
        if k == 0 || (k > 1 && k > zones / 4) {
            return Err(LayoutError::LogZones {
                log_zones: k,
                zones,
            });
        }
        let meta = 2 + k;
        if zones <= meta {
            return Err(LayoutError::TooFewZones { zones, meta });
        }
        let l = ArrayLayout {
            log_zones: k,
            ..self
        };
        if l.log_active_limit() == Some(0) {
            let (record, relocation) = (l.log_record_blocks(), l.log_reloc_floor());
            return Err(LayoutError::LogRoom {
                capacity: l.member_geo.zone_capacity,
                su: l.su_blocks,
                record,
                relocation,
                need: 2 * record + relocation,
            });
        }
        Ok(l)
    }

    /// Blocks of the largest partial-parity record: its header and one stripe unit.
    pub fn log_record_blocks(&self) -> u64 {
        1 + self.su_blocks
    }

    /// Blocks of one log zone kept for relocation state at the least: one stripe unit
    /// relocated with its record header, and one stale range.
    pub fn log_reloc_floor(&self) -> u64 {
        self.su_blocks + 2
    }

    /// The most active zones one log zone (K = 1) can protect: a collection keeps one live
    /// partial-parity record per active zone (its highest stripe's, counting the record
    /// being appended), all of which may be on one member, and the record being appended
    /// needs room beside its stripe's older one, so `(A + 1)(1 + su) + (su + 2) <= C`
    /// (docs/DESIGN.md, "The one-zone log's active limit"). None for a pool (K >= 2), sized
    /// at create instead.
    pub fn log_active_limit(&self) -> Option<u32> {
        if self.log_zones != 1 {
            return None;
        }
        let c = self.member_geo.zone_capacity;
        let room = c.saturating_sub(self.log_reloc_floor());
        let a = (room / self.log_record_blocks()).saturating_sub(1);
        Some(u32::try_from(a).unwrap_or(u32::MAX))
    }

    /// The logical active limit the members allow (their limit less the metadata zones
    /// they may hold open; 0: unlimited), before the one-zone log's limit.
    pub fn members_active_limit(&self) -> u32 {
        let zones = self.member_geo.zone_count - self.meta_zones();
        self.member_geo
            .max_active
            .saturating_sub(META_ZONES_OPEN)
            .min(zones)
    }

    /// Blocks of a member's one log zone (K = 1) that its relocation state may take at run
    /// time: what the live records of the logical active limit leave (at least
    /// [`ArrayLayout::log_reloc_floor`]); a relocation past it is refused, so no record is
    /// ever dropped for relocated blocks. None for a pool.
    pub fn reloc_budget(&self) -> Option<u64> {
        self.log_active_limit()?;
        let g = self.logical_geometry();
        let active = match g.max_active {
            0 => u64::from(g.zone_count),
            a => u64::from(a),
        };
        let records = (active + 1) * self.log_record_blocks();
        Some(self.member_geo.zone_capacity.saturating_sub(records))
    }

    /// The least K whose pool holds a member's live log content with `torn_zones` zones
    /// with relocation state per member (docs/DESIGN.md, "Sizing at create"), with the
    /// figures: `(K - 1) C >= R + P`, one zone always left free for a collection.
    pub fn log_sizing(&self, torn_zones: u64) -> LogSizing {
        let g = self.member_geo;
        let c = g.zone_capacity.max(1);
        let su = self.su_blocks;
        // The logical active limit of a pool of any size (the open log zone is one of the
        // metadata zones held open, so K does not change it); unlimited: every data zone.
        let data_zones = u64::from(g.zone_count.saturating_sub(MIN_META_ZONES));
        let active = match g.max_active {
            0 => data_zones,
            l => u64::from(l.saturating_sub(META_ZONES_OPEN)).min(data_zones),
        };
        let in_flight = active;
        let records = (active + in_flight) * (1 + su);
        let run = u64::from(g.mdts_blocks).saturating_sub(1).max(1);
        let relocations = torn_zones * (c + c.div_ceil(run) + c / su);
        let need = (records + relocations).div_ceil(c);
        let log_zones = u32::try_from(need + 1).unwrap_or(u32::MAX);
        LogSizing {
            active,
            in_flight,
            torn_zones,
            capacity: c,
            records,
            relocations,
            log_zones,
            max_log_zones: (g.zone_count / 4).max(1),
        }
    }

    /// This layout with the least K `log_sizing(torn_zones)` gives, or `at_least` when more;
    /// refused with the figures when that K exceeds a quarter of the member's zones.
    pub fn with_sized_log_zones(
        self,
        torn_zones: u64,
        at_least: u32,
    ) -> Result<ArrayLayout, LayoutError> {
        let sizing = self.log_sizing(torn_zones);
        if sizing.log_zones > sizing.max_log_zones {
            return Err(LayoutError::LogSizing(sizing));
        }
        self.with_log_zones(sizing.log_zones.max(at_least))
    }

    /// Log zones per member, K.
    pub fn log_zones(&self) -> u32 {
        self.log_zones
    }

    /// Metadata zones at the start of every member, `M = 2 + K`; logical zone `i` is member
    /// zone `M + i`.
    pub fn meta_zones(&self) -> u32 {
        2 + self.log_zones
    }

    /// Member zone of log zone `i` (0..K) of the pool: zone 1, then zones 3, 4, ...
    pub fn log_zone(&self, i: u32) -> u32 {
        match i {
            0 => PARTIAL_PARITY_ZONE,
            i => SWAP_ZONE + i,
        }
    }

    /// Member count N.
    pub fn members(&self) -> usize {
        self.members
    }

    /// Parity units per stripe m.
    pub fn parity(&self) -> u32 {
        self.parity
    }

    /// Data units per stripe D = N - m.
    pub fn data_units(&self) -> u64 {
        (self.members - self.parity as usize) as u64
    }

    /// Stripe unit in blocks.
    pub fn su_blocks(&self) -> u64 {
        self.su_blocks
    }

    /// Data blocks of one stripe (D x su).
    pub fn stripe_data_blocks(&self) -> u64 {
        self.data_units() * self.su_blocks
    }

    /// The geometry every member has.
    pub fn member_geometry(&self) -> Geometry {
        self.member_geo
    }

    /// Stripes in one logical zone.
    pub fn stripes_per_zone(&self) -> u64 {
        self.member_geo.zone_capacity / self.su_blocks
    }

    /// The geometry the volume exports.
    pub fn logical_geometry(&self) -> Geometry {
        let g = self.member_geo;
        let d = self.data_units();
        let zones = g.zone_count - self.meta_zones();
        // The members keep two metadata zones open; a limit above the zone count would not
        // validate, and cannot be reached anyway.
        let less_meta = |l: u32| l.saturating_sub(META_ZONES_OPEN).min(zones);
        let (mut max_open, mut max_active) = (less_meta(g.max_open), less_meta(g.max_active));
        // One log zone holds the live records of so many active zones and no more: a lower
        // limit than the members' (an unlimited one stays so when every zone fits).
        if let Some(fit) = self.log_active_limit() {
            if fit > 0 && fit < zones && (max_active == 0 || fit < max_active) {
                max_active = fit;
                max_open = match max_open {
                    0 => fit,
                    o => o.min(fit),
                };
            }
        }
        Geometry {
            zone_count: zones,
            zone_size: g.zone_size * d,
            zone_capacity: g.zone_capacity * d,
            max_open,
            max_active,
            ..g
        }
    }

    /// The member holding the first parity unit (P) of stripe `s` (rotating,
    /// left-symmetric): member N-1 for stripe 0, then one member lower each stripe.
    pub fn parity_member(&self, stripe: u64) -> usize {
        self.parity_member_at(stripe, 0)
    }

    /// The member holding parity unit `j` (0..m) of stripe `s`: the m parity units sit on
    /// consecutive members (modulo N) from `parity_member`, so with m = 2 Q follows P.
    pub fn parity_member_at(&self, stripe: u64, j: u32) -> usize {
        let n = self.members as u64;
        ((n - 1 - stripe % n + u64::from(j)) % n) as usize
    }

    /// The members holding the parity units of stripe `s`, P first.
    pub fn parity_members(&self, stripe: u64) -> impl Iterator<Item = usize> + '_ {
        (0..self.parity).map(move |j| self.parity_member_at(stripe, j))
    }

    /// The member holding data unit `k` (0..D) of stripe `s`: data follows the parity.
    pub fn data_member(&self, stripe: u64, k: u64) -> usize {
        let n = self.members as u64;
        ((self.parity_member(stripe) as u64 + u64::from(self.parity) + k) % n) as usize
    }

    /// Which data unit of stripe `s` member `member` holds, or None when it holds parity.
    pub fn unit_of_member(&self, stripe: u64, member: usize) -> Option<u64> {
        let n = self.members as u64;
        let p = self.parity_member(stripe) as u64;
        let k = (member as u64 % n + n - p + n - u64::from(self.parity)) % n;
        (k < self.data_units()).then_some(k)
    }

    /// Which parity unit (0..m) of stripe `s` member `member` holds, or None for data.
    pub fn parity_of_member(&self, stripe: u64, member: usize) -> Option<u32> {
        let n = self.members as u64;
        let p = self.parity_member(stripe) as u64;
        let j = (member as u64 % n + n - p) % n;
        (j < u64::from(self.parity)).then_some(j as u32)
    }

    /// Member `member`'s position in the stripe code of stripe `s` (`code::StripeCode`):
    /// data unit k is k, parity unit j is D + j.
    pub fn code_position(&self, stripe: u64, member: usize) -> usize {
        match self.unit_of_member(stripe, member) {
            Some(k) => k as usize,
            None => {
                let j = self.parity_of_member(stripe, member).unwrap_or(0);
                self.data_units() as usize + j as usize
            }
        }
    }

    /// The stripe code of this array.
    pub fn code(&self) -> crate::code::StripeCode {
        crate::code::StripeCode::new(self.data_units() as usize, self.parity as usize)
    }

    /// Physical start LBA of logical zone `zone` on every member.
    pub fn member_zone_start(&self, zone: u32) -> Lba {
        self.member_geo.zone_start(zone + self.meta_zones())
    }

    /// Where offset `offset` (below the logical zone capacity) of logical zone `zone` lives.
    pub fn place(&self, zone: u32, offset: u64) -> Placement {
        let sdb = self.stripe_data_blocks();
        let stripe = offset / sdb;
        let k = (offset % sdb) / self.su_blocks;
        Placement {
            member: self.data_member(stripe, k),
            lba: self.member_zone_start(zone) + stripe * self.su_blocks + offset % self.su_blocks,
        }
    }

    /// Inverse of [`ArrayLayout::place`]: the logical zone and offset stored at `lba` of
    /// `member`, or None for parity, metadata zones and blocks beyond the capacity.
    pub fn logical_of(&self, member: usize, lba: Lba) -> Option<(u32, u64)> {
        let g = self.member_geo;
        let pz = g.zone_of(lba)?;
        let zone = pz.checked_sub(self.meta_zones())?;
        let within = lba - g.zone_start(pz);
        if within >= g.zone_capacity || member >= self.members {
            return None;
        }
        let stripe = within / self.su_blocks;
        let k = self.unit_of_member(stripe, member)?;
        let offset =
            stripe * self.stripe_data_blocks() + k * self.su_blocks + within % self.su_blocks;
        Some((zone, offset))
    }

    /// Blocks of its zone that `member` holds once the logical zone holds `wp` blocks:
    /// its data of every stripe below `wp`, and the parity of every complete stripe.
    pub fn member_blocks_at(&self, member: usize, wp: u64) -> u64 {
        let sdb = self.stripe_data_blocks();
        let full = wp / sdb;
        let rest = wp % sdb;
        let partial = match self.unit_of_member(full, member) {
            Some(k) if full < self.stripes_per_zone() => {
                rest.saturating_sub(k * self.su_blocks).min(self.su_blocks)
            }
            _ => 0,
        };
        full * self.su_blocks + partial
    }

    /// The longest logical prefix of a zone whose every data block is below its member's
    /// write pointer, given each member's written blocks in that zone (`member_wps[j]`,
    /// offsets from the member zone start).
    pub fn readable_prefix(&self, member_wps: &[u64]) -> u64 {
        let d = self.data_units();
        let su = self.su_blocks;
        for s in 0..self.stripes_per_zone() {
            for k in 0..d {
                let m = self.data_member(s, k);
                let have = member_wps.get(m).copied().unwrap_or(0);
                let present = have.saturating_sub(s * su).min(su);
                if present < su {
                    return s * self.stripe_data_blocks() + k * su + present;
                }
            }
        }
        self.stripes_per_zone() * self.stripe_data_blocks()
    }
}

/// The stripe unit in blocks: a whole number of blocks that divides the zone capacity.
fn stripe_unit_blocks(g: &Geometry, bytes: u64) -> Result<u64, LayoutError> {
    let bs = u64::from(g.block_size);
    let fail = |why: String| Err(LayoutError::StripeUnit { bytes, why });
    if bytes == 0 || !bytes.is_multiple_of(bs) {
        return fail(format!(
            "must be a positive multiple of the block size {bs}"
        ));
    }
    let su = bytes / bs;
    if !g.zone_capacity.is_multiple_of(su) {
        return fail(format!(
            "{su} blocks does not divide the member zone capacity {} blocks",
            g.zone_capacity
        ));
    }
    Ok(su)
}

/// The first field in which `b` differs from `a`, named for an error message.
fn geometry_difference(a: &Geometry, b: &Geometry) -> Option<String> {
    a.first_difference(b)
        .map(|(name, x, y)| format!("{name} {y} instead of {x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn member_geo() -> Geometry {
        Geometry {
            block_size: 4096,
            oob_size: 16,
            zone_count: 11,
            zone_size: 32,
            zone_capacity: 24,
            max_open: 5,
            max_active: 6,
            zasl_blocks: 16,
            mdts_blocks: 32,
            copy_max_ranges: 4,
            copy_max_range_blocks: 16,
            copy_max_blocks: 32,
            cross_zone_reads: false,
        }
    }

    #[test]
    fn logical_geometry_scales_capacity_and_subtracts_metadata_zones() {
        let l = ArrayLayout::new(&[member_geo(); 3], 1, 8 * 4096);
        let l = match l {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let g = l.logical_geometry();
        assert_eq!((g.zone_count, g.zone_size, g.zone_capacity), (8, 64, 48));
        assert_eq!((g.max_open, g.max_active), (2, 3));
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(l.stripes_per_zone(), 3);
    }

    #[test]
    fn bad_arrays_are_refused_with_the_reason() {
        let g = member_geo();
        assert_eq!(
            ArrayLayout::new(&[g; 2], 1, 32768),
            Err(LayoutError::MemberCount(2))
        );
        assert_eq!(
            ArrayLayout::new(&[g; 4], 3, 32768),
            Err(LayoutError::ParityCount(3))
        );
        assert_eq!(
            ArrayLayout::new(&[g; 3], 2, 32768),
            Err(LayoutError::TooFewForParity {
                members: 3,
                parity: 2
            })
        );
        let other = Geometry {
            zone_capacity: 16,
            ..g
        };
        match ArrayLayout::new(&[g, g, other], 1, 32768) {
            Err(LayoutError::GeometryMismatch { member: 2, what }) => {
                assert!(what.contains("zone capacity 16 instead of 24"), "{what}")
            }
            r => panic!("{r:?}"),
        }
        assert!(matches!(
            ArrayLayout::new(&[g; 3], 1, 5 * 4096),
            Err(LayoutError::StripeUnit { .. })
        ));
        assert!(matches!(
            ArrayLayout::new(&[g; 3], 1, 4096 + 512),
            Err(LayoutError::StripeUnit { .. })
        ));
        let tiny = Geometry {
            zone_count: 3,
            max_active: 3,
            max_open: 3,
            ..g
        };
        assert_eq!(
            ArrayLayout::new(&[tiny; 3], 1, 32768),
            Err(LayoutError::TooFewZones { zones: 3, meta: 3 })
        );
        let tight = Geometry {
            max_open: 3,
            max_active: 3,
            ..g
        };
        assert!(matches!(
            ArrayLayout::new(&[tight; 3], 1, 32768),
            Err(LayoutError::Limits { .. })
        ));
    }

    #[test]
    fn log_zones_move_the_data_zones_and_are_bounded() {
        let g = Geometry {
            zone_count: 16,
            ..member_geo()
        };
        let l = match ArrayLayout::new(&[g; 3], 1, 8 * 4096).and_then(|l| l.with_log_zones(4)) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        assert_eq!((l.log_zones(), l.meta_zones()), (4, 6));
        let pool: Vec<u32> = (0..4).map(|i| l.log_zone(i)).collect();
        assert_eq!(pool, [1, 3, 4, 5]);
        assert_eq!(l.logical_geometry().zone_count, 10);
        assert_eq!(l.member_zone_start(0), 6 * 32);
        assert_eq!(l.place(0, 0).lba, 6 * 32);
        assert_eq!(l.logical_of(0, 6 * 32), Some((0, 0)));
        assert_eq!(l.logical_of(0, 5 * 32), None);
        assert_eq!(
            l.with_log_zones(5),
            Err(LayoutError::LogZones {
                log_zones: 5,
                zones: 16
            })
        );
        assert!(matches!(
            l.with_log_zones(0),
            Err(LayoutError::LogZones { .. })
        ));
    }

    #[test]
    fn log_sizing_takes_the_least_pool_that_holds_the_live_content() {
        let g = Geometry {
            zone_count: 40,
            ..member_geo()
        };
        let l = match ArrayLayout::new(&[g; 3], 1, 8 * 4096) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let s = l.log_sizing(1);
        // A = 6 - 3, Q = A, P = (A + Q)(1 + 8); R = 24 + ceil(24 / 31) + 24 / 8.
        assert_eq!((s.active, s.in_flight, s.records), (3, 3, 54));
        assert_eq!((s.relocations, s.capacity), (28, 24));
        // (K - 1) 24 >= 82: K - 1 = 4.
        assert_eq!((s.log_zones, s.max_log_zones), (5, 10));
        assert_eq!(l.log_sizing(0).log_zones, 4);
        let sized = |l: ArrayLayout, at_least| match l.with_sized_log_zones(1, at_least) {
            Ok(l) => l.log_zones(),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(sized(l, 1), 5);
        assert_eq!(sized(l, 7), 7);
        // Unlimited active zones: every data zone counts.
        let open = Geometry {
            max_open: 0,
            max_active: 0,
            ..g
        };
        let u = match ArrayLayout::new(&[open; 3], 1, 8 * 4096) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(u.log_sizing(1).active, 37);
        // Too few zones for that pool: refused with the figures.
        let small = Geometry {
            zone_count: 16,
            ..member_geo()
        };
        let l = match ArrayLayout::new(&[small; 3], 1, 8 * 4096) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        match l.with_sized_log_zones(1, 1) {
            Err(e @ LayoutError::LogSizing(_)) => {
                let text = e.to_string();
                for part in [
                    "needs 5 log zones",
                    "C = 24",
                    "R = 28",
                    "P = 54",
                    "the 4 a quarter",
                ] {
                    assert!(text.contains(part), "{text}: no {part:?}");
                }
            }
            r => panic!("a pool of 5 zones out of 16: {r:?}"),
        }
    }

    /// The one-zone log's active limit: `(A + 1)(1 + su) + (su + 2) <= C`.
    #[test]
    fn one_log_zone_lowers_the_active_limit_to_what_it_protects() {
        let layout = |g: Geometry, n: usize, m: u32, su_bytes: u64, k: u32| match ArrayLayout::new(
            &vec![g; n],
            m,
            su_bytes,
        )
        .and_then(|l| l.with_log_zones(k))
        {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        // The small profile (C = 192, 12 active zones; 64 KiB units are 16 blocks): the
        // members allow 12 - 3 = 9, and 10 x 17 + 18 = 188 <= 192 (11 x 17 + 18 = 205 is
        // not), so 9 stand, leaving 192 - 170 = 22 blocks of relocation.
        let small = Geometry {
            block_size: 4096,
            oob_size: 16,
            zone_count: 32,
            zone_size: 256,
            zone_capacity: 192,
            max_open: 8,
            max_active: 12,
            mdts_blocks: 512,
            ..member_geo()
        };
        let l = layout(small, 3, 1, 65536, 1);
        assert_eq!(l.log_active_limit(), Some(9));
        assert_eq!(l.members_active_limit(), 9);
        let g = l.logical_geometry();
        assert_eq!((g.max_open, g.max_active), (5, 9));
        assert_eq!(l.reloc_budget(), Some(192 - 10 * 17));
        // 32 KiB units: 8 blocks, 19 zones would fit; the members' 9 stand.
        assert_eq!(layout(small, 3, 1, 32768, 1).log_active_limit(), Some(19));
        // A pool is sized at create instead.
        let pooled = layout(small, 3, 1, 65536, 4);
        assert_eq!(pooled.log_active_limit(), None);
        assert_eq!(pooled.reloc_budget(), None);
        // The crash schedules' members (48 blocks, unlimited, 4 data zones; 8-block units):
        // 4 x 9 + 10 = 46 <= 48 (5 x 9 + 10 = 55 is not), so 3 active zones of the 4, with
        // 12 blocks of relocation; the m = 2 arrays' 64-block members fit every zone and
        // stay unlimited (5 would fit), leaving 64 - 5 x 9 = 19.
        let crash = Geometry {
            block_size: 512,
            oob_size: 0,
            zone_count: 7,
            zone_size: 64,
            zone_capacity: 48,
            max_open: 0,
            max_active: 0,
            ..member_geo()
        };
        let l = layout(crash, 3, 1, 4096, 1);
        assert_eq!(l.log_active_limit(), Some(3));
        let g = l.logical_geometry();
        assert_eq!((g.max_open, g.max_active), (3, 3));
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(l.reloc_budget(), Some(12));
        let two = layout(
            Geometry {
                zone_capacity: 64,
                ..crash
            },
            4,
            2,
            4096,
            1,
        );
        assert_eq!(two.log_active_limit(), Some(5));
        assert_eq!(two.logical_geometry().max_active, 0);
        assert_eq!(two.reloc_budget(), Some(19));
        // The members' own lower limit stands.
        let limited = layout(
            Geometry {
                zone_count: 10,
                max_open: 5,
                max_active: 5,
                ..crash
            },
            3,
            1,
            4096,
            1,
        );
        let g = limited.logical_geometry();
        assert_eq!((g.max_open, g.max_active), (2, 2));
        assert_eq!(limited.reloc_budget(), Some(48 - 3 * 9));
        // A zn540 member (C = 275,712, 14 active): the members' 11 stand.
        let zn = Geometry {
            block_size: 4096,
            oob_size: 64,
            zone_count: 32,
            zone_size: 524_288,
            zone_capacity: 275_712,
            max_open: 14,
            max_active: 14,
            mdts_blocks: 512,
            ..member_geo()
        };
        assert_eq!(layout(zn, 5, 1, 65536, 1).logical_geometry().max_active, 11);
        // Not even one zone: refused, naming the sizes (16 < 2 x 9 + 10).
        let tiny = Geometry {
            zone_capacity: 16,
            ..member_geo()
        };
        match ArrayLayout::new(&[tiny; 3], 1, 8 * 4096).and_then(|l| l.with_log_zones(1)) {
            Err(e @ LayoutError::LogRoom { .. }) => {
                let t = e.to_string();
                for part in [
                    "of 16 blocks",
                    "records of 9 blocks",
                    "10 blocks of relocation",
                    "28 in all",
                ] {
                    assert!(t.contains(part), "{t}: no {part:?}");
                }
            }
            r => panic!("{r:?}"),
        }
        // A pool of such members is not refused for it.
        let tiny_pool = Geometry {
            zone_count: 16,
            ..tiny
        };
        assert!(ArrayLayout::new(&[tiny_pool; 3], 1, 8 * 4096)
            .and_then(|l| l.with_log_zones(4))
            .is_ok());
    }

    #[test]
    fn parity_rotates_over_every_member() {
        let l = match ArrayLayout::new(&[member_geo(); 4], 1, 8 * 4096) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let ps: Vec<usize> = (0..8).map(|s| l.parity_member(s)).collect();
        assert_eq!(ps, [3, 2, 1, 0, 3, 2, 1, 0]);
        assert_eq!(l.data_member(0, 0), 0);
        assert_eq!(l.data_member(1, 0), 3);
        assert_eq!(l.unit_of_member(1, 2), None);
        assert_eq!(l.unit_of_member(1, 3), Some(0));
    }

    #[test]
    fn two_parity_units_rotate_with_q_after_p() {
        let l = match ArrayLayout::new(&[member_geo(); 5], 2, 8 * 4096) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(l.data_units(), 3);
        assert_eq!(l.logical_geometry().zone_capacity, 3 * 24);
        let pq: Vec<Vec<usize>> = (0..5).map(|s| l.parity_members(s).collect()).collect();
        assert_eq!(pq, [[4, 0], [3, 4], [2, 3], [1, 2], [0, 1]]);
        // Stripe 0: P on 4, Q on 0, data units 0..3 on members 1, 2, 3.
        let data: Vec<usize> = (0..3).map(|k| l.data_member(0, k)).collect();
        assert_eq!(data, [1, 2, 3]);
        for s in 0..10 {
            let mut roles = [0u32; 5];
            for m in 0..5 {
                match (l.unit_of_member(s, m), l.parity_of_member(s, m)) {
                    (Some(k), None) => assert_eq!(l.data_member(s, k), m),
                    (None, Some(j)) => assert_eq!(l.parity_member_at(s, j), m),
                    r => panic!("stripe {s} member {m}: {r:?}"),
                }
                roles[l.code_position(s, m)] += 1;
            }
            assert_eq!(roles, [1; 5], "stripe {s}: every code position once");
        }
        for wp in 0..=l.logical_geometry().zone_capacity {
            let wps: Vec<u64> = (0..5).map(|m| l.member_blocks_at(m, wp)).collect();
            assert_eq!(l.readable_prefix(&wps), wp, "wp {wp} member wps {wps:?}");
        }
    }

    #[test]
    fn member_blocks_and_readable_prefix_agree() {
        let l = match ArrayLayout::new(&[member_geo(); 3], 1, 8 * 4096) {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        for wp in 0..=48 {
            let wps: Vec<u64> = (0..3).map(|m| l.member_blocks_at(m, wp)).collect();
            assert_eq!(l.readable_prefix(&wps), wp, "wp {wp} member wps {wps:?}");
        }
        // A torn stripe: member 1 lost its unit of stripe 0, member 0 kept its unit.
        assert_eq!(l.readable_prefix(&[8, 3, 0]), 11);
    }
}
