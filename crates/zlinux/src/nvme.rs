//! NVMe passthrough on the generic character device (/dev/ngXnY), sans-IO: the command
//! layout of linux/nvme_ioctl.h (`struct nvme_uring_cmd`) for IORING_OP_URING_CMD, the
//! character device that belongs to a namespace's block device, and the completion status.
//!
//! Passthrough carries what the block layer cannot: Zone Append (the LBA the data landed at
//! comes back in the completion) and the drive's own status code, not an errno.

use zns::{Lba, NvmeStatus};

/// `_IOWR('N', 0x80, struct nvme_uring_cmd)`: an I/O command through io_uring.
pub const NVME_URING_CMD_IO: u32 = 0xC048_4E80;
/// `_IO('N', 0x40)`: the namespace id of the device the descriptor is open on.
pub const NVME_IOCTL_ID: libc::c_ulong = 0x4E40;
/// NVMe Zone Append (ZNS command set).
pub const OPC_ZONE_APPEND: u8 = 0x7D;
/// Force Unit Access in CDW12.
const FUA_BIT: u32 = 1 << 30;
/// The status field of a passthrough completion: SCT (3 bits) and SC; DNR and More are above.
const STATUS_MASK: i32 = 0x7FF;

/// One NVMe I/O command (no metadata), as `struct nvme_uring_cmd` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvmeCmd {
    pub opcode: u8,
    pub nsid: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
}

impl NvmeCmd {
    /// Zone Append of `blocks` (at least 1) to the zone starting at `zslba`.
    pub fn zone_append(nsid: u32, zslba: Lba, blocks: u32, data_len: u32, fua: bool) -> NvmeCmd {
        NvmeCmd {
            opcode: OPC_ZONE_APPEND,
            nsid,
            data_len,
            cdw10: zslba as u32,
            cdw11: (zslba >> 32) as u32,
            // NLB is 0-based.
            cdw12: blocks.saturating_sub(1) | if fua { FUA_BIT } else { 0 },
        }
    }

    /// The 80 command bytes of the SQE128 (the 72-byte struct, zero padded) with the data
    /// buffer at `addr`.
    pub fn encode(&self, addr: u64) -> [u8; 80] {
        let mut b = [0u8; 80];
        b[0] = self.opcode;
        b[4..8].copy_from_slice(&self.nsid.to_ne_bytes());
        b[24..32].copy_from_slice(&addr.to_ne_bytes());
        b[36..40].copy_from_slice(&self.data_len.to_ne_bytes());
        b[40..44].copy_from_slice(&self.cdw10.to_ne_bytes());
        b[44..48].copy_from_slice(&self.cdw11.to_ne_bytes());
        b[48..52].copy_from_slice(&self.cdw12.to_ne_bytes());
        b
    }
}

/// What a passthrough completion's result means: 0 success, a positive NVMe status field
/// (the drive's own status), or a negative errno (the kernel refused the command).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    Ok,
    Status(NvmeStatus),
    Errno(i32),
}

pub fn completion(res: i32) -> Completion {
    match res {
        0 => Completion::Ok,
        r if r < 0 => Completion::Errno(-r),
        // A status this crate has no name for is still a failure of the command.
        r => Completion::Status(
            NvmeStatus::from_code((r & STATUS_MASK) as u16).unwrap_or(NvmeStatus::InternalError),
        ),
    }
}

/// The generic character device of an NVMe namespace block device named `block_name`
/// ("nvme0n2" -> "ng0n2"), or None for other devices (null_blk, SCSI, a partition).
pub fn char_device_name(block_name: &str) -> Option<String> {
    let rest = block_name.strip_prefix("nvme")?;
    let (ctrl, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(ctrl) && digits(ns)).then(|| format!("ng{ctrl}n{ns}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_append_encodes_as_the_kernel_struct_lays_it_out() {
        let c = NvmeCmd::zone_append(2, 0x1_0000_0200, 8, 32768, true);
        let b = c.encode(0xdead_beef_0000);
        assert_eq!(b[0], 0x7D);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 2);
        assert_eq!(
            u64::from_ne_bytes(b[24..32].try_into().unwrap()),
            0xdead_beef_0000
        );
        assert_eq!(u32::from_ne_bytes(b[36..40].try_into().unwrap()), 32768);
        assert_eq!(u32::from_ne_bytes(b[40..44].try_into().unwrap()), 0x200);
        assert_eq!(u32::from_ne_bytes(b[44..48].try_into().unwrap()), 1);
        // NLB 0-based, FUA bit 30.
        assert_eq!(
            u32::from_ne_bytes(b[48..52].try_into().unwrap()),
            7 | (1 << 30)
        );
        assert!(b[52..].iter().all(|x| *x == 0));
        assert!(b[8..24].iter().all(|x| *x == 0));
    }

    #[test]
    fn completions_carry_the_drives_status() {
        assert_eq!(completion(0), Completion::Ok);
        assert_eq!(completion(-libc::EINVAL), Completion::Errno(libc::EINVAL));
        // Zone Is Full with DNR (0x4000) set: the status field alone names it.
        assert_eq!(
            completion(0x4000 | 0x1B9),
            Completion::Status(NvmeStatus::ZoneIsFull)
        );
        assert_eq!(
            completion(0x1B8),
            Completion::Status(NvmeStatus::ZoneBoundaryError)
        );
    }

    #[test]
    fn character_device_names() {
        assert_eq!(char_device_name("nvme0n2").as_deref(), Some("ng0n2"));
        assert_eq!(char_device_name("nvme12n1").as_deref(), Some("ng12n1"));
        assert_eq!(char_device_name("nullb0"), None);
        assert_eq!(char_device_name("nvme0n1p1"), None);
        assert_eq!(char_device_name("nvme0c0n1"), None);
    }
}
