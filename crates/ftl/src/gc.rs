//! Garbage collection and checkpointing, run by one maintenance task per mounted volume.
//!
//! Fault model: power can fail at any point of a collection. Copies keep their original
//! sequence numbers and are flushed before the victim zone is reset, so at every instant
//! each live block has a durable copy that recovery will find (docs/DESIGN.md). A victim the
//! device retired is not reused: a reset refused because the zone went Read Only or Offline
//! retires it, and a victim that went Offline mid-collection keeps its remaining entries as
//! lost data. Any other error, and a panic, fails the volume with its cause.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use zns::{CopyRange, NvmeStatus, ZoneAction};

use crate::checkpoint;
use crate::io::{read_retry, retry};
use crate::map::Stream;
use crate::volume::FtlVolume;
use crate::FtlError;

/// Failed copy batches one collection tolerates (each seals its destination zone).
const DEST_FAILURES_MAX: u32 = 3;

impl FtlVolume {
    /// Runs the maintenance loop; if it panics (a broken invariant), the volume fails with
    /// the panic's message instead of silently losing garbage collection.
    pub(crate) async fn maintenance(self: Arc<Self>) {
        use futures::FutureExt;
        let run = std::panic::AssertUnwindSafe(Arc::clone(&self).maintenance_loop());
        if let Err(panic) = run.catch_unwind().await {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            self.fail(&FtlError::Failed(format!(
                "garbage collection stopped: {what}"
            )));
        }
    }

    /// The maintenance loop: collect while free zones are short, checkpoint when enough zones
    /// filled, otherwise sleep until woken.
    async fn maintenance_loop(self: Arc<Self>) {
        while !self.closed.load(Ordering::SeqCst) {
            let (free, filled) = {
                let m = self.map.lock();
                (m.free_zones(), m.filled_since_ckpt)
            };
            let need_gc = free < self.opts.gc_background_free_zones;
            let need_ckpt = filled >= self.opts.checkpoint_every_zones;
            let mut progressed = false;
            if need_gc {
                match self.collect_one().await {
                    Ok(true) => progressed = true,
                    Ok(false) => {
                        // Nothing reclaimable: writers waiting for space must hear it now.
                        self.space.notify_waiters();
                    }
                    Err(e) => {
                        self.fail(&e);
                        return;
                    }
                }
            }
            if need_ckpt {
                if let Err(e) = self.checkpoint().await {
                    self.fail(&e);
                    return;
                }
                progressed = true;
            }
            if !progressed {
                self.maint_wake.notified().await;
            }
        }
    }

    /// Fails the volume: every later command returns the first cause, and writers waiting
    /// for space wake to it.
    pub(crate) fn fail(&self, e: &FtlError) {
        {
            let mut failure = self.failure.lock();
            if failure.is_none() {
                let cause = match e {
                    FtlError::Failed(cause) => cause.clone(),
                    other => other.to_string(),
                };
                tracing::error!(volume = self.volume_id, "the FTL volume failed: {cause}");
                *failure = Some(cause);
            }
        }
        self.space.notify_waiters();
    }

    /// Collects one victim zone; false when no zone has anything to reclaim.
    pub(crate) async fn collect_one(&self) -> Result<bool, FtlError> {
        let (victim, hot, cold) = {
            let mut m = self.map.lock();
            let Some(v) = m.pick_victim(self.opts.victim_policy) else {
                return Ok(false);
            };
            m.start_collecting(v);
            let (data, trims) = m.live_blocks(v);
            // Copies are split by temperature, so blocks rewritten soon do not share zones
            // with blocks that stay.
            let (mut hot, mut cold): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
            for (p, lba) in &data {
                match m.classify(*lba, self.opts.hot_cold) {
                    Stream::Hot => hot.push(*p),
                    _ => cold.push(*p),
                }
            }
            cold.extend(trims.iter().map(|(p, _)| *p));
            hot.sort_unstable();
            cold.sort_unstable();
            (v, hot, cold)
        };
        // A destination zone whose write failed is sealed and the batch goes to a new one;
        // a collection gives up (failing the volume) after this many failed batches.
        let mut failures_left = DEST_FAILURES_MAX;
        for (list, stream) in [(hot, Stream::Gc), (cold, Stream::GcCold)] {
            let mut i = 0;
            while i < list.len() {
                match self.move_batch(&list[i..], stream).await {
                    Ok(n) => i += n,
                    Err(FtlError::Device(e)) if failures_left > 0 => {
                        if self.victim_offline(victim).await {
                            return Ok(true);
                        }
                        tracing::warn!(
                            zone = victim,
                            "a garbage collection copy failed ({e}); retrying in another zone"
                        );
                        failures_left -= 1;
                    }
                    Err(e) => {
                        if self.victim_offline(victim).await {
                            return Ok(true);
                        }
                        return Err(e);
                    }
                }
            }
        }
        // The copies must be durable before the only other copy goes away, and so must the
        // newer versions that made the victim's other blocks invalid: in summary mode that
        // takes every open zone's pending summary (no writer holds a slot while it waits for
        // space, so this cannot wait on a writer that waits for this collection).
        self.flush_all().await?;
        loop {
            let waiting = self.space.notified();
            tokio::pin!(waiting);
            waiting.as_mut().enable();
            {
                let m = self.map.lock();
                let z = m.zone(victim);
                if z.valid != 0 {
                    return Err(FtlError::Corrupt(format!(
                        "data zone {victim} still holds {} valid blocks after collection",
                        z.valid
                    )));
                }
                if z.readers == 0 {
                    break;
                }
            }
            self.check_failed()?;
            waiting.await;
        }
        let reset = retry(|| {
            self.dev.zone_mgmt(
                ZoneAction::Reset,
                self.layout.data_zone_start(victim),
                false,
            )
        })
        .await;
        match reset {
            Ok(()) => {}
            // The device retired the zone: its data has moved out; it is never used again.
            Err(
                e @ (NvmeStatus::InvalidZoneStateTransition
                | NvmeStatus::ZoneIsReadOnly
                | NvmeStatus::ZoneIsOffline),
            ) => {
                tracing::warn!(zone = victim, "data zone retired: reset refused ({e})");
                self.map.lock().retire(victim, false);
                return Ok(true);
            }
            Err(e) => return Err(e.into()),
        }
        self.map.lock().zone_reset(victim);
        self.pending_tags.lock()[victim as usize].clear();
        self.space.notify_waiters();
        Ok(true)
    }

    /// After a failed move out of `victim`: if the victim went Offline its remaining blocks
    /// are lost (they stay mapped, so reads of them fail), it is retired, and true is returned.
    async fn victim_offline(&self, victim: u32) -> bool {
        let at = self.layout.data_zone_start(victim);
        let state = self
            .dev
            .report_zones(at, zns::ReportFilter::All, true, 1)
            .await
            .ok()
            .and_then(|r| r.zones.first().map(|d| d.state));
        if state == Some(zns::ZoneState::Offline) {
            tracing::error!(
                zone = victim,
                "data zone went offline; its remaining data is lost"
            );
            self.map.lock().retire(victim, true);
            return true;
        }
        false
    }

    /// Moves a prefix of `srcs` (sorted physical blocks) into the GC zone; returns how many.
    async fn move_batch(&self, srcs: &[u32], stream: Stream) -> Result<usize, FtlError> {
        let g = self.layout.geometry;
        let gc_slot = self
            .slots
            .iter()
            .position(|s| s.stream == stream)
            .unwrap_or(self.slots.len() - 1);
        let (mut guard, z) = self.acquire_zone(&self.slots[gc_slot], stream).await?;
        let use_copy = self.opts.use_copy;
        let max = if use_copy {
            g.copy_max_blocks.min(g.mdts_blocks)
        } else {
            g.mdts_blocks.min(256)
        };
        let want = (srcs.len() as u64).min(u64::from(max));
        let ranges_for = |n: usize| -> Vec<CopyRange> {
            let mut ranges: Vec<CopyRange> = Vec::new();
            for (k, &p) in srcs[..n].iter().enumerate() {
                let lba = self.layout.pba_to_lba(p);
                match ranges.last_mut() {
                    Some(r)
                        if r.lba + r.blocks == lba
                            && r.blocks < u64::from(g.copy_max_range_blocks)
                            && k > 0 =>
                    {
                        r.blocks += 1
                    }
                    _ => ranges.push(CopyRange { lba, blocks: 1 }),
                }
            }
            ranges
        };
        // Shrink the batch until its ranges fit the device's Copy limits.
        let mut n = want as usize;
        while use_copy && n > 1 && ranges_for(n).len() > g.copy_max_ranges as usize {
            n = n.div_ceil(2);
        }
        if self.layout.summary_mode() {
            let room = self.data_room(z);
            if room == 0 {
                self.write_summary(z, false).await?;
                return Ok(0);
            }
            n = n.min(room as usize);
        }
        let r = self.map.lock().reserve(z, n as u64);
        if r.blocks == 0 {
            *guard = None;
            return Ok(0);
        }
        let n = r.blocks as usize;
        let dest = self.layout.data_zone_start(z) + r.offset;
        let result = if use_copy {
            let ranges = ranges_for(n);
            retry(|| self.dev.copy(&ranges, dest, false)).await
        } else {
            self.read_write_copy(&srcs[..n], dest).await
        };
        if let Err(e) = result {
            self.map.lock().write_failed(z);
            *guard = None;
            self.seal(z).await;
            return Err(e.into());
        }
        let tags: Vec<_> = {
            let mut m = self.map.lock();
            let tags = srcs[..n]
                .iter()
                .enumerate()
                .map(|(k, &src)| m.complete_move(src, z, r.offset + k as u64))
                .collect();
            m.end_gc_write(z, r.offset, n as u64);
            tags
        };
        self.note_tags(z, tags.into_iter(), false).await?;
        Ok(n)
    }

    /// Relocation without Simple Copy: read data and metadata, write them unchanged.
    async fn read_write_copy(&self, srcs: &[u32], dest: zns::Lba) -> Result<(), zns::NvmeStatus> {
        let g = self.layout.geometry;
        let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
        let mut data = vec![0u8; srcs.len() * bs];
        let mut meta = vec![0u8; srcs.len() * oob];
        for (k, &p) in srcs.iter().enumerate() {
            let at = self.layout.pba_to_lba(p);
            let (d, m) = (
                &mut data[k * bs..(k + 1) * bs],
                &mut meta[k * oob..(k + 1) * oob],
            );
            read_retry(self.dev.as_ref(), at, d, Some(m)).await?;
        }
        retry(|| self.dev.write(dest, &data, Some(&meta), false)).await
    }

    /// Writes a checkpoint of the current mapping into the slot not holding the newest one.
    pub(crate) async fn checkpoint(&self) -> Result<(), FtlError> {
        let mut cur = self.ckpt.lock().await;
        let number = cur.number + 1;
        let (bytes, seq, mark) = {
            let mut m = self.map.lock();
            m.filled_since_ckpt = 0;
            let mark = m.begin_snapshot();
            (
                checkpoint::snapshot(&m, number, self.volume_id),
                m.next_seq(),
                mark,
            )
        };
        // Everything the snapshot maps must be durable before the checkpoint says so.
        retry(|| self.dev.flush()).await?;
        let slot = 1 - cur.slot;
        checkpoint::write_slot(self.dev.as_ref(), &self.layout, slot, &bytes).await?;
        cur.slot = slot;
        cur.number = number;
        self.map.lock().checkpoint_durable(seq, mark);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
