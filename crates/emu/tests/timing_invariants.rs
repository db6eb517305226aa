//! Invariants of the timing model, over random command streams on traced models: a channel
//! never carries two transfers at once, a die never runs two operations at once, the host
//! link never carries two transfers at once in one direction, completions never precede
//! submissions, host throughput never exceeds the interface bandwidth, and the write buffer
//! never has to be overcommitted. Plus exact latencies of simple cases.

use emu::timing::resource::{disjoint, transfer_ns, Busy};
use emu::timing::{timing_profile, TimedCmd, TimingProfile, ZonedTiming};
use proptest::prelude::*;
use zns::{CopyRange, Geometry};

const BS: u64 = 4096;

fn geometry() -> Geometry {
    Geometry {
        block_size: BS as u32,
        oob_size: 0,
        zone_count: 8,
        zone_size: 1024,
        zone_capacity: 800,
        max_open: 4,
        max_active: 4,
        zasl_blocks: 32,
        mdts_blocks: 64,
        copy_max_ranges: 4,
        copy_max_range_blocks: 32,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    }
}

fn profile(name: &str) -> TimingProfile {
    let p = timing_profile(name).expect("named profile");
    // A buffer just large enough for the geometry, so that writes often wait for programs.
    let g = geometry();
    let need = u64::from(g.max_active) * p.unit_bytes() + u64::from(g.mdts_blocks) * BS;
    TimingProfile {
        write_buffer_bytes: need + 4 * p.unit_bytes(),
        ..p
    }
}

/// The test's own view of the zones: write pointers (blocks from the zone start).
struct Zones {
    wp: Vec<u64>,
}

impl Zones {
    fn active(&self) -> usize {
        self.wp
            .iter()
            .filter(|&&w| w > 0 && w < geometry().zone_capacity)
            .count()
    }

    /// A zone that can take `blocks` without exceeding the active limit.
    fn writable(&self, pick: u64, blocks: u64) -> Option<u32> {
        let g = geometry();
        let n = g.zone_count as u64;
        (0..n).map(|i| ((pick + i) % n) as u32).find(|&z| {
            let w = self.wp[z as usize];
            let fits = w + blocks <= g.zone_capacity;
            let active = w > 0 || self.active() < g.max_active as usize;
            fits && active
        })
    }
}

/// Runs `ops` (selector, argument, gap before submission in ns) on a traced model; returns
/// it with the host bytes moved in each direction and the run's time span.
fn run(p: TimingProfile, ops: &[(u8, u64, u64)]) -> (ZonedTiming, u64, u64, u64, u64) {
    let g = geometry();
    let mut m = ZonedTiming::new(p, g, true).expect("model");
    let mut zones = Zones {
        wp: vec![0; g.zone_count as usize],
    };
    let (mut now, mut last_done, mut h2d, mut d2h) = (0u64, 0u64, 0u64, 0u64);
    for &(sel, arg, gap) in ops {
        now += gap;
        let blocks = 1 + arg % 16;
        let start = |z: u32| u64::from(z) * g.zone_size;
        let done = match sel % 8 {
            0 | 1 => match zones.writable(arg, blocks) {
                Some(z) => {
                    let lba = start(z) + zones.wp[z as usize];
                    zones.wp[z as usize] += blocks;
                    h2d += blocks * BS;
                    let cmd = if sel % 8 == 0 {
                        TimedCmd::Write {
                            lba,
                            blocks,
                            fua: arg % 13 == 0,
                            host_data: true,
                        }
                    } else {
                        TimedCmd::Append {
                            lba,
                            blocks,
                            fua: false,
                        }
                    };
                    m.submit(now, &cmd)
                }
                None => m.submit(now, &TimedCmd::Rejected),
            },
            2 | 3 => {
                let z = (arg % u64::from(g.zone_count)) as u32;
                let off = (arg / 7) % (g.zone_size - blocks);
                d2h += blocks * BS;
                m.submit(
                    now,
                    &TimedCmd::Read {
                        lba: start(z) + off,
                        blocks,
                    },
                )
            }
            4 => m.submit(now, &TimedCmd::Flush),
            5 => {
                let z = (arg % u64::from(g.zone_count)) as u32;
                zones.wp[z as usize] = 0;
                m.submit(now, &TimedCmd::Reset { zones: &[z] })
            }
            6 => {
                let z = (arg % u64::from(g.zone_count)) as u32;
                if zones.wp[z as usize] > 0 {
                    zones.wp[z as usize] = g.zone_capacity;
                }
                m.submit(now, &TimedCmd::Finish { zones: &[z] })
            }
            _ => {
                let src = (arg % u64::from(g.zone_count)) as u32;
                let len = blocks.min(zones.wp[src as usize]);
                match (len > 0, zones.writable(arg / 3, len)) {
                    (true, Some(z)) if z != src => {
                        let dest = start(z) + zones.wp[z as usize];
                        zones.wp[z as usize] += len;
                        let sources = [CopyRange {
                            lba: start(src),
                            blocks: len,
                        }];
                        let cmd = TimedCmd::Copy {
                            sources: &sources,
                            dest,
                            fua: false,
                        };
                        m.submit(now, &cmd)
                    }
                    _ => m.submit(now, &TimedCmd::Admin),
                }
            }
        };
        assert!(done >= now, "completion {done} before submission {now}");
        last_done = last_done.max(done);
    }
    (m, h2d, d2h, now, last_done)
}

fn all_disjoint(m: &ZonedTiming) -> Result<(), String> {
    let f = m.flash();
    for d in 0..f.die_count() {
        if !disjoint(f.die_trace(d)) {
            return Err(format!("die {d} ran two operations at once"));
        }
    }
    for c in 0..f.channel_count() {
        if !disjoint(f.channel_trace(c)) {
            return Err(format!("channel {c} carried two transfers at once"));
        }
    }
    let (up, down) = m.host_links();
    if !disjoint(up.trace()) || !disjoint(down.trace()) {
        return Err("the host link carried two transfers at once".into());
    }
    Ok(())
}

fn busy_ns(trace: &[Busy]) -> u64 {
    trace.iter().map(|b| b.end_ns - b.start_ns).sum()
}

fn ops() -> impl Strategy<Value = Vec<(u8, u64, u64)>> {
    prop::collection::vec((any::<u8>(), any::<u64>(), 0u64..40_000), 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn resources_never_double_book_and_host_bandwidth_holds(
        ops in ops(),
        which in 0usize..4,
    ) {
        let name = ["zn540", "femu-mlc", "femu-tlc", "znand"][which];
        let p = profile(name);
        let (m, h2d, d2h, first_to_last, last_done) = run(p, &ops);
        if let Err(e) = all_disjoint(&m) {
            return Err(TestCaseError::fail(format!("{name}: {e}")));
        }
        // Host bytes over the whole run never beat the interface's bandwidth.
        let span = last_done.max(first_to_last).max(1) as f64;
        for bytes in [h2d, d2h] {
            let rate = bytes as f64 * 1e9 / span;
            prop_assert!(rate <= p.host_bytes_per_sec as f64 * 1.000_001, "{name}: {rate} B/s");
        }
        // Each direction was busy exactly as long as its bytes take at the interface's rate.
        let (up, down) = m.host_links();
        let xfer = |bytes: u64| transfer_ns(bytes, p.host_bytes_per_sec);
        prop_assert!(busy_ns(up.trace()) >= xfer(h2d).saturating_sub(up.trace().len() as u64));
        prop_assert!(busy_ns(down.trace()) >= xfer(d2h).saturating_sub(down.trace().len() as u64));
        prop_assert_eq!(m.counters().buffer_overcommits, 0);
    }
}

#[test]
fn a_lone_write_costs_submission_controller_transfer_and_completion() {
    let p = timing_profile("zn540").expect("zn540");
    let mut m = ZonedTiming::new(p, geometry(), true).expect("model");
    let w = TimedCmd::Write {
        lba: 0,
        blocks: 1,
        fua: false,
        host_data: true,
    };
    let done = m.submit(1_000, &w);
    let expect = p.submit_ns + p.ctrl_write_ns + transfer_ns(BS, p.host_bytes_per_sec);
    assert_eq!(done - 1_000, expect + p.complete_ns);
    // One 4 KiB block does not fill a unit: nothing is programmed yet.
    assert_eq!(m.counters().flash.programs, 0);
    // A read of that block comes from the buffer: no flash read.
    let r = m.submit(done, &TimedCmd::Read { lba: 0, blocks: 1 });
    assert_eq!(m.counters().flash.reads, 0);
    let expect = p.submit_ns + p.ctrl_read_ns + transfer_ns(BS, p.host_bytes_per_sec);
    assert_eq!(r - done, expect + p.complete_ns);
    // Flush programs the partial unit, padded, and waits for it.
    let f = m.submit(r, &TimedCmd::Flush);
    assert_eq!(m.counters().padded_programs, 1);
    assert!(f - r > p.page_program_ns);
}

#[test]
fn a_read_from_flash_senses_the_page_and_crosses_the_channel() {
    let p = timing_profile("zn540").expect("zn540");
    let mut m = ZonedTiming::new(p, geometry(), false).expect("model");
    m.resync([100u64].into_iter().chain(std::iter::repeat(0)));
    let done = m.submit(0, &TimedCmd::Read { lba: 50, blocks: 1 });
    let expect = p.submit_ns
        + p.ctrl_read_ns
        + p.page_read_ns
        + transfer_ns(BS, p.channel_bytes_per_sec)
        + transfer_ns(BS, p.host_bytes_per_sec)
        + p.complete_ns;
    assert_eq!(done, expect);
    // The ZNS paper's 85 us 4 KiB random read (section 5.1), to the nanosecond.
    assert!((84_990..=85_010).contains(&done), "{done}");
    assert_eq!(m.counters().flash.reads, 1);
}

#[test]
fn a_whole_unit_copied_to_the_same_die_uses_copyback() {
    let p = timing_profile("femu-tlc").expect("femu-tlc");
    let g = geometry();
    let mut m = ZonedTiming::new(p, g, false).expect("model");
    let unit_blocks = p.unit_bytes() / BS;
    let dies = u64::from(p.dies());
    // Zone 0 holds 2 * dies units on flash; zone 1 is empty, its unit 0 on die 0.
    m.resync(
        [2 * dies * unit_blocks]
            .into_iter()
            .chain(std::iter::repeat(0)),
    );
    // Source unit `dies` of zone 0 lives on die 0, as does destination unit 0 of zone 1.
    let sources = [CopyRange {
        lba: dies * unit_blocks,
        blocks: unit_blocks,
    }];
    let cmd = TimedCmd::Copy {
        sources: &sources,
        dest: g.zone_size,
        fua: false,
    };
    m.submit(0, &cmd);
    assert_eq!(m.counters().flash.copybacks, 1);
    assert_eq!(m.counters().flash.reads, 0);
    // Unit 2 of zone 0 sits on die 2, not die 1 where the destination's next unit is.
    let sources = [CopyRange {
        lba: 2 * unit_blocks,
        blocks: unit_blocks,
    }];
    let cmd = TimedCmd::Copy {
        sources: &sources,
        dest: g.zone_size + unit_blocks,
        fua: false,
    };
    m.submit(0, &cmd);
    assert_eq!(m.counters().flash.copybacks, 1);
    assert_eq!(m.counters().flash.reads, 1);
    assert_eq!(m.counters().flash.programs, 1);
}

#[test]
fn reset_erases_the_blocks_the_zone_used() {
    let p = timing_profile("femu-mlc").expect("femu-mlc");
    let g = geometry();
    let mut m = ZonedTiming::new(p, g, false).expect("model");
    let unit_blocks = p.unit_bytes() / BS;
    // Three units written: three dies hold one block each of this zone.
    m.resync([3 * unit_blocks].into_iter().chain(std::iter::repeat(0)));
    let done = m.submit(0, &TimedCmd::Reset { zones: &[0] });
    assert_eq!(m.counters().flash.erases, 3);
    assert_eq!(
        done,
        p.submit_ns + p.ctrl_admin_ns + p.block_erase_ns + p.complete_ns
    );
    // An empty zone has nothing to erase.
    m.submit(done, &TimedCmd::Reset { zones: &[0] });
    assert_eq!(m.counters().flash.erases, 3);
}

#[test]
fn a_copy_senses_each_source_unit_once_however_many_ranges_hit_it() {
    let p = timing_profile("zn540").expect("zn540");
    let g = geometry();
    let mut m = ZonedTiming::new(p, g, false).expect("model");
    let unit_blocks = p.unit_bytes() / BS;
    assert!(unit_blocks >= 8, "the ranges below need 8 blocks in a unit");
    // Zone 0 holds four units on flash; zone 1 is empty.
    m.resync([4 * unit_blocks].into_iter().chain(std::iter::repeat(0)));
    // Three ranges of unit 0 (blocks 0, 2, 4-5) and one of unit 1 (its block 1): the
    // scattered valid blocks of two units, as a collector copies them.
    let sources = [
        CopyRange { lba: 0, blocks: 1 },
        CopyRange { lba: 2, blocks: 1 },
        CopyRange { lba: 4, blocks: 2 },
        CopyRange {
            lba: unit_blocks + 1,
            blocks: 1,
        },
    ];
    let cmd = TimedCmd::Copy {
        sources: &sources,
        dest: g.zone_size,
        fua: false,
    };
    let done = m.submit(0, &cmd);
    let c = m.counters();
    // One sense per source unit, and the channel carries each block once.
    assert_eq!(c.flash.reads, 2);
    let xfer =
        transfer_ns(4 * BS, p.channel_bytes_per_sec) + transfer_ns(BS, p.channel_bytes_per_sec);
    assert_eq!(c.flash.die_busy_ns, 2 * p.page_read_ns + xfer);
    assert_eq!(c.paths.copy_read_program.blocks, 5);
    assert_eq!(
        c.paths.copy_read_program.die_ns,
        2 * p.page_read_ns + xfer + p.page_program_ns * 5 * BS / p.unit_bytes()
    );
    // The destination's partial unit waits in the buffer: the copy ends when the later
    // of the two reads has brought its data to the controller (units 0 and 1 sit on
    // different dies, so both are sensed at once).
    let read0 = p.page_read_ns + transfer_ns(4 * BS, p.channel_bytes_per_sec);
    assert_eq!(done, p.submit_ns + p.ctrl_admin_ns + read0 + p.complete_ns);
}
