//! `--timing PROFILE` on `zonestack session` and `zonestack serve`, through the real binary:
//! the timing profiles are listed, unknown names and geometries the model refuses are usage
//! errors (exit 2) without a panic, and a timed session takes at least as long as its profile
//! says while storing exactly the bytes an untimed session stores. Only lower bounds on wall
//! time are asserted: the machines these tests run on are shared and may be slow, never fast.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TIMING_PROFILES: [&str; 4] = ["zn540", "femu-mlc", "femu-tlc", "znand"];

mod common;
use common::{ok, zonestack};

/// Checks the exit code, that nothing panicked, and returns stderr.
fn check_failure(args: &[&str], o: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "zonestack {args:?}: {err}");
    assert!(
        !err.contains("panicked"),
        "zonestack {args:?} panicked: {err}"
    );
    err
}

fn fails(args: &[&str], code: i32) -> String {
    check_failure(args, &zonestack(args), code)
}

/// Runs `zonestack session` with `script` on stdin; returns its output and how long it ran.
fn session(args: &[&str], script: &str) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .arg("session")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zonestack session");
    // A session refused before it reads stdin closes the pipe under the writer.
    let written = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes());
    if let Err(e) = written {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "write script: {e}"
        );
    }
    let o = child.wait_with_output().expect("wait for the session");
    (o, started.elapsed())
}

fn create(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let p = dir.join(name);
    let mut args = vec!["device", "create", p.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    ok(&args);
    p
}

#[test]
fn device_profiles_lists_the_timing_profiles_after_the_geometry_profiles() {
    let out = ok(&["device", "profiles"]);
    let lines: Vec<&str> = out.lines().collect();
    // The geometry profiles keep their one-line format: name padded to 8, then a description.
    assert!(lines[0].starts_with("small    fast tests"), "{out}");
    assert!(lines[1].starts_with("zn540    Western Digital"), "{out}");
    let header = lines
        .iter()
        .position(|l| l.starts_with("timing"))
        .expect("a timing profile table");
    assert!(
        header > 1,
        "timing profiles come after the geometry ones: {out}"
    );
    for key in [
        "channels x dies",
        "page",
        "read",
        "program",
        "erase",
        "host MB/s",
    ] {
        assert!(lines[header].contains(key), "header lacks {key}: {out}");
    }
    let rows = &lines[header + 1..];
    for name in TIMING_PROFILES {
        let row = rows
            .iter()
            .find(|r| r.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("timing profile {name} is not listed: {out}"));
        assert!(row.contains(" us") && row.contains(" ms"), "{row}");
    }
    let zn540 = rows.iter().find(|r| r.starts_with("zn540")).expect("zn540");
    // 8 channels x 4 dies, 16 KiB pages, 3,265 MiB/s is 3,424 MB/s, an 8 MiB write buffer.
    for field in ["8 x 4", "16 KiB", "74.0 us", "950.6 us", "3424", "8 MiB"] {
        assert!(zn540.contains(field), "zn540 row lacks {field}: {zn540}");
    }
}

#[test]
fn unknown_timing_profiles_are_usage_errors_naming_the_valid_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = create(dir.path(), "dev.img", &["--zones", "8"]);
    let img_s = img.to_str().expect("path");
    let sock = format!("unix:{}", dir.path().join("nbd.sock").display());
    for args in [
        vec![
            "serve", "--memory", "16M", "--timing", "nosuch", "--listen", &sock,
        ],
        vec![
            "serve", "--device", img_s, "--timing", "nosuch", "--listen", &sock,
        ],
    ] {
        let err = fails(&args, 2);
        assert!(err.contains("unknown timing profile 'nosuch'"), "{err}");
        for name in TIMING_PROFILES {
            assert!(err.contains(name), "{args:?} does not name {name}: {err}");
        }
    }
    assert!(
        !dir.path().join("nbd.sock").exists(),
        "a refused serve must not bind its socket"
    );
    let args = ["session", img_s, "--timing", "nosuch"];
    let (o, _) = session(&args[1..], "zone report --count 1\n");
    let err = check_failure(&args, &o, 2);
    assert!(err.contains("unknown timing profile 'nosuch'"), "{err}");
    for name in TIMING_PROFILES {
        assert!(err.contains(name), "session does not name {name}: {err}");
    }
    assert!(o.stdout.is_empty(), "no line may run: {o:?}");
}

#[test]
fn a_geometry_the_timing_model_refuses_is_a_usage_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 300 active zones need more than the 4 MiB write buffer of femu-tlc and the 8 MiB one
    // of zn540 (a partial 16 or 32 KiB unit per zone plus one 2 MiB command).
    let img = create(
        dir.path(),
        "dev.img",
        &["--zones", "300", "--zone-size", "64K", "--max-active", "0"],
    );
    let img_s = img.to_str().expect("path");
    let sock = format!("unix:{}", dir.path().join("nbd.sock").display());
    let args = [
        "serve", "--device", img_s, "--timing", "zn540", "--listen", &sock,
    ];
    let err = fails(&args, 2);
    assert!(
        err.contains("write buffer") && err.contains("300 active zones"),
        "{err}"
    );
    let args = ["session", img_s, "--timing", "femu-tlc"];
    let (o, _) = session(&args[1..], "zone report --count 1\n");
    let err = check_failure(&args, &o, 2);
    assert!(
        err.contains("femu-tlc") && err.contains("write buffer"),
        "{err}"
    );
    // The image is untouched and still works without the timing model.
    let (o, _) = session(&[img_s], "zone report --count 1\n");
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("zcond: 1(em)"));
}

/// The blocks the script below leaves on the device: 16 blocks of 0x11 written before, then
/// block `i` filled with `i % 251`.
const PRE_WRITTEN_BLOCKS: u64 = 16;
const FUA_WRITES: u64 = 512;

fn fua_script() -> String {
    (PRE_WRITTEN_BLOCKS..PRE_WRITTEN_BLOCKS + FUA_WRITES)
        .map(|lba| {
            format!(
                "io write --lba {lba} --blocks 1 --pattern {} --fua\n",
                lba % 251
            )
        })
        .collect()
}

fn expected_bytes() -> Vec<u8> {
    let mut v = vec![0x11u8; PRE_WRITTEN_BLOCKS as usize * 4096];
    for lba in PRE_WRITTEN_BLOCKS..PRE_WRITTEN_BLOCKS + FUA_WRITES {
        v.extend(std::iter::repeat_n((lba % 251) as u8, 4096));
    }
    v
}

/// Writes the pre-written blocks without timing, runs the FUA script (with `timing` when
/// given), and returns how long the script's session ran and the bytes read back.
fn run_script(dir: &Path, name: &str, timing: Option<&str>) -> (Duration, Vec<u8>) {
    let img = create(dir, name, &["--zones", "4", "--zone-size", "1M"]);
    let img_s = img.to_str().expect("path");
    let pre = PRE_WRITTEN_BLOCKS.to_string();
    ok(&[
        "io",
        "write",
        img_s,
        "--lba",
        "0",
        "--blocks",
        &pre,
        "--pattern",
        "0x11",
    ]);
    let mut args = vec![img_s];
    if let Some(t) = timing {
        args.extend_from_slice(&["--timing", t]);
    }
    let (o, took) = session(&args, &fua_script());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(out.lines().count() as u64, FUA_WRITES, "{out}");
    assert!(out.lines().all(|l| l == "ok"), "{out}");
    // Reads may not cross a zone boundary: read zone by zone (256 blocks each).
    let back = dir.join(format!("{name}.bin"));
    let back_s = back.to_str().expect("path");
    let mut bytes = Vec::new();
    let mut lba = 0;
    while lba < PRE_WRITTEN_BLOCKS + FUA_WRITES {
        let n = (PRE_WRITTEN_BLOCKS + FUA_WRITES - lba).min(256);
        let (at, count) = (lba.to_string(), n.to_string());
        ok(&[
            "io", "read", img_s, "--lba", &at, "--blocks", &count, "--out", back_s,
        ]);
        bytes.extend(std::fs::read(&back).expect("read back"));
        lba += n;
    }
    (took, bytes)
}

#[test]
fn a_timed_session_takes_the_profiles_time_and_stores_the_same_bytes() {
    // Regression: the image already holds data when the timed session starts. The model
    // used to start with every zone empty, so the first write to zone 0 booked programs for
    // the blocks below its write pointer and the model's write-buffer count underflowed (a
    // panic) once they ended.
    let dir = tempfile::tempdir().expect("tempdir");
    let zn540 = emu::timing::timing_profile("zn540").expect("zn540 profile");
    let (timed, timed_bytes) = run_script(dir.path(), "timed.img", Some("zn540"));
    let (untimed, untimed_bytes) = run_script(dir.path(), "untimed.img", None);
    // A FUA write completes once its data is programmed; at one command at a time each of
    // them takes at least one page program.
    let floor = Duration::from_nanos(FUA_WRITES * zn540.page_program_ns);
    eprintln!("{FUA_WRITES} FUA writes: {timed:?} with zn540 timing (floor {floor:?}), {untimed:?} without");
    assert!(
        timed >= floor,
        "{FUA_WRITES} FUA writes took {timed:?} with zn540 timing, under the {floor:?} the profile implies"
    );
    let expected = expected_bytes();
    assert!(
        untimed_bytes == expected,
        "the untimed session stored other bytes"
    );
    assert!(
        timed_bytes == expected,
        "the timed session stored other bytes"
    );
}

#[test]
fn an_array_member_the_timing_model_refuses_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // As above: 300 active zones do not fit zn540's write buffer; each member is timed, so
    // the first member is the one refused.
    let members: Vec<PathBuf> = (0..3)
        .map(|i| {
            create(
                dir.path(),
                &format!("m{i}.img"),
                &["--zones", "300", "--zone-size", "256K", "--max-active", "0"],
            )
        })
        .collect();
    let names: Vec<&str> = members.iter().map(|p| p.to_str().expect("path")).collect();
    let mut create_array = vec!["raizn", "create"];
    create_array.extend_from_slice(&names);
    ok(&create_array);
    let list = names.join(",");
    let sock = format!("unix:{}", dir.path().join("nbd.sock").display());
    let args = [
        "serve", "--raizn", &list, "--timing", "zn540", "--listen", &sock,
    ];
    let err = fails(&args, 2);
    assert!(
        err.contains(&format!("member 0 ({})", names[0])) && err.contains("write buffer"),
        "{err}"
    );
    assert!(
        !dir.path().join("nbd.sock").exists(),
        "a refused serve must not bind its socket"
    );
    // The members were closed cleanly: the array opens without --timing.
    let mut status = vec!["raizn", "status"];
    status.extend_from_slice(&names);
    ok(&status);
}
