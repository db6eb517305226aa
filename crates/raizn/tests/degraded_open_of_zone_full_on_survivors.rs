//! A degraded open of a zone whose member zones are Full on every survivor, though the zone
//! is not: a survivor filled its zone by writing the parity of the last stripe, whose data
//! the cut took from the member that then failed. An earlier open (all members there)
//! recovered the zone Closed below the capacity and declared that parity stale (a torn
//! stripe). The degraded open counted every zone whose surviving member zones are all Full
//! as Full, so the zone grew past what was written and the failed member's units of the
//! last stripe were rebuilt from the stale parity, as wrong data (crash schedule 9865).

mod common;

use raizn::{Member, RaiznVolume};
use zns::{ReportFilter, ZoneState, ZonedDevice};

use common::{assert_blocks, block, small_array};

/// Logical blocks written: five whole stripes of 16 and 14 blocks of the last.
const WRITTEN: u64 = 94;

async fn zone0(v: &RaiznVolume) -> (ZoneState, u64) {
    match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => (r.zones[0].state, r.zones[0].wp),
        Err(e) => panic!("report: {e}"),
    }
}

async fn run(seed: u64) {
    let (emus, v) = small_array(seed, 13).await;
    let l = *v.layout();
    let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
    let s = WRITTEN / sdb;
    assert_eq!(s + 1, l.stripes_per_zone(), "the last stripe");
    for at in (0..WRITTEN).step_by(9) {
        let n = 9.min(WRITTEN - at);
        common::write_blocks(&v, at..at + n, 4, false).await;
    }
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    drop(v);
    // The tear: the parity member of the last stripe kept the parity of a write that
    // completed it (filling its zone), the member of the last data unit lost its part.
    let pm = l.parity_member(s);
    let lost = l.place(0, WRITTEN).member;
    let (mut d, mut m) = (Vec::new(), Vec::new());
    for b in 0..su {
        let (bd, bm) = block(5000 + b, 6);
        d.extend(bd);
        m.extend(bm);
    }
    if let Err(e) = emus[pm]
        .write(l.member_zone_start(0) + s * su, &d, Some(&m), true)
        .await
    {
        panic!("torn parity: {e}");
    }
    let v = match RaiznVolume::open(common::as_members(&emus)).await {
        Ok(v) => v,
        Err(e) => panic!("open after the tear: {e}"),
    };
    assert_eq!(
        zone0(&v).await,
        (ZoneState::Closed, WRITTEN),
        "after the tear"
    );
    drop(v);
    let members: Vec<Option<Member>> = emus
        .iter()
        .enumerate()
        .map(|(i, e)| (i != lost).then(|| e.clone() as Member))
        .collect();
    let v = match RaiznVolume::open_degraded(members).await {
        Ok(v) => v,
        Err(e) => panic!("open without member {lost}: {e}"),
    };
    assert_eq!(
        zone0(&v).await,
        (ZoneState::Closed, WRITTEN),
        "seed {seed}: without member {lost}, the zone its survivors hold Full"
    );
    assert_blocks(
        &v,
        0..WRITTEN,
        4,
        &format!("seed {seed}: without member {lost}"),
    )
    .await;
}

#[test]
fn degraded_open_does_not_count_a_zone_full_on_its_survivors_over_stale_parity() {
    for seed in 0..4 {
        common::block_on_paused(run(seed));
    }
}
