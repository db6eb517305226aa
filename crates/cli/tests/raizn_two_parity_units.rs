//! `zonestack raizn create --parity 2`: an array with two parity units per stripe
//! (Reed-Solomon) through the real binary: check verifies both parity units, two members
//! may fail and every block still reads back with both images missing, a third failure is
//! refused, and three members are too few for two parity units.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok};

/// `n` empty member images of the small profile in `dir`.
fn members(dir: &Path, n: usize) -> Vec<PathBuf> {
    common::member_images(dir, "m", n, &["--zones", "8"])
}

use common::path_str as s;

fn with_members<'a>(head: &[&'a str], m: &'a [PathBuf]) -> Vec<&'a str> {
    let mut args = head.to_vec();
    args.extend(m.iter().map(|p| s(p)));
    args
}

#[test]
fn two_members_may_fail_and_every_block_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4);
    ok(&with_members(&["raizn", "create", "--parity", "2"], &m));
    let all = m.iter().map(|p| s(p)).collect::<Vec<_>>().join(",");
    // Two complete stripes (2 data units x 16 blocks each) and part of a third.
    ok(&[
        "io",
        "write",
        "--raizn",
        &all,
        "--lba",
        "0",
        "--blocks",
        "70",
        "--pattern",
        "0x6d",
    ]);
    let st = ok(&with_members(&["raizn", "status"], &m));
    assert!(st.contains("2 parity"), "{st}");
    let clean = ok(&with_members(&["raizn", "check"], &m));
    assert!(clean.contains("clean: "), "{clean}");
    for k in ["1", "2"] {
        let text = ok(&with_members(&["raizn", "fail", "--member", k], &m));
        assert!(text.contains("degraded"), "{text}");
    }
    let err = fails(&with_members(&["raizn", "fail", "--member", "0"], &m), 1);
    assert!(err.contains("survives 2"), "{err}");
    let gone = format!("{},missing,missing,{}", s(&m[0]), s(&m[3]));
    let got = common::read_array(&gone, 70, &dir.path().join("read.bin"));
    assert_eq!(got.len(), 70 * 4096);
    assert!(
        got.iter().all(|b| *b == 0x6d),
        "a doubly degraded read differs"
    );
}

#[test]
fn two_parity_units_need_four_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 3);
    let err = fails(&with_members(&["raizn", "create", "--parity", "2"], &m), 1);
    assert!(err.contains("at least 4 members"), "{err}");
}
