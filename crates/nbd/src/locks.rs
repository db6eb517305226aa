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
//! Blocks hash onto `LOCK_SHARDS` reader-writer locks by `lba % LOCK_SHARDS`, so memory is
//! fixed whatever the volume size; blocks sharing a shard merely wait for each other more
//! than they must. A shared holder of a run takes every shard the run touches, in ascending
//! shard order, and an exclusive holder takes exactly one shard. Every task therefore
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

/// The shards that blocks `lba..lba + blocks` hash onto, as at most two ascending,
/// non-overlapping ranges (the second empty unless the run wraps past the last shard); in
/// that order every shard appears once and below `LOCK_SHARDS`.
pub fn shards(lba: u64, blocks: u64) -> [Range<usize>; 2] {
    let n = LOCK_SHARDS as u64;
    if blocks >= n {
        return [0..LOCK_SHARDS, 0..0];
    }
    // Both values are below LOCK_SHARDS, so the casts are exact.
    let start = (lba % n) as usize;
    let end = start + blocks as usize;
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
    One(RwLockReadGuard<'a, ()>),
    Many(Vec<RwLockReadGuard<'a, ()>>),
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
        // The remainder is below LOCK_SHARDS, so the index is always in bounds.
        self.shards[(lba % LOCK_SHARDS as u64) as usize]
            .write()
            .await
    }

    /// Waits until no read-modify-write holds a block of `lba..lba + blocks`, then keeps
    /// them from starting until the guard is dropped. Other shared holders are not excluded.
    pub async fn shared(&self, lba: u64, blocks: u64) -> SharedGuard<'_> {
        let [low, high] = shards(lba, blocks);
        if low.len() + high.len() == 1 {
            // `shards` yields indices below LOCK_SHARDS only.
            let guard = self.shards[low.start].read().await;
            return SharedGuard {
                _held: Held::One(guard),
            };
        }
        let mut held = Vec::with_capacity(low.len() + high.len());
        for i in low.chain(high) {
            // `shards` yields indices below LOCK_SHARDS only.
            held.push(self.shards[i].read().await);
        }
        SharedGuard {
            _held: Held::Many(held),
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
        assert_eq!(shards(3, 1), [3..4, 0..0]);
        assert_eq!(shards(256 + 250, 10), [0..4, 250..256]);
        assert_eq!(shards(7, 256), [0..256, 0..0]);
        assert_eq!(shards(7, u64::MAX), [0..256, 0..0]);
        assert_eq!(shards(u64::MAX, 1), [255..256, 0..0]);
    }

    proptest! {
        /// The shards are exactly those of the run's blocks, each once, in ascending order.
        #[test]
        fn shards_are_exactly_the_blocks_shards(lba in 0u64..1 << 40, blocks in 1u64..600) {
            let [low, high] = shards(lba, blocks);
            let got: Vec<usize> = low.chain(high).collect();
            let mut want: Vec<usize> =
                (lba..lba + blocks).map(|b| (b % LOCK_SHARDS as u64) as usize).collect();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn shared_runs_overlap_freely_and_exclude_read_modify_write() {
        let locks = BlockLocks::default();
        let a = locks.shared(0, 300).now_or_never().expect("free");
        let b = locks
            .shared(10, 1)
            .now_or_never()
            .expect("shared with shared");
        // Block 266 hashes onto shard 10, held shared twice.
        assert!(locks.exclusive(266).now_or_never().is_none());
        drop(a);
        assert!(
            locks.exclusive(266).now_or_never().is_none(),
            "b still holds it"
        );
        drop(b);
        let x = locks.exclusive(266).now_or_never().expect("free again");
        assert!(locks.shared(265, 2).now_or_never().is_none());
        assert!(
            locks.shared(267, 2).now_or_never().is_some(),
            "other blocks"
        );
        assert!(locks.exclusive(10).now_or_never().is_none());
        drop(x);
    }
}
