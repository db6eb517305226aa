//! Writes in flight outside the device's core lock: per zone, the blocks a writer has
//! claimed (the zone's write pointer already moved past them) whose bytes it is still
//! copying into the store. Shared between the zone table, which reads it under the core lock,
//! and the writer, which clears it without that lock once its bytes are stored.
//!
//! Why: a write to an open zone then takes the core lock once (validate, move the write
//! pointer) instead of twice, and writers of different zones on different threads meet on
//! that lock only briefly. The zone's own lock, held by the writer throughout, keeps every
//! other writer and state change of the zone out, so a zone has at most one such write.
//!
//! Fault model: the claimed blocks are not durable until their bytes are stored: a Flush
//! meanwhile makes durable only what lies below them (`ZoneTable::flush`), so the image never
//! records a write pointer over bytes it does not hold. A writer whose copy fails (a host
//! I/O error) gives the blocks back under the core lock (`ZoneTable::undo_claim`), leaving
//! the zone as if the write had never begun, as a failed copy did before.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

/// A value alone on its cache lines, so that threads working on neighbours (the locks and
/// counts of adjacent zones) do not move each other's lines between cores.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct CachePadded<T>(pub T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Per zone, the blocks claimed by a write whose bytes are still being copied (0: none).
#[derive(Debug)]
pub struct Uncopied {
    zones: Box<[CachePadded<AtomicU64>]>,
}

impl Uncopied {
    pub fn new(zones: u32) -> Uncopied {
        Uncopied {
            zones: (0..zones).map(|_| CachePadded::default()).collect(),
        }
    }

    /// Blocks of zone `z` claimed and not yet stored. Acquire: when it reads 0 after a
    /// writer's `clear`, that writer's bytes are in the store.
    pub fn get(&self, z: u32) -> u64 {
        self.zones
            .get(z as usize)
            .map_or(0, |c| c.load(Ordering::Acquire))
    }

    /// Records a claim of `blocks` in zone `z` (under the core lock).
    pub(crate) fn claim(&self, z: u32, blocks: u64) {
        if let Some(c) = self.zones.get(z as usize) {
            let before = c.swap(blocks, Ordering::AcqRel);
            assert_eq!(before, 0, "zone {z} claimed by two writers at once");
        }
    }

    /// The claim's bytes are stored (or the claim was given back): the zone has no write in
    /// flight any more.
    pub fn clear(&self, z: u32) {
        if let Some(c) = self.zones.get(z as usize) {
            c.store(0, Ordering::Release);
        }
    }

    /// Whether any zone has a claim outstanding.
    pub fn any(&self) -> bool {
        self.zones.iter().any(|c| c.load(Ordering::Acquire) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_reads_back_until_cleared_and_out_of_range_zones_read_zero() {
        let u = Uncopied::new(3);
        assert!(!u.any());
        u.claim(1, 8);
        assert_eq!(u.get(1), 8);
        assert_eq!(u.get(0), 0);
        assert!(u.any());
        u.clear(1);
        assert_eq!(u.get(1), 0);
        assert_eq!(u.get(7), 0);
        assert!(std::mem::align_of::<CachePadded<AtomicU64>>() >= 64);
    }

    #[test]
    #[should_panic(expected = "two writers")]
    fn a_second_claim_on_a_claimed_zone_is_a_bug() {
        let u = Uncopied::new(1);
        u.claim(0, 1);
        u.claim(0, 1);
    }
}
