//! NVMe passthrough on a namespace's generic character device (/dev/ngXnY): opening it, what
//! Identify says the namespace offers (Simple Copy and its limits, the per-block metadata
//! size of its LBA format), and running one command on its io_uring.
//!
//! Fault model: a namespace whose Identify data cannot be read or makes no sense offers
//! neither Copy nor metadata here, with the reason kept for [`crate::Capability`]'s message;
//! commands fail with the drive's status or the kernel's errno and are never retried.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use tokio::sync::Semaphore;

use crate::buf::AlignedBuf;
use crate::ioctl;
use crate::nvme::{
    completion, copy_limits, lba_format, Completion, CopyLimits, NvmeCmd, CNS_CONTROLLER,
    CNS_NAMESPACE, IDENTIFY_BYTES,
};
use crate::ring::{Cmd, Done, Ring};

/// NVMe passthrough on the namespace's generic character device: Zone Append, Simple Copy
/// where the controller has it, and reads and writes with per-block metadata where the
/// namespace is formatted with it.
pub(crate) struct Passthru {
    /// Declared before `_file`: the ring thread stops before the descriptor closes.
    ring: Ring,
    /// The character device the ring's commands go to, held open for it.
    _file: File,
    pub(crate) nsid: u32,
    /// The namespace's Copy limits, or why it offers no Copy.
    pub(crate) copy: Result<CopyLimits, String>,
    /// Metadata bytes per block (above 0) in a separate buffer, or why there is none.
    pub(crate) metadata: Result<u32, String>,
    /// The most metadata bytes one command may carry, when the controller needs a limit
    /// (QEMU: [`QEMU_METADATA_MAX_BYTES`]).
    pub(crate) metadata_max_bytes: Option<u32>,
}

/// PCI vendor id of QEMU's emulated NVMe controller (Identify Controller bytes 0-1).
const QEMU_VID: u16 = 0x1b36;

/// QEMU 7.2 loses the tail of a metadata transfer longer than 512 bytes that is not a
/// multiple of 512: of 768 bytes it moves the first 256 (seen in the VM: writes of 33, 40
/// and 48 blocks with 16 bytes each kept the metadata of their first 1, 8 and 16 blocks; 32
/// and 64 blocks were whole). Commands with metadata stay at or below 512 bytes of it there.
pub(crate) const QEMU_METADATA_MAX_BYTES: u32 = 512;

impl Passthru {
    /// Opens /dev/ngXnY for the NVMe namespace block device named `name` by the kernel, whose
    /// logical blocks are `block_size` bytes; why not, when it cannot.
    pub(crate) fn open(
        name: &Result<String, String>,
        block_size: u32,
        depth: u32,
    ) -> Result<Passthru, String> {
        let name = name.as_deref().map_err(|e| e.clone())?;
        let ng = crate::nvme::char_device_name(name)
            .ok_or_else(|| format!("{name} is not an NVMe namespace"))?;
        let path = PathBuf::from("/dev").join(ng);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: NVME_IOCTL_ID takes no argument and returns the namespace id or -1.
        let nsid = unsafe { libc::ioctl(file.as_raw_fd(), crate::nvme::NVME_IOCTL_ID) };
        if nsid <= 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("{}: namespace id: {e}", path.display()));
        }
        let nsid = nsid as u32;
        let shown = |why: String| format!("{}: {why}", path.display());
        let (copy, metadata, metadata_max_bytes) = match identify_pair(file.as_raw_fd(), nsid) {
            Ok((ctrl, ns)) => (
                copy_limits(ctrl.as_slice(), ns.as_slice()).map_err(shown),
                metadata_of(ns.as_slice(), block_size).map_err(shown),
                metadata_limit(ctrl.as_slice()),
            ),
            Err(why) => (Err(shown(why.clone())), Err(shown(why)), None),
        };
        let ring = Ring::start_passthru(file.as_raw_fd(), depth)
            .map_err(|e| format!("{}: io_uring with 128-byte entries: {e}", path.display()))?;
        Ok(Passthru {
            ring,
            _file: file,
            nsid,
            copy,
            metadata,
            metadata_max_bytes,
        })
    }

    /// Runs `cmd` with its data buffer and optional metadata buffer, bounded by `queued`
    /// (the device's queue depth, shared with the block device's ring).
    pub(crate) async fn run(
        &self,
        queued: &Semaphore,
        cmd: NvmeCmd,
        buf: AlignedBuf,
        meta: Option<AlignedBuf>,
    ) -> Done {
        // The semaphore is never closed, so acquire fails only if it were.
        let Ok(_permit) = queued.acquire().await else {
            return Done::failed(libc::ENXIO);
        };
        match self.ring.submit(Cmd::Passthru { cmd, buf, meta }).await {
            Ok(done) => done,
            // The ring thread is gone: the device is not usable any more.
            Err(_) => Done::failed(libc::ENXIO),
        }
    }
}

/// Metadata bytes per block of the namespace's LBA format, when it has metadata in a
/// separate buffer; else why per-block metadata is not offered (one line for users).
fn metadata_of(ns: &[u8], block_size: u32) -> Result<u32, String> {
    let f = lba_format(ns)?;
    if f.data_bytes != block_size {
        return Err(format!(
            "the LBA format's {}-byte blocks are not the block device's {block_size}",
            f.data_bytes
        ));
    }
    if f.metadata_bytes == 0 {
        return Err(
            "the namespace is formatted without per-block metadata (LBA format with MS 0)".into(),
        );
    }
    if f.extended {
        return Err(format!(
            "the namespace keeps its {} metadata bytes at the end of each block (extended LBA, FLBAS bit 4); this backend sends metadata in a separate buffer",
            f.metadata_bytes
        ));
    }
    Ok(u32::from(f.metadata_bytes))
}

/// The limit on metadata bytes per command the controller of Identify data `ctrl` needs.
fn metadata_limit(ctrl: &[u8]) -> Option<u32> {
    let vid = u16::from_le_bytes([*ctrl.first()?, *ctrl.get(1)?]);
    (vid == QEMU_VID).then_some(QEMU_METADATA_MAX_BYTES)
}

/// Identify Controller and Identify Namespace (admin commands, which need CAP_SYS_ADMIN).
fn identify_pair(fd: RawFd, nsid: u32) -> Result<(AlignedBuf, AlignedBuf), String> {
    let identify = |cns: u8, nsid: u32| -> Result<AlignedBuf, String> {
        let mut buf =
            AlignedBuf::zeroed(IDENTIFY_BYTES).ok_or_else(|| "out of memory".to_string())?;
        match completion(ioctl::nvme_admin(
            fd,
            &NvmeCmd::identify(nsid, cns),
            &mut buf,
        )) {
            Completion::Ok => Ok(buf),
            Completion::Status(s) => Err(format!("Identify (CNS {cns}) failed: {s}")),
            Completion::Errno(e) => Err(format!(
                "Identify (CNS {cns}) failed: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    };
    Ok((identify(CNS_CONTROLLER, 0)?, identify(CNS_NAMESPACE, nsid)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_needs_a_separate_buffer_of_the_block_size() {
        let mut ns = vec![0u8; IDENTIFY_BYTES];
        ns[128..130].copy_from_slice(&8u16.to_le_bytes());
        ns[130] = 12;
        assert_eq!(metadata_of(&ns, 4096), Ok(8));
        assert!(metadata_of(&ns, 512)
            .unwrap_err()
            .contains("not the block device's 512"));
        ns[26] = 0x10;
        assert!(metadata_of(&ns, 4096).unwrap_err().contains("extended LBA"));
        ns[26] = 0;
        ns[128] = 0;
        assert!(metadata_of(&ns, 4096).unwrap_err().contains("MS 0"));
    }

    #[test]
    fn only_qemu_limits_metadata_per_command() {
        let mut ctrl = vec![0u8; IDENTIFY_BYTES];
        assert_eq!(metadata_limit(&ctrl), None);
        ctrl[..2].copy_from_slice(&0x1b36u16.to_le_bytes());
        assert_eq!(metadata_limit(&ctrl), Some(512));
        assert_eq!(metadata_limit(&[]), None);
    }
}
