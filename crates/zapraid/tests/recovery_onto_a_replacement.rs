//! Full-drive recovery onto a replacement (`ZapRaidVolume::replace_member`): for every member
//! position, online while a client writes and reads; with power cut at every command of the
//! replacement along a recovery (the array reopens degraded and a second recovery finishes
//! it); with a second member failing during the recovery (the volume fails naming both,
//! never returning wrong data); and the refusals (a replacement holding foreign data, a
//! healthy member, another geometry). After each recovery the replacement alone must hold
//! the member's blocks: another member is then failed and every block must still read back.

mod common;

use std::sync::Arc;

use common::{block, check, geometry, opts, runtime, SpareArray};
use emu::{EmuConfig, EmuDevice};
use zapraid::{GroupMode, ZapRaidError, ZapRaidVolume};
use zns::{BlockDevice, NvmeStatus, OpKind, OpSet, SimRng, ZonedDevice};

const ZONES: u32 = 16;
const SPAN: u64 = 160;

/// Writes `batches` batches of up to 8 random LBAs below `SPAN` (versions counting on from
/// `*version`) into `model`; trims a few.
async fn writes(
    vol: &ZapRaidVolume,
    model: &mut [u64],
    version: &mut u64,
    batches: usize,
    seed: u64,
) {
    let bs = vol.block_size() as usize;
    let mut rng = SimRng::new(seed);
    for b in 0..batches {
        let lba = rng.below(SPAN - 8);
        let len = rng.range_inclusive(1, 8);
        if b % 13 == 12 {
            vol.trim(lba, len).await.expect("trim");
            for l in lba..lba + len {
                model[l as usize] = 0;
            }
            continue;
        }
        let mut data = Vec::new();
        for l in lba..lba + len {
            *version += 1;
            model[l as usize] = *version;
            data.extend(block(bs, l, *version));
        }
        vol.write(lba, &data, false).await.expect("write");
    }
}

/// A formatted array holding data, flushed, with member `p` failed durably and more data
/// written degraded.
async fn degraded_array(a: &SpareArray, p: usize, seed: u64) -> (ZapRaidVolume, Vec<u64>, u64) {
    let vol = ZapRaidVolume::format(a.members(None), &opts(GroupMode::Grouped(8)))
        .await
        .expect("format");
    let mut model = vec![0u64; SPAN as usize];
    let mut version = 0;
    writes(&vol, &mut model, &mut version, 120, seed).await;
    vol.flush().await.expect("flush");
    vol.fail_member_durably(p).await.expect("fail member");
    writes(&vol, &mut model, &mut version, 60, seed + 1).await;
    vol.flush().await.expect("flush");
    (vol, model, version)
}

/// The replacement holds member `p`'s blocks: with another member failed every block still
/// reads back (its blocks on the replacement are read, or serve to rebuild the other's).
async fn replacement_holds_the_data(vol: &ZapRaidVolume, p: usize, model: &[u64], what: &str) {
    let q = (p + 1) % 4;
    vol.fail_member(q);
    assert_eq!(vol.failed_members(), vec![q], "{what}");
    check(
        vol,
        model,
        &format!("{what}, member {q} failed after the recovery"),
    )
    .await;
}

#[test]
fn recovery_under_client_io_for_every_member_position() {
    for p in 0..4 {
        let seed = 40 + p as u64;
        runtime().block_on(async {
            let a = SpareArray::new(ZONES, seed);
            let (vol, mut model, mut version) = degraded_array(&a, p, seed).await;
            assert_eq!(vol.failed_members(), vec![p]);
            // The client writes and reads while the recovery runs; every read must return the
            // version last written.
            let client = async {
                let bs = vol.block_size() as usize;
                let mut rng = SimRng::new(seed * 3);
                // Client commands issued with the recovery part done: the I/O overlapped it.
                let mut overlapped = 0u32;
                let during = || {
                    u32::from(
                        vol.recovery_progress()
                            .is_some_and(|p| !p.finished && p.blocks_done > 0),
                    )
                };
                for round in 0..40 {
                    overlapped += during();
                    writes(&vol, &mut model, &mut version, 3, seed * 100 + round).await;
                    for _ in 0..4 {
                        let lba = rng.below(SPAN);
                        let mut b = vec![0u8; bs];
                        overlapped += during();
                        vol.read(lba, &mut b).await.expect("read during recovery");
                        let v = model[lba as usize];
                        let want = if v == 0 {
                            vec![0u8; bs]
                        } else {
                            block(bs, lba, v)
                        };
                        assert!(
                            b == want,
                            "member {p}: LBA {lba} during recovery is not version {v}"
                        );
                    }
                    tokio::task::yield_now().await;
                }
                overlapped
            };
            let (r, overlapped) = futures::join!(vol.replace_member(p, a.spare(), false), client);
            // Measured: 11, 11, 6, 11 for members 0..3.
            assert!(
                overlapped >= 5,
                "member {p}: only {overlapped} client commands ran during the recovery"
            );
            r.unwrap_or_else(|e| panic!("member {p}: recovery: {e}"));
            let pr = vol.recovery_progress().expect("progress");
            assert!(pr.finished, "{pr:?}");
            assert_eq!(pr.member, p);
            assert!(
                pr.blocks_total > 0 && pr.blocks_done == pr.blocks_total,
                "{pr:?}"
            );
            assert!(vol.failed_members().is_empty(), "member {p} still failed");
            vol.verify().expect("index");
            check(&vol, &model, &format!("member {p} recovered")).await;
            // Writes after the recovery reach the replacement too.
            writes(&vol, &mut model, &mut version, 20, seed + 7).await;
            vol.close().await.expect("close");
            // Several opens: one must not forget the recorded return of the member that the
            // one before found (see member_failure_is_durable.rs).
            for _ in 0..2 {
                let vol = ZapRaidVolume::open(a.members(Some(p)))
                    .await
                    .expect("reopen");
                assert!(
                    vol.failed_members().is_empty(),
                    "member {p}: reopened degraded"
                );
                vol.close().await.expect("close");
            }
            let vol = ZapRaidVolume::open(a.members(Some(p)))
                .await
                .expect("reopen");
            assert!(
                vol.failed_members().is_empty(),
                "member {p}: reopened degraded"
            );
            vol.verify().expect("index after reopen");
            check(&vol, &model, &format!("member {p} recovered, reopened")).await;
            replacement_holds_the_data(&vol, p, &model, &format!("member {p}")).await;
        });
    }
}

#[test]
fn recovery_skips_segments_without_live_data() {
    runtime().block_on(async {
        let a = SpareArray::new(ZONES, 7);
        let vol = ZapRaidVolume::format(a.members(None), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        let bs = vol.block_size() as usize;
        // The same 16 LBAs rewritten many times: every segment but the newest holds nothing
        // live once they are overwritten.
        let mut model = vec![0u64; SPAN as usize];
        let mut v = 0;
        for _ in 0..30 {
            let mut data = Vec::new();
            for lba in 0..16u64 {
                v += 1;
                model[lba as usize] = v;
                data.extend(block(bs, lba, v));
            }
            vol.write(0, &data, false).await.expect("write");
        }
        vol.flush().await.expect("flush");
        vol.fail_member_durably(2).await.expect("fail");
        let l = vol.layout();
        let mem = vol.index_memory();
        let in_use = mem.stripe_table_bytes * u64::from(l.segments()) / mem.stripe_table_bytes_max;
        assert!(in_use >= 3, "only {in_use} segments in use");
        vol.replace_member(2, a.spare(), false)
            .await
            .expect("recovery");
        let pr = vol.recovery_progress().expect("progress");
        // Only the segments holding live data were rebuilt: about one segment's stripes, not
        // every segment in use.
        assert!(
            pr.blocks_total < (in_use - 1) * u64::from(l.stripes),
            "{pr:?} with {in_use} segments of {} stripes in use",
            l.stripes
        );
        check(&vol, &model, "after recovery").await;
        replacement_holds_the_data(&vol, 2, &model, "skipping dead segments").await;
    });
}

/// Runs a recovery of member `p` in which the replacement loses power at its `cut`-th
/// command: power goes on every member at that instant, the array reopens, and a second
/// recovery finishes the job. Returns whether the cut fell inside the recovery.
async fn cut_during_recovery(p: usize, cut: u64, seed: u64) -> bool {
    let a = SpareArray::new(ZONES, seed);
    let (vol, model, _) = degraded_array(&a, p, seed).await;
    a.fail_from(4, OpSet::ALL, cut, NvmeStatus::AbortedPowerLoss);
    let r = vol.replace_member(p, a.spare(), false).await;
    let cut_inside = r.is_err();
    for f in &a.faulty {
        f.cut_power();
    }
    vol.crash();
    drop(vol);
    let mut rng = SimRng::new(seed ^ cut);
    for (e, f) in a.emus.iter().zip(&a.faulty) {
        e.power_loss(rng.next_u64()).expect("power loss");
        f.clear_errors();
        f.restore_power();
    }
    let what = format!("member {p}, cut at replacement command {cut}");
    let vol = ZapRaidVolume::open(a.members(Some(p)))
        .await
        .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let failed = vol.failed_members();
    assert!(
        failed.is_empty() || failed == vec![p],
        "{what}: failed {failed:?}"
    );
    if !cut_inside {
        assert!(
            failed.is_empty(),
            "{what}: the recovery finished but reopened degraded"
        );
    }
    vol.verify()
        .unwrap_or_else(|e| panic!("{what}: index: {e}"));
    check(&vol, &model, &format!("{what}, reopened")).await;
    if !failed.is_empty() {
        // Recovery restarts: the replacement holds this member's partial rebuild, so it is
        // accepted again without force.
        vol.replace_member(p, a.spare(), false)
            .await
            .unwrap_or_else(|e| panic!("{what}: second recovery: {e}"));
        check(&vol, &model, &format!("{what}, recovered again")).await;
    }
    replacement_holds_the_data(&vol, p, &model, &what).await;
    cut_inside
}

#[test]
fn power_cut_at_many_points_of_a_recovery() {
    // How many commands a whole recovery sends the replacement, from an uncut run.
    let total = runtime().block_on(async {
        let a = SpareArray::new(ZONES, 90);
        let (vol, _, _) = degraded_array(&a, 1, 90).await;
        let before = a.faulty[4].counters().commands;
        vol.replace_member(1, a.spare(), false)
            .await
            .expect("recovery");
        a.faulty[4].counters().commands - before
    });
    assert!(total >= 20, "a recovery sent only {total} commands");
    let mut inside = 0;
    let step = (total / 40).max(1);
    let mut cut = 1;
    while cut <= total + 2 {
        let p = (cut % 4) as usize;
        inside += u64::from(runtime().block_on(cut_during_recovery(p, cut, 90)));
        cut += step;
    }
    assert!(inside >= 20, "only {inside} cuts fell inside a recovery");
}

#[test]
fn a_second_failure_during_recovery_fails_the_volume_naming_both() {
    runtime().block_on(async {
        let a = SpareArray::new(ZONES, 5);
        let (vol, model, _) = degraded_array(&a, 0, 5).await;
        // Member 3's reads fail from its 10th on: the recovery reads it.
        a.fail_from(
            3,
            OpSet::of(&[OpKind::Read]),
            10,
            NvmeStatus::UnrecoveredReadError,
        );
        let e = vol
            .replace_member(0, a.spare(), false)
            .await
            .expect_err("a recovery with a second member failing");
        let why = e.to_string();
        assert!(
            why.contains("member 3") && why.contains("member 0"),
            "{why}"
        );
        let f = vol.failure().expect("volume failed");
        assert!(f.contains("member 3") && f.contains("member 0"), "{f}");
        // Nothing wrong is returned: every read fails or returns its version.
        let bs = vol.block_size() as usize;
        for (lba, v) in model.iter().enumerate() {
            let mut b = vec![0u8; bs];
            if vol.read(lba as u64, &mut b).await.is_ok() {
                let want = if *v == 0 {
                    vec![0u8; bs]
                } else {
                    block(bs, lba as u64, *v)
                };
                assert!(
                    b == want,
                    "LBA {lba} read wrong data after the volume failed"
                );
            }
        }
    });
}

#[test]
fn replacements_that_hold_other_data_or_fit_badly_are_refused() {
    runtime().block_on(async {
        let a = SpareArray::new(ZONES, 3);
        let (vol, model, _) = degraded_array(&a, 1, 3).await;
        // Member 2's device: it is this array's, but not member 1.
        let e = vol
            .replace_member(1, a.members(None)[2].clone(), false)
            .await
            .expect_err("another member's device");
        assert!(
            matches!(e, ZapRaidError::ReplacementHoldsData { .. }),
            "{e}"
        );
        // A device holding other data.
        let bs = vol.block_size() as usize;
        a.spare()
            .write(0, &vec![7u8; bs], None, true)
            .await
            .expect("foreign write");
        let e = vol
            .replace_member(1, a.spare(), false)
            .await
            .expect_err("a device holding data");
        assert!(e.to_string().contains("force"), "{e}");
        // A healthy member is not replaced.
        let e = vol
            .replace_member(2, a.spare(), true)
            .await
            .expect_err("a healthy member");
        assert!(e.to_string().contains("has not failed"), "{e}");
        // Another geometry.
        let other =
            Arc::new(EmuDevice::new_memory(EmuConfig::new(geometry(ZONES + 1))).expect("device"));
        let e = vol
            .replace_member(1, other, false)
            .await
            .expect_err("another geometry");
        assert!(matches!(e, ZapRaidError::Mismatch(_)), "{e}");
        // Nothing was touched: the foreign block is still there, the array still degraded.
        let mut b = vec![0u8; bs];
        a.spare().read(0, &mut b, None).await.expect("read");
        assert!(
            b.iter().all(|x| *x == 7),
            "a refused replacement was written"
        );
        assert_eq!(vol.failed_members(), vec![1]);
        check(&vol, &model, "after refusals").await;
        // With force the foreign device is taken.
        vol.replace_member(1, a.spare(), true)
            .await
            .expect("forced");
        check(&vol, &model, "after a forced recovery").await;
        replacement_holds_the_data(&vol, 1, &model, "forced").await;
    });
}

#[test]
fn a_segment_filled_just_before_the_last_step_is_sealed_on_the_replacement() {
    // Regression: when the open segment had just been filled (sealed, but still the writer's
    // segment) the last step rebuilt it twice, the second time as an open segment without
    // its footer, leaving the replacement's zone open for good.
    runtime().block_on(async {
        let a = SpareArray::new(ZONES, 11);
        let vol = ZapRaidVolume::format(a.members(None), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        // The state stripe takes stripe 0 of segment 0; these writes fill the rest of it.
        vol.fail_member_durably(3).await.expect("fail");
        let l = vol.layout();
        let bs = vol.block_size() as usize;
        let blocks = u64::from(l.stripes - 1) * u64::from(l.k);
        let mut model = vec![0u64; blocks as usize];
        let mut data = Vec::new();
        for lba in 0..blocks {
            model[lba as usize] = 1;
            data.extend(block(bs, lba, 1));
        }
        vol.write(0, &data, false).await.expect("write");
        vol.replace_member(3, a.spare(), false)
            .await
            .expect("recovery");
        let zones = a
            .spare()
            .report_zones(0, zns::ReportFilter::All, false, 1)
            .await
            .expect("report");
        assert_eq!(
            zones.zones[0].state,
            zns::ZoneState::Full,
            "{:?}",
            zones.zones[0]
        );
        check(&vol, &model, "after recovery").await;
        vol.close().await.expect("close");
        let vol = ZapRaidVolume::open(a.members(Some(3))).await.expect("open");
        assert!(vol.failed_members().is_empty());
        check(&vol, &model, "reopened").await;
    });
}
