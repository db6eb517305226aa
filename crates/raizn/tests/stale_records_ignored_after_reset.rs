//! Regression: a Reset leaves the zone's partial-parity records in the log (nothing purges
//! them any more); only their generation, older than the zone's persisted one, tells them
//! stale. If open used them, a degraded open would rebuild the zone's old contents into the
//! reset zone: the zone would come back Closed holding data written before the reset.

mod common;

use raizn::{RaiznConfig, RaiznVolume};
use zns::{ReportFilter, ZoneAction, ZoneState, ZonedDevice};

const BS: usize = 4096;

#[tokio::test]
async fn degraded_open_ignores_records_of_an_earlier_generation() {
    for blocks in [1u64, 3, 8, 11] {
        let emus = common::emu_members(&common::small_member_geometry(), 3, blocks);
        let cfg = RaiznConfig {
            log_zones: 1,
            stripe_unit_bytes: 8 * BS as u64,
            ..RaiznConfig::new([4; 16])
        };
        let v = match RaiznVolume::format(common::as_members(&emus), cfg, false).await {
            Ok(v) => v,
            Err(e) => panic!("format: {e}"),
        };
        let l = *v.layout();
        let zslba = v.geometry().zone_start(0);
        let data = vec![0xA5u8; blocks as usize * BS];
        let meta = vec![0x5Au8; blocks as usize * 16];
        if let Err(e) = v.write(zslba, &data, Some(&meta), true).await {
            panic!("write: {e}");
        }
        let g0 = v.generation(0);
        if let Err(e) = v.zone_mgmt(ZoneAction::Reset, zslba, false).await {
            panic!("reset: {e}");
        }
        assert_eq!(
            v.generation(0),
            g0.map(|g| g + 1),
            "a reset bumps the generation"
        );
        if let Err(e) = v.flush().await {
            panic!("flush: {e}");
        }
        drop(v);
        // The member holding the first data unit is gone: only a record could bring its
        // blocks back, and the only record of the zone is from before the reset.
        let gone = l.data_member(0, 0);
        let members = common::as_members(&emus)
            .into_iter()
            .enumerate()
            .map(|(i, m)| (i != gone).then_some(m))
            .collect();
        let v = match RaiznVolume::open_degraded(members).await {
            Ok(v) => v,
            Err(e) => panic!("degraded open: {e}"),
        };
        let r = match v.report_zones(zslba, ReportFilter::All, false, 1).await {
            Ok(r) => r,
            Err(e) => panic!("report: {e}"),
        };
        let d = r.zones.first().copied();
        assert_eq!(
            d.map(|d| (d.state, d.wp - d.start)),
            Some((ZoneState::Empty, 0)),
            "{blocks} blocks: the reset zone came back with its old data"
        );
        assert!(
            v.generation(0) >= g0.map(|g| g + 1),
            "the generation went back at the reopen"
        );
        let mut got = vec![0u8; blocks as usize * BS];
        if let Err(e) = v.read(zslba, &mut got, None).await {
            panic!("read: {e}");
        }
        assert!(got.iter().all(|b| *b == 0), "the reset zone reads as data");
    }
}
