//! ZNS+ on the timing model (femu-mlc, ZNS+ Table 2), in virtual time: zone_compaction of
//! whole chunks to the same chip is a copyback and beats a copy that moves every chunk to
//! another chip; TL_open's LBA-ordered plugging copies fully valid chunks by copyback and
//! merges partly valid ones; the counters (copyback ratio, plugged bytes, chip utilisation)
//! say so, and `identify_mapping` agrees with where the model put the chunks.

mod common;

use emu::{EmuDevice, SimRuntime};
use tokio::time::Instant;
use zns::{CompactionExtent, ValidBitmap, ZonedDevice};

const ZONE: u64 = 512;

fn device() -> EmuDevice {
    common::timed_znsplus(8, ZONE)
}

/// Fills zone 0 and flushes, so its data is on flash.
async fn fill_zone_0(dev: &EmuDevice) {
    let data = vec![0x5Au8; 64 * 4096];
    for at in (0..ZONE).step_by(64) {
        dev.write(at, &data, None, false).await.expect("fill");
    }
    dev.flush().await.expect("flush");
}

/// Runs one compaction of 64 blocks from `src` to the start of zone 1 on a fresh device,
/// then a Flush (a read-and-program copy completes once its data is in the write buffer;
/// the Flush waits for the programs); returns (virtual ns both took, copybacks,
/// read-and-program units, die busy ns).
fn compaction(src: u64) -> (u64, u64, u64, u64) {
    SimRuntime::new().expect("runtime").block_on(async move {
        let dev = device();
        fill_zone_0(&dev).await;
        let before = dev.timing_counters().expect("timed");
        let t0 = Instant::now();
        let e = CompactionExtent {
            src,
            dst: ZONE,
            blocks: 64,
        };
        dev.zone_compaction(&[e]).await.expect("compaction");
        dev.flush().await.expect("flush");
        let ns = t0.elapsed().as_nanos() as u64;
        let c = dev.timing_counters().expect("timed");
        (
            ns,
            c.flash.copybacks - before.flash.copybacks,
            c.copied_units_read_program - before.copied_units_read_program,
            c.flash.die_busy_ns - before.flash.die_busy_ns,
        )
    })
}

#[test]
fn whole_chunks_to_the_same_chip_are_copybacks() {
    let dev = device();
    let m = dev.identify_mapping().expect("ZNS+ mapping");
    assert_eq!((m.chunk_blocks, m.zone_chips, m.chip_groups), (4, 16, 1));
    let g = dev.geometry();
    // Same offset in another zone: same chip. One chunk further: another chip.
    assert_eq!(m.chip_of(&g, 0), m.chip_of(&g, ZONE));
    assert_ne!(m.chip_of(&g, 4), m.chip_of(&g, ZONE));
    let (same_ns, same_cb, same_rp, same_busy) = compaction(0);
    let (moved_ns, moved_cb, moved_rp, moved_busy) = compaction(4);
    assert_eq!(
        (same_cb, same_rp),
        (16, 0),
        "aligned chunks on their own chip"
    );
    assert_eq!(
        (moved_cb, moved_rp),
        (0, 16),
        "every chunk moved to another chip"
    );
    assert!(
        same_ns < moved_ns,
        "copyback compaction took {same_ns} ns, read and program {moved_ns} ns"
    );
    assert!(
        same_busy < moved_busy,
        "copyback kept the dies busy {same_busy} ns, read and program {moved_busy} ns"
    );
}

#[test]
fn plugging_copies_valid_chunks_by_copyback_and_merges_partial_ones() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device();
        fill_zone_0(&dev).await;
        // Chunks 1 and 2 (blocks 4..12) fully valid, block 13 of chunk 3 valid alone.
        let mut map = ValidBitmap::empty(ZONE);
        for b in (4..12).chain([13]) {
            map.set(b, true);
        }
        dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
        let before = dev.timing_counters().expect("timed");
        let data = vec![0xA5u8; 4 * 4096];
        dev.write(0, &data, None, false).await.expect("chunk 0");
        dev.write(12, &data[..4096], None, false)
            .await
            .expect("block 12");
        let c = dev.timing_counters().expect("timed");
        assert_eq!(c.plugged_bytes - before.plugged_bytes, 9 * 4096);
        assert_eq!(c.flash.copybacks - before.flash.copybacks, 2);
        assert_eq!(
            c.copied_units_read_program - before.copied_units_read_program,
            1
        );
        assert_eq!(dev.stats().blocks_plugged, 9);
        assert!(c.copyback_ratio() > 0.6 && c.copyback_ratio() < 0.7);
        let util = c.chip_utilisation(16);
        assert!(util > 0.0 && util <= 1.0, "chip utilisation {util}");
        // The data is right whatever the timing did.
        let mut buf = vec![0u8; 16 * 4096];
        dev.read(0, &mut buf, None).await.expect("read");
        assert!(buf[..4 * 4096].iter().all(|&b| b == 0xA5));
        assert!(buf[4 * 4096..12 * 4096].iter().all(|&b| b == 0x5A));
        assert!(buf[12 * 4096..13 * 4096].iter().all(|&b| b == 0xA5));
        assert!(buf[13 * 4096..].iter().all(|&b| b == 0x5A));
    });
}

/// One compaction of zone 0's first 64 blocks to the start of zone 1 (every chunk on its own
/// chip), copyback on or off; returns the counters' difference.
fn same_chip_compaction(copyback: bool) -> emu::timing::TimingCounters {
    SimRuntime::new().expect("runtime").block_on(async move {
        let dev = device();
        dev.set_copyback(copyback);
        fill_zone_0(&dev).await;
        let b = dev.timing_counters().expect("timed");
        let e = CompactionExtent {
            src: 0,
            dst: ZONE,
            blocks: 64,
        };
        dev.zone_compaction(&[e]).await.expect("compaction");
        dev.flush().await.expect("flush");
        let c = dev.timing_counters().expect("timed");
        let mut d = c;
        d.flash.copybacks -= b.flash.copybacks;
        d.copied_units_read_program -= b.copied_units_read_program;
        d.paths.copy_copyback = c.paths.copy_copyback.since(&b.paths.copy_copyback);
        d.paths.copy_read_program = c.paths.copy_read_program.since(&b.paths.copy_read_program);
        d
    })
}

#[test]
fn without_copyback_whole_chunks_are_read_and_programmed_and_the_paths_say_so() {
    let p = emu::timing::timing_profile("femu-mlc").expect("profile");
    let on = same_chip_compaction(true);
    assert_eq!((on.flash.copybacks, on.copied_units_read_program), (16, 0));
    assert_eq!(on.paths.copy_copyback.blocks, 64);
    assert_eq!(on.paths.copy_copyback.die_ns, 16 * p.copyback_ns);
    assert_eq!(on.paths.copy_read_program.blocks, 0);
    let off = same_chip_compaction(false);
    assert_eq!(
        (off.flash.copybacks, off.copied_units_read_program),
        (0, 16)
    );
    assert_eq!(off.paths.copy_copyback.blocks, 0);
    assert_eq!(off.paths.copy_read_program.blocks, 64);
    // Each unit: its sensing and transfer, and its whole program.
    let per_unit = off.paths.copy_read_program.die_ns / 16;
    assert!(per_unit > p.page_read_ns + p.page_program_ns, "{per_unit}");
    assert!(per_unit > p.copyback_ns, "a copyback is the faster path");
}

#[test]
fn an_old_block_group_is_erased_once_superseded() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device();
        fill_zone_0(&dev).await;
        let mut map = ValidBitmap::empty(ZONE);
        for b in (4..12).chain([13]) {
            map.set(b, true);
        }
        let erases = |d: &EmuDevice| d.timing_counters().expect("timed").flash.erases;
        let e0 = erases(&dev);
        dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
        // The LogFBG comes pre-erased; the old group still holds the valid blocks.
        assert_eq!(erases(&dev), e0);
        // Write every hole: the zone fills, the device plugging the valid blocks.
        let data = vec![0xA5u8; 64 * 4096];
        dev.write(0, &data[..4 * 4096], None, false)
            .await
            .expect("0");
        dev.write(12, &data[..4096], None, false).await.expect("12");
        let mut at = 14;
        while at < ZONE {
            let n = (ZONE - at).min(64);
            dev.write(at, &data[..(n * 4096) as usize], None, false)
                .await
                .expect("hole");
            at += n;
        }
        dev.flush().await.expect("flush");
        // TL-opened again: the first old group (one block on each of 16 chips) is freed.
        dev.tl_open(0, map.as_bytes()).await.expect("tl_open again");
        assert_eq!(erases(&dev), e0 + 16);
        assert_eq!(dev.timing_counters().expect("timed").old_groups_erased, 1);
        // Reset: the second old group (the first LogFBG) too; the new LogFBG is empty.
        dev.zone_mgmt(zns::ZoneAction::Reset, 0, false)
            .await
            .expect("reset");
        assert_eq!(erases(&dev), e0 + 32);
        assert_eq!(dev.timing_counters().expect("timed").old_groups_erased, 2);
    });
}

/// Chip utilisation counts the die time spent up to the present, not work booked past it: a
/// burst of writes completes into the write buffer (and a Plug is booked without anyone
/// waiting) long before the dies run it, so the die time booked by the last submission can
/// exceed what the dies could have done by then. Before the counters said what was booked
/// ahead, a bench dividing booked time by elapsed time printed utilisations above 100%.
#[test]
fn chip_utilisation_counts_only_die_time_already_spent() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device();
        let before = dev.timing_counters().expect("timed");
        let data = vec![0x11u8; 64 * 4096];
        for at in (0..ZONE).step_by(64) {
            dev.write(at, &data, None, false).await.expect("write");
        }
        let c = dev.timing_counters().expect("timed");
        let span = 16 * (c.now_ns - before.now_ns);
        let booked = c.flash.die_busy_ns - before.flash.die_busy_ns;
        assert!(
            booked > span,
            "the burst booked {booked} ns in {span} die-ns"
        );
        let u = c.chip_utilisation_since(&before, 16);
        assert!(u > 0.0 && u <= 1.0, "chip utilisation {u}");
        assert!(c.die_booked_ahead_ns > 0 && c.die_booked_ahead_ns <= c.flash.die_busy_ns);
        assert!(c.chip_utilisation(16) <= 1.0);
        // Once everything has run, what was booked is what was spent.
        dev.flush().await.expect("flush");
        dev.zone_mgmt(zns::ZoneAction::Open, 2 * ZONE, false)
            .await
            .expect("a later submission (controller time only)");
        let after = dev.timing_counters().expect("timed");
        assert_eq!(after.die_booked_ahead_ns, 0);
        assert_eq!(after.die_done_ns(), after.flash.die_busy_ns);
        let whole = after.chip_utilisation_since(&before, 16);
        let expect = (after.flash.die_busy_ns - before.flash.die_busy_ns) as f64
            / (16 * (after.now_ns - before.now_ns)) as f64;
        assert!(
            (whole - expect).abs() < 1e-12 && whole <= 1.0,
            "{whole} against {expect}"
        );
    });
}
