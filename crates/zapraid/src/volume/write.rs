//! The write path: blocks gather into the open stripe; a sealed stripe gets its parity and a
//! task writes its `n` blocks (Zone Append inside a group, Zone Write for the group's last
//! stripe, the barrier); a write completes when every stripe holding its blocks is on every
//! member (docs/DESIGN.md, "Write path").
//!
//! Fault model: as the volume's. A member command that fails fails that member
//! (`members.rs`): the stripe goes on without its block, and completes only once the failure
//! is recorded on every survivor. Tasks waiting on a member's progress see the member's or
//! the volume's failure and stop, so nothing waits forever.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::join_all;
use parking_lot::Mutex;
use zns::{BlockError, BlockResult, Lba};

use super::signal::Signal;
use super::{members, Shared};
use crate::index::{Index, TrimPlace};
use crate::layout::{Pba, Role, HEADER_BLOCKS};
use crate::meta::{BlockRecord, FooterBlock, RecordKind, SegmentHeader, TrimRecord};

/// What a stripe's waiters learn: `None` while in flight.
pub type StripeResult = Option<Result<(), BlockError>>;

/// A stripe's completion, shared by the writes waiting on it.
pub(crate) type StripeDone = Arc<Signal<StripeResult>>;

/// One data slot of a stripe.
struct Slot {
    rec: BlockRecord,
    data: Vec<u8>,
    /// For a relocated block: the address it moves from (compare-and-swap).
    from: Option<Pba>,
}

/// What a stripe carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StripeKind {
    /// Client data, trim records, copies and padding, with parity.
    Coded,
    /// An array-state stripe: every member gets the same block and record (no parity).
    Replicated,
    /// A group summary (in-band records): each member's block lists its records of the
    /// group, made when the member's other blocks of the group landed (no parity, no slots).
    Summary,
}

/// The stripe taking blocks.
struct OpenStripe {
    serial: u64,
    slots: Vec<Slot>,
    done: StripeDone,
    kind: StripeKind,
}

/// The segment taking stripes, shared with the tasks writing them.
pub(crate) struct SegWriter {
    pub(crate) segment: u32,
    /// Per member: blocks of the zone written (header included).
    landed: Vec<Signal<u64>>,
    /// Whether stripe 0's task writes the header (not when format already did).
    header_needed: bool,
    header: SegmentHeader,
    /// Per member, per data offset: the record that landed there (for the footer).
    records: Mutex<Vec<Vec<Option<BlockRecord>>>>,
}

/// Write state, under `Shared::st`.
pub(crate) struct State {
    pub(crate) index: Index,
    pub(crate) next_seq: u64,
    pub(crate) failed_members: Vec<bool>,
    /// The array state's generation (+1 per change of `failed_members`).
    pub(crate) state_gen: u64,
    /// +1 whenever a member failure moved index entries (`Index::remap_failed_member`): a
    /// read that looked an address up before must look it up again.
    pub(crate) remap_epoch: u64,
    open: Option<OpenStripe>,
    seg: Option<Arc<SegWriter>>,
    next_stripe: u32,
    next_serial: u64,
    in_flight: BTreeMap<u64, StripeDone>,
    pub(crate) stats: super::ZapRaidStats,
}

impl State {
    pub(crate) fn new(index: Index, next_seq: u64) -> State {
        State {
            index,
            next_seq,
            failed_members: Vec::new(),
            state_gen: 0,
            remap_epoch: 0,
            open: None,
            seg: None,
            next_stripe: 0,
            next_serial: 0,
            in_flight: BTreeMap::new(),
            stats: super::ZapRaidStats::default(),
        }
    }

    /// Continues segment `w` (format opened it and wrote its header).
    pub(crate) fn set_segment(&mut self, w: Arc<SegWriter>) {
        self.seg = Some(w);
        self.next_stripe = 0;
    }
}

impl SegWriter {
    pub(crate) fn new(
        sh_layout: &crate::layout::Layout,
        header: SegmentHeader,
        header_written: bool,
    ) -> SegWriter {
        let n = sh_layout.n() as usize;
        let start = if header_written { HEADER_BLOCKS } else { 0 };
        SegWriter {
            segment: header.segment,
            landed: (0..n).map(|_| Signal::new(start)).collect(),
            header_needed: !header_written,
            header,
            records: Mutex::new(vec![vec![None; sh_layout.stripes as usize]; n]),
        }
    }
}

impl SegWriter {
    /// The segment's header (member 0's copy) and whether its stripe 0 still writes it.
    pub(crate) fn header(&self) -> (&SegmentHeader, bool) {
        (&self.header, self.header_needed)
    }

    /// A replacement of `member` now holds the header and the blocks of stripes
    /// `0..records.len()` at offset = stripe (recovery rebuilt them): later stripes append
    /// after them and the footer lists them.
    pub(crate) fn adopt(&self, member: usize, records: &[Option<BlockRecord>]) {
        if let Some(row) = self.records.lock().get_mut(member) {
            for (slot, r) in row.iter_mut().zip(records) {
                *slot = *r;
            }
        }
        if let Some(l) = self.landed.get(member) {
            l.set(HEADER_BLOCKS + records.len() as u64);
        }
    }
}

/// The open segment and the next stripe it gives out, with the open stripe sealed first
/// (recovery's last step, with client writes held off and every stripe waited for).
pub(crate) fn open_position(sh: &Arc<Shared>) -> Option<(Arc<SegWriter>, u32)> {
    let mut st = sh.st.lock();
    seal(sh, &mut st);
    let seg = st.seg.clone()?;
    Some((seg, st.next_stripe))
}

/// Seals the open stripe now; with in-band records also closes the open group (pads it to
/// its summary), so that every stripe handed out has its records on the members (a
/// recovery's last step reads them there to rebuild the open segment).
pub(crate) fn seal_open(sh: &Arc<Shared>) {
    let mut st = sh.st.lock();
    seal(sh, &mut st);
    close_group(sh, &mut st);
}

/// The header of a new segment, for member 0 (each member's copy sets its own index).
pub(crate) fn segment_header(
    sh_layout: &crate::layout::Layout,
    uuid: [u8; 16],
    volume_blocks: u64,
    segment: u32,
    seq_floor: u64,
    state: (u64, u64),
) -> SegmentHeader {
    let g = sh_layout.member;
    SegmentHeader {
        member: 0,
        uuid,
        segment,
        k: sh_layout.k as u16,
        m: sh_layout.m as u16,
        group: sh_layout.group,
        stripes: sh_layout.stripes,
        footer_blocks: sh_layout.footer_blocks,
        volume_blocks,
        seq_floor,
        block_size: g.block_size,
        oob_size: g.oob_size,
        zone_count: g.zone_count,
        zone_size: g.zone_size,
        zone_capacity: g.zone_capacity,
        zones: vec![segment; sh_layout.n() as usize],
        state_gen: state.0,
        failed: state.1,
        in_band: sh_layout.in_band,
    }
}

fn next_seq(st: &mut State) -> BlockResult<u64> {
    let s = st.next_seq;
    if s >= crate::meta::SEQ_LIMIT {
        return Err(BlockError::Failed("sequence numbers exhausted".into()));
    }
    st.next_seq += 1;
    Ok(s)
}

/// Adds a slot to the open stripe (opening one, with its padding timer, when none is);
/// seals the stripe when it has k slots. Returns the stripe's completion.
fn push(sh: &Arc<Shared>, st: &mut State, slot: Slot) -> StripeDone {
    let k = sh.layout.k as usize;
    let o = match st.open.take() {
        Some(o) => o,
        None => {
            let serial = st.next_serial;
            st.next_serial += 1;
            let done: StripeDone = Arc::new(Signal::new(None));
            st.in_flight.insert(serial, done.clone());
            let (sh2, wait) = (sh.clone(), sh.pad_after);
            sh.spawn(async move {
                tokio::time::sleep(wait).await;
                let mut st = sh2.st.lock();
                if st.open.as_ref().is_some_and(|o| o.serial == serial) {
                    seal(&sh2, &mut st);
                }
            });
            OpenStripe {
                serial,
                slots: Vec::new(),
                done,
                kind: StripeKind::Coded,
            }
        }
    };
    let o = st.open.insert(o);
    o.slots.push(slot);
    let rx = o.done.clone();
    if o.slots.len() >= k {
        seal(sh, st);
    }
    rx
}

/// Seals the open stripe (padding it to k slots), gives it a place in the open segment
/// (opening the next segment when needed) and starts the task that writes it.
fn seal(sh: &Arc<Shared>, st: &mut State) {
    let Some(mut open) = st.open.take() else {
        return;
    };
    let l = sh.layout;
    let (seg, stripe) = match place(sh, st) {
        Ok(p) => p,
        Err(e) => {
            st.in_flight.remove(&open.serial);
            open.done.set(Some(Err(e)));
            return;
        }
    };
    while open.kind == StripeKind::Coded && open.slots.len() < l.k as usize {
        open.slots.push(Slot {
            rec: BlockRecord::padding(stripe),
            data: vec![0; l.block_size()],
            from: None,
        });
    }
    for s in &mut open.slots {
        s.rec.stripe = stripe;
    }
    start(sh, seg, stripe, open);
}

/// The place of the next stripe: the open segment's next stripe, opening the lowest free
/// segment when the open one is full; with in-band records a summary stripe is started
/// first when the next stripe is a group's last.
fn place(sh: &Arc<Shared>, st: &mut State) -> BlockResult<(Arc<SegWriter>, u32)> {
    let l = sh.layout;
    loop {
        if st.seg.is_none() || st.next_stripe >= l.stripes {
            open_next_segment(sh, st)?;
        }
        let seg = st
            .seg
            .clone()
            .ok_or_else(|| BlockError::Failed("no open segment".into()))?;
        let stripe = st.next_stripe;
        st.next_stripe += 1;
        if !l.is_summary(stripe) {
            return Ok((seg, stripe));
        }
        start_summary(sh, st, seg, stripe);
    }
}

fn open_next_segment(sh: &Arc<Shared>, st: &mut State) -> BlockResult<()> {
    let l = sh.layout;
    let segment = st.index.first_free().ok_or(BlockError::NoSpace)?;
    if let Err(e) = st.index.open_segment(segment) {
        sh.fail(format!("opening segment {segment}: {e}"));
        return Err(BlockError::Failed(e.to_string()));
    }
    let floor = st.next_seq;
    st.index.set_floor(segment, floor);
    let state = (st.state_gen, members::failed_bits(st));
    let h = segment_header(&l, sh.uuid, sh.volume_blocks, segment, floor, state);
    st.seg = Some(Arc::new(SegWriter::new(&l, h, false)));
    st.next_stripe = 0;
    Ok(())
}

/// Starts the summary stripe at barrier `stripe` of `seg` (in-band records).
fn start_summary(sh: &Arc<Shared>, st: &mut State, seg: Arc<SegWriter>, stripe: u32) -> StripeDone {
    let serial = st.next_serial;
    st.next_serial += 1;
    let done: StripeDone = Arc::new(Signal::new(None));
    st.in_flight.insert(serial, done.clone());
    let open = OpenStripe {
        serial,
        slots: Vec::new(),
        done: done.clone(),
        kind: StripeKind::Summary,
    };
    start(sh, seg, stripe, open);
    done
}

/// With in-band records: seals the open stripe, pads the open group up to its summary and
/// starts the summary, so the records of every stripe handed out so far reach the members
/// (a flush's first step). Returns the stripes it started (padding and summary).
fn close_group(sh: &Arc<Shared>, st: &mut State) -> Vec<StripeDone> {
    let l = sh.layout;
    let mut started = Vec::new();
    if !l.in_band {
        return started;
    }
    seal(sh, st);
    while st.seg.is_some()
        && st.next_stripe < l.stripes
        && l.stripe_id_in_group(st.next_stripe) != 0
    {
        if l.is_summary(st.next_stripe) {
            if let Some(seg) = st.seg.clone() {
                let stripe = st.next_stripe;
                st.next_stripe += 1;
                started.push(start_summary(sh, st, seg, stripe));
            }
            continue;
        }
        let serial = st.next_serial;
        st.next_serial += 1;
        let done: StripeDone = Arc::new(Signal::new(None));
        st.in_flight.insert(serial, done.clone());
        started.push(done.clone());
        st.open = Some(OpenStripe {
            serial,
            slots: Vec::new(),
            done,
            kind: StripeKind::Coded,
        });
        seal(sh, st);
    }
    started
}

/// Starts the task that writes stripe `stripe` of `seg`.
fn start(sh: &Arc<Shared>, seg: Arc<SegWriter>, stripe: u32, open: OpenStripe) {
    let sh2 = sh.clone();
    sh.spawn(async move {
        let serial = open.serial;
        let r = drive(&sh2, &seg, stripe, &open.slots, open.kind).await;
        if let Err(e) = &r {
            sh2.fail(format!("segment {} stripe {stripe}: {e}", seg.segment));
        }
        sh2.st.lock().in_flight.remove(&serial);
        open.done.set(Some(r));
    });
}

/// What a stripe writes on one member.
#[derive(Clone, Copy)]
enum Content<'a> {
    /// A block and its record.
    Block(&'a [u8], BlockRecord),
    /// The member's summary of the group (made when its other blocks of the group landed).
    Summary,
}

/// The `n` blocks of a coded or replicated stripe, one per member, with their records.
fn stripe_blocks<'a>(
    sh: &Shared,
    stripe: u32,
    slots: &'a [Slot],
    parity: &'a mut Vec<Vec<u8>>,
    replicated: bool,
) -> BlockResult<Vec<(&'a [u8], BlockRecord)>> {
    let l = sh.layout;
    let first = slots
        .first()
        .ok_or_else(|| BlockError::Failed(format!("stripe {stripe} has no blocks")))?;
    let coded = |e: crate::code::CodeError| BlockError::Failed(format!("stripe {stripe}: {e}"));
    let precs = if replicated {
        *parity = vec![first.data.clone()];
        vec![first.rec]
    } else {
        let data: Vec<&[u8]> = slots.iter().map(|s| &s.data[..]).collect();
        let recs: Vec<BlockRecord> = slots.iter().map(|s| s.rec).collect();
        *parity = crate::code::encode(l.k as usize, l.m as usize, &data).map_err(coded)?;
        crate::code::parity_records(&l, stripe, &recs).map_err(coded)?
    };
    let parity: &'a Vec<Vec<u8>> = parity;
    let mut blocks = Vec::with_capacity(l.n() as usize);
    for member in 0..l.n() {
        let (d, j) = match l.role(stripe, member) {
            _ if replicated => (None, 0),
            Role::Data(d) => (Some(d as usize), 0),
            Role::Parity(j) => (None, j as usize),
        };
        let block = match d {
            Some(d) => slots.get(d).map(|s| (&s.data[..], s.rec)),
            None => parity.get(j).zip(precs.get(j)).map(|(b, r)| (&b[..], *r)),
        };
        blocks.push(block.ok_or_else(|| {
            BlockError::Failed(format!("stripe {stripe} has no block for member {member}"))
        })?);
    }
    Ok(blocks)
}

/// Writes one stripe on every member, then enters its blocks in the index.
async fn drive(
    sh: &Arc<Shared>,
    seg: &Arc<SegWriter>,
    stripe: u32,
    slots: &[Slot],
    kind: StripeKind,
) -> BlockResult<()> {
    let l = sh.layout;
    let replicated = kind != StripeKind::Coded;
    let mut parity = Vec::new();
    let blocks: Vec<Content> = if kind == StripeKind::Summary {
        (0..l.n()).map(|_| Content::Summary).collect()
    } else {
        stripe_blocks(sh, stripe, slots, &mut parity, replicated)?
            .into_iter()
            .map(|(d, r)| Content::Block(d, r))
            .collect()
    };
    let puts = blocks
        .iter()
        .enumerate()
        .map(|(member, c)| put(sh, seg, member, stripe, *c));
    let mut landed = Vec::with_capacity(l.n() as usize);
    for r in join_all(puts).await {
        landed.push(r?);
    }
    // A stripe of padding only (a flush padding an in-band group) holds nothing to protect,
    // and is awaited by `record_state` itself.
    let holds = slots.iter().any(|s| !s.rec.is_padding());
    if !replicated && holds && landed.iter().any(|o| o.is_none()) {
        // The stripe omits a failed member: it is acknowledged only once the failure is
        // recorded on every survivor, so a restart never takes the member's stale blocks
        // for current ones. (A state stripe is awaited by the recording itself.)
        members::record_state(sh).await?;
    }
    let mut st = sh.st.lock();
    // A member failed by now is addressed by stripe index (`Index::remap_failed_member`),
    // whether or not its block landed.
    let mut offsets = Vec::with_capacity(landed.len());
    for (member, o) in landed.iter().enumerate() {
        let failed = st.failed_members.get(member).copied().unwrap_or(true);
        offsets.push(match o {
            _ if failed => stripe,
            Some(o) => *o,
            None => {
                return Err(BlockError::Failed(format!(
                    "member {member} lost the block of stripe {stripe} but is not failed"
                )))
            }
        });
    }
    let id = l.stripe_id_in_group(stripe);
    for (member, offset) in offsets.iter().enumerate() {
        let pba = Pba {
            segment: seg.segment,
            member: member as u8,
            offset: *offset,
        };
        st.index
            .set_stripe_id(pba, id)
            .map_err(|e| BlockError::Failed(e.to_string()))?;
    }
    for (d, slot) in slots.iter().enumerate() {
        if replicated {
            break;
        }
        let member = l.data_member(stripe, d as u32) as usize;
        let pba = Pba {
            segment: seg.segment,
            member: member as u8,
            offset: offsets.get(member).copied().unwrap_or(stripe),
        };
        if slot.rec.is_padding() {
            st.stats.padding_blocks += 1;
        } else {
            st.index.stamp(seg.segment, slot.rec.seq);
            if slot.from.is_some() {
                st.stats.relocated_blocks += 1;
            } else {
                st.stats.client_blocks += 1;
            }
        }
        let r = match (slot.rec.kind, slot.from) {
            _ if slot.rec.is_padding() => Ok(true),
            (RecordKind::State | RecordKind::Parity, _) => Ok(true),
            (RecordKind::Trim, _) => TrimRecord::decode(&slot.data)
                .map_err(|e| BlockError::Failed(format!("trim record: {e}")))
                .and_then(|t| {
                    st.index.note_trim_record(
                        t.seq,
                        TrimPlace {
                            pba,
                            first: t.first,
                            count: t.count,
                        },
                    );
                    st.index
                        .apply_trim(t.first, t.count, t.seq)
                        .map_err(|e| BlockError::Failed(e.to_string()))
                })
                .map(|_| true),
            (_, Some(old)) => {
                let moved = st
                    .index
                    .relocate(slot.rec.lba, old, pba)
                    .map_err(|e| BlockError::Failed(e.to_string()));
                if matches!(moved, Ok(false)) {
                    st.stats.relocations_superseded += 1;
                }
                moved
            }
            (_, None) => st
                .index
                .apply_write(slot.rec.lba, pba, slot.rec.seq)
                .map_err(|e| BlockError::Failed(e.to_string())),
        };
        r?;
    }
    if stripe + 1 == l.stripes {
        st.index.seal_segment(seg.segment);
    }
    Ok(())
}

/// Waits until `member` of `seg` holds `ok(count)` blocks (true), or the member failed
/// (false), or the volume failed (an error).
async fn wait_landed(
    sh: &Shared,
    seg: &SegWriter,
    member: usize,
    ok: impl Fn(u64) -> bool,
) -> BlockResult<bool> {
    let landed = seg
        .landed
        .get(member)
        .ok_or_else(|| BlockError::Failed(format!("no member {member}")))?;
    // Biased: polled in a fixed order, so a seeded run repeats exactly (an unbiased select
    // draws its order from the runtime's unseeded generator).
    tokio::select! {
        biased;
        _ = landed.wait_for(|v| ok(*v)) => Ok(true),
        _ = sh.failed.wait_for(|f| f.is_some()) => Err(BlockError::Failed("the volume failed".into())),
        _ = sh.member_events.wait_for(|b| b >> member & 1 == 1) => Ok(false),
    }
}

/// Writes one block of `stripe` on `member`; returns its data offset, or `None` when the
/// member has failed (before or because of this command).
async fn put(
    sh: &Shared,
    seg: &SegWriter,
    member: usize,
    stripe: u32,
    content: Content<'_>,
) -> BlockResult<Option<u32>> {
    let l = sh.layout;
    let Some(dev) = sh.member(member) else {
        return Err(BlockError::Failed(format!("no member {member}")));
    };
    if members::is_failed(sh, member) {
        return Ok(None);
    }
    let zslba = l.zone_start(seg.segment);
    let lost = |what: &str, s| {
        members::member_failed(
            sh,
            member,
            &format!("{what} in segment {}: {s}", seg.segment),
        );
        sh.check_failed().map(|_| None)
    };
    if stripe == 0 && seg.header_needed {
        let h = SegmentHeader {
            member: member as u16,
            ..seg.header.clone()
        };
        if let Err(s) = dev
            .write(zslba, &h.encode(l.block_size()), None, false)
            .await
        {
            return lost("header write", s);
        }
        seg.landed[member].set(HEADER_BLOCKS);
    }
    let (start, len) = l.group_range(l.group_of(stripe));
    let barrier = l.is_barrier(stripe);
    let (start, len) = (u64::from(start), u64::from(len));
    let ready = wait_landed(sh, seg, member, |v| {
        if barrier {
            v == HEADER_BLOCKS + start + len - 1
        } else {
            v >= HEADER_BLOCKS + start
        }
    })
    .await?;
    if !ready {
        return Ok(None);
    }
    let summary;
    let (data, rec) = match content {
        Content::Block(data, rec) => (data, rec),
        Content::Summary => {
            let below = seg
                .records
                .lock()
                .get(member)
                .and_then(|r| r.get(start as usize..(start + len - 1) as usize))
                .map(|r| r.to_vec())
                .unwrap_or_default();
            summary = super::inband::encode_summary(&l, member, seg.segment, stripe, &below);
            (&summary[..], BlockRecord::summary(stripe))
        }
    };
    // In-band records travel in the group's summary, not in per-block metadata.
    let meta = (!l.in_band).then(|| {
        let mut meta = vec![0u8; l.oob_size()];
        meta[..32].copy_from_slice(&rec.encode());
        meta
    });
    let offset = if barrier {
        let at = l.data_lba(seg.segment, stripe);
        if let Err(s) = dev.write(at, data, meta.as_deref(), false).await {
            return lost("barrier write", s);
        }
        u64::from(stripe)
    } else {
        match dev.append(zslba, data, meta.as_deref(), false).await {
            Ok(at) => at.wrapping_sub(zslba + HEADER_BLOCKS),
            Err(s) => return lost("append", s),
        }
    };
    if offset < start || offset >= start + len {
        let why = format!("member {member}: block of stripe {stripe} landed at data offset {offset}, outside its group");
        sh.fail(why.clone());
        return Err(BlockError::Failed(why));
    }
    let offset = offset as u32;
    if let Some(slot) = seg
        .records
        .lock()
        .get_mut(member)
        .and_then(|r| r.get_mut(offset as usize))
    {
        *slot = Some(rec);
    }
    seg.landed[member].modify(|v| *v += 1);
    if stripe + 1 == l.stripes {
        if let Err(s) = write_footer(sh, seg, member).await {
            return lost("footer write", s);
        }
    }
    Ok(Some(offset))
}

/// Writes `member`'s footer once every block of its zone landed, then finishes the zone if
/// the footer does not end at its capacity.
async fn write_footer(sh: &Shared, seg: &SegWriter, member: usize) -> Result<(), zns::NvmeStatus> {
    let l = sh.layout;
    let Some(dev) = sh.member(member) else {
        return Err(zns::NvmeStatus::InvalidField);
    };
    for j in 0..l.footer_blocks {
        let (first, count) = l.footer_range(j);
        let records = seg.records.lock()[member][first as usize..(first + count) as usize].to_vec();
        let f = FooterBlock {
            member: member as u16,
            segment: seg.segment,
            first,
            records,
        };
        dev.write(
            l.footer_lba(seg.segment, j),
            &f.encode(l.block_size()),
            None,
            false,
        )
        .await?;
    }
    if l.used_blocks() < l.member.zone_capacity {
        dev.zone_mgmt(zns::ZoneAction::Finish, l.zone_start(seg.segment), false)
            .await?;
    }
    Ok(())
}

/// Waits for every stripe handed out so far, without sealing the open one.
pub(crate) async fn wait_in_flight(sh: &Arc<Shared>) -> BlockResult<()> {
    let rxs: Vec<_> = sh.st.lock().in_flight.values().cloned().collect();
    wait_all(sh, rxs).await
}

/// Queues a copy of a live block (garbage collection): it keeps its LBA and sequence number
/// and moves the index from `from` only if the entry still points there.
pub(crate) fn push_relocation(
    sh: &Arc<Shared>,
    rec: BlockRecord,
    data: Vec<u8>,
    from: Pba,
) -> StripeDone {
    let mut st = sh.st.lock();
    push(
        sh,
        &mut st,
        Slot {
            rec,
            data,
            from: Some(from),
        },
    )
}

/// Queues a state stripe (after the open stripe, sealed now): every member gets the record
/// of generation `gen` naming the `failed` members.
pub(crate) fn push_state(sh: &Arc<Shared>, gen: u64, failed: u64) -> Vec<StripeDone> {
    let mut st = sh.st.lock();
    seal(sh, &mut st);
    let serial = st.next_serial;
    st.next_serial += 1;
    let done: StripeDone = Arc::new(Signal::new(None));
    let rx = done.clone();
    st.in_flight.insert(serial, rx.clone());
    let slot = || Slot {
        rec: BlockRecord::state(gen, failed, 0),
        data: vec![0; sh.layout.block_size()],
        from: None,
    };
    st.open = Some(OpenStripe {
        serial,
        slots: (0..sh.layout.k).map(|_| slot()).collect(),
        done,
        kind: StripeKind::Replicated,
    });
    seal(sh, &mut st);
    // In-band records: the state records reach the members with the group's summary (the
    // stripes this starts: waiting for every stripe in flight would wait for the stripe
    // whose own wait for the recorded state called us).
    let mut rxs = vec![rx];
    rxs.extend(close_group(sh, &mut st));
    rxs
}

/// Queues a block rebuilt at open (a block of a torn stripe that power loss took from its
/// member): it keeps its LBA and sequence number and enters the index like a client write,
/// so it wins only over older versions.
pub(crate) fn push_copy(sh: &Arc<Shared>, rec: BlockRecord, data: Vec<u8>) -> StripeDone {
    let mut st = sh.st.lock();
    push(
        sh,
        &mut st,
        Slot {
            rec,
            data,
            from: None,
        },
    )
}

/// Seals the open stripe now (Flush, FUA), with in-band records also pads the open group to
/// its summary, and returns every stripe in flight.
fn pad_and_collect(sh: &Arc<Shared>) -> Vec<StripeDone> {
    let mut st = sh.st.lock();
    seal(sh, &mut st);
    close_group(sh, &mut st);
    st.in_flight.values().cloned().collect()
}

/// Waits for every stripe of `rxs`; the first error wins. A stripe whose task the volume's
/// failure stopped (a crash aborts it) ends the wait with that failure.
pub(crate) async fn wait_all(sh: &Shared, rxs: Vec<StripeDone>) -> BlockResult<()> {
    for rx in rxs {
        let r = tokio::select! {
            biased;
            r = rx.wait_for(|v| v.is_some()) => r,
            f = sh.failed.wait_for(|f| f.is_some()) => match rx.get() {
                Some(r) => Some(r),
                None => return Err(BlockError::Failed(f.unwrap_or_default())),
            },
        };
        match r {
            Some(r) => r?,
            None => return Err(BlockError::Failed("a stripe was abandoned".into())),
        }
    }
    Ok(())
}

pub(crate) async fn write(sh: &Arc<Shared>, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
    sh.check_failed()?;
    let blocks = sh.check_range(lba, data.len())?;
    super::gc::ensure_space(sh).await?;
    let _admitted = sh.admit(blocks).await?;
    let bs = sh.layout.block_size();
    let mut rxs: Vec<StripeDone> = Vec::new();
    {
        let mut st = sh.st.lock();
        for i in 0..blocks {
            let seq = next_seq(&mut st)?;
            let rec = BlockRecord::new(RecordKind::Data, lba + i, seq, 0);
            let chunk = &data[i as usize * bs..(i as usize + 1) * bs];
            let rx = push(
                sh,
                &mut st,
                Slot {
                    rec,
                    data: chunk.to_vec(),
                    from: None,
                },
            );
            if !rxs.last().is_some_and(|r| Arc::ptr_eq(r, &rx)) {
                rxs.push(rx);
            }
        }
    }
    finish(sh, rxs, fua).await
}

/// Waits for the stripes; with FUA seals the open stripe first and flushes every member after.
async fn finish(sh: &Arc<Shared>, mut rxs: Vec<StripeDone>, fua: bool) -> BlockResult<()> {
    if fua {
        // Our last stripe may be the open one: seal it now rather than after the timeout.
        let all = pad_and_collect(sh);
        if sh.layout.in_band {
            // The records of our stripes are durable only with their group's summary.
            rxs = all;
        }
    }
    wait_all(sh, rxs).await?;
    if fua {
        sh.flush_members().await?;
        members::record_state(sh).await?;
    }
    Ok(())
}

pub(crate) async fn flush(sh: &Arc<Shared>) -> BlockResult<()> {
    sh.check_failed()?;
    let rxs = pad_and_collect(sh);
    wait_all(sh, rxs).await?;
    sh.flush_members().await?;
    // A member failed by request, or by this flush, is recorded before the flush completes.
    members::record_state(sh).await
}

/// Trim and Write Zeroes: one trim record for the range (docs/DESIGN.md, "Trim").
pub(crate) async fn trim(sh: &Arc<Shared>, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
    sh.check_failed()?;
    if lba.checked_add(blocks).is_none_or(|e| e > sh.volume_blocks) {
        return Err(BlockError::OutOfRange);
    }
    if blocks == 0 {
        return Ok(());
    }
    super::gc::ensure_space(sh).await?;
    let _admitted = sh.admit(1).await?;
    let rx = {
        let mut st = sh.st.lock();
        let seq = next_seq(&mut st)?;
        let t = TrimRecord {
            first: lba,
            count: blocks,
            seq,
        };
        let rec = BlockRecord::new(RecordKind::Trim, lba, seq, 0);
        push(
            sh,
            &mut st,
            Slot {
                rec,
                data: t.encode(sh.layout.block_size()),
                from: None,
            },
        )
    };
    finish(sh, vec![rx], fua).await
}
