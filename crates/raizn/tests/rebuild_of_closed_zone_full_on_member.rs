//! Rebuilding a Closed zone whose units on the new member reach the member zone's capacity
//! (the zone's write pointer is inside the last stripe, past the new member's last unit):
//! the rebuild completes and every block reads back.

mod common;

use raizn::Member;
use zns::{ZoneAction, ZoneState, ZonedDevice};

fn block(lba: u64) -> (Vec<u8>, Vec<u8>) {
    common::block(lba, 0)
}

async fn run(failed: usize) {
    let g = common::small_member_geometry();
    let (_emus, v) = common::small_array(7 + failed as u64, 3).await;
    let lg = v.geometry();
    // Three blocks short of the capacity: the last stripe's first unit is complete, so its
    // member's zone is full while the logical zone is only Closed.
    let wp = lg.zone_capacity - 3;
    for lba in 0..wp {
        let (d, m) = block(lba);
        if let Err(e) = v.write(lba, &d, Some(&m), false).await {
            panic!("write {lba}: {e}");
        }
    }
    if let Err(e) = v.zone_mgmt(ZoneAction::Close, 0, false).await {
        panic!("close: {e}");
    }
    if let Err(e) = v.fail_member(failed).await {
        panic!("fail member {failed}: {e}");
    }
    let fresh = common::emu_members(&g, 1, 99)[0].clone();
    let r = v.replace_member(failed, fresh as Member).await;
    assert!(r.is_ok(), "rebuild of member {failed}: {r:?}");
    let z = match v.report_zones(0, zns::ReportFilter::All, false, 1).await {
        Ok(r) => r.zones[0],
        Err(e) => panic!("report: {e}"),
    };
    assert_eq!((z.state, z.wp), (ZoneState::Closed, wp), "member {failed}");
    // With another member failed, the rebuilt one must supply its units.
    let other = (failed + 1) % 3;
    if let Err(e) = v.fail_member(other).await {
        panic!("fail member {other}: {e}");
    }
    common::assert_blocks(&v, 0..wp, 0, &format!("member {failed} rebuilt")).await;
}

#[test]
fn closed_zone_whose_member_units_are_full_is_rebuilt() {
    // The rebuild closed the new member's zone after writing its units; when those units
    // reached the member zone's capacity the zone was already Full, and the Close failed
    // with Invalid Zone State Transition, failing the rebuild (crash schedules 415, 521,
    // 957). Every member is replaced in turn, so the one holding the full unit is among them.
    for failed in 0..3 {
        common::block_on_paused(run(failed));
    }
}
