//! Format and open of a RAIZN array: superblocks on every member, and the recovery that
//! derives every logical zone from its member zones after a clean shutdown or a power loss.
//!
//! Fault model: each member zone holds a prefix of what was written to it (power loss), or
//! was moved to Read Only / Offline by a device fault. Recovery trusts only what every data
//! unit below the logical write pointer proves present; see docs/DESIGN.md ("Recovery").

use futures::future::join_all;
use parking_lot::Mutex;
use zns::{Geometry, NvmeStatus, ReportFilter, ZoneAction, ZoneDescriptor, ZoneState};

use super::general::{self, GeneralImage, GeneralLog};
use super::health::{member_failed, Failed, Health, ReadSb};
use super::pplog::{Loaded, PpLog};
use super::rebuild::Slot;
use super::{Member, PpStats, RaiznConfig, RaiznError, RaiznVolume, State, ZoneIo};
use crate::layout::{ArrayLayout, GENERAL_ZONE};
use crate::meta::{Superblock, ZoneLogAction};
use crate::zones::{LogicalZone, ZoneTable};

fn member_err(member: usize, what: &'static str) -> impl Fn(NvmeStatus) -> RaiznError {
    move |status| RaiznError::Member {
        member,
        what,
        status,
    }
}

/// Every zone descriptor of a member.
async fn member_zones(member: usize, dev: &Member) -> Result<Vec<ZoneDescriptor>, RaiznError> {
    let r = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await
        .map_err(member_err(member, "reporting zones"))?;
    Ok(r.zones)
}

impl RaiznVolume {
    /// Formats `members` as a new array: checks their geometries, refuses members holding
    /// data unless `force` (which resets every zone), writes a superblock on each (FUA), then
    /// opens the array.
    pub async fn format(
        members: Vec<Member>,
        cfg: RaiznConfig,
        force: bool,
    ) -> Result<RaiznVolume, RaiznError> {
        let geos: Vec<Geometry> = members.iter().map(|m| m.geometry()).collect();
        let layout = ArrayLayout::new(&geos, cfg.parity, cfg.stripe_unit_bytes)?
            .with_log_zones(cfg.log_zones)?;
        let g = layout.member_geometry();
        for (i, dev) in members.iter().enumerate() {
            let used = member_zones(i, dev)
                .await?
                .iter()
                .any(|z| z.state != ZoneState::Empty);
            if used && !force {
                return Err(RaiznError::HoldsData { member: i });
            }
            if used {
                dev.zone_mgmt(ZoneAction::Reset, 0, true)
                    .await
                    .map_err(member_err(i, "resetting zones for a forced format"))?;
            }
        }
        for (i, dev) in members.iter().enumerate() {
            let sb = Superblock {
                array_uuid: cfg.array_uuid,
                members: members.len() as u32,
                member_index: i as u32,
                parity: cfg.parity,
                su_blocks: layout.su_blocks() as u32,
                meta_zones: layout.meta_zones(),
                member_geometry: g,
                generation: 1,
                failed_member: None,
                second_failed_member: None,
            };
            let block = sb
                .encode()
                .map_err(|why| RaiznError::NotFormatted { member: i, why })?;
            let meta = vec![0u8; g.oob_size as usize];
            let lba = g.zone_start(GENERAL_ZONE);
            dev.write(lba, &block, (g.oob_size > 0).then_some(&meta[..]), true)
                .await
                .map_err(member_err(i, "writing the superblock"))?;
        }
        RaiznVolume::open(members).await
    }

    /// Opens an array: every member's superblock must name the same array with this member
    /// at its position; then every logical zone is recovered from its member zones. A member
    /// that does not answer, or that the survivors' superblocks record as failed, opens the
    /// array degraded (see `open_degraded`).
    pub async fn open(members: Vec<Member>) -> Result<RaiznVolume, RaiznError> {
        RaiznVolume::open_degraded(members.into_iter().map(Some).collect()).await
    }

    /// Opens an array some of whose members may be absent (`None`). At most the parity count
    /// of members may be absent, unanswering or recorded failed, or open refuses naming
    /// them; a degraded open records the failure in a new superblock generation.
    pub async fn open_degraded(
        mut members: Vec<Option<Member>>,
    ) -> Result<RaiznVolume, RaiznError> {
        // A member that fails after its superblock was read (reporting zones, reading its
        // log) is a failed member too: the open starts over without it, at most once per
        // member (bounded by the member count).
        for _ in 0..members.len() {
            match RaiznVolume::open_once(members.clone()).await {
                Err(RaiznError::Member { member, status, .. })
                    if member_failed(status)
                        && members.get(member).is_some_and(|m| m.is_some()) =>
                {
                    tracing::warn!(member, %status, "RAIZN member failed during open");
                    if let Some(m) = members.get_mut(member) {
                        *m = None;
                    }
                }
                other => return other,
            }
        }
        RaiznVolume::open_once(members).await
    }

    async fn open_once(members: Vec<Option<Member>>) -> Result<RaiznVolume, RaiznError> {
        let n = members.len();
        let mut sbs: Vec<Option<Superblock>> = Vec::new();
        let mut images: Vec<Option<GeneralImage>> = Vec::new();
        let mut lost: Vec<usize> = Vec::new();
        for (i, dev) in members.iter().enumerate() {
            let Some(dev) = dev else {
                lost.push(i);
                sbs.push(None);
                images.push(None);
                continue;
            };
            // Before anything resets a swap zone (super::swap).
            let read = match super::swap::settle_swap(dev.as_ref()).await {
                Ok(copied) => {
                    if copied {
                        tracing::info!(member = i, "completed a collection cut by power loss");
                    }
                    general::read_general(i, dev.as_ref()).await
                }
                Err(status) if member_failed(status) => Err(ReadSb::Device(status)),
                Err(status) => return Err(member_err(i, "settling the swap zone")(status)),
            };
            match read {
                Ok(img) => {
                    sbs.push(Some(img.sb));
                    images.push(Some(img));
                }
                Err(ReadSb::Device(status)) if member_failed(status) => {
                    tracing::warn!(member = i, %status, "RAIZN member does not answer at open");
                    lost.push(i);
                    sbs.push(None);
                    images.push(None);
                }
                Err(ReadSb::Device(status)) => {
                    return Err(member_err(i, "reading the superblock")(status))
                }
                Err(ReadSb::Invalid(e)) => return Err(e),
            }
        }
        // The newest generation is the reference (a stale member may be the failed one); of
        // equals, the lowest position, so a stranger is named rather than its neighbours.
        let first = sbs
            .iter()
            .flatten()
            .fold(None::<Superblock>, |best, sb| match best {
                Some(b) if b.generation >= sb.generation => Some(b),
                _ => Some(*sb),
            })
            .ok_or(RaiznError::TooManyFailed {
                members: lost.clone(),
                parity: 0,
            })?;
        for (i, dev) in members.iter().enumerate() {
            if let (Some(dev), Some(sb)) = (dev, sbs.get(i).copied().flatten()) {
                check_member(i, &sb, &first, n, &dev.geometry())?;
            }
        }
        // A member that a newer superblock names failed is stale: its own superblock may
        // name a member failed long ago and rebuilt since (with m = 2, the other member
        // failed when it was replaced), which the newer generations superseded.
        let names = |sb: &Superblock, i: usize| {
            [sb.failed_member, sb.second_failed_member].contains(&Some(i as u32))
        };
        let stale = |i: usize, generation: u64| {
            sbs.iter()
                .flatten()
                .any(|sb| sb.generation > generation && names(sb, i))
        };
        let recorded = sbs
            .iter()
            .enumerate()
            .filter_map(|(i, sb)| sb.filter(|sb| !stale(i, sb.generation)))
            .flat_map(|sb| [sb.failed_member, sb.second_failed_member])
            .flatten();
        for f in recorded {
            if !lost.contains(&(f as usize)) {
                lost.push(f as usize);
            }
        }
        lost.sort_unstable();
        if lost.len() > first.parity as usize {
            return Err(RaiznError::TooManyFailed {
                members: lost,
                parity: first.parity,
            });
        }
        let slots: Vec<std::sync::Arc<Slot>> = members
            .into_iter()
            .map(|m| {
                let dev = match m {
                    Some(m) => m,
                    None => std::sync::Arc::new(zns::Absent {
                        geo: first.member_geometry,
                    }) as Member,
                };
                std::sync::Arc::new(Slot::new(dev))
            })
            .collect();
        let (members, tracked) = super::persist::track(&slots, first.meta_zones);
        let geos: Vec<Geometry> = members.iter().map(|m| m.geometry()).collect();
        let su_bytes = u64::from(first.su_blocks) * u64::from(first.member_geometry.block_size);
        let layout = ArrayLayout::new(&geos, first.parity, su_bytes)?
            .with_log_zones(first.meta_zones.saturating_sub(2))?;
        let geo = layout.logical_geometry();
        if geo.max_active != layout.members_active_limit() {
            // Derived, not persisted: an array formatted before the one-zone log's limit
            // opens with it (docs/DESIGN.md, "The one-zone log's active limit").
            tracing::warn!(
                active = geo.max_active,
                members_allow = layout.members_active_limit(),
                "one log zone per member: the active zone limit is lowered to what its log protects"
            );
        }
        let zones = geo.zone_count as usize;
        let failed = Failed::of(&lost).ok_or(RaiznError::TooManyFailed {
            members: lost.clone(),
            parity: first.parity,
        })?;
        let persisted: Vec<usize> = [first.failed_member, first.second_failed_member]
            .into_iter()
            .flatten()
            .map(|f| f as usize)
            .collect();
        // A lost member's general zone is not trusted (it may be stale).
        for l in &lost {
            if let Some(img) = images.get_mut(*l) {
                *img = None;
            }
        }
        let folded = general::fold(&images, &geo)?;
        let general_wp: Vec<u64> = images
            .iter()
            .map(|i| i.as_ref().map_or(0, |i| i.wp))
            .collect();
        let vol = RaiznVolume {
            layout,
            geo,
            members,
            tracked,
            persist_stats: Mutex::new(super::PersistStats::default()),
            // Every member until the members' logs absorb the extra torn stripes that skipped
            // flushes leave at a power cut (docs/DESIGN.md, "Persistence state").
            flush_every: Mutex::new(true),
            slots,
            uuid: first.array_uuid,
            sb: first,
            general: tokio::sync::Mutex::new(GeneralLog {
                wp: general_wp,
                seq: folded.seq.clone(),
                pending: Default::default(),
                // Records of a rebuild onto the member still failed; others are history.
                rebuilt: folded
                    .rebuilt
                    .clone()
                    .filter(|r| failed.contains(r.member as usize)),
                // Every zone open finds Full (`note_full_zones`, below).
                finished: Default::default(),
            }),
            swap: (0..n).map(|_| tokio::sync::Mutex::new(false)).collect(),
            state: Mutex::new(State {
                table: ZoneTable::new(Vec::new(), geo.zone_size, geo.zone_capacity, 0, 0),
                generations: folded.generations.clone(),
                health: Health {
                    parity: first.parity as usize,
                    failed,
                    broken: None,
                    persisted: Failed::of(&persisted).unwrap_or_default(),
                    generation: first.generation,
                    last_cause: None,
                },
                rebuild: None,
            }),
            zone_io: (0..zones)
                .map(|_| tokio::sync::Mutex::new(ZoneIo::default()))
                .collect(),
            pipes: (0..zones)
                .map(|_| super::append::ZonePipe::new(layout.members()))
                .collect(),
            pp: (0..layout.members())
                .map(|_| tokio::sync::Mutex::new(PpLog::default()))
                .collect(),
            pp_stats: Mutex::new(PpStats::default()),
            meta_stats: Mutex::new(super::MetaStats::default()),
            reloc: Mutex::new(crate::reloc::Relocations::default()),
            reloc_stats: Mutex::new(super::RelocStats::default()),
        };
        let log_err = |(member, status)| RaiznError::Member {
            member,
            what: "opening the partial-parity log",
            status,
        };
        let mut loaded = vol.load_logs().await.map_err(log_err)?;
        let recovered = vol.recover(&mut loaded, &folded).await;
        vol.failed_while_recovering(&lost)?;
        recovered?;
        let opened = vol.finish_logs(loaded).await.map_err(log_err);
        vol.failed_while_recovering(&lost)?;
        opened?;
        let mut redo: Vec<u32> = folded.finishes.keys().copied().collect();
        redo.sort_unstable();
        for zone in redo {
            vol.complete_finish(zone)
                .await
                .map_err(vol.recovery_err("completing a finish cut short by power loss"))?;
        }
        vol.note_full_zones().await;
        vol.checkpoint_general().await?;
        // The failure the open started with, or one a member met during recovery (its
        // commands note it and go on degraded, as at run time).
        vol.persist_health()
            .await
            .map_err(vol.recovery_err("recording the failure in the superblocks"))?;
        Ok(vol)
    }

    /// Err naming a member that failed while recovery ran (completing a reset, reading a
    /// stripe) and that the open did not start without (`lost`), so `open_degraded` starts
    /// over without it. Until the logs are rewritten, recovery counts that member's units
    /// as present: its zones' write pointers may include units of incomplete stripes that
    /// nothing can rebuild without it (their partial parity was never made durable), and
    /// parity repair may need them. Once the logs hold a record of every incomplete stripe
    /// (`finish_logs`), a failure is served degraded like any other.
    fn failed_while_recovering(&self, lost: &[usize]) -> Result<(), RaiznError> {
        let h = self.state.lock().health;
        if h.broken.is_some() {
            return Ok(());
        }
        let Some(member) = h
            .failed
            .as_slice()
            .iter()
            .copied()
            .find(|m| !lost.contains(m))
        else {
            return Ok(());
        };
        let status = match h.last_cause {
            Some((m, status)) if m == member => status,
            // Noted without a command's answer: a member that stops answering.
            _ => NvmeStatus::NamespaceNotReady,
        };
        Err(RaiznError::Member {
            member,
            what: "failing while open recovered the zones",
            status,
        })
    }

    /// The error of a recovery step run through the volume's own commands, which note a
    /// member failing and go on degraded: the two members when a second one failed, else
    /// the step's status (never a member's name, which would make the open start over
    /// without a member that did not fail).
    fn recovery_err(&self, what: &'static str) -> impl Fn(NvmeStatus) -> RaiznError + '_ {
        move |status| {
            self.broken()
                .unwrap_or(RaiznError::Recovery { what, status })
        }
    }

    /// Derives every logical zone from its member zones and repairs what a power loss left
    /// half done: missing parity of complete stripes, a finish or a reset that reached only
    /// some members. A failed member's zones are not asked; `failed_member_wp` stands in.
    async fn recover(
        &self,
        loaded: &mut Loaded,
        folded: &general::Folded,
    ) -> Result<(), RaiznError> {
        let failed = self.state.lock().health.failed;
        let mut all = Vec::new();
        for (i, dev) in self.members.iter().enumerate() {
            match failed.contains(i) {
                true => all.push(None),
                false => all.push(Some(member_zones(i, dev).await?)),
            }
        }
        let mut zones = Vec::new();
        for z in 0..self.geo.zone_count {
            let pz = (z + self.layout.meta_zones()) as usize;
            let mut descs = Vec::new();
            for (i, d) in all.iter().enumerate() {
                match d {
                    None => descs.push(None),
                    Some(d) => descs.push(Some(d.get(pz).copied().ok_or(RaiznError::Member {
                        member: i,
                        what: "reporting zones",
                        status: NvmeStatus::InvalidField,
                    })?)),
                }
            }
            if folded.resets.contains(&z) {
                // A logged reset that may have reached only some members: done again, logged
                // again first on the zone log's members, as a Reset at run time is. The
                // record found may be on one member only (the cut came between its writes),
                // and if that member fails now the open starts over without it: it must
                // still find the reset once member zones were reset here, or it takes the
                // zone for what the survivors hold (a zone finished before, back Full over
                // reset member zones).
                let generation = self.generation(z).unwrap_or(1).saturating_sub(1);
                let entry = general::ZoneLogEntry {
                    zone: z,
                    action: ZoneLogAction::Reset,
                    generation,
                    wp: 0,
                };
                self.log_zone(entry)
                    .await
                    .map_err(self.recovery_err("logging a reset cut short by power loss"))?;
                self.members_mgmt(ZoneAction::Reset, z)
                    .await
                    .map_err(self.recovery_err("completing a reset cut short by power loss"))?;
                self.general.lock().await.pending.remove(&z);
                zones.push(LogicalZone {
                    state: ZoneState::Empty,
                    wp: 0,
                    open_seq: 0,
                });
                continue;
            }
            let finish = folded.finishes.get(&z).copied();
            zones.push(
                self.recover_zone(z, &descs, loaded, finish, folded.legacy)
                    .await?,
            );
        }
        let g = self.geo;
        let mut st = self.state.lock();
        st.table = ZoneTable::new(
            zones,
            g.zone_size,
            g.zone_capacity,
            g.max_open,
            g.max_active,
        );
        // Every mount starts a new generation of every empty zone (docs/DESIGN.md).
        for z in 0..g.zone_count {
            if st.table.zone(z).map(|z| z.state) == Some(ZoneState::Empty) {
                if let Some(gen) = st.generations.get_mut(z as usize) {
                    *gen += 1;
                }
            }
        }
        Ok(())
    }

    /// One logical zone from its member zones (`descs[j]` is member j's; None for the
    /// failed member). `finish`: the zone was finished in its current generation (a logged
    /// Finish, cut short or completed), with its write pointer then; `legacy`: the general
    /// zones are of format version 1, which did not record completed finishes.
    async fn recover_zone(
        &self,
        zone: u32,
        descs: &[Option<ZoneDescriptor>],
        loaded: &mut Loaded,
        finish: Option<u64>,
        legacy: bool,
    ) -> Result<LogicalZone, RaiznError> {
        let l = self.layout;
        let cap = self.geo.zone_capacity;
        let live: Vec<ZoneDescriptor> = descs.iter().flatten().copied().collect();
        let lost = descs.len() - live.len();
        let member_cap = l.member_geometry().zone_capacity;
        let generation = self.generation(zone).unwrap_or(0);
        // What each member zone holds on the device, and what of it is valid: a torn stripe
        // found at an earlier open left stale blocks that only relocated ones stand in for.
        let device_wps: Vec<u64> = descs
            .iter()
            .map(|d| match d {
                Some(d) if d.state == ZoneState::Full => member_cap,
                Some(d) => d.wp - d.start,
                None => 0,
            })
            .collect();
        let mut wps: Vec<u64> = Vec::with_capacity(descs.len());
        for (m, w) in device_wps.iter().enumerate() {
            self.set_device_wp(m, zone, generation, *w);
            wps.push(self.member_valid_wp(m, zone, *w));
        }
        let mut cap_wp = cap;
        // Blocks the failed members may be counted for (rebuilt from parity or a record).
        let mut failed_blocks = 0;
        let fs: Vec<usize> = (0..descs.len()).filter(|m| descs[*m].is_none()).collect();
        if !fs.is_empty() {
            let (covers, limit) = self.failed_members_wp(zone, &fs, &wps, loaded);
            for (f, cover) in fs.iter().zip(covers) {
                if let Some(w) = wps.get_mut(*f) {
                    *w = cover;
                }
                failed_blocks += cover;
            }
            cap_wp = limit;
        }
        let readable = l.readable_prefix(&wps).min(cap_wp);
        let lz = |state, wp| LogicalZone {
            state,
            wp,
            open_seq: 0,
        };
        let offline = live
            .iter()
            .filter(|d| d.state == ZoneState::Offline)
            .count();
        if offline > 0 && offline + lost > l.parity() as usize {
            return Ok(lz(ZoneState::Offline, 0));
        }
        if live
            .iter()
            .any(|d| matches!(d.state, ZoneState::ReadOnly | ZoneState::Offline))
        {
            return Ok(lz(ZoneState::ReadOnly, readable));
        }
        // Survivors all Empty while the failed member's units of the first stripe are
        // covered by a record: the zone holds data only the record can rebuild.
        if live.iter().all(|d| d.state == ZoneState::Empty) && failed_blocks == 0 {
            return Ok(lz(ZoneState::Empty, 0));
        }
        // Member zones all Full make a Full zone when a Finish sealed it, or when they hold
        // every data block (written to the capacity). Otherwise a torn stripe filled them:
        // a member kept units of a write the cut took from the others (stale past its share
        // of the write pointer), while the member holding the stripe's parity failed, so
        // nothing on the survivors tells this from a Finish but the record of one.
        let sealed = finish.is_some() || readable >= cap || legacy;
        if sealed
            && live.iter().all(|d| d.state == ZoneState::Full)
            && !self.full_hides_stale_parity(zone, descs).await?
        {
            return Ok(lz(ZoneState::Full, cap));
        }
        if let Some(wp) = finish {
            // A logged finish some members did not reach: Closed at the write pointer it
            // logged (durable before it was logged) until `complete_finish` finishes it.
            // No stale range: the finish was logged after a flush of every member with
            // the zone's lock held, so its member zones hold exactly their share, the
            // partial stripe's parity (or a prefix of it) and what Finish sealed.
            let wp = wp.min(readable);
            self.repair_parity(zone, wp, &wps).await?;
            return Ok(lz(ZoneState::Closed, wp));
        }
        // Some members Full and others not, no finish logged: the members whose units reached
        // the capacity filled their zones by writing.
        let prefix = readable;
        if live.iter().all(|d| d.wp == d.start) && failed_blocks == 0 {
            // No data, some member zone Closed: the zone was closed without data.
            return Ok(lz(ZoneState::Closed, 0));
        }
        if prefix == 0 {
            // Nothing readable: stray units of a torn first stripe would block new writes.
            self.members_mgmt(ZoneAction::Reset, zone)
                .await
                .map_err(self.recovery_err("resetting a zone with a torn first stripe"))?;
            return Ok(lz(ZoneState::Empty, 0));
        }
        self.declare_torn(zone, prefix, descs, &device_wps);
        self.repair_parity(zone, prefix, &wps).await?;
        if prefix >= cap {
            // Written to its capacity, and the cut took only what follows the last data
            // unit (the last stripe's parity, repaired above, or the members' finish): a zone
            // whose write pointer is at its capacity is Full (ZNS), so every member zone is
            // finished now, as the write that filled it would have left them.
            self.members_mgmt(ZoneAction::Finish, zone)
                .await
                .map_err(self.recovery_err("finishing a zone written to its capacity"))?;
            return Ok(lz(ZoneState::Full, cap));
        }
        Ok(lz(ZoneState::Closed, prefix))
    }

    /// Whether `zone`'s member zones, all Full on the members not failed, may still not make
    /// a Full zone: a failed member's zone may not have been Full, and a survivor's zone
    /// Full by writing may hold a parity unit an earlier open declared stale (a torn stripe:
    /// the member kept the parity of a write whose data the cut took from the failed
    /// member). True when a survivor's parity unit of a stripe where a failed member holds
    /// data is not all held (stale, not relocated) and the stripe holds data on the
    /// survivors: the failed unit cannot be rebuilt from it. A stale parity unit of a stripe
    /// of zeros is what a Finish leaves past its write pointer, and rebuilds zeros.
    async fn full_hides_stale_parity(
        &self,
        zone: u32,
        descs: &[Option<ZoneDescriptor>],
    ) -> Result<bool, RaiznError> {
        let l = self.layout;
        let su = l.su_blocks();
        let fs: Vec<usize> = (0..descs.len()).filter(|m| descs[*m].is_none()).collect();
        if fs.is_empty() {
            return Ok(false);
        }
        let (bs, oob) = (self.block_size(), self.oob());
        for s in 0..l.stripes_per_zone() {
            if !fs.iter().any(|f| l.unit_of_member(s, *f).is_some()) {
                continue;
            }
            let stale_parity = {
                let r = self.reloc.lock();
                l.parity_members(s).filter(|pm| !fs.contains(pm)).any(|pm| {
                    r.get(zone, pm)
                        .is_some_and(|e| (s * su..(s + 1) * su).any(|b| !e.held(b)))
                })
            };
            if !stale_parity {
                continue;
            }
            for k in 0..l.data_units() {
                let m = l.data_member(s, k);
                if fs.contains(&m) {
                    continue;
                }
                let mut d = vec![0u8; su as usize * bs];
                let mut md = vec![0u8; su as usize * oob];
                self.read_member(m, zone, s * su, &mut d, &mut md)
                    .await
                    .map_err(member_err(
                        m,
                        "reading a stripe of a zone Full on the survivors",
                    ))?;
                if d.iter().chain(&md).any(|b| *b != 0) {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// A torn stripe: every surviving member zone that holds blocks past its share of the
    /// logical write pointer `wp` gets them declared stale, so later writes there are
    /// relocated and a later open never counts them as data (docs/DESIGN.md, "Relocation").
    fn declare_torn(
        &self,
        zone: u32,
        wp: u64,
        descs: &[Option<ZoneDescriptor>],
        device_wps: &[u64],
    ) {
        let generation = self.generation(zone).unwrap_or(0);
        for (m, d) in descs.iter().enumerate() {
            if d.is_none() {
                continue;
            }
            let share = self.layout.member_blocks_at(m, wp);
            let device_wp = device_wps.get(m).copied().unwrap_or(0);
            self.declare_stale(m, zone, generation, device_wp, share);
        }
    }

    /// What recovery may count of each failed member's zone (`fs`, at most m of them): a
    /// unit of a stripe whose data units on survivors are all there and whose parity units
    /// on survivors stand in for every lost data unit (rebuilt from the parity; a parity
    /// unit is written only with a complete stripe, so one proves the stripe complete),
    /// then the part of the incomplete stripe's units the newest usable partial-parity
    /// record covers, provided every surviving data unit holds what that record was
    /// computed from. Nothing beyond: those blocks cannot be rebuilt.
    /// The newest usable record is left first in `loaded` on every surviving parity member
    /// (newer unusable ones dropped) for the log's reopening; none is left when none is
    /// usable.
    /// Returns those member write pointers (in `fs` order) and a cap on the logical write
    /// pointer: a stripe rebuilt from a record stays incomplete (at most the record's end),
    /// since its parity units are not on the members.
    fn failed_members_wp(
        &self,
        zone: u32,
        fs: &[usize],
        wps: &[u64],
        loaded: &mut Loaded,
    ) -> (Vec<u64>, u64) {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let cap = self.geo.zone_capacity;
        let have = |m: usize| wps.get(m).copied().unwrap_or(0);
        let lost = |m: usize| fs.contains(&m);
        let at = |s: u64| fs.iter().map(|_| s * su).collect::<Vec<u64>>();
        for s in 0..l.stripes_per_zone() {
            let lost_data: Vec<u64> = (0..l.data_units())
                .filter(|k| lost(l.data_member(s, *k)))
                .collect();
            let data_full = (0..l.data_units())
                .all(|k| lost(l.data_member(s, k)) || have(l.data_member(s, k)) >= (s + 1) * su);
            let parity_there = l
                .parity_members(s)
                .filter(|pm| !lost(*pm) && have(*pm) >= (s + 1) * su)
                .count();
            if lost_data.is_empty() {
                // The failed members hold only parity of this stripe: it counts when the
                // stripe's data is all there.
                if data_full {
                    continue;
                }
                return (at(s), cap);
            }
            if data_full && parity_there >= lost_data.len() {
                continue;
            }
            let consistent = |end: u64| {
                (0..l.data_units())
                    .filter(|k| !lost_data.contains(k))
                    .all(|k| {
                        let need = end.saturating_sub(k * su).min(su);
                        have(l.data_member(s, k)) >= s * su + need
                    })
            };
            // The newest end for which as many surviving parity members as there are lost
            // data units holding data below it hold a usable record (their parity units decode together only
            // when computed from the same data).
            let pms: Vec<usize> = l.parity_members(s).filter(|pm| !lost(*pm)).collect();
            let usable_ends = |pm: usize, loaded: &Loaded| -> Vec<u64> {
                loaded
                    .get(pm)
                    .and_then(|r| r.get(&(zone, s)))
                    .map(|rs| {
                        rs.iter()
                            .map(|r| r.end)
                            .filter(|e| consistent(*e))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut ends: Vec<u64> = pms.iter().flat_map(|pm| usable_ends(*pm, loaded)).collect();
            ends.sort_unstable_by(|a, b| b.cmp(a));
            ends.dedup();
            // Only the lost units holding data below the end need a parity unit each.
            let needed = |e: u64| lost_data.iter().filter(|k| **k * su < e).count();
            let chosen = ends.into_iter().find(|e| {
                pms.iter()
                    .filter(|pm| usable_ends(**pm, loaded).contains(e))
                    .count()
                    >= needed(*e)
            });
            // The chosen record is left first on every member that has it; the others'
            // records are dropped (they cannot serve the recovered write pointer).
            for pm in &pms {
                if let Some(records) = loaded.get_mut(*pm).and_then(|r| r.get_mut(&(zone, s))) {
                    let at = records
                        .iter()
                        .position(|r| Some(r.end) == chosen && consistent(r.end));
                    records.drain(..at.unwrap_or(records.len()));
                }
            }
            let Some(end) = chosen else {
                return (at(s), cap);
            };
            let covers = fs
                .iter()
                .map(|f| match l.unit_of_member(s, *f) {
                    Some(kf) => s * su + end.saturating_sub(kf * su).min(su),
                    None => s * su,
                })
                .collect();
            return (covers, s * sdb + end);
        }
        (at(l.stripes_per_zone()), cap)
    }

    /// Stripe `s` of `zone` in a stripe buffer, decoded from the units of the members for
    /// which `full(member)` holds (at least D of them; data units read directly when they
    /// are among them).
    async fn stripe_from(
        &self,
        zone: u32,
        s: u64,
        full: impl Fn(usize) -> bool,
    ) -> Result<super::StripeBuffer, RaiznError> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks() as usize, l.stripe_data_blocks() as usize);
        let g = l.member_geometry();
        let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
        let d = l.data_units() as usize;
        let mut have: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        // Data units first: with all of them there the code is not needed.
        let mut order: Vec<usize> = (0..l.data_units()).map(|k| l.data_member(s, k)).collect();
        order.extend(l.parity_members(s));
        for m in order.into_iter().filter(|m| full(*m)).take(d) {
            let mut ud = vec![0u8; su * bs];
            let mut um = vec![0u8; su * oob];
            self.read_member(m, zone, s * su as u64, &mut ud, &mut um)
                .await
                .map_err(member_err(m, "reading a stripe to repair its parity"))?;
            have.push((l.code_position(s, m), ud, um));
        }
        let code = l.code();
        let want: Vec<usize> = (0..d).collect();
        let units: Vec<(usize, &[u8])> = have.iter().map(|(p, u, _)| (*p, &u[..])).collect();
        let metas: Vec<(usize, &[u8])> = have.iter().map(|(p, _, m)| (*p, &m[..])).collect();
        let bad = |_: crate::code::CodeError| RaiznError::Recovery {
            what: "decoding a stripe to repair its parity",
            status: NvmeStatus::UnrecoveredReadError,
        };
        let data = code.rebuild(&units, &want).map_err(bad)?;
        let meta = code.rebuild(&metas, &want).map_err(bad)?;
        let (data, meta) = (data.concat(), meta.concat());
        if data.len() != sdb * bs || meta.len() != sdb * oob {
            return Err(bad(crate::code::CodeError::Sizes));
        }
        Ok(super::StripeBuffer {
            stripe: s,
            data,
            meta,
        })
    }

    /// Writes the parity units missing from the complete stripes below `prefix`.
    async fn repair_parity(&self, zone: u32, prefix: u64, wps: &[u64]) -> Result<(), RaiznError> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let g = l.member_geometry();
        let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
        let mut wps = wps.to_vec();
        let failed = self.state.lock().health.failed;
        for s in 0..prefix / sdb {
            // A lost parity unit stays lost; the others are written where they are short.
            let short: Vec<(u32, usize, u64)> = (0..l.parity())
                .map(|j| (j, l.parity_member_at(s, j)))
                .filter(|(_, pm)| !failed.contains(*pm))
                .map(|(j, pm)| (j, pm, wps.get(pm).copied().unwrap_or(0)))
                .filter(|(_, _, have)| *have < (s + 1) * su)
                .collect();
            if short.is_empty() {
                continue;
            }
            let lost_data = (0..l.data_units()).any(|k| failed.contains(l.data_member(s, k)));
            if lost_data && l.parity() == 1 {
                // RAID-5 with a lost data unit: the stripe counts only when its parity is on
                // its member, so nothing is short.
                continue;
            }
            // The stripe's data: read, or (m = 2, a data unit lost) decoded from the units
            // the survivors hold in full, which recovery counted the stripe by; a short
            // parity unit must never be read for it (its tail reads as zeros).
            let full =
                |m: usize| !failed.contains(m) && wps.get(m).copied().unwrap_or(0) >= (s + 1) * su;
            let buf = self.stripe_from(zone, s, full).await?;
            let parity = self
                .stripe_parity(&buf)
                .map_err(self.recovery_err("computing parity to repair it"))?;
            for (j, pm, have) in short {
                let Some((pd, pmeta)) = parity.get(j as usize) else {
                    continue;
                };
                let from = have.max(s * su);
                let skip = (from - s * su) as usize;
                // Kept in memory where relocated: the open's log rewrite persists it.
                self.write_member_run(
                    pm,
                    zone,
                    from,
                    &pd[skip * bs..],
                    &pmeta[skip * oob..],
                    false,
                )
                .await
                .map_err(member_err(pm, "writing repaired parity"))?;
                if let Some(w) = wps.get_mut(pm) {
                    *w = (s + 1) * su;
                }
            }
        }
        Ok(())
    }

    /// Folds device-side zone faults of the members (Read Only, Offline) into the logical
    /// zones: more failed member zones than the parity covers make the zone Offline, any
    /// other fault makes it Read Only.
    pub async fn refresh_faults(&self) -> Result<(), RaiznError> {
        let reports = join_all(
            self.members
                .iter()
                .enumerate()
                .map(|(i, d)| member_zones(i, d)),
        )
        .await;
        let mut all = Vec::new();
        for r in reports {
            all.push(r?);
        }
        let mut st = self.state.lock();
        for z in 0..self.geo.zone_count {
            let pz = (z + self.layout.meta_zones()) as usize;
            let states: Vec<ZoneState> = all
                .iter()
                .filter_map(|d| d.get(pz))
                .map(|d| d.state)
                .collect();
            let offline = states.iter().filter(|s| **s == ZoneState::Offline).count();
            let current = st.table.zone(z).map(|z| z.state);
            if offline > self.layout.parity() as usize {
                st.table.set_fault(z, ZoneState::Offline);
            } else if current != Some(ZoneState::Offline)
                && states
                    .iter()
                    .any(|s| matches!(s, ZoneState::ReadOnly | ZoneState::Offline))
            {
                st.table.set_fault(z, ZoneState::ReadOnly);
            }
        }
        Ok(())
    }
}

/// Checks member `i`'s superblock against the newest one (`f`) and the member's own geometry.
fn check_member(
    i: usize,
    sb: &Superblock,
    f: &Superblock,
    count: usize,
    geo: &Geometry,
) -> Result<(), RaiznError> {
    let foreign = |why: String| Err(RaiznError::Foreign { member: i, why });
    if sb.member_index as usize != i {
        return foreign(format!(
            "its superblock names position {} but it was given at position {i}",
            sb.member_index
        ));
    }
    if sb.members as usize != count {
        return foreign(format!(
            "its array has {} members but {count} were given",
            sb.members
        ));
    }
    if sb.member_geometry != *geo {
        return foreign("the device's geometry differs from the one it was formatted with".into());
    }
    if sb.array_uuid != f.array_uuid {
        return foreign("it belongs to another array (UUID differs)".into());
    }
    if (sb.parity, sb.su_blocks, sb.member_geometry) != (f.parity, f.su_blocks, f.member_geometry) {
        return foreign("parity, stripe unit or geometry differ".into());
    }
    Ok(())
}
