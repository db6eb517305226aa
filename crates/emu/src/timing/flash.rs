//! The flash array: dies on channels, and the four operations the model issues to them
//! (read, program, erase, copyback). Die `d` sits on channel `d % channels`, so consecutive
//! die numbers alternate channels and a stripe over consecutive dies spreads its transfers.
//!
//! A program first moves the data over the channel into the die's cache register, which is
//! free again once the die starts programming the previous page (cache program); the die then
//! programs for tPROG. A read occupies the die for tR and keeps it busy until the channel has
//! carried the data out of the page register. A copyback occupies only the die.
//!
//! The array remembers the latest end of the programs and copybacks a Flush must wait for:
//! every program, and every copyback but those of ZNS+ plugging (`plug_copyback`), whose
//! data stays in the old block group until the copy has ended (docs/DESIGN.md, "Timing
//! model").

use crate::timing::profile::TimingProfile;
use crate::timing::resource::{transfer_ns, Resource};

/// What the array has done, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashCounters {
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub copybacks: u64,
    /// Nanoseconds dies were booked, summed over dies. Work is booked when submitted, so this
    /// includes time still to come; chip utilisation uses `TimingCounters::die_done_ns`.
    pub die_busy_ns: u64,
}

struct Die {
    array: Resource,
    /// When the cache register can take the next page to program.
    cache_free_ns: u64,
}

/// Every die and channel of the modelled SSD.
pub struct FlashArray {
    p: TimingProfile,
    dies: Vec<Die>,
    channels: Vec<Resource>,
    counters: FlashCounters,
    /// The latest end of any program or copyback issued so far that a Flush waits for
    /// (plugging copybacks aside).
    last_program_end_ns: u64,
}

impl FlashArray {
    pub fn new(p: TimingProfile, trace: bool) -> FlashArray {
        FlashArray {
            p,
            dies: (0..p.dies())
                .map(|_| Die {
                    array: Resource::new(trace),
                    cache_free_ns: 0,
                })
                .collect(),
            channels: (0..p.channels).map(|_| Resource::new(trace)).collect(),
            counters: FlashCounters::default(),
            last_program_end_ns: 0,
        }
    }

    fn channel_of(&self, die: usize) -> usize {
        die % self.channels.len()
    }

    /// Programs one unit (a page on every plane) of which `bytes` come over the channel,
    /// once the data is in the controller at `ready_ns`. Returns when the program ends.
    pub fn program(&mut self, die: usize, now_ns: u64, ready_ns: u64, bytes: u64) -> u64 {
        let ch = self.channel_of(die);
        let xfer = transfer_ns(bytes, self.p.channel_bytes_per_sec);
        let d = &mut self.dies[die];
        let ready = ready_ns.max(d.cache_free_ns);
        let (_, xfer_end) = self.channels[ch].reserve(now_ns, ready, xfer);
        let (start, end) = d.array.reserve(now_ns, xfer_end, self.p.page_program_ns);
        d.cache_free_ns = d.cache_free_ns.max(start);
        self.counters.programs += 1;
        self.counters.die_busy_ns += self.p.page_program_ns;
        self.last_program_end_ns = self.last_program_end_ns.max(end);
        end
    }

    /// Reads one unit's page(s) and carries `bytes` of it to the controller. Returns when the
    /// data is in the controller. The die is booked for the sensing and the transfer as if the
    /// channel were free when sensing ends; if the channel is busy then, the data waits in the
    /// page register a little longer than the die's booking says (a small optimism).
    pub fn read(&mut self, die: usize, now_ns: u64, ready_ns: u64, bytes: u64) -> u64 {
        let ch = self.channel_of(die);
        let xfer = transfer_ns(bytes, self.p.channel_bytes_per_sec);
        let tr = self.p.page_read_ns;
        let (start, _) = self.dies[die].array.reserve(now_ns, ready_ns, tr + xfer);
        let (_, out) = self.channels[ch].reserve(now_ns, start + tr, xfer);
        self.counters.reads += 1;
        self.counters.die_busy_ns += tr + xfer;
        out
    }

    /// Erases `blocks` blocks of one die back to back. Returns when the last one is erased.
    pub fn erase(&mut self, die: usize, now_ns: u64, ready_ns: u64, blocks: u64) -> u64 {
        let dur = self.p.block_erase_ns * blocks;
        let (_, end) = self.dies[die].array.reserve(now_ns, ready_ns, dur);
        self.counters.erases += blocks;
        self.counters.die_busy_ns += dur;
        end
    }

    /// Copies one unit inside a die. Returns when the program ends.
    pub fn copyback(&mut self, die: usize, now_ns: u64, ready_ns: u64) -> u64 {
        let end = self.plug_copyback(die, now_ns, ready_ns);
        self.last_program_end_ns = self.last_program_end_ns.max(end);
        end
    }

    /// A copyback of ZNS+ plugging: booked as `copyback`, but not among the work a Flush
    /// waits for (`last_program_end_ns`), since the unit's data stays in the zone's old
    /// block group until the zone is reset or its old group is superseded, both of which
    /// are booked after this copy. Returns when the program ends.
    pub fn plug_copyback(&mut self, die: usize, now_ns: u64, ready_ns: u64) -> u64 {
        let (_, end) = self.dies[die]
            .array
            .reserve(now_ns, ready_ns, self.p.copyback_ns);
        self.counters.copybacks += 1;
        self.counters.die_busy_ns += self.p.copyback_ns;
        end
    }

    /// When a copyback on `die` ready at `ready_ns` would start, without booking it.
    pub fn copyback_start(&self, die: usize, ready_ns: u64) -> u64 {
        self.dies[die].array.first_fit(ready_ns, self.p.copyback_ns)
    }

    /// Die time booked to run after `t`, summed over dies.
    pub fn die_booked_after_ns(&self, t: u64) -> u64 {
        self.dies.iter().map(|d| d.array.booked_after_ns(t)).sum()
    }

    /// The latest end of every program and copyback issued so far, plugging copybacks
    /// aside: what a Flush waits for.
    pub fn last_program_end_ns(&self) -> u64 {
        self.last_program_end_ns
    }

    pub fn counters(&self) -> FlashCounters {
        self.counters
    }

    /// The busy intervals of die `d` (when tracing).
    pub fn die_trace(&self, d: usize) -> &[crate::timing::resource::Busy] {
        self.dies[d].array.trace()
    }

    /// The busy intervals of channel `c` (when tracing).
    pub fn channel_trace(&self, c: usize) -> &[crate::timing::resource::Busy] {
        self.channels[c].trace()
    }

    pub fn die_count(&self) -> usize {
        self.dies.len()
    }

    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::profile::timing_profile;
    use crate::timing::resource::disjoint;

    #[test]
    fn programs_pipeline_through_the_cache_register() {
        let p = timing_profile("femu-tlc").expect("profile");
        let mut f = FlashArray::new(p, true);
        let unit = p.unit_bytes();
        let xfer = transfer_ns(unit, p.channel_bytes_per_sec);
        let e1 = f.program(0, 0, 0, unit);
        assert_eq!(e1, xfer + p.page_program_ns);
        // The second page's transfer overlaps the first program; its program follows it.
        let e2 = f.program(0, 0, 0, unit);
        assert_eq!(e2, e1 + p.page_program_ns);
        // The third page waits for the cache register: until the second program starts.
        let e3 = f.program(0, 0, 0, unit);
        assert_eq!(e3, e2 + p.page_program_ns);
        assert_eq!(f.channel_trace(0)[2].start_ns, e1);
        // Another die on the same channel uses the channel's idle gap before that transfer.
        let e4 = f.program(8, 0, 0, unit);
        assert_eq!(e4, 3 * xfer + p.page_program_ns);
        assert_eq!(f.counters().programs, 4);
        assert_eq!(f.last_program_end_ns(), e3);
        assert!(disjoint(f.channel_trace(0)) && disjoint(f.die_trace(0)));
    }

    #[test]
    fn reads_hold_the_die_until_transferred_and_erases_take_the_die() {
        let p = timing_profile("femu-mlc").expect("profile");
        let mut f = FlashArray::new(p, true);
        let out = f.read(3, 0, 100, 4096);
        assert_eq!(
            out,
            100 + p.page_read_ns + transfer_ns(4096, p.channel_bytes_per_sec)
        );
        let erased = f.erase(3, 0, 0, 2);
        // The erase does not fit before the read, so it follows it.
        assert_eq!(erased, out + 2 * p.block_erase_ns);
        let cb = f.copyback(3, 0, 0);
        assert_eq!(cb, erased + p.copyback_ns);
        assert_eq!(f.die_trace(3).len(), 3);
        assert_eq!(f.die_trace(3)[0].end_ns, out);
        assert_eq!(f.counters().erases, 2);
        assert_eq!(f.counters().copybacks, 1);
    }
}
