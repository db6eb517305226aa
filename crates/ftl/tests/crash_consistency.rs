//! Deterministic crash testing: 1,000 seeded schedules of writes, FUA writes, trims, write
//! zeroes, flushes, concurrent batches and clean remounts over a small device that keeps
//! garbage collection busy, with power cut (volatile write cache on) at random points while
//! the maintenance task may be mid-collection or mid-checkpoint. After every remount: every
//! flushed or FUA write reads back, nothing reads back older than its last flushed version,
//! unflushed blocks read as their old or new contents, and the mapping's invariants hold.
//! The same schedules run on a ZNS+ device, where collection relocates with zone_compaction.
//! With threaded logging on (a ZNS+ device), the hot stream also writes into the holes of zones
//! the device re-opened with tl_open, and power is cut while it does.
//! A failing schedule prints its seed; rerun it with `FTL_CRASH_SEED=<seed>` (add
//! `FTL_CRASH_OOB=0` for the in-band summary runs, `FTL_CRASH_ZNS_PLUS=1` for the ZNS+ ones,
//! `FTL_CRASH_THREADED=1` for the threaded-logging ones).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{block, geometry, version_of, VersionModel};
use emu::{EmuDevice, FaultPlan};
use ftl::compaction::Placement;
use ftl::threaded::TlPolicy;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use futures::future::join_all;
use zns::{BlockDevice, SimRng};

async fn remount(
    dev: &Arc<EmuDevice>,
    opts: MountOptions,
    seed: u64,
    cov: &mut Coverage,
) -> Arc<FtlVolume> {
    match FtlVolume::mount(dev.clone(), opts).await {
        Ok((v, report)) => {
            cov.scanned_blocks += report.scanned_blocks;
            cov.deltas_applied += report.deltas_applied;
            v
        }
        Err(e) => panic!("seed {seed}: mount after a crash failed: {e}"),
    }
}

fn account(vol: &FtlVolume, cov: &mut Coverage) {
    let s = vol.stats();
    cov.gc_zones += s.counters.gc_zones;
    cov.trims += s.counters.trims;
    cov.tl_opens += s.threaded.opens;
    cov.tl_hole_blocks += s.threaded.hole_blocks;
    cov.tl_multi_zone_turns += s.threaded.multi_zone_turns;
    cov.serial_victims += s.counters.serial_victims;
    cov.deltas_written += s.counters.delta_checkpoints;
}

/// What a schedule exercised, so the test can prove its coverage.
#[derive(Default)]
struct Coverage {
    crashes: u64,
    gc_zones: u64,
    scanned_blocks: u64,
    trims: u64,
    /// Blocks the device moved by ZNS+ zone_compaction.
    blocks_compacted: u64,
    /// Zones re-opened for threaded logging, and blocks written into their holes.
    tl_opens: u64,
    tl_hole_blocks: u64,
    /// Turns of hybrid recycling that re-opened several zones behind one checkpoint.
    tl_multi_zone_turns: u64,
    /// Power cuts while a threaded zone had holes being written.
    tl_cuts: u64,
    /// Victims collected one at a time, each ended by its checkpoint (serial collection).
    serial_victims: u64,
    /// Delta checkpoints written, and applied by mounts after a cut.
    deltas_written: u64,
    deltas_applied: u64,
}

/// What a schedule runs on: per-block metadata bytes, and whether the device has the ZNS+
/// commands (then with 4 KiB blocks, so a 16 KiB chunk is 4 blocks and zones hold many, and
/// collection relocates with zone_compaction, placed as `Kind::placement` says).
#[derive(Clone, Copy)]
struct Kind {
    oob: u32,
    zns_plus: bool,
    /// Format with threaded logging (needs `zns_plus`).
    threaded: bool,
    /// Collect one victim at a time on half the mounts (`MountOptions::serial_collection`;
    /// needs `zns_plus`, whose schedules alone make the draw).
    serial: bool,
    /// Collection at the floor waits for the users' need (`MountOptions::gc_lead_blocks`,
    /// a lead of 0 to 8 blocks, drawn only on these schedules), with the background
    /// watermark one above the floor so that the wait applies.
    lead: bool,
}

impl Kind {
    const PLAIN: Kind = Kind {
        oob: 16,
        zns_plus: false,
        threaded: false,
        serial: false,
        lead: false,
    };

    /// Mount options for this kind: `common::random_options`, and on a ZNS+ device either
    /// placement of compacted blocks (one more draw, made only on ZNS+ schedules so the
    /// others keep their streams) and, with `serial`, on half the mounts serial collection
    /// (F2FS's one victim at a time, each ended by a checkpoint before its reset).
    fn options(self, rng: &mut SimRng) -> MountOptions {
        let mut o = common::random_options(rng);
        o.gc_background_free_zones = common::background_free_zones(self.oob);
        if self.threaded {
            // Threaded logging refuses Zone Append (a write must cover exactly one hole).
            o.write_mode = ftl::WriteMode::ZoneWrite;
            o.threaded = if rng.chance(0.5) {
                TlPolicy::Always
            } else {
                TlPolicy::Hybrid
            };
            // Collection's background watermark one zone above the floor (the mounts'
            // default): threaded logging comes when collection would, and with the
            // watermark two zones above the floor collection takes the zones with holes
            // before the floor is reached, leaving few turns to cut power in.
            o.gc_background_free_zones = o.gc_foreground_free_zones + 1;
        }
        if self.zns_plus {
            o.compaction = Some(if rng.chance(0.5) {
                Placement::CopybackAware
            } else {
                Placement::SourceOrder
            });
        }
        if self.serial {
            o.serial_collection = rng.chance(0.5);
        }
        if self.lead {
            o.gc_background_free_zones = o.gc_foreground_free_zones + 1;
            o.gc_lead_blocks = Some(rng.range_inclusive(0, 8));
        }
        o
    }
}

async fn schedule(seed: u64, ops: usize, kind: Kind) -> Coverage {
    let mut cov = Coverage::default();
    let mut rng = SimRng::new(seed);
    let g = zns::Geometry {
        oob_size: kind.oob,
        block_size: if kind.zns_plus { 4096 } else { 512 },
        ..geometry()
    };
    let dev = if kind.zns_plus {
        common::device_plus(g, seed)
    } else {
        common::device(g, seed)
    };
    // Random extra latency makes device commands pend, so the maintenance task and the
    // workload interleave at varying points, and power cuts land mid-collection.
    dev.set_faults(FaultPlan {
        seed,
        extra_latency: Duration::from_micros(40),
        latency_probability: 0.25,
        ..Default::default()
    })
    .expect("fault plan");
    let mut opts = kind.options(&mut rng);
    let fmt = FormatOptions {
        threaded_logging: kind.threaded,
        ..FormatOptions::with_op(580)
    };
    ftl::format(dev.as_ref(), fmt, seed, false)
        .await
        .expect("format");
    let mut vol = remount(&dev, opts, seed, &mut cov).await;
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut model = VersionModel::new(n);
    let mut version = 0u64;
    for op in 0..ops {
        let at = |rng: &mut SimRng, len: u64| rng.below(n - len + 1);
        match rng.below(100) {
            0..=54 => {
                let len = rng.range_inclusive(1, 4);
                let lba = at(&mut rng, len);
                let fua = rng.chance(0.1);
                let mut data = Vec::new();
                for i in 0..len {
                    version += 1;
                    data.extend(block(bs, version));
                    model.write(lba + i, version, fua);
                }
                vol.write(lba, &data, fua)
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} op {op}: write failed: {e}"));
            }
            55..=61 => {
                let len = rng.range_inclusive(1, 8);
                let lba = at(&mut rng, len);
                let zeroes = rng.chance(0.5);
                let fua = zeroes && rng.chance(0.5);
                let r = if zeroes {
                    vol.write_zeroes(lba, len, fua).await
                } else {
                    vol.trim(lba, len).await
                };
                r.unwrap_or_else(|e| panic!("seed {seed} op {op}: trim failed: {e}"));
                for i in 0..len {
                    model.write(lba + i, 0, fua);
                }
            }
            62..=69 => {
                vol.flush()
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} op {op}: flush failed: {e}"));
                model.flush();
            }
            70..=77 => {
                // Distinct LBAs written concurrently.
                let mut lbas: Vec<u64> = (0..4).map(|_| rng.below(n)).collect();
                lbas.sort_unstable();
                lbas.dedup();
                let bufs: Vec<(u64, Vec<u8>)> = lbas
                    .iter()
                    .map(|l| {
                        version += 1;
                        model.write(*l, version, false);
                        (*l, block(bs, version))
                    })
                    .collect();
                for r in join_all(bufs.iter().map(|(l, d)| vol.write(*l, d, false))).await {
                    r.unwrap_or_else(|e| {
                        panic!("seed {seed} op {op}: concurrent write failed: {e}")
                    });
                }
            }
            78..=80 => {
                for _ in 0..rng.below(6) {
                    tokio::time::sleep(Duration::from_micros(rng.range_inclusive(1, 60))).await;
                }
                cov.tl_cuts += u64::from(tl_opened_now(&dev).await);
                dev.power_loss(rng.next_u64()).expect("power loss");
                vol.crash().await;
                account(&vol, &mut cov);
                cov.crashes += 1;
                opts = kind.options(&mut rng);
                vol = remount(&dev, opts, seed, &mut cov).await;
                model
                    .check_all(&vol, seed, &format!("after power loss at op {op}"))
                    .await;
            }
            81 => {
                vol.unmount()
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} op {op}: unmount failed: {e}"));
                model.flush();
                vol = remount(&dev, opts, seed, &mut cov).await;
            }
            _ => {
                let lba = rng.below(n);
                let mut buf = vec![0u8; bs];
                vol.read(lba, &mut buf)
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed} op {op}: read failed: {e}"));
                assert_eq!(
                    version_of(&buf),
                    Some(model.latest(lba)),
                    "seed {seed} op {op}: LBA {lba} is not its latest write"
                );
            }
        }
    }
    dev.power_loss(rng.next_u64()).expect("power loss");
    vol.crash().await;
    account(&vol, &mut cov);
    cov.crashes += 1;
    let vol = remount(&dev, opts, seed, &mut cov).await;
    model
        .check_all(&vol, seed, "after the final power loss")
        .await;
    let stats = vol.stats();
    assert!(stats.mapped_blocks <= n);
    cov.blocks_compacted = dev.stats().blocks_compacted;
    cov
}

/// Whether the device has a TL-opened zone (attribute TLO) right now.
async fn tl_opened_now(dev: &EmuDevice) -> bool {
    use zns::ZonedDevice;
    let r = dev
        .report_zones(0, zns::ReportFilter::All, false, usize::MAX)
        .await
        .expect("report zones");
    r.zones
        .iter()
        .any(|z| z.attributes & zns::zone_attr::TLO != 0)
}

fn run(seed: u64, ops: usize, kind: Kind) -> Coverage {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(schedule(seed, ops, kind))
}

/// Runs the schedules of `seeds` (300 operations each) on `kind`; what they exercised, summed.
fn run_many(seeds: std::ops::Range<u64>, kind: Kind) -> Coverage {
    let mut total = Coverage::default();
    for seed in seeds {
        let c = run(seed, 300, kind);
        total.crashes += c.crashes;
        total.gc_zones += c.gc_zones;
        total.scanned_blocks += c.scanned_blocks;
        total.trims += c.trims;
        total.blocks_compacted += c.blocks_compacted;
        total.tl_opens += c.tl_opens;
        total.tl_hole_blocks += c.tl_hole_blocks;
        total.tl_multi_zone_turns += c.tl_multi_zone_turns;
        total.tl_cuts += c.tl_cuts;
        total.serial_victims += c.serial_victims;
        total.deltas_written += c.deltas_written;
        total.deltas_applied += c.deltas_applied;
    }
    total
}

#[test]
fn one_thousand_seeded_crash_schedules() {
    if let Some(seed) = std::env::var("FTL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        let oob = std::env::var("FTL_CRASH_OOB")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(16);
        let zns_plus = std::env::var("FTL_CRASH_ZNS_PLUS").is_ok_and(|v| v == "1");
        let threaded = std::env::var("FTL_CRASH_THREADED").is_ok_and(|v| v == "1");
        run(
            seed,
            300,
            Kind {
                oob,
                zns_plus: zns_plus || threaded,
                threaded,
                // As that kind runs in `three_hundred_crash_schedules_on_a_zns_plus_device`.
                serial: zns_plus && !threaded,
                lead: std::env::var("FTL_CRASH_LEAD").is_ok_and(|v| v == "1"),
            },
        );
        return;
    }
    let total = run_many(0..1000, Kind::PLAIN);
    println!(
        "{} power cuts, {} zones collected, {} blocks scanned in recovery, {} trims, {} deltas written, {} applied",
        total.crashes, total.gc_zones, total.scanned_blocks, total.trims, total.deltas_written, total.deltas_applied
    );
    // The schedules must really have cut power, collected garbage, scanned and trimmed.
    assert!(total.crashes >= 5_000, "only {} power cuts", total.crashes);
    assert!(
        total.gc_zones >= 10_000,
        "only {} zones collected",
        total.gc_zones
    );
    assert!(
        total.scanned_blocks >= 100_000,
        "only {} blocks scanned",
        total.scanned_blocks
    );
    assert!(total.trims >= 5_000, "only {} trims", total.trims);
    // Delta checkpoints were written, and mounts after a cut applied chains of them.
    assert!(
        total.deltas_written >= 100 && total.deltas_applied >= 500,
        "only {} deltas written, {} applied",
        total.deltas_written,
        total.deltas_applied
    );
}

/// The same schedules on a device without per-block metadata, where the FTL keeps its block
/// tags in in-band summary blocks (written when a group fills, on flush and with FUA).
#[test]
fn three_hundred_crash_schedules_with_in_band_summaries() {
    let total = run_many(
        5_000..5_300,
        Kind {
            oob: 0,
            ..Kind::PLAIN
        },
    );
    assert!(total.crashes >= 1_500, "only {} power cuts", total.crashes);
    assert!(
        total.gc_zones >= 3_000,
        "only {} zones collected",
        total.gc_zones
    );
    assert!(
        total.scanned_blocks >= 30_000,
        "only {} blocks scanned",
        total.scanned_blocks
    );
}

/// The schedules on a ZNS+ device: garbage collection moves blocks with zone_compaction, in
/// source order or copyback-aware, on half the mounts one victim at a time (serial
/// collection: copies, checkpoint, reset), and power is cut while compactions are in flight.
#[test]
fn three_hundred_crash_schedules_on_a_zns_plus_device() {
    let total = run_many(
        9_000..9_300,
        Kind {
            zns_plus: true,
            serial: true,
            ..Kind::PLAIN
        },
    );
    println!(
        "{} power cuts, {} zones collected ({} one at a time), {} blocks compacted",
        total.crashes, total.gc_zones, total.serial_victims, total.blocks_compacted
    );
    assert!(
        total.serial_victims >= 500,
        "only {} victims collected one at a time",
        total.serial_victims
    );
    assert!(total.crashes >= 1_500, "only {} power cuts", total.crashes);
    assert!(
        total.gc_zones >= 3_000,
        "only {} zones collected",
        total.gc_zones
    );
    assert!(
        total.blocks_compacted >= 30_000,
        "only {} blocks compacted",
        total.blocks_compacted
    );
}

/// The whole suite, 1,000 schedules, on a ZNS+ device formatted with threaded logging (issue
/// 13: the crash suite passes with ZNS+ on): hybrid recycling or `Always` re-opens full zones
/// with tl_open (after a checkpoint that records them) and the hot stream writes into their
/// holes while collection relocates others with zone_compaction (copyback-aware or source
/// order); power is cut while holes are being written and compactions are in flight, and
/// every remount must find every durable write.
#[test]
fn one_thousand_crash_schedules_with_threaded_logging_and_compaction() {
    let total = run_many(
        13_000..14_000,
        Kind {
            zns_plus: true,
            threaded: true,
            ..Kind::PLAIN
        },
    );
    println!(
        "{} power cuts ({} with a TL-opened zone), {} zones collected, {} blocks compacted, {} zones TL-opened ({} turns of several zones), {} blocks into holes",
        total.crashes,
        total.tl_cuts,
        total.gc_zones,
        total.blocks_compacted,
        total.tl_opens,
        total.tl_multi_zone_turns,
        total.tl_hole_blocks
    );
    assert!(total.crashes >= 5_000, "only {} power cuts", total.crashes);
    assert!(
        total.gc_zones >= 10_000,
        "only {} zones collected",
        total.gc_zones
    );
    assert!(
        total.blocks_compacted >= 30_000,
        "only {} blocks compacted",
        total.blocks_compacted
    );
    assert!(
        total.tl_opens >= 500,
        "only {} zones TL-opened",
        total.tl_opens
    );
    assert!(
        total.tl_hole_blocks >= 10_000,
        "only {} blocks written into holes",
        total.tl_hole_blocks
    );
    // A turn comes at the floor and takes only the zones the hot stream needs (docs/
    // DESIGN.md "ZNS+", Choice): fewer turns re-open several zones than when a turn took
    // up to four two zones above the floor (1,000 and 1,000 before 2026-11-25).
    assert!(
        total.tl_cuts >= 600,
        "only {} power cuts with a TL-opened zone",
        total.tl_cuts
    );
    assert!(
        total.tl_multi_zone_turns >= 150,
        "only {} turns re-opened several zones behind one checkpoint",
        total.tl_multi_zone_turns
    );
}

/// Threaded logging with serial collection (the ZNS+ rows of the paper's configuration,
/// `znsplus-fig8`'s ZNS+-fg): on half the mounts a compaction takes one victim at a time,
/// its copies, a checkpoint and its reset, while the hot stream writes into the holes of
/// TL-opened zones; power is cut anywhere, and every remount must find every durable write.
#[test]
fn three_hundred_crash_schedules_with_threaded_logging_and_serial_collection() {
    let total = run_many(
        15_000..15_300,
        Kind {
            zns_plus: true,
            threaded: true,
            serial: true,
            ..Kind::PLAIN
        },
    );
    println!(
        "{} power cuts ({} with a TL-opened zone), {} zones collected ({} one at a time), {} zones TL-opened, {} blocks into holes",
        total.crashes,
        total.tl_cuts,
        total.gc_zones,
        total.serial_victims,
        total.tl_opens,
        total.tl_hole_blocks
    );
    assert!(total.crashes >= 1_500, "only {} power cuts", total.crashes);
    assert!(
        total.serial_victims >= 500,
        "only {} victims collected one at a time",
        total.serial_victims
    );
    assert!(
        total.tl_opens >= 500,
        "only {} zones TL-opened",
        total.tl_opens
    );
    // 400 before turns came at the floor (2026-11-25).
    assert!(
        total.tl_cuts >= 300,
        "only {} power cuts with a TL-opened zone",
        total.tl_cuts
    );
    // 10,000 before turns came at the floor (2026-11-25).
    assert!(
        total.tl_hole_blocks >= 8_000,
        "only {} blocks written into holes",
        total.tl_hole_blocks
    );
}

/// The schedules with collection at the floor waiting until a user writer waits or a user
/// zone is within the lead of full (`MountOptions::gc_lead_blocks`): rounds start later and
/// from writers' waits, and every remount must still find every durable write.
#[test]
fn three_hundred_crash_schedules_with_collection_waiting_for_the_users() {
    let total = run_many(
        17_000..17_300,
        Kind {
            lead: true,
            ..Kind::PLAIN
        },
    );
    assert!(total.crashes >= 1_500, "only {} power cuts", total.crashes);
    assert!(
        total.gc_zones >= 3_000,
        "only {} zones collected",
        total.gc_zones
    );
}

// The device flush after a turn's threaded-logging record, before any hole of its zones is
// written, is needed: with it removed (gc/tl.rs), this schedule of the serial-collection
// threaded-logging test fails after its cut at operation 292: LBA 123 reads back version
// 368 though version 475 was durable (a write the record's zone scan would have found, if
// the record had been durable with it).
#[test]
fn a_threaded_logging_record_is_durable_before_its_holes_are_written() {
    run(
        15_092,
        300,
        Kind {
            zns_plus: true,
            threaded: true,
            serial: true,
            ..Kind::PLAIN
        },
    );
}

// Regression: a zone chosen for threaded logging was recorded in a checkpoint before the
// device re-opened it, so after a cut recovery scanned the whole zone, which the device
// still reported Full, holes included. One hole still held a trim record an earlier cut had
// lost (the device keeps a lost write's bytes in a TL-opened zone's holes), and recovery
// applied it: LBA 234 lost its flushed data. Now the device re-opens the zone first, scans
// stop at its write pointer, and a TL-opened zone is finished only when a checkpoint records
// it full.
#[test]
fn a_write_lost_in_a_hole_is_never_recovered() {
    run(
        13_054,
        300,
        Kind {
            zns_plus: true,
            threaded: true,
            ..Kind::PLAIN
        },
    );
}
