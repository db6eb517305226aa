//! `missing` in a ZapRAID member list: a failed member whose image is gone. Status, check and
//! fail open the array degraded (the member recorded failed), replace rebuilds it onto a new
//! image; format needs every image, and more members missing than parity blocks are refused.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok};

fn image(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let ps = p.to_str().expect("utf-8 path");
    ok(&["device", "create", ps, "--zones", "12", "--oob", "64"]);
    p
}

fn args<'a>(head: &[&'a str], m: &'a [String]) -> Vec<&'a str> {
    let mut a = head.to_vec();
    a.extend(m.iter().map(String::as_str));
    a
}

/// Four member images in `dir`, formatted as one array; their paths.
fn formatted(dir: &Path) -> Vec<String> {
    let m: Vec<String> = (0..4)
        .map(|i| image(dir, &format!("z{i}.img")).display().to_string())
        .collect();
    ok(&args(&["zapraid", "format", "--group", "16"], &m));
    m
}

#[test]
fn a_missing_member_is_recorded_failed_and_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = formatted(dir.path());
    // Format needs every image.
    let mut gone = m.clone();
    gone[1] = "missing".into();
    let err = fails(&args(&["zapraid", "format", "--group", "16"], &gone), 2);
    assert!(err.contains("member 1 is `missing`"), "{err}");

    let st = ok(&args(&["zapraid", "status"], &gone));
    assert!(st.contains("degraded: member 1 (missing) failed"), "{st}");
    let c = ok(&args(&["zapraid", "check"], &gone));
    assert!(c.starts_with("clean:"), "{c}");
    // The failure is recorded: the next open with the member still missing agrees.
    let st = ok(&args(&["zapraid", "status"], &gone));
    assert!(st.contains("degraded: member 1 (missing) failed"), "{st}");
    // A second member cannot go missing too (one parity block).
    let mut two = gone.clone();
    two[3] = "missing".into();
    let err = fails(&args(&["zapraid", "status"], &two), 1);
    assert!(err.contains('1') && err.contains('3'), "{err}");

    let new = image(dir.path(), "z4.img").display().to_string();
    let text = ok(&args(
        &[
            "zapraid", "replace", "--member", "1", "--with", &new, "--quiet",
        ],
        &gone,
    ));
    assert!(text.contains("member 1 rebuilt onto"), "{text}");
    let mut healed = m.clone();
    healed[1] = new;
    let st = ok(&args(&["zapraid", "status"], &healed));
    assert!(st.contains("all 4 healthy"), "{st}");
    let c = ok(&args(&["zapraid", "check"], &healed));
    assert!(c.starts_with("clean:"), "{c}");
}

/// Guards against a member missing at the open of an empty array being trusted again: the
/// open said it failed but never wrote that down (the state was taken for recorded), so a
/// later status with the member's original image given back reported every member healthy.
#[test]
fn a_member_missing_on_an_empty_array_stays_failed_when_given_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = formatted(dir.path());
    let mut gone = m.clone();
    gone[1] = "missing".into();
    let st = ok(&args(&["zapraid", "status"], &gone));
    assert!(st.contains("degraded: member 1 (missing) failed"), "{st}");
    for round in 0..2 {
        let st = ok(&args(&["zapraid", "status"], &m));
        assert!(
            st.contains(&format!("degraded: member 1 ({}) failed", m[1])),
            "round {round}: the stale member was taken back: {st}"
        );
    }
}
