//! `zonestack serve --zapraid` and `serve --raizn` driven by unmodified NBD clients: fio
//! writes with crc32c verification and verifies in a second pass on each export, qemu-io
//! round-trips patterns and mkfs.ext4 + e2fsck run on the ZapRAID export through nbdfuse,
//! and fio's data (ZapRAID, and the host FTL on RAIZN) and qemu-io's patterns and ext4
//! (ZapRAID) stay right while a member dies mid-run (`serve --fail-member`). Every client is required: a missing one fails the test, naming
//! its Debian package (`./scripts/test` installs them). The server is stopped by SIGTERM on
//! success and killed when a test fails (`Served` is dropped).

mod common;
#[path = "common/serve.rs"]
mod serve_helper;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ok, require, run};
use serve_helper::Served;

use common::path_str as s;

/// `n` member images of `zones` small-profile zones with 64 bytes of metadata per block.
fn images(dir: &Path, n: usize, zones: &str) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("m{i}.img"));
            ok(&["device", "create", s(&p), "--zones", zones, "--oob", "64"]);
            p
        })
        .collect()
}

fn list(m: &[PathBuf]) -> String {
    m.iter().map(|p| s(p)).collect::<Vec<_>>().join(",")
}

/// Formats a 3 + 1 ZapRAID array (groups of 16 stripes) on four new images in `dir`;
/// returns the images and the member list `serve --zapraid` takes.
fn zapraid_3_plus_1(dir: &Path) -> (Vec<PathBuf>, String) {
    let m = images(dir, 4, "24");
    let mut fmt = vec!["zapraid", "format", "--group", "16"];
    fmt.extend(m.iter().map(|p| s(p)));
    ok(&fmt);
    let a = list(&m);
    (m, a)
}

/// Starts `zonestack serve ARGS` on a Unix socket in `dir`; returns it and its URI.
fn serve(dir: &Path, args: &[&str]) -> (Served, String) {
    let listen = format!("unix:{}", dir.join("nbd.sock").display());
    let mut all = vec!["serve", "--listen", &listen];
    all.extend_from_slice(args);
    let server = Served::start(&all);
    let uri = server
        .started
        .lines()
        .find(|l| l.starts_with("nbd"))
        .unwrap_or_default()
        .to_string();
    (server, uri)
}

fn stop(server: Served) {
    let (status, out, err) = server.terminate();
    assert!(status.success(), "serve stopped with {status}: {out}{err}");
}

/// fio random writes of `size` at queue depth 16 with crc32c, then a separate verify pass.
fn fio_write_then_verify(dir: &Path, uri: &str, size: &str) {
    let fio = |verify_only: bool| {
        let mut c = Command::new("fio");
        // fio leaves its verify state file in the working directory.
        c.current_dir(dir);
        c.args([
            "--name=array",
            "--ioengine=nbd",
            "--bs=4k",
            "--iodepth=16",
            "--verify=crc32c",
            "--randseed=11",
            "--rw=randwrite",
        ]);
        c.arg(format!("--size={size}")).arg(format!("--uri={uri}"));
        c.arg(if verify_only {
            "--verify_only"
        } else {
            "--do_verify=0"
        });
        c
    };
    let w = run(&mut fio(false));
    assert!(w.contains("WRITE:"), "{w}");
    let v = run(&mut fio(true));
    assert!(
        v.contains("READ:") || v.contains("read:"),
        "the verify pass read nothing: {v}"
    );
}

#[test]
fn fio_verifies_through_the_zapraid_export() {
    require("fio", "fio");
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, a) = zapraid_3_plus_1(dir.path());
    let (server, uri) = serve(dir.path(), &["--zapraid", &a]);
    assert!(
        server.started.contains("ZapRAID volume"),
        "{}",
        server.started
    );
    fio_write_then_verify(dir.path(), &uri, "16M");
    stop(server);
    // The data survives a restart of the server: verify again on a fresh open.
    let (server, uri) = serve(dir.path(), &["--zapraid", &a]);
    let fio = run(Command::new("fio")
        .current_dir(dir.path())
        .args([
            "--name=array",
            "--ioengine=nbd",
            "--bs=4k",
            "--size=16M",
            "--verify=crc32c",
            "--randseed=11",
            "--rw=randwrite",
            "--verify_only",
        ])
        .arg(format!("--uri={uri}")));
    assert!(fio.contains("READ:") || fio.contains("read:"), "{fio}");
    stop(server);
}

/// fio's verify-only pass over `uri` (the data of an earlier `fio_write_then_verify`).
fn fio_verify_only(dir: &Path, uri: &str, size: &str) {
    let v = run(Command::new("fio")
        .current_dir(dir)
        .args([
            "--name=array",
            "--ioengine=nbd",
            "--bs=4k",
            "--verify=crc32c",
            "--randseed=11",
            "--rw=randwrite",
            "--verify_only",
        ])
        .arg(format!("--size={size}"))
        .arg(format!("--uri={uri}")));
    assert!(v.contains("READ:") || v.contains("read:"), "{v}");
}

#[test]
fn fio_verifies_through_the_zapraid_export_with_a_member_failed_mid_run() {
    require("fio", "fio");
    let dir = tempfile::tempdir().expect("tempdir");
    let (m, a) = zapraid_3_plus_1(dir.path());
    // Member 2 dies at its 300th command, while fio is writing.
    let (server, uri) = serve(
        dir.path(),
        &["--zapraid", &a, "--fail-member", "2", "--fail-after", "300"],
    );
    assert!(
        server.started.contains("set to fail at its command 300"),
        "{}",
        server.started
    );
    fio_write_then_verify(dir.path(), &uri, "16M");
    stop(server);
    // The failure was recorded: status names it, the array reopens degraded and fio's data
    // still verifies.
    let mut status = vec!["zapraid", "status"];
    status.extend(m.iter().map(|p| s(p)));
    let st = ok(&status);
    assert!(st.contains("m2.img) failed"), "{st}");
    let (server, uri) = serve(dir.path(), &["--zapraid", &a]);
    assert!(server.started.contains("degraded"), "{}", server.started);
    fio_verify_only(dir.path(), &uri, "16M");
    stop(server);
    // The dead member is rebuilt onto a new image, which takes its place: the array is
    // healthy and fio's data verifies, also with another member failed (so the rebuilt
    // blocks are read).
    let new = dir.path().join("new.img");
    ok(&["device", "create", s(&new), "--zones", "24", "--oob", "64"]);
    let mut replace = vec!["zapraid", "replace", "--member", "2", "--with", s(&new)];
    replace.extend(m.iter().map(|p| s(p)));
    let text = ok(&replace);
    assert!(text.contains("recovering member 2: 100%"), "{text}");
    assert!(text.contains("the array is healthy"), "{text}");
    let mut m2 = m.clone();
    m2[2] = new;
    let mut status = vec!["zapraid", "status"];
    status.extend(m2.iter().map(|p| s(p)));
    let st = ok(&status);
    assert!(st.contains("all 4 healthy"), "{st}");
    let mut fail = vec!["zapraid", "fail", "--member", "0"];
    fail.extend(m2.iter().map(|p| s(p)));
    ok(&fail);
    let (server, uri) = serve(dir.path(), &["--zapraid", &list(&m2)]);
    fio_verify_only(dir.path(), &uri, "16M");
    stop(server);
}

fn require_fs_clients() {
    for (t, p) in [
        ("qemu-io", "qemu-utils"),
        ("nbdfuse", "libnbd-bin"),
        ("mkfs.ext4", "e2fsprogs"),
        ("e2fsck", "e2fsprogs"),
        ("fusermount3", "fuse3"),
    ] {
        require(t, p);
    }
}

/// qemu-io writes patterns, flushes and reads them back through the export at `uri`.
fn qemu_io_patterns(uri: &str) {
    let q = run(Command::new("qemu-io")
        .args([
            "-f",
            "raw",
            "-c",
            "write -P 0xab 0 1M",
            "-c",
            "write -P 0x17 1000 3000",
            "-c",
            "write -z 4M 1M",
            "-c",
            "flush",
            "-c",
            "read -P 0xab 0 1000",
            "-c",
            "read -P 0x17 1000 3000",
            "-c",
            "read -P 0xab 4000 1044576",
            "-c",
            "read -P 0 4M 1M",
        ])
        .arg(uri));
    assert!(!q.contains("Pattern verification failed"), "{q}");
}

/// Exposes the export at `uri` as a file through nbdfuse in `dir`; runs mkfs.ext4 on it
/// first when `mkfs`, then `e2fsck -fn` (no mount), which must find the file system clean.
fn ext4_through_nbdfuse(dir: &Path, uri: &str, mkfs: bool) {
    let fuse = dir.join("fuse");
    std::fs::create_dir_all(&fuse).expect("mkdir");
    let file = fuse.join("disk");
    let mut nbdfuse = FuseGuard {
        dir: fuse.clone(),
        child: Some(
            Command::new("nbdfuse")
                .arg(&file)
                .arg(uri)
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn nbdfuse"),
        ),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&file).map(|md| md.len()).unwrap_or(0) == 0 {
        assert!(
            Instant::now() < deadline,
            "nbdfuse did not expose {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if mkfs {
        run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&file));
    }
    let fsck = run(Command::new("e2fsck").args(["-fn"]).arg(&file));
    assert!(fsck.contains("files"), "{fsck}");
    nbdfuse.release();
}

#[test]
fn qemu_io_and_ext4_on_the_zapraid_export() {
    require_fs_clients();
    let dir = tempfile::tempdir().expect("tempdir");
    let m = images(dir.path(), 3, "26");
    let mut fmt = vec!["zapraid", "format", "--group", "16"];
    fmt.extend(m.iter().map(|p| s(p)));
    ok(&fmt);
    let (server, uri) = serve(dir.path(), &["--zapraid", &list(&m)]);
    qemu_io_patterns(&uri);
    ext4_through_nbdfuse(dir.path(), &uri, true);
    stop(server);
}

#[test]
fn qemu_io_and_ext4_on_the_zapraid_export_with_a_member_failed_mid_run() {
    require_fs_clients();
    let dir = tempfile::tempdir().expect("tempdir");
    let (m, a) = zapraid_3_plus_1(dir.path());
    // Member 1 dies at its 200th command: after qemu-io's patterns, while mkfs.ext4 writes.
    let (server, uri) = serve(
        dir.path(),
        &["--zapraid", &a, "--fail-member", "1", "--fail-after", "200"],
    );
    qemu_io_patterns(&uri);
    ext4_through_nbdfuse(dir.path(), &uri, true);
    stop(server);
    let mut status = vec!["zapraid", "status"];
    status.extend(m.iter().map(|p| s(p)));
    let st = ok(&status);
    assert!(
        st.contains("m1.img) failed"),
        "the member did not die mid-run: {st}"
    );
    // Reopened degraded, the file system still checks clean (member 1's blocks rebuilt).
    let (server, uri) = serve(dir.path(), &["--zapraid", &a]);
    assert!(server.started.contains("degraded"), "{}", server.started);
    ext4_through_nbdfuse(dir.path(), &uri, false);
    stop(server);
}

/// Unmounts nbdfuse and ends it, whatever happened.
struct FuseGuard {
    dir: PathBuf,
    child: Option<std::process::Child>,
}

impl FuseGuard {
    fn release(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

impl Drop for FuseGuard {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn fio_verifies_through_the_ftl_on_raizn_with_a_member_failed_mid_run() {
    require("fio", "fio");
    let dir = tempfile::tempdir().expect("tempdir");
    let m = images(dir.path(), 3, "26");
    let mut create = vec!["raizn", "create"];
    create.extend(m.iter().map(|p| s(p)));
    ok(&create);
    let a = list(&m);
    // Member 1 dies at its 300th command, while fio is writing.
    let (server, uri) = serve(
        dir.path(),
        &[
            "--raizn",
            &a,
            "--op",
            "30",
            "--fail-member",
            "1",
            "--fail-after",
            "300",
        ],
    );
    assert!(
        server.started.contains("FTL volume on RAIZN array"),
        "{}",
        server.started
    );
    fio_write_then_verify(dir.path(), &uri, "12M");
    stop(server);
    // The failure was recorded: the array reopens degraded and fio's data still verifies.
    let st = ok(&["raizn", "status", s(&m[0]), s(&m[1]), s(&m[2])]);
    assert!(st.contains("m1.img failed"), "{st}");
    let (server, uri) = serve(dir.path(), &["--raizn", &a, "--op", "30"]);
    assert!(server.started.contains("degraded"), "{}", server.started);
    let v = run(Command::new("fio")
        .current_dir(dir.path())
        .args([
            "--name=array",
            "--ioengine=nbd",
            "--bs=4k",
            "--size=12M",
            "--verify=crc32c",
            "--randseed=11",
            "--rw=randwrite",
            "--verify_only",
        ])
        .arg(format!("--uri={uri}")));
    assert!(v.contains("READ:") || v.contains("read:"), "{v}");
    stop(server);
}

#[test]
fn fio_verifies_through_the_ftl_on_a_healthy_raizn_array() {
    require("fio", "fio");
    let dir = tempfile::tempdir().expect("tempdir");
    let m = images(dir.path(), 3, "26");
    let mut create = vec!["raizn", "create"];
    create.extend(m.iter().map(|p| s(p)));
    ok(&create);
    let (server, uri) = serve(dir.path(), &["--raizn", &list(&m), "--op", "30"]);
    assert!(
        server.started.contains("formatted a new volume"),
        "{}",
        server.started
    );
    fio_write_then_verify(dir.path(), &uri, "12M");
    stop(server);
    let mut check = vec!["raizn", "check"];
    check.extend(m.iter().map(|p| s(p)));
    let c = ok(&check);
    assert!(c.starts_with("clean:"), "{c}");
}

#[test]
fn fio_verifies_through_arrays_whose_members_are_timed() {
    require("fio", "fio");
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["r", "z"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
    }
    let r = images(&dir.path().join("r"), 3, "26");
    let mut create = vec!["raizn", "create"];
    create.extend(r.iter().map(|p| s(p)));
    ok(&create);
    let z = images(&dir.path().join("z"), 4, "24");
    let mut fmt = vec!["zapraid", "format", "--group", "16"];
    fmt.extend(z.iter().map(|p| s(p)));
    ok(&fmt);
    for (kind, members, extra) in [("--raizn", &r, &["--op", "30"][..]), ("--zapraid", &z, &[])] {
        let a = list(members);
        let mut args = vec![kind, a.as_str(), "--timing", "zn540"];
        args.extend_from_slice(extra);
        let (server, uri) = serve(dir.path(), &args);
        assert!(
            server
                .started
                .contains("members with timing profile zn540 in real time"),
            "{kind}: the banner must say the members are timed: {}",
            server.started
        );
        fio_write_then_verify(dir.path(), &uri, "4M");
        stop(server);
    }
}
