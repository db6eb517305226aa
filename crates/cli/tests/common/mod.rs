//! Helpers the CLI's integration tests share: running the real `zonestack` binary.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `zonestack` with `args` and returns what it did.
pub fn zonestack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(args)
        .output()
        .expect("run zonestack")
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
