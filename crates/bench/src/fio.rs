//! Runs parsed fio jobs (`jobfile::JobSpec`) in virtual time on a volume of the timing model:
//! the emulated ZNS drive itself (zoned jobs, through the same workload driver as the paper
//! reproductions), a conventional SSD on the same flash, or the host FTL on the emulated ZNS
//! drive (block jobs, through `blockload`), and prints the results as fio does: a text report
//! or fio's JSON shape. `Target::image` runs the jobs on an existing device image instead
//! (`fio/image.rs`).
//!
//! A block job works as fio's on a block device: every clone of `numjobs` covers the job's
//! whole `[offset, offset + size)` range. Jobs that read have their range written once before
//! their phase starts (as fio lays out a file before reading it), so reads reach the flash.
//!
//! How a zoned job maps onto the driver: each of the `numjobs` clones takes every
//! `numjobs`-th zone of the job's region. A Zone Write clone keeps `min(iodepth,
//! max_open_zones)` zones in flight with one write each (the host keeps writes in order per
//! zone); a Zone Append clone spreads `iodepth` appends over `max_open_zones` zones (default
//! 1). A job that needs more room than its zones resets them and starts over, as fio does.
//! Read jobs first fill the zones they read, so that every read hits written data. Before a
//! phase, the zones its write jobs will write are reset if they hold data (an image's, or an
//! earlier phase's), as fio resets the zones of a zoned device it writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use emu::timing::{timing_profile, TimingProfile};
use emu::{ClockMode, ConvSsd, EmuConfig, EmuDevice, SimRuntime};
use ftl::{FormatOptions, FtlVolume, Layout, MountOptions};
use serde_json::{json, Value};
use tokio::time::Instant;
use zns::{BlockDevice, Geometry, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use crate::blockload::{self, BlockJob};
use crate::jobfile::{Distribution, JobSpec, Rw};
use crate::workload::{self, Job, Limits, Pattern, Ramp, Report};

mod image;

/// What the jobs run on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Volume {
    /// The emulated ZNS drive: zoned jobs (`zonemode=zbd`).
    Zns,
    /// A conventional SSD on the profile's flash, with this much spare flash in percent of
    /// its capacity and device-side garbage collection: block jobs.
    Conv { op_percent: f64 },
    /// The host FTL on the emulated ZNS drive, formatted with this over-provisioning in
    /// percent: block jobs.
    Ftl { op_percent: f64 },
}

/// The device the jobs run on.
#[derive(Clone, Debug)]
pub struct Target {
    /// Geometry and timing profile name (`zn540`).
    pub profile: String,
    /// For `Volume::Zns` the device size in bytes, rounded up to whole zones (`None`: 40
    /// zones, the paper reproductions' device); for the block volumes their size (`None`:
    /// 4 GiB).
    pub size_bytes: Option<u64>,
    pub seed: u64,
    pub volume: Volume,
    /// An existing emulated device image to run on instead of a fresh in-memory device: the
    /// geometry is the image's, the profile gives only the timing, and the jobs overwrite the
    /// image's data. With `Volume::Ftl` the image must hold a formatted volume; `size_bytes`
    /// must be `None` and `Volume::Conv` is refused.
    pub image: Option<std::path::PathBuf>,
}

/// One reported job: a job of the file, or one clone of it without `group_reporting`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobResult {
    pub name: String,
    pub read: Report,
    pub write: Report,
    pub block_bytes: u64,
    /// When each command completed, in nanoseconds of virtual time since the run started.
    pub done_ns: Vec<u64>,
    /// Latencies of the reads and of the writes measured after the ramp, sorted (ns).
    pub read_latencies_ns: Vec<u64>,
    pub write_latencies_ns: Vec<u64>,
}

const DEFAULT_ZONES: u32 = 40;
const DEFAULT_VOLUME_BYTES: u64 = 4 << 30;
const PREFILL_BLOCK_BYTES: u64 = 128 * 1024;

fn device(t: &Target) -> Result<EmuDevice, String> {
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

/// Why a job cannot run here, if it cannot.
fn check(s: &JobSpec) -> Result<(), String> {
    let refuse = |what: &str| Err(format!("job '{}' (line {}): {what}", s.name, s.line));
    if !s.zoned {
        return refuse(
            "the ZNS drive takes zoned jobs only: add zonemode=zbd, or run block jobs on a volume (--target ftl or --target conv)",
        );
    }
    if matches!(s.rw, Rw::ReadWrite | Rw::RandRw) {
        return refuse(
            "readwrite and randrw are not supported on zones; run them on a volume (--target ftl or --target conv)",
        );
    }
    if s.percentage_random != 100 && s.rw != Rw::RandRead {
        return refuse("percentage_random below 100 needs rw=randread");
    }
    if s.distribution != Distribution::Random && s.rw != Rw::RandRead {
        return refuse(
            "random_distribution=zipf needs rw=randread (zoned writes go to the write pointer)",
        );
    }
    if s.time_based && s.runtime_ms.is_none() {
        return refuse("time_based needs a runtime");
    }
    if s.zone_append && !s.rw.writes() {
        return refuse("zone_append=1 needs a write job");
    }
    Ok(())
}

/// Commands in flight per job at most: a bound on the driver's queues and buffers.
const IODEPTH_MAX: u32 = 4096;

/// Why the job's block size or queue depth does not fit the device, if it does not.
fn check_sizes(s: &JobSpec, g: &Geometry) -> Result<(), String> {
    let block = u64::from(g.block_size);
    let cap_bytes = g.zone_capacity * block;
    if !s.block_bytes.is_multiple_of(block) || s.block_bytes > cap_bytes {
        return Err(format!(
            "job '{}' (line {}): bs={} is not a multiple of the {block}-byte block size up to the {cap_bytes}-byte zone capacity",
            s.name, s.line, s.block_bytes
        ));
    }
    if s.iodepth > IODEPTH_MAX {
        return Err(format!(
            "job '{}' (line {}): iodepth={} is above the limit of {IODEPTH_MAX}",
            s.name, s.line, s.iodepth
        ));
    }
    Ok(())
}

/// The zones of a job's region, `[offset, offset + size)` rounded out to whole zones.
fn region(s: &JobSpec, g: &Geometry) -> Result<Vec<u32>, String> {
    let zone_bytes = g.zone_size * u64::from(g.block_size);
    let device_bytes = zone_bytes * u64::from(g.zone_count);
    let end = s
        .offset_bytes
        .saturating_add(s.size_bytes.unwrap_or(device_bytes))
        .min(device_bytes);
    let first = s.offset_bytes / zone_bytes;
    let last = end.div_ceil(zone_bytes);
    if first >= last {
        return Err(format!(
            "job '{}': offset {} is past the end of the {device_bytes}-byte device",
            s.name, s.offset_bytes
        ));
    }
    Ok((first..last)
        .filter_map(|z| u32::try_from(z).ok())
        .collect())
}

/// Every `n`-th element of `v`, starting at `k`.
fn stride(v: &[u32], k: usize, n: usize) -> Vec<u32> {
    v.iter().skip(k).step_by(n.max(1)).copied().collect()
}

/// The driver jobs of one clone, and the bytes its reads need written first (per zone).
fn clone_jobs(s: &JobSpec, g: &Geometry, zones: &[u32], seed: u64) -> (Vec<Job>, u64) {
    let cap_bytes = g.zone_capacity * u64::from(g.block_size);
    let capacity = cap_bytes * zones.len() as u64;
    let io = s.io_size_bytes.or(s.size_bytes).unwrap_or(capacity);
    let bytes = if s.time_based { u64::MAX } else { io };
    let (pattern, subjobs, qd) = match (s.rw.writes(), s.zone_append) {
        (true, false) => {
            let open = s.max_open_zones.unwrap_or(s.iodepth).min(s.iodepth);
            (Pattern::Write, open, 1)
        }
        (true, true) => {
            let open = s.max_open_zones.unwrap_or(1);
            (Pattern::Append, open, s.iodepth.div_ceil(open))
        }
        (false, _) if s.rw.random() => (Pattern::RandRead, 1, s.iodepth),
        (false, _) => (Pattern::SeqRead, 1, s.iodepth),
    };
    let n = (subjobs as usize).clamp(1, zones.len().max(1));
    let extent = if pattern == Pattern::Write || pattern == Pattern::Append {
        0
    } else {
        (io / zones.len().max(1) as u64).clamp(s.block_bytes, cap_bytes)
    };
    let jobs = (0..n)
        .map(|k| {
            let mine = stride(zones, k, n);
            let my_bytes = if bytes == u64::MAX {
                bytes
            } else {
                bytes / n as u64
            };
            Job {
                pattern,
                block_bytes: s.block_bytes,
                queue_depth: qd,
                bytes: my_bytes,
                read_extent_bytes: extent,
                seed: seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                random_percent: s.percentage_random,
                zipf_theta: match s.distribution {
                    Distribution::Zipf(theta) => Some(theta),
                    Distribution::Random => None,
                },
                limits: Limits {
                    wrap: my_bytes > cap_bytes * mine.len() as u64,
                    runtime_ns: runtime_ns(s),
                    rate_bytes_per_sec: s.rate_bytes_per_sec.map(|r| (r / n as u64).max(1)),
                },
                zones: mine,
            }
        })
        .collect();
    (jobs, extent)
}

/// How long a job issues commands: its ramp and its runtime, when it has a runtime.
fn runtime_ns(s: &JobSpec) -> Option<u64> {
    s.runtime_ms
        .map(|ms| ms.saturating_add(s.ramp_ms).saturating_mul(1_000_000))
}

fn ramp_of(s: &JobSpec) -> Ramp {
    Ramp {
        bytes: 0,
        ns: s.ramp_ms.saturating_mul(1_000_000),
    }
}

/// A report group: the reported name, its driver jobs, and whether it writes.
struct Group {
    name: String,
    jobs: Vec<Job>,
    ramp: Ramp,
    writes: bool,
    block_bytes: u64,
    /// Zones to fill, and how many bytes of each, before the reads start.
    prefill: Vec<(u32, u64)>,
}

fn groups_of(s: &JobSpec, g: &Geometry, seed: u64) -> Result<Vec<Group>, String> {
    check(s)?;
    check_sizes(s, g)?;
    let zones = region(s, g)?;
    let clones = s.numjobs as usize;
    if clones > zones.len() {
        return Err(format!(
            "job '{}': numjobs={clones} needs at least as many zones, its region has {}",
            s.name,
            zones.len()
        ));
    }
    let mut out: Vec<Group> = Vec::new();
    for c in 0..clones {
        let mine = stride(&zones, c, clones);
        let (jobs, extent) = clone_jobs(s, g, &mine, seed ^ (c as u64) << 32);
        let prefill = if extent > 0 {
            mine.iter().map(|z| (*z, extent)).collect()
        } else {
            Vec::new()
        };
        match out.last_mut() {
            Some(grp) if s.group_reporting => {
                grp.jobs.extend(jobs);
                grp.prefill.extend(prefill);
            }
            _ => out.push(Group {
                name: s.name.clone(),
                jobs,
                ramp: ramp_of(s),
                writes: s.rw.writes(),
                block_bytes: s.block_bytes,
                prefill,
            }),
        }
    }
    Ok(out)
}

async fn prefill(dev: &EmuDevice, groups: &[Group]) -> Result<(), String> {
    let fill: Vec<Job> = groups
        .iter()
        .flat_map(|grp| &grp.prefill)
        .map(|(zone, bytes)| Job {
            pattern: Pattern::Write,
            zones: vec![*zone],
            block_bytes: PREFILL_BLOCK_BYTES,
            queue_depth: 1,
            bytes: *bytes,
            read_extent_bytes: 0,
            seed: 0,
            random_percent: 100,
            zipf_theta: None,
            limits: Limits::default(),
        })
        .collect();
    if fill.is_empty() {
        return Ok(());
    }
    let err = |e: zns::NvmeStatus| format!("filling the zones to read: {e}");
    // An earlier phase may have written these zones; the reads only need written data, so
    // start them over rather than track where each write pointer stands.
    let g = dev.geometry();
    for j in &fill {
        for z in &j.zones {
            dev.zone_mgmt(ZoneAction::Reset, g.zone_start(*z), false)
                .await
                .map_err(err)?;
        }
    }
    workload::run(dev, &fill, 0).await.map_err(err)?;
    dev.flush().await.map_err(err)
}

/// Resets the zones that the phase's writing jobs write and that already hold data (an
/// image's, or an earlier phase's): the jobs write from the start of each zone, as fio
/// resets the zones of a zoned device before writing them.
async fn empty_written_zones(dev: &EmuDevice, groups: &[Group]) -> Result<(), String> {
    let g = dev.geometry();
    let err = |e: zns::NvmeStatus| format!("emptying the zones to write: {e}");
    let zones = groups
        .iter()
        .filter(|grp| grp.writes)
        .flat_map(|grp| grp.jobs.iter().flat_map(|j| j.zones.iter().copied()));
    for z in zones {
        let start = g.zone_start(z);
        let report = dev
            .report_zones(start, ReportFilter::All, true, 1)
            .await
            .map_err(err)?;
        let state = report.zones.first().map(|d| d.state);
        if state != Some(ZoneState::Empty) {
            dev.zone_mgmt(ZoneAction::Reset, start, false)
                .await
                .map_err(err)?;
        }
    }
    Ok(())
}

/// Runs one stonewall phase: its groups concurrently.
async fn phase(
    dev: &EmuDevice,
    groups: Vec<Group>,
    origin: Instant,
) -> Result<Vec<JobResult>, String> {
    empty_written_zones(dev, &groups).await?;
    prefill(dev, &groups).await?;
    let slices: Vec<&[Job]> = groups.iter().map(|grp| grp.jobs.as_slice()).collect();
    let ramps: Vec<Ramp> = groups.iter().map(|grp| grp.ramp).collect();
    let offset_ns = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let reports = workload::run_groups_traced(dev, &slices, &ramps)
        .await
        .map_err(|e| format!("a job failed: {e}"))?;
    Ok(groups
        .iter()
        .zip(reports)
        .map(|(grp, t)| {
            let (r, lat) = (t.report, t.latencies_ns);
            let (read, write, read_lat, write_lat) = if grp.writes {
                (Report::default(), r, Vec::new(), lat)
            } else {
                (r, Report::default(), lat, Vec::new())
            };
            JobResult {
                name: grp.name.clone(),
                read,
                write,
                block_bytes: grp.block_bytes,
                done_ns: t
                    .done_ns
                    .iter()
                    .map(|t| t.saturating_add(offset_ns))
                    .collect(),
                read_latencies_ns: read_lat,
                write_latencies_ns: write_lat,
            }
        })
        .collect())
}

/// Jobs that run at the same time must not share zones: one's writes would move the other's
/// write pointer, and the device would fail them with a status that names neither job.
fn refuse_shared_zones(running: &[Group], new: &[Group]) -> Result<(), String> {
    let zones = |g: &Group| -> Vec<u32> { g.jobs.iter().flat_map(|j| j.zones.clone()).collect() };
    for n in new {
        let mine = zones(n);
        for r in running {
            if let Some(z) = zones(r).iter().find(|z| mine.contains(z)) {
                return Err(format!(
                    "jobs '{}' and '{}' run at the same time on zone {z}; give them different offset= ranges or separate them with stonewall",
                    r.name, n.name
                ));
            }
        }
    }
    Ok(())
}

/// How far a run has got, for a progress bar on another thread: the bytes its commands have
/// completed (the writes that lay out what jobs read included), and the bytes it will move in
/// all, once known (0 while unknown, and for runs with a time-based job).
#[derive(Debug, Default)]
pub struct Progress {
    pub done: Arc<AtomicU64>,
    pub total: AtomicU64,
}

/// The sum of planned byte counts, or 0 (unknown) if any is unbounded.
fn planned(bytes: impl IntoIterator<Item = u64>) -> u64 {
    bytes
        .into_iter()
        .try_fold(0u64, |sum, b| {
            (b != u64::MAX).then(|| sum.saturating_add(b))
        })
        .unwrap_or(0)
}

/// Runs the jobs on a fresh device in a fresh `SimRuntime`, phase by phase (a job with
/// `stonewall` starts a new phase once the earlier jobs have finished).
pub fn run(specs: &[JobSpec], t: &Target) -> Result<Vec<JobResult>, String> {
    run_with_progress(specs, t, &Progress::default())
}

/// `run`, counting its progress into `p`.
pub fn run_with_progress(
    specs: &[JobSpec],
    t: &Target,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    workload::count_progress_into(Some(Arc::clone(&p.done)));
    let results = match (t.volume, &t.image) {
        (Volume::Zns, None) => rt.block_on(async { run_zoned(specs, t, &device(t)?, p).await }),
        (_, Some(path)) => rt.block_on(image::run(specs, t, path, p)),
        (Volume::Conv { op_percent }, None) => rt.block_on(async {
            let dev = conv_device(t, op_percent)?;
            run_block(specs, t, &dev, p).await
        }),
        (Volume::Ftl { op_percent }, None) => rt.block_on(async {
            let vol = ftl_volume(t, op_percent).await?;
            let results = run_block(specs, t, vol.as_ref(), p).await;
            vol.unmount()
                .await
                .map_err(|e| format!("unmounting the volume: {e}"))?;
            results
        }),
    };
    workload::count_progress_into(None);
    results
}

async fn run_zoned(
    specs: &[JobSpec],
    t: &Target,
    dev: &EmuDevice,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    let g = dev.geometry();
    let mut phases: Vec<Vec<Group>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let groups = groups_of(s, &g, job_seed(t, i))?;
        match phases.last_mut() {
            Some(p) if !s.stonewall => {
                refuse_shared_zones(p, &groups)?;
                p.extend(groups)
            }
            _ => phases.push(groups),
        }
    }
    let groups = phases.iter().flatten();
    p.total.store(
        planned(groups.flat_map(|g| {
            let fill = g.prefill.iter().map(|(_, b)| *b);
            g.jobs.iter().map(|j| j.bytes).chain(fill)
        })),
        Ordering::Relaxed,
    );
    let mut results = Vec::new();
    let origin = Instant::now();
    for ph in phases {
        results.extend(phase(dev, ph, origin).await?);
    }
    Ok(results)
}

fn job_seed(t: &Target, i: usize) -> u64 {
    t.seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407)
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

fn timing_of(t: &Target) -> Result<TimingProfile, String> {
    timing_profile(&t.profile).ok_or_else(|| format!("profile '{}' has no timing model", t.profile))
}

/// A conventional SSD of `size_bytes` (default 4 GiB) with `op_percent` spare flash.
fn conv_device(t: &Target, op_percent: f64) -> Result<ConvSsd, String> {
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
async fn ftl_volume(t: &Target, op_percent: f64) -> Result<Arc<FtlVolume>, String> {
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
    // The fewest zones whose layout holds the volume, searched up to twice the data zones
    // the volume needs plus room for checkpoints and streams; past that, the last refusal.
    let least = 6.max(g.max_open).max(g.max_active);
    let data_zones = blocks.div_ceil(g.zone_capacity.saturating_sub(1).max(1));
    let most = u32::try_from(data_zones.saturating_mul(2))
        .unwrap_or(u32::MAX)
        .saturating_add(least)
        .saturating_add(64);
    let layout_with = |zones: u32| {
        let geometry = Geometry {
            zone_count: zones,
            ..g
        };
        Layout::new(geometry, op_permille, ftl::layout::RESERVE_ZONES_DEFAULT)
    };
    let layout = match (least..most)
        .find_map(|z| layout_with(z).ok().filter(|l| l.volume_blocks >= blocks))
    {
        Some(l) => l,
        None => layout_with(most).map_err(|e| e.to_string())?,
    };
    if layout.volume_blocks < blocks {
        return Err(format!(
            "no layout of up to {most} zones holds a {bytes}-byte volume"
        ));
    }
    g.zone_count = layout.geometry.zone_count;
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

/// One report group of block jobs, and the range its reads need written first.
struct BlockGroup {
    name: String,
    jobs: Vec<BlockJob>,
    ramp: Ramp,
    block_bytes: u64,
    fill: Option<(u64, u64)>,
}

/// Why a job cannot run on a block volume, if it cannot.
fn check_block(s: &JobSpec, block_size: u32) -> Result<(), String> {
    let refuse = |what: String| Err(format!("job '{}' (line {}): {what}", s.name, s.line));
    if s.zoned || s.zone_append || s.max_open_zones.is_some() {
        return refuse(
            "zonemode=zbd, zone_append and max_open_zones need the ZNS drive (--target zns)".into(),
        );
    }
    if s.time_based && s.runtime_ms.is_none() {
        return refuse("time_based needs a runtime".into());
    }
    let bs = u64::from(block_size);
    if !s.block_bytes.is_multiple_of(bs) || s.block_bytes > 64 << 20 {
        return refuse(format!(
            "bs={} is not a multiple of the {bs}-byte block size up to 64 MiB",
            s.block_bytes
        ));
    }
    if !s.offset_bytes.is_multiple_of(bs) {
        return refuse(format!(
            "offset={} is not a multiple of the {bs}-byte block size",
            s.offset_bytes
        ));
    }
    if s.iodepth > IODEPTH_MAX {
        return refuse(format!(
            "iodepth={} is above the limit of {IODEPTH_MAX}",
            s.iodepth
        ));
    }
    Ok(())
}

fn block_groups_of(
    s: &JobSpec,
    dev: &dyn BlockDevice,
    seed: u64,
) -> Result<Vec<BlockGroup>, String> {
    check_block(s, dev.block_size())?;
    let bs = u64::from(dev.block_size());
    let device_bytes = dev.size_blocks() * bs;
    let end = s
        .offset_bytes
        .saturating_add(s.size_bytes.unwrap_or(device_bytes))
        .min(device_bytes);
    let range_bytes = end.saturating_sub(s.offset_bytes) / s.block_bytes * s.block_bytes;
    if range_bytes == 0 {
        return Err(format!(
            "job '{}' (line {}): offset {} and size leave no room for one bs={} command on the {device_bytes}-byte volume",
            s.name, s.line, s.offset_bytes, s.block_bytes
        ));
    }
    let (first_lba, blocks) = (s.offset_bytes / bs, range_bytes / bs);
    let read_percent = match s.rw {
        Rw::Read | Rw::RandRead => 100,
        Rw::Write | Rw::RandWrite => 0,
        Rw::ReadWrite | Rw::RandRw => s.rwmixread,
    };
    let job = |c: u64| BlockJob {
        first_lba,
        blocks,
        block_bytes: s.block_bytes,
        queue_depth: s.iodepth,
        bytes: if s.time_based {
            u64::MAX
        } else {
            s.io_size_bytes.or(s.size_bytes).unwrap_or(range_bytes)
        },
        read_percent,
        random_percent: if s.rw.random() {
            s.percentage_random
        } else {
            0
        },
        zipf_theta: match s.distribution {
            Distribution::Zipf(theta) => Some(theta),
            Distribution::Random => None,
        },
        seed: seed ^ c.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        runtime_ns: runtime_ns(s),
        rate_bytes_per_sec: s.rate_bytes_per_sec,
    };
    let group = |jobs| BlockGroup {
        name: s.name.clone(),
        jobs,
        ramp: ramp_of(s),
        block_bytes: s.block_bytes,
        fill: (read_percent > 0).then_some((first_lba, blocks)),
    };
    let clones = (0..u64::from(s.numjobs)).map(job);
    Ok(if s.group_reporting {
        vec![group(clones.collect())]
    } else {
        clones.map(|j| group(vec![j])).collect()
    })
}

/// The ranges a phase's reading groups need written first, each once.
fn distinct_fills(groups: &[BlockGroup]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for range in groups.iter().filter_map(|g| g.fill) {
        if !out.contains(&range) {
            out.push(range);
        }
    }
    out
}

/// Runs one stonewall phase of block jobs: their reads' ranges written first, then the
/// groups concurrently.
async fn block_phase(
    dev: &dyn BlockDevice,
    groups: Vec<BlockGroup>,
    origin: Instant,
) -> Result<Vec<JobResult>, String> {
    for (first, blocks) in distinct_fills(&groups) {
        blockload::fill(dev, first, blocks, PREFILL_BLOCK_BYTES, 8)
            .await
            .map_err(|e| format!("writing the range to read: {e}"))?;
    }
    let slices: Vec<&[BlockJob]> = groups.iter().map(|g| g.jobs.as_slice()).collect();
    let ramps: Vec<Ramp> = groups.iter().map(|g| g.ramp).collect();
    let offset_ns = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let reports = blockload::run_groups(dev, &slices, &ramps)
        .await
        .map_err(|e| format!("a job failed: {e}"))?;
    Ok(groups
        .iter()
        .zip(reports)
        .map(|(grp, r)| JobResult {
            name: grp.name.clone(),
            read: r.read,
            write: r.write,
            block_bytes: grp.block_bytes,
            done_ns: r
                .done_ns
                .iter()
                .map(|t| t.saturating_add(offset_ns))
                .collect(),
            read_latencies_ns: r.read_latencies_ns,
            write_latencies_ns: r.write_latencies_ns,
        })
        .collect())
}

async fn run_block(
    specs: &[JobSpec],
    t: &Target,
    dev: &dyn BlockDevice,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    let mut phases: Vec<Vec<BlockGroup>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let groups = block_groups_of(s, dev, job_seed(t, i))?;
        match phases.last_mut() {
            Some(ph) if !s.stonewall => ph.extend(groups),
            _ => phases.push(groups),
        }
    }
    let bs = u64::from(dev.block_size());
    let fills = phases
        .iter()
        .flat_map(|ph| distinct_fills(ph))
        .map(|(_, n)| n * bs);
    let jobs = phases
        .iter()
        .flatten()
        .flat_map(|g| g.jobs.iter().map(|j| j.bytes));
    p.total.store(planned(jobs.chain(fills)), Ordering::Relaxed);
    let mut results = Vec::new();
    let origin = Instant::now();
    for ph in phases {
        results.extend(block_phase(dev, ph, origin).await?);
    }
    Ok(results)
}

fn direction_json(r: &Report) -> Value {
    let ns = |us: f64| (us * 1000.0).round() as u64;
    json!({
        "io_bytes": r.bytes,
        "bw": (r.mib_per_sec * 1024.0).round() as u64,
        "iops": r.iops,
        "runtime": (r.seconds * 1000.0).round() as u64,
        "lat_ns": {
            "mean": r.mean_latency_us * 1000.0,
            "percentile": {
                "50.000000": ns(r.latency_p50_us),
                "99.000000": ns(r.latency_p99_us),
                "99.900000": ns(r.latency_p999_us),
            },
        },
    })
}

/// The results in fio's `--output-format=json` shape (the fields this runner measures).
pub fn to_json(results: &[JobResult]) -> Value {
    let jobs: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "jobname": r.name,
                "read": direction_json(&r.read),
                "write": direction_json(&r.write),
            })
        })
        .collect();
    json!({ "jobs": jobs })
}

/// The results as a text report in the manner of fio's.
pub fn to_text(results: &[JobResult]) -> String {
    let mut s = String::new();
    for r in results {
        s.push_str(&format!("{}:\n", r.name));
        for (dir, rep) in [("read", &r.read), ("write", &r.write)] {
            if rep.ops == 0 {
                continue;
            }
            s.push_str(&format!(
                "  {dir}: IOPS={:.0}, BW={:.1}MiB/s ({} MiB/{:.0}msec)\n",
                rep.iops,
                rep.mib_per_sec,
                rep.bytes >> 20,
                rep.seconds * 1000.0
            ));
            s.push_str(&format!(
                "    lat (usec): avg={:.2}, p50={:.2}, p99={:.2}, p99.9={:.2}\n",
                rep.mean_latency_us, rep.latency_p50_us, rep.latency_p99_us, rep.latency_p999_us
            ));
        }
    }
    s
}

/// Each job's latency distribution per direction it measured: up to `points` + 1 points of
/// (latency in microseconds, fraction of commands at most that slow), named "JOB read" or
/// "JOB write".
pub fn latency_cdfs(results: &[JobResult], points: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    let n = points.max(1);
    let mut out = Vec::new();
    for r in results {
        for (dir, lat) in [
            ("read", &r.read_latencies_ns),
            ("write", &r.write_latencies_ns),
        ] {
            if lat.is_empty() {
                continue;
            }
            let cdf = (0..=n)
                .map(|q| {
                    let i = q * (lat.len() - 1) / n;
                    let us = lat.get(i).copied().unwrap_or(0) as f64 / 1000.0;
                    (us, (i + 1) as f64 / lat.len() as f64)
                })
                .collect();
            out.push((format!("{} {dir}", r.name), cdf));
        }
    }
    out
}

/// Each job's throughput over time in MiB/s: `buckets` equal intervals from the start of the
/// run to its last completion, as (interval end in seconds, MiB/s) points.
pub fn throughput_series(results: &[JobResult], buckets: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    let end_ns = results
        .iter()
        .filter_map(|r| r.done_ns.iter().max())
        .max()
        .copied()
        .unwrap_or(0)
        .max(1);
    let n = buckets.max(1);
    let width_ns = end_ns.div_ceil(n as u64).max(1);
    let width_s = width_ns as f64 / 1e9;
    results
        .iter()
        .map(|r| {
            let mut bytes = vec![0u64; n];
            for t in &r.done_ns {
                let i = usize::try_from(t / width_ns).unwrap_or(n - 1).min(n - 1);
                if let Some(b) = bytes.get_mut(i) {
                    *b += r.block_bytes;
                }
            }
            let points = bytes
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    (
                        (i + 1) as f64 * width_s,
                        *b as f64 / (1u64 << 20) as f64 / width_s,
                    )
                })
                .collect();
            (r.name.clone(), points)
        })
        .collect()
}
