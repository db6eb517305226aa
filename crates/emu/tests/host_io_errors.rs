//! Host I/O errors on a file image (a full host file system, a failing host disk), injected
//! by the `failpoints` feature: the failing command gets a status that is not retryable, the
//! device names the cause (`host_error`), and the image reopens consistent with what the
//! device acknowledged, whichever host write failed (swept over N = 1, 2, 3, ...).

mod common;

use common::{block, block_on, small_geometry};
use emu::failpoint::{self, EIO, ENOSPC};
use emu::{EmuConfig, EmuDevice, EmuError};
use zns::{NvmeStatus, ReportFilter, ZoneAction, ZoneDescriptor, ZonedDevice};

fn config(volatile_cache: bool) -> EmuConfig {
    EmuConfig {
        volatile_cache,
        host_sync: true,
        ..EmuConfig::new(small_geometry())
    }
}

async fn zone(dev: &EmuDevice, z: u32) -> ZoneDescriptor {
    let g = dev.geometry();
    dev.report_zones(g.zone_start(z), ReportFilter::All, true, 1)
        .await
        .expect("report")
        .zones[0]
}

fn blocks(bs: usize, lba: u64, n: u64, round: u64) -> Vec<u8> {
    (lba..lba + n).flat_map(|l| block(bs, l, round)).collect()
}

#[test]
fn a_full_host_file_system_fails_the_write_without_moving_the_write_pointer() {
    // Regression: every host I/O error became Internal Error, which callers retry, and
    // nothing named the cause; the user only saw "Internal Error (status 0x006)".
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("full.img");
    block_on(async {
        let dev = EmuDevice::create_file(&path, config(false), false).expect("create");
        let bs = dev.geometry().block_size as usize;
        dev.write(0, &blocks(bs, 0, 2, 1), None, false)
            .await
            .expect("write before the host is full");
        failpoint::fail_nth_host_write(1, ENOSPC);
        let r = dev.write(2, &blocks(bs, 2, 3, 1), None, false).await;
        failpoint::disarm();
        assert_eq!(r, Err(NvmeStatus::WriteFault));
        assert!(!NvmeStatus::WriteFault.is_transient());
        let text = dev.host_error().expect("the host error is kept");
        assert!(
            text.contains("no space left on the host file system"),
            "{text}"
        );
        assert!(text.contains("writing block data"), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert_eq!(zone(&dev, 0).await.wp, 2, "the failed write moved the WP");
        // The host has room again: the same write now succeeds, and the device goes on.
        dev.write(2, &blocks(bs, 2, 3, 2), None, false)
            .await
            .expect("write after the host has room");
        dev.shutdown().expect("clean shutdown");
    });
    block_on(async {
        let dev = EmuDevice::open_file(&path, false).expect("reopen");
        let bs = dev.geometry().block_size as usize;
        assert_eq!(zone(&dev, 0).await.wp, 5);
        let mut buf = vec![0u8; 5 * bs];
        dev.read(0, &mut buf, None).await.expect("read");
        let mut want = blocks(bs, 0, 2, 1);
        want.extend(blocks(bs, 2, 3, 2));
        assert_eq!(buf, want);
    });
}

#[test]
fn a_failed_copy_of_a_claimed_write_gives_the_blocks_back() {
    // With the volatile cache on, a write to an open zone moves the write pointer before its
    // bytes are copied (a claim). A copy that fails must put the pointer and the counters
    // back, or the zone would claim blocks the image never received.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("claimed.img");
    block_on(async {
        let dev = EmuDevice::create_file(&path, config(true), false).expect("create");
        let bs = dev.geometry().block_size as usize;
        dev.write(0, &blocks(bs, 0, 2, 1), None, false)
            .await
            .expect("first write");
        let written = dev.stats().blocks_written;
        failpoint::fail_nth_host_write(1, ENOSPC);
        let r = dev.write(2, &blocks(bs, 2, 3, 1), None, false).await;
        failpoint::disarm();
        assert_eq!(r, Err(NvmeStatus::WriteFault));
        assert_eq!(
            zone(&dev, 0).await.wp,
            2,
            "the failed write kept its blocks"
        );
        assert_eq!(dev.stats().blocks_written, written);
        dev.write(2, &blocks(bs, 2, 3, 2), None, false)
            .await
            .expect("write after the host has room");
        let mut buf = vec![0u8; 5 * bs];
        dev.read(0, &mut buf, None).await.expect("read");
        let mut want = blocks(bs, 0, 2, 1);
        want.extend(blocks(bs, 2, 3, 2));
        assert_eq!(buf, want);
        dev.shutdown().expect("clean shutdown");
    });
}

#[test]
fn a_failed_zone_table_write_fails_the_device_and_shutdown_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eio.img");
    block_on(async {
        let dev = EmuDevice::create_file(&path, config(false), false).expect("create");
        let bs = dev.geometry().block_size as usize;
        // Host writes of one cache-off write: data, metadata, zone table, fdatasync.
        failpoint::fail_nth_host_write(3, EIO);
        let r = dev.write(0, &blocks(bs, 0, 4, 1), None, false).await;
        failpoint::disarm();
        assert_eq!(r, Err(NvmeStatus::WriteFault));
        let text = dev.host_error().expect("kept");
        assert!(text.contains("writing the zone table"), "{text}");
        assert_eq!(
            dev.write(4, &blocks(bs, 4, 1, 1), None, false).await,
            Err(NvmeStatus::NamespaceNotReady)
        );
        assert!(matches!(dev.shutdown(), Err(EmuError::Host(t)) if t == text));
    });
    // Reopened, the image is as before the failed write: its table never recorded it.
    block_on(async {
        assert!(!EmuDevice::image_was_clean(&path).expect("read superblock"));
        let dev = EmuDevice::open_file(&path, false).expect("reopen");
        assert_eq!(zone(&dev, 0).await.wp, 0);
        assert_eq!(dev.host_error(), None);
    });
}

/// One step of the sweep's workload.
#[derive(Clone, Copy, Debug)]
enum Step {
    Write { lba: u64, n: u64, fua: bool },
    Finish(u32),
    Reset(u32),
    Flush,
}

fn workload() -> Vec<Step> {
    vec![
        Step::Write {
            lba: 0,
            n: 3,
            fua: false,
        },
        Step::Write {
            lba: 32,
            n: 2,
            fua: true,
        },
        Step::Write {
            lba: 3,
            n: 4,
            fua: false,
        },
        Step::Flush,
        Step::Finish(1),
        Step::Write {
            lba: 64,
            n: 5,
            fua: false,
        },
        Step::Reset(1),
        Step::Write {
            lba: 32,
            n: 1,
            fua: false,
        },
        Step::Write {
            lba: 7,
            n: 2,
            fua: true,
        },
    ]
}

async fn run(dev: &EmuDevice, step: Step, round: u64) -> Result<(), NvmeStatus> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    match step {
        Step::Write { lba, n, fua } => dev.write(lba, &blocks(bs, lba, n, round), None, fua).await,
        Step::Finish(z) => {
            dev.zone_mgmt(ZoneAction::Finish, g.zone_start(z), false)
                .await
        }
        Step::Reset(z) => {
            dev.zone_mgmt(ZoneAction::Reset, g.zone_start(z), false)
                .await
        }
        Step::Flush => dev.flush().await,
    }
}

/// Zone states and write pointers, and every zone's readable bytes.
async fn snapshot(dev: &EmuDevice) -> (Vec<(u8, u64)>, Vec<u8>) {
    let g = dev.geometry();
    let report = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await
        .expect("report");
    let zones = report
        .zones
        .iter()
        .map(|d| (d.state.nvme_value(), d.wp))
        .collect();
    let mut data = vec![0u8; (g.total_blocks() * u64::from(g.block_size)) as usize];
    for z in 0..g.zone_count {
        let at = (g.zone_start(z) * u64::from(g.block_size)) as usize;
        let len = (g.zone_size * u64::from(g.block_size)) as usize;
        dev.read(g.zone_start(z), &mut data[at..at + len], None)
            .await
            .expect("read a zone");
    }
    (zones, data)
}

/// The restart form of a memory device that ran the first `k` steps.
async fn reference(k: usize) -> (Vec<(u8, u64)>, Vec<u8>) {
    let dev = EmuDevice::new_memory(config(false)).expect("memory device");
    for (i, s) in workload().into_iter().take(k).enumerate() {
        run(&dev, s, i as u64).await.expect("reference step");
    }
    dev.restart().expect("restart");
    snapshot(&dev).await
}

#[test]
fn whichever_host_write_fails_the_image_reopens_as_before_or_after_that_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let steps = workload();
    let mut nth = 1u64;
    let mut outcomes = [0usize; 2];
    loop {
        let path = dir.path().join(format!("sweep-{nth}.img"));
        let failed_at = block_on(async {
            let dev = EmuDevice::create_file(&path, config(false), false).expect("create");
            failpoint::fail_nth_host_write(nth, ENOSPC);
            let mut failed_at = None;
            for (i, s) in steps.iter().enumerate() {
                if let Err(e) = run(&dev, *s, i as u64).await {
                    assert_eq!(e, NvmeStatus::WriteFault, "host write {nth}, step {i}");
                    assert!(
                        dev.host_error().is_some(),
                        "host write {nth}: no host error"
                    );
                    failed_at = Some(i);
                    break;
                }
            }
            failpoint::disarm();
            // A failed device refuses to shut down cleanly; either way the image must reopen.
            drop(dev.shutdown());
            failed_at
        });
        let Some(k) = failed_at else { break };
        let reopened = block_on(async {
            let dev = EmuDevice::open_file(&path, false).expect("reopen after a host error");
            // A device that did not fail shut down cleanly and kept its open zones open;
            // compare restart forms, which is what the reference holds.
            dev.restart().expect("restart the reopened device");
            snapshot(&dev).await
        });
        let (before, after) = block_on(async { (reference(k).await, reference(k + 1).await) });
        if reopened == before {
            outcomes[0] += 1;
        } else if reopened == after {
            outcomes[1] += 1;
        } else {
            panic!("host write {nth} failing at step {k}: the reopened image is neither before nor after that step");
        }
        nth += 1;
        assert!(nth < 200, "the sweep does not end");
    }
    // Every host write of the workload was made to fail once, and both outcomes occurred:
    // failures before the write pointer moved, and a failed fdatasync after the table.
    assert!(nth > 20, "only {nth} host writes swept");
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
