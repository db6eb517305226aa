//! Device configuration and the named profiles.

use zns::Geometry;

use crate::timing::PlugOrder;

/// How an emulated device behaves beyond its geometry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmuConfig {
    pub geometry: Geometry,
    /// Volatile write cache: completed writes are durable only after Flush or FUA.
    pub volatile_cache: bool,
    /// Seeds every choice the device makes (append order, power-loss cut points).
    pub seed: u64,
    /// Whether Zone Appends in flight together complete in a device-chosen (seeded) order.
    /// Off, appends land in submission order.
    pub reorder_appends: bool,
    /// File backend only: fdatasync the image on Flush/FUA, for durability across host
    /// crashes (slow). Off, the image survives a process kill but not a host crash.
    pub host_sync: bool,
    /// ZNS+ commands (docs/ZNSPLUS.md): identify_mapping, zone_compaction, tl_open. An image
    /// records it (superblock flag) with the valid bitmaps of its TL-opened zones.
    pub zns_plus: bool,
    /// How the timing model plugs TL-opened zones (ZNS+ only; timing only, never data):
    /// PPA-ordered in idle chip time by default, or LBA-ordered. An image records it.
    pub plug_order: PlugOrder,
}

/// The reference defaults of ZNS-CONFORMANCE.md item 44 for blocks of `block_size` bytes.
pub fn reference_limits(block_size: u32) -> (u32, u32, u32, u32) {
    let zasl = (512 * 1024) / block_size;
    (zasl, 128, 128, 128)
}

/// Most extents one zone_compaction takes on the emulator.
pub const COMPACTION_MAX_EXTENTS: u32 = 256;
/// Most bytes one zone_compaction copies on the emulator (capped by the zone capacity).
pub const COMPACTION_MAX_BYTES: u64 = 16 << 20;

/// The ZNS+ mapping of a device without a timing model: 16 KiB chunks (a 16 KiB page, as
/// ZNS+ Table 2's chips) over 16 chips in one group (the paper's D_zone = 16).
pub fn untimed_chunk_mapping(g: &zns::Geometry) -> zns::ChunkMapping {
    zns::ChunkMapping {
        chunk_blocks: (16 * 1024 / g.block_size).max(1),
        zone_chips: 16,
        chip_groups: 1,
        compaction_max_extents: COMPACTION_MAX_EXTENTS,
        compaction_max_blocks: compaction_max_blocks(g),
    }
}

/// The zone_compaction block limit for a geometry: 16 MiB or one zone capacity if less.
pub fn compaction_max_blocks(g: &zns::Geometry) -> u32 {
    let blocks = COMPACTION_MAX_BYTES / u64::from(g.block_size.max(1));
    blocks.min(g.zone_capacity).clamp(1, u64::from(u32::MAX)) as u32
}

/// A named profile.
pub struct Profile {
    pub name: &'static str,
    pub description: &'static str,
    pub geometry: Geometry,
}

fn geometry(
    block_size: u32,
    oob: u32,
    zones: u32,
    zone_size: u64,
    zone_cap: u64,
    open: u32,
    active: u32,
) -> Geometry {
    let (zasl, ranges, range_blocks, total) = reference_limits(block_size);
    Geometry {
        block_size,
        oob_size: oob,
        zone_count: zones,
        zone_size,
        zone_capacity: zone_cap,
        max_open: open,
        max_active: active,
        zasl_blocks: zasl,
        mdts_blocks: (2 * 1024 * 1024) / block_size,
        copy_max_ranges: ranges,
        copy_max_range_blocks: range_blocks,
        copy_max_blocks: total,
        cross_zone_reads: false,
    }
}

/// Every named profile.
pub fn profiles() -> Vec<Profile> {
    vec![
        Profile {
            name: "small",
            description: "fast tests: 32 zones of 1 MiB (768 KiB writable), 4 KiB blocks, 16 B metadata, 8 open / 12 active",
            geometry: geometry(4096, 16, 32, 256, 192, 8, 12),
        },
        Profile {
            name: "zn540",
            description: "Western Digital Ultrastar DC ZN540 layout: 2 GiB zones with 1,077 MiB writable, 4 KiB blocks, 64 B metadata, 14 open / 14 active; 32 zones by default (the drive has 904)",
            geometry: geometry(4096, 64, 32, 524_288, 275_712, 14, 14),
        },
    ]
}

/// Looks a profile up by name.
pub fn profile(name: &str) -> Option<Geometry> {
    profiles()
        .into_iter()
        .find(|p| p.name == name)
        .map(|p| p.geometry)
}

impl EmuConfig {
    /// A configuration with the usual defaults: volatile cache on, appends reordered.
    pub fn new(geometry: Geometry) -> EmuConfig {
        EmuConfig {
            geometry,
            volatile_cache: true,
            seed: 0,
            reorder_appends: true,
            host_sync: false,
            zns_plus: false,
            plug_order: PlugOrder::Ppa,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_valid_and_match_their_descriptions() {
        for p in profiles() {
            assert_eq!(p.geometry.validate(), Ok(()), "profile {}", p.name);
        }
        let zn = profile("zn540").map(|g| (g.zone_capacity * 4096) >> 20);
        assert_eq!(zn, Some(1077));
        assert_eq!(
            profile("zn540").map(|g| (g.zone_size * 4096) >> 30),
            Some(2)
        );
        assert!(profile("nope").is_none());
        assert_eq!(reference_limits(4096).0, 128);
        assert_eq!(reference_limits(512).0, 1024);
    }
}
