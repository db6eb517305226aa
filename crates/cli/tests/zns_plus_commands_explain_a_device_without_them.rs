//! On an image made without `--zns-plus`, `zone compact` and `zone tl-open` fail with one
//! line saying the device has no ZNS+ commands and how to get them (exit 1), and change
//! nothing; malformed arguments are usage errors (exit 2) before any device is touched.

mod common;

use common::{fails, ok};

fn plain_image(dir: &tempfile::TempDir) -> String {
    let img = dir.path().join("plain.img");
    let img = img.to_str().expect("utf-8 path").to_string();
    ok(&["device", "create", &img, "--zones", "4"]);
    ok(&["io", "fill", &img, "--zone", "0"]);
    img
}

#[test]
fn the_commands_say_the_device_lacks_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = plain_image(&dir);
    let before = ok(&["zone", "report", &img, "--json"]);
    for args in [
        vec!["zone", "compact", &img, "--extent", "0:256:4"],
        vec!["zone", "tl-open", &img, "--zone", "0", "--valid", "none"],
    ] {
        let err = fails(&args, 1);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("no ZNS+ commands") && err.contains("--zns-plus"),
            "{err}"
        );
    }
    assert_eq!(ok(&["zone", "report", &img, "--json"]), before);
    assert!(!ok(&["device", "info", &img]).contains("zns+"));
}

#[test]
fn malformed_arguments_are_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = plain_image(&dir);
    for args in [
        vec!["zone", "compact", &img],
        vec!["zone", "compact", &img, "--extent", "1:2"],
        vec!["zone", "compact", &img, "--extent", "1:2:0"],
        vec!["zone", "tl-open", &img, "--zone", "0"],
        vec!["zone", "tl-open", &img, "--zone", "0", "--valid", "5-1"],
    ] {
        fails(&args, 2);
    }
}
