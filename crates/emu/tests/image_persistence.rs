//! A file image survives close and reopen with an identical zone report and identical data;
//! creating over an image needs force; a corrupt, truncated, newer or locked image is refused
//! with a clear error and never a panic.

mod common;

use std::os::unix::fs::FileExt;

use common::{block_on, small_geometry};
use emu::image::{self, ImageError};
use emu::{EmuConfig, EmuDevice, EmuError};
use proptest::prelude::*;
use zns::{ReportFilter, SimRng, ZoneAction, ZoneState, ZonedDevice};

async fn random_workload(dev: &EmuDevice, seed: u64) {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let mut rng = SimRng::new(seed);
    for _ in 0..60 {
        let z = rng.below(u64::from(g.zone_count)) as u32;
        let start = g.zone_start(z);
        let d = dev
            .report_zones(start, ReportFilter::All, true, 1)
            .await
            .expect("report")
            .zones[0];
        match rng.below(8) {
            0 => drop(dev.zone_mgmt(ZoneAction::Finish, start, false).await),
            1 => drop(dev.zone_mgmt(ZoneAction::Reset, start, false).await),
            2 => drop(dev.zone_mgmt(ZoneAction::Open, start, false).await),
            3 => drop(dev.zone_mgmt(ZoneAction::Close, start, false).await),
            4 => drop(dev.flush().await),
            _ => {
                let room = (start + g.zone_capacity).saturating_sub(d.wp);
                if room > 0 && !matches!(d.state, ZoneState::Full) {
                    let n = rng.range_inclusive(1, room.min(6)) as usize;
                    let mut data = vec![0u8; n * bs];
                    rng.fill(&mut data);
                    let mut meta = vec![0u8; n * g.oob_size as usize];
                    rng.fill(&mut meta);
                    let _ = dev.write(d.wp, &data, Some(&meta), rng.chance(0.2)).await;
                }
            }
        }
    }
}

async fn snapshot(dev: &EmuDevice) -> (zns::ZoneReport, Vec<u8>, Vec<u8>) {
    let g = dev.geometry();
    let report = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await
        .expect("report");
    let mut data = Vec::new();
    let mut meta = Vec::new();
    for z in 0..g.zone_count {
        let mut d = vec![0u8; (g.zone_size * u64::from(g.block_size)) as usize];
        let mut m = vec![0u8; (g.zone_size * u64::from(g.oob_size)) as usize];
        dev.read(g.zone_start(z), &mut d, Some(&mut m))
            .await
            .expect("read zone");
        data.extend(d);
        meta.extend(m);
    }
    (report, data, meta)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn close_and_reopen_is_identical(seed in any::<u64>()) {
        block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("dev.img");
            let dev = EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), false).expect("create");
            random_workload(&dev, seed).await;
            // What a clean shutdown must preserve: the restart rule applied in place.
            dev.restart().expect("restart");
            let before = snapshot(&dev).await;
            drop(dev);
            assert!(EmuDevice::image_was_clean(&path).expect("inspect"));
            let dev = EmuDevice::open_file(&path, false).expect("reopen");
            let after = snapshot(&dev).await;
            assert_eq!(before.0, after.0, "seed {seed}: zone report changed");
            assert!(before.1 == after.1, "seed {seed}: data changed");
            assert!(before.2 == after.2, "seed {seed}: metadata changed");
        });
    }
}

#[test]
fn create_refuses_an_existing_file_without_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    std::fs::write(&path, b"precious").expect("write");
    let err = EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), false).err();
    assert!(matches!(err, Some(EmuError::Exists(_))), "{err:?}");
    assert_eq!(std::fs::read(&path).expect("read"), b"precious");
    let dev = EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), true)
        .expect("forced create");
    drop(dev);
    assert!(EmuDevice::open_file(&path, false).is_ok());
}

fn corrupt(path: &std::path::Path, offset: u64, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.write_all_at(bytes, offset).expect("write");
}

#[test]
fn damaged_images_are_refused_with_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let fresh = || {
        drop(EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), true).expect("create"))
    };
    let open_err = || {
        EmuDevice::open_file(&path, false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };

    fresh();
    corrupt(&path, 0, b"NOTANIMG");
    assert!(open_err().contains("bad magic"), "{}", open_err());

    fresh();
    corrupt(&path, 20, &[0xff]);
    assert!(open_err().contains("checksum"), "{}", open_err());

    fresh();
    let table_entry_3 = image::SUPERBLOCK_BYTES + 3 * image::ZONE_ENTRY_BYTES as u64;
    corrupt(&path, table_entry_3 + 9, &[0x55]);
    assert!(open_err().contains("zone table entry 3"), "{}", open_err());

    fresh();
    let len = std::fs::metadata(&path).expect("stat").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open")
        .set_len(len / 2)
        .expect("truncate");
    assert!(open_err().contains("truncated"), "{}", open_err());

    std::fs::write(&path, b"").expect("empty");
    assert!(open_err().contains("truncated"), "{}", open_err());
}

#[test]
fn a_newer_format_version_is_refused() {
    let mut sb = image::encode_superblock(&image::Superblock {
        geometry: small_geometry(),
        volatile_cache: true,
        clean: true,
        seed: 0,
        zns_plus: false,
        lba_plugging: false,
    });
    let newer = image::VERSION + 1;
    sb[8..12].copy_from_slice(&newer.to_le_bytes());
    let crc = crc32c::crc32c(&sb[..124]);
    sb[124..128].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        image::decode_superblock(&sb),
        Err(ImageError::NewerVersion(newer))
    );
}

#[test]
fn an_image_in_use_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev =
        EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), false).expect("create");
    let second = EmuDevice::open_file(&path, false)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(second.contains("in use"), "{second}");
    drop(dev);
    assert!(EmuDevice::open_file(&path, false).is_ok());
}

#[test]
fn fault_states_persist_in_the_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev =
        EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), false).expect("create");
    block_on(dev.write(32, &[9u8; 512], None, false)).expect("write");
    dev.set_zone_state(1, ZoneState::ReadOnly).expect("fault");
    dev.set_zone_state(2, ZoneState::Offline).expect("fault");
    dev.kill();
    let dev = EmuDevice::open_file(&path, false).expect("reopen");
    let r = block_on(dev.report_zones(0, ReportFilter::All, false, 3)).expect("report");
    assert_eq!(r.zones[1].state, ZoneState::ReadOnly);
    assert_eq!(r.zones[2].state, ZoneState::Offline);
    // A fault freezes the zone as it is: the unflushed block written before it is kept.
    assert_eq!(r.zones[1].wp, 33);
}

#[test]
fn an_image_with_another_geometry_is_refused_when_one_is_expected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    drop(EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), false).expect("create"));
    let expected = zns::Geometry {
        zone_capacity: 20,
        ..small_geometry()
    };
    let err = EmuDevice::open_file_expecting(&path, &expected, false)
        .err()
        .map(|e| e.to_string());
    let err = err.unwrap_or_default();
    assert!(
        err.contains("zone capacity (expected 20, found 24)"),
        "{err}"
    );
    assert!(EmuDevice::open_file_expecting(&path, &small_geometry(), false).is_ok());
}
