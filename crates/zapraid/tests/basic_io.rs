//! Basic I/O through a ZapRAID volume over emulated memory members: writes read back, in
//! every group mode, across segment boundaries, after a clean reopen, with a member failed
//! (degraded reads); trim and write zeroes read as zeros; format refuses members holding
//! data unless forced, and refuses unequal members.

mod common;

use common::{as_zoned, block, check, emu_members, opts, runtime};
use futures::future::join_all;
use zapraid::{FormatOptions, GroupMode, ZapRaidError, ZapRaidVolume};
use zns::{BlockDevice, SimRng};

/// Random concurrent writes over `span` LBAs, more than a segment holds; returns the model.
async fn workload(vol: &ZapRaidVolume, span: u64, batches: usize, seed: u64) -> Vec<u64> {
    let bs = vol.block_size() as usize;
    let mut rng = SimRng::new(seed);
    let mut model = vec![0u64; span as usize];
    let mut version = 0;
    for _ in 0..batches {
        // Disjoint LBAs within a batch, so the model knows the winner.
        let mut lbas: Vec<u64> = (0..8).map(|_| rng.below(span)).collect();
        lbas.sort_unstable();
        lbas.dedup();
        let mut writes = Vec::new();
        for lba in lbas {
            version += 1;
            model[lba as usize] = version;
            writes.push((lba, block(bs, lba, version), rng.chance(0.1)));
        }
        for r in join_all(writes.iter().map(|(lba, d, fua)| vol.write(*lba, d, *fua))).await {
            r.expect("write");
        }
    }
    model
}

#[test]
fn writes_read_back_in_every_group_mode_across_segments_and_reopen() {
    for mode in [
        GroupMode::ZoneWriteOnly,
        GroupMode::ZoneAppendOnly,
        GroupMode::Grouped(4),
    ] {
        runtime().block_on(async {
            let members = emu_members(4, 24, 1);
            let vol = ZapRaidVolume::format(as_zoned(&members), &opts(mode))
                .await
                .expect("format");
            let model = workload(&vol, 300, 120, 7).await;
            check(&vol, &model, &format!("{mode:?} live")).await;
            vol.verify().expect("index invariants");
            vol.close().await.expect("close");
            let vol = ZapRaidVolume::open(as_zoned(&members)).await.expect("open");
            check(&vol, &model, &format!("{mode:?} reopened")).await;
            vol.verify().expect("index invariants");
            // More than one segment (186 client blocks) was written.
            assert!(model.iter().filter(|v| **v > 0).count() > 186);
        });
    }
}

#[test]
fn a_failed_member_is_read_around() {
    runtime().block_on(async {
        let members = emu_members(4, 24, 2);
        let vol = ZapRaidVolume::format(as_zoned(&members), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        let model = workload(&vol, 200, 60, 3).await;
        for m in 0..4 {
            let vol = ZapRaidVolume::open(as_zoned(&members)).await.expect("open");
            vol.fail_member(m);
            check(&vol, &model, &format!("member {m} failed")).await;
        }
        drop(vol);
    });
}

#[test]
fn trim_and_write_zeroes_read_as_zeros_and_stay_so() {
    runtime().block_on(async {
        let members = emu_members(4, 24, 3);
        let vol = ZapRaidVolume::format(as_zoned(&members), &opts(GroupMode::Grouped(4)))
            .await
            .expect("format");
        let mut model = workload(&vol, 100, 20, 5).await;
        vol.trim(10, 20).await.expect("trim");
        vol.write_zeroes(50, 5, true).await.expect("write zeroes");
        for lba in (10..30).chain(50..55) {
            model[lba] = 0;
        }
        check(&vol, &model, "trimmed").await;
        vol.close().await.expect("close");
        let vol = ZapRaidVolume::open(as_zoned(&members)).await.expect("open");
        check(&vol, &model, "trimmed, reopened").await;
        // A write after the trim wins over it.
        vol.write(12, &block(4096, 12, 999), true)
            .await
            .expect("write");
        model[12] = 999;
        drop(vol);
        let vol = ZapRaidVolume::open(as_zoned(&members)).await.expect("open");
        check(&vol, &model, "rewritten after trim").await;
    });
}

#[test]
fn format_refuses_members_with_data_unless_forced_and_unequal_members() {
    runtime().block_on(async {
        let members = emu_members(4, 24, 4);
        let vol = ZapRaidVolume::format(as_zoned(&members), &opts(GroupMode::Grouped(4)))
            .await
            .expect("format");
        vol.write(0, &block(4096, 0, 1), true).await.expect("write");
        drop(vol);
        let e = ZapRaidVolume::format(as_zoned(&members), &opts(GroupMode::Grouped(4)))
            .await
            .err();
        assert!(
            matches!(
                e,
                Some(ZapRaidError::NotEmpty {
                    member: 0,
                    zone: 0,
                    ..
                })
            ),
            "{e:?}"
        );
        // Still the old array: its data reads back.
        let vol = ZapRaidVolume::open(as_zoned(&members)).await.expect("open");
        check(&vol, &[1], "after a refused format").await;
        drop(vol);
        let forced = FormatOptions {
            force: true,
            ..opts(GroupMode::Grouped(4))
        };
        let vol = ZapRaidVolume::format(as_zoned(&members), &forced)
            .await
            .expect("forced format");
        check(&vol, &[0], "after a forced format").await;
        drop(vol);
        let mut odd = emu_members(3, 24, 5);
        odd.extend(emu_members(1, 20, 6));
        let e = ZapRaidVolume::format(as_zoned(&odd), &opts(GroupMode::Grouped(4)))
            .await
            .err();
        assert!(e.is_some_and(|e| e.to_string().contains("member 3")));
        // Blank members are not an array: open refuses them and leaves them alone.
        let blank = emu_members(4, 24, 7);
        let e = ZapRaidVolume::open(as_zoned(&blank)).await.err();
        assert!(matches!(e, Some(ZapRaidError::NotAnArray(_))), "{e:?}");
    });
}
