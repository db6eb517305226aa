//! ZNS+ (OSDI '21) Fig. 6: the average time of one segment compaction, by host-level copy on
//! a ZNS SSD (read every valid block to the host, write it back, checkpoint) against
//! in-storage zone compaction (IZC: one `zone_compaction` per batch of extents, then the
//! checkpoint). The paper found IZC 28.2-51.7% faster (IZC/ZNS 0.483-0.718 over five
//! workloads, mean 0.610) with 74-87% of the in-storage copies done by copyback (mean 81.6%).
//!
//! Setup, in virtual time on the `femu-mlc` profile (the paper's default MLC flash, Table 2:
//! 16 chips on 8 channels, 16 KiB pages, 32 MiB zones over all 16 chips, PCIe Gen2 x2): a
//! victim zone is filled, a seeded valid bitmap marks a fraction of it valid, and its valid
//! blocks are copied into an empty zone (F2FS segment = zone). The valid blocks sit 80% in
//! fully valid chunks and 20% scattered over partly valid ones (the paper does not give the
//! victims' layout; this share bounds the copyback ratio near the paper's 81.6%). Each point
//! runs three ways on fresh devices with the same victim:
//! - ZNS: reads of every valid run (at most 64 blocks each, 32 in flight), then 512 KiB
//!   writes at the destination's write pointer, then Flush (the checkpoint waits for them);
//! - IZC copyback-aware (paper Fig. 5): each destination chunk takes a fully valid source
//!   chunk of its own chip when there is one (a copyback), else blocks of partly valid
//!   chunks (read and program inside the device), else any fully valid chunk; all commands
//!   in flight together, then Flush;
//! - IZC in source order: the valid runs packed into the destination in LBA order, so chips
//!   rarely match and nearly every copy is a read and program inside the device.
//!
//! There is no file system: the init phase (metadata reads, cached in the paper) and the
//! checkpoint's own writes are not modelled, and no user I/O runs beside the compaction
//! (the paper's fileserver disturbs host-level copies most; its OLTP workloads hardly do).

use emu::timing::timing_profile;
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use futures::future::join_all;
use futures::stream::{self, StreamExt};
use zns::{ChunkMapping, CompactionExtent, Geometry, Lba, NvmeStatus, SimRng, ZonedDevice};

use crate::paper::{Options, Row};

/// The profile of the paper's default setup (Table 2, MLC).
pub const PROFILE: &str = "femu-mlc";
const BLOCK_BYTES: u32 = 4096;
const VICTIM_ZONE: u32 = 0;
const DEST_ZONE: u32 = 1;
/// Share of the valid blocks that sit in fully valid chunks.
const FULL_CHUNK_SHARE: f64 = 0.8;
const READ_RUN_MAX_BLOCKS: u64 = 64;
const READS_IN_FLIGHT: usize = 32;
const WRITE_BLOCKS: u64 = 128;

/// Paper values: Fig. 6's IZC/ZNS compaction time, mean of its five workloads; the mean
/// copyback ratio of section 4.1; and the time a copyback-aware IZC saves over one without
/// copyback if copies are flash-bound: 81.6% of them at Table 2's normalized 0.90.
pub const PAPER_IZC_OVER_ZNS: f64 = 0.610;
pub const PAPER_COPYBACK_RATIO: f64 = 0.816;
pub const PAPER_AWARE_OVER_SOURCE_ORDER: f64 = 1.0 - PAPER_COPYBACK_RATIO * (1.0 - 0.90);
/// Fig. 6's IZC / ZNS compaction time for the fileserver workload (51.7% shorter), the
/// figure `HOST_COPY_NS_PER_BLOCK` is calibrated to, at `CALIBRATION_VALID_PCT`.
pub const PAPER_FILESERVER_IZC_OVER_ZNS: f64 = 0.483;
/// The valid fraction of the victim (%) the host time is calibrated at.
pub const CALIBRATION_VALID_PCT: u32 = 50;

/// Host time per block moved by a host-level copy, in ns: what the paper's host spends on
/// each block F2FS's segment cleaning reads into the page cache and writes back (node block
/// lookups, the page cache, the block layer, two memory copies), which the device model does
/// not charge (a host command costs only its submission and completion). Calibrated once,
/// on this figure: with it the host copy of the 50%-valid victim takes 1 / 0.483 of the
/// copyback-aware IZC's time, the paper's fileserver ratio (docs/BENCHMARKS.md, "ZNS+ host
/// time of a host-level copy"). The ZNS setups of `znsplus-fig7`, `-fig8` and `-varmail`
/// charge it through `ftl::MountOptions::host_copy_ns_per_block`; IZC and ZNS+ copy inside
/// the device and never pay it, nor does user I/O.
pub const HOST_COPY_NS_PER_BLOCK: u32 = 5_278;

/// How a compaction copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    HostCopy,
    IzcCopybackAware,
    IzcSourceOrder,
}

/// One measured compaction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compaction {
    pub method: Method,
    pub valid_blocks: u64,
    pub time_ms: f64,
    /// Share of the copied blocks moved by copyback (0 for a host copy).
    pub copyback_ratio: f64,
    /// The paper's phases (Fig. 6), in ms: reading to the host and the host's time for the
    /// blocks read (ZNS) or 0 (IZC), writing back (ZNS) or the in-storage copy (IZC, the
    /// "IZC phase"), and the Flush standing in for the checkpoint's wait. They sum to
    /// `time_ms`.
    pub phases_ms: [f64; 3],
}

/// The device: the femu-mlc array behind four 32 MiB zones.
fn device(seed: u64) -> Result<EmuDevice, String> {
    let p = timing_profile(PROFILE).ok_or("the femu-mlc timing profile is missing")?;
    let zone_blocks = p.block_bytes() * u64::from(p.dies()) / u64::from(BLOCK_BYTES);
    let mut g = emu::profile("small").ok_or("the small geometry is missing")?;
    g.zone_count = 4;
    g.zone_size = zone_blocks;
    g.zone_capacity = zone_blocks;
    g.max_open = 4;
    g.max_active = 4;
    let cfg = EmuConfig {
        seed,
        zns_plus: true,
        ..EmuConfig::new(g)
    };
    EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(p, ClockMode::Virtual))
        .map_err(|e| e.to_string())
}

/// A seeded valid bitmap of the victim, one bool per block: `fraction` of the blocks valid,
/// `FULL_CHUNK_SHARE` of them in fully valid chunks.
pub fn victim_bitmap(blocks: u64, chunk_blocks: u64, fraction: f64, seed: u64) -> Vec<bool> {
    let mut rng = SimRng::new(seed);
    let full = fraction * FULL_CHUNK_SHARE;
    let scattered = ((fraction - full) / (1.0 - full)).clamp(0.0, 1.0);
    let chance = |rng: &mut SimRng, p: f64| (rng.below(1_000_000) as f64) < p * 1e6;
    let mut valid = vec![false; blocks as usize];
    for chunk in valid.chunks_mut(chunk_blocks as usize) {
        if chance(&mut rng, full) {
            chunk.fill(true);
        } else {
            for b in chunk.iter_mut() {
                *b = chance(&mut rng, scattered);
            }
            // A chunk whose blocks all came up valid by chance stays partial in spirit but
            // is a full chunk to the allocator; that is fine.
        }
    }
    valid
}

/// Runs of valid blocks (offset in the zone, length), each at most `max` long.
fn valid_runs(valid: &[bool], max: u64) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    let mut b = 0u64;
    let n = valid.len() as u64;
    while b < n {
        if !valid[b as usize] {
            b += 1;
            continue;
        }
        let start = b;
        while b < n && valid[b as usize] && b - start < max {
            b += 1;
        }
        runs.push((start, b - start));
    }
    runs
}

/// Fills the victim zone with data and flushes.
async fn fill_victim(dev: &EmuDevice, g: &Geometry) -> Result<(), NvmeStatus> {
    let start = g.zone_start(VICTIM_ZONE);
    let data = vec![0x5a; (WRITE_BLOCKS * u64::from(g.block_size)) as usize];
    let mut at = 0;
    while at < g.zone_capacity {
        dev.write(start + at, &data, None, false).await?;
        at += WRITE_BLOCKS;
    }
    dev.flush().await
}

/// Instants (from the start) at which a compaction's phases ended.
struct PhaseEnds {
    t0: tokio::time::Instant,
    ends: Vec<f64>,
}

impl PhaseEnds {
    fn new() -> PhaseEnds {
        PhaseEnds {
            t0: tokio::time::Instant::now(),
            ends: Vec::new(),
        }
    }

    fn end(&mut self) {
        self.ends.push(self.t0.elapsed().as_secs_f64() * 1e3);
    }
}

/// ZNS: read the valid runs to the host, spend `host_ns` of host time per block read, write
/// them at the destination's WP, flush.
async fn host_copy(
    dev: &EmuDevice,
    g: &Geometry,
    (valid, host_ns): (&[bool], u32),
    phases: &mut PhaseEnds,
) -> Result<(), NvmeStatus> {
    let bs = u64::from(g.block_size);
    let src = g.zone_start(VICTIM_ZONE);
    let runs = valid_runs(valid, READ_RUN_MAX_BLOCKS);
    let reads = stream::iter(runs.iter().map(|&(off, n)| async move {
        let mut buf = vec![0u8; (n * bs) as usize];
        dev.read(src + off, &mut buf, None).await.map(|()| buf)
    }))
    .buffered(READS_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    let mut data = Vec::new();
    for r in reads {
        data.extend_from_slice(&r?);
    }
    let moved = data.len() as u64 / bs;
    let host = ftl::host::host_copy_time(moved, host_ns);
    emu::timing::wait_until(ClockMode::Virtual, tokio::time::Instant::now() + host).await;
    phases.end();
    let dst = g.zone_start(DEST_ZONE);
    for (i, piece) in data.chunks((WRITE_BLOCKS * bs) as usize).enumerate() {
        dev.write(dst + i as u64 * WRITE_BLOCKS, piece, None, false)
            .await?;
    }
    phases.end();
    dev.flush().await?;
    phases.end();
    Ok(())
}

/// Copyback-aware destination allocation (paper Fig. 5): extents in destination order.
pub fn copyback_aware_extents(
    g: &Geometry,
    m: &ChunkMapping,
    valid: &[bool],
) -> Vec<CompactionExtent> {
    let cb = u64::from(m.chunk_blocks);
    let (src0, dst0) = (g.zone_start(VICTIM_ZONE), g.zone_start(DEST_ZONE));
    let chips = m.chips() as usize;
    let mut full: Vec<std::collections::VecDeque<Lba>> = vec![Default::default(); chips];
    let mut partial: std::collections::VecDeque<Lba> = Default::default();
    let mut total = 0u64;
    for (c, chunk) in valid.chunks(cb as usize).enumerate() {
        let at = src0 + c as u64 * cb;
        if chunk.len() as u64 == cb && chunk.iter().all(|v| *v) {
            let chip = m.chip_of(g, at).unwrap_or(0) as usize;
            full[chip % chips].push_back(at);
            total += cb;
        } else {
            for (i, v) in chunk.iter().enumerate() {
                if *v {
                    partial.push_back(at + i as u64);
                    total += 1;
                }
            }
        }
    }
    let mut extents: Vec<CompactionExtent> = Vec::new();
    let mut dst = dst0;
    while dst - dst0 < total {
        let chip = m.chip_of(g, dst).unwrap_or(0) as usize % chips;
        if let Some(src) = full[chip].pop_front() {
            extents.push(CompactionExtent {
                src,
                dst,
                blocks: cb,
            });
            dst += cb;
            continue;
        }
        if !partial.is_empty() {
            for _ in 0..cb {
                let Some(src) = partial.pop_front() else {
                    break;
                };
                push_block(&mut extents, src, dst);
                dst += 1;
            }
            continue;
        }
        // Only fully valid chunks of other chips are left: copy one without copyback.
        let Some(other) = (0..chips).max_by_key(|&c| full[c].len()) else {
            break;
        };
        let Some(src) = full[other].pop_front() else {
            break;
        };
        extents.push(CompactionExtent {
            src,
            dst,
            blocks: cb,
        });
        dst += cb;
    }
    extents
}

/// Appends one block's copy, merged into the last extent when both sides continue it.
fn push_block(extents: &mut Vec<CompactionExtent>, src: Lba, dst: Lba) {
    if let Some(last) = extents.last_mut() {
        if last.src + last.blocks == src && last.dst + last.blocks == dst {
            last.blocks += 1;
            return;
        }
    }
    extents.push(CompactionExtent {
        src,
        dst,
        blocks: 1,
    });
}

/// The valid runs packed into the destination in source order.
pub fn source_order_extents(g: &Geometry, valid: &[bool]) -> Vec<CompactionExtent> {
    let (src0, mut dst) = (g.zone_start(VICTIM_ZONE), g.zone_start(DEST_ZONE));
    valid_runs(valid, u64::MAX)
        .into_iter()
        .map(|(off, n)| {
            let e = CompactionExtent {
                src: src0 + off,
                dst,
                blocks: n,
            };
            dst += n;
            e
        })
        .collect()
}

/// Splits extents into commands within the mapping's limits, keeping their order.
fn batches(m: &ChunkMapping, extents: &[CompactionExtent]) -> Vec<Vec<CompactionExtent>> {
    let mut out: Vec<Vec<CompactionExtent>> = Vec::new();
    let mut blocks = 0u64;
    for e in extents {
        let full = out.last().is_none_or(|b| {
            b.len() >= m.compaction_max_extents as usize
                || blocks + e.blocks > u64::from(m.compaction_max_blocks)
        });
        if full {
            out.push(Vec::new());
            blocks = 0;
        }
        if let Some(b) = out.last_mut() {
            b.push(*e);
            blocks += e.blocks;
        }
    }
    out
}

/// IZC: every compaction command in flight together (submitted in order, so each finds its
/// destinations at the write pointers), then Flush.
async fn izc(
    dev: &EmuDevice,
    extents: &[CompactionExtent],
    phases: &mut PhaseEnds,
) -> Result<(), NvmeStatus> {
    let m = dev.identify_mapping().ok_or(NvmeStatus::InvalidOpcode)?;
    let cmds = batches(&m, extents);
    phases.end();
    for r in join_all(cmds.iter().map(|c| dev.zone_compaction(c))).await {
        r?;
    }
    phases.end();
    dev.flush().await?;
    phases.end();
    Ok(())
}

/// One compaction of a victim with `fraction` of its blocks valid, by `method`, a host copy
/// costing the host `HOST_COPY_NS_PER_BLOCK` per block.
pub fn measure(method: Method, fraction: f64, seed: u64) -> Result<Compaction, String> {
    measure_host(method, fraction, seed, HOST_COPY_NS_PER_BLOCK)
}

/// `measure` with a host copy costing the host `host_ns` per block moved (0: nothing but
/// its commands' latencies); the IZC methods never pay it.
pub fn measure_host(
    method: Method,
    fraction: f64,
    seed: u64,
    host_ns: u32,
) -> Result<Compaction, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(async {
        let dev = device(seed)?;
        let g = dev.geometry();
        let m = dev
            .identify_mapping()
            .ok_or("the device has no ZNS+ mapping")?;
        let valid = victim_bitmap(g.zone_capacity, u64::from(m.chunk_blocks), fraction, seed);
        let err = |e: NvmeStatus| format!("znsplus-fig6 {method:?}: {e}");
        fill_victim(&dev, &g).await.map_err(err)?;
        let before = dev.timing_counters().ok_or("timing is off")?;
        let mut ph = PhaseEnds::new();
        match method {
            Method::HostCopy => host_copy(&dev, &g, (&valid, host_ns), &mut ph).await,
            Method::IzcCopybackAware => {
                izc(&dev, &copyback_aware_extents(&g, &m, &valid), &mut ph).await
            }
            Method::IzcSourceOrder => izc(&dev, &source_order_extents(&g, &valid), &mut ph).await,
        }
        .map_err(err)?;
        let time_ms = ph.t0.elapsed().as_secs_f64() * 1e3;
        let at = |i: usize| ph.ends.get(i).copied().unwrap_or(time_ms);
        let phases_ms = [at(0), at(1) - at(0), at(2) - at(1)];
        let after = dev.timing_counters().ok_or("timing is off")?;
        // Each copyback moves one whole chunk; the ratio is of blocks, since the model
        // counts a read-and-program copy per piece (a single block of a partly valid chunk
        // is one), which would weigh those copies by their number rather than their size.
        let copybacks = after.flash.copybacks - before.flash.copybacks;
        let valid_blocks = valid.iter().filter(|v| **v).count() as u64;
        let copyback_ratio = match method {
            Method::HostCopy => 0.0,
            _ => (copybacks * u64::from(m.chunk_blocks)) as f64 / valid_blocks.max(1) as f64,
        };
        Ok(Compaction {
            method,
            valid_blocks,
            time_ms,
            copyback_ratio,
            phases_ms,
        })
    })
}

/// The rows: IZC/ZNS compaction time at 25, 50 and 75% valid, the copyback-aware IZC
/// against one in source order, and the copyback ratio, each against the paper.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let host_ns = o.host_copy_ns_per_block();
    let host_us = f64::from(host_ns) / 1e3;
    for pct in [25u32, 50, 75] {
        let f = f64::from(pct) / 100.0;
        let zns = measure_host(Method::HostCopy, f, o.seed, host_ns)?;
        let aware = measure_host(Method::IzcCopybackAware, f, o.seed, host_ns)?;
        let [zr, zw, zf] = zns.phases_ms;
        let [_, iz, izf] = aware.phases_ms;
        rows.push(Row::new(
            format!(
                "znsplus-fig6 IZC / ZNS compaction time, {pct}% valid ({:.1} / {:.1} ms; ZNS read and host time ({host_us:.2} us per block) {zr:.1} + write {zw:.1} + flush {zf:.1}, IZC {iz:.1} + flush {izf:.1}; paper: mean of 5 workloads, 0.483-0.718)",
                aware.time_ms, zns.time_ms
            ),
            PAPER_IZC_OVER_ZNS,
            aware.time_ms / zns.time_ms,
        ));
        if pct != CALIBRATION_VALID_PCT {
            continue;
        }
        rows.push(Row::new(
            format!(
                "znsplus-fig6 IZC / ZNS compaction time, {pct}% valid, against the fileserver's (the host time per block, {host_us:.2} us, is calibrated to it here)"
            ),
            PAPER_FILESERVER_IZC_OVER_ZNS,
            aware.time_ms / zns.time_ms,
        ));
        let plain = measure_host(Method::IzcSourceOrder, f, o.seed, host_ns)?;
        rows.push(Row::new(
            format!(
                "znsplus-fig6 IZC copyback-aware / source order, 50% valid ({:.1} / {:.1} ms; paper: derived from Table 2)",
                aware.time_ms, plain.time_ms
            ),
            PAPER_AWARE_OVER_SOURCE_ORDER,
            aware.time_ms / plain.time_ms,
        ));
        rows.push(Row::new(
            format!(
                "znsplus-fig6 copyback ratio, copyback-aware IZC, 50% valid (source order: {:.3})",
                plain.copyback_ratio
            ),
            PAPER_COPYBACK_RATIO,
            aware.copyback_ratio,
        ));
    }
    Ok(rows)
}
