//! The emulated ZNS SSD: a faithful, persistent, fault-injectable zoned namespace for
//! people who have no ZNS hardware. See docs/DESIGN.md for the model and docs/FORMAT.md for
//! the image format.

pub mod config;
pub mod conv;
pub mod device;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod fault;
pub mod image;
pub mod inflight;
pub mod stats;
pub mod store;
pub mod timed;
pub mod timing;
pub mod zones;

pub use config::{profile, profiles, EmuConfig, Profile};
pub use conv::ConvSsd;
pub use device::{Backend, EmuDevice};
pub use fault::FaultPlan;
pub use stats::{Op, Stats};
pub use timing::{ClockMode, SimRuntime, TimingProfile};

/// Errors creating, opening or managing an emulated device (not command statuses).
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error("{0}")]
    Geometry(#[from] zns::GeometryError),
    #[error("{0}")]
    Image(#[from] image::ImageError),
    #[error("I/O error on the image: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0} already exists; pass --force to overwrite it")]
    Exists(String),
    #[error("{0}")]
    Config(String),
    #[error("geometry mismatch: {0}")]
    Mismatch(String),
    /// Creating an image failed; the text says what is left at its path.
    #[error("{0}")]
    Create(String),
    /// A change was asked of a device opened read-only.
    #[error("{0} is open read-only; {1} needs it opened for writing")]
    ReadOnly(String, &'static str),
    /// The host failed an I/O on the image (see `EmuDevice::host_error`); the device has
    /// stopped writing it.
    #[error("{0}")]
    Host(String),
}
