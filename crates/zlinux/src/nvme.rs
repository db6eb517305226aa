//! NVMe passthrough on the generic character device (/dev/ngXnY), sans-IO: the command
//! layout of linux/nvme_ioctl.h (`struct nvme_uring_cmd`) for IORING_OP_URING_CMD, the
//! character device that belongs to a namespace's block device, and the completion status.
//!
//! Passthrough carries what the block layer cannot: Zone Append (the LBA the data landed at
//! comes back in the completion), Simple Copy (NVMe Copy with source range descriptors of
//! format 0, its limits from Identify), per-block metadata (Read, Write and Zone Append with
//! a separate metadata buffer: `metadata` and `metadata_len` of the struct; the kernel
//! bounces it and the driver hands it to the drive as MPTR), and the drive's own status
//! code, not an errno.

use zns::{CopyRange, Lba, NvmeStatus};

/// `_IOWR('N', 0x80, struct nvme_uring_cmd)`: an I/O command through io_uring.
pub const NVME_URING_CMD_IO: u32 = 0xC048_4E80;
/// `_IO('N', 0x40)`: the namespace id of the device the descriptor is open on.
pub const NVME_IOCTL_ID: libc::c_ulong = 0x4E40;
/// `_IOWR('N', 0x41, struct nvme_passthru_cmd)`: an admin command (Identify), synchronously.
pub const NVME_IOCTL_ADMIN_CMD: libc::c_ulong = 0xC048_4E41;
/// NVMe Zone Append (ZNS command set).
pub const OPC_ZONE_APPEND: u8 = 0x7D;
/// NVMe Write and Read (NVM command set; Zone Write is Write on a zoned namespace).
pub const OPC_WRITE: u8 = 0x01;
pub const OPC_READ: u8 = 0x02;
/// NVMe Copy (NVM command set; Simple Copy in ZNS terms).
pub const OPC_COPY: u8 = 0x19;
/// NVMe Identify (admin).
pub const OPC_IDENTIFY: u8 = 0x06;
/// Identify CNS values: the namespace's and the controller's data structures.
pub const CNS_NAMESPACE: u8 = 0x00;
pub const CNS_CONTROLLER: u8 = 0x01;
/// Bytes of an Identify data structure.
pub const IDENTIFY_BYTES: usize = 4096;
/// Bytes of one source range descriptor of format 0.
pub const COPY_RANGE_BYTES: usize = 32;
/// Force Unit Access in CDW12.
const FUA_BIT: u32 = 1 << 30;
/// The status field of a passthrough completion: SCT (3 bits) and SC; DNR and More are above.
const STATUS_MASK: i32 = 0x7FF;

/// One NVMe command, as `struct nvme_uring_cmd` and `struct nvme_passthru_cmd` describe it
/// (their first 72 bytes are laid out alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvmeCmd {
    pub opcode: u8,
    pub nsid: u32,
    pub data_len: u32,
    /// Bytes of the separate metadata buffer (0: none).
    pub metadata_len: u32,
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
            metadata_len: 0,
            cdw10: zslba as u32,
            cdw11: (zslba >> 32) as u32,
            // NLB is 0-based.
            cdw12: blocks.saturating_sub(1) | if fua { FUA_BIT } else { 0 },
        }
    }

    /// Copy of the ranges whose `ranges` descriptors (format 0) are the `data_len`-byte data
    /// buffer, to `dest`, which must be the write pointer of its zone.
    pub fn copy(nsid: u32, dest: Lba, ranges: u8, data_len: u32, fua: bool) -> NvmeCmd {
        NvmeCmd {
            opcode: OPC_COPY,
            nsid,
            data_len,
            metadata_len: 0,
            cdw10: dest as u32,
            cdw11: (dest >> 32) as u32,
            // NR (bits 7:0) is 0-based; descriptor format (bits 11:8) 0; no protection info.
            cdw12: u32::from(ranges.saturating_sub(1)) | if fua { FUA_BIT } else { 0 },
        }
    }

    /// Identify with `cns` into a 4096-byte buffer.
    pub fn identify(nsid: u32, cns: u8) -> NvmeCmd {
        NvmeCmd {
            opcode: OPC_IDENTIFY,
            nsid,
            data_len: IDENTIFY_BYTES as u32,
            metadata_len: 0,
            cdw10: u32::from(cns),
            cdw11: 0,
            cdw12: 0,
        }
    }

    /// Read (`write` false) or Write of `blocks` (at least 1) at `lba`, with `data_len` data
    /// bytes and `metadata_len` bytes of separate metadata.
    pub fn read_write(
        nsid: u32,
        write: bool,
        lba: Lba,
        blocks: u32,
        data_len: u32,
        metadata_len: u32,
        fua: bool,
    ) -> NvmeCmd {
        NvmeCmd {
            opcode: if write { OPC_WRITE } else { OPC_READ },
            nsid,
            data_len,
            metadata_len,
            cdw10: lba as u32,
            cdw11: (lba >> 32) as u32,
            cdw12: blocks.saturating_sub(1) | if fua { FUA_BIT } else { 0 },
        }
    }

    /// This command with a separate metadata buffer of `metadata_len` bytes.
    pub fn with_metadata(self, metadata_len: u32) -> NvmeCmd {
        NvmeCmd {
            metadata_len,
            ..self
        }
    }

    /// The 80 command bytes of the SQE128 (the 72-byte struct, zero padded) with the data
    /// buffer at `addr` and the metadata buffer at `meta_addr` (0 when `metadata_len` is 0).
    pub fn encode(&self, addr: u64, meta_addr: u64) -> [u8; 80] {
        let mut b = [0u8; 80];
        b[0] = self.opcode;
        b[4..8].copy_from_slice(&self.nsid.to_ne_bytes());
        if self.metadata_len > 0 {
            b[16..24].copy_from_slice(&meta_addr.to_ne_bytes());
            b[32..36].copy_from_slice(&self.metadata_len.to_ne_bytes());
        }
        b[24..32].copy_from_slice(&addr.to_ne_bytes());
        b[36..40].copy_from_slice(&self.data_len.to_ne_bytes());
        b[40..44].copy_from_slice(&self.cdw10.to_ne_bytes());
        b[44..48].copy_from_slice(&self.cdw11.to_ne_bytes());
        b[48..52].copy_from_slice(&self.cdw12.to_ne_bytes());
        b
    }
}

/// The data buffer of a Copy: one 32-byte source range descriptor of format 0 per range
/// (SLBA in bytes 8..16, the 0-based NLB in 16..18, little-endian; the rest zero), or None
/// when a range cannot be encoded (no blocks, or more than 65536).
pub fn copy_descriptors(ranges: &[CopyRange]) -> Option<Vec<u8>> {
    let mut b = vec![0u8; ranges.len() * COPY_RANGE_BYTES];
    for (r, d) in ranges.iter().zip(b.chunks_exact_mut(COPY_RANGE_BYTES)) {
        let nlb = u16::try_from(r.blocks.checked_sub(1)?).ok()?;
        d[8..16].copy_from_slice(&r.lba.to_le_bytes());
        d[16..18].copy_from_slice(&nlb.to_le_bytes());
    }
    Some(b)
}

/// A namespace's Copy limits, from Identify Namespace: source ranges (MSRC + 1), blocks per
/// range (MSSRL) and blocks per command (MCL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyLimits {
    pub max_ranges: u32,
    pub max_range_blocks: u32,
    pub max_blocks: u32,
}

/// ONCS bit 8 in Identify Controller: the Copy command is supported.
const ONCS_COPY: u16 = 1 << 8;
/// OCFS bit 0 in Identify Controller: source range descriptor format 0 is supported.
const OCFS_FORMAT0: u16 = 1;

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// The Copy limits from Identify Controller (`ctrl`) and Identify Namespace (`ns`), or why
/// the namespace offers no usable Copy: one line for users.
pub fn copy_limits(ctrl: &[u8], ns: &[u8]) -> Result<CopyLimits, String> {
    if ctrl.len() < IDENTIFY_BYTES || ns.len() < IDENTIFY_BYTES {
        return Err("the Identify data is short".into());
    }
    if le16(ctrl, 520) & ONCS_COPY == 0 {
        return Err("the controller does not support the Copy command (ONCS bit 8)".into());
    }
    if le16(ctrl, 534) & OCFS_FORMAT0 == 0 {
        return Err("the controller does not support copy descriptor format 0 (OCFS)".into());
    }
    let limits = CopyLimits {
        max_ranges: u32::from(ns[80]) + 1,
        max_range_blocks: u32::from(le16(ns, 74)),
        max_blocks: le32(ns, 76),
    };
    if limits.max_range_blocks == 0 || limits.max_blocks == 0 {
        return Err(format!(
            "the namespace reports Copy limits of zero (MSSRL {}, MCL {})",
            limits.max_range_blocks, limits.max_blocks
        ));
    }
    Ok(limits)
}

/// The LBA format a namespace is formatted with, from Identify Namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaFormat {
    /// Data bytes per block (2^LBADS).
    pub data_bytes: u32,
    /// Metadata bytes per block (MS).
    pub metadata_bytes: u16,
    /// Metadata sent at the end of each block's data (FLBAS bit 4), not in a separate buffer.
    pub extended: bool,
}

/// The namespace's LBA format (FLBAS picks one of the LBAF entries at byte 128), or why the
/// Identify data does not give one.
pub fn lba_format(ns: &[u8]) -> Result<LbaFormat, String> {
    if ns.len() < IDENTIFY_BYTES {
        return Err("the Identify Namespace data is short".into());
    }
    let (nlbaf, flbas) = (ns[25], ns[26]);
    // FLBAS bits 3:0 are the format's low bits, bits 6:5 its high bits (NVMe 2.0).
    let index = usize::from(flbas & 0x0F) | usize::from((flbas >> 5) & 0x03) << 4;
    if index > usize::from(nlbaf) {
        return Err(format!(
            "FLBAS selects LBA format {index} of {}",
            u32::from(nlbaf) + 1
        ));
    }
    let at = 128 + 4 * index;
    let lbads = ns[at + 2];
    if !(9..=16).contains(&lbads) {
        return Err(format!("LBA format {index} has a data size of 2^{lbads}"));
    }
    Ok(LbaFormat {
        data_bytes: 1 << lbads,
        metadata_bytes: le16(ns, at),
        extended: flbas & 0x10 != 0,
    })
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

/// The block device of an NVMe generic character device named `char_name` ("ng0n2" ->
/// "nvme0n2"), or None for other character devices.
pub fn block_device_name(char_name: &str) -> Option<String> {
    let rest = char_name.strip_prefix("ng")?;
    let (ctrl, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(ctrl) && digits(ns)).then(|| format!("nvme{ctrl}n{ns}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_append_encodes_as_the_kernel_struct_lays_it_out() {
        let c = NvmeCmd::zone_append(2, 0x1_0000_0200, 8, 32768, true);
        let b = c.encode(0xdead_beef_0000, 0);
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
    fn copy_encodes_its_command_and_format_0_descriptors() {
        let c = NvmeCmd::copy(1, 0x2_0000_0040, 3, 96, true);
        let b = c.encode(0x1000, 0);
        assert_eq!(b[0], 0x19);
        assert_eq!(u32::from_ne_bytes(b[36..40].try_into().unwrap()), 96);
        assert_eq!(u32::from_ne_bytes(b[40..44].try_into().unwrap()), 0x40);
        assert_eq!(u32::from_ne_bytes(b[44..48].try_into().unwrap()), 2);
        // NR 0-based (2), format 0, FUA.
        assert_eq!(
            u32::from_ne_bytes(b[48..52].try_into().unwrap()),
            2 | (1 << 30)
        );
        let r = |lba, blocks| CopyRange { lba, blocks };
        let d = copy_descriptors(&[r(0x1_0000_0005, 1), r(7, 65536)]).unwrap();
        assert_eq!(d.len(), 64);
        assert!(d[..8].iter().all(|x| *x == 0));
        assert_eq!(&d[8..16], &0x1_0000_0005u64.to_le_bytes());
        assert_eq!(&d[16..18], &[0, 0]);
        assert!(d[18..40].iter().all(|x| *x == 0));
        assert_eq!(&d[40..48], &7u64.to_le_bytes());
        assert_eq!(&d[48..50], &[0xFF, 0xFF]);
        assert!(d[50..].iter().all(|x| *x == 0));
        assert_eq!(copy_descriptors(&[r(0, 0)]), None);
        assert_eq!(copy_descriptors(&[r(0, 65537)]), None);
    }

    /// Identify data of a controller with Copy and format 0, and a namespace with QEMU's
    /// default limits (MSSRL 128, MCL 128, MSRC 127).
    fn identify_pair() -> (Vec<u8>, Vec<u8>) {
        let mut ctrl = vec![0u8; IDENTIFY_BYTES];
        ctrl[520..522].copy_from_slice(&(ONCS_COPY | 0x3F).to_le_bytes());
        ctrl[534..536].copy_from_slice(&1u16.to_le_bytes());
        let mut ns = vec![0u8; IDENTIFY_BYTES];
        ns[74..76].copy_from_slice(&128u16.to_le_bytes());
        ns[76..80].copy_from_slice(&128u32.to_le_bytes());
        ns[80] = 127;
        (ctrl, ns)
    }

    #[test]
    fn copy_limits_come_from_identify() {
        let (ctrl, ns) = identify_pair();
        assert_eq!(
            copy_limits(&ctrl, &ns),
            Ok(CopyLimits {
                max_ranges: 128,
                max_range_blocks: 128,
                max_blocks: 128
            })
        );
        let mut no_copy = ctrl.clone();
        no_copy[521] = 0;
        assert!(copy_limits(&no_copy, &ns).unwrap_err().contains("ONCS"));
        let mut no_format = ctrl.clone();
        no_format[534] = 0;
        assert!(copy_limits(&no_format, &ns).unwrap_err().contains("OCFS"));
        let mut zero = ns.clone();
        zero[74..76].fill(0);
        assert!(copy_limits(&ctrl, &zero).unwrap_err().contains("MSSRL 0"));
        assert!(copy_limits(&ctrl, &ns[..100]).is_err());
    }

    #[test]
    fn reads_and_writes_carry_a_separate_metadata_buffer() {
        let c = NvmeCmd::read_write(3, true, 0x1_0000_0010, 4, 16384, 64, true);
        let b = c.encode(0x2000, 0x3000);
        assert_eq!(b[0], OPC_WRITE);
        // metadata at 16, addr at 24, metadata_len at 32, data_len at 36.
        assert_eq!(u64::from_ne_bytes(b[16..24].try_into().unwrap()), 0x3000);
        assert_eq!(u64::from_ne_bytes(b[24..32].try_into().unwrap()), 0x2000);
        assert_eq!(u32::from_ne_bytes(b[32..36].try_into().unwrap()), 64);
        assert_eq!(u32::from_ne_bytes(b[36..40].try_into().unwrap()), 16384);
        assert_eq!(u32::from_ne_bytes(b[40..44].try_into().unwrap()), 0x10);
        assert_eq!(u32::from_ne_bytes(b[44..48].try_into().unwrap()), 1);
        assert_eq!(
            u32::from_ne_bytes(b[48..52].try_into().unwrap()),
            3 | (1 << 30)
        );
        let r = NvmeCmd::read_write(3, false, 7, 1, 4096, 0, false).encode(0x2000, 0x3000);
        assert_eq!(r[0], OPC_READ);
        // No metadata: neither the pointer nor the length is sent.
        assert!(r[16..24].iter().all(|x| *x == 0) && r[32..36].iter().all(|x| *x == 0));
        let a = NvmeCmd::zone_append(1, 0, 2, 8192, false).with_metadata(16);
        assert_eq!(
            u32::from_ne_bytes(a.encode(1, 2)[32..36].try_into().unwrap()),
            16
        );
    }

    #[test]
    fn lba_format_comes_from_flbas() {
        let mut ns = vec![0u8; IDENTIFY_BYTES];
        ns[25] = 1; // two formats
        ns[128 + 2] = 9; // format 0: 512 B, no metadata
        ns[132..134].copy_from_slice(&16u16.to_le_bytes()); // format 1: 4 KiB + 16 B
        ns[134] = 12;
        ns[26] = 1;
        let f = lba_format(&ns).unwrap();
        assert_eq!(
            (f.data_bytes, f.metadata_bytes, f.extended),
            (4096, 16, false)
        );
        ns[26] = 0x11;
        assert!(lba_format(&ns).unwrap().extended);
        ns[26] = 0;
        assert_eq!(lba_format(&ns).unwrap().metadata_bytes, 0);
        ns[26] = 2;
        assert!(lba_format(&ns).unwrap_err().contains("format 2 of 2"));
        ns[26] = 1;
        ns[134] = 40;
        assert!(lba_format(&ns).is_err());
        assert!(lba_format(&ns[..100]).is_err());
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
        assert_eq!(block_device_name("ng0n2").as_deref(), Some("nvme0n2"));
        assert_eq!(block_device_name("ng3n11").as_deref(), Some("nvme3n11"));
        assert_eq!(block_device_name("ttyS0"), None);
        assert_eq!(block_device_name("ng0c1n1"), None);
    }
}
