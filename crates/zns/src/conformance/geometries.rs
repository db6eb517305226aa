//! The geometries the conformance kit builds devices with, and the reference defaults of
//! checklist item 44.
//!
//! They are small on purpose (a few zones of 64 blocks) so that every check fills zones in a
//! handful of commands, and capacity is below zone size so the gap between them is exercised.

use crate::types::Geometry;

/// Item 44: the Zone Append size limit a device uses when none is configured, in bytes.
pub const REFERENCE_ZASL_BYTES: u32 = 512 * 1024;
/// Item 44: default Copy source range count (MSRC + 1).
pub const REFERENCE_COPY_MAX_RANGES: u32 = 128;
/// Item 44: default Copy blocks per source range (MSSRL).
pub const REFERENCE_COPY_MAX_RANGE_BLOCKS: u32 = 128;
/// Item 44: default Copy total blocks (MCL).
pub const REFERENCE_COPY_MAX_BLOCKS: u32 = 128;

/// The kit's default: 8 zones of 64 blocks with capacity 48, 4 KiB blocks with 16 bytes of
/// metadata, at most 3 open and 4 active zones, append limit 16 blocks, transfer limit 32
/// blocks, copy limits 4 ranges / 16 blocks per range / 32 blocks in all.
pub fn kit_geometry() -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 16,
        zone_count: 8,
        zone_size: 64,
        zone_capacity: 48,
        max_open: 3,
        max_active: 4,
        zasl_blocks: 16,
        mdts_blocks: 32,
        copy_max_ranges: 4,
        copy_max_range_blocks: 16,
        copy_max_blocks: 32,
        cross_zone_reads: false,
    }
}

/// The kit geometry without open or active limits.
pub fn unlimited_geometry() -> Geometry {
    Geometry {
        max_open: 0,
        max_active: 0,
        ..kit_geometry()
    }
}

/// The kit geometry with an open limit of 3 but no active limit, so implicit closes can be
/// provoked without running into the active limit.
pub fn open_limit_geometry() -> Geometry {
    Geometry {
        max_open: 3,
        max_active: 0,
        ..kit_geometry()
    }
}

/// Capacity equal to zone size and no limits: the only geometry where a write at the write
/// pointer can physically run into the next zone.
pub fn full_capacity_geometry() -> Geometry {
    Geometry {
        zone_capacity: 64,
        ..unlimited_geometry()
    }
}

/// No limits, 512-byte blocks, and reads allowed to cross zone boundaries.
pub fn cross_read_geometry() -> Geometry {
    Geometry {
        block_size: 512,
        cross_zone_reads: true,
        ..unlimited_geometry()
    }
}

/// A geometry with the reference defaults of item 44: 8 zones of 256 blocks (capacity 192)
/// of 4 KiB, append limit 512 KiB (128 blocks), transfer limit 128 blocks, copy limits
/// 128 ranges / 128 blocks per range / 128 blocks in all, 4 open and 6 active zones.
pub fn reference_geometry() -> Geometry {
    let block_size = 4096;
    Geometry {
        block_size,
        oob_size: 16,
        zone_count: 8,
        zone_size: 256,
        zone_capacity: 192,
        max_open: 4,
        max_active: 6,
        zasl_blocks: REFERENCE_ZASL_BYTES / block_size,
        mdts_blocks: REFERENCE_ZASL_BYTES / block_size,
        copy_max_ranges: REFERENCE_COPY_MAX_RANGES,
        copy_max_range_blocks: REFERENCE_COPY_MAX_RANGE_BLOCKS,
        copy_max_blocks: REFERENCE_COPY_MAX_BLOCKS,
        cross_zone_reads: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kit_geometry_is_valid() {
        for g in [
            kit_geometry(),
            unlimited_geometry(),
            open_limit_geometry(),
            full_capacity_geometry(),
            cross_read_geometry(),
            reference_geometry(),
        ] {
            assert_eq!(g.validate(), Ok(()), "{g:?}");
        }
    }
}
