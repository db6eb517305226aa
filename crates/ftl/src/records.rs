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

const SUMMARY_MAGIC: &[u8; 8] = b"ZSTKSUMM";
const SUMMARY_HEAD: usize = 40;

/// Where a summary block sits, which its contents must name: a block that merely resembles
/// a summary elsewhere (user data, another volume's image) is not taken for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryPlace {
    pub volume_id: u64,
    pub data_zone: u32,
    pub generation: u64,
    /// Offset of the summary block in its zone.
    pub offset: u64,
}

/// Tags a summary block of `block_size` bytes can hold.
pub fn summary_capacity(block_size: usize) -> usize {
    (block_size - SUMMARY_HEAD - 4) / 16
}

/// An in-band summary for devices without per-block metadata: the tags of the `tags.len()`
/// blocks right before it in its zone.
pub fn encode_summary(place: &SummaryPlace, tags: &[Tag], block: &mut [u8]) {
    block.fill(0);
    block[..8].copy_from_slice(SUMMARY_MAGIC);
    block[8..16].copy_from_slice(&place.volume_id.to_le_bytes());
    block[16..20].copy_from_slice(&place.data_zone.to_le_bytes());
    block[20..24].copy_from_slice(&(tags.len() as u32).to_le_bytes());
    block[24..32].copy_from_slice(&place.generation.to_le_bytes());
    block[32..40].copy_from_slice(&place.offset.to_le_bytes());
    for (i, t) in tags.iter().enumerate() {
        encode_tag(*t, &mut block[SUMMARY_HEAD + 16 * i..]);
    }
    let end = SUMMARY_HEAD + 16 * tags.len();
    crc_tail(block, end);
}

/// Decodes a summary block found at `place`; None if the block is not that summary.
pub fn decode_summary(place: &SummaryPlace, block: &[u8]) -> Option<Vec<Tag>> {
    if block.len() < SUMMARY_HEAD + 4 || &block[..8] != SUMMARY_MAGIC {
        return None;
    }
    let count = u32::from_le_bytes(block[20..24].try_into().ok()?) as usize;
    if count > summary_capacity(block.len()) || u64::try_from(count).ok()? > place.offset {
        return None;
    }
    let end = SUMMARY_HEAD + 16 * count;
    let expect = (
        u64::from_le_bytes(block[8..16].try_into().ok()?),
        u32::from_le_bytes(block[16..20].try_into().ok()?),
        u64::from_le_bytes(block[24..32].try_into().ok()?),
        u64::from_le_bytes(block[32..40].try_into().ok()?),
    );
    if expect
        != (
            place.volume_id,
            place.data_zone,
            place.generation,
            place.offset,
        )
        || !crc_ok(block, end)
    {
        return None;
    }
    Some(
        (0..count)
            .map(|i| decode_tag(&block[SUMMARY_HEAD + 16 * i..SUMMARY_HEAD + 16 * (i + 1)]))
            .collect(),
    )
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn summaries_round_trip_only_at_their_own_place() {
        let place = SummaryPlace {
            volume_id: 3,
            data_zone: 2,
            generation: 5,
            offset: 40,
        };
        let tags = vec![
            Tag::Data { lba: 1, seq: 2 },
            Tag::Trim { seq: 3 },
            Tag::Data { lba: 9, seq: 4 },
        ];
        let mut b = vec![0u8; 512];
        encode_summary(&place, &tags, &mut b);
        assert_eq!(decode_summary(&place, &b), Some(tags));
        assert_eq!(
            decode_summary(
                &SummaryPlace {
                    offset: 41,
                    ..place
                },
                &b
            ),
            None
        );
        assert_eq!(
            decode_summary(
                &SummaryPlace {
                    generation: 6,
                    ..place
                },
                &b
            ),
            None
        );
        assert_eq!(
            decode_summary(
                &SummaryPlace {
                    volume_id: 4,
                    ..place
                },
                &b
            ),
            None
        );
        b[50] ^= 1;
        assert_eq!(decode_summary(&place, &b), None);
        assert_eq!(summary_capacity(512), 29);
        assert_eq!(summary_capacity(4096), 253);
    }
}
