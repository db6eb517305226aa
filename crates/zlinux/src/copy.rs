//! The host-side checks of a Simple Copy before it goes to the drive through passthrough.
//! Sans-IO: the geometry (with the limits Identify reported) and the destination zone's
//! descriptor in, a status out.
//!
//! Fault model: the drive checks every copy itself, but a drive may copy range by range and
//! stop at the first bad one, leaving the earlier ranges written and the write pointer moved
//! (QEMU 7.2 does: hw/nvme/ctrl.c checks MSSRL, the source bounds and the source zone per
//! range, the destination per range, and never checks MCL). The ZNS specification wants a
//! failed copy to change nothing, so everything the host can know beforehand is checked
//! here, in the order the emulator checks it (crates/zns/src/model.rs): the size limits, the
//! sources, the destination range, then the destination zone as reported just before the
//! copy. Only a race with another writer to the same zone, or a source zone going offline,
//! still reaches the drive's own checks.

use zns::{
    check_range, CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ZoneDescriptor, ZoneState,
};

/// The blocks a copy of `sources` writes, if it is within the size limits and every source
/// is readable as one range inside one zone.
pub fn check_sources(geo: &Geometry, sources: &[CopyRange]) -> NvmeResult<u64> {
    let too_many = sources.is_empty() || sources.len() > geo.copy_max_ranges as usize;
    let bad_range = sources
        .iter()
        .any(|r| r.blocks == 0 || r.blocks > u64::from(geo.copy_max_range_blocks));
    let total = sources
        .iter()
        .try_fold(0u64, |acc, r| acc.checked_add(r.blocks));
    let total = match total {
        Some(t) if !too_many && !bad_range && t <= u64::from(geo.copy_max_blocks) => t,
        _ => return Err(NvmeStatus::CommandSizeLimitExceeded),
    };
    for r in sources {
        check_range(geo, r.lba, r.blocks)?;
        // The drive reads the sources itself, without the block layer splitting them at zone
        // boundaries, so a source across zones fails unless the namespace reads across zones
        // (RAZB), which the block device interface does not tell.
        if r.lba / geo.zone_size != (r.lba + r.blocks - 1) / geo.zone_size {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
    }
    Ok(total)
}

/// Whether `blocks` can be written at `dest` in `zone` (its descriptor just before the copy):
/// the status a ZNS controller gives the write, or Ok.
pub fn check_dest(geo: &Geometry, zone: &ZoneDescriptor, dest: Lba, blocks: u64) -> NvmeResult<()> {
    match zone.state {
        ZoneState::Full => return Err(NvmeStatus::ZoneIsFull),
        ZoneState::ReadOnly => return Err(NvmeStatus::ZoneIsReadOnly),
        ZoneState::Offline => return Err(NvmeStatus::ZoneIsOffline),
        _ => {}
    }
    if dest != zone.wp {
        return Err(NvmeStatus::ZoneInvalidWrite);
    }
    if dest + blocks > zone.start + zone.capacity.min(geo.zone_size) {
        return Err(NvmeStatus::ZoneBoundaryError);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kit's geometry without metadata and with cross-zone reads, as a drive reports it.
    fn geo() -> Geometry {
        Geometry {
            oob_size: 0,
            cross_zone_reads: true,
            ..zns::conformance::kit_geometry()
        }
    }

    fn r(lba: Lba, blocks: u64) -> CopyRange {
        CopyRange { lba, blocks }
    }

    #[test]
    fn size_limits_come_first() {
        let g = geo();
        let csle = Err(NvmeStatus::CommandSizeLimitExceeded);
        assert_eq!(check_sources(&g, &[]), csle);
        assert_eq!(check_sources(&g, &[r(0, 1); 5]), csle);
        assert_eq!(check_sources(&g, &[r(0, 17)]), csle);
        assert_eq!(check_sources(&g, &[r(0, 16), r(0, 16), r(0, 1)]), csle);
        assert_eq!(check_sources(&g, &[r(0, 1), r(0, 0)]), csle);
        // Over the limits and out of range: the limits win, as on the emulator.
        assert_eq!(check_sources(&g, &[r(u64::MAX, 17)]), csle);
        assert_eq!(check_sources(&g, &[r(0, 16), r(16, 16)]), Ok(32));
        assert_eq!(check_sources(&g, &[r(0, 1); 4]), Ok(4));
    }

    #[test]
    fn sources_are_in_range_and_in_one_zone() {
        let g = geo();
        assert_eq!(
            check_sources(&g, &[r(0, 1), r(511, 2)]),
            Err(NvmeStatus::LbaOutOfRange)
        );
        // Even where plain reads may cross zones: the drive reads copy sources unsplit.
        assert_eq!(
            check_sources(&g, &[r(0, 1), r(62, 4)]),
            Err(NvmeStatus::ZoneBoundaryError)
        );
        assert_eq!(check_sources(&g, &[r(60, 4), r(64, 4)]), Ok(8));
    }

    fn zone(state: ZoneState, wp: Lba) -> ZoneDescriptor {
        ZoneDescriptor {
            state,
            attributes: 0,
            capacity: 48,
            start: 64,
            wp,
        }
    }

    #[test]
    fn destination_is_the_write_pointer_of_a_writable_zone_with_room() {
        let g = geo();
        let z = zone(ZoneState::ImplicitlyOpened, 80);
        assert_eq!(check_dest(&g, &z, 80, 32), Ok(()));
        assert_eq!(check_dest(&g, &z, 81, 1), Err(NvmeStatus::ZoneInvalidWrite));
        assert_eq!(
            check_dest(&g, &z, 80, 33),
            Err(NvmeStatus::ZoneBoundaryError)
        );
        assert_eq!(check_dest(&g, &zone(ZoneState::Empty, 64), 64, 48), Ok(()));
        // A full zone's WP is past its capacity: Zone Is Full, not a boundary error.
        assert_eq!(
            check_dest(&g, &zone(ZoneState::Full, 112), 112, 1),
            Err(NvmeStatus::ZoneIsFull)
        );
        assert_eq!(
            check_dest(&g, &zone(ZoneState::ReadOnly, 80), 80, 1),
            Err(NvmeStatus::ZoneIsReadOnly)
        );
        assert_eq!(
            check_dest(&g, &zone(ZoneState::Offline, 80), 80, 1),
            Err(NvmeStatus::ZoneIsOffline)
        );
    }
}
