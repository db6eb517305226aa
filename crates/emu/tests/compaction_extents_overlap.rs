//! The extents of one `zone_compaction` overlap on the flash (virtual time, femu-mlc): 16
//! one-chunk extents on 16 different chips take about one copyback, as one 16-chunk extent
//! does.
//!
//! The bug this guards against: the device booked each extent with the timing model only
//! after the previous one had completed, so a compaction of N chunks took N copybacks end to
//! end, and in-storage compaction came out slower than copying through the host.

mod common;

use emu::timing::timing_profile;
use emu::{EmuDevice, SimRuntime};
use tokio::time::Instant;
use zns::{CompactionExtent, ZonedDevice};

const ZONE: u64 = 512;
const CHUNK: u64 = 4;
const CHIPS: u64 = 16;

fn device() -> EmuDevice {
    common::timed_znsplus(4, ZONE)
}

/// Virtual ns of one compaction of zone 0's first 16 chunks to zone 1 (each chunk to its own
/// chip, so every copy is a copyback), as `extents`, and the copybacks it made.
fn compaction_ns(extents: &[CompactionExtent]) -> (u64, u64) {
    let extents = extents.to_vec();
    SimRuntime::new().expect("runtime").block_on(async move {
        let dev = device();
        let data = vec![0x5Au8; 64 * 4096];
        for at in (0..ZONE).step_by(64) {
            dev.write(at, &data, None, false).await.expect("fill");
        }
        dev.flush().await.expect("flush");
        let before = dev.timing_counters().expect("timed");
        let t0 = Instant::now();
        dev.zone_compaction(&extents).await.expect("compaction");
        let ns = t0.elapsed().as_nanos() as u64;
        let after = dev.timing_counters().expect("timed");
        (ns, after.flash.copybacks - before.flash.copybacks)
    })
}

#[test]
fn one_chunk_extents_on_different_chips_run_together() {
    let copyback_ns = timing_profile("femu-mlc").expect("femu-mlc").copyback_ns;
    let per_chunk: Vec<CompactionExtent> = (0..CHIPS)
        .map(|c| CompactionExtent {
            src: c * CHUNK,
            dst: ZONE + c * CHUNK,
            blocks: CHUNK,
        })
        .collect();
    let whole = [CompactionExtent {
        src: 0,
        dst: ZONE,
        blocks: CHIPS * CHUNK,
    }];
    let (split_ns, split_cb) = compaction_ns(&per_chunk);
    let (whole_ns, whole_cb) = compaction_ns(&whole);
    assert_eq!((split_cb, whole_cb), (CHIPS, CHIPS), "all copybacks");
    assert!(
        split_ns < 2 * copyback_ns,
        "16 extents on 16 chips took {split_ns} ns, a copyback is {copyback_ns} ns"
    );
    assert!(
        split_ns < whole_ns + whole_ns / 10,
        "16 one-chunk extents took {split_ns} ns, one 16-chunk extent {whole_ns} ns"
    );
}
