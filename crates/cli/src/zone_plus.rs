//! `zonestack zone compact` and `zonestack zone tl-open`: the ZNS+ commands (docs/ZNSPLUS.md)
//! from the command line, with their arguments parsed here and a clear refusal on a device
//! without them.

use std::io::Write;
use std::path::{Path, PathBuf};

use zns::{CompactionExtent, Geometry, NvmeStatus, ReportFilter, ValidBitmap, ZonedDevice};

use crate::error::{CliError, CliResult};
use crate::units::parse_u64;

/// Parses one `--extent SRC:DST:BLOCKS` (numbers in decimal or 0x hex).
pub fn parse_extent(text: &str) -> Result<CompactionExtent, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [src, dst, blocks] = parts[..] else {
        return Err(format!("'{text}' is not SRC:DST:BLOCKS"));
    };
    let blocks = parse_u64(blocks)?;
    if blocks == 0 {
        return Err(format!("'{text}': an extent needs at least 1 block"));
    }
    Ok(CompactionExtent {
        src: parse_u64(src)?,
        dst: parse_u64(dst)?,
        blocks,
    })
}

/// Parses `--plug-order`: `pp` or `lp`.
pub fn parse_plug_order(text: &str) -> Result<emu::timing::PlugOrder, String> {
    emu::timing::PlugOrder::from_name(text).ok_or_else(|| {
        format!("'{text}' is not a plugging order: pp (PPA-ordered, idle time) or lp (LBA-ordered)")
    })
}

/// The words `device create` and `device info` use for a plugging order.
pub fn plug_order_words(order: emu::timing::PlugOrder) -> &'static str {
    match order {
        emu::timing::PlugOrder::Ppa => "PPA-ordered plugging in idle chip time",
        emu::timing::PlugOrder::Lba => "LBA-ordered plugging",
    }
}

/// The one-line refusal for a device without the ZNS+ commands.
fn no_zns_plus(name: &Path, what: &str) -> CliError {
    CliError::Other(format!(
        "{}: the device has no ZNS+ commands, so it cannot {what}; an emulated device has \
         them when created with `zonestack device create --zns-plus`",
        name.display()
    ))
}

/// Runs a `zone_compaction` of `extents` and says where each destination zone's WP went.
pub async fn compact(
    dev: &dyn ZonedDevice,
    name: &Path,
    extents: &[CompactionExtent],
    out: &mut impl Write,
) -> CliResult {
    let Some(m) = dev.identify_mapping() else {
        return Err(no_zns_plus(name, "compact zones"));
    };
    if extents.len() > m.compaction_max_extents as usize {
        return Err(CliError::Usage(format!(
            "{} extents: the device takes at most {} in one compaction",
            extents.len(),
            m.compaction_max_extents
        )));
    }
    let g = dev.geometry();
    match dev.zone_compaction(extents).await {
        Ok(()) => {}
        Err(NvmeStatus::InvalidOpcode) => return Err(no_zns_plus(name, "compact zones")),
        Err(s) => return Err(s.into()),
    }
    let total: u64 = extents.iter().map(|e| e.blocks).sum();
    let mut zones: Vec<u32> = extents.iter().filter_map(|e| g.zone_of(e.dst)).collect();
    zones.sort_unstable();
    zones.dedup();
    writeln!(
        out,
        "compacted {} in {}",
        crate::commands::plural(total, "block"),
        crate::commands::plural(extents.len() as u64, "extent")
    )?;
    for z in zones {
        let d = zone_descriptor(dev, &g, z).await?;
        writeln!(
            out,
            "zone {z}: {}, wp {:#x} (+{:#x})",
            d.state.name(),
            d.wp,
            d.wp - d.start
        )?;
    }
    Ok(())
}

async fn zone_descriptor(
    dev: &dyn ZonedDevice,
    g: &Geometry,
    z: u32,
) -> Result<zns::ZoneDescriptor, CliError> {
    let r = dev
        .report_zones(g.zone_start(z), ReportFilter::All, true, 1)
        .await?;
    r.zones
        .first()
        .copied()
        .ok_or_else(|| CliError::Other(format!("zone {z} missing from the zone report")))
}

/// Where `tl-open`'s valid blocks come from.
pub enum ValidSource<'a> {
    /// Block ranges relative to the zone start (`0-15,32,40-47`, or `none`).
    Ranges(&'a str),
    /// A file holding the bitmap's bytes.
    File(&'a PathBuf),
}

/// Builds the valid bitmap of a zone with `capacity` blocks from block ranges relative to the
/// zone start: `0-15,32,40-47` (inclusive ranges and single blocks), or `none`.
pub fn bitmap_from_ranges(text: &str, capacity: u64) -> Result<ValidBitmap, CliError> {
    let mut map = ValidBitmap::empty(capacity);
    if text.trim() == "none" {
        return Ok(map);
    }
    for part in text.split(',') {
        let usage = |m: String| CliError::Usage(format!("--valid '{part}': {m}"));
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (parse_u64(a).map_err(usage)?, parse_u64(b).map_err(usage)?),
            None => {
                let n = parse_u64(part).map_err(usage)?;
                (n, n)
            }
        };
        if a > b || b >= capacity {
            return Err(usage(format!(
                "not a range of blocks inside the zone's capacity (0-{})",
                capacity - 1
            )));
        }
        for blk in a..=b {
            map.set(blk, true);
        }
    }
    Ok(map)
}

/// TL-opens zone `zone` with the valid blocks `valid` names.
pub async fn tl_open(
    dev: &dyn ZonedDevice,
    name: &Path,
    zone: u32,
    valid: ValidSource<'_>,
    out: &mut impl Write,
) -> CliResult {
    let g = dev.geometry();
    if zone >= g.zone_count {
        return Err(CliError::Usage(format!(
            "zone {zone} does not exist (the device has {} zones)",
            g.zone_count
        )));
    }
    let bits = match valid {
        ValidSource::Ranges(t) => bitmap_from_ranges(t, g.zone_capacity)?.as_bytes().to_vec(),
        ValidSource::File(p) => std::fs::read(p)
            .map_err(|e| CliError::Other(format!("cannot read {}: {e}", p.display())))?,
    };
    let want = ValidBitmap::bytes_for(g.zone_capacity);
    if bits.len() != want {
        return Err(CliError::Usage(format!(
            "the valid bitmap is {} bytes; a zone of {} blocks needs {want}",
            bits.len(),
            g.zone_capacity
        )));
    }
    // Malformed arguments are usage errors on any device; only then is the device asked.
    if dev.identify_mapping().is_none() {
        return Err(no_zns_plus(name, "TL-open a zone"));
    }
    let before = zone_descriptor(dev, &g, zone).await?;
    match dev.tl_open(g.zone_start(zone), &bits).await {
        Ok(()) => {}
        Err(NvmeStatus::InvalidOpcode) => return Err(no_zns_plus(name, "TL-open a zone")),
        Err(s) => return Err(s.into()),
    }
    let after = zone_descriptor(dev, &g, zone).await?;
    let valid_blocks: u64 = bits.iter().map(|b| u64::from(b.count_ones())).sum();
    let tl = if after.attributes & zns::zone_attr::TLO != 0 {
        " (TL-opened)"
    } else {
        ""
    };
    writeln!(
        out,
        "zone {zone}: {} -> {}{tl}, wp {:#x} (+{:#x}); {} kept",
        before.state.name(),
        after.state.name(),
        after.wp,
        after.wp - after.start,
        crate::commands::plural(valid_blocks, "valid block")
    )?;
    Ok(())
}

/// The `stats` line of a ZNS+ device with timing (`session --timing`): its plugging order,
/// the bytes plugged into TL-opened zones, how many of them went ahead in idle chip time,
/// and the copyback ratio of in-device copies. Nothing without ZNS+ or timing.
pub fn print_plugging(dev: &emu::EmuDevice, out: &mut impl Write) -> CliResult {
    let Some(c) = dev.timing_counters() else {
        return Ok(());
    };
    if !dev.config().zns_plus {
        return Ok(());
    }
    writeln!(
        out,
        "zns+: {}; plugged {} bytes, {} of them ahead in idle chip time; copyback ratio {:.2}",
        plug_order_words(dev.config().plug_order),
        c.plugged_bytes,
        c.plugged_idle_bytes,
        c.copyback_ratio()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_parse_and_refuse_what_is_not_one() {
        assert_eq!(
            parse_extent("0x10:64:8"),
            Ok(CompactionExtent {
                src: 16,
                dst: 64,
                blocks: 8
            })
        );
        for bad in ["1:2", "1:2:3:4", "a:2:3", "1:2:0", ""] {
            assert!(parse_extent(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_make_the_bitmap_and_stay_inside_the_zone() {
        let map = bitmap_from_ranges("0-2,5", 16).map_err(|e| e.message());
        let Ok(map) = map else { panic!("{map:?}") };
        let valid: Vec<u64> = (0..16).filter(|&b| map.is_valid(b)).collect();
        assert_eq!(valid, [0, 1, 2, 5]);
        assert!(bitmap_from_ranges("none", 16).is_ok_and(|m| m.next_invalid(0) == 0));
        for bad in ["3-1", "16", "0-16", "x", "1-"] {
            assert!(bitmap_from_ranges(bad, 16).is_err(), "{bad}");
        }
    }
}
