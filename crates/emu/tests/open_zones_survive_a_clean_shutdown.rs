//! An image behaves like a drive that stays powered between opens: zones left open by a
//! clean shutdown (explicitly or implicitly) are open after the next open, holding the same
//! open and active resources, while a process killed at any instant still leaves an image
//! that reopens as after a power loss (the restart form).

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;

use common::{block_on, small_geometry};
use emu::image;
use emu::{EmuConfig, EmuDevice};
use zns::{NvmeStatus, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

fn create(path: &Path) -> EmuDevice {
    EmuDevice::create_file(path, EmuConfig::new(small_geometry()), false).expect("create")
}

fn open(path: &Path) -> EmuDevice {
    EmuDevice::open_file(path, false).expect("reopen")
}

fn states(dev: &EmuDevice) -> Vec<(ZoneState, u64)> {
    let r = block_on(dev.report_zones(0, ReportFilter::All, false, usize::MAX)).expect("report");
    r.zones.iter().map(|d| (d.state, d.wp)).collect()
}

fn mgmt(dev: &EmuDevice, action: ZoneAction, zone: u32) -> Result<(), NvmeStatus> {
    let start = dev.geometry().zone_start(zone);
    block_on(dev.zone_mgmt(action, start, false)).map(drop)
}

fn write_one(dev: &EmuDevice, lba: u64) -> Result<(), NvmeStatus> {
    block_on(dev.write(lba, &[7u8; 512], None, false))
}

// The bug this guards against: every open of an image applied the restart rule, so
// `zone open --zone 2` then `zone close --zone 2` as two commands failed with Invalid Zone
// State Transition (zone 2 came back Empty), and `zone open --all` seemed to do nothing.
#[test]
fn open_zones_are_open_after_a_clean_shutdown_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev = create(&path);
    mgmt(&dev, ZoneAction::Open, 2).expect("open zone 2");
    write_one(&dev, 3 * 32).expect("write zone 3");
    drop(dev);

    let dev = open(&path);
    let s = states(&dev);
    assert_eq!(s[2], (ZoneState::ExplicitlyOpened, 64));
    // The write was never flushed; the clean shutdown flushed it.
    assert_eq!(s[3], (ZoneState::ImplicitlyOpened, 97));
    mgmt(&dev, ZoneAction::Close, 2).expect("close zone 2 in a later open");
    drop(dev);

    let dev = open(&path);
    let s = states(&dev);
    assert_eq!(s[2], (ZoneState::Closed, 64));
    assert_eq!(s[3], (ZoneState::ImplicitlyOpened, 97));
}

#[test]
fn resources_and_open_order_come_back_with_the_zones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev = create(&path);
    // Max open 3, max active 4: zone 1 explicitly, then zones 4 and 3 implicitly, in that
    // order.
    mgmt(&dev, ZoneAction::Open, 1).expect("open");
    write_one(&dev, 4 * 32).expect("write zone 4");
    write_one(&dev, 3 * 32).expect("write zone 3");
    drop(dev);

    let dev = open(&path);
    // A fourth active zone needs an open slot: the device closes the implicitly opened zone
    // opened longest ago (4), never the explicitly opened one.
    write_one(&dev, 5 * 32).expect("write zone 5");
    let s = states(&dev);
    assert_eq!(s[1].0, ZoneState::ExplicitlyOpened);
    assert_eq!(s[4].0, ZoneState::Closed);
    assert_eq!(s[3].0, ZoneState::ImplicitlyOpened);
    assert_eq!(s[5].0, ZoneState::ImplicitlyOpened);
    // Four zones are active now: a fifth is refused, so the active count came back too.
    assert_eq!(write_one(&dev, 6 * 32), Err(NvmeStatus::TooManyActiveZones));
}

#[test]
fn a_killed_process_still_leaves_the_restart_form() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev = create(&path);
    mgmt(&dev, ZoneAction::Open, 2).expect("open zone 2");
    write_one(&dev, 3 * 32).expect("write zone 3");
    dev.kill();
    let s = states(&open(&path));
    assert_eq!(s[2], (ZoneState::Empty, 64));
    assert_eq!(
        s[3],
        (ZoneState::Empty, 96),
        "an unflushed write survived a kill"
    );
}

// The subtle case: a clean shutdown recorded zones as open, then the next process was killed
// before its own clean shutdown. The recorded open states must not come back.
#[test]
fn a_kill_after_a_clean_open_applies_the_restart_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev = create(&path);
    mgmt(&dev, ZoneAction::Open, 2).expect("open zone 2");
    write_one(&dev, 3 * 32).expect("write zone 3");
    drop(dev);
    let dev = open(&path);
    assert_eq!(states(&dev)[2].0, ZoneState::ExplicitlyOpened);
    dev.kill();
    let s = states(&open(&path));
    assert_eq!(s[2], (ZoneState::Empty, 64));
    assert_eq!(
        s[3],
        (ZoneState::Closed, 97),
        "the flushed write is durable"
    );
}

#[test]
fn restart_and_power_loss_close_the_zones_only_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev = create(&path);
    mgmt(&dev, ZoneAction::Open, 2).expect("open zone 2");
    write_one(&dev, 3 * 32).expect("write zone 3");
    dev.restart().expect("restart");
    drop(dev);
    let s = states(&open(&path));
    assert_eq!(s[2], (ZoneState::Empty, 64));
    assert_eq!(s[3], (ZoneState::Closed, 97));

    let dev = open(&path);
    mgmt(&dev, ZoneAction::Open, 3).expect("open zone 3");
    dev.power_loss(7).expect("power loss");
    drop(dev);
    assert_eq!(states(&open(&path))[3], (ZoneState::Closed, 97));
}

#[test]
fn a_version_1_image_opens_and_is_written_as_the_current_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let dev = create(&path);
    write_one(&dev, 32).expect("write zone 1");
    dev.restart().expect("restart");
    drop(dev);
    // Make it a version 1 image: the same bytes with the old version number.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open file");
    let mut sb = vec![0u8; 4096];
    file.read_exact_at(&mut sb, 0).expect("read superblock");
    sb[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&sb[..124]);
    sb[124..128].copy_from_slice(&crc.to_le_bytes());
    file.write_all_at(&sb, 0).expect("write superblock");
    drop(file);

    let dev = open(&path);
    assert_eq!(states(&dev)[1], (ZoneState::Closed, 33));
    drop(dev);
    let bytes = std::fs::read(&path).expect("read image");
    assert_eq!(bytes[8..12], image::VERSION.to_le_bytes());
    assert_eq!(image::VERSION, 2);
}
