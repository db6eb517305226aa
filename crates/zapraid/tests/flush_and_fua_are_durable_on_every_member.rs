//! Flush and FUA make every completed write durable on every member, not only on enough of
//! them to rebuild it: after a completed Flush (or FUA write), a power loss on every member
//! loses nothing on any member. A crash schedule sees a flush that skipped one member only
//! when a stripe also loses a second block: parity rebuilds the first at the next open.
//!
//! Fault model: power loss on every member (each loses the writes its volatile cache held:
//! a seeded prefix of every zone survives), after the flush completed.

mod common;

use std::sync::Arc;

use common::{as_zoned, block, emu_members, opts, runtime};
use emu::EmuDevice;
use zapraid::{GroupMode, ZapRaidVolume};
use zns::{BlockDevice, SimRng};

/// Cuts power on every member; returns the zones that lost blocks, per member.
fn power_loss(emus: &[Arc<EmuDevice>], seed: u64) -> Vec<(usize, u32, u64, u64)> {
    let mut lost = Vec::new();
    for (i, e) in emus.iter().enumerate() {
        let cut = e.power_loss(seed + i as u64).expect("power loss");
        lost.extend(cut.into_iter().map(|(z, kept, wp)| (i, z, kept, wp)));
    }
    lost
}

#[test]
fn nothing_is_lost_on_any_member_after_a_flush_or_a_fua_write() {
    for mode in [
        GroupMode::Grouped(4),
        GroupMode::ZoneWriteOnly,
        GroupMode::ZoneAppendOnly,
    ] {
        runtime().block_on(async {
            let emus = emu_members(4, 8, 60);
            let mut vol = ZapRaidVolume::format(as_zoned(&emus), &opts(mode))
                .await
                .expect("format");
            let bs = vol.block_size() as usize;
            let mut rng = SimRng::new(61);
            let mut model = vec![0u64; 120];
            for round in 1..=12u64 {
                let what = format!("{mode:?}, round {round}");
                // Unflushed writes of 1-5 blocks, some stripes left partial.
                let mut writes = Vec::new();
                for i in 0..6u64 {
                    let lba = (i * 20 + rng.below(15)).min(115);
                    let len = 1 + rng.below(5);
                    let data: Vec<u8> =
                        (lba..lba + len).flat_map(|l| block(bs, l, round)).collect();
                    writes.push((lba, len, data));
                }
                let done = futures::future::join_all(
                    writes.iter().map(|(l, _, d)| vol.write(*l, d, false)),
                )
                .await;
                for r in done {
                    r.expect("write");
                }
                for (lba, len, _) in &writes {
                    for l in *lba..lba + len {
                        model[l as usize] = round;
                    }
                }
                // Odd rounds flush; even ones end with a FUA write.
                if round % 2 == 1 {
                    vol.flush().await.expect("flush");
                } else {
                    vol.write(119, &block(bs, 119, round), true)
                        .await
                        .expect("fua write");
                    model[119] = round;
                }
                vol.crash();
                let lost = power_loss(&emus, round * 100);
                assert!(
                    lost.is_empty(),
                    "{what}: (member, zone, kept, write pointer) lost after the flush: {lost:?}"
                );
                vol = ZapRaidVolume::open(as_zoned(&emus)).await.expect("reopen");
                let mut buf = vec![0u8; bs];
                for (lba, v) in model.iter().enumerate() {
                    vol.read(lba as u64, &mut buf).await.expect("read");
                    let want = match v {
                        0 => vec![0u8; bs],
                        v => block(bs, lba as u64, *v),
                    };
                    assert!(buf == want, "{what}: LBA {lba} is not version {v}");
                }
            }
        });
    }
}
