//! The zoned block device ioctls of linux/blkzoned.h and linux/fs.h, and the NVMe admin
//! passthrough ioctl of linux/nvme_ioctl.h, as thin wrappers that return the errno on failure.

use std::os::fd::RawFd;

use crate::buf::AlignedBuf;
use crate::nvme::{NvmeCmd, NVME_IOCTL_ADMIN_CMD};
use crate::report;

/// `struct blk_zone_range`: a sector range for the zone management ioctls.
#[repr(C)]
struct ZoneRange {
    sector: u64,
    nr_sectors: u64,
}

// _IOWR(0x12, 130, struct blk_zone_report), _IOW(0x12, 131..135, struct blk_zone_range).
const BLKREPORTZONE: libc::c_ulong = 0xC010_1282;
const BLKRESETZONE: libc::c_ulong = 0x4010_1283;
const BLKOPENZONE: libc::c_ulong = 0x4010_1286;
const BLKCLOSEZONE: libc::c_ulong = 0x4010_1287;
const BLKFINISHZONE: libc::c_ulong = 0x4010_1288;

/// A zone management action of the block layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mgmt {
    Open,
    Close,
    Finish,
    Reset,
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Applies `action` to the zones in `sector .. sector + nr_sectors`.
pub fn zone_mgmt(fd: RawFd, action: Mgmt, sector: u64, nr_sectors: u64) -> Result<(), i32> {
    let request = match action {
        Mgmt::Open => BLKOPENZONE,
        Mgmt::Close => BLKCLOSEZONE,
        Mgmt::Finish => BLKFINISHZONE,
        Mgmt::Reset => BLKRESETZONE,
    };
    let range = ZoneRange { sector, nr_sectors };
    // SAFETY: the request takes a pointer to a blk_zone_range, which lives across the call.
    let rc = unsafe { libc::ioctl(fd, request as _, &range as *const ZoneRange) };
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// Reports up to `max_zones` zones from `sector`; returns the raw reply for `report::decode`.
pub fn report_zones(fd: RawFd, sector: u64, max_zones: u32) -> Result<Vec<u8>, i32> {
    let mut buf = report::request(sector, max_zones);
    // SAFETY: buf holds the header and room for max_zones descriptors, as the header says.
    let rc = unsafe { libc::ioctl(fd, BLKREPORTZONE as _, buf.as_mut_ptr()) };
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(buf)
    }
}

/// Runs an NVMe admin command synchronously on an NVMe character device, with `buf` as its
/// data buffer. The result reads like a passthrough completion's (`nvme::completion`): 0, a
/// positive NVMe status, or a negative errno.
pub fn nvme_admin(fd: RawFd, cmd: &NvmeCmd, buf: &mut AlignedBuf) -> i32 {
    let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
    let mut bytes = cmd.encode(buf.as_mut_ptr() as u64, 0);
    // The ioctl's struct carries the buffer length the command was built with: never more
    // than the buffer holds.
    let data_len = cmd.data_len.min(len);
    bytes[36..40].copy_from_slice(&data_len.to_ne_bytes());
    // SAFETY: `bytes` starts with a `struct nvme_passthru_cmd` (72 bytes) whose data pointer
    // and length describe `buf`, which lives across the call; the kernel writes the result
    // field in place.
    let rc = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, bytes.as_mut_ptr()) };
    if rc < 0 {
        -last_errno()
    } else {
        rc
    }
}
