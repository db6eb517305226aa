//! A general-zone collection that fails at run time after its home zone's reset, with an
//! error that does not fail the member, leaves the swap zone holding the only whole
//! checkpoint. The volume goes on; the next collection on that member must not lose it: a
//! power cut at every command of that next collection's volume command, then a reopen,
//! finds every member still a RAIZN member and the acknowledged writes readable
//! (docs/DESIGN.md, "A swap zone left by a cut collection").

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use emu::EmuDevice;
use parking_lot::Mutex;
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{Hook, Hooked, NvmeResult, NvmeStatus, OpKind, ZoneAction, ZonedDevice};

use common::BS;

/// What a member's hook does: fails the first write after its second Zone Reset once armed
/// (the home rewrite of a collection whose swap reset came first), fails its `fail_at`-th
/// command (Invalid Field, which does not fail a member), and from its `cut_at`-th command
/// on fails every command of every member as a power cut would (both counted from when
/// they are set).
#[derive(Default)]
struct Plan {
    fail_home_write: bool,
    resets: u32,
    fail_at: Option<u64>,
    cut_at: Option<u64>,
    seen: u64,
}

struct Fault {
    plan: Mutex<Plan>,
    dead: Arc<AtomicBool>,
    commands: AtomicU64,
}

/// A member's `Fault`, shared with the test.
struct Shared(Arc<Fault>);

#[async_trait]
impl Hook for Shared {
    async fn before(&self, op: OpKind, action: Option<ZoneAction>) -> NvmeResult<()> {
        self.0.before(op, action)
    }
}

impl Fault {
    fn before(&self, op: OpKind, action: Option<ZoneAction>) -> NvmeResult<()> {
        self.commands.fetch_add(1, Ordering::Relaxed);
        if self.dead.load(Ordering::Relaxed) {
            return Err(NvmeStatus::AbortedPowerLoss);
        }
        let mut p = self.plan.lock();
        if p.fail_home_write {
            if action == Some(ZoneAction::Reset) {
                p.resets += 1;
            }
            if op == OpKind::Write && p.resets >= 2 {
                p.fail_home_write = false;
                return Err(NvmeStatus::InvalidField);
            }
        }
        if p.fail_at.is_some() || p.cut_at.is_some() {
            p.seen += 1;
        }
        if p.fail_at == Some(p.seen) {
            p.fail_at = None;
            return Err(NvmeStatus::InvalidField);
        }
        if let Some(n) = p.cut_at {
            if p.seen >= n {
                self.dead.store(true, Ordering::Relaxed);
                return Err(NvmeStatus::AbortedPowerLoss);
            }
        }
        Ok(())
    }
}

type Member0 = Hooked<Arc<EmuDevice>, Shared>;

struct Array {
    emus: Vec<Arc<EmuDevice>>,
    faults: Vec<Arc<Fault>>,
    vol: RaiznVolume,
}

/// An array of 3 hooked members with `log_zones` log zones per member.
async fn array(seed: u64, log_zones: u32) -> Array {
    let emus = common::emu_members(&common::small_member_geometry(), 3, seed);
    let dead = Arc::new(AtomicBool::new(false));
    let faults: Vec<Arc<Fault>> = (0..3)
        .map(|_| {
            Arc::new(Fault {
                plan: Mutex::new(Plan::default()),
                dead: dead.clone(),
                commands: AtomicU64::new(0),
            })
        })
        .collect();
    let members: Vec<Member> = emus
        .iter()
        .zip(&faults)
        .map(|(e, f)| Arc::new(Member0::new(e.clone(), Shared(f.clone()))) as Member)
        .collect();
    let cfg = RaiznConfig {
        log_zones,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([0x5a; 16])
    };
    match RaiznVolume::format(members, cfg, false).await {
        Ok(vol) => Array { emus, faults, vol },
        Err(e) => panic!("seed {seed}: format: {e}"),
    }
}

/// One block written to logical zone 0, then zone 0 reset: the reset logs to the general
/// zones of members 0 and 1.
async fn write_and_reset(v: &RaiznVolume, round: u64) -> NvmeResult<()> {
    let (d, m) = common::block(round, round);
    v.write(0, &d, Some(&m), false).await?;
    v.zone_mgmt(ZoneAction::Reset, 0, false).await
}

/// Rounds of `write_and_reset` until the first general collection (its round).
async fn rounds_to_collection(seed: u64, log_zones: u32) -> u64 {
    let a = array(seed, log_zones).await;
    for round in 0..200 {
        if let Err(e) = write_and_reset(&a.vol, round).await {
            panic!("seed {seed} round {round}: {e}");
        }
        if a.vol.meta_stats().general_collections > 0 {
            return round;
        }
    }
    panic!("seed {seed}: no general collection in 200 rounds");
}

/// What happens to member 0 in the reset of zone 0 after the failed collection (whose
/// general append collects member 0 again).
#[derive(Clone, Copy, Debug)]
enum Next {
    /// Nothing.
    Clean,
    /// The power cut at member 0's n-th command of it.
    Cut(u64),
    /// Member 0's n-th command of it fails (Invalid Field); then one more reset of zone 0,
    /// with the power cut at member 0's m-th command of that one.
    FailThenCut(u64, u64),
}

/// Up to the collection's round with member 0's home rewrite failing, then FUA writes to
/// zone 1 (acknowledged), then a reset of zone 0 as `next` says. Then reopens after a power
/// loss and checks. Returns member 0's commands in that last reset.
async fn run(seed: u64, log_zones: u32, collect_round: u64, next: Next) -> u64 {
    let a = array(seed, log_zones).await;
    let v = &a.vol;
    for round in 0..collect_round {
        if let Err(e) = write_and_reset(v, round).await {
            panic!("seed {seed} round {round}: {e}");
        }
    }
    {
        let (d, m) = common::block(collect_round, collect_round);
        if let Err(e) = v.write(0, &d, Some(&m), false).await {
            panic!("seed {seed}: {e}");
        }
    }
    a.faults[0].plan.lock().fail_home_write = true;
    let r = v.zone_mgmt(ZoneAction::Reset, 0, false).await;
    assert_eq!(
        r,
        Err(NvmeStatus::InvalidField),
        "seed {seed}: the reset whose collection failed"
    );
    assert!(
        !a.faults[0].plan.lock().fail_home_write,
        "the collection's home rewrite was not reached"
    );
    assert!(v.failed_members().is_empty(), "the error failed a member");
    // The volume goes on: acknowledged FUA writes to zone 1.
    let z1 = v.geometry().zone_start(1);
    common::write_blocks(v, z1..z1 + 20, 7, true).await;
    let what = format!("seed {seed} K = {log_zones} {next:?}");
    let before = a.faults[0].commands.load(Ordering::Relaxed);
    {
        let mut p = a.faults[0].plan.lock();
        match next {
            Next::Clean => {}
            Next::Cut(n) => p.cut_at = Some(n),
            Next::FailThenCut(n, _) => p.fail_at = Some(n),
        }
    }
    let r = v.zone_mgmt(ZoneAction::Reset, 0, false).await;
    let used = a.faults[0].commands.load(Ordering::Relaxed) - before;
    match next {
        Next::Clean => assert_eq!(r, Ok(()), "{what}: the reset after"),
        Next::Cut(_) => {}
        Next::FailThenCut(_, m) => {
            // The failure keeps its cause.
            assert!(
                matches!(r, Ok(()) | Err(NvmeStatus::InvalidField)),
                "{what}: the reset with a failed command: {r:?}"
            );
            assert!(
                v.failed_members().is_empty(),
                "{what}: the error failed a member"
            );
            {
                let mut p = a.faults[0].plan.lock();
                p.seen = 0;
                p.cut_at = Some(m);
            }
            // Its result does not matter: the power is cut during it.
            let _ = v.zone_mgmt(ZoneAction::Reset, 0, false).await;
        }
    }
    drop(a.vol);
    for (i, e) in a.emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed ^ (i as u64 + 1)) {
            panic!("seed {seed}: power loss: {err}");
        }
    }
    let members: Vec<Member> = a.emus.iter().map(|e| e.clone() as Member).collect();
    let v = match RaiznVolume::open(members).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: reopen: {e}"),
    };
    assert!(
        v.failed_members().is_empty(),
        "{what}: reopened without {:?}",
        v.failed_members()
    );
    common::assert_blocks(&v, z1..z1 + 20, 7, &what).await;
    used
}

#[tokio::test]
async fn next_collection_after_a_failed_one_keeps_the_swap_image() {
    let seed = 0x5a0f;
    let round = rounds_to_collection(seed, 1).await;
    let total = run(seed, 1, round, Next::Clean).await;
    assert!(total >= 4, "member 0 saw only {total} commands");
    for cut in 1..=total {
        run(seed, 1, round, Next::Cut(cut)).await;
    }
}

/// The same with a pool of two log zones per member (the swap zone is the general zone's
/// only; open reads the pool, fenced, instead of a log and swap union).
#[tokio::test]
async fn with_a_log_pool_the_next_collection_keeps_the_swap_image() {
    let seed = 0x5a12;
    let round = rounds_to_collection(seed, 2).await;
    let total = run(seed, 2, round, Next::Clean).await;
    assert!(total >= 4, "member 0 saw only {total} commands");
    for cut in 1..=total {
        run(seed, 2, round, Next::Cut(cut)).await;
    }
}

/// An error at every command of that next collection's reset (its settling of the swap
/// zone included), then one more reset cut at every command of it.
#[tokio::test]
async fn an_error_while_settling_leaves_the_swap_zone_to_the_next_collection() {
    let seed = 0x5a10;
    let round = rounds_to_collection(seed, 1).await;
    let total = run(seed, 1, round, Next::Clean).await;
    for fail in 1..=total {
        for cut in 1..=total + 2 {
            run(seed, 1, round, Next::FailThenCut(fail, cut)).await;
        }
    }
}

/// One-block FUA writes to logical zone `zone` from block `from`, `count` of them or up to
/// the first that fails; returns how many were acknowledged.
async fn fua_blocks(v: &RaiznVolume, zone: u32, from: u64, count: u64) -> u64 {
    let start = v.geometry().zone_start(zone);
    let mut acked = 0;
    for k in from..from + count {
        let (d, m) = common::block(start + k, 3);
        if v.write(start + k, &d, Some(&m), true).await.is_err() {
            break;
        }
        acked += 1;
    }
    acked
}

/// The same for member 2's partial-parity log (K = 1), which holds the records of stripe 0
/// of zones 0 and 1: one-block FUA writes to zone 0 collect it, the collection's log
/// rewrite fails (Invalid Field); writes to zones 1 and 2 go on, with the power cut at
/// member 2's `cut_at`-th command from then (None: no cut). A reopen without the member of zone 0's
/// first data unit reads zone 0's acknowledged blocks through member 2's record of it.
/// Returns member 2's commands of the writes to zones 1 and 2.
async fn run_log(seed: u64, collect_write: u64, cut_at: Option<u64>) -> u64 {
    let a = array(seed, 1).await;
    let v = &a.vol;
    let what = format!("seed {seed} cut {cut_at:?}");
    assert_eq!(
        fua_blocks(v, 0, 0, collect_write).await,
        collect_write,
        "{what}"
    );
    a.faults[2].plan.lock().fail_home_write = true;
    assert_eq!(fua_blocks(v, 0, collect_write, 1).await, 0, "{what}");
    assert!(
        !a.faults[2].plan.lock().fail_home_write,
        "{what}: the collection's log rewrite was not reached"
    );
    assert!(v.failed_members().is_empty(), "the error failed a member");
    let before = a.faults[2].commands.load(Ordering::Relaxed);
    a.faults[2].plan.lock().cut_at = cut_at;
    // The first record after the failure finds the log's tail unknown and collects the log
    // first. Every zone's stripe 0 has its parity on member 2.
    fua_blocks(v, 1, 0, 1).await;
    let acked2 = fua_blocks(v, 2, 0, 6).await;
    let used = a.faults[2].commands.load(Ordering::Relaxed) - before;
    if cut_at.is_none() {
        assert_eq!(acked2, 6, "{what}: zone 2 took {acked2} writes");
    }
    let unit0 = v.layout().data_member(0, 0);
    drop(a.vol);
    for (i, e) in a.emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed ^ (i as u64 + 1)) {
            panic!("seed {seed}: power loss: {err}");
        }
    }
    let v = common::reopen(&a.emus, Some(unit0), &what).await;
    for k in 0..collect_write {
        let (d, m) = common::block(k, 3);
        let (mut gd, mut gm) = (vec![0u8; BS], vec![0u8; common::OOB]);
        if let Err(e) = v.read(k, &mut gd, Some(&mut gm)).await {
            panic!("{what}: zone 0 block {k}: {e}");
        }
        assert!(gd == d && gm == m, "{what}: zone 0 block {k} reads wrong");
    }
    used
}

#[tokio::test]
async fn next_log_collection_after_a_failed_one_keeps_the_records() {
    let seed = 0x5a11;
    let collect_write = {
        let a = array(seed, 1).await;
        let (mut k, base) = (0, a.vol.pp_stats().collections);
        while a.vol.pp_stats().collections == base {
            assert!(k < 40, "no log collection in 40 writes");
            assert_eq!(fua_blocks(&a.vol, 0, k, 1).await, 1);
            k += 1;
        }
        k - 1
    };
    assert!(
        collect_write % 16 != 0,
        "the write that collects must leave a partial stripe: {collect_write}"
    );
    let total = run_log(seed, collect_write, None).await;
    assert!(total >= 4, "member 2 saw only {total} commands");
    for cut in 1..=total {
        run_log(seed, collect_write, Some(cut)).await;
    }
}
