//! A degraded open rewrites the partial parity of an incomplete stripe whose failed member
//! holds no data of it, from the survivors' data: a power cut may have kept the data and
//! lost the record, and once the failed member is replaced that record is all that protects
//! the stripe against the next failure.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use raizn::layout::PARTIAL_PARITY_ZONE;
use raizn::{Member, RaiznVolume};
use zns::{ZoneAction, ZoneState, ZonedDevice};

/// Blocks written to zone 0: inside the first data unit of the first stripe.
const WRITTEN: u64 = 3;

fn block(lba: u64) -> (Vec<u8>, Vec<u8>) {
    common::block(lba, 1)
}

async fn open(members: Vec<Option<Member>>, what: &str) -> RaiznVolume {
    match RaiznVolume::open_degraded(members).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Zone 0's state and write pointer.
async fn z(v: &RaiznVolume) -> (ZoneState, u64) {
    match v.report_zones(0, zns::ReportFilter::All, false, 1).await {
        Ok(r) => (r.zones[0].state, r.zones[0].wp),
        Err(e) => panic!("report: {e}"),
    }
}

fn restart(emus: &[Arc<EmuDevice>]) {
    for e in emus {
        if let Err(err) = e.restart() {
            panic!("member restart: {err}");
        }
    }
}

async fn run() {
    let g = common::small_member_geometry();
    let (mut emus, v) = common::small_array(98, 9).await;
    let l = v.layout();
    // Stripe 0 of zone 0: data unit 0 on member 0 (the blocks written), unit 1 on member 1
    // (nothing), parity (and the partial-parity record) on member 2.
    assert_eq!(
        (l.data_member(0, 0), l.data_member(0, 1), l.parity_member(0)),
        (0, 1, 2)
    );
    for lba in 0..WRITTEN {
        let (d, m) = block(lba);
        if let Err(e) = v.write(lba, &d, Some(&m), false).await {
            panic!("write {lba}: {e}");
        }
    }
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    drop(v);
    restart(&emus);
    // What a power cut may leave: the data on member 0, the record on member 2 lost.
    let log = g.zone_start(PARTIAL_PARITY_ZONE);
    if let Err(e) = emus[2].zone_mgmt(ZoneAction::Reset, log, false).await {
        panic!("dropping member 2's log: {e}");
    }
    let mut members: Vec<Option<Member>> =
        common::as_members(&emus).into_iter().map(Some).collect();
    members[1] = None;
    let v = open(members, "open without member 1").await;
    assert_eq!(z(&v).await, (ZoneState::Closed, WRITTEN));
    let fresh = common::emu_members(&g, 1, 1098).remove(0);
    if let Err(e) = v.replace_member(1, fresh.clone() as Member).await {
        panic!("replace member 1: {e}");
    }
    emus[1] = fresh;
    drop(v);
    restart(&emus);
    let mut members: Vec<Option<Member>> =
        common::as_members(&emus).into_iter().map(Some).collect();
    members[0] = None;
    let v = open(members, "open without member 0").await;
    assert_eq!(
        z(&v).await,
        (ZoneState::Closed, WRITTEN),
        "the stripe's blocks, on member 0 only, must be rebuilt from its partial parity"
    );
    common::assert_blocks(&v, 0..WRITTEN, 1, "without member 0").await;
}

#[test]
fn degraded_open_rewrites_the_record_a_power_cut_lost() {
    // A degraded open kept only the loaded partial-parity record of an incomplete stripe
    // whenever the failed member held a data unit of it, even a unit past the write
    // pointer, with no data. When the power cut had lost that record (the data reached
    // member 0, the record never reached member 2) the stripe stayed without one; after
    // the failed member was replaced and rebuilt, a cut with member 0 left out brought the
    // zone back empty though its blocks were durable (crash schedules 98, 136, 747).
    common::block_on_paused(run());
}
