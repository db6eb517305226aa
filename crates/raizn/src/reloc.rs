//! Relocated stripe units: which blocks of a member zone are valid in place, which are stale
//! (left by a torn stripe beyond the logical write pointer), and the contents of the blocks
//! that were written to the member's relocation log instead of in place (docs/DESIGN.md,
//! "Relocation"; docs/FORMAT.md, "Relocated stripe unit"). Plain synchronous code.
//!
//! Fault model: a power cut tears a stripe, so a member zone's write pointer may be past the
//! logical write pointer's share of that member. Recovery then declares the member blocks
//! from that share to the member's write pointer *stale* (a new epoch of the zone's member);
//! later writes of those blocks are relocated (records with the epoch current then), and a
//! further power cut may lose any relocation record not yet flushed. A stale range of epoch
//! `e` voids every relocated block of a lower epoch inside it, whatever order the records are
//! read in (a collection copies records with new sequence numbers, and open reads both
//! copies), so blocks relocated before a later tear never come back as data.

use std::collections::{BTreeMap, HashMap};

use crate::meta::{RelocInline, RelocKind};

/// One relocated block's contents and the epoch it was written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocBlock {
    pub epoch: u64,
    pub data: Vec<u8>,
    pub meta: Vec<u8>,
}

/// A range of a member zone declared stale by recovery at `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaleRange {
    pub first: u64,
    pub end: u64,
    pub epoch: u64,
}

/// The relocation state of one member's zone of one logical zone generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberZoneReloc {
    /// Generation of the logical zone this state belongs to.
    pub generation: u64,
    /// The member zone's write pointer (blocks written on the device, stale or not).
    pub device_wp: u64,
    /// The highest epoch of a stale range: the epoch of blocks relocated now.
    pub epoch: u64,
    pub stale: Vec<StaleRange>,
    /// Relocated blocks by member zone offset.
    pub blocks: BTreeMap<u64, RelocBlock>,
}

impl MemberZoneReloc {
    fn stale_epoch_at(&self, b: u64) -> Option<u64> {
        self.stale
            .iter()
            .filter(|r| r.first <= b && b < r.end)
            .map(|r| r.epoch)
            .max()
    }

    /// Whether block `b` holds valid data: relocated, or written in place and not stale.
    pub fn held(&self, b: u64) -> bool {
        self.blocks.contains_key(&b) || (b < self.device_wp && self.stale_epoch_at(b).is_none())
    }

    /// The first block that does not hold valid data (every block below it does).
    pub fn valid_prefix(&self) -> u64 {
        let mut c = 0u64;
        loop {
            if self.blocks.contains_key(&c) {
                c += 1;
            } else if c < self.device_wp && self.stale_epoch_at(c).is_none() {
                // Jump over the in-place run: to the next stale range or the write pointer.
                let next = self
                    .stale
                    .iter()
                    .filter(|r| r.first > c)
                    .map(|r| r.first)
                    .min()
                    .unwrap_or(self.device_wp);
                c = next.min(self.device_wp).max(c + 1);
            } else {
                return c;
            }
        }
    }

    /// Applies a stale range: relocated blocks of a lower epoch inside it are void.
    pub fn apply_stale(&mut self, r: StaleRange) {
        self.blocks
            .retain(|b, blk| !(r.first <= *b && *b < r.end && blk.epoch < r.epoch));
        self.epoch = self.epoch.max(r.epoch);
        // A range inside one of a higher (or equal) epoch says nothing more: drop it, so
        // repeated tears of one region do not pile up ranges.
        let covered = |o: &StaleRange, by: &StaleRange| {
            by.first <= o.first && o.end <= by.end && o.epoch <= by.epoch
        };
        if self.stale.iter().any(|o| covered(&r, o)) {
            return;
        }
        self.stale.retain(|o| !covered(o, &r));
        self.stale.push(r);
    }

    /// Applies relocated blocks from `first` (one block per `bs` bytes of `data`), unless a
    /// stale range of a higher epoch voids them.
    pub fn apply_blocks(&mut self, first: u64, epoch: u64, data: &[u8], meta: &[u8], bs: usize) {
        let oob = match data.len() / bs.max(1) {
            0 => 0,
            n => meta.len() / n,
        };
        for (i, d) in data.chunks(bs.max(1)).enumerate() {
            let b = first + i as u64;
            if self.stale_epoch_at(b).is_some_and(|e| e > epoch) {
                continue;
            }
            let m = meta.get(i * oob..(i + 1) * oob).unwrap_or(&[]).to_vec();
            let newer = self.blocks.get(&b).is_none_or(|o| o.epoch <= epoch);
            if newer {
                self.blocks.insert(
                    b,
                    RelocBlock {
                        epoch,
                        data: d.to_vec(),
                        meta: m,
                    },
                );
            }
        }
        self.epoch = self.epoch.max(epoch);
    }

    /// Makes blocks from `from` to the device's write pointer stale, as a new epoch; returns
    /// the range declared (None when nothing past `from` is on the device).
    pub fn declare_stale(&mut self, from: u64) -> Option<StaleRange> {
        // Only when something past `from` still counts as data: a range already stale and
        // holding no relocated block needs no new epoch.
        let end_held = self
            .device_wp
            .max(self.blocks.keys().next_back().map_or(0, |b| b + 1));
        if !(from..end_held).any(|b| self.held(b)) {
            return None;
        }
        let end = self
            .device_wp
            .max(self.blocks.keys().next_back().map_or(0, |b| b + 1));
        let r = StaleRange {
            first: from,
            end,
            epoch: self.epoch + 1,
        };
        self.apply_stale(r);
        Some(r)
    }

    /// Copies blocks `first..first + n` over `data`/`meta` (one block of `bs` and `oob` bytes
    /// each) where they are relocated, and zeros where they are stale.
    pub fn overlay(&self, first: u64, data: &mut [u8], meta: &mut [u8], bs: usize, oob: usize) {
        let n = (data.len() / bs.max(1)) as u64;
        for i in 0..n {
            let b = first + i;
            let (d0, m0) = (i as usize * bs, i as usize * oob);
            let (Some(d), Some(m)) = (data.get_mut(d0..d0 + bs), meta.get_mut(m0..m0 + oob)) else {
                return;
            };
            if let Some(r) = self.blocks.get(&b) {
                d.copy_from_slice(&r.data);
                if r.meta.len() == m.len() {
                    m.copy_from_slice(&r.meta);
                }
            } else if self.stale_epoch_at(b).is_some() {
                d.fill(0);
                m.fill(0);
            }
        }
    }

    /// Blocks the records of [`MemberZoneReloc::records`] take in a log (a header per stale
    /// range and per run, and the relocated blocks), without building them.
    pub fn log_blocks(&self, run_max: u64) -> u64 {
        let mut total = self.stale.len() as u64;
        let mut run: Option<(u64, u64, u64)> = None; // (first, end, epoch)
        for (b, blk) in &self.blocks {
            let extends =
                run.is_some_and(|(f, e, ep)| e == *b && ep == blk.epoch && e - f < run_max);
            match (extends, run.as_mut()) {
                (true, Some(r)) => r.1 += 1,
                _ => {
                    total += 1;
                    run = Some((*b, *b + 1, blk.epoch));
                }
            }
            total += 1;
        }
        total
    }

    /// Blocks this state could take in a log once every stale block below the member zone's
    /// write pointer is written again (relocated): each stale or relocated block, a header
    /// per run of at most `run_max` of them and per stale range, and one more per stale
    /// range for a run its epoch may split.
    pub fn log_blocks_at_most(&self, run_max: u64) -> u64 {
        let end = self
            .device_wp
            .max(self.blocks.keys().next_back().map_or(0, |b| b + 1));
        let mut total = 2 * self.stale.len() as u64;
        let mut run = 0u64;
        for b in 0..end {
            let counted = self.blocks.contains_key(&b) || self.stale_epoch_at(b).is_some();
            if counted {
                total += 1;
                if run == 0 {
                    total += 1;
                }
                run += 1;
                if run == run_max.max(1) {
                    run = 0;
                }
            } else {
                run = 0;
            }
        }
        total
    }

    /// The records that restore this state (stale ranges, then runs of relocated blocks of
    /// at most `run_max` blocks), for a collection of the log.
    pub fn records(&self, member: u32, run_max: u64) -> Vec<(RelocInline, Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for r in &self.stale {
            let inline = RelocInline {
                member,
                kind: RelocKind::Stale,
                first: r.first,
                end: r.end,
                epoch: r.epoch,
            };
            out.push((inline, Vec::new(), Vec::new()));
        }
        let mut run: Option<(RelocInline, Vec<u8>, Vec<u8>)> = None;
        for (b, blk) in &self.blocks {
            let extends = run.as_ref().is_some_and(|(i, _, _)| {
                i.end == *b && i.epoch == blk.epoch && i.end - i.first < run_max
            });
            if !extends {
                out.extend(run.take());
                run = Some((
                    RelocInline {
                        member,
                        kind: RelocKind::Blocks,
                        first: *b,
                        end: *b,
                        epoch: blk.epoch,
                    },
                    Vec::new(),
                    Vec::new(),
                ));
            }
            if let Some((i, d, m)) = run.as_mut() {
                i.end += 1;
                d.extend_from_slice(&blk.data);
                m.extend_from_slice(&blk.meta);
            }
        }
        out.extend(run);
        out
    }
}

/// The relocation state of every (logical zone, member) that has any.
#[derive(Debug, Default)]
pub struct Relocations {
    map: HashMap<(u32, usize), MemberZoneReloc>,
}

impl Relocations {
    pub fn get(&self, zone: u32, member: usize) -> Option<&MemberZoneReloc> {
        self.map.get(&(zone, member))
    }

    pub fn get_mut(&mut self, zone: u32, member: usize) -> Option<&mut MemberZoneReloc> {
        self.map.get_mut(&(zone, member))
    }

    /// The state of (`zone`, `member`) at `generation`, created empty, or replaced when it
    /// belongs to an older generation.
    pub fn entry(&mut self, zone: u32, member: usize, generation: u64) -> &mut MemberZoneReloc {
        let e = self.map.entry((zone, member)).or_default();
        if e.generation != generation {
            *e = MemberZoneReloc {
                generation,
                ..MemberZoneReloc::default()
            };
        }
        e
    }

    /// Forgets a zone (reset: a new generation holds nothing relocated).
    pub fn drop_zone(&mut self, zone: u32) {
        self.map.retain(|(z, _), _| *z != zone);
    }

    /// Forgets a member (replaced: its new device holds every block in place).
    pub fn drop_member(&mut self, member: usize) {
        self.map.retain(|(_, m), _| *m != member);
    }

    /// Keeps only the states whose generation `current(zone)` still names.
    pub fn retain_current(&mut self, current: impl Fn(u32) -> Option<u64>) {
        self.map
            .retain(|(z, _), e| current(*z) == Some(e.generation));
    }

    /// The zones of `member` that have a state, in order.
    pub fn zones_of(&self, member: usize) -> Vec<u32> {
        let mut z: Vec<u32> = self
            .map
            .keys()
            .filter(|(_, m)| *m == member)
            .map(|(z, _)| *z)
            .collect();
        z.sort_unstable();
        z
    }

    /// Blocks `member`'s relocation state takes in a log ([`MemberZoneReloc::log_blocks`]).
    pub fn log_blocks_of(&self, member: usize, run_max: u64) -> u64 {
        self.map
            .iter()
            .filter(|((_, m), _)| *m == member)
            .map(|(_, e)| e.log_blocks(run_max))
            .sum()
    }

    /// Relocated blocks held in memory, over all zones and members.
    pub fn blocks(&self) -> usize {
        self.map.values().map(|e| e.blocks.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(e: u64, v: u8) -> (Vec<u8>, Vec<u8>) {
        let _ = e;
        (vec![v; 4], vec![v; 1])
    }

    #[test]
    fn stale_voids_older_blocks_in_any_order() {
        let (d, m) = blk(1, 7);
        let stale = StaleRange {
            first: 4,
            end: 8,
            epoch: 2,
        };
        let mut a = MemberZoneReloc {
            device_wp: 8,
            ..Default::default()
        };
        a.apply_blocks(5, 1, &d, &m, 4);
        a.apply_stale(stale);
        let mut b = MemberZoneReloc {
            device_wp: 8,
            ..Default::default()
        };
        b.apply_stale(stale);
        b.apply_blocks(5, 1, &d, &m, 4);
        assert_eq!(a, b);
        assert!(!a.held(5));
        assert_eq!(a.valid_prefix(), 4);
        b.apply_blocks(4, 2, &d, &m, 4);
        assert!(b.held(4) && !b.held(5) && b.held(3));
        assert_eq!(b.valid_prefix(), 5);
    }

    #[test]
    fn overlay_reads_relocated_blocks_and_zeros_for_stale_ones() {
        let mut z = MemberZoneReloc {
            device_wp: 4,
            ..Default::default()
        };
        assert_eq!(z.declare_stale(2).map(|r| (r.first, r.end)), Some((2, 4)));
        z.apply_blocks(2, z.epoch, &[9u8; 4], &[9u8], 4);
        let mut data = vec![1u8; 16];
        let mut meta = vec![1u8; 4];
        z.overlay(0, &mut data, &mut meta, 4, 1);
        assert_eq!(&data[..8], &[1u8; 8]);
        assert_eq!(&data[8..12], &[9u8; 4]);
        assert_eq!(&data[12..], &[0u8; 4]);
        assert_eq!(meta, vec![1, 1, 9, 0]);
        assert_eq!(z.valid_prefix(), 3);
    }

    #[test]
    fn log_blocks_count_what_the_records_take() {
        let mut z = MemberZoneReloc {
            generation: 3,
            device_wp: 10,
            ..Default::default()
        };
        z.declare_stale(2);
        // Stale 2..10: one header now; at most 8 blocks, 4 headers of runs of 2, and one
        // header for a run the stale range's epoch may split.
        assert_eq!(z.log_blocks(2), 1);
        assert_eq!(z.log_blocks_at_most(2), 2 + 8 + 4);
        z.apply_blocks(2, 1, &[5u8; 12], &[5u8; 3], 4);
        let taken: u64 = z
            .records(1, 2)
            .iter()
            .map(|(_, d, _)| 1 + (d.len() / 4) as u64)
            .sum();
        assert_eq!(z.log_blocks(2), taken);
        assert_eq!(taken, 1 + 3 + 2);
        assert!(z.log_blocks(2) <= z.log_blocks_at_most(2));
    }

    #[test]
    fn records_restore_the_state() {
        let mut z = MemberZoneReloc {
            generation: 3,
            device_wp: 10,
            ..Default::default()
        };
        z.declare_stale(2);
        z.apply_blocks(2, 1, &[5u8; 12], &[5u8; 3], 4);
        let recs = z.records(1, 2);
        assert_eq!(
            recs.len(),
            3,
            "one stale range, two runs of at most 2 blocks"
        );
        let mut back = MemberZoneReloc {
            generation: 3,
            device_wp: 10,
            ..Default::default()
        };
        for (i, d, m) in &recs {
            match i.kind {
                RelocKind::Stale => back.apply_stale(StaleRange {
                    first: i.first,
                    end: i.end,
                    epoch: i.epoch,
                }),
                RelocKind::Blocks => back.apply_blocks(i.first, i.epoch, d, m, 4),
            }
        }
        assert_eq!(back, z);
        assert_eq!(back.valid_prefix(), 5);
    }
}
