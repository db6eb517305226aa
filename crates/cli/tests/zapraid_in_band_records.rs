//! `zonestack zapraid format` over images without per-block metadata: the array keeps its
//! block records in-band (group summaries), says so, and status, fail and check work on it;
//! `--in-band` chooses it on images that have metadata.

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok};

fn members(dir: &Path, n: usize, oob: &str) -> Vec<PathBuf> {
    common::member_images(dir, "z", n, &["--zones", "12", "--oob", oob])
}

fn with_members<'a>(head: &[&'a str], m: &'a [PathBuf]) -> Vec<&'a str> {
    let mut args = head.to_vec();
    args.extend(m.iter().map(|p| p.to_str().expect("utf-8 path")));
    args
}

#[test]
fn members_without_metadata_are_formatted_with_in_band_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4, "0");
    // A group larger than a quarter of a segment is refused, naming the limit.
    let err = fails(
        &with_members(&["zapraid", "format", "--group", "100"], &m),
        1,
    );
    assert!(err.contains("in-band") && err.contains("2..="), "{err}");
    let text = ok(&with_members(&["zapraid", "format"], &m));
    assert!(text.contains("block records in-band"), "{text}");
    let js = ok(&with_members(&["zapraid", "status", "--json"], &m));
    let v: serde_json::Value = serde_json::from_str(&js).expect("json");
    assert_eq!(v["records"], "in-band", "{js}");
    let group = v["group"].as_u64().expect("group");
    assert!((2..=32).contains(&group), "{js}");
    let c = ok(&with_members(&["zapraid", "check"], &m));
    assert!(c.starts_with("clean:"), "{c}");
    ok(&with_members(&["zapraid", "fail", "--member", "2"], &m));
    let st = ok(&with_members(&["zapraid", "status"], &m));
    assert!(st.contains("degraded: member 2 ("), "{st}");
    let c = ok(&with_members(&["zapraid", "check"], &m));
    assert!(c.starts_with("clean:"), "{c}");
}

#[test]
fn in_band_is_chosen_on_members_with_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members(dir.path(), 4, "64");
    let text = ok(&with_members(&["zapraid", "format", "--group", "16"], &m));
    assert!(
        text.contains("block records in per-block metadata"),
        "{text}"
    );
    let text = ok(&with_members(
        &["zapraid", "format", "--force", "--in-band", "--group", "4"],
        &m,
    ));
    assert!(text.contains("block records in-band"), "{text}");
    let js = ok(&with_members(&["zapraid", "status", "--json"], &m));
    let v: serde_json::Value = serde_json::from_str(&js).expect("json");
    assert_eq!(
        (v["records"].as_str(), v["group"].as_u64()),
        (Some("in-band"), Some(4)),
        "{js}"
    );
}
