//! A recovery onto a replacement that power loss stops resumes at the next attempt instead
//! of starting over: power is cut on every device at many points of a recovery (the
//! replacement's n-th command fails, Commands Aborted due to Power Loss, then every device
//! loses its unflushed writes), the array reopens degraded, and `replace_member` with the
//! same replacement keeps the segments it finds rebuilt as a rebuild would write them now
//! and rebuilds the rest. Every block must read back after each step, and again with another
//! member failed once the recovery is done (so the replacement alone holds its member's
//! blocks, kept ones included); late cuts must leave less to write than a whole recovery.

mod common;

use common::{block, check, opts, runtime, SpareArray};
use zapraid::{GroupMode, ZapRaidVolume};
use zns::{BlockDevice, ErrorPlan, NvmeStatus, OpSet, SimRng};

const ZONES: u32 = 16;
const SPAN: u64 = 160;
/// The member that fails and is recovered onto the spare.
const P: usize = 2;

/// A formatted array holding data over several segments, flushed, with member `P` failed
/// durably.
async fn degraded_array(a: &SpareArray, seed: u64) -> (ZapRaidVolume, Vec<u64>) {
    let vol = ZapRaidVolume::format(a.members(None), &opts(GroupMode::Grouped(8)))
        .await
        .expect("format");
    let bs = vol.block_size() as usize;
    let mut model = vec![0u64; SPAN as usize];
    let mut version = 0;
    let mut rng = SimRng::new(seed);
    for _ in 0..200 {
        let lba = rng.below(SPAN - 8);
        let len = rng.range_inclusive(1, 8);
        let mut data = Vec::new();
        for l in lba..lba + len {
            version += 1;
            model[l as usize] = version;
            data.extend(block(bs, l, version));
        }
        vol.write(lba, &data, false).await.expect("write");
    }
    vol.flush().await.expect("flush");
    vol.fail_member_durably(P).await.expect("fail member");
    (vol, model)
}

/// What one cut point did: whether the cut fell inside the recovery, the segments the
/// second recovery kept, and the blocks it wrote to the replacement.
struct Resumed {
    inside: bool,
    segments_kept: u32,
    blocks_written: u64,
}

async fn cut_and_resume(cut: u64, seed: u64) -> Resumed {
    let a = SpareArray::new(ZONES, seed);
    let (vol, model) = degraded_array(&a, seed).await;
    a.faulty[4]
        .set_errors(ErrorPlan {
            ops: OpSet::ALL,
            fail_nth: Some(cut),
            repeat: 1 << 40,
            status: NvmeStatus::AbortedPowerLoss,
            ..ErrorPlan::default()
        })
        .expect("error plan");
    let inside = vol.replace_member(P, a.spare(), false).await.is_err();
    for f in &a.faulty {
        f.cut_power();
    }
    vol.crash();
    drop(vol);
    let mut rng = SimRng::new(seed ^ cut);
    for (e, f) in a.emus.iter().zip(&a.faulty) {
        e.power_loss(rng.next_u64()).expect("power loss");
        f.clear_errors();
        f.restore_power();
    }
    let what = format!("cut at replacement command {cut}");
    let vol = ZapRaidVolume::open(a.members(Some(P)))
        .await
        .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    vol.verify()
        .unwrap_or_else(|e| panic!("{what}: index: {e}"));
    check(&vol, &model, &format!("{what}, reopened")).await;
    let mut r = Resumed {
        inside,
        segments_kept: 0,
        blocks_written: 0,
    };
    if !vol.failed_members().is_empty() {
        let before = a.spare_blocks_written();
        vol.replace_member(P, a.spare(), false)
            .await
            .unwrap_or_else(|e| panic!("{what}: second recovery: {e}"));
        r.blocks_written = a.spare_blocks_written() - before;
        r.segments_kept = vol.recovery_progress().map_or(0, |p| p.segments_resumed);
        check(&vol, &model, &format!("{what}, recovered again")).await;
    }
    assert!(vol.failed_members().is_empty(), "{what}: still degraded");
    // The replacement alone holds member P's blocks, the kept segments' included.
    let q = (P + 1) % 4;
    vol.fail_member(q);
    check(&vol, &model, &format!("{what}, member {q} failed after")).await;
    r
}

#[test]
fn a_recovery_cut_by_power_resumes_where_it_stopped() {
    let seed = 31;
    // How many commands and blocks a whole recovery sends the replacement, uncut.
    let (commands, blocks) = runtime().block_on(async {
        let a = SpareArray::new(ZONES, seed);
        let (vol, model) = degraded_array(&a, seed).await;
        let (c0, b0) = (a.faulty[4].counters().commands, a.spare_blocks_written());
        vol.replace_member(P, a.spare(), false)
            .await
            .expect("recovery");
        check(&vol, &model, "uncut recovery").await;
        (
            a.faulty[4].counters().commands - c0,
            a.spare_blocks_written() - b0,
        )
    });
    assert!(commands >= 20, "a recovery sent only {commands} commands");
    let (mut inside, mut resumed, mut written) = (0u64, 0u64, 0u64);
    let step = (commands / 40).max(1);
    let mut cut = 1;
    while cut <= commands + 2 {
        let r = runtime().block_on(cut_and_resume(cut, seed));
        if r.inside {
            inside += 1;
            written += r.blocks_written;
            if r.segments_kept > 0 {
                resumed += 1;
                assert!(
                    r.blocks_written < blocks,
                    "cut {cut}: kept {} segments but wrote {} of {blocks} blocks",
                    r.segments_kept,
                    r.blocks_written
                );
            }
        }
        cut += step;
    }
    println!(
        "{inside} cuts inside a recovery of {commands} commands, {resumed} resumed; second recoveries wrote {written} blocks, {} on average, a whole one {blocks}",
        written / inside.max(1)
    );
    assert!(inside >= 20, "only {inside} cuts fell inside a recovery");
    assert!(resumed * 2 >= inside, "only {resumed} of {inside} resumed");
    assert!(
        written * 10 < inside * blocks * 8,
        "second recoveries wrote {written} blocks over {inside} cuts, a whole one {blocks}"
    );
}
