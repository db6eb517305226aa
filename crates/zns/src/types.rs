//! Zoned-namespace vocabulary: zone states, zone descriptors, device geometry (Identify),
//! zone management actions and report filters.

use crate::status::NvmeStatus;

/// A logical block address, in units of the device's block size.
pub type Lba = u64;

/// Zone states of the ZNS command set (ZNS 1.1, section 2.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneState {
    Empty,
    ImplicitlyOpened,
    ExplicitlyOpened,
    Closed,
    Full,
    ReadOnly,
    Offline,
}

impl ZoneState {
    pub const ALL: [ZoneState; 7] = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpened,
        ZoneState::ExplicitlyOpened,
        ZoneState::Closed,
        ZoneState::Full,
        ZoneState::ReadOnly,
        ZoneState::Offline,
    ];

    /// Open zones hold an open resource (and an active one).
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened
        )
    }

    /// Active zones hold an active resource: the open ones and Closed.
    pub fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }

    /// The snake_case name used by the CLI and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            ZoneState::Empty => "empty",
            ZoneState::ImplicitlyOpened => "implicitly_opened",
            ZoneState::ExplicitlyOpened => "explicitly_opened",
            ZoneState::Closed => "closed",
            ZoneState::Full => "full",
            ZoneState::ReadOnly => "read_only",
            ZoneState::Offline => "offline",
        }
    }

    /// The short names `blkzone report` prints (EM, OI, OE, CL, FU, RO, OL).
    pub fn short_name(self) -> &'static str {
        match self {
            ZoneState::Empty => "EM",
            ZoneState::ImplicitlyOpened => "OI",
            ZoneState::ExplicitlyOpened => "OE",
            ZoneState::Closed => "CL",
            ZoneState::Full => "FU",
            ZoneState::ReadOnly => "RO",
            ZoneState::Offline => "OL",
        }
    }

    /// Parses the snake_case name, the short name, or a few common spellings.
    pub fn parse(text: &str) -> Option<ZoneState> {
        let t = text.trim().to_ascii_lowercase().replace('-', "_");
        ZoneState::ALL.into_iter().find(|s| {
            s.name() == t
                || s.short_name().eq_ignore_ascii_case(&t)
                || (t == "readonly" && *s == ZoneState::ReadOnly)
                || (t == "open" && *s == ZoneState::ImplicitlyOpened)
        })
    }

    /// The Zone State field value of a zone descriptor (ZSE = 1h ... ZSO = Fh).
    pub fn nvme_value(self) -> u8 {
        match self {
            ZoneState::Empty => 0x1,
            ZoneState::ImplicitlyOpened => 0x2,
            ZoneState::ExplicitlyOpened => 0x3,
            ZoneState::Closed => 0x4,
            ZoneState::ReadOnly => 0xD,
            ZoneState::Full => 0xE,
            ZoneState::Offline => 0xF,
        }
    }

    /// Inverse of [`ZoneState::nvme_value`].
    pub fn from_nvme_value(v: u8) -> Option<ZoneState> {
        ZoneState::ALL.into_iter().find(|s| s.nvme_value() == v)
    }
}

impl std::fmt::Display for ZoneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Zone attribute bits of a zone descriptor.
pub mod zone_attr {
    /// Zone Finished by Controller.
    pub const ZFC: u8 = 0x01;
    /// Finish Zone Recommended.
    pub const FZR: u8 = 0x02;
    /// Reset Zone Recommended.
    pub const RZR: u8 = 0x04;
    /// TL-opened (ZNS+, docs/ZNSPLUS.md): the zone is open for threaded logging. A bit the
    /// ZNS specification reserves; zonestack devices with ZNS+ set it.
    pub const TLO: u8 = 0x08;
}

/// One entry of a Report Zones reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneDescriptor {
    /// Always sequential-write-required (type 2h) for ZNS.
    pub state: ZoneState,
    /// Zone attribute bits, see [`zone_attr`].
    pub attributes: u8,
    /// Writable blocks in the zone.
    pub capacity: u64,
    /// Zone start LBA (ZSLBA).
    pub start: Lba,
    /// Write pointer: the WP of Empty, open, Closed and Read Only zones; ZSLBA + capacity for
    /// Full zones (Finish moves the WP to the capacity boundary, as QEMU does); ZSLBA + zone
    /// size for Offline zones, where the WP is not valid.
    pub wp: Lba,
}

/// Zone Management Send actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneAction {
    Open,
    Close,
    Finish,
    Reset,
    Offline,
}

impl ZoneAction {
    pub const ALL: [ZoneAction; 5] = [
        ZoneAction::Open,
        ZoneAction::Close,
        ZoneAction::Finish,
        ZoneAction::Reset,
        ZoneAction::Offline,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ZoneAction::Open => "open",
            ZoneAction::Close => "close",
            ZoneAction::Finish => "finish",
            ZoneAction::Reset => "reset",
            ZoneAction::Offline => "offline",
        }
    }
}

/// Report Zones "Reporting Options" state filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ReportFilter {
    #[default]
    All,
    /// Only zones in exactly this state.
    State(ZoneState),
}

impl ReportFilter {
    pub fn matches(self, state: ZoneState) -> bool {
        match self {
            ReportFilter::All => true,
            ReportFilter::State(s) => s == state,
        }
    }
}

/// A Report Zones reply.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ZoneReport {
    /// Number of Zones field: with Partial = 0 every matching zone from the start zone to the
    /// end of the namespace; with Partial = 1 only the descriptors returned.
    pub nr_zones: u64,
    pub zones: Vec<ZoneDescriptor>,
}

/// One source range of a Copy command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRange {
    pub lba: Lba,
    pub blocks: u64,
}

/// Identify data a host needs: namespace format, zone geometry and limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Logical block size in bytes (512 or 4096).
    pub block_size: u32,
    /// Per-block metadata (OOB) bytes: 0, 8, 16 or 64.
    pub oob_size: u32,
    pub zone_count: u32,
    /// Zone size in blocks (the LBA distance between zone starts).
    pub zone_size: u64,
    /// Writable blocks per zone, at most `zone_size`.
    pub zone_capacity: u64,
    /// Maximum open zones, 0 = unlimited (a count, not NVMe's 0-based MOR).
    pub max_open: u32,
    /// Maximum active zones, 0 = unlimited (a count, not NVMe's 0-based MAR).
    pub max_active: u32,
    /// Zone Append size limit in blocks (ZASL translated to blocks).
    pub zasl_blocks: u32,
    /// Maximum data transfer size of one command, in blocks.
    pub mdts_blocks: u32,
    /// Copy limits: source ranges (MSRC + 1), blocks per range (MSSRL), total blocks (MCL).
    pub copy_max_ranges: u32,
    pub copy_max_range_blocks: u32,
    pub copy_max_blocks: u32,
    /// Whether reads may cross zone boundaries (Read Across Zone Boundaries).
    pub cross_zone_reads: bool,
}

impl Geometry {
    /// Total namespace size in blocks.
    pub fn total_blocks(&self) -> u64 {
        u64::from(self.zone_count) * self.zone_size
    }

    /// Writable bytes of the whole namespace.
    pub fn capacity_bytes(&self) -> u64 {
        u64::from(self.zone_count) * self.zone_capacity * u64::from(self.block_size)
    }

    /// Index of the zone that holds `lba`, if it is inside the namespace.
    pub fn zone_of(&self, lba: Lba) -> Option<u32> {
        if lba >= self.total_blocks() {
            return None;
        }
        u32::try_from(lba / self.zone_size).ok()
    }

    pub fn zone_start(&self, zone: u32) -> Lba {
        u64::from(zone) * self.zone_size
    }

    /// MOR as Identify reports it: 0-based, 0xFFFFFFFF for unlimited.
    pub fn mor(&self) -> u32 {
        self.max_open.checked_sub(1).unwrap_or(u32::MAX)
    }

    /// MAR as Identify reports it: 0-based, 0xFFFFFFFF for unlimited.
    pub fn mar(&self) -> u32 {
        self.max_active.checked_sub(1).unwrap_or(u32::MAX)
    }

    /// The first field, in declaration order, in which `other` differs from `self`: its name
    /// for messages, `self`'s value and `other`'s (a flag as 0 or 1). None when they are equal.
    pub fn first_difference(&self, other: &Geometry) -> Option<(&'static str, u64, u64)> {
        let (a, b) = (self, other);
        let fields: [(&'static str, u64, u64); 13] = [
            ("block size", a.block_size.into(), b.block_size.into()),
            ("metadata size", a.oob_size.into(), b.oob_size.into()),
            ("zone count", a.zone_count.into(), b.zone_count.into()),
            ("zone size", a.zone_size, b.zone_size),
            ("zone capacity", a.zone_capacity, b.zone_capacity),
            ("max open zones", a.max_open.into(), b.max_open.into()),
            ("max active zones", a.max_active.into(), b.max_active.into()),
            (
                "append size limit",
                a.zasl_blocks.into(),
                b.zasl_blocks.into(),
            ),
            (
                "max transfer size",
                a.mdts_blocks.into(),
                b.mdts_blocks.into(),
            ),
            (
                "copy range limit",
                a.copy_max_ranges.into(),
                b.copy_max_ranges.into(),
            ),
            (
                "copy blocks per range",
                a.copy_max_range_blocks.into(),
                b.copy_max_range_blocks.into(),
            ),
            (
                "copy block limit",
                a.copy_max_blocks.into(),
                b.copy_max_blocks.into(),
            ),
            (
                "cross-zone reads",
                a.cross_zone_reads.into(),
                b.cross_zone_reads.into(),
            ),
        ];
        fields.into_iter().find(|(_, x, y)| x != y)
    }

    /// Checks that the geometry is one a device can have.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let fail = |m: String| Err(GeometryError(m));
        if self.block_size != 512 && self.block_size != 4096 {
            return fail(format!("block size {} is not 512 or 4096", self.block_size));
        }
        if ![0, 8, 16, 64].contains(&self.oob_size) {
            return fail(format!(
                "metadata size {} is not 0, 8, 16 or 64",
                self.oob_size
            ));
        }
        if self.zone_count == 0 {
            return fail("zone count is 0".into());
        }
        if self.zone_size == 0 || self.zone_capacity == 0 {
            return fail("zone size and capacity must be at least one block".into());
        }
        if self.zone_capacity > self.zone_size {
            return fail(format!(
                "zone capacity {} blocks exceeds zone size {} blocks",
                self.zone_capacity, self.zone_size
            ));
        }
        let bytes = u64::from(self.zone_count)
            .checked_mul(self.zone_size)
            .and_then(|b| b.checked_mul(u64::from(self.block_size)));
        if bytes.is_none() {
            return fail("namespace size overflows 64 bits".into());
        }
        if self.max_active != 0 && self.max_open > self.max_active {
            return fail(format!(
                "max open zones {} exceeds max active zones {}",
                self.max_open, self.max_active
            ));
        }
        if self.max_open == 0 && self.max_active != 0 {
            return fail("an active limit needs an open limit no larger than it".into());
        }
        if self.max_active > self.zone_count {
            return fail(format!(
                "max active zones {} exceeds zone count {}",
                self.max_active, self.zone_count
            ));
        }
        if self.mdts_blocks == 0 || self.zasl_blocks == 0 {
            return fail("transfer and append size limits must be at least one block".into());
        }
        if self.zasl_blocks > self.mdts_blocks {
            return fail("append size limit exceeds the maximum transfer size".into());
        }
        if self.copy_max_ranges == 0 || self.copy_max_range_blocks == 0 || self.copy_max_blocks == 0
        {
            return fail("copy limits must be at least 1".into());
        }
        Ok(())
    }
}

/// Why a geometry was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid geometry: {0}")]
pub struct GeometryError(pub String);

/// Status for an LBA range against the namespace: the first check every I/O makes.
pub fn check_range(geo: &Geometry, lba: Lba, blocks: u64) -> Result<(), NvmeStatus> {
    match lba.checked_add(blocks) {
        Some(end) if end <= geo.total_blocks() => Ok(()),
        _ => Err(NvmeStatus::LbaOutOfRange),
    }
}

/// How a device lays a zone over its flash dies (`ZonedDevice::die_stripe`): `unit_blocks`
/// consecutive blocks on one die, the next `unit_blocks` on the next die, over `dies` dies,
/// then round again; every zone starts on the same die. Zones written in step at the same
/// offset program the same die together, and reads of that die wait behind both programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DieStripe {
    pub unit_blocks: u64,
    pub dies: u64,
}

impl DieStripe {
    /// The die (0..`dies`) holding block `offset` of a zone.
    pub fn die(&self, offset: u64) -> u64 {
        (offset / self.unit_blocks.max(1)) % self.dies.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn geo() -> Geometry {
        Geometry {
            block_size: 4096,
            oob_size: 16,
            zone_count: 8,
            zone_size: 64,
            zone_capacity: 48,
            max_open: 3,
            max_active: 4,
            zasl_blocks: 16,
            mdts_blocks: 64,
            copy_max_ranges: 4,
            copy_max_range_blocks: 32,
            copy_max_blocks: 64,
            cross_zone_reads: false,
        }
    }

    #[test]
    fn state_names_round_trip() {
        for s in ZoneState::ALL {
            assert_eq!(ZoneState::parse(s.name()), Some(s));
            assert_eq!(ZoneState::parse(s.short_name()), Some(s));
            assert_eq!(ZoneState::from_nvme_value(s.nvme_value()), Some(s));
        }
        assert_eq!(ZoneState::parse("bogus"), None);
        assert!(ZoneState::Closed.is_active() && !ZoneState::Closed.is_open());
        assert!(!ZoneState::Full.is_active());
    }

    #[test]
    fn geometry_validation_and_arithmetic() {
        let g = geo();
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(g.total_blocks(), 512);
        assert_eq!(g.zone_of(511), Some(7));
        assert_eq!(g.zone_of(512), None);
        assert_eq!(g.mor(), 2);
        assert_eq!(
            Geometry {
                max_open: 0,
                max_active: 0,
                ..g
            }
            .mar(),
            u32::MAX
        );
        assert!(Geometry {
            zone_capacity: 65,
            ..g
        }
        .validate()
        .is_err());
        assert!(Geometry {
            block_size: 1024,
            ..g
        }
        .validate()
        .is_err());
        assert!(Geometry { max_open: 5, ..g }.validate().is_err());
        assert!(Geometry {
            zone_count: u32::MAX,
            zone_size: u64::MAX / 2,
            ..g
        }
        .validate()
        .is_err());
        assert_eq!(check_range(&g, 500, 12), Ok(()));
        assert_eq!(check_range(&g, 500, 13), Err(NvmeStatus::LbaOutOfRange));
        assert_eq!(check_range(&g, u64::MAX, 2), Err(NvmeStatus::LbaOutOfRange));
    }

    #[test]
    fn first_difference_names_the_first_differing_field_in_order() {
        let g = geo();
        assert_eq!(g.first_difference(&g), None);
        let mut o = g;
        o.cross_zone_reads = true;
        assert_eq!(g.first_difference(&o), Some(("cross-zone reads", 0, 1)));
        // Two fields differ: the one declared first is named, with both values.
        o.zone_capacity = 40;
        assert_eq!(g.first_difference(&o), Some(("zone capacity", 48, 40)));
        o.block_size = 512;
        assert_eq!(g.first_difference(&o), Some(("block size", 4096, 512)));
    }
}
