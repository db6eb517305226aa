//! The ZNS conformance kit against the emulator's file backend. Restart is a real clean
//! shutdown and reopen of the image; power loss cuts power and then kills the process before
//! reopening, so every durability item also proves the image format.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use emu::{EmuConfig, EmuDevice};
use zns::conformance::DeviceFactory;
use zns::{
    CopyRange, Geometry, Lba, NvmeResult, ReportFilter, ZoneAction, ZoneReport, ZoneState,
    ZonedDevice,
};

/// An image-backed device that remembers its path so the factory can reopen it.
struct FileDevice {
    dev: EmuDevice,
    path: PathBuf,
}

struct FileFactory {
    dir: tempfile::TempDir,
    next: AtomicU64,
}

impl FileFactory {
    fn new() -> FileFactory {
        FileFactory {
            dir: tempfile::tempdir().expect("tempdir"),
            next: AtomicU64::new(0),
        }
    }
}

fn reopen(path: PathBuf) -> FileDevice {
    match EmuDevice::open_file(&path, false) {
        Ok(dev) => FileDevice { dev, path },
        Err(e) => panic!("reopening {} failed: {e}", path.display()),
    }
}

#[async_trait]
impl DeviceFactory for FileFactory {
    type Device = FileDevice;

    async fn create(&self, geometry: &Geometry) -> FileDevice {
        let path = self.dir.path().join(format!(
            "dev{}.img",
            self.next.fetch_add(1, Ordering::Relaxed)
        ));
        match EmuDevice::create_file(
            &path,
            EmuConfig {
                seed: 0x5eed,
                ..EmuConfig::new(*geometry)
            },
            false,
        ) {
            Ok(dev) => FileDevice { dev, path },
            Err(e) => panic!("the kit asked for an invalid geometry: {e}"),
        }
    }

    async fn restart(&self, d: FileDevice) -> FileDevice {
        let FileDevice { dev, path } = d;
        if let Err(e) = dev.shutdown() {
            panic!("shutdown failed: {e}");
        }
        drop(dev);
        reopen(path)
    }

    async fn power_cycle(&self, d: FileDevice, seed: u64) -> FileDevice {
        let FileDevice { dev, path } = d;
        if let Err(e) = dev.power_loss(seed) {
            panic!("power loss failed: {e}");
        }
        dev.kill();
        reopen(path)
    }

    async fn set_zone_state(&self, d: &FileDevice, zone: u32, state: ZoneState) {
        if let Err(e) = d.dev.set_zone_state(zone, state) {
            panic!("fault injection failed: {e}");
        }
    }
}

#[async_trait]
impl ZonedDevice for FileDevice {
    fn geometry(&self) -> Geometry {
        self.dev.geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.dev.read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.dev.write(lba, data, meta, fua).await
    }
    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.dev.append(zslba, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.dev.write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> NvmeResult<()> {
        self.dev.flush().await
    }
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.dev.copy(sources, dest, fua).await
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.dev.zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.dev.report_zones(lba, filter, partial, max_zones).await
    }
}

zns::conformance_tests!(FileFactory::new());
