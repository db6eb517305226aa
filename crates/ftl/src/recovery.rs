//! Mount-time recovery: the newest complete checkpoint, plus a scan of only the zones written
//! since it, rebuilds the exact mapping.
//!
//! Fault model: power loss at any instant (device volatile cache on), so each zone holds a
//! prefix of what was written to it, including everything flushed or written with FUA. Each
//! data block carries its LBA and sequence number in per-block metadata; each data zone
//! starts with a header naming its generation. A zone whose generation differs from the
//! checkpoint's, or that is empty though the checkpoint used it, was reset since: mapping
//! entries into it are stale and must be superseded by a scanned copy (garbage collection
//! flushes its copies before any reset, and copies keep the original sequence number).
//! A stale entry nothing supersedes is reported as lost data, never silently dropped.
//!
//! Zone faults: a Read Only zone is scanned as usual and retired (its data stays readable and
//! garbage collection moves it out); an Offline zone cannot be read, so its entries stay in the
//! mapping as lost data (reads of them fail, `ftl check` lists them) and the rest mounts. Data
//! written to an Offline zone after the checkpoint cannot be found: such an LBA reads its
//! version from the checkpoint. A written zone whose first block is not a header of this
//! volume never received its header (the write failed and the zone was sealed), so it holds
//! nothing the volume acknowledged; it is mounted as an empty full zone for collection.

use std::time::{Duration, Instant};

use zns::{ReportFilter, ZoneState, ZonedDevice};

use crate::checkpoint::{self, ZONE_FREE};
use crate::layout::Layout;
use crate::map::{DataZone, Mapping, ZoneUse, P_TRIM, UNMAPPED};
use crate::prefix::Prefix;
use crate::records::{self, RecordError, Tag};
use crate::FtlError;

/// The result of recovery, before the mount makes any change to the device.
pub struct Recovered {
    pub mapping: Mapping,
    pub volume_id: u64,
    pub checkpoint_slot: u32,
    /// The newest checkpoint's number: its slot's full one's, or its last applied delta's.
    pub checkpoint_number: u64,
    /// The full checkpoint's format version, and the other slot's (None: empty or torn; a
    /// device error reading it counts as version 1).
    pub checkpoint_version: u32,
    pub other_slot_version: Option<u32>,
    /// The delta checkpoints applied after the full one.
    pub chain: checkpoint::ChainEnd,
    /// Data zones left partly written (open at the crash); the mount finishes them.
    pub partial_zones: Vec<u32>,
    /// Those of them the device had re-opened for threaded logging (attribute TLO): the mount
    /// finishes them only after its checkpoint, which records them full. Finished earlier,
    /// a cut before that checkpoint would make the next recovery scan them to their end,
    /// through holes holding what the cut left of writes it lost.
    pub threaded_zones: Vec<u32>,
    /// Data zones the device retired (Read Only or Offline).
    pub retired_zones: u32,
    /// Written data zones without a header of this volume (a header write that failed).
    pub headerless_zones: u32,
    pub scanned_zones: u32,
    pub scanned_blocks: u64,
    /// Blocks of checkpoint read: both slots' headers, the full checkpoint (and the other
    /// slot's, if the newer one failed) and the deltas applied.
    pub checkpoint_blocks_read: u64,
    /// Where the wall time went.
    pub times: RecoveryTimes,
    /// The device holds nothing the checkpoint does not record: no data zone written since
    /// it, reset since it, left partly written, re-opened for threaded logging, retired or
    /// without its header. The mapping is then the checkpoint's, every block it maps is
    /// durable (the checkpoint flushed them), and the mount need not write another
    /// checkpoint: recovering from this one again gives the same mapping.
    pub unchanged: bool,
}

/// Where a recovery's wall time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryTimes {
    /// Reading and checking the slots' full checkpoints.
    pub checkpoint_read: Duration,
    /// Reading and applying the newest full checkpoint's deltas.
    pub deltas: Duration,
    /// Reading the data zones' headers and scanning what was written since.
    pub scan: Duration,
    /// Rebuilding the reverse map, valid counts and free list, and checking them.
    pub rebuild: Duration,
}

struct ZonePlan {
    scan: Option<(u64, u64)>,
    stale: bool,
    /// The generation its header names (None: no readable header of this volume).
    generation: Option<u64>,
    /// Where the device's write pointer stands (the end of any scan).
    written: u64,
}

/// Rebuilds the mapping of the volume on `dev` without writing anything.
pub async fn recover(dev: &dyn ZonedDevice, layout: &Layout) -> Result<Recovered, FtlError> {
    let mut times = RecoveryTimes::default();
    let t = Instant::now();
    let latest = checkpoint::read_latest(dev, layout).await?;
    let (slot, mut ck) = (latest.slot, latest.checkpoint);
    times.checkpoint_read = t.elapsed();
    let t = Instant::now();
    let chain = checkpoint::read_chain(dev, layout, slot, &mut ck).await?;
    times.deltas = t.elapsed();
    let t = Instant::now();
    let other_slot_version = match &latest.other_header {
        Ok(h) => Some(h.version),
        Err(checkpoint::CkptError::Device(_)) => Some(checkpoint::VERSION_1),
        Err(_) => None,
    };
    let mut m = Mapping::new(*layout);
    m.threaded.enabled = ck.header.flags & checkpoint::FLAG_THREADED_LOGGING != 0;
    if m.threaded.enabled {
        m.threaded.checkpoints_before_records =
            checkpoints_before_records(dev, layout, slot, ck.header.version).await;
    }
    let ckpt_seq = ck.header.seq;
    let (checkpoint_number, checkpoint_version) = (ck.header.number, ck.header.version);
    m.l2p = ck.l2p;
    m.seq = ck.seq;
    m.next_seq = ckpt_seq;
    m.ckpt_seq = ckpt_seq;
    let volume_id = ck.header.volume_id;
    let report = dev
        .report_zones(
            layout.data_zone_start(0),
            ReportFilter::All,
            false,
            usize::MAX,
        )
        .await?;
    let cap = layout.zone_blocks;
    let bs = dev.geometry().block_size as usize;
    let mut plans = Vec::with_capacity(layout.data_zones as usize);
    let mut partial_zones = Vec::new();
    let mut threaded_zones = Vec::new();
    let (mut retired_zones, mut headerless_zones) = (0u32, 0u32);
    let mut block = vec![0u8; bs];
    for z in 0..layout.data_zones {
        let d = report
            .zones
            .get(z as usize)
            .ok_or(FtlError::Corrupt(format!("report lacks data zone {z}")))?;
        let ckz = *ck
            .zones
            .get(z as usize)
            .ok_or(FtlError::Corrupt(format!("checkpoint lacks data zone {z}")))?;
        let was_used = ckz.use_ != ZONE_FREE;
        let written = match d.state {
            ZoneState::Full => cap,
            ZoneState::Offline => {
                // Unreadable: the checkpoint's entries into it are lost data, kept so that
                // reads of them fail instead of returning zeros.
                m.zones[z as usize] = DataZone::free(ckz.generation);
                m.retire(z, true);
                retired_zones += 1;
                plans.push(ZonePlan {
                    scan: None,
                    stale: false,
                    generation: None,
                    written: 0,
                });
                continue;
            }
            // A write pointer outside the zone's capacity would make the scan address blocks
            // of the next zone.
            _ => {
                d.wp.checked_sub(d.start)
                    .filter(|w| *w <= cap)
                    .ok_or(FtlError::Corrupt(format!(
                        "data zone {z} reports write pointer {} outside its capacity",
                        d.wp
                    )))?
            }
        };
        let read_only = d.state == ZoneState::ReadOnly;
        if read_only {
            retired_zones += 1;
        }
        let zone = &mut m.zones[z as usize];
        if written == 0 && read_only {
            *zone = DataZone::free(ckz.generation);
            m.retire(z, false);
            plans.push(ZonePlan {
                scan: None,
                stale: was_used,
                generation: None,
                written: 0,
            });
            continue;
        }
        if written == 0 {
            *zone = DataZone::free(ckz.generation);
            plans.push(ZonePlan {
                scan: None,
                stale: was_used,
                generation: None,
                written: 0,
            });
            continue;
        }
        dev.read(d.start, &mut block, None).await?;
        let header = match records::decode_header(&block) {
            Ok(h) if h.volume_id == volume_id && h.data_zone == z => Some(h),
            Ok(_) | Err(RecordError::Absent(_)) => None,
            Err(e) => return Err(FtlError::Corrupt(format!("data zone {z} header: {e}"))),
        };
        let Some(h) = header else {
            // The header never reached the device; nothing after it was written.
            headerless_zones += 1;
            *zone = DataZone::free(ckz.generation);
            zone.use_ = ZoneUse::Full;
            zone.reserved = cap;
            zone.prefix = Prefix::new(cap);
            if read_only {
                m.retire(z, false);
            } else if d.state != ZoneState::Full {
                partial_zones.push(z);
            }
            plans.push(ZonePlan {
                scan: None,
                stale: was_used,
                generation: None,
                written: 0,
            });
            continue;
        };
        let same = was_used && h.generation == ckz.generation;
        let from = if same { ckz.scan_from.max(1) } else { 1 };
        *zone = DataZone::free(h.generation);
        zone.use_ = ZoneUse::Full;
        zone.reserved = cap;
        zone.prefix = Prefix::new(cap);
        if read_only {
            m.retire(z, false);
        } else if d.attributes & zns::zone_attr::TLO != 0 {
            threaded_zones.push(z);
        } else if d.state != ZoneState::Full {
            partial_zones.push(z);
        }
        plans.push(ZonePlan {
            scan: (from < written).then_some((from, written)),
            stale: was_used && !same,
            generation: Some(h.generation),
            written,
        });
    }
    // Checkpoint entries into zones reset since are unresolved until a scan supersedes them;
    // entries set by the scan itself are current wherever they point.
    let mut stale = Vec::with_capacity(m.l2p.len());
    for &p in &m.l2p {
        stale.push(p != UNMAPPED && plans[zone_of(&m, p)?].stale);
    }
    let mut scanned_zones = 0;
    let mut scanned_blocks = 0;
    let mut tl = Vec::new();
    for (z, plan) in plans.iter().enumerate() {
        if let Some((from, to)) = plan.scan {
            scanned_zones += 1;
            let mut s = Scan {
                unresolved: &mut stale,
                tl: &mut tl,
            };
            scanned_blocks += if layout.summary_mode() {
                scan_summaries(dev, &mut m, volume_id, z as u32, from, to, &mut s).await?
            } else {
                scan_zone(dev, &mut m, z as u32, from, to, &mut s).await?
            };
        }
    }
    // Threaded-logging records written since the checkpoint's snapshot name zones the device
    // re-opened: each is scanned from its first hole too, if its header still names the
    // record's generation (else it was reset since, and scanned whole or not written). Their
    // scans may find more records.
    let mut next = 0;
    while let Some(rec) = tl.get(next).copied() {
        next += 1;
        if rec.seq < ckpt_seq {
            continue;
        }
        for e in rec.entries() {
            let z = e.data_zone;
            let plan = plans
                .get_mut(z as usize)
                .filter(|_| e.first_hole < cap)
                .ok_or_else(|| {
                    FtlError::Corrupt(format!(
                        "threaded-logging record {} names data zone {z} hole {} outside the data area",
                        rec.seq, e.first_hole
                    ))
                })?;
            if plan.generation != Some(e.generation) {
                continue;
            }
            let scanned_from = plan.scan.map_or(plan.written, |(from, _)| from);
            if e.first_hole >= scanned_from {
                continue;
            }
            if plan.scan.is_none() {
                scanned_zones += 1;
            }
            plan.scan = Some((e.first_hole, plan.written));
            let mut s = Scan {
                unresolved: &mut stale,
                tl: &mut tl,
            };
            scanned_blocks += scan_zone(dev, &mut m, z, e.first_hole, scanned_from, &mut s).await?;
        }
    }
    times.scan = t.elapsed();
    let t = Instant::now();
    m.snapshots = 1;
    finish(&mut m, &stale)?;
    times.rebuild = t.elapsed();
    let unchanged = scanned_zones == 0
        && partial_zones.is_empty()
        && threaded_zones.is_empty()
        && retired_zones == 0
        && headerless_zones == 0
        && !plans.iter().any(|p| p.stale);
    Ok(Recovered {
        mapping: m,
        volume_id,
        checkpoint_slot: slot,
        checkpoint_number,
        checkpoint_version,
        other_slot_version,
        chain,
        partial_zones,
        threaded_zones,
        retired_zones,
        headerless_zones,
        scanned_zones,
        scanned_blocks,
        checkpoint_blocks_read: latest.blocks_read + chain.delta_blocks,
        times,
        unchanged,
    })
    .map(|mut r| {
        // Every full zone's contents are in the checkpoint on disk, which the mount does
        // not rewrite: threaded logging may re-open them.
        if r.unchanged {
            r.mapping.threaded.covered_mark = 1;
        }
        r
    })
}

/// How many checkpoints a volume with threaded logging must write before its first
/// threaded-logging record, so that both slots then hold format version 2 or newer (`checkpoint::VERSION_2`)
/// and a build of version 1 refuses the volume instead of mounting the other slot's checkpoint
/// (`Threaded::checkpoints_before_records`): the newest is in `slot`, of `version`. A slot
/// that cannot be read counts as one of version 1.
async fn checkpoints_before_records(
    dev: &dyn ZonedDevice,
    layout: &Layout,
    slot: u32,
    version: u32,
) -> u8 {
    if version < checkpoint::VERSION_2 {
        return 2;
    }
    match checkpoint::read_header(dev, layout, 1 - slot).await {
        Ok(h) if h.version < checkpoint::VERSION_2 => 1,
        Err(checkpoint::CkptError::Device(_)) => 1,
        _ => 0,
    }
}

/// What a scan collects besides the mapping: which LBAs are still unresolved, and the
/// threaded-logging records it found.
struct Scan<'a> {
    unresolved: &'a mut [bool],
    tl: &'a mut Vec<records::TlRecord>,
}

/// Summary mode: finds the summary blocks among `[from, to)` of data zone `z` and applies the
/// tags they carry for the blocks before them; returns how many blocks it read. Blocks after
/// the last summary were never flushed and are not recovered.
async fn scan_summaries(
    dev: &dyn ZonedDevice,
    m: &mut Mapping,
    volume_id: u64,
    z: u32,
    from: u64,
    to: u64,
    scan: &mut Scan<'_>,
) -> Result<u64, FtlError> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let chunk = u64::from(g.mdts_blocks.min(256));
    let mut data = vec![0u8; chunk as usize * bs];
    let mut one = vec![0u8; bs];
    let start = m.layout.data_zone_start(z);
    let generation = m.zones[z as usize].generation;
    let mut at = from;
    while at < to {
        let n = chunk.min(to - at);
        let d = &mut data[..n as usize * bs];
        dev.read(start + at, d, None).await?;
        for i in 0..n as usize {
            let offset = at + i as u64;
            let place = records::SummaryPlace {
                volume_id,
                data_zone: z,
                generation,
                offset,
            };
            let tags = match records::decode_summary(&place, &d[i * bs..(i + 1) * bs]) {
                Ok(tags) => tags,
                Err(RecordError::Absent(_)) => continue,
                Err(e) => return Err(FtlError::Corrupt(e.to_string())),
            };
            m.zones[z as usize].summaries += 1;
            let first = offset.checked_sub(tags.len() as u64).ok_or_else(|| {
                FtlError::Corrupt(format!(
                    "summary at offset {offset} of data zone {z} covers blocks before the zone"
                ))
            })?;
            for (k, tag) in tags.into_iter().enumerate() {
                let pba = m.pba(z, first + k as u64);
                match tag {
                    Tag::Data { lba, seq } => apply_data(m, pba, lba, seq, scan.unresolved)?,
                    Tag::Trim { seq } => {
                        dev.read(start + first + k as u64, &mut one, None).await?;
                        apply_record(m, z, first + k as u64, &one, seq, scan)?;
                    }
                    Tag::Header { .. } | Tag::Unknown => {}
                }
            }
        }
        at += n;
    }
    Ok(to - from)
}

/// Applies the tags of blocks `[from, to)` of data zone `z`; returns how many it read.
async fn scan_zone(
    dev: &dyn ZonedDevice,
    m: &mut Mapping,
    z: u32,
    from: u64,
    to: u64,
    scan: &mut Scan<'_>,
) -> Result<u64, FtlError> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let oob = g.oob_size as usize;
    let chunk = u64::from(g.mdts_blocks.min(256));
    let mut data = vec![0u8; chunk as usize * bs];
    let mut meta = vec![0u8; chunk as usize * oob];
    let start = m.layout.data_zone_start(z);
    let mut at = from;
    while at < to {
        let n = chunk.min(to - at);
        let (d, md) = (&mut data[..n as usize * bs], &mut meta[..n as usize * oob]);
        dev.read(start + at, d, Some(md)).await?;
        for i in 0..n as usize {
            let pba = m.pba(z, at + i as u64);
            let tag = records::decode_tag(&md[i * oob..(i + 1) * oob]).map_err(|e| {
                FtlError::Corrupt(format!("data zone {z} block {}: {e}", at + i as u64))
            })?;
            match tag {
                Tag::Data { lba, seq } => apply_data(m, pba, lba, seq, scan.unresolved)?,
                Tag::Trim { seq } => {
                    apply_record(m, z, at + i as u64, &d[i * bs..(i + 1) * bs], seq, scan)?
                }
                Tag::Header { .. } => {}
                // The end of what was written to a zone finished early.
                Tag::Unknown => return Ok(at + i as u64 - from),
            }
        }
        at += n;
    }
    Ok(to - from)
}

/// The data zone of `pba`, which came from the device: refused if it lies past the data area.
fn zone_of(m: &Mapping, pba: u32) -> Result<usize, FtlError> {
    let z = u64::from(pba) / m.layout.zone_blocks;
    if z >= u64::from(m.layout.data_zones) {
        return Err(FtlError::Corrupt(format!(
            "physical block {pba} lies beyond the {} data zones",
            m.layout.data_zones
        )));
    }
    Ok(z as usize)
}

/// The sequence number after `seq`, which came from the device.
fn after(seq: u64) -> Result<u64, FtlError> {
    seq.checked_add(1).ok_or(FtlError::Corrupt(format!(
        "sequence number {seq} cannot grow"
    )))
}

fn apply_data(
    m: &mut Mapping,
    pba: u32,
    lba: u64,
    seq: u64,
    unresolved: &mut [bool],
) -> Result<(), FtlError> {
    if lba >= m.layout.volume_blocks {
        return Err(FtlError::Corrupt(format!(
            "block {pba} claims LBA {lba} beyond the volume"
        )));
    }
    let l = lba as usize;
    // A copy with the same sequence number (garbage collection keeps it) replaces an entry
    // whose zone was reset.
    if seq > m.seq[l] || (seq == m.seq[l] && unresolved[l]) {
        m.l2p[l] = pba;
        m.seq[l] = seq;
        m.touch(l);
        unresolved[l] = false;
    }
    m.next_seq = m.next_seq.max(after(seq)?);
    Ok(())
}

/// A block tagged as a record (`Tag::Trim`): a trim record, or a threaded-logging record,
/// which is kept live like a trim record until the mount's checkpoint and queued for its
/// zones' scans.
fn apply_record(
    m: &mut Mapping,
    z: u32,
    offset: u64,
    block: &[u8],
    seq: u64,
    scan: &mut Scan<'_>,
) -> Result<(), FtlError> {
    let pba = m.pba(z, offset);
    let damaged = |e: RecordError| {
        FtlError::Corrupt(format!(
            "record at data zone {z} block {offset} is damaged: {e}"
        ))
    };
    let tl = match records::decode_trim(block) {
        Ok(rec) => return apply_trim(m, pba, rec, seq, scan.unresolved),
        Err(RecordError::Absent(_)) => match records::decode_tl_record(block) {
            Ok(tl) => tl,
            Err(RecordError::Absent(_)) => {
                return Err(FtlError::Corrupt(format!(
                    "record at data zone {z} block {offset} is damaged: neither a trim record nor a threaded-logging record"
                )))
            }
            Err(e) => return Err(damaged(e)),
        },
        Err(e) => return Err(damaged(e)),
    };
    if tl.seq != seq {
        return Err(FtlError::Corrupt(format!(
            "threaded-logging record at block {pba} is inconsistent"
        )));
    }
    m.trims.insert(pba, crate::map::TrimLive { mark: 0, seq });
    m.next_seq = m.next_seq.max(after(seq)?);
    scan.tl.push(tl);
    Ok(())
}

fn apply_trim(
    m: &mut Mapping,
    pba: u32,
    rec: records::TrimRecord,
    seq: u64,
    unresolved: &mut [bool],
) -> Result<(), FtlError> {
    if rec.seq != seq
        || rec
            .lba
            .checked_add(rec.blocks)
            .is_none_or(|e| e > m.layout.volume_blocks)
    {
        return Err(FtlError::Corrupt(format!(
            "trim record at block {pba} is inconsistent"
        )));
    }
    for l in rec.lba..rec.lba + rec.blocks {
        if seq > m.seq[l as usize] {
            m.l2p[l as usize] = UNMAPPED;
            m.seq[l as usize] = seq;
            m.touch(l as usize);
            unresolved[l as usize] = false;
        }
    }
    // Whether the checkpoint already covers this record is unknown, so it stays live until
    // the checkpoint the mount writes.
    m.trims.insert(pba, crate::map::TrimLive { mark: 0, seq });
    m.next_seq = m.next_seq.max(after(seq)?);
    Ok(())
}

/// Rebuilds the reverse map, valid counts and the free list, and refuses lost data.
fn finish(m: &mut Mapping, unresolved: &[bool]) -> Result<(), FtlError> {
    for (lba, &pba) in m.l2p.iter().enumerate() {
        if pba == UNMAPPED {
            continue;
        }
        let z = zone_of(m, pba)?;
        if unresolved[lba] || m.zones[z].use_ == ZoneUse::Free {
            return Err(FtlError::Corrupt(format!(
                "LBA {lba} was in data zone {z}, which was reset since the checkpoint, and no newer copy was found"
            )));
        }
        m.p2l[pba as usize] = lba as u32;
        m.zones[z].valid += 1;
        m.zones[z].last_seq = m.zones[z].last_seq.max(m.seq[lba]);
    }
    let trims: Vec<u32> = m.trims.keys().copied().collect();
    for pba in trims {
        let z = zone_of(m, pba)?;
        m.p2l[pba as usize] = P_TRIM;
        m.zones[z].valid += 1;
    }
    m.free = (0..m.layout.data_zones)
        .filter(|z| m.zones[*z as usize].use_ == ZoneUse::Free)
        .collect();
    m.verify().map_err(FtlError::Corrupt)
}
