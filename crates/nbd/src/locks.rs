//! Block locks that keep read-modify-write correct against every other write of its block.
//!
//! A read-modify-write (a partial block at either end of a request) reads a block, patches
//! some bytes and writes the whole block back. Anything else that writes the block between
//! that read and that write (another read-modify-write, a whole-block write, write zeroes, a
//! trim) would be partly undone by the write-back with old bytes: a result no serial order of
//! the two requests gives. So the locks have two modes:
//!
//! - exclusive, one block: taken by a read-modify-write for its whole read-patch-write;
//! - shared, a run of blocks: taken by whole-block writes, write zeroes and trims for their
//!   device command. Shared holders never wait for each other, so aligned clients keep their
//!   full concurrency and pay one uncontended lock per request (more only when a request spans
//!   several shards).
//!
//! Blocks hash onto `LOCK_SHARDS` reader-writer locks in groups of `GROUP_BLOCKS` neighbours,
//! by `lba / GROUP_BLOCKS % LOCK_SHARDS`, so memory is fixed whatever the volume size; blocks
//! sharing a shard merely wait for each other more than they must (only a read-modify-write
//! ever waits). Groups keep a long write's lock count low: a 128 KiB write of 4 KiB blocks
//! takes 2 or 3 shards, not 32, each an acquisition and a release of a semaphore. A shared
//! holder of a run takes every shard the run touches, in ascending shard order, and an
//! exclusive holder takes exactly one shard. Every task therefore
//! acquires in one global order and holds at most one exclusive lock, so no cycle of waiters
//! can form (no deadlock), however many blocks or shards a request covers. A request takes
//! its pieces' locks one after another, never two pieces' at once.
//!
//! Reads take no lock: a read-modify-write writes whole blocks, so a read sees a block
//! before or after it, never half of it.

use std::ops::Range;

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// How many reader-writer locks the blocks of a volume hash onto.
pub const LOCK_SHARDS: usize = 256;

/// Neighbouring blocks that share a shard.
pub const GROUP_BLOCKS: u64 = 16;

/// The shard block `lba` hashes onto.
pub fn shard(lba: u64) -> usize {
    // The remainder is below LOCK_SHARDS, so the cast is exact.
    (lba / GROUP_BLOCKS % LOCK_SHARDS as u64) as usize
}

/// The shards that blocks `lba..lba + blocks` hash onto, as at most two ascending,
/// non-overlapping ranges (the second empty unless the run wraps past the last shard); in
/// that order every shard appears once and below `LOCK_SHARDS`.
pub fn shards(lba: u64, blocks: u64) -> [Range<usize>; 2] {
    if blocks == 0 {
        return [0..0, 0..0];
    }
    let n = LOCK_SHARDS as u64;
    let first = lba / GROUP_BLOCKS;
    let last = lba.saturating_add(blocks - 1) / GROUP_BLOCKS;
    let groups = last - first + 1;
    if groups >= n {
        return [0..LOCK_SHARDS, 0..0];
    }
    // Both values are below LOCK_SHARDS, so the casts are exact.
    let start = (first % n) as usize;
    let end = start + groups as usize;
    if end <= LOCK_SHARDS {
        [start..end, 0..0]
    } else {
        [0..end - LOCK_SHARDS, start..LOCK_SHARDS]
    }
}

/// The per-block locks of one server, shared by all its connections.
pub struct BlockLocks {
    shards: Box<[RwLock<()>; LOCK_SHARDS]>,
}

/// Shared holds on every shard of a run of blocks, released on drop.
pub struct SharedGuard<'a> {
    _held: Held<'a>,
}

/// The shard guards of a `SharedGuard`: a run of one block, the common case of 4 KiB
/// writes, holds its one guard without allocating.
enum Held<'a> {
    One {
        _guard: RwLockReadGuard<'a, ()>,
    },
    Many {
        _guards: Vec<RwLockReadGuard<'a, ()>>,
    },
}

impl Default for BlockLocks {
    fn default() -> BlockLocks {
        BlockLocks {
            shards: Box::new(std::array::from_fn(|_| RwLock::new(()))),
        }
    }
}

impl BlockLocks {
    /// Waits until block `lba` is free of every other writer, then holds it alone.
    pub async fn exclusive(&self, lba: u64) -> RwLockWriteGuard<'_, ()> {
        // `shard` is below LOCK_SHARDS, so the index is always in bounds.
        self.shards[shard(lba)].write().await
    }

    /// Waits until no read-modify-write holds a block of `lba..lba + blocks`, then keeps
    /// them from starting until the guard is dropped. Other shared holders are not excluded.
    pub async fn shared(&self, lba: u64, blocks: u64) -> SharedGuard<'_> {
        let [low, high] = shards(lba, blocks);
        if low.len() + high.len() == 1 {
            // `shards` yields indices below LOCK_SHARDS only.
            let guard = self.shards[low.start].read().await;
            return SharedGuard {
                _held: Held::One { _guard: guard },
            };
        }
        let mut held = Vec::with_capacity(low.len() + high.len());
        for i in low.chain(high) {
            // `shards` yields indices below LOCK_SHARDS only.
            held.push(self.shards[i].read().await);
        }
        SharedGuard {
            _held: Held::Many { _guards: held },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use proptest::prelude::*;

    #[test]
    fn runs_map_to_ascending_unique_shards() {
        let g = GROUP_BLOCKS;
        assert_eq!(shards(3, 1), [0..1, 0..0]);
        assert_eq!(shards(3 * g + 1, 1), [3..4, 0..0]);
        // 32 blocks from a group's start: two groups; one block later: three.
        assert_eq!(shards(4 * g, 32), [4..6, 0..0]);
        assert_eq!(shards(4 * g + 1, 32), [4..7, 0..0]);
        assert_eq!(shards((256 + 250) * g, 10 * g), [0..4, 250..256]);
        assert_eq!(shards(7, 256 * g), [0..256, 0..0]);
        assert_eq!(shards(7, u64::MAX), [0..256, 0..0]);
        assert_eq!(
            shards(u64::MAX, 1),
            [shard(u64::MAX)..shard(u64::MAX) + 1, 0..0]
        );
        assert_eq!(shards(5, 0), [0..0, 0..0]);
    }

    proptest! {
        /// The shards are exactly those of the run's blocks, each once, in ascending order.
        #[test]
        fn shards_are_exactly_the_blocks_shards(lba in 0u64..1 << 40, blocks in 1u64..5000) {
            let [low, high] = shards(lba, blocks);
            let got: Vec<usize> = low.chain(high).collect();
            let mut want: Vec<usize> = (lba..lba + blocks).map(shard).collect();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn shared_runs_overlap_freely_and_exclude_read_modify_write() {
        let g = GROUP_BLOCKS;
        let locks = BlockLocks::default();
        let a = locks.shared(0, 300 * g).now_or_never().expect("free");
        let b = locks
            .shared(10 * g, 1)
            .now_or_never()
            .expect("shared with shared");
        // Block 266·g hashes onto shard 10, held shared twice.
        assert!(locks.exclusive(266 * g).now_or_never().is_none());
        drop(a);
        assert!(
            locks.exclusive(266 * g).now_or_never().is_none(),
            "b still holds it"
        );
        drop(b);
        let x = locks.exclusive(266 * g).now_or_never().expect("free again");
        assert!(locks.shared(266 * g - 1, 2).now_or_never().is_none());
        assert!(
            locks.shared(266 * g + g - 1, 1).now_or_never().is_none(),
            "a block of the same group"
        );
        assert!(
            locks.shared(267 * g, 2).now_or_never().is_some(),
            "other groups"
        );
        assert!(locks.exclusive(10 * g).now_or_never().is_none());
        drop(x);
    }
}
