//! Power loss with the volatile write cache on: every zone keeps a prefix of what was written
//! to it that includes everything flushed or written with FUA, on the memory backend, and on
//! the file backend both through `power_loss` and through a process kill and reopen.

mod common;

use common::{block, block_on, small_geometry};
use emu::{EmuConfig, EmuDevice};
use proptest::prelude::*;
use zns::{ReportFilter, SimRng, ZoneState, ZonedDevice};

/// Per zone: the blocks written (in order) and how many of them are durable.
struct Log {
    written: Vec<Vec<Vec<u8>>>,
    durable: Vec<usize>,
}

async fn workload(dev: &EmuDevice, seed: u64, ops: usize) -> Log {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let mut rng = SimRng::new(seed);
    let mut log = Log {
        written: vec![Vec::new(); g.zone_count as usize],
        durable: vec![0; g.zone_count as usize],
    };
    for op in 0..ops {
        let z = rng.below(u64::from(g.zone_count)) as u32;
        let zi = z as usize;
        match rng.below(10) {
            0 => {
                dev.flush().await.expect("flush");
                for (d, w) in log.durable.iter_mut().zip(&log.written) {
                    *d = w.len();
                }
            }
            _ => {
                let done = log.written[zi].len() as u64;
                let room = g.zone_capacity - done;
                if room == 0 {
                    continue;
                }
                let n = rng.range_inclusive(1, room.min(4));
                let fua = rng.chance(0.15);
                let lba = g.zone_start(z) + done;
                let blocks: Vec<Vec<u8>> = (0..n).map(|i| block(bs, lba + i, op as u64)).collect();
                let data = blocks.concat();
                match dev.write(lba, &data, None, fua).await {
                    Ok(()) => {}
                    // The open/active limits may refuse a new zone; that is not this test's subject.
                    Err(
                        zns::NvmeStatus::TooManyActiveZones | zns::NvmeStatus::TooManyOpenZones,
                    ) => continue,
                    Err(e) => panic!("seed {seed} op {op}: write failed: {e}"),
                }
                log.written[zi].extend(blocks);
                if fua || log.written[zi].len() as u64 == g.zone_capacity {
                    log.durable[zi] = log.written[zi].len();
                }
            }
        }
    }
    log
}

async fn check_prefix(dev: &EmuDevice, log: &Log, seed: u64) {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let report = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await
        .expect("report");
    for (zi, d) in report.zones.iter().enumerate() {
        let kept = if d.state == ZoneState::Full {
            g.zone_capacity
        } else {
            d.wp - d.start
        } as usize;
        let written = log.written[zi].len();
        assert!(
            kept >= log.durable[zi],
            "seed {seed} zone {zi}: kept {kept} blocks, {} were durable",
            log.durable[zi]
        );
        assert!(
            kept <= written,
            "seed {seed} zone {zi}: kept {kept} blocks, only {written} written"
        );
        assert!(
            !d.state.is_open(),
            "seed {seed} zone {zi}: open after restart"
        );
        let expect_state = match kept {
            0 if written == 0 => ZoneState::Empty,
            k if k as u64 == g.zone_capacity => ZoneState::Full,
            _ => d.state,
        };
        assert_eq!(d.state, expect_state, "seed {seed} zone {zi}");
        let mut buf = vec![0u8; bs];
        for i in 0..g.zone_capacity as usize {
            dev.read(d.start + i as u64, &mut buf, None)
                .await
                .expect("read");
            if i < kept {
                assert_eq!(
                    buf, log.written[zi][i],
                    "seed {seed} zone {zi} block {i}: wrong data"
                );
            } else {
                assert!(
                    buf.iter().all(|b| *b == 0),
                    "seed {seed} zone {zi} block {i}: above the WP must read zeros"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn memory_backend_keeps_a_durable_prefix(seed in any::<u64>()) {
        block_on(async {
            let dev = common::memory(seed);
            let log = workload(&dev, seed, 80).await;
            dev.power_loss(seed ^ 0xA5).expect("power loss");
            check_prefix(&dev, &log, seed).await;
        });
    }

    #[test]
    fn file_backend_keeps_a_durable_prefix_across_kill(seed in any::<u64>()) {
        block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("dev.img");
            let dev = EmuDevice::create_file(&path, EmuConfig { seed, ..EmuConfig::new(small_geometry()) }, false).expect("create");
            let log = workload(&dev, seed, 80).await;
            if seed % 2 == 0 {
                // A power cut, then the process dies before any clean shutdown.
                dev.power_loss(seed).expect("power loss");
            }
            dev.kill();
            let dev = EmuDevice::open_file(&path, false).expect("reopen");
            check_prefix(&dev, &log, seed).await;
        });
    }
}

#[test]
fn power_loss_aborts_appends_in_flight_and_is_seeded() {
    // Two devices with the same seed lose exactly the same blocks.
    let cut = |seed| {
        block_on(async {
            let dev = common::memory(1);
            let g = dev.geometry();
            for z in 0..3u32 {
                let data = vec![7u8; 20 * g.block_size as usize];
                dev.write(g.zone_start(z), &data, None, false)
                    .await
                    .expect("write");
            }
            dev.power_loss(seed).expect("power loss")
        })
    };
    assert_eq!(cut(9), cut(9));
    assert_ne!(
        (0..20)
            .map(cut)
            .collect::<std::collections::HashSet<_>>()
            .len(),
        1
    );

    block_on(async {
        let dev = common::memory(3);
        let g = dev.geometry();
        let data = vec![1u8; g.block_size as usize];
        let append = dev.append(0, &data, None, false);
        let (r, ()) = futures::join!(append, async {
            dev.power_loss(5).expect("power loss");
        });
        assert_eq!(r, Err(zns::NvmeStatus::AbortedPowerLoss));
        let d = dev
            .report_zones(0, ReportFilter::All, true, 1)
            .await
            .expect("report")
            .zones[0];
        assert_eq!((d.state, d.wp), (ZoneState::Empty, 0));
    });
}

#[test]
fn write_cache_off_makes_every_completed_write_durable() {
    block_on(async {
        let cfg = EmuConfig {
            volatile_cache: false,
            ..EmuConfig::new(small_geometry())
        };
        let dev = EmuDevice::new_memory(cfg).expect("device");
        let data = vec![3u8; 5 * 512];
        dev.write(0, &data, None, false).await.expect("write");
        assert!(dev.power_loss(77).expect("power loss").is_empty());
        let d = dev
            .report_zones(0, ReportFilter::All, true, 1)
            .await
            .expect("report")
            .zones[0];
        assert_eq!((d.state, d.wp), (ZoneState::Closed, 5));
    });
}
