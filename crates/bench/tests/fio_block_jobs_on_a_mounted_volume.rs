//! `bench::fio::run_block_on`: block jobs on a volume the caller mounted, on the caller's
//! runtime with the wall clock (how `zonestack bench --device /dev/... --target ftl` runs the
//! host FTL on a real drive). Here the volume is the host FTL on an untimed in-memory
//! emulator shaped like a drive seen through the block layer (4 KiB blocks, no per-block
//! metadata), so the test needs no drive.

use std::sync::Arc;

use bench::fio::{no_probe, run_block_on, Progress, Target, Volume};
use bench::jobfile::parse;
use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, Geometry, ZonedDevice};

/// 24 zones of 1 MiB, 4 KiB blocks, no metadata, no limits: the VM test's FTL namespace.
fn drive_like() -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 0,
        zone_count: 24,
        zone_size: 256,
        zone_capacity: 256,
        max_open: 0,
        max_active: 0,
        zasl_blocks: 32,
        mdts_blocks: 32,
        copy_max_ranges: 8,
        copy_max_range_blocks: 64,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    }
}

fn target() -> Target {
    Target {
        profile: "zn540".into(),
        size_bytes: None,
        seed: 5,
        volume: Volume::Ftl { op_percent: 30.0 },
        image: None,
    }
}

/// A fresh FTL volume (30% over-provisioning) mounted on a fresh device.
async fn volume() -> Arc<FtlVolume> {
    let dev = EmuDevice::new_memory(EmuConfig {
        seed: 5,
        ..EmuConfig::new(drive_like())
    })
    .expect("device");
    ftl::format(&dev, FormatOptions::with_op(300), 5, false)
        .await
        .expect("format");
    let dev: Arc<dyn ZonedDevice> = Arc::new(dev);
    let (vol, _) = FtlVolume::mount(dev, MountOptions::default())
        .await
        .expect("mount");
    vol
}

fn wall_clock() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A fill, random overwrites of more than twice the volume's size (so the collector must run), and
/// random reads: every job moves what the file asks for, on the wall clock.
const JOBS: &str = "[global]\nfilename=/dev/nbd0\n\
    [fill]\nrw=write\nbs=64k\niodepth=4\n\
    [overwrite]\nstonewall\nrw=randwrite\nbs=4k\niodepth=8\nio_size=48m\n\
    [read]\nstonewall\nrw=randread\nbs=4k\niodepth=4\nio_size=1m\n";

#[test]
fn block_jobs_run_through_a_mounted_ftl_in_real_time() {
    let specs = parse(JOBS).expect("parses");
    wall_clock().block_on(async {
        let vol = volume().await;
        let bytes = vol.size_blocks() * u64::from(vol.block_size());
        assert!(
            2 * bytes < 48 << 20,
            "the overwrite must exceed twice the volume"
        );
        let p = Progress::default();
        let probe = || bench::fio::Sample {
            ftl: Some(vol.activity()),
            ..no_probe()
        };
        let (results, phases) = run_block_on(&specs, &target(), vol.as_ref(), &p, &probe)
            .await
            .expect("the jobs run");
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["fill", "overwrite", "read"]);
        assert_eq!(results[0].write.bytes, bytes / (64 << 10) * (64 << 10));
        assert_eq!(results[1].write.bytes, 48 << 20);
        assert_eq!(results[2].read.bytes, 1 << 20);
        assert_eq!(results[2].write.bytes, 0);
        assert_eq!(phases.len(), 3, "one figure per stonewall phase");
        let stats = vol.stats();
        assert!(
            stats.counters.gc_zones > 0,
            "overwriting the volume three times collects: {stats:?}"
        );
        assert!(p.done.load(std::sync::atomic::Ordering::Relaxed) >= 49 << 20);
        vol.unmount().await.expect("unmount");
    });
}

#[test]
fn a_zoned_job_is_refused_on_a_block_volume_with_its_reason() {
    let specs = parse("[z]\nzonemode=zbd\nrw=write\nbs=64k\n").expect("parses");
    wall_clock().block_on(async {
        let vol = volume().await;
        let p = Progress::default();
        let e = run_block_on(&specs, &target(), vol.as_ref(), &p, &no_probe)
            .await
            .expect_err("a zoned job on a block volume");
        assert!(e.contains("--target zns") && e.contains("job 'z'"), "{e}");
        vol.unmount().await.expect("unmount");
    });
}
