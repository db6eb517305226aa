//! The host's own time on the volume's paths that model it: today only the host-level copy
//! of garbage collection without Simple Copy or ZNS+ zone compaction, which reads the live
//! blocks into host memory and writes them back (`io/relocate.rs`).
//!
//! A file system that copies so (F2FS's segment cleaning on a ZNS SSD, ZNS+ paper section
//! 2.3) spends CPU time per block on the way: the page cache, node block lookups, the block
//! layer and two memory copies. The device model charges a host command only its submission
//! and completion, so `MountOptions::host_copy_ns_per_block` adds that time per block moved,
//! as a wait between a batch's reads and its write. It is 0 by default: a volume serving
//! real clients pays its real CPU time already, and only a model (the ZNS+ benchmarks, in
//! virtual time) sets it. The wait goes through a `HostClock`, so that a simulation can wait
//! exactly on its own clock (tokio's timer rounds every deadline up to a whole millisecond).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A future the host's clock resolves once the time asked for has passed.
pub type HostWait = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// How the volume spends the host time its model paths charge.
pub trait HostClock: Send + Sync {
    /// Resolves once `d` of the host's time has passed.
    fn wait(&self, d: Duration) -> HostWait;
}

/// Tokio's timer: exact in real time, whole milliseconds under a paused clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

impl HostClock for TokioClock {
    fn wait(&self, d: Duration) -> HostWait {
        Box::pin(tokio::time::sleep(d))
    }
}

/// The host time a host-level copy of `blocks` blocks costs at `ns_per_block`.
pub fn host_copy_time(blocks: u64, ns_per_block: u32) -> Duration {
    Duration::from_nanos(blocks.saturating_mul(u64::from(ns_per_block)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_time_is_per_block() {
        assert_eq!(host_copy_time(0, 5_000), Duration::ZERO);
        assert_eq!(host_copy_time(64, 0), Duration::ZERO);
        assert_eq!(host_copy_time(64, 2_500), Duration::from_micros(160));
        assert_eq!(
            host_copy_time(u64::MAX, u32::MAX),
            Duration::from_nanos(u64::MAX)
        );
    }
}
