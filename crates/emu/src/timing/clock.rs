//! Clocks for timed devices: exact virtual time for benchmarks and tests, and real time for
//! interactive use.
//!
//! Virtual time is tokio's paused clock, moved forward exactly to each device completion.
//! Tokio's own timers cannot do that alone: its timer wheel rounds every deadline up to the
//! next whole millisecond, so a 12 us write would take 1 ms of virtual time. A `SimRuntime`
//! therefore runs a current-thread runtime with a paused clock and a hook that tokio calls
//! whenever every task is blocked (`on_thread_park`). The hook hands over to a driver task
//! that advances tokio's clock to the earliest pending device deadline (or to the next
//! millisecond tick, if that comes first, so tokio's own timers still fire on time) and wakes
//! the commands due then. Time thus jumps from event to event with nanosecond precision, the
//! same seed gives the same run, and `tokio::time::Instant::now()` is the device's time.
//!
//! Outside a `SimRuntime` a virtual-time device falls back to tokio timers: still
//! deterministic under a paused clock, but completions are rounded up to whole milliseconds.
//! Real-time devices sleep to within a millisecond of the deadline and then yield until it
//! has passed, much as FEMU polls, so a busy device burns a core in exchange for precision.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// How a timed device waits for a command's completion instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMode {
    /// Discrete-event virtual time (exact inside a `SimRuntime`).
    Virtual,
    /// Wall-clock delays, for interactive use.
    RealTime,
}

const TICK: Duration = Duration::from_millis(1);

struct SimState {
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    wakers: BTreeMap<u64, Waker>,
    next_id: u64,
    driver: Option<Waker>,
    advance_wanted: bool,
    /// Tokio's timer wheel counts milliseconds from here.
    origin: Instant,
    steps: u64,
}

thread_local! {
    static SIM: RefCell<Option<SimState>> = const { RefCell::new(None) };
}

fn with_sim<R>(f: impl FnOnce(&mut SimState) -> R) -> Option<R> {
    SIM.with(|s| s.borrow_mut().as_mut().map(f))
}

/// Called by tokio when every task is blocked: asks the driver to move time on if a device
/// command is waiting.
fn on_idle() {
    let driver = with_sim(|s| {
        if s.wakers.is_empty() || s.advance_wanted {
            return None;
        }
        s.advance_wanted = true;
        s.driver.take()
    });
    if let Some(w) = driver.flatten() {
        w.wake();
    }
}

impl SimState {
    /// The next instant to move to: the earliest live deadline, or the next millisecond tick
    /// of tokio's wheel if that is sooner.
    fn target(&mut self, now: Instant) -> Option<Instant> {
        while let Some(Reverse((_, id))) = self.timers.peek() {
            if self.wakers.contains_key(id) {
                break;
            }
            self.timers.pop();
        }
        let Reverse((deadline, _)) = *self.timers.peek()?;
        let since = now.saturating_duration_since(self.origin);
        let ticks = since.as_nanos() / TICK.as_nanos() + 1;
        let tick = self.origin + TICK * u32::try_from(ticks).unwrap_or(u32::MAX);
        Some(deadline.min(tick))
    }

    fn take_due(&mut self, now: Instant) -> Vec<Waker> {
        let mut due = Vec::new();
        while let Some(Reverse((deadline, id))) = self.timers.peek().copied() {
            if deadline > now {
                break;
            }
            self.timers.pop();
            if let Some(w) = self.wakers.remove(&id) {
                due.push(w);
            }
        }
        self.advance_wanted = false;
        self.steps += 1;
        due
    }
}

/// Resolves once the idle hook has asked for time to move on.
struct AdvanceWanted;

impl Future for AdvanceWanted {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let wanted = with_sim(|s| {
            if s.advance_wanted {
                return true;
            }
            s.driver = Some(cx.waker().clone());
            false
        });
        match wanted {
            Some(true) => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }
}

async fn drive() {
    loop {
        AdvanceWanted.await;
        let now = Instant::now();
        if let Some(target) = with_sim(|s| s.target(now)).flatten() {
            if target > now {
                tokio::time::advance(target - now).await;
            }
        }
        let now = Instant::now();
        for w in with_sim(|s| s.take_due(now)).unwrap_or_default() {
            w.wake();
        }
    }
}

/// A current-thread tokio runtime with a paused clock that jumps exactly from one device
/// completion to the next (see the module documentation).
pub struct SimRuntime {
    rt: tokio::runtime::Runtime,
}

impl SimRuntime {
    pub fn new() -> std::io::Result<SimRuntime> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .on_thread_park(on_idle)
            .build()?;
        Ok(SimRuntime { rt })
    }

    /// Runs `f` to completion in virtual time.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        struct Uninstall;
        impl Drop for Uninstall {
            fn drop(&mut self) {
                SIM.with(|s| s.borrow_mut().take());
            }
        }
        let _uninstall = Uninstall;
        self.rt.block_on(async {
            SIM.with(|s| {
                *s.borrow_mut() = Some(SimState {
                    timers: BinaryHeap::new(),
                    wakers: BTreeMap::new(),
                    next_id: 0,
                    driver: None,
                    advance_wanted: false,
                    origin: Instant::now(),
                    steps: 0,
                })
            });
            let driver = tokio::spawn(drive());
            let out = f.await;
            driver.abort();
            out
        })
    }
}

/// How many times the clock of the running `SimRuntime` has moved on (0 outside one).
pub fn sim_steps() -> u64 {
    with_sim(|s| s.steps).unwrap_or(0)
}

/// A wait for an instant of virtual time, registered with the running `SimRuntime`.
struct SimSleep {
    deadline: Instant,
    id: Option<u64>,
}

impl Future for SimSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let (deadline, id) = (self.deadline, self.id);
        let registered = with_sim(|s| {
            let id = id.unwrap_or_else(|| {
                s.next_id += 1;
                s.timers.push(Reverse((deadline, s.next_id)));
                s.next_id
            });
            s.wakers.insert(id, cx.waker().clone());
            id
        });
        self.id = registered;
        Poll::Pending
    }
}

impl Drop for SimSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            with_sim(|s| s.wakers.remove(&id));
        }
    }
}

/// Waits until `deadline` in the given mode.
pub async fn wait_until(mode: ClockMode, deadline: Instant) {
    if Instant::now() >= deadline {
        return;
    }
    match mode {
        ClockMode::Virtual if with_sim(|_| ()).is_some() => SimSleep { deadline, id: None }.await,
        ClockMode::Virtual => tokio::time::sleep_until(deadline).await,
        ClockMode::RealTime => real_wait_until(deadline).await,
    }
}

async fn real_wait_until(deadline: Instant) {
    if let Some(early) = deadline.checked_sub(TICK) {
        if early > Instant::now() {
            tokio::time::sleep_until(early).await;
        }
    }
    loop {
        let before = Instant::now();
        if before >= deadline {
            return;
        }
        tokio::task::yield_now().await;
        if Instant::now() == before {
            // The clock does not move while we spin: it is paused. Let tokio advance it.
            tokio::time::sleep_until(deadline).await;
            return;
        }
    }
}
