//! `zonestack raizn check` on a degraded array. It used to verify nothing as soon as a
//! member was missing or failed and exit 1 calling the absent member a problem; now it says
//! the array is degraded (exit 0 when what is left is sound), reads every complete stripe's
//! surviving units, checks them against the parity still left (two parity units, one member
//! lost), names a stripe whose survivors disagree, and calls an array with more members
//! lost than its parity covers failed.

mod common;

use std::path::{Path, PathBuf};

use common::path_str as s;
use common::{ok, zonestack};

fn with_members<'a>(head: &[&'a str], m: &'a [&'a str]) -> Vec<&'a str> {
    let mut args = head.to_vec();
    args.extend_from_slice(m);
    args
}

/// An array of `n` members with `parity` parity units holding 70 blocks of logical zone 0.
fn array(dir: &Path, n: usize, parity: &str) -> Vec<PathBuf> {
    let m = common::member_images(dir, "m", n, &["--zones", "8"]);
    let names: Vec<&str> = m.iter().map(|p| s(p)).collect();
    ok(&with_members(
        &["raizn", "create", "--parity", parity],
        &names,
    ));
    ok(&[
        "io",
        "write",
        "--raizn",
        &names.join(","),
        "--lba",
        "0",
        "--blocks",
        "70",
        "--pattern",
        "0x3e",
    ]);
    m
}

#[test]
fn one_parity_unit_and_one_member_lost_reads_what_is_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = array(dir.path(), 3, "1");
    let gone = [s(&m[0]), "missing", s(&m[2])];
    let text = ok(&with_members(&["raizn", "check"], &gone));
    assert!(
        text.contains("degraded: member 1 (missing) absent"),
        "{text}"
    );
    assert!(text.contains("no redundancy is left"), "{text}");
    assert!(
        text.contains("clean (degraded): 0 complete stripes verified, 2 complete stripes read"),
        "{text}"
    );
    // Recorded failed rather than missing: the same verdict.
    let all: Vec<&str> = m.iter().map(|p| s(p)).collect();
    ok(&with_members(&["raizn", "fail", "--member", "1"], &all));
    let text = ok(&with_members(&["raizn", "check"], &all));
    assert!(
        text.contains("member 1 (") && text.contains("failed"),
        "{text}"
    );
    assert!(text.contains("clean (degraded)"), "{text}");
    // One more member lost than the parity covers: failed, exit 1.
    let two = [s(&m[0]), "missing", "missing"];
    let o = zonestack(&with_members(&["raizn", "check"], &two));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("array failed: 2 member(s) lost"), "{out}");
}

#[test]
fn two_parity_units_and_one_member_lost_verifies_the_survivors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = array(dir.path(), 4, "2");
    let gone = [s(&m[0]), s(&m[1]), "missing", s(&m[3])];
    let text = ok(&with_members(&["raizn", "check"], &gone));
    assert!(text.contains("1 parity unit(s) per stripe left"), "{text}");
    assert!(
        text.contains("clean (degraded): 2 complete stripes verified"),
        "{text}"
    );
    // Member 0's copy of logical zone 0 (its zone 3) is rewritten with other bytes: the
    // survivors of both complete stripes no longer agree.
    common::rewrite_first_data_zone(s(&m[0]));
    let o = zonestack(&with_members(&["raizn", "check"], &gone));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("zone 0 stripe 0: parity"), "{out}");
    assert!(out.contains("zone 0 stripe 1: parity"), "{out}");
    assert!(out.contains("do not agree"), "{out}");
    // With two members lost nothing is left to verify against, and the bad bytes go unseen:
    // check says the stripes were only read.
    let two = [s(&m[0]), "missing", "missing", s(&m[3])];
    let text = ok(&with_members(&["raizn", "check"], &two));
    assert!(
        text.contains("2 complete stripes read without redundancy"),
        "{text}"
    );
}
