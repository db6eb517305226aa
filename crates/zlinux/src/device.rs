//! `LinuxZoned`: the `ZonedDevice` on a Linux zoned block device.
//!
//! Fault model: the kernel and the drive report errors; this layer maps each to the NVMe
//! status the drive most likely returned (crate::errno) and never retries. Host-side checks
//! (range, alignment, size limits, zone boundaries) run before a command is issued, because
//! the block layer would otherwise split a write that spans two zones into two writes that
//! can both succeed, where a ZNS drive fails the command whole.
//!
//! Durability: as the trait says. Writes complete into the drive's volatile cache unless
//! FUA (RWF_DSYNC); flush is fdatasync, which the block layer sends as an NVMe Flush.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use zns::{
    check_range, CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction,
    ZoneDescriptor, ZoneReport, ZoneState, ZonedDevice,
};

use crate::buf::AlignedBuf;
use crate::copy;
use crate::errno::{diagnose_read, diagnose_write, status_of, Op};
use crate::ioctl::{self, Mgmt};
use crate::known::DeviceTraits;
use crate::nvme::{completion, copy_descriptors, Completion, CopyLimits, NvmeCmd};
use crate::passthru::Passthru;
use crate::report::{self, ReportError, SECTOR_BYTES};
use crate::ring::{Cmd, Done, Ring};
use crate::sysfs::{self, SysfsError};

/// Commands in flight on the ring, and queued behind it at most.
pub const QUEUE_DEPTH: u32 = 64;
/// Zones asked for per BLKREPORTZONE call.
const REPORT_CHUNK_ZONES: u32 = 1024;

/// ZNS features the block device interface does not carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    ZoneAppend,
    SimpleCopy,
    Metadata,
    ZoneOffline,
}

impl Capability {
    /// What is missing, and what would provide it; one line for users.
    pub fn missing(self) -> &'static str {
        match self {
            Capability::ZoneAppend => "Zone Append needs NVMe passthrough (IORING_OP_URING_CMD on /dev/ngXnY), which this device does not offer; the block device interface offers no append to user space",
            Capability::SimpleCopy => "Simple Copy needs NVMe passthrough (/dev/ngXnY) to a namespace whose controller supports the Copy command",
            Capability::Metadata => "per-block metadata needs NVMe passthrough (/dev/ngXnY) to a namespace formatted with metadata in a separate buffer",
            Capability::ZoneOffline => "the Offline zone action has no block layer ioctl; it needs NVMe passthrough (/dev/ngXnY)",
        }
    }
}

/// The kernel's name of the block device numbered `rdev`, from sysfs.
fn kernel_name(rdev: u64) -> Result<String, String> {
    let link = format!("/sys/dev/block/{}:{}", libc::major(rdev), libc::minor(rdev));
    let target = std::fs::read_link(&link).map_err(|e| format!("{link}: {e}"))?;
    target
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| format!("{link}: no device name"))
}

/// `geo` with `oob_size` bytes of metadata per block, and its transfer and append limits cut
/// to `max_bytes` of metadata per command where the controller needs that.
fn with_metadata(geo: Geometry, oob_size: u32, max_bytes: Option<u32>) -> Geometry {
    let cap = max_bytes.map_or(u32::MAX, |m| (m / oob_size.max(1)).max(1));
    let mdts_blocks = geo.mdts_blocks.min(cap);
    Geometry {
        oob_size,
        mdts_blocks,
        zasl_blocks: geo.zasl_blocks.min(mdts_blocks),
        ..geo
    }
}

/// `geo` with the Copy limits of `limits`, or why they do not fit a valid geometry.
fn with_copy_limits(geo: Geometry, limits: &CopyLimits) -> Result<Geometry, String> {
    let g = Geometry {
        copy_max_ranges: limits.max_ranges,
        copy_max_range_blocks: limits.max_range_blocks,
        copy_max_blocks: limits.max_blocks,
        ..geo
    };
    g.validate()
        .map_err(|e| format!("the namespace's Copy limits are not usable: {e}"))?;
    Ok(g)
}

/// Why a device could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: not a block device (zonestack opens emulator images with --image)")]
    NotBlockDevice(PathBuf),
    #[error("{0}: device is busy: it is mounted or held exclusively by another process (unmount it or stop that process)")]
    Busy(PathBuf),
    #[error("{path}: {source}")]
    Sysfs { path: PathBuf, source: SysfsError },
    #[error("{path}: zone report: {source}")]
    Report { path: PathBuf, source: ReportError },
    #[error("{path}: zone report ioctl failed: {}", std::io::Error::from_raw_os_error(*.errno))]
    ReportIoctl { path: PathBuf, errno: i32 },
    #[error("{path}: cannot start io_uring: {source}")]
    Ring {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A Linux zoned block device.
pub struct LinuxZoned {
    path: PathBuf,
    file: Arc<File>,
    geo: Geometry,
    ring: Ring,
    queued: Semaphore,
    /// NVMe passthrough, or why there is none.
    passthru: Result<Passthru, String>,
    /// The kernel's name of the device (nvme0n2, nullb0), whatever path opened it; empty
    /// when sysfs did not say.
    name: String,
}

impl LinuxZoned {
    /// Opens `path` read-write, O_DIRECT and O_EXCL: the kernel refuses the exclusive open
    /// while the device is mounted or another process holds it exclusively.
    pub fn open(path: &Path) -> Result<LinuxZoned, OpenError> {
        let io = |source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        };
        let block = block_device_of(path)?;
        let meta = std::fs::metadata(&block).map_err(io)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_EXCL | libc::O_CLOEXEC)
            .open(&block)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EBUSY) => OpenError::Busy(path.to_path_buf()),
                _ => io(e),
            })?;
        let rdev = meta.rdev();
        let limits = sysfs::read_queue(libc::major(rdev), libc::minor(rdev)).map_err(|source| {
            OpenError::Sysfs {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let fd = file.as_raw_fd();
        let capacity = uniform_capacity(fd, &limits, path)?;
        let geo = limits
            .geometry(capacity)
            .map_err(|source| OpenError::Sysfs {
                path: path.to_path_buf(),
                source,
            })?;
        let ring = Ring::start(fd, QUEUE_DEPTH).map_err(|source| OpenError::Ring {
            path: path.to_path_buf(),
            source,
        })?;
        let name = kernel_name(rdev);
        let mut passthru = Passthru::open(&name, geo.block_size, QUEUE_DEPTH);
        // The geometry carries the drive's Copy limits only when copies can be sent; else the
        // smallest valid ones (sysfs.rs) stay.
        let geo = match &mut passthru {
            Ok(pt) => match pt.copy.as_ref().map(|l| with_copy_limits(geo, l)) {
                Ok(Ok(g)) => g,
                Ok(Err(why)) => {
                    pt.copy = Err(why);
                    geo
                }
                Err(_) => geo,
            },
            Err(_) => geo,
        };
        // Per-block metadata is offered only where every read and write can carry it: through
        // passthrough, on a namespace formatted with metadata in a separate buffer. Elsewhere
        // the geometry says 0 bytes and `supports(Capability::Metadata)` says why.
        let geo = match &mut passthru {
            Ok(pt) => match pt.metadata {
                Ok(oob_size) => {
                    let g = with_metadata(geo, oob_size, pt.metadata_max_bytes);
                    match g.validate() {
                        Ok(()) => g,
                        Err(e) => {
                            pt.metadata = Err(format!("the metadata size is not usable: {e}"));
                            geo
                        }
                    }
                }
                Err(_) => geo,
            },
            Err(_) => geo,
        };
        Ok(LinuxZoned {
            path: path.to_path_buf(),
            file: Arc::new(file),
            geo,
            ring,
            queued: Semaphore::new(QUEUE_DEPTH as usize),
            passthru,
            name: name.unwrap_or_default(),
        })
    }

    /// What the device offers that decides which conformance items fail on it
    /// ([`crate::known_kit_failures`]).
    pub fn traits(&self) -> DeviceTraits {
        DeviceTraits {
            append: self.supports(Capability::ZoneAppend).is_ok(),
            copy: self.supports(Capability::SimpleCopy).is_ok(),
            null_blk: self.name.starts_with("nullb"),
            metadata: self.supports(Capability::Metadata).is_ok(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the device offers `cap`: `Err` with the one-line reason when it does not.
    pub fn supports(&self, cap: Capability) -> Result<(), String> {
        let why = match (cap, &self.passthru) {
            (Capability::ZoneAppend, Ok(_)) => return Ok(()),
            (Capability::SimpleCopy, Ok(pt)) => pt.copy.as_ref().err(),
            (Capability::Metadata, Ok(pt)) => pt.metadata.as_ref().err(),
            (Capability::ZoneOffline, _) => return Err(cap.missing().to_string()),
            (_, Err(why)) => Some(why),
        };
        match why {
            None => Ok(()),
            Some(why) => Err(format!("{} ({why})", cap.missing())),
        }
    }

    /// The passthrough that carries every read and write when the namespace has per-block
    /// metadata (the block layer would drop it), or None on a device without metadata.
    fn meta_path(&self) -> Option<&Passthru> {
        match &self.passthru {
            Ok(pt) if self.geo.oob_size > 0 => Some(pt),
            _ => None,
        }
    }

    /// The separate metadata buffer of a command of `blocks` blocks: the caller's bytes, or
    /// zeros (a write without metadata stores zero metadata, and a read without a buffer
    /// still needs one for the drive to fill); None on a device without metadata. A length
    /// other than the metadata size per block is Invalid Field, as on a drive.
    fn meta_buf(&self, blocks: u64, meta: Option<&[u8]>) -> NvmeResult<Option<AlignedBuf>> {
        let oob = self.geo.oob_size as usize;
        if oob == 0 {
            return match meta {
                Some(m) if !m.is_empty() => Err(NvmeStatus::InvalidField),
                _ => Ok(None),
            };
        }
        let len = usize::try_from(blocks)
            .ok()
            .and_then(|b| b.checked_mul(oob))
            .ok_or(NvmeStatus::InvalidField)?;
        let buf = match meta {
            Some(m) if m.len() != len => return Err(NvmeStatus::InvalidField),
            Some(m) => AlignedBuf::copy_of(m),
            None => AlignedBuf::zeroed(len),
        };
        buf.map(Some).ok_or(NvmeStatus::InternalError)
    }

    /// Read with metadata through passthrough: the drive's own status on failure. A read
    /// across zones goes as one command per zone, as the block layer splits reads of the
    /// block device (so `cross_zone_reads` means the same on both paths; a drive without
    /// RAZB fails an unsplit one with Zone Boundary Error).
    async fn read_meta(
        &self,
        pt: &Passthru,
        lba: Lba,
        buf: &mut [u8],
        mut meta: Option<&mut [u8]>,
    ) -> NvmeResult<()> {
        let blocks = self.check_io(lba, buf.len())?;
        let oob = self.geo.oob_size as usize;
        if meta
            .as_ref()
            .is_some_and(|m| m.len() != blocks as usize * oob)
        {
            return Err(NvmeStatus::InvalidField);
        }
        let bs = self.geo.block_size as usize;
        let mut done = 0u64;
        while done < blocks {
            let at = lba + done;
            let zone_end = (at / self.geo.zone_size + 1) * self.geo.zone_size;
            let n = (blocks - done).min(zone_end - at);
            let (d0, d1) = (done as usize * bs, (done + n) as usize * bs);
            let (m0, m1) = (done as usize * oob, (done + n) as usize * oob);
            let part = meta.as_deref_mut().and_then(|m| m.get_mut(m0..m1));
            let out = buf.get_mut(d0..d1).ok_or(NvmeStatus::InternalError)?;
            self.read_meta_one(pt, at, n, out, part).await?;
            done += n;
        }
        Ok(())
    }

    /// One passthrough Read of `blocks` blocks inside one zone into `buf` and `meta`.
    async fn read_meta_one(
        &self,
        pt: &Passthru,
        lba: Lba,
        blocks: u64,
        buf: &mut [u8],
        meta: Option<&mut [u8]>,
    ) -> NvmeResult<()> {
        let mbuf = self.meta_buf(blocks, meta.as_deref())?;
        let mlen = mbuf.as_ref().map_or(0, AlignedBuf::len);
        let data = AlignedBuf::zeroed(buf.len()).ok_or(NvmeStatus::InternalError)?;
        let cmd = NvmeCmd::read_write(
            pt.nsid,
            false,
            lba,
            u32::try_from(blocks).map_err(|_| NvmeStatus::InvalidField)?,
            u32::try_from(buf.len()).map_err(|_| NvmeStatus::InvalidField)?,
            u32::try_from(mlen).map_err(|_| NvmeStatus::InvalidField)?,
            false,
        );
        let done = pt.run(&self.queued, cmd, data, mbuf).await;
        passthru_result(done.result, Op::Read)?;
        let (Some(d), Some(m)) = (done.buf, done.meta) else {
            return Err(NvmeStatus::InternalError);
        };
        buf.copy_from_slice(d.as_slice());
        if let Some(out) = meta {
            out.copy_from_slice(m.as_slice());
        }
        Ok(())
    }

    /// Write with metadata through passthrough, after the same host-side checks as a write
    /// through the block device.
    async fn write_meta(
        &self,
        pt: &Passthru,
        lba: Lba,
        data: AlignedBuf,
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<()> {
        let blocks = self.check_io(lba, data.len())?;
        if lba / self.geo.zone_size != (lba + blocks - 1) / self.geo.zone_size {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        let mbuf = self.meta_buf(blocks, meta)?;
        let mlen = mbuf.as_ref().map_or(0, AlignedBuf::len);
        let cmd = NvmeCmd::read_write(
            pt.nsid,
            true,
            lba,
            u32::try_from(blocks).map_err(|_| NvmeStatus::InvalidField)?,
            u32::try_from(data.len()).map_err(|_| NvmeStatus::InvalidField)?,
            u32::try_from(mlen).map_err(|_| NvmeStatus::InvalidField)?,
            fua,
        );
        let done = pt.run(&self.queued, cmd, data, mbuf).await;
        passthru_result(done.result, Op::Write)
    }

    fn spb(&self) -> u64 {
        u64::from(self.geo.block_size) / SECTOR_BYTES
    }

    fn offset(&self, lba: Lba) -> u64 {
        lba * u64::from(self.geo.block_size)
    }

    /// Runs one command on the block device's ring, bounded by the queue depth it shares
    /// with the passthrough ring.
    async fn run(&self, cmd: Cmd) -> Done {
        // The semaphore is never closed, so acquire fails only if it were.
        let Ok(_permit) = self.queued.acquire().await else {
            return Done::failed(libc::ENXIO);
        };
        match self.ring.submit(cmd).await {
            Ok(done) => done,
            // The ring thread is gone: the device is not usable any more.
            Err(_) => Done::failed(libc::ENXIO),
        }
    }

    /// Zone Append through passthrough: the drive checks it and says where the data landed.
    async fn append_passthru(
        &self,
        pt: &Passthru,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        let bs = self.geo.block_size as usize;
        if data.is_empty() || !data.len().is_multiple_of(bs) {
            return Err(NvmeStatus::InvalidField);
        }
        // NLB is a 16-bit field; anything longer cannot be encoded, let alone sent.
        let blocks = u16::try_from(data.len() / bs - 1).map_err(|_| NvmeStatus::InvalidField)?;
        // With metadata the append limit may be the host's own, below the drive's (see
        // `with_metadata`), so the host enforces it; without, the drive checks its own.
        if self.geo.oob_size > 0 && u32::from(blocks) >= self.geo.zasl_blocks {
            return Err(NvmeStatus::InvalidField);
        }
        let mbuf = self.meta_buf(u64::from(blocks) + 1, meta)?;
        let mlen = mbuf.as_ref().map_or(0, AlignedBuf::len);
        let mlen = u32::try_from(mlen).map_err(|_| NvmeStatus::InvalidField)?;
        let len = u32::try_from(data.len()).map_err(|_| NvmeStatus::InvalidField)?;
        let buf = AlignedBuf::copy_of(data).ok_or(NvmeStatus::InternalError)?;
        let cmd = NvmeCmd::zone_append(pt.nsid, zslba, u32::from(blocks) + 1, len, fua)
            .with_metadata(mlen);
        let done = pt.run(&self.queued, cmd, buf, mbuf).await;
        passthru_result(done.result, Op::Write)?;
        Ok(done.result64)
    }

    /// Simple Copy through passthrough, after the host-side checks (crate::copy) that keep a
    /// failed copy from writing part of its ranges.
    async fn copy_passthru(
        &self,
        pt: &Passthru,
        sources: &[CopyRange],
        dest: Lba,
        fua: bool,
    ) -> NvmeResult<()> {
        let blocks = copy::check_sources(&self.geo, sources)?;
        check_range(&self.geo, dest, blocks)?;
        let zone = self.zone_at(dest).await?;
        copy::check_dest(&self.geo, &zone, dest, blocks)?;
        let ranges =
            u8::try_from(sources.len()).map_err(|_| NvmeStatus::CommandSizeLimitExceeded)?;
        let desc = copy_descriptors(sources).ok_or(NvmeStatus::CommandSizeLimitExceeded)?;
        let len = u32::try_from(desc.len()).map_err(|_| NvmeStatus::InvalidField)?;
        let buf = AlignedBuf::copy_of(&desc).ok_or(NvmeStatus::InternalError)?;
        let cmd = NvmeCmd::copy(pt.nsid, dest, ranges, len, fua);
        let done = pt.run(&self.queued, cmd, buf, None).await;
        passthru_result(done.result, Op::Write)
    }

    /// Host-side checks shared by reads and writes: whole blocks, within the namespace, at
    /// most the transfer limit.
    fn check_io(&self, lba: Lba, bytes: usize) -> NvmeResult<u64> {
        let bs = self.geo.block_size as usize;
        if bytes == 0 || !bytes.is_multiple_of(bs) {
            return Err(NvmeStatus::InvalidField);
        }
        let blocks = (bytes / bs) as u64;
        check_range(&self.geo, lba, blocks)?;
        if blocks > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        Ok(blocks)
    }

    /// The descriptor of the zone holding `lba`.
    async fn zone_at(&self, lba: Lba) -> NvmeResult<ZoneDescriptor> {
        let zones = self.report_from(lba, 1).await?;
        zones.into_iter().next().ok_or(NvmeStatus::InternalError)
    }

    /// Up to `max_zones` zones from the zone holding `lba`, in one blocking ioctl call each
    /// chunk, off the async executor.
    async fn report_from(&self, lba: Lba, max_zones: u32) -> NvmeResult<Vec<ZoneDescriptor>> {
        let file = Arc::clone(&self.file);
        let (bs, spb) = (self.geo.block_size, self.spb());
        let zone_sectors = self.geo.zone_size * spb;
        let start_sector = lba / self.geo.zone_size * zone_sectors;
        blocking(move || {
            report_sectors(file.as_raw_fd(), start_sector, zone_sectors, max_zones, bs)
        })
        .await
    }

    async fn mgmt(&self, action: Mgmt, zslba: Lba) -> NvmeResult<()> {
        let file = Arc::clone(&self.file);
        let (sector, sectors) = (zslba * self.spb(), self.geo.zone_size * self.spb());
        blocking(move || {
            ioctl::zone_mgmt(file.as_raw_fd(), action, sector, sectors)
                .map_err(|e| status_of(e, Op::ZoneMgmt))
        })
        .await
    }

    async fn write_buf(&self, lba: Lba, buf: AlignedBuf, fua: bool) -> NvmeResult<()> {
        let blocks = self.check_io(lba, buf.len())?;
        // A ZNS drive fails a write that crosses a zone boundary whole; the block layer
        // would split it.
        if lba / self.geo.zone_size != (lba + blocks - 1) / self.geo.zone_size {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        let len = buf.len();
        let done = self
            .run(Cmd::Write {
                offset: self.offset(lba),
                buf,
                fua,
            })
            .await;
        match done.result {
            r if r >= 0 && r as usize == len => Ok(()),
            r if r >= 0 => Err(NvmeStatus::WriteFault),
            r if -r == libc::EIO => {
                let zone = self.zone_at(lba).await?;
                Err(diagnose_write(&self.geo, &zone, lba, blocks))
            }
            r => Err(status_of(-r, Op::Write)),
        }
    }

    async fn select_all(&self, action: Mgmt, states: &[ZoneState]) -> NvmeResult<()> {
        let zones = self.report_from(0, self.geo.zone_count).await?;
        for z in zones.iter().filter(|z| states.contains(&z.state)) {
            self.mgmt(action, z.start).await?;
        }
        Ok(())
    }
}

/// A passthrough command's result: the drive's own status, or the kernel's errno mapped as
/// for a command of class `op`.
fn passthru_result(result: i32, op: Op) -> NvmeResult<()> {
    match completion(result) {
        Completion::Ok => Ok(()),
        Completion::Status(s) => Err(s),
        Completion::Errno(e) => Err(status_of(e, op)),
    }
}

/// The block device to open for `path`: itself, or for an NVMe generic character device
/// (/dev/ngXnY) the namespace's block device (/dev/nvmeXnY), which zone management and the
/// geometry go through; the character device is then opened for passthrough as for any
/// namespace.
fn block_device_of(path: &Path) -> Result<PathBuf, OpenError> {
    let meta = std::fs::metadata(path).map_err(|source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let ft = meta.file_type();
    if ft.is_block_device() {
        return Ok(path.to_path_buf());
    }
    let not_block = || OpenError::NotBlockDevice(path.to_path_buf());
    if !ft.is_char_device() {
        return Err(not_block());
    }
    let rdev = meta.rdev();
    let link = format!("/sys/dev/char/{}:{}", libc::major(rdev), libc::minor(rdev));
    let name = std::fs::read_link(&link).map_err(|_| not_block())?;
    let block = name
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(crate::nvme::block_device_name)
        .map(|b| PathBuf::from("/dev").join(b))
        .ok_or_else(not_block)?;
    match std::fs::metadata(&block) {
        Ok(m) if m.file_type().is_block_device() => Ok(block),
        _ => Err(not_block()),
    }
}

/// Runs `f` on tokio's blocking pool when a runtime is there, else inline.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> NvmeResult<T> + Send + 'static,
) -> NvmeResult<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => h
            .spawn_blocking(f)
            .await
            .unwrap_or(Err(NvmeStatus::InternalError)),
        Err(_) => f(),
    }
}

/// Reports up to `max_zones` zones of `zone_sectors` each from `sector`, in chunks.
fn report_sectors(
    fd: RawFd,
    sector: u64,
    zone_sectors: u64,
    max_zones: u32,
    bs: u32,
) -> NvmeResult<Vec<ZoneDescriptor>> {
    let mut out = Vec::new();
    let mut next = sector;
    while (out.len() as u32) < max_zones {
        let want = (max_zones - out.len() as u32).min(REPORT_CHUNK_ZONES);
        let raw = ioctl::report_zones(fd, next, want).map_err(|e| status_of(e, Op::Read))?;
        let zones = report::decode(&raw, bs).map_err(|_| NvmeStatus::InternalError)?;
        if zones.is_empty() {
            break;
        }
        next += zone_sectors * zones.len() as u64;
        out.extend(zones);
    }
    Ok(out)
}

/// The zone capacity, which must be the same for every zone (the `Geometry` has one).
fn uniform_capacity(fd: RawFd, limits: &sysfs::QueueLimits, path: &Path) -> Result<u64, OpenError> {
    let bs = limits.logical_block_size;
    if bs < SECTOR_BYTES as u32 || limits.nr_zones == 0 {
        return Err(OpenError::Sysfs {
            path: path.to_path_buf(),
            source: SysfsError::NotZoned(limits.zoned.clone()),
        });
    }
    let mut zones = Vec::new();
    let mut sector = 0u64;
    while zones.len() < limits.nr_zones as usize {
        let raw = ioctl::report_zones(fd, sector, REPORT_CHUNK_ZONES).map_err(|errno| {
            OpenError::ReportIoctl {
                path: path.to_path_buf(),
                errno,
            }
        })?;
        let chunk = report::decode(&raw, bs).map_err(|source| OpenError::Report {
            path: path.to_path_buf(),
            source,
        })?;
        if chunk.is_empty() {
            break;
        }
        sector += limits.chunk_sectors * chunk.len() as u64;
        zones.extend(chunk);
    }
    let first = zones.first().map(|z| z.capacity).unwrap_or(0);
    match zones.iter().find(|z| z.capacity != first) {
        Some(z) => Err(OpenError::Sysfs {
            path: path.to_path_buf(),
            source: SysfsError::Capacity {
                capacity_blocks: z.capacity,
                zone_blocks: first,
            },
        }),
        None => Ok(first),
    }
}

#[async_trait]
impl ZonedDevice for LinuxZoned {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        if let Some(pt) = self.meta_path() {
            return self.read_meta(pt, lba, buf, meta).await;
        }
        if meta.is_some_and(|m| !m.is_empty()) {
            return Err(NvmeStatus::InvalidField);
        }
        let blocks = self.check_io(lba, buf.len())?;
        let Some(b) = AlignedBuf::zeroed(buf.len()) else {
            return Err(NvmeStatus::InternalError);
        };
        let done = self
            .run(Cmd::Read {
                offset: self.offset(lba),
                buf: b,
            })
            .await;
        match (done.result, done.buf) {
            (r, Some(b)) if r >= 0 && r as usize == buf.len() => {
                buf.copy_from_slice(b.as_slice());
                Ok(())
            }
            (r, _) if r >= 0 => Err(NvmeStatus::DataTransferError),
            (r, _) if -r == libc::EIO => {
                let zone = self.zone_at(lba).await?;
                Err(diagnose_read(&self.geo, &zone, lba, blocks))
            }
            (r, _) => Err(status_of(-r, Op::Read)),
        }
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        let buf = AlignedBuf::copy_of(data).ok_or(NvmeStatus::InternalError)?;
        if let Some(pt) = self.meta_path() {
            return self.write_meta(pt, lba, buf, meta, fua).await;
        }
        if meta.is_some_and(|m| !m.is_empty()) {
            return Err(NvmeStatus::InvalidField);
        }
        self.write_buf(lba, buf, fua).await
    }

    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        // Without passthrough, not emulated with a write: that would serialise appends and
        // hide what the drive does. `supports(Capability::ZoneAppend)` names what is missing.
        let Ok(pt) = &self.passthru else {
            return Err(NvmeStatus::InvalidOpcode);
        };
        self.append_passthru(pt, zslba, data, meta, fua).await
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        let bytes = usize::try_from(blocks * u64::from(self.geo.block_size))
            .map_err(|_| NvmeStatus::InvalidField)?;
        if blocks > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        let buf = AlignedBuf::zeroed(bytes).ok_or(NvmeStatus::InternalError)?;
        // Zero data with zero metadata, as a drive's Write Zeroes leaves it.
        if let Some(pt) = self.meta_path() {
            return self.write_meta(pt, lba, buf, None, fua).await;
        }
        self.write_buf(lba, buf, fua).await
    }

    async fn flush(&self) -> NvmeResult<()> {
        let done = self.run(Cmd::Flush).await;
        if done.result < 0 {
            return Err(status_of(-done.result, Op::Flush));
        }
        Ok(())
    }

    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        // Without passthrough or without the controller's Copy, the opcode is not there:
        // `supports(Capability::SimpleCopy)` names what is missing.
        match &self.passthru {
            Ok(pt) if pt.copy.is_ok() => self.copy_passthru(pt, sources, dest, fua).await,
            _ => Err(NvmeStatus::InvalidOpcode),
        }
    }

    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        let mgmt = match action {
            ZoneAction::Open => Some(Mgmt::Open),
            ZoneAction::Close => Some(Mgmt::Close),
            ZoneAction::Finish => Some(Mgmt::Finish),
            ZoneAction::Reset => Some(Mgmt::Reset),
            // An unsupported Zone Send Action is Invalid Field on a drive too, after the
            // address checks below.
            ZoneAction::Offline => None,
        };
        if !select_all {
            check_range(&self.geo, zslba, 1)?;
            if !zslba.is_multiple_of(self.geo.zone_size) {
                return Err(NvmeStatus::InvalidField);
            }
        }
        let Some(mgmt) = mgmt else {
            return Err(NvmeStatus::InvalidField);
        };
        if !select_all {
            return self.mgmt(mgmt, zslba).await;
        }
        use ZoneState::*;
        match mgmt {
            Mgmt::Open => self.select_all(mgmt, &[Closed]).await,
            Mgmt::Close => {
                self.select_all(mgmt, &[ImplicitlyOpened, ExplicitlyOpened])
                    .await
            }
            Mgmt::Finish => {
                self.select_all(mgmt, &[ImplicitlyOpened, ExplicitlyOpened, Closed])
                    .await
            }
            Mgmt::Reset => {
                self.select_all(mgmt, &[ImplicitlyOpened, ExplicitlyOpened, Closed, Full])
                    .await
            }
        }
    }

    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        check_range(&self.geo, lba, 1)?;
        let first = lba / self.geo.zone_size;
        let left = u32::try_from(u64::from(self.geo.zone_count) - first)
            .map_err(|_| NvmeStatus::InternalError)?;
        let matching: Vec<ZoneDescriptor> = self
            .report_from(lba, left)
            .await?
            .into_iter()
            .filter(|z| filter.matches(z.state))
            .collect();
        let total = matching.len() as u64;
        let zones: Vec<ZoneDescriptor> = matching.into_iter().take(max_zones).collect();
        let nr_zones = if partial { zones.len() as u64 } else { total };
        Ok(ZoneReport { nr_zones, zones })
    }
}
