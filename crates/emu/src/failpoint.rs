//! Host I/O failpoints, compiled in only with the `failpoints` cargo feature: make the N-th
//! host write of the image file (pwrite, ftruncate, fdatasync/fsync), counted on this thread
//! from when the failpoint is armed, fail with a chosen OS error, as a full host file system
//! (ENOSPC) or a failing host disk (EIO) would.
//!
//! Fault model: a failed pwrite of block data or metadata may have written a prefix of its
//! buffer (as a real short write followed by ENOSPC does); a failed write of a zone table
//! entry or the superblock wrote nothing (each lies within one host page); a failed
//! ftruncate or sync wrote nothing we can rely on.
//! Thread-local, so tests running in parallel do not see each other's failpoints; the
//! device runs a command on the thread that polls it (a current-thread runtime in tests).

use std::cell::Cell;
use std::io;

thread_local! {
    /// (writes still to let through, error to return), while armed.
    static ARMED: Cell<Option<(u64, i32)>> = const { Cell::new(None) };
    /// Host writes seen on this thread since the failpoint was last armed.
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// Linux's ENOSPC: no space left on the device (the host file system is full).
pub const ENOSPC: i32 = 28;
/// Linux's EIO: an I/O error of the host's disk.
pub const EIO: i32 = 5;

/// Arms the failpoint: the `nth` host write from now (1-based) fails with OS error `errno`,
/// once; later writes succeed again.
pub fn fail_nth_host_write(nth: u64, errno: i32) {
    assert!(nth >= 1, "host writes count from 1");
    ARMED.set(Some((nth - 1, errno)));
    SEEN.set(0);
}

/// Disarms the failpoint (a pending failure does not happen).
pub fn disarm() {
    ARMED.set(None);
}

/// Host writes seen on this thread since the failpoint was last armed.
pub fn host_writes_seen() -> u64 {
    SEEN.get()
}

/// Called before every host write: the error to fail it with, if this is the chosen one.
pub(crate) fn host_write() -> io::Result<()> {
    SEEN.set(SEEN.get() + 1);
    match ARMED.get() {
        Some((0, errno)) => {
            ARMED.set(None);
            Err(io::Error::from_raw_os_error(errno))
        }
        Some((left, errno)) => {
            ARMED.set(Some((left - 1, errno)));
            Ok(())
        }
        None => Ok(()),
    }
}
