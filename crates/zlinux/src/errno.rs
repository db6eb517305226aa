//! Mapping the errors of the Linux block layer back to NVMe statuses. Sans-IO.
//!
//! The NVMe driver turns a completion status into a `blk_status_t` and the block layer turns
//! that into an errno (drivers/nvme/host/core.c `nvme_error_status`, block/blk-core.c
//! `blk_errors`). That loses information: every zone error except the two resource limits
//! becomes EIO. For EIO the device recovers the status from the zone's state after the
//! failure ([`diagnose_write`], [`diagnose_read`]), which is what a ZNS controller would have
//! checked. The table is in docs/DESIGN.md, "Real zoned devices".

use zns::{Geometry, Lba, NvmeStatus, ZoneDescriptor, ZoneState};

/// The command class an errno came from: the same errno means different things for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    ZoneMgmt,
    Flush,
}

/// The status for `errno` (positive) from a command of class `op`, before any diagnosis.
pub fn status_of(errno: i32, op: Op) -> NvmeStatus {
    match errno {
        // BLK_STS_ZONE_OPEN_RESOURCE <- Too Many Open Zones.
        libc::ETOOMANYREFS => NvmeStatus::TooManyOpenZones,
        // BLK_STS_ZONE_ACTIVE_RESOURCE <- Too Many Active Zones.
        libc::EOVERFLOW => NvmeStatus::TooManyActiveZones,
        // BLK_STS_TARGET <- LBA Out of Range.
        libc::EREMOTEIO => NvmeStatus::LbaOutOfRange,
        // BLK_STS_NOTSUPP <- Invalid Opcode / Invalid Field / ONCS not supported; EINVAL is the
        // block layer refusing a misaligned or malformed request before it reaches the drive.
        libc::EOPNOTSUPP | libc::EINVAL => NvmeStatus::InvalidField,
        // BLK_STS_MEDIUM <- Unrecovered Read Error, Write Fault, Access Denied, ...
        libc::ENODATA => match op {
            Op::Read => NvmeStatus::UnrecoveredReadError,
            _ => NvmeStatus::WriteFault,
        },
        // The device is read only or opened read only.
        libc::EROFS | libc::EPERM | libc::EACCES | libc::EBADF => {
            NvmeStatus::NamespaceWriteProtected
        }
        // BLK_STS_OFFLINE, a removed device.
        libc::ENODEV | libc::ENXIO => NvmeStatus::NamespaceNotReady,
        // Transient: resources, timeouts, retries exhausted by the driver.
        libc::EAGAIN | libc::ENOMEM | libc::EBUSY | libc::ETIMEDOUT | libc::EINTR => {
            NvmeStatus::InternalError
        }
        // BLK_STS_IOERR: every other NVMe status, zone errors included. Without a diagnosis
        // the closest status per command class.
        _ => match op {
            Op::Read => NvmeStatus::UnrecoveredReadError,
            Op::Write | Op::Flush => NvmeStatus::WriteFault,
            Op::ZoneMgmt => NvmeStatus::InvalidZoneStateTransition,
        },
    }
}

/// The status a ZNS controller gives a write of `blocks` at `lba` that failed with EIO, from
/// the state of its zone as reported after the failure.
pub fn diagnose_write(geo: &Geometry, zone: &ZoneDescriptor, lba: Lba, blocks: u64) -> NvmeStatus {
    let zone_end = zone.start + geo.zone_size;
    match zone.state {
        ZoneState::Full => NvmeStatus::ZoneIsFull,
        ZoneState::ReadOnly => NvmeStatus::ZoneIsReadOnly,
        ZoneState::Offline => NvmeStatus::ZoneIsOffline,
        _ if lba + blocks > zone_end || lba + blocks > zone.start + zone.capacity => {
            NvmeStatus::ZoneBoundaryError
        }
        _ if lba != zone.wp => NvmeStatus::ZoneInvalidWrite,
        _ => NvmeStatus::WriteFault,
    }
}

/// The status for a read of `blocks` at `lba` that failed with EIO.
pub fn diagnose_read(geo: &Geometry, zone: &ZoneDescriptor, lba: Lba, blocks: u64) -> NvmeStatus {
    if zone.state == ZoneState::Offline {
        NvmeStatus::ZoneIsOffline
    } else if lba + blocks > zone.start + geo.zone_size {
        NvmeStatus::ZoneBoundaryError
    } else {
        NvmeStatus::UnrecoveredReadError
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            block_size: 4096,
            oob_size: 0,
            zone_count: 4,
            zone_size: 256,
            zone_capacity: 192,
            max_open: 4,
            max_active: 6,
            zasl_blocks: 32,
            mdts_blocks: 128,
            copy_max_ranges: 1,
            copy_max_range_blocks: 1,
            copy_max_blocks: 1,
            cross_zone_reads: false,
        }
    }

    fn zone(state: ZoneState, wp: Lba) -> ZoneDescriptor {
        ZoneDescriptor {
            state,
            attributes: 0,
            capacity: 192,
            start: 256,
            wp,
        }
    }

    #[test]
    fn resource_limits_and_range_errors_keep_their_status() {
        assert_eq!(
            status_of(libc::ETOOMANYREFS, Op::Write),
            NvmeStatus::TooManyOpenZones
        );
        assert_eq!(
            status_of(libc::EOVERFLOW, Op::ZoneMgmt),
            NvmeStatus::TooManyActiveZones
        );
        assert_eq!(
            status_of(libc::EREMOTEIO, Op::Read),
            NvmeStatus::LbaOutOfRange
        );
        assert_eq!(
            status_of(libc::ENODATA, Op::Read),
            NvmeStatus::UnrecoveredReadError
        );
        assert_eq!(status_of(libc::ENODATA, Op::Write), NvmeStatus::WriteFault);
        assert_eq!(
            status_of(libc::EIO, Op::ZoneMgmt),
            NvmeStatus::InvalidZoneStateTransition
        );
        assert_eq!(
            status_of(libc::ENODEV, Op::Flush),
            NvmeStatus::NamespaceNotReady
        );
    }

    #[test]
    fn write_eio_is_diagnosed_from_the_zone_state() {
        let g = geo();
        assert_eq!(
            diagnose_write(&g, &zone(ZoneState::Full, 448), 300, 1),
            NvmeStatus::ZoneIsFull
        );
        assert_eq!(
            diagnose_write(&g, &zone(ZoneState::ReadOnly, 300), 300, 1),
            NvmeStatus::ZoneIsReadOnly
        );
        assert_eq!(
            diagnose_write(&g, &zone(ZoneState::Offline, 512), 300, 1),
            NvmeStatus::ZoneIsOffline
        );
        // Past the capacity (256 + 192 = 448) or into the next zone.
        assert_eq!(
            diagnose_write(&g, &zone(ZoneState::ImplicitlyOpened, 440), 440, 16),
            NvmeStatus::ZoneBoundaryError
        );
        assert_eq!(
            diagnose_write(&g, &zone(ZoneState::Empty, 256), 260, 1),
            NvmeStatus::ZoneInvalidWrite
        );
        assert_eq!(
            diagnose_write(&g, &zone(ZoneState::ImplicitlyOpened, 260), 260, 1),
            NvmeStatus::WriteFault
        );
    }

    #[test]
    fn read_eio_is_diagnosed_from_the_zone_state_and_range() {
        let g = geo();
        assert_eq!(
            diagnose_read(&g, &zone(ZoneState::Offline, 512), 300, 1),
            NvmeStatus::ZoneIsOffline
        );
        assert_eq!(
            diagnose_read(&g, &zone(ZoneState::Full, 448), 500, 16),
            NvmeStatus::ZoneBoundaryError
        );
        assert_eq!(
            diagnose_read(&g, &zone(ZoneState::Full, 448), 300, 16),
            NvmeStatus::UnrecoveredReadError
        );
    }
}
