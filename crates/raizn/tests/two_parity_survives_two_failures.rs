//! Arrays with two parity units per stripe (m = 2, Reed-Solomon): every block written reads
//! back with any one or any two members failed, complete stripes from the parity units and
//! the incomplete stripe of an open zone from its partial-parity record; a third failure
//! makes the array failed and it never returns data; the two failed members are replaced
//! and rebuilt one after the other, and the rebuilt parity units serve the next failures.

mod common;

use std::sync::Arc;

use common::{as_members, assert_blocks, block, emu_members, small_member_geometry, BS, OOB};
use emu::EmuDevice;
use raizn::{LayoutError, Member, RaiznConfig, RaiznError, RaiznVolume};
use zns::{ZoneAction, ZonedDevice};

const N: usize = 5;

fn cfg(uuid: u8) -> RaiznConfig {
    RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        parity: 2,
        ..RaiznConfig::new([uuid; 16])
    }
}

async fn format(emus: &[Arc<EmuDevice>], uuid: u8) -> RaiznVolume {
    match RaiznVolume::format(as_members(emus), cfg(uuid), false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    }
}

/// Writes blocks `lbas` one write of `chunk` blocks at a time (the last may be shorter).
async fn write(v: &RaiznVolume, lbas: std::ops::Range<u64>, chunk: u64, salt: u64) {
    let mut at = lbas.start;
    while at < lbas.end {
        let n = chunk.min(lbas.end - at);
        let mut d = Vec::new();
        let mut m = Vec::new();
        for lba in at..at + n {
            let (bd, bm) = block(lba, salt);
            d.extend_from_slice(&bd);
            m.extend_from_slice(&bm);
        }
        if let Err(e) = v.write(at, &d, Some(&m), false).await {
            panic!("write of {n} at {at}: {e}");
        }
        at += n;
    }
}

/// Zone 0 full and finished early (partial last stripe sealed by Finish), zone 1 with full
/// stripes and an incomplete one, zone 2 with only a few blocks: the three ways a unit is
/// protected (parity written with its stripe, parity written by Finish, partial parity).
async fn fill(v: &RaiznVolume) -> Vec<std::ops::Range<u64>> {
    let zs = v.geometry().zone_size;
    write(v, 0..61, 7, 1).await;
    if let Err(e) = v.zone_mgmt(ZoneAction::Finish, 0, false).await {
        panic!("finish: {e}");
    }
    write(v, zs..zs + 53, 13, 1).await;
    write(v, 2 * zs..2 * zs + 5, 5, 1).await;
    vec![0..61, zs..zs + 53, 2 * zs..2 * zs + 5]
}

/// Reads each range in one command (a degraded read rebuilds every unit once, not once per
/// block) and compares every block with `block(lba, 1)`.
async fn check(v: &RaiznVolume, ranges: &[std::ops::Range<u64>], what: &str) {
    for r in ranges {
        let n = (r.end - r.start) as usize;
        let (mut d, mut m) = (vec![0u8; n * BS], vec![0u8; n * OOB]);
        if let Err(e) = v.read(r.start, &mut d, Some(&mut m)).await {
            panic!("{what}: read {r:?}: {e}");
        }
        for (i, lba) in r.clone().enumerate() {
            let (bd, bm) = block(lba, 1);
            let ok = d[i * BS..(i + 1) * BS] == bd[..] && m[i * OOB..(i + 1) * OOB] == bm[..];
            assert!(ok, "{what}: block {lba} reads wrong");
        }
    }
}

#[tokio::test]
async fn every_pair_of_failed_members_reads_back() {
    for a in 0..N {
        for b in a + 1..N {
            let emus = emu_members(&small_member_geometry(), N, 40 + (a * N + b) as u64);
            let v = format(&emus, 9).await;
            assert_eq!(v.layout().parity(), 2);
            let ranges = fill(&v).await;
            if let Err(e) = v.fail_member(a).await {
                panic!("fail {a}: {e}");
            }
            check(&v, &ranges, &format!("member {a} failed")).await;
            if let Err(e) = v.fail_member(b).await {
                panic!("fail {b}: {e}");
            }
            assert_eq!(v.failed_members(), vec![a, b]);
            check(&v, &ranges, &format!("members {a} and {b} failed")).await;
            // Degraded writes go on: the incomplete stripes grow and complete.
            let zs = v.geometry().zone_size;
            write(&v, zs + 53..zs + 70, 6, 1).await;
            let what = format!("written with {a} and {b} failed");
            check(&v, std::slice::from_ref(&(zs..zs + 70)), &what).await;
            drop(v);
            // A reopen without the two members stays doubly degraded and reads it all.
            let members: Vec<Option<Member>> = as_members(&emus)
                .into_iter()
                .enumerate()
                .map(|(i, m)| (i != a && i != b).then_some(m))
                .collect();
            let v = match RaiznVolume::open_degraded(members).await {
                Ok(v) => v,
                Err(e) => panic!("reopen without {a} and {b}: {e}"),
            };
            assert_eq!(v.failed_members(), vec![a, b]);
            check(&v, &[0..61, zs..zs + 70, 2 * zs..2 * zs + 5], "reopened").await;
        }
    }
}

#[tokio::test]
async fn incomplete_stripes_read_back_from_partial_parity_with_two_data_units_lost() {
    // Stripe 0 of zone 2 holds 5 blocks in its first unit only; with the first data unit's
    // member and another failed, only the partial-parity record (both parity units) holds it.
    let emus = emu_members(&small_member_geometry(), N, 71);
    let v = format(&emus, 10).await;
    let zs = v.geometry().zone_size;
    write(&v, 2 * zs..2 * zs + 19, 19, 1).await;
    let l = *v.layout();
    let (d0, d1) = (l.data_member(0, 0), l.data_member(0, 1));
    for m in [d0, d1] {
        if let Err(e) = v.fail_member(m).await {
            panic!("fail {m}: {e}");
        }
    }
    let before = v.pp_stats().replays;
    assert_blocks(
        &v,
        2 * zs..2 * zs + 19,
        1,
        "two data units of a partial stripe lost",
    )
    .await;
    assert!(v.pp_stats().replays > before, "no partial-parity replay");
}

#[tokio::test]
async fn a_third_failure_fails_the_array_and_no_data_is_returned() {
    let emus = emu_members(&small_member_geometry(), N, 72);
    let v = format(&emus, 11).await;
    let ranges = fill(&v).await;
    for m in [4, 1] {
        if let Err(e) = v.fail_member(m).await {
            panic!("fail {m}: {e}");
        }
    }
    match v.fail_member(2).await {
        Err(RaiznError::TooManyFailed { members, parity }) => {
            assert_eq!((members, parity), (vec![4, 1, 2], 2))
        }
        r => panic!("a third failure was accepted: {r:?}"),
    }
    assert!(v.broken().is_some());
    let mut d = vec![0u8; BS];
    let mut m = vec![0u8; OOB];
    assert!(v.read(ranges[0].start, &mut d, Some(&mut m)).await.is_err());
    drop(v);
    // The superblocks name two failed members; a reopen with a third absent is refused.
    let members: Vec<Option<Member>> = as_members(&emus)
        .into_iter()
        .enumerate()
        .map(|(i, m)| (i != 0).then_some(m))
        .collect();
    match RaiznVolume::open_degraded(members).await {
        Err(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members.len(), 3),
        Ok(_) => panic!("opened with three members failed"),
        Err(e) => panic!("wrong refusal: {e}"),
    }
}

#[tokio::test]
async fn two_failed_members_are_rebuilt_one_after_the_other() {
    let emus = emu_members(&small_member_geometry(), N, 73);
    let v = format(&emus, 12).await;
    let ranges = fill(&v).await;
    for m in [0, 3] {
        if let Err(e) = v.fail_member(m).await {
            panic!("fail {m}: {e}");
        }
    }
    let fresh = emu_members(&small_member_geometry(), 2, 99);
    if let Err(e) = v.replace_member(3, fresh[0].clone() as Member).await {
        panic!("replace 3: {e}");
    }
    assert_eq!(v.failed_members(), vec![0], "member 0 stays failed");
    check(&v, &ranges, "member 3 rebuilt, member 0 failed").await;
    if let Err(e) = v.replace_member(0, fresh[1].clone() as Member).await {
        panic!("replace 0: {e}");
    }
    assert!(v.failed_members().is_empty());
    check(&v, &ranges, "whole again").await;
    // The rebuilt units (data and both parities) now stand in for two other members.
    for m in [1, 2] {
        if let Err(e) = v.fail_member(m).await {
            panic!("fail {m}: {e}");
        }
    }
    check(&v, &ranges, "members 1 and 2 failed after the rebuilds").await;
}

#[test]
fn two_parity_units_need_four_members() {
    let emus = emu_members(&small_member_geometry(), 3, 74);
    let r = common::block_on_paused(RaiznVolume::format(as_members(&emus), cfg(13), false));
    match r {
        Err(RaiznError::Layout(LayoutError::TooFewForParity {
            members: 3,
            parity: 2,
        })) => {}
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("a 3-member array with two parity units was formatted"),
    }
}
