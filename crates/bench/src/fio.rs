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
//!
//! Files: `targets` (what the jobs run on), `zoned` (zoned jobs), `block` (block jobs),
//! `report` (fio's text and JSON reports, plot series), `image` (an existing device image).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use emu::timing::{timing_profile, TimingProfile};
use emu::{ClockMode, ConvSsd, EmuConfig, EmuDevice, SimRuntime};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use serde_json::{json, Value};
use tokio::time::Instant;
use zns::{
    BlockDevice, BlockError, BlockResult, Geometry, Lba, ReportFilter, ZoneAction, ZoneState,
    ZonedDevice,
};

use crate::blockload::{self, BlockJob};
use crate::jobfile::{Distribution, JobSpec, Rw};
use crate::workload::{self, Job, Limits, Pattern, Ramp, Report};

mod block;
mod image;
mod phases;
mod report;
mod targets;
mod zoned;

pub use phases::{no_probe, phases_text, Probe, Sample};
pub use report::{ftl_stats_json, latency_cdfs, throughput_series, to_json, to_text};
pub use targets::{scaled_array, spare_blocks, zone_array, ConvSizing, ConvVolume};

use block::run_block;
use targets::{conv_device, device, ftl_volume, timing_of};
use zoned::run_zoned;

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

pub(super) const PREFILL_BLOCK_BYTES: u64 = 128 * 1024;

/// Commands in flight per job at most: a bound on the driver's queues and buffers.
pub(super) const IODEPTH_MAX: u32 = 4096;

/// How long a job issues commands: its ramp and its runtime, when it has a runtime.
pub(super) fn runtime_ns(s: &JobSpec) -> Option<u64> {
    s.runtime_ms
        .map(|ms| ms.saturating_add(s.ramp_ms).saturating_mul(1_000_000))
}

pub(super) fn ramp_of(s: &JobSpec) -> Ramp {
    Ramp {
        bytes: 0,
        ns: s.ramp_ms.saturating_mul(1_000_000),
    }
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
pub(super) fn planned(bytes: impl IntoIterator<Item = u64>) -> u64 {
    bytes
        .into_iter()
        .try_fold(0u64, |sum, b| {
            (b != u64::MAX).then(|| sum.saturating_add(b))
        })
        .unwrap_or(0)
}

/// What a run produced: the jobs' results, and for a block volume its figures at the end
/// (size, flash, spare by purpose, write amplification, relocations, per-stream counts).
#[derive(Clone, Debug)]
pub struct Outcome {
    pub results: Vec<JobResult>,
    pub volume: Option<Value>,
}

/// Runs the jobs on a fresh device in a fresh `SimRuntime`, phase by phase (a job with
/// `stonewall` starts a new phase once the earlier jobs have finished).
pub fn run(specs: &[JobSpec], t: &Target) -> Result<Vec<JobResult>, String> {
    run_with_progress(specs, t, &Progress::default()).map(|o| o.results)
}

/// `run`, counting its progress into `p`, with the volume's figures.
pub fn run_with_progress(specs: &[JobSpec], t: &Target, p: &Progress) -> Result<Outcome, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    workload::count_progress_into(Some(Arc::clone(&p.done)));
    let plain = |results| Outcome {
        results,
        volume: None,
    };
    let outcome = match (t.volume, &t.image) {
        (Volume::Zns, None) => {
            rt.block_on(async { run_zoned(specs, t, &device(t)?, p).await.map(plain) })
        }
        (_, Some(path)) => rt.block_on(image::run(specs, t, path, p)).map(plain),
        (Volume::Conv { op_percent }, None) => rt.block_on(async {
            let dev = conv_device(t, op_percent).await?;
            let dies = dev.sizing().array.dies();
            let probe = || Sample {
                at: Instant::now(),
                flash: Some((dev.timing_counters(), dies)),
                ftl: None,
                ftl_counters: None,
            };
            let (results, phases) = run_block(specs, t, &dev, p, &probe).await?;
            let mut volume = dev.stats_json();
            volume["phases"] = Value::Array(phases);
            Ok(Outcome {
                results,
                volume: Some(volume),
            })
        }),
        (Volume::Ftl { op_percent }, None) => rt.block_on(async {
            let (vol, dev) = ftl_volume(t, op_percent).await?;
            let dies = dev.timing().map_or(0, |(p, _)| p.dies());
            let probe = || Sample {
                at: Instant::now(),
                flash: dev.timing_counters().map(|c| (c, dies)),
                ftl: Some(vol.activity()),
                ftl_counters: Some(vol.counters()),
            };
            let ran = run_block(specs, t, vol.as_ref(), p, &probe).await;
            let stats = vol.stats();
            vol.unmount()
                .await
                .map_err(|e| format!("unmounting the volume: {e}"))?;
            let (results, phases) = ran?;
            let mut volume = ftl_stats_json(&stats);
            volume["phases"] = Value::Array(phases);
            Ok(Outcome {
                results,
                volume: Some(volume),
            })
        }),
    };
    workload::count_progress_into(None);
    outcome
}

/// Runs zoned jobs on `dev`, any zoned device (a real drive through zlinux), on the caller's
/// runtime: in real time when that runtime's clock is the wall clock, with no timing model.
/// Only `t.seed` of the target is used (the random offsets); the device is what it is.
pub async fn run_zoned_on(
    specs: &[JobSpec],
    t: &Target,
    dev: &dyn ZonedDevice,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    workload::count_progress_into(Some(Arc::clone(&p.done)));
    let results = run_zoned(specs, t, dev, p).await;
    workload::count_progress_into(None);
    results
}

/// Runs block jobs on `vol`, any block volume (the host FTL mounted on a real drive), on the
/// caller's runtime: in real time when that runtime's clock is the wall clock, with no timing
/// model. Returns the jobs' results and each phase's figures from `probe` (say the FTL's
/// activity; `no_probe` for none). Only `t.seed` of the target is used (the random offsets);
/// the volume is what it is, and the jobs overwrite its data as fio overwrites a device.
pub async fn run_block_on(
    specs: &[JobSpec],
    t: &Target,
    vol: &dyn BlockDevice,
    p: &Progress,
    probe: Probe<'_>,
) -> Result<(Vec<JobResult>, Vec<Value>), String> {
    workload::count_progress_into(Some(Arc::clone(&p.done)));
    let results = run_block(specs, t, vol, p, probe).await;
    workload::count_progress_into(None);
    results
}

pub(super) fn job_seed(t: &Target, i: usize) -> u64 {
    t.seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407)
}
