//! One client connection: the handshake, then the transmission phase with many requests in
//! flight and replies sent as they complete, in any order.
//!
//! Shape: a reader parses requests and starts each one (bounded by a count and a byte
//! budget): it polls the request once itself, and a request that has to wait goes on as a task
//! of its own; a writer, polled in the same task as the reader, sends each reply when its
//! request finishes. The connection ends when the reader has stopped and every request task
//! has finished (handed back its reply, or been dropped because the client left), so a
//! connection that is gone has nothing left running.
//!
//! Fault model: the client is untrusted and may send anything, stall, or vanish at any byte.
//! Bad requests get an errno; bytes we cannot stay in step with (bad magic, a payload too
//! large to skip, a protocol violation in the handshake) end the connection. A reply is sent
//! only after the volume completed the request, so an acknowledged write is on the volume
//! whatever the client does next. A client that vanishes (its socket reads end of file or
//! fails, or a reply cannot be written) must not keep the server busy with work nobody will
//! read: requests it sent that have not started on the volume are dropped unstarted, reads in
//! progress are abandoned (they change nothing), and commands that change the volume and have
//! started run to completion, so none is torn by the client leaving. A `DISC`, a protocol
//! violation or a server shutdown instead let every request already read finish and be
//! answered while the socket still takes replies. A connection's own budget and the
//! server-wide one (`budget.rs`) bound what any number of clients can make the server hold or
//! run at once.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, watch};
use zns::{BlockDevice, BlockError, BlockResult};

use crate::budget::{Budget, Closed, Held};
use crate::executor::{Executor, Job};
use crate::inbox::Inbox;
use crate::io as bio;
use crate::locks::BlockLocks;
use crate::negotiate::{self, ExportInfo, Next};
use crate::proto::{self, ProtoError, Request, SimpleReply};
use crate::request::{self, Limits, Op, Payload};

/// Options one handshake may send before we decide the client is not going to finish.
const MAX_OPTIONS: usize = 256;
/// Longest option data accepted (a name of 4096 bytes plus many info requests fits).
const MAX_OPTION_DATA: u32 = 16 * 1024;
/// Reply bytes gathered before a write to the socket.
const WRITE_BUFFER: usize = 64 * 1024;

/// What every connection of one server shares.
pub(crate) struct Shared {
    pub device: Arc<dyn BlockDevice>,
    pub export: ExportInfo,
    pub limits: Limits,
    pub locks: BlockLocks,
    pub max_in_flight: usize,
    pub max_in_flight_bytes: usize,
    /// The budget every connection's requests draw on before they start on the volume.
    pub server_budget: Budget,
    pub handshake_timeout: std::time::Duration,
    /// The thread requests run on, if the server has one (`executor.rs`); without it the
    /// reader runs them.
    pub executor: Option<Executor>,
}

/// Why a connection ended early: a socket error (a client vanishing mid-message is one) or
/// a protocol violation.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
    #[error("protocol violation: {0}")]
    Protocol(#[from] ProtoError),
    #[error("protocol violation: {0}")]
    Violation(&'static str),
}

/// Resolves once the server asks connections to stop (or the server is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped: the server is gone, which is a stop too.
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves one connection from greeting to close.
pub(crate) async fn serve<R, W>(
    mut r: R,
    mut w: W,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ConnError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // A server shutting down does not wait for a client still haggling over options, and a
    // client that never finishes haggling does not keep its connection slot.
    let haggle = tokio::time::timeout(
        shared.handshake_timeout,
        handshake(&mut r, &mut w, &shared.export),
    );
    let transmit = tokio::select! {
        t = haggle => t.map_err(|_| ConnError::Violation("handshake not finished in time"))??,
        _ = stopped(&mut stop) => false,
    };
    if !transmit {
        return Ok(());
    }
    // Buffered only now: the handshake reads exactly what it needs, so no byte the client
    // sent after it is left behind in a buffer that is dropped.
    let r = Inbox::new(r);
    let (tx, rx) = mpsc::channel(shared.max_in_flight);
    // Set once the client's socket is closed: by the reader at end of file or a read error,
    // by the writer at a write error.
    let gone = watch::channel(false).0;
    let (read, write) = tokio::join!(
        read_requests(r, tx, &shared, stop, &gone),
        write_replies(w, rx, &gone)
    );
    read?;
    write?;
    Ok(())
}

/// Fixed-newstyle negotiation. Returns whether to enter transmission.
async fn handshake<R, W>(r: &mut R, w: &mut W, export: &ExportInfo) -> Result<bool, ConnError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let offered = proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES;
    w.write_all(&proto::encode_greeting(offered)).await?;
    w.flush().await?;
    let mut flags = [0u8; proto::CLIENT_FLAGS_LEN];
    r.read_exact(&mut flags).await?;
    let client = proto::decode_client_flags(&flags, offered)?;
    for _ in 0..MAX_OPTIONS {
        let mut header = [0u8; proto::OPTION_HEADER_LEN];
        r.read_exact(&mut header).await?;
        let header = proto::decode_option_header(&header)?;
        if header.length > MAX_OPTION_DATA {
            return Err(ConnError::Violation("option data longer than 16 KiB"));
        }
        let mut data = vec![0u8; header.length as usize];
        r.read_exact(&mut data).await?;
        let answer = negotiate::answer(export, client, header.option, &data);
        w.write_all(&answer.bytes).await?;
        w.flush().await?;
        match answer.next {
            Next::Continue => {}
            Next::Close => return Ok(false),
            Next::Transmit => return Ok(true),
        }
    }
    Err(ConnError::Violation("too many options in one handshake"))
}

/// A reply on its way to the writer, with the in-flight budget it holds until it is sent.
struct Reply {
    handle: u64,
    error: u32,
    data: Vec<u8>,
    _held: Held,
}

fn closed(_: Closed) -> ConnError {
    // The semaphores live as long as the server and are never closed.
    ConnError::Violation("in-flight budget closed")
}

/// Reads (or skips) what follows a request header; returns a WRITE's data, after taking the
/// connection's budget for its bytes.
async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut Inbox<R>,
    req: &Request,
    shared: &Shared,
    budget: &Budget,
    held: &mut Held,
) -> Result<Bytes, ConnError> {
    match request::payload(req, &shared.limits) {
        Payload::None => Ok(Bytes::new()),
        Payload::Data(n) => {
            held.add(budget.bytes(n).await.map_err(closed)?);
            Ok(r.payload(n as usize).await?)
        }
        Payload::Drain(n) => {
            r.skip(n as usize).await?;
            Ok(Bytes::new())
        }
        Payload::Disconnect => Err(ConnError::Violation("write payload too large to skip")),
    }
}

/// Why the reader stopped reading requests.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The client's socket closed or broke.
    Gone,
    /// `NBD_CMD_DISC`: finish and answer everything read so far, then close.
    Disc,
    /// The server is shutting down: the same.
    Stop,
}

/// The two signals that end a reader's wait.
struct Ends {
    stop: watch::Receiver<bool>,
    gone: watch::Receiver<bool>,
}

impl Ends {
    /// Runs `f` unless the server stops or the client is gone first.
    async fn unless_ended<F: Future>(&mut self, f: F) -> Result<F::Output, End> {
        if is_set(&self.gone) {
            return Err(End::Gone);
        }
        if is_set(&self.stop) {
            return Err(End::Stop);
        }
        let mut f = pin!(f);
        if let Some(out) = ready_now(&mut f).await {
            return Ok(out);
        }
        tokio::select! {
            biased;
            _ = stopped(&mut self.gone) => Err(End::Gone),
            _ = stopped(&mut self.stop) => Err(End::Stop),
            out = f => Ok(out),
        }
    }

    /// Runs `f` unless the client is gone first. A request already begun is not cut short by
    /// a shutdown, which lets requests already sent finish.
    async fn unless_gone<F: Future>(&mut self, f: F) -> Result<F::Output, End> {
        unless_gone(&mut self.gone, f).await
    }
}

/// Runs `f` unless the client is gone first (checked first, as a biased `select!` would).
///
/// Most waits of a busy connection are ready at once (the next header is already buffered,
/// the budget has room, a read of the in-memory volume completes in its first poll), so `f`
/// is polled once before the `select!`: waiting on the watch registers a waiter on its
/// notifier and removes it again, a lock round trip each, which at queue depth 16 cost more
/// than a small request's own work.
async fn unless_gone<F: Future>(gone: &mut watch::Receiver<bool>, f: F) -> Result<F::Output, End> {
    if is_set(gone) {
        return Err(End::Gone);
    }
    let mut f = pin!(f);
    if let Some(out) = ready_now(&mut f).await {
        return Ok(out);
    }
    tokio::select! {
        biased;
        _ = stopped(gone) => Err(End::Gone),
        out = f => Ok(out),
    }
}

/// Whether `stopped` on this receiver would resolve at once: the flag is set or its sender
/// is gone.
fn is_set(rx: &watch::Receiver<bool>) -> bool {
    *rx.borrow() || rx.has_changed().is_err()
}

/// Polls `f` once; its output if it was ready. A future that is not ready has registered the
/// task's waker, as it would in any poll, and is polled again by the caller.
pub(crate) async fn ready_now<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match Pin::new(&mut *f).poll(cx) {
        Poll::Ready(out) => Poll::Ready(Some(out)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// The reader: parses requests until the client disconnects or the server stops, and starts
/// each valid one as its own task. Marks the client gone when its socket closes.
async fn read_requests<R>(
    r: Inbox<R>,
    tx: mpsc::Sender<Reply>,
    shared: &Arc<Shared>,
    stop: watch::Receiver<bool>,
    gone: &watch::Sender<bool>,
) -> Result<(), ConnError>
where
    R: AsyncRead + Unpin,
{
    let mut ends = Ends {
        stop,
        gone: gone.subscribe(),
    };
    let result = read_loop(r, tx, shared, &mut ends).await;
    if matches!(result, Ok(End::Gone) | Err(ConnError::Io(_))) {
        gone.send_replace(true);
    }
    result.map(drop)
}

/// Reads one request after another; see `read_requests`.
async fn read_loop<R>(
    mut r: Inbox<R>,
    tx: mpsc::Sender<Reply>,
    shared: &Arc<Shared>,
    ends: &mut Ends,
) -> Result<End, ConnError>
where
    R: AsyncRead + Unpin,
{
    let budget = Budget::new(shared.max_in_flight, shared.max_in_flight_bytes);
    loop {
        let mut header = [0u8; proto::REQUEST_LEN];
        let more = match ends.unless_ended(r.header(&mut header)).await {
            Ok(more) => more?,
            Err(end) => return Ok(end),
        };
        if !more {
            return Ok(End::Gone);
        }
        let req = proto::decode_request(&header)?;
        let mut held = Held::default();
        match ends.unless_gone(budget.request()).await {
            Ok(permit) => held.add(permit.map_err(closed)?),
            Err(end) => return Ok(end),
        }
        let read = read_payload(&mut r, &req, shared, &budget, &mut held);
        let payload = match ends.unless_gone(read).await {
            Ok(payload) => payload?,
            Err(end) => return Ok(end),
        };
        let op = match request::check(&req, &shared.limits) {
            Ok(Op::Disconnect) => return Ok(End::Disc),
            Ok(op) => op,
            Err(error) => {
                let (handle, data) = (req.handle, Vec::new());
                let _held = held;
                // The writer receives until every sender is gone, so this cannot fail.
                let _ = tx
                    .send(Reply {
                        handle,
                        error,
                        data,
                        _held,
                    })
                    .await;
                continue;
            }
        };
        if let Err(end) = take_budgets(shared, &budget, op, &mut held, ends).await? {
            return Ok(end);
        }
        let task = Task {
            shared: shared.clone(),
            req,
            op,
            payload,
            tx: tx.clone(),
            gone: ends.gone.clone(),
            held,
        };
        start(shared, task).await;
    }
}

/// Starts a request: its first poll runs here, in the reader, and only a request that has to
/// wait (for a block lock, for space on the volume, for a device that completes later) goes
/// on as a task of its own. On an in-memory volume almost every request completes in that
/// first poll, and spawning it cost more than its work: a task allocation, a trip through the
/// run queue and the runtime's task list, and a wake-up of the task.
///
/// A request that does not complete registered the reader's waker in its first poll; the
/// task it continues in polls it again at once (a new task is always polled), which
/// registers the task's own waker, so no wake-up is lost; the reader's may come spuriously.
///
/// A server with an executor thread (`executor.rs`) hands the request to it instead, and the
/// reader goes on reading.
async fn start(shared: &Shared, task: Task) {
    let mut run: Job = Box::pin(task.run());
    if let Some(executor) = &shared.executor {
        match executor.submit(run) {
            Ok(()) => return,
            // The thread is gone (it cannot end while a server holds it): run it here.
            Err(job) => run = job,
        }
    }
    if ready_now(&mut run).await.is_none() {
        tokio::spawn(run);
    }
}

/// Takes the rest of a checked request's budget: the connection's bytes for a read's data,
/// then the server's request and bytes. Taken last, so that a request holds the server's
/// budget only once it can start at once, and a client that stalls mid-payload holds none.
async fn take_budgets(
    shared: &Shared,
    budget: &Budget,
    op: Op,
    held: &mut Held,
    ends: &mut Ends,
) -> Result<Result<(), End>, ConnError> {
    let data_len = match op {
        Op::Read { len, .. } => {
            match ends.unless_gone(budget.bytes(len)).await {
                Ok(permit) => held.add(permit.map_err(closed)?),
                Err(end) => return Ok(Err(end)),
            }
            len
        }
        Op::Write { len, .. } => len,
        _ => 0,
    };
    let server = shared.server_budget.request_with_bytes(data_len, held);
    match ends.unless_gone(server).await {
        Ok(taken) => taken.map_err(closed)?,
        Err(end) => return Ok(Err(end)),
    }
    Ok(Ok(()))
}

/// One request executing on the volume.
struct Task {
    shared: Arc<Shared>,
    req: Request,
    op: Op,
    payload: Bytes,
    tx: mpsc::Sender<Reply>,
    gone: watch::Receiver<bool>,
    held: Held,
}

impl Task {
    async fn run(self) {
        let Task {
            shared,
            req,
            op,
            payload,
            tx,
            mut gone,
            held,
        } = self;
        if *gone.borrow() {
            // The client left before the request started: nobody will read its reply.
            return;
        }
        let (result, data) = if let Op::Read { .. } = op {
            // A read changes nothing, so one whose client has gone is abandoned midway.
            match unless_gone(&mut gone, execute_caught(&shared, op, payload)).await {
                Ok(out) => out,
                Err(_) => return,
            }
        } else {
            // A command that changes the volume runs to completion once started, whatever the
            // client does, so that none is left torn.
            execute_caught(&shared, op, payload).await
        };
        let (error, data) = match result {
            Ok(()) => (0, data),
            Err(e) => {
                let (offset, length) = op.range();
                tracing::warn!(
                    handle = req.handle,
                    command = op.name(),
                    offset,
                    length,
                    errno = e.errno(),
                    "NBD request failed: {e}"
                );
                (e.errno(), Vec::new())
            }
        };
        let reply = Reply {
            handle: req.handle,
            error,
            data,
            _held: held,
        };
        // If the client is gone the writer drops the reply; the work itself is done.
        let _ = tx.send(reply).await;
    }
}

/// Runs one checked request on the volume; returns read data, if any.
/// `execute`, with a panic in the volume's code turned into this request's error (EIO, logged
/// with the panic's message), so that its client gets a reply instead of waiting for ever.
async fn execute_caught(shared: &Shared, op: Op, payload: Bytes) -> (BlockResult<()>, Vec<u8>) {
    match zns::panic::caught(execute(shared, op, payload)).await {
        Ok(out) => out,
        Err(why) => {
            tracing::error!(
                command = op.name(),
                "the volume panicked on an NBD request: {why}"
            );
            let e = BlockError::Failed(format!("the volume panicked: {why}"));
            (Err(e), Vec::new())
        }
    }
}

async fn execute(shared: &Shared, op: Op, payload: Bytes) -> (BlockResult<()>, Vec<u8>) {
    let dev = shared.device.as_ref();
    let locks = &shared.locks;
    match op {
        Op::Read { offset, len } => {
            let mut buf = vec![0u8; len as usize];
            let result = bio::read(dev, offset, &mut buf).await;
            (result, buf)
        }
        Op::Write { offset, fua, .. } => (
            bio::write(dev, locks, offset, &payload, fua).await,
            Vec::new(),
        ),
        Op::Flush => (dev.flush().await, Vec::new()),
        Op::Trim { offset, len, fua } => (
            bio::trim(dev, locks, offset, len as usize, fua).await,
            Vec::new(),
        ),
        Op::WriteZeroes { offset, len, fua } => (
            bio::write_zeroes(dev, locks, offset, len as usize, fua).await,
            Vec::new(),
        ),
        // The reader handles DISC itself; nothing to execute.
        Op::Disconnect => (Ok(()), Vec::new()),
    }
}

/// The writer: sends replies in completion order until every sender is gone. After a socket
/// error it marks the client gone (so requests not started are dropped and reads abandoned)
/// and keeps receiving, and dropping, replies so that request tasks finish and release their
/// budget; the error is reported at the end.
async fn write_replies<W>(
    w: W,
    mut rx: mpsc::Receiver<Reply>,
    gone: &watch::Sender<bool>,
) -> Result<(), ConnError>
where
    W: AsyncWrite + Unpin,
{
    let mut w = BufWriter::with_capacity(WRITE_BUFFER, w);
    let mut failed: Option<io::Error> = None;
    while let Some(reply) = rx.recv().await {
        if failed.is_some() {
            continue;
        }
        let header = proto::encode_simple_reply(&SimpleReply {
            error: reply.error,
            handle: reply.handle,
        });
        let mut sent = w.write_all(&header).await;
        if sent.is_ok() && reply.error == 0 {
            sent = w.write_all(&reply.data).await;
        }
        // Flush when nothing else is ready, so that a burst goes out in few writes and a lone
        // reply is not held back.
        if sent.is_ok() && rx.is_empty() {
            sent = w.flush().await;
        }
        failed = sent.err();
        if failed.is_some() {
            gone.send_replace(true);
        }
    }
    match failed {
        Some(e) => Err(e.into()),
        None => {
            w.flush().await?;
            w.shutdown().await?;
            Ok(())
        }
    }
}
