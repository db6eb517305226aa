//! Helpers the CLI's integration tests share: running the real `zonestack` binary.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Runs `zonestack` with `args` and returns what it did.
pub fn zonestack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(args)
        .output()
        .expect("run zonestack")
}

/// Rewrites an array member's copy of logical zone 0 (its zone 3, after the three metadata
/// zones of the small member images these tests make) with 32 blocks of other bytes, so its
/// units no longer match the stripes' parity.
pub fn rewrite_first_data_zone(member: &str) {
    ok(&["zone", "reset", member, "--zone", "3"]);
    ok(&[
        "io",
        "write",
        member,
        "--lba",
        "768",
        "--blocks",
        "32",
        "--pattern",
        "0x11",
    ]);
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let o = zonestack(args);
    assert!(
        o.status.success(),
        "zonestack {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a command that must fail with `code`, without a panic; returns its stderr.
pub fn fails(args: &[&str], code: i32) -> String {
    let o = zonestack(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "zonestack {args:?}: {err}");
    assert!(
        !err.contains("panicked"),
        "zonestack {args:?} panicked: {err}"
    );
    err
}

/// Runs `zonestack session PATH` with `script` on stdin and returns what it did.
pub fn session(path: &str, script: &[u8]) -> Output {
    session_with(&[path], script)
}

/// Runs `zonestack session ARGS...` (a path, or `--raizn a,b,c`) with `script` on stdin and
/// returns what it did.
pub fn session_with(args: &[&str], script: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .arg("session")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zonestack session");
    let mut stdin = child.stdin.take().expect("stdin");
    // Write from a thread: a script larger than the pipe buffer would otherwise block while
    // the session blocks writing its replies to a stdout nobody reads yet.
    let script = script.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&script));
    let o = child
        .wait_with_output()
        .expect("wait for zonestack session");
    writer
        .join()
        .expect("writer thread")
        .expect("write the script");
    o
}

/// Fails the test, naming the Debian package, when a real client it drives is not installed
/// (./scripts/test installs them; such tests never skip).
pub fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{tool} is missing: install the Debian package {package} (./scripts/test does)"
    );
}

/// Runs a real client to completion and returns its stdout and stderr; fails the test,
/// showing both, when it does not succeed.
pub fn run(cmd: &mut Command) -> String {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{cmd:?} failed: {text}");
    text
}

/// A path as the `&str` a command line takes.
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `n` empty member images `PREFIXi.img` in `dir`, each made by `zonestack device create IMG`
/// followed by `args` (e.g. `--zones 8`).
pub fn member_images(dir: &Path, prefix: &str, n: usize, args: &[&str]) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("{prefix}{i}.img"));
            let mut cmd = vec!["device", "create", path_str(&p)];
            cmd.extend_from_slice(args);
            ok(&cmd);
            p
        })
        .collect()
}

/// Reads blocks `0..blocks` of the RAIZN array `array` (`--raizn` list) through
/// `zonestack io read` into `out`, and returns them.
pub fn read_array(array: &str, blocks: u64, out: &Path) -> Vec<u8> {
    let n = blocks.to_string();
    ok(&[
        "io",
        "read",
        "--raizn",
        array,
        "--lba",
        "0",
        "--blocks",
        &n,
        "--out",
        path_str(out),
    ]);
    std::fs::read(out).expect("read back")
}
