//! The conformance kit's factory for file-backed emulated devices. Restart is a controller
//! restart followed by a real clean shutdown and reopen of the image (a clean shutdown alone
//! keeps open zones open, like a drive that stays powered); power loss cuts power and then
//! kills the process before reopening, so every durability item also proves the image format.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use emu::{EmuConfig, EmuDevice};
use zns::conformance::DeviceFactory;
use zns::{Geometry, ZoneState};

/// Builds devices in image files of one temporary directory; `zns_plus` turns the ZNS+
/// commands on (and the image's valid-bitmap region).
pub struct FileFactory {
    dir: tempfile::TempDir,
    next: AtomicU64,
    zns_plus: bool,
}

impl FileFactory {
    pub fn new(zns_plus: bool) -> FileFactory {
        FileFactory {
            dir: tempfile::tempdir().expect("tempdir"),
            next: AtomicU64::new(0),
            zns_plus,
        }
    }
}

fn path_of(dev: &EmuDevice) -> PathBuf {
    match dev.image_path() {
        Some(p) => p.to_path_buf(),
        None => panic!("a file-backed device has an image path"),
    }
}

fn reopen(path: PathBuf) -> EmuDevice {
    match EmuDevice::open_file(&path, false) {
        Ok(dev) => dev,
        Err(e) => panic!("reopening {} failed: {e}", path.display()),
    }
}

#[async_trait]
impl DeviceFactory for FileFactory {
    type Device = EmuDevice;

    async fn create(&self, geometry: &Geometry) -> EmuDevice {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("dev{n}.img"));
        let cfg = EmuConfig {
            seed: 0x5eed,
            zns_plus: self.zns_plus,
            ..EmuConfig::new(*geometry)
        };
        match EmuDevice::create_file(&path, cfg, false) {
            Ok(dev) => dev,
            Err(e) => panic!("the kit asked for an invalid geometry: {e}"),
        }
    }

    async fn restart(&self, dev: EmuDevice) -> EmuDevice {
        let path = path_of(&dev);
        if let Err(e) = dev.restart() {
            panic!("restart failed: {e}");
        }
        if let Err(e) = dev.shutdown() {
            panic!("shutdown failed: {e}");
        }
        drop(dev);
        reopen(path)
    }

    async fn power_cycle(&self, dev: EmuDevice, seed: u64) -> EmuDevice {
        let path = path_of(&dev);
        if let Err(e) = dev.power_loss(seed) {
            panic!("power loss failed: {e}");
        }
        dev.kill();
        reopen(path)
    }

    async fn set_zone_state(&self, dev: &EmuDevice, zone: u32, state: ZoneState) {
        if let Err(e) = dev.set_zone_state(zone, state) {
            panic!("fault injection failed: {e}");
        }
    }
}
