//! A degraded read rebuilds a failed member's unit from the other members; another command
//! may fail one of those while the read is reading it. That member may have answered with
//! what it no longer holds (here: its zone was lost right after it failed). The read used
//! its answer anyway and returned wrong data. Now it checks the members again once it has
//! read them: with one parity unit, a second failure fails the array and the read fails
//! (Unrecovered Read Error); with two, the unit is rebuilt again from the survivors.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use emu::EmuDevice;
use raizn::{RaiznConfig, RaiznVolume};
use tokio::sync::Notify;
use zns::{Hook, Hooked, NvmeResult, NvmeStatus, OpKind, ZoneAction, ZonedDevice};

use common::{block, BS, OOB};

/// Holds the first read sent after it is armed until released.
#[derive(Default)]
struct Gate {
    armed: AtomicBool,
    reached: Notify,
    release: Notify,
}

#[async_trait]
impl Hook for Gate {
    async fn before(&self, op: OpKind, _: Option<ZoneAction>) -> NvmeResult<()> {
        if op == OpKind::Read && self.armed.swap(false, Ordering::SeqCst) {
            self.reached.notify_one();
            self.release.notified().await;
        }
        Ok(())
    }
}

type Gated = Hooked<Arc<EmuDevice>, Gate>;

/// Reads block `lba` of `v` (data and metadata).
async fn read(v: &RaiznVolume, lba: u64) -> NvmeResult<(Vec<u8>, Vec<u8>)> {
    let (mut d, mut m) = (vec![0u8; BS], vec![0u8; OOB]);
    v.read(lba, &mut d, Some(&mut m)).await.map(|_| (d, m))
}

/// An array of `n` members with `parity` parity units, zone 0 written with two whole
/// stripes and flushed; member `a` (of block 0's unit) failed; then a read of block 0
/// while the first member it rebuilds from (`b`) is failed by another command and loses
/// its zone. Returns the read's result and `b`.
async fn run(n: usize, parity: u32, seed: u64) -> (NvmeResult<(Vec<u8>, Vec<u8>)>, usize) {
    let g = common::small_member_geometry();
    let emus = common::emu_members(&g, n, seed);
    let gated: Vec<Arc<Gated>> = emus
        .iter()
        .map(|e| Arc::new(Hooked::new(e.clone(), Gate::default())))
        .collect();
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        parity,
        ..RaiznConfig::new([22; 16])
    };
    let v = match RaiznVolume::format(common::as_members(&gated), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let l = *v.layout();
    let written = 2 * l.stripe_data_blocks();
    for at in (0..written).step_by(8) {
        common::write_blocks(&v, at..at + 8, 6, false).await;
    }
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    let a = l.place(0, 0).member;
    if let Err(e) = v.fail_member(a).await {
        panic!("fail member {a}: {e}");
    }
    // The members are read in index order; the first one not failed is held.
    let b = (0..n).find(|m| *m != a).unwrap_or(0);
    gated[b].hook.armed.store(true, Ordering::SeqCst);
    let other = async {
        gated[b].hook.reached.notified().await;
        // Another command fails `b` (with one parity unit this fails the array) ...
        let failed = v.fail_member(b).await;
        assert_eq!(
            failed.is_err(),
            parity == 1,
            "fail member {b} of a degraded array: {failed:?}"
        );
        // ... which then holds nothing of the zone any more.
        let zslba = l.member_zone_start(0);
        if let Err(e) = emus[b].zone_mgmt(ZoneAction::Reset, zslba, false).await {
            panic!("reset member {b}'s zone: {e}");
        }
        gated[b].hook.release.notify_one();
    };
    let (r, ()) = tokio::join!(read(&v, 0), other);
    (r, b)
}

#[test]
fn a_member_failed_during_a_degraded_read_fails_it_with_one_parity_unit() {
    for seed in 0..3 {
        let (r, b) = common::block_on_paused(run(3, 1, seed));
        match r {
            // Its unit is lost with two members: no right data can come back.
            Ok(got) => panic!(
                "seed {seed}: block 0 read back ({}) from member {b}, which failed meanwhile",
                if got == block(0, 6) { "right" } else { "wrong" }
            ),
            Err(e) => assert_eq!(e, NvmeStatus::UnrecoveredReadError, "seed {seed}"),
        }
    }
}

#[test]
fn a_member_failed_during_a_degraded_read_is_left_out_with_two_parity_units() {
    for seed in 0..3 {
        let (r, b) = common::block_on_paused(run(5, 2, seed));
        match r {
            Ok(got) => assert!(
                got == block(0, 6),
                "seed {seed}: wrong data rebuilt with member {b}, which failed meanwhile"
            ),
            Err(e) => panic!("seed {seed}: block 0 with two members failed: {e}"),
        }
    }
}
