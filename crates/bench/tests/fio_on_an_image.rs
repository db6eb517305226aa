//! Jobs run on an existing device image: the image is left shut down cleanly, after a run
//! that succeeded and after one that failed.

use bench::fio::{run, Target, Volume};
use bench::jobfile::parse;
use emu::{EmuConfig, EmuDevice};

fn image(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("dev.img");
    let g = emu::profile("small").expect("the small profile exists");
    let dev = EmuDevice::create_file(&path, EmuConfig::new(g), false).expect("creates");
    dev.shutdown().expect("shuts down");
    path
}

fn on(path: &std::path::Path, volume: Volume) -> Target {
    Target {
        profile: "zn540".into(),
        size_bytes: None,
        seed: 1,
        volume,
        image: Some(path.to_path_buf()),
    }
}

#[test]
fn the_image_is_closed_cleanly_after_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = image(&dir);
    let jobs = parse("[w]\nzonemode=zbd\nrw=write\nbs=64k\nsize=1m\n").expect("parses");
    let results = run(&jobs, &on(&path, Volume::Zns)).expect("runs");
    assert_eq!(results[0].write.bytes, 1 << 20);
    assert!(EmuDevice::image_was_clean(&path).expect("inspects"));
}

#[test]
fn the_image_is_closed_cleanly_after_a_refused_volume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = image(&dir);
    let jobs = parse("[w]\nrw=randwrite\nbs=4k\nsize=1m\n").expect("parses");
    let ftl = Volume::Ftl { op_percent: 7.0 };
    let err = run(&jobs, &on(&path, ftl)).expect_err("holds no volume");
    assert!(err.contains("zonestack ftl format"), "{err}");
    assert!(EmuDevice::image_was_clean(&path).expect("inspects"));
}

#[test]
fn a_size_or_a_conventional_ssd_is_refused_with_an_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = image(&dir);
    let jobs = parse("[w]\nzonemode=zbd\nrw=write\nsize=1m\n").expect("parses");
    let sized = Target {
        size_bytes: Some(4 << 20),
        ..on(&path, Volume::Zns)
    };
    assert!(run(&jobs, &sized).is_err());
    let conv = on(&path, Volume::Conv { op_percent: 7.0 });
    assert!(run(&jobs, &conv).is_err());
}
