//! What fio jobs run on: a fresh emulated ZNS drive in memory, a conventional SSD on the same
//! flash, or the host FTL formatted on an emulated ZNS drive sized for the volume.

use super::*;

pub(super) const DEFAULT_ZONES: u32 = 40;

pub(super) const DEFAULT_VOLUME_BYTES: u64 = 4 << 30;

pub(super) fn device(t: &Target) -> Result<EmuDevice, String> {
    let mut g = emu::profile(&t.profile)
        .ok_or_else(|| format!("unknown device profile '{}'", t.profile))?;
    let p = timing_profile(&t.profile)
        .ok_or_else(|| format!("profile '{}' has no timing model", t.profile))?;
    let zone_bytes = g.zone_capacity * u64::from(g.block_size);
    g.zone_count = match t.size_bytes {
        Some(b) => u32::try_from(b.div_ceil(zone_bytes).max(1))
            .map_err(|_| format!("--size {b} needs too many zones"))?,
        None => DEFAULT_ZONES,
    };
    // A small device cannot have more zones open or active than it has.
    g.max_open = g.max_open.min(g.zone_count);
    g.max_active = g.max_active.min(g.zone_count);
    let cfg = EmuConfig {
        seed: t.seed,
        ..EmuConfig::new(g)
    };
    EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(p, ClockMode::Virtual))
        .map_err(|e| e.to_string())
}

/// The profile's flash array resized to about `raw_bytes`: blocks of fewer pages (64 blocks
/// per die, so a device-side collector has as many blocks to choose from as on a drive),
/// erase time scaled with the block; more blocks per die once blocks are full size.
pub fn scaled_array(p: TimingProfile, raw_bytes: u64) -> TimingProfile {
    const BLOCKS_PER_DIE: u64 = 64;
    let per_page_row = p.unit_bytes() * u64::from(p.dies());
    let pages = raw_bytes
        .div_ceil(per_page_row * BLOCKS_PER_DIE)
        .clamp(2, u64::from(p.pages_per_block));
    let blocks = raw_bytes.div_ceil(per_page_row * pages).max(BLOCKS_PER_DIE);
    let pages = u32::try_from(pages).unwrap_or(p.pages_per_block);
    TimingProfile {
        pages_per_block: pages,
        blocks_per_die: u32::try_from(blocks).unwrap_or(u32::MAX),
        block_erase_ns: p.block_erase_ns * u64::from(pages) / u64::from(p.pages_per_block),
        ..p
    }
}

pub(super) fn timing_of(t: &Target) -> Result<TimingProfile, String> {
    timing_profile(&t.profile).ok_or_else(|| format!("profile '{}' has no timing model", t.profile))
}

/// A conventional SSD of `size_bytes` (default 4 GiB) with `op_percent` spare flash.
pub(super) fn conv_device(t: &Target, op_percent: f64) -> Result<ConvSsd, String> {
    if !(op_percent.is_finite() && op_percent > 0.0 && op_percent <= 400.0) {
        return Err(format!(
            "--op {op_percent}: over-provisioning must be above 0 and at most 400 percent"
        ));
    }
    let bytes = t.size_bytes.unwrap_or(DEFAULT_VOLUME_BYTES);
    let blocks = bytes / 4096;
    if blocks == 0 {
        return Err(format!(
            "--size {bytes}: a volume needs at least 4096 bytes"
        ));
    }
    let raw = (bytes as f64 * (1.0 + op_percent / 100.0)).ceil() as u64;
    let p = scaled_array(timing_of(t)?, raw);
    ConvSsd::with_blocks(p, 4096, blocks, ClockMode::Virtual).map_err(|e| e.to_string())
}

/// The host FTL, formatted with `op_percent` over-provisioning and exporting `size_bytes`
/// (default 4 GiB), on an emulated ZNS drive with as many zones of the profile as that needs.
pub(super) async fn ftl_volume(t: &Target, op_percent: f64) -> Result<Arc<FtlVolume>, String> {
    let mut g = emu::profile(&t.profile)
        .ok_or_else(|| format!("unknown device profile '{}'", t.profile))?;
    let bytes = t.size_bytes.unwrap_or(DEFAULT_VOLUME_BYTES);
    let blocks = bytes / u64::from(g.block_size);
    let op_permille = (op_percent * 10.0).round();
    if !(10.0..=900.0).contains(&op_permille) {
        return Err(format!(
            "--op {op_percent}: the FTL's over-provisioning must be 1 to 90 percent"
        ));
    }
    let op_permille = op_permille as u32;
    let timing = timing_of(t)?;
    // A volume that would fill fewer than 64 of the profile's zones gets smaller zones (whole
    // stripes over every die), so that its over-provisioning is spread over enough zones for
    // garbage collection to choose among, as it is on a full-size drive.
    let stripe_blocks =
        (timing.unit_bytes() * u64::from(timing.dies()) / u64::from(g.block_size)).max(1);
    let wanted = blocks.div_ceil(64).div_ceil(stripe_blocks) * stripe_blocks;
    if wanted < g.zone_capacity {
        g.zone_size = wanted.next_power_of_two();
        g.zone_capacity = g.zone_size;
    }
    // The fewest zones whose layout holds the volume, and no fewer than the zones the
    // profile keeps open or active.
    let least = 6.max(g.max_open).max(g.max_active);
    let zones = Layout::zones_for_volume(g, bytes, op_permille, ftl::layout::RESERVE_ZONES_DEFAULT)
        .map_err(|e| format!("a {bytes}-byte volume does not fit: {e}"))?;
    g.zone_count = zones.max(least);
    let cfg = EmuConfig {
        seed: t.seed,
        ..EmuConfig::new(g)
    };
    let dev = EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(timing, ClockMode::Virtual))
        .map_err(|e| e.to_string())?;
    let fmt = FormatOptions {
        op_permille,
        volume_blocks: Some(blocks.max(1)),
    };
    ftl::format(&dev, fmt, t.seed, false)
        .await
        .map_err(|e| format!("formatting the volume: {e}"))?;
    let (vol, _) = FtlVolume::mount(Arc::new(dev), MountOptions::default())
        .await
        .map_err(|e| format!("mounting the volume: {e}"))?;
    Ok(vol)
}
