//! Encoders and decoders of ZapRAID's on-disk structures: the segment header, the per-block
//! metadata record (with the array-state record that names failed members), footer blocks
//! and trim records (docs/FORMAT.md, "ZapRAID array").
//!
//! Fault model: the bytes come from a member and may be anything: a block never written
//! (zeros), a torn write, another structure, or a structure from a newer build. Decoders
//! validate every field and return a typed error; they never panic.

use crate::layout::{FOOTER_HEADER_BYTES, MAX_MEMBERS, RECORD_BYTES};

/// Format version this build writes and reads.
pub const VERSION: u16 = 2;
/// The segment header's version when its array keeps block records in-band (flags bit 0):
/// a build that knows only version 2 refuses such an array as newer instead of misreading it.
pub const VERSION_IN_BAND: u16 = 3;
/// Segment header flag: block records are kept in-band, in group summaries (docs/FORMAT.md).
pub const FLAG_IN_BAND: u32 = 1;
pub const HEADER_MAGIC: [u8; 8] = *b"ZSTKZPHD";
pub const RECORD_MAGIC: [u8; 4] = *b"ZPBM";
pub const FOOTER_MAGIC: [u8; 8] = *b"ZSTKZPFT";
pub const TRIM_MAGIC: [u8; 8] = *b"ZSTKZPTR";
/// The LBA of a padding block.
pub const NO_LBA: u64 = u64::MAX;
/// Sequence numbers stay below this, so `+ 1` never overflows.
pub const SEQ_LIMIT: u64 = 1 << 63;
/// Bytes of an encoded trim record.
pub const TRIM_BYTES: usize = 44;

/// Why bytes are not a valid structure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// Nothing here: a block never written, or a different structure.
    #[error("no record (magic does not match)")]
    NotARecord,
    /// The CRC does not hold: a torn or damaged write.
    #[error("checksum mismatch (torn or damaged)")]
    Checksum,
    #[error("format version {0} is newer than this build supports ({VERSION})")]
    NewerVersion(u16),
    /// The CRC holds but a field breaks a rule: corruption.
    #[error("corrupt: {0}")]
    Corrupt(String),
    /// The buffer is shorter than the structure.
    #[error("buffer of {0} bytes is too short")]
    Short(usize),
}

fn corrupt<T>(what: impl Into<String>) -> Result<T, MetaError> {
    Err(MetaError::Corrupt(what.into()))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut x = [0u8; 2];
    x.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(x)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Checks magic, length, CRC (stored at `crc_at`, over `0..crc_at`) and version (u16 at 8,
/// or the u8 at 4 for records). Callers pass a buffer of at least `crc_at + 4` bytes.
fn check_frame(b: &[u8], magic: &[u8], crc_at: usize) -> Result<(), MetaError> {
    if b.len() < crc_at + 4 {
        return Err(MetaError::Short(b.len()));
    }
    if &b[..magic.len()] != magic {
        return Err(MetaError::NotARecord);
    }
    if crc32c::crc32c(&b[..crc_at]) != u32_at(b, crc_at) {
        return Err(MetaError::Checksum);
    }
    Ok(())
}

fn check_version(v: u16) -> Result<(), MetaError> {
    match v {
        VERSION => Ok(()),
        0 => corrupt("format version 0"),
        v => Err(MetaError::NewerVersion(v)),
    }
}

/// The segment header (block 0 of every member zone of a segment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub member: u16,
    pub uuid: [u8; 16],
    pub segment: u32,
    pub k: u16,
    pub m: u16,
    pub group: u32,
    pub stripes: u32,
    pub footer_blocks: u32,
    pub volume_blocks: u64,
    pub seq_floor: u64,
    pub block_size: u32,
    pub oob_size: u32,
    pub zone_count: u32,
    pub zone_size: u64,
    pub zone_capacity: u64,
    /// Zone index of the segment on each member.
    pub zones: Vec<u32>,
    /// The array state when the segment was opened: its generation and the failed members
    /// (bit `i` = member `i`), so the state survives the collection of the segment that
    /// holds its record.
    pub state_gen: u64,
    pub failed: u64,
    /// Block records are kept in-band, in each group's summary block, not in the members'
    /// per-block metadata (`FLAG_IN_BAND`; header version 3).
    pub in_band: bool,
}

impl SegmentHeader {
    /// Encoded length: `116 + 4 n`.
    pub fn len(&self) -> usize {
        116 + 4 * self.zones.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Encodes into a zeroed block of `block_size` bytes.
    pub fn encode(&self, block_size: usize) -> Vec<u8> {
        let mut b = vec![0u8; block_size.max(self.len())];
        b[0..8].copy_from_slice(&HEADER_MAGIC);
        let version = if self.in_band {
            VERSION_IN_BAND
        } else {
            VERSION
        };
        b[8..10].copy_from_slice(&version.to_le_bytes());
        b[10..12].copy_from_slice(&self.member.to_le_bytes());
        b[12..28].copy_from_slice(&self.uuid);
        b[28..32].copy_from_slice(&self.segment.to_le_bytes());
        b[32..34].copy_from_slice(&self.k.to_le_bytes());
        b[34..36].copy_from_slice(&self.m.to_le_bytes());
        b[36..40].copy_from_slice(&self.group.to_le_bytes());
        b[40..44].copy_from_slice(&self.stripes.to_le_bytes());
        b[44..48].copy_from_slice(&self.footer_blocks.to_le_bytes());
        b[48..56].copy_from_slice(&self.volume_blocks.to_le_bytes());
        b[56..64].copy_from_slice(&self.seq_floor.to_le_bytes());
        b[64..68].copy_from_slice(&self.block_size.to_le_bytes());
        b[68..72].copy_from_slice(&self.oob_size.to_le_bytes());
        b[72..76].copy_from_slice(&self.zone_count.to_le_bytes());
        if self.in_band {
            b[76..80].copy_from_slice(&FLAG_IN_BAND.to_le_bytes());
        }
        b[80..88].copy_from_slice(&self.zone_size.to_le_bytes());
        b[88..96].copy_from_slice(&self.zone_capacity.to_le_bytes());
        for (i, z) in self.zones.iter().enumerate() {
            b[96 + 4 * i..100 + 4 * i].copy_from_slice(&z.to_le_bytes());
        }
        let at = 96 + 4 * self.zones.len();
        b[at..at + 8].copy_from_slice(&self.state_gen.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&self.failed.to_le_bytes());
        let at = at + 16;
        let crc = crc32c::crc32c(&b[..at]);
        b[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and validates a header block.
    pub fn decode(b: &[u8]) -> Result<SegmentHeader, MetaError> {
        if b.len() < 100 {
            return Err(MetaError::Short(b.len()));
        }
        if b[0..8] != HEADER_MAGIC {
            return Err(MetaError::NotARecord);
        }
        let k = u16_at(b, 32);
        let m = u16_at(b, 34);
        let n = usize::from(k) + usize::from(m);
        // The member count decides where the CRC is, so bound it before using it.
        if n == 0 || n > MAX_MEMBERS as usize {
            return if crc32c::crc32c(&b[..96]) == u32_at(b, 96) {
                corrupt(format!("k + m = {n} members"))
            } else {
                Err(MetaError::Checksum)
            };
        }
        let crc_at = 112 + 4 * n;
        check_frame(b, &HEADER_MAGIC, crc_at)?;
        let version = u16_at(b, 8);
        let flags = u32_at(b, 76);
        match version {
            VERSION_IN_BAND if flags == FLAG_IN_BAND => {}
            VERSION_IN_BAND => return corrupt(format!("header flags {flags:#x}")),
            v => check_version(v)?,
        }
        let h = SegmentHeader {
            member: u16_at(b, 10),
            uuid: {
                let mut u = [0u8; 16];
                u.copy_from_slice(&b[12..28]);
                u
            },
            segment: u32_at(b, 28),
            k,
            m,
            group: u32_at(b, 36),
            stripes: u32_at(b, 40),
            footer_blocks: u32_at(b, 44),
            volume_blocks: u64_at(b, 48),
            seq_floor: u64_at(b, 56),
            block_size: u32_at(b, 64),
            oob_size: u32_at(b, 68),
            zone_count: u32_at(b, 72),
            zone_size: u64_at(b, 80),
            zone_capacity: u64_at(b, 88),
            zones: (0..n).map(|i| u32_at(b, 96 + 4 * i)).collect(),
            state_gen: u64_at(b, 96 + 4 * n),
            failed: u64_at(b, 104 + 4 * n),
            in_band: version == VERSION_IN_BAND,
        };
        // Version 2 has no flags: its bytes 76..80 are reserved (zero).
        let reserved: &[u8] = if h.in_band { &[] } else { &b[76..80] };
        h.validate(reserved, &b[crc_at + 4..])?;
        Ok(h)
    }

    fn validate(&self, reserved: &[u8], tail: &[u8]) -> Result<(), MetaError> {
        if reserved.iter().chain(tail).any(|x| *x != 0) {
            return corrupt("reserved bytes are not zero");
        }
        if self.k < 2 || self.m == 0 {
            return corrupt(format!("k = {}, m = {}", self.k, self.m));
        }
        if usize::from(self.member) >= self.zones.len() {
            return corrupt(format!(
                "member index {} of {}",
                self.member,
                self.zones.len()
            ));
        }
        if self.stripes == 0 || self.group == 0 || self.group > self.stripes {
            return corrupt(format!("G = {}, S = {}", self.group, self.stripes));
        }
        let used = 1 + u64::from(self.stripes) + u64::from(self.footer_blocks);
        if used > self.zone_capacity || self.zone_capacity > self.zone_size {
            return corrupt("regions exceed the zone capacity");
        }
        if self.segment >= self.zone_count || self.zones.iter().any(|z| *z >= self.zone_count) {
            return corrupt("zone index beyond the zone count");
        }
        if self.seq_floor >= SEQ_LIMIT {
            return corrupt("sequence floor out of range");
        }
        if self.failed >> self.zones.len() != 0 {
            return corrupt(format!(
                "failed members {:#x} beyond the array",
                self.failed
            ));
        }
        Ok(())
    }
}

/// Kinds of per-block record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Data = 1,
    Parity = 2,
    Trim = 3,
    /// An array-state record, replicated in every block of its stripe: `lba` holds the
    /// failed members (bit `i` = member `i`), `seq` the state's generation.
    State = 4,
    /// A replacement's block of a stripe that was not whole on the other members (power loss
    /// tore it): it holds nothing and is no part of its stripe, which stays torn. `lba` is
    /// `u64::MAX`, `seq` 0.
    Hole = 5,
    /// A group's summary block (arrays with in-band records): the last stripe of every group
    /// holds, on each member, the records of that member's blocks of the group. `lba` is
    /// `u64::MAX`, `seq` 0; never in per-block metadata, only in summaries and footers.
    Summary = 6,
}

/// The per-block metadata record (docs/FORMAT.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRecord {
    pub kind: RecordKind,
    pub lba: u64,
    pub seq: u64,
    /// The stripe's index in its segment.
    pub stripe: u32,
    /// Parity records only: the parity (`crate::code`) of the kind codes of the stripe's data
    /// blocks, so the kind of a lost data block (data or trim) is rebuilt with its LBA and
    /// sequence number. 0 in every other record.
    pub kinds: u16,
}

impl BlockRecord {
    /// A data, trim or state record (`kinds` 0).
    pub fn new(kind: RecordKind, lba: u64, seq: u64, stripe: u32) -> BlockRecord {
        BlockRecord {
            kind,
            lba,
            seq,
            stripe,
            kinds: 0,
        }
    }

    /// A replacement's block at the offset of torn stripe `stripe` (`RecordKind::Hole`).
    pub fn hole(stripe: u32) -> BlockRecord {
        BlockRecord::new(RecordKind::Hole, NO_LBA, 0, stripe)
    }

    /// A group summary block at the offset of barrier stripe `stripe` (`RecordKind::Summary`).
    pub fn summary(stripe: u32) -> BlockRecord {
        BlockRecord::new(RecordKind::Summary, NO_LBA, 0, stripe)
    }

    /// A padding block of stripe `stripe`.
    pub fn padding(stripe: u32) -> BlockRecord {
        BlockRecord::new(RecordKind::Data, NO_LBA, 0, stripe)
    }

    /// The array-state record of generation `gen` naming the `failed` members.
    pub fn state(gen: u64, failed: u64, stripe: u32) -> BlockRecord {
        BlockRecord::new(RecordKind::State, failed, gen, stripe)
    }

    pub fn is_padding(&self) -> bool {
        self.kind == RecordKind::Data && self.lba == NO_LBA
    }

    pub fn encode(&self) -> [u8; RECORD_BYTES as usize] {
        let mut b = [0u8; RECORD_BYTES as usize];
        b[0..4].copy_from_slice(&RECORD_MAGIC);
        b[4] = VERSION as u8;
        b[5] = self.kind as u8;
        b[6..8].copy_from_slice(&self.kinds.to_le_bytes());
        b[8..16].copy_from_slice(&self.lba.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..28].copy_from_slice(&self.stripe.to_le_bytes());
        let crc = crc32c::crc32c(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a record from the first 32 bytes of a block's metadata; the rest of the
    /// metadata must be zero.
    pub fn decode(b: &[u8]) -> Result<BlockRecord, MetaError> {
        check_frame(b, &RECORD_MAGIC, 28)?;
        check_version(u16::from(b[4]))?;
        if b[32..].iter().any(|x| *x != 0) {
            return corrupt("reserved bytes are not zero");
        }
        let kind = match b[5] {
            1 => RecordKind::Data,
            2 => RecordKind::Parity,
            3 => RecordKind::Trim,
            4 => RecordKind::State,
            5 => RecordKind::Hole,
            6 => RecordKind::Summary,
            k => return corrupt(format!("record kind {k}")),
        };
        // A parity record's kinds are any u16 (Reed-Solomon parity of kind codes; with m = 1
        // their XOR, 0..=3): whether they rebuild a kind is `code::rebuild_record`'s check.
        let kinds = u16::from_le_bytes([b[6], b[7]]);
        if kind != RecordKind::Parity && kinds != 0 {
            return corrupt(format!("kinds {kinds} in a {kind:?} record"));
        }
        let r = BlockRecord {
            kind,
            lba: u64_at(b, 8),
            seq: u64_at(b, 16),
            stripe: u32_at(b, 24),
            kinds,
        };
        match kind {
            RecordKind::Parity => {}
            RecordKind::State if r.seq == 0 || r.seq >= SEQ_LIMIT => {
                return corrupt(format!("array-state generation {}", r.seq));
            }
            RecordKind::State => {}
            RecordKind::Hole if r.lba != NO_LBA || r.seq != 0 => {
                return corrupt("a hole with an LBA or a sequence number");
            }
            RecordKind::Hole => {}
            RecordKind::Summary if r.lba != NO_LBA || r.seq != 0 => {
                return corrupt("a summary with an LBA or a sequence number");
            }
            RecordKind::Summary => {}
            // Padding has no LBA and no sequence number; a trim record always has both.
            _ if r.lba == NO_LBA && (kind == RecordKind::Trim || r.seq != 0) => {
                return corrupt("padding with a sequence number");
            }
            _ if r.lba == NO_LBA => {}
            _ if r.seq == 0 || r.seq >= SEQ_LIMIT => {
                return corrupt(format!("sequence number {}", r.seq));
            }
            _ => {}
        }
        Ok(r)
    }
}

/// A footer block: the records of data offsets `first .. first + records.len()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FooterBlock {
    pub member: u16,
    pub segment: u32,
    pub first: u32,
    /// Records in offset order; `None` encodes as zeros (an offset never written, which a
    /// sealed segment does not have, but the codec does not forbid).
    pub records: Vec<Option<BlockRecord>>,
}

impl FooterBlock {
    /// Entries one block of `block_size` bytes holds.
    pub fn capacity(block_size: usize) -> usize {
        block_size.saturating_sub(FOOTER_HEADER_BYTES as usize) / RECORD_BYTES as usize
    }

    pub fn encode(&self, block_size: usize) -> Vec<u8> {
        let rb = RECORD_BYTES as usize;
        let h = FOOTER_HEADER_BYTES as usize;
        let mut b = vec![0u8; block_size.max(h + rb * self.records.len())];
        b[0..8].copy_from_slice(&FOOTER_MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&self.member.to_le_bytes());
        b[12..16].copy_from_slice(&self.segment.to_le_bytes());
        b[16..20].copy_from_slice(&self.first.to_le_bytes());
        b[20..24].copy_from_slice(&(self.records.len() as u32).to_le_bytes());
        for (i, r) in self.records.iter().enumerate() {
            if let Some(r) = r {
                b[h + rb * i..h + rb * (i + 1)].copy_from_slice(&r.encode());
            }
        }
        let mut crc = crc32c::crc32c(&b[..28]);
        crc = crc32c::crc32c_append(crc, &b[h..h + rb * self.records.len()]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<FooterBlock, MetaError> {
        let rb = RECORD_BYTES as usize;
        let h = FOOTER_HEADER_BYTES as usize;
        if b.len() < h {
            return Err(MetaError::Short(b.len()));
        }
        if b[0..8] != FOOTER_MAGIC {
            return Err(MetaError::NotARecord);
        }
        let count = u32_at(b, 20) as usize;
        if count == 0 || count > Self::capacity(b.len()) {
            return if crc32c::crc32c(&b[..28]) == u32_at(b, 28) && count > 0 {
                corrupt(format!("{count} entries do not fit the block"))
            } else {
                Err(MetaError::Checksum)
            };
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..28]), &b[h..h + rb * count]);
        if crc != u32_at(b, 28) {
            return Err(MetaError::Checksum);
        }
        check_version(u16_at(b, 8))?;
        if b[24..28]
            .iter()
            .chain(&b[h + rb * count..])
            .any(|x| *x != 0)
        {
            return corrupt("reserved bytes are not zero");
        }
        let mut records = Vec::with_capacity(count);
        for i in 0..count {
            let e = &b[h + rb * i..h + rb * (i + 1)];
            records.push(if e.iter().all(|x| *x == 0) {
                None
            } else {
                Some(
                    BlockRecord::decode(e)
                        .map_err(|err| MetaError::Corrupt(format!("footer entry {i}: {err}")))?,
                )
            });
        }
        Ok(FooterBlock {
            member: u16_at(b, 10),
            segment: u32_at(b, 12),
            first: u32_at(b, 16),
            records,
        })
    }
}

/// A trim record: the content of a kind-3 block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimRecord {
    pub first: u64,
    pub count: u64,
    pub seq: u64,
}

impl TrimRecord {
    pub fn encode(&self, block_size: usize) -> Vec<u8> {
        let mut b = vec![0u8; block_size.max(TRIM_BYTES)];
        b[0..8].copy_from_slice(&TRIM_MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.first.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.seq.to_le_bytes());
        let crc = crc32c::crc32c(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<TrimRecord, MetaError> {
        check_frame(b, &TRIM_MAGIC, 40)?;
        check_version(u16_at(b, 8))?;
        if b[10..16].iter().chain(&b[44..]).any(|x| *x != 0) {
            return corrupt("reserved bytes are not zero");
        }
        let t = TrimRecord {
            first: u64_at(b, 16),
            count: u64_at(b, 24),
            seq: u64_at(b, 32),
        };
        if t.count == 0 || t.first.checked_add(t.count).is_none() {
            return corrupt(format!("range {} + {}", t.first, t.count));
        }
        if t.seq == 0 || t.seq >= SEQ_LIMIT {
            return corrupt(format!("sequence number {}", t.seq));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_not_a_record_and_a_torn_record_is_a_checksum_error() {
        assert_eq!(BlockRecord::decode(&[0u8; 64]), Err(MetaError::NotARecord));
        assert_eq!(
            SegmentHeader::decode(&[0u8; 4096]),
            Err(MetaError::NotARecord)
        );
        assert_eq!(
            FooterBlock::decode(&[0u8; 4096]),
            Err(MetaError::NotARecord)
        );
        assert_eq!(TrimRecord::decode(&[0u8; 4096]), Err(MetaError::NotARecord));
        let r = BlockRecord::new(RecordKind::Data, 5, 9, 3);
        let mut b = [0u8; 64];
        b[..32].copy_from_slice(&r.encode());
        assert_eq!(BlockRecord::decode(&b), Ok(r));
        b[9] ^= 1;
        assert_eq!(BlockRecord::decode(&b), Err(MetaError::Checksum));
    }

    #[test]
    fn a_parity_record_round_trips_with_any_kinds() {
        let mut p = BlockRecord::new(RecordKind::Parity, 10 ^ 77, 100 ^ 101, 7);
        for kinds in [0, 3, 0xbeef] {
            p.kinds = kinds;
            let mut b = [0u8; 64];
            b[..32].copy_from_slice(&p.encode());
            assert_eq!(BlockRecord::decode(&b), Ok(p));
        }
        // Kinds belong to parity records only.
        let mut d = BlockRecord::new(RecordKind::Data, 10, 100, 7);
        d.kinds = 1;
        let mut b = [0u8; 64];
        b[..32].copy_from_slice(&d.encode());
        assert!(matches!(
            BlockRecord::decode(&b),
            Err(MetaError::Corrupt(_))
        ));
    }

    #[test]
    fn a_hole_round_trips_carries_nothing_and_rebuilds_nothing() {
        let h = BlockRecord::hole(4);
        let mut b = [0u8; 64];
        b[..32].copy_from_slice(&h.encode());
        assert_eq!(BlockRecord::decode(&b), Ok(h));
        assert!(!h.is_padding());
        let mut with_seq = BlockRecord::hole(4);
        with_seq.seq = 3;
        b[..32].copy_from_slice(&with_seq.encode());
        assert!(matches!(
            BlockRecord::decode(&b),
            Err(MetaError::Corrupt(_))
        ));
    }
}
