//! `zonestack raizn create|status|fail|check` and the zone and I/O commands on an array
//! (`--raizn a.img,b.img,c.img`), driven through the real binary on small images.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok};

/// Three empty member images of the small profile in `dir`.
fn members(dir: &Path) -> Vec<PathBuf> {
    common::member_images(dir, "m", 3, &["--zones", "8"])
}

use common::path_str as s;

fn list(m: &[PathBuf]) -> String {
    m.iter().map(|p| s(p)).collect::<Vec<_>>().join(",")
}

fn create(m: &[PathBuf]) -> String {
    let mut args = vec!["raizn", "create"];
    args.extend(m.iter().map(|p| s(p)));
    ok(&args)
}

fn with_members<'a>(head: &[&'a str], m: &'a [PathBuf]) -> Vec<&'a str> {
    let mut args = head.to_vec();
    args.extend(m.iter().map(|p| s(p)));
    args
}

#[test]
fn create_refuses_members_holding_data_and_names_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    ok(&[
        "io",
        "write",
        s(&m[1]),
        "--lba",
        "0",
        "--blocks",
        "1",
        "--pattern",
        "1",
    ]);
    let err = fails(&with_members(&["raizn", "create"], &m), 1);
    assert!(
        err.contains("member 1") && err.contains("m1.img") && err.contains("zone 0 is"),
        "{err}"
    );
    assert!(err.contains("--force"), "{err}");
    let text = ok(&with_members(&["raizn", "create", "--force"], &m));
    assert!(text.contains("created RAIZN array"), "{text}");
    // An image of an array is refused too, naming the array it belongs to.
    let err = fails(&with_members(&["raizn", "create"], &m), 1);
    assert!(err.contains("is member 0 of RAIZN array"), "{err}");
}

#[test]
fn create_refuses_members_of_different_geometry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut m = members(dir.path());
    let odd = dir.path().join("odd.img");
    ok(&["device", "create", s(&odd), "--zones", "9"]);
    m[2] = odd;
    let err = fails(&with_members(&["raizn", "create"], &m), 1);
    assert!(err.contains("member 2") && err.contains("odd.img"), "{err}");
}

#[test]
fn commands_refuse_a_member_of_another_array() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    let other = common::member_images(dir.path(), "n", 3, &["--zones", "8"]);
    create(&m);
    create(&other);
    // Member 1 named by an image of the other array.
    let mixed = vec![m[0].clone(), other[1].clone(), m[2].clone()];
    // Status shows it in its report, then exits 1 with the reason on stderr; commands that
    // open the array refuse it, naming the image.
    let o = common::zonestack(&with_members(&["raizn", "status"], &mixed));
    let (text, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(1), "{text}\n{err}");
    assert!(
        text.contains("n1.img not a member: it belongs to array"),
        "{text}"
    );
    assert!(
        err.contains("member 1 (") && err.contains("n1.img): not a member: it belongs to array"),
        "{err}"
    );
    // The array's own members alone: status exits 0.
    ok(&with_members(&["raizn", "status"], &m));
    // Check counts it a problem (named on its output) and exits 1.
    let err = fails(&with_members(&["raizn", "check"], &mixed), 1);
    assert!(err.contains(": 1 problem;"), "{err}");
    let err = fails(
        &[
            "io",
            "read",
            "--raizn",
            &list(&mixed),
            "--lba",
            "0",
            "--blocks",
            "1",
        ],
        1,
    );
    assert!(
        err.contains("n1.img") && err.contains("another array"),
        "{err}"
    );
}

#[test]
fn zone_and_io_commands_address_the_array() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    create(&m);
    let a = list(&m);
    // Logical zones are two members' worth of data: 2 x 192 writable blocks.
    let report = ok(&["zone", "report", "--raizn", &a, "--json"]);
    assert!(report.contains("\"capacity\":384"), "{report}");
    ok(&[
        "io",
        "write",
        "--raizn",
        &a,
        "--lba",
        "0",
        "--blocks",
        "40",
        "--pattern",
        "0xab",
    ]);
    let lba = ok(&[
        "io",
        "append",
        "--raizn",
        &a,
        "--zone",
        "0",
        "--blocks",
        "2",
        "--pattern",
        "0xcd",
    ]);
    assert_eq!(lba.trim(), "40");
    let out = dir.path().join("read.bin");
    ok(&[
        "io",
        "read",
        "--raizn",
        &a,
        "--lba",
        "38",
        "--blocks",
        "4",
        "--out",
        s(&out),
    ]);
    let got = std::fs::read(&out).expect("read back");
    assert!(got[..8192].iter().all(|b| *b == 0xab), "first two blocks");
    assert!(got[8192..].iter().all(|b| *b == 0xcd), "appended blocks");
    let report = ok(&["zone", "report", "--raizn", &a, "--count", "1"]);
    assert!(report.contains("wptr 0x00002a"), "{report}");
    ok(&["zone", "finish", "--raizn", &a, "--zone", "0"]);
    let st = ok(&with_members(&["raizn", "status"], &m));
    assert!(st.contains("zone 0: full"), "{st}");
    // A member list with a typo is refused; it must not become a failed member.
    let typo = format!("{},{},nope.img", s(&m[0]), s(&m[1]));
    let err = fails(&["zone", "report", "--raizn", &typo], 1);
    assert!(err.contains("nope.img does not exist"), "{err}");
}

#[test]
fn status_shows_members_geometry_and_zones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    create(&m);
    let a = list(&m);
    ok(&[
        "io",
        "write",
        "--raizn",
        &a,
        "--lba",
        "0",
        "--blocks",
        "8",
        "--pattern",
        "7",
    ]);
    let st = ok(&with_members(&["raizn", "status"], &m));
    for want in [
        "(optimal)",
        "member 0:",
        "m2.img ok",
        "5 zones of 512 blocks (384 writable)",
        "stripe unit:    64 KiB",
        "log zones:      1 per member",
        "zone 0: ",
        "wp 8",
    ] {
        assert!(st.contains(want), "missing {want:?} in:\n{st}");
    }
    let js = ok(&with_members(&["raizn", "status", "--json"], &m));
    let v: serde_json::Value = serde_json::from_str(&js).expect("json");
    assert_eq!(v["members"][1]["state"], "ok");
    assert_eq!(v["stripe_unit"], 65536);
    assert_eq!(v["log_zones"], 1);
    assert_eq!(v["zone_states"][0]["wp"], 8);
}

#[test]
fn fail_is_durable_and_reads_rebuild_the_failed_member() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    create(&m);
    let a = list(&m);
    ok(&[
        "io",
        "write",
        "--raizn",
        &a,
        "--lba",
        "0",
        "--blocks",
        "64",
        "--pattern",
        "0x5c",
    ]);
    let text = ok(&with_members(&["raizn", "fail", "--member", "1"], &m));
    assert!(
        text.contains("member 1") && text.contains("degraded"),
        "{text}"
    );
    let st = ok(&with_members(&["raizn", "status"], &m));
    assert!(
        st.contains("m1.img failed") && st.contains("(degraded)"),
        "{st}"
    );
    // Member 1's image may now go: `missing` stands for it.
    let gone = format!("{},missing,{}", s(&m[0]), s(&m[2]));
    let got = common::read_array(&gone, 64, &dir.path().join("read.bin"));
    assert!(got.iter().all(|b| *b == 0x5c), "degraded read differs");
    let st = ok(&["raizn", "status", s(&m[0]), "missing", s(&m[2])]);
    assert!(st.contains("missing absent"), "{st}");
    // A second failure would lose the data: refused, naming both members.
    let err = fails(&with_members(&["raizn", "fail", "--member", "2"], &m), 1);
    assert!(
        err.contains("member 1") && err.contains("member 2"),
        "{err}"
    );
    let err = fails(&with_members(&["raizn", "fail", "--member", "3"], &m), 2);
    assert!(err.contains("3 members"), "{err}");
}

#[test]
fn check_verifies_parity_and_names_a_bad_stripe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    create(&m);
    let a = list(&m);
    // Two complete stripes (2 x 32 blocks) and part of a third in logical zone 0.
    ok(&[
        "io",
        "write",
        "--raizn",
        &a,
        "--lba",
        "0",
        "--blocks",
        "70",
        "--pattern",
        "0x3e",
    ]);
    let clean = ok(&with_members(&["raizn", "check"], &m));
    assert!(
        clean.contains("clean: 2 complete stripes verified"),
        "{clean}"
    );
    // Member 0's copy of logical zone 0 (its zone 3, after 3 metadata zones) is rewritten
    // with other bytes: its units no longer match the parity.
    common::rewrite_first_data_zone(s(&m[0]));
    let o = common::zonestack(&with_members(&["raizn", "check"], &m));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("zone 0 stripe 0: parity"), "{text}");
    assert!(text.contains("zone 0 stripe 1: parity"), "{text}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("2 problems"));
}

/// `--log-zones`: a pool of K log zones per member, shown by `status` and used by the
/// commands that open the array; `auto` sizes it from the geometry, or refuses with the
/// figures when the members have too few zones.
#[test]
fn create_takes_a_pool_of_log_zones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path());
    let text = ok(&with_members(&["raizn", "create", "--log-zones", "2"], &m));
    assert!(text.contains("2 log zone(s) per member"), "{text}");
    let status = ok(&with_members(&["raizn", "status"], &m));
    assert!(status.contains("log zones:      2 per member"), "{status}");
    let arr = list(&m);
    let write = [
        "io",
        "write",
        "--raizn",
        &arr,
        "--lba",
        "0",
        "--blocks",
        "3",
        "--pattern",
        "0x5c",
    ];
    ok(&write);
    let out = dir.path().join("read.bin");
    ok(&[
        "io",
        "read",
        "--raizn",
        &arr,
        "--lba",
        "0",
        "--blocks",
        "4",
        "--out",
        s(&out),
    ]);
    let got = std::fs::read(&out).expect("read back");
    assert!(got[..3 * 4096].iter().all(|b| *b == 0x5c), "written blocks");
    assert!(
        got[3 * 4096..].iter().all(|b| *b == 0),
        "past the write pointer"
    );
    // Eight zones cannot hold the pool the sizing asks for.
    let small = common::member_images(dir.path(), "s", 3, &["--zones", "8"]);
    let err = fails(
        &with_members(&["raizn", "create", "--log-zones", "auto"], &small),
        1,
    );
    assert!(
        err.contains("log zones per member ((K - 1) C >= R + P") && err.contains("the 2 a quarter"),
        "{err}"
    );
    // With enough zones it creates the least pool that holds the live content.
    let big = common::member_images(dir.path(), "b", 3, &["--zones", "64"]);
    let text = ok(&with_members(
        &["raizn", "create", "--log-zones", "auto"],
        &big,
    ));
    let k: u32 = text
        .rsplit(", ")
        .next()
        .and_then(|t| t.split(' ').next())
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("no K in {text:?}"));
    assert!((2..=16).contains(&k), "{text}");
    let status = ok(&with_members(&["raizn", "status"], &big));
    assert!(
        status.contains(&format!("log zones:      {k} per member")),
        "{status}"
    );
    let err = fails(
        &with_members(&["raizn", "create", "--log-zones", "0"], &big),
        2,
    );
    assert!(err.contains("--log-zones"), "{err}");
}

/// Without `--log-zones`, create takes the sized pool where the members have the zones for
/// it, and one log zone otherwise, saying why on the created line.
#[test]
fn create_sizes_the_log_by_default_where_the_members_allow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = common::member_images(dir.path(), "s", 3, &["--zones", "8"]);
    let text = ok(&with_members(&["raizn", "create"], &small));
    assert!(
        text.contains("1 log zone(s) per member; one log zone per member: the member log needs"),
        "{text}"
    );
    let big = common::member_images(dir.path(), "b", 3, &["--zones", "64"]);
    let text = ok(&with_members(&["raizn", "create"], &big));
    let auto = common::member_images(dir.path(), "a", 3, &["--zones", "64"]);
    let sized = ok(&with_members(
        &["raizn", "create", "--log-zones", "auto"],
        &auto,
    ));
    let k = |t: &str| {
        t.split(" log zone(s)")
            .next()
            .and_then(|h| h.rsplit(' ').next())
            .map(str::to_owned)
    };
    assert_eq!(k(&text), k(&sized), "{text} / {sized}");
    assert_ne!(k(&text).as_deref(), Some("1"), "{text}");
    assert!(!text.contains("one log zone per member:"), "{text}");
}
