//! The NVMe commands of the emulated device: the `ZonedDevice` implementation. Each command
//! passes admission (`EmuDevice::enter`: counters and injected faults), is validated, runs
//! under the device lock in the command core (`core.rs`), and is then timed by the
//! performance model when it is on.

use async_trait::async_trait;
use zns::{
    ChunkMapping, CompactionExtent, CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter,
    ZoneAction, ZoneReport, ZoneState, ZonedDevice,
};

use super::core::{read_pieces, store_payload, zeros_needed, Payload};
use super::EmuDevice;
use crate::stats::Op;
use crate::timing::TimedCmd;

#[async_trait]
impl ZonedDevice for EmuDevice {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.enter(Op::Read).await?;
        let r = (|| {
            let blocks = self.blocks_of(lba, buf.len(), meta.as_ref().map(|m| m.len()))?;
            let pieces = {
                let mut c = self.core.lock();
                c.drain_appends();
                c.zones.check_read(lba, blocks)?;
                self.mdts_check(blocks)?;
                c.plan_read(lba, blocks)?
            };
            // Copied without the core lock. On one thread nothing runs in between; with a
            // reset and rewrite of the zone on another thread meanwhile, the new bytes may
            // show through, as for any two concurrent commands on a drive.
            read_pieces(&*self.store, &self.geo, lba, &pieces, buf, meta)
                .map_err(|(op, e)| self.core.lock().host_fault(op, e))
        })();
        self.record(Op::Read, &r);
        if let Some(t) = &self.timing {
            let blocks = (buf.len() / self.geo.block_size as usize) as u64;
            t.complete(TimedCmd::Read { lba, blocks }, r.is_ok()).await;
        }
        r
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.enter(Op::Write).await?;
        let r = (|| {
            let blocks = self.blocks_of(lba, data.len(), meta.map(|m| m.len()))?;
            self.mdts_check(blocks)?;
            let payload = Payload {
                data: Some(data),
                meta,
            };
            self.write_outside_core(lba, blocks, payload, fua)
        })();
        self.record(Op::Write, &r);
        if let Some(t) = &self.timing {
            let blocks = (data.len() / self.geo.block_size as usize) as u64;
            let cmd = TimedCmd::Write {
                lba,
                blocks,
                fua,
                host_data: true,
            };
            t.complete(cmd, r.is_ok()).await;
            self.book_plugs();
        }
        r
    }

    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.enter(Op::Append).await?;
        let blocks = match self.blocks_of(zslba, data.len(), meta.map(|m| m.len())) {
            Ok(b) => b,
            Err(e) => {
                self.record(Op::Append, &Err::<(), _>(e));
                return Err(e);
            }
        };
        if !self.cfg.reorder_appends {
            let r = (|| {
                self.mdts_check(blocks)?;
                let _zone = self.lock_zone_of(zslba);
                self.core.lock().append_now(
                    zslba,
                    Payload {
                        data: Some(data),
                        meta,
                    },
                    fua,
                )
            })();
            self.record(Op::Append, &r);
            self.time_append(&r, blocks, fua).await;
            return r;
        }
        let r = self.queued_append(zslba, data, meta, fua).await;
        self.record(Op::Append, &r);
        self.time_append(&r, blocks, fua).await;
        r
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.enter(Op::WriteZeroes).await?;
        let r = (|| {
            zns::check_range(&self.geo, lba, blocks)?;
            if blocks == 0 {
                return Err(NvmeStatus::InvalidField);
            }
            self.mdts_check(blocks)?;
            let payload = Payload {
                data: None,
                meta: None,
            };
            self.write_outside_core(lba, blocks, payload, fua)
        })();
        self.record(Op::WriteZeroes, &r);
        if let Some(t) = &self.timing {
            let cmd = TimedCmd::Write {
                lba,
                blocks,
                fua,
                host_data: false,
            };
            t.complete(cmd, r.is_ok()).await;
            self.book_plugs();
        }
        r
    }

    async fn flush(&self) -> NvmeResult<()> {
        self.enter(Op::Flush).await?;
        let r = self.core.lock().flush();
        self.record(Op::Flush, &r);
        if let Some(t) = &self.timing {
            t.complete(TimedCmd::Flush, r.is_ok()).await;
        }
        r
    }

    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.enter(Op::Copy).await?;
        let r = self.copy_now(sources, dest, fua);
        self.record(Op::Copy, &r);
        if let Some(t) = &self.timing {
            let cmd = TimedCmd::Copy { sources, dest, fua };
            t.complete(cmd, r.is_ok()).await;
            self.book_plugs();
        }
        r
    }

    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.enter(Op::ZoneMgmt).await?;
        // `changed`: zones whose state changed, for the timing model (erase, last program).
        let (r, changed) = {
            let _zones = if select_all {
                self.lock_all_zones()
            } else {
                self.lock_zone_of(zslba).into_iter().collect()
            };
            loop {
                let mut c = self.core.lock();
                let out = c.manage(action, zslba, select_all);
                // As for writes: an open that waits only for writes in flight elsewhere.
                if out.0 == Err(NvmeStatus::TooManyOpenZones)
                    && out.1.is_empty()
                    && c.zones.open_room_waits_for_busy()
                {
                    drop(c);
                    std::thread::yield_now();
                    continue;
                }
                break out;
            }
        };
        self.record(Op::ZoneMgmt, &r);
        if let Some(t) = &self.timing {
            let pick = |s: ZoneState| -> Vec<u32> {
                changed.iter().filter(|c| c.1 == s).map(|c| c.0).collect()
            };
            let (reset, finished) = (pick(ZoneState::Empty), pick(ZoneState::Full));
            let cmd = match action {
                ZoneAction::Reset => TimedCmd::Reset { zones: &reset },
                ZoneAction::Finish => TimedCmd::Finish { zones: &finished },
                _ => TimedCmd::Admin,
            };
            // Select All may fail after changing zones; those changes still cost their time.
            t.complete(cmd, r.is_ok() || !changed.is_empty()).await;
        }
        r
    }

    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.enter(Op::Report).await?;
        let r = self.core.lock().report(lba, filter, partial, max_zones);
        self.record(Op::Report, &r);
        if let Some(t) = &self.timing {
            t.complete(TimedCmd::Admin, r.is_ok()).await;
        }
        r
    }

    fn die_stripe(&self) -> Option<zns::DieStripe> {
        self.timed_die_stripe()
    }

    fn identify_mapping(&self) -> Option<ChunkMapping> {
        self.chunk_mapping()
    }

    /// Admitted and counted as a Copy; on the timing model each extent is a Simple Copy of
    /// one range (copyback for whole units on the same die, else read and program on the
    /// device), none of it crossing the host link.
    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        let Some(m) = self.chunk_mapping() else {
            return Err(NvmeStatus::InvalidOpcode);
        };
        self.enter(Op::Copy).await?;
        let r = self.compaction_now(&m, extents);
        self.record(Op::Copy, &r);
        if let Some(t) = &self.timing {
            // The extents are booked together: the device works on all of them at once
            // (copybacks on different dies overlap), as it would on the pieces of one Copy.
            let sources: Vec<[CopyRange; 1]> = extents
                .iter()
                .map(|e| {
                    [CopyRange {
                        lba: e.src,
                        blocks: e.blocks,
                    }]
                })
                .collect();
            let cmds: Vec<TimedCmd<'_>> = extents
                .iter()
                .zip(&sources)
                .map(|(e, s)| TimedCmd::Copy {
                    sources: s,
                    dest: e.dst,
                    fua: false,
                })
                .collect();
            t.complete_all(&cmds, r.is_ok()).await;
            self.book_plugs();
        }
        r
    }

    /// Admitted and counted as zone management (an Open with a bitmap).
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        if !self.cfg.zns_plus {
            return Err(NvmeStatus::InvalidOpcode);
        }
        self.enter(Op::ZoneMgmt).await?;
        let r = {
            let _zone = self.lock_zone_of(zslba);
            self.core.lock().tl_open(zslba, valid)
        };
        self.record(Op::ZoneMgmt, &r);
        if let Some(t) = &self.timing {
            // The LogFBG allocation and the first plugging, then the command's own time.
            self.book_plugs();
            t.complete(TimedCmd::Admin, r.is_ok()).await;
        }
        r
    }
}

impl EmuDevice {
    /// Books a finished Zone Append with the timing model, at the LBA it landed at.
    async fn time_append(&self, r: &NvmeResult<Lba>, blocks: u64, fua: bool) {
        if let Some(t) = &self.timing {
            let lba = *r.as_ref().unwrap_or(&0);
            t.complete(TimedCmd::Append { lba, blocks, fua }, r.is_ok())
                .await;
            self.book_plugs();
        }
    }

    /// Checks a zone_compaction's sizes against the mapping's limits, then runs it with
    /// every destination zone locked (ascending, as Select All takes them).
    fn compaction_now(&self, m: &ChunkMapping, extents: &[CompactionExtent]) -> NvmeResult<()> {
        if extents.is_empty() || extents.len() > m.compaction_max_extents as usize {
            return Err(NvmeStatus::CommandSizeLimitExceeded);
        }
        let mut total = 0u64;
        for e in extents {
            if e.blocks == 0 {
                return Err(NvmeStatus::CommandSizeLimitExceeded);
            }
            total = total.saturating_add(e.blocks);
        }
        if total > u64::from(m.compaction_max_blocks) {
            return Err(NvmeStatus::CommandSizeLimitExceeded);
        }
        let mut zones: Vec<u32> = extents
            .iter()
            .filter_map(|e| self.geo.zone_of(e.dst))
            .collect();
        zones.sort_unstable();
        zones.dedup();
        let _locks: Vec<_> = zones
            .iter()
            .filter_map(|&z| self.lock_zone_of(self.geo.zone_start(z)))
            .collect();
        self.core.lock().compaction(extents)
    }

    fn copy_now(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        let g = &self.geo;
        if sources.is_empty() || sources.len() > g.copy_max_ranges as usize {
            return Err(NvmeStatus::CommandSizeLimitExceeded);
        }
        let mut total = 0u64;
        for s in sources {
            if s.blocks == 0 || s.blocks > u64::from(g.copy_max_range_blocks) {
                return Err(NvmeStatus::CommandSizeLimitExceeded);
            }
            total += s.blocks;
        }
        if total > u64::from(g.copy_max_blocks) {
            return Err(NvmeStatus::CommandSizeLimitExceeded);
        }
        let _zone = self.lock_zone_of(dest);
        self.core.lock().copy(sources, total, dest, fua)
    }

    /// A Zone Write or Write Zeroes: begun under the core lock (validated, zone opened, and
    /// either claimed or marked busy), its bytes copied into the store without it. A claimed
    /// write is then done (its claim cleared without the lock); a busy one is finished under
    /// the core lock. The zone's lock, held throughout, keeps other writers and state changes
    /// of this zone out.
    fn write_outside_core(
        &self,
        lba: Lba,
        blocks: u64,
        payload: Payload<'_>,
        fua: bool,
    ) -> NvmeResult<()> {
        let _zone = self.lock_zone_of(lba);
        let (z, claimed) = loop {
            let mut c = self.core.lock();
            c.drain_appends();
            match c.begin_zoned_write(lba, blocks, fua) {
                Ok(begun) => break begun,
                // The only zones the device could close for a slot have writes in flight on
                // other threads: once one finishes, this write gets its slot, as if it had
                // arrived after it (a copy takes microseconds; nothing here waits on I/O).
                Err(NvmeStatus::TooManyOpenZones) if c.zones.open_room_waits_for_busy() => {
                    drop(c);
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        };
        let zeros;
        let zeros: &[u8] = match zeros_needed(&self.geo, blocks, payload) {
            0 => &[],
            n => {
                zeros = vec![0u8; n];
                &zeros
            }
        };
        let stored = store_payload(&*self.store, &self.geo, lba, blocks, payload, zeros);
        if claimed {
            if let Err((op, e)) = stored {
                let mut c = self.core.lock();
                c.undo_claim(z, blocks);
                return Err(c.host_fault(op, e));
            }
            self.uncopied.clear(z);
            return Ok(());
        }
        let mut c = self.core.lock();
        c.zones.set_busy(z, false);
        match stored {
            // The write pointer has not moved: the zone still describes the store exactly.
            Err((op, e)) => Err(c.host_fault(op, e)),
            Ok(()) => c.complete_write(z, blocks, fua),
        }
    }
}
