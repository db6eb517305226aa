//! `StreamWriter`: the stream slots and the only code that writes data zones: zone headers,
//! user data, trim records, garbage-collection copies (`relocate.rs`), summaries, and sealing.
//!
//! Fault model: a device command may fail transiently (retried, bounded) or for good; a zone
//! whose write failed for good is sealed and never written again, the error goes to the
//! caller, and nothing already acknowledged is affected. A write that failed may still have
//! reached the device, so its blocks read as old or new after a crash, as in any block layer.
//! In summary mode a failed summary keeps its tags: the next flush writes a checkpoint (which
//! maps those blocks) before it returns, so a flush never reports durable what a crash would
//! lose.
//!
//! Decisions (which zone, wait, open, borrow, seal, what a failure does) are made by the
//! sans-IO core in plan.rs; this file executes them.
//!
//! Locks: a slot lock, then the map lock (shared.rs has the volume's whole lock order). A task
//! holds one slot at a time.

mod pipeline;
mod relocate;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use zns::{Lba, NvmeStatus, ZoneAction};

use crate::activity::Gauge;
use crate::layout::WriteMode;
use crate::map::{Reservation, Stream, ZoneUse};
use crate::plan::{Acquire, AfterFailure, SpacePolicy, WriteKind};
use crate::records::{self, Tag, TlRecord, TrimRecord, ZoneHeader};
use crate::retry::retry;
use crate::shared::Shared;
use crate::FtlError;

/// One open-zone slot of a stream. In Zone Write mode a write is submitted under its lock, so
/// writes reach the device in write-pointer order; a user stream's slot releases the lock once
/// its write is submitted and keeps up to `MountOptions::zone_writes` in flight (`depth`),
/// other writes hold it across the write (one in flight).
struct Slot {
    stream: Stream,
    /// The open zone and its generation.
    zone: tokio::sync::Mutex<Option<(u32, u64)>>,
    /// Writes the slot may still have in flight: a permit per write, taken under the lock.
    depth: tokio::sync::Semaphore,
}

/// A locked slot: its open zone and that zone's generation.
pub(crate) type SlotGuard<'a> = tokio::sync::MutexGuard<'a, Option<(u32, u64)>>;

/// Writes the volume's streams into data zones; owns the slots.
pub(crate) struct StreamWriter {
    shared: Arc<Shared>,
    /// `hot_zones` hot slots, one cold, `gc_lanes` GC slots (`plan::gc_lanes`), one cold GC.
    slots: Vec<Slot>,
    /// Round-robin start for picking a hot slot.
    rr: AtomicUsize,
    policy: SpacePolicy,
    /// Writes in flight per user slot in Zone Write mode; 1 when they go one at a time.
    zone_writes: usize,
    /// Zones sealed after a failed write while other writes to them were in flight: the last
    /// of those to end finishes the zone on the device (`user_write_failed`, `finish_if_sealed`).
    sealed_busy: parking_lot::Mutex<Vec<u32>>,
}

/// What a piece of a write carries.
#[derive(Clone, Copy)]
enum Payload<'a> {
    /// User data for `lba..`, written with `seq`.
    Data { lba: u64, seq: u64, bytes: &'a [u8] },
    /// A trim record block.
    Trim { record: TrimRecord },
    /// A threaded-logging record block (tagged as a trim record: a record block).
    TlRecord { record: TlRecord },
}

impl StreamWriter {
    pub(crate) fn new(shared: Arc<Shared>) -> StreamWriter {
        let opts = shared.opts();
        let zone_writes =
            if shared.layout().summary_mode() || opts.write_mode != WriteMode::ZoneWrite {
                1
            } else if opts.zone_writes == 0 {
                crate::layout::ZONE_WRITES_DEFAULT as usize
            } else {
                opts.zone_writes as usize
            };
        let slot = |stream: Stream| Slot {
            stream,
            zone: Default::default(),
            depth: tokio::sync::Semaphore::new(if stream.is_gc() { 1 } else { zone_writes }),
        };
        let mut slots: Vec<Slot> = (0..shared.opts().hot_zones.max(1))
            .map(|_| slot(Stream::Hot))
            .collect();
        slots.push(slot(Stream::Cold));
        let lanes = crate::plan::gc_lanes(shared.layout(), shared.opts());
        slots.extend((0..lanes).map(|_| slot(Stream::Gc)));
        slots.push(slot(Stream::GcCold));
        let policy = SpacePolicy::new(shared.opts(), shared.layout());
        StreamWriter {
            shared,
            slots,
            rr: AtomicUsize::new(0),
            policy,
            zone_writes,
            sealed_busy: Default::default(),
        }
    }

    /// Per-block metadata carrying `tags`; None in summary mode, where tags go in-band.
    fn meta_for(&self, tags: impl Iterator<Item = Tag>, blocks: u64) -> Option<Vec<u8>> {
        if self.shared.layout().summary_mode() {
            return None;
        }
        let oob = self.shared.layout().geometry.oob_size as usize;
        let mut meta = vec![0u8; blocks as usize * oob];
        for (i, t) in tags.take(blocks as usize).enumerate() {
            records::encode_tag(t, &mut meta[i * oob..]);
        }
        Some(meta)
    }

    /// Blocks of data zone `z` a write may still take (`Mapping::data_room`).
    fn data_room(&self, z: u32) -> u64 {
        self.shared.map(|m| m.data_room(z))
    }

    /// Records tags of blocks just written to zone `z` (summary mode) and writes the summary
    /// when it is due. The caller holds the zone's slot, so nothing else writes to the zone
    /// meanwhile.
    async fn note_tags(
        &self,
        z: u32,
        tags: impl Iterator<Item = Tag>,
        fua: bool,
    ) -> Result<(), FtlError> {
        if self.shared.map(|m| m.note_tags(z, tags, fua)) {
            self.write_summary(z, fua).await?;
        }
        Ok(())
    }

    /// Writes zone `z`'s pending tags as a summary block at its write pointer.
    async fn write_summary(&self, z: u32, fua: bool) -> Result<(), FtlError> {
        // The tags stay pending until the summary is written: if it fails they are what the
        // next flush must make durable another way (a checkpoint).
        let (tags, r, generation) = self.shared.map(|m| {
            (
                m.summary_tags(z).to_vec(),
                m.reserve(z, 1),
                m.zone(z).generation,
            )
        });
        if r.blocks == 0 {
            return Err(FtlError::Corrupt(format!(
                "no room for the summary of data zone {z}"
            )));
        }
        let mut block = vec![0u8; self.shared.layout().geometry.block_size as usize];
        let place = records::SummaryPlace {
            volume_id: self.shared.volume_id(),
            data_zone: z,
            generation,
            offset: r.offset,
        };
        records::encode_summary(&place, &tags, &mut block);
        let at = self.shared.layout().data_zone_start(z) + r.offset;
        match retry(|| self.shared.dev().write(at, &block, None, fua)).await {
            Ok(()) => {
                // The caller holds the zone's slot, so no tag was added meanwhile.
                self.shared
                    .map(|m| m.summary_written(z, r.offset, tags.len()));
                self.write_ended();
                Ok(())
            }
            Err(e) => {
                self.write_failed(z, WriteKind::Summary).await;
                // A zone the device retired refused the summary before writing anything: the
                // tags stay pending and the next flush checkpoints them, so only a FUA write,
                // which needed them durable now, sees the error.
                if is_zone_refusal(e) && !fua {
                    tracing::warn!(
                        zone = z,
                        "the device refused a summary ({e}); the next flush checkpoints its blocks"
                    );
                    return Ok(());
                }
                Err(e.into())
            }
        }
    }

    /// Writes the pending summaries of the open zones of streams `which` selects.
    pub(crate) async fn write_summaries(
        &self,
        which: impl Fn(Stream) -> bool,
    ) -> Result<(), FtlError> {
        if self.shared.layout().summary_mode() {
            for slot in self.slots.iter().filter(|s| which(s.stream)) {
                let guard = slot.zone.lock().await;
                if let Some((z, generation)) = *guard {
                    // A zone sealed after a failed write keeps its tags for the checkpoint
                    // the flush writes instead (`Mapping::plan_flush`); it has no room for a
                    // summary. A slot may still name a zone that filled, was collected and
                    // was reopened for another slot since: that zone is the other slot's to
                    // summarize (it may have a write in flight), hence the generation.
                    let due = self.shared.map(|m| {
                        let zone = m.zone(z);
                        zone.generation == generation
                            && matches!(zone.use_, ZoneUse::Open(_))
                            && !m.summary_tags(z).is_empty()
                    });
                    if due {
                        self.write_summary(z, false).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Picks the slot a write of `stream` goes to: a free hot slot if one is idle, round-robin;
    /// knowing the device's stripe, first an idle one whose zone need not give way to another
    /// open zone on the same die (`plan::hot_zone_gives_way`).
    fn pick_slot(&self, stream: Stream) -> usize {
        let hot = self
            .slots
            .iter()
            .filter(|s| s.stream == Stream::Hot)
            .count();
        match stream {
            Stream::Hot => {
                let start = self.rr.fetch_add(1, Ordering::Relaxed);
                let order = (0..hot).map(|i| (start + i) % hot);
                let Some(stripe) = self.shared.opts().stripe.filter(|_| hot > 1) else {
                    return order
                        .clone()
                        .find(|&i| self.slots[i].zone.try_lock().is_ok())
                        .unwrap_or(start % hot);
                };
                let (open, others) = self.shared.map(|m| m.open_dies(&stripe));
                let gap = crate::plan::hot_zone_gap(&stripe, self.shared.layout().zone_blocks, hot);
                let mut first_idle = None;
                for i in order {
                    let Ok(held) = self.slots[i].zone.try_lock() else {
                        continue;
                    };
                    first_idle.get_or_insert(i);
                    let die = held.and_then(|(z, _)| open.iter().find(|o| o.0 == z).copied());
                    match die {
                        Some((z, d))
                            if crate::plan::hot_zone_gives_way(
                                &open,
                                &others,
                                z,
                                d,
                                gap,
                                stripe.dies,
                            ) => {}
                        _ => return i,
                    }
                }
                first_idle.unwrap_or(start % hot)
            }
            Stream::Cold => hot,
            Stream::Gc => hot + 1,
            Stream::GcCold => self.slots.len() - 1,
        }
    }

    /// Slots (open zones) of every stream.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The slot of lane `lane` of GC stream `stream`.
    fn lane_slot(&self, stream: Stream, lane: usize) -> Result<&Slot, FtlError> {
        self.slots
            .iter()
            .filter(|s| s.stream == stream)
            .nth(lane)
            .ok_or_else(|| {
                FtlError::Corrupt(format!("stream {} has no lane {lane}", stream.name()))
            })
    }

    /// Whether garbage-collection copies go through `relocate_pipelined` (plain Simple Copy
    /// with per-block metadata, more than one per lane allowed), and how deep.
    pub(crate) fn copy_pipeline_depth(&self) -> Option<usize> {
        let opts = self.shared.opts();
        let plus = opts.compaction.is_some() && self.shared.dev().identify_mapping().is_some();
        let depth = opts.copies_per_lane as usize;
        (depth > 1 && opts.use_copy && !plus && !self.shared.layout().summary_mode())
            .then_some(depth)
    }

    /// Slots (open zones) `stream` writes through: the GC stream's lanes.
    pub(crate) fn lanes(&self, stream: Stream) -> usize {
        self.slots.iter().filter(|s| s.stream == stream).count()
    }

    /// A slot of a user stream with an open zone and room, when `stream` can open none.
    async fn borrow_user_zone(&self) -> Option<(SlotGuard<'_>, u32, &Slot)> {
        for slot in self.slots.iter().filter(|s| !s.stream.is_gc()) {
            let mut guard = slot.zone.lock().await;
            match self.shared.map(|m| m.usable_zone(*guard, slot.stream)) {
                Some(z) => return Some((guard, z, slot)),
                None => *guard = None,
            }
        }
        None
    }

    /// Makes sure a slot holds an open zone with room, opening a new one (and writing its
    /// header) when needed, as `Mapping::plan_acquire` decides. User streams wait for garbage
    /// collection when space is short, and borrow another user stream's zone (so the zone
    /// returned may be another slot's) before they report no space.
    ///
    /// The slot is locked on return (`slot`, or the one borrowed from, which is returned
    /// too); it is never held while waiting for space or borrowing, so a flush or a
    /// collection can always take every slot.
    async fn acquire_zone<'a>(
        &'a self,
        slot: &'a Slot,
        stream: Stream,
    ) -> Result<(SlotGuard<'a>, u32, &'a Slot), FtlError> {
        loop {
            self.shared.check_failed()?;
            let mut guard = slot.zone.lock().await;
            let waiting = self.shared.space_notified();
            tokio::pin!(waiting);
            let plan = self
                .shared
                .map(|m| m.plan_acquire(*guard, stream, &self.policy));
            if plan.wake_gc {
                self.shared.wake_maintenance();
            }
            if !matches!(plan.next, Acquire::Use(_)) {
                *guard = None;
            }
            match plan.next {
                Acquire::Use(z) => return Ok((guard, z, slot)),
                Acquire::Open { zone, generation } => {
                    // A zone re-opened for threaded logging keeps its header (threaded.rs).
                    if !self.shared.map(|m| m.tl_writing(zone)) {
                        self.write_header(zone, generation).await?;
                    }
                    *guard = Some((zone, generation));
                    return Ok((guard, zone, slot));
                }
                Acquire::Seal(sealed) => {
                    for z in sealed {
                        self.finish_on_device(z).await;
                    }
                    self.shared.wake_maintenance();
                }
                Acquire::Borrow => {
                    drop(guard);
                    return self
                        .borrow_user_zone()
                        .await
                        .ok_or_else(|| self.shared.no_space());
                }
                Acquire::NoSpace => return Err(FtlError::NoSpace),
                Acquire::AwaitResets => {
                    drop(guard);
                    self.shared.check_failed()?;
                    self.shared.map(|m| m.counters.gc_waits_for_resets += 1);
                    waiting.await;
                }
                Acquire::Wait => {
                    drop(guard);
                    // A failure that came after the check above woke nobody yet.
                    self.shared.check_failed()?;
                    let _waiting = self.shared.activity().enter(Gauge::SpaceWaits);
                    waiting.await;
                }
            }
        }
    }

    async fn write_header(&self, z: u32, generation: u64) -> Result<(), FtlError> {
        let bs = self.shared.layout().geometry.block_size as usize;
        let mut block = vec![0u8; bs];
        records::encode_header(
            &ZoneHeader {
                volume_id: self.shared.volume_id(),
                data_zone: z,
                generation,
            },
            &mut block,
        );
        let meta = self.meta_for(std::iter::once(Tag::Header { generation }), 1);
        let at = self.shared.layout().data_zone_start(z);
        let r = retry(|| self.shared.dev().write(at, &block, meta.as_deref(), false)).await;
        match r {
            Ok(()) => {
                self.shared.map(|m| m.header_written(z));
                Ok(())
            }
            Err(e) => {
                self.write_failed(z, WriteKind::Header).await;
                Err(e.into())
            }
        }
    }

    /// A write of `kind` to zone `z` failed for good: the core seals the zone (its pending
    /// summary tags stay for the next flush's checkpoint) and the device releases it.
    async fn write_failed(&self, z: u32, kind: WriteKind) {
        let after = self.shared.map(|m| m.plan_write_failed(z, kind));
        self.write_ended();
        match after {
            AfterFailure::Seal { zone } => self.finish_on_device(zone).await,
            AfterFailure::SealKeepTags { zone, blocks } => {
                tracing::warn!(
                    zone,
                    blocks,
                    "a data zone was sealed with blocks awaiting their summary; \
                     the next flush checkpoints them"
                );
                self.finish_on_device(zone).await;
            }
        }
    }

    /// Finishes zone `z` on the device so it stops holding an open-zone resource. A failure is
    /// logged and otherwise harmless: the zone is never written again, a zone left open costs
    /// a resource only until the next mount finishes it, and a Read Only or Offline zone (the
    /// usual cause) holds none.
    async fn finish_on_device(&self, z: u32) {
        // Finish would leave the holes a threaded zone did not reach under its write pointer,
        // holding whatever a power cut left there; it stays open until collected or the
        // next mount (threaded.rs).
        if self.shared.map(|m| m.tl_writing(z)) {
            tracing::warn!(
                zone = z,
                "a threaded zone was sealed; it stays open on the device"
            );
            return;
        }
        let at = self.shared.layout().data_zone_start(z);
        if let Err(e) = self
            .shared
            .dev()
            .zone_mgmt(ZoneAction::Finish, at, false)
            .await
        {
            tracing::warn!(zone = z, "finishing a sealed data zone failed: {e}");
        }
    }

    /// Writes `payload` into `stream`, splitting it across zones as they fill.
    async fn put(&self, stream: Stream, payload: Payload<'_>, fua: bool) -> Result<(), FtlError> {
        let bs = u64::from(self.shared.layout().geometry.block_size);
        let total = match payload {
            Payload::Data { bytes, .. } => bytes.len() as u64 / bs,
            Payload::Trim { .. } | Payload::TlRecord { .. } => 1,
        };
        let limit = u64::from(match self.shared.opts().write_mode {
            WriteMode::ZoneWrite => self.shared.layout().geometry.mdts_blocks,
            WriteMode::ZoneAppend => self.shared.layout().geometry.zasl_blocks,
        });
        let mut done = 0u64;
        // Zones the device refused (it retired them to Read Only or Offline: nothing was
        // written) are sealed and the piece goes to another zone, this many times per write.
        let mut refusals_left = ZONE_REFUSALS_MAX;
        // Writes that found a zone sealed by a failure ahead of them and went elsewhere.
        let mut resubmits_left = ZONE_RESUBMITS_MAX;
        while done < total {
            let slot = &self.slots[self.pick_slot(stream)];
            let (mut guard, z, held) = match self.acquire_zone(slot, stream).await {
                Err(FtlError::Device(e)) if is_zone_refusal(e) && refusals_left > 0 => {
                    refusals_left -= 1;
                    continue;
                }
                other => other?,
            };
            let mut want = (total - done).min(limit);
            if self.shared.layout().summary_mode() {
                let room = self.data_room(z);
                if room == 0 {
                    // The group is complete or only the summary's block is left.
                    self.write_summary(z, false).await?;
                    continue;
                }
                want = want.min(room);
            }
            // Several writes in flight (user streams in Zone Write mode, not a zone threaded
            // logging re-opened, whose holes are handed out one at a time): a permit of the
            // slot's depth, taken under its lock, so the writes ahead release them.
            let permit =
                if self.zone_writes > 1 && !stream.is_gc() && !self.shared.map(|m| m.tl_writing(z))
                {
                    let p = held.depth.acquire().await.map_err(|_| {
                        FtlError::Corrupt(format!("the write depth of data zone {z} was closed"))
                    })?;
                    Some(p)
                } else {
                    None
                };
            let r = self.shared.map(|m| m.reserve(z, want));
            if r.blocks == 0 {
                *guard = None;
                continue;
            }
            if let Some(permit) = permit {
                let landed = self.put_in_flight(guard, r, payload, done, fua).await;
                drop(permit);
                match landed {
                    Ok(()) => {}
                    Err(InFlightError::Resubmit) if resubmits_left > 0 => {
                        resubmits_left -= 1;
                        continue;
                    }
                    Err(InFlightError::Resubmit) => {
                        return Err(FtlError::Device(NvmeStatus::ZoneInvalidWrite))
                    }
                    Err(InFlightError::Failed(FtlError::Device(s)))
                        if is_zone_refusal(s) && refusals_left > 0 =>
                    {
                        tracing::warn!(
                            zone = r.zone,
                            "the device refused a data zone ({s}); writing elsewhere"
                        );
                        refusals_left -= 1;
                        continue;
                    }
                    Err(InFlightError::Failed(e)) => return Err(e),
                }
                done += r.blocks;
                continue;
            }
            let append = self.shared.opts().write_mode == WriteMode::ZoneAppend;
            if append {
                drop(guard);
            }
            let result = self.put_piece(r, payload, done, fua, append).await;
            match result {
                Ok(offset) => {
                    self.complete_piece(r.zone, offset, r.blocks, payload, done);
                    let tags: Vec<Tag> = match payload {
                        Payload::Data { lba, seq, .. } => (0..r.blocks)
                            .map(|i| Tag::Data {
                                lba: lba + done + i,
                                seq,
                            })
                            .collect(),
                        Payload::Trim { record } => vec![Tag::Trim { seq: record.seq }],
                        Payload::TlRecord { record } => vec![Tag::Trim { seq: record.seq }],
                    };
                    self.note_tags(r.zone, tags.into_iter(), fua).await?;
                }
                Err(e) => {
                    self.write_failed(r.zone, WriteKind::Data).await;
                    match e {
                        FtlError::Device(s) if is_zone_refusal(s) && refusals_left > 0 => {
                            tracing::warn!(
                                zone = r.zone,
                                "the device refused a data zone ({s}); writing elsewhere"
                            );
                            refusals_left -= 1;
                            continue;
                        }
                        e => return Err(e),
                    }
                }
            }
            done += r.blocks;
        }
        Ok(())
    }

    /// Writes reservation `r` (a user stream's, in Zone Write mode) with other writes to its
    /// zone in flight: the command is submitted under the slot's lock (`guard`), so it reaches
    /// the device behind the writes reserved before it, then the lock is released and the
    /// completion awaited, so the next writer submits behind it.
    ///
    /// A write refused with Zone Invalid Write while writes ahead of it were in flight found
    /// the device's write pointer short of its offset: one ahead of it was delayed (it
    /// overtook it) or failed. It waits until every write ahead of it has ended: all landed,
    /// it goes again at the same offset; one failed (the zone is sealed), its reservation is
    /// given up and the caller writes it elsewhere (`InFlightError::Resubmit`). Only a failure
    /// of its own reaches the caller (`InFlightError::Failed`).
    async fn put_in_flight(
        &self,
        guard: SlotGuard<'_>,
        r: Reservation,
        payload: Payload<'_>,
        done: u64,
        fua: bool,
    ) -> Result<(), InFlightError> {
        let behind = self.shared.map(|m| m.zone(r.zone).inflight > 1);
        let mut fut = Box::pin(self.put_piece(r, payload, done, fua, false));
        // Submit it now, behind the writes before it.
        let polled = futures::poll!(fut.as_mut());
        drop(guard);
        let mut result = match polled {
            Poll::Ready(res) => res,
            Poll::Pending => fut.await,
        };
        if behind && matches!(result, Err(FtlError::Device(NvmeStatus::ZoneInvalidWrite))) {
            if self.await_writes_ahead(r).await {
                self.shared.map(|m| m.counters.user_writes_resent += 1);
                result = self.put_piece(r, payload, done, fua, false).await;
            } else {
                self.user_write_failed(r.zone).await;
                self.shared.map(|m| m.counters.user_writes_resubmitted += 1);
                return Err(InFlightError::Resubmit);
            }
        }
        match result {
            Ok(offset) => {
                self.complete_piece(r.zone, offset, r.blocks, payload, done);
                self.finish_if_sealed(r.zone).await;
                Ok(())
            }
            Err(e) => {
                self.user_write_failed(r.zone).await;
                Err(InFlightError::Failed(e))
            }
        }
    }

    /// Waits until every write to zone `r.zone` ahead of reservation `r` has ended; true when
    /// they all landed (the device's write pointer is at `r.offset`), false when the zone was
    /// sealed after a failure (the write pointer will not get there).
    async fn await_writes_ahead(&self, r: Reservation) -> bool {
        loop {
            let waiting = self.shared.space_notified();
            tokio::pin!(waiting);
            let (landed, sealed) = self.shared.map(|m| {
                (
                    m.zone(r.zone).prefix.end() >= r.offset,
                    self.sealed_busy.lock().contains(&r.zone),
                )
            });
            if sealed {
                return false;
            }
            if landed {
                return true;
            }
            waiting.await;
        }
    }

    /// A user write to zone `z` failed for good, or was given up, while other writes to the
    /// zone may be in flight: the core seals the zone, and the last write to end finishes it
    /// on the device (a Finish before them would fail those that were landing).
    async fn user_write_failed(&self, z: u32) {
        let finish = self.shared.map(|m| {
            m.plan_write_failed(z, WriteKind::Data);
            let mut sealed = self.sealed_busy.lock();
            if m.zone(z).inflight == 0 {
                sealed.retain(|&s| s != z);
                true
            } else {
                if !sealed.contains(&z) {
                    sealed.push(z);
                }
                false
            }
        });
        self.write_ended();
        if finish {
            self.finish_on_device(z).await;
        }
    }

    /// A user write to zone `z` landed: if a failure sealed the zone and this was the last
    /// write in flight to it, the zone is finished on the device.
    async fn finish_if_sealed(&self, z: u32) {
        let finish = self.shared.map(|m| {
            let mut sealed = self.sealed_busy.lock();
            if m.zone(z).inflight > 0 || !sealed.contains(&z) {
                return false;
            }
            sealed.retain(|&s| s != z);
            true
        });
        if finish {
            self.finish_on_device(z).await;
        }
    }

    /// Issues one piece; returns the zone offset it landed at.
    async fn put_piece(
        &self,
        r: Reservation,
        payload: Payload<'_>,
        done: u64,
        fua: bool,
        append: bool,
    ) -> Result<u64, FtlError> {
        let bs = self.shared.layout().geometry.block_size as usize;
        let zone_start = self.shared.layout().data_zone_start(r.zone);
        let mut trim_block = Vec::new();
        let (bytes, meta) = match payload {
            Payload::Data { lba, seq, bytes } => {
                let from = done as usize * bs;
                let tags = (0..r.blocks).map(|i| Tag::Data {
                    lba: lba + done + i,
                    seq,
                });
                (
                    &bytes[from..from + r.blocks as usize * bs],
                    self.meta_for(tags, r.blocks),
                )
            }
            Payload::Trim { record } => {
                trim_block.resize(bs, 0);
                records::encode_trim(&record, &mut trim_block);
                (
                    &trim_block[..],
                    self.meta_for(std::iter::once(Tag::Trim { seq: record.seq }), 1),
                )
            }
            Payload::TlRecord { record } => {
                trim_block.resize(bs, 0);
                records::encode_tl_record(&record, &mut trim_block);
                (
                    &trim_block[..],
                    self.meta_for(std::iter::once(Tag::Trim { seq: record.seq }), 1),
                )
            }
        };
        if append {
            let at = retry(|| {
                self.shared
                    .dev()
                    .append(zone_start, bytes, meta.as_deref(), fua)
            })
            .await?;
            Ok(at - zone_start)
        } else {
            retry(|| {
                self.shared
                    .dev()
                    .write(zone_start + r.offset, bytes, meta.as_deref(), fua)
            })
            .await?;
            Ok(r.offset)
        }
    }

    fn complete_piece(&self, z: u32, offset: u64, blocks: u64, payload: Payload<'_>, done: u64) {
        self.shared.map(|m| match payload {
            Payload::Data { lba, seq, .. } => m.complete_write(z, offset, lba + done, blocks, seq),
            Payload::Trim { record } => {
                m.complete_trim_record(z, offset, record.lba, record.blocks, record.seq)
            }
            Payload::TlRecord { record } => m.complete_tl_record(z, offset, record.seq),
        });
        self.write_ended();
    }

    /// A write to a data zone ended (user data, trim record, summary or garbage-collection
    /// copy; completed or failed). Its zone may have filled (a victim for garbage collection)
    /// or gone idle (sealable): either changes what a writer waiting for space can do, and
    /// `Mapping::plan_acquire` waits while an open zone is filling precisely because this
    /// signal follows. So every end signals, and wakes maintenance when its work is due.
    pub(crate) fn write_ended(&self) {
        let every = self.shared.opts().checkpoint_every_zones;
        let floor = self.policy.floor(Stream::Hot, true);
        let wake = self.shared.map(|m| {
            m.checkpoint_due(every)
                || self.policy.gc_wanted(m.free_zones())
                // Threaded logging looks for a zone a little before collection is due.
                || m.tl_wanted(m.free_zones(), floor)
        });
        if wake {
            self.shared.wake_maintenance();
        }
        self.shared.space_changed();
    }

    /// Waits until a user write of `blocks` blocks may go (`Mapping::plan_admit`): while
    /// garbage collection owes zones, user writes are paced by the blocks it copies. A
    /// waiting writer holds no slot, and every copy's end signals space.
    async fn admit(&self, blocks: u64) -> Result<(), FtlError> {
        loop {
            let waiting = self.shared.space_notified();
            tokio::pin!(waiting);
            let next = self.shared.map(|m| m.plan_admit(blocks, &self.policy));
            match next {
                crate::plan::Admit::Go => return Ok(()),
                crate::plan::Admit::Wait => {
                    self.shared.wake_maintenance();
                    self.shared.check_failed()?;
                    let _waiting = self.shared.activity().enter(Gauge::SpaceWaits);
                    waiting.await;
                }
            }
        }
    }

    /// A user write of whole blocks at `lba`.
    pub(crate) async fn write_blocks(
        &self,
        lba: Lba,
        data: &[u8],
        fua: bool,
    ) -> Result<(), FtlError> {
        self.shared.check_failed()?;
        let _writing = self.shared.activity().enter(Gauge::UserWrites);
        let bs = u64::from(self.shared.layout().geometry.block_size);
        self.admit(data.len() as u64 / bs).await?;
        let hot_cold = self.shared.opts().hot_cold;
        let (seq, stream) = self.shared.map(|m| {
            let stream = m.classify(lba, hot_cold);
            m.note_update(lba);
            (m.take_seq(), stream)
        });
        self.put(
            stream,
            Payload::Data {
                lba,
                seq,
                bytes: data,
            },
            fua,
        )
        .await
    }

    /// Trim or write zeroes: the range reads as zeros; a trim record makes that survive a
    /// crash once flushed (or at once with FUA). Returns whether a record was written: none
    /// is when nothing in the range is mapped, and then the zeros may rest on an earlier trim
    /// record not yet durable, which a FUA caller must flush (`FtlVolume::write_zeroes`).
    pub(crate) async fn trim_blocks(
        &self,
        lba: Lba,
        blocks: u64,
        fua: bool,
    ) -> Result<bool, FtlError> {
        self.shared.check_failed()?;
        if blocks == 0 {
            return Ok(false);
        }
        let seq = self.shared.map(|m| m.trim(lba, blocks));
        let Some(seq) = seq else {
            return Ok(false);
        };
        self.put(
            Stream::Hot,
            Payload::Trim {
                record: TrimRecord { lba, blocks, seq },
            },
            fua,
        )
        .await?;
        Ok(true)
    }
}

impl StreamWriter {
    /// Writes a threaded-logging record (`Mapping::tl_record`) into the collection stream,
    /// which the maintenance task writing it owns and which never waits for space (it fails
    /// with `NoSpace` instead). Not durable until the caller flushes.
    pub(crate) async fn write_tl_record(&self, record: TlRecord) -> Result<(), FtlError> {
        self.shared.check_failed()?;
        self.put(Stream::Gc, Payload::TlRecord { record }, false)
            .await
    }
}

/// Zones a single write may find refused before it gives up.
const ZONE_REFUSALS_MAX: u32 = 4;

/// Zones a single write may find sealed by a failed write ahead of it before it gives up.
const ZONE_RESUBMITS_MAX: u32 = 8;

/// How a write with others in flight to its zone ended, if not landed.
enum InFlightError {
    /// A write ahead of it failed, so the device would not take it there: write it elsewhere.
    Resubmit,
    /// It failed itself.
    Failed(FtlError),
}

/// Statuses with which a device refuses a write to a zone it retired, before writing anything.
fn is_zone_refusal(s: NvmeStatus) -> bool {
    matches!(s, NvmeStatus::ZoneIsReadOnly | NvmeStatus::ZoneIsOffline)
}
