//! In-band block records (docs/DESIGN.md, "In-band records"; docs/FORMAT.md): for members
//! with too little per-block metadata, the last stripe of every group is its *summary*: each
//! member's block there lists, in offset order, the records of that member's blocks of the
//! group (the summary's own record last), in the footer block's format.
//!
//! Fault model: a summary is read back from a member that may have lost anything after its
//! last flush (power loss keeps a prefix of each zone) or hold a torn block. A summary that
//! does not decode (zeros, torn) ends what the member's zone tells: the blocks after it were
//! never flushed (a flush writes the open group's summary first) and are treated as absent.
//! One that decodes but describes another place is corruption and is reported as such.

use zns::{ZoneDescriptor, ZonedDevice};

use super::ZapRaidError;
use crate::layout::{Layout, HEADER_BLOCKS};
use crate::meta::{BlockRecord, FooterBlock, MetaError, RecordKind};

/// The summary block of `member` at barrier stripe `barrier` of segment `z`: the records of
/// the member's blocks of the group below it (`None` for a block not written: a failed
/// member's, which never gets a summary) and its own.
pub(super) fn encode_summary(
    l: &Layout,
    member: usize,
    z: u32,
    barrier: u32,
    below: &[Option<BlockRecord>],
) -> Vec<u8> {
    let (start, _) = l.group_range(l.group_of(barrier));
    let mut records: Vec<Option<BlockRecord>> = below.to_vec();
    records.push(Some(BlockRecord::summary(barrier)));
    FooterBlock {
        member: member as u16,
        segment: z,
        first: start,
        records,
    }
    .encode(l.block_size())
}

/// The records a summary block lists (offsets `group start ..= barrier`), `None` when the
/// block holds no whole summary (never written, or torn).
pub(super) fn decode_summary(
    l: &Layout,
    member: usize,
    z: u32,
    barrier: u32,
    b: &[u8],
) -> Result<Option<Vec<BlockRecord>>, ZapRaidError> {
    let corrupt = |what: String| {
        ZapRaidError::Corrupt(format!(
            "member {member} segment {z} summary at offset {barrier}: {what}"
        ))
    };
    let f = match FooterBlock::decode(b) {
        Ok(f) => f,
        Err(MetaError::NotARecord | MetaError::Checksum) => return Ok(None),
        Err(e) => return Err(corrupt(e.to_string())),
    };
    let (start, _) = l.group_range(l.group_of(barrier));
    if usize::from(f.member) != member
        || f.segment != z
        || f.first != start
        || f.records.len() != (barrier - start + 1) as usize
    {
        return Err(corrupt("it describes another place".into()));
    }
    let mut out = Vec::with_capacity(f.records.len());
    for r in f.records {
        // A failed member's offsets are listed empty (its blocks are not written), but a
        // member with a summary wrote every block below it.
        let r = r.ok_or_else(|| corrupt("it lists an offset without a record".into()))?;
        out.push(r);
    }
    match out.last() {
        Some(r) if r.kind == RecordKind::Summary && r.stripe == barrier => Ok(Some(out)),
        _ => Err(corrupt("its own record is not the summary's".into())),
    }
}

/// The records of member zone `z` below its write pointer, group by group from their
/// summaries, up to the first group without a whole summary.
pub(super) async fn load_records(
    dev: &dyn ZonedDevice,
    l: &Layout,
    member: usize,
    z: u32,
    d: &ZoneDescriptor,
) -> Result<Vec<BlockRecord>, ZapRaidError> {
    let written =
        d.wp.saturating_sub(d.start + HEADER_BLOCKS)
            .min(u64::from(l.stripes));
    let mut out = Vec::new();
    for g in 0..l.groups() {
        let (start, len) = l.group_range(g);
        let barrier = start + len - 1;
        if u64::from(barrier) >= written {
            break;
        }
        let mut b = vec![0u8; l.block_size()];
        dev.read(l.data_lba(z, barrier), &mut b, None)
            .await
            .map_err(|status| ZapRaidError::Device {
                member,
                what: format!("summary of segment {z} group {g}"),
                status,
            })?;
        match decode_summary(l, member, z, barrier, &b)? {
            Some(r) => out.extend(r),
            None => break,
        }
    }
    Ok(out)
}

/// The records of a run of blocks read from a member at offsets `from..` (whole groups from
/// `from`, a group start): those of every group whose summary is among `data`; a group
/// without a whole summary gives none.
pub(super) fn records_in_blocks(
    l: &Layout,
    member: usize,
    z: u32,
    from: u32,
    data: &[u8],
) -> Result<Vec<(u32, BlockRecord)>, ZapRaidError> {
    let bs = l.block_size();
    let to = from + (data.len() / bs) as u32;
    let mut out = Vec::new();
    let mut g = l.group_of(from);
    while g < l.groups() {
        let (start, len) = l.group_range(g);
        let barrier = start + len - 1;
        if barrier >= to {
            break;
        }
        let at = (barrier - from) as usize * bs;
        if let (true, Some(b)) = (start >= from, data.get(at..at + bs)) {
            if let Some(recs) = decode_summary(l, member, z, barrier, b)? {
                out.extend((start..).zip(recs));
            }
        }
        g += 1;
    }
    Ok(out)
}
