//! Which completed writes to data zones are known durable: sans-IO bookkeeping that lets
//! garbage collection reset a victim without flushing the whole device when everything the
//! reset depends on is durable already.
//!
//! Fault model: power may be cut at any instant; a completed write survives only if a flush
//! submitted after it completed has completed, a FUA write completed after it in its zone, or
//! its zone became Full (docs/DESIGN.md, durability contract of the emulated device). A reset
//! destroys the victim's copies of its blocks, so it is safe only once (a) the copies that
//! moved its live blocks are durable and (b) so are the newer versions (user writes, trim
//! records) that made its other blocks invalid; otherwise a crash brings back a mapping into
//! a zone that no longer holds it. This module answers (a) and (b) conservatively: a write it
//! is unsure of counts as not durable.
//!
//! Every completed write to a data zone takes the next *epoch*. Per zone it keeps the oldest
//! epoch not known durable, the newest epoch written, and the epoch of the newest write that
//! invalidated one of its blocks. Every write with an epoch below `frontier()` is durable.

/// Marks "no write of this zone awaits durability".
const NONE: u64 = u64::MAX;

/// Durability of the writes to each data zone, by epoch.
#[derive(Clone, Debug)]
pub struct Durability {
    /// Epoch of the newest completed write.
    epoch: u64,
    /// Per zone: epoch of its oldest write not known durable, or `NONE`.
    oldest: Vec<u64>,
    /// Per zone: epoch of its newest write.
    newest: Vec<u64>,
    /// Per zone: epoch of the newest write that invalidated one of its blocks.
    invalidated: Vec<u64>,
}

impl Durability {
    /// A volume of `zones` data zones whose data is all durable (just formatted or mounted:
    /// mount writes a checkpoint, which flushes, unless the device holds nothing written
    /// since the newest checkpoint, which flushed everything it maps).
    pub fn new(zones: u32) -> Durability {
        Durability {
            epoch: 0,
            oldest: vec![NONE; zones as usize],
            newest: vec![0; zones as usize],
            invalidated: vec![0; zones as usize],
        }
    }

    /// A block of zone `z` is being invalidated by the write whose completion is being
    /// recorded (its `wrote` follows under the same map lock).
    pub fn invalidated_by_write(&mut self, z: u32) {
        self.invalidated[z as usize] = self.epoch + 1;
    }

    /// A write to zone `z` completed: it takes the next epoch.
    pub fn wrote(&mut self, z: u32) {
        self.epoch += 1;
        let i = z as usize;
        self.newest[i] = self.epoch;
        if self.oldest[i] == NONE {
            self.oldest[i] = self.epoch;
        }
    }

    /// Every write to zone `z` so far is durable: it became Full on the device, or a FUA
    /// write completed with no other write to it in flight.
    pub fn zone_durable(&mut self, z: u32) {
        self.oldest[z as usize] = NONE;
    }

    /// Zone `z` was reset: none of its old writes matter any more.
    pub fn zone_reset(&mut self, z: u32) {
        let i = z as usize;
        self.oldest[i] = NONE;
        self.newest[i] = 0;
        self.invalidated[i] = 0;
    }

    /// The mark to pass to `flushed` when the device flush that follows completes: writes
    /// completed so far are the ones it covers.
    pub fn flush_submitted(&self) -> u64 {
        self.epoch
    }

    /// A device flush submitted at mark `at` completed.
    pub fn flushed(&mut self, at: u64) {
        for (oldest, newest) in self.oldest.iter_mut().zip(&self.newest) {
            if *oldest <= at {
                // Writes after the flush's submission, if any, are at `at + 1` or later.
                *oldest = if *newest <= at { NONE } else { at + 1 };
            }
        }
    }

    /// Every write with an epoch below this is durable.
    pub fn frontier(&self) -> u64 {
        self.oldest
            .iter()
            .copied()
            .min()
            .unwrap_or(NONE)
            .min(self.epoch + 1)
    }

    /// Whether resetting `victims` (whose copies completed) needs a device flush first: some
    /// write that moved or invalidated one of their blocks may not be durable yet.
    pub fn reset_needs_flush(&self, victims: &[u32]) -> bool {
        let frontier = self.frontier();
        victims.iter().any(|&v| {
            self.invalidated
                .get(v as usize)
                .is_none_or(|&e| e >= frontier)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_waits_for_the_writes_that_invalidated_its_blocks() {
        let mut d = Durability::new(4);
        assert!(!d.reset_needs_flush(&[0]));
        // A user write to zone 1 invalidates a block of zone 0.
        d.invalidated_by_write(0);
        d.wrote(1);
        assert!(d.reset_needs_flush(&[0]));
        assert!(!d.reset_needs_flush(&[2]));
        // Zone 1 fills: its writes are durable, so zone 0 may be reset.
        d.zone_durable(1);
        assert!(!d.reset_needs_flush(&[0]));
        // A copy into zone 2 moves zone 3's block; a later write to zone 1 is unrelated.
        d.invalidated_by_write(3);
        d.wrote(2);
        d.wrote(1);
        assert!(d.reset_needs_flush(&[3]));
        // A FUA copy makes zone 2 durable: zone 1's later write does not hold the reset.
        d.zone_durable(2);
        assert!(!d.reset_needs_flush(&[3]));
    }

    #[test]
    fn a_flush_covers_only_writes_completed_before_it_was_submitted() {
        let mut d = Durability::new(3);
        d.invalidated_by_write(0);
        d.wrote(1);
        let at = d.flush_submitted();
        // Completes while the flush is in flight: not covered.
        d.invalidated_by_write(2);
        d.wrote(1);
        d.flushed(at);
        assert!(!d.reset_needs_flush(&[0]));
        assert!(d.reset_needs_flush(&[2]));
        let at = d.flush_submitted();
        d.flushed(at);
        assert!(!d.reset_needs_flush(&[0, 2]));
        assert_eq!(d.frontier(), d.flush_submitted() + 1);
    }

    #[test]
    fn a_reset_zone_forgets_its_writes() {
        let mut d = Durability::new(2);
        d.invalidated_by_write(0);
        d.wrote(0);
        d.zone_reset(0);
        assert!(!d.reset_needs_flush(&[0, 1]));
    }
}
