//! Zoned-namespace (ZNS) vocabulary for zonestack: the types, the `ZonedDevice` and
//! `BlockDevice` traits, NVMe status codes, a deterministic PRNG, and a reusable conformance
//! kit that checks any `ZonedDevice` against the ZNS command set.

pub mod absent;
pub mod conformance;
pub mod device;
pub mod faulty;
pub mod hooked;
pub mod model;
pub mod panic;
pub mod parity;
pub mod plus;
pub mod rng;
pub mod status;
pub mod types;

pub use absent::Absent;
pub use device::{BlockDevice, BlockError, BlockResult, ZonedDevice};
pub use faulty::{ErrorPlan, ErrorTiming, FaultCounters, FaultyZoned, OpKind, OpSet};
pub use hooked::{Hook, Hooked};
pub use model::{ModelDevice, RefModel};
pub use plus::{ChunkMapping, CompactionExtent, ValidBitmap};
pub use rng::SimRng;
pub use status::{NvmeResult, NvmeStatus};
pub use types::{
    check_range, zone_attr, CopyRange, DieStripe, Geometry, GeometryError, Lba, ReportFilter,
    ZoneAction, ZoneDescriptor, ZoneReport, ZoneState,
};

/// The runtime `conformance_tests!` builds its tests on, re-exported so that crates using the
/// macro need not depend on tokio themselves.
#[doc(hidden)]
pub use tokio as __tokio;
