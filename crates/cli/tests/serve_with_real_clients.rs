//! `zonestack serve` driven by unmodified NBD clients: nbdinfo reports the size, qemu-io
//! writes and reads patterns, fio writes with crc32c verification and verifies in a second
//! pass, and ext4 on nbdfuse + a loop device keeps its synced files across a server killed
//! without a flush. Every client is required: a missing one fails the test, naming its
//! Debian package (`./scripts/test` installs them).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{require, run};

/// A running `zonestack serve`, killed when dropped.
struct Server {
    child: Child,
    banner: String,
    uri: String,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn zonestack serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let banner = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(banner.starts_with("serving"), "unexpected banner: {banner}");
        let uri = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(uri.starts_with("nbd"), "no URI printed: {uri}");
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, banner, uri }
    }

    /// SIGTERM, and the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "server did not stop within 60 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: no flush, no checkpoint.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sock(dir: &Path) -> String {
    format!("unix:{}", dir.join("nbd.sock").display())
}

#[test]
fn nbdinfo_reports_the_size_and_qemu_io_round_trips_patterns() {
    require("nbdinfo", "libnbd-bin");
    require("qemu-io", "qemu-utils");
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("dev.img");
    run(Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(["device", "create"])
        .arg(&img)
        .args(["--zones", "128"]));
    let s = sock(dir.path());
    let server = Server::start(&["--device", img.to_str().expect("path"), "--listen", &s]);
    let info = run(Command::new("nbdinfo").arg("--size").arg(&server.uri));
    let size: u64 = info.trim().parse().expect("nbdinfo --size prints a number");
    assert!(size > 60 << 20, "export size {size}");
    let q = run(Command::new("qemu-io")
        .args(["-f", "raw"])
        .args([
            "-c",
            "write -P 0xab 0 1M",
            "-c",
            "write -P 0xcd 3M 64k",
            "-c",
            "write -P 0x17 1000 3000",
            "-c",
            "write -z 8M 1M",
            "-c",
            "read -P 0xab 0 1000",
            "-c",
            "read -P 0x17 1000 3000",
            "-c",
            "read -P 0xab 4000 1044576",
            "-c",
            "read -P 0xcd 3M 64k",
            "-c",
            "read -P 0 8M 1M",
            "-c",
            "flush",
        ])
        .arg(&server.uri));
    assert!(!q.contains("Pattern verification failed"), "{q}");
    assert!(server.terminate().success());
    // A clean restart on the same image serves the same bytes.
    let server = Server::start(&["--device", img.to_str().expect("path"), "--listen", &s]);
    let q = run(Command::new("qemu-io")
        .args([
            "-f",
            "raw",
            "-c",
            "read -P 0xcd 3M 64k",
            "-c",
            "read -P 0x17 1000 3000",
        ])
        .arg(&server.uri));
    assert!(!q.contains("Pattern verification failed"), "{q}");
    assert!(server.terminate().success());
}

#[test]
fn a_volume_with_the_timing_model_on_serves_real_clients() {
    require("nbdinfo", "libnbd-bin");
    require("qemu-io", "qemu-utils");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&[
        "--memory",
        "64M",
        "--timing",
        "zn540",
        "--listen",
        &sock(dir.path()),
    ]);
    assert!(
        server.banner.contains("timing profile zn540 in real time"),
        "the banner must say timing is on: {}",
        server.banner
    );
    let info = run(Command::new("nbdinfo").arg("--size").arg(&server.uri));
    assert_eq!(info.trim(), (64u64 << 20).to_string());
    let q = run(Command::new("qemu-io")
        .args([
            "-f",
            "raw",
            "-c",
            "write -P 0x5e 0 2M",
            "-c",
            "write -P 0x21 5M 12k",
            "-c",
            "flush",
            "-c",
            "read -P 0x5e 0 2M",
            "-c",
            "read -P 0x21 5M 12k",
            "-c",
            "read -P 0 6M 4k",
        ])
        .arg(&server.uri));
    assert!(!q.contains("Pattern verification failed"), "{q}");
    assert!(server.terminate().success());
}

#[test]
fn fio_random_writes_verify_with_crc32c() {
    fio_writes_verify(&[]);
}

/// The same with `--request-thread`: requests run on the server's request thread while the
/// reader reads the next ones, and every block fio wrote reads back as written.
#[test]
fn fio_random_writes_verify_with_the_request_thread() {
    fio_writes_verify(&["--request-thread"]);
}

/// fio writes 96 MiB at random with crc32c checksums, then verifies them in a second pass,
/// against `zonestack serve --memory 128M` with `extra` options.
fn fio_writes_verify(extra: &[&str]) {
    require("fio", "fio");
    let dir = tempfile::tempdir().expect("tempdir");
    let listen = sock(dir.path());
    let mut args = vec!["--memory", "128M", "--listen", &listen];
    args.extend_from_slice(extra);
    let server = Server::start(&args);
    let common = |rw: &str, verify_only: bool| {
        let mut c = Command::new("fio");
        // fio leaves its verify state file in the working directory.
        c.current_dir(dir.path());
        c.args([
            "--name=ftl",
            "--ioengine=nbd",
            "--bs=4k",
            "--size=96M",
            "--iodepth=16",
            "--verify=crc32c",
            "--randseed=7",
        ]);
        c.arg(format!("--uri={}", server.uri))
            .arg(format!("--rw={rw}"));
        if verify_only {
            c.arg("--verify_only");
        } else {
            c.arg("--do_verify=0");
        }
        c
    };
    let w = run(&mut common("randwrite", false));
    assert!(w.contains("WRITE:"), "{w}");
    let v = run(&mut common("randwrite", true));
    assert!(!v.contains("verify:") || !v.contains("bad"), "{v}");
    assert!(
        v.contains("READ:") || v.contains("read:"),
        "the verify pass read nothing: {v}"
    );
    assert!(server.terminate().success());
}

/// Tears down what the ext4 test set up, whatever happened.
struct Mounts {
    mnt: PathBuf,
    fuse: PathBuf,
    loopdev: Option<String>,
    nbdfuse: Option<Child>,
}

impl Mounts {
    fn release(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        if let Some(l) = self.loopdev.take() {
            let _ = Command::new("losetup").args(["-d", &l]).status();
        }
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.fuse)
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.fuse)
            .stderr(Stdio::null())
            .status();
        if let Some(mut c) = self.nbdfuse.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Mounts {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mnt)
            .stderr(Stdio::null())
            .status();
        self.release();
    }
}

/// nbdfuse exposes the export as a file; returns once the file has the export's size.
fn attach(uri: &str, m: &mut Mounts) -> PathBuf {
    let file = m.fuse.join("disk");
    let child = Command::new("nbdfuse")
        .arg(&file)
        .arg(uri)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn nbdfuse");
    m.nbdfuse = Some(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&file).map(|md| md.len()).unwrap_or(0) == 0 {
        assert!(
            Instant::now() < deadline,
            "nbdfuse did not expose {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let l = run(Command::new("losetup").args(["-f", "--show"]).arg(&file));
    m.loopdev = Some(l.trim().to_string());
    file
}

#[test]
fn ext4_on_nbdfuse_keeps_synced_files_across_a_killed_server() {
    for (t, p) in [
        ("nbdfuse", "libnbd-bin"),
        ("mkfs.ext4", "e2fsprogs"),
        ("e2fsck", "e2fsprogs"),
        ("losetup", "mount"),
        ("fusermount3", "fuse3"),
    ] {
        require(t, p);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("dev.img");
    run(Command::new(env!("CARGO_BIN_EXE_zonestack"))
        .args(["device", "create"])
        .arg(&img)
        .args(["--zones", "256"]));
    let (mnt, fuse) = (dir.path().join("mnt"), dir.path().join("fuse"));
    std::fs::create_dir_all(&mnt).expect("mkdir");
    std::fs::create_dir_all(&fuse).expect("mkdir");
    let s = sock(dir.path());
    let img_arg = img.to_str().expect("path").to_string();
    let mut m = Mounts {
        mnt: mnt.clone(),
        fuse: fuse.clone(),
        loopdev: None,
        nbdfuse: None,
    };

    let server = Server::start(&["--device", &img_arg, "--listen", &s]);
    attach(&server.uri, &mut m);
    let dev = m.loopdev.clone().expect("loop device");
    run(Command::new("mkfs.ext4").args(["-q", "-F", &dev]));
    run(Command::new("mount").arg(&dev).arg(&mnt));
    let mut expect = Vec::new();
    for i in 0..16u32 {
        let data: Vec<u8> = (0..(64 * 1024 + i * 4099))
            .map(|j| (j.wrapping_mul(2654435761) >> (i % 24)) as u8)
            .collect();
        std::fs::write(mnt.join(format!("f{i}")), &data).expect("write file");
        expect.push(data);
    }
    run(&mut Command::new("sync"));
    // The server dies without a flush or a checkpoint.
    server.kill();
    let _ = Command::new("umount").arg("-l").arg(&mnt).status();
    m.release();
    let _ = std::fs::remove_file(dir.path().join("nbd.sock"));

    let server = Server::start(&["--device", &img_arg, "--listen", &s]);
    attach(&server.uri, &mut m);
    let dev = m.loopdev.clone().expect("loop device");
    // Mounting replays the ext4 journal; then every synced file must be intact.
    run(Command::new("mount").arg(&dev).arg(&mnt));
    for (i, data) in expect.iter().enumerate() {
        let got = std::fs::read(mnt.join(format!("f{i}"))).expect("read file");
        assert!(got == *data, "file f{i} differs after the crash");
    }
    run(Command::new("umount").arg(&mnt));
    let fsck = run(Command::new("e2fsck").args(["-fn", &dev]));
    assert!(fsck.contains("16") || fsck.contains("files"), "{fsck}");
    m.release();
    assert!(server.terminate().success());
}
