//! Encoders and decoders of RAIZN's metadata records: the record header, the superblock,
//! generation counters, the zone-reset log and the finished zones (docs/FORMAT.md, "RAIZN
//! array").
//!
//! Fault model: the bytes come from a member device and may be anything: a block never
//! written (zeros), a torn write, another record type, or a record from a newer build.
//! Decoders validate every field and return a typed error; they never panic.

use zns::Geometry;

/// Magic of every record header.
pub const MAGIC: [u8; 8] = *b"ZSTKRZMD";
/// Record format version this build writes. Version 2 added the finished-zones record
/// (type 7); version 3 lets the superblock's metadata-zone count be `2 + K` for K log
/// zones per member (versions 1 and 2 require 3: K = 1); the other records are unchanged.
pub const VERSION: u16 = 3;
/// The oldest record format version this build reads: version 1 and 2 arrays open
/// (docs/FORMAT.md says how) and are written as version 3 from then on.
pub const OLDEST_VERSION: u16 = 1;
/// Bytes of the record header.
pub const HEADER_BYTES: usize = 64;
/// Bytes of the superblock's inline payload.
pub const SUPERBLOCK_BYTES: usize = 104;
/// The superblock's failed-member field when no member has failed.
const NO_FAILED_MEMBER: u32 = u32::MAX;
/// Generations and sequence numbers stay below this, so `+ 1` never overflows.
pub const COUNTER_LIMIT: u64 = 1 << 63;
/// Flag bit: the record was written by metadata garbage collection.
pub const FLAG_CHECKPOINT: u16 = 1;

/// Record types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordType {
    Superblock = 1,
    Generations = 2,
    ZoneReset = 3,
    PartialParity = 4,
    Relocated = 5,
    RebuiltZones = 6,
    FinishedZones = 7,
    LogFence = 8,
}

impl RecordType {
    fn from_u16(v: u16) -> Option<RecordType> {
        [
            RecordType::Superblock,
            RecordType::Generations,
            RecordType::ZoneReset,
            RecordType::PartialParity,
            RecordType::Relocated,
            RecordType::RebuiltZones,
            RecordType::FinishedZones,
            RecordType::LogFence,
        ]
        .into_iter()
        .find(|t| *t as u16 == v)
    }

    /// Whether records of this type carry bulk blocks after the header block.
    fn has_bulk(self) -> bool {
        matches!(self, RecordType::PartialParity | RecordType::Relocated)
    }
}

/// Why bytes are not a valid record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// No record here: a block never written, or the end of a log.
    #[error("no record (magic does not match)")]
    NotARecord,
    /// The header CRC does not hold: a torn write.
    #[error("record checksum mismatch (torn or damaged record)")]
    Checksum,
    #[error("record format version {0} is newer than this build supports ({VERSION})")]
    NewerVersion(u16),
    /// The CRC holds but a field breaks a rule: corruption.
    #[error("corrupt record: {0}")]
    Corrupt(String),
}

fn corrupt<T>(what: impl Into<String>) -> Result<T, MetaError> {
    Err(MetaError::Corrupt(what.into()))
}

/// A record header (docs/FORMAT.md, "Record header").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub kind: RecordType,
    pub inline_len: u32,
    pub start_lba: u64,
    pub end_lba: u64,
    pub generation: u64,
    pub sequence: u64,
    pub bulk_blocks: u32,
    pub bulk_crc: u32,
    pub flags: u16,
}

/// Little-endian readers over a slice whose length the caller has checked.
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

/// Encodes a header block of `block_size` bytes: the header, `inline`, zeros.
pub fn encode_record(
    header: &RecordHeader,
    inline: &[u8],
    block_size: usize,
) -> Result<Vec<u8>, MetaError> {
    if HEADER_BYTES + inline.len() > block_size {
        return corrupt(format!(
            "inline payload of {} bytes does not fit a {block_size}-byte block",
            inline.len()
        ));
    }
    let mut b = vec![0u8; block_size];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..10].copy_from_slice(&VERSION.to_le_bytes());
    b[10..12].copy_from_slice(&(header.kind as u16).to_le_bytes());
    b[12..16].copy_from_slice(&(inline.len() as u32).to_le_bytes());
    b[16..24].copy_from_slice(&header.start_lba.to_le_bytes());
    b[24..32].copy_from_slice(&header.end_lba.to_le_bytes());
    b[32..40].copy_from_slice(&header.generation.to_le_bytes());
    b[40..48].copy_from_slice(&header.sequence.to_le_bytes());
    b[48..52].copy_from_slice(&header.bulk_blocks.to_le_bytes());
    b[52..56].copy_from_slice(&header.bulk_crc.to_le_bytes());
    b[56..58].copy_from_slice(&header.flags.to_le_bytes());
    b[HEADER_BYTES..HEADER_BYTES + inline.len()].copy_from_slice(inline);
    let crc = header_crc(&b[..60], inline);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    let decoded = decode_record(&b).map(|(h, _)| h);
    debug_assert_eq!(
        decoded.as_ref().map(|h| h.kind),
        Ok(header.kind),
        "an encoded record must decode"
    );
    decoded?;
    Ok(b)
}

fn header_crc(head: &[u8], inline: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(head), inline)
}

/// Decodes the header block `b`; returns the header and its inline payload.
pub fn decode_record(b: &[u8]) -> Result<(RecordHeader, &[u8]), MetaError> {
    if b.len() < HEADER_BYTES || b[0..8] != MAGIC {
        return Err(MetaError::NotARecord);
    }
    let inline_len = u32_at(b, 12);
    let inline_end = HEADER_BYTES
        .checked_add(inline_len as usize)
        .filter(|e| *e <= b.len())
        .ok_or(MetaError::Checksum)?;
    let inline = &b[HEADER_BYTES..inline_end];
    if header_crc(&b[..60], inline) != u32_at(b, 60) {
        return Err(MetaError::Checksum);
    }
    let version = u16_at(b, 8);
    if version > VERSION {
        return Err(MetaError::NewerVersion(version));
    }
    if version < OLDEST_VERSION {
        return corrupt(format!("version {version}"));
    }
    let kind_raw = u16_at(b, 10);
    let Some(kind) = RecordType::from_u16(kind_raw) else {
        return corrupt(format!("record type {kind_raw}"));
    };
    let h = RecordHeader {
        kind,
        inline_len,
        start_lba: u64_at(b, 16),
        end_lba: u64_at(b, 24),
        generation: u64_at(b, 32),
        sequence: u64_at(b, 40),
        bulk_blocks: u32_at(b, 48),
        bulk_crc: u32_at(b, 52),
        flags: u16_at(b, 56),
    };
    validate_header(&h, &b[58..60])?;
    Ok((h, inline))
}

fn validate_header(h: &RecordHeader, reserved: &[u8]) -> Result<(), MetaError> {
    if reserved.iter().any(|x| *x != 0) {
        return corrupt("reserved header bytes 58..60 are not zero");
    }
    if h.flags & !FLAG_CHECKPOINT != 0 {
        return corrupt(format!("unknown flags {:#x}", h.flags));
    }
    if h.end_lba < h.start_lba {
        return corrupt(format!(
            "end LBA {} below start LBA {}",
            h.end_lba, h.start_lba
        ));
    }
    if h.generation >= COUNTER_LIMIT {
        return corrupt(format!("generation {}", h.generation));
    }
    if h.sequence == 0 || h.sequence >= COUNTER_LIMIT {
        return corrupt(format!("sequence number {}", h.sequence));
    }
    if !h.kind.has_bulk() && (h.bulk_blocks != 0 || h.bulk_crc != 0) {
        return corrupt(format!("{:?} record with bulk blocks", h.kind));
    }
    Ok(())
}

/// The superblock's payload (docs/FORMAT.md, "Superblock").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub array_uuid: [u8; 16],
    pub members: u32,
    pub member_index: u32,
    pub parity: u32,
    pub su_blocks: u32,
    pub meta_zones: u32,
    /// The member geometry the array was formatted on.
    pub member_geometry: Geometry,
    /// Superblock generation (the record's sequence number): 1 at format, +1 for every
    /// rewrite; the highest one in a member's general zone is current.
    pub generation: u64,
    /// The member the array lost (degraded mode), as recorded by the survivors.
    pub failed_member: Option<u32>,
    /// The second member lost (m = 2 only; recorded only with `failed_member`).
    pub second_failed_member: Option<u32>,
}

impl Superblock {
    /// The header block holding this superblock.
    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        let g = &self.member_geometry;
        let mut p = [0u8; SUPERBLOCK_BYTES];
        p[0..16].copy_from_slice(&self.array_uuid);
        let words: [(usize, u32); 16] = [
            (16, self.members),
            (20, self.member_index),
            (24, self.parity),
            (28, self.su_blocks),
            (32, self.meta_zones),
            (36, g.block_size),
            (40, g.oob_size),
            (44, g.zone_count),
            (64, g.max_open),
            (68, g.max_active),
            (72, g.zasl_blocks),
            (76, g.mdts_blocks),
            (80, g.copy_max_ranges),
            (84, g.copy_max_range_blocks),
            (88, g.copy_max_blocks),
            (92, u32::from(g.cross_zone_reads)),
        ];
        for (at, v) in words {
            p[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        p[48..56].copy_from_slice(&g.zone_size.to_le_bytes());
        p[56..64].copy_from_slice(&g.zone_capacity.to_le_bytes());
        let failed = self.failed_member.unwrap_or(NO_FAILED_MEMBER);
        p[96..100].copy_from_slice(&failed.to_le_bytes());
        // Bytes 100..104 were reserved (zero) before m = 2: index + 1 keeps zero meaning none.
        let second = self.second_failed_member.map_or(0, |f| f.saturating_add(1));
        p[100..104].copy_from_slice(&second.to_le_bytes());
        if self.generation == 0 || self.generation >= COUNTER_LIMIT {
            return corrupt(format!("superblock generation {}", self.generation));
        }
        let h = RecordHeader {
            kind: RecordType::Superblock,
            inline_len: SUPERBLOCK_BYTES as u32,
            start_lba: 0,
            end_lba: 0,
            generation: 0,
            sequence: self.generation,
            bulk_blocks: 0,
            bulk_crc: 0,
            flags: 0,
        };
        encode_record(&h, &p, g.block_size as usize)
    }

    /// Decodes a superblock from its header block.
    pub fn decode(b: &[u8]) -> Result<Superblock, MetaError> {
        let (h, p) = decode_record(b)?;
        if h.kind != RecordType::Superblock {
            return corrupt(format!(
                "a {:?} record where the superblock belongs",
                h.kind
            ));
        }
        if p.len() != SUPERBLOCK_BYTES {
            return corrupt(format!("superblock payload of {} bytes", p.len()));
        }
        let flags = u32_at(p, 92);
        if flags & !1 != 0 {
            return corrupt(format!("superblock flags {flags:#x}"));
        }
        let g = Geometry {
            block_size: u32_at(p, 36),
            oob_size: u32_at(p, 40),
            zone_count: u32_at(p, 44),
            zone_size: u64_at(p, 48),
            zone_capacity: u64_at(p, 56),
            max_open: u32_at(p, 64),
            max_active: u32_at(p, 68),
            zasl_blocks: u32_at(p, 72),
            mdts_blocks: u32_at(p, 76),
            copy_max_ranges: u32_at(p, 80),
            copy_max_range_blocks: u32_at(p, 84),
            copy_max_blocks: u32_at(p, 88),
            cross_zone_reads: flags & 1 != 0,
        };
        if let Err(e) = g.validate() {
            return corrupt(format!("superblock geometry: {e}"));
        }
        if g.block_size as usize != b.len() {
            return corrupt(format!(
                "superblock names block size {} but was read from a {}-byte block",
                g.block_size,
                b.len()
            ));
        }
        let mut array_uuid = [0u8; 16];
        array_uuid.copy_from_slice(&p[0..16]);
        let sb = Superblock {
            array_uuid,
            members: u32_at(p, 16),
            member_index: u32_at(p, 20),
            parity: u32_at(p, 24),
            su_blocks: u32_at(p, 28),
            meta_zones: u32_at(p, 32),
            member_geometry: g,
            generation: h.sequence,
            failed_member: match u32_at(p, 96) {
                NO_FAILED_MEMBER => None,
                m => Some(m),
            },
            second_failed_member: u32_at(p, 100).checked_sub(1),
        };
        sb.validate()?;
        let version = record_version(b);
        if version < 3 && sb.meta_zones != crate::layout::MIN_META_ZONES {
            return corrupt(format!(
                "{} metadata zones in a version {version} superblock (3 required)",
                sb.meta_zones
            ));
        }
        Ok(sb)
    }

    fn validate(&self) -> Result<(), MetaError> {
        let g = &self.member_geometry;
        if !(3..=255).contains(&self.members) {
            return corrupt(format!("member count {}", self.members));
        }
        if self.member_index >= self.members {
            return corrupt(format!(
                "member index {} of {} members",
                self.member_index, self.members
            ));
        }
        if let Some(f) = self.failed_member {
            if f >= self.members || f == self.member_index {
                return corrupt(format!(
                    "failed member {f} recorded by member {} of {}",
                    self.member_index, self.members
                ));
            }
        }
        if let Some(f) = self.second_failed_member {
            let bad = f >= self.members
                || f == self.member_index
                || self.failed_member.is_none_or(|first| first == f)
                || self.parity < 2;
            if bad {
                return corrupt(format!(
                    "second failed member {f} recorded by member {} of {} (first {:?}, parity {})",
                    self.member_index, self.members, self.failed_member, self.parity
                ));
            }
        }
        if self.parity != 1 && self.parity != 2 {
            return corrupt(format!("parity count {}", self.parity));
        }
        if self.su_blocks == 0 || !g.zone_capacity.is_multiple_of(u64::from(self.su_blocks)) {
            return corrupt(format!(
                "stripe unit {} blocks against zone capacity {}",
                self.su_blocks, g.zone_capacity
            ));
        }
        let k = self.meta_zones.wrapping_sub(2);
        let too_many = k > 1 && k > g.zone_count / 4;
        if self.meta_zones < crate::layout::MIN_META_ZONES
            || g.zone_count <= self.meta_zones
            || too_many
        {
            return corrupt(format!(
                "{} metadata zones of {} zones",
                self.meta_zones, g.zone_count
            ));
        }
        Ok(())
    }
}

/// A generation-counter record's payload: counters of zones `first .. first + len`.
pub fn encode_generations(first: u32, gens: &[u64]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + 8 * gens.len());
    p.extend_from_slice(&first.to_le_bytes());
    p.extend_from_slice(&(gens.len() as u32).to_le_bytes());
    for g in gens {
        p.extend_from_slice(&g.to_le_bytes());
    }
    p
}

/// Decodes a generation-counter payload against a volume of `zones` logical zones.
pub fn decode_generations(p: &[u8], zones: u32) -> Result<(u32, Vec<u64>), MetaError> {
    if p.len() < 8 {
        return corrupt("generation payload shorter than 8 bytes");
    }
    let first = u32_at(p, 0);
    let count = u32_at(p, 4);
    let expected = 8 + 8 * u64::from(count);
    if count == 0 || p.len() as u64 != expected {
        return corrupt(format!("{count} generations in {} bytes", p.len()));
    }
    if u64::from(first) + u64::from(count) > u64::from(zones) {
        return corrupt(format!("generations of zones {first}+{count} of {zones}"));
    }
    let gens: Vec<u64> = (0..count as usize).map(|i| u64_at(p, 8 + 8 * i)).collect();
    if let Some(g) = gens.iter().find(|g| **g >= COUNTER_LIMIT) {
        return corrupt(format!("generation {g}"));
    }
    Ok((first, gens))
}

/// What a zone log record (type 3) announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneLogAction {
    /// The logical zone's member zones are about to be reset.
    Reset = 0,
    /// The logical zone's member zones are about to be finished.
    Finish = 1,
}

/// A zone log payload: `zone` is about to be reset or finished.
pub fn encode_zone_log(zone: u32, action: ZoneLogAction) -> [u8; 8] {
    let mut p = [0u8; 8];
    p[0..4].copy_from_slice(&zone.to_le_bytes());
    p[4..8].copy_from_slice(&(action as u32).to_le_bytes());
    p
}

/// Decodes a zone log payload against a volume of `zones` logical zones.
pub fn decode_zone_log(p: &[u8], zones: u32) -> Result<(u32, ZoneLogAction), MetaError> {
    if p.len() != 8 {
        return corrupt(format!("zone log payload of {} bytes", p.len()));
    }
    let action = match u32_at(p, 4) {
        0 => ZoneLogAction::Reset,
        1 => ZoneLogAction::Finish,
        a => return corrupt(format!("zone log action {a}")),
    };
    let zone = u32_at(p, 0);
    if zone >= zones {
        return corrupt(format!("zone log of zone {zone} of {zones}"));
    }
    Ok((zone, action))
}

/// Zones a rebuild completed on its new member (type 6): the member, the superblock
/// generation the new member was formatted with (which identifies that device), and each
/// zone with its generation when it was rebuilt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuiltZones {
    pub member: u32,
    pub target_generation: u64,
    pub zones: Vec<(u32, u64)>,
}

/// Bytes of a rebuilt-zones payload before its entries.
const REBUILT_HEAD_BYTES: usize = 16;
/// Bytes of one rebuilt-zones entry.
const REBUILT_ENTRY_BYTES: usize = 12;

impl RebuiltZones {
    /// Entries that fit one header block of `block_size` bytes.
    pub fn per_block(block_size: usize) -> usize {
        (block_size.saturating_sub(HEADER_BYTES + REBUILT_HEAD_BYTES) / REBUILT_ENTRY_BYTES).max(1)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(REBUILT_HEAD_BYTES + REBUILT_ENTRY_BYTES * self.zones.len());
        p.extend_from_slice(&self.member.to_le_bytes());
        p.extend_from_slice(&(self.zones.len() as u32).to_le_bytes());
        p.extend_from_slice(&self.target_generation.to_le_bytes());
        for (z, g) in &self.zones {
            p.extend_from_slice(&z.to_le_bytes());
            p.extend_from_slice(&g.to_le_bytes());
        }
        p
    }

    /// Decodes a payload against an array of `members` members and `zones` logical zones.
    pub fn decode(p: &[u8], members: u32, zones: u32) -> Result<RebuiltZones, MetaError> {
        if p.len() < REBUILT_HEAD_BYTES {
            return corrupt("rebuilt-zones payload shorter than 16 bytes");
        }
        let member = u32_at(p, 0);
        let count = u32_at(p, 4);
        let target_generation = u64_at(p, 8);
        let expected = REBUILT_HEAD_BYTES as u64 + REBUILT_ENTRY_BYTES as u64 * u64::from(count);
        if p.len() as u64 != expected {
            return corrupt(format!("{count} rebuilt zones in {} bytes", p.len()));
        }
        if member >= members {
            return corrupt(format!("rebuilt zones of member {member} of {members}"));
        }
        if target_generation == 0 || target_generation >= COUNTER_LIMIT {
            return corrupt(format!("rebuild target generation {target_generation}"));
        }
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = REBUILT_HEAD_BYTES + REBUILT_ENTRY_BYTES * i;
            let (z, g) = (u32_at(p, at), u64_at(p, at + 4));
            if z >= zones || g >= COUNTER_LIMIT {
                return corrupt(format!("rebuilt zone {z} generation {g} of {zones} zones"));
            }
            out.push((z, g));
        }
        Ok(RebuiltZones {
            member,
            target_generation,
            zones: out,
        })
    }
}

/// The format version of the record in header block `b` (bytes 8..10), for a block that
/// `decode_record` accepted.
pub fn record_version(b: &[u8]) -> u16 {
    match b.get(8..10) {
        Some(v) => u16_at(v, 0),
        None => 0,
    }
}

/// Zones a completed Finish sealed (type 7, version 2): each zone with the generation it was
/// finished in. Written by checkpoints of the general zone (a zone's zone-log record of the
/// Finish is not kept once the Finish completed), so that open tells a finished zone from
/// one whose member zones a torn stripe filled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinishedZones {
    pub zones: Vec<(u32, u64)>,
}

/// Bytes of a finished-zones payload before its entries.
const FINISHED_HEAD_BYTES: usize = 8;
/// Bytes of one finished-zones entry.
const FINISHED_ENTRY_BYTES: usize = 12;

impl FinishedZones {
    /// Entries that fit one header block of `block_size` bytes.
    pub fn per_block(block_size: usize) -> usize {
        (block_size.saturating_sub(HEADER_BYTES + FINISHED_HEAD_BYTES) / FINISHED_ENTRY_BYTES)
            .max(1)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut p =
            Vec::with_capacity(FINISHED_HEAD_BYTES + FINISHED_ENTRY_BYTES * self.zones.len());
        p.extend_from_slice(&(self.zones.len() as u32).to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        for (z, g) in &self.zones {
            p.extend_from_slice(&z.to_le_bytes());
            p.extend_from_slice(&g.to_le_bytes());
        }
        p
    }

    /// Decodes a payload against an array of `zones` logical zones.
    pub fn decode(p: &[u8], zones: u32) -> Result<FinishedZones, MetaError> {
        if p.len() < FINISHED_HEAD_BYTES {
            return corrupt("finished-zones payload shorter than 8 bytes");
        }
        let count = u32_at(p, 0);
        if u32_at(p, 4) != 0 {
            return corrupt("finished-zones reserved bytes 4..8 are not zero");
        }
        let expected = FINISHED_HEAD_BYTES as u64 + FINISHED_ENTRY_BYTES as u64 * u64::from(count);
        if count == 0 || p.len() as u64 != expected {
            return corrupt(format!("{count} finished zones in {} bytes", p.len()));
        }
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = FINISHED_HEAD_BYTES + FINISHED_ENTRY_BYTES * i;
            let (z, g) = (u32_at(p, at), u64_at(p, at + 4));
            if z >= zones || g >= COUNTER_LIMIT {
                return corrupt(format!("finished zone {z} generation {g} of {zones} zones"));
            }
            out.push((z, g));
        }
        Ok(FinishedZones { zones: out })
    }
}

/// A log fence (type 8, pool of log zones only): the records of the member's log (types 4
/// and 5) whose sequence number is below `fence` were superseded by an open's rewrite and
/// never count again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFence {
    pub fence: u64,
}

/// Bytes of a log fence's inline payload.
pub const FENCE_INLINE_BYTES: usize = 8;

impl LogFence {
    pub fn encode(&self) -> [u8; FENCE_INLINE_BYTES] {
        self.fence.to_le_bytes()
    }

    /// Decodes the payload of a fence record whose own sequence number is `sequence`: the
    /// fence is at least 1 and not above it.
    pub fn decode(p: &[u8], sequence: u64) -> Result<LogFence, MetaError> {
        if p.len() != FENCE_INLINE_BYTES {
            return corrupt(format!("log fence payload of {} bytes", p.len()));
        }
        let fence = u64_at(p, 0);
        if fence == 0 || fence > sequence {
            return corrupt(format!("log fence {fence} in record {sequence}"));
        }
        Ok(LogFence { fence })
    }
}

/// What a relocation record (type 5) says about a range of one member zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocKind {
    /// The bulk blocks are the range's contents (a stripe unit, or part of one, that could
    /// not be written in place because the member zone's write pointer is past it).
    Blocks = 0,
    /// The range holds nothing valid, in place or relocated by records of a lower epoch: a
    /// torn stripe left stale blocks there (no bulk).
    Stale = 1,
}

/// The inline payload of a relocation record (docs/FORMAT.md, "Relocated stripe unit").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelocInline {
    /// The member whose zone the range is in (the member whose log holds the record).
    pub member: u32,
    pub kind: RelocKind,
    /// First block of the range, an offset in the member's physical zone.
    pub first: u64,
    /// End of the range (exclusive).
    pub end: u64,
    /// Epoch of the range's (zone, member): +1 for every stale range recovery declares.
    pub epoch: u64,
}

/// Bytes of a relocation record's inline payload.
pub const RELOC_INLINE_BYTES: usize = 32;

impl RelocInline {
    pub fn encode(&self) -> [u8; RELOC_INLINE_BYTES] {
        let mut p = [0u8; RELOC_INLINE_BYTES];
        p[0..4].copy_from_slice(&self.member.to_le_bytes());
        p[4..8].copy_from_slice(&(self.kind as u32).to_le_bytes());
        p[8..16].copy_from_slice(&self.first.to_le_bytes());
        p[16..24].copy_from_slice(&self.end.to_le_bytes());
        p[24..32].copy_from_slice(&self.epoch.to_le_bytes());
        p
    }

    /// Decodes a payload of a record with `bulk_blocks` bulk blocks, against an array of
    /// `members` members whose member zones hold `zone_capacity` blocks.
    pub fn decode(
        p: &[u8],
        bulk_blocks: u32,
        members: u32,
        zone_capacity: u64,
    ) -> Result<RelocInline, MetaError> {
        if p.len() != RELOC_INLINE_BYTES {
            return corrupt(format!("relocation payload of {} bytes", p.len()));
        }
        let kind = match u32_at(p, 4) {
            0 => RelocKind::Blocks,
            1 => RelocKind::Stale,
            k => return corrupt(format!("relocation kind {k}")),
        };
        let r = RelocInline {
            member: u32_at(p, 0),
            kind,
            first: u64_at(p, 8),
            end: u64_at(p, 16),
            epoch: u64_at(p, 24),
        };
        if r.member >= members {
            return corrupt(format!("relocation on member {} of {members}", r.member));
        }
        if r.first >= r.end || r.end > zone_capacity {
            return corrupt(format!(
                "relocated range {}..{} of a {zone_capacity}-block zone",
                r.first, r.end
            ));
        }
        if r.epoch >= COUNTER_LIMIT {
            return corrupt(format!("relocation epoch {}", r.epoch));
        }
        let bulk = u64::from(bulk_blocks);
        let expected = match kind {
            RelocKind::Blocks => r.end - r.first,
            RelocKind::Stale => 0,
        };
        if bulk != expected {
            return corrupt(format!(
                "{kind:?} relocation of {} blocks with {bulk} bulk blocks",
                r.end - r.first
            ));
        }
        Ok(r)
    }
}

/// CRC-32C of a record's bulk data followed by its metadata.
pub fn bulk_crc(data: &[u8], meta: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(data), meta)
}
