//! Full-drive recovery onto a replacement (docs/DESIGN.md, "Recovery onto a replacement"):
//! the replacement takes a failed member's place and gets, segment by segment, the blocks
//! the failed member held, rebuilt from the other members, each at offset = stripe (the
//! address the index gives a failed member's blocks). Segments with no live data are freed
//! instead (as a collection frees its victim); sealed segments are rebuilt up to the
//! stripes they hold. Client I/O goes on meanwhile: reads of the member's blocks are
//! degraded until the end, and new stripes omit it. The last step holds client writes
//! off, waits for every stripe in flight, catches the replacement up with the open segment
//! and the segments that changed meanwhile, flushes it, and only then marks the member
//! healthy (recorded on every member like a failure is).
//!
//! Fault model: a member command may fail and power may be cut at any point. Until the
//! member is marked healthy the array state names it failed, so a cut reopens the array
//! degraded with the replacement's partial contents ignored; recovery then restarts from
//! the beginning (the replacement is this array's member at that position, so it is
//! accepted again and reset). A replacement command that fails stops the recovery (the
//! member stays failed). A read of another member that fails is a second failure: the
//! volume fails naming both members; no block is rebuilt from fewer than `n - 1` others.

use std::collections::BTreeMap;
use std::sync::Arc;

use zns::{ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use super::write::{self, SegWriter};
use super::{gc, members, Shared, ZapRaidError};
use crate::index::SegmentState;
use crate::meta::{BlockRecord, FooterBlock, RecordKind, SegmentHeader};

/// How far a recovery onto a replacement has come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryProgress {
    /// The member position being recovered.
    pub member: usize,
    /// Segments rebuilt or freed, of those found in use so far.
    pub segments_done: u32,
    pub segments_total: u32,
    /// Stripes rebuilt (one block each on the replacement), of those found so far: the
    /// total grows when client writes open segments during the recovery.
    pub blocks_done: u64,
    pub blocks_total: u64,
    /// Segments kept from a recovery a power cut (or a failed command) stopped: found
    /// rebuilt on the replacement and not rebuilt again (`resume.rs`).
    pub segments_resumed: u32,
    /// Set when the member is healthy again.
    pub finished: bool,
}

/// Passes over the segments in use before the last step: each pass rebuilds what the one
/// before found changed; the last step rebuilds what is left with client writes held off.
const PASSES_MAX: usize = 4;

fn failed_now(sh: &Shared) -> ZapRaidError {
    ZapRaidError::Failed(
        sh.failed
            .get()
            .unwrap_or_else(|| "the volume failed".into()),
    )
}

fn on_replacement(member: usize, what: String) -> impl FnOnce(zns::NvmeStatus) -> ZapRaidError {
    move |status| ZapRaidError::Device {
        member,
        what: format!("replacement: {what}"),
        status,
    }
}

/// Recovers member `member` onto `dev` (see the module comment).
pub(crate) async fn replace_member(
    sh: &Arc<Shared>,
    member: usize,
    dev: Arc<dyn ZonedDevice>,
    force: bool,
) -> Result<(), ZapRaidError> {
    check_request(sh, member, dev.as_ref())?;
    {
        let mut r = sh.recovery.lock();
        if r.is_some_and(|p| !p.finished) {
            return Err(ZapRaidError::Options(
                "a recovery is already running".into(),
            ));
        }
        *r = Some(RecoveryProgress {
            member,
            ..RecoveryProgress::default()
        });
    }
    let r = recover(sh, member, dev, force).await;
    let mut p = sh.recovery.lock();
    match &r {
        Ok(()) => {
            if let Some(p) = p.as_mut() {
                p.finished = true;
            }
        }
        Err(_) => *p = None,
    }
    r
}

fn check_request(sh: &Shared, member: usize, dev: &dyn ZonedDevice) -> Result<(), ZapRaidError> {
    if let Some(why) = sh.failed.get() {
        return Err(ZapRaidError::Failed(why));
    }
    if member >= sh.layout.n() as usize {
        return Err(ZapRaidError::Options(format!(
            "member {member}: the array has {} members",
            sh.layout.n()
        )));
    }
    if !members::is_failed(sh, member) {
        return Err(ZapRaidError::Options(format!(
            "member {member} has not failed: fail it first, then replace it"
        )));
    }
    if dev.geometry() != sh.layout.member {
        return Err(ZapRaidError::Mismatch(format!(
            "the replacement's geometry is not the members' ({:?})",
            sh.layout.member
        )));
    }
    Ok(())
}

async fn recover(
    sh: &Arc<Shared>,
    member: usize,
    dev: Arc<dyn ZonedDevice>,
    force: bool,
) -> Result<(), ZapRaidError> {
    // Per segment rebuilt on the replacement: the floor of the segment it was rebuilt from
    // (a collection may free and reopen a segment meanwhile; it is then rebuilt again).
    // Segments a recovery cut short rebuilt already are kept.
    let mut done = prepare(sh, member, dev.as_ref(), force).await?;
    sh.set_member(member, dev.clone());
    let kept: u64 = {
        let st = sh.st.lock();
        done.keys()
            .map(|z| u64::from(st.index.stripes_written(*z)))
            .sum()
    };
    bump(sh, |p| {
        p.segments_resumed = done.len() as u32;
        p.segments_done += done.len() as u32;
        p.blocks_done += kept;
        p.blocks_total += kept;
    });
    for _ in 0..PASSES_MAX {
        let todo = pending(sh, &done, false);
        if todo.is_empty() {
            break;
        }
        for z in todo {
            let _one = sh.gc_lock.lock().await;
            step(sh, member, &dev, z, &mut done).await?;
        }
    }
    finish(sh, member, &dev, &mut done).await?;
    tracing::info!("zapraid member {member} recovered onto its replacement");
    Ok(())
}

/// Checks that `dev` may be overwritten (empty, or this array's member at `member`, unless
/// `force`) and empties it, but for the zones of segments a recovery cut short rebuilt
/// already (`resume.rs`; never with `force`), which it returns with their floors.
async fn prepare(
    sh: &Shared,
    member: usize,
    dev: &dyn ZonedDevice,
    force: bool,
) -> Result<BTreeMap<u32, u64>, ZapRaidError> {
    let g = sh.layout.member;
    let zones = dev
        .report_zones(0, ReportFilter::All, false, g.zone_count as usize)
        .await
        .map_err(on_replacement(member, "report zones".into()))?
        .zones;
    let mut used = false;
    for (z, d) in zones.iter().enumerate() {
        if d.state == ZoneState::Empty {
            continue;
        }
        used = true;
        if force {
            continue;
        }
        let mut b = vec![0u8; sh.layout.block_size()];
        let ours = d.state != ZoneState::Offline
            && dev.read(d.start, &mut b, None).await.is_ok()
            && SegmentHeader::decode(&b)
                .is_ok_and(|h| h.uuid == sh.uuid && usize::from(h.member) == member);
        if !ours {
            return Err(ZapRaidError::ReplacementHoldsData {
                zone: z as u32,
                state: d.state,
            });
        }
    }
    if !used {
        return Ok(BTreeMap::new());
    }
    let keep = if force {
        BTreeMap::new()
    } else {
        super::resume::rebuilt_segments(sh, member, dev, &zones).await?
    };
    if keep.is_empty() {
        dev.zone_mgmt(ZoneAction::Reset, 0, true)
            .await
            .map_err(on_replacement(member, "reset all zones".into()))?;
        return Ok(keep);
    }
    for (z, d) in zones.iter().enumerate() {
        if d.state == ZoneState::Empty || keep.contains_key(&(z as u32)) {
            continue;
        }
        dev.zone_mgmt(ZoneAction::Reset, d.start, false)
            .await
            .map_err(on_replacement(member, format!("reset of zone {z}")))?;
    }
    tracing::info!(
        "zapraid member {member}: {} segments rebuilt by an earlier recovery are kept",
        keep.len()
    );
    Ok(keep)
}

/// Segments in use not rebuilt in their current form; the open one only with `open`.
fn pending(sh: &Shared, done: &BTreeMap<u32, u64>, open: bool) -> Vec<u32> {
    let st = sh.st.lock();
    (0..sh.layout.segments())
        .filter(|z| match st.index.state(*z) {
            Some(SegmentState::Sealed) => true,
            Some(SegmentState::Open) => open,
            _ => false,
        })
        .filter(|z| done.get(z) != st.index.floor(*z).as_ref())
        .collect()
}

/// Rebuilds sealed segment `z` onto the replacement, or frees it when it holds nothing
/// live. The caller holds `gc_lock`, so no collection resets it meanwhile.
async fn step(
    sh: &Arc<Shared>,
    member: usize,
    dev: &Arc<dyn ZonedDevice>,
    z: u32,
    done: &mut BTreeMap<u32, u64>,
) -> Result<(), ZapRaidError> {
    if sh.failed.get().is_some() {
        return Err(failed_now(sh));
    }
    if gc::free_if_dead(sh, z).await.map_err(|_| failed_now(sh))? {
        bump(sh, |p| p.segments_done += 1);
        return Ok(());
    }
    let (state, floor, stripes) = {
        let st = sh.st.lock();
        (
            st.index.state(z),
            st.index.floor(z).unwrap_or(0),
            st.index.stripes_written(z),
        )
    };
    if state != Some(SegmentState::Sealed) {
        return Ok(());
    }
    let header = peer_header(sh, member, z).await?;
    bump(sh, |p| p.blocks_total += u64::from(stripes));
    rebuild_segment(sh, member, dev, z, stripes, header, true).await?;
    // Durable before it counts as done: a recovery a power cut stops keeps the segments
    // rebuilt so far (`resume.rs`).
    dev.flush()
        .await
        .map_err(on_replacement(member, format!("flush after segment {z}")))?;
    done.insert(z, floor);
    bump(sh, |p| p.segments_done += 1);
    Ok(())
}

fn bump(sh: &Shared, f: impl FnOnce(&mut RecoveryProgress)) {
    if let Some(p) = sh.recovery.lock().as_mut() {
        f(p);
        p.segments_total = p.segments_total.max(p.segments_done);
    }
}

/// The last step: with client writes held off and every stripe in flight landed, rebuilds
/// what is left (the open segment up to its next stripe), clears the replacement's zones
/// of segments no longer in use, flushes it and marks the member healthy.
async fn finish(
    sh: &Arc<Shared>,
    member: usize,
    dev: &Arc<dyn ZonedDevice>,
    done: &mut BTreeMap<u32, u64>,
) -> Result<(), ZapRaidError> {
    let _writes = sh.write_gate.write().await;
    let _one = sh.gc_lock.lock().await;
    write::seal_open(sh);
    write::wait_in_flight(sh)
        .await
        .map_err(|_| failed_now(sh))?;
    for z in pending(sh, done, false) {
        step(sh, member, dev, z, done).await?;
    }
    let open = write::open_position(sh);
    if let Some((seg, stripes)) = &open {
        let (h, header_needed) = seg.header();
        let header = SegmentHeader {
            member: member as u16,
            ..h.clone()
        };
        let floor = sh.st.lock().index.floor(seg.segment);
        // A segment whose stripe 0 has not been handed out writes its header itself; one
        // whose last stripe landed is sealed and was rebuilt whole just above.
        let rebuilt = floor.is_some() && done.get(&seg.segment) == floor.as_ref();
        if !(rebuilt || header_needed && *stripes == 0) {
            bump(sh, |p| p.blocks_total += u64::from(*stripes));
            let records =
                rebuild_segment(sh, member, dev, seg.segment, *stripes, header, false).await?;
            adopt(seg, member, &records);
            let floor = sh.st.lock().index.floor(seg.segment).unwrap_or(0);
            done.insert(seg.segment, floor);
        }
    }
    clear_unused(sh, member, dev, done).await?;
    dev.flush()
        .await
        .map_err(on_replacement(member, "flush".into()))?;
    if sh.failed.get().is_some() {
        return Err(failed_now(sh));
    }
    members::member_recovered(sh, member);
    drop(_one);
    drop(_writes);
    members::record_state(sh)
        .await
        .map_err(|e| ZapRaidError::Failed(format!("recording member {member} healthy: {e}")))?;
    if members::is_failed(sh, member) {
        // The replacement failed a command once it took part in writes.
        return Err(ZapRaidError::Failed(format!(
            "member {member}'s replacement failed right after its recovery"
        )));
    }
    Ok(())
}

fn adopt(seg: &SegWriter, member: usize, records: &[BlockRecord]) {
    let r: Vec<Option<BlockRecord>> = records.iter().copied().map(Some).collect();
    seg.adopt(member, &r);
}

/// Resets the replacement's zones that hold the rebuild of a segment a collection freed
/// meanwhile: at the next open they would look like a segment of this array.
async fn clear_unused(
    sh: &Shared,
    member: usize,
    dev: &Arc<dyn ZonedDevice>,
    done: &mut BTreeMap<u32, u64>,
) -> Result<(), ZapRaidError> {
    let stale: Vec<u32> = {
        let st = sh.st.lock();
        done.iter()
            .filter(|(z, floor)| {
                st.index.state(**z) == Some(SegmentState::Free)
                    || st.index.floor(**z) != Some(**floor)
            })
            .map(|(z, _)| *z)
            .collect()
    };
    for z in stale {
        dev.zone_mgmt(ZoneAction::Reset, sh.layout.zone_start(z), false)
            .await
            .map_err(on_replacement(member, format!("reset of segment {z}")))?;
        done.remove(&z);
    }
    Ok(())
}

/// Segment `z`'s header as another member holds it, made the replacement's.
async fn peer_header(sh: &Shared, member: usize, z: u32) -> Result<SegmentHeader, ZapRaidError> {
    let l = sh.layout;
    for j in (0..l.n() as usize).filter(|j| *j != member && !members::is_failed(sh, *j)) {
        let Some(peer) = sh.member(j) else { continue };
        let mut b = vec![0u8; l.block_size()];
        if let Err(s) = peer.read(l.zone_start(z), &mut b, None).await {
            return Err(second_failure(
                sh,
                j,
                &format!("header of segment {z}: {s}"),
            ));
        }
        if let Ok(h) = SegmentHeader::decode(&b) {
            return Ok(SegmentHeader {
                member: member as u16,
                ..h
            });
        }
    }
    Err(ZapRaidError::Corrupt(format!(
        "segment {z}: no other member holds a valid header"
    )))
}

/// A member other than the one recovered failed: with `m = 1` that fails the volume, naming
/// both.
pub(super) fn second_failure(sh: &Shared, j: usize, why: &str) -> ZapRaidError {
    members::member_failed(sh, j, &format!("read during recovery: {why}"));
    match sh.failed.get() {
        Some(f) => ZapRaidError::Failed(f),
        None => ZapRaidError::Device {
            member: j,
            what: format!("read during recovery: {why}"),
            status: zns::NvmeStatus::DataTransferError,
        },
    }
}

/// Writes segment `z` onto the replacement: its header, the block of every stripe below
/// `stripes` at offset = stripe, and for a sealed segment its footer (full) or a Finish.
/// Returns the records written.
async fn rebuild_segment(
    sh: &Shared,
    member: usize,
    dev: &Arc<dyn ZonedDevice>,
    z: u32,
    stripes: u32,
    header: SegmentHeader,
    sealed: bool,
) -> Result<Vec<BlockRecord>, ZapRaidError> {
    let l = sh.layout;
    let zslba = l.zone_start(z);
    let zone = dev
        .report_zones(zslba, ReportFilter::All, false, 1)
        .await
        .map_err(on_replacement(member, format!("report of zone {z}")))?;
    if zone
        .zones
        .first()
        .is_some_and(|d| d.state != ZoneState::Empty)
    {
        dev.zone_mgmt(ZoneAction::Reset, zslba, false)
            .await
            .map_err(on_replacement(member, format!("reset of zone {z}")))?;
    }
    dev.write(zslba, &header.encode(l.block_size()), None, false)
        .await
        .map_err(on_replacement(member, format!("header of segment {z}")))?;
    let mut records = Vec::with_capacity(stripes as usize);
    // A bounded pipeline of two batches: the survivors' reads of the next batch overlap the
    // replacement's writes of this one, so the recovery runs near the slower of the two
    // bandwidths instead of their sum (about twice as fast). At most two batches of
    // rebuilt blocks (and one batch of the survivors' blocks) are held at a time.
    let batches = batches(l, stripes);
    let mut next = batches.iter();
    let Some((s0, e0)) = next.next() else {
        return Ok(records);
    };
    let mut cur = rebuild_batch(sh, member, z, *s0, *e0).await?;
    loop {
        let following = next.next();
        let written = write_batch(sh, member, dev, z, &cur);
        let (done, read) = match following {
            Some((s, e)) => {
                let (w, r) = tokio::join!(written, rebuild_batch(sh, member, z, *s, *e));
                (w, Some(r))
            }
            None => (written.await, None),
        };
        done?;
        bump(sh, |p| p.blocks_done += cur.records.len() as u64);
        records.append(&mut cur.records);
        match read {
            Some(r) => cur = r?,
            None => break,
        }
    }
    if !sealed {
        return Ok(records);
    }
    if stripes == l.stripes {
        for j in 0..l.footer_blocks {
            let (first, count) = l.footer_range(j);
            let f = FooterBlock {
                member: member as u16,
                segment: z,
                first,
                records: records
                    .get(first as usize..(first + count) as usize)
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .map(Some)
                    .collect(),
            };
            dev.write(l.footer_lba(z, j), &f.encode(l.block_size()), None, false)
                .await
                .map_err(on_replacement(member, format!("footer of segment {z}")))?;
        }
    }
    if stripes < l.stripes || l.used_blocks() < l.member.zone_capacity {
        dev.zone_mgmt(ZoneAction::Finish, zslba, false)
            .await
            .map_err(on_replacement(member, format!("finish of segment {z}")))?;
    }
    Ok(records)
}

/// One block read from another member: its member, data and record.
type Peer = (u32, Vec<u8>, BlockRecord);

/// Stripes a batch of the recovery's pipeline rebuilds at least (whole groups, so `G = 1`
/// arrays do not pay a command per stripe): 1 MiB per member with 4 KiB blocks.
const BATCH_STRIPES_MIN: u32 = 256;

/// The stripes `0..stripes` cut into batches of whole groups (the last cut at `stripes`),
/// each of at least `BATCH_STRIPES_MIN` stripes but the last: a group is the unit because
/// a stripe's blocks lie anywhere in its group's range.
fn batches(l: crate::layout::Layout, stripes: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut g = 0;
    while start < stripes && g < l.groups() {
        let mut end = start;
        while end < stripes && end - start < BATCH_STRIPES_MIN && g < l.groups() {
            let (gs, len) = l.group_range(g);
            end = (gs + len).min(stripes);
            g += 1;
        }
        out.push((start, end));
        start = end;
    }
    out
}

/// The replacement's blocks of stripes `start..end`, rebuilt and ready to write.
struct Batch {
    start: u32,
    data: Vec<u8>,
    meta: Vec<u8>,
    records: Vec<BlockRecord>,
}

/// Rebuilds stripes `start..end` (whole groups, the last possibly cut) of segment `z`:
/// reads the groups' written blocks of every other member, all members concurrently (a
/// block's record names its stripe), and XORs each stripe's.
async fn rebuild_batch(
    sh: &Shared,
    member: usize,
    z: u32,
    start: u32,
    end: u32,
) -> Result<Batch, ZapRaidError> {
    let l = sh.layout;
    let (last_start, last_len) = l.group_range(l.group_of(end.saturating_sub(1).max(start)));
    let group_end = last_start + last_len;
    // Other failed members (m >= 2) hold nothing to read.
    let peers: Vec<usize> = (0..l.n() as usize)
        .filter(|j| *j != member && !members::is_failed(sh, *j))
        .collect();
    let reads = peers.iter().map(|j| {
        let written = sh.st.lock().index.written(z, *j as u8);
        read_peer(sh, *j, z, start, written.min(group_end))
    });
    let mut by_stripe: Vec<Vec<Peer>> = vec![Vec::new(); (end - start) as usize];
    for (j, blocks) in peers
        .iter()
        .zip(futures::future::try_join_all(reads).await?)
    {
        for (rec, data) in blocks {
            if rec.stripe >= start && rec.stripe < end {
                if let Some(v) = by_stripe.get_mut((rec.stripe - start) as usize) {
                    v.push((*j as u32, data, rec));
                }
            }
        }
    }
    let bs = l.block_size();
    let mut batch = Batch {
        start,
        data: Vec::with_capacity(by_stripe.len() * bs),
        meta: Vec::with_capacity(by_stripe.len() * l.oob_size()),
        records: Vec::with_capacity(by_stripe.len()),
    };
    for (i, peers) in by_stripe.iter().enumerate() {
        let s = start + i as u32;
        let (b, rec) = if l.is_summary(s) {
            // The replacement's own summary of the group: the records just rebuilt below
            // it (a batch holds whole groups).
            let (gs, _) = l.group_range(l.group_of(s));
            let below: Vec<Option<BlockRecord>> = batch
                .records
                .get(gs.saturating_sub(start) as usize..)
                .unwrap_or_default()
                .iter()
                .copied()
                .map(Some)
                .collect();
            let b = super::inband::encode_summary(&l, member, z, s, &below);
            (b, BlockRecord::summary(s))
        } else {
            rebuild_block(sh, member, z, s, peers)?
        };
        if !l.in_band {
            let mut m = vec![0u8; l.oob_size()];
            m[..32].copy_from_slice(&rec.encode());
            batch.meta.extend_from_slice(&m);
        }
        batch.data.extend_from_slice(&b);
        batch.records.push(rec);
    }
    Ok(batch)
}

/// Writes a rebuilt batch on the replacement at offset = stripe, in commands of the
/// members' largest transfer, one at a time (Zone Writes land in submission order only so).
async fn write_batch(
    sh: &Shared,
    member: usize,
    dev: &Arc<dyn ZonedDevice>,
    z: u32,
    b: &Batch,
) -> Result<(), ZapRaidError> {
    let l = sh.layout;
    let chunk = l.member.mdts_blocks.max(1) as usize;
    for (c, d) in b.data.chunks(chunk * l.block_size()).enumerate() {
        let at = b.start + (c * chunk) as u32;
        // In-band records have no per-block metadata: the summaries among the blocks hold them.
        let m = (!l.in_band).then(|| {
            let oob = chunk * l.oob_size();
            b.meta
                .get(c * oob..((c + 1) * oob).min(b.meta.len()))
                .unwrap_or_default()
        });
        dev.write(l.data_lba(z, at), d, m, false)
            .await
            .map_err(on_replacement(member, format!("segment {z} offset {at}")))?;
        // Client I/O goes first between commands: on a runtime with one thread a recovery
        // whose member commands complete at once would otherwise hold it to the end.
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// Member `j`'s blocks at offsets `from..to` of segment `z` with their records (blocks
/// without a valid record are left out).
async fn read_peer(
    sh: &Shared,
    j: usize,
    z: u32,
    from: u32,
    to: u32,
) -> Result<Vec<(BlockRecord, Vec<u8>)>, ZapRaidError> {
    let l = sh.layout;
    let (bs, oob) = (l.block_size(), l.oob_size());
    let Some(peer) = sh.member(j) else {
        return Err(ZapRaidError::Corrupt(format!("no member {j}")));
    };
    let chunk = l.member.mdts_blocks.max(1);
    let mut out = Vec::new();
    let mut at = from;
    // In-band records: every block of the range, whose summaries name the others.
    let mut all = Vec::new();
    while at < to {
        let nb = chunk.min(to - at);
        let mut data = vec![0u8; nb as usize * bs];
        let mut meta = vec![0u8; nb as usize * oob];
        let meta_buf = (!l.in_band).then_some(&mut meta[..]);
        if let Err(s) = peer.read(l.data_lba(z, at), &mut data, meta_buf).await {
            return Err(second_failure(
                sh,
                j,
                &format!("segment {z} offsets {at}..{}: {s}", at + nb),
            ));
        }
        at += nb;
        if l.in_band {
            all.extend_from_slice(&data);
            continue;
        }
        for (d, m) in data.chunks(bs).zip(meta.chunks(oob)) {
            match BlockRecord::decode(m) {
                // A hole (an earlier recovery's block of a torn stripe) is no part of it.
                Ok(r) if r.kind == RecordKind::Hole => {}
                Ok(r) => out.push((r, d.to_vec())),
                Err(_) => {}
            }
        }
    }
    if l.in_band {
        for (offset, r) in super::inband::records_in_blocks(&l, j, z, from, &all)? {
            let i = (offset - from) as usize * bs;
            if let (false, Some(d)) = (r.kind == RecordKind::Hole, all.get(i..i + bs)) {
                out.push((r, d.to_vec()));
            }
        }
    }
    Ok(out)
}

/// The replacement's block of stripe `s` from the other members' blocks of it: rebuilt by
/// the stripe code with its record, a copy of a state block, or a hole when the stripe is not
/// whole on the other members not failed (power loss tore it; its live blocks were rewritten
/// at open). Not padding: a padding block would count as the stripe's block at the next
/// open, which would then take the stripe for one missing a single block and rebuild that
/// block from records that do not add up.
fn rebuild_block(
    sh: &Shared,
    member: usize,
    z: u32,
    s: u32,
    peers: &[Peer],
) -> Result<(Vec<u8>, BlockRecord), ZapRaidError> {
    let l = sh.layout;
    let bs = l.block_size();
    if let Some((_, d, r)) = peers.iter().find(|(_, _, r)| r.kind == RecordKind::State) {
        return Ok((d.clone(), *r));
    }
    if peers.len() != whole_on_others(sh, member) {
        return Ok((vec![0u8; bs], BlockRecord::hole(s)));
    }
    let records: Vec<(u32, BlockRecord)> = peers.iter().map(|(j, _, r)| (*j, *r)).collect();
    let rec = crate::code::rebuild_record(&l, s, &records, member as u32).ok_or_else(|| {
        ZapRaidError::Corrupt(format!(
            "segment {z} stripe {s}: the other members' records do not rebuild member {member}'s"
        ))
    })?;
    let blocks: Vec<(u32, &[u8])> = peers.iter().map(|(j, d, _)| (*j, &d[..])).collect();
    let data = crate::code::rebuild_block(&l, s, &blocks, member as u32)
        .map_err(|e| ZapRaidError::Corrupt(format!("segment {z} stripe {s}: {e}")))?;
    Ok((data, rec))
}

/// How many blocks a stripe whole on the members other than `member` has there: one per
/// member not failed.
pub(super) fn whole_on_others(sh: &Shared, member: usize) -> usize {
    (0..sh.layout.n() as usize)
        .filter(|j| *j != member && !members::is_failed(sh, *j))
        .count()
}
