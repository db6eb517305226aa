//! A zone written to its capacity is Full, also after a power cut. The write that filled a
//! zone reached the members of the last stripe's data units while the cut took the
//! stripe's parity unit from its member: every data block was durable (the zone's write
//! pointer at its capacity), yet open returned the zone Closed with its write pointer at
//! the capacity, a state ZNS does not have (a zone is Full once its write pointer reaches
//! the capacity; crash schedules 146, 461, 510 and 541 of `power_cut_with_io_in_flight`).
//! Open now repairs the parity, finishes the member zones and reports the zone Full.

mod common;

use raizn::RaiznVolume;
use zns::{ReportFilter, ZoneState, ZonedDevice};

use common::{assert_blocks, block, reopen, small_array};

/// The blocks' salt.
const SALT: u64 = 5;

async fn zone0(v: &RaiznVolume) -> (ZoneState, u64) {
    match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => (r.zones[0].state, r.zones[0].wp),
        Err(e) => panic!("report: {e}"),
    }
}

#[test]
fn a_zone_whose_last_parity_unit_the_cut_took_comes_back_full() {
    for seed in 0..4 {
        common::block_on_paused(async {
            let (emus, v) = small_array(seed, 23).await;
            let l = *v.layout();
            let cap = v.geometry().zone_capacity;
            let sdb = l.stripe_data_blocks();
            assert!(cap.is_multiple_of(sdb), "whole stripes");
            for at in (0..cap - sdb).step_by(16) {
                common::write_blocks(&v, at..(at + 16).min(cap - sdb), SALT, false).await;
            }
            if let Err(e) = v.flush().await {
                panic!("flush: {e}");
            }
            drop(v);
            // The last stripe's data units reach their members; its parity unit never does.
            for lba in cap - sdb..cap {
                let p = l.place(0, lba);
                let (d, m) = block(lba, SALT);
                if let Err(e) = emus[p.member].write(p.lba, &d, Some(&m), true).await {
                    panic!("seed {seed}: data unit block {lba}: {e}");
                }
            }
            let what = format!("seed {seed}: after the cut");
            let v = reopen(&emus, None, &what).await;
            assert_eq!(zone0(&v).await.0, ZoneState::Full, "{what}");
            assert_blocks(&v, 0..cap, SALT, &what).await;
            let mstart = l.member_zone_start(0);
            for (m, e) in emus.iter().enumerate() {
                let r = match e.report_zones(mstart, ReportFilter::All, false, 1).await {
                    Ok(r) => r,
                    Err(err) => panic!("{what}: member {m} report: {err}"),
                };
                assert_eq!(
                    r.zones[0].state,
                    ZoneState::Full,
                    "{what}: member {m}'s zone"
                );
            }
            drop(v);
            // The repaired parity stands in for a data unit of the last stripe.
            let lost = l.place(0, cap - sdb).member;
            let what = format!("seed {seed}: without member {lost}");
            let v = reopen(&emus, Some(lost), &what).await;
            assert_eq!(zone0(&v).await.0, ZoneState::Full, "{what}");
            assert_blocks(&v, 0..cap, SALT, &what).await;
        });
    }
}
