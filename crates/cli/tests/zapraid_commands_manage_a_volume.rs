//! `zonestack zapraid format|status|check` through the real binary on small images.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok};

/// `n` empty member images with room for ZapRAID's per-block metadata.
fn members(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("z{i}.img"));
            let ps = p.to_str().expect("utf-8 path");
            ok(&["device", "create", ps, "--zones", "12", "--oob", "64"]);
            p
        })
        .collect()
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
    assert!(
        v["index_memory"]["stripe_table_bytes_max"].as_u64() > Some(0),
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
    // The default group of 256 stripes does not fit these small zones: the error says why.
    let err = fails(&with_members(&["zapraid", "format"], &m), 1);
    assert!(err.contains("256"), "{err}");
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
