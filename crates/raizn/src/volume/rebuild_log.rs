//! Persisted rebuild progress: which zones a rebuild completed on its new member, recorded
//! in the survivors' general zones (rebuilt-zones records, docs/FORMAT.md), so that a rebuild
//! cut short (power loss, the process stopped, `replace_member_up_to`) continues where it
//! was instead of starting over.
//!
//! Fault model: power may be lost at any point of a rebuild. A zone is recorded only once it
//! is Full on the new member and the new member was flushed, so a record never names a zone
//! whose member data could still be lost; the record itself is written with FUA to every
//! survivor, and a record lost in the cut only costs the zone's rebuild again. Between the
//! cut and the resume the array may run degraded (writes skip the new member), so only
//! zones that cannot have changed are trusted: recorded Full at a generation that is still
//! the zone's, Full on the new member too. Everything else of the new member is reset and
//! rebuilt. The records name the new member by the superblock generation it was formatted
//! with; any other device at that position (the old failed member, a newer replacement)
//! does not match, and is formatted afresh.

use zns::{NvmeResult, NvmeStatus, ZoneAction, ZoneDescriptor, ZoneState, ZonedDevice};

use super::general::{merge_rebuilt, GeneralLog, Rec};
use super::{Member, RaiznVolume};
use crate::meta::RebuiltZones;

impl RaiznVolume {
    /// The zones of `dev`, the device at position `index` whose newest superblock has
    /// generation `dev_generation`, that a recorded rebuild completed and that still hold
    /// what the array has; None when the records are not about this device.
    pub(super) fn trusted_zones(
        &self,
        log: &GeneralLog,
        index: usize,
        dev_generation: u64,
        zones: &[ZoneDescriptor],
    ) -> Option<Vec<(u32, u64)>> {
        let r = log.rebuilt.as_ref()?;
        if r.member as usize != index || r.target_generation != dev_generation {
            return None;
        }
        let st = self.state.lock();
        let mut out: Vec<(u32, u64)> = r
            .zones
            .iter()
            .copied()
            .filter(|(z, g)| {
                let full = st
                    .table
                    .zone(*z)
                    .is_some_and(|lz| lz.state == ZoneState::Full);
                let same = st.generations.get(*z as usize) == Some(g);
                let on_dev = zones
                    .get((*z + self.layout.meta_zones()) as usize)
                    .is_some_and(|d| d.state == ZoneState::Full);
                full && same && on_dev
            })
            .collect();
        out.sort_unstable();
        Some(out)
    }

    /// Resets every zone of `dev` that is not Empty, except the member zones of `keep`.
    pub(super) async fn reset_except(
        &self,
        dev: &Member,
        zones: &[ZoneDescriptor],
        keep: &[(u32, u64)],
    ) -> NvmeResult<()> {
        for (i, d) in zones.iter().enumerate() {
            let kept = (i as u32)
                .checked_sub(self.layout.meta_zones())
                .is_some_and(|z| keep.iter().any(|(k, _)| *k == z));
            if d.state != ZoneState::Empty && !kept {
                dev.zone_mgmt(ZoneAction::Reset, d.start, false).await?;
            }
        }
        Ok(())
    }

    /// Records that the rebuild of `member` (formatted at superblock generation `target`)
    /// completed `zone`, Full at `generation`: the new member flushed first, then a
    /// rebuilt-zones record with FUA on every survivor (every member not failed).
    pub(super) async fn record_rebuilt(
        &self,
        member: usize,
        target: u64,
        zone: u32,
        generation: u64,
    ) -> NvmeResult<()> {
        let dev = self.members.get(member).ok_or(NvmeStatus::InternalError)?;
        dev.flush().await?;
        let r = RebuiltZones {
            member: member as u32,
            target_generation: target,
            zones: vec![(zone, generation)],
        };
        // Not the other failed member (m = 2): its general zone is not written any more.
        let failed = self.state.lock().health.failed;
        let survivors: Vec<usize> = (0..self.members.len())
            .filter(|m| *m != member && !failed.contains(*m))
            .collect();
        let mut log = self.general.lock().await;
        merge_rebuilt(&mut log.rebuilt, r.clone());
        self.append_general(&mut log, &survivors, Rec::Rebuilt(r), true)
            .await
    }

    /// The rebuild completed: its records are history (the superblocks name no failed
    /// member, so open ignores them); collections stop carrying them.
    pub(super) async fn forget_rebuild(&self) {
        self.general.lock().await.rebuilt = None;
    }
}
