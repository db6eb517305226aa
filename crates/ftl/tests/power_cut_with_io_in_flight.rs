//! Power cuts with user I/O in flight: each round starts a batch of concurrent user commands
//! (writes of one block, split writes longer than the device's transfer limit and across zone
//! ends, FUA writes, trims, write zeroes) on disjoint LBAs, while garbage collection and
//! checkpoints run, and cuts power at a seeded instant through `FaultyZoned`, so commands are
//! submitted and not yet executed, executed and not yet acknowledged, or acknowledged. The
//! batch is then dropped (the host is gone), the device loses its unflushed writes, and the
//! volume is mounted again. Every acknowledged FUA write and every write acknowledged before an
//! acknowledged flush must read back, nothing older than that, and an in-flight or unflushed
//! write reads old or new, per block. A third of the schedules also see a data zone go Read
//! Only mid-run (maybe open, maybe being collected): it must cost no data.
//! A failing schedule prints its seed; rerun it with `FTL_CUT_SEED=<seed>`.

mod common;

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use common::{block, check_after_crash, geometry, FaultModel};
use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume};
use futures::future::{join_all, LocalBoxFuture};
use futures::FutureExt;
use zns::{BlockDevice, FaultyZoned, SimRng, ZonedDevice};

type Faulty = FaultyZoned<Arc<EmuDevice>>;

#[derive(Default, Debug)]
struct Coverage {
    cuts: u64,
    cuts_with_commands_in_flight: u64,
    user_ops_in_flight_at_cut: u64,
    split_writes_in_flight_at_cut: u64,
    fua_writes_in_flight_at_cut: u64,
    trims_in_flight_at_cut: u64,
    user_ops_completed: u64,
    zones_faulted_read_only: u64,
    /// User writes the device refused behind a write ahead of them in their zone (several
    /// writes in flight per zone, overtaking on the way) and that went again.
    user_writes_resent: u64,
}

/// One user command of a batch.
#[derive(Clone, Copy, Debug)]
enum Op {
    Write {
        lba: u64,
        len: u64,
        first: u64,
        fua: bool,
    },
    Trim {
        lba: u64,
        len: u64,
        zeroes: bool,
        fua: bool,
    },
}

async fn schedule(seed: u64, rounds: usize, oob: u32) -> Coverage {
    let mut cov = Coverage::default();
    let mut rng = SimRng::new(seed);
    let emu_dev = common::device(
        zns::Geometry {
            oob_size: oob,
            ..geometry()
        },
        seed,
    );
    let faulty: Arc<Faulty> = Arc::new(FaultyZoned::new(emu_dev.clone(), seed));
    // Commands wait up to 2 ms before they reach the device (tokio's timer counts whole
    // milliseconds), so a cut finds some on the way.
    faulty.set_in_flight_delay(Duration::from_millis(2));
    let dev: Arc<dyn ZonedDevice> = faulty.clone();
    ftl::format(dev.as_ref(), FormatOptions::with_op(580), seed, false)
        .await
        .expect("format");
    // Commands overtake each other on their way to this device all the time, so garbage
    // collection copies one at a time per zone here, as it should on such a device
    // (pipelined copies that overtake are covered by crash_consistency.rs).
    let opts = ftl::MountOptions {
        copies_per_lane: 1,
        gc_background_free_zones: common::background_free_zones(oob),
        ..common::random_options(&mut rng)
    };
    let mut vol = FtlVolume::mount(dev.clone(), opts).await.expect("mount").0;
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let model = RefCell::new(FaultModel::new(n));
    let mut version = 0u64;
    // A third of the schedules see one data zone go Read Only at a random round, possibly
    // while it is open or being collected: nothing may be lost, and the volume goes on.
    let fault_round = rng.chance(0.33).then(|| rng.below(rounds as u64) as usize);
    for round in 0..rounds {
        if Some(round) == fault_round {
            let l = vol.layout();
            let zone = l.first_data_zone + rng.below(u64::from(l.data_zones)) as u32;
            faulty
                .fault_zone(zone, zns::ZoneState::ReadOnly)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: zone fault: {e}"));
            cov.zones_faulted_read_only += 1;
        }
        // A batch on disjoint LBAs: each op gets its own slice of the volume.
        let ops_n = rng.range_inclusive(2, 6);
        let slice = n / ops_n;
        let mut ops = Vec::new();
        for k in 0..ops_n {
            let base = k * slice;
            let len = if rng.chance(0.25) {
                rng.range_inclusive(17, slice.min(40))
            } else {
                rng.range_inclusive(1, 4)
            };
            let lba = base + rng.below(slice - len + 1);
            if rng.chance(0.8) {
                let first = version + 1;
                version += len;
                ops.push(Op::Write {
                    lba,
                    len,
                    first,
                    fua: rng.chance(0.25),
                });
            } else {
                let zeroes = rng.chance(0.5);
                ops.push(Op::Trim {
                    lba,
                    len,
                    zeroes,
                    fua: zeroes && rng.chance(0.5),
                });
            }
        }
        let done = RefCell::new(vec![false; ops.len()]);
        let futs: Vec<LocalBoxFuture<'_, ()>> = ops
            .iter()
            .enumerate()
            .map(|(k, op)| {
                let (vol, model, done) = (&vol, &model, &done);
                let op = *op;
                async move {
                    match op {
                        Op::Write {
                            lba,
                            len,
                            first,
                            fua,
                        } => {
                            let mut data = Vec::with_capacity(len as usize * bs);
                            for i in 0..len {
                                data.extend(block(bs, first + i));
                                model.borrow_mut().submitted(lba + i, first + i);
                            }
                            let r = vol.write(lba, &data, fua).await;
                            r.unwrap_or_else(|e| panic!("seed {seed} round {round}: write: {e}"));
                            let mut m = model.borrow_mut();
                            for i in 0..len {
                                m.completed(lba + i, first + i, fua);
                            }
                        }
                        Op::Trim {
                            lba,
                            len,
                            zeroes,
                            fua,
                        } => {
                            for i in 0..len {
                                model.borrow_mut().submitted(lba + i, 0);
                            }
                            let r = if zeroes {
                                vol.write_zeroes(lba, len, fua).await
                            } else {
                                vol.trim(lba, len).await
                            };
                            r.unwrap_or_else(|e| panic!("seed {seed} round {round}: trim: {e}"));
                            let mut m = model.borrow_mut();
                            for i in 0..len {
                                m.completed_last(lba + i, fua);
                            }
                        }
                    }
                    done.borrow_mut()[k] = true;
                }
                .boxed_local()
            })
            .collect();
        let cut_now = rng.chance(0.35);
        let cut_after = Duration::from_millis(rng.range_inclusive(1, 8));
        let batch = join_all(futs);
        if !cut_now {
            batch.await;
            cov.user_ops_completed += ops.len() as u64;
            if rng.chance(0.3) {
                vol.flush()
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} round {round}: flush: {e}"));
                model.borrow_mut().flushed();
            }
            continue;
        }
        // Power goes at the instant the timer fires, before the batch is dropped: nothing
        // more reaches the device, then the host forgets its commands.
        let cut = async {
            tokio::time::sleep(cut_after).await;
            faulty.cut_power()
        };
        let (finished, in_flight) = tokio::select! {
            // Polled in order, so a seed repeats its run exactly.
            biased;
            _ = batch => (true, faulty.cut_power()),
            n = cut => (false, n),
        };
        cov.cuts += 1;
        if in_flight > 0 {
            cov.cuts_with_commands_in_flight += 1;
        }
        if !finished {
            for (k, op) in ops.iter().enumerate() {
                if done.borrow()[k] {
                    continue;
                }
                cov.user_ops_in_flight_at_cut += 1;
                match op {
                    Op::Write { len, fua, .. } => {
                        cov.split_writes_in_flight_at_cut += u64::from(*len > 16);
                        cov.fua_writes_in_flight_at_cut += u64::from(*fua);
                    }
                    Op::Trim { .. } => cov.trims_in_flight_at_cut += 1,
                }
            }
        }
        let c = vol.stats().counters;
        cov.user_writes_resent += c.user_writes_resent + c.user_writes_resubmitted;
        vol.crash().await;
        emu_dev
            .power_loss(rng.next_u64())
            .expect("device power loss");
        faulty.restore_power();
        drop(vol);
        let opts = ftl::MountOptions {
            copies_per_lane: 1,
            gc_background_free_zones: common::background_free_zones(oob),
            ..common::random_options(&mut rng)
        };
        vol = FtlVolume::mount(dev.clone(), opts)
            .await
            .unwrap_or_else(|e| panic!("seed {seed} round {round}: mount after the cut: {e}"))
            .0;
        // The batch is gone, so nothing else borrows the model while the check runs.
        let mut m = model.replace(FaultModel::new(0));
        check_after_crash(&vol, &mut m, &format!("seed {seed} round {round}")).await;
        model.replace(m);
    }
    vol.unmount()
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: unmount: {e}"));
    cov
}

fn run(seed: u64, rounds: usize, oob: u32) -> Coverage {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
        .block_on(schedule(seed, rounds, oob))
}

fn many(seeds: std::ops::Range<u64>, oob: u32) -> Coverage {
    if let Some(seed) = std::env::var("FTL_CUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return run(seed, 40, oob);
    }
    let mut total = Coverage::default();
    for seed in seeds {
        let c = run(seed, 40, oob);
        total.cuts += c.cuts;
        total.cuts_with_commands_in_flight += c.cuts_with_commands_in_flight;
        total.user_ops_in_flight_at_cut += c.user_ops_in_flight_at_cut;
        total.split_writes_in_flight_at_cut += c.split_writes_in_flight_at_cut;
        total.fua_writes_in_flight_at_cut += c.fua_writes_in_flight_at_cut;
        total.trims_in_flight_at_cut += c.trims_in_flight_at_cut;
        total.user_ops_completed += c.user_ops_completed;
        total.zones_faulted_read_only += c.zones_faulted_read_only;
        total.user_writes_resent += c.user_writes_resent;
    }
    println!("oob {oob}: {total:?}");
    total
}

#[test]
fn power_cuts_with_user_writes_trims_and_collection_in_flight() {
    let c = many(0..250, 16);
    if std::env::var("FTL_CUT_SEED").is_ok() {
        return;
    }
    assert!(c.cuts >= 2_500, "{c:?}");
    assert!(c.cuts_with_commands_in_flight >= 1_000, "{c:?}");
    assert!(c.user_ops_in_flight_at_cut >= 2_000, "{c:?}");
    assert!(c.split_writes_in_flight_at_cut >= 200, "{c:?}");
    assert!(c.fua_writes_in_flight_at_cut >= 200, "{c:?}");
    assert!(c.trims_in_flight_at_cut >= 200, "{c:?}");
    assert!(c.zones_faulted_read_only >= 50, "{c:?}");
    // Power was cut with several writes in flight per zone, some of them going again.
    assert!(c.user_writes_resent >= 1_000, "{c:?}");
}

#[test]
fn power_cuts_with_io_in_flight_and_in_band_summaries() {
    let c = many(10_000..10_100, 0);
    if std::env::var("FTL_CUT_SEED").is_ok() {
        return;
    }
    assert!(c.cuts >= 1_000, "{c:?}");
    assert!(c.cuts_with_commands_in_flight >= 400, "{c:?}");
    assert!(c.user_ops_in_flight_at_cut >= 800, "{c:?}");
    assert!(c.zones_faulted_read_only >= 20, "{c:?}");
}
