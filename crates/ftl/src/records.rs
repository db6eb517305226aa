//! What the FTL writes beside and inside blocks so that a mount can rebuild the mapping:
//! the per-block metadata tag (OOB), the zone header block, and the trim record block.
//! Pure encoders and validating decoders; docs/FORMAT.md has the byte tables.
//!
//! Fault model of the decoders: their input is whatever the device returns, which may be
//! torn, stale, another volume's, or damaged in a way its checksum does not catch. They
//! never panic; they say whether the bytes are not this record at all (`Absent`: wrong
//! magic, length, place or checksum), or are this record with an impossible field
//! (`Invalid`, naming the field and its value), so recovery can tell "nothing here" from
//! corruption.

/// Sequence numbers and zone generations are counters from 1 that grow by one per write or
/// per zone opening; a value at or above this limit (2^62, about 146 years at a billion
/// writes a second) is corruption. The limit also keeps every `+ 1` on them from overflowing.
pub const COUNTER_LIMIT: u64 = 1 << 62;

/// Why bytes did not decode as a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Not this record: wrong length, magic or place, or a checksum mismatch (also what a
    /// torn write leaves).
    #[error("no {0} here (length, magic, place or checksum do not match)")]
    Absent(&'static str),
    /// The record is there and its checksum holds, but a field is impossible.
    #[error("{0}")]
    Invalid(String),
}

fn invalid<T>(msg: String) -> Result<T, RecordError> {
    Err(RecordError::Invalid(msg))
}

/// Checks a sequence number or generation read from the device.
/// Whether `v` is a valid counter: 1..2^62.
fn in_counter_range(v: u64) -> bool {
    v != 0 && v < COUNTER_LIMIT
}

fn counter(what: &str, v: u64) -> Result<u64, RecordError> {
    if !in_counter_range(v) {
        return invalid(format!("{what} is {v}, outside 1..2^62"));
    }
    Ok(v)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

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
/// the FTL never wrote, or a summary entry not to recover) decodes as `Unknown`; any other
/// tag must name a known kind with its counter in `1..COUNTER_LIMIT`.
pub fn decode_tag(meta: &[u8]) -> Result<Tag, RecordError> {
    let (Some(a), Some(b)) = (u64_at(meta, 0), u64_at(meta, 8)) else {
        return invalid(format!(
            "block metadata of {} bytes is too short for a 16-byte tag",
            meta.len()
        ));
    };
    match a {
        0 if b == 0 => Ok(Tag::Unknown),
        KIND_HEADER => Ok(Tag::Header {
            generation: counter("zone header tag generation", b)?,
        }),
        KIND_TRIM => Ok(Tag::Trim {
            seq: counter("trim tag sequence number", b)?,
        }),
        kind if kind > KIND_TRIM => invalid(format!("tag kind {kind:#x} is reserved")),
        // Every data block a mount scans comes through here: the error's text is
        // formatted only when there is one (formatted eagerly, it cost an allocation and a
        // formatting per block scanned).
        lba if !in_counter_range(b) => invalid(format!(
            "sequence number of the tag of LBA {lba} is {b}, outside 1..2^62"
        )),
        lba => Ok(Tag::Data { lba, seq: b }),
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
    match (block.get(..body), u32_at(block, body)) {
        (Some(covered), Some(crc)) => crc == crc32c::crc32c(covered),
        _ => false,
    }
}

pub fn encode_header(h: &ZoneHeader, block: &mut [u8]) {
    block.fill(0);
    block[..8].copy_from_slice(HEADER_MAGIC);
    block[8..16].copy_from_slice(&h.volume_id.to_le_bytes());
    block[16..20].copy_from_slice(&h.data_zone.to_le_bytes());
    block[20..28].copy_from_slice(&h.generation.to_le_bytes());
    crc_tail(block, 28);
}

/// Decodes a zone header block: `Absent` unless magic and checksum hold; the generation must
/// be in `1..COUNTER_LIMIT` (a zone is opened at least once before its header is written).
/// Volume id and zone index are the caller's to compare with where the block lies.
pub fn decode_header(block: &[u8]) -> Result<ZoneHeader, RecordError> {
    let absent = RecordError::Absent("zone header");
    if block.get(..8) != Some(HEADER_MAGIC.as_slice()) || !crc_ok(block, 28) {
        return Err(absent);
    }
    let (Some(volume_id), Some(data_zone), Some(generation)) =
        (u64_at(block, 8), u32_at(block, 16), u64_at(block, 20))
    else {
        return Err(absent);
    };
    Ok(ZoneHeader {
        volume_id,
        data_zone,
        generation: counter("zone header generation", generation)?,
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

/// Decodes a trim record block: `Absent` unless magic and checksum hold; the range must be
/// non-empty and not wrap, the sequence number in `1..COUNTER_LIMIT`. Whether the range lies
/// inside the volume is the caller's check (it knows the volume size).
pub fn decode_trim(block: &[u8]) -> Result<TrimRecord, RecordError> {
    let absent = RecordError::Absent("trim record");
    if block.get(..8) != Some(TRIM_MAGIC.as_slice()) || !crc_ok(block, 32) {
        return Err(absent);
    }
    let (Some(lba), Some(blocks), Some(seq)) =
        (u64_at(block, 8), u64_at(block, 16), u64_at(block, 24))
    else {
        return Err(absent);
    };
    if blocks == 0 || lba.checked_add(blocks).is_none() {
        return invalid(format!(
            "trim record range of {blocks} blocks from LBA {lba} is empty or wraps"
        ));
    }
    Ok(TrimRecord {
        lba,
        blocks,
        seq: counter("trim record sequence number", seq)?,
    })
}

const TL_MAGIC: &[u8; 8] = b"ZSTKTLRC";
const TL_HEAD: usize = 24;
const TL_ENTRY: usize = 24;

/// One zone a threaded-logging record names: re-opened by the device in generation
/// `generation`, its holes written from `first_hole` on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlEntry {
    pub data_zone: u32,
    pub generation: u64,
    pub first_hole: u64,
}

/// Zones one threaded-logging record can name (a turn re-opens at most
/// `threaded::TL_BATCH_MAX`).
pub const TL_RECORD_ZONES: usize = 4;

/// A threaded-logging record: the zones one turn re-opened, written (tag `Tag::Trim`, its
/// sequence number `seq`) and made durable before any of their holes is written, so that
/// recovery scans them from their first holes (docs/DESIGN.md, threaded logging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlRecord {
    pub seq: u64,
    pub count: usize,
    pub zones: [TlEntry; TL_RECORD_ZONES],
}

impl TlRecord {
    pub fn entries(&self) -> &[TlEntry] {
        &self.zones[..self.count.min(TL_RECORD_ZONES)]
    }
}

pub fn encode_tl_record(r: &TlRecord, block: &mut [u8]) {
    block.fill(0);
    let n = r.entries().len();
    block[..8].copy_from_slice(TL_MAGIC);
    block[8..16].copy_from_slice(&r.seq.to_le_bytes());
    block[16..20].copy_from_slice(&(n as u32).to_le_bytes());
    for (i, e) in r.entries().iter().enumerate() {
        let at = TL_HEAD + TL_ENTRY * i;
        block[at..at + 4].copy_from_slice(&e.data_zone.to_le_bytes());
        block[at + 8..at + 16].copy_from_slice(&e.generation.to_le_bytes());
        block[at + 16..at + 24].copy_from_slice(&e.first_hole.to_le_bytes());
    }
    crc_tail(block, TL_HEAD + TL_ENTRY * n);
}

/// Decodes a threaded-logging record block: `Absent` unless magic, a zone count of 1 to
/// `TL_RECORD_ZONES` and the checksum hold; the sequence number and each generation must
/// be in `1..COUNTER_LIMIT`, each first hole at least 1 (block 0 is the zone header), and the
/// reserved bytes zero. Whether the zones and holes exist is the caller's check.
pub fn decode_tl_record(block: &[u8]) -> Result<TlRecord, RecordError> {
    let absent = RecordError::Absent("threaded-logging record");
    if block.get(..8) != Some(TL_MAGIC.as_slice()) {
        return Err(absent);
    }
    let (Some(seq), Some(n)) = (u64_at(block, 8), u32_at(block, 16)) else {
        return Err(absent);
    };
    let n = n as usize;
    if n == 0 || n > TL_RECORD_ZONES || !crc_ok(block, TL_HEAD + TL_ENTRY * n) {
        return Err(absent);
    }
    if u32_at(block, 20) != Some(0) {
        return invalid("threaded-logging record: reserved bytes 20..24 are not zero".into());
    }
    let mut r = TlRecord {
        seq: counter("threaded-logging record sequence number", seq)?,
        count: n,
        zones: [TlEntry::default(); TL_RECORD_ZONES],
    };
    for i in 0..n {
        let at = TL_HEAD + TL_ENTRY * i;
        let (Some(z), Some(pad), Some(g), Some(h)) = (
            u32_at(block, at),
            u32_at(block, at + 4),
            u64_at(block, at + 8),
            u64_at(block, at + 16),
        ) else {
            return Err(RecordError::Absent("threaded-logging record"));
        };
        if pad != 0 || h == 0 {
            return invalid(format!(
                "threaded-logging record entry {i}: reserved bytes {pad:#x} or first hole {h} (block 0 is the header)"
            ));
        }
        r.zones[i] = TlEntry {
            data_zone: z,
            generation: counter("threaded-logging record generation", g)?,
            first_hole: h,
        };
    }
    Ok(r)
}

#[cfg(test)]
mod tl_record_tests {
    use super::*;

    #[test]
    fn tl_records_round_trip_and_reject_damage() {
        let mut r = TlRecord {
            seq: 77,
            count: 2,
            zones: [TlEntry::default(); TL_RECORD_ZONES],
        };
        r.zones[0] = TlEntry {
            data_zone: 3,
            generation: 5,
            first_hole: 9,
        };
        r.zones[1] = TlEntry {
            data_zone: 11,
            generation: 1,
            first_hole: 1,
        };
        let mut b = vec![0u8; 4096];
        encode_tl_record(&r, &mut b);
        assert_eq!(decode_tl_record(&b), Ok(r));
        assert_eq!(r.entries().len(), 2);
        // Not a trim record, and a trim record is not one.
        assert!(decode_trim(&b).is_err());
        let mut t = vec![0u8; 4096];
        encode_trim(
            &TrimRecord {
                lba: 1,
                blocks: 1,
                seq: 2,
            },
            &mut t,
        );
        assert_eq!(
            decode_tl_record(&t),
            Err(RecordError::Absent("threaded-logging record"))
        );
        let mut torn = b.clone();
        torn[40] ^= 1;
        assert_eq!(
            decode_tl_record(&torn),
            Err(RecordError::Absent("threaded-logging record"))
        );
        // A hole at the header, checksummed: corruption, not absence.
        r.zones[1].first_hole = 0;
        encode_tl_record(&r, &mut b);
        assert!(matches!(decode_tl_record(&b), Err(RecordError::Invalid(_))));
        r.zones[1].first_hole = 1;
        r.zones[1].generation = COUNTER_LIMIT;
        encode_tl_record(&r, &mut b);
        assert!(matches!(decode_tl_record(&b), Err(RecordError::Invalid(_))));
        r.count = 0;
        encode_tl_record(&r, &mut b);
        assert!(decode_tl_record(&b).is_err());
    }
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
            assert_eq!(decode_tag(&m), Ok(t));
        }
        assert_eq!(decode_tag(&[0u8; 16]), Ok(Tag::Unknown));
        assert!(matches!(
            decode_tag(&[1u8; 4]),
            Err(RecordError::Invalid(_))
        ));
        // A sequence number of 0 with a non-zero LBA, a reserved kind and a counter at the
        // limit are corruption, not "never written".
        for (a, b) in [(5, 0), (u64::MAX, 1), (3, COUNTER_LIMIT)] {
            m[..8].copy_from_slice(&u64::to_le_bytes(a));
            m[8..].copy_from_slice(&u64::to_le_bytes(b));
            assert!(
                matches!(decode_tag(&m), Err(RecordError::Invalid(_))),
                "{a} {b}"
            );
        }
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
        assert_eq!(decode_header(&b), Ok(h));
        b[21] ^= 1;
        assert_eq!(decode_header(&b), Err(RecordError::Absent("zone header")));
        let t = TrimRecord {
            lba: 100,
            blocks: 50,
            seq: 9,
        };
        encode_trim(&t, &mut b);
        assert_eq!(decode_trim(&b), Ok(t));
        assert!(decode_header(&b).is_err());
        b[30] ^= 4;
        assert_eq!(decode_trim(&b), Err(RecordError::Absent("trim record")));
        assert!(decode_trim(&[0u8; 10]).is_err());
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
    block_size.saturating_sub(SUMMARY_HEAD + 4) / 16
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

/// Decodes a summary block found at `place`. `Absent` if the block is not that summary (magic,
/// the place it names, a count it cannot hold, or the checksum); `Invalid` if it is, but it
/// claims more tags than data blocks precede it (block 0 is the zone header) or a tag is
/// malformed or a zone header's.
pub fn decode_summary(place: &SummaryPlace, block: &[u8]) -> Result<Vec<Tag>, RecordError> {
    let absent = RecordError::Absent("summary block");
    if block.get(..8) != Some(SUMMARY_MAGIC.as_slice()) {
        return Err(absent);
    }
    let (Some(volume_id), Some(data_zone), Some(count), Some(generation), Some(offset)) = (
        u64_at(block, 8),
        u32_at(block, 16),
        u32_at(block, 20),
        u64_at(block, 24),
        u64_at(block, 32),
    ) else {
        return Err(absent);
    };
    let count = count as usize;
    let named = (volume_id, data_zone, generation, offset);
    if named
        != (
            place.volume_id,
            place.data_zone,
            place.generation,
            place.offset,
        )
        || count > summary_capacity(block.len())
        || !crc_ok(block, SUMMARY_HEAD + 16 * count)
    {
        return Err(absent);
    }
    if count as u64 >= place.offset {
        return invalid(format!(
            "summary at offset {} of data zone {} claims {count} tags, but only {} data blocks precede it",
            place.offset,
            place.data_zone,
            place.offset.saturating_sub(1)
        ));
    }
    let mut tags = Vec::with_capacity(count);
    for i in 0..count {
        let at = SUMMARY_HEAD + 16 * i;
        let tag = decode_tag(block.get(at..at + 16).unwrap_or_default()).map_err(|e| {
            RecordError::Invalid(format!(
                "summary at offset {} of data zone {}, tag {i}: {e}",
                place.offset, place.data_zone
            ))
        })?;
        if let Tag::Header { .. } = tag {
            return invalid(format!(
                "summary at offset {} of data zone {}, tag {i}: a zone header tag, but block 0 is never summarised",
                place.offset, place.data_zone
            ));
        }
        tags.push(tag);
    }
    Ok(tags)
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
        assert_eq!(decode_summary(&place, &b), Ok(tags));
        assert_eq!(
            decode_summary(
                &SummaryPlace {
                    offset: 41,
                    ..place
                },
                &b
            ),
            Err(RecordError::Absent("summary block"))
        );
        assert_eq!(
            decode_summary(
                &SummaryPlace {
                    generation: 6,
                    ..place
                },
                &b
            ),
            Err(RecordError::Absent("summary block"))
        );
        assert_eq!(
            decode_summary(
                &SummaryPlace {
                    volume_id: 4,
                    ..place
                },
                &b
            ),
            Err(RecordError::Absent("summary block"))
        );
        b[50] ^= 1;
        assert!(decode_summary(&place, &b).is_err());
        assert_eq!(summary_capacity(512), 29);
        assert_eq!(summary_capacity(4096), 253);
    }
}
