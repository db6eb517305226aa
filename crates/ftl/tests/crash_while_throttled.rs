//! Power cuts while user writes are paced by garbage collection (`plan::Throttle`, or the
//! round under way, `plan::RoundPace`, on volumes without a throttled band) and
//! collection copies through several GC lanes at once, with rounds that reset their victims
//! without a device flush when the copies' FUA made them durable, rounds whose copies run
//! while the previous round flushes and resets its victims, and lanes that go on copying into
//! their next zone while the copies to their full one are in flight. Seeded schedules fill a
//! volume whose spare affords four lanes and a wide throttled band, then overwrite it with
//! concurrent writers, flushes, FUA writes and trims, cutting power (volatile write cache on)
//! at random points. After every remount: flushed and FUA data reads back, nothing reads older
//! than its last durable version, and the mapping's invariants hold. A failing schedule prints
//! its seed; rerun it with `FTL_THROTTLED_SEED=<seed>` (`FTL_PACED_SEED` for the paced ones).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{block, VersionModel};
use emu::{EmuDevice, FaultPlan};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use futures::future::join_all;
use zns::{BlockDevice, SimRng};

/// 128 zones of 64 blocks of 512 bytes: at 40% over-provisioning the spare affords four GC
/// lanes besides two hot zones (`plan::gc_lanes`).
fn geometry() -> zns::Geometry {
    zns::Geometry {
        zone_count: 128,
        max_open: 14,
        max_active: 14,
        ..common::geometry()
    }
}

/// Options with a throttled band of 11 zones (background 14, floor 3) and up to four GC lanes
/// (a volume takes one unless told).
fn options(rng: &mut SimRng) -> MountOptions {
    MountOptions {
        hot_zones: rng.range_inclusive(1, 2) as u32,
        gc_lanes_max: 4,
        gc_background_free_zones: 14,
        gc_foreground_free_zones: 3,
        write_mode: ftl::WriteMode::ZoneWrite,
        ..common::random_options(rng)
    }
}

/// Options paced by rounds (`MountOptions::pace_rounds`): watermarks one zone apart, so no
/// throttled band, and user writes paced by the round under way once their room is short.
fn paced_options(rng: &mut SimRng) -> MountOptions {
    MountOptions {
        hot_zones: 1,
        hot_cold: false,
        gc_background_free_zones: 4,
        pace_rounds: Some(true),
        ..options(rng)
    }
}

/// Options whose collection runs on across rounds (`MountOptions::gc_run_on`): watermarks
/// one zone apart, each round planned while the previous one flushes and resets counting the
/// zones it resets, its lane waiting for them when no zone is free, 32 copies per lane.
fn run_on_options(rng: &mut SimRng) -> MountOptions {
    MountOptions {
        gc_background_free_zones: 4,
        gc_lanes_max: 1,
        copies_per_lane: 32,
        pace_rounds: Some(false),
        gc_run_on: Some(true),
        ..options(rng)
    }
}

/// Which collector the schedules run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Throttled,
    Paced,
    RunOn,
}

/// What the schedules exercised.
#[derive(Default)]
struct Coverage {
    crashes: u64,
    crashes_throttled: u64,
    throttle_waits: u64,
    gc_rounds: u64,
    gc_rounds_unflushed: u64,
    gc_rounds_overlapped: u64,
    gc_lane_zones_chained: u64,
    gc_rounds_on_owed_resets: u64,
    gc_waits_for_resets: u64,
}

async fn mount(dev: &Arc<EmuDevice>, opts: MountOptions, seed: u64) -> Arc<FtlVolume> {
    match FtlVolume::mount(dev.clone(), opts).await {
        Ok((v, _)) => v,
        Err(e) => panic!("seed {seed}: mount failed: {e}"),
    }
}

fn account(vol: &FtlVolume, cov: &mut Coverage) {
    let c = vol.stats().counters;
    cov.throttle_waits += c.throttle_waits;
    cov.gc_rounds += c.gc_rounds;
    cov.gc_rounds_unflushed += c.gc_rounds - c.gc_round_flushes;
    cov.gc_rounds_overlapped += c.gc_rounds_overlapped;
    cov.gc_lane_zones_chained += c.gc_lane_zones_chained;
    cov.gc_rounds_on_owed_resets += c.gc_rounds_on_owed_resets;
    cov.gc_waits_for_resets += c.gc_waits_for_resets;
}

async fn schedule(seed: u64, ops: usize, kind: Kind) -> Coverage {
    let options: fn(&mut SimRng) -> MountOptions = match kind {
        Kind::Throttled => options,
        Kind::Paced => paced_options,
        Kind::RunOn => run_on_options,
    };
    // Writers at once: paced volumes and those running on take more, so that collection
    // falls behind them.
    let width: u64 = if kind == Kind::Throttled { 8 } else { 32 };
    let mut cov = Coverage::default();
    let mut rng = SimRng::new(seed);
    let dev = common::device(geometry(), seed);
    dev.set_faults(FaultPlan {
        seed,
        extra_latency: Duration::from_micros(40),
        latency_probability: 0.25,
        ..Default::default()
    })
    .expect("fault plan");
    ftl::format(dev.as_ref(), FormatOptions::with_op(400), seed, false)
        .await
        .expect("format");
    let mut opts = options(&mut rng);
    let mut vol = mount(&dev, opts, seed).await;
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut model = VersionModel::new(n);
    let mut version = 0u64;
    // Fill the volume so that overwrites soon put garbage collection in debt.
    for lba in (0..n).step_by(16) {
        let len = 16.min(n - lba);
        let mut data = Vec::new();
        for i in 0..len {
            version += 1;
            data.extend(block(bs, version));
            model.write(lba + i, version, false);
        }
        vol.write(lba, &data, false).await.expect("fill");
    }
    for op in 0..ops {
        match rng.below(100) {
            0..=79 => {
                // `width` concurrent writers on distinct LBAs, some FUA.
                let mut lbas: Vec<u64> = (0..width).map(|_| rng.below(n)).collect();
                lbas.sort_unstable();
                lbas.dedup();
                let writes: Vec<(u64, Vec<u8>, bool)> = lbas
                    .iter()
                    .map(|&l| {
                        version += 1;
                        let fua = rng.chance(0.05);
                        model.write(l, version, fua);
                        (l, block(bs, version), fua)
                    })
                    .collect();
                let done = join_all(writes.iter().map(|(l, d, f)| vol.write(*l, d, *f))).await;
                for r in done {
                    r.unwrap_or_else(|e| panic!("seed {seed} op {op}: write failed: {e}"));
                }
            }
            80..=84 => {
                let lba = rng.below(n);
                vol.trim(lba, 1)
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} op {op}: trim failed: {e}"));
                model.write(lba, 0, false);
            }
            85..=89 => {
                vol.flush()
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} op {op}: flush failed: {e}"));
                model.flush();
            }
            _ => {
                // Cut power with writes in flight, some of them waiting for collection.
                let lbas: Vec<u64> = (0..width).map(|_| rng.below(n)).collect();
                let bufs: Vec<Vec<u8>> = (0..width).map(|i| block(bs, version + 1 + i)).collect();
                let free = vol.stats().free_zones;
                let cut_after = Duration::from_micros(rng.range_inclusive(1, 400));
                {
                    let writes =
                        join_all(lbas.iter().zip(&bufs).map(|(l, d)| vol.write(*l, d, false)));
                    tokio::pin!(writes);
                    let _ = tokio::time::timeout(cut_after, &mut writes).await;
                    dev.power_loss(rng.next_u64()).expect("power loss");
                }
                // Each of those writes may or may not have happened: allow both.
                for (i, l) in lbas.iter().enumerate() {
                    model.write(*l, version + 1 + i as u64, false);
                }
                version += width;
                vol.crash().await;
                account(&vol, &mut cov);
                cov.crashes += 1;
                cov.crashes_throttled += u64::from(free < opts.gc_background_free_zones);
                opts = options(&mut rng);
                vol = mount(&dev, opts, seed).await;
                model
                    .check_all(&vol, seed, &format!("after power loss at op {op}"))
                    .await;
            }
        }
    }
    dev.power_loss(rng.next_u64()).expect("power loss");
    vol.crash().await;
    account(&vol, &mut cov);
    cov.crashes += 1;
    let vol = mount(&dev, opts, seed).await;
    model
        .check_all(&vol, seed, "after the final power loss")
        .await;
    cov
}

fn run(seed: u64, ops: usize, kind: Kind) -> Coverage {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(schedule(seed, ops, kind))
}

#[test]
fn power_cuts_while_user_writes_wait_for_collection_on_several_lanes() {
    if let Some(seed) = std::env::var("FTL_THROTTLED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, 400, Kind::Throttled);
        return;
    }
    let mut total = Coverage::default();
    for seed in 0..40u64 {
        let c = run(seed, 400, Kind::Throttled);
        total.crashes += c.crashes;
        total.crashes_throttled += c.crashes_throttled;
        total.throttle_waits += c.throttle_waits;
        total.gc_rounds += c.gc_rounds;
        total.gc_rounds_unflushed += c.gc_rounds_unflushed;
        total.gc_rounds_overlapped += c.gc_rounds_overlapped;
        total.gc_lane_zones_chained += c.gc_lane_zones_chained;
    }
    println!(
        "{} power cuts ({} in the throttled band), {} throttled waits, {} rounds ({} without a flush, {} overlapping a finish), {} lane zones opened with copies in flight",
        total.crashes,
        total.crashes_throttled,
        total.throttle_waits,
        total.gc_rounds,
        total.gc_rounds_unflushed,
        total.gc_rounds_overlapped,
        total.gc_lane_zones_chained
    );
    assert!(total.crashes >= 200, "only {} power cuts", total.crashes);
    assert!(
        total.crashes_throttled >= 100,
        "only {} power cuts in the throttled band",
        total.crashes_throttled
    );
    assert!(
        total.throttle_waits >= 1_000,
        "only {} throttled waits",
        total.throttle_waits
    );
    assert!(
        total.gc_rounds_unflushed >= 100,
        "only {} of {} rounds without a flush",
        total.gc_rounds_unflushed,
        total.gc_rounds
    );
    assert!(
        total.gc_rounds_overlapped >= 100,
        "only {} of {} rounds copied while the previous one finished",
        total.gc_rounds_overlapped,
        total.gc_rounds
    );
    assert!(
        total.gc_lane_zones_chained >= 100,
        "only {} lane zones opened while copies to the full one were in flight",
        total.gc_lane_zones_chained
    );
}

// The same schedules with user writes paced by the round under way (`plan::RoundPace`)
// instead of a throttled band: writers wait for copies while their room is short and the
// free zones are at the floor, and power is cut while they do.
#[test]
fn power_cuts_while_user_writes_are_paced_by_the_round_under_way() {
    if let Some(seed) = std::env::var("FTL_PACED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, 400, Kind::Paced);
        return;
    }
    let mut total = Coverage::default();
    for seed in 0..20u64 {
        let c = run(seed, 400, Kind::Paced);
        total.crashes += c.crashes;
        total.crashes_throttled += c.crashes_throttled;
        total.throttle_waits += c.throttle_waits;
        total.gc_rounds += c.gc_rounds;
    }
    println!(
        "{} power cuts ({} at the floor), {} paced waits, {} rounds",
        total.crashes, total.crashes_throttled, total.throttle_waits, total.gc_rounds
    );
    assert!(total.crashes >= 100, "only {} power cuts", total.crashes);
    assert!(
        total.crashes_throttled >= FLOOR_CRASHES_MIN,
        "only {} power cuts at the floor",
        total.crashes_throttled
    );
    assert!(
        total.throttle_waits >= PACED_WAITS_MIN,
        "only {} paced waits",
        total.throttle_waits
    );
}

// The same schedules with collection running on across rounds (`MountOptions::gc_run_on`):
// power is cut while a round copies beside the previous round's flush and resets, counting
// the zones those resets free, and while its lane waits for them.
#[test]
fn power_cuts_while_collection_runs_on_across_rounds() {
    if let Some(seed) = std::env::var("FTL_RUN_ON_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, 400, Kind::RunOn);
        return;
    }
    let mut total = Coverage::default();
    for seed in 0..20u64 {
        let c = run(seed, 400, Kind::RunOn);
        total.crashes += c.crashes;
        total.crashes_throttled += c.crashes_throttled;
        total.gc_rounds += c.gc_rounds;
        total.gc_rounds_overlapped += c.gc_rounds_overlapped;
        total.gc_rounds_on_owed_resets += c.gc_rounds_on_owed_resets;
        total.gc_waits_for_resets += c.gc_waits_for_resets;
    }
    println!(
        "{} power cuts ({} at the floor), {} rounds ({} overlapping a finish, {} counting its resets), {} lane waits for resets",
        total.crashes,
        total.crashes_throttled,
        total.gc_rounds,
        total.gc_rounds_overlapped,
        total.gc_rounds_on_owed_resets,
        total.gc_waits_for_resets
    );
    assert!(total.crashes >= 100, "only {} power cuts", total.crashes);
    assert!(
        total.crashes_throttled >= RUN_ON_FLOOR_CRASHES_MIN,
        "only {} power cuts at the floor",
        total.crashes_throttled
    );
    assert!(
        total.gc_rounds_on_owed_resets >= RUN_ON_ROUNDS_MIN,
        "only {} rounds counted a finish's resets",
        total.gc_rounds_on_owed_resets
    );
    assert!(
        total.gc_waits_for_resets >= RUN_ON_WAITS_MIN,
        "only {} lane waits for a finish's resets",
        total.gc_waits_for_resets
    );
}

/// Floors of the running-on schedules' coverage, about half of what seeds 0-19 gave (105
/// power cuts at the floor, 1,181 rounds counting a finish's resets, 94 lane waits for
/// them, 2026-11-25).
const RUN_ON_FLOOR_CRASHES_MIN: u64 = 50;
const RUN_ON_ROUNDS_MIN: u64 = 590;
const RUN_ON_WAITS_MIN: u64 = 45;

/// Floors of the paced schedules' coverage, about half of what seeds 0-19 gave (198 power
/// cuts at the floor, 1,882 paced waits, 2026-11-25).
const FLOOR_CRASHES_MIN: u64 = 100;
const PACED_WAITS_MIN: u64 = 900;
