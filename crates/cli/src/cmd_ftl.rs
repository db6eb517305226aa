//! `zonestack ftl format|mount|check|stats`: the host FTL volume on an emulated device image
//! or a zoned block device.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use ftl::compaction::Placement;
use ftl::{FormatOptions, FtlVolume, MountOptions, VictimPolicy, WriteMode};
use serde_json::json;
use zns::ZonedDevice;

use crate::commands::{self, plural};
use crate::error::{CliError, CliResult};
use crate::opened::Opened;

#[derive(Subcommand, Debug)]
pub enum FtlCmd {
    /// Format a block volume on a device image (refuses a device holding data without --force).
    Format {
        /// Device image file (made by `zonestack device create`) or zoned block device.
        path: PathBuf,
        /// Over-provisioning in percent: (flash - volume size) / volume size, with every zone
        /// of the device counted as flash; checkpoint zones, reserve zones and zone headers
        /// are paid from it.
        #[arg(long, default_value_t = 7.0)]
        op: f64,
        /// Format even when the device holds data (it is lost).
        #[arg(long)]
        force: bool,
        /// Threaded logging (ZNS+): the hot stream writes into the holes of full zones the
        /// device re-opens with tl_open. Needs a device made with --zns-plus and per-block
        /// metadata of at least 16 bytes; recorded in the volume.
        #[arg(long)]
        threaded_logging: bool,
    },
    /// Mount the volume (recovering after a crash), report what recovery did, unmount cleanly.
    Mount {
        /// Device image or zoned block device holding a volume (`zonestack ftl format`).
        path: PathBuf,
        #[command(flatten)]
        opts: MountArgs,
    },
    /// Rebuild the mapping read-only and check its invariants; exit 1 if the volume is corrupt.
    Check {
        /// Device image or zoned block device holding a volume (`zonestack ftl format`).
        path: PathBuf,
    },
    /// Sizes and usage of the volume (read-only).
    Stats {
        /// Device image or zoned block device holding a volume (`zonestack ftl format`).
        path: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    /// Zone Write, one write in flight per open zone.
    Write,
    /// Zone Append, several in flight per zone.
    Append,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PolicyArg {
    /// Collect the zone with the fewest valid blocks.
    Greedy,
    /// Weigh free space gained against the data's age (LFS cost-benefit).
    CostBenefit,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PlacementArg {
    /// Hot when the block's last four lifespans add up to under 3.2 volumes' worth of writes.
    Lifespans,
    /// Hot when the block's last two update intervals were each under a volume's worth.
    TwoShort,
}

impl PlacementArg {
    pub fn placement(self) -> ftl::Placement {
        match self {
            PlacementArg::Lifespans => ftl::Placement::Lifespans,
            PlacementArg::TwoShort => ftl::Placement::TwoShort,
        }
    }
}

#[derive(Args, Debug, Clone, Copy)]
pub struct MountArgs {
    /// How the volume writes its zones: write (Zone Write) or append (Zone Append).
    #[arg(long, value_enum, default_value = "write")]
    pub write_mode: ModeArg,
    /// Which zone garbage collection empties next: greedy (fewest valid blocks) or
    /// cost-benefit (also weighs the data's age).
    #[arg(long, value_enum, default_value = "cost-benefit")]
    pub gc_policy: PolicyArg,
    /// Do not separate hot and cold data.
    #[arg(long)]
    pub no_hot_cold: bool,
    /// How hot and cold data are told apart while separating: two-short (the block's last
    /// two update intervals, the default) or lifespans (the sum of its last four lifespans).
    #[arg(long, value_enum, default_value = "two-short")]
    pub placement: PlacementArg,
    /// Relocate by host read and write instead of the device's Simple Copy.
    #[arg(long)]
    pub no_copy: bool,
    /// On a ZNS+ device, how garbage collection uses zone_compaction: copyback-aware
    /// (destinations on the source chunk's chip), source-order, or off (relocate as on any
    /// device). Ignored on a device without the ZNS+ commands.
    #[arg(long, value_enum, default_value = "copyback-aware")]
    pub compaction: CompactionArg,
    /// Let garbage collection at the free-zone floor wait until a writer needs a zone or an
    /// open user zone has at most BLOCKS of room left: fewer blocks relocated, longer write
    /// tail latency (the write amplification `zonestack bench ftl` measures). Default:
    /// collect as soon as the floor is reached.
    #[arg(long, value_name = "BLOCKS")]
    pub gc_lead: Option<u64>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CompactionArg {
    /// zone_compaction with copyback-aware destinations (ZNS+ Fig. 5).
    CopybackAware,
    /// zone_compaction with destinations packed in source order.
    SourceOrder,
    /// No zone_compaction: Simple Copy or read + write.
    Off,
}

impl MountArgs {
    pub fn options(&self) -> MountOptions {
        MountOptions {
            write_mode: match self.write_mode {
                ModeArg::Write => WriteMode::ZoneWrite,
                ModeArg::Append => WriteMode::ZoneAppend,
            },
            victim_policy: match self.gc_policy {
                PolicyArg::Greedy => VictimPolicy::Greedy,
                PolicyArg::CostBenefit => VictimPolicy::CostBenefit,
            },
            hot_cold: !self.no_hot_cold,
            placement: self.placement.placement(),
            use_copy: !self.no_copy,
            compaction: match self.compaction {
                CompactionArg::CopybackAware => Some(Placement::CopybackAware),
                CompactionArg::SourceOrder => Some(Placement::SourceOrder),
                CompactionArg::Off => None,
            },
            gc_lead_blocks: self.gc_lead,
            ..MountOptions::default()
        }
    }
}

fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

/// A volume error in words a user can act on: an image with no volume names the command
/// that makes one.
pub(crate) fn volume_error(path: &std::path::Path, e: ftl::FtlError) -> CliError {
    match e {
        ftl::FtlError::Checkpoint(ftl::checkpoint::CkptError::NoCheckpoint) => {
            CliError::Other(format!(
                "{p} holds no FTL volume (no checkpoint found); make one with `zonestack ftl format {p}`",
                p = path.display()
            ))
        }
        e => CliError::Other(e.to_string()),
    }
}

/// A volume id that differs between formats.
pub fn new_volume_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    zns::SimRng::new(t as u64 ^ u64::from(std::process::id())).next_u64()
}

async fn with_device<T, F, Fut>(path: &std::path::Path, f: F) -> Result<T, CliError>
where
    F: FnOnce(Arc<Opened>) -> Fut,
    Fut: std::future::Future<Output = Result<T, CliError>>,
{
    with_device_mode(path, false, f).await
}

/// `with_device`, opening the image read-only when `read_only` (check, stats).
async fn with_device_mode<T, F, Fut>(
    path: &std::path::Path,
    read_only: bool,
    f: F,
) -> Result<T, CliError>
where
    F: FnOnce(Arc<Opened>) -> Fut,
    Fut: std::future::Future<Output = Result<T, CliError>>,
{
    let dev = Arc::new(if read_only {
        commands::open_read_only(path)?
    } else {
        commands::open(path)?
    });
    let r = f(dev.clone()).await;
    dev.shutdown()?;
    r
}

pub async fn run(cmd: &FtlCmd, out: &mut impl Write) -> CliResult {
    match cmd {
        FtlCmd::Format {
            path,
            op,
            force,
            threaded_logging,
        } => {
            if !(1.0..=90.0).contains(op) {
                return Err(CliError::Usage(format!(
                    "--op {op} is outside 1..=90 percent"
                )));
            }
            let id = new_volume_id();
            let force = *force;
            let op_permille = (op * 10.0).round() as u32;
            let fmt = FormatOptions {
                threaded_logging: *threaded_logging,
                ..FormatOptions::with_op(op_permille)
            };
            let text = with_device(path, |dev| async move {
                let layout =
                    ftl::format(dev.as_ref(), fmt, id, force)
                        .await
                        .map_err(|e| match e {
                            ftl::FtlError::NotEmpty => CliError::Other(format!(
                                "{} already holds data; pass --force to overwrite it",
                                path.display()
                            )),
                            e => other(e),
                        })?;
                Ok(format!(
                    "formatted {}: {} blocks of {} bytes ({}), {} data zones, {} checkpoint zones{}",
                    path.display(),
                    layout.volume_blocks,
                    layout.geometry.block_size,
                    crate::units::format_size(
                        layout.volume_blocks * u64::from(layout.geometry.block_size)
                    ),
                    layout.data_zones,
                    2 * layout.slot_zones,
                    if fmt.threaded_logging {
                        ", threaded logging"
                    } else {
                        ""
                    }
                ))
            })
            .await?;
            writeln!(out, "{text}")?;
            Ok(())
        }
        FtlCmd::Mount { path, opts } => {
            let opts = opts.options();
            let text = with_device(path, |dev| async move {
                let opts = dev.fit_mount_options(opts)?;
                let d: Arc<dyn ZonedDevice> = dev;
                let (vol, r) = FtlVolume::mount(d, opts)
                    .await
                    .map_err(|e| volume_error(path, e))?;
                vol.unmount().await.map_err(other)?;
                let mut text = format!(
                    "mounted from checkpoint {}: scanned {} in {}, finished {} partly written; unmounted cleanly",
                    r.checkpoint_number,
                    plural(r.scanned_blocks, "block"),
                    plural(u64::from(r.scanned_zones), "zone"),
                    plural(u64::from(r.finished_partial_zones), "zone")
                );
                if r.retired_zones > 0 {
                    text += &format!(
                        "\n{} retired by the device (read only or offline)",
                        plural(u64::from(r.retired_zones), "data zone")
                    );
                }
                if !r.lost_ranges.is_empty() {
                    text += &format!("\ndata lost in offline zones, LBA ranges: {}", format_ranges(&r.lost_ranges));
                }
                Ok(text)
            })
            .await?;
            writeln!(out, "{text}")?;
            Ok(())
        }
        FtlCmd::Check { path } | FtlCmd::Stats { path, .. } => {
            let json_out = matches!(cmd, FtlCmd::Stats { json: true, .. });
            let check = matches!(cmd, FtlCmd::Check { .. });
            let text = with_device_mode(path, true, |dev| async move {
                let layout = ftl::probe(dev.as_ref())
                    .await
                    .map_err(|e| volume_error(path, e))?;
                let rec = ftl::recovery::recover(dev.as_ref(), &layout).await.map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?;
                let m = &rec.mapping;
                m.verify().map_err(|e| CliError::Other(format!("{}: corrupt: {e}", path.display())))?;
                let mapped = (0..layout.volume_blocks).filter(|l| m.lookup(*l).is_some()).count();
                let lost = m.lost_ranges();
                let lost_blocks: u64 = lost.iter().map(|(_, n)| n).sum();
                if check && !lost.is_empty() {
                    return Err(CliError::Other(format!(
                        "{}: {lost_blocks} blocks lost in offline zones (LBA ranges: {}); {} retired zones; the rest of the volume mounts",
                        path.display(),
                        format_ranges(&lost),
                        rec.retired_zones
                    )));
                }
                let opts = MountOptions { stripe: dev.die_stripe(), ..MountOptions::default() };
                let stats = ftl::FtlStats::of(m, &ftl::plan::tune_mount(&layout, opts), rec.checkpoint_number);
                let mut v = bench::fio::ftl_stats_json(&stats);
                if let Some(obj) = v.as_object_mut() {
                    for (k, x) in [
                        ("checkpoint", json!(rec.checkpoint_number)),
                        ("checkpoint_deltas", json!(rec.chain.deltas)),
                        ("recovery_scan_blocks", json!(rec.scanned_blocks)),
                        ("op_permille", json!(layout.op_permille)),
                        ("retired_zones", json!(rec.retired_zones)),
                        ("headerless_zones", json!(rec.headerless_zones)),
                        ("lost_blocks", json!(lost_blocks)),
                        ("lost_ranges", json!(lost.iter().map(|(first, n)| json!({"lba": first, "blocks": n})).collect::<Vec<_>>())),
                    ] {
                        obj.insert(k.into(), x);
                    }
                }
                Ok(if json_out {
                    v.to_string()
                } else if check {
                    format!(
                        "{}: clean: {} of {} blocks mapped; a mount would scan {} blocks past checkpoint {}",
                        path.display(),
                        mapped,
                        layout.volume_blocks,
                        rec.scanned_blocks,
                        rec.checkpoint_number
                    )
                } else {
                    let sp = stats.spare;
                    format!(
                        "volume: {} blocks of {} bytes, {} mapped, on {} blocks of flash\ndata zones: {} ({} free), over-provisioning {:.2}% ((flash - volume) / volume)\nspare blocks: {} checkpoint, {} reserve zones, {} zone headers, {} summaries, {} open-zone tails, {} collectable\ncheckpoint: {} ({} deltas after the full one); recovery would scan {} blocks\ncheckpoints: {} blocks each full one; at most {:.1} MiB written since format (every checkpoint counted full)",
                        layout.volume_blocks,
                        layout.geometry.block_size,
                        mapped,
                        stats.flash_blocks,
                        layout.data_zones,
                        m.free_zones(),
                        stats.op_real() * 100.0,
                        sp.checkpoint,
                        sp.reserve,
                        sp.headers,
                        sp.summaries,
                        sp.open_tails,
                        sp.collectable,
                        rec.checkpoint_number,
                        rec.chain.deltas,
                        rec.scanned_blocks,
                        layout.checkpoint_blocks().unwrap_or(0),
                        stats.checkpoint_bytes as f64 / f64::from(1u32 << 20)
                    )
                })
            })
            .await?;
            writeln!(out, "{text}")?;
            Ok(())
        }
    }
}

/// LBA ranges as `first..end` (end exclusive), comma separated; long lists are cut short.
fn format_ranges(ranges: &[(u64, u64)]) -> String {
    const SHOWN: usize = 16;
    let mut parts: Vec<String> = ranges
        .iter()
        .take(SHOWN)
        .map(|(first, n)| format!("{first}..{}", first + n))
        .collect();
    if ranges.len() > SHOWN {
        parts.push(format!("and {} more", ranges.len() - SHOWN));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::MountArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        mount: MountArgs,
    }

    fn options(args: &[&str]) -> ftl::MountOptions {
        let argv = std::iter::once("mount").chain(args.iter().copied());
        Cmd::try_parse_from(argv)
            .expect("arguments parse")
            .mount
            .options()
    }

    #[test]
    fn gc_lead_reaches_the_mount_options_and_defaults_to_eager() {
        assert_eq!(options(&[]).gc_lead_blocks, None);
        assert_eq!(options(&["--gc-lead", "0"]).gc_lead_blocks, Some(0));
        assert_eq!(options(&["--gc-lead", "64"]).gc_lead_blocks, Some(64));
        assert!(Cmd::try_parse_from(["mount", "--gc-lead", "-1"]).is_err());
    }
}
