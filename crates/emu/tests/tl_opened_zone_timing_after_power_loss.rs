//! A TL-opened zone on the timing model (femu-mlc, virtual time) across a power loss and a
//! clean restart: the zone stays TL-opened (docs/ZNSPLUS.md items 52-53), so reading its old
//! data above the write pointer is still a flash read of the old block group, and under
//! PPA-ordered plugging the fully valid chunks above the write pointer still go ahead in idle
//! chip time, including those PP had copied before the cut (its record of them was in
//! controller memory). Under LBA-ordered plugging nothing goes ahead, before or after. The
//! data read back is the same under both orders and every valid block keeps its old data.
//! An image holding a TL-opened zone, reopened with timing, gives the model the same view.
//!
//! Regression: the model's resync after a power loss or restart reset every zone to "data up
//! to the write pointer", forgetting TL-opened zones: their old data read as unwritten (no
//! flash time) and PP stopped for them, so a run with a cut looked faster than one without.
//!
//! Fault model: power loss with the volatile write cache on, nothing else.

mod common;

use std::time::Duration;

use emu::timing::PlugOrder;
use emu::{EmuDevice, SimRuntime};
use zns::{zone_attr, ReportFilter, ValidBitmap, ZonedDevice};

const ZONE: u64 = 512;
const CHUNK: u64 = 4;
const BS: usize = 4096;

/// A bitmap of zone 0 with the chunks `units` fully valid.
fn valid_units(units: &[u64]) -> ValidBitmap {
    let mut map = ValidBitmap::empty(ZONE);
    for &u in units {
        for b in u * CHUNK..(u + 1) * CHUNK {
            map.set(b, true);
        }
    }
    map
}

/// What one run saw: PP's idle-time bytes and flash reads around the cut, and zone 0's data.
struct Seen {
    idle_before_cut: u64,
    idle_after_cut: u64,
    reads_for_old_data: u64,
    data: Vec<u8>,
}

async fn tl_open_then_cut(dev: &EmuDevice, restart: bool) -> Seen {
    let old = vec![0x5Au8; 64 * BS];
    for at in (0..ZONE).step_by(64) {
        dev.write(at, &old, None, false).await.expect("fill");
    }
    dev.flush().await.expect("flush");
    // Chunks 1, 2 and 17 (chips 1, 2 and 1 again) are valid; the rest may be overwritten.
    let map = valid_units(&[1, 2, 17]);
    dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The model books idle-time work at the next submission.
    dev.flush().await.expect("a command after the idle time");
    let idle_before_cut = dev.timing_counters().expect("timed").plugged_idle_bytes;
    // An unflushed write of chunk 0: the cut may keep or lose it.
    let new = vec![0xA5u8; CHUNK as usize * BS];
    dev.write(0, &new, None, false).await.expect("chunk 0");
    if restart {
        dev.restart().expect("restart");
    } else {
        dev.power_loss(7).expect("power loss");
    }
    let d = dev
        .report_zones(0, ReportFilter::All, true, 1)
        .await
        .expect("report")
        .zones[0];
    assert_ne!(
        d.attributes & zone_attr::TLO,
        0,
        "zone 0 is still TL-opened"
    );
    assert!(
        d.wp < 17 * CHUNK,
        "the write pointer {} is below chunk 17",
        d.wp
    );
    // Old data above the write pointer is on flash in the old block group.
    let reads = dev.timing_counters().expect("timed").flash.reads;
    let mut buf = vec![0u8; CHUNK as usize * BS];
    dev.read(64, &mut buf, None).await.expect("read old data");
    assert!(buf.iter().all(|&b| b == 0x5A), "old data above the WP");
    let reads_for_old_data = dev.timing_counters().expect("timed").flash.reads - reads;
    tokio::time::sleep(Duration::from_millis(5)).await;
    dev.flush().await.expect("a command after the idle time");
    let idle_after_cut = dev.timing_counters().expect("timed").plugged_idle_bytes - idle_before_cut;
    // Threaded logging goes on: fill every invalid block up to chunk 18.
    let mut wp = d.wp;
    while wp < 18 * CHUNK {
        dev.write(wp, &new, None, false)
            .await
            .expect("threaded logging");
        wp = map.next_invalid(wp + CHUNK);
    }
    let mut data = vec![0u8; 18 * CHUNK as usize * BS];
    // Two reads: one would exceed the 64-block transfer limit.
    let (low, high) = data.split_at_mut(9 * CHUNK as usize * BS);
    dev.read(0, low, None).await.expect("read chunks 0-8");
    dev.read(9 * CHUNK, high, None)
        .await
        .expect("read chunks 9-17");
    for u in 0..18 {
        let chunk = &data[u * CHUNK as usize * BS..(u + 1) * CHUNK as usize * BS];
        let want = if [1, 2, 17].contains(&u) { 0x5A } else { 0xA5 };
        assert!(chunk.iter().all(|&b| b == want), "chunk {u}");
    }
    Seen {
        idle_before_cut,
        idle_after_cut,
        reads_for_old_data,
        data,
    }
}

fn run(order: PlugOrder, restart: bool) -> Seen {
    SimRuntime::new().expect("runtime").block_on(async move {
        let dev = common::timed_znsplus(8, ZONE);
        dev.set_plug_order(order);
        tl_open_then_cut(&dev, restart).await
    })
}

#[test]
fn old_data_is_read_from_flash_after_the_cut() {
    for order in [PlugOrder::Ppa, PlugOrder::Lba] {
        for restart in [false, true] {
            let s = run(order, restart);
            assert!(
                s.reads_for_old_data >= 1,
                "{order:?}, restart {restart}: old data above the WP read without flash time"
            );
        }
    }
}

#[test]
fn ppa_ordered_plugging_goes_on_after_the_cut() {
    let unit = CHUNK * BS as u64;
    for restart in [false, true] {
        let pp = run(PlugOrder::Ppa, restart);
        assert_eq!(pp.idle_before_cut, 3 * unit, "restart {restart}");
        // Chunk 17 at least lies above the WP after the cut, and goes ahead again.
        assert!(
            pp.idle_after_cut >= unit,
            "restart {restart}: PP stopped after the cut ({} bytes ahead)",
            pp.idle_after_cut
        );
        let lp = run(PlugOrder::Lba, restart);
        assert_eq!((lp.idle_before_cut, lp.idle_after_cut), (0, 0));
        assert_eq!(
            pp.data, lp.data,
            "restart {restart}: the data depends on the order"
        );
    }
}

/// The same view when an image holding a TL-opened zone is opened again and timing enabled:
/// its old data is on flash and PP plugs its valid chunk ahead.
#[test]
fn a_reopened_image_keeps_the_tl_opened_zone_in_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plus.img");
    let g = common::timed_znsplus(8, ZONE).geometry();
    let cfg = emu::EmuConfig {
        zns_plus: true,
        ..emu::EmuConfig::new(g)
    };
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = EmuDevice::create_file(&path, cfg, true).expect("image");
        let old = vec![0x5Au8; 64 * BS];
        for at in (0..ZONE).step_by(64) {
            dev.write(at, &old, None, false).await.expect("fill");
        }
        // Chunks 0 and 1 are plugged at once (the WP passes them); 17 is chip 1's next page.
        let map = valid_units(&[0, 1, 17]);
        dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
        dev.shutdown().expect("shutdown");
    });
    SimRuntime::new().expect("runtime").block_on(async {
        let p = emu::timing::timing_profile("femu-mlc").expect("femu-mlc");
        let dev = EmuDevice::open_file(&path, false)
            .and_then(|d| d.with_timing(p, emu::ClockMode::Virtual))
            .expect("reopen with timing");
        let mut buf = vec![0u8; CHUNK as usize * BS];
        dev.read(64, &mut buf, None).await.expect("read old data");
        assert!(buf.iter().all(|&b| b == 0x5A));
        let c = dev.timing_counters().expect("timed");
        assert!(c.flash.reads >= 1, "old data read without flash time");
        tokio::time::sleep(Duration::from_millis(5)).await;
        dev.flush().await.expect("a command after the idle time");
        let ahead = dev.timing_counters().expect("timed").plugged_idle_bytes;
        assert_eq!(ahead, CHUNK * BS as u64, "chunk 17 goes ahead");
    });
}
