//! The conformance checklist items that fail on a zoned block device through this backend,
//! each with the reason: what `zonestack device check` annotates and the VM tests expect.
//! Anything else failing is a regression (of the backend, the kit or the device).

const NO_APPEND: &str = "the backend has no Zone Append (needs NVMe passthrough)";
const NO_COPY: &str =
    "the backend has no Simple Copy (needs NVMe passthrough); its copy limits are 1";

/// (checklist item, why it fails through the block device interface).
pub const KNOWN_KIT_FAILURES: &[(u32, &str)] = &[
    (4, NO_APPEND),
    (6, NO_APPEND),
    (22, NO_APPEND),
    (24, NO_APPEND),
    (25, NO_APPEND),
    (26, NO_APPEND),
    (27, NO_APPEND),
    (28, NO_APPEND),
    (29, NO_APPEND),
    (30, NO_APPEND),
    (31, NO_APPEND),
    (39, NO_APPEND),
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
        "the backend has no per-block metadata (needs NVMe passthrough)",
    ),
];
