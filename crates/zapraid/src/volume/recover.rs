//! Format and open. Open rebuilds the index: sealed segments from their headers and footers,
//! every other member zone by reading the per-block metadata below its write pointer; the
//! newest sequence number wins, and the zones of segments that were open are finished
//! (docs/DESIGN.md, "Recovery").
//!
//! Fault model: power loss kept a prefix of every member zone, so a segment's data exists
//! only behind its header; a footer may be torn (it is then ignored and the zone scanned);
//! a record that fails its CRC ends a zone's scan. Bytes that pass their CRC but break the
//! format are corruption and refuse the open, naming member, segment and block. Members
//! that do not hold this array (no valid header anywhere) are refused, never reset.

use std::sync::Arc;

use futures::future::join_all;
use zns::{ReportFilter, ZoneAction, ZoneDescriptor, ZoneState, ZonedDevice};

use super::write::{segment_header, SegWriter};
use super::{FormatOptions, ZapRaidError, ZapRaidVolume};
use crate::index::{Index, TrimPlace};
use crate::layout::{GroupMode, Layout, Pba, HEADER_BLOCKS};
use crate::meta::{BlockRecord, FooterBlock, MetaError, RecordKind, SegmentHeader, TrimRecord};

fn dev_err(member: usize, what: impl Into<String>) -> impl FnOnce(zns::NvmeStatus) -> ZapRaidError {
    let what = what.into();
    move |status| ZapRaidError::Device {
        member,
        what,
        status,
    }
}

async fn report(member: usize, dev: &dyn ZonedDevice) -> Result<Vec<ZoneDescriptor>, ZapRaidError> {
    let g = dev.geometry();
    let r = dev
        .report_zones(0, ReportFilter::All, false, g.zone_count as usize)
        .await
        .map_err(dev_err(member, "report zones"))?;
    if r.zones.len() != g.zone_count as usize {
        return Err(ZapRaidError::Corrupt(format!(
            "member {member} reported {} of {} zones",
            r.zones.len(),
            g.zone_count
        )));
    }
    Ok(r.zones)
}

pub(crate) async fn format(
    members: Vec<Arc<dyn ZonedDevice>>,
    opts: &FormatOptions,
) -> Result<ZapRaidVolume, ZapRaidError> {
    let geos: Vec<_> = members.iter().map(|m| m.geometry()).collect();
    let l = Layout::new(opts.k, opts.m, opts.mode, &geos)?;
    if opts.op_permille >= 1000 {
        return Err(ZapRaidError::Options(format!(
            "over-provisioning {} permille leaves no space",
            opts.op_permille
        )));
    }
    // Collection keeps FREE_SEGMENTS_LOW segments free and one is open: the rest hold data.
    let kept = super::gc::FREE_SEGMENTS_LOW as u64 + 1;
    let data_segments = u64::from(l.segments()).saturating_sub(kept);
    let volume_blocks =
        l.data_blocks_per_segment() * data_segments * u64::from(1000 - opts.op_permille) / 1000;
    if volume_blocks == 0 {
        return Err(ZapRaidError::Options(format!(
            "{} segments leave no client space ({kept} are kept for collection)",
            l.segments()
        )));
    }
    for (i, dev) in members.iter().enumerate() {
        let zones = report(i, dev.as_ref()).await?;
        if let Some((z, d)) = zones
            .iter()
            .enumerate()
            .find(|(_, d)| d.state != ZoneState::Empty)
        {
            if !opts.force {
                return Err(ZapRaidError::NotEmpty {
                    member: i,
                    zone: z as u32,
                    state: d.state,
                });
            }
        }
        if opts.force {
            dev.zone_mgmt(ZoneAction::Reset, 0, true)
                .await
                .map_err(dev_err(i, "reset all zones"))?;
        }
    }
    // Segment 0 gets its header now, so that the members hold an array from here on.
    let mut index = Index::new(l, volume_blocks);
    index
        .open_segment(0)
        .map_err(|e| ZapRaidError::Corrupt(e.to_string()))?;
    let h = segment_header(&l, opts.uuid, volume_blocks, 0, 1);
    for (i, dev) in members.iter().enumerate() {
        let hi = SegmentHeader {
            member: i as u16,
            ..h.clone()
        };
        dev.write(l.zone_start(0), &hi.encode(l.block_size()), None, true)
            .await
            .map_err(dev_err(i, "segment header write"))?;
    }
    let vol = ZapRaidVolume::assemble(l, members, opts.uuid, volume_blocks, index, 1);
    {
        let mut st = vol.sh.st.lock();
        st.failed_members = vec![false; l.n() as usize];
        st.set_segment(Arc::new(SegWriter::new(&l, h, true)));
    }
    Ok(vol)
}

/// The array as the first valid header describes it, checked against every other header.
struct Found {
    first: SegmentHeader,
    /// Per segment: whether some member has a valid header.
    has_header: Vec<bool>,
    /// Per segment: its headers' sequence floor (segments opened later have higher ones).
    floors: Vec<u64>,
    max_floor: u64,
}

async fn read_headers(
    members: &[Arc<dyn ZonedDevice>],
    zones: &[Vec<ZoneDescriptor>],
) -> Result<Found, ZapRaidError> {
    let g = members[0].geometry();
    let bs = g.block_size as usize;
    let mut first: Option<SegmentHeader> = None;
    let mut has_header = vec![false; g.zone_count as usize];
    let mut floors = vec![0; g.zone_count as usize];
    let mut max_floor = 0;
    for z in 0..g.zone_count as usize {
        for (i, dev) in members.iter().enumerate() {
            let d = zones[i][z];
            if d.state == ZoneState::Empty || d.state == ZoneState::Offline {
                continue;
            }
            let mut b = vec![0u8; bs];
            dev.read(d.start, &mut b, None)
                .await
                .map_err(dev_err(i, format!("header of segment {z}")))?;
            let h = match SegmentHeader::decode(&b) {
                Ok(h) => h,
                Err(MetaError::NotARecord | MetaError::Checksum) => continue,
                Err(e) => {
                    return Err(ZapRaidError::Corrupt(format!(
                        "member {i} segment {z} header: {e}"
                    )))
                }
            };
            if usize::from(h.member) != i || h.segment as usize != z {
                return Err(ZapRaidError::Mismatch(format!(
                    "member {i} zone {z} holds the header of member {} segment {}; give the members in their order",
                    h.member, h.segment
                )));
            }
            if let Some(f) = &first {
                let norm = |x: &SegmentHeader| SegmentHeader {
                    member: 0,
                    segment: 0,
                    seq_floor: 0,
                    zones: Vec::new(),
                    ..x.clone()
                };
                if norm(f) != norm(&h) {
                    return Err(ZapRaidError::Mismatch(format!(
                        "member {i} segment {z}: header disagrees with the array's"
                    )));
                }
            } else {
                first = Some(h.clone());
            }
            has_header[z] = true;
            floors[z] = floors[z].max(h.seq_floor);
            max_floor = max_floor.max(h.seq_floor);
        }
    }
    let first = first.ok_or_else(|| {
        ZapRaidError::NotAnArray("no member zone holds a ZapRAID segment header".into())
    })?;
    Ok(Found {
        first,
        has_header,
        floors,
        max_floor,
    })
}

pub(crate) async fn open(
    members: Vec<Arc<dyn ZonedDevice>>,
) -> Result<ZapRaidVolume, ZapRaidError> {
    if members.is_empty() {
        return Err(ZapRaidError::NotAnArray("no members given".into()));
    }
    let mut zones = Vec::new();
    for (i, dev) in members.iter().enumerate() {
        zones.push(report(i, dev.as_ref()).await?);
    }
    let found = read_headers(&members, &zones).await?;
    let h = &found.first;
    let geos: Vec<_> = members.iter().map(|m| m.geometry()).collect();
    let l = Layout::new(
        u32::from(h.k),
        u32::from(h.m),
        GroupMode::Grouped(h.group),
        &geos,
    )?;
    let g = l.member;
    if (
        l.stripes,
        l.footer_blocks,
        g.block_size,
        g.oob_size,
        g.zone_count,
        g.zone_size,
        g.zone_capacity,
    ) != (
        h.stripes,
        h.footer_blocks,
        h.block_size,
        h.oob_size,
        h.zone_count,
        h.zone_size,
        h.zone_capacity,
    ) {
        return Err(ZapRaidError::Mismatch(
            "the members' geometry is not the one the array was formatted with".into(),
        ));
    }
    let mut index = Index::new(l, h.volume_blocks);
    let mut max_seq = found.max_floor;
    let mut trims = Vec::new();
    for z in 0..l.segments() {
        let states: Vec<ZoneDescriptor> = zones.iter().map(|zs| zs[z as usize]).collect();
        if states.iter().all(|d| d.state == ZoneState::Empty) {
            continue;
        }
        if !found.has_header[z as usize] {
            clear_headerless(&members, &l, z, &states).await?;
            continue;
        }
        index
            .open_segment(z)
            .map_err(|e| ZapRaidError::Corrupt(e.to_string()))?;
        index.set_floor(z, found.floors[z as usize]);
        for (i, dev) in members.iter().enumerate() {
            let recs = load_member(dev.as_ref(), &l, i, z, &states[i]).await?;
            for (offset, rec) in recs.into_iter().enumerate() {
                let pba = Pba {
                    segment: z,
                    member: i as u8,
                    offset: offset as u32,
                };
                apply(&mut index, &l, pba, &rec, h.volume_blocks, &mut trims)?;
                if rec.kind != RecordKind::Parity {
                    max_seq = max_seq.max(rec.seq);
                    index.stamp(z, rec.seq);
                }
            }
            if states[i].state != ZoneState::Full {
                // The segment was open: close it for good so no member zone stays open.
                dev.zone_mgmt(ZoneAction::Finish, states[i].start, false)
                    .await
                    .map_err(dev_err(i, format!("finish zone {z}")))?;
            }
        }
        index.seal_segment(z);
    }
    for pba in trims {
        let mut b = vec![0u8; l.block_size()];
        members[usize::from(pba.member)]
            .read(l.data_lba(pba.segment, pba.offset), &mut b, None)
            .await
            .map_err(dev_err(usize::from(pba.member), "trim record read"))?;
        let t = TrimRecord::decode(&b)
            .map_err(|e| ZapRaidError::Corrupt(format!("trim record at {pba:?}: {e}")))?;
        index
            .apply_trim(t.first, t.count, t.seq)
            .map_err(|e| ZapRaidError::Corrupt(format!("trim record at {pba:?}: {e}")))?;
        index.note_trim_record(
            t.seq,
            TrimPlace {
                pba,
                first: t.first,
                count: t.count,
            },
        );
    }
    free_dead_segments(&members, &l, &mut index).await?;
    index.verify().map_err(ZapRaidError::Corrupt)?;
    let vol = ZapRaidVolume::assemble(l, members, h.uuid, h.volume_blocks, index, max_seq + 1);
    vol.sh.st.lock().failed_members = vec![false; l.n() as usize];
    Ok(vol)
}

/// Resets and frees every segment that holds no live block and no live trim record: the
/// victim of a collection cut after its copies were flushed (copies win over originals, see
/// `Index::apply_recovered`), or the target of one cut before, holding only copies that lost.
/// Without this, every power cut inside a collection would keep a segment for nothing.
async fn free_dead_segments(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    index: &mut Index,
) -> Result<(), ZapRaidError> {
    // What recovery read may still sit in the members' volatile caches (the host crashed,
    // the members kept power): make it durable before anything it supersedes is reset.
    for (i, dev) in members.iter().enumerate() {
        dev.flush()
            .await
            .map_err(dev_err(i, "flush before resetting dead segments"))?;
    }
    for z in 0..l.segments() {
        if index.state(z) != Some(crate::index::SegmentState::Sealed)
            || index.valid(z) != Some(0)
            || !index.others_in_use(z)
        {
            continue;
        }
        let trims = index.trim_records_in(z);
        if trims
            .iter()
            .any(|(seq, p)| index.trim_is_live(*seq, p.first, p.count))
        {
            continue;
        }
        for (seq, _) in trims {
            index.drop_trim_record(seq);
        }
        for (i, dev) in members.iter().enumerate() {
            dev.zone_mgmt(ZoneAction::Reset, l.zone_start(z), false)
                .await
                .map_err(dev_err(i, format!("reset dead segment {z}")))?;
        }
        index
            .free_segment(z)
            .map_err(|e| ZapRaidError::Corrupt(e.to_string()))?;
    }
    Ok(())
}

/// A segment whose zones hold something but no valid header: a header torn by power loss
/// (nothing is written behind a header before it lands). Anything beyond the header block
/// would be foreign data, which is refused, not reset.
async fn clear_headerless(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    z: u32,
    states: &[ZoneDescriptor],
) -> Result<(), ZapRaidError> {
    for (i, d) in states.iter().enumerate() {
        let written = d.wp.saturating_sub(d.start);
        if d.state == ZoneState::Full || written > HEADER_BLOCKS {
            return Err(ZapRaidError::Corrupt(format!(
                "member {i} zone {z} holds {written} blocks but no segment header"
            )));
        }
    }
    for (i, dev) in members.iter().enumerate() {
        if states[i].state != ZoneState::Empty {
            dev.zone_mgmt(ZoneAction::Reset, l.zone_start(z), false)
                .await
                .map_err(dev_err(i, format!("reset torn segment {z}")))?;
        }
    }
    Ok(())
}

/// Enters one record in the index (trim records are applied after the scan, from their
/// blocks).
fn apply(
    index: &mut Index,
    l: &Layout,
    pba: Pba,
    rec: &BlockRecord,
    volume_blocks: u64,
    trims: &mut Vec<Pba>,
) -> Result<(), ZapRaidError> {
    let bad = |what: String| {
        ZapRaidError::Corrupt(format!(
            "member {} segment {} offset {}: {what}",
            pba.member, pba.segment, pba.offset
        ))
    };
    if rec.stripe >= l.stripes || l.group_of(rec.stripe) != l.group_of(pba.offset) {
        return Err(bad(format!(
            "stripe {} is not in the block's group",
            rec.stripe
        )));
    }
    index
        .set_stripe_id(pba, l.stripe_id_in_group(rec.stripe))
        .map_err(|e| bad(e.to_string()))?;
    match rec.kind {
        RecordKind::Parity => {}
        _ if rec.is_padding() => {}
        RecordKind::Data => {
            if rec.lba >= volume_blocks {
                return Err(bad(format!("LBA {} beyond the volume", rec.lba)));
            }
            index
                .apply_recovered(rec.lba, pba, rec.seq)
                .map_err(|e| bad(e.to_string()))?;
        }
        RecordKind::Trim => trims.push(pba),
    }
    Ok(())
}

/// The records of one member zone, in offset order: from its footer when the zone is Full
/// and the footer is whole, else from the metadata of its blocks up to the first that holds
/// no valid record.
async fn load_member(
    dev: &dyn ZonedDevice,
    l: &Layout,
    member: usize,
    z: u32,
    d: &ZoneDescriptor,
) -> Result<Vec<BlockRecord>, ZapRaidError> {
    if d.state == ZoneState::Full {
        if let Some(r) = load_footer(dev, l, member, z).await? {
            return Ok(r);
        }
    }
    let bs = l.block_size();
    let oob = l.oob_size();
    let written =
        d.wp.saturating_sub(d.start + HEADER_BLOCKS)
            .min(u64::from(l.stripes));
    let chunk = u64::from(l.member.mdts_blocks.max(1));
    let mut out = Vec::new();
    let mut at = 0u64;
    while at < written {
        let nb = chunk.min(written - at);
        let mut data = vec![0u8; nb as usize * bs];
        let mut meta = vec![0u8; nb as usize * oob];
        dev.read(l.data_lba(z, at as u32), &mut data, Some(&mut meta))
            .await
            .map_err(dev_err(member, format!("metadata scan of segment {z}")))?;
        for m in meta.chunks(oob) {
            match BlockRecord::decode(m) {
                Ok(r) => out.push(r),
                Err(MetaError::NotARecord | MetaError::Checksum) => return Ok(out),
                Err(e) => {
                    return Err(ZapRaidError::Corrupt(format!(
                        "member {member} segment {z} offset {}: {e}",
                        out.len()
                    )))
                }
            }
        }
        at += nb;
    }
    Ok(out)
}

async fn load_footer(
    dev: &dyn ZonedDevice,
    l: &Layout,
    member: usize,
    z: u32,
) -> Result<Option<Vec<BlockRecord>>, ZapRaidError> {
    let mut out = Vec::with_capacity(l.stripes as usize);
    let reads = (0..l.footer_blocks).map(|j| async move {
        let mut b = vec![0u8; l.block_size()];
        dev.read(l.footer_lba(z, j), &mut b, None).await.map(|_| b)
    });
    for (j, r) in join_all(reads).await.into_iter().enumerate() {
        let b = r.map_err(dev_err(member, format!("footer of segment {z}")))?;
        let f = match FooterBlock::decode(&b) {
            Ok(f) => f,
            Err(MetaError::NotARecord | MetaError::Checksum) => return Ok(None),
            Err(e) => {
                return Err(ZapRaidError::Corrupt(format!(
                    "member {member} segment {z} footer block {j}: {e}"
                )))
            }
        };
        let (first, count) = l.footer_range(j as u32);
        if usize::from(f.member) != member
            || f.segment != z
            || f.first != first
            || f.records.len() != count as usize
        {
            return Err(ZapRaidError::Corrupt(format!(
                "member {member} segment {z} footer block {j} describes another place"
            )));
        }
        for r in f.records {
            match r {
                Some(r) => out.push(r),
                None => {
                    return Err(ZapRaidError::Corrupt(format!(
                        "member {member} segment {z} footer block {j} has a hole"
                    )))
                }
            }
        }
    }
    Ok(Some(out))
}
