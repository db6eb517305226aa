//! One client connection: the handshake, then the transmission phase with many requests in
//! flight and replies sent as they complete, in any order.
//!
//! Shape: a reader parses requests and spawns one task per request (bounded by a count and a
//! byte budget); a writer, polled in the same task as the reader, sends each reply when its
//! request finishes. The connection ends when the reader has stopped and every request task
//! has handed back its reply, so a connection that is gone has nothing left running.
//!
//! Fault model: the client is untrusted and may send anything, stall, or vanish at any byte.
//! Bad requests get an errno; bytes we cannot stay in step with (bad magic, a payload too
//! large to skip, a protocol violation in the handshake) end the connection. A reply is sent
//! only after the volume completed the request, so an acknowledged write is on the volume
//! whatever the client does next; requests in flight when the client vanishes still run to
//! completion, and only their replies are lost.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use zns::{BlockDevice, BlockResult};

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
    pub handshake_timeout: std::time::Duration,
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
    let (tx, rx) = mpsc::channel(shared.max_in_flight);
    let (read, write) = tokio::join!(read_requests(r, tx, &shared, stop), write_replies(w, rx));
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
    _count: OwnedSemaphorePermit,
    _bytes: Option<OwnedSemaphorePermit>,
}

/// Reads a request header; `Ok(false)` when the client closed cleanly between requests.
async fn read_header<R: AsyncRead + Unpin>(
    r: &mut R,
    b: &mut [u8; proto::REQUEST_LEN],
) -> io::Result<bool> {
    let n = r.read(&mut b[..]).await?;
    if n == 0 {
        return Ok(false);
    }
    r.read_exact(&mut b[n..]).await?;
    Ok(true)
}

/// Skips `n` payload bytes of a refused write.
async fn drain<R: AsyncRead + Unpin>(r: &mut R, n: u32) -> io::Result<()> {
    let copied = tokio::io::copy(&mut r.take(u64::from(n)), &mut tokio::io::sink()).await?;
    if copied < u64::from(n) {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// A connection's in-flight budget: a count of requests and a count of data bytes.
struct Budget {
    requests: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
}

impl Budget {
    async fn request(&self) -> Result<OwnedSemaphorePermit, ConnError> {
        self.requests.clone().acquire_owned().await.map_err(closed)
    }

    async fn bytes(&self, n: u32) -> Result<OwnedSemaphorePermit, ConnError> {
        self.bytes
            .clone()
            .acquire_many_owned(n)
            .await
            .map_err(closed)
    }
}

fn closed(_: tokio::sync::AcquireError) -> ConnError {
    // The semaphores belong to the reader and are never closed.
    ConnError::Violation("in-flight budget closed")
}

/// Reads (or skips) what follows a request header; returns a WRITE's data and the bytes
/// budget it holds.
async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    req: &Request,
    shared: &Shared,
    budget: &Budget,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), ConnError> {
    match request::payload(req, &shared.limits) {
        Payload::None => Ok((Vec::new(), None)),
        Payload::Data(n) => {
            let permit = budget.bytes(n).await?;
            let mut data = vec![0u8; n as usize];
            r.read_exact(&mut data).await?;
            Ok((data, Some(permit)))
        }
        Payload::Drain(n) => {
            drain(r, n).await?;
            Ok((Vec::new(), None))
        }
        Payload::Disconnect => Err(ConnError::Violation("write payload too large to skip")),
    }
}

/// The reader: parses requests until the client disconnects or the server stops, and starts
/// each valid one as its own task.
async fn read_requests<R>(
    mut r: R,
    tx: mpsc::Sender<Reply>,
    shared: &Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ConnError>
where
    R: AsyncRead + Unpin,
{
    let budget = Budget {
        requests: Arc::new(Semaphore::new(shared.max_in_flight)),
        bytes: Arc::new(Semaphore::new(shared.max_in_flight_bytes)),
    };
    loop {
        let mut header = [0u8; proto::REQUEST_LEN];
        let more = tokio::select! {
            biased;
            _ = stopped(&mut stop) => return Ok(()),
            more = read_header(&mut r, &mut header) => more?,
        };
        if !more {
            return Ok(());
        }
        let req = proto::decode_request(&header)?;
        let count = budget.request().await?;
        let (payload, mut bytes) = read_payload(&mut r, &req, shared, &budget).await?;
        let op = match request::check(&req, &shared.limits) {
            Ok(Op::Disconnect) => return Ok(()),
            Ok(op) => op,
            Err(error) => {
                let (handle, data) = (req.handle, Vec::new());
                let reply = Reply {
                    handle,
                    error,
                    data,
                    _count: count,
                    _bytes: bytes,
                };
                // The writer receives until every sender is gone, so this cannot fail.
                let _ = tx.send(reply).await;
                continue;
            }
        };
        if let Op::Read { len, .. } = op {
            bytes = Some(budget.bytes(len).await?);
        }
        let (shared, tx) = (shared.clone(), tx.clone());
        let task = Task {
            shared,
            req,
            op,
            payload,
            tx,
        };
        tokio::spawn(task.run(count, bytes));
    }
}

/// One request executing on the volume.
struct Task {
    shared: Arc<Shared>,
    req: Request,
    op: Op,
    payload: Vec<u8>,
    tx: mpsc::Sender<Reply>,
}

impl Task {
    async fn run(self, count: OwnedSemaphorePermit, bytes: Option<OwnedSemaphorePermit>) {
        let Task {
            shared,
            req,
            op,
            payload,
            tx,
        } = self;
        let (result, data) = execute(&shared, op, payload).await;
        let (error, data) = match result {
            Ok(()) => (0, data),
            Err(e) => (e.errno(), Vec::new()),
        };
        let reply = Reply {
            handle: req.handle,
            error,
            data,
            _count: count,
            _bytes: bytes,
        };
        // If the client is gone the writer drops the reply; the work itself is done.
        let _ = tx.send(reply).await;
    }
}

/// Runs one checked request on the volume; returns read data, if any.
async fn execute(shared: &Shared, op: Op, payload: Vec<u8>) -> (BlockResult<()>, Vec<u8>) {
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
/// error it keeps receiving (and dropping) replies so that request tasks finish and release
/// their budget; the error is reported at the end.
async fn write_replies<W>(w: W, mut rx: mpsc::Receiver<Reply>) -> Result<(), ConnError>
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
