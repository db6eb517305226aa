//! Arguments that cannot mean anything are refused before any device command runs, as usage
//! errors (exit 2) whose message names what was wrong.

mod common;
use common::{fails, ok};

#[test]
fn an_empty_unix_socket_path_is_refused() {
    // `--listen unix:` bound an abstract socket with an empty name that no client could
    // reach, and the server ran as if all was well.
    let err = fails(&["serve", "--memory", "1M", "--listen", "unix:"], 2);
    assert!(err.contains("has no socket path"), "{err}");
}

#[test]
fn zero_blocks_is_refused_by_every_io_command() {
    // `--blocks 0` reached the device and failed as a device error (exit 1).
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("dev.img");
    let ps = p.to_str().expect("utf-8 path");
    ok(&["device", "create", ps]);
    for args in [
        &["io", "read", ps, "--lba", "0", "--blocks", "0"][..],
        &[
            "io",
            "write",
            ps,
            "--lba",
            "0",
            "--blocks",
            "0",
            "--pattern",
            "1",
        ],
        &[
            "io",
            "append",
            ps,
            "--zone",
            "0",
            "--blocks",
            "0x0",
            "--pattern",
            "1",
        ],
        &["io", "zeroes", ps, "--lba", "0", "--blocks", "0"],
    ] {
        let err = fails(args, 2);
        assert!(
            err.contains("--blocks") && err.contains("at least 1 block"),
            "{args:?}: {err}"
        );
    }
    ok(&["io", "read", ps, "--lba", "0", "--blocks", "1"]);
}

#[test]
fn a_zone_append_limit_above_the_zone_capacity_is_refused() {
    // `device create --zasl` accepted a limit larger than a zone, advertising appends the
    // device could never complete.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("dev.img");
    let ps = p.to_str().expect("utf-8 path");
    let err = fails(
        &["device", "create", ps, "--profile", "small", "--zasl", "1M"],
        2,
    );
    assert!(
        err.contains("--zasl 1 MiB (256 blocks) exceeds the zone capacity of 768 KiB (192 blocks)"),
        "{err}"
    );
    assert!(!p.exists(), "a refused create leaves no image");
    let err = fails(
        &[
            "device",
            "create",
            ps,
            "--zone-size",
            "64K",
            "--zasl",
            "128K",
        ],
        2,
    );
    assert!(err.contains("zone capacity of 64 KiB"), "{err}");
    ok(&[
        "device",
        "create",
        ps,
        "--profile",
        "small",
        "--zasl",
        "768K",
    ]);
}
