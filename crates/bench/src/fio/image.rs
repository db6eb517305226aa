//! Runs fio jobs on an existing emulated device image rather than on a fresh in-memory
//! device: zoned jobs on the image's zones, or block jobs on the FTL volume formatted on it.
//! The image keeps its own geometry; the target's profile supplies only the timing model. The
//! jobs overwrite the image's data, as fio overwrites a device, and the image is shut down
//! cleanly at the end whether or not the jobs succeeded.

use std::path::Path;
use std::sync::Arc;

use emu::{ClockMode, EmuDevice};
use ftl::{FtlVolume, MountOptions};
use zns::ZonedDevice;

use super::{run_block, run_zoned, timing_of, JobResult, Progress, Target, Volume};
use crate::jobfile::JobSpec;

/// Runs `specs` on the image at `path` with the timing of `t.profile`.
pub(super) async fn run(
    specs: &[JobSpec],
    t: &Target,
    path: &Path,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    if let Some(b) = t.size_bytes {
        return Err(format!(
            "a size ({b} bytes) does not apply to an image, which has its own size"
        ));
    }
    if matches!(t.volume, Volume::Conv { .. }) {
        return Err("a conventional SSD cannot run on a device image; use zns or ftl".into());
    }
    let dev = Arc::new(open_timed(t, path)?);
    let results = match t.volume {
        Volume::Ftl { .. } => run_on_volume(specs, t, path, &dev, p).await,
        _ => run_zoned(specs, t, &dev, p).await,
    };
    // Shut down even after a failed job, so the image is left closed cleanly; the job's
    // error is the one worth reporting when both fail.
    let closed = dev
        .shutdown()
        .map_err(|e| format!("shutting down {}: {e}", path.display()));
    let results = results?;
    closed?;
    Ok(results)
}

/// The image, opened with the timing model of the target's profile switched on.
fn open_timed(t: &Target, path: &Path) -> Result<EmuDevice, String> {
    let timing = timing_of(t)?;
    let dev = EmuDevice::open_file(path, false)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // A model that refuses the geometry (a write buffer too small for the image's active
    // zone limit, say) is an error about this image, not a reason to stop the process.
    dev.with_timing(timing, ClockMode::Virtual).map_err(|e| {
        format!(
            "{}: the {} timing model does not fit this image: {e}",
            path.display(),
            t.profile
        )
    })
}

/// Mounts the FTL volume on the image, runs the block jobs on it, and unmounts it.
async fn run_on_volume(
    specs: &[JobSpec],
    t: &Target,
    path: &Path,
    dev: &Arc<EmuDevice>,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    ftl::probe(dev.as_ref()).await.map_err(|e| {
        format!(
            "{} holds no FTL volume ({e}); format one with `zonestack ftl format {}`",
            path.display(),
            path.display()
        )
    })?;
    let zoned: Arc<dyn ZonedDevice> = dev.clone();
    let (vol, _) = FtlVolume::mount(zoned, MountOptions::default())
        .await
        .map_err(|e| format!("mounting the volume on {}: {e}", path.display()))?;
    let results = run_block(specs, t, vol.as_ref(), p, &super::phases::no_probe)
        .await
        .map(|(r, _)| r);
    let unmounted = vol
        .unmount()
        .await
        .map_err(|e| format!("unmounting the volume on {}: {e}", path.display()));
    let results = results?;
    unmounted?;
    Ok(results)
}
