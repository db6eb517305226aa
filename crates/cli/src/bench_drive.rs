//! `zonestack bench JOBFILE --device /dev/nvme0n2`: fio jobs on a real zoned block device, in
//! real time. The runners are the emulator's (`bench::fio`), so the same job file measures
//! both: zoned jobs (`--target zns`) on the drive's zones, block jobs (`--target ftl`) on the
//! host FTL volume `zonestack ftl format` made on the drive. On a drive there is no timing
//! model, the clock is the wall clock, and the figures are what the drive (and the kernel in
//! front of it) delivered.
//!
//! Safety: zoned jobs reset and overwrite the zones they use, so a drive holding data is
//! refused unless --force, as `ftl format` and `device check` refuse it; block jobs overwrite
//! the volume's blocks, so a volume holding data (any mapped block) is refused unless
//! --force, and a drive without a volume is refused naming `zonestack ftl format`.

use std::path::Path;
use std::sync::Arc;

use bench::fio::{JobResult, Progress, Target, Volume};
use bench::jobfile::JobSpec;
use ftl::{FtlVolume, MountOptions};
use serde_json::Value;
use zns::ZonedDevice;

use crate::bench_jobfile::BenchJobArgs;
use crate::cmd_ftl::volume_error;
use crate::error::CliError;
use crate::opened::{open_drive, used_zone_among, Opened};

/// What a run on a drive produced: the jobs' results, and for the FTL its figures at the end.
pub type DriveOutcome = (Vec<JobResult>, Option<Value>);

/// Refuses what does not apply to a drive, before it is opened; returns the volume to run on.
fn check_args(a: &BenchJobArgs, path: &Path) -> Result<Volume, CliError> {
    let volume = match a.target.as_str() {
        "zns" => Volume::Zns,
        "ftl" => Volume::Ftl { op_percent: a.op },
        t => {
            return Err(CliError::Usage(format!(
                "--target {t} does not run on a drive; {} takes zoned jobs (--target zns) or block jobs on its FTL volume (--target ftl)",
                path.display()
            )))
        }
    };
    if a.size.is_some() {
        return Err(CliError::Usage(
            "--size does not apply with --device: the drive has its own size".into(),
        ));
    }
    if a.plot.is_some() {
        return Err(CliError::Usage(
            "--plot draws virtual time; it does not apply to a drive".into(),
        ));
    }
    Ok(volume)
}

/// Runs `specs` on the drive at `path` and returns the jobs' results (and the FTL's figures
/// for block jobs).
pub fn run(a: &BenchJobArgs, path: &Path, specs: Vec<JobSpec>) -> Result<DriveOutcome, CliError> {
    let volume = check_args(a, path)?;
    let shown = path.display().to_string();
    for s in specs.iter() {
        if let Some(f) = s.filename.as_ref().filter(|f| **f != shown) {
            eprintln!(
                "zonestack: job '{}': filename={f} is not opened; the job runs on {shown}",
                s.name
            );
        }
    }
    eprintln!("zonestack: running on the drive {shown} in real time (no timing model; --profile does not apply)");
    let target = Target {
        profile: a.profile.clone(),
        size_bytes: None,
        seed: a.seed,
        volume,
        image: None,
    };
    let (path, force) = (path.to_path_buf(), a.force);
    // The command line runs on a current-thread runtime already; the jobs get their own, on
    // their own thread, with the wall clock.
    let runner = std::thread::spawn(move || -> Result<DriveOutcome, CliError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::Other(format!("cannot start a runtime: {e}")))?;
        rt.block_on(async {
            match volume {
                Volume::Zns => zoned(&specs, &target, &path, force).await,
                _ => on_ftl(&specs, &target, &path, force).await,
            }
        })
    });
    runner
        .join()
        .map_err(|_| CliError::Other("the benchmark thread panicked".into()))?
}

/// Zoned jobs on the drive's zones.
async fn zoned(
    specs: &[JobSpec],
    target: &Target,
    path: &Path,
    force: bool,
) -> Result<DriveOutcome, CliError> {
    let dev = open_drive(path)?;
    if !force {
        if let Some(why) = used_zone_among(&dev, |_| true).await? {
            return Err(CliError::Other(format!(
                "{}: {why}: the jobs reset and overwrite the zones they use; pass --force to run them anyway",
                path.display()
            )));
        }
    }
    // A job the drive fails is the drive's answer, not a usage error.
    let results = bench::fio::run_zoned_on(specs, target, &dev, &Progress::default())
        .await
        .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?;
    Ok((results, None))
}

/// Block jobs on the FTL volume of the drive: mounted as `zonestack ftl mount` mounts it
/// (relocating by host read and write where the drive has no Simple Copy), the jobs run, and
/// the volume is unmounted (checkpointed) whether or not they succeeded.
async fn on_ftl(
    specs: &[JobSpec],
    target: &Target,
    path: &Path,
    force: bool,
) -> Result<DriveOutcome, CliError> {
    let dev = Arc::new(Opened::Drive(open_drive(path)?));
    ftl::probe(dev.as_ref())
        .await
        .map_err(|e| volume_error(path, e))?;
    let opts = dev.fit_mount_options(MountOptions::default())?;
    let zoned: Arc<dyn ZonedDevice> = dev;
    let (vol, _) = FtlVolume::mount(zoned, opts)
        .await
        .map_err(|e| volume_error(path, e))?;
    let mapped = vol.stats().mapped_blocks;
    let ran = if mapped > 0 && !force {
        Err(CliError::Other(format!(
            "{}: the FTL volume holds data ({mapped} blocks mapped): the jobs overwrite it; pass --force to run them anyway",
            path.display()
        )))
    } else {
        let probe = || bench::fio::Sample {
            ftl: Some(vol.activity()),
            ftl_counters: Some(vol.counters()),
            ..bench::fio::no_probe()
        };
        let p = Progress::default();
        bench::fio::run_block_on(specs, target, vol.as_ref(), &p, &probe)
            .await
            .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))
    };
    let stats = vol.stats();
    let unmounted = vol
        .unmount()
        .await
        .map_err(|e| CliError::Other(format!("unmounting the volume on {}: {e}", path.display())));
    let (results, phases) = ran?;
    unmounted?;
    let mut figures = bench::fio::ftl_stats_json(&stats);
    figures["phases"] = Value::Array(phases);
    Ok((results, Some(figures)))
}
