//! The state every part of a mounted volume shares, and the one order its locks are taken in.
//!
//! A mounted volume is four parts, each owning its fields (docs/DESIGN.md):
//! - `Shared` (here): the device, layout and options, the sans-IO core (`map::Mapping`, whose
//!   decisions are in plan.rs) behind the map lock, the volume's failure, and the two wake-up
//!   signals (space changed; maintenance wanted).
//! - `io::StreamWriter`: the stream slots and the only code that writes data zones (zone
//!   headers, user data, trim records, GC copies, summaries, sealing), executing plan.rs.
//! - `gc::Maintenance`: the maintenance task (garbage collection and checkpoints), the
//!   checkpoint cursor, flush, and the decision to fail the volume.
//! - `volume::FtlVolume`: the `BlockDevice` face; `read.rs` is its read path.
//!
//! A part depends only on the parts listed before it, never on a later one.
//!
//! Lock order. A task takes these locks only in this order (a lock may be taken while holding
//! locks earlier in the list, never one later):
//! 1. one slot lock (`io::Slot`, tokio): held across the writes to its zone. A task holds at
//!    most one slot lock at a time; a writer gives its slot up before it waits for space or
//!    locks another slot to borrow its zone.
//! 2. the checkpoint lock (`gc::Maintenance`, tokio): held across a checkpoint's flush and
//!    write. No slot is held while it is taken today; the order only allows it.
//! 3. the map lock (here, parking_lot): guards the sans-IO core (`map::Mapping`, with the
//!    summary tags and the decisions of plan.rs). Taken only through [`Shared::map`], whose
//!    closure cannot await, so it is never held across an await.
//! 4. the failure lock (here, parking_lot): a leaf; nothing is taken while it is held.
//!
//! The maintenance task's handle (`gc::Maintenance`) has a lock of its own that is a leaf too,
//! taken only by mount, unmount and crash. The wake-up signals are not locks: they may be raised
//! while holding any lock, and waiters enable their wake-up before they check the condition.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use zns::ZonedDevice;

use crate::activity::Activity;
use crate::host::HostClock;
use crate::layout::{Layout, MountOptions};
use crate::map::Mapping;
use crate::FtlError;

/// The state the parts of a mounted volume share.
pub(crate) struct Shared {
    dev: Arc<dyn ZonedDevice>,
    layout: Layout,
    opts: MountOptions,
    volume_id: u64,
    map: Mutex<Mapping>,
    /// Signalled when a zone is freed or fills, a read releases a zone, garbage collection
    /// gives up, or the volume fails.
    space: Notify,
    /// Wakes the maintenance task.
    maint_wake: Notify,
    /// The cause of the volume's failure; once set every later command returns it.
    failure: Mutex<Option<String>>,
    /// Where the tasks spend their time (figures only; a leaf lock).
    activity: Activity,
    /// The clock the host time of the model paths is spent on (host.rs).
    host: Arc<dyn HostClock>,
}

impl Shared {
    pub(crate) fn new(
        dev: Arc<dyn ZonedDevice>,
        layout: Layout,
        opts: MountOptions,
        volume_id: u64,
        mapping: Mapping,
        host: Arc<dyn HostClock>,
    ) -> Shared {
        Shared {
            dev,
            layout,
            opts,
            volume_id,
            map: Mutex::new(mapping),
            space: Notify::new(),
            maint_wake: Notify::new(),
            failure: Mutex::new(None),
            activity: Activity::new(),
            host,
        }
    }

    /// Spends the host time a host-level copy of `blocks` blocks costs
    /// (`MountOptions::host_copy_ns_per_block`); nothing when that is 0.
    pub(crate) async fn host_copy_time(&self, blocks: u64) {
        let d = crate::host::host_copy_time(blocks, self.opts.host_copy_ns_per_block);
        if !d.is_zero() {
            self.host.wait(d).await;
        }
    }

    /// The volume's activity gauges.
    pub(crate) fn activity(&self) -> &Activity {
        &self.activity
    }

    pub(crate) fn dev(&self) -> &dyn ZonedDevice {
        self.dev.as_ref()
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn opts(&self) -> &MountOptions {
        &self.opts
    }

    pub(crate) fn volume_id(&self) -> u64 {
        self.volume_id
    }

    /// Runs `f` under the map lock. The closure is synchronous, so the lock is never held
    /// across an await.
    pub(crate) fn map<R>(&self, f: impl FnOnce(&mut Mapping) -> R) -> R {
        f(&mut self.map.lock())
    }

    /// The volume's failure, if it failed.
    pub(crate) fn check_failed(&self) -> Result<(), FtlError> {
        match self.failure.lock().as_ref() {
            Some(m) => Err(FtlError::Failed(m.clone())),
            None => Ok(()),
        }
    }

    /// The error of a user write that found no zone to write into, not even another
    /// stream's. A block volume's spare keeps room for every logical block, so with zones
    /// retired by the device the cause is the retirements: the volume fails naming them, as
    /// the collector fails it when it is the first to find no zone (`gc.rs`,
    /// `no_zone_to_copy_into`); whichever notices first must not hide the cause behind a bare
    /// "no space".
    pub(crate) fn no_space(&self) -> FtlError {
        let Some(e) = self.spare_used_up("user writes have no free zone left") else {
            return FtlError::NoSpace;
        };
        self.fail(&e);
        e
    }

    /// The error that names the device's retirements as the reason `what` (the writer or
    /// the collector found no zone), if the device retired any data zone.
    pub(crate) fn spare_used_up(&self, what: &str) -> Option<FtlError> {
        let retired = self.map(|m| m.retired_zones());
        (retired > 0).then(|| {
            FtlError::Failed(format!(
                "the spare is used up: the device retired {retired} of {} data zones, and \
                 {what}",
                self.layout.data_zones
            ))
        })
    }

    /// Fails the volume: every later command returns the first cause, and writers waiting
    /// for space wake to it.
    pub(crate) fn fail(&self, e: &FtlError) {
        {
            let mut failure = self.failure.lock();
            if failure.is_none() {
                let cause = match e {
                    FtlError::Failed(cause) => cause.clone(),
                    other => other.to_string(),
                };
                tracing::error!(volume = self.volume_id, "the FTL volume failed: {cause}");
                *failure = Some(cause);
            }
        }
        self.space.notify_waiters();
    }

    /// Asks the maintenance task to look at the volume (collect or checkpoint).
    pub(crate) fn wake_maintenance(&self) {
        self.maint_wake.notify_one();
    }

    /// Resolves when something asks the maintenance task to run.
    pub(crate) fn maintenance_wanted(&self) -> Notified<'_> {
        self.maint_wake.notified()
    }

    /// Wakes every writer waiting for space (and the collection waiting for readers).
    pub(crate) fn space_changed(&self) {
        self.space.notify_waiters();
    }

    /// Resolves at the next `space_changed` (or failure); create it before checking the
    /// condition it waits for, so a signal in between is not lost. Both signal every waiter
    /// (`notify_waiters`), which reaches a `Notified` from its creation on, so it need not be
    /// enabled first: enabling registers it on the `Notify` (a lock) and dropping it then
    /// takes that lock again, twice per user write that never waits.
    pub(crate) fn space_notified(&self) -> Notified<'_> {
        self.space.notified()
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use tokio::sync::Notify;

    /// Writers waiting for space rely on this (`space_notified` is created before the
    /// condition is checked and only polled once the writer waits, never enabled): a signal
    /// sent with `notify_waiters`, as `space_changed` and `fail` send it, reaches a
    /// `Notified` from its creation on. With `notify_one`, or without that guarantee, a
    /// signal between the check and the wait would be lost and the writer would sleep on.
    #[test]
    fn a_space_signal_reaches_a_waiter_created_before_it_and_never_enabled() {
        let space = Notify::new();
        let waiting = space.notified();
        space.notify_waiters();
        assert!(waiting.now_or_never().is_some(), "the signal was lost");
        // And one created after the signal waits for the next one.
        let later = space.notified();
        assert!(later.now_or_never().is_none());
    }
}
