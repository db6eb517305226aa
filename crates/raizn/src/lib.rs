//! RAIZN: a zoned RAID-5 volume (a `zns::ZonedDevice`) over N >= 3 member ZNS devices, after
//! RAIZN (ASPLOS '23). docs/DESIGN.md ("RAIZN") describes the design, docs/FORMAT.md the
//! metadata records.
//!
//! The sans-IO core (`layout`, `code`, `meta`, `zones`, `reloc`, `persist`) is plain synchronous code; the
//! `volume` module does the member I/O.

pub mod code;
pub mod layout;
pub mod meta;
pub mod persist;
pub mod reloc;

pub use layout::{ArrayLayout, LayoutError, Placement};
pub use meta::{MetaError, RecordHeader, RecordType, Superblock};
pub mod volume;
pub mod zones;

pub use volume::{
    AppendStats, Member, MetaStats, PersistStats, RaiznConfig, RaiznError, RaiznVolume,
    RebuildProgress, RebuildReport, RelocStats,
};
