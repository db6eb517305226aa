//! Checkpoints: the whole mapping written to one of two slots, alternately, so that a mount
//! reads the newest complete one and scans only the zones written since. A checkpoint torn
//! by a crash fails its checksum and the other slot's older one is used.
//!
//! Encoding is pure (`encode`/`decode`); `write_slot`/`read_slot` do the device I/O.
//! docs/FORMAT.md has the byte layout.
//!
//! Fault model of the decoders: a slot holds anything a crash, a bug or the media left there.
//! A checksum mismatch is a torn or damaged checkpoint, and the other slot's is used. A
//! checkpoint whose checksums hold is trusted no further than its fields are consistent:
//! every value used as an index, a size or a counter is checked against the header and the
//! layout rules, and one out of range is `CkptError::Corrupt`, which refuses the mount (it
//! means a bug or damage the checksum missed; the older slot may lack trims the newer one
//! made durable, so falling back to it could bring trimmed data back).

use zns::{NvmeStatus, ZoneAction, ZonedDevice};

use crate::layout::{self, Layout, CKPT_HEADER_BYTES};
use crate::map::{Mapping, ZoneUse, UNMAPPED};
use crate::records::COUNTER_LIMIT;

const MAGIC: &[u8; 8] = b"ZSTKFTLC";
/// The format version of a volume without threaded logging: its checkpoints are byte for
/// byte what every build wrote before version 2, so any build mounts it.
pub const VERSION_1: u32 = 1;
/// The newest format version, of a volume with threaded logging: it may hold
/// threaded-logging records, which a build of version 1 would read as damaged trim records.
/// A volume of version 1 with threaded logging (written before the records) is read, and
/// its next checkpoints are version 2 (docs/FORMAT.md, "Versions").
pub const VERSION: u32 = 2;

/// The format version a checkpoint of a volume with `flags` is written with.
pub fn version_for(flags: u32) -> u32 {
    if flags & FLAG_THREADED_LOGGING != 0 {
        VERSION
    } else {
        VERSION_1
    }
}

/// The fixed part of a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CkptHeader {
    /// Format version: `VERSION_1`, or `VERSION` with threaded logging (`version_for`).
    pub version: u32,
    /// Increases with every checkpoint; the larger complete one wins.
    pub number: u64,
    pub volume_id: u64,
    /// The next sequence number when the snapshot was taken.
    pub seq: u64,
    pub volume_blocks: u64,
    pub data_zones: u32,
    pub op_permille: u32,
    pub first_data_zone: u32,
    pub slot_zones: u32,
    pub reserve_zones: u32,
    pub zone_blocks: u64,
    pub body_bytes: u64,
    pub body_crc: u32,
    /// Volume flags (`FLAG_*`), fixed at format.
    pub flags: u32,
}

/// Flag: the volume was formatted with threaded logging (threaded.rs; needs a ZNS+ device
/// and per-block metadata).
pub const FLAG_THREADED_LOGGING: u32 = 1;

/// A zone as a checkpoint records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CkptZone {
    pub use_: u8,
    pub generation: u64,
    /// Where a recovery scan of this zone starts (its completed prefix).
    pub scan_from: u64,
    pub valid: u64,
}

pub const ZONE_FREE: u8 = 0;
pub const ZONE_OPEN: u8 = 1;
pub const ZONE_FULL: u8 = 2;

/// A decoded checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub header: CkptHeader,
    pub l2p: Vec<u32>,
    pub seq: Vec<u64>,
    pub zones: Vec<CkptZone>,
}

/// Why a checkpoint was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CkptError {
    #[error("no checkpoint here (bad magic)")]
    NoCheckpoint,
    #[error("checkpoint format version {0} is newer than this build supports ({VERSION}): the volume was written by a newer build")]
    Version(u32),
    #[error("checkpoint header checksum mismatch")]
    HeaderChecksum,
    #[error("checkpoint body checksum mismatch (torn or corrupt)")]
    BodyChecksum,
    #[error("checkpoint does not match this device: {0}")]
    Mismatch(String),
    #[error("checkpoint is corrupt though its checksums match: {0}")]
    Corrupt(String),
    #[error("device error reading or writing a checkpoint: {0}")]
    Device(#[from] NvmeStatus),
}

/// Reads a little-endian u32; zero past the end, which callers rule out by checking the
/// length first (it is never a value they act on).
fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// Reads a little-endian u64; zero past the end, as for `u32_at`.
fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn corrupt<T>(msg: String) -> Result<T, CkptError> {
    Err(CkptError::Corrupt(msg))
}

pub fn encode_header(h: &CkptHeader) -> Vec<u8> {
    let mut b = vec![0u8; CKPT_HEADER_BYTES as usize];
    b[..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&h.version.to_le_bytes());
    b[12..16].copy_from_slice(&h.flags.to_le_bytes());
    b[16..24].copy_from_slice(&h.number.to_le_bytes());
    b[24..32].copy_from_slice(&h.volume_id.to_le_bytes());
    b[32..40].copy_from_slice(&h.seq.to_le_bytes());
    b[40..48].copy_from_slice(&h.volume_blocks.to_le_bytes());
    b[48..52].copy_from_slice(&h.data_zones.to_le_bytes());
    b[52..56].copy_from_slice(&h.op_permille.to_le_bytes());
    b[56..60].copy_from_slice(&h.first_data_zone.to_le_bytes());
    b[60..64].copy_from_slice(&h.slot_zones.to_le_bytes());
    b[64..68].copy_from_slice(&h.reserve_zones.to_le_bytes());
    b[72..80].copy_from_slice(&h.zone_blocks.to_le_bytes());
    b[80..88].copy_from_slice(&h.body_bytes.to_le_bytes());
    b[88..92].copy_from_slice(&h.body_crc.to_le_bytes());
    let crc = crc32c::crc32c(&b[..92]);
    b[92..96].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes and validates a checkpoint header (`validate_header` has the rules).
pub fn decode_header(b: &[u8]) -> Result<CkptHeader, CkptError> {
    let (Some(magic), Some(covered)) = (b.get(..8), b.get(..92)) else {
        return Err(CkptError::NoCheckpoint);
    };
    if magic != MAGIC || b.len() < 96 {
        return Err(CkptError::NoCheckpoint);
    }
    if crc32c::crc32c(covered) != u32_at(b, 92) {
        return Err(CkptError::HeaderChecksum);
    }
    let v = u32_at(b, 8);
    if v > VERSION {
        return Err(CkptError::Version(v));
    }
    if v == 0 {
        return corrupt("format version 0 (versions start at 1)".into());
    }
    if u32_at(b, 12) & !FLAG_THREADED_LOGGING != 0 || u32_at(b, 68) != 0 {
        return corrupt(format!(
            "unknown flags {:#x} at bytes 12..16, or reserved bytes 68..72 are not zero",
            u32_at(b, 12)
        ));
    }
    if v == VERSION && u32_at(b, 12) & FLAG_THREADED_LOGGING == 0 {
        return corrupt(format!(
            "format version {v} without the threaded-logging flag (a volume without it is version {VERSION_1})"
        ));
    }
    let h = CkptHeader {
        version: v,
        number: u64_at(b, 16),
        volume_id: u64_at(b, 24),
        seq: u64_at(b, 32),
        volume_blocks: u64_at(b, 40),
        data_zones: u32_at(b, 48),
        op_permille: u32_at(b, 52),
        first_data_zone: u32_at(b, 56),
        slot_zones: u32_at(b, 60),
        reserve_zones: u32_at(b, 64),
        zone_blocks: u64_at(b, 72),
        body_bytes: u64_at(b, 80),
        body_crc: u32_at(b, 88),
        flags: u32_at(b, 12),
    };
    validate_header(&h)?;
    Ok(h)
}

/// Checks that a header describes a layout `Layout::new` could have made, so that its sizes
/// can be multiplied and used to size and index the body: a corrupt but checksummed header
/// is refused here rather than overflowing or indexing out of bounds later.
pub fn validate_header(h: &CkptHeader) -> Result<(), CkptError> {
    if h.number == 0 {
        return corrupt("checkpoint number is 0 (numbers start at 1)".into());
    }
    if h.seq == 0 || h.seq >= COUNTER_LIMIT {
        return corrupt(format!("next sequence number {} is outside 1..2^62", h.seq));
    }
    if h.slot_zones == 0 || h.slot_zones.checked_mul(2) != Some(h.first_data_zone) {
        return corrupt(format!(
            "first data zone {} is not twice the {} zones per slot",
            h.first_data_zone, h.slot_zones
        ));
    }
    if !layout::OP_PERMILLE_RANGE.contains(&h.op_permille) {
        return corrupt(format!(
            "over-provisioning {} per mille is outside {:?}",
            h.op_permille,
            layout::OP_PERMILLE_RANGE
        ));
    }
    if h.zone_blocks < layout::ZONE_BLOCKS_MIN
        || !layout::pba_space_fits(h.data_zones, h.zone_blocks)
    {
        return corrupt(format!(
            "{} data zones of {} blocks cannot be addressed (zones need at least {} blocks, all of them 32-bit addresses)",
            h.data_zones,
            h.zone_blocks,
            layout::ZONE_BLOCKS_MIN
        ));
    }
    if h.reserve_zones
        .checked_add(2)
        .is_none_or(|n| n > h.data_zones)
    {
        return corrupt(format!(
            "{} data zones leave no room for data beside {} reserve zones",
            h.data_zones, h.reserve_zones
        ));
    }
    let max = h
        .first_data_zone
        .checked_add(h.data_zones)
        .and_then(|zones| layout::flash_blocks(zones, h.zone_blocks))
        .and_then(|f| layout::volume_blocks_for_op(f, h.op_permille))
        .unwrap_or(0);
    if h.volume_blocks == 0 || h.volume_blocks > max {
        return corrupt(format!(
            "volume size {} blocks is outside 1..={max} for this layout",
            h.volume_blocks
        ));
    }
    let expected = layout::checkpoint_body_bytes(h.volume_blocks, h.data_zones);
    if expected != Some(h.body_bytes) {
        return corrupt(format!(
            "body length {} is not 12 x {} blocks + 32 x {} zones",
            h.body_bytes, h.volume_blocks, h.data_zones
        ));
    }
    Ok(())
}

/// Checks that a checkpoint header describes `layout`.
pub fn check_layout(h: &CkptHeader, layout: &Layout) -> Result<(), CkptError> {
    let fields = [
        ("volume size", h.volume_blocks, layout.volume_blocks),
        ("data zones", h.data_zones.into(), layout.data_zones.into()),
        (
            "first data zone",
            h.first_data_zone.into(),
            layout.first_data_zone.into(),
        ),
        (
            "checkpoint slot zones",
            h.slot_zones.into(),
            layout.slot_zones.into(),
        ),
        (
            "reserve zones",
            h.reserve_zones.into(),
            layout.reserve_zones.into(),
        ),
        ("zone capacity", h.zone_blocks, layout.zone_blocks),
    ];
    for (name, found, expected) in fields {
        if found != expected {
            return Err(CkptError::Mismatch(format!(
                "{name} is {found}, the device gives {expected}"
            )));
        }
    }
    Ok(())
}

/// Snapshots the mapping into an encoded checkpoint.
pub fn snapshot(m: &Mapping, number: u64, volume_id: u64) -> Vec<u8> {
    let l = &m.layout;
    let zones = m.zones.iter().enumerate().map(|(i, z)| {
        let (use_, scan_from) = match (z.use_, m.tl_scan_from(i as u32)) {
            // A zone threaded logging is about to re-open is scanned from its first hole.
            (ZoneUse::Full, Some(first_hole)) => (ZONE_OPEN, first_hole),
            (ZoneUse::Free, _) => (ZONE_FREE, 0),
            (ZoneUse::Open(_), _) => (ZONE_OPEN, z.prefix.end()),
            (ZoneUse::Full, _) if z.inflight > 0 => (ZONE_OPEN, z.prefix.end()),
            (ZoneUse::Full, _) => (ZONE_FULL, l.zone_blocks),
        };
        CkptZone {
            use_,
            generation: z.generation,
            scan_from,
            valid: z.valid,
        }
    });
    let flags = if m.threaded.enabled {
        FLAG_THREADED_LOGGING
    } else {
        0
    };
    let header = CkptHeader {
        version: version_for(flags),
        number,
        volume_id,
        seq: m.next_seq(),
        volume_blocks: l.volume_blocks,
        data_zones: l.data_zones,
        op_permille: l.op_permille,
        first_data_zone: l.first_data_zone,
        slot_zones: l.slot_zones,
        reserve_zones: l.reserve_zones,
        zone_blocks: l.zone_blocks,
        body_bytes: 0,
        body_crc: 0,
        flags,
    };
    encode_parts(header, &m.l2p, &m.seq, zones)
}

/// Encodes a decoded checkpoint again (both checksums and the body length are recomputed).
pub fn encode(ck: &Checkpoint) -> Vec<u8> {
    encode_parts(ck.header, &ck.l2p, &ck.seq, ck.zones.iter().copied())
}

/// The one body encoder: header with `body_bytes` and `body_crc` filled in, then the body.
fn encode_parts(
    header: CkptHeader,
    l2p: &[u32],
    seq: &[u64],
    zones: impl Iterator<Item = CkptZone>,
) -> Vec<u8> {
    let size = layout::checkpoint_body_bytes(header.volume_blocks, header.data_zones);
    let mut body = Vec::with_capacity(size.unwrap_or(0) as usize);
    for p in l2p {
        body.extend_from_slice(&p.to_le_bytes());
    }
    for s in seq {
        body.extend_from_slice(&s.to_le_bytes());
    }
    for z in zones {
        let mut e = [0u8; 32];
        e[0] = z.use_;
        e[8..16].copy_from_slice(&z.generation.to_le_bytes());
        e[16..24].copy_from_slice(&z.scan_from.to_le_bytes());
        e[24..32].copy_from_slice(&z.valid.to_le_bytes());
        body.extend_from_slice(&e);
    }
    let header = CkptHeader {
        body_bytes: body.len() as u64,
        body_crc: crc32c::crc32c(&body),
        ..header
    };
    let mut out = encode_header(&header);
    out.extend_from_slice(&body);
    out
}

/// Decodes a checkpoint body against its header and validates every entry: a checksum
/// mismatch or a short body is `BodyChecksum` (torn); an impossible entry is `Corrupt`.
pub fn decode_body(h: &CkptHeader, body: &[u8]) -> Result<Checkpoint, CkptError> {
    validate_header(h)?;
    let body = usize::try_from(h.body_bytes)
        .ok()
        .and_then(|n| body.get(..n))
        .ok_or(CkptError::BodyChecksum)?;
    if crc32c::crc32c(body) != h.body_crc {
        return Err(CkptError::BodyChecksum);
    }
    // The header's sizes were checked against the body length, so these splits hold.
    let v = h.volume_blocks as usize;
    let (l2p_bytes, rest) = body.split_at(v * 4);
    let (seq_bytes, zone_bytes) = rest.split_at(v * 8);
    let zones = zone_bytes
        .chunks_exact(32)
        .enumerate()
        .map(|(z, e)| decode_zone(h, z, e))
        .collect::<Result<Vec<_>, _>>()?;
    let l2p: Vec<u32> = l2p_bytes.chunks_exact(4).map(|c| u32_at(c, 0)).collect();
    let seq: Vec<u64> = seq_bytes.chunks_exact(8).map(|c| u64_at(c, 0)).collect();
    let mut mapped = vec![0u64; zones.len()];
    for (lba, (&pba, &s)) in l2p.iter().zip(&seq).enumerate() {
        if s >= h.seq {
            return corrupt(format!(
                "sequence number {s} of LBA {lba} is not below the header's next sequence number {}",
                h.seq
            ));
        }
        if pba == UNMAPPED {
            continue;
        }
        let z = u64::from(pba) / h.zone_blocks;
        let zone = zones.get(z as usize).ok_or_else(|| {
            CkptError::Corrupt(format!(
                "LBA {lba} maps to physical block {pba}, beyond the {} data zones of {} blocks",
                h.data_zones, h.zone_blocks
            ))
        })?;
        if u64::from(pba) % h.zone_blocks == 0 {
            return corrupt(format!(
                "LBA {lba} maps to physical block {pba}, the header block of data zone {z}"
            ));
        }
        if zone.use_ == ZONE_FREE || s == 0 {
            return corrupt(format!(
                "LBA {lba} maps to physical block {pba} in data zone {z} (use {}) with sequence number {s}: a mapped block needs a used zone and a sequence number",
                zone.use_
            ));
        }
        mapped[z as usize] += 1;
    }
    for (z, (zone, n)) in zones.iter().zip(&mapped).enumerate() {
        if zone.valid < *n {
            return corrupt(format!(
                "data zone {z} counts {} valid blocks, but {n} LBAs map into it",
                zone.valid
            ));
        }
    }
    Ok(Checkpoint {
        header: *h,
        l2p,
        seq,
        zones,
    })
}

/// Decodes and checks the 32-byte entry of data zone `z`.
fn decode_zone(h: &CkptHeader, z: usize, e: &[u8]) -> Result<CkptZone, CkptError> {
    let zone = CkptZone {
        use_: e.first().copied().unwrap_or(u8::MAX),
        generation: u64_at(e, 8),
        scan_from: u64_at(e, 16),
        valid: u64_at(e, 24),
    };
    let cap = h.zone_blocks;
    let bad = |what: String| corrupt(format!("data zone {z}: {what}"));
    if e.get(1..8).is_none_or(|pad| pad.iter().any(|b| *b != 0)) {
        return bad("reserved bytes 1..8 are not zero".into());
    }
    // Free zones keep the generation they had (0 if never opened); used ones were opened.
    let (scan_ok, gen_min) = match zone.use_ {
        ZONE_FREE => (zone.scan_from == 0 && zone.valid == 0, 0),
        ZONE_OPEN => (zone.scan_from <= cap, 1),
        ZONE_FULL => (zone.scan_from == cap, 1),
        u => return bad(format!("use {u} is not 0 (free), 1 (open) or 2 (full)")),
    };
    if zone.generation < gen_min || zone.generation >= COUNTER_LIMIT {
        return bad(format!(
            "generation {} is outside {gen_min}..2^62 for use {}",
            zone.generation, zone.use_
        ));
    }
    // Block 0 is the zone header, so at most `cap - 1` blocks hold data or trim records.
    if !scan_ok || zone.valid >= cap {
        return bad(format!(
            "scan start {} or valid count {} do not fit use {} in a zone of {cap} blocks",
            zone.scan_from, zone.valid, zone.use_
        ));
    }
    Ok(zone)
}

/// Writes an encoded checkpoint into `slot`: resets the slot's zones, writes, flushes.
pub async fn write_slot(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    bytes: &[u8],
) -> Result<(), CkptError> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    for i in 0..layout.slot_zones {
        dev.zone_mgmt(ZoneAction::Reset, layout.slot_zone_start(slot, i), false)
            .await?;
    }
    let blocks = bytes.len().div_ceil(bs) as u64;
    let chunk = u64::from(g.mdts_blocks.min(256));
    let mut buf = vec![0u8; (chunk as usize) * bs];
    let mut done = 0u64;
    while done < blocks {
        let zone = (done / layout.zone_blocks) as u32;
        let off = done % layout.zone_blocks;
        let n = chunk.min(blocks - done).min(layout.zone_blocks - off);
        let from = (done as usize) * bs;
        let to = (from + n as usize * bs).min(bytes.len());
        let part = &mut buf[..n as usize * bs];
        part.fill(0);
        part[..to - from].copy_from_slice(&bytes[from..to]);
        dev.write(layout.slot_zone_start(slot, zone) + off, part, None, false)
            .await?;
        done += n;
    }
    dev.flush().await?;
    // Release the open and active resources the slot's last, partly written zone holds.
    if !blocks.is_multiple_of(layout.zone_blocks) {
        let last = ((blocks - 1) / layout.zone_blocks) as u32;
        dev.zone_mgmt(
            ZoneAction::Finish,
            layout.slot_zone_start(slot, last),
            false,
        )
        .await?;
    }
    Ok(())
}

async fn read_bytes(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    from_block: u64,
    blocks: u64,
    out: &mut Vec<u8>,
) -> Result<(), CkptError> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let chunk = u64::from(g.mdts_blocks.min(256));
    let mut done = 0u64;
    let mut buf = vec![0u8; chunk as usize * bs];
    while done < blocks {
        let at = from_block + done;
        let zone = (at / layout.zone_blocks) as u32;
        let off = at % layout.zone_blocks;
        let n = chunk.min(blocks - done).min(layout.zone_blocks - off);
        let part = &mut buf[..n as usize * bs];
        dev.read(layout.slot_zone_start(slot, zone) + off, part, None)
            .await?;
        out.extend_from_slice(part);
        done += n;
    }
    Ok(())
}

/// Reads just the header of the checkpoint in `slot`.
pub async fn read_header(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
) -> Result<CkptHeader, CkptError> {
    let mut first = Vec::new();
    let hb = CKPT_HEADER_BYTES.div_ceil(u64::from(dev.geometry().block_size));
    read_bytes(dev, layout, slot, 0, hb, &mut first).await?;
    decode_header(&first)
}

/// Reads and validates the checkpoint in `slot`.
pub async fn read_slot(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
) -> Result<Checkpoint, CkptError> {
    let named = |e: CkptError| match e {
        CkptError::Corrupt(m) => CkptError::Corrupt(format!("slot {slot}: {m}")),
        other => other,
    };
    let h = read_header(dev, layout, slot).await.map_err(named)?;
    check_layout(&h, layout)?;
    let bs = u64::from(dev.geometry().block_size);
    let total = CKPT_HEADER_BYTES + h.body_bytes;
    if total > u64::from(layout.slot_zones) * layout.zone_blocks * bs {
        return Err(CkptError::BodyChecksum);
    }
    let mut all = Vec::with_capacity(total as usize);
    read_bytes(dev, layout, slot, 0, total.div_ceil(bs), &mut all).await?;
    let body = all.get(CKPT_HEADER_BYTES as usize..).unwrap_or_default();
    decode_body(&h, body).map_err(named)
}

/// Reads both slots and returns the newest valid checkpoint and its slot.
pub async fn read_latest(
    dev: &dyn ZonedDevice,
    layout: &Layout,
) -> Result<(u32, Checkpoint), CkptError> {
    let a = read_slot(dev, layout, 0).await;
    let b = read_slot(dev, layout, 1).await;
    match (a, b) {
        // Checksummed but impossible: never silently skipped for the other slot. Nor is a
        // newer format version: the newer build that wrote it may have written what this
        // one would misread since the other slot's checkpoint.
        (Err(e @ CkptError::Corrupt(_)), _) | (_, Err(e @ CkptError::Corrupt(_))) => Err(e),
        (Err(e @ CkptError::Version(_)), _) | (_, Err(e @ CkptError::Version(_))) => Err(e),
        (Ok(a), Ok(b)) if b.header.number > a.header.number => Ok((1, b)),
        (Ok(a), _) => Ok((0, a)),
        (Err(_), Ok(b)) => Ok((1, b)),
        (Err(e), Err(_)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = CkptHeader {
            version: VERSION,
            number: 3,
            volume_id: 9,
            seq: 100,
            volume_blocks: 1000,
            data_zones: 10,
            op_permille: 200,
            first_data_zone: 2,
            slot_zones: 1,
            reserve_zones: 3,
            zone_blocks: 192,
            body_bytes: 12_320,
            body_crc: 77,
            flags: FLAG_THREADED_LOGGING,
        };
        let b = encode_header(&h);
        assert_eq!(decode_header(&b), Ok(h));
        let mut d = b.clone();
        d[40] ^= 1;
        assert_eq!(decode_header(&d), Err(CkptError::HeaderChecksum));
        assert_eq!(decode_header(&[0u8; 100]), Err(CkptError::NoCheckpoint));
    }

    /// Version 1 is read with or without threaded logging (volumes written before version 2);
    /// version 2 needs the threaded-logging flag; 0 is corruption; a larger one is refused as
    /// newer than this build.
    #[test]
    fn header_versions() {
        let with = |version, flags| {
            let h = CkptHeader {
                version,
                number: 1,
                volume_id: 9,
                seq: 1,
                volume_blocks: 1000,
                data_zones: 10,
                op_permille: 200,
                first_data_zone: 2,
                slot_zones: 1,
                reserve_zones: 3,
                zone_blocks: 192,
                body_bytes: 12_320,
                body_crc: 0,
                flags,
            };
            decode_header(&encode_header(&h)).map(|d| (d.version, d.flags))
        };
        assert_eq!(version_for(0), VERSION_1);
        assert_eq!(version_for(FLAG_THREADED_LOGGING), VERSION);
        assert_eq!(with(1, 0), Ok((1, 0)));
        assert_eq!(
            with(1, FLAG_THREADED_LOGGING),
            Ok((1, FLAG_THREADED_LOGGING))
        );
        assert_eq!(
            with(2, FLAG_THREADED_LOGGING),
            Ok((2, FLAG_THREADED_LOGGING))
        );
        assert!(matches!(with(2, 0), Err(CkptError::Corrupt(m)) if m.contains("version 2")));
        assert!(matches!(with(0, 0), Err(CkptError::Corrupt(m)) if m.contains("version 0")));
        let newer = with(3, FLAG_THREADED_LOGGING);
        assert_eq!(newer, Err(CkptError::Version(3)));
        let text = newer.map_err(|e| e.to_string()).unwrap_err();
        assert!(
            text.contains("version 3 is newer than this build supports (2)"),
            "{text}"
        );
    }
}
