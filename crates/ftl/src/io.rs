//! The FTL's data path: user writes into stream zones, reads through the mapping, trims.
//!
//! Fault model: a device command may fail transiently (retried, bounded) or for good; a zone
//! whose write failed for good is sealed and never written again, the error goes to the
//! caller, and nothing already acknowledged is affected. A write that failed may still have
//! reached the device, so its blocks read as old or new after a crash, as in any block layer.
//! In summary mode a failed summary keeps its tags: the next flush writes a checkpoint (which
//! maps those blocks) before it returns, so a flush never reports durable what a crash would
//! lose. A read from an Offline zone fails with the LBA range it lost.

use std::sync::atomic::Ordering;

use zns::{Lba, NvmeStatus, ZoneAction, ZonedDevice};

use crate::layout::WriteMode;
use crate::map::{Reservation, Stream, ZoneUse};
use crate::records::{self, Tag, TrimRecord, ZoneHeader};
use crate::volume::{FtlVolume, Slot};
use crate::FtlError;

/// A locked slot: its open zone and that zone's generation.
pub(crate) type SlotGuard<'a> = tokio::sync::MutexGuard<'a, Option<(u32, u64)>>;

/// Attempts per device command before an error is final.
const ATTEMPTS: u32 = 3;

/// What a piece of a write carries.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// User data for `lba..`, written with `seq`.
    Data { lba: u64, seq: u64, bytes: &'a [u8] },
    /// A trim record block.
    Trim { record: TrimRecord },
}

impl FtlVolume {
    /// Per-block metadata carrying `tags`; None in summary mode, where tags go in-band.
    fn meta_for(&self, tags: impl Iterator<Item = Tag>, blocks: u64) -> Option<Vec<u8>> {
        if self.layout.summary_mode() {
            return None;
        }
        let oob = self.layout.geometry.oob_size as usize;
        let mut meta = vec![0u8; blocks as usize * oob];
        for (i, t) in tags.take(blocks as usize).enumerate() {
            records::encode_tag(t, &mut meta[i * oob..]);
        }
        Some(meta)
    }

    /// Blocks of data zone `z` a write may still take: in summary mode, one block stays free
    /// for the summary and a group never outgrows one summary block.
    pub(crate) fn data_room(&self, z: u32) -> u64 {
        let room = self.layout.zone_blocks - self.map.lock().zone(z).reserved;
        if !self.layout.summary_mode() {
            return room;
        }
        let group = records::summary_capacity(self.layout.geometry.block_size as usize) as u64;
        let pending = self.pending_tags.lock()[z as usize].len() as u64;
        room.saturating_sub(1).min(group.saturating_sub(pending))
    }

    /// Records tags of blocks just written to zone `z` (summary mode) and writes the summary
    /// when the group is full, the zone is about to fill, or the write was FUA. The caller
    /// holds the zone's slot, so nothing else writes to the zone meanwhile.
    pub(crate) async fn note_tags(
        &self,
        z: u32,
        tags: impl Iterator<Item = Tag>,
        fua: bool,
    ) -> Result<(), FtlError> {
        if !self.layout.summary_mode() {
            return Ok(());
        }
        self.pending_tags.lock()[z as usize].extend(tags);
        if fua || self.data_room(z) == 0 {
            self.write_summary(z, fua).await?;
        }
        Ok(())
    }

    /// Writes zone `z`'s pending tags as a summary block at its write pointer.
    pub(crate) async fn write_summary(&self, z: u32, fua: bool) -> Result<(), FtlError> {
        // The tags stay pending until the summary is written: if it fails they are what the
        // next flush must make durable another way (a checkpoint).
        let tags = self.pending_tags.lock()[z as usize].clone();
        let (r, generation) = {
            let mut m = self.map.lock();
            let generation = m.zone(z).generation;
            (m.reserve(z, 1), generation)
        };
        if r.blocks == 0 {
            return Err(FtlError::Corrupt(format!(
                "no room for the summary of data zone {z}"
            )));
        }
        let mut block = vec![0u8; self.layout.geometry.block_size as usize];
        let place = records::SummaryPlace {
            volume_id: self.volume_id,
            data_zone: z,
            generation,
            offset: r.offset,
        };
        records::encode_summary(&place, &tags, &mut block);
        let at = self.layout.data_zone_start(z) + r.offset;
        match retry(|| self.dev.write(at, &block, None, fua)).await {
            Ok(()) => {
                self.map.lock().complete_summary(z, r.offset);
                // The caller holds the zone's slot, so no tag was added meanwhile.
                self.pending_tags.lock()[z as usize].drain(..tags.len());
                Ok(())
            }
            Err(e) => {
                self.map.lock().write_failed(z);
                self.seal(z).await;
                Err(e.into())
            }
        }
    }

    /// Flush: in summary mode first every open zone's pending summary, then the device. Blocks
    /// whose summary failed (their zone is sealed, their tags still pending) are made durable
    /// by a checkpoint instead, and only then does the flush succeed.
    pub(crate) async fn flush_all(&self) -> Result<(), FtlError> {
        self.write_summaries(|_| true).await?;
        let orphaned: Vec<u32> = {
            let pending = self.pending_tags.lock();
            let m = self.map.lock();
            (0..pending.len() as u32)
                .filter(|z| {
                    !pending[*z as usize].is_empty() && !matches!(m.zone(*z).use_, ZoneUse::Open(_))
                })
                .collect()
        };
        if orphaned.is_empty() {
            retry(|| self.dev.flush()).await?;
            return Ok(());
        }
        // The checkpoint flushes the device before it is written, then maps those blocks.
        self.checkpoint().await?;
        let mut pending = self.pending_tags.lock();
        for z in orphaned {
            pending[z as usize].clear();
        }
        Ok(())
    }

    /// Writes the pending summaries of the open zones of streams `which` selects.
    pub(crate) async fn write_summaries(
        &self,
        which: impl Fn(Stream) -> bool,
    ) -> Result<(), FtlError> {
        if self.layout.summary_mode() {
            for slot in self.slots.iter().filter(|s| which(s.stream)) {
                let guard = slot.zone.lock().await;
                if let Some((z, _)) = *guard {
                    // A zone sealed after a failed write keeps its tags for the checkpoint
                    // `flush_all` writes instead; it has no room for a summary.
                    let open = matches!(self.map.lock().zone(z).use_, ZoneUse::Open(_));
                    if open && !self.pending_tags.lock()[z as usize].is_empty() {
                        self.write_summary(z, false).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Picks the slot a write of `stream` goes to: a free hot slot if one is idle.
    fn pick_slot(&self, stream: Stream) -> usize {
        let hot = self
            .slots
            .iter()
            .filter(|s| s.stream == Stream::Hot)
            .count();
        match stream {
            Stream::Hot => {
                let start = self.rr.fetch_add(1, Ordering::Relaxed);
                (0..hot)
                    .map(|i| (start + i) % hot)
                    .find(|&i| self.slots[i].zone.try_lock().is_ok())
                    .unwrap_or(start % hot)
            }
            Stream::Cold => hot,
            Stream::Gc => hot + 1,
            Stream::GcCold => hot + 2,
        }
    }

    /// The zone `guard` holds, if it is still open for `stream` with room; clears it if not.
    fn existing_zone(&self, guard: &mut Option<(u32, u64)>, stream: Stream) -> Option<u32> {
        let (z, generation) = (*guard)?;
        let m = self.map.lock();
        let zone = m.zone(z);
        // The zone may have filled, been collected and even reopened since.
        if zone.generation == generation
            && zone.use_ == ZoneUse::Open(stream)
            && zone.reserved < self.layout.zone_blocks
        {
            return Some(z);
        }
        drop(m);
        *guard = None;
        None
    }

    /// A slot of a user stream with an open zone and room, when `stream` can open none.
    async fn borrow_user_zone(
        &self,
    ) -> Option<(tokio::sync::MutexGuard<'_, Option<(u32, u64)>>, u32)> {
        for slot in self.slots.iter().filter(|s| !s.stream.is_gc()) {
            let mut guard = slot.zone.lock().await;
            if let Some(z) = self.existing_zone(&mut guard, slot.stream) {
                return Some((guard, z));
            }
        }
        None
    }

    /// Makes sure `guard` holds an open zone with room, opening a new one (and writing its
    /// header) when needed. User streams wait for garbage collection when space is short.
    ///
    /// The slot is locked on return; it is never held while waiting for space, so a flush or a
    /// collection can always take every slot.
    pub(crate) async fn acquire_zone<'a>(
        &'a self,
        slot: &'a Slot,
        stream: Stream,
    ) -> Result<(SlotGuard<'a>, u32), FtlError> {
        loop {
            self.check_failed()?;
            let mut guard = slot.zone.lock().await;
            if let Some(z) = self.existing_zone(&mut guard, stream) {
                return Ok((guard, z));
            }
            let waiting = self.space.notified();
            tokio::pin!(waiting);
            waiting.as_mut().enable();
            let (opened, hopeless) = {
                let mut m = self.map.lock();
                let free = m.free_zones();
                if free < self.opts.gc_background_free_zones {
                    self.maint_wake.notify_one();
                }
                // User writes wait for garbage collection below the foreground watermark, but
                // only while it has something to reclaim; they never take the reserve.
                let reclaimable =
                    m.pick_victim(self.opts.victim_policy).is_some() || m.collecting_any();
                let floor = match stream {
                    s if s.is_gc() => 0,
                    _ if reclaimable => self
                        .opts
                        .gc_foreground_free_zones
                        .max(self.layout.reserve_zones),
                    // Nothing reclaimable anywhere: the next overwrite creates some, and one
                    // reserve zone is enough for garbage collection.
                    _ => self.layout.reserve_zones.saturating_sub(1).max(1),
                };
                if free > floor {
                    (m.open_zone(stream), false)
                } else {
                    (
                        None,
                        !reclaimable && !stream.is_gc() && !m.open_zone_filling(),
                    )
                }
            };
            match opened {
                Some((z, generation)) => {
                    self.write_header(z, generation).await?;
                    *guard = Some((z, generation));
                    return Ok((guard, z));
                }
                None if stream.is_gc() => return Err(FtlError::NoSpace),
                None if hopeless => {
                    // All reclaimable space sits in open zones: seal the idle ones.
                    // A zone whose blocks await their summary is not sealed: the summary
                    // needs its last block.
                    let sealed = {
                        let pending = self.pending_tags.lock();
                        self.map
                            .lock()
                            .seal_idle(|z| pending[z as usize].is_empty())
                    };
                    if sealed.is_empty() {
                        return Err(FtlError::NoSpace);
                    }
                    for z in sealed {
                        self.finish_on_device(z).await;
                    }
                    self.maint_wake.notify_one();
                }
                None => {
                    drop(guard);
                    // A failure that came after the check above woke nobody yet.
                    self.check_failed()?;
                    waiting.await;
                }
            }
        }
    }

    async fn write_header(&self, z: u32, generation: u64) -> Result<(), FtlError> {
        let bs = self.layout.geometry.block_size as usize;
        let mut block = vec![0u8; bs];
        records::encode_header(
            &ZoneHeader {
                volume_id: self.volume_id,
                data_zone: z,
                generation,
            },
            &mut block,
        );
        let meta = self.meta_for(std::iter::once(Tag::Header { generation }), 1);
        let at = self.layout.data_zone_start(z);
        let r = retry(|| self.dev.write(at, &block, meta.as_deref(), false)).await;
        match r {
            Ok(()) => {
                self.map.lock().header_written(z);
                Ok(())
            }
            Err(e) => {
                self.seal(z).await;
                Err(e.into())
            }
        }
    }

    /// Seals a zone after a failed write: no more reservations, and the device releases it.
    pub(crate) async fn seal(&self, z: u32) {
        {
            let mut m = self.map.lock();
            m.abandon(z);
        }
        self.finish_on_device(z).await;
    }

    /// Finishes zone `z` on the device so it stops holding an open-zone resource. A failure is
    /// logged and otherwise harmless: the zone is never written again, a zone left open costs
    /// a resource only until the next mount finishes it, and a Read Only or Offline zone (the
    /// usual cause) holds none.
    pub(crate) async fn finish_on_device(&self, z: u32) {
        let at = self.layout.data_zone_start(z);
        if let Err(e) = self.dev.zone_mgmt(ZoneAction::Finish, at, false).await {
            tracing::warn!(zone = z, "finishing a sealed data zone failed: {e}");
        }
    }

    /// Writes `payload` into `stream`, splitting it across zones as they fill.
    pub(crate) async fn put(
        &self,
        stream: Stream,
        payload: Payload<'_>,
        fua: bool,
    ) -> Result<(), FtlError> {
        let bs = u64::from(self.layout.geometry.block_size);
        let total = match payload {
            Payload::Data { bytes, .. } => bytes.len() as u64 / bs,
            Payload::Trim { .. } => 1,
        };
        let limit = u64::from(match self.opts.write_mode {
            WriteMode::ZoneWrite => self.layout.geometry.mdts_blocks,
            WriteMode::ZoneAppend => self.layout.geometry.zasl_blocks,
        });
        let mut done = 0u64;
        while done < total {
            let slot = &self.slots[self.pick_slot(stream)];
            let (mut guard, z) = match self.acquire_zone(slot, stream).await {
                Ok(found) => found,
                Err(FtlError::NoSpace) if !stream.is_gc() => {
                    self.borrow_user_zone().await.ok_or(FtlError::NoSpace)?
                }
                Err(e) => return Err(e),
            };
            let mut want = (total - done).min(limit);
            if self.layout.summary_mode() {
                let room = self.data_room(z);
                if room == 0 {
                    // The group is complete or only the summary's block is left.
                    self.write_summary(z, false).await?;
                    continue;
                }
                want = want.min(room);
            }
            let r = self.map.lock().reserve(z, want);
            if r.blocks == 0 {
                *guard = None;
                continue;
            }
            let append = self.opts.write_mode == WriteMode::ZoneAppend;
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
                    };
                    self.note_tags(r.zone, tags.into_iter(), fua).await?;
                }
                Err(e) => {
                    self.map.lock().write_failed(r.zone);
                    self.seal(r.zone).await;
                    return Err(e);
                }
            }
            done += r.blocks;
        }
        Ok(())
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
        let bs = self.layout.geometry.block_size as usize;
        let zone_start = self.layout.data_zone_start(r.zone);
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
        };
        if append {
            let at = retry(|| self.dev.append(zone_start, bytes, meta.as_deref(), fua)).await?;
            Ok(at - zone_start)
        } else {
            retry(|| {
                self.dev
                    .write(zone_start + r.offset, bytes, meta.as_deref(), fua)
            })
            .await?;
            Ok(r.offset)
        }
    }

    fn complete_piece(&self, z: u32, offset: u64, blocks: u64, payload: Payload<'_>, done: u64) {
        let mut m = self.map.lock();
        match payload {
            Payload::Data { lba, seq, .. } => m.complete_write(z, offset, lba + done, blocks, seq),
            Payload::Trim { record } => {
                m.complete_trim_record(z, offset, record.lba, record.blocks, record.seq)
            }
        }
        let wake = m.filled_since_ckpt >= self.opts.checkpoint_every_zones
            || m.free_zones() < self.opts.gc_background_free_zones;
        drop(m);
        if wake {
            self.maint_wake.notify_one();
        }
        // A zone that just filled may be what a waiting writer's garbage collection needs.
        self.space.notify_waiters();
    }

    /// A user write of whole blocks at `lba`.
    pub(crate) async fn write_blocks(
        &self,
        lba: Lba,
        data: &[u8],
        fua: bool,
    ) -> Result<(), FtlError> {
        self.check_failed()?;
        let (seq, stream) = {
            let mut m = self.map.lock();
            let stream = m.classify(lba, self.opts.hot_cold);
            (m.take_seq(), stream)
        };
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
    /// crash once flushed (or at once with FUA).
    pub(crate) async fn trim_blocks(
        &self,
        lba: Lba,
        blocks: u64,
        fua: bool,
    ) -> Result<(), FtlError> {
        self.check_failed()?;
        if blocks == 0 {
            return Ok(());
        }
        let seq = self.map.lock().trim(lba, blocks);
        if let Some(seq) = seq {
            self.put(
                Stream::Hot,
                Payload::Trim {
                    record: TrimRecord { lba, blocks, seq },
                },
                fua,
            )
            .await?;
        }
        Ok(())
    }

    /// Reads whole blocks at `lba` through the mapping; unmapped blocks read as zeros.
    pub(crate) async fn read_blocks(&self, lba: Lba, buf: &mut [u8]) -> Result<(), FtlError> {
        self.check_failed()?;
        let bs = self.layout.geometry.block_size as usize;
        let blocks = (buf.len() / bs) as u64;
        // Runs of blocks contiguous on the device within one zone:
        // (first buffer block, device LBA, count, data zone).
        let mut runs: Vec<(usize, Lba, u64, u32)> = Vec::new();
        let mut pinned = Vec::new();
        {
            let mut m = self.map.lock();
            for i in 0..blocks {
                match m.lookup(lba + i) {
                    None => buf[i as usize * bs..(i as usize + 1) * bs].fill(0),
                    Some(pba) => {
                        let dev_lba = self.layout.pba_to_lba(pba);
                        let zone = (u64::from(pba) / self.layout.zone_blocks) as u32;
                        match runs.last_mut() {
                            Some((first, at, n, z))
                                if *first as u64 + *n == i
                                    && *at + *n == dev_lba
                                    && *z == zone
                                    && *n < 256 =>
                            {
                                *n += 1
                            }
                            _ => {
                                pinned.push(m.pin(pba));
                                runs.push((i as usize, dev_lba, 1, zone));
                            }
                        }
                    }
                }
            }
        }
        let mut result = Ok(());
        for (first, at, n, _) in &runs {
            let part = &mut buf[first * bs..(first + *n as usize) * bs];
            match read_retry(self.dev.as_ref(), *at, part, None).await {
                Ok(()) => {}
                Err(NvmeStatus::ZoneIsOffline) => {
                    let from = lba + *first as u64;
                    result = Err(FtlError::DataLost(format!(
                        "LBAs {from}..{} sit in a data zone that went offline",
                        from + n
                    )));
                    break;
                }
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
        }
        {
            let mut m = self.map.lock();
            for z in pinned {
                m.unpin(z);
            }
        }
        self.space.notify_waiters();
        result
    }
}

/// Runs a device command, retrying transient errors a bounded number of times.
pub(crate) async fn retry<T, F, Fut>(mut f: F) -> Result<T, NvmeStatus>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, NvmeStatus>>,
{
    let mut last = NvmeStatus::InternalError;
    for _ in 0..ATTEMPTS {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// A read with the same bounded retry of transient errors.
pub(crate) async fn read_retry(
    dev: &dyn ZonedDevice,
    at: Lba,
    buf: &mut [u8],
    mut meta: Option<&mut [u8]>,
) -> Result<(), NvmeStatus> {
    let mut last = NvmeStatus::InternalError;
    for _ in 0..ATTEMPTS {
        match dev.read(at, buf, meta.as_deref_mut()).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_transient() => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}
