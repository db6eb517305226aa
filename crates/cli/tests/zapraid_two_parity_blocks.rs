//! `zonestack zapraid create --parity 2` (Reed-Solomon): a 3 + 2 array runs with two members
//! failed (recorded, one of them missing), refuses a third, and rebuilds both onto new images.

mod common;

use std::path::Path;

use common::{fails, ok};

fn image(dir: &Path, name: &str) -> String {
    let p = dir.join(name);
    let ps = p.to_str().expect("utf-8 path").to_string();
    ok(&["device", "create", &ps, "--zones", "12", "--oob", "64"]);
    ps
}

fn args<'a>(head: &[&'a str], m: &'a [String]) -> Vec<&'a str> {
    let mut a = head.to_vec();
    a.extend(m.iter().map(String::as_str));
    a
}

#[test]
fn two_members_fail_and_are_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m: Vec<String> = (0..5)
        .map(|i| image(dir.path(), &format!("r{i}.img")))
        .collect();
    let text = ok(&args(
        &["zapraid", "create", "--parity", "2", "--group", "16"],
        &m,
    ));
    assert!(text.contains("k = 3 + m = 2"), "{text}");
    let t = ok(&args(&["zapraid", "fail", "--member", "0"], &m));
    assert!(t.contains("recorded failed"), "{t}");
    let mut gone = m.clone();
    gone[3] = "missing".into();
    let st = ok(&args(&["zapraid", "status"], &gone));
    assert!(
        st.contains("degraded:") && st.contains("member 3 (missing) failed"),
        "{st}"
    );
    assert!(st.contains(&format!("member 0 ({}) failed", m[0])), "{st}");
    let c = ok(&args(&["zapraid", "check"], &gone));
    assert!(c.starts_with("clean:"), "{c}");
    // A third failure would leave stripes with fewer than k blocks.
    let err = fails(&args(&["zapraid", "fail", "--member", "1"], &gone), 1);
    assert!(err.contains("2 parity block(s)"), "{err}");

    let new0 = image(dir.path(), "n0.img");
    let new3 = image(dir.path(), "n3.img");
    ok(&args(
        &[
            "zapraid", "replace", "--member", "0", "--with", &new0, "--quiet",
        ],
        &gone,
    ));
    let mut half = gone.clone();
    half[0] = new0.clone();
    ok(&args(
        &[
            "zapraid", "replace", "--member", "3", "--with", &new3, "--quiet",
        ],
        &half,
    ));
    let mut healed = half.clone();
    healed[3] = new3;
    let st = ok(&args(&["zapraid", "status"], &healed));
    assert!(st.contains("all 5 healthy"), "{st}");
    let c = ok(&args(&["zapraid", "check"], &healed));
    assert!(c.starts_with("clean:"), "{c}");
}
