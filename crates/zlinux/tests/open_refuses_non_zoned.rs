//! Opening anything but a host-managed zoned block device fails with an error that says
//! what the path is (this machine has no zoned devices; the VM tests cover the real ones).

use zlinux::{LinuxZoned, OpenError};

#[test]
fn regular_files_character_devices_and_missing_paths_are_refused() {
    let dir = std::env::temp_dir().join(format!("zlinux-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("image");
    std::fs::write(&file, [0u8; 4096]).unwrap();
    let e = LinuxZoned::open(&file)
        .err()
        .expect("a regular file is no zoned device");
    assert!(matches!(e, OpenError::NotBlockDevice(_)), "{e}");
    assert!(e.to_string().contains("not a block device"), "{e}");
    let e = LinuxZoned::open(std::path::Path::new("/dev/null"))
        .err()
        .expect("/dev/null");
    assert!(matches!(e, OpenError::NotBlockDevice(_)), "{e}");
    let e = LinuxZoned::open(&dir.join("missing"))
        .err()
        .expect("missing path");
    assert!(matches!(e, OpenError::Io { .. }), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
