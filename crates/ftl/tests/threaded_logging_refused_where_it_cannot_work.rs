//! Threaded logging needs a device with the ZNS+ commands, per-block metadata (in-band
//! summaries sit at fixed offsets that writes into holes would land between) and Zone Write
//! mode (a write into a hole must land exactly there); format and mount refuse it otherwise
//! with one line naming what is missing, and a volume formatted with it says so after a
//! remount.

mod common;

use common::{device, device_plus, geometry};
use ftl::{FormatOptions, FtlVolume, MountOptions, WriteMode};

fn threaded() -> FormatOptions {
    FormatOptions {
        threaded_logging: true,
        ..FormatOptions::with_op(580)
    }
}

fn plus_geometry(oob: u32) -> zns::Geometry {
    zns::Geometry {
        block_size: 4096,
        oob_size: oob,
        ..geometry()
    }
}

#[test]
fn format_refuses_a_device_without_the_zns_plus_commands() {
    common::runtime().block_on(async {
        let dev = device(geometry(), 1);
        let e = ftl::format(dev.as_ref(), threaded(), 1, false)
            .await
            .expect_err("no tl_open on this device");
        assert!(e.to_string().contains("ZNS+"), "{e}");
        // Nothing was written: a plain format still finds the device empty.
        ftl::format(dev.as_ref(), FormatOptions::with_op(580), 1, false)
            .await
            .expect("plain format");
    });
}

#[test]
fn format_refuses_summary_mode() {
    common::runtime().block_on(async {
        let dev = device_plus(plus_geometry(0), 1);
        let e = ftl::format(dev.as_ref(), threaded(), 1, false)
            .await
            .expect_err("no per-block metadata");
        assert!(e.to_string().contains("metadata"), "{e}");
    });
}

#[test]
fn mount_refuses_zone_append_and_the_flag_survives_a_remount() {
    common::runtime().block_on(async {
        let dev = device_plus(plus_geometry(16), 1);
        ftl::format(dev.as_ref(), threaded(), 1, false)
            .await
            .expect("format");
        let append = MountOptions {
            write_mode: WriteMode::ZoneAppend,
            ..MountOptions::default()
        };
        let e = match FtlVolume::mount(dev.clone(), append).await {
            Ok(_) => panic!("mounted in Zone Append mode"),
            Err(e) => e,
        };
        assert!(e.to_string().contains("Zone Write"), "{e}");
        let (vol, _) = FtlVolume::mount(dev.clone(), MountOptions::default())
            .await
            .expect("mount");
        assert!(vol.stats().threaded_logging);
        vol.unmount().await.expect("unmount");
        let (vol, _) = FtlVolume::mount(dev.clone(), MountOptions::default())
            .await
            .expect("remount");
        assert!(
            vol.stats().threaded_logging,
            "the flag is in the checkpoints"
        );
        vol.unmount().await.expect("unmount");
    });
}
