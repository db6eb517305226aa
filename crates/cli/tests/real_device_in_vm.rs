//! `zonestack` on real zoned block devices: one VM boot (scripts/vm) with two QEMU NVMe ZNS
//! namespaces runs the real binary on them. `device check --destructive` on the namespace
//! with the kit's layout fails only the items the backend is known to fail on a namespace
//! with passthrough (zlinux::known_kit_failures), and passes the items that copy; `ftl format` refuses a namespace holding data until
//! --force; `zone reset` refuses too; a device held by a running `serve` is refused as busy;
//! the volume mounts after format, and `serve --device` exports it to the kernel's own NBD
//! client, where mkfs.ext4 makes a file system whose files read back after the server is
//! stopped and started again; Zone Append goes through NVMe passthrough; a RAIZN array runs
//! over three namespaces, and a ZapRAID array over them is served to the NBD client (its
//! members held while it serves); fio itself (zonemode=zbd) and `zonestack bench --device`
//! agree on what one job file does to a namespace; a block job file runs through the host
//! FTL on a namespace (`bench --device DRIVE --target ftl`).

// The VM-running helpers are zlinux's own test harness, shared rather than copied.
#[path = "../../zlinux/tests/common/mod.rs"]
mod vm_harness;

/// /dev/nvme0n1 has the kit's layout (8 zones of 64 blocks, 48 writable, 4 KiB, max open 3,
/// max active 4) and Copy limits (4 ranges, 16 blocks per range, 32 in all); /dev/nvme0n2 holds an FTL volume (24 zones of 1 MiB, no limits: an 18.5 MiB
/// volume on 22 data zones, small enough that writing it three times needs garbage
/// collection); /dev/nvme0n3-5 are the members of a RAIZN array (8 zones of 1 MiB each);
/// /dev/nvme0n6 runs the fio job file (8 zones of 1 MiB); /dev/nvme0n7 has null_blk's
/// layout below, for the kit on both; /dev/nvme0n8 is nvme0n1 with 16 bytes of per-block
/// metadata, for the kit's metadata items; /dev/nvme0n9 holds an FTL volume in per-block
/// metadata mode (24 zones of 1 MiB with 16 bytes of metadata per block).
const NAMESPACES: [&str; 9] = [
    "zones=8,zone_size=256K,zone_capacity=192K,max_open=3,max_active=4,mssrl=16,mcl=32,msrc=3",
    "zones=24,zone_size=1M",
    "zones=8,zone_size=1M",
    "zones=8,zone_size=1M",
    "zones=8,zone_size=1M",
    "zones=8,zone_size=1M",
    "zones=8,zone_size=2M,zone_capacity=1M,max_open=3,max_active=4",
    "zones=8,zone_size=256K,zone_capacity=192K,max_open=3,max_active=4,mssrl=16,mcl=32,msrc=3,ms=16",
    "zones=24,zone_size=1M,ms=16",
];

/// A null_blk zoned device as close to the kit's layout as null_blk's MiB-sized zones get:
/// 8 zones of 2 MiB with 1 MiB writable, 4 KiB blocks, max open 3, max active 4.
const NULLBLK: &str =
    "size=16,blocksize=4096,zone_size=2,zone_capacity=1,zone_max_open=3,zone_max_active=4";

/// The job file the bench steps run, at /drive.fio in the guest (its /tmp is a fresh tmpfs).
const JOBFILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/fio/drive-functional.fio"
);

/// The block job file the host FTL runs on a drive, at /block.fio in the guest.
const BLOCK_JOBFILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/fio/drive-block.fio"
);

/// The host's mke2fs, run as mkfs.ext4 in the guest, and its configuration.
const MKFS: &str = "/usr/sbin/mke2fs:/bin/mkfs.ext4";
const MKFS_CONF: &str = "/etc/mke2fs.conf:/etc/mke2fs.conf";

/// The guest script: each step prints its output and then `@@ STEP exit=N`.
const GUEST: &str = r#"
Z=/bin/zonestack
step() { name=$1; shift; "$@"; echo "@@ $name exit=$?"; }
# NBD steps are bounded: the kernel client fails requests the server has not answered in
# 60 s (-t), each step is killed after 120 s, and a failed one prints what the server and
# the kernel said, so a stuck volume fails the test with its story, not the VM's timeout.
nstep() {
  name=$1; shift; timeout 120 "$@"; rc=$?; echo "@@ $name exit=$rc"
  [ $rc = 0 ] || { cat /tmp/serve.log; dmesg | tail -n 20; }
}
step check $Z device check /dev/nvme0n1 --destructive
step report-empty $Z zone report /dev/nvme0n2 --count 2
step write $Z io write /dev/nvme0n2 --lba 0 --blocks 1 --pattern 0xab
step format-refused $Z ftl format /dev/nvme0n2 --op 30
step check-refused $Z device check /dev/nvme0n2
step reset-refused $Z zone reset /dev/nvme0n2 --zone 0
step format-forced $Z ftl format /dev/nvme0n2 --op 30 --force
step mount $Z ftl mount /dev/nvme0n2
step stats $Z ftl stats /dev/nvme0n2
step report $Z zone report /dev/nvme0n2 --count 3
ip link set lo up
serve() {
  # The log of an earlier run must not satisfy the wait below before this one starts; until
  # the shell creates the new one, grep must not print that it is missing (-s), which would
  # land in the next step's output.
  rm -f /tmp/serve.log
  # No argument: the FTL on nvme0n2; a path: the FTL on it; else serve's own options.
  if [ $# = 0 ]; then set -- --device /dev/nvme0n2; elif [ "${1#--}" = "$1" ]; then set -- --device "$1"; fi
  $Z serve "$@" --listen tcp:127.0.0.1:10809 --log-level info >/tmp/serve.log 2>&1 &
  pid=$!
  t=0; while ! grep -qs serving /tmp/serve.log && [ $t -lt 300 ]; do sleep 0.1; t=$((t + 1)); done
}
serve
step busy $Z zone report /dev/nvme0n2
nstep nbd-connect nbd-client -t 60 127.0.0.1 10809 /dev/nbd0
nstep overwrite sh -c 'for i in 1 2 3; do dd if=/dev/urandom of=/dev/nbd0 bs=1M count=18 conv=fsync 2>&1 || exit 1; done'
nstep mkfs mkfs.ext4 -q -F /dev/nbd0
mkdir -p /mnt
nstep ext4-mount mount -t ext4 /dev/nbd0 /mnt
dd if=/dev/urandom of=/mnt/big bs=1M count=8 2>/dev/null
echo hello >/mnt/small.txt
md5sum /mnt/big /mnt/small.txt >/tmp/sums
sync
nstep umount umount /mnt
nstep nbd-disconnect nbd-client -d /dev/nbd0
kill -TERM $pid; wait $pid; echo "@@ serve exit=$?"
cat /tmp/serve.log
serve
nstep nbd-reconnect nbd-client -t 60 127.0.0.1 10809 /dev/nbd0
nstep ext4-remount mount -t ext4 /dev/nbd0 /mnt
nstep verify md5sum -c /tmp/sums
md5sum /mnt/big /mnt/small.txt
umount /mnt
nbd-client -d /dev/nbd0
kill -TERM $pid; wait $pid; echo "@@ serve-again exit=$?"
cat /tmp/serve.log
step ftl-check $Z ftl check /dev/nvme0n2
step reset-forced $Z zone reset /dev/nvme0n2 --all --force
step append-1 $Z io append /dev/nvme0n2 --zone 3 --blocks 2 --pattern 0x11
step append-2 $Z io append /dev/nvme0n2 --zone 3 --blocks 1 --pattern 0x22 --fua
step ftl-append $Z ftl format /dev/nvme0n2 --op 30 --force
step ftl-append-mount $Z ftl mount /dev/nvme0n2 --write-mode append
step session sh -c "printf 'zone report --count 1\nstats\n' | $Z session /dev/nvme0n2"
# Block jobs through the host FTL on the drive: the empty volume just formatted runs them;
# then it holds data, so a second run is refused without --force; a drive with no volume is
# refused naming `ftl format`; the volume checks clean after the jobs.
step bench-ftl $Z bench /block.fio --device /dev/nvme0n2 --target ftl --output-format json
step bench-ftl-refused $Z bench /block.fio --device /dev/nvme0n2 --target ftl
step bench-ftl-check $Z ftl check /dev/nvme0n2
step bench-ftl-none $Z bench /block.fio --device /dev/nvme0n6 --target ftl
# `device create` never writes an image over a drive, even with --force.
step create-refused $Z device create /dev/nvme0n6 --zones 8 --force
M="/dev/nvme0n3 /dev/nvme0n4 /dev/nvme0n5"
A=/dev/nvme0n3,/dev/nvme0n4,/dev/nvme0n5
step raizn-create $Z raizn create $M
step raizn-write $Z io write --raizn $A --lba 0 --blocks 32 --pattern 0x5c
step raizn-read $Z io read --raizn $A --lba 31 --blocks 1
step raizn-check $Z raizn check $M
step raizn-reset-refused $Z zone reset --raizn $A --all
step raizn-reset-forced $Z zone reset --raizn $A --all --force
step zapraid-format $Z zapraid format $M --force
step zapraid-check $Z zapraid check $M
# ZapRAID over the three drives served to the kernel's NBD client: a member is held while
# it serves; what was written reads back after the server is stopped and started again.
dd if=/dev/urandom of=/tmp/z bs=64k count=16 2>/dev/null
serve --zapraid $A
step zapraid-busy $Z zone report /dev/nvme0n4
nstep zapraid-connect nbd-client -t 60 127.0.0.1 10809 /dev/nbd0
nstep zapraid-write dd if=/tmp/z of=/dev/nbd0 bs=64k conv=fsync
nstep zapraid-disconnect nbd-client -d /dev/nbd0
kill -TERM $pid; wait $pid; echo "@@ zapraid-serve exit=$?"
serve --zapraid $A
nstep zapraid-reconnect nbd-client -t 60 127.0.0.1 10809 /dev/nbd0
nstep zapraid-read sh -c 'dd if=/dev/nbd0 bs=64k count=16 2>/dev/null | cmp - /tmp/z'
nbd-client -d /dev/nbd0
kill -TERM $pid; wait $pid; echo "@@ zapraid-serve-again exit=$?"
step zapraid-check-after $Z zapraid check $M
step nullblk-check $Z device check /dev/nullb0 --destructive
step nullblk-any $Z device check /dev/nullb0 --destructive --any-layout
step qemu-any $Z device check /dev/nvme0n7 --destructive --any-layout
step bench $Z bench /drive.fio --device /dev/nvme0n6
step bench-refused $Z bench /drive.fio --device /dev/nvme0n6
step bench-forced $Z bench /drive.fio --device /dev/nvme0n6 --force --output-format json
step bench-zones $Z zone report /dev/nvme0n6 --count 7
cat >/agree.fio <<'JOB'
[global]
ioengine=io_uring
direct=1
zonemode=zbd
bs=64k
iodepth=4
max_open_zones=1

[seq-write]
rw=write
size=4m

[partial-write]
stonewall
rw=write
offset=4m
size=2m
io_size=1536k

[rand-read]
stonewall
rw=randread
size=4m
JOB
if [ -x /bin/fio ]; then
  step fio-reset $Z zone reset /dev/nvme0n6 --all --force
  step fio fio --output-format=json --filename=/dev/nvme0n6 /agree.fio
  step fio-zones $Z zone report /dev/nvme0n6 --count 8
fi
step agree-reset $Z zone reset /dev/nvme0n6 --all --force
step agree-bench $Z bench /agree.fio --device /dev/nvme0n6 --output-format json
step agree-zones $Z zone report /dev/nvme0n6 --count 8
step meta-check $Z device check /dev/ng0n8 --destructive
step meta-format $Z ftl format /dev/nvme0n9 --op 30
step meta-stats $Z ftl stats /dev/nvme0n9
dd if=/dev/urandom of=/tmp/m bs=1M count=4 2>/dev/null
serve /dev/nvme0n9
nstep meta-connect nbd-client -t 60 127.0.0.1 10809 /dev/nbd0
nstep meta-write dd if=/tmp/m of=/dev/nbd0 bs=1M conv=fsync
nstep meta-disconnect nbd-client -d /dev/nbd0
# A crash: no checkpoint, so the check and the next mount rebuild the mapping from the
# block tags the FTL keeps in each block's metadata.
kill -KILL $pid; wait $pid
step meta-ftl-check $Z ftl check /dev/nvme0n9
serve /dev/nvme0n9
nstep meta-reconnect nbd-client -t 60 127.0.0.1 10809 /dev/nbd0
echo 3 >/proc/sys/vm/drop_caches
nstep meta-read sh -c 'dd if=/dev/nbd0 bs=1M count=4 2>/dev/null | cmp - /tmp/m'
nbd-client -d /dev/nbd0
kill -TERM $pid; wait $pid; echo "@@ meta-serve exit=$?"
"#;

/// The output of step `name` (between the previous marker and its own) and its exit status.
fn step<'a>(out: &'a str, name: &str) -> (&'a str, i32) {
    let marker = format!("@@ {name} exit=");
    let at = out
        .find(&marker)
        .unwrap_or_else(|| panic!("no step {name} in:\n{out}"));
    let start = out[..at]
        .rfind("@@ ")
        .map_or(0, |p| p + out[p..].find('\n').unwrap_or(0) + 1);
    let code = out[at + marker.len()..]
        .split_whitespace()
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("step {name}: no exit status"));
    (&out[start.min(at)..at], code)
}

#[test]
fn zonestack_runs_on_qemu_zns_namespaces() {
    let exe = env!("CARGO_BIN_EXE_zonestack");
    let file = format!("{exe}:/bin/zonestack");
    let mut args = Vec::new();
    for ns in NAMESPACES {
        args.extend(["--ns", ns]);
    }
    let job = format!("{JOBFILE}:/drive.fio");
    let block_job = format!("{BLOCK_JOBFILE}:/block.fio");
    args.extend(["--nullblk", NULLBLK, "--file", &job, "--file", &block_job]);
    args.extend(["--file", &file, "--timeout", "400"]);
    // fio itself, with the shared libraries it links, when the host has it (./scripts/test
    // installs it): the same job file runs under fio and under `zonestack bench`.
    let fio = host_fio().map(|p| format!("{}:/bin/fio", p.display()));
    if let Some(f) = &fio {
        args.extend(["--file", f]);
    }
    // The kernel's NBD client and ext4 over the served volume: nbd-client is not in busybox,
    // so it comes from Debian's package (with the one library the host may lack); mkfs.ext4
    // is the host's.
    args.extend([
        "--module",
        "nbd",
        "--module",
        "ext4",
        "--module",
        "crc32c_generic",
    ]);
    args.extend(["--deb", "nbd-client", "--deb", "libnl-genl-3-200"]);
    args.extend(["--file", MKFS, "--file", MKFS_CONF]);
    let Some(run) = vm_harness::run_vm(&args, GUEST) else {
        return;
    };
    let out = run.stdout.as_str();
    println!("{out}\n{}", run.stderr);
    assert_eq!(run.status, 0, "guest script: {}", run.stderr);

    let (check, code) = step(out, "check");
    let items: Vec<&str> = check.lines().filter(|l| l.starts_with("item ")).collect();
    assert_eq!(items.len(), zns::conformance::ITEMS.len(), "{check}");
    assert!(items.iter().any(|l| l.contains(" pass: ")), "{check}");
    let known = zlinux::known_kit_failures(zlinux::DeviceTraits {
        append: true,
        copy: true,
        null_blk: false,
        metadata: false,
    });
    for line in items.iter().filter(|l| l.contains(" FAIL: ")) {
        let n: u32 = line[5..7].trim().parse().expect("item number");
        assert!(
            known.iter().any(|(k, _)| *k == n),
            "unexpected failure: {line}"
        );
        assert!(line.contains("[known: "), "{line}");
    }
    let failed = items.iter().filter(|l| l.contains(" FAIL: ")).count();
    assert_eq!(
        code,
        i32::from(failed > 0),
        "exit 1 exactly when an item failed"
    );

    let (report, code) = step(out, "report-empty");
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("zcond: 1(em)"), "{report}");
    assert_eq!(step(out, "write").1, 0);
    for refused in ["format-refused", "check-refused", "reset-refused"] {
        let (text, code) = step(out, refused);
        assert_eq!(code, 1, "{refused}: {text}");
        assert!(
            text.contains("--force") || text.contains("--destructive"),
            "{refused} names the flag: {text}"
        );
    }
    let (text, code) = step(out, "format-forced");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("formatted /dev/nvme0n2"), "{text}");
    let (text, code) = step(out, "mount");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("unmounted cleanly"), "{text}");
    assert_eq!(step(out, "stats").1, 0);
    let (text, code) = step(out, "busy");
    assert_eq!(code, 1, "a device held by serve is refused: {text}");
    assert!(text.contains("busy"), "{text}");
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
    // Regression: the FTL relocated with Simple Copy on drives, which the block device
    // interface does not offer, so the first garbage collection failed the volume and the
    // writes after it with EIO.
    for s in [
        "nbd-connect",
        "overwrite",
        "mkfs",
        "ext4-mount",
        "umount",
        "nbd-disconnect",
        "serve",
        "nbd-reconnect",
        "ext4-remount",
        "serve-again",
        "ftl-check",
        "reset-forced",
    ] {
        let (text, code) = step(out, s);
        assert_eq!(code, 0, "{s}: {text}");
    }
    // Zone Append goes through NVMe passthrough (/dev/ng0n2): each prints where it landed,
    // the second right after the first (zone 3 starts at block 768). The kit's append items
    // pass on the namespace with the kit's layout.
    let (text, code) = step(out, "append-1");
    assert_eq!((text.trim(), code), ("768", 0), "{text}");
    let (text, code) = step(out, "append-2");
    assert_eq!((text.trim(), code), ("770", 0), "{text}");
    for item in [26, 28, 30] {
        let line = format!("item {item} pass: ");
        assert!(check.contains(&line), "{line} in:\n{check}");
    }
    // Simple Copy goes through passthrough too: item 39, which copies, passes on nvme0n1 (item
    // 33 needs a zone forced offline, which a drive cannot do, and 4 and 24 another layout;
    // conformance_in_vm.rs runs those).
    assert!(check.contains("item 39 pass: "), "item 39 in:\n{check}");
    for s in ["ftl-append", "ftl-append-mount"] {
        let (text, code) = step(out, s);
        assert_eq!(code, 0, "{s}: {text}");
    }
    // A session on a drive runs its lines; the emulator-only ones say so.
    let (text, code) = step(out, "session");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("zcond:"), "{text}");
    assert!(text.contains("error: line 2:"), "{text}");
    assert!(text.contains("emulator images only"), "{text}");
    // RAIZN over three drives: created, written, read back, parity checked; its reset needs
    // --force like a drive's. Drives through the block layer have no per-block metadata, so
    // ZapRAID keeps its block records in-band there (group summaries) and says so.
    for s in [
        "raizn-create",
        "raizn-write",
        "raizn-check",
        "raizn-reset-forced",
    ] {
        let (text, code) = step(out, s);
        assert_eq!(code, 0, "{s}: {text}");
    }
    let (text, code) = step(out, "raizn-read");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("5c 5c 5c 5c"), "{text}");
    let (text, code) = step(out, "raizn-reset-refused");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("--force"), "{text}");
    let (text, code) = step(out, "zapraid-format");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("block records in-band"), "{text}");
    let (text, code) = step(out, "zapraid-check");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("clean:"), "{text}");
    check_zapraid_served(out);
    check_null_blk(out);
    check_bench(out);
    check_bench_ftl(out);
    check_fio_agrees(out, fio.is_some());
    check_metadata(out);
    // The files written through the kernel's NBD client and ext4 read back after the server
    // was stopped (volume flushed and checkpointed) and started again on the drive.
    let (text, code) = step(out, "verify");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("/mnt/big: OK") && text.contains("/mnt/small.txt: OK"),
        "{text}"
    );
}

/// `device check` on null_blk: one line per item; on its own layout no item applies (null_blk
/// sizes zones in MiB, the kit's zones are 256 KiB). With --any-layout on null_blk and on a
/// QEMU namespace of the same layout, the failures are printed for docs/TESTING.md.
fn check_null_blk(out: &str) {
    let (check, code) = step(out, "nullblk-check");
    assert_eq!(code, 0, "{check}");
    let none = format!(
        "0 passed, 0 failed, {} not applicable",
        zns::conformance::ITEMS.len()
    );
    assert!(check.contains(&none), "{check}");
    let (nullb, _) = step(out, "nullblk-any");
    let (qemu, _) = step(out, "qemu-any");
    for text in [nullb, qemu] {
        let items = text.lines().filter(|l| l.starts_with("item ")).count();
        assert_eq!(items, zns::conformance::ITEMS.len(), "{text}");
    }
    // Where null_blk and QEMU disagree on the same layout (docs/TESTING.md): a reset zone's
    // old data, a closed zone at its start made Empty, a finish that checks the active limit.
    // Each is marked known on null_blk.
    for item in ["12", "15", "18", "35"] {
        let fail = format!("item {item} FAIL: ");
        let line = nullb.lines().find(|l| l.starts_with(&fail));
        assert!(
            line.is_some_and(|l| l.contains("[known: null_blk")),
            "{fail} on null_blk:\n{nullb}"
        );
        assert!(
            qemu.contains(&format!("item {item} pass: ")),
            "{item}:\n{qemu}"
        );
    }
}

/// `bench JOBFILE --device` on a drive: the three jobs run in real time and move what the
/// job file says; a drive holding data is refused without --force.
fn check_bench(out: &str) {
    let (text, code) = step(out, "bench");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("real time"), "{text}");
    for job in ["seq-write:", "append:", "rand-read:"] {
        assert!(text.contains(job), "{job} in {text}");
    }
    let (text, code) = step(out, "bench-refused");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("--force"), "{text}");
    let (text, code) = step(out, "bench-forced");
    assert_eq!(code, 0, "{text}");
    let json = &text[text.find('{').expect("json")..=text.rfind('}').expect("json")];
    let v: serde_json::Value = serde_json::from_str(json).expect("bench json");
    let bytes = |job: usize, dir: &str| v["jobs"][job][dir]["io_bytes"].as_u64();
    assert_eq!(bytes(0, "write"), Some(4 << 20), "{v}");
    assert_eq!(bytes(1, "write"), Some(2 << 20), "{v}");
    assert_eq!(bytes(2, "read"), Some(1 << 20), "{v}");
    // What the jobs left, as on an emulator image (docs/BENCHMARKS.md): the read job's
    // zones 0-3 filled with the 256 KiB each its reads need, zones 4-5 appended to
    // capacity, zone 6 untouched.
    let (text, code) = step(out, "bench-zones");
    assert_eq!(code, 0, "{text}");
    let zones: Vec<&str> = text.lines().filter(|l| l.contains("start:")).collect();
    let count = |cond: &str| zones.iter().filter(|l| l.contains(cond)).count();
    assert_eq!(
        (count("(oi)"), count("(fu)"), count("(em)")),
        (4, 2, 1),
        "{text}"
    );
    let filled = zones.iter().filter(|l| l.contains("wptr 0x000040")).count();
    assert_eq!(filled, 4, "{text}");
}

/// `bench JOBFILE --device DRIVE --target ftl`: the block jobs run through the host FTL on
/// the drive and move what the job file says; a volume holding data is refused without
/// --force, and a drive without a volume names `ftl format`.
fn check_bench_ftl(out: &str) {
    let (text, code) = step(out, "bench-ftl");
    assert_eq!(code, 0, "{text}");
    let v = json_of(text);
    let bytes = |job: usize, dir: &str| v["jobs"][job][dir]["io_bytes"].as_u64();
    assert_eq!(bytes(0, "write"), Some(8 << 20), "fill: {v}");
    assert_eq!(bytes(1, "write"), Some(2 << 20), "overwrite: {v}");
    assert_eq!(bytes(2, "read"), Some(1 << 20), "read: {v}");
    let user = v["volume"]["user_blocks_written"].as_u64().unwrap_or(0);
    assert!(user >= (10 << 20) / 4096, "the volume's figures: {v}");
    let (text, code) = step(out, "bench-ftl-refused");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("holds data") && text.contains("--force"),
        "{text}"
    );
    let (text, code) = step(out, "bench-ftl-check");
    assert_eq!(code, 0, "{text}");
    let (text, code) = step(out, "bench-ftl-none");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("ftl format /dev/nvme0n6"), "{text}");
    let (text, code) = step(out, "create-refused");
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("/dev/nvme0n6 is a block device, not an image file"),
        "{text}"
    );
}

/// `serve --zapraid` over three drives: a member is refused to others while served, and the
/// data written through the kernel's NBD client reads back after a restart.
fn check_zapraid_served(out: &str) {
    for s in [
        "zapraid-connect",
        "zapraid-write",
        "zapraid-disconnect",
        "zapraid-serve",
        "zapraid-reconnect",
        "zapraid-read",
        "zapraid-serve-again",
        "zapraid-check-after",
    ] {
        let (text, code) = step(out, s);
        assert_eq!(code, 0, "{s}: {text}");
    }
    let (text, code) = step(out, "zapraid-busy");
    assert_eq!(code, 1, "a member held by serve is refused: {text}");
    assert!(text.contains("busy"), "{text}");
}

/// The host's fio, found on PATH, or None.
fn host_fio() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("fio"))
        .find(|p| p.is_file())
}

/// The JSON document in a step's output (fio and `zonestack bench` print notes before it).
fn json_of(text: &str) -> serde_json::Value {
    let (Some(a), Some(b)) = (text.find('{'), text.rfind('}')) else {
        panic!("no JSON in:\n{text}");
    };
    serde_json::from_str(&text[a..=b]).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// (name, error, bytes read, bytes written) of each job of a fio-format JSON report.
fn job_outcomes(v: &serde_json::Value) -> Vec<(String, u64, u64, u64)> {
    let jobs = v["jobs"].as_array().expect("jobs");
    jobs.iter()
        .map(|j| {
            let name = j["jobname"].as_str().expect("jobname").to_string();
            let bytes = |dir: &str| j[dir]["io_bytes"].as_u64().expect("io_bytes");
            // fio reports each job's error (0 when none); zonestack fails the run instead.
            let error = j["error"].as_u64().unwrap_or(0);
            (name, error, bytes("read"), bytes("write"))
        })
        .collect()
}

/// The zone lines of a `zone report` step: start, write pointer and condition of each zone.
fn zone_lines(out: &str, name: &str) -> Vec<String> {
    let (text, code) = step(out, name);
    assert_eq!(code, 0, "{name}: {text}");
    text.lines()
        .filter(|l| l.contains("start:"))
        .map(|l| l.trim().to_string())
        .collect()
}

/// fio inside the VM (zonemode=zbd, O_DIRECT, io_uring) and `zonestack bench --device` run
/// the same job file on the same freshly reset namespace: both exit 0, no job fails, each
/// job moves the same bytes, and the zones end the same (the jobs are deterministic: whole
/// zones written in order, then 1.5 zones with one zone open at a time, then reads).
fn check_fio_agrees(out: &str, fio_in_guest: bool) {
    let (text, code) = step(out, "agree-bench");
    assert_eq!(code, 0, "{text}");
    let ours = job_outcomes(&json_of(text));
    let expected = [
        ("seq-write", 0, 0, 4 << 20),
        ("partial-write", 0, 0, 1536 << 10),
        ("rand-read", 0, 4 << 20, 0),
    ];
    let expected: Vec<(String, u64, u64, u64)> = expected
        .iter()
        .map(|(n, e, r, w)| (n.to_string(), *e, *r, *w))
        .collect();
    assert_eq!(ours, expected, "{text}");
    let zones = zone_lines(out, "agree-zones");
    let count = |cond: &str| zones.iter().filter(|l| l.contains(cond)).count();
    assert_eq!(
        (count("(fu)"), count("(oi)"), count("(em)")),
        (5, 1, 2),
        "{zones:#?}"
    );
    assert!(
        zones
            .iter()
            .any(|l| l.contains("start: 0x000000500") && l.contains("wptr 0x000080")),
        "zone 5 half written: {zones:#?}"
    );
    if !fio_in_guest {
        eprintln!("SKIPPED the fio comparison: fio is not installed on the host (./scripts/test installs it)");
        return;
    }
    assert_eq!(step(out, "fio-reset").1, 0);
    let (text, code) = step(out, "fio");
    assert_eq!(code, 0, "fio: {text}");
    assert_eq!(job_outcomes(&json_of(text)), expected, "fio: {text}");
    assert_eq!(
        zone_lines(out, "fio-zones"),
        zones,
        "zones after fio and after bench"
    );
}

/// Per-block metadata through NVMe passthrough: the kit on the generic character device of
/// a namespace formatted with 16 bytes per block fails only known items, and the items that
/// write and read back data with its metadata pass (item 42 itself builds a second
/// geometry, 512 B blocks with 64 B, so it never applies to one device; zlinux's
/// `guest_metadata_through_passthrough` covers its checks); the FTL formats on such a namespace in per-block metadata mode (its block
/// tags in the metadata, no summary blocks), takes 4 MiB through the kernel's NBD client,
/// and after the server is killed rebuilds its mapping from the tags: `ftl check` is clean
/// and the data reads back through a new server.
fn check_metadata(out: &str) {
    let (check, code) = step(out, "meta-check");
    assert!(check.contains("16 B metadata"), "{check}");
    for item in [2, 3, 5, 6, 7, 12, 18, 26, 28, 30] {
        let line = format!("item {item:>2} pass: ");
        assert!(check.contains(&line), "{line} in:\n{check}");
    }
    let known = zlinux::known_kit_failures(zlinux::DeviceTraits {
        append: true,
        copy: true,
        null_blk: false,
        metadata: true,
    });
    let items: Vec<&str> = check.lines().filter(|l| l.starts_with("item ")).collect();
    assert_eq!(items.len(), zns::conformance::ITEMS.len(), "{check}");
    for line in items.iter().filter(|l| l.contains(" FAIL: ")) {
        let n: u32 = line[5..7].trim().parse().expect("item number");
        assert!(
            known.iter().any(|(k, _)| *k == n),
            "unexpected failure: {line}"
        );
    }
    let failed = items.iter().any(|l| l.contains(" FAIL: "));
    assert_eq!(code, i32::from(failed), "{check}");
    let (text, code) = step(out, "meta-format");
    assert_eq!(code, 0, "{text}");
    let (text, code) = step(out, "meta-stats");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(" 0 summaries"),
        "block tags in metadata: {text}"
    );
    for s in [
        "meta-connect",
        "meta-write",
        "meta-disconnect",
        "meta-ftl-check",
        "meta-reconnect",
        "meta-read",
        "meta-serve",
    ] {
        let (text, code) = step(out, s);
        assert_eq!(code, 0, "{s}: {text}");
    }
}
