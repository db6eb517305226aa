//! `ftl format --threaded-logging` formats a volume with threaded logging on an image made
//! with `--zns-plus` and says so; on an image without the ZNS+ commands it fails with one line
//! naming what is missing (exit 1) and leaves the image unformatted.

mod common;

use common::{fails, ok};

#[test]
fn threaded_logging_needs_a_zns_plus_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = dir.path().join("plain.img").to_string_lossy().into_owned();
    ok(&["device", "create", &plain, "--zones", "32", "--oob", "16"]);
    let err = fails(
        &["ftl", "format", &plain, "--op", "25", "--threaded-logging"],
        1,
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("ZNS+") && err.contains("--zns-plus"), "{err}");
    // Nothing was formatted: a plain format needs no --force.
    ok(&["ftl", "format", &plain, "--op", "25"]);

    let plus = dir.path().join("plus.img").to_string_lossy().into_owned();
    ok(&[
        "device",
        "create",
        &plus,
        "--zones",
        "32",
        "--oob",
        "16",
        "--zns-plus",
    ]);
    let out = ok(&["ftl", "format", &plus, "--op", "25", "--threaded-logging"]);
    assert!(out.contains("threaded logging"), "{out}");
    ok(&["ftl", "mount", &plus]);
    let check = ok(&["ftl", "check", &plus]);
    assert!(check.contains("clean"), "{check}");
}
