//! The member I/O of relocation: every read of a member's data zone goes through
//! `read_member`, which overlays relocated blocks (and zeros for stale ones), and every write
//! of a member's data zone through `write_member_run`, which relocates the blocks the member
//! zone's write pointer is already past (docs/DESIGN.md, "Relocation").
//!
//! Fault model: as `crate::reloc`. A relocation record is appended to the member's own
//! partial-parity log zone before the write that needs it completes, so it becomes durable
//! with the write's data (a FUA write or a Flush flushes every member); a member failing
//! takes its relocated blocks with it, like the rest of its data, and degraded reads rebuild
//! them from the other members.
//!
//! Lock order: a zone's `ZoneIo` lock, then the member's log lock; the `reloc` lock is a
//! leaf (never held across an await, never held while another lock is taken).

use zns::{NvmeResult, NvmeStatus};

use super::RaiznVolume;
use crate::meta::{RelocInline, RelocKind};

/// Counters of relocation, for tests and status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelocStats {
    /// Stale ranges recovery declared (torn stripes found at open).
    pub stale_ranges: u64,
    /// Blocks written to a relocation log instead of in place.
    pub blocks: u64,
    /// Relocation records appended by writes.
    pub records: u64,
    /// Relocations refused because one log zone's relocation budget was spent
    /// (`ArrayLayout::reloc_budget`): the write failed with Zone Invalid Write.
    pub refused: u64,
}

/// A relocation record as read from a log.
#[derive(Clone, Debug)]
pub(crate) struct RelocRecord {
    pub zone: u32,
    pub generation: u64,
    pub seq: u64,
    pub inline: RelocInline,
    pub data: Vec<u8>,
    pub meta: Vec<u8>,
}

impl RaiznVolume {
    /// What relocation did since open.
    pub fn reloc_stats(&self) -> RelocStats {
        *self.reloc_stats.lock()
    }

    /// Relocated blocks held in memory (bounded by what torn stripes left stale).
    pub fn relocated_blocks(&self) -> usize {
        self.reloc.lock().blocks()
    }

    /// Blocks member `m`'s relocation state takes in its log now (what a collection writes
    /// of it).
    pub fn relocation_log_blocks(&self, m: usize) -> u64 {
        let run = self.reloc_checkpoint_run_max();
        self.reloc.lock().log_blocks_of(m, run)
    }

    /// Blocks member `m`'s relocation state could take in its log once every block its
    /// stale ranges cover is written again: what keeping its torn zones writable may cost.
    /// With one log zone a relocation past [`crate::ArrayLayout::reloc_budget`] is refused.
    pub fn relocation_log_blocks_at_most(&self, m: usize) -> u64 {
        let run = self.reloc_checkpoint_run_max();
        let r = self.reloc.lock();
        r.zones_of(m)
            .into_iter()
            .filter_map(|z| r.get(z, m).map(|e| e.log_blocks_at_most(run)))
            .sum()
    }

    /// Whether member `m`'s relocation state, with blocks `first..` (`data`, `meta`) of its
    /// zone of `zone` at `generation` relocated too, stays within the one-zone log's
    /// relocation budget (always true for a pool).
    pub(super) fn reloc_fits_budget(
        &self,
        m: usize,
        zone: u32,
        generation: u64,
        inline: &RelocInline,
        data: &[u8],
        meta: &[u8],
    ) -> bool {
        let Some(budget) = self.layout.reloc_budget() else {
            return true;
        };
        let run = self.reloc_checkpoint_run_max();
        let r = self.reloc.lock();
        let others: u64 = r
            .zones_of(m)
            .into_iter()
            .filter(|z| *z != zone)
            .filter_map(|z| r.get(z, m).map(|e| e.log_blocks(run)))
            .sum();
        let mine = match r.get(zone, m) {
            Some(e) if e.generation == generation => {
                let mut e = e.clone();
                e.apply_blocks(inline.first, inline.epoch, data, meta, self.block_size());
                e.log_blocks(run)
            }
            // The zone was reset since: nothing of it is kept.
            _ => 0,
        };
        others + mine <= budget
    }

    /// Reads `data.len() / bs` blocks at offset `off` of member `m`'s zone of logical zone
    /// `zone`, with relocated blocks in place and stale blocks as zeros.
    pub(super) async fn read_member(
        &self,
        m: usize,
        zone: u32,
        off: u64,
        data: &mut [u8],
        meta: &mut [u8],
    ) -> NvmeResult<()> {
        let dev = self.members.get(m).ok_or(NvmeStatus::InternalError)?;
        let (bs, oob) = (self.block_size(), self.oob());
        let lba = self.layout.member_zone_start(zone) + off;
        dev.read(lba, data, (oob > 0).then_some(&mut *meta)).await?;
        if let Some(e) = self.reloc.lock().get(zone, m) {
            e.overlay(off, data, meta, bs, oob);
        }
        Ok(())
    }

    /// The blocks of member `m`'s zone of `zone` that hold valid data, from the start, given
    /// the zone's write pointer on the device.
    pub(super) fn member_valid_wp(&self, m: usize, zone: u32, device_wp: u64) -> u64 {
        match self.reloc.lock().get(zone, m) {
            Some(e) => e.valid_prefix(),
            None => device_wp,
        }
    }

    /// Writes a run of member `m`'s zone of `zone` at offset `off`: the blocks below the
    /// member zone's write pointer (a torn stripe left stale blocks there) to its relocation
    /// log, appended before this returns (`persist`; recovery instead keeps them in memory
    /// for the open's log rewrite), the rest in place, in MDTS-sized commands in order.
    pub(super) async fn write_member_run(
        &self,
        m: usize,
        zone: u32,
        off: u64,
        data: &[u8],
        meta: &[u8],
        persist: bool,
    ) -> NvmeResult<()> {
        let (bs, oob) = (self.block_size(), self.oob());
        let n = (data.len() / bs) as u64;
        if data.len() != n as usize * bs || meta.len() != n as usize * oob {
            return Err(NvmeStatus::InternalError);
        }
        let (device_wp, epoch, generation) = match self.reloc.lock().get(zone, m) {
            Some(e) => (e.device_wp, e.epoch, e.generation),
            None => (0, 0, 0),
        };
        let moved = device_wp.saturating_sub(off).min(n);
        if moved > 0 {
            let (d, md) = (&data[..moved as usize * bs], &meta[..moved as usize * oob]);
            if persist {
                // Each record enters the state as it is appended (`append_reloc_record`),
                // so a collection between two records keeps the first.
                self.log_relocation(m, zone, generation, off, epoch, d, md)
                    .await?;
            } else if let Some(e) = self.reloc.lock().get_mut(zone, m) {
                e.apply_blocks(off, epoch, d, md, bs);
            }
            self.reloc_stats.lock().blocks += moved;
        }
        if moved == n {
            return Ok(());
        }
        let dev = self.members.get(m).ok_or(NvmeStatus::InternalError)?;
        let mdts = u64::from(self.layout.member_geometry().mdts_blocks);
        let start = self.layout.member_zone_start(zone) + off;
        let mut done = moved;
        while done < n {
            let k = mdts.min(n - done);
            let (a, b) = (done as usize, (done + k) as usize);
            let md = (oob > 0).then(|| &meta[a * oob..b * oob]);
            dev.write(start + done, &data[a * bs..b * bs], md, false)
                .await?;
            done += k;
        }
        if let Some(e) = self.reloc.lock().get_mut(zone, m) {
            e.device_wp = e.device_wp.max(off + n);
        }
        Ok(())
    }

    /// Appends the records of relocated blocks `off..` of member `m`'s zone of `zone` to the
    /// member's log, in records of at most one stripe unit.
    #[allow(clippy::too_many_arguments)]
    async fn log_relocation(
        &self,
        m: usize,
        zone: u32,
        generation: u64,
        off: u64,
        epoch: u64,
        data: &[u8],
        meta: &[u8],
    ) -> NvmeResult<()> {
        let (bs, oob) = (self.block_size(), self.oob());
        let n = (data.len() / bs) as u64;
        let run = self.reloc_run_max();
        let mut done = 0u64;
        while done < n {
            let k = run.min(n - done);
            let (a, b) = (done as usize, (done + k) as usize);
            let inline = RelocInline {
                member: m as u32,
                kind: RelocKind::Blocks,
                first: off + done,
                end: off + done + k,
                epoch,
            };
            let (d, md) = (&data[a * bs..b * bs], &meta[a * oob..b * oob]);
            self.append_reloc_record(m, zone, generation, inline, d, md)
                .await?;
            self.reloc_stats.lock().records += 1;
            done += k;
        }
        Ok(())
    }

    /// Bulk blocks of one relocation record: a stripe unit, and fewer than the member's
    /// transfer limit with the header block.
    pub(super) fn reloc_run_max(&self) -> u64 {
        let mdts = u64::from(self.layout.member_geometry().mdts_blocks);
        self.layout.su_blocks().min(mdts.saturating_sub(1)).max(1)
    }

    /// Bulk blocks of one relocation record a collection writes: runs of relocated blocks
    /// are not cut at stripe units there, only below the member's transfer limit with the
    /// header block (fewer headers in the log: a torn unit's neighbours share one).
    pub(super) fn reloc_checkpoint_run_max(&self) -> u64 {
        let mdts = u64::from(self.layout.member_geometry().mdts_blocks);
        mdts.saturating_sub(1).max(1)
    }

    /// Declares member `m`'s blocks of `zone` from `from` to its device write pointer stale
    /// (recovery, after a torn stripe); the open's log rewrite persists the range.
    pub(super) fn declare_stale(
        &self,
        m: usize,
        zone: u32,
        generation: u64,
        device_wp: u64,
        from: u64,
    ) {
        let declared = {
            let mut r = self.reloc.lock();
            let exists = r.get(zone, m).is_some_and(|e| e.generation == generation);
            if !exists && device_wp <= from {
                return;
            }
            let e = r.entry(zone, m, generation);
            e.device_wp = device_wp;
            e.declare_stale(from).is_some()
        };
        if declared {
            self.reloc_stats.lock().stale_ranges += 1;
        }
    }

    /// Records member `m`'s device write pointer of `zone` in its relocation state, if it
    /// has one of generation `generation` (loaded from the logs at open).
    pub(super) fn set_device_wp(&self, m: usize, zone: u32, generation: u64, device_wp: u64) {
        if let Some(e) = self.reloc.lock().get_mut(zone, m) {
            if e.generation == generation {
                e.device_wp = device_wp;
            }
        }
    }

    /// Applies the relocation records read from member `m`'s log and swap zones at open:
    /// those of their zone's current generation, in log order (a record's effect does not
    /// depend on the order; see `crate::reloc`).
    pub(super) fn load_relocations(&self, m: usize, mut records: Vec<RelocRecord>) {
        records.sort_by_key(|r| r.seq);
        let bs = self.block_size();
        let current: Vec<Option<u64>> = records.iter().map(|r| self.generation(r.zone)).collect();
        let mut map = self.reloc.lock();
        for (r, g) in records.iter().zip(current) {
            if g != Some(r.generation) {
                // Its zone was reset since: the blocks belong to contents that are gone.
                continue;
            }
            let e = map.entry(r.zone, m, r.generation);
            match r.inline.kind {
                RelocKind::Stale => e.apply_stale(crate::reloc::StaleRange {
                    first: r.inline.first,
                    end: r.inline.end,
                    epoch: r.inline.epoch,
                }),
                RelocKind::Blocks => {
                    e.apply_blocks(r.inline.first, r.inline.epoch, &r.data, &r.meta, bs)
                }
            }
        }
    }
}
