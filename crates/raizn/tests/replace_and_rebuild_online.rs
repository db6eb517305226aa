//! Replacing a failed member and rebuilding it while clients write and read: afterwards the
//! array is whole, and with another member failed every block still reads back (so the new
//! member holds correct data and parity); a power cut during the rebuild reopens degraded
//! (never reading the new member's unrebuilt zones) and the rebuild resumes, keeping the
//! full zones it completed before the cut;
//! a second failure during the rebuild fails the array loudly.
//!
//! Members are emulated drives behind `FaultyZoned` with a 1 ms in-flight delay on a paused
//! clock, so the rebuild and the clients interleave at every member command.

mod common;

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use emu::EmuDevice;
use raizn::{Member, RaiznConfig, RaiznError, RaiznVolume};
use zns::{FaultyZoned, NvmeStatus, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

const BS: usize = 4096;
const OOB: usize = 16;

type Faulty = Arc<FaultyZoned<Arc<EmuDevice>>>;

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    {
        Ok(r) => r,
        Err(e) => panic!("runtime: {e}"),
    }
}

fn faulty(emus: &[Arc<EmuDevice>], seed: u64) -> Vec<Faulty> {
    emus.iter()
        .enumerate()
        .map(|(i, e)| {
            let f = Arc::new(FaultyZoned::new(e.clone(), seed + i as u64));
            f.set_in_flight_delay(Duration::from_millis(1));
            f
        })
        .collect()
}

fn members(f: &[Faulty]) -> Vec<Member> {
    f.iter().map(|f| f.clone() as Member).collect()
}

fn fresh_member(seed: u64) -> Faulty {
    let e = common::emu_members(&common::small_member_geometry(), 1, seed ^ 0xABCD);
    faulty(&e, seed ^ 0x77)[0].clone()
}

/// The blocks written to each logical zone (data and metadata), from its start.
#[derive(Default, Clone)]
struct Model {
    zones: Vec<(Vec<u8>, Vec<u8>)>,
}

fn content(lba: u64, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let mut d = vec![0u8; BS];
    for c in d.chunks_mut(8) {
        c.copy_from_slice(&(lba.wrapping_mul(0x9E37) ^ salt).to_le_bytes());
    }
    let mut m = vec![0u8; OOB];
    m[..8].copy_from_slice(&(lba ^ salt).to_le_bytes());
    (d, m)
}

async fn write(v: &RaiznVolume, model: &RefCell<Model>, zone: u32, blocks: u64, salt: u64) {
    let g = v.geometry();
    let at = model.borrow().zones[zone as usize].0.len() as u64 / BS as u64;
    let lba = g.zone_start(zone) + at;
    let mut d = Vec::new();
    let mut m = Vec::new();
    for i in 0..blocks {
        let (a, b) = content(lba + i, salt);
        d.extend(a);
        m.extend(b);
    }
    {
        let mut md = model.borrow_mut();
        md.zones[zone as usize].0.extend_from_slice(&d);
        md.zones[zone as usize].1.extend_from_slice(&m);
    }
    // In commands of at most the array's transfer limit.
    let mdts = u64::from(g.mdts_blocks);
    let mut done = 0u64;
    while done < blocks {
        let k = mdts.min(blocks - done) as usize;
        let (a, o) = (done as usize, done as usize);
        let r = v
            .write(
                lba + done,
                &d[a * BS..(a + k) * BS],
                Some(&m[o * OOB..(o + k) * OOB]),
                false,
            )
            .await;
        if let Err(e) = r {
            panic!("write of {blocks} at zone {zone} offset {at}: {e}");
        }
        done += k as u64;
    }
}

async fn finish(v: &RaiznVolume, model: &RefCell<Model>, zone: u32) {
    let g = v.geometry();
    if let Err(e) = v
        .zone_mgmt(ZoneAction::Finish, g.zone_start(zone), false)
        .await
    {
        panic!("finish zone {zone}: {e}");
    }
    let mut md = model.borrow_mut();
    let z = &mut md.zones[zone as usize];
    z.0.resize(g.zone_capacity as usize * BS, 0);
    z.1.resize(g.zone_capacity as usize * OOB, 0);
}

/// Every zone reads back as the model says (zeros beyond what was written).
async fn verify(v: &RaiznVolume, model: &Model, what: &str) {
    let g = v.geometry();
    for (zone, (d, m)) in model.zones.iter().enumerate() {
        let n = g.zone_capacity as usize;
        let mut got = vec![0u8; n * BS];
        let mut gm = vec![0u8; n * OOB];
        for k in (0..n).step_by(16) {
            let lba = g.zone_start(zone as u32) + k as u64;
            let r = v
                .read(
                    lba,
                    &mut got[k * BS..(k + 16) * BS],
                    Some(&mut gm[k * OOB..(k + 16) * OOB]),
                )
                .await;
            if let Err(e) = r {
                panic!("{what}: read zone {zone} at {k}: {e}");
            }
        }
        let mut want = d.clone();
        want.resize(n * BS, 0);
        let mut wm = m.clone();
        wm.resize(n * OOB, 0);
        for b in 0..n {
            assert!(
                got[b * BS..(b + 1) * BS] == want[b * BS..(b + 1) * BS]
                    && gm[b * OOB..(b + 1) * OOB] == wm[b * OOB..(b + 1) * OOB],
                "{what}: zone {zone} block {b} reads wrong"
            );
        }
    }
}

/// An array of `n` members with zones in every state: full by writing, partly written (a
/// partial stripe), finished early, empty, and one written while member 1 was failed.
async fn setup(n: usize, seed: u64) -> (Vec<Faulty>, RaiznVolume, RefCell<Model>) {
    let emus = common::emu_members(&common::small_member_geometry(), n, seed);
    let f = faulty(&emus, seed);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([seed as u8 | 1; 16])
    };
    let v = match RaiznVolume::format(members(&f), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let g = v.geometry();
    let model = RefCell::new(Model {
        zones: vec![Default::default(); g.zone_count as usize],
    });
    let cap = g.zone_capacity;
    write(&v, &model, 0, 32, 1).await;
    write(&v, &model, 0, cap - 32, 2).await;
    write(&v, &model, 1, 13, 3).await;
    write(&v, &model, 2, 5, 4).await;
    finish(&v, &model, 2).await;
    if let Err(e) = v.fail_member(1).await {
        panic!("fail member 1: {e}");
    }
    write(&v, &model, 3, 19, 5).await;
    write(&v, &model, 1, 4, 6).await;
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    (f, v, model)
}

/// Client work during a rebuild: writes to every non-full zone, reads of written blocks.
async fn clients(v: &RaiznVolume, model: &RefCell<Model>, seen: &RefCell<Vec<(u64, u64)>>) {
    let g = v.geometry();
    for round in 0..12u64 {
        for zone in [1u32, 3, 4] {
            let at = model.borrow().zones[zone as usize].0.len() as u64 / BS as u64;
            let blocks = (1 + (round * 7 + u64::from(zone)) % 9).min(g.zone_capacity - at);
            if blocks > 0 {
                write(v, model, zone, blocks, 100 + round).await;
            }
        }
        let mut buf = vec![0u8; 4 * BS];
        if let Err(e) = v.read(g.zone_start(0) + round, &mut buf, None).await {
            panic!("client read during rebuild: {e}");
        }
        let want = &model.borrow().zones[0].0[round as usize * BS..(round as usize + 4) * BS];
        assert!(buf == want, "client read during rebuild reads wrong");
        if let Some(p) = v.rebuild_progress() {
            seen.borrow_mut().push((p.blocks_done, p.blocks_total));
        }
    }
}

#[test]
fn rebuild_under_client_io_then_another_failure_reads_everything() {
    for (seed, n) in [(1u64, 3usize), (2, 4)] {
        runtime().block_on(async move {
            let (f, v, model) = setup(n, seed).await;
            let new = fresh_member(seed);
            let seen = RefCell::new(Vec::new());
            let (r, ()) = tokio::join!(
                v.replace_member(1, new.clone() as Member),
                clients(&v, &model, &seen)
            );
            if let Err(e) = r {
                panic!("seed {seed}: rebuild: {e}");
            }
            assert_eq!(v.failed_member(), None, "seed {seed}: the array is whole");
            assert!(v.rebuild_progress().is_none());
            let seen = seen.into_inner();
            assert!(
                seen.iter().any(|(d, t)| *d > 0 && d < t),
                "seed {seed}: progress seen mid-rebuild: {seen:?}"
            );
            assert!(
                seen.windows(2).all(|w| w[0].0 <= w[1].0),
                "progress only grows"
            );
            let model = model.into_inner();
            verify(&v, &model, "after the rebuild").await;
            // Another member fails: the rebuilt member's data and parity now serve reads.
            if let Err(e) = v.fail_member(0).await {
                panic!("seed {seed}: fail member 0: {e}");
            }
            verify(&v, &model, "rebuilt array with member 0 failed").await;
            drop(v);
            // And across a reopen without member 2 (a different survivor set).
            let mut ms: Vec<Option<Member>> = members(&f).into_iter().map(Some).collect();
            ms[1] = Some(new.clone() as Member);
            ms[0] = None;
            let v = match RaiznVolume::open_degraded(ms).await {
                Ok(v) => v,
                Err(e) => panic!("seed {seed}: reopen: {e}"),
            };
            assert_eq!(v.failed_member(), Some(0));
            verify(&v, &model, "reopened with the rebuilt member").await;
        });
    }
}

/// One power cut `cut_ms` into a rebuild; None when the rebuild finished first, else
/// whether the cut came inside the rebuild proper (not while it recorded its completion)
/// and how many zones the rebuild that followed kept from the one cut.
async fn cut_rebuild(cut_ms: u64) -> Option<(bool, u64)> {
    let mut resumed = 0u64;
    {
        {
            let seed = 10 + cut_ms;
            let (f, v, model) = setup(3, seed).await;
            let new = fresh_member(seed);
            let cut = tokio::time::sleep(Duration::from_millis(cut_ms));
            tokio::select! {
                biased;
                r = v.replace_member(1, new.clone() as Member) => {
                    if let Err(e) = r {
                        panic!("cut at {cut_ms} ms: rebuild: {e}");
                    }
                    return None;
                }
                _ = cut => {}
            }
            let partly = v.rebuild_progress().map(|p| p.blocks_done);
            let zones_done_at_cut = v.rebuild_progress().map(|p| p.zones_done);
            for m in f.iter().chain([&new]) {
                m.cut_power();
            }
            drop(v);
            for (i, m) in f.iter().chain([&new]).enumerate() {
                if let Err(e) = m.inner().power_loss(seed + i as u64) {
                    panic!("power loss: {e}");
                }
                m.restore_power();
            }
            let mut ms = members(&f);
            ms[1] = new.clone() as Member;
            let v = match RaiznVolume::open(ms).await {
                Ok(v) => v,
                Err(e) => panic!("cut at {cut_ms} ms ({partly:?} blocks rebuilt): reopen: {e}"),
            };
            let model = model.into_inner();
            verify(&v, &model, "reopened after the cut").await;
            if partly.is_none() && v.failed_member().is_none() {
                // Cut while the completed rebuild recorded the whole array: it is whole.
                return Some((false, 0));
            }
            assert_eq!(
                v.failed_member(),
                Some(1),
                "cut at {cut_ms} ms ({partly:?} blocks rebuilt): a rebuild cut short leaves \
                 the member failed"
            );
            let before = new.inner().stats();
            let report = match v
                .replace_member_up_to(1, new.clone() as Member, u32::MAX)
                .await
            {
                Ok(r) => r,
                Err(e) => panic!("cut at {cut_ms} ms: rebuild again: {e}"),
            };
            let after = new.inner().stats();
            let p = report.progress;
            assert!(report.whole);
            // Rebuild order: the active zones 1 and 3, then the full zones 0 and 2. A full
            // zone counted done before the cut was recorded, and is kept.
            let full_done = zones_done_at_cut.unwrap_or(0).saturating_sub(2).min(2);
            assert!(
                p.zones_resumed >= full_done && p.zones_resumed <= 2,
                "cut at {cut_ms} ms: {} zones were done ({full_done} full), {} kept",
                zones_done_at_cut.unwrap_or(0),
                p.zones_resumed
            );
            // Kept zones are neither reset nor written again on the new member.
            let kept: Vec<usize> = [0usize, 2]
                .into_iter()
                .filter(|z| {
                    let pz = z + raizn::layout::MIN_META_ZONES as usize;
                    after.zone_writes[pz] == before.zone_writes[pz]
                        && after.zone_resets[pz] == before.zone_resets[pz]
                })
                .collect();
            assert_eq!(
                kept.len() as u32,
                p.zones_resumed,
                "cut at {cut_ms} ms: zones untouched by the resumed rebuild {kept:?}"
            );
            assert_eq!(
                p.blocks_resumed,
                u64::from(p.zones_resumed) * new.geometry().zone_capacity,
                "kept blocks are the kept zones' member capacity"
            );
            resumed += u64::from(p.zones_resumed);
            assert_eq!(v.failed_member(), None);
            if let Err(e) = v.fail_member(2).await {
                panic!("fail member 2: {e}");
            }
            verify(&v, &model, "rebuilt again, member 2 failed").await;
            Some((partly.is_some(), resumed))
        }
    }
}

/// Guards against a rebuild cut by power loss starting over: the full zones it completed
/// before the cut must be kept (not reset, not written again) by the rebuild that follows,
/// and every block must still read back.
#[test]
fn power_cut_during_rebuild_reopens_degraded_and_rebuild_resumes() {
    let (mut inside, mut resumed_cuts) = (0, 0);
    for cut_ms in 1u64.. {
        match runtime().block_on(cut_rebuild(cut_ms)) {
            None => break,
            Some((i, resumed)) => {
                inside += u64::from(i);
                resumed_cuts += u64::from(resumed > 0);
            }
        }
    }
    println!("{inside} cuts inside a rebuild, {resumed_cuts} resumed with zones kept");
    assert!(inside >= 8, "only {inside} cuts came inside a rebuild");
    assert!(
        resumed_cuts >= 4,
        "only {resumed_cuts} cuts resumed with zones kept"
    );
}

#[test]
fn second_failure_during_rebuild_fails_loudly() {
    runtime().block_on(async {
        let (_f, v, model) = setup(3, 40).await;
        let new = fresh_member(40);
        let fail_later = async {
            tokio::time::sleep(Duration::from_millis(15)).await;
            v.fail_member(2).await
        };
        let (r, second) = tokio::join!(v.replace_member(1, new as Member), fail_later);
        assert!(
            matches!(second, Err(RaiznError::TooManyFailed { .. })),
            "{second:?}"
        );
        match r {
            Err(RaiznError::TooManyFailed { members, .. }) => assert_eq!(members, vec![1, 2]),
            other => panic!("the rebuild must fail naming both members: {other:?}"),
        }
        assert!(v.broken().is_some());
        // Read-only where the data still is: a block on the surviving member reads back as
        // written, one on a lost member fails; nothing is made up.
        let (mut good, mut refused) = (0, 0);
        let zone0 = model.borrow().zones[0].0.clone();
        for (lba, want) in zone0.chunks(BS).enumerate() {
            let mut buf = vec![0u8; BS];
            match v.read(lba as u64, &mut buf, None).await {
                Ok(()) => {
                    assert_eq!(&buf[..], want, "block {lba} read wrong");
                    good += 1;
                }
                Err(e) => {
                    assert_eq!(e, NvmeStatus::UnrecoveredReadError, "block {lba}");
                    refused += 1;
                }
            }
        }
        assert!(good > 0 && refused > 0, "{good} read, {refused} refused");
        drop(model);
    });
}

#[test]
fn replace_refuses_what_it_must() {
    runtime().block_on(async {
        let (f, v, _model) = setup(3, 50).await;
        // Not the failed member.
        let r = v.replace_member(0, fresh_member(50) as Member).await;
        assert!(
            matches!(r, Err(RaiznError::NotReplaceable { member: 0, .. })),
            "{r:?}"
        );
        // A device holding someone else's data.
        let other = fresh_member(51);
        let g = other.geometry();
        if let Err(e) = other
            .write(g.zone_start(4), &vec![1u8; BS], Some(&[0u8; OOB]), false)
            .await
        {
            panic!("{e}");
        }
        let r = v.replace_member(1, other as Member).await;
        assert!(
            matches!(r, Err(RaiznError::HoldsData { member: 1 })),
            "{r:?}"
        );
        // The failed member itself, back: it is this array's, so it is reset and rebuilt.
        if let Err(e) = v.replace_member(1, f[1].clone() as Member).await {
            panic!("replacing by the stale member: {e}");
        }
        assert_eq!(v.failed_member(), None);
        let r = v
            .report_zones(0, ReportFilter::All, false, usize::MAX)
            .await
            .map(|r| {
                r.zones
                    .iter()
                    .filter(|z| z.state == ZoneState::Full)
                    .count()
            });
        assert_eq!(r, Ok(2));
    });
}

/// Guards against a resumed rebuild trusting a zone that changed while the rebuild was
/// paused: zone 0 was rebuilt (and recorded) Full, then reset and rewritten while the array
/// ran degraded; the new member's old copy of it must be rebuilt again, not kept. Without
/// the reset, the same zone is kept.
#[test]
fn a_zone_rewritten_while_paused_is_rebuilt_again() {
    for rewrite in [false, true] {
        runtime().block_on(async move {
            let (_f, v, model) = setup(3, 60).await;
            let new = fresh_member(60);
            // Active zones 1 and 3 first, then the full zone 0.
            match v.replace_member_up_to(1, new.clone() as Member, 3).await {
                Ok(r) => assert!(!r.whole && r.progress.zones_done == 3, "{r:?}"),
                Err(e) => panic!("first slice: {e}"),
            }
            assert_eq!(v.failed_member(), Some(1), "paused: degraded again");
            if rewrite {
                let g = v.geometry();
                if let Err(e) = v.zone_mgmt(ZoneAction::Reset, g.zone_start(0), false).await {
                    panic!("reset: {e}");
                }
                model.borrow_mut().zones[0] = Default::default();
                write(&v, &model, 0, g.zone_capacity, 77).await;
            }
            let r = match v
                .replace_member_up_to(1, new.clone() as Member, u32::MAX)
                .await
            {
                Ok(r) => r,
                Err(e) => panic!("resume: {e}"),
            };
            assert!(r.whole);
            assert_eq!(
                r.progress.zones_resumed,
                u32::from(!rewrite),
                "rewrite {rewrite}: zone 0 kept only when unchanged"
            );
            let model = model.into_inner();
            if let Err(e) = v.fail_member(0).await {
                panic!("fail member 0: {e}");
            }
            verify(&v, &model, "resumed rebuild, member 0 failed").await;
        });
    }
}
