//! The partial-parity log: for a write that ends inside a stripe, the XOR of the stripe's
//! written prefix is appended to the partial-parity log zone of the member that will hold the
//! stripe's parity (docs/FORMAT.md, "Partial parity"), so a power loss followed by a member
//! failure can still rebuild the acknowledged data of the incomplete stripe.
//!
//! Fault model: a member loses power with a record half written (a prefix of the log zone
//! survives; the last record may be torn: its header CRC or its bulk CRC fails), a member
//! fails (its own log is gone; it held the parity of stripes whose data are all on the
//! others, so nothing is lost), and power may be lost in the middle of a collection. A
//! collection copies the live records to the swap zone (flushed) before it resets the log
//! and writes them back, then resets the swap zone; open reads the union of both zones and
//! keeps the newest record (highest sequence number) of every stripe, so every cut point
//! leaves a complete set in one of the two zones.
//!
//! Lock order: a zone's `ZoneIo` lock, then a member's log lock, then its swap lock, then
//! the `State` lock.

use std::collections::HashMap;

use zns::{Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use super::health::Failed;
use super::reloc::RelocRecord;
use super::RaiznVolume;
use crate::layout::{PARTIAL_PARITY_ZONE, SWAP_ZONE};
use crate::meta::{self, RecordHeader, RecordType, FLAG_CHECKPOINT};
use zns::parity::xor_into;

/// A record's parity blocks and their metadata.
type Bulk = (Vec<u8>, Vec<u8>);

/// A log zone's whole records: partial parity with its offset, relocations with offset and
/// blocks.
struct Parsed {
    pp: Vec<(PpRecord, u64)>,
    relocs: Vec<(RelocRecord, u64, u64)>,
    /// Log fences: (fence, the record's sequence number, offset).
    fences: Vec<(u64, u64, u64)>,
}

/// Where the newest record of one stripe is, in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PpEntry {
    /// The pool zone (0..K, `ArrayLayout::log_zone`) holding it: 0 with one log zone.
    pub pz: u32,
    /// Offset of the header block in the log zone.
    pub off: u64,
    pub seq: u64,
    pub generation: u64,
    /// Data blocks of the stripe the parity covers, from the stripe start.
    pub end: u64,
    /// Parity blocks after the header: `min(su, end)`.
    pub bulk: u64,
}

/// One zone of a member's pool of log zones (K >= 2), in memory.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolZone {
    /// Blocks written: 0 when empty, the zone capacity once closed (finished, or its tail
    /// unknown); only the head zone is appended to.
    pub wp: u64,
    /// Relocation records it holds: (offset, blocks, logical zone, generation, sequence).
    pub relocs: Vec<(u64, u64, u32, u64, u64)>,
    /// Sequence numbers of the whole records open found in it (until open's rewrite).
    pub seqs: Vec<u64>,
}

/// One member's log, behind its async lock.
#[derive(Default)]
pub(crate) struct PpLog {
    /// Blocks written in the log zone (one log zone; the pool keeps its own).
    pub wp: u64,
    /// The pool of log zones (K >= 2; empty until first used or loaded).
    pub pool: Vec<PoolZone>,
    /// The pool zone records are appended to.
    pub head: Option<usize>,
    /// The pool's fence: its records below this sequence number were superseded by an
    /// open's rewrite and never count again (0: none; docs/FORMAT.md, "Log fence").
    pub fence: u64,
    /// Where the fence record is, (pool zone, offset, sequence number): live content,
    /// copied by a collection of its zone. During open, `fence_copies` holds every copy.
    pub fence_at: Option<(usize, u64, u64)>,
    pub fence_copies: Vec<(usize, u64, u64)>,
    /// Sequence number of the last record written on this member (all record types).
    pub seq: u64,
    /// Newest record of every (logical zone, stripe).
    pub index: HashMap<(u32, u64), PpEntry>,
    /// After a collection (K = 1) failed past its log zone's reset: where every record of
    /// the image in the swap zone is (the same offsets as in the log zone), which `index`
    /// takes once that image is back in the log zone (`collect_log`).
    pub swap_index: Option<HashMap<(u32, u64), PpEntry>>,
}

/// Every record of every (logical zone, stripe) of every member's log at open, newest first
/// (a newer record may be unusable: the data it covers can have been lost with the power).
pub(super) type Loaded = Vec<HashMap<(u32, u64), Vec<PpRecord>>>;

/// A record in memory: what collection and open carry from one zone to the other.
#[derive(Clone, Debug)]
pub(crate) struct PpRecord {
    pub zone: u32,
    pub stripe: u64,
    pub generation: u64,
    pub seq: u64,
    pub end: u64,
    pub data: Vec<u8>,
    pub meta: Vec<u8>,
}

/// Counters of the log's work, for tests and status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PpStats {
    /// Records appended by writes.
    pub records: u64,
    /// Collections of a full log (at run time and at open).
    pub collections: u64,
    /// Degraded reads of incomplete stripes answered from a record.
    pub replays: u64,
    /// Writes whose record did not fit even after collection: their stripe is unprotected
    /// until it completes (docs/DESIGN.md).
    pub unprotected: u64,
}

impl RaiznVolume {
    fn log_zone_start(&self, zone: u32) -> Lba {
        self.layout.member_geometry().zone_start(zone)
    }

    /// Logs the partial parity of a stripe whose first `end` data blocks are written:
    /// `recs[j]` (parity unit j, `io::partial_parity_of`) on the member holding parity unit
    /// j, every such member not failed, concurrently. One parity unit per member suffices:
    /// rebuilding L lost data units takes L parity units, and a parity member lost is one
    /// lost unit fewer to rebuild among the data (m = 2: two data units lost leave both
    /// parity members; one data unit and P's member lost leave Q's record).
    pub(super) async fn log_partial_parity(&self, recs: Vec<PpRecord>) -> NvmeResult<()> {
        let Some((zone, stripe)) = recs.first().map(|r| (r.zone, r.stripe)) else {
            return Ok(());
        };
        let failed = self.failed_in(zone);
        let logs = self
            .layout
            .parity_members(stripe)
            .zip(recs)
            .filter(|(m, _)| !failed.contains(*m))
            .map(|(m, rec)| self.log_partial_parity_on(m, rec));
        // A parity member that is gone leaves every data unit of the stripe on a survivor.
        for r in futures::future::join_all(logs).await {
            r?;
        }
        Ok(())
    }

    /// `log_partial_parity` on one member's log.
    async fn log_partial_parity_on(&self, member: usize, mut rec: PpRecord) -> NvmeResult<()> {
        let log_lock = self.pp.get(member).ok_or(NvmeStatus::InternalError)?;
        let mut log = log_lock.lock().await;
        if self.pooled() {
            return match self.pool_append_pp(member, &mut log, rec).await {
                Ok(()) => Ok(()),
                Err(e) => self.note_member_error(member, e),
            };
        }
        let blocks = 1 + (rec.data.len() / self.block_size()) as u64;
        let cap = self.layout.member_geometry().zone_capacity;
        if log.wp + blocks > cap {
            let pending = (rec.zone, rec.stripe, rec.generation);
            if let Err(e) = self.collect_log(member, &mut log, Some(pending)).await {
                return self.note_member_error(member, e);
            }
        }
        if log.wp + blocks > cap {
            self.drop_record(member, &mut log, &rec, "log");
            return Ok(());
        }
        rec.seq = log.seq + 1;
        let off = log.wp;
        match self
            .write_record(member, PARTIAL_PARITY_ZONE, off, &rec, 0)
            .await
        {
            Ok(()) => {}
            Err(e) => {
                // The log's tail is unknown now; the next record collects it first. The
                // stripe's older record, if any, is still valid there and stays in use (a
                // member failing makes all of them moot).
                log.wp = cap;
                return self.note_member_error(member, e);
            }
        }
        log.seq = rec.seq;
        log.wp = off + blocks;
        log.index.insert(
            (rec.zone, rec.stripe),
            entry_of(&rec, 0, off, self.block_size()),
        );
        self.pp_stats.lock().records += 1;
        Ok(())
    }

    /// Writes `rec` (header block, then its parity blocks) at offset `off` of metadata zone
    /// `zone` of `member`.
    async fn write_record(
        &self,
        member: usize,
        zone: u32,
        off: u64,
        rec: &PpRecord,
        flags: u16,
    ) -> NvmeResult<()> {
        let bs = self.block_size();
        let sdb = self.layout.stripe_data_blocks();
        let start = self.geo.zone_start(rec.zone) + rec.stripe * sdb;
        let h = RecordHeader {
            kind: RecordType::PartialParity,
            inline_len: 0,
            start_lba: start,
            end_lba: start + rec.end,
            generation: rec.generation,
            sequence: rec.seq,
            bulk_blocks: (rec.data.len() / bs) as u32,
            bulk_crc: meta::bulk_crc(&rec.data, &rec.meta),
            flags,
        };
        self.write_raw(member, zone, off, &h, &[], &rec.data, &rec.meta)
            .await
    }

    /// Writes a record (header `h` with `inline`, then the bulk `data` with its `meta`) at
    /// offset `off` of metadata zone `zone` of `member`.
    #[allow(clippy::too_many_arguments)]
    async fn write_raw(
        &self,
        member: usize,
        zone: u32,
        off: u64,
        h: &RecordHeader,
        inline: &[u8],
        bulk: &[u8],
        bulk_meta: &[u8],
    ) -> NvmeResult<()> {
        let (bs, oob) = (self.block_size(), self.oob());
        let head = meta::encode_record(h, inline, bs).map_err(|_| NvmeStatus::InternalError)?;
        let mut data = head;
        data.extend_from_slice(bulk);
        let mut md = vec![0u8; oob];
        md.extend_from_slice(bulk_meta);
        let dev = self.tracked.get(member).ok_or(NvmeStatus::InternalError)?;
        // A record is about one logical zone (partial parity or relocated blocks): that
        // zone's FUA writes depend on it (`persist.rs`).
        let about = self.zone_of(h.start_lba)?;
        let mdts = u64::from(self.layout.member_geometry().mdts_blocks);
        let lba = self.log_zone_start(zone) + off;
        let total = (data.len() / bs) as u64;
        let mut done = 0u64;
        while done < total {
            let n = mdts.min(total - done);
            let (a, b) = (done as usize, (done + n) as usize);
            let m = (oob > 0).then(|| &md[a * oob..b * oob]);
            dev.write_for(about, lba + done, &data[a * bs..b * bs], m, false)
                .await?;
            done += n;
        }
        Ok(())
    }

    /// The header of a relocation record of logical zone `zone`.
    fn reloc_header(&self, r: &RelocRecord, flags: u16) -> RecordHeader {
        let start = self.geo.zone_start(r.zone);
        RecordHeader {
            kind: RecordType::Relocated,
            inline_len: meta::RELOC_INLINE_BYTES as u32,
            start_lba: start,
            end_lba: start + self.geo.zone_capacity,
            generation: r.generation,
            sequence: r.seq,
            bulk_blocks: (r.data.len() / self.block_size()) as u32,
            bulk_crc: match r.data.is_empty() {
                true => 0,
                false => meta::bulk_crc(&r.data, &r.meta),
            },
            flags,
        }
    }

    /// The records that restore `member`'s relocation state of every zone (sequence
    /// numbers unset), for a rewrite of its log.
    fn reloc_records_of(&self, member: usize) -> Vec<RelocRecord> {
        let run = self.reloc_checkpoint_run_max();
        let r = self.reloc.lock();
        let mut out = Vec::new();
        for zone in r.zones_of(member) {
            let Some(e) = r.get(zone, member) else {
                continue;
            };
            for (inline, data, meta) in e.records(member as u32, run) {
                out.push(RelocRecord {
                    zone,
                    generation: e.generation,
                    seq: 0,
                    inline,
                    data,
                    meta,
                });
            }
        }
        out
    }

    /// Appends a relocation record of `member`'s zone of `zone` to the member's log; when it
    /// does not fit, the collection writes it (`relocate_by_collection`). Relocated data
    /// cannot be dropped the way partial parity can: only relocated blocks alone exceeding the
    /// log zone refuse the write (Zone Invalid Write).
    pub(super) async fn append_reloc_record(
        &self,
        member: usize,
        zone: u32,
        generation: u64,
        inline: meta::RelocInline,
        data: &[u8],
        bulk_meta: &[u8],
    ) -> NvmeResult<()> {
        let log_lock = self.pp.get(member).ok_or(NvmeStatus::InternalError)?;
        let mut log = log_lock.lock().await;
        let blocks = 1 + (data.len() / self.block_size()) as u64;
        let cap = self.layout.member_geometry().zone_capacity;
        if !self.reloc_fits_budget(member, zone, generation, &inline, data, bulk_meta) {
            // One log zone keeps the room of the active zones' records: relocated blocks
            // past the rest are refused rather than crowding a record out (docs/DESIGN.md,
            // "The one-zone log's active limit").
            self.reloc_stats.lock().refused += 1;
            tracing::warn!(
                member,
                zone,
                budget = self.layout.reloc_budget(),
                "relocation refused: the member's log keeps its room for partial parity"
            );
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if self.pooled() {
            let rec = RelocRecord {
                zone,
                generation,
                seq: 0,
                inline,
                data: data.to_vec(),
                meta: bulk_meta.to_vec(),
            };
            return self.pool_append_reloc(member, &mut log, rec).await;
        }
        if log.wp + blocks > cap {
            return self
                .relocate_by_collection(member, &mut log, zone, generation, inline, data, bulk_meta)
                .await;
        }
        let rec = RelocRecord {
            zone,
            generation,
            seq: log.seq + 1,
            inline,
            data: data.to_vec(),
            meta: bulk_meta.to_vec(),
        };
        let h = self.reloc_header(&rec, 0);
        let off = log.wp;
        let written = self
            .write_raw(
                member,
                PARTIAL_PARITY_ZONE,
                off,
                &h,
                &inline.encode(),
                data,
                bulk_meta,
            )
            .await;
        if let Err(e) = written {
            // The log's tail is unknown now; the next open collects it.
            log.wp = cap;
            return Err(e);
        }
        log.seq = rec.seq;
        log.wp = off + blocks;
        // Into the state before the log lock is released: a collection rewrites the log
        // from the state, and must find this record there.
        if let Some(e) = self.reloc.lock().get_mut(zone, member) {
            if e.generation == generation {
                e.apply_blocks(
                    inline.first,
                    inline.epoch,
                    data,
                    bulk_meta,
                    self.block_size(),
                );
            }
        }
        Ok(())
    }

    /// `append_reloc_record` when the record does not fit the log: the blocks enter the
    /// relocation state first and the collection writes the state (these blocks merged into
    /// the runs beside them) before any partial-parity record, so the relocation is refused
    /// only when relocated blocks alone exceed the log zone. The state is restored when the
    /// collection fails, since the write does (an error here is the caller's to note, as any
    /// error of this member's write).
    #[allow(clippy::too_many_arguments)]
    async fn relocate_by_collection(
        &self,
        member: usize,
        log: &mut PpLog,
        zone: u32,
        generation: u64,
        inline: meta::RelocInline,
        data: &[u8],
        bulk_meta: &[u8],
    ) -> NvmeResult<()> {
        let before = {
            let mut r = self.reloc.lock();
            match r.get_mut(zone, member) {
                Some(e) if e.generation == generation => {
                    let before = e.clone();
                    e.apply_blocks(
                        inline.first,
                        inline.epoch,
                        data,
                        bulk_meta,
                        self.block_size(),
                    );
                    Some(before)
                }
                // The zone was reset since: nothing of its old contents is kept.
                _ => None,
            }
        };
        let collected = self.collect_log(member, log, None).await;
        if let (Err(status), Some(before)) = (collected, before) {
            // The write fails: its blocks are not the zone's.
            tracing::warn!(member, zone, %status, "relocation by collection failed");
            if let Some(e) = self.reloc.lock().get_mut(zone, member) {
                *e = before;
            }
        }
        collected
    }

    /// Whether a record of `zone`'s stripe `stripe` at `generation` may still protect data:
    /// the generation is current and the stripe is not below the one the zone's write
    /// pointer was in when the collection's flush began (`flushed_wps`, per zone). A stripe
    /// past the write pointer's is one a write in flight logged before it completes (the
    /// write pointer moves when it does), so its record is kept: dropping it left the
    /// acknowledged write unprotected. A stripe a write completed after the flush began is
    /// kept too: the flush need not cover that write's units and parity, so the record is
    /// what rebuilds the stripe's durable prefix after a power cut.
    fn pp_live(&self, zone: u32, stripe: u64, generation: u64, flushed_wps: &[u64]) -> bool {
        let sdb = self.layout.stripe_data_blocks();
        let st = self.state.lock();
        let current = st.generations.get(zone as usize).copied();
        st.table.zone(zone).is_some_and(|z| {
            let wp = flushed_wps
                .get(zone as usize)
                .map_or(z.wp, |f| z.wp.min(*f));
            z.state.is_active() && stripe >= wp / sdb
        }) && current == Some(generation)
    }

    /// Every zone's write pointer now: what a flush begun after this covers.
    fn zone_wps(&self) -> Vec<u64> {
        let st = self.state.lock();
        (0..self.geo.zone_count)
            .map(|z| st.table.zone(z).map_or(0, |z| z.wp))
            .collect()
    }

    /// Collects `member`'s log: its live records are rewritten compactly. Every member is
    /// flushed first: a collection keeps only the newest record of a stripe, which may cover
    /// data not yet durable on the other members, and must not outlive the older records
    /// that cover what is. Which stripes are complete is judged by the write pointers from
    /// before the flush: a write completing while it runs is not covered by it. Only the
    /// record of a zone's highest stripe is kept, counting `pending` (zone, stripe,
    /// generation), the record being appended: a record past a stripe was logged by a write
    /// whose member commands, that stripe's parity among them, had all completed, before
    /// this flush began, so the flush makes that stripe complete and durable (docs/DESIGN.md,
    /// "The one-zone log's active limit").
    async fn collect_log(
        &self,
        member: usize,
        log: &mut PpLog,
        pending: Option<(u32, u64, u64)>,
    ) -> NvmeResult<()> {
        {
            // A collection that failed past the log zone's reset left the whole image in
            // the swap zone, and `index` naming only what it had rewritten: settled, the
            // log zone holds that image again, and the index names every record of it.
            let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
            let swap = self.swap.get(member).ok_or(NvmeStatus::InternalError)?;
            let mut unsettled = swap.lock().await;
            super::swap::settle_first(dev.as_ref(), &mut unsettled).await?;
            if let Some(mut index) = log.swap_index.take() {
                // Records appended since are newer.
                index.extend(log.index.drain());
                log.index = index;
            }
        }
        // Each zone's highest stripe with a record of its generation, before the flush.
        let mut highest: HashMap<(u32, u64), u64> = HashMap::new();
        let keys = log
            .index
            .iter()
            .map(|(k, e)| (k.0, k.1, e.generation))
            .chain(pending);
        for (zone, stripe, generation) in keys {
            let h = highest.entry((zone, generation)).or_insert(stripe);
            *h = (*h).max(stripe);
        }
        let flushed_wps = self.zone_wps();
        self.flush_members().await?;
        let mut live = Vec::new();
        let mut entries: Vec<((u32, u64), PpEntry)> =
            log.index.iter().map(|(k, e)| (*k, *e)).collect();
        // In a fixed order, so a run is reproducible (member commands are counted by tests).
        entries.sort_by_key(|(k, _)| *k);
        for ((zone, stripe), e) in entries {
            let passed = highest
                .get(&(zone, e.generation))
                .is_some_and(|h| *h > stripe);
            if !passed && self.pp_live(zone, stripe, e.generation, &flushed_wps) {
                let (data, meta) = self.read_pp_bulk(member, &e).await?;
                live.push(PpRecord {
                    zone,
                    stripe,
                    generation: e.generation,
                    seq: e.seq,
                    end: e.end,
                    data,
                    meta,
                });
            }
        }
        self.rewrite_log(member, log, live).await
    }

    /// Replaces `member`'s log by `records`, through the swap zone: swap reset and written,
    /// flushed; log reset and written, flushed; swap reset. Records get new sequence numbers.
    /// Relocated blocks go first (they are data); the partial-parity records take the room
    /// left.
    pub(super) async fn rewrite_log(
        &self,
        member: usize,
        log: &mut PpLog,
        mut records: Vec<PpRecord>,
    ) -> NvmeResult<()> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let swap = self.swap.get(member).ok_or(NvmeStatus::InternalError)?;
        let _counted = super::CollectionInFlight::new(&self.meta_stats);
        let mut unsettled = swap.lock().await;
        super::swap::settle_first(dev.as_ref(), &mut unsettled).await?;
        records.sort_by_key(|r| (r.zone, r.stripe));
        let mut relocs = self.reloc_records_of(member);
        for r in relocs.iter_mut() {
            log.seq += 1;
            r.seq = log.seq;
        }
        for r in records.iter_mut() {
            log.seq += 1;
            r.seq = log.seq;
        }
        let bs = self.block_size();
        let cap = self.layout.member_geometry().zone_capacity;
        // Relocated blocks are data: they must all fit; partial parity takes what is left.
        let mut used: u64 = relocs.iter().map(|r| 1 + (r.data.len() / bs) as u64).sum();
        if used > cap {
            tracing::error!(
                member,
                blocks = used,
                "relocated blocks do not fit the log zone"
            );
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        let before = records.len();
        records.retain(|r| {
            used += 1 + (r.data.len() / bs) as u64;
            used <= cap
        });
        if records.len() < before {
            self.pp_stats.lock().unprotected += (before - records.len()) as u64;
            tracing::warn!(member, dropped = before - records.len(),
                "partial-parity log too small for every live record; those stripes are unprotected until complete");
        }
        // Until the log zone holds the new image again its tail is unknown: a failure
        // below leaves the next record to collect first.
        log.wp = cap;
        // Where every record of the new image is (the same offsets in both zones).
        let mut fresh = HashMap::new();
        for zone in [SWAP_ZONE, PARTIAL_PARITY_ZONE] {
            let reset = dev
                .zone_mgmt(ZoneAction::Reset, self.log_zone_start(zone), false)
                .await;
            if zone == PARTIAL_PARITY_ZONE {
                // Only now does `index` stop naming what the log zone holds: before this
                // reset a failure leaves the old records (and `index`) in use. From here
                // `index` names what is rewritten, `swap_index` the whole image. A reset
                // that reports an error may still have been done: the zone says which.
                let done = match reset {
                    Ok(()) => Some(true),
                    Err(_) => self.log_zone_empty(dev.as_ref(), zone).await,
                };
                match done {
                    Some(true) => {
                        log.index.clear();
                        log.swap_index = Some(fresh.clone());
                    }
                    Some(false) => {}
                    None => {
                        // Neither index can be trusted: no record rather than a wrong one.
                        tracing::warn!(member, "partial-parity log state unknown after a failed reset; its stripes are unprotected until the next collection");
                        log.index.clear();
                    }
                }
            }
            reset?;
            let mut off = 0u64;
            for r in &relocs {
                let h = self.reloc_header(r, FLAG_CHECKPOINT);
                self.write_raw(member, zone, off, &h, &r.inline.encode(), &r.data, &r.meta)
                    .await?;
                off += 1 + (r.data.len() / bs) as u64;
            }
            for r in &records {
                self.write_record(member, zone, off, r, FLAG_CHECKPOINT)
                    .await?;
                let e = entry_of(r, 0, off, bs);
                if zone == SWAP_ZONE {
                    fresh.insert((r.zone, r.stripe), e);
                } else {
                    log.index.insert((r.zone, r.stripe), e);
                }
                off += 1 + (r.data.len() / bs) as u64;
            }
            dev.flush().await?;
            // The swap zone holds the whole image until the log zone holds it again.
            *unsettled = zone == SWAP_ZONE;
            if zone == PARTIAL_PARITY_ZONE {
                log.wp = off;
                log.swap_index = None;
            }
        }
        dev.zone_mgmt(ZoneAction::Reset, self.log_zone_start(SWAP_ZONE), false)
            .await?;
        self.pp_stats.lock().collections += 1;
        Ok(())
    }

    /// Whether metadata zone `zone` of `dev` is empty; None when the report fails.
    async fn log_zone_empty(&self, dev: &dyn ZonedDevice, zone: u32) -> Option<bool> {
        let report = dev
            .report_zones(self.log_zone_start(zone), ReportFilter::All, false, 1)
            .await
            .ok()?;
        Some(report.zones.first()?.state == ZoneState::Empty)
    }

    /// Reads the parity blocks of a record.
    async fn read_pp_bulk(&self, member: usize, e: &PpEntry) -> NvmeResult<(Vec<u8>, Vec<u8>)> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let lba = self.log_zone_start(self.layout.log_zone(e.pz)) + e.off + 1;
        super::read_run(dev.as_ref(), lba, e.bulk).await
    }

    /// Every valid record of metadata zone `zone` of `member`, in log order; a torn record
    /// ends the log. Records of other types are corruption here.
    pub(super) async fn scan_log(
        &self,
        member: usize,
        zone: u32,
    ) -> NvmeResult<(Vec<PpRecord>, Vec<RelocRecord>)> {
        let (p, _, _) = self.scan_log_at(member, zone).await?;
        Ok((
            p.pp.into_iter().map(|(r, _)| r).collect(),
            p.relocs.into_iter().map(|(r, _, _)| r).collect(),
        ))
    }

    /// `scan_log` with where every record is, the zone's write pointer (its capacity when
    /// Full) and whether the zone is Full.
    async fn scan_log_at(&self, member: usize, zone: u32) -> NvmeResult<(Parsed, u64, bool)> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let start = self.log_zone_start(zone);
        let report = dev.report_zones(start, ReportFilter::All, true, 1).await?;
        let desc = report.zones.first().ok_or(NvmeStatus::InternalError)?;
        let wp = match desc.state {
            ZoneState::Full => self.layout.member_geometry().zone_capacity,
            _ => desc.wp.saturating_sub(start),
        };
        let (data, md) = super::read_run(dev.as_ref(), start, wp).await?;
        let full = desc.state == ZoneState::Full;
        Ok((self.parse_log(member, &data, &md, wp), wp, full))
    }

    /// Parses `member`'s log image of `wp` blocks: its partial-parity and relocation
    /// records; stops at the first record that is not whole.
    fn parse_log(&self, member: usize, data: &[u8], md: &[u8], wp: u64) -> Parsed {
        let (bs, oob) = (self.block_size(), self.oob());
        let sdb = self.layout.stripe_data_blocks();
        let mut out = Vec::new();
        let mut relocs = Vec::new();
        let mut fences = Vec::new();
        let mut at = 0u64;
        while at < wp {
            let a = at as usize;
            let Ok((h, inline)) = meta::decode_record(&data[a * bs..(a + 1) * bs]) else {
                break;
            };
            let bulk = u64::from(h.bulk_blocks);
            let ours = matches!(
                h.kind,
                RecordType::PartialParity | RecordType::Relocated | RecordType::LogFence
            );
            if !ours || at + 1 + bulk > wp {
                break;
            }
            if h.kind == RecordType::LogFence {
                let Ok(f) = meta::LogFence::decode(inline, h.sequence) else {
                    break;
                };
                fences.push((f.fence, h.sequence, at));
                at += 1;
                continue;
            }
            let (b0, b1) = (a + 1, a + 1 + bulk as usize);
            let (bd, bm) = (&data[b0 * bs..b1 * bs], &md[b0 * oob..b1 * oob]);
            let crc = match bulk {
                0 => 0,
                _ => meta::bulk_crc(bd, bm),
            };
            if crc != h.bulk_crc {
                break;
            }
            let Some(zone) = self.geo.zone_of(h.start_lba) else {
                break;
            };
            let within = h.start_lba - self.geo.zone_start(zone);
            if h.kind == RecordType::Relocated {
                let Some(r) = self.parse_reloc(member, zone, &h, inline, bd, bm) else {
                    break;
                };
                relocs.push((r, at, 1 + bulk));
                at += 1 + bulk;
                continue;
            }
            let end = h.end_lba - h.start_lba;
            if !within.is_multiple_of(sdb) || end == 0 || end >= sdb || bulk != self.pp_bulk(end) {
                break;
            }
            let r = PpRecord {
                zone,
                stripe: within / sdb,
                generation: h.generation,
                seq: h.sequence,
                end,
                data: bd.to_vec(),
                meta: bm.to_vec(),
            };
            out.push((r, at));
            at += 1 + bulk;
        }
        Parsed {
            pp: out,
            relocs,
            fences,
        }
    }

    /// A relocation record of `member`'s log, when its fields hold: the LBA range is its
    /// logical zone, the member is the log's, the range fits the member zone.
    fn parse_reloc(
        &self,
        member: usize,
        zone: u32,
        h: &RecordHeader,
        inline: &[u8],
        bulk: &[u8],
        bulk_meta: &[u8],
    ) -> Option<RelocRecord> {
        let start = self.geo.zone_start(zone);
        if h.start_lba != start || h.end_lba != start + self.geo.zone_capacity {
            return None;
        }
        let members = self.layout.members() as u32;
        let cap = self.layout.member_geometry().zone_capacity;
        let inline = meta::RelocInline::decode(inline, h.bulk_blocks, members, cap).ok()?;
        if inline.member as usize != member {
            return None;
        }
        Some(RelocRecord {
            zone,
            generation: h.generation,
            seq: h.sequence,
            inline,
            data: bulk.to_vec(),
            meta: bulk_meta.to_vec(),
        })
    }

    /// Parity blocks of a record covering the first `end` data blocks of its stripe (the
    /// rest of the parity unit is zeros): `min(su, end)` with m = 1. With m = 2 the
    /// metadata part is rounded up to whole 64-byte chunks of the unit's metadata, since a
    /// Reed-Solomon symbol spans two bytes 32 apart in a chunk and the part of a chunk
    /// past `end` may hold parity (`code.rs`); a block is a whole number of chunks.
    pub(super) fn pp_bulk(&self, end: u64) -> u64 {
        let su = self.layout.su_blocks();
        let oob = self.oob() as u64;
        if self.layout.parity() == 1 || oob == 0 {
            return su.min(end);
        }
        let meta_bytes = (end * oob).div_ceil(64) * 64;
        su.min(meta_bytes.div_ceil(oob).max(end))
    }

    /// The newest records of `zone`'s stripe `s` of the zone's current generation that
    /// cover `need` data blocks, from the logs of the stripe's parity members not failed:
    /// (parity unit j, member, entry, its parity blocks), P first. Each is read under its
    /// log's lock, so no collection moves it meanwhile.
    async fn pp_entries(
        &self,
        zone: u32,
        s: u64,
        need: u64,
    ) -> NvmeResult<Vec<(u32, usize, PpEntry, Bulk)>> {
        let Some(generation) = self.generation(zone) else {
            return Ok(Vec::new());
        };
        let failed = self.failed_in(zone);
        let valid = |e: &PpEntry| e.generation == generation && need <= e.end;
        let mut out = Vec::new();
        for (j, pm) in (0..).zip(self.layout.parity_members(s)) {
            if failed.contains(pm) {
                continue;
            }
            let Some(log) = self.pp.get(pm) else {
                continue;
            };
            let log = log.lock().await;
            if let Some(e) = log.index.get(&(zone, s)).copied().filter(valid) {
                out.push((j, pm, e, self.read_pp_bulk(pm, &e).await?));
                continue;
            }
            // A K = 1 rewrite that failed past its log zone's reset: the record may be only
            // in the image the swap zone holds (until a collection settles it home, at the
            // same offset).
            let Some(e) = log
                .swap_index
                .as_ref()
                .and_then(|i| i.get(&(zone, s)).copied())
            else {
                continue;
            };
            if !valid(&e) {
                continue;
            }
            let swap = self.swap.get(pm).ok_or(NvmeStatus::InternalError)?;
            let unsettled = swap.lock().await;
            let at = if *unsettled {
                SWAP_ZONE
            } else {
                PARTIAL_PARITY_ZONE
            };
            let dev = self.members.get(pm).ok_or(NvmeStatus::InternalError)?;
            let lba = self.log_zone_start(at) + e.off + 1;
            out.push((j, pm, e, super::read_run(dev.as_ref(), lba, e.bulk).await?));
        }
        Ok(out)
    }

    /// Rebuilds `k` blocks at offset `cur` of `zone` (within one data unit of an incomplete
    /// stripe) from the stripe's newest partial parity and the other units it covers.
    pub(super) async fn reconstruct_from_pp(
        &self,
        zone: u32,
        cur: u64,
        k: u64,
        data: &mut [u8],
        meta: &mut [u8],
    ) -> NvmeResult<()> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (bs, oob) = (self.block_size(), self.oob());
        let s = cur / sdb;
        let unit = (cur % sdb) / su;
        let x0 = cur % su;
        let mut entries = self.pp_entries(zone, s, unit * su + x0 + k).await?;
        if l.parity() > 1 {
            return self
                .reconstruct_from_pp_rs(zone, cur, entries, data, meta)
                .await;
        }
        if entries.is_empty() {
            return Err(NvmeStatus::UnrecoveredReadError);
        }
        let (_, _, e, (pd, pmeta)) = entries.swap_remove(0);
        let (a, b) = (x0 as usize, (x0 + k) as usize);
        data.copy_from_slice(&pd[a * bs..b * bs]);
        meta.copy_from_slice(&pmeta[a * oob..b * oob]);
        for other in (0..l.data_units()).filter(|u| *u != unit) {
            // Blocks x of unit `other` are in the parity when other * su + x < end.
            let covered = e.end.saturating_sub(other * su + x0).min(k);
            if covered == 0 {
                continue;
            }
            let m = l.data_member(s, other);
            let c = covered as usize;
            let mut d = vec![0u8; c * bs];
            let mut md = vec![0u8; c * oob];
            self.read_member(m, zone, s * su + x0, &mut d, &mut md)
                .await?;
            xor_into(&mut data[..c * bs], &d);
            xor_into(&mut meta[..c * oob], &md);
        }
        self.pp_stats.lock().replays += 1;
        Ok(())
    }

    /// `reconstruct_from_pp` with m = 2: the stripe's units below a record's end as they were
    /// when the records were computed (zeros after), from the members not failed, with the
    /// parity units of the records of that end (each zero-extended to a whole unit), decoded
    /// by Reed-Solomon; the unit holding `cur` is cut out. The records of the newest end
    /// are tried first, then those of older ends (two logs may differ when a write's record
    /// reached one of them only).
    async fn reconstruct_from_pp_rs(
        &self,
        zone: u32,
        cur: u64,
        entries: Vec<(u32, usize, PpEntry, Bulk)>,
        data: &mut [u8],
        meta: &mut [u8],
    ) -> NvmeResult<()> {
        let mut ends: Vec<u64> = entries.iter().map(|(_, _, e, _)| e.end).collect();
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends.dedup();
        for end in ends {
            let parity: Vec<(u32, Bulk)> = entries
                .iter()
                .filter(|(_, _, e, _)| e.end == end)
                .map(|(j, _, _, b)| (*j, b.clone()))
                .collect();
            if self
                .decode_partial_stripe(zone, cur, end, &parity, data, meta)
                .await?
            {
                self.pp_stats.lock().replays += 1;
                return Ok(());
            }
        }
        Err(NvmeStatus::UnrecoveredReadError)
    }

    /// Decodes the unit holding `cur` of `zone`'s incomplete stripe from partial parity
    /// units `parity` ((j, (data, meta)), cut to their bulk) of records ending at `end` and
    /// the stripe's data units below `end` on the members not failed; false when too few
    /// units are left.
    async fn decode_partial_stripe(
        &self,
        zone: u32,
        cur: u64,
        end: u64,
        parity: &[(u32, Bulk)],
        data: &mut [u8],
        meta: &mut [u8],
    ) -> NvmeResult<bool> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (bs, oob) = (self.block_size(), self.oob());
        let (ub, um) = (su as usize * bs, su as usize * oob);
        let s = cur / sdb;
        let unit = (cur % sdb) / su;
        let d = l.data_units() as usize;
        let failed = self.failed_in(zone);
        let mut have: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::with_capacity(d + 2);
        for (j, (pd, pmeta)) in parity {
            let (mut ud, mut umd) = (pd.clone(), pmeta.clone());
            if ud.len() > ub || umd.len() > um {
                return Ok(false);
            }
            ud.resize(ub, 0);
            umd.resize(um, 0);
            have.push((d + *j as usize, ud, umd));
        }
        for k in (0..l.data_units()).filter(|k| *k != unit) {
            let m = l.data_member(s, k);
            let covered = end.saturating_sub(k * su).min(su) as usize;
            let mut ud = vec![0u8; ub];
            let mut umd = vec![0u8; um];
            if covered > 0 {
                if failed.contains(m) {
                    continue;
                }
                let read = self
                    .read_member(
                        m,
                        zone,
                        s * su,
                        &mut ud[..covered * bs],
                        &mut umd[..covered * oob],
                    )
                    .await;
                if let Err(status) = read {
                    self.note_member_error(m, status)?;
                    continue;
                }
            }
            have.push((k as usize, ud, umd));
        }
        let x0 = (cur % su) as usize;
        let rebuilt = l
            .code()
            .rebuild_blocks(&have, unit as usize, x0, (bs, oob), data, meta)?;
        Ok(rebuilt.is_ok())
    }
}

impl RaiznVolume {
    /// Reads every surviving member's log before the zones are recovered: the newest
    /// record of every stripe from the log and swap zones (a collection may have been cut
    /// short), of the zone's current generation only. Recovery caps a failed member's units at what these records cover.
    pub(super) async fn load_logs(&self) -> Result<Loaded, (usize, NvmeStatus)> {
        let n = self.layout.members();
        let failed = self.state.lock().health.failed;
        let mut loaded: Loaded = Vec::new();
        for m in 0..n {
            let mut newest: HashMap<(u32, u64), Vec<PpRecord>> = HashMap::new();
            let mut max_seq = 0;
            if !failed.contains(m) && self.pooled() {
                let (found, seq) = self.load_pool(m).await.map_err(|e| (m, e))?;
                newest = found;
                max_seq = seq;
            } else if !failed.contains(m) {
                let mut relocs = Vec::new();
                for zone in [PARTIAL_PARITY_ZONE, SWAP_ZONE] {
                    let (pp, rel) = self.scan_log(m, zone).await.map_err(|e| (m, e))?;
                    relocs.extend(rel);
                    for r in pp {
                        max_seq = max_seq.max(r.seq);
                        if self.generation(r.zone) != Some(r.generation) {
                            // A record of an earlier generation of its zone: the zone was
                            // reset since, and the record describes contents that are gone.
                            continue;
                        }
                        newest.entry((r.zone, r.stripe)).or_default().push(r);
                    }
                }
                max_seq = relocs.iter().fold(max_seq, |a, r| a.max(r.seq));
                self.load_relocations(m, relocs);
            }
            for records in newest.values_mut() {
                records.sort_by_key(|r| std::cmp::Reverse(r.seq));
            }
            if let Some(log) = self.pp.get(m) {
                log.lock().await.seq = max_seq;
            }
            loaded.push(newest);
        }
        Ok(loaded)
    }

    /// Opens every member's log after the zones are recovered: the loaded record of every
    /// incomplete stripe is replaced by a fresh one computed from the data wherever every
    /// data unit is readable; then every log is rewritten compactly, which also drops a
    /// torn tail.
    pub(super) async fn finish_logs(&self, loaded: Loaded) -> Result<(), (usize, NvmeStatus)> {
        let n = self.layout.members();
        let failed = self.state.lock().health.failed;
        // Zones recovery left empty (reset, or a new generation at mount) hold nothing
        // relocated; the rest keep theirs, which the rewrite below persists.
        let generations = self.state.lock().generations.clone();
        self.reloc
            .lock()
            .retain_current(|z| generations.get(z as usize).copied());
        let mut keep: Vec<Vec<PpRecord>> = vec![Vec::new(); n];
        for zone in 0..self.geo.zone_count {
            for (pm, rec) in self.open_record(zone, failed, &loaded).await {
                if let Some(k) = keep.get_mut(pm) {
                    k.push(rec);
                }
            }
        }
        if !self.pooled() {
            // A rewrite of one log zone keeps one record per stripe and erases the older
            // ones, which cover only what was durable; the new one may cover blocks still in
            // another member's cache (an open no power cut preceded). Every member is flushed
            // first, as a collection at run time flushes those holding anything not durable
            // (docs/DESIGN.md, "Partial parity"). A pool keeps the older records until its
            // fence, written after every member's rewrite has flushed it.
            for (m, dev) in self.members.iter().enumerate() {
                if !failed.contains(m) {
                    dev.flush().await.map_err(|e| (m, e))?;
                }
            }
        }
        let mut fences = Vec::new();
        for (m, records) in keep.into_iter().enumerate() {
            if failed.contains(m) {
                continue;
            }
            let log_lock = self.pp.get(m).ok_or((m, NvmeStatus::InternalError))?;
            let mut log = log_lock.lock().await;
            if self.pooled() {
                let fence = self
                    .open_pool(m, &mut log, records)
                    .await
                    .map_err(|e| (m, e))?;
                fences.push((m, fence));
                continue;
            }
            self.rewrite_log(m, &mut log, records)
                .await
                .map_err(|e| (m, e))?;
        }
        // The fences last, once every member's rewrite is durable, and only when no member
        // failed during the open: an open that starts over without a member must still
        // find the records this one would supersede (its records were computed with that
        // member's units counted).
        if self.state.lock().health.failed != failed {
            return Ok(());
        }
        for (m, fence) in fences {
            let log_lock = self.pp.get(m).ok_or((m, NvmeStatus::InternalError))?;
            let mut log = log_lock.lock().await;
            self.write_fence(m, &mut log, fence)
                .await
                .map_err(|e| (m, e))?;
        }
        Ok(())
    }

    /// The records that must protect `zone`'s incomplete stripe after open, each with the
    /// parity member whose log holds it (parity unit j on the member holding unit j):
    /// computed from the data when every data unit is readable, else the newest loaded ones
    /// that cover the zone's write pointer.
    async fn open_record(
        &self,
        zone: u32,
        failed: Failed,
        loaded: &Loaded,
    ) -> Vec<(usize, PpRecord)> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (z, generation) = {
            let st = self.state.lock();
            match (st.table.zone(zone), st.generations.get(zone as usize)) {
                (Some(z), Some(g)) => (z, *g),
                _ => return Vec::new(),
            }
        };
        if !z.state.is_active() || z.wp.is_multiple_of(sdb) {
            return Vec::new();
        }
        let (s, within) = (z.wp / sdb, z.wp % sdb);
        // The newest loaded record covering `need` blocks of every parity member not failed.
        let loaded_records = |need: u64| -> Vec<(usize, PpRecord)> {
            l.parity_members(s)
                .filter(|pm| !failed.contains(*pm))
                .filter_map(|pm| {
                    let mut r = loaded.get(pm)?.get(&(zone, s))?.first()?.clone();
                    r.generation = generation;
                    (r.end >= need).then_some((pm, r))
                })
                .collect()
        };
        // Only a failed unit holding data below the write pointer needs the loaded records. A
        // failed unit past it holds nothing: the records are computed from the survivors'
        // data like any others, since they may have been lost with the power while the data
        // was not, and once the failed member is replaced they are all that protects the
        // stripe.
        let data_lost = failed
            .as_slice()
            .iter()
            .any(|f| l.unit_of_member(s, *f).is_some_and(|k| k * su < within));
        if data_lost {
            // Recovery capped the write pointer at what these records cover.
            let recs = loaded_records(within);
            if l.parity() == 1 {
                return recs;
            }
            // m = 2: the stripe is decoded from them and every parity member gets a record
            // of it afresh, so both parity units protect it again (a parity member whose
            // own record was lost would otherwise leave it one failure short).
            return match self.decode_open_stripe(zone, s, within, &recs).await {
                Some(buf) => self.fresh_records(zone, s, within, generation, &buf),
                None => recs,
            };
        }
        let (bs, oob) = (self.block_size(), self.oob());
        let mut buf = super::StripeBuffer {
            stripe: s,
            data: vec![0u8; sdb as usize * bs],
            meta: vec![0u8; sdb as usize * oob],
        };
        let w = within as usize;
        let before = self.state.lock().health.failed;
        let read = self
            .read_zone(
                zone,
                s * sdb,
                within,
                &mut buf.data[..w * bs],
                &mut buf.meta[..w * oob],
                false,
            )
            .await;
        if read.is_err() || self.state.lock().health.failed != before {
            // A member failed while the open read the stripe: keep the records it has, even
            // if they cover less than the write pointer, so the open that starts over
            // without the member still finds them (and caps the write pointer by them). A
            // read served degraded is not used either: it rebuilt the member's units from
            // a loaded record, which may cover blocks this open declared stale.
            return loaded_records(0);
        }
        self.fresh_records(zone, s, within, generation, &buf)
    }

    /// The records of every parity member of stripe `s` of `zone` whose first `within`
    /// blocks are in `buf`, computed from it.
    fn fresh_records(
        &self,
        zone: u32,
        s: u64,
        within: u64,
        generation: u64,
        buf: &super::StripeBuffer,
    ) -> Vec<(usize, PpRecord)> {
        let Ok(units) = self.pp_bulk_of(buf, within) else {
            return Vec::new();
        };
        self.layout
            .parity_members(s)
            .zip(units)
            .map(|(pm, (data, meta))| {
                let rec = PpRecord {
                    zone,
                    stripe: s,
                    generation,
                    seq: 0,
                    end: within,
                    data,
                    meta,
                };
                (pm, rec)
            })
            .collect()
    }

    /// Stripe `s` of `zone` (its first `within` blocks, zeros after) at open with data
    /// units lost (m = 2): lost units decoded from the loaded records `recs` (member,
    /// record) of one end, the others read; None when they do not suffice.
    async fn decode_open_stripe(
        &self,
        zone: u32,
        s: u64,
        within: u64,
        recs: &[(usize, PpRecord)],
    ) -> Option<super::StripeBuffer> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (bs, oob) = (self.block_size(), self.oob());
        let end = recs.first()?.1.end;
        let parity: Vec<(u32, Bulk)> = recs
            .iter()
            .filter(|(_, r)| r.end == end)
            .filter_map(|(pm, r)| {
                Some((
                    l.parity_of_member(s, *pm)?,
                    (r.data.clone(), r.meta.clone()),
                ))
            })
            .collect();
        let failed = self.failed_in(zone);
        let mut buf = super::StripeBuffer {
            stripe: s,
            data: vec![0u8; sdb as usize * bs],
            meta: vec![0u8; sdb as usize * oob],
        };
        for k in 0..l.data_units() {
            let covered = within.saturating_sub(k * su).min(su) as usize;
            if covered == 0 {
                continue;
            }
            let a = (k * su) as usize;
            let d = buf.data.get_mut(a * bs..(a + covered) * bs)?;
            let md = buf.meta.get_mut(a * oob..(a + covered) * oob)?;
            let m = l.data_member(s, k);
            if failed.contains(m) {
                let cur = s * sdb + k * su;
                if !self
                    .decode_partial_stripe(zone, cur, end, &parity, d, md)
                    .await
                    .ok()?
                {
                    return None;
                }
            } else {
                self.read_member(m, zone, s * su, d, md).await.ok()?;
            }
        }
        Some(buf)
    }
}

fn entry_of(r: &PpRecord, pz: u32, off: u64, bs: usize) -> PpEntry {
    PpEntry {
        pz,
        off,
        seq: r.seq,
        generation: r.generation,
        end: r.end,
        bulk: (r.data.len() / bs) as u64,
    }
}

/// What a pool collection copies.
#[derive(Clone, Copy)]
enum Moved {
    /// The newest record of a stripe.
    Pp(u64, PpEntry),
    /// A relocation record of a current generation.
    Reloc,
    /// The fence record (its sequence number).
    Fence(u64),
}

/// The pool of log zones (K >= 2; the design, docs/DESIGN.md, "A pool of log zones per member"): records
/// are appended to the head zone; a record that does not fit closes it (finished) and the
/// next empty zone becomes the head; when that leaves no empty zone, the closed zone with
/// the fewest live blocks is collected: its live records are copied as they are (same
/// header, same sequence number) to the fresh head, the member is flushed, and only then
/// the victim is reset. No step resets the only copy of a live record, and a copy is the
/// same record, so open's union of every zone reads the same whichever copies survive.
impl RaiznVolume {
    /// Whether the member logs are pools (K >= 2) rather than one zone collected through
    /// the swap zone.
    pub(super) fn pooled(&self) -> bool {
        self.layout.log_zones() > 1
    }

    fn pool_init(&self, log: &mut PpLog) {
        let k = self.layout.log_zones() as usize;
        if log.pool.len() != k {
            log.pool = vec![PoolZone::default(); k];
            log.head = None;
        }
    }

    /// Makes the head zone hold `blocks` more blocks: rotating (the head finished, the next
    /// empty zone the head) and collecting when no empty zone would remain. False when no
    /// room can be made.
    async fn pool_room(&self, member: usize, log: &mut PpLog, blocks: u64) -> NvmeResult<bool> {
        self.pool_init(log);
        let cap = self.layout.member_geometry().zone_capacity;
        if blocks > cap {
            return Ok(false);
        }
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        for _ in 0..=2 * log.pool.len() {
            if let Some(h) = log.head {
                if log.pool[h].wp + blocks <= cap {
                    return Ok(true);
                }
            }
            if let Some(h) = log.head.take() {
                let wp = log.pool[h].wp;
                if wp > 0 && wp < cap {
                    let start = self.log_zone_start(self.layout.log_zone(h as u32));
                    dev.zone_mgmt(ZoneAction::Finish, start, false).await?;
                }
                if wp > 0 {
                    log.pool[h].wp = cap;
                }
            }
            let empties: Vec<usize> = (0..log.pool.len())
                .filter(|p| log.pool[*p].wp == 0)
                .collect();
            let Some(next) = empties.first().copied() else {
                return Ok(false);
            };
            log.head = Some(next);
            if empties.len() == 1 {
                self.pool_collect(member, log).await?;
            }
        }
        Ok(false)
    }

    /// Blocks of pool zone `p` that are live: newest partial-parity records and relocation
    /// records of current generations.
    fn pool_live(&self, member: usize, log: &PpLog, p: usize) -> u64 {
        let pp: u64 = log
            .index
            .values()
            .filter(|e| e.pz as usize == p)
            .map(|e| 1 + e.bulk)
            .sum();
        let r = self.reloc.lock();
        let rel: u64 = log.pool[p]
            .relocs
            .iter()
            .filter(|(_, _, z, g, _)| r.get(*z, member).is_some_and(|e| e.generation == *g))
            .map(|(_, n, ..)| *n)
            .sum();
        let fence = u64::from(log.fence_at.is_some_and(|(z, ..)| z == p));
        pp + rel + fence
    }

    /// Collects the closed zone with the fewest live blocks into the head (fresh from a
    /// rotation): every member flushed first (as a one-zone collection: the records kept
    /// may cover data the dropped ones do not), live records copied, this member flushed,
    /// the victim reset.
    async fn pool_collect(&self, member: usize, log: &mut PpLog) -> NvmeResult<()> {
        let Some(h) = log.head else {
            return Ok(());
        };
        let cap = self.layout.member_geometry().zone_capacity;
        let victim = (0..log.pool.len())
            .filter(|p| *p != h && log.pool[*p].wp > 0)
            .min_by_key(|p| self.pool_live(member, log, *p));
        let Some(v) = victim else {
            return Ok(());
        };
        let _counted = super::CollectionInFlight::new(&self.meta_stats);
        let flushed_wps = self.zone_wps();
        self.flush_members().await?;
        let mut pp: Vec<((u32, u64), PpEntry)> = log
            .index
            .iter()
            .filter(|(_, e)| e.pz as usize == v)
            .map(|(k, e)| (*k, *e))
            .collect();
        pp.sort_by_key(|(k, _)| *k);
        let mut moves = Vec::new();
        for ((zone, stripe), e) in pp {
            if self.pp_live(zone, stripe, e.generation, &flushed_wps) {
                moves.push((e.off, 1 + e.bulk, Some(zone), Moved::Pp(stripe, e)));
            } else {
                log.index.remove(&(zone, stripe));
            }
        }
        let relocs: Vec<(u64, u64, u32, u64, u64)> = {
            let r = self.reloc.lock();
            log.pool[v]
                .relocs
                .iter()
                .copied()
                .filter(|(_, _, z, g, _)| r.get(*z, member).is_some_and(|e| e.generation == *g))
                .collect()
        };
        for (off, n, zone, ..) in &relocs {
            moves.push((*off, *n, Some(*zone), Moved::Reloc));
        }
        if let Some((_, off, seq)) = log.fence_at.filter(|(z, ..)| *z == v) {
            moves.push((off, 1, None, Moved::Fence(seq)));
        }
        moves.sort_by_key(|(off, ..)| *off);
        let need: u64 = moves.iter().map(|(_, n, ..)| *n).sum();
        if log.pool[h].wp + need > cap {
            tracing::warn!(
                member,
                victim = v,
                need,
                "log pool zone too live to collect"
            );
            return Ok(());
        }
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        for (off, n, about, what) in moves {
            let to = log.pool[h].wp;
            self.pool_copy(member, v, off, n, h, to, about).await?;
            log.pool[h].wp = to + n;
            match (what, about) {
                (Moved::Pp(stripe, e), Some(zone)) => {
                    let moved = PpEntry {
                        pz: h as u32,
                        off: to,
                        ..e
                    };
                    log.index.insert((zone, stripe), moved);
                }
                (Moved::Reloc, Some(zone)) => {
                    if let Some((_, _, _, g, seq)) = relocs.iter().find(|(o, ..)| *o == off) {
                        log.pool[h].relocs.push((to, n, zone, *g, *seq));
                    }
                }
                (Moved::Fence(seq), _) => {
                    log.fence_at = Some((h, to, seq));
                    log.fence_copies.push((h, to, seq));
                }
                _ => {}
            }
        }
        dev.flush().await?;
        let start = self.log_zone_start(self.layout.log_zone(v as u32));
        dev.zone_mgmt(ZoneAction::Reset, start, false).await?;
        log.pool[v] = PoolZone::default();
        log.fence_copies.retain(|(z, ..)| *z != v);
        self.pp_stats.lock().collections += 1;
        Ok(())
    }

    /// Copies `n` blocks (one whole record) from offset `off` of pool zone `from` to offset
    /// `to_off` of pool zone `to`, as they are; the record is about logical zone `about`
    /// (None: a fence, which every zone depends on).
    #[allow(clippy::too_many_arguments)]
    async fn pool_copy(
        &self,
        member: usize,
        from: usize,
        off: u64,
        n: u64,
        to: usize,
        to_off: u64,
        about: Option<u32>,
    ) -> NvmeResult<()> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let tracked = self.tracked.get(member).ok_or(NvmeStatus::InternalError)?;
        let (bs, oob) = (self.block_size(), self.oob());
        let src = self.log_zone_start(self.layout.log_zone(from as u32)) + off;
        let (data, md) = super::read_run(dev.as_ref(), src, n).await?;
        let dst = self.log_zone_start(self.layout.log_zone(to as u32)) + to_off;
        let mdts = u64::from(self.layout.member_geometry().mdts_blocks).max(1);
        let mut done = 0u64;
        while done < n {
            let k = mdts.min(n - done);
            let (a, b) = (done as usize, (done + k) as usize);
            let m = (oob > 0).then(|| &md[a * oob..b * oob]);
            let block = &data[a * bs..b * bs];
            match about {
                Some(zone) => tracked.write_for(zone, dst + done, block, m, false).await?,
                None => tracked.write(dst + done, block, m, false).await?,
            }
            done += k;
        }
        Ok(())
    }

    /// A partial-parity record that no room can be made for is dropped: its stripe is
    /// unprotected until complete (counted and logged).
    fn drop_record(&self, member: usize, log: &mut PpLog, rec: &PpRecord, log_kind: &str) {
        log.index.remove(&(rec.zone, rec.stripe));
        self.pp_stats.lock().unprotected += 1;
        tracing::warn!(
            member,
            zone = rec.zone,
            stripe = rec.stripe,
            "partial-parity {log_kind} full of live records; stripe unprotected until complete"
        );
    }

    /// The head zone, once `blocks` fit there (rotating or collecting as needed); None when
    /// no room can be made.
    async fn pool_head(
        &self,
        member: usize,
        log: &mut PpLog,
        blocks: u64,
    ) -> NvmeResult<Option<usize>> {
        Ok(match self.pool_room(member, log, blocks).await? {
            true => log.head,
            false => None,
        })
    }

    /// Accounts a record `seq` of `blocks` written at `off` of pool zone `h`. A failed write
    /// leaves the head's tail unknown: the zone is closed, never appended to again.
    fn pool_wrote(
        &self,
        log: &mut PpLog,
        h: usize,
        off: u64,
        blocks: u64,
        seq: u64,
        written: NvmeResult<()>,
    ) -> NvmeResult<()> {
        if let Err(e) = written {
            log.pool[h].wp = self.layout.member_geometry().zone_capacity;
            log.head = None;
            return Err(e);
        }
        log.seq = seq;
        log.pool[h].wp = off + blocks;
        Ok(())
    }

    /// Appends a partial-parity record to the pool; dropped (the stripe unprotected until it
    /// completes) only when no room can be made.
    async fn pool_append_pp(
        &self,
        member: usize,
        log: &mut PpLog,
        mut rec: PpRecord,
    ) -> NvmeResult<()> {
        let bs = self.block_size();
        let blocks = 1 + (rec.data.len() / bs) as u64;
        let head = self.pool_head(member, log, blocks).await?;
        let Some(h) = head else {
            self.drop_record(member, log, &rec, "log pool");
            return Ok(());
        };
        rec.seq = log.seq + 1;
        let off = log.pool[h].wp;
        let zone = self.layout.log_zone(h as u32);
        let written = self.write_record(member, zone, off, &rec, 0).await;
        self.pool_wrote(log, h, off, blocks, rec.seq, written)?;
        log.index
            .insert((rec.zone, rec.stripe), entry_of(&rec, h as u32, off, bs));
        self.pp_stats.lock().records += 1;
        Ok(())
    }

    /// Appends a relocation record to the pool and applies it to the relocation state;
    /// refused (Zone Invalid Write) only when no room can be made.
    async fn pool_append_reloc(
        &self,
        member: usize,
        log: &mut PpLog,
        mut rec: RelocRecord,
    ) -> NvmeResult<()> {
        let bs = self.block_size();
        let blocks = 1 + (rec.data.len() / bs) as u64;
        let head = self.pool_head(member, log, blocks).await?;
        let Some(h) = head else {
            tracing::error!(
                member,
                zone = rec.zone,
                blocks,
                "relocated blocks do not fit the log pool"
            );
            return Err(NvmeStatus::ZoneInvalidWrite);
        };
        rec.seq = log.seq + 1;
        let hdr = self.reloc_header(&rec, 0);
        let off = log.pool[h].wp;
        let zone = self.layout.log_zone(h as u32);
        let written = self
            .write_raw(
                member,
                zone,
                off,
                &hdr,
                &rec.inline.encode(),
                &rec.data,
                &rec.meta,
            )
            .await;
        self.pool_wrote(log, h, off, blocks, rec.seq, written)?;
        log.pool[h]
            .relocs
            .push((off, blocks, rec.zone, rec.generation, rec.seq));
        if let Some(e) = self.reloc.lock().get_mut(rec.zone, member) {
            if e.generation == rec.generation {
                e.apply_blocks(rec.inline.first, rec.inline.epoch, &rec.data, &rec.meta, bs);
            }
        }
        Ok(())
    }

    /// Reads `member`'s pool at open: every zone's whole records (their union, the newest
    /// record of a stripe by sequence number) at or above the pool's fence (the highest any
    /// fence record gives: the records below it were superseded by an earlier open's
    /// rewrite), the relocation state, and where each record is (the index of newest
    /// records of current generations, each zone's relocation records and sequence
    /// numbers, the fence record's copies). Returns every such record of a current
    /// generation by stripe, and the highest sequence number.
    async fn load_pool(&self, m: usize) -> NvmeResult<(HashMap<(u32, u64), Vec<PpRecord>>, u64)> {
        let k = self.layout.log_zones();
        let cap = self.layout.member_geometry().zone_capacity;
        let mut newest: HashMap<(u32, u64), Vec<PpRecord>> = HashMap::new();
        let mut index: HashMap<(u32, u64), PpEntry> = HashMap::new();
        let mut pool = vec![PoolZone::default(); k as usize];
        let mut relocs = Vec::new();
        let mut max_seq = 0;
        let bs = self.block_size();
        let mut scanned = Vec::with_capacity(k as usize);
        for p in 0..k {
            let (parsed, wp, full) = self.scan_log_at(m, self.layout.log_zone(p)).await?;
            pool[p as usize].wp = if full { cap } else { wp };
            scanned.push(parsed);
        }
        let fence = scanned
            .iter()
            .flat_map(|p| p.fences.iter().map(|(f, ..)| *f))
            .max()
            .unwrap_or(0);
        let mut fence_copies = Vec::new();
        for (p, parsed) in scanned.into_iter().enumerate() {
            let z = &mut pool[p];
            for (f, seq, off) in parsed.fences {
                max_seq = max_seq.max(seq);
                z.seqs.push(seq);
                if f == fence {
                    fence_copies.push((p, off, seq));
                }
            }
            for (r, off) in parsed.pp {
                max_seq = max_seq.max(r.seq);
                z.seqs.push(r.seq);
                if r.seq < fence || self.generation(r.zone) != Some(r.generation) {
                    // Superseded by an open's rewrite, or of an earlier generation of its
                    // zone (reset since: it describes contents that are gone).
                    continue;
                }
                let newer = index.get(&(r.zone, r.stripe)).is_none_or(|e| e.seq < r.seq);
                if newer {
                    index.insert((r.zone, r.stripe), entry_of(&r, p as u32, off, bs));
                }
                newest.entry((r.zone, r.stripe)).or_default().push(r);
            }
            for (r, off, n) in parsed.relocs {
                max_seq = max_seq.max(r.seq);
                z.seqs.push(r.seq);
                if r.seq < fence {
                    continue;
                }
                z.relocs.push((off, n, r.zone, r.generation, r.seq));
                relocs.push(r);
            }
        }
        self.load_relocations(m, relocs);
        let log_lock = self.pp.get(m).ok_or(NvmeStatus::InternalError)?;
        let mut log = log_lock.lock().await;
        log.pool = pool;
        log.head = None;
        log.index = index;
        log.fence = fence;
        log.fence_at = fence_copies.iter().copied().max_by_key(|(_, _, seq)| *seq);
        log.fence_copies = fence_copies;
        Ok((newest, max_seq))
    }

    /// Open's rewrite of `member`'s pool: with no empty zone (a cut during a collection),
    /// a zone every record of which has a copy in another zone is reset; every zone not
    /// empty is closed (finished: its tail may be torn); then `records` (the records that
    /// protect the incomplete stripes now) are appended to a new head, rotating and
    /// collecting as at run time.
    async fn open_pool(
        &self,
        member: usize,
        log: &mut PpLog,
        records: Vec<PpRecord>,
    ) -> NvmeResult<u64> {
        self.pool_init(log);
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let cap = self.layout.member_geometry().zone_capacity;
        if log.pool.iter().all(|z| z.wp > 0) {
            let copied = |p: usize| {
                log.pool[p]
                    .seqs
                    .iter()
                    .all(|s| (0..log.pool.len()).any(|q| q != p && log.pool[q].seqs.contains(s)))
            };
            if let Some(p) = (0..log.pool.len()).find(|p| copied(*p)) {
                let start = self.log_zone_start(self.layout.log_zone(p as u32));
                dev.zone_mgmt(ZoneAction::Reset, start, false).await?;
                let moved: Vec<(u32, u64)> = log
                    .index
                    .iter()
                    .filter(|(_, e)| e.pz as usize == p)
                    .map(|(k, _)| *k)
                    .collect();
                log.pool[p] = PoolZone::default();
                // Their copies are elsewhere; the records appended below replace them.
                for k in moved {
                    log.index.remove(&k);
                }
                // The fence record too: its copy in another zone is the live one.
                log.fence_copies.retain(|(z, ..)| *z != p);
                if log.fence_at.is_some_and(|(z, ..)| z == p) {
                    log.fence_at = log.fence_copies.first().copied();
                }
            } else {
                tracing::warn!(member, "log pool has no empty zone at open");
            }
        }
        for p in 0..log.pool.len() {
            let wp = log.pool[p].wp;
            if wp > 0 && wp < cap {
                let start = self.log_zone_start(self.layout.log_zone(p as u32));
                dev.zone_mgmt(ZoneAction::Finish, start, false).await?;
            }
            if wp > 0 {
                log.pool[p].wp = cap;
            }
            log.pool[p].seqs = Vec::new();
        }
        log.head = None;
        // The relocation state (with the stale ranges recovery declared) in full, flagged
        // checkpoint: once written, the older relocation records are superseded (a
        // collection flushes the member before it resets their zone).
        let first_new = log.seq + 1;
        for mut r in self.reloc_records_of(member) {
            let blocks = 1 + (r.data.len() / self.block_size()) as u64;
            if !self.pool_room(member, log, blocks).await? {
                tracing::error!(member, "relocation state does not fit the log pool");
                return Err(NvmeStatus::ZoneInvalidWrite);
            }
            let h = log.head.ok_or(NvmeStatus::InternalError)?;
            r.seq = log.seq + 1;
            let hdr = self.reloc_header(&r, FLAG_CHECKPOINT);
            let off = log.pool[h].wp;
            let zone = self.layout.log_zone(h as u32);
            self.write_raw(
                member,
                zone,
                off,
                &hdr,
                &r.inline.encode(),
                &r.data,
                &r.meta,
            )
            .await?;
            log.seq = r.seq;
            log.pool[h].wp = off + blocks;
            log.pool[h]
                .relocs
                .push((off, blocks, r.zone, r.generation, r.seq));
        }
        // By sequence number: a collection while these were written moved some of them
        // (copies keep their sequence numbers).
        for z in log.pool.iter_mut() {
            z.relocs.retain(|(.., seq)| *seq >= first_new);
        }
        let mut records = records;
        records.sort_by_key(|r| (r.zone, r.stripe));
        for r in records {
            self.pool_append_pp(member, log, r).await?;
        }
        // Durable before the volume takes writes: the stale ranges recovery declared are in
        // no other record. And before the fence, which supersedes every older record.
        dev.flush().await?;
        Ok(first_new)
    }

    /// Appends a fence record (`fence`: the first sequence number of the open's rewrite,
    /// which is durable) to `member`'s pool and makes it durable; then forgets every record
    /// below it (in memory; a collection drops them on the device).
    async fn write_fence(&self, member: usize, log: &mut PpLog, fence: u64) -> NvmeResult<()> {
        if !self.pool_room(member, log, 1).await? {
            tracing::error!(member, "no room for the fence in the log pool");
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        let h = log.head.ok_or(NvmeStatus::InternalError)?;
        let seq = log.seq + 1;
        let hdr = RecordHeader {
            kind: RecordType::LogFence,
            inline_len: meta::FENCE_INLINE_BYTES as u32,
            start_lba: 0,
            end_lba: 0,
            generation: 0,
            sequence: seq,
            bulk_blocks: 0,
            bulk_crc: 0,
            flags: 0,
        };
        let inline = meta::LogFence { fence }.encode();
        let block = meta::encode_record(&hdr, &inline, self.block_size())
            .map_err(|_| NvmeStatus::InternalError)?;
        let md = vec![0u8; self.oob()];
        let off = log.pool[h].wp;
        let lba = self.log_zone_start(self.layout.log_zone(h as u32)) + off;
        let dev = self.tracked.get(member).ok_or(NvmeStatus::InternalError)?;
        let written = dev
            .write(lba, &block, (self.oob() > 0).then_some(&md[..]), false)
            .await;
        if let Err(e) = written {
            log.pool[h].wp = self.layout.member_geometry().zone_capacity;
            log.head = None;
            return Err(e);
        }
        log.seq = seq;
        log.pool[h].wp = off + 1;
        dev.flush().await?;
        log.fence = fence;
        log.fence_at = Some((h, off, seq));
        log.fence_copies.clear();
        log.index.retain(|_, e| e.seq >= fence);
        for z in log.pool.iter_mut() {
            z.relocs.retain(|(.., s)| *s >= fence);
        }
        Ok(())
    }
}
