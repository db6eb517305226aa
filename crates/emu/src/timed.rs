//! The device side of the timing model: a device with timing books every command it has
//! executed with the model and waits for the completion instant the model gives.
//!
//! Model time is nanoseconds since the device's first command, read from tokio's clock, so
//! under a `SimRuntime` the model and tokio share one exact virtual time.

use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zns::Geometry;

use crate::timing::{wait_until, ClockMode, TimedCmd, TimingCounters, TimingProfile, ZonedTiming};

/// A device's timing model and clock.
pub struct Timing {
    model: Mutex<ZonedTiming>,
    mode: ClockMode,
    epoch: OnceLock<Instant>,
}

impl Timing {
    pub fn new(profile: TimingProfile, geo: Geometry, mode: ClockMode) -> Result<Timing, String> {
        Ok(Timing {
            model: Mutex::new(ZonedTiming::new(profile, geo, false)?),
            mode,
            epoch: OnceLock::new(),
        })
    }

    /// Books `cmd` (its `Rejected` form when it failed) and waits for its completion.
    pub async fn complete(&self, cmd: TimedCmd<'_>, ok: bool) {
        let cmd = if ok { cmd } else { TimedCmd::Rejected };
        let now = Instant::now();
        let epoch = *self.epoch.get_or_init(|| now);
        let deadline = {
            let mut m = self.model.lock();
            // Tokio's clock is monotonic within a runtime; clamp in case a device outlives one
            // runtime and is used on another.
            let now_ns = (now.saturating_duration_since(epoch).as_nanos() as u64).max(m.now_ns());
            epoch + Duration::from_nanos(m.submit(now_ns, &cmd))
        };
        wait_until(self.mode, deadline).await;
    }

    /// Books every command of `cmds` at the same instant, as one command made of many
    /// independent pieces (the extents of a `zone_compaction`), and waits for the last to
    /// complete: the pieces overlap on the flash as the resources allow, rather than each
    /// waiting for the one before. A failed command books `Rejected` once.
    pub async fn complete_all(&self, cmds: &[TimedCmd<'_>], ok: bool) {
        if !ok || cmds.is_empty() {
            return self.complete(TimedCmd::Rejected, false).await;
        }
        let now = Instant::now();
        let epoch = *self.epoch.get_or_init(|| now);
        let deadline = {
            let mut m = self.model.lock();
            let now_ns = (now.saturating_duration_since(epoch).as_nanos() as u64).max(m.now_ns());
            let end = cmds
                .iter()
                .map(|c| m.submit(now_ns, c))
                .max()
                .unwrap_or(now_ns);
            epoch + Duration::from_nanos(end)
        };
        wait_until(self.mode, deadline).await;
    }

    /// Books device-internal work (ZNS+ plugging) that no command waits for: it occupies
    /// dies, channels and the buffer, and so delays the commands that come after it.
    pub fn book(&self, cmd: TimedCmd<'_>) {
        let now = Instant::now();
        let epoch = *self.epoch.get_or_init(|| now);
        let mut m = self.model.lock();
        let now_ns = (now.saturating_duration_since(epoch).as_nanos() as u64).max(m.now_ns());
        m.submit(now_ns, &cmd);
    }

    pub fn set_plug_order(&self, order: crate::timing::PlugOrder) {
        self.model.lock().set_plug_order(order);
    }

    pub fn set_copyback(&self, enabled: bool) {
        self.model.lock().set_copyback(enabled);
    }

    pub fn counters(&self) -> TimingCounters {
        self.model.lock().counters()
    }

    pub fn profile(&self) -> TimingProfile {
        *self.model.lock().profile()
    }

    pub fn mode(&self) -> ClockMode {
        self.mode
    }

    /// After power loss or restart: the buffer is gone and every zone's data is on flash.
    pub fn resync(&self, zone_wp_blocks: impl Iterator<Item = u64>) {
        self.model.lock().resync(zone_wp_blocks);
    }

    /// After `resync`: `zone` is still TL-opened with `valid`, its old data ending
    /// `old_data_blocks` from the zone start.
    pub fn resync_tl(&self, zone: u32, old_data_blocks: u64, valid: &[u8]) {
        self.model.lock().resync_tl(zone, old_data_blocks, valid);
    }
}
