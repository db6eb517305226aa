//! A device the command line names: an emulator image file, or a Linux zoned block device
//! (`/dev/nvme0n2`, `/dev/nullb0`) opened through zlinux. Every command that takes a device
//! path opens it here, so a drive works wherever an image does.
//!
//! Safety rules for drives (docs/DESIGN.md, "Real zoned devices"): a drive is opened O_EXCL,
//! so one that is mounted or held by another process is refused; commands that would erase
//! data on it (zone reset, ftl format, device check) need an explicit --force or
//! --destructive when any zone they touch is not Empty.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use async_trait::async_trait;
use emu::EmuDevice;
use ftl::{MountOptions, WriteMode};
use zlinux::{Capability, LinuxZoned};
use zns::{
    CopyRange, Geometry, Lba, NvmeResult, ReportFilter, ZoneAction, ZoneReport, ZoneState,
    ZonedDevice,
};

use crate::error::CliError;

/// An open device: an emulator image or a real zoned block device.
// A command opens a handful of these and moves each once, so the size of the image variant
// costs nothing worth a box on every access.
#[allow(clippy::large_enum_variant)]
pub enum Opened {
    Image(EmuDevice),
    Drive(LinuxZoned),
}

/// Whether `path` names a block device, or an NVMe namespace's generic character device
/// (/dev/ngXnY, which zlinux opens with its block device): then it is opened as a drive, not
/// as an image.
pub fn is_block_device(path: &Path) -> bool {
    let generic = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| zlinux::nvme::block_device_name(n).is_some())
    };
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_block_device() || (t.is_char_device() && generic(path))
    })
}

/// Opens a drive, with the one-line reason when it cannot be (busy, not zoned, no access).
pub fn open_drive(path: &Path) -> Result<LinuxZoned, CliError> {
    LinuxZoned::open(path).map_err(|e| CliError::Other(format!("cannot open {e}")))
}

impl Opened {
    /// The emulator image, for the commands only an emulator has (faults, power loss,
    /// restart, counters, timing).
    pub fn image(&self) -> Option<&EmuDevice> {
        match self {
            Opened::Image(d) => Some(d),
            Opened::Drive(_) => None,
        }
    }

    pub fn is_drive(&self) -> bool {
        matches!(self, Opened::Drive(_))
    }

    /// The emulator image, or a usage error saying that `what` needs one.
    pub fn require_image(&self, what: &str) -> Result<&EmuDevice, CliError> {
        self.image().ok_or_else(|| {
            CliError::Usage(format!(
                "{what} works on emulator images only, not on a real device"
            ))
        })
    }

    /// Closes the device. An image is shut down cleanly (cache flushed, zones persisted); a
    /// drive stays powered, so closing its file is all there is (its volatile cache is the
    /// drive's, flushed by `flush` or FUA as on any drive).
    pub fn shutdown(&self) -> Result<(), CliError> {
        match self {
            Opened::Image(d) => d.shutdown().map_err(|e| CliError::Other(e.to_string())),
            Opened::Drive(_) => Ok(()),
        }
    }

    /// A failed command's error, with the host I/O error behind it on an image (a Write
    /// Fault alone does not say that the host file system is full).
    pub fn with_host_error(&self, e: CliError) -> CliError {
        match (e, self.image().and_then(EmuDevice::host_error)) {
            (CliError::Device(s), Some(host)) => {
                CliError::Other(format!("{s} (status {:#05x}): {host}", s.code()))
            }
            (e, _) => e,
        }
    }

    /// `o` made to fit what the device can do. A drive without Simple Copy relocates by host
    /// read and write (otherwise garbage collection would fail the volume at its first copy);
    /// Zone Append asked of a drive without it is a usage error naming what is missing.
    pub fn fit_mount_options(&self, mut o: MountOptions) -> Result<MountOptions, CliError> {
        let Opened::Drive(d) = self else {
            return Ok(o);
        };
        if matches!(o.write_mode, WriteMode::ZoneAppend) {
            if let Err(why) = d.supports(Capability::ZoneAppend) {
                return Err(CliError::Usage(format!(
                    "--write-mode append on {}: {why}; use --write-mode write",
                    d.path().display()
                )));
            }
        }
        if o.use_copy && d.supports(Capability::SimpleCopy).is_err() {
            o.use_copy = false;
        }
        Ok(o)
    }

    fn dev(&self) -> &dyn ZonedDevice {
        match self {
            Opened::Image(d) => d,
            Opened::Drive(d) => d,
        }
    }
}

/// The first zone in `zones` (indices) of `dev` that holds data, as "zone 5 is full", or None
/// when each is Empty (or Offline: nothing there can be erased).
pub async fn used_zone_among(
    dev: &dyn ZonedDevice,
    zones: impl Fn(u32) -> bool,
) -> Result<Option<String>, CliError> {
    let r = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await?;
    Ok(r.zones
        .iter()
        .enumerate()
        .filter(|(i, _)| zones(*i as u32))
        .find(|(_, z)| !matches!(z.state, ZoneState::Empty | ZoneState::Offline))
        .map(|(i, z)| format!("zone {i} is {}", z.state.name())))
}

#[async_trait]
impl ZonedDevice for Opened {
    fn geometry(&self) -> Geometry {
        self.dev().geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.dev().read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.dev().write(lba, data, meta, fua).await
    }
    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.dev().append(zslba, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.dev().write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> NvmeResult<()> {
        self.dev().flush().await
    }
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.dev().copy(sources, dest, fua).await
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.dev().zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.dev()
            .report_zones(lba, filter, partial, max_zones)
            .await
    }
    fn die_stripe(&self) -> Option<zns::DieStripe> {
        self.dev().die_stripe()
    }
    fn identify_mapping(&self) -> Option<zns::ChunkMapping> {
        self.dev().identify_mapping()
    }
    async fn zone_compaction(&self, extents: &[zns::CompactionExtent]) -> NvmeResult<()> {
        self.dev().zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        self.dev().tl_open(zslba, valid).await
    }
}
