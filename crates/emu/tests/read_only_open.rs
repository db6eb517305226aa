//! An image opened read-only (O_RDONLY, shared lock) serves reads and Report Zones, refuses
//! every change with Namespace is Write Protected, and never writes the file, so read-only
//! commands work on a read-only file or mount.

mod common;

use common::{block, block_on, small_geometry};
use emu::{EmuConfig, EmuDevice, EmuError};
use zns::{NvmeStatus, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

#[test]
fn a_read_only_device_reads_and_refuses_every_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ro.img");
    let bs = small_geometry().block_size as usize;
    block_on(async {
        let dev =
            EmuDevice::create_file(&path, EmuConfig::new(small_geometry()), false).expect("create");
        dev.write(0, &block(bs, 0, 1), None, false)
            .await
            .expect("write");
        dev.shutdown().expect("shutdown");
    });
    let before = std::fs::read(&path).expect("read image");
    // Regression: read-only commands opened the image O_RDWR and failed on a read-only
    // file or mount. Root ignores permission bits, so the mode alone is no proof here: the
    // device must also work with a second reader holding the shared lock.
    let mut perms = std::fs::metadata(&path).expect("stat").permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).expect("chmod 0444");
    let other_reader = EmuDevice::open_file_read_only(&path).expect("first reader");
    block_on(async {
        let dev = EmuDevice::open_file_read_only(&path).expect("second reader");
        assert!(dev.is_read_only());
        let mut buf = vec![0u8; bs];
        dev.read(0, &mut buf, None).await.expect("read");
        assert_eq!(buf, block(bs, 0, 1));
        let report = dev
            .report_zones(0, ReportFilter::All, false, usize::MAX)
            .await
            .expect("report");
        assert_eq!(report.zones[0].wp, 1);
        // A clean shutdown keeps the zone the write opened open, as a powered drive would.
        assert_eq!(report.zones[0].state, ZoneState::ImplicitlyOpened);
        let refused = Err(NvmeStatus::NamespaceWriteProtected);
        assert_eq!(dev.write(1, &block(bs, 1, 1), None, false).await, refused);
        assert_eq!(
            dev.append(0, &block(bs, 1, 1), None, false)
                .await
                .map(|_| ()),
            refused
        );
        assert_eq!(dev.write_zeroes(1, 1, false).await, refused);
        assert_eq!(dev.zone_mgmt(ZoneAction::Reset, 0, false).await, refused);
        assert_eq!(dev.zone_mgmt(ZoneAction::Open, 32, false).await, refused);
        let copy = [zns::CopyRange { lba: 0, blocks: 1 }];
        assert_eq!(dev.copy(&copy, 32, false).await, refused);
        assert!(!NvmeStatus::NamespaceWriteProtected.is_transient());
        dev.flush().await.expect("flush has nothing to do");
        assert!(matches!(dev.power_loss(1), Err(EmuError::ReadOnly(..))));
        assert!(matches!(dev.restart(), Err(EmuError::ReadOnly(..))));
        assert!(matches!(
            dev.set_zone_state(0, ZoneState::Offline),
            Err(EmuError::ReadOnly(..))
        ));
        dev.shutdown().expect("shutdown writes nothing");
    });
    // A writer is refused while a reader holds the image, and the file never changed.
    assert!(EmuDevice::open_file(&path, false).is_err());
    drop(other_reader);
    assert_eq!(std::fs::read(&path).expect("read image"), before);
}
