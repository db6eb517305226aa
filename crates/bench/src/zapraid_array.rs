//! The arrays the ZapRAID experiments run on (`zapraid_exp1..3`): `3 + 1` ZapRAID volumes over
//! timed zn540 members in virtual time, with zones scaled down from the drive's 1,077 MiB so
//! that every experiment fits in memory. The zone size changes how often the per-segment
//! costs come (a header, a footer and a Finish per zone), not the per-command and flash
//! timings the experiments compare.

use std::sync::Arc;

use emu::EmuDevice;
use zapraid::{FormatOptions, GroupMode, RecordPlace, ZapRaidVolume};
use zns::{BlockDevice, Geometry, ZonedDevice};

/// Data blocks per stripe (the paper's (3+1)-RAID-5).
pub const K: u32 = 3;
/// Parity blocks per stripe.
pub const M: u32 = 1;
/// Members of the array.
pub const MEMBERS: usize = (K + M) as usize;
/// Segments a volume keeps out of its logical size: the open one and the three collection
/// keeps free (docs/DESIGN.md, "Garbage collection").
pub const RESERVED_SEGMENTS: u32 = 4;

/// The zn540 geometry with `zones` zones of `capacity_blocks` writable blocks (zones twice
/// that in size, as the drive's 2 GiB zones hold 1,077 MiB).
pub fn member_geometry(capacity_blocks: u64, zones: u32) -> Result<Geometry, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = zones;
    g.zone_capacity = capacity_blocks;
    g.zone_size = 2 * capacity_blocks;
    g.max_open = g.max_open.min(zones);
    g.max_active = g.max_active.min(zones);
    Ok(g)
}

/// A timed zn540 member in virtual time.
pub fn timed(g: Geometry, seed: u64) -> Result<Arc<EmuDevice>, String> {
    crate::paper::timed_zn540(g, seed).map(Arc::new)
}

/// Formats a `3 + 1` array in `mode` on fresh timed members of geometry `g`.
pub async fn format(g: Geometry, mode: GroupMode, seed: u64) -> Result<ZapRaidVolume, String> {
    format_on(members(g, seed)?, mode, seed).await
}

/// Fresh timed members of geometry `g` for an array.
pub fn members(g: Geometry, seed: u64) -> Result<Vec<Arc<EmuDevice>>, String> {
    (0..MEMBERS)
        .map(|i| timed(g, seed.wrapping_mul(16) + i as u64))
        .collect()
}

/// Formats a `3 + 1` array in `mode` on `members`.
pub async fn format_on(
    members: Vec<Arc<EmuDevice>>,
    mode: GroupMode,
    seed: u64,
) -> Result<ZapRaidVolume, String> {
    format_with(members, mode, RecordPlace::Auto, seed).await
}

/// Formats a `3 + 1` array in `mode` on `members`, its block records in `records`.
pub async fn format_with(
    members: Vec<Arc<EmuDevice>>,
    mode: GroupMode,
    records: RecordPlace,
    seed: u64,
) -> Result<ZapRaidVolume, String> {
    let members = members
        .into_iter()
        .map(|d| d as Arc<dyn ZonedDevice>)
        .collect();
    let opts = FormatOptions {
        mode,
        records,
        uuid: [seed as u8 | 1; 16],
        ..FormatOptions::new(K, M)
    };
    ZapRaidVolume::format(members, &opts)
        .await
        .map_err(|e| format!("format ({mode:?}): {e}"))
}

/// Zone count that holds `bytes` of client writes (and their parity) without any garbage
/// collection, in zones of `capacity_blocks`, with `RESERVED_SEGMENTS` more.
pub fn zones_for(bytes: u64, capacity_blocks: u64) -> u32 {
    let zone_data_bytes = capacity_blocks.saturating_sub(2) * 4096 * u64::from(K);
    let needed = bytes.div_ceil(zone_data_bytes.max(1));
    u32::try_from(needed).unwrap_or(u32::MAX / 2) + RESERVED_SEGMENTS + 1
}

/// Sequentially writes the first `blocks` logical blocks of `vol` in 128 KiB writes at QD4
/// and flushes (what the paper's read and recovery experiments do before they measure).
pub async fn fill(vol: &ZapRaidVolume, blocks: u64) -> Result<(), String> {
    crate::blockload::fill(vol, 0, blocks, 128 * 1024, 4)
        .await
        .map_err(|e| format!("fill: {e}"))
}

/// Bytes of `vol`'s block size.
pub fn block_bytes(vol: &ZapRaidVolume) -> u64 {
    u64::from(vol.block_size())
}
