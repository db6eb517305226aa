//! The ZNS conformance kit: one check per item of the device behaviour checklist
//! (shared/ZNS-CONFORMANCE.md, items 1-44) plus randomized property tests, runnable against
//! any `ZonedDevice` through a [`DeviceFactory`].
//!
//! Fault model: the kit injects only the faults the checklist says a device survives: a clean
//! controller restart, a power loss with the volatile write cache on (through the factory),
//! and device-side zone state changes to Read Only or Offline. It never injects transient
//! command errors, so every failure it reports is a behaviour difference.
//!
//! Use it from another crate with `zns::conformance_tests!(MyFactory)`, which expands to one
//! `#[test]` per item and a few property tests.

use async_trait::async_trait;

use crate::device::ZonedDevice;
use crate::types::{Geometry, ZoneState};

mod check;
mod differential;
mod geometries;
mod items_append;
mod items_codes;
mod items_copy;
mod items_durability;
mod items_mgmt;
mod items_report;
mod items_resources;
mod items_write;
mod macros;
mod ops;
mod pattern;
mod power;

pub use differential::differential;
pub use geometries::{
    cross_read_geometry, full_capacity_geometry, kit_geometry, open_limit_geometry,
    reference_geometry, unlimited_geometry, REFERENCE_COPY_MAX_BLOCKS, REFERENCE_COPY_MAX_RANGES,
    REFERENCE_COPY_MAX_RANGE_BLOCKS, REFERENCE_ZASL_BYTES,
};
pub use power::{power_loss_prefix, reopen_identical};

/// Builds and manipulates devices for the kit.
#[async_trait]
pub trait DeviceFactory: Send + Sync {
    type Device: ZonedDevice + 'static;
    /// Build a fresh device with exactly this geometry.
    async fn create(&self, geometry: &Geometry) -> Self::Device;
    /// Clean controller shutdown and restart (item 37).
    async fn restart(&self, dev: Self::Device) -> Self::Device;
    /// Power loss with the volatile write cache on, cut points drawn from `seed`, then restart.
    async fn power_cycle(&self, dev: Self::Device, seed: u64) -> Self::Device;
    /// Device-side fault: move `zone` to ReadOnly or Offline.
    async fn set_zone_state(&self, dev: &Self::Device, zone: u32, state: ZoneState);

    /// The geometry the device built for `wanted` will have. Factories that build devices to
    /// order return `wanted` (the default); a factory over real drives returns the geometry of
    /// the drive it will use, whose metadata size and size limits may differ, and the items
    /// check against that.
    fn geometry_for(&self, wanted: &Geometry) -> Geometry {
        *wanted
    }

    /// What this factory could not do since the last call, if anything, and clears it: a
    /// real drive has no power-loss control (`power_cycle`), no way to force a zone Read
    /// Only or Offline (`set_zone_state`), and only the geometries it has. The factory then
    /// does the nearest harmless thing, and [`check_item`] reports the item not applicable
    /// instead of passing or failing it. Factories that can do everything return None.
    fn take_unsupported(&self) -> Option<String> {
        None
    }
}

/// The result of one checklist item on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(KitFailure),
    /// The item needs something the factory cannot do (see
    /// [`DeviceFactory::take_unsupported`]); the text says what.
    NotApplicable(String),
}

/// Runs one checklist item and says whether it passed, failed, or could not apply to the
/// factory's devices.
pub async fn check_item<F: DeviceFactory>(f: &F, item: u32) -> Outcome {
    // Whatever an earlier item left unreported belongs to that item, not this one.
    f.take_unsupported();
    let result = run_item(f, item).await;
    match (f.take_unsupported(), result) {
        (Some(why), _) => Outcome::NotApplicable(why),
        (None, Ok(())) => Outcome::Pass,
        (None, Err(failure)) => Outcome::Fail(failure),
    }
}

/// A failed check: the checklist item (0 for the property tests) and what went wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("conformance item {item} ({}): {message}", item_name(*item))]
pub struct KitFailure {
    pub item: u32,
    pub message: String,
}

impl KitFailure {
    pub fn new(item: u32, message: impl Into<String>) -> KitFailure {
        KitFailure {
            item,
            message: message.into(),
        }
    }
}

/// Every checklist item with a short description.
pub const ITEMS: &[(u32, &str)] = &[
    (1, "fresh zone is empty with constant capacity"),
    (
        2,
        "write away from the write pointer fails with Zone Invalid Write",
    ),
    (
        3,
        "write at the write pointer implicitly opens an empty zone",
    ),
    (
        4,
        "write, append, write zeroes and copy advance the write pointer exactly",
    ),
    (
        5,
        "reaching capacity makes the zone full and frees its slots",
    ),
    (6, "write to a full zone fails with Zone Is Full"),
    (7, "write past capacity fails with Zone Boundary Error"),
    (8, "write spanning two zones fails with Zone Boundary Error"),
    (9, "read only zone refuses writes and serves reads"),
    (10, "offline zone refuses reads and writes"),
    (
        11,
        "read across a zone boundary obeys the cross-zone read setting",
    ),
    (12, "reads above the write pointer or capacity return zeros"),
    (13, "open transitions"),
    (14, "invalid open, close and finish transitions"),
    (15, "close keeps the active slot and frees the open slot"),
    (16, "close on empty fails, close on closed is a no-op"),
    (17, "finish makes a zone full without resource checks"),
    (18, "reset empties a zone and zeros its data"),
    (19, "offline only from read only"),
    (20, "zone management address checks"),
    (21, "select all touches only the selected states"),
    (22, "active limit refuses and changes nothing"),
    (
        23,
        "open limit implicitly closes the oldest implicitly opened zone",
    ),
    (24, "open limit with only explicitly opened zones fails"),
    (25, "writing a closed zone needs only an open slot"),
    (26, "append must address a zone start"),
    (27, "append over the size limit fails with Invalid Field"),
    (28, "append returns where its data landed"),
    (
        29,
        "concurrent appends get disjoint ranges covering the advance",
    ),
    (30, "append that does not fit fails and is never split"),
    (
        31,
        "append to an empty zone opens it under the resource limits",
    ),
    (32, "writes in flight in write pointer order succeed"),
    (33, "simple copy rules and limits"),
    (34, "write zeroes is a zoned write"),
    (35, "report zones start, filter and partial count"),
    (36, "zone descriptor fields"),
    (37, "clean restart closes open zones and keeps the rest"),
    (38, "identify reports the geometry"),
    (39, "out of namespace LBAs fail with LBA Out of Range"),
    (40, "flush and FUA make writes durable"),
    (41, "power loss leaves a durable prefix per zone"),
    (42, "per-block metadata round trips and is reset"),
    (43, "status code values"),
    (44, "reference defaults for append and copy limits"),
];

/// The description of `item`, or "property test" for item 0.
pub fn item_name(item: u32) -> &'static str {
    ITEMS
        .iter()
        .find(|(n, _)| *n == item)
        .map(|(_, name)| *name)
        .unwrap_or("property test")
}

/// Runs the check for one checklist item against devices from `f`.
pub async fn run_item<F: DeviceFactory>(f: &F, item: u32) -> Result<(), KitFailure> {
    match item {
        1..=12 => items_write::run(f, item).await,
        13..=21 => items_mgmt::run(f, item).await,
        22..=25 | 31 => items_resources::run(f, item).await,
        26..=30 | 32 => items_append::run(f, item).await,
        33 | 34 => items_copy::run(f, item).await,
        35 | 36 | 38 | 39 => items_report::run(f, item).await,
        37 | 40..=42 => items_durability::run(f, item).await,
        43 | 44 => items_codes::run(f, item).await,
        _ => Err(KitFailure::new(
            item,
            "no such checklist item (valid: 1..=44)",
        )),
    }
}

#[doc(hidden)]
pub use macros::block_on_check as __block_on_check;
