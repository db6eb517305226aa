//! Execution of device subcommands against an open emulated device, shared by one-shot
//! invocations and `zonestack session`.

use std::io::Write;
use std::path::Path;

use emu::{EmuConfig, EmuDevice, Op};
use serde_json::json;
use zns::{Geometry, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use crate::args::{
    Cmd, CreateArgs, DataSource, DeviceCmd, FaultArgs, IoCmd, Target, ZoneCmd, ZoneSelect,
};
use crate::error::{CliError, CliResult};
use crate::opened::{is_block_device, Opened};
use crate::units::{format_size, hexdump};

/// Opens an existing image, or a zoned block device (`/dev/...`), with a message that says
/// what to do when it cannot.
pub fn open(path: &Path) -> Result<Opened, CliError> {
    open_mode(path, false)
}

/// Opens an existing image read-only (O_RDONLY, shared lock): for commands that only read,
/// so that they work on a read-only file or mount and beside other readers. A drive is
/// opened as `open` does (the zone ioctls need it open for writing).
pub fn open_read_only(path: &Path) -> Result<Opened, CliError> {
    open_mode(path, true)
}

/// Whether a device subcommand only reads the image (and so opens it read-only).
pub fn is_read_only(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Device(DeviceCmd::Info { .. })
            | Cmd::Zone(ZoneCmd::Report { .. })
            | Cmd::Io(IoCmd::Read { .. })
    )
}

fn open_mode(path: &Path, read_only: bool) -> Result<Opened, CliError> {
    if is_block_device(path) {
        return Ok(Opened::Drive(crate::opened::open_drive(path)?));
    }
    if !path.exists() {
        return Err(CliError::Other(format!(
            "{} does not exist; create it with `zonestack device create {}`",
            path.display(),
            path.display()
        )));
    }
    let dev = if read_only {
        EmuDevice::open_file_read_only(path)
    } else {
        EmuDevice::open_file(path, false)
    };
    dev.map(Opened::Image)
        .map_err(|e| CliError::Other(format!("cannot open {}: {e}", path.display())))
}

/// The image path a device subcommand names.
pub fn path_of(cmd: &Cmd) -> &Path {
    match cmd {
        Cmd::Device(DeviceCmd::Info { path, .. } | DeviceCmd::Restart { path }) => path,
        Cmd::Device(DeviceCmd::Create(a)) => &a.path,
        Cmd::Zone(_) | Cmd::Io(_) => target_of(cmd).map_or(Path::new(""), Target::path),
        Cmd::Fault(FaultArgs { path, .. }) => path,
        Cmd::Session { path, .. } => path.as_deref().unwrap_or(Path::new("")),
        Cmd::Flush { path } | Cmd::PowerLoss { path, .. } => path,
        Cmd::Quickstart(_)
        | Cmd::Device(DeviceCmd::Profiles)
        | Cmd::Device(DeviceCmd::Check(_))
        | Cmd::Bench(_)
        | Cmd::Ftl(_)
        | Cmd::Raizn(_)
        | Cmd::Zapraid(_)
        | Cmd::Serve(_) => Path::new(""),
    }
}

/// The device a zone or I/O command addresses; None for other commands.
pub fn target_of(cmd: &Cmd) -> Option<&Target> {
    match cmd {
        Cmd::Zone(z) => match z {
            ZoneCmd::Report { target, .. }
            | ZoneCmd::Open { target, .. }
            | ZoneCmd::Close { target, .. }
            | ZoneCmd::Finish { target, .. }
            | ZoneCmd::Reset { target, .. }
            | ZoneCmd::Offline { target, .. }
            | ZoneCmd::Compact { target, .. }
            | ZoneCmd::TlOpen { target, .. } => Some(target),
        },
        Cmd::Io(i) => match i {
            IoCmd::Write { target, .. }
            | IoCmd::Append { target, .. }
            | IoCmd::Read { target, .. }
            | IoCmd::Zeroes { target, .. }
            | IoCmd::Fill { target, .. } => Some(target),
        },
        _ => None,
    }
}

/// Builds the geometry `device create` asks for.
pub fn geometry_for(a: &CreateArgs) -> Result<Geometry, CliError> {
    let mut g = emu::profile(&a.profile).ok_or_else(|| {
        let names: Vec<_> = emu::profiles().iter().map(|p| p.name).collect();
        CliError::Usage(format!(
            "unknown profile '{}' (profiles: {})",
            a.profile,
            names.join(", ")
        ))
    })?;
    if let Some(bs) = a.block_size {
        if bs != 512 && bs != 4096 {
            return Err(CliError::Usage(format!(
                "--block-size {bs} is not 512 or 4096"
            )));
        }
        let scale = |blocks: u64| blocks * u64::from(g.block_size) / u64::from(bs);
        g.zone_size = scale(g.zone_size);
        g.zone_capacity = scale(g.zone_capacity);
        let (zasl, r, rb, t) = emu::config::reference_limits(bs);
        g.zasl_blocks = zasl;
        g.mdts_blocks = (2 << 20) / bs;
        (
            g.copy_max_ranges,
            g.copy_max_range_blocks,
            g.copy_max_blocks,
        ) = (r, rb, t);
        g.block_size = bs;
    }
    let bs = u64::from(g.block_size);
    let blocks = |bytes: u64, what: &str| -> Result<u64, CliError> {
        if bytes == 0 || !bytes.is_multiple_of(bs) {
            return Err(CliError::Usage(format!(
                "{what} {bytes} is not a positive multiple of the {bs}-byte block size"
            )));
        }
        Ok(bytes / bs)
    };
    if let Some(zs) = a.zone_size {
        g.zone_size = blocks(zs, "--zone-size")?;
        g.zone_capacity = g.zone_size;
    }
    if let Some(zc) = a.zone_cap {
        g.zone_capacity = blocks(zc, "--zone-cap")?;
    }
    if let Some(z) = a.zasl {
        g.zasl_blocks = u32::try_from(blocks(z, "--zasl")?)
            .map_err(|_| CliError::Usage("--zasl is too large".into()))?;
        g.mdts_blocks = g.mdts_blocks.max(g.zasl_blocks);
    }
    g.zone_count = a.zones.unwrap_or(g.zone_count);
    g.oob_size = a.oob.unwrap_or(g.oob_size);
    g.max_open = a.max_open.unwrap_or(g.max_open);
    g.max_active = a.max_active.unwrap_or(g.max_active);
    if a.max_active == Some(0) && a.max_open.is_none() {
        g.max_open = 0;
    }
    if g.max_active != 0 && g.max_open > g.max_active && a.max_open.is_none() {
        g.max_open = g.max_active;
    }
    if g.max_active > g.zone_count && a.max_active.is_none() {
        g.max_active = g.zone_count;
        g.max_open = g.max_open.min(g.zone_count);
    }
    g.validate().map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(z) = a.zasl {
        // A Zone Append lands inside one zone, so a limit above the writable capacity of a
        // zone advertises appends the device can never complete.
        if u64::from(g.zasl_blocks) > g.zone_capacity {
            return Err(CliError::Usage(format!(
                "--zasl {} ({} blocks) exceeds the zone capacity of {} ({} blocks); \
                 a Zone Append cannot be larger than a zone",
                format_size(z),
                g.zasl_blocks,
                format_size(g.zone_capacity * bs),
                g.zone_capacity,
            )));
        }
    }
    Ok(g)
}

/// Refuses to make an image where `path` names something other than a file: `device create`
/// writes an emulator image, and a drive (or /dev/null, or a directory) is not one. A drive is
/// used as it is; even with --force it is never overwritten with an image's layout.
fn refuse_non_file(path: &Path) -> CliResult {
    use std::os::unix::fs::FileTypeExt;
    // A path that cannot be examined (absent, no permission) is left to the create itself,
    // which makes it or reports why not.
    let Ok(m) = std::fs::metadata(path) else {
        return Ok(());
    };
    let t = m.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    Err(CliError::Usage(format!(
        "{p} is {what}, not an image file: `device create` makes emulator images; a zoned drive is used as it is (`zonestack device info {p}`)",
        p = path.display()
    )))
}

pub fn create(a: &CreateArgs, out: &mut impl Write) -> CliResult {
    refuse_non_file(&a.path)?;
    let g = geometry_for(a)?;
    let cfg = EmuConfig {
        volatile_cache: !a.no_write_cache,
        seed: a.seed,
        zns_plus: a.zns_plus,
        plug_order: a.plug_order.unwrap_or_default(),
        ..EmuConfig::new(g)
    };
    let dev = EmuDevice::create_file(&a.path, cfg, a.force)
        .map_err(|e| CliError::Other(format!("cannot create {}: {e}", a.path.display())))?;
    dev.shutdown().map_err(|e| CliError::Other(e.to_string()))?;
    writeln!(
        out,
        "created {}: {} zones of {} blocks ({} writable), {}-byte blocks, {} B metadata, {} writable{}",
        a.path.display(),
        g.zone_count,
        g.zone_size,
        g.zone_capacity,
        g.block_size,
        g.oob_size,
        format_size(g.capacity_bytes()),
        if a.zns_plus {
            format!(
                ", ZNS+ commands ({})",
                crate::zone_plus::plug_order_words(cfg.plug_order)
            )
        } else {
            String::new()
        }
    )?;
    Ok(())
}

/// The geometry profiles (`device create --profile`), one per line, then the timing profiles
/// (`--timing` of `serve` and `session`) as a table after a blank line.
pub fn list_profiles(out: &mut impl Write) -> CliResult {
    for p in emu::profiles() {
        writeln!(out, "{:<8} {}", p.name, p.description)?;
    }
    writeln!(out)?;
    crate::timing::list(out)
}

fn info(dev: &Opened, json: bool, out: &mut impl Write) -> CliResult {
    let g = dev.geometry();
    // A drive's write cache is the drive's; only an image's is known here.
    let cache = dev.image().map(|d| d.config().volatile_cache);
    let mapping = dev.identify_mapping();
    // The plugging order is an emulated device's (recorded in its image).
    let plugging = dev.image().map(|d| d.config().plug_order);
    if json {
        let v = json!({
            "zones": g.zone_count, "zone_size": g.zone_size, "zone_capacity": g.zone_capacity,
            "block_size": g.block_size, "oob": g.oob_size, "max_open": g.max_open,
            "max_active": g.max_active, "zasl": g.zasl_blocks, "mdts": g.mdts_blocks,
            "copy_max_ranges": g.copy_max_ranges, "copy_max_range_blocks": g.copy_max_range_blocks,
            "copy_max_blocks": g.copy_max_blocks, "volatile_write_cache": cache,
            "zns_plus": mapping.map(|m| json!({
                "chunk_blocks": m.chunk_blocks, "zone_chips": m.zone_chips,
                "chip_groups": m.chip_groups, "compaction_max_extents": m.compaction_max_extents,
                "compaction_max_blocks": m.compaction_max_blocks,
                "plug_order": plugging.map(|p| p.name()),
            })),
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let limit = |n: u32| {
        if n == 0 {
            "unlimited".to_string()
        } else {
            n.to_string()
        }
    };
    writeln!(out, "zones:            {}", g.zone_count)?;
    writeln!(
        out,
        "zone size:        {} blocks ({})",
        g.zone_size,
        format_size(g.zone_size * u64::from(g.block_size))
    )?;
    writeln!(
        out,
        "zone capacity:    {} blocks ({})",
        g.zone_capacity,
        format_size(g.zone_capacity * u64::from(g.block_size))
    )?;
    writeln!(out, "block size:       {} bytes", g.block_size)?;
    writeln!(out, "metadata (oob):   {} bytes per block", g.oob_size)?;
    writeln!(
        out,
        "max open zones:   {} (MOR {:#x})",
        limit(g.max_open),
        g.mor()
    )?;
    writeln!(
        out,
        "max active zones: {} (MAR {:#x})",
        limit(g.max_active),
        g.mar()
    )?;
    writeln!(out, "append limit:     {} blocks (ZASL)", g.zasl_blocks)?;
    writeln!(out, "max transfer:     {} blocks (MDTS)", g.mdts_blocks)?;
    writeln!(
        out,
        "copy limits:      {} ranges, {} blocks per range, {} blocks total",
        g.copy_max_ranges, g.copy_max_range_blocks, g.copy_max_blocks
    )?;
    writeln!(
        out,
        "write cache:      {}",
        match cache {
            Some(true) => "volatile",
            Some(false) => "off",
            None => "the drive's (a real device: flush and FUA make writes durable)",
        }
    )?;
    if let Some(m) = mapping {
        writeln!(
            out,
            "zns+ commands:    chunks of {} blocks over {} chips per zone, {} chip groups; \
             compaction up to {} extents, {} blocks",
            m.chunk_blocks,
            m.zone_chips,
            m.chip_groups,
            m.compaction_max_extents,
            m.compaction_max_blocks
        )?;
        if let Some(p) = plugging {
            writeln!(
                out,
                "zns+ plugging:    {} (`--timing` only)",
                crate::zone_plus::plug_order_words(p)
            )?;
        }
    }
    Ok(())
}

async fn report(
    dev: &dyn ZonedDevice,
    state: Option<&str>,
    start: u32,
    count: Option<usize>,
    json: bool,
    out: &mut impl Write,
) -> CliResult {
    let g = dev.geometry();
    let filter = match state {
        None => ReportFilter::All,
        Some(s) => ReportFilter::State(ZoneState::parse(s).ok_or_else(|| {
            let names: Vec<_> = ZoneState::ALL.iter().map(|s| s.name()).collect();
            CliError::Usage(format!(
                "unknown zone state '{s}' (states: {})",
                names.join(", ")
            ))
        })?),
    };
    if start >= g.zone_count {
        return Err(CliError::Usage(format!(
            "--start {start}: the device has {} zones",
            g.zone_count
        )));
    }
    let r = dev
        .report_zones(
            g.zone_start(start),
            filter,
            true,
            count.unwrap_or(usize::MAX),
        )
        .await?;
    if json {
        let zones: Vec<_> = r
            .zones
            .iter()
            .map(|d| json!({"zone": d.start / g.zone_size, "start": d.start, "capacity": d.capacity, "wp": d.wp, "state": d.state.name(), "tl_opened": d.attributes & zns::zone_attr::TLO != 0}))
            .collect();
        writeln!(out, "{}", json!({ "zones": zones }))?;
        return Ok(());
    }
    for d in &r.zones {
        writeln!(
            out,
            "  start: {:#011x}, len {:#08x}, cap {:#08x}, wptr {:#08x} reset:0 non-seq:0, zcond:{:2}({}) [type: 2(SEQ_WRITE_REQUIRED)]",
            d.start,
            g.zone_size,
            d.capacity,
            d.wp - d.start,
            d.state.nvme_value(),
            d.state.short_name().to_ascii_lowercase()
        )?;
    }
    // The rows keep `blkzone report`'s exact shape (scripts parse it); its two-letter
    // conditions are explained once, after them.
    if !r.zones.is_empty() {
        writeln!(out, "{}", condition_legend())?;
    }
    // A TL-opened zone (ZNS+) shows its ordinary condition in the row; which zones are
    // TL-opened is said after the rows, so they keep blkzone's shape.
    let tl: Vec<String> = r
        .zones
        .iter()
        .filter(|d| d.attributes & zns::zone_attr::TLO != 0)
        .map(|d| (d.start / g.zone_size).to_string())
        .collect();
    if !tl.is_empty() {
        writeln!(
            out,
            "TL-opened (ZNS+ threaded logging): zone {}",
            tl.join(", ")
        )?;
    }
    Ok(())
}

/// One line naming every zone condition of the text report ("zcond: 1(em) empty, ...").
pub fn condition_legend() -> String {
    let names: Vec<String> = ZoneState::ALL
        .iter()
        .map(|s| {
            format!(
                "{}({}) {}",
                s.nvme_value(),
                s.short_name().to_ascii_lowercase(),
                s.name().replace('_', " ")
            )
        })
        .collect();
    format!("zcond: {}", names.join(", "))
}

async fn manage(
    dev: &dyn ZonedDevice,
    action: ZoneAction,
    sel: ZoneSelect,
    out: &mut impl Write,
) -> CliResult {
    let g = dev.geometry();
    let zslba = match sel.zone {
        Some(z) if z >= g.zone_count => {
            return Err(CliError::Usage(format!(
                "zone {z} does not exist (the device has {} zones)",
                g.zone_count
            )))
        }
        Some(z) => g.zone_start(z),
        None => 0,
    };
    let before = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await?;
    dev.zone_mgmt(action, zslba, sel.all).await?;
    let after = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await?;
    // Say what changed, so a Select All that selected nothing is not silent.
    let mut changed = 0u64;
    for (z, (b, a)) in before.zones.iter().zip(&after.zones).enumerate() {
        if (b.state, b.wp) != (a.state, a.wp) {
            changed += 1;
            writeln!(out, "zone {z}: {} -> {}", b.state.name(), a.state.name())?;
        }
    }
    if sel.all {
        let selects = match action {
            ZoneAction::Open => "closed zones",
            ZoneAction::Close => "open zones",
            ZoneAction::Finish => "open and closed zones",
            ZoneAction::Reset => "open, closed and full zones",
            ZoneAction::Offline => "read-only zones",
        };
        writeln!(
            out,
            "{} --all: {} changed ({} selects {selects})",
            action.name(),
            plural(changed, "zone"),
            action.name()
        )?;
    }
    Ok(())
}

/// `n` and the noun, in the singular for 1 ("1 zone", "4 zones").
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn payload(g: &Geometry, blocks: Option<u64>, source: &DataSource) -> Result<Vec<u8>, CliError> {
    let bs = g.block_size as usize;
    match (&source.data_file, source.pattern) {
        (Some(f), _) => {
            let d = std::fs::read(f)
                .map_err(|e| CliError::Other(format!("cannot read {}: {e}", f.display())))?;
            if d.is_empty() || d.len() % bs != 0 {
                return Err(CliError::Usage(format!(
                    "{} is {} bytes, not a whole number of {bs}-byte blocks",
                    f.display(),
                    d.len()
                )));
            }
            if let Some(b) = blocks {
                if b as usize * bs != d.len() {
                    return Err(CliError::Usage(format!(
                        "--blocks {b} does not match the {} blocks of {}",
                        d.len() / bs,
                        f.display()
                    )));
                }
            }
            Ok(d)
        }
        (None, Some(p)) => {
            let b = blocks.ok_or_else(|| CliError::Usage("--pattern needs --blocks".into()))?;
            let len = usize::try_from(b)
                .ok()
                .and_then(|b| b.checked_mul(bs))
                .filter(|l| *l <= 1 << 30);
            let len = len.ok_or_else(|| CliError::Usage(format!("--blocks {b} is too large")))?;
            Ok(vec![p; len])
        }
        (None, None) => Err(CliError::Usage("give --pattern or --data-file".into())),
    }
}

async fn io(dev: &dyn ZonedDevice, cmd: &IoCmd, out: &mut impl Write) -> CliResult {
    let g = dev.geometry();
    match cmd {
        IoCmd::Write {
            lba,
            blocks,
            source,
            fua,
            ..
        } => {
            let data = payload(&g, *blocks, source)?;
            dev.write(*lba, &data, None, *fua).await?;
        }
        IoCmd::Append {
            zone,
            blocks,
            source,
            fua,
            ..
        } => {
            if *zone >= g.zone_count {
                return Err(CliError::Usage(format!(
                    "zone {zone} does not exist (the device has {} zones)",
                    g.zone_count
                )));
            }
            let data = payload(&g, *blocks, source)?;
            let lba = dev.append(g.zone_start(*zone), &data, None, *fua).await?;
            writeln!(out, "{lba}")?;
        }
        IoCmd::Read {
            lba,
            blocks,
            out: file,
            ..
        } => {
            let len = usize::try_from(*blocks)
                .ok()
                .and_then(|b| b.checked_mul(g.block_size as usize))
                .filter(|l| *l <= 1 << 30);
            let len =
                len.ok_or_else(|| CliError::Usage(format!("--blocks {blocks} is too large")))?;
            let mut buf = vec![0u8; len];
            dev.read(*lba, &mut buf, None).await?;
            match file {
                Some(f) => std::fs::write(f, &buf)
                    .map_err(|e| CliError::Other(format!("cannot write {}: {e}", f.display())))?,
                None => out.write_all(hexdump(lba * u64::from(g.block_size), &buf).as_bytes())?,
            }
        }
        IoCmd::Zeroes {
            lba, blocks, fua, ..
        } => dev.write_zeroes(*lba, *blocks, *fua).await?,
        IoCmd::Fill { sel, pattern, .. } => fill(dev, *sel, *pattern, out).await?,
    }
    Ok(())
}

/// Writes every selected zone from its write pointer to its capacity.
async fn fill(
    dev: &dyn ZonedDevice,
    sel: ZoneSelect,
    pattern: u8,
    out: &mut impl Write,
) -> CliResult {
    let g = dev.geometry();
    let report = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await?;
    let targets: Vec<_> = report
        .zones
        .iter()
        .enumerate()
        .filter(|(i, _)| sel.all || sel.zone == Some(*i as u32))
        .filter(|(_, d)| {
            matches!(
                d.state,
                ZoneState::Empty
                    | ZoneState::ImplicitlyOpened
                    | ZoneState::ExplicitlyOpened
                    | ZoneState::Closed
            )
        })
        .map(|(_, d)| *d)
        .collect();
    let total: u64 = targets.iter().map(|d| d.start + d.capacity - d.wp).sum();
    let bar = indicatif::ProgressBar::new(total * u64::from(g.block_size));
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let chunk_blocks = u64::from(g.mdts_blocks.min(256));
    let buf = vec![pattern; (chunk_blocks * u64::from(g.block_size)) as usize];
    for d in &targets {
        let mut wp = d.wp;
        let end = d.start + d.capacity;
        while wp < end {
            let n = chunk_blocks.min(end - wp);
            dev.write(
                wp,
                &buf[..(n * u64::from(g.block_size)) as usize],
                None,
                false,
            )
            .await?;
            wp += n;
            bar.inc(n * u64::from(g.block_size));
        }
    }
    dev.flush().await?;
    bar.finish_and_clear();
    writeln!(
        out,
        "filled {}, {}",
        plural(targets.len() as u64, "zone"),
        plural(total, "block")
    )?;
    Ok(())
}

fn fault(dev: &EmuDevice, a: &FaultArgs) -> CliResult {
    let state = match ZoneState::parse(&a.state) {
        Some(s @ (ZoneState::ReadOnly | ZoneState::Offline)) => s,
        _ => {
            return Err(CliError::Usage(format!(
                "--state {}: a fault moves a zone to read_only or offline",
                a.state
            )))
        }
    };
    if a.zone >= dev.geometry().zone_count {
        return Err(CliError::Usage(format!(
            "zone {} does not exist (the device has {} zones)",
            a.zone,
            dev.geometry().zone_count
        )));
    }
    dev.set_zone_state(a.zone, state)
        .map_err(|e| CliError::Other(e.to_string()))
}

/// Prints the counters.
pub fn print_stats(dev: &EmuDevice, out: &mut impl Write) -> CliResult {
    let s = dev.stats();
    write!(out, "commands:")?;
    for op in Op::ALL {
        write!(out, " {}={}", op.name(), s.count(op))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "blocks: read={} written={} copied={}; power losses: {}",
        s.blocks_read, s.blocks_written, s.blocks_copied, s.power_losses
    )?;
    let resets: u64 = s.zone_resets.iter().sum();
    writeln!(
        out,
        "zone resets: {resets}; errors: {}",
        s.errors.iter().sum::<u64>()
    )?;
    crate::zone_plus::print_plugging(dev, out)
}

/// Runs one zone or I/O subcommand against any zoned device (an image or a RAIZN array).
pub async fn execute_zoned(dev: &dyn ZonedDevice, cmd: &Cmd, out: &mut impl Write) -> CliResult {
    match cmd {
        Cmd::Zone(ZoneCmd::Report {
            state,
            start,
            count,
            json,
            ..
        }) => report(dev, state.as_deref(), *start, *count, *json, out).await,
        Cmd::Zone(ZoneCmd::Open { sel, .. }) => manage(dev, ZoneAction::Open, *sel, out).await,
        Cmd::Zone(ZoneCmd::Close { sel, .. }) => manage(dev, ZoneAction::Close, *sel, out).await,
        Cmd::Zone(ZoneCmd::Finish { sel, .. }) => manage(dev, ZoneAction::Finish, *sel, out).await,
        Cmd::Zone(ZoneCmd::Reset { sel, .. }) => manage(dev, ZoneAction::Reset, *sel, out).await,
        Cmd::Zone(ZoneCmd::Offline { sel, .. }) => {
            manage(dev, ZoneAction::Offline, *sel, out).await
        }
        Cmd::Zone(ZoneCmd::Compact { extents, target }) => {
            crate::zone_plus::compact(dev, &target_name(target), extents, out).await
        }
        Cmd::Zone(ZoneCmd::TlOpen {
            target,
            zone,
            valid,
            valid_file,
        }) => {
            let source = match (valid, valid_file) {
                (_, Some(f)) => crate::zone_plus::ValidSource::File(f),
                (Some(r), None) => crate::zone_plus::ValidSource::Ranges(r),
                (None, None) => return Err(CliError::Usage("give --valid or --valid-file".into())),
            };
            crate::zone_plus::tl_open(dev, &target_name(target), *zone, source, out).await
        }
        Cmd::Io(i) => io(dev, i, out).await,
        _ => Err(CliError::Usage(
            "only zone and io commands address a zoned device this way".into(),
        )),
    }
}

/// How a message names a target: its path, or "the RAIZN array".
fn target_name(t: &Target) -> std::path::PathBuf {
    if t.raizn.is_empty() {
        t.path().to_path_buf()
    } else {
        std::path::PathBuf::from("the RAIZN array")
    }
}

/// Refuses `zone reset` on a real device when a zone it selects holds data, unless --force:
/// a drive's data is nobody's test fixture. Images need no --force (their reset has always
/// been the point of the emulator).
pub async fn guard_reset(dev: &dyn ZonedDevice, name: &Path, cmd: &Cmd) -> CliResult {
    let Cmd::Zone(ZoneCmd::Reset {
        sel, force: false, ..
    }) = cmd
    else {
        return Ok(());
    };
    let used = crate::opened::used_zone_among(dev, |z| sel.all || sel.zone == Some(z)).await?;
    match used {
        Some(why) => Err(CliError::Other(format!(
            "{}: {why}: resetting it erases its data on a real device; pass --force to reset it",
            name.display()
        ))),
        None => Ok(()),
    }
}

/// Runs one device subcommand against an open device (image or drive).
pub async fn execute(dev: &Opened, name: &Path, cmd: &Cmd, out: &mut impl Write) -> CliResult {
    match cmd {
        Cmd::Device(DeviceCmd::Info { json, .. }) => info(dev, *json, out),
        Cmd::Zone(_) | Cmd::Io(_) => {
            if target_of(cmd).is_some_and(|t| !t.raizn.is_empty()) {
                return Err(CliError::Usage(
                    "--raizn cannot be used inside a session of one device".into(),
                ));
            }
            if dev.is_drive() {
                guard_reset(dev, name, cmd).await?;
            }
            execute_zoned(dev, cmd, out).await
        }
        Cmd::Fault(a) => fault(dev.require_image("`fault`")?, a),
        Cmd::Device(DeviceCmd::Restart { .. }) => {
            let img = dev.require_image("`device restart`")?;
            img.restart().map_err(|e| CliError::Other(e.to_string()))?;
            writeln!(
                out,
                "restarted: write cache flushed, open zones closed (Empty if unwritten)"
            )?;
            Ok(())
        }
        Cmd::Flush { .. } => Ok(dev.flush().await?),
        Cmd::PowerLoss { seed, .. } => {
            let cut = dev
                .require_image("`power-loss`")?
                .power_loss(*seed)
                .map_err(|e| CliError::Other(e.to_string()))?;
            for (z, kept, lost) in &cut {
                writeln!(
                    out,
                    "zone {z}: write pointer {lost} -> {kept} ({} blocks lost)",
                    lost - kept
                )?;
            }
            writeln!(
                out,
                "power loss: {} lost unflushed data",
                plural(cut.len() as u64, "zone")
            )?;
            Ok(())
        }
        Cmd::Device(DeviceCmd::Create(_))
        | Cmd::Device(DeviceCmd::Profiles)
        | Cmd::Device(DeviceCmd::Check(_))
        | Cmd::Quickstart(_)
        | Cmd::Session { .. }
        | Cmd::Bench(_)
        | Cmd::Ftl(_)
        | Cmd::Raizn(_)
        | Cmd::Zapraid(_)
        | Cmd::Serve(_) => Err(CliError::Usage(
            "this command cannot run inside a session".into(),
        )),
    }
}
