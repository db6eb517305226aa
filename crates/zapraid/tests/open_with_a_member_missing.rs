//! An array whose failed member's device is gone (its image lost, the drive pulled) opens
//! with that member given as missing: the open records it failed, every block reads back
//! degraded, writes go on, and a replacement rebuilds it; more missing members than parity
//! blocks refuse the open naming them, and an array with every member missing is refused.

mod common;

use common::{as_zoned, check, emu_members, opts, runtime, with_gone, write_some};
use zapraid::{GroupMode, ZapRaidError, ZapRaidVolume};

const ZONES: u32 = 12;
const SPAN: u64 = 200;
const GONE: usize = 1;

#[test]
fn a_missing_member_opens_degraded_and_is_replaced() {
    runtime().block_on(async {
        let emus = emu_members(5, ZONES, 3);
        let devs = as_zoned(&emus[..4]);
        let vol = ZapRaidVolume::format(devs.clone(), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        let mut model = vec![0u64; SPAN as usize];
        let mut version = 0;
        write_some(&vol, &mut model, &mut version, 1, 60).await;
        vol.close().await.expect("close");

        let vol = ZapRaidVolume::open_with_missing(with_gone(&devs, &[GONE]))
            .await
            .expect("open with a member missing");
        assert_eq!(vol.failed_members(), vec![GONE]);
        check(&vol, &model, "degraded, member missing").await;
        write_some(&vol, &mut model, &mut version, 2, 60).await;
        check(&vol, &model, "degraded writes").await;
        vol.close().await.expect("close");

        // The failure was recorded: the next open, still missing the member, agrees.
        let vol = ZapRaidVolume::open_with_missing(with_gone(&devs, &[GONE]))
            .await
            .expect("reopen with the member missing");
        assert_eq!(vol.failed_members(), vec![GONE]);
        vol.replace_member(GONE, emus[4].clone(), false)
            .await
            .expect("replace the missing member");
        assert!(vol.failed_members().is_empty());
        check(&vol, &model, "after the replacement").await;
        vol.close().await.expect("close");

        let mut healed = devs.clone();
        healed[GONE] = emus[4].clone();
        let vol = ZapRaidVolume::open(healed.clone())
            .await
            .expect("open healed");
        assert!(vol.failed_members().is_empty());
        // The replacement alone holds its member's blocks now: fail another and read all.
        vol.fail_member(3);
        check(&vol, &model, "healed, member 3 failed").await;
    });
}

#[test]
fn more_missing_members_than_parity_are_refused() {
    runtime().block_on(async {
        let emus = emu_members(4, ZONES, 4);
        let devs = as_zoned(&emus);
        let vol = ZapRaidVolume::format(devs.clone(), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        vol.close().await.expect("close");
        let two = ZapRaidVolume::open_with_missing(with_gone(&devs, &[0, 2])).await;
        let e = two.err().expect("two members missing must be refused");
        let text = e.to_string();
        assert!(
            text.contains('0') && text.contains('2'),
            "the refusal names both members: {text}"
        );
        let none = ZapRaidVolume::open_with_missing(vec![None, None, None, None]).await;
        assert!(
            matches!(none, Err(ZapRaidError::Options(_))),
            "every member missing must be refused"
        );
        // The refused opens changed nothing: every member opens as before.
        let vol = ZapRaidVolume::open(devs).await.expect("open");
        assert!(vol.failed_members().is_empty());
    });
}

/// Guards against a member missing at the open of an empty array being trusted again: the
/// open recorded it failed, but the array held no data, so a later open with the member's
/// original (stale) device given back reported every member healthy. It must stay failed
/// until it is replaced, also after more restarts.
#[test]
fn a_member_missing_on_an_empty_array_stays_failed() {
    runtime().block_on(async {
        let emus = emu_members(4, ZONES, 5);
        let devs = as_zoned(&emus);
        let vol = ZapRaidVolume::format(devs.clone(), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        vol.close().await.expect("close");

        let vol = ZapRaidVolume::open_with_missing(with_gone(&devs, &[GONE]))
            .await
            .expect("open with a member missing");
        assert_eq!(vol.failed_members(), vec![GONE]);
        vol.close().await.expect("close");

        for round in 0..3 {
            let vol = ZapRaidVolume::open(devs.clone())
                .await
                .expect("open with the stale member given back");
            assert_eq!(
                vol.failed_members(),
                vec![GONE],
                "round {round}: the stale member was taken back"
            );
            vol.close().await.expect("close");
        }
    });
}
