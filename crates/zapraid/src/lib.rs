//! ZapRAID: a log-structured RAID block volume over `k + m` ZNS devices that writes stripes
//! with Zone Append inside stripe groups and a Zone Write barrier between groups
//! (shared/papers/zapraid-apsys23.txt; docs/DESIGN.md, "ZapRAID"; docs/FORMAT.md).

pub mod code;
pub mod index;
pub mod layout;
pub mod meta;
mod volume;

pub use index::GcPolicy;
pub use layout::{GroupMode, Layout, LayoutError, Pba, RecordPlace};
pub use volume::{
    FormatOptions, IndexMemory, RecoveryProgress, ZapRaidError, ZapRaidStats, ZapRaidVolume,
    MAX_BLOCKS_IN_FLIGHT,
};
