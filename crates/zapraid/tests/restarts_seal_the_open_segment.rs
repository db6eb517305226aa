//! What a restart does with the segment power loss left open: open finishes its zones on
//! every member (a Finish makes the zone Full and durable), seals it in the index and opens
//! the next segment for new stripes; the finished segment's rest is reclaimed like any
//! sealed segment's (freed at open when nothing in it is live, else collected). This runs
//! many power cuts in a row, each leaving a segment open with a few stripes in it, on a
//! volume small enough that abandoned segments would use up its free space within a few
//! restarts: every flushed write must read back after each restart, writes must go on
//! (no NoSpace), and no member zone may stay open across a restart.

mod common;

use common::{as_zoned, block, check, emu_members, opts, runtime};
use zapraid::{GroupMode, ZapRaidVolume};
use zns::{BlockDevice, ReportFilter, SimRng, ZoneState, ZonedDevice};

const ZONES: u32 = 8;
const CYCLES: u64 = 40;

/// Zones of member 0 in each state after an open: (open, full, empty).
async fn zone_states(dev: &dyn ZonedDevice) -> (usize, usize, usize) {
    let r = dev
        .report_zones(0, ReportFilter::All, false, ZONES as usize)
        .await
        .expect("report zones");
    let count = |f: &dyn Fn(ZoneState) -> bool| r.zones.iter().filter(|z| f(z.state)).count();
    (
        count(&|s| {
            matches!(
                s,
                ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed
            )
        }),
        count(&|s| s == ZoneState::Full),
        count(&|s| s == ZoneState::Empty),
    )
}

fn cycles(mode: GroupMode, seed: u64) {
    runtime().block_on(async {
        let emus = emu_members(4, ZONES, seed);
        let mut vol = ZapRaidVolume::format(as_zoned(&emus), &opts(mode))
            .await
            .expect("format");
        let bs = vol.block_size() as usize;
        let span = vol.size_blocks() * 3 / 4;
        let mut model = vec![0u64; span as usize];
        let mut version = 0;
        let mut rng = SimRng::new(seed);
        let mut sealed_open = 0;
        for cycle in 0..CYCLES {
            let what = format!("seed {seed} {mode:?} cycle {cycle}");
            // A few stripes' worth of writes, flushed: the open segment is left holding them
            // (the flush pads the open stripe, it does not seal the segment).
            for _ in 0..rng.range_inclusive(1, 12) {
                let lba = rng.below(span - 4);
                let len = rng.range_inclusive(1, 4);
                let mut data = Vec::new();
                for l in lba..lba + len {
                    version += 1;
                    model[l as usize] = version;
                    data.extend(block(bs, l, version));
                }
                vol.write(lba, &data, false)
                    .await
                    .unwrap_or_else(|e| panic!("{what}: write: {e}"));
            }
            vol.flush()
                .await
                .unwrap_or_else(|e| panic!("{what}: flush: {e}"));
            let (open_before, ..) = zone_states(emus[0].as_ref()).await;
            sealed_open += u64::from(open_before > 0);
            vol.crash();
            drop(vol);
            for e in &emus {
                e.power_loss(rng.next_u64()).expect("power loss");
            }
            vol = ZapRaidVolume::open(as_zoned(&emus))
                .await
                .unwrap_or_else(|e| panic!("{what}: open: {e}"));
            let (open, _full, empty) = zone_states(emus[0].as_ref()).await;
            assert_eq!(
                open, 0,
                "{what}: a member zone stayed open across the restart"
            );
            assert!(
                empty >= 2,
                "{what}: only {empty} empty zones after the restart: finished segments are \
                 not being reclaimed"
            );
            vol.verify()
                .unwrap_or_else(|e| panic!("{what}: index: {e}"));
            check(&vol, &model, &what).await;
        }
        // Most cycles must have left a segment open for the restart to deal with.
        assert!(
            sealed_open >= CYCLES / 2,
            "seed {seed}: only {sealed_open} of {CYCLES} power cuts found a segment open"
        );
        vol.close().await.expect("close");
    });
}

#[test]
fn grouped_restarts_seal_the_open_segment_and_reclaim_it() {
    for seed in 1..=3 {
        cycles(GroupMode::Grouped(8), seed);
    }
}

#[test]
fn zone_write_only_restarts_seal_the_open_segment_and_reclaim_it() {
    cycles(GroupMode::ZoneWriteOnly, 11);
}
