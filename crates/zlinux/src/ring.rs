//! One io_uring and the thread that drives it: callers hand it owned commands through a
//! channel and await a oneshot reply; the thread keeps up to `depth` of them in flight.
//!
//! Fault model: a command's errno is returned to its caller, never retried here. If the ring
//! itself fails (io_uring_enter errors other than EINTR) every queued and later command
//! fails with ENXIO, so callers see a dead device instead of hanging.
//!
//! The same loop drives a plain ring on the block device and, for NVMe passthrough, a ring
//! with 128-byte submission and 32-byte completion entries on the generic character device
//! (IORING_OP_URING_CMD needs both; the completion's extra words carry the command's result,
//! e.g. the LBA a Zone Append landed at).
//!
//! Wake-ups: the thread sleeps in io_uring_enter waiting for completions, so a new command
//! must be able to wake it. A read on an eventfd stays armed in the ring; [`Ring::submit`]
//! writes the eventfd after queueing, which completes that read and wakes the thread.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::thread::JoinHandle;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use tokio::sync::oneshot;

use crate::buf::AlignedBuf;
use crate::nvme::{NvmeCmd, NVME_URING_CMD_IO};

/// One command for the ring.
pub enum Cmd {
    Read {
        offset: u64,
        buf: AlignedBuf,
    },
    Write {
        offset: u64,
        buf: AlignedBuf,
        fua: bool,
    },
    Flush,
    /// An NVMe command through passthrough, with its data buffer and, when the command
    /// carries per-block metadata, its separate metadata buffer (passthrough rings only).
    Passthru {
        cmd: NvmeCmd,
        buf: AlignedBuf,
        meta: Option<AlignedBuf>,
    },
}

/// The reply: the kernel's result (bytes moved, or -errno; for passthrough 0, a positive
/// NVMe status or -errno), the command's 64-bit result (passthrough: CQE DW0-1; else 0) and
/// the buffers back.
pub struct Done {
    pub result: i32,
    pub result64: u64,
    pub buf: Option<AlignedBuf>,
    pub meta: Option<AlignedBuf>,
}

impl Done {
    /// A command that never reached the device: the ring is gone.
    pub fn failed(errno: i32) -> Done {
        Done {
            result: -errno,
            result64: 0,
            buf: None,
            meta: None,
        }
    }
}

/// Submission entries this ring can carry: a plain ring has no room for a passthrough
/// command.
pub trait SqEntry: squeue::EntryMarker + Send + 'static {
    fn uring_cmd(e: squeue::Entry128) -> Option<Self>;
}

impl SqEntry for squeue::Entry {
    fn uring_cmd(_: squeue::Entry128) -> Option<Self> {
        None
    }
}

impl SqEntry for squeue::Entry128 {
    fn uring_cmd(e: squeue::Entry128) -> Option<Self> {
        Some(e)
    }
}

/// Completion entries, with the big completion's first extra word where there is one.
pub trait CqEntry: cqueue::EntryMarker + Send + 'static {
    fn result64(&self) -> u64;
    fn parts(&self) -> (u64, i32);
}

impl CqEntry for cqueue::Entry {
    fn result64(&self) -> u64 {
        0
    }
    fn parts(&self) -> (u64, i32) {
        (self.user_data(), self.result())
    }
}

impl CqEntry for cqueue::Entry32 {
    fn result64(&self) -> u64 {
        self.big_cqe()[0]
    }
    fn parts(&self) -> (u64, i32) {
        (self.user_data(), self.result())
    }
}

struct Queued {
    cmd: Cmd,
    reply: oneshot::Sender<Done>,
}

/// A running ring. Dropping it stops the thread after the commands in flight complete.
pub struct Ring {
    tx: Option<mpsc::Sender<Queued>>,
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

const WAKE: u64 = u64::MAX;

impl Ring {
    /// Starts the ring thread for `fd` (which must outlive the ring) with `depth` entries.
    pub fn start(fd: RawFd, depth: u32) -> std::io::Result<Ring> {
        Ring::start_with(
            IoUring::<squeue::Entry, cqueue::Entry>::new(depth)?,
            fd,
            depth,
        )
    }

    /// Starts a passthrough ring (SQE128, CQE32) for the NVMe character device `fd`.
    pub fn start_passthru(fd: RawFd, depth: u32) -> std::io::Result<Ring> {
        let uring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder().build(depth)?;
        Ring::start_with(uring, fd, depth)
    }

    fn start_with<S: SqEntry, C: CqEntry>(
        uring: IoUring<S, C>,
        fd: RawFd,
        depth: u32,
    ) -> std::io::Result<Ring> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: efd is a fresh descriptor nobody else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("zlinux-uring".into())
            .spawn(move || drive(uring, fd, efd, rx, depth as usize))?;
        Ok(Ring {
            tx: Some(tx),
            wake,
            thread: Some(thread),
        })
    }

    /// Queues `cmd` and returns the receiver of its reply. The caller bounds how many
    /// commands it queues (the device's semaphore); the ring bounds how many are in flight.
    pub fn submit(&self, cmd: Cmd) -> oneshot::Receiver<Done> {
        let (reply, rx) = oneshot::channel();
        if let Some(tx) = &self.tx {
            // A send fails only when the thread has exited; the dropped reply tells the caller.
            if tx.send(Queued { cmd, reply }).is_ok() {
                self.kick();
            }
        }
        rx
    }

    fn kick(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A failed write can only be
        // EAGAIN on a counter near overflow, where the thread is awake anyway.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.tx = None;
        self.kick();
        if let Some(t) = self.thread.take() {
            // A panicked ring thread has nothing left to clean up.
            let _ = t.join();
        }
    }
}

struct InFlight {
    buf: Option<AlignedBuf>,
    meta: Option<AlignedBuf>,
    reply: oneshot::Sender<Done>,
}

/// The submission entry of `cmd`, or None when this ring cannot carry it.
fn entry<S: SqEntry>(fd: RawFd, cmd: &mut Cmd, slot: u64) -> Option<S> {
    let fd = types::Fd(fd);
    let plain = match cmd {
        Cmd::Read { offset, buf } => opcode::Read::new(fd, buf.as_mut_ptr(), buf.len() as u32)
            .offset(*offset)
            .build(),
        Cmd::Write { offset, buf, fua } => {
            opcode::Write::new(fd, buf.as_mut_ptr(), buf.len() as u32)
                .offset(*offset)
                // RWF_DSYNC on an O_DIRECT block device write becomes a FUA write.
                .rw_flags(if *fua { libc::RWF_DSYNC } else { 0 })
                .build()
        }
        Cmd::Flush => opcode::Fsync::new(fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
        Cmd::Passthru { cmd, buf, meta } => {
            let meta_addr = meta.as_mut().map_or(0, |m| m.as_mut_ptr() as u64);
            let bytes = cmd.encode(buf.as_mut_ptr() as u64, meta_addr);
            let e = opcode::UringCmd80::new(fd, NVME_URING_CMD_IO)
                .cmd(bytes)
                .build()
                .user_data(slot);
            return S::uring_cmd(e);
        }
    };
    Some(S::from(plain.user_data(slot)))
}

fn drive<S: SqEntry, C: CqEntry>(
    mut uring: IoUring<S, C>,
    fd: RawFd,
    efd: RawFd,
    rx: mpsc::Receiver<Queued>,
    depth: usize,
) {
    let mut slots: Vec<Option<InFlight>> = (0..depth).map(|_| None).collect();
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut backlog: VecDeque<Queued> = VecDeque::new();
    // Leaked on purpose (8 bytes per device): the kernel cancels the armed eventfd read
    // asynchronously when the ring closes, so its target must outlive this function.
    let wake_buf: &'static mut u64 = Box::leak(Box::new(0u64));
    let mut wake_armed = false;
    let mut open = true;
    loop {
        if !wake_armed && open {
            let e = S::from(
                opcode::Read::new(types::Fd(efd), &mut *wake_buf as *mut u64 as *mut u8, 8)
                    .build()
                    .user_data(WAKE),
            );
            // SAFETY: wake_buf is never freed.
            if unsafe { uring.submission().push(&e) }.is_ok() {
                wake_armed = true;
            }
        }
        loop {
            match rx.try_recv() {
                Ok(q) => backlog.push_back(q),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        while let Some(slot) = free.last().copied() {
            let Some(mut q) = backlog.pop_front() else {
                break;
            };
            let Some(e) = entry::<S>(fd, &mut q.cmd, slot as u64) else {
                // The caller may have given up on the command; its reply is then dropped.
                let _ = q.reply.send(Done::failed(libc::EOPNOTSUPP));
                continue;
            };
            // SAFETY: the buffers the entry points to move into `slots` and stay there, at a
            // fixed heap address, until the completion for this slot arrives.
            if unsafe { uring.submission().push(&e) }.is_err() {
                backlog.push_front(q);
                break;
            }
            free.pop();
            let (buf, meta) = match q.cmd {
                Cmd::Read { buf, .. } | Cmd::Write { buf, .. } => (Some(buf), None),
                Cmd::Passthru { buf, meta, .. } => (Some(buf), meta),
                Cmd::Flush => (None, None),
            };
            slots[slot] = Some(InFlight {
                buf,
                meta,
                reply: q.reply,
            });
        }
        let in_flight = depth - free.len();
        if !open && in_flight == 0 && backlog.is_empty() {
            return;
        }
        match uring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(_) => {
                fail_all(&mut slots, &mut backlog, &rx);
                return;
            }
        }
        for cqe in uring.completion() {
            let (user_data, result) = cqe.parts();
            if user_data == WAKE {
                wake_armed = false;
                continue;
            }
            let slot = user_data as usize;
            if let Some(f) = slots.get_mut(slot).and_then(Option::take) {
                free.push(slot);
                // The caller may have given up on the command; its reply is then dropped.
                let _ = f.reply.send(Done {
                    result,
                    result64: cqe.result64(),
                    buf: f.buf,
                    meta: f.meta,
                });
            }
        }
    }
}

fn fail_all(
    slots: &mut [Option<InFlight>],
    backlog: &mut VecDeque<Queued>,
    rx: &mpsc::Receiver<Queued>,
) {
    // In-flight buffers are leaked rather than freed: the kernel may still write into them.
    for f in slots.iter_mut().filter_map(Option::take) {
        std::mem::forget(f.buf);
        std::mem::forget(f.meta);
        let _ = f.reply.send(Done::failed(libc::ENXIO));
    }
    backlog.extend(rx.try_iter());
    for q in backlog.drain(..) {
        let _ = q.reply.send(Done::failed(libc::ENXIO));
    }
}
