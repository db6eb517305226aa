//! ZNS+ vocabulary (docs/ZNSPLUS.md): the chunk-to-chip mapping `identify_mapping` returns,
//! the extents of a `zone_compaction`, and the valid-block bitmap of `tl_open`. Pure types
//! and arithmetic; the commands themselves are optional methods of `ZonedDevice`.

use crate::status::{NvmeResult, NvmeStatus};
use crate::types::{Geometry, Lba};

/// What `identify_mapping` answers: how the device places a zone's chunks on its flash chips,
/// and the limits of `zone_compaction`. Static for the life of the device, so a host computes
/// it once at mount.
///
/// Chunk `c` (blocks `c * chunk_blocks ..`) of zone `z` sits on chip
/// `(z mod chip_groups) * zone_chips + c mod zone_chips` (ZNS+ Fig. 1). A copy of a whole
/// chunk between two places on the same chip can be a copyback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkMapping {
    /// Logical blocks per chunk (one flash page on every plane of a chip).
    pub chunk_blocks: u32,
    /// Chips a zone is striped over.
    pub zone_chips: u32,
    /// Disjoint groups of `zone_chips` chips; zone `z` uses group `z mod chip_groups`.
    pub chip_groups: u32,
    /// Most extents one `zone_compaction` takes.
    pub compaction_max_extents: u32,
    /// Most blocks one `zone_compaction` copies in all.
    pub compaction_max_blocks: u32,
}

impl ChunkMapping {
    /// Every field must be at least 1.
    pub fn validate(&self) -> Result<(), String> {
        let fields = [
            ("chunk_blocks", self.chunk_blocks),
            ("zone_chips", self.zone_chips),
            ("chip_groups", self.chip_groups),
            ("compaction_max_extents", self.compaction_max_extents),
            ("compaction_max_blocks", self.compaction_max_blocks),
        ];
        match fields.iter().find(|(_, v)| *v == 0) {
            Some((name, _)) => Err(format!("ZNS+ mapping field {name} is 0")),
            None => Ok(()),
        }
    }

    /// The chip block `lba` is on, or None beyond the namespace.
    pub fn chip_of(&self, geo: &Geometry, lba: Lba) -> Option<u32> {
        let z = geo.zone_of(lba)?;
        let chunk = (lba - geo.zone_start(z)) / u64::from(self.chunk_blocks.max(1));
        let group = z % self.chip_groups.max(1);
        let chip = chunk % u64::from(self.zone_chips.max(1));
        Some(group * self.zone_chips + chip as u32)
    }

    /// Total chips the mapping spans.
    pub fn chips(&self) -> u32 {
        self.zone_chips.saturating_mul(self.chip_groups)
    }
}

/// One extent of a `zone_compaction`: `blocks` blocks read at `src` (as Read reads them)
/// and written at `dst` under the destination zone's write rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionExtent {
    pub src: Lba,
    pub dst: Lba,
    pub blocks: u64,
}

/// The valid-block bitmap of `tl_open`: bit `i` (byte `i / 8`, least significant bit first)
/// set means block `i` of the zone holds data the host still needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidBitmap {
    bits: Vec<u8>,
    blocks: u64,
}

impl ValidBitmap {
    /// Bytes a bitmap of a zone with this capacity has.
    pub fn bytes_for(capacity_blocks: u64) -> usize {
        capacity_blocks.div_ceil(8) as usize
    }

    /// Checks `bits` against a zone of `capacity_blocks` whose data ends `data_blocks` into
    /// it: exactly [`ValidBitmap::bytes_for`] bytes, and no block at or above the data end
    /// marked valid (there is nothing there to keep). Invalid Field otherwise.
    pub fn parse(bits: &[u8], capacity_blocks: u64, data_blocks: u64) -> NvmeResult<ValidBitmap> {
        if bits.len() != Self::bytes_for(capacity_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let map = ValidBitmap {
            bits: bits.to_vec(),
            blocks: capacity_blocks,
        };
        let past_data = (data_blocks..capacity_blocks.div_ceil(8) * 8).any(|b| map.bit(b));
        if past_data {
            return Err(NvmeStatus::InvalidField);
        }
        Ok(map)
    }

    /// An all-invalid bitmap for a zone of `capacity_blocks`.
    pub fn empty(capacity_blocks: u64) -> ValidBitmap {
        ValidBitmap {
            bits: vec![0; Self::bytes_for(capacity_blocks)],
            blocks: capacity_blocks,
        }
    }

    fn bit(&self, block: u64) -> bool {
        let byte = self.bits.get((block / 8) as usize).copied().unwrap_or(0);
        byte & (1 << (block % 8)) != 0
    }

    /// Whether block `block` (an offset into the zone) is valid; false beyond the zone.
    pub fn is_valid(&self, block: u64) -> bool {
        block < self.blocks && self.bit(block)
    }

    /// Marks block `block` valid (true) or invalid; blocks beyond the zone are ignored.
    pub fn set(&mut self, block: u64, valid: bool) {
        if block >= self.blocks {
            return;
        }
        if let Some(byte) = self.bits.get_mut((block / 8) as usize) {
            if valid {
                *byte |= 1 << (block % 8);
            } else {
                *byte &= !(1 << (block % 8));
            }
        }
    }

    /// The first block at or after `from` that is not valid (the capacity when none is).
    pub fn next_invalid(&self, from: u64) -> u64 {
        (from..self.blocks)
            .find(|&b| !self.bit(b))
            .unwrap_or(self.blocks)
    }

    /// Whether every block of `from..to` is invalid.
    pub fn all_invalid(&self, from: u64, to: u64) -> bool {
        (from..to).all(|b| !self.is_valid(b))
    }

    /// Valid blocks in `from..to`.
    pub fn count_valid(&self, from: u64, to: u64) -> u64 {
        (from..to.min(self.blocks)).filter(|&b| self.bit(b)).count() as u64
    }

    /// Blocks the bitmap covers (the zone capacity).
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The raw bytes, as `tl_open` takes them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        crate::conformance::kit_geometry()
    }

    #[test]
    fn chip_of_follows_groups_and_chunks() {
        let g = geo();
        let m = ChunkMapping {
            chunk_blocks: 4,
            zone_chips: 2,
            chip_groups: 3,
            compaction_max_extents: 8,
            compaction_max_blocks: 64,
        };
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.chip_of(&g, 0), Some(0));
        assert_eq!(m.chip_of(&g, 3), Some(0));
        assert_eq!(m.chip_of(&g, 4), Some(1));
        assert_eq!(m.chip_of(&g, 8), Some(0));
        let z1 = g.zone_start(1);
        assert_eq!(m.chip_of(&g, z1), Some(2));
        assert_eq!(m.chip_of(&g, z1 + 4), Some(3));
        assert_eq!(m.chip_of(&g, g.zone_start(3)), Some(0));
        assert_eq!(m.chip_of(&g, g.total_blocks()), None);
        assert_eq!(m.chips(), 6);
        let bad = ChunkMapping { zone_chips: 0, ..m };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn bitmap_parses_and_refuses_wrong_shapes() {
        // 12 blocks of capacity: 2 bytes; data ends at block 10.
        let ok = ValidBitmap::parse(&[0b0000_0101, 0b0000_0010], 12, 10);
        let Ok(map) = ok else {
            panic!("a well-formed bitmap was refused: {ok:?}");
        };
        assert!(map.is_valid(0) && !map.is_valid(1) && map.is_valid(2) && map.is_valid(9));
        assert!(!map.is_valid(12) && !map.is_valid(100));
        assert_eq!(map.next_invalid(0), 1);
        assert_eq!(map.next_invalid(2), 3);
        assert_eq!(map.count_valid(0, 12), 3);
        assert!(map.all_invalid(3, 9) && !map.all_invalid(3, 10));
        let err = Err(NvmeStatus::InvalidField);
        assert_eq!(ValidBitmap::parse(&[0], 12, 10), err);
        assert_eq!(ValidBitmap::parse(&[0, 0, 0], 12, 10), err);
        // Block 10 is at the data end: nothing there to keep.
        assert_eq!(ValidBitmap::parse(&[0, 0b0000_0100], 12, 10), err);
        // A bit beyond the capacity.
        assert_eq!(ValidBitmap::parse(&[0, 0b0001_0000], 12, 12), err);
        let mut all = ValidBitmap::empty(12);
        for b in 0..12 {
            all.set(b, true);
        }
        assert_eq!(all.next_invalid(0), 12);
        all.set(5, false);
        assert_eq!(all.next_invalid(0), 5);
    }
}
