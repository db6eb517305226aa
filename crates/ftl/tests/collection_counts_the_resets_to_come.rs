//! Garbage collection must not run ahead of the space it is about to free. A round's finish
//! (its flush and resets) runs while the next round copies; that next round was started on the
//! free zones alone, so while the finishing round's victims still awaited their reset it
//! collected again even when those resets would leave more zones free than the background
//! watermark asks for. Victims taken that early have lost fewer blocks than they would have
//! by the time space was needed: uniform random overwrites at 80% utilisation on 40 zones of
//! 256 blocks amplified writes 4.04 times instead of 3.56 (160 zones of 1,024 blocks: 2.930
//! instead of 2.867, docs/BENCHMARKS.md). The round after a finish is wanted only if the free
//! zones plus the zones being reset are below the watermark (`SpacePolicy::gc_wanted_after_finish`).

mod common;

use ftl::{FtlVolume, MountOptions, VictimPolicy};
use zns::{BlockDevice, SimRng};

#[test]
fn collection_counts_the_resets_to_come() {
    common::runtime().block_on(async {
        // Live data is 80% of the data zones' payload.
        let dev = common::formatted_live_80().await;
        let opts = MountOptions {
            victim_policy: VictimPolicy::Greedy,
            hot_cold: false,
            hot_zones: 1,
            gc_foreground_free_zones: 1,
            gc_background_free_zones: 2,
            gc_lanes_max: 1,
            ..MountOptions::default()
        };
        let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
        let n = vol.size_blocks();
        let block = vec![0x5au8; 4096];
        for lba in 0..n {
            vol.write(lba, &block, false).await.expect("fill");
        }
        let mut rng = SimRng::new(1);
        for _ in 0..3 * n {
            vol.write(rng.below(n), &block, false)
                .await
                .expect("warm-up");
        }
        let before = vol.stats().counters;
        for _ in 0..4 * n {
            vol.write(rng.below(n), &block, false)
                .await
                .expect("overwrite");
        }
        let after = vol.stats().counters;
        vol.unmount().await.expect("unmount");
        let user = after.user_blocks - before.user_blocks;
        let copies = after.gc_blocks - before.gc_blocks;
        let wa = (user + copies) as f64 / user as f64;
        // A plain greedy log of these 38 data zones with the same one-zone reserve and two
        // open zones gives 3.35 when it collects as soon as the reserve is reached; 3.8 leaves
        // room for the FTL's rounds and stays well below the 4.04 of collecting ahead.
        assert!(wa < 3.8, "write amplification {wa:.3} ({user} user blocks)");
        assert!(after.gc_zones - before.gc_zones >= 100, "{after:?}");
    });
}
