//! An NBD (Network Block Device) server that exports any zonestack `BlockDevice` to
//! unmodified clients: qemu, nbdcopy, nbdfuse, fio's nbd engine, the Linux kernel.
//!
//! The protocol core is sans-IO (`proto` for the bytes, `negotiate` for option haggling,
//! `request` for checking requests, `span` for cutting byte ranges into blocks).

pub mod memdisk;
pub mod negotiate;
pub mod proto;
pub mod request;
pub mod span;

pub use memdisk::{MemDisk, MemDiskCounters, MemDiskError};
