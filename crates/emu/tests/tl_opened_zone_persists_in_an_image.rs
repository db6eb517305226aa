//! A TL-opened zone (ZNS+, docs/ZNSPLUS.md items 51-53) in a file image: a clean shutdown
//! brings it back open with `TLO`, its WP and its bitmap (the bitmap still refuses writes
//! over valid blocks); a controller restart brings it back Closed with `TLO` even with its WP
//! at the zone start; the image records that the device has ZNS+; an image made without ZNS+
//! keeps the old layout and still refuses the commands; a damaged bitmap slot is refused by
//! name at open.

mod common;

use std::path::Path;

use common::{block_on, small_geometry};
use emu::image::{decode_superblock, Layout};
use emu::{EmuConfig, EmuDevice};
use zns::{
    zone_attr, NvmeStatus, ReportFilter, ValidBitmap, ZoneDescriptor, ZoneState, ZonedDevice,
};

fn create(path: &Path, zns_plus: bool) -> EmuDevice {
    let cfg = EmuConfig {
        zns_plus,
        ..EmuConfig::new(small_geometry())
    };
    EmuDevice::create_file(path, cfg, false).expect("create")
}

fn reopen(path: &Path) -> EmuDevice {
    EmuDevice::open_file(path, false).expect("reopen")
}

async fn zone0(dev: &EmuDevice) -> ZoneDescriptor {
    dev.report_zones(0, ReportFilter::All, true, 1)
        .await
        .expect("report")
        .zones[0]
}

/// Fills zone 0 with blocks of `0x11`, flushes, and TL-opens it with `valid` blocks valid.
async fn tl_open_full_zone(dev: &EmuDevice, valid: &[u64]) -> ValidBitmap {
    let g = small_geometry();
    let data = vec![0x11u8; (g.zone_capacity * u64::from(g.block_size)) as usize];
    dev.write(0, &data, None, true).await.expect("fill");
    let mut map = ValidBitmap::empty(g.zone_capacity);
    for &b in valid {
        map.set(b, true);
    }
    dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
    map
}

#[test]
fn a_clean_shutdown_keeps_the_zone_tl_opened_with_its_bitmap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plus.img");
    block_on(async {
        let g = small_geometry();
        let bs = g.block_size as usize;
        let dev = create(&path, true);
        tl_open_full_zone(&dev, &[2, 3, 6]).await;
        dev.write(0, &vec![0x22u8; 2 * bs], None, false)
            .await
            .expect("threaded logging write");
        assert_eq!(zone0(&dev).await.wp, 4);
        dev.shutdown().expect("shutdown");
        drop(dev);

        let dev = reopen(&path);
        let d = zone0(&dev).await;
        assert_eq!(d.state, ZoneState::ExplicitlyOpened);
        assert_ne!(d.attributes & zone_attr::TLO, 0);
        assert_eq!(d.wp, 4);
        // The bitmap came back: block 6 is still valid, so a write over it is refused.
        assert_eq!(
            dev.write(4, &vec![0x33u8; 3 * bs], None, false).await,
            Err(NvmeStatus::ZoneInvalidWrite)
        );
        dev.write(4, &vec![0x33u8; 2 * bs], None, false)
            .await
            .expect("the invalid run");
        assert_eq!(zone0(&dev).await.wp, 7, "the valid block 6 is plugged");
        let mut buf = vec![0u8; 8 * bs];
        dev.read(0, &mut buf, None).await.expect("read");
        let want: Vec<u8> = [0x22, 0x22, 0x11, 0x11, 0x33, 0x33, 0x11, 0x11]
            .iter()
            .flat_map(|&v| vec![v; bs])
            .collect();
        assert_eq!(buf, want);
    });
}

#[test]
fn a_restart_brings_it_back_closed_even_at_the_zone_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plus.img");
    block_on(async {
        let dev = create(&path, true);
        // Block 0 invalid: the WP stays at the zone start.
        tl_open_full_zone(&dev, &[1, 5]).await;
        assert_eq!(zone0(&dev).await.wp, 0);
        dev.restart().expect("restart");
        dev.shutdown().expect("shutdown");
        drop(dev);
        let dev = reopen(&path);
        let d = zone0(&dev).await;
        assert_eq!((d.state, d.wp), (ZoneState::Closed, 0));
        assert_ne!(d.attributes & zone_attr::TLO, 0);
        // A write re-opens it with the bitmap kept: block 1 is valid.
        let bs = small_geometry().block_size as usize;
        assert_eq!(
            dev.write(0, &vec![0x44u8; 2 * bs], None, false).await,
            Err(NvmeStatus::ZoneInvalidWrite)
        );
        dev.write(0, &vec![0x44u8; bs], None, false)
            .await
            .expect("block 0");
        assert_eq!(zone0(&dev).await.wp, 2);
    });
}

#[test]
fn the_image_records_zns_plus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let with = dir.path().join("plus.img");
    let without = dir.path().join("plain.img");
    let g = small_geometry();
    drop(create(&with, true));
    drop(create(&without, false));
    let sb = |p: &Path| decode_superblock(&std::fs::read(p).expect("read")).expect("superblock");
    assert!(sb(&with).zns_plus);
    assert!(!sb(&without).zns_plus);
    // Without ZNS+ the layout, and so every older image, is as before the bitmap region.
    let len = |p: &Path| std::fs::metadata(p).expect("stat").len();
    assert_eq!(len(&without), Layout::for_geometry(&g).total_bytes);
    assert!(len(&with) > len(&without));
    block_on(async {
        assert!(reopen(&with).chunk_mapping().is_some());
        let plain = reopen(&without);
        assert!(plain.chunk_mapping().is_none());
        assert_eq!(
            plain.tl_open(0, &[0u8; 3]).await,
            Err(NvmeStatus::InvalidOpcode)
        );
    });
}

#[test]
fn a_damaged_bitmap_slot_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plus.img");
    block_on(async {
        let dev = create(&path, true);
        tl_open_full_zone(&dev, &[2]).await;
        dev.shutdown().expect("shutdown");
    });
    let layout = Layout::for_image(&small_geometry(), true);
    let at = layout.tl_slot_offset(0).expect("a ZNS+ layout has slots") as usize + 8;
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[at] ^= 0x80;
    std::fs::write(&path, &bytes).expect("write");
    let err = match EmuDevice::open_file(&path, false) {
        Ok(_) => panic!("a damaged valid bitmap was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("zone table entry 0") && err.contains("valid bitmap"),
        "{err}"
    );
}
