//! Creating an image that fails part way (the host file system full, "File too large")
//! removes the file it created, so that the retry is not refused with "already exists"; a
//! file that existed before (`force`) is never removed, and the error says what is left.

mod common;

use common::small_geometry;
use emu::failpoint::{self, ENOSPC};
use emu::{EmuConfig, EmuDevice, EmuError};

#[test]
fn a_create_that_fails_at_any_host_write_leaves_no_file_behind() {
    // Regression: a failed `device create` left an empty file, and the retry was refused
    // with "already exists; pass --force".
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev.img");
    let cfg = EmuConfig::new(small_geometry());
    let mut failures = 0;
    for nth in 1.. {
        failpoint::fail_nth_host_write(nth, ENOSPC);
        let r = EmuDevice::create_file(&path, cfg, false);
        failpoint::disarm();
        match r {
            Err(EmuError::Create(text)) => {
                failures += 1;
                assert!(
                    text.contains("no space left on the host file system"),
                    "{text}"
                );
                assert!(text.contains("was removed"), "{text}");
                assert!(
                    !path.exists(),
                    "host write {nth}: the failed create left a file"
                );
            }
            Err(e) => panic!("host write {nth}: unexpected error {e}"),
            Ok(dev) => {
                dev.shutdown().expect("shutdown");
                break;
            }
        }
    }
    // Two ftruncates, the zone table, the superblock and the fsync each failed once.
    assert_eq!(failures, 5);
    assert!(EmuDevice::image_was_clean(&path).expect("a valid image"));
}

#[test]
fn a_forced_create_over_an_existing_file_keeps_it_and_says_what_is_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.img");
    std::fs::write(&path, b"someone's data").expect("write");
    let cfg = EmuConfig::new(small_geometry());
    assert!(matches!(
        EmuDevice::create_file(&path, cfg, false),
        Err(EmuError::Exists(_))
    ));
    assert_eq!(std::fs::read(&path).expect("read"), b"someone's data");
    failpoint::fail_nth_host_write(2, ENOSPC);
    let r = EmuDevice::create_file(&path, cfg, true);
    failpoint::disarm();
    match r {
        Err(EmuError::Create(text)) => {
            assert!(text.contains("overwritten in part"), "{text}");
            assert!(text.contains("--force"), "{text}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("the injected failure did not happen"),
    }
    assert!(path.exists(), "a file the create did not make was removed");
    let dev = EmuDevice::create_file(&path, cfg, true).expect("forced retry");
    dev.shutdown().expect("shutdown");
}
