//! ZapRAID's in-memory index (docs/DESIGN.md, "Index"): the L2P table with sequence numbers
//! and compare-and-swap updates, the segment table with valid-block counts, and the compact
//! stripe table of `ceil(log2 G)` bits per block.
//!
//! Invariants, checked by `verify`: a segment's valid count is the number of L2P entries that
//! point into it; an entry's sequence number only grows, except through `relocate`, which
//! keeps it; every mapped address is below its member's written prefix.

use crate::layout::{Layout, Pba};

/// Bits of one compact stripe table entry for groups of `group` stripes: `ceil(log2 G)`.
pub fn stripe_id_bits(group: u32) -> u32 {
    if group <= 1 {
        0
    } else {
        32 - (group - 1).leading_zeros()
    }
}

/// The compact stripe table's maximum memory in bits, `(k + m) S Z ceil(log2 G)`, the
/// paper's formula (section 3.2).
pub fn stripe_table_bits(k: u32, m: u32, stripes: u32, segments: u32, group: u32) -> u128 {
    u128::from(k + m)
        * u128::from(stripes)
        * u128::from(segments)
        * u128::from(stripe_id_bits(group))
}

/// Bytes of L2P memory per logical block (sequence number + packed address).
pub const L2P_BYTES_PER_BLOCK: u64 = 16;

const NO_PBA: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    seq: u64,
    pba: u64,
}

/// What an LBA maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Never written since format.
    Unmapped,
    /// Trimmed (or zeroed) by the trim record with this sequence number.
    Trimmed {
        seq: u64,
    },
    Mapped {
        pba: Pba,
        seq: u64,
    },
}

/// State of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentState {
    Free,
    /// Taking stripes (or its stripes are still in flight).
    Open,
    /// Full (or closed by recovery): read only until collected.
    Sealed,
}

/// The stripe ids of one segment's data-region blocks, `bits` each, row per member.
#[derive(Clone, Debug)]
struct StripeTable {
    words: Vec<u64>,
    /// Per member, how many data offsets are written (appends fill a zone from its start,
    /// so the written offsets are always a prefix).
    written: Vec<u32>,
}

#[derive(Clone, Debug)]
struct Segment {
    state: SegmentState,
    valid: u64,
    table: Option<StripeTable>,
    /// The highest sequence number written into the segment (its age for cost-benefit).
    stamp: u64,
    /// The segment header's sequence floor: a segment opened later has a higher one.
    floor: u64,
}

/// Where a trim record lies and what it names, kept so that garbage collection can move a
/// live one without reading it back (and from a failed member).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimPlace {
    pub pba: Pba,
    pub first: u64,
    pub count: u64,
}

/// How garbage collection picks its victim among sealed segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GcPolicy {
    /// The fewest valid blocks.
    #[default]
    Greedy,
    /// The highest `(1 - u) age / (1 + u)` (LFS cost-benefit), `u` the valid fraction and
    /// `age` how many sequence numbers ago the segment was last written.
    CostBenefit,
}

/// Why an index operation was refused (a caller bug or corrupt metadata, never panics).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("LBA {0} is beyond the volume")]
    LbaOutOfRange(u64),
    #[error("address {0:?} is outside the array")]
    BadPba(Pba),
    #[error("segment {0} has no stripe table (it is free)")]
    NoTable(u32),
    #[error("stripe id {id} does not fit a group of {group}")]
    BadStripeId { id: u32, group: u32 },
    #[error("segment {segment} still holds {valid} valid blocks")]
    StillValid { segment: u32, valid: u64 },
}

/// The index of one array.
#[derive(Debug)]
pub struct Index {
    layout: Layout,
    bits: u32,
    l2p: Vec<Entry>,
    segments: Vec<Segment>,
    /// Per trim record sequence number: where it lies. 32 bytes per trim record on the
    /// members; dead ones are dropped when their segment is collected.
    trims: std::collections::BTreeMap<u64, TrimPlace>,
}

impl Index {
    /// An empty index for a volume of `blocks` logical blocks. Memory: 16 bytes per logical
    /// block, plus the stripe tables of the segments in use.
    pub fn new(layout: Layout, blocks: u64) -> Index {
        let empty = Entry {
            seq: 0,
            pba: NO_PBA,
        };
        Index {
            layout,
            bits: layout.stripe_id_bits(),
            l2p: vec![empty; blocks as usize],
            segments: vec![
                Segment {
                    state: SegmentState::Free,
                    valid: 0,
                    table: None,
                    stamp: 0,
                    floor: 0,
                };
                layout.segments() as usize
            ],
            trims: std::collections::BTreeMap::new(),
        }
    }

    pub fn blocks(&self) -> u64 {
        self.l2p.len() as u64
    }

    fn entry(&self, lba: u64) -> Result<Entry, IndexError> {
        usize::try_from(lba)
            .ok()
            .and_then(|i| self.l2p.get(i).copied())
            .ok_or(IndexError::LbaOutOfRange(lba))
    }

    pub fn lookup(&self, lba: u64) -> Result<Mapping, IndexError> {
        let e = self.entry(lba)?;
        Ok(match (e.seq, e.pba) {
            (0, _) => Mapping::Unmapped,
            (seq, NO_PBA) => Mapping::Trimmed { seq },
            (seq, p) => Mapping::Mapped {
                pba: Pba::unpack(p),
                seq,
            },
        })
    }

    fn check_pba(&self, pba: Pba) -> Result<(), IndexError> {
        let l = &self.layout;
        if pba.segment >= l.segments() || u32::from(pba.member) >= l.n() || pba.offset >= l.stripes
        {
            return Err(IndexError::BadPba(pba));
        }
        Ok(())
    }

    fn seg_mut(&mut self, segment: u32) -> Option<&mut Segment> {
        self.segments.get_mut(segment as usize)
    }

    fn unlink(&mut self, e: Entry) {
        if e.pba != NO_PBA && e.seq != 0 {
            let old = Pba::unpack(e.pba);
            if let Some(s) = self.seg_mut(old.segment) {
                assert!(
                    s.valid > 0,
                    "valid count of segment {} underflows",
                    old.segment
                );
                s.valid -= 1;
            }
        }
    }

    fn set(&mut self, lba: u64, e: Entry) {
        if e.pba != NO_PBA {
            let p = Pba::unpack(e.pba);
            if let Some(s) = self.seg_mut(p.segment) {
                s.valid += 1;
            }
        }
        self.l2p[lba as usize] = e;
    }

    /// A client write of `lba` (or a recovered record) at `pba` with sequence number `seq`:
    /// applies only if `seq` is newer than the entry's, so a newer write always wins whatever
    /// order updates arrive in. Returns whether it applied.
    pub fn apply_write(&mut self, lba: u64, pba: Pba, seq: u64) -> Result<bool, IndexError> {
        self.check_pba(pba)?;
        let old = self.entry(lba)?;
        if seq <= old.seq {
            return Ok(false);
        }
        self.unlink(old);
        self.set(
            lba,
            Entry {
                seq,
                pba: pba.pack(),
            },
        );
        Ok(true)
    }

    /// A record found by recovery: as `apply_write`, except that of two copies of one block
    /// (equal sequence numbers: a block and its copy made by garbage collection) the one in
    /// the later segment (higher header floor) wins, so that a collection cut after its
    /// copies were flushed leaves the victim with no live block, whatever order the
    /// segments are loaded in.
    pub fn apply_recovered(&mut self, lba: u64, pba: Pba, seq: u64) -> Result<bool, IndexError> {
        self.check_pba(pba)?;
        let old = self.entry(lba)?;
        if seq == old.seq && old.pba != NO_PBA && seq != 0 {
            let floor = |s: u32| self.segments.get(s as usize).map_or(0, |x| x.floor);
            if floor(pba.segment) > floor(Pba::unpack(old.pba).segment) {
                self.unlink(old);
                self.set(
                    lba,
                    Entry {
                        seq,
                        pba: pba.pack(),
                    },
                );
                return Ok(true);
            }
            return Ok(false);
        }
        self.apply_write(lba, pba, seq)
    }

    /// Records the sequence floor of a segment's header.
    pub fn set_floor(&mut self, segment: u32, floor: u64) {
        if let Some(s) = self.seg_mut(segment) {
            s.floor = floor;
        }
    }

    /// A trim record with sequence number `seq` over `first .. first + count`: every entry
    /// older than it becomes trimmed. Returns how many entries changed.
    pub fn apply_trim(&mut self, first: u64, count: u64, seq: u64) -> Result<u64, IndexError> {
        let end = first
            .checked_add(count)
            .filter(|e| *e <= self.blocks())
            .ok_or(IndexError::LbaOutOfRange(first.saturating_add(count)))?;
        let mut changed = 0;
        for lba in first..end {
            let old = self.entry(lba)?;
            if seq > old.seq {
                self.unlink(old);
                self.set(lba, Entry { seq, pba: NO_PBA });
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Compare-and-swap for a relocated block (garbage collection, recovery): moves `lba`
    /// from `old` to `new` only if it still maps to `old`, keeping its sequence number, so a
    /// client write that landed meanwhile wins. Returns whether it applied.
    pub fn relocate(&mut self, lba: u64, old: Pba, new: Pba) -> Result<bool, IndexError> {
        self.check_pba(new)?;
        let e = self.entry(lba)?;
        if e.seq == 0 || e.pba != old.pack() {
            return Ok(false);
        }
        self.unlink(e);
        self.set(
            lba,
            Entry {
                seq: e.seq,
                pba: new.pack(),
            },
        );
        Ok(true)
    }

    pub fn state(&self, segment: u32) -> Option<SegmentState> {
        self.segments.get(segment as usize).map(|s| s.state)
    }

    pub fn valid(&self, segment: u32) -> Option<u64> {
        self.segments.get(segment as usize).map(|s| s.valid)
    }

    /// Opens a free segment for writing (or for loading by recovery): gives it an empty
    /// stripe table.
    pub fn open_segment(&mut self, segment: u32) -> Result<(), IndexError> {
        let words =
            (u128::from(self.layout.n()) * u128::from(self.layout.stripes) * u128::from(self.bits))
                .div_ceil(64) as usize;
        let n = self.layout.n() as usize;
        let s = self.seg_mut(segment).ok_or(IndexError::BadPba(Pba {
            segment,
            member: 0,
            offset: 0,
        }))?;
        s.state = SegmentState::Open;
        s.table = Some(StripeTable {
            words: vec![0; words],
            written: vec![0; n],
        });
        Ok(())
    }

    /// Notes that a block with sequence number `seq` was written into `segment`.
    pub fn stamp(&mut self, segment: u32, seq: u64) {
        if let Some(s) = self.seg_mut(segment) {
            s.stamp = s.stamp.max(seq);
        }
    }

    /// Notes where the trim record with sequence number `seq` lies (a newer copy, written
    /// by garbage collection, replaces the old place).
    pub fn note_trim_record(&mut self, seq: u64, place: TrimPlace) {
        self.trims.insert(seq, place);
    }

    /// A trim record is live while some LBA of its range is still trimmed by it: removing it
    /// could otherwise bring back an older version of that LBA at the next open.
    pub fn trim_is_live(&self, seq: u64, first: u64, count: u64) -> bool {
        (first..first.saturating_add(count)).any(|lba| {
            self.entry(lba)
                .is_ok_and(|e| e.seq == seq && e.pba == NO_PBA)
        })
    }

    /// The trim records lying in `segment`: `(seq, place)`.
    pub fn trim_records_in(&self, segment: u32) -> Vec<(u64, TrimPlace)> {
        self.trims
            .iter()
            .filter(|(_, p)| p.pba.segment == segment)
            .map(|(s, p)| (*s, *p))
            .collect()
    }

    /// The live data blocks of `segment`: `(lba, pba, seq)`. A scan of the whole L2P (a
    /// reverse map would trade 8 bytes per block for it).
    pub fn live_in(&self, segment: u32) -> Vec<(u64, Pba, u64)> {
        self.l2p
            .iter()
            .enumerate()
            .filter(|(_, e)| e.seq != 0 && e.pba != NO_PBA)
            .map(|(lba, e)| (lba as u64, Pba::unpack(e.pba), e.seq))
            .filter(|(_, p, _)| p.segment == segment)
            .collect()
    }

    pub fn seal_segment(&mut self, segment: u32) {
        if let Some(s) = self.seg_mut(segment) {
            s.state = SegmentState::Sealed;
        }
    }

    /// Frees a collected segment. Its valid count must be zero (every live block moved) and
    /// no trim record may still be noted in it.
    pub fn free_segment(&mut self, segment: u32) -> Result<(), IndexError> {
        let s = self
            .segments
            .get(segment as usize)
            .ok_or(IndexError::BadPba(Pba {
                segment,
                member: 0,
                offset: 0,
            }))?;
        let trims = self
            .trims
            .values()
            .filter(|p| p.pba.segment == segment)
            .count() as u64;
        if s.valid + trims != 0 {
            return Err(IndexError::StillValid {
                segment,
                valid: s.valid + trims,
            });
        }
        if let Some(s) = self.seg_mut(segment) {
            s.state = SegmentState::Free;
            s.table = None;
            s.stamp = 0;
            s.floor = 0;
        }
        Ok(())
    }

    /// Forgets a trim record (it is dead and its segment is being collected).
    pub fn drop_trim_record(&mut self, seq: u64) {
        self.trims.remove(&seq);
    }

    /// The lowest free segment.
    pub fn first_free(&self) -> Option<u32> {
        self.segments
            .iter()
            .position(|s| s.state == SegmentState::Free)
            .map(|i| i as u32)
    }

    /// Whether some segment other than `segment` is in use. The array's identity lives in
    /// segment headers only, so the last segment in use is never reset.
    pub fn others_in_use(&self, segment: u32) -> bool {
        self.segments
            .iter()
            .enumerate()
            .any(|(i, s)| i as u32 != segment && s.state != SegmentState::Free)
    }

    pub fn free_count(&self) -> usize {
        self.segments
            .iter()
            .filter(|s| s.state == SegmentState::Free)
            .count()
    }

    /// Greedy victim: the sealed segment with the fewest valid blocks.
    pub fn greedy_victim(&self) -> Option<u32> {
        self.segments
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SegmentState::Sealed)
            .min_by_key(|(i, s)| (s.valid, *i))
            .map(|(i, _)| i as u32)
    }

    /// The victim `policy` picks among sealed segments; `now` is the next sequence number.
    pub fn victim(&self, policy: GcPolicy, now: u64) -> Option<u32> {
        match policy {
            GcPolicy::Greedy => self.greedy_victim(),
            GcPolicy::CostBenefit => {
                let cap = self.layout.data_blocks_per_segment().max(1) as f64;
                self.segments
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.state == SegmentState::Sealed)
                    .map(|(i, s)| {
                        let u = s.valid as f64 / cap;
                        let age = now.saturating_sub(s.stamp) as f64;
                        ((1.0 - u) * age / (1.0 + u), i)
                    })
                    .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
                    .map(|(_, i)| i as u32)
            }
        }
    }

    fn table_pos(&self, member: u8, offset: u32) -> u64 {
        (u64::from(member) * u64::from(self.layout.stripes) + u64::from(offset))
            * u64::from(self.bits)
    }

    /// Records that `pba` holds a block of the stripe with id `id` in its group, and that the
    /// member's written prefix reaches past it.
    pub fn set_stripe_id(&mut self, pba: Pba, id: u32) -> Result<(), IndexError> {
        self.check_pba(pba)?;
        if id >= self.layout.group {
            return Err(IndexError::BadStripeId {
                id,
                group: self.layout.group,
            });
        }
        let (bits, pos) = (self.bits, self.table_pos(pba.member, pba.offset));
        let t = self
            .seg_mut(pba.segment)
            .and_then(|s| s.table.as_mut())
            .ok_or(IndexError::NoTable(pba.segment))?;
        for b in 0..u64::from(bits) {
            let (w, bit) = (((pos + b) / 64) as usize, (pos + b) % 64);
            if let Some(word) = t.words.get_mut(w) {
                *word = (*word & !(1 << bit)) | (u64::from((id >> b) & 1) << bit);
            }
        }
        if let Some(w) = t.written.get_mut(usize::from(pba.member)) {
            *w = (*w).max(pba.offset + 1);
        }
        Ok(())
    }

    /// The stripe id at `pba`, if that offset is written.
    pub fn stripe_id(&self, pba: Pba) -> Result<Option<u32>, IndexError> {
        self.check_pba(pba)?;
        let t = self
            .segments
            .get(pba.segment as usize)
            .and_then(|s| s.table.as_ref())
            .ok_or(IndexError::NoTable(pba.segment))?;
        if t.written
            .get(usize::from(pba.member))
            .is_none_or(|w| pba.offset >= *w)
        {
            return Ok(None);
        }
        let pos = self.table_pos(pba.member, pba.offset);
        let mut id = 0u32;
        for b in 0..u64::from(self.bits) {
            let (w, bit) = (((pos + b) / 64) as usize, (pos + b) % 64);
            let v = t.words.get(w).map_or(0, |word| (word >> bit) & 1);
            id |= (v as u32) << b;
        }
        Ok(Some(id))
    }

    /// The offset on `member` of the block of stripe `stripe` (index in the segment): a
    /// search of the stripe's group range in the stripe table, `G` entries at most.
    pub fn find_stripe_block(
        &self,
        segment: u32,
        member: u8,
        stripe: u32,
    ) -> Result<Option<u32>, IndexError> {
        let l = &self.layout;
        let (start, len) = l.group_range(l.group_of(stripe));
        let id = l.stripe_id_in_group(stripe);
        for offset in start..start + len {
            if self.stripe_id(Pba {
                segment,
                member,
                offset,
            })? == Some(id)
            {
                return Ok(Some(offset));
            }
        }
        Ok(None)
    }

    /// Member `member` failed: from now on its blocks are addressed by their stripe's index
    /// in the segment (offset = stripe), as every block written after the failure and every
    /// block recovery rebuilds without it are, so its stripe-table rows become the identity.
    /// Moves the L2P entries and trim places that point at it from their real offsets.
    /// Returns how many entries moved.
    pub fn remap_failed_member(&mut self, member: u8) -> Result<u64, IndexError> {
        let l = self.layout;
        let stripe_of = |ix: &Index, pba: Pba| -> Result<u32, IndexError> {
            let id = ix.stripe_id(pba)?.ok_or(IndexError::BadPba(pba))?;
            Ok(l.group_range(l.group_of(pba.offset)).0 + id)
        };
        let mut moves = Vec::new();
        for (lba, e) in self.l2p.iter().enumerate() {
            if e.seq == 0 || e.pba == NO_PBA {
                continue;
            }
            let pba = Pba::unpack(e.pba);
            if pba.member == member {
                moves.push((lba, pba));
            }
        }
        let mut reach = vec![0u32; self.segments.len()];
        let mut new_pbas = Vec::with_capacity(moves.len());
        for (lba, pba) in &moves {
            let offset = stripe_of(self, *pba)?;
            if let Some(r) = reach.get_mut(pba.segment as usize) {
                *r = (*r).max(offset + 1);
            }
            new_pbas.push((*lba, Pba { offset, ..*pba }));
        }
        let mut trims = Vec::new();
        for (seq, place) in &self.trims {
            if place.pba.member == member {
                let offset = stripe_of(self, place.pba)?;
                if let Some(r) = reach.get_mut(place.pba.segment as usize) {
                    *r = (*r).max(offset + 1);
                }
                trims.push((
                    *seq,
                    Pba {
                        offset,
                        ..place.pba
                    },
                ));
            }
        }
        for (lba, pba) in &new_pbas {
            if let Some(e) = self.l2p.get_mut(*lba) {
                e.pba = pba.pack();
            }
        }
        for (seq, pba) in trims {
            if let Some(p) = self.trims.get_mut(&seq) {
                p.pba = pba;
            }
        }
        for segment in 0..self.segments.len() {
            let written = match self.segments.get(segment).and_then(|s| s.table.as_ref()) {
                Some(t) => t.written.get(usize::from(member)).copied().unwrap_or(0),
                None => continue,
            };
            let end = written.max(reach.get(segment).copied().unwrap_or(0));
            for offset in 0..end {
                let pba = Pba {
                    segment: segment as u32,
                    member,
                    offset,
                };
                self.set_stripe_id(pba, l.stripe_id_in_group(offset))?;
            }
        }
        Ok(moves.len() as u64)
    }

    /// Bytes of the L2P table: `L2P_BYTES_PER_BLOCK` per logical block.
    pub fn l2p_bytes(&self) -> u64 {
        self.blocks() * L2P_BYTES_PER_BLOCK
    }

    /// Bytes of the trim record places (`TrimPlace` each, in a B-tree keyed by sequence).
    pub fn trim_place_bytes(&self) -> u64 {
        self.trims.len() as u64 * (8 + std::mem::size_of::<TrimPlace>() as u64)
    }

    /// Bytes of the stripe tables now allocated.
    pub fn stripe_table_bytes(&self) -> u64 {
        self.segments
            .iter()
            .filter_map(|s| s.table.as_ref())
            .map(|t| 8 * t.words.len() as u64)
            .sum()
    }

    /// Checks every invariant; returns the first broken one.
    pub fn verify(&self) -> Result<(), String> {
        let mut counts = vec![0u64; self.segments.len()];
        for (lba, e) in self.l2p.iter().enumerate() {
            if e.pba == NO_PBA || e.seq == 0 {
                continue;
            }
            let p = Pba::unpack(e.pba);
            self.check_pba(p)
                .map_err(|err| format!("LBA {lba}: {err}"))?;
            let seg = &self.segments[p.segment as usize];
            if seg.state == SegmentState::Free {
                return Err(format!("LBA {lba} maps into free segment {}", p.segment));
            }
            counts[p.segment as usize] += 1;
        }
        for (i, (s, c)) in self.segments.iter().zip(counts).enumerate() {
            if s.valid != c {
                return Err(format!(
                    "segment {i}: valid count {} but {c} entries point into it",
                    s.valid
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::GroupMode;

    fn layout(group: u32) -> Layout {
        let g = zns::Geometry {
            block_size: 4096,
            oob_size: 64,
            zone_count: 6,
            zone_size: 128,
            zone_capacity: 100,
            max_open: 4,
            max_active: 4,
            zasl_blocks: 8,
            mdts_blocks: 16,
            copy_max_ranges: 4,
            copy_max_range_blocks: 16,
            copy_max_blocks: 16,
            cross_zone_reads: false,
        };
        Layout::new(3, 1, GroupMode::Grouped(group), &[g; 4]).expect("layout")
    }

    const GIB: f64 = (1u64 << 30) as f64;

    #[test]
    fn stripe_table_memory_is_the_papers_formula() {
        assert_eq!(stripe_id_bits(1), 0);
        assert_eq!(stripe_id_bits(2), 1);
        assert_eq!(stripe_id_bits(3), 2);
        assert_eq!(stripe_id_bits(256), 8);
        assert_eq!(stripe_id_bits(257), 9);
        assert_eq!(stripe_id_bits(274_160), 19);
        // Section 3.2: (3+1)-RAID-5 of 4 TiB ZN540s, S = 274,160. The paper prints
        // Z = 1,351, but its figures are those of the drive's Z = 3,690 zones (section 3.1).
        let g256 = stripe_table_bits(3, 1, 274_160, 3_690, 256) as f64 / 8.0 / GIB;
        let gs = stripe_table_bits(3, 1, 274_160, 3_690, 274_160) as f64 / 8.0 / GIB;
        assert!((g256 - 3.77).abs() < 0.005, "{g256}");
        assert!((gs - 8.95).abs() < 0.005, "{gs}");
        // The table the index allocates per segment matches the formula.
        let l = layout(8);
        let mut ix = Index::new(l, 10);
        ix.open_segment(0).expect("open");
        let want = stripe_table_bits(3, 1, l.stripes, 1, 8).div_ceil(64) * 8;
        assert_eq!(u128::from(ix.stripe_table_bytes()), want);
    }

    #[test]
    fn a_newer_write_always_wins_whatever_the_update_order() {
        let mut ix = Index::new(layout(8), 10);
        ix.open_segment(1).expect("open");
        let a = Pba {
            segment: 1,
            member: 0,
            offset: 3,
        };
        let b = Pba {
            segment: 1,
            member: 2,
            offset: 4,
        };
        assert_eq!(ix.apply_write(5, b, 20), Ok(true));
        assert_eq!(ix.apply_write(5, a, 10), Ok(false));
        assert_eq!(ix.lookup(5), Ok(Mapping::Mapped { pba: b, seq: 20 }));
        assert_eq!(ix.valid(1), Some(1));
        // A trim older than the write does nothing; a newer one unmaps it.
        assert_eq!(ix.apply_trim(4, 3, 15), Ok(2));
        assert_eq!(ix.lookup(5), Ok(Mapping::Mapped { pba: b, seq: 20 }));
        assert_eq!(ix.apply_trim(5, 1, 21), Ok(1));
        assert_eq!(ix.lookup(5), Ok(Mapping::Trimmed { seq: 21 }));
        assert_eq!(ix.valid(1), Some(0));
        assert_eq!(ix.verify(), Ok(()));
        assert!(ix.apply_write(10, a, 30).is_err());
        assert!(ix.apply_trim(8, 3, 30).is_err());
    }

    #[test]
    fn relocation_is_compare_and_swap() {
        let mut ix = Index::new(layout(8), 10);
        ix.open_segment(0).expect("open");
        ix.open_segment(2).expect("open");
        let old = Pba {
            segment: 0,
            member: 1,
            offset: 0,
        };
        let new = Pba {
            segment: 2,
            member: 3,
            offset: 7,
        };
        ix.apply_write(3, old, 4).expect("write");
        assert_eq!(ix.relocate(3, old, new), Ok(true));
        assert_eq!(ix.lookup(3), Ok(Mapping::Mapped { pba: new, seq: 4 }));
        assert_eq!((ix.valid(0), ix.valid(2)), (Some(0), Some(1)));
        // A client write landed first: the stale relocation loses.
        ix.apply_write(4, old, 5).expect("write");
        let client = Pba {
            segment: 2,
            member: 0,
            offset: 1,
        };
        ix.apply_write(4, client, 6).expect("write");
        assert_eq!(ix.relocate(4, old, new), Ok(false));
        assert_eq!(
            ix.lookup(4),
            Ok(Mapping::Mapped {
                pba: client,
                seq: 6
            })
        );
        assert_eq!(ix.verify(), Ok(()));
        ix.seal_segment(0);
        ix.seal_segment(2);
        assert_eq!(ix.greedy_victim(), Some(0));
        assert_eq!(ix.free_segment(0), Ok(()));
        assert_eq!(ix.first_free(), Some(0));
        // A segment still holding a valid block is never freed.
        assert!(matches!(
            ix.free_segment(2),
            Err(IndexError::StillValid { segment: 2, .. })
        ));
    }

    #[test]
    fn cost_benefit_prefers_old_cold_segments_greedy_the_emptiest() {
        let mut ix = Index::new(layout(8), 400);
        let per = layout(8).data_blocks_per_segment();
        for seg in 0..3 {
            ix.open_segment(seg).expect("open");
        }
        // Segment 0: old, half valid; segment 1: young, a quarter valid; 2: open.
        let mut lba = 0;
        for (seg, n, seq) in [(0u32, per / 2, 10u64), (1, per / 4, 1000)] {
            for i in 0..n {
                let p = Pba {
                    segment: seg,
                    member: (i % 4) as u8,
                    offset: (i / 4) as u32,
                };
                ix.apply_write(lba, p, seq + i).expect("write");
                ix.stamp(seg, seq + i);
                lba += 1;
            }
            ix.seal_segment(seg);
        }
        assert_eq!(ix.victim(GcPolicy::Greedy, 1100), Some(1));
        assert_eq!(ix.victim(GcPolicy::CostBenefit, 1100), Some(0));
        // Trim records: live while they still trim something; their segment is kept.
        ix.apply_trim(300, 2, 2000).expect("trim");
        let place = TrimPlace {
            pba: Pba {
                segment: 1,
                member: 0,
                offset: 40,
            },
            first: 300,
            count: 2,
        };
        ix.note_trim_record(2000, place);
        assert!(ix.trim_is_live(2000, 300, 2));
        assert_eq!(ix.trim_records_in(1), vec![(2000, place)]);
        assert_eq!(ix.live_in(1).len() as u64, per / 4);
        ix.apply_trim(0, 400, 3000).expect("trim all");
        assert!(!ix.trim_is_live(2000, 300, 2));
        assert!(ix.free_segment(1).is_err(), "a noted trim record keeps it");
        ix.drop_trim_record(2000);
        assert_eq!(ix.free_segment(1), Ok(()));
        assert_eq!(ix.verify(), Ok(()));
    }

    #[test]
    fn stripe_table_round_trips_and_finds_a_stripes_blocks() {
        for group in [1u32, 2, 3, 8, 98] {
            let l = layout(group);
            let mut ix = Index::new(l, 10);
            ix.open_segment(0).expect("open");
            let mut want = Vec::new();
            for member in 0..4u8 {
                for offset in 0..l.stripes {
                    let (start, len) = l.group_range(l.group_of(offset));
                    // Any permutation inside the group: reverse it on odd members.
                    let id = if member % 2 == 1 {
                        len - 1 - (offset - start)
                    } else {
                        offset - start
                    };
                    ix.set_stripe_id(
                        Pba {
                            segment: 0,
                            member,
                            offset,
                        },
                        id,
                    )
                    .expect("set");
                    want.push((member, offset, id));
                }
            }
            for (member, offset, id) in want {
                assert_eq!(
                    ix.stripe_id(Pba {
                        segment: 0,
                        member,
                        offset
                    }),
                    Ok(Some(id)),
                    "G {group}"
                );
                let stripe = l.group_range(l.group_of(offset)).0 + id;
                assert_eq!(
                    ix.find_stripe_block(0, member, stripe),
                    Ok(Some(offset)),
                    "G {group}"
                );
            }
            assert!(ix
                .set_stripe_id(
                    Pba {
                        segment: 0,
                        member: 0,
                        offset: 0
                    },
                    group
                )
                .is_err());
        }
        // An offset not yet written has no stripe id (it is not stripe 0).
        let mut ix = Index::new(layout(8), 10);
        ix.open_segment(0).expect("open");
        assert_eq!(
            ix.stripe_id(Pba {
                segment: 0,
                member: 0,
                offset: 0
            }),
            Ok(None)
        );
        assert_eq!(ix.find_stripe_block(0, 0, 0), Ok(None));
    }
}
