//! `device create --zns-plus --plug-order pp|lp` records how the device plugs TL-opened zones
//! on the timing model; `device info` (text and JSON) shows it on every later open, the
//! default is PPA-ordered plugging, and a bad value or the option without --zns-plus is a
//! one-line usage error that creates nothing. A session with `--timing` plugs in the
//! recorded order: under LBA-ordered plugging nothing is ever copied ahead of the write
//! pointer, which its `stats` line shows (and its `device info` line shows the chunk mapping).

mod common;

use common::{fails, ok};
use serde_json::Value;

/// The plugging order `device info --json` reports, after checking that it reports the
/// chunk mapping (identify_mapping) beside it.
fn info_order(img: &str) -> Value {
    let v: Value =
        serde_json::from_str(&ok(&["device", "info", img, "--json"])).expect("info json");
    assert!(v["zns_plus"]["chunk_blocks"].as_u64() >= Some(1), "{v}");
    v["zns_plus"]["plug_order"].clone()
}

#[test]
fn the_order_is_recorded_and_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lp = dir.path().join("lp.img").to_string_lossy().into_owned();
    let created = ok(&[
        "device",
        "create",
        &lp,
        "--zones",
        "8",
        "--zns-plus",
        "--plug-order",
        "lp",
    ]);
    assert!(created.contains("LBA-ordered plugging"), "{created}");
    assert_eq!(info_order(&lp), "lp");
    let text = ok(&["device", "info", &lp]);
    assert!(text.contains("zns+ plugging:    LBA-ordered"), "{text}");

    let pp = dir.path().join("pp.img").to_string_lossy().into_owned();
    let created = ok(&["device", "create", &pp, "--zones", "8", "--zns-plus"]);
    assert!(created.contains("PPA-ordered plugging"), "{created}");
    assert_eq!(info_order(&pp), "pp");
}

#[test]
fn bad_uses_are_usage_errors_that_create_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("x.img");
    let p = img.to_string_lossy().into_owned();
    let err = fails(&["device", "create", &p, "--plug-order", "lp"], 2);
    assert!(err.contains("--zns-plus"), "{err}");
    let err = fails(
        &["device", "create", &p, "--zns-plus", "--plug-order", "fifo"],
        2,
    );
    assert!(err.contains("'fifo' is not a plugging order"), "{err}");
    assert!(!img.exists(), "a refused create left {}", img.display());
}

#[test]
fn a_timed_session_plugs_in_the_recorded_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    for order in ["lp", "pp"] {
        let img = dir.path().join(format!("{order}.img"));
        let img = img.to_string_lossy().into_owned();
        ok(&[
            "device",
            "create",
            &img,
            "--zones",
            "8",
            "--zns-plus",
            "--plug-order",
            order,
        ]);
        ok(&["io", "fill", &img, "--zone", "0"]);
        // Blocks 0-15 and 32-63 valid: TL_open puts the WP at 16, and the write of 16-31
        // passes the valid run 32-63, which the device plugs. Under PP its fully valid
        // chunks go ahead in the (real) time between the two commands, when their chips
        // idle; under LP never.
        let script = "device info\n\
                      zone tl-open --zone 0 --valid 0-15,32-63\n\
                      io write --lba 16 --blocks 16 --pattern 0xa5\n\
                      stats\n";
        let o = session_timed(&img, script);
        // identify_mapping in a session, with the timing model's layout.
        assert!(o.contains("zns+ commands:    chunks of"), "{o}");
        let line = o
            .lines()
            .find(|l| l.starts_with("zns+:"))
            .unwrap_or_else(|| panic!("no zns+ stats line: {o}"));
        assert!(!line.contains("plugged 0 bytes"), "{line}");
        let none_ahead = line.contains(", 0 of them ahead in idle chip time");
        if order == "lp" {
            assert!(
                line.contains("LBA-ordered plugging") && none_ahead,
                "{line}"
            );
        } else {
            assert!(
                line.contains("PPA-ordered plugging") && !none_ahead,
                "{line}"
            );
        }
    }
}

/// Runs a session on `img` with the femu-mlc timing profile; returns its stdout.
fn session_timed(img: &str, script: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(["session", img, "--timing", "femu-mlc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a session");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("script");
    let o = child.wait_with_output().expect("session");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}
