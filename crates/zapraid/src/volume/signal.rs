//! `Signal<T>`: a value that tasks wait on until it satisfies a condition, woken in a fixed
//! order. It replaces `tokio::sync::watch` on the write path because a watch channel spreads
//! its waiters over notifiers chosen by the runtime's unseeded random generator, so the order
//! in which waiting stripes and writers woke differed from run to run and a seeded crash
//! schedule did not repeat. `tokio::sync::Notify` wakes its waiters in a fixed order.
//!
//! Fault model: none of its own; a value nobody will set again leaves its waiters waiting,
//! so every wait on the write path also waits on the volume's failure (`Shared::failed`),
//! which a crash or a failed command sets.

use parking_lot::Mutex;
use tokio::sync::Notify;

pub(crate) struct Signal<T> {
    value: Mutex<T>,
    changed: Notify,
}

impl<T: Clone> Signal<T> {
    pub(crate) fn new(value: T) -> Signal<T> {
        Signal {
            value: Mutex::new(value),
            changed: Notify::new(),
        }
    }

    pub(crate) fn get(&self) -> T {
        self.value.lock().clone()
    }

    /// Changes the value and wakes every waiter (they recheck their condition).
    pub(crate) fn modify(&self, f: impl FnOnce(&mut T)) {
        f(&mut self.value.lock());
        self.changed.notify_waiters();
    }

    pub(crate) fn set(&self, value: T) {
        self.modify(|v| *v = value);
    }

    /// Changes the value only if `f` says it did (returns true), waking waiters then.
    pub(crate) fn modify_if(&self, f: impl FnOnce(&mut T) -> bool) -> bool {
        let changed = f(&mut self.value.lock());
        if changed {
            self.changed.notify_waiters();
        }
        changed
    }

    /// Waits until the value satisfies `ok`; returns it.
    pub(crate) async fn wait_for(&self, ok: impl Fn(&T) -> bool) -> T {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a change between the check and the await is
            // not missed.
            notified.as_mut().enable();
            {
                let v = self.value.lock();
                if ok(&v) {
                    return v.clone();
                }
            }
            notified.await;
        }
    }
}
