//! SQLite-style I/O-error sweep: one fixed workload (writes, FUA writes, split writes, trims,
//! write zeroes, flushes, reads, with garbage collection and checkpoints busy) is run again
//! and again with the N-th device command failing, for every N the workload issues. The
//! failure is transient (absorbed by the FTL's bounded retry) or permanent (it outlasts the
//! retries), strikes before or after the device executed the command, and is followed by a
//! clean unmount or a power cut. After each run the volume is mounted again on the healed
//! device and every block must hold a version the durability contract allows: everything
//! acknowledged as durable (flush, FUA) reads back, nothing older than it, a failed write
//! reads old or new. While it runs, the volume either keeps working or fails with its cause,
//! and a flush never returns Ok for data a crash would lose.
//!
//! Reproduce one run with `FTL_SWEEP=<oob>:<n>:<variant>`; failures print it.

mod common;

use std::sync::Arc;

use common::{block, check_after_crash, geometry, paused_runtime, version_of, FaultModel};
use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions, WriteMode};
use zns::{
    BlockDevice, BlockError, ErrorPlan, ErrorTiming, FaultyZoned, NvmeStatus, OpSet, SimRng,
    ZonedDevice,
};

type Faulty = FaultyZoned<Arc<EmuDevice>>;

const WORKLOAD_SEED: u64 = 42;
const OPS: usize = 400;

/// How one run injects its error and ends.
#[derive(Clone, Copy, Debug)]
struct Variant {
    permanent: bool,
    timing: ErrorTiming,
    power_cut: bool,
}

impl Variant {
    fn from_index(i: u64) -> Variant {
        Variant {
            permanent: i % 4 != 3,
            timing: if i.is_multiple_of(2) {
                ErrorTiming::Before
            } else {
                ErrorTiming::After
            },
            power_cut: (i / 2).is_multiple_of(2),
        }
    }
}

fn mount_options(oob: u32) -> MountOptions {
    MountOptions {
        write_mode: if oob == 0 {
            WriteMode::ZoneWrite
        } else {
            WriteMode::ZoneAppend
        },
        gc_background_free_zones: common::background_free_zones(oob),
        ..common::small_opts()
    }
}

/// What the sweep exercised.
#[derive(Default, Debug)]
struct Coverage {
    runs: u64,
    errors_injected: u64,
    op_errors: u64,
    volumes_failed: u64,
    power_cuts: u64,
    remounts_checked: u64,
}

/// Runs the workload; returns the device commands it issued after mount. `plan` is installed
/// right after the mount.
async fn run(oob: u32, plan: Option<(ErrorPlan, Variant)>, cov: &mut Coverage) -> u64 {
    let what = match &plan {
        Some((p, v)) => format!("FTL_SWEEP={oob}:{}:{v:?}", p.fail_nth.unwrap_or(0)),
        None => format!("oob {oob} without faults"),
    };
    let emu_dev = common::device(
        zns::Geometry {
            oob_size: oob,
            ..geometry()
        },
        WORKLOAD_SEED,
    );
    let faulty: Arc<Faulty> = Arc::new(FaultyZoned::new(emu_dev.clone(), WORKLOAD_SEED));
    let dev: Arc<dyn ZonedDevice> = faulty.clone();
    ftl::format(dev.as_ref(), FormatOptions::with_op(580), 1, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev.clone(), mount_options(oob))
        .await
        .expect("mount");
    let start = faulty.counters().commands;
    let variant = plan.as_ref().map(|(_, v)| *v);
    if let Some((p, _)) = plan {
        faulty.set_errors(p).expect("plan");
    }
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut model = FaultModel::new(n);
    let mut rng = SimRng::new(WORKLOAD_SEED);
    let mut version = 0u64;
    let mut failed: Option<String> = None;
    for op in 0..OPS {
        let kind = rng.below(100);
        let len = match kind {
            // Split writes: longer than the device's transfer limit and across zone ends.
            0..=9 => rng.range_inclusive(17, 40),
            _ => rng.range_inclusive(1, 4),
        };
        let lba = rng.below(n - len + 1);
        let result = match kind {
            0..=59 => {
                let fua = rng.chance(0.15);
                let mut data = Vec::new();
                let first = version + 1;
                for i in 0..len {
                    version += 1;
                    data.extend(block(bs, version));
                    model.submitted(lba + i, version);
                }
                let r = vol.write(lba, &data, fua).await;
                if r.is_ok() {
                    for i in 0..len {
                        model.completed(lba + i, first + i, fua);
                    }
                }
                r
            }
            60..=69 => {
                let zeroes = rng.chance(0.5);
                let fua = zeroes && rng.chance(0.5);
                // Zeros are version 0; several in the history are told apart by position.
                for i in 0..len {
                    model.submitted(lba + i, 0);
                }
                let r = if zeroes {
                    vol.write_zeroes(lba, len, fua).await
                } else {
                    vol.trim(lba, len).await
                };
                if r.is_ok() {
                    for i in 0..len {
                        model.completed_last(lba + i, fua);
                    }
                }
                r
            }
            70..=79 => {
                let r = vol.flush().await;
                if r.is_ok() {
                    model.flushed();
                }
                r
            }
            _ => {
                let mut buf = vec![0u8; bs];
                let at = rng.below(n);
                let r = vol.read(at, &mut buf).await;
                if r.is_ok() {
                    let got = version_of(&buf)
                        .unwrap_or_else(|| panic!("{what} op {op}: torn block at LBA {at}"));
                    let allowed = model.readable(at);
                    assert!(
                        allowed.contains(&got),
                        "{what} op {op}: LBA {at} reads version {got}, allowed {allowed:?}"
                    );
                }
                r
            }
        };
        match result {
            Ok(()) => {}
            Err(BlockError::Failed(cause)) => {
                assert!(
                    !cause.is_empty(),
                    "{what} op {op}: a failure without a cause"
                );
                failed = Some(cause);
                break;
            }
            Err(e) => {
                cov.op_errors += 1;
                // Only the injected error (or what follows from it) may fail an operation.
                assert!(
                    variant.is_some(),
                    "{what} op {op}: {e} without an injected fault"
                );
            }
        }
    }
    let issued = faulty.counters().commands - start;
    cov.errors_injected += faulty.counters().errors_injected;
    faulty.clear_errors();
    if failed.is_none() {
        // The maintenance task may have failed the volume after the last operation.
        if let Err(e) = vol.flush().await {
            match e {
                BlockError::Failed(cause) => failed = Some(cause),
                e => panic!("{what}: flush failed after the fault cleared: {e}"),
            }
        } else {
            model.flushed();
        }
    }
    if failed.is_some() {
        cov.volumes_failed += 1;
        // A failed volume refuses to checkpoint its state and says why.
        let err = vol.unmount().await.expect_err("unmount of a failed volume");
        assert!(
            err.to_string()
                .contains(failed.as_deref().unwrap_or_default()),
            "{what}: unmount reported {err}, not the cause {failed:?}"
        );
        vol.crash().await;
    }
    if variant.is_some_and(|v| v.power_cut) || failed.is_some() {
        faulty.cut_power();
        vol.crash().await;
        emu_dev
            .power_loss(WORKLOAD_SEED ^ issued)
            .expect("power loss");
        faulty.restore_power();
        cov.power_cuts += 1;
    } else {
        match vol.unmount().await {
            Ok(()) => model.flushed(),
            Err(e) => panic!("{what}: unmount failed after the fault cleared: {e}"),
        }
    }
    drop(vol);
    let (vol, _) = FtlVolume::mount(dev, mount_options(oob))
        .await
        .unwrap_or_else(|e| panic!("{what}: mount after the fault failed: {e}"));
    check_after_crash(&vol, &mut model, &what).await;
    vol.unmount()
        .await
        .unwrap_or_else(|e| panic!("{what}: final unmount: {e}"));
    cov.remounts_checked += 1;
    cov.runs += 1;
    issued
}

fn plan_for(n: u64, v: Variant) -> ErrorPlan {
    ErrorPlan {
        seed: n,
        ops: OpSet::ALL,
        fail_nth: Some(n),
        // The FTL tries each command 3 times: a permanent fault outlasts that.
        repeat: if v.permanent { 3 } else { 0 },
        status: NvmeStatus::InternalError,
        timing: v.timing,
        ..ErrorPlan::default()
    }
}

fn sweep(oob: u32, stride: u64) -> Coverage {
    let rt = paused_runtime();
    let mut cov = Coverage::default();
    if let Ok(spec) = std::env::var("FTL_SWEEP") {
        let parts: Vec<&str> = spec.split(':').collect();
        if parts.first().and_then(|p| p.parse().ok()) == Some(oob) {
            let n: u64 = parts.get(1).and_then(|p| p.parse().ok()).expect("n");
            let v = Variant::from_index(n);
            rt.block_on(run(oob, Some((plan_for(n, v), v)), &mut cov));
        }
        return cov;
    }
    let total = rt.block_on(run(oob, None, &mut cov));
    assert!(total >= 500, "the workload issued only {total} commands");
    for n in (1..=total).step_by(stride as usize) {
        let v = Variant::from_index(n);
        rt.block_on(run(oob, Some((plan_for(n, v), v)), &mut cov));
    }
    println!("oob {oob}: {total} commands in the workload, {cov:?}");
    cov
}

#[test]
fn every_device_command_failing_in_turn() {
    let cov = sweep(16, 1);
    if std::env::var("FTL_SWEEP").is_ok() {
        return;
    }
    assert!(cov.runs >= 300, "{cov:?}");
    assert!(cov.errors_injected >= cov.runs - 1, "{cov:?}");
    assert!(cov.op_errors >= 50, "{cov:?}");
    assert!(cov.volumes_failed >= 5, "{cov:?}");
    assert!(cov.power_cuts >= 100, "{cov:?}");
}

/// The same on a device without per-block metadata, where the FTL keeps block tags in in-band
/// summary blocks: a failed summary must not let a later flush report its blocks durable.
#[test]
fn every_device_command_failing_in_turn_with_in_band_summaries() {
    let cov = sweep(0, 1);
    if std::env::var("FTL_SWEEP").is_ok() {
        return;
    }
    assert!(cov.runs >= 300, "{cov:?}");
    assert!(cov.op_errors >= 50, "{cov:?}");
    assert!(cov.power_cuts >= 100, "{cov:?}");
}
