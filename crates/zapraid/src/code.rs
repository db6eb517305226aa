//! The stripe code: the `m` parity blocks of a stripe's `k` data blocks, and a lost block
//! rebuilt from the others. `m = 1` is XOR (RAID-5, the fast path, `zns::parity`); `m >= 2`
//! is a systematic Reed-Solomon code (`reed_solomon_simd`, docs/DESIGN.md, "ZapRAID",
//! Members). Blocks and the LBA, sequence number and kind of their per-block records are
//! coded alike, so a lost block's record comes back with its data. Sans-IO.
//!
//! Fault model: the blocks given may come from members holding torn or stale blocks; the
//! caller gives each with its member and decides which to trust. Too few blocks, blocks of
//! different sizes or records that do not form a stripe are typed errors (or `None`), never
//! a panic and never a block made up from fewer than `k` others.

use crate::layout::{Layout, Role};
use crate::meta::{BlockRecord, RecordKind, NO_LBA, SEQ_LIMIT};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    #[error("{have} block(s) of the stripe are left, {need} are needed to rebuild one")]
    TooFew { need: usize, have: usize },
    #[error("the stripe's blocks differ in size")]
    Sizes,
    #[error("{0} data blocks given to a stripe of {1}")]
    DataCount(usize, usize),
    #[error("Reed-Solomon: {0}")]
    Rs(String),
}

/// The position of member `member`'s block of `stripe` in the code: data block `d` is `d`,
/// parity block `j` is `k + j`.
pub fn position(l: &Layout, stripe: u32, member: u32) -> usize {
    match l.role(stripe, member) {
        Role::Data(d) => d as usize,
        Role::Parity(j) => (l.k + j) as usize,
    }
}

/// The `m` parity blocks of the `k` data blocks (all the same size; even for `m >= 2`).
pub fn encode(k: usize, m: usize, data: &[&[u8]]) -> Result<Vec<Vec<u8>>, CodeError> {
    if data.len() != k {
        return Err(CodeError::DataCount(data.len(), k));
    }
    let len = data.first().map_or(0, |d| d.len());
    if data.iter().any(|d| d.len() != len) {
        return Err(CodeError::Sizes);
    }
    if m == 1 {
        return Ok(vec![zns::parity::xor_of(len, data.iter().copied())]);
    }
    reed_solomon_simd::encode(k, m, data).map_err(|e| CodeError::Rs(e.to_string()))
}

/// The block at code position `want` (`0 .. k + m`) from the blocks `have` (position,
/// bytes). With `m = 1` every other block is needed (their XOR); with `m >= 2` any `k`.
pub fn rebuild(
    k: usize,
    m: usize,
    have: &[(usize, &[u8])],
    want: usize,
) -> Result<Vec<u8>, CodeError> {
    if let Some((_, b)) = have.iter().find(|(p, _)| *p == want) {
        return Ok(b.to_vec());
    }
    let mut seen = 0u128;
    let mut blocks: Vec<(usize, &[u8])> = Vec::with_capacity(have.len());
    for (p, b) in have {
        if *p < k + m && seen >> p & 1 == 0 {
            seen |= 1 << p;
            blocks.push((*p, b));
        }
    }
    if blocks.len() < k {
        return Err(CodeError::TooFew {
            need: k,
            have: blocks.len(),
        });
    }
    let len = blocks.first().map_or(0, |(_, b)| b.len());
    if blocks.iter().any(|(_, b)| b.len() != len) {
        return Err(CodeError::Sizes);
    }
    if m == 1 {
        return Ok(zns::parity::xor_of(len, blocks.iter().map(|(_, b)| *b)));
    }
    let rs = |e: reed_solomon_simd::Error| CodeError::Rs(e.to_string());
    let originals = blocks.iter().filter(|(p, _)| *p < k).copied();
    let recovery = blocks
        .iter()
        .filter(|(p, _)| *p >= k)
        .map(|(p, b)| (p - k, *b));
    let restored = reed_solomon_simd::decode(k, m, originals, recovery).map_err(rs)?;
    let data_block = |d: usize| -> Result<&[u8], CodeError> {
        blocks
            .iter()
            .find(|(p, _)| *p == d)
            .map(|(_, b)| *b)
            .or_else(|| restored.get(&d).map(|v| &v[..]))
            .ok_or(CodeError::TooFew {
                need: k,
                have: blocks.len(),
            })
    };
    if want < k {
        return data_block(want).map(<[u8]>::to_vec);
    }
    let data = (0..k).map(data_block).collect::<Result<Vec<_>, _>>()?;
    encode(k, m, &data)?
        .into_iter()
        .nth(want - k)
        .ok_or(CodeError::DataCount(want, k + m))
}

/// A record's coded part: its kind (a data record's kind byte, a parity record's `kinds`)
/// as a u16, its LBA and its sequence number, 18 bytes (Reed-Solomon needs an even size).
fn record_shard(r: &BlockRecord) -> [u8; 18] {
    let kind = match r.kind {
        RecordKind::Parity => r.kinds,
        k => u16::from(k as u8),
    };
    let mut b = [0u8; 18];
    b[0..2].copy_from_slice(&kind.to_le_bytes());
    b[2..10].copy_from_slice(&r.lba.to_le_bytes());
    b[10..18].copy_from_slice(&r.seq.to_le_bytes());
    b
}

fn shard_fields(b: &[u8]) -> Option<(u16, u64, u64)> {
    let kind = u16::from_le_bytes(b.get(0..2)?.try_into().ok()?);
    let lba = u64::from_le_bytes(b.get(2..10)?.try_into().ok()?);
    let seq = u64::from_le_bytes(b.get(10..18)?.try_into().ok()?);
    Some((kind, lba, seq))
}

/// The `m` parity records of a stripe's `k` data records (data, trim or padding), in
/// parity order.
pub fn parity_records(
    l: &Layout,
    stripe: u32,
    data: &[BlockRecord],
) -> Result<Vec<BlockRecord>, CodeError> {
    let shards: Vec<[u8; 18]> = data.iter().map(record_shard).collect();
    let refs: Vec<&[u8]> = shards.iter().map(|s| &s[..]).collect();
    encode(l.k as usize, l.m as usize, &refs)?
        .iter()
        .map(|p| {
            let (kinds, lba, seq) = shard_fields(p).ok_or(CodeError::Sizes)?;
            Ok(BlockRecord {
                kind: RecordKind::Parity,
                lba,
                seq,
                stripe,
                kinds,
            })
        })
        .collect()
}

/// The record of member `want`'s block of `stripe` rebuilt from the records of other
/// blocks of it (`have`: member, record). `None` when they do not rebuild one: fewer than
/// the code needs, a record whose kind does not fit its member's role (a state block, a
/// hole, a parity record where data belongs), or a result that is not a valid record.
pub fn rebuild_record(
    l: &Layout,
    stripe: u32,
    have: &[(u32, BlockRecord)],
    want: u32,
) -> Option<BlockRecord> {
    let mut shards = Vec::with_capacity(have.len());
    for (member, r) in have {
        let parity_role = matches!(l.role(stripe, *member), Role::Parity(_));
        let fits = match r.kind {
            RecordKind::Parity => parity_role,
            RecordKind::Data | RecordKind::Trim => !parity_role,
            RecordKind::State | RecordKind::Hole | RecordKind::Summary => false,
        };
        if !fits || *member == want {
            return None;
        }
        shards.push((position(l, stripe, *member), record_shard(r)));
    }
    let refs: Vec<(usize, &[u8])> = shards.iter().map(|(p, s)| (*p, &s[..])).collect();
    let pos = position(l, stripe, want);
    let b = rebuild(l.k as usize, l.m as usize, &refs, pos).ok()?;
    let (kind, lba, seq) = shard_fields(&b)?;
    if pos >= l.k as usize {
        return Some(BlockRecord {
            kind: RecordKind::Parity,
            lba,
            seq,
            stripe,
            kinds: kind,
        });
    }
    let kind = match kind {
        1 => RecordKind::Data,
        3 => RecordKind::Trim,
        _ => return None,
    };
    let r = BlockRecord::new(kind, lba, seq, stripe);
    let padding_ok = r.is_padding() && seq == 0;
    let seq_ok = seq != 0 && seq < SEQ_LIMIT && lba != NO_LBA;
    (padding_ok || seq_ok).then_some(r)
}

/// Member `want`'s block of `stripe` rebuilt from other blocks of it (`have`: member,
/// bytes).
pub fn rebuild_block(
    l: &Layout,
    stripe: u32,
    have: &[(u32, &[u8])],
    want: u32,
) -> Result<Vec<u8>, CodeError> {
    let blocks: Vec<(usize, &[u8])> = have
        .iter()
        .filter(|(m, _)| *m != want)
        .map(|(m, b)| (position(l, stripe, *m), *b))
        .collect();
    rebuild(
        l.k as usize,
        l.m as usize,
        &blocks,
        position(l, stripe, want),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(k: usize, len: usize, seed: u8) -> Vec<Vec<u8>> {
        (0..k)
            .map(|d| {
                (0..len)
                    .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ d as u8)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn any_m_lost_blocks_come_back() {
        for (k, m) in [(2, 1), (3, 1), (2, 2), (4, 2), (3, 3)] {
            let data = blocks(k, 64, k as u8 * 7 + m as u8);
            let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            let parity = encode(k, m, &refs).expect("encode");
            assert_eq!(parity.len(), m);
            let all: Vec<&[u8]> = refs
                .iter()
                .copied()
                .chain(parity.iter().map(|p| &p[..]))
                .collect();
            let n = k + m;
            // Every set of m lost positions: each lost one comes back from the rest.
            for lost in 0..(1u32 << n) {
                if lost.count_ones() as usize != m {
                    continue;
                }
                let have: Vec<(usize, &[u8])> = (0..n)
                    .filter(|p| lost >> p & 1 == 0)
                    .map(|p| (p, all[p]))
                    .collect();
                for want in (0..n).filter(|p| lost >> p & 1 == 1) {
                    let got = rebuild(k, m, &have, want).expect("rebuild");
                    assert_eq!(got, all[want], "k {k} m {m} lost {lost:b} want {want}");
                }
            }
            // One more lost than m: refused, never made up.
            let have: Vec<(usize, &[u8])> = (m + 1..n).map(|p| (p, all[p])).collect();
            assert!(matches!(
                rebuild(k, m, &have, 0),
                Err(CodeError::TooFew { .. })
            ));
        }
    }

    #[test]
    fn xor_is_kept_for_one_parity_block() {
        let data = blocks(3, 32, 5);
        let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        let p = encode(3, 1, &refs).expect("encode");
        assert_eq!(p, vec![zns::parity::xor_of(32, refs.iter().copied())]);
    }

    fn geo() -> zns::Geometry {
        zns::Geometry {
            block_size: 4096,
            oob_size: 64,
            zone_count: 8,
            zone_size: 64,
            zone_capacity: 64,
            max_open: 8,
            max_active: 8,
            zasl_blocks: 8,
            mdts_blocks: 16,
            copy_max_ranges: 4,
            copy_max_range_blocks: 16,
            copy_max_blocks: 16,
            cross_zone_reads: false,
        }
    }

    #[test]
    fn records_rebuild_with_m_members_lost() {
        for m in [1u32, 2] {
            let n = 3 + m;
            let l = Layout::new(
                3,
                m,
                crate::layout::GroupMode::Grouped(4),
                &vec![geo(); n as usize],
            )
            .expect("layout");
            for stripe in 0..n + 1 {
                let data = [
                    BlockRecord::new(RecordKind::Data, 17, 900, stripe),
                    BlockRecord::new(RecordKind::Trim, 40, 901, stripe),
                    BlockRecord::padding(stripe),
                ];
                let parity = parity_records(&l, stripe, &data).expect("parity");
                assert_eq!(parity.len(), m as usize);
                let rec_of = |member: u32| match l.role(stripe, member) {
                    Role::Data(d) => data[d as usize],
                    Role::Parity(j) => parity[j as usize],
                };
                for lost in 0..(1u64 << n) {
                    if lost.count_ones() != m {
                        continue;
                    }
                    let have: Vec<(u32, BlockRecord)> = (0..n)
                        .filter(|x| lost >> x & 1 == 0)
                        .map(|x| (x, rec_of(x)))
                        .collect();
                    for want in (0..n).filter(|x| lost >> x & 1 == 1) {
                        assert_eq!(
                            rebuild_record(&l, stripe, &have, want),
                            Some(rec_of(want)),
                            "m {m} stripe {stripe} lost {lost:b}"
                        );
                    }
                }
                // A hole where a block belongs is no part of the stripe: nothing is rebuilt.
                let mut have: Vec<(u32, BlockRecord)> = (1..n).map(|x| (x, rec_of(x))).collect();
                have[0].1 = BlockRecord::hole(stripe);
                assert_eq!(rebuild_record(&l, stripe, &have, 0), None);
                // Too few records: nothing is made up.
                let few: Vec<(u32, BlockRecord)> = (m + 1..n).map(|x| (x, rec_of(x))).collect();
                assert_eq!(rebuild_record(&l, stripe, &few, 0), None);
            }
        }
    }
}
