//! `zonestack zapraid format|status|check` through the real binary on small images.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok, require, run};

/// `n` empty member images with room for ZapRAID's per-block metadata.
fn members(dir: &Path, n: usize) -> Vec<PathBuf> {
    common::member_images(dir, "z", n, &["--zones", "12", "--oob", "64"])
}

fn with_members<'a>(head: &[&'a str], m: &'a [PathBuf]) -> Vec<&'a str> {
    let mut args = head.to_vec();
    args.extend(m.iter().map(|p| p.to_str().expect("utf-8 path")));
    args
}

#[test]
fn format_status_and_check_a_volume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4);
    let text = ok(&with_members(&["zapraid", "format", "--group", "16"], &m));
    assert!(text.contains("k = 3 + m = 1"), "{text}");
    assert!(text.contains("groups of 16 stripes"), "{text}");
    let st = ok(&with_members(&["zapraid", "status"], &m));
    for want in ["write amplification", "collections", "index memory", "L2P"] {
        assert!(st.contains(want), "missing {want:?}: {st}");
    }
    let js = ok(&with_members(&["zapraid", "status", "--json"], &m));
    let v: serde_json::Value = serde_json::from_str(&js).expect("json");
    assert_eq!(v["k"], 3);
    assert_eq!(v["group"], 16);
    // The bound is the paper's formula, (k + m) S Z ceil(log2 G) bits (G = 16: 4 bits per
    // block), in whole 64-bit words per segment.
    let (s, z) = (
        v["stripes_per_segment"].as_u64().expect("S"),
        v["segments"].as_u64().expect("Z"),
    );
    assert_eq!(
        v["index_memory"]["stripe_table_bytes_max"].as_u64(),
        Some((4 * s * 4).div_ceil(64) * 8 * z),
        "{js}"
    );
    assert_eq!(
        v["index_memory"]["l2p_bytes"].as_u64(),
        Some(16 * v["size_bytes"].as_u64().expect("size") / 4096),
        "{js}"
    );
    let c = ok(&with_members(&["zapraid", "check"], &m));
    assert!(c.starts_with("clean:"), "{c}");
    // A second format over the array is refused without --force, naming the member.
    let err = fails(
        &with_members(&["zapraid", "format", "--group", "16"], &m),
        1,
    );
    assert!(err.contains("member 0") && err.contains("z0.img"), "{err}");
    assert!(err.contains("--force"), "{err}");
    ok(&with_members(
        &[
            "zapraid",
            "format",
            "--group",
            "16",
            "--force",
            "--mode",
            "zone-write",
        ],
        &m,
    ));
}

#[test]
fn format_names_what_is_wrong_with_the_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 3);
    let err = fails(
        &with_members(&["zapraid", "format", "--parity", "2"], &m),
        2,
    );
    assert!(err.contains("fewer than 2 data blocks"), "{err}");
    // A group of 256 stripes does not fit these small zones: the error says why.
    let err = fails(
        &with_members(&["zapraid", "format", "--group", "256"], &m),
        1,
    );
    assert!(err.contains("256"), "{err}");
    // Regression: the default group was 256 stripes whatever the members, so `zapraid
    // format` without --group failed on small members; it is now the whole segment there.
    let small = dir.path().join("small");
    std::fs::create_dir(&small).expect("mkdir");
    let text = ok(&with_members(&["zapraid", "format"], &members(&small, 3)));
    assert!(text.contains("groups of"), "{text}");
    let thin = dir.path().join("thin.img");
    ok(&[
        "device",
        "create",
        thin.to_str().expect("path"),
        "--zones",
        "12",
    ]);
    let mut m2 = m.clone();
    m2[2] = thin;
    let err = fails(
        &with_members(&["zapraid", "format", "--group", "16"], &m2),
        1,
    );
    assert!(err.contains("member 2"), "{err}");
}

#[test]
fn fail_records_a_member_failed_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4);
    ok(&with_members(&["zapraid", "format", "--group", "16"], &m));
    let text = ok(&with_members(&["zapraid", "fail", "--member", "1"], &m));
    assert!(text.contains("z1.img) recorded failed"), "{text}");
    let st = ok(&with_members(&["zapraid", "status"], &m));
    assert!(
        st.contains("degraded: member 1 (") && st.contains("z1.img) failed"),
        "{st}"
    );
    let js = ok(&with_members(&["zapraid", "status", "--json"], &m));
    let v: serde_json::Value = serde_json::from_str(&js).expect("json");
    assert_eq!(v["failed_members"], serde_json::json!([1]), "{js}");
    // Failing it again says so; failing a second member is refused (one parity block).
    let again = ok(&with_members(&["zapraid", "fail", "--member", "1"], &m));
    assert!(again.contains("already recorded failed"), "{again}");
    let err = fails(&with_members(&["zapraid", "fail", "--member", "3"], &m), 1);
    assert!(err.contains("z1.img) already failed"), "{err}");
    // A member named by its image path; an unknown one is a usage error.
    let path = m[1].to_str().expect("path").to_string();
    ok(&with_members(&["zapraid", "fail", "--member", &path], &m));
    fails(&with_members(&["zapraid", "fail", "--member", "9"], &m), 2);
    let c = ok(&with_members(&["zapraid", "check"], &m));
    assert!(c.starts_with("clean:"), "{c}");
}

#[test]
fn replace_rebuilds_a_member_onto_a_new_image_and_refuses_foreign_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4);
    ok(&with_members(&["zapraid", "format", "--group", "16"], &m));
    ok(&with_members(&["zapraid", "fail", "--member", "3"], &m));
    // An image holding another array's data is refused without --force, named.
    std::fs::create_dir_all(dir.path().join("o")).expect("mkdir");
    let foreign: Vec<PathBuf> = (0..3)
        .map(|i| {
            let p = dir.path().join("o").join(format!("f{i}.img"));
            let ps = p.to_str().expect("path");
            ok(&["device", "create", ps, "--zones", "12", "--oob", "64"]);
            p
        })
        .collect();
    ok(&with_members(
        &["zapraid", "format", "--group", "16"],
        &foreign,
    ));
    let f0 = foreign[0].to_str().expect("path");
    let err = fails(
        &with_members(&["zapraid", "replace", "--member", "3", "--with", f0], &m),
        1,
    );
    assert!(
        err.contains("f0.img holds data") && err.contains("--force"),
        "{err}"
    );
    // A member of the array is not a replacement.
    let m1 = m[1].to_str().expect("path");
    fails(
        &with_members(&["zapraid", "replace", "--member", "3", "--with", m1], &m),
        2,
    );
    // --quiet prints the result only; the new image then stands in for member 3.
    let text = ok(&with_members(
        &[
            "zapraid", "replace", "--member", "3", "--with", f0, "--force", "--quiet",
        ],
        &m,
    ));
    assert!(!text.contains("recovering member"), "{text}");
    assert!(text.contains("member 3 rebuilt onto"), "{text}");
    let mut m2 = m.clone();
    m2[3] = foreign[0].clone();
    let st = ok(&with_members(&["zapraid", "status"], &m2));
    assert!(st.contains("all 4 healthy"), "{st}");
    let c = ok(&with_members(&["zapraid", "check"], &m2));
    assert!(c.starts_with("clean:"), "{c}");
}

#[test]
fn replace_draws_a_progress_bar_on_a_terminal() {
    // `script` runs the command on a pseudo-terminal, as a user at a shell would.
    require("script", "bsdutils");
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4);
    ok(&with_members(&["zapraid", "format", "--group", "16"], &m));
    ok(&with_members(&["zapraid", "fail", "--member", "0"], &m));
    let new = dir.path().join("new.img");
    let ns = new.to_str().expect("path");
    ok(&["device", "create", ns, "--zones", "12", "--oob", "64"]);
    let mut cmd = format!(
        "{} zapraid replace --member 0 --with {ns}",
        env!("CARGO_BIN_EXE_zonestack")
    );
    for p in &m {
        cmd += &format!(" {}", p.to_str().expect("path"));
    }
    let out = run(std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]));
    assert!(out.contains("stripes rebuilt"), "no progress bar: {out}");
    assert!(out.contains("100%"), "{out}");
    // A bar, not the plain lines of a pipe.
    assert!(!out.contains("recovering member 0:"), "{out}");
    assert!(out.contains("the array is healthy"), "{out}");
}
