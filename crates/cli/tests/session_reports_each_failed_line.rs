//! `zonestack session` names the line of every error, goes on after lines that are not
//! UTF-8 or are too long, and exits 1 when any line failed.

mod common;
use common::{ok, session};

fn image(dir: &std::path::Path) -> String {
    let p = dir.join("dev.img");
    let ps = p.to_str().expect("utf-8 path").to_string();
    ok(&["device", "create", &ps, "--profile", "small"]);
    ps
}

#[test]
fn a_failed_line_is_named_and_makes_the_session_exit_1() {
    // A session exited 0 even when lines failed, and its errors did not say which line
    // they were about, so a script could not tell that (or where) its commands failed.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path());
    let o = session(
        &p,
        b"# a comment\n\nio write --lba 0 --blocks 1 --pattern 1\nio write --lba 9 --blocks 1 --pattern 1\nio write --lba 1 --blocks 1 --pattern 2\n",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], "ok");
    assert!(
        lines[1].starts_with("error: line 4: Zone Invalid Write"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], "ok", "the session goes on after a failed line");
    assert!(
        err.contains("1 of 3 command lines failed (the first at line 4)"),
        "{err}"
    );
}

#[test]
fn a_session_without_failures_exits_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path());
    let o = session(
        &p,
        b"io write --lba 0 --blocks 1 --pattern 1\nflush\nquit\nbogus\n",
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\nok\n");
}

#[test]
fn invalid_utf8_and_overlong_lines_fail_alone() {
    // One line of invalid UTF-8 ended the whole session with an error that named no line,
    // and a line had no length bound (a 256 MiB line took 1 GB of memory).
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path());
    let mut script = b"io write --lba 0 --blocks 1 --pattern 1\n\xff\xfe zone report\n".to_vec();
    script.extend(std::iter::repeat_n(b'a', 1 << 20));
    script.extend_from_slice(
        b"\nio write --lba 1 --blocks 1 --pattern 2\nzone report --json --count 1\n",
    );
    let o = session(&p, &script);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "ok");
    assert!(
        lines[1].starts_with("error: line 2: the line is not UTF-8"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("error: line 3: the line is 1048576 bytes, over the limit of 65536"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], "ok", "the line after the overlong one runs");
    assert!(
        lines[4].contains("\"wp\":2"),
        "both writes landed: {}",
        lines[4]
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 of 5 command lines failed"), "{err}");
}

#[test]
fn a_log_level_inside_a_session_line_is_refused() {
    // The global option parses on every line but could only be ignored there.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = image(dir.path());
    let o = session(&p, b"zone report --count 1 --log-level debug\n");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.starts_with("error: line 1: --log-level applies to the whole session"),
        "{out}"
    );
}
