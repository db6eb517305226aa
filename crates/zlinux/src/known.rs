//! The conformance checklist items that fail on a zoned block device through this backend,
//! each with the reason and the kind of device it fails on: what `zonestack device check`
//! annotates and the VM tests expect. Anything else failing is a regression (of the backend,
//! the kit or the device). Sans-IO: [`known_kit_failures`] takes what the device offers.

/// What a device offers that decides which items fail on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceTraits {
    /// Zone Append through NVMe passthrough.
    pub append: bool,
    /// Simple Copy through NVMe passthrough.
    pub copy: bool,
    /// The device is null_blk (its own deviations from the ZNS specification apply).
    pub null_blk: bool,
    /// Per-block metadata through NVMe passthrough (a namespace formatted with it).
    pub metadata: bool,
}

/// On which devices a known failure happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Always,
    NoAppend,
    NoCopy,
    NoAppendOrNoCopy,
    NoMetadata,
    NullBlk,
}

const NO_APPEND: &str = "no Zone Append without NVMe passthrough (a device with no /dev/ngXnY, \
     such as null_blk)";
const NO_COPY: &str = "no Simple Copy without NVMe passthrough to a controller with the Copy \
     command; the copy limits are then 1";
const APPEND_OR_COPY: &str = "the item also appends and copies: no Zone Append or Simple Copy \
     without NVMe passthrough";
const STALE_READS: &str = "null_blk (Linux 6.1, memory backed) does not zero a zone on reset and \
     returns old data above the write pointer, where ZNS reads zeros";

/// (checklist item, when it fails, why).
const KNOWN: &[(u32, When, &str)] = &[
    (4, When::NoAppendOrNoCopy, APPEND_OR_COPY),
    (6, When::NoAppend, NO_APPEND),
    (
        22,
        When::Always,
        "QEMU closes an implicitly opened zone to make room before it refuses a write, append \
         or copy to an empty zone on the active limit (its zoned.auto_transition), where the \
         kit expects no zone to change; without passthrough there is no append or copy either",
    ),
    (24, When::NoAppendOrNoCopy, APPEND_OR_COPY),
    (25, When::NoAppend, NO_APPEND),
    (26, When::NoAppend, NO_APPEND),
    (
        27,
        When::Always,
        "the kernel reports an append limit (zone_append_max_bytes) below QEMU's own (its \
         MDTS), so an append one block over the reported limit reaches the drive's capacity \
         check instead (Zone Boundary Error); without passthrough there is no append at all",
    ),
    (28, When::NoAppend, NO_APPEND),
    (29, When::NoAppend, NO_APPEND),
    (30, When::NoAppend, NO_APPEND),
    (
        31,
        When::Always,
        "QEMU closes an implicitly opened zone to make room before it refuses an append on \
         the active limit, where the kit expects no zone to change; without passthrough there \
         is no append at all",
    ),
    (
        32,
        When::Always,
        "sometimes: the block layer (mq-deadline) dispatches a zone's queued writes in LBA \
         order, so a write submitted ahead of the one that fills its gap may succeed",
    ),
    (33, When::NoCopy, NO_COPY),
    (39, When::NoAppendOrNoCopy, APPEND_OR_COPY),
    (
        34,
        When::Always,
        "the kit writes MDTS blocks inside one zone; the device's transfer limit (128 blocks) \
         exceeds the zone capacity (48)",
    ),
    (
        42,
        When::NoMetadata,
        "no per-block metadata: it needs NVMe passthrough to a namespace formatted with \
         metadata in a separate buffer",
    ),
    (2, When::NullBlk, STALE_READS),
    (7, When::NullBlk, STALE_READS),
    (11, When::NullBlk, STALE_READS),
    (12, When::NullBlk, STALE_READS),
    (18, When::NullBlk, STALE_READS),
    (
        15,
        When::NullBlk,
        "null_blk closes an opened zone whose write pointer is at its start to Empty (as ZBC \
         does), where ZNS makes it Closed",
    ),
    (
        35,
        When::NullBlk,
        "null_blk checks the active limit when it finishes an Empty zone, where ZNS finishes \
         without resource checks (Too Many Active Zones instead of success)",
    ),
    (
        44,
        When::Always,
        "the kernel caps the append limit (zone_append_max_bytes, 256 KiB on QEMU) below the \
         reference 512 KiB; without passthrough there is no Simple Copy either",
    ),
];

/// The items known to fail on a device offering `t`, each with why.
pub fn known_kit_failures(t: DeviceTraits) -> Vec<(u32, &'static str)> {
    KNOWN
        .iter()
        .filter(|(_, when, _)| match when {
            When::Always => true,
            When::NoAppend => !t.append,
            When::NoCopy => !t.copy,
            When::NoAppendOrNoCopy => !t.append || !t.copy,
            When::NoMetadata => !t.metadata,
            When::NullBlk => t.null_blk,
        })
        .map(|(item, _, why)| (*item, *why))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(t: DeviceTraits) -> Vec<u32> {
        let mut v: Vec<u32> = known_kit_failures(t).iter().map(|(i, _)| *i).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn passthrough_clears_the_append_and_copy_items() {
        let qemu = DeviceTraits {
            append: true,
            copy: true,
            null_blk: false,
            metadata: false,
        };
        let bare = DeviceTraits {
            append: false,
            copy: false,
            null_blk: false,
            metadata: false,
        };
        for item in [4, 6, 24, 25, 26, 28, 29, 30, 33, 39] {
            assert!(!items(qemu).contains(&item), "item {item} with passthrough");
            assert!(
                items(bare).contains(&item),
                "item {item} without passthrough"
            );
        }
        for item in [22, 27, 31, 32, 34, 42, 44] {
            assert!(items(qemu).contains(&item) && items(bare).contains(&item));
        }
        let with_metadata = DeviceTraits {
            metadata: true,
            ..qemu
        };
        assert!(!items(with_metadata).contains(&42));
        let append_only = DeviceTraits {
            copy: false,
            ..qemu
        };
        assert!(items(append_only).contains(&4) && !items(append_only).contains(&6));
        let null_blk = DeviceTraits {
            null_blk: true,
            ..bare
        };
        for item in [2, 7, 11, 12, 15, 18, 35] {
            assert!(items(null_blk).contains(&item) && !items(bare).contains(&item));
        }
    }
}
