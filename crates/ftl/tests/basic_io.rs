//! The volume reads back what was written, overwritten, trimmed and zeroed, across
//! garbage collection and a clean unmount and remount; bad requests get the right errors.

mod common;

use common::{block, fresh, geometry, runtime, small_opts, version_of};
use ftl::{FtlVolume, WriteMode};
use zns::{BlockDevice, BlockError};

fn run(mode: WriteMode) {
    runtime().block_on(async {
        let dev = common::device(geometry(), 1);
        let opts = ftl::MountOptions {
            write_mode: mode,
            ..small_opts()
        };
        let vol = fresh(&dev, 580, opts).await;
        let n = vol.size_blocks();
        let bs = vol.block_size() as usize;
        let mut expect = vec![0u64; n as usize];
        // Several overwrite passes force garbage collection.
        let mut version = 0;
        for pass in 0..6u64 {
            for lba in (0..n).rev().step_by(1 + pass as usize % 3) {
                version += 1;
                vol.write(lba, &block(bs, version), false)
                    .await
                    .expect("write");
                expect[lba as usize] = version;
            }
        }
        vol.trim(10, 20).await.expect("trim");
        expect[10..30].fill(0);
        vol.write_zeroes(40, 5, true).await.expect("write zeroes");
        expect[40..45].fill(0);
        let check = |vol: std::sync::Arc<FtlVolume>, expect: Vec<u64>| async move {
            let mut buf = vec![0u8; bs];
            for lba in 0..n {
                vol.read(lba, &mut buf).await.expect("read");
                assert_eq!(version_of(&buf), Some(expect[lba as usize]), "LBA {lba}");
            }
            vol.verify().expect("invariants");
        };
        check(vol.clone(), expect.clone()).await;
        let stats = vol.stats();
        assert!(
            stats.counters.gc_zones > 0,
            "the workload must have exercised GC: {stats:?}"
        );
        assert!(stats.write_amplification > 1.0);
        vol.unmount().await.expect("unmount");
        drop(vol);
        let (vol, report) = FtlVolume::mount(dev.clone(), opts).await.expect("remount");
        assert_eq!(
            report.scanned_blocks, 0,
            "a clean unmount leaves nothing to scan"
        );
        check(vol.clone(), expect).await;
        vol.unmount().await.expect("unmount");
    });
}

#[test]
fn zone_write_mode_round_trips() {
    run(WriteMode::ZoneWrite);
}

#[test]
fn zone_append_mode_round_trips() {
    run(WriteMode::ZoneAppend);
}

#[test]
fn bad_requests_get_errors_and_format_refuses_a_used_device() {
    runtime().block_on(async {
        let dev = common::device(geometry(), 2);
        let vol = fresh(&dev, 580, small_opts()).await;
        let n = vol.size_blocks();
        let bs = vol.block_size() as usize;
        assert_eq!(
            vol.write(n, &block(bs, 1), false).await,
            Err(BlockError::OutOfRange)
        );
        assert_eq!(
            vol.write(0, &[1u8; 100], false).await,
            Err(BlockError::Misaligned)
        );
        let mut buf = vec![0u8; 2 * bs];
        assert_eq!(vol.read(n - 1, &mut buf).await, Err(BlockError::OutOfRange));
        assert_eq!(vol.trim(n - 1, 2).await, Err(BlockError::OutOfRange));
        vol.unmount().await.expect("unmount");
        let again = ftl::format(dev.as_ref(), ftl::FormatOptions::with_op(580), 8, false).await;
        assert!(matches!(again, Err(ftl::FtlError::NotEmpty)), "{again:?}");
        ftl::format(dev.as_ref(), ftl::FormatOptions::with_op(580), 8, true)
            .await
            .expect("forced format");
    });
}

#[test]
fn a_volume_can_export_an_exact_size_that_survives_remount() {
    runtime().block_on(async {
        let dev = common::device(geometry(), 3);
        let fmt = ftl::FormatOptions {
            op_permille: 580,
            volume_blocks: Some(500),
            threaded_logging: false,
        };
        ftl::format(dev.as_ref(), fmt, 9, false)
            .await
            .expect("format");
        let (vol, _) = FtlVolume::mount(dev.clone(), small_opts())
            .await
            .expect("mount");
        assert_eq!(vol.size_blocks(), 500);
        vol.write(499, &block(512, 5), true).await.expect("write");
        vol.unmount().await.expect("unmount");
        drop(vol);
        let (vol, _) = FtlVolume::mount(dev.clone(), small_opts())
            .await
            .expect("remount");
        assert_eq!(vol.size_blocks(), 500);
        let mut buf = vec![0u8; 512];
        vol.read(499, &mut buf).await.expect("read");
        assert_eq!(version_of(&buf), Some(5));
        let too_big = ftl::FormatOptions {
            op_permille: 580,
            volume_blocks: Some(10_000),
            threaded_logging: false,
        };
        assert!(ftl::format(dev.as_ref(), too_big, 9, true).await.is_err());
    });
}

#[test]
fn the_open_zones_fit_the_devices_active_limit() {
    runtime().block_on(async {
        // Six active zones: the FTL must run with two hot zones and never exceed the limit.
        let g = zns::Geometry {
            max_open: 6,
            max_active: 6,
            ..geometry()
        };
        let dev = common::device(g, 4);
        let opts = ftl::MountOptions {
            hot_zones: 8,
            ..small_opts()
        };
        let vol = fresh(&dev, 580, opts).await;
        let bs = vol.block_size() as usize;
        for pass in 0..4u64 {
            for lba in 0..vol.size_blocks() {
                vol.write(lba, &block(bs, pass * 10_000 + lba + 1), false)
                    .await
                    .expect("write within the active limit");
            }
        }
        vol.unmount().await.expect("unmount");
        let tight = zns::Geometry {
            max_open: 4,
            max_active: 4,
            ..geometry()
        };
        let dev = common::device(tight, 5);
        ftl::format(dev.as_ref(), ftl::FormatOptions::with_op(580), 1, false)
            .await
            .expect("format");
        let err = FtlVolume::mount(dev.clone(), small_opts())
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("at least 5"), "{err}");
    });
}
