//! `zonestack zapraid recover`: rebuilds failed members onto the images named in their own
//! places (a new image swapped in for a dead drive), after the crash recovery every open
//! runs; with `--member` a member not yet recorded failed is recorded first.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok, path_str};

fn image(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    ok(&[
        "device",
        "create",
        path_str(&p),
        "--zones",
        "12",
        "--oob",
        "64",
    ]);
    p
}

fn args<'a>(head: &[&'a str], m: &'a [PathBuf]) -> Vec<&'a str> {
    let mut a = head.to_vec();
    a.extend(m.iter().map(|p| path_str(p)));
    a
}

#[test]
fn recover_rebuilds_failed_members_onto_the_images_in_their_places() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut m: Vec<PathBuf> = (0..4)
        .map(|i| image(dir.path(), &format!("z{i}.img")))
        .collect();
    ok(&args(&["zapraid", "format", "--group", "16"], &m));
    // A healthy array has nothing to rebuild.
    let text = ok(&args(&["zapraid", "recover"], &m));
    assert!(text.contains("no member is recorded failed"), "{text}");

    // Member 2 failed; a new image goes in its place and recover rebuilds it.
    ok(&args(&["zapraid", "fail", "--member", "2"], &m));
    m[2] = image(dir.path(), "new2.img");
    let text = ok(&args(&["zapraid", "recover"], &m));
    assert!(text.contains("rebuilding member 2 ("), "{text}");
    assert!(text.contains("member 2 rebuilt in place"), "{text}");
    assert!(text.contains("the array is healthy"), "{text}");
    let st = ok(&args(&["zapraid", "status"], &m));
    assert!(st.contains("all 4 healthy"), "{st}");
    assert!(ok(&args(&["zapraid", "check"], &m)).starts_with("clean:"));

    // A blank image swapped in for member 1 without `fail`: --member records it failed first.
    m[1] = image(dir.path(), "new1.img");
    let text = ok(&args(
        &["zapraid", "recover", "--member", "1", "--quiet"],
        &m,
    ));
    assert!(!text.contains("rebuilding"), "{text}");
    assert!(text.contains("member 1 rebuilt in place"), "{text}");
    let st = ok(&args(&["zapraid", "status", "--json"], &m));
    let v: serde_json::Value = serde_json::from_str(&st).expect("json");
    assert_eq!(v["failed_members"], serde_json::json!([]), "{st}");
    assert!(ok(&args(&["zapraid", "check"], &m)).starts_with("clean:"));
}

#[test]
fn recover_refuses_what_it_cannot_rebuild_onto() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut m: Vec<PathBuf> = (0..4)
        .map(|i| image(dir.path(), &format!("z{i}.img")))
        .collect();
    ok(&args(&["zapraid", "format", "--group", "16"], &m));
    ok(&args(&["zapraid", "fail", "--member", "3"], &m));
    // The failed member given as `missing`: no image to rebuild onto.
    let mut gone = m.clone();
    gone[3] = PathBuf::from("missing");
    let err = fails(&args(&["zapraid", "recover"], &gone), 2);
    assert!(err.contains("member 3 (missing) has no image"), "{err}");
    assert!(err.contains("replace"), "{err}");
    let err = fails(&args(&["zapraid", "recover", "--member", "3"], &gone), 2);
    assert!(err.contains("--member 3 is `missing`"), "{err}");
    // An image of another array in its place: the open refuses it, naming it (its headers
    // are another array's); named with --member it is not opened as the member, and the
    // recovery refuses to overwrite it, naming it, unless --force.
    let other: Vec<PathBuf> = (0..3)
        .map(|i| image(dir.path(), &format!("o{i}.img")))
        .collect();
    ok(&args(&["zapraid", "format", "--group", "16"], &other));
    m[3] = other[0].clone();
    let err = fails(&args(&["zapraid", "recover", "--quiet"], &m), 1);
    assert!(
        err.contains("member 3 zone 0 holds the header of member 0"),
        "{err}"
    );
    let err = fails(
        &args(&["zapraid", "recover", "--member", "3", "--quiet"], &m),
        1,
    );
    assert!(
        err.contains("o0.img holds data") && err.contains("--force"),
        "{err}"
    );
    // The refusals wrote nothing to the other array.
    assert!(ok(&args(&["zapraid", "check"], &other)).starts_with("clean:"));
    let text = ok(&args(
        &["zapraid", "recover", "--member", "3", "--quiet", "--force"],
        &m,
    ));
    assert!(text.contains("member 3 rebuilt in place"), "{text}");
    assert!(ok(&args(&["zapraid", "status"], &m)).contains("all 4 healthy"));
    assert!(ok(&args(&["zapraid", "check"], &m)).starts_with("clean:"));
    // An unknown member is a usage error.
    fails(&args(&["zapraid", "recover", "--member", "7"], &m), 2);
}
