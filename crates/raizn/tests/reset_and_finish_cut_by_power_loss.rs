//! A logical Reset or Finish cut by power loss after it reached some member zones and not
//! others: the zone log in the general zones must bring the zone back reset (empty) or
//! finished (Full, its data intact), never with stale data on some members or Closed with
//! the finished members' units reading as zeros.
//!
//! Each run formats an array of emulated members behind `FaultyZoned` (commands wait up to
//! 2 ms), writes and flushes data into a zone, submits the Reset or Finish, and cuts power on
//! every member at a swept instant (whole milliseconds of the paused clock); it then looks at
//! the member zones as the cut left them and reopens the array.

mod common;

use std::sync::Arc;
use std::time::Duration;

use emu::EmuDevice;
use raizn::layout::MIN_META_ZONES;
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{FaultyZoned, Geometry, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

const BS: usize = 512;

fn member_geo() -> Geometry {
    common::unlimited_member_geometry(BS, 0, MIN_META_ZONES + 3, 48)
}

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

fn block(lba: u64) -> Vec<u8> {
    let mut b = vec![0u8; BS];
    for c in b.chunks_mut(8) {
        c.copy_from_slice(&(lba + 0x5151).to_le_bytes());
    }
    b
}

/// States of logical zone `zone`'s member zones, as the members hold them.
async fn member_states(emus: &[Arc<EmuDevice>], zone: u32) -> Vec<ZoneState> {
    let g = member_geo();
    let mut out = Vec::new();
    for e in emus {
        match e
            .report_zones(
                g.zone_start(zone + MIN_META_ZONES),
                ReportFilter::All,
                false,
                1,
            )
            .await
        {
            Ok(r) => out.extend(r.zones.first().map(|d| d.state)),
            Err(err) => panic!("member report: {err}"),
        }
    }
    out
}

/// What one run found.
struct Outcome {
    /// Some member zones reset or finished at the cut, others not.
    partial: bool,
    /// The command completed before the cut.
    completed: bool,
}

/// One run: `blocks` written and flushed to zone 1, then `action` on it cut after `cut_ms`.
async fn run(seed: u64, n: usize, action: ZoneAction, blocks: u64, cut_ms: u64) -> Outcome {
    let what = format!("seed {seed} N={n} {action:?} of {blocks} blocks cut at {cut_ms} ms");
    let emus = common::emu_members(&member_geo(), n, seed);
    let faulty: Vec<Arc<FaultyZoned<Arc<EmuDevice>>>> = emus
        .iter()
        .enumerate()
        .map(|(i, e)| Arc::new(FaultyZoned::new(e.clone(), seed * 31 + i as u64)))
        .collect();
    let members: Vec<Member> = faulty.iter().map(|f| f.clone() as Member).collect();
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([seed as u8 | 1; 16])
    };
    let v = match RaiznVolume::format(members, cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: format: {e}"),
    };
    let g = v.geometry();
    let zslba = g.zone_start(1);
    let data: Vec<u8> = (0..blocks).flat_map(|i| block(zslba + i)).collect();
    if let Err(e) = v.write(zslba, &data, None, true).await {
        panic!("{what}: write: {e}");
    }
    for f in &faulty {
        f.set_in_flight_delay(Duration::from_millis(2));
    }
    let before = member_states(&emus, 1).await;
    let cut = async {
        tokio::time::sleep(Duration::from_millis(cut_ms)).await;
    };
    let completed = tokio::select! {
        biased;
        r = v.zone_mgmt(action, zslba, false) => {
            if let Err(e) = r {
                panic!("{what}: {e}");
            }
            true
        }
        _ = cut => false,
    };
    for f in &faulty {
        f.cut_power();
    }
    let after = member_states(&emus, 1).await;
    let target = match action {
        ZoneAction::Reset => ZoneState::Empty,
        _ => ZoneState::Full,
    };
    let changed = after
        .iter()
        .zip(&before)
        .filter(|(a, b)| **a == target && **b != target)
        .count();
    let partial = changed > 0 && after.iter().any(|s| *s != target);
    drop(v);
    for (i, (e, f)) in emus.iter().zip(&faulty).enumerate() {
        if let Err(err) = e.power_loss(seed ^ (i as u64 + 7)) {
            panic!("{what}: power loss: {err}");
        }
        f.restore_power();
        f.set_in_flight_delay(Duration::ZERO);
    }
    let members: Vec<Member> = faulty.iter().map(|f| f.clone() as Member).collect();
    let v = match RaiznVolume::open(members).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: reopen: {e}"),
    };
    let report = match v.report_zones(zslba, ReportFilter::All, false, 1).await {
        Ok(r) => r,
        Err(e) => panic!("{what}: report: {e}"),
    };
    let Some(d) = report.zones.first().copied() else {
        panic!("{what}: no zone reported");
    };
    let mut got = vec![0u8; g.zone_capacity as usize * BS];
    for (k, chunk) in got.chunks_mut(16 * BS).enumerate() {
        if let Err(e) = v.read(zslba + k as u64 * 16, chunk, None).await {
            panic!("{what}: read: {e}");
        }
    }
    let zeros_from = |at: u64| got[at as usize * BS..].iter().all(|b| *b == 0);
    let intact = got[..data.len()] == data[..];
    match (action, d.state) {
        (ZoneAction::Reset, ZoneState::Empty) => {
            assert!(zeros_from(0), "{what}: a reset zone reads as data");
        }
        (ZoneAction::Reset, _) => {
            // Not reset: only when the reset reached no member zone.
            assert!(
                changed == 0 && !completed,
                "{what}: came back {:?} at {} though the reset {}",
                d.state,
                d.wp - d.start,
                if completed {
                    "completed"
                } else {
                    "reset some members"
                }
            );
            assert!(intact && zeros_from(blocks), "{what}: data changed");
        }
        (_, ZoneState::Full) => {
            assert!(
                intact && zeros_from(blocks),
                "{what}: finished zone reads wrong"
            );
        }
        (_, state) => {
            assert!(
                changed == 0 && !completed,
                "{what}: came back {state:?} though the finish {}",
                if completed {
                    "completed"
                } else {
                    "finished some members"
                }
            );
            assert_eq!(d.wp - d.start, blocks, "{what}: write pointer");
            assert!(intact && zeros_from(blocks), "{what}: data changed");
        }
    }
    Outcome { partial, completed }
}

fn sweep(action: ZoneAction) -> (u64, u64) {
    let (mut partial, mut runs) = (0, 0);
    for seed in 0..12u64 {
        let n = 3 + (seed % 2) as usize;
        // Whole stripes and partial ones, so Finish writes a parity unit or not.
        let blocks = [16, 5, 21, 1][(seed % 4) as usize];
        for cut_ms in 0..16 {
            let o = std::thread::spawn(move || {
                runtime().block_on(run(seed, n, action, blocks, cut_ms))
            })
            .join();
            let o = match o {
                Ok(o) => o,
                Err(p) => std::panic::resume_unwind(p),
            };
            runs += 1;
            partial += u64::from(o.partial);
            if o.completed {
                break;
            }
        }
    }
    (partial, runs)
}

#[test]
fn reset_cut_on_some_members_comes_back_reset() {
    let (partial, runs) = sweep(ZoneAction::Reset);
    println!("{partial} of {runs} cuts left the reset on some members only");
    assert!(
        partial >= 5,
        "{partial} of {runs} cuts left a partial reset"
    );
}

#[test]
fn finish_cut_on_some_members_comes_back_full() {
    let (partial, runs) = sweep(ZoneAction::Finish);
    println!("{partial} of {runs} cuts left the finish on some members only");
    assert!(
        partial >= 5,
        "{partial} of {runs} cuts left a partial finish"
    );
}
