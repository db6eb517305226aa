//! A crash-safe host-side FTL: a random-access block volume (`BlockDevice`) over a zoned
//! device (`ZonedDevice`), with per-block mapping, garbage collection, trim, checkpoints and
//! mount-time recovery. docs/DESIGN.md explains the design; docs/FORMAT.md the on-disk bytes.

pub mod activity;
pub mod checkpoint;
pub mod compaction;
pub mod durability;
mod gc;
pub mod host;
mod io;
pub mod layout;
pub mod map;
pub mod plan;
pub mod prefix;
mod read;
pub mod records;
pub mod recovery;
mod retry;
pub mod separation;
mod shared;
pub mod threaded;
mod volume;

pub use host::{HostClock, TokioClock};
pub use layout::{FormatOptions, Layout, MountOptions, Stripe, VictimPolicy, WriteMode};
pub use separation::Placement;
pub use volume::{format, probe, CheckpointProgress, FtlStats, FtlVolume, MountReport};

/// Errors of formatting, mounting and running a volume.
#[derive(Debug, thiserror::Error)]
pub enum FtlError {
    #[error("{0}")]
    Layout(#[from] layout::LayoutError),
    #[error("{0}")]
    Checkpoint(#[from] checkpoint::CkptError),
    #[error("device error: {0}")]
    Device(#[from] zns::NvmeStatus),
    #[error("the volume is corrupt: {0}")]
    Corrupt(String),
    #[error("the device already holds data; format with force to overwrite it")]
    NotEmpty,
    #[error("no space left: garbage collection found nothing to reclaim")]
    NoSpace,
    #[error("the volume has failed after an earlier error: {0}")]
    Failed(String),
    /// Data the device lost (an Offline zone); the rest of the volume works.
    #[error("data lost: {0}")]
    DataLost(String),
}

impl From<FtlError> for zns::BlockError {
    /// Keeps the cause: a device status stays a status, everything else that stops the volume
    /// travels up as text naming it.
    fn from(e: FtlError) -> Self {
        match e {
            FtlError::Device(s) => zns::BlockError::Device(s),
            FtlError::NoSpace => zns::BlockError::NoSpace,
            FtlError::Failed(cause) => zns::BlockError::Failed(cause),
            FtlError::DataLost(what) => zns::BlockError::DataLost(what),
            other => zns::BlockError::Failed(other.to_string()),
        }
    }
}
