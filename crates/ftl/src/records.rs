//! What the FTL writes beside and inside blocks so that a mount can rebuild the mapping:
//! the per-block metadata tag (OOB), the zone header block, and the trim record block.
//! Pure encoders and validating decoders; docs/FORMAT.md has the byte tables.

/// What a physical block holds, as its metadata tag says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// User data of logical block `lba`, written with sequence number `seq`.
    Data { lba: u64, seq: u64 },
    /// The zone header (block 0 of a data zone); `seq` is the zone's generation.
    Header { generation: u64 },
    /// A trim record (its block holds the trimmed range), written with `seq`.
    Trim { seq: u64 },
    /// Never written by the FTL (zeros), or unreadable.
    Unknown,
}

const KIND_HEADER: u64 = u64::MAX - 1;
const KIND_TRIM: u64 = u64::MAX - 2;

/// Encodes a tag into the first 16 bytes of a block's metadata.
pub fn encode_tag(tag: Tag, out: &mut [u8]) {
    let (a, b) = match tag {
        Tag::Data { lba, seq } => (lba, seq),
        Tag::Header { generation } => (KIND_HEADER, generation),
        Tag::Trim { seq } => (KIND_TRIM, seq),
        Tag::Unknown => (0, 0),
    };
    out[..8].copy_from_slice(&a.to_le_bytes());
    out[8..16].copy_from_slice(&b.to_le_bytes());
}

/// Decodes a block's metadata tag. Sequence numbers start at 1, so all-zero metadata (a block
/// the FTL never wrote) decodes as `Unknown`.
pub fn decode_tag(meta: &[u8]) -> Tag {
    if meta.len() < 16 {
        return Tag::Unknown;
    }
    let a = u64::from_le_bytes(meta[..8].try_into().unwrap_or([0; 8]));
    let b = u64::from_le_bytes(meta[8..16].try_into().unwrap_or([0; 8]));
    match (a, b) {
        (_, 0) => Tag::Unknown,
        (KIND_HEADER, g) => Tag::Header { generation: g },
        (KIND_TRIM, s) => Tag::Trim { seq: s },
        (lba, seq) if lba < KIND_TRIM => Tag::Data { lba, seq },
        _ => Tag::Unknown,
    }
}

const HEADER_MAGIC: &[u8; 8] = b"ZSTKZHDR";
const TRIM_MAGIC: &[u8; 8] = b"ZSTKTRIM";

/// The zone header block: which volume and generation a data zone belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneHeader {
    pub volume_id: u64,
    pub data_zone: u32,
    pub generation: u64,
}

fn crc_tail(block: &mut [u8], body: usize) {
    let crc = crc32c::crc32c(&block[..body]);
    block[body..body + 4].copy_from_slice(&crc.to_le_bytes());
}

fn crc_ok(block: &[u8], body: usize) -> bool {
    block.len() >= body + 4
        && u32::from_le_bytes([
            block[body],
            block[body + 1],
            block[body + 2],
            block[body + 3],
        ]) == crc32c::crc32c(&block[..body])
}

pub fn encode_header(h: &ZoneHeader, block: &mut [u8]) {
    block.fill(0);
    block[..8].copy_from_slice(HEADER_MAGIC);
    block[8..16].copy_from_slice(&h.volume_id.to_le_bytes());
    block[16..20].copy_from_slice(&h.data_zone.to_le_bytes());
    block[20..28].copy_from_slice(&h.generation.to_le_bytes());
    crc_tail(block, 28);
}

pub fn decode_header(block: &[u8]) -> Option<ZoneHeader> {
    if block.len() < 32 || &block[..8] != HEADER_MAGIC || !crc_ok(block, 28) {
        return None;
    }
    Some(ZoneHeader {
        volume_id: u64::from_le_bytes(block[8..16].try_into().ok()?),
        data_zone: u32::from_le_bytes(block[16..20].try_into().ok()?),
        generation: u64::from_le_bytes(block[20..28].try_into().ok()?),
    })
}

/// A trim record: logical blocks `[lba, lba + blocks)` read as zeros from sequence `seq` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimRecord {
    pub lba: u64,
    pub blocks: u64,
    pub seq: u64,
}

pub fn encode_trim(t: &TrimRecord, block: &mut [u8]) {
    block.fill(0);
    block[..8].copy_from_slice(TRIM_MAGIC);
    block[8..16].copy_from_slice(&t.lba.to_le_bytes());
    block[16..24].copy_from_slice(&t.blocks.to_le_bytes());
    block[24..32].copy_from_slice(&t.seq.to_le_bytes());
    crc_tail(block, 32);
}

pub fn decode_trim(block: &[u8]) -> Option<TrimRecord> {
    if block.len() < 36 || &block[..8] != TRIM_MAGIC || !crc_ok(block, 32) {
        return None;
    }
    Some(TrimRecord {
        lba: u64::from_le_bytes(block[8..16].try_into().ok()?),
        blocks: u64::from_le_bytes(block[16..24].try_into().ok()?),
        seq: u64::from_le_bytes(block[24..32].try_into().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_zeros_are_unknown() {
        let mut m = [0u8; 16];
        for t in [
            Tag::Data { lba: 7, seq: 9 },
            Tag::Header { generation: 3 },
            Tag::Trim { seq: 11 },
        ] {
            encode_tag(t, &mut m);
            assert_eq!(decode_tag(&m), t);
        }
        assert_eq!(decode_tag(&[0u8; 16]), Tag::Unknown);
        assert_eq!(decode_tag(&[1u8; 4]), Tag::Unknown);
    }

    #[test]
    fn header_and_trim_blocks_round_trip_and_reject_damage() {
        let mut b = vec![0u8; 4096];
        let h = ZoneHeader {
            volume_id: 42,
            data_zone: 5,
            generation: 77,
        };
        encode_header(&h, &mut b);
        assert_eq!(decode_header(&b), Some(h));
        b[21] ^= 1;
        assert_eq!(decode_header(&b), None);
        let t = TrimRecord {
            lba: 100,
            blocks: 50,
            seq: 9,
        };
        encode_trim(&t, &mut b);
        assert_eq!(decode_trim(&b), Some(t));
        assert_eq!(decode_header(&b), None);
        b[30] ^= 4;
        assert_eq!(decode_trim(&b), None);
        assert_eq!(decode_trim(&[0u8; 10]), None);
    }
}
