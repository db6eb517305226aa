//! The `zonestack` command-line contract that other tools script against: subcommand names,
//! JSON keys, NVMe status names on errors, exit codes (1 for device errors, 2 for usage),
//! and no panics on bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;
use common::{fails, ok};

fn image(dir: &Path, extra: &[&str]) -> PathBuf {
    let p = dir.join("dev.img");
    let mut args = vec![
        "device",
        "create",
        p.to_str().expect("utf-8 path"),
        "--zones",
        "8",
        "--zone-size",
        "64K",
        "--zone-cap",
        "48K",
        "--block-size",
        "4096",
        "--max-open",
        "2",
        "--max-active",
        "3",
    ];
    args.extend_from_slice(extra);
    ok(&args);
    p
}

fn report(p: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(&ok(&["zone", "report", p, "--json"])).expect("json");
    v["zones"].as_array().expect("zones array").clone()
}

#[test]
fn create_info_and_refusal_to_overwrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path(), &["--oob", "16"]);
    let ps = p.to_str().expect("path");
    let info: Value = serde_json::from_str(&ok(&["device", "info", ps, "--json"])).expect("json");
    for (k, v) in [
        ("zones", 8),
        ("zone_size", 16),
        ("zone_capacity", 12),
        ("block_size", 4096),
        ("oob", 16),
        ("max_open", 2),
        ("max_active", 3),
        ("zasl", 128),
    ] {
        assert_eq!(info[k], v, "info key {k}: {info}");
    }
    let err = fails(&["device", "create", ps], 1);
    assert!(err.contains("--force"), "{err}");
    ok(&[
        "device",
        "create",
        ps,
        "--force",
        "--profile",
        "zn540",
        "--zones",
        "16",
    ]);
    let info: Value = serde_json::from_str(&ok(&["device", "info", ps, "--json"])).expect("json");
    assert_eq!(info["zone_capacity"], 275_712);
    assert_eq!(info["max_open"], 14);
    let err = fails(
        &["device", "create", ps, "--force", "--profile", "nosuch"],
        2,
    );
    assert!(err.contains("unknown profile"), "{err}");
    fails(
        &[
            "device",
            "create",
            ps,
            "--force",
            "--zone-size",
            "64K",
            "--zone-cap",
            "128K",
        ],
        2,
    );
    fails(
        &["device", "create", ps, "--force", "--block-size", "1000"],
        2,
    );
}

#[test]
fn writes_appends_reads_and_nvme_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path(), &[]);
    let ps = p.to_str().expect("path");
    ok(&[
        "io",
        "write",
        ps,
        "--lba",
        "0",
        "--blocks",
        "2",
        "--pattern",
        "0xab",
    ]);
    let err = fails(
        &[
            "io",
            "write",
            ps,
            "--lba",
            "5",
            "--blocks",
            "1",
            "--pattern",
            "1",
        ],
        1,
    );
    assert!(err.contains("Zone Invalid Write"), "{err}");
    let err = fails(
        &[
            "io",
            "write",
            ps,
            "--lba",
            "2",
            "--blocks",
            "11",
            "--pattern",
            "1",
        ],
        1,
    );
    assert!(err.contains("Zone Boundary Error"), "{err}");
    let err = fails(
        &[
            "io",
            "write",
            ps,
            "--lba",
            "999999",
            "--blocks",
            "1",
            "--pattern",
            "1",
        ],
        1,
    );
    assert!(err.contains("LBA Out of Range"), "{err}");
    let lba = ok(&[
        "io",
        "append",
        ps,
        "--zone",
        "1",
        "--blocks",
        "3",
        "--pattern",
        "0x11",
    ]);
    assert_eq!(lba.trim(), "16");
    let lba = ok(&[
        "io",
        "append",
        ps,
        "--zone",
        "1",
        "--blocks",
        "1",
        "--pattern",
        "0x22",
    ]);
    assert_eq!(lba.trim(), "19");
    let dump = ok(&["io", "read", ps, "--lba", "0", "--blocks", "1"]);
    assert!(dump.starts_with("00000000  ab ab ab ab"), "{dump}");
    let out = dir.path().join("out.bin");
    ok(&[
        "io",
        "read",
        ps,
        "--lba",
        "18",
        "--blocks",
        "2",
        "--out",
        out.to_str().expect("path"),
    ]);
    let bytes = std::fs::read(&out).expect("read out");
    assert_eq!(bytes.len(), 8192);
    assert!(bytes[..4096].iter().all(|b| *b == 0x11) && bytes[4096..].iter().all(|b| *b == 0x22));
    let data = dir.path().join("in.bin");
    std::fs::write(&data, vec![0x33u8; 4096]).expect("write data");
    ok(&[
        "io",
        "write",
        ps,
        "--lba",
        "2",
        "--data-file",
        data.to_str().expect("path"),
        "--fua",
    ]);
    let zones = report(ps);
    assert_eq!(zones[0]["wp"], 3);
    assert_eq!(
        zones[0]["state"], "implicitly_opened",
        "a clean close keeps the zone the writes opened open, as a powered drive does"
    );
    assert_eq!(zones[1]["wp"], 20);
    assert_eq!(zones[0]["capacity"], 12);
    assert_eq!(zones[1]["start"], 16);
}

#[test]
fn zone_management_and_faults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path(), &[]);
    let ps = p.to_str().expect("path");
    ok(&["zone", "open", ps, "--zone", "2"]);
    ok(&["zone", "finish", ps, "--zone", "3"]);
    let full = ok(&["zone", "report", ps, "--state", "full", "--json"]);
    let v: Value = serde_json::from_str(&full).expect("json");
    assert_eq!(v["zones"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["zones"][0]["zone"], 3);
    let err = fails(&["zone", "close", ps, "--zone", "4"], 1);
    assert!(err.contains("Invalid Zone State Transition"), "{err}");
    ok(&["zone", "reset", ps, "--all"]);
    assert!(report(ps).iter().all(|z| z["state"] == "empty"));
    ok(&["fault", ps, "--zone", "5", "--state", "read_only"]);
    let err = fails(
        &[
            "io",
            "write",
            ps,
            "--lba",
            "80",
            "--blocks",
            "1",
            "--pattern",
            "1",
        ],
        1,
    );
    assert!(err.contains("Zone Is Read Only"), "{err}");
    ok(&["zone", "offline", ps, "--zone", "5"]);
    let err = fails(&["io", "read", ps, "--lba", "80", "--blocks", "1"], 1);
    assert!(err.contains("Zone Is Offline"), "{err}");
    assert_eq!(report(ps)[5]["state"], "offline");
    let text = ok(&["zone", "report", ps]);
    assert!(
        text.lines().next().unwrap_or("").contains("zcond: 1(em)"),
        "{text}"
    );
    fails(&["zone", "open", ps], 2);
    fails(&["zone", "open", ps, "--zone", "1", "--all"], 2);
    fails(&["zone", "report", ps, "--state", "bogus"], 2);
    fails(&["fault", ps, "--zone", "1", "--state", "full"], 2);
}

#[test]
fn damaged_or_missing_images_fail_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("none.img");
    let err = fails(&["zone", "report", missing.to_str().expect("path")], 1);
    assert!(err.contains("does not exist"), "{err}");
    let junk = dir.path().join("junk.img");
    std::fs::write(&junk, vec![0x41u8; 10_000]).expect("write junk");
    let err = fails(&["device", "info", junk.to_str().expect("path")], 1);
    assert!(err.contains("bad magic"), "{err}");
    fails(&["io", "write"], 2);
    fails(&["no-such-command"], 2);
}

#[test]
fn session_keeps_zones_open_and_goes_on_after_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path(), &[]);
    let script = "io write --lba 0 --blocks 1 --pattern 0xab\n\
                  zone report --json --count 1\n\
                  io write --lba 7 --blocks 1 --pattern 1\n\
                  bogus words\n\
                  io write --lba 1 --blocks 1 --pattern 0xcd\n\
                  power-loss --seed 3\n\
                  zone report --json --count 1\n\
                  stats\n";
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(["session", p.to_str().expect("path")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let o = child.wait_with_output().expect("wait");
    // Two lines failed, so the session as a whole failed; the lines after them still ran.
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "ok");
    assert!(
        lines[1].contains("\"state\":\"implicitly_opened\""),
        "zone must stay open between lines: {}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("error: line 3: Zone Invalid Write"),
        "{}",
        lines[2]
    );
    assert!(lines[3].starts_with("error: line 4: "), "{}", lines[3]);
    assert_eq!(lines[4], "ok");
    assert!(out.contains("power loss:"), "{out}");
    assert!(out.contains("commands:"), "{out}");
}

#[test]
fn a_killed_session_keeps_what_was_flushed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path(), &[]);
    let ps = p.to_str().expect("path");
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(["session", ps])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::{BufRead, BufReader, Write};
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    for cmd in [
        "io write --lba 0 --blocks 4 --pattern 0x77",
        "flush",
        "io write --lba 4 --blocks 2 --pattern 0x88 --fua",
        "io write --lba 6 --blocks 3 --pattern 0x99",
    ] {
        writeln!(stdin, "{cmd}").expect("send");
        line.clear();
        stdout.read_line(&mut line).expect("reply");
        assert_eq!(line.trim(), "ok", "{cmd}");
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    let zones = report(ps);
    assert_eq!(
        zones[0]["wp"], 6,
        "flushed and FUA blocks survive a kill; the unflushed ones do not"
    );
    assert_eq!(zones[0]["state"], "closed");
    let dump = ok(&["io", "read", ps, "--lba", "5", "--blocks", "2"]);
    assert!(
        dump.starts_with("00005000  88 88 88 88"),
        "the FUA block survives: {dump}"
    );
    assert!(
        dump.contains("*\n00006000  00 00"),
        "above the write pointer reads zeros: {dump}"
    );
}

#[test]
fn quickstart_runs_on_its_embedded_default() {
    let out = ok(&["quickstart"]);
    assert!(out.contains("zone report identical"), "{out}");
    assert!(out.contains("zcond:"), "{out}");
}

#[test]
fn bench_emu_reports_its_figures_beside_memcpy_and_fio() {
    let out = ok(&[
        "bench",
        "emu",
        "--json",
        "--size",
        "64M",
        "--file-size",
        "16M",
        "--reps",
        "1",
    ]);
    let v: Value = serde_json::from_str(&out).expect("json");
    for k in [
        "write_4k_iops",
        "append_4k_iops",
        "read_4k_iops",
        "write_128k_mibps",
        "memcpy_4k_ops",
        "memcpy_128k_mibps",
        "fio_write_4k_iops",
        "file_vs_fio_write",
    ] {
        assert!(
            v[k].as_f64().is_some_and(|x| x > 0.0),
            "{k} missing or not positive: {v}"
        );
    }
}

#[test]
fn bench_paper_prints_rows_repeatably_and_refuses_unknown_sets() {
    let args = [
        "bench",
        "paper",
        "raizn-raw",
        "--json",
        "--size",
        "8M",
        "--seed",
        "3",
    ];
    let out = ok(&args);
    assert_eq!(out, ok(&args), "a virtual-time run must repeat exactly");
    let v: Value = serde_json::from_str(&out).expect("json");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["figure"]
            .as_str()
            .is_some_and(|f| f.starts_with("raizn-raw")));
        for k in ["paper", "measured", "diff_pct"] {
            assert!(r[k].as_f64().is_some(), "{k} missing: {r}");
        }
    }
    let table = ok(&["bench", "paper", "zns-5.1", "--size", "4M"]);
    assert!(table.contains("paper") && table.contains("measured") && table.contains("85.0"));
    let err = fails(&["bench", "paper", "no-such-figure"], 2);
    assert!(err.contains("zapraid-fig1"), "{err}");
    // The ZNS+ sets' medium is one of the paper's Table 2; anything else is refused before
    // a point runs.
    let err = fails(&["bench", "paper", "znsplus-fig8", "--profile", "zn540"], 2);
    assert!(err.contains("femu-tlc") && err.contains("znand"), "{err}");
}

#[test]
fn bench_paper_zns_fig1_writes_rows_and_series_as_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path");
    let out = ok(&[
        "bench",
        "paper",
        "zns-fig1",
        "--size",
        "512M",
        "--results",
        d,
    ]);
    assert!(out.contains("block interface 7% OP"), "{out}");
    let rows = std::fs::read_to_string(dir.path().join("zns-fig1.csv")).expect("rows csv");
    assert!(rows.starts_with("figure,paper,measured,diff_pct\n"));
    assert_eq!(rows.lines().count(), 4);
    let series = std::fs::read_to_string(dir.path().join("zns-fig1-series.csv")).expect("series");
    assert!(series.starts_with("drive,gib_written,mibps\n"));
    for drive in ["zns_0pct_op", "block_7pct_op", "block_28pct_op"] {
        assert!(
            series.lines().filter(|l| l.starts_with(drive)).count() >= 60,
            "{drive}"
        );
    }
    let small = fails(&["bench", "paper", "zns-fig1", "--size", "64M"], 1);
    assert!(small.contains("512M"), "{small}");
}
