//! `zonestack raizn create|status|fail|replace|rebuild|check`, and zone and I/O commands on a RAIZN array
//! (`--raizn a.img,b.img,c.img`): a zoned RAID-5 volume over emulated device images.
//!
//! An array is named by its member images in order (`missing` for an absent one); nothing
//! else is stored beside them: every member's superblock records the array. Opening an
//! array read-write recovers it (and rewrites the partial-parity logs), so `status` and
//! `check` do not open the volume: they read the members' superblocks and zones read-only
//! (`raizn_inspect`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use bench::jobfile::parse_size;
use clap::Subcommand;
use raizn::{RaiznConfig, RaiznError, RaiznVolume};
use zns::ZonedDevice;

use crate::args::Cmd;
use crate::commands;
use crate::error::{CliError, CliResult};
use crate::members::{finish, first_used_zone, Members};
use crate::units::format_size;

#[derive(Subcommand, Debug)]
pub enum RaiznCmd {
    /// Create an array over device images (refuses images holding data without --force).
    Create {
        /// Member device images, in array order (at least 3; made by `zonestack device create`
        /// with one geometry).
        #[arg(required = true, num_args = 3..)]
        members: Vec<PathBuf>,
        /// Stripe unit: a multiple of the block size that divides the zone capacity (K/M
        /// suffixes).
        #[arg(long, value_parser = parse_size, default_value = "64K")]
        stripe_unit: u64,
        /// Parity units per stripe: 1 (RAID-5, XOR) or 2 (Reed-Solomon; at least 4 members).
        #[arg(long, default_value_t = 1)]
        parity: u32,
        /// Partial-parity log zones per member: 1 (one zone, collected through the swap
        /// zone), K >= 2 (a pool; at most a quarter of the member's zones), or `auto`: the
        /// least pool that holds the live log content, refused with the figures when the
        /// members have too few zones for it. Default: `auto` where the members have the
        /// zones for it, otherwise 1 (the created line says why).
        #[arg(long, value_parser = parse_log_zones)]
        log_zones: Option<LogZones>,
        /// Create even over images holding data (their zones are reset; the data is lost).
        #[arg(long)]
        force: bool,
    },
    /// Show the array read-only: UUID, members and their state, geometry, limits, zones.
    Status {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Record a member as failed in the other members' superblocks (the array runs degraded).
    Fail {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// The member that failed: its position (0-based) or its image path as given.
        #[arg(long)]
        member: String,
    },
    /// Put a new device image in a failed member's place and rebuild it from the others
    /// (refuses an image holding data without --force).
    Replace {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// The failed member to replace: its position (0-based) or its image path as given.
        #[arg(long)]
        member: String,
        /// The new device image (made by `zonestack device create` with the members' geometry).
        #[arg(long = "with", value_name = "NEW_IMAGE")]
        with: PathBuf,
        /// Replace even with an image holding data (its zones are reset; the data is lost).
        #[arg(long)]
        force: bool,
        /// Print no progress on stderr.
        #[arg(long)]
        quiet: bool,
        /// Stop after rebuilding this many zones, as if interrupted.
        #[arg(long, hide = true)]
        stop_after_zones: Option<u32>,
    },
    /// Continue a rebuild that was cut short: the member list names the new image in the
    /// failed member's place.
    Rebuild {
        /// Member device images, in array order, with the image being rebuilt in its place.
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// Print no progress on stderr.
        #[arg(long)]
        quiet: bool,
        /// Stop after rebuilding this many zones, as if interrupted.
        #[arg(long, hide = true)]
        stop_after_zones: Option<u32>,
    },
    /// Verify read-only the parity of every complete stripe; exit 1 naming each problem.
    Check {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
    },
}

/// `--log-zones`: a number, or sized from the members' geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogZones {
    Given(u32),
    Auto,
}

fn parse_log_zones(s: &str) -> Result<LogZones, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(LogZones::Auto);
    }
    match s.parse::<u32>() {
        Ok(k) if k >= 1 => Ok(LogZones::Given(k)),
        _ => Err(format!(
            "{s:?}: expected a number of log zones (1 or more) or auto"
        )),
    }
}

/// A RAIZN error in words a user can act on: the member it names is named by its image.
pub fn raizn_error(m: &Members, e: RaiznError) -> CliError {
    let member = match &e {
        RaiznError::Member { member, .. }
        | RaiznError::HoldsData { member }
        | RaiznError::NotFormatted { member, .. }
        | RaiznError::Foreign { member, .. } => Some(*member),
        RaiznError::Layout(raizn::LayoutError::GeometryMismatch { member, .. }) => Some(*member),
        _ => None,
    };
    match (member, e) {
        (Some(i), RaiznError::NotFormatted { why, .. }) => CliError::Other(format!(
            "{} is not a RAIZN member ({why}); create an array with `zonestack raizn create`",
            m.name(i)
        )),
        (Some(i), e) => CliError::Other(format!("{}: {e}", m.name(i))),
        (None, e) => CliError::Other(e.to_string()),
    }
}

/// A new array UUID, different between creations.
fn new_uuid() -> [u8; 16] {
    let a = crate::cmd_ftl::new_volume_id().to_le_bytes();
    let b = crate::cmd_ftl::new_volume_id()
        .rotate_left(17)
        .to_le_bytes();
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&a);
    u[8..].copy_from_slice(&b);
    u
}

/// The UUID as text (8-4-4-4-12 hex digits).
pub fn uuid_text(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Opens the array over `m` (absent members allowed): recovery runs, which writes.
pub async fn open_array(m: &Members) -> Result<RaiznVolume, CliError> {
    let devs = m
        .devs
        .iter()
        .map(|d| d.clone().map(|d| d as Arc<dyn ZonedDevice>))
        .collect();
    RaiznVolume::open_degraded(devs)
        .await
        .map_err(|e| raizn_error(m, e))
}

async fn create(
    paths: &[PathBuf],
    stripe_unit: u64,
    parity: u32,
    log_zones: Option<LogZones>,
    force: bool,
    out: &mut impl Write,
) -> CliResult {
    let m = Members::open(paths, false, false)?;
    let r = create_on(&m, stripe_unit, parity, log_zones, force).await;
    let text = finish(m, r)?;
    writeln!(out, "{text}")?;
    Ok(())
}

async fn create_on(
    m: &Members,
    stripe_unit: u64,
    parity: u32,
    log_zones: Option<LogZones>,
    force: bool,
) -> Result<String, CliError> {
    let devs = m.all()?;
    // One zone with relocation state per member (docs/DESIGN.md, "Sizing at create").
    let geos: Vec<zns::Geometry> = devs.iter().map(|d| d.geometry()).collect();
    let sized = raizn::ArrayLayout::new(&geos, parity, stripe_unit)
        .and_then(|l| l.with_sized_log_zones(1, 1))
        .map(|l| l.log_zones());
    let mut why_one = None;
    let log_zones = match log_zones {
        Some(LogZones::Given(k)) => k,
        Some(LogZones::Auto) => sized.map_err(|e| raizn_error(m, RaiznError::Layout(e)))?,
        None => match sized {
            Ok(k) => k,
            // Too few zones for a pool (or a layout format refuses below, with its cause).
            Err(e) => {
                why_one = Some(format!(
                    "; one log zone per member: {e}, so a relocation or record that does \
                     not fit is refused or dropped (--log-zones)"
                ));
                1
            }
        },
    };
    if !force {
        for (i, d) in devs.iter().enumerate() {
            if let Some(why) = used_because(d.as_ref()).await? {
                return Err(CliError::Other(format!(
                    "{} holds data ({why}); pass --force to destroy it",
                    m.name(i)
                )));
            }
        }
    }
    let cfg = RaiznConfig {
        log_zones,
        stripe_unit_bytes: stripe_unit,
        parity,
        array_uuid: new_uuid(),
    };
    let vol = RaiznVolume::format(devs, cfg, force)
        .await
        .map_err(|e| raizn_error(m, e))?;
    vol.flush().await?;
    let g = vol.geometry();
    let l = vol.layout();
    Ok(format!(
        "created RAIZN array {} over {} members: {} zones of {} blocks ({} writable), \
         {}-byte blocks, stripe unit {}, {} writable, {} log zone(s) per member{}",
        uuid_text(&vol.array_uuid()),
        l.members(),
        g.zone_count,
        g.zone_size,
        g.zone_capacity,
        g.block_size,
        format_size(l.su_blocks() * u64::from(g.block_size)),
        format_size(g.capacity_bytes()),
        l.log_zones(),
        why_one.unwrap_or_default()
    ))
}

/// Why a member image counts as holding data: it belongs to a RAIZN array, or a zone of it
/// is not Empty. None for an empty image.
pub async fn used_because(dev: &dyn ZonedDevice) -> Result<Option<String>, CliError> {
    if let Ok(Some(sb)) = crate::raizn_inspect::newest_superblock(dev).await {
        return Ok(Some(format!(
            "it is member {} of RAIZN array {}",
            sb.member_index,
            uuid_text(&sb.array_uuid)
        )));
    }
    first_used_zone(dev).await
}

/// The position a `--member` argument names: a number, or one of the member paths.
pub fn member_index(m: &[PathBuf], spec: &str) -> Result<usize, CliError> {
    if let Ok(i) = spec.parse::<usize>() {
        if i < m.len() {
            return Ok(i);
        }
        return Err(CliError::Usage(format!(
            "--member {i}: the array has {} members (0..{})",
            m.len(),
            m.len() - 1
        )));
    }
    m.iter().position(|p| p.as_os_str() == spec).ok_or_else(|| {
        CliError::Usage(format!(
            "--member {spec} is neither a position nor one of the member images given"
        ))
    })
}

async fn fail(paths: &[PathBuf], spec: &str, out: &mut impl Write) -> CliResult {
    let i = member_index(paths, spec)?;
    let m = Members::open(paths, false, true)?;
    let r = async {
        let vol = open_array(&m).await?;
        let failed = vol.failed_members();
        let parity = vol.layout().parity() as usize;
        if failed.contains(&i) {
            return Ok(format!("{} was already recorded failed", m.name(i)));
        }
        if failed.len() >= parity {
            let names: Vec<String> = failed.iter().map(|f| m.name(*f)).collect();
            return Err(CliError::Other(format!(
                "{} already failed; failing {} too would leave the array without its data \
                 (an array with {parity} parity unit(s) per stripe survives {parity} failed \
                 member(s))",
                names.join(" and "),
                m.name(i)
            )));
        }
        vol.fail_member(i).await.map_err(|e| raizn_error(&m, e))?;
        Ok(format!(
            "{} recorded failed in the other members' superblocks; the array is degraded \
             (reads of its data are rebuilt from parity)",
            m.name(i)
        ))
    }
    .await;
    let text = finish(m, r)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// A zone or I/O command on the array its `--raizn` names.
pub async fn run_zoned(cmd: &Cmd, out: &mut impl Write) -> CliResult {
    let paths = commands::target_of(cmd)
        .map(|t| t.raizn.clone())
        .unwrap_or_default();
    let m = Members::open(&paths, false, true)?;
    let r = async {
        let vol = open_array(&m).await?;
        // A reset of the array resets zones of every member: on drives, only with --force.
        if m.devs.iter().flatten().any(|d| d.is_drive()) {
            commands::guard_reset(&vol, std::path::Path::new("the RAIZN array"), cmd).await?;
        }
        let r = commands::execute_zoned(&vol, cmd, out).await;
        // What the command wrote is made durable on the members before they are closed.
        let flushed = vol.flush().await.map_err(CliError::from);
        r.and(flushed)
    }
    .await;
    finish(m, r)
}

pub async fn run(cmd: &RaiznCmd, out: &mut impl Write) -> CliResult {
    match cmd {
        RaiznCmd::Create {
            members,
            stripe_unit,
            parity,
            log_zones,
            force,
        } => create(members, *stripe_unit, *parity, *log_zones, *force, out).await,
        RaiznCmd::Fail { members, member } => fail(members, member, out).await,
        RaiznCmd::Status { members, json } => {
            crate::raizn_inspect::status(members, *json, out).await
        }
        RaiznCmd::Replace {
            members,
            member,
            with,
            force,
            quiet,
            stop_after_zones,
        } => {
            let a = crate::raizn_rebuild::RebuildArgs {
                members,
                quiet: *quiet,
                stop_after_zones: *stop_after_zones,
            };
            crate::raizn_rebuild::replace(&a, member, with, *force, out).await
        }
        RaiznCmd::Rebuild {
            members,
            quiet,
            stop_after_zones,
        } => {
            let a = crate::raizn_rebuild::RebuildArgs {
                members,
                quiet: *quiet,
                stop_after_zones: *stop_after_zones,
            };
            crate::raizn_rebuild::rebuild(&a, out).await
        }
        RaiznCmd::Check { members } => crate::raizn_inspect::check(members, out).await,
    }
}
