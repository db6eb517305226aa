//! The device write buffer: DRAM that holds written data from its host transfer until the
//! flash program that carries it ends.
//!
//! Space is admitted first come, first served: a command that does not fit waits until enough
//! of the programs already booked have ended. Every byte in the buffer either belongs to a
//! booked program (its release time is known) or to the partial unit at the end of an active
//! zone; the device therefore requires room for one partial unit per active zone plus one
//! largest command, so a waiting command always has a release to wait for.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The write buffer's occupancy over model time.
#[derive(Clone, Debug)]
pub struct WriteBuffer {
    capacity_bytes: u64,
    used_bytes: u64,
    /// Future releases: (time, bytes).
    releases: BinaryHeap<Reverse<(u64, u64)>>,
    /// The latest admission time granted, so admissions stay in order.
    cursor_ns: u64,
    /// Commands that had to wait for space, and the total time they waited.
    pub waits: u64,
    pub wait_ns: u64,
    /// Admissions granted with no release left to wait for (a configuration the device
    /// refuses; counted rather than deadlocking).
    pub overcommits: u64,
}

impl WriteBuffer {
    pub fn new(capacity_bytes: u64) -> WriteBuffer {
        WriteBuffer {
            capacity_bytes,
            used_bytes: 0,
            releases: BinaryHeap::new(),
            cursor_ns: 0,
            waits: 0,
            wait_ns: 0,
            overcommits: 0,
        }
    }

    fn release_until(&mut self, t_ns: u64) {
        while let Some(Reverse((t, bytes))) = self.releases.peek().copied() {
            if t > t_ns {
                break;
            }
            self.releases.pop();
            self.take_out(bytes);
        }
    }

    /// Bytes leave the buffer; more than it holds is a bookkeeping error of the caller.
    fn take_out(&mut self, bytes: u64) {
        debug_assert!(bytes <= self.used_bytes, "{bytes} > {}", self.used_bytes);
        self.used_bytes = self.used_bytes.saturating_sub(bytes);
    }

    /// Admits `bytes` no earlier than `ready_ns`; returns when the space is granted.
    pub fn admit(&mut self, ready_ns: u64, bytes: u64) -> u64 {
        let mut t = ready_ns.max(self.cursor_ns);
        self.release_until(t);
        while self.used_bytes + bytes > self.capacity_bytes {
            match self.releases.pop() {
                Some(Reverse((at, freed))) => {
                    t = t.max(at);
                    self.take_out(freed);
                }
                None => {
                    self.overcommits += 1;
                    break;
                }
            }
        }
        if t > ready_ns {
            self.waits += 1;
            self.wait_ns += t - ready_ns;
        }
        self.used_bytes += bytes;
        self.cursor_ns = t;
        t
    }

    /// `bytes` leave the buffer at `at_ns` (their program ends then).
    pub fn release_at(&mut self, at_ns: u64, bytes: u64) {
        self.releases.push(Reverse((at_ns, bytes)));
    }

    /// `bytes` leave the buffer now (data of a reset zone that was never programmed).
    pub fn drop_bytes(&mut self, bytes: u64) {
        self.used_bytes = self.used_bytes.saturating_sub(bytes);
    }

    /// Empties the buffer (power loss, restart).
    pub fn clear(&mut self) {
        self.used_bytes = 0;
        self.releases.clear();
    }

    /// Bytes held at the latest admission time.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_waits_for_releases_in_time_order() {
        let mut b = WriteBuffer::new(100);
        assert_eq!(b.admit(0, 60), 0);
        b.release_at(50, 60);
        assert_eq!(b.admit(10, 30), 10);
        b.release_at(20, 30);
        // 90 used: 40 more must wait for the release at 20 (30 bytes).
        assert_eq!(b.admit(12, 40), 20);
        b.release_at(70, 40);
        // Full: 10 more bytes wait for the release at 50 (60 bytes).
        assert_eq!(b.admit(15, 10), 50);
        assert_eq!(b.used_bytes(), 50);
        assert_eq!(b.waits, 2);
        assert_eq!(b.wait_ns, 8 + 35);
        // Order is kept: a command ready before the last admission is admitted at it.
        assert_eq!(b.admit(30, 50), 50);
        assert_eq!(b.used_bytes(), 100);
        assert!(b.used_bytes() <= b.capacity_bytes());
        assert_eq!(b.overcommits, 0);
    }

    #[test]
    fn with_nothing_to_wait_for_the_buffer_overcommits_instead_of_hanging() {
        let mut b = WriteBuffer::new(10);
        assert_eq!(b.admit(0, 8), 0);
        assert_eq!(b.admit(5, 8), 5);
        assert_eq!(b.overcommits, 1);
        b.drop_bytes(8);
        b.clear();
        assert_eq!(b.used_bytes(), 0);
    }
}
