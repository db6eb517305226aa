//! A partial-parity record whose write the parity member refuses with an error that is not a
//! member failure (here Invalid Field) fails the client's write, and must leave the stripe's
//! older record, still valid in the log, where it was. The volume used to drop its
//! in-memory entry for the stripe along with the refused one: a degraded read of the data
//! the older record covers then failed with Unrecovered Read Error, and the next collection
//! of that log (which rewrites the entries it has) lost the older record on the media too,
//! so a reopen without the data's member brought the zone back empty.

mod common;

use std::sync::Arc;

use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{ErrorPlan, NvmeStatus, OpKind, OpSet, ReportFilter, ZonedDevice};

use common::{assert_blocks, Faulty, BS};

/// Blocks of zone 0's first stripe written, flushed and protected by a record.
const HELD: u64 = 3;

fn members(faulty: &[Arc<Faulty>], leave_out: usize) -> Vec<Option<Member>> {
    faulty
        .iter()
        .enumerate()
        .map(|(i, f)| (i != leave_out).then(|| f.clone() as Member))
        .collect()
}

async fn run(seed: u64) {
    let g = common::small_member_geometry();
    let emus = common::emu_members(&g, 3, seed);
    let faulty = common::faulty_members(&emus, seed * 5);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([21; 16])
    };
    let v = match RaiznVolume::format(common::as_members(&faulty), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("format: {e}"),
    };
    let l = *v.layout();
    let pm = l.parity_member(0);
    let data = l.place(0, 0).member;
    common::write_blocks(&v, 0..HELD, 1, false).await;
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    // The next record the parity member is sent (the next write's, same stripe) is refused.
    let refuse = ErrorPlan {
        ops: OpSet::of(&[OpKind::Write]),
        fail_nth: Some(1),
        status: NvmeStatus::InvalidField,
        ..ErrorPlan::default()
    };
    if let Err(e) = faulty[pm].set_errors(refuse) {
        panic!("error plan: {e}");
    }
    let (d, m) = common::blocks(HELD..HELD + 2, 1);
    let refused = v.write(HELD, &d, Some(&m), false).await;
    assert_eq!(
        refused,
        Err(NvmeStatus::InvalidField),
        "seed {seed}: the write"
    );
    faulty[pm].clear_errors();
    // A record into another zone's first stripe (the same parity member) collects that
    // member's log, whose tail the refused write left unknown.
    let z1 = v.geometry().zone_start(1);
    let before = v.pp_stats().collections;
    common::write_blocks(&v, z1..z1 + 2, 2, false).await;
    assert!(
        v.pp_stats().collections > before,
        "seed {seed}: the parity member's log was not collected"
    );
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    // The older record still protects the blocks before: read with their member failed.
    let degraded = {
        if let Err(e) = v.fail_member(data).await {
            panic!("fail member {data}: {e}");
        }
        let mut out = Vec::new();
        for lba in 0..HELD {
            let (mut d, mut m) = (vec![0u8; BS], vec![0u8; common::OOB]);
            out.push(v.read(lba, &mut d, Some(&mut m)).await.map(|_| (d, m)));
        }
        out
    };
    for (lba, r) in (0..HELD).zip(degraded) {
        match r {
            Ok(got) => assert!(
                got == common::block(lba, 1),
                "seed {seed}: block {lba} with member {data} failed reads wrong"
            ),
            Err(e) => panic!("seed {seed}: block {lba} with member {data} failed: {e}"),
        }
    }
    drop(v);
    // And after a reopen without that member, from the collected log.
    let v = match RaiznVolume::open_degraded(members(&faulty, data)).await {
        Ok(v) => v,
        Err(e) => panic!("seed {seed}: reopen without member {data}: {e}"),
    };
    let wp = match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => r.zones[0].wp,
        Err(e) => panic!("report: {e}"),
    };
    assert_eq!(wp, HELD, "seed {seed}: zone 0 without member {data}");
    assert_blocks(
        &v,
        0..HELD,
        1,
        &format!("seed {seed}: reopened without member {data}"),
    )
    .await;
    assert_blocks(&v, z1..z1 + 2, 2, &format!("seed {seed}: zone 1")).await;
}

#[test]
fn a_refused_record_leaves_the_stripes_older_record_in_use() {
    for seed in 0..4 {
        common::block_on_paused(run(seed));
    }
}
