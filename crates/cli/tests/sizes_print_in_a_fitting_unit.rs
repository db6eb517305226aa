//! Sizes the CLI prints for people are exact, or rounded to two decimals, in a unit that
//! fits them.

mod common;
use common::ok;

#[test]
fn device_info_shows_a_sub_mebibyte_zone_capacity() {
    // `device info` printed the small profile's 768 KiB zone capacity as "0 MiB".
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("dev.img");
    let ps = p.to_str().expect("utf-8 path");
    let created = ok(&["device", "create", ps, "--profile", "small"]);
    assert!(created.contains("24 MiB writable"), "{created}");
    let info = ok(&["device", "info", ps]);
    assert!(
        info.contains("zone size:        256 blocks (1 MiB)"),
        "{info}"
    );
    assert!(
        info.contains("zone capacity:    192 blocks (768 KiB)"),
        "{info}"
    );
    let fmt = ok(&["ftl", "format", ps, "--op", "25"]);
    assert!(fmt.contains("(19.2 MiB)"), "{fmt}");
}
