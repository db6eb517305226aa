//! `zonestack bench JOBFILE --device /dev/nvme0n2`: zoned fio jobs on a real zoned block
//! device, in real time. The runner is the emulator's (`bench::fio`), so the same job file
//! measures both; on a drive there is no timing model, the clock is the wall clock, and the
//! figures are what the drive (and the kernel in front of it) delivered.
//!
//! Safety: the jobs reset and overwrite the zones they use, so a drive holding data is
//! refused unless --force, as `ftl format` and `device check` refuse it.

use std::path::Path;

use bench::fio::{JobResult, Progress, Target, Volume};
use bench::jobfile::JobSpec;

use crate::bench_jobfile::BenchJobArgs;
use crate::error::{CliError, CliResult};
use crate::opened::{open_drive, used_zone_among};

/// Refuses what does not apply to a drive, before it is opened.
fn check_args(a: &BenchJobArgs, path: &Path) -> CliResult {
    if a.target != "zns" {
        return Err(CliError::Usage(format!(
            "--target {} does not run on a drive yet; {} takes zoned jobs (--target zns)",
            a.target,
            path.display()
        )));
    }
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
    Ok(())
}

/// Runs `specs` on the drive at `path` and returns the jobs' results.
pub fn run(a: &BenchJobArgs, path: &Path, specs: Vec<JobSpec>) -> Result<Vec<JobResult>, CliError> {
    check_args(a, path)?;
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
        volume: Volume::Zns,
        image: None,
    };
    let (path, force) = (path.to_path_buf(), a.force);
    // The command line runs on a current-thread runtime already; the jobs get their own, on
    // their own thread, with the wall clock.
    let runner = std::thread::spawn(move || -> Result<Vec<JobResult>, CliError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::Other(format!("cannot start a runtime: {e}")))?;
        rt.block_on(async {
            let dev = open_drive(&path)?;
            if !force {
                if let Some(why) = used_zone_among(&dev, |_| true).await? {
                    return Err(CliError::Other(format!(
                        "{}: {why}: the jobs reset and overwrite the zones they use; pass --force to run them anyway",
                        path.display()
                    )));
                }
            }
            // A job the drive fails is the drive's answer, not a usage error.
            bench::fio::run_zoned_on(&specs, &target, &dev, &Progress::default())
                .await
                .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))
        })
    });
    runner
        .join()
        .map_err(|_| CliError::Other("the benchmark thread panicked".into()))?
}
