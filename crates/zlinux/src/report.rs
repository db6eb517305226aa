//! Decoding BLKREPORTZONE replies (`struct blk_zone_report` + `struct blk_zone[]`, from
//! linux/blkzoned.h) into zone descriptors. Sans-IO: bytes in, descriptors out.
//!
//! Every field the kernel hands over is in 512-byte sectors; descriptors are in device blocks.

use zns::{Lba, ZoneDescriptor, ZoneState};

/// Size of `struct blk_zone_report` (sector u64, nr_zones u32, flags u32).
pub const REPORT_HEADER_BYTES: usize = 16;
/// Size of one `struct blk_zone`.
pub const ZONE_BYTES: usize = 64;
/// `BLK_ZONE_REP_CAPACITY`: the kernel filled in the capacity field.
pub const FLAG_CAPACITY: u32 = 1;
/// `BLK_ZONE_TYPE_SEQWRITE_REQ`: the only zone type a ZNS namespace has.
pub const TYPE_SEQWRITE_REQ: u8 = 2;
/// Sector size of the block layer.
pub const SECTOR_BYTES: u64 = 512;

/// Why a report could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("zone report is {0} bytes, shorter than its header says")]
    Truncated(usize),
    #[error("zone at sector {sector} has type {zone_type}, not sequential-write-required (conventional and sequential-write-preferred zones are not supported)")]
    ZoneType { sector: u64, zone_type: u8 },
    #[error("zone at sector {sector} has condition {cond:#x}, which no ZNS zone state matches")]
    Condition { sector: u64, cond: u8 },
    #[error("zone at sector {sector} is not aligned to the {block_size}-byte block size")]
    Misaligned { sector: u64, block_size: u32 },
}

/// The request header for `max_zones` zones starting at `sector`, followed by room for them.
pub fn request(sector: u64, max_zones: u32) -> Vec<u8> {
    let mut buf = vec![0u8; REPORT_HEADER_BYTES + ZONE_BYTES * max_zones as usize];
    buf[0..8].copy_from_slice(&sector.to_ne_bytes());
    buf[8..12].copy_from_slice(&max_zones.to_ne_bytes());
    buf
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

/// Decodes a filled-in report; `block_size` converts sectors to device blocks.
pub fn decode(reply: &[u8], block_size: u32) -> Result<Vec<ZoneDescriptor>, ReportError> {
    let header = reply
        .get(..REPORT_HEADER_BYTES)
        .ok_or(ReportError::Truncated(reply.len()))?;
    let mut nr = [0u8; 4];
    nr.copy_from_slice(&header[8..12]);
    let nr_zones = u32::from_ne_bytes(nr) as usize;
    let mut fl = [0u8; 4];
    fl.copy_from_slice(&header[12..16]);
    let has_capacity = u32::from_ne_bytes(fl) & FLAG_CAPACITY != 0;
    let end = REPORT_HEADER_BYTES + nr_zones * ZONE_BYTES;
    let zones = reply
        .get(REPORT_HEADER_BYTES..end)
        .ok_or(ReportError::Truncated(reply.len()))?;
    zones
        .chunks_exact(ZONE_BYTES)
        .map(|z| decode_zone(z, has_capacity, block_size))
        .collect()
}

fn decode_zone(
    z: &[u8],
    has_capacity: bool,
    block_size: u32,
) -> Result<ZoneDescriptor, ReportError> {
    let sector = u64_at(z, 0);
    let len = u64_at(z, 8);
    let wp = u64_at(z, 16);
    let (zone_type, cond) = (z[24], z[25]);
    // Without the capacity flag (kernels before 5.9) the capacity is the zone length.
    let capacity = if has_capacity { u64_at(z, 32) } else { len };
    if zone_type != TYPE_SEQWRITE_REQ {
        return Err(ReportError::ZoneType { sector, zone_type });
    }
    let spb = u64::from(block_size) / SECTOR_BYTES;
    if spb == 0
        || !sector.is_multiple_of(spb)
        || !len.is_multiple_of(spb)
        || !capacity.is_multiple_of(spb)
    {
        return Err(ReportError::Misaligned { sector, block_size });
    }
    // The block layer's zone conditions are the ZNS zone state values.
    let state = ZoneState::from_nvme_value(cond).ok_or(ReportError::Condition { sector, cond })?;
    let start: Lba = sector / spb;
    let wp = match state {
        // The kernel reports the WP of a full zone as the zone end (or all ones); the trait
        // says ZSLBA + capacity, where Finish leaves it.
        ZoneState::Full => start + capacity / spb,
        ZoneState::Offline => start + len / spb,
        _ if !wp.is_multiple_of(spb) => return Err(ReportError::Misaligned { sector, block_size }),
        _ => wp / spb,
    };
    Ok(ZoneDescriptor {
        state,
        attributes: 0,
        capacity: capacity / spb,
        start,
        wp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(sector: u64, len: u64, wp: u64, ty: u8, cond: u8, cap: u64) -> [u8; ZONE_BYTES] {
        let mut z = [0u8; ZONE_BYTES];
        z[0..8].copy_from_slice(&sector.to_ne_bytes());
        z[8..16].copy_from_slice(&len.to_ne_bytes());
        z[16..24].copy_from_slice(&wp.to_ne_bytes());
        z[24] = ty;
        z[25] = cond;
        z[32..40].copy_from_slice(&cap.to_ne_bytes());
        z
    }

    fn reply(flags: u32, zones: &[[u8; ZONE_BYTES]]) -> Vec<u8> {
        let mut r = request(0, zones.len() as u32);
        r[12..16].copy_from_slice(&flags.to_ne_bytes());
        for (i, z) in zones.iter().enumerate() {
            let at = REPORT_HEADER_BYTES + i * ZONE_BYTES;
            r[at..at + ZONE_BYTES].copy_from_slice(z);
        }
        r
    }

    #[test]
    fn decodes_states_capacity_and_write_pointer_in_blocks() {
        // 4 KiB blocks = 8 sectors; zones of 2048 sectors (256 blocks), capacity 1536 sectors.
        let r = reply(
            FLAG_CAPACITY,
            &[
                zone(0, 2048, 0, 2, 0x1, 1536),
                zone(2048, 2048, 2048 + 80, 2, 0x2, 1536),
                zone(4096, 2048, u64::MAX, 2, 0xE, 1536),
            ],
        );
        let z = decode(&r, 4096).unwrap();
        assert_eq!(z.len(), 3);
        assert_eq!(
            (z[0].state, z[0].start, z[0].wp, z[0].capacity),
            (ZoneState::Empty, 0, 0, 192)
        );
        assert_eq!(
            (z[1].state, z[1].start, z[1].wp),
            (ZoneState::ImplicitlyOpened, 256, 266)
        );
        assert_eq!((z[2].state, z[2].wp), (ZoneState::Full, 512 + 192));
    }

    #[test]
    fn without_the_capacity_flag_capacity_is_the_zone_length() {
        let r = reply(0, &[zone(0, 2048, 0, 2, 0x1, 0)]);
        assert_eq!(decode(&r, 512).unwrap()[0].capacity, 2048);
    }

    #[test]
    fn refuses_conventional_zones_bad_conditions_and_truncation() {
        let r = reply(FLAG_CAPACITY, &[zone(0, 2048, 0, 1, 0x0, 2048)]);
        assert_eq!(
            decode(&r, 512),
            Err(ReportError::ZoneType {
                sector: 0,
                zone_type: 1
            })
        );
        let r = reply(FLAG_CAPACITY, &[zone(0, 2048, 0, 2, 0x7, 2048)]);
        assert_eq!(
            decode(&r, 512),
            Err(ReportError::Condition { sector: 0, cond: 7 })
        );
        let r = reply(FLAG_CAPACITY, &[zone(4, 2048, 4, 2, 0x1, 2048)]);
        assert!(matches!(
            decode(&r, 4096),
            Err(ReportError::Misaligned { .. })
        ));
        let mut r = reply(FLAG_CAPACITY, &[zone(0, 2048, 0, 2, 0x1, 2048)]);
        r.truncate(40);
        assert_eq!(decode(&r, 512), Err(ReportError::Truncated(40)));
        assert_eq!(decode(&[0u8; 3], 512), Err(ReportError::Truncated(3)));
    }
}
