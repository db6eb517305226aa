//! A failed array (one member more lost than its parity covers) stays readable where its
//! data still is: a block whose unit is on a surviving member reads back, with its metadata;
//! a block whose unit was on a lost member fails with Unrecovered Read Error (nothing is
//! made up, and the member that broke the array is never read again even when it answers);
//! writes, flushes and zone actions fail; zones are still reported. The old build failed
//! every command of a failed array, reads of survivors' data included.

mod common;

use common::{assert_blocks, block, emu_members, small_array, small_member_geometry, BS, OOB};
use raizn::{Member, RaiznConfig, RaiznError, RaiznVolume};
use zns::{NvmeStatus, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

const SALT: u64 = 41;

/// Writes blocks `lbas` of `v` as `block(lba, SALT)`, 16 blocks a command (under the
/// members' transfer limit).
async fn fill(v: &RaiznVolume, lbas: std::ops::Range<u64>) {
    let mut at = lbas.start;
    while at < lbas.end {
        let n = (lbas.end - at).min(16);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for lba in at..at + n {
            let (bd, bm) = block(lba, SALT);
            d.extend(bd);
            m.extend(bm);
        }
        if let Err(e) = v.write(at, &d, Some(&m), true).await {
            panic!("write of {n} blocks at {at}: {e}");
        }
        at += n;
    }
}

/// Every block of `lbas` (in logical zone `zone`) reads back when its unit is on a member
/// not in `lost`, and fails with Unrecovered Read Error when it is; returns how many of each.
async fn reads_survivors_only(
    v: &RaiznVolume,
    zone: u32,
    lbas: std::ops::Range<u64>,
    lost: &[usize],
) -> (u64, u64) {
    let l = v.layout();
    let zs = v.geometry().zone_start(zone);
    let (mut read, mut refused) = (0, 0);
    for lba in lbas {
        let member = l.place(zone, lba - zs).member;
        if lost.contains(&member) {
            let (mut d, mut m) = (vec![0u8; BS], vec![0u8; OOB]);
            let r = v.read(lba, &mut d, Some(&mut m)).await;
            assert_eq!(
                r,
                Err(NvmeStatus::UnrecoveredReadError),
                "block {lba} on lost member {member}"
            );
            refused += 1;
        } else {
            assert_blocks(v, lba..lba + 1, SALT, "a failed array's survivor").await;
            read += 1;
        }
    }
    (read, refused)
}

#[tokio::test]
async fn raid5_with_two_members_lost_reads_the_third() {
    let (_emus, v) = small_array(61, 61).await;
    let zs = v.geometry().zone_start(1);
    // Two complete stripes (2 units of 8 blocks each) and part of a third in zone 1.
    fill(&v, zs..zs + 37).await;
    if let Err(e) = v.fail_member(0).await {
        panic!("fail 0: {e}");
    }
    match v.fail_member(2).await {
        Err(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members, vec![0, 2]),
        r => panic!("a second failure was accepted: {r:?}"),
    }
    assert!(v.broken().is_some());
    let (read, refused) = reads_survivors_only(&v, 1, zs..zs + 37, &[0, 2]).await;
    assert!(read >= 8 && refused >= 8, "read {read}, refused {refused}");
    // Read-only: nothing changes the array any more; its zones are still reported.
    let (d, _) = block(zs + 37, SALT);
    assert!(v.write(zs + 37, &d, None, false).await.is_err());
    assert!(v.flush().await.is_err());
    assert!(v.zone_mgmt(ZoneAction::Finish, zs, false).await.is_err());
    match v.report_zones(zs, ReportFilter::All, false, 1).await {
        Ok(r) => {
            let z = &r.zones[0];
            assert_eq!((z.wp - z.start, z.state), (37, ZoneState::ImplicitlyOpened));
        }
        Err(e) => panic!("report of a failed array: {e}"),
    }
}

#[tokio::test]
async fn two_parity_units_with_three_members_lost_read_the_others() {
    let emus = emu_members(&small_member_geometry(), 5, 62);
    let members: Vec<Member> = common::as_members(&emus);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        parity: 2,
        ..RaiznConfig::new([62; 16])
    };
    let v = match RaiznVolume::format(members, cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let zs = v.geometry().zone_start(0);
    fill(&v, zs..zs + 60).await;
    for m in [3, 1] {
        if let Err(e) = v.fail_member(m).await {
            panic!("fail {m}: {e}");
        }
    }
    assert!(v.fail_member(4).await.is_err());
    let (read, refused) = reads_survivors_only(&v, 0, zs..zs + 60, &[3, 1, 4]).await;
    assert!(
        read >= 16 && refused >= 16,
        "read {read}, refused {refused}"
    );
}
