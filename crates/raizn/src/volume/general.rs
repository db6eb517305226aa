//! The general metadata zone of every member: superblock generations, the zone log (a
//! write-ahead record of every logical Reset and Finish, on m + 1 members) and the persisted
//! generation counters, with its garbage collection through the swap zone.
//!
//! Fault model: power may be lost at any point: between a zone log record and the member
//! resets or finishes it announces (some member zones reset or finished, others not), in the
//! middle of a collection (the general zone reset and partly rewritten), or with the last
//! record torn. A zone log record is written with FUA before any member zone is touched, so
//! a member zone reset or finished by a logical command implies a durable record that open
//! finds and completes; a collection writes the complete checkpoint to the swap zone (and
//! flushes it) before it resets the general zone, and open reads the union of both, so every
//! cut leaves every live record in one of them. Up to m members may fail: the zone log is on
//! m + 1 members, so a survivor always holds it.
//!
//! Generations: the zone's counter is the maximum of its generation records and of every
//! reset record's generation + 1. A reset record with no generation record past it is a
//! reset that may not have reached every member: open resets the zone again. A finish record
//! of the zone's current generation is a finish that may not have reached every member: open
//! finishes the zone again (docs/DESIGN.md, "Zone log"). A Finish's record is not kept by a
//! collection once the Finish completed; the checkpoint lists the zones finished in their
//! current generation instead (a finished-zones record), so open still tells a finished
//! zone from one whose member zones a torn stripe filled.
//!
//! Lock order: the general log lock (`RaiznVolume::general`) is taken after a zone's and a
//! partial-parity log's locks and before a member's swap lock and the `State` lock.

use std::collections::{BTreeMap, HashMap};

use futures::future::join_all;
use zns::{NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use super::health::Failed;
use super::health::ReadSb;
use super::{RaiznError, RaiznVolume};
use crate::layout::{GENERAL_ZONE, SWAP_ZONE};
use crate::meta::{
    self, MetaError, RecordHeader, RecordType, Superblock, ZoneLogAction, FLAG_CHECKPOINT,
};

/// A logged Reset or Finish of a logical zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ZoneLogEntry {
    pub zone: u32,
    pub action: ZoneLogAction,
    /// The zone's generation when the command was logged.
    pub generation: u64,
    /// The zone's write pointer when a Finish was logged (0 for a Reset).
    pub wp: u64,
}

/// The general zones' state, behind the general log lock.
#[derive(Default)]
pub(super) struct GeneralLog {
    /// Blocks written in every member's general zone.
    pub wp: Vec<u64>,
    /// Sequence number of the last zone log or generation record of every member.
    pub seq: Vec<u64>,
    /// Logged commands not yet completed: a collection must keep their records.
    pub pending: HashMap<u32, ZoneLogEntry>,
    /// The zones the current rebuild completed on its new member, as the survivors' records
    /// say (a collection keeps them); None when no rebuild is recorded.
    pub rebuilt: Option<meta::RebuiltZones>,
    /// Zones known Full in a generation (a Finish completed in it, or open found them Full),
    /// by zone: a collection keeps those of the zone's current generation.
    pub finished: BTreeMap<u32, u64>,
}

/// One member's general zone as open reads it.
pub(super) struct GeneralImage {
    /// The superblock of the highest generation.
    pub sb: Superblock,
    /// Every valid record (the general zone's, and the swap zone's when it holds a general
    /// checkpoint a collection was writing).
    pub records: Vec<(RecordHeader, Vec<u8>)>,
    /// Blocks written in the general zone.
    pub wp: u64,
    /// The highest record format version among `records`.
    pub version: u16,
}

/// What the general zones of the survivors say about the logical zones.
#[derive(Debug, Default)]
pub(super) struct Folded {
    pub generations: Vec<u64>,
    /// Zones whose reset may have reached only some members.
    pub resets: Vec<u32>,
    /// Zones finished in their current generation, and their write pointer when the Finish
    /// was logged (the capacity when only a finished-zones record names the zone): a finish
    /// that may have reached only some members, or one that completed.
    pub finishes: HashMap<u32, u64>,
    /// Every survivor's general zone is of format version 1, which kept no record of the
    /// finishes that completed: a zone whose surviving member zones are all Full is taken
    /// as Full, as that version did (docs/FORMAT.md).
    pub legacy: bool,
    /// Highest zone log or generation record sequence number of every member.
    pub seq: Vec<u64>,
    /// The rebuilt-zones records of the newest rebuild target, merged.
    pub rebuilt: Option<meta::RebuiltZones>,
}

/// Every valid record of one metadata zone of `dev`, from its start up to the first block
/// that is not a whole record; the zone's write pointer.
type Scanned = (Vec<(RecordHeader, Vec<u8>)>, u64, Option<MetaError>, u16);

async fn scan(i: usize, dev: &dyn ZonedDevice, zone: u32) -> Result<Scanned, ReadSb> {
    let g = dev.geometry();
    let start = g.zone_start(zone);
    let r = dev
        .report_zones(start, ReportFilter::All, false, 1)
        .await
        .map_err(ReadSb::Device)?;
    let wp = match r.zones.first() {
        Some(z) if z.start == start && z.state == ZoneState::Full => g.zone_capacity,
        Some(z) if z.start == start => z.wp.saturating_sub(start).min(g.zone_capacity),
        _ => return Err(ReadSb::Device(NvmeStatus::InternalError)),
    };
    let mut block = vec![0u8; g.block_size as usize];
    let mut out = Vec::new();
    let mut version = 0;
    for b in 0..wp {
        dev.read(start + b, &mut block, None)
            .await
            .map_err(ReadSb::Device)?;
        match meta::decode_record(&block) {
            Ok((h, _)) if matches!(h.kind, RecordType::PartialParity | RecordType::Relocated) => {
                // The swap zone holding a partial-parity collection: not general records.
                let why = MetaError::Corrupt(format!("a {:?} record", h.kind));
                return Ok((out, wp, Some(why).filter(|_| b == 0), version));
            }
            Ok((h, p)) => {
                version = version.max(meta::record_version(&block));
                out.push((h, p.to_vec()))
            }
            Err(why @ (MetaError::NotARecord | MetaError::Checksum)) => {
                return Ok((out, wp, Some(why).filter(|_| b == 0), version))
            }
            Err(why) => return Err(ReadSb::Invalid(RaiznError::NotFormatted { member: i, why })),
        }
    }
    let empty = out.is_empty().then_some(MetaError::NotARecord);
    Ok((out, wp, empty, version))
}

/// Member `i`'s general zone (and a general checkpoint left in its swap zone by a cut
/// collection) and its current superblock, the valid one of the highest generation.
pub(super) async fn read_general(i: usize, dev: &dyn ZonedDevice) -> Result<GeneralImage, ReadSb> {
    let (mut records, wp, general_err, mut version) = scan(i, dev, GENERAL_ZONE).await?;
    let starts_with_sb = |r: &[(RecordHeader, Vec<u8>)]| {
        r.first().map(|(h, _)| h.kind) == Some(RecordType::Superblock)
    };
    let general_ok = general_err.is_none() && starts_with_sb(&records);
    let (swap, _, _, swap_version) = scan(i, dev, SWAP_ZONE).await?;
    if starts_with_sb(&swap) {
        records.extend(swap);
        version = version.max(swap_version);
    } else if !general_ok {
        let why = general_err.unwrap_or(MetaError::Corrupt(
            "the general zone does not start with a superblock".into(),
        ));
        return Err(ReadSb::Invalid(RaiznError::NotFormatted { member: i, why }));
    }
    let mut best: Option<Superblock> = None;
    for (h, p) in &records {
        if h.kind != RecordType::Superblock {
            continue;
        }
        let block = meta::encode_record(h, p, dev.geometry().block_size as usize)
            .map_err(|why| ReadSb::Invalid(RaiznError::NotFormatted { member: i, why }))?;
        let sb = Superblock::decode(&block)
            .map_err(|why| ReadSb::Invalid(RaiznError::NotFormatted { member: i, why }))?;
        if best.is_none_or(|o| o.generation < sb.generation) {
            best = Some(sb);
        }
    }
    let sb = best.ok_or(ReadSb::Invalid(RaiznError::NotFormatted {
        member: i,
        why: MetaError::NotARecord,
    }))?;
    Ok(GeneralImage {
        sb,
        records,
        wp,
        version,
    })
}

/// Folds the survivors' general records into the zones' generations and the commands a
/// power cut may have left half done.
pub(super) fn fold(
    images: &[Option<GeneralImage>],
    geo: &zns::Geometry,
) -> Result<Folded, RaiznError> {
    let mut rebuilt: Option<meta::RebuiltZones> = None;
    let zones = geo.zone_count;
    let mut gen_rec = vec![0u64; zones as usize];
    let mut reset: Vec<Option<u64>> = vec![None; zones as usize];
    let mut finish: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut finished = vec![None::<u64>; zones as usize];
    let mut seq = vec![0u64; images.len()];
    let legacy = images.iter().flatten().all(|img| img.version < 2);
    for (m, img) in images.iter().enumerate() {
        let Some(img) = img else { continue };
        let bad = |why: MetaError| RaiznError::NotFormatted { member: m, why };
        for (h, p) in &img.records {
            match h.kind {
                RecordType::Generations => {
                    let (first, gens) = meta::decode_generations(p, zones).map_err(bad)?;
                    for (k, g) in gens.into_iter().enumerate() {
                        if let Some(x) = gen_rec.get_mut(first as usize + k) {
                            *x = (*x).max(g);
                        }
                    }
                }
                RecordType::ZoneReset => {
                    let (zone, action) = meta::decode_zone_log(p, zones).map_err(bad)?;
                    let start = geo.zone_start(zone);
                    if h.start_lba != start || h.end_lba > start + geo.zone_capacity {
                        return Err(bad(MetaError::Corrupt(format!(
                            "zone log of zone {zone} names LBAs {}..{}",
                            h.start_lba, h.end_lba
                        ))));
                    }
                    match action {
                        ZoneLogAction::Reset => {
                            let r = &mut reset[zone as usize];
                            *r = Some(r.map_or(h.generation, |x| x.max(h.generation)));
                        }
                        ZoneLogAction::Finish => {
                            let e = finish.entry(zone).or_insert((h.generation, 0));
                            if h.generation >= e.0 {
                                *e = (h.generation, h.end_lba - start);
                            }
                        }
                    }
                }
                RecordType::RebuiltZones => {
                    let r =
                        meta::RebuiltZones::decode(p, images.len() as u32, zones).map_err(bad)?;
                    merge_rebuilt(&mut rebuilt, r);
                }
                RecordType::FinishedZones => {
                    for (z, g) in meta::FinishedZones::decode(p, zones).map_err(bad)?.zones {
                        if let Some(x) = finished.get_mut(z as usize) {
                            *x = Some(x.map_or(g, |x| x.max(g)));
                        }
                    }
                }
                _ => {}
            }
            if h.kind != RecordType::Superblock {
                if let Some(s) = seq.get_mut(m) {
                    *s = (*s).max(h.sequence);
                }
            }
        }
    }
    let mut f = Folded {
        seq,
        rebuilt,
        legacy,
        ..Folded::default()
    };
    for z in 0..zones {
        let rec = gen_rec[z as usize];
        let g = match reset[z as usize] {
            Some(r) if r + 1 > rec => {
                f.resets.push(z);
                r + 1
            }
            _ => rec,
        };
        f.generations.push(g);
        if let Some((fg, wp)) = finish.get(&z) {
            if *fg == g {
                f.finishes.insert(z, *wp);
            }
        }
        if finished[z as usize] == Some(g) {
            f.finishes.entry(z).or_insert(geo.zone_capacity);
        }
    }
    Ok(f)
}

/// Merges `r` into `into`: the records of the newest rebuild target (superblock generation)
/// win; those of one target add up (a zone's newest generation kept).
pub(super) fn merge_rebuilt(into: &mut Option<meta::RebuiltZones>, r: meta::RebuiltZones) {
    match into {
        Some(x) if x.target_generation > r.target_generation => {}
        Some(x) if x.target_generation == r.target_generation && x.member == r.member => {
            for (z, g) in r.zones {
                match x.zones.iter_mut().find(|(xz, _)| *xz == z) {
                    Some(e) => e.1 = e.1.max(g),
                    None => x.zones.push((z, g)),
                }
            }
        }
        _ => *into = Some(r),
    }
}

impl RaiznVolume {
    /// The m + 1 members that hold `zone`'s log records (two with m = 1, three with
    /// m = 2, so m more failures leave one): the first m + 1 survivors from member
    /// `zone mod N` on.
    fn zone_log_members(&self, zone: u32) -> Vec<usize> {
        let n = self.members.len();
        let failed = self.state.lock().health.failed;
        (0..n)
            .map(|k| (zone as usize + k) % n)
            .filter(|m| !failed.contains(*m))
            .take(self.layout.parity() as usize + 1)
            .collect()
    }

    /// Logs `entry` (FUA) on m + 1 members before the member zones are touched; the entry
    /// stays pending (kept by collections) until `zone_log_done`.
    pub(super) async fn log_zone(&self, entry: ZoneLogEntry) -> NvmeResult<Vec<usize>> {
        let targets = self.zone_log_members(entry.zone);
        let mut log = self.general.lock().await;
        log.pending.insert(entry.zone, entry);
        self.append_general(&mut log, &targets, Rec::Zone(entry), true)
            .await?;
        Ok(targets)
    }

    /// The logged command on `zone` completed. After a reset, a generation record of the
    /// zone's new generation goes to the members that hold the reset record (without FUA:
    /// any write of the new generation is made durable by a flush of every member, which
    /// carries the record with it).
    pub(super) async fn zone_log_done(
        &self,
        zone: u32,
        targets: &[usize],
        new_generation: Option<u64>,
    ) -> NvmeResult<()> {
        let mut log = self.general.lock().await;
        match log.pending.remove(&zone) {
            Some(e) if e.action == ZoneLogAction::Finish => {
                log.finished.insert(zone, e.generation);
            }
            _ => {
                log.finished.remove(&zone);
            }
        }
        if let Some(g) = new_generation {
            self.append_general(&mut log, targets, Rec::Generation(zone, g), false)
                .await?;
        }
        Ok(())
    }

    /// Appends one record to the general zone of each of `targets` (concurrently); a full
    /// general zone is collected first. A member failing here degrades the array.
    pub(super) async fn append_general(
        &self,
        log: &mut GeneralLog,
        targets: &[usize],
        rec: Rec,
        fua: bool,
    ) -> NvmeResult<()> {
        let cap = self.layout.member_geometry().zone_capacity;
        let checkpoint = self.checkpoint_blocks(log);
        let GeneralLog { wp, seq, .. } = log;
        let appends = wp
            .iter_mut()
            .zip(seq.iter_mut())
            .enumerate()
            .filter(|(m, _)| targets.contains(m))
            .map(|(m, (wp, seq))| {
                let (checkpoint, rec) = (checkpoint.clone(), &rec);
                async move {
                    let dev = self.tracked.get(m).ok_or((m, NvmeStatus::InternalError))?;
                    if *wp + 1 > cap {
                        let blocks = self.encode_checkpoint(m, &checkpoint)?;
                        self.collect_general(m, &blocks).await.map_err(|e| (m, e))?;
                        self.meta_stats.lock().general_collections += 1;
                        *wp = blocks.len() as u64;
                    }
                    *seq += 1;
                    let block = self.encode_rec(m, rec, *seq).map_err(|e| (m, e))?;
                    let g = dev.geometry();
                    let md = vec![0u8; g.oob_size as usize];
                    let (lba, oob) = (g.zone_start(GENERAL_ZONE) + *wp, g.oob_size > 0);
                    let oob = oob.then_some(&md[..]);
                    let written = match rec {
                        // A write of the zone's new generation depends on this record (an
                        // open without it would take the reset as cut short and reset the
                        // zone again): that zone's FUA writes flush it (`persist.rs`).
                        Rec::Generation(zone, _) => {
                            dev.write_for(*zone, lba, &block, oob, fua).await
                        }
                        _ => dev.write(lba, &block, oob, fua).await,
                    };
                    written.map_err(|e| (m, e))?;
                    *wp += 1;
                    Ok::<(), (usize, NvmeStatus)>(())
                }
            });
        for r in join_all(appends).await {
            if let Err((m, status)) = r {
                self.note_member_error(m, status)?;
            }
        }
        Ok(())
    }

    /// What a collection keeps: the superblock, the generation counters and the pending
    /// zone log entries (encoded per member by `encode_checkpoint`).
    fn checkpoint_blocks(&self, log: &GeneralLog) -> Checkpoint {
        let st = self.state.lock();
        let mut entries: Vec<ZoneLogEntry> = log.pending.values().copied().collect();
        entries.sort_by_key(|e| e.zone);
        let finished = log
            .finished
            .iter()
            .filter(|(z, g)| st.generations.get(**z as usize) == Some(*g))
            .map(|(z, g)| (*z, *g))
            .collect();
        Checkpoint {
            sb_generation: st.health.generation,
            failed: st.health.persisted,
            generations: st.generations.clone(),
            pending: entries,
            rebuilt: log.rebuilt.clone(),
            finished,
        }
    }

    /// Member `m`'s blocks of `c`: superblock first, then generation records, then the
    /// pending zone log entries, the rebuilt zones and the finished zones, all flagged
    /// *checkpoint*.
    fn encode_checkpoint(
        &self,
        m: usize,
        c: &Checkpoint,
    ) -> Result<Vec<Vec<u8>>, (usize, NvmeStatus)> {
        let bs = self.block_size();
        let err = |_| (m, NvmeStatus::InternalError);
        let mut out = vec![self
            .superblock_of(m, c.sb_generation, c.failed)
            .map_err(err)?];
        let per = gens_per_block(bs);
        let mut seq = 0;
        for (k, chunk) in c.generations.chunks(per).enumerate() {
            seq += 1;
            let first = (k * per) as u32;
            out.push(
                self.encode_gens(first, chunk, seq, FLAG_CHECKPOINT)
                    .map_err(err)?,
            );
        }
        for e in &c.pending {
            seq += 1;
            out.push(self.encode_zone_log(e, seq, FLAG_CHECKPOINT).map_err(err)?);
        }
        if let Some(r) = &c.rebuilt {
            for chunk in r.zones.chunks(meta::RebuiltZones::per_block(bs)) {
                seq += 1;
                let part = meta::RebuiltZones {
                    zones: chunk.to_vec(),
                    ..r.clone()
                };
                out.push(
                    self.encode_rebuilt(&part, seq, FLAG_CHECKPOINT)
                        .map_err(err)?,
                );
            }
        }
        for chunk in c.finished.chunks(meta::FinishedZones::per_block(bs)) {
            seq += 1;
            let part = meta::FinishedZones {
                zones: chunk.to_vec(),
            };
            out.push(
                self.encode_finished(&part, seq, FLAG_CHECKPOINT)
                    .map_err(err)?,
            );
        }
        let cap = self.layout.member_geometry().zone_capacity;
        if out.len() as u64 >= cap {
            tracing::error!(
                member = m,
                blocks = out.len(),
                "RAIZN general checkpoint does not fit its zone"
            );
            return Err((m, NvmeStatus::InternalError));
        }
        Ok(out)
    }

    fn encode_gens(
        &self,
        first: u32,
        gens: &[u64],
        seq: u64,
        flags: u16,
    ) -> Result<Vec<u8>, MetaError> {
        let p = meta::encode_generations(first, gens);
        let h = RecordHeader {
            kind: RecordType::Generations,
            inline_len: p.len() as u32,
            start_lba: 0,
            end_lba: 0,
            generation: 0,
            sequence: seq,
            bulk_blocks: 0,
            bulk_crc: 0,
            flags,
        };
        meta::encode_record(&h, &p, self.block_size())
    }

    fn encode_zone_log(
        &self,
        e: &ZoneLogEntry,
        seq: u64,
        flags: u16,
    ) -> Result<Vec<u8>, MetaError> {
        let p = meta::encode_zone_log(e.zone, e.action);
        let start = self.geo.zone_start(e.zone);
        let end = match e.action {
            ZoneLogAction::Reset => start + self.geo.zone_capacity,
            ZoneLogAction::Finish => start + e.wp,
        };
        let h = RecordHeader {
            kind: RecordType::ZoneReset,
            inline_len: p.len() as u32,
            start_lba: start,
            end_lba: end,
            generation: e.generation,
            sequence: seq,
            bulk_blocks: 0,
            bulk_crc: 0,
            flags,
        };
        meta::encode_record(&h, &p, self.block_size())
    }

    fn encode_rebuilt(
        &self,
        r: &meta::RebuiltZones,
        seq: u64,
        flags: u16,
    ) -> Result<Vec<u8>, MetaError> {
        self.encode_zone_list(RecordType::RebuiltZones, &r.encode(), seq, flags)
    }

    fn encode_finished(
        &self,
        f: &meta::FinishedZones,
        seq: u64,
        flags: u16,
    ) -> Result<Vec<u8>, MetaError> {
        self.encode_zone_list(RecordType::FinishedZones, &f.encode(), seq, flags)
    }

    /// A record whose inline payload `p` lists zones (no LBA range, no generation of its own).
    fn encode_zone_list(
        &self,
        kind: RecordType,
        p: &[u8],
        seq: u64,
        flags: u16,
    ) -> Result<Vec<u8>, MetaError> {
        let h = RecordHeader {
            kind,
            inline_len: p.len() as u32,
            start_lba: 0,
            end_lba: 0,
            generation: 0,
            sequence: seq,
            bulk_blocks: 0,
            bulk_crc: 0,
            flags,
        };
        meta::encode_record(&h, p, self.block_size())
    }

    fn encode_rec(&self, m: usize, rec: &Rec, seq: u64) -> NvmeResult<Vec<u8>> {
        let r = match rec {
            Rec::Superblock(generation, failed) => self.superblock_of(m, *generation, *failed),
            Rec::Zone(e) => self.encode_zone_log(e, seq, 0),
            Rec::Generation(zone, g) => self.encode_gens(*zone, &[*g], seq, 0),
            Rec::Generations(first, gens) => self.encode_gens(*first, gens, seq, 0),
            Rec::Rebuilt(r) => self.encode_rebuilt(r, seq, 0),
            Rec::Finished(f) => self.encode_finished(f, seq, 0),
        };
        r.map_err(|_| NvmeStatus::InternalError)
    }

    /// Collects member `m`'s general zone: `blocks` (a checkpoint) to the swap zone, flush,
    /// general zone reset and rewritten, flush, swap zone reset. Under the member's swap lock
    /// (the partial-parity log's collection uses the same swap zone).
    async fn collect_general(&self, m: usize, blocks: &[Vec<u8>]) -> NvmeResult<()> {
        let dev = self.members.get(m).ok_or(NvmeStatus::InternalError)?;
        let _counted = super::CollectionInFlight::new(&self.meta_stats);
        let mut unsettled = self
            .swap
            .get(m)
            .ok_or(NvmeStatus::InternalError)?
            .lock()
            .await;
        super::swap::settle_first(dev.as_ref(), &mut unsettled).await?;
        let g = dev.geometry();
        let md = vec![0u8; g.oob_size as usize];
        let oob = (g.oob_size > 0).then_some(&md[..]);
        for zone in [SWAP_ZONE, GENERAL_ZONE] {
            let start = g.zone_start(zone);
            dev.zone_mgmt(ZoneAction::Reset, start, false).await?;
            for (k, b) in blocks.iter().enumerate() {
                dev.write(start + k as u64, b, oob, false).await?;
            }
            dev.flush().await?;
            // The swap zone holds the whole image until the general zone holds it again.
            *unsettled = zone == SWAP_ZONE;
        }
        dev.zone_mgmt(ZoneAction::Reset, g.zone_start(SWAP_ZONE), false)
            .await
    }

    /// Gives the general zone of `member`, a replacement whose rebuild is complete, every
    /// zone's generation (FUA), before the array counts it whole. Its general zone held only
    /// its superblock, and a zone's generation records are on m + 1 members only (the zone
    /// log's): without this, a zone whose records were on the member replaced and on the
    /// next one to fail would reopen at an older generation, and recovery would drop the
    /// partial-parity records of its current one. Resets while this runs log on the other
    /// members (the member still counts as failed), so one of those m + 1 always survives.
    /// The finished zones go with them, for the same reason (a Finish's zone-log record is
    /// on m + 1 members too).
    pub(super) async fn seed_generations(&self, member: usize) -> NvmeResult<()> {
        let mut log = self.general.lock().await;
        let c = self.checkpoint_blocks(&log);
        let per = gens_per_block(self.block_size());
        for (k, chunk) in c.generations.chunks(per).enumerate() {
            let first = u32::try_from(k * per).map_err(|_| NvmeStatus::InternalError)?;
            let rec = Rec::Generations(first, chunk.to_vec());
            self.append_general(&mut log, &[member], rec, true).await?;
        }
        for chunk in c
            .finished
            .chunks(meta::FinishedZones::per_block(self.block_size()))
        {
            let rec = Rec::Finished(meta::FinishedZones {
                zones: chunk.to_vec(),
            });
            self.append_general(&mut log, &[member], rec, true).await?;
        }
        Ok(())
    }

    /// Notes every zone Full now as finished in its current generation (at open, before the
    /// general zones are checkpointed: the member zones of a zone open found Full, or whose
    /// logged Finish it completed, are Full on the media).
    pub(super) async fn note_full_zones(&self) {
        let mut log = self.general.lock().await;
        let st = self.state.lock();
        for z in 0..self.geo.zone_count {
            let full = st.table.zone(z).map(|lz| lz.state) == Some(ZoneState::Full);
            match (full, st.generations.get(z as usize)) {
                (true, Some(g)) => {
                    log.finished.insert(z, *g);
                }
                _ => {
                    log.finished.remove(&z);
                }
            }
        }
    }

    /// Rewrites every survivor's general zone as a checkpoint (at open, after the logged
    /// commands were completed and the empty zones got their new generation).
    pub(super) async fn checkpoint_general(&self) -> Result<(), RaiznError> {
        let mut log = self.general.lock().await;
        let failed = self.state.lock().health.failed;
        let c = self.checkpoint_blocks(&log);
        for m in 0..self.members.len() {
            if failed.contains(m) {
                continue;
            }
            let err = |(member, status)| RaiznError::Member {
                member,
                what: "writing the general checkpoint",
                status,
            };
            let blocks = self.encode_checkpoint(m, &c).map_err(err)?;
            self.collect_general(m, &blocks)
                .await
                .map_err(|e| err((m, e)))?;
            if let Some(w) = log.wp.get_mut(m) {
                *w = blocks.len() as u64;
            }
        }
        Ok(())
    }
}

/// Generation counters one generations record holds in a block of `bs` bytes.
fn gens_per_block(bs: usize) -> usize {
    (bs.saturating_sub(meta::HEADER_BYTES + 8) / 8).max(1)
}

/// A checkpoint of the general zone, member-independent.
#[derive(Clone)]
pub(super) struct Checkpoint {
    sb_generation: u64,
    failed: Failed,
    generations: Vec<u64>,
    pending: Vec<ZoneLogEntry>,
    rebuilt: Option<meta::RebuiltZones>,
    finished: Vec<(u32, u64)>,
}

/// A record to append to the general zone.
pub(super) enum Rec {
    /// A superblock of this generation, naming these failed members.
    Superblock(u64, Failed),
    Zone(ZoneLogEntry),
    /// The generation of one zone.
    Generation(u32, u64),
    /// The generations of the zones from the first one named.
    Generations(u32, Vec<u64>),
    /// Zones a rebuild completed.
    Rebuilt(meta::RebuiltZones),
    /// Zones finished in their current generation.
    Finished(meta::FinishedZones),
}
