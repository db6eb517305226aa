//! An open rewrites every member's one-zone log (K = 1) with one record per incomplete
//! stripe, computed from the data it reads: the newest, which may cover blocks still in
//! another member's volatile cache (an open that no power cut preceded). The older records,
//! covering only what was made durable, go with the rewrite. A power cut during the open,
//! after a parity member's rewrite but before the member holding those blocks is flushed,
//! loses them; the new record then no longer matches the survivors, and with the older one
//! gone a member failure lost the stripe's durable units (they read as zeros). So open
//! flushes every member before it rewrites a log (docs/DESIGN.md, "Why one record per
//! stripe is enough after a K = 1 open").

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{Hook, Hooked, NvmeResult, NvmeStatus, OpKind, ZoneAction};

use common::BS;

/// A power cut shared by every member: from the `cut_at`-th command of any member (counted
/// together) every command fails as a power cut would.
struct Cut {
    cut_at: u64,
    seen: AtomicU64,
    dead: AtomicBool,
}

struct Shared(Arc<Cut>);

#[async_trait]
impl Hook for Shared {
    async fn before(&self, _: OpKind, _: Option<ZoneAction>) -> NvmeResult<()> {
        let c = &self.0;
        if c.seen.fetch_add(1, Ordering::Relaxed) + 1 >= c.cut_at {
            c.dead.store(true, Ordering::Relaxed);
        }
        if c.dead.load(Ordering::Relaxed) {
            return Err(NvmeStatus::AbortedPowerLoss);
        }
        Ok(())
    }
}

/// With 3 members, stripe 2's parity is on member 0 (whose log the open rewrites first),
/// its data units on members 1 and 2.
const UNIT0: usize = 1;

/// Zone 0 written to 40 blocks with FUA (stripe 2's first unit whole, its record of 8
/// blocks durable), then 3 blocks without (stripe 2's second unit, on member 2, and its
/// record of 11, in the caches); the volume is dropped without a flush. Then an open whose
/// power is cut at its `cut_at`-th member command (None: no cut; returns the commands it
/// sent), a power loss, and a reopen without member 1, which must read the 40 blocks.
async fn run(seed: u64, cut_at: Option<u64>) -> u64 {
    let emus = common::emu_members(&common::small_member_geometry(), 3, seed);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([0x6c; 16])
    };
    let what = format!("seed {seed} cut {cut_at:?}");
    {
        let v = match RaiznVolume::format(common::as_members(&emus), cfg, false).await {
            Ok(v) => v,
            Err(e) => panic!("{what}: format: {e}"),
        };
        common::write_blocks(&v, 0..32, 5, true).await;
        common::write_blocks(&v, 32..40, 5, true).await;
        common::write_blocks(&v, 40..43, 5, false).await;
    }
    let cut = Arc::new(Cut {
        cut_at: cut_at.unwrap_or(u64::MAX),
        seen: AtomicU64::new(0),
        dead: AtomicBool::new(false),
    });
    let members: Vec<Member> = emus
        .iter()
        .map(|e| Arc::new(Hooked::new(e.clone(), Shared(cut.clone()))) as Member)
        .collect();
    let opened = RaiznVolume::open(members).await;
    if cut_at.is_none() {
        if let Err(e) = &opened {
            panic!("{what}: open: {e}");
        }
    }
    drop(opened);
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed ^ (i as u64 + 1)) {
            panic!("{what}: power loss: {err}");
        }
    }
    let v = common::reopen(&emus, Some(UNIT0), &what).await;
    common::assert_blocks(&v, 0..40, 5, &what).await;
    cut.seen.load(Ordering::Relaxed)
}

#[tokio::test]
async fn a_cut_open_keeps_the_records_of_durable_data() {
    for seed in 0x6c00..0x6c04 {
        let total = run(seed, None).await;
        assert!(total >= 20, "the open sent only {total} commands");
        for cut in 1..=total {
            run(seed, Some(cut)).await;
        }
    }
}
