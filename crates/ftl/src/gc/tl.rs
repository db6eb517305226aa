//! The maintenance task's part of threaded logging (threaded.rs): hybrid recycling decides,
//! when collection is wanted, whether full zones are re-opened for the hot stream instead,
//! and writes the one record (docs/FORMAT.md, threaded-logging record) that must be durable
//! before their holes are written.
//!
//! Fault model: power may fail at any point. Each zone of a turn is re-opened on the device,
//! then (when the newest durable checkpoint covers all they hold; else a checkpoint records
//! them, the rule before records) one record names them all (generation and first hole),
//! written into the collection
//! stream and made durable by a device flush that also makes durable every write completed
//! before the zones were chosen, before any write can reach their holes: a cut before the
//! flush leaves zones with no new data (the older checkpoint says Full, and a record that
//! reached the media anyway only makes recovery scan holes whose blocks are all older than
//! their LBAs' durable versions), and a cut after it is recovered by a scan from each first
//! hole up to the device's write pointer. A failed `tl_open` changes nothing (the zone is
//! finished in case the command ran); a record that cannot be written or flushed is
//! replaced by a checkpoint (which records the zones itself), whose failure fails the
//! volume, as any checkpoint failure.

use zns::ZoneAction;

use crate::retry::retry;
use crate::threaded::{CostModel, TurnBlocks};
use crate::FtlError;

use super::Maintenance;

impl Maintenance {
    /// Hybrid recycling (`Mapping::plan_threaded`), executed when `Mapping::tl_wanted`: the
    /// zones chosen are re-opened on the device with `tl_open`, then one durable record
    /// names them (each scanned from its first hole), and only then may the hot stream
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
        // What a turn writes besides the hot stream's data: its one record block, or a
        // checkpoint when a zone of the turn holds blocks the newest durable one does not
        // cover (`Mapping::tl_covered`).
        let turn = TurnBlocks {
            record: 1,
            checkpoint: self.shared.layout().checkpoint_blocks().unwrap_or(u64::MAX),
        };
        let opts = self.shared.opts();
        let chosen = self.shared.map(|m| {
            let victim = m.pick_victim(opts.victim_policy);
            m.plan_threaded(opts.threaded, &CostModel::default(), victim, turn, room)
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
        let record = self.shared.map(|m| {
            let covered = opened.iter().all(|&z| m.tl_covered(z));
            covered.then(|| m.tl_record(&opened))
        });
        let recorded = match record {
            Some(record) => match self.writer.write_tl_record(record).await {
                Ok(()) => self.flush_device().await,
                Err(e) => Err(e),
            },
            None => {
                self.shared
                    .map(|m| m.threaded.counters.checkpoint_turns += 1);
                self.checkpoint().await?;
                Ok(())
            }
        };
        if let Err(e) = recorded {
            tracing::warn!("a threaded-logging record failed ({e}); writing a checkpoint instead");
            self.shared
                .map(|m| m.threaded.counters.record_failures += 1);
            self.checkpoint().await?;
        }
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
