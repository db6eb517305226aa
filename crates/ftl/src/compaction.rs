//! ZNS+ zone compaction planning (paper section 3.3.1, Figure 5): where each block a
//! collection relocates goes inside the destination range the FTL reserved, and the
//! `zone_compaction` extents that move them. Plain synchronous code with no I/O; the
//! relocation shell (`io/relocate.rs`) issues the command.
//!
//! Copyback-aware placement: a *fully valid chunk* (all `chunk_blocks` blocks of one source
//! chunk are to be moved) is placed on a whole, aligned destination chunk of the same chip,
//! so the device can move it with the flash chip's copyback (no channel transfer); the
//! remaining blocks fill the rest of the reserved range, which stays exactly as long as the
//! number of blocks moved (no holes: the collection reclaims as much as a packed copy).

use std::collections::{BTreeMap, VecDeque};

use zns::{ChunkMapping, CompactionExtent, Geometry, Lba};

/// How a collection places relocated blocks when the device has `zone_compaction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Packed in source order (the paper's "normal block allocation", Fig. 5a).
    SourceOrder,
    /// Fully valid chunks onto destination chunks of their own chip first (Fig. 5b).
    CopybackAware,
}

/// The destination order of `srcs` (device LBAs, ascending, distinct) moved to the range
/// `dst .. dst + srcs.len()` of one zone: entry `k` is the index into `srcs` of the block
/// that lands at `dst + k`. Always a permutation of `0 .. srcs.len()`.
pub fn place(
    geo: &Geometry,
    m: &ChunkMapping,
    srcs: &[Lba],
    dst: Lba,
    placement: Placement,
) -> Vec<usize> {
    let n = srcs.len();
    if placement == Placement::SourceOrder || m.chunk_blocks <= 1 {
        return (0..n).collect();
    }
    let cb = m.chunk_blocks as usize;
    let (mut full, mut partial) = split_chunks(geo, m, srcs);
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let at = dst + order.len() as u64;
        let whole = whole_chunk_at(geo, m, at, n - order.len());
        if whole {
            let chip = m.chip_of(geo, at).unwrap_or(u32::MAX);
            if let Some(i) = full.get_mut(&chip).and_then(VecDeque::pop_front) {
                order.extend(i..i + cb);
                continue;
            }
        }
        if let Some(i) = partial.pop_front() {
            order.push(i);
            continue;
        }
        // Only fully valid chunks of other chips are left: one moves without copyback, as a
        // whole chunk if the destination allows, else block by block.
        let Some(i) = take_from_fullest(&mut full) else {
            break;
        };
        if whole {
            order.extend(i..i + cb);
        } else {
            partial.extend(i..i + cb);
        }
    }
    debug_assert!(
        is_permutation(&order, n),
        "placement lost or duplicated a block"
    );
    order
}

/// The fully valid source chunks, by chip (index of each chunk's first block in `srcs`), and
/// the other blocks in source order.
fn split_chunks(
    geo: &Geometry,
    m: &ChunkMapping,
    srcs: &[Lba],
) -> (BTreeMap<u32, VecDeque<usize>>, VecDeque<usize>) {
    let cb = m.chunk_blocks as usize;
    let mut full: BTreeMap<u32, VecDeque<usize>> = BTreeMap::new();
    let mut partial = VecDeque::new();
    let mut i = 0;
    while i < srcs.len() {
        let lba = srcs[i];
        let chunk_start = chunk_offset_in(geo, m, lba) == Some(0);
        let last = i + cb - 1;
        let contiguous = srcs.get(last) == Some(&(lba + cb as u64 - 1))
            && geo.zone_of(lba) == geo.zone_of(lba + cb as u64 - 1);
        if chunk_start && contiguous && fits_capacity(geo, lba, cb as u64) {
            let chip = m.chip_of(geo, lba).unwrap_or(u32::MAX);
            full.entry(chip).or_default().push_back(i);
            i += cb;
        } else {
            partial.push_back(i);
            i += 1;
        }
    }
    (full, partial)
}

/// Whether `blocks` blocks from `lba` lie within its zone's capacity.
fn fits_capacity(geo: &Geometry, lba: Lba, blocks: u64) -> bool {
    geo.zone_of(lba)
        .is_some_and(|z| lba - geo.zone_start(z) + blocks <= geo.zone_capacity)
}

/// Whether a whole destination chunk starts at `at` and fits in the `left` blocks still to
/// place.
fn whole_chunk_at(geo: &Geometry, m: &ChunkMapping, at: Lba, left: usize) -> bool {
    let cb = u64::from(m.chunk_blocks);
    let Some(z) = geo.zone_of(at) else {
        return false;
    };
    let off = at - geo.zone_start(z);
    off.is_multiple_of(cb) && left as u64 >= cb && off + cb <= geo.zone_capacity
}

/// The longest prefix of `srcs` (all of it, else halving) whose `placement` into `dst ..`
/// fits in `max_extents` extents, so that a batch keeps its placement: a copyback-aware
/// placement splits the source runs at every chunk it moves to its own chip, and a batch
/// of a large zone's live blocks needs more extents than one command takes, which made
/// such batches fall back to source order (few copybacks). At least 1.
pub fn batch_fitting(
    geo: &Geometry,
    m: &ChunkMapping,
    srcs: &[Lba],
    dst: Lba,
    placement: Placement,
    max_extents: usize,
) -> usize {
    let mut n = srcs.len();
    while n > 1 {
        let order = place(geo, m, &srcs[..n], dst, placement);
        if extents(geo, &srcs[..n], &order, dst).len() <= max_extents {
            break;
        }
        n = n.div_ceil(2);
    }
    n
}

/// Takes a fully valid chunk from the chip with the most left.
fn take_from_fullest(full: &mut BTreeMap<u32, VecDeque<usize>>) -> Option<usize> {
    let chip = full
        .iter()
        .filter(|(_, q)| !q.is_empty())
        .max_by_key(|(_, q)| q.len())
        .map(|(c, _)| *c)?;
    full.get_mut(&chip).and_then(VecDeque::pop_front)
}

fn is_permutation(order: &[usize], n: usize) -> bool {
    let mut seen = vec![false; n];
    order.len() == n
        && order
            .iter()
            .all(|&i| i < n && !std::mem::replace(&mut seen[i], true))
}

/// The `zone_compaction` extents moving `srcs` to `dst ..` in destination order `order`:
/// runs contiguous on both sides (and in one source zone) merge into one extent.
pub fn extents(geo: &Geometry, srcs: &[Lba], order: &[usize], dst: Lba) -> Vec<CompactionExtent> {
    let mut out: Vec<CompactionExtent> = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        let (src, at) = (srcs[i], dst + k as u64);
        if let Some(last) = out.last_mut() {
            let continues = last.src + last.blocks == src
                && last.dst + last.blocks == at
                && geo.zone_of(last.src) == geo.zone_of(src);
            if continues {
                last.blocks += 1;
                continue;
            }
        }
        out.push(CompactionExtent {
            src,
            dst: at,
            blocks: 1,
        });
    }
    out
}

/// Runs of `srcs` contiguous in one zone: the extents a source-order placement needs.
pub fn source_runs(geo: &Geometry, srcs: &[Lba]) -> usize {
    srcs.windows(2)
        .filter(|w| w[1] != w[0] + 1 || geo.zone_of(w[0]) != geo.zone_of(w[1]))
        .count()
        + usize::from(!srcs.is_empty())
}

/// Blocks of a placement that sit in whole destination chunks filled from one whole source
/// chunk of the same chip: the copies the device can do by copyback.
pub fn copyback_blocks(
    geo: &Geometry,
    m: &ChunkMapping,
    srcs: &[Lba],
    order: &[usize],
    dst: Lba,
) -> u64 {
    let cb = m.chunk_blocks as usize;
    let mut k = 0;
    let mut blocks = 0;
    while k < order.len() {
        let at = dst + k as u64;
        let src = srcs[order[k]];
        let run_ok = whole_chunk_at(geo, m, at, order.len() - k)
            && chunk_offset_in(geo, m, src) == Some(0)
            && (1..cb).all(|j| order.get(k + j).map(|&i| srcs[i]) == Some(src + j as u64))
            && m.chip_of(geo, at) == m.chip_of(geo, src);
        if run_ok {
            blocks += cb as u64;
            k += cb;
        } else {
            k += 1;
        }
    }
    blocks
}

/// The offset of `lba` within its chunk, or None beyond the namespace.
fn chunk_offset_in(geo: &Geometry, m: &ChunkMapping, lba: Lba) -> Option<u64> {
    let z = geo.zone_of(lba)?;
    Some((lba - geo.zone_start(z)) % u64::from(m.chunk_blocks.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two zones of 16 blocks, 2-block chunks striped over 2 chips (the paper's Fig. 5
    /// shape: two chunks per stripe).
    fn fig5() -> (Geometry, ChunkMapping) {
        let geo = Geometry {
            zone_count: 4,
            zone_size: 16,
            zone_capacity: 16,
            ..crate::layout::tests::geo(4, 16)
        };
        let m = ChunkMapping {
            chunk_blocks: 2,
            zone_chips: 2,
            chip_groups: 1,
            compaction_max_extents: 64,
            compaction_max_blocks: 64,
        };
        (geo, m)
    }

    #[test]
    fn full_chunks_land_on_their_own_chip() {
        let (geo, m) = fig5();
        // Victim zone 0: chunk 1 (blocks 2-3, chip 1) and chunk 2 (4-5, chip 0) fully valid;
        // blocks 0, 7 and 9 valid alone.
        let srcs = [0, 2, 3, 4, 5, 7, 9];
        let dst = 32;
        let cab = place(&geo, &m, &srcs, dst, Placement::CopybackAware);
        assert!(is_permutation(&cab, srcs.len()));
        assert_eq!(copyback_blocks(&geo, &m, &srcs, &cab, dst), 4);
        let packed = place(&geo, &m, &srcs, dst, Placement::SourceOrder);
        assert_eq!(copyback_blocks(&geo, &m, &srcs, &packed, dst), 0);
    }

    #[test]
    fn an_unaligned_destination_is_filled_up_to_a_chunk_boundary_first() {
        let (geo, m) = fig5();
        let srcs = [2, 3, 9, 16 + 4, 16 + 5];
        let dst = 33;
        let order = place(&geo, &m, &srcs, dst, Placement::CopybackAware);
        assert!(is_permutation(&order, srcs.len()));
        // 33 takes the lone block; 34-35 (chip 1) chunk 1 of zone 0 (chip 1); 36-37 (chip 0)
        // chunk 2 of zone 1 (chip 0).
        assert_eq!(order[0], 2);
        assert_eq!(copyback_blocks(&geo, &m, &srcs, &order, dst), 4);
    }

    #[test]
    fn a_batch_shrinks_until_its_placement_fits_one_command() {
        let (geo, m) = fig5();
        // Zone 0 fully valid: 8 chunks alternating chips 0 and 1; the destination starts
        // on chip 1, so every chunk moves to another stripe position and splits the run.
        let srcs: Vec<Lba> = (0..16).collect();
        let dst = 32 + 2;
        let all = place(&geo, &m, &srcs, dst, Placement::CopybackAware);
        let need = extents(&geo, &srcs, &all, dst).len();
        let max = 3;
        assert!(need > max, "the whole batch fits already ({need} extents)");
        let n = batch_fitting(&geo, &m, &srcs, dst, Placement::CopybackAware, max);
        assert!(n < srcs.len() && n >= 2, "{n}");
        let order = place(&geo, &m, &srcs[..n], dst, Placement::CopybackAware);
        assert!(extents(&geo, &srcs[..n], &order, dst).len() <= max);
        // The shrunk batch keeps its copybacks, which source order would not have.
        assert!(copyback_blocks(&geo, &m, &srcs[..n], &order, dst) > 0);
        let packed: Vec<usize> = (0..n).collect();
        assert_eq!(copyback_blocks(&geo, &m, &srcs[..n], &packed, dst), 0);
        // A batch that fits is left whole; source order needs only the runs.
        assert_eq!(
            batch_fitting(&geo, &m, &srcs, dst, Placement::SourceOrder, 1),
            srcs.len()
        );
    }

    #[test]
    fn placements_are_permutations_and_extents_cover_them() {
        let (geo, m) = fig5();
        let mut rng = zns::SimRng::new(7);
        for _ in 0..500 {
            let mut srcs: Vec<Lba> = (0..48).filter(|_| rng.chance(0.6)).collect();
            srcs.dedup();
            let dst = 48 + rng.below(8);
            let room = 64 - dst;
            srcs.truncate(room as usize);
            for p in [Placement::SourceOrder, Placement::CopybackAware] {
                let order = place(&geo, &m, &srcs, dst, p);
                assert!(is_permutation(&order, srcs.len()));
                let ex = extents(&geo, &srcs, &order, dst);
                assert_eq!(ex.iter().map(|e| e.blocks).sum::<u64>(), srcs.len() as u64);
                for e in &ex {
                    assert_eq!(geo.zone_of(e.src), geo.zone_of(e.src + e.blocks - 1));
                }
                if p == Placement::SourceOrder {
                    assert_eq!(ex.len(), source_runs(&geo, &srcs));
                }
            }
        }
    }

    #[test]
    fn copyback_aware_never_does_worse_than_source_order() {
        let (geo, m) = fig5();
        let mut rng = zns::SimRng::new(11);
        let (mut cab, mut packed) = (0, 0);
        for _ in 0..300 {
            let mut srcs: Vec<Lba> = Vec::new();
            for c in 0..24u64 {
                if rng.chance(0.5) {
                    srcs.extend([2 * c, 2 * c + 1]);
                } else if rng.chance(0.5) {
                    srcs.push(2 * c + rng.below(2));
                }
            }
            let dst = 48;
            srcs.truncate(16);
            let a = place(&geo, &m, &srcs, dst, Placement::CopybackAware);
            let b = place(&geo, &m, &srcs, dst, Placement::SourceOrder);
            let (x, y) = (
                copyback_blocks(&geo, &m, &srcs, &a, dst),
                copyback_blocks(&geo, &m, &srcs, &b, dst),
            );
            assert!(x >= y, "copyback-aware {x} < source order {y} for {srcs:?}");
            cab += x;
            packed += y;
        }
        assert!(cab > 2 * packed, "copyback-aware {cab} vs packed {packed}");
    }
}
