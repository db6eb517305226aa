//! A read at or above a TL-opened zone's write pointer returns the zone's old data (ZNS+
//! item 50), so on the timing model (femu-mlc, virtual time) it senses the old block group
//! on flash, as a read of the same blocks before the TL_open did; a read above an Empty
//! zone's write pointer touches no flash.
//!
//! The bug this guards against: TL_open gave the zone an empty LogFBG in the model and
//! forgot the old block group, so reads of the old data above the write pointer cost no
//! flash time at all.

mod common;

use emu::timing::timing_profile;
use emu::{EmuDevice, SimRuntime};
use tokio::time::Instant;
use zns::{ValidBitmap, ZonedDevice};

const ZONE: u64 = 512;

fn device() -> EmuDevice {
    common::timed_znsplus(4, ZONE)
}

/// Virtual ns of a 4-block read at `lba`.
async fn read_ns(dev: &EmuDevice, lba: u64) -> u64 {
    let mut buf = vec![0u8; 4 * 4096];
    let t0 = Instant::now();
    dev.read(lba, &mut buf, None).await.expect("read");
    t0.elapsed().as_nanos() as u64
}

#[test]
fn old_data_above_the_write_pointer_is_read_from_flash() {
    let page_read_ns = timing_profile("femu-mlc").expect("femu-mlc").page_read_ns;
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device();
        let data = vec![0x5Au8; 64 * 4096];
        for at in (0..ZONE).step_by(64) {
            dev.write(at, &data, None, false).await.expect("fill");
        }
        dev.flush().await.expect("flush");
        let before = read_ns(&dev, 256).await;
        let empty_zone = read_ns(&dev, ZONE + 256).await;
        // Nothing valid: the WP goes back to the zone start, every old block above it.
        dev.tl_open(0, ValidBitmap::empty(ZONE).as_bytes())
            .await
            .expect("tl_open");
        let after = read_ns(&dev, 256).await;
        assert!(
            before >= page_read_ns,
            "a read of flushed data took {before} ns"
        );
        assert!(
            empty_zone < page_read_ns,
            "a read of an empty zone took {empty_zone} ns"
        );
        assert_eq!(
            after, before,
            "old data above the WP costs what it cost before"
        );
    });
}
