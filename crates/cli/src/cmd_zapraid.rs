//! `zonestack zapraid format|status|fail|replace|recover|check`: a ZapRAID log-structured RAID block volume
//! over k + m emulated device images (k from the member count and --parity).
//!
//! Opening a ZapRAID array recovers its index and finishes the zones of segments that were
//! open, so it writes: `status` and `check` open the images read-write. `fail` records a
//! member failed on every survivor (the array then runs degraded across restarts, as
//! `raizn fail` does for RAIZN); `replace` (zapraid_replace.rs) rebuilds one onto a new image,
//! `recover` onto the image named in its place.
//! Every command but `format` takes `missing` for a member whose image is gone: the open
//! records it failed and the array runs degraded.

use std::io::Write;
use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use serde_json::json;
use zapraid::{FormatOptions, GroupMode, RecordPlace, ZapRaidError, ZapRaidVolume};
use zns::BlockDevice;

use crate::error::{CliError, CliResult};
use crate::members::{finish, Members};
use crate::units::format_size;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    /// Stripe groups of --group stripes: Zone Append inside a group, a Zone Write barrier
    /// between groups (the paper's design).
    Grouped,
    /// Every stripe is a Zone Write (G = 1).
    ZoneWrite,
    /// One group per segment: Zone Append throughout (G = S).
    ZoneAppend,
}

#[derive(Subcommand, Debug)]
pub enum ZapraidCmd {
    /// Format an array over device images (refuses images holding data without --force).
    #[command(alias = "create")]
    Format {
        /// Member device images, in array order: k data + m parity per stripe (at least 3;
        /// one geometry). Members with at least 32 bytes of per-block metadata (`device
        /// create --oob 64`) hold the block records there; others get them in-band.
        #[arg(required = true, num_args = 3..)]
        members: Vec<PathBuf>,
        /// Parity blocks per stripe m (k is the member count minus m): 1 is XOR (RAID-5),
        /// 2 or more Reed-Solomon (up to m members may fail).
        #[arg(long, default_value_t = 1)]
        parity: u32,
        /// How stripes are grouped: grouped, zone-write or zone-append.
        #[arg(long, value_enum, default_value = "grouped")]
        mode: ModeArg,
        /// Stripes per group G with --mode grouped (at most the stripes of a segment; default
        /// 256 or a segment's stripes if fewer, or with in-band records 32 and at most a
        /// quarter of a segment).
        #[arg(long)]
        group: Option<u32>,
        /// Keep the block records in-band (a summary block ending every group) even on
        /// members with per-block metadata; chosen anyway on members with too little.
        #[arg(long)]
        in_band: bool,
        /// Over-provisioning in percent of the data capacity (space kept for collection).
        #[arg(long, default_value_t = 10.0)]
        op: f64,
        /// Format even over images holding data (their zones are reset; the data is lost).
        #[arg(long)]
        force: bool,
    },
    /// Open the array (recovering it), print its layout, index memory and counters, close it.
    Status {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Record a member as failed on the other members (the array runs degraded: reads of its
    /// blocks are rebuilt from parity, new stripes omit it).
    Fail {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// The member that failed: its position (0-based) or its image path as given.
        #[arg(long)]
        member: String,
    },
    /// Rebuild a failed member onto a new device image (recorded failed first if it is not):
    /// every live block it held is rebuilt from the others; the new image then takes its
    /// place in the member list. Shows a progress bar on a terminal, a line every few
    /// seconds otherwise.
    Replace {
        /// Member device images, in array order (the failed member's image as it was given,
        /// or `missing` when it is gone).
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// The member to replace: its position (0-based) or its image path as given.
        #[arg(long)]
        member: String,
        /// The new device image (same geometry; empty, or holding this member's partial
        /// recovery).
        #[arg(long, value_name = "NEWIMG")]
        with: PathBuf,
        /// Overwrite the new image even if it holds other data.
        #[arg(long)]
        force: bool,
        /// Print no progress, only the result.
        #[arg(long)]
        quiet: bool,
    },
    /// Rebuild failed members onto the images named in their own places (a new image swapped
    /// in for a dead drive, or the replacement of a recovery cut short), after the crash
    /// recovery every open runs. With --member, that member is recorded failed first.
    Recover {
        /// Member device images, in array order, with the image to rebuild onto in the
        /// failed member's place.
        #[arg(required = true)]
        members: Vec<PathBuf>,
        /// The member to rebuild: its position (0-based) or its image path as given; by
        /// default every member the array records failed.
        #[arg(long)]
        member: Option<String>,
        /// Overwrite the image even if it holds other data.
        #[arg(long)]
        force: bool,
        /// Print no progress, only the result.
        #[arg(long)]
        quiet: bool,
    },
    /// Open the array, check the index's invariants and read every block; exit 1 naming
    /// each problem.
    Check {
        /// Member device images, in array order (`missing` for an absent member).
        #[arg(required = true)]
        members: Vec<PathBuf>,
    },
}

/// A ZapRAID error naming the member image it is about.
pub fn zapraid_error(m: &Members, e: ZapRaidError) -> CliError {
    match e {
        ZapRaidError::NotEmpty {
            member,
            zone,
            state,
        } => CliError::Other(format!(
            "{} holds data (zone {zone} is {}); pass --force to destroy it",
            m.name(member),
            state.name()
        )),
        ZapRaidError::Device {
            member,
            what,
            status,
        } => CliError::Other(format!("{}: {what}: {status}", m.name(member))),
        ZapRaidError::NotAnArray(why) => CliError::Other(format!(
            "not a ZapRAID array ({why}); format one with `zonestack zapraid format`"
        )),
        e => CliError::Other(e.to_string()),
    }
}

/// Opens the array over the members of `m`; a `missing` one is recorded failed (at most
/// the parity count may be missing or failed, or the open is refused naming them).
pub async fn open_array(m: &Members) -> Result<ZapRaidVolume, CliError> {
    ZapRaidVolume::open_with_missing(m.zoned())
        .await
        .map_err(|e| zapraid_error(m, e))
}

/// Flushes and closes `vol`, with the cause when the flush failed.
pub async fn close_array(vol: ZapRaidVolume) -> Result<(), CliError> {
    vol.close()
        .await
        .map_err(|e| CliError::Other(format!("flushing the array: {e}")))
}

/// The options of `zapraid format` as given on the command line.
struct FormatArgs {
    n: usize,
    parity: u32,
    mode: ModeArg,
    group: Option<u32>,
    in_band: bool,
    op: f64,
    force: bool,
}

fn options(a: FormatArgs) -> Result<FormatOptions, CliError> {
    let FormatArgs {
        n,
        parity,
        mode,
        group,
        in_band,
        op,
        force,
    } = a;
    if !(0.0..=90.0).contains(&op) {
        return Err(CliError::Usage(format!(
            "--op {op} is outside 0..=90 percent"
        )));
    }
    let k = (n as u32).checked_sub(parity).filter(|k| *k >= 2);
    let k = k.ok_or_else(|| {
        CliError::Usage(format!(
            "{n} members with --parity {parity} leave fewer than 2 data blocks per stripe"
        ))
    })?;
    let mode = match mode {
        ModeArg::Grouped => group.map_or(GroupMode::DEFAULT, GroupMode::Grouped),
        ModeArg::ZoneWrite => GroupMode::ZoneWriteOnly,
        ModeArg::ZoneAppend => GroupMode::ZoneAppendOnly,
    };
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&crate::cmd_ftl::new_volume_id().to_le_bytes());
    uuid[8..].copy_from_slice(&crate::cmd_ftl::new_volume_id().to_le_bytes());
    let records = if in_band {
        RecordPlace::InBand
    } else {
        RecordPlace::Auto
    };
    Ok(FormatOptions {
        mode,
        records,
        op_permille: (op * 10.0).round() as u32,
        force,
        uuid,
        ..FormatOptions::new(k, parity)
    })
}

fn describe(vol: &ZapRaidVolume) -> String {
    let l = vol.layout();
    let bytes = vol.size_blocks() * u64::from(vol.block_size());
    format!(
        "{} ({} blocks of {} bytes) over k = {} + m = {} members, {} segments of {} stripes, \
         groups of {} stripes, block records {}",
        format_size(bytes),
        vol.size_blocks(),
        vol.block_size(),
        l.k,
        l.m,
        l.segments(),
        l.stripes,
        l.group,
        records_place(vol)
    )
}

/// Where the volume keeps its block records, as status shows it.
fn records_place(vol: &ZapRaidVolume) -> &'static str {
    if vol.layout().in_band {
        "in-band (group summaries)"
    } else {
        "in per-block metadata"
    }
}

async fn format(paths: &[PathBuf], opts: FormatOptions, out: &mut impl Write) -> CliResult {
    let m = Members::open(paths, false, false)?;
    let r = async {
        let vol = ZapRaidVolume::format(m.all()?, &opts)
            .await
            .map_err(|e| zapraid_error(&m, e))?;
        let text = format!("formatted ZapRAID volume: {}", describe(&vol));
        close_array(vol).await?;
        Ok(text)
    }
    .await;
    let text = finish(m, r)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// The status of an open volume as text or one JSON object.
pub fn status_of(vol: &ZapRaidVolume, json_out: bool) -> String {
    status_named(vol, json_out, &|i| format!("member {i}"))
}

/// The status of an open volume, naming members with `name`.
pub fn status_named(vol: &ZapRaidVolume, json_out: bool, name: &dyn Fn(usize) -> String) -> String {
    let l = vol.layout();
    let failed = vol.failed_members();
    let members = match failed.is_empty() {
        true => format!("all {} healthy", l.n()),
        false => {
            let names: Vec<String> = failed
                .iter()
                .map(|i| format!("{} failed", name(*i)))
                .collect();
            format!("degraded: {}", names.join(", "))
        }
    };
    let s = vol.stats();
    let mem = vol.index_memory();
    if json_out {
        return json!({
            "size_bytes": vol.size_blocks() * u64::from(vol.block_size()),
            "block_size": vol.block_size(), "k": l.k, "m": l.m, "group": l.group,
            "records": if l.in_band { "in-band" } else { "per-block metadata" },
            "failed_members": failed, "state_generation": vol.state_generation(),
            "stripes_per_segment": l.stripes, "segments": l.segments(),
            "write_amplification": s.write_amplification(),
            "client_blocks": s.client_blocks, "relocated_blocks": s.relocated_blocks,
            "relocations_superseded": s.relocations_superseded,
            "padding_blocks": s.padding_blocks, "collections_started": s.collections_started,
            "segments_collected": s.segments_collected,
            "index_memory": {"l2p_bytes": mem.l2p_bytes,
                "stripe_table_bytes": mem.stripe_table_bytes,
                "stripe_table_bytes_max": mem.stripe_table_bytes_max,
                "trim_place_bytes": mem.trim_place_bytes},
        })
        .to_string();
    }
    format!(
        "volume:         {}\n\
         members:        {members}\n\
         since open:     write amplification {:.3} ({} client, {} relocated, {} padding blocks); \
         {} collections, {} segments collected\n\
         index memory:   L2P {}, stripe tables {} (bound {}), trim places {}",
        describe(vol),
        s.write_amplification(),
        s.client_blocks,
        s.relocated_blocks,
        s.padding_blocks,
        s.collections_started,
        s.segments_collected,
        format_size(mem.l2p_bytes),
        format_size(mem.stripe_table_bytes),
        format_size(mem.stripe_table_bytes_max),
        format_size(mem.trim_place_bytes)
    )
}

async fn status(paths: &[PathBuf], json_out: bool, out: &mut impl Write) -> CliResult {
    let m = Members::open(paths, false, true)?;
    let r = async {
        let vol = open_array(&m).await?;
        let text = status_named(&vol, json_out, &|i| m.name(i));
        close_array(vol).await?;
        Ok(text)
    }
    .await;
    let text = finish(m, r)?;
    writeln!(out, "{text}")?;
    Ok(())
}

async fn fail(paths: &[PathBuf], spec: &str, out: &mut impl Write) -> CliResult {
    let i = crate::cmd_raizn::member_index(paths, spec)?;
    let m = Members::open(paths, false, true)?;
    let r = async {
        let vol = open_array(&m).await?;
        let failed = vol.failed_members();
        if failed.contains(&i) {
            close_array(vol).await?;
            return Ok(format!("{} was already recorded failed", m.name(i)));
        }
        let parity = vol.layout().m as usize;
        if failed.len() >= parity {
            let names: Vec<String> = failed.iter().map(|f| m.name(*f)).collect();
            return Err(CliError::Other(format!(
                "{} already failed; failing {} too would leave the array without its data \
                 ({parity} parity block(s) per stripe cover {parity} failed member(s))",
                names.join(", "),
                m.name(i)
            )));
        }
        vol.fail_member_durably(i)
            .await
            .map_err(|e| CliError::Other(format!("recording {} failed: {e}", m.name(i))))?;
        close_array(vol).await?;
        Ok(format!(
            "{} recorded failed on the other members; the array is degraded (reads of its \
             blocks are rebuilt from parity; `zonestack zapraid replace` rebuilds it onto a \
             new image)",
            m.name(i)
        ))
    }
    .await;
    let text = finish(m, r)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Blocks read at once by check.
const CHECK_CHUNK_BLOCKS: u64 = 256;

async fn check(paths: &[PathBuf], out: &mut impl Write) -> CliResult {
    let m = Members::open(paths, false, true)?;
    let r = async {
        let vol = open_array(&m).await?;
        let mut problems = Vec::new();
        if let Err(e) = vol.verify() {
            problems.push(format!("index: {e}"));
        }
        let (n, bs) = (vol.size_blocks(), vol.block_size() as usize);
        let mut buf = vec![0u8; CHECK_CHUNK_BLOCKS as usize * bs];
        let mut lba = 0;
        while lba < n {
            let len = CHECK_CHUNK_BLOCKS.min(n - lba);
            if let Err(e) = vol.read(lba, &mut buf[..len as usize * bs]).await {
                problems.push(format!("blocks {lba}..{}: {e}", lba + len));
            }
            lba += len;
        }
        close_array(vol).await?;
        Ok((problems, n))
    }
    .await;
    let (problems, n) = finish(m, r)?;
    for p in &problems {
        writeln!(out, "problem: {p}")?;
    }
    if problems.is_empty() {
        writeln!(out, "clean: index consistent, all {n} blocks read")?;
        return Ok(());
    }
    let n = problems.len();
    Err(CliError::Other(format!(
        "{n} {} in the ZapRAID array",
        if n == 1 { "problem" } else { "problems" }
    )))
}

pub async fn run(cmd: &ZapraidCmd, out: &mut impl Write) -> CliResult {
    match cmd {
        ZapraidCmd::Format {
            members,
            parity,
            mode,
            group,
            in_band,
            op,
            force,
        } => {
            let opts = options(FormatArgs {
                n: members.len(),
                parity: *parity,
                mode: *mode,
                group: *group,
                in_band: *in_band,
                op: *op,
                force: *force,
            })?;
            format(members, opts, out).await
        }
        ZapraidCmd::Status { members, json } => status(members, *json, out).await,
        ZapraidCmd::Fail { members, member } => fail(members, member, out).await,
        ZapraidCmd::Replace {
            members,
            member,
            with,
            force,
            quiet,
        } => {
            let r = crate::zapraid_replace::Request {
                paths: members,
                spec: member,
                with,
                force: *force,
                quiet: *quiet,
            };
            crate::zapraid_replace::run(&r, out).await
        }
        ZapraidCmd::Recover {
            members,
            member,
            force,
            quiet,
        } => {
            let r = crate::zapraid_replace::InPlace {
                paths: members,
                spec: member.as_deref(),
                force: *force,
                quiet: *quiet,
            };
            crate::zapraid_replace::run_in_place(&r, out).await
        }
        ZapraidCmd::Check { members } => check(members, out).await,
    }
}
