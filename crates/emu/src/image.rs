//! The on-disk format of a file-backed emulated device: superblock and zone table encoders
//! and decoders. Pure functions over byte slices; every decoder validates and returns an
//! error, never panics, whatever the bytes (a fuzz target feeds it garbage).
//!
//! Layout (docs/FORMAT.md has the byte tables): a 4096-byte superblock at offset 0, the zone
//! table (32 bytes per zone) at 4096, the per-block metadata region, then the data region.
//! Regions start on 1 MiB boundaries so data blocks stay aligned for O_DIRECT-style access.
//!
//! Version 2 adds, to each zone entry, the open state the zone had at a clean shutdown (a
//! drive that stays powered between commands). It only counts when the superblock says the
//! image was shut down cleanly; an image in use (a killed process) comes back in the restart
//! form, as a power loss. Version 1 images open unchanged (their entries never hold an open
//! state) and are written as version 2 from their first open on.
//!
//! ZNS+ (feature flag 4 in the superblock, no version change): the image of a device with the
//! ZNS+ commands ends with a valid-bitmap region, one slot per zone, holding the bitmap of
//! each TL-opened zone (attribute `TLO` in its entry). An image without the flag is laid out,
//! and encoded, exactly as before; a build that does not know the flag refuses the image.

use zns::{zone_attr, Geometry, Lba, ValidBitmap, ZoneState};

use crate::zones::Zone;

pub const MAGIC: [u8; 8] = *b"ZSTKEMU\0";
pub const VERSION: u32 = 2;
/// The oldest format version this build opens.
pub const OLDEST_VERSION: u32 = 1;
pub const SUPERBLOCK_BYTES: u64 = 4096;
pub const ZONE_ENTRY_BYTES: usize = 32;
const SB_CRC_AT: usize = 124;
const REGION_ALIGN: u64 = 1 << 20;

/// Why an image was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("not a zonestack device image (bad magic)")]
    BadMagic,
    #[error("image format version {0} is newer than this build supports ({VERSION})")]
    NewerVersion(u32),
    #[error("image format version {0} is not supported")]
    BadVersion(u32),
    #[error("superblock checksum mismatch: the image is corrupt")]
    SuperblockChecksum,
    #[error("zone table entry {0} is corrupt: {1}")]
    ZoneEntry(u32, String),
    #[error("image is truncated: {0}")]
    Truncated(String),
    #[error("superblock describes an invalid device: {0}")]
    BadGeometry(String),
}

/// Everything the superblock records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub geometry: Geometry,
    pub volatile_cache: bool,
    /// False while a process has the image open; true after a clean shutdown.
    pub clean: bool,
    pub seed: u64,
    /// The device has the ZNS+ commands, and the image the valid-bitmap region.
    pub zns_plus: bool,
    /// ZNS+ only: the timing model plugs TL-opened zones LBA-ordered, not PPA-ordered.
    pub lba_plugging: bool,
}

/// Byte offsets of the regions of an image with this geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub table_offset: u64,
    pub meta_offset: u64,
    pub data_offset: u64,
    /// The valid-bitmap region of a ZNS+ image (`TL_SLOT_ALIGN` aligned, after the data).
    pub tl_offset: Option<u64>,
    /// Bytes of one zone's slot in the valid-bitmap region.
    pub tl_slot_bytes: u64,
    pub total_bytes: u64,
}

/// Header of a valid-bitmap slot: zone index (u32) and CRC-32C (u32).
const TL_SLOT_HEADER: usize = 8;
/// Alignment of the valid-bitmap region and of each slot in it.
const TL_SLOT_ALIGN: u64 = 4096;

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

impl Layout {
    /// The layout of an image without ZNS+ (formats 1 and 2).
    pub fn for_geometry(g: &Geometry) -> Layout {
        Self::for_image(g, false)
    }

    /// The layout of an image, with the valid-bitmap region when the device has ZNS+.
    pub fn for_image(g: &Geometry, zns_plus: bool) -> Layout {
        let table_offset = SUPERBLOCK_BYTES;
        let table_bytes = u64::from(g.zone_count) * ZONE_ENTRY_BYTES as u64;
        let meta_offset = align_up(table_offset + table_bytes, REGION_ALIGN);
        let meta_bytes = g.total_blocks() * u64::from(g.oob_size);
        let data_offset = align_up(meta_offset + meta_bytes, REGION_ALIGN);
        let data_end = data_offset + g.total_blocks() * u64::from(g.block_size);
        let tl_slot_bytes = align_up(
            (TL_SLOT_HEADER + ValidBitmap::bytes_for(g.zone_capacity)) as u64,
            TL_SLOT_ALIGN,
        );
        let (tl_offset, total_bytes) = if zns_plus {
            let at = align_up(data_end, TL_SLOT_ALIGN);
            (Some(at), at + u64::from(g.zone_count) * tl_slot_bytes)
        } else {
            (None, data_end)
        };
        Layout {
            table_offset,
            meta_offset,
            data_offset,
            tl_offset,
            tl_slot_bytes,
            total_bytes,
        }
    }

    /// Where zone `index`'s valid-bitmap slot lies, in a ZNS+ image.
    pub fn tl_slot_offset(&self, index: u32) -> Option<u64> {
        self.tl_offset
            .map(|at| at + u64::from(index) * self.tl_slot_bytes)
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

const FLAG_CROSS_ZONE_READS: u32 = 1;
const FLAG_VOLATILE_CACHE: u32 = 2;
const FLAG_ZNS_PLUS: u32 = 4;
const FLAG_LBA_PLUGGING: u32 = 8;
const KNOWN_FLAGS: u32 =
    FLAG_CROSS_ZONE_READS | FLAG_VOLATILE_CACHE | FLAG_ZNS_PLUS | FLAG_LBA_PLUGGING;

/// Encodes a superblock into its 4096-byte region.
pub fn encode_superblock(sb: &Superblock) -> Vec<u8> {
    let g = &sb.geometry;
    let layout = Layout::for_geometry(g);
    let mut b = vec![0u8; SUPERBLOCK_BYTES as usize];
    b[0..8].copy_from_slice(&MAGIC);
    put_u32(&mut b, 8, VERSION);
    put_u32(&mut b, 12, SUPERBLOCK_BYTES as u32);
    put_u32(&mut b, 16, g.block_size);
    put_u32(&mut b, 20, g.oob_size);
    put_u32(&mut b, 24, g.zone_count);
    put_u32(&mut b, 28, g.max_open);
    put_u32(&mut b, 32, g.max_active);
    put_u32(&mut b, 36, g.zasl_blocks);
    put_u32(&mut b, 40, g.mdts_blocks);
    put_u32(&mut b, 44, g.copy_max_ranges);
    put_u32(&mut b, 48, g.copy_max_range_blocks);
    put_u32(&mut b, 52, g.copy_max_blocks);
    put_u64(&mut b, 56, g.zone_size);
    put_u64(&mut b, 64, g.zone_capacity);
    let mut flags = 0;
    if g.cross_zone_reads {
        flags |= FLAG_CROSS_ZONE_READS;
    }
    if sb.volatile_cache {
        flags |= FLAG_VOLATILE_CACHE;
    }
    if sb.zns_plus {
        flags |= FLAG_ZNS_PLUS;
    }
    if sb.zns_plus && sb.lba_plugging {
        flags |= FLAG_LBA_PLUGGING;
    }
    put_u32(&mut b, 72, flags);
    put_u32(&mut b, 76, if sb.clean { 0 } else { 1 });
    put_u64(&mut b, 80, layout.table_offset);
    put_u64(&mut b, 88, layout.meta_offset);
    put_u64(&mut b, 96, layout.data_offset);
    put_u64(&mut b, 104, sb.seed);
    let crc = crc32c::crc32c(&b[..SB_CRC_AT]);
    put_u32(&mut b, SB_CRC_AT, crc);
    b
}

/// Decodes and validates a superblock.
pub fn decode_superblock(b: &[u8]) -> Result<Superblock, ImageError> {
    if b.len() < SB_CRC_AT + 4 {
        return Err(ImageError::Truncated(format!(
            "superblock is {} bytes",
            b.len()
        )));
    }
    if b[0..8] != MAGIC {
        return Err(ImageError::BadMagic);
    }
    if crc32c::crc32c(&b[..SB_CRC_AT]) != get_u32(b, SB_CRC_AT) {
        return Err(ImageError::SuperblockChecksum);
    }
    match get_u32(b, 8) {
        OLDEST_VERSION..=VERSION => {}
        v if v > VERSION => return Err(ImageError::NewerVersion(v)),
        v => return Err(ImageError::BadVersion(v)),
    }
    if u64::from(get_u32(b, 12)) != SUPERBLOCK_BYTES {
        return Err(ImageError::BadGeometry(
            "superblock size field is not 4096".into(),
        ));
    }
    let flags = get_u32(b, 72);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(ImageError::BadGeometry(format!(
            "unknown feature flags {flags:#x}"
        )));
    }
    if flags & FLAG_LBA_PLUGGING != 0 && flags & FLAG_ZNS_PLUS == 0 {
        return Err(ImageError::BadGeometry(
            "a plugging order is recorded for a device without the ZNS+ commands".into(),
        ));
    }
    let geometry = Geometry {
        block_size: get_u32(b, 16),
        oob_size: get_u32(b, 20),
        zone_count: get_u32(b, 24),
        max_open: get_u32(b, 28),
        max_active: get_u32(b, 32),
        zasl_blocks: get_u32(b, 36),
        mdts_blocks: get_u32(b, 40),
        copy_max_ranges: get_u32(b, 44),
        copy_max_range_blocks: get_u32(b, 48),
        copy_max_blocks: get_u32(b, 52),
        zone_size: get_u64(b, 56),
        zone_capacity: get_u64(b, 64),
        cross_zone_reads: flags & FLAG_CROSS_ZONE_READS != 0,
    };
    geometry
        .validate()
        .map_err(|e| ImageError::BadGeometry(e.0))?;
    let layout = Layout::for_geometry(&geometry);
    if get_u64(b, 80) != layout.table_offset
        || get_u64(b, 88) != layout.meta_offset
        || get_u64(b, 96) != layout.data_offset
    {
        return Err(ImageError::BadGeometry(
            "region offsets do not match the geometry".into(),
        ));
    }
    if b[112..SB_CRC_AT].iter().any(|x| *x != 0) {
        return Err(ImageError::BadGeometry(
            "reserved superblock bytes are not zero".into(),
        ));
    }
    let clean = match get_u32(b, 76) {
        0 => true,
        1 => false,
        v => {
            return Err(ImageError::BadGeometry(format!(
                "unknown shutdown state {v}"
            )))
        }
    };
    Ok(Superblock {
        geometry,
        volatile_cache: flags & FLAG_VOLATILE_CACHE != 0,
        clean,
        seed: get_u64(b, 104),
        zns_plus: flags & FLAG_ZNS_PLUS != 0,
        lba_plugging: flags & FLAG_LBA_PLUGGING != 0,
    })
}

/// Encodes zone `index`'s valid-bitmap slot (`bits` is the bitmap's bytes) into
/// `slot_bytes` bytes: index, CRC-32C of the index and the bitmap, the bitmap, zero padding.
pub fn encode_tl_slot(index: u32, bits: &[u8], slot_bytes: u64) -> Vec<u8> {
    let len = (slot_bytes as usize).max(TL_SLOT_HEADER + bits.len());
    let mut b = vec![0u8; len];
    put_u32(&mut b, 0, index);
    b[TL_SLOT_HEADER..TL_SLOT_HEADER + bits.len()].copy_from_slice(bits);
    let crc = tl_slot_crc(&b[0..4], bits);
    put_u32(&mut b, 4, crc);
    b
}

fn tl_slot_crc(index: &[u8], bits: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(index), bits)
}

/// Decodes and validates zone `index`'s valid-bitmap slot against the geometry and the
/// zone's data end (`data_blocks` past its start): no block at or above it may be valid.
pub fn decode_tl_slot(
    g: &Geometry,
    index: u32,
    b: &[u8],
    data_blocks: u64,
) -> Result<ValidBitmap, ImageError> {
    let bad = |m: &str| ImageError::ZoneEntry(index, format!("valid bitmap: {m}"));
    let n = ValidBitmap::bytes_for(g.zone_capacity);
    if b.len() < TL_SLOT_HEADER + n {
        return Err(ImageError::Truncated(format!(
            "valid bitmap of zone {index}"
        )));
    }
    if get_u32(b, 0) != index {
        return Err(bad("slot is for another zone"));
    }
    let bits = &b[TL_SLOT_HEADER..TL_SLOT_HEADER + n];
    if tl_slot_crc(&b[0..4], bits) != get_u32(b, 4) {
        return Err(bad("checksum mismatch"));
    }
    ValidBitmap::parse(bits, g.zone_capacity, data_blocks)
        .map_err(|_| bad("marks valid a block at or above the zone's data end"))
}

/// The open state a zone had when the device was shut down cleanly (format version 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenAtShutdown {
    /// Implicitly Opened or Explicitly Opened.
    pub state: ZoneState,
    /// For an Implicitly Opened zone, its rank (from 1) in the order the open zones were
    /// opened, so the device closes the oldest first when it needs an open slot; 0 for an
    /// Explicitly Opened zone, which the device never closes by itself.
    pub order: u32,
}

/// One zone table entry: the restart form, and the live open state at a clean shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneEntry {
    /// What the zone is after a power loss at this instant (the restart form).
    pub zone: Zone,
    /// The zone's open state, written only at a clean shutdown; it counts only when the
    /// superblock says the image was shut down cleanly.
    pub open: Option<OpenAtShutdown>,
}

impl ZoneEntry {
    /// The zone as a clean open of the image brings it back: open again if it was open at a
    /// clean shutdown (every write pointer was durable then), else the restart form.
    pub fn after_clean_shutdown(&self) -> Zone {
        match self.open {
            Some(o) => Zone {
                state: o.state,
                opened_seq: u64::from(o.order),
                ..self.zone
            },
            None => self.zone,
        }
    }
}

/// Encodes the persisted form of one zone: its state and durable write pointer.
pub fn encode_zone(index: u32, zone: &Zone) -> [u8; ZONE_ENTRY_BYTES] {
    encode_zone_entry(
        index,
        &ZoneEntry {
            zone: *zone,
            open: None,
        },
    )
}

/// Encodes a whole zone table entry, with the open state at a clean shutdown if any.
pub fn encode_zone_entry(index: u32, e: &ZoneEntry) -> [u8; ZONE_ENTRY_BYTES] {
    let zone = &e.zone;
    let mut b = [0u8; ZONE_ENTRY_BYTES];
    b[0] = zone.state.nvme_value();
    b[1] = zone.attributes;
    if let Some(o) = e.open {
        b[2] = o.state.nvme_value();
        put_u32(&mut b, 24, o.order);
    }
    put_u32(&mut b, 4, index);
    put_u64(&mut b, 8, zone.wp);
    put_u64(&mut b, 16, zone.data_end);
    let crc = crc32c::crc32c(&b[..28]);
    put_u32(&mut b, 28, crc);
    b
}

/// Decodes and validates zone entry `index` against the geometry: its restart form.
pub fn decode_zone(g: &Geometry, index: u32, b: &[u8]) -> Result<Zone, ImageError> {
    decode_zone_entry(g, index, b).map(|e| e.zone)
}

/// Decodes and validates zone entry `index`, with the open state at a clean shutdown.
pub fn decode_zone_entry(g: &Geometry, index: u32, b: &[u8]) -> Result<ZoneEntry, ImageError> {
    let bad = |m: &str| ImageError::ZoneEntry(index, m.to_string());
    if b.len() < ZONE_ENTRY_BYTES {
        return Err(ImageError::Truncated(format!("zone entry {index}")));
    }
    if crc32c::crc32c(&b[..28]) != get_u32(b, 28) {
        return Err(bad("checksum mismatch"));
    }
    if b[3] != 0 {
        return Err(bad("reserved bytes are not zero"));
    }
    let zone = decode_restart_form(g, index, b)?;
    let order = get_u32(b, 24);
    let open = match (b[2], order) {
        (0, 0) => None,
        (0, _) => return Err(bad("an open order without an open state")),
        (v, order) => {
            let state = ZoneState::from_nvme_value(v)
                .filter(|s| s.is_open())
                .ok_or_else(|| bad("unknown open state at shutdown"))?;
            if !matches!(zone.state, ZoneState::Empty | ZoneState::Closed) {
                return Err(bad("an open zone's restart form must be Empty or Closed"));
            }
            if (state == ZoneState::ImplicitlyOpened) != (order != 0) {
                return Err(bad(
                    "an open order is set for exactly the implicitly opened zones",
                ));
            }
            Some(OpenAtShutdown { state, order })
        }
    };
    Ok(ZoneEntry { zone, open })
}

/// The restart form in bytes 0..24 of a checksummed entry.
fn decode_restart_form(g: &Geometry, index: u32, b: &[u8]) -> Result<Zone, ImageError> {
    let bad = |m: &str| ImageError::ZoneEntry(index, m.to_string());
    if get_u32(b, 4) != index {
        return Err(bad("entry is for another zone"));
    }
    let state = ZoneState::from_nvme_value(b[0]).ok_or_else(|| bad("unknown zone state"))?;
    if state.is_open() {
        return Err(bad("a persisted zone cannot be open"));
    }
    let start: Lba = g.zone_start(index);
    let wp = get_u64(b, 8);
    let data_end = get_u64(b, 16);
    let cap_end = start + g.zone_capacity;
    if wp < start || wp > cap_end {
        return Err(bad("write pointer outside the zone"));
    }
    let attributes = b[1];
    if attributes & zone_attr::TLO != 0 {
        // A TL-opened zone (ZNS+) keeps its old data above its write pointer.
        if state != ZoneState::Closed || wp == cap_end {
            return Err(bad("a TL-opened zone's restart form must be Closed"));
        }
        if data_end < wp || data_end > cap_end {
            return Err(bad("a TL-opened zone's data end is outside wp..capacity"));
        }
        return Ok(Zone {
            state,
            wp,
            data_end,
            durable_wp: wp,
            attributes,
            opened_seq: 0,
        });
    }
    if data_end < start || data_end > wp {
        return Err(bad("data end outside the written part of the zone"));
    }
    let consistent = match state {
        ZoneState::Empty => wp == start,
        ZoneState::Closed => wp < cap_end && data_end == wp,
        ZoneState::Full => wp == cap_end,
        _ => true,
    };
    if !consistent {
        return Err(bad("write pointer inconsistent with the zone state"));
    }
    Ok(Zone {
        state,
        wp,
        data_end,
        durable_wp: wp,
        attributes,
        opened_seq: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            block_size: 4096,
            oob_size: 16,
            zone_count: 4,
            zone_size: 64,
            zone_capacity: 48,
            max_open: 2,
            max_active: 3,
            zasl_blocks: 16,
            mdts_blocks: 64,
            copy_max_ranges: 8,
            copy_max_range_blocks: 32,
            copy_max_blocks: 64,
            cross_zone_reads: false,
        }
    }

    #[test]
    fn superblock_round_trips_and_rejects_damage() {
        let sb = Superblock {
            geometry: geo(),
            volatile_cache: true,
            clean: false,
            seed: 99,
            zns_plus: false,
            lba_plugging: false,
        };
        let b = encode_superblock(&sb);
        assert_eq!(decode_superblock(&b), Ok(sb));
        for i in [0, 9, 20, 60, 100, 124] {
            let mut d = b.clone();
            d[i] ^= 0x40;
            assert!(decode_superblock(&d).is_err(), "flip at {i} accepted");
        }
        let mut newer = b.clone();
        put_u32(&mut newer, 8, 7);
        let crc = crc32c::crc32c(&newer[..SB_CRC_AT]);
        put_u32(&mut newer, SB_CRC_AT, crc);
        assert_eq!(decode_superblock(&newer), Err(ImageError::NewerVersion(7)));
        assert!(matches!(
            decode_superblock(&b[..50]),
            Err(ImageError::Truncated(_))
        ));
    }

    #[test]
    fn zone_entries_round_trip_and_validate() {
        let g = geo();
        let z = Zone {
            state: ZoneState::Closed,
            wp: 64 + 10,
            data_end: 74,
            durable_wp: 74,
            attributes: 0,
            opened_seq: 0,
        };
        let b = encode_zone(1, &z);
        assert_eq!(decode_zone(&g, 1, &b), Ok(z));
        assert!(decode_zone(&g, 2, &b).is_err());
        let open = Zone {
            state: ZoneState::ImplicitlyOpened,
            ..z
        };
        assert!(decode_zone(&g, 1, &encode_zone(1, &open)).is_err());
        let beyond = Zone {
            wp: 64 + 49,
            data_end: 64 + 49,
            ..z
        };
        assert!(decode_zone(&g, 1, &encode_zone(1, &beyond)).is_err());
        let full_early = Zone {
            state: ZoneState::Full,
            wp: 64 + 48,
            data_end: 70,
            durable_wp: 64 + 48,
            ..z
        };
        assert_eq!(
            decode_zone(&g, 1, &encode_zone(1, &full_early)),
            Ok(full_early)
        );
        let data_beyond_wp = Zone { data_end: 75, ..z };
        assert!(decode_zone(&g, 1, &encode_zone(1, &data_beyond_wp)).is_err());
        assert!(decode_zone(&g, 1, &encode_zone(1, &beyond)).is_err());
        let mut flipped = b;
        flipped[9] ^= 1;
        assert!(decode_zone(&g, 1, &flipped).is_err());
    }

    #[test]
    fn open_states_at_shutdown_round_trip_and_validate() {
        let g = geo();
        let closed = Zone {
            state: ZoneState::Closed,
            wp: 64 + 10,
            data_end: 74,
            durable_wp: 74,
            attributes: 0,
            opened_seq: 0,
        };
        let implicit = ZoneEntry {
            zone: closed,
            open: Some(OpenAtShutdown {
                state: ZoneState::ImplicitlyOpened,
                order: 2,
            }),
        };
        let b = encode_zone_entry(1, &implicit);
        assert_eq!(decode_zone_entry(&g, 1, &b), Ok(implicit));
        // The restart form alone ignores the open state.
        assert_eq!(decode_zone(&g, 1, &b), Ok(closed));
        assert_eq!(
            implicit.after_clean_shutdown().state,
            ZoneState::ImplicitlyOpened
        );
        let bad = [
            // An explicitly opened zone carries no open order.
            ZoneEntry {
                open: Some(OpenAtShutdown {
                    state: ZoneState::ExplicitlyOpened,
                    order: 1,
                }),
                ..implicit
            },
            // An implicitly opened zone carries one.
            ZoneEntry {
                open: Some(OpenAtShutdown {
                    state: ZoneState::ImplicitlyOpened,
                    order: 0,
                }),
                ..implicit
            },
            // Only an open state may be recorded.
            ZoneEntry {
                open: Some(OpenAtShutdown {
                    state: ZoneState::Full,
                    order: 0,
                }),
                ..implicit
            },
            // A Full zone cannot have been open.
            ZoneEntry {
                zone: Zone {
                    state: ZoneState::Full,
                    wp: 64 + 48,
                    data_end: 64 + 48,
                    durable_wp: 64 + 48,
                    ..closed
                },
                ..implicit
            },
        ];
        for e in bad {
            assert!(
                decode_zone_entry(&g, 1, &encode_zone_entry(1, &e)).is_err(),
                "{e:?} accepted"
            );
        }
    }

    #[test]
    fn version_1_superblocks_still_decode() {
        let sb = Superblock {
            geometry: geo(),
            volatile_cache: false,
            clean: true,
            seed: 3,
            zns_plus: false,
            lba_plugging: false,
        };
        let mut b = encode_superblock(&sb);
        put_u32(&mut b, 8, 1);
        let crc = crc32c::crc32c(&b[..SB_CRC_AT]);
        put_u32(&mut b, SB_CRC_AT, crc);
        assert_eq!(decode_superblock(&b), Ok(sb));
        put_u32(&mut b, 8, 0);
        let crc = crc32c::crc32c(&b[..SB_CRC_AT]);
        put_u32(&mut b, SB_CRC_AT, crc);
        assert_eq!(decode_superblock(&b), Err(ImageError::BadVersion(0)));
    }

    #[test]
    fn zns_plus_superblocks_round_trip_and_plain_ones_keep_their_flags() {
        let plain = Superblock {
            geometry: geo(),
            volatile_cache: true,
            clean: true,
            seed: 5,
            zns_plus: false,
            lba_plugging: false,
        };
        let plus = Superblock {
            zns_plus: true,
            ..plain
        };
        assert_eq!(decode_superblock(&encode_superblock(&plus)), Ok(plus));
        let lp = Superblock {
            lba_plugging: true,
            ..plus
        };
        assert_eq!(decode_superblock(&encode_superblock(&lp)), Ok(lp));
        // A plugging order means nothing without ZNS+: never written, refused when read.
        let plain_lp = Superblock {
            lba_plugging: true,
            ..plain
        };
        let mut b = encode_superblock(&plain_lp);
        assert_eq!(get_u32(&b, 72), FLAG_VOLATILE_CACHE);
        put_u32(&mut b, 72, FLAG_VOLATILE_CACHE | FLAG_LBA_PLUGGING);
        let crc = crc32c::crc32c(&b[..SB_CRC_AT]);
        put_u32(&mut b, SB_CRC_AT, crc);
        assert!(matches!(
            decode_superblock(&b),
            Err(ImageError::BadGeometry(_))
        ));
        // Without ZNS+ the flags word is what format 2 always wrote.
        assert_eq!(get_u32(&encode_superblock(&plain), 72), FLAG_VOLATILE_CACHE);
        assert_eq!(
            Layout::for_image(&geo(), false),
            Layout::for_geometry(&geo())
        );
    }

    #[test]
    fn valid_bitmap_slots_round_trip_and_reject_damage() {
        let g = geo();
        let mut map = ValidBitmap::empty(g.zone_capacity);
        for b in [0, 5, 47] {
            map.set(b, true);
        }
        let l = Layout::for_image(&g, true);
        let slot = encode_tl_slot(3, map.as_bytes(), l.tl_slot_bytes);
        assert_eq!(slot.len() as u64, l.tl_slot_bytes);
        assert_eq!(decode_tl_slot(&g, 3, &slot, 48), Ok(map.clone()));
        // Another zone's slot, a flipped bit, a short slot, a valid block above the data end.
        assert!(decode_tl_slot(&g, 2, &slot, 48).is_err());
        let mut flipped = slot.clone();
        flipped[TL_SLOT_HEADER + 1] ^= 1;
        assert!(decode_tl_slot(&g, 3, &flipped, 48).is_err());
        assert!(decode_tl_slot(&g, 3, &slot[..TL_SLOT_HEADER + 2], 48).is_err());
        assert!(decode_tl_slot(&g, 3, &slot, 40).is_err());
    }

    #[test]
    fn tl_opened_entries_keep_old_data_above_the_wp() {
        let g = geo();
        let tl = Zone {
            state: ZoneState::Closed,
            wp: 64 + 4,
            data_end: 64 + 48,
            durable_wp: 64 + 4,
            attributes: zone_attr::TLO,
            opened_seq: 0,
        };
        assert_eq!(decode_zone(&g, 1, &encode_zone(1, &tl)), Ok(tl));
        let bad = [
            Zone {
                state: ZoneState::Full,
                wp: 64 + 48,
                ..tl
            },
            Zone {
                state: ZoneState::Empty,
                wp: 64,
                durable_wp: 64,
                ..tl
            },
            Zone {
                data_end: 64 + 3,
                ..tl
            },
            Zone {
                data_end: 64 + 49,
                ..tl
            },
        ];
        for z in bad {
            assert!(decode_zone(&g, 1, &encode_zone(1, &z)).is_err(), "{z:?}");
        }
    }

    #[test]
    fn layout_regions_do_not_overlap() {
        let g = geo();
        let l = Layout::for_geometry(&g);
        assert!(l.table_offset + 4 * 32 <= l.meta_offset);
        assert!(l.meta_offset + 256 * 16 <= l.data_offset);
        assert_eq!(l.total_bytes, l.data_offset + 256 * 4096);
        assert_eq!(l.data_offset % (1 << 20), 0);
        assert_eq!(l.tl_offset, None);
        let p = Layout::for_image(&g, true);
        let slots = p.tl_offset.expect("a ZNS+ image has the bitmap region");
        assert!(slots >= l.total_bytes);
        assert!(p.tl_slot_bytes >= 8 + 6);
        assert_eq!(p.total_bytes, slots + 4 * p.tl_slot_bytes);
    }
}
