//! A command whose reader goes away (`zonestack zone report IMG | head -1`) stops quietly,
//! as Unix tools do: nothing on stderr, exit status 141 (128 + SIGPIPE), and the image is
//! closed cleanly.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::ok;

/// Runs `zonestack ARGS`, reads one line of its output, closes the pipe, and returns the
/// exit code and stderr.
fn read_one_line_then_close(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read a line");
    assert!(!line.is_empty(), "no output from {args:?}");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// The bug this guards against: `zone report big.img | head -1` printed "Broken pipe (os
// error 32)" and exited 1.
#[test]
fn a_closed_pipe_ends_the_command_without_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("big.img");
    let img = img.to_str().expect("utf-8");
    // Enough zones that the report is larger than a pipe's buffer.
    ok(&["device", "create", img, "--zones", "2048"]);
    ok(&[
        "io",
        "write",
        img,
        "--lba",
        "0",
        "--blocks",
        "64",
        "--pattern",
        "1",
    ]);
    let (code, err) = read_one_line_then_close(&["zone", "report", img]);
    assert_eq!(err, "", "wrote to stderr");
    assert_eq!(code, Some(141));
    // The image was closed cleanly: it opens for writing at once and still holds the data.
    ok(&[
        "io",
        "write",
        img,
        "--lba",
        "64",
        "--blocks",
        "1",
        "--pattern",
        "2",
    ]);
}
