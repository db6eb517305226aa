//! ZNS+ PPA-ordered plugging (PP) on the timing model (femu-mlc): a fully valid chunk of a
//! TL-opened zone is copied ahead of the write pointer in time its chip is idle, so the
//! host's later programs on that chip do not wait for it (under LBA-ordered plugging they
//! do); on a chip busy with other work nothing goes ahead and the plug waits for the chip
//! when the write pointer passes it. The data a host reads never depends on the policy.

mod common;

use emu::timing::resource::disjoint;
use emu::timing::{timing_profile, PlugOrder, TimedCmd, TimingProfile, ZonedTiming};
use emu::SimRuntime;
use zns::{Geometry, ValidBitmap, ZonedDevice};

const ZONE: u64 = 512;

fn geometry() -> Geometry {
    common::znsplus_geometry(4, ZONE)
}

fn profile() -> TimingProfile {
    timing_profile("femu-mlc").expect("femu-mlc")
}

/// A traced model whose zone 0 is full and on flash at the returned instant.
fn model_with_zone_0_on_flash(order: PlugOrder) -> (ZonedTiming, u64) {
    let mut m = ZonedTiming::new(profile(), geometry(), true).expect("model");
    m.set_plug_order(order);
    for at in (0..ZONE).step_by(64) {
        let w = TimedCmd::Write {
            lba: at,
            blocks: 64,
            fua: false,
            host_data: true,
        };
        m.submit(0, &w);
    }
    let t = m.submit(0, &TimedCmd::Flush);
    (m, t)
}

/// A bitmap of zone 0 with `units` (4-block chunks) fully valid.
fn valid_units(units: &[u64]) -> ValidBitmap {
    let mut map = ValidBitmap::empty(ZONE);
    for &u in units {
        for b in u * 4..(u + 1) * 4 {
            map.set(b, true);
        }
    }
    map
}

fn write(m: &mut ZonedTiming, now: u64, lba: u64, blocks: u64, fua: bool) -> u64 {
    let w = TimedCmd::Write {
        lba,
        blocks,
        fua,
        host_data: true,
    };
    m.submit(now, &w)
}

/// Zone 0 TL-opened at `t` with chunk 1 (on chip 1) valid; at `t + gap_ns` the host writes
/// chunk 0, the write pointer passes chunk 1 (plugged), and the host writes chunks 2..17,
/// chunk 17 being chip 1's next page. Returns when chip 1 has programmed chunk 17, the
/// copybacks booked by the plug of chunk 1, and the model.
fn tl_round(order: PlugOrder, gap_ns: u64) -> (u64, u64, ZonedTiming) {
    let (mut m, t) = model_with_zone_0_on_flash(order);
    let map = valid_units(&[1]);
    m.submit(
        t,
        &TimedCmd::TlOpen {
            zone: 0,
            valid: map.as_bytes(),
        },
    );
    let now = t + gap_ns;
    write(&mut m, now, 0, 4, false);
    let before = m.counters().flash.copybacks;
    m.submit(now, &TimedCmd::Plug { lba: 4, blocks: 4 });
    let plug_copybacks = m.counters().flash.copybacks - before;
    write(&mut m, now, 8, 64, false);
    let end = m.flash().die_trace(1).last().map_or(0, |b| b.end_ns);
    (end, plug_copybacks, m)
}

#[test]
fn a_plug_on_an_idle_chip_costs_the_host_nothing() {
    let p = profile();
    let gap = 10_000_000;
    let (pp_end, pp_plug_cb, pp) = tl_round(PlugOrder::Ppa, gap);
    let (lp_end, lp_plug_cb, lp) = tl_round(PlugOrder::Lba, gap);
    // PP copied chunk 1 while chip 1 idled between the TL_open and the host's writes; the
    // write pointer passing it later books nothing. LP copies it then.
    assert_eq!(pp.counters().plugged_idle_bytes, p.unit_bytes());
    assert_eq!((pp_plug_cb, lp_plug_cb), (0, 1));
    assert_eq!(lp.counters().plugged_idle_bytes, 0);
    assert_eq!(
        pp.counters().plugged_bytes,
        lp.counters().plugged_bytes,
        "both plugged the same blocks"
    );
    // Chip 1's copyback ran before the host's writes came in.
    let copybacks: Vec<_> = pp
        .flash()
        .die_trace(1)
        .iter()
        .filter(|b| b.end_ns - b.start_ns == p.copyback_ns)
        .collect();
    assert_eq!(copybacks.len(), 1);
    assert!(copybacks[0].end_ns <= pp.counters().now_ns);
    assert!(disjoint(pp.flash().die_trace(1)));
    // Chunk 17 (chip 1's next page) waits for the copyback under LP only.
    let t_host = pp_end - p.page_program_ns;
    let after: Vec<_> = pp
        .flash()
        .die_trace(1)
        .iter()
        .filter(|b| b.end_ns > t_host)
        .collect();
    assert_eq!(
        after.len(),
        1,
        "under PP chip 1 does only the host's program then"
    );
    assert!(
        pp_end < lp_end,
        "chip 1 programmed the host's chunk by {pp_end} ns under PP, {lp_end} ns under LP"
    );
}

#[test]
fn a_plug_on_a_busy_chip_waits_for_it() {
    let p = profile();
    let (mut m, t) = model_with_zone_0_on_flash(PlugOrder::Ppa);
    // Zone 1 fills every chip with eight programs from `t` on: chip 1 is busy for ms.
    for at in (ZONE..2 * ZONE).step_by(64) {
        write(&mut m, t, at, 64, false);
    }
    let map = valid_units(&[1]);
    m.submit(
        t,
        &TimedCmd::TlOpen {
            zone: 0,
            valid: map.as_bytes(),
        },
    );
    let now = t + 100_000;
    assert!(now + p.copyback_ns < m.flash().die_trace(1).last().map_or(0, |b| b.end_ns));
    write(&mut m, now, 0, 4, false);
    assert_eq!(m.counters().plugged_idle_bytes, 0, "chip 1 never idled");
    let busy_until = m.flash().die_trace(1).last().map_or(0, |b| b.end_ns);
    m.submit(now, &TimedCmd::Plug { lba: 4, blocks: 4 });
    let c = m.counters();
    assert_eq!(c.flash.copybacks, 1, "plugged on demand by copyback");
    let cb = *m.flash().die_trace(1).last().expect("the copyback");
    assert_eq!(cb.end_ns - cb.start_ns, p.copyback_ns);
    assert!(
        cb.start_ns >= busy_until,
        "the copyback started at {} ns, chip 1 was busy until {busy_until} ns",
        cb.start_ns
    );
}

#[test]
fn ahead_copies_follow_each_chips_page_order() {
    // Chunks 1 and 17 are both on chip 1 (16 chips per zone); 17 may go only after 1, and
    // chunk 2 (chip 2) not at all while chunk 18 (chip 2's next page) is invalid.
    let p = profile();
    let (mut m, t) = model_with_zone_0_on_flash(PlugOrder::Ppa);
    let map = valid_units(&[1, 17, 34]);
    m.submit(
        t,
        &TimedCmd::TlOpen {
            zone: 0,
            valid: map.as_bytes(),
        },
    );
    m.submit(t + 10_000_000, &TimedCmd::Admin);
    // Chunk 34 is chip 2's third page; chunks 2 and 18 under it are invalid and unwritten.
    assert_eq!(m.counters().plugged_idle_bytes, 2 * p.unit_bytes());
    let trace = m.flash().die_trace(1);
    let n = trace.len();
    assert!(trace[n - 1].start_ns >= trace[n - 2].end_ns);
    assert_eq!(trace[n - 1].end_ns - trace[n - 1].start_ns, p.copyback_ns);
}

#[test]
fn data_is_the_same_under_both_plugging_orders() {
    fn run(order: PlugOrder) -> Vec<u8> {
        SimRuntime::new().expect("runtime").block_on(async move {
            let dev = common::timed_znsplus(8, ZONE);
            dev.set_plug_order(order);
            let old = vec![0x5Au8; 64 * 4096];
            for at in (0..ZONE).step_by(64) {
                dev.write(at, &old, None, false).await.expect("fill");
            }
            dev.flush().await.expect("flush");
            let map = valid_units(&[1, 2, 17]);
            dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            let new = vec![0xA5u8; 4 * 4096];
            dev.write(0, &new, None, false).await.expect("chunk 0");
            dev.write(12, &new, None, false).await.expect("chunk 3");
            let mut buf = vec![0u8; 80 * 4096];
            for (i, piece) in buf.chunks_mut(16 * 4096).enumerate() {
                let at = i as u64 * 16;
                dev.read(at, piece, None).await.expect("read");
            }
            let c = dev.timing_counters().expect("timed");
            assert_eq!(c.plugged_bytes, 8 * 4096);
            let ahead = if order == PlugOrder::Ppa { 3 } else { 0 };
            assert_eq!(c.plugged_idle_bytes, ahead * 4 * 4096);
            buf
        })
    }
    let pp = run(PlugOrder::Ppa);
    assert_eq!(pp, run(PlugOrder::Lba));
    assert!(pp[..4 * 4096].iter().all(|&b| b == 0xA5));
    assert!(pp[4 * 4096..12 * 4096].iter().all(|&b| b == 0x5A));
    assert!(pp[12 * 4096..16 * 4096].iter().all(|&b| b == 0xA5));
    assert!(pp[16 * 4096..].iter().all(|&b| b == 0x5A));
}
