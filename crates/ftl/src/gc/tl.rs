//! The maintenance task's part of threaded logging (threaded.rs): hybrid recycling decides,
//! when collection is wanted, whether full zones are re-opened for the hot stream instead,
//! and writes the one checkpoint that must be durable before their holes are written.
//!
//! Fault model: power may fail at any point. Each zone of a turn is re-opened on the device,
//! then all are recorded in one checkpoint as open (scanned from their first holes by
//! recovery), before any write can reach their holes: a cut before the checkpoint is durable
//! leaves zones with no new data (the older checkpoint says Full: not scanned), and a cut after it is
//! recovered by a scan up to the device's write pointer. A failed `tl_open` changes nothing
//! (the zone is finished in case the command ran); a failed checkpoint fails the volume, as
//! any checkpoint failure.

use zns::ZoneAction;

use crate::retry::retry;
use crate::threaded::CostModel;
use crate::FtlError;

use super::Maintenance;

impl Maintenance {
    /// Hybrid recycling (`Mapping::plan_threaded`), executed when `Mapping::tl_wanted`: the
    /// zones chosen are re-opened on the device with `tl_open`, then one checkpoint records
    /// them as open (each scanned from its first hole), and only then may the hot stream
    /// write their holes. True when a zone was made ready.
    pub(super) async fn threaded_turn(&self) -> Result<bool, FtlError> {
        // Each re-opened zone holds an open and an active zone until a hot slot takes it:
        // only as many as the device has beside every slot and the checkpoint zone.
        let g = self.shared.layout().geometry;
        let limit = [g.max_open, g.max_active]
            .into_iter()
            .filter(|l| *l != 0)
            .min()
            .map_or(usize::MAX, |l| l as usize);
        let room = limit.saturating_sub(self.writer.slot_count() + 1);
        let ckpt_blocks = self.shared.layout().checkpoint_blocks().unwrap_or(u64::MAX);
        let opts = self.shared.opts();
        let chosen = self.shared.map(|m| {
            let victim = m.pick_victim(opts.victim_policy);
            m.plan_threaded(
                opts.threaded,
                &CostModel::default(),
                victim,
                ckpt_blocks,
                room,
            )
        });
        let mut opened = Vec::with_capacity(chosen.len());
        for zone in chosen {
            if self.reopen(zone).await {
                opened.push(zone);
            }
        }
        if opened.is_empty() {
            return Ok(false);
        }
        self.checkpoint().await?;
        self.shared.map(|m| {
            for &zone in &opened {
                m.tl_ready(zone);
            }
        });
        self.shared.space_changed();
        Ok(true)
    }

    /// Sends `tl_open` for pending zone `zone`; on failure the zone is finished (in case the
    /// command ran) and left to collection. True when the device re-opened it.
    async fn reopen(&self, zone: u32) -> bool {
        let Some(valid) = self.shared.map(|m| m.tl_valid_bytes(zone)) else {
            return false;
        };
        let at = self.shared.layout().data_zone_start(zone);
        let Err(e) = retry(|| self.shared.dev().tl_open(at, &valid)).await else {
            return true;
        };
        // Nothing was written; a command that ran though it failed left the zone open with
        // no new data, which Finish makes Full again (its holes as before).
        tracing::warn!(zone, "tl_open failed ({e}); collecting instead");
        let finish = self
            .shared
            .dev()
            .zone_mgmt(ZoneAction::Finish, at, false)
            .await;
        if let Err(e) = finish {
            tracing::warn!(zone, "finishing a zone after a failed tl_open failed: {e}");
        }
        self.shared.map(|m| m.tl_cancel(zone));
        false
    }
}
