//! A `zns::ZonedDevice` on a Linux zoned block device (`/dev/nvme0n2`, `/dev/nullb0`, ...).
//!
//! The kernel's zoned block device interface carries most of the ZNS command set: zone
//! reports and zone management through ioctls (BLKREPORTZONE, BLKOPENZONE, BLKCLOSEZONE,
//! BLKFINISHZONE, BLKRESETZONE), reads and writes as O_DIRECT I/O (here through one io_uring
//! with many commands in flight), flush as fdatasync, and the geometry in sysfs. What it does
//! not carry (Zone Append, Simple Copy, per-block metadata, Offline) fails with a status and
//! a [`Capability`] that names what is missing; see docs/DESIGN.md, "Real zoned devices".
//!
//! Layout: [`sysfs`] and [`report`] decode what the kernel hands over (sans-IO), [`errno`]
//! maps errors to NVMe statuses (sans-IO), [`ring`] owns the io_uring thread, [`device`]
//! puts them together.

pub mod device;
pub mod errno;
pub mod report;
pub mod ring;
pub mod sysfs;

mod buf;
mod ioctl;

pub use device::{Capability, LinuxZoned, OpenError};
