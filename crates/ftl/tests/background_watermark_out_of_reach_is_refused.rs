//! Regression: a mount accepted a background-collection watermark
//! (`MountOptions::gc_background_free_zones`) that a volume with all its blocks written can
//! never reach, so collection never stopped (or, above the floor, user writes were paced for
//! good). Such a watermark is now refused with one line naming it and the range accepted,
//! before recovery changes anything on the device (`plan::check_watermarks`); values in
//! the range and the automatic one mount.

mod common;

use common::{block, device, geometry, runtime, version_of};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, ReportFilter, ZoneState, ZonedDevice};

/// Watermarks as the tests' usual options have them: floor 3, collection from 5.
fn asked(bg: u32) -> MountOptions {
    MountOptions {
        hot_zones: 2,
        gc_foreground_free_zones: 3,
        gc_background_free_zones: bg,
        ..MountOptions::default()
    }
}

/// Zones partly written (open or closed): a mount finishes them.
async fn open_zones(dev: &dyn ZonedDevice) -> usize {
    let r = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await
        .expect("report");
    r.zones
        .iter()
        .filter(|z| {
            matches!(
                z.state,
                ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed
            )
        })
        .count()
}

#[test]
fn a_watermark_a_full_volume_cannot_reach_is_refused_before_recovery() {
    runtime().block_on(async {
        // 18 data zones of 63 payload blocks hold the 984 blocks of a 30% volume in 16, so
        // at most 2 are free once every block is written; with a floor of 3 the range
        // accepted is 1 to 4.
        let dev = device(geometry(), 1);
        let layout = ftl::format(dev.as_ref(), FormatOptions::with_op(300), 1, false)
            .await
            .expect("format");
        assert_eq!(ftl::plan::free_zones_when_full(&layout), 2);
        let (vol, _) = FtlVolume::mount(dev.clone(), asked(4))
            .await
            .expect("4 is in range");
        let bs = vol.block_size() as usize;
        vol.write(7, &block(bs, 9), true).await.expect("write");
        vol.crash().await;
        drop(vol);
        let open = open_zones(dev.as_ref()).await;
        assert!(open > 0, "the cut left a zone open");
        let e = FtlVolume::mount(dev.clone(), asked(5))
            .await
            .err()
            .map(|e| e.to_string())
            .expect("a watermark of 5 was accepted");
        assert!(!e.contains('\n'), "one line: {e}");
        for part in [
            "watermark of 5 free zones",
            "at most 2 of the 18",
            "use 1 to 4",
        ] {
            assert!(e.contains(part), "{e:?} lacks {part:?}");
        }
        // Refused before recovery finished the zone the cut left open.
        assert_eq!(open_zones(dev.as_ref()).await, open);
        for opts in [asked(0), MountOptions::default()] {
            let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
            let mut buf = vec![0u8; bs];
            vol.read(7, &mut buf).await.expect("read");
            assert_eq!(version_of(&buf), Some(9));
            vol.unmount().await.expect("unmount");
        }
    });
}

#[test]
fn the_range_follows_the_spare_and_the_floor() {
    runtime().block_on(async {
        // At 58% the same zones hold 810 blocks in 13: 5 free, so 5 is accepted, 6 not.
        let dev = device(geometry(), 2);
        let layout = ftl::format(dev.as_ref(), FormatOptions::with_op(580), 2, false)
            .await
            .expect("format");
        assert_eq!(ftl::plan::free_zones_when_full(&layout), 5);
        let e = FtlVolume::mount(dev.clone(), asked(6)).await.err();
        assert!(e.is_some_and(|e| e.to_string().contains("use 1 to 5")));
        FtlVolume::mount(dev.clone(), asked(5))
            .await
            .expect("5 is in range")
            .0
            .unmount()
            .await
            .expect("unmount");
        // In summary mode (no per-block metadata) each zone also holds 3 summary blocks,
        // leaving 4 zones free: 5 is refused there.
        let g = zns::Geometry {
            oob_size: 0,
            ..geometry()
        };
        let dev = device(g, 3);
        let layout = ftl::format(dev.as_ref(), FormatOptions::with_op(580), 3, false)
            .await
            .expect("format");
        assert_eq!(ftl::plan::free_zones_when_full(&layout), 4);
        assert!(FtlVolume::mount(dev.clone(), asked(5)).await.is_err());
        // A watermark one above an explicit floor is accepted even where the floor itself
        // is out of reach (collection is wanted at the floor anyway: no band).
        let floor = MountOptions {
            gc_foreground_free_zones: 6,
            ..asked(7)
        };
        let (vol, _) = FtlVolume::mount(dev.clone(), floor)
            .await
            .expect("7 over 6");
        vol.unmount().await.expect("unmount");
    });
}
