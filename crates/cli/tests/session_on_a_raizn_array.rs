//! `zonestack session --raizn a.img,b.img,c.img`: a session runs its lines on a RAIZN array
//! kept open between them (an explicitly opened zone stays open, which one-shot commands
//! cannot show, since each of them reopens the array), flushes it at the end so one-shot
//! commands read what the session wrote, refuses the lines only one image has, and runs with
//! a member `missing` (degraded) as well.

mod common;

use std::path::PathBuf;

use common::path_str as s;
use common::{ok, read_array, session_with};

fn list(m: &[PathBuf]) -> String {
    m.iter().map(|p| s(p)).collect::<Vec<_>>().join(",")
}

#[test]
fn session_runs_lines_on_an_open_array() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = common::member_images(dir.path(), "m", 3, &["--zones", "8"]);
    let mut create = vec!["raizn", "create"];
    create.extend(m.iter().map(|p| s(p)));
    ok(&create);
    let a = list(&m);
    let script = b"zone open --zone 1\n\
        io write --lba 0 --blocks 200 --pattern 0x5a\n\
        zone report --json --start 1 --count 1\n\
        flush\n\
        stats\n\
        power-loss --seed 3\n\
        io write --raizn x.img --lba 200 --blocks 1 --pattern 1\n\
        io write --lba 200 --blocks 56 --pattern 0x5b\n";
    let o = session_with(&["--raizn", &a], script);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Zone 1 was opened by line 1 and is still open at line 3: the array stayed open.
    assert!(out.contains("explicitly_opened"), "{out}");
    assert!(out.contains("error: line 5: `stats`"), "{out}");
    assert!(
        out.contains("error: line 6:") && out.contains("RAIZN array"),
        "{out}"
    );
    assert!(
        out.contains("error: line 7:") && out.contains("--raizn"),
        "{out}"
    );
    assert!(
        err.contains("3 of 8 command lines failed (the first at line 5)"),
        "{err}"
    );
    // The last write, after the failed lines, ran; everything reads back after the session.
    let data = read_array(&a, 256, &dir.path().join("r.bin"));
    assert!(data[..200 * 4096].iter().all(|b| *b == 0x5a));
    assert!(data[200 * 4096..].iter().all(|b| *b == 0x5b));

    // With member 1 missing the session runs degraded: reads rebuild its units.
    let gone = [s(&m[0]), "missing", s(&m[2])].join(",");
    let back = dir.path().join("back.bin");
    let line = format!("io read --lba 0 --blocks 256 --out {}\n", s(&back));
    let o = session_with(&["--raizn", &gone], line.as_bytes());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&back).expect("read back"), data);
}

#[test]
fn session_needs_a_path_or_an_array() {
    let o = session_with(&[], b"");
    assert_eq!(o.status.code(), Some(2));
    let dir = tempfile::tempdir().expect("tempdir");
    let m = common::member_images(dir.path(), "m", 1, &["--zones", "8"]);
    let o = session_with(&[s(&m[0]), "--raizn", "a.img,b.img,c.img"], b"");
    assert_eq!(o.status.code(), Some(2));
}
