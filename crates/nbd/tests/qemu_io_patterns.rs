//! qemu's NBD client (`qemu-io -f raw`, from qemu-utils) writes and reads patterns through
//! `nbd+unix://` and `nbd://`, aligned and at odd byte offsets, with FUA, write zeroes and
//! discard; the bytes land on the volume where qemu put them, and qemu reads back bytes
//! written on the volume directly.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{pattern, require_tool, run_tool, volume_bytes, write_volume, TestServer};
use nbd::MemDisk;

fn qemu_io(qemu: &Path, uri: &str, commands: &[&str]) -> String {
    let mut args = vec!["-f", "raw"];
    for c in commands {
        args.extend(["-c", c]);
    }
    args.push(uri);
    let out = run_tool(qemu, &args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // qemu-io exits 0 even when some commands fail; their messages say so.
    for bad in ["failed", "error", "Error"] {
        assert!(!text.contains(bad), "qemu-io reported a failure:\n{text}");
    }
    text
}

#[test]
fn qemu_io_writes_and_reads_patterns_over_a_unix_socket() {
    let qemu = require_tool("qemu-io", "qemu-utils");
    let disk = Arc::new(MemDisk::new(4096, 1024).expect("memdisk"));
    let s = TestServer::unix(disk.clone(), |_| {});
    qemu_io(
        &qemu,
        &s.uri,
        &[
            "write -P 0xab 0 64k",
            "read -P 0xab 0 64k",
            // Unaligned: the server does read-modify-write on partial blocks.
            "write -P 0x11 100 1000",
            "read -P 0x11 100 1000",
            "read -P 0xab 0 100",
            "read -P 0xab 1100 64436",
            "write -f -P 0x22 1m 128k",
            "write -z 1m 5000",
            "read -P 0 1m 5000",
            "read -P 0x22 1053576 126072",
            "discard 2m 256k",
            "flush",
        ],
    );
    let mut want = vec![0xabu8; 65536];
    want[100..1100].fill(0x11);
    assert_eq!(volume_bytes(disk.as_ref(), 0, 65536), want);
    let mut want = vec![0x22u8; 128 * 1024];
    want[..5000].fill(0);
    assert_eq!(volume_bytes(disk.as_ref(), 1 << 20, 128 * 1024), want);
    let c = disk.counters();
    assert!(
        c.fua_writes >= 1 && c.flushes >= 1 && c.trims >= 1 && c.write_zeroes >= 1,
        "{c:?}"
    );
}

#[test]
fn qemu_io_reads_what_was_written_on_the_volume_over_tcp() {
    let qemu = require_tool("qemu-io", "qemu-utils");
    let disk = Arc::new(MemDisk::new(512, 8192).expect("memdisk"));
    write_volume(disk.as_ref(), 8192, &[0x5au8; 8192]);
    write_volume(disk.as_ref(), 0, &pattern(0, 512, 0));
    let s = TestServer::tcp(disk.clone(), |c| c.export_name = "disk".into());
    qemu_io(
        &qemu,
        &s.uri,
        &["read -P 0x5a 8192 8192", "read -P 0 16384 4096"],
    );
    // A pattern check that must fail proves qemu-io really compares the data.
    let out = std::process::Command::new(&qemu)
        .args(["-f", "raw", "-c", "read -P 0x77 8192 512", &s.uri])
        .output()
        .expect("qemu-io");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Pattern verification failed"));
}
