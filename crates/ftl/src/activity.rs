//! What a mounted volume's tasks spend their (virtual) time on: time-weighted counts of user
//! writes and garbage-collection copies in flight, and the time spent waiting for space,
//! collecting, flushing and resetting. Figures for `FtlStats` and the bench's per-phase report
//! (docs/BENCHMARKS.md uses them to find where the flash sits idle); no decision reads them.
//!
//! Each gauge integrates its level over time, so the mean level over any interval is the
//! difference of two snapshots' areas over the interval's length. The clock is tokio's, so
//! under a paused clock (the bench's virtual time) the figures are exact and repeat.

use parking_lot::Mutex;
use tokio::time::Instant;

/// What is being counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gauge {
    /// User writes (whole commands) between admission and completion.
    UserWrites,
    /// User writes waiting for space (for a zone to open, or paced by the throttle).
    SpaceWaits,
    /// Garbage-collection copy commands (Simple Copy, zone compaction, or a read+write batch)
    /// on the device.
    Copies,
    /// Garbage-collection rounds (at most one at a time).
    Rounds,
    /// Device flushes.
    Flushes,
    /// The reset batches of rounds.
    Resets,
}

const GAUGES: usize = 6;

impl Gauge {
    fn index(self) -> usize {
        self as usize
    }
}

/// One gauge's history: how often it was entered, and its level integrated over time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GaugeStats {
    /// Times the gauge was entered.
    pub entered: u64,
    /// Level integrated over time (ns): the sum of every entry's duration.
    pub level_ns: u64,
    /// Time the level was above zero (ns).
    pub busy_ns: u64,
}

/// A snapshot of a volume's activity since mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActivityStats {
    /// Time since mount (ns).
    pub at_ns: u64,
    pub user_writes: GaugeStats,
    pub space_waits: GaugeStats,
    pub copies: GaugeStats,
    pub rounds: GaugeStats,
    pub flushes: GaugeStats,
    pub resets: GaugeStats,
}

#[derive(Clone, Copy, Default)]
struct Level {
    now: u64,
    since_ns: u64,
    stats: GaugeStats,
}

impl Level {
    /// Brings the integrals up to `t`.
    fn advance(&mut self, t: u64) {
        let dt = t.saturating_sub(self.since_ns);
        self.stats.level_ns = self
            .stats
            .level_ns
            .saturating_add(dt.saturating_mul(self.now));
        if self.now > 0 {
            self.stats.busy_ns = self.stats.busy_ns.saturating_add(dt);
        }
        self.since_ns = self.since_ns.max(t);
    }
}

/// The gauges of one volume (a leaf lock, held only to update a few numbers).
pub(crate) struct Activity {
    origin: Instant,
    levels: Mutex<[Level; GAUGES]>,
}

/// Leaves its gauge when dropped (also when the future holding it is cancelled).
pub(crate) struct Entered<'a> {
    activity: &'a Activity,
    gauge: Gauge,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.activity.step(self.gauge, false);
    }
}

impl Activity {
    pub(crate) fn new() -> Activity {
        Activity {
            origin: Instant::now(),
            levels: Mutex::new([Level::default(); GAUGES]),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn step(&self, gauge: Gauge, enter: bool) {
        let t = self.now_ns();
        let mut levels = self.levels.lock();
        let l = &mut levels[gauge.index()];
        l.advance(t);
        if enter {
            l.now += 1;
            l.stats.entered += 1;
        } else {
            l.now = l.now.saturating_sub(1);
        }
    }

    /// Raises `gauge` until the returned guard is dropped.
    pub(crate) fn enter(&self, gauge: Gauge) -> Entered<'_> {
        self.step(gauge, true);
        Entered {
            activity: self,
            gauge,
        }
    }

    /// The figures up to now.
    pub(crate) fn stats(&self) -> ActivityStats {
        let t = self.now_ns();
        let mut levels = self.levels.lock();
        for l in levels.iter_mut() {
            l.advance(t);
        }
        let s = |g: Gauge| levels[g.index()].stats;
        ActivityStats {
            at_ns: t,
            user_writes: s(Gauge::UserWrites),
            space_waits: s(Gauge::SpaceWaits),
            copies: s(Gauge::Copies),
            rounds: s(Gauge::Rounds),
            flushes: s(Gauge::Flushes),
            resets: s(Gauge::Resets),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn gauges_integrate_their_level_over_virtual_time() {
        let a = Activity::new();
        let one = a.enter(Gauge::Copies);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let two = a.enter(Gauge::Copies);
        tokio::time::sleep(Duration::from_millis(3)).await;
        drop(one);
        drop(two);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let s = a.stats();
        assert_eq!(s.at_ns, 10_000_000);
        assert_eq!(s.copies.entered, 2);
        // 2 ms at level 1, 3 ms at level 2.
        assert_eq!(s.copies.level_ns, 8_000_000);
        assert_eq!(s.copies.busy_ns, 5_000_000);
        assert_eq!(s.flushes, GaugeStats::default());
    }
}
