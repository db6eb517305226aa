//! A collection of a one-zone partial-parity log (K = 1) that fails with an error that does
//! not fail the member, at any of its commands: before its log zone's reset (the log zone
//! still holds the old records), after it (the swap zone holds the only whole image), or
//! later. The volume goes on, and a degraded read of a stripe whose record is in that log
//! never returns wrong data, at once or after the stripe is written again (its newer record
//! wins over the one the failed collection copied); a power cut and a degraded reopen read
//! every acknowledged block (docs/DESIGN.md, "A swap zone left by a cut collection").

mod common;

use raizn::{RaiznConfig, RaiznVolume};
use zns::{ErrorPlan, ErrorTiming, NvmeStatus, OpSet, ZonedDevice};

use common::{Faulty, BS, OOB};
use std::sync::Arc;

/// Member 2 holds the parity (and so the records) of every zone's stripe 0; member 0 its
/// first data unit.
const LOG: usize = 2;
const UNIT0: usize = 0;

async fn array(seed: u64) -> (Vec<Arc<emu::EmuDevice>>, Vec<Arc<Faulty>>, RaiznVolume) {
    let emus = common::emu_members(&common::small_member_geometry(), 3, seed);
    let faulty = common::faulty_members(&emus, seed * 3);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([0x6b; 16])
    };
    match RaiznVolume::format(common::as_members(&faulty), cfg, false).await {
        Ok(v) => (emus, faulty, v),
        Err(e) => panic!("seed {seed}: format: {e}"),
    }
}

/// One-block FUA writes of `zone`'s blocks `from..to`, each of which must be acknowledged.
async fn fua(v: &RaiznVolume, zone: u32, from: u64, to: u64, what: &str) {
    let z = v.geometry().zone_start(zone);
    for k in from..to {
        let (d, m) = common::block(z + k, 1);
        if let Err(e) = v.write(z + k, &d, Some(&m), true).await {
            panic!("{what}: zone {zone} block {k}: {e}");
        }
    }
}

/// Reads `zone`'s blocks `0..to`, each of which must read back.
async fn check(v: &RaiznVolume, zone: u32, to: u64, what: &str) {
    let z = v.geometry().zone_start(zone);
    for k in 0..to {
        let (d, m) = common::block(z + k, 1);
        let (mut gd, mut gm) = (vec![0u8; BS], vec![0u8; OOB]);
        match v.read(z + k, &mut gd, Some(&mut gm)).await {
            Ok(()) => assert!(
                gd == d && gm == m,
                "{what}: zone {zone} block {k} reads wrong"
            ),
            Err(e) => panic!("{what}: zone {zone} block {k}: {e}"),
        }
    }
}

/// Zone 0 written to 3 blocks, then one-block FUA writes to zone 1: the one that collects
/// member 2's log is the `collect`-th (0-based). Returns it and member 2's commands in it.
async fn probe(seed: u64) -> (u64, u64) {
    let (_, faulty, v) = array(seed).await;
    fua(&v, 0, 0, 3, "probe").await;
    for k in 0..40 {
        let (before, commands) = (v.pp_stats().collections, faulty[LOG].counters().commands);
        fua(&v, 1, k, k + 1, "probe").await;
        if v.pp_stats().collections > before {
            return (k, faulty[LOG].counters().commands - commands);
        }
    }
    panic!("seed {seed}: no collection in 40 writes");
}

/// Member 2's `fail`-th command of the collecting write fails (Invalid Field), refused
/// (`ErrorTiming::Before`) or done and then reported failed (`After`). With
/// `degrade_first`, member 0 fails at once and zone 0 is written again after; otherwise
/// zone 0 is written again (stripe 0's newer records) before member 0 fails. Then a power
/// cut and a reopen without member 0.
async fn run(seed: u64, collect: u64, fail: u64, timing: ErrorTiming, degrade_first: bool) {
    let what = format!("seed {seed} fail {fail} {timing:?} degrade_first {degrade_first}");
    let (emus, faulty, v) = array(seed).await;
    fua(&v, 0, 0, 3, &what).await;
    fua(&v, 1, 0, collect, &what).await;
    let plan = ErrorPlan {
        ops: OpSet::ALL,
        fail_nth: Some(fail),
        status: NvmeStatus::InvalidField,
        timing,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[LOG].set_errors(plan) {
        panic!("{e}");
    }
    let z1 = v.geometry().zone_start(1);
    let (d, m) = common::block(z1 + collect, 1);
    let r = v.write(z1 + collect, &d, Some(&m), true).await;
    faulty[LOG].clear_errors();
    assert!(
        v.failed_members().is_empty(),
        "{what}: the error failed a member"
    );
    let acked1 = collect + u64::from(r.is_ok());
    if degrade_first {
        if let Err(e) = v.fail_member(UNIT0).await {
            panic!("{what}: fail member: {e}");
        }
        check(&v, 0, 3, &what).await;
        check(&v, 1, acked1, &what).await;
    }
    // Stripe 0 of zone 0 again: its newer records.
    fua(&v, 0, 3, 6, &what).await;
    if !degrade_first {
        if let Err(e) = v.fail_member(UNIT0).await {
            panic!("{what}: fail member: {e}");
        }
    }
    check(&v, 0, 6, &what).await;
    check(&v, 1, acked1, &what).await;
    drop(v);
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed ^ (i as u64 + 1)) {
            panic!("{what}: power loss: {err}");
        }
    }
    let v = common::reopen(&emus, Some(UNIT0), &what).await;
    check(&v, 0, 6, &what).await;
    check(&v, 1, acked1, &what).await;
}

#[tokio::test]
async fn a_failed_log_collection_never_serves_a_wrong_record() {
    let seed = 0x6b01;
    let (collect, total) = probe(seed).await;
    assert!(
        total >= 8,
        "member 2 saw only {total} commands in the collection"
    );
    for fail in 1..=total {
        for timing in [ErrorTiming::Before, ErrorTiming::After] {
            for degrade_first in [true, false] {
                run(seed, collect, fail, timing, degrade_first).await;
            }
        }
    }
}
