//! Zone Append at queue depth on one logical zone (docs/DESIGN.md, "Zone Append at queue
//! depth"): many appends in flight on one zone, of mixed sizes crossing unit and stripe
//! boundaries, over members whose commands wait a seeded delay (`FaultyZoned`), so member
//! writes of different appends overlap and complete in a seeded order.
//!
//! Checked: every append lands at its own range, the ranges tile the zone from 0 in
//! submission order, the write pointer is their sum, every block reads back; a member failing
//! midway degrades the array and every append still lands and reads back; an append that
//! fails fails with it exactly the appends reserved after it, the ones before complete, and
//! the zone reopens with all of them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{block_on_paused, emu_members, BS, OOB};
use emu::EmuDevice;
use futures::future::join_all;
use raizn::layout::MIN_META_ZONES;
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{
    ErrorPlan, ErrorTiming, FaultyZoned, Geometry, NvmeResult, NvmeStatus, OpKind, OpSet,
    ReportFilter, SimRng, ZonedDevice,
};

const MEMBERS: usize = 5;
/// Blocks of the stripe unit: 8 blocks, so a stripe holds 32 data blocks.
const SU: u64 = 8;

fn member_geo() -> Geometry {
    common::unlimited_member_geometry(BS, OOB, MIN_META_ZONES + 2, 64)
}

type Faulty = Arc<FaultyZoned<Arc<EmuDevice>>>;

/// A formatted array whose members delay every command by up to 2 ms (seeded).
async fn array(seed: u64) -> (Vec<Faulty>, RaiznVolume) {
    let faulty: Vec<Faulty> = emu_members(&member_geo(), MEMBERS, seed)
        .into_iter()
        .enumerate()
        .map(|(i, e)| Arc::new(FaultyZoned::new(e, seed * 31 + i as u64)))
        .collect();
    for f in &faulty {
        f.set_in_flight_delay(Duration::from_millis(2));
    }
    let members: Vec<Member> = faulty.iter().map(|f| f.clone() as Member).collect();
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: SU * BS as u64,
        ..RaiznConfig::new([seed as u8 | 1; 16])
    };
    match RaiznVolume::format(members, cfg, false).await {
        Ok(v) => (faulty, v),
        Err(e) => panic!("format: {e}"),
    }
}

/// The data and metadata of append `i`, `n` blocks: different for every append and block.
fn payload(i: u64, n: u64) -> (Vec<u8>, Vec<u8>) {
    let (mut d, mut m) = (Vec::new(), Vec::new());
    for k in 0..n {
        let (bd, bm) = common::block(i * 1000 + k, 77);
        d.extend(bd);
        m.extend(bm);
    }
    (d, m)
}

/// Seeded append sizes (1 to 20 blocks, some of a whole unit or stripe) summing to at most
/// the logical zone capacity.
fn sizes(seed: u64, capacity: u64, count: usize) -> Vec<u64> {
    let mut rng = SimRng::new(seed);
    let mut out = Vec::new();
    let mut total = 0;
    while out.len() < count {
        let n = match rng.below(4) {
            0 => SU,
            1 => 4 * SU,
            _ => rng.range_inclusive(1, 20),
        };
        if total + n > capacity {
            break;
        }
        total += n;
        out.push(n);
    }
    out
}

/// Submits one append of `sizes[i]` per entry to zone `zone`, all in flight at once. Each
/// completed append is read back at once: its blocks must be readable when it completes,
/// before the appends after it have (the write pointer covers every completed append).
async fn append_all(
    v: &RaiznVolume,
    zone: u32,
    sizes: &[u64],
    fua_every: usize,
) -> Vec<NvmeResult<u64>> {
    let zslba = v.geometry().zone_start(zone);
    let appends = sizes.iter().enumerate().map(|(i, &n)| async move {
        let (d, m) = payload(i as u64, n);
        let fua = fua_every > 0 && i % fua_every == fua_every - 1;
        let r = v.append(zslba, &d, Some(&m), fua).await;
        if let Ok(lba) = r {
            let (mut gd, mut gm) = (vec![0u8; d.len()], vec![0u8; m.len()]);
            if let Err(e) = v.read(lba, &mut gd, Some(&mut gm)).await {
                panic!("append {i}: read at completion: {e}");
            }
            assert!(
                gd == d && gm == m,
                "append {i} at {lba} does not read back when it completes"
            );
        }
        r
    });
    join_all(appends).await
}

/// Checks that the completed appends (a prefix of `results`) tile the zone from 0 in
/// submission order and read back, and returns the blocks they hold.
async fn check_landed(
    v: &RaiznVolume,
    zone: u32,
    sizes: &[u64],
    results: &[NvmeResult<u64>],
    seed: u64,
) -> u64 {
    let zslba = v.geometry().zone_start(zone);
    let mut at = zslba;
    for (i, (r, &n)) in results.iter().zip(sizes).enumerate() {
        let Ok(lba) = r else { break };
        assert_eq!(
            *lba, at,
            "seed {seed}: append {i} of {n} blocks landed at {lba}, not {at}"
        );
        let (d, m) = payload(i as u64, n);
        let (mut gd, mut gm) = (vec![0u8; d.len()], vec![0u8; m.len()]);
        if let Err(e) = v.read(*lba, &mut gd, Some(&mut gm)).await {
            panic!("seed {seed}: read of append {i} at {lba}: {e}");
        }
        assert!(
            gd == d && gm == m,
            "seed {seed}: append {i} at {lba} reads back wrong"
        );
        at += n;
    }
    at - zslba
}

async fn write_pointer(v: &RaiznVolume, zone: u32) -> u64 {
    let zslba = v.geometry().zone_start(zone);
    match v.report_zones(zslba, ReportFilter::All, false, 1).await {
        Ok(r) => r.zones.first().map_or(0, |z| z.wp - z.start),
        Err(e) => panic!("report: {e}"),
    }
}

#[test]
fn many_appends_in_flight_land_in_order_and_read_back() {
    for seed in 0..6 {
        block_on_paused(async {
            let (_faulty, v) = array(seed).await;
            let cap = v.geometry().zone_capacity;
            let sizes = sizes(seed, cap, 48);
            let results = append_all(&v, 1, &sizes, if seed % 2 == 0 { 0 } else { 5 }).await;
            for (i, r) in results.iter().enumerate() {
                assert!(r.is_ok(), "seed {seed}: append {i} failed: {r:?}");
            }
            let held = check_landed(&v, 1, &sizes, &results, seed).await;
            assert_eq!(held, sizes.iter().sum::<u64>(), "seed {seed}");
            assert_eq!(
                write_pointer(&v, 1).await,
                held,
                "seed {seed}: write pointer"
            );
            let s = v.append_stats();
            assert_eq!(s.appends, sizes.len() as u64, "seed {seed}");
            // The appends must really have been in flight together, or nothing was tested.
            assert!(s.overlapped * 2 >= s.appends, "seed {seed}: {s:?}");
            assert!(s.depth_max >= 8, "seed {seed}: {s:?}");
            // The volume must still serve the zone serially afterwards.
            let rest = cap - held;
            if rest > 0 {
                let (d, m) = payload(999, rest.min(8));
                let at = v.geometry().zone_start(1) + held;
                if let Err(e) = v.write(at, &d, Some(&m), true).await {
                    panic!("seed {seed}: write after the appends: {e}");
                }
            }
        });
    }
}

#[test]
fn a_member_failing_midway_degrades_and_every_append_lands() {
    for seed in 0..4 {
        block_on_paused(async {
            let (faulty, v) = array(100 + seed).await;
            let victim = (seed as usize) % MEMBERS;
            // From its 3rd + seed command on, the member answers nothing but errors, as a
            // drive that died with appends in flight.
            let plan = ErrorPlan {
                ops: OpSet::ALL,
                fail_nth: Some(3 + seed),
                repeat: 1 << 20,
                status: NvmeStatus::NamespaceNotReady,
                timing: ErrorTiming::Before,
                ..ErrorPlan::default()
            };
            if let Err(e) = faulty[victim].set_errors(plan) {
                panic!("plan: {e}");
            }
            let cap = v.geometry().zone_capacity;
            let sizes = sizes(seed + 50, cap, 40);
            let results = append_all(&v, 0, &sizes, 7).await;
            for (i, r) in results.iter().enumerate() {
                assert!(r.is_ok(), "seed {seed}: append {i} failed: {r:?}");
            }
            assert_eq!(v.failed_member(), Some(victim), "seed {seed}");
            let held = check_landed(&v, 0, &sizes, &results, seed).await;
            assert_eq!(held, sizes.iter().sum::<u64>(), "seed {seed}");
            assert_eq!(write_pointer(&v, 0).await, held, "seed {seed}");
            assert!(v.append_stats().overlapped > 0, "seed {seed}");
        });
    }
}

#[test]
fn a_failed_append_fails_the_ones_after_it_and_the_zone_reopens() {
    for seed in 0..4 {
        block_on_paused(async {
            let (faulty, v) = array(200 + seed).await;
            // One write of member 1 fails without reaching it, with a status that is not a
            // member failure: the append carrying it fails, and no later one may commit.
            let plan = ErrorPlan {
                ops: OpSet::of(&[OpKind::Write]),
                fail_nth: Some(4 + seed),
                status: NvmeStatus::ZoneInvalidWrite,
                timing: ErrorTiming::Before,
                ..ErrorPlan::default()
            };
            if let Err(e) = faulty[1].set_errors(plan) {
                panic!("plan: {e}");
            }
            let cap = v.geometry().zone_capacity;
            let sizes = sizes(seed + 70, cap, 40);
            let results = append_all(&v, 0, &sizes, 0).await;
            let first_err = results.iter().position(|r| r.is_err());
            let Some(k) = first_err else {
                panic!("seed {seed}: no append failed")
            };
            assert!(
                results[k..].iter().all(|r| r.is_err()),
                "seed {seed}: an append after the failed one completed: {results:?}"
            );
            assert_eq!(results[k], Err(NvmeStatus::ZoneInvalidWrite), "seed {seed}");
            assert!(v.append_stats().failed_behind > 0, "seed {seed}");
            let held = check_landed(&v, 0, &sizes, &results, seed).await;
            assert_eq!(held, sizes[..k].iter().sum::<u64>(), "seed {seed}");
            assert_eq!(write_pointer(&v, 0).await, held, "seed {seed}");
            faulty[1].clear_errors();
            // Every completed append is still there after a reopen (which may also count
            // blocks of the failed appends that reached every member: a failed write's
            // blocks may or may not be there).
            drop(v);
            let members: Vec<Member> = faulty.iter().map(|f| f.clone() as Member).collect();
            let v = match RaiznVolume::open(members).await {
                Ok(v) => v,
                Err(e) => panic!("seed {seed}: reopen: {e}"),
            };
            assert!(write_pointer(&v, 0).await >= held, "seed {seed}");
            check_landed(&v, 0, &sizes, &results, seed).await;
        });
    }
}
