//! A `zns::ZonedDevice` on a Linux zoned block device (`/dev/nvme0n2`, `/dev/nullb0`, ...).
//!
//! The kernel's zoned block device interface carries most of the ZNS command set: zone
//! reports and zone management through ioctls (BLKREPORTZONE, BLKOPENZONE, BLKCLOSEZONE,
//! BLKFINISHZONE, BLKRESETZONE), reads and writes as O_DIRECT I/O (here through one io_uring
//! with many commands in flight), flush as fdatasync, and the geometry in sysfs. Zone Append
//! goes through NVMe passthrough on the namespace's character device (/dev/ngXnY) when there
//! is one, and so does Simple Copy (NVMe Copy) when the controller supports it; on a
//! namespace formatted with per-block metadata every read and write goes through
//! passthrough with it. What neither carries here (Zone Append, Simple Copy and metadata
//! without passthrough, Offline) fails with a status and a [`Capability`] that names what is
//! missing; see docs/DESIGN.md, "Real zoned devices".
//!
//! Layout: [`sysfs`] and [`report`] decode what the kernel hands over (sans-IO), [`errno`]
//! maps errors to NVMe statuses (sans-IO), [`copy`] checks a copy before it is sent
//! (sans-IO), [`nvme`] lays out passthrough commands and reads their completions (sans-IO),
//! [`ring`] owns the io_uring threads, `passthru` opens the character device and reads what
//! Identify offers, [`device`] puts them together, and [`known`] lists the checklist items
//! the backend is known to fail.

pub mod copy;
pub mod device;
pub mod errno;
pub mod known;
pub mod nvme;
mod passthru;
pub mod report;
pub mod ring;
pub mod sysfs;

mod buf;
mod ioctl;

pub use device::{Capability, LinuxZoned, OpenError};
pub use known::{known_kit_failures, DeviceTraits};
