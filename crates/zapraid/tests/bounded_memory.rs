//! Bounded memory: the blocks admitted into the write path never exceed the limit, however
//! many clients write at once (a write larger than the limit still completes), and the
//! index's memory is what docs/DESIGN.md states: 16 bytes per logical block of L2P and at
//! most the paper's `(k + m) S Z ceil(log2 G)` bits of stripe tables.

mod common;

use common::{as_zoned, block, emu_members, runtime};
use futures::future::join_all;
use zapraid::index::stripe_table_bits;
use zapraid::{FormatOptions, GroupMode, ZapRaidVolume};
use zns::BlockDevice;

#[test]
fn blocks_in_flight_stay_under_the_limit() {
    runtime().block_on(async {
        let members = emu_members(4, 16, 21);
        let opts = FormatOptions {
            mode: GroupMode::Grouped(4),
            ..FormatOptions::new(3, 1)
        };
        let vol = ZapRaidVolume::format(as_zoned(&members), &opts)
            .await
            .expect("format");
        let bs = vol.block_size() as usize;
        vol.set_blocks_in_flight_limit(16);
        // 40 clients of 4 blocks each: 160 blocks wanted at once, 16 admitted.
        let writes: Vec<(u64, Vec<u8>)> = (0..40u64)
            .map(|c| {
                let lba = c * 4;
                let data = (0..4).flat_map(|i| block(bs, lba + i, 1)).collect();
                (lba, data)
            })
            .collect();
        for r in join_all(writes.iter().map(|(lba, d)| vol.write(*lba, d, false))).await {
            r.expect("write");
        }
        // One write larger than the limit is admitted alone and completes.
        let big: Vec<u8> = (0..40u64).flat_map(|i| block(bs, 200 + i, 2)).collect();
        vol.write(200, &big, true)
            .await
            .expect("write larger than the limit");
        let s = vol.stats();
        assert!(s.blocks_in_flight_max <= 16, "{s:?}");
        assert!(
            s.blocks_in_flight_max >= 12,
            "the limit was never reached: {s:?}"
        );
        for lba in (0..160u64).chain(200..240) {
            let mut b = vec![0u8; bs];
            vol.read(lba, &mut b).await.expect("read");
            let v = if lba < 200 { 1 } else { 2 };
            assert!(b == block(bs, lba, v), "LBA {lba}");
        }
    });
}

#[test]
fn index_memory_matches_the_stated_formulas() {
    runtime().block_on(async {
        let members = emu_members(4, 16, 22);
        let opts = FormatOptions {
            mode: GroupMode::Grouped(8),
            ..FormatOptions::new(3, 1)
        };
        let vol = ZapRaidVolume::format(as_zoned(&members), &opts)
            .await
            .expect("format");
        let l = vol.layout();
        let mem = vol.index_memory();
        assert_eq!(mem.l2p_bytes, 16 * vol.size_blocks());
        // G = 8: 3 bits per block of every member's data region, per segment in use.
        let per_segment = (stripe_table_bits(3, 1, l.stripes, 1, 8).div_ceil(64) * 8) as u64;
        assert_eq!(per_segment, (4 * u64::from(l.stripes) * 3).div_ceil(64) * 8);
        assert_eq!(mem.stripe_table_bytes, per_segment, "segment 0 is open");
        assert_eq!(mem.stripe_table_bytes_max, per_segment * 16);
        let bs = vol.block_size() as usize;
        // One write, so every stripe is full: 134 stripes.
        let data: Vec<u8> = (0..400u64).flat_map(|lba| block(bs, lba, 1)).collect();
        vol.write(0, &data, false).await.expect("write");
        vol.trim(0, 3).await.expect("trim");
        vol.flush().await.expect("flush");
        let mem = vol.index_memory();
        // 400 blocks span 3 segments of 186.
        assert_eq!(mem.stripe_table_bytes, 3 * per_segment);
        assert!(mem.stripe_table_bytes <= mem.stripe_table_bytes_max);
        assert!(mem.trim_place_bytes > 0);
    });
}
