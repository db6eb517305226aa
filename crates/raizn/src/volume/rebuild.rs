//! Replacing a failed member and rebuilding it online: the new member is formatted into the
//! array, then filled zone by zone (active zones first, then finished ones), each only up to
//! its logical write pointer, from the survivors, while client I/O goes on.
//!
//! Fault model: a survivor may fail during the rebuild (a second failure: the array is
//! failed, loudly, and the rebuild stops); the new member may fail (the rebuild stops and
//! the array stays degraded, as before the replace); power may be lost (the superblocks
//! still name the member as failed until the rebuild completes, so the array reopens
//! degraded and never reads the new member's unrebuilt zones; `replace_member` with the same
//! device starts the rebuild over).
//!
//! Until a zone is rebuilt the new member counts as failed for that zone (`failed_in`):
//! writes skip it, reads rebuild its units from the others. A zone is rebuilt under the
//! zone's lock, so no write to it runs meanwhile; once it is marked rebuilt, writes to it go
//! to the new member too.

use zns::{NvmeResult, NvmeStatus, ZoneAction, ZoneState, ZonedDevice};

use super::health::Failed;
use super::{Member, RaiznError, RaiznVolume};
use crate::layout::GENERAL_ZONE;

/// How far a rebuild is, for a progress bar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildProgress {
    /// The member being rebuilt.
    pub member: usize,
    /// Member blocks written so far.
    pub blocks_done: u64,
    /// Member blocks to write in all: what the zones held when the rebuild started, plus
    /// what writes added to zones before the rebuild reached them.
    pub blocks_total: u64,
    pub zones_done: u32,
    pub zones_total: u32,
    /// Of `blocks_done`, the blocks an earlier run of this rebuild (cut short by power loss
    /// or stopped) completed and this one kept.
    pub blocks_resumed: u64,
    /// Of `zones_done`, the zones kept from an earlier run.
    pub zones_resumed: u32,
}

/// What a call of `replace_member_up_to` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Whether the array is whole (the rebuild completed).
    pub whole: bool,
    /// The rebuild's progress when the call ended.
    pub progress: RebuildProgress,
}

/// A rebuild in progress, behind the `State` lock.
#[derive(Clone, Debug)]
pub(super) struct Rebuild {
    pub member: usize,
    /// The superblock generation the new member was formatted with.
    pub target: u64,
    /// Whether each logical zone is rebuilt on the new member.
    pub rebuilt: Vec<bool>,
    pub progress: RebuildProgress,
}

impl RaiznVolume {
    /// The members that count as failed for `zone`: the failed members, except the one a
    /// rebuild runs onto on a zone it already filled.
    pub(super) fn failed_in(&self, zone: u32) -> Failed {
        let st = self.state.lock();
        match &st.rebuild {
            Some(r) if st.health.failed.contains(r.member) => {
                match r.rebuilt.get(zone as usize).copied() {
                    Some(true) => st.health.failed.without(r.member),
                    _ => st.health.failed,
                }
            }
            _ => st.health.failed,
        }
    }

    /// The member being rebuilt, if a rebuild runs.
    pub(super) fn rebuilding(&self) -> Option<usize> {
        self.state.lock().rebuild.as_ref().map(|r| r.member)
    }

    /// Progress of the rebuild in progress; None when none runs.
    pub fn rebuild_progress(&self) -> Option<RebuildProgress> {
        self.state.lock().rebuild.as_ref().map(|r| r.progress)
    }

    /// Replaces failed member `index` by `new_member` and rebuilds it online; returns when
    /// the array is whole again. The new member must have the members' geometry and hold no
    /// data, unless it is a member of this array at this position (a rebuild cut short by
    /// power loss, or the failed member itself back): its zones are then reset.
    /// Client commands may run concurrently. A second failure during the rebuild fails the
    /// array (`TooManyFailed`); the new member failing leaves the array degraded.
    pub async fn replace_member(&self, index: usize, new_member: Member) -> Result<(), RaiznError> {
        self.replace_member_up_to(index, new_member, u32::MAX)
            .await
            .map(|_| ())
    }

    /// `replace_member` that rebuilds at most `zones_max` zones in this call (a rebuild in
    /// slices, say in quiet hours); reports whether the array is whole. When it is not, the
    /// array stays degraded with `index` failed, as before the call, and a later call with
    /// the same device goes on with the rest.
    pub async fn replace_member_up_to(
        &self,
        index: usize,
        new_member: Member,
        zones_max: u32,
    ) -> Result<RebuildReport, RaiznError> {
        let failed = {
            let st = self.state.lock();
            if st.health.broken.is_some() {
                drop(st);
                return Err(self.broken().unwrap_or(RaiznError::NotReplaceable {
                    member: index,
                    why: "the array is failed".into(),
                }));
            }
            st.health.failed
        };
        if index >= self.members.len() {
            return Err(RaiznError::NoSuchMember {
                member: index,
                members: self.members.len(),
            });
        }
        if !failed.contains(index) || self.rebuilding().is_some() {
            return Err(RaiznError::NotReplaceable {
                member: index,
                why: match failed.as_slice() {
                    _ if self.rebuilding().is_some() => "a rebuild is already running".into(),
                    [] => "the array is not degraded".into(),
                    [f] => format!("member {f} is the failed one"),
                    f => format!("members {f:?} are the failed ones"),
                },
            });
        }
        let (target, trusted) = self.format_replacement(index, &new_member).await?;
        let slot = self.slots.get(index).ok_or(RaiznError::NoSuchMember {
            member: index,
            members: self.members.len(),
        })?;
        // The new member's partial-parity log is empty: forget the old member's.
        if let Some(log) = self.pp.get(index) {
            *log.lock().await = super::pplog::PpLog::default();
        }
        // Nor does it hold the old member's stale ranges: the rebuild writes every block in
        // place.
        self.reloc.lock().drop_member(index);
        slot.set(new_member);
        self.start_rebuild(index, target, &trusted);
        let r = self.rebuild_all(index, zones_max).await;
        if !matches!(r, Ok(RebuildReport { whole: true, .. })) {
            // Cut short (an error, or the slice is done): the member counts as failed in
            // every zone again, and writes skip it until a rebuild resumes.
            self.state.lock().rebuild = None;
        }
        r
    }

    /// Checks the new member and writes its superblock; returns the superblock generation
    /// that names the new member (the rebuild's *target*) and the zones an earlier run of
    /// this rebuild completed (`rebuild_log.rs`). A device this rebuild already formatted
    /// keeps those zones and has the rest reset, and its superblock is written again at the
    /// same generation. Any other device has all its zones reset, then a superblock of a new
    /// generation at the start of its general zone and on every survivor (which still name
    /// it failed), FUA.
    async fn format_replacement(
        &self,
        index: usize,
        dev: &Member,
    ) -> Result<(u64, Vec<(u32, u64)>), RaiznError> {
        let err = |what| {
            move |status| RaiznError::Member {
                member: index,
                what,
                status,
            }
        };
        let g = self.layout.member_geometry();
        if dev.geometry() != g {
            return Err(RaiznError::Foreign {
                member: index,
                why: "the new member's geometry differs from the array's members'".into(),
            });
        }
        let zones = dev
            .report_zones(0, zns::ReportFilter::All, false, usize::MAX)
            .await
            .map_err(err("reporting the new member's zones"))?;
        let mut log = self.general.lock().await;
        let mut resume = None;
        if zones.zones.iter().any(|z| z.state != ZoneState::Empty) {
            let ours = super::general::read_general(index, dev.as_ref())
                .await
                .ok()
                .filter(|img| {
                    img.sb.array_uuid == self.uuid && img.sb.member_index as usize == index
                });
            let Some(img) = ours else {
                return Err(RaiznError::HoldsData { member: index });
            };
            resume = self
                .trusted_zones(&log, index, img.sb.generation, &zones.zones)
                .map(|t| (img.sb.generation, t));
            let keep = resume.as_ref().map_or(&[][..], |(_, t)| &t[..]);
            self.reset_except(dev, &zones.zones, keep)
                .await
                .map_err(err("resetting the new member"))?;
        }
        let generation = match &resume {
            Some((target, _)) => *target,
            None => self.state.lock().health.generation + 1,
        };
        // A superblock never names its own member failed; the survivors' name it until the
        // rebuild completes, and open takes the union. It names the other failed member, if
        // any (m = 2): that one stays failed after this rebuild.
        let failed = self.state.lock().health.failed;
        let block = self
            .superblock_of(index, generation, failed.without(index))
            .map_err(|why| RaiznError::NotFormatted { member: index, why })?;
        let md = vec![0u8; g.oob_size as usize];
        dev.write(
            g.zone_start(GENERAL_ZONE),
            &block,
            (g.oob_size > 0).then_some(&md[..]),
            true,
        )
        .await
        .map_err(err("writing the new member's superblock"))?;
        if let Some(w) = log.wp.get_mut(index) {
            *w = 1;
        }
        if let Some((target, trusted)) = resume {
            tracing::info!(
                member = index,
                zones = trusted.len(),
                "RAIZN rebuild resumes; zones rebuilt before are kept"
            );
            log.rebuilt = Some(crate::meta::RebuiltZones {
                member: index as u32,
                target_generation: target,
                zones: trusted.clone(),
            });
            return Ok((target, trusted));
        }
        // The survivors get the same generation, so every member's newest superblock agrees.
        let survivors: Vec<usize> = (0..self.members.len())
            .filter(|m| !failed.contains(*m))
            .collect();
        self.append_general(
            &mut log,
            &survivors,
            super::general::Rec::Superblock(generation, failed),
            true,
        )
        .await
        .map_err(err("writing the survivors' superblocks"))?;
        self.state.lock().health.generation = generation;
        log.rebuilt = Some(crate::meta::RebuiltZones {
            member: index as u32,
            target_generation: generation,
            zones: Vec::new(),
        });
        Ok((generation, Vec::new()))
    }

    /// Starts the bookkeeping of a rebuild of `member` (its superblock generation `target`):
    /// the `trusted` zones rebuilt by an earlier run, the total estimated from the zones'
    /// write pointers now.
    fn start_rebuild(&self, member: usize, target: u64, trusted: &[(u32, u64)]) {
        let l = self.layout;
        let cap = l.member_geometry().zone_capacity;
        let mut st = self.state.lock();
        let mut total = 0;
        for z in 0..self.geo.zone_count {
            if let Some(lz) = st.table.zone(z) {
                total += match lz.state {
                    ZoneState::Full => cap,
                    ZoneState::Offline => 0,
                    _ => l.member_blocks_at(member, lz.wp),
                };
            }
        }
        let mut rebuilt = vec![false; self.geo.zone_count as usize];
        for (z, _) in trusted {
            if let Some(r) = rebuilt.get_mut(*z as usize) {
                *r = true;
            }
        }
        let zones_resumed = trusted.len() as u32;
        let blocks_resumed = u64::from(zones_resumed) * cap;
        st.rebuild = Some(super::rebuild::Rebuild {
            member,
            target,
            rebuilt,
            progress: RebuildProgress {
                member,
                blocks_done: blocks_resumed,
                blocks_total: total,
                zones_done: zones_resumed,
                zones_total: self.geo.zone_count,
                blocks_resumed,
                zones_resumed,
            },
        });
    }

    /// Rebuilds every zone (active ones first), then makes the array whole: every member
    /// flushed, and a superblock generation naming no failed member on all of them.
    async fn rebuild_all(
        &self,
        member: usize,
        zones_max: u32,
    ) -> Result<RebuildReport, RaiznError> {
        let mut order: Vec<u32> = (0..self.geo.zone_count).collect();
        {
            let st = self.state.lock();
            // Active zones first (the paper's order): their writes stop being degraded
            // soonest; stable sort keeps zone order within each class.
            order.sort_by_key(|z| !st.table.zone(*z).is_some_and(|lz| lz.state.is_active()));
        }
        let err = |status| match self.broken() {
            Some(e) => e,
            None => RaiznError::Member {
                member,
                what: "rebuilding",
                status,
            },
        };
        {
            // Zones an earlier run completed are not done again.
            let st = self.state.lock();
            let done = |z: &u32| {
                st.rebuild
                    .as_ref()
                    .and_then(|r| r.rebuilt.get(*z as usize).copied())
                    .unwrap_or(false)
            };
            order.retain(|z| !done(z));
        }
        // The record of a full zone (a flush of the new member, then FUA records) runs
        // while the next zone is rebuilt, so the new member's writes do not stall on it.
        let mut record = None;
        for (k, zone) in order.into_iter().enumerate() {
            if k as u64 >= u64::from(zones_max) {
                self.record_zone(member, record.take()).await.map_err(err)?;
                tracing::info!(member, zones = k, "RAIZN rebuild paused");
                let progress = self.rebuild_progress().unwrap_or_default();
                return Ok(RebuildReport {
                    whole: false,
                    progress,
                });
            }
            let (recorded, rebuilt) = futures::join!(
                self.record_zone(member, record.take()),
                self.rebuild_zone(zone, member)
            );
            recorded.map_err(err)?;
            record = rebuilt.map_err(err)?;
            if self.rebuilding() != Some(member) {
                // The new member failed while clients wrote to it: the rebuild is off.
                return Err(err(NvmeStatus::NamespaceNotReady));
            }
        }
        self.record_zone(member, record.take()).await.map_err(err)?;
        self.flush_members().await.map_err(err)?;
        self.seed_generations(member).await.map_err(err)?;
        let progress;
        {
            let mut st = self.state.lock();
            if st.rebuild.as_ref().map(|r| r.member) != Some(member) {
                return Err(err(NvmeStatus::NamespaceNotReady));
            }
            st.health.failed = st.health.failed.without(member);
            progress = st.rebuild.take().map(|r| r.progress).unwrap_or_default();
        }
        tracing::info!(member, "RAIZN rebuild complete; the array is whole");
        self.persist_health().await.map_err(err)?;
        self.forget_rebuild().await;
        Ok(RebuildReport {
            whole: true,
            progress,
        })
    }

    /// Records `rec` (target generation, zone, zone generation) of a full zone `rebuild_zone`
    /// completed, then counts the zone done: every full zone `zones_done` counts is kept by
    /// a resume.
    async fn record_zone(&self, member: usize, rec: Option<(u64, u32, u64)>) -> NvmeResult<()> {
        let Some((target, zone, generation)) = rec else {
            return Ok(());
        };
        self.record_rebuilt(member, target, zone, generation)
            .await?;
        if let Some(r) = self.state.lock().rebuild.as_mut() {
            r.progress.zones_done += 1;
        }
        Ok(())
    }

    /// Rebuilds `zone` on `member` under the zone's lock: the member's units below the zone's
    /// write pointer (data from the other units and parity, parity from the data), the
    /// member zone's state, then the partial-parity record of the incomplete stripe when
    /// the member holds its parity. A Full zone is returned to be recorded (`record_zone`;
    /// a Full zone cannot change until a reset gives it a new generation, so a rebuild cut
    /// short keeps it); any other zone is counted done here.
    async fn rebuild_zone(&self, zone: u32, member: usize) -> NvmeResult<Option<(u64, u32, u64)>> {
        let mut zio = self.lock_settled(zone).await?;
        self.check_usable()?;
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let cap = self.geo.zone_capacity;
        let z = self
            .state
            .lock()
            .table
            .zone(zone)
            .ok_or(NvmeStatus::LbaOutOfRange)?;
        let full = z.state == ZoneState::Full;
        let wp = if full { cap } else { z.wp };
        let mend = match z.state {
            ZoneState::Offline => 0,
            ZoneState::Full => l.member_geometry().zone_capacity,
            _ => l.member_blocks_at(member, wp),
        };
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        let zslba = l.member_zone_start(zone);
        let bs = self.block_size();
        // Stripes per batch: one member command's worth. The survivors' reads of a batch
        // overlap the new member's write of the one before (two batches in memory), so the
        // rebuild runs at the new member's write bandwidth rather than read plus write.
        let batch = (u64::from(l.member_geometry().mdts_blocks) / su).max(1);
        let mut read_at = 0u64;
        let mut pending: Option<(u64, Vec<u8>, Vec<u8>)> = None;
        while read_at < mend || pending.is_some() {
            let write = async {
                match &pending {
                    Some((at, out, out_meta)) => {
                        self.write_member(member, zslba + at, out, out_meta).await?;
                        Ok(Some((out.len() / bs) as u64))
                    }
                    None => Ok(None),
                }
            };
            let read = async {
                match read_at < mend {
                    true => self
                        .rebuild_batch(zone, member, read_at, mend, wp, full, batch)
                        .await
                        .map(Some),
                    false => Ok(None),
                }
            };
            let (w, r): (NvmeResult<Option<u64>>, NvmeResult<_>) = futures::join!(write, read);
            if let Some(blocks) = w? {
                if let Some(r) = self.state.lock().rebuild.as_mut() {
                    r.progress.blocks_done += blocks;
                    r.progress.blocks_total = r.progress.blocks_total.max(r.progress.blocks_done);
                }
            }
            pending = match r? {
                Some((out, out_meta)) => {
                    let at = read_at;
                    read_at += (out.len() / bs) as u64;
                    Some((at, out, out_meta))
                }
                None => None,
            };
            // Members that complete at once (file images) would otherwise let a rebuild run
            // to its end in one poll, starving client commands and progress reports on a
            // single-threaded runtime.
            tokio::task::yield_now().await;
        }
        let member_cap = l.member_geometry().zone_capacity;
        let action = match z.state {
            ZoneState::Full => Some(ZoneAction::Finish),
            // Units that reach the member zone's capacity leave it Full, as on the
            // survivors holding such units; closing a Full zone is an invalid transition.
            ZoneState::Closed | ZoneState::ReadOnly if mend > 0 && mend < member_cap => {
                Some(ZoneAction::Close)
            }
            _ => None,
        };
        if z.state == ZoneState::Closed && mend == 0 {
            // Closed without data: the members remember it as opened and closed.
            dev.zone_mgmt(ZoneAction::Open, zslba, false).await?;
            dev.zone_mgmt(ZoneAction::Close, zslba, false).await?;
        }
        if let Some(a) = action {
            dev.zone_mgmt(a, zslba, false).await?;
        }
        let (target, generation) = {
            let mut st = self.state.lock();
            let generation = st.generations.get(zone as usize).copied();
            let Some(r) = st.rebuild.as_mut() else {
                return Err(NvmeStatus::NamespaceNotReady);
            };
            if let Some(b) = r.rebuilt.get_mut(zone as usize) {
                *b = true;
            }
            (r.target, generation)
        };
        if let (true, Some(g)) = (full, generation) {
            return Ok(Some((target, zone, g)));
        }
        if let Some(r) = self.state.lock().rebuild.as_mut() {
            r.progress.zones_done += 1;
        }
        let incomplete = z.state.is_active() && !wp.is_multiple_of(sdb);
        if incomplete && l.parity_members(wp / sdb).any(|pm| pm == member) {
            self.load_buffer(zone, &mut zio, wp / sdb, wp).await?;
            let recs = self.partial_parity_of(zone, &zio, wp)?;
            self.log_partial_parity(recs).await?;
        }
        Ok(None)
    }

    /// The new member's blocks of the batch of stripes from member block `at` (at most
    /// `batch` stripes, below member block `mend`): its data units read (rebuilt from the
    /// others) and its parity units computed from the data, with their metadata.
    #[allow(clippy::too_many_arguments)]
    async fn rebuild_batch(
        &self,
        zone: u32,
        member: usize,
        at: u64,
        mend: u64,
        wp: u64,
        full: bool,
        batch: u64,
    ) -> NvmeResult<(Vec<u8>, Vec<u8>)> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (bs, oob) = (self.block_size(), self.oob());
        let s0 = at / su;
        let s1 = (s0 + batch).min(mend.div_ceil(su));
        let lend = (s1 * sdb).min(wp);
        let n_log = lend - s0 * sdb;
        let mut data = vec![0u8; (s1 - s0) as usize * sdb as usize * bs];
        let mut meta = vec![0u8; (s1 - s0) as usize * sdb as usize * oob];
        self.read_zone(
            zone,
            s0 * sdb,
            n_log,
            &mut data[..n_log as usize * bs],
            &mut meta[..n_log as usize * oob],
            full,
        )
        .await?;
        let mut out = Vec::new();
        let mut out_meta = Vec::new();
        for s in s0..s1 {
            let n = (mend - s * su).min(su) as usize;
            let base = (s - s0) as usize * sdb as usize;
            let unit = |k: u64| base + (k * su) as usize;
            match l.unit_of_member(s, member) {
                Some(k) => {
                    out.extend_from_slice(&data[unit(k) * bs..(unit(k) + n) * bs]);
                    out_meta.extend_from_slice(&meta[unit(k) * oob..(unit(k) + n) * oob]);
                }
                None => {
                    // A parity unit is on the members only for a complete stripe (or one a
                    // Finish sealed), so `n` is the whole unit, as the code needs.
                    let j = l.parity_of_member(s, member).unwrap_or(0) as usize;
                    let b =
                        &data[unit(0) * bs..(unit(0) + l.data_units() as usize * su as usize) * bs];
                    let bm = &meta
                        [unit(0) * oob..(unit(0) + l.data_units() as usize * su as usize) * oob];
                    let units = |all: &'_ [u8], size: usize| -> Vec<Vec<u8>> {
                        (0..l.data_units() as usize)
                            .map(|k| all[k * su as usize * size..][..n * size].to_vec())
                            .collect()
                    };
                    let (ud, um) = (units(b, bs), units(bm, oob));
                    let code = l.code();
                    let bad = |_| NvmeStatus::InternalError;
                    let refs: Vec<&[u8]> = ud.iter().map(|u| &u[..]).collect();
                    let p = code.encode(&refs).map_err(bad)?;
                    let refs: Vec<&[u8]> = um.iter().map(|u| &u[..]).collect();
                    let pm = code.encode(&refs).map_err(bad)?;
                    out.extend_from_slice(p.get(j).ok_or(NvmeStatus::InternalError)?);
                    out_meta.extend_from_slice(pm.get(j).ok_or(NvmeStatus::InternalError)?);
                }
            }
        }
        Ok((out, out_meta))
    }

    /// Writes a contiguous run to one member in MDTS-sized commands.
    async fn write_member(&self, m: usize, lba: u64, data: &[u8], meta: &[u8]) -> NvmeResult<()> {
        let dev = self.members.get(m).ok_or(NvmeStatus::InternalError)?;
        let (bs, oob) = (self.block_size(), self.oob());
        let mdts = u64::from(self.layout.member_geometry().mdts_blocks);
        let total = (data.len() / bs) as u64;
        let mut done = 0u64;
        while done < total {
            let n = mdts.min(total - done);
            let (a, b) = (done as usize, (done + n) as usize);
            let md = (oob > 0).then(|| &meta[a * oob..b * oob]);
            dev.write(lba + done, &data[a * bs..b * bs], md, false)
                .await?;
            done += n;
        }
        Ok(())
    }
}

/// A member position whose device can be exchanged by `replace_member`; every command goes
/// to the device in it at the time.
pub(super) struct Slot {
    dev: parking_lot::RwLock<Member>,
}

impl Slot {
    pub fn new(dev: Member) -> Slot {
        Slot {
            dev: parking_lot::RwLock::new(dev),
        }
    }

    fn get(&self) -> Member {
        self.dev.read().clone()
    }

    fn set(&self, dev: Member) {
        *self.dev.write() = dev;
    }
}

#[async_trait::async_trait]
impl ZonedDevice for Slot {
    fn geometry(&self) -> zns::Geometry {
        self.get().geometry()
    }
    async fn read(&self, lba: zns::Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.get().read(lba, buf, meta).await
    }
    async fn write(
        &self,
        lba: zns::Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<()> {
        self.get().write(lba, data, meta, fua).await
    }
    async fn append(
        &self,
        zslba: zns::Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<zns::Lba> {
        self.get().append(zslba, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: zns::Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.get().write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> NvmeResult<()> {
        self.get().flush().await
    }
    async fn copy(&self, sources: &[zns::CopyRange], dest: zns::Lba, fua: bool) -> NvmeResult<()> {
        self.get().copy(sources, dest, fua).await
    }
    async fn zone_mgmt(
        &self,
        action: ZoneAction,
        zslba: zns::Lba,
        select_all: bool,
    ) -> NvmeResult<()> {
        self.get().zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: zns::Lba,
        filter: zns::ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<zns::ZoneReport> {
        self.get()
            .report_zones(lba, filter, partial, max_zones)
            .await
    }
    fn die_stripe(&self) -> Option<zns::DieStripe> {
        self.get().die_stripe()
    }
    fn identify_mapping(&self) -> Option<zns::ChunkMapping> {
        self.get().identify_mapping()
    }
    async fn zone_compaction(&self, extents: &[zns::CompactionExtent]) -> NvmeResult<()> {
        self.get().zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: zns::Lba, valid: &[u8]) -> NvmeResult<()> {
        self.get().tl_open(zslba, valid).await
    }
}
