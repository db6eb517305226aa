//! `zonestack raizn replace`: a new image takes a failed member's place and is rebuilt, with
//! progress on stderr; afterwards the array is whole and, with another member gone, its data
//! reads back from the rebuilt image. Images holding data, the array's own members, a wrong
//! geometry and a healthy array are refused with the cause.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok, zonestack};

use common::path_str as s;

fn image(dir: &Path, name: &str, zones: &str) -> PathBuf {
    let p = dir.join(name);
    ok(&["device", "create", s(&p), "--zones", zones]);
    p
}

fn with_members<'a>(head: &[&'a str], m: &'a [PathBuf]) -> Vec<&'a str> {
    let mut args = head.to_vec();
    args.extend(m.iter().map(|p| s(p)));
    args
}

fn list(m: &[&str]) -> String {
    m.join(",")
}

/// An array of three members holding a full zone and a partly written one, member 1 failed.
fn degraded_array(dir: &Path) -> Vec<PathBuf> {
    let m: Vec<PathBuf> = (0..3)
        .map(|i| image(dir, &format!("m{i}.img"), "8"))
        .collect();
    ok(&with_members(&["raizn", "create"], &m));
    let a = list(&[s(&m[0]), s(&m[1]), s(&m[2])]);
    for (lba, pattern) in [("0", "0x21"), ("128", "0x22"), ("256", "0x23")] {
        ok(&[
            "io",
            "write",
            "--raizn",
            &a,
            "--lba",
            lba,
            "--blocks",
            "128",
            "--pattern",
            pattern,
        ]);
    }
    ok(&[
        "io",
        "write",
        "--raizn",
        &a,
        "--lba",
        "512",
        "--blocks",
        "77",
        "--pattern",
        "0x24",
    ]);
    ok(&with_members(&["raizn", "fail", "--member", "1"], &m));
    m
}

/// Reads logical blocks 0..384 and 512..589 of the array `a` and checks the patterns `degraded_array`
/// wrote.
fn verify(dir: &Path, a: &str) {
    let out = dir.join("read.bin");
    for (lba, blocks, pattern) in [("0", 384usize, None), ("512", 77, Some(0x24u8))] {
        ok(&[
            "io",
            "read",
            "--raizn",
            a,
            "--lba",
            lba,
            "--blocks",
            &blocks.to_string(),
            "--out",
            s(&out),
        ]);
        let got = std::fs::read(&out).expect("read back");
        assert_eq!(got.len(), blocks * 4096);
        for (b, block) in got.chunks(4096).enumerate() {
            let want = pattern.unwrap_or(0x21 + (b / 128) as u8);
            assert!(
                block.iter().all(|x| *x == want),
                "block {b} from LBA {lba} reads wrong"
            );
        }
    }
}

#[test]
fn replace_rebuilds_and_the_new_member_serves_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = degraded_array(dir.path());
    let new = image(dir.path(), "new.img", "8");
    let args = with_members(
        &["raizn", "replace", "--member", "1", "--with", s(&new)],
        &m,
    );
    let o = zonestack(&args);
    let (text, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(
        text.contains("the array is whole") && text.contains("new.img"),
        "{text}"
    );
    // stderr is a pipe here: plain lines, the first at the start, the last at the end.
    assert!(
        err.contains("rebuild of member 1 (") && err.contains("m1.img): "),
        "{err}"
    );
    assert!(err.contains("100%, done"), "{err}");
    let now = [s(&m[0]), s(&new), s(&m[2])];
    let st = ok(&["raizn", "status", now[0], now[1], now[2]]);
    assert!(st.contains("(optimal)"), "{st}");
    // Replacing again is refused: nothing is failed.
    let again = image(dir.path(), "again.img", "8");
    let err = fails(
        &[
            "raizn",
            "replace",
            "--member",
            "1",
            "--with",
            s(&again),
            now[0],
            now[1],
            now[2],
        ],
        1,
    );
    assert!(err.contains("not degraded"), "{err}");
    // Member 0 gone: its data and parity are rebuilt from the new member and member 2.
    verify(dir.path(), &list(&["missing", now[1], now[2]]));
}

#[test]
fn replace_refuses_data_own_members_and_other_geometries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = degraded_array(dir.path());
    let replace = |new: &Path, extra: &[&str]| {
        let mut args = vec!["raizn", "replace", "--member", "1", "--with", s(new)];
        args.extend_from_slice(extra);
        let mut a: Vec<String> = args.iter().map(|x| x.to_string()).collect();
        a.extend(m.iter().map(|p| s(p).to_string()));
        a
    };
    let run = |a: &[String], code: i32| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        fails(&a, code)
    };
    // An image holding data.
    let used = image(dir.path(), "used.img", "8");
    ok(&[
        "io",
        "write",
        s(&used),
        "--lba",
        "0",
        "--blocks",
        "1",
        "--pattern",
        "9",
    ]);
    let err = run(&replace(&used, &[]), 1);
    assert!(
        err.contains("used.img holds data") && err.contains("--force"),
        "{err}"
    );
    // A member of the array itself.
    let err = run(&replace(&m[2], &[]), 2);
    assert!(err.contains("member 2 of the array itself"), "{err}");
    // Another geometry.
    let odd = image(dir.path(), "odd.img", "9");
    let err = run(&replace(&odd, &[]), 1);
    assert!(err.contains("geometry"), "{err}");
    // Not the failed member.
    let fresh = image(dir.path(), "fresh.img", "8");
    let mut a = replace(&fresh, &[]);
    a[3] = "2".into();
    let err = run(&a, 1);
    assert!(err.contains("m1.img) is the failed member"), "{err}");
    // With --force the used image is taken; --quiet prints no progress.
    let a = replace(&used, &["--force", "--quiet"]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = zonestack(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    verify(dir.path(), &list(&[s(&m[0]), s(&used), "missing"]));
}

#[test]
fn replace_draws_a_progress_bar_on_a_terminal() {
    // `script` runs the command on a pseudo-terminal, as a user at a shell would.
    common::require("script", "bsdutils");
    let dir = tempfile::tempdir().expect("tempdir");
    let m = degraded_array(dir.path());
    let new = image(dir.path(), "new.img", "8");
    let mut cmd = format!(
        "{} raizn replace --member 1 --with {}",
        env!("CARGO_BIN_EXE_zonestack"),
        s(&new)
    );
    for p in &m {
        cmd += &format!(" {}", s(p));
    }
    let out = common::run(std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]));
    // The bar's message names the member and the zone it is at ...
    assert!(
        out.contains("rebuild of member 1 ("),
        "no progress bar: {out}"
    );
    assert!(out.contains("(zone "), "no progress bar: {out}");
    // ... and it is a bar, not the plain lines a pipe gets.
    assert!(!out.contains("100%, done"), "{out}");
    assert!(out.contains("the array is whole"), "{out}");
}
