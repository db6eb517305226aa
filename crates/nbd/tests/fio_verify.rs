//! fio's nbd engine (libnbd, `--uri=`) writes random 4 KiB blocks at queue depth 16 with
//! crc32c verification headers, then a verify-only pass re-reads and checks every block.
//! Corrupting one block on the volume behind the server's back makes the verify-only pass
//! fail, which shows that it really checks.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::{require_tool, run_tool, write_volume, TestServer, WAIT};
use nbd::MemDisk;

const SIZE: &str = "16m";

fn fio_args<'a>(uri: &'a str, dir: &'a str, verify_only: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "--name=nbdverify",
        "--ioengine=nbd",
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=16",
        "--verify=crc32c",
        "--randseed=7",
        "--verify_state_save=0",
        "--output-format=terse",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(format!("--size={SIZE}"));
    a.push(format!("--uri={uri}"));
    // fio writes nothing here but wants a working directory of its own.
    a.push(format!("--directory={dir}"));
    a.push(if verify_only {
        "--verify_only".into()
    } else {
        "--do_verify=1".into()
    });
    a
}

fn run_fio(fio: &Path, args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_tool(fio, &args)
}

#[test]
fn fio_random_writes_verify_with_crc32c() {
    let fio = require_tool("fio", "fio");
    let disk = Arc::new(MemDisk::new(4096, 16 << 8).expect("memdisk"));
    let s = TestServer::unix(disk.clone(), |_| {});
    let dir = tempfile::tempdir().expect("tempdir");
    let dir_s = dir.path().to_string_lossy().into_owned();

    run_fio(&fio, &fio_args(&s.uri, &dir_s, false));
    let written = disk.counters().writes;
    assert!(
        written >= 4096,
        "every 4 KiB block of 16 MiB written once: {written}"
    );
    run_fio(&fio, &fio_args(&s.uri, &dir_s, true));
    assert_eq!(
        disk.counters().writes,
        written,
        "the verify-only pass writes nothing"
    );

    // Corrupt one block; the verify-only pass must now fail.
    write_volume(disk.as_ref(), 4096 * 1000, &[0xeeu8; 4096]);
    let args = fio_args(&s.uri, &dir_s, true);
    let out = Command::new("timeout")
        .arg(WAIT.as_secs().to_string())
        .arg(&fio)
        .args(&args)
        .output()
        .expect("fio");
    assert!(!out.status.success(), "fio verified a corrupted block");
}
