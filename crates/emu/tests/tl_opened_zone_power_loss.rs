//! Power loss in a TL-opened zone (ZNS+, docs/ZNSPLUS.md item 53), seeded: a zone full of
//! old data is TL-opened with a random valid bitmap, threaded logging writes random runs of
//! its invalid blocks with random FUA and Flush, and power is cut at a random point. After
//! the cut every valid block must hold its old data, every written block below the WP its
//! new data, and the WP must be a kept prefix (at least the durable point) moved past the
//! valid blocks that follow. The test counts how often each case happened, so it fails if
//! it stops exercising them. It runs on the memory backend (the cut in place) and on a file
//! image, where the process is also killed after the cut and the image reopened, so the
//! zone's entry and its valid bitmap come back from the image (docs/FORMAT.md).
//!
//! Fault model: power loss with the volatile write cache on (and, for an image, a process
//! kill right after it), nothing else.

mod common;

use std::path::Path;

use common::{block_on, small_geometry};
use emu::{EmuConfig, EmuDevice};
use zns::{zone_attr, Geometry, ReportFilter, SimRng, ValidBitmap, ZoneState, ZonedDevice};

/// Content of block `b` of zone 0 written with `salt` (never all zeros).
fn block_data(g: &Geometry, b: u64, salt: u8) -> Vec<u8> {
    let mut d = vec![salt; g.block_size as usize];
    d[..8].copy_from_slice(&b.to_le_bytes());
    d[8] = 0xEE;
    d
}

#[derive(Default)]
struct Coverage {
    lost_writes: u64,
    kept_all: u64,
    became_full: u64,
    wp_moved_past_valid_after_cut: u64,
}

/// A ZNS+ device in memory, or in a new image at `image`.
fn device(seed: u64, image: Option<&Path>) -> EmuDevice {
    let cfg = EmuConfig {
        seed,
        zns_plus: true,
        ..EmuConfig::new(small_geometry())
    };
    match image {
        None => EmuDevice::new_memory(cfg).expect("device"),
        Some(p) => EmuDevice::create_file(p, cfg, true).expect("image"),
    }
}

/// Cuts power; an image's process is then killed and the image reopened.
fn cut(dev: EmuDevice, seed: u64, image: Option<&Path>) -> EmuDevice {
    dev.power_loss(seed).expect("power loss");
    match image {
        None => dev,
        Some(p) => {
            dev.kill();
            EmuDevice::open_file(p, false).expect("reopen after the kill")
        }
    }
}

async fn one_run(seed: u64, cov: &mut Coverage, image: Option<&Path>) {
    let g = small_geometry();
    let cap = g.zone_capacity;
    let dev = device(seed, image);
    let mut rng = SimRng::new(seed);
    for b in 0..cap {
        let d = block_data(&g, b, 1);
        dev.write(b, &d, None, false).await.expect("old data");
    }
    let mut map = ValidBitmap::empty(cap);
    let density = rng.below(80);
    for b in 0..cap {
        map.set(b, rng.below(100) < density);
    }
    dev.tl_open(0, map.as_bytes()).await.expect("tl_open");
    // `new[b]`: the salt block b was rewritten with; `durable_at`: the durable WP.
    let mut new = vec![None; cap as usize];
    let mut durable_at = map.next_invalid(0);
    let mut wp = durable_at;
    while wp < cap && rng.below(8) != 0 {
        let run_end = (wp..cap).find(|&b| map.is_valid(b)).unwrap_or(cap);
        let n = rng.range_inclusive(1, run_end - wp);
        let salt = 2 + rng.below(200) as u8;
        let data: Vec<u8> = (wp..wp + n).flat_map(|b| block_data(&g, b, salt)).collect();
        let fua = rng.below(4) == 0;
        dev.write(wp, &data, None, fua)
            .await
            .expect("threaded logging write");
        for b in wp..wp + n {
            new[b as usize] = Some(salt);
        }
        wp = map.next_invalid(wp + n);
        if fua || rng.below(6) == 0 {
            if !fua {
                dev.flush().await.expect("flush");
            }
            durable_at = wp;
        }
    }
    let dev = cut(dev, seed, image);
    let d = dev
        .report_zones(0, ReportFilter::All, true, 1)
        .await
        .expect("report")
        .zones[0];
    let got_wp = d.wp;
    assert!(
        got_wp >= durable_at && got_wp <= wp,
        "seed {seed}: WP {got_wp} outside [{durable_at}, {wp}]"
    );
    assert!(
        got_wp == cap || !map.is_valid(got_wp),
        "seed {seed}: WP {got_wp} rests on a valid block"
    );
    if got_wp == cap {
        assert_eq!(d.state, ZoneState::Full, "seed {seed}");
        assert_eq!(d.attributes & zone_attr::TLO, 0, "seed {seed}");
        cov.became_full += 1;
    } else {
        assert_eq!(d.state, ZoneState::Closed, "seed {seed}");
        assert_ne!(d.attributes & zone_attr::TLO, 0, "seed {seed}");
    }
    if got_wp < wp {
        cov.lost_writes += 1;
    } else {
        cov.kept_all += 1;
    }
    if got_wp > 0 && got_wp < wp && map.is_valid(got_wp - 1) && new.iter().any(Option::is_some) {
        cov.wp_moved_past_valid_after_cut += 1;
    }
    let mut buf = vec![0u8; (cap * u64::from(g.block_size)) as usize];
    dev.read(0, &mut buf, None).await.expect("read");
    for b in 0..cap {
        let at = (b * u64::from(g.block_size)) as usize;
        let got = &buf[at..at + g.block_size as usize];
        if map.is_valid(b) {
            assert_eq!(
                got,
                &block_data(&g, b, 1)[..],
                "seed {seed}: valid block {b} lost"
            );
        } else if b < got_wp {
            let want =
                new[b as usize].map_or_else(|| block_data(&g, b, 1), |s| block_data(&g, b, s));
            assert_eq!(
                got,
                &want[..],
                "seed {seed}: written block {b} below the WP"
            );
        }
    }
}

#[test]
fn valid_blocks_survive_and_writes_keep_a_prefix() {
    let mut cov = Coverage::default();
    block_on(async {
        for seed in 1..=300u64 {
            one_run(seed, &mut cov, None).await;
        }
    });
    check_coverage(&cov);
}

#[test]
fn valid_blocks_survive_a_kill_and_reopen_of_the_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tl.img");
    let mut cov = Coverage::default();
    block_on(async {
        for seed in 1..=300u64 {
            one_run(seed, &mut cov, Some(&path)).await;
        }
    });
    check_coverage(&cov);
}

/// Each case must have come up often enough to mean something.
fn check_coverage(cov: &Coverage) {
    assert!(
        cov.lost_writes >= 30,
        "only {} runs lost writes",
        cov.lost_writes
    );
    assert!(
        cov.kept_all >= 30,
        "only {} runs kept every write",
        cov.kept_all
    );
    assert!(
        cov.became_full >= 5,
        "only {} runs ended Full",
        cov.became_full
    );
    assert!(
        cov.wp_moved_past_valid_after_cut >= 5,
        "only {} cuts landed right after a valid run",
        cov.wp_moved_past_valid_after_cut
    );
}
