//! `zonestack bench ftl-mount --auto`: the mount time after a crash of a host FTL volume
//! running with its automatic checkpoints (deltas on), at the worst point for the mount: a
//! power cut just before a periodic checkpoint is due, so that the mount scans everything
//! one interval wrote (user writes and the collection they caused). Wall clock; prints what
//! the mount read, applied and scanned, and where its time went. Asserts nothing.
//!
//! The device is an in-memory zn540 (1,077 MiB writable per zone) that stores a block whose
//! bytes are all one value in one byte (`EmuDevice::new_memory_compact`), so the flash of a
//! 16 GiB volume and its spare takes a few hundred MiB of host memory; the writes here are
//! one pattern. Checkpoints, zone headers and the per-block metadata are kept as written.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume, MountOptions, MountReport};
use serde_json::{json, Value};
use zns::{BlockDevice, SimRng};

use crate::bench_ftl::{other, BenchMountArgs};
use crate::commands::plural;
use crate::error::{CliError, CliResult};

/// Host memory the device may take (data and metadata): the workload stops with an error
/// past it rather than push a shared machine into swap.
const DEVICE_MEMORY_MAX: u64 = 18 << 30;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Random,
    Chain,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Random => "random",
            Case::Chain => "chain",
        }
    }
}

fn mib(blocks: u64) -> f64 {
    (blocks * 4096) as f64 / (1u64 << 20) as f64
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub async fn run(a: &BenchMountArgs, out: &mut impl Write) -> CliResult {
    let cases: Vec<Case> = a
        .cases
        .split(',')
        .map(|c| match c.trim() {
            "random" => Ok(Case::Random),
            "chain" => Ok(Case::Chain),
            c => Err(CliError::Usage(format!(
                "--cases: '{c}' is neither 'random' nor 'chain'"
            ))),
        })
        .collect::<Result<_, _>>()?;
    let op_permille = a.op.unwrap_or(28).saturating_mul(10);
    let volume_blocks = (a.volume_gib << 30) / 4096;
    let mut g = emu::profile("zn540").ok_or_else(|| other("profile zn540 is missing"))?;
    g.zone_count = ftl::Layout::zones_for_volume(
        g,
        a.volume_gib << 30,
        op_permille,
        ftl::layout::RESERVE_ZONES_DEFAULT,
    )
    .map_err(|e| CliError::Usage(format!("--volume-gib {} --op: {e}", a.volume_gib)))?;
    g.max_open = g.max_open.min(g.zone_count);
    g.max_active = g.max_active.min(g.zone_count);
    let opts = MountOptions {
        checkpoint_scan_intervals: a.scan_intervals,
        ..MountOptions::default()
    };
    let mut rows = Vec::new();
    for case in cases {
        let dev = Arc::new(EmuDevice::new_memory_compact(EmuConfig::new(g)).map_err(other)?);
        let fmt = FormatOptions {
            op_permille,
            volume_blocks: Some(volume_blocks),
            threaded_logging: false,
        };
        let layout = ftl::format(dev.as_ref(), fmt, 1, false)
            .await
            .map_err(other)?;
        let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.map_err(other)?;
        let p0 = vol.checkpoint_progress(0, 0);
        let full_blocks = layout.checkpoint_blocks().unwrap_or(0);
        let layout_json = json!({
            "zones": g.zone_count, "zone_blocks": layout.zone_blocks,
            "slot_zones": layout.slot_zones, "data_zones": layout.data_zones,
            "reserve_zones": layout.reserve_zones, "volume_blocks": layout.volume_blocks,
            "op_permille": op_permille, "full_checkpoint_blocks": full_blocks,
            "interval_user_blocks": p0.interval_blocks,
        });
        if !a.json {
            writeln!(
                out,
                "{}: {} of {} blocks ({} for checkpoints, {} for data, {} reserve), volume {:.1} GiB at {}% OP; full checkpoint {:.1} MiB, due every {:.2} zones of user writes ({} blocks)",
                case.name(),
                plural(u64::from(g.zone_count), "zone"),
                layout.zone_blocks,
                plural(u64::from(2 * layout.slot_zones), "zone"),
                layout.data_zones,
                layout.reserve_zones,
                (layout.volume_blocks * 4096) as f64 / (1u64 << 30) as f64,
                op_permille / 10,
                mib(full_blocks),
                p0.interval_blocks as f64 / layout.zone_blocks as f64,
                p0.interval_blocks,
            )?;
        }
        let t = Instant::now();
        let (written, phase) = match case {
            Case::Random => random(&vol, &dev, volume_blocks, a.seed).await?,
            Case::Chain => (chain(&vol, &dev, volume_blocks).await?, None),
        };
        vol.flush().await.map_err(other)?;
        let write_secs = t.elapsed().as_secs_f64();
        let before = vol.checkpoint_progress(0, 0);
        let stats = vol.stats();
        let footprint = dev.footprint_bytes();
        dev.power_loss(a.seed).map_err(other)?;
        vol.crash().await;
        drop(vol);
        let t = Instant::now();
        let (vol, report) = FtlVolume::mount(dev.clone(), opts).await.map_err(other)?;
        let mount = t.elapsed();
        vol.crash().await;
        let m = Measured {
            r: report,
            mount,
            before,
            phase,
            stats,
            written,
            write_secs,
            footprint,
        };
        let row = row(case, &m);
        if !a.json {
            print_row(out, &m)?;
        }
        rows.push(json!({ "layout": layout_json, "result": row }));
    }
    if a.json {
        writeln!(out, "{}", json!({ "rows": rows }))?;
    }
    Ok(())
}

/// What one case measured: the writes before the cut and the mount after it.
struct Measured {
    r: MountReport,
    mount: std::time::Duration,
    before: ftl::CheckpointProgress,
    /// The volume's figures when the random overwrites began (None: no such phase).
    phase: Option<ftl::FtlStats>,
    stats: ftl::FtlStats,
    written: u64,
    write_secs: f64,
    footprint: u64,
}

fn row(case: Case, m: &Measured) -> Value {
    let Measured {
        r,
        mount,
        before,
        phase,
        stats,
        written,
        footprint,
        ..
    } = m;
    let mount = *mount;
    let (phase_share, phase_wa) = phase_figures(phase.as_ref(), stats);
    json!({
        "case": case.name(), "user_blocks_written": written,
        "checkpoints_before_cut": before.checkpoints,
        "user_blocks_since_checkpoint": before.user_blocks_since,
        "gc_blocks_since_checkpoint": before.gc_blocks_since,
        "write_amplification": stats.write_amplification,
        "checkpoint_bytes": stats.checkpoint_bytes,
        "checkpoint_bytes_per_user_gib": stats.checkpoint_bytes_per_user_gib(),
        "random_phase_checkpoint_bytes_per_user_gib": phase_share,
        "random_phase_write_amplification": phase_wa,
        "device_memory_bytes": footprint,
        "mount_ms": ms(mount), "deltas_applied": r.deltas_applied,
        "checkpoint_blocks_read": r.checkpoint_blocks_read,
        "scanned_zones": r.scanned_zones, "scanned_blocks": r.scanned_blocks,
        "checkpoint_read_ms": ms(r.times.checkpoint_read), "deltas_ms": ms(r.times.deltas),
        "scan_ms": ms(r.times.scan), "rebuild_ms": ms(r.times.rebuild),
        "checkpoint_write_ms": ms(r.checkpoint_write),
    })
}

/// Checkpoint bytes per GiB of user writes and the write amplification of the random
/// overwrites alone (the figures since `phase`, taken when they began, to `end`).
fn phase_figures(phase: Option<&ftl::FtlStats>, end: &ftl::FtlStats) -> (Value, Value) {
    let Some(p) = phase else {
        return (Value::Null, Value::Null);
    };
    let user = end
        .counters
        .user_blocks
        .saturating_sub(p.counters.user_blocks);
    let gc = end.counters.gc_blocks.saturating_sub(p.counters.gc_blocks);
    let bytes = end.checkpoint_bytes.saturating_sub(p.checkpoint_bytes);
    if user == 0 {
        return (Value::Null, Value::Null);
    }
    let user_bytes = (user * u64::from(end.block_size)) as f64;
    (
        json!(bytes as f64 * (1u64 << 30) as f64 / user_bytes),
        json!((user + gc) as f64 / user as f64),
    )
}

fn print_row(out: &mut impl Write, m: &Measured) -> CliResult {
    let Measured {
        r,
        mount,
        before,
        phase,
        stats,
        written,
        write_secs,
        footprint,
    } = m;
    let mount = *mount;
    writeln!(
        out,
        "  wrote {} user blocks in {:.1} s (WA {:.3}, {} checkpoints, {:.2} MiB per GiB of user writes); cut with {} user blocks and {} copies since the last checkpoint; device memory {:.0} MiB",
        written,
        write_secs,
        stats.write_amplification,
        before.checkpoints,
        stats.checkpoint_bytes_per_user_gib() / (1u64 << 20) as f64,
        before.user_blocks_since,
        before.gc_blocks_since,
        *footprint as f64 / (1u64 << 20) as f64,
    )?;
    if let (Value::Number(share), Value::Number(wa)) = phase_figures(phase.as_ref(), stats) {
        writeln!(
            out,
            "  random overwrites alone: WA {:.3}, {:.2} MiB of checkpoint per GiB of user writes",
            wa.as_f64().unwrap_or(0.0),
            share.as_f64().unwrap_or(0.0) / (1u64 << 20) as f64,
        )?;
    }
    writeln!(
        out,
        "  mount {:.0} ms: read {:.1} MiB of checkpoint ({} applied), scanned {} in {}; checkpoint read {:.0} ms, deltas {:.0} ms, scan {:.0} ms, rebuild {:.0} ms, checkpoint write {:.0} ms",
        ms(mount),
        mib(r.checkpoint_blocks_read),
        plural(r.deltas_applied, "delta"),
        plural(r.scanned_blocks, "block"),
        plural(u64::from(r.scanned_zones), "zone"),
        ms(r.times.checkpoint_read),
        ms(r.times.deltas),
        ms(r.times.scan),
        ms(r.times.rebuild),
        ms(r.checkpoint_write),
    )?;
    Ok(())
}

/// Fails once the device takes more host memory than `DEVICE_MEMORY_MAX`.
fn check_memory(dev: &EmuDevice) -> CliResult {
    let bytes = dev.footprint_bytes();
    if bytes > DEVICE_MEMORY_MAX {
        return Err(other(format!(
            "the in-memory device takes {bytes} bytes, over the bound of {DEVICE_MEMORY_MAX}"
        )));
    }
    Ok(())
}

/// Sequential 128 KiB writes over the volume once, stopping early if `stop` says so before
/// a write; returns the blocks written.
async fn sequential(
    vol: &FtlVolume,
    dev: &EmuDevice,
    from: u64,
    blocks: u64,
    n: u64,
    mut stop: impl FnMut(&FtlVolume, u64) -> bool,
) -> Result<(u64, bool), CliError> {
    let chunk = vec![0xa5u8; 128 * 1024];
    let per = 32u64;
    let mut done = 0u64;
    while done + per <= blocks {
        if stop(vol, per) {
            return Ok((done, true));
        }
        let lba = (from + done) % n;
        let lba = if lba + per > n { 0 } else { lba };
        vol.write(lba, &chunk, false).await.map_err(other)?;
        done += per;
        if done.is_multiple_of(per << 12) {
            check_memory(dev)?;
        }
    }
    Ok((done, false))
}

/// Fills the volume, then writes uniform random 4 KiB blocks until a full checkpoint has
/// been written in that phase and the next one (full: every page is dirty) would be due
/// after one more write, or the user blocks and copies since the last one are within a
/// zone of the scan bound (collection's copies come in rounds: the cut is then at most a
/// round before the checkpoint the bound makes due). Returns the user blocks written and the volume's figures when the
/// random writes began.
async fn random(
    vol: &FtlVolume,
    dev: &EmuDevice,
    n: u64,
    seed: u64,
) -> Result<(u64, Option<ftl::FtlStats>), CliError> {
    let (filled, _) = sequential(vol, dev, 0, n, n, |_, _| false).await?;
    let phase = vol.stats();
    let zone_blocks = vol.layout().zone_blocks;
    let start = vol.checkpoint_progress(0, 0).checkpoints;
    let mut rng = SimRng::new(seed);
    let block = vec![0x5au8; 4096];
    let mut done = 0u64;
    loop {
        let p = vol.checkpoint_progress(1, 1);
        let near_bound = (p.user_blocks_since + p.gc_blocks_since).saturating_add(zone_blocks)
            >= p.scan_bound_blocks;
        if p.checkpoints > start && p.next_full && (p.due_after || near_bound) {
            return Ok((filled + done, Some(phase)));
        }
        if done > 8 * n {
            return Err(other(
                "no periodic checkpoint came in eight volumes of random writes",
            ));
        }
        vol.write(rng.below(n), &block, false)
            .await
            .map_err(other)?;
        done += 1;
        if done.is_multiple_of(1 << 17) {
            check_memory(dev)?;
        }
    }
}

/// Sequential 128 KiB writes (wrapping at the volume's end) until the delta chain is as long
/// as it gets (the next checkpoint is a full one though a chain exists) and that full one
/// would be due after one more write. Returns the user blocks written.
async fn chain(vol: &FtlVolume, dev: &EmuDevice, n: u64) -> Result<u64, CliError> {
    let stop = |v: &FtlVolume, per: u64| {
        let p = v.checkpoint_progress(per, 1);
        p.chain_delta_blocks.is_some() && p.next_full && p.due_after
    };
    let (done, stopped) = sequential(vol, dev, 0, 8 * n, n, stop).await?;
    if !stopped {
        return Err(other(
            "the delta chain did not fill in eight volumes of sequential writes",
        ));
    }
    Ok(done)
}
