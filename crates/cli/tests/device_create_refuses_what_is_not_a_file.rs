//! `device create` makes emulator image files only: a path naming a device (a drive,
//! /dev/null) or a directory is refused with a usage error before anything is written, with
//! or without --force. The VM test (real_device_in_vm.rs) checks the same on a zoned drive.

mod common;
use common::zonestack;

#[test]
fn a_device_or_directory_is_refused_even_with_force() {
    // Regression: `device create /dev/X --force` opened the device as an image file and wrote
    // an image's layout over it (on /dev/null it failed with "Invalid argument" and claimed to
    // have overwritten it in part): a drive named by mistake lost its data.
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_string_lossy().into_owned();
    for (path, what) in [
        ("/dev/null", "a character device"),
        (d.as_str(), "a directory"),
    ] {
        for force in [false, true] {
            let mut args = vec!["device", "create", path, "--zones", "4"];
            if force {
                args.push("--force");
            }
            let o = zonestack(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("{path} is {what}, not an image file")),
                "{err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        }
    }
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").next().is_none(),
        "nothing was written into the directory"
    );
}
