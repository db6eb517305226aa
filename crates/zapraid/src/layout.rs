//! Array and segment geometry of a ZapRAID array, and its address arithmetic: members,
//! header/data/footer regions of a segment, stripe groups, parity rotation, physical block
//! addresses (docs/DESIGN.md, "ZapRAID").
//!
//! Everything here is pure arithmetic on validated numbers; the one place that knows the
//! layout, used by the volume, recovery and the tests alike.

use zns::{Geometry, Lba};

/// Bytes of the per-block metadata record (docs/FORMAT.md).
pub const RECORD_BYTES: u32 = 32;
/// Bytes of a footer block's own header, before its entries.
pub const FOOTER_HEADER_BYTES: u32 = 32;
/// Most members an array may have (the header names one zone per member in one block).
pub const MAX_MEMBERS: u32 = 64;
/// Blocks of the header region of every member zone.
pub const HEADER_BLOCKS: u64 = 1;

/// The group size of `GroupMode::DEFAULT` with records in per-block metadata: the paper's.
pub const GROUP_DEFAULT: u32 = 256;
/// The group size of `GroupMode::DEFAULT` with in-band records (at most the summary's
/// capacity): a flush pads the open group to its summary, so a smaller group bounds that
/// padding, while the summary stripe costs `1 / G` of the data region.
pub const GROUP_DEFAULT_IN_BAND: u32 = 32;

/// How stripes are grouped, chosen at format (docs/DESIGN.md, "Stripe groups").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupMode {
    /// `GROUP_DEFAULT` stripes per group (all of a segment's if it has fewer), or with
    /// in-band records `GROUP_DEFAULT_IN_BAND` (fewer if a summary block holds fewer records).
    Default,
    /// `G = 1`: every stripe is a Zone Write.
    ZoneWriteOnly,
    /// `G = S`: one group per segment; only its last stripe is a Zone Write.
    ZoneAppendOnly,
    /// Groups of this many stripes (at least 1; more than `S` is refused).
    Grouped(u32),
}

impl GroupMode {
    /// The paper's default group size (a smaller one with in-band records).
    pub const DEFAULT: GroupMode = GroupMode::Default;

    fn resolve(self, stripes: u32, in_band: Option<u32>) -> u32 {
        match self {
            GroupMode::Default => match in_band {
                Some(max) => GROUP_DEFAULT_IN_BAND.min(max),
                // A segment of fewer stripes than the paper's default is one group: a
                // default that the members' geometry refuses would be no default.
                None => GROUP_DEFAULT.min(stripes),
            },
            GroupMode::ZoneWriteOnly => 1,
            GroupMode::ZoneAppendOnly => stripes,
            GroupMode::Grouped(g) => g,
        }
    }
}

/// Why an array cannot be built from the given members and parameters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("k = {0}: an array needs at least 2 data blocks per stripe")]
    TooFewData(u32),
    #[error("m = {0}: an array needs at least 1 parity block per stripe")]
    NoParity(u32),
    #[error("k + m = {0} members given, at most {MAX_MEMBERS} are supported")]
    TooManyMembers(u32),
    #[error("{given} members given for k + m = {want}")]
    MemberCount { given: usize, want: u32 },
    #[error("member {member} has a different geometry from member 0 ({what}); every member must be the same")]
    UnequalMembers { member: usize, what: String },
    #[error("members have {0} metadata bytes per block; records in per-block metadata need at least {RECORD_BYTES} (format with in-band records)")]
    MetadataTooSmall(u32),
    #[error("group size {group} does not suit in-band records: G must be within 2..={max} (a summary holds at most {summary} records, and a flush pads a group: G is at most a quarter of a segment's {stripes} stripes)")]
    BadInBandGroup {
        group: u32,
        max: u32,
        summary: u32,
        stripes: u32,
    },
    #[error("member zones are too small: capacity {0} blocks leaves no data region")]
    ZoneTooSmall(u64),
    #[error("member zones of {0} blocks are too large (at most 2^32 - 1)")]
    ZoneTooLarge(u64),
    #[error("members have {0} zones; at most 2^24 - 1 are supported")]
    TooManyZones(u32),
    #[error("group size {group} is not within 1..={stripes} (stripes per segment)")]
    BadGroup { group: u32, stripes: u32 },
    #[error("invalid member geometry: {0}")]
    Geometry(String),
}

/// A physical block address: a data-region block of one member zone of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pba {
    pub segment: u32,
    pub member: u8,
    /// Offset inside the data region (0-based; the zone offset is one more).
    pub offset: u32,
}

impl Pba {
    /// Packs into 64 bits: segment (24) | member (8) | offset (32).
    pub fn pack(self) -> u64 {
        (u64::from(self.segment) << 40) | (u64::from(self.member) << 32) | u64::from(self.offset)
    }

    pub fn unpack(v: u64) -> Pba {
        Pba {
            segment: (v >> 40) as u32,
            member: (v >> 32) as u8,
            offset: v as u32,
        }
    }
}

/// The role of a member in one stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Data block `d` (0-based, `d < k`).
    Data(u32),
    /// Parity block `j` (`j < m`).
    Parity(u32),
}

/// The validated geometry of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub k: u32,
    pub m: u32,
    /// Geometry every member reports.
    pub member: Geometry,
    /// Stripes per group, `G`.
    pub group: u32,
    /// Stripes per segment (data-region blocks per member zone), `S`.
    pub stripes: u32,
    /// Footer blocks per member zone, `F`.
    pub footer_blocks: u32,
    /// Footer entries per footer block, `E`.
    pub entries_per_footer: u32,
    /// Block records are kept in-band (each group's last stripe is its summary), not in
    /// the members' per-block metadata.
    pub in_band: bool,
}

fn describe_difference(a: &Geometry, b: &Geometry) -> String {
    let mut d = Vec::new();
    if a.block_size != b.block_size {
        d.push(format!("block size {} vs {}", b.block_size, a.block_size));
    }
    if a.oob_size != b.oob_size {
        d.push(format!("metadata {} vs {} bytes", b.oob_size, a.oob_size));
    }
    if a.zone_count != b.zone_count {
        d.push(format!("{} vs {} zones", b.zone_count, a.zone_count));
    }
    if a.zone_size != b.zone_size || a.zone_capacity != b.zone_capacity {
        d.push(format!(
            "zone size/capacity {}/{} vs {}/{}",
            b.zone_size, b.zone_capacity, a.zone_size, a.zone_capacity
        ));
    }
    if d.is_empty() {
        d.push("limits differ".into());
    }
    d.join(", ")
}

/// Stripes `S` and footer blocks `F` for a zone of `capacity` blocks: the largest `S` with
/// `1 + S + ceil(S / E) <= capacity`.
pub fn segment_regions(capacity: u64, entries_per_footer: u32) -> Option<(u64, u64)> {
    let e = u64::from(entries_per_footer);
    if e == 0 || capacity < HEADER_BLOCKS + 2 {
        return None;
    }
    let room = capacity - HEADER_BLOCKS;
    // S + ceil(S/E) <= room  <=>  S <= floor(room * E / (E + 1)) up to rounding; start there
    // and step down until it fits (at most a step or two).
    let mut s = room.saturating_mul(e) / (e + 1);
    while s > 0 && s + s.div_ceil(e) > room {
        s -= 1;
    }
    (s > 0).then(|| (s, s.div_ceil(e)))
}

/// Where block records are kept, chosen at format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordPlace {
    /// In-band when the members have fewer than `RECORD_BYTES` metadata bytes per block,
    /// else in per-block metadata.
    Auto,
    /// In each group's summary block, whatever metadata the members have.
    InBand,
    /// In per-block metadata (refused on members with too little).
    OutOfBand,
}

impl Layout {
    /// Validates `k`, `m`, the member geometries (all equal) and the group mode; records go
    /// in-band when the members have too little metadata (`RecordPlace::Auto`).
    pub fn new(
        k: u32,
        m: u32,
        mode: GroupMode,
        members: &[Geometry],
    ) -> Result<Layout, LayoutError> {
        Layout::with_records(k, m, mode, members, RecordPlace::Auto)
    }

    /// As `new`, with the place of the block records chosen.
    pub fn with_records(
        k: u32,
        m: u32,
        mode: GroupMode,
        members: &[Geometry],
        place: RecordPlace,
    ) -> Result<Layout, LayoutError> {
        if k < 2 {
            return Err(LayoutError::TooFewData(k));
        }
        if m == 0 {
            return Err(LayoutError::NoParity(m));
        }
        let n = k + m;
        if n > MAX_MEMBERS {
            return Err(LayoutError::TooManyMembers(n));
        }
        if members.len() != n as usize {
            return Err(LayoutError::MemberCount {
                given: members.len(),
                want: n,
            });
        }
        let first = members[0];
        first.validate().map_err(|e| LayoutError::Geometry(e.0))?;
        if let Some((i, g)) = members.iter().enumerate().find(|(_, g)| **g != first) {
            return Err(LayoutError::UnequalMembers {
                member: i,
                what: describe_difference(&first, g),
            });
        }
        let in_band = match place {
            RecordPlace::Auto => first.oob_size < RECORD_BYTES,
            RecordPlace::InBand => true,
            RecordPlace::OutOfBand if first.oob_size < RECORD_BYTES => {
                return Err(LayoutError::MetadataTooSmall(first.oob_size))
            }
            RecordPlace::OutOfBand => false,
        };
        if first.zone_count >= 1 << 24 {
            return Err(LayoutError::TooManyZones(first.zone_count));
        }
        if first.zone_capacity >= 1 << 32 {
            return Err(LayoutError::ZoneTooLarge(first.zone_capacity));
        }
        let e = (first.block_size - FOOTER_HEADER_BYTES) / RECORD_BYTES;
        let (s, f) = segment_regions(first.zone_capacity, e)
            .ok_or(LayoutError::ZoneTooSmall(first.zone_capacity))?;
        // Both fit in u32: S < capacity < 2^32.
        let (stripes, footer_blocks) = (s as u32, f as u32);
        // A summary lists every block of its group, itself included, in one footer-format
        // block; a group of one stripe would be its summary alone. A flush pads the open
        // group to its summary (up to G - 1 stripes): at most a quarter of a segment, so a
        // collection, which flushes once, frees more than its flush pads.
        let in_band_max = e.min(stripes / 4);
        let group = mode.resolve(stripes, in_band.then_some(in_band_max));
        if group == 0 || group > stripes {
            return Err(LayoutError::BadGroup { group, stripes });
        }
        if in_band && (group < 2 || group > in_band_max) {
            return Err(LayoutError::BadInBandGroup {
                group,
                max: in_band_max,
                summary: e,
                stripes,
            });
        }
        Ok(Layout {
            k,
            m,
            member: first,
            group,
            stripes,
            footer_blocks,
            entries_per_footer: e,
            in_band,
        })
    }

    /// Whether stripe `s` is a group summary (in-band records: every group's barrier).
    pub fn is_summary(&self, s: u32) -> bool {
        self.in_band && self.is_barrier(s)
    }

    /// Members, `k + m`.
    pub fn n(&self) -> u32 {
        self.k + self.m
    }

    /// Segments, `Z`: one per member zone.
    pub fn segments(&self) -> u32 {
        self.member.zone_count
    }

    pub fn block_size(&self) -> usize {
        self.member.block_size as usize
    }

    pub fn oob_size(&self) -> usize {
        self.member.oob_size as usize
    }

    /// Client blocks a segment holds: `k S`.
    pub fn data_blocks_per_segment(&self) -> u64 {
        u64::from(self.k) * u64::from(self.stripes)
    }

    /// Number of groups in a segment (the last may be shorter than `G`).
    pub fn groups(&self) -> u32 {
        self.stripes.div_ceil(self.group)
    }

    /// The group holding stripe (or data offset) `s`.
    pub fn group_of(&self, s: u32) -> u32 {
        s / self.group
    }

    /// Data offsets `(start, len)` of group `g`.
    pub fn group_range(&self, g: u32) -> (u32, u32) {
        let start = g.saturating_mul(self.group).min(self.stripes);
        let len = self.group.min(self.stripes - start);
        (start, len)
    }

    /// The id of stripe `s` inside its group, `0 .. len`.
    pub fn stripe_id_in_group(&self, s: u32) -> u32 {
        s % self.group
    }

    /// Whether stripe `s` is its group's barrier (the last stripe, written with Zone Write).
    pub fn is_barrier(&self, s: u32) -> bool {
        let (start, len) = self.group_range(self.group_of(s));
        s + 1 == start + len
    }

    /// The member holding parity block `j` of stripe `s`: rotating, as in the paper's Fig. 2.
    pub fn parity_member(&self, s: u32, j: u32) -> u32 {
        let n = self.n();
        ((n - 1) - (s % n) + j) % n
    }

    /// The member holding data block `d` of stripe `s`.
    pub fn data_member(&self, s: u32, d: u32) -> u32 {
        (self.parity_member(s, 0) + self.m + d) % self.n()
    }

    /// What `member` holds in stripe `s`.
    pub fn role(&self, s: u32, member: u32) -> Role {
        let n = self.n();
        let rel = (member + n - self.parity_member(s, 0)) % n;
        if rel < self.m {
            Role::Parity(rel)
        } else {
            Role::Data(rel - self.m)
        }
    }

    /// The member LBA of the first block of segment `segment`'s zone.
    pub fn zone_start(&self, segment: u32) -> Lba {
        self.member.zone_start(segment)
    }

    /// The member LBA of a data-region block.
    pub fn data_lba(&self, segment: u32, offset: u32) -> Lba {
        self.zone_start(segment) + HEADER_BLOCKS + u64::from(offset)
    }

    /// The member LBA of footer block `j`.
    pub fn footer_lba(&self, segment: u32, j: u32) -> Lba {
        self.zone_start(segment) + HEADER_BLOCKS + u64::from(self.stripes) + u64::from(j)
    }

    /// Data offsets `(first, count)` described by footer block `j`.
    pub fn footer_range(&self, j: u32) -> (u32, u32) {
        let first = j.saturating_mul(self.entries_per_footer).min(self.stripes);
        (first, self.entries_per_footer.min(self.stripes - first))
    }

    /// Blocks of a member zone used by a sealed segment; less than the capacity when the
    /// regions do not fill it exactly (the zone is then finished after the footer).
    pub fn used_blocks(&self) -> u64 {
        HEADER_BLOCKS + u64::from(self.stripes) + u64::from(self.footer_blocks)
    }

    /// Bits of one compact stripe table entry: `ceil(log2 G)`.
    pub fn stripe_id_bits(&self) -> u32 {
        crate::index::stripe_id_bits(self.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn geo(cap: u64) -> Geometry {
        Geometry {
            block_size: 4096,
            oob_size: 64,
            zone_count: 8,
            zone_size: cap.next_power_of_two(),
            zone_capacity: cap,
            max_open: 4,
            max_active: 4,
            zasl_blocks: 8,
            mdts_blocks: 16,
            copy_max_ranges: 4,
            copy_max_range_blocks: 16,
            copy_max_blocks: 16,
            cross_zone_reads: false,
        }
    }

    #[test]
    fn regions_fill_the_zone_as_tightly_as_possible() {
        for cap in 3..2000u64 {
            for e in [1u32, 15, 127] {
                let (s, f) = segment_regions(cap, e).expect("fits");
                assert!(1 + s + f <= cap, "cap {cap} e {e}");
                assert_eq!(f, s.div_ceil(u64::from(e)));
                // One more stripe would not fit.
                let s1 = s + 1;
                assert!(1 + s1 + s1.div_ceil(u64::from(e)) > cap, "cap {cap} e {e}");
            }
        }
        assert_eq!(segment_regions(2, 127), None);
        // The paper's ZN540 zone: 275,512 blocks; 204 entries per footer block there.
        assert_eq!(segment_regions(275_512, 204), Some((274_167, 1_344)));
    }

    #[test]
    fn refuses_bad_arrays_with_their_reason() {
        let g = geo(100);
        let four = [g; 4];
        assert_eq!(
            Layout::new(1, 1, GroupMode::DEFAULT, &four[..2]),
            Err(LayoutError::TooFewData(1))
        );
        assert_eq!(
            Layout::new(3, 0, GroupMode::DEFAULT, &four[..3]),
            Err(LayoutError::NoParity(0))
        );
        assert!(Layout::new(3, 2, GroupMode::Grouped(4), &[g; 5]).is_ok());
        assert!(matches!(
            Layout::new(3, 1, GroupMode::Grouped(4), &four[..3]),
            Err(LayoutError::MemberCount { .. })
        ));
        let mut odd = four;
        odd[2].zone_capacity = 90;
        let e = Layout::new(3, 1, GroupMode::Grouped(4), &odd);
        assert!(
            matches!(e, Err(LayoutError::UnequalMembers { member: 2, .. })),
            "{e:?}"
        );
        let small = [Geometry { oob_size: 16, ..g }; 4];
        assert_eq!(
            Layout::with_records(3, 1, GroupMode::Grouped(4), &small, RecordPlace::OutOfBand),
            Err(LayoutError::MetadataTooSmall(16))
        );
        // Too little metadata: records go in-band, in group summaries of at most E records.
        let l = Layout::new(3, 1, GroupMode::Grouped(4), &small).expect("in-band layout");
        assert!(l.in_band && l.is_summary(3) && !l.is_summary(2));
        assert!(
            !Layout::new(3, 1, GroupMode::Grouped(4), &four)
                .expect("layout")
                .in_band
        );
        let big = [geo(1000); 4];
        for group in [1, 128] {
            assert!(matches!(
                Layout::with_records(3, 1, GroupMode::Grouped(group), &big, RecordPlace::InBand),
                Err(LayoutError::BadInBandGroup {
                    max: 127,
                    summary: 127,
                    ..
                })
            ));
        }
        assert!(matches!(
            Layout::with_records(3, 1, GroupMode::Grouped(25), &four, RecordPlace::InBand),
            Err(LayoutError::BadInBandGroup {
                max: 24,
                stripes: 98,
                ..
            })
        ));
        let d = Layout::new(3, 1, GroupMode::DEFAULT, &small).expect("layout");
        assert_eq!(
            d.group, 24,
            "a quarter of the segment, below GROUP_DEFAULT_IN_BAND"
        );
        // Regression: the default group of 256 stripes was refused on members whose segment
        // holds fewer stripes, so `zapraid format` without --group failed on small members.
        let d = Layout::new(3, 1, GroupMode::DEFAULT, &four).expect("default layout");
        assert_eq!(
            d.group, 98,
            "the whole segment when it has fewer than 256 stripes"
        );
        assert!(matches!(
            Layout::new(3, 1, GroupMode::Grouped(256), &four),
            Err(LayoutError::BadGroup { group: 256, .. })
        ));
        assert!(matches!(
            Layout::new(3, 1, GroupMode::Grouped(0), &four),
            Err(LayoutError::BadGroup { .. })
        ));
        assert!(matches!(
            Layout::new(3, 1, GroupMode::Grouped(1000), &four),
            Err(LayoutError::BadGroup { .. })
        ));
        let l = Layout::new(3, 1, GroupMode::ZoneAppendOnly, &four).expect("layout");
        assert_eq!(l.group, l.stripes);
        assert_eq!(
            Layout::new(3, 1, GroupMode::ZoneWriteOnly, &four).map(|l| l.group),
            Ok(1)
        );
    }

    #[test]
    fn groups_barriers_and_roles() {
        let l = Layout::new(3, 1, GroupMode::Grouped(8), &[geo(100); 4]).expect("layout");
        assert_eq!(
            (l.stripes, l.footer_blocks, l.entries_per_footer),
            (98, 1, 127)
        );
        assert_eq!(l.groups(), 13);
        assert_eq!(l.group_range(12), (96, 2));
        assert!(l.is_barrier(7) && l.is_barrier(97) && !l.is_barrier(96) && !l.is_barrier(0));
        for s in 0..l.stripes {
            let mut seen = [0u32; 4];
            for d in 0..l.k {
                let mb = l.data_member(s, d);
                assert_eq!(l.role(s, mb), Role::Data(d));
                seen[mb as usize] += 1;
            }
            let p = l.parity_member(s, 0);
            assert_eq!(l.role(s, p), Role::Parity(0));
            seen[p as usize] += 1;
            assert_eq!(seen, [1; 4], "stripe {s}");
        }
        // Parity rotates over every member.
        let ps: Vec<u32> = (0..4).map(|s| l.parity_member(s, 0)).collect();
        assert_eq!(ps, vec![3, 2, 1, 0]);
        assert_eq!(l.footer_range(0), (0, 98));
        assert_eq!(l.data_lba(2, 0), 2 * 128 + 1);
        assert_eq!(l.footer_lba(2, 0), 2 * 128 + 99);
        let p = Pba {
            segment: (1 << 24) - 1,
            member: 63,
            offset: u32::MAX,
        };
        assert_eq!(Pba::unpack(p.pack()), p);
    }
}
