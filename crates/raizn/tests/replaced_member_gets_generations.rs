//! A replaced member's general zone gets every zone's generation before the array counts
//! it whole: a zone's generation records are on two members only, and when those are the
//! replaced member and the next one to fail, the generation must still be found.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use raizn::{Member, RaiznVolume};
use zns::{ZoneAction, ZoneState, ZonedDevice};

/// Blocks written to zone 0 after its reset: the first data unit of the first stripe
/// (8 blocks, member 0) and 3 blocks of the second (member 1).
const WRITTEN: u64 = 11;

fn block(lba: u64) -> (Vec<u8>, Vec<u8>) {
    common::block(lba, 7)
}

fn restart(emus: &[Arc<EmuDevice>]) {
    for e in emus {
        if let Err(err) = e.restart() {
            panic!("member restart: {err}");
        }
    }
}

async fn write(v: &RaiznVolume, from: u64, to: u64) {
    for lba in from..to {
        let (d, m) = block(lba);
        if let Err(e) = v.write(lba, &d, Some(&m), false).await {
            panic!("write {lba}: {e}");
        }
    }
}

async fn run() {
    let g = common::small_member_geometry();
    let (mut emus, v) = common::small_array(747, 7).await;
    let l = v.layout();
    assert_eq!(
        (l.data_member(0, 0), l.data_member(0, 1), l.parity_member(0)),
        (0, 1, 2)
    );
    // A reset after the open: zone 0's new generation is recorded on its zone log members,
    // 0 and 1; member 2 holds only the open's checkpoint, one generation older.
    write(&v, 0, 1).await;
    if let Err(e) = v.zone_mgmt(ZoneAction::Reset, 0, false).await {
        panic!("reset: {e}");
    }
    let generation = v.generation(0);
    write(&v, 0, WRITTEN).await;
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    if let Err(e) = v.fail_member(0).await {
        panic!("fail member 0: {e}");
    }
    let fresh = common::emu_members(&g, 1, 1747).remove(0);
    if let Err(e) = v.replace_member(0, fresh.clone() as Member).await {
        panic!("replace member 0: {e}");
    }
    emus[0] = fresh;
    drop(v);
    restart(&emus);
    // Member 1 lost: its 3 blocks of the incomplete stripe come from the partial-parity
    // record on member 2, which recovery uses only at the zone's current generation.
    let mut members: Vec<Option<Member>> =
        common::as_members(&emus).into_iter().map(Some).collect();
    members[1] = None;
    let v = match RaiznVolume::open_degraded(members).await {
        Ok(v) => v,
        Err(e) => panic!("open without member 1: {e}"),
    };
    assert_eq!(v.generation(0), generation, "zone 0's generation");
    let z = match v.report_zones(0, zns::ReportFilter::All, false, 1).await {
        Ok(r) => (r.zones[0].state, r.zones[0].wp),
        Err(e) => panic!("report: {e}"),
    };
    assert_eq!(z, (ZoneState::Closed, WRITTEN), "zone 0 after the reopen");
    common::assert_blocks(&v, 0..WRITTEN, 7, "without member 1").await;
}

#[test]
fn replaced_member_holds_the_generations_of_its_zones() {
    // A replacement's general zone held only its superblock. Zone 0's generation records
    // were on members 0 (replaced) and 1; with member 1 left out at the next open, only
    // member 2's older checkpoint named a generation, the zone reopened one generation
    // back, and recovery dropped the partial-parity record of its current one as stale:
    // the zone came back short of its durable blocks (crash schedule 747).
    common::block_on_paused(run());
}
