//! Regression: with the host file system under an image full, a zone header write failed
//! with ENOSPC, the zone was sealed anyway, and the volume could never be mounted again ("data
//! zone N is written but has no header of this volume"), even after the disk had room again;
//! flushed data was unreachable. Swept over N: the N-th host write of a workload on a file
//! image fails with ENOSPC (through emu's failpoint; the host has room again right after), then
//! the process dies (a kill: everything unflushed is gone). The image must reopen, the volume
//! mount, and every block hold a version the durability contract allows.

mod common;

use std::sync::Arc;

use common::{block, check_after_crash, geometry, small_opts, FaultModel};
use emu::failpoint::{self, ENOSPC};
use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume};
use zns::{BlockDevice, BlockError, SimRng, ZonedDevice};

#[derive(Default, Debug)]
struct Coverage {
    runs: u64,
    op_errors: u64,
    volumes_failed: u64,
    host_errors_named: u64,
}

/// Runs the workload with the `nth` host write failing (None: no failure); returns how many
/// host writes the faulty phase issued.
async fn run(dir: &std::path::Path, nth: Option<u64>, cov: &mut Coverage) -> u64 {
    let what = format!("host write {nth:?} failing with ENOSPC");
    let path = dir.join(format!("full-{}.img", nth.unwrap_or(0)));
    let dev =
        Arc::new(EmuDevice::create_file(&path, EmuConfig::new(geometry()), false).expect("create"));
    ftl::format(dev.as_ref(), FormatOptions::with_op(580), 5, false)
        .await
        .expect("format");
    let as_dyn: Arc<dyn ZonedDevice> = dev.clone();
    let (vol, _) = FtlVolume::mount(as_dyn, small_opts()).await.expect("mount");
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut model = FaultModel::new(n);
    let mut rng = SimRng::new(77);
    let mut version = 0u64;
    if let Some(k) = nth {
        failpoint::fail_nth_host_write(k, ENOSPC);
    } else {
        failpoint::fail_nth_host_write(u64::MAX, ENOSPC);
    }
    for _ in 0..150 {
        let r = if rng.chance(0.15) {
            let r = vol.flush().await;
            if r.is_ok() {
                model.flushed();
            }
            r
        } else {
            let len = rng.range_inclusive(1, 6);
            let lba = rng.below(n - len + 1);
            let first = version + 1;
            let mut data = Vec::new();
            for i in 0..len {
                version += 1;
                data.extend(block(bs, version));
                model.submitted(lba + i, version);
            }
            let r = vol.write(lba, &data, false).await;
            if r.is_ok() {
                for i in 0..len {
                    model.completed(lba + i, first + i, false);
                }
            }
            r
        };
        match r {
            Ok(()) => {}
            Err(BlockError::Failed(_)) => {
                cov.volumes_failed += 1;
                break;
            }
            Err(_) => cov.op_errors += 1,
        }
    }
    let issued = failpoint::host_writes_seen();
    failpoint::disarm();
    if nth.is_some()
        && dev
            .host_error()
            .is_some_and(|e| e.contains("no space left on the host file system"))
    {
        cov.host_errors_named += 1;
    }
    // The process dies: nothing unflushed survives, nothing more is written.
    vol.crash().await;
    drop(vol);
    match Arc::try_unwrap(dev) {
        Ok(d) => d.kill(),
        Err(_) => panic!("{what}: the device is still shared"),
    }
    let dev = Arc::new(
        EmuDevice::open_file(&path, false).unwrap_or_else(|e| panic!("{what}: reopen: {e}")),
    );
    let as_dyn: Arc<dyn ZonedDevice> = dev.clone();
    let (vol, _) = FtlVolume::mount(as_dyn, small_opts())
        .await
        .unwrap_or_else(|e| panic!("{what}: mount after the host had room again: {e}"));
    check_after_crash(&vol, &mut model, &what).await;
    vol.unmount()
        .await
        .unwrap_or_else(|e| panic!("{what}: unmount: {e}"));
    drop(vol);
    match Arc::try_unwrap(dev) {
        Ok(d) => d.shutdown().expect("shutdown"),
        Err(_) => panic!("{what}: the device is still shared"),
    }
    std::fs::remove_file(&path).expect("remove image");
    cov.runs += 1;
    issued
}

#[test]
fn every_host_write_failing_with_enospc_leaves_a_mountable_volume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut cov = Coverage::default();
    let total = rt.block_on(run(dir.path(), None, &mut cov));
    assert!(total >= 100, "the workload issued only {total} host writes");
    for k in 1..=total {
        rt.block_on(run(dir.path(), Some(k), &mut cov));
    }
    println!("{total} host writes swept: {cov:?}");
    assert_eq!(cov.runs, total + 1);
    assert!(cov.host_errors_named >= total / 2, "{cov:?}");
    assert!(cov.op_errors + cov.volumes_failed >= total / 2, "{cov:?}");
}
