//! A Finish cut short, completed by open, where the partial stripe's parity member zone is
//! Full by writing but its parity unit is stale (a torn stripe: the member kept units of a
//! write the cut lost elsewhere, up to its zone's capacity). Open must write that parity
//! (relocated, since the member zone cannot take it in place) before it counts the zone
//! Full: a degraded read of the partial stripe's data then rebuilds it from that parity.
//! Open used to skip every Full parity member, so the zone came back Full with the parity
//! unit reading as zeros, and a degraded read returned zeros (crash schedule 1173).

mod common;

use std::sync::Arc;

use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{ErrorPlan, NvmeStatus, OpKind, OpSet, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use common::{assert_blocks, block, BS};

/// Logical blocks written to zone 0: four whole stripes of 16 and 3 blocks of the fifth.
const WRITTEN: u64 = 67;

use common::Faulty;

fn members(faulty: &[Arc<Faulty>], leave_out: Option<usize>) -> Vec<Option<Member>> {
    faulty
        .iter()
        .enumerate()
        .map(|(i, f)| (leave_out != Some(i)).then(|| f.clone() as Member))
        .collect()
}

async fn open(faulty: &[Arc<Faulty>], leave_out: Option<usize>, what: &str) -> RaiznVolume {
    match RaiznVolume::open_degraded(members(faulty, leave_out)).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: open: {e}"),
    }
}

async fn zone0(v: &RaiznVolume) -> (ZoneState, u64) {
    match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => (r.zones[0].state, r.zones[0].wp),
        Err(e) => panic!("report: {e}"),
    }
}

/// Refuses the `nth` write member `pm` gets during the Finish (1: its zone-log record, 2:
/// the relocated parity unit, 3: none); returns whether the Finish failed and whether the
/// reopened zone is Full.
async fn run(nth: u64) -> (bool, bool) {
    let g = common::small_member_geometry();
    let emus = common::emu_members(&g, 3, 1173 + nth);
    let faulty = common::faulty_members(&emus, nth * 3);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([11; 16])
    };
    let all: Vec<Member> = common::as_members(&faulty);
    let v = match RaiznVolume::format(all, cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let l = *v.layout();
    let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
    let s = WRITTEN / sdb;
    let pm = l.parity_member(s);
    let lost = l.place(0, s * sdb).member;
    for at in (0..WRITTEN).step_by(7) {
        let n = 7.min(WRITTEN - at);
        common::write_blocks(&v, at..at + n, 5, false).await;
    }
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    drop(v);
    // The tear: the parity member kept its units of a later write up to its zone's capacity
    // (the partial stripe's parity unit and the next stripe's unit), the others nothing.
    let cap = g.zone_capacity;
    let from = s * su;
    let (mut d, mut m) = (Vec::new(), Vec::new());
    for b in from..cap {
        let (bd, bm) = block(1000 + b, 9);
        d.extend(bd);
        m.extend(bm);
    }
    let lba = l.member_zone_start(0) + from;
    if let Err(e) = emus[pm].write(lba, &d, Some(&m), true).await {
        panic!("torn units: {e}");
    }
    let v = open(&faulty, None, "after the tear").await;
    assert_eq!(
        zone0(&v).await,
        (ZoneState::Closed, WRITTEN),
        "after the tear"
    );
    // The Finish is logged, then member `pm` refuses one of its writes (not a member
    // failure), as if power had been cut before that write got there.
    let refuse = ErrorPlan {
        ops: OpSet::of(&[OpKind::Write]),
        fail_nth: Some(nth),
        status: NvmeStatus::InvalidField,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[pm].set_errors(refuse) {
        panic!("error plan: {e}");
    }
    let refused = v.zone_mgmt(ZoneAction::Finish, 0, false).await.is_err();
    faulty[pm].clear_errors();
    drop(v);
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(nth * 7 + i as u64) {
            panic!("power loss: {err}");
        }
    }
    let v = open(&faulty, None, &format!("write {nth} refused")).await;
    let (state, _) = zone0(&v).await;
    let full = state == ZoneState::Full;
    assert_blocks(&v, 0..WRITTEN, 5, &format!("write {nth} refused")).await;
    drop(v);
    // Without the member holding the partial stripe's data, its blocks are rebuilt from
    // the parity (zone Full) or its partial-parity record (Closed).
    let v = open(
        &faulty,
        Some(lost),
        &format!("write {nth} refused, {lost} left out"),
    )
    .await;
    assert_eq!(
        zone0(&v).await.0,
        state,
        "write {nth} refused: degraded reopen"
    );
    assert_blocks(
        &v,
        0..WRITTEN,
        5,
        &format!("write {nth} refused, member {lost} left out"),
    )
    .await;
    (refused, full)
}

#[test]
fn finish_completed_by_open_writes_the_parity_a_tear_left_stale() {
    let mut cut_short = 0;
    for nth in 1..=3 {
        let (refused, full) = common::block_on_paused(run(nth));
        assert!(
            full,
            "write {nth} refused: the logged finish was not completed"
        );
        cut_short += u64::from(refused);
    }
    // The zone-log record on the parity member, then its relocated parity unit refused:
    // open completed the Finish both times.
    assert_eq!(cut_short, 2, "finishes cut short");
}
