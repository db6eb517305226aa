//! Bounded retry of device commands: a transient status is retried, anything else is final.
//!
//! Fault model: a device command may fail transiently (`NvmeStatus::is_transient`); after
//! `ATTEMPTS` tries the last transient status is the command's error.

use zns::{Lba, NvmeStatus, ZonedDevice};

/// Attempts per device command before an error is final.
const ATTEMPTS: u32 = 3;

/// Runs a device command, retrying transient errors a bounded number of times.
pub(crate) async fn retry<T, F, Fut>(mut f: F) -> Result<T, NvmeStatus>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, NvmeStatus>>,
{
    let mut last = NvmeStatus::InternalError;
    for _ in 0..ATTEMPTS {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// A read with the same bounded retry of transient errors.
pub(crate) async fn read_retry(
    dev: &dyn ZonedDevice,
    at: Lba,
    buf: &mut [u8],
    mut meta: Option<&mut [u8]>,
) -> Result<(), NvmeStatus> {
    let mut last = NvmeStatus::InternalError;
    for _ in 0..ATTEMPTS {
        match dev.read(at, buf, meta.as_deref_mut()).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_transient() => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}
