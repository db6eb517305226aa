//! `zonestack raizn rebuild`: a replace that stopped before its end (here after two zones, as
//! if the process was interrupted) leaves the array degraded; `rebuild` over the member list
//! naming the new image in its place finishes it, and the data then reads back through the
//! new member. On a whole array it has nothing to do; with the member missing, or an image
//! that is not the array's, it refuses with what to do instead.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok, zonestack};

use common::path_str as s;

fn image(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    ok(&["device", "create", s(&p), "--zones", "8"]);
    p
}

/// Writes `blocks` blocks of `pattern` at `lba` of the array `a`.
fn write(a: &str, lba: u64, blocks: u64, pattern: u8) {
    ok(&[
        "io",
        "write",
        "--raizn",
        a,
        "--lba",
        &lba.to_string(),
        "--blocks",
        &blocks.to_string(),
        "--pattern",
        &pattern.to_string(),
    ]);
}

/// Checks that `blocks` blocks at `lba` of the array `a` hold `pattern`.
fn check(dir: &Path, a: &str, lba: u64, blocks: u64, pattern: u8) {
    let out = dir.join("read.bin");
    ok(&[
        "io",
        "read",
        "--raizn",
        a,
        "--lba",
        &lba.to_string(),
        "--blocks",
        &blocks.to_string(),
        "--out",
        s(&out),
    ]);
    let got = std::fs::read(&out).expect("read back");
    assert!(
        got.iter().all(|x| *x == pattern),
        "LBA {lba} +{blocks} of {a} reads wrong"
    );
}

#[test]
fn rebuild_finishes_a_replace_that_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m: Vec<PathBuf> = (0..3)
        .map(|i| image(dir.path(), &format!("m{i}.img")))
        .collect();
    let (m0, m1, m2) = (s(&m[0]), s(&m[1]), s(&m[2]));
    ok(&["raizn", "create", m0, m1, m2]);
    let a = [m0, m1, m2].join(",");
    // Logical zones hold 384 blocks: zones 0, 1 and 3 get data, zone 0 and 1 full.
    for (zone, pattern) in [(0u64, 0x31u8), (1, 0x32)] {
        for half in 0..3 {
            write(&a, zone * 512 + half * 128, 128, pattern);
        }
    }
    write(&a, 3 * 512, 100, 0x33);
    ok(&["raizn", "fail", "--member", "1", m0, m1, m2]);
    let new = image(dir.path(), "new.img");
    let nw = s(&new);
    let text = ok(&[
        "raizn",
        "replace",
        "--member",
        "1",
        "--with",
        nw,
        "--stop-after-zones",
        "2",
        m0,
        m1,
        m2,
    ]);
    assert!(
        text.contains("stopped before its end")
            && text.contains(&format!("zonestack raizn rebuild {m0} {nw} {m2}")),
        "{text}"
    );
    let st = ok(&["raizn", "status", m0, nw, m2]);
    assert!(st.contains("(degraded)"), "{st}");
    // The array is used while degraded, between the two halves of the rebuild.
    write(&[m0, nw, m2].join(","), 3 * 512 + 100, 20, 0x34);
    let o = zonestack(&["raizn", "rebuild", m0, nw, m2]);
    let (text, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(text.contains("rebuilt; the array is whole"), "{text}");
    assert!(err.contains("100%, done"), "{err}");
    // Active zones go first: the replace rebuilt zone 3 and then the full zone 0 before it
    // stopped. Zone 0 is kept, not redone; zone 3 took writes meanwhile and is redone.
    assert!(err.contains("1 zone(s) (192 member blocks) kept"), "{err}");
    let st = ok(&["raizn", "status", m0, nw, m2]);
    assert!(st.contains("(optimal)"), "{st}");
    let text = ok(&["raizn", "rebuild", m0, nw, m2]);
    assert!(text.contains("nothing to rebuild"), "{text}");
    // Member 0 gone: everything reads back through the rebuilt member.
    let gone = ["missing", nw, m2].join(",");
    check(dir.path(), &gone, 0, 384, 0x31);
    check(dir.path(), &gone, 512, 384, 0x32);
    check(dir.path(), &gone, 3 * 512, 100, 0x33);
    check(dir.path(), &gone, 3 * 512 + 100, 20, 0x34);
    // Using the array without member 0 recorded it failed; its own image back is rebuilt.
    let text = ok(&["raizn", "rebuild", "--quiet", m0, nw, m2]);
    assert!(
        text.contains("member 0") && text.contains("whole"),
        "{text}"
    );
    check(dir.path(), &[m0, nw, "missing"].join(","), 0, 384, 0x31);
}

#[test]
fn rebuild_refuses_a_missing_member_and_a_non_replacement() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m: Vec<PathBuf> = (0..3)
        .map(|i| image(dir.path(), &format!("m{i}.img")))
        .collect();
    let (m0, m1, m2) = (s(&m[0]), s(&m[1]), s(&m[2]));
    ok(&["raizn", "create", m0, m1, m2]);
    write(&[m0, m1, m2].join(","), 0, 64, 0x41);
    ok(&["raizn", "fail", "--member", "1", m0, m1, m2]);
    let err = fails(&["raizn", "rebuild", m0, "missing", m2], 1);
    assert!(
        err.contains("member 1") && err.contains("raizn replace --member 1"),
        "{err}"
    );
    let blank = image(dir.path(), "blank.img");
    let err = fails(&["raizn", "rebuild", m0, s(&blank), m2], 1);
    assert!(err.contains("blank.img) is not a RAIZN member"), "{err}");
}
