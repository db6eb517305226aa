//! Member failure is durable: a failed member (by `fail_member`, by a member answering
//! Namespace Not Ready, or absent at open) puts the array in degraded mode, the survivors'
//! superblocks record it, reopens stay degraded, a second failure fails the array loudly,
//! and open refuses members that do not belong.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use raizn::{Member, RaiznConfig, RaiznError, RaiznVolume};
use zns::{
    ErrorPlan, FaultyZoned, Geometry, NvmeStatus, ReportFilter, SimRng, ZoneAction, ZonedDevice,
};

const BS: usize = 4096;
const SU: u64 = 8;

fn cfg(uuid: u8) -> RaiznConfig {
    RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: SU * BS as u64,
        ..RaiznConfig::new([uuid; 16])
    }
}

async fn format(members: Vec<Member>, uuid: u8) -> RaiznVolume {
    match RaiznVolume::format(members, cfg(uuid), false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    }
}

async fn open(members: Vec<Option<Member>>) -> RaiznVolume {
    match RaiznVolume::open_degraded(members).await {
        Ok(v) => v,
        Err(e) => panic!("open: {e}"),
    }
}

fn all(emus: &[Arc<EmuDevice>]) -> Vec<Option<Member>> {
    emus.iter().map(|e| Some(e.clone() as Member)).collect()
}

fn without(emus: &[Arc<EmuDevice>], gone: usize) -> Vec<Option<Member>> {
    let mut m = all(emus);
    m[gone] = None;
    m
}

fn pattern(seed: u64, blocks: usize) -> Vec<u8> {
    let mut rng = SimRng::new(seed);
    (0..blocks * BS).map(|_| rng.next_u64() as u8).collect()
}

async fn write(v: &RaiznVolume, lba: u64, data: &[u8], fua: bool) {
    if let Err(e) = v.write(lba, data, None, fua).await {
        panic!("write of {} blocks at {lba}: {e}", data.len() / BS);
    }
}

async fn read(v: &RaiznVolume, lba: u64, blocks: usize) -> Vec<u8> {
    let mut d = vec![0u8; blocks * BS];
    if let Err(e) = v.read(lba, &mut d, None).await {
        panic!("read of {blocks} blocks at {lba}: {e}");
    }
    d
}

#[tokio::test]
async fn a_member_answering_not_ready_degrades_the_array_for_good() {
    // Before failures were persisted, a reopen trusted the stale member again: data written
    // while it was failed read back from its old contents.
    let emus = common::emu_members(&common::small_member_geometry(), 3, 11);
    let faulty: Vec<Arc<FaultyZoned<Arc<EmuDevice>>>> = emus
        .iter()
        .enumerate()
        .map(|(i, e)| Arc::new(FaultyZoned::new(e.clone(), 100 + i as u64)))
        .collect();
    let members: Vec<Member> = faulty.iter().map(|f| f.clone() as Member).collect();
    let v = format(members.clone(), 1).await;
    let zone = v.geometry().zone_size;
    let a = pattern(1, 24);
    write(&v, zone, &a, false).await;
    let plan = ErrorPlan {
        probability: 1.0,
        status: NvmeStatus::NamespaceNotReady,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[1].set_errors(plan) {
        panic!("error plan: {e}");
    }
    let b = pattern(2, 20);
    write(&v, zone + 24, &b, true).await;
    assert_eq!(v.failed_member(), Some(1));
    assert_eq!(read(&v, zone, 24).await, a);
    assert_eq!(read(&v, zone + 24, 20).await, b);
    drop(v);
    // The member answers again, but it missed `b`: the array must not trust it.
    faulty[1].clear_errors();
    let v = open(members.iter().map(|m| Some(m.clone())).collect()).await;
    assert_eq!(v.failed_member(), Some(1), "the reopen forgot the failure");
    assert_eq!(read(&v, zone, 24).await, a);
    assert_eq!(read(&v, zone + 24, 20).await, b);
    // Degraded writes go on after the reopen, and survive another one without the member.
    let c = pattern(3, 4);
    write(&v, zone + 44, &c, true).await;
    drop(v);
    let v = open(without(&emus, 1)).await;
    assert_eq!(v.failed_member(), Some(1));
    assert_eq!(read(&v, zone + 24, 20).await, b);
    assert_eq!(read(&v, zone + 44, 4).await, c);
}

#[tokio::test]
async fn fail_member_is_recorded_and_a_reopen_stays_degraded() {
    let emus = common::emu_members(&common::small_member_geometry(), 3, 12);
    let v = format(common::as_members(&emus), 2).await;
    let a = pattern(4, 12);
    write(&v, 0, &a, true).await;
    if let Err(e) = v.fail_member(2).await {
        panic!("fail_member: {e}");
    }
    let b = pattern(5, 7);
    write(&v, 12, &b, true).await;
    drop(v);
    let v = open(all(&emus)).await;
    assert_eq!(v.failed_member(), Some(2));
    assert_eq!(read(&v, 0, 12).await, a);
    assert_eq!(read(&v, 12, 7).await, b);
    assert!(v.broken().is_none());
}

#[tokio::test]
async fn an_absent_member_opens_degraded_and_its_partial_stripe_reads_back() {
    // Each member in turn is absent at open; the acknowledged blocks of the incomplete
    // stripe are rebuilt from the partial-parity record when they were on it.
    for gone in 0..3 {
        let emus = common::emu_members(&common::small_member_geometry(), 3, 20 + gone as u64);
        let v = format(common::as_members(&emus), 3).await;
        // 1.5 stripes: stripe 1 holds 12 of 16 data blocks (both units, the second in part).
        let a = pattern(6, 28);
        write(&v, 0, &a, true).await;
        drop(v);
        let v = open(without(&emus, gone)).await;
        assert_eq!(v.failed_member(), Some(gone));
        assert_eq!(read(&v, 0, 28).await, a, "member {gone} absent");
        let w = v.report_zones(0, ReportFilter::All, false, 1).await;
        assert_eq!(w.map(|r| r.zones[0].wp), Ok(28), "member {gone} absent");
        // Writing on from the write pointer works degraded and survives a reopen.
        let b = pattern(7, 4);
        write(&v, 28, &b, true).await;
        drop(v);
        let v = open(all(&emus)).await;
        assert_eq!(v.failed_member(), Some(gone));
        assert_eq!(read(&v, 0, 28).await, a);
        assert_eq!(read(&v, 28, 4).await, b);
    }
}

#[tokio::test]
async fn a_second_failure_fails_the_array_loudly() {
    let emus = common::emu_members(&common::small_member_geometry(), 3, 13);
    let v = format(common::as_members(&emus), 4).await;
    write(&v, 0, &pattern(8, 16), true).await;
    if let Err(e) = v.fail_member(0).await {
        panic!("fail_member: {e}");
    }
    match v.fail_member(2).await {
        Err(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members, vec![0, 2]),
        other => panic!("a second failure was accepted: {other:?}"),
    }
    let why = v.broken().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        why.contains("[0, 2]"),
        "the error must name both members: {why}"
    );
    let mut buf = vec![0u8; BS];
    assert!(v.read(0, &mut buf, None).await.is_err());
    assert!(v.write(16, &buf, None, false).await.is_err());
    assert!(v.flush().await.is_err());
    assert!(v.zone_mgmt(ZoneAction::Reset, 0, false).await.is_err());
    // Read-only where the data still is: zones are reported (and the survivors' units read,
    // `failed_array_reads_what_survives.rs`).
    assert!(v.report_zones(0, ReportFilter::All, false, 1).await.is_ok());
    drop(v);
    // The first failure is on the survivors; a second member gone at open is refused.
    match RaiznVolume::open_degraded(without(&emus, 2)).await {
        Err(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members, vec![0, 2]),
        Ok(_) => panic!("opened with two failed members"),
        Err(e) => panic!("wrong error: {e}"),
    }
    match RaiznVolume::open_degraded(vec![None, None, Some(emus[2].clone() as Member)]).await {
        Err(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members, vec![0, 1]),
        Ok(_) => panic!("opened with two absent members"),
        Err(e) => panic!("wrong error: {e}"),
    }
}

#[tokio::test]
async fn a_second_member_failing_under_io_never_returns_wrong_data() {
    let emus = common::emu_members(&common::small_member_geometry(), 3, 14);
    let faulty: Vec<Arc<FaultyZoned<Arc<EmuDevice>>>> = emus
        .iter()
        .enumerate()
        .map(|(i, e)| Arc::new(FaultyZoned::new(e.clone(), 200 + i as u64)))
        .collect();
    let members: Vec<Member> = faulty.iter().map(|f| f.clone() as Member).collect();
    let v = format(members, 5).await;
    write(&v, 0, &pattern(9, 32), true).await;
    if let Err(e) = v.fail_member(1).await {
        panic!("fail_member: {e}");
    }
    let plan = ErrorPlan {
        probability: 1.0,
        status: NvmeStatus::WriteFault,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[0].set_errors(plan) {
        panic!("error plan: {e}");
    }
    let mut buf = vec![0u8; 32 * BS];
    assert!(v.read(0, &mut buf, None).await.is_err());
    match v.broken() {
        Some(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members, vec![1, 0]),
        other => panic!("the array must be failed: {other:?}"),
    }
    faulty[0].clear_errors();
    assert!(
        v.read(0, &mut buf, None).await.is_err(),
        "a failed array served a read"
    );
}

#[tokio::test]
async fn open_refuses_members_that_do_not_belong() {
    let a = common::emu_members(&common::small_member_geometry(), 3, 15);
    let b = common::emu_members(&common::small_member_geometry(), 3, 16);
    drop(format(common::as_members(&a), 6).await);
    drop(format(common::as_members(&b), 7).await);
    // Members holding data are refused by format unless forced.
    match RaiznVolume::format(common::as_members(&a), cfg(8), false).await {
        Err(RaiznError::HoldsData { member: 0 }) => {}
        other => panic!("format over data: {:?}", other.map(|_| ())),
    }
    // A member of another array.
    let mixed = vec![
        Some(a[0].clone() as Member),
        Some(b[1].clone() as Member),
        Some(a[2].clone() as Member),
    ];
    match RaiznVolume::open_degraded(mixed).await {
        Err(e @ RaiznError::Foreign { member: 1, .. }) => {
            assert!(e.to_string().contains("UUID"), "{e}")
        }
        other => panic!("foreign member: {:?}", other.map(|_| ())),
    }
    // Members in the wrong positions.
    let swapped = vec![
        Some(a[1].clone() as Member),
        Some(a[0].clone() as Member),
        Some(a[2].clone() as Member),
    ];
    match RaiznVolume::open_degraded(swapped).await {
        Err(RaiznError::Foreign { member: 0, .. }) => {}
        other => panic!("swapped members: {:?}", other.map(|_| ())),
    }
    // A member of another geometry.
    let g = Geometry {
        zone_count: 9,
        ..common::small_member_geometry()
    };
    let c = common::emu_members(&g, 3, 17);
    drop(format(common::as_members(&c), 6).await);
    let other = vec![
        Some(a[0].clone() as Member),
        Some(a[1].clone() as Member),
        Some(c[2].clone() as Member),
    ];
    match RaiznVolume::open_degraded(other).await {
        Err(RaiznError::Foreign { member: 2, .. }) => {}
        other => panic!("member of another geometry: {:?}", other.map(|_| ())),
    }
    // A blank member is not a member.
    let blank = common::emu_members(&common::small_member_geometry(), 1, 18);
    let with_blank = vec![
        Some(a[0].clone() as Member),
        Some(blank[0].clone() as Member),
        Some(a[2].clone() as Member),
    ];
    match RaiznVolume::open_degraded(with_blank).await {
        Err(RaiznError::NotFormatted { member: 1, .. }) => {}
        other => panic!("blank member: {:?}", other.map(|_| ())),
    }
}
