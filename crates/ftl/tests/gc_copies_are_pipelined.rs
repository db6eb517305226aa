//! Garbage-collection copies keep several Simple Copy commands in flight per GC zone.
//!
//! Regression: each GC lane had one Copy in flight at a time. A Copy completes only once its
//! sources are read, and those reads wait behind the programs queued on the dies, so on the
//! zn540 model the collector moved one 128-block batch per such wait and kept the dies 65%
//! busy while user writes waited for space 72% of the time (docs/BENCHMARKS.md). With one lane
//! and no cold stream, the old code had one Copy in flight per lane; the pipelined one must have
//! clearly more, and the data must still read back. Virtual time, seeded.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, SimRng};

/// 64 zones of 256 blocks of 4 KiB on the zn540 timing model, with per-block metadata and
/// Simple Copy of up to 64 blocks (so a victim takes several copies). At 25% OP the
/// checkpoint and reserve zones leave 2191 collectable blocks, so a round takes several
/// victims of about three quarters valid blocks and a lane gets many copies to put in
/// flight. (With 24 zones 183 were left: every round collected one victim of about 254
/// valid blocks, four copies, whatever depth the lane allowed.)
fn device() -> Arc<EmuDevice> {
    common::timed_zn540(common::geometry_4k(64, 24), 5)
}

/// Copies of 64 blocks one zone holds: a lane that waited for every copy to its full zone
/// before it opened the next never had more in flight.
const ZONE_COPIES: f64 = 256.0 / 64.0;

/// Mean Copy commands in flight while any was, and zones collected, after random overwrites.
async fn run(copies_per_lane: u32) -> (f64, u64) {
    let dev = device();
    ftl::format(dev.as_ref(), FormatOptions::with_op(250), 7, false)
        .await
        .expect("format");
    let opts = MountOptions {
        hot_cold: false,
        copies_per_lane,
        ..common::small_opts()
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let bs = vol.block_size() as usize;
    let n = vol.size_blocks();
    let mut versions = vec![0u64; n as usize];
    let mut version = 0u64;
    let mut rng = SimRng::new(11);
    for i in 0..n * 2 {
        let lba = if i < n { i } else { rng.below(n) };
        version += 1;
        versions[lba as usize] = version;
        vol.write(lba, &common::block(bs, version), false)
            .await
            .expect("write");
    }
    let mut buf = vec![0u8; bs];
    for (lba, &v) in versions.iter().enumerate() {
        vol.read(lba as u64, &mut buf).await.expect("read");
        assert_eq!(common::version_of(&buf), Some(v), "LBA {lba}");
    }
    let s = vol.stats();
    vol.verify().expect("mapping invariants");
    vol.unmount().await.expect("unmount");
    let copies = s.activity.copies;
    let mean = copies.level_ns as f64 / copies.busy_ns.max(1) as f64;
    (mean, s.counters.gc_zones)
}

#[test]
fn one_lane_keeps_several_copies_in_flight() {
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    let (one, zones_one) = rt.block_on(run(1));
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    let (four, zones_four) = rt.block_on(run(4));
    println!("copies in flight while copying: 1 per lane {one:.2}, 4 per lane {four:.2}");
    assert!(
        zones_one >= 10 && zones_four >= 10,
        "{zones_one} / {zones_four} zones collected"
    );
    assert!(
        four > one + 0.5,
        "four per lane had {four:.2} copies in flight, one per lane {one:.2}"
    );
}

// Regression: a lane stopped issuing copies when its zone was fully reserved and waited for
// every copy to that zone before it opened the next one, so a lane never had more copies in
// flight than one zone holds (here 4 of 64 blocks) whatever `copies_per_lane` allowed, and
// the pipeline drained at every zone boundary (docs/BENCHMARKS.md). A lane now goes on into
// its next zone while the copies to the full one are in flight, so sixteen per lane keep
// more in flight than one zone holds, and more than four per lane do.
#[test]
fn a_lane_goes_on_into_its_next_zone_while_copies_are_in_flight() {
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    let (four, _) = rt.block_on(run(4));
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    let (sixteen, zones) = rt.block_on(run(16));
    println!("copies in flight while copying: 4 per lane {four:.2}, 16 per lane {sixteen:.2}");
    assert!(zones >= 10, "{zones} zones collected");
    assert!(
        sixteen > ZONE_COPIES,
        "sixteen per lane had {sixteen:.2} copies in flight, no more than one zone holds"
    );
    assert!(
        sixteen > four * 1.1,
        "sixteen per lane had {sixteen:.2} copies in flight, four per lane {four:.2}"
    );
}
