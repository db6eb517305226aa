//! An image with no FTL volume: `ftl mount|check|stats` name `zonestack ftl format`, and
//! `serve --device` says that it formatted the empty image.

mod common;

use common::{fails, ok};

#[path = "common/serve.rs"]
mod serve;
use serve::Served;

// The bug this guards against: on an unformatted image these printed only "no checkpoint
// here (bad magic)", and serve formatted an empty image without a word.
#[test]
fn an_unformatted_image_names_the_format_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("raw.img");
    let img = img.to_str().expect("utf-8");
    ok(&["device", "create", img, "--zones", "32"]);
    for sub in ["mount", "check", "stats"] {
        let err = fails(&["ftl", sub, img], 1);
        assert!(
            err.contains("holds no FTL volume") && err.contains("zonestack ftl format"),
            "ftl {sub}: {err}"
        );
    }
    let sock = dir.path().join("s.sock");
    let listen = format!("unix:{}", sock.display());
    let served = Served::start(&["serve", "--device", img, "--op", "25", "--listen", &listen]);
    assert!(
        served
            .started
            .contains("it was empty: formatted a new volume"),
        "{}",
        served.started
    );
    let (status, _, err) = served.terminate();
    assert!(status.success(), "{err}");
    ok(&["ftl", "stats", img]);
}
