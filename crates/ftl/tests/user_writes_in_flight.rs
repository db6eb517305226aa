//! Several user writes in flight per open zone (Zone Write mode, `MountOptions::zone_writes`).
//!
//! Regression: each open user zone had one write in flight, so on the zn540 model the one hot
//! zone of a skewed workload bounded the volume at one write per device round trip
//! (docs/BENCHMARKS.md). With several in flight, a write that fails leaves the writes behind
//! it at offsets past the device's write pointer, and a write the device delays lets the ones
//! behind it overtake it; the device refuses those with Zone Invalid Write. These tests check
//! that such writes are acknowledged with their data (written again at the same offset once
//! the delayed write landed, or in another zone when the one ahead failed), that only the
//! write that failed reports an error, and that the depth really pays. Virtual time, seeded.

mod common;

use std::sync::Arc;
use std::time::Duration;

use emu::{EmuDevice, FaultPlan};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use futures::future::join_all;
use zns::{
    BlockDevice, ErrorPlan, ErrorTiming, FaultyZoned, NvmeStatus, OpKind, OpSet, ZonedDevice,
};

/// 32 zones of 256 blocks of 4 KiB on the zn540 timing model, with per-block metadata.
fn timed_device(seed: u64) -> Arc<EmuDevice> {
    common::timed_zn540(common::geometry_4k(32, 16), seed)
}

/// One hot zone, no separation: every user write goes to the same open zone.
fn opts(zone_writes: u32) -> MountOptions {
    MountOptions {
        hot_zones: 1,
        hot_cold: false,
        zone_writes,
        ..MountOptions::default()
    }
}

/// Writes `lbas` at once, block `k` holding version `first + k`; returns each result.
async fn batch(vol: &FtlVolume, lbas: &[u64], first: u64) -> Vec<Result<(), zns::BlockError>> {
    let bs = vol.block_size() as usize;
    let data: Vec<Vec<u8>> = (0..lbas.len() as u64)
        .map(|k| common::block(bs, first + k))
        .collect();
    join_all(
        lbas.iter()
            .zip(&data)
            .map(|(&lba, d)| vol.write(lba, d, false)),
    )
    .await
}

/// The version block `lba` reads as.
async fn version_at(vol: &FtlVolume, lba: u64) -> Option<u64> {
    let mut buf = vec![0u8; vol.block_size() as usize];
    vol.read(lba, &mut buf).await.expect("read");
    common::version_of(&buf)
}

/// Virtual time 256 single-block writes issued 32 at a time take.
async fn timed_batches(zone_writes: u32) -> Duration {
    let dev = timed_device(3);
    ftl::format(dev.as_ref(), FormatOptions::with_op(250), 3, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev.clone(), opts(zone_writes))
        .await
        .expect("mount");
    let start = tokio::time::Instant::now();
    for b in 0..8u64 {
        let lbas: Vec<u64> = (0..32).map(|k| b * 32 + k).collect();
        for r in batch(&vol, &lbas, 1 + b * 32).await {
            r.expect("write");
        }
    }
    let took = start.elapsed();
    for lba in 0..256 {
        assert_eq!(version_at(&vol, lba).await, Some(lba + 1), "LBA {lba}");
    }
    vol.unmount().await.expect("unmount");
    took
}

#[test]
fn several_writes_in_flight_finish_sooner() {
    let (one, eight) = common::paused_runtime()
        .block_on(async { (timed_batches(1).await, timed_batches(8).await) });
    // One write at a time pays the whole round trip per write; eight overlap them.
    assert!(
        eight.as_secs_f64() * 2.0 < one.as_secs_f64(),
        "8 in flight took {eight:?}, 1 in flight {one:?}"
    );
}

/// The timed device behind two `FaultyZoned` wrappers: the outer one delays every command up
/// to 2 ms on its way (so a write that fails may do so after the ones behind it were
/// submitted), the inner one injects errors as commands reach the device.
type Inner = FaultyZoned<Arc<EmuDevice>>;

/// A volume on that device, LBAs 0..64 written once (version = LBA + 1) and flushed.
async fn faulty_volume(zone_writes: u32) -> (Arc<FaultyZoned<Arc<Inner>>>, Arc<FtlVolume>) {
    let inner = Arc::new(FaultyZoned::new(timed_device(9), 9));
    let outer = Arc::new(FaultyZoned::new(inner, 10));
    let dev: Arc<dyn ZonedDevice> = outer.clone();
    ftl::format(dev.as_ref(), FormatOptions::with_op(250), 9, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev, opts(zone_writes))
        .await
        .expect("mount");
    let lbas: Vec<u64> = (0..64).collect();
    for r in batch(&vol, &lbas, 1).await {
        r.expect("first write");
    }
    vol.flush().await.expect("flush");
    outer.set_in_flight_delay(Duration::from_millis(2));
    (outer, vol)
}

// Regression: a write that failed for good with writes behind it in flight to its zone left
// them at offsets past the write pointer; the device refused them and their callers saw Zone
// Invalid Write. They must go to another zone and be acknowledged; only writes whose own
// command failed report an error, with its cause.
#[test]
fn writes_behind_a_failed_write_are_written_elsewhere() {
    common::paused_runtime().block_on(async {
        let (outer, vol) = faulty_volume(8).await;
        // The third data write to reach the device fails for good (a status no retry
        // absorbs): that write alone may report an error.
        outer
            .inner()
            .set_errors(ErrorPlan {
                ops: OpSet::of(&[OpKind::Write]),
                fail_nth: Some(3),
                status: NvmeStatus::NamespaceWriteProtected,
                timing: ErrorTiming::Before,
                ..ErrorPlan::default()
            })
            .expect("plan");
        let lbas: Vec<u64> = (0..16).map(|k| k * 4).collect();
        let results = batch(&vol, &lbas, 1000).await;
        outer.inner().clear_errors();
        outer.set_in_flight_delay(Duration::ZERO);
        let failed: Vec<usize> = (0..results.len())
            .filter(|&k| results[k].is_err())
            .collect();
        assert_eq!(failed.len(), 1, "{results:?}");
        let cause = results[failed[0]].as_ref().expect_err("failed").to_string();
        assert!(cause.contains("rotect"), "write {}: {cause}", failed[0]);
        let c = vol.stats().counters;
        assert!(c.user_writes_resubmitted >= 1, "{c:?}");
        for (k, &lba) in lbas.iter().enumerate() {
            let got = version_at(&vol, lba).await;
            if failed.contains(&k) {
                // A failed write reads old or new.
                assert!(
                    got == Some(lba + 1) || got == Some(1000 + k as u64),
                    "LBA {lba}: {got:?}"
                );
            } else {
                assert_eq!(got, Some(1000 + k as u64), "LBA {lba}");
            }
        }
        // The volume goes on.
        let again: Vec<u64> = (0..16).map(|k| k * 4 + 1).collect();
        for r in batch(&vol, &again, 2000).await {
            r.expect("write after the failure");
        }
        vol.flush().await.expect("flush");
        vol.unmount().await.expect("unmount");
    });
}

// Regression: a write the device delayed was overtaken by the writes behind it, which the
// device refused (the write pointer was short of them). They must go again at their offsets
// once the delayed write landed, and every write be acknowledged.
#[test]
fn writes_overtaking_a_delayed_write_go_again() {
    common::paused_runtime().block_on(async {
        let dev = timed_device(5);
        ftl::format(dev.as_ref(), FormatOptions::with_op(250), 5, false)
            .await
            .expect("format");
        let (vol, _) = FtlVolume::mount(dev.clone(), opts(8)).await.expect("mount");
        dev.set_faults(FaultPlan {
            seed: 5,
            extra_latency: Duration::from_micros(300),
            latency_probability: 0.25,
            ..Default::default()
        })
        .expect("faults");
        let mut expect = vec![0u64; 512];
        let mut version = 0;
        for b in 0..16u64 {
            let lbas: Vec<u64> = (0..32).map(|k| (b * 32 + k * 7) % 512).collect();
            for r in batch(&vol, &lbas, version + 1).await {
                r.expect("write");
            }
            for (k, &lba) in lbas.iter().enumerate() {
                expect[lba as usize] = version + 1 + k as u64;
            }
            version += 32;
        }
        dev.set_faults(FaultPlan::default()).expect("faults off");
        let c = vol.stats().counters;
        assert!(c.user_writes_resent >= 10, "{c:?}");
        for (lba, &v) in expect.iter().enumerate() {
            if v > 0 {
                assert_eq!(version_at(&vol, lba as u64).await, Some(v), "LBA {lba}");
            }
        }
        vol.unmount().await.expect("unmount");
    });
}
