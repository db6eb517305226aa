//! Deterministic block contents for the kit: every block's data and metadata are derived
//! from its LBA and a salt, so a check can verify any block it wrote without keeping a copy.

use crate::rng::SimRng;
use crate::types::{Geometry, Lba};

/// Data and metadata for `blocks` blocks starting at `lba`, distinct per LBA and salt.
pub(crate) fn pattern(geo: &Geometry, lba: Lba, blocks: u64, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let (bs, oob) = (geo.block_size as usize, geo.oob_size as usize);
    let mut data = vec![0u8; blocks as usize * bs];
    let mut meta = vec![0u8; blocks as usize * oob];
    for i in 0..blocks as usize {
        let key = lba
            .wrapping_add(i as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ salt.rotate_left(32);
        let mut rng = SimRng::new(key);
        rng.fill(&mut data[i * bs..(i + 1) * bs]);
        rng.fill(&mut meta[i * oob..(i + 1) * oob]);
        // A block of all zeros would be indistinguishable from an unwritten one.
        data[i * bs] |= 1;
        if oob > 0 {
            meta[i * oob] |= 1;
        }
    }
    (data, meta)
}

/// Random data and metadata for `blocks` blocks from `rng`, never an all-zero block.
pub(crate) fn random_blocks(geo: &Geometry, blocks: u64, rng: &mut SimRng) -> (Vec<u8>, Vec<u8>) {
    let (bs, oob) = (geo.block_size as usize, geo.oob_size as usize);
    let mut data = vec![0u8; blocks as usize * bs];
    let mut meta = vec![0u8; blocks as usize * oob];
    rng.fill(&mut data);
    rng.fill(&mut meta);
    for i in 0..blocks as usize {
        data[i * bs] |= 1;
        if oob > 0 {
            meta[i * oob] |= 1;
        }
    }
    (data, meta)
}
