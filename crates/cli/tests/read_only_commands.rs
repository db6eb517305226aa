//! Commands that only read an image (device info, zone report, io read, ftl check and
//! stats) open it read-only, so they work on a read-only file or mount and beside another
//! reader; commands that change it still open it for writing.

mod common;
use common::{ok, zonestack};

#[test]
fn read_only_commands_work_while_another_process_reads_the_image() {
    // Regression: every command opened the image O_RDWR with an exclusive lock, so read-only
    // commands failed on a read-only file or mount. Tests run as root, where permission bits
    // do not stop a writer, so the proof is a shared lock held here: an exclusive open fails
    // beside it, a read-only open does not.
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("ro.img").to_string_lossy().into_owned();
    ok(&["device", "create", &img, "--profile", "small"]);
    ok(&["ftl", "format", &img, "--op", "25"]);
    let mut perms = std::fs::metadata(&img).expect("stat").permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&img, perms).expect("chmod 0444");
    let reader = std::fs::File::open(&img).expect("open");
    reader.try_lock_shared().expect("shared lock");
    ok(&["device", "info", &img]);
    ok(&["zone", "report", &img]);
    ok(&["io", "read", &img, "--lba", "0", "--blocks", "1"]);
    let check = ok(&["ftl", "check", &img]);
    assert!(check.contains("clean"), "{check}");
    ok(&["ftl", "stats", &img, "--json"]);
    let o = zonestack(&["zone", "reset", &img, "--all"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("in use by another process"), "{err}");
}
