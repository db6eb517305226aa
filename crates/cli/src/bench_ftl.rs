//! `zonestack bench ftl`: write amplification of the host FTL under uniform random and
//! hot/cold 4 KiB overwrites at a chosen utilisation, on an in-memory emulated device, in one
//! thread. Prints figures; asserts nothing.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume, MountOptions, VictimPolicy};
use serde_json::json;
use zns::{BlockDevice, Geometry, SimRng};

use crate::error::{CliError, CliResult};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Workload {
    /// Every block equally likely.
    Uniform,
    /// 80% of writes to 20% of the blocks.
    Hotcold,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Policy {
    /// Collect the zone with the fewest valid blocks.
    Greedy,
    /// Weigh free space gained against the data's age (LFS cost-benefit).
    CostBenefit,
}

#[derive(Args, Debug)]
pub struct BenchFtlArgs {
    /// Where the random overwrites go: uniform (every block alike) or hotcold (80% of the
    /// writes to 20% of the blocks).
    #[arg(long, value_enum, default_value = "uniform")]
    pub workload: Workload,
    /// Live data as a fraction of the data zones' physical blocks.
    #[arg(long, default_value_t = 0.8)]
    pub util: f64,
    /// Garbage collection victim policy: greedy or cost-benefit.
    #[arg(long, value_enum, default_value = "greedy")]
    pub policy: Policy,
    /// Separate hot and cold user data into different zones.
    #[arg(long)]
    pub hot_cold: bool,
    /// How hot and cold data are told apart with --hot-cold: two-short (the block's last
    /// two update intervals, the default) or lifespans (the sum of its last four lifespans).
    #[arg(long, value_enum, default_value = "two-short")]
    pub placement: crate::cmd_ftl::PlacementArg,
    /// Zones of the in-memory device the volume is formatted on.
    #[arg(long, default_value_t = 160)]
    pub zones: u32,
    /// Blocks (4 KiB) per zone.
    #[arg(long, default_value_t = 1024)]
    pub zone_blocks: u64,
    /// Volume-sized passes of random overwrites before measuring.
    #[arg(long, default_value_t = 3.0)]
    pub warmup: f64,
    /// Volume-sized passes measured.
    #[arg(long, default_value_t = 4.0)]
    pub passes: f64,
    /// Seed of the random overwrites.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write with Zone Append instead of Zone Write.
    #[arg(long)]
    pub append: bool,
    /// Background GC watermark (free zones); 0: one above the foreground watermark. A mount
    /// refuses one above the free zones the volume has with all its blocks written (unless
    /// it is one above the foreground watermark), naming the range it accepts.
    #[arg(long, default_value_t = 0)]
    pub bg: u32,
    /// Foreground GC watermark (free zones); 0: the reserve garbage collection keeps (one
    /// zone, with or without --hot-cold).
    #[arg(long, default_value_t = 0)]
    pub fg: u32,
    /// Garbage-collection lanes at most (0: a mounted volume's default, one). Each open lane
    /// keeps spare out of the log, so placement and victim choice are measured with 1.
    #[arg(long, default_value_t = 1)]
    pub gc_lanes: u32,
    /// Start garbage collection as soon as the free zones reach the floor, as a volume does
    /// by default. Without it collection at the floor waits until a user zone is full
    /// (`MountOptions::gc_lead_blocks` 0): here collection is untimed, so starting it early
    /// only keeps the zone it frees empty while the user zone fills.
    #[arg(long)]
    pub gc_eager: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

fn geometry(a: &BenchFtlArgs) -> Geometry {
    let (zasl_blocks, r, rb, t) = emu::config::reference_limits(4096);
    Geometry {
        block_size: 4096,
        oob_size: 16,
        zone_count: a.zones,
        zone_size: a.zone_blocks.next_power_of_two(),
        zone_capacity: a.zone_blocks,
        max_open: 14,
        max_active: 14,
        zasl_blocks,
        mdts_blocks: 512,
        copy_max_ranges: r,
        copy_max_range_blocks: rb,
        copy_max_blocks: t,
        cross_zone_reads: false,
    }
}

pub(crate) fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

pub async fn run(a: &BenchFtlArgs, out: &mut impl Write) -> CliResult {
    if !(0.1..=0.95).contains(&a.util) {
        return Err(CliError::Usage(format!(
            "--util {} is outside 0.1..=0.95",
            a.util
        )));
    }
    let g = geometry(a);
    let dev = Arc::new(
        EmuDevice::new_memory(EmuConfig {
            seed: a.seed,
            ..EmuConfig::new(g)
        })
        .map_err(other)?,
    );
    // The volume is the requested share of the data zones' physical blocks (the reserve
    // zones count as physical space), exported exactly; the over-provisioning recorded is
    // the largest whose (flash - logical) / logical allows that many blocks.
    // The probe only counts the data zones; small devices need more than 10% for the
    // layout's fixed costs, so it tries larger spares until one fits.
    let reserve = ftl::layout::RESERVE_ZONES_DEFAULT;
    let probe = [100, 200, 400, 800, 1600]
        .iter()
        .find_map(|op| ftl::Layout::new(g, *op, reserve).ok())
        .map_or_else(|| ftl::Layout::new(g, 4000, reserve), Ok)
        .map_err(other)?;
    let physical = u64::from(probe.data_zones) * (g.zone_capacity - 1);
    let volume_blocks = ((a.util * physical as f64).round() as u64).max(1);
    let flash = u64::from(g.zone_count) * g.zone_capacity;
    let op = (flash * 1000 / volume_blocks).saturating_sub(1000);
    let range = ftl::layout::OP_PERMILLE_RANGE;
    let op_permille = u32::try_from(op)
        .unwrap_or(u32::MAX)
        .clamp(*range.start(), *range.end());
    let fmt = FormatOptions {
        op_permille,
        volume_blocks: Some(volume_blocks),
        threaded_logging: false,
    };
    ftl::format(dev.as_ref(), fmt, a.seed, false)
        .await
        .map_err(other)?;
    let policy = match a.policy {
        Policy::Greedy => VictimPolicy::Greedy,
        Policy::CostBenefit => VictimPolicy::CostBenefit,
    };
    let opts = MountOptions {
        write_mode: if a.append {
            ftl::WriteMode::ZoneAppend
        } else {
            ftl::WriteMode::ZoneWrite
        },
        victim_policy: policy,
        hot_cold: a.hot_cold,
        placement: a.placement.placement(),
        hot_zones: 1,
        gc_lanes_max: a.gc_lanes,
        gc_lead_blocks: (!a.gc_eager).then_some(0),
        ..MountOptions::default()
    };
    // Users stop at the reserve, and collection starts one zone above: each zone held free
    // beyond what collection needs is a zone out of the log.
    let fg = match a.fg {
        0 => ftl::plan::reserve_zones(&probe, &opts),
        n => n,
    };
    let opts = MountOptions {
        gc_foreground_free_zones: fg,
        gc_background_free_zones: if a.bg == 0 { fg + 1 } else { a.bg },
        ..opts
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.map_err(other)?;
    let n = vol.size_blocks();
    let util = n as f64 / physical as f64;
    let block = vec![0x5au8; 4096];
    for lba in 0..n {
        vol.write(lba, &block, false).await.map_err(other)?;
    }
    let mut rng = SimRng::new(a.seed);
    let hot_blocks = n / 5;
    let pick = |rng: &mut SimRng| match a.workload {
        Workload::Uniform => rng.below(n),
        Workload::Hotcold if rng.chance(0.8) => rng.below(hot_blocks),
        Workload::Hotcold => hot_blocks + rng.below(n - hot_blocks),
    };
    for _ in 0..(a.warmup * n as f64) as u64 {
        vol.write(pick(&mut rng), &block, false)
            .await
            .map_err(other)?;
    }
    let before = vol.stats().counters;
    let t = Instant::now();
    let writes = (a.passes * n as f64) as u64;
    // Spare out of the log, sampled every 64 writes: free zones and open zones' tails.
    let (mut samples, mut free_sum, mut tail_sum) = (0u64, 0u64, 0u64);
    for i in 0..writes {
        vol.write(pick(&mut rng), &block, false)
            .await
            .map_err(other)?;
        if i % 64 == 0 {
            let s = vol.stats();
            samples += 1;
            free_sum += u64::from(s.free_zones);
            tail_sum += s.open_tail_blocks;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let after = vol.stats().counters;
    vol.unmount().await.map_err(other)?;
    let user = after.user_blocks - before.user_blocks;
    let gc = after.gc_blocks - before.gc_blocks;
    let wa = (user + gc) as f64 / user as f64;
    let streams: serde_json::Map<String, serde_json::Value> = ftl::map::Stream::ALL
        .iter()
        .map(|s| {
            let i = s.index();
            let blocks = after.stream_blocks[i] - before.stream_blocks[i];
            (s.name().to_string(), json!(blocks))
        })
        .collect();
    let v = json!({
        "workload": format!("{:?}", a.workload).to_lowercase(),
        "policy": format!("{:?}", a.policy).to_lowercase(),
        "hot_cold": a.hot_cold,
        "placement": match a.placement {
            crate::cmd_ftl::PlacementArg::Lifespans => "lifespans",
            crate::cmd_ftl::PlacementArg::TwoShort => "two-short",
        },
        "write_mode": if a.append { "append" } else { "write" },
        "utilisation": util,
        "volume_blocks": n,
        "measured_writes": writes,
        "write_amplification": wa,
        "zones_collected": after.gc_zones - before.gc_zones,
        "gc_rounds": after.gc_rounds - before.gc_rounds,
        "gc_stale_copies": after.gc_stale_copies - before.gc_stale_copies,
        "gc_merged_victims": after.gc_merged_victims - before.gc_merged_victims,
        "free_zones_mean": free_sum as f64 / samples.max(1) as f64,
        "open_tail_blocks_mean": tail_sum as f64 / samples.max(1) as f64,
        "gc_rounds_overlapped": after.gc_rounds_overlapped - before.gc_rounds_overlapped,
        "gc_lanes_max": a.gc_lanes,
        "gc_lead_blocks": opts.gc_lead_blocks,
        "gc_foreground_free_zones": opts.gc_foreground_free_zones,
        "gc_background_free_zones": opts.gc_background_free_zones,
        "stream_blocks": streams,
        "writes_per_sec": writes as f64 / secs,
    });
    if a.json {
        writeln!(out, "{v}")?;
    } else {
        let workload = match a.workload {
            Workload::Uniform => "uniform",
            Workload::Hotcold => "hot/cold (80% of writes to 20% of blocks)",
        };
        let policy = match a.policy {
            Policy::Greedy => "greedy",
            Policy::CostBenefit => "cost-benefit",
        };
        let separation = if a.hot_cold {
            "hot and cold data in separate zones"
        } else {
            "one user stream"
        };
        writeln!(
            out,
            "{workload} 4 KiB overwrites, {policy} victims, {separation}: utilisation {util:.3}, WA {wa:.3} over {writes} writes ({:.0} writes/s)",
            writes as f64 / secs
        )?;
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct BenchMountArgs {
    /// Exported volume size in GiB (zn540 zones, 7% over-provisioning).
    #[arg(long, default_value_t = 16)]
    pub volume_gib: u64,
    /// Comma-separated numbers of zones written since the last checkpoint.
    #[arg(long, default_value = "0,1,2,4")]
    pub zones_written: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Automatic checkpoints on (deltas too), a volume of exactly --volume-gib, and a power
    /// cut just before a periodic checkpoint is due (`bench_ftl_mount`); --zones-written is
    /// then ignored.
    #[arg(long)]
    pub auto: bool,
    /// Over-provisioning in per cent (flash over the volume); default 7, or 28 with --auto.
    #[arg(long)]
    pub op: Option<u32>,
    /// With --auto, comma-separated cases: "random" (fill, then uniform random 4 KiB
    /// overwrites with collection running, cut before a full checkpoint is due) and "chain"
    /// (sequential 128 KiB writes until the delta chain is as long as it gets, cut before
    /// the full checkpoint that ends it is due).
    #[arg(long, default_value = "random,chain")]
    pub cases: String,
    /// Seed of the random overwrites and the power cut.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With --auto, a checkpoint is also due once user blocks and collection's copies since
    /// the last one reach this many intervals (`MountOptions::checkpoint_scan_intervals`);
    /// 0, the default: no such bound.
    #[arg(long, default_value_t = 0)]
    pub scan_intervals: u32,
}

/// Mount time after a crash against the zones written since the last checkpoint: each data
/// point formats a fresh volume, writes that many zones of 128 KiB writes with checkpoints
/// held off, flushes, cuts power, and times the mount (checkpoint read + scan + new checkpoint).
pub async fn run_mount(a: &BenchMountArgs, out: &mut impl Write) -> CliResult {
    if a.auto {
        return crate::bench_ftl_mount::run(a, out).await;
    }
    let counts: Vec<u32> = a
        .zones_written
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| CliError::Usage(format!("--zones-written: '{s}' is not a number")))
        })
        .collect::<Result<_, _>>()?;
    let op_permille = a.op.unwrap_or(7).saturating_mul(10);
    let mut g = emu::profile("zn540").ok_or_else(|| other("profile zn540 is missing"))?;
    g.zone_count = ftl::Layout::zones_for_volume(
        g,
        a.volume_gib << 30,
        op_permille,
        ftl::layout::RESERVE_ZONES_DEFAULT,
    )
    .map_err(|e| CliError::Usage(format!("--volume-gib {}: {e}", a.volume_gib)))?;
    g.max_open = g.max_open.min(g.zone_count);
    g.max_active = g.max_active.min(g.zone_count);
    let mut rows = Vec::new();
    for &k in &counts {
        let dev = Arc::new(EmuDevice::new_memory(EmuConfig::new(g)).map_err(other)?);
        ftl::format(dev.as_ref(), FormatOptions::with_op(op_permille), 1, false)
            .await
            .map_err(other)?;
        let opts = MountOptions {
            checkpoint_every_zones: u32::MAX,
            hot_zones: 1,
            hot_cold: false,
            ..MountOptions::default()
        };
        let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.map_err(other)?;
        let n = vol.size_blocks();
        let chunk = vec![0xa5u8; 128 * 1024];
        let per = (chunk.len() / 4096) as u64;
        let blocks = (u64::from(k) * (g.zone_capacity - 1)).min(n);
        let mut lba = 0;
        while lba + per <= blocks {
            vol.write(lba, &chunk, false).await.map_err(other)?;
            lba += per;
        }
        vol.flush().await.map_err(other)?;
        dev.power_loss(7).map_err(other)?;
        vol.crash().await;
        drop(vol);
        let t = Instant::now();
        let (vol, report) = FtlVolume::mount(dev.clone(), opts).await.map_err(other)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        vol.crash().await;
        rows.push(json!({
            "volume_gib": (n * 4096) as f64 / (1u64 << 30) as f64, "zones_written": k,
            "scanned_zones": report.scanned_zones, "scanned_blocks": report.scanned_blocks, "mount_ms": ms,
        }));
        if !a.json {
            writeln!(
                out,
                "{:.1} GiB volume, {} written since the checkpoint: scanned {} in {}, mount {:.0} ms",
                (n * 4096) as f64 / (1u64 << 30) as f64,
                crate::commands::plural(k as u64, "zone"),
                crate::commands::plural(report.scanned_blocks, "block"),
                crate::commands::plural(u64::from(report.scanned_zones), "zone"),
                ms
            )?;
        }
    }
    if a.json {
        writeln!(out, "{}", json!({ "rows": rows }))?;
    }
    Ok(())
}
