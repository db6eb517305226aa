//! A member failure is recorded on every survivor before the command that found it
//! completes, the volume keeps writing without the failed member (its blocks rebuilt from
//! parity on reads), a reopen with the stale member present keeps it failed instead of
//! taking its stale blocks back, a member absent at open is recorded failed, and a second
//! failure fails the volume naming both members, never returning wrong data. Also with power
//! cut right after a failure is recorded.

mod common;

use std::sync::Arc;

use common::{block, check, emu_members, opts, runtime};
use emu::EmuDevice;
use futures::future::join_all;
use zapraid::{GroupMode, ZapRaidError, ZapRaidVolume};
use zns::{BlockDevice, ErrorPlan, FaultyZoned, NvmeStatus, OpSet, SimRng, ZonedDevice};

type Faulty = FaultyZoned<Arc<EmuDevice>>;

struct Array {
    emus: Vec<Arc<EmuDevice>>,
    faulty: Vec<Arc<Faulty>>,
}

impl Array {
    fn new(zones: u32, seed: u64) -> Array {
        let emus = emu_members(4, zones, seed);
        let faulty = emus
            .iter()
            .enumerate()
            .map(|(i, e)| Arc::new(FaultyZoned::new(e.clone(), seed * 11 + i as u64)))
            .collect();
        Array { emus, faulty }
    }

    fn members(&self) -> Vec<Arc<dyn ZonedDevice>> {
        self.faulty
            .iter()
            .map(|f| f.clone() as Arc<dyn ZonedDevice>)
            .collect()
    }

    /// Member `i` fails every command of `ops` from now on (a dead drive, or one whose
    /// writes fail past any retry).
    fn kill(&self, i: usize, ops: OpSet) {
        self.faulty[i]
            .set_errors(ErrorPlan {
                ops,
                fail_nth: Some(1),
                repeat: 1 << 40,
                status: NvmeStatus::NamespaceNotReady,
                ..ErrorPlan::default()
            })
            .expect("error plan");
    }

    /// Member `i` works again, holding whatever it held when it failed (stale).
    fn revive(&self, i: usize) {
        self.faulty[i].clear_errors();
    }
}

/// Writes `batches` batches of up to 8 disjoint random LBAs below `span`, versions counting
/// on from `*version`, into `model`.
async fn writes(
    vol: &ZapRaidVolume,
    model: &mut [u64],
    version: &mut u64,
    batches: usize,
    seed: u64,
) {
    let bs = vol.block_size() as usize;
    let mut rng = SimRng::new(seed);
    for _ in 0..batches {
        let mut lbas: Vec<u64> = (0..8).map(|_| rng.below(model.len() as u64)).collect();
        lbas.sort_unstable();
        lbas.dedup();
        let mut w = Vec::new();
        for lba in lbas {
            *version += 1;
            model[lba as usize] = *version;
            w.push((lba, block(bs, lba, *version)));
        }
        for r in join_all(w.iter().map(|(lba, d)| vol.write(*lba, d, false))).await {
            r.expect("write");
        }
    }
}

/// Guards against a failed member coming back after a restart: before the array state was
/// recorded, a reopen scanned the stale member and took its old blocks for current ones (the
/// blocks written after its failure were missing on it, so older versions won), and writes
/// with a failed member failed the whole volume.
#[test]
fn writes_go_on_without_a_failed_member_and_a_reopen_keeps_it_failed() {
    for mode in [
        GroupMode::ZoneWriteOnly,
        GroupMode::ZoneAppendOnly,
        GroupMode::Grouped(4),
    ] {
        runtime().block_on(async {
            let a = Array::new(24, 1);
            let vol = ZapRaidVolume::format(a.members(), &opts(mode))
                .await
                .expect("format");
            let mut model = vec![0u64; 300];
            let mut version = 0;
            writes(&vol, &mut model, &mut version, 30, 1).await;
            vol.flush().await.expect("flush");
            a.kill(1, OpSet::ALL);
            vol.fail_member_durably(1).await.expect("fail member 1");
            assert_eq!(vol.failed_members(), vec![1]);
            assert_eq!(vol.state_generation(), 1);
            writes(&vol, &mut model, &mut version, 60, 2).await;
            check(&vol, &model, &format!("{mode:?} degraded")).await;
            vol.close().await.expect("close");
            // The member comes back holding only what it had when it failed.
            a.revive(1);
            let vol = ZapRaidVolume::open(a.members()).await.expect("reopen");
            assert_eq!(
                vol.failed_members(),
                vec![1],
                "{mode:?}: member 1 came back"
            );
            check(
                &vol,
                &model,
                &format!("{mode:?} reopened with the stale member"),
            )
            .await;
            vol.verify().expect("index invariants");
            // And it keeps working degraded after the restart.
            writes(&vol, &mut model, &mut version, 20, 3).await;
            vol.close().await.expect("close");
            let vol = ZapRaidVolume::open(a.members()).await.expect("reopen");
            check(&vol, &model, &format!("{mode:?} second reopen")).await;
        });
    }
}

/// Guards against a member's write error failing the volume: the error must fail the member
/// only, the write completes once the failure is recorded, and reads rebuild its blocks.
#[test]
fn a_member_write_error_fails_the_member_not_the_volume() {
    runtime().block_on(async {
        let a = Array::new(24, 2);
        let vol = ZapRaidVolume::format(a.members(), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        let mut model = vec![0u64; 300];
        let mut version = 0;
        writes(&vol, &mut model, &mut version, 20, 4).await;
        a.kill(2, OpSet::ALL);
        writes(&vol, &mut model, &mut version, 60, 5).await;
        assert_eq!(vol.failed_members(), vec![2]);
        assert!(vol.failure().is_none(), "{:?}", vol.failure());
        check(&vol, &model, "member 2 dead").await;
        vol.close().await.expect("close");
        // Still dead at open: the open goes on without it.
        let vol = ZapRaidVolume::open(a.members()).await.expect("reopen dead");
        assert_eq!(vol.failed_members(), vec![2]);
        check(&vol, &model, "reopened with member 2 dead").await;
        drop(vol);
        a.revive(2);
        let vol = ZapRaidVolume::open(a.members())
            .await
            .expect("reopen stale");
        assert_eq!(vol.failed_members(), vec![2]);
        check(&vol, &model, "reopened with member 2 stale").await;
    });
}

/// Guards against a member that is missing at open being used again once it is back: the
/// open records it failed, and the blocks written while it was away are never read from it.
#[test]
fn a_member_absent_at_open_is_recorded_failed() {
    runtime().block_on(async {
        let a = Array::new(24, 3);
        let vol = ZapRaidVolume::format(a.members(), &opts(GroupMode::Grouped(4)))
            .await
            .expect("format");
        let mut model = vec![0u64; 300];
        let mut version = 0;
        writes(&vol, &mut model, &mut version, 30, 6).await;
        vol.close().await.expect("close");
        a.kill(0, OpSet::ALL);
        let vol = ZapRaidVolume::open(a.members())
            .await
            .expect("open without 0");
        assert_eq!(vol.failed_members(), vec![0]);
        assert_eq!(vol.state_generation(), 1);
        check(&vol, &model, "member 0 absent").await;
        writes(&vol, &mut model, &mut version, 40, 7).await;
        vol.close().await.expect("close");
        a.revive(0);
        let vol = ZapRaidVolume::open(a.members())
            .await
            .expect("open with 0 stale");
        assert_eq!(vol.failed_members(), vec![0]);
        check(&vol, &model, "member 0 back, stale").await;
    });
}

/// Guards against a second failure returning wrong data or hanging: the volume fails, every
/// command errs naming both members, and an open with both missing is refused naming both.
#[test]
fn a_second_failure_fails_the_volume_naming_both_members() {
    runtime().block_on(async {
        let a = Array::new(24, 4);
        let vol = ZapRaidVolume::format(a.members(), &opts(GroupMode::Grouped(4)))
            .await
            .expect("format");
        let mut model = vec![0u64; 200];
        let mut version = 0;
        writes(&vol, &mut model, &mut version, 20, 8).await;
        a.kill(0, OpSet::ALL);
        vol.fail_member_durably(0).await.expect("fail member 0");
        writes(&vol, &mut model, &mut version, 20, 9).await;
        vol.flush().await.expect("flush");
        a.kill(3, OpSet::WRITES);
        let bs = vol.block_size() as usize;
        let mut errs = Vec::new();
        for lba in 0..8u64 {
            if let Err(e) = vol.write(lba, &block(bs, lba, 1 << 40), false).await {
                errs.push(e.to_string());
            }
        }
        let e = errs.first().expect("a write after the second failure failed");
        assert!(
            e.contains("member 3") && e.contains("member 0"),
            "error does not name both members: {e}"
        );
        let why = vol.failure().expect("the volume failed");
        assert!(why.contains("member 3") && why.contains("member 0"), "{why}");
        let mut b = vec![0u8; bs];
        let r = vol.read(0, &mut b).await;
        assert!(r.is_err(), "a read of a failed volume returned data");
        drop(vol);
        // Both gone at open: refused, naming both.
        a.kill(3, OpSet::ALL);
        match ZapRaidVolume::open(a.members()).await {
            Err(ZapRaidError::Failed(why)) => {
                assert!(why.contains('0') && why.contains('3'), "{why}")
            }
            Err(e) => panic!("open with two members gone: {e}"),
            Ok(_) => panic!("open with two members gone succeeded"),
        }
        // Member 3 back: the array opens degraded and what was flushed reads back; a block
        // whose write failed holds its old or its new version.
        a.revive(3);
        let vol = ZapRaidVolume::open(a.members()).await.expect("open");
        assert_eq!(vol.failed_members(), vec![0]);
        for lba in 0..model.len() as u64 {
            let mut b = vec![0u8; bs];
            vol.read(lba, &mut b).await.expect("read");
            let v = model[lba as usize];
            let old = if v == 0 { vec![0u8; bs] } else { block(bs, lba, v) };
            assert!(
                b == old || (lba < 8 && b == block(bs, lba, 1 << 40)),
                "after the second failure, member 3 back: LBA {lba} holds neither version {v} nor the failed write's"
            );
        }
    });
}

/// Guards against a failure that was acknowledged but not durable: power is cut right after
/// a FUA write that found (and recorded) a member failure, with more writes unflushed. The
/// reopen must keep the member failed and read back every acknowledged FUA write.
#[test]
fn power_cut_right_after_a_failure_is_recorded() {
    for seed in 0..12u64 {
        runtime().block_on(async {
            let a = Array::new(24, 100 + seed);
            let mode = match seed % 3 {
                0 => GroupMode::ZoneWriteOnly,
                1 => GroupMode::ZoneAppendOnly,
                _ => GroupMode::Grouped(4),
            };
            let vol = ZapRaidVolume::format(a.members(), &opts(mode))
                .await
                .expect("format");
            let bs = vol.block_size() as usize;
            let mut model = vec![0u64; 200];
            let mut version = 0;
            writes(&vol, &mut model, &mut version, 10 + seed as usize, seed).await;
            vol.flush().await.expect("flush");
            let victim = (seed % 4) as usize;
            a.kill(victim, OpSet::WRITES);
            // This FUA write finds the failure; it completes only once it is recorded.
            version += 1;
            vol.write(7, &block(bs, 7, version), true)
                .await
                .expect("FUA write");
            model[7] = version;
            assert_eq!(vol.failed_members(), vec![victim]);
            // Unflushed writes after it (one batch, so each LBA has one new version): old or
            // new may come back.
            let mut maybe = model.clone();
            writes(&vol, &mut maybe, &mut version, 1, seed + 50).await;
            vol.crash();
            drop(vol);
            for (e, f) in a.emus.iter().zip(&a.faulty) {
                e.power_loss(seed).expect("power loss");
                f.clear_errors();
            }
            let vol = ZapRaidVolume::open(a.members()).await.expect("reopen");
            assert_eq!(vol.failed_members(), vec![victim], "seed {seed}");
            for lba in 0..model.len() as u64 {
                let mut b = vec![0u8; bs];
                vol.read(lba, &mut b).await.expect("read");
                let (old, new) = (model[lba as usize], maybe[lba as usize]);
                let ok = [old, new].iter().any(|v| {
                    if *v == 0 {
                        b.iter().all(|x| *x == 0)
                    } else {
                        b == block(bs, lba, *v)
                    }
                });
                assert!(
                    ok,
                    "seed {seed}: LBA {lba} holds neither version {old} nor {new}"
                );
            }
            vol.verify().expect("index invariants");
        });
    }
}
