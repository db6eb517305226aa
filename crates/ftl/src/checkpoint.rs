//! Checkpoints: the whole mapping written to one of two slots, alternately, so that a mount
//! reads the newest complete one and scans only the zones written since. A checkpoint torn
//! by a crash fails its checksum and the other slot's older one is used. After a full
//! checkpoint, delta checkpoints (the mapping pages changed since the one before, and the
//! zone table) follow it in the same slot; a mount applies them in order while each is
//! complete and chained, and a torn one ends the chain.
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

use zns::{NvmeStatus, ZoneAction, ZoneState, ZonedDevice};

use crate::layout::{self, Layout, CKPT_HEADER_BYTES};
use crate::map::{Mapping, ZoneUse, MAP_PAGE_LBAS, UNMAPPED};
use crate::records::COUNTER_LIMIT;

const MAGIC: &[u8; 8] = b"ZSTKFTLC";
/// The format version of a volume without threaded logging: its checkpoints are byte for
/// byte what every build wrote before version 2, so any build mounts it.
pub const VERSION_1: u32 = 1;
/// The newest format version, of a volume with threaded logging: it may hold
/// threaded-logging records, which a build of version 1 would read as damaged trim records.
/// A volume of version 1 with threaded logging (written before the records) is read, and
/// its next checkpoints are version 2 (docs/FORMAT.md, "Versions").
pub const VERSION_2: u32 = 2;
/// The newest format version, of a volume whose slots hold delta checkpoints after their
/// full one: a build of version 2 or older would mount the full checkpoint alone and lose
/// trims and resets its deltas made durable. With or without threaded logging (then it may
/// hold threaded-logging records, as version 2). docs/FORMAT.md, "Versions".
pub const VERSION_3: u32 = 3;
pub const VERSION: u32 = VERSION_3;

/// The format version a checkpoint of a volume with `flags` is written with on a layout
/// without room for deltas (`Layout::has_delta_room`).
pub fn version_for(flags: u32) -> u32 {
    if flags & FLAG_THREADED_LOGGING != 0 {
        VERSION_2
    } else {
        VERSION_1
    }
}

/// The format version a full checkpoint of a volume with `flags` on `layout` is written
/// with: `VERSION_3` where the slots have room for deltas, else `version_for`.
pub fn full_version(flags: u32, layout: &Layout) -> u32 {
    if layout.has_delta_room() {
        VERSION_3
    } else {
        version_for(flags)
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

/// The format version of a header (full or delta) that starts with `magic` and whose CRC
/// over bytes 0..92 holds: `NoCheckpoint` without the magic, `HeaderChecksum` if the CRC
/// fails, `Version` if it is newer than this build reads.
fn checked_version(b: &[u8], magic: &[u8; 8]) -> Result<u32, CkptError> {
    let (Some(found), Some(covered)) = (b.get(..8), b.get(..92)) else {
        return Err(CkptError::NoCheckpoint);
    };
    if found != magic || b.len() < 96 {
        return Err(CkptError::NoCheckpoint);
    }
    if crc32c::crc32c(covered) != u32_at(b, 92) {
        return Err(CkptError::HeaderChecksum);
    }
    let v = u32_at(b, 8);
    if v > VERSION {
        return Err(CkptError::Version(v));
    }
    Ok(v)
}

/// Decodes and validates a checkpoint header (`validate_header` has the rules).
pub fn decode_header(b: &[u8]) -> Result<CkptHeader, CkptError> {
    let v = checked_version(b, MAGIC)?;
    if v == 0 {
        return corrupt("format version 0 (versions start at 1)".into());
    }
    if u32_at(b, 12) & !FLAG_THREADED_LOGGING != 0 || u32_at(b, 68) != 0 {
        return corrupt(format!(
            "unknown flags {:#x} at bytes 12..16, or reserved bytes 68..72 are not zero",
            u32_at(b, 12)
        ));
    }
    if v == VERSION_2 && u32_at(b, 12) & FLAG_THREADED_LOGGING == 0 {
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

/// The zone table as a checkpoint records it.
fn zone_table(m: &Mapping) -> impl Iterator<Item = CkptZone> + '_ {
    let l = &m.layout;
    m.zones.iter().enumerate().map(|(i, z)| {
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
    })
}

fn volume_flags(m: &Mapping) -> u32 {
    if m.threaded.enabled {
        FLAG_THREADED_LOGGING
    } else {
        0
    }
}

/// Snapshots the mapping into an encoded full checkpoint (the dirty bits are the caller's).
pub fn snapshot(m: &Mapping, number: u64, volume_id: u64) -> Vec<u8> {
    encode_parts(
        full_header(m, number, volume_id, 0),
        &m.l2p,
        &m.seq,
        zone_table(m),
    )
}

/// The header of a full checkpoint of `m` (its body's checksum still 0).
fn full_header(m: &Mapping, number: u64, volume_id: u64, body_bytes: u64) -> CkptHeader {
    let l = &m.layout;
    let flags = volume_flags(m);
    CkptHeader {
        version: full_version(flags, l),
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
        body_bytes,
        body_crc: 0,
        flags,
    }
}

/// Mapping pages a full checkpoint copies per hold of the map lock: 1,024 pages of 256
/// entries, 3 MiB encoded (a full checkpoint of a 70 GiB volume takes about 70 holds).
pub const FULL_COPY_PAGES: u64 = 1024;

/// A full checkpoint copied page by page (`MAP_PAGE_LBAS` entries at a time), so the map
/// lock is held for one stretch of pages at a time rather than for the whole mapping: `new`
/// clears the dirty bits, `copy_pages` copies the next pages, and `finish` (in one hold of
/// the lock) copies again every page changed since `new` and takes the zone table and the
/// next sequence number, so the result is the mapping as it is at `finish`, as `snapshot`
/// would have copied it there. `seal` then checksums it without the lock.
pub struct FullCopy {
    /// The encoded checkpoint: header space, then the body.
    out: Vec<u8>,
    next_page: u64,
    volume_blocks: usize,
    /// Set by `finish`.
    header: Option<CkptHeader>,
}

impl FullCopy {
    /// Starts a copy of `m`: clears its dirty bits (every page is copied).
    pub fn new(m: &mut Mapping) -> FullCopy {
        m.clear_dirty();
        let l = &m.layout;
        let body = layout::checkpoint_body_bytes(l.volume_blocks, l.data_zones).unwrap_or(0);
        FullCopy {
            out: vec![0u8; (CKPT_HEADER_BYTES + body) as usize],
            next_page: 0,
            volume_blocks: l.volume_blocks as usize,
            header: None,
        }
    }

    fn copy_page(&mut self, m: &Mapping, page: usize) {
        let p = MAP_PAGE_LBAS as usize;
        let v = self.volume_blocks;
        let range = page * p..((page + 1) * p).min(v);
        let h = CKPT_HEADER_BYTES as usize;
        let l2p_at = h + range.start * 4;
        for (c, e) in self.out[l2p_at..l2p_at + range.len() * 4]
            .chunks_exact_mut(4)
            .zip(&m.l2p[range.clone()])
        {
            c.copy_from_slice(&e.to_le_bytes());
        }
        let seq_at = h + v * 4 + range.start * 8;
        for (c, s) in self.out[seq_at..seq_at + range.len() * 8]
            .chunks_exact_mut(8)
            .zip(&m.seq[range])
        {
            c.copy_from_slice(&s.to_le_bytes());
        }
    }

    /// Copies up to `pages` more pages of `m`; true once every page was copied.
    pub fn copy_pages(&mut self, m: &Mapping, pages: u64) -> bool {
        let total = m.pages();
        let end = self.next_page.saturating_add(pages).min(total);
        for page in self.next_page..end {
            self.copy_page(m, page as usize);
        }
        self.next_page = end;
        end == total
    }

    /// Copies what is left and every page changed since `new` (clearing their bits), the
    /// zone table and the header fields of `m` now: checkpoint `number`, unsealed.
    pub fn finish(mut self, m: &mut Mapping, number: u64, volume_id: u64) -> FullCopy {
        while !self.copy_pages(m, u64::MAX) {}
        for page in m.take_dirty() {
            self.copy_page(m, page as usize);
        }
        let h = CKPT_HEADER_BYTES as usize;
        let zones_at = h + self.volume_blocks * 12;
        for (c, z) in self.out[zones_at..].chunks_exact_mut(32).zip(zone_table(m)) {
            c.copy_from_slice(&encode_zone(&z));
        }
        self.header = Some(full_header(
            m,
            number,
            volume_id,
            (self.out.len() - h) as u64,
        ));
        self
    }

    /// The encoded checkpoint, its body checksummed (no lock needed).
    pub fn seal(mut self) -> Vec<u8> {
        let h = CKPT_HEADER_BYTES as usize;
        if let Some(header) = self.header {
            let header = CkptHeader {
                body_crc: crc32c::crc32c(&self.out[h..]),
                ..header
            };
            self.out[..h].copy_from_slice(&encode_header(&header));
        }
        self.out
    }
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
        body.extend_from_slice(&encode_zone(&z));
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
    let ck = Checkpoint {
        header: *h,
        l2p,
        seq,
        zones,
    };
    validate_mapping(&ck)?;
    Ok(ck)
}

/// The body's rules on a decoded mapping (a full checkpoint's, or one with deltas applied):
/// sequence numbers below the header's next one, mapped entries into used zones' data
/// blocks, valid counts at least the entries into each zone.
fn validate_mapping(ck: &Checkpoint) -> Result<(), CkptError> {
    let h = &ck.header;
    let zones = &ck.zones;
    let mut mapped = vec![0u64; zones.len()];
    for (lba, (&pba, &s)) in ck.l2p.iter().zip(&ck.seq).enumerate() {
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
    Ok(())
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

const DELTA_MAGIC: &[u8; 8] = b"ZSTKFTLD";

/// The fixed part of a delta checkpoint (docs/FORMAT.md, "Delta checkpoint").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaHeader {
    /// Always `VERSION_3`.
    pub version: u32,
    /// The volume's flags, as its full checkpoint's.
    pub flags: u32,
    /// The previous checkpoint of the chain's number + 1.
    pub number: u64,
    pub volume_id: u64,
    /// The next sequence number when the snapshot was taken.
    pub seq: u64,
    /// The number of the full checkpoint the chain starts with.
    pub base: u64,
    /// Dirty mapping pages the body holds.
    pub pages: u32,
    pub body_bytes: u64,
    pub body_crc: u32,
}

/// Where a slot's chain ends after a mount read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChainEnd {
    /// Deltas applied after the full checkpoint.
    pub deltas: u64,
    /// Blocks of the slot the full checkpoint and those deltas take.
    pub end_block: u64,
    /// Blocks those deltas take.
    pub delta_blocks: u64,
}

pub fn encode_delta_header(h: &DeltaHeader) -> Vec<u8> {
    let mut b = vec![0u8; CKPT_HEADER_BYTES as usize];
    b[..8].copy_from_slice(DELTA_MAGIC);
    b[8..12].copy_from_slice(&h.version.to_le_bytes());
    b[12..16].copy_from_slice(&h.flags.to_le_bytes());
    b[16..24].copy_from_slice(&h.number.to_le_bytes());
    b[24..32].copy_from_slice(&h.volume_id.to_le_bytes());
    b[32..40].copy_from_slice(&h.seq.to_le_bytes());
    b[40..48].copy_from_slice(&h.base.to_le_bytes());
    b[48..52].copy_from_slice(&h.pages.to_le_bytes());
    b[52..56].copy_from_slice(&(MAP_PAGE_LBAS as u32).to_le_bytes());
    b[56..64].copy_from_slice(&h.body_bytes.to_le_bytes());
    b[64..68].copy_from_slice(&h.body_crc.to_le_bytes());
    let crc = crc32c::crc32c(&b[..92]);
    b[92..96].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a delta checkpoint's header and checks the fields it can check alone; the
/// chain's rules (`apply_delta`) need the checkpoint it follows.
pub fn decode_delta_header(b: &[u8]) -> Result<DeltaHeader, CkptError> {
    let v = checked_version(b, DELTA_MAGIC)?;
    let h = DeltaHeader {
        version: v,
        flags: u32_at(b, 12),
        number: u64_at(b, 16),
        volume_id: u64_at(b, 24),
        seq: u64_at(b, 32),
        base: u64_at(b, 40),
        pages: u32_at(b, 48),
        body_bytes: u64_at(b, 56),
        body_crc: u32_at(b, 64),
    };
    if v != VERSION_3 {
        return corrupt(format!(
            "delta checkpoint of format version {v} (deltas are version {VERSION_3})"
        ));
    }
    if u32_at(b, 52) != MAP_PAGE_LBAS as u32 || b[68..92].iter().any(|x| *x != 0) {
        return corrupt(format!(
            "delta checkpoint pages of {} blocks (this format has {MAP_PAGE_LBAS}), or reserved bytes 68..92 are not zero",
            u32_at(b, 52)
        ));
    }
    if h.base == 0 || h.number <= h.base || h.seq == 0 || h.seq >= COUNTER_LIMIT {
        return corrupt(format!(
            "delta checkpoint {} of base {} with next sequence number {}: the base is at least 1 and below the number, the sequence number in 1..2^62",
            h.number, h.base, h.seq
        ));
    }
    Ok(h)
}

/// Snapshots the dirty mapping pages (clearing their bits) and the zone table into an
/// encoded delta checkpoint `number` of the chain of full checkpoint `base`.
pub fn snapshot_delta(m: &mut Mapping, number: u64, base: u64, volume_id: u64) -> Vec<u8> {
    let pages = m.take_dirty();
    let v = m.layout.volume_blocks as usize;
    let p = MAP_PAGE_LBAS as usize;
    let mut body = Vec::new();
    for i in &pages {
        body.extend_from_slice(&i.to_le_bytes());
    }
    for i in &pages {
        let range = *i as usize * p..((*i as usize + 1) * p).min(v);
        for e in &m.l2p[range.clone()] {
            body.extend_from_slice(&e.to_le_bytes());
        }
        for s in &m.seq[range] {
            body.extend_from_slice(&s.to_le_bytes());
        }
    }
    for z in zone_table(m) {
        body.extend_from_slice(&encode_zone(&z));
    }
    let header = DeltaHeader {
        version: VERSION_3,
        flags: volume_flags(m),
        number,
        volume_id,
        seq: m.next_seq(),
        base,
        pages: pages.len() as u32,
        body_bytes: body.len() as u64,
        body_crc: crc32c::crc32c(&body),
    };
    let mut out = encode_delta_header(&header);
    out.extend_from_slice(&body);
    out
}

/// Applies the delta checkpoint `h` with `body` to `ck`, the checkpoint it follows in the
/// chain of full checkpoint `base`, and validates the result as a full body. A short body
/// or a checksum mismatch is `BodyChecksum` (torn: the chain ends before it, `ck` is
/// untouched); a delta that breaks the chain (another base, volume or flags, a number not
/// the previous + 1, a sequence number going back) or whose page indices or lengths are
/// impossible is `Corrupt`.
pub fn apply_delta(
    ck: &mut Checkpoint,
    base: u64,
    h: &DeltaHeader,
    body: &[u8],
) -> Result<(), CkptError> {
    apply_delta_entries(ck, base, h, body)?;
    validate_mapping(ck)
}

/// `apply_delta` without validating the whole mapping afterwards: the delta's own fields
/// are checked (its chain, length, page indices and zone table), the mapping's rules are
/// the caller's to check once the chain's last delta is applied (`read_chain`). Checking
/// them after every delta cost a pass over the whole mapping per delta: about 50 ms each at
/// 16 GiB, and a chain holds dozens.
fn apply_delta_entries(
    ck: &mut Checkpoint,
    base: u64,
    h: &DeltaHeader,
    body: &[u8],
) -> Result<(), CkptError> {
    if h.base != base
        || h.number != ck.header.number.saturating_add(1)
        || h.volume_id != ck.header.volume_id
        || h.flags != ck.header.flags
        || h.seq < ck.header.seq
    {
        return corrupt(format!(
            "delta checkpoint {} (base {}, volume {:#x}, flags {:#x}, next sequence number {}) does not follow checkpoint {} (base {base}, volume {:#x}, flags {:#x}, next sequence number {})",
            h.number,
            h.base,
            h.volume_id,
            h.flags,
            h.seq,
            ck.header.number,
            ck.header.volume_id,
            ck.header.flags,
            ck.header.seq
        ));
    }
    let body = usize::try_from(h.body_bytes)
        .ok()
        .and_then(|n| body.get(..n))
        .ok_or(CkptError::BodyChecksum)?;
    if crc32c::crc32c(body) != h.body_crc {
        return Err(CkptError::BodyChecksum);
    }
    let v = ck.header.volume_blocks as usize;
    let p = MAP_PAGE_LBAS as usize;
    let n = h.pages as usize;
    let pages = v.div_ceil(p);
    let index_bytes = n.checked_mul(4).filter(|_| n <= pages);
    let Some((index, rest)) = index_bytes.and_then(|b| body.split_at_checked(b)) else {
        return corrupt(format!(
            "delta checkpoint {} holds {n} pages, more than its body or the volume's {pages} pages",
            h.number
        ));
    };
    let index: Vec<usize> = index
        .chunks_exact(4)
        .map(|c| u32_at(c, 0) as usize)
        .collect();
    let mut entries = 0usize;
    for (k, &i) in index.iter().enumerate() {
        if i >= pages || (k > 0 && i <= index[k - 1]) {
            return corrupt(format!(
                "delta checkpoint {}: page index {i} at position {k} is not ascending below the volume's {pages} pages",
                h.number
            ));
        }
        entries += ((i + 1) * p).min(v) - i * p;
    }
    let zones_bytes = ck.zones.len() * 32;
    if rest.len() != entries * 12 + zones_bytes {
        return corrupt(format!(
            "delta checkpoint {}: body length {} is not 4 x {n} pages + 12 x {entries} entries + 32 x {} zones",
            h.number,
            body.len(),
            ck.zones.len()
        ));
    }
    let (pages_bytes, zone_bytes) = rest.split_at(entries * 12);
    let header = CkptHeader {
        number: h.number,
        seq: h.seq,
        ..ck.header
    };
    let zones = zone_bytes
        .chunks_exact(32)
        .enumerate()
        .map(|(z, e)| decode_zone(&header, z, e))
        .collect::<Result<Vec<_>, _>>()?;
    let mut at = 0;
    for &i in &index {
        let range = i * p..((i + 1) * p).min(v);
        let len = range.len();
        let (l2p, rest) = pages_bytes[at..].split_at(len * 4);
        for (e, c) in ck.l2p[range.clone()].iter_mut().zip(l2p.chunks_exact(4)) {
            *e = u32_at(c, 0);
        }
        for (s, c) in ck.seq[range]
            .iter_mut()
            .zip(rest[..len * 8].chunks_exact(8))
        {
            *s = u64_at(c, 0);
        }
        at += len * 12;
    }
    ck.header = header;
    ck.zones = zones;
    Ok(())
}

fn encode_zone(z: &CkptZone) -> [u8; 32] {
    let mut e = [0u8; 32];
    e[0] = z.use_;
    e[8..16].copy_from_slice(&z.generation.to_le_bytes());
    e[16..24].copy_from_slice(&z.scan_from.to_le_bytes());
    e[24..32].copy_from_slice(&z.valid.to_le_bytes());
    e
}

/// Writes an encoded full checkpoint into `slot`: resets the slot's zones, writes, flushes.
/// The slot's last, partly written zone is finished, or only closed when `deltas` may
/// follow (it stays active until `seal_slot`).
pub async fn write_slot(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    bytes: &[u8],
    deltas: bool,
) -> Result<(), CkptError> {
    for i in 0..layout.slot_zones {
        dev.zone_mgmt(ZoneAction::Reset, layout.slot_zone_start(slot, i), false)
            .await?;
    }
    write_at(dev, layout, slot, 0, bytes, deltas).await
}

/// Writes an encoded delta checkpoint into `slot` from block `from_block` (right after the
/// chain's last checkpoint), flushes, and closes its partly written zone.
pub async fn append_slot(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    from_block: u64,
    bytes: &[u8],
) -> Result<(), CkptError> {
    write_at(dev, layout, slot, from_block, bytes, true).await
}

async fn write_at(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    from_block: u64,
    bytes: &[u8],
    keep_open: bool,
) -> Result<(), CkptError> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let blocks = bytes.len().div_ceil(bs) as u64;
    let chunk = u64::from(g.mdts_blocks.min(256));
    let mut buf = vec![0u8; (chunk as usize) * bs];
    let mut done = 0u64;
    while done < blocks {
        let at = from_block + done;
        let zone = (at / layout.zone_blocks) as u32;
        let off = at % layout.zone_blocks;
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
    // Release the open (and, without deltas to follow, the active) resources the slot's
    // last, partly written zone holds.
    let end = from_block + blocks;
    if !end.is_multiple_of(layout.zone_blocks) {
        let last = layout.slot_zone_start(slot, (end / layout.zone_blocks) as u32);
        let action = if keep_open {
            ZoneAction::Close
        } else {
            ZoneAction::Finish
        };
        dev.zone_mgmt(action, last, false).await?;
    }
    Ok(())
}

/// Finishes the zones of `slot` a chain left partly written (open or closed), so that the
/// next full checkpoint, in the other slot, is the only checkpoint zone active.
pub async fn seal_slot(dev: &dyn ZonedDevice, layout: &Layout, slot: u32) -> Result<(), CkptError> {
    let report = dev
        .report_zones(
            layout.slot_zone_start(slot, 0),
            zns::ReportFilter::All,
            false,
            layout.slot_zones as usize,
        )
        .await?;
    for z in report.zones.iter().take(layout.slot_zones as usize) {
        if matches!(
            z.state,
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed
        ) {
            dev.zone_mgmt(ZoneAction::Finish, z.start, false).await?;
        }
    }
    Ok(())
}

/// Blocks an encoded checkpoint (full or delta) of `bytes` bytes takes.
pub fn blocks_of(bytes: u64, block_size: u32) -> u64 {
    bytes.div_ceil(u64::from(block_size))
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

/// The newest valid full checkpoint, its slot, and the blocks read to find it.
pub struct Latest {
    pub slot: u32,
    pub checkpoint: Checkpoint,
    pub blocks_read: u64,
    /// The other slot's header as read here (its format version matters to the mount).
    pub other_header: Result<CkptHeader, CkptError>,
}

/// Returns the newest valid full checkpoint and its slot. Both slots' headers are read; a
/// body is read only for the newer one, and for the other one if that fails (torn, or a
/// device error). A header that is checksummed but impossible, or of a newer format
/// version, in either slot refuses the mount, as does a body checksummed but impossible
/// in the slot read: never silently skipped for the other slot. Reading only the newer
/// body halves what a mount reads (each body is 12 bytes per logical block).
pub async fn read_latest(dev: &dyn ZonedDevice, layout: &Layout) -> Result<Latest, CkptError> {
    let headers = [
        read_header(dev, layout, 0).await,
        read_header(dev, layout, 1).await,
    ];
    let bs = dev.geometry().block_size;
    let mut blocks_read = 2 * blocks_of(CKPT_HEADER_BYTES, bs);
    for (slot, h) in headers.iter().enumerate() {
        // Checksummed but impossible: never silently skipped for the other slot. Nor is a
        // newer format version: the newer build that wrote it may have written what this
        // one would misread since the other slot's checkpoint.
        match h {
            Err(CkptError::Corrupt(m)) => {
                return Err(CkptError::Corrupt(format!("slot {slot}: {m}")))
            }
            Err(e @ CkptError::Version(_)) => return Err(e.clone()),
            _ => {}
        }
    }
    let order: Vec<u32> = match &headers {
        [Ok(a), Ok(b)] if b.number > a.number => vec![1, 0],
        [Ok(_), Ok(_)] => vec![0, 1],
        [Ok(_), Err(_)] => vec![0],
        [Err(_), Ok(_)] => vec![1],
        [Err(e), Err(_)] => return Err(e.clone()),
    };
    let mut first_err = None;
    for slot in order {
        match read_slot(dev, layout, slot).await {
            Ok(checkpoint) => {
                blocks_read += blocks_of(CKPT_HEADER_BYTES + checkpoint.header.body_bytes, bs);
                return Ok(Latest {
                    slot,
                    checkpoint,
                    blocks_read,
                    other_header: headers[1 - slot as usize].clone(),
                });
            }
            Err(e @ (CkptError::Corrupt(_) | CkptError::Version(_))) => return Err(e),
            Err(e) => {
                if let Ok(h) = &headers[slot as usize] {
                    blocks_read += blocks_of(CKPT_HEADER_BYTES + h.body_bytes, bs);
                }
                first_err.get_or_insert(e);
            }
        }
    }
    Err(first_err.unwrap_or(CkptError::NoCheckpoint))
}

/// Applies the delta checkpoints that follow the full checkpoint `ck` in `slot`, in order,
/// while each is complete and chained: one that is not there, torn (a checksum mismatch)
/// or past the slot's end ends the chain; one whose checksums hold but that breaks a rule
/// refuses the mount (`Corrupt`), as a full checkpoint's would.
pub async fn read_chain(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    ck: &mut Checkpoint,
) -> Result<ChainEnd, CkptError> {
    let bs = dev.geometry().block_size;
    let mut end = ChainEnd {
        end_block: blocks_of(CKPT_HEADER_BYTES + ck.header.body_bytes, bs),
        ..ChainEnd::default()
    };
    if ck.header.version < VERSION_3 {
        return Ok(end);
    }
    let base = ck.header.number;
    let slot_blocks = layout.slot_blocks();
    let hb = blocks_of(CKPT_HEADER_BYTES, bs);
    let named = |e: CkptError| match e {
        CkptError::Corrupt(m) => CkptError::Corrupt(format!("slot {slot}: {m}")),
        other => other,
    };
    while end.end_block + hb <= slot_blocks {
        let mut head = Vec::new();
        read_bytes(dev, layout, slot, end.end_block, hb, &mut head).await?;
        let h = match decode_delta_header(&head) {
            Ok(h) => h,
            Err(CkptError::NoCheckpoint | CkptError::HeaderChecksum) => break,
            Err(e) => return Err(named(e)),
        };
        let blocks = h
            .body_bytes
            .checked_add(CKPT_HEADER_BYTES)
            .map(|b| blocks_of(b, bs))
            .filter(|b| end.end_block + b <= slot_blocks);
        let Some(blocks) = blocks else { break };
        let mut all = Vec::new();
        read_bytes(dev, layout, slot, end.end_block, blocks, &mut all).await?;
        let body = all.get(CKPT_HEADER_BYTES as usize..).unwrap_or_default();
        // A torn delta is found before anything is applied: the chain stays as it was.
        match apply_delta_entries(ck, base, &h, body) {
            Ok(()) => {}
            Err(CkptError::BodyChecksum) => break,
            Err(e) => return Err(named(e)),
        }
        end.deltas += 1;
        end.end_block += blocks;
        end.delta_blocks += blocks;
    }
    // The mapping the chain ends with is the one the mount uses: its rules are checked
    // once, as a full checkpoint's are (a delta that broke them refuses the mount here).
    if end.deltas > 0 {
        validate_mapping(ck).map_err(named)?;
    }
    Ok(end)
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
        assert_eq!(version_for(FLAG_THREADED_LOGGING), VERSION_2);
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
        // Version 3 (deltas) with or without threaded logging.
        assert_eq!(with(3, 0), Ok((3, 0)));
        assert_eq!(
            with(3, FLAG_THREADED_LOGGING),
            Ok((3, FLAG_THREADED_LOGGING))
        );
        let newer = with(4, FLAG_THREADED_LOGGING);
        assert_eq!(newer, Err(CkptError::Version(4)));
        let text = newer.map_err(|e| e.to_string()).unwrap_err();
        assert!(
            text.contains("version 4 is newer than this build supports (3)"),
            "{text}"
        );
    }

    use crate::map::{CkptKind, DeltaChain};
    use crate::plan::tests::write_lbas;

    /// A mapping of 40 zones of 64 blocks (1,216 blocks, 5 mapping pages) with LBAs
    /// 0..600 written, and its full checkpoint (number 1) decoded; no page dirty.
    fn base() -> (Mapping, Checkpoint) {
        let g = crate::layout::tests::geo(40, 64);
        let l = Layout::new(g, 1000, crate::layout::RESERVE_ZONES_DEFAULT).expect("layout");
        let mut m = Mapping::new(l);
        write_lbas(&mut m, 0..600);
        m.clear_dirty();
        let full = snapshot(&m, 1, 9);
        let h = decode_header(&full).expect("header");
        let ck = decode_body(&h, &full[CKPT_HEADER_BYTES as usize..]).expect("body");
        (m, ck)
    }

    /// Splits an encoded delta into its header and body.
    fn split(bytes: &[u8]) -> (DeltaHeader, Vec<u8>) {
        let h = decode_delta_header(bytes).expect("delta header");
        (h, bytes[CKPT_HEADER_BYTES as usize..].to_vec())
    }

    /// The header of `body` with its length and checksum recomputed (a delta whose
    /// checksums hold, whatever it says).
    fn resealed(h: &DeltaHeader, body: &[u8]) -> DeltaHeader {
        let h = DeltaHeader {
            body_bytes: body.len() as u64,
            body_crc: crc32c::crc32c(body),
            ..*h
        };
        decode_delta_header(&encode_delta_header(&h)).expect("resealed header")
    }

    /// A delta carries the dirty pages and the zone table; applied to its base it gives
    /// exactly the full checkpoint the mapping would write now, and it clears the bits.
    #[test]
    fn a_delta_applied_to_its_base_is_the_full_checkpoint() {
        let (mut m, mut ck) = base();
        write_lbas(&mut m, [5, 700, 1100, 1101].into_iter());
        assert!(m.trim(600, 1).is_none(), "nothing mapped there");
        assert_eq!(m.dirty_pages, 3, "pages 0, 2 and 4");
        let bytes = snapshot_delta(&mut m, 2, 1, 9);
        assert_eq!(m.dirty_pages, 0);
        assert_eq!(m.take_dirty(), Vec::<u32>::new());
        let (h, body) = split(&bytes);
        assert_eq!((h.number, h.base, h.pages, h.version), (2, 1, 3, VERSION_3));
        assert_eq!(
            blocks_of(bytes.len() as u64, 4096),
            m.layout.delta_blocks(3).expect("fits"),
            "the estimate is exact for pages that are whole"
        );
        apply_delta(&mut ck, 1, &h, &body).expect("applies");
        let now = snapshot(&m, 2, 9);
        let want = decode_body(
            &decode_header(&now).expect("header"),
            &now[CKPT_HEADER_BYTES as usize..],
        )
        .expect("body");
        // The header keeps the base's body length and checksum; the rest is the full one's.
        assert_eq!((ck.header.number, ck.header.seq), (2, m.next_seq()));
        assert!(
            ck.l2p == want.l2p && ck.seq == want.seq,
            "the mapping differs"
        );
        assert_eq!(ck.zones, want.zones);
    }

    /// The chain's rules: a torn delta is `BodyChecksum` and changes nothing; a delta of
    /// another base, one whose number is not the previous + 1, and one whose checksums hold
    /// but whose page index lies beyond the volume are corruption.
    #[test]
    fn a_delta_out_of_its_chain_or_torn_is_refused() {
        let (mut m, ck) = base();
        write_lbas(&mut m, [5, 1100].into_iter());
        let (h, body) = split(&snapshot_delta(&mut m, 2, 1, 9));
        let apply = |h: &DeltaHeader, body: &[u8], base: u64| {
            let mut c = ck.clone();
            let r = apply_delta(&mut c, base, h, body);
            (r, c)
        };
        let (torn, after) = apply(&h, &body[..body.len() - 1], 1);
        assert_eq!(torn, Err(CkptError::BodyChecksum));
        assert_eq!(after, ck, "a torn delta changes nothing");
        let mut flipped = body.clone();
        flipped[10] ^= 1;
        assert_eq!(apply(&h, &flipped, 1).0, Err(CkptError::BodyChecksum));
        let corrupt_with = |r: Result<(), CkptError>, what: &str| {
            assert!(
                matches!(&r, Err(CkptError::Corrupt(m)) if m.contains(what)),
                "{what}: {r:?}"
            );
        };
        corrupt_with(apply(&h, &body, 4).0, "does not follow");
        let later = resealed(&DeltaHeader { number: 3, ..h }, &body);
        corrupt_with(apply(&later, &body, 1).0, "does not follow");
        let older_seq = resealed(&DeltaHeader { seq: 1, ..h }, &body);
        corrupt_with(apply(&older_seq, &body, 1).0, "does not follow");
        // Page 4 is the volume's last (1,216 blocks); index 5 is beyond it.
        let mut beyond = body.clone();
        beyond[4..8].copy_from_slice(&5u32.to_le_bytes());
        let h5 = resealed(&h, &beyond);
        corrupt_with(apply(&h5, &beyond, 1).0, "page index 5");
        // Indices out of order.
        let mut swapped = body.clone();
        swapped[..4].copy_from_slice(&4u32.to_le_bytes());
        let hs = resealed(&h, &swapped);
        corrupt_with(apply(&hs, &swapped, 1).0, "not ascending");
        // A page count that does not match the body.
        let many = resealed(&DeltaHeader { pages: 0, ..h }, &body);
        corrupt_with(apply(&many, &body, 1).0, "body length");
        // The result is validated as a full body: an entry into a free zone.
        let mut free = body.clone();
        let entry = 8; // the first entry of page 0 (LBA 0)
        free[entry..entry + 4].copy_from_slice(&(64u32 * 30 + 1).to_le_bytes());
        let hf = resealed(&h, &free);
        corrupt_with(apply(&hf, &free, 1).0, "needs a used zone");
    }

    /// A delta header's own rules: version 3 only, a larger one is newer than this build.
    #[test]
    fn delta_headers_are_version_3() {
        let h = DeltaHeader {
            version: VERSION_3,
            flags: 0,
            number: 2,
            volume_id: 9,
            seq: 10,
            base: 1,
            pages: 0,
            body_bytes: 0,
            body_crc: 0,
        };
        assert_eq!(decode_delta_header(&encode_delta_header(&h)), Ok(h));
        let v2 = encode_delta_header(&DeltaHeader { version: 2, ..h });
        assert!(matches!(
            decode_delta_header(&v2),
            Err(CkptError::Corrupt(_))
        ));
        let v4 = encode_delta_header(&DeltaHeader { version: 4, ..h });
        assert_eq!(decode_delta_header(&v4), Err(CkptError::Version(4)));
        let base0 = encode_delta_header(&DeltaHeader { number: 1, ..h });
        assert!(matches!(
            decode_delta_header(&base0),
            Err(CkptError::Corrupt(_))
        ));
        let mut torn = encode_delta_header(&h);
        torn[20] ^= 1;
        assert_eq!(decode_delta_header(&torn), Err(CkptError::HeaderChecksum));
        assert_eq!(
            decode_delta_header(&[0u8; 4096]),
            Err(CkptError::NoCheckpoint)
        );
    }

    /// What the next checkpoint is: full without a chain; a delta while it fits the slot's
    /// room and the chain's deltas stay within a full checkpoint's size; and a delta of few
    /// pages is due sooner than the full interval, never before a sixteenth of it.
    #[test]
    fn the_next_checkpoint_is_a_delta_only_where_it_fits_and_pays() {
        let (mut m, _) = base();
        let full = m.layout.checkpoint_blocks().expect("fits");
        write_lbas(&mut m, [5].into_iter());
        let one = m.layout.delta_blocks(1).expect("fits");
        assert_eq!(m.next_checkpoint(), CkptKind::Full);
        m.delta_chain = Some(DeltaChain {
            room_blocks: one,
            delta_blocks: 0,
        });
        assert_eq!(m.next_checkpoint(), CkptKind::Delta);
        m.delta_chain = Some(DeltaChain {
            room_blocks: one - 1,
            delta_blocks: 0,
        });
        assert_eq!(m.next_checkpoint(), CkptKind::Full, "no room");
        m.delta_chain = Some(DeltaChain {
            room_blocks: 100,
            delta_blocks: full - one + 1,
        });
        assert_eq!(
            m.next_checkpoint(),
            CkptKind::Full,
            "the deltas outgrow a full one"
        );
        m.delta_chain = Some(DeltaChain {
            room_blocks: 100,
            delta_blocks: 0,
        });
        // An interval of 16 zones of 64 blocks: 1,024 user blocks pay for a full one.
        m.user_blocks_since_ckpt = 63;
        assert!(!m.checkpoint_due(16), "before a sixteenth of the interval");
        m.user_blocks_since_ckpt = 1024 * one / full;
        assert!(!m.checkpoint_due(16) || 1024 * one / full >= 64);
        m.user_blocks_since_ckpt = (1024 * one).div_ceil(full).max(64);
        assert!(m.checkpoint_due(16), "the delta's bytes are paid for");
        m.delta_chain = None;
        assert!(!m.checkpoint_due(16), "a full one waits for the interval");
        m.user_blocks_since_ckpt = 1024;
        assert!(m.checkpoint_due(16));
    }

    /// A full checkpoint copied page by page, with writes landing between the stretches
    /// (on pages already copied and not yet), is byte for byte the snapshot of the mapping
    /// at `finish`.
    #[test]
    fn a_full_copy_taken_page_by_page_is_the_snapshot_at_its_end() {
        let (mut m, _) = base();
        let mut copy = FullCopy::new(&mut m);
        assert!(!copy.copy_pages(&m, 2));
        write_lbas(&mut m, [3, 300, 1000].into_iter());
        assert!(!copy.copy_pages(&m, 2));
        write_lbas(&mut m, [5, 1200].into_iter());
        let bytes = copy.finish(&mut m, 4, 9).seal();
        assert_eq!(m.dirty_pages, 0);
        assert_eq!(bytes, snapshot(&m, 4, 9));
    }
}
