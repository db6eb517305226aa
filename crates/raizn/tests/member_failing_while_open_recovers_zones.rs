//! A member that fails while open recovers the zones (here: completing a logged reset cut
//! short, before the partial-parity logs are rewritten) must not be counted for the zones'
//! write pointers: open starts over without it. Recovery had counted the member's units of
//! an incomplete stripe that no durable partial-parity record covers, so the zone came back
//! with a write pointer past what could be rebuilt and its reads failed with Unrecovered
//! Read Error (crash schedules 1627 and 1774).

mod common;

use raizn::{RaiznConfig, RaiznVolume};
use zns::{ErrorPlan, NvmeStatus, OpKind, OpSet, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use common::{assert_blocks, BS};

use common::Faulty;

async fn write(v: &RaiznVolume, lbas: std::ops::Range<u64>, salt: u64, fua: bool) -> bool {
    let (d, m) = common::blocks(lbas.clone(), salt);
    v.write(lbas.start, &d, Some(&m), fua).await.is_ok()
}

fn refuse(f: &Faulty, op: OpKind) {
    let plan = ErrorPlan {
        ops: OpSet::of(&[op]),
        fail_nth: Some(1),
        status: NvmeStatus::InvalidField,
        ..ErrorPlan::default()
    };
    if let Err(e) = f.set_errors(plan) {
        panic!("error plan: {e}");
    }
}

async fn run(parity: u32) {
    let n = 2 + parity as usize;
    let g = common::small_member_geometry();
    let emus = common::emu_members(&g, n, 1774 + u64::from(parity));
    let faulty = common::faulty_members(&emus, 40);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        parity,
        ..RaiznConfig::new([12; 16])
    };
    let v = match RaiznVolume::format(common::as_members(&faulty), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let l = *v.layout();
    let z1 = v.geometry().zone_start(1);
    // Zone 1: five durable blocks of the first stripe (its partial-parity records are
    // durable), then two more whose records the parity members refuse: the write fails,
    // but the data member keeps the two blocks, unprotected.
    let data_member = l.data_member(0, 0);
    // (Zone 0's data first: a record appended after the refused one would collect the log,
    // and a refused record drops its stripe's older one from the log's index.)
    if !write(&v, 0..3, 3, true).await {
        panic!("zone 0 write failed");
    }
    if !write(&v, z1..z1 + 5, 1, true).await {
        panic!("durable write failed");
    }
    for pm in l.parity_members(0) {
        refuse(&faulty[pm], OpKind::Write);
    }
    assert!(
        !write(&v, z1 + 5..z1 + 7, 2, false).await,
        "the write whose records were refused"
    );
    for f in &faulty {
        f.clear_errors();
    }
    // Zone 0: a reset logged and cut short (one member refuses it), which open completes.
    let other = (0..n).find(|m| *m != data_member).unwrap_or(0);
    refuse(&faulty[other], OpKind::ZoneMgmt);
    assert!(
        v.zone_mgmt(ZoneAction::Reset, 0, false).await.is_err(),
        "the refused reset"
    );
    faulty[other].clear_errors();
    drop(v);
    for e in &emus {
        if let Err(err) = e.restart() {
            panic!("member restart: {err}");
        }
    }
    // The data member stops answering when open completes the reset.
    let fail = ErrorPlan {
        ops: OpSet::of(&[OpKind::ZoneMgmt]),
        fail_nth: Some(1),
        repeat: 1 << 40,
        status: NvmeStatus::NamespaceNotReady,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[data_member].set_errors(fail) {
        panic!("error plan: {e}");
    }
    let v = match RaiznVolume::open(common::as_members(&faulty)).await {
        Ok(v) => v,
        Err(e) => panic!("m = {parity}: open with member {data_member} failing: {e}"),
    };
    assert_eq!(v.failed_members(), vec![data_member], "m = {parity}");
    let zones = match v.report_zones(0, ReportFilter::All, false, 2).await {
        Ok(r) => r.zones,
        Err(e) => panic!("report: {e}"),
    };
    assert_eq!(zones[0].state, ZoneState::Empty, "m = {parity}: the reset");
    let wp = zones[1].wp - z1;
    assert!(
        (5..=7).contains(&wp),
        "m = {parity}: zone 1 back at {wp}, the durable prefix is 5"
    );
    // Every block below the write pointer reads back: the durable ones, and (had the write
    // pointer counted them) the unprotected ones, which only the failed member held.
    assert_blocks(&v, z1..z1 + wp.min(5), 1, &format!("m = {parity}")).await;
    assert_blocks(&v, z1 + 5..z1 + wp, 2, &format!("m = {parity}")).await;
}

#[test]
fn member_failing_while_open_completes_a_reset_is_not_counted_for_the_zones() {
    common::block_on_paused(run(1));
    common::block_on_paused(run(2));
}

/// A Finish, then a Reset whose zone-log record reached one of the zone log's two members
/// (the other refused its write, as a power cut between them would leave it); open completes
/// the reset, and the member holding the record fails at that moment. The open that starts
/// over without it must still know of the reset: the first attempt had already reset the
/// survivors' member zones, and without the record the finished zone came back Full over
/// them, reading zeros where its data was (crash schedule 240 of a later run).
async fn reset_record_on_one_member(seed: u64) {
    let g = common::small_member_geometry();
    let emus = common::emu_members(&g, 3, seed);
    let faulty = common::faulty_members(&emus, seed * 3);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([13; 16])
    };
    let v = match RaiznVolume::format(common::as_members(&faulty), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    if !write(&v, 0..20, 1, true).await {
        panic!("write failed");
    }
    if let Err(e) = v.zone_mgmt(ZoneAction::Finish, 0, false).await {
        panic!("finish: {e}");
    }
    // Zone 0's log members are 0 and 1; member 1 refuses the reset's record.
    refuse(&faulty[1], OpKind::Write);
    assert!(
        v.zone_mgmt(ZoneAction::Reset, 0, false).await.is_err(),
        "seed {seed}: the reset whose record member 1 refused"
    );
    faulty[1].clear_errors();
    drop(v);
    for e in &emus {
        if let Err(err) = e.restart() {
            panic!("member restart: {err}");
        }
    }
    let fail = ErrorPlan {
        ops: OpSet::of(&[OpKind::ZoneMgmt]),
        fail_nth: Some(1),
        repeat: 1 << 40,
        status: NvmeStatus::NamespaceNotReady,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[0].set_errors(fail) {
        panic!("error plan: {e}");
    }
    let v = match RaiznVolume::open(common::as_members(&faulty)).await {
        Ok(v) => v,
        Err(e) => panic!("seed {seed}: open with member 0 failing: {e}"),
    };
    assert_eq!(v.failed_members(), vec![0], "seed {seed}");
    let zone = match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => r.zones[0],
        Err(e) => panic!("report: {e}"),
    };
    // The reset was logged and reached the survivors: the zone is reset (its old data, had
    // no member zone been reset, would be the other answer).
    assert_eq!(
        (zone.state, zone.wp),
        (ZoneState::Empty, 0),
        "seed {seed}: zone 0"
    );
    drop(v);
    let v = match RaiznVolume::open(common::as_members(&faulty)).await {
        Ok(v) => v,
        Err(e) => panic!("seed {seed}: reopen: {e}"),
    };
    let zone = match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => r.zones[0],
        Err(e) => panic!("report: {e}"),
    };
    assert_eq!(zone.state, ZoneState::Empty, "seed {seed}: zone 0 reopened");
}

#[test]
fn a_reset_logged_on_a_member_failing_while_open_completes_it_stays_reset() {
    for seed in 1..4 {
        common::block_on_paused(reset_record_on_one_member(seed));
    }
}
