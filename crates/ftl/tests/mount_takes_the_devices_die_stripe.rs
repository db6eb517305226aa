//! A mount learns how the device stripes a zone over its dies from the device's hint
//! (`ZonedDevice::die_stripe`) when the mount options do not say: on a timed emulated device
//! every mount places hot-zone writes by die (`plan::hot_zone_gives_way`), not only those
//! told the stripe. `MountOptions::stripe` still overrides the hint, and an untimed device
//! gives none. Virtual time.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions, Stripe};
use zns::{BlockDevice, ZonedDevice};

fn timed_device() -> Arc<EmuDevice> {
    common::timed_zn540(common::geometry(), 3)
}

/// The stripe a mount of a fresh volume on `dev` with `opts` knows, after a write and read
/// back through hot zones.
async fn mounted_stripe(dev: Arc<EmuDevice>, opts: MountOptions) -> Option<Stripe> {
    ftl::format(dev.as_ref(), FormatOptions::with_op(580), 7, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev, opts).await.expect("mount");
    let bs = vol.block_size() as usize;
    for lba in 0..64 {
        vol.write(lba, &common::block(bs, lba + 1), false)
            .await
            .expect("write");
    }
    let mut buf = vec![0u8; bs];
    for lba in 0..64 {
        vol.read(lba, &mut buf).await.expect("read");
        assert_eq!(common::version_of(&buf), Some(lba + 1), "LBA {lba}");
    }
    let stripe = vol.stats().stripe;
    vol.unmount().await.expect("unmount");
    stripe
}

#[test]
fn a_mount_without_the_option_takes_the_devices_stripe() {
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    let dev = timed_device();
    // zn540: 32 KiB per die operation (64 blocks of 512 bytes), zones over all 32 dies.
    let hint = Some(Stripe {
        unit_blocks: 64,
        dies: 32,
    });
    assert_eq!(dev.die_stripe(), hint);
    let got = rt.block_on(mounted_stripe(dev, common::small_opts()));
    assert_eq!(got, hint);
}

#[test]
fn the_option_overrides_the_hint_and_an_untimed_device_gives_none() {
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    let told = Stripe {
        unit_blocks: 4,
        dies: 3,
    };
    let opts = MountOptions {
        stripe: Some(told),
        ..common::small_opts()
    };
    assert_eq!(
        rt.block_on(mounted_stripe(timed_device(), opts)),
        Some(told)
    );
    let untimed = common::device(common::geometry(), 3);
    assert_eq!(untimed.die_stripe(), None);
    let rt = common::runtime();
    assert_eq!(
        rt.block_on(mounted_stripe(untimed, common::small_opts())),
        None
    );
}
