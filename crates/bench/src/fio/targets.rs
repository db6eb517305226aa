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

/// The profile's flash array for a ZNS drive whose zones hold `zone_blocks` blocks of
/// `block_size` bytes: each die's erase block is the zone's share of that die, with the
/// profile's erase time per page. A ZNS drive sizes its zones to its erase blocks, so a zone
/// reset erases exactly what the zone wrote; the small zones of a scaled-down volume would
/// otherwise erase a whole full-size block (1,152 pages on the zn540) for the few pages they
/// hold, an erase cost per page hundreds of times the conventional drive's on the same flash.
pub fn zone_array(p: TimingProfile, zone_blocks: u64, block_size: u64) -> TimingProfile {
    let per_die = (zone_blocks * block_size)
        .div_ceil(p.unit_bytes() * u64::from(p.dies_per_zone()))
        .clamp(1, u64::from(p.pages_per_block));
    let pages = u32::try_from(per_die).unwrap_or(p.pages_per_block);
    TimingProfile {
        pages_per_block: pages,
        block_erase_ns: p.block_erase_ns * u64::from(pages) / u64::from(p.pages_per_block),
        ..p
    }
}

pub(super) fn timing_of(t: &Target) -> Result<TimingProfile, String> {
    timing_profile(&t.profile).ok_or_else(|| format!("profile '{}' has no timing model", t.profile))
}

/// Spare blocks `op_percent` over-provisioning gives a volume of `logical` blocks: over-
/// provisioning means (flash - logical) / logical for both block volumes, rounded up to a
/// whole block. None for an over-provisioning outside (0, 400] percent.
pub fn spare_blocks(logical: u64, op_percent: f64) -> Option<u64> {
    if !(op_percent.is_finite() && op_percent > 0.0 && op_percent <= 400.0) {
        return None;
    }
    // Per ten-thousand, so that 7% of a power of two is computed exactly.
    let per_10k = (op_percent * 100.0).round() as u64;
    Some((u128::from(logical) * u128::from(per_10k)).div_ceil(10_000) as u64)
}

/// The logical blocks of a block target: `--size` (default 4 GiB) in 4 KiB blocks.
fn logical_blocks(t: &Target, block_size: u64) -> Result<u64, String> {
    let bytes = t.size_bytes.unwrap_or(DEFAULT_VOLUME_BYTES);
    match bytes / block_size {
        0 => Err(format!(
            "--size {bytes}: a volume needs at least {block_size} bytes"
        )),
        blocks => Ok(blocks),
    }
}

/// A conventional SSD exporting `logical` blocks on exactly `logical + spare` blocks of
/// flash. Its array comes in whole erase blocks per die, so it usually holds more: the excess
/// is ballast, LBAs past the exported range written once before the jobs and never again,
/// which keep that flash full of valid data as if it were not there.
pub struct ConvVolume {
    ssd: ConvSsd,
    sizing: ConvSizing,
}

/// How a conventional drive of exact spare is built from an array of whole erase blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvSizing {
    /// The flash array (its `raw_bytes` may exceed what the drive uses).
    pub array: TimingProfile,
    /// Blocks the volume exports.
    pub logical: u64,
    /// Blocks of flash the drive uses: logical + spare.
    pub flash: u64,
    /// The array's remaining blocks, kept full of never-rewritten data.
    pub ballast: u64,
}

impl ConvSizing {
    /// The sizing for `logical` blocks of `block_size` bytes with `op_percent` spare on an
    /// array of `profile`'s flash.
    pub fn new(
        profile: TimingProfile,
        block_size: u64,
        logical: u64,
        op_percent: f64,
    ) -> Result<ConvSizing, String> {
        let spare = spare_blocks(logical, op_percent).ok_or_else(|| {
            format!("--op {op_percent}: over-provisioning must be above 0 and at most 400 percent")
        })?;
        let flash = logical + spare;
        let array = scaled_array(profile, flash * block_size);
        let array_blocks = array.raw_bytes() / block_size;
        let ballast = array_blocks.checked_sub(flash).ok_or_else(|| {
            format!("the scaled array holds {array_blocks} blocks, fewer than the {flash} asked")
        })?;
        Ok(ConvSizing {
            array,
            logical,
            flash,
            ballast,
        })
    }
}

impl ConvVolume {
    /// Blocks of flash the drive may use: logical + spare.
    pub fn flash_blocks(&self) -> u64 {
        self.sizing.flash
    }

    pub fn sizing(&self) -> ConvSizing {
        self.sizing
    }

    /// Writes the ballast (before any job runs).
    async fn lay_ballast(&self) -> Result<(), String> {
        let ConvSizing {
            logical, ballast, ..
        } = self.sizing;
        if ballast == 0 {
            return Ok(());
        }
        blockload::fill(&self.ssd, logical, ballast, PREFILL_BLOCK_BYTES, 8)
            .await
            .map_err(|e| format!("writing the conventional drive's ballast: {e}"))
    }

    /// The drive model's timing counters (flash operations, die time booked).
    pub fn timing_counters(&self) -> emu::timing::TimingCounters {
        self.ssd.timing_counters()
    }

    /// The drive's figures for the report.
    pub fn stats_json(&self) -> Value {
        let gc = self.ssd.gc_counters();
        let ConvSizing {
            logical, ballast, ..
        } = self.sizing;
        let spare = self.flash_blocks() - logical;
        json!({
            "volume_blocks": logical,
            "block_size": self.ssd.block_size(),
            "flash_blocks": self.flash_blocks(),
            "op_percent": spare as f64 * 100.0 / logical as f64,
            "spare_blocks": { "total": spare },
            "ballast_blocks": ballast,
            "host_slots_written": gc.host_slots,
            "blocks_relocated": gc.moved_slots,
            "blocks_collected": gc.collections,
            "host_slots_lost": gc.lost_slots,
            "write_amplification": if gc.host_slots == 0 {
                1.0
            } else {
                (gc.host_slots + gc.moved_slots) as f64 / gc.host_slots as f64
            },
        })
    }
}

#[async_trait::async_trait]
impl BlockDevice for ConvVolume {
    fn block_size(&self) -> u32 {
        self.ssd.block_size()
    }
    fn size_blocks(&self) -> u64 {
        self.sizing.logical
    }
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        self.check(lba, buf.len() as u64 / u64::from(self.block_size()))?;
        self.ssd.read(lba, buf).await
    }
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        self.check(lba, data.len() as u64 / u64::from(self.block_size()))?;
        self.ssd.write(lba, data, fua).await
    }
    async fn flush(&self) -> BlockResult<()> {
        self.ssd.flush().await
    }
    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        self.check(lba, blocks)?;
        self.ssd.trim(lba, blocks).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        self.check(lba, blocks)?;
        self.ssd.write_zeroes(lba, blocks, fua).await
    }
}

impl ConvVolume {
    /// Keeps commands inside the exported range: the ballast is never touched again.
    fn check(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        match lba.checked_add(blocks) {
            Some(end) if end <= self.sizing.logical => Ok(()),
            _ => Err(BlockError::OutOfRange),
        }
    }
}

/// A conventional SSD of `size_bytes` (default 4 GiB) with exactly `op_percent` spare flash
/// (to the block), ballast laid.
pub(super) async fn conv_device(t: &Target, op_percent: f64) -> Result<ConvVolume, String> {
    const BS: u64 = 4096;
    let sizing = ConvSizing::new(timing_of(t)?, BS, logical_blocks(t, BS)?, op_percent)?;
    let ssd = ConvSsd::with_blocks(
        sizing.array,
        BS as u32,
        sizing.logical + sizing.ballast,
        ClockMode::Virtual,
    )
    .map_err(|e| e.to_string())?;
    let vol = ConvVolume { ssd, sizing };
    vol.lay_ballast().await?;
    Ok(vol)
}

/// The host FTL exporting `size_bytes` (default 4 GiB) on an emulated ZNS drive whose zones
/// hold `logical + spare` blocks of flash as `conv_device` has (more by less than one block
/// per zone, since zones are equal), checkpoint zones, reserve zones and headers included.
///
/// Zones are whole stripes over every die, as small as a checkpoint allows: a checkpoint slot
/// is a whole zone, and the two checkpoint zones and two reserve zones are paid from the
/// spare, so zones just larger than one checkpoint cost the least spare and give garbage
/// collection the most zones to choose among.
pub(super) async fn ftl_volume(
    t: &Target,
    op_percent: f64,
) -> Result<(Arc<FtlVolume>, Arc<EmuDevice>), String> {
    let mut g = emu::profile(&t.profile)
        .ok_or_else(|| format!("unknown device profile '{}'", t.profile))?;
    let logical = logical_blocks(t, u64::from(g.block_size))?;
    let spare = spare_blocks(logical, op_percent)
        .filter(|_| (1.0..=90.0).contains(&op_percent))
        .ok_or_else(|| {
            format!("--op {op_percent}: the FTL's over-provisioning must be 1 to 90 percent")
        })?;
    let flash = logical + spare;
    // The layout's over-provisioning, rounded down so that the volume fits the flash.
    let op_permille = (op_percent * 10.0).floor() as u32;
    let timing = timing_of(t)?;
    let bs = u64::from(g.block_size);
    let stripe_blocks = (timing.unit_bytes() * u64::from(timing.dies()) / bs).max(1);
    // The checkpoint with an entry for as many zones as one-stripe zones would make.
    let zones_max = u32::try_from(flash.div_ceil(stripe_blocks)).unwrap_or(u32::MAX);
    let ckpt_blocks = ftl::layout::checkpoint_body_bytes(logical, zones_max)
        .and_then(|b| b.checked_add(ftl::layout::CKPT_HEADER_BYTES))
        .ok_or_else(|| format!("a {logical}-block volume is too large"))?
        .div_ceil(bs);
    let per_zone = ckpt_blocks
        .div_ceil(stripe_blocks)
        .saturating_mul(stripe_blocks)
        .min(g.zone_capacity);
    let zones = flash.div_ceil(per_zone);
    let least = u64::from(6.max(g.max_open).max(g.max_active));
    if zones < least {
        return Err(format!(
            "a {logical}-block volume is too small for the host FTL: it needs at least {least} zones"
        ));
    }
    g.zone_count = u32::try_from(zones).map_err(|_| format!("--size needs {zones} zones"))?;
    g.zone_capacity = flash.div_ceil(zones);
    g.zone_size = g.zone_capacity.next_power_of_two();
    let cfg = EmuConfig {
        seed: t.seed,
        ..EmuConfig::new(g)
    };
    let array = zone_array(timing, g.zone_capacity, bs);
    let dev = EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(array, ClockMode::Virtual))
        .map_err(|e| e.to_string())?;
    let fmt = FormatOptions {
        op_permille,
        volume_blocks: Some(logical),
        threaded_logging: false,
    };
    ftl::format(&dev, fmt, t.seed, false)
        .await
        .map_err(|e| format!("formatting the volume: {e}"))?;
    let dev = Arc::new(dev);
    // The FTL learns how the drive stripes a zone over its dies from the device's hint
    // (`ZonedDevice::die_stripe`), as every mount on a timed emulated device does.
    let (vol, _) = FtlVolume::mount(
        Arc::clone(&dev) as Arc<dyn ZonedDevice>,
        MountOptions::default(),
    )
    .await
    .map_err(|e| format!("mounting the volume: {e}"))?;
    Ok((vol, dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Regression: the FTL's drive kept the zn540's 1,152-page erase blocks under 1,024-block
    // zones (4 pages per die), so each zone reset cost every die 3.5 ms for 4 pages, an erase
    // cost per page 288 times the conventional drive's on the same flash.
    #[test]
    fn zone_arrays_erase_what_a_zone_holds_at_the_profiles_cost_per_page() {
        let p = timing_profile("zn540").expect("zn540");
        let a = zone_array(p, 1024, 4096);
        // 4 MiB over 32 dies of 32 KiB units: 4 pages per die.
        assert_eq!(a.pages_per_block, 4);
        let per_page = |t: &TimingProfile| t.block_erase_ns as f64 / f64::from(t.pages_per_block);
        assert!((per_page(&a) - per_page(&p)).abs() <= 1.0, "{a:?}");
        // A zone as large as a block keeps the profile's array.
        let whole = p.block_bytes() * u64::from(p.dies()) / 4096;
        assert_eq!(
            zone_array(p, whole, 4096).pages_per_block,
            p.pages_per_block
        );
        assert_eq!(zone_array(p, whole, 4096).block_erase_ns, p.block_erase_ns);
    }
}
