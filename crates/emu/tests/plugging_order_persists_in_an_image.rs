//! The plugging order chosen when a ZNS+ image is created (`EmuConfig::plug_order`, the
//! superblock's flag, docs/FORMAT.md) comes back when the image is opened again, and the
//! timing model enabled on the reopened device plugs in that order: PPA-ordered plugging
//! copies a fully valid chunk ahead of the write pointer in idle chip time, LBA-ordered
//! plugging never does. A plain image records no order.

mod common;

use std::path::Path;
use std::time::Duration;

use emu::timing::PlugOrder;
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use zns::{Geometry, ValidBitmap, ZonedDevice};

const ZONE: u64 = 512;

fn geometry() -> Geometry {
    common::znsplus_geometry(4, ZONE)
}

/// Creates an image with `order`, shuts it down, reopens it with timing (virtual clock),
/// TL-opens a full zone 0 with chunk 1 valid and lets the chips idle; returns the order the
/// reopened image reports and the bytes plugged ahead in idle time.
fn reopened_plugs_ahead(path: &Path, order: PlugOrder) -> (PlugOrder, u64) {
    let cfg = EmuConfig {
        zns_plus: true,
        plug_order: order,
        ..EmuConfig::new(geometry())
    };
    let dev = EmuDevice::create_file(path, cfg, true).expect("create");
    dev.shutdown().expect("shutdown");
    drop(dev);
    SimRuntime::new().expect("runtime").block_on(async {
        let p = emu::timing::timing_profile("femu-mlc").expect("femu-mlc");
        let dev = EmuDevice::open_file(path, false)
            .and_then(|d| d.with_timing(p, ClockMode::Virtual))
            .expect("reopen with timing");
        let old = vec![0x5Au8; 64 * 4096];
        for at in (0..ZONE).step_by(64) {
            dev.write(at, &old, None, false).await.expect("fill");
        }
        dev.flush().await.expect("flush");
        let mut map = ValidBitmap::empty(ZONE);
        for b in 4..8 {
            map.set(b, true);
        }
        dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
        tokio::time::sleep(Duration::from_millis(5)).await;
        dev.flush().await.expect("a command after the idle time");
        let ahead = dev.timing_counters().expect("timed").plugged_idle_bytes;
        (dev.config().plug_order, ahead)
    })
}

#[test]
fn the_order_chosen_at_create_comes_back_and_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plus.img");
    let (order, ahead) = reopened_plugs_ahead(&path, PlugOrder::Lba);
    assert_eq!((order, ahead), (PlugOrder::Lba, 0));
    let (order, ahead) = reopened_plugs_ahead(&path, PlugOrder::Ppa);
    assert_eq!(order, PlugOrder::Ppa);
    assert_eq!(ahead, 4 * 4096, "chunk 1 goes ahead in idle time");
}

#[test]
fn a_plain_image_records_no_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plain.img");
    let cfg = EmuConfig {
        plug_order: PlugOrder::Lba,
        ..EmuConfig::new(geometry())
    };
    EmuDevice::create_file(&path, cfg, true)
        .and_then(|d| d.shutdown())
        .expect("create");
    let dev = EmuDevice::open_file(&path, false).expect("reopen");
    assert!(!dev.config().zns_plus);
    assert_eq!(dev.config().plug_order, PlugOrder::Ppa, "the default");
}
