//! A data zone that went offline loses only its own data: `zonestack ftl check` names the
//! lost LBA ranges and exits 1, `ftl mount` still mounts and lists them, and `ftl stats --json`
//! counts them. Before, an offline zone made every mount and check fail.

mod common;

use std::sync::Arc;

use common::{fails, ok};
use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, Geometry, ZonedDevice};

fn geometry() -> Geometry {
    Geometry {
        block_size: 512,
        oob_size: 16,
        zone_count: 16,
        zone_size: 64,
        zone_capacity: 64,
        max_open: 12,
        max_active: 12,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 8,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    }
}

/// Formats an FTL volume on a new image and writes LBAs 0..100; returns the device zone
/// holding LBA 0.
fn prepare(path: &std::path::Path) -> u32 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dev = Arc::new(
            EmuDevice::create_file(path, EmuConfig::new(geometry()), false).expect("create"),
        );
        ftl::format(dev.as_ref(), FormatOptions::with_op(500), 9, false)
            .await
            .expect("format");
        let as_dyn: Arc<dyn ZonedDevice> = dev.clone();
        let (vol, _) = FtlVolume::mount(as_dyn, MountOptions::default())
            .await
            .expect("mount");
        let bs = vol.block_size() as usize;
        for lba in 0..100u64 {
            vol.write(lba, &vec![0x5a; bs], false).await.expect("write");
        }
        vol.unmount().await.expect("unmount");
        // Find the zone the FTL put LBA 0 in: the first written data block after a header.
        let g = geometry();
        let mut zone = None;
        let mut buf = vec![0u8; bs];
        for z in 0..g.zone_count {
            dev.read(g.zone_start(z) + 1, &mut buf, None)
                .await
                .expect("read");
            if buf.iter().all(|b| *b == 0x5a) {
                zone = Some(z);
                break;
            }
        }
        drop(vol);
        match Arc::try_unwrap(dev) {
            Ok(d) => d.shutdown().expect("shutdown"),
            Err(_) => panic!("the device is still shared"),
        }
        zone.expect("a zone holds the data")
    })
}

#[test]
fn ftl_check_names_the_lba_ranges_an_offline_zone_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("lost.img");
    let z = prepare(&img);
    let path = img.to_str().expect("utf-8 path");
    let zone = z.to_string();
    ok(&["ftl", "check", path]);
    ok(&["fault", path, "--zone", &zone, "--state", "read_only"]);
    ok(&["fault", path, "--zone", &zone, "--state", "offline"]);
    let err = fails(&["ftl", "check", path], 1);
    assert!(err.contains("lost in offline zones"), "{err}");
    assert!(
        err.contains("0.."),
        "the range starting at LBA 0 is named: {err}"
    );
    let stats = ok(&["ftl", "stats", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stats).expect("json");
    assert!(v["lost_blocks"].as_u64().unwrap_or(0) >= 1, "{stats}");
    assert_eq!(v["retired_zones"].as_u64(), Some(1), "{stats}");
    let mounted = ok(&["ftl", "mount", path]);
    assert!(mounted.contains("data lost in offline zones"), "{mounted}");
}
