//! The conformance checklist items that fail on a zoned block device through this backend,
//! each with the reason: what `zonestack device check` annotates and the VM tests expect.
//! Anything else failing is a regression (of the backend, the kit or the device).

const NO_APPEND: &str = "no Zone Append without NVMe passthrough (a device with no /dev/ngXnY, \
     such as null_blk)";
const NO_COPY: &str =
    "the backend has no Simple Copy (needs NVMe passthrough; not built yet); its copy limits are 1";
const APPEND_OR_COPY: &str = "the item also appends and copies: no Simple Copy (not built yet), \
     and no Zone Append without NVMe passthrough";

/// (checklist item, why it fails through the block device interface).
pub const KNOWN_KIT_FAILURES: &[(u32, &str)] = &[
    (4, APPEND_OR_COPY),
    (6, NO_APPEND),
    (22, APPEND_OR_COPY),
    (24, APPEND_OR_COPY),
    (25, NO_APPEND),
    (26, NO_APPEND),
    (
        27,
        "the kernel reports an append limit (zone_append_max_bytes) below QEMU's own (its \
         MDTS), so an append one block over the reported limit reaches the drive's capacity \
         check instead (Zone Boundary Error); without passthrough there is no append at all",
    ),
    (28, NO_APPEND),
    (29, NO_APPEND),
    (30, NO_APPEND),
    (
        31,
        "QEMU closes an implicitly opened zone to make room before it refuses an append on \
         the active limit, where the kit expects no zone to change; without passthrough there \
         is no append at all",
    ),
    (39, APPEND_OR_COPY),
    (
        32,
        "sometimes: the block layer (mq-deadline) dispatches a zone's queued writes in LBA \
         order, so a write submitted ahead of the one that fills its gap may succeed",
    ),
    (33, NO_COPY),
    (44, NO_COPY),
    (
        34,
        "the kit writes MDTS blocks inside one zone; the device's transfer limit (128 blocks) \
         exceeds the zone capacity (48)",
    ),
    (
        42,
        "the backend has no per-block metadata (needs NVMe passthrough; not built yet)",
    ),
];
