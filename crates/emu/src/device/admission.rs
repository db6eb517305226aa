//! Command admission without the core lock: the per-command counters (commands and errors
//! by type) in per-thread shards of atomics, and a gate that says whether admission must take
//! the slow path under the core lock (a closed, failed or read-only device, or a fault plan
//! that injects anything).
//!
//! Why: every command passes admission, so a lock or one shared counter here makes writers
//! of different zones on different threads wait for each other (the cache line of the lock or
//! counter moves between cores on every command). The fast path touches only the gate (read)
//! and the calling thread's shard.
//!
//! Determinism: the fast path is taken only when the fault plan injects nothing, so it draws
//! nothing from the plan's seed and skips only the plan's command count, which such a plan
//! never reads (`FaultPlan::injects`). Any plan that injects takes the slow path for every
//! command, in command order, as before.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::stats::{Op, Stats};

/// Shards of counters; a thread uses shard (its number mod SHARDS).
const SHARDS: usize = 8;

/// One thread group's counters, alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Shard {
    commands: [AtomicU64; 8],
    errors: [AtomicU64; 8],
}

/// The counters every command updates, and the admission gate.
pub(super) struct Admission {
    shards: [Shard; SHARDS],
    /// Set while admission must run under the core lock (see the module doc). Written only
    /// with the core lock held.
    slow: AtomicBool,
}

fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<Option<usize>> = const { Cell::new(None) };
    }
    INDEX.with(|i| match i.get() {
        Some(n) => n,
        None => {
            let n = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            i.set(Some(n));
            n
        }
    })
}

impl Admission {
    pub(super) fn new(slow: bool) -> Admission {
        Admission {
            shards: Default::default(),
            slow: AtomicBool::new(slow),
        }
    }

    fn shard(&self) -> &Shard {
        // `shard_index` is below SHARDS by construction; the fallback is never taken.
        self.shards.get(shard_index()).unwrap_or(&self.shards[0])
    }

    /// Counts a command admitted on the fast path and returns true, or returns false (and
    /// counts nothing) when admission must take the slow path.
    pub(super) fn try_fast(&self, op: Op) -> bool {
        if self.slow.load(Ordering::Acquire) {
            return false;
        }
        self.count_command(op);
        true
    }

    pub(super) fn count_command(&self, op: Op) {
        self.shard().commands[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_error(&self, op: Op) {
        self.shard().errors[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Opens or shuts the fast path; the caller holds the core lock.
    pub(super) fn set_slow(&self, slow: bool) {
        self.slow.store(slow, Ordering::Release);
    }

    /// Adds the command and error counts to a snapshot of the other counters.
    pub(super) fn add_to(&self, s: &mut Stats) {
        for shard in &self.shards {
            for (i, (c, e)) in shard.commands.iter().zip(&shard.errors).enumerate() {
                s.commands[i] += c.load(Ordering::Relaxed);
                s.errors[i] += e.load(Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_every_thread_add_up_and_the_gate_stops_the_fast_path() {
        let a = Admission::new(false);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        assert!(a.try_fast(Op::Write));
                    }
                    a.count_error(Op::Read);
                });
            }
        });
        let mut stats = Stats::new(1);
        a.add_to(&mut stats);
        assert_eq!(stats.count(Op::Write), 4000);
        assert_eq!(stats.errors[Op::Read as usize], 4);
        a.set_slow(true);
        assert!(!a.try_fast(Op::Write));
        let mut again = Stats::new(1);
        a.add_to(&mut again);
        assert_eq!(
            again.count(Op::Write),
            4000,
            "a refused fast path counts nothing"
        );
    }
}
