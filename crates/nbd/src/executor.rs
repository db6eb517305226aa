//! A thread of the server's own that runs requests on the volume, beside the thread that
//! reads and writes the sockets.
//!
//! Why: a connection's reader parses requests and, without this thread, runs each one itself
//! (`conn.rs`, `start`), so one client's socket reads and its requests' work on the volume
//! (the copy of every written byte into an in-memory store) take turns on one thread. While
//! that thread copies one write, the client's next payload waits in a socket buffer of about
//! 200 KiB and the client waits for room. With the requests run here, the reader goes on
//! reading while the last requests run. Measured on a loaded two-core machine the hand-offs
//! cost more than the overlap saved, so servers start without it unless asked
//! (docs/BENCHMARKS.md, "Syscalls and context switches per request").
//!
//! Shape: one thread per server, running a single-threaded tokio runtime, fed through an
//! unbounded channel; the channel is bounded in effect by the server-wide budget, which every
//! request takes before it is started (`conn.rs`, `take_budgets`). The thread polls each
//! request once and spawns it on its runtime only if it has to wait, as the reader does
//! without this thread. A request's reply goes back through its connection's channel to the
//! writer. The thread ends when the last sender is gone: the server and every connection and
//! request (each holds the server's shared state, which holds the sender), so it never drops
//! a request that was started.
//!
//! Fault model: a request that panics is caught inside it (`conn.rs`, `execute_caught`), so it
//! cannot end the thread. Should the thread be gone anyway, `submit` returns the request so
//! the caller runs it itself: a request is never lost.

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::sync::mpsc;

/// A request on its way to the executor thread.
pub(crate) type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Requests received from the channel at once, to take a burst with one wake-up.
const BATCH: usize = 64;

/// The thread's name, as `ps -L` and `top -H` show it.
pub(crate) const THREAD_NAME: &str = "nbd-requests";

/// What the thread runs.
type Body = Box<dyn FnOnce() + Send>;

/// The sending side of the executor thread.
pub(crate) struct Executor {
    tx: mpsc::UnboundedSender<Job>,
}

impl Executor {
    /// Starts the thread.
    pub fn start() -> io::Result<Executor> {
        Executor::start_with(|name, body| {
            std::thread::Builder::new().name(name).spawn(body).map(drop)
        })
    }

    /// Starts the thread with `spawn` (tests inject its failure).
    fn start_with(spawn: impl FnOnce(String, Body) -> io::Result<()>) -> io::Result<Executor> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (tx, rx) = mpsc::unbounded_channel();
        spawn(THREAD_NAME.into(), Box::new(move || rt.block_on(run(rx))))?;
        Ok(Executor { tx })
    }

    /// Hands `job` to the thread; gives it back if the thread is gone.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.tx.send(job).map_err(|e| e.0)
    }
}

async fn run(mut rx: mpsc::UnboundedReceiver<Job>) {
    let mut jobs = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut jobs, BATCH).await > 0 {
        for mut job in jobs.drain(..) {
            if crate::conn::ready_now(&mut job).await.is_none() {
                tokio::spawn(job);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_cannot_start_is_an_error_with_its_cause() {
        let failed = Executor::start_with(|_, _| Err(io::Error::other("no threads left")));
        let e = failed.err().expect("the spawn failed");
        assert_eq!(e.to_string(), "no threads left");
        let shown = crate::ServerError::Thread(e).to_string();
        assert_eq!(
            shown,
            "cannot start the thread that runs NBD requests: no threads left"
        );
    }

    #[test]
    fn submitted_jobs_run_on_the_thread_and_a_waiting_one_is_not_lost() {
        let ex = Executor::start().expect("thread");
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
        // The first job waits for the gate, the second completes at once.
        let d = done_tx.clone();
        let waits: Job = Box::pin(async move {
            let _ = gate_rx.await;
            let _ = d.send(("waited", std::thread::current().name().map(String::from)));
        });
        let d = done_tx;
        let at_once: Job = Box::pin(async move {
            let _ = d.send(("at once", std::thread::current().name().map(String::from)));
        });
        assert!(ex.submit(waits).is_ok());
        assert!(ex.submit(at_once).is_ok());
        let first = done_rx.blocking_recv().expect("a job ran");
        assert_eq!(first, ("at once", Some(THREAD_NAME.to_string())));
        gate_tx.send(()).expect("the waiting job is alive");
        let second = done_rx.blocking_recv().expect("the waiting job ran");
        assert_eq!(second, ("waited", Some(THREAD_NAME.to_string())));
    }
}
