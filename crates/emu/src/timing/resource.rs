//! A resource that serves one operation at a time: a flash die, a channel, a direction of
//! the host link, the controller, a zone's append sequencer.
//!
//! Each resource keeps a calendar of the intervals it is already promised for. An operation
//! ready at time t gets the earliest idle gap at or after t that is long enough for it, so an
//! operation computed later may still run earlier, in a gap before work booked far ahead (a
//! read on a channel before the transfer of a page whose die is still busy). That matters
//! because the model books flash programs milliseconds ahead when the write buffer is deep;
//! a plain "busy until" time would make every later transfer queue behind them. Intervals
//! never overlap by construction; the optional trace records every grant so tests can check.

use std::collections::VecDeque;

/// One busy interval of a resource, in nanoseconds of model time: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A resource with a calendar of promised intervals and an optional trace of grants.
#[derive(Clone, Debug, Default)]
pub struct Resource {
    /// Promised intervals that end in the future, sorted and disjoint.
    booked: VecDeque<Busy>,
    trace: Option<Vec<Busy>>,
}

impl Resource {
    pub fn new(trace: bool) -> Resource {
        Resource {
            booked: VecDeque::new(),
            trace: trace.then(Vec::new),
        }
    }

    /// Grants an operation of `dur_ns` that is ready at `ready_ns`, in the earliest gap that
    /// fits; returns (start, end). `now_ns` is the model's present: no operation is ever ready
    /// before it, so intervals that ended by then are forgotten.
    pub fn reserve(&mut self, now_ns: u64, ready_ns: u64, dur_ns: u64) -> (u64, u64) {
        debug_assert!(ready_ns >= now_ns, "an operation ready before the present");
        while self.booked.front().is_some_and(|b| b.end_ns <= now_ns) {
            self.booked.pop_front();
        }
        let (start, at) = self.fit(ready_ns, dur_ns);
        let grant = Busy {
            start_ns: start,
            end_ns: start + dur_ns,
        };
        if dur_ns > 0 {
            self.booked.insert(at, grant);
            if let Some(t) = self.trace.as_mut() {
                t.push(grant);
            }
        }
        (grant.start_ns, grant.end_ns)
    }

    /// Where an operation of `dur_ns` ready at `ready_ns` would start (the earliest gap that
    /// fits it), without booking it: for work that runs only in time the resource is idle.
    pub fn first_fit(&self, ready_ns: u64, dur_ns: u64) -> u64 {
        self.fit(ready_ns, dur_ns).0
    }

    /// The start of the earliest gap at or after `ready_ns` that fits `dur_ns`, and the index
    /// of the booking it goes before.
    fn fit(&self, ready_ns: u64, dur_ns: u64) -> (u64, usize) {
        let first = self.booked.partition_point(|b| b.end_ns <= ready_ns);
        let mut start = ready_ns;
        for (i, b) in self.booked.iter().enumerate().skip(first) {
            if start + dur_ns <= b.start_ns {
                return (start, i);
            }
            start = start.max(b.end_ns);
        }
        (start, self.booked.len())
    }

    /// Time promised to run after `t`: the parts of the booked intervals that lie past it.
    pub fn booked_after_ns(&self, t: u64) -> u64 {
        self.booked
            .iter()
            .map(|b| b.end_ns.saturating_sub(b.start_ns.max(t)))
            .sum()
    }

    /// When the resource finishes everything promised so far.
    pub fn last_end_ns(&self) -> u64 {
        self.booked.back().map_or(0, |b| b.end_ns)
    }

    /// The intervals granted so far (empty unless tracing).
    pub fn trace(&self) -> &[Busy] {
        self.trace.as_deref().unwrap_or(&[])
    }
}

/// Transfer time of `bytes` at `bytes_per_sec`, rounded up to a whole nanosecond; 0 for an
/// unlimited (0) rate.
pub fn transfer_ns(bytes: u64, bytes_per_sec: u64) -> u64 {
    if bytes_per_sec == 0 {
        return 0;
    }
    let ns = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(bytes_per_sec));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Whether `intervals` (in any order) never overlap: the invariant every resource keeps.
pub fn disjoint(intervals: &[Busy]) -> bool {
    let mut v = intervals.to_vec();
    v.sort_by_key(|b| (b.start_ns, b.end_ns));
    v.windows(2).all(|w| w[0].end_ns <= w[1].start_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_queue_behind_each_other_and_fill_gaps() {
        let mut r = Resource::new(true);
        assert_eq!(r.reserve(0, 10, 5), (10, 15));
        assert_eq!(r.reserve(0, 12, 5), (15, 20));
        // Booked far ahead, leaving a gap at 20..100.
        assert_eq!(r.reserve(0, 100, 10), (100, 110));
        // A later operation ready at 18 fits the gap after 20.
        assert_eq!(r.reserve(0, 18, 30), (20, 50));
        // One too long for the remaining gap goes after the far booking.
        assert_eq!(r.reserve(0, 40, 60), (110, 170));
        assert_eq!(r.reserve(0, 50, 50), (50, 100));
        assert_eq!(r.last_end_ns(), 170);
        assert_eq!(r.reserve(0, 5, 0), (5, 5));
        assert_eq!(r.trace().len(), 6);
        // 10..170 is booked without a gap (160 ns), 110 ns of it past 60.
        assert_eq!(r.booked_after_ns(0), 160);
        assert_eq!(r.booked_after_ns(60), 110);
        assert_eq!(r.booked_after_ns(170), 0);
        assert!(disjoint(r.trace()));
        // Past intervals are forgotten once the present passes them.
        assert_eq!(r.reserve(200, 200, 1), (200, 201));
        assert_eq!(r.booked.len(), 1);
        assert!(Resource::new(false).trace().is_empty());
    }

    #[test]
    fn transfer_time_rounds_up_and_overlap_is_detected() {
        assert_eq!(transfer_ns(1000, 1_000_000_000), 1000);
        assert_eq!(transfer_ns(1, 3_000_000_000), 1);
        assert_eq!(transfer_ns(4096, 0), 0);
        assert_eq!(transfer_ns(3, 2_000_000_000), 2);
        let b = |s, e| Busy {
            start_ns: s,
            end_ns: e,
        };
        assert!(disjoint(&[b(5, 10), b(0, 5)]));
        assert!(!disjoint(&[b(5, 10), b(0, 6)]));
    }
}
