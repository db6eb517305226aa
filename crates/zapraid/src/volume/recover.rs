//! Format and open. Open rebuilds the index: sealed segments from their headers and footers,
//! every other member zone by reading the per-block metadata below its write pointer; the
//! newest sequence number wins, and the zones of segments that were open are finished
//! (docs/DESIGN.md, "Recovery"). Members the array state names failed are neither read nor
//! written: the records of their blocks are rebuilt from the other blocks of each stripe.
//!
//! Fault model: power loss kept a prefix of every member zone, so a segment's data exists
//! only behind its header; a footer may be torn (it is then ignored and the zone scanned);
//! a record that fails its CRC ends a zone's scan. Bytes that pass their CRC but break the
//! format are corruption and refuse the open, naming member, segment and block. Members
//! that do not hold this array (no valid header anywhere) are refused, never reset. A member
//! whose commands fail during open is taken as failed and the open starts over without it
//! (the failure is recorded before the open returns); more failures than `m` refuse the
//! open, naming every failed member.

use std::sync::Arc;

use futures::future::join_all;
use zns::{ReportFilter, ZoneAction, ZoneDescriptor, ZoneState, ZonedDevice};

use super::write::{segment_header, SegWriter};
use super::{FormatOptions, ZapRaidError, ZapRaidVolume};
use crate::index::{Index, TrimPlace};
use crate::layout::{GroupMode, Layout, Pba, RecordPlace, HEADER_BLOCKS};
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
    let l = Layout::with_records(opts.k, opts.m, opts.mode, &geos, opts.records)?;
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
    let h = segment_header(&l, opts.uuid, volume_blocks, 0, 1, (0, 0));
    for (i, dev) in members.iter().enumerate() {
        let hi = SegmentHeader {
            member: i as u16,
            ..h.clone()
        };
        dev.write(l.zone_start(0), &hi.encode(l.block_size()), None, true)
            .await
            .map_err(dev_err(i, "segment header write"))?;
    }
    let state = super::StartState {
        gen: 0,
        failed: vec![false; l.n() as usize],
        recorded_gen: 0,
    };
    let vol = ZapRaidVolume::assemble(l, members, opts.uuid, volume_blocks, index, 1, state);
    vol.sh
        .st
        .lock()
        .set_segment(Arc::new(SegWriter::new(&l, h, true)));
    Ok(vol)
}

/// The array as the first valid header describes it, checked against every other header.
struct Found {
    first: SegmentHeader,
    /// Per segment, per member: the header's sequence floor, if the member has a valid one
    /// (segments opened later have higher floors).
    floors: Vec<Vec<Option<u64>>>,
    /// The newest array state the headers carry: (generation, failed members).
    state: (u64, u64),
    /// Per segment: the newest array-state generation its headers carry.
    gens: Vec<u64>,
}

impl Found {
    /// The highest floor of any segment header outside `failed`.
    fn floor_max(&self, failed: u64) -> u64 {
        (0..self.floors.len())
            .filter_map(|z| self.floor(z, failed))
            .max()
            .unwrap_or(0)
    }

    /// Whether a member outside `failed` has a valid header of segment `z`, and its floor.
    fn floor(&self, z: usize, failed: u64) -> Option<u64> {
        self.floors.get(z).and_then(|f| {
            f.iter()
                .enumerate()
                .filter(|(i, _)| failed >> i & 1 == 0)
                .filter_map(|(_, x)| *x)
                .max()
        })
    }
}

async fn read_headers(
    members: &[Arc<dyn ZonedDevice>],
    zones: &[Vec<ZoneDescriptor>],
) -> Result<Found, ZapRaidError> {
    let g = members[0].geometry();
    let bs = g.block_size as usize;
    let mut first: Option<SegmentHeader> = None;
    let mut floors = vec![vec![None; members.len()]; g.zone_count as usize];
    let mut state = (0, 0);
    let mut gens = vec![0u64; g.zone_count as usize];
    for (z, floors) in floors.iter_mut().enumerate() {
        for (i, dev) in members.iter().enumerate() {
            // An absent member reported no zones.
            let Some(d) = zones.get(i).and_then(|zs| zs.get(z)).copied() else {
                continue;
            };
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
                    state_gen: 0,
                    failed: 0,
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
            if let Some(f) = floors.get_mut(i) {
                *f = Some(h.seq_floor);
            }
            if h.state_gen > state.0 {
                state = (h.state_gen, h.failed);
            }
            if let Some(g) = gens.get_mut(z) {
                *g = (*g).max(h.state_gen);
            }
        }
    }
    let first = first.ok_or_else(|| {
        ZapRaidError::NotAnArray("no member zone holds a ZapRAID segment header".into())
    })?;
    Ok(Found {
        first,
        floors,
        state,
        gens,
    })
}

pub(crate) async fn open(
    members: Vec<Arc<dyn ZonedDevice>>,
) -> Result<ZapRaidVolume, ZapRaidError> {
    if members.is_empty() {
        return Err(ZapRaidError::NotAnArray("no members given".into()));
    }
    // Members whose commands failed during an attempt: the next attempt goes without them.
    let mut absent = 0u64;
    for _ in 0..=members.len() {
        match open_attempt(&members, absent).await {
            Err(ZapRaidError::Device {
                member,
                what,
                status,
            }) if member < members.len() && absent >> member & 1 == 0 => {
                tracing::error!(
                    "zapraid open: member {member}: {what}: {status}; opening without it"
                );
                absent |= 1 << member;
            }
            r => return r,
        }
    }
    Err(ZapRaidError::Failed(format!(
        "members {} failed during open",
        member_list(absent)
    )))
}

/// "0, 2" for the bitmap 0b101.
fn member_list(bits: u64) -> String {
    (0..64)
        .filter(|i| bits >> i & 1 == 1)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One try at opening without the `absent` members (bit `i` = member `i`).
async fn open_attempt(
    members: &[Arc<dyn ZonedDevice>],
    absent: u64,
) -> Result<ZapRaidVolume, ZapRaidError> {
    let mut zones = Vec::new();
    for (i, dev) in members.iter().enumerate() {
        zones.push(if absent >> i & 1 == 1 {
            Vec::new()
        } else {
            report(i, dev.as_ref()).await?
        });
    }
    let found = read_headers(members, &zones).await?;
    let h = &found.first;
    let geos: Vec<_> = members.iter().map(|m| m.geometry()).collect();
    let place = if h.in_band {
        RecordPlace::InBand
    } else {
        RecordPlace::OutOfBand
    };
    let l = Layout::with_records(
        u32::from(h.k),
        u32::from(h.m),
        GroupMode::Grouped(h.group),
        &geos,
        place,
    )?;
    check_geometry(&l, h)?;
    let n = l.n() as usize;
    let state = newest_state(members, &l, &zones, &found, absent).await?;
    let failed = state.1 | absent;
    if failed.count_ones() > l.m {
        return Err(ZapRaidError::Failed(format!(
            "members {} have failed: more than the {} parity block(s) per stripe cover",
            member_list(failed),
            l.m
        )));
    }
    let alive = |i: usize| failed >> i & 1 == 0;
    let mut index = Index::new(l, h.volume_blocks);
    let mut max_seq = found.floor_max(0);
    let mut trims = Vec::new();
    let mut torn = Vec::new();
    let mut phantoms = Vec::new();
    for z in 0..l.segments() {
        let states: Vec<Option<ZoneDescriptor>> = (0..n)
            .map(|i| {
                zones
                    .get(i)
                    .and_then(|zs| zs.get(z as usize))
                    .copied()
                    .filter(|_| alive(i))
            })
            .collect();
        if states.iter().flatten().all(|d| d.state == ZoneState::Empty) {
            continue;
        }
        let Some(floor) = found.floor(z as usize, failed) else {
            clear_headerless(members, &l, z, &states).await?;
            continue;
        };
        index
            .open_segment(z)
            .map_err(|e| ZapRaidError::Corrupt(e.to_string()))?;
        index.set_floor(z, floor);
        let mut by_stripe: Vec<Vec<(usize, u32, BlockRecord)>> =
            vec![Vec::new(); l.stripes as usize];
        for (i, d) in states.iter().enumerate() {
            let (Some(d), Some(dev)) = (d, members.get(i)) else {
                continue;
            };
            let recs = load_member(dev.as_ref(), &l, i, z, d).await?;
            for (offset, rec) in recs.into_iter().enumerate() {
                let pba = Pba {
                    segment: z,
                    member: i as u8,
                    offset: offset as u32,
                };
                apply(&mut index, &l, pba, &rec, h.volume_blocks, &mut trims)?;
                // A hole is no part of its stripe: the stripe stays torn as it was when a
                // recovery wrote the hole.
                if rec.kind == RecordKind::Hole {
                    continue;
                }
                if let Some(v) = by_stripe.get_mut(rec.stripe as usize) {
                    v.push((i, offset as u32, rec));
                }
                if matches!(rec.kind, RecordKind::Data | RecordKind::Trim) {
                    max_seq = max_seq.max(rec.seq);
                    index.stamp(z, rec.seq);
                }
            }
            if d.state != ZoneState::Full {
                // The segment was open: close it for good so no member zone stays open.
                dev.zone_mgmt(ZoneAction::Finish, d.start, false)
                    .await
                    .map_err(dev_err(i, format!("finish zone {z}")))?;
            }
        }
        let settled = settle_stripes(&mut index, &l, z, &by_stripe, failed, h.volume_blocks)?;
        for (rec, pba, peers) in settled.rebuilt {
            max_seq = max_seq.max(rec.seq);
            index.stamp(z, rec.seq);
            if rec.kind == RecordKind::Trim {
                trims.push((pba, peers));
            }
        }
        for (rec, _, _) in &settled.phantoms {
            max_seq = max_seq.max(rec.seq);
        }
        torn.extend(settled.torn);
        phantoms.extend(settled.phantoms);
        index.seal_segment(z);
    }
    load_trims(members, &l, &mut index, trims).await?;
    // Before dead segments are reset: a phantom is not in the index, so its stripe's
    // segment may look dead.
    let phantoms = read_phantoms(members, &l, &index, phantoms).await?;
    let keep = state_keeper(&index, &l, &found, state.0);
    free_dead_segments(members, &l, &mut index, failed, keep).await?;
    index.verify().map_err(ZapRaidError::Corrupt)?;
    let failed_members: Vec<bool> = (0..n).map(|i| !alive(i)).collect();
    // A member first found failed now makes a new state, recorded before the open returns.
    let gen = if failed == state.1 {
        state.0
    } else {
        state.0 + 1
    };
    let vol = ZapRaidVolume::assemble(
        l,
        members.to_vec(),
        h.uuid,
        h.volume_blocks,
        index,
        max_seq + 1,
        super::StartState {
            gen,
            failed: failed_members,
            recorded_gen: state.0,
        },
    );
    if gen != state.0 {
        super::members::record_state(&vol.sh).await.map_err(|e| {
            ZapRaidError::Failed(format!(
                "recording members {} failed: {e}",
                member_list(failed)
            ))
        })?;
    }
    rewrite_torn(&vol.sh, torn, phantoms).await?;
    Ok(vol)
}

/// Rewrites the live blocks of torn stripes through the write path (as garbage collection
/// does: same LBA and sequence number, compare-and-swap), then flushes, so a member failing
/// after this open cannot take a block that read back now with it.
async fn rewrite_torn(
    sh: &Arc<super::Shared>,
    torn: Vec<(BlockRecord, Pba)>,
    phantoms: Vec<(BlockRecord, Vec<u8>)>,
) -> Result<(), ZapRaidError> {
    let failed = |e: zns::BlockError| ZapRaidError::Failed(format!("rewriting torn stripes: {e}"));
    if !torn.is_empty() || !phantoms.is_empty() {
        // Room first, as a client write would make it: rewrites at every open must not eat
        // the segments collection keeps free.
        super::gc::ensure_space(sh).await.map_err(failed)?;
    }
    let mut rxs = Vec::new();
    for (rec, pba) in torn {
        let (live, trim) = {
            let st = sh.st.lock();
            match rec.kind {
                RecordKind::Trim => {
                    let place = st
                        .index
                        .trim_records_in(pba.segment)
                        .into_iter()
                        .find(|(seq, p)| *seq == rec.seq && p.pba == pba);
                    let live =
                        place.is_some_and(|(seq, p)| st.index.trim_is_live(seq, p.first, p.count));
                    (live, place)
                }
                _ => {
                    let m = st
                        .index
                        .lookup(rec.lba)
                        .map_err(|e| ZapRaidError::Corrupt(e.to_string()))?;
                    (
                        m == crate::index::Mapping::Mapped { pba, seq: rec.seq },
                        None,
                    )
                }
            }
        };
        if !live {
            continue;
        }
        let data = match trim {
            Some((seq, p)) => TrimRecord {
                first: p.first,
                count: p.count,
                seq,
            }
            .encode(sh.layout.block_size()),
            None => {
                let member = usize::from(pba.member);
                let dev = sh
                    .member(member)
                    .ok_or_else(|| ZapRaidError::Corrupt(format!("no member {member}")))?;
                let mut b = vec![0u8; sh.layout.block_size()];
                dev.read(sh.layout.data_lba(pba.segment, pba.offset), &mut b, None)
                    .await
                    .map_err(dev_err(member, "read of a torn stripe's block"))?;
                b
            }
        };
        let rec = BlockRecord::new(rec.kind, rec.lba, rec.seq, 0);
        rxs.push(super::write::push_relocation(sh, rec, data, pba));
    }
    for (rec, data) in phantoms {
        // Written like a client block with its own sequence number: it wins only over older
        // versions, as it would have had it landed.
        let rec = BlockRecord::new(rec.kind, rec.lba, rec.seq, 0);
        rxs.push(super::write::push_copy(sh, rec, data));
    }
    if rxs.is_empty() {
        return Ok(());
    }
    super::write::wait_all(sh, rxs).await.map_err(failed)?;
    super::write::flush(sh).await.map_err(failed)
}

fn check_geometry(l: &Layout, h: &SegmentHeader) -> Result<(), ZapRaidError> {
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
    Ok(())
}

/// The newest array state: the headers' newest, or a state record newer than every header.
/// Such a record lies in the segment opened last (any segment opened after a record carries
/// its state in its header), so only the segments with the highest floor are scanned for one.
async fn newest_state(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    zones: &[Vec<ZoneDescriptor>],
    found: &Found,
    absent: u64,
) -> Result<(u64, u64), ZapRaidError> {
    let mut state = found.state;
    let top = found.floor_max(absent);
    for z in 0..l.segments() {
        if found.floor(z as usize, absent) != Some(top) {
            continue;
        }
        for (i, dev) in members.iter().enumerate() {
            if absent >> i & 1 == 1 || state.1 >> i & 1 == 1 {
                continue;
            }
            let Some(d) = zones.get(i).and_then(|zs| zs.get(z as usize)) else {
                continue;
            };
            for r in load_member(dev.as_ref(), l, i, z, d).await? {
                if r.kind == RecordKind::State && r.seq > state.0 {
                    if r.lba >> l.n() != 0 {
                        return Err(ZapRaidError::Corrupt(format!(
                            "member {i} segment {z}: array state names members {:#x}",
                            r.lba
                        )));
                    }
                    state = (r.seq, r.lba);
                }
            }
        }
    }
    Ok(state)
}

/// What the stripes of one segment left to do after their records were loaded.
struct Settled {
    /// Records of a failed member's blocks rebuilt from parity (entered in the index at
    /// offset = stripe), with their address and the blocks that rebuild their data.
    rebuilt: Vec<(BlockRecord, Pba, Vec<Pba>)>,
    /// Records of blocks power loss took from a live member while the rest of their stripe
    /// landed: rebuilt from parity but with no address, so they are rewritten after the open,
    /// with their member and the blocks that rebuild their data.
    phantoms: Vec<(BlockRecord, u32, Vec<Pba>)>,
    /// Data and trim blocks of stripes missing a block (no parity left to protect them).
    torn: Vec<(BlockRecord, Pba)>,
}

/// Sorts the stripes of segment `z` by the blocks present on the live members: complete;
/// missing one block, which is rebuilt from the others (on a failed member: entered at
/// offset = stripe; on a live member, a block power loss took: a phantom, rewritten after
/// the open); or missing more, whose present blocks are kept unprotected until rewritten.
/// Deciding by the blocks present, the same way at every open, is what keeps restarts
/// consistent: a stripe one open rebuilt is rebuilt by the next, whichever member fails.
fn settle_stripes(
    index: &mut Index,
    l: &Layout,
    z: u32,
    by_stripe: &[Vec<(usize, u32, BlockRecord)>],
    failed: u64,
    volume_blocks: u64,
) -> Result<Settled, ZapRaidError> {
    let mut out = Settled {
        rebuilt: Vec::new(),
        phantoms: Vec::new(),
        torn: Vec::new(),
    };
    let mut no_trims = Vec::new();
    for (stripe, blocks) in by_stripe.iter().enumerate() {
        let stripe = stripe as u32;
        // State and summary stripes are no coded stripes: each block stands for itself.
        let uncoded = |r: &BlockRecord| matches!(r.kind, RecordKind::State | RecordKind::Summary);
        if blocks.is_empty() || blocks.iter().any(|(_, _, r)| uncoded(r)) {
            continue;
        }
        let present = blocks.iter().fold(0u64, |acc, (i, _, _)| acc | 1 << i);
        let missing: Vec<u32> = (0..l.n()).filter(|i| present >> i & 1 == 0).collect();
        let peers: Vec<Pba> = blocks
            .iter()
            .map(|(i, offset, _)| Pba {
                segment: z,
                member: *i as u8,
                offset: *offset,
            })
            .collect();
        if missing.len() > l.m as usize {
            out.torn.extend(torn_of(blocks, &peers));
            continue;
        }
        let have: Vec<(u32, BlockRecord)> =
            blocks.iter().map(|(i, _, r)| (*i as u32, *r)).collect();
        let mut rebuilt = Vec::with_capacity(missing.len());
        for x in &missing {
            let rec = crate::code::rebuild_record(l, stripe, &have, *x).ok_or_else(|| {
                ZapRaidError::Corrupt(format!(
                    "segment {z} stripe {stripe}: the records of its blocks do not rebuild member {x}'s"
                ))
            })?;
            rebuilt.push((*x, rec));
        }
        // Power loss took a block from a live member: the stripe is unprotected. Its missing
        // blocks are rewritten after the open, those of failed members too (m >= 2): left at
        // offset = stripe, a read would need the live member's lost block to rebuild one.
        let torn = missing.iter().any(|x| failed >> x & 1 == 0);
        if torn {
            out.torn.extend(torn_of(blocks, &peers));
        }
        for (x, rec) in rebuilt {
            let holds =
                matches!(rec.kind, RecordKind::Data | RecordKind::Trim) && !rec.is_padding();
            if torn {
                if holds {
                    out.phantoms.push((rec, x, peers.clone()));
                }
                continue;
            }
            let pba = Pba {
                segment: z,
                member: x as u8,
                offset: stripe,
            };
            apply(index, l, pba, &rec, volume_blocks, &mut no_trims)?;
            if holds {
                out.rebuilt.push((rec, pba, peers.clone()));
            }
        }
    }
    Ok(out)
}

/// The data and trim blocks among a torn stripe's `blocks` (at `peers`).
fn torn_of(blocks: &[(usize, u32, BlockRecord)], peers: &[Pba]) -> Vec<(BlockRecord, Pba)> {
    blocks
        .iter()
        .zip(peers)
        .filter(|((_, _, r), _)| {
            matches!(r.kind, RecordKind::Data | RecordKind::Trim) && !r.is_padding()
        })
        .map(|((_, _, r), p)| (*r, *p))
        .collect()
}

/// The phantoms (blocks of torn stripes that power loss took from a live member) that are
/// newer than what the index holds for their LBA, with their data rebuilt from the rest of
/// their stripe.
async fn read_phantoms(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    index: &Index,
    phantoms: Vec<(BlockRecord, u32, Vec<Pba>)>,
) -> Result<Vec<(BlockRecord, Vec<u8>)>, ZapRaidError> {
    let mut out = Vec::new();
    for (rec, member, peers) in phantoms {
        if rec.kind == RecordKind::Data {
            let seq = match index
                .lookup(rec.lba)
                .map_err(|e| ZapRaidError::Corrupt(e.to_string()))?
            {
                crate::index::Mapping::Unmapped => 0,
                crate::index::Mapping::Trimmed { seq }
                | crate::index::Mapping::Mapped { seq, .. } => seq,
            };
            if seq >= rec.seq {
                continue;
            }
        }
        let data = rebuild_data(members, l, rec.stripe, &peers, member).await?;
        if rec.kind == RecordKind::Trim {
            TrimRecord::decode(&data).map_err(|e| {
                ZapRaidError::Corrupt(format!("rebuilt trim record of seq {}: {e}", rec.seq))
            })?;
        }
        out.push((rec, data));
    }
    Ok(out)
}

/// Member `want`'s block of `stripe` from the blocks at `peers` (read from their members);
/// when `peers` is `want`'s own block, that block as read.
async fn rebuild_data(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    stripe: u32,
    peers: &[Pba],
    want: u32,
) -> Result<Vec<u8>, ZapRaidError> {
    let mut have = Vec::with_capacity(peers.len());
    for p in peers {
        let member = usize::from(p.member);
        let dev = members
            .get(member)
            .ok_or_else(|| ZapRaidError::Corrupt(format!("no member {member}")))?;
        let mut b = vec![0u8; l.block_size()];
        dev.read(l.data_lba(p.segment, p.offset), &mut b, None)
            .await
            .map_err(dev_err(member, format!("read of stripe {stripe}'s block")))?;
        have.push((u32::from(p.member), b));
    }
    if let Some(i) = have.iter().position(|(m, _)| *m == want) {
        return Ok(have.swap_remove(i).1);
    }
    let refs: Vec<(u32, &[u8])> = have.iter().map(|(m, b)| (*m, &b[..])).collect();
    crate::code::rebuild_block(l, stripe, &refs, want)
        .map_err(|e| ZapRaidError::Corrupt(format!("stripe {stripe} of member {want}: {e}")))
}

/// Applies the trim records found (their ranges are in their blocks): read where they lie,
/// or rebuilt from their stripe's other blocks when they lie on a failed member.
async fn load_trims(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    index: &mut Index,
    trims: Vec<(Pba, Vec<Pba>)>,
) -> Result<(), ZapRaidError> {
    for (pba, peers) in trims {
        // A rebuilt record lies on a failed member at offset = stripe.
        let sources = if peers.is_empty() { vec![pba] } else { peers };
        let b = rebuild_data(members, l, pba.offset, &sources, u32::from(pba.member)).await?;
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
    Ok(())
}

/// Resets and frees every segment that holds no live block and no live trim record: the
/// victim of a collection cut after its copies were flushed (copies win over originals, see
/// `Index::apply_recovered`), or the target of one cut before, holding only copies that lost.
/// Without this, every power cut inside a collection would keep a segment for nothing.
async fn free_dead_segments(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    index: &mut Index,
    failed: u64,
    keep: Option<u32>,
) -> Result<(), ZapRaidError> {
    // What recovery read may still sit in the members' volatile caches (the host crashed,
    // the members kept power): make it durable before anything it supersedes is reset.
    let alive = |i: &usize| failed >> i & 1 == 0;
    for (i, dev) in members.iter().enumerate().filter(|(i, _)| alive(i)) {
        dev.flush()
            .await
            .map_err(dev_err(i, "flush before resetting dead segments"))?;
    }
    for z in 0..l.segments() {
        if !dead(index, z) || !index.others_in_use(z) || keep == Some(z) {
            continue;
        }
        for (seq, _) in index.trim_records_in(z) {
            index.drop_trim_record(seq);
        }
        for (i, dev) in members.iter().enumerate().filter(|(i, _)| alive(i)) {
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

/// Whether sealed segment `z` holds no live block and no live trim record.
fn dead(index: &Index, z: u32) -> bool {
    index.state(z) == Some(crate::index::SegmentState::Sealed)
        && index.valid(z) == Some(0)
        && index
            .trim_records_in(z)
            .iter()
            .all(|(seq, p)| !index.trim_is_live(*seq, p.first, p.count))
}

/// The newest segment when it is dead but must stay: the newest array state (generation
/// `gen`) lies in it (a state record, or its header) and in no header of a segment that
/// stays. Freeing it would make the next open take an older state (a failed member back).
fn state_keeper(index: &Index, l: &Layout, found: &Found, gen: u64) -> Option<u32> {
    let newest = index.newest_segment()?;
    if !dead(index, newest) {
        return None;
    }
    let carried = (0..l.segments())
        .filter(|z| {
            *z != newest
                && index
                    .state(*z)
                    .is_some_and(|s| s != crate::index::SegmentState::Free)
        })
        .filter(|z| !dead(index, *z))
        .any(|z| found.gens.get(z as usize).is_some_and(|g| *g >= gen));
    (!carried).then_some(newest)
}

/// A segment whose zones hold something but no valid header: a header torn by power loss
/// (nothing is written behind a header before it lands), or the zones a recovery finished
/// after their headers were lost (Full, nothing written) whose sibling zones holding the
/// headers were then reset by a collection cut between its resets. Such zones are reset. A
/// zone holding anything beyond an empty header block would be foreign data, which is
/// refused, not reset.
async fn clear_headerless(
    members: &[Arc<dyn ZonedDevice>],
    l: &Layout,
    z: u32,
    states: &[Option<ZoneDescriptor>],
) -> Result<(), ZapRaidError> {
    for (i, d) in states.iter().enumerate() {
        let Some(d) = d else { continue };
        let written = d.wp.saturating_sub(d.start);
        if d.state == ZoneState::Full || written > HEADER_BLOCKS {
            let dev = members
                .get(i)
                .ok_or_else(|| ZapRaidError::Corrupt(format!("no member {i}")))?;
            if !finished_empty(dev.as_ref(), l, i, z).await? {
                return Err(ZapRaidError::Corrupt(format!(
                    "member {i} zone {z} holds {written} blocks but no segment header"
                )));
            }
        }
    }
    for (i, dev) in members.iter().enumerate() {
        if states
            .get(i)
            .copied()
            .flatten()
            .is_some_and(|d| d.state != ZoneState::Empty)
        {
            dev.zone_mgmt(ZoneAction::Reset, l.zone_start(z), false)
                .await
                .map_err(dev_err(i, format!("reset torn segment {z}")))?;
        }
    }
    Ok(())
}

/// Whether member zone `z` holds nothing: its header block and its first data block (with
/// its metadata) are all zeros, as a zone finished before anything landed in it reads.
async fn finished_empty(
    dev: &dyn ZonedDevice,
    l: &Layout,
    member: usize,
    z: u32,
) -> Result<bool, ZapRaidError> {
    let bs = l.block_size();
    let mut b = vec![0u8; 2 * bs];
    let mut meta = vec![0u8; 2 * l.oob_size()];
    dev.read(l.zone_start(z), &mut b, Some(&mut meta))
        .await
        .map_err(dev_err(member, format!("read of headerless zone {z}")))?;
    Ok(b.iter().chain(&meta).all(|x| *x == 0))
}

/// Enters one record in the index (trim records are applied after the scan, from their
/// blocks).
fn apply(
    index: &mut Index,
    l: &Layout,
    pba: Pba,
    rec: &BlockRecord,
    volume_blocks: u64,
    trims: &mut Vec<(Pba, Vec<Pba>)>,
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
        RecordKind::Parity | RecordKind::State | RecordKind::Hole | RecordKind::Summary => {}
        _ if rec.is_padding() => {}
        RecordKind::Data => {
            if rec.lba >= volume_blocks {
                return Err(bad(format!("LBA {} beyond the volume", rec.lba)));
            }
            index
                .apply_recovered(rec.lba, pba, rec.seq)
                .map_err(|e| bad(e.to_string()))?;
        }
        RecordKind::Trim => trims.push((pba, Vec::new())),
    }
    Ok(())
}

/// The records of one member zone, in offset order: from its footer when the zone is Full
/// and the footer is whole, else from the metadata of its blocks up to the first that holds
/// no valid record.
pub(super) async fn load_member(
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
    if l.in_band {
        return super::inband::load_records(dev, l, member, z, d).await;
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
