//! A 3 + 2 array (Reed-Solomon parity) keeps serving with any two members failed: every
//! block reads back (rebuilt from any three of its stripe), writes and garbage collection go
//! on, the failures are recorded across restarts (also when the two members are missing at
//! open), both members are recovered onto replacements, and a third failure fails the volume
//! instead of returning wrong data.

mod common;

use common::{as_zoned, check, emu_members, runtime, with_gone, write_some};
use zapraid::{FormatOptions, GroupMode, ZapRaidVolume};
use zns::BlockDevice;

const ZONES: u32 = 10;
const SPAN: u64 = 300;

fn opts(mode: GroupMode) -> FormatOptions {
    FormatOptions {
        mode,
        ..FormatOptions::new(3, 2)
    }
}

#[test]
fn every_pair_of_failed_members_reads_back() {
    runtime().block_on(async {
        for mode in [GroupMode::Grouped(8), GroupMode::ZoneWriteOnly] {
            let emus = emu_members(5, ZONES, 11);
            let devs = as_zoned(&emus);
            let vol = ZapRaidVolume::format(devs.clone(), &opts(mode))
                .await
                .expect("format");
            let mut model = vec![0u64; SPAN as usize];
            let mut version = 0;
            write_some(&vol, &mut model, &mut version, 1, 80).await;
            vol.close().await.expect("close");
            for a in 0..5 {
                for b in a + 1..5 {
                    let vol = ZapRaidVolume::open(devs.clone()).await.expect("open");
                    vol.fail_member(a);
                    vol.fail_member(b);
                    assert_eq!(vol.failed_members(), vec![a, b]);
                    check(
                        &vol,
                        &model,
                        &format!("{mode:?}: members {a} and {b} failed"),
                    )
                    .await;
                    // Not recorded (no flush): the next open takes both back as they were.
                    drop(vol);
                }
            }
        }
    });
}

#[test]
fn two_members_missing_are_recovered_onto_replacements() {
    runtime().block_on(async {
        let emus = emu_members(7, ZONES, 12);
        let devs = as_zoned(&emus[..5]);
        let vol = ZapRaidVolume::format(devs.clone(), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        let mut model = vec![0u64; SPAN as usize];
        let mut version = 0;
        write_some(&vol, &mut model, &mut version, 2, 80).await;
        // One failure at run time, writes go on with one member down, then a second.
        vol.fail_member_durably(1).await.expect("fail 1");
        write_some(&vol, &mut model, &mut version, 3, 80).await;
        vol.fail_member_durably(3).await.expect("fail 3");
        check(&vol, &model, "members 1 and 3 failed").await;
        // Degraded writes over two failed members, enough to make collection run.
        for seed in 4..12 {
            write_some(&vol, &mut model, &mut version, seed, 80).await;
        }
        check(&vol, &model, "degraded writes with two failed").await;
        assert!(vol.stats().segments_collected > 0, "{:?}", vol.stats());
        vol.close().await.expect("close");

        // Both images gone: the open agrees they failed; a third missing is refused.
        let three = ZapRaidVolume::open_with_missing(with_gone(&devs, &[1, 3, 4])).await;
        let e = three.err().expect("three missing of m = 2 must be refused");
        assert!(e.to_string().contains("1, 3, 4"), "{e}");
        let vol = ZapRaidVolume::open_with_missing(with_gone(&devs, &[1, 3]))
            .await
            .expect("open with two missing");
        assert_eq!(vol.failed_members(), vec![1, 3]);
        check(&vol, &model, "reopened with two missing").await;
        vol.replace_member(1, emus[5].clone(), false)
            .await
            .expect("replace member 1");
        assert_eq!(vol.failed_members(), vec![3]);
        check(&vol, &model, "member 1 recovered").await;
        write_some(&vol, &mut model, &mut version, 20, 80).await;
        vol.replace_member(3, emus[6].clone(), false)
            .await
            .expect("replace member 3");
        assert!(vol.failed_members().is_empty());
        check(&vol, &model, "both recovered").await;
        vol.close().await.expect("close");

        let mut healed = devs.clone();
        healed[1] = emus[5].clone();
        healed[3] = emus[6].clone();
        let vol = ZapRaidVolume::open(healed).await.expect("open healed");
        assert!(vol.failed_members().is_empty());
        // The replacements alone hold their members' blocks: fail the two others and read.
        vol.fail_member(0);
        vol.fail_member(2);
        check(&vol, &model, "healed, members 0 and 2 failed").await;
        // A third failure fails the volume loudly.
        vol.fail_member(4);
        let mut b = vec![0u8; vol.block_size() as usize];
        let r = vol.read(0, &mut b).await;
        assert!(r.is_err(), "a read with three members failed must fail");
        assert!(vol.failure().is_some_and(|f| f.contains('4')));
    });
}
