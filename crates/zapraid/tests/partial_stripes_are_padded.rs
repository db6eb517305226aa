//! A stripe that clients leave with fewer than k blocks is padded and written after a short
//! timeout (1 ms of virtual time), at once by a Flush and by a FUA write, so a lone small
//! write never waits for others to fill its stripe (docs/DESIGN.md, "Write path").
//!
//! Fault model: none; the members are emulated drives without a timing model, so every
//! virtual-time interval measured here is the volume's own waiting.

mod common;

use std::time::Duration;

use common::{as_zoned, block, emu_members, opts, runtime};
use tokio::time::Instant;
use zapraid::{GroupMode, ZapRaidVolume};
use zns::BlockDevice;

const MODES: [GroupMode; 3] = [
    GroupMode::Grouped(4),
    GroupMode::ZoneWriteOnly,
    GroupMode::ZoneAppendOnly,
];

#[test]
fn a_lone_write_is_padded_after_a_millisecond() {
    for mode in MODES {
        runtime().block_on(async {
            let emus = emu_members(4, 8, 50);
            let vol = ZapRaidVolume::format(as_zoned(&emus), &opts(mode))
                .await
                .expect("format");
            let bs = vol.block_size() as usize;
            let t = Instant::now();
            vol.write(5, &block(bs, 5, 1), false).await.expect("write");
            let waited = t.elapsed();
            // Not before the timeout, and not much after it (a padding timer that never fired
            // would hang this test; one of a second would fail it).
            assert!(waited >= Duration::from_millis(1), "{mode:?}: {waited:?}");
            assert!(waited < Duration::from_millis(5), "{mode:?}: {waited:?}");
            // The stripe was padded with k - 1 = 2 blocks.
            assert_eq!(vol.stats().padding_blocks, 2, "{mode:?}");
            // Two blocks of a stripe, written one after the other within the timeout, share
            // it: the second write fills it no further than k, the timer pads one block.
            let t = Instant::now();
            let (da, db) = (block(bs, 10, 1), block(bs, 11, 1));
            let a = vol.write(10, &da, false);
            let b = vol.write(11, &db, false);
            let (a, b) = futures::join!(a, b);
            a.expect("write a");
            b.expect("write b");
            assert!(t.elapsed() >= Duration::from_millis(1), "{mode:?}");
            assert_eq!(vol.stats().padding_blocks, 3, "{mode:?}");
            let mut buf = vec![0u8; bs];
            for lba in [5u64, 10, 11] {
                vol.read(lba, &mut buf).await.expect("read");
                assert_eq!(buf, block(bs, lba, 1), "{mode:?}: LBA {lba}");
            }
        });
    }
}

#[test]
fn flush_and_fua_pad_the_open_stripe_at_once() {
    for mode in MODES {
        runtime().block_on(async {
            let emus = emu_members(4, 8, 51);
            let vol = ZapRaidVolume::format(as_zoned(&emus), &opts(mode))
                .await
                .expect("format");
            let bs = vol.block_size() as usize;
            // A write and a flush submitted together: the flush seals the write's stripe
            // without waiting for the timer, and both complete before it would fire.
            let t = Instant::now();
            let one = block(bs, 1, 1);
            let (w, f) = futures::join!(vol.write(1, &one, false), vol.flush());
            w.expect("write");
            f.expect("flush");
            assert!(
                t.elapsed() < Duration::from_millis(1),
                "{mode:?}: the flush waited {:?} for the padding timer",
                t.elapsed()
            );
            assert_eq!(vol.stats().padding_blocks, 2, "{mode:?}");
            // A FUA write alone does the same.
            let t = Instant::now();
            vol.write(2, &block(bs, 2, 1), true).await.expect("fua");
            assert!(
                t.elapsed() < Duration::from_millis(1),
                "{mode:?}: the FUA write waited {:?}",
                t.elapsed()
            );
            assert_eq!(vol.stats().padding_blocks, 4, "{mode:?}");
        });
    }
}
