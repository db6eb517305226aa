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

use zns::{Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneState};

use super::health::Failed;
use super::reloc::RelocRecord;
use super::RaiznVolume;
use crate::layout::{PARTIAL_PARITY_ZONE, SWAP_ZONE};
use crate::meta::{self, RecordHeader, RecordType, FLAG_CHECKPOINT};
use zns::parity::xor_into;

/// A record's parity blocks and their metadata.
type Bulk = (Vec<u8>, Vec<u8>);

/// Where the newest record of one stripe is, in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PpEntry {
    /// Offset of the header block in the log zone.
    pub off: u64,
    pub seq: u64,
    pub generation: u64,
    /// Data blocks of the stripe the parity covers, from the stripe start.
    pub end: u64,
    /// Parity blocks after the header: `min(su, end)`.
    pub bulk: u64,
}

/// One member's log, behind its async lock.
#[derive(Default)]
pub(crate) struct PpLog {
    /// Blocks written in the log zone.
    pub wp: u64,
    /// Sequence number of the last record written on this member (all record types).
    pub seq: u64,
    /// Newest record of every (logical zone, stripe).
    pub index: HashMap<(u32, u64), PpEntry>,
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
        let blocks = 1 + (rec.data.len() / self.block_size()) as u64;
        let cap = self.layout.member_geometry().zone_capacity;
        if log.wp + blocks > cap {
            if let Err(e) = self.collect_log(member, &mut log).await {
                return self.note_member_error(member, e);
            }
        }
        if log.wp + blocks > cap {
            log.index.remove(&(rec.zone, rec.stripe));
            self.pp_stats.lock().unprotected += 1;
            tracing::warn!(
                member,
                zone = rec.zone,
                stripe = rec.stripe,
                "partial-parity log full of live records; stripe unprotected until complete"
            );
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
            entry_of(&rec, off, self.block_size()),
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
        let collected = self.collect_log(member, log).await;
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
    /// before the flush: a write completing while it runs is not covered by it.
    async fn collect_log(&self, member: usize, log: &mut PpLog) -> NvmeResult<()> {
        let flushed_wps = self.zone_wps();
        self.flush_members().await?;
        let mut live = Vec::new();
        let mut entries: Vec<((u32, u64), PpEntry)> =
            log.index.iter().map(|(k, e)| (*k, *e)).collect();
        // In a fixed order, so a run is reproducible (member commands are counted by tests).
        entries.sort_by_key(|(k, _)| *k);
        for ((zone, stripe), e) in entries {
            if self.pp_live(zone, stripe, e.generation, &flushed_wps) {
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
        let _swap = swap.lock().await;
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
        for zone in [SWAP_ZONE, PARTIAL_PARITY_ZONE] {
            dev.zone_mgmt(ZoneAction::Reset, self.log_zone_start(zone), false)
                .await?;
            let mut off = 0u64;
            log.index.clear();
            for r in &relocs {
                let h = self.reloc_header(r, FLAG_CHECKPOINT);
                self.write_raw(member, zone, off, &h, &r.inline.encode(), &r.data, &r.meta)
                    .await?;
                off += 1 + (r.data.len() / bs) as u64;
            }
            for r in &records {
                self.write_record(member, zone, off, r, FLAG_CHECKPOINT)
                    .await?;
                log.index.insert((r.zone, r.stripe), entry_of(r, off, bs));
                off += 1 + (r.data.len() / bs) as u64;
            }
            dev.flush().await?;
            log.wp = off;
        }
        dev.zone_mgmt(ZoneAction::Reset, self.log_zone_start(SWAP_ZONE), false)
            .await?;
        self.pp_stats.lock().collections += 1;
        Ok(())
    }

    /// Reads the parity blocks of a record.
    async fn read_pp_bulk(&self, member: usize, e: &PpEntry) -> NvmeResult<(Vec<u8>, Vec<u8>)> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let lba = self.log_zone_start(PARTIAL_PARITY_ZONE) + e.off + 1;
        super::read_run(dev.as_ref(), lba, e.bulk).await
    }

    /// Every valid record of metadata zone `zone` of `member`, in log order; a torn record
    /// ends the log. Records of other types are corruption here.
    pub(super) async fn scan_log(
        &self,
        member: usize,
        zone: u32,
    ) -> NvmeResult<(Vec<PpRecord>, Vec<RelocRecord>)> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let start = self.log_zone_start(zone);
        let report = dev.report_zones(start, ReportFilter::All, true, 1).await?;
        let desc = report.zones.first().ok_or(NvmeStatus::InternalError)?;
        let wp = match desc.state {
            ZoneState::Full => self.layout.member_geometry().zone_capacity,
            _ => desc.wp.saturating_sub(start),
        };
        let (data, md) = super::read_run(dev.as_ref(), start, wp).await?;
        Ok(self.parse_log(member, &data, &md, wp))
    }

    /// Parses `member`'s log image of `wp` blocks: its partial-parity and relocation
    /// records; stops at the first record that is not whole.
    fn parse_log(
        &self,
        member: usize,
        data: &[u8],
        md: &[u8],
        wp: u64,
    ) -> (Vec<PpRecord>, Vec<RelocRecord>) {
        let (bs, oob) = (self.block_size(), self.oob());
        let sdb = self.layout.stripe_data_blocks();
        let mut out = Vec::new();
        let mut relocs = Vec::new();
        let mut at = 0u64;
        while at < wp {
            let a = at as usize;
            let Ok((h, inline)) = meta::decode_record(&data[a * bs..(a + 1) * bs]) else {
                break;
            };
            let bulk = u64::from(h.bulk_blocks);
            let ours = matches!(h.kind, RecordType::PartialParity | RecordType::Relocated);
            if !ours || at + 1 + bulk > wp {
                break;
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
                relocs.push(r);
                at += 1 + bulk;
                continue;
            }
            let end = h.end_lba - h.start_lba;
            if !within.is_multiple_of(sdb) || end == 0 || end >= sdb || bulk != self.pp_bulk(end) {
                break;
            }
            out.push(PpRecord {
                zone,
                stripe: within / sdb,
                generation: h.generation,
                seq: h.sequence,
                end,
                data: bd.to_vec(),
                meta: bm.to_vec(),
            });
            at += 1 + bulk;
        }
        (out, relocs)
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
    /// (parity unit j, member, entry), P first.
    async fn pp_entries(&self, zone: u32, s: u64, need: u64) -> Vec<(u32, usize, PpEntry)> {
        let Some(generation) = self.generation(zone) else {
            return Vec::new();
        };
        let failed = self.failed_in(zone);
        let mut out = Vec::new();
        for (j, pm) in (0..).zip(self.layout.parity_members(s)) {
            if failed.contains(pm) {
                continue;
            }
            let Some(log) = self.pp.get(pm) else {
                continue;
            };
            let e = log.lock().await.index.get(&(zone, s)).copied();
            if let Some(e) = e.filter(|e| e.generation == generation && need <= e.end) {
                out.push((j, pm, e));
            }
        }
        out
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
        let entries = self.pp_entries(zone, s, unit * su + x0 + k).await;
        if l.parity() > 1 {
            return self
                .reconstruct_from_pp_rs(zone, cur, entries, data, meta)
                .await;
        }
        let Some((_, pm, e)) = entries.first().copied() else {
            return Err(NvmeStatus::UnrecoveredReadError);
        };
        let (pd, pmeta) = self.read_pp_bulk(pm, &e).await?;
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
        entries: Vec<(u32, usize, PpEntry)>,
        data: &mut [u8],
        meta: &mut [u8],
    ) -> NvmeResult<()> {
        let mut ends: Vec<u64> = entries.iter().map(|(_, _, e)| e.end).collect();
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends.dedup();
        for end in ends {
            let mut parity = Vec::new();
            for (j, pm, e) in entries.iter().filter(|(_, _, e)| e.end == end) {
                parity.push((*j, self.read_pp_bulk(*pm, e).await?));
            }
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
            if !failed.contains(m) {
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
        for (m, records) in keep.into_iter().enumerate() {
            if failed.contains(m) {
                continue;
            }
            let log_lock = self.pp.get(m).ok_or((m, NvmeStatus::InternalError))?;
            let mut log = log_lock.lock().await;
            self.rewrite_log(m, &mut log, records)
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
        if read.is_err() {
            // A member failed while the open read the stripe: keep the records it has, even
            // if they cover less than the write pointer, so the open that starts over
            // without the member still finds them (and caps the write pointer by them).
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

fn entry_of(r: &PpRecord, off: u64, bs: usize) -> PpEntry {
    PpEntry {
        off,
        seq: r.seq,
        generation: r.generation,
        end: r.end,
        bulk: (r.data.len() / bs) as u64,
    }
}
