//! A volume keeps one reserve zone for garbage collection (`ftl::plan::reserve_zones`), and
//! user writes stop with one zone free, whether its copies all go to one GC stream (mounted
//! without hot/cold separation) or are split over two (with it: a victim the free zone cannot
//! take split goes whole to one stream). Garbage collection must still always finish its
//! victim: a nearly full volume (90% of the data zones' payload live) is overwritten many
//! times with writes, trims (whose records are copied too) and flushes, in Zone Write and Zone
//! Append mode and without per-block metadata, uniformly without separation and 80/20 with
//! it, and every write must succeed, the free zones must reach the one-zone reserve (so the
//! rule was exercised), and every block must read its latest version.

mod common;

use common::{block, device, geometry, version_of};
use ftl::{FtlVolume, MountOptions, WriteMode};
use zns::{BlockDevice, SimRng};

#[derive(Debug, Default)]
struct Coverage {
    free_min: u32,
    gc_zones: u64,
    trims: u64,
    merged: u64,
    cold_user_blocks: u64,
}

async fn run(oob_size: u32, write_mode: WriteMode, seed: u64, hot_cold: bool) -> Coverage {
    let what = format!("oob {oob_size}, {write_mode:?}, seed {seed}, hot/cold {hot_cold}");
    let g = zns::Geometry {
        oob_size,
        zone_count: 40,
        ..geometry()
    };
    let dev = device(g, seed);
    // 90% of the data zones' payload live, exported from the smallest over-provisioning
    // whose layout holds it.
    let reserve = ftl::layout::RESERVE_ZONES_DEFAULT;
    let data_zones = ftl::Layout::new(g, 1000, reserve)
        .expect("layout")
        .data_zones;
    // A zone's payload: all but its header, and without metadata its 3 summary blocks (29
    // tags of 512-byte blocks per summary, docs/FORMAT.md).
    let per_zone = g.zone_capacity - 1 - if oob_size == 0 { 3 } else { 0 };
    let want = u64::from(data_zones) * per_zone * 90 / 100;
    ftl::format(dev.as_ref(), common::format_holding(g, want), seed, false)
        .await
        .expect("format");
    let opts = MountOptions {
        write_mode,
        hot_cold,
        hot_zones: 1,
        gc_foreground_free_zones: 1,
        gc_background_free_zones: 2,
        checkpoint_every_zones: 4,
        ..MountOptions::default()
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut latest = vec![0u64; n as usize];
    let mut version = 0u64;
    let mut cov = Coverage {
        free_min: u32::MAX,
        ..Coverage::default()
    };
    for lba in 0..n {
        version += 1;
        vol.write(lba, &block(bs, version), false)
            .await
            .unwrap_or_else(|e| panic!("{what}: fill of {lba}: {e}"));
        latest[lba as usize] = version;
    }
    let mut rng = SimRng::new(seed);
    for i in 0..8 * n {
        let len = rng.range_inclusive(1, 8);
        // With separation, 80% of the writes go to the first fifth of the volume.
        let lba = if hot_cold && rng.chance(0.8) {
            rng.below(n / 5 - len + 1)
        } else {
            rng.below(n - len + 1)
        };
        if rng.chance(0.1) {
            vol.trim(lba, len)
                .await
                .unwrap_or_else(|e| panic!("{what}: trim {i} of {lba}+{len}: {e}"));
            latest[lba as usize..(lba + len) as usize].fill(0);
        } else {
            let mut data = Vec::new();
            for b in lba..lba + len {
                version += 1;
                data.extend(block(bs, version));
                latest[b as usize] = version;
            }
            vol.write(lba, &data, false)
                .await
                .unwrap_or_else(|e| panic!("{what}: write {i} of {lba}+{len}: {e}"));
        }
        if rng.chance(0.02) {
            vol.flush()
                .await
                .unwrap_or_else(|e| panic!("{what}: flush {i}: {e}"));
        }
        cov.free_min = cov.free_min.min(vol.stats().free_zones);
    }
    let mut buf = vec![0u8; bs];
    for lba in 0..n {
        vol.read(lba, &mut buf)
            .await
            .unwrap_or_else(|e| panic!("{what}: read {lba}: {e}"));
        let want = latest[lba as usize];
        assert_eq!(
            version_of(&buf),
            Some(want),
            "{what}: block {lba} reads another version than its latest ({want})"
        );
    }
    let stats = vol.stats();
    cov.gc_zones = stats.counters.gc_zones;
    cov.trims = stats.counters.trims;
    cov.merged = stats.counters.gc_merged_victims;
    cov.cold_user_blocks = stats.counters.stream_blocks[ftl::map::Stream::Cold.index()];
    vol.unmount().await.expect("unmount");
    cov
}

#[test]
fn one_reserve_zone_always_collects() {
    common::runtime().block_on(async {
        for (oob, mode) in [
            (16, WriteMode::ZoneWrite),
            (16, WriteMode::ZoneAppend),
            (0, WriteMode::ZoneWrite),
        ] {
            for seed in 1..=3 {
                for hot_cold in [false, true] {
                    let cov = run(oob, mode, seed, hot_cold).await;
                    let what = format!("oob {oob}, {mode:?}, seed {seed}, {hot_cold}: {cov:?}");
                    // The volume ran at its floor: at most the one reserve zone free.
                    assert!(cov.free_min <= 1, "{what}");
                    assert!(cov.gc_zones >= 100, "{what}");
                    assert!(cov.trims >= 50, "{what}");
                    if hot_cold {
                        // Separation was on, and victims went whole to one GC stream.
                        assert!(cov.cold_user_blocks >= 1_000, "{what}");
                        assert!(cov.merged >= 10, "{what}");
                    } else {
                        assert_eq!(cov.merged, 0, "{what}");
                    }
                }
            }
        }
    });
}
