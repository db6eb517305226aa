//! The image behaves like a drive that stays powered between `zonestack` commands: zones a
//! command opened are open for the next one; only `device restart` (or a `session`'s
//! `power-loss`) closes them; and a process killed with SIGKILL is still a power loss.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{fails, ok};
use serde_json::Value;

fn states(img: &str) -> Vec<(String, u64)> {
    let v: Value = serde_json::from_str(&ok(&["zone", "report", img, "--json"])).expect("json");
    let zones = v["zones"].as_array().cloned().unwrap_or_default();
    zones
        .iter()
        .map(|z| {
            let state = z["state"].as_str().unwrap_or("?").to_string();
            let wp = z["wp"].as_u64().unwrap_or(u64::MAX) - z["start"].as_u64().unwrap_or(0);
            (state, wp)
        })
        .collect()
}

fn device(dir: &tempfile::TempDir) -> String {
    let img = dir.path().join("zns.img");
    let img = img.to_str().expect("utf-8 path").to_string();
    ok(&["device", "create", &img, "--zones", "8"]);
    img
}

// The bug this guards against: every command reopened the image with the restart rule, so
// `zone open --zone 2` then `zone close --zone 2` failed with Invalid Zone State Transition.
#[test]
fn open_then_close_as_separate_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = device(&dir);
    let opened = ok(&["zone", "open", &img, "--zone", "2"]);
    assert_eq!(opened, "zone 2: empty -> explicitly_opened\n");
    assert_eq!(states(&img)[2].0, "explicitly_opened");
    ok(&["zone", "close", &img, "--zone", "2"]);
    assert_eq!(states(&img)[2].0, "closed");
}

#[test]
fn open_all_then_report_shows_them_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = device(&dir);
    for z in [1u64, 3] {
        let lba = (z * 256).to_string();
        ok(&[
            "io",
            "write",
            &img,
            "--lba",
            &lba,
            "--blocks",
            "2",
            "--pattern",
            "7",
        ]);
    }
    // The writes opened zones 1 and 3 implicitly; they are still open in the next command.
    assert_eq!(states(&img)[1], ("implicitly_opened".into(), 2));
    // Select All opens only Closed zones, so close them first; the output says so.
    let none = ok(&["zone", "open", &img, "--all"]);
    assert!(
        none.contains("open --all: 0 zones changed (open selects closed zones)"),
        "{none}"
    );
    ok(&["zone", "close", &img, "--all"]);
    let out = ok(&["zone", "open", &img, "--all"]);
    assert!(out.contains("open --all: 2 zones changed"), "{out}");
    let s = states(&img);
    assert_eq!(s[1], ("explicitly_opened".into(), 2));
    assert_eq!(s[3], ("explicitly_opened".into(), 2));
    assert_eq!(s[2].0, "empty");
    // Until asked for a restart.
    ok(&["device", "restart", &img]);
    let s = states(&img);
    assert_eq!(s[1], ("closed".into(), 2));
    assert_eq!(s[3], ("closed".into(), 2));
    // Closing a Closed zone changes nothing, and says nothing.
    assert_eq!(ok(&["zone", "close", &img, "--zone", "1"]), "");
    let err = fails(&["zone", "finish", &img, "--zone", "9"], 2);
    assert!(err.contains("zone 9 does not exist"), "{err}");
}

#[test]
fn a_killed_process_is_still_a_power_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = device(&dir);
    ok(&[
        "io",
        "write",
        &img,
        "--lba",
        "256",
        "--blocks",
        "2",
        "--pattern",
        "7",
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(["session", &img])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn session");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"zone open --zone 2\nio write --lba 768 --blocks 4 --pattern 9\nzone report --count 1\n")
        .expect("send lines");
    stdin.flush().expect("flush");
    // The report's legend line is printed after the lines before it ran.
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    while !line.starts_with("zcond:") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "session ended early"
        );
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    let s = states(&img);
    // Zone 1 was written and cleanly closed by the earlier command: flushed, kept, and
    // after the power loss Closed. Zone 2's explicit open and zone 3's unflushed write are
    // gone, as after a power loss.
    assert_eq!(s[1], ("closed".into(), 2));
    assert_eq!(s[2], ("empty".into(), 0));
    assert_eq!(s[3], ("empty".into(), 0));
}
