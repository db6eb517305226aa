//! The Zone Append queue: the one command whose order the device owns. An append waits one
//! poll, and all appends then waiting are executed in an order drawn from the device seed, so
//! callers see the device choose (and the same seed chooses the same way).
//!
//! Bounds: an append is queued only by a caller that awaits it, so the queue holds at most
//! the appends in flight; a dropped append future removes its entry (`AppendGuard`), and a
//! power loss aborts every queued append with *Commands Aborted due to Power Loss
//! Notification*.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use zns::{Lba, NvmeResult, NvmeStatus};

use super::core::{Core, Payload};
use super::EmuDevice;

struct PendingAppend {
    id: u64,
    zslba: Lba,
    data: Vec<u8>,
    meta: Option<Vec<u8>>,
    fua: bool,
}

/// Appends waiting to be scheduled, and results not yet collected by their callers.
#[derive(Default)]
pub(super) struct AppendQueue {
    pending: Vec<PendingAppend>,
    finished: Vec<(u64, NvmeResult<Lba>)>,
    next_id: u64,
}

impl AppendQueue {
    fn push(&mut self, zslba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.pending.push(PendingAppend {
            id,
            zslba,
            data: data.to_vec(),
            meta: meta.map(<[u8]>::to_vec),
            fua,
        });
        id
    }

    /// Power loss: every waiting append completes with the power-loss abort status.
    pub(super) fn abort_all(&mut self) {
        let aborted: Vec<u64> = self.pending.drain(..).map(|p| p.id).collect();
        for id in aborted {
            self.finished.push((id, Err(NvmeStatus::AbortedPowerLoss)));
        }
    }

    fn take_finished(&mut self, id: u64) -> Option<NvmeResult<Lba>> {
        let i = self.finished.iter().position(|(f, _)| *f == id)?;
        Some(self.finished.swap_remove(i).1)
    }

    fn is_pending(&self, id: u64) -> bool {
        self.pending.iter().any(|p| p.id == id)
    }

    fn forget(&mut self, id: u64) {
        self.pending.retain(|p| p.id != id);
        self.take_finished(id);
    }
}

impl Core {
    /// Executes every waiting append, in an order drawn from the device seed.
    pub(super) fn drain_appends(&mut self) {
        if self.appends.pending.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.appends.pending);
        // An append to a zone whose write another thread is storing waits for the next
        // drain: it would land at a write pointer about to move.
        let geo = self.geo;
        let (mut batch, waiting): (Vec<_>, Vec<_>) = batch
            .drain(..)
            .partition(|p| geo.zone_of(p.zslba).is_none_or(|z| !self.zones.is_busy(z)));
        self.appends.pending = waiting;
        self.rng.shuffle(&mut batch);
        for p in batch {
            let payload = Payload {
                data: Some(&p.data),
                meta: p.meta.as_deref(),
            };
            let r = self.append_now(p.zslba, payload, p.fua);
            self.appends.finished.push((p.id, r));
        }
    }
}

/// Completes after being polled twice: lets every other command submitted in the same round
/// reach the device before an append is scheduled.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Removes an abandoned append from the device if its future is dropped early.
struct AppendGuard<'a> {
    dev: &'a EmuDevice,
    id: u64,
    done: bool,
}

impl Drop for AppendGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.dev.core.lock().appends.forget(self.id);
        }
    }
}

impl EmuDevice {
    /// Queues an append (already validated), lets the other commands of this round arrive,
    /// then runs the queue and returns this append's result.
    pub(super) async fn queued_append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        let id = self.core.lock().appends.push(zslba, data, meta, fua);
        let mut guard = AppendGuard {
            dev: self,
            id,
            done: false,
        };
        loop {
            YieldOnce(false).await;
            let mut c = self.core.lock();
            c.drain_appends();
            if let Some(r) = c.appends.take_finished(id) {
                guard.done = true;
                return r;
            }
            if !c.appends.is_pending(id) {
                guard.done = true;
                return Err(NvmeStatus::AbortedPowerLoss);
            }
            // Still waiting for a busy zone (another thread is storing a write to it).
        }
    }
}
